//go:build race

// What the race detector cannot see in the inbox: LSCQ hands items over
// with assembly compare-and-swap, which the detector does not instrument,
// so the poster's write of an item and the engine's read of it look
// unordered. These calls state the ordering the queue provides.
package core

import (
	"runtime"
	"unsafe"
)

func raceHandOver(item unsafe.Pointer) { runtime.RaceReleaseMerge(item) }
func raceTakeOver(item unsafe.Pointer) { runtime.RaceAcquire(item) }
