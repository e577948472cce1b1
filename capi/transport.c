/* StreamFastPaths: native versions of the methods of asyncio's socket
 * transport that run for every packet and every write — _read_ready,
 * _read_ready__data_received, _read_ready__get_buffer, write, and the
 * is_closing that StreamWriter.drain() asks on every write. zloopgo's transport
 * class puts this type first in its bases; everything else (buffering
 * after a partial send, flow control, closing, errors) stays asyncio's own
 * Python code, reached through the same attributes and methods asyncio
 * uses, so behaviour and messages are asyncio's.
 *
 * It knows asyncio's transport attributes by name; of the loop it knows
 * only whether a callback is running (in_callback) and the flush list it
 * hands a holding transport to (flush.c); it knows nothing of the engine. */
#include "zl.h"
#include <errno.h>
#include <structmember.h>
#include <sys/socket.h>

static PyObject *s_conn_lost, *s_sock_fd, *s_max_size, *s_protocol, *s_data_received,
    *s_fatal_error, *s_on_eof, *s_read_ready_cb, *s_eof, *s_empty_waiter, *s_buffer,
    *s_write_python, *msg_read_error, *msg_data_received, *msg_write_error, *s_get_buffer,
    *s_buffer_updated, *msg_get_buffer, *msg_buffer_updated, *minus_one, *s_loop, *s_pending,
    *s_buffer_rest, *s_closing, *s_large_reads, *s_high_water;

/* One receive buffer for the process: the GIL serializes its users, and
 * every read is copied out into an exactly sized bytes before any Python
 * code runs. */
static char *scratch;
static size_t scratch_size;

/* A transport whose last read was at least LARGE_READ bytes receives the
 * next one straight into a bytes of max_size, shrunk to what came: a bulk
 * stream then skips copying each read out of the scratch buffer. Small
 * reads stay in the scratch buffer: an exactly sized copy is cheaper than
 * allocating max_size for a few bytes. */
#define LARGE_READ (64 * 1024)

/* zloopgo's transport class keeps the attributes read here in __slots__;
 * set_transport_layout() records their offsets so that reading one is a
 * load instead of an attribute lookup. Instances of other classes (or a
 * slot not yet set) take the ordinary lookup. */
static PyTypeObject *layout_type;
enum {
    F_CONN_LOST,
    F_SOCK_FD,
    F_PROTOCOL,
    F_EOF,
    F_EMPTY_WAITER,
    F_BUFFER,
    F_READ_READY_CB,
    F_LOOP,
    F_PENDING,
    F_CLOSING,
    F_LARGE_READS,
    F_HIGH_WATER,
    F_COUNT
};
static PyObject **field_names[F_COUNT] = {
    &s_conn_lost,     &s_sock_fd, &s_protocol, &s_eof,     &s_empty_waiter, &s_buffer,
    &s_read_ready_cb, &s_loop,    &s_pending,  &s_closing, &s_large_reads,  &s_high_water};
static Py_ssize_t field_offset[F_COUNT];

/* The slot's value, borrowed, or NULL (no error set) when self is not of
 * the recorded class or the slot is unset: then the caller looks the
 * attribute up. */
static inline PyObject *slot_value(PyObject *self, int f)
{
    if (layout_type == NULL || !PyObject_TypeCheck(self, layout_type))
        return NULL;
    return *(PyObject **)((char *)self + field_offset[f]);
}

static PyObject *get_field(PyObject *self, int f) /* new reference */
{
    PyObject *v = slot_value(self, f);
    return v != NULL ? Py_NewRef(v) : PyObject_GetAttr(self, *field_names[f]);
}

PyObject *zl_set_transport_layout(PyObject *mod, PyObject *cls)
{
    if (!PyType_Check(cls))
        return PyErr_Format(PyExc_TypeError, "expected a class, got %R", cls);
    for (int f = 0; f < F_COUNT; f++) {
        PyObject *d = _PyType_Lookup((PyTypeObject *)cls, *field_names[f]); /* borrowed */
        if (d == NULL || Py_TYPE(d) != &PyMemberDescr_Type) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "%R must declare %R in __slots__", cls,
                             *field_names[f]);
            return NULL;
        }
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type != T_OBJECT_EX)
            return PyErr_Format(PyExc_TypeError, "%R is not an object slot", *field_names[f]);
        field_offset[f] = m->offset;
    }
    Py_XSETREF(layout_type, (PyTypeObject *)Py_NewRef(cls));
    Py_RETURN_NONE;
}

static int set_field(PyObject *self, int f, PyObject *v);

static int field_true(PyObject *self, int f)
{
    PyObject *v = slot_value(self, f);
    if (v == Py_False || v == Py_None)
        return 0;
    if (v == Py_True)
        return 1;
    if (v != NULL)
        return PyObject_IsTrue(v);
    if ((v = PyObject_GetAttr(self, *field_names[f])) == NULL)
        return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

static int field_int(PyObject *self, int f, long *out)
{
    PyObject *v = slot_value(self, f);
    if (v != NULL) {
        *out = PyLong_AsLong(v);
    } else {
        if ((v = PyObject_GetAttr(self, *field_names[f])) == NULL)
            return -1;
        *out = PyLong_AsLong(v);
        Py_DECREF(v);
    }
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int attr_int(PyObject *self, PyObject *name, long *out)
{
    PyObject *v = PyObject_GetAttr(self, name);
    if (v == NULL)
        return -1;
    *out = PyLong_AsLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* self._fatal_error(exc, message) with the pending exception as exc, as the
 * transport's `except BaseException` clauses do; SystemExit and
 * KeyboardInterrupt propagate. */
static PyObject *report_fatal(PyObject *self, PyObject *message)
{
    if (PyErr_ExceptionMatches(PyExc_SystemExit) || PyErr_ExceptionMatches(PyExc_KeyboardInterrupt))
        return NULL;
    PyObject *value = zl_fetch_exception();
    if (value == NULL)
        Py_RETURN_NONE;
    PyObject *r = PyObject_CallMethodObjArgs(self, s_fatal_error, value, message, NULL);
    Py_DECREF(value);
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

static PyObject *read_ready(PyObject *self, PyObject *unused)
{
    PyObject *cb = get_field(self, F_READ_READY_CB);
    if (cb == NULL)
        return NULL;
    PyObject *r = PyObject_CallNoArgs(cb);
    Py_DECREF(cb);
    return r;
}

int zl_quiet_read;

static PyObject *read_ready_data_received(PyObject *self, PyObject *unused)
{
    int lost = field_true(self, F_CONN_LOST);
    if (lost != 0)
        return lost < 0 ? NULL : Py_NewRef(Py_None);
    long fd, max_size;
    if (field_int(self, F_SOCK_FD, &fd) < 0 || attr_int(self, s_max_size, &max_size) < 0)
        return NULL;
    if (max_size <= 0) {
        PyErr_SetString(PyExc_ValueError, "negative buffersize in recv");
        return report_fatal(self, msg_read_error);
    }
    if ((size_t)max_size > scratch_size) {
        char *b = PyMem_RawRealloc(scratch, max_size);
        if (b == NULL)
            return PyErr_NoMemory();
        scratch = b;
        scratch_size = max_size;
    }
    PyObject *data = NULL; /* the final object, when the read goes straight into it */
    int large = field_true(self, F_LARGE_READS);
    if (large < 0)
        return NULL;
    if (large && max_size > LARGE_READ) {
        data = PyBytes_FromStringAndSize(NULL, max_size);
        if (data == NULL)
            return NULL;
    }
    char *into = data ? PyBytes_AS_STRING(data) : scratch;
    ssize_t n;
    do {
        n = recv((int)fd, into, max_size, 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
        int err = errno;
        Py_XDECREF(data);
        if (n == 0)
            return PyObject_CallMethodNoArgs(self, s_on_eof);
        if (err == EAGAIN || err == EWOULDBLOCK)
            Py_RETURN_NONE;
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        return report_fatal(self, msg_read_error);
    }
    if (large != (n >= LARGE_READ) &&
        set_field(self, F_LARGE_READS, Py_NewRef(n >= LARGE_READ ? Py_True : Py_False)) < 0) {
        Py_XDECREF(data);
        return NULL;
    }
    PyObject *protocol = get_field(self, F_PROTOCOL);
    if (protocol == NULL) {
        Py_XDECREF(data);
        return NULL;
    }
    /* An asyncio stream: the bytes go straight into its StreamReader. */
    int fed = zl_stream_feed(protocol, data ? PyBytes_AS_STRING(data) : scratch, n);
    /* Fed natively and the socket drained (a stream socket returns less
     * than asked only when nothing more is there): no Python code of the
     * program ran, and this descriptor is not ready any more. */
    zl_quiet_read = fed == 1 && n < max_size;
    if (fed != 0) {
        Py_DECREF(protocol);
        Py_XDECREF(data);
        return fed < 0 ? report_fatal(self, msg_data_received) : Py_NewRef(Py_None);
    }
    if (data == NULL) {
        data = PyBytes_FromStringAndSize(scratch, n);
    } else if (n < max_size / 2) {
        /* Mostly empty: copy out and free the big object whole. Shrinking
         * it instead would, with glibc, mremap a fresh mmap on every read
         * (256 KiB is above the initial mmap threshold, and only freeing
         * such a block whole raises the threshold so that later ones come
         * from the heap): page faults and TLB shootdowns on each read. */
        PyObject *exact = PyBytes_FromStringAndSize(PyBytes_AS_STRING(data), n);
        Py_SETREF(data, exact);
    } else if (n < max_size && _PyBytes_Resize(&data, n) < 0) {
        Py_DECREF(protocol);
        return NULL;
    }
    if (data == NULL) {
        Py_DECREF(protocol);
        return NULL;
    }
    PyObject *r = PyObject_CallMethodOneArg(protocol, s_data_received, data);
    Py_DECREF(protocol);
    Py_DECREF(data);
    if (r == NULL)
        return report_fatal(self, msg_data_received);
    Py_DECREF(r);
    Py_RETURN_NONE;
}

/* The BufferedProtocol read: get_buffer(-1), recv(2) straight into it,
 * buffer_updated(n) — asyncio's _read_ready__get_buffer. */
static PyObject *read_ready_get_buffer(PyObject *self, PyObject *unused)
{
    int lost = field_true(self, F_CONN_LOST);
    if (lost != 0)
        return lost < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *protocol = get_field(self, F_PROTOCOL);
    if (protocol == NULL)
        return NULL;
    PyObject *buf = PyObject_CallMethodOneArg(protocol, s_get_buffer, minus_one);
    Py_buffer view = {0};
    if (buf != NULL && PyObject_GetBuffer(buf, &view, PyBUF_WRITABLE) == 0 && view.len == 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_RuntimeError, "get_buffer() returned an empty buffer");
    }
    if (PyErr_Occurred()) {
        Py_XDECREF(buf);
        Py_DECREF(protocol);
        return report_fatal(self, msg_get_buffer);
    }
    long fd;
    if (field_int(self, F_SOCK_FD, &fd) < 0) {
        PyBuffer_Release(&view);
        Py_DECREF(buf);
        Py_DECREF(protocol);
        return NULL;
    }
    ssize_t n;
    do {
        n = recv((int)fd, view.buf, view.len, 0);
    } while (n < 0 && errno == EINTR);
    int err = errno;
    PyBuffer_Release(&view);
    Py_DECREF(buf);
    if (n < 0) {
        Py_DECREF(protocol);
        if (err == EAGAIN || err == EWOULDBLOCK)
            Py_RETURN_NONE;
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        return report_fatal(self, msg_read_error);
    }
    if (n == 0) {
        Py_DECREF(protocol);
        return PyObject_CallMethodNoArgs(self, s_on_eof);
    }
    PyObject *nbytes = PyLong_FromSsize_t(n);
    PyObject *r = nbytes ? PyObject_CallMethodOneArg(protocol, s_buffer_updated, nbytes) : NULL;
    Py_XDECREF(nbytes);
    Py_DECREF(protocol);
    if (r == NULL)
        return report_fatal(self, msg_buffer_updated);
    Py_DECREF(r);
    Py_RETURN_NONE;
}

/* ---- writes held within one callback ----
 *
 * While the loop runs a callback, a write to a transport whose buffer is
 * empty is not sent at once: it waits in the transport's _zl_pending list,
 * and when the callback returns, everything it wrote to that transport
 * leaves in one vectored send (an HTTP response written as header + body
 * becomes one packet). What the kernel does not take then goes to
 * asyncio's buffer, as a partial send would.
 *
 * What is held never changes what a program can see:
 * - order: a write that cannot be held leaves at once *together with*
 *   what is held, in one sendmsg, so it never overtakes earlier bytes;
 * - timing: bytes reach the kernel before the callback that wrote them
 *   returns (zl_handle_run flushes before its exception, if any, goes
 *   anywhere), and before os.fork();
 * - flow control: at most the transport's high-water mark is held (and
 *   at most COALESCE_MAX bytes, COALESCE_IOV chunks), so whatever a send
 *   leaves is never more than asyncio's write would have left, and
 *   pause_writing() comes from the same write() as on asyncio;
 * - buffer size: get_write_buffer_size() and every method that must see
 *   the data sent first (write_eof, writelines, close, abort, sendfile's
 *   waiter) send what is held before they answer
 *   (zloopgo/_transports.py).
 * Writes outside a callback are sent at once, as asyncio does. */

#define COALESCE_MAX (64 * 1024) /* bytes held per transport */
#define COALESCE_IOV 64          /* chunks held per transport */

static int set_field(PyObject *self, int f, PyObject *v) /* steals v */
{
    if (layout_type == NULL || !PyObject_TypeCheck(self, layout_type)) {
        int r = PyObject_SetAttr(self, *field_names[f], v);
        Py_XDECREF(v);
        return r;
    }
    PyObject **place = (PyObject **)((char *)self + field_offset[f]);
    Py_XSETREF(*place, v);
    return 0;
}

/* Takes the transport's held chunks: a list (new reference, the slot
 * emptied) or NULL when nothing is held; -1 on error. */
static int take_held(PyObject *self, PyObject **held)
{
    *held = NULL;
    PyObject *pending = get_field(self, F_PENDING);
    if (pending == NULL)
        return -1;
    if (!PyList_Check(pending) || PyList_GET_SIZE(pending) == 0) {
        Py_DECREF(pending);
        return 0;
    }
    if (set_field(self, F_PENDING, Py_NewRef(Py_None)) < 0) {
        Py_DECREF(pending);
        return -1;
    }
    *held = pending;
    return 0;
}

/* The loop that runs this transport's callbacks, if it is a zloopgo loop
 * running one now (then writes may be held), else NULL. */
static zl_loop *holding_loop(PyObject *self)
{
    PyObject *loop = *(PyObject **)((char *)self + field_offset[F_LOOP]);
    if (loop == NULL || !PyObject_TypeCheck(loop, &zl_LoopType) || !((zl_loop *)loop)->in_callback)
        return NULL;
    return (zl_loop *)loop;
}

/* Holds data until the running callback returns, if it fits: 1 if held,
 * 0 if it must be sent now (after whatever is held), -1 on error. Only
 * called with asyncio's buffer empty. */
static int hold(PyObject *self, PyObject *data, Py_buffer *view)
{
    if (layout_type == NULL || !PyObject_TypeCheck(self, layout_type))
        return 0;
    zl_loop *L = holding_loop(self);
    if (L == NULL)
        return 0;
    PyObject *pending = slot_value(self, F_PENDING);
    Py_ssize_t held = 0, n = 0;
    if (pending != NULL && PyList_Check(pending)) {
        n = PyList_GET_SIZE(pending);
        for (Py_ssize_t i = 0; i < n; i++)
            held += PyBytes_GET_SIZE(PyList_GET_ITEM(pending, i));
    }
    long high;
    if (field_int(self, F_HIGH_WATER, &high) < 0)
        return -1;
    long limit = high < COALESCE_MAX ? high : COALESCE_MAX;
    if (n >= COALESCE_IOV || held + view->len > limit)
        return 0;
    /* bytes are kept as they are; a mutable buffer is copied, since the
     * caller may change it once write() returned (asyncio had sent it) */
    PyObject *chunk = PyBytes_CheckExact(data) ? Py_NewRef(data)
                                               : PyBytes_FromStringAndSize(view->buf, view->len);
    if (chunk == NULL)
        return -1;
    if (n > 0) {
        int r = PyList_Append(pending, chunk);
        Py_DECREF(chunk);
        return r < 0 ? -1 : 1;
    }
    if (zl_flush_reserve(L) < 0) {
        Py_DECREF(chunk);
        return -1;
    }
    /* Room for four chunks, holding one: a second write (an HTTP
     * header, then the body) appends without growing the list. */
    PyObject *list = PyList_New(4);
    if (list == NULL) {
        Py_DECREF(chunk);
        return -1;
    }
    PyList_SET_ITEM(list, 0, chunk);
    Py_SET_SIZE(list, 1); /* the other slots are NULL, beyond the size */
    if (set_field(self, F_PENDING, list) < 0)
        return -1;
    zl_flush_add(L, self);
    return 1;
}

/* Hands what a send left to _zl_buffer_rest, which buffers it as this
 * Python version's asyncio buffers the rest of a partial send: chunks[i:]
 * of which the first lost `sent` bytes (-1: nothing was tried, the buffer
 * was not empty). */
static PyObject *buffer_rest(PyObject *self, PyObject *chunks, Py_ssize_t i, Py_ssize_t sent)
{
    PyObject *rest = PyList_GetSlice(chunks, i, PyList_GET_SIZE(chunks));
    PyObject *offset = rest ? PyLong_FromSsize_t(sent) : NULL;
    PyObject *r =
        offset ? PyObject_CallMethodObjArgs(self, s_buffer_rest, rest, offset, NULL) : NULL;
    Py_XDECREF(offset);
    Py_XDECREF(rest);
    return r;
}

/* Sends `chunks` (a list of bytes-like objects, in order) in one
 * sendmsg(2); the rest is buffered, an error goes to _fatal_error, as
 * asyncio's write would have handled them. */
static PyObject *send_chunks(PyObject *self, PyObject *chunks)
{
    Py_ssize_t n = PyList_GET_SIZE(chunks);
    if (n == 0)
        Py_RETURN_NONE;
    int lost = field_true(self, F_CONN_LOST);
    if (lost != 0) /* the connection went away meanwhile: nothing to send to */
        return lost < 0 ? NULL : Py_NewRef(Py_None);
    long fd;
    if (field_int(self, F_SOCK_FD, &fd) < 0)
        return NULL;
    struct iovec iov[COALESCE_IOV + 1];
    Py_buffer views[COALESCE_IOV + 1];
    Py_ssize_t count = n < COALESCE_IOV + 1 ? n : COALESCE_IOV + 1, got = 0;
    Py_ssize_t len[COALESCE_IOV + 1];
    for (; got < count; got++) {
        PyObject *c = PyList_GET_ITEM(chunks, got);
        views[got].obj = NULL;
        if (PyBytes_CheckExact(c)) {
            iov[got].iov_base = PyBytes_AS_STRING(c);
            iov[got].iov_len = PyBytes_GET_SIZE(c);
        } else if (PyObject_GetBuffer(c, &views[got], PyBUF_SIMPLE) == 0) {
            iov[got].iov_base = views[got].buf;
            iov[got].iov_len = views[got].len;
        } else {
            break;
        }
        len[got] = (Py_ssize_t)iov[got].iov_len;
    }
    ssize_t sent = -1;
    int err = 0;
    if (got == count) {
        struct msghdr msg = {0};
        msg.msg_iov = iov;
        msg.msg_iovlen = count;
        do {
            /* MSG_NOSIGNAL: a closed peer is an error on this transport,
             * never a SIGPIPE, whatever the process's SIGPIPE setting */
            sent = sendmsg((int)fd, &msg, MSG_NOSIGNAL);
        } while (sent < 0 && errno == EINTR);
        err = errno;
    }
    for (Py_ssize_t i = 0; i < got; i++)
        if (views[i].obj != NULL)
            PyBuffer_Release(&views[i]);
    if (got < count)
        return NULL; /* a chunk refused its buffer: the error is set */
    if (sent < 0 && err != EAGAIN && err != EWOULDBLOCK) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        return report_fatal(self, msg_write_error);
    }
    if (sent < 0)
        sent = 0;
    /* what is left, in order: the unsent tail of the chunk sendmsg stopped in, then the rest */
    Py_ssize_t i = 0;
    while (i < count && sent >= len[i]) {
        sent -= len[i];
        i++;
    }
    if (i == n)
        Py_RETURN_NONE;
    return buffer_rest(self, chunks, i, sent);
}

/* _zl_flush(): send what this transport holds now. */
PyObject *zl_transport_flush(PyObject *self, PyObject *unused)
{
    PyObject *held;
    if (take_held(self, &held) < 0)
        return NULL;
    if (held == NULL)
        Py_RETURN_NONE;
    PyObject *r = send_chunks(self, held);
    Py_DECREF(held);
    return r;
}

/* Sends data now, from the caller's buffer: after what is held, in one
 * sendmsg, or alone with one send(2). */
static PyObject *send_now(PyObject *self, PyObject *data, Py_buffer *view)
{
    PyObject *held;
    if (take_held(self, &held) < 0)
        return NULL;
    /* What other transports of the loop hold was written earlier: it
     * reaches the kernel first, as asyncio's sends would have. */
    PyObject *loop = layout_type && PyObject_TypeCheck(self, layout_type)
                         ? *(PyObject **)((char *)self + field_offset[F_LOOP])
                         : NULL;
    if (loop != NULL && PyObject_TypeCheck(loop, &zl_LoopType) && zl_flush_held((zl_loop *)loop))
        zl_flush_writes((zl_loop *)loop);
    if (held != NULL) {
        PyObject *r = PyList_Append(held, data) == 0 ? send_chunks(self, held) : NULL;
        Py_DECREF(held);
        return r;
    }
    long fd;
    if (field_int(self, F_SOCK_FD, &fd) < 0)
        return NULL;
    ssize_t n;
    do {
        /* MSG_NOSIGNAL, as in send_chunks */
        n = send((int)fd, view->buf, view->len, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        PyErr_SetFromErrno(PyExc_OSError);
        return report_fatal(self, msg_write_error);
    }
    if (n == view->len)
        Py_RETURN_NONE;
    PyObject *chunks = PyList_New(1);
    if (chunks == NULL)
        return NULL;
    PyList_SET_ITEM(chunks, 0, Py_NewRef(data));
    PyObject *r = buffer_rest(self, chunks, 0, n < 0 ? 0 : n);
    Py_DECREF(chunks);
    return r;
}

/* write(data): asyncio's checks; then, with nothing buffered, the data is
 * held (see above) or sent at once; with data already buffered it is
 * appended behind it, as asyncio does. A lost connection (counted and
 * warned about) and data that is not one contiguous buffer go to
 * asyncio's own write. */
static PyObject *transport_write(PyObject *self, PyObject *data)
{
    if (!PyBytes_Check(data) && !PyByteArray_Check(data) && !PyMemoryView_Check(data))
        return PyErr_Format(PyExc_TypeError, "data argument must be a bytes-like object, not '%s'",
                            Py_TYPE(data)->tp_name);
    int flag = field_true(self, F_EOF);
    if (flag != 0) {
        if (flag > 0)
            PyErr_SetString(PyExc_RuntimeError, "Cannot call write() after write_eof()");
        return NULL;
    }
    PyObject *waiter = get_field(self, F_EMPTY_WAITER);
    if (waiter == NULL)
        return NULL;
    Py_DECREF(waiter);
    if (waiter != Py_None) {
        PyErr_SetString(PyExc_RuntimeError, "unable to write; sendfile is in progress");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        /* not one contiguous block (a strided memoryview): asyncio's own
         * write handles it, reporting send()'s failure as a fatal error */
        PyErr_Clear();
        return PyObject_CallMethodOneArg(self, s_write_python, data);
    }
    if (view.len == 0) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    if ((flag = field_true(self, F_CONN_LOST)) != 0) {
        PyBuffer_Release(&view);
        return flag < 0 ? NULL : PyObject_CallMethodOneArg(self, s_write_python, data);
    }
    PyObject *buffer = get_field(self, F_BUFFER);
    if (buffer == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t buffered = PyObject_Length(buffer);
    Py_DECREF(buffer);
    PyObject *r;
    if (buffered < 0) {
        r = NULL;
    } else if (buffered == 0) {
        int held = hold(self, data, &view);
        r = held < 0 ? NULL : held ? Py_NewRef(Py_None) : send_now(self, data, &view);
    } else {
        /* Bytes are already waiting for the socket: this write queues
         * behind them (nothing is held then: holding needs an empty buffer). */
        PyObject *chunks = PyList_New(1);
        if (chunks != NULL)
            PyList_SET_ITEM(chunks, 0, Py_NewRef(data));
        r = chunks ? buffer_rest(self, chunks, 0, -1) : NULL;
        Py_XDECREF(chunks);
    }
    PyBuffer_Release(&view);
    return r;
}

/* asyncio's is_closing(), which StreamWriter.drain() asks on every call. */
static PyObject *transport_is_closing(PyObject *self, PyObject *unused)
{
    return get_field(self, F_CLOSING);
}

int zl_is_native_read(PyObject *callback)
{
    return PyCFunction_Check(callback) && PyCFunction_GET_FUNCTION(callback) == read_ready;
}

static PyMethodDef fast_methods[] = {
    {"_read_ready", read_ready, METH_NOARGS, NULL},
    {"_read_ready__data_received", read_ready_data_received, METH_NOARGS, NULL},
    {"_read_ready__get_buffer", read_ready_get_buffer, METH_NOARGS, NULL},
    {"write", transport_write, METH_O,
     "Write data to the transport (asyncio.WriteTransport.write)."},
    {"_zl_flush", zl_transport_flush, METH_NOARGS,
     "Send the writes held until the running callback returns now."},
    {"is_closing", transport_is_closing, METH_NOARGS,
     "Return True if the transport is closing or closed."},
    {NULL}};

PyTypeObject zl_StreamFastPathsType = {
    /* clang-format off */
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "zloopgo._engine.StreamFastPaths",
    /* clang-format on */
    .tp_doc = "Native per-packet methods for asyncio's socket transport.",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_methods = fast_methods,
};

int zl_transport_type_ready(void)
{
    static const zl_name names[] = {
        {&s_conn_lost, "_conn_lost"},
        {&s_sock_fd, "_sock_fd"},
        {&s_max_size, "max_size"},
        {&s_protocol, "_protocol"},
        {&s_data_received, "data_received"},
        {&s_fatal_error, "_fatal_error"},
        {&s_on_eof, "_read_ready__on_eof"},
        {&s_read_ready_cb, "_read_ready_cb"},
        {&s_eof, "_eof"},
        {&s_empty_waiter, "_empty_waiter"},
        {&s_buffer, "_buffer"},
        {&s_write_python, "_zl_write_python"},
        {&msg_read_error, "Fatal read error on socket transport"},
        {&msg_data_received, "Fatal error: protocol.data_received() call failed."},
        {&msg_write_error, "Fatal write error on socket transport"},
        {&s_get_buffer, "get_buffer"},
        {&s_buffer_updated, "buffer_updated"},
        {&s_loop, "_loop"},
        {&s_pending, "_zl_pending"},
        {&s_buffer_rest, "_zl_buffer_rest"},
        {&s_closing, "_closing"},
        {&s_large_reads, "_zl_large_reads"},
        {&s_high_water, "_high_water"},
        {&msg_get_buffer, "Fatal error: protocol.get_buffer() call failed."},
        {&msg_buffer_updated, "Fatal error: protocol.buffer_updated() call failed."},
    };
    if (zl_intern_names(names, sizeof names / sizeof names[0]) < 0)
        return -1;
    minus_one = PyLong_FromLong(-1);
    if (minus_one == NULL)
        return -1;
    return PyType_Ready(&zl_StreamFastPathsType);
}
