//go:build windows

/* The Windows platform's out-of-line part (capi/platform.h): the OSError
 * of a Winsock or Win32 error. Nothing happens when the module loads: no
 * signal mask needs to be kept off Go's threads, Windows delivers Ctrl+C
 * on a thread of its own.
 *
 * It knows CPython's OSError; no loop, handle or transport. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "platform.h"

/* As the socket module raises it (Modules/socketmodule.c, set_error):
 * OSError with winerror set, whose errno and subclass CPython derives
 * from the Windows code. An errno-style code (below Winsock's base: the
 * C library's, or EIO the adapter reports for an error without a code)
 * is raised as the os module raises errno. */
void zl_sys_raise(int err)
{
    if (err > 0 && err < WSABASEERR && err < 100) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        return;
    }
    PyErr_SetExcFromWindowsErr(PyExc_OSError, err);
}

void zl_sys_loaded(void) {}
