// Package polltest is the reactor conformance suite: the behaviour of the
// poll.Backend contract, written once and run by each backend's tests
// against real sockets and pipes (Run).
//
// It knows the contract and the sockets of the system it runs on (through
// Go's net package and sys_*.go); it knows nothing of any backend's
// internals, and only a test binary imports it.
package polltest

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/zloopgo/zloopgo/core/poll"
)

// Run runs every conformance test against backends made by newBackend,
// one fresh backend per test.
func Run(t *testing.T, newBackend func() (poll.Backend, error)) {
	open := func(t *testing.T) poll.Backend {
		t.Helper()
		b, err := newBackend()
		if err != nil {
			t.Fatalf("opening the backend: %v", err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	for _, tc := range []struct {
		name string
		run  func(*testing.T, poll.Backend)
	}{
		{"SocketReadableAfterWrite", testSocketReadable},
		{"SocketWritable", testSocketWritable},
		{"PipeReadableAndWritable", testPipe},
		{"ListenerReadableOnConnect", testListener},
		{"PeerClose", testPeerClose},
		{"PeerReset", testPeerReset},
		{"ConnectRefused", testConnectRefused},
		{"DeregisterThenClose", testDeregisterThenClose},
		{"DeregisterAfterClose", testDeregisterAfterClose},
		{"ModifyInterestAndToken", testModify},
		{"AddedKindReportedByTheNextWait", testAddedKindAtOnce},
		{"AnyTokenValue", testAnyToken},
		{"ReservedTokenRefused", testReservedToken},
		{"WakeWhileWaiting", testWakeWhileWaiting},
		{"WakeBeforeWaitCoalesces", testWakeCoalesces},
		{"ZeroTimeout", testZeroTimeout},
		{"TimedWaitReturnsOnTime", testTimedWait},
		{"SmallEventBuffer", testSmallBuffer},
		{"ManyDescriptors", testMany},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, open(t)) })
	}
}

// within is how long a readiness that should come promptly may take on a
// loaded machine (the suite runs beside other tests on two shared cores).
const within = 5 * time.Second

// wait runs one Wait and merges the events by token: kqueue reports each
// readiness kind as its own event.
func wait(t *testing.T, b poll.Backend, timeout time.Duration) map[poll.Token]poll.Interest {
	t.Helper()
	var events [256]poll.Event
	n, err := b.Wait(events[:], timeout)
	if err != nil {
		t.Fatalf("Wait(%v): %v", timeout, err)
	}
	got := map[poll.Token]poll.Interest{}
	for _, ev := range events[:n] {
		got[ev.Token] |= ev.Mask
	}
	return got
}

// await waits until tok is reported with every kind in want and returns
// the kinds reported with it.
func await(t *testing.T, b poll.Backend, tok poll.Token, want poll.Interest) poll.Interest {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if got := wait(t, b, 50*time.Millisecond)[tok]; got&want == want {
			return got
		}
	}
	t.Fatalf("token %#x not reported %v within %v", tok, want, within)
	return 0
}

// quiet checks that neither a poll nor a short wait reports tok with any
// kind in kinds.
func quiet(t *testing.T, b poll.Backend, tok poll.Token, kinds poll.Interest) {
	t.Helper()
	for _, timeout := range []time.Duration{0, 20 * time.Millisecond} {
		if got := wait(t, b, timeout)[tok]; got&kinds != 0 {
			t.Fatalf("token %#x reported %v, want none of %v", tok, got, kinds)
		}
	}
}

func register(t *testing.T, b poll.Backend, fd int, tok poll.Token, in poll.Interest) {
	t.Helper()
	if err := b.Register(fd, tok, in); err != nil {
		t.Fatalf("Register(%d, %#x, %v): %v", fd, tok, in, err)
	}
}

// conn is one end of a loopback TCP connection and its descriptor.
type conn struct {
	*net.TCPConn
	fd int
}

func descriptor(t *testing.T, c syscall.Conn) int {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd int
	if err := raw.Control(func(h uintptr) { fd = int(h) }); err != nil {
		t.Fatal(err)
	}
	return fd
}

func listen(t *testing.T) *net.TCPListener {
	t.Helper()
	l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// tcpPair connects two loopback TCP sockets; cleanup closes them.
func tcpPair(t *testing.T, l *net.TCPListener) (a, b conn) {
	t.Helper()
	if l == nil {
		l = listen(t)
	}
	c, err := net.DialTCP("tcp4", nil, l.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.AcceptTCP()
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return conn{c, descriptor(t, c)}, conn{s, descriptor(t, s)}
}

func send(t *testing.T, c conn, p string) {
	t.Helper()
	if _, err := c.Write([]byte(p)); err != nil {
		t.Fatal(err)
	}
}

// recv reads what is there; the deadline turns a readiness the backend
// reported wrongly into a failure instead of a hang.
func recv(c conn) (int, error) {
	c.SetReadDeadline(time.Now().Add(within))
	var buf [4096]byte
	return c.Read(buf[:])
}

func testSocketReadable(t *testing.T, b poll.Backend) {
	a, s := tcpPair(t, nil)
	register(t, b, s.fd, 7, poll.Readable)
	quiet(t, b, 7, poll.Readable)
	send(t, a, "x")
	await(t, b, 7, poll.Readable)
	// Level-triggered: still readable until read.
	await(t, b, 7, poll.Readable)
	if n, err := recv(s); n != 1 || err != nil {
		t.Fatalf("read after readiness: %d, %v", n, err)
	}
	quiet(t, b, 7, poll.Readable)
}

func testSocketWritable(t *testing.T, b poll.Backend) {
	_, s := tcpPair(t, nil)
	register(t, b, s.fd, 8, poll.Writable)
	if got := await(t, b, 8, poll.Writable); got&poll.Readable != 0 {
		t.Fatalf("an idle socket watched for writing reported %v", got)
	}
}

func testPipe(t *testing.T, b poll.Backend) {
	r, w, ok := pipe(t)
	if !ok {
		t.Skip("this backend's system has no pollable pipes")
	}
	register(t, b, r, 1, poll.Readable)
	register(t, b, w, 2, poll.Writable)
	await(t, b, 2, poll.Writable)
	quiet(t, b, 1, poll.Readable)
	writeFD(t, w)
	await(t, b, 1, poll.Readable)
}

func testListener(t *testing.T, b poll.Backend) {
	l := listen(t)
	register(t, b, descriptor(t, l), 3, poll.Readable)
	quiet(t, b, 3, poll.Readable)
	c, err := net.DialTCP("tcp4", nil, l.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	await(t, b, 3, poll.Readable)
}

func testPeerClose(t *testing.T, b poll.Backend) {
	a, s := tcpPair(t, nil)
	register(t, b, s.fd, 4, poll.Readable)
	quiet(t, b, 4, poll.Readable)
	a.Close()
	await(t, b, 4, poll.Readable)
	if n, err := recv(s); n != 0 || err != io.EOF {
		t.Fatalf("read after the peer closed: %d, %v; want EOF", n, err)
	}
}

func testPeerReset(t *testing.T, b poll.Backend) {
	a, s := tcpPair(t, nil)
	register(t, b, s.fd, 5, poll.Readable)
	if err := a.SetLinger(0); err != nil { // close sends RST
		t.Fatal(err)
	}
	a.Close()
	await(t, b, 5, poll.Readable)
	if _, err := recv(s); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("read after a reset: %v; want an error", err)
	}
}

// A refused connection is reported to a writer, as asyncio's
// sock_connect waits for: writability, then SO_ERROR says what happened.
func testConnectRefused(t *testing.T, b poll.Backend) {
	l := listen(t)
	addr := l.Addr().(*net.TCPAddr)
	l.Close()
	fd, pending := connectNonblocking(t, addr)
	if !pending {
		t.Skip("the system refused the loopback connection before connect returned")
	}
	register(t, b, fd, 6, poll.Writable)
	await(t, b, 6, poll.Writable)
}

func testDeregisterThenClose(t *testing.T, b poll.Backend) {
	a, s := tcpPair(t, nil)
	register(t, b, s.fd, 9, poll.Readable|poll.Writable)
	await(t, b, 9, poll.Writable)
	send(t, a, "x")
	if err := b.Deregister(s.fd); err != nil {
		t.Fatal(err)
	}
	quiet(t, b, 9, poll.Readable|poll.Writable)
	s.Close()
	a.Close()
	quiet(t, b, 9, poll.Readable|poll.Writable)
}

func testDeregisterAfterClose(t *testing.T, b poll.Backend) {
	_, s := tcpPair(t, nil)
	register(t, b, s.fd, 10, poll.Readable)
	fd := s.fd
	s.Close()
	if err := b.Deregister(fd); err != nil {
		t.Fatalf("Deregister of a closed descriptor: %v", err)
	}
	quiet(t, b, 10, poll.Readable|poll.Writable)
}

func testModify(t *testing.T, b poll.Backend) {
	a, s := tcpPair(t, nil)
	register(t, b, s.fd, 1, poll.Readable)
	quiet(t, b, 1, poll.Readable|poll.Writable)
	mod := func(tok poll.Token, in poll.Interest) {
		t.Helper()
		if err := b.Reregister(s.fd, tok, in); err != nil {
			t.Fatalf("Reregister(%#x, %v): %v", tok, in, err)
		}
	}
	mod(2, poll.Writable)
	await(t, b, 2, poll.Writable)
	mod(3, poll.Readable)
	quiet(t, b, 2, poll.Readable|poll.Writable)
	quiet(t, b, 3, poll.Readable|poll.Writable)
	send(t, a, "x")
	await(t, b, 3, poll.Readable)
	mod(4, poll.Readable|poll.Writable)
	await(t, b, 4, poll.Readable|poll.Writable)
	quiet(t, b, 3, poll.Readable|poll.Writable)
}

// A kind added to a watched descriptor whose state already has it is
// reported by the very next Wait, even a zero-timeout one, as epoll and
// select() report it: a loop that adds a writer in one iteration runs it
// in the next (asyncio's order). A backend that must first take back a
// request outstanding for the old kinds (iocp's cancelled poll) takes it
// back and asks again within that Wait.
func testAddedKindAtOnce(t *testing.T, b poll.Backend) {
	_, s := tcpPair(t, nil)
	register(t, b, s.fd, 1, poll.Readable)
	quiet(t, b, 1, poll.Readable|poll.Writable)
	for round := range 3 {
		if err := b.Reregister(s.fd, 1, poll.Readable|poll.Writable); err != nil {
			t.Fatalf("Reregister: %v", err)
		}
		if got := wait(t, b, 0)[1]; got != poll.Writable {
			t.Fatalf("round %d: Wait(0) after adding Writable reported %v, want %v",
				round, got, poll.Writable)
		}
		if err := b.Reregister(s.fd, 1, poll.Readable); err != nil {
			t.Fatalf("Reregister: %v", err)
		}
		quiet(t, b, 1, poll.Readable|poll.Writable)
	}
}

// Tokens are opaque: the extremes of the range a host may use come back
// intact, and none is mistaken for the backend's own waker.
func testAnyToken(t *testing.T, b poll.Backend) {
	toks := []poll.Token{0, 1<<40 | 7, poll.ReservedToken - 1}
	var conns []conn
	for _, tok := range toks {
		a, s := tcpPair(t, nil)
		register(t, b, s.fd, tok, poll.Readable)
		conns = append(conns, s)
		send(t, a, "x")
	}
	for _, tok := range toks {
		await(t, b, tok, poll.Readable)
	}
	for _, s := range conns {
		if _, err := recv(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Wake(); err != nil {
		t.Fatal(err)
	}
	for _, tok := range toks {
		quiet(t, b, tok, poll.Readable)
	}
}

// ReservedToken is refused by Register and Reregister, and neither
// changes what was registered: the descriptor is reported with the token
// of the Register that succeeded, for the interest that Register asked.
func testReservedToken(t *testing.T, b poll.Backend) {
	a, s := tcpPair(t, nil)
	if err := b.Register(s.fd, poll.ReservedToken, poll.Readable); !errors.Is(err, poll.ErrReservedToken) {
		t.Fatalf("Register with ReservedToken: %v, want ErrReservedToken", err)
	}
	quiet(t, b, poll.ReservedToken, poll.Readable|poll.Writable)
	register(t, b, s.fd, 11, poll.Readable)
	if err := b.Reregister(s.fd, poll.ReservedToken, poll.Writable); !errors.Is(err, poll.ErrReservedToken) {
		t.Fatalf("Reregister with ReservedToken: %v, want ErrReservedToken", err)
	}
	quiet(t, b, 11, poll.Writable) // still watched for reading only
	send(t, a, "x")
	await(t, b, 11, poll.Readable)
	quiet(t, b, poll.ReservedToken, poll.Readable|poll.Writable)
}

// blockedWait runs Wait(-1) until woken is set; a wait that ends early
// with no events is an interruption the contract allows (EINTR from Go's
// own signals) and is waited again.
func blockedWait(b poll.Backend, woken *atomic.Bool) <-chan error {
	done := make(chan error, 1)
	go func() {
		var events [16]poll.Event
		for {
			n, err := b.Wait(events[:], -1)
			if err == nil && n != 0 {
				err = errors.New("a wake-up reported events")
			}
			if err != nil || woken.Load() {
				done <- err
				return
			}
		}
	}()
	return done
}

func testWakeWhileWaiting(t *testing.T, b poll.Backend) {
	_, s := tcpPair(t, nil)
	register(t, b, s.fd, 1, poll.Readable) // a watched, idle descriptor
	var woken atomic.Bool
	done := blockedWait(b, &woken)
	time.Sleep(30 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Wait(-1) returned before the wake-up: %v", err)
	default:
	}
	woken.Store(true)
	if err := b.Wake(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(within):
		t.Fatal("Wake did not end Wait(-1)")
	}
}

func testWakeCoalesces(t *testing.T, b poll.Backend) {
	for i := 0; i < 3; i++ {
		if err := b.Wake(); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if got := wait(t, b, within); len(got) != 0 {
		t.Fatalf("a wake-up reported events %v", got)
	}
	if d := time.Since(start); d > within/2 {
		t.Fatalf("a pending wake-up did not end the wait (%v)", d)
	}
	// Consumed: further waits wait. Several wake-ups may take a few waits
	// to drain on a backend that queues them (iocp), never more than three.
	var d time.Duration
	for i := 0; i < 4; i++ {
		start = time.Now()
		wait(t, b, 30*time.Millisecond)
		if d = time.Since(start); d >= 25*time.Millisecond {
			return
		}
	}
	t.Fatalf("the wait after the wake-ups returned after %v", d)
}

func testZeroTimeout(t *testing.T, b poll.Backend) {
	_, s := tcpPair(t, nil)
	register(t, b, s.fd, 1, poll.Readable)
	start := time.Now()
	if got := wait(t, b, 0); len(got) != 0 {
		t.Fatalf("Wait(0) on an idle descriptor: %v", got)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("Wait(0) took %v", d)
	}
}

// A timed wait returns about on time: not before (less a clock tick on
// systems whose waits are timed in ticks), not long after.
func testTimedWait(t *testing.T, b poll.Backend) {
	const tick = 16 * time.Millisecond // Windows' default timer resolution
	for _, timeout := range []time.Duration{50 * time.Millisecond, 300 * time.Microsecond} {
		var d time.Duration
		for try := 0; try < 5; try++ { // an interrupted wait ends early
			start := time.Now()
			if got := wait(t, b, timeout); len(got) != 0 {
				t.Fatalf("Wait(%v) with nothing registered: %v", timeout, got)
			}
			d = time.Since(start)
			if d >= timeout {
				break
			}
		}
		if d < timeout-tick || d > timeout+time.Second {
			t.Fatalf("Wait(%v) returned after %v", timeout, d)
		}
	}
}

func testSmallBuffer(t *testing.T, b poll.Backend) {
	for i := 0; i < 5; i++ {
		_, s := tcpPair(t, nil)
		register(t, b, s.fd, poll.Token(i), poll.Writable)
	}
	var events [2]poll.Event
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		n, err := b.Wait(events[:], 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if n == len(events) {
			return
		}
	}
	t.Fatal("never a full buffer with five writable sockets")
}

// Hundreds of descriptors: the ready ones, and only those, are reported.
func testMany(t *testing.T, b poll.Backend) {
	const pairs = 250
	l := listen(t)
	conns := make([][2]conn, pairs)
	for i := range conns {
		a, s := tcpPair(t, l)
		conns[i] = [2]conn{a, s}
		register(t, b, s.fd, poll.Token(i), poll.Readable)
	}
	for i := 0; i < pairs; i += 2 {
		send(t, conns[i][0], "x")
	}
	seen := map[poll.Token]bool{}
	deadline := time.Now().Add(within)
	for len(seen) < pairs/2 && time.Now().Before(deadline) {
		for tok, mask := range wait(t, b, 50*time.Millisecond) {
			if tok%2 != 0 || tok >= pairs {
				t.Fatalf("token %d reported %v, it was never written to", tok, mask)
			}
			if !seen[tok] {
				seen[tok] = true
				if _, err := recv(conns[tok][1]); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if len(seen) != pairs/2 {
		t.Fatalf("%d of %d ready descriptors reported", len(seen), pairs/2)
	}
	for tok, mask := range wait(t, b, 20*time.Millisecond) {
		t.Fatalf("token %d reported %v after every ready one was drained", tok, mask)
	}
}
