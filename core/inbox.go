// The engine's inbox: work that other goroutines finished for the host (a
// name lookup, say) comes back here as a Completion, and the next
// iteration hands every completion to the host in its one Dispatch call.
// Posting never blocks and never takes a lock the loop holds: the queue
// is bytedance/gopkg's lock-free LSCQ, and a blocked wait is woken through
// the reactor at most once per batch of posts. It knows nothing of what a
// completion means.
package core

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/bytedance/gopkg/collection/lscq"
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
	queue *lscq.PointerQueue
	// size counts posts not yet taken: the engine asks it before choosing
	// a timeout, which a queue cannot answer without taking an item.
	size atomic.Int64
	// woken is set by the post that woke the reactor and cleared when the
	// engine takes the inbox: one wake-up per batch of posts.
	woken atomic.Bool
	// closing: posts after Close are refused (their poster frees what
	// the completion refers to); the lock orders them with Close.
	mu     sync.RWMutex
	closed bool
	taken  []Completion
}

func newInbox() *inbox { return &inbox{queue: lscq.NewPointer()} }

// Post hands c to the engine from any goroutine; the next iteration passes
// it to the host. It reports false, and keeps nothing, once the engine is
// closed: the caller then disposes of what c refers to.
func (e *Engine) Post(c Completion) bool { return e.inbox.post(c, e.reactor.Wake) }

// post queues c and calls wake if no wake-up is owed since the last take.
// wake runs under the read lock, so never after close (the reactor it
// wakes is closed after that).
func (in *inbox) post(c Completion, wake func() error) bool {
	in.mu.RLock()
	defer in.mu.RUnlock()
	if in.closed {
		return false
	}
	item := c
	raceHandOver(unsafe.Pointer(&item))
	in.queue.Enqueue(unsafe.Pointer(&item))
	in.size.Add(1)
	if in.woken.CompareAndSwap(false, true) {
		_ = wake()
	}
	return true
}

// pending reports completions waiting to be taken.
func (in *inbox) pending() bool { return in.size.Load() > 0 }

// take empties the inbox into a slice valid until the next take.
func (in *inbox) take() []Completion {
	in.taken = in.taken[:0]
	// Cleared on every take, before looking: a post that found it set had
	// queued its item already, so the loop below sees it; a post after
	// this wakes the reactor again. (A post whose item an earlier take
	// dequeued before the post counted it sets it with nothing left to
	// take; were it cleared only when items are found, it would stay set
	// and the next post would not wake a blocked wait.)
	if in.woken.Load() {
		in.woken.Store(false)
	}
	if in.size.Load() <= 0 {
		return in.taken
	}
	for {
		p, ok := in.queue.Dequeue()
		if !ok {
			return in.taken
		}
		in.size.Add(-1)
		raceTakeOver(p)
		in.taken = append(in.taken, *(*Completion)(p))
	}
}

// close refuses posts from now on and returns those not yet taken.
func (in *inbox) close() []Completion {
	in.mu.Lock()
	in.closed = true
	in.mu.Unlock()
	return in.take()
}
