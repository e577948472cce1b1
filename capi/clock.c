/* The loop's clock as the program sees it. loop.time() reads the clock
 * time.monotonic() and the engine read (zl_sys_monotonic_ns); but asyncio lets a
 * program replace it — unittest.mock.patch.object(loop, "time", fake), a
 * subclass overriding time(), a patch on the class — and then schedules
 * call_later() and decides which timers are due by the replacement. So
 * does zloopgo: an assignment to loop.time is seen as it happens (the
 * loop's setattro), a class change by its version tag, and while the clock
 * is replaced C reads it before each iteration for the engine
 * (zl_shared.fake_now). An unreplaced clock costs a pointer test per
 * call_later and a version-tag compare per iteration.
 *
 * It knows the loop object and the time method; nothing of the engine
 * beyond the two fields it sets. */
#include "zl.h"

/* On Windows, time.monotonic() reads GetTickCount64 before CPython 3.13
 * and QueryPerformanceCounter from 3.13 on; the build tag
 * zloopgo_tickcount64 picks the former for C and Go alike
 * (capi/clock_tickcount64_windows.go), and setup.py sets it from the
 * interpreter's version. A build whose tag disagrees with the Python.h it
 * compiles against would schedule timers on another clock than
 * loop.time()'s: it stops here. */
#if defined(MS_WINDOWS) && ((PY_VERSION_HEX < 0x030D0000) != defined(ZL_SYS_CLOCK_TICKCOUNT64))
#error "CPython < 3.13 on Windows needs -tags zloopgo_tickcount64, and only it does"
#endif

/* time.monotonic()'s clock, which the engine reads too (core.Now): the
 * platform's (zl_sys_monotonic_ns, capi/platform.h). */
double zl_monotonic(void)
{
    /* the same conversion as time.monotonic() and core.Now() */
    return (double)zl_sys_monotonic_ns() / 1e9;
}

int64_t zl_monotonic_ns(void) { return zl_sys_monotonic_ns(); }

PyObject *zl_loop_time(zl_loop *L, PyObject *unused) { return PyFloat_FromDouble(zl_monotonic()); }

double zl_clock_resolution(void) { return zl_sys_clock_resolution(); }

/* Looks at what loop.time is now: LoopCore's own method, or a replacement
 * kept in L->clock.replacement. 0, or -1 with an exception set. */
static int refresh(zl_loop *L)
{
    PyObject *time = PyObject_GetAttr((PyObject *)L, L->state->names.time);
    if (time == NULL)
        return -1;
        /* LoopCore's method, or the copy of it zloopgo.Loop owns (zl_own_methods,
     * util.c): a descriptor of the same C method */
#ifdef Py_GIL_DISABLED
    /* without the GIL another thread may change the class and free the
     * descriptor: its d_method followed through a strong reference
     * (zl_type_lookup_ref, zl.h), the tag taken before the lookup */
    unsigned int tag = zl_tag_before_lookups(Py_TYPE(L));
    PyObject *found = zl_type_lookup_ref(Py_TYPE(L), L->state->names.time);
    int own = PyCFunction_Check(time) && PyCFunction_GET_SELF(time) == (PyObject *)L &&
              found != NULL && Py_IS_TYPE(found, &PyMethodDescr_Type) &&
              ((PyMethodDescrObject *)found)->d_method->ml_meth == (PyCFunction)zl_loop_time;
    Py_XDECREF(found);
    L->clock.type_version = tag;
#else
    PyObject *found = _PyType_Lookup(Py_TYPE(L), L->state->names.time); /* borrowed */
    int own = PyCFunction_Check(time) && PyCFunction_GET_SELF(time) == (PyObject *)L &&
              found != NULL && Py_IS_TYPE(found, &PyMethodDescr_Type) &&
              ((PyMethodDescrObject *)found)->d_method->ml_meth == (PyCFunction)zl_loop_time;
    L->clock.type_version = Py_TYPE(L)->tp_version_tag; /* the lookups gave it one */
#endif
    if (own) {
        Py_DECREF(time);
        Py_CLEAR(L->clock.replacement);
        L->sh.faked = 0;
        return 0;
    }
    Py_XSETREF(L->clock.replacement, time);
    return 0;
}

int zl_clock_check(zl_loop *L)
{
#ifdef Py_GIL_DISABLED
    /* the class's tag, which another thread's change of it writes, read
     * atomically; L->clock is the loop's own */
    unsigned int tag = ZL_FT_LOAD(Py_TYPE(L)->tp_version_tag);
    if (tag != L->clock.type_version || tag == 0)
        return refresh(L);
#else
    if (Py_TYPE(L)->tp_version_tag != L->clock.type_version || Py_TYPE(L)->tp_version_tag == 0)
        return refresh(L);
#endif
    return 0;
}

int zl_clock_sync(zl_loop *L)
{
    if (zl_clock_check(L) < 0)
        return -1;
    if (L->clock.replacement == NULL)
        return 0;
    PyObject *now = PyObject_CallNoArgs(L->clock.replacement);
    double t = now ? PyFloat_AsDouble(now) : -1.0;
    Py_XDECREF(now);
    if (t == -1.0 && PyErr_Occurred())
        return -1;
    L->sh.fake_now = t;
    L->sh.faked = 1;
    return 0;
}

PyObject *zl_clock_now(zl_loop *L)
{
    if (L->clock.replacement != NULL)
        return PyObject_CallNoArgs(L->clock.replacement);
    return PyFloat_FromDouble(zl_monotonic());
}

int zl_loop_setattro(PyObject *self, PyObject *name, PyObject *value)
{
    if (PyObject_GenericSetAttr(self, name, value) < 0)
        return -1;
    if (PyUnicode_Check(name) && PyUnicode_Compare(name, ((zl_loop *)self)->state->names.time) == 0)
        return refresh((zl_loop *)self);
    return 0;
}

int zl_clock_traverse(zl_loop *L, visitproc visit, void *arg)
{
    Py_VISIT(L->clock.replacement);
    return 0;
}

void zl_clock_clear(zl_loop *L) { Py_CLEAR(L->clock.replacement); }
