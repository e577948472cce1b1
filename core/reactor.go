// The reactor contract, as the engine and its host see it: the names of
// package poll (where the types and the Backend interface are defined
// once, for the engine and every backend) under the engine's own names.
// Which backend NewReactor opens is decided by the build constraint of one
// reactor_*.go file; nothing here knows which one is in use.

package core

import "github.com/zloopgo/zloopgo/core/poll"

// DescriptorToken is what the host attached to a watched descriptor (the
// adapter attaches the descriptor's number) and what an Event reports.
// The engine never interprets it. Its other two id spaces, TimerSlot and
// RequestID, are types of their own, so that one cannot be passed for
// another.
type DescriptorToken = poll.Token

// ReservedToken is the DescriptorToken no host may attach (poll.ReservedToken).
const ReservedToken = poll.ReservedToken

// Interest is the set of readiness kinds a descriptor is watched for.
type Interest = poll.Interest

const (
	Readable = poll.Readable
	Writable = poll.Writable
)

// Event is one ready descriptor; its layout is shared with the C adapter.
type Event = poll.Event

// Reactor is the contract every backend implements (see poll.Backend).
type Reactor = poll.Backend

// Peeker is a reactor that code outside Go can look at (poll.Peeker).
type Peeker = poll.Peeker

// PeekHandle tells code outside Go how to look whether a wait would
// report an event.
type PeekHandle = poll.PeekHandle

// PeekKind is how a PeekHandle is used.
type PeekKind = poll.PeekKind

const (
	PeekNone  = poll.PeekNone
	PeekEpoll = poll.PeekEpoll
)

// WakeHandle tells code outside Go how to wake a blocked wait.
type WakeHandle = poll.WakeHandle

// WakeKind is how a WakeHandle is used.
type WakeKind = poll.WakeKind

const (
	WakeEventfd    = poll.WakeEventfd
	WakeKqueueUser = poll.WakeKqueueUser
	WakeIOCP       = poll.WakeIOCP
)
