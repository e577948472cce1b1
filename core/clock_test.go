// Checks that Now reads the clock CPython's time.monotonic() reads.
package core_test

import (
	"math"
	"testing"
	"time"

	"github.com/zloopgo/zloopgo/core"
	"golang.org/x/sys/unix"
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

// monotonic reads CLOCK_MONOTONIC as CPython's time.monotonic() does.
func monotonic(t *testing.T) float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return float64(ts.Nano()) / 1e9
}

func TestNowIsClockMonotonic(t *testing.T) {
	for i := 0; i < 100; i++ {
		before := monotonic(t)
		now := core.Now()
		after := monotonic(t)
		// Allow for preemption between the readings, but not for a
		// different clock (CLOCK_BOOTTIME or process-relative time would
		// be off by far more).
		if now < before-0.005 || now > after+0.005 {
			t.Fatalf("Now %.9f outside CLOCK_MONOTONIC readings [%.9f, %.9f]", now, before, after)
		}
	}
	if core.Now() < 0 || math.IsNaN(core.Now()) {
		t.Fatalf("Now is %v", core.Now())
	}
}
