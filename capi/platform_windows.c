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
 * from the Windows code. Every code that reaches it here is Windows's:
 * Winsock's from the socket calls, Win32's from the engine (capi's Go side
 * reports them, errors_windows.go). */
void zl_sys_raise(int err) { PyErr_SetExcFromWindowsErr(PyExc_OSError, err); }

void zl_sys_loaded(void) {}
