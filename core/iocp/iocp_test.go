//go:build windows

// The iocp backend against the reactor conformance suite, and woken the
// way foreign code wakes it (through its WakeHandle, without Wake).
package iocp

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/zloopgo/zloopgo/core/poll"
	"github.com/zloopgo/zloopgo/core/poll/polltest"
	"golang.org/x/sys/windows"
)

func TestConformance(t *testing.T) {
	polltest.Run(t, func() (poll.Backend, error) { return New() })
}

func TestPostingToTheWakeHandleEndsABlockedWait(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h := p.WakeHandle()
	if h.Kind != poll.WakeIOCP {
		t.Fatalf("wake handle kind %d, want WakeIOCP", h.Kind)
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
	if err := windows.PostQueuedCompletionStatus(windows.Handle(h.Handle), 0, h.Ident, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("posting to the completion port did not end Wait(-1)")
	}
}

func TestRegisteringANonSocketFails(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ev, err := windows.CreateEvent(nil, 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer windows.CloseHandle(ev)
	// WSAIoctl refuses a handle that is no socket; where it does not (Wine
	// answers SIO_BASE_HANDLE for any handle), the driver refuses the poll.
	err = p.Register(int(ev), 1, poll.Readable)
	if err == nil {
		t.Fatal("an event handle was accepted for polling")
	}
	t.Logf("refused with: %v", err)
	var events [4]poll.Event
	if _, err := p.Wait(events[:], 0); err != nil {
		t.Fatalf("Wait after the refused Register: %v", err)
	}
}
