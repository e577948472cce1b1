//go:build unix

/* The POSIX part of the file operations (capi/files.h): the system calls a
 * worker makes for each of them on a descriptor (open, pread, pwrite,
 * lseek, close, ftruncate) or a path (stat, rename, unlink, rmdir, mkdir,
 * opendir), the errno OSError they raise, the stat tuple and the names a
 * listing gives, and the read of cached pages that cannot block
 * (preadv2(RWF_NOWAIT)). Every operation of FILE_OPS is performed here.
 *
 * It knows the system calls; nothing of futures, loops or the pool (files.c). */
#define _GNU_SOURCE
#include "files.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#if defined(__linux__)
#include <sys/vfs.h> /* fstatfs */
#else
#include <sys/param.h>
#include <sys/mount.h> /* fstatfs on macOS and the BSDs */
#endif
#include <unistd.h>

/* macOS names struct stat's times differently */
#if defined(__APPLE__)
#define st_atim st_atimespec
#define st_mtim st_mtimespec
#define st_ctim st_ctimespec
#endif

int zl_file_supported(int code)
{
    /* every one of FILE_OPS */
    return code > OP_NONE && code < OP_LAST;
}

/* ---- on a worker's thread: no GIL, no Python ---- */

static ssize_t read_fully(int fd, char *buf, size_t n, int64_t offset)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = offset < 0 ? read(fd, buf + got, n - got)
                               : pread(fd, buf + got, n - got, (off_t)(offset + got));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return got > 0 ? (ssize_t)got : -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
        if (offset < 0)
            break; /* a stream: one read, as FileIO.read */
    }
    return (ssize_t)got;
}

static void do_open(zl_fileop *op)
{
    int fd;
    do
        fd = open(op->path, (int)op->n, (mode_t)op->mode);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        op->err = errno;
        return;
    }
    /* FileIO's steps after opening: refuse a directory, note the block
     * size, go to the end in append mode. */
    struct stat st;
    if (fstat(fd, &st) < 0) {
        op->err = errno;
        close(fd);
        return;
    }
    if (S_ISDIR(st.st_mode)) {
        op->err = EISDIR;
        close(fd);
        return;
    }
    if ((op->n & O_APPEND) && lseek(fd, 0, SEEK_END) < 0 && errno != ESPIPE) {
        op->err = errno;
        close(fd);
        return;
    }
    op->st_mode = st.st_mode;
    op->blksize = st.st_blksize;
    op->size = st.st_size;
    op->pos = lseek(fd, 0, SEEK_CUR);
    op->isatty = S_ISCHR(st.st_mode) ? isatty(fd) : 0;
    /* the file system's type: closing a file of a local one cannot wait
     * for a server (zloopgo/_files/opening.py closes those at once) */
    struct statfs sfs;
    op->fstype = fstatfs(fd, &sfs) == 0 ? (int64_t)sfs.f_type : 0;
    op->result = fd;
}

/* OP_LISTDIR's result: op->sys the NUL-separated names, op->result their
 * count */
static void do_listdir(zl_fileop *op)
{
    DIR *d = opendir(op->path);
    if (d == NULL) {
        op->err = errno;
        return;
    }
    zl_name_list names = {0};
    for (;;) {
        errno = 0;
        /* readdir is safe on a stream no other thread reads (readdir_r,
         * which cppcheck suggests, is deprecated by glibc) */
        // cppcheck-suppress readdirCalled
        struct dirent *e = readdir(d);
        if (e == NULL) {
            op->err = errno;
            break;
        }
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (zl_name_list_add(&names, e->d_name, strlen(e->d_name) + 1) < 0) {
            op->err = ENOMEM;
            break;
        }
        op->result++;
    }
    closedir(d);
    op->sys = names.data;
}

static void do_stat(zl_fileop *op)
{
    struct stat *st = malloc(sizeof *st);
    if (st == NULL) {
        op->err = ENOMEM;
        return;
    }
    op->sys = st;
    if ((op->n ? stat(op->path, st) : lstat(op->path, st)) < 0)
        op->err = errno;
}

static int retry_eintr(int r) { return r < 0 && errno == EINTR; }

void zl_file_perform(zl_fileop *op)
{
    int r = 0;
    errno = 0;
    switch (op->op) {
    case OP_OPEN:
        do_open(op);
        return;
    case OP_PREAD:
    case OP_READALL: {
        /* op->result: what an inline attempt already read (try_inline) */
        ssize_t got = read_fully(op->fd, op->buf + op->result, (size_t)(op->len - op->result),
                                 op->offset < 0 ? -1 : op->offset + op->result);
        if (got < 0)
            op->err = errno;
        else
            op->result += got;
        return;
    }
    case OP_PWRITE: {
        int64_t done = 0;
        while (done < op->len) {
            ssize_t w = op->offset < 0 ? write(op->fd, op->buf + done, (size_t)(op->len - done))
                                       : pwrite(op->fd, op->buf + done, (size_t)(op->len - done),
                                                (off_t)(op->offset + done));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                op->err = errno;
                break;
            }
            done += w;
        }
        op->result = done;
        /* n = 1: the caller wants where the descriptor is afterwards (an
         * append-mode file, whose writes go to the end) */
        if (op->err == 0 && op->n == 1 && (op->result = lseek(op->fd, 0, SEEK_CUR)) < 0)
            op->err = errno;
        return;
    }
    case OP_LSEEK: {
        off_t o = lseek(op->fd, (off_t)op->offset, (int)op->n);
        if (o < 0)
            op->err = errno;
        op->result = o;
        return;
    }
    case OP_CLOSE:
        /* Linux closes the descriptor even when close() fails (EINTR too). */
        if (close(op->fd) < 0)
            op->err = errno;
        return;
    case OP_FTRUNCATE:
        do
            r = ftruncate(op->fd, (off_t)op->offset);
        while (retry_eintr(r));
        break;
    case OP_STAT:
        do_stat(op);
        return;
    case OP_RENAME:
        r = rename(op->path, op->path2);
        break;
    case OP_UNLINK:
        r = unlink(op->path);
        break;
    case OP_RMDIR:
        r = rmdir(op->path);
        break;
    case OP_MKDIR:
        r = mkdir(op->path, (mode_t)op->mode);
        break;
    case OP_LISTDIR:
        do_listdir(op);
        return;
    default:
        r = -1;
        errno = EINVAL;
    }
    if (r < 0)
        op->err = errno;
}

/* ---- on the loop thread ---- */

void *zl_file_path_new(PyObject *bytes)
{
    char *c = strdup(PyBytes_AS_STRING(bytes));
    if (c == NULL)
        PyErr_NoMemory();
    return c;
}

void zl_file_close_quietly(int64_t fd)
{
    /* its error is of no use: nobody sees the descriptor */
    close((int)fd);
}

PyObject *zl_file_raise(zl_fileop *op)
{
    errno = op->err;
    if (op->name != NULL)
        return PyErr_SetFromErrnoWithFilenameObjects(PyExc_OSError, op->name, op->name2);
    return PyErr_SetFromErrno(PyExc_OSError);
}

static PyObject *stat_tuple(const struct stat *st)
{
    return Py_BuildValue(
        "(KKKKKKLLlLlLlLLL)", (unsigned long long)st->st_mode, (unsigned long long)st->st_ino,
        (unsigned long long)st->st_dev, (unsigned long long)st->st_nlink,
        (unsigned long long)st->st_uid, (unsigned long long)st->st_gid, (long long)st->st_size,
        (long long)st->st_atim.tv_sec, (long)st->st_atim.tv_nsec, (long long)st->st_mtim.tv_sec,
        (long)st->st_mtim.tv_nsec, (long long)st->st_ctim.tv_sec, (long)st->st_ctim.tv_nsec,
        (long long)st->st_blksize, (long long)st->st_blocks, (long long)st->st_rdev);
}

static PyObject *names_list(const char *p, int64_t count)
{
    PyObject *list = PyList_New(count);
    for (int64_t i = 0; list != NULL && i < count; i++) {
        size_t n = strlen(p);
        PyObject *name = PyBytes_FromStringAndSize(p, (Py_ssize_t)n);
        if (name == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, name);
        p += n + 1;
    }
    return list;
}

PyObject *zl_file_sys_value(zl_fileop *op)
{
    if (op->op == OP_STAT)
        return stat_tuple(op->sys);
    return names_list(op->sys, op->result);
}

/* preadv2(RWF_NOWAIT) returns what the page cache holds and EAGAIN rather
 * than wait for the disk (what io_uring tries first too); a non-blocking
 * read returns 0 only at the end of the file. */
int zl_file_try_inline(zl_fileop *op)
{
#ifdef RWF_NOWAIT
    while (op->result < op->len) {
        struct iovec iov = {op->buf + op->result, (size_t)(op->len - op->result)};
        ssize_t r = preadv2(op->fd, &iov, 1, (off_t)(op->offset + op->result), RWF_NOWAIT);
        if (r < 0)
            return errno == EOPNOTSUPP || errno == EINVAL || errno == ENOSYS ? -1 : 0;
        if (r == 0)
            return 1;
        op->result += r;
    }
    return 1;
#else
    (void)op;
    return -1;
#endif
}
