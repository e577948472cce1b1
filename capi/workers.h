/* The one pool of worker threads (capi/workers.c) that name lookups
 * (capi/resolver.c) and file operations (capi/files.c) hand their blocking
 * calls to. No CPython types appear here: the pool never touches Python,
 * and scripts/reliability/tsan_pool.c builds it alone, under ThreadSanitizer.
 *
 * A piece of work is a zl_work at the start of its owner's structure. Its
 * kind says which bound it counts against, how a worker performs it and how
 * it is freed when its loop closed before it finished. The pool hands a
 * finished piece back as the completion {token, value = its address} for
 * its engine's inbox (core/inbox.go); the owner settles it from there. */
#ifndef ZL_WORKERS_H
#define ZL_WORKERS_H

#include <stdint.h>
#include "bridge.h"

/* Whose bound a piece of work counts against. */
enum {
    ZL_WORK_LOOKUP, /* getaddrinfo/getnameinfo: each waits for a DNS server */
    ZL_WORK_FILE,   /* a file system call */
    ZL_WORK_CLASSES
};

/* The bounds a process starts with (docs/files.md, "How many workers"):
 * lookups at once, file operations at once, and the most anyone may set. */
#define ZL_LOOKUP_WORKERS 8
#define ZL_FILE_WORKERS_DEFAULT 64
#define ZL_WORKERS_MAX 10000 /* Go's own limit on threads (runtime/debug.SetMaxThreads) */

typedef struct zl_work zl_work;

typedef struct {
    int cls; /* ZL_WORK_* */
    /* On a worker's thread, without the GIL: the blocking call itself. */
    void (*perform)(zl_work *w);
    /* With the GIL, on some loop's thread: frees a piece whose engine
     * refused its completion (its loop closed first). */
    void (*discard)(zl_work *w);
} zl_work_kind;

struct zl_work {
    const zl_work_kind *kind;
    uint64_t token;   /* the completion's token: its ZL_DONE_* kind in the top byte */
    uintptr_t engine; /* the engine to post the completion to (capi/engines.go) */
    /* Whose objects the piece holds: its interpreter's ID (never reused in
     * a process), set by the owner. Only a thread of that interpreter, with
     * its GIL, may free the piece as an orphan. */
    int64_t owner;
    /* the pool's own */
    zl_work *next;
    uint64_t seq; /* submission order, across classes */
};

/* A finished piece goes from its worker's thread to its loop's through
 * the engine's inbox (core/inbox.go), a hand-off ThreadSanitizer cannot
 * see: Go is not instrumented. Under -fsanitize=thread the worker releases
 * the piece (zl_workers_next, after its last look at it) and the loop's thread
 * acquires it before settling it (dispatch.c's settle_completions), which
 * is what the inbox's mutex does; elsewhere both are nothing. scripts/tsan
 * builds without cgo's own blanket ordering of every call between Go and
 * C, which would hide races of the adapter's (docs/architecture.md, "Free-
 * threaded builds"), so this hand-off must be told. */
#undef ZL_TSAN
#if defined(__SANITIZE_THREAD__)
#define ZL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ZL_TSAN 1
#endif
#endif
#ifdef ZL_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define ZL_TSAN_HAND_OVER(piece) __tsan_release(piece)
#define ZL_TSAN_TAKE_OVER(piece) __tsan_acquire(piece)
#else
#define ZL_TSAN_HAND_OVER(piece) ((void)0)
#define ZL_TSAN_TAKE_OVER(piece) ((void)0)
#endif

/* Queues w (its kind, token, engine and owner set) and wakes or starts a
 * worker if w's class is under its bound. Called with the GIL of w's
 * owner (it frees that owner's orphans first, see zl_workers_drain). */
void zl_work_submit(zl_work *w);

/* Frees every orphan (a finished piece whose loop had closed) of owner
 * with its kind's discard; other owners' orphans stay for a thread of
 * theirs. Called with owner's GIL. */
void zl_workers_drain(int64_t owner);

/* Sets the bound of class cls when n > 0 (raising it lets waiting work
 * start); returns the bound in force. n must be at most ZL_WORKERS_MAX. */
int zl_workers_bound(int cls, int n);

/* Holds back class cls (none of its pieces starts) and waits, at most
 * timeout_ns, for those running to finish. Returns how many still run.
 * Called without the GIL (a running piece needs none, but the wait may be
 * long). The hold lasts until the matching zl_workers_unhold, or a fork in
 * the child (which forgets every hold). */
int zl_workers_hold(int cls, int64_t timeout_ns);
/* Ends one hold of class cls: once none is left, what waited may start. */
void zl_workers_unhold(int cls);

typedef struct {
    int started;  /* worker threads started in the process (every class) */
    int running;  /* pieces of class cls being performed now */
    int queued;   /* pieces of class cls waiting for a worker */
    int orphaned; /* orphans not yet freed (every class, every owner) */
} zl_workers_counts;
void zl_workers_count(int cls, zl_workers_counts *out);

#endif
