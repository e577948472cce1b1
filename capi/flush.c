/* The flush list: the transports of one loop that hold writes made by the
 * running callback (transport.c decides what a transport holds and how it
 * is sent). This file alone grows the list, drains it when the callback
 * returns, shows it to the collector and frees it.
 *
 * It knows a transport only as an object to keep and to hand to
 * zl_transport_flush; it knows nothing of sockets, the engine or the
 * ready queue. */
#include "zl.h"

int zl_flush_reserve(zl_loop *L)
{
    if (L->flush_len == L->flush_cap) {
        int64_t cap = L->flush_cap ? L->flush_cap * 2 : 16;
        PyObject **f = PyMem_Realloc(L->flush, cap * sizeof(PyObject *));
        if (f == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        L->flush = f;
        L->flush_cap = cap;
    }
    return 0;
}

void zl_flush_add(zl_loop *L, PyObject *transport)
{
    L->flush[L->flush_len++] = Py_NewRef(transport);
}

void zl_flush_writes(zl_loop *L)
{
    PyObject *exc = PyErr_Occurred() ? zl_fetch_exception() : NULL;
    /* Sending may run Python code (errors, flow control) that writes
     * again: those writes are sent at once, as outside a callback. In
     * the order the transports were first written to, as asyncio's sends
     * would have reached the kernel. */
    char in_callback = L->in_callback;
    L->in_callback = 0;
    for (int64_t i = 0; i < L->flush_len; i++) {
        PyObject *t = L->flush[i];
        L->flush[i] = NULL;
        PyObject *r = zl_transport_flush(t, NULL);
        if (r == NULL)
            PyErr_WriteUnraisable(t);
        Py_XDECREF(r);
        Py_DECREF(t);
    }
    L->flush_len = 0;
    L->in_callback = in_callback;
    if (exc != NULL)
        zl_restore_exception(exc);
}

void zl_drop_flush_list(zl_loop *L)
{
    while (L->flush_len > 0) {
        PyObject *t = L->flush[--L->flush_len];
        Py_DECREF(t);
    }
}

int zl_flush_traverse(zl_loop *L, visitproc visit, void *arg)
{
    for (int64_t i = 0; i < L->flush_len; i++)
        Py_VISIT(L->flush[i]);
    return 0;
}

void zl_flush_free(zl_loop *L) { PyMem_Free(L->flush); }

/* _zl_flush_writes(): what this loop's transports hold leaves now (before
 * os.fork(), so that the child does not inherit unsent bytes). */
PyObject *zl_loop_flush_writes(zl_loop *L, PyObject *unused)
{
    zl_flush_writes(L);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}
