//go:build darwin || freebsd

// Package kqueue is the reactor backend of macOS and FreeBSD: a kqueue with
// one EVFILT_READ and one EVFILT_WRITE filter per watched descriptor, and an
// EVFILT_USER event that wakes a blocked wait. It implements poll.Backend.
//
// It knows descriptors, opaque 64-bit tokens (all but the one the contract
// reserves) and the two readiness kinds of package poll; it knows nothing
// of timers, callbacks or Python, nor what a token means.
package kqueue

import (
	"errors"
	"time"

	"github.com/zloopgo/zloopgo/core/poll"
	"golang.org/x/sys/unix"
)

// wakeIdent names the EVFILT_USER event. Identifiers are per filter, so it
// cannot collide with a descriptor's READ or WRITE filter.
const wakeIdent = 0

// Poller owns one kqueue.
type Poller struct {
	kq int
	// tokens holds each watched descriptor's token, by descriptor number.
	// kevent's udata would carry it, but golang.org/x/sys declares udata a
	// *byte: a token stored there is an integer in a pointer field, which
	// the garbage collector may take for a bad pointer. Descriptor numbers
	// are small and dense, so a slice costs little.
	tokens []poll.Token
	buf    []unix.Kevent_t
	ts     unix.Timespec // Wait's timeout, here so that it is not allocated per call
}

var _ poll.Backend = (*Poller)(nil)

// New opens a kqueue with its wake-up event added.
func New() (*Poller, error) {
	kq, err := unix.Kqueue()
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(kq)
	p := &Poller{kq: kq, buf: make([]unix.Kevent_t, 128)}
	// EV_CLEAR: the event resets once reported, so wake-ups coalesce and
	// need no draining.
	var ev [1]unix.Kevent_t
	unix.SetKevent(&ev[0], wakeIdent, unix.EVFILT_USER, unix.EV_ADD|unix.EV_CLEAR)
	if err := p.kevent(ev[:]); err != nil {
		unix.Close(kq)
		return nil, err
	}
	return p, nil
}

// kevent applies changes, retrying an interrupted call (a change list
// alone never blocks, so a retry cannot oversleep).
func (p *Poller) kevent(changes []unix.Kevent_t) error {
	for {
		_, err := unix.Kevent(p.kq, changes, nil, nil)
		if err != unix.EINTR {
			return err
		}
	}
}

// Register starts watching fd. Registering a watched descriptor again
// replaces its registration (kqueue's EV_ADD updates a filter in place).
func (p *Poller) Register(fd int, tok poll.Token, in poll.Interest) error {
	return p.Reregister(fd, tok, in)
}

// Reregister adds the filters in asks for and deletes the others. A closed
// descriptor is an error (EBADF), as in asyncio's KqueueSelector. The
// waker needs no token (EVFILT_USER tells it apart), but the contract's
// reserved one is refused here as on every backend.
func (p *Poller) Reregister(fd int, tok poll.Token, in poll.Interest) error {
	if tok == poll.ReservedToken {
		return poll.ErrReservedToken
	}
	if err := p.apply(fd, in); err != nil {
		return err
	}
	if fd >= len(p.tokens) {
		grown := make([]poll.Token, max(fd+1, 2*len(p.tokens)))
		copy(grown, p.tokens)
		p.tokens = grown
	}
	p.tokens[fd] = tok
	return nil
}

// Deregister deletes both filters. A descriptor already closed (closing
// deletes its filters) or never watched is not an error.
func (p *Poller) Deregister(fd int) error {
	if fd < len(p.tokens) {
		p.tokens[fd] = 0
	}
	err := p.apply(fd, 0)
	if errors.Is(err, unix.EBADF) {
		return nil
	}
	return err
}

// apply sets fd's two filters in one call. EV_RECEIPT makes kevent answer
// each change on its own instead of stopping at the first failure, so
// deleting a filter that was never added (ENOENT) can be told apart.
func (p *Poller) apply(fd int, in poll.Interest) error {
	var changes, receipts [2]unix.Kevent_t
	for i, kind := range [2]struct {
		filter int
		in     poll.Interest
	}{{unix.EVFILT_READ, poll.Readable}, {unix.EVFILT_WRITE, poll.Writable}} {
		flags := unix.EV_DELETE
		if in&kind.in != 0 {
			flags = unix.EV_ADD
		}
		unix.SetKevent(&changes[i], fd, kind.filter, flags|unix.EV_RECEIPT)
	}
	var n int
	var err error
	for {
		n, err = unix.Kevent(p.kq, changes[:], receipts[:], nil)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return err
	}
	for _, r := range receipts[:n] {
		if r.Flags&unix.EV_ERROR == 0 || r.Data == 0 {
			continue
		}
		// A receipt keeps its change's filter, not always its flags
		// (FreeBSD replaces them with EV_ERROR): whether the change was a
		// deletion follows from the filter.
		kind := poll.Readable
		if r.Filter == unix.EVFILT_WRITE {
			kind = poll.Writable
		}
		switch errno := unix.Errno(r.Data); {
		case errno == unix.ENOENT && in&kind == 0:
			// Deleting a filter that was not there.
		case errno == unix.EPIPE:
			// Older macOS (10.10, 10.11) refuses to add a pipe whose other
			// end is closed; the reader will see EOF when it reads (mio
			// ignores it too, see tokio-rs/mio#582).
		default:
			return errno
		}
	}
	return nil
}

// Wait blocks for at most timeout (negative: forever) and fills events.
// Each filter is reported on its own: a descriptor ready both ways comes
// twice. EV_EOF (peer closed, reset, refused) is reported as readiness of
// the filter that saw it, as asyncio's KqueueSelector does.
func (p *Poller) Wait(events []poll.Event, timeout time.Duration) (int, error) {
	if len(events) > len(p.buf) {
		p.buf = make([]unix.Kevent_t, len(events))
	}
	var ts *unix.Timespec
	if timeout >= 0 {
		p.ts = unix.NsecToTimespec(int64(timeout))
		ts = &p.ts
	}
	n, err := unix.Kevent(p.kq, nil, p.buf[:len(events)], ts)
	if err == unix.EINTR {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	k := 0
	for _, ev := range p.buf[:n] {
		var mask poll.Interest
		switch ev.Filter {
		case unix.EVFILT_READ:
			mask = poll.Readable
		case unix.EVFILT_WRITE:
			mask = poll.Writable
		default: // the wake-up (EVFILT_USER): EV_CLEAR already reset it
			continue
		}
		fd := int(ev.Ident)
		if fd >= len(p.tokens) {
			continue // cannot happen: only Reregister adds filters
		}
		events[k] = poll.Event{Token: p.tokens[fd], Mask: mask}
		k++
	}
	return k, nil
}

// Wake triggers the EVFILT_USER event; safe from any goroutine.
func (p *Poller) Wake() error {
	var ev [1]unix.Kevent_t
	unix.SetKevent(&ev[0], wakeIdent, unix.EVFILT_USER, 0)
	ev[0].Fflags = unix.NOTE_TRIGGER
	return p.kevent(ev[:])
}

// WakeHandle: kevent(Handle, {Ident, EVFILT_USER, fflags NOTE_TRIGGER}).
func (p *Poller) WakeHandle() poll.WakeHandle {
	return poll.WakeHandle{Kind: poll.WakeKqueueUser, Handle: uintptr(p.kq), Ident: wakeIdent}
}

// Close releases the kqueue, and with it every filter.
func (p *Poller) Close() error { return unix.Close(p.kq) }
