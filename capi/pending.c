/* Pending handles and the collector. A handle made by call_soon,
 * call_later or call_at waits in the ready queue or a timer slot off the
 * collector's lists: a million pending callbacks then cost a collection
 * nothing. That is safe as long as the collector can still find every
 * cycle through a pending handle:
 *
 * - a handle that nothing but the queue (or slot) references, and that
 *   has no weak reference from which a strong one could be made again,
 *   can never be reached from elsewhere: for the collector it is part of
 *   the loop, whose traverse visits what it references (zl_visit_pending,
 *   handle.c); if it waits in the ready queue with at most one argument,
 *   its entry takes over its call and the handle goes (ready.c), so that
 *   the next handle made reuses its memory: what this file checks is all
 *   that handle's dealloc needs to know, so it goes by the short way
 *   (zl_handle_hand_over, handle.c);
 * - a handle that something else references too is tracked, so the
 *   collector sees it as it sees any object. The caller of call_soon may
 *   keep what it returns: the last handle made is looked at again when the
 *   next one is made, when the loop next runs its callbacks and before
 *   every collection (a gc.callbacks hook), and tracked then if it is not
 *   alone; once alone, nothing can reach it again. Leaving the queue
 *   (zl_handle_release) tracks it too if something still holds it.
 *
 * This file alone reads and writes the loop's `pending` record (its
 * zl_pending_note, which every call_soon takes, is inline in zl.h) and the
 * list of live loops the collector hook walks. That list is the module
 * state's, one per interpreter, as the collector and its gc.callbacks
 * are: it is changed and read only with that interpreter's GIL held (loop
 * creation and deallocation, the hook), and tests/test_loops_in_threads.py
 * runs loops in several threads with a collection on nearly every
 * allocation. The hook's look may free the loop it looks at
 * (check_live_loops says how the walk survives that).
 *
 * A free-threaded build (Py_GIL_DISABLED) has neither the hook nor the
 * list: every handle is tracked from the moment it is made
 * (ZL_FT_TRACKS_PENDING, zl.h), as asyncio's are, and untracked only by
 * the hand-over, as its memory goes back to the free list. Its collector
 * calls gc.callbacks before it stops the world (CPython 3.14's
 * Python/gc_free_threading.c, gc_collect_main), so the hook would look at
 * other loops' pending records while their threads run call_soon: a lock
 * that every call_soon takes. And what untracking saves is less there:
 * that collector keeps no list to link an object into (tracking is a bit
 * in the header) and walks every block of the heap, tracked or not. The
 * looks at the last handle made that remain there (call_soon's, the
 * batch's) run on the loop's own thread, per-loop ownership, and do the
 * hand-over alone.
 *
 * It knows the ready queue only through zl_ready_take_call (inline, with
 * the hand-over it makes, in zl_pending_check); nothing of
 * timers' slots or the engine. */
#include "zl.h"

void zl_pending_forget(zl_loop *L, zl_handle *h)
{
    if (L->pending.last == h)
        L->pending.last = NULL;
}

void zl_pending_reset(zl_loop *L) { L->pending.last = NULL; }

void zl_pending_check(zl_loop *L)
{
    zl_handle *h = L->pending.last;
    L->pending.last = NULL;
    if (h == NULL)
        return;
    if (!zl_handle_alone(h)) {
        if (!PyObject_GC_IsTracked((PyObject *)h))
            PyObject_GC_Track(h);
    } else if (h->nargs <= 1 && h->debug == NULL && !h->running &&
               Py_TYPE(h) == L->state->handle_type) {
        /* a Handle waits in the ready queue (a TimerHandle in a timer slot) */
        zl_ready_take_call(L, L->pending.pos, h);
    }
}

#ifndef Py_GIL_DISABLED
/* Looks at the last handle made of each live loop. The look may hand a
 * handle over, which drops the reference it held on its loop, and that
 * may be the loop's last: a loop dropped while its last call_soon's
 * handle waits alone in its queue (the cycle loop -> queue -> handle ->
 * loop, which this collection would have freed) is deallocated right
 * there, and its dealloc may run a program's code (a subclass's __del__,
 * its __dict__ cleared) that makes or drops other loops. So the walk
 * never follows the list while looking: every listed loop is held first,
 * on a chain of the walk's own (next_held), in a pass that runs no code,
 * then looked at, then let go, each possibly deallocated then, off the
 * list's links. A listed loop whose count is 0 is being deallocated
 * (zl_loop_dealloc unlinks it only after a Python subclass's dealloc has
 * run its finalizer and cleared its __dict__, which may run a collection,
 * and after the trashcan, which may defer it): holding it would
 * deallocate it a second time, and it has no pending handle to look at
 * (each holds a reference to its loop), so it is left alone.
 * tests/test_gc.py's ..._ends_its_walk_safely reaches both. A collection
 * does not start while one runs (the collector's `collecting` flag), so
 * the chain is never in use twice. */
static void check_live_loops(zl_module_state *state)
{
    zl_loop *held = NULL;
    for (zl_loop *L = state->live_loops; L != NULL; L = L->pending.next_live)
        if (Py_REFCNT(L) > 0) {
            Py_INCREF(L);
            L->pending.next_held = held;
            held = L;
        }
    for (zl_loop *L = held; L != NULL; L = L->pending.next_held)
        zl_pending_check(L);
    while (held != NULL) {
        zl_loop *L = held;
        held = L->pending.next_held;
        L->pending.next_held = NULL;
        Py_DECREF(L);
    }
}

/* gc.callbacks entry, bound to a weak reference to the module (a strong
 * one from the process-lived list would keep every module object made
 * alive): before a collection, no pending handle of its interpreter's
 * loops may be both untracked and referenced from elsewhere. */
static PyObject *before_collection(PyObject *module_ref, PyObject *const *args, Py_ssize_t nargs)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *mod = NULL;
    if (PyWeakref_GetRef(module_ref, &mod) < 0)
        return NULL;
#else
    PyObject *mod = PyWeakref_GetObject(module_ref); /* borrowed; Py_None once it is gone */
    if (mod == NULL)
        return NULL;
    mod = mod != Py_None ? Py_NewRef(mod) : NULL;
#endif
    if (mod == NULL) /* gone: its hook is removed with it (zl_pending_fini) */
        Py_RETURN_NONE;
    zl_module_state *state = PyModule_GetState(mod);
    if (nargs >= 1 && PyUnicode_Check(args[0]) &&
        PyUnicode_CompareWithASCIIString(args[0], "start") == 0)
        check_live_loops(state);
    Py_DECREF(mod);
    Py_RETURN_NONE;
}

static PyMethodDef before_collection_def = {
    "_zloopgo_before_collection", (PyCFunction)(void (*)(void))before_collection, METH_FASTCALL,
    "Tracks the pending handles of zloopgo loops that are referenced from elsewhere."};

/* gc.callbacks, a new reference, or NULL with an exception set */
static PyObject *gc_callbacks(void)
{
    PyObject *gc = PyImport_ImportModule("gc");
    PyObject *callbacks = gc ? PyObject_GetAttrString(gc, "callbacks") : NULL;
    Py_XDECREF(gc);
    return callbacks;
}
#endif /* the hook: GIL builds only */

int zl_pending_init(PyObject *module, zl_module_state *state)
{
#ifdef Py_GIL_DISABLED
    (void)module;
    (void)state;
    return 0; /* every handle is tracked there: no hook (the header says why) */
#else
    PyObject *callbacks = gc_callbacks();
    PyObject *ref = callbacks ? PyWeakref_NewRef(module, NULL) : NULL;
    state->gc_hook = ref ? PyCFunction_New(&before_collection_def, ref) : NULL;
    int r = state->gc_hook ? PyList_Append(callbacks, state->gc_hook) : -1;
    Py_XDECREF(ref);
    Py_XDECREF(callbacks);
    return r;
#endif
}

void zl_pending_fini(zl_module_state *state)
{
#ifndef Py_GIL_DISABLED
    if (state->gc_hook == NULL)
        return;
    /* at interpreter exit gc may be gone: the hook then goes with it */
    PyObject *exc = zl_fetch_exception();
    PyObject *callbacks = gc_callbacks();
    Py_ssize_t n = callbacks != NULL && PyList_Check(callbacks) ? PyList_GET_SIZE(callbacks) : 0;
    for (Py_ssize_t i = n - 1; i >= 0; i--)
        if (PyList_GET_ITEM(callbacks, i) == state->gc_hook) {
            (void)PyList_SetSlice(callbacks, i, i + 1, NULL);
            break;
        }
    Py_XDECREF(callbacks);
    PyErr_Clear();
    if (exc != NULL)
        zl_restore_exception(exc);
    Py_CLEAR(state->gc_hook);
#else
    (void)state;
#endif
}

void zl_pending_loop_added(zl_loop *L)
{
#ifndef Py_GIL_DISABLED
    zl_loop **live_loops = &L->state->live_loops;
    L->pending.next_live = *live_loops;
    if (*live_loops != NULL)
        (*live_loops)->pending.prev_live = L;
    *live_loops = L;
#else
    (void)L;
#endif
}

void zl_pending_loop_removed(zl_loop *L)
{
#ifndef Py_GIL_DISABLED
    if (L->pending.prev_live != NULL)
        L->pending.prev_live->pending.next_live = L->pending.next_live;
    else if (L->state->live_loops == L)
        L->state->live_loops = L->pending.next_live;
    if (L->pending.next_live != NULL)
        L->pending.next_live->pending.prev_live = L->pending.prev_live;
#else
    (void)L;
#endif
}
