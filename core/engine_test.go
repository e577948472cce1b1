// Tests of the run-once engine against a fake host and a fake reactor: no
// descriptors, no Python, no real waiting. Deadlines are small offsets from
// Now(), so a test never depends on how fast the machine is beyond a few
// hundred milliseconds of slack.

package core_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zloopgo/zloopgo/core"
)

// fakeHost records every call the engine makes and plays the adapter's part
// in the cancelled-timer bookkeeping: a cancelled timer counts until its
// slot comes back through Dispatch.
type fakeHost struct {
	t          *testing.T
	log        *[]string // shared with the reactor, to check call order
	pending    []core.NewTimer
	taken      []core.NewTimer // the slice last returned by TakeNewTimers
	cancelled  map[core.TimerSlot]bool
	returned   map[core.TimerSlot]int // how often each slot came back
	ready      bool
	quiet      bool
	faked      bool // Clock reports fakeNow
	fakeNow    float64
	stopping   bool
	stopAfter  int // if > 0, Stopping turns true after that many Dispatch calls
	failAt     int // if > 0, the failAt-th Dispatch returns errDispatch
	dispatches []dispatchCall
	aheads     []core.Lookahead     // what each successful Dispatch was told
	alone      int                  // batches each Dispatch reports it ran alone (at most allowed)
	polled     int                  // of those, the ones it reports it polled for (at most alone)
	events     int                  // the events it reports those waits handed over
	lookEmpty  bool                 // it reports its last look found nothing (Alone.LookedEmpty)
	watched    int                  // the change to the descriptors watched it reports it made
	onDispatch func(core.Lookahead) // called at the end of each successful Dispatch
}

type dispatchCall struct {
	events []core.Event
	timers []core.TimerSlot
	done   []core.Completion
}

var errDispatch = errors.New("fake dispatch failure")

func newFakeHost(t *testing.T) *fakeHost {
	return &fakeHost{
		t:         t,
		log:       new([]string),
		cancelled: map[core.TimerSlot]bool{},
		returned:  map[core.TimerSlot]int{},
	}
}

// schedule queues a timer for the next iteration, as loop.call_at does.
func (h *fakeHost) schedule(when float64, slot core.TimerSlot) {
	h.pending = append(h.pending, core.NewTimer{When: when, Slot: slot})
}

// cancel marks slot cancelled, as TimerHandle.cancel does.
func (h *fakeHost) cancel(slot core.TimerSlot) { h.cancelled[slot] = true }

// clobberTaken overwrites the slice TakeNewTimers last returned, as the
// adapter's buffer is overwritten once callbacks schedule new timers: the
// engine must have copied what it needs before then.
func (h *fakeHost) clobberTaken() {
	for i := range h.taken {
		h.taken[i] = core.NewTimer{When: math.Inf(-1), Slot: 0xdead}
	}
	h.taken = nil
}

func (h *fakeHost) TakeNewTimers() []core.NewTimer {
	*h.log = append(*h.log, "take")
	h.clobberTaken()
	h.taken = h.pending
	h.pending = nil
	return h.taken
}

func (h *fakeHost) TimerCancelled(slot core.TimerSlot) bool { return h.cancelled[slot] }

func (h *fakeHost) CancelledTimers() int {
	n := 0
	for slot := range h.cancelled {
		if h.returned[slot] == 0 {
			n++
		}
	}
	return n
}

func (h *fakeHost) MustNotBlock() bool     { return h.ready || h.stopping }
func (h *fakeHost) Quiet() bool            { return h.quiet }
func (h *fakeHost) Clock() (float64, bool) { return h.fakeNow, h.faked }
func (h *fakeHost) Release()               { *h.log = append(*h.log, "release") }
func (h *fakeHost) Reacquire()             { *h.log = append(*h.log, "reacquire") }
func (h *fakeHost) Stopping() bool         { return h.stopping }

func (h *fakeHost) Dispatch(events []core.Event, timers []core.TimerSlot, done []core.Completion, reacquire bool, ahead core.Lookahead) (core.Alone, error) {
	if reacquire {
		h.Reacquire()
	}
	*h.log = append(*h.log, "dispatch")
	h.clobberTaken()
	for _, slot := range timers {
		h.returned[slot]++
		if h.returned[slot] > 1 {
			h.t.Errorf("slot %#x handed back %d times", slot, h.returned[slot])
		}
	}
	h.dispatches = append(h.dispatches, dispatchCall{slices.Clone(events), slices.Clone(timers), slices.Clone(done)})
	if len(h.dispatches) > 1000 {
		h.t.Fatal("Run did not end after 1000 iterations")
	}
	if h.stopAfter > 0 && len(h.dispatches) >= h.stopAfter {
		h.stopping = true
	}
	if h.failAt > 0 && len(h.dispatches) == h.failAt {
		return core.Alone{}, errDispatch
	}
	h.aheads = append(h.aheads, ahead)
	batches := min(h.alone, ahead.Batches)
	if h.onDispatch != nil {
		h.onDispatch(ahead)
	}
	return core.Alone{Batches: batches, Polled: min(h.polled, batches), Events: h.events, LookedEmpty: h.lookEmpty,
		Watched: h.watched}, nil
}

// last is the most recent Dispatch call.
func (h *fakeHost) last() dispatchCall {
	h.t.Helper()
	if len(h.dispatches) == 0 {
		h.t.Fatal("Dispatch was never called")
	}
	return h.dispatches[len(h.dispatches)-1]
}

// fakeReactor hands out scripted event batches and records each Wait.
type fakeReactor struct {
	log      *[]string
	script   [][]core.Event
	timeouts []time.Duration
	waitErr  error
	closed   bool
	wakes    atomic.Int32
	room     []int                       // the length of the buffer each Wait was given
	onWait   func(timeout time.Duration) // called at the start of each Wait
}

func (r *fakeReactor) Register(int, core.DescriptorToken, core.Interest) error   { return nil }
func (r *fakeReactor) Reregister(int, core.DescriptorToken, core.Interest) error { return nil }
func (r *fakeReactor) Deregister(int) error                                      { return nil }
func (r *fakeReactor) WakeHandle() core.WakeHandle                               { return core.WakeHandle{} }
func (r *fakeReactor) Wake() error                                               { r.wakes.Add(1); return nil }
func (r *fakeReactor) Close() error                                              { r.closed = true; return nil }

func (r *fakeReactor) Wait(events []core.Event, timeout time.Duration) (int, error) {
	*r.log = append(*r.log, fmt.Sprintf("wait(%v)", timeout))
	r.timeouts = append(r.timeouts, timeout)
	r.room = append(r.room, len(events))
	if r.onWait != nil {
		r.onWait(timeout)
	}
	if r.waitErr != nil {
		return 0, r.waitErr
	}
	if len(r.script) == 0 {
		return 0, nil
	}
	batch := r.script[0]
	r.script = r.script[1:]
	return copy(events, batch), nil
}

// waits is how many times Wait was called.
func (r *fakeReactor) waits() int { return len(r.timeouts) }

// lastTimeout is the timeout of the most recent Wait.
func (r *fakeReactor) lastTimeout(t *testing.T) time.Duration {
	t.Helper()
	if len(r.timeouts) == 0 {
		t.Fatal("Wait was never called")
	}
	return r.timeouts[len(r.timeouts)-1]
}

// setup builds an engine over fakes. resolution is 1ns: due means "in the
// past", so tests control dueness through deadlines alone.
func setup(t *testing.T) (*core.Engine, *fakeHost, *fakeReactor) {
	h := newFakeHost(t)
	r := &fakeReactor{log: h.log}
	return core.NewEngineWithReactor(h, r, 1e-9), h, r
}

func runOnce(t *testing.T, e *core.Engine) {
	t.Helper()
	if err := e.RunOnce(); err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
}

func TestDueTimersComeBackInDeadlineThenPushOrder(t *testing.T) {
	e, h, _ := setup(t)
	now := core.Now()
	h.schedule(now-0.001, 1)
	h.schedule(now-0.002, 2)
	h.schedule(now-0.001, 3)
	h.schedule(now-0.002, 4)
	h.schedule(now+100, 5) // not due
	h.schedule(math.NaN(), 6)
	runOnce(t, e)
	if got, want := h.last().timers, []core.TimerSlot{6, 2, 4, 1, 3}; !slices.Equal(got, want) {
		t.Fatalf("timers handed back %v, want %v", got, want)
	}
	runOnce(t, e)
	if got := h.last().timers; len(got) != 0 {
		t.Fatalf("second iteration handed back %v, want nothing", got)
	}
}

func TestTimerComesBackOnceItsDeadlinePasses(t *testing.T) {
	e, h, _ := setup(t)
	h.schedule(core.Now()+0.03, 7)
	runOnce(t, e)
	if got := h.last().timers; len(got) != 0 {
		t.Fatalf("timer handed back %v before its deadline", got)
	}
	time.Sleep(40 * time.Millisecond)
	runOnce(t, e)
	if got := h.last().timers; !slices.Equal(got, []core.TimerSlot{7}) {
		t.Fatalf("timers handed back %v, want [7]", got)
	}
}

func TestResolutionMakesNearTimersDue(t *testing.T) {
	h := newFakeHost(t)
	e := core.NewEngineWithReactor(h, &fakeReactor{log: h.log}, 1.0)
	h.schedule(core.Now()+0.5, 1)
	h.schedule(core.Now()+5, 2)
	runOnce(t, e)
	if got := h.last().timers; !slices.Equal(got, []core.TimerSlot{1}) {
		t.Fatalf("timers handed back %v, want [1] (within one resolution)", got)
	}
}

func TestTimerCancelledBeforeDrainComesBackAndDoesNotBlock(t *testing.T) {
	e, h, r := setup(t)
	h.schedule(core.Now()+0.001, 1) // would make the wait short
	h.schedule(core.Now()-1, 2)     // would make it zero
	h.cancel(1)
	h.cancel(2)
	runOnce(t, e)
	if got := h.last().timers; !slices.Equal(got, []core.TimerSlot{1, 2}) {
		t.Fatalf("timers handed back %v, want [1 2]", got)
	}
	if got := r.lastTimeout(t); got != -1 {
		t.Fatalf("timeout %v with only cancelled timers, want -1", got)
	}
	if h.CancelledTimers() != 0 {
		t.Fatalf("host still counts %d cancelled timers", h.CancelledTimers())
	}
}

func TestTimerCancelledAtHeapTopComesBackAndDoesNotBlock(t *testing.T) {
	e, h, r := setup(t)
	now := core.Now()
	h.schedule(now+1, 1)
	h.schedule(now+10, 2)
	runOnce(t, e)
	h.cancel(1)
	runOnce(t, e)
	if got := h.last().timers; !slices.Equal(got, []core.TimerSlot{1}) {
		t.Fatalf("timers handed back %v, want [1]", got)
	}
	if got := r.lastTimeout(t); got < 9*time.Second || got > 10*time.Second {
		t.Fatalf("timeout %v, want about 10s (the live timer)", got)
	}
}

func TestCancelledTimerBelowTopComesBackWhenItReachesTop(t *testing.T) {
	e, h, r := setup(t)
	now := core.Now()
	h.schedule(now+0.02, 1)
	h.schedule(now+0.03, 2)
	h.schedule(now+10, 3)
	runOnce(t, e)
	h.cancel(2)
	time.Sleep(35 * time.Millisecond)
	// Timer 1 is due; timer 2 is both due and cancelled: whichever path
	// takes it, it comes back once, and the wait is for timer 3.
	for i := 0; i < 3; i++ {
		runOnce(t, e)
	}
	if h.returned[1] != 1 || h.returned[2] != 1 || h.returned[3] != 0 {
		t.Fatalf("slots handed back %v, want 1 and 2 once, 3 never", h.returned)
	}
	if got := r.lastTimeout(t); got < 9*time.Second || got > 10*time.Second {
		t.Fatalf("timeout %v, want about 10s", got)
	}
}

// scheduleMany puts n live timers 10s+ away into the engine's heap.
func scheduleMany(t *testing.T, e *core.Engine, h *fakeHost, n int) {
	now := core.Now()
	for i := 0; i < n; i++ {
		h.schedule(now+10+float64(i), core.TimerSlot(i))
	}
	runOnce(t, e)
}

func TestCompactionSweepsCancelledTimersFromTheWholeHeap(t *testing.T) {
	e, h, r := setup(t)
	scheduleMany(t, e, h, 200)
	for slot := core.TimerSlot(1); slot <= 101; slot++ { // not the top (0)
		h.cancel(slot)
	}
	runOnce(t, e)
	got := slices.Clone(h.last().timers)
	slices.Sort(got)
	if len(got) != 101 || got[0] != 1 || got[100] != 101 {
		t.Fatalf("compaction handed back %d slots (%v...), want 1..101", len(got), got[:min(5, len(got))])
	}
	if got := r.lastTimeout(t); got < 9*time.Second || got > 10*time.Second {
		t.Fatalf("timeout %v, want about 10s", got)
	}
	// The live ones are intact: Reset returns exactly them.
	rest := e.Reset()
	if len(rest) != 99 {
		t.Fatalf("Reset returned %d slots, want 99 live ones", len(rest))
	}
	for _, slot := range rest {
		if h.cancelled[slot] {
			t.Fatalf("Reset returned cancelled slot %d: compaction kept it", slot)
		}
	}
}

func TestNoCompactionAtOrBelowTheThresholds(t *testing.T) {
	cases := []struct {
		name      string
		timers    int
		cancelled int
	}{
		{"100 timers, 99 cancelled", 100, 99},
		{"200 timers, exactly half cancelled", 200, 100},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, h, _ := setup(t)
			scheduleMany(t, e, h, c.timers)
			for slot := 1; slot <= c.cancelled; slot++ {
				h.cancel(core.TimerSlot(slot))
			}
			runOnce(t, e)
			if got := h.last().timers; len(got) != 0 {
				t.Fatalf("handed back %d cancelled timers below the top, want none", len(got))
			}
		})
	}
}

// Cancelled timers handed back at drain time are still counted by the host
// during that iteration; they must not push the heap over the compaction
// threshold.
func TestNewCancelledTimersDoNotTriggerCompaction(t *testing.T) {
	e, h, _ := setup(t)
	scheduleMany(t, e, h, 200)
	for slot := core.TimerSlot(1); slot <= 90; slot++ {
		h.cancel(slot)
	}
	for i := 0; i < 30; i++ {
		slot := core.TimerSlot(1000 + i)
		h.schedule(core.Now()+5, slot)
		h.cancel(slot)
	}
	runOnce(t, e)
	got := h.last().timers
	if len(got) != 30 {
		t.Fatalf("handed back %d slots, want the 30 new cancelled ones only", len(got))
	}
	for _, slot := range got {
		if slot < 1000 {
			t.Fatalf("handed back heap slot %d: compacted with 90/200 cancelled", slot)
		}
	}
}

func TestTimeout(t *testing.T) {
	cases := []struct {
		name     string
		ready    bool
		stopping bool
		when     []float64 // offsets from Now(); NaN and ±Inf are absolute
		lo, hi   time.Duration
	}{
		{name: "no timers", lo: -1, hi: -1},
		{name: "ready work", ready: true, when: []float64{10}, lo: 0, hi: 0},
		{name: "stop pending", stopping: true, when: []float64{10}, lo: 0, hi: 0},
		{name: "earliest timer", when: []float64{5, 0.5, 2}, lo: 400 * time.Millisecond, hi: 500 * time.Millisecond},
		{name: "past timer", when: []float64{-1}, lo: 0, hi: 0},
		{name: "NaN timer", when: []float64{math.NaN(), 5}, lo: 0, hi: 0},
		{name: "two days", when: []float64{2 * 86400}, lo: core.MaxTimeout, hi: core.MaxTimeout},
		{name: "1e300 seconds", when: []float64{1e300}, lo: core.MaxTimeout, hi: core.MaxTimeout},
		{name: "+Inf", when: []float64{math.Inf(1)}, lo: core.MaxTimeout, hi: core.MaxTimeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, h, r := setup(t)
			e.Watch(1) // so that a zero timeout still reaches Wait
			h.ready, h.stopping = c.ready, c.stopping
			now := core.Now()
			for i, w := range c.when {
				if !math.IsNaN(w) && !math.IsInf(w, 0) {
					w += now
				}
				h.schedule(w, core.TimerSlot(i))
			}
			runOnce(t, e)
			if got := r.lastTimeout(t); got < c.lo || got > c.hi {
				t.Fatalf("timeout %v, want in [%v, %v]", got, c.lo, c.hi)
			}
		})
	}
}

// A clock the host replaced (a patched loop.time) decides both the wait
// and which timers are due; the monotonic clock plays no part.
func TestReplacedClockDecidesTimeoutAndDueTimers(t *testing.T) {
	e, h, r := setup(t)
	e.Watch(1)
	h.faked, h.fakeNow = true, 1000
	h.schedule(1000.5, 1)          // half a second ahead on the replaced clock
	h.schedule(5e9, 2)             // far ahead on both clocks
	h.schedule(core.Now()+3600, 3) // an hour ahead of the monotonic clock
	runOnce(t, e)
	if got := h.last().timers; len(got) != 0 {
		t.Fatalf("due at 1000: %v, want none", got)
	}
	if got := r.lastTimeout(t); got != 500*time.Millisecond {
		t.Fatalf("timeout %v at 1000, want 500ms (until timer 1)", got)
	}
	h.fakeNow = 1000.5
	runOnce(t, e)
	if got := h.last().timers; !slices.Equal(got, []core.TimerSlot{1}) {
		t.Fatalf("due at 1000.5: %v, want [1]", got)
	}
	h.fakeNow = 1e10
	runOnce(t, e)
	if got := h.last().timers; !slices.Equal(got, []core.TimerSlot{3, 2}) {
		t.Fatalf("due at 1e10: %v, want [3 2]", got)
	}
}

func TestReplacedClockSetsTheWait(t *testing.T) {
	e, h, r := setup(t)
	e.Watch(1)
	h.faked, h.fakeNow = true, 50
	h.schedule(50.25, 1)
	runOnce(t, e)
	if got := r.lastTimeout(t); got != 250*time.Millisecond {
		t.Fatalf("timeout %v on the replaced clock, want 250ms", got)
	}
}

func TestReleaseAndReacquireWrapOnlyABlockingWait(t *testing.T) {
	e, h, _ := setup(t)
	e.Watch(1)
	e.SkipPeeks(1 << 30) // the looks first: peek_test.go

	h.schedule(core.Now()+10, 1)
	runOnce(t, e)
	want := []string{"take", "release", "wait(", "reacquire", "dispatch"}
	checkLog(t, *h.log, want)

	*h.log = nil
	h.ready = true
	runOnce(t, e)
	checkLog(t, *h.log, []string{"take", "wait(0s)", "dispatch"})

	*h.log = nil
	h.ready = false
	e.Reset()
	runOnce(t, e)
	checkLog(t, *h.log, []string{"take", "release", "wait(-1ns)", "reacquire", "dispatch"})
}

// checkLog requires log to match want entry by entry, each entry by prefix.
func checkLog(t *testing.T, log, want []string) {
	t.Helper()
	ok := len(log) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = strings.HasPrefix(log[i], want[i])
	}
	if !ok {
		t.Fatalf("calls %q, want %q", log, want)
	}
}

func TestZeroTimeoutSkipsWaitWithoutDescriptors(t *testing.T) {
	e, h, r := setup(t)
	h.ready = true
	runOnce(t, e)
	if r.waits() != 0 {
		t.Fatalf("Wait called %d times with nothing watched and work ready", r.waits())
	}
	checkLog(t, *h.log, []string{"take", "dispatch"})

	e.Watch(1)
	runOnce(t, e)
	if r.waits() != 1 || r.lastTimeout(t) != 0 {
		t.Fatalf("with one descriptor watched: %d waits, timeouts %v; want one of 0", r.waits(), r.timeouts)
	}

	e.Watch(-1)
	runOnce(t, e)
	if r.waits() != 1 {
		t.Fatalf("Wait called again after the descriptor was unwatched")
	}
}

func TestZeroTimeoutSkipsWaitAfterAQuietBatch(t *testing.T) {
	e, h, r := setup(t)
	e.Watch(1)
	e.SkipPeeks(1 << 30)
	h.ready, h.quiet = true, true
	runOnce(t, e)
	if r.waits() != 0 {
		t.Fatalf("Wait called %d times after a quiet batch with work ready", r.waits())
	}
	// A quiet batch does not skip a wait that may block: nothing is ready.
	h.ready = false
	h.schedule(core.Now()+0.01, 1)
	runOnce(t, e)
	if r.waits() != 1 || r.lastTimeout(t) <= 0 {
		t.Fatalf("after a quiet batch with nothing ready: %d waits, timeouts %v; want one that may block", r.waits(), r.timeouts)
	}
	// Nor a zero wait after a batch that was not quiet.
	h.ready, h.quiet = true, false
	runOnce(t, e)
	if r.waits() != 2 || r.lastTimeout(t) != 0 {
		t.Fatalf("after a batch that was not quiet: %d waits, timeouts %v; want a second one of 0", r.waits(), r.timeouts)
	}
}

func TestBlockingWaitHappensWithoutDescriptors(t *testing.T) {
	// A cross-thread wake-up must still be able to end the wait.
	e, h, r := setup(t)
	h.schedule(core.Now()+1, 1)
	runOnce(t, e)
	if r.waits() != 1 {
		t.Fatalf("Wait called %d times for a timed wait, want 1", r.waits())
	}
}

func TestEventsReachDispatchUnchanged(t *testing.T) {
	e, h, r := setup(t)
	e.Watch(1)
	h.ready = true
	batch := []core.Event{
		{Token: 3, Mask: core.Readable},
		{Token: 1 << 40, Mask: core.Writable},
		{Token: 5, Mask: core.Readable | core.Writable},
	}
	r.script = [][]core.Event{batch, nil}
	runOnce(t, e)
	if got := h.last().events; !slices.Equal(got, batch) {
		t.Fatalf("Dispatch got events %v, want %v", got, batch)
	}
	runOnce(t, e)
	if got := h.last().events; len(got) != 0 {
		t.Fatalf("Dispatch got stale events %v", got)
	}
}

func TestDispatchErrorEndsRun(t *testing.T) {
	e, h, _ := setup(t)
	h.ready = true
	h.failAt = 3
	if err := e.Run(); !errors.Is(err, errDispatch) {
		t.Fatalf("Run returned %v, want the Dispatch error", err)
	}
	if len(h.dispatches) != 3 {
		t.Fatalf("Dispatch called %d times, want 3", len(h.dispatches))
	}
}

func TestWaitErrorEndsRunWithoutDispatch(t *testing.T) {
	for _, ready := range []bool{false, true} {
		t.Run(fmt.Sprintf("ready=%v", ready), func(t *testing.T) {
			e, h, r := setup(t)
			e.Watch(1)
			e.SkipPeeks(1 << 30) // a failed look: peek_test.go
			h.ready = ready
			r.waitErr = errors.New("epoll_wait: EBADF")
			if err := e.Run(); !errors.Is(err, r.waitErr) {
				t.Fatalf("Run returned %v, want the wait error", err)
			}
			if len(h.dispatches) != 0 {
				t.Fatalf("Dispatch called after a failed wait")
			}
			if !ready {
				checkLog(t, *h.log, []string{"take", "release", "wait(", "reacquire"})
			}
		})
	}
}

func TestStoppingEndsRunAfterOneIteration(t *testing.T) {
	e, h, _ := setup(t)
	h.stopping = true
	if err := e.Run(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(h.dispatches) != 1 {
		t.Fatalf("Dispatch called %d times, want 1", len(h.dispatches))
	}
}

func TestStopRequestedDuringDispatchEndsRun(t *testing.T) {
	e, h, _ := setup(t)
	h.ready = true
	h.stopAfter = 4
	if err := e.Run(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(h.dispatches) != 4 {
		t.Fatalf("Dispatch called %d times, want 4", len(h.dispatches))
	}
}

func TestResetReturnsEverySlot(t *testing.T) {
	e, h, r := setup(t)
	now := core.Now()
	for slot := core.TimerSlot(10); slot < 15; slot++ {
		h.schedule(now+10+float64(slot), slot)
	}
	runOnce(t, e)
	h.cancel(13) // below the top: still in the heap
	got := e.Reset()
	slices.Sort(got)
	if want := []core.TimerSlot{10, 11, 12, 13, 14}; !slices.Equal(got, want) {
		t.Fatalf("Reset returned %v, want %v", got, want)
	}
	if again := e.Reset(); len(again) != 0 {
		t.Fatalf("second Reset returned %v", again)
	}
	runOnce(t, e)
	if got := r.lastTimeout(t); got != -1 {
		t.Fatalf("timeout %v after Reset, want -1", got)
	}
}

func TestCloseClosesTheReactor(t *testing.T) {
	e, _, r := setup(t)
	if orphans, err := e.Close(); err != nil || !r.closed || len(orphans) != 0 {
		t.Fatalf("Close: err %v, reactor closed %v, orphans %v", err, r.closed, orphans)
	}
	if e.Reactor() != core.Reactor(r) {
		t.Fatal("Reactor() is not the reactor the engine was built with")
	}
}

// ---- the inbox ----

func TestPostedCompletionsReachTheNextDispatchInOrder(t *testing.T) {
	e, h, r := setup(t)
	for i := range 3 {
		if !e.Post(core.Completion{Request: core.RequestID(i), Value: uint64(10 * i), Status: -int64(i)}) {
			t.Fatalf("post %d refused", i)
		}
	}
	if got := r.wakes.Load(); got != 1 {
		t.Fatalf("%d wake-ups for three posts in a row, want 1", got)
	}
	runOnce(t, e)
	want := []core.Completion{{0, 0, 0}, {1, 10, -1}, {2, 20, -2}}
	if got := h.last().done; !slices.Equal(got, want) {
		t.Fatalf("dispatched %v, want %v", got, want)
	}
	// taken: the next post wakes again, the next iteration hands nothing twice
	e.Post(core.Completion{Request: 7})
	if got := r.wakes.Load(); got != 2 {
		t.Fatalf("%d wake-ups after the inbox was taken, want 2", got)
	}
	runOnce(t, e)
	if got := h.last().done; !slices.Equal(got, []core.Completion{{Request: 7}}) {
		t.Fatalf("second batch %v", got)
	}
}

func TestAPendingCompletionMeansNoWaiting(t *testing.T) {
	e, h, r := setup(t)
	e.Watch(1)
	h.schedule(core.Now()+100, 1)
	e.Post(core.Completion{Request: 1})
	runOnce(t, e)
	if got := r.lastTimeout(t); got != 0 {
		t.Fatalf("timeout %v with a completion posted, want 0", got)
	}
}

func TestPostsAfterCloseAreRefusedAndLeftoversReturned(t *testing.T) {
	e, _, _ := setup(t)
	e.Post(core.Completion{Request: 1, Value: 42})
	orphans, err := e.Close()
	if err != nil || !slices.Equal(orphans, []core.Completion{{Request: 1, Value: 42}}) {
		t.Fatalf("Close: %v, %v", orphans, err)
	}
	if e.Post(core.Completion{Request: 2}) {
		t.Fatal("a post after Close was accepted")
	}
}

func TestPostsFromManyGoroutinesAllArriveOnce(t *testing.T) {
	e, h, _ := setup(t)
	const producers, each = 8, 500
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				e.Post(core.Completion{Request: core.RequestID(p*each + i)})
			}
		}()
	}
	seen := map[core.RequestID]int{}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for iter, finished := 0, false; !finished || len(seen) < producers*each; iter++ {
		select {
		case <-done:
			finished = true
		default:
		}
		runOnce(t, e)
		for _, c := range h.last().done {
			seen[c.Request]++
		}
		h.dispatches = h.dispatches[:0]
		if finished && iter > 1_000_000 {
			t.Fatalf("%d of %d posts arrived", len(seen), producers*each)
		}
	}
	for req, n := range seen {
		if n != 1 {
			t.Fatalf("request %d dispatched %d times", req, n)
		}
	}
}

// busyHost always has callbacks ready, so every iteration polls without
// blocking; it stops once it has seen `want` yields or its deadline passed.
type busyHost struct {
	deadline   time.Time
	yields     []time.Time
	want       int
	iterations int
	alone      bool          // report every batch allowed alone as run
	slow       time.Duration // how long each Dispatch takes
}

func (h *busyHost) TakeNewTimers() []core.NewTimer     { return nil }
func (h *busyHost) TimerCancelled(core.TimerSlot) bool { return false }
func (h *busyHost) CancelledTimers() int               { return 0 }
func (h *busyHost) MustNotBlock() bool                 { return true }
func (h *busyHost) Quiet() bool                        { return false }
func (h *busyHost) Clock() (float64, bool)             { return 0, false }
func (h *busyHost) Release()                           {}
func (h *busyHost) Reacquire()                         {}
func (h *busyHost) Stopping() bool {
	return len(h.yields) >= h.want || time.Now().After(h.deadline)
}
func (h *busyHost) Dispatch(_ []core.Event, _ []core.TimerSlot, _ []core.Completion, _ bool, ahead core.Lookahead) (core.Alone, error) {
	h.iterations++
	if h.slow > 0 {
		time.Sleep(h.slow)
	}
	if h.alone {
		return core.Alone{Batches: ahead.Batches}, nil
	}
	return core.Alone{}, nil
}

func TestBusyRunYieldsToTheSchedulerEveryFewMilliseconds(t *testing.T) {
	h := &busyHost{deadline: time.Now().Add(10 * time.Second), want: 4}
	e := core.NewEngineWithReactor(h, &fakeReactor{log: new([]string)}, 1e-9)
	e.SetYield(func() { h.yields = append(h.yields, time.Now()) })
	if err := e.Run(); err != nil {
		t.Fatal(err)
	}
	if len(h.yields) < h.want {
		t.Fatalf("%d yields in 10 s of busy iterations, want %d", len(h.yields), h.want)
	}
	// The engine spaces yields by its own clock reading, taken a moment
	// before the hook records time.Now(): allow that moment's jitter.
	for i := 1; i < len(h.yields); i++ {
		if gap := h.yields[i].Sub(h.yields[i-1]); gap < core.YieldEvery-time.Millisecond {
			t.Errorf("yields %d and %d are %v apart, less than %v", i-1, i, gap, core.YieldEvery)
		}
	}
	if h.iterations < 10*len(h.yields) {
		t.Errorf("%d iterations for %d yields: fast iterations should share a yield", h.iterations, len(h.yields))
	}
}

func TestSlowIterationsYieldBeforeSysmonsTenMilliseconds(t *testing.T) {
	// Each iteration takes at least 2 ms (a batch of heavy callbacks): the
	// engine looks at the clock on every one, so a yield comes in the first
	// iteration that starts YieldEvery after the last, and no stretch
	// without one grows past the Go runtime's 10 ms by more than an
	// iteration. Counted in iterations, which a slow machine's late
	// wake-ups from the sleep can only make fewer.
	slow := 2 * time.Millisecond
	h := &busyHost{deadline: time.Now().Add(10 * time.Second), want: 6, slow: slow}
	var at []int // iterations dispatched at each yield
	e := core.NewEngineWithReactor(h, &fakeReactor{log: new([]string)}, 1e-9)
	e.SetYield(func() {
		h.yields = append(h.yields, time.Now())
		at = append(at, h.iterations)
	})
	if err := e.Run(); err != nil {
		t.Fatal(err)
	}
	if len(h.yields) < h.want {
		t.Fatalf("%d yields in 10 s of 2 ms iterations, want %d", len(h.yields), h.want)
	}
	most := int(core.YieldEvery/slow) + 1
	for i := 1; i < len(at); i++ {
		if n := at[i] - at[i-1]; n > most {
			t.Fatalf("%d iterations of at least %v between yields %d and %d, want at most %d (yields after iterations %v)",
				n, slow, i-1, i, most, at)
		}
	}
}
