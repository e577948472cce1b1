/* The ready queue: a ring of entries whose calls run in the next batch,
 * its length in zl_shared.ready_len (the engine reads it to choose a zero
 * timeout). Pushing, popping and letting an entry take over the call of a
 * handle that is alone (zl_ready_take_call) are inline in zl.h, since
 * every call_soon takes them; this file grows, clears, traverses and
 * frees the ring, and runs and releases its entries.
 *
 * An entry holds a handle (with a reference), or the call of a handle that
 * nothing but the queue referenced and that had no weak reference: such a
 * handle can never be reached again, so its callback, argument and context
 * move into the entry and the handle goes back to its free list
 * (zl_ready_take_call, from schedule.c's check of the last handle made).
 *
 * In a free-threaded build, threads other than the running loop's never
 * touch the ring: call_soon_threadsafe queues into the loop's inbox
 * (zl_inbox) under its mutex, and the loop's thread moves the inbox into
 * the ring before its next push or batch (zl_ready_sync): one lock per
 * batch, none per call_soon.
 *
 * It knows nothing of why a call is ready (a call_soon, a timer, a
 * descriptor) nor of the engine. */
#include "zl.h"
/* zl_waker_wake, for a free-threaded build's wake-up under the inbox's mutex */
#include "waker/waker.h"

int zl_ready_make(zl_loop *L)
{
    L->ready.cap = 256;
    L->ready.ring = PyMem_Malloc(L->ready.cap * sizeof(zl_entry));
    return L->ready.ring == NULL ? -1 : 0;
}

/* Doubles the ring, which is full. */
int zl_ready_grow(zl_loop *L)
{
    int64_t cap = L->ready.cap * 2;
    zl_entry *ring = PyMem_Malloc(cap * sizeof(zl_entry));
    if (ring == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int64_t i = 0; i < L->sh.ready_len; i++)
        ring[i] = L->ready.ring[(L->ready.head + i) & (L->ready.cap - 1)];
    PyMem_Free(L->ready.ring);
    L->ready.ring = ring;
    L->ready.cap = cap;
    L->ready.head = 0;
    return 0;
}

/* In the order asyncio's Handle lets go of them when it is freed (its
 * __slots__ are cleared sorted by name: _args, _callback, _context), so
 * that their finalizers run in that order. */
ZL_ALWAYS_INLINE void release_entry(zl_loop *L, zl_entry *e)
{
    Py_XDECREF(e->arg);
    Py_XDECREF(e->call);
    PyObject *context = e->context;
    e->call = e->arg = e->context = NULL;
    if (context == NULL)
        return;
    if (ZL_SHARED(context))
        /* what both ways below do with a context held elsewhere too (a
         * Task's, or a snapshot other handles share) */
        zl_context_drop_shared(context);
    else if (e->flags & ZL_ENTRY_SNAPSHOT)
        zl_context_release(context);
    else
        zl_context_recycle(L, context);
}

void zl_entry_release(zl_loop *L, zl_entry *e) { release_entry(L, e); }

/* A Handle holding an entry's call (its references move to it). */
static zl_handle *handle_for_entry(zl_loop *L, zl_entry *e)
{
    zl_handle *h =
        zl_handle_new(L, L->state->handle_type, e->call, &e->arg, e->nargs, e->context, 0);
    if (h != NULL && e->context != NULL) /* else (a bare call) it took a snapshot of its own */
        h->context_snapshot = (e->flags & ZL_ENTRY_SNAPSHOT) != 0;
    zl_entry_release(L, e);
    return h;
}

/* forced inline: gcc 12 kept it a call of its own in zl_entry_run_release */
ZL_ALWAYS_INLINE int run_entry(zl_loop *L, zl_entry *e)
{
    if (e->call == NULL)
        return 0;
    if (L->debug) { /* debug mode runs a Handle, timed (zl_handle_run_in_batch) */
        zl_handle *h = handle_for_entry(L, e);
        if (h == NULL)
            return -1;
        int rc = zl_handle_run_in_batch(h);
        Py_DECREF(h);
        return rc;
    }
    PyObject *res;
    if (e->flags & ZL_ENTRY_BARE) {
        res = PyObject_Vectorcall(e->call, &e->arg, 1, NULL);
    } else if (!(e->flags & ZL_ENTRY_SNAPSHOT) && PyContext_CheckExact(e->context)) {
        /* zl_run_call's way for a Context of the call's own, taken
         * directly: most entries are a Task's step or a future's callback */
        res = zl_call_in_context(L, e->call, &e->arg, e->nargs, e->context);
    } else {
        char snapshot = (e->flags & ZL_ENTRY_SNAPSHOT) != 0;
        res = zl_run_call(L, e->call, &e->arg, e->nargs, &e->context, &snapshot);
        e->flags = snapshot ? ZL_ENTRY_SNAPSHOT : 0;
    }
    if (res != NULL) {
        Py_DECREF(res);
        return 0;
    }
    if (zl_is_threadsafe_runner(L, e->call))
        return -1;
    /* the exception handler is told of a Handle, as asyncio's: one made for the call */
    PyObject *exc = zl_fetch_exception();
    zl_handle *h = handle_for_entry(L, e);
    zl_restore_exception(exc);
    if (h == NULL)
        return -1;
    int rc = zl_handle_report_exception(h);
    Py_DECREF(h);
    return rc;
}

int zl_entry_run(zl_loop *L, zl_entry *e) { return run_entry(L, e); }

int zl_entry_run_release(zl_loop *L, zl_entry *e)
{
    int rc = run_entry(L, e);
    release_entry(L, e);
    return rc;
}

/* An argument the adapter keeps off the collector's lists while it is
 * queued (3.14's _ThreadSafeHandle, schedule.c) is traversed through while
 * only its entry holds it: its references count as the entry's, so that a
 * cycle through it (its _loop is this loop) is found. Held by others as
 * well it is only visited: a cycle through it may then leak until it runs
 * (which puts it back on the lists), never be freed wrongly. */
static int visit_held(PyObject *o, visitproc visit, void *arg)
{
    if (o == NULL)
        return 0;
    if (PyObject_IS_GC(o) && !PyObject_GC_IsTracked(o) && Py_REFCNT(o) == 1 &&
        Py_TYPE(o)->tp_traverse != NULL)
        return Py_TYPE(o)->tp_traverse(o, visit, arg);
    return visit(o, arg);
}

/* Such an argument goes back on the lists when the queue lets go of it
 * unrun, if a program still holds it. */
static void track_if_held(PyObject *o)
{
    if (o != NULL && PyObject_IS_GC(o) && !PyObject_GC_IsTracked(o) && ZL_SHARED(o))
        PyObject_GC_Track(o);
}

#ifdef Py_GIL_DISABLED
/* ---- the inbox (free-threaded builds) ---- */

int zl_inbox_push(zl_loop *L, zl_entry e)
{
    zl_inbox *in = &L->inbox;
    PyMutex_Lock(&in->mutex);
    int ok = in->len < in->cap ||
             zl_grow_raw((void **)&in->items, &in->cap, 16, in->len + 1, sizeof(zl_entry)) == 0;
    if (ok) {
        in->items[in->len] = e;
        ZL_FT_STORE(in->len, in->len + 1);
    }
    /* The wake-up (once per sleep, as schedule.c's is in a GIL build) is
     * written under the mutex too: engine_close (loop.c) clears L->waker
     * under it before the engine frees the waker, and a loop this thread
     * saw sleeping may meanwhile have been woken by something else, run
     * and been closed by its own thread, which no GIL holds back here (a
     * waker freed, its descriptor perhaps reused: tsan41) */
    if (ok && atomic_load(&L->polling) && !zl_forked_child && L->waker != NULL &&
        !atomic_exchange(&L->wake_sent, 1)) {
        __atomic_fetch_add(&L->counters.wakeups, 1, __ATOMIC_RELAXED);
        zl_waker_wake(L->waker);
    }
    PyMutex_Unlock(&in->mutex);
    if (!ok)
        PyErr_NoMemory();
    return ok ? 0 : -1;
}

int zl_inbox_take(zl_loop *L)
{
    zl_inbox *in = &L->inbox;
    int rc = 0;
    PyMutex_Lock(&in->mutex);
    int64_t moved = 0;
    for (; moved < in->len; moved++) {
        if (L->sh.ready_len == L->ready.cap && zl_ready_grow(L) < 0) {
            rc = -1;
            break;
        }
        L->ready.ring[(L->ready.head + L->sh.ready_len) & (L->ready.cap - 1)] = in->items[moved];
        L->sh.ready_len++;
    }
    if (moved < in->len)
        memmove(in->items, in->items + moved, (size_t)(in->len - moved) * sizeof(zl_entry));
    ZL_FT_STORE(in->len, in->len - moved);
    PyMutex_Unlock(&in->mutex);
    return rc;
}

int zl_inbox_waiting(zl_loop *L)
{
    PyMutex_Lock(&L->inbox.mutex);
    int64_t n = L->inbox.len;
    PyMutex_Unlock(&L->inbox.mutex);
    return n != 0;
}

/* What the inbox holds, dropped as the ring's entries are (the loop is
 * closing: nothing can run them), and its memory. */
static void inbox_clear(zl_loop *L)
{
    for (;;) {
        PyMutex_Lock(&L->inbox.mutex);
        if (L->inbox.len == 0) {
            PyMutex_Unlock(&L->inbox.mutex);
            return;
        }
        zl_entry e = L->inbox.items[--L->inbox.len];
        PyMutex_Unlock(&L->inbox.mutex);
        /* outside the mutex: a release may run a finalizer that queues */
        if (e.flags & ZL_ENTRY_HANDLE)
            zl_handle_release((zl_handle *)e.call);
        else
            zl_entry_release(L, &e);
    }
}
#endif

void zl_ready_clear(zl_loop *L)
{
#ifdef Py_GIL_DISABLED
    inbox_clear(L);
#endif
    while (L->sh.ready_len > 0) {
        zl_entry e = zl_ready_pop(L);
        if (e.flags & ZL_ENTRY_HANDLE) {
            zl_handle_release((zl_handle *)e.call);
        } else {
            track_if_held(e.arg);
            zl_entry_release(L, &e);
        }
    }
}

int zl_ready_traverse(zl_loop *L, visitproc visit, void *arg)
{
#ifdef Py_GIL_DISABLED
    /* the collector has stopped every other thread: no push is under way */
    for (int64_t i = 0; i < L->inbox.len; i++) {
        Py_VISIT(L->inbox.items[i].call);
        Py_VISIT(L->inbox.items[i].arg);
        Py_VISIT(L->inbox.items[i].context);
    }
#endif
    for (int64_t i = 0; i < L->sh.ready_len; i++) {
        zl_entry *e = &L->ready.ring[(L->ready.head + i) & (L->ready.cap - 1)];
        if (e->flags & ZL_ENTRY_HANDLE) {
            int r = zl_visit_pending((zl_handle *)e->call, visit, arg);
            if (r != 0)
                return r;
        } else {
            Py_VISIT(e->call);
            int r = visit_held(e->arg, visit, arg);
            if (r != 0)
                return r;
            Py_VISIT(e->context);
        }
    }
    return 0;
}

void zl_ready_free(zl_loop *L)
{
    PyMem_Free(L->ready.ring);
#ifdef Py_GIL_DISABLED
    PyMem_RawFree(L->inbox.items); /* zl_grow_raw's */
#endif
}
