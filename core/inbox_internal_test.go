// Interleavings of posts and takes the public tests cannot force: each
// post's steps are run by hand between the engine's takes.
package core

import (
	"testing"
	"unsafe"
)

// A post whose item was dequeued by a take before the post counted it
// still leaves the inbox able to wake the reactor for the next post.
func TestAPostOvertakenByATakeDoesNotSwallowTheNextWakeUp(t *testing.T) {
	in := newInbox()
	wakes := 0
	wake := func() error { wakes++; return nil }

	in.post(Completion{Request: 1}, wake) // an earlier post, complete
	late := Completion{Request: 2}
	in.queue.Enqueue(unsafe.Pointer(&late)) // a second post's first step...
	if got := in.take(); len(got) != 2 {    // ...taken before it counted itself
		t.Fatalf("took %v, want both items", got)
	}
	in.size.Add(1) // the second post finishes: count, then claim the wake-up
	if in.woken.CompareAndSwap(false, true) {
		_ = wake()
	}
	if got := in.take(); len(got) != 0 { // the next iteration: nothing left
		t.Fatalf("took %v from an empty inbox", got)
	}
	before := wakes
	in.post(Completion{Request: 3}, wake) // the engine may now block: this must wake it
	if wakes != before+1 {
		t.Fatal("a post after an empty take did not wake the reactor")
	}
	if got := in.take(); len(got) != 1 || got[0].Request != 3 {
		t.Fatalf("took %v, want request 3", got)
	}
}

// The cost of the hand-over: posts from eight goroutines, taken in
// batches as the engine takes them (go test -bench Inbox ./core).
func BenchmarkInboxPostAndTake(b *testing.B) {
	in := newInbox()
	wake := func() error { return nil }
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			in.post(Completion{Request: 1}, wake)
			if in.size.Load() > 64 {
				in.mu.Lock() // one taker at a time, as the loop thread is
				in.take()
				in.mu.Unlock()
			}
		}
	})
}
