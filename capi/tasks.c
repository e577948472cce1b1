/* Futures and tasks: create_future and create_task as asyncio's
 * futures.Future(loop=self) and tasks.Task(coro, loop=self, ...), called
 * without a Python frame, and the task factory asyncio reads.
 *
 * It knows nothing of how callbacks are scheduled or run: Future and Task
 * are asyncio's own, looked up per call. */
#include "zl.h"

/* create_future(): asyncio's futures.Future(loop=self), without a Python frame. */
PyObject *zl_loop_create_future(zl_loop *L, PyObject *unused)
{
    PyObject *future_type = PyObject_GetAttr(L->state->futures_module, L->state->names.Future);
    if (future_type == NULL)
        return NULL;
    PyObject *args[1] = {(PyObject *)L};
    PyObject *fut = PyObject_Vectorcall(future_type, args, 0, L->state->task_kwnames.loop);
    Py_DECREF(future_type);
    return fut;
}

/* BaseEventLoop.create_task(self, *args, **kwargs): asyncio's own method,
 * which also words the errors of a wrong call. */
static PyObject *general_create_task(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *small[8], **stack = small;
    if (nargs + nkw + 1 > 8) {
        stack = PyMem_Malloc((nargs + nkw + 1) * sizeof(PyObject *));
        if (stack == NULL)
            return PyErr_NoMemory();
    }
    stack[0] = (PyObject *)L;
    for (Py_ssize_t i = 0; i < nargs + nkw; i++)
        stack[i + 1] = args[i];
    PyObject *r = PyObject_Vectorcall(L->state->base_create_task, stack, nargs + 1, kwnames);
    if (stack != small)
        PyMem_Free(stack);
    return r;
}

/* Task(coro, **kwargs), called by this loop's own thread while it runs:
 * Task finds it as the running loop, so loop= can go, and with no keyword
 * left the call builds no keyword dict (Task has no vectorcall). Not
 * before 3.12: there _asyncio's running-loop lookup checks the process id
 * with getpid(), a system call per task, dearer than the keyword. */
static int on_running_thread(zl_loop *L)
{
#if PY_VERSION_HEX >= 0x030C0000
#ifdef Py_GIL_DISABLED /* run_tstate is written on the loop's thread */
    PyThreadState *runner = ZL_FT_LOAD(L->run_tstate);
    return runner != NULL && runner == PyThreadState_Get();
#else
    return L->run_tstate != NULL && L->run_tstate == PyThreadState_Get();
#endif
#else
    (void)L;
    return 0;
#endif
}

static PyObject *new_task(zl_loop *L, PyObject *const *stack, Py_ssize_t nkw, PyObject *kwnames)
{
    PyObject *task_type = PyObject_GetAttr(L->state->tasks_module, L->state->names.Task);
    if (task_type == NULL)
        return NULL;
    PyObject *task = PyObject_Vectorcall(task_type, stack, 1, nkw > 0 ? kwnames : NULL);
    Py_DECREF(task_type);
    return task;
}

/* The most keywords create_task passes on to Task without asyncio's method. */
#define TASK_KEYWORDS_MAX 6

/* The KEYWORDS form, create_task(coro, **kwargs) (3.14+): asyncio's
 * tasks.Task(coro, loop=self, **kwargs), every keyword Task takes
 * (eager_start=, name=, context=) and any it refuses, which Task words. A
 * keyword named loop (asyncio's call then has two) or more keywords than
 * fit here go to asyncio's own method. */
static PyObject *create_task_keywords(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                                      PyObject *kwnames)
{
    const zl_task_kwnames *kw = &L->state->task_kwnames;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nkw > TASK_KEYWORDS_MAX)
        return general_create_task(L, args, nargs, kwnames);
    for (Py_ssize_t i = 0; i < nkw; i++)
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), "loop") == 0)
            return general_create_task(L, args, nargs, kwnames);
    if (zl_check_closed(L) < 0)
        return NULL;
    if (on_running_thread(L)) /* Task(coro, **kwargs): the arguments as they came */
        return new_task(L, args, nkw, kwnames);
    if (nkw == 0) {
        PyObject *stack[2] = {args[0], (PyObject *)L};
        return new_task(L, stack, 1, kw->loop);
    }
    PyObject *stack[TASK_KEYWORDS_MAX + 2] = {args[0], (PyObject *)L};
    PyObject *names = PyTuple_New(nkw + 1);
    if (names == NULL)
        return NULL;
    PyTuple_SET_ITEM(names, 0, Py_NewRef(PyTuple_GET_ITEM(kw->loop, 0)));
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyTuple_SET_ITEM(names, i + 1, Py_NewRef(PyTuple_GET_ITEM(kwnames, i)));
        stack[i + 2] = args[i + 1];
    }
    PyObject *task = new_task(L, stack, nkw + 1, names);
    Py_DECREF(names);
    return task;
}

/* The NAME_CONTEXT_KEYWORDS form, create_task(coro, *, name=None,
 * context=None, **kwargs) (3.13's later patch releases): asyncio's
 * tasks.Task(coro, loop=self, name=name, context=context, **kwargs), the
 * keywords in that order, name and context always given, so that Task
 * words a refusal as for asyncio's call ("takes at most 5 arguments (6
 * given)" counts them). loop= always goes too: 3.13's Task asks the loop
 * it was given, not the running one, whether it runs for eager_start=. A
 * keyword named loop, or more keywords than fit here, go to asyncio's own
 * method. */
static PyObject *create_task_name_context_keywords(zl_loop *L, PyObject *const *args,
                                                   Py_ssize_t nargs, PyObject *kwnames)
{
    const zl_task_kwnames *kw = &L->state->task_kwnames;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nkw > TASK_KEYWORDS_MAX)
        return general_create_task(L, args, nargs, kwnames);
    /* Task(coro, loop=self, name=name, context=context, the others...) */
    PyObject *stack[TASK_KEYWORDS_MAX + 4] = {args[0], (PyObject *)L, Py_None, Py_None};
    Py_ssize_t others = 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        if (PyUnicode_CompareWithASCIIString(key, "name") == 0)
            stack[2] = args[1 + i];
        else if (PyUnicode_CompareWithASCIIString(key, "context") == 0)
            stack[3] = args[1 + i];
        else if (PyUnicode_CompareWithASCIIString(key, "loop") == 0)
            return general_create_task(L, args, nargs, kwnames);
        else
            stack[4 + others++] = args[1 + i];
    }
    if (zl_check_closed(L) < 0)
        return NULL;
    if (others == 0)
        return new_task(L, stack, 3, kw->loop_name_context);
    PyObject *names = PyTuple_New(3 + others);
    if (names == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < 3; i++)
        PyTuple_SET_ITEM(names, i, Py_NewRef(PyTuple_GET_ITEM(kw->loop_name_context, i)));
    Py_ssize_t at = 3;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        if (PyUnicode_CompareWithASCIIString(key, "name") != 0 &&
            PyUnicode_CompareWithASCIIString(key, "context") != 0)
            PyTuple_SET_ITEM(names, at++, Py_NewRef(key));
    }
    PyObject *task = new_task(L, stack, 3 + others, names);
    Py_DECREF(names);
    return task;
}

/* The NAME and NAME_CONTEXT forms, create_task(coro, *, name=None) (3.10)
 * and create_task(coro, *, name=None, context=None) (3.11 to 3.13.0):
 * asyncio's tasks.Task(coro, loop=self, name=name[, context=context]).
 * Any other keyword is a mistake that asyncio's own method words. */
static PyObject *create_task_named(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames, int takes_context)
{
    const zl_task_kwnames *kw = &L->state->task_kwnames;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nkw > 2)
        return general_create_task(L, args, nargs, kwnames);
    /* arguments for Task(coro, loop=self, name=..., context=...) */
    PyObject *stack[4] = {args[0], (PyObject *)L, NULL, NULL};
    PyObject *name = NULL, *context = NULL;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        if (PyUnicode_CompareWithASCIIString(key, "name") == 0)
            name = args[1 + i];
        else if (takes_context && PyUnicode_CompareWithASCIIString(key, "context") == 0)
            context = args[1 + i];
        else
            return general_create_task(L, args, nargs, kwnames);
    }
    if (zl_check_closed(L) < 0)
        return NULL;
    PyObject *names = kw->loop;
    Py_ssize_t n = 2;
    if (name != NULL && context != NULL) {
        names = kw->loop_name_context;
        stack[n++] = name;
        stack[n++] = context;
    } else if (name != NULL) {
        names = kw->loop_name;
        stack[n++] = name;
    } else if (context != NULL) {
        names = kw->loop_context;
        stack[n++] = context;
    }
    if (!on_running_thread(L))
        return new_task(L, stack, PyTuple_GET_SIZE(names), names);
    /* loop= goes (on_running_thread) */
    stack[1] = args[0];
    names = names == kw->loop_name_context ? kw->name_context
            : names == kw->loop_name       ? kw->name
            : names == kw->loop_context    ? kw->context
                                           : NULL;
    return new_task(L, stack + 1, names ? PyTuple_GET_SIZE(names) : 0, names);
}

/* create_task(coro, ...) in the form the running Python's asyncio has
 * (zl_module_state.create_task_form, read from its signature at import,
 * not from the version: 3.13's patch releases changed it). With a task
 * factory, in debug mode, with a positional argument besides coro, or in
 * a form not known here, asyncio's own Python method runs (and words the
 * errors). */
PyObject *zl_loop_create_task(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    nargs = PyVectorcall_NARGS(nargs);
    int form = L->state->create_task_form;
    if (L->task_factory != NULL || L->debug || nargs != 1 || form == ZL_CREATE_TASK_ASYNCIO)
        return general_create_task(L, args, nargs, kwnames);
    if (form == ZL_CREATE_TASK_KEYWORDS)
        return create_task_keywords(L, args, nargs, kwnames);
    if (form == ZL_CREATE_TASK_NAME_CONTEXT_KEYWORDS)
        return create_task_name_context_keywords(L, args, nargs, kwnames);
    return create_task_named(L, args, nargs, kwnames, form == ZL_CREATE_TASK_NAME_CONTEXT);
}

PyObject *zl_loop_get_task_factory(zl_loop *L, void *c)
{
    return Py_NewRef(L->task_factory ? L->task_factory : Py_None);
}

int zl_loop_set_task_factory(zl_loop *L, PyObject *v, void *c)
{
    Py_XSETREF(L->task_factory, (v == NULL || v == Py_None) ? NULL : Py_NewRef(v));
    return 0;
}

int zl_tasks_traverse(zl_loop *L, visitproc visit, void *arg)
{
    Py_VISIT(L->task_factory);
    return 0;
}

void zl_tasks_clear(zl_loop *L) { Py_CLEAR(L->task_factory); }
