// The inbox's wake-up accounting, which the public tests see only as
// timing: one wake-up per batch of posts, none after close.

package core

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestOneWakeUpPerBatchOfPosts(t *testing.T) {
	in := newInbox()
	wakes := 0
	wake := func() error { wakes++; return nil }

	for r := RequestID(1); r <= 3; r++ {
		if !in.post(Completion{Request: r}, wake) {
			t.Fatalf("post %d refused by an open inbox", r)
		}
	}
	if wakes != 1 || !in.pending() {
		t.Fatalf("three posts: %d wake-ups, pending %v; want 1, true", wakes, in.pending())
	}
	if got := in.take(); !slices.Equal(got, []Completion{{Request: 1}, {Request: 2}, {Request: 3}}) {
		t.Fatalf("took %v, want requests 1, 2, 3 in order", got)
	}
	if in.pending() || len(in.take()) != 0 {
		t.Fatal("the inbox is not empty after a take")
	}
	in.post(Completion{Request: 4}, wake) // the engine may block now: this must wake it
	if wakes != 2 {
		t.Fatalf("a post after a take: %d wake-ups in all, want 2", wakes)
	}
	in.post(Completion{Request: 5}, wake)
	if orphans := in.close(); !slices.Equal(orphans, []Completion{{Request: 4}, {Request: 5}}) {
		t.Fatalf("close returned %v, want requests 4 and 5", orphans)
	}
	if in.post(Completion{Request: 6}, wake) || wakes != 2 {
		t.Fatalf("a post after close was accepted or woke the reactor (%d wake-ups)", wakes)
	}
	if in.pending() || len(in.take()) != 0 {
		t.Fatal("a refused post reached the inbox")
	}
}

// The wake-up runs with mu released, so that the loop it wakes can take
// at once; close waits for a wake-up under way, and none starts after it.
func TestTheWakeUpRunsOutsideTheLockAndBeforeClose(t *testing.T) {
	in := newInbox()
	free := false
	in.post(Completion{Request: 1}, func() error {
		if in.mu.TryLock() {
			free = true
			in.mu.Unlock()
		}
		return nil
	})
	if !free {
		t.Fatal("the wake-up ran while the poster held the inbox's lock")
	}
	in.take()

	waking, release := make(chan struct{}), make(chan struct{})
	woke := make(chan struct{})
	go in.post(Completion{Request: 2}, func() error {
		close(waking)
		<-release
		close(woke)
		return nil
	})
	<-waking
	closed := make(chan []Completion)
	go func() { closed <- in.close() }()
	select {
	case <-closed:
		t.Fatal("close returned while a wake-up was under way")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if orphans := <-closed; !slices.Equal(orphans, []Completion{{Request: 2}}) {
		t.Fatalf("close returned %v, want request 2", orphans)
	}
	<-woke
	if in.post(Completion{Request: 3}, func() error { t.Error("a wake-up after close"); return nil }) {
		t.Fatal("a post after close was accepted")
	}
}

// The cost of the hand-over: posts from 1 and from 16 goroutines (the
// resolver has at most 8 workers), taken in batches as the engine takes
// them, by one goroutine at a time (go test -bench Inbox ./core).
func BenchmarkInboxPostAndTake(b *testing.B) {
	for _, perCPU := range []int{1, 8} {
		b.Run(fmt.Sprintf("posters=%dxGOMAXPROCS", perCPU), func(b *testing.B) {
			b.ReportAllocs()
			in := newInbox()
			wake := func() error { return nil }
			var taker sync.Mutex // one taker at a time, as the loop thread is
			b.SetParallelism(perCPU)
			b.RunParallel(func(pb *testing.PB) {
				for i := 0; pb.Next(); i++ {
					in.post(Completion{Request: 1}, wake)
					if i%64 == 0 && taker.TryLock() {
						in.take()
						taker.Unlock()
					}
				}
			})
		})
	}
}

// The loop thread's cost per iteration when nothing was posted: what
// every iteration pays (RunOnce asks pending, then takes).
func BenchmarkInboxEmptyTake(b *testing.B) {
	in := newInbox()
	for i := 0; i < b.N; i++ {
		if in.pending() || len(in.take()) != 0 {
			b.Fatal("an empty inbox had completions")
		}
	}
}
