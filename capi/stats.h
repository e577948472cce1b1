/* What zloopgo.stats() reads from the Go side in its one call into Go
 * (zlgo_engine_stats, capi/stats.go), and the record of one iteration the
 * benchmark's trace hands back (zlgo_trace_take). No CPython types, so
 * that the Go side can include it; capi/stats.c fills Python's dict.
 *
 * It knows what the engine counts (core/stats.go), nothing of how the
 * adapter counts its own figures (zl.h, zl_counters). */
#ifndef ZL_STATS_H
#define ZL_STATS_H

#include <stdint.h>

/* core.Stats, the engine's gauges and the Go runtime's figures. */
typedef struct {
    /* the engine's totals (core.Stats) */
    uint64_t iterations, waits, waits_blocking, waits_skipped, waits_full, events, timers_fired,
        yields, peeks, peeks_found;
    int64_t poll_ns, idle_ns, busy_ns;
    /* the engine's gauges */
    int64_t timers_held; /* timers in the heap, cancelled ones not yet swept included */
    /* the Go runtime's, for the whole process (runtime/metrics); -1 where
     * this Go has no such metric */
    int64_t goroutines, gc_cycles, heap_bytes, memory_bytes, gomaxprocs, cgo_calls, threads;
} zl_engine_stats;

/* core.Iteration, as the trace hands it back (copied field by field). */
typedef struct {
    int64_t wait_start, wait_end, end; /* monotonic ns */
    int32_t events, timers, completions, blocking;
    uint64_t callbacks; /* the loop's callbacks run so far, after the iteration */
} zl_iteration;

#endif
