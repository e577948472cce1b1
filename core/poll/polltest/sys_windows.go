//go:build windows

// The suite's Windows sockets: a socket whose connection is still in
// progress (Go's net package only hands out finished ones). Windows has no
// pollable pipes (AFD polls sockets only), so the pipe test is skipped.

package polltest

import (
	"net"
	"testing"
	"unsafe"

	"golang.org/x/sys/windows"
)

var procIoctlsocket = windows.NewLazySystemDLL("ws2_32.dll").NewProc("ioctlsocket")

const fionbio = 0x8004667e // ioctlsocket: set non-blocking mode

func pipe(t *testing.T) (r, w int, ok bool) { return 0, 0, false }

func writeFD(t *testing.T, fd int) { t.Fatal("no pipes on Windows") }

// connectNonblocking starts connecting a non-blocking socket to addr;
// pending is false if the system answered before connect returned.
func connectNonblocking(t *testing.T, addr *net.TCPAddr) (fd int, pending bool) {
	t.Helper()
	s, err := windows.Socket(windows.AF_INET, windows.SOCK_STREAM, windows.IPPROTO_TCP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { windows.Closesocket(s) })
	on := uint32(1)
	if r, _, err := procIoctlsocket.Call(uintptr(s), fionbio, uintptr(unsafe.Pointer(&on))); r != 0 {
		t.Fatalf("ioctlsocket(FIONBIO): %v", err)
	}
	sa := &windows.SockaddrInet4{Port: addr.Port}
	copy(sa.Addr[:], addr.IP.To4())
	switch err := windows.Connect(s, sa); err {
	case windows.WSAEWOULDBLOCK:
		return int(s), true
	case windows.WSAECONNREFUSED:
		return int(s), false
	default:
		t.Fatalf("connect: %v", err)
		return int(s), false
	}
}
