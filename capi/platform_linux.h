/* Linux's part of the platform layer (capi/platform.h): the engine's
 * epoll descriptor looked at and changed from C as core/epoll uses it, and
 * the clock time.monotonic() reads. Inline: a look is made about once per
 * iteration a batch runs alone, and each costs what epoll_wait costs.
 *
 * It knows core/epoll's conventions (the descriptor as its token,
 * level-triggered EPOLLIN and EPOLLOUT, fromEpoll's reading of events);
 * nothing of loops or Python. */
#ifndef ZL_PLATFORM_LINUX_H
#define ZL_PLATFORM_LINUX_H

#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <time.h>

/* time.monotonic()'s clock, which the Go runtime's nanotime reads too. */
#define ZL_SYS_MONOTONIC_CLOCK CLOCK_MONOTONIC

typedef struct epoll_event zl_sys_poller_event;

/* The engine's zero-timeout wait, made on its epoll descriptor
 * (core/poll.PeekEpoll): the events ready, at most room, or -1 (EINTR). */
static inline int zl_sys_poller_look(int poller, zl_sys_poller_event *seen, int room)
{
    return epoll_wait(poller, seen, room, 0);
}

static inline uint64_t zl_sys_poller_token(const zl_sys_poller_event *e) { return e->data.u64; }

/* epoll's event bits as the engine's interest bits, as core/epoll reports
 * them (fromEpoll): an error or hang-up makes both sides ready. */
static inline uint32_t zl_sys_poller_interest(const zl_sys_poller_event *e)
{
    uint32_t in = 0;
    if (e->events & ~(uint32_t)EPOLLIN)
        in |= 2; /* poll.Writable */
    if (e->events & ~(uint32_t)EPOLLOUT)
        in |= 1; /* poll.Readable */
    return in;
}

/* fd's interest from old to new (1 readable, 2 writable; 0 not watched;
 * old != new) made as core/epoll makes it: the descriptor as its token,
 * EPOLLIN for reading, EPOLLOUT for writing, a removal the kernel refuses
 * with ENOENT or EBADF not an error, the descriptor no longer counted
 * whatever the kernel said. 0 or the errno; the change to the count of
 * descriptors watched is added to *watched and to *changed. */
static inline int zl_sys_poller_watch(int poller, int fd, uint32_t old, uint32_t new,
                                      int64_t *watched, int32_t *changed)
{
    struct epoll_event ev = {.events = ((new & 1u) ? EPOLLIN : 0u) | ((new & 2u) ? EPOLLOUT : 0u),
                             .data.u64 = (uint64_t)fd};
    int op = old == 0 ? EPOLL_CTL_ADD : new == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
    int err = epoll_ctl(poller, op, fd, &ev) < 0 ? errno : 0;
    int delta = op == EPOLL_CTL_ADD ? err == 0 : op == EPOLL_CTL_DEL ? -1 : 0;
    *watched += delta;
    *changed += delta;
    if (op == EPOLL_CTL_DEL && (err == ENOENT || err == EBADF))
        err = 0;
    return err;
}

#endif
