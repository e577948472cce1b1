/* The loop's sock_recv, sock_recv_into and sock_sendall, for zloopgo.Loop
 * itself and a plain socket.socket outside debug mode: asyncio's steps
 * (selector_events.BaseSelectorEventLoop's methods of those names) made
 * without a Python frame, and the methods those steps hand to the loop
 * and the future (_sock_recv, _sock_recv_into, _sock_read_done,
 * _sock_sendall, _sock_write_done) as LoopCore's, for every caller.
 *
 * The same calls happen in the same order as in asyncio's code: the
 * receive or send at once, then, if the kernel cannot take it now, a
 * future from create_future, the descriptor checked against the loop's
 * transports, (sock_sendall) memoryview(data), a reader (writer) handle
 * whose callback is the loop's bound _sock_recv (_sock_sendall), and
 * functools.partial(_sock_read_done, fd, handle=handle) added to the
 * future, ahead of the task that awaits it.
 * A socket.socket subclass, a loop class derived from zloopgo.Loop (it may
 * override any of those methods) and debug mode take asyncio's Python
 * steps (zloopgo/_sockmethods.py), which reach the methods below too.
 *
 * A plain socket's receive lands in the loop's receive buffer and only
 * what came is copied out (asyncio's sock.recv(n) allocates n bytes
 * first: above glibc's mmap threshold that maps and unmaps memory per
 * call): up to ZL_SOCK_RX_LIMIT bytes from a non-blocking socket,
 * ZL_SOCK_RX_FROM to _LIMIT from one in another mode (recv_into).
 *
 * A plain socket in non-blocking mode (timeout 0.0, as asyncio asks) is
 * received from and sent to with the system calls themselves, as the
 * socket module's recv and send make them for such a socket: EINTR
 * retried after the signal handlers ran, on the descriptor the socket
 * holds then (a handler may have closed it: EBADF, as the module's retry
 * gets), the errno's OSError. A receive or send the kernel cannot take now
 * then costs no BlockingIOError. The descriptor and timeout are read from
 * the socket object at each try (sockets.c); where its layout is unknown,
 * the methods are called.
 *
 * It knows asyncio's method and attribute names, the loop's descriptor
 * table (fds.c), socket objects (sockets.c), futures (tasks.c) and the
 * receive buffer (transport.c); nothing of the engine. */
#include "zl.h"

/* L is zloopgo.Loop itself, whose solid base is LoopCore; a class derived
 * from it has Loop as its base and may override any method asyncio's
 * steps call. */
static int plain_loop(zl_loop *L)
{
    return Py_TYPE(L)->tp_base->tp_dealloc == (destructor)zl_loop_dealloc;
}

/* zloopgo.Loop itself outside debug mode, with a socket.socket: asyncio's
 * steps may be taken here; anything else takes them in Python. */
static int native_steps(zl_loop *L, PyObject *sock)
{
    return plain_loop(L) && !L->debug && Py_TYPE(sock) == L->state->socket_type;
}

/* The call raised what asyncio's steps take as "not now"
 * (BlockingIOError, InterruptedError): forgotten, 0; else -1, the
 * exception kept. */
static int not_now_or_error(void)
{
    if (!PyErr_ExceptionMatches(PyExc_BlockingIOError) &&
        !PyErr_ExceptionMatches(PyExc_InterruptedError))
        return -1;
    PyErr_Clear();
    return 0;
}

/* sock's descriptor if it is a plain socket.socket in non-blocking mode
 * whose layout is known and which is open, else -1. */
static inline int nonblocking_fd(const PyTypeObject *socket_type, PyObject *sock)
{
    int fd = zl_socket_nonblocking_fd(socket_type, sock);
    return fd >= 0 ? fd : -1;
}

/* recv(2) (sending 0) or send(2) (sending 1) of len bytes at buf on fd,
 * sock's descriptor in non-blocking mode, as the socket module's recv and
 * send make it: interrupted by a signal, the handlers run (an exception
 * of theirs ends it: -2) and the call is made again on the descriptor
 * sock holds then, which a handler may have closed (-1: EBADF) or put in
 * another mode (the call then waits as the module's would, without the
 * GIL). The count, or -1 with the error in zl_sys_error(). */
static inline Py_ssize_t sock_syscall(const PyTypeObject *socket_type, PyObject *sock, int fd,
                                      int sending, void *buf, size_t len)
{
    int waits = 0; /* a handler made the socket blocking */
    for (;;) {
        Py_ssize_t n;
        if (waits) {
            Py_BEGIN_ALLOW_THREADS;
            n = sending ? zl_sys_send(fd, buf, len) : zl_sys_recv(fd, buf, len);
            Py_END_ALLOW_THREADS;
        } else {
            n = sending ? zl_sys_send(fd, buf, len) : zl_sys_recv(fd, buf, len);
        }
        if (n >= 0 || !zl_sys_interrupted(zl_sys_error()))
            return n;
        if (PyErr_CheckSignals() < 0)
            return -2;
        fd = zl_socket_fd(socket_type, sock);
        waits = zl_socket_nonblocking_fd(socket_type, sock) == ZL_NOT_A_SOCKET;
    }
}

/* The call failed (zl_sys_error()): the socket module's exception for it,
 * or, when it would have waited (EAGAIN), nothing (0). EINTR never gets
 * here. */
static int error_outcome(void)
{
    int err = zl_sys_error();
    if (zl_sys_would_block(err))
        return 0;
    zl_sys_raise(err);
    return -1;
}

/* sock.recv(n): 1 with what came in *data, 0 when the kernel has nothing
 * now (BlockingIOError or InterruptedError), -1 with the exception set. A
 * plain socket's receive of at most ZL_SOCK_RX_LIMIT bytes lands in
 * the loop's receive buffer (recv(2) itself when non-blocking, else
 * recv_into), and what came is copied out. */
static int recv_now(zl_loop *L, PyObject *sock, PyObject *n, PyObject **data)
{
    *data = NULL;
    long size = PyLong_CheckExact(n) ? PyLong_AsLong(n) : -1;
    if (size == -1 && PyErr_Occurred())
        PyErr_Clear(); /* beyond a long: sock.recv words the error */
    int fd = nonblocking_fd(L->state->socket_type, sock);
    int into_rx = fd >= 0 ? size > 0 && size <= ZL_SOCK_RX_LIMIT
                          : Py_TYPE(sock) == L->state->socket_type && size >= ZL_SOCK_RX_FROM &&
                                size <= ZL_SOCK_RX_LIMIT;
    if (!into_rx) {
        PyObject *args[3] = {sock, n, NULL};
        *data = PyObject_VectorcallMethod(L->state->names.recv, args,
                                          2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        return *data != NULL ? 1 : not_now_or_error();
    }
    char *own, *buf = zl_rx_take(L, (size_t)size, &own);
    if (buf == NULL)
        return -1;
    Py_ssize_t got = -1;
    int r = -1;
    if (fd >= 0) {
        got = sock_syscall(L->state->socket_type, sock, fd, 0, buf, (size_t)size);
        if (got == -1)
            r = error_outcome(); /* -2: a signal handler's exception stands */
    } else {
        PyObject *view = PyMemoryView_FromMemory(buf, size, PyBUF_WRITE);
        if (view != NULL) {
            PyObject *call[3] = {sock, view, n};
            PyObject *count = PyObject_VectorcallMethod(L->state->names.recv_into, call,
                                                        3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
            Py_DECREF(view); /* socket.recv_into keeps no reference to it */
            if (count != NULL) {
                got = PyLong_AsSsize_t(count);
                Py_DECREF(count);
            } else {
                r = not_now_or_error();
            }
        }
    }
    if (got >= 0) {
        *data = PyBytes_FromStringAndSize(buf, got);
        r = *data != NULL ? 1 : -1;
    }
    zl_rx_give_back(L, own);
    return r;
}

/* sock.send(data): the bytes sent (0 when the kernel takes none now), or
 * -1 with the exception set; a bytes to a plain non-blocking socket with
 * send(2) itself. */
static Py_ssize_t send_now(const zl_module_state *state, PyObject *sock, PyObject *data)
{
    const PyTypeObject *socket_type = state->socket_type;
    int fd = nonblocking_fd(socket_type, sock);
    if (fd < 0 || !PyBytes_CheckExact(data)) {
        PyObject *args[3] = {sock, data, NULL};
        PyObject *n = PyObject_VectorcallMethod(state->names.send, args,
                                                2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        if (n == NULL)
            return not_now_or_error();
        Py_ssize_t sent = PyLong_AsSsize_t(n);
        Py_DECREF(n);
        return sent;
    }
    Py_ssize_t sent = sock_syscall(socket_type, sock, fd, 1, PyBytes_AS_STRING(data),
                                   (size_t)PyBytes_GET_SIZE(data));
    return sent >= 0 ? sent : sent == -1 ? error_outcome() : -1;
}

/* recv(2) on sock's fd into view (released): recv_into_now's outcome. */
static int recv_into_view(const PyTypeObject *socket_type, PyObject *sock, int fd, Py_buffer *view,
                          PyObject **count)
{
    Py_ssize_t got = sock_syscall(socket_type, sock, fd, 0, view->buf, (size_t)view->len);
    int r = got >= 0 ? 1 : got == -1 ? error_outcome() : -1;
    PyBuffer_Release(view);
    if (r == 1 && (*count = PyLong_FromSsize_t(got)) == NULL)
        r = -1;
    return r;
}

/* sock.recv_into(buf): 1 with the byte count in *count, 0 when the kernel
 * has nothing now, -1 with the exception set; recv(2) itself for a plain
 * non-blocking socket and a non-empty buffer that takes writes in place
 * (what the socket's recv_into asks of it), else the socket's method,
 * which also words why a buffer will not do (and returns 0 for an empty
 * one, where recv(2) would wait for data). */
static int recv_into_now(const zl_module_state *state, PyObject *sock, PyObject *buf,
                         PyObject **count)
{
    const PyTypeObject *socket_type = state->socket_type;
    *count = NULL;
    Py_buffer view;
    int fd = nonblocking_fd(socket_type, sock);
    if (fd >= 0 && PyObject_GetBuffer(buf, &view, PyBUF_WRITABLE) == 0) {
        if (view.len > 0)
            return recv_into_view(socket_type, sock, fd, &view, count);
        PyBuffer_Release(&view);
    }
    PyErr_Clear();
    PyObject *args[3] = {sock, buf, NULL};
    *count = PyObject_VectorcallMethod(state->names.recv_into, args,
                                       2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    return *count != NULL ? 1 : not_now_or_error();
}

/* fut.done(): 1, 0 or -1 with an exception set. */
static int future_done(const zl_names *names, PyObject *fut)
{
    PyObject *r =
        PyObject_VectorcallMethod(names->done, &fut, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (r == NULL)
        return -1;
    int done = PyObject_IsTrue(r);
    Py_DECREF(r);
    return done;
}

/* fut.set_result(value): 0, or -1 with an exception set. */
static int future_set_result(const zl_names *names, PyObject *fut, PyObject *value)
{
    PyObject *args[2] = {fut, value};
    PyObject *r = PyObject_VectorcallMethod(names->set_result, args,
                                            2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* The pending exception, neither "not now" nor SystemExit or
 * KeyboardInterrupt, goes to fut.set_exception as asyncio's `except
 * BaseException as exc:` hands it: 0, or -1 with an exception set. */
static int future_fail(const zl_names *names, PyObject *fut)
{
    PyObject *exc = zl_fetch_exception();
    PyObject *r = zl_call_handling(fut, names->set_exception, exc, NULL);
    Py_DECREF(exc);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* asyncio's _ensure_fd_no_transport(fd) for an int fd: a descriptor no
 * entry of the loop's _transports names passes at once; any other asks
 * asyncio's method, which raises RuntimeError for a transport not closing.
 * 0, or -1 with an exception set. */
static int ensure_no_transport(zl_loop *L, PyObject *fd)
{
    PyObject *transports = PyObject_GetAttr((PyObject *)L, L->state->names._transports);
    if (transports == NULL)
        return -1;
    int ask = 1;
    if (Py_TYPE(transports) == L->state->weak_value_dict) {
        PyObject *data = PyObject_GetAttr(transports, L->state->names.data);
        if (data != NULL && PyDict_CheckExact(data))
            ask = PyDict_GetItemWithError(data, fd) != NULL || PyErr_Occurred();
        Py_XDECREF(data);
        PyErr_Clear(); /* a failed lookup: asyncio's method meets it again */
    }
    Py_DECREF(transports);
    if (!ask)
        return 0;
    PyObject *r =
        PyObject_CallMethodOneArg((PyObject *)L, L->state->names._ensure_fd_no_transport, fd);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* The rest of asyncio's sock_recv or sock_recv_into (which=0, reading)
 * or sock_sendall (which=1, writing) once the kernel could not take it at
 * once: the future, the reader handle calling the loop's method
 * `callback`(fut, sock, arg) or the writer handle calling
 * `callback`(fut, sock, memoryview(arg), [sent]), and the done callback
 * that unwatches the descriptor. The memoryview is made after the
 * descriptor passed the transport check, where asyncio's argument list to
 * _add_writer makes it: arg's __buffer__ may run Python code, which must
 * not run when the check raises. The future, or NULL. */
static PyObject *wait_on(zl_loop *L, PyObject *sock, int which, PyObject *callback_name,
                         PyObject *arg, Py_ssize_t sent)
{
    PyObject *fut = zl_loop_create_future(L, NULL);
    if (fut == NULL)
        return NULL;
    int known = zl_socket_fd(L->state->socket_type, sock);
    PyObject *fd = known != ZL_NOT_A_SOCKET
                       ? PyLong_FromLong(known)
                       : PyObject_VectorcallMethod(L->state->names.fileno, &sock,
                                                   1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    PyObject *callback = NULL, *view = NULL, *pos = NULL;
    PyObject *handle = NULL, *done = NULL, *partial = NULL, *added = NULL;
    if (fd == NULL || ensure_no_transport(L, fd) < 0)
        goto out;
    callback = PyObject_GetAttr((PyObject *)L, callback_name);
    if (callback == NULL)
        goto out;
    if (which && ((view = PyMemoryView_FromObject(arg)) == NULL ||
                  (pos = Py_BuildValue("[n]", sent)) == NULL))
        goto out;
    PyObject *watch[7] = {fd, fd, callback, fut, sock, which ? view : arg, pos};
    handle = which ? zl_loop_add_writer(L, watch, 7) : zl_loop_add_reader(L, watch, 6);
    if (handle == NULL)
        goto out;
    done = PyObject_GetAttr((PyObject *)L, which ? L->state->names._sock_write_done
                                                 : L->state->names._sock_read_done);
    if (done == NULL)
        goto out;
    PyObject *bind[3] = {done, fd, handle};
    partial = PyObject_Vectorcall(L->state->partial_type, bind, 2, L->state->task_kwnames.handle);
    if (partial == NULL)
        goto out;
    PyObject *add[2] = {fut, partial};
    added = PyObject_VectorcallMethod(L->state->names.add_done_callback, add,
                                      2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
out:
    Py_XDECREF(fd);
    Py_XDECREF(callback);
    Py_XDECREF(view);
    Py_XDECREF(pos);
    Py_XDECREF(handle);
    Py_XDECREF(done);
    Py_XDECREF(partial);
    if (added == NULL) {
        Py_DECREF(fut);
        return NULL;
    }
    Py_DECREF(added);
    return fut;
}

/* The start the three entries below share: 1 to take asyncio's steps
 * here, 0 when they must be taken in Python (native_steps), -1 with
 * TypeError unless the entry was given two arguments. */
static int entry(zl_loop *L, PyObject *const *args, Py_ssize_t nargs, const char *signature)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "expects %s", signature);
        return -1;
    }
    return native_steps(L, args[0]);
}

/* _zl_sock_recv(sock, n): asyncio's sock_recv up to its await: what came,
 * or the future of what will come; NotImplemented where asyncio's Python
 * steps must be taken (native_steps). */
PyObject *zl_loop_sock_recv_now(zl_loop *L, PyObject *const *args, Py_ssize_t nargs)
{
    int go = entry(L, args, nargs, "_zl_sock_recv(sock, n)");
    if (go <= 0)
        return go < 0 ? NULL : Py_NewRef(Py_NotImplemented);
    PyObject *data;
    int r = recv_now(L, args[0], args[1], &data);
    if (r != 0)
        return data;
    return wait_on(L, args[0], 0, L->state->names._sock_recv, args[1], 0);
}

/* _zl_sock_recv_into(sock, buf): asyncio's sock_recv_into up to its
 * await: the bytes received into buf, or the future of that count;
 * NotImplemented where asyncio's Python steps must be taken. */
PyObject *zl_loop_sock_recv_into_now(zl_loop *L, PyObject *const *args, Py_ssize_t nargs)
{
    int go = entry(L, args, nargs, "_zl_sock_recv_into(sock, buf)");
    if (go <= 0)
        return go < 0 ? NULL : Py_NewRef(Py_NotImplemented);
    PyObject *count;
    int r = recv_into_now(L->state, args[0], args[1], &count);
    if (r != 0)
        return count;
    return wait_on(L, args[0], 0, L->state->names._sock_recv_into, args[1], 0);
}

/* _zl_sock_sendall(sock, data): asyncio's sock_sendall up to its await:
 * None when the kernel took every byte at once, else the future of the
 * rest; NotImplemented where asyncio's Python steps must be taken. */
PyObject *zl_loop_sock_sendall_now(zl_loop *L, PyObject *const *args, Py_ssize_t nargs)
{
    int go = entry(L, args, nargs, "_zl_sock_sendall(sock, data)");
    if (go <= 0)
        return go < 0 ? NULL : Py_NewRef(Py_NotImplemented);
    PyObject *sock = args[0], *data = args[1];
    Py_ssize_t sent = send_now(L->state, sock, data);
    if (sent < 0)
        return NULL;
    /* asyncio's `n == len(data)` */
    Py_ssize_t len = PyObject_Length(data);
    if (len < 0)
        return NULL;
    if (sent == len)
        Py_RETURN_NONE;
    return wait_on(L, sock, 1, L->state->names._sock_sendall, data, sent);
}

/* What asyncio's reader and writer callbacks do with an attempt's outcome
 * r (1 done, 0 "not now", -1 an exception pending) while fut waits:
 * nothing for "not now" (try again next time), SystemExit and
 * KeyboardInterrupt raised, any other exception to fut.set_exception,
 * else fut.set_result(value) (stolen). */
static PyObject *settle(const zl_names *names, PyObject *fut, int r, PyObject *value)
{
    if (r == 0)
        Py_RETURN_NONE;
    if (r < 0) {
        if (PyErr_ExceptionMatches(PyExc_SystemExit) ||
            PyErr_ExceptionMatches(PyExc_KeyboardInterrupt))
            return NULL;
        return future_fail(names, fut) < 0 ? NULL : Py_NewRef(Py_None);
    }
    r = future_set_result(names, fut, value);
    Py_DECREF(value);
    return r < 0 ? NULL : Py_NewRef(Py_None);
}

/* _sock_recv(fut, sock, n): asyncio's reader callback of sock_recv. */
PyObject *zl_loop_sock_recv_step(zl_loop *L, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "_sock_recv() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *data;
    int done = future_done(&L->state->names, args[0]);
    if (done != 0)
        return done < 0 ? NULL : Py_NewRef(Py_None);
    int r = recv_now(L, args[1], args[2], &data);
    return settle(&L->state->names, args[0], r, data);
}

/* _sock_recv_into(fut, sock, buf): asyncio's reader callback of
 * sock_recv_into. */
PyObject *zl_loop_sock_recv_into_step(zl_loop *L, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "_sock_recv_into() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *count;
    int done = future_done(&L->state->names, args[0]);
    if (done != 0)
        return done < 0 ? NULL : Py_NewRef(Py_None);
    int r = recv_into_now(L->state, args[1], args[2], &count);
    return settle(&L->state->names, args[0], r, count);
}

/* _sock_sendall(fut, sock, view, pos): asyncio's writer callback of
 * sock_sendall, pos[0] the bytes of view sent so far. */
PyObject *zl_loop_sock_sendall_step(zl_loop *L, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "_sock_sendall() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *fut = args[0], *sock = args[1], *view = args[2], *pos = args[3];
    int done = future_done(&L->state->names, fut);
    if (done != 0) /* cancellation can be scheduled on the previous iteration */
        return done < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *zero = PyLong_FromLong(0);
    PyObject *start = zero != NULL ? PyObject_GetItem(pos, zero) : NULL;
    Py_XDECREF(zero);
    if (start == NULL)
        return NULL;
    /* sock.send(view[start:]) and the except clauses around it */
    PyObject *slice = PySlice_New(start, NULL, NULL);
    PyObject *rest = slice != NULL ? PyObject_GetItem(view, slice) : NULL;
    Py_XDECREF(slice);
    PyObject *n = NULL;
    if (rest != NULL) {
        PyObject *call[3] = {sock, rest, NULL};
        n = PyObject_VectorcallMethod(L->state->names.send, call,
                                      2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_DECREF(rest);
    }
    if (n == NULL) {
        Py_DECREF(start);
        return settle(&L->state->names, fut, not_now_or_error(), NULL);
    }
    /* start += n; all sent: set_result(None), else pos[0] = start */
    PyObject *sent = PyNumber_InPlaceAdd(start, n);
    Py_DECREF(start);
    Py_DECREF(n);
    if (sent == NULL)
        return NULL;
    Py_ssize_t len = PyObject_Length(view);
    PyObject *length = len < 0 ? NULL : PyLong_FromSsize_t(len);
    int all = length == NULL ? -1 : PyObject_RichCompareBool(sent, length, Py_EQ);
    Py_XDECREF(length);
    int r = -1;
    if (all > 0) {
        r = future_set_result(&L->state->names, fut, Py_None);
    } else if (all == 0) {
        zero = PyLong_FromLong(0);
        r = zero != NULL ? PyObject_SetItem(pos, zero, sent) : -1;
        Py_XDECREF(zero);
    }
    Py_DECREF(sent);
    return r < 0 ? NULL : Py_NewRef(Py_None);
}

/* asyncio's _sock_read_done / _sock_write_done(fd, fut, handle=None):
 * unless the handle was cancelled (another reader took its place), the
 * loop's remove_reader (remove_writer) for fd. zloopgo.Loop's own is
 * asyncio's _ensure_fd_no_transport and the descriptor table's removal. */
static PyObject *unwatch_when_done(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames, int which)
{
    Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *handle = nargs == 3 ? args[2] : Py_None;
    if (nargs + nkw > 3 || nargs < 2 ||
        (nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "handle"))) {
        PyErr_Format(PyExc_TypeError, "%s() takes (fd, fut, handle=None)",
                     which ? "_sock_write_done" : "_sock_read_done");
        return NULL;
    }
    if (nkw == 1)
        handle = args[nargs];
    PyObject *fd = args[0];
    if (handle != Py_None) {
        int cancelled;
        if (Py_TYPE(handle) == L->state->handle_type) {
            cancelled = ((zl_handle *)handle)->cancelled;
        } else {
            PyObject *r = PyObject_VectorcallMethod(L->state->names.cancelled, &handle,
                                                    1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
            cancelled = r == NULL ? -1 : PyObject_IsTrue(r);
            Py_XDECREF(r);
        }
        if (cancelled != 0)
            return cancelled < 0 ? NULL : Py_NewRef(Py_None);
    }
    PyObject *r;
    if (plain_loop(L)) {
        r = ensure_no_transport(L, fd) < 0 ? NULL
            : which                        ? zl_loop_remove_writer(L, fd)
                                           : zl_loop_remove_reader(L, fd);
    } else {
        r = PyObject_CallMethodOneArg(
            (PyObject *)L, which ? L->state->names.remove_writer : L->state->names.remove_reader,
            fd);
    }
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

PyObject *zl_loop_sock_read_done(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    return unwatch_when_done(L, args, PyVectorcall_NARGS(nargs), kwnames, 0);
}

PyObject *zl_loop_sock_write_done(zl_loop *L, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames)
{
    return unwatch_when_done(L, args, PyVectorcall_NARGS(nargs), kwnames, 1);
}

static PyObject *import_attr(const char *module, const char *name)
{
    PyObject *m = PyImport_ImportModule(module);
    if (m == NULL)
        return NULL;
    PyObject *v = PyObject_GetAttrString(m, name);
    Py_DECREF(m);
    return v;
}

int zl_sockops_state_new(zl_module_state *state)
{
    state->partial_type = import_attr("functools", "partial");
    PyObject *wvd = import_attr("weakref", "WeakValueDictionary");
    if (state->partial_type == NULL || wvd == NULL) {
        Py_XDECREF(wvd);
        return -1;
    }
    if (!PyType_Check(wvd)) {
        Py_DECREF(wvd);
        PyErr_SetString(PyExc_TypeError, "weakref.WeakValueDictionary must be a class");
        return -1;
    }
    state->weak_value_dict = (PyTypeObject *)wvd;
    return 0;
}
