/* What the adapter holds for the whole process, set once and then only
 * read: the fork guard, the signal mask Go's threads start with, and the
 * pieces of asyncio and of zloopgo's Python edge the native code calls
 * (installed at import by zloopgo/_loop.py).
 *
 * Loading the extension starts a Go runtime, which does not survive
 * fork(): a child forked afterwards must never call into Go (it could
 * hang). The pthread_atfork handler marks such a child, and every entry
 * into Go checks the mark first and raises RuntimeError instead.
 *
 * Layer 2 (capi/zl.h): it knows no loop, handle or transport. */
#include "zl.h"
#include <pthread.h>
#include <signal.h>

int zl_forked_child;

static void mark_forked_child(void) { zl_forked_child = 1; }

/* The signals a process is sent (by kill, a terminal, a timer, a child's
 * exit) that Python may handle, which the kernel delivers to any thread
 * not blocking them: on Linux to the main thread first, elsewhere to any.
 * Python runs its handlers on the main thread only, and a signal taken by
 * another thread does not interrupt the main thread's wait. Go's runtime
 * threads block them, so that those signals reach the threads asyncio's
 * program has (the loop's among them), as without zloopgo: no wakeup
 * descriptor is needed for Ctrl+C to end a wait in the poller (asyncio
 * sets none without a signal handler, and neither does zloopgo).
 * Synchronous signals, SIGPIPE, SIGURG (Go's preemption) and SIGPROF (its
 * profiler) stay as Go needs them, and Go unblocks SIGCHLD on its threads
 * whatever they start with: a handler of it set with add_signal_handler
 * (asyncio's child watchers) wakes the loop through the wakeup descriptor
 * asyncio sets then. */
static const int process_signals[] = {SIGHUP,  SIGINT,   SIGQUIT,   SIGTERM, SIGUSR1, SIGUSR2,
                                      SIGALRM, SIGWINCH, SIGVTALRM, SIGTSTP, SIGTTIN, SIGTTOU};
static sigset_t loader_mask; /* the loading thread's own, given back by zl_runtime_loaded */
static int loader_mask_saved;

/* Runs when the library is loaded, before the Go runtime's own start (its
 * entry is an unprioritized initializer; this one has a priority, which
 * linkers order first): the thread loading the library blocks those
 * signals, so the thread the runtime starts on inherits the mask, and
 * every thread it makes later (Go gives each the mask it started with,
 * less the signals it needs). The loading thread gets its own mask back
 * as soon as the module initializes (zl_runtime_loaded). */
__attribute__((constructor(101))) static void keep_process_signals_off_go_threads(void)
{
    sigset_t block;
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof process_signals / sizeof process_signals[0]; i++)
        sigaddset(&block, process_signals[i]);
    loader_mask_saved = pthread_sigmask(SIG_BLOCK, &block, &loader_mask) == 0;
}

void zl_runtime_loaded(void)
{
    if (loader_mask_saved)
        pthread_sigmask(SIG_SETMASK, &loader_mask, NULL);
    loader_mask_saved = 0;
}

int zl_runtime_init(void)
{
    if (pthread_atfork(NULL, NULL, mark_forked_child) != 0) {
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
    if (!PyArg_ParseTuple(args, "OOO", &futures, &tasks, &base_create_task))
        return NULL;
    zl_module_state *state = PyModule_GetState(mod);
    Py_XSETREF(state->futures_module, Py_NewRef(futures));
    Py_XSETREF(state->tasks_module, Py_NewRef(tasks));
    Py_XSETREF(state->base_create_task, Py_NewRef(base_create_task));
    Py_RETURN_NONE;
}

PyObject *zl_forked_child_flag(PyObject *mod, PyObject *unused)
{
    return PyBool_FromLong(zl_forked_child);
}
