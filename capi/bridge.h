/* The memory the Go engine and the C adapter share, and the C calls
 * the engine makes into the adapter. No CPython types appear here, so the
 * Go side of the adapter can include this header without Python.h.
 *
 * Layouts of zl_event, zl_newtimer and zl_completion must equal
 * core.Event, core.NewTimer and core.Completion, which the engine hands
 * over without copying: the static asserts below pin them for the C
 * compile, and capi/layout.go fails the Go compile if core's differ. */
#ifndef ZL_BRIDGE_H
#define ZL_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

/* One ready descriptor, as core.Event: token is the descriptor number. */
typedef struct {
    uint64_t token;
    uint32_t mask; /* 1 readable, 2 writable */
    uint32_t pad;
} zl_event;

/* A timer scheduled since the engine's last iteration, as core.NewTimer:
 * token is its Slot (core.TimerSlot), an index into zl_shared.slots. */
typedef struct {
    double when;
    uint64_t token;
} zl_newtimer;

/* Work another goroutine finished, as core.Completion: token names the
 * request (a lookup's number, core.RequestID, or a file operation's
 * address), value is the finished piece of work's address (capi/workers.c),
 * status is unused. The token's top byte says whose it is (ZL_DONE_*), for
 * zl_dispatch to route. */
typedef struct {
    uint64_t token;
    uint64_t value;
    int64_t status;
} zl_completion;

/* Kinds of completion, in the top byte of the token (capi/dispatch.c). */
#define ZL_DONE_KIND_SHIFT 56
#define ZL_DONE_LOOKUP 0 /* a name lookup (capi/resolver.c): tokens count from 1 */
#define ZL_DONE_FILE 1   /* a file operation (capi/files.c): the rest is its address */

/* The layouts core's structures have (core.Event in core/poll/poll.go,
 * core.NewTimer in core/engine.go, core.Completion in core/inbox.go);
 * capi/layout.go compares them field by field. */
_Static_assert(sizeof(zl_event) == 16, "zl_event must be 16 bytes, as core.Event");
_Static_assert(offsetof(zl_event, token) == 0, "zl_event.token at 0, as core.Event.Token");
_Static_assert(offsetof(zl_event, mask) == 8, "zl_event.mask at 8, as core.Event.Mask");
_Static_assert(offsetof(zl_event, pad) == 12, "zl_event.pad at 12, as core.Event's blank field");
_Static_assert(sizeof(zl_newtimer) == 16, "zl_newtimer must be 16 bytes, as core.NewTimer");
_Static_assert(offsetof(zl_newtimer, when) == 0, "zl_newtimer.when at 0, as core.NewTimer.When");
_Static_assert(offsetof(zl_newtimer, token) == 8, "zl_newtimer.token at 8, as core.NewTimer.Token");
_Static_assert(sizeof(zl_completion) == 24, "zl_completion must be 24 bytes, as core.Completion");
_Static_assert(offsetof(zl_completion, token) == 0,
               "zl_completion.token at 0, as core.Completion.Token");
_Static_assert(offsetof(zl_completion, value) == 8,
               "zl_completion.value at 8, as core.Completion.Value");
_Static_assert(offsetof(zl_completion, status) == 16,
               "zl_completion.status at 16, as core.Completion.Status");

/* One scheduled timer. The adapter owns the handle reference; the engine
 * reads only `cancelled`. */
typedef struct {
    void *handle;       /* the TimerHandle object, NULL once cancelled or free */
    uint32_t cancelled; /* set by cancel(); the engine drops such slots */
    uint32_t next_free; /* free-list link while the slot is unused */
} zl_timer_slot;

/* What the engine reads every iteration without calling C. Written only on
 * the loop's thread while it holds the GIL. */
typedef struct {
    zl_newtimer *new_timers; /* scheduled since the last iteration */
    int64_t new_timers_len;
    zl_timer_slot *slots;     /* indexed by timer slot; may move when grown */
    int64_t cancelled_timers; /* cancelled slots the engine has not handed back */
    int64_t ready_len;        /* handles waiting in the ready queue */
    int32_t stopping;         /* loop.stop() was called */
    int32_t quiet;            /* the last batch cannot have made a descriptor
                               * ready (see zl_dispatch) */
    /* written by Go, read by C in zl_dispatch: C memory, so that handing
     * them over passes no Go pointer */
    zl_event *events; /* the engine's event buffer, events_cap long */
    int64_t events_cap;
    uint64_t *timers_out; /* timer slots handed back, timers_out_cap long */
    int64_t timers_out_cap;
    /* completions handed over in zl_dispatch, done_cap long (C memory) */
    zl_completion *done;
    int64_t done_cap;
    /* the program replaced loop.time() (capi/clock.c): the engine then
     * takes the time from fake_now, which C sets before each iteration */
    double fake_now;
    int32_t faked;
    int32_t pad2;
    /* For the batches zl_dispatch runs alone (core.Lookahead). */
    double
        next_timer; /* Go, before each zl_dispatch: the engine's earliest deadline, +Inf if none */
    int64_t alone_max;    /* Go, before each zl_dispatch: the most batches C may run alone */
    int64_t alone_ran;    /* C, in zl_dispatch: the batches it ran alone */
    int64_t alone_polled; /* C, in zl_dispatch: of those, the ones it looked at poller_fd for */
    int32_t poller_fd;    /* Go, before each zl_dispatch: the descriptor of core.Lookahead.Peek
                           * when it is a kind capi/platform.h's poller uses (core.PeekEpoll),
                           * else -1 */
    int32_t pad3;
    int64_t watched; /* the descriptors the engine's reactor watches, counted by whoever
                      * changes them: Go in zlgo_watch, C in fds.c's reactor_watch */
    double
        new_timers_first; /* C: the earliest deadline among new_timers (NaN sticks), +Inf if none;
                              * reset by whoever empties new_timers */
    double resolution;    /* C, at creation: the clock resolution the engine was given */
    double yield_by;      /* Go, before each zl_dispatch: core.Lookahead.YieldBy (seconds) */
    int64_t alone_events; /* C, in zl_dispatch: the events its own waits handed over */
    int32_t alone_looked_empty; /* C, in zl_dispatch: its last look, for a wait that may
                                 * block, found nothing (core.Alone.LookedEmpty) */
    int32_t watch_delta;        /* C, in zl_dispatch: the change to `watched` its own
                                 * zl_sys_poller_watch calls made (core.Alone.Watched) */
} zl_shared;

/* Called by the engine (capi/engine.go); implemented in capi/dispatch.c.
 * `loop` is the adapter's loop object, passed as an integer: a pointer
 * argument would make cgo check on every call whether it is a Go pointer. */
void zl_release(uintptr_t loop);   /* drop the GIL before a blocking wait */
void zl_reacquire(uintptr_t loop); /* take it back (after a failed wait) */
/* Grow timers_out to hold at least `need` slots; -1 if out of memory. */
int zl_grow_timers_out(uintptr_t loop, int64_t need);
/* Grow done to hold at least `need` completions; -1 if out of memory. */
int zl_grow_done(uintptr_t loop, int64_t need);
/* Grow events to hold at least `need` events; -1 if out of memory (it is
 * left as it was). Never called during zl_dispatch, which reads them. */
int zl_grow_events(uintptr_t loop, int64_t need);
/* Take the GIL back if `reacquire`, queue the handles of the first
 * `nevents` events and of the first `ntimers` slots of timers_out, settle
 * the first `ndone` completions of done, then run one batch of callbacks,
 * and up to alone_max more while each is an iteration the engine would
 * only hand over (core.Lookahead; `posted` is the engine's inbox word, a
 * Go pointer valid for the call, nonzero while completions wait), counted
 * in alone_ran, those whose wait it made at poller_fd in alone_polled, the
 * events those waits handed over in alone_events; alone_looked_empty if it
 * returns after a look for a wait that may block found nothing. Returns 0,
 * or -1 with a Python exception set. */
int zl_dispatch(uintptr_t loop, int64_t nevents, int64_t ntimers, int64_t ndone, int reacquire,
                const uint32_t *posted);

/* capi/workers.c, called by the pool's goroutines (capi/workers.go; no
 * GIL, no Python): wait for the next piece of work and perform it, filling
 * *out (its completion: value is the piece's address) and *engine (the
 * engine to post it to). first: the worker's first call (else it comes
 * back from posting the last completion). */
void zl_workers_next(zl_completion *out, uintptr_t *engine, int first);
/* Hands back a piece whose engine refused its completion (value: the
 * completion's), for a loop thread to free. */
void zl_workers_orphan(uint64_t value);

#endif
