//go:build windows

// The iocp backend against the reactor conformance suite, and what only
// iocp has. Its WakeHandle, which C uses to wake it, is tested by
// capi/waker's test against this backend.

package iocp

import (
	"testing"
	"time"
	"unsafe"

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

// A connected datagram socket whose datagram earned an ICMP port
// unreachable still reports the datagrams that arrive after it. Under
// Wine the error comes as AFD_POLL_CONNECT_FAIL, after which a poll
// outstanding on the socket never completes (recheckAfter): without the
// rechecked polls the datagram at the end is never reported there. On
// Windows (not tried) the error should come as AFD_POLL_RECEIVE, with
// WSAECONNRESET from the receive; the test asks only that some event
// comes and that the datagram after it is reported.
func TestADatagramSocketReportsDatagramsAfterAnICMPError(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	closed := udpSocket(t, nil)
	addr, err := windows.Getsockname(closed)
	if err != nil {
		t.Fatal(err)
	}
	windows.Closesocket(closed) // nothing listens there: the host answers with ICMP
	ours := udpSocket(t, nil)
	if err := windows.Connect(ours, addr); err != nil {
		t.Fatal(err)
	}
	const tok = 7
	if err := p.Register(int(ours), tok, poll.Readable); err != nil {
		t.Fatal(err)
	}
	send(t, ours, []byte("to nobody"))
	if !reported(t, p, tok) {
		t.Fatal("no event after the datagram to a closed port")
	}
	drain(t, ours) // the error, if a receive is what reports it
	// The next poll goes out now, before the datagram comes (as the loop
	// waits after its read); a poll submitted with it queued sees it.
	var events [8]poll.Event
	if _, err := p.Wait(events[:], 0); err != nil {
		t.Fatal(err)
	}
	back := udpSocket(t, addr)
	oursAddr, err := windows.Getsockname(ours)
	if err != nil {
		t.Fatal(err)
	}
	if err := windows.Sendto(back, []byte("back"), 0, oursAddr); err != nil {
		t.Fatal(err)
	}
	if !reported(t, p, tok) {
		t.Fatal("the datagram after the ICMP error was never reported")
	}
	if got := drain(t, ours); got != "back" {
		t.Fatalf("received %q, want \"back\"", got)
	}
}

// udpSocket is a non-blocking UDP socket bound to addr (nil: a loopback
// port of the system's choice), closed at the test's end.
func udpSocket(t *testing.T, addr windows.Sockaddr) windows.Handle {
	t.Helper()
	s, err := windows.Socket(windows.AF_INET, windows.SOCK_DGRAM, windows.IPPROTO_UDP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { windows.Closesocket(s) })
	on := uint32(1)
	if err := windows.WSAIoctl(s, fionbio, (*byte)(unsafe.Pointer(&on)), 4, nil, 0, new(uint32), nil, 0); err != nil {
		t.Fatalf("FIONBIO: %v", err)
	}
	if addr == nil {
		addr = &windows.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}
	}
	if err := windows.Bind(s, addr); err != nil {
		t.Fatal(err)
	}
	return s
}

const fionbio = 0x8004667e // set non-blocking mode (an ioctlsocket command)

func send(t *testing.T, s windows.Handle, b []byte) {
	t.Helper()
	buf := windows.WSABuf{Len: uint32(len(b)), Buf: &b[0]}
	var sent uint32
	if err := windows.WSASend(s, &buf, 1, &sent, 0, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// drain receives until the socket would block and returns the last
// datagram received ("" if none); errors a receive reports are skipped.
func drain(t *testing.T, s windows.Handle) string {
	t.Helper()
	last := ""
	buf := make([]byte, 64)
	for range 16 {
		n, _, err := windows.Recvfrom(s, buf, 0)
		switch {
		case err == windows.WSAEWOULDBLOCK:
			return last
		case err != nil:
			t.Logf("receive: %v", err)
		default:
			last = string(buf[:n])
		}
	}
	t.Fatal("the socket never stopped being readable")
	return last
}

// reported waits up to 5 s for an event of token tok.
func reported(t *testing.T, p *Poller, tok poll.Token) bool {
	t.Helper()
	return reportedWithin(t, p, tok, 5*time.Second)
}

// reportedWithin waits up to d for an event of token tok.
func reportedWithin(t *testing.T, p *Poller, tok poll.Token, d time.Duration) bool {
	t.Helper()
	var events [8]poll.Event
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		n, err := p.Wait(events[:], 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events[:n] {
			if e.Token == tok {
				return true
			}
		}
	}
	return false
}

// A watched socket closed without Deregister between a poll's completion
// and the next, whose handle value another object (here an event) takes
// before that Wait, is dropped, as a closed socket whose value is free
// is. Under Wine the driver refuses the poll of the event with a status
// of its own (STATUS_OBJECT_TYPE_MISMATCH; a file's made zloopgo's loop
// raise PermissionError, ERROR_GEN_FAILURE, from its run), which Wait
// returned before.
func TestAClosedSocketWhoseValueWasTakenIsDropped(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s := udpSocket(t, nil)
	addr, err := windows.Getsockname(s)
	if err != nil {
		t.Fatal(err)
	}
	const tok = 9
	if err := p.Register(int(s), tok, poll.Readable); err != nil {
		t.Fatal(err)
	}
	peer := udpSocket(t, nil)
	if err := windows.Sendto(peer, []byte("x"), 0, addr); err != nil {
		t.Fatal(err)
	}
	if !reported(t, p, tok) {
		t.Fatal("no event for a readable socket")
	}
	windows.Closesocket(s)
	// the lowest free value under Wine: the socket's, there
	ev, err := windows.CreateEvent(nil, 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer windows.CloseHandle(ev)
	t.Logf("socket %#x closed, event %#x", s, ev)
	var events [8]poll.Event
	if _, err := p.Wait(events[:], 0); err != nil {
		t.Fatalf("Wait after the socket's close: %v", err)
	}
}

// A watched socket closed without Deregister after its poll reported (so
// no poll of it is out, as while the loop runs its callbacks), whose
// handle value another socket takes before the next Wait, is not polled
// as the closed one's: the new socket's readiness never reaches the
// closed one's token, and Reregister calls it closed, as epoll does.
// Before the close watch, the next Wait submitted the closed socket's
// poll on the value and reported the new socket's datagram as its.
func TestAClosedSocketWhoseValueAnotherSocketTookIsNotPolled(t *testing.T) {
	for _, reregister := range []bool{false, true} {
		name := "next Wait"
		if reregister {
			name = "Reregister first"
		}
		t.Run(name, func(t *testing.T) {
			p, err := New()
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			closed := rawUDPSocket(t)
			peer := udpSocket(t, nil)
			const tok = 11
			if err := p.Register(int(closed), tok, poll.Readable); err != nil {
				t.Fatal(err)
			}
			sendTo(t, peer, closed, "to the first")
			if !reported(t, p, tok) {
				t.Fatal("no event for a readable socket")
			}
			windows.Closesocket(closed)
			taker := socketOnValue(t, closed)
			sendTo(t, peer, taker, "to the second")
			if reregister {
				err := p.Reregister(int(closed), tok, poll.Readable|poll.Writable)
				if err == nil {
					t.Fatal("Reregister of a closed socket's value, another socket's now, succeeded")
				}
				t.Logf("Reregister: %v", err)
			}
			if reportedWithin(t, p, tok, time.Second) {
				t.Fatalf("socket %#x's readiness was reported for the closed socket on its value", taker)
			}
			if !reregister {
				if err := p.Reregister(int(closed), tok, poll.Readable); err == nil {
					t.Fatal("Reregister of a closed socket's value, another socket's now, succeeded")
				}
			}
			// The datagram is there: registered as itself, the new socket
			// is reported.
			if err := p.Register(int(taker), tok+1, poll.Readable); err != nil {
				t.Fatal(err)
			}
			if !reported(t, p, tok+1) {
				t.Fatal("the new socket, registered, was not reported readable")
			}
		})
	}
}

// rawUDPSocket is udpSocket without the close at the test's end: the
// test closes it, and its value is another's after.
func rawUDPSocket(t *testing.T) windows.Handle {
	t.Helper()
	s, err := windows.Socket(windows.AF_INET, windows.SOCK_DGRAM, windows.IPPROTO_UDP)
	if err != nil {
		t.Fatal(err)
	}
	if err := windows.Bind(s, &windows.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		windows.Closesocket(s)
		t.Fatal(err)
	}
	return s
}

// socketOnValue makes UDP sockets until one takes handle value v (Wine
// and Windows hand a freed value out again, though another thread may
// take it first), keeping the others open till the test's end.
func socketOnValue(t *testing.T, v windows.Handle) windows.Handle {
	t.Helper()
	for range 64 {
		if s := udpSocket(t, nil); s == v {
			return s
		}
	}
	t.Fatalf("no new socket took the closed socket's value %#x", v)
	return 0
}

func sendTo(t *testing.T, from, to windows.Handle, what string) {
	t.Helper()
	addr, err := windows.Getsockname(to)
	if err != nil {
		t.Fatal(err)
	}
	if err := windows.Sendto(from, []byte(what), 0, addr); err != nil {
		t.Fatal(err)
	}
}
