// The Go side of zloopgo.stats(): one call copies a loop's engine counters
// (core.Stats), its gauges and the Go runtime's own figures into C memory
// (stats.h), so that reading every figure costs one crossing, not one per
// figure. And the benchmark's per-iteration trace: started, then taken back
// as an array C owns.
//
// It knows core's counters and runtime/metrics; nothing of Python or of
// what C counts.

package main

/*
#include <stdlib.h>
#include "stats.h"
*/
import "C"

import (
	"runtime/metrics"
	"unsafe"
)

// runtimeMetrics are the Go runtime's figures stats() reports, in the
// order goRuntime stores them.
var runtimeMetrics = [...]string{
	"/sched/goroutines:goroutines",
	"/gc/cycles/total:gc-cycles",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/total:bytes",
	"/sched/gomaxprocs:threads",
	"/cgo/go-to-c-calls:calls",
	"/sched/threads/total:threads",
}

// goRuntime reads runtimeMetrics (a few hundred nanoseconds: no stop of
// the world for these) into out; -1 for one this Go does not know.
func goRuntime(out *C.zl_engine_stats) {
	var samples [len(runtimeMetrics)]metrics.Sample
	for i, name := range runtimeMetrics {
		samples[i].Name = name
	}
	metrics.Read(samples[:])
	dst := [...]*C.int64_t{&out.goroutines, &out.gc_cycles, &out.heap_bytes, &out.memory_bytes,
		&out.gomaxprocs, &out.cgo_calls, &out.threads}
	for i, s := range samples {
		v := C.int64_t(-1)
		if s.Value.Kind() == metrics.KindUint64 {
			v = C.int64_t(s.Value.Uint64())
		}
		*dst[i] = v
	}
}

// zlgo_engine_stats fills out with the engine's counters and gauges and
// the Go runtime's figures.
//
//export zlgo_engine_stats
func zlgo_engine_stats(id C.uintptr_t, out *C.zl_engine_stats) {
	e := mustEngineFor(id).engine
	s := e.Stats()
	out.iterations = C.uint64_t(s.Iterations)
	out.waits = C.uint64_t(s.Waits)
	out.waits_blocking = C.uint64_t(s.WaitsBlocking)
	out.waits_skipped = C.uint64_t(s.WaitsSkipped)
	out.waits_full = C.uint64_t(s.WaitsFull)
	out.events = C.uint64_t(s.Events)
	out.timers_fired = C.uint64_t(s.TimersFired)
	out.yields = C.uint64_t(s.Yields)
	out.peeks = C.uint64_t(s.Peeks)
	out.peeks_found = C.uint64_t(s.PeeksFound)
	out.poll_ns = C.int64_t(s.PollNs)
	out.idle_ns = C.int64_t(s.IdleNs)
	out.busy_ns = C.int64_t(s.BusyNs)
	out.timers_held = C.int64_t(e.TimersHeld())
	goRuntime(out)
}

// zlgo_trace_start makes the engine record its next n iterations, reading
// the loop's callback count at *callbacks after each (C memory, which
// outlives the engine).
//
//export zlgo_trace_start
func zlgo_trace_start(id C.uintptr_t, n C.int64_t, callbacks *C.uint64_t) {
	le := mustEngineFor(id)
	le.host.callbacks = callbacks
	le.engine.StartTrace(int(n))
}

// zlgo_trace_take stops the trace and returns what it recorded, in C
// memory the caller frees (NULL when nothing was), and its length in *n.
//
//export zlgo_trace_take
func zlgo_trace_take(id C.uintptr_t, n *C.int64_t) *C.zl_iteration {
	le := mustEngineFor(id)
	tr := le.engine.TakeTrace()
	le.host.callbacks = nil
	*n = C.int64_t(len(tr))
	if len(tr) == 0 {
		return nil
	}
	out := (*C.zl_iteration)(C.malloc(C.size_t(len(tr)) * C.sizeof_zl_iteration))
	if out == nil {
		*n = 0
		return nil
	}
	dst := unsafe.Slice(out, len(tr))
	for i, it := range tr {
		dst[i] = C.zl_iteration{
			wait_start: C.int64_t(it.WaitStart), wait_end: C.int64_t(it.WaitEnd), end: C.int64_t(it.End),
			events: C.int32_t(it.Events), timers: C.int32_t(it.Timers),
			completions: C.int32_t(it.Completions), blocking: C.int32_t(it.Blocking),
			callbacks: C.uint64_t(it.Callbacks),
		}
	}
	return out
}

// CallbacksRun is core.TraceCallbacks: the count C keeps, while a trace
// runs (0 otherwise: nothing reads it then).
func (h *host) CallbacksRun() uint64 {
	if h.callbacks == nil {
		return 0
	}
	return uint64(*h.callbacks)
}
