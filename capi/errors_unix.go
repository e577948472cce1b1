//go:build unix

// The error codes the adapter's Go side reports to C on POSIX systems:
// errno values, which zl_sys_raise (capi/platform_unix.c) raises.

package main

import "syscall"

// errNoMemory means C could not grow a buffer the engine hands over.
var errNoMemory error = syscall.ENOMEM

// errUnknown is what C is told for an error that carries no code.
const errUnknown = syscall.EIO
