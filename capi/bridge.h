/* The memory the Go engine and the C adapter share, and the three C calls
 * the engine makes into the adapter. No CPython types appear here, so the
 * Go side of the adapter can include this header without Python.h.
 *
 * Layouts of zl_event and zl_newtimer must equal core.Event and
 * core.NewTimer; capi/layout_test.go checks them. */
#ifndef ZL_BRIDGE_H
#define ZL_BRIDGE_H

#include <stdint.h>

/* One ready descriptor, as core.Event: token is the descriptor number. */
typedef struct {
    uint64_t token;
    uint32_t mask; /* 1 readable, 2 writable */
    uint32_t pad;
} zl_event;

/* A timer scheduled since the engine's last iteration, as core.NewTimer:
 * token is an index into zl_shared.slots. */
typedef struct {
    double when;
    uint64_t token;
} zl_newtimer;

/* One scheduled timer. The adapter owns the handle reference; the engine
 * reads only `cancelled`. */
typedef struct {
    void *handle;        /* the TimerHandle object, NULL once cancelled or free */
    uint32_t cancelled;  /* set by cancel(); the engine drops such tokens */
    uint32_t next_free;  /* free-list link while the slot is unused */
} zl_timer_slot;

/* What the engine reads every iteration without calling C. Written only on
 * the loop's thread while it holds the GIL. */
typedef struct {
    zl_newtimer *new_timers;  /* scheduled since the last iteration */
    int64_t new_timers_len;
    zl_timer_slot *slots;     /* indexed by timer token; may move when grown */
    int64_t cancelled_timers; /* cancelled slots the engine has not handed back */
    int64_t ready_len;        /* handles waiting in the ready queue */
    int32_t stopping;         /* loop.stop() was called */
    int32_t quiet;            /* the last batch cannot have made a descriptor
                               * ready (see zl_dispatch) */
    /* written by Go, read by C in zl_dispatch: C memory, so that handing
     * them over passes no Go pointer */
    zl_event *events;         /* the engine's event buffer, events_cap long */
    int64_t events_cap;
    uint64_t *timers_out;     /* timer tokens handed back, timers_out_cap long */
    int64_t timers_out_cap;
    /* the program replaced loop.time() (capi/clock.c): the engine then
     * takes the time from fake_now, which C sets before each iteration */
    double fake_now;
    int32_t faked;
    int32_t pad2;
} zl_shared;

/* Called by the engine (capi/engine.go); implemented in capi/loop.c.
 * `loop` is the adapter's loop object, passed as an integer: a pointer
 * argument would make cgo check on every call whether it is a Go pointer. */
void zl_release(uintptr_t loop);   /* drop the GIL before a blocking wait */
void zl_reacquire(uintptr_t loop); /* take it back (after a failed wait) */
/* Grow timers_out to hold at least `need` tokens; -1 if out of memory. */
int zl_grow_timers_out(uintptr_t loop, int64_t need);
/* Take the GIL back if `reacquire`, queue the handles of the first
 * `nevents` events and of the first `ntimers` tokens of timers_out, then
 * run one batch of callbacks. Returns 0, or -1 with a Python exception set. */
int zl_dispatch(uintptr_t loop, int64_t nevents, int64_t ntimers, int reacquire);

#endif
