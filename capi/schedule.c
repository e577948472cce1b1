/* Scheduling: call_soon, call_soon_threadsafe, call_later and call_at,
 * which make a handle and put it in the ready queue (ready.c) or a timer
 * slot (timers.c) without calling Go, and tell pending.c of it. Their
 * arguments' usual shape is bound here; any other goes to asyncio's
 * signature in Python (bind_as_asyncio), and their checks come in
 * asyncio's order.
 *
 * It knows nothing of when a timer is due, of descriptors or of the
 * engine, except the waker call_soon_threadsafe uses (waker.c). */
#include "zl.h"
#include <math.h>
#include <structmember.h>
/* zl_waker_wake; in another directory, so go build does not see it change:
 * its one prototype is all this file uses */
#include "waker/waker.h"

/* ---- scheduling ---- */

/* Whether kwnames, a keyword tuple other than the one last seen, is
 * ("context",): it is the one remembered then. */
static __attribute__((noinline)) int context_keyword(zl_loop *L, PyObject *kwnames)
{
    if (PyTuple_GET_SIZE(kwnames) != 1)
        return 0;
    PyObject *name = PyTuple_GET_ITEM(kwnames, 0);
    if (name != L->state->names.context &&
        (!PyUnicode_Check(name) || PyUnicode_Compare(name, L->state->names.context) != 0))
        return 0;
    Py_XSETREF(L->context_kwnames, Py_NewRef(kwnames));
    return 1;
}

/* The call_* methods' arguments, when they come in the shape the adapter
 * binds itself: at least `required` positional ones (the callback and,
 * for call_later and call_at, the delay or deadline before it) and no
 * keyword but `context`. 1 then, with *context the keyword's value or
 * NULL; 0 for any other shape, which bind_as_asyncio binds. Inline in
 * each method, with the keyword tuple's look by identity: every Task
 * step is scheduled with context=, by a caller that passes the same
 * keyword tuple each time (3.14's C Task builds it once, its string not
 * interned), and needs no comparison. */
ZL_ALWAYS_INLINE int parse_call(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames, Py_ssize_t required, PyObject **context)
{
    *context = NULL;
    if (nargs < required)
        return 0;
    if (kwnames == NULL)
        return 1;
    if (kwnames != L->context_kwnames && !context_keyword(L, kwnames))
        return 0;
    *context = args[nargs];
    return 1;
}

/* Any other shape of a call_* call goes to the loop's _zl_bind_<method>
 * (zloopgo/_loop.py): asyncio's signature in Python, named as asyncio's,
 * so that a missing or unexpected argument raises what asyncio's raises
 * (BaseEventLoop.call_soon() missing 1 required positional argument:
 * 'callback'), before any other check, and callback= or when= by keyword
 * are taken; it calls the method back in the shape parse_call takes.
 * Never inlined: the methods' usual way then saves no register for it. */
static __attribute__((noinline)) PyObject *bind_as_asyncio(zl_loop *L, PyObject *binder,
                                                           PyObject *const *args, Py_ssize_t nargs,
                                                           PyObject *kwnames)
{
    PyObject *bind = PyObject_GetAttr((PyObject *)L, binder);
    if (bind == NULL)
        return NULL;
    PyObject *r = PyObject_Vectorcall(bind, args, nargs, kwnames);
    Py_DECREF(bind);
    return r;
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
    *traceback = PyObject_CallMethodObjArgs((PyObject *)L, L->state->names._zl_debug_schedule, name,
                                            callback, NULL);
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

/* call_soon(args[0], *args[1:], context=context), its arguments bound */
static PyObject *schedule_soon(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *context, const char *method)
{
    PyObject *traceback = NULL;
    /* check_schedule's checks, which find nothing on an open loop outside
     * debug mode, looked at here first: every call_soon takes this way */
    if ((L->closed || L->debug) && check_schedule(L, method, args[0], &traceback) < 0)
        return NULL;
    zl_pending_check(L);
    zl_handle *h = zl_handle_new_soon(L, args[0], args + 1, nargs - 1, context);
    if (h == NULL) {
        Py_XDECREF(traceback);
        return NULL;
    }
    if (traceback != NULL && attach_traceback(h, traceback) < 0) {
        Py_DECREF(h);
        return NULL;
    }
    uint64_t pos = zl_ready_next_pos(L);
    if (zl_ready_push(L, (zl_handle *)Py_NewRef(h)) < 0) {
        Py_DECREF(h);
        return NULL;
    }
    zl_pending_note(L, h, pos);
    return (PyObject *)h;
}

PyObject *zl_loop_call_soon(zl_loop *L, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *context;
    nargs = PyVectorcall_NARGS(nargs);
    if (!parse_call(L, args, nargs, kwnames, 1, &context))
        return bind_as_asyncio(L, L->state->names._zl_bind_call_soon, args, nargs, kwnames);
    if (zl_check_owner(L) < 0) /* the ring, the free lists, the caches are the loop thread's */
        return NULL;
    return schedule_soon(L, args, nargs, context, "call_soon");
}

/* ---- 3.14+'s call_soon_threadsafe: asyncio's own _ThreadSafeHandle ----
 *
 * 3.14 returns an asyncio.events._ThreadSafeHandle, whose cancel(),
 * cancelled() and _run take its lock, so that cancelling from another
 * thread waits for a running callback. The handle made here is an
 * instance of that very class (CPython's tests check isinstance), its
 * slots filled as its __init__ fills them outside debug mode, except that
 * its _lock is a HandleLock (handle_lock.c) where asyncio makes a
 * threading.RLock: recursive as that is, taken the same way by the `with`
 * of cancel() and cancelled(), and by this file without a method call. It
 * runs as its _run does: the lock held, cancellation looked at again, then
 * context.run(callback, *args). Its cancel(), cancelled() and repr stay
 * asyncio's Python methods. Debug mode takes zloopgo's Python edge
 * (asyncio's steps, traceback, RLock and all). Set at import, in the
 * module's state (zl_threadsafe_class). */

#define SLOT(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))

/* The slot offset of member name of type, or -1 with an exception set. */
static Py_ssize_t slot_offset(PyTypeObject *type, const char *name)
{
    PyObject *d = PyObject_GetAttrString((PyObject *)type, name);
    if (d == NULL)
        return -1;
    Py_ssize_t offset = -1;
    if (Py_IS_TYPE(d, &PyMemberDescr_Type) &&
        ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX)
        offset = ((PyMemberDescrObject *)d)->d_member->offset;
    else
        PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", type->tp_name, name);
    Py_DECREF(d);
    return offset;
}

/* `with lock:`'s entry and exit: a HandleLock's own functions, or the
 * methods of what else is there (asyncio's RLock in debug mode). */
static int enter_lock(const zl_names *names, PyObject *lock)
{
    if (zl_is_handle_lock(lock))
        return zl_handle_lock_acquire(lock);
    PyObject *r = PyObject_CallMethodNoArgs(lock, names->dunder_enter);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

static int exit_lock(const zl_names *names, PyObject *lock)
{
    if (zl_is_handle_lock(lock))
        return zl_handle_lock_release(lock);
    PyObject *r =
        PyObject_CallMethodObjArgs(lock, names->dunder_exit, Py_None, Py_None, Py_None, NULL);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* handle._run of a _ThreadSafeHandle, after the loop's own look at
 * _cancelled (zloopgo's queue holds this call, the handle its argument).
 * What it raises escapes the loop's run, as what _run raises escapes
 * asyncio's _run_once: the queue does not report it as a callback's
 * (zl_is_threadsafe_runner). */
static PyObject *run_threadsafe(PyObject *mod, PyObject *handle)
{
    /* set once (set_threadsafe_handle): nothing a callback does changes it */
    const zl_module_state *state = PyModule_GetState(mod);
    const zl_threadsafe_class *ts = &state->threadsafe;
    /* the adapter queues only handles it made; anything else is refused,
     * not trusted (the runner is reachable from Python) */
    if (!PyObject_TypeCheck(handle, ts->type) || SLOT(handle, ts->cancelled) == NULL ||
        SLOT(handle, ts->lock) == NULL || SLOT(handle, ts->loop) == NULL ||
        !zl_is_loop(SLOT(handle, ts->loop))) {
        PyErr_SetString(PyExc_TypeError, "not a _ThreadSafeHandle of a zloopgo loop");
        return NULL;
    }
    if (!PyObject_GC_IsTracked(handle)) /* off the lists while queued (threadsafe_handle_new) */
        PyObject_GC_Track(handle);
    if (SLOT(handle, ts->cancelled) != Py_False &&
        PyObject_IsTrue(SLOT(handle, ts->cancelled)) != 0)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    PyObject *lock = Py_NewRef(SLOT(handle, ts->lock));
    if (enter_lock(&state->names, lock) < 0) {
        Py_DECREF(lock);
        return NULL;
    }
    int failed = 0;
    PyObject *flag = SLOT(handle, ts->cancelled);
    int cancelled = flag == Py_False ? 0 : PyObject_IsTrue(flag);
    if (cancelled < 0) {
        failed = 1;
    } else if (!cancelled &&
               (SLOT(handle, ts->args) == NULL || !PyTuple_Check(SLOT(handle, ts->args)) ||
                SLOT(handle, ts->callback) == NULL || SLOT(handle, ts->context) == NULL)) {
        PyErr_SetString(PyExc_TypeError, "a _ThreadSafeHandle without its call");
        failed = 1;
    } else if (!cancelled) {
        zl_loop *L = (zl_loop *)SLOT(handle, ts->loop);
        PyObject *callback = Py_NewRef(SLOT(handle, ts->callback));
        PyObject *args = Py_NewRef(SLOT(handle, ts->args));
        PyObject *context = Py_NewRef(SLOT(handle, ts->context));
        char snapshot = 0;
        PyObject *res = zl_run_call(L, callback, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args),
                                    &context, &snapshot);
        Py_DECREF(context);
        Py_DECREF(args);
        Py_DECREF(callback);
        if (res != NULL)
            Py_DECREF(res);
        else if (zl_report_callback_exception(L, handle) < 0) /* Handle._run's report */
            failed = 1;
    }
    /* the with statement's exit: the lock goes whatever happened */
    PyObject *pending = failed ? zl_fetch_exception() : NULL;
    int released = exit_lock(&state->names, lock);
    Py_DECREF(lock);
    if (pending != NULL) {
        if (released < 0)
            PyErr_Clear();
        zl_restore_exception(pending);
        return NULL;
    }
    return released < 0 ? NULL : Py_NewRef(Py_None);
}

static PyMethodDef run_threadsafe_def = {"_zl_run_threadsafe", run_threadsafe, METH_O,
                                         "Runs one _ThreadSafeHandle as its _run does."};

static PyObject *set_threadsafe_handle(PyObject *mod, PyObject *args)
{
    PyObject *type;
    if (!PyArg_ParseTuple(args, "O!", &PyType_Type, &type))
        return NULL;
    PyTypeObject *t = (PyTypeObject *)type;
    Py_ssize_t offsets[8];
    const char *names[8] = {"_callback",         "_args", "_cancelled", "_loop",
                            "_source_traceback", "_repr", "_context",   "_lock"};
    for (int i = 0; i < 8; i++)
        if ((offsets[i] = slot_offset(t, names[i])) < 0)
            return NULL;
    if (t->tp_dictoffset != 0) {
        PyErr_Format(PyExc_TypeError, "%s has a __dict__", t->tp_name);
        return NULL;
    }
    zl_threadsafe_class *threadsafe = &((zl_module_state *)PyModule_GetState(mod))->threadsafe;
    /* Set once per module object: the handles queued, the runner they are
     * queued with and every reader (which holds the class and its offsets
     * by pointer across Python code: run_threadsafe) rely on it. */
    if (threadsafe->type != NULL) {
        if (t == threadsafe->type)
            return Py_NewRef(threadsafe->runner);
        return PyErr_Format(PyExc_RuntimeError,
                            "this module's _ThreadSafeHandle class is %s already",
                            threadsafe->type->tp_name);
    }
    PyObject *runner = PyCFunction_New(&run_threadsafe_def, mod);
    if (runner == NULL)
        return NULL;
    threadsafe->runner = runner;
    threadsafe->type = (PyTypeObject *)Py_NewRef(type);
    threadsafe->callback = offsets[0];
    threadsafe->args = offsets[1];
    threadsafe->cancelled = offsets[2];
    threadsafe->loop = offsets[3];
    threadsafe->source_traceback = offsets[4];
    threadsafe->repr = offsets[5];
    threadsafe->context = offsets[6];
    threadsafe->lock = offsets[7];
    return Py_NewRef(runner);
}

/* In a critical section on the module (a plain call in a GIL build): two
 * threads' first calls at once are one and an answer to it. */
PyObject *zl_set_threadsafe_handle(PyObject *mod, PyObject *args)
{
    PyObject *r;
    Py_BEGIN_CRITICAL_SECTION(mod);
    r = set_threadsafe_handle(mod, args);
    Py_END_CRITICAL_SECTION();
    return r;
}

/* A _ThreadSafeHandle as its __init__ makes one outside debug mode. */
static PyObject *threadsafe_handle_new(zl_loop *L, PyObject *callback, PyObject *const *args,
                                       Py_ssize_t nargs, PyObject *context)
{
    const zl_threadsafe_class *ts = &L->state->threadsafe; /* set once */
    PyObject *argt = PyTuple_New(nargs);
    if (argt == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++)
        PyTuple_SET_ITEM(argt, i, Py_NewRef(args[i]));
    context = context == NULL || context == Py_None ? PyContext_CopyCurrent() : Py_NewRef(context);
    PyObject *lock = context ? zl_handle_lock_new(L->state) : NULL;
    PyObject *h = lock ? ts->type->tp_alloc(ts->type, 0) : NULL;
    if (h == NULL) {
        Py_DECREF(argt);
        Py_XDECREF(context);
        Py_XDECREF(lock);
        return NULL;
    }
    SLOT(h, ts->context) = context;
    SLOT(h, ts->loop) = Py_NewRef((PyObject *)L);
    SLOT(h, ts->callback) = Py_NewRef(callback);
    SLOT(h, ts->args) = argt;
    SLOT(h, ts->cancelled) = Py_NewRef(Py_False);
    SLOT(h, ts->repr) = Py_NewRef(Py_None);
    SLOT(h, ts->source_traceback) = Py_NewRef(Py_None);
    SLOT(h, ts->lock) = lock;
    /* Off the collector's lists while the queue holds them, as the
     * adapter's own handles are (handle.c): each young collection
     * traversed every queued one (1,900 of 6,400 instructions per call,
     * 20,000 queued, callgrind). The loop's traversal goes through the
     * handle while only the queue holds it (ready.c); running it
     * (run_threadsafe) or closing the loop (zl_ready_clear) puts it back.
     * The lock refers to nothing and is not the collector's.
     * A free-threaded build keeps it tracked (docs/architecture.md,
     * "Free-threaded builds"): another thread may be making it, and the
     * queue's look at its count (visit_held) is the GIL's. */
#ifndef Py_GIL_DISABLED
    PyObject_GC_UnTrack(h);
#endif
    return h;
}

#ifdef Py_GIL_DISABLED
/* A free-threaded build's call_soon_threadsafe of an adapter Handle (before
 * 3.14, and 3.14's debug mode, whose Python edge queues its handle's
 * runner) from a thread that is not the running loop's: the handle made
 * without the loop's caches (no free list: zl_handle_new pops only on the
 * loop's thread; a fresh copy of the context rather than a shared
 * snapshot; no note of it as the last handle made), tracked at once, and
 * queued into the inbox. */
static PyObject *schedule_foreign(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *context, const char *method)
{
    PyObject *traceback = NULL;
    if ((ZL_FT_LOAD(L->closed) || L->debug) && check_schedule(L, method, args[0], &traceback) < 0)
        return NULL;
    PyObject *own =
        context == NULL || context == Py_None ? PyContext_CopyCurrent() : Py_NewRef(context);
    zl_handle *h =
        own ? zl_handle_new(L, L->state->handle_type, args[0], args + 1, nargs - 1, own, 0) : NULL;
    Py_XDECREF(own);
    if (h == NULL) {
        Py_XDECREF(traceback);
        return NULL;
    }
    if (traceback != NULL && attach_traceback(h, traceback) < 0) {
        Py_DECREF(h);
        return NULL;
    }
    zl_entry e = {.call = Py_NewRef((PyObject *)h), .flags = ZL_ENTRY_HANDLE};
    if (zl_inbox_push(L, e) < 0) {
        Py_DECREF(h);
        Py_DECREF(h);
        return NULL;
    }
    return (PyObject *)h;
}
#endif

/* call_soon_threadsafe of an adapter Handle: call_soon's way on the
 * running loop's thread (and always in a GIL build: a macro there, so
 * that its code is the call itself), schedule_foreign's on any other. */
#ifdef Py_GIL_DISABLED
static PyObject *schedule_soon_threadsafe(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                                          PyObject *context)
{
    if (!zl_running_here(L))
        return schedule_foreign(L, args, nargs, context, "call_soon_threadsafe");
    return schedule_soon(L, args, nargs, context, "call_soon_threadsafe");
}
#else
#define schedule_soon_threadsafe(L, args, nargs, context) \
    schedule_soon(L, args, nargs, context, "call_soon_threadsafe")
#endif

/* asyncio 3.14's call_soon_threadsafe outside debug mode: the handle
 * queued natively, its run behind zloopgo's queue entry. */
static PyObject *schedule_threadsafe(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *context)
{
    if (zl_check_closed(L) < 0)
        return NULL;
    PyObject *handle = threadsafe_handle_new(L, args[0], args + 1, nargs - 1, context);
    if (handle == NULL)
        return NULL;
#ifdef Py_GIL_DISABLED
    if (!zl_running_here(L)) { /* the inbox; the ring is the loop thread's */
        zl_entry e = {.call = Py_NewRef(L->state->threadsafe.runner),
                      .arg = Py_NewRef(handle),
                      .nargs = 1,
                      .flags = ZL_ENTRY_BARE};
        if (zl_inbox_push(L, e) < 0) {
            Py_DECREF(e.call);
            Py_DECREF(e.arg);
            Py_DECREF(handle);
            return NULL;
        }
        return handle;
    }
#endif
    /* queued as the runner's call itself: no Handle of the adapter's, no
     * context of its own (the runner enters the handle's) */
    if (zl_ready_push_bare(L, L->state->threadsafe.runner, Py_NewRef(handle)) < 0) {
        Py_DECREF(handle);
        return NULL;
    }
    return handle;
}

PyObject *zl_loop_call_soon_threadsafe(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                                       PyObject *kwnames)
{
    PyObject *h, *context;
    nargs = PyVectorcall_NARGS(nargs);
    if (!parse_call(L, args, nargs, kwnames, 1, &context))
        return bind_as_asyncio(L, L->state->names._zl_bind_call_soon_threadsafe, args, nargs,
                               kwnames);
    if (L->state->threadsafe.type == NULL)
        h = schedule_soon_threadsafe(L, args, nargs, context);
    else if (!L->debug)
        h = schedule_threadsafe(L, args, nargs, context);
    else if (args[0] == L->state->threadsafe.runner)
        /* debug mode: the handle zloopgo's Python edge made, queued */
        h = schedule_soon_threadsafe(L, args, nargs, context);
    else {
        /* debug mode: zloopgo's Python edge takes asyncio's steps and
         * comes back above */
        PyObject *python =
            PyObject_GetAttr((PyObject *)L, L->state->names._zl_call_soon_threadsafe_python);
        if (python == NULL)
            return NULL;
        h = PyObject_Vectorcall(python, args, nargs, kwnames);
        Py_DECREF(python);
        return h;
    }
    /* The caller holds the GIL, so the loop thread is either running Python
     * or about to (it will see the handle) or sleeping in the reactor,
     * which `polling` tells; only then is a wake-up needed, and only the
     * first of that sleep (uv_async_send coalesces the same way). In a
     * child forked after the engine started, the reactor and its waker are
     * the parent's (the child's copy of `polling` may say it sleeps): the
     * handle is queued on the child's copy of the loop, which cannot run
     * there, and nothing is written. */
    /* A free-threaded build: a handle another thread queued went to the
     * inbox, and zl_inbox_push (ready.c) wrote this wake-up under its
     * mutex; `polling` is read there after the push (dispatch.c,
     * zl_release, reads the inbox under it after setting `polling`), so
     * either the loop sees the handle before it waits or that thread sees
     * it waiting. The running loop's own thread never sees it polling. */
#ifndef Py_GIL_DISABLED
    if (h != NULL && atomic_load(&L->polling) && !zl_forked_child &&
        !atomic_exchange(&L->wake_sent, 1)) {
        L->counters.wakeups++; /* under the GIL, as stats.c reads it */
        zl_waker_wake(L->waker);
    }
#endif
    return h;
}

/* ---- call_later, call_at ----
 *
 * asyncio's call_at stores `when` as it is and pushes the handle on its
 * heap, comparing `when` with that of a timer the heap holds; its run
 * loop subtracts the time from the earliest timer's `when` (when it may
 * wait) and compares it with the time. The engine's heap orders floats:
 * a float or an int is that float; another object that converts to one
 * (a subclass of float or int, a Decimal, a Fraction; an int beyond a
 * float's range is +-inf) waits at that float and is asked asyncio's
 * questions once due by it; anything else (a string, a complex, an object
 * whose __float__ raises) is odd, asked them every iteration (timers.c).
 * A new timer whose `when` is not a float or an int is compared with the
 * earliest held, as asyncio's heappush compares it with one. */

/* What asyncio's heappush compares a new timer's `when` with, if its heap
 * holds a timer, for a `when` that is not a float or an int: the earliest
 * deadline held (1, a new reference in *held); 0 if none is held. An odd
 * one may be held: every slot is looked at then (zl_timers_held_when);
 * else the engine's earliest and the earliest scheduled since tell. */
static int held_when(zl_loop *L, char kind, PyObject **held, double *deadline)
{
    if (kind == ZL_WHEN_ODD)
        return zl_timers_held_when(L, held, deadline);
    double first = L->sh.next_timer, next_new = L->sh.new_timers_first;
    if (isnan(next_new) || next_new < first)
        first = next_new;
    if (first == INFINITY)
        return 0;
    *deadline = first;
    *held = PyFloat_FromDouble(first);
    return *held == NULL ? -1 : 1;
}

/* The deadline `obj` (not an exact float) as the engine orders it: *when
 * and *kind (ZL_WHEN_*), and in *pushed what asyncio's heappush raises
 * when it compares obj with the `when` of a timer its heap holds (asyncio
 * keeps the timer on its heap all the same). -1 only for an exception
 * that is not an Exception (KeyboardInterrupt from a __float__) or
 * MemoryError. */
static int deadline_of(zl_loop *L, PyObject *obj, double *when, char *kind, PyObject **pushed)
{
    *pushed = NULL;
    *kind = PyLong_CheckExact(obj) ? ZL_WHEN_FLOAT : ZL_WHEN_CONVERTED;
    if (PyLong_Check(obj)) { /* as the int it is: no __float__ of a subclass */
        *when = PyLong_AsDouble(obj);
        if (*when == -1.0 && PyErr_Occurred()) {
            int overflow;
            PyErr_Clear(); /* beyond a float: before or after every float deadline */
            (void)PyLong_AsLongAndOverflow(obj, &overflow);
            *when = overflow < 0 ? -INFINITY : INFINITY;
            /* asked once due (never, +inf): asyncio's `when - time()` with
             * nothing ready raises OverflowError */
            *kind = ZL_WHEN_CONVERTED;
        }
    } else {
        *when = PyFloat_AsDouble(obj);
        if (*when == -1.0 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_Exception))
                return -1;
            PyErr_Clear();
            *kind = ZL_WHEN_ODD;
            *when = -INFINITY; /* due every iteration, where timers.c asks it */
        }
    }
    PyObject *held;
    double held_deadline;
    int r = *kind == ZL_WHEN_FLOAT ? 0 : held_when(L, *kind, &held, &held_deadline);
    if (r <= 0)
        return r;
    /* asyncio's heappush, the new timer on a heap that holds one:
     * `when < other._when`, and its truth. An odd timer earlier than the
     * other is at the top; else (or if that raised) it stays behind the
     * other, which is due first: it waits at the other's deadline */
    PyObject *lt = PyObject_RichCompare(obj, held, Py_LT);
    int earlier = lt != NULL ? PyObject_IsTrue(lt) : -1;
    Py_XDECREF(lt);
    Py_DECREF(held);
    if (earlier < 0)
        *pushed = zl_fetch_exception();
    if (earlier != 1 && *kind == ZL_WHEN_ODD)
        *when = held_deadline;
    return 0;
}

/* call_at(when, args[0], *args[1:], context=context), its arguments bound:
 * asyncio's checks in asyncio's order (when is not None, the loop is not
 * closed, debug mode's), then the handle. when_obj NULL: the deadline is
 * the float `when`. */
static PyObject *schedule_at(zl_loop *L, PyObject *when_obj, double when, PyObject *const *args,
                             Py_ssize_t nargs, PyObject *context)
{
    PyObject *traceback;
    if (when_obj == Py_None) {
#if PY_VERSION_HEX >= 0x030B0000
        PyErr_SetString(PyExc_TypeError, "when cannot be None");
#else
        /* 3.10's call_at checks the loop and (in debug mode) the callback,
         * then TimerHandle asserts `when is not None` */
        if (check_schedule(L, "call_at", args[0], &traceback) < 0)
            return NULL;
        Py_XDECREF(traceback);
        PyErr_SetNone(PyExc_AssertionError);
#endif
        return NULL;
    }
    /* asyncio's call_later goes through call_at, whose checks name it;
     * the timer slots are the loop thread's */
    if (zl_check_owner(L) < 0 || check_schedule(L, "call_at", args[0], &traceback) < 0)
        return NULL;
    char kind = ZL_WHEN_FLOAT;
    PyObject *pushed = NULL; /* what asyncio's heappush would raise */
    if (when_obj != NULL && PyFloat_CheckExact(when_obj)) {
        when = PyFloat_AS_DOUBLE(when_obj);
        when_obj = NULL;
    } else if (when_obj != NULL && deadline_of(L, when_obj, &when, &kind, &pushed) < 0) {
        Py_XDECREF(traceback);
        return NULL;
    }
    /* a deadline's __float__ or comparison may have closed the loop */
    if (when_obj != NULL && kind != ZL_WHEN_FLOAT && zl_check_closed(L) < 0) {
        Py_XDECREF(traceback);
        Py_XDECREF(pushed);
        return NULL;
    }
    zl_pending_check(L);
    zl_timer *h = (zl_timer *)zl_handle_new(L, L->state->timer_handle_type, args[0], args + 1,
                                            nargs - 1, context, 1);
    if (h == NULL) {
        Py_XDECREF(traceback);
        Py_XDECREF(pushed);
        return NULL;
    }
    h->when = when;
    h->when_obj = Py_XNewRef(when_obj);
    h->when_kind = kind;
    if (attach_traceback(&h->base, traceback) < 0 || zl_timer_slot_alloc(L, h) < 0) {
        Py_XDECREF(pushed);
        Py_DECREF(h);
        return NULL;
    }
    zl_pending_note(L, &h->base, 0); /* in a timer slot */
    if (pushed != NULL) { /* the timer stays held, as asyncio's on its heap; the call failed */
        zl_restore_exception(pushed);
        Py_DECREF(h);
        return NULL;
    }
    return (PyObject *)h;
}

PyObject *zl_loop_call_later(zl_loop *L, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *context;
    nargs = PyVectorcall_NARGS(nargs);
    if (!parse_call(L, args, nargs, kwnames, 2, &context))
        return bind_as_asyncio(L, L->state->names._zl_bind_call_later, args, nargs, kwnames);
    PyObject *delay = args[0];
#if PY_VERSION_HEX >= 0x030B0000
    /* asyncio checks for None from 3.11; 3.10's time() + None fails in the
     * generic addition below with the interpreter's own message */
    if (delay == Py_None) {
        PyErr_SetString(PyExc_TypeError, "delay must not be None");
        return NULL;
    }
#endif
    if (zl_clock_check(L) < 0)
        return NULL;
    double when = 0;
    PyObject *when_obj = NULL;
    if (zl_clock_replaced(L)) {
        /* a replaced loop.time(): asyncio's self.time() + delay */
        PyObject *now_obj = zl_clock_now(L);
        when_obj = now_obj ? PyNumber_Add(now_obj, delay) : NULL;
        Py_XDECREF(now_obj);
        if (when_obj == NULL)
            return NULL;
    } else if (PyFloat_CheckExact(delay)) {
        when = zl_monotonic() + PyFloat_AS_DOUBLE(delay);
    } else if (PyLong_CheckExact(delay)) {
        double d = PyLong_AsDouble(delay); /* float + int's OverflowError, as asyncio's */
        if (d == -1.0 && PyErr_Occurred())
            return NULL;
        when = zl_monotonic() + d;
    } else {
        /* anything else is added the way asyncio adds it: loop.time() + delay */
        PyObject *now = PyFloat_FromDouble(zl_monotonic());
        when_obj = now ? PyNumber_Add(now, delay) : NULL;
        Py_XDECREF(now);
        if (when_obj == NULL)
            return NULL;
    }
    PyObject *h = schedule_at(L, when_obj, when, args + 1, nargs - 1, context);
    Py_XDECREF(when_obj);
    return h;
}

PyObject *zl_loop_call_at(zl_loop *L, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *context;
    nargs = PyVectorcall_NARGS(nargs);
    if (!parse_call(L, args, nargs, kwnames, 2, &context))
        return bind_as_asyncio(L, L->state->names._zl_bind_call_at, args, nargs, kwnames);
    return schedule_at(L, args[0], 0.0, args + 1, nargs - 1, context);
}

void zl_schedule_clear(zl_loop *L) { Py_CLEAR(L->context_kwnames); }
