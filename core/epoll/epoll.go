//go:build linux

// Package epoll is the Linux reactor backend: level-triggered epoll plus an
// eventfd that other threads write to wake a blocked wait. It implements
// poll.Backend.
//
// It knows descriptors, opaque 64-bit tokens (all but the one the contract
// reserves, which its waker takes) and the two readiness kinds of package
// poll; it knows nothing of timers, callbacks or Python, nor what a token
// means.
package epoll

import (
	"errors"
	"time"
	"unsafe"

	"github.com/zloopgo/zloopgo/core/poll"
	"golang.org/x/sys/unix"
)

// wakeToken is the epoll user data of the eventfd's own registration.
// epoll hands back only the user data, so the waker takes the token the
// contract reserves (hosts cannot register it): an event with it is a
// wake-up and nothing else.
const wakeToken = poll.ReservedToken

// Poller owns one epoll instance and its wake-up eventfd.
type Poller struct {
	epfd   int
	wakefd int
	buf    []unix.EpollEvent
}

var _ poll.Backend = (*Poller)(nil)

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
	if err := p.ctl(unix.EPOLL_CTL_ADD, wakefd, wakeToken, poll.Readable); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

func (p *Poller) ctl(op, fd int, tok poll.Token, in poll.Interest) error {
	ev := unix.EpollEvent{Events: toEpoll(in)}
	// EpollEvent splits the 64-bit user data into Fd and Pad.
	ev.Fd = int32(uint32(tok))
	ev.Pad = int32(uint32(tok >> 32))
	return unix.EpollCtl(p.epfd, op, fd, &ev)
}

func toEpoll(in poll.Interest) uint32 {
	var e uint32
	if in&poll.Readable != 0 {
		e |= unix.EPOLLIN
	}
	if in&poll.Writable != 0 {
		e |= unix.EPOLLOUT
	}
	return e
}

// fromEpoll follows asyncio's EpollSelector: anything but EPOLLIN (errors,
// hang-ups) wakes writers, anything but EPOLLOUT wakes readers, so that a
// callback gets to see the error. poll(2)'s bits have the same values.
func fromEpoll(e uint32) poll.Interest {
	var in poll.Interest
	if e&^unix.EPOLLIN != 0 {
		in |= poll.Writable
	}
	if e&^unix.EPOLLOUT != 0 {
		in |= poll.Readable
	}
	return in
}

// Register starts watching fd.
func (p *Poller) Register(fd int, tok poll.Token, in poll.Interest) error {
	if tok == poll.ReservedToken {
		return poll.ErrReservedToken
	}
	return p.ctl(unix.EPOLL_CTL_ADD, fd, tok, in)
}

// Reregister changes fd's interest. A descriptor the kernel no longer
// knows (closed, or closed and its number reused without a Deregister,
// which epoll forgets silently) is an error, ENOENT or EBADF, as it is
// for asyncio's EpollSelector: the host decides what follows.
func (p *Poller) Reregister(fd int, tok poll.Token, in poll.Interest) error {
	if tok == poll.ReservedToken {
		return poll.ErrReservedToken
	}
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
// waits round up, as in Go's netpoll) and fills events.
func (p *Poller) Wait(events []poll.Event, timeout time.Duration) (int, error) {
	max := len(events)
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
	k, woken := 0, false
	for _, ev := range p.buf[:n] {
		tok := tokenOf(ev)
		if tok == wakeToken {
			woken = true
			continue
		}
		events[k] = poll.Event{Token: tok, Mask: fromEpoll(ev.Events)}
		k++
	}
	if woken {
		p.drainWaker()
	}
	return k, nil
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

func tokenOf(ev unix.EpollEvent) poll.Token {
	return poll.Token(uint32(ev.Fd)) | poll.Token(uint32(ev.Pad))<<32
}

func (p *Poller) drainWaker() {
	var b [8]byte
	for {
		if _, err := unix.Read(p.wakefd, b[:]); err != unix.EINTR {
			return
		}
	}
}

// WakeHandle is the eventfd: 8 bytes written to it wake a blocked Wait.
func (p *Poller) WakeHandle() poll.WakeHandle {
	return poll.WakeHandle{Kind: poll.WakeEventfd, Handle: uintptr(p.wakefd)}
}

// PeekHandle names the epoll descriptor (poll.PeekEpoll).
func (p *Poller) PeekHandle() poll.PeekHandle {
	return poll.PeekHandle{Kind: poll.PeekEpoll, Handle: uintptr(p.epfd)}
}

var _ poll.Peeker = (*Poller)(nil)

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
