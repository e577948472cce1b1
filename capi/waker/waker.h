/* How a thread that is not the loop's wakes the loop while it blocks in
 * the reactor, without calling into Go: what core/poll.WakeHandle
 * describes, done in C. The extension's C calls zl_waker_wake from
 * call_soon_threadsafe; the engine makes the waker (waker.go). */
#ifndef ZL_WAKER_H
#define ZL_WAKER_H

#include <stdint.h>

/* The kinds of core/poll.WakeKind, with the same values (waker.go checks
 * them at compile time). */
enum {
    ZL_WAKE_NONE = 0,        /* nothing to wake */
    ZL_WAKE_EVENTFD = 1,     /* Linux: write 8 bytes to the eventfd `handle` */
    ZL_WAKE_KQUEUE_USER = 2, /* macOS, BSD: trigger EVFILT_USER `ident` on kqueue `handle` */
    ZL_WAKE_IOCP = 3,        /* Windows: post completion key `ident` to port `handle` */
};

typedef struct {
    uint32_t kind;
    uintptr_t handle;
    uintptr_t ident;
} zl_waker;

/* Wakes the reactor `waker` (a zl_waker, or NULL for none) belongs to;
 * safe from any thread, without the GIL. A wake-up already pending absorbs
 * this one. The argument is untyped so that callers need only this
 * prototype, not the layout. */
void zl_waker_wake(const void *waker);

#endif
