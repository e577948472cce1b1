// The contract's shared layout: the C adapter reads Events in place.

package poll_test

import (
	"testing"
	"unsafe"

	"github.com/zloopgo/zloopgo/core/poll"
)

func TestEventLayout(t *testing.T) {
	var ev poll.Event
	if s := unsafe.Sizeof(ev); s != 16 {
		t.Fatalf("Event is %d bytes, want 16", s)
	}
	if o := unsafe.Offsetof(ev.Mask); o != 8 {
		t.Fatalf("Event.Mask at offset %d, want 8", o)
	}
}

func TestInterestBits(t *testing.T) {
	// The C adapter tests bit 1 << which, which 0 for reading, 1 for writing.
	if poll.Readable != 1 || poll.Writable != 2 {
		t.Fatalf("Readable %d, Writable %d; want 1 and 2", poll.Readable, poll.Writable)
	}
}
