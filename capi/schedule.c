/* Scheduling: call_soon, call_soon_threadsafe, call_later and call_at,
 * which make a handle and put it in the ready queue (ready.c) or a timer
 * slot (timers.c) without calling Go, and tell pending.c of it.
 *
 * It knows nothing of when a timer is due, of descriptors or of the
 * engine, except the waker call_soon_threadsafe uses (waker.c). */
#include "zl.h"
/* zl_waker_wake; in another directory, so go build does not see it change:
 * its one prototype is all this file uses */
#include "waker/waker.h"

static PyObject *str_debug_schedule; /* "_zl_debug_schedule" */
static PyObject *str_context;        /* "context" */

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
    zl_pending_check(L);
    zl_handle *h = zl_handle_new(L, zl_HandleType, args[0], args + 1, nargs - 1, context, 1);
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
    zl_pending_note(L, h, pos, 1);
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
    zl_pending_check(L);
    zl_timer *h =
        (zl_timer *)zl_handle_new(L, zl_TimerHandleType, args[0], args + 1, nargs - 1, context, 1);
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
    zl_pending_note(L, &h->base, 0, 0); /* in a timer slot */
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
    if (zl_clock_replaced(L)) {
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
    str_debug_schedule = PyUnicode_InternFromString("_zl_debug_schedule");
    str_context = PyUnicode_InternFromString("context");
    if (str_context == NULL || str_debug_schedule == NULL)
        return -1;
    return 0;
}

void zl_schedule_clear(zl_loop *L) { Py_CLEAR(L->context_kwnames); }
