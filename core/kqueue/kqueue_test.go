//go:build darwin || freebsd

// The kqueue backend against the reactor conformance suite, and what only
// kqueue has. Its WakeHandle, which C uses to wake it, is tested by
// capi/waker's test against this backend.

package kqueue

import (
	"testing"
	"time"

	"github.com/zloopgo/zloopgo/core/poll"
	"github.com/zloopgo/zloopgo/core/poll/polltest"
	"golang.org/x/sys/unix"
)

func TestConformance(t *testing.T) {
	polltest.Run(t, func() (poll.Backend, error) { return New() })
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
