//go:build unix

package platformtest

import (
	"os"
	"os/signal"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// socketPair is a connected pair of non-blocking stream sockets.
func socketPair(t *testing.T) (int, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if err := unix.SetNonblock(fd, true); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
	}
	return fds[0], fds[1]
}

func TestStreamCalls(t *testing.T) {
	a, b := socketPair(t)
	buf := make([]byte, 64)
	if n, err := Recv(a, buf); n != -1 || !WouldBlock(err) {
		t.Fatalf("recv on an empty socket: %d, %v; want -1 and an error that would block", n, err)
	}
	if n, err := Send(b, []byte("ping"), false); n != 4 || err != 0 {
		t.Fatalf("send: %d, %v", n, err)
	}
	if n, err := Send(b, []byte("pong"), true); n != 4 || err != 0 {
		t.Fatalf("send without a signal: %d, %v", n, err)
	}
	if n, err := Recv(a, buf); n != 8 || err != 0 || string(buf[:n]) != "pingpong" {
		t.Fatalf("recv: %d, %v, %q", n, err, buf[:max(n, 0)])
	}
	// A closed peer: an error of the call (EPIPE), never a SIGPIPE.
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, unix.SIGPIPE)
	defer signal.Stop(pipes)
	unix.Close(a)
	if n, err := Send(b, []byte("x"), true); n != -1 || err != unix.EPIPE {
		t.Fatalf("send without a signal to a closed peer: %d, %v; want -1, EPIPE", n, err)
	}
	select {
	case <-pipes:
		t.Fatal("a send without a signal to a closed peer raised SIGPIPE")
	case <-time.After(50 * time.Millisecond):
	}
	if n, err := Recv(b, buf); n != 0 || err != 0 {
		t.Fatalf("recv after the peer closed: %d, %v; want 0 (EOF)", n, err)
	}
}

func TestDatagramCalls(t *testing.T) {
	bound := func() (int, int) {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			t.Fatal(err)
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			t.Fatal(err)
		}
		return fd, sa.(*unix.SockaddrInet4).Port
	}
	client, clientPort := bound()
	server, serverPort := bound()
	if n, _, err := EchoDatagram(server); n != -1 || !WouldBlock(err) {
		t.Fatalf("recvfrom with nothing sent: %d, %v", n, err)
	}
	to := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: serverPort}
	if err := unix.Sendto(client, []byte("hello"), 0, to); err != nil {
		t.Fatal(err)
	}
	n, from, err := EchoDatagram(server)
	if n != 5 || from != clientPort || err != 0 {
		t.Fatalf("echo: %d bytes from port %d, %v; want 5 from %d", n, from, err, clientPort)
	}
	buf := make([]byte, 64)
	got, _, rerr := unix.Recvfrom(client, buf, 0)
	if rerr != nil || string(buf[:got]) != "hello" {
		t.Fatalf("the echo came back as %q, %v", buf[:got], rerr)
	}
}

func TestClock(t *testing.T) {
	res := ClockResolution()
	if res <= 0 || res > 100*time.Microsecond {
		t.Fatalf("clock resolution %v", res)
	}
	t0 := MonotonicNs()
	SleepUs(20000)
	elapsed := time.Duration(MonotonicNs() - t0)
	if elapsed < 20*time.Millisecond || elapsed > 5*time.Second {
		t.Fatalf("a 20 ms sleep took %v by the monotonic clock", elapsed)
	}
}

func TestThreads(t *testing.T) {
	start := time.Now()
	if !WaitUnsignalled(30 * time.Millisecond) {
		t.Fatal("a wait on a condition nobody signals ended before its deadline")
	}
	if waited := time.Since(start); waited < 30*time.Millisecond {
		t.Fatalf("the wait ended after %v, before its 30 ms deadline", waited)
	}
	if runs := CallOnceTwice(); runs != 1 {
		t.Fatalf("zl_sys_call_once ran its function %d times", runs)
	}
}
