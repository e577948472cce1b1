// Tests of the engine's counters (stats.go) against the fake host and
// reactor of engine_test.go: each figure follows what the iterations did.
// Durations are checked for their accounting (which sums hold), never for
// how long anything took.

package core_test

import (
	"testing"
	"time"

	"github.com/zloopgo/zloopgo/core"
)

func TestStatsCountWaitsEventsAndSkips(t *testing.T) {
	e, h, r := setup(t)
	e.Watch(2)
	h.ready = true
	r.script = [][]core.Event{
		{{Token: 3, Mask: core.Readable}, {Token: 4, Mask: core.Writable}},
		{{Token: 3, Mask: core.Readable}},
	}
	runOnce(t, e) // a zero wait: two events
	runOnce(t, e) // one event
	h.quiet = true
	runOnce(t, e) // skipped after a quiet batch
	h.quiet, h.ready = false, false
	h.schedule(core.Now()-1, 7) // due already: a zero wait that hands it back
	runOnce(t, e)
	s := e.Stats()
	if s.Iterations != 4 {
		t.Errorf("Iterations %d, want 4", s.Iterations)
	}
	if s.Waits != 3 || s.WaitsSkipped != 1 || s.WaitsBlocking != 0 {
		t.Errorf("Waits %d, skipped %d, blocking %d; want 3, 1, 0", s.Waits, s.WaitsSkipped, s.WaitsBlocking)
	}
	if s.Events != 3 {
		t.Errorf("Events %d, want 3", s.Events)
	}
	if s.TimersFired != 1 {
		t.Errorf("TimersFired %d, want 1", s.TimersFired)
	}
	if r.waits() != int(s.Waits) {
		t.Errorf("the reactor saw %d waits, the stats %d", r.waits(), s.Waits)
	}
}

func TestStatsCountBlockingWaitsAsIdle(t *testing.T) {
	e, h, _ := setup(t)
	h.schedule(core.Now()+0.001, 1) // a timed wait: may block
	runOnce(t, e)
	s := e.Stats()
	if s.Waits != 1 || s.WaitsBlocking != 1 {
		t.Fatalf("Waits %d, blocking %d; want 1, 1", s.Waits, s.WaitsBlocking)
	}
	if s.IdleNs != s.PollNs || s.PollNs < 0 {
		t.Errorf("IdleNs %d, PollNs %d: a blocking wait's time is idle time", s.IdleNs, s.PollNs)
	}
	h.ready = true
	e.Watch(1)
	runOnce(t, e) // a zero wait is not idle
	if s2 := e.Stats(); s2.IdleNs != s.IdleNs || s2.PollNs < s.PollNs {
		t.Errorf("after a zero wait IdleNs %d (was %d), PollNs %d (was %d)", s2.IdleNs, s.IdleNs, s2.PollNs, s.PollNs)
	}
}

func TestStatsCountAFullEventBuffer(t *testing.T) {
	e, h, r := setup(t)
	e.Watch(1)
	h.ready = true
	full := make([]core.Event, 256) // the engine's own buffer for a host without one
	r.script = [][]core.Event{full, full[:10]}
	runOnce(t, e)
	runOnce(t, e)
	if s := e.Stats(); s.WaitsFull != 1 || s.Events != 266 {
		t.Fatalf("WaitsFull %d, Events %d; want 1, 266", s.WaitsFull, s.Events)
	}
}

// Busy time runs from the end of one wait to the start of the next within
// one Run; PollNs, IdleNs and BusyNs never go backwards.
func TestStatsBusyTimeIsCountedWithinARun(t *testing.T) {
	e, h, _ := setup(t)
	h.ready = true
	runOnce(t, e)
	if s := e.Stats(); s.BusyNs != 0 {
		t.Errorf("BusyNs %d after one iteration, want 0 (no wait before it)", s.BusyNs)
	}
	before := e.Stats()
	h.stopAfter = len(h.dispatches) + 3
	began := time.Now()
	if err := e.Run(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began).Nanoseconds()
	s := e.Stats()
	if s.Iterations != 4 || s.BusyNs < 0 || s.PollNs < before.PollNs || s.IdleNs != 0 {
		t.Fatalf("after a Run of 3: %+v", s)
	}
	// Within the Run, wait and busy time are disjoint parts of it.
	if spent := s.PollNs - before.PollNs + s.BusyNs; spent > took {
		t.Fatalf("%d ns counted in a Run that took %d ns", spent, took)
	}
}

func TestTraceRecordsEachIteration(t *testing.T) {
	e, h, r := setup(t)
	e.Watch(1)
	h.ready = true
	r.script = [][]core.Event{{{Token: 9, Mask: core.Readable}}}
	e.StartTrace(2)
	h.schedule(core.Now()-1, 1)
	runOnce(t, e)
	runOnce(t, e)
	runOnce(t, e) // beyond the trace's capacity
	tr := e.TakeTrace()
	if len(tr) != 2 {
		t.Fatalf("%d iterations traced, want 2", len(tr))
	}
	if tr[0].Events != 1 || tr[0].Timers != 1 || tr[1].Events != 0 || tr[1].Timers != 0 {
		t.Errorf("trace %+v", tr)
	}
	for i, it := range tr {
		if it.WaitStart > it.WaitEnd || it.WaitEnd > it.End {
			t.Errorf("iteration %d out of order: %+v", i, it)
		}
		if i > 0 && it.WaitStart < tr[i-1].End {
			t.Errorf("iteration %d starts before %d ended", i, i-1)
		}
	}
	if len(e.TakeTrace()) != 0 {
		t.Error("a second TakeTrace returned iterations")
	}
}

// countingHost reports a callback count to the trace.
type countingHost struct {
	*fakeHost
	n uint64
}

func (h *countingHost) CallbacksRun() uint64 { return h.n }

func (h *countingHost) Dispatch(ev []core.Event, tm []core.TimerSlot, d []core.Completion, re bool, ahead core.Lookahead) (core.Alone, error) {
	h.n += 3
	return h.fakeHost.Dispatch(ev, tm, d, re, ahead)
}

func TestTraceReadsTheHostsCallbackCount(t *testing.T) {
	h := &countingHost{fakeHost: newFakeHost(t)}
	e := core.NewEngineWithReactor(h, &fakeReactor{log: h.log}, 1e-9)
	h.ready = true
	e.StartTrace(4)
	runOnce(t, e)
	runOnce(t, e)
	tr := e.TakeTrace()
	if len(tr) != 2 || tr[0].Callbacks != 3 || tr[1].Callbacks != 6 {
		t.Fatalf("trace %+v, want callback counts 3 and 6", tr)
	}
}

func TestBusyRunCountsItsYields(t *testing.T) {
	h := &busyHost{deadline: time.Now().Add(10 * time.Second), want: 2}
	e := core.NewEngineWithReactor(h, &fakeReactor{log: new([]string)}, 1e-9)
	e.SetYield(func() { h.yields = append(h.yields, time.Now()) })
	if err := e.Run(); err != nil {
		t.Fatal(err)
	}
	if s := e.Stats(); s.Yields != uint64(len(h.yields)) || s.Iterations != uint64(h.iterations) {
		t.Fatalf("Yields %d, Iterations %d; the host saw %d and %d", s.Yields, s.Iterations, len(h.yields), h.iterations)
	}
}
