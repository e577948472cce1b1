/* The adapter's C objects (Loop, the native core of zloopgo.Loop; Handle
 * and TimerHandle) and what its C files share. Everything that touches
 * CPython lives in the capi C files; the Go engine sees only bridge.h.
 *
 * The files, lowest layer first, under the concept each serves. A file's
 * rank is its row's place in this table: it calls functions of its own
 * file and of files above it, never of files below (capi/layering reads
 * the order and checks it); inline functions of this header are accessors
 * any file may call. Each sub-structure of zl_loop is written by the file
 * named beside it; the declarations below follow this order. capi/ stays
 * one flat folder because cgo builds the C files of its package's folder
 * only: the headings are the folders it cannot have.
 *
 *   Platform: what the adapter asks of the system (platform.h and its inline calls)
 *     platform_unix.c the POSIX calls not inlined: an errno's OSError; Go threads' signal mask
 *     platform_windows.c the Windows calls not inlined: a Winsock error's OSError
 *   Foundations
 *     util.c          exceptions, slot layouts, raw buffers, calls made as `except` makes them
 *     runtime.c       the fork guard; the hooks set at import
 *     clock.c         loop.time(), the program's replacement if any
 *     context.c       context snapshots, the spare context
 *   Handles and timers
 *     handle_lock.c   the lock of 3.14's _ThreadSafeHandle, lighter than an RLock
 *     handle.c        Handle: making, running and cancelling a call
 *     ready.c         the ready queue of handles and their calls
 *     pending.c       the last handle made, looked at again; the collector hook
 *     timers.c        timer slots, shared with the engine; deadlines that are not floats asked
 *     timer_handle.c  TimerHandle
 *     schedule.c      call_soon, call_soon_threadsafe, call_later, call_at
 *     tasks.c         create_future, create_task
 *   Descriptors
 *     fds.c           the descriptor table
 *     sockets.c       a socket object's descriptor and timeout now, as its own methods read them
 *   Transports
 *     streamfeed.c    a stream's reads straight into its StreamReader
 *     transport.c     the socket transport's native methods: reads, writes
 *   TLS
 *     tls.c           the TLS protocol's and its app transport's native methods
 *   Datagrams
 *     datagram.c      the datagram transport's native methods: receive, sendto
 *   Socket methods
 *     sockops.c       the loop's sock_recv, sock_recv_into, sock_sendall: asyncio's steps natively
 *   Resolver and files
 *     workers.c       the one worker pool: queues, bounds, idle workers, orphans, fork
 *     resolver.c      name lookups on the pool's workers
 *     files_posix.c   a file operation's system calls, values and errors on POSIX (files.h)
 *     files_windows.c a file operation's system calls, values and errors on Windows (files.h)
 *     files.c         file operations on the pool's workers, their bound: submitting, settling
 *   Loop core
 *     dispatch.c      the engine's calls into C: one iteration's batch
 *     loop.c          the LoopCore type: making, running, closing a loop
 *   Stats
 *     stats.c         zloopgo.stats(): the counters read, reset; slow-callback detection set
 *   Module
 *     module.c        the extension module: every file's import-time setup (zl_*_init)
 */
#ifndef ZL_H
#define ZL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h> /* PyMemberDef, which Python.h declares only from 3.12 */
#include <stdatomic.h>
#include "bridge.h"
#include "platform.h"
#include "stats.h"
#include "workers.h"

/* CPython's method lookup without a bound method: 1 and the function in
 * *method when type(obj) has it as a method and nothing on the instance
 * overrides it, else 0 and the attribute itself (a new reference either
 * way; NULL with an exception set if there is none). Declared by the
 * public headers up to 3.12 and exported, with the same signature, by
 * 3.13 to 3.15, whose internal header declares it. */
#if PY_VERSION_HEX >= 0x030D0000
extern int _PyObject_GetMethod(PyObject *obj, PyObject *name, PyObject **method);
#endif

/* A small helper of a per-packet path that the compiler must inline:
 * gcc 16 left zl_layout_true and the transport's slot readers out of
 * line at -O2, a call and a frame around a few loads, several times per
 * read and per write. */
#define ZL_ALWAYS_INLINE static inline __attribute__((always_inline))

/* Arguments up to this many are stored inside the handle (no tuple). */
#define ZL_INLINE_ARGS 3

typedef struct zl_loop zl_loop;

/* Freed handles of one type kept for reuse by their loop (handle.c). */
typedef struct zl_handle_s zl_handle;
typedef struct {
    zl_handle **items; /* FREELIST_MAX long once used */
    int n;
} zl_handle_pool;

/* What only debug mode records about a handle, kept out of line so that
 * every handle stays small. */
typedef struct {
    PyObject *source_traceback; /* where the handle was created */
    PyObject *cancel_repr;      /* repr saved at cancel() */
} zl_handle_debug;

/* A handle is an asyncio.events.Handle (a TimerHandle an
 * asyncio.events.TimerHandle), so it begins with their instance layout:
 * Handle's seven slots (and up to 3.11 its weak reference list; from 3.12
 * the interpreter keeps that before the object), then TimerHandle's two,
 * which a Handle leaves unused so that both types have the fields below at
 * one offset. Every slot's name is a getset of ours, so only asyncio's
 * member descriptors, called explicitly, can store there; the slots are
 * cleared with the handle. handle.c checks the layout against asyncio's
 * when the types are made. */
#define ZL_ASYNCIO_HANDLE_SLOTS 7
#define ZL_ASYNCIO_TIMER_SLOTS 2
struct zl_handle_s {
    PyObject_HEAD
    PyObject *asyncio_slots[ZL_ASYNCIO_HANDLE_SLOTS];
#if PY_VERSION_HEX < 0x030C0000
    PyObject *asyncio_weakreflist; /* read through zl_handle_weakrefs */
#endif
    PyObject *asyncio_timer_slots[ZL_ASYNCIO_TIMER_SLOTS];
    zl_loop *loop;      /* strong reference */
    PyObject *callback; /* NULL once cancelled */
    PyObject *context;
    PyObject **args; /* points at inline_args or a PyMem block */
    /* the arguments if they fit, then NULL up to the end: inline_args[0]
     * is the one argument or NULL when nargs is 1 or 0 (zl_handle_hand_over) */
    PyObject *inline_args[ZL_INLINE_ARGS];
    zl_handle_debug *debug; /* NULL unless debug mode recorded something */
    int32_t nargs;
    /* How many runs of its callback are executing (a callback may run its
     * own handle again: h._run() inside it). The context they entered
     * stays the handle's until the outermost returns (capi/context.c); the
     * callback and arguments each run holds itself (zl_handle_run). */
    uint16_t running;
    char cancelled;
    char context_snapshot; /* 1: context is a shared snapshot (capi/context.c); else 0 */
    char args_kept;        /* _args still reads as a tuple: the callback is going (clear_call) */
    /* its call went to a ready entry while it was alone, and the queue's
     * reference, its last, is being dropped (zl_handle_hand_over): its
     * dealloc knows what it holds without looking (its callback, context
     * and argument still name the call, whose references are the entry's) */
    char handed_over;
};

/* A TimerHandle: a handle with a deadline and a slot the engine holds. */
typedef struct {
    zl_handle base;
    double when;
    PyObject *when_obj; /* what when() returns if not a float of `when` */
    uint32_t slot;
    char scheduled; /* its slot is held by the engine */
    char when_kind; /* ZL_WHEN_*: what the engine's float deadline is of when_obj */
} zl_timer;

/* A timer's deadline (zl_timer.when_kind) as the engine has it: */
enum {
    /* a float, an int */
    ZL_WHEN_FLOAT,
    /* the float another object converts to (a subclass of float or int,
     * a Decimal...; +-inf for an int beyond a float's range): once due by
     * it, the object itself is asked what asyncio's run loop asks the
     * earliest timer (zl_timer_due) */
    ZL_WHEN_CONVERTED,
    /* no number (call_at('soon')): -inf, or behind another timer at that
     * one's deadline (schedule.c), asked as a converted one, every
     * iteration while its answer is "not due" */
    ZL_WHEN_ODD,
};

/* Reader and writer handles of one descriptor, and the object it was
 * first registered by (a socket, or the number itself). */
typedef struct {
    zl_handle *reader;
    zl_handle *writer;
    PyObject *fileobj;
} zl_fdwatch;

/* 3.14+'s asyncio.events._ThreadSafeHandle, as call_soon_threadsafe makes
 * one (schedule.c): the class, the callable that runs one, and the
 * offsets of its slots. Set once per module object (until its clear). */
typedef struct {
    PyTypeObject *type; /* events._ThreadSafeHandle, or NULL before 3.14 */
    PyObject *runner;   /* run_threadsafe, bound to the module */
    Py_ssize_t callback, args, cancelled, loop, source_traceback, repr, context, lock; /* offsets */
} zl_threadsafe_class;

/* asyncio's stream classes as set_streams found them (streamfeed.c): the
 * stream fast path serves exactly these, while their classes still hold
 * these methods. */
typedef struct {
    PyTypeObject *protocol_type, *reader_type; /* NULL: the fast path is off */
    PyObject *data_received_fn, *stream_reader_prop, *feed_data_fn, *wakeup_waiter_fn;
    unsigned int protocol_version, reader_version; /* tp_version_tag when last checked */
    int check_asserts; /* sys.flags.optimize == 0: feed_data's assert runs */
#ifdef Py_GIL_DISABLED
    /* the path turned off by set_streams(None): in a free-threaded build
     * the classes, once set, are never cleared (streamfeed.c) */
    int off;
#endif
} zl_stream_classes;

/* The offsets of a class's object slots (__slots__), recorded once
 * (zl_layout_record) so that reading one on an instance of that class is a
 * load. name_at[f] is where field f's interned name is in zl_names (the
 * names of the module state of self's type, for a lookup).
 * A load is only what attribute access does while every field's name
 * still resolves, on the instance's class, to the recorded slot: a
 * subclass, or the class itself (it is mutable), may put a property or
 * another descriptor under a field's name. `checked` is the last class
 * found so (borrowed), at its version tag `checked_version` (a class
 * changed, or freed and another made at its address, has another tag:
 * tags are not reused). */
#define ZL_LAYOUT_MAX 24
typedef struct {
    PyTypeObject *type; /* the class recorded; NULL before */
    int n;
    const size_t *name_at;        /* offsetof(zl_names, ...) of each field */
    PyTypeObject *checked;        /* the last class whose fields are the slots */
    unsigned int checked_version; /* its tp_version_tag then (never 0); in a
                                   * free-threaded build it alone, `checked`
                                   * unused (zl_layout_direct) */
    Py_ssize_t offset[ZL_LAYOUT_MAX];
    /* each field's slot definition (its class's, which the recorded one
     * keeps alive): what a name must still resolve to */
    const PyMemberDef *member[ZL_LAYOUT_MAX];
} zl_layout;

/* The interned names (capi/names.h, each text once), one set per module
 * state: read as L->state->names.done on a path that has its loop (one
 * load more than a static variable), or through zl_state_of_type. */
typedef struct {
#define ZL_NAME(id) PyObject *id;
#define ZL_NAME_TEXT(id, text) PyObject *id;
#include "names.h"
#undef ZL_NAME
#undef ZL_NAME_TEXT
} zl_names;

/* The forms of asyncio's BaseEventLoop.create_task that tasks.c does
 * natively, as zloopgo/_loop.py reads them from its signature at import
 * (set_asyncio): ASYNCIO, one it does not know, always runs asyncio's own
 * method. */
enum {
    ZL_CREATE_TASK_ASYNCIO = 0,      /* none known: asyncio's method */
    ZL_CREATE_TASK_NAME = 1,         /* (coro, *, name=None): 3.10 */
    ZL_CREATE_TASK_NAME_CONTEXT = 2, /* (coro, *, name=None, context=None): 3.11 to 3.13.0 */
    ZL_CREATE_TASK_KEYWORDS = 3,     /* (coro, **kwargs), every keyword to Task: 3.14+ */
    /* (coro, *, name=None, context=None, **kwargs): 3.13's later patch releases */
    ZL_CREATE_TASK_NAME_CONTEXT_KEYWORDS = 4,
};

/* The keyword names tuples create_future and create_task pass (tasks.c),
 * and sockops.c's partial(..., handle=), made from zl_names in exec. */
typedef struct {
    PyObject *loop, *loop_name, *loop_context, *loop_name_context, *name, *context, *name_context;
    PyObject *handle;
} zl_task_kwnames;

/* What set_tls recorded (tls.c), this interpreter's: the slot layouts of
 * zloopgo's SSLProtocol and of its app transport, asyncio's SSLProtocol
 * methods the rare cases call, SSLProtocolState's members,
 * sslproto.SSLAgainErrors, and ssl.SSLObject with its own read and write.
 * NULL (layouts unrecorded) until set_tls. */
typedef struct {
    zl_layout layout, app_layout;
    PyObject *py_get_buffer, *py_write_appdata, *py_do_read_copied, *py_control_app_writing,
        *py_control_ssl_reading, *py_is_transport_closing;
    PyObject *st_do_handshake, *st_wrapped, *st_flushing, *st_shutdown, *st_unwrapped;
    PyObject *again_errors;
    PyTypeObject *sslobject_type;
    PyObject *sslobject_read, *sslobject_write;
    /* the version tags of ssl.SSLObject and of zloopgo's SSLProtocol when
     * they last held the methods the native steps stand for (0: look
     * again); a class or any of its bases changed since has another tag */
    unsigned int sslobject_version, protocol_version;
    int is_closing_asks_transport; /* 3.13.15, 3.14+: is_closing() asks the socket transport */
} zl_tls_classes;

/* What one interpreter's _engine module holds (module.c makes it; a
 * loop reaches it as L->state). Every interpreter that imports the module
 * has its own: docs/architecture.md, "State: per process, per
 * interpreter, per loop", says what is still process-wide. */
typedef struct {
    PyTypeObject *loop_type;         /* LoopCore, made from this module (loop.c) */
    PyTypeObject *handle_type;       /* zloopgo.Handle (handle.c), from this module too */
    PyTypeObject *timer_handle_type; /* zloopgo.TimerHandle (timer_handle.c) */
    PyTypeObject *lock_type;         /* HandleLock (handle_lock.c) */
    /* the transports' native method bases and state objects, from this
     * module too: */
    PyTypeObject *stream_fast_paths_type;        /* StreamFastPaths (transport.c) */
    PyTypeObject *transport_state_type;          /* TransportState (transport.c) */
    PyTypeObject *datagram_fast_paths_type;      /* DatagramFastPaths (datagram.c) */
    PyTypeObject *datagram_state_type;           /* DatagramState (datagram.c) */
    PyTypeObject *tls_fast_paths_type;           /* TLSFastPaths (tls.c) */
    PyTypeObject *tls_transport_fast_paths_type; /* TLSTransportFastPaths (tls.c) */
    /* other modules' objects, this interpreter's: */
    PyTypeObject *socket_type;     /* socket.socket (sockets.c) */
    PyObject *gaierror;            /* socket.gaierror (resolver.c) */
    PyObject *family_members;      /* {value: socket.AddressFamily member} (resolver.c) */
    PyObject *kind_members;        /* {value: socket.SocketKind member} (resolver.c) */
    PyObject *partial_type;        /* functools.partial (sockops.c) */
    PyTypeObject *weak_value_dict; /* weakref.WeakValueDictionary (sockops.c) */
    zl_stream_classes streams;     /* streamfeed.c (set_streams) */
    PyObject *asyncio_handle_run;  /* handle.c: asyncio.events.Handle._run */
    zl_loop *live_loops;           /* pending.c: this interpreter's loops not yet deallocated */
    PyObject *gc_hook;             /* pending.c: its entry in gc.callbacks */
    /* runtime.c (set_asyncio), read by tasks.c: */
    PyObject *futures_module;       /* asyncio.futures: Future is looked up per call */
    PyObject *tasks_module;         /* asyncio.tasks: Task is looked up per call */
    PyObject *base_create_task;     /* asyncio's BaseEventLoop.create_task */
    int create_task_form;           /* its form, a ZL_CREATE_TASK_* (tasks.c) */
    zl_threadsafe_class threadsafe; /* schedule.c (set_threadsafe_handle) */
    zl_names names;                 /* module.c interns them in exec */
    zl_task_kwnames task_kwnames;   /* module.c, from names */
    PyObject *zero, *empty_bytes;   /* 0 and b'', this interpreter's (tls.c) */
    /* the transports' slot layouts (set_transport_layout, set_datagram_layout) */
    zl_layout transport_layout, datagram_layout;
    zl_tls_classes tls; /* tls.c (set_tls) */
} zl_module_state;

/* The extension's definition (module.c), which names its module objects
 * among the bases' modules (util.c: zl_state_of_type). */
extern PyModuleDef zl_module_def;
/* The module state of the interpreter whose _engine made tp or one of
 * its bases (a native method's self without a loop at hand), or NULL with
 * TypeError set: an MRO walk (PyType_GetModuleByDef; CPython 3.10's
 * private one of the same code), for paths that run once per object or
 * on an error, never per packet (util.c). */
zl_module_state *zl_state_of_type(PyTypeObject *tp);
/* What the native bases add to the layout of their instances: the module
 * state of the interpreter whose module made self's class (the state
 * holds the slot layouts every native method reads), kept in the instance
 * so that a native method finds it in one load. The transports' bases
 * (StreamFastPaths, DatagramFastPaths, TLSTransportFastPaths) derive from
 * asyncio's transports._FlowControlMixin, the solid base of every asyncio
 * transport they go with, after whose slots (_extra, _loop,
 * _protocol_paused, _high_water, _low_water) the state comes; the
 * protocol's (TLSFastPaths) from object. Each type's maker checks that
 * the field is where this struct says (zl_native_base_check).
 *
 * The pointer is borrowed: self holds its class, the class its native
 * base, the base (a heap type made from the module) its module, which
 * owns the state; so it lives as long as self. It is NULL until the first
 * native call on self (objects are made by asyncio's code, object's
 * tp_new, as before), which fills it in from self's class
 * (zl_state_remember); assigning __class__ keeps it right: CPython only
 * allows a class of the same layout, which has the same native base,
 * hence the same module. */
typedef struct {
    PyObject_HEAD
    PyObject *flow_control_slots[5]; /* asyncio's; never read here */
    zl_module_state *state;
} zl_native_transport;
typedef struct {
    PyObject_HEAD
    zl_module_state *state;
} zl_native_protocol;
/* 0, or -1 with TypeError set when type's native state field is not at
 * state_offset (type was made with a base other than the one expected,
 * or asyncio's _FlowControlMixin has another layout) (util.c). */
int zl_native_base_check(PyTypeObject *type, Py_ssize_t state_offset);
/* asyncio.transports._FlowControlMixin (a new reference), the base of the
 * native transport bases, or NULL with an exception set (util.c). */
PyObject *zl_flow_control_base(void);
/* The first native call on an instance: its class's module state
 * (zl_state_of_type) written to *kept, or NULL with TypeError set. */
zl_module_state *zl_state_remember(PyObject *self, zl_module_state **kept);
/* The module state of a native method's self, kept in self at *kept (the
 * state field of its zl_native_transport or zl_native_protocol): one
 * load, and the MRO walk on the first call only. The first act of a
 * native method, whose slot layouts are in the state. */
static inline zl_module_state *zl_state_of_native(PyObject *self, zl_module_state **kept)
{
    zl_module_state *st = *kept;
    return st != NULL ? st : zl_state_remember(self, kept);
}

/* The last handle made, to look at again, and the list of live loops
 * (pending.c alone reads and writes it). */
typedef struct {
    zl_handle *last;                /* NULL once looked at */
    uint64_t pos;                   /* its position in the ready queue, if it waits there */
    zl_loop *prev_live, *next_live; /* the list of its interpreter's live loops */
    zl_loop *next_held;             /* the collector hook's chain of the loops it holds */
} zl_pending;

/* One entry of the ready queue (ready.c): a handle the queue holds a
 * reference to, or, once that handle was alone (nothing else could ever
 * reach it again), the call it held, taken over so that the handle could
 * go: its callback, its one argument (if any) and its context. A million
 * pending callbacks then cost a million entries, not a million handles.
 * A bare entry (ZL_ENTRY_BARE) is queued as such, with no context. */
typedef struct {
    PyObject *call;    /* the zl_handle (ZL_ENTRY_HANDLE), else the callback */
    PyObject *arg;     /* the call's argument when nargs is 1 */
    PyObject *context; /* the call's context, a shared snapshot if ZL_ENTRY_SNAPSHOT */
    uint32_t flags;
    uint32_t nargs; /* 0 or 1 */
} zl_entry;

/* 1: a handle's context_snapshot (0 or 1) is its entry's flags as they are
 * (zl_handle_hand_over) */
#define ZL_ENTRY_SNAPSHOT 1u
#define ZL_ENTRY_HANDLE 2u
/* call(arg) as it is, in no context and not counted as a callback: a
 * runner that enters a context of its own for the callback it runs (3.14's
 * _ThreadSafeHandle behind schedule.c's runner). */
#define ZL_ENTRY_BARE 4u

/* The ready queue (ready.c alone writes it; push and pop are inline below). */
typedef struct {
    zl_entry *ring;
    int64_t cap; /* a power of two; the length is zl_shared.ready_len */
    int64_t head;
    uint64_t popped; /* entries popped so far: the position of head */
} zl_ready_queue;

#ifdef Py_GIL_DISABLED
/* Free-threaded builds only: entries that threads other than the running
 * loop's queue (call_soon_threadsafe), moved into the ring by the loop's
 * thread before its next push or batch (ready.c). `len` is written under
 * `mutex` and read without it by the loop thread (a relaxed load: is
 * there anything to move?). A GIL build has none of it: the GIL orders
 * every push into the ring itself. */
typedef struct {
    PyMutex mutex;
    zl_entry *items;
    int64_t len, cap;
} zl_inbox;
#endif

/* Timer slots (timers.c): zl_shared.slots and .new_timers are their
 * memory, shared with the engine; this is the rest. */
typedef struct {
    uint32_t slots_cap;
    uint32_t slots_free; /* head of the free list, UINT32_MAX if none */
    int64_t new_timers_cap;
} zl_timer_table;

/* The descriptor table (fds.c), indexed by fd. */
typedef struct {
    zl_fdwatch *entries;
    int64_t cap;
    char watch_changed;         /* a descriptor was watched for more since the last batch */
    int64_t writers;            /* descriptors watched for writing */
    int self_pipe;              /* the loop's self-pipe (asyncio's _ssock), or -1 */
    PyObject *self_pipe_reader; /* the handle asyncio made for it (_read_from_self) */
    PyObject *signal_handlers;  /* the loop's _signal_handlers dict */
} zl_fd_table;

/* Where native reads land (transport.c). */
typedef struct {
    char *buf; /* reads smaller than LARGE_READ, before they are copied out */
    size_t size;
    char busy;       /* a read in buf is being handed on */
    char quiet_read; /* the last native read went to a StreamReader natively and
                      * drained its socket (zl_transport_read_was_quiet) */
} zl_receive;

/* Context snapshots (context.c). */
typedef struct {
    PyObject *cache;      /* the last snapshot handed out, */
    PyObject *cache_vars; /* its variables, */
    PyObject *spare;      /* and a private context to hand out again */
} zl_context_cache;

/* Name lookups in flight (resolver.c). */
typedef struct {
    PyObject *futures; /* token -> (future, kind) */
    uint64_t counter;
} zl_lookups;

/* loop.time() replaced by the program (clock.c). */
typedef struct {
    PyObject *replacement; /* or NULL */
    unsigned int type_version;
} zl_clock_state;

/* Callbacks as they run (handle.c). */
typedef struct {
    uint64_t started; /* callbacks started so far (stats.c, a trace's iterations) */
    zl_handle_pool handle_pool, timer_pool; /* freed handles for reuse */
} zl_callbacks;

/* What the adapter counts for zloopgo.stats(): plain increments on paths
 * that already run, each field written by the one file named beside it
 * (stats.c only reads them). Nothing resets them: reset_stats() keeps a
 * copy that stats.c subtracts. */
enum { ZL_KIND_TCP, ZL_KIND_UNIX, ZL_KIND_OTHER, ZL_TRANSPORT_KINDS }; /* zl_transport.kind */
typedef struct {
    uint64_t reads, read_bytes;   /* recv calls made natively, the bytes they returned */
    uint64_t writes, write_bytes; /* send calls of the native write(), the bytes they took */
    uint64_t writes_buffered;     /* write() calls that left bytes to asyncio's buffer */
} zl_transport_counts;
typedef struct {
    zl_transport_counts transports[ZL_TRANSPORT_KINDS]; /* transport.c */
    uint64_t lookups_done;                              /* resolver.c: finished lookups settled */
    uint64_t timed,
        timed_ns;     /* dispatch.c: callbacks timed (slow-callback detection), their time */
    uint64_t slow;    /* dispatch.c: of which slow, reported */
    uint64_t wakeups; /* schedule.c: wake-ups call_soon_threadsafe wrote to the reactor */
    uint64_t looks_ahead, looks_ahead_ready,
        looks_ahead_left;    /* dispatch.c: looks at the engine's poller for an iteration
                           * alone, of which found an event, and those after which
                           * the engine made the iteration's wait itself */
    uint64_t watches_native; /* fds.c: changes of a descriptor's interest made on the
                              * engine's poller by the adapter itself (reactor_watch) */
} zl_counters;

/* stats.c: whether callbacks are timed, and the copies reset_stats() took. */
typedef struct {
    char slow_callbacks; /* time each callback and report slow ones (dispatch.c reads it) */
    zl_counters counters_at_reset;
    uint64_t callbacks_at_reset, lookups_at_reset;
    zl_engine_stats engine_at_reset;
} zl_stats_state;

/* The native half of zloopgo.Loop. Each sub-structure is written by the
 * one file named beside it; the others read it through that file's
 * functions (inline ones below). loop.c owns the fields at the top. */
struct zl_loop {
    PyObject_HEAD
    zl_shared sh; /* read by the engine; see bridge.h */
    /* loop.c */
    zl_module_state *state; /* its module's, of the interpreter that made it */
    uintptr_t engine;       /* Go engine id; 0 once released */
    void *waker;            /* how call_soon_threadsafe wakes the reactor (capi/waker), or NULL */
    atomic_int polling;     /* the loop thread sleeps in the reactor (dispatch.c) */
    atomic_int wake_sent;   /* a wake-up was written during this sleep (schedule.c) */
    int32_t look_skips;     /* dispatch.c: waits that may block left to the engine unlooked */
    int32_t look_backoff;   /* dispatch.c: look_skips after the next look that finds nothing */
    char dispatching;       /* dispatch.c: zl_dispatch is running (sh.poller_fd is the engine's) */
    PyThreadState *saved_tstate; /* while it sleeps (dispatch.c) */
    PyThreadState *run_tstate;   /* the thread running the loop, while it runs */
    PyObject *debug_value;       /* what set_debug() was given, if not a bool (its truth: debug) */
    char closed;
    char debug;
    char running;         /* inside _zl_run */
    zl_ready_queue ready; /* ready.c */
#ifdef Py_GIL_DISABLED
    zl_inbox inbox; /* ready.c: what other threads queue */
#endif
    zl_timer_table timers;     /* timers.c */
    zl_pending pending;        /* pending.c */
    zl_callbacks callbacks;    /* handle.c */
    zl_fd_table fds;           /* fds.c */
    zl_receive rx;             /* transport.c */
    zl_context_cache contexts; /* context.c */
    zl_lookups lookups;        /* resolver.c */
    zl_clock_state clock;      /* clock.c */
    zl_counters counters;      /* each field its counting file's (see zl_counters) */
    zl_stats_state stats;      /* stats.c */
    PyObject *context_kwnames; /* schedule.c: the last ("context",) keyword tuple seen */
    PyObject *task_factory; /* tasks.c: asyncio's _task_factory, kept here so create_task sees it */
};

/* What the native methods of zloopgo's socket transport keep beside
 * asyncio's attributes (transport.c): a small object of its own in the
 * transport's _zl_state slot, since asyncio's transport classes already
 * have a layout of their own that a C base cannot extend. It references
 * no other object. */
typedef struct {
    PyObject_HEAD
    char large_reads; /* the last read filled at least LARGE_READ bytes */
    char kind;        /* ZL_KIND_*: the counters it adds to (set once by zloopgo's transport) */
    char fed_quietly; /* its protocol's last buffer_updated ran no program code and
                       * wrote nothing (tls.c says so: zl_transport_fed_quietly) */
} zl_transport;

/* LoopCore's deallocator (loop.c): what marks LoopCore, of whichever
 * interpreter, among a class's bases. */
void zl_loop_dealloc(zl_loop *L);
/* obj is a zloopgo loop, of any interpreter's LoopCore: a class whose
 * instances have a zl_loop layout has LoopCore on its chain of solid
 * bases (tp_base), found second for zloopgo.Loop, with no MRO walk on the
 * paths that ask for every packet. */
static inline int zl_is_loop(PyObject *obj)
{
    for (PyTypeObject *t = Py_TYPE(obj); t != NULL; t = t->tp_base)
        if (t->tp_dealloc == (destructor)zl_loop_dealloc)
            return 1;
    return 0;
}

/* ---- Free-threaded builds: who may touch a loop ----
 *
 * docs/architecture.md, "Free-threaded builds", gives what replaces the
 * GIL place by place; what is built of it is compiled only where
 * Py_GIL_DISABLED is defined, or through the helpers below, which are a
 * plain access or a constant in a GIL build, so that a GIL build keeps
 * its behaviour and its instructions. */

/* A word another thread reads or writes without a lock (a loop's
 * run_tstate, its closed flag): a relaxed atomic access in a
 * free-threaded build, a plain one where the GIL orders it. */
#ifdef Py_GIL_DISABLED
#define ZL_FT_LOAD(lvalue) __atomic_load_n(&(lvalue), __ATOMIC_RELAXED)
#define ZL_FT_STORE(lvalue, v) __atomic_store_n(&(lvalue), (v), __ATOMIC_RELAXED)
#else
#define ZL_FT_LOAD(lvalue) (lvalue)
#define ZL_FT_STORE(lvalue, v) ((lvalue) = (v))
#endif

/* A critical section on an object another thread can reach, around a
 * native change of it that CPython's own methods make under one (a
 * bytearray resized, then written): Python.h's from 3.13, where a
 * free-threaded build can exist; before, a GIL build, where the GIL is
 * the exclusion and the section a plain block, as 3.13's is there. */
#ifndef Py_BEGIN_CRITICAL_SECTION
#define Py_BEGIN_CRITICAL_SECTION(op) {
#define Py_END_CRITICAL_SECTION() }
#endif

/* The caller's reference to o is its only one, as the decisions that move
 * an object's contents or hand it on ask (a handle alone, a context
 * snapshot nobody else holds). In a free-threaded 3.14+ build
 * PyUnstable_Object_IsUniquelyReferenced: Py_REFCNT(o) == 1 is not enough
 * where biased counting splits the count between the owning thread's
 * part and a shared one, and another thread may be taking a reference it
 * reached without one; false for an object another thread owns. Never in
 * a collector's traverse: the free-threaded collector keeps its own
 * counts in the field that function reads (ob_tid). 3.13t has no such
 * function: the count, as in a GIL build. */
#if defined(Py_GIL_DISABLED) && PY_VERSION_HEX >= 0x030E0000
#define ZL_UNIQUE(o) PyUnstable_Object_IsUniquelyReferenced((PyObject *)(o))
#define ZL_SHARED(o) (!ZL_UNIQUE(o))
#else
#define ZL_UNIQUE(o) (Py_REFCNT(o) == 1)
#define ZL_SHARED(o) (Py_REFCNT(o) > 1) /* !ZL_UNIQUE, as a GIL build has always written it */
#endif

#ifdef Py_GIL_DISABLED
/* L runs on the calling thread. */
static inline int zl_running_here(const zl_loop *L)
{
    return ZL_FT_LOAD(L->run_tstate) == PyThreadState_GetUnchecked();
}
/* The calling thread may touch what the table gives per-loop ownership:
 * L is not running, or runs on this thread. */
static inline int zl_owned_here(const zl_loop *L)
{
    PyThreadState *runner = ZL_FT_LOAD(L->run_tstate);
    return runner == NULL || runner == PyThreadState_GetUnchecked();
}
/* -1 with the RuntimeError asyncio's debug mode raises for a method
 * called off the loop's thread (util.c). */
int zl_refuse_foreign_thread(void);
#endif

/* The engine declares that it does not use the GIL (Py_mod_gil,
 * module.c): so far only scripts/gil-off's test-only build, which
 * defines ZL_TEST_GIL_NOT_USED. Every other free-threaded build runs with
 * the GIL on. */
#if defined(Py_GIL_DISABLED) && defined(ZL_TEST_GIL_NOT_USED)
#define ZL_GIL_NOT_USED 1
#else
#define ZL_GIL_NOT_USED 0
#endif

/* Per-loop ownership, enforced: 0, or where the engine runs without the
 * GIL (ZL_GIL_NOT_USED) -1 with RuntimeError when L runs on another
 * thread. The entry points that reach a structure only the loop's thread
 * may touch call it (schedule.c, fds.c, handle.c, timer_handle.c, the
 * transports' writes); without the GIL, such a call from another thread
 * would corrupt C memory where asyncio's own would only race
 * (docs/compatibility.md). With the GIL, free-threaded build or not,
 * nothing is checked: the GIL keeps the race a logic one, as in asyncio,
 * and a program that asyncio lets race runs as it does there. The check
 * is then a constant, which the compiler drops before it weighs the
 * caller (an inline function that returns 0 changed gcc's layout of
 * call_soon). */
#if ZL_GIL_NOT_USED
static inline int zl_check_owner(const zl_loop *L)
{
    return zl_owned_here(L) ? 0 : zl_refuse_foreign_thread();
}
#else
#define zl_check_owner(L) 0
#endif

/* ==== Foundations ==== */

/* The calling thread's interpreter's ID, which no other interpreter of
 * the process ever has: whose objects a piece of the pool's work holds
 * (zl_work.owner, workers.h). */
static inline int64_t zl_interpreter_id(void)
{
    return PyInterpreterState_GetID(PyInterpreterState_Get());
}

/* capi/util.c */
/* Takes the pending exception, normalized, with its traceback attached. */
PyObject *zl_fetch_exception(void);
/* Sets exc (stolen) as the pending exception again. */
void zl_restore_exception(PyObject *exc);
/* Adds a frame (func in file at line) to the pending exception's
 * traceback, as passing through a Python frame does: asyncio's
 * Handle._run is one, so that an exception a C callable raises there
 * still prints "Traceback (most recent call last):" in a log. */
void zl_traceback_add(const char *file, const char *func, int line);
/* obj.name(exc) (obj.name(exc, arg) unless arg is NULL) as an `except ...
 * as exc:` clause calls it: exc is the exception being handled meanwhile,
 * so a log with exc_info=True carries it and an exception raised gets it
 * as its __context__; an exc without a traceback (raised in C) gets a
 * frame. A new reference, or NULL with an exception set. */
PyObject *zl_call_handling(PyObject *obj, PyObject *name, PyObject *exc, PyObject *arg);
/* Field f's name in names (borrowed). */
static inline PyObject *zl_layout_name(const zl_layout *layout, const zl_names *names, int f)
{
    return *(PyObject *const *)((const char *)names + layout->name_at[f]);
}
/* Records cls's offsets of every field, named by names (the module
 * state's that records it): 0, or -1 with TypeError when one is not an
 * object slot of cls. */
int zl_layout_record(zl_layout *layout, const zl_names *names, PyObject *cls);
/* -1 with RuntimeError when `what` (a set_* of the module, recording
 * `recorded`) was set already, else 0: the module state's set_* functions
 * are written once, since loops on other threads read what they set
 * without a lock and nothing of zloopgo's asks twice (util.c). */
int zl_refuse_set_again(const char *what, const void *recorded);
/* A set_*_layout of the module: records cls's slots in *layout (a field
 * of mod's state) once, in a critical section on mod so that two
 * threads' calls at once are one and a refusal; None, or NULL with an
 * exception set. */
PyObject *zl_set_layout_once(PyObject *mod, const char *what, zl_layout *layout, PyObject *cls);
/* own_methods(cls): gives cls, a Python subclass of the adapter's types,
 * method descriptors of its own for the C methods it inherits, so that
 * CPython's specialized calls apply to them; the names, as a list. */
PyObject *zl_own_methods(PyObject *mod, PyObject *cls);
/* 1 when every field's name resolves, on tp, to the slot recorded (tp is
 * the recorded class or a subclass, and neither puts anything else under
 * a field's name), remembered as layout's checked class; else 0. Never
 * sets an exception (util.c). */
int zl_layout_check(const zl_layout *layout, PyTypeObject *tp);
/* Whether self's fields may be read and written in their slots: its class
 * is the one last checked, unchanged since (two loads), or passes the
 * check. */
ZL_ALWAYS_INLINE int zl_layout_direct(const zl_layout *layout, PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
#ifdef Py_GIL_DISABLED
    /* Without the GIL the pair (checked, checked_version) could be read
     * half written by another thread's check: the tag alone, one word
     * read and written atomically, names the class (tags are never
     * reused, 0 is none), and tp's own tag is read atomically, as a
     * class change writes it. */
    unsigned int tag = ZL_FT_LOAD(tp->tp_version_tag);
    return (tag != 0 && tag == ZL_FT_LOAD(layout->checked_version)) || zl_layout_check(layout, tp);
#else
    return (tp == layout->checked && tp->tp_version_tag == layout->checked_version) ||
           zl_layout_check(layout, tp);
#endif
}
/* Field f of self, borrowed, or NULL (no error set) when its slot may not
 * be read directly (zl_layout_direct) or is unset: then look the
 * attribute up. */
ZL_ALWAYS_INLINE PyObject *zl_layout_slot(const zl_layout *layout, PyObject *self, int f)
{
    if (!zl_layout_direct(layout, self))
        return NULL;
    return *(PyObject **)((char *)self + layout->offset[f]);
}
#ifdef Py_GIL_DISABLED
/* Field f of self as a new reference, or NULL (no error set) where
 * zl_layout_slot gives NULL. Without the GIL another thread may store
 * into the slot meanwhile and free what it held: the word is read and its
 * reference taken inside a critical section on self, which the slot's
 * descriptor holds while it stores (PyMember_SetOne, 3.13+; it drops the
 * value it replaced after leaving it). zl_layout_slot's borrowed word is
 * then only compared, never followed, but for the fields that asyncio
 * sets once in __init__ (a transport's _loop, its native state). */
static inline PyObject *zl_layout_slot_ref(const zl_layout *layout, PyObject *self, int f)
{
    if (!zl_layout_direct(layout, self))
        return NULL;
    PyObject *v;
    Py_BEGIN_CRITICAL_SECTION(self);
    v = Py_XNewRef(*(PyObject **)((char *)self + layout->offset[f]));
    Py_END_CRITICAL_SECTION();
    return v;
}
#endif
#ifdef Py_GIL_DISABLED
/* _PyType_Lookup's result as a strong reference, for a caller that
 * follows it (a descriptor's d_member, d_method): without the GIL another
 * thread may change the class and free what a borrowed lookup gave.
 * 3.14's _PyType_LookupRef; 3.13t exports it only internally: the
 * borrowed lookup, its reference taken at once. A result only compared
 * by identity stays a borrowed _PyType_Lookup. */
static inline PyObject *zl_type_lookup_ref(PyTypeObject *tp, PyObject *name)
{
#if PY_VERSION_HEX >= 0x030E0000
    return _PyType_LookupRef(tp, name);
#else
    return Py_XNewRef(_PyType_Lookup(tp, name));
#endif
}
/* A class's version tag before a cache looks it over, assigned if it has
 * none: remembered after the lookups, it is stale (and asks again) if
 * another thread changed the class meanwhile, where the tag read after
 * them would vouch for lookups made before the change. */
static inline unsigned int zl_tag_before_lookups(PyTypeObject *tp)
{
    PyUnstable_Type_AssignVersionTag(tp);
    return ZL_FT_LOAD(tp->tp_version_tag);
}
#endif
/* Field f by attribute lookup, and its truth so looked up (util.c): what
 * the two below fall back to. */
PyObject *zl_layout_lookup(const zl_layout *layout, PyObject *self, int f);
int zl_layout_lookup_true(const zl_layout *layout, PyObject *self, int f);
/* Field f as a C long by PyLong_AsLong, from its slot or looked up
 * (zl_layout_long's general case). */
int zl_layout_long_slow(const zl_layout *layout, PyObject *self, int f, long *out);
/* Field f, from its slot or by attribute lookup: a new reference, or NULL
 * with an exception set. */
ZL_ALWAYS_INLINE PyObject *zl_layout_get(const zl_layout *layout, PyObject *self, int f)
{
#ifdef Py_GIL_DISABLED
    PyObject *v = zl_layout_slot_ref(layout, self, f);
    return v != NULL ? v : zl_layout_lookup(layout, self, f);
#else
    PyObject *v = zl_layout_slot(layout, self, f);
    return v != NULL ? Py_NewRef(v) : zl_layout_lookup(layout, self, f);
#endif
}
/* A one-digit int's value in *out, read from the object (1), or 0 when v
 * is not an exact one-digit int (or the Python has no such API: 3.11),
 * which PyLong_AsLong then converts: the fields read for every packet
 * (a descriptor, a count of 0) are such ints, and the generic conversion
 * costs several times the read. */
static inline int zl_small_int(PyObject *v, long *out)
{
#if PY_VERSION_HEX >= 0x030C0000
    if (PyLong_CheckExact(v) && PyUnstable_Long_IsCompact((PyLongObject *)v)) {
        *out = (long)PyUnstable_Long_CompactValue((PyLongObject *)v);
        return 1;
    }
#endif
    (void)v;
    (void)out;
    return 0;
}
/* v as a C long in *out: 1 when v is an exact int that fits one (read
 * from the object when it is one digit), 0 otherwise (*out then says
 * nothing). Never sets an exception. */
static inline int zl_exact_long(PyObject *v, long *out)
{
    int overflow = 0;
    if (zl_small_int(v, out))
        return 1;
    if (!PyLong_CheckExact(v))
        return 0;
    *out = PyLong_AsLongAndOverflow(v, &overflow);
    return !overflow;
}
/* Field f's truth (1, 0) or -1 with an exception set. */
ZL_ALWAYS_INLINE int zl_layout_true(const zl_layout *layout, PyObject *self, int f)
{
#ifdef Py_GIL_DISABLED
    /* the value's truth asked with a reference held (zl_layout_slot_ref) */
    PyObject *v = zl_layout_slot_ref(layout, self, f);
    long small;
    if (v == NULL)
        return zl_layout_lookup_true(layout, self, f);
    int r = v == Py_False || v == Py_None ? 0
            : v == Py_True                ? 1
            : zl_small_int(v, &small)     ? small != 0
                                          : PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
#else
    PyObject *v = zl_layout_slot(layout, self, f);
    long small;
    if (v == Py_False || v == Py_None)
        return 0;
    if (v == Py_True)
        return 1;
    if (v == NULL)
        return zl_layout_lookup_true(layout, self, f);
    return zl_small_int(v, &small) ? small != 0 : PyObject_IsTrue(v);
#endif
}
/* Field f as a C long in *out: 0, or -1 with an exception set. */
static inline int zl_layout_long(const zl_layout *layout, PyObject *self, int f, long *out)
{
#ifdef Py_GIL_DISABLED
    PyObject *v = zl_layout_slot_ref(layout, self, f);
    int small = v != NULL && zl_small_int(v, out);
    Py_XDECREF(v);
    if (small)
        return 0;
#else
    PyObject *v = zl_layout_slot(layout, self, f);
    if (v != NULL && zl_small_int(v, out))
        return 0;
#endif
    return zl_layout_long_slow(layout, self, f, out);
}
/* Grows *buf (of *cap items of size bytes, *cap 0 when never allocated)
 * to at least need items, doubling from first; the raw allocator, so no
 * GIL is needed. 0, or -1 when out of memory (no exception set). */
int zl_grow_raw(void **buf, int64_t *cap, int64_t first, int64_t need, size_t size);

/* capi/runtime.c */
extern int zl_forked_child; /* set in a child forked after the engine started */
int zl_runtime_init(void);
int zl_check_not_forked(void);
PyObject *zl_set_asyncio(PyObject *mod, PyObject *args);
PyObject *zl_forked_child_flag(PyObject *mod, PyObject *unused);

/* capi/clock.c */
double zl_monotonic(void);
/* loop.time(), LoopCore's own method: the clock above, in seconds. */
PyObject *zl_loop_time(zl_loop *L, PyObject *unused);
int64_t zl_monotonic_ns(void);    /* the same clock in nanoseconds */
double zl_clock_resolution(void); /* its resolution in seconds, for the engine */
/* Notices a loop.time() replaced on the loop's class. 0 or -1. */
int zl_clock_check(zl_loop *L);
/* zl_clock_check, then, if the clock is replaced, reads it for the engine
 * (zl_shared.fake_now). 0, or -1 with the clock's exception set. */
int zl_clock_sync(zl_loop *L);
/* loop.time() as the program sees it, a new reference. */
PyObject *zl_clock_now(zl_loop *L);
/* The program replaced loop.time(). */
static inline int zl_clock_replaced(const zl_loop *L) { return L->clock.replacement != NULL; }
int zl_clock_traverse(zl_loop *L, visitproc visit, void *arg);
void zl_clock_clear(zl_loop *L);
int zl_loop_setattro(PyObject *self, PyObject *name, PyObject *value);

/* capi/context.c */
int zl_context_init(void);
/* A new reference to a snapshot of the current context, shared through
 * the loop's cache while the current context's variables are the same. */
PyObject *zl_context_snapshot(zl_loop *L);
/* A new reference to a context a handle may run in: the snapshot itself
 * if only the caller holds it, the loop's spare if it has the snapshot's
 * variables, else a copy. */
PyObject *zl_context_private(zl_loop *L, PyObject *snapshot);
/* A private context a handle is done with: kept as the loop's spare if
 * nothing else can reach it, else released. Steals ctx. */
void zl_context_recycle(zl_loop *L, PyObject *ctx);
/* A context of a handle is handed out (get_context): on the collector's
 * lists again if this file took it off. */
void zl_context_escape(PyObject *ctx);
/* Drops a reference to a context that may be off the collector's lists. */
void zl_context_release(PyObject *ctx);
/* Drops a reference to a context held elsewhere too (a Task's, or a
 * snapshot other handles share). A GIL build's count says so for certain,
 * and the last holder's zl_context_release tracks it: a plain decref. In a
 * free-threaded build the others may be letting go on other threads at
 * the same moment, and ZL_UNIQUE is false for a context another thread
 * made even where this is its one reference: zl_context_release's way. */
#ifdef Py_GIL_DISABLED
#define zl_context_drop_shared(ctx) zl_context_release(ctx)
#else
#define zl_context_drop_shared(ctx) Py_DECREF(ctx)
#endif
void zl_context_cache_clear(zl_loop *L);
int zl_context_traverse(zl_loop *L, visitproc visit, void *arg);
/* _engine.set_handle_context(handle, context) */
PyObject *zl_set_handle_context(PyObject *mod, PyObject *args);
/* _engine.context_layout_ok() */
PyObject *zl_context_layout_ok(PyObject *mod, PyObject *unused);

/* ==== Handles and timers ==== */

/* capi/handle_lock.c: the recursive lock a _ThreadSafeHandle of the
 * adapter's holds in `_lock` */
/* Makes the module's HandleLock type (state->lock_type): 0 or -1. */
int zl_handle_lock_type_new(PyObject *module, zl_module_state *state);
/* A new lock, free, of the module's type. */
PyObject *zl_handle_lock_new(zl_module_state *state);
/* Whether obj is such a lock (of any module's type). */
int zl_is_handle_lock(PyObject *obj);
/* Takes it for the calling thread, waiting with the GIL released while
 * another holds it: 0, or -1 with an exception set (a signal handler's). */
int zl_handle_lock_acquire(PyObject *lock);
/* Gives it back once: 0, or -1 (RuntimeError) if this thread holds it not. */
int zl_handle_lock_release(PyObject *lock);

/* capi/handle.c */
/* The loop's free lists of handles may be used by the calling thread: in
 * a free-threaded build only the running loop's own (a handle's dealloc
 * runs on whichever thread drops it last), in a GIL build any. */
#ifdef Py_GIL_DISABLED
#define zl_pool_here(L) zl_running_here(L)
#else
#define zl_pool_here(L) 1 /* a constant, as zl_check_owner's */
#endif
/* pending: it goes to the ready queue or a timer slot, which hold it off
 * the collector's lists (not in a free-threaded build, where every handle
 * is tracked at once: ZL_FT_TRACKS_PENDING, capi/pending.c); else it is
 * tracked at once. */
#ifdef Py_GIL_DISABLED
#define ZL_FT_TRACKS_PENDING 1
#else
#define ZL_FT_TRACKS_PENDING 0
#endif
zl_handle *zl_handle_new(zl_loop *loop, PyTypeObject *type, PyObject *callback,
                         PyObject *const *args, Py_ssize_t nargs, PyObject *context, int pending);
/* The rest of zl_handle_new once h's memory is ready (h initialised as
 * an object, zeroed from `loop` on, `args` pointing where its nargs
 * arguments go): its call, its loop and its context, in that order. h, or
 * NULL with the exception set (h released) if the context's snapshot
 * failed. Inline: zl_handle_new_soon makes most handles with it. */
ZL_ALWAYS_INLINE zl_handle *zl_handle_fill(zl_loop *L, zl_handle *h, PyObject *callback,
                                           PyObject *const *args, Py_ssize_t nargs,
                                           PyObject *context, int pending)
{
    for (Py_ssize_t i = 0; i < nargs; i++)
        h->args[i] = Py_NewRef(args[i]);
    h->nargs = (int32_t)nargs;
    h->callback = Py_NewRef(callback);
    h->loop = (zl_loop *)Py_NewRef((PyObject *)L);
    if (context == NULL || context == Py_None) {
        /* the current context as of now, shared with other handles
         * scheduled in the same one (capi/context.c) */
        h->context = zl_context_snapshot(L);
        if (h->context == NULL) {
            Py_DECREF(h);
            return NULL;
        }
        h->context_snapshot = 1;
    } else {
        h->context = Py_NewRef(context);
    }
    /* A handle going to the ready queue or a timer slot stays off the
     * collector's lists while it waits there (see zl_handle_release); a
     * free-threaded build tracks every handle (capi/pending.c says why). */
    if (!pending || ZL_FT_TRACKS_PENDING)
        PyObject_GC_Track(h);
    return h;
}
/* zl_handle_new(L, L's Handle type, ..., pending), what call_soon makes:
 * a handle from the loop's free list with its arguments inline is made
 * here, inline in the caller, by zl_handle_new's steps for it (the call,
 * the choice of a free list and the checks of the type and of the
 * arguments' count are what this leaves out); any other by zl_handle_new. */
ZL_ALWAYS_INLINE zl_handle *zl_handle_new_soon(zl_loop *L, PyObject *callback,
                                               PyObject *const *args, Py_ssize_t nargs,
                                               PyObject *context)
{
    zl_handle_pool *pool = &L->callbacks.handle_pool;
    PyTypeObject *type = L->state->handle_type;
    if (!zl_pool_here(L) || pool->n <= 0 || nargs > ZL_INLINE_ARGS) /* whose list first */
        return zl_handle_new(L, type, callback, args, nargs, context, 1);
    zl_handle *h = pool->items[--pool->n];
    (void)PyObject_Init((PyObject *)h, type);
    memset(&h->loop, 0, sizeof(zl_handle) - offsetof(zl_handle, loop));
    h->args = h->inline_args;
    return zl_handle_fill(L, h, callback, args, nargs, context, 1);
}
/* Drops the ready queue's or a timer slot's reference. */
void zl_handle_release(zl_handle *h);
/* The handle's list of weak references: asyncio's Handle has one, in its
 * __weakref__ slot up to 3.11, before the object from 3.12 (a negative
 * tp_weaklistoffset, as CPython itself reads it). */
static inline PyObject **zl_handle_weakrefs(zl_handle *h)
{
    return (PyObject **)((char *)h + Py_TYPE(h)->tp_weaklistoffset);
}
/* Nothing but its queue or slot references h, and no weak reference
 * (inline: pending.c asks it of nearly every call_soon's handle). */
static inline int zl_handle_alone(zl_handle *h)
{
    return ZL_UNIQUE(h) && *zl_handle_weakrefs(h) == NULL;
}
/* Visits a handle held by the ready queue or a timer slot (pending.c). */
int zl_visit_pending(zl_handle *h, visitproc visit, void *arg);
int zl_handle_traverse(zl_handle *h, visitproc visit, void *arg);
int zl_handle_clear(zl_handle *h);
/* tp_dealloc of Handle and TimerHandle: back to the loop's free list. */
void zl_handle_dealloc(zl_handle *h);
/* handle._args: a new tuple, or None once the call is released. */
PyObject *zl_handle_args(zl_handle *h);
/* Frees the loop's pools of freed handles. */
void zl_handle_pools_free(zl_loop *L);
int zl_handle_run(zl_handle *h);
/* Callbacks started so far (stats.c). */
static inline uint64_t zl_callbacks_started(const zl_loop *L) { return L->callbacks.started; }
/* Runs a handle as the loop's batch does: zl_handle_run, or in debug mode
 * zloopgo's Python edge (timed, slow callbacks logged). 0 or -1. */
int zl_handle_run_in_batch(zl_handle *h);
/* Calls callback(*args) in *context (first made the call's own if it is a
 * shared snapshot, *snapshot cleared then), as a callback of loop L. The
 * result, or NULL with the callback's exception set. */
PyObject *zl_run_call(zl_loop *L, PyObject *callback, PyObject *const *args, Py_ssize_t nargs,
                      PyObject **context, char *snapshot);
/* callback(*args) in ctx, an exact Context that is the call's own (not a
 * shared snapshot), as a callback of loop L: zl_run_call's last step, and
 * what a ready entry scheduled with context= (a Task's step, a future's
 * callback) takes directly (ready.c). */
static inline PyObject *zl_call_in_context(zl_loop *L, PyObject *callback, PyObject *const *args,
                                           Py_ssize_t nargs, PyObject *ctx)
{
    if (PyContext_Enter(ctx) < 0)
        return NULL;
    Py_ssize_t refs = Py_REFCNT(ctx);
    L->callbacks.started++;
    PyObject *res = PyObject_Vectorcall(callback, args, nargs, NULL);
    /* A reference the callback kept to its context (the Token of a
     * ContextVar.set holds one) may be the last to go: the context must
     * then be on the collector's lists, which its dealloc unlinks it from
     * (capi/context.c keeps snapshots off them). */
    if (Py_REFCNT(ctx) > refs)
        zl_context_escape(ctx);
    PyContext_Exit(ctx);
    return res;
}
/* The pending exception of a callback goes to loop L's exception handler
 * naming `handle`, as asyncio's Handle._run reports it: from inside its
 * `except BaseException as exc:`, so that the handler runs with exc as the
 * exception being handled (sys.exc_info(), logging.exception(), the
 * __context__ of what it raises). SystemExit and KeyboardInterrupt (and a
 * failure of the handler) return -1, still set. Called with the exception
 * pending. */
int zl_report_callback_exception(zl_loop *L, PyObject *handle);
/* zl_report_callback_exception naming h, a handle of the adapter's. */
int zl_handle_report_exception(zl_handle *h);
/* Whether call is 3.14's _ThreadSafeHandle runner (schedule.c). Its run
 * reports its callback's exception itself, as _ThreadSafeHandle._run does;
 * what it raises is a failure of _run itself (of that report, of the
 * handle's lock), which asyncio lets escape the loop's run: the caller
 * returns it, not reports it as the runner's own. */
static inline int zl_is_threadsafe_runner(const zl_loop *L, PyObject *call)
{
    return call != NULL && call == L->state->threadsafe.runner;
}
/* Whether the interpreter's _Py_Dealloc does nothing but call the type's
 * tp_dealloc: up to 3.12 in a build without reference debugging, tracing
 * or statistics. From 3.13 it tells a reference tracer (PyRefTracer) of
 * the object's end first, and from 3.14 it also keeps the C stack
 * (a trashcan), which a handle's freeing must go through. */
#if PY_VERSION_HEX < 0x030D0000 && !defined(Py_REF_DEBUG) && !defined(Py_TRACE_REFS) && \
    !defined(Py_STATS)
#define ZL_DEALLOC_IS_TP_DEALLOC 1
#else
#define ZL_DEALLOC_IS_TP_DEALLOC 0
#endif
/* zl_handle_dealloc's way for a handle handed over (zl_handle_hand_over),
 * its reference count 0: what releasing it leaves to do (handle.c). */
void zl_handle_free_handed_over(zl_handle *h);
/* h, alone (zl_handle_alone), never tracked (a free-threaded build untracks it here), an exact Handle of its loop
 * with at most one argument (inline: args is inline_args), nothing debug
 * mode recorded and no run in progress, waits at entry e: its call moves
 * into e and the queue's reference, the last, is dropped; h goes back to
 * its loop's free list by zl_handle_free_handed_over. Inline, with
 * zl_ready_take_call, in pending.c's look at the last handle made, which
 * nearly every call_soon takes: one call there instead of three. h's own
 * fields are left as they are: nothing reads them again (the reference
 * tracer of 3.13+, told of h's end, finds its call there, as asyncio's
 * Handle has its own until it goes). */
static inline void zl_handle_hand_over(zl_handle *h, zl_entry *e)
{
    _Static_assert(ZL_ENTRY_SNAPSHOT == 1, "context_snapshot is the flag");
#ifdef Py_GIL_DISABLED
    /* tracked since it was made (ZL_FT_TRACKS_PENDING); the free list and
     * the short way of its dealloc keep only untracked memory. The
     * collector's stop-the-world cannot fall between zl_handle_alone and
     * here (no safe point), so no other thread found it meanwhile. */
    PyObject_GC_UnTrack(h);
#endif
    e->call = h->callback;
    e->nargs = (uint32_t)h->nargs;
    e->arg = h->inline_args[0];
    e->context = h->context;
    e->flags = (uint32_t)h->context_snapshot;
#if ZL_DEALLOC_IS_TP_DEALLOC
    /* Py_DECREF's way, its tp_dealloc's turn taken directly */
    Py_SET_REFCNT(h, 0);
    zl_handle_free_handed_over(h);
#else
    h->handed_over = 1;
    Py_DECREF(h); /* the queue's, the last one: zl_handle_dealloc's short way */
#endif
}
/* Handle.cancel(): -1 with the exception set when the repr asyncio takes
 * in debug mode raises (the handle is cancelled, its callback kept). */
int zl_handle_cancel(zl_handle *h);
/* Whether the collector cleared h (tp_clear): a handle has its loop from
 * its making until then. */
static inline int zl_handle_is_cleared(const zl_handle *h) { return h->loop == NULL; }
/* What reading asyncio's slot `name` of a cleared handle raises
 * (handle.c): NULL with that AttributeError set. */
PyObject *zl_handle_cleared_attribute(zl_handle *h, const char *name);
/* Makes the module's Handle type (state->handle_type) and reads asyncio's
 * Handle._run: 0 or -1. */
int zl_handle_type_made(PyObject *module, zl_module_state *state);
/* The type of spec as a subclass of asyncio.events.<name> (Handle or
 * TimerHandle), named <name>, made from the module; NULL with ImportError
 * set if asyncio's class has not the instance layout zl_handle begins
 * with (our fields at fields_at). */
PyTypeObject *zl_handle_type_new(PyObject *module, PyType_Spec *spec, const char *name,
                                 Py_ssize_t fields_at);
/* What Handle defines, for TimerHandle to define too (it does not inherit
 * them: its base is asyncio's TimerHandle): the methods and attributes,
 * each list ending with an empty entry. The repr of both is asyncio's own
 * __repr__ and _repr_info, which read ours. */
extern PyMethodDef zl_handle_methods[];
extern PyGetSetDef zl_handle_getset[];
/* The handle's debug record, made on first use; NULL with MemoryError set. */
zl_handle_debug *zl_handle_debug_info(zl_handle *h);

/* capi/ready.c: the ready queue (ready.ring, ready.cap, ready.head, sh.ready_len).
 * Push and pop are here, inline, because every call_soon pushes. */
int zl_ready_make(zl_loop *L);
/* Doubles the full ring; -1 with MemoryError set. */
int zl_ready_grow(zl_loop *L);
/* Releases every queued handle. */
void zl_ready_clear(zl_loop *L);
int zl_ready_traverse(zl_loop *L, visitproc visit, void *arg);
void zl_ready_free(zl_loop *L);

#ifdef Py_GIL_DISABLED
/* Free-threaded builds: the inbox (zl_inbox). */
/* Queues e from a thread that may not push into the ring (not the running
 * loop's); the entry's references move to the inbox. 0, or -1 with
 * MemoryError set (the entry is the caller's still). */
int zl_inbox_push(zl_loop *L, zl_entry e);
/* Moves what the inbox holds into the ring, in the order it came: 0, or
 * -1 with MemoryError set (what did not fit stays in the inbox). */
int zl_inbox_take(zl_loop *L);
/* Whether the inbox holds anything, asked under its mutex: what the loop
 * asks once `polling` is set, before its wait (dispatch.c). */
int zl_inbox_waiting(zl_loop *L);
#endif
/* Before the loop's thread pushes into the ring or runs a batch: what
 * other threads queued goes first, so that a call another thread queued
 * before this one (as far as the program can tell) runs before it, as in
 * asyncio's one deque. 0, or -1 with MemoryError set; nothing in a GIL
 * build, whose pushes all go into the ring (a constant there, as
 * zl_check_owner's). */
#ifdef Py_GIL_DISABLED
static inline int zl_ready_sync(zl_loop *L)
{
    return ZL_FT_LOAD(L->inbox.len) != 0 ? zl_inbox_take(L) : 0;
}
#else
#define zl_ready_sync(L) 0
#endif

/* The slot after the last entry (the ring grown if it was full), which
 * the caller fills and then counts; NULL with MemoryError set. */
static inline zl_entry *zl_ready_tail(zl_loop *L)
{
    if (zl_ready_sync(L) < 0)
        return NULL;
    if (L->sh.ready_len == L->ready.cap && zl_ready_grow(L) < 0)
        return NULL;
    return &L->ready.ring[(L->ready.head + L->sh.ready_len) & (L->ready.cap - 1)];
}

static inline int zl_ready_push(zl_loop *L, zl_handle *h) /* steals h */
{
    zl_entry *e = zl_ready_tail(L);
    if (e == NULL) {
        Py_DECREF(h);
        return -1;
    }
    e->call = (PyObject *)h;
    e->flags = ZL_ENTRY_HANDLE;
    L->sh.ready_len++;
    return 0;
}

/* Queues call(arg) as a ZL_ENTRY_BARE entry; steals arg (even on failure). */
static inline int zl_ready_push_bare(zl_loop *L, PyObject *call, PyObject *arg)
{
    zl_entry *e = zl_ready_tail(L);
    if (e == NULL) {
        Py_DECREF(arg);
        return -1;
    }
    e->call = Py_NewRef(call);
    e->arg = arg;
    e->context = NULL;
    e->nargs = 1;
    e->flags = ZL_ENTRY_BARE;
    L->sh.ready_len++;
    return 0;
}

/* The entry at the head, taken out (the caller owns its references). */
static inline zl_entry zl_ready_pop(zl_loop *L)
{
    zl_entry e = L->ready.ring[L->ready.head];
    L->ready.head = (L->ready.head + 1) & (L->ready.cap - 1);
    L->ready.popped++;
    L->sh.ready_len--;
    return e;
}

/* The position the next push takes (for zl_ready_take_call). */
static inline uint64_t zl_ready_next_pos(const zl_loop *L)
{
    return L->ready.popped + (uint64_t)L->sh.ready_len;
}

/* The handle h, alone, at position pos: its entry takes over its call and
 * the handle is released (nothing if the entry is popped already). */
static inline void zl_ready_take_call(zl_loop *L, uint64_t pos, zl_handle *h)
{
    uint64_t offset = pos - L->ready.popped;
    if (offset >= (uint64_t)L->sh.ready_len)
        return; /* popped already */
    zl_entry *e = &L->ready.ring[(L->ready.head + (int64_t)offset) & (L->ready.cap - 1)];
    if (!(e->flags & ZL_ENTRY_HANDLE) || e->call != (PyObject *)h)
        return;
    zl_handle_hand_over(h, e);
}
/* Drops what a popped entry that is not a handle holds. */
void zl_entry_release(zl_loop *L, zl_entry *e);
/* Runs the call of a popped entry that is not a handle, as zl_handle_run
 * runs a handle's (an exception is reported with a Handle made for it). */
int zl_entry_run(zl_loop *L, zl_entry *e);
/* zl_entry_run, then zl_entry_release: the batch's one call per entry. */
int zl_entry_run_release(zl_loop *L, zl_entry *e);

/* capi/pending.c: pending handles and the collector */
/* Hooks the collector of the module's interpreter (gc.callbacks) to the
 * module state's live loops, through a weak reference to the module
 * (state->gc_hook); zl_pending_fini unhooks it when the module goes. */
int zl_pending_init(PyObject *module, zl_module_state *state);
void zl_pending_fini(zl_module_state *state);
/* h was just made and waits in the ready queue at pos, or (a TimerHandle,
 * pos unused) in a timer slot. Inline (every call_soon notes its handle);
 * pending.c's. */
static inline void zl_pending_note(zl_loop *L, zl_handle *h, uint64_t pos)
{
    L->pending.last = h;
    L->pending.pos = pos;
}
/* h is about to be released by its slot: it is no longer the one to look at. */
void zl_pending_forget(zl_loop *L, zl_handle *h);
/* Nothing to look at (the loop is closing or breaking a cycle). */
void zl_pending_reset(zl_loop *L);
/* Looks at the last handle made: tracked if something else holds it,
 * else its call moves into its ready-queue entry. */
void zl_pending_check(zl_loop *L);
void zl_pending_loop_added(zl_loop *L);
void zl_pending_loop_removed(zl_loop *L);

/* capi/timers.c: timer slots (sh.slots, slots_cap, slots_free) and the
 * new-timer buffer (sh.new_timers, new_timers_cap) */
void zl_timers_make(zl_loop *L);
/* Gives h a slot and tells the engine of it; -1 with MemoryError set. */
int zl_timer_slot_alloc(zl_loop *L, zl_timer *h);
/* h was cancelled: its slot is marked for the engine, its handle released. */
void zl_timer_cancelled(zl_loop *L, zl_timer *h);
/* The engine handed back `slot`: its handle (if not cancelled) is queued.
 * A timer whose deadline is not a float (ZL_WHEN_CONVERTED, _ODD) is
 * first asked what asyncio's _run_once asks the earliest timer: with
 * nothing ready and no stop asked for (idle), `when - time()`; then
 * `when >= time() + resolution`. Due, it is queued; not due, or if either
 * raised, it takes a slot again; -1 with that exception set. */
int zl_timer_due(zl_loop *L, uint32_t slot, int idle);
/* What asyncio's heappush of a new timer compares it with, if its heap
 * holds a timer: the `when` of the earliest timer held (a float for a
 * cancelled one, whose deadline is no longer kept), a new reference in
 * *when, its deadline as the engine has it in *deadline, and 1; 0 if no
 * timer is held; -1 with MemoryError. It looks at every slot. */
int zl_timers_held_when(zl_loop *L, PyObject **when, double *deadline);
/* Drops every timer: on close, with the engine's heap dropped too. */
void zl_timers_release_all(zl_loop *L);
/* Cancels every timer, keeping the slots the engine may hold. */
void zl_timers_cancel_all(zl_loop *L);
int zl_timers_traverse(zl_loop *L, visitproc visit, void *arg);
void zl_timers_free(zl_loop *L);

/* capi/timer_handle.c */
int zl_timer_handle_type_init(void);
/* Makes the module's TimerHandle type (state->timer_handle_type): 0 or -1. */
int zl_timer_handle_type_made(PyObject *module, zl_module_state *state);
/* TimerHandle.cancel(): the handle's cancel, and its slot marked. */
int zl_timer_cancel(zl_timer *h);

/* capi/schedule.c: call_soon, call_soon_threadsafe, call_later, call_at */
/* Installs (events._ThreadSafeHandle,) for 3.14+'s call_soon_threadsafe;
 * returns the callable that runs one such handle. */
PyObject *zl_set_threadsafe_handle(PyObject *mod, PyObject *args);
/* Forgets the keyword tuple it remembers (breaking a cycle, closing). */
void zl_schedule_clear(zl_loop *L);
PyObject *zl_loop_call_soon(zl_loop *L, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *zl_loop_call_soon_threadsafe(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                                       PyObject *kwnames);
PyObject *zl_loop_call_later(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames);
PyObject *zl_loop_call_at(zl_loop *L, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);

/* capi/tasks.c */
PyObject *zl_loop_create_future(zl_loop *L, PyObject *unused);
PyObject *zl_loop_create_task(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames);
PyObject *zl_loop_get_task_factory(zl_loop *L, void *c);
int zl_loop_set_task_factory(zl_loop *L, PyObject *v, void *c);
int zl_tasks_traverse(zl_loop *L, visitproc visit, void *arg);
void zl_tasks_clear(zl_loop *L);

/* ==== Descriptors ==== */

/* capi/fds.c: the descriptor table (fds.entries, fds.cap, fds.watch_changed) */
/* A ready descriptor queues its handles (zl_dispatch). */
void zl_fd_event(zl_loop *L, uint64_t fd, uint32_t mask);
void zl_fds_release_all(zl_loop *L);
int zl_fds_traverse(zl_loop *L, visitproc visit, void *arg);
void zl_fds_free(zl_loop *L);
PyObject *zl_loop_add_reader(zl_loop *L, PyObject *const *a, Py_ssize_t n);
PyObject *zl_loop_add_writer(zl_loop *L, PyObject *const *a, Py_ssize_t n);
PyObject *zl_loop_remove_reader(zl_loop *L, PyObject *fd);
PyObject *zl_loop_remove_writer(zl_loop *L, PyObject *fd);
PyObject *zl_loop_watch_state(zl_loop *L, PyObject *arg);
PyObject *zl_loop_find_fileobj(zl_loop *L, PyObject *fileobj);
/* Whether a descriptor was watched for more since the last call (it may
 * be ready already: the next wait must not be skipped); resets it. */
int zl_fds_take_watch_changed(zl_loop *L);
int zl_fds_only_self_pipe(zl_loop *L);
PyObject *zl_loop_set_self_pipe(zl_loop *L, PyObject *const *args, Py_ssize_t nargs);

/* capi/sockets.c: a socket.socket's descriptor and timeout, read from its
 * C layout at the moment of a system call (what its recv and send read):
 * the head of the socket module's PySocketSockObject (Modules/
 * socketmodule.h, the same on CPython 3.10 to 3.15 on POSIX), which
 * sockets.c checks at import. */
typedef struct {
    PyObject_HEAD
    zl_sys_socket sock_fd;
    int sock_family;
    int sock_type;
    int sock_proto;
    PyObject *(*errorhandler)(void);
    int64_t sock_timeout; /* nanoseconds; 0: non-blocking, negative: blocking */
} zl_socket_head;
extern int zl_socket_layout_known; /* zl_socket_head passed the self-test */
/* What the two below give for anything but a plain socket.socket (its
 * interpreter's: socket_type, from the module's state; NULL for none)
 * whose layout is known: call the object's own methods. */
#define ZL_NOT_A_SOCKET (-2)
/* The descriptor sock holds now: -1 once it is closed (a system call on it
 * then fails with EBADF, as the socket's own methods do). */
static inline int zl_socket_fd(const PyTypeObject *socket_type, PyObject *sock)
{
    if (!zl_socket_layout_known || Py_TYPE(sock) != socket_type)
        return ZL_NOT_A_SOCKET;
    /* a relaxed load in a free-threaded build: a close on another thread
     * stores -1 there, as the socket module's own reads allow for */
    return ZL_FT_LOAD(((zl_socket_head *)sock)->sock_fd);
}
/* The same for a socket in non-blocking mode (timeout 0.0), which one
 * system call serves as its recv and send serve it; ZL_NOT_A_SOCKET in
 * any other mode too. */
static inline int zl_socket_nonblocking_fd(const PyTypeObject *socket_type, PyObject *sock)
{
    if (!zl_socket_layout_known || Py_TYPE(sock) != socket_type)
        return ZL_NOT_A_SOCKET;
    const zl_socket_head *s = (const zl_socket_head *)sock;
    return ZL_FT_LOAD(s->sock_timeout) == 0 ? ZL_FT_LOAD(s->sock_fd) : ZL_NOT_A_SOCKET;
}
int zl_sockets_init(void);
/* The module's socket.socket, into state->socket_type. */
int zl_sockets_state_new(zl_module_state *state);
/* _engine.socket_layout_ok() */
PyObject *zl_socket_layout_ok(PyObject *mod, PyObject *unused);

/* ==== Transports ==== */

/* capi/streamfeed.c */
PyObject *zl_set_streams(PyObject *mod, PyObject *args);
/* Hands n bytes read by a transport to protocol's asyncio.StreamReader
 * natively: 1 if done, 0 if protocol is not one the fast path serves (the
 * caller calls data_received), -1 with the exception data_received would
 * have raised. */
int zl_stream_feed(zl_module_state *state, PyObject *protocol, const char *buf, Py_ssize_t n);

/* capi/transport.c */
/* Makes StreamFastPaths and TransportState from the module, into state. */
int zl_transport_types_new(PyObject *module, zl_module_state *state);
PyObject *zl_set_transport_layout(PyObject *mod, PyObject *cls);
/* callback is a socket transport's native _read_ready method */
int zl_is_native_read(PyObject *callback);
/* Frees the loop's receive buffer. */
void zl_rx_free(zl_loop *L);
/* Where a read of up to `size` bytes lands before it is copied out: the
 * loop's receive buffer (L may be NULL), or one of its own in *own when
 * that one is busy; NULL with MemoryError set. zl_rx_give_back returns it
 * once the bytes are copied out, before any Python code runs. */
char *zl_rx_take(zl_loop *L, size_t size, char **own);
void zl_rx_give_back(zl_loop *L, char *own);
/* Forgets what the last native read did (zl_dispatch, before a callback). */
static inline void zl_transport_forget_read(zl_loop *L) { L->rx.quiet_read = 0; }
/* The native read since zl_transport_forget_read fed a StreamReader
 * natively and drained its socket: no Python code of the program ran. */
static inline int zl_transport_read_was_quiet(const zl_loop *L) { return L->rx.quiet_read; }

/* capi/transport.c: the protocol (tls.c) tells the socket transport that
 * the buffer_updated it is in handed the bytes on without running program
 * code or writing, so that the read counts as quiet (dispatch.c). */
void zl_transport_fed_quietly(const zl_module_state *st, PyObject *transport);

/* ==== TLS ==== */

/* capi/tls.c */
/* Makes TLSFastPaths and TLSTransportFastPaths from the module, into state. */
int zl_tls_types_new(PyObject *module, zl_module_state *state);
/* Drops what set_tls recorded but the layouts' classes (the module's
 * clear drops those): at the module's free. */
void zl_tls_state_free(zl_module_state *state);
/* _engine.set_tls(SSLProtocol, SSLProtocolState, SSLAgainErrors, SSLObject,
 * is_closing_asks_transport, zloopgo's SSLProtocol, its app transport) */
PyObject *zl_set_tls(PyObject *mod, PyObject *args);

/* ==== Datagrams ==== */

/* capi/datagram.c */
/* Makes DatagramFastPaths and DatagramState from the module, into state. */
int zl_datagram_types_new(PyObject *module, zl_module_state *state);
PyObject *zl_set_datagram_layout(PyObject *mod, PyObject *cls);

/* ==== Socket methods ==== */

/* capi/sockops.c: LoopCore's sock_recv, sock_recv_into and sock_sendall steps */
/* The receives from a plain socket that land in the loop's receive buffer
 * (rx), RX_FROM to RX_LIMIT bytes (the module's SOCK_RX_FROM and
 * SOCK_RX_LIMIT, which zloopgo's Python steps take too): from glibc's
 * initial mmap threshold up to what the buffer, which keeps the size of
 * its largest receive, may keep. */
#define ZL_SOCK_RX_FROM (128 * 1024)
#define ZL_SOCK_RX_LIMIT (1 << 20)
/* The module's functools.partial and weakref.WeakValueDictionary, into state. */
int zl_sockops_state_new(zl_module_state *state);
PyObject *zl_loop_sock_recv_now(zl_loop *L, PyObject *const *args, Py_ssize_t nargs);
PyObject *zl_loop_sock_sendall_now(zl_loop *L, PyObject *const *args, Py_ssize_t nargs);
PyObject *zl_loop_sock_recv_step(zl_loop *L, PyObject *const *args, Py_ssize_t nargs);
PyObject *zl_loop_sock_recv_into_now(zl_loop *L, PyObject *const *args, Py_ssize_t nargs);
PyObject *zl_loop_sock_recv_into_step(zl_loop *L, PyObject *const *args, Py_ssize_t nargs);
PyObject *zl_loop_sock_sendall_step(zl_loop *L, PyObject *const *args, Py_ssize_t nargs);
PyObject *zl_loop_sock_read_done(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames);
PyObject *zl_loop_sock_write_done(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames);

/* ==== Resolver and files ==== */

/* capi/workers.c: declared in workers.h, which knows no Python (the
 * ThreadSanitizer harness, scripts/reliability/tsan_pool.c, builds it
 * alone) */

/* capi/resolver.c */
int zl_resolver_init(void);
/* The module's socket.gaierror and AddressFamily/SocketKind members, into state. */
int zl_resolver_state_new(zl_module_state *state);
PyObject *zl_loop_getaddrinfo(zl_loop *L, PyObject *args);
PyObject *zl_loop_getnameinfo(zl_loop *L, PyObject *args);
PyObject *zl_loop_lookups_in_flight(zl_loop *L, PyObject *unused);
/* Lookups whose futures still wait (stats.c). */
static inline Py_ssize_t zl_lookups_waiting(const zl_loop *L)
{
    return L->lookups.futures ? PyDict_GET_SIZE(L->lookups.futures) : 0;
}
/* Lookups queued so far (their tokens count from 1). */
static inline uint64_t zl_lookups_queued(const zl_loop *L) { return L->lookups.counter; }
/* Settles n completions of lookups. */
void zl_settle_lookups(zl_loop *L, const zl_completion *done, int64_t n);
void zl_drop_lookups(zl_loop *L);
int zl_lookups_traverse(zl_loop *L, visitproc visit, void *arg);

/* capi/files.c (the operation itself, and the platform part it calls:
 * capi/files.h) */
/* Adds the operations' numbers to a module object (FILE_OP_OPEN, ...):
 * each exec. */
int zl_files_constants_add(PyObject *module);
PyObject *zl_file_op(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *zl_file_workers(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *zl_file_stats(PyObject *mod, PyObject *unused);
PyObject *zl_files_graveyard_drain(PyObject *mod, PyObject *unused);
/* Settles n completions of file operations. */
void zl_settle_files(zl_loop *L, const zl_completion *done, int64_t n);

/* ==== Loop core ==== */

/* capi/dispatch.c: the engine's calls into C, declared in bridge.h */

/* capi/loop.c */
/* LoopCore, made from the module (a heap type per interpreter); NULL
 * with an exception set. */
PyTypeObject *zl_loop_type_new(PyObject *module);
/* asyncio's _check_closed. The loop's one closed flag is asyncio's
 * _closed (loop.c stores it here); the engine is released only after it
 * is set. */
static inline int zl_check_closed(zl_loop *L)
{
    if (ZL_FT_LOAD(L->closed)) {
        PyErr_SetString(PyExc_RuntimeError, "Event loop is closed");
        return -1;
    }
    return 0;
}

/* ==== Stats ==== */

/* capi/stats.c: zloopgo.stats() and what goes with it */
PyObject *zl_stats(PyObject *mod, PyObject *loop);
PyObject *zl_reset_stats(PyObject *mod, PyObject *loop);
PyObject *zl_set_slow_callbacks(PyObject *mod, PyObject *args);
PyObject *zl_trace_start(PyObject *mod, PyObject *args);
PyObject *zl_trace_take(PyObject *mod, PyObject *loop);

/* ==== Module ==== */

/* capi/module.c: declares nothing; it calls every file's zl_*_init */

#endif
