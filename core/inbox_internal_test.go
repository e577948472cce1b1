// The inbox's wake-up accounting, which the public tests see only as
// timing: one wake-up per batch of posts, none after close.
package core

import (
	"fmt"
	"slices"
	"sync"
	"testing"
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
