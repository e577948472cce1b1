// How many Ps (GOMAXPROCS) the Go runtime runs zloopgo with. It knows the
// Go runtime's scheduler, nothing of Python or of the engine.
//
// Go picks one P for a process confined to one CPU (taskset, a one-CPU
// container). With one P, every stretch the loop thread spends outside Go
// for longer than one sysmon tick (20 µs) — running a batch of callbacks,
// or blocked in epoll_wait — ends with sysmon taking the P away and, since
// no P is idle, starting a spinning thread that finds nothing to do on that
// same CPU; the loop thread then waits for the P back. A second P that
// stays idle lets sysmon leave the loop's P alone for up to 10 ms. Measured
// in docs/architecture.md ("One iteration, and who does what").

package main

import (
	"os"
	"runtime"
	"strconv"
)

// minimumPs is the fewest Ps zloopgo runs with when the program did not
// choose: one for the loop thread and one left idle.
const minimumPs = 2

func init() {
	raiseLoneP(os.Getenv, runtime.GOMAXPROCS)
}

// raiseLoneP gives the runtime minimumPs Ps when Go chose fewer and the
// program did not choose: a GOMAXPROCS the runtime honours (a positive
// integer, even 1) stands; an empty or unusable one, which the runtime
// ignores, does not count as a choice. Setting it stops Go 1.25's
// automatic updates of GOMAXPROCS, which only a process that started on
// one CPU and is later given more would miss.
func raiseLoneP(getenv func(string) string, gomaxprocs func(int) int) {
	if n, err := strconv.Atoi(getenv("GOMAXPROCS")); err == nil && n > 0 {
		return
	}
	if gomaxprocs(0) < minimumPs {
		gomaxprocs(minimumPs)
	}
}
