//go:build linux

// The engine over the Linux reactor, woken the way the C adapter wakes it.

package core_test

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/zloopgo/zloopgo/core"
	"golang.org/x/sys/unix"
)

// The engine over the real reactor: a descriptor event reaches Dispatch,
// and a write to the eventfd from another thread ends a blocking iteration.
func TestEngineWithRealReactor(t *testing.T) {
	h := newFakeHost(t)
	e, err := core.NewEngine(h, 1e-9)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = e.Close() }()
	if k := e.Reactor().WakeHandle().Kind; k != core.WakeEventfd {
		t.Fatalf("wake handle kind %d, want WakeEventfd", k)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	if err := e.Reactor().Register(p[0], core.DescriptorToken(p[0]), core.Readable); err != nil {
		t.Fatal(err)
	}
	e.Watch(1)
	if _, err := unix.Write(p[1], []byte("x")); err != nil {
		t.Fatal(err)
	}
	runOnce(t, e)
	want := []core.Event{{Token: core.DescriptorToken(p[0]), Mask: core.Readable}}
	if got := h.last().events; !slices.Equal(got, want) {
		t.Fatalf("Dispatch got events %v, want %v", got, want)
	}
	var b [1]byte
	unix.Read(p[0], b[:])

	*h.log = nil
	go func() {
		time.Sleep(20 * time.Millisecond)
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1)
		unix.Write(int(e.Reactor().WakeHandle().Handle), one[:])
	}()
	done := make(chan error, 1)
	go func() { done <- e.RunOnce() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a write to the eventfd did not end the blocking wait")
	}
	checkLog(t, *h.log, []string{"take", "release", "reacquire", "dispatch"})
	if got := h.last().events; len(got) != 0 {
		t.Fatalf("the wake-up was reported as events %v", got)
	}
}

// The epoll reactor can be looked at (poll.PeekEpoll), and the engine
// hands its PeekHandle to the host in every Lookahead.
func TestLookaheadNamesTheEpollReactorsPeekHandle(t *testing.T) {
	h := newFakeHost(t)
	h.ready = true
	e, err := core.NewEngine(h, 1e-9)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.RunOnce(); err != nil {
		t.Fatal(err)
	}
	want := e.Reactor().(core.Peeker).PeekHandle()
	if got := lastAhead(t, h).Peek; got != want || want.Kind != core.PeekEpoll {
		t.Fatalf("peek %+v, want the epoll reactor's, %+v", got, want)
	}
}
