//go:build unix

/* Blocking file-system calls for zloopgo.open() and zloopgo.os, off the
 * loop thread.
 *
 * On the loop thread, _engine.file_op() takes one operation (open, pread,
 * pwrite, lseek, close, stat, rename, ...: FILE_OPS below), checks and
 * converts its arguments, and either finishes it at once when that cannot
 * block (a read of cached pages with preadv2(RWF_NOWAIT), see try_inline)
 * or submits it to the worker pool (capi/workers.c; no Go call). A worker
 * performs the system call on its own thread without the GIL and posts the
 * completion to the loop's engine; zl_dispatch hands it to zl_settle_files, which
 * builds the result (a bytes object the read landed in, shrunk to what
 * came; a number; a tuple) or the OSError the same call raises in os/io,
 * and settles the operation's future.
 *
 * A read lands in its final bytes object: the loop thread allocates it and
 * hands the worker its storage; nothing else references it until it is
 * settled. An operation owns strong references to its future, its buffer
 * and its names; an operation whose loop closed before it finished is
 * handed back to the pool by its worker (which may not touch Python) and
 * freed by the next loop thread of its interpreter that submits or
 * settles work (discard).
 *
 * At most the pool's file bound of operations run at once in the process,
 * every loop together (ZLOOPGO_FILE_WORKERS, _engine.file_workers()); the
 * rest wait in order. It knows nothing of io's buffering
 * (zloopgo/_files/), of how the pool schedules its workers, nor of the
 * engine beyond the completion the pool posts. */
#define _GNU_SOURCE
#include "zl.h"
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

/* The operations, one copy: zl_files_constants_add exports each as the engine
 * module's FILE_OP_<NAME>, the number zloopgo/_files passes to file_op.
 *   OPEN       path, flags, mode -> (fd owner, st_mode, st_blksize, st_size,
 *              pos|-1, isatty, f_type)
 *   PREAD      fd, n, offset (-1: read(2)) -> bytes
 *   READALL    fd, offset (-1: read(2)), size hint -> bytes until EOF
 *   PWRITE     fd, data, offset (-1: write(2)) -> bytes written (all, or error)
 *   LSEEK      fd, offset, whence -> new offset
 *   CLOSE      fd -> None
 *   FTRUNCATE  fd, length -> None
 *   STAT       path, n (0: lstat) -> stat tuple
 *   RENAME     path, path2 -> None
 *   UNLINK     path -> None
 *   RMDIR      path -> None
 *   MKDIR      path, mode -> None
 *   LISTDIR    path -> list of bytes names */
/* clang-format off */
#define FILE_OPS(X) \
    X(OPEN) X(PREAD) X(READALL) X(PWRITE) X(LSEEK) X(CLOSE) X(FTRUNCATE) \
    X(STAT) X(RENAME) X(UNLINK) X(RMDIR) X(MKDIR) X(LISTDIR)
/* clang-format on */
#define FILE_OP_ENUM(name) OP_##name,
enum { OP_NONE, FILE_OPS(FILE_OP_ENUM) OP_LAST };

typedef struct fileop {
    zl_work work; /* the pool's part; its token carries ZL_DONE_FILE */
    int32_t op;
    int32_t fd;
    int64_t n;      /* bytes wanted / flags / whence / mode / follow */
    int64_t offset; /* file offset, -1 for the descriptor's own position */
    int64_t mode;
    char *buf; /* where a read lands / what a write sends */
    int64_t len;
    char *path, *path2; /* malloc'd */
    /* results, written by the worker */
    int64_t result;
    int err;
    struct stat st;
    int64_t pos;    /* OP_OPEN: the offset after opening, -1 if not seekable */
    int64_t fstype; /* OP_OPEN: statfs's f_type */
    int isatty;
    char *names; /* OP_LISTDIR: NUL-separated names, malloc'd */
    int64_t names_len, names_count;
    /* owned Python objects (touched with the GIL only) */
    PyObject *future;
    PyObject *data;   /* the bytes a read lands in */
    PyObject *name;   /* the name OSError reports */
    PyObject *name2;  /* the second name (rename) */
    PyObject *owner;  /* OP_OPEN: makes the object that owns the new descriptor */
    PyObject *holder; /* told when the operation ends after its future was cancelled */
    Py_buffer view;   /* what a write sends */
    int has_view;
} fileop;

static zl_sys_once once = ZL_SYS_ONCE_INIT;

static void init_once(void)
{
    /* ZLOOPGO_FILE_WORKERS: the bound on file operations at once */
    const char *env = getenv("ZLOOPGO_FILE_WORKERS");
    int n = env ? atoi(env) : 0;
    if (n > 0 && n <= ZL_WORKERS_MAX)
        zl_workers_bound(ZL_WORK_FILE, n);
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

static void do_open(fileop *op)
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
    if (fstat(fd, &op->st) < 0) {
        op->err = errno;
        close(fd);
        return;
    }
    if (S_ISDIR(op->st.st_mode)) {
        op->err = EISDIR;
        close(fd);
        return;
    }
    if ((op->n & O_APPEND) && lseek(fd, 0, SEEK_END) < 0 && errno != ESPIPE) {
        op->err = errno;
        close(fd);
        return;
    }
    op->pos = lseek(fd, 0, SEEK_CUR);
    op->isatty = S_ISCHR(op->st.st_mode) ? isatty(fd) : 0;
    /* the file system's type: closing a file of a local one cannot wait
     * for a server (zloopgo/_files/opening.py closes those at once) */
    struct statfs sfs;
    op->fstype = fstatfs(fd, &sfs) == 0 ? (int64_t)sfs.f_type : 0;
    op->result = fd;
}

static void do_listdir(fileop *op)
{
    DIR *d = opendir(op->path);
    if (d == NULL) {
        op->err = errno;
        return;
    }
    size_t cap = 256, len = 0;
    char *names = malloc(cap);
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
        size_t n = strlen(e->d_name) + 1;
        if (names != NULL && len + n > cap) {
            while (len + n > cap)
                cap *= 2;
            char *grown = realloc(names, cap);
            if (grown == NULL)
                free(names);
            names = grown;
        }
        if (names == NULL) {
            op->err = ENOMEM;
            break;
        }
        memcpy(names + len, e->d_name, n);
        len += n;
        op->names_count++;
    }
    closedir(d);
    op->names = names;
    op->names_len = (int64_t)len;
}

static int retry_eintr(int r) { return r < 0 && errno == EINTR; }

static void perform(zl_work *w)
{
    fileop *op = (fileop *)w;
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
        r = op->n ? stat(op->path, &op->st) : lstat(op->path, &op->st);
        break;
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

static void op_free(fileop *op)
{
    if (op->has_view)
        PyBuffer_Release(&op->view);
    Py_XDECREF(op->future);
    Py_XDECREF(op->data);
    Py_XDECREF(op->name);
    Py_XDECREF(op->name2);
    Py_XDECREF(op->owner);
    Py_XDECREF(op->holder);
    free(op->path);
    free(op->path2);
    free(op->names);
    PyMem_RawFree(op);
}

/* An operation whose loop closed before it finished (the GIL is held). An
 * open file's descriptor is closed: nobody will ever see it. */
static void discard(zl_work *w)
{
    fileop *op = (fileop *)w;
    if (op->op == OP_OPEN && op->err == 0)
        close((int)op->result);
    op_free(op);
}

static const zl_work_kind file_kind = {ZL_WORK_FILE, perform, discard};

PyObject *zl_files_graveyard_drain(PyObject *mod, PyObject *unused)
{
    zl_workers_drain(zl_interpreter_id());
    Py_RETURN_NONE;
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

static PyObject *names_list(const fileop *op)
{
    PyObject *list = PyList_New(op->names_count);
    const char *p = op->names;
    for (int64_t i = 0; list != NULL && i < op->names_count; i++) {
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

/* The value op's future gets; NULL with its exception set. */
static PyObject *op_value(fileop *op)
{
    if (op->err != 0) {
        errno = op->err;
        if (op->name != NULL)
            return PyErr_SetFromErrnoWithFilenameObjects(PyExc_OSError, op->name, op->name2);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    switch (op->op) {
    case OP_OPEN: {
        /* The descriptor goes to an object that closes it when collected
         * unless the caller takes it: a coroutine that never resumes (its
         * loop closed) does not leak it. */
        PyObject *fd = PyLong_FromLongLong(op->result);
        PyObject *owned = fd ? PyObject_CallOneArg(op->owner, fd) : NULL;
        Py_XDECREF(fd);
        if (owned == NULL) {
            close((int)op->result);
            return NULL;
        }
        op->err = -1; /* the owner closes it from now on */
        return Py_BuildValue("(NKLLLiL)", owned, (unsigned long long)op->st.st_mode,
                             (long long)op->st.st_blksize, (long long)op->st.st_size,
                             (long long)op->pos, op->isatty, (long long)op->fstype);
    }
    case OP_PREAD:
    case OP_READALL: {
        PyObject *data = op->data;
        op->data = NULL;
        if (op->result != PyBytes_GET_SIZE(data) && _PyBytes_Resize(&data, op->result) < 0)
            return NULL;
        return data;
    }
    case OP_PWRITE:
    case OP_LSEEK:
        return PyLong_FromLongLong(op->result);
    case OP_STAT:
        return stat_tuple(&op->st);
    case OP_LISTDIR:
        return names_list(op);
    default:
        Py_RETURN_NONE;
    }
}

static void settle(const zl_names *names, fileop *op)
{
    PyObject *value = op_value(op);
    PyObject *exc = value == NULL ? zl_fetch_exception() : NULL;
    PyObject *done = PyObject_CallMethodNoArgs(op->future, names->done);
    int is_done = done ? PyObject_IsTrue(done) : -1;
    Py_XDECREF(done);
    if (is_done == 0) {
        PyObject *r = value ? PyObject_CallMethodOneArg(op->future, names->set_result, value)
                            : PyObject_CallMethodOneArg(op->future, names->set_exception, exc);
        Py_XDECREF(r);
    } else if (is_done > 0 && op->holder != NULL) {
        /* The caller was cancelled while a worker had the operation: the
         * file learns that the worker is done with its descriptor now. */
        PyObject *r = PyObject_CallOneArg(op->holder, value ? value : Py_None);
        Py_XDECREF(r);
    }
    if (PyErr_Occurred())
        PyErr_WriteUnraisable(op->future);
    Py_XDECREF(value);
    Py_XDECREF(exc);
}

void zl_settle_files(zl_loop *L, const zl_completion *done, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        fileop *op = (fileop *)(uintptr_t)done[i].value;
        settle(&L->state->names, op);
        op_free(op);
    }
    zl_workers_drain(zl_interpreter_id());
}

/* ---- submitting ---- */

/* A copy of a path argument already converted to bytes (os.fsencode). */
static char *path_copy(PyObject *b)
{
    if (b == Py_None)
        return NULL;
    if (!PyBytes_Check(b)) {
        PyErr_SetString(PyExc_TypeError, "file_op: a path must be bytes");
        return NULL;
    }
    char *c = strdup(PyBytes_AS_STRING(b));
    if (c == NULL)
        PyErr_NoMemory();
    return c;
}

/* A read of cached pages that cannot block: preadv2(RWF_NOWAIT), which
 * returns what the page cache holds and EAGAIN rather than wait for the
 * disk (what io_uring tries first too). Returns 1 when the read is
 * complete (n bytes, or to the end of the file: a non-blocking read
 * returns 0 only there), 0 when a worker must do the rest (op->result
 * counts what is done), -1 if the file does not support it. */
static int try_inline(fileop *op)
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
    return -1;
#endif
}

/* _engine.file_op(loop, future, op, fd, n, offset, obj, obj2, mode, inline,
 *                 name, name2, holder)
 *
 * Starts operation op (the numbers above) for loop. obj is the path (bytes),
 * or the data to write; obj2 the second path; name
 * and name2 (in obj/obj2's place for errors) are set by file_names. With
 * inline true, a read first tries to complete at once from the page cache:
 * the bytes are then returned (and the future unused); otherwise the
 * result goes to the future and None is returned (with future None, a new
 * future is made and returned, for the caller to await). -2 is returned when
 * inline reading is not supported by this file, for the caller to stop
 * asking.
 *
 * holder (None, or a callable) is how an operation owns its descriptor
 * whatever happens to its caller: the operation keeps it until settled, and
 * calls it with the operation's value (None if it failed) when the
 * operation ends after its future was cancelled (its caller was). A file
 * passes a method of its own, so that it stays alive, and its descriptor
 * open, while a worker may still use the descriptor, and so that it hands
 * its turn on only then (zloopgo/_files/native.py, NativeFile._dropped_done). */
PyObject *zl_file_op(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 13) {
        PyErr_SetString(PyExc_TypeError, "file_op takes 13 arguments");
        return NULL;
    }
    PyObject *loop = args[0], *future = args[1];
    if (!zl_is_loop(loop)) {
        PyErr_SetString(PyExc_TypeError, "file_op: not a zloopgo loop");
        return NULL;
    }
    zl_loop *L = (zl_loop *)loop;
    if (zl_check_not_forked() < 0 || zl_check_closed(L) < 0)
        return NULL;
    int code = (int)PyLong_AsLong(args[2]);
    int fd = (int)PyLong_AsLong(args[3]);
    long long n = PyLong_AsLongLong(args[4]);
    long long offset = PyLong_AsLongLong(args[5]);
    PyObject *obj = args[6], *obj2 = args[7];
    long long mode = PyLong_AsLongLong(args[8]);
    int inline_ok = PyObject_IsTrue(args[9]);
    PyObject *name = args[10], *name2 = args[11], *holder = args[12];
    if (PyErr_Occurred())
        return NULL;
    if (code < OP_OPEN || code >= OP_LAST) {
        PyErr_SetString(PyExc_ValueError, "file_op: unknown operation");
        return NULL;
    }
    zl_sys_call_once(&once, init_once);
    fileop *op = PyMem_RawCalloc(1, sizeof *op);
    if (op == NULL)
        return PyErr_NoMemory();
    op->work.kind = &file_kind;
    op->work.token = (uint64_t)ZL_DONE_FILE << ZL_DONE_KIND_SHIFT;
    op->op = code;
    op->fd = fd;
    op->n = n;
    op->offset = offset;
    op->mode = mode;
    op->work.engine = L->engine;
    op->work.owner = zl_interpreter_id();
    if (name != Py_None)
        op->name = Py_NewRef(name);
    if (name2 != Py_None && code != OP_OPEN)
        op->name2 = Py_NewRef(name2);
    if (code == OP_OPEN) {
        if (!PyCallable_Check(name2)) {
            PyErr_SetString(PyExc_TypeError, "file_op: opening needs the descriptor's owner");
            op_free(op);
            return NULL;
        }
        op->owner = Py_NewRef(name2);
    }
    if (holder != Py_None)
        op->holder = Py_NewRef(holder);
    switch (code) {
    case OP_OPEN:
    case OP_STAT:
    case OP_UNLINK:
    case OP_RMDIR:
    case OP_MKDIR:
    case OP_LISTDIR:
    case OP_RENAME:
        op->path = path_copy(obj);
        if (op->path != NULL && code == OP_RENAME)
            op->path2 = path_copy(obj2);
        if (op->path == NULL || (code == OP_RENAME && op->path2 == NULL))
            goto fail;
        break;
    case OP_PREAD:
    case OP_READALL:
        if (n < 0) {
            PyErr_SetString(PyExc_ValueError, "file_op: negative size");
            goto fail;
        }
        op->data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
        if (op->data == NULL)
            goto fail;
        op->buf = PyBytes_AS_STRING(op->data);
        op->len = n;
        break;
    case OP_PWRITE:
        if (PyObject_GetBuffer(obj, &op->view, PyBUF_SIMPLE) < 0)
            goto fail;
        op->has_view = 1;
        op->buf = op->view.buf;
        op->len = op->view.len;
        break;
    default:
        break;
    }
    if (inline_ok && offset >= 0 && (code == OP_PREAD || code == OP_READALL)) {
        int r = try_inline(op);
        if (r == 1) {
            PyObject *value = op_value(op);
            op_free(op);
            return value;
        }
        if (r < 0) {
            op_free(op);
            return PyLong_FromLong(-2);
        }
    }
    /* future None: the caller hoped for an inline result; it gets the
     * future to await instead */
    PyObject *made = future == Py_None ? zl_loop_create_future(L, NULL) : NULL;
    if (future == Py_None && made == NULL)
        goto fail;
    op->future = made ? Py_NewRef(made) : Py_NewRef(future);
    zl_work_submit(&op->work);
    if (made != NULL)
        return made;
    Py_RETURN_NONE;
fail:
    op_free(op);
    return NULL;
}

/* _engine.file_workers(n=0): sets the bound on file operations running at
 * once in the process when n > 0; returns the bound in force. */
PyObject *zl_file_workers(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    zl_sys_call_once(&once, init_once);
    long n = nargs > 0 ? PyLong_AsLong(args[0]) : 0;
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 0 || n > ZL_WORKERS_MAX) {
        PyErr_Format(PyExc_ValueError, "file workers must be between 1 and %d", ZL_WORKERS_MAX);
        return NULL;
    }
    return PyLong_FromLong(zl_workers_bound(ZL_WORK_FILE, (int)n));
}

/* _engine.file_stats(): (worker threads started in the process, file
 * operations running, file operations queued, orphans not yet freed), for
 * tests. */
PyObject *zl_file_stats(PyObject *mod, PyObject *unused)
{
    zl_workers_counts c;
    zl_workers_count(ZL_WORK_FILE, &c);
    return Py_BuildValue("(iiii)", c.started, c.running, c.queued, c.orphaned);
}

int zl_files_constants_add(PyObject *module)
{
#define FILE_OP_CONSTANT(name)                                            \
    if (PyModule_AddIntConstant(module, "FILE_OP_" #name, OP_##name) < 0) \
        return -1;
    FILE_OPS(FILE_OP_CONSTANT)
#undef FILE_OP_CONSTANT
    return 0;
}
