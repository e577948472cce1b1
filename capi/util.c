/* Helpers every other C file of the adapter may use: taking and restoring
 * the pending exception across the two ways CPython versions spell it,
 * calling a method as an `except` clause would, reading a class's slots
 * by their recorded offsets, interning a table of names at import, and
 * growing a raw buffer.
 *
 * Layer 1 (capi/zl.h): it calls nothing of the adapter and knows no
 * loop, handle or transport. */
#include "zl.h"
#include <structmember.h>

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

int zl_layout_record(zl_layout *layout, PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_Format(PyExc_TypeError, "expected a class, got %R", cls);
        return -1;
    }
    for (int f = 0; f < layout->n; f++) {
        PyObject *d = _PyType_Lookup((PyTypeObject *)cls, *layout->names[f]); /* borrowed */
        if (d == NULL || Py_TYPE(d) != &PyMemberDescr_Type) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "%R must declare %R in __slots__", cls,
                             *layout->names[f]);
            return -1;
        }
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type != T_OBJECT_EX) {
            PyErr_Format(PyExc_TypeError, "%R is not an object slot", *layout->names[f]);
            return -1;
        }
        layout->offset[f] = m->offset;
    }
    Py_XSETREF(layout->type, (PyTypeObject *)Py_NewRef(cls));
    return 0;
}

PyObject *zl_layout_lookup(const zl_layout *layout, PyObject *self, int f)
{
    return PyObject_GetAttr(self, *layout->names[f]);
}

int zl_layout_lookup_true(const zl_layout *layout, PyObject *self, int f)
{
    PyObject *v = PyObject_GetAttr(self, *layout->names[f]);
    if (v == NULL)
        return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

int zl_layout_long_slow(const zl_layout *layout, PyObject *self, int f, long *out)
{
    PyObject *v = zl_layout_get(layout, self, f);
    if (v == NULL)
        return -1;
    *out = PyLong_AsLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
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
