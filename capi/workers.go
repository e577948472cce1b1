// The workers of the one pool (capi/workers.c): goroutines that take the
// name lookups and file operations loops queue, perform them in C on their
// own threads without the GIL, and post each completion to its loop's
// engine (core.Engine.Post: the inbox, one reactor wake-up per batch). A
// worker waits for work inside its cgo call, on a condition variable the
// loop thread signals, so a piece of work reaches a thread without passing
// through the Go scheduler. Workers are started on demand, at most the sum
// of the pool's bounds, and live as long as the process. They never touch
// a Python object: what a piece whose loop closed refers to is freed by a
// loop thread (zl_workers_drain).

package main

/*
#include "bridge.h"
*/
import "C"

import "github.com/zloopgo/zloopgo/core"

// zlgo_workers_spawn starts one more worker (workers.c calls it when work
// may start, no worker is idle and the bounds allow another).
//
//export zlgo_workers_spawn
func zlgo_workers_spawn() {
	go worker()
}

func worker() {
	for first := C.int(1); ; first = 0 {
		var out C.zl_completion
		var engine C.uintptr_t
		C.zl_workers_next(&out, &engine, first)
		done := core.Completion{Request: core.RequestID(out.token), Value: uint64(out.value), Status: int64(out.status)}
		if !postTo(engine, done) { // its loop has closed
			C.zl_workers_orphan(out.value)
		}
	}
}

// freeOrphans hands back the work that completions a closing engine never
// gave its loop refer to, for a loop thread to free.
func freeOrphans(orphans []core.Completion) {
	for _, c := range orphans {
		C.zl_workers_orphan(C.uint64_t(c.Value))
	}
}
