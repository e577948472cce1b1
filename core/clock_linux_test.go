//go:build linux

// Checks that Now reads CLOCK_MONOTONIC, the clock CPython's
// time.monotonic() reads on Linux. Other systems' time.monotonic() reads
// other clocks (mach_absolute_time, QueryPerformanceCounter); whether Now
// matches them there is not checked yet.

package core_test

import (
	"math"
	"testing"

	"github.com/zloopgo/zloopgo/core"
	"golang.org/x/sys/unix"
)

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
