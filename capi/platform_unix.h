/* The POSIX part of the platform layer (capi/platform.h), shared by Linux,
 * macOS and the BSDs: sockets, errors, the clock, threads. Inline, because
 * a transport's read and write and a datagram's receive and send are a
 * system call each, made on every round trip: a call to reach them would
 * add to what each costs. The OS header chosen before this one
 * (platform_linux.h, platform_kqueue.h) names the monotonic clock.
 *
 * It knows the system calls; nothing of loops or Python. */
#ifndef ZL_PLATFORM_UNIX_H
#define ZL_PLATFORM_UNIX_H

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

/* ---- sockets ---- */

/* What CPython's socket object keeps a socket in (SOCKET_T): the field
 * zl_socket_head (zl.h) reads. */
typedef int zl_sys_socket;

static inline ptrdiff_t zl_sys_recv(int fd, void *buf, size_t len) { return recv(fd, buf, len, 0); }

static inline ptrdiff_t zl_sys_send(int fd, const void *buf, size_t len)
{
    return send(fd, buf, len, 0);
}

/* MSG_NOSIGNAL: a closed peer is an error of this call, never a SIGPIPE,
 * whatever the process's SIGPIPE setting. */
static inline ptrdiff_t zl_sys_send_nosignal(int fd, const void *buf, size_t len)
{
    return send(fd, buf, len, MSG_NOSIGNAL);
}

/* One gathering send of n buffers (at most ZL_SYS_GATHER_MAX), with
 * MSG_NOSIGNAL as above: what asyncio's writelines sends with
 * socket.sendmsg. Only platforms with such a call define ZL_SYS_GATHER_MAX;
 * writelines stays asyncio's elsewhere. */
#define ZL_SYS_GATHER_MAX 64
typedef struct iovec zl_sys_gather;
static inline void zl_sys_gather_set(zl_sys_gather *g, const void *buf, size_t len)
{
    g->iov_base = (void *)buf;
    g->iov_len = len;
}
static inline ptrdiff_t zl_sys_send_gather_nosignal(int fd, const zl_sys_gather *bufs, int n)
{
    struct msghdr msg = {.msg_iov = (struct iovec *)bufs, .msg_iovlen = n};
    return sendmsg(fd, &msg, MSG_NOSIGNAL);
}

static inline ptrdiff_t zl_sys_recvfrom(int fd, void *buf, size_t len,
                                        struct sockaddr_storage *from, socklen_t *from_len)
{
    return recvfrom(fd, buf, len, 0, (struct sockaddr *)from, from_len);
}

static inline ptrdiff_t zl_sys_sendto(int fd, const void *buf, size_t len,
                                      const struct sockaddr_storage *to, socklen_t to_len)
{
    return sendto(fd, buf, len, 0, (const struct sockaddr *)to, to_len);
}

/* The message of getaddrinfo's or getnameinfo's error code, as the socket
 * module's gaierror gives it. */
static inline const char *zl_sys_gai_message(int code) { return gai_strerror(code); }

/* ---- errors ---- */

static inline int zl_sys_error(void) { return errno; }

static inline int zl_sys_would_block(int err) { return err == EAGAIN || err == EWOULDBLOCK; }

static inline int zl_sys_interrupted(int err) { return err == EINTR; }

/* ---- the clock ---- */

static inline int64_t zl_sys_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(ZL_SYS_MONOTONIC_CLOCK, &ts);
    /* the same conversion as time.monotonic() and core.Now() */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline double zl_sys_clock_resolution(void)
{
    struct timespec res;
    return clock_getres(ZL_SYS_MONOTONIC_CLOCK, &res) == 0 ? res.tv_sec + res.tv_nsec * 1e-9 : 1e-9;
}

static inline void zl_sys_sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* ---- threads ---- */

typedef pthread_mutex_t zl_sys_mutex;
#define ZL_SYS_MUTEX_INIT PTHREAD_MUTEX_INITIALIZER

static inline void zl_sys_mutex_lock(zl_sys_mutex *m) { pthread_mutex_lock(m); }

static inline void zl_sys_mutex_unlock(zl_sys_mutex *m) { pthread_mutex_unlock(m); }

typedef pthread_cond_t zl_sys_cond;
#define ZL_SYS_COND_INIT PTHREAD_COND_INITIALIZER

static inline void zl_sys_cond_wait(zl_sys_cond *c, zl_sys_mutex *m) { pthread_cond_wait(c, m); }

static inline void zl_sys_cond_signal(zl_sys_cond *c) { pthread_cond_signal(c); }

static inline void zl_sys_cond_broadcast(zl_sys_cond *c) { pthread_cond_broadcast(c); }

/* A point in time a wait ends at: CLOCK_REALTIME, pthread_cond_timedwait's. */
typedef struct timespec zl_sys_deadline;

static inline zl_sys_deadline zl_sys_deadline_after(int64_t ns)
{
    zl_sys_deadline d;
    clock_gettime(CLOCK_REALTIME, &d);
    d.tv_sec += ns / 1000000000;
    d.tv_nsec += ns % 1000000000;
    if (d.tv_nsec >= 1000000000) {
        d.tv_sec++;
        d.tv_nsec -= 1000000000;
    }
    return d;
}

/* Waits on c (m held) until signalled or d has passed: 1 once it has. */
static inline int zl_sys_cond_wait_until(zl_sys_cond *c, zl_sys_mutex *m, const zl_sys_deadline *d)
{
    return pthread_cond_timedwait(c, m, d) == ETIMEDOUT;
}

typedef pthread_once_t zl_sys_once;
#define ZL_SYS_ONCE_INIT PTHREAD_ONCE_INIT

static inline void zl_sys_call_once(zl_sys_once *once, void (*fn)(void)) { pthread_once(once, fn); }

/* Handlers fork() runs in the forking thread before it, then in the parent
 * and in the child after it. 0, or the error. */
static inline int zl_sys_at_fork(void (*before)(void), void (*in_parent)(void),
                                 void (*in_child)(void))
{
    return pthread_atfork(before, in_parent, in_child);
}

#endif
