//go:build windows && zloopgo_tickcount64

// The build tag zloopgo_tickcount64, for CPython 3.10-3.12 on Windows,
// whose time.monotonic() reads GetTickCount64 rather than
// QueryPerformanceCounter: it defines ZL_SYS_CLOCK_TICKCOUNT64 for the C
// adapter (capi/platform_windows.h's clock), as the same tag picks
// core/clock_windows_tickcount64.go for the engine, so that loop.time()
// and the engine's timer deadlines read one clock. capi/clock.c refuses
// to compile when the tag and the Python.h it builds against disagree.
// It knows nothing else.

package main

// #cgo CFLAGS: -DZL_SYS_CLOCK_TICKCOUNT64
import "C"
