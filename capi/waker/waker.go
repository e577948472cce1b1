// Package waker hands the C adapter a waker for the engine's reactor: a
// small C structure, in C memory, that zl_waker_wake (waker.c) uses to
// wake a blocked wait from any thread without calling into Go. The
// adapter's C keeps it as an opaque pointer (capi/zl.h); its Go side makes
// it from the backend's poll.WakeHandle when a loop opens and frees it
// when the loop closes.
//
// The C lives in this package so that it can be tested on its own against
// every backend (waker_test.go); it knows nothing of Python or loops.
package waker

/*
#include <stdlib.h>
#include "waker.h"
*/
import "C"

import (
	"unsafe"

	"github.com/zloopgo/zloopgo/core/poll"
)

// Waker is a zl_waker in C memory.
type Waker struct{ c *C.zl_waker }

// New makes the C waker of the backend h describes.
func New(h poll.WakeHandle) Waker {
	w := (*C.zl_waker)(C.calloc(1, C.sizeof_zl_waker))
	if w == nil {
		panic("waker: out of memory")
	}
	w.kind = C.uint32_t(h.Kind)
	w.handle = C.uintptr_t(h.Handle)
	w.ident = C.uintptr_t(h.Ident)
	return Waker{w}
}

// Pointer is what C passes to zl_waker_wake; nil for the zero Waker.
func (w Waker) Pointer() unsafe.Pointer { return unsafe.Pointer(w.c) }

// Wake does what C does: a cgo call into zl_waker_wake, from this thread.
func (w Waker) Wake() { C.zl_waker_wake(unsafe.Pointer(w.c)) }

// Free releases the structure; C must no longer use it.
func (w Waker) Free() { C.free(unsafe.Pointer(w.c)) }

// The kinds of waker.h equal poll.WakeKind's: each constant is (c - g) +
// (g - c) in uintptr, which fails this package's compile ("overflows
// uintptr") when they differ.
const (
	_ = (uintptr(C.ZL_WAKE_EVENTFD) - uintptr(poll.WakeEventfd)) + (uintptr(poll.WakeEventfd) - uintptr(C.ZL_WAKE_EVENTFD))
	_ = (uintptr(C.ZL_WAKE_KQUEUE_USER) - uintptr(poll.WakeKqueueUser)) + (uintptr(poll.WakeKqueueUser) - uintptr(C.ZL_WAKE_KQUEUE_USER))
	_ = (uintptr(C.ZL_WAKE_IOCP) - uintptr(poll.WakeIOCP)) + (uintptr(poll.WakeIOCP) - uintptr(C.ZL_WAKE_IOCP))
)
