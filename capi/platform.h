/* The platform layer: what the adapter asks of the operating system, under
 * one set of names (zl_sys_*), so that no other file of capi/ names a
 * system call, a system header or a system's error constants. A platform
 * is a header of inline functions, chosen by the one #if below, and C
 * files that Go's build constraints pick (cgo compiles every .c file of
 * the package's folder its constraints accept: a _linux.c or _windows.c
 * suffix, or a //go:build line). Adding a platform is writing those files.
 *
 * It knows no loop, handle or transport, and nothing of CPython but the
 * OSError zl_sys_raise sets; this header itself needs no Python.h (the
 * worker pool, capi/workers.c, is built alone without it by
 * scripts/reliability/tsan_pool.c).
 *
 * What every platform provides (inline unless marked "out of line"):
 *
 *   The engine's poller, looked at and changed from C while zl_dispatch
 *   runs (core.Lookahead.Peek: an iteration the engine would only hand
 *   over then costs no crossing into Go). `poller` is the descriptor
 *   capi/engine.go hands over in zl_shared.poller_fd, -1 when the engine's
 *   reactor is not one this file can use; C calls these only for >= 0.
 *     zl_sys_poller_event        one event of a look, as the system reports it
 *     int zl_sys_poller_look(int poller, zl_sys_poller_event *seen, int room)
 *                                a zero-timeout wait: the events ready (at most
 *                                room), or -1 if it failed
 *     uint64_t zl_sys_poller_token(const zl_sys_poller_event *e)
 *                                the token the engine registered (the descriptor,
 *                                or core/poll.ReservedToken for its waker)
 *     uint32_t zl_sys_poller_interest(const zl_sys_poller_event *e)
 *                                what is ready, as the engine reports it (1
 *                                readable, 2 writable; an error or hang-up both)
 *     int zl_sys_poller_watch(int poller, int fd, uint32_t old, uint32_t new,
 *                             int64_t *watched, int32_t *changed)
 *                                fd's interest from old to new (0: not watched),
 *                                as the engine's backend makes the change: 0 or the
 *                                error (a removal of a descriptor already gone is
 *                                none); the change to the count of descriptors
 *                                watched added to *watched and *changed
 *   Sockets, for a descriptor in non-blocking mode; each call is one system
 *   call: -1 with the error in zl_sys_error() when it fails. The header also
 *   declares the BSD socket API's types, constants and calls the adapter uses
 *   as they are (sockaddr_storage, socklen_t, AF_*, SOCK_*, getaddrinfo,
 *   getnameinfo, inet_ntop, ntohs, EAI_SYSTEM: a value never returned where
 *   getaddrinfo has none).
 *     zl_sys_socket              what a socket object keeps its socket in
 *                                (CPython's SOCKET_T), read by zl_socket_head
 *     const char *zl_sys_gai_message(int code)   a getaddrinfo/getnameinfo
 *                                error's message, as socket.gaierror gives it
 *     ptrdiff_t zl_sys_recv(int fd, void *buf, size_t len)
 *     ptrdiff_t zl_sys_send(int fd, const void *buf, size_t len)
 *     ptrdiff_t zl_sys_send_nosignal(int fd, const void *buf, size_t len)
 *                                a closed peer is an error, never a signal
 *     ZL_SYS_GATHER_MAX, zl_sys_gather, zl_sys_gather_set(g, buf, len),
 *     ptrdiff_t zl_sys_send_gather_nosignal(int fd, const zl_sys_gather *bufs, int n)
 *                                optional (POSIX only): one send of up to
 *                                ZL_SYS_GATHER_MAX buffers, as sendmsg(2)
 *     ptrdiff_t zl_sys_recvfrom(int fd, void *buf, size_t len,
 *                               struct sockaddr_storage *from, socklen_t *from_len)
 *     ptrdiff_t zl_sys_sendto(int fd, const void *buf, size_t len,
 *                             const struct sockaddr_storage *to, socklen_t to_len)
 *   Errors
 *     int zl_sys_error(void)     the error of the calling thread's last failed call
 *     int zl_sys_would_block(int err)   the call would have waited
 *     int zl_sys_interrupted(int err)   a signal interrupted it: make it again
 *     void zl_sys_raise(int err) (out of line) sets Python's OSError for err, as
 *                                the socket and os modules raise it
 *   Clock
 *     int64_t zl_sys_monotonic_ns(void)  time.monotonic()'s clock, and Go's
 *                                (core.Now), in nanoseconds
 *     double zl_sys_clock_resolution(void)   its resolution in seconds
 *     void zl_sys_sleep_us(long us)
 *   Threads
 *     zl_sys_mutex, ZL_SYS_MUTEX_INIT, zl_sys_mutex_lock, zl_sys_mutex_unlock
 *     zl_sys_cond, ZL_SYS_COND_INIT, zl_sys_cond_wait, zl_sys_cond_signal,
 *       zl_sys_cond_broadcast
 *     zl_sys_deadline, zl_sys_deadline_after(int64_t ns),
 *       int zl_sys_cond_wait_until(cond, mutex, const zl_sys_deadline *)
 *                                1 once the deadline passed
 *     zl_sys_once, ZL_SYS_ONCE_INIT, zl_sys_call_once(once, fn)
 *     int zl_sys_at_fork(before, in_parent, in_child)   0, or the error; a
 *                                system without fork() has nothing to do
 *     void zl_sys_loaded(void) (out of line) the module is initialized: the
 *                                loading thread gets back what the platform
 *                                changed for Go's runtime as the library loaded
 *                                (on POSIX, the signal mask its threads inherit)
 *
 * capi/platformtest checks these calls from Go, the poller's against the
 * engine's own backend; a new platform passes it too.
 *
 * The platforms:
 *   platform_unix.h, platform_unix.c (//go:build unix): sockets, errors,
 *     clock, threads, the signal mask of Go's threads: POSIX, shared
 *   platform_linux.h: epoll, as core/epoll uses it; CLOCK_MONOTONIC
 *   platform_kqueue.h: macOS and the BSDs: core/kqueue hands out no poller
 *     to look at (no Peek), so C never makes a look or a change there;
 *     macOS's CLOCK_UPTIME_RAW
 *   platform_windows.h, platform_windows.c (//go:build windows): Winsock
 *     for the sockets (a SOCKET's value as the descriptor, WSAGetLastError()
 *     as zl_sys_error, WSAEWOULDBLOCK and WSAEINTR, a plain send: Windows
 *     sends no SIGPIPE), zl_sys_raise as the socket module raises a Winsock
 *     error (winerror), QueryPerformanceCounter for the clock as
 *     time.monotonic() reads it, SRWLOCK, CONDITION_VARIABLE and
 *     InitOnceExecuteOnce for the threads, no fork handlers, nothing done
 *     at load; a poller C cannot look at (core/iocp's AFD polls have no
 *     zero-timeout look: the engine makes every wait, as on kqueue).
 *     Descriptors stay C ints throughout the adapter (a socket object's,
 *     the descriptor table's index in fds.c): a SOCKET's value, which
 *     Windows keeps small, fits; zl_sys_socket is what a socket object
 *     holds (zl_socket_head).
 *
 * Outside this layer, with a part per platform of their own: the file
 * operations' system calls (files_posix.c, files_windows.c, behind
 * files.h), and capi/waker, a package of its own with its Windows
 * branch. */
#ifndef ZL_PLATFORM_H
#define ZL_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

#if defined(__linux__)
#include "platform_linux.h"
#include "platform_unix.h"
#elif defined(__APPLE__) || defined(__FreeBSD__) || defined(__NetBSD__) || defined(__OpenBSD__) || \
    defined(__DragonFly__)
#include "platform_kqueue.h"
#include "platform_unix.h"
#elif defined(_WIN32)
#include "platform_windows.h"
#else
#error "capi/platform.h: no platform layer for this system (the list is above)"
#endif

/* Out of line, in the platform's C file. */
void zl_sys_raise(int err);
void zl_sys_loaded(void);

#endif
