/* The one pool of worker threads for the calls that block: name lookups
 * (resolver.c) and file operations (files.c).
 *
 * A loop thread submits a piece of work (zl_work_submit): it goes on its
 * class's queue, a mutex-guarded list; no Go call on the loop thread. A
 * worker is a goroutine (capi/workers.go) that waits for work inside its
 * cgo call, in zl_workers_next, on a condition variable of its own: an
 * idle stack, the most recently idle woken first (its thread and caches
 * are the warmest), so that work reaches a thread without passing through
 * the Go scheduler (a goroutine readied from the loop thread would sit in
 * that thread's run queue until stolen, ~50 µs). The worker performs the
 * piece on its own thread without the GIL, then posts the completion
 * {token, value = the piece's address} to the piece's engine; the loop
 * thread settles it in its one zl_dispatch per iteration.
 *
 * The bounds. Each class has its own: at most ZL_LOOKUP_WORKERS lookups and
 * at most the file bound (ZLOOPGO_FILE_WORKERS, _engine.file_workers())
 * file operations are performed at once in the process, every loop
 * together, so that lookups stuck on a DNS server never hold back file
 * operations, nor the other way round. The rest wait in their queue;
 * a free worker takes the oldest piece whose class is under its bound.
 * Workers start on demand: one more only when more pieces may start than
 * workers are idle or on their way to one (a worker that takes a piece
 * calls the next for what else may start), so a class alone never has more
 * threads than its bound, and all together at most the sum of the bounds;
 * they live as long as the process.
 *
 * Orphans. A piece whose engine refused its completion (the loop closed
 * first) is handed back by its worker (zl_workers_orphan), which may not
 * touch Python; the next loop thread of the piece's own interpreter (its
 * owner) that submits or settles work frees it with its kind's discard
 * (zl_workers_drain): the piece holds that interpreter's objects, which
 * only a thread holding its GIL may release. Another interpreter's
 * thread passes over it. An interpreter closed with orphans of its own
 * leaves them (their memory, not freed under another GIL).
 *
 * fork(). Inside fork() the pool waits for nothing: a fork handler takes
 * its mutex for the instant of the fork, so that the child's copy of the
 * queues is whole, and the child forgets it all: it has none of the worker
 * threads, and its loops cannot run (runtime.c refuses every call into Go
 * there), so what was queued is the parent's and is neither performed nor
 * freed (its Python objects may be in use by the parent's copies). Waiting
 * for work in flight is the owner's choice, made before fork() and without
 * the GIL: zl_workers_hold holds a class back and waits a bounded time for
 * its running pieces (resolver.c does so for lookups from os.fork()'s
 * before-hook, docs/architecture.md, "fork()"); zl_workers_unhold, or the
 * fork in the child, ends the hold (holds count: two threads may fork at
 * once).
 *
 * It knows the pieces only through their kind (perform, discard) and
 * nothing of Python, loops or the engine beyond the engine id it hands
 * back; scripts/reliability/tsan_pool.c builds it alone under ThreadSanitizer. */
#include "workers.h"
#include <stdatomic.h>
#include <stddef.h>
#include "platform.h"

/* capi/workers.go: starts one more worker goroutine. */
extern void zlgo_workers_spawn(void);

/* A worker waiting for work: its place on the idle stack. */
typedef struct idle_worker {
    zl_sys_cond wake;
    int woken;
    struct idle_worker *below;
} idle_worker;

typedef struct {
    zl_work *head, *tail;
    int running; /* being performed now */
    int bound;   /* at most this many running */
    int queued;
    int held; /* holds in force: none may start (zl_workers_hold) */
} work_class;

static zl_sys_mutex lock = ZL_SYS_MUTEX_INIT;
static work_class classes[ZL_WORK_CLASSES] = {
    [ZL_WORK_LOOKUP] = {.bound = ZL_LOOKUP_WORKERS},
    [ZL_WORK_FILE] = {.bound = ZL_FILE_WORKERS_DEFAULT},
};
static idle_worker *idle_top;
/* Signalled when a held class's last running piece finishes. */
static zl_sys_cond held_idle = ZL_SYS_COND_INIT;
static int started;
/* Workers on their way to a piece: started but not yet in zl_workers_next,
 * or woken off the idle stack and not yet awake. They count as taken when
 * deciding whether to wake or start another, so that slow-starting
 * workers do not make the threads outnumber the bounds. */
static int starting, waking;
/* Workers that performed a piece and are posting its completion: each
 * comes back for more at once, so no thread is started for what it will
 * take (an idle one is still woken for it meanwhile). */
static int posting;
static uint64_t submitted;
static zl_work *orphans;
static int orphan_count;
static atomic_int have_orphans;

/* ---- with the lock held ---- */

/* The class whose oldest piece may start now, or -1. */
static int runnable_class(void)
{
    int best = -1;
    for (int c = 0; c < ZL_WORK_CLASSES; c++) {
        const work_class *k = &classes[c];
        if (k->head != NULL && k->running < k->bound && !k->held &&
            (best < 0 || k->head->seq < classes[best].head->seq))
            best = c;
    }
    return best;
}

static int bounds_total(void)
{
    int n = 0;
    for (int c = 0; c < ZL_WORK_CLASSES; c++)
        n += classes[c].bound;
    return n;
}

/* How many queued pieces could start now (each class up to its bound). */
static int startable(void)
{
    int n = 0;
    for (int c = 0; c < ZL_WORK_CLASSES; c++) {
        const work_class *k = &classes[c];
        int room = k->held ? 0 : k->bound - k->running;
        if (room > 0)
            n += k->queued < room ? k->queued : room;
    }
    return n;
}

/* With more pieces that may start than workers on their way to them: the
 * idle worker to wake (taken off the stack, to be signalled once the lock
 * is released), else whether to start one. */
static idle_worker *wake_or_spawn(int *spawn)
{
    *spawn = 0;
    int wanted = startable() - starting - waking;
    if (wanted <= 0)
        return NULL;
    idle_worker *w = idle_top;
    if (w != NULL) {
        idle_top = w->below;
        w->woken = 1;
        waking++;
        return w;
    }
    if (wanted > posting && started < bounds_total()) {
        started++;
        starting++;
        *spawn = 1;
    }
    return NULL;
}

static void wake(idle_worker *w, int spawn)
{
    /* Signalled after unlocking: the worker does not wake into a held lock. */
    if (w != NULL)
        zl_sys_cond_signal(&w->wake);
    if (spawn)
        zlgo_workers_spawn();
}

/* ---- fork ---- */

static void before_fork(void) { zl_sys_mutex_lock(&lock); }

static void after_fork_in_parent(void) { zl_sys_mutex_unlock(&lock); }

static void after_fork_in_child(void)
{
    for (int c = 0; c < ZL_WORK_CLASSES; c++) {
        classes[c].head = classes[c].tail = NULL;
        classes[c].running = classes[c].queued = classes[c].held = 0;
    }
    idle_top = NULL;
    started = starting = waking = posting = 0;
    orphans = NULL;
    orphan_count = 0;
    atomic_store(&have_orphans, 0);
    /* The parent's threads may have waited on it: a fresh one. */
    zl_sys_mutex fresh = ZL_SYS_MUTEX_INIT;
    lock = fresh;
    zl_sys_cond fresh_cond = ZL_SYS_COND_INIT;
    held_idle = fresh_cond;
}

static zl_sys_once fork_rule = ZL_SYS_ONCE_INIT;

static void install_fork_rule(void)
{
    (void)zl_sys_at_fork(before_fork, after_fork_in_parent, after_fork_in_child);
}

/* ---- on a loop thread ---- */

void zl_work_submit(zl_work *w)
{
    zl_sys_call_once(&fork_rule, install_fork_rule);
    zl_workers_drain(w->owner);
    w->next = NULL;
    zl_sys_mutex_lock(&lock);
    work_class *k = &classes[w->kind->cls];
    w->seq = ++submitted;
    if (k->tail != NULL)
        k->tail->next = w;
    else
        k->head = w;
    k->tail = w;
    k->queued++;
    int spawn;
    idle_worker *idle = wake_or_spawn(&spawn);
    zl_sys_mutex_unlock(&lock);
    wake(idle, spawn);
}

void zl_workers_drain(int64_t owner)
{
    if (!atomic_load(&have_orphans))
        return;
    zl_work *w = NULL;
    zl_sys_mutex_lock(&lock);
    for (zl_work **at = &orphans; *at != NULL;) {
        zl_work *o = *at;
        if (o->owner != owner) {
            at = &o->next;
            continue;
        }
        *at = o->next;
        o->next = w;
        w = o;
        orphan_count--;
    }
    atomic_store(&have_orphans, orphans != NULL);
    zl_sys_mutex_unlock(&lock);
    while (w != NULL) {
        zl_work *next = w->next;
        w->kind->discard(w);
        w = next;
    }
}

int zl_workers_bound(int cls, int n)
{
    zl_sys_mutex_lock(&lock);
    idle_worker *idle = NULL;
    int spawn = 0;
    if (n > 0) {
        classes[cls].bound = n;
        /* Raising the bound lets waiting pieces start (the first worker
         * calls the next as it takes its piece). */
        idle = wake_or_spawn(&spawn);
    }
    int now = classes[cls].bound;
    zl_sys_mutex_unlock(&lock);
    wake(idle, spawn);
    return now;
}

int zl_workers_hold(int cls, int64_t timeout_ns)
{
    zl_sys_call_once(&fork_rule, install_fork_rule);
    zl_sys_deadline deadline = zl_sys_deadline_after(timeout_ns);
    zl_sys_mutex_lock(&lock);
    classes[cls].held++;
    while (classes[cls].running > 0)
        if (zl_sys_cond_wait_until(&held_idle, &lock, &deadline))
            break;
    int left = classes[cls].running;
    zl_sys_mutex_unlock(&lock);
    return left;
}

void zl_workers_unhold(int cls)
{
    zl_sys_mutex_lock(&lock);
    if (classes[cls].held > 0)
        classes[cls].held--;
    /* What was held back may start: the first worker calls the next as it
     * takes its piece. */
    int spawn;
    idle_worker *idle = wake_or_spawn(&spawn);
    zl_sys_mutex_unlock(&lock);
    wake(idle, spawn);
}

void zl_workers_count(int cls, zl_workers_counts *out)
{
    zl_sys_mutex_lock(&lock);
    out->started = started;
    out->running = classes[cls].running;
    out->queued = classes[cls].queued;
    out->orphaned = orphan_count;
    zl_sys_mutex_unlock(&lock);
}

/* ---- on a worker's thread: no GIL, no Python ---- */

void zl_workers_next(zl_completion *out, uintptr_t *engine, int first)
{
    /* The calling thread's place on the idle stack (a goroutine may come
     * back on another thread, but waits inside one call on one thread;
     * threads live as long as the process). Whether the worker is new is
     * the worker's to say, not the thread's. */
    static __thread idle_worker self = {.wake = ZL_SYS_COND_INIT};
    zl_sys_mutex_lock(&lock);
    if (first)
        starting--;
    else
        posting--;
    int c;
    while ((c = runnable_class()) < 0) {
        self.woken = 0;
        self.below = idle_top;
        idle_top = &self;
        /* A woken worker may find the piece taken by a busy worker that
         * came back first; it then goes back on the stack. */
        while (!self.woken)
            zl_sys_cond_wait(&self.wake, &lock);
        waking--;
    }
    work_class *k = &classes[c];
    zl_work *w = k->head;
    k->head = w->next;
    if (k->head == NULL)
        k->tail = NULL;
    k->queued--;
    k->running++;
    /* More that may start (a burst, a bound raised, a hold ended): the
     * next worker is called now, not at the next submission. */
    int spawn;
    idle_worker *idle = wake_or_spawn(&spawn);
    zl_sys_mutex_unlock(&lock);
    wake(idle, spawn);
    w->kind->perform(w);
    zl_sys_mutex_lock(&lock);
    if (--k->running == 0 && k->held)
        zl_sys_cond_broadcast(&held_idle);
    posting++;
    /* While this worker posts the completion, an idle one takes what
     * waits (work held back by the bound may go on now). */
    idle = NULL;
    if (startable() > starting + waking && idle_top != NULL) {
        idle = idle_top;
        idle_top = idle->below;
        idle->woken = 1;
        waking++;
    }
    zl_sys_mutex_unlock(&lock);
    wake(idle, 0);
    out->token = w->token;
    out->value = (uint64_t)(uintptr_t)w;
    out->status = 0;
    *engine = w->engine;
    /* after the worker's last look at w: the loop's thread may free it
     * as soon as Go posts it */
    ZL_TSAN_HAND_OVER(w);
}

void zl_workers_orphan(uint64_t value)
{
    zl_work *w = (zl_work *)(uintptr_t)value;
    zl_sys_mutex_lock(&lock);
    w->next = orphans;
    orphans = w;
    orphan_count++;
    atomic_store(&have_orphans, 1);
    zl_sys_mutex_unlock(&lock);
}
