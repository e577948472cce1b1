//go:build windows

/* What capi/files.c provides, on Windows, where its operations (open,
 * pread, fstat, readdir, ... on POSIX descriptors) are not ported yet: the
 * module gets no FILE_OP_* numbers, so zloopgo/_files/engine.py's
 * native_engine answers None and zloopgo.open() and zloopgo.os take their
 * executor fallback (open()'s and os's own calls in the loop's default
 * executor). The module's file functions raise NotImplementedError should
 * anything call them anyway; no file operation is ever submitted, so no
 * completion of one ever arrives.
 *
 * It knows the module's file functions; nothing of files. */
#include "zl.h"

/* No FILE_OP_* numbers: the Python edge takes that as "not built". */
int zl_files_constants_add(PyObject *module)
{
    (void)module;
    return 0;
}

static PyObject *not_ported(void)
{
    PyErr_SetString(PyExc_NotImplementedError,
                    "zloopgo's native file operations are not built on Windows");
    return NULL;
}

PyObject *zl_file_op(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    (void)mod, (void)args, (void)nargs;
    return not_ported();
}

PyObject *zl_file_workers(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    (void)mod, (void)args, (void)nargs;
    return not_ported();
}

PyObject *zl_file_stats(PyObject *mod, PyObject *unused)
{
    (void)mod, (void)unused;
    return not_ported();
}

PyObject *zl_files_graveyard_drain(PyObject *mod, PyObject *unused)
{
    (void)mod, (void)unused;
    Py_RETURN_NONE;
}

void zl_settle_files(zl_loop *L, const zl_completion *done, int64_t n)
{
    (void)L, (void)done, (void)n;
}
