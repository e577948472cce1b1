/* The stream fast path: bytes a socket transport reads are handed to an
 * asyncio.StreamReader without running StreamReaderProtocol.data_received
 * and StreamReader.feed_data in Python. It does, step by step, what those
 * two methods and StreamReader._wakeup_waiter do (identical on CPython
 * 3.10 to 3.15, tests/test_asyncio_internals.py pins their source): append
 * to the reader's bytearray, wake its waiter, pause
 * reading past twice the limit — so the reader's state afterwards is the
 * same, and a failure raises what the Python code would raise.
 *
 * It applies only when nothing could tell the difference: the protocol is
 * exactly StreamReaderProtocol and the reader exactly StreamReader, their
 * classes still hold the methods zloopgo checked at import (a
 * monkeypatched or subclassed method takes the Python path), and neither
 * instance overrides them. It knows asyncio's stream classes by their
 * attribute names and keeps what it checked in the module's state
 * (zl_stream_classes), which its caller hands it; it knows nothing of
 * the loop or the engine. */
#include "zl.h"

/* _engine.set_streams(StreamReaderProtocol, StreamReader, check_asserts)
 * turns the fast path on (None turns it off).
 *
 * In a free-threaded build loops on other threads read what it sets while
 * they feed, with no GIL between: the classes and their methods are
 * written once, by the first call that names classes, and never replaced
 * or freed while the module lives; a later call turns the path off (None)
 * or on again with the same classes and check_asserts (what zloopgo's
 * tests do, test_stream_fast_path.py, test_interpreters.py), a flag read
 * atomically; other classes are refused (RuntimeError). A GIL build
 * replaces them, the GIL keeping every loop out meanwhile. */
static PyObject *set_streams(PyObject *mod, PyObject *args)
{
    PyObject *proto, *reader;
    int asserts;
    if (!PyArg_ParseTuple(args, "OOp", &proto, &reader, &asserts))
        return NULL;
    zl_module_state *state = PyModule_GetState(mod);
    zl_stream_classes *c = &state->streams;
#ifdef Py_GIL_DISABLED
    PyTypeObject *set = c->protocol_type; /* written under the section alone */
    if (proto == Py_None) {
        ZL_FT_STORE(c->off, 1);
        Py_RETURN_NONE;
    }
    if (!PyType_Check(proto) || !PyType_Check(reader))
        return PyErr_Format(PyExc_TypeError, "expected two classes");
    if (set != NULL) {
        if (proto != (PyObject *)set || reader != (PyObject *)c->reader_type ||
            asserts != c->check_asserts)
            return PyErr_Format(PyExc_RuntimeError,
                                "this module's stream classes are %s and %s already (a "
                                "free-threaded build sets them once)",
                                set->tp_name, c->reader_type->tp_name);
        ZL_FT_STORE(c->off, 0);
        Py_RETURN_NONE;
    }
#else
    Py_CLEAR(c->protocol_type);
    Py_CLEAR(c->reader_type);
    if (proto == Py_None)
        Py_RETURN_NONE;
    if (!PyType_Check(proto) || !PyType_Check(reader))
        return PyErr_Format(PyExc_TypeError, "expected two classes");
#endif
    struct {
        PyObject **slot;
        PyTypeObject *type;
        PyObject *name;
    } methods[] = {
        {&c->data_received_fn, (PyTypeObject *)proto, state->names.data_received},
        {&c->stream_reader_prop, (PyTypeObject *)proto, state->names._stream_reader},
        {&c->feed_data_fn, (PyTypeObject *)reader, state->names.feed_data},
        {&c->wakeup_waiter_fn, (PyTypeObject *)reader, state->names._wakeup_waiter},
    };
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        PyObject *m = _PyType_Lookup(methods[i].type, methods[i].name); /* borrowed */
        if (m == NULL)
            return PyErr_Format(PyExc_TypeError, "%R has no %R", methods[i].type, methods[i].name);
        Py_XSETREF(*methods[i].slot, Py_NewRef(m));
    }
#ifdef Py_GIL_DISABLED
    /* the protocol class last, released: a loop that loads it (acquiring,
     * zl_stream_feed) sees everything else set */
    c->reader_type = (PyTypeObject *)Py_NewRef(reader);
    c->protocol_version = c->reader_version = 0; /* looked at on first use */
    c->check_asserts = asserts;
    ZL_FT_STORE(c->off, 0);
    __atomic_store_n(&c->protocol_type, (PyTypeObject *)Py_NewRef(proto), __ATOMIC_RELEASE);
#else
    c->protocol_type = (PyTypeObject *)Py_NewRef(proto);
    c->reader_type = (PyTypeObject *)Py_NewRef(reader);
    c->protocol_version = c->protocol_type->tp_version_tag;
    c->reader_version = c->reader_type->tp_version_tag;
    c->check_asserts = asserts;
#endif
    Py_RETURN_NONE;
}

/* In a critical section on the module (a plain call in a GIL build): two
 * threads' calls at once: one records, the other finds it done. */
PyObject *zl_set_streams(PyObject *mod, PyObject *args)
{
    PyObject *r;
    Py_BEGIN_CRITICAL_SECTION(mod);
    r = set_streams(mod, args);
    Py_END_CRITICAL_SECTION();
    return r;
}

/* The class still resolves `name` to what was checked. A changed version
 * tag (any attribute of the class or a base set since) means look again. */
static int class_unchanged(PyTypeObject *type, unsigned int *version, PyObject *name1,
                           PyObject *fn1, PyObject *name2, PyObject *fn2)
{
#ifdef Py_GIL_DISABLED
    /* Without the GIL loops on several threads share the cache and
     * another thread may change the class: the tags are relaxed atomics
     * (a stale one only asks again), the class's taken before the
     * lookups (zl_tag_before_lookups, zl.h); the lookups are compared by
     * identity alone, so they stay borrowed. */
    unsigned int tag = ZL_FT_LOAD(type->tp_version_tag);
    if (tag != 0 && tag == ZL_FT_LOAD(*version))
        return 1;
    tag = zl_tag_before_lookups(type);
    if (_PyType_Lookup(type, name1) != fn1 || _PyType_Lookup(type, name2) != fn2)
        return 0;
    ZL_FT_STORE(*version, tag);
    return 1;
#else
    if (type->tp_version_tag != 0 && type->tp_version_tag == *version)
        return 1;
    if (_PyType_Lookup(type, name1) != fn1 || _PyType_Lookup(type, name2) != fn2)
        return 0;
    *version = type->tp_version_tag; /* the lookups assigned one if it had none */
    return 1;
#endif
}

/* obj.name is still the class's method fn, bound to obj (an attribute set
 * on the instance would override it). Asked as a method call asks
 * (_PyObject_GetMethod), which looks in the instance's dictionary
 * without materializing it and makes no bound method when the class's
 * function is what obj.name gives. */
static int bound_method_is(PyObject *obj, PyObject *name, PyObject *fn)
{
    PyObject *m = NULL;
    int unbound = _PyObject_GetMethod(obj, name, &m);
    if (m == NULL) {
        PyErr_Clear();
        return 0;
    }
    int same = unbound ? m == fn
                       : PyMethod_Check(m) && PyMethod_GET_FUNCTION(m) == fn &&
                             PyMethod_GET_SELF(m) == obj;
    Py_DECREF(m);
    return same;
}

static int attr_true(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    int r = v == Py_True ? 1 : v == Py_False || v == Py_None ? 0 : PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* StreamReader._wakeup_waiter() */
static int wakeup_waiter(const zl_names *names, PyObject *reader)
{
    PyObject *waiter = PyObject_GetAttr(reader, names->_waiter);
    if (waiter == NULL)
        return -1;
    int rc = 0;
    if (waiter != Py_None) {
        rc = PyObject_SetAttr(reader, names->_waiter, Py_None);
        PyObject *cancelled = rc == 0 ? PyObject_CallMethodNoArgs(waiter, names->cancelled) : NULL;
        int is = cancelled == NULL ? -1 : PyObject_IsTrue(cancelled);
        Py_XDECREF(cancelled);
        if (is == 0) {
            PyObject *r = PyObject_CallMethodOneArg(waiter, names->set_result, Py_None);
            Py_XDECREF(r);
            is = r == NULL ? -1 : 1;
        }
        rc = is < 0 ? -1 : 0;
    }
    Py_DECREF(waiter);
    return rc;
}

/* len(buffer) > 2 * limit, with Python's arithmetic: 1, 0 or -1. */
static int over_twice(Py_ssize_t buffered, PyObject *limit)
{
    if (PyLong_CheckExact(limit)) {
        int overflow;
        long long l = PyLong_AsLongLongAndOverflow(limit, &overflow);
        if (overflow == 0 && !(l == -1 && PyErr_Occurred()) && l > -(1LL << 60) && l < (1LL << 60))
            return (long long)buffered > 2 * l;
        PyErr_Clear();
    }
    PyObject *two = PyLong_FromLong(2);
    PyObject *twice = two ? PyNumber_Multiply(two, limit) : NULL;
    PyObject *size = twice ? PyLong_FromSsize_t(buffered) : NULL;
    int r = size ? PyObject_RichCompareBool(size, twice, Py_GT) : -1;
    Py_XDECREF(two);
    Py_XDECREF(twice);
    Py_XDECREF(size);
    return r;
}

/* The tail of StreamReader.feed_data: pause reading once more than twice
 * the limit is buffered; a transport that cannot pause is forgotten. */
static int maybe_pause(const zl_names *names, PyObject *reader, Py_ssize_t buffered)
{
    PyObject *transport = PyObject_GetAttr(reader, names->_transport);
    if (transport == NULL)
        return -1;
    if (transport == Py_None) {
        Py_DECREF(transport);
        return 0;
    }
    int rc = -1, paused = attr_true(reader, names->_paused), over = 0;
    if (paused == 0) {
        PyObject *limit = PyObject_GetAttr(reader, names->_limit);
        over = limit ? over_twice(buffered, limit) : -1;
        Py_XDECREF(limit);
    }
    if (paused < 0 || over < 0) {
        rc = -1;
    } else if (paused || !over) {
        rc = 0;
    } else {
        PyObject *r = PyObject_CallMethodNoArgs(transport, names->pause_reading);
        if (r != NULL) {
            Py_DECREF(r);
            rc = PyObject_SetAttr(reader, names->_paused, Py_True);
        } else if (PyErr_ExceptionMatches(PyExc_NotImplementedError)) {
            PyErr_Clear();
            rc = PyObject_SetAttr(reader, names->_transport, Py_None);
        }
    }
    Py_DECREF(transport);
    return rc;
}

int zl_stream_feed(zl_module_state *state, PyObject *protocol, const char *buf, Py_ssize_t n)
{
    if (state == NULL)
        return 0;
    zl_stream_classes *c = &state->streams;
#ifdef Py_GIL_DISABLED
    /* set once, off as a flag (zl_set_streams) */
    PyTypeObject *set = __atomic_load_n(&c->protocol_type, __ATOMIC_ACQUIRE);
    if (set == NULL || ZL_FT_LOAD(c->off) || Py_TYPE(protocol) != set ||
        !class_unchanged(c->protocol_type, &c->protocol_version, state->names.data_received,
                         c->data_received_fn, state->names._stream_reader, c->stream_reader_prop) ||
        !bound_method_is(protocol, state->names.data_received, c->data_received_fn))
        return 0;
#else
    if (c->protocol_type == NULL || Py_TYPE(protocol) != c->protocol_type ||
        !class_unchanged(c->protocol_type, &c->protocol_version, state->names.data_received,
                         c->data_received_fn, state->names._stream_reader, c->stream_reader_prop) ||
        !bound_method_is(protocol, state->names.data_received, c->data_received_fn))
        return 0;
#endif
    /* data_received: reader = self._stream_reader (a weak reference) */
    PyObject *wr = PyObject_GetAttr(protocol, state->names._stream_reader_wr);
    if (wr == NULL)
        return -1;
    PyObject *reader = NULL;
    if (wr != Py_None) {
        reader = PyObject_CallNoArgs(wr);
        if (reader == NULL) {
            Py_DECREF(wr);
            return -1;
        }
    }
    Py_DECREF(wr);
    if (reader == NULL || reader == Py_None) { /* no reader: the data is dropped */
        Py_XDECREF(reader);
        return 1;
    }
    if (Py_TYPE(reader) != c->reader_type ||
        !class_unchanged(c->reader_type, &c->reader_version, state->names.feed_data,
                         c->feed_data_fn, state->names._wakeup_waiter, c->wakeup_waiter_fn) ||
        !bound_method_is(reader, state->names.feed_data, c->feed_data_fn) ||
        !bound_method_is(reader, state->names._wakeup_waiter, c->wakeup_waiter_fn)) {
        Py_DECREF(reader);
        return 0;
    }
    int rc = -1;
    PyObject *buffer = NULL;
    int eof = c->check_asserts ? attr_true(reader, state->names._eof) : 0;
    if (eof > 0)
        PyErr_SetString(PyExc_AssertionError, "feed_data after feed_eof");
    if (eof == 0 && (buffer = PyObject_GetAttr(reader, state->names._buffer)) != NULL) {
        if (!PyByteArray_CheckExact(buffer)) {
            rc = 0; /* not asyncio's bytearray: let feed_data deal with it */
        } else {
            /* extend(), as feed_data's self._buffer.extend(data): the
             * resize and the copy in one critical section on the buffer,
             * as bytearray's own methods take it, so that another thread
             * that reads, clears or resizes the reader's buffer meanwhile
             * (which it may without the GIL) never sees the copy land in
             * memory it freed, nor the grown tail unwritten */
            int resized;
            Py_BEGIN_CRITICAL_SECTION(buffer);
            Py_ssize_t old = PyByteArray_GET_SIZE(buffer);
            resized = PyByteArray_Resize(buffer, old + n) == 0;
            if (resized)
                memcpy(PyByteArray_AS_STRING(buffer) + old, buf, n);
            Py_END_CRITICAL_SECTION();
            if (resized) {
                if (wakeup_waiter(&state->names, reader) == 0 &&
                    maybe_pause(&state->names, reader, PyByteArray_GET_SIZE(buffer)) == 0)
                    rc = 1;
            }
        }
    }
    Py_XDECREF(buffer);
    Py_DECREF(reader);
    return rc;
}
