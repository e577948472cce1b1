// Tests of the room the engine's waits have for events: enough for every
// event that can be ready at once, as asyncio's selectors ask for, so
// that no ready descriptor's callback is put off to the next iteration.

package core_test

import (
	"testing"

	"github.com/zloopgo/zloopgo/core"
)

func TestTheEventBufferGrowsWithTheDescriptorsWatched(t *testing.T) {
	e, h, r := setup(t)
	h.ready = true
	e.Watch(1) // else the wait is skipped
	runOnce(t, e)
	if got := r.room[len(r.room)-1]; got != 256 {
		t.Fatalf("first wait had room for %d events, want 256", got)
	}
	e.Watch(127) // 128 watched: 257 events can be ready
	runOnce(t, e)
	if got := r.room[len(r.room)-1]; got < 257 {
		t.Fatalf("with 128 descriptors watched the wait had room for %d events, want 257", got)
	}
	e.Watch(-127)
	runOnce(t, e)
	if got := r.room[len(r.room)-1]; got < 257 {
		t.Fatalf("the buffer shrank to %d once the descriptors were removed", got)
	}
}

// bufferingHost owns the event buffer and records what it is asked for.
type bufferingHost struct {
	*fakeHost
	buf   []core.Event
	asked []int
	grows bool
}

func (h *bufferingHost) EventBuffer(n int) []core.Event {
	h.asked = append(h.asked, n)
	if h.grows && n > len(h.buf) {
		h.buf = make([]core.Event, n)
	}
	return h.buf
}

func TestTheHostIsAskedForMoreRoomOncePerSize(t *testing.T) {
	for _, grows := range []bool{true, false} {
		h := &bufferingHost{fakeHost: newFakeHost(t), buf: make([]core.Event, 300), grows: grows}
		r := &fakeReactor{log: h.log}
		e := core.NewEngineWithReactor(h, r, 1e-9)
		h.ready = true
		e.Watch(149) // 299 events: the 300 there are suffice
		runOnce(t, e)
		e.Watch(1) // 301
		runOnce(t, e)
		runOnce(t, e)
		want := []int{256, 301}
		if len(h.asked) != len(want) || h.asked[0] != want[0] || h.asked[1] != want[1] {
			t.Fatalf("grows %v: asked for %v, want %v (at creation, then once the watched outgrew it)", grows, h.asked, want)
		}
		wantRoom := 300
		if grows {
			wantRoom = 301
		}
		if got := r.room[len(r.room)-1]; got != wantRoom {
			t.Fatalf("grows %v: the last wait had room for %d, want the host's buffer, %d", grows, got, wantRoom)
		}
	}
}
