/* The engine's poller where C cannot use it: on the platforms whose
 * reactor hands out nothing to look at with a zero timeout
 * (core/poll.PeekNone: core/kqueue, core/iocp), capi/engine.go gives C no
 * descriptor (zl_shared.poller_fd is -1), the engine makes every wait and
 * every change of interest itself, and C never calls these; they answer as
 * a poller that cannot be used would. Included by platform_kqueue.h and
 * platform_windows.h.
 *
 * It knows the poller calls' contract in capi/platform.h; nothing of any
 * system. */
#ifndef ZL_PLATFORM_NOPOLLER_H
#define ZL_PLATFORM_NOPOLLER_H

#include <errno.h>
#include <stdint.h>

typedef struct {
    uint64_t token;
    uint32_t interest;
} zl_sys_poller_event;

static inline int zl_sys_poller_look(int poller, zl_sys_poller_event *seen, int room)
{
    (void)poller, (void)seen, (void)room;
    return -1; /* the engine makes the wait */
}

static inline uint64_t zl_sys_poller_token(const zl_sys_poller_event *e) { return e->token; }

static inline uint32_t zl_sys_poller_interest(const zl_sys_poller_event *e) { return e->interest; }

static inline int zl_sys_poller_watch(int poller, int fd, uint32_t old, uint32_t new,
                                      int64_t *watched, int32_t *changed)
{
    (void)poller, (void)fd, (void)old, (void)new, (void)watched, (void)changed;
    return ENOSYS;
}

#endif
