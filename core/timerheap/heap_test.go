package timerheap

import (
	"math"
	"sort"
	"testing"
)

// model is the reference the heap is checked against: a plain slice kept in
// (when, push order) order by a stable sort.
type model struct {
	items []Entry[uint64]
	seq   uint64
}

func (m *model) push(when float64, tok uint64) {
	if math.IsNaN(when) {
		when = math.Inf(-1)
	}
	m.items = append(m.items, Entry[uint64]{When: when, Seq: m.seq, Token: tok})
	m.seq++
	sort.SliceStable(m.items, func(i, j int) bool { return less(&m.items[i], &m.items[j]) })
}

func (m *model) pop() Entry[uint64] {
	e := m.items[0]
	m.items = m.items[1:]
	return e
}

func TestOrderByDeadlineThenPushOrder(t *testing.T) {
	var h Heap[uint64]
	h.Push(2, 20)
	h.Push(1, 10)
	h.Push(2, 21)
	h.Push(1, 11)
	h.Push(math.NaN(), 99)
	h.Push(math.Inf(1), 77)
	want := []uint64{99, 10, 11, 20, 21, 77}
	for i, w := range want {
		if got := h.Pop().Token; got != w {
			t.Fatalf("pop %d: got token %d, want %d", i, got, w)
		}
	}
	if h.Len() != 0 {
		t.Fatalf("heap not empty: %d", h.Len())
	}
	if _, ok := h.Top(); ok {
		t.Fatal("Top on an empty heap reported an entry")
	}
}

func TestFilterKeepsOrderAndReportsRemoved(t *testing.T) {
	var h Heap[uint64]
	for i := uint64(0); i < 100; i++ {
		h.Push(float64(100-i), i)
	}
	removed := h.Filter(func(tok uint64) bool { return tok%3 != 0 }, nil)
	if len(removed) != 34 {
		t.Fatalf("removed %d entries, want 34", len(removed))
	}
	for _, tok := range removed {
		if tok%3 != 0 {
			t.Fatalf("removed a kept token %d", tok)
		}
	}
	prev := math.Inf(-1)
	for h.Len() > 0 {
		e := h.Pop()
		if e.Token%3 == 0 || e.When < prev {
			t.Fatalf("bad entry after filter: %+v (prev when %v)", e, prev)
		}
		prev = e.When
	}
}

func TestDrainEmpties(t *testing.T) {
	var h Heap[uint64]
	h.Push(1, 1)
	h.Push(2, 2)
	out := h.Drain(nil)
	if len(out) != 2 || h.Len() != 0 {
		t.Fatalf("drain returned %v, heap len %d", out, h.Len())
	}
}

// FuzzAgainstModel drives the heap and the model with the same random
// operations and requires identical pops. Run longer by hand with
// `go test ./core/timerheap -fuzz FuzzAgainstModel -fuzztime 5m`.
func FuzzAgainstModel(f *testing.F) {
	f.Add([]byte{0, 5, 0, 5, 1, 2, 0, 1, 1, 1})
	f.Add([]byte{0, 255, 0, 0, 2, 3, 0, 7, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var h Heap[uint64]
		var m model
		tok := uint64(0)
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%4, ops[i+1]
			switch op {
			case 0, 3: // push; small deadlines force many ties
				when := float64(arg % 16)
				if arg == 255 {
					when = math.NaN()
				}
				h.Push(when, tok)
				m.push(when, tok)
				tok++
			case 1: // pop
				if len(m.items) == 0 {
					continue
				}
				got, want := h.Pop(), m.pop()
				if got != want {
					t.Fatalf("pop: got %+v, want %+v", got, want)
				}
			case 2: // filter out tokens divisible by arg%5+2
				d := uint64(arg%5 + 2)
				keep := func(tok uint64) bool { return tok%d != 0 }
				h.Filter(keep, nil)
				kept := m.items[:0]
				for _, e := range m.items {
					if keep(e.Token) {
						kept = append(kept, e)
					}
				}
				m.items = kept
			}
			if h.Len() != len(m.items) {
				t.Fatalf("len: heap %d, model %d", h.Len(), len(m.items))
			}
		}
		for len(m.items) > 0 {
			if got, want := h.Pop(), m.pop(); got != want {
				t.Fatalf("final pop: got %+v, want %+v", got, want)
			}
		}
	})
}
