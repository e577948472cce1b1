/* TimerHandle: what call_later and call_at return, a Handle with a
 * deadline and the engine slot it waits in (timers.c); cancelling one also
 * marks its slot for the engine. Its hash and comparisons are
 * asyncio.TimerHandle's own, inherited: they read _when, _callback, _args
 * and _cancelled through the getters here, each a new reference, so a
 * comparison that runs Python code (a callback's __eq__ that cancels the
 * other handle) works on objects it holds, as asyncio's does, and orders
 * and returns what asyncio's returns (the `and` of its four comparisons).
 * Timers are compared only by programs: the engine orders its heap by the
 * float deadline. It subclasses asyncio.events.TimerHandle, not
 * our Handle (a class has one layout to extend); handle.c's functions serve
 * both, as the two begin alike (capi/zl.h).
 *
 * Above handle.c and timers.c (capi/zl.h); it knows nothing of when a
 * timer is due. */
#include "zl.h"

static PyObject *timer_when_obj(zl_timer *h)
{
    if (h->when_obj != NULL)
        return Py_NewRef(h->when_obj);
    return PyFloat_FromDouble(h->when);
}

/* A cleared timer reads as asyncio's (zl_handle_cleared_attribute). */
static PyObject *get_when(zl_timer *h, void *c)
{
    if (zl_handle_is_cleared(&h->base))
        return zl_handle_cleared_attribute(&h->base, "_when");
    return timer_when_obj(h);
}
static PyObject *timer_when(zl_timer *h, PyObject *unused) { return get_when(h, NULL); }
static PyObject *get_scheduled(zl_timer *h, void *c)
{
    if (zl_handle_is_cleared(&h->base))
        return zl_handle_cleared_attribute(&h->base, "_scheduled");
    return PyBool_FromLong(h->scheduled);
}

int zl_timer_cancel(zl_timer *h)
{
    if (h->base.cancelled)
        return 0;
    Py_INCREF(h); /* cancelling may drop the last reference another owner held */
    /* asyncio's order: the loop forgets the timer, then Handle.cancel
     * (whose repr, in debug mode, may raise) */
    zl_timer_cancelled(h->base.loop, h);
    int r = zl_handle_cancel(&h->base);
    Py_DECREF(h);
    return r;
}

static PyObject *timer_cancel_method(zl_timer *h, PyObject *unused)
{
    if (zl_handle_is_cleared(&h->base))
        return zl_handle_cleared_attribute(&h->base, "_cancelled");
    if (zl_check_owner(h->base.loop) < 0) /* its slot is the loop thread's */
        return NULL;
    if (zl_timer_cancel(h) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static int timer_traverse(zl_timer *h, visitproc visit, void *arg)
{
    Py_VISIT(h->when_obj);
    return zl_handle_traverse(&h->base, visit, arg);
}

static int timer_clear(zl_timer *h)
{
    Py_CLEAR(h->when_obj);
    return zl_handle_clear(&h->base);
}

/* TimerHandle's own methods and attributes, then Handle's it does not
 * define, added by add_handles_own before the type is made (room for
 * them: handle.c's lists are shorter than ENTRIES_MAX). */
#define ENTRIES_MAX 16
static PyMethodDef timer_methods[ENTRIES_MAX] = {
    {"when", (PyCFunction)timer_when, METH_NOARGS, "The loop time the callback is due at."},
    {"cancel", (PyCFunction)timer_cancel_method, METH_NOARGS, "Cancel the callback."},
    {NULL}};

static PyGetSetDef timer_getset[ENTRIES_MAX] = {
    {"_when", (getter)get_when, NULL, NULL, NULL},
    {"_scheduled", (getter)get_scheduled, NULL, NULL, NULL},
    {NULL},
};

static int named_in_methods(const char *name)
{
    for (PyMethodDef *m = timer_methods; m->ml_name != NULL; m++)
        if (strcmp(m->ml_name, name) == 0)
            return 1;
    return 0;
}

static int add_handles_own(void)
{
    int n = 0;
    while (timer_methods[n].ml_name != NULL)
        n++;
    for (PyMethodDef *m = zl_handle_methods; m->ml_name != NULL; m++)
        if (!named_in_methods(m->ml_name)) {
            if (n + 1 >= ENTRIES_MAX)
                goto full;
            timer_methods[n++] = *m;
        }
    n = 0;
    while (timer_getset[n].name != NULL)
        n++;
    for (PyGetSetDef *g = zl_handle_getset; g->name != NULL; g++) {
        if (n + 1 >= ENTRIES_MAX)
            goto full;
        timer_getset[n++] = *g;
    }
    return 0;
full:
    PyErr_SetString(PyExc_SystemError, "timer_handle.c: ENTRIES_MAX is too small");
    return -1;
}

static PyType_Slot timer_slots[] = {
    {Py_tp_doc, "A callback scheduled with call_later() or call_at(), as asyncio.TimerHandle."},
    {Py_tp_dealloc, zl_handle_dealloc},
    {Py_tp_traverse, timer_traverse},
    {Py_tp_clear, timer_clear},
    {Py_tp_methods, timer_methods},
    {Py_tp_getset, timer_getset},
    {0, NULL}};

static PyType_Spec timer_spec = {
    .name = "zloopgo.TimerHandle",
    .basicsize = sizeof(zl_timer),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = timer_slots,
};

int zl_timer_handle_type_init(void)
{
    /* Handle's entries are added once: the slot after TimerHandle's own
     * two attributes is empty until they are */
    return timer_getset[2].name == NULL && add_handles_own() < 0 ? -1 : 0;
}

int zl_timer_handle_type_made(PyObject *module, zl_module_state *state)
{
    state->timer_handle_type =
        zl_handle_type_new(module, &timer_spec, "TimerHandle", offsetof(zl_handle, loop));
    return state->timer_handle_type == NULL ? -1 : 0;
}
