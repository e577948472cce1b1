/* Context snapshots for handles. asyncio copies the current context for
 * every call_soon/call_later; a million pending callbacks then hold a
 * million Context objects. Here a handle scheduled without context= holds
 * a *snapshot*: a copy of the current context that nobody ever enters,
 * shared by every handle scheduled while the current context's variables
 * stay the same (they are an immutable mapping, so the same mapping object
 * means the same values). When the handle runs — or get_context() hands
 * its context out — it takes a private copy of the snapshot (or the
 * snapshot itself, if no one else holds it), so each callback still runs
 * in its own context as of scheduling time, as asyncio's do.
 *
 * Comparing mappings needs two fields CPython keeps out of its public API
 * (PyThreadState.context, PyContext's variables); a self-test at import
 * checks them, and without it every handle gets its own copy at once, as
 * before. This file knows contexts and the loop's one-entry cache; it
 * knows nothing of the engine.
 *
 * In a free-threaded build the cache and the spare are used on the
 * running loop's own thread alone (zl_pool_here): a handle's dealloc, and
 * with it zl_context_recycle, runs on whichever thread drops it last, and
 * a loop that does not run may make handles on any thread. Elsewhere a
 * handle gets a copy of its own and its private context is released.
 * The counts that decide sharing are ZL_UNIQUE's (zl.h). */
#include "zl.h"

/* PyContext's layout on CPython 3.10 to 3.15 (Include/internal/pycore_context.h). */
typedef struct {
    PyObject_HEAD
    PyObject *ctx_prev;
    PyObject *ctx_vars; /* a PyHamtObject: immutable */
    PyObject *ctx_weakreflist;
    int ctx_entered;
} context_layout;

static int sharing; /* the self-test passed */

static PyObject *vars_of(PyObject *ctx) { return ((context_layout *)ctx)->ctx_vars; }

/* Checks that the fields read above are where and what this file thinks. */
int zl_context_init(void)
{
    sharing = 0;
    if (PyContext_Type.tp_basicsize != (Py_ssize_t)sizeof(context_layout))
        return 0;
    PyObject *var = PyContextVar_New("zloopgo_layout_probe", NULL);
    PyObject *ctx = PyContext_New();
    PyObject *copy = NULL, *token = NULL, *before = NULL;
    int ok = var != NULL && ctx != NULL;
    if (ok) {
        before = Py_NewRef(vars_of(ctx));
        ok = PyContext_Enter(ctx) == 0;
        if (ok) {
            PyThreadState *ts = PyThreadState_Get();
            ok = ts->context == ctx && ((context_layout *)ctx)->ctx_entered == 1;
            token = PyContextVar_Set(var, Py_True);
            ok = ok && token != NULL && vars_of(ctx) != before;
            ok = PyContext_Exit(ctx) == 0 && ok;
        }
        copy = ok ? PyContext_Copy(ctx) : NULL;
        ok = ok && copy != NULL && vars_of(copy) == vars_of(ctx) &&
             ((context_layout *)ctx)->ctx_entered == 0 && ((context_layout *)ctx)->ctx_prev == NULL;
    }
    Py_XDECREF(before);
    Py_XDECREF(token);
    Py_XDECREF(copy);
    Py_XDECREF(ctx);
    Py_XDECREF(var);
    PyErr_Clear();
    sharing = ok;
    return 0;
}

/* _engine.context_layout_ok(): whether the self-test passed, so that
 * handles share snapshots (tests/test_asyncio_internals.py asks it). */
PyObject *zl_context_layout_ok(PyObject *mod, PyObject *unused) { return PyBool_FromLong(sharing); }

/* A copy of the current context that no Python code can reach, kept off
 * the collector's lists (it cannot be part of a cycle) until released. */
static PyObject *hidden_copy(void)
{
    PyObject *copy = PyContext_CopyCurrent();
    if (copy != NULL)
        PyObject_GC_UnTrack(copy);
    return copy;
}

/* Context's dealloc unlinks it from the collector's lists: one of ours
 * must be on them again before the last reference goes. (A context=
 * argument may be anything; a real Context is tracked unless this file
 * untracked it.) */
void zl_context_release(PyObject *ctx)
{
    if (ctx == NULL)
        return;
#ifdef Py_GIL_DISABLED
    /* The count decides nothing here: two holders letting go on two
     * threads at once may both read 2, and the context would go
     * untracked (a debug build's dealloc asserts; a release build's only
     * clears a bit). A holder that is not certainly the last (ZL_UNIQUE:
     * this thread's one reference and no other thread's) tracks it, as a
     * context handed out is (zl_context_escape: in a critical section,
     * since such holders may track it at the same moment); the certain
     * last one tracks it alone, no other thread holding it. A context
     * shared by handles is then on the collector's lists from the first
     * of them that lets go. */
    if (!ZL_UNIQUE(ctx))
        zl_context_escape(ctx);
    else if (PyContext_CheckExact(ctx) && !PyObject_GC_IsTracked(ctx))
        PyObject_GC_Track(ctx);
#else
    if (Py_REFCNT(ctx) == 1 && PyContext_CheckExact(ctx) && !PyObject_GC_IsTracked(ctx))
        PyObject_GC_Track(ctx);
#endif
    Py_DECREF(ctx);
}

PyObject *zl_context_snapshot(zl_loop *L)
{
    /* the cache is the running loop's own thread's in a free-threaded
     * build (zl_pool_here, as the handle free lists): a loop that does not
     * run may make handles on any thread */
    if (!sharing || !zl_pool_here(L))
        return hidden_copy();
    PyObject *current = PyThreadState_Get()->context;
    PyObject *cached = L->contexts.cache;
    if (current != NULL && cached != NULL && vars_of(current) == L->contexts.cache_vars &&
        vars_of(cached) == L->contexts.cache_vars)
        return Py_NewRef(cached);
    PyObject *copy = hidden_copy();
    if (copy == NULL)
        return NULL;
    zl_context_cache_clear(L);
    L->contexts.cache = Py_NewRef(copy);
    L->contexts.cache_vars = Py_NewRef(vars_of(copy)); /* held: its address stays unique */
    return copy;
}

void zl_context_cache_clear(zl_loop *L)
{
    PyObject *cached = L->contexts.cache, *spare = L->contexts.spare;
    L->contexts.cache = L->contexts.spare = NULL;
    Py_CLEAR(L->contexts.cache_vars);
    zl_context_release(cached);
    zl_context_release(spare);
}

void zl_context_escape(PyObject *ctx)
{
#ifdef Py_GIL_DISABLED
    /* PyObject_GC_Track of a tracked object is a fatal error: the look and
     * the tracking in one critical section on the context, which every
     * thread that tracks one of ours takes (zl_context_release) */
    if (!PyContext_CheckExact(ctx) || PyObject_GC_IsTracked(ctx))
        return;
    Py_BEGIN_CRITICAL_SECTION(ctx);
    if (!PyObject_GC_IsTracked(ctx))
        PyObject_GC_Track(ctx);
    Py_END_CRITICAL_SECTION();
#else
    if (PyContext_CheckExact(ctx) && !PyObject_GC_IsTracked(ctx))
        PyObject_GC_Track(ctx);
#endif
}

PyObject *zl_context_private(zl_loop *L, PyObject *snapshot)
{
    if (ZL_UNIQUE(snapshot))
        return Py_NewRef(snapshot); /* no other handle, not cached: it is ours */
    PyObject *spare = zl_pool_here(L) ? L->contexts.spare : NULL;
    if (spare != NULL && vars_of(spare) == vars_of(snapshot)) {
        L->contexts.spare = NULL; /* the loop's reference becomes the caller's */
        return spare;
    }
    PyObject *copy = PyContext_Copy(snapshot);
    if (copy != NULL)
        PyObject_GC_UnTrack(copy);
    return copy;
}

/* A handle's private context, at its end: one that nothing else holds,
 * no weak reference points at and nobody has entered is, with its
 * variables, exactly what a fresh copy of a snapshot with those variables
 * would be. The loop keeps one such context as its spare and hands it to
 * the next handle whose snapshot has the same variables (a callback that
 * set a variable left different ones), instead of copying: most callbacks
 * then run without a Context being made for them. Steals ctx. */
void zl_context_recycle(zl_loop *L, PyObject *ctx)
{
    context_layout *c = (context_layout *)ctx;
    /* a handle freed on another thread than its running loop's (a
     * free-threaded build: zl_pool_here) leaves the spare alone */
    if (!sharing || L == NULL || !PyContext_CheckExact(ctx) || !zl_pool_here(L)) {
        zl_context_release(ctx);
        return;
    }
    /* held elsewhere (a Task's context, passed with context= for each of
     * its steps): this reference is not the last, nothing else to see */
    if (!ZL_UNIQUE(ctx)) {
        zl_context_drop_shared(ctx);
        return;
    }
    if (PyObject_GC_IsTracked(ctx) || c->ctx_weakreflist != NULL || c->ctx_entered ||
        c->ctx_prev != NULL) {
        zl_context_release(ctx);
        return;
    }
    PyObject *old = L->contexts.spare;
    L->contexts.spare = ctx;
    zl_context_release(old);
}

int zl_context_traverse(zl_loop *L, visitproc visit, void *arg)
{
    Py_VISIT(L->contexts.cache);
    return 0;
}

/* _engine.set_handle_context(handle, context): the handle, just made for a
 * descriptor (_zl_add_reader / _zl_add_writer), runs in `context` itself
 * from now on, instead of its snapshot of the current one: asyncio 3.15's
 * transports register their descriptors with context=self._context, so that
 * data_received runs in the one context connection_made and
 * connection_lost run in (the native read stays the handle's callback). */
PyObject *zl_set_handle_context(PyObject *mod, PyObject *args)
{
    PyObject *handle, *ctx;
    zl_module_state *state = PyModule_GetState(mod);
    if (!PyArg_ParseTuple(args, "O!O!", state->handle_type, &handle, &PyContext_Type, &ctx))
        return NULL;
    zl_handle *h = (zl_handle *)handle;
    if (h->running)
        return PyErr_Format(PyExc_RuntimeError, "the handle is running");
    PyObject *old = h->context;
    h->context = Py_NewRef(ctx);
    h->context_snapshot = 0;
    zl_context_release(old);
    Py_RETURN_NONE;
}
