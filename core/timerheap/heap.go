// Package timerheap is the engine's timer queue: a binary min-heap of
// (deadline, scheduling order, token) with lazy cancellation left to the
// caller.
//
// It knows deadlines as float64 seconds on the host's monotonic clock and
// tokens as opaque integers of the caller's type (the engine's TimerSlot);
// it knows nothing of callbacks or what a cancelled timer is — the engine asks its host and uses Filter.
package timerheap

import "math"

// Entry is one scheduled timer. Seq breaks ties so that timers with equal
// deadlines fire in the order they were pushed: first in, first out, as
// uvloop's do. asyncio's heapq leaves ties in an order of its sift's making
// (0, 2, 6, 5, 7, 4, 1, 3 for eight pushed together), which no program can
// count on; the kept difference is in docs/compatibility.md.
type Entry[T ~uint64] struct {
	When  float64
	Seq   uint64
	Token T
}

func less[T ~uint64](a, b *Entry[T]) bool {
	return a.When < b.When || (a.When == b.When && a.Seq < b.Seq)
}

// Heap is a min-heap of entries; the zero value is empty and ready to use.
type Heap[T ~uint64] struct {
	items []Entry[T]
	seq   uint64
}

// Len is the number of timers held.
func (h *Heap[T]) Len() int { return len(h.items) }

// Push schedules tok at when. A NaN deadline sorts first (it is due at
// once): asyncio compares NaN deadlines as "not later than now" and runs
// them on the next iteration, and NaN would otherwise break the ordering.
func (h *Heap[T]) Push(when float64, tok T) {
	if math.IsNaN(when) {
		when = math.Inf(-1)
	}
	h.items = append(h.items, Entry[T]{When: when, Seq: h.seq, Token: tok})
	h.seq++
	h.up(len(h.items) - 1)
}

// Top returns the earliest entry; ok is false when the heap is empty.
func (h *Heap[T]) Top() (e Entry[T], ok bool) {
	if len(h.items) == 0 {
		return Entry[T]{}, false
	}
	return h.items[0], true
}

// Pop removes and returns the earliest entry. It panics on an empty heap.
func (h *Heap[T]) Pop() Entry[T] {
	top := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items = h.items[:last]
	if last > 0 {
		h.down(0)
	}
	return top
}

// Filter keeps the entries for which keep returns true, appends the tokens
// of the others to removed, rebuilds the heap in O(n) and returns removed.
func (h *Heap[T]) Filter(keep func(tok T) bool, removed []T) []T {
	kept := h.items[:0]
	for _, e := range h.items {
		if keep(e.Token) {
			kept = append(kept, e)
		} else {
			removed = append(removed, e.Token)
		}
	}
	clear(h.items[len(kept):])
	h.items = kept
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
	return removed
}

// Drain empties the heap, appending every token to out (in no particular
// order), and returns out.
func (h *Heap[T]) Drain(out []T) []T {
	for _, e := range h.items {
		out = append(out, e.Token)
	}
	h.items = h.items[:0]
	return out
}

func (h *Heap[T]) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !less(&h.items[i], &h.items[parent]) {
			return
		}
		h.items[i], h.items[parent] = h.items[parent], h.items[i]
		i = parent
	}
}

func (h *Heap[T]) down(i int) {
	n := len(h.items)
	for {
		smallest := i
		if l := 2*i + 1; l < n && less(&h.items[l], &h.items[smallest]) {
			smallest = l
		}
		if r := 2*i + 2; r < n && less(&h.items[r], &h.items[smallest]) {
			smallest = r
		}
		if smallest == i {
			return
		}
		h.items[i], h.items[smallest] = h.items[smallest], h.items[i]
		i = smallest
	}
}
