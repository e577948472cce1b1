// The engine's inbox: work that other goroutines finished for the host (a
// name lookup, say) comes back here as a Completion, and the next
// iteration hands every completion to the host in its one Dispatch call.
// A blocked wait is woken through the reactor at most once per batch of
// posts. It knows nothing of what a completion means.
//
// Posts are appended to a slice under a mutex, which also orders them
// with Close. It replaced bytedance/gopkg's lock-free LSCQ queue, whose
// posts took the read side of an RWMutex for that same ordering: measured
// with go test -bench Inbox ./core on this project's two shared CPUs
// (medians of 5 runs), a post and its share of the takes cost 46 ns from
// 2 goroutines and 117 ns from 16 with no allocation, against 392 and
// 576 ns and two allocations per post with LSCQ; an iteration with nothing
// posted costs 5-6 ns (one atomic load) with either. Its one user, the
// adapter's worker pool, posts name lookups (from at most eight workers)
// and file operations (from at most ZLOOPGO_FILE_WORKERS, 64 by default). Without LSCQ core also builds for 32-bit targets.

package core

import (
	"sync"
	"sync/atomic"
)

// RequestID is the host's name for a piece of work it handed to another
// goroutine (the adapter's: a name lookup's number); the Completion that
// finishes it carries it back.
type RequestID uint64

// Completion is finished work: the host's id for it and two words of
// result, opaque to the engine. Its layout (three 8-byte words) is shared
// with the C adapter.
type Completion struct {
	Request RequestID
	Value   uint64
	Status  int64
}

type inbox struct {
	// wakeMu orders the wake-ups with close: a post holds its read side
	// from its check of closed to the end of its wake-up, close its write
	// side, so that no wake-up comes after close (the reactor is closed
	// after that). The wake-up itself runs after mu is released: the
	// loop thread it wakes goes straight to take, and on one CPU it runs
	// while the poster is still between the wake-up and its unlock; had
	// the poster kept mu, take would park the loop's goroutine on it and
	// the Go scheduler would hand the loop's P from thread to thread
	// (three context switches and about 30 µs per lookup, seen in a
	// sched_switch trace of getaddrinfo on one CPU).
	wakeMu sync.RWMutex
	// nonEmpty is 1 from a post to the take that empties posted: the
	// loop reads it every iteration without taking mu, and so does a host
	// running batches alone (Lookahead.Posted). Only sync/atomic's
	// functions touch it.
	nonEmpty uint32
	mu       sync.Mutex
	posted   []Completion // guarded by mu
	// woken (guarded by mu) is set by the post that woke the reactor and
	// cleared by the take that empties posted: one wake-up per batch.
	woken  bool
	closed bool         // guarded by mu: posts after Close are refused
	taken  []Completion // the loop's: posted's previous buffer, handed out by take
}

func newInbox() *inbox { return &inbox{} }

// Post hands c to the engine from any goroutine; the next iteration passes
// it to the host. It reports false, and keeps nothing, once the engine is
// closed: the caller then disposes of what c refers to.
func (e *Engine) Post(c Completion) bool { return e.inbox.post(c, e.reactor.Wake) }

// post queues c and calls wake if no wake-up is owed since the last take:
// after releasing mu, and never after close (wakeMu).
func (in *inbox) post(c Completion, wake func() error) bool {
	in.wakeMu.RLock()
	defer in.wakeMu.RUnlock()
	in.mu.Lock()
	if in.closed {
		in.mu.Unlock()
		return false
	}
	in.posted = append(in.posted, c)
	atomic.StoreUint32(&in.nonEmpty, 1)
	owed := !in.woken
	in.woken = true
	in.mu.Unlock()
	if owed {
		_ = wake()
	}
	return true
}

// pending reports completions waiting to be taken.
func (in *inbox) pending() bool { return atomic.LoadUint32(&in.nonEmpty) != 0 }

// take empties the inbox into a slice valid until the next take. The two
// buffers trade places, so a steady flow of posts allocates nothing.
func (in *inbox) take() []Completion {
	if atomic.LoadUint32(&in.nonEmpty) == 0 {
		return nil
	}
	in.mu.Lock()
	out := in.posted
	in.posted = in.taken[:0]
	in.taken = out
	in.woken = false
	atomic.StoreUint32(&in.nonEmpty, 0)
	in.mu.Unlock()
	return out
}

// close refuses posts from now on and returns those not yet taken.
func (in *inbox) close() []Completion {
	in.wakeMu.Lock()
	in.mu.Lock()
	in.closed = true
	in.mu.Unlock()
	in.wakeMu.Unlock()
	return in.take()
}
