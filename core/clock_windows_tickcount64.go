//go:build windows && zloopgo_tickcount64

// nanotime on Windows for CPython 3.10-3.12, built with the
// zloopgo_tickcount64 tag (setup.py and scripts/windows set it from the
// interpreter's version; capi/clock.c refuses a build whose tag and
// Python.h disagree): GetTickCount64, which time.monotonic() reads there
// (Python/pytime.c, py_get_monotonic_clock, before 3.13 moved it to
// QueryPerformanceCounter: clock_windows.go). Milliseconds since boot,
// converted to nanoseconds as CPython converts them (ticks * 10^6).

package core

import "golang.org/x/sys/windows"

var getTickCount64 = windows.NewLazySystemDLL("kernel32.dll").NewProc("GetTickCount64")

// nanotime is GetTickCount64's milliseconds in nanoseconds.
func nanotime() int64 {
	// the ULONGLONG result comes back whole in the return register (64-bit only)
	ms, _, _ := getTickCount64.Call()
	return int64(ms) * 1e6
}
