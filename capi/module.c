/* The extension module zloopgo._engine, initialized in two phases (PEP
 * 489) with a state per module object (zl_module_state): readies every
 * native type and file, and lists the module's functions (the hooks zloopgo's Python edge
 * installs live in runtime.c, the fork guard too).
 *
 * Also the module state's table of interned names every file reads
 * (capi/names.h: made in exec, released when the module is freed).
 *
 * The top layer (capi/zl.h): it may call any file; none calls it. */
#include "zl.h"
#include "_cgo_export.h"
#include <stdlib.h>

static PyObject *build_info_json(PyObject *mod, PyObject *unused)
{
    if (zl_check_not_forked() < 0)
        return NULL;
    char *s = zlgo_build_info();
    PyObject *r = PyUnicode_FromString(s);
    free(s);
    return r;
}

static PyMethodDef module_methods[] = {
    {"own_methods", zl_own_methods, METH_O,
     "Give a Python subclass its own descriptors of the C methods it inherits; their names."},
    {"set_transport_layout", zl_set_transport_layout, METH_O,
     "Record where a transport class keeps its slots."},
    {"set_tls", zl_set_tls, METH_VARARGS,
     "Turn the native TLS record path on: (SSLProtocol, SSLProtocolState, SSLAgainErrors, "
     "SSLObject, is_closing_asks_transport, zloopgo's SSLProtocol, its app transport)."},
    {"set_datagram_layout", zl_set_datagram_layout, METH_O,
     "Record where a datagram transport class keeps its slots."},
    {"set_streams", zl_set_streams, METH_VARARGS,
     "Turn the stream fast path on for (StreamReaderProtocol, StreamReader, check_asserts), or off "
     "with None."},
    {"set_asyncio", zl_set_asyncio, METH_VARARGS,
     "Install asyncio.futures, asyncio.tasks, BaseEventLoop.create_task and its form (0: asyncio's "
     "method always, 1: name=, 2: name= and context=, 3: every keyword to Task, 4: name=, "
     "context= and every other keyword to Task)."},
    {"set_threadsafe_handle", zl_set_threadsafe_handle, METH_VARARGS,
     "Make 3.14+'s call_soon_threadsafe return handles of (type,), once per module; returns "
     "their runner."},
    {"set_handle_context", zl_set_handle_context, METH_VARARGS,
     "Make a descriptor's handle run in the given context itself."},
    {"context_layout_ok", zl_context_layout_ok, METH_NOARGS,
     "Whether PyContext's layout passed capi/context.c's self-test (handles share snapshots)."},
    {"socket_layout_ok", zl_socket_layout_ok, METH_NOARGS,
     "Whether a socket object's layout passed capi/sockets.c's self-test (system calls made "
     "directly)."},
    {"build_info_json", build_info_json, METH_NOARGS, "Build facts from the Go side, as JSON."},
    {"file_op", (PyCFunction)(void (*)(void))zl_file_op, METH_FASTCALL,
     "Start a file operation on a file worker (capi/files.c)."},
    {"file_workers", (PyCFunction)(void (*)(void))zl_file_workers, METH_FASTCALL,
     "Set (n > 0) and return the bound on file operations running at once."},
    {"file_stats", zl_file_stats, METH_NOARGS,
     "(workers started, running, queued, orphaned) file operations."},
    {"file_graveyard_drain", zl_files_graveyard_drain, METH_NOARGS,
     "Free the file operations whose loop closed before they finished."},
    {"forked_child", zl_forked_child_flag, METH_NOARGS,
     "Whether this process was forked after the engine started."},
    {"stats", zl_stats, METH_O, "A loop's counters and gauges, and the Go runtime's (a dict)."},
    {"reset_stats", zl_reset_stats, METH_O, "Count a loop's stats from now on."},
    {"set_slow_callbacks", zl_set_slow_callbacks, METH_VARARGS,
     "Time each callback of (loop, on) and report slow ones; returns whether it was on."},
    {"trace_start", zl_trace_start, METH_VARARGS,
     "Record the next n iterations of (loop, n) (the benchmark's timeline)."},
    {"trace_take", zl_trace_take, METH_O, "The iterations recorded, as tuples; stops the trace."},
    {NULL}};

/* What is per process (docs/architecture.md, "State: per process, per
 * interpreter, per loop"): the loader's signal mask given back, the
 * verdicts of the self-tests on C layouts that are the interpreter
 * binary's (sockets.c, context.c), TimerHandle's C attribute table
 * (timer_handle.c), the fork hooks (resolver.c, runtime.c): no Python
 * object. Made once, by whichever interpreter imports the module first;
 * interpreters with GILs of their own may import it at the same time, so
 * the first exec makes it under a lock, taken without the GIL held (a
 * thread of the same interpreter may hold the lock and wait for the GIL
 * inside an import). */
static zl_sys_mutex process_lock = ZL_SYS_MUTEX_INIT;
static int process_ready; /* under process_lock */

static int process_init(void)
{
    PyThreadState *ts = PyEval_SaveThread();
    zl_sys_mutex_lock(&process_lock);
    PyEval_RestoreThread(ts);
    int rc = 0;
    if (!process_ready) {
        zl_sys_loaded();
        rc = zl_sockets_init() < 0 || zl_timer_handle_type_init() < 0 || zl_context_init() < 0 ||
                     zl_resolver_init() < 0 || zl_runtime_init() < 0
                 ? -1
                 : 0;
        process_ready = rc == 0;
    }
    zl_sys_mutex_unlock(&process_lock);
    return rc;
}

/* Every name of capi/names.h, where it is kept in zl_names and its text:
 * the one list exec interns and the module's free drops. */
static const struct {
    size_t at;
    const char *text;
} name_table[] = {
#define ZL_NAME(id) {offsetof(zl_names, id), #id},
#define ZL_NAME_TEXT(id, text) {offsetof(zl_names, id), text},
#include "names.h"
#undef ZL_NAME
#undef ZL_NAME_TEXT
};
#define NAME_COUNT (sizeof name_table / sizeof name_table[0])

static inline PyObject **name_slot(zl_names *names, size_t i)
{
    return (PyObject **)((char *)names + name_table[i].at);
}

static int names_new(zl_module_state *state)
{
    for (size_t i = 0; i < NAME_COUNT; i++) {
        PyObject *name = PyUnicode_InternFromString(name_table[i].text);
        if (name == NULL)
            return -1;
        *name_slot(&state->names, i) = name;
    }
    const zl_names *n = &state->names;
    zl_task_kwnames *kw = &state->task_kwnames;
    kw->loop = PyTuple_Pack(1, n->loop);
    kw->loop_name = PyTuple_Pack(2, n->loop, n->name);
    kw->loop_context = PyTuple_Pack(2, n->loop, n->context);
    kw->loop_name_context = PyTuple_Pack(3, n->loop, n->name, n->context);
    kw->name = PyTuple_Pack(1, n->name);
    kw->context = PyTuple_Pack(1, n->context);
    kw->name_context = PyTuple_Pack(2, n->name, n->context);
    kw->handle = PyTuple_Pack(1, n->handle);
    state->zero = PyLong_FromLong(0);
    state->empty_bytes = PyBytes_FromStringAndSize(NULL, 0);
    if (state->zero == NULL || state->empty_bytes == NULL)
        return -1;
    return kw->loop && kw->loop_name && kw->loop_context && kw->loop_name_context && kw->name &&
                   kw->context && kw->name_context && kw->handle
               ? 0
               : -1;
}

static void names_clear(zl_module_state *state)
{
    for (size_t i = 0; i < NAME_COUNT; i++)
        Py_CLEAR(*name_slot(&state->names, i));
    zl_task_kwnames *kw = &state->task_kwnames;
    Py_CLEAR(kw->loop);
    Py_CLEAR(kw->loop_name);
    Py_CLEAR(kw->loop_context);
    Py_CLEAR(kw->loop_name_context);
    Py_CLEAR(kw->name);
    Py_CLEAR(kw->context);
    Py_CLEAR(kw->name_context);
    Py_CLEAR(kw->handle);
    Py_CLEAR(state->zero);
    Py_CLEAR(state->empty_bytes);
}

static int exec_module(PyObject *m)
{
    if (process_init() < 0)
        return -1;
    zl_module_state *state = PyModule_GetState(m);
    if (names_new(state) < 0)
        return -1;
    state->loop_type = zl_loop_type_new(m);
    if (state->loop_type == NULL || zl_handle_type_made(m, state) < 0 ||
        zl_timer_handle_type_made(m, state) < 0 || zl_handle_lock_type_new(m, state) < 0 ||
        zl_pending_init(m, state) < 0 || zl_transport_types_new(m, state) < 0 ||
        zl_datagram_types_new(m, state) < 0 || zl_tls_types_new(m, state) < 0 ||
        zl_sockets_state_new(state) < 0 || zl_resolver_state_new(state) < 0 ||
        zl_sockops_state_new(state) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "LoopCore", (PyObject *)state->loop_type) < 0 ||
        PyModule_AddObjectRef(m, "Handle", (PyObject *)state->handle_type) < 0 ||
        PyModule_AddObjectRef(m, "TimerHandle", (PyObject *)state->timer_handle_type) < 0 ||
        PyModule_AddObjectRef(m, "StreamFastPaths", (PyObject *)state->stream_fast_paths_type) <
            0 ||
        PyModule_AddObjectRef(m, "TransportState", (PyObject *)state->transport_state_type) < 0 ||
        PyModule_AddObjectRef(m, "DatagramFastPaths", (PyObject *)state->datagram_fast_paths_type) <
            0 ||
        PyModule_AddObjectRef(m, "TLSFastPaths", (PyObject *)state->tls_fast_paths_type) < 0 ||
        PyModule_AddObjectRef(m, "TLSTransportFastPaths",
                              (PyObject *)state->tls_transport_fast_paths_type) < 0 ||
        PyModule_AddObjectRef(m, "DatagramState", (PyObject *)state->datagram_state_type) < 0 ||
        PyModule_AddIntConstant(m, "SOCK_RX_FROM", ZL_SOCK_RX_FROM) < 0 ||
        PyModule_AddIntConstant(m, "SOCK_RX_LIMIT", ZL_SOCK_RX_LIMIT) < 0 ||
        zl_files_constants_add(m) < 0)
        return -1;
#if ZL_GIL_NOT_USED
    /* what tests/test_free_threaded_rows.py asks of scripts/gil-off's build */
    if (PyModule_AddIntConstant(m, "GIL_OFF_TEST_BUILD", 1) < 0)
        return -1;
#endif
    return 0;
}

static int module_traverse(PyObject *m, visitproc visit, void *arg)
{
    zl_module_state *state = PyModule_GetState(m);
    Py_VISIT(state->loop_type);
    Py_VISIT(state->handle_type);
    Py_VISIT(state->timer_handle_type);
    Py_VISIT(state->lock_type);
    Py_VISIT(state->stream_fast_paths_type);
    Py_VISIT(state->transport_state_type);
    Py_VISIT(state->datagram_fast_paths_type);
    Py_VISIT(state->datagram_state_type);
    Py_VISIT(state->tls_fast_paths_type);
    Py_VISIT(state->tls_transport_fast_paths_type);
    Py_VISIT(state->socket_type);
    Py_VISIT(state->gaierror);
    Py_VISIT(state->family_members);
    Py_VISIT(state->kind_members);
    Py_VISIT(state->partial_type);
    Py_VISIT(state->weak_value_dict);
    Py_VISIT(state->streams.protocol_type);
    Py_VISIT(state->streams.reader_type);
    Py_VISIT(state->streams.data_received_fn);
    Py_VISIT(state->streams.stream_reader_prop);
    Py_VISIT(state->streams.feed_data_fn);
    Py_VISIT(state->streams.wakeup_waiter_fn);
    Py_VISIT(state->asyncio_handle_run);
    Py_VISIT(state->futures_module);
    Py_VISIT(state->tasks_module);
    Py_VISIT(state->base_create_task);
    Py_VISIT(state->threadsafe.type);
    Py_VISIT(state->threadsafe.runner);
    /* the recorded classes derive from the module's types: a cycle */
    Py_VISIT(state->transport_layout.type);
    Py_VISIT(state->datagram_layout.type);
    Py_VISIT(state->tls.layout.type);
    Py_VISIT(state->tls.app_layout.type);
    return 0;
}

/* Breaks the cycles the module is in: it holds LoopCore and the
 * _ThreadSafeHandle runner, which hold it (call_soon_threadsafe then
 * makes asyncio's Handle, as before 3.14). asyncio's modules stay until
 * the module is freed: a loop still alive while the collector clears the
 * module (at exit) may make futures and tasks, and no cycle runs through
 * them; the names stay for the same reason. The live-loop list is
 * borrowed: each loop holds its class, which holds the module, so the
 * state outlives every loop on it. */
static int module_clear(PyObject *m)
{
    zl_module_state *state = PyModule_GetState(m);
    Py_CLEAR(state->loop_type);
    Py_CLEAR(state->handle_type);
    Py_CLEAR(state->timer_handle_type);
    Py_CLEAR(state->lock_type);
    Py_CLEAR(state->stream_fast_paths_type);
    Py_CLEAR(state->transport_state_type);
    Py_CLEAR(state->datagram_fast_paths_type);
    Py_CLEAR(state->datagram_state_type);
    Py_CLEAR(state->tls_fast_paths_type);
    Py_CLEAR(state->tls_transport_fast_paths_type);
    Py_CLEAR(state->socket_type);
    Py_CLEAR(state->gaierror);
    Py_CLEAR(state->family_members);
    Py_CLEAR(state->kind_members);
    Py_CLEAR(state->partial_type);
    Py_CLEAR(state->weak_value_dict);
    Py_CLEAR(state->streams.protocol_type);
    Py_CLEAR(state->streams.reader_type);
    Py_CLEAR(state->streams.data_received_fn);
    Py_CLEAR(state->streams.stream_reader_prop);
    Py_CLEAR(state->streams.feed_data_fn);
    Py_CLEAR(state->streams.wakeup_waiter_fn);
    Py_CLEAR(state->threadsafe.type);
    Py_CLEAR(state->threadsafe.runner);
    /* a layout without its class: its fields are looked up by name */
    Py_CLEAR(state->transport_layout.type);
    Py_CLEAR(state->datagram_layout.type);
    Py_CLEAR(state->tls.layout.type);
    Py_CLEAR(state->tls.app_layout.type);
    return 0;
}

static void module_free(void *m)
{
    zl_module_state *state = PyModule_GetState((PyObject *)m);
    module_clear((PyObject *)m);
    Py_CLEAR(state->asyncio_handle_run);
    Py_CLEAR(state->futures_module);
    Py_CLEAR(state->tasks_module);
    Py_CLEAR(state->base_create_task);
    zl_tls_state_free(state);
    zl_pending_fini(state);
    names_clear(state); /* strings: in no cycle, and read by loops until the module goes */
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, exec_module},
#if PY_VERSION_HEX >= 0x030C0000
    /* every Python object the adapter keeps is its module state's, and
     * what is per process holds none (above): interpreters with GILs of
     * their own each load a module of their own (issue 41) */
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
/* The adapter relies on the GIL (docs/architecture.md, "Free-threaded
     * builds: what is still missing" lists where and what replaces it):
     * said, not left to the default, so that a free-threaded interpreter
     * keeps the GIL on for it. Py_MOD_GIL_NOT_USED once all of that is built
     * and a free-threaded suite has passed. ZL_TEST_GIL_NOT_USED is a
     * test-only build's (scripts/gil-off, through CGO_CFLAGS; not
     * supported): the rows built so far, stressed with the GIL off. */
#if ZL_GIL_NOT_USED
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#else
    {Py_mod_gil, Py_MOD_GIL_USED},
#endif
#endif
    {0, NULL}};

PyModuleDef zl_module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_engine",
    .m_doc = "zloopgo's native engine (Go) and adapter (C).",
    .m_size = sizeof(zl_module_state),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__engine(void) { return PyModuleDef_Init(&zl_module_def); }
