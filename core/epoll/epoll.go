// Package epoll is the Linux reactor backend: level-triggered epoll plus an
// eventfd that other threads write to wake a blocked wait.
//
// It knows descriptors, 64-bit tokens and two readiness bits (1 readable,
// 2 writable, the values core.Interest uses); it knows nothing of timers,
// callbacks or Python.
package epoll

import (
	"errors"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	readable = 1
	writable = 2
)

// wakeToken marks the eventfd's own events; it is never reported. Tokens
// from the engine's host are descriptor numbers, which never reach it.
const wakeToken = ^uint64(0)

// Poller owns one epoll instance and its wake-up eventfd.
type Poller struct {
	epfd   int
	wakefd int
	buf    []unix.EpollEvent
	ready  []unix.EpollEvent // the events the last Wait reported, waker excluded
}

// New opens an epoll instance with its waker registered.
func New() (*Poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wakefd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, err
	}
	p := &Poller{epfd: epfd, wakefd: wakefd, buf: make([]unix.EpollEvent, 128)}
	if err := p.ctl(unix.EPOLL_CTL_ADD, wakefd, wakeToken, readable); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

func (p *Poller) ctl(op, fd int, tok uint64, in uint32) error {
	ev := unix.EpollEvent{Events: toEpoll(in)}
	// EpollEvent splits the 64-bit user data into Fd and Pad.
	ev.Fd = int32(uint32(tok))
	ev.Pad = int32(uint32(tok >> 32))
	return unix.EpollCtl(p.epfd, op, fd, &ev)
}

func toEpoll(in uint32) uint32 {
	var e uint32
	if in&readable != 0 {
		e |= unix.EPOLLIN
	}
	if in&writable != 0 {
		e |= unix.EPOLLOUT
	}
	return e
}

// fromEpoll follows asyncio's EpollSelector: anything but EPOLLIN (errors,
// hang-ups) wakes writers, anything but EPOLLOUT wakes readers, so that a
// callback gets to see the error.
func fromEpoll(e uint32) uint32 {
	var in uint32
	if e&^unix.EPOLLIN != 0 {
		in |= writable
	}
	if e&^unix.EPOLLOUT != 0 {
		in |= readable
	}
	return in
}

// Register starts watching fd.
func (p *Poller) Register(fd int, tok uint64, in uint32) error {
	return p.ctl(unix.EPOLL_CTL_ADD, fd, tok, in)
}

// Reregister changes fd's interest. A descriptor the kernel no longer
// knows (closed, or closed and its number reused without a Deregister,
// which epoll forgets silently) is an error, ENOENT or EBADF, as it is
// for asyncio's EpollSelector: the host decides what follows.
func (p *Poller) Reregister(fd int, tok uint64, in uint32) error {
	return p.ctl(unix.EPOLL_CTL_MOD, fd, tok, in)
}

// Deregister stops watching fd. A descriptor the kernel already dropped
// (closed before Deregister) is not an error.
func (p *Poller) Deregister(fd int) error {
	err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EBADF) {
		return nil
	}
	return err
}

// Wait blocks for at most timeout (negative: forever; sub-millisecond
// waits round up, as in Go's netpoll) and returns how many events, at
// most max, Event can then read.
func (p *Poller) Wait(max int, timeout time.Duration) (int, error) {
	if max > len(p.buf) {
		p.buf = make([]unix.EpollEvent, max)
	}
	ms := -1
	if timeout == 0 {
		ms = 0
	} else if timeout > 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	var n int
	var err error
	if ms == 0 {
		n, err = p.peek(max)
	} else {
		n, err = unix.EpollWait(p.epfd, p.buf[:max], ms)
	}
	if err == unix.EINTR {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	p.ready = p.buf[:0]
	for _, ev := range p.buf[:n] {
		if tokenOf(ev) == wakeToken {
			p.drainWaker()
			continue
		}
		p.ready = append(p.ready, ev)
	}
	return len(p.ready), nil
}

// peek is epoll_wait with a zero timeout as a raw system call: it cannot
// block, so it skips the runtime's entersyscall/exitsyscall bookkeeping
// that unix.EpollWait pays on every call (about 3% of a ping-pong run's
// time in perf). epoll_pwait with no mask is epoll_wait on every
// architecture, including those without epoll_wait.
func (p *Poller) peek(max int) (int, error) {
	r, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(p.epfd),
		uintptr(unsafe.Pointer(&p.buf[0])), uintptr(max), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

func tokenOf(ev unix.EpollEvent) uint64 {
	return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
}

// Event returns the token and readiness bits of the i-th event of the last Wait.
func (p *Poller) Event(i int) (uint64, uint32) {
	ev := p.ready[i]
	return tokenOf(ev), fromEpoll(ev.Events)
}

func (p *Poller) drainWaker() {
	var b [8]byte
	for {
		if _, err := unix.Read(p.wakefd, b[:]); err != unix.EINTR {
			return
		}
	}
}

// WakeFD is the eventfd that wakes a blocked Wait when 8 bytes are written to it.
func (p *Poller) WakeFD() int { return p.wakefd }

// Wake makes a blocked Wait return; safe from any thread.
func (p *Poller) Wake() error {
	b := [8]byte{1}
	_, err := unix.Write(p.wakefd, b[:])
	if err == unix.EAGAIN { // the counter is already non-zero: a wake is pending
		return nil
	}
	return err
}

// Close releases both descriptors.
func (p *Poller) Close() error {
	err1 := unix.Close(p.wakefd)
	err2 := unix.Close(p.epfd)
	return errors.Join(err1, err2)
}
