//go:build linux

// Tests of the epoll backend against real pipes and eventfds.

package epoll

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/zloopgo/zloopgo/core/poll"
	"golang.org/x/sys/unix"
)

const (
	readable = poll.Readable
	writable = poll.Writable
)

func newPoller(t *testing.T) *Poller {
	t.Helper()
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// fds tracks the descriptors one test opened, so that cleanup closes each
// still-open one exactly once and never a number the test closed and the
// process reused.
type fds map[int]bool

func newFDs(t *testing.T) fds {
	m := fds{}
	t.Cleanup(func() {
		for fd, open := range m {
			if open {
				unix.Close(fd)
			}
		}
	})
	return m
}

// pipe opens a non-blocking pipe.
func (m fds) pipe(t *testing.T) (r, w int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	m[p[0]], m[p[1]] = true, true
	return p[0], p[1]
}

func (m fds) close(fd int) {
	if m[fd] {
		m[fd] = false
		unix.Close(fd)
	}
}

func write(t *testing.T, fd int) {
	t.Helper()
	if _, err := unix.Write(fd, []byte("x")); err != nil {
		t.Fatal(err)
	}
}

// wait runs one Wait and returns the reported events by token.
func wait(t *testing.T, p *Poller, timeout time.Duration) map[poll.Token]poll.Interest {
	t.Helper()
	var events [64]poll.Event
	n, err := p.Wait(events[:], timeout)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	got := map[poll.Token]poll.Interest{}
	for _, ev := range events[:n] {
		tok, mask := ev.Token, ev.Mask
		if tok == wakeToken {
			t.Fatal("the waker's token was reported")
		}
		if _, dup := got[tok]; dup {
			t.Fatalf("token %#x reported twice", tok)
		}
		got[tok] = mask
	}
	return got
}

func expect(t *testing.T, got map[poll.Token]poll.Interest, want map[poll.Token]poll.Interest) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for tok, mask := range want {
		if got[tok] != mask {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
}

const bigToken = 1<<40 | 7 // both halves of the 64-bit user data in use

func TestReadableAfterWrite(t *testing.T) {
	p := newPoller(t)
	fd := newFDs(t)
	r, w := fd.pipe(t)
	if err := p.Register(r, bigToken, readable); err != nil {
		t.Fatal(err)
	}
	expect(t, wait(t, p, 0), nil)
	write(t, w)
	expect(t, wait(t, p, 0), map[poll.Token]poll.Interest{bigToken: readable})
	// Level-triggered: still readable until drained.
	expect(t, wait(t, p, 0), map[poll.Token]poll.Interest{bigToken: readable})
}

func TestWritable(t *testing.T) {
	p := newPoller(t)
	fd := newFDs(t)
	_, w := fd.pipe(t)
	if err := p.Register(w, 5, writable); err != nil {
		t.Fatal(err)
	}
	expect(t, wait(t, p, 0), map[poll.Token]poll.Interest{5: writable})
}

func TestRegisterTwiceFails(t *testing.T) {
	p := newPoller(t)
	fd := newFDs(t)
	r, _ := fd.pipe(t)
	if err := p.Register(r, 1, readable); err != nil {
		t.Fatal(err)
	}
	if err := p.Register(r, 1, readable); !errors.Is(err, unix.EEXIST) {
		t.Fatalf("second Register: %v, want EEXIST", err)
	}
}

func TestReregisterChangesInterestAndToken(t *testing.T) {
	p := newPoller(t)
	fd := newFDs(t)
	_, w := fd.pipe(t)
	if err := p.Register(w, 1, readable); err != nil {
		t.Fatal(err)
	}
	expect(t, wait(t, p, 0), nil) // a write end is never readable
	if err := p.Reregister(w, 2, writable); err != nil {
		t.Fatal(err)
	}
	expect(t, wait(t, p, 0), map[poll.Token]poll.Interest{2: writable})
	if err := p.Reregister(w, 3, readable); err != nil {
		t.Fatal(err)
	}
	expect(t, wait(t, p, 0), nil)
	if err := p.Reregister(w, 4, readable|writable); err != nil {
		t.Fatal(err)
	}
	expect(t, wait(t, p, 0), map[poll.Token]poll.Interest{4: writable})
}

// epoll forgets a descriptor when its file is closed; a new file that gets
// the same number is unknown to it. Reregister reports that (ENOENT), as
// asyncio's EpollSelector.modify does, and leaves the new file unwatched;
// Register then watches it.
func TestReregisterOnReusedDescriptorFails(t *testing.T) {
	p := newPoller(t)
	fd := newFDs(t)
	r1, _ := fd.pipe(t)
	if err := p.Register(r1, 1, readable); err != nil {
		t.Fatal(err)
	}
	r2, w2 := fd.pipe(t)
	// Put a different pipe's read end under r1's number; dup3 closes the
	// old file, which drops its epoll registration.
	if err := unix.Dup3(r2, r1, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	if err := p.Reregister(r1, 9, readable); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("Reregister on a reused descriptor gave %v, want ENOENT", err)
	}
	write(t, w2)
	expect(t, wait(t, p, 0), nil)
	if err := p.Register(r1, 9, readable); err != nil {
		t.Fatalf("Register after the failed Reregister: %v", err)
	}
	expect(t, wait(t, p, 0), map[poll.Token]poll.Interest{9: readable})
}

func TestDeregister(t *testing.T) {
	p := newPoller(t)
	fd := newFDs(t)
	r, w := fd.pipe(t)
	if err := p.Register(r, 1, readable); err != nil {
		t.Fatal(err)
	}
	write(t, w)
	if err := p.Deregister(r); err != nil {
		t.Fatal(err)
	}
	expect(t, wait(t, p, 0), nil)
	// Never registered (epoll says ENOENT): not an error either.
	if err := p.Deregister(w); err != nil {
		t.Fatalf("Deregister of an unwatched descriptor: %v", err)
	}
}

func TestDeregisterClosedDescriptorIsNotAnError(t *testing.T) {
	p := newPoller(t)
	fd := newFDs(t)
	r, _ := fd.pipe(t)
	if err := p.Register(r, 1, readable); err != nil {
		t.Fatal(err)
	}
	fd.close(r)
	if err := p.Deregister(r); err != nil {
		t.Fatalf("Deregister after close: %v", err)
	}
}

func TestZeroTimeoutReturnsAtOnce(t *testing.T) {
	p := newPoller(t)
	fd := newFDs(t)
	r, _ := fd.pipe(t)
	if err := p.Register(r, 1, readable); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n, err := p.Wait(make([]poll.Event, 16), 0)
	if err != nil || n != 0 {
		t.Fatalf("Wait(0): %d events, %v", n, err)
	}
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Fatalf("Wait(0) took %v", d)
	}
}

func TestTimedWaitWaits(t *testing.T) {
	p := newPoller(t)
	for _, timeout := range []time.Duration{20 * time.Millisecond, 100 * time.Microsecond} {
		// A signal (Go's preemption, the GC) may end a wait early with no
		// events, as the contract allows; one of a few tries must be whole.
		var d time.Duration
		for try := 0; try < 5; try++ {
			start := time.Now()
			n, err := p.Wait(make([]poll.Event, 16), timeout)
			d = time.Since(start)
			if err != nil || n != 0 {
				t.Fatalf("Wait(%v): %d events, %v", timeout, n, err)
			}
			if d >= timeout {
				break
			}
		}
		// A sub-millisecond wait rounds up to 1ms rather than down to a poll.
		min := max(timeout, time.Millisecond) * 9 / 10
		if d < min || d > timeout+time.Second {
			t.Fatalf("Wait(%v) returned after %v", timeout, d)
		}
	}
}

func TestWakeIsConsumedAndNeverReported(t *testing.T) {
	p := newPoller(t)
	fd := newFDs(t)
	r, w := fd.pipe(t)
	if err := p.Register(r, 3, readable); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ { // wake-ups coalesce
		if err := p.Wake(); err != nil {
			t.Fatal(err)
		}
	}
	write(t, w)
	expect(t, wait(t, p, 0), map[poll.Token]poll.Interest{3: readable})
	if err := p.Deregister(r); err != nil {
		t.Fatal(err)
	}
	// The eventfd was drained: a timed wait now waits.
	start := time.Now()
	expect(t, wait(t, p, 30*time.Millisecond), nil)
	if d := time.Since(start); d < 25*time.Millisecond {
		t.Fatalf("wait after a consumed wake-up returned after %v", d)
	}
}

// asyncio's EpollSelector wakes both readers and writers on EPOLLHUP and
// EPOLLERR so that whichever callback is waiting sees the error.
func TestHangUpAndErrorReportBothBits(t *testing.T) {
	p := newPoller(t)
	fd := newFDs(t)
	r1, w1 := fd.pipe(t)
	r2, w2 := fd.pipe(t)
	if err := p.Register(r1, 1, readable); err != nil {
		t.Fatal(err)
	}
	if err := p.Register(w2, 2, writable); err != nil {
		t.Fatal(err)
	}
	fd.close(w1) // r1 sees EPOLLHUP
	fd.close(r2) // w2 sees EPOLLERR
	expect(t, wait(t, p, 0), map[poll.Token]poll.Interest{1: readable | writable, 2: readable | writable})
}

func TestManyEventsGrowTheBuffer(t *testing.T) {
	p := newPoller(t)
	fd := newFDs(t)
	const n = 150 // more than the initial buffer of 128
	for i := 0; i < n; i++ {
		_, w := fd.pipe(t)
		if err := p.Register(w, poll.Token(i), writable); err != nil {
			t.Fatal(err)
		}
	}
	got, err := p.Wait(make([]poll.Event, 256), 0)
	if err != nil || got != n {
		t.Fatalf("Wait(256): %d events, %v; want %d", got, err, n)
	}
	got, err = p.Wait(make([]poll.Event, 10), 0)
	if err != nil || got != 10 {
		t.Fatalf("Wait(10): %d events, %v; want 10", got, err)
	}
}

func TestCloseReleasesDescriptors(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	epfd, wakefd := p.epfd, int(p.WakeHandle().Handle)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, fd := range []int{epfd, wakefd} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
			t.Errorf("descriptor %d still open after Close (fcntl: %v)", fd, err)
		}
	}
}

// A zero-timeout Wait is a raw system call; its errors must still surface
// like those of a blocking one.
func TestWaitOnAClosedPollerFails(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, timeout := range []time.Duration{0, time.Millisecond} {
		if _, err := p.Wait(make([]poll.Event, 16), timeout); !errors.Is(err, unix.EBADF) {
			t.Errorf("Wait(%v) on a closed poller: %v, want EBADF", timeout, err)
		}
	}
}

// The waker's token is the reserved one: registering a descriptor with it
// fails before epoll is asked (a later Register of the same descriptor is
// not EEXIST), and a Reregister with it leaves the old token in place.
func TestTheWakersTokenIsRefused(t *testing.T) {
	p := newPoller(t)
	fd := newFDs(t)
	r, w := fd.pipe(t)
	if err := p.Register(r, wakeToken, readable); !errors.Is(err, poll.ErrReservedToken) {
		t.Fatalf("Register with the waker's token: %v, want ErrReservedToken", err)
	}
	if err := p.Register(r, 5, readable); err != nil {
		t.Fatalf("Register after the refused one: %v", err)
	}
	if err := p.Reregister(r, wakeToken, readable|writable); !errors.Is(err, poll.ErrReservedToken) {
		t.Fatalf("Reregister with the waker's token: %v, want ErrReservedToken", err)
	}
	if err := p.Wake(); err != nil {
		t.Fatal(err)
	}
	expect(t, wait(t, p, 0), nil) // a wake-up alone reports nothing
	write(t, w)
	expect(t, wait(t, p, 0), map[poll.Token]poll.Interest{5: readable})
}

// peekNow looks at the poller as its PeekHandle says (PeekEpoll), as the
// C adapter does before running a batch alone.
func peekNow(t *testing.T, p *Poller) bool {
	t.Helper()
	h := p.PeekHandle()
	if h.Kind != poll.PeekEpoll {
		t.Fatalf("peek kind %v, want PeekEpoll", h.Kind)
	}
	var ev [8]unix.EpollEvent // room for every event a test makes ready
	n, err := unix.EpollWait(int(h.Handle), ev[:], 0)
	if err != nil {
		t.Fatalf("epoll_wait: %v", err)
	}
	return n > 0
}

// A look with room for every ready event leaves the order in which the
// next Wait reports them as it was: the order they became ready in.
func TestALookLeavesTheOrderOfTheNextWait(t *testing.T) {
	p := newPoller(t)
	fd := newFDs(t)
	var writers []int
	for tok := poll.Token(1); tok <= 4; tok++ {
		r, w := fd.pipe(t)
		if err := p.Register(r, tok, readable); err != nil {
			t.Fatal(err)
		}
		writers = append(writers, w)
	}
	for _, i := range []int{2, 0, 3, 1} { // tokens 3, 1, 4, 2 become ready in this order
		write(t, writers[i])
	}
	if !peekNow(t, p) {
		t.Fatal("the look found nothing with four descriptors ready")
	}
	var events [8]poll.Event
	n, err := p.Wait(events[:], 0)
	if err != nil {
		t.Fatal(err)
	}
	var order []poll.Token
	for _, ev := range events[:n] {
		order = append(order, ev.Token)
	}
	if want := []poll.Token{3, 1, 4, 2}; !slices.Equal(order, want) {
		t.Fatalf("after a look the wait reported %v, want the order they became ready in, %v", order, want)
	}
}

// A look finds something exactly while a zero-timeout Wait would report
// something: a descriptor's readiness (still there after the look and
// after a Wait, level-triggered) or a pending wake-up, and nothing once
// both are consumed.
func TestPeekFindsWhatAWaitWouldReport(t *testing.T) {
	p := newPoller(t)
	fd := newFDs(t)
	r, w := fd.pipe(t)
	if err := p.Register(r, 4, readable); err != nil {
		t.Fatal(err)
	}
	if peekNow(t, p) {
		t.Fatal("the look found an event with nothing ready")
	}
	write(t, w)
	for i := 0; i < 2; i++ {
		if !peekNow(t, p) {
			t.Fatalf("the look found nothing with a descriptor ready (look %d)", i)
		}
	}
	expect(t, wait(t, p, 0), map[poll.Token]poll.Interest{4: readable})
	if !peekNow(t, p) {
		t.Fatal("the look found nothing after a Wait left the descriptor ready")
	}
	var b [1]byte
	if _, err := unix.Read(r, b[:]); err != nil {
		t.Fatal(err)
	}
	if peekNow(t, p) {
		t.Fatal("the look found an event once the descriptor was drained")
	}
	if err := p.Wake(); err != nil {
		t.Fatal(err)
	}
	if !peekNow(t, p) {
		t.Fatal("the look found nothing with a wake-up pending")
	}
	expect(t, wait(t, p, 0), nil)
	if peekNow(t, p) {
		t.Fatal("the look found an event after the Wait consumed the wake-up")
	}
}
