/* LoopCore: the native half of zloopgo.Loop. This file holds the type, a
 * heap type each module object makes (zl_loop_type_new) so that a loop
 * reaches its module's state (L->state) through its class: making a loop
 * (with its engine), the collector's traverse and clear, deallocation,
 * the method table, the attributes asyncio reads (_closed, _debug,
 * _stopping), stop/get_debug/is_running (time is clock.c's), running the engine from
 * _zl_run() and closing it. What the loop holds lives in one file each:
 * the ready queue (ready.c), timer slots (timers.c), scheduling
 * (schedule.c), futures and tasks (tasks.c), the descriptor table
 * (fds.c), the engine's calls into C (dispatch.c).
 *
 * It allocates and frees the buffers the engine fills (sh.events, and
 * sh.timers_out and sh.done, which dispatch.c grows); of every other
 * structure it knows only its owner's init, release, traverse and free.
 * It knows the engine only through the zlgo_* functions. */
#include "zl.h"
#include <math.h>
#include "_cgo_export.h"

/* get_debug(): every asyncio Future and Task asks it when created, so it
 * is native too (set_debug stays asyncio's, writing _debug below). */
static PyObject *loop_get_debug(zl_loop *L, PyObject *unused)
{
    return L->debug_value ? Py_NewRef(L->debug_value) : PyBool_FromLong(L->debug);
}

/* is_running(): asyncio's `self._thread_id is not None`, read the same
 * way (run_forever's Python sets and clears _thread_id). Every Task made
 * with eager_start=True asks it (aiohttp's request task, per request), so
 * it is native: a call from C into a Python method costs a frame. */
static PyObject *loop_is_running(zl_loop *L, PyObject *unused)
{
    PyObject *thread_id = PyObject_GetAttr((PyObject *)L, L->state->names._thread_id);
    if (thread_id == NULL)
        return NULL;
    int running = thread_id != Py_None;
    Py_DECREF(thread_id);
    return PyBool_FromLong(running);
}

static PyObject *loop_stop(zl_loop *L, PyObject *unused)
{
    L->sh.stopping = 1;
    Py_RETURN_NONE;
}

/* ---- running and closing ---- */

static PyObject *loop_run_engine(zl_loop *L, PyObject *unused)
{
    if (zl_check_not_forked() < 0 || zl_check_closed(L) < 0)
        return NULL;
    if (zl_clock_sync(L) < 0)
        return NULL;
    L->running = 1;
    ZL_FT_STORE(L->run_tstate, PyThreadState_Get());
    int rc = zlgo_engine_run(L->engine);
    ZL_FT_STORE(L->run_tstate, NULL);
    L->running = 0;
    if (rc == -1)
        return NULL;
    if (rc > 0) {
        zl_sys_raise(rc);
        return NULL;
    }
    Py_RETURN_NONE;
}

static void engine_close(zl_loop *L)
{
    uintptr_t engine = L->engine;
    if (engine == 0)
        return;
    /* Closed from here on (asyncio's close() has set _closed already, a
     * loop deallocated unclosed has not): Python code that releasing the
     * handles runs (their finalizers) cannot schedule, watch or look up
     * anything more. */
    ZL_FT_STORE(L->closed, 1);
    L->engine = 0;
#ifdef Py_GIL_DISABLED
    /* another thread's call_soon_threadsafe reads it under the inbox's
     * mutex (ready.c, zl_inbox_push); the engine frees it below */
    PyMutex_Lock(&L->inbox.mutex);
    L->waker = NULL;
    PyMutex_Unlock(&L->inbox.mutex);
#else
    L->waker = NULL;
#endif
    zl_pending_reset(L);
    zl_drop_lookups(L);
    zl_ready_clear(L);
    zl_timers_release_all(L);
    zl_fds_release_all(L);
    zl_context_cache_clear(L);
    /* A forked child must not call into the parent's Go runtime: it leaks
     * the engine's two descriptors and its waker instead. */
    if (!zl_forked_child)
        zlgo_engine_close(engine);
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
    /* the module of LoopCore, the solid base of every loop class */
    PyTypeObject *core = type;
    while (core->tp_dealloc != (destructor)zl_loop_dealloc)
        core = core->tp_base;
    zl_module_state *state = PyType_GetModuleState(core);
    if (state == NULL)
        return NULL;
    if (state->futures_module == NULL) { /* what create_future and create_task call */
        PyErr_SetString(PyExc_RuntimeError,
                        "zloopgo._engine: set_asyncio() was not called (import zloopgo)");
        return NULL;
    }
    zl_loop *L = (zl_loop *)type->tp_alloc(type, 0);
    if (L == NULL)
        return NULL;
    L->state = state;
    zl_timers_make(L);
    L->fds.self_pipe = -1; /* until zloopgo.Loop names it */
    int ready = zl_ready_make(L);
    L->sh.events_cap = 256;
    L->sh.events = PyMem_RawCalloc(L->sh.events_cap, sizeof(zl_event));
    if (ready < 0 || L->sh.events == NULL || zl_grow_timers_out((uintptr_t)L, 256) < 0) {
        Py_DECREF(L);
        return PyErr_NoMemory();
    }
    L->sh.resolution = zl_clock_resolution();
    L->sh.new_timers_first = INFINITY;
    L->sh.next_timer = INFINITY;
    int err = 0;
    L->engine = zlgo_engine_new((uintptr_t)L, &L->sh, L->sh.resolution, &L->waker, &err);
    if (L->engine == 0) {
        zl_sys_raise(err);
        Py_DECREF(L);
        return NULL;
    }
    if (zl_clock_check(L) < 0) { /* a subclass may override time() */
        Py_DECREF(L);
        return NULL;
    }
    zl_pending_loop_added(L);
    return (PyObject *)L;
}

static int loop_traverse(zl_loop *L, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(L)); /* a heap type's instances hold it */
    Py_VISIT(L->debug_value);
    int (*parts[])(zl_loop *, visitproc, void *) = {
        zl_tasks_traverse, zl_context_traverse, zl_clock_traverse, zl_lookups_traverse,
        zl_ready_traverse, zl_timers_traverse,  zl_fds_traverse,
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        int r = parts[i](L, visit, arg);
        if (r != 0)
            return r;
    }
    return 0;
}

/* Breaking a reference cycle: handles are released, but timer slots stay
 * allocated (marked cancelled) while the engine may still hold them. */
static int loop_clear(zl_loop *L)
{
    zl_pending_reset(L);
    zl_tasks_clear(L);
    Py_CLEAR(L->debug_value);
    zl_schedule_clear(L);
    zl_context_cache_clear(L);
    zl_clock_clear(L);
    zl_drop_lookups(L);
    zl_ready_clear(L);
    zl_timers_cancel_all(L);
    zl_fds_release_all(L);
    return 0;
}

void zl_loop_dealloc(zl_loop *L)
{
    PyObject_GC_UnTrack(L);
    zl_pending_loop_removed(L);
    loop_clear(L);
    engine_close(L);
    zl_ready_free(L);
    zl_handle_pools_free(L);
    zl_timers_free(L);
    zl_fds_free(L);
    zl_rx_free(L);
    PyMem_RawFree(L->sh.events);
    PyMem_RawFree(L->sh.timers_out);
    PyMem_RawFree(L->sh.done);
    PyTypeObject *type = Py_TYPE(L);
    type->tp_free((PyObject *)L);
    Py_DECREF(type); /* what the instance held (subtype_dealloc leaves it to a heap base) */
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
    ZL_FT_STORE(*flag, (char)b);
    return 0;
}

static PyObject *get_closed(zl_loop *L, void *c) { return get_flag(&L->closed); }
static int set_closed(zl_loop *L, PyObject *v, void *c) { return set_flag(&L->closed, v); }
/* set_debug(x) stores x itself, as asyncio's does (get_debug() returns
 * it); C keeps its truth in `debug`, taken when it is set. */
static PyObject *get_debug(zl_loop *L, void *c) { return loop_get_debug(L, NULL); }
static int set_debug(zl_loop *L, PyObject *v, void *c)
{
    if (set_flag(&L->debug, v) < 0)
        return -1;
    Py_XSETREF(L->debug_value, PyBool_Check(v) ? NULL : Py_NewRef(v));
    return 0;
}
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
    {"call_soon", (PyCFunction)(void (*)(void))zl_loop_call_soon, METH_FASTCALL | METH_KEYWORDS,
     NULL},
    {"call_soon_threadsafe", (PyCFunction)(void (*)(void))zl_loop_call_soon_threadsafe,
     METH_FASTCALL | METH_KEYWORDS, NULL},
    {"call_later", (PyCFunction)(void (*)(void))zl_loop_call_later, METH_FASTCALL | METH_KEYWORDS,
     NULL},
    {"call_at", (PyCFunction)(void (*)(void))zl_loop_call_at, METH_FASTCALL | METH_KEYWORDS, NULL},
    {"time", (PyCFunction)zl_loop_time, METH_NOARGS, NULL},
    {"create_future", (PyCFunction)zl_loop_create_future, METH_NOARGS, NULL},
    {"create_task", (PyCFunction)(void (*)(void))zl_loop_create_task, METH_FASTCALL | METH_KEYWORDS,
     NULL},
    {"stop", (PyCFunction)loop_stop, METH_NOARGS, NULL},
    {"get_debug", (PyCFunction)loop_get_debug, METH_NOARGS, NULL},
    {"is_running", (PyCFunction)loop_is_running, METH_NOARGS, NULL},
    {"_zl_add_reader", (PyCFunction)(void (*)(void))zl_loop_add_reader, METH_FASTCALL, NULL},
    {"_zl_add_writer", (PyCFunction)(void (*)(void))zl_loop_add_writer, METH_FASTCALL, NULL},
    {"_zl_remove_reader", (PyCFunction)zl_loop_remove_reader, METH_O, NULL},
    {"_zl_remove_writer", (PyCFunction)zl_loop_remove_writer, METH_O, NULL},
    {"_zl_watch_state", (PyCFunction)zl_loop_watch_state, METH_O, NULL},
    {"_zl_set_self_pipe", (PyCFunction)(void (*)(void))zl_loop_set_self_pipe, METH_FASTCALL, NULL},
    {"_zl_find_fileobj", (PyCFunction)zl_loop_find_fileobj, METH_O, NULL},
    {"_zl_sock_recv", (PyCFunction)(void (*)(void))zl_loop_sock_recv_now, METH_FASTCALL, NULL},
    {"_zl_sock_sendall", (PyCFunction)(void (*)(void))zl_loop_sock_sendall_now, METH_FASTCALL,
     NULL},
    {"_sock_recv", (PyCFunction)(void (*)(void))zl_loop_sock_recv_step, METH_FASTCALL, NULL},
    {"_zl_sock_recv_into", (PyCFunction)(void (*)(void))zl_loop_sock_recv_into_now, METH_FASTCALL,
     NULL},
    {"_sock_recv_into", (PyCFunction)(void (*)(void))zl_loop_sock_recv_into_step, METH_FASTCALL,
     NULL},
    {"_sock_sendall", (PyCFunction)(void (*)(void))zl_loop_sock_sendall_step, METH_FASTCALL, NULL},
    {"_sock_read_done", (PyCFunction)(void (*)(void))zl_loop_sock_read_done,
     METH_FASTCALL | METH_KEYWORDS, NULL},
    {"_sock_write_done", (PyCFunction)(void (*)(void))zl_loop_sock_write_done,
     METH_FASTCALL | METH_KEYWORDS, NULL},
    {"_zl_run", (PyCFunction)loop_run_engine, METH_NOARGS, NULL},
    {"_zl_getaddrinfo", (PyCFunction)zl_loop_getaddrinfo, METH_VARARGS, NULL},
    {"_zl_getnameinfo", (PyCFunction)zl_loop_getnameinfo, METH_VARARGS, NULL},
    {"_zl_lookups_in_flight", (PyCFunction)zl_loop_lookups_in_flight, METH_NOARGS, NULL},
    {"_zl_close", (PyCFunction)loop_close_engine, METH_NOARGS, NULL},
    {NULL}};

static PyGetSetDef loop_getset[] = {
    {"_closed", (getter)get_closed, (setter)set_closed, NULL, NULL},
    {"_debug", (getter)get_debug, (setter)set_debug, NULL, NULL},
    {"_stopping", (getter)get_stopping, (setter)set_stopping, NULL, NULL},
    {"_task_factory", (getter)zl_loop_get_task_factory, (setter)zl_loop_set_task_factory, NULL,
     NULL},
    {NULL}};

static PyType_Slot loop_slots[] = {
    {Py_tp_doc, "The native core of zloopgo.Loop: scheduling, descriptors and the engine."},
    {Py_tp_new, loop_new},
    {Py_tp_dealloc, zl_loop_dealloc},
    {Py_tp_traverse, loop_traverse},
    {Py_tp_clear, loop_clear},
    {Py_tp_methods, loop_methods},
    {Py_tp_getset, loop_getset},
    {Py_tp_setattro, zl_loop_setattro},
    {0, NULL}};

static PyType_Spec loop_spec = {
    .name = "zloopgo._engine.LoopCore",
    .basicsize = sizeof(zl_loop),
    .flags =
        Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = loop_slots,
};

PyTypeObject *zl_loop_type_new(PyObject *module)
{
    return (PyTypeObject *)PyType_FromModuleAndSpec(module, &loop_spec, NULL);
}
