// Checks that Now reads the clock CPython's time.monotonic() reads.

package core_test

import (
	"testing"
	"time"

	"github.com/zloopgo/zloopgo/core"
)

func TestNowNeverGoesBackwards(t *testing.T) {
	prev := core.Now()
	deadline := time.Now().Add(50 * time.Millisecond)
	for n := 0; time.Now().Before(deadline); n++ {
		now := core.Now()
		if now < prev {
			t.Fatalf("reading %d: Now went back from %.9f to %.9f", n, prev, now)
		}
		prev = now
	}
}

func TestNowAdvancesWithRealTime(t *testing.T) {
	start := core.Now()
	time.Sleep(20 * time.Millisecond)
	if d := core.Now() - start; d < 0.019 || d > 1 {
		t.Fatalf("Now advanced %.6fs over a 20ms sleep", d)
	}
}
