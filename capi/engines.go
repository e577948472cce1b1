// The one map from the engine id a C loop keeps (zl_loop's engine field)
// to its engine. C holds a plain integer because C memory may not keep a
// Go pointer; every Go entry point that C calls with an id, and every
// goroutine that posts work back to a loop (the worker pool's, workers.go),
// finds the engine here. An id is never reused and 0 never names an engine
// (C's "closed"), so a worker that finishes after its loop closed finds
// nothing and hands its work back to the pool as an orphan.
//
// This map is the Go half's only process-wide state: the ids C holds
// must resolve from any thread, whichever loop they belong to. It knows
// nothing of what the engines do.

package main

/*
#include <stdint.h>
*/
import "C"

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/zloopgo/zloopgo/core"
)

var engines struct {
	byID   sync.Map // C.uintptr_t -> *loopEngine, while its loop is open
	lastID atomic.Uintptr
}

// addEngine gives le a new id and returns it.
func addEngine(le *loopEngine) C.uintptr_t {
	id := C.uintptr_t(engines.lastID.Add(1))
	engines.byID.Store(id, le)
	return id
}

// engineFor returns the engine of id, or false once its loop has closed
// (or for an id never issued).
func engineFor(id C.uintptr_t) (*loopEngine, bool) {
	le, ok := engines.byID.Load(id)
	if !ok {
		return nil, false
	}
	return le.(*loopEngine), true
}

// mustEngineFor is engineFor for C's calls on an open loop, which never
// pass a closed loop's id: one that does is a bug in the adapter.
func mustEngineFor(id C.uintptr_t) *loopEngine {
	le, ok := engineFor(id)
	if !ok {
		panic("zloopgo: no engine has id " + strconv.FormatUint(uint64(id), 10))
	}
	return le
}

// removeEngine forgets id: from now on engineFor finds nothing for it.
func removeEngine(id C.uintptr_t) { engines.byID.Delete(id) }

// postTo hands c to the engine of loop id, from any goroutine. It reports
// false when that loop has closed or is closing: the caller then frees
// what c refers to, which no iteration will settle.
func postTo(id C.uintptr_t, c core.Completion) bool {
	le, ok := engineFor(id)
	return ok && le.engine.Post(c)
}
