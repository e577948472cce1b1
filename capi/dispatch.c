/* The calls the engine makes into C (bridge.h): zl_release and
 * zl_reacquire around a blocking wait, zl_grow_timers_out and zl_grow_done
 * for the buffers the engine fills, and zl_dispatch, which queues what one
 * iteration found ready, routes the completions other goroutines posted to
 * their owner (lookups, file operations) and runs one batch of callbacks.
 *
 * It knows the engine only through bridge.h; what a ready descriptor or a
 * due timer queues is fds.c's and timers.c's business. */
#include "zl.h"

void zl_release(uintptr_t loop)
{
    zl_loop *L = (zl_loop *)loop;
    atomic_store(&L->polling, 1);
    L->saved_tstate = PyEval_SaveThread();
}

void zl_reacquire(uintptr_t loop)
{
    zl_loop *L = (zl_loop *)loop;
    PyEval_RestoreThread(L->saved_tstate);
    atomic_store(&L->polling, 0);
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

/* Completions are routed by the kind in their token's top byte
 * (ZL_DONE_*, bridge.h), a run of the same kind at a time. */
static void settle_completions(zl_loop *L, const zl_completion *done, int64_t n)
{
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

void zl_done_free(uint64_t token, uint64_t value)
{
    if (token >> ZL_DONE_KIND_SHIFT == ZL_DONE_FILE)
        zl_files_orphan(token);
    else
        zl_resolved_free(value);
}

int zl_dispatch(uintptr_t loop, int64_t nevents, int64_t ntimers, int64_t ndone, int reacquire)
{
    zl_loop *L = (zl_loop *)loop;
    if (reacquire)
        zl_reacquire(loop);
    zl_event *events = L->sh.events;
    uint64_t *timers = L->sh.timers_out;
    for (int64_t i = 0; i < nevents; i++)
        zl_fd_ready(L, events[i].token, events[i].mask);
    for (int64_t i = 0; i < ntimers; i++)
        zl_timer_due(L, (uint32_t)timers[i]);
    if (ndone > 0) /* work other goroutines finished */
        settle_completions(L, L->sh.done, ndone);
    /* Due timers are queued before a signal may end the run, so none is lost. */
    if (PyErr_CheckSignals() < 0)
        return -1;
    /* The last handle made is looked at before the batch, not before the
     * code above: a future settled there or a signal handler may call
     * call_soon, and the batch would then run and free the handle that
     * L->pending still names (pending.c). Handles made by the batch's own
     * callbacks wait for the next one. */
    zl_pending_check(L);
    /* Only what is ready now runs; what these callbacks schedule waits for
     * the next iteration.
     *
     * The batch is quiet when every callback in it was a stream read fed
     * natively that drained its socket: no code of the program ran, no
     * descriptor was written to or registered, and every descriptor the
     * wait reported was read to the end (a full event buffer may leave
     * some unreported). Nothing the batch did can then make a descriptor
     * ready, and the engine skips the next wait if it could not block:
     * it would report only what became ready on its own meanwhile. */
    int rc = 0;
    int quiet = !L->debug && nevents < L->sh.events_cap && L->sh.ready_len > 0;
    for (int64_t ntodo = L->sh.ready_len; ntodo > 0 && L->sh.ready_len > 0 && rc == 0; ntodo--) {
        zl_entry e = zl_ready_pop(L);
        zl_transport_forget_read(L);
        if (!(e.flags & ZL_ENTRY_HANDLE)) { /* a call_soon whose handle is gone */
            quiet = 0;
            rc = zl_entry_run(L, &e);
            zl_entry_release(L, &e);
            continue;
        }
        zl_handle *h = (zl_handle *)e.call;
        quiet = quiet && !h->cancelled && zl_is_native_read(h->callback);
        if (!h->cancelled)
            rc = zl_handle_run_in_batch(h);
        quiet = quiet && zl_transport_read_was_quiet(L);
        zl_handle_release(h);
    }
    L->sh.quiet = zl_fds_take_watch_changed(L) ? 0 : quiet;
    if (rc == 0 && zl_clock_sync(L) < 0) /* for the next iteration */
        rc = -1;
    return rc;
}
