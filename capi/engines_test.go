// The id -> engine map (engines.go): ids are fresh and never 0, a removed
// id finds nothing, and a post to a closed or removed loop is refused, so
// that its poster frees the result. Built with the extension's link flags
// (CGO_LDFLAGS=-Wl,--unresolved-symbols=ignore-all, as setup.py links):
// nothing here calls the C half, whose CPython symbols stay unresolved.

package main

import (
	"testing"
	"time"

	"github.com/zloopgo/zloopgo/core"
)

// idleHost is a core.Host with nothing to do.
type idleHost struct{}

func (idleHost) TakeNewTimers() []core.NewTimer     { return nil }
func (idleHost) TimerCancelled(core.TimerSlot) bool { return false }
func (idleHost) CancelledTimers() int               { return 0 }
func (idleHost) MustNotBlock() bool                 { return false }
func (idleHost) Quiet() bool                        { return false }
func (idleHost) Release()                           {}
func (idleHost) Reacquire()                         {}
func (idleHost) Stopping() bool                     { return true }
func (idleHost) Clock() (float64, bool)             { return 0, false }
func (idleHost) Dispatch([]core.Event, []core.TimerSlot, []core.Completion, bool, core.Lookahead) (core.Alone, error) {
	return core.Alone{}, nil
}

func openEngine(t *testing.T) *loopEngine {
	t.Helper()
	e, err := core.NewEngine(idleHost{}, 1e-9)
	if err != nil {
		t.Fatal(err)
	}
	return &loopEngine{engine: e}
}

func TestEngineIDsAreFreshAndResolveUntilRemoved(t *testing.T) {
	a, b := openEngine(t), openEngine(t)
	idA, idB := addEngine(a), addEngine(b)
	if idA == 0 || idB == 0 || idA == idB {
		t.Fatalf("ids %d and %d: want two different non-zero ids", idA, idB)
	}
	if got, ok := engineFor(idA); !ok || got != a {
		t.Fatalf("engineFor(%d) = %p, %v; want %p", idA, got, ok, a)
	}
	removeEngine(idA)
	if got, ok := engineFor(idA); ok {
		t.Fatalf("engineFor(%d) after removeEngine = %p", idA, got)
	}
	if got, ok := engineFor(idB); !ok || got != b {
		t.Fatalf("removing %d lost %d", idA, idB)
	}
	if _, ok := engineFor(0); ok {
		t.Fatal("id 0 names an engine")
	}
	removeEngine(idB)
	a.engine.Close()
	b.engine.Close()
}

func TestPostsReachAnOpenLoopOnly(t *testing.T) {
	le := openEngine(t)
	id := addEngine(le)
	if !postTo(id, core.Completion{Request: 1}) {
		t.Fatal("a post to an open loop was refused")
	}
	// Closed but still found (a worker that looked the engine up before
	// the loop closed): the engine itself refuses.
	orphans, _ := le.engine.Close()
	if len(orphans) != 1 || orphans[0].Request != 1 {
		t.Fatalf("Close returned %v, want the one post not yet taken", orphans)
	}
	if postTo(id, core.Completion{Request: 2}) {
		t.Fatal("a post to a closed engine was accepted")
	}
	removeEngine(id)
	if postTo(id, core.Completion{Request: 3}) {
		t.Fatal("a post to a removed id was accepted")
	}
}

// Posts racing a close are each either taken by Close (an orphan the
// loop frees) or refused (the poster frees it): none is lost, none is
// both. Each poster posts until it is refused, so the close does race
// the posts.
func TestPostsRacingACloseAreEachOwnedOnce(t *testing.T) {
	le := openEngine(t)
	id := addEngine(le)
	const posters = 4
	accepted := make(chan []core.RequestID, posters)
	for p := range posters {
		go func() {
			var mine []core.RequestID
			for i := 0; ; i++ {
				req := core.RequestID(p<<32 | i)
				if !postTo(id, core.Completion{Request: req}) {
					break
				}
				mine = append(mine, req)
			}
			accepted <- mine
		}()
	}
	time.Sleep(5 * time.Millisecond)
	removeEngine(id)
	orphans, _ := le.engine.Close()
	owned := map[core.RequestID]int{}
	for _, c := range orphans {
		owned[c.Request]++
	}
	total := 0
	for range posters {
		for _, req := range <-accepted {
			total++
			if owned[req] != 1 {
				t.Fatalf("request %#x accepted, found %d times among the orphans", req, owned[req])
			}
		}
	}
	if total != len(orphans) || total == 0 {
		t.Fatalf("%d posts accepted, %d orphans", total, len(orphans))
	}
}
