// Package poll is the reactor contract: the types every backend (epoll,
// kqueue, iocp) and the engine share, and the Backend interface each
// backend implements. It is a leaf: it imports no backend and no system
// package, so a backend can import it without importing the engine.
//
// It knows nothing of timers, callbacks or which system it runs on; the
// engine (package core) re-exports these names and picks the backend by
// build constraints.
package poll

import (
	"errors"
	"time"
)

// Token names whatever the host attached to a descriptor. A backend hands
// it back unchanged and never interprets it. Every value but ReservedToken
// is valid.
type Token uint64

// ReservedToken is the one token a host may not attach to a descriptor: a
// backend may give it to its own waker (epoll hands back nothing but the
// token, so its eventfd's events carry this one), which then needs no
// other way to tell a wake-up from a descriptor's readiness. Register and
// Reregister refuse it with ErrReservedToken and change nothing. The
// adapter's tokens are descriptor numbers, which never reach it.
const ReservedToken Token = ^Token(0)

// ErrReservedToken is Register's and Reregister's answer to ReservedToken.
var ErrReservedToken = errors.New("poll: the token is reserved for the backend's waker")

// Interest is the set of readiness kinds a descriptor is watched for, and
// the kinds an Event reports.
type Interest uint32

const (
	Readable Interest = 1 << iota
	Writable
)

// Event is one readiness report. Its layout (8-byte token, 4-byte mask,
// 4 bytes of padding) is shared with the C adapter, which reads a batch of
// them in place. A backend that reports each kind separately (kqueue) may
// report one descriptor twice in a batch, once per kind; the mask may hold
// a kind that was not asked for when an error or hang-up wakes both.
type Event struct {
	Token Token
	Mask  Interest
	_     uint32
}

// PeekKind says how code outside Go (the C adapter) looks whether a
// zero-timeout Wait would report an event, without calling into Go.
type PeekKind uint32

const (
	// PeekNone: the backend cannot be looked at so.
	PeekNone PeekKind = iota
	// PeekEpoll: epoll_wait(Handle, events, maxevents, timeout 0)
	// returns 0 while a zero-timeout Wait would report nothing, the
	// waker's eventfd included. Readiness is level-triggered, so an event
	// it returns is still there for the next Wait; but epoll puts it back
	// behind those it did not return, so a look must have room for every
	// event that can be ready (each registration's and the waker's), or
	// it changes the order the next Wait reports them in.
	PeekEpoll
)

// PeekHandle describes how to look at a backend (PeekKind).
type PeekHandle struct {
	Kind   PeekKind
	Handle uintptr // the epoll descriptor
}

// Peeker is implemented by a backend that can be looked at (PeekHandle).
type Peeker interface {
	PeekHandle() PeekHandle
}

// WakeKind says how foreign code (the C adapter, on a thread Go does not
// know) wakes a blocked Wait without calling into Go.
type WakeKind uint32

const (
	// WakeEventfd: write 8 bytes (a native-endian count, e.g. 1) to the
	// descriptor Handle; EAGAIN means a wake-up is already pending.
	WakeEventfd WakeKind = iota + 1
	// WakeKqueueUser: kevent() on the kqueue descriptor Handle with one
	// change {ident Ident, EVFILT_USER, fflags NOTE_TRIGGER}.
	WakeKqueueUser
	// WakeIOCP: PostQueuedCompletionStatus(Handle, 0, Ident, NULL).
	WakeIOCP
)

// WakeHandle describes a backend's waker to code that cannot call Wake.
type WakeHandle struct {
	Kind   WakeKind
	Handle uintptr // the eventfd, kqueue descriptor or completion port
	Ident  uintptr // the EVFILT_USER ident or the completion key; 0 for eventfd
}

// Backend is the contract every reactor backend implements. All methods
// except Wake are called from one goroutine, the loop's. fd is a
// descriptor number (on Windows, a SOCKET handle's value).
type Backend interface {
	// Register starts watching fd for in, reporting tok (any token but
	// ReservedToken, which fails with ErrReservedToken). The host
	// registers a descriptor once; a second Register without Deregister
	// is the host's bug (epoll refuses it, kqueue and iocp replace the
	// registration).
	Register(fd int, tok Token, in Interest) error
	// Reregister changes what fd is watched for and the token reported
	// (not ReservedToken: that fails and leaves the registration as it was).
	// For a descriptor closed since Register it fails on epoll and kqueue,
	// as asyncio's selectors do, and on iocp once a poll has seen the
	// close; the host decides what follows.
	Reregister(fd int, tok Token, in Interest) error
	// Deregister stops watching fd. A descriptor already closed is not
	// an error: closing may have dropped it already.
	Deregister(fd int) error
	// Wait fills events and returns how many it filled. timeout < 0
	// blocks, 0 polls, > 0 waits at most that long (rounded up to the
	// system's unit, a millisecond or better). An interrupted wait (EINTR)
	// or a wake-up returns 0 events and no error: the caller recomputes.
	// Readiness is level-triggered: a descriptor still ready is reported
	// again by the next Wait.
	Wait(events []Event, timeout time.Duration) (int, error)
	// Wake makes a blocked Wait (or the next one) return; safe from any
	// goroutine. Wake-ups before one Wait coalesce into one.
	Wake() error
	// WakeHandle tells code outside Go how to do what Wake does.
	WakeHandle() WakeHandle
	// Close releases the backend's descriptors and handles.
	Close() error
}
