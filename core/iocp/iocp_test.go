//go:build windows

// The iocp backend against the reactor conformance suite, and what only
// iocp has. Its WakeHandle, which C uses to wake it, is tested by
// capi/waker's test against this backend.

package iocp

import (
	"testing"

	"github.com/zloopgo/zloopgo/core/poll"
	"github.com/zloopgo/zloopgo/core/poll/polltest"
	"golang.org/x/sys/windows"
)

func TestConformance(t *testing.T) {
	polltest.Run(t, func() (poll.Backend, error) { return New() })
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
