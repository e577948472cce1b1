/* LoopCore: the native half of zloopgo.Loop. It holds the ready queue, the
 * timer slots and the descriptor table in C memory that the Go engine
 * reads (bridge.h), implements the hot methods (call_soon, call_later,
 * call_at, call_soon_threadsafe, time, stop) without calling Go, and runs
 * the engine from _zl_run(). It knows the engine only through the
 * zlgo_* functions and the three callbacks declared in bridge.h. */
#include "zl.h"
#include "_cgo_export.h"
#include <errno.h>
#include <limits.h>
#include <unistd.h>

static PyObject *str_debug_schedule; /* "_zl_debug_schedule" */
static PyObject *str_context;        /* "context" */
static PyObject *str_run_debug;      /* "_zl_run_debug" */
static PyObject *str_Future, *str_Task, *kw_loop, *kw_loop_name, *kw_loop_context, *kw_loop_name_context;

static int check_closed(zl_loop *L)
{
    if (L->closed) {
        PyErr_SetString(PyExc_RuntimeError, "Event loop is closed");
        return -1;
    }
    return 0;
}

/* ---- the ready queue ---- */

static int ring_push(zl_loop *L, zl_handle *h) /* steals h */
{
    if (L->sh.ready_len == L->ring_cap) {
        int64_t cap = L->ring_cap * 2;
        zl_handle **ring = PyMem_Malloc(cap * sizeof(zl_handle *));
        if (ring == NULL) {
            Py_DECREF(h);
            PyErr_NoMemory();
            return -1;
        }
        for (int64_t i = 0; i < L->sh.ready_len; i++)
            ring[i] = L->ring[(L->ring_head + i) & (L->ring_cap - 1)];
        PyMem_Free(L->ring);
        L->ring = ring;
        L->ring_cap = cap;
        L->ring_head = 0;
    }
    L->ring[(L->ring_head + L->sh.ready_len) & (L->ring_cap - 1)] = h;
    L->sh.ready_len++;
    return 0;
}

static zl_handle *ring_pop(zl_loop *L) /* returns a reference */
{
    zl_handle *h = L->ring[L->ring_head];
    L->ring_head = (L->ring_head + 1) & (L->ring_cap - 1);
    L->sh.ready_len--;
    return h;
}

static void ring_clear(zl_loop *L)
{
    while (L->sh.ready_len > 0)
        zl_handle_release(ring_pop(L));
}

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
 *   the loop, whose traverse visits what it references (loop_traverse);
 * - a handle that something else references too is tracked, so the
 *   collector sees it as it sees any object. The caller of call_soon may
 *   keep what it returns: the handle is looked at again when the next one
 *   is made, when the loop next runs its callbacks and before every
 *   collection (gc.callbacks), and tracked then if it is not alone; once
 *   alone, nothing can reach it again. Leaving the queue (zl_handle_release)
 *   tracks it too if something still holds it. */

static zl_loop *live_loops; /* every loop not yet deallocated, for the collector hook */

static int handle_alone(zl_handle *h)
{
    return Py_REFCNT(h) == 1 && h->weakreflist == NULL;
}

/* Tracks the last handle made if it is not alone. */
static void check_new_handle(zl_loop *L)
{
    zl_handle *h = L->unchecked;
    L->unchecked = NULL;
    if (h != NULL && !handle_alone(h) && !PyObject_GC_IsTracked((PyObject *)h))
        PyObject_GC_Track(h);
}

/* gc.callbacks entry: before a collection, no pending handle may be both
 * untracked and referenced from elsewhere. */
static PyObject *before_collection(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs >= 1 && PyUnicode_Check(args[0]) && PyUnicode_CompareWithASCIIString(args[0], "start") == 0)
        for (zl_loop *L = live_loops; L != NULL; L = L->next_live)
            check_new_handle(L);
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

/* ---- timer slots ---- */

static int slot_alloc(zl_loop *L, zl_timer *h)
{
    if (L->slots_free == UINT32_MAX) {
        uint32_t old = L->slots_cap, cap = old ? old * 2 : 64;
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
        L->slots_cap = cap;
        L->slots_free = old;
    }
    if (L->sh.new_timers_len == L->new_timers_cap) {
        int64_t cap = L->new_timers_cap ? L->new_timers_cap * 2 : 64;
        zl_newtimer *nt = PyMem_Realloc(L->sh.new_timers, cap * sizeof(zl_newtimer));
        if (nt == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        L->sh.new_timers = nt;
        L->new_timers_cap = cap;
    }
    uint32_t i = L->slots_free;
    zl_timer_slot *s = &L->sh.slots[i];
    L->slots_free = s->next_free;
    s->handle = Py_NewRef((PyObject *)h);
    s->cancelled = 0;
    h->slot = i;
    h->scheduled = 1;
    L->sh.new_timers[L->sh.new_timers_len++] = (zl_newtimer){h->when, i};
    return 0;
}

static void slot_free(zl_loop *L, uint32_t i)
{
    zl_timer_slot *s = &L->sh.slots[i];
    s->handle = NULL;
    s->cancelled = 0;
    s->next_free = L->slots_free;
    L->slots_free = i;
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
    if (ref != NULL)
        zl_handle_release((zl_handle *)ref);
}

/* Drops every timer: on close, with the engine's heap dropped too. */
static void slots_release_all(zl_loop *L)
{
    for (uint32_t i = 0; i < L->slots_cap; i++) {
        zl_timer *h = L->sh.slots[i].handle;
        if (h != NULL) {
            h->scheduled = 0;
            L->sh.slots[i].handle = NULL;
            zl_handle_release(&h->base);
        }
        L->sh.slots[i].cancelled = 0;
        L->sh.slots[i].next_free = i + 1 < L->slots_cap ? i + 1 : UINT32_MAX;
    }
    L->slots_free = L->slots_cap ? 0 : UINT32_MAX;
    L->sh.new_timers_len = 0;
    L->sh.cancelled_timers = 0;
}

/* ---- scheduling ---- */

/* Parses the keyword-only `context` argument of the call_* methods. */
static int parse_context(PyObject *kwnames, PyObject *const *kwvalues, const char *method,
                         PyObject **context)
{
    *context = NULL;
    if (kwnames == NULL)
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        /* keyword names are usually the interned string: compare pointers
         * first (every Task step is scheduled with context=) */
        if (name != str_context &&
            (!PyUnicode_Check(name) || PyUnicode_Compare(name, str_context) != 0)) {
            if (PyErr_Occurred())
                return -1;
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%S'",
                         method, name);
            return -1;
        }
        *context = kwvalues[i];
    }
    return 0;
}

/* In debug mode, asyncio's thread and callback checks and the source
 * traceback come from zloopgo's Python edge. */
static int debug_schedule(zl_loop *L, const char *method, PyObject *callback, zl_handle *h)
{
    PyObject *name = PyUnicode_FromString(method);
    if (name == NULL)
        return -1;
    PyObject *tb = PyObject_CallMethodObjArgs((PyObject *)L, str_debug_schedule, name, callback, NULL);
    Py_DECREF(name);
    if (tb == NULL)
        return -1;
    if (h != NULL && tb != Py_None) {
        zl_handle_debug *dbg = zl_handle_debug_info(h);
        if (dbg == NULL) {
            Py_DECREF(tb);
            return -1;
        }
        Py_XSETREF(dbg->source_traceback, Py_NewRef(tb));
    }
    Py_DECREF(tb);
    return 0;
}

static int check_schedule(zl_loop *L, const char *method, PyObject *callback)
{
    if (check_closed(L) < 0)
        return -1;
    if (L->debug)
        return debug_schedule(L, method, callback, NULL);
    return zl_check_callback(callback, method);
}

static PyObject *schedule_soon(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames, const char *method)
{
    PyObject *context;
    if (parse_context(kwnames, args + nargs, method, &context) < 0)
        return NULL;
    if (nargs < 1) {
        PyErr_Format(PyExc_TypeError, "%s() missing 1 required positional argument: 'callback'", method);
        return NULL;
    }
    if (check_schedule(L, method, args[0]) < 0)
        return NULL;
    check_new_handle(L);
    zl_handle *h = zl_handle_new(L, &zl_HandleType, args[0], args + 1, nargs - 1, context, 1);
    if (h == NULL)
        return NULL;
    if (L->debug && debug_schedule(L, method, args[0], h) < 0) {
        Py_DECREF(h);
        return NULL;
    }
    if (ring_push(L, (zl_handle *)Py_NewRef(h)) < 0) {
        Py_DECREF(h);
        return NULL;
    }
    L->unchecked = h;
    return (PyObject *)h;
}

static PyObject *loop_call_soon(zl_loop *L, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return schedule_soon(L, args, PyVectorcall_NARGS(nargs), kwnames, "call_soon");
}

static PyObject *loop_call_soon_threadsafe(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                                           PyObject *kwnames)
{
    PyObject *h = schedule_soon(L, args, PyVectorcall_NARGS(nargs), kwnames, "call_soon_threadsafe");
    /* The caller holds the GIL, so the loop thread is either running Python
     * (it will see the handle) or sleeping in the reactor, which `polling`
     * tells; only then is the wake-up write needed. */
    if (h != NULL && atomic_load(&L->polling)) {
        uint64_t one = 1;
        ssize_t r = write(L->wakefd, &one, sizeof one);
        (void)r; /* EAGAIN means a wake-up is already pending */
    }
    return h;
}

static PyObject *schedule_timer(zl_loop *L, double when, PyObject *when_obj, PyObject *const *args,
                                Py_ssize_t nargs, PyObject *context, const char *method)
{
    if (check_schedule(L, method, args[0]) < 0)
        return NULL;
    check_new_handle(L);
    zl_timer *h = (zl_timer *)zl_handle_new(L, &zl_TimerHandleType, args[0], args + 1, nargs - 1, context, 1);
    if (h == NULL)
        return NULL;
    h->when = when;
    h->when_obj = Py_XNewRef(when_obj);
    if (L->debug && debug_schedule(L, method, args[0], &h->base) < 0) {
        Py_DECREF(h);
        return NULL;
    }
    if (slot_alloc(L, h) < 0) {
        Py_DECREF(h);
        return NULL;
    }
    L->unchecked = &h->base;
    return (PyObject *)h;
}

static PyObject *loop_call_later(zl_loop *L, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *context;
    nargs = PyVectorcall_NARGS(nargs);
    if (parse_context(kwnames, args + nargs, "call_later", &context) < 0)
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
                               nargs - 1, context, "call_later");
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
    PyObject *h = schedule_timer(L, when, when_obj, args + 1, nargs - 1, context, "call_later");
    Py_XDECREF(when_obj);
    return h;
}

static PyObject *loop_call_at(zl_loop *L, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *context;
    nargs = PyVectorcall_NARGS(nargs);
    if (parse_context(kwnames, args + nargs, "call_at", &context) < 0)
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

static PyObject *loop_time(zl_loop *L, PyObject *unused)
{
    return PyFloat_FromDouble(zl_monotonic());
}

/* get_debug(): every asyncio Future and Task asks it when created, so it
 * is native too (set_debug stays asyncio's, writing _debug below). */
static PyObject *loop_get_debug(zl_loop *L, PyObject *unused)
{
    return PyBool_FromLong(L->debug);
}

static PyObject *loop_stop(zl_loop *L, PyObject *unused)
{
    L->sh.stopping = 1;
    Py_RETURN_NONE;
}

/* ---- futures and tasks ---- */

/* create_future(): asyncio's futures.Future(loop=self), without a Python frame. */
static PyObject *loop_create_future(zl_loop *L, PyObject *unused)
{
    PyObject *future_type = PyObject_GetAttr(zl_futures_module, str_Future);
    if (future_type == NULL)
        return NULL;
    PyObject *args[1] = {(PyObject *)L};
    PyObject *fut = PyObject_Vectorcall(future_type, args, 0, kw_loop);
    Py_DECREF(future_type);
    return fut;
}

/* create_task(coro, *, name=None, context=None): asyncio's
 * tasks.Task(coro, loop=self, name=name, context=context). With a task
 * factory or in debug mode, asyncio's own Python method runs instead. */
static PyObject *loop_create_task(zl_loop *L, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    nargs = PyVectorcall_NARGS(nargs);
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (L->task_factory != NULL || L->debug || nargs != 1 || nkw > 2) {
        /* the general path: prepend self and call BaseEventLoop.create_task */
        PyObject *stack[8];
        if (nargs + nkw + 1 > 8)
            return PyErr_Format(PyExc_TypeError, "create_task() takes 1 positional argument");
        stack[0] = (PyObject *)L;
        for (Py_ssize_t i = 0; i < nargs + nkw; i++)
            stack[i + 1] = args[i];
        return PyObject_Vectorcall(zl_base_create_task, stack, nargs + 1, kwnames);
    }
    /* arguments for Task(coro, loop=self, name=..., context=...) */
    PyObject *stack[4] = {args[0], (PyObject *)L, NULL, NULL};
    PyObject *name = NULL, *context = NULL;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        if (PyUnicode_CompareWithASCIIString(key, "name") == 0)
            name = args[1 + i];
        else if (PyUnicode_CompareWithASCIIString(key, "context") == 0)
            context = args[1 + i];
        else
            return PyErr_Format(PyExc_TypeError, "create_task() got an unexpected keyword argument '%S'", key);
    }
    if (check_closed(L) < 0)
        return NULL;
    PyObject *names = kw_loop;
    Py_ssize_t n = 2;
    if (name != NULL && context != NULL) {
        names = kw_loop_name_context;
        stack[n++] = name;
        stack[n++] = context;
    } else if (name != NULL) {
        names = kw_loop_name;
        stack[n++] = name;
    } else if (context != NULL) {
        names = kw_loop_context;
        stack[n++] = context;
    }
    PyObject *task_type = PyObject_GetAttr(zl_tasks_module, str_Task);
    if (task_type == NULL)
        return NULL;
    PyObject *task = PyObject_Vectorcall(task_type, stack, 1, names);
    Py_DECREF(task_type);
    return task;
}

static PyObject *get_task_factory(zl_loop *L, void *c)
{
    return Py_NewRef(L->task_factory ? L->task_factory : Py_None);
}

static int set_task_factory(zl_loop *L, PyObject *v, void *c)
{
    Py_XSETREF(L->task_factory, (v == NULL || v == Py_None) ? NULL : Py_NewRef(v));
    return 0;
}

/* ---- descriptors ---- */

/* A descriptor argument as a C int (OverflowError beyond int's range). */
static int as_fd(PyObject *obj)
{
    long v = PyLong_AsLong(obj);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < INT_MIN || v > INT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "file descriptor out of range");
        return -1;
    }
    return (int)v;
}

static int check_fd(int fd)
{
    if (fd < 0) {
        PyErr_Format(PyExc_ValueError, "Invalid file descriptor: %d", fd);
        return -1;
    }
    return 0;
}

static zl_fdwatch *fd_slot(zl_loop *L, int fd)
{
    if (fd >= L->fds_cap) {
        int cap = L->fds_cap ? L->fds_cap : 64;
        while (cap <= fd)
            cap *= 2;
        zl_fdwatch *fds = PyMem_Realloc(L->fds, cap * sizeof(zl_fdwatch));
        if (fds == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        memset(fds + L->fds_cap, 0, (cap - L->fds_cap) * sizeof(zl_fdwatch));
        L->fds = fds;
        L->fds_cap = cap;
    }
    return &L->fds[fd];
}

static uint32_t watch_mask(zl_fdwatch *w)
{
    return (w->reader ? 1u : 0u) | (w->writer ? 2u : 0u);
}

/* Forgets what fd is watched for, without cancelling its handles. */
static void fd_forget(zl_fdwatch *w)
{
    Py_CLEAR(w->reader);
    Py_CLEAR(w->writer);
    Py_CLEAR(w->fileobj);
}

/* Tells the reactor that fd's interest goes from its current mask to
 * `new`, as asyncio's selector does: no system call when the mask stays
 * the same; a descriptor the kernel refuses to change is forgotten
 * altogether (asyncio's selector unregisters it) and OSError is raised;
 * a removal never fails (asyncio ignores the kernel's refusal). */
static int change_watch(zl_loop *L, int fd, zl_fdwatch *w, uint32_t new)
{
    uint32_t old = watch_mask(w);
    if (old == new)
        return 0;
    if (new & ~old)
        L->watch_changed = 1; /* a descriptor watched anew may be ready already */
    if (zl_check_not_forked() < 0)
        return -1;
    int err = zlgo_watch(L->engine, fd, old, new);
    if (err == 0 || new == 0)
        return 0;
    if (old != 0) {
        (void)zlgo_watch(L->engine, fd, old, 0);
        fd_forget(w);
    }
    errno = err;
    PyErr_SetFromErrno(PyExc_OSError);
    return -1;
}

/* _zl_add_reader(fd, fileobj, callback, *args) (which=0) and
 * _zl_add_writer (which=1): registers callback(*args) for fd becoming
 * readable or writable. fileobj is what the caller named the descriptor
 * by, kept (as asyncio's selector keeps it) from the first registration
 * until the last removal, so that a closed socket still finds its fd.
 * If the reactor refuses the descriptor, OSError is raised and nothing is
 * added. */
static PyObject *add_watch(zl_loop *L, PyObject *const *args, Py_ssize_t nargs, int which)
{
    nargs = PyVectorcall_NARGS(nargs);
    if (nargs < 3) {
        PyErr_SetString(PyExc_TypeError, "expected a descriptor, its file object and a callback");
        return NULL;
    }
    int fd = as_fd(args[0]);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    if (check_closed(L) < 0 || check_fd(fd) < 0)
        return NULL;
    zl_handle *h = zl_handle_new(L, &zl_HandleType, args[2], args + 3, nargs - 3, NULL, 0);
    if (h == NULL)
        return NULL;
    zl_fdwatch *w = fd_slot(L, fd);
    if (w == NULL) {
        Py_DECREF(h);
        return NULL;
    }
    if (change_watch(L, fd, w, watch_mask(w) | (1u << which)) < 0) {
        Py_DECREF(h);
        return NULL;
    }
    if (w->fileobj == NULL)
        w->fileobj = Py_NewRef(args[1]);
    zl_handle **place = which ? &w->writer : &w->reader;
    zl_handle *previous = *place;
    *place = (zl_handle *)Py_NewRef(h);
    if (previous != NULL) {
        zl_handle_cancel(previous);
        Py_DECREF(previous);
    }
    return (PyObject *)h;
}

static PyObject *remove_watch(zl_loop *L, PyObject *arg, int which)
{
    int overflow;
    long v = PyLong_AsLongAndOverflow(arg, &overflow);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    if (overflow > 0 || v > INT_MAX)
        Py_RETURN_FALSE; /* beyond any descriptor: never watched, as asyncio answers */
    int fd = as_fd(arg);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    if (L->closed || L->engine == 0)
        Py_RETURN_FALSE;
    if (check_fd(fd) < 0)
        return NULL;
    if (fd >= L->fds_cap)
        Py_RETURN_FALSE;
    zl_fdwatch *w = &L->fds[fd];
    zl_handle **place = which ? &w->writer : &w->reader;
    if (*place == NULL)
        Py_RETURN_FALSE;
    if (change_watch(L, fd, w, watch_mask(w) & ~(1u << which)) < 0)
        return NULL;
    zl_handle *h = *place;
    *place = NULL;
    if (w->reader == NULL && w->writer == NULL)
        Py_CLEAR(w->fileobj);
    zl_handle_cancel(h);
    Py_DECREF(h);
    Py_RETURN_TRUE;
}

static PyObject *loop_add_reader(zl_loop *L, PyObject *const *a, Py_ssize_t n) { return add_watch(L, a, n, 0); }
static PyObject *loop_add_writer(zl_loop *L, PyObject *const *a, Py_ssize_t n) { return add_watch(L, a, n, 1); }
static PyObject *loop_remove_reader(zl_loop *L, PyObject *fd) { return remove_watch(L, fd, 0); }
static PyObject *loop_remove_writer(zl_loop *L, PyObject *fd) { return remove_watch(L, fd, 1); }

/* (fileobj, reader, writer) of fd, or None when it is not watched: what
 * zloopgo's selector facade reports to asyncio's transports. */
static PyObject *loop_watch_state(zl_loop *L, PyObject *arg)
{
    int fd = as_fd(arg);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    if (fd < 0 || fd >= L->fds_cap || (L->fds[fd].reader == NULL && L->fds[fd].writer == NULL))
        Py_RETURN_NONE;
    zl_fdwatch *w = &L->fds[fd];
    return Py_BuildValue("(OOO)", w->fileobj ? w->fileobj : Py_None,
                         w->reader ? (PyObject *)w->reader : Py_None,
                         w->writer ? (PyObject *)w->writer : Py_None);
}

/* The descriptor a watched file object was registered with (found by
 * identity, as asyncio's selector searches for a closed file object), or
 * None. */
static PyObject *loop_find_fileobj(zl_loop *L, PyObject *fileobj)
{
    for (int fd = 0; fd < L->fds_cap; fd++)
        if (L->fds[fd].fileobj == fileobj)
            return PyLong_FromLong(fd);
    Py_RETURN_NONE;
}

static void fds_release_all(zl_loop *L)
{
    for (int fd = 0; fd < L->fds_cap; fd++)
        fd_forget(&L->fds[fd]);
}

/* A ready descriptor queues its handles, as asyncio's _process_events:
 * a handle cancelled by its owner is unregistered instead. */
static void process_event(zl_loop *L, uint64_t fd, uint32_t mask)
{
    if (fd >= (uint64_t)L->fds_cap)
        return; /* removed since the wait began */
    zl_fdwatch *w = &L->fds[fd];
    for (int which = 0; which < 2; which++) {
        zl_handle *h = which ? w->writer : w->reader;
        if (!(mask & (1u << which)) || h == NULL)
            continue;
        if (h->cancelled) {
            PyObject *fdobj = PyLong_FromUnsignedLongLong(fd);
            PyObject *r = fdobj ? remove_watch(L, fdobj, which) : NULL;
            Py_XDECREF(fdobj);
            Py_XDECREF(r);
            if (r == NULL)
                PyErr_WriteUnraisable((PyObject *)L);
        } else if (ring_push(L, (zl_handle *)Py_NewRef(h)) < 0) {
            PyErr_WriteUnraisable((PyObject *)L);
        }
    }
}

/* ---- the engine's callbacks (bridge.h) ---- */

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
    int64_t cap = L->sh.timers_out_cap ? L->sh.timers_out_cap : 256;
    while (cap < need)
        cap *= 2;
    uint64_t *out = PyMem_RawRealloc(L->sh.timers_out, cap * sizeof(uint64_t));
    if (out == NULL)
        return -1;
    L->sh.timers_out = out;
    L->sh.timers_out_cap = cap;
    return 0;
}

int zl_grow_done(uintptr_t loop, int64_t need)
{
    zl_loop *L = (zl_loop *)loop;
    int64_t cap = L->sh.done_cap ? L->sh.done_cap : 64;
    while (cap < need)
        cap *= 2;
    zl_completion *done = PyMem_RawRealloc(L->sh.done, cap * sizeof(zl_completion));
    if (done == NULL)
        return -1;
    L->sh.done = done;
    L->sh.done_cap = cap;
    return 0;
}

int zl_dispatch(uintptr_t loop, int64_t nevents, int64_t ntimers, int64_t ndone, int reacquire)
{
    zl_loop *L = (zl_loop *)loop;
    if (reacquire)
        zl_reacquire(loop);
    check_new_handle(L);
    zl_event *events = L->sh.events;
    uint64_t *timers = L->sh.timers_out;
    for (int64_t i = 0; i < nevents; i++)
        process_event(L, events[i].token, events[i].mask);
    for (int64_t i = 0; i < ntimers; i++) {
        uint32_t slot = (uint32_t)timers[i];
        zl_timer *h = L->sh.slots[slot].handle;
        if (h == NULL) {
            L->sh.cancelled_timers--;
        } else {
            h->scheduled = 0;
            if (ring_push(L, &h->base) < 0) /* the slot's reference moves to the queue */
                PyErr_WriteUnraisable((PyObject *)L);
        }
        slot_free(L, slot);
    }
    if (ndone > 0) /* lookups resolved by other goroutines */
        zl_settle_lookups(L, ndone);
    /* Due timers are queued before a signal may end the run, so none is lost. */
    if (PyErr_CheckSignals() < 0)
        return -1;
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
        zl_handle *h = ring_pop(L);
        quiet = quiet && !h->cancelled && zl_is_native_read(h->callback);
        zl_quiet_read = 0;
        if (!h->cancelled) {
            if (L->debug) {
                PyObject *r = PyObject_CallMethodObjArgs((PyObject *)L, str_run_debug, (PyObject *)h, NULL);
                rc = r ? 0 : -1;
                Py_XDECREF(r);
            } else {
                rc = zl_handle_run(h);
            }
        }
        quiet = quiet && zl_quiet_read;
        zl_handle_release(h);
    }
    L->sh.quiet = quiet && !L->watch_changed;
    L->watch_changed = 0;
    if (rc == 0 && zl_clock_sync(L) < 0) /* for the next iteration */
        rc = -1;
    return rc;
}

/* ---- running and closing ---- */

static PyObject *loop_run_engine(zl_loop *L, PyObject *unused)
{
    if (zl_check_not_forked() < 0 || check_closed(L) < 0)
        return NULL;
    if (L->engine == 0) {
        PyErr_SetString(PyExc_RuntimeError, "Event loop is closed");
        return NULL;
    }
    if (zl_clock_sync(L) < 0)
        return NULL;
    L->running = 1;
    int rc = zlgo_engine_run(L->engine);
    L->running = 0;
    if (rc == -1)
        return NULL;
    if (rc > 0) {
        errno = rc;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

static void engine_close(zl_loop *L)
{
    if (L->engine == 0)
        return;
    L->unchecked = NULL;
    zl_drop_lookups(L);
    ring_clear(L);
    slots_release_all(L);
    fds_release_all(L);
    zl_drop_flush_list(L);
    zl_context_cache_clear(L);
    /* A forked child must not call into the parent's Go runtime: it leaks
     * the engine's two descriptors instead. */
    if (!zl_forked_child)
        zlgo_engine_close(L->engine);
    L->engine = 0;
    L->wakefd = -1;
}

static PyObject *loop_close_engine(zl_loop *L, PyObject *unused)
{
    if (L->running) {
        PyErr_SetString(PyExc_RuntimeError, "Cannot close a running event loop");
        return NULL;
    }
    engine_close(L);
    Py_RETURN_NONE;
}

static PyObject *loop_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (zl_check_not_forked() < 0)
        return NULL;
    zl_loop *L = (zl_loop *)type->tp_alloc(type, 0);
    if (L == NULL)
        return NULL;
    L->wakefd = -1;
    L->slots_free = UINT32_MAX;
    L->ring_cap = 256;
    L->ring = PyMem_Malloc(L->ring_cap * sizeof(zl_handle *));
    L->sh.events_cap = 256;
    L->sh.events = PyMem_RawCalloc(L->sh.events_cap, sizeof(zl_event));
    if (L->ring == NULL || L->sh.events == NULL || zl_grow_timers_out((uintptr_t)L, 256) < 0) {
        Py_DECREF(L);
        return PyErr_NoMemory();
    }
    struct timespec res;
    double resolution = clock_getres(CLOCK_MONOTONIC, &res) == 0 ? res.tv_sec + res.tv_nsec * 1e-9 : 1e-9;
    int wakefd = -1, err = 0;
    L->engine = zlgo_engine_new((uintptr_t)L, &L->sh, resolution, &wakefd, &err);
    if (L->engine == 0) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        Py_DECREF(L);
        return NULL;
    }
    L->wakefd = wakefd;
    if (zl_clock_check(L) < 0) { /* a subclass may override time() */
        Py_DECREF(L);
        return NULL;
    }
    L->next_live = live_loops;
    if (live_loops != NULL)
        live_loops->prev_live = L;
    live_loops = L;
    return (PyObject *)L;
}

/* A handle in the ready queue or a timer slot (see "pending handles and
 * the collector" above). */
static int visit_pending(zl_handle *h, visitproc visit, void *arg)
{
    if (h == NULL)
        return 0;
    if (PyObject_GC_IsTracked((PyObject *)h))
        return visit((PyObject *)h, arg);
    if (handle_alone(h))
        return zl_handle_traverse(h, visit, arg);
    return 0; /* not possible after before_collection; if it were, a leak, never a wrong free */
}

static int loop_traverse(zl_loop *L, visitproc visit, void *arg)
{
    int r;
    if ((r = zl_flush_traverse(L, visit, arg)) != 0)
        return r;
    Py_VISIT(L->task_factory);
    Py_VISIT(L->ctx_cache);
    Py_VISIT(L->clock);
    Py_VISIT(L->lookups);
    for (int64_t i = 0; i < L->sh.ready_len; i++)
        if ((r = visit_pending(L->ring[(L->ring_head + i) & (L->ring_cap - 1)], visit, arg)) != 0)
            return r;
    for (uint32_t i = 0; i < L->slots_cap; i++)
        if ((r = visit_pending(L->sh.slots[i].handle, visit, arg)) != 0)
            return r;
    for (int fd = 0; fd < L->fds_cap; fd++) {
        Py_VISIT(L->fds[fd].reader);
        Py_VISIT(L->fds[fd].writer);
        Py_VISIT(L->fds[fd].fileobj);
    }
    return 0;
}

/* Breaking a reference cycle: handles are released, but timer slots stay
 * allocated (marked cancelled) while the engine may still hold them. */
static int loop_clear(zl_loop *L)
{
    L->unchecked = NULL;
    zl_drop_flush_list(L);
    Py_CLEAR(L->task_factory);
    zl_context_cache_clear(L);
    Py_CLEAR(L->clock);
    Py_CLEAR(L->lookups);
    ring_clear(L);
    for (uint32_t i = 0; i < L->slots_cap; i++) {
        zl_timer *h = L->sh.slots[i].handle;
        if (h != NULL)
            zl_timer_cancelled(L, h);
    }
    fds_release_all(L);
    return 0;
}

static void loop_dealloc(zl_loop *L)
{
    PyObject_GC_UnTrack(L);
    if (L->prev_live != NULL)
        L->prev_live->next_live = L->next_live;
    else if (live_loops == L)
        live_loops = L->next_live;
    if (L->next_live != NULL)
        L->next_live->prev_live = L->prev_live;
    loop_clear(L);
    engine_close(L);
    PyMem_Free(L->ring);
    PyMem_Free(L->sh.slots);
    PyMem_Free(L->sh.new_timers);
    PyMem_Free(L->fds);
    zl_flush_free(L);
    PyMem_RawFree(L->sh.events);
    PyMem_RawFree(L->sh.timers_out);
    PyMem_RawFree(L->sh.done);
    Py_TYPE(L)->tp_free((PyObject *)L);
}

/* _closed, _stopping and _debug are the attributes asyncio.BaseEventLoop
 * reads and writes; here they are stored where C and the engine see them. */
static PyObject *get_flag(char *flag) { return PyBool_FromLong(*flag); }

static int set_flag(char *flag, PyObject *v)
{
    if (v == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete this attribute");
        return -1;
    }
    int b = PyObject_IsTrue(v);
    if (b < 0)
        return -1;
    *flag = (char)b;
    return 0;
}

static PyObject *get_closed(zl_loop *L, void *c) { return get_flag(&L->closed); }
static int set_closed(zl_loop *L, PyObject *v, void *c) { return set_flag(&L->closed, v); }
static PyObject *get_debug(zl_loop *L, void *c) { return get_flag(&L->debug); }
static int set_debug(zl_loop *L, PyObject *v, void *c) { return set_flag(&L->debug, v); }
static PyObject *get_stopping(zl_loop *L, void *c) { return PyBool_FromLong(L->sh.stopping); }

static int set_stopping(zl_loop *L, PyObject *v, void *c)
{
    char b;
    if (set_flag(&b, v) < 0)
        return -1;
    L->sh.stopping = b;
    return 0;
}

static PyMethodDef loop_methods[] = {
    {"call_soon", (PyCFunction)(void (*)(void))loop_call_soon, METH_FASTCALL | METH_KEYWORDS, NULL},
    {"call_soon_threadsafe", (PyCFunction)(void (*)(void))loop_call_soon_threadsafe, METH_FASTCALL | METH_KEYWORDS, NULL},
    {"call_later", (PyCFunction)(void (*)(void))loop_call_later, METH_FASTCALL | METH_KEYWORDS, NULL},
    {"call_at", (PyCFunction)(void (*)(void))loop_call_at, METH_FASTCALL | METH_KEYWORDS, NULL},
    {"time", (PyCFunction)loop_time, METH_NOARGS, NULL},
    {"create_future", (PyCFunction)loop_create_future, METH_NOARGS, NULL},
    {"create_task", (PyCFunction)(void (*)(void))loop_create_task, METH_FASTCALL | METH_KEYWORDS, NULL},
    {"stop", (PyCFunction)loop_stop, METH_NOARGS, NULL},
    {"get_debug", (PyCFunction)loop_get_debug, METH_NOARGS, NULL},
    {"_zl_add_reader", (PyCFunction)(void (*)(void))loop_add_reader, METH_FASTCALL, NULL},
    {"_zl_add_writer", (PyCFunction)(void (*)(void))loop_add_writer, METH_FASTCALL, NULL},
    {"_zl_remove_reader", (PyCFunction)loop_remove_reader, METH_O, NULL},
    {"_zl_remove_writer", (PyCFunction)loop_remove_writer, METH_O, NULL},
    {"_zl_watch_state", (PyCFunction)loop_watch_state, METH_O, NULL},
    {"_zl_find_fileobj", (PyCFunction)loop_find_fileobj, METH_O, NULL},
    {"_zl_run", (PyCFunction)loop_run_engine, METH_NOARGS, NULL},
    {"_zl_flush_writes", (PyCFunction)zl_loop_flush_writes, METH_NOARGS, NULL},
    {"_zl_getaddrinfo", (PyCFunction)zl_loop_getaddrinfo, METH_VARARGS, NULL},
    {"_zl_getnameinfo", (PyCFunction)zl_loop_getnameinfo, METH_VARARGS, NULL},
    {"_zl_lookups_in_flight", (PyCFunction)zl_loop_lookups_in_flight, METH_NOARGS, NULL},
    {"_zl_close", (PyCFunction)loop_close_engine, METH_NOARGS, NULL},
    {NULL}};

static PyGetSetDef loop_getset[] = {
    {"_closed", (getter)get_closed, (setter)set_closed, NULL, NULL},
    {"_debug", (getter)get_debug, (setter)set_debug, NULL, NULL},
    {"_stopping", (getter)get_stopping, (setter)set_stopping, NULL, NULL},
    {"_task_factory", (getter)get_task_factory, (setter)set_task_factory, NULL, NULL},
    {NULL}};

PyTypeObject zl_LoopType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "zloopgo._engine.LoopCore",
    .tp_doc = "The native core of zloopgo.Loop.",
    .tp_basicsize = sizeof(zl_loop),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
    .tp_new = loop_new,
    .tp_dealloc = (destructor)loop_dealloc,
    .tp_traverse = (traverseproc)loop_traverse,
    .tp_clear = (inquiry)loop_clear,
    .tp_methods = loop_methods,
    .tp_getset = loop_getset,
    .tp_setattro = zl_loop_setattro,
};

int zl_loop_type_ready(void)
{
    if (install_collector_hook() < 0)
        return -1;
    str_debug_schedule = PyUnicode_InternFromString("_zl_debug_schedule");
    str_context = PyUnicode_InternFromString("context");
    if (str_context == NULL)
        return -1;
    str_run_debug = PyUnicode_InternFromString("_zl_run_debug");
    str_Future = PyUnicode_InternFromString("Future");
    str_Task = PyUnicode_InternFromString("Task");
    kw_loop = Py_BuildValue("(s)", "loop");
    kw_loop_name = Py_BuildValue("(ss)", "loop", "name");
    kw_loop_context = Py_BuildValue("(ss)", "loop", "context");
    kw_loop_name_context = Py_BuildValue("(sss)", "loop", "name", "context");
    if (str_debug_schedule == NULL || str_run_debug == NULL || str_Future == NULL || str_Task == NULL ||
        kw_loop == NULL || kw_loop_name == NULL || kw_loop_context == NULL || kw_loop_name_context == NULL)
        return -1;
    return PyType_Ready(&zl_LoopType);
}
