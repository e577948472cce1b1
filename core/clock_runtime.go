//go:build !windows

// nanotime on the systems where the Go runtime's monotonic reading is
// CPython's time.monotonic() clock (clock.go).

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
