/* Timer slots: the TimerHandles the engine holds, indexed by the token it
 * keeps in its heap (zl_shared.slots), their free list, and the buffer of
 * timers scheduled since the engine's last iteration (zl_shared.new_timers).
 * A cancelled timer's slot stays allocated, marked, until the engine hands
 * its token back.
 *
 * It knows nothing of the heap's order or of when a timer is due: the
 * engine decides that and names due tokens (zl_timer_due). asyncio keeps
 * any object as a deadline and calls its comparisons: a timer whose
 * deadline is not a float or an int (a subclass, a Decimal, a string) is
 * asked here, once the engine finds it due, what asyncio's run loop asks
 * its earliest timer; one that is no number (call_at('soon')) waits at
 * -inf, due every iteration, and fails the run as asyncio's does. */
#include "zl.h"
#include <math.h>

void zl_timers_make(zl_loop *L) { L->timers.slots_free = UINT32_MAX; }

int zl_timer_slot_alloc(zl_loop *L, zl_timer *h)
{
    if (L->timers.slots_free == UINT32_MAX) {
        uint32_t old = L->timers.slots_cap, cap = old ? old * 2 : 64;
        zl_timer_slot *slots = PyMem_Realloc(L->sh.slots, cap * sizeof(zl_timer_slot));
        if (slots == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (uint32_t i = old; i < cap; i++) {
            slots[i].handle = NULL;
            slots[i].cancelled = 0;
            slots[i].next_free = i + 1 < cap ? i + 1 : UINT32_MAX;
        }
        L->sh.slots = slots;
        L->timers.slots_cap = cap;
        L->timers.slots_free = old;
    }
    if (L->sh.new_timers_len == L->timers.new_timers_cap) {
        int64_t cap = L->timers.new_timers_cap ? L->timers.new_timers_cap * 2 : 64;
        zl_newtimer *nt = PyMem_Realloc(L->sh.new_timers, cap * sizeof(zl_newtimer));
        if (nt == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        L->sh.new_timers = nt;
        L->timers.new_timers_cap = cap;
    }
    uint32_t i = L->timers.slots_free;
    zl_timer_slot *s = &L->sh.slots[i];
    L->timers.slots_free = s->next_free;
    s->handle = Py_NewRef((PyObject *)h);
    s->cancelled = 0;
    h->slot = i;
    h->scheduled = 1;
    L->sh.new_timers[L->sh.new_timers_len++] = (zl_newtimer){h->when, i};
    /* kept for batches run alone (dispatch.c); a NaN, always due, sticks */
    if (!isnan(L->sh.new_timers_first) && !(h->when >= L->sh.new_timers_first))
        L->sh.new_timers_first = h->when;
    return 0;
}

static void slot_free(zl_loop *L, uint32_t i)
{
    zl_timer_slot *s = &L->sh.slots[i];
    s->handle = NULL;
    s->cancelled = 0;
    s->next_free = L->timers.slots_free;
    L->timers.slots_free = i;
}

void zl_timer_cancelled(zl_loop *L, zl_timer *h)
{
    if (!h->scheduled)
        return;
    zl_timer_slot *s = &L->sh.slots[h->slot];
    PyObject *ref = s->handle;
    s->handle = NULL;
    s->cancelled = 1;
    L->sh.cancelled_timers++;
    h->scheduled = 0;
    if (ref != NULL) {
        zl_pending_forget(L, (zl_handle *)ref); /* it may go now */
        zl_handle_release((zl_handle *)ref);
    }
}

/* Drops every timer: on close, with the engine's heap dropped too. */
void zl_timers_release_all(zl_loop *L)
{
    for (uint32_t i = 0; i < L->timers.slots_cap; i++) {
        zl_timer *h = L->sh.slots[i].handle;
        if (h != NULL) {
            h->scheduled = 0;
            L->sh.slots[i].handle = NULL;
            zl_handle_release(&h->base);
        }
        L->sh.slots[i].cancelled = 0;
        L->sh.slots[i].next_free = i + 1 < L->timers.slots_cap ? i + 1 : UINT32_MAX;
    }
    L->timers.slots_free = L->timers.slots_cap ? 0 : UINT32_MAX;
    L->sh.new_timers_len = 0;
    L->sh.new_timers_first = INFINITY;
    L->sh.cancelled_timers = 0;
}

/* What asyncio's _run_once asks its earliest timer, for one whose
 * deadline is not a float: 1 due, 0 not, -1 with what the question
 * raised. asyncio computes the wait, when nothing is ready and no stop is
 * asked for, as `when - time()`, then takes the timers for which
 * `not when >= time() + clock resolution`. */
static int is_due(zl_loop *L, zl_timer *h, int idle)
{
    PyObject *now = zl_clock_now(L);
    if (now == NULL)
        return -1;
    int due = -1;
    /* only the earliest timer's wait is computed: an odd one behind
     * another (a finite deadline, schedule.c) reached the top only now */
    if (idle && (h->when_kind == ZL_WHEN_CONVERTED || h->when == -INFINITY)) {
        PyObject *wait = PyNumber_Subtract(h->when_obj, now);
        if (wait == NULL)
            goto done;
        Py_DECREF(wait);
    }
    PyObject *resolution = PyFloat_FromDouble(L->sh.resolution);
    PyObject *end = resolution ? PyNumber_Add(now, resolution) : NULL;
    Py_XDECREF(resolution);
    PyObject *later = end ? PyObject_RichCompare(h->when_obj, end, Py_GE) : NULL;
    Py_XDECREF(end);
    if (later != NULL) {
        int is_later = PyObject_IsTrue(later);
        Py_DECREF(later);
        due = is_later < 0 ? -1 : !is_later;
    }
done:
    Py_DECREF(now);
    return due;
}

/* Moves a due timer's slot reference to the ready queue. */
static void queue_due(zl_loop *L, zl_timer *h)
{
    h->scheduled = 0;
    if (zl_ready_push(L, &h->base) < 0) { /* the slot's reference moves to the queue */
        zl_pending_forget(L, &h->base);   /* gone with it */
        PyErr_WriteUnraisable((PyObject *)L);
    }
}

/* The engine found the timer in `slot` due (or dropped it, cancelled):
 * its handle goes to the ready queue and the slot is free again. One
 * whose deadline is not a float and says it is not due, or whose question
 * raised, takes a slot again: asyncio's stays at the top of its heap, asked
 * again next time (an odd one from now on at -inf, the top). */
int zl_timer_due(zl_loop *L, uint32_t slot, int idle)
{
    zl_timer *h = L->sh.slots[slot].handle;
    if (h == NULL) {
        L->sh.cancelled_timers--;
    } else if (h->when_kind != ZL_WHEN_FLOAT) {
        /* the question runs the deadline's own code, which may cancel the
         * timer (the slot's reference goes) or schedule others (the slots
         * may move): h is held, the slot looked at again by its index */
        Py_INCREF(h);
        int rc = is_due(L, h, idle);
        PyObject *exc = rc < 0 ? zl_fetch_exception() : NULL;
        int taken = L->sh.slots[slot].handle != NULL;
        if (!taken) /* cancelled meanwhile: its slot marked for a token the engine handed back */
            L->sh.cancelled_timers--;
        else if (rc == 1)
            queue_due(L, h);
        slot_free(L, slot);
        if (taken && rc != 1) {
            if (h->when_kind == ZL_WHEN_ODD)
                h->when = -INFINITY;             /* at the top of asyncio's heap from now on */
            if (zl_timer_slot_alloc(L, h) < 0) { /* a reference of its own */
                Py_XDECREF(exc);
                exc = zl_fetch_exception();
            }
            zl_handle_release(&h->base); /* the old slot's */
        }
        Py_DECREF(h);
        if (exc != NULL) {
            zl_restore_exception(exc);
            return -1;
        }
        return 0;
    } else {
        queue_due(L, h);
    }
    slot_free(L, slot);
    return 0;
}

/* Breaking a reference cycle: every timer is cancelled, its slot kept
 * (marked cancelled) while the engine may still hold the token. */
void zl_timers_cancel_all(zl_loop *L)
{
    for (uint32_t i = 0; i < L->timers.slots_cap; i++) {
        zl_timer *h = L->sh.slots[i].handle;
        if (h != NULL)
            zl_timer_cancelled(L, h);
    }
}

int zl_timers_traverse(zl_loop *L, visitproc visit, void *arg)
{
    for (uint32_t i = 0; i < L->timers.slots_cap; i++) {
        int r = zl_visit_pending(L->sh.slots[i].handle, visit, arg);
        if (r != 0)
            return r;
    }
    return 0;
}

void zl_timers_free(zl_loop *L)
{
    PyMem_Free(L->sh.slots);
    PyMem_Free(L->sh.new_timers);
}

int zl_timers_held_when(zl_loop *L, PyObject **when, double *deadline)
{
    zl_timer *first = NULL, *odd = NULL;
    int held = 0;
    for (uint32_t i = 0; i < L->timers.slots_cap; i++) {
        zl_timer *h = L->sh.slots[i].handle;
        held |= h != NULL || L->sh.slots[i].cancelled;
        if (h != NULL && h->when_kind == ZL_WHEN_ODD)
            odd = h;
        else if (h != NULL && (first == NULL || h->when < first->when))
            first = h;
    }
    if (!held)
        return 0;
    if (first != NULL) {
        *deadline = first->when;
        *when =
            first->when_obj != NULL ? Py_NewRef(first->when_obj) : PyFloat_FromDouble(first->when);
    } else if (odd != NULL) {
        *deadline = odd->when;
        *when = Py_NewRef(odd->when_obj);
    } else { /* cancelled ones alone, whose deadlines (mostly floats) are not kept */
        *deadline = 0.0;
        *when = PyFloat_FromDouble(0.0);
    }
    return *when == NULL ? -1 : 1;
}
