// The reactor contract: how the engine asks the operating system which
// descriptors are ready. Backends live in their own packages (epoll, kqueue,
// iocp) and are chosen by build tags in reactor_*.go; nothing here knows
// which one is in use.
package core

import "time"

// Token names whatever the host attached to a descriptor or a timer.
// The engine never interprets it.
type Token = uint64

// Interest is the set of readiness kinds a descriptor is watched for.
type Interest uint32

const (
	Readable Interest = 1 << iota
	Writable
)

// Event is one ready descriptor. Its layout (8-byte token, 4-byte mask,
// 4 bytes of padding) is shared with the C adapter, which reads a batch of
// them in place.
type Event struct {
	Token Token
	Mask  Interest
	_     uint32
}

// Reactor is the contract every backend implements. All methods except
// Wake are called from the loop's own thread.
type Reactor interface {
	// Register starts watching fd; it fails if fd is already watched.
	Register(fd int, tok Token, in Interest) error
	// Reregister changes what fd is watched for.
	Reregister(fd int, tok Token, in Interest) error
	// Deregister stops watching fd.
	Deregister(fd int) error
	// Wait fills events and returns how many it filled. timeout < 0 blocks,
	// 0 polls, > 0 waits at most that long. An interrupted wait (EINTR) or
	// a wake-up returns 0 events and no error: the caller recomputes.
	Wait(events []Event, timeout time.Duration) (int, error)
	// WakeFD is a descriptor that, when written to (8 bytes, native-endian
	// count), makes a blocked Wait return. Other threads write it directly
	// so that waking needs no call into the engine.
	WakeFD() int
	// Wake makes a blocked Wait return; safe from any goroutine.
	Wake() error
	// Close releases the backend's descriptors.
	Close() error
}
