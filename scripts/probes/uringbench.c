/* The mechanisms under the file rows, without Python: what one operation
 * costs done at once on the calling thread (pread; preadv2 with RWF_NOWAIT,
 * zloopgo's path for cached pages), through io_uring (liburing: what
 * blazio uses, and what a Go io_uring library would drive), and handed to
 * a worker thread that signals back through an eventfd the caller waits on
 * in epoll (zloopgo's file workers, without Go). It answers docs/files.md's
 * question "would io_uring beat the workers?" for the operations the rows
 * make; it knows nothing of zloopgo.
 *
 *   cc -O2 -o /tmp/uringbench scripts/probes/uringbench.c -luring -lpthread
 *   /tmp/uringbench DIR        (makes its files in DIR, ext4 or tmpfs, ...)
 *
 * Prints the median of 5 runs of each, in microseconds per operation. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 65536
#define SEQ_BYTES (256L << 20)
#define NFILES 10000
#define SMALL 4096
#define NAPPEND 5000

static char dir[4096];
static char buf[CHUNK];

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* ---- a worker thread and the caller's wake-up, as zloopgo's ---- */

enum { W_PREAD, W_WRITE, W_OPENREADCLOSE };
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int job_kind = -1, job_fd;
static off_t job_off;
static int efd, ep;

static void *worker(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&mu);
        while (job_kind < 0)
            pthread_cond_wait(&cv, &mu);
        int kind = job_kind;
        job_kind = -1;
        pthread_mutex_unlock(&mu);
        if (kind == W_PREAD) {
            if (pread(job_fd, buf, CHUNK, job_off) < 0)
                die("pread");
        } else if (kind == W_WRITE) {
            if (write(job_fd, buf, 100) != 100)
                die("write");
        }
        uint64_t one = 1;
        if (write(efd, &one, 8) != 8)
            die("eventfd");
    }
    return NULL;
}

static void handoff(int kind, int fd, off_t off)
{
    pthread_mutex_lock(&mu);
    job_kind = kind;
    job_fd = fd;
    job_off = off;
    pthread_mutex_unlock(&mu);
    pthread_cond_signal(&cv);
    struct epoll_event ev;
    while (epoll_wait(ep, &ev, 1, -1) != 1)
        ;
    uint64_t n;
    if (read(efd, &n, 8) != 8)
        die("eventfd read");
}

/* ---- the measurements ---- */

static int big_fd(void)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/big", dir);
    int fd = open(p, O_RDONLY);
    if (fd < 0)
        die("open big");
    return fd;
}

static double seq(int how, struct io_uring *ring)
{
    int fd = big_fd();
    double t0 = now();
    for (off_t off = 0; off < SEQ_BYTES; off += CHUNK) {
        ssize_t r = 0;
        if (how == 0) {
            r = pread(fd, buf, CHUNK, off);
        } else if (how == 1) {
            struct iovec iov = {buf, CHUNK};
            r = preadv2(fd, &iov, 1, off, RWF_NOWAIT);
        } else if (how == 2) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
            io_uring_prep_read(sqe, fd, buf, CHUNK, off);
            io_uring_submit_and_wait(ring, 1);
            struct io_uring_cqe *cqe;
            io_uring_wait_cqe(ring, &cqe);
            r = cqe->res;
            io_uring_cqe_seen(ring, cqe);
        } else {
            handoff(W_PREAD, fd, off);
            r = CHUNK;
        }
        if (r != CHUNK)
            die("short read");
    }
    double dt = now() - t0;
    close(fd);
    return dt / (SEQ_BYTES / CHUNK) * 1e6;
}

static double appends(int how, struct io_uring *ring)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/append", dir);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (fd < 0)
        die("open append");
    double t0 = now();
    for (int i = 0; i < NAPPEND; i++) {
        if (how == 0) {
            if (write(fd, buf, 100) != 100)
                die("write");
        } else if (how == 2) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
            io_uring_prep_write(sqe, fd, buf, 100, -1);
            io_uring_submit_and_wait(ring, 1);
            struct io_uring_cqe *cqe;
            io_uring_wait_cqe(ring, &cqe);
            if (cqe->res != 100)
                die("uring write");
            io_uring_cqe_seen(ring, cqe);
        } else {
            handoff(W_WRITE, fd, 0);
        }
    }
    double dt = now() - t0;
    close(fd);
    return dt / NAPPEND * 1e6;
}

/* 10,000 files opened, read and closed: at once on the thread, or through
 * io_uring with up to 256 files in flight (open, then read, then close,
 * each a batch of submissions reaped together). */
static double small_files(int how, struct io_uring *ring)
{
    char p[4200];
    double t0 = now();
    if (how == 0) {
        for (int i = 0; i < NFILES; i++) {
            snprintf(p, sizeof p, "%s/small/%d", dir, i);
            int fd = open(p, O_RDONLY | O_CLOEXEC);
            if (fd < 0 || read(fd, buf, SMALL + 1) != SMALL)
                die("small");
            close(fd);
        }
    } else {
        static char paths[256][4200];
        static int fds[256];
        static char bufs[256][SMALL + 1];
        for (int base = 0; base < NFILES; base += 256) {
            int n = NFILES - base < 256 ? NFILES - base : 256;
            for (int stage = 0; stage < 3; stage++) {
                for (int k = 0; k < n; k++) {
                    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
                    if (stage == 0) {
                        snprintf(paths[k], sizeof paths[k], "%s/small/%d", dir, base + k);
                        io_uring_prep_openat(sqe, AT_FDCWD, paths[k], O_RDONLY | O_CLOEXEC, 0);
                    } else if (stage == 1) {
                        io_uring_prep_read(sqe, fds[k], bufs[k], SMALL + 1, 0);
                    } else {
                        io_uring_prep_close(sqe, fds[k]);
                    }
                    sqe->user_data = (uint64_t)k;
                }
                io_uring_submit_and_wait(ring, n);
                for (int k = 0; k < n; k++) {
                    struct io_uring_cqe *cqe;
                    io_uring_wait_cqe(ring, &cqe);
                    if (cqe->res < 0)
                        die("uring small");
                    if (stage == 0)
                        fds[cqe->user_data] = cqe->res;
                    io_uring_cqe_seen(ring, cqe);
                }
            }
        }
    }
    return (now() - t0) / NFILES * 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median5(double (*f)(int, struct io_uring *), int how, struct io_uring *ring)
{
    double v[5];
    for (int i = 0; i < 5; i++)
        v[i] = f(how, ring);
    qsort(v, 5, sizeof v[0], cmp);
    return v[2];
}

static void make_files(void)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/big", dir);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    memset(buf, 'x', sizeof buf);
    for (off_t off = 0; off < SEQ_BYTES; off += CHUNK)
        if (write(fd, buf, CHUNK) != CHUNK)
            die("write big");
    close(fd);
    snprintf(p, sizeof p, "%s/small", dir);
    mkdir(p, 0755);
    for (int i = 0; i < NFILES; i++) {
        snprintf(p, sizeof p, "%s/small/%d", dir, i);
        fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || write(fd, buf, SMALL) != SMALL)
            die("write small");
        close(fd);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    make_files();
    struct io_uring ring;
    if (io_uring_queue_init(512, &ring, 0) < 0)
        die("io_uring_queue_init");
    efd = eventfd(0, EFD_NONBLOCK);
    ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    seq(0, &ring); /* into the page cache */
    printf("operation (median of 5, us per operation) | on the thread | RWF_NOWAIT "
           "| io_uring | worker thread\n");
    printf("64 KiB read of a cached file | %.2f | %.2f | %.2f | %.2f\n", median5(seq, 0, &ring),
           median5(seq, 1, &ring), median5(seq, 2, &ring), median5(seq, 3, &ring));
    printf("100 B append (O_APPEND write) | %.2f | - | %.2f | %.2f\n", median5(appends, 0, &ring),
           median5(appends, 2, &ring), median5(appends, 3, &ring));
    printf("4 KiB file open+read+close | %.2f | - | %.2f (256 in flight) | -\n",
           median5(small_files, 0, &ring), median5(small_files, 2, &ring));
    return 0;
}
