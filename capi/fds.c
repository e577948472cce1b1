/* The descriptor table: for each descriptor, the reader and writer
 * handles and the object it was first registered by, answering as
 * asyncio's selector does (add_reader and the rest, _zl_watch_state,
 * _zl_find_fileobj), and the queueing of a ready descriptor's handles.
 * The kernel is asked only when the watched mask changes: through the
 * engine (zlgo_watch), or, while a batch runs on an engine whose poller C
 * may use, by a change of its own (reactor_watch, zl_sys_poller_watch).
 *
 * It knows nothing of the reactor but the platform's poller calls
 * (capi/platform.h), of timers or of the order callbacks run in. */
#include "zl.h"
#include "_cgo_export.h"
#include <limits.h>

/* A descriptor argument as a C int: beyond int's range, the OverflowError
 * asyncio's selector gets from epoll. */
static int as_fd(PyObject *obj)
{
    int overflow;
    long v = PyLong_AsLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow != 0 || v < INT_MIN || v > INT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "Python int too large to convert to C int");
        return -1;
    }
    return (int)v;
}

static int check_fd(int fd)
{
    if (fd < 0) {
        PyErr_Format(PyExc_ValueError, "Invalid file descriptor: %d", fd);
        return -1;
    }
    return 0;
}

/* fd's entry, the table grown to hold it. Only called for a descriptor
 * the kernel accepted, so the table never grows beyond the process's
 * descriptor limit. */
static zl_fdwatch *fd_slot(zl_loop *L, int fd)
{
    if (fd >= L->fds.cap) {
        int64_t cap = L->fds.cap ? L->fds.cap : 64;
        while (cap <= fd)
            cap *= 2;
        zl_fdwatch *fds = PyMem_Realloc(L->fds.entries, cap * sizeof(zl_fdwatch));
        if (fds == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        memset(fds + L->fds.cap, 0, (cap - L->fds.cap) * sizeof(zl_fdwatch));
        L->fds.entries = fds;
        L->fds.cap = cap;
    }
    return &L->fds.entries[fd];
}

static uint32_t watch_mask(zl_fdwatch *w) { return (w->reader ? 1u : 0u) | (w->writer ? 2u : 0u); }

/* Forgets what fd is watched for, without cancelling its handles. The
 * entry is emptied before any reference is dropped: dropping one may run
 * Python code that watches descriptors and moves the table. */
static void fd_forget(zl_loop *L, zl_fdwatch *w)
{
    PyObject *reader = (PyObject *)w->reader, *writer = (PyObject *)w->writer,
             *fileobj = w->fileobj;
    if (writer != NULL)
        L->fds.writers--;
    w->reader = w->writer = NULL;
    w->fileobj = NULL;
    Py_XDECREF(reader);
    Py_XDECREF(writer);
    Py_XDECREF(fileobj);
}

/* The reactor's change of fd's interest from old to new (0: not watched),
 * 0 or an errno. While zl_dispatch runs a batch and the engine's poller is
 * one C may use (sh.poller_fd), it is made here, as the engine's backend
 * makes it (zl_sys_poller_watch), with the count kept in sh.watched and
 * its change reported to the engine when the dispatch returns
 * (core.Alone.Watched): sock_recv's add_reader and remove_reader then cost
 * no crossing into Go. Otherwise the engine makes it (zlgo_watch). */
static int reactor_watch(zl_loop *L, int fd, uint32_t old, uint32_t new)
{
    if (L->dispatching && L->sh.poller_fd >= 0 && old != new) {
        int err =
            zl_sys_poller_watch(L->sh.poller_fd, fd, old, new, &L->sh.watched, &L->sh.watch_delta);
        L->counters.watches_native++;
        return err;
    }
    return zlgo_watch(L->engine, fd, old, new);
}

/* Tells the reactor that fd's interest goes from its current mask to
 * `new`, as asyncio's selector does: no system call when the mask stays
 * the same; a descriptor the kernel refuses to change is forgotten
 * altogether (asyncio's selector unregisters it) and OSError is raised;
 * a removal never fails (asyncio ignores the kernel's refusal). */
static int change_watch(zl_loop *L, int fd, zl_fdwatch *w, uint32_t new)
{
    uint32_t old = watch_mask(w);
    if (old == new)
        return 0;
    if (new & ~old)
        L->fds.watch_changed = 1; /* a descriptor watched anew may be ready already */
    /* In a child forked after the engine started, a removal is only
     * forgotten here (asyncio's close() unwatches its self-pipe): the
     * reactor, shared with the parent, is not the child's to change. */
    if (zl_forked_child && new == 0)
        return 0;
    if (zl_check_not_forked() < 0)
        return -1;
    int err = reactor_watch(L, fd, old, new);
    if (err == 0 || new == 0)
        return 0;
    if (old != 0) {
        (void)reactor_watch(L, fd, old, 0);
        fd_forget(L, w);
    }
    zl_sys_raise(err);
    return -1;
}

/* _zl_add_reader(fd, fileobj, callback, *args) (which=0) and
 * _zl_add_writer (which=1): registers callback(*args) for fd becoming
 * readable or writable. fileobj is what the caller named the descriptor
 * by, kept (as asyncio's selector keeps it) from the first registration
 * until the last removal, so that a closed socket still finds its fd.
 * If the reactor refuses the descriptor, OSError is raised and nothing is
 * added. */
static PyObject *add_watch(zl_loop *L, PyObject *const *args, Py_ssize_t nargs, int which)
{
    if (zl_check_owner(L) < 0) /* the table is the loop thread's */
        return NULL;
    nargs = PyVectorcall_NARGS(nargs);
    if (nargs < 3) {
        PyErr_SetString(PyExc_TypeError, "expected a descriptor, its file object and a callback");
        return NULL;
    }
    int fd = as_fd(args[0]);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    if (zl_check_closed(L) < 0 || check_fd(fd) < 0)
        return NULL;
    zl_handle *h = zl_handle_new(L, L->state->handle_type, args[2], args + 3, nargs - 3, NULL, 0);
    if (h == NULL)
        return NULL;
    /* The kernel is asked first: a descriptor it refuses (any number
     * beyond the open ones) never grows the table. */
    zl_fdwatch unwatched = {0};
    zl_fdwatch *w = fd < L->fds.cap ? &L->fds.entries[fd] : &unwatched;
    uint32_t mask = watch_mask(w) | (1u << which);
    if (change_watch(L, fd, w, mask) < 0) {
        Py_DECREF(h);
        return NULL;
    }
    if (w == &unwatched && (w = fd_slot(L, fd)) == NULL) {
        (void)reactor_watch(L, fd, mask, 0);
        Py_DECREF(h);
        return NULL;
    }
    if (w->fileobj == NULL)
        w->fileobj = Py_NewRef(args[1]);
    zl_handle **place = which ? &w->writer : &w->reader;
    zl_handle *previous = *place;
    *place = (zl_handle *)Py_NewRef(h);
    if (which && previous == NULL)
        L->fds.writers++;
    if (previous != NULL) {
        /* asyncio's add_reader raises what the old handle's cancel raised,
         * the new one watching */
        int r = zl_handle_cancel(previous);
        Py_DECREF(previous);
        if (r < 0) {
            Py_DECREF(h);
            return NULL;
        }
    }
    return (PyObject *)h;
}

static PyObject *remove_watch(zl_loop *L, PyObject *arg, int which)
{
    if (zl_check_owner(L) < 0)
        return NULL;
    int overflow;
    long v = PyLong_AsLongAndOverflow(arg, &overflow);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    if (overflow > 0 || v > INT_MAX)
        Py_RETURN_FALSE; /* beyond any descriptor: never watched, as asyncio answers */
    int fd = as_fd(arg);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    if (L->closed)
        Py_RETURN_FALSE;
    if (check_fd(fd) < 0)
        return NULL;
    if (fd >= L->fds.cap)
        Py_RETURN_FALSE;
    zl_fdwatch *w = &L->fds.entries[fd];
    zl_handle **place = which ? &w->writer : &w->reader;
    if (*place == NULL)
        Py_RETURN_FALSE;
    if (change_watch(L, fd, w, watch_mask(w) & ~(1u << which)) < 0)
        return NULL;
    zl_handle *h = *place;
    *place = NULL;
    if (which)
        L->fds.writers--;
    if (w->reader == NULL && w->writer == NULL)
        Py_CLEAR(w->fileobj);
    int r = zl_handle_cancel(h);
    Py_DECREF(h);
    if (r < 0)
        return NULL;
    Py_RETURN_TRUE;
}

PyObject *zl_loop_add_reader(zl_loop *L, PyObject *const *a, Py_ssize_t n)
{
    return add_watch(L, a, n, 0);
}
PyObject *zl_loop_add_writer(zl_loop *L, PyObject *const *a, Py_ssize_t n)
{
    return add_watch(L, a, n, 1);
}
PyObject *zl_loop_remove_reader(zl_loop *L, PyObject *fd) { return remove_watch(L, fd, 0); }
PyObject *zl_loop_remove_writer(zl_loop *L, PyObject *fd) { return remove_watch(L, fd, 1); }

/* (fileobj, reader, writer) of fd, or None when it is not watched: what
 * zloopgo's selector facade reports to asyncio's transports. */
PyObject *zl_loop_watch_state(zl_loop *L, PyObject *arg)
{
    if (zl_check_owner(L) < 0)
        return NULL;
    int fd = as_fd(arg);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    if (fd < 0 || fd >= L->fds.cap ||
        (L->fds.entries[fd].reader == NULL && L->fds.entries[fd].writer == NULL))
        Py_RETURN_NONE;
    zl_fdwatch *w = &L->fds.entries[fd];
    return Py_BuildValue("(OOO)", w->fileobj ? w->fileobj : Py_None,
                         w->reader ? (PyObject *)w->reader : Py_None,
                         w->writer ? (PyObject *)w->writer : Py_None);
}

/* The descriptor a watched file object was registered with (found by
 * identity, as asyncio's selector searches for a closed file object), or
 * None. */
PyObject *zl_loop_find_fileobj(zl_loop *L, PyObject *fileobj)
{
    if (zl_check_owner(L) < 0)
        return NULL;
    for (int fd = 0; fd < L->fds.cap; fd++)
        if (L->fds.entries[fd].fileobj == fileobj)
            return PyLong_FromLong(fd);
    Py_RETURN_NONE;
}

void zl_fds_release_all(zl_loop *L)
{
    L->fds.self_pipe = -1;
    Py_CLEAR(L->fds.self_pipe_reader);
    Py_CLEAR(L->fds.signal_handlers);
    for (int fd = 0; fd < L->fds.cap; fd++)
        fd_forget(L, &L->fds.entries[fd]);
}

/* _zl_set_self_pipe(fd, signal_handlers): fd is the loop's self-pipe, which
 * asyncio watched for reading when the loop was made (_read_from_self,
 * the handle watching it now), and signal_handlers the dict its
 * add_signal_handler fills. */
PyObject *zl_loop_set_self_pipe(zl_loop *L, PyObject *const *args, Py_ssize_t nargs)
{
    int fd;
    if (nargs != 2 || (fd = as_fd(args[0])) < 0 || !PyDict_Check(args[1])) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "expected the self-pipe's descriptor and a dict");
        return NULL;
    }
    if (fd >= L->fds.cap || L->fds.entries[fd].reader == NULL) {
        PyErr_Format(PyExc_ValueError, "descriptor %d is not watched for reading", fd);
        return NULL;
    }
    L->fds.self_pipe = fd;
    Py_XSETREF(L->fds.self_pipe_reader, Py_NewRef((PyObject *)L->fds.entries[fd].reader));
    Py_XSETREF(L->fds.signal_handlers, Py_NewRef(args[1]));
    Py_RETURN_NONE;
}

/* Whether the one descriptor the kernel watches for the loop is its
 * self-pipe, still read by asyncio's own handle, while no signal handler
 * is set. Then that handle, if it ran, would read bytes nobody handles (a
 * wake-up's, or a signal's without a handler: asyncio does not even route
 * those to it) and do nothing a program can see: a wait that cannot block
 * has nothing to report (dispatch.c, run_batch). */
int zl_fds_only_self_pipe(zl_loop *L)
{
    int fd = L->fds.self_pipe;
    PyObject *handlers = L->fds.signal_handlers;
    return L->sh.watched == 1 && fd >= 0 && fd < L->fds.cap &&
           (PyObject *)L->fds.entries[fd].reader == L->fds.self_pipe_reader &&
           L->fds.entries[fd].writer == NULL && handlers != NULL && PyDict_CheckExact(handlers) &&
           PyDict_GET_SIZE(handlers) == 0;
}

/* A ready descriptor queues its handles, as asyncio's _process_events:
 * a handle cancelled by its owner is unregistered instead. */
void zl_fd_event(zl_loop *L, uint64_t fd, uint32_t mask)
{
    for (int which = 0; which < 2; which++) {
        /* looked up afresh: unregistering the reader may run Python code
         * (a finalizer, the unraisable hook) that moves the table */
        if (!(mask & (1u << which)) || fd >= (uint64_t)L->fds.cap)
            continue; /* not asked for, or removed since the wait began */
        zl_fdwatch *w = &L->fds.entries[fd];
        zl_handle *h = which ? w->writer : w->reader;
        if (h == NULL)
            continue;
        if (h->cancelled) {
            PyObject *fdobj = PyLong_FromUnsignedLongLong(fd);
            PyObject *r = fdobj ? remove_watch(L, fdobj, which) : NULL;
            Py_XDECREF(fdobj);
            Py_XDECREF(r);
            if (r == NULL)
                PyErr_WriteUnraisable((PyObject *)L);
        } else if (zl_ready_push(L, (zl_handle *)Py_NewRef(h)) < 0) {
            PyErr_WriteUnraisable((PyObject *)L);
        }
    }
}

int zl_fds_traverse(zl_loop *L, visitproc visit, void *arg)
{
    Py_VISIT(L->fds.self_pipe_reader);
    Py_VISIT(L->fds.signal_handlers);
    for (int fd = 0; fd < L->fds.cap; fd++) {
        Py_VISIT(L->fds.entries[fd].reader);
        Py_VISIT(L->fds.entries[fd].writer);
        Py_VISIT(L->fds.entries[fd].fileobj);
    }
    return 0;
}

void zl_fds_free(zl_loop *L) { PyMem_Free(L->fds.entries); }

int zl_fds_take_watch_changed(zl_loop *L)
{
    int changed = L->fds.watch_changed;
    L->fds.watch_changed = 0;
    return changed;
}
