/* zloopgo.stats() and reset_stats() for one loop: the adapter's counters
 * (zl_counters, each field written by the file that counts), the
 * callbacks and lookups other files count anyway, the gauges C holds, and
 * in one call into Go (zlgo_engine_stats) the engine's counters and gauges
 * and the Go runtime's figures, made into one dict. reset_stats() keeps a
 * copy of every running total, which stats() subtracts: nothing counted is
 * ever written here. It also turns slow-callback detection on and off for
 * dispatch.c (zl_stats_state.slow_callbacks), and starts and takes the
 * engine's per-iteration trace for the benchmark.
 *
 * It knows which file counts what and the shape of the dict; nothing of
 * how the figures are counted, nor of Python's asyncio. */
#include "zl.h"
#include "_cgo_export.h"

/* The zloopgo loop `obj`, open and in a process whose Go runtime is its
 * own, or NULL with an exception set. */
static zl_loop *open_loop(PyObject *obj)
{
    if (!zl_is_loop(obj)) {
        PyErr_Format(PyExc_TypeError, "expected a zloopgo loop, got %.200s", Py_TYPE(obj)->tp_name);
        return NULL;
    }
    zl_loop *L = (zl_loop *)obj;
    if (zl_check_not_forked() < 0 || zl_check_closed(L) < 0)
        return NULL;
    return L;
}

/* d[key] = v (a new reference, NULL with an exception set); -1 on failure. */
static int put(PyObject *d, const char *key, PyObject *v)
{
    if (v == NULL)
        return -1;
    int r = PyDict_SetItemString(d, key, v);
    Py_DECREF(v);
    return r;
}

static int put_u(PyObject *d, const char *key, uint64_t v)
{
    return put(d, key, PyLong_FromUnsignedLongLong(v));
}

static int put_i(PyObject *d, const char *key, int64_t v)
{
    return put(d, key, PyLong_FromLongLong(v));
}

static PyObject *transport_counts(const zl_transport_counts *now, const zl_transport_counts *then)
{
    PyObject *d = PyDict_New();
    if (d == NULL || put_u(d, "reads", now->reads - then->reads) < 0 ||
        put_u(d, "read_bytes", now->read_bytes - then->read_bytes) < 0 ||
        put_u(d, "writes", now->writes - then->writes) < 0 ||
        put_u(d, "write_bytes", now->write_bytes - then->write_bytes) < 0 ||
        put_u(d, "writes_buffered", now->writes_buffered - then->writes_buffered) < 0) {
        Py_XDECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *go_runtime(const zl_engine_stats *g)
{
    PyObject *d = PyDict_New();
    if (d == NULL || put_i(d, "goroutines", g->goroutines) < 0 ||
        put_i(d, "gc_cycles", g->gc_cycles) < 0 || put_i(d, "heap_bytes", g->heap_bytes) < 0 ||
        put_i(d, "memory_bytes", g->memory_bytes) < 0 ||
        put_i(d, "gomaxprocs", g->gomaxprocs) < 0 || put_i(d, "cgo_calls", g->cgo_calls) < 0 ||
        put_i(d, "threads", g->threads) < 0) {
        Py_XDECREF(d);
        return NULL;
    }
    return d;
}

static const char *const kind_names[ZL_TRANSPORT_KINDS] = {"tcp", "unix", "other"};

/* _engine.stats(loop) */
PyObject *zl_stats(PyObject *mod, PyObject *loop)
{
    zl_loop *L = open_loop(loop);
    if (L == NULL)
        return NULL;
    zl_engine_stats g;
    zlgo_engine_stats(L->engine, &g);
    const zl_engine_stats *g0 = &L->stats.engine_at_reset;
    const zl_counters *c = &L->counters, *c0 = &L->stats.counters_at_reset;
    PyObject *d = PyDict_New(), *kinds = PyDict_New();
    if (d == NULL || kinds == NULL)
        goto fail;
    /* what the engine counts */
    if (put_u(d, "iterations", g.iterations - g0->iterations) < 0 ||
        put_u(d, "callbacks", zl_callbacks_started(L) - L->stats.callbacks_at_reset) < 0 ||
        put_i(d, "poll_ns", g.poll_ns - g0->poll_ns) < 0 ||
        put_i(d, "idle_ns", g.idle_ns - g0->idle_ns) < 0 ||
        put_i(d, "busy_ns", g.busy_ns - g0->busy_ns) < 0 ||
        put_u(d, "waits", g.waits - g0->waits) < 0 ||
        put_u(d, "waits_blocking", g.waits_blocking - g0->waits_blocking) < 0 ||
        put_u(d, "waits_skipped", g.waits_skipped - g0->waits_skipped) < 0 ||
        put_u(d, "waits_full", g.waits_full - g0->waits_full) < 0 ||
        put_u(d, "events", g.events - g0->events) < 0 ||
        put_u(d, "timers_fired", g.timers_fired - g0->timers_fired) < 0 ||
        put_u(d, "yields", g.yields - g0->yields) < 0 ||
        put_u(d, "peeks", g.peeks - g0->peeks) < 0 ||
        put_u(d, "peeks_found", g.peeks_found - g0->peeks_found) < 0)
        goto fail;
    /* gauges: what is there now (the clock as the next iteration reads it) */
    if (zl_clock_check(L) < 0)
        goto fail;
    int64_t timers = g.timers_held + L->sh.new_timers_len - L->sh.cancelled_timers;
    if (put_i(d, "ready", L->sh.ready_len) < 0 || put_i(d, "timers", timers) < 0 ||
        put_i(d, "descriptors", L->sh.watched) < 0 ||
        put_i(d, "lookups_in_flight", zl_lookups_waiting(L)) < 0 ||
        put(d, "clock_native", PyBool_FromLong(L->clock.replacement == NULL)) < 0)
        goto fail;
    /* what the adapter counts */
    for (int k = 0; k < ZL_TRANSPORT_KINDS; k++)
        if (put(kinds, kind_names[k], transport_counts(&c->transports[k], &c0->transports[k])) < 0)
            goto fail;
    if (put(d, "transports", Py_NewRef(kinds)) < 0 ||
        put_u(d, "lookups_started", zl_lookups_queued(L) - L->stats.lookups_at_reset) < 0 ||
        put_u(d, "lookups_done", c->lookups_done - c0->lookups_done) < 0 ||
        put(d, "slow_callback_detection", PyBool_FromLong(L->stats.slow_callbacks)) < 0 ||
        put_u(d, "callbacks_timed", c->timed - c0->timed) < 0 ||
        put_u(d, "callback_ns", c->timed_ns - c0->timed_ns) < 0 ||
        put_u(d, "slow_callbacks", c->slow - c0->slow) < 0 ||
        put_u(d, "wakeups", ZL_FT_LOAD(c->wakeups) - c0->wakeups) < 0 ||
        put_u(d, "looks_ahead", c->looks_ahead - c0->looks_ahead) < 0 ||
        put_u(d, "looks_ahead_ready", c->looks_ahead_ready - c0->looks_ahead_ready) < 0 ||
        put_u(d, "looks_ahead_left", c->looks_ahead_left - c0->looks_ahead_left) < 0 ||
        put_u(d, "watches_native", c->watches_native - c0->watches_native) < 0)
        goto fail;
    /* the Go runtime's, for the process */
    if (put(d, "go", go_runtime(&g)) < 0)
        goto fail;
    Py_DECREF(kinds);
    return d;
fail:
    Py_XDECREF(kinds);
    Py_XDECREF(d);
    return NULL;
}

/* _engine.reset_stats(loop): stats() counts from now on. */
PyObject *zl_reset_stats(PyObject *mod, PyObject *loop)
{
    zl_loop *L = open_loop(loop);
    if (L == NULL)
        return NULL;
    zlgo_engine_stats(L->engine, &L->stats.engine_at_reset);
    L->stats.counters_at_reset = L->counters;
    L->stats.callbacks_at_reset = zl_callbacks_started(L);
    L->stats.lookups_at_reset = zl_lookups_queued(L);
    Py_RETURN_NONE;
}

/* _engine.set_slow_callbacks(loop, on): returns whether it was on. */
PyObject *zl_set_slow_callbacks(PyObject *mod, PyObject *args)
{
    PyObject *loop;
    int on;
    if (!PyArg_ParseTuple(args, "Op", &loop, &on))
        return NULL;
    if (!zl_is_loop(loop)) {
        PyErr_Format(PyExc_TypeError, "expected a zloopgo loop, got %.200s",
                     Py_TYPE(loop)->tp_name);
        return NULL;
    }
    zl_loop *L = (zl_loop *)loop;
    int was = L->stats.slow_callbacks;
    L->stats.slow_callbacks = (char)on;
    return PyBool_FromLong(was);
}

/* _engine.trace_start(loop, n): the engine records its next n iterations. */
PyObject *zl_trace_start(PyObject *mod, PyObject *args)
{
    PyObject *loop;
    long long n;
    if (!PyArg_ParseTuple(args, "OL", &loop, &n))
        return NULL;
    zl_loop *L = open_loop(loop);
    if (L == NULL)
        return NULL;
    if (n < 0 || n > (1LL << 20)) {
        PyErr_SetString(PyExc_ValueError, "a trace holds 0 to 2**20 iterations");
        return NULL;
    }
    /* the engine reads the callback count after each iteration: memory of
     * this loop, which outlives the engine */
    zlgo_trace_start(L->engine, n, &L->callbacks.started);
    Py_RETURN_NONE;
}

/* _engine.trace_take(loop): the iterations recorded, as tuples
 * (wait_start_ns, wait_end_ns, end_ns, events, timers, completions,
 * blocking, callbacks_so_far); the trace stops. */
PyObject *zl_trace_take(PyObject *mod, PyObject *loop)
{
    zl_loop *L = open_loop(loop);
    if (L == NULL)
        return NULL;
    int64_t n = 0;
    zl_iteration *its = zlgo_trace_take(L->engine, &n);
    PyObject *list = PyList_New(n);
    for (int64_t i = 0; list != NULL && i < n; i++) {
        zl_iteration *it = &its[i];
        PyObject *t =
            Py_BuildValue("(LLLiiiiK)", (long long)it->wait_start, (long long)it->wait_end,
                          (long long)it->end, it->events, it->timers, it->completions, it->blocking,
                          (unsigned long long)it->callbacks);
        if (t == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, t);
    }
    free(its);
    return list;
}
