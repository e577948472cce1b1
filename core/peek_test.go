// Tests of the look before a wait that may block (Engine.poll): made with a
// zero timeout and the host's lock kept while looks keep finding events,
// backed off while they find nothing, never with nothing watched, and
// never followed by a sleep once it may have drained a posted wake-up.

package core_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/zloopgo/zloopgo/core"
)

// blockingIteration runs one iteration whose wait may block (a timer 10 s
// away, nothing ready) and returns its calls.
func blockingIteration(t *testing.T, e *core.Engine, h *fakeHost, slot core.TimerSlot) []string {
	t.Helper()
	*h.log = nil
	h.schedule(core.Now()+10, slot)
	runOnce(t, e)
	return slices.Clone(*h.log)
}

func TestALookThatFindsEventsIsTheWaitAndKeepsTheLock(t *testing.T) {
	e, h, r := setup(t)
	e.Watch(1)
	r.script = [][]core.Event{{{Token: 7, Mask: core.Readable}}}
	before := e.Stats()
	log := blockingIteration(t, e, h, 1)
	if want := []string{"take", "wait(0s)", "dispatch"}; !slices.Equal(log, want) {
		t.Fatalf("calls %q, want %q", log, want)
	}
	if got := h.last().events; len(got) != 1 || got[0].Token != 7 {
		t.Fatalf("Dispatch got %v, want the event the look found", got)
	}
	s := e.Stats()
	if s.Peeks-before.Peeks != 1 || s.PeeksFound-before.PeeksFound != 1 || s.Waits-before.Waits != 1 || s.WaitsBlocking != before.WaitsBlocking {
		t.Fatalf("stats %+v, want one look that found events, one wait, none that might block", s)
	}
}

func TestALookThatFindsNothingIsFollowedByTheBlockingWait(t *testing.T) {
	e, h, r := setup(t)
	e.Watch(1)
	before := e.Stats()
	log := blockingIteration(t, e, h, 1)
	if len(log) != 6 || log[1] != "wait(0s)" || log[2] != "release" || log[3] == "wait(0s)" || log[4] != "reacquire" {
		t.Fatalf("calls %q, want take, wait(0s), release, a wait with the timer's timeout, reacquire then dispatch", log)
	}
	if got := r.lastTimeout(t); got <= 9*time.Second {
		t.Fatalf("the blocking wait's timeout %v, want the timer's ~10s", got)
	}
	s := e.Stats()
	if s.Peeks-before.Peeks != 1 || s.PeeksFound != before.PeeksFound || s.Waits-before.Waits != 2 || s.WaitsBlocking-before.WaitsBlocking != 1 {
		t.Fatalf("stats %+v, want one look that found nothing, two waits, one that might block", s)
	}
}

func TestLooksThatFindNothingBackOffAndOneThatFindsEventsResumesThem(t *testing.T) {
	e, h, r := setup(t)
	e.Watch(1)
	looked := func(n int) (looks int) {
		for i := 0; i < n; i++ {
			if log := blockingIteration(t, e, h, core.TimerSlot(i+1)); log[1] == "wait(0s)" {
				looks++
			}
		}
		return looks
	}
	// skips of 1, 2, 4 ... 64 after each look: looks in iterations 1, 3,
	// 6, 11, 20, 37, 70, then one in 65
	if got := looked(200); got < 7 || got > 10 {
		t.Fatalf("%d looks in 200 idle iterations, want 7 to 10 (backed off to 1 in 65)", got)
	}
	// Once the pause is over, a look that finds events ends it.
	for i := 0; i < 70; i++ {
		r.script = append(r.script, []core.Event{{Token: 3, Mask: core.Readable}})
	}
	found := 0
	for i := 0; i < 70; i++ {
		if log := blockingIteration(t, e, h, core.TimerSlot(1000+i)); slices.Equal(log, []string{"take", "wait(0s)", "dispatch"}) {
			found++
		}
	}
	if found < 70-64 {
		t.Fatalf("%d of 70 iterations with events ready found them by a look, want all but the pause left", found)
	}
	if last := blockingIteration(t, e, h, 2000); last[1] != "wait(0s)" {
		t.Fatalf("calls %q after looks that found events, want a look first", last)
	}
}

func TestNoLookWithNothingWatched(t *testing.T) {
	e, h, _ := setup(t)
	log := blockingIteration(t, e, h, 1)
	if want := []string{"take", "release", "wait(", "reacquire", "dispatch"}; len(log) != 5 || log[1] != "release" {
		t.Fatalf("calls %q, want %q", log, want)
	}
	if e.Stats().Peeks != 0 {
		t.Fatal("a look with nothing watched")
	}
}

func TestALookThatMayHaveDrainedAPostedWakeUpDoesNotSleep(t *testing.T) {
	e, h, r := setup(t)
	e.Watch(1)
	r.onWait = func(timeout time.Duration) {
		if timeout == 0 {
			e.Post(core.Completion{Request: 42}) // its wake-up is what the look drains
		}
	}
	log := blockingIteration(t, e, h, 1)
	if want := []string{"take", "wait(0s)", "dispatch"}; !slices.Equal(log, want) {
		t.Fatalf("calls %q, want %q: no sleep with a completion posted", log, want)
	}
	if got := h.last().done; len(got) != 1 || got[0].Request != 42 {
		t.Fatalf("Dispatch got completions %v, want the one posted during the look", got)
	}
}

func TestALookThatFailsEndsRunWithoutReleasing(t *testing.T) {
	e, h, r := setup(t)
	e.Watch(1)
	h.schedule(core.Now()+10, 1)
	r.waitErr = errors.New("epoll_wait: EBADF")
	if err := e.Run(); !errors.Is(err, r.waitErr) {
		t.Fatalf("Run returned %v, want the wait error", err)
	}
	if want := []string{"take", "wait(0s)"}; !slices.Equal(*h.log, want) {
		t.Fatalf("calls %q, want %q", *h.log, want)
	}
}
