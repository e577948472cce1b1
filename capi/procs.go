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
)

// minimumPs is the fewest Ps zloopgo runs with when the program did not
// choose: one for the loop thread and one left idle.
const minimumPs = 2

func init() {
	raiseLoneP(os.LookupEnv, runtime.GOMAXPROCS)
}

// raiseLoneP gives the runtime minimumPs Ps when Go chose fewer and the
// program did not set GOMAXPROCS itself (its choice stands, even 1).
// Setting it stops Go 1.25's automatic updates of GOMAXPROCS, which only
// a process that started on one CPU and is later given more would miss.
func raiseLoneP(lookupEnv func(string) (string, bool), gomaxprocs func(int) int) {
	if _, set := lookupEnv("GOMAXPROCS"); set {
		return
	}
	if gomaxprocs(0) < minimumPs {
		gomaxprocs(minimumPs)
	}
}
