/* Blocking file-system calls for zloopgo.open() and zloopgo.os, off the
 * loop thread: the part that is the same on every platform.
 *
 * On the loop thread, _engine.file_op() takes one operation (open, pread,
 * pwrite, lseek, close, stat, rename, ...: FILE_OPS in files.h), checks and
 * converts its arguments, and either finishes it at once when that cannot
 * block (a read of cached pages, where the platform can tell: see
 * zl_file_try_inline) or submits it to the worker pool (capi/workers.c; no
 * Go call). A worker performs the system call on its own thread without
 * the GIL (zl_file_perform: files_posix.c, files_windows.c) and posts the
 * completion to the loop's engine; zl_dispatch hands it to
 * zl_settle_files, which builds the result (a bytes object the read landed
 * in, shrunk to what came; a number; a tuple) or the OSError the same call
 * raises in os/io, and settles the operation's future.
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
 * (zloopgo/_files/), of the system calls (the platform part), of how the
 * pool schedules its workers, nor of the engine beyond the completion the
 * pool posts. */
#include "files.h"
#include <stdlib.h>

static zl_sys_once once = ZL_SYS_ONCE_INIT;

static void init_once(void)
{
    /* ZLOOPGO_FILE_WORKERS: the bound on file operations at once */
    const char *env = getenv("ZLOOPGO_FILE_WORKERS");
    int n = env ? atoi(env) : 0;
    if (n > 0 && n <= ZL_WORKERS_MAX)
        zl_workers_bound(ZL_WORK_FILE, n);
}

static void perform(zl_work *w) { zl_file_perform((zl_fileop *)w); }

/* ---- on the loop thread ---- */

static void op_free(zl_fileop *op)
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
    free(op->sys);
    PyMem_RawFree(op);
}

/* An operation whose loop closed before it finished (the GIL is held). An
 * open file's descriptor is closed: nobody will ever see it. */
static void discard(zl_work *w)
{
    zl_fileop *op = (zl_fileop *)w;
    if (op->op == OP_OPEN && op->err == 0 && op->oserr == 0)
        zl_file_close_quietly(op->result);
    op_free(op);
}

static const zl_work_kind file_kind = {ZL_WORK_FILE, perform, discard};

PyObject *zl_files_graveyard_drain(PyObject *mod, PyObject *unused)
{
    zl_workers_drain(zl_interpreter_id());
    Py_RETURN_NONE;
}

/* The value op's future gets; NULL with its exception set. */
static PyObject *op_value(zl_fileop *op)
{
    if (op->err != 0 || op->oserr != 0)
        return zl_file_raise(op);
    switch (op->op) {
    case OP_OPEN: {
        /* The descriptor goes to an object that closes it when collected
         * unless the caller takes it: a coroutine that never resumes (its
         * loop closed) does not leak it. */
        PyObject *fd = PyLong_FromLongLong(op->result);
        PyObject *owned = fd ? PyObject_CallOneArg(op->owner, fd) : NULL;
        Py_XDECREF(fd);
        if (owned == NULL) {
            zl_file_close_quietly(op->result);
            return NULL;
        }
        op->err = -1; /* the owner closes it from now on */
        return Py_BuildValue("(NKLLLiL)", owned, (unsigned long long)op->st_mode,
                             (long long)op->blksize, (long long)op->size, (long long)op->pos,
                             op->isatty, (long long)op->fstype);
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
    case OP_LISTDIR:
        return zl_file_sys_value(op);
    default:
        Py_RETURN_NONE;
    }
}

static void settle(const zl_names *names, zl_fileop *op)
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
        zl_fileop *op = (zl_fileop *)(uintptr_t)done[i].value;
        settle(&L->state->names, op);
        op_free(op);
    }
    zl_workers_drain(zl_interpreter_id());
}

/* ---- submitting ---- */

/* A path argument already converted to bytes (os.fsencode), in the
 * platform's form. */
static void *path_copy(PyObject *b)
{
    if (!PyBytes_Check(b)) {
        PyErr_SetString(PyExc_TypeError, "file_op: a path must be bytes");
        return NULL;
    }
    return zl_file_path_new(b);
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
    if (code < OP_OPEN || code >= OP_LAST || !zl_file_supported(code)) {
        PyErr_SetString(PyExc_ValueError, "file_op: unknown operation");
        return NULL;
    }
    zl_sys_call_once(&once, init_once);
    zl_fileop *op = PyMem_RawCalloc(1, sizeof *op);
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
        int r = zl_file_try_inline(op);
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
/* Only the operations the platform performs: an absent number is what
 * tells the Python edge to take the executor fallback for that call. */
#define FILE_OP_CONSTANT(name)                                            \
    if (zl_file_supported(OP_##name) &&                                   \
        PyModule_AddIntConstant(module, "FILE_OP_" #name, OP_##name) < 0) \
        return -1;
    FILE_OPS(FILE_OP_CONSTANT)
#undef FILE_OP_CONSTANT
    return 0;
}
