//go:build unix

// The suite's Unix descriptors: pipes, and a socket whose connection is
// still in progress (Go's net package only hands out finished ones).

package polltest

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// pipe opens a non-blocking pipe; cleanup closes it.
func pipe(t *testing.T) (r, w int, ok bool) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	for _, fd := range p {
		unix.CloseOnExec(fd)
		if err := unix.SetNonblock(fd, true); err != nil {
			t.Fatal(err)
		}
	}
	return p[0], p[1], true
}

func writeFD(t *testing.T, fd int) {
	t.Helper()
	if _, err := unix.Write(fd, []byte("x")); err != nil {
		t.Fatal(err)
	}
}

// connectNonblocking starts connecting a non-blocking socket to addr;
// pending is false if the system answered before connect returned.
func connectNonblocking(t *testing.T, addr *net.TCPAddr) (fd int, pending bool) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	sa := &unix.SockaddrInet4{Port: addr.Port}
	copy(sa.Addr[:], addr.IP.To4())
	switch err := unix.Connect(fd, sa); err {
	case unix.EINPROGRESS:
		return fd, true
	case unix.ECONNREFUSED:
		return fd, false
	default:
		t.Fatalf("connect: %v", err)
		return fd, false
	}
}
