// The Go half of the adapter: it gives each C loop object a core.Engine and
// implements core.Host by reading the memory the C half shares (bridge.h).
// It never touches a Python object; C owns them and hands out integers:
// descriptor numbers as the descriptors' tokens, timer slot indices and
// lookup numbers (core's DescriptorToken, TimerSlot and RequestID). Per
// iteration it calls C once (zl_dispatch, which may run the batches of
// further iterations alone: core.Lookahead), plus once before a wait that
// may block (zl_release; zl_dispatch takes the GIL back).

package main

/*
#include "bridge.h"
*/
import "C"

import (
	"errors"
	"math"
	"syscall"
	"unsafe"

	"github.com/zloopgo/zloopgo/capi/waker"
	"github.com/zloopgo/zloopgo/core"
)

// errPython means a Python exception is set and Run must return to C.
var errPython = errors.New("python exception pending")

// host implements core.Host for one C loop object.
type host struct {
	loop      C.uintptr_t // the C loop object, opaque here
	shared    *C.zl_shared
	callbacks *C.uint64_t // the loop's callback count, while a trace runs (stats.go)
}

func (h *host) TakeNewTimers() []core.NewTimer {
	n := int(h.shared.new_timers_len)
	if n == 0 {
		return nil
	}
	h.shared.new_timers_len = 0
	h.shared.new_timers_first = C.double(math.Inf(1))
	return unsafe.Slice((*core.NewTimer)(unsafe.Pointer(h.shared.new_timers)), n)
}

func (h *host) slot(slot core.TimerSlot) *C.zl_timer_slot {
	return (*C.zl_timer_slot)(unsafe.Add(unsafe.Pointer(h.shared.slots), uintptr(slot)*C.sizeof_zl_timer_slot))
}

func (h *host) TimerCancelled(slot core.TimerSlot) bool { return h.slot(slot).cancelled != 0 }

func (h *host) CancelledTimers() int { return int(h.shared.cancelled_timers) }

func (h *host) MustNotBlock() bool {
	return h.shared.ready_len > 0 || h.shared.stopping != 0
}

func (h *host) Stopping() bool { return h.shared.stopping != 0 }

func (h *host) Quiet() bool { return h.shared.quiet != 0 }

func (h *host) Clock() (float64, bool) {
	if h.shared.faked == 0 {
		return 0, false
	}
	return float64(h.shared.fake_now), true
}

func (h *host) Release()   { C.zl_release(h.loop) }
func (h *host) Reacquire() { C.zl_reacquire(h.loop) }

// EventBuffer makes the engine write ready events straight into C memory,
// grown to n if C can (else as it was).
func (h *host) EventBuffer(n int) []core.Event {
	if int64(n) > int64(h.shared.events_cap) {
		C.zl_grow_events(h.loop, C.int64_t(n))
	}
	return unsafe.Slice((*core.Event)(unsafe.Pointer(h.shared.events)), int(h.shared.events_cap))
}

func (h *host) Dispatch(events []core.Event, timers []core.TimerSlot, done []core.Completion, reacquire bool, ahead core.Lookahead) (core.Alone, error) {
	grown := int64(len(timers)) <= int64(h.shared.timers_out_cap) ||
		C.zl_grow_timers_out(h.loop, C.int64_t(len(timers))) == 0
	grown = grown && (int64(len(done)) <= int64(h.shared.done_cap) ||
		C.zl_grow_done(h.loop, C.int64_t(len(done))) == 0)
	if !grown {
		if reacquire {
			h.Reacquire()
		}
		return core.Alone{}, errNoMemory
	}
	if len(timers) > 0 {
		copy(unsafe.Slice((*core.TimerSlot)(unsafe.Pointer(h.shared.timers_out)), len(timers)), timers)
	}
	if len(done) > 0 {
		copy(unsafe.Slice((*core.Completion)(unsafe.Pointer(h.shared.done)), len(done)), done)
	}
	again := C.int(0)
	if reacquire {
		again = 1
	}
	h.shared.next_timer = C.double(ahead.NextTimer)
	h.shared.yield_by = C.double(ahead.YieldBy)
	h.shared.alone_max = C.int64_t(ahead.Batches)
	// the one kind capi/platform.h's pollers use (platform_linux.h); with
	// another, C leaves every wait and change of interest to the engine
	h.shared.poller_fd = -1
	if ahead.Peek.Kind == core.PeekEpoll {
		h.shared.poller_fd = C.int32_t(ahead.Peek.Handle)
	}
	rc := C.zl_dispatch(h.loop, C.int64_t(len(events)), C.int64_t(len(timers)), C.int64_t(len(done)), again,
		(*C.uint32_t)(unsafe.Pointer(ahead.Posted)))
	alone := core.Alone{Batches: int(h.shared.alone_ran), Polled: int(h.shared.alone_polled),
		Events: int(h.shared.alone_events), LookedEmpty: h.shared.alone_looked_empty != 0,
		Watched: int(h.shared.watch_delta)}
	if rc != 0 {
		return alone, errPython
	}
	return alone, nil
}

// loopEngine is what a C loop's engine id refers to (capi/engines.go).
type loopEngine struct {
	host   host
	engine *core.Engine
	waker  waker.Waker // C memory, which C's loop points at until it closes
}

// errnoOf turns an error into the error code C reports (zl_sys_raise's),
// errUnknown if it has none.
func errnoOf(err error) C.int {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return C.int(errno)
	}
	return C.int(errUnknown)
}

// zlgo_engine_new opens an engine for a C loop. It returns its id, or 0
// with *errOut set to an errno.
//
//export zlgo_engine_new
func zlgo_engine_new(loop C.uintptr_t, shared *C.zl_shared, resolution C.double, wakerOut *unsafe.Pointer, errOut *C.int) C.uintptr_t {
	le := &loopEngine{host: host{loop: loop, shared: shared}}
	e, err := core.NewEngine(&le.host, float64(resolution))
	if err != nil {
		*errOut = errnoOf(err)
		return 0
	}
	// call_soon_threadsafe wakes the loop from C, on threads Go may never
	// have seen, through the backend's waker (capi/waker).
	le.engine = e
	le.waker = waker.New(e.Reactor().WakeHandle())
	*wakerOut = le.waker.Pointer()
	return addEngine(le)
}

// zlgo_engine_run iterates until stop. It returns 0, -1 when a Python
// exception is set, or a positive errno when waiting for events failed.
//
//export zlgo_engine_run
func zlgo_engine_run(id C.uintptr_t) C.int {
	err := mustEngineFor(id).engine.Run()
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errPython):
		return -1
	default:
		return errnoOf(err)
	}
}

// zlgo_engine_close releases the engine's reactor. The C loop has already
// released every timer it owned, so the heap's slots are simply dropped.
//
//export zlgo_engine_close
func zlgo_engine_close(id C.uintptr_t) {
	le := mustEngineFor(id)
	removeEngine(id)
	le.engine.Reset()
	orphans, _ := le.engine.Close()
	freeOrphans(orphans)
	le.waker.Free()
}

// zlgo_watch changes what descriptor fd is watched for, from interest old
// to interest new (0 meaning not watched). It returns 0 or an errno, in
// which case nothing changed — except for a removal (new 0), after which
// fd counts as not watched whatever the kernel said.
//
//export zlgo_watch
func zlgo_watch(id C.uintptr_t, fd C.int, old, new C.uint32_t) C.int {
	le := mustEngineFor(id)
	e := le.engine
	r := e.Reactor()
	before := e.Watched()
	var err error
	switch {
	case old == 0 && new == 0:
		return 0
	case old == 0:
		if err = r.Register(int(fd), core.DescriptorToken(fd), core.Interest(new)); err == nil {
			e.Watch(1)
		}
	case new == 0:
		err = r.Deregister(int(fd))
		e.Watch(-1)
	default:
		err = r.Reregister(int(fd), core.DescriptorToken(fd), core.Interest(new))
	}
	le.host.shared.watched += C.int64_t(e.Watched() - before)
	if err != nil {
		return errnoOf(err)
	}
	return 0
}
