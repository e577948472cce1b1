/* Waking the loop from another thread (call_soon_threadsafe) the way the
 * reactor backend in use needs it, without a call into Go: a crossing per
 * call_soon_threadsafe would cost more than the wake itself, and a thread
 * Go has never seen would make the runtime set it up first.
 *
 * It knows the kinds of core/poll.WakeHandle and the system call each one
 * takes; nothing of loops, Python or the engine. Each kind is compiled
 * only on the platforms whose backend hands it out (a waker of another
 * kind cannot reach this process). */
#include "waker.h"

#if defined(__linux__)
#include <unistd.h>
#elif defined(__APPLE__) || defined(__FreeBSD__) || defined(__NetBSD__) || defined(__OpenBSD__) || \
    defined(__DragonFly__)
#define ZL_HAVE_KQUEUE 1
#include <sys/types.h>
#include <sys/event.h>
#include <sys/time.h>
#elif defined(_WIN32)
#include <windows.h>
#endif

void zl_waker_wake(const void *waker)
{
    const zl_waker *w = waker;
    if (w == NULL)
        return;
    switch (w->kind) {
#if defined(__linux__)
    case ZL_WAKE_EVENTFD: {
        uint64_t one = 1;
        ssize_t r = write((int)w->handle, &one, sizeof one);
        (void)r; /* EAGAIN: the counter is full, a wake-up is pending */
        break;
    }
#elif defined(ZL_HAVE_KQUEUE)
    case ZL_WAKE_KQUEUE_USER: {
        /* The backend added the event with EV_CLEAR: triggering it twice
         * before the loop waits reports it once. */
        struct kevent ev;
        EV_SET(&ev, w->ident, EVFILT_USER, 0, NOTE_TRIGGER, 0, 0);
        (void)kevent((int)w->handle, &ev, 1, NULL, 0, NULL);
        break;
    }
#elif defined(_WIN32)
    case ZL_WAKE_IOCP:
        /* The backend recognises the key and reports no event for it. */
        (void)PostQueuedCompletionStatus((HANDLE)w->handle, 0, (ULONG_PTR)w->ident, NULL);
        break;
#endif
    default: /* ZL_WAKE_NONE */
        break;
    }
}
