// The C waker against this platform's backend (core.NewReactor): it ends
// a blocked wait, a wake-up made before the wait is kept, wake-ups
// coalesce, and a waker of no kind does nothing. This is where each
// backend's WakeHandle is checked from outside Go. Run here for epoll, for
// iocp by cross-compiling this test for Windows (scripts/cross), and on
// the macOS and Windows runners of the Tests workflow.

package waker_test

import (
	"testing"
	"time"

	"github.com/zloopgo/zloopgo/capi/waker"
	"github.com/zloopgo/zloopgo/core"
	"github.com/zloopgo/zloopgo/core/poll"
)

// within bounds how long a wake-up may take to end a wait on a loaded
// machine; it detects a lost wake-up, it is not a speed limit.
const within = 5 * time.Second

func open(t *testing.T) (core.Reactor, waker.Waker) {
	t.Helper()
	r, err := core.NewReactor()
	if err != nil {
		t.Fatal(err)
	}
	w := waker.New(r.WakeHandle())
	t.Cleanup(func() {
		w.Free()
		r.Close()
	})
	return r, w
}

// startWait runs Wait(timeout) on another goroutine; its error (or one
// saying events were reported) arrives on the channel.
func startWait(t *testing.T, r core.Reactor, timeout time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() {
		var events [4]poll.Event
		n, err := r.Wait(events[:], timeout)
		if err == nil && n != 0 {
			t.Errorf("a wake-up reported %d events", n)
		}
		done <- err
	}()
	return done
}

func returns(t *testing.T, done <-chan error) bool {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		return true
	case <-time.After(within):
		return false
	}
}

func TestTheWakerEndsABlockedWait(t *testing.T) {
	r, w := open(t)
	done := startWait(t, r, -1)
	time.Sleep(30 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Wait(-1) returned before the wake-up: %v", err)
	default:
	}
	w.Wake()
	if !returns(t, done) {
		t.Fatal("the C waker did not end Wait(-1)")
	}
}

// call_soon_threadsafe may wake just before the loop thread enters the
// wait (it saw `polling` set): the wake-up must be kept for that wait.
func TestAWakeUpBeforeTheWaitIsKept(t *testing.T) {
	r, w := open(t)
	w.Wake()
	if !returns(t, startWait(t, r, -1)) {
		t.Fatal("a wake-up made before Wait(-1) was lost")
	}
}

func TestWakeUpsCoalesce(t *testing.T) {
	r, w := open(t)
	for i := 0; i < 3; i++ {
		w.Wake()
	}
	if !returns(t, startWait(t, r, -1)) {
		t.Fatal("pending wake-ups did not end Wait(-1)")
	}
	// A backend that queues wake-ups (iocp) may need a few waits to drain
	// them, never more than three; after that a wait times out.
	for i := 0; i < 3; i++ {
		start := time.Now()
		if !returns(t, startWait(t, r, 50*time.Millisecond)) {
			t.Fatal("a 50 ms wait did not return")
		}
		if time.Since(start) >= 40*time.Millisecond {
			return
		}
	}
	t.Fatal("the wake-ups were still pending after three waits")
}

func TestAWakerOfNoKindDoesNothing(t *testing.T) {
	r, _ := open(t)
	none := waker.New(poll.WakeHandle{})
	defer none.Free()
	none.Wake()
	waker.Waker{}.Wake() // NULL, as C passes for a closed loop
	start := time.Now()
	if !returns(t, startWait(t, r, 50*time.Millisecond)) {
		t.Fatal("a 50 ms wait did not return")
	}
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Fatalf("a wait ended after %v with nothing to wake it", d)
	}
}
