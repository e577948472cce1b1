/* Helpers every other C file of the adapter may use: taking and restoring
 * the pending exception across the two ways CPython versions spell it,
 * calling a method as an `except` clause would, interning a table of
 * names at import, and growing a raw buffer.
 *
 * Layer 1 (capi/zl.h): it calls nothing of the adapter and knows no
 * loop, handle or transport. */
#include "zl.h"

PyObject *zl_fetch_exception(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL)
        PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return value;
#endif
}

void zl_restore_exception(PyObject *exc)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(exc)), exc, PyException_GetTraceback(exc));
#endif
}

PyObject *zl_call_handling(PyObject *obj, PyObject *name, PyObject *exc, PyObject *arg)
{
    PyObject *was_type, *was_value, *was_tb;
    PyErr_GetExcInfo(&was_type, &was_value, &was_tb);
    PyErr_SetExcInfo(Py_NewRef((PyObject *)Py_TYPE(exc)), Py_NewRef(exc),
                     PyException_GetTraceback(exc));
    PyObject *r = PyObject_CallMethodObjArgs(obj, name, exc, arg, NULL);
    PyErr_SetExcInfo(was_type, was_value, was_tb);
    return r;
}

int zl_intern_names(const zl_name *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        *names[i].slot = PyUnicode_InternFromString(names[i].text);
        if (*names[i].slot == NULL)
            return -1;
    }
    return 0;
}

int zl_grow_raw(void **buf, int64_t *cap, int64_t first, int64_t need, size_t size)
{
    int64_t n = *cap ? *cap : first;
    while (n < need)
        n *= 2;
    void *grown = PyMem_RawRealloc(*buf, n * size);
    if (grown == NULL)
        return -1;
    *buf = grown;
    *cap = n;
    return 0;
}
