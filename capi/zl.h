/* The adapter's C objects: Loop (the native core of zloopgo.Loop), Handle
 * and TimerHandle, and the helpers the C files share. Everything that
 * touches CPython lives in the capi C files; the Go engine sees only bridge.h. */
#ifndef ZL_H
#define ZL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdatomic.h>
#include "bridge.h"

/* Arguments up to this many are stored inside the handle (no tuple). */
#define ZL_INLINE_ARGS 3

typedef struct zl_loop zl_loop;

/* What only debug mode records about a handle, kept out of line so that
 * every handle stays small (112 bytes with the GC header). */
typedef struct {
    PyObject *source_traceback; /* where the handle was created */
    PyObject *cancel_repr;      /* repr saved at cancel() */
} zl_handle_debug;

typedef struct {
    PyObject_HEAD
    zl_loop *loop;      /* strong reference */
    PyObject *callback; /* NULL once cancelled */
    PyObject *context;
    PyObject **args; /* points at inline_args or a PyMem block */
    PyObject *inline_args[ZL_INLINE_ARGS];
    PyObject *weakreflist;
    zl_handle_debug *debug; /* NULL unless debug mode recorded something */
    int32_t nargs;
    char cancelled;
    char is_timer;
    char running;          /* its callback is executing */
    char context_snapshot; /* context is a shared snapshot (capi/context.c) */
} zl_handle;

/* A TimerHandle: a handle with a deadline and a slot the engine holds. */
typedef struct {
    zl_handle base;
    double when;
    PyObject *when_obj; /* what when() returns if not a float of `when` */
    uint32_t slot;
    char scheduled; /* its slot is held by the engine */
} zl_timer;

/* Reader and writer handles of one descriptor, and the object it was
 * first registered by (a socket, or the number itself). */
typedef struct {
    zl_handle *reader;
    zl_handle *writer;
    PyObject *fileobj;
} zl_fdwatch;

struct zl_loop {
    PyObject_HEAD
    zl_shared sh; /* read by the engine; see bridge.h */
    /* ready queue: a ring of handles, length in sh.ready_len */
    zl_handle **ring;
    int64_t ring_cap; /* a power of two */
    int64_t ring_head;
    /* timer slots (sh.slots), their free list, and the new-timer buffer */
    uint32_t slots_cap;
    uint32_t slots_free; /* head of the free list, UINT32_MAX if none */
    int64_t new_timers_cap;
    /* descriptors, indexed by fd */
    zl_fdwatch *fds;
    int64_t fds_cap;
    /* state */
    uintptr_t engine;   /* Go engine id; 0 when closed */
    void *waker;        /* how call_soon_threadsafe wakes the reactor (capi/waker), or NULL */
    atomic_int polling; /* the loop thread sleeps in the reactor */
    PyThreadState *saved_tstate;
    PyObject *task_factory; /* asyncio's _task_factory, kept here so create_task sees it */
    PyObject *debug_value;  /* what set_debug() was given, if not a bool (its truth: debug) */
    zl_handle *unchecked;   /* the last handle made, if it may not be alone (schedule.c) */
    PyObject *clock;        /* what replaced loop.time(), or NULL (clock.c) */
    PyObject *lookups;      /* token -> (future, kind) of lookups in flight (resolver.c) */
    uint64_t lookup_counter;
    unsigned int clock_type_version;
    zl_loop *prev_live, *next_live; /* the list of live loops */
    PyObject *ctx_cache;            /* the last context snapshot handed out, and */
    PyObject *ctx_cache_vars;       /* its variables (capi/context.c) */
    char closed;
    char debug;
    char running;           /* inside _zl_run */
    char in_callback;       /* running a callback (handle.c) */
    char watch_changed;     /* a descriptor was watched for more since the last batch */
    uint64_t callbacks_run; /* callbacks started so far (handle.c) */
    /* transports that sent with MSG_MORE in the running callback, pushed
     * out when it returns (capi/corked.c alone reads and writes it) */
    PyObject **corked;
    int64_t corked_len, corked_cap;
    /* reads smaller than LARGE_READ land here before being copied out
     * (transport.c); rx_busy while one is being handed on */
    char *rx;
    size_t rx_size;
    char rx_busy;
    char quiet_read; /* set by the native read: its bytes went to a StreamReader
                      * natively and the socket is drained; zl_dispatch
                      * clears it before each callback */
};

/* What the native methods of zloopgo's socket transport keep beside
 * asyncio's attributes (transport.c): a small object of its own in the
 * transport's _zl_state slot, since asyncio's transport classes already
 * have a layout of their own that a C base cannot extend. It references
 * no other object. */
typedef struct {
    PyObject_HEAD
    uint64_t write_callback; /* loop's callbacks_run at this transport's last write */
    int32_t writes_now;      /* write() calls in that callback */
    int32_t writes_before;   /* write() calls in the writing callback before it */
    int corked_fd;           /* the socket bytes were sent to with MSG_MORE */
    char cork;               /* may sends carry MSG_MORE (transport.c) */
    char corked;             /* bytes sent with MSG_MORE wait for a push */
    char listed;             /* on the loop's corked list */
    char large_reads;        /* the last read filled at least LARGE_READ bytes */
} zl_transport;

extern PyTypeObject zl_TransportStateType;

extern PyTypeObject zl_LoopType;
extern PyTypeObject zl_HandleType;
extern PyTypeObject zl_TimerHandleType;
extern PyTypeObject zl_StreamFastPathsType;

/* capi/module.c */
extern int zl_forked_child;           /* set in a child forked after the engine started */
extern PyObject *zl_repr_hook;        /* zloopgo's handle repr function */
extern PyObject *zl_futures_module;   /* asyncio.futures: Future is looked up per call */
extern PyObject *zl_tasks_module;     /* asyncio.tasks: Task is looked up per call */
extern PyObject *zl_base_create_task; /* asyncio's BaseEventLoop.create_task */
int zl_check_not_forked(void);
/* A string the adapter interns once at import, and where it keeps it. */
typedef struct {
    PyObject **slot;
    const char *text;
} zl_name;
/* Interns each of n names into its slot; -1 with an exception set. */
int zl_intern_names(const zl_name *names, size_t n);

/* capi/handle.c */
/* pending: it goes to the ready queue or a timer slot, which hold it off
 * the collector's lists; else it is tracked at once. */
zl_handle *zl_handle_new(zl_loop *loop, PyTypeObject *type, PyObject *callback,
                         PyObject *const *args, Py_ssize_t nargs, PyObject *context, int pending);
/* Drops the ready queue's or a timer slot's reference. */
void zl_handle_release(zl_handle *h);
int zl_handle_traverse(zl_handle *h, visitproc visit, void *arg);
int zl_handle_run(zl_handle *h);
void zl_handle_cancel(zl_handle *h);
int zl_handle_types_ready(void);
/* The handle's debug record, made on first use; NULL with MemoryError set. */
zl_handle_debug *zl_handle_debug_info(zl_handle *h);
/* Takes the pending exception, normalized, with its traceback attached. */
PyObject *zl_fetch_exception(void);
/* Sets exc (stolen) as the pending exception again. */
void zl_restore_exception(PyObject *exc);

/* capi/loop.c */
int zl_loop_type_ready(void);
/* asyncio's _check_closed: the program closed the loop, or its engine is
 * released (from the start of closing on). */
static inline int zl_check_closed(zl_loop *L)
{
    if (L->closed || L->engine == 0) {
        PyErr_SetString(PyExc_RuntimeError, "Event loop is closed");
        return -1;
    }
    return 0;
}

/* capi/ready.c: the ready queue (ring, ring_cap, ring_head, sh.ready_len).
 * Push and pop are here, inline, because every call_soon pushes. */
int zl_ready_init(zl_loop *L);
/* Doubles the full ring; -1 with MemoryError set. */
int zl_ready_grow(zl_loop *L);
/* Releases every queued handle. */
void zl_ready_clear(zl_loop *L);
int zl_ready_traverse(zl_loop *L, visitproc visit, void *arg);
void zl_ready_free(zl_loop *L);

static inline int zl_ready_push(zl_loop *L, zl_handle *h) /* steals h */
{
    if (L->sh.ready_len == L->ring_cap && zl_ready_grow(L) < 0) {
        Py_DECREF(h);
        return -1;
    }
    L->ring[(L->ring_head + L->sh.ready_len) & (L->ring_cap - 1)] = h;
    L->sh.ready_len++;
    return 0;
}

static inline zl_handle *zl_ready_pop(zl_loop *L) /* returns a reference */
{
    zl_handle *h = L->ring[L->ring_head];
    L->ring_head = (L->ring_head + 1) & (L->ring_cap - 1);
    L->sh.ready_len--;
    return h;
}

/* capi/timers.c: timer slots (sh.slots, slots_cap, slots_free) and the
 * new-timer buffer (sh.new_timers, new_timers_cap) */
void zl_timers_init(zl_loop *L);
/* Gives h a slot and tells the engine of it; -1 with MemoryError set. */
int zl_timer_slot_alloc(zl_loop *L, zl_timer *h);
/* h was cancelled: its slot is marked for the engine, its handle released. */
void zl_timer_cancelled(zl_loop *L, zl_timer *h);
/* The engine handed back `slot`: its handle (if not cancelled) is queued. */
void zl_timer_due(zl_loop *L, uint32_t slot);
/* Drops every timer: on close, with the engine's heap dropped too. */
void zl_timers_release_all(zl_loop *L);
/* Cancels every timer, keeping the slots the engine may hold. */
void zl_timers_cancel_all(zl_loop *L);
int zl_timers_traverse(zl_loop *L, visitproc visit, void *arg);
void zl_timers_free(zl_loop *L);

/* capi/schedule.c: call_soon, call_soon_threadsafe, call_later, call_at,
 * and pending handles kept off the collector's lists (unchecked, the
 * live-loop list) */
int zl_schedule_ready(void);
/* Tracks the last handle made if something else references it. */
void zl_check_new_handle(zl_loop *L);
/* Visits a handle held by the ready queue or a timer slot. */
int zl_visit_pending(zl_handle *h, visitproc visit, void *arg);
void zl_live_loop_add(zl_loop *L);
void zl_live_loop_remove(zl_loop *L);
PyObject *zl_loop_call_soon(zl_loop *L, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *zl_loop_call_soon_threadsafe(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                                       PyObject *kwnames);
PyObject *zl_loop_call_later(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames);
PyObject *zl_loop_call_at(zl_loop *L, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);

/* capi/tasks.c */
int zl_tasks_ready(void);
PyObject *zl_loop_create_future(zl_loop *L, PyObject *unused);
PyObject *zl_loop_create_task(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames);
PyObject *zl_loop_get_task_factory(zl_loop *L, void *c);
int zl_loop_set_task_factory(zl_loop *L, PyObject *v, void *c);

/* capi/fds.c: the descriptor table (fds, fds_cap, watch_changed) */
/* A ready descriptor queues its handles (zl_dispatch). */
void zl_fd_ready(zl_loop *L, uint64_t fd, uint32_t mask);
void zl_fds_release_all(zl_loop *L);
int zl_fds_traverse(zl_loop *L, visitproc visit, void *arg);
void zl_fds_free(zl_loop *L);
PyObject *zl_loop_add_reader(zl_loop *L, PyObject *const *a, Py_ssize_t n);
PyObject *zl_loop_add_writer(zl_loop *L, PyObject *const *a, Py_ssize_t n);
PyObject *zl_loop_remove_reader(zl_loop *L, PyObject *fd);
PyObject *zl_loop_remove_writer(zl_loop *L, PyObject *fd);
PyObject *zl_loop_watch_state(zl_loop *L, PyObject *arg);
PyObject *zl_loop_find_fileobj(zl_loop *L, PyObject *fileobj);

/* capi/dispatch.c: the engine's calls into C, declared in bridge.h */
int zl_dispatch_ready(void);

/* capi/transport.c */
int zl_transport_type_ready(void);
PyObject *zl_set_transport_layout(PyObject *mod, PyObject *cls);
/* callback is a socket transport's native _read_ready method */
int zl_is_native_read(PyObject *callback);
/* Frees the loop's receive buffer. */
void zl_rx_free(zl_loop *L);

/* capi/corked.c: the loop's list of transports whose last send carried
 * MSG_MORE (see transport.c, "writes") */
/* Makes room for one more transport; -1 with MemoryError set. */
int zl_corked_reserve(zl_loop *L);
/* Appends a transport's state (a new reference) in the room
 * zl_corked_reserve made; fd is its socket. */
void zl_corked_add(zl_loop *L, zl_transport *state, int fd);
/* The running callback returned: pushes out the segments still held back
 * and empties the list. A pending exception is kept. */
void zl_corked_push(zl_loop *L);
/* Forgets the list (breaking a cycle, closing), pushing first. */
void zl_corked_clear(zl_loop *L);
void zl_corked_free(zl_loop *L);

/* capi/resolver.c */
int zl_resolver_ready(void);
PyObject *zl_loop_getaddrinfo(zl_loop *L, PyObject *args);
PyObject *zl_loop_getnameinfo(zl_loop *L, PyObject *args);
PyObject *zl_loop_lookups_in_flight(zl_loop *L, PyObject *unused);
/* Settles n completions of lookups. */
void zl_settle_lookups(zl_loop *L, const zl_completion *done, int64_t n);
void zl_drop_lookups(zl_loop *L);

/* capi/files.c */
int zl_files_ready(void);
PyObject *zl_file_op(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *zl_file_workers(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *zl_file_stats(PyObject *mod, PyObject *unused);
PyObject *zl_files_graveyard_drain(PyObject *mod, PyObject *unused);
/* Settles n completions of file operations. */
void zl_settle_files(zl_loop *L, const zl_completion *done, int64_t n);

/* capi/clock.c */
int zl_clock_ready(void);
double zl_monotonic(void);
double zl_clock_resolution(void); /* its resolution in seconds, for the engine */
/* Notices a loop.time() replaced on the loop's class. 0 or -1. */
int zl_clock_check(zl_loop *L);
/* zl_clock_check, then, if the clock is replaced, reads it for the engine
 * (zl_shared.fake_now). 0, or -1 with the clock's exception set. */
int zl_clock_sync(zl_loop *L);
/* loop.time() as the program sees it, a new reference. */
PyObject *zl_clock_now(zl_loop *L);
int zl_loop_setattro(PyObject *self, PyObject *name, PyObject *value);

/* capi/context.c */
int zl_context_ready(void);
/* A new reference to a snapshot of the current context, shared through
 * the loop's cache while the current context's variables are the same. */
PyObject *zl_context_snapshot(zl_loop *L);
/* A new reference to a context a handle may run in: the snapshot itself
 * if only the caller holds it, else a copy. */
PyObject *zl_context_private(PyObject *snapshot);
/* A context of a handle is handed out (get_context): on the collector's
 * lists again if this file took it off. */
void zl_context_escape(PyObject *ctx);
/* Drops a reference to a context that may be off the collector's lists. */
void zl_context_release(PyObject *ctx);
void zl_context_cache_clear(zl_loop *L);

/* capi/streamfeed.c */
int zl_streamfeed_ready(void);
PyObject *zl_set_streams(PyObject *mod, PyObject *args);
/* Hands n bytes read by a transport to protocol's asyncio.StreamReader
 * natively: 1 if done, 0 if protocol is not one the fast path serves (the
 * caller calls data_received), -1 with the exception data_received would
 * have raised. */
int zl_stream_feed(PyObject *protocol, const char *buf, Py_ssize_t n);

#endif
