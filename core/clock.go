// The monotonic clock the engine compares timer deadlines with. It must be
// the very clock CPython's time.monotonic() reads, because the adapter
// computes deadlines from loop.time(); both read CLOCK_MONOTONIC, except on
// macOS, where both read mach_absolute_time() (capi/clock.c reads the same
// clock as CLOCK_UPTIME_RAW).

package core

import (
	_ "unsafe" // for go:linkname
)

// nanotime is the Go runtime's monotonic reading (on Linux through the
// vDSO like CPython's). time.Now() would do the same work but reports the
// reading relative to process start, which cannot be compared with
// time.monotonic().
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Now returns the monotonic clock in seconds, computed the way CPython's
// time.monotonic() converts its nanosecond reading.
func Now() float64 { return float64(nanotime()) / 1e9 }
