// A fuzz target for the run-once engine and the memory it shares with its
// host: the new-timer buffer, the cancelled flags, the event buffer and the
// timer slots handed back through Dispatch. The input is decoded into a
// sequence of operations on a fake host that behaves like the C adapter
// (capi/timers.c): slots are indices reused LIFO once handed back, the
// new-timer buffer is reused from index 0 and reallocated when it grows, a
// cancelled timer counts until its slot comes back.
//
// No timing is involved: deadlines are either in the past (due) or at least
// 100 s in the future (not due) relative to Now() when the input starts, and
// the fake reactor never waits.
//
// Run briefly:    go test -run '^$' -fuzz FuzzEngineAgainstModel -fuzztime 10s ./core/
// Run for longer: go test -run '^$' -fuzz FuzzEngineAgainstModel -fuzztime 30m ./core/

package core_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/zloopgo/zloopgo/core"
)

// Fuzz operations: one opcode byte (taken modulo fzOps) and one parameter
// byte each.
const (
	fzSchedPast    = iota // schedule a due timer: base - fzPast[p]
	fzSchedFuture         // schedule a timer that is not due: base + fzFuture[p]
	fzSchedSpecial        // schedule at fzSpecial[p] (NaN, ±Inf, negative, ...)
	fzCancel              // cancel the p-th timer not yet handed back
	fzRun                 // one iteration; p: events, ready work, watched fds, quiet batch
	fzSchedMany           // schedule 8*(p%16+1) timers, mostly not due
	fzCancelMany          // cancel every (p%3+1)-th timer not yet handed back
	fzRealloc             // move the new-timer buffer, poisoning the old one
	fzRunMany             // p%4+1 iterations without events
	fzOps
)

// Offsets from the input's base time. Repeats make equal deadlines likely.
var (
	fzPast   = []float64{1e-3, 1, 1, 10, 1e3, 1e6}
	fzFuture = []float64{100, 100, 200, 1e3, 86400 - 1, 86400, 2 * 86400, 1e9}
	// fzSameAsLast stands for the deadline of the last timer scheduled.
	fzSameAsLast = math.Float64frombits(0x7ff4_0000_0000_0001) // a NaN payload
	fzSpecial    = []float64{
		math.NaN(), math.Float64frombits(0xfff8_0000_0000_0042), // NaNs
		math.Inf(1), math.Inf(-1), -1, 0, math.Copysign(0, -1), 5e-324,
		-1e300, 1e300, math.MaxFloat64, fzSameAsLast, fzSameAsLast,
	}
	fzResolutions = []float64{1e-9, 1e-6, 1e-3, 1}
)

const (
	fzPoison    = core.TimerSlot(0xdead_beef_dead_beef)
	fzMaxTimers = 256
	// fzMaxOps bounds an input's cost: the fuzzer minimizes every new
	// interesting input in O(len²) runs, during which it makes no progress.
	fzMaxOps = 64
)

// fzTimer is one timer instance; its slot may be reused after it is
// handed back.
type fzTimer struct {
	seq       int // scheduling order
	when      float64
	key       float64 // when, with NaN as -Inf (the heap's order)
	slot      core.TimerSlot
	taken     bool // given to the engine by TakeNewTimers
	returned  bool // handed back through Dispatch or Reset
	cancelled bool
	early     bool // cancelled before the engine took it
}

func (tm *fzTimer) due(base float64) bool { return tm.key < base }

func fzLess(a, b *fzTimer) int {
	switch {
	case a.key < b.key:
		return -1
	case a.key > b.key:
		return 1
	}
	return a.seq - b.seq
}

// fzHost plays the C adapter's part and checks the engine's side of the
// contract on every call.
type fzHost struct {
	t    *testing.T
	base float64 // Now() when the input started; due means before it
	res  float64

	timers    []*fzTimer       // every instance, in scheduling order
	held      []*fzTimer       // by slot: taken by the engine, not handed back
	free      []core.TimerSlot // LIFO, as capi's slot free list
	pending   []*fzTimer       // scheduled, not yet taken
	ntBuf     []core.NewTimer  // the shared new-timer buffer
	ntLen     int
	cancelled int // cancelled and not handed back (zl_shared.cancelled_timers)
	lastWhen  float64

	events  []core.Event // host-owned event buffer
	ready   bool
	quiet   bool // the last batch could not have made a descriptor ready
	faked   bool // never set: the model checks deadlines against Now()
	fakeNow float64
	watched int

	// per iteration
	inIter     bool
	t0         float64 // Now() before RunOnce
	taken      []*fzTimer
	released   bool
	waited     bool // a wait that found events, or one that may block, was made
	zeroEmpty  bool // a zero-timeout wait (or a look) found nothing
	waitTO     time.Duration
	batch      []core.Event // what the reactor wrote
	dispatched bool
}

func fzPoisonEvent(i int) core.Event {
	return core.Event{Token: core.DescriptorToken(fzPoison) ^ core.DescriptorToken(i), Mask: 0xffff_ffff}
}

func (h *fzHost) schedule(when float64) {
	if len(h.timers) >= fzMaxTimers {
		return
	}
	if math.Float64bits(when) == math.Float64bits(fzSameAsLast) {
		when = h.lastWhen
	}
	h.lastWhen = when
	var slot core.TimerSlot
	if n := len(h.free); n > 0 {
		slot, h.free = h.free[n-1], h.free[:n-1]
	} else {
		slot = core.TimerSlot(len(h.held))
		h.held = append(h.held, nil)
	}
	key := when
	if math.IsNaN(key) {
		key = math.Inf(-1)
	}
	tm := &fzTimer{seq: len(h.timers), when: when, key: key, slot: slot}
	h.timers = append(h.timers, tm)
	h.pending = append(h.pending, tm)
	if h.ntLen == len(h.ntBuf) {
		h.realloc(2 * len(h.ntBuf))
	}
	h.ntBuf[h.ntLen] = core.NewTimer{When: when, Slot: slot}
	h.ntLen++
}

// realloc moves the new-timer buffer, as PyMem_Realloc may, and poisons
// the old memory.
func (h *fzHost) realloc(size int) {
	nb := make([]core.NewTimer, max(size, 1))
	copy(nb, h.ntBuf[:h.ntLen])
	fzPoisonTimers(h.ntBuf)
	h.ntBuf = nb
}

func fzPoisonTimers(b []core.NewTimer) {
	for i := range b {
		b[i] = core.NewTimer{When: math.Inf(-1), Slot: fzPoison}
	}
}

// live lists the timers not yet handed back and not cancelled.
func (h *fzHost) live() []*fzTimer {
	var out []*fzTimer
	for _, tm := range h.timers {
		if !tm.returned && !tm.cancelled {
			out = append(out, tm)
		}
	}
	return out
}

func (h *fzHost) cancel(tm *fzTimer) {
	if tm.returned || tm.cancelled {
		return // zl_timer_cancelled: no longer scheduled, nothing to do
	}
	tm.cancelled = true
	tm.early = !tm.taken
	h.cancelled++
}

// holder is the timer the engine holds under slot, or nil.
func (h *fzHost) holder(slot core.TimerSlot) *fzTimer {
	if slot >= core.TimerSlot(len(h.held)) {
		return nil
	}
	return h.held[slot]
}

func (h *fzHost) TakeNewTimers() []core.NewTimer {
	if !h.inIter {
		h.t.Fatal("TakeNewTimers called outside RunOnce")
	}
	n := h.ntLen
	h.ntLen = 0
	fzPoisonTimers(h.ntBuf[n:])
	for _, tm := range h.pending {
		tm.taken = true
		h.held[tm.slot] = tm
	}
	h.taken = h.pending
	h.pending = nil
	if n == 0 {
		return nil
	}
	return h.ntBuf[:n]
}

func (h *fzHost) TimerCancelled(slot core.TimerSlot) bool {
	tm := h.holder(slot)
	if tm == nil {
		h.t.Fatalf("TimerCancelled(%#x): the engine does not hold that slot (poisoned: %v)", slot, slot == fzPoison)
	}
	return tm.cancelled
}

func (h *fzHost) CancelledTimers() int   { return h.cancelled }
func (h *fzHost) MustNotBlock() bool     { return h.ready }
func (h *fzHost) Quiet() bool            { return h.quiet }
func (h *fzHost) Clock() (float64, bool) { return h.fakeNow, h.faked }
func (h *fzHost) Stopping() bool         { return false }

// EventBuffer never grows: the engine must go on with the buffer it has.
func (h *fzHost) EventBuffer(int) []core.Event {
	return h.events
}

func (h *fzHost) Release() {
	if h.released || h.waited {
		h.t.Fatalf("Release called twice or after the wait (released %v, waited %v)", h.released, h.waited)
	}
	if h.zeroEmpty && h.zeroExpected(core.Now()) {
		h.t.Fatal("Release after a zero-timeout wait the iteration wanted")
	}
	h.released = true
}

func (h *fzHost) Reacquire() { h.t.Fatal("Reacquire called although no wait failed") }

// earliest is the earliest live timer the engine holds.
func (h *fzHost) earliest() *fzTimer {
	var best *fzTimer
	for _, tm := range h.held {
		if tm != nil && !tm.cancelled && (best == nil || fzLess(tm, best) < 0) {
			best = tm
		}
	}
	return best
}

// checkTimeout checks a wait's timeout against the model. tw is Now() at
// the wait (the engine read the clock between h.t0 and tw).
func (h *fzHost) checkTimeout(timeout time.Duration, tw float64) {
	top := h.earliest()
	switch {
	case h.ready:
		if timeout != 0 {
			h.t.Fatalf("timeout %v with ready work, want 0", timeout)
		}
	case top == nil:
		if timeout >= 0 {
			h.t.Fatalf("timeout %v with no live timer, want forever (< 0)", timeout)
		}
	case top.due(h.base):
		if timeout != 0 {
			h.t.Fatalf("timeout %v with a due timer (deadline %v, now %v), want 0", timeout, top.when, tw)
		}
	default:
		maxS := core.MaxTimeout.Seconds()
		lo := math.Min(top.key-tw, maxS) - 1e-6
		hi := math.Min(top.key-h.t0+h.res, maxS) + 1e-6
		if s := timeout.Seconds(); timeout < 0 || s < lo || s > hi {
			h.t.Fatalf("timeout %v for earliest live deadline %v (now %v..%v), want %vs..%vs", timeout, top.key, h.t0, tw, lo, hi)
		}
	}
}

func (h *fzHost) Dispatch(events []core.Event, timers []core.TimerSlot, done []core.Completion, reacquire bool, ahead core.Lookahead) (core.Alone, error) {
	if !h.inIter || h.dispatched {
		h.t.Fatal("Dispatch called outside RunOnce or twice in one iteration")
	}
	h.dispatched = true
	if reacquire != h.released {
		h.t.Fatalf("Dispatch(reacquire=%v) after Release called: %v", reacquire, h.released)
	}
	if !h.waited && h.zeroEmpty {
		// A zero-timeout wait found nothing and no blocking one followed:
		// it was the iteration's wait, not a look.
		h.checkTimeout(0, core.Now())
	} else if !h.waited {
		// The wait was skipped: only allowed for a zero timeout with no
		// descriptor watched or after a quiet batch.
		if (h.watched != 0 && !h.quiet) || h.released {
			h.t.Fatalf("no wait with %d descriptors watched, quiet %v, released %v", h.watched, h.quiet, h.released)
		}
		h.checkTimeout(0, core.Now())
	}

	// Events: exactly what the reactor wrote, in the host's own memory.
	if !slices.Equal(events, h.batch) {
		h.t.Fatalf("Dispatch got events %v, the reactor wrote %v", events, h.batch)
	}
	if len(events) > 0 && unsafe.SliceData(events) != unsafe.SliceData(h.events) {
		h.t.Fatal("Dispatch's events are not in the host's event buffer")
	}

	// The due live timers the engine holds, in firing order.
	var want []*fzTimer
	for _, tm := range h.held {
		if tm != nil && !tm.cancelled && tm.due(h.base) {
			want = append(want, tm)
		}
	}
	slices.SortFunc(want, fzLess)

	var got []*fzTimer
	for _, slot := range timers {
		tm := h.holder(slot)
		if tm == nil {
			h.t.Fatalf("slot %#x handed back but not held by the engine (twice, never scheduled or poisoned: %v) among %d slots", slot, slot == fzPoison, len(timers))
		}
		h.held[slot] = nil
		tm.returned = true
		if tm.cancelled {
			h.cancelled--
			continue
		}
		if !tm.due(h.base) {
			h.t.Fatalf("timer %#x (deadline %v) handed back before it was due (base %v)", slot, tm.when, h.base)
		}
		got = append(got, tm)
	}
	if !slices.Equal(got, want) {
		h.t.Fatalf("due timers handed back %s, want %s", fzDescribe(got), fzDescribe(want))
	}
	for _, tm := range h.taken {
		if tm.early && !tm.returned {
			h.t.Fatalf("timer %#x cancelled before it was taken was not handed back in that iteration", tm.slot)
		}
	}
	// capi frees the slots now; they are reused LIFO.
	for _, slot := range timers {
		h.free = append(h.free, slot)
	}
	h.checkLookahead(ahead)
	// What the engine was given is overwritten from now on.
	fzPoisonTimers(h.ntBuf)
	return core.Alone{}, nil
}

// checkLookahead checks what the engine tells the host for running batches
// alone: no live timer it holds may be due before NextTimer (a batch run
// alone would then miss it), and NextTimer is a deadline the engine holds
// (a cancelled one still in the heap may only make it earlier), or +Inf
// when it holds none.
func (h *fzHost) checkLookahead(ahead core.Lookahead) {
	if ahead.Posted == nil || ahead.Batches <= 0 {
		h.t.Fatalf("lookahead %+v: want the inbox word and batches allowed (no trace runs)", ahead)
	}
	if top := h.earliest(); top != nil && !(ahead.NextTimer <= top.key) {
		h.t.Fatalf("lookahead's next timer %v is after the earliest live one held, %s", ahead.NextTimer, fzDescribe([]*fzTimer{top}))
	}
	held := false
	for _, tm := range h.held {
		if tm != nil && (tm.key == ahead.NextTimer || math.IsNaN(ahead.NextTimer) && math.IsNaN(tm.when)) {
			held = true
		}
	}
	if !held && !math.IsInf(ahead.NextTimer, 1) {
		h.t.Fatalf("lookahead's next timer %v is no deadline the engine holds", ahead.NextTimer)
	}
}

func fzDescribe(ts []*fzTimer) string {
	s := "["
	for i, tm := range ts {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%#x@%v#%d", tm.slot, tm.when, tm.seq)
	}
	return s + "]"
}

// fzReactor writes the scripted batch into the buffer it is given, never
// waits, and checks the timeout against the model.
type fzReactor struct {
	h      *fzHost
	script []core.Event
}

func (r *fzReactor) Register(int, core.DescriptorToken, core.Interest) error   { return nil }
func (r *fzReactor) Reregister(int, core.DescriptorToken, core.Interest) error { return nil }
func (r *fzReactor) Deregister(int) error                                      { return nil }
func (r *fzReactor) WakeHandle() core.WakeHandle                               { return core.WakeHandle{} }
func (r *fzReactor) Wake() error                                               { return nil }
func (r *fzReactor) Close() error                                              { return nil }

// Wait answers with the script. A zero-timeout wait without Release is
// either the iteration's wait (when the model expects a zero timeout) or
// the look before a wait that may block (Engine.poll): at most one, only
// with a descriptor watched, and if it finds nothing the blocking wait
// follows, after Release.
func (r *fzReactor) Wait(events []core.Event, timeout time.Duration) (int, error) {
	h := r.h
	tw := core.Now()
	if !h.inIter || h.waited || h.dispatched {
		h.t.Fatal("Wait called outside RunOnce, twice, or after Dispatch")
	}
	if unsafe.SliceData(events) != unsafe.SliceData(h.events) || len(events) != len(h.events) {
		h.t.Fatalf("Wait got a buffer of %d events that is not the host's (%d)", len(events), len(h.events))
	}
	if (timeout != 0) != h.released {
		h.t.Fatalf("wait(%v) with Release called: %v", timeout, h.released)
	}
	n := copy(events, r.script)
	h.batch = slices.Clone(events[:n])
	if timeout == 0 {
		look := !h.zeroExpected(tw)
		if h.zeroEmpty || look && h.watched == 0 {
			h.t.Fatalf("a second zero-timeout wait, or a look with nothing watched (%d)", h.watched)
		}
		h.waited, h.zeroEmpty = n > 0, n == 0
		return n, nil
	}
	h.waited = true
	h.checkTimeout(timeout, tw)
	return n, nil
}

// zeroExpected: the model wants this iteration's wait made with a zero
// timeout (work ready or a timer due).
func (h *fzHost) zeroExpected(tw float64) bool {
	top := h.earliest()
	return h.ready || top != nil && (top.due(h.base) || top.key-tw < 1e-6)
}

// fzRunOnce runs one iteration with batch as the reactor's answer.
func fzRunOnce(t *testing.T, e *core.Engine, h *fzHost, r *fzReactor, batch []core.Event) {
	for i := range h.events {
		h.events[i] = fzPoisonEvent(i)
	}
	r.script = batch
	h.inIter, h.dispatched, h.released, h.waited, h.zeroEmpty = true, false, false, false, false
	h.batch, h.taken = nil, nil
	h.t0 = core.Now()
	if err := e.RunOnce(); err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	h.inIter = false
	if !h.dispatched {
		t.Fatal("RunOnce returned without calling Dispatch")
	}
}

func FuzzEngineAgainstModel(f *testing.F) {
	op := func(code, p byte) []byte { return []byte{code, p} }
	seed := func(cfg byte, ops ...[]byte) []byte {
		return slices.Concat(append([][]byte{{cfg}}, ops...)...)
	}
	run := func(events, ready, watched byte) []byte {
		return op(fzRun, events&15|ready<<4|watched<<5)
	}
	// Equal, NaN and infinite deadlines, due and not.
	f.Add(seed(0,
		op(fzSchedPast, 1), op(fzSchedPast, 2), op(fzSchedFuture, 0), op(fzSchedPast, 0),
		op(fzSchedSpecial, 0), op(fzSchedSpecial, 2), op(fzSchedSpecial, 3), op(fzSchedSpecial, 11),
		op(fzSchedFuture, 1), op(fzSchedSpecial, 4), run(0, 0, 0), run(0, 0, 1)))
	// Cancel before and after the engine took them; slots reused.
	f.Add(seed(0x25,
		op(fzSchedFuture, 0), op(fzSchedFuture, 3), op(fzSchedPast, 1), op(fzCancel, 0),
		run(3, 0, 1), op(fzCancel, 0), op(fzSchedPast, 4), op(fzSchedFuture, 2),
		op(fzCancel, 2), run(9, 1, 1), op(fzRunMany, 2), op(fzSchedPast, 0), run(1, 0, 1)))
	// Enough cancelled timers to sweep the whole heap.
	f.Add(seed(0x41,
		op(fzSchedMany, 15), op(fzSchedMany, 15), run(0, 0, 0),
		op(fzCancelMany, 0), op(fzSchedMany, 3), op(fzCancel, 7), run(2, 0, 1),
		op(fzCancelMany, 1), op(fzRunMany, 3)))
	// Ready work, events larger than the buffer, buffer reallocations.
	f.Add(seed(0xfe,
		op(fzSchedFuture, 5), op(fzRealloc, 0), op(fzSchedFuture, 6), op(fzSchedSpecial, 9),
		run(15, 1, 1), op(fzSchedSpecial, 8), op(fzRealloc, 0), run(15, 0, 1),
		op(fzSchedFuture, 7), run(4, 0, 0), op(fzCancelMany, 2), run(0, 1, 0)))
	f.Add([]byte{})
	f.Fuzz(fuzzEngineInput)
}

// fuzzEngineInput runs one input: a configuration byte (resolution, event
// buffer and new-timer buffer sizes), then operations.
func fuzzEngineInput(t *testing.T, data []byte) {
	var cfg byte
	if len(data) > 0 {
		cfg, data = data[0], data[1:]
	}
	data = data[:min(len(data), 2*fzMaxOps)]
	h := &fzHost{
		t:      t,
		base:   core.Now(),
		res:    fzResolutions[cfg&3],
		ntBuf:  make([]core.NewTimer, int(cfg>>5)+1),
		events: make([]core.Event, int(cfg>>2&7)+1),
	}
	r := &fzReactor{h: h}
	e := core.NewEngineWithReactor(h, r, h.res)
	watch := func(on bool) {
		if on && h.watched == 0 {
			e.Watch(1)
			h.watched = 1
		} else if !on && h.watched == 1 {
			e.Watch(-1)
			h.watched = 0
		}
	}

	for len(data) > 0 {
		code := data[0] % fzOps
		var p byte
		if len(data) > 1 {
			p = data[1]
		}
		data = data[min(2, len(data)):]
		switch code {
		case fzSchedPast:
			h.schedule(h.base - fzPast[int(p)%len(fzPast)])
		case fzSchedFuture:
			h.schedule(h.base + fzFuture[int(p)%len(fzFuture)])
		case fzSchedSpecial:
			h.schedule(fzSpecial[int(p)%len(fzSpecial)])
		case fzCancel:
			if live := h.live(); len(live) > 0 {
				h.cancel(live[int(p)%len(live)])
			}
		case fzRun:
			n := int(p & 15)
			batch := make([]core.Event, n)
			for i := range batch {
				batch[i] = core.Event{
					Token: (core.DescriptorToken(i)+1)*0x9e37_79b9_7f4a_7c15 ^ core.DescriptorToken(p),
					Mask:  core.Interest(1 + (i+int(p))%3),
				}
			}
			h.ready = p&16 != 0
			h.quiet = p&64 != 0
			watch(p&32 != 0)
			fzRunOnce(t, e, h, r, batch)
		case fzSchedMany:
			n := 8 * (int(p%16) + 1)
			for i := range n {
				if (i+int(p))%17 == 0 {
					h.schedule(h.base - fzPast[i%len(fzPast)])
				} else {
					h.schedule(h.base + fzFuture[(i+int(p))%len(fzFuture)])
				}
			}
		case fzCancelMany:
			k := int(p%3) + 1
			for i, tm := range h.live() {
				if i%k == 0 {
					h.cancel(tm)
				}
			}
		case fzRealloc:
			h.realloc(len(h.ntBuf) + int(p%4))
		case fzRunMany:
			h.ready = false
			for range int(p%4) + 1 {
				fzRunOnce(t, e, h, r, nil)
			}
		}
	}

	// Take whatever is pending, then drain: every slot the engine was
	// given comes back exactly once.
	h.ready = false
	fzRunOnce(t, e, h, r, nil)
	for _, slot := range e.Reset() {
		tm := h.holder(slot)
		if tm == nil {
			t.Fatalf("Reset returned slot %#x the engine did not hold", slot)
		}
		h.held[slot] = nil
		tm.returned = true
	}
	for slot, tm := range h.held {
		if tm != nil {
			t.Fatalf("slot %#x lost: neither handed back nor returned by Reset", slot)
		}
	}
	for _, tm := range h.timers {
		if !tm.returned {
			t.Fatalf("timer %#x (#%d) never came back", tm.slot, tm.seq)
		}
	}
	if again := e.Reset(); len(again) != 0 {
		t.Fatalf("second Reset returned %v", again)
	}
	// An empty engine waits forever and hands back nothing.
	watch(true)
	fzRunOnce(t, e, h, r, nil)
}
