/* HandleLock: the recursive lock in the `_lock` slot of the
 * _ThreadSafeHandle that 3.14+'s call_soon_threadsafe returns, in place of
 * the threading.RLock() asyncio's __init__ puts there.
 *
 * asyncio takes that lock with `with self._lock:` in the handle's
 * cancel(), cancelled() and _run, so that cancelling from another thread
 * waits for a running callback to return; the adapter takes it around the
 * callback's run (schedule.c). Making an RLock, taking it through its
 * methods and freeing it cost about 700 of the 3,780 instructions of a
 * call_soon_threadsafe (callgrind, 3.14.8); with this lock, a small
 * object with no lock of the system behind it, the call costs 3,244.
 *
 * Its state, an owner and a count, is read and written, in a GIL build,
 * only by threads that hold the GIL, which orders every access. In a
 * free-threaded build the owner is taken by compare-and-swap from 0 to
 * the thread's ident (acquire order) and stored with release order; the
 * count is written by the owner alone; any other thread reads both with
 * atomic loads (OWNER, COUNT, TAKE_IF_FREE and the setters below, plain
 * accesses in a GIL build). A thread that finds it held by another waits with
 * the GIL released, looking again after sleeps that double from 20 us to
 * 1 ms, and runs signal handlers between looks, as RLock's acquire does
 * (a handler that raises ends the wait with its exception). That wait
 * happens only when a cancel() races a running callback.
 *
 * It has every method of 3.14's RLock (threading.Condition takes
 * _release_save, _acquire_restore and _is_owned from it).
 *
 * It knows nothing of the handle, the loop or asyncio. */
#include "zl.h"
#include <math.h>
#include <pythread.h>

typedef struct {
    PyObject_HEAD
    unsigned long owner; /* the ident of the thread holding it, 0 when free */
    unsigned long count; /* how many times that thread took it */
} zl_handle_lock;

/* The owner and the count as any thread may read them, their stores,
 * and the lock taken by `me` if it is free (1, its count 1; else 0). */
#ifdef Py_GIL_DISABLED
#define OWNER(self) __atomic_load_n(&(self)->owner, __ATOMIC_ACQUIRE)
#define COUNT(self) __atomic_load_n(&(self)->count, __ATOMIC_RELAXED)
#define SET_OWNER(self, v) __atomic_store_n(&(self)->owner, (v), __ATOMIC_RELEASE)
#define SET_COUNT(self, v) __atomic_store_n(&(self)->count, (v), __ATOMIC_RELAXED)
static inline int take_if_free(zl_handle_lock *self, unsigned long me)
{
    unsigned long free_owner = 0;
    if (!__atomic_compare_exchange_n(&self->owner, &free_owner, me, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
        return 0;
    SET_COUNT(self, 1);
    return 1;
}
#define TAKE_IF_FREE(self, me) take_if_free(self, me)
/* the whole state at once, by the thread that holds the lock: the count
 * first, so that a thread taking it once the owner is stored (0: free)
 * finds its own count left alone */
#define SET_STATE(self, o, c) (SET_COUNT(self, c), SET_OWNER(self, o))
#else
#define OWNER(self) ((self)->owner)
#define COUNT(self) ((self)->count)
#define SET_OWNER(self, v) ((self)->owner = (v))
#define SET_COUNT(self, v) ((self)->count = (v))
#define TAKE_IF_FREE(self, me) ((self)->owner == 0 && ((self)->owner = (me), (self)->count = 1, 1))
#define SET_STATE(self, o, c) ((self)->owner = (o), (self)->count = (c))
#endif

PyObject *zl_handle_lock_new(zl_module_state *state)
{
    zl_handle_lock *self = PyObject_New(zl_handle_lock, state->lock_type);
    if (self == NULL)
        return NULL;
    self->owner = 0;
    self->count = 0;
    return (PyObject *)self;
}

static void lock_dealloc(PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    PyObject_Free(obj);
    Py_DECREF(type);
}

int zl_is_handle_lock(PyObject *obj) { return Py_TYPE(obj)->tp_dealloc == lock_dealloc; }

/* Waits with the GIL released until the lock is free, at most timeout
 * seconds (< 0: no bound): 1 taken, 0 timed out, -1 a signal handler
 * raised. */
static int wait_and_take(zl_handle_lock *self, unsigned long me, double timeout)
{
    int64_t start = zl_sys_monotonic_ns();
    long nap_us = 20;
    for (;;) {
        if (TAKE_IF_FREE(self, me))
            return 1;
        double waited = 0;
        if (timeout >= 0) {
            waited = (double)(zl_sys_monotonic_ns() - start) / 1e9;
            if (waited >= timeout)
                return 0;
        }
        long nap = nap_us;
        if (timeout >= 0 && (timeout - waited) * 1e6 < nap)
            nap = (long)((timeout - waited) * 1e6) + 1;
        PyThreadState *saved = PyEval_SaveThread();
        zl_sys_sleep_us(nap);
        PyEval_RestoreThread(saved);
        if (PyErr_CheckSignals() < 0)
            return -1;
        if (nap_us < 1000)
            nap_us *= 2;
    }
}

/* Takes the lock for the calling thread: 1 taken, 0 not (not blocking,
 * or timed out), -1 with an exception set. */
static int take(zl_handle_lock *self, int blocking, double timeout)
{
    unsigned long me = PyThread_get_thread_ident();
    if (OWNER(self) == me) {
        if (self->count == ULONG_MAX) {
            PyErr_SetString(PyExc_OverflowError, "Internal lock count overflowed");
            return -1;
        }
        SET_COUNT(self, self->count + 1);
        return 1;
    }
    if (TAKE_IF_FREE(self, me))
        return 1;
    if (!blocking)
        return 0;
    return wait_and_take(self, me, timeout);
}

int zl_handle_lock_acquire(PyObject *lock)
{
    return take((zl_handle_lock *)lock, 1, -1) < 0 ? -1 : 0;
}

int zl_handle_lock_release(PyObject *lock)
{
    zl_handle_lock *self = (zl_handle_lock *)lock;
    if (COUNT(self) == 0 || OWNER(self) != PyThread_get_thread_ident()) {
        PyErr_SetString(PyExc_RuntimeError, "cannot release un-acquired lock");
        return -1;
    }
    SET_COUNT(self, self->count - 1);
    if (self->count == 0)
        SET_OWNER(self, 0);
    return 0;
}

/* A timeout in nanoseconds as RLock's acquire converts one (rounded
 * away from zero): 0, or -1 with its exception set. 3.15 takes any real
 * number as a double; 3.14 a float or an integer. */
static int timeout_ns(PyObject *obj, int64_t *ns)
{
    double d;
    if (PyFloat_Check(obj)) {
        d = PyFloat_AS_DOUBLE(obj);
#if PY_VERSION_HEX >= 0x030F0000
    } else if ((d = PyFloat_AsDouble(obj)) == -1.0 && PyErr_Occurred()) {
        return -1;
#else
    } else if (PyIndex_Check(obj)) {
        long long seconds = PyLong_AsLongLong(obj);
        if (seconds == -1 && PyErr_Occurred()) {
            if (PyErr_ExceptionMatches(PyExc_OverflowError))
                goto overflow;
            return -1;
        }
        d = (double)seconds;
    } else {
        PyErr_Format(PyExc_TypeError,
                     "'%.200s' object cannot be interpreted as an integer or float",
                     Py_TYPE(obj)->tp_name);
        return -1;
#endif
    }
    if (isnan(d)) {
        PyErr_SetString(PyExc_ValueError, "Invalid value NaN (not a number)");
        return -1;
    }
    d *= 1e9;
    d = d >= 0 ? ceil(d) : floor(d);
    if (!(d >= (double)INT64_MIN && d < -(double)INT64_MIN))
        goto overflow;
    *ns = (int64_t)d;
    return 0;
overflow:
    PyErr_SetString(PyExc_OverflowError, "timestamp out of range for C PyTime_t");
    return -1;
}

/* acquire(blocking=True, timeout=-1), with RLock's checks of the two */
static PyObject *lock_acquire(PyObject *obj, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    static const char *const names[] = {"blocking", "timeout", NULL};
    PyObject *given[2] = {NULL, NULL};
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs > 2) {
        PyErr_Format(PyExc_TypeError, "acquire() takes at most 2 arguments (%zd given)",
                     nargs + nkw);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        given[i] = args[i];
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        int at = -1;
        for (int j = 0; j < 2; j++)
            if (PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, names[j]) == 0)
                at = j;
        if (at < 0) {
            PyErr_Format(PyExc_TypeError, "acquire() got an unexpected keyword argument '%U'", key);
            return NULL;
        }
        if (given[at] != NULL) {
            PyErr_Format(PyExc_TypeError,
                         "argument for acquire() given by name ('%s') and position (%d)", names[at],
                         at + 1);
            return NULL;
        }
        given[at] = args[nargs + i];
    }
    int blocking = 1;
    if (given[0] != NULL && (blocking = PyObject_IsTrue(given[0])) < 0)
        return NULL;
    const int64_t unset = -1000000000; /* timeout=-1 */
    int64_t ns = unset;
    if (given[1] != NULL && timeout_ns(given[1], &ns) < 0)
        return NULL;
    if (!blocking && ns != unset) {
        PyErr_SetString(PyExc_ValueError, "can't specify a timeout for a non-blocking call");
        return NULL;
    }
    if (ns < 0 && ns != unset) {
        PyErr_SetString(PyExc_ValueError, "timeout value must be a non-negative number");
        return NULL;
    }
    if (ns != unset && (ns + 999) / 1000 > (int64_t)PY_TIMEOUT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "timeout value is too large");
        return NULL;
    }
    int r = take((zl_handle_lock *)obj, blocking, ns == unset ? -1 : (double)ns / 1e9);
    return r < 0 ? NULL : PyBool_FromLong(r);
}

static PyObject *lock_enter(PyObject *obj, PyObject *unused)
{
    return zl_handle_lock_acquire(obj) < 0 ? NULL : Py_NewRef(Py_True);
}

static PyObject *lock_release(PyObject *obj, PyObject *unused)
{
    return zl_handle_lock_release(obj) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *lock_exit(PyObject *obj, PyObject *const *args, Py_ssize_t nargs)
{
    return lock_release(obj, NULL);
}

static PyObject *lock_locked(PyObject *obj, PyObject *unused)
{
    return PyBool_FromLong(COUNT((zl_handle_lock *)obj) > 0);
}

static PyObject *lock_is_owned(PyObject *obj, PyObject *unused)
{
    zl_handle_lock *self = (zl_handle_lock *)obj;
    return PyBool_FromLong(COUNT(self) > 0 && OWNER(self) == PyThread_get_thread_ident());
}

/* What threading.Condition takes from the lock it is given, as RLock's:
 * _release_save() gives the lock up whatever its depth and returns
 * (count, owner), which _acquire_restore() takes back, waiting as
 * acquire() does; without them Condition.wait() releases one level only
 * and the notifier never gets the lock. */
static PyObject *lock_release_save(PyObject *obj, PyObject *unused)
{
    zl_handle_lock *self = (zl_handle_lock *)obj;
    if (COUNT(self) == 0 || OWNER(self) != PyThread_get_thread_ident()) {
        PyErr_SetString(PyExc_RuntimeError, "cannot release un-acquired lock");
        return NULL;
    }
    PyObject *state = Py_BuildValue("(kk)", self->count, self->owner);
    if (state == NULL)
        return NULL;
    SET_STATE(self, 0, 0);
    return state;
}

static PyObject *lock_acquire_restore(PyObject *obj, PyObject *args)
{
    zl_handle_lock *self = (zl_handle_lock *)obj;
    Py_ssize_t count;
    unsigned long long owner;
#if PY_VERSION_HEX >= 0x030F0000
    /* 3.15's RLock takes one argument (METH_O) and names no argument
     * number for the state's shape */
    if (PyTuple_GET_SIZE(args) != 1)
        return PyErr_Format(PyExc_TypeError,
                            "RLock._acquire_restore() takes exactly one argument (%zd given)",
                            PyTuple_GET_SIZE(args));
    PyObject *state = PyTuple_GET_ITEM(args, 0);
    if (!PyTuple_Check(state))
        return PyErr_Format(PyExc_TypeError,
                            "_acquire_restore() argument must be 2-item tuple, not %.50s",
                            state == Py_None ? "None" : Py_TYPE(state)->tp_name);
    if (PyTuple_GET_SIZE(state) != 2)
        return PyErr_Format(PyExc_TypeError,
                            "_acquire_restore() argument must be tuple of length 2, not %zd",
                            PyTuple_GET_SIZE(state));
#endif
    /* RLock's format, for its messages */
    if (!PyArg_ParseTuple(args, "(nK):_acquire_restore", &count, &owner))
        return NULL;
    if (take(self, 1, -1) < 0)
        return NULL;
    SET_STATE(self, (unsigned long)owner, (unsigned long)count);
    Py_RETURN_NONE;
}

static PyObject *lock_recursion_count(PyObject *obj, PyObject *unused)
{
    zl_handle_lock *self = (zl_handle_lock *)obj;
    return PyLong_FromUnsignedLong(OWNER(self) == PyThread_get_thread_ident() ? COUNT(self) : 0);
}

/* threading's after-fork hook: the lock is free in the child */
static PyObject *lock_at_fork_reinit(PyObject *obj, PyObject *unused)
{
    zl_handle_lock *self = (zl_handle_lock *)obj;
    SET_STATE(self, 0, 0);
    Py_RETURN_NONE;
}

static PyObject *lock_repr(PyObject *obj)
{
    zl_handle_lock *self = (zl_handle_lock *)obj;
    return PyUnicode_FromFormat("<%s %s object owner=%lu count=%lu at %p>",
                                COUNT(self) ? "locked" : "unlocked", Py_TYPE(obj)->tp_name,
                                OWNER(self), COUNT(self), obj);
}

static PyMethodDef lock_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))lock_acquire, METH_FASTCALL | METH_KEYWORDS,
     "Take the lock (recursively); blocking and timeout as RLock.acquire's."},
    {"release", lock_release, METH_NOARGS, "Give the lock back once."},
    {"__enter__", lock_enter, METH_NOARGS, "acquire()"},
    {"__exit__", (PyCFunction)(void (*)(void))lock_exit, METH_FASTCALL, "release()"},
    {"locked", lock_locked, METH_NOARGS, "Whether some thread holds the lock."},
    {"_is_owned", lock_is_owned, METH_NOARGS, "Whether the calling thread holds the lock."},
    {"_release_save", lock_release_save, METH_NOARGS,
     "Give the lock up at every depth; (count, owner) for _acquire_restore."},
    {"_acquire_restore", lock_acquire_restore, METH_VARARGS,
     "Take the lock back as _release_save left it."},
    {"_recursion_count", lock_recursion_count, METH_NOARGS,
     "How many times the calling thread holds the lock."},
    {"_at_fork_reinit", lock_at_fork_reinit, METH_NOARGS, "Make the lock free (after fork)."},
    {NULL}};

static PyType_Slot lock_slots[] = {
    {Py_tp_dealloc, lock_dealloc},
    {Py_tp_repr, lock_repr},
    {Py_tp_methods, lock_methods},
    {Py_tp_doc, "The recursive lock of a _ThreadSafeHandle that zloopgo made."},
    {0, NULL}};

static PyType_Spec lock_spec = {"zloopgo._engine.HandleLock", sizeof(zl_handle_lock), 0,
                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, lock_slots};

int zl_handle_lock_type_new(PyObject *module, zl_module_state *state)
{
    state->lock_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &lock_spec, NULL);
    return state->lock_type == NULL ? -1 : 0;
}
