/* The worker pool (capi/workers.c) and the C waker (capi/waker/waker.c)
 * under ThreadSanitizer, without Python or Go: scripts/sanitize builds this
 * file with -fsanitize=thread and runs it.
 *
 * It includes the two C files themselves, so what runs is the pool's own
 * code, and stands in for what surrounds them in the extension:
 *   - workers.go's goroutines are pthreads running the same loop
 *     (zl_workers_next, then post, or zl_workers_orphan when refused);
 *   - an engine's inbox (core/inbox.go) is a mutex-guarded array whose
 *     first post of a batch wakes the loop through zl_waker_wake on an
 *     eventfd, after the mutex is released, as inbox.post does;
 *   - a loop is a thread that submits work, waits in epoll for the
 *     eventfd, takes the batch and settles it, and frees orphans
 *     (zl_workers_drain) as a loop thread does with the GIL.
 * Two loops run at once, each of its own interpreter (zl_work.owner: 1
 * and 2); the second closes half-way, so the rest of its work comes back
 * as orphans, which the first loop must pass over (they hold the second
 * interpreter's objects) and a thread of the second interpreter frees at
 * the end (the main thread, standing for it). Meanwhile another
 * thread moves the file bound up and down and reads the counts, and
 * another holds and releases the lookup class, as os.fork()'s hooks do
 * (resolver.c), then forks (the pool's pthread_atfork handlers; the child
 * leaves at once). Every piece of work carries a payload its submitter
 * writes, its worker reads and rewrites, and its settler checks: a missing
 * happens-before between those threads is what ThreadSanitizer reports.
 *
 * Exits 0 when every piece was either settled once or freed as an orphan
 * once, by a thread of its own interpreter, and no thread saw a wrong
 * payload; ThreadSanitizer's own exit code
 * (TSAN_OPTIONS=exitcode) when it reported anything. */
#define _GNU_SOURCE
#include "../../capi/workers.c"
#include "../../capi/waker/waker.c"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#define PIECES_PER_LOOP 20000
#define PAYLOAD 32

typedef struct {
    zl_work work;
    int loop;
    uint32_t seed;
    unsigned char payload[PAYLOAD];
    uint64_t result;
} piece;

static atomic_long settled, orphans_freed, wrong, foreign;
/* The interpreter the calling thread stands for while it frees orphans. */
static __thread int64_t thread_owner;

static void perform(zl_work *w)
{
    piece *p = (piece *)w;
    uint64_t sum = 0;
    for (int i = 0; i < PAYLOAD; i++) {
        if (p->payload[i] != (unsigned char)(p->seed + i))
            atomic_fetch_add(&wrong, 1);
        sum += p->payload[i];
        p->payload[i] = (unsigned char)~p->payload[i];
    }
    if (p->seed % 7 == 0)
        usleep(p->seed % 200); /* some pieces take a while: the bounds matter */
    p->result = sum;
}

static void check_and_free(piece *p)
{
    uint64_t sum = 0;
    for (int i = 0; i < PAYLOAD; i++) {
        if (p->payload[i] != (unsigned char)~(unsigned char)(p->seed + i))
            atomic_fetch_add(&wrong, 1);
        sum += (unsigned char)(p->seed + i);
    }
    if (p->result != sum)
        atomic_fetch_add(&wrong, 1);
    free(p);
}

static void discard(zl_work *w)
{
    if (w->owner != thread_owner)
        atomic_fetch_add(&foreign, 1);
    check_and_free((piece *)w);
    atomic_fetch_add(&orphans_freed, 1);
}

static const zl_work_kind lookup_piece = {ZL_WORK_LOOKUP, perform, discard};
static const zl_work_kind file_piece = {ZL_WORK_FILE, perform, discard};

/* ---- an engine's inbox, as core/inbox.go ---- */

typedef struct {
    pthread_mutex_t mu;
    zl_completion *posted;
    int n, cap;
    int woken;
    int closed;
    zl_waker waker;
} inbox;

static inbox inboxes[3]; /* engine ids 1 and 2 */

static int post(uintptr_t engine, zl_completion c)
{
    inbox *in = &inboxes[engine];
    pthread_mutex_lock(&in->mu);
    if (in->closed) {
        pthread_mutex_unlock(&in->mu);
        return 0;
    }
    if (in->n == in->cap) {
        in->cap = in->cap ? in->cap * 2 : 64;
        in->posted = realloc(in->posted, (size_t)in->cap * sizeof *in->posted);
    }
    in->posted[in->n++] = c;
    int owed = !in->woken;
    in->woken = 1;
    pthread_mutex_unlock(&in->mu);
    if (owed)
        zl_waker_wake(&in->waker);
    return 1;
}

/* ---- the workers: workers.go's loop ---- */

static void *worker(void *unused)
{
    (void)unused;
    for (int first = 1;; first = 0) {
        zl_completion out;
        uintptr_t engine;
        zl_workers_next(&out, &engine, first);
        if (!post(engine, out))
            zl_workers_orphan(out.value);
    }
    return NULL;
}

void zlgo_workers_spawn(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0) {
        perror("pthread_create");
        exit(2);
    }
    pthread_detach(t);
}

/* ---- the loops ---- */

static atomic_int stop_stirring;

static void *loop(void *arg)
{
    int id = (int)(intptr_t)arg;
    thread_owner = id;
    inbox *in = &inboxes[id];
    int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev);
    pthread_mutex_lock(&in->mu);
    in->waker = (zl_waker){ZL_WAKE_EVENTFD, (uintptr_t)efd, 0};
    pthread_mutex_unlock(&in->mu);
    uint32_t seed = (uint32_t)id * 2654435761u;
    long mine_settled = 0, submitted = 0;
    int closing_at = id == 2 ? PIECES_PER_LOOP / 2 : -1;
    while (submitted < PIECES_PER_LOOP || mine_settled < submitted) {
        /* a burst of submissions */
        for (int k = 0; k < 50 && submitted < PIECES_PER_LOOP; k++, submitted++) {
            piece *p = calloc(1, sizeof *p);
            seed = seed * 1103515245u + 12345u;
            p->seed = seed >> 8;
            p->loop = id;
            for (int i = 0; i < PAYLOAD; i++)
                p->payload[i] = (unsigned char)(p->seed + i);
            p->work.kind = p->seed % 3 == 0 ? &lookup_piece : &file_piece;
            p->work.token = (uint64_t)(p->seed % 3 == 0 ? ZL_DONE_LOOKUP : ZL_DONE_FILE)
                            << ZL_DONE_KIND_SHIFT;
            p->work.engine = (uintptr_t)id;
            p->work.owner = id;
            zl_work_submit(&p->work);
        }
        if (submitted == closing_at) {
            /* the loop closes: what is still out comes back as orphans */
            pthread_mutex_lock(&in->mu);
            in->closed = 1;
            for (int i = 0; i < in->n; i++)
                zl_workers_orphan(in->posted[i].value);
            in->n = 0;
            pthread_mutex_unlock(&in->mu);
            break;
        }
        /* wait for the wake-up, then take and settle the batch */
        struct epoll_event got;
        if (epoll_wait(ep, &got, 1, 100) == 1) {
            uint64_t count;
            if (read(efd, &count, sizeof count) < 0)
                continue;
        }
        pthread_mutex_lock(&in->mu);
        zl_completion *batch = in->posted;
        int n = in->n;
        in->posted = NULL;
        in->n = in->cap = 0;
        in->woken = 0;
        pthread_mutex_unlock(&in->mu);
        for (int i = 0; i < n; i++) {
            check_and_free((piece *)(uintptr_t)batch[i].value);
            mine_settled++;
        }
        free(batch);
        atomic_fetch_add(&settled, n);
        zl_workers_drain(id);
    }
    close(ep);
    close(efd);
    return (void *)(intptr_t)submitted;
}

/* the bound moved and read while work flows (_engine.file_workers) */
static void *stir_bounds(void *unused)
{
    (void)unused;
    unsigned n = 1;
    while (!atomic_load(&stop_stirring)) {
        n = n * 5 + 3;
        zl_workers_bound(ZL_WORK_FILE, 1 + (int)(n % 12));
        zl_workers_counts c;
        zl_workers_count(ZL_WORK_FILE, &c);
        usleep(200);
    }
    zl_workers_bound(ZL_WORK_FILE, ZL_FILE_WORKERS_DEFAULT);
    return NULL;
}

/* os.fork()'s hooks (resolver.c), then fork itself */
static void *forks(void *unused)
{
    (void)unused;
    for (int i = 0; i < 5 && !atomic_load(&stop_stirring); i++) {
        usleep(20000);
        zl_workers_hold(ZL_WORK_LOOKUP, 50 * 1000 * 1000);
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        zl_workers_unhold(ZL_WORK_LOOKUP);
        if (pid > 0)
            waitpid(pid, NULL, 0);
    }
    return NULL;
}

int main(void)
{
    for (int i = 0; i < 3; i++)
        pthread_mutex_init(&inboxes[i].mu, NULL);
    pthread_t loops[2], stirrer, forker;
    pthread_create(&stirrer, NULL, stir_bounds, NULL);
    pthread_create(&forker, NULL, forks, NULL);
    for (int i = 0; i < 2; i++)
        pthread_create(&loops[i], NULL, loop, (void *)(intptr_t)(i + 1));
    long submitted = 0;
    for (int i = 0; i < 2; i++) {
        void *r;
        pthread_join(loops[i], &r);
        submitted += (long)(intptr_t)r;
    }
    atomic_store(&stop_stirring, 1);
    pthread_join(stirrer, NULL);
    pthread_join(forker, NULL);
    /* the second loop's pieces still out come back as orphans, which a
     * thread of its interpreter frees */
    thread_owner = 2;
    for (int waited = 0; waited < 1000; waited++) {
        zl_workers_drain(2);
        zl_workers_counts f, l;
        zl_workers_count(ZL_WORK_FILE, &f);
        zl_workers_count(ZL_WORK_LOOKUP, &l);
        if (atomic_load(&settled) + atomic_load(&orphans_freed) == submitted && f.running == 0 &&
            f.queued == 0 && l.running == 0 && l.queued == 0)
            break;
        usleep(10000);
    }
    zl_workers_counts c;
    zl_workers_count(ZL_WORK_FILE, &c);
    long s = atomic_load(&settled), o = atomic_load(&orphans_freed), w = atomic_load(&wrong),
         x = atomic_load(&foreign);
    printf("tsan_pool: %ld pieces submitted, %ld settled, %ld freed as orphans (%ld by another "
           "interpreter's thread), %d worker threads, %ld wrong payloads\n",
           submitted, s, o, x, c.started, w);
    return s + o == submitted && w == 0 && x == 0 &&
                   c.started <= ZL_LOOKUP_WORKERS + ZL_FILE_WORKERS_DEFAULT
               ? 0
               : 1;
}
