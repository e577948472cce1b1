//go:build linux

// The cost of one non-blocking wait through the engine's reactor with a
// few ready descriptors: the per-event part of RunOnce's hot path.

package core_test

import (
	"testing"

	"github.com/zloopgo/zloopgo/core"
	"golang.org/x/sys/unix"
)

func BenchmarkReactorWaitEightReady(b *testing.B) {
	r, err := core.NewReactor()
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	for i := 0; i < 8; i++ {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
			b.Fatal(err)
		}
		defer unix.Close(p[0])
		defer unix.Close(p[1])
		if err := r.Register(p[0], core.DescriptorToken(p[0]), core.Readable); err != nil {
			b.Fatal(err)
		}
		unix.Write(p[1], []byte("x"))
	}
	events := make([]core.Event, 256)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if n, err := r.Wait(events, 0); n != 8 || err != nil {
			b.Fatalf("Wait: %d, %v", n, err)
		}
	}
}
