// Tests of what the engine tells the host for running batches alone
// (core.Lookahead) and of how it counts the batches the host reports:
// the earliest deadline it holds, the inbox word other goroutines set,
// none while a trace runs, how to look at the reactor (Peek), and each
// batch alone an iteration whose wait the host made or was skipped.

package core_test

import (
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zloopgo/zloopgo/core"
)

// lastAhead is what the most recent Dispatch was told.
func lastAhead(t *testing.T, h *fakeHost) core.Lookahead {
	t.Helper()
	if len(h.aheads) == 0 {
		t.Fatal("Dispatch was never called")
	}
	return h.aheads[len(h.aheads)-1]
}

func TestLookaheadNamesTheEarliestTimerHeld(t *testing.T) {
	e, h, _ := setup(t)
	h.ready = true
	runOnce(t, e)
	if got := lastAhead(t, h).NextTimer; !math.IsInf(got, 1) {
		t.Fatalf("next timer %v with no timer held, want +Inf", got)
	}
	now := core.Now()
	h.schedule(now+200, 1)
	h.schedule(now+100, 2)
	h.schedule(now-1, 3) // due: handed back in the same iteration, not held
	runOnce(t, e)
	if got := lastAhead(t, h).NextTimer; got != now+100 {
		t.Fatalf("next timer %v, want the earliest held, %v", got, now+100)
	}
	h.cancel(2)
	runOnce(t, e)
	if got := lastAhead(t, h).NextTimer; got != now+200 {
		t.Fatalf("next timer %v after the earliest was cancelled, want %v", got, now+200)
	}
}

func TestLookaheadAllowsBatchesExceptWhileTracing(t *testing.T) {
	e, h, _ := setup(t)
	h.ready = true
	runOnce(t, e)
	if got := lastAhead(t, h).Batches; got <= 0 {
		t.Fatalf("batches allowed alone %d, want some", got)
	}
	e.StartTrace(4)
	runOnce(t, e)
	if got := lastAhead(t, h).Batches; got != 0 {
		t.Fatalf("batches allowed alone %d while a trace records every iteration, want 0", got)
	}
	e.TakeTrace()
	runOnce(t, e)
	if got := lastAhead(t, h).Batches; got <= 0 {
		t.Fatalf("batches allowed alone %d once the trace was taken, want some", got)
	}
}

func TestLookaheadsInboxWordIsSetByAPostAndClearedByTheTake(t *testing.T) {
	e, h, _ := setup(t)
	h.ready = true
	var during []uint32
	h.onDispatch = func(ahead core.Lookahead) {
		during = append(during, atomic.LoadUint32(ahead.Posted))
		if len(during) == 1 {
			e.Post(core.Completion{Request: 9})
			during = append(during, atomic.LoadUint32(ahead.Posted))
		}
	}
	runOnce(t, e) // posts during its Dispatch
	runOnce(t, e) // takes the post before its Dispatch
	if want := []uint32{0, 1, 0}; len(during) != 3 || during[0] != want[0] || during[1] != want[1] || during[2] != want[2] {
		t.Fatalf("inbox word seen during Dispatch %v, want %v (clear, set by the post, cleared by the take)", during, want)
	}
	if got := h.last().done; len(got) != 1 || got[0].Request != 9 {
		t.Fatalf("second Dispatch got completions %v, want the one posted", got)
	}
}

func TestBatchesRunAloneCountAsIterationsThatWaitedOrSkippedTheirWait(t *testing.T) {
	for _, c := range []struct {
		name                            string
		alone, polled                   int
		iterations, waits, waitsSkipped uint64
	}{
		// no descriptor watched: the engine's own wait is skipped too
		{"skipped", 5, 0, 2 + 10, 0, 2 + 10},
		// the host made 3 of the 5 batches' waits (Lookahead.Peek)
		{"polled", 5, 3, 2 + 10, 6, 2 + 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, h, r := setup(t)
			h.ready = true
			h.alone, h.polled = c.alone, c.polled
			before := e.Stats()
			runOnce(t, e)
			runOnce(t, e)
			s := e.Stats()
			if got := s.Iterations - before.Iterations; got != c.iterations {
				t.Fatalf("iterations %d, want %d (2 of the engine's, the rest run alone)", got, c.iterations)
			}
			if got := s.Waits - before.Waits; got != c.waits {
				t.Fatalf("waits %d, want %d: the host's", got, c.waits)
			}
			if got := s.WaitsSkipped - before.WaitsSkipped; got != c.waitsSkipped {
				t.Fatalf("waits skipped %d, want %d", got, c.waitsSkipped)
			}
			if r.waits() != 0 {
				t.Fatalf("%d waits made by the reactor, want none", r.waits())
			}
		})
	}
}

func TestEventsTheHostsWaitsHandedOverAreCounted(t *testing.T) {
	e, h, _ := setup(t)
	h.ready = true
	h.alone, h.polled, h.events = 4, 4, 7
	before := e.Stats()
	runOnce(t, e)
	if got := e.Stats().Events - before.Events; got != 7 {
		t.Fatalf("events %d, want the 7 the host's waits handed over", got)
	}
}

func TestDescriptorsTheHostWatchedItselfAreCounted(t *testing.T) {
	e, h, r := setup(t)
	h.ready = true
	h.watched = 2 // two descriptors watched by the host's own calls
	runOnce(t, e)
	if got := e.Watched(); got != 2 {
		t.Fatalf("watched %d, want the 2 the host reported", got)
	}
	h.watched = -2 // and both removed the same way: no descriptor left
	runOnce(t, e)
	if got := e.Watched(); got != 0 {
		t.Fatalf("watched %d, want 0", got)
	}
	// with none watched, a zero-timeout wait skips the system call
	waits := len(r.timeouts)
	h.watched = 0
	runOnce(t, e)
	if len(r.timeouts) != waits {
		t.Fatalf("the reactor waited with no descriptor watched: %v", r.timeouts)
	}
}

func TestAWaitAfterTheHostLookedEmptyGoesWithoutALook(t *testing.T) {
	for _, c := range []struct {
		name      string
		lookEmpty bool
		want      []time.Duration // the reactor's waits: the first iteration's, then the second's
	}{
		{"looked empty", true, []time.Duration{0, -1}},
		{"did not look", false, []time.Duration{0, 0, -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, h, r := setup(t)
			e.Watch(1)
			h.ready = true
			h.lookEmpty = c.lookEmpty
			runOnce(t, e) // callbacks ready: a zero-timeout wait
			h.ready = false
			h.lookEmpty = false
			runOnce(t, e) // a wait that may block: looked at first unless the host just did
			if !slices.Equal(r.timeouts, c.want) {
				t.Fatalf("waits %v, want %v", r.timeouts, c.want)
			}
		})
	}
}

func TestLookaheadSaysWhenTheEngineIsDueToYield(t *testing.T) {
	e, h, _ := setup(t)
	h.ready = true
	h.stopAfter = 1
	start := core.Now()
	if err := e.Run(); err != nil {
		t.Fatal(err)
	}
	end := core.Now()
	got := lastAhead(t, h).YieldBy
	every := core.YieldEvery.Seconds()
	if got < start+every || got > end+every {
		t.Fatalf("yield by %v, want %v after the run's start (%v to %v)", got, every, start, end)
	}
}

func TestLookaheadNamesNoPeekForAReactorWithoutOne(t *testing.T) {
	e, h, _ := setup(t)
	h.ready = true
	runOnce(t, e)
	if got := lastAhead(t, h).Peek; got.Kind != core.PeekNone {
		t.Fatalf("peek %+v from a reactor that cannot be looked at, want PeekNone", got)
	}
}

func TestBusyRunWithBatchesAloneStillYields(t *testing.T) {
	// Every Dispatch reports all the batches it may run alone: the engine
	// counts them as iterations, and its look at the clock between Dispatch
	// calls still hands the goroutine back to the scheduler.
	h := &busyHost{deadline: time.Now().Add(10 * time.Second), want: 3, alone: true}
	e := core.NewEngineWithReactor(h, &fakeReactor{log: new([]string)}, 1e-9)
	e.SetYield(func() { h.yields = append(h.yields, time.Now()) })
	if err := e.Run(); err != nil {
		t.Fatal(err)
	}
	if len(h.yields) < h.want {
		t.Fatalf("%d yields in 10 s of busy iterations run alone, want %d", len(h.yields), h.want)
	}
	if got := e.Stats().Iterations; got != uint64(h.iterations)*(1+core.AloneMax) {
		t.Fatalf("%d iterations counted for %d Dispatch calls each reporting the most batches alone", got, h.iterations)
	}
}
