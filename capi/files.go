// The file workers: goroutines that take the file operations loops queue
// (capi/files.c: open, pread, pwrite, lseek, close, stat, rename, ...),
// perform them in C on their own threads without the GIL, and post each
// completion to its loop's engine (core.Engine.Post: the inbox, one reactor
// wake-up per batch). Like the resolver's workers (resolver.go), a worker
// waits for work inside its cgo call on a condition variable the loop
// thread signals, so an operation reaches a thread without passing through
// the Go scheduler. They are started on demand, at most the bound set in
// files.c, and live as long as the process. They never touch a Python
// object; what an operation refers to is freed by a loop thread.
package main

/*
#include "bridge.h"
*/
import "C"

import "github.com/zloopgo/zloopgo/core"

// zlgo_files_spawn starts one more file worker (files.c calls it when an
// operation is queued, every worker is busy and the bound allows more).
//
//export zlgo_files_spawn
func zlgo_files_spawn() {
	go fileWorker()
}

func fileWorker() {
	for {
		var out C.zl_completion
		var engine C.uintptr_t
		C.zl_files_next(&out, &engine)
		done := core.Completion{Request: core.RequestID(out.token), Value: uint64(out.value), Status: int64(out.status)}
		if !postTo(engine, done) { // its loop has closed
			C.zl_files_orphan(out.token)
		}
	}
}
