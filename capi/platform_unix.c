//go:build unix

/* The POSIX platform's out-of-line part (capi/platform.h): the OSError of
 * an errno, and the signal mask the Go runtime's threads are made with.
 *
 * It knows CPython's OSError and the signals a process is sent; no loop,
 * handle or transport. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <signal.h>
#include "platform.h"

/* As the socket and os modules raise it: OSError's subclass for the errno. */
void zl_sys_raise(int err)
{
    errno = err;
    PyErr_SetFromErrno(PyExc_OSError);
}

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
static sigset_t loader_mask; /* the loading thread's own, given back by zl_sys_loaded */
static int loader_mask_saved;

/* Runs when the library is loaded, before the Go runtime's own start (its
 * entry is an unprioritized initializer; this one has a priority, which
 * linkers order first): the thread loading the library blocks those
 * signals, so the thread the runtime starts on inherits the mask, and
 * every thread it makes later (Go gives each the mask it started with,
 * less the signals it needs). The loading thread gets its own mask back
 * as soon as the module initializes (zl_sys_loaded). */
__attribute__((constructor(101))) static void keep_process_signals_off_go_threads(void)
{
    sigset_t block;
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof process_signals / sizeof process_signals[0]; i++)
        sigaddset(&block, process_signals[i]);
    loader_mask_saved = pthread_sigmask(SIG_BLOCK, &block, &loader_mask) == 0;
}

void zl_sys_loaded(void)
{
    if (loader_mask_saved)
        pthread_sigmask(SIG_SETMASK, &loader_mask, NULL);
    loader_mask_saved = 0;
}
