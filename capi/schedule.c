/* Scheduling: call_soon, call_soon_threadsafe, call_later and call_at,
 * which make a handle and put it in the ready queue (ready.c) or a timer
 * slot (timers.c) without calling Go; and how such pending handles stay
 * off the collector's lists while they wait.
 *
 * It knows nothing of when a timer is due, of descriptors or of the
 * engine, except the waker call_soon_threadsafe uses (waker.c). */
#include "zl.h"
/* zl_waker_wake; in another directory, so go build does not see it change:
 * its one prototype is all this file uses */
#include "waker/waker.h"

static PyObject *str_debug_schedule; /* "_zl_debug_schedule" */
static PyObject *str_context;        /* "context" */

/* ---- pending handles and the collector ----
 *
 * A handle made by call_soon, call_later or call_at waits in the ready
 * queue or a timer slot off the collector's lists: a million pending
 * callbacks then cost a collection nothing. That is safe as long as the
 * collector can still find every cycle through a pending handle:
 *
 * - a handle that nothing but the queue (or slot) references, and that
 *   has no weak reference from which a strong one could be made again,
 *   can never be reached from elsewhere: for the collector it is part of
 *   the loop, whose traverse visits what it references (loop_traverse,
 *   through zl_visit_pending);
 * - a handle that something else references too is tracked, so the
 *   collector sees it as it sees any object. The caller of call_soon may
 *   keep what it returns: the handle is looked at again when the next one
 *   is made, when the loop next runs its callbacks and before every
 *   collection (gc.callbacks), and tracked then if it is not alone; once
 *   alone, nothing can reach it again. Leaving the queue (zl_handle_release)
 *   tracks it too if something still holds it. */

static zl_loop *live_loops; /* every loop not yet deallocated, for the collector hook */

static int handle_alone(zl_handle *h) { return Py_REFCNT(h) == 1 && h->weakreflist == NULL; }

/* Tracks the last handle made if it is not alone; if it is, and waits in
 * the ready queue with at most one argument, its entry takes its call and
 * the handle goes (ready.c): the next one made reuses its memory, so a
 * burst of call_soon costs one handle and an entry each. */
void zl_check_new_handle(zl_loop *L)
{
    zl_handle *h = L->unchecked;
    L->unchecked = NULL;
    if (h == NULL)
        return;
    if (!handle_alone(h)) {
        if (!PyObject_GC_IsTracked((PyObject *)h))
            PyObject_GC_Track(h);
    } else if (L->unchecked_queued && h->nargs <= 1 && h->debug == NULL && !h->running &&
               Py_TYPE(h) == &zl_HandleType) {
        zl_ready_take_call(L, L->unchecked_pos, h);
    }
}

/* gc.callbacks entry: before a collection, no pending handle may be both
 * untracked and referenced from elsewhere. */
static PyObject *before_collection(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs >= 1 && PyUnicode_Check(args[0]) &&
        PyUnicode_CompareWithASCIIString(args[0], "start") == 0)
        for (zl_loop *L = live_loops; L != NULL; L = L->next_live)
            zl_check_new_handle(L);
    Py_RETURN_NONE;
}

static PyMethodDef before_collection_def = {
    "_zloopgo_before_collection", (PyCFunction)(void (*)(void))before_collection, METH_FASTCALL,
    "Tracks the pending handles of zloopgo loops that are referenced from elsewhere."};

/* Appends the hook to gc.callbacks (once, at import). */
static int install_collector_hook(void)
{
    PyObject *gc = PyImport_ImportModule("gc");
    PyObject *callbacks = gc ? PyObject_GetAttrString(gc, "callbacks") : NULL;
    PyObject *hook = callbacks ? PyCFunction_New(&before_collection_def, NULL) : NULL;
    int r = hook ? PyList_Append(callbacks, hook) : -1;
    Py_XDECREF(hook);
    Py_XDECREF(callbacks);
    Py_XDECREF(gc);
    return r;
}

/* A handle in the ready queue or a timer slot, for the loop's traverse
 * (see above). */
int zl_visit_pending(zl_handle *h, visitproc visit, void *arg)
{
    if (h == NULL)
        return 0;
    if (PyObject_GC_IsTracked((PyObject *)h))
        return visit((PyObject *)h, arg);
    if (handle_alone(h))
        return zl_handle_traverse(h, visit, arg);
    return 0; /* not possible after before_collection; if it were, a leak, never a wrong free */
}

/* Links a new loop into the list the collector hook walks. */
void zl_live_loop_add(zl_loop *L)
{
    L->next_live = live_loops;
    if (live_loops != NULL)
        live_loops->prev_live = L;
    live_loops = L;
}

/* Unlinks a loop being deallocated. */
void zl_live_loop_remove(zl_loop *L)
{
    if (L->prev_live != NULL)
        L->prev_live->next_live = L->next_live;
    else if (live_loops == L)
        live_loops = L->next_live;
    if (L->next_live != NULL)
        L->next_live->prev_live = L->prev_live;
}

/* ---- scheduling ---- */

/* Parses the keyword-only `context` argument of the call_* methods. */
static int parse_context(zl_loop *L, PyObject *kwnames, PyObject *const *kwvalues,
                         const char *method, PyObject **context)
{
    *context = NULL;
    if (kwnames == NULL)
        return 0;
    /* Every Task step is scheduled with context=, by a caller that passes
     * the same keyword tuple each time (3.14's C Task builds it once, its
     * string not interned): known by identity, it needs no comparison. */
    if (kwnames == L->context_kwnames) {
        *context = kwvalues[0];
        return 0;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (name != str_context &&
            (!PyUnicode_Check(name) || PyUnicode_Compare(name, str_context) != 0)) {
            if (PyErr_Occurred())
                return -1;
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%S'", method,
                         name);
            return -1;
        }
        *context = kwvalues[i];
    }
    if (PyTuple_GET_SIZE(kwnames) == 1)
        Py_XSETREF(L->context_kwnames, Py_NewRef(kwnames));
    return 0;
}

/* asyncio's checks before a handle is made: the loop is not closed and,
 * in debug mode only, the thread and the callback (a coroutine function
 * or a non-callable passes outside debug mode, and its error is reported
 * when it runs, as asyncio's). In debug mode *traceback is where the call
 * came from (a new reference, maybe None), for the handle; else NULL. */
static int check_schedule(zl_loop *L, const char *method, PyObject *callback, PyObject **traceback)
{
    *traceback = NULL;
    if (zl_check_closed(L) < 0)
        return -1;
    if (!L->debug)
        return 0;
    PyObject *name = PyUnicode_FromString(method);
    if (name == NULL)
        return -1;
    *traceback =
        PyObject_CallMethodObjArgs((PyObject *)L, str_debug_schedule, name, callback, NULL);
    Py_DECREF(name);
    return *traceback == NULL ? -1 : 0;
}

/* Gives h the traceback check_schedule found (stolen); -1 on failure. */
static int attach_traceback(zl_handle *h, PyObject *traceback)
{
    if (traceback == NULL)
        return 0;
    if (traceback == Py_None) {
        Py_DECREF(traceback);
        return 0;
    }
    zl_handle_debug *dbg = zl_handle_debug_info(h);
    if (dbg == NULL) {
        Py_DECREF(traceback);
        return -1;
    }
    Py_XSETREF(dbg->source_traceback, traceback);
    return 0;
}

static PyObject *schedule_soon(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames, const char *method)
{
    PyObject *context;
    if (parse_context(L, kwnames, args + nargs, method, &context) < 0)
        return NULL;
    if (nargs < 1) {
        PyErr_Format(PyExc_TypeError, "%s() missing 1 required positional argument: 'callback'",
                     method);
        return NULL;
    }
    PyObject *traceback;
    if (check_schedule(L, method, args[0], &traceback) < 0)
        return NULL;
    zl_check_new_handle(L);
    zl_handle *h = zl_handle_new(L, &zl_HandleType, args[0], args + 1, nargs - 1, context, 1);
    if (h == NULL) {
        Py_XDECREF(traceback);
        return NULL;
    }
    if (attach_traceback(h, traceback) < 0) {
        Py_DECREF(h);
        return NULL;
    }
    uint64_t pos = zl_ready_next_pos(L);
    if (zl_ready_push(L, (zl_handle *)Py_NewRef(h)) < 0) {
        Py_DECREF(h);
        return NULL;
    }
    L->unchecked = h;
    L->unchecked_pos = pos;
    L->unchecked_queued = 1;
    return (PyObject *)h;
}

PyObject *zl_loop_call_soon(zl_loop *L, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return schedule_soon(L, args, PyVectorcall_NARGS(nargs), kwnames, "call_soon");
}

PyObject *zl_loop_call_soon_threadsafe(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                                       PyObject *kwnames)
{
    PyObject *h =
        schedule_soon(L, args, PyVectorcall_NARGS(nargs), kwnames, "call_soon_threadsafe");
    /* The caller holds the GIL, so the loop thread is either running Python
     * (it will see the handle) or sleeping in the reactor, which `polling`
     * tells; only then is a wake-up needed. */
    if (h != NULL && atomic_load(&L->polling))
        zl_waker_wake(L->waker);
    return h;
}

static PyObject *schedule_timer(zl_loop *L, double when, PyObject *when_obj, PyObject *const *args,
                                Py_ssize_t nargs, PyObject *context, const char *method)
{
    PyObject *traceback;
    if (check_schedule(L, method, args[0], &traceback) < 0)
        return NULL;
    zl_check_new_handle(L);
    zl_timer *h =
        (zl_timer *)zl_handle_new(L, &zl_TimerHandleType, args[0], args + 1, nargs - 1, context, 1);
    if (h == NULL) {
        Py_XDECREF(traceback);
        return NULL;
    }
    h->when = when;
    h->when_obj = Py_XNewRef(when_obj);
    if (attach_traceback(&h->base, traceback) < 0) {
        Py_DECREF(h);
        return NULL;
    }
    if (zl_timer_slot_alloc(L, h) < 0) {
        Py_DECREF(h);
        return NULL;
    }
    L->unchecked = &h->base;
    L->unchecked_queued = 0; /* in a timer slot */
    return (PyObject *)h;
}

PyObject *zl_loop_call_later(zl_loop *L, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *context;
    nargs = PyVectorcall_NARGS(nargs);
    if (parse_context(L, kwnames, args + nargs, "call_later", &context) < 0)
        return NULL;
    if (nargs < 2) {
        PyErr_SetString(PyExc_TypeError, "call_later() needs a delay and a callback");
        return NULL;
    }
    PyObject *delay = args[0];
    if (delay == Py_None) {
        PyErr_SetString(PyExc_TypeError, "delay must not be None");
        return NULL;
    }
    if (zl_clock_check(L) < 0)
        return NULL;
    if (L->clock != NULL) {
        /* a replaced loop.time(): asyncio's self.time() + delay */
        PyObject *now_obj = zl_clock_now(L);
        PyObject *when_obj = now_obj ? PyNumber_Add(now_obj, delay) : NULL;
        Py_XDECREF(now_obj);
        double when = when_obj ? PyFloat_AsDouble(when_obj) : -1.0;
        PyObject *h = NULL;
        if (when_obj != NULL && !(when == -1.0 && PyErr_Occurred()))
            h = schedule_timer(L, when, PyFloat_CheckExact(when_obj) ? NULL : when_obj, args + 1,
                               nargs - 1, context, "call_at");
        Py_XDECREF(when_obj);
        return h;
    }
    double now = zl_monotonic(), when;
    PyObject *when_obj = NULL;
    if (PyFloat_CheckExact(delay)) {
        when = now + PyFloat_AS_DOUBLE(delay);
    } else if (PyLong_CheckExact(delay)) {
        double d = PyLong_AsDouble(delay);
        if (d == -1.0 && PyErr_Occurred())
            return NULL;
        when = now + d;
    } else {
        /* anything else is added the way asyncio adds it: loop.time() + delay */
        PyObject *nowf = PyFloat_FromDouble(now);
        if (nowf == NULL)
            return NULL;
        when_obj = PyNumber_Add(nowf, delay);
        Py_DECREF(nowf);
        if (when_obj == NULL)
            return NULL;
        when = PyFloat_AsDouble(when_obj);
        if (when == -1.0 && PyErr_Occurred()) {
            Py_DECREF(when_obj);
            return NULL;
        }
    }
    /* asyncio's call_later goes through call_at, whose checks name it */
    PyObject *h = schedule_timer(L, when, when_obj, args + 1, nargs - 1, context, "call_at");
    Py_XDECREF(when_obj);
    return h;
}

PyObject *zl_loop_call_at(zl_loop *L, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *context;
    nargs = PyVectorcall_NARGS(nargs);
    if (parse_context(L, kwnames, args + nargs, "call_at", &context) < 0)
        return NULL;
    if (nargs < 2) {
        PyErr_SetString(PyExc_TypeError, "call_at() needs a time and a callback");
        return NULL;
    }
    if (args[0] == Py_None) {
        PyErr_SetString(PyExc_TypeError, "when cannot be None");
        return NULL;
    }
    double when = PyFloat_AsDouble(args[0]);
    if (when == -1.0 && PyErr_Occurred())
        return NULL;
    PyObject *when_obj = PyFloat_CheckExact(args[0]) ? NULL : args[0];
    return schedule_timer(L, when, when_obj, args + 1, nargs - 1, context, "call_at");
}

int zl_schedule_ready(void)
{
    if (install_collector_hook() < 0)
        return -1;
    str_debug_schedule = PyUnicode_InternFromString("_zl_debug_schedule");
    str_context = PyUnicode_InternFromString("context");
    if (str_context == NULL || str_debug_schedule == NULL)
        return -1;
    return 0;
}
