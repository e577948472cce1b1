// The monotonic clock the engine compares timer deadlines with. It must be
// the very clock CPython's time.monotonic() reads, because the adapter
// computes deadlines from loop.time(); both read CLOCK_MONOTONIC, except on
// macOS, where both read mach_absolute_time() (capi/clock.c reads the same
// clock as CLOCK_UPTIME_RAW), and on Windows, where both read
// QueryPerformanceCounter (nanotime: clock_runtime.go, clock_windows.go).

package core

// Now returns the monotonic clock in seconds, computed the way CPython's
// time.monotonic() converts its nanosecond reading.
func Now() float64 { return float64(nanotime()) / 1e9 }
