/* The calls the engine makes into C (bridge.h): zl_release and
 * zl_reacquire around a blocking wait, zl_grow_timers_out, zl_grow_done
 * and zl_grow_events for the buffers the engine fills, and zl_dispatch,
 * which queues what one iteration found ready, routes the completions
 * other goroutines posted to their owner (lookups, file operations) and
 * runs one batch of callbacks, timing each one when slow-callback
 * detection is on (stats.c turns it on); then the batches of the
 * iterations after it, as long as each would be an iteration the engine
 * only hands over (core.Lookahead).
 *
 * It knows the engine only through bridge.h; what a ready descriptor or a
 * due timer queues is fds.c's and timers.c's business, how a slow
 * callback is reported the Python edge's (Loop._zl_slow_callback). */
#include "zl.h"
#include <math.h>
#ifdef Py_GIL_DISABLED
/* zl_waker_wake, for a handle another thread queued as this one set `polling` */
#include "waker/waker.h"
#endif

/* `polling` and `wake_sent` tell call_soon_threadsafe (schedule.c) whether
 * a wake-up must be written: only while the loop sleeps, and once per
 * sleep. Both are set here while the GIL is held, so a thread scheduling
 * (which holds it too) sees them together. A free-threaded build has no
 * GIL to order them: the inbox's mutex does. `polling` is set, then the
 * inbox looked at under the mutex; a thread queues under the mutex, then
 * reads `polling` (schedule.c). Either the thread sees `polling`, and
 * wakes the wait, or this look sees its handle, and the wait is woken
 * here (the engine chose its timeout from the ring alone). */
void zl_release(uintptr_t loop)
{
    zl_loop *L = (zl_loop *)loop;
    atomic_store(&L->wake_sent, 0);
    atomic_store(&L->polling, 1);
#ifdef Py_GIL_DISABLED
    if (zl_inbox_waiting(L) && !zl_forked_child && !atomic_exchange(&L->wake_sent, 1))
        zl_waker_wake(L->waker);
#endif
    L->saved_tstate = PyEval_SaveThread();
}

/* The wait is over before the GIL is: a callback queued while this thread
 * waits for it is seen by the batch that runs once it has the GIL, so it
 * needs no wake-up. Clearing `polling` only afterwards made every
 * call_soon_threadsafe of a thread holding the GIL write one (95,742
 * writes for 100,000 calls). */
void zl_reacquire(uintptr_t loop)
{
    zl_loop *L = (zl_loop *)loop;
    atomic_store(&L->polling, 0);
    PyEval_RestoreThread(L->saved_tstate);
}

int zl_grow_timers_out(uintptr_t loop, int64_t need)
{
    zl_loop *L = (zl_loop *)loop;
    return zl_grow_raw((void **)&L->sh.timers_out, &L->sh.timers_out_cap, 256, need,
                       sizeof *L->sh.timers_out);
}

int zl_grow_done(uintptr_t loop, int64_t need)
{
    zl_loop *L = (zl_loop *)loop;
    return zl_grow_raw((void **)&L->sh.done, &L->sh.done_cap, 64, need, sizeof *L->sh.done);
}

int zl_grow_events(uintptr_t loop, int64_t need)
{
    zl_loop *L = (zl_loop *)loop;
    return zl_grow_raw((void **)&L->sh.events, &L->sh.events_cap, 256, need, sizeof *L->sh.events);
}

/* ---- slow-callback detection ----
 *
 * With detection on (and debug mode off: asyncio's own timing runs then),
 * each callback of the batch is timed with a clock reading before and
 * after it, and one that took loop.slow_callback_duration or more goes to
 * the loop's _zl_slow_callback(handle, start_ns, end_ns), which logs it as
 * asyncio's debug mode does. Off, the batch pays one test per callback. */

/* loop.slow_callback_duration in nanoseconds, read once per batch; a
 * value that is not a number reports nothing (asyncio reads it only in
 * debug mode, where such a value fails its comparison). */
static int64_t slow_threshold(zl_loop *L)
{
    PyObject *v = PyObject_GetAttr((PyObject *)L, L->state->names.slow_callback_duration);
    double d = v != NULL ? PyFloat_AsDouble(v) : -1.0;
    Py_XDECREF(v);
    if (PyErr_Occurred() || isnan(d)) {
        PyErr_Clear();
        return INT64_MAX;
    }
    if (d <= 0)
        return 0;
    return d >= 9.2e9 ? INT64_MAX : (int64_t)(d * 1e9);
}

/* Counts a callback timed from t0 to t1: 1 if it was slow. */
static int count_timed(zl_loop *L, int64_t t0, int64_t t1, int64_t threshold)
{
    L->counters.timed++;
    L->counters.timed_ns += (uint64_t)(t1 - t0);
    if (t1 - t0 < threshold)
        return 0;
    L->counters.slow++;
    return 1;
}

/* loop._zl_slow_callback(handle, t0, t1): 0, or -1 with its exception. */
static int report_slow(zl_loop *L, PyObject *handle, int64_t t0, int64_t t1)
{
    PyObject *start = PyLong_FromLongLong(t0), *end = PyLong_FromLongLong(t1);
    PyObject *r = start && end
                      ? PyObject_CallMethodObjArgs((PyObject *)L, L->state->names._zl_slow_callback,
                                                   handle, start, end, NULL)
                      : NULL;
    Py_XDECREF(start);
    Py_XDECREF(end);
    Py_XDECREF(r);
    return r != NULL ? 0 : -1;
}

static int run_timed_handle(zl_loop *L, zl_handle *h, int64_t threshold)
{
    int64_t t0 = zl_monotonic_ns();
    int rc = zl_handle_run_in_batch(h);
    int64_t t1 = zl_monotonic_ns();
    if (count_timed(L, t0, t1, threshold) && rc == 0)
        rc = report_slow(L, (PyObject *)h, t0, t1);
    return rc;
}

/* An entry's call: a Handle is made to name it only when it was slow. */
static int run_timed_entry(zl_loop *L, zl_entry *e, int64_t threshold)
{
    if (e->call == NULL)
        return 0;
    PyObject *callback = Py_NewRef(e->call), *arg = Py_XNewRef(e->arg);
    Py_ssize_t nargs = e->nargs;
    int64_t t0 = zl_monotonic_ns();
    int rc = zl_entry_run(L, e);
    int64_t t1 = zl_monotonic_ns();
    if (count_timed(L, t0, t1, threshold) && rc == 0) {
        zl_handle *h = zl_handle_new(L, L->state->handle_type, callback, &arg, nargs, NULL, 0);
        rc = h != NULL ? report_slow(L, (PyObject *)h, t0, t1) : -1;
        Py_XDECREF(h);
    }
    Py_DECREF(callback);
    Py_XDECREF(arg);
    return rc;
}

/* Completions are routed by the kind in their token's top byte
 * (ZL_DONE_*, bridge.h), a run of the same kind at a time. */
static void settle_completions(zl_loop *L, const zl_completion *done, int64_t n)
{
#ifdef ZL_TSAN
    for (int64_t i = 0; i < n; i++) /* what its worker wrote (workers.h) */
        ZL_TSAN_TAKE_OVER((void *)(uintptr_t)done[i].value);
#endif
    for (int64_t i = 0; i < n;) {
        uint64_t kind = done[i].token >> ZL_DONE_KIND_SHIFT;
        int64_t j = i + 1;
        while (j < n && done[j].token >> ZL_DONE_KIND_SHIFT == kind)
            j++;
        if (kind == ZL_DONE_FILE)
            zl_settle_files(L, done + i, j - i);
        else
            zl_settle_lookups(L, done + i, j - i);
        i = j;
    }
}

/* Runs one batch: what is ready now, not what its callbacks schedule,
 * which waits for the next iteration. nevents is how many descriptors the
 * iteration's wait reported (for the quiet test below).
 *
 * The batch is quiet when every callback in it was a stream read fed
 * natively that drained its socket: no code of the program ran, no
 * descriptor was written to or registered, and every descriptor the wait
 * reported was read to the end (a full event buffer may leave some
 * unreported); and no descriptor is watched for writing, since a read
 * frees room in its socket, which makes a peer's end writable when the
 * same loop waits to write to it (both ends of a socket pair, a client
 * and server in one process). Nothing the batch did can then make a
 * descriptor ready, and the engine skips the next wait if it could not
 * block: it would report only what became ready on its own meanwhile. */
static int run_batch(zl_loop *L, int64_t nevents)
{
    /* The events, timers, lookups and signal handlers before the batch may
     * have run Python code that scheduled a handle, which this batch runs
     * and may release: the last handle made is settled before it can go. */
    zl_pending_check(L);
    int rc = 0;
    int quiet = !L->debug && nevents < L->sh.events_cap && L->sh.ready_len > 0;
    int64_t threshold = 0;
    int timing = L->stats.slow_callbacks && !L->debug && L->sh.ready_len > 0;
    if (timing)
        threshold = slow_threshold(L);
    for (int64_t ntodo = L->sh.ready_len; ntodo > 0 && L->sh.ready_len > 0 && rc == 0; ntodo--) {
        zl_entry e = zl_ready_pop(L);
        zl_transport_forget_read(L);
        if (!(e.flags & ZL_ENTRY_HANDLE)) { /* a call_soon whose handle is gone */
            quiet = 0;
            if (timing) {
                rc = run_timed_entry(L, &e, threshold);
                zl_entry_release(L, &e);
            } else {
                rc = zl_entry_run_release(L, &e);
            }
            continue;
        }
        zl_handle *h = (zl_handle *)e.call;
        quiet = quiet && !h->cancelled && zl_is_native_read(h->callback);
        if (!h->cancelled)
            rc = timing ? run_timed_handle(L, h, threshold) : zl_handle_run_in_batch(h);
        quiet = quiet && zl_transport_read_was_quiet(L);
        /* a handle the batch itself scheduled and ran is not left as the
         * last one made once the queue's reference goes */
        zl_pending_forget(L, h);
        zl_handle_release(h);
    }
    int watched_anew = zl_fds_take_watch_changed(L);
    L->sh.quiet = zl_fds_only_self_pipe(L) || (!watched_anew && L->fds.writers == 0 && quiet);
    if (rc == 0 && zl_clock_sync(L) < 0) /* for the next iteration */
        rc = -1;
    return rc;
}

/* A deadline that is not due at `now` by the engine's rule (popDue): a
 * timer is due when its deadline is before now + resolution; NaN always is. */
static int not_due(zl_loop *L, double deadline, double now)
{
    return deadline >= now + L->sh.resolution;
}

/* No completion is posted and no timer is due, neither the engine's
 * earliest nor one scheduled since it took them. */
static int nothing_else_due(zl_loop *L, const uint32_t *posted)
{
    if (__atomic_load_n(posted, __ATOMIC_ACQUIRE) != 0)
        return 0;
    double first = L->sh.next_timer, next_new = L->sh.new_timers_first;
    if (first == INFINITY && next_new == INFINITY)
        return 1;
    double now = zl_monotonic();
    return not_due(L, first, now) && not_due(L, next_new, now);
}

/* The most waits that may block made by the engine without a look here
 * first, after such a look found nothing (look_skips): an idle loop (a
 * server between requests) would otherwise pay a look before every
 * sleep. The pause doubles while looks keep finding nothing, up to this,
 * and is back to none after a look that found events. */
#define LOOK_BACKOFF_MAX 64

/* The most descriptors a loop may watch and still look ahead: a look
 * takes every event that is ready into a buffer of this many on the stack
 * (look), and with more watched the engine makes every iteration's wait
 * itself. */
#define LOOK_EVENTS_MAX 64

/* The engine's zero-timeout wait, made here on its poller (core.Lookahead.Peek,
 * zl_sys_poller_look): the events ready, at most LOOK_EVENTS_MAX + 1 in
 * `seen`, or -1 when the engine must make the wait itself — the look
 * failed (EINTR), its buffer filled (more may be ready), or the engine's
 * waker is among them (its wait drains it). It must take every event that
 * is ready, as asyncio's selector does: epoll puts an event it returns
 * back at the end of its ready list (level-triggered), behind those it
 * did not return, so a look that took fewer would change the order the
 * engine's wait then reports them in. Hence room for one more than the
 * most descriptors watched (the waker). What a look leaves to the engine
 * is still there for its wait, in the same order. About 110 ns on epoll,
 * against 290 for a poll(2) of the descriptor. */
static int look(zl_loop *L, zl_sys_poller_event *seen)
{
    int n = zl_sys_poller_look(L->sh.poller_fd, seen, LOOK_EVENTS_MAX + 1);
    L->counters.looks_ahead++;
    if (n > 0)
        L->counters.looks_ahead_ready++;
    if (n < 0 || n > LOOK_EVENTS_MAX || n > L->sh.events_cap)
        return -1;
    for (int i = 0; i < n; i++)
        if (zl_sys_poller_token(&seen[i]) == UINT64_MAX) /* poll.ReservedToken: the waker */
            return -1;
    return n;
}

/* Whether the next iteration is one the engine would only hand over, and
 * if so its events, queued here (core.Lookahead): the number queued (0
 * for a batch that skips its wait, or whose wait found nothing), or -1
 * to leave the iteration to the engine. The engine would make no wait at
 * all when callbacks are ready and nothing is watched or this batch was
 * quiet; a zero-timeout wait when callbacks are ready; a wait that may
 * block when none is. Such a wait is looked at here (look), and the
 * iteration runs here if the look found events or, with callbacks ready,
 * nothing; a look for a wait that may block that finds nothing leaves it
 * to the engine, which then makes it without a look of its own
 * (alone_looked_empty), as it does while such looks are paused.
 * No stop may be asked for and nothing else may be due (nothing_else_due,
 * asked again after the look, as the engine looks after its wait), and no
 * look is made once the engine is due to yield.
 * A replaced clock (zl_clock_sync) leaves every iteration to the engine. */
static int64_t next_alone(zl_loop *L, const uint32_t *posted)
{
    if (L->sh.stopping || L->sh.faked)
        return -1;
    if (zl_ready_sync(L) < 0) { /* left to the engine's next iteration, which raises it */
        PyErr_Clear();
        return -1;
    }
    int ready = L->sh.ready_len > 0;
    if (!ready && L->sh.watched == 0) /* only a timer or a wake-up can end its wait */
        return -1;
    int polls = L->sh.watched != 0 && !(ready && L->sh.quiet);
    if (polls && (L->sh.poller_fd < 0 || L->sh.watched > LOOK_EVENTS_MAX))
        return -1;
    if (!ready && L->look_skips > 0) { /* paused: the engine's wait goes unlooked too */
        L->look_skips--;
        L->sh.alone_looked_empty = 1;
        return -1;
    }
    if (!nothing_else_due(L, posted))
        return -1;
    if (!polls)
        return 0;
    /* The engine's yield comes at the start of an iteration it runs: a look
     * made now would find events only for the engine's wait to find them
     * again after the yield (a system call twice). */
    if (zl_monotonic() >= L->sh.yield_by)
        return -1;
    zl_sys_poller_event seen[LOOK_EVENTS_MAX + 1];
    int n = look(L, seen);
    if (n < 0 || !nothing_else_due(L, posted)) {
        L->counters.looks_ahead_left++;
        return -1;
    }
    if (n == 0 && !ready) {
        L->counters.looks_ahead_left++;
        L->sh.alone_looked_empty = 1;
        L->look_skips = L->look_backoff > 0 ? L->look_backoff : 1;
        L->look_backoff =
            L->look_skips * 2 > LOOK_BACKOFF_MAX ? LOOK_BACKOFF_MAX : L->look_skips * 2;
        return -1;
    }
    if (!ready)
        L->look_backoff = 0;
    L->sh.alone_polled++;
    L->sh.alone_events += n;
    for (int i = 0; i < n; i++)
        zl_fd_event(L, zl_sys_poller_token(&seen[i]), zl_sys_poller_interest(&seen[i]));
    return n;
}

static int dispatch_batches(zl_loop *L, int64_t nevents, int64_t ntimers, int64_t ndone,
                            int reacquire, const uint32_t *posted)
{
    uintptr_t loop = (uintptr_t)L;
    L->sh.alone_ran = 0;
    L->sh.alone_polled = 0;
    L->sh.alone_events = 0;
    L->sh.alone_looked_empty = 0;
    if (reacquire)
        zl_reacquire(loop);
    /* what other threads queued is in asyncio's ready deque already */
    if (zl_ready_sync(L) < 0)
        return -1;
    /* as asyncio's _run_once began: what an odd timer is asked depends on it */
    int idle = L->sh.ready_len == 0 && !L->sh.stopping;
    zl_event *events = L->sh.events;
    uint64_t *timers = L->sh.timers_out;
    for (int64_t i = 0; i < nevents; i++)
        zl_fd_event(L, events[i].token, events[i].mask);
    PyObject *timer_error = NULL; /* what an odd timer's deadline raised (timers.c) */
    for (int64_t i = 0; i < ntimers; i++)
        if (zl_timer_due(L, (uint32_t)timers[i], idle) < 0) {
            PyObject *exc = zl_fetch_exception();
            if (timer_error == NULL)
                timer_error = exc;
            else
                Py_XDECREF(exc);
        }
    if (ndone > 0) /* work other goroutines finished */
        settle_completions(L, L->sh.done, ndone);
    /* Due timers are queued before a signal or an odd deadline's error
     * ends the run (asyncio's raises out of it), so none is lost. */
    if (timer_error != NULL) {
        zl_restore_exception(timer_error);
        return -1;
    }
    if (PyErr_CheckSignals() < 0)
        return -1;
    int rc = run_batch(L, nevents);
    /* Each further batch is an iteration of its own, as the engine would
     * have run it: its events queued, then signals looked at, as above. */
    while (rc == 0 && L->sh.alone_ran < L->sh.alone_max) {
        int64_t n = next_alone(L, posted);
        if (n < 0)
            break;
        L->sh.alone_ran++;
        rc = PyErr_CheckSignals() < 0 ? -1 : run_batch(L, n);
    }
    return rc;
}

/* While it runs, sh.poller_fd is the engine's, which fds.c's reactor_watch
 * may change itself (core.Lookahead.Peek), counting in sh.watch_delta. */
int zl_dispatch(uintptr_t loop, int64_t nevents, int64_t ntimers, int64_t ndone, int reacquire,
                const uint32_t *posted)
{
    zl_loop *L = (zl_loop *)loop;
    L->sh.watch_delta = 0;
    L->dispatching = 1;
    int rc = dispatch_batches(L, nevents, ntimers, ndone, reacquire, posted);
    L->dispatching = 0;
    return rc;
}
