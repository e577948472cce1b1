//go:build windows

// The error codes the adapter's Go side reports to C on Windows: Win32
// and Winsock codes (what core/iocp's errors carry), which zl_sys_raise
// (capi/platform_windows.c) raises as OSError with winerror set. The link
// takes Winsock (ws2_32), whose calls capi/platform_windows.h makes.

package main

// #cgo LDFLAGS: -lws2_32
import "C"

import "golang.org/x/sys/windows"

// errNoMemory means C could not grow a buffer the engine hands over.
var errNoMemory error = windows.ERROR_NOT_ENOUGH_MEMORY

// errUnknown is what C is told for an error that carries no code.
const errUnknown = windows.ERROR_GEN_FAILURE
