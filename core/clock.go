// The monotonic clock the engine compares timer deadlines with. It must be
// the very clock CPython's time.monotonic() reads, because the adapter
// computes deadlines from loop.time(); both read CLOCK_MONOTONIC, except on
// macOS, where both read mach_absolute_time() (capi/clock.c reads the same
// clock as CLOCK_UPTIME_RAW), and on Windows, where both read
// QueryPerformanceCounter from CPython 3.13 on and GetTickCount64 before
// (nanotime: clock_runtime.go, clock_windows.go,
// clock_windows_tickcount64.go, the latter chosen by the
// zloopgo_tickcount64 build tag).

package core

// Now returns the monotonic clock in seconds, computed the way CPython's
// time.monotonic() converts its nanosecond reading.
func Now() float64 { return float64(nanotime()) / 1e9 }
