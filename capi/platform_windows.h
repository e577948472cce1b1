/* Windows's part of the platform layer (capi/platform.h): Winsock for the
 * sockets, QueryPerformanceCounter for the clock (GetTickCount64 for
 * CPython 3.10-3.12), slim reader/writer locks, condition variables and
 * one-time initialization for the threads, and a poller C cannot look at.
 * Inline for the same reason as platform_unix.h: a transport's read and
 * write are one system call each.
 *
 * The engine's reactor here is core/iocp: readiness from IOCTL_AFD_POLL
 * completions on an I/O completion port. It hands out no poller C could
 * wait on with a zero timeout (core/poll.PeekNone), so capi/engine.go
 * gives C no descriptor (zl_shared.poller_fd is -1), the engine makes every
 * wait and every change of interest, and C never calls the poller
 * functions (platform_nopoller.h's).
 *
 * A descriptor is a SOCKET's value, kept in a C int as the rest of the
 * adapter keeps descriptors (Windows allocates small handle values, and
 * INVALID_SOCKET reads as -1). Errors are Winsock's (WSAGetLastError),
 * which zl_sys_raise turns into the OSError the socket module raises.
 *
 * It knows the Win32 and Winsock calls; nothing of loops or Python. */
#ifndef ZL_PLATFORM_WINDOWS_H
#define ZL_PLATFORM_WINDOWS_H

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the engine's poller: none C can use ---- */
#include "platform_nopoller.h"

/* ---- sockets ---- */

/* What CPython's socket object keeps a socket in (SOCKET_T): the field
 * zl_socket_head (zl.h) reads. */
typedef SOCKET zl_sys_socket;

/* Winsock's calls take an int length: a larger buffer is served in part,
 * as a short read or write is on any system. */
static inline int zl_sys_io_len(size_t len) { return len > INT_MAX ? INT_MAX : (int)len; }

static inline ptrdiff_t zl_sys_recv(int fd, void *buf, size_t len)
{
    return recv((SOCKET)fd, (char *)buf, zl_sys_io_len(len), 0);
}

static inline ptrdiff_t zl_sys_send(int fd, const void *buf, size_t len)
{
    return send((SOCKET)fd, (const char *)buf, zl_sys_io_len(len), 0);
}

/* Windows sends no signal for a closed peer: a plain send. */
static inline ptrdiff_t zl_sys_send_nosignal(int fd, const void *buf, size_t len)
{
    return zl_sys_send(fd, buf, len);
}

static inline ptrdiff_t zl_sys_recvfrom(int fd, void *buf, size_t len,
                                        struct sockaddr_storage *from, socklen_t *from_len)
{
    return recvfrom((SOCKET)fd, (char *)buf, zl_sys_io_len(len), 0, (struct sockaddr *)from,
                    from_len);
}

static inline ptrdiff_t zl_sys_sendto(int fd, const void *buf, size_t len,
                                      const struct sockaddr_storage *to, socklen_t to_len)
{
    return sendto((SOCKET)fd, (const char *)buf, zl_sys_io_len(len), 0, (const struct sockaddr *)to,
                  to_len);
}

/* Windows' getaddrinfo reports Winsock's codes and has no EAI_SYSTEM
 * (errno in the C library's): a value it never returns. */
#define EAI_SYSTEM INT_MIN

/* The message of getaddrinfo's or getnameinfo's error code, as the socket
 * module's gaierror gives it: Windows' CPython is built without
 * gai_strerror (PC/pyconfig.h has no HAVE_GAI_STRERROR) and says this
 * whatever the code. */
static inline const char *zl_sys_gai_message(int code)
{
    (void)code;
    return "getaddrinfo failed";
}

/* ---- errors ---- */

static inline int zl_sys_error(void) { return WSAGetLastError(); }

static inline int zl_sys_would_block(int err) { return err == WSAEWOULDBLOCK; }

static inline int zl_sys_interrupted(int err) { return err == WSAEINTR; }

/* ---- the clock ---- */

#ifndef ZL_SYS_CLOCK_TICKCOUNT64
/* time.monotonic()'s clock on Windows from CPython 3.13 on, and core.Now()'s
 * there (core/clock_windows.go): QueryPerformanceCounter, converted to
 * nanoseconds as CPython converts it (whole seconds, then the remainder,
 * so that the product cannot overflow). */
static inline int64_t zl_sys_monotonic_ns(void)
{
    LARGE_INTEGER ticks, frequency;
    QueryPerformanceCounter(&ticks);
    QueryPerformanceFrequency(&frequency);
    int64_t f = frequency.QuadPart;
    return ticks.QuadPart / f * 1000000000 + ticks.QuadPart % f * 1000000000 / f;
}

static inline double zl_sys_clock_resolution(void)
{
    LARGE_INTEGER frequency;
    QueryPerformanceFrequency(&frequency);
    return 1.0 / (double)frequency.QuadPart;
}
#else
/* CPython 3.10-3.12's time.monotonic() on Windows, and core.Now()'s in a
 * build with the zloopgo_tickcount64 tag (core/clock_windows_tickcount64.go;
 * capi/clock_tickcount64_windows.go defines ZL_SYS_CLOCK_TICKCOUNT64):
 * GetTickCount64's milliseconds in nanoseconds, as CPython converts them. */
static inline int64_t zl_sys_monotonic_ns(void) { return (int64_t)GetTickCount64() * 1000000; }

/* What those versions report as its resolution: the clock interrupt's
 * period (GetSystemTimeAdjustment's increment, in 100 ns units). */
static inline double zl_sys_clock_resolution(void)
{
    DWORD adjustment, increment;
    BOOL disabled;
    if (!GetSystemTimeAdjustment(&adjustment, &increment, &disabled))
        return 1e-3;
    return increment * 1e-7;
}
#endif

static inline void zl_sys_sleep_us(long us) { Sleep((DWORD)((us + 999) / 1000)); }

/* ---- threads ---- */

typedef SRWLOCK zl_sys_mutex;
#define ZL_SYS_MUTEX_INIT SRWLOCK_INIT

static inline void zl_sys_mutex_lock(zl_sys_mutex *m) { AcquireSRWLockExclusive(m); }

static inline void zl_sys_mutex_unlock(zl_sys_mutex *m) { ReleaseSRWLockExclusive(m); }

typedef CONDITION_VARIABLE zl_sys_cond;
#define ZL_SYS_COND_INIT CONDITION_VARIABLE_INIT

static inline void zl_sys_cond_wait(zl_sys_cond *c, zl_sys_mutex *m)
{
    SleepConditionVariableSRW(c, m, INFINITE, 0);
}

static inline void zl_sys_cond_signal(zl_sys_cond *c) { WakeConditionVariable(c); }

static inline void zl_sys_cond_broadcast(zl_sys_cond *c) { WakeAllConditionVariable(c); }

/* A point in time a wait ends at, on the monotonic clock above. */
typedef int64_t zl_sys_deadline;

static inline zl_sys_deadline zl_sys_deadline_after(int64_t ns)
{
    return zl_sys_monotonic_ns() + ns;
}

/* Waits on c (m held) until signalled or d has passed: 1 once it has. */
static inline int zl_sys_cond_wait_until(zl_sys_cond *c, zl_sys_mutex *m, const zl_sys_deadline *d)
{
    int64_t left = *d - zl_sys_monotonic_ns();
    if (left <= 0)
        return 1;
    /* whole milliseconds, rounded up so that the wait does not end early */
    DWORD ms = left / 1000000 >= INFINITE ? INFINITE - 1 : (DWORD)((left + 999999) / 1000000);
    if (SleepConditionVariableSRW(c, m, ms, 0))
        return 0;
    return zl_sys_monotonic_ns() >= *d;
}

typedef INIT_ONCE zl_sys_once;
#define ZL_SYS_ONCE_INIT INIT_ONCE_STATIC_INIT

static BOOL CALLBACK zl_sys_once_trampoline(PINIT_ONCE once, PVOID fn, PVOID *context)
{
    (void)once, (void)context;
    ((void (*)(void))fn)();
    return TRUE;
}

static inline void zl_sys_call_once(zl_sys_once *once, void (*fn)(void))
{
    InitOnceExecuteOnce(once, zl_sys_once_trampoline, (PVOID)fn, NULL);
}

/* No fork() on Windows: nothing to run around it. */
static inline int zl_sys_at_fork(void (*before)(void), void (*in_parent)(void),
                                 void (*in_child)(void))
{
    (void)before, (void)in_parent, (void)in_child;
    return 0;
}

#endif
