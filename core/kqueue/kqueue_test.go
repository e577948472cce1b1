//go:build darwin || freebsd

// The kqueue backend against the reactor conformance suite, and woken the
// way foreign code wakes it (through its WakeHandle, without Wake).
package kqueue

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/zloopgo/zloopgo/core/poll"
	"github.com/zloopgo/zloopgo/core/poll/polltest"
	"golang.org/x/sys/unix"
)

func TestConformance(t *testing.T) {
	polltest.Run(t, func() (poll.Backend, error) { return New() })
}

func TestTriggeringTheWakeHandleEndsABlockedWait(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h := p.WakeHandle()
	if h.Kind != poll.WakeKqueueUser {
		t.Fatalf("wake handle kind %d, want WakeKqueueUser", h.Kind)
	}
	var woken atomic.Bool
	done := make(chan error, 1)
	go func() {
		var events [4]poll.Event
		for {
			n, err := p.Wait(events[:], -1)
			if err != nil || n != 0 || woken.Load() {
				done <- err
				return
			}
		}
	}()
	time.Sleep(20 * time.Millisecond)
	woken.Store(true)
	var ev [1]unix.Kevent_t
	unix.SetKevent(&ev[0], int(h.Ident), unix.EVFILT_USER, 0)
	ev[0].Fflags = unix.NOTE_TRIGGER
	if _, err := unix.Kevent(int(h.Handle), ev[:], nil, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("triggering the EVFILT_USER event did not end Wait(-1)")
	}
}

func TestTokensOfLargeDescriptorNumbers(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var fds [2]int
	if err := unix.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	// A number past the token table's first growth.
	if err := unix.Dup2(fds[1], 900); err != nil {
		t.Skip(err)
	}
	defer unix.Close(900)
	if err := p.Register(900, 1<<63|5, poll.Writable); err != nil {
		t.Fatal(err)
	}
	var events [4]poll.Event
	n, err := p.Wait(events[:], time.Second)
	if err != nil || n != 1 || events[0].Token != 1<<63|5 || events[0].Mask != poll.Writable {
		t.Fatalf("Wait: %v %v", events[:n], err)
	}
}
