/* The extension module zloopgo._engine: registers the native types, the
 * hooks zloopgo's Python edge installs, and the fork guard.
 *
 * Loading this module starts a Go runtime, which does not survive fork():
 * a child forked afterwards must never call into Go (it could hang). The
 * pthread_atfork handler marks such a child, and every entry into Go checks
 * the mark first and raises RuntimeError instead. */
#include "zl.h"
#include "_cgo_export.h"
#include <pthread.h>
#include <stdlib.h>

int zl_forked_child;
PyObject *zl_repr_hook;
PyObject *zl_futures_module;
PyObject *zl_tasks_module;
PyObject *zl_base_create_task;

int zl_intern_names(const zl_name *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        *names[i].slot = PyUnicode_InternFromString(names[i].text);
        if (*names[i].slot == NULL)
            return -1;
    }
    return 0;
}

static void mark_forked_child(void) { zl_forked_child = 1; }

int zl_check_not_forked(void)
{
    if (!zl_forked_child)
        return 0;
    PyErr_SetString(PyExc_RuntimeError,
                    "zloopgo cannot run in a process forked after its Go engine started: "
                    "the Go runtime does not survive fork(). Create zloopgo loops only in the "
                    "child (do not run one in the parent before forking), or use the 'spawn' or "
                    "'forkserver' start method of multiprocessing.");
    return -1;
}

static PyObject *set_repr_hook(PyObject *mod, PyObject *fn)
{
    Py_XSETREF(zl_repr_hook, Py_NewRef(fn));
    Py_RETURN_NONE;
}

/* asyncio pieces the native create_future/create_task use; installed by
 * zloopgo's Python edge, which imports asyncio anyway. */
static PyObject *set_asyncio(PyObject *mod, PyObject *args)
{
    PyObject *futures, *tasks, *base_create_task;
    if (!PyArg_ParseTuple(args, "OOO", &futures, &tasks, &base_create_task))
        return NULL;
    Py_XSETREF(zl_futures_module, Py_NewRef(futures));
    Py_XSETREF(zl_tasks_module, Py_NewRef(tasks));
    Py_XSETREF(zl_base_create_task, Py_NewRef(base_create_task));
    Py_RETURN_NONE;
}

static PyObject *build_info_json(PyObject *mod, PyObject *unused)
{
    if (zl_check_not_forked() < 0)
        return NULL;
    char *s = zlgo_build_info();
    PyObject *r = PyUnicode_FromString(s);
    free(s);
    return r;
}

static PyObject *forked_child(PyObject *mod, PyObject *unused)
{
    return PyBool_FromLong(zl_forked_child);
}

static PyMethodDef module_methods[] = {
    {"set_repr_hook", set_repr_hook, METH_O, "Install the function that formats handles."},
    {"set_transport_layout", zl_set_transport_layout, METH_O,
     "Record where a transport class keeps its slots."},
    {"set_streams", zl_set_streams, METH_VARARGS,
     "Turn the stream fast path on for (StreamReaderProtocol, StreamReader, check_asserts), or off "
     "with None."},
    {"set_asyncio", set_asyncio, METH_VARARGS,
     "Install asyncio.futures, asyncio.tasks and BaseEventLoop.create_task."},
    {"build_info_json", build_info_json, METH_NOARGS, "Build facts from the Go side, as JSON."},
    {"file_op", (PyCFunction)(void (*)(void))zl_file_op, METH_FASTCALL,
     "Start a file operation on a file worker (capi/files.c)."},
    {"file_workers", (PyCFunction)(void (*)(void))zl_file_workers, METH_FASTCALL,
     "Set (n > 0) and return the bound on file operations running at once."},
    {"file_stats", zl_file_stats, METH_NOARGS,
     "(workers started, running, queued, orphaned) file operations."},
    {"file_graveyard_drain", zl_files_graveyard_drain, METH_NOARGS,
     "Free the file operations whose loop closed before they finished."},
    {"forked_child", forked_child, METH_NOARGS,
     "Whether this process was forked after the engine started."},
    {NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_engine", "zloopgo's native engine (Go) and adapter (C).", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__engine(void)
{
    if (zl_handle_types_ready() < 0 || zl_loop_type_ready() < 0 || zl_transport_type_ready() < 0 ||
        zl_streamfeed_ready() < 0 || zl_context_ready() < 0 || zl_clock_ready() < 0 ||
        zl_resolver_ready() < 0 || zl_files_ready() < 0)
        return NULL;
    if (pthread_atfork(NULL, NULL, mark_forked_child) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "pthread_atfork failed");
        return NULL;
    }
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "LoopCore", (PyObject *)&zl_LoopType) < 0 ||
        PyModule_AddObjectRef(m, "Handle", (PyObject *)&zl_HandleType) < 0 ||
        PyModule_AddObjectRef(m, "TimerHandle", (PyObject *)&zl_TimerHandleType) < 0 ||
        PyModule_AddObjectRef(m, "StreamFastPaths", (PyObject *)&zl_StreamFastPathsType) < 0 ||
        PyModule_AddObjectRef(m, "TransportState", (PyObject *)&zl_TransportStateType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
