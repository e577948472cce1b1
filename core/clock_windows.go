//go:build windows && !zloopgo_tickcount64

// nanotime on Windows for CPython 3.13 and newer: QueryPerformanceCounter,
// which time.monotonic() reads there (Python/pytime.c,
// py_get_monotonic_clock; 3.10-3.12 read GetTickCount64 instead:
// clock_windows_tickcount64.go, chosen by the zloopgo_tickcount64 build
// tag). The Go runtime's own reading is the shared interrupt time, another
// clock with another origin, so the engine cannot use it to compare
// deadlines computed from loop.time().

package core

import (
	"unsafe"

	"golang.org/x/sys/windows"
)

var (
	queryPerformanceCounter = windows.NewLazySystemDLL("kernel32.dll").NewProc("QueryPerformanceCounter")
	performanceFrequency    = frequency()
)

// frequency is QueryPerformanceFrequency's answer, fixed at boot.
func frequency() int64 {
	var f int64
	proc := windows.NewLazySystemDLL("kernel32.dll").NewProc("QueryPerformanceFrequency")
	if ok, _, err := proc.Call(uintptr(unsafe.Pointer(&f))); ok == 0 {
		panic("core: QueryPerformanceFrequency: " + err.Error())
	}
	return f
}

// nanotime converts the counter to nanoseconds as CPython does (whole
// seconds, then the remainder, so that the product cannot overflow).
func nanotime() int64 {
	var ticks int64
	// the pointer converted in the call itself, as syscalls require
	queryPerformanceCounter.Call(uintptr(unsafe.Pointer(&ticks)))
	f := performanceFrequency
	return ticks/f*1e9 + ticks%f*1e9/f
}
