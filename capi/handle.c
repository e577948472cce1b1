/* Handle and TimerHandle: what call_soon / call_later return and what the
 * ready queue holds. A handle stores its callback, up to three arguments
 * inline, and the contextvars.Context it runs in; it runs with one
 * vectorcall and no argument tuple. Handles are recycled through small
 * free lists and take part in the cyclic GC. They know their loop but not
 * the engine. Handle subclasses asyncio.events.Handle (TimerHandle,
 * timer_handle.c, asyncio.events.TimerHandle), so that isinstance() checks
 * a program makes against asyncio's classes hold; every attribute and
 * method asyncio's define is ours or reads ours.
 *
 * Most call_soon handles are dropped by their caller before they run
 * (_asyncio's futures drop what call_soon returns at once): pending.c then
 * finds the handle alone, its queue entry takes its call, and the handle
 * is handed over (zl_handle_hand_over) and freed by the short way, which
 * skips what those conditions already ruled out (the collector's lists,
 * weak references, a call, a context, a debug record, another type):
 * marked so for its dealloc, or, where the interpreter's _Py_Dealloc does
 * nothing but call tp_dealloc (up to 3.12), freed by the hand-over
 * itself. */
#include "zl.h"

/* Up to this many freed handles of each type are kept for reuse, by the
 * loop they belonged to (two loops in two threads never share one): a
 * reused handle skips the allocator and does not count towards the
 * collector's next run. 4096 covers the bursts of ready callbacks real
 * programs have (at most ~0.5 MiB per type and loop); measured: 500k
 * call_soon in batches of 10k ran ~5% faster than with 256.
 * ZL_NO_FREE_LISTS (scripts/sanitize's build) keeps none: every handle is
 * freed, so AddressSanitizer sees a use of one after its last reference. */
#ifdef ZL_NO_FREE_LISTS
#define FREELIST_MAX 0
#else
#define FREELIST_MAX 4096
#endif

static zl_handle_pool *pool_of(zl_loop *L, PyTypeObject *type)
{
    return type == L->state->handle_type ? &L->callbacks.handle_pool : &L->callbacks.timer_pool;
}

void zl_handle_pools_free(zl_loop *L)
{
    zl_handle_pool *pools[] = {&L->callbacks.handle_pool, &L->callbacks.timer_pool};
    for (int p = 0; p < 2; p++) {
        for (int i = 0; i < pools[p]->n; i++)
            PyObject_GC_Del(pools[p]->items[i]);
        PyMem_Free(pools[p]->items);
        pools[p]->items = NULL;
        pools[p]->n = 0;
    }
}

/* asyncio's cancel() does `self._callback = None`, then `self._args =
 * None`: a finalizer the callback's release runs sees _args still there,
 * and one the arguments' release runs sees both gone, the arguments
 * dropped last first (a tuple's order). */
static void clear_call(zl_handle *h)
{
    h->args_kept = 1;
    Py_CLEAR(h->callback);
    h->args_kept = 0;
    Py_ssize_t n = h->nargs;
    PyObject *inline_copy[ZL_INLINE_ARGS];
    PyObject **args = h->args;
    if (args == h->inline_args) {
        memcpy(inline_copy, args, n * sizeof(PyObject *));
        args = inline_copy;
    }
    memset(h->inline_args, 0, sizeof(h->inline_args)); /* NULL past nargs (zl.h) */
    h->args = h->inline_args;
    h->nargs = 0;
    for (Py_ssize_t i = n - 1; i >= 0; i--)
        Py_XDECREF(args[i]);
    if (args != inline_copy)
        PyMem_Free(args);
}

zl_handle *zl_handle_new(zl_loop *loop, PyTypeObject *type, PyObject *callback,
                         PyObject *const *args, Py_ssize_t nargs, PyObject *context, int pending)
{
    zl_handle *h;
    zl_handle_pool *pool = pool_of(loop, type);
    /* whose free list it is first: another thread reads not even its
     * count, which the running loop's thread writes (a race ThreadSanitizer
     * reported, scripts/tsan) */
    if (zl_pool_here(loop) && pool->n > 0) {
        h = pool->items[--pool->n];
        (void)PyObject_Init((PyObject *)h, type);
    } else {
        h = PyObject_GC_New(zl_handle, type);
        if (h == NULL)
            return NULL;
        /* asyncio's part: NULL from now on, tp_clear leaves it so */
        memset(h->asyncio_slots, 0, offsetof(zl_handle, loop) - offsetof(zl_handle, asyncio_slots));
    }
    /* a Handle's size is known here, so its zeroing is a few stores
     * rather than a call to memset */
    if (type == loop->state->handle_type)
        memset(&h->loop, 0, sizeof(zl_handle) - offsetof(zl_handle, loop));
    else
        memset(&h->loop, 0, type->tp_basicsize - offsetof(zl_handle, loop));
    h->args = h->inline_args;
    if (nargs > INT32_MAX) {
        Py_DECREF(h);
        PyErr_SetString(PyExc_OverflowError, "too many arguments");
        return NULL;
    }
    if (nargs > ZL_INLINE_ARGS) {
        h->args = PyMem_Malloc(nargs * sizeof(PyObject *));
        if (h->args == NULL) {
            h->args = h->inline_args;
            Py_DECREF(h);
            PyErr_NoMemory();
            return NULL;
        }
    }
    return zl_handle_fill(loop, h, callback, args, nargs, context, pending);
}

int zl_visit_pending(zl_handle *h, visitproc visit, void *arg)
{
    if (h == NULL)
        return 0;
    if (PyObject_GC_IsTracked((PyObject *)h))
        return visit((PyObject *)h, arg);
    /* zl_handle_alone by the count (a traverse: not ZL_UNIQUE) */
    if (Py_REFCNT(h) == 1 && *zl_handle_weakrefs(h) == NULL)
        return zl_handle_traverse(h, visit, arg);
    return 0; /* not possible after pending.c's checks; if it were, a leak, never a wrong free */
}

void zl_handle_release(zl_handle *h)
{
    /* The queue or slot held it untracked; whoever else still holds it
     * may build a cycle through it, which the collector must see. */
    if (ZL_SHARED(h) && !PyObject_GC_IsTracked((PyObject *)h))
        PyObject_GC_Track(h);
    Py_DECREF(h);
}

/* The context a call runs in from now on: its own copy of the snapshot it
 * holds (capi/context.c). 0, or -1 with an exception set. */
static int own_context(zl_loop *L, PyObject **context, char *snapshot)
{
    if (!*snapshot)
        return 0;
    PyObject *mine = zl_context_private(L, *context);
    if (mine == NULL)
        return -1;
    zl_context_release(*context);
    *context = mine;
    *snapshot = 0;
    return 0;
}

/* asyncio's Handle._run calls self._context.run(callback, *args): a
 * context= that is not a contextvars.Context gets that same call (and
 * fails as it fails there, an AttributeError for most objects). */
static PyObject *run_in_foreign_context(zl_loop *L, PyObject *context, PyObject *callback,
                                        PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *small[ZL_INLINE_ARGS + 2];
    size_t n = (size_t)nargs + 2;
    PyObject **stack = n <= ZL_INLINE_ARGS + 2 ? small : PyMem_Malloc(n * sizeof(PyObject *));
    if (stack == NULL)
        return PyErr_NoMemory();
    stack[0] = context;
    stack[1] = callback;
    for (Py_ssize_t i = 0; i < nargs; i++)
        stack[i + 2] = args[i];
    PyObject *res = PyObject_VectorcallMethod(L->state->names.run, stack, n, NULL);
    if (stack != small)
        PyMem_Free(stack);
    return res;
}

/* Calls callback(*args) in *context (first made the call's own if it is a
 * shared snapshot), as a callback of loop L (counted for stats()). The
 * result, or NULL with the callback's exception set. */
PyObject *zl_run_call(zl_loop *L, PyObject *callback, PyObject *const *args, Py_ssize_t nargs,
                      PyObject **context, char *snapshot)
{
    PyObject *res = NULL;
    if (!PyContext_CheckExact(*context)) {
        L->callbacks.started++;
        res = run_in_foreign_context(L, *context, callback, args, nargs);
    } else if (own_context(L, context, snapshot) == 0) {
        res = zl_call_in_context(L, callback, args, nargs, *context);
    }
    return res;
}

int zl_report_callback_exception(zl_loop *L, PyObject *handle)
{
    /* the frame asyncio's traceback has on top: Handle._run's */
    zl_traceback_add("<zloopgo capi/handle.c>", "_run", __LINE__);
    if (PyErr_ExceptionMatches(PyExc_SystemExit) || PyErr_ExceptionMatches(PyExc_KeyboardInterrupt))
        return -1;
    PyObject *exc = zl_fetch_exception();
    if (exc == NULL)
        return 0;
    /* inside asyncio's `except BaseException as exc:`: the handler runs
     * with exc as the exception being handled */
    PyObject *r = zl_call_handling((PyObject *)L, L->state->names._zl_callback_error, exc, handle);
    Py_DECREF(exc);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

int zl_handle_report_exception(zl_handle *h)
{
    return zl_report_callback_exception(h->loop, (PyObject *)h);
}

/* Runs the callback in its context. An exception other than SystemExit or
 * KeyboardInterrupt goes to the loop's exception handler, as asyncio's
 * Handle._run does; those two (and a failure of the handler itself)
 * return -1 with the exception set, as does any failure of the
 * _ThreadSafeHandle runner, which reported its callback's itself
 * (zl_is_threadsafe_runner).
 *
 * The run holds references of its own to the callback and its arguments,
 * as asyncio's frame does to what it passes: the callback may cancel its
 * handle (which releases the handle's, as asyncio's cancel() drops
 * _callback and _args at once) or run it again (h._run() inside it), and
 * a C callback may read its arguments after it ran Python code. `running`
 * counts the runs executing, so that the context they entered stays. */
int zl_handle_run(zl_handle *h)
{
    if (h->callback == NULL)
        return 0;
    if (h->running == UINT16_MAX) { /* nested that deep, the C stack is the limit */
        PyErr_SetString(PyExc_RecursionError, "maximum recursion depth exceeded");
        return zl_handle_report_exception(h);
    }
    Py_ssize_t nargs = h->nargs;
    PyObject *inline_args[ZL_INLINE_ARGS];
    PyObject **args =
        nargs <= ZL_INLINE_ARGS ? inline_args : PyMem_Malloc(nargs * sizeof(PyObject *));
    if (args == NULL) {
        PyErr_NoMemory();
        return zl_handle_report_exception(h);
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        args[i] = Py_NewRef(h->args[i]);
    PyObject *callback = Py_NewRef(h->callback);
    h->running++;
    PyObject *res = zl_run_call(h->loop, callback, args, nargs, &h->context, &h->context_snapshot);
    h->running--;
    /* debug mode queues the runner in a handle of the adapter's */
    int runner_failed = res == NULL && zl_is_threadsafe_runner(h->loop, callback);
    Py_DECREF(callback);
    for (Py_ssize_t i = 0; i < nargs; i++)
        Py_DECREF(args[i]);
    if (args != inline_args)
        PyMem_Free(args);
    if (res != NULL) {
        Py_DECREF(res);
        return 0;
    }
    return runner_failed ? -1 : zl_handle_report_exception(h);
}

int zl_handle_run_in_batch(zl_handle *h)
{
    if (!h->loop->debug)
        return zl_handle_run(h);
    PyObject *r = PyObject_CallMethodObjArgs(
        (PyObject *)h->loop, h->loop->state->names._zl_run_debug, (PyObject *)h, NULL);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

int zl_handle_cancel(zl_handle *h)
{
    if (h->cancelled)
        return 0;
    Py_INCREF(h); /* cancelling may drop the last reference another owner held */
    h->cancelled = 1;
    /* asyncio keeps the repr of a cancelled handle in debug mode, so that
     * logs still name the callback once it is released. A repr that
     * raises makes cancel() raise there, the handle marked cancelled and
     * its callback and arguments still held. */
    if (h->loop->debug && (h->debug == NULL || h->debug->cancel_repr == NULL)) {
        PyObject *r = PyObject_Repr((PyObject *)h);
        zl_handle_debug *dbg = r ? zl_handle_debug_info(h) : NULL;
        if (dbg == NULL) {
            Py_XDECREF(r);
            Py_DECREF(h);
            return -1;
        }
        dbg->cancel_repr = r;
    }
    clear_call(h); /* a run in progress holds what it passes (zl_handle_run) */
    Py_DECREF(h);
    return 0;
}

zl_handle_debug *zl_handle_debug_info(zl_handle *h)
{
    if (h->debug == NULL) {
        h->debug = PyMem_Calloc(1, sizeof(zl_handle_debug));
        if (h->debug == NULL)
            PyErr_NoMemory();
    }
    return h->debug;
}

static void release_asyncio_slots(zl_handle *h)
{
    for (int i = 0; i < ZL_ASYNCIO_HANDLE_SLOTS; i++)
        Py_CLEAR(h->asyncio_slots[i]);
    for (int i = 0; i < ZL_ASYNCIO_TIMER_SLOTS; i++)
        Py_CLEAR(h->asyncio_timer_slots[i]);
}

/* asyncio's slots are NULL unless a program stored there through
 * asyncio's own member descriptors (handle.__class__.__mro__[1]._args
 * .__set__, say); one test for all of them keeps the common case short,
 * and small enough to be inlined where every handle passes. */
static inline int asyncio_slots_hold_any(const zl_handle *h)
{
    /* Written out, one `or` from memory per slot: gcc -O2 keeps a loop of
     * seven for the first array, and gcc 16 makes the expression a vector
     * reduction twice as long (SSE loads, shuffles and a move back), which
     * the empty asm after each term, a value it cannot see through, stops. */
    _Static_assert(ZL_ASYNCIO_HANDLE_SLOTS == 7 && ZL_ASYNCIO_TIMER_SLOTS == 2,
                   "one term per slot");
    PyObject *const *s = h->asyncio_slots, *const *t = h->asyncio_timer_slots;
    uintptr_t any = 0;
#define ZL_OR_SLOT(slot)          \
    do {                          \
        any |= (uintptr_t)(slot); \
        __asm__("" : "+r"(any));  \
    } while (0)
    ZL_OR_SLOT(s[0]);
    ZL_OR_SLOT(s[1]);
    ZL_OR_SLOT(s[2]);
    ZL_OR_SLOT(s[3]);
    ZL_OR_SLOT(s[4]);
    ZL_OR_SLOT(s[5]);
    ZL_OR_SLOT(s[6]);
    ZL_OR_SLOT(t[0]);
#undef ZL_OR_SLOT
    any |= (uintptr_t)t[1]; /* the last: its flags are the test */
    return any != 0;
}

static inline void clear_asyncio_slots(zl_handle *h)
{
    if (asyncio_slots_hold_any(h))
        release_asyncio_slots(h);
}

int zl_handle_traverse(zl_handle *h, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(h)); /* a heap type */
    for (int i = 0; i < ZL_ASYNCIO_HANDLE_SLOTS; i++)
        Py_VISIT(h->asyncio_slots[i]);
    for (int i = 0; i < ZL_ASYNCIO_TIMER_SLOTS; i++)
        Py_VISIT(h->asyncio_timer_slots[i]);
    Py_VISIT(h->loop);
    Py_VISIT(h->callback);
    Py_VISIT(h->context);
    if (h->debug != NULL) {
        Py_VISIT(h->debug->source_traceback);
        Py_VISIT(h->debug->cancel_repr);
    }
    for (Py_ssize_t i = 0; i < h->nargs; i++)
        Py_VISIT(h->args[i]);
    return 0;
}

int zl_handle_clear(zl_handle *h)
{
    clear_call(h);
    clear_asyncio_slots(h);
    PyObject *context = h->context;
    h->context = NULL;
    h->context_snapshot = 0;
    /* for the loop's next handle, if no one else can reach it */
    if (context != NULL)
        zl_context_recycle(h->loop, context);
    if (h->debug != NULL) {
        zl_handle_debug *dbg = h->debug;
        h->debug = NULL;
        Py_XDECREF(dbg->source_traceback);
        Py_XDECREF(dbg->cancel_repr);
        PyMem_Free(dbg);
    }
    Py_CLEAR(h->loop);
    return 0;
}

/* Whether h holds nothing tp_clear would release but its loop and
 * asyncio's slots: its call went to a ready entry (zl_ready_take_call,
 * what becomes of most call_soon handles) or cancel() released it, and
 * debug mode recorded nothing. */
static int holds_loop_only(const zl_handle *h)
{
    return h->callback == NULL && h->nargs == 0 && h->args == h->inline_args &&
           h->context == NULL && h->debug == NULL;
}

/* Back to the free list, or freed if that is full. */
static inline void pool_or_free(zl_handle_pool *pool, zl_handle *h)
{
    if (pool != NULL && pool->n < FREELIST_MAX &&
        (pool->items != NULL ||
         (pool->items = PyMem_Malloc(FREELIST_MAX * sizeof(zl_handle *))) != NULL))
        pool->items[pool->n++] = h; /* PyObject_Init takes a type reference again */
    else
        Py_TYPE(h)->tp_free((PyObject *)h);
}

/* free_handed_over's way when asyncio's slots hold something (stored
 * through asyncio's own member descriptors while a program held the
 * handle), whose release may run code, or its free list has no room: the
 * handle is not in the free list before they are released, and its loop
 * is released last. Apart, so that free_handed_over's usual way saves no
 * register. */
static __attribute__((noinline)) void free_handed_over_slowly(zl_handle *h)
{
    PyTypeObject *type = Py_TYPE(h);
    zl_loop *L = h->loop;
    h->loop = NULL;
    clear_asyncio_slots(h);
    pool_or_free(zl_pool_here(L) ? &L->callbacks.handle_pool : NULL, h);
    Py_DECREF(type);
    Py_DECREF(L);
}

/* The dealloc of a handle whose call zl_handle_hand_over gave to a ready
 * entry: what holds_loop_only's way does, without the steps for what the
 * hand-over's conditions rule out. Never tracked (made pending, and alone
 * since), no weak reference (alone), its type the loop's Handle, its call
 * the entry's: nothing to release but its type and its loop, and
 * asyncio's slots if they hold something. Its fields are left for the
 * next handle made from the free list to set (zl_handle_new_soon zeroes
 * them). */
ZL_ALWAYS_INLINE void free_handed_over(zl_handle *h)
{
    zl_loop *L = h->loop;
    zl_handle_pool *pool = &L->callbacks.handle_pool;
    /* a free-threaded build pools on the running loop's thread alone; the
     * collector's hook may hand over another loop's handle (pending.c) */
    if (!zl_pool_here(L) || asyncio_slots_hold_any(h) || pool->n >= FREELIST_MAX ||
        pool->items == NULL) {
        free_handed_over_slowly(h);
        return;
    }
    pool->items[pool->n++] = h; /* PyObject_Init takes a type reference again */
    Py_DECREF(Py_TYPE(h));
    Py_DECREF(L);
}

void zl_handle_free_handed_over(zl_handle *h) { free_handed_over(h); }

/* The dealloc of any other handle (zl_handle_dealloc): a handle dropped
 * by a program, run by the batch, a timer. */
static __attribute__((noinline)) void dealloc_held(zl_handle *h)
{
    PyObject_GC_UnTrack(h);
    if (*zl_handle_weakrefs(h) != NULL)
        PyObject_ClearWeakRefs((PyObject *)h);
    PyTypeObject *type = Py_TYPE(h);
    zl_loop *L = h->loop; /* alive until h is pooled: its reference becomes this call's */
    if (L != NULL && type == L->state->handle_type && holds_loop_only(h)) {
        /* what zl_handle_clear would do for such a handle, without its
         * steps for what is not there */
        h->loop = NULL;
        clear_asyncio_slots(h);
    } else {
        Py_XINCREF(L);
        type->tp_clear((PyObject *)h);
    }
    pool_or_free(L != NULL &&
                         (type == L->state->handle_type || type == L->state->timer_handle_type) &&
                         zl_pool_here(L)
                     ? pool_of(L, type)
                     : NULL,
                 h);
    Py_DECREF(type); /* an instance of a heap type holds a reference to it */
    Py_XDECREF(L);
}

void zl_handle_dealloc(zl_handle *h)
{
#if !ZL_DEALLOC_IS_TP_DEALLOC /* else zl_handle_hand_over frees it itself */
    if (h->handed_over) {     /* cleared when it is made again */
        free_handed_over(h);
        return;
    }
#endif
    dealloc_held(h);
}

/* A handle the collector cleared (tp_clear) is one whose objects a Python
 * program can still reach on 3.11-3.13: a weak reference made by a
 * finalizer of the same garbage, whose callback runs while the collector
 * clears the rest of it, reaches the handle through another weak
 * reference. asyncio's Handle is cleared there too (a class's tp_clear
 * clears its __slots__), and every read of one of its slots raises
 * AttributeError: cancel(), cancelled(), get_context(), _run(), repr(),
 * comparisons and when() all read one first. A cleared handle of ours
 * reads the same way, each read raising what asyncio's member descriptor
 * of that name raises on it (its slot beneath ours is NULL too:
 * zl_handle_clear cleared it), so that the message is the version's own.
 * NULL with that error set. */
PyObject *zl_handle_cleared_attribute(zl_handle *h, const char *name)
{
    PyObject *mro = Py_TYPE(h)->tp_mro;
    for (Py_ssize_t i = 0; mro != NULL && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *t = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        PyObject *descr = t->tp_dict ? PyDict_GetItemString(t->tp_dict, name) : NULL;
        if (descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
            Py_INCREF(descr);
            PyObject *r =
                Py_TYPE(descr)->tp_descr_get(descr, (PyObject *)h, (PyObject *)Py_TYPE(h));
            Py_DECREF(descr);
            return r;
        }
    }
    return PyErr_Format(PyExc_AttributeError, "'%.100s' object has no attribute '%s'",
                        Py_TYPE(h)->tp_name, name);
}

/* asyncio's Handle._run of a cleared handle, found on the type (the
 * handle's loop, and with it the module state, is gone): the first _run
 * in the MRO written in Python. */
static PyObject *run_cleared(zl_handle *h)
{
    PyObject *mro = Py_TYPE(h)->tp_mro;
    for (Py_ssize_t i = 0; mro != NULL && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *t = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        PyObject *run = t->tp_dict ? PyDict_GetItemString(t->tp_dict, "_run") : NULL;
        if (run != NULL && PyFunction_Check(run)) {
            Py_INCREF(run);
            PyObject *r = PyObject_CallOneArg(run, (PyObject *)h);
            Py_DECREF(run);
            return r;
        }
    }
    return zl_handle_cleared_attribute(h, "_context");
}

static PyObject *handle_cancel_method(zl_handle *h, PyObject *unused)
{
    if (zl_handle_is_cleared(h))
        return zl_handle_cleared_attribute(h, "_cancelled");
    /* a run in progress on the loop's thread reads the call cancel() releases */
    if (zl_check_owner(h->loop) < 0)
        return NULL;
    if (zl_handle_cancel(h) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *handle_cancelled(zl_handle *h, PyObject *unused)
{
    if (zl_handle_is_cleared(h))
        return zl_handle_cleared_attribute(h, "_cancelled");
    return PyBool_FromLong(h->cancelled);
}

static PyObject *handle_get_context(zl_handle *h, PyObject *unused)
{
    if (zl_handle_is_cleared(h))
        return zl_handle_cleared_attribute(h, "_context");
    if (zl_check_owner(h->loop) < 0) /* the loop's spare context may be taken */
        return NULL;
    if (h->context == NULL)
        Py_RETURN_NONE;
    if (own_context(h->loop, &h->context, &h->context_snapshot) < 0)
        return NULL;
    zl_context_escape(h->context);
    return Py_NewRef(h->context);
}

/* asyncio's Handle._run (the module state's), for a handle whose call is
 * released (cancelled): it does what asyncio's does then,
 * context.run(None, *None) failing and that failure reported, on every
 * version. A cleared handle: asyncio's _run too, whose reads of _context,
 * then _callback, raise (zl_handle_cleared_attribute). */
static PyObject *handle_run_method(zl_handle *h, PyObject *unused)
{
    if (zl_handle_is_cleared(h))
        return run_cleared(h);
    if (zl_check_owner(h->loop) < 0)
        return NULL;
    if (h->callback == NULL)
        return PyObject_CallOneArg(h->loop->state->asyncio_handle_run, (PyObject *)h);
    if (zl_handle_run(h) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *get_callback(zl_handle *h, void *c)
{
    if (zl_handle_is_cleared(h))
        return zl_handle_cleared_attribute(h, "_callback");
    return Py_NewRef(h->callback ? h->callback : Py_None);
}

PyObject *zl_handle_args(zl_handle *h) /* handle._args */
{
    if (h->callback == NULL && !h->args_kept)
        Py_RETURN_NONE;
    PyObject *t = PyTuple_New(h->nargs);
    if (t == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < h->nargs; i++)
        PyTuple_SET_ITEM(t, i, Py_NewRef(h->args[i]));
    return t;
}

static PyObject *get_args(zl_handle *h, void *c)
{
    if (zl_handle_is_cleared(h))
        return zl_handle_cleared_attribute(h, "_args");
    return zl_handle_args(h);
}

static PyObject *get_cancelled(zl_handle *h, void *c)
{
    if (zl_handle_is_cleared(h))
        return zl_handle_cleared_attribute(h, "_cancelled");
    return PyBool_FromLong(h->cancelled);
}
static PyObject *get_loop(zl_handle *h, void *c)
{
    if (zl_handle_is_cleared(h))
        return zl_handle_cleared_attribute(h, "_loop");
    return Py_NewRef(h->loop ? (PyObject *)h->loop : Py_None);
}
static PyObject *get_context(zl_handle *h, void *c) { return handle_get_context(h, NULL); }
static PyObject *get_repr(zl_handle *h, void *c)
{
    if (zl_handle_is_cleared(h))
        return zl_handle_cleared_attribute(h, "_repr");
    PyObject *r = h->debug ? h->debug->cancel_repr : NULL;
    return Py_NewRef(r ? r : Py_None);
}

static PyObject *get_source_traceback(zl_handle *h, void *c)
{
    if (zl_handle_is_cleared(h))
        return zl_handle_cleared_attribute(h, "_source_traceback");
    PyObject *tb = h->debug ? h->debug->source_traceback : NULL;
    return Py_NewRef(tb ? tb : Py_None);
}

static int set_source_traceback(zl_handle *h, PyObject *v, void *c)
{
    if (v == NULL || v == Py_None) {
        if (h->debug != NULL)
            Py_CLEAR(h->debug->source_traceback);
        return 0;
    }
    zl_handle_debug *dbg = zl_handle_debug_info(h);
    if (dbg == NULL)
        return -1;
    Py_XSETREF(dbg->source_traceback, Py_NewRef(v));
    return 0;
}

PyMethodDef zl_handle_methods[] = {
    {"cancel", (PyCFunction)handle_cancel_method, METH_NOARGS, "Cancel the callback."},
    {"cancelled", (PyCFunction)handle_cancelled, METH_NOARGS, "Whether cancel() was called."},
    {"get_context", (PyCFunction)handle_get_context, METH_NOARGS,
     "The context the callback runs in."},
    {"_run", (PyCFunction)handle_run_method, METH_NOARGS, "Run the callback now."},
    {NULL}};

PyGetSetDef zl_handle_getset[] = {
    {"_callback", (getter)get_callback, NULL, NULL, NULL},
    {"_args", (getter)get_args, NULL, NULL, NULL},
    {"_cancelled", (getter)get_cancelled, NULL, NULL, NULL},
    {"_loop", (getter)get_loop, NULL, NULL, NULL},
    {"_context", (getter)get_context, NULL, NULL, NULL},
    {"_repr", (getter)get_repr, NULL, NULL, NULL},
    {"_source_traceback", (getter)get_source_traceback, (setter)set_source_traceback, NULL, NULL},
    {NULL}};

/* Handle and TimerHandle are heap types, as classes defined in Python are:
 * messages then name them "Handle" and "TimerHandle", as asyncio's, while
 * __module__ is "zloopgo" (a static type has one only in a dotted name). */
static PyType_Slot handle_slots[] = {
    {Py_tp_doc, "A callback scheduled with call_soon(), as asyncio.Handle."},
    {Py_tp_dealloc, zl_handle_dealloc},
    {Py_tp_traverse, zl_handle_traverse},
    {Py_tp_clear, zl_handle_clear},
    {Py_tp_methods, zl_handle_methods},
    {Py_tp_getset, zl_handle_getset},
    {0, NULL}};

static PyType_Spec handle_spec = {
    .name = "zloopgo.Handle",
    .basicsize = sizeof(zl_handle),
    /* made by the loop alone: a handle made by calling the type would
     * have no loop */
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = handle_slots,
};

/* asyncio.events.<name>, checked to have the instance layout zl_handle
 * begins with (our fields at fields_at); NULL with ImportError set if not. */
static PyTypeObject *asyncio_handle_class(const char *name, Py_ssize_t fields_at)
{
    PyObject *events = PyImport_ImportModule("asyncio.events");
    if (events == NULL)
        return NULL;
    PyObject *base = PyObject_GetAttrString(events, name);
    Py_DECREF(events);
    if (base == NULL)
        return NULL;
    if (!PyType_Check(base)) {
        Py_DECREF(base);
        return (PyTypeObject *)PyErr_Format(PyExc_ImportError,
                                            "zloopgo: asyncio.events.%s is not a class", name);
    }
    PyTypeObject *t = (PyTypeObject *)base;
#if PY_VERSION_HEX < 0x030C0000
    int weakrefs_as_built = t->tp_weaklistoffset == offsetof(zl_handle, asyncio_weakreflist);
#else
    int weakrefs_as_built = (t->tp_flags & Py_TPFLAGS_MANAGED_WEAKREF) != 0;
#endif
    if (t->tp_basicsize != fields_at || !weakrefs_as_built) {
        PyErr_Format(PyExc_ImportError,
                     "zloopgo: asyncio.events.%s's instance layout (%zd bytes, weak references "
                     "at %zd) is not the one this build of zloopgo extends (%zd bytes)",
                     name, t->tp_basicsize, t->tp_weaklistoffset, fields_at);
        Py_DECREF(base);
        return NULL;
    }
    return t;
}

PyTypeObject *zl_handle_type_new(PyObject *module, PyType_Spec *spec, const char *name,
                                 Py_ssize_t fields_at)
{
    PyTypeObject *base = asyncio_handle_class(name, fields_at);
    if (base == NULL)
        return NULL;
    PyTypeObject *type = (PyTypeObject *)PyType_FromModuleAndSpec(module, spec, (PyObject *)base);
    Py_DECREF(base);
    /* tp_name without the module, as a class defined in Python has it
     * (setting __name__ does the same), for messages */
    if (type != NULL)
        type->tp_name = name;
    return type;
}

int zl_handle_type_made(PyObject *module, zl_module_state *state)
{
    state->handle_type = zl_handle_type_new(module, &handle_spec, "Handle",
                                            offsetof(zl_handle, asyncio_timer_slots));
    if (state->handle_type == NULL)
        return -1;
    /* the type's base is asyncio.events.Handle */
    state->asyncio_handle_run =
        PyObject_GetAttrString((PyObject *)state->handle_type->tp_base, "_run");
    return state->asyncio_handle_run == NULL ? -1 : 0;
}
