// How many Ps the Go runtime gets: at least two, so that a loop confined
// to one CPU does not wake a Go thread for every batch of callbacks.
//
// Why: the loop's goroutine spends most of its time inside cgo calls
// (running Python), during which its P is "in a system call". Go's sysmon
// takes such a P away after 20 µs unless another P is idle — and with
// GOMAXPROCS 1 (what Go picks under taskset -c N, or a one-CPU container
// limit) none ever is. Each take wakes another thread (startm), which finds
// nothing to run and sleeps again, preempting the Python thread on its one
// CPU. Measured with uvicorn under wrk, the server on one CPU: ~2,500 such
// preemptions of the loop thread a second with GOMAXPROCS 1, a third of
// that with 2 (README, "One iteration, and who does what").
//
// It knows the runtime's settings; nothing of loops or Python.
package main

import (
	"os"
	"runtime"
)

// minProcs is the fewest Ps the engine runs with.
const minProcs = 2

// ensureSpareP raises GOMAXPROCS to minProcs, unless the program chose it
// (the GOMAXPROCS environment variable), which is left as it is.
func ensureSpareP() {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	if runtime.GOMAXPROCS(0) < minProcs {
		runtime.GOMAXPROCS(minProcs)
	}
}
