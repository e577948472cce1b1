/* What the adapter holds for the whole process, set once and then only
 * read: the fork guard, and the pieces of asyncio and of zloopgo's Python
 * edge the native code calls (installed at import by zloopgo/_loop.py).
 * The signal mask Go's threads start with is the platform's business
 * (platform_unix.c).
 *
 * Loading the extension starts a Go runtime, which does not survive
 * fork(): a child forked afterwards must never call into Go (it could
 * hang). A fork handler (zl_sys_at_fork) marks such a child, and every
 * entry into Go checks the mark first and raises RuntimeError instead.
 *
 * Layer 2 (capi/zl.h): it knows no loop, handle or transport. */
#include "zl.h"

int zl_forked_child;

static void mark_forked_child(void) { zl_forked_child = 1; }

int zl_runtime_init(void)
{
    if (zl_sys_at_fork(NULL, NULL, mark_forked_child) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "pthread_atfork failed");
        return -1;
    }
    return 0;
}

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

PyObject *zl_set_asyncio(PyObject *mod, PyObject *args)
{
    PyObject *futures, *tasks, *base_create_task;
    int form;
    if (!PyArg_ParseTuple(args, "OOOi", &futures, &tasks, &base_create_task, &form))
        return NULL;
    if (form < ZL_CREATE_TASK_ASYNCIO || form > ZL_CREATE_TASK_NAME_CONTEXT_KEYWORDS)
        return PyErr_Format(PyExc_ValueError, "unknown create_task form %d", form);
    zl_module_state *state = PyModule_GetState(mod);
    Py_XSETREF(state->futures_module, Py_NewRef(futures));
    Py_XSETREF(state->tasks_module, Py_NewRef(tasks));
    Py_XSETREF(state->base_create_task, Py_NewRef(base_create_task));
    state->create_task_form = form;
    Py_RETURN_NONE;
}

PyObject *zl_forked_child_flag(PyObject *mod, PyObject *unused)
{
    return PyBool_FromLong(zl_forked_child);
}
