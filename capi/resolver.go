// The resolver's workers: goroutines that take the name lookups loops
// queue (capi/resolver.c) and run them through the C library's
// getaddrinfo/getnameinfo, on their own threads and without the GIL, then
// post each result to its loop's engine. A worker waits for work inside
// its cgo call, on a condition variable the loop thread signals, so a
// lookup reaches a thread without the Go scheduler: a goroutine readied
// from the loop thread would sit in that thread's run queue until another
// thread stole it, after a 3 µs sleep that timer slack stretches to ~50 µs.
// At most ZL_RESOLVER_WORKERS (8) exist; they are started on demand and
// live as long as the process. They never touch a Python object.
package main

/*
#include "bridge.h"
*/
import "C"

import "github.com/zloopgo/zloopgo/core"

// zlgo_resolver_spawn starts one more worker (resolver.c calls it when a
// lookup is queued and every worker is busy, at most ZL_RESOLVER_WORKERS
// times in all).
//
//export zlgo_resolver_spawn
func zlgo_resolver_spawn() {
	go resolverWorker()
}

func resolverWorker() {
	for {
		var req C.zl_lookup
		var out C.zl_completion
		C.zl_resolver_next(&req, &out)
		done := core.Completion{Request: core.RequestID(out.token), Value: uint64(out.value), Status: int64(out.status)}
		if !postTo(req.engine, done) { // its loop has closed
			C.zl_resolved_free(out.value)
		}
	}
}

// freeOrphans frees what completions that came after their loop stopped
// taking them refer to (C routes them by kind).
func freeOrphans(orphans []core.Completion) {
	for _, c := range orphans {
		C.zl_done_free(C.uint64_t(c.Request), C.uint64_t(c.Value))
	}
}
