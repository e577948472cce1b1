/* Helpers every other C file of the adapter may use: taking and restoring
 * the pending exception across the two ways CPython versions spell it,
 * calling a method as an `except` clause would, giving a Python subclass
 * descriptors of its own for the C methods it inherits (own_methods),
 * reading a class's slots by their recorded offsets (a field's name from
 * the module state's zl_names), finding the module state of a class and
 * keeping it in a native base's instance, fetching asyncio's
 * _FlowControlMixin (the native transport bases' base) and checking a
 * native base's layout, and growing a raw buffer.
 *
 * Layer 1 (capi/zl.h): it calls nothing of the adapter and knows no
 * loop, handle or transport. */
#include "zl.h"
#include <frameobject.h>
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

void zl_traceback_add(const char *file, const char *func, int line)
{
    PyObject *exc = zl_fetch_exception();
    if (exc == NULL)
        return;
    PyObject *globals = PyDict_New();
    PyCodeObject *code = PyCode_NewEmpty(file, func, line);
    PyFrameObject *frame = globals != NULL && code != NULL
                               ? PyFrame_New(PyThreadState_Get(), code, globals, NULL)
                               : NULL;
    Py_XDECREF(code);
    Py_XDECREF(globals);
    if (frame == NULL)
        PyErr_Clear(); /* the exception keeps the traceback it has */
    zl_restore_exception(exc);
    if (frame != NULL) {
        PyTraceBack_Here(frame);
        Py_DECREF(frame);
    }
}

/* An exception a native path raised in C (a recv_into() refusing the
 * buffer get_buffer() gave) has no traceback; asyncio's passed through its
 * Python frames, and a log of it shows them. It gets one frame. */
static void give_traceback(PyObject *exc)
{
    PyObject *tb = PyException_GetTraceback(exc);
    if (tb != NULL) {
        Py_DECREF(tb);
        return;
    }
    zl_restore_exception(Py_NewRef(exc));
    zl_traceback_add("<zloopgo native path>", "<native>", 0);
    Py_XDECREF(zl_fetch_exception()); /* exc itself, its traceback set */
}

PyObject *zl_call_handling(PyObject *obj, PyObject *name, PyObject *exc, PyObject *arg)
{
    if (PyExceptionInstance_Check(exc))
        give_traceback(exc);
#if PY_VERSION_HEX >= 0x030B0000
    /* 3.11+ keeps the exception being handled as one object */
    PyObject *was = PyErr_GetHandledException();
    PyErr_SetHandledException(exc);
    PyObject *r = PyObject_CallMethodObjArgs(obj, name, exc, arg, NULL);
    PyErr_SetHandledException(was);
    Py_XDECREF(was);
#else
    PyObject *was_type, *was_value, *was_tb;
    PyErr_GetExcInfo(&was_type, &was_value, &was_tb);
    PyErr_SetExcInfo(Py_NewRef((PyObject *)Py_TYPE(exc)), Py_NewRef(exc),
                     PyException_GetTraceback(exc));
    PyObject *r = PyObject_CallMethodObjArgs(obj, name, exc, arg, NULL);
    PyErr_SetExcInfo(was_type, was_value, was_tb);
#endif
    return r;
}

/* CPython's specialized calls of a C method (CALL_METHOD_DESCRIPTOR_*)
 * apply only when the instance's type is exactly the type the method
 * descriptor names; a method of a C base reached through a Python
 * subclass takes the generic call instead (the subtype check, the
 * vectorcall through the descriptor: ~5-8 ns a call). So the subclass gets
 * descriptors of its own for the same C functions: the same code runs, and
 * asyncio's Python that calls transport.write or loop.call_soon gets the
 * specialized call. Only the adapter's own types' methods that cls
 * resolves to (not ones a class between them overrides) are copied. */
PyObject *zl_own_methods(PyObject *mod, PyObject *cls)
{
    if (!PyType_Check(cls) || !(((PyTypeObject *)cls)->tp_flags & Py_TPFLAGS_HEAPTYPE) ||
        strncmp(((PyTypeObject *)cls)->tp_name, "zloopgo._engine.", 16) == 0) {
        PyErr_Format(PyExc_TypeError, "expected a class defined in Python, got %R", cls);
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)cls;
    PyObject *owned = PyList_New(0);
    PyObject *mro = type->tp_mro;
    for (Py_ssize_t i = 1; owned != NULL && mro != NULL && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *base = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        /* the adapter's types, static or made from the module (LoopCore):
         * a class defined in Python has no tp_methods, nor such a name */
        if (base->tp_methods == NULL || strncmp(base->tp_name, "zloopgo._engine.", 16) != 0)
            continue;
        for (PyMethodDef *def = base->tp_methods; def->ml_name != NULL; def++) {
            if (def->ml_flags & (METH_CLASS | METH_STATIC | METH_COEXIST))
                continue;
            PyObject *name = PyUnicode_InternFromString(def->ml_name);
            if (name == NULL)
                goto fail;
#ifdef Py_GIL_DISABLED
            /* followed (d_method): a strong reference (zl_type_lookup_ref) */
            PyObject *found = zl_type_lookup_ref(type, name);
#else
            /* borrowed */
            PyObject *found = _PyType_Lookup(type, name);
#endif
            int ours = found != NULL && Py_IS_TYPE(found, &PyMethodDescr_Type) &&
                       ((PyMethodDescrObject *)found)->d_method == def &&
                       PyDescr_TYPE(found) != type;
#ifdef Py_GIL_DISABLED
            Py_XDECREF(found);
#endif
            PyObject *descr = ours ? PyDescr_NewMethod(type, def) : NULL;
            int failed = ours && (descr == NULL || PyObject_SetAttr(cls, name, descr) < 0 ||
                                  PyList_Append(owned, name) < 0);
            Py_XDECREF(descr);
            Py_DECREF(name);
            if (failed)
                goto fail;
        }
    }
    return owned;
fail:
    Py_DECREF(owned);
    return NULL;
}

int zl_refuse_set_again(const char *what, const void *recorded)
{
    if (recorded == NULL)
        return 0;
    PyErr_Format(PyExc_RuntimeError,
                 "%s was called already for this module: what it sets is set once, "
                 "since loops read it without a lock",
                 what);
    return -1;
}

PyObject *zl_set_layout_once(PyObject *mod, const char *what, zl_layout *layout, PyObject *cls)
{
    zl_module_state *state = PyModule_GetState(mod);
    int rc;
    Py_BEGIN_CRITICAL_SECTION(mod);
    rc = zl_refuse_set_again(what, layout->type) < 0 ? -1
                                                     : zl_layout_record(layout, &state->names, cls);
    Py_END_CRITICAL_SECTION();
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

int zl_layout_record(zl_layout *layout, const zl_names *names, PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_Format(PyExc_TypeError, "expected a class, got %R", cls);
        return -1;
    }
    for (int f = 0; f < layout->n; f++) {
        PyObject *name = zl_layout_name(layout, names, f);
        PyObject *d = _PyType_Lookup((PyTypeObject *)cls, name); /* borrowed */
        if (d == NULL || Py_TYPE(d) != &PyMemberDescr_Type) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "%R must declare %R in __slots__", cls, name);
            return -1;
        }
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type != T_OBJECT_EX) {
            PyErr_Format(PyExc_TypeError, "%R is not an object slot", name);
            return -1;
        }
        layout->offset[f] = m->offset;
        layout->member[f] = m;
    }
    Py_XSETREF(layout->type, (PyTypeObject *)Py_NewRef(cls));
    layout->checked = NULL; /* checked on the first read */
    layout->checked_version = 0;
    return 0;
}

/* Whether field f's name still resolves, on tp, to the slot's member
 * descriptor that layout recorded. Without the GIL another thread may
 * change the class and free the descriptor a borrowed lookup gave, so it
 * is followed through a strong reference there (zl_type_lookup_ref).
 * Never sets an exception: the names are strings, the MROs tuples. */
static inline int field_unchanged(const zl_layout *layout, const zl_names *names, PyTypeObject *tp,
                                  int f)
{
#ifdef Py_GIL_DISABLED
    PyObject *d = zl_type_lookup_ref(tp, zl_layout_name(layout, names, f));
    int same = d != NULL && Py_IS_TYPE(d, &PyMemberDescr_Type) &&
               ((PyMemberDescrObject *)d)->d_member == layout->member[f];
    Py_XDECREF(d);
    return same;
#else
    PyObject *d = _PyType_Lookup(tp, zl_layout_name(layout, names, f)); /* borrowed */
    return d != NULL && Py_IS_TYPE(d, &PyMemberDescr_Type) &&
           ((PyMemberDescrObject *)d)->d_member == layout->member[f];
#endif
}

int zl_layout_check(const zl_layout *layout, PyTypeObject *tp)
{
    if (layout->type == NULL || !PyType_IsSubtype(tp, layout->type))
        return 0;
    zl_module_state *state = zl_state_of_type(tp); /* found: tp derives from its types */
    if (state == NULL) {
        PyErr_Clear();
        return 0;
    }
#ifdef Py_GIL_DISABLED
    /* the tag taken before the lookups, so that a class changed meanwhile
     * leaves it stale (zl_tag_before_lookups) */
    unsigned int tag = zl_tag_before_lookups(tp);
#endif
    for (int f = 0; f < layout->n; f++) {
        if (!field_unchanged(layout, &state->names, tp, f))
            return 0;
    }
#ifdef Py_GIL_DISABLED
    /* the tag alone, one atomic word, remembers the class (zl_layout_direct) */
    if (tag != 0)
        ZL_FT_STORE(((zl_layout *)layout)->checked_version, tag);
#else
#if PY_VERSION_HEX >= 0x030C0000
    PyUnstable_Type_AssignVersionTag(tp); /* the lookups may have made none */
#endif
    if (tp->tp_version_tag == 0)
        return 1; /* no tag to remember it by (CPython ran out): checked each time */
    /* The cache is the layout's only mutable part, written from the thread
     * that holds its interpreter's GIL; layouts live in the module state. */
    zl_layout *cache = (zl_layout *)layout;
    cache->checked = tp;
    cache->checked_version = tp->tp_version_tag;
#endif
    return 1;
}

/* Field f's name, from the names of the module that made self's class's
 * native base: a lookup is the slow path (another class, an unset slot),
 * so it may take the MRO walk. */
static PyObject *lookup_name(const zl_layout *layout, PyObject *self, int f)
{
    zl_module_state *state = zl_state_of_type(Py_TYPE(self));
    return state != NULL ? zl_layout_name(layout, &state->names, f) : NULL;
}

PyObject *zl_layout_lookup(const zl_layout *layout, PyObject *self, int f)
{
    PyObject *name = lookup_name(layout, self, f);
    return name != NULL ? PyObject_GetAttr(self, name) : NULL;
}

int zl_layout_lookup_true(const zl_layout *layout, PyObject *self, int f)
{
    PyObject *v = zl_layout_lookup(layout, self, f);
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

#ifdef Py_GIL_DISABLED
int zl_refuse_foreign_thread(void)
{
    /* asyncio's BaseEventLoop._check_thread's message (debug mode) */
    PyErr_SetString(
        PyExc_RuntimeError,
        "Non-thread-safe operation invoked on an event loop other than the current one");
    return -1;
}
#endif

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

zl_module_state *zl_state_of_type(PyTypeObject *tp)
{
#if PY_VERSION_HEX >= 0x030B0000
    PyObject *m = PyType_GetModuleByDef(tp, &zl_module_def); /* borrowed */
#else
    PyObject *m = _PyType_GetModuleByDef(tp, &zl_module_def); /* the same MRO walk, 3.10's name */
#endif
    return m != NULL ? PyModule_GetState(m) : NULL;
}

zl_module_state *zl_state_remember(PyObject *self, zl_module_state **kept)
{
    zl_module_state *st = zl_state_of_type(Py_TYPE(self));
    if (st != NULL)
        *kept = st;
    return st;
}

int zl_native_base_check(PyTypeObject *type, Py_ssize_t state_offset)
{
    PyTypeObject *base = type->tp_base;
    /* the field follows the base's own layout, and nothing else of it */
    if (base->tp_basicsize != state_offset || base->tp_itemsize != 0 ||
        type->tp_basicsize != state_offset + (Py_ssize_t)sizeof(zl_module_state *)) {
        PyErr_Format(PyExc_TypeError, "%s: its base %s has a layout zloopgo does not know",
                     type->tp_name, base->tp_name);
        return -1;
    }
    return 0;
}

PyObject *zl_flow_control_base(void)
{
    PyObject *transports = PyImport_ImportModule("asyncio.transports");
    if (transports == NULL)
        return NULL;
    PyObject *base = PyObject_GetAttrString(transports, "_FlowControlMixin");
    Py_DECREF(transports);
    if (base != NULL && !PyType_Check(base)) {
        PyErr_Format(PyExc_TypeError, "asyncio.transports._FlowControlMixin is not a class: %R",
                     base);
        Py_CLEAR(base);
    }
    return base;
}
