package platformtest

import (
	"testing"
	"time"

	"github.com/zloopgo/zloopgo/core/epoll"
	"github.com/zloopgo/zloopgo/core/poll"
	"golang.org/x/sys/unix"
)

// The clock is time.monotonic()'s and Go's runtime's: CLOCK_MONOTONIC.
func TestClockIsMonotonic(t *testing.T) {
	var before, after, res unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &before)
	now := MonotonicNs()
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &after)
	if now < before.Nano() || now > after.Nano() {
		t.Fatalf("zl_sys_monotonic_ns read %d, outside CLOCK_MONOTONIC's %d..%d", now, before.Nano(), after.Nano())
	}
	unix.ClockGetres(unix.CLOCK_MONOTONIC, &res)
	if ClockResolution() != time.Duration(res.Nano()) {
		t.Fatalf("zl_sys_clock_resolution %v, CLOCK_MONOTONIC's %v", ClockResolution(), time.Duration(res.Nano()))
	}
}

// The engine's epoll backend and the descriptor C is handed (PeekEpoll).
func enginePoller(t *testing.T) (*epoll.Poller, int) {
	t.Helper()
	p, err := epoll.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	h := p.PeekHandle()
	if h.Kind != poll.PeekEpoll {
		t.Fatalf("core/epoll's peek kind is %v, not the PeekEpoll platform_linux.h uses", h.Kind)
	}
	return p, int(h.Handle)
}

func wait(t *testing.T, p *epoll.Poller) []poll.Event {
	t.Helper()
	events := make([]poll.Event, 16)
	n, err := p.Wait(events, 0)
	if err != nil {
		t.Fatal(err)
	}
	return events[:n]
}

// What C registers, core/epoll's Wait reports as its own registration
// would be: the descriptor as the token, the interest as the engine's bits.
func TestWatchAsTheEngineReportsIt(t *testing.T) {
	p, poller := enginePoller(t)
	a, b := socketPair(t)
	if err, delta := Watch(poller, a, 0, 1); err != 0 || delta != 1 {
		t.Fatalf("watch for reading: %v, count change %d", err, delta)
	}
	if got := wait(t, p); len(got) != 0 {
		t.Fatalf("nothing sent, the engine's wait reported %v", got)
	}
	unix.Write(b, []byte("x"))
	if got := wait(t, p); len(got) != 1 || got[0].Token != poll.Token(a) || got[0].Mask != poll.Readable {
		t.Fatalf("the engine's wait reported %v; want token %d readable", got, a)
	}
	if err, delta := Watch(poller, a, 1, 3); err != 0 || delta != 0 {
		t.Fatalf("watch for both: %v, count change %d", err, delta)
	}
	if got := wait(t, p); len(got) != 1 || got[0].Mask != poll.Readable|poll.Writable {
		t.Fatalf("watched for both, the engine's wait reported %v", got)
	}
	if err, delta := Watch(poller, a, 3, 0); err != 0 || delta != -1 {
		t.Fatalf("unwatch: %v, count change %d", err, delta)
	}
	if got := wait(t, p); len(got) != 0 {
		t.Fatalf("unwatched, the engine's wait reported %v", got)
	}
	// A removal the kernel refuses (a descriptor closed, so dropped) is no
	// error, and is counted; an addition it refuses is an error, not counted.
	c, _ := socketPair(t)
	if err, _ := Watch(poller, c, 0, 1); err != 0 {
		t.Fatal(err)
	}
	unix.Close(c)
	if err, delta := Watch(poller, c, 1, 0); err != 0 || delta != -1 {
		t.Fatalf("unwatch a closed descriptor: %v, count change %d; want none, -1", err, delta)
	}
	if err, delta := Watch(poller, c, 0, 1); err != unix.EBADF || delta != 0 {
		t.Fatalf("watch a closed descriptor: %v, count change %d; want EBADF, 0", err, delta)
	}
}

// What core/epoll registered, C's look reports as the engine's wait would;
// the waker's event carries the reserved token.
func TestLookAsTheEngineWaits(t *testing.T) {
	p, poller := enginePoller(t)
	a, b := socketPair(t)
	if err := p.Register(a, poll.Token(a), poll.Readable); err != nil {
		t.Fatal(err)
	}
	if got, ok := Look(poller); !ok || len(got) != 0 {
		t.Fatalf("nothing ready, the look found %v (ok %v)", got, ok)
	}
	unix.Write(b, []byte("x"))
	got, ok := Look(poller)
	if !ok || len(got) != 1 || got[0] != (Event{uint64(a), 1}) {
		t.Fatalf("the look found %v (ok %v); want token %d readable", got, ok, a)
	}
	// level-triggered: the look left it for the engine's wait
	if w := wait(t, p); len(w) != 1 || w[0].Token != poll.Token(a) {
		t.Fatalf("after the look, the engine's wait reported %v", w)
	}
	// a hang-up makes both sides ready, as core/epoll reports it
	unix.Close(b)
	got, _ = Look(poller)
	if len(got) != 1 || got[0].Interest != 3 {
		t.Fatalf("after the peer closed, the look found %v; want readable and writable", got)
	}
	if err := p.Deregister(a); err != nil {
		t.Fatal(err)
	}
	if err := p.Wake(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for {
		got, _ = Look(poller)
		if len(got) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(got) != 1 || got[0].Token != uint64(poll.ReservedToken) {
		t.Fatalf("after a wake-up, the look found %v; want the reserved token", got)
	}
}
