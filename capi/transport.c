/* StreamFastPaths: native versions of the methods of asyncio's socket
 * transport that run for every packet and every write — _read_ready,
 * _read_ready__data_received, _read_ready__get_buffer, write, writelines
 * (where asyncio's sends with sendmsg and the platform has it), and the
 * is_closing that StreamWriter.drain() asks on every write. zloopgo's transport
 * class puts this type first in its bases; everything else (buffering
 * after a partial send, flow control, closing, errors) stays asyncio's own
 * Python code, reached through the same attributes and methods asyncio
 * uses, so behaviour and messages are asyncio's.
 *
 * Every system call is made on the descriptor the transport's socket
 * holds at that moment (sockets.c), never on the number asyncio keeps in
 * _sock_fd: by then the transport may have closed itself (_sock None), or
 * the program the socket, and the number belong to another descriptor.
 * A socket the native calls do not serve goes to asyncio's own methods.
 *
 * It knows asyncio's transport attributes by name; of the loop it knows
 * its receive buffer and quiet-read flag and the counters of its reads
 * and writes it adds to (zl_counters.transports); it knows nothing of the
 * engine. */
#include "zl.h"
#include <structmember.h>

/* A transport whose last read was at least LARGE_READ bytes receives the
 * next one straight into a bytes of max_size, shrunk to what came: a bulk
 * stream then skips copying each read out of the receive buffer. Small
 * reads stay in the receive buffer: an exactly sized copy is cheaper than
 * allocating max_size for a few bytes. */
#define LARGE_READ (64 * 1024)

/* zloopgo's transport class keeps the attributes read here in __slots__;
 * set_transport_layout() records their offsets (zl_layout, util.c) so that
 * reading one is a load instead of an attribute lookup. Instances of other
 * classes (or a slot not yet set) take the ordinary lookup. */
enum {
    F_CONN_LOST,
    F_PROTOCOL,
    F_EOF,
    F_EMPTY_WAITER,
    F_BUFFER,
    F_READ_READY_CB,
    F_LOOP,
    F_CLOSING,
    F_STATE,
    F_SOCK,
    F_COUNT
};
#define NAME_AT(name) offsetof(zl_names, name)
static const size_t field_names[F_COUNT] = {
    NAME_AT(_conn_lost), NAME_AT(_protocol),      NAME_AT(_eof),  NAME_AT(_empty_waiter),
    NAME_AT(_buffer),    NAME_AT(_read_ready_cb), NAME_AT(_loop), NAME_AT(_closing),
    NAME_AT(_zl_state),  NAME_AT(_sock)};
_Static_assert(F_COUNT <= ZL_LAYOUT_MAX, "too many transport fields for a zl_layout");

/* The state of the module whose StreamFastPaths self's class derives
 * from, which holds the layout, kept in self: every native method's first
 * step. */
static inline zl_module_state *transport_state(PyObject *self)
{
    return zl_state_of_native(self, &((zl_native_transport *)self)->state);
}

ZL_ALWAYS_INLINE PyObject *slot_value(const zl_module_state *st, PyObject *self, int f)
{
    return zl_layout_slot(&st->transport_layout, self, f);
}

ZL_ALWAYS_INLINE PyObject *get_field(const zl_module_state *st, PyObject *self, int f)
{
    return zl_layout_get(&st->transport_layout, self, f);
}

/* Once per module object (zl_refuse_set_again); in a critical section on
 * the module, so that two threads' calls at once are one and a refusal. */
PyObject *zl_set_transport_layout(PyObject *mod, PyObject *cls)
{
    zl_module_state *state = PyModule_GetState(mod);
    return zl_set_layout_once(mod, "set_transport_layout", &state->transport_layout, cls);
}

ZL_ALWAYS_INLINE int field_true(const zl_module_state *st, PyObject *self, int f)
{
    return zl_layout_true(&st->transport_layout, self, f);
}

static PyObject *report_fatal(const zl_names *names, PyObject *self, PyObject *message);

/* self.max_size, which asyncio reads for every recv, in *out: 1 when it is
 * an int from 1 to LONG_MAX, which the native read takes; 0 for any other
 * value (0 reads as EOF, a negative size, an int too large or not an int
 * fail in recv), which asyncio's own read then handles with its messages;
 * -1 with an exception set only for what the lookup raised that must
 * propagate (SystemExit, KeyboardInterrupt); -2 when the lookup failed
 * otherwise: asyncio reads max_size inside its `try:`, so that is a
 * fatal read error, reported here, or nothing when it raised
 * BlockingIOError or InterruptedError. */
static int read_size(const zl_names *names, PyObject *self, long *out)
{
    PyObject *v = PyObject_GetAttr(self, names->max_size);
    if (v == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_BlockingIOError) &&
            !PyErr_ExceptionMatches(PyExc_InterruptedError)) {
            PyObject *r = report_fatal(names, self, names->msg_transport_read_error);
            if (r == NULL)
                return -1;
            Py_DECREF(r);
        }
        PyErr_Clear();
        *out = 0;
        return -2;
    }
    int usual = zl_exact_long(v, out) && *out > 0;
    Py_DECREF(v);
    return usual;
}

/* self._fatal_error(exc, message) with the pending exception as exc, as the
 * transport's `except BaseException as exc:` clauses do: exc is also the
 * exception being handled while _fatal_error runs, so what it logs with
 * exc_info=True (debug mode) carries exc, and an exception it raises has
 * exc as its __context__, as in asyncio's except block. SystemExit and
 * KeyboardInterrupt propagate. */
static PyObject *report_fatal(const zl_names *names, PyObject *self, PyObject *message)
{
    if (PyErr_ExceptionMatches(PyExc_SystemExit) || PyErr_ExceptionMatches(PyExc_KeyboardInterrupt))
        return NULL;
    PyObject *value = zl_fetch_exception();
    if (value == NULL)
        Py_RETURN_NONE;
    PyObject *r = zl_call_handling(self, names->_fatal_error, value, message);
    Py_DECREF(value);
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

/* A lookup inside asyncio's `try: ... self._sock.recv...` failed (the
 * socket attribute, or max_size): BlockingIOError and InterruptedError
 * end the read quietly, as that try's first clause does; anything else
 * is the fatal read error. */
static PyObject *read_failed(const zl_names *names, PyObject *self)
{
    if (PyErr_ExceptionMatches(PyExc_BlockingIOError) ||
        PyErr_ExceptionMatches(PyExc_InterruptedError)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return report_fatal(names, self, names->msg_transport_read_error);
}

static PyObject *read_ready_data_received(PyObject *self, PyObject *unused);
static PyObject *read_ready_get_buffer(PyObject *self, PyObject *unused);
static PyObject *read_data_received(const zl_module_state *st, PyObject *self);
static PyObject *read_get_buffer(const zl_module_state *st, PyObject *self);

/* asyncio's _read_ready: self._read_ready_cb(). When the callback is this
 * transport's own native read method, bound to it (what set_protocol
 * stores), the method's C function is called without a call through the
 * bound method: the same function runs with the same self. */
static PyObject *read_ready(PyObject *self, PyObject *unused)
{
    const zl_module_state *st = transport_state(self);
    PyObject *cb = get_field(st, self, F_READ_READY_CB);
    if (cb == NULL)
        return NULL;
    PyObject *r;
    PyCFunction direct = PyCFunction_Check(cb) && PyCFunction_GET_SELF(cb) == self
                             ? PyCFunction_GET_FUNCTION(cb)
                             : NULL;
    if (direct == read_ready_data_received)
        r = read_data_received(st, self);
    else if (direct == read_ready_get_buffer)
        r = read_get_buffer(st, self);
    else
        r = PyObject_CallNoArgs(cb);
    Py_DECREF(cb);
    return r;
}

/* Where a read smaller than LARGE_READ lands before it is copied out: the
 * loop's receive buffer, grown to `size`. Each loop has its own (loops in
 * other threads read at the same time); one that is busy — Python code run
 * while a read was being handed on (a finalizer, a gc callback) read into
 * it again — gives way to a buffer of this read's own. NULL with
 * MemoryError set. */
char *zl_rx_take(zl_loop *L, size_t size, char **own)
{
    *own = NULL;
    if (L == NULL || L->rx.busy) {
        *own = PyMem_RawMalloc(size);
        if (*own == NULL)
            PyErr_NoMemory();
        return *own;
    }
    if (size > L->rx.size) {
        char *b = PyMem_RawRealloc(L->rx.buf, size);
        if (b == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        L->rx.buf = b;
        L->rx.size = size;
    }
    L->rx.busy = 1;
    return L->rx.buf;
}

void zl_rx_give_back(zl_loop *L, char *own)
{
    if (own != NULL)
        PyMem_RawFree(own);
    else if (L != NULL)
        L->rx.busy = 0;
}

static void transport_state_dealloc(PyObject *self);

/* The transport's native state, or NULL (no error set) when it has none:
 * a TransportState of any interpreter's module, known by its deallocator
 * (one load more than comparing with the class, no lookup of it). */
ZL_ALWAYS_INLINE zl_transport *state_of(const zl_module_state *st, PyObject *self)
{
    PyObject *s = slot_value(st, self, F_STATE);
    return s != NULL && Py_TYPE(s)->tp_dealloc == transport_state_dealloc ? (zl_transport *)s
                                                                          : NULL;
}

/* The zloopgo loop this transport belongs to, or NULL. */
ZL_ALWAYS_INLINE zl_loop *transport_loop(const zl_module_state *st, PyObject *self)
{
    PyObject *loop = slot_value(st, self, F_LOOP);
    return loop != NULL && zl_is_loop(loop) ? (zl_loop *)loop : NULL;
}

/* v is an exact int 0, as _conn_lost is until the connection is lost:
 * its truth known without a call that could run Python code. */
ZL_ALWAYS_INLINE int is_zero(PyObject *v)
{
#if PY_VERSION_HEX >= 0x030C0000
    long n;
    return v != NULL && zl_small_int(v, &n) && n == 0;
#else
    return v != NULL && PyLong_CheckExact(v) && Py_SIZE(v) == 0; /* 3.11: no digits is 0 */
#endif
}

/* The slots a read looks at before it asks max_size, read in place in one
 * go when self's class allows it and _conn_lost is 0 (as usual_write_slots
 * below, whose reasons hold here): 1 with *sock (a new reference) and *L
 * (transport_loop's), else 0, and the read takes them one by one. */
ZL_ALWAYS_INLINE int usual_read_slots_held(const zl_module_state *st, PyObject *self,
                                           PyObject **sock, zl_loop **L)
{
    const zl_layout *layout = &st->transport_layout;
    if (!zl_layout_direct(layout, self))
        return 0;
    PyObject *s = *(PyObject **)((char *)self + layout->offset[F_SOCK]);
    PyObject *loop = *(PyObject **)((char *)self + layout->offset[F_LOOP]);
    if (!is_zero(*(PyObject **)((char *)self + layout->offset[F_CONN_LOST])) || s == NULL)
        return 0;
    *sock = Py_NewRef(s);
    *L = loop != NULL && zl_is_loop(loop) ? (zl_loop *)loop : NULL;
    return 1;
}
#ifdef Py_GIL_DISABLED
/* Without the GIL, the slots are read, and _sock's reference taken, in a
 * critical section on self, which a slot's descriptor holds while it
 * stores (zl_layout_slot_ref, zl.h): another thread's store cannot free
 * what is read meanwhile, nor its _conn_lost change between the reads. */
ZL_ALWAYS_INLINE int usual_read_slots(const zl_module_state *st, PyObject *self, PyObject **sock,
                                      zl_loop **L)
{
    int usual;
    Py_BEGIN_CRITICAL_SECTION(self);
    usual = usual_read_slots_held(st, self, sock, L);
    Py_END_CRITICAL_SECTION();
    return usual;
}
#else
#define usual_read_slots usual_read_slots_held
#endif

/* The socket.socket of L's interpreter, whose sockets alone the native
 * calls serve: NULL (none) without a zloopgo loop. */
static inline const PyTypeObject *socket_type_of(const zl_loop *L)
{
    return L != NULL ? L->state->socket_type : NULL;
}

static inline zl_transport_counts *counts(zl_loop *L, const zl_transport *t)
{
    return L != NULL && t != NULL ? &L->counters.transports[(int)t->kind] : NULL;
}

/* A native recv of n bytes (or an error, EOF: n <= 0) is counted. */
static inline void count_read(zl_transport_counts *c, ptrdiff_t n)
{
    if (c != NULL) {
        c->reads++;
        c->read_bytes += n > 0 ? (uint64_t)n : 0;
    }
}

static PyObject *read_ready_data_received(PyObject *self, PyObject *unused)
{
    return read_data_received(transport_state(self), self);
}

static PyObject *read_data_received(const zl_module_state *st, PyObject *self)
{
    PyObject *sock;
    /* the loop whose dispatch runs this read, alive until it returns */
    zl_loop *L;
    if (!usual_read_slots(st, self, &sock, &L)) {
        int lost = field_true(st, self, F_CONN_LOST);
        if (lost != 0)
            return lost < 0 ? NULL : Py_NewRef(Py_None);
        /* asyncio's self._sock.recv(self.max_size): the socket is taken
         * first, inside the read's try */
        if ((sock = get_field(st, self, F_SOCK)) == NULL)
            return read_failed(&st->names, self);
        L = transport_loop(st, self);
    }
    long max_size = 0; /* read_size sets it when usual != 0, which gcc cannot always see */
    const zl_names *names = &st->names;
    int usual = zl_socket_nonblocking_fd(socket_type_of(L), sock) != ZL_NOT_A_SOCKET
                    ? read_size(names, self, &max_size)
                    : 0;
    if (usual == 0) { /* asyncio's own read, for an unusual max_size or socket */
        Py_DECREF(sock);
        return PyObject_CallMethodNoArgs(self, names->_zl_read_python);
    }
    /* what the socket's recv reads when it is called: the descriptor
     * the socket holds after max_size's lookup (a closed one fails) */
    int fd = zl_socket_fd(socket_type_of(L), sock);
    Py_DECREF(sock);
    if (usual < 0)
        return usual == -1 ? NULL : Py_NewRef(Py_None);
    zl_transport *t = state_of(st, self);
    PyObject *data = NULL; /* the final object, when the read goes straight into it */
    char *into, *own = NULL;
    int direct = t != NULL && t->large_reads && max_size > LARGE_READ;
    /* A buffer of max_size that cannot be had is recv's MemoryError in
     * asyncio, inside its `try:`: a fatal read error. */
    if (direct) {
        data = PyBytes_FromStringAndSize(NULL, max_size);
        if (data == NULL)
            return report_fatal(names, self, names->msg_transport_read_error);
        into = PyBytes_AS_STRING(data);
    } else if ((into = zl_rx_take(L, (size_t)max_size, &own)) == NULL) {
        return report_fatal(names, self, names->msg_transport_read_error);
    }
    ptrdiff_t n;
    do {
        n = zl_sys_recv(fd, into, max_size);
    } while (n < 0 && zl_sys_interrupted(zl_sys_error()));
    int err = zl_sys_error();
    count_read(counts(L, t), n);
    if (n <= 0) {
        if (data != NULL)
            Py_DECREF(data);
        else
            zl_rx_give_back(L, own);
        if (n == 0)
            return PyObject_CallMethodNoArgs(self, names->_read_ready__on_eof);
        if (zl_sys_would_block(err))
            Py_RETURN_NONE;
        zl_sys_raise(err);
        return report_fatal(names, self, names->msg_transport_read_error);
    }
    if (t != NULL)
        t->large_reads = n >= LARGE_READ;
    PyObject *protocol = get_field(st, self, F_PROTOCOL);
    /* An asyncio stream: the bytes go straight into its StreamReader. A
     * self._protocol that fails is, as data_received's failure (-1), the
     * protocol call's fatal error: asyncio reads it inside that try. */
    int fed =
        protocol != NULL ? zl_stream_feed(L != NULL ? L->state : NULL, protocol, into, n) : -1;
    /* Fed natively and the socket drained (a stream socket returns less
     * than asked only when nothing more is there): no Python code of the
     * program ran, and this descriptor is not ready any more. */
    if (L != NULL)
        L->rx.quiet_read = fed == 1 && n < max_size;
    if (data == NULL) {
        if (fed == 0)
            data = PyBytes_FromStringAndSize(into, n);
        zl_rx_give_back(L, own);
        if (fed == 0 && data == NULL) {
            Py_DECREF(protocol);
            return NULL;
        }
    }
    if (fed != 0) {
        Py_XDECREF(protocol);
        Py_XDECREF(data);
        return fed < 0 ? report_fatal(names, self, names->msg_data_received) : Py_NewRef(Py_None);
    }
    if (direct && n < max_size / 2) {
        /* Mostly empty: copy out and free the big object whole. Shrinking
         * it instead would, with glibc, mremap a fresh mmap on every read
         * (256 KiB is above the initial mmap threshold, and only freeing
         * such a block whole raises the threshold so that later ones come
         * from the heap): page faults and TLB shootdowns on each read. */
        PyObject *exact = PyBytes_FromStringAndSize(PyBytes_AS_STRING(data), n);
        Py_SETREF(data, exact);
    } else if (direct && n < max_size && _PyBytes_Resize(&data, n) < 0) {
        Py_DECREF(protocol);
        return NULL;
    }
    if (data == NULL) {
        Py_DECREF(protocol);
        return NULL;
    }
    PyObject *r = PyObject_CallMethodOneArg(protocol, names->data_received, data);
    Py_DECREF(protocol);
    Py_DECREF(data);
    if (r == NULL)
        return report_fatal(names, self, names->msg_data_received);
    Py_DECREF(r);
    Py_RETURN_NONE;
}

/* self._sock.recv_into(buf) for the BufferedProtocol read: 1 with the
 * count in *count, 0 when the kernel has nothing now (BlockingIOError,
 * InterruptedError), -1 with the exception set. recv(2) straight into the
 * buffer when the socket is a plain one in non-blocking mode and the
 * buffer an exact bytearray or memoryview exporting one writable
 * contiguous block, as the socket's recv_into asks of it (no Python code
 * runs to get it; *filled is then its size in bytes); anything else goes
 * to the socket's own recv_into, which also raises what asyncio reports
 * for a buffer it cannot fill (a list, bytes, a strided or read-only
 * view) and runs a buffer's own __buffer__ as asyncio's call does. */
static int recv_into(const zl_names *names, const PyTypeObject *socket_type, PyObject *sock,
                     PyObject *buf, PyObject **count, Py_ssize_t *filled)
{
    Py_buffer view;
    *count = NULL;
    *filled = -1;
    if (zl_socket_nonblocking_fd(socket_type, sock) != ZL_NOT_A_SOCKET &&
        (PyByteArray_CheckExact(buf) || PyMemoryView_Check(buf))) {
        if (PyObject_GetBuffer(buf, &view, PyBUF_WRITABLE) == 0) {
            ptrdiff_t n;
            do {
                n = zl_sys_recv(zl_socket_fd(socket_type, sock), view.buf, view.len);
            } while (n < 0 && zl_sys_interrupted(zl_sys_error()));
            int err = zl_sys_error();
            *filled = view.len;
            PyBuffer_Release(&view);
            if (n < 0 && zl_sys_would_block(err))
                return 0;
            if (n < 0) {
                zl_sys_raise(err);
                return -1;
            }
            *count = PyLong_FromSsize_t(n);
            return *count != NULL ? 1 : -1;
        }
        PyErr_Clear(); /* the socket's recv_into words why it will not do */
    }
    *count = PyObject_CallMethodOneArg(sock, names->recv_into, buf);
    if (*count != NULL)
        return 1;
    if (!PyErr_ExceptionMatches(PyExc_BlockingIOError) &&
        !PyErr_ExceptionMatches(PyExc_InterruptedError))
        return -1;
    PyErr_Clear();
    return 0;
}

/* The BufferedProtocol read, asyncio's _read_ready__get_buffer:
 * get_buffer(-1) and its len() (0 is get_buffer's failure), then
 * self._sock.recv_into(buf) (its failure a fatal read error), then
 * buffer_updated(nbytes), or the EOF step when nothing came. */
static PyObject *read_ready_get_buffer(PyObject *self, PyObject *unused)
{
    return read_get_buffer(transport_state(self), self);
}

static PyObject *read_get_buffer(const zl_module_state *st, PyObject *self)
{
    int lost = field_true(st, self, F_CONN_LOST);
    if (lost != 0)
        return lost < 0 ? NULL : Py_NewRef(Py_None);
    const zl_names *names = &st->names;
    /* self._protocol.get_buffer(-1), all of it inside asyncio's try */
    PyObject *protocol = get_field(st, self, F_PROTOCOL);
    if (protocol == NULL)
        return report_fatal(names, self, names->msg_get_buffer);
    PyObject *minus_one = PyLong_FromLong(-1); /* CPython's cached small int */
    PyObject *buf = minus_one != NULL
                        ? PyObject_CallMethodOneArg(protocol, names->get_buffer, minus_one)
                        : NULL;
    Py_XDECREF(minus_one);
    Py_ssize_t len = buf != NULL ? PyObject_Size(buf) : -1;
    if (len == 0)
        PyErr_SetString(PyExc_RuntimeError, "get_buffer() returned an empty buffer");
    if (len <= 0) {
        Py_XDECREF(buf);
        Py_DECREF(protocol);
        return report_fatal(names, self, names->msg_get_buffer);
    }
    /* the socket is looked up now, as asyncio's self._sock.recv_into */
    PyObject *sock = get_field(st, self, F_SOCK), *nbytes = NULL;
    Py_ssize_t filled = -1;
    zl_loop *L = transport_loop(st, self); /* dispatching this read: alive until it returns */
    int got = sock != NULL ? recv_into(names, socket_type_of(L), sock, buf, &nbytes, &filled) : -1;
    Py_XDECREF(sock);
    Py_DECREF(buf);
    /* asyncio reads self._protocol again for buffer_updated: get_buffer,
     * len() and the socket's recv_into may have run Python that set
     * another protocol */
    Py_DECREF(protocol);
    zl_transport *t = state_of(st, self);
    if (got <= 0) {
        count_read(counts(L, t), -1);
        return got < 0 ? read_failed(names, self) : Py_NewRef(Py_None);
    }
    Py_ssize_t n = PyLong_Check(nbytes) ? PyLong_AsSsize_t(nbytes) : -1;
    PyErr_Clear(); /* a count recv_into gave: only its truth matters here */
    count_read(counts(L, t), n);
    int any = PyObject_IsTrue(nbytes);
    if (any <= 0) {
        Py_DECREF(nbytes);
        return any < 0 ? NULL : PyObject_CallMethodNoArgs(self, names->_read_ready__on_eof);
    }
    if (t != NULL)
        t->fed_quietly = 0;
    protocol = get_field(st, self, F_PROTOCOL);
    PyObject *r = protocol != NULL
                      ? PyObject_CallMethodOneArg(protocol, names->buffer_updated, nbytes)
                      : NULL;
    Py_DECREF(nbytes);
    Py_XDECREF(protocol);
    if (r == NULL)
        return report_fatal(names, self, names->msg_buffer_updated);
    Py_DECREF(r);
    /* A TLS protocol that handed the bytes on natively (tls.c), with the
     * socket drained: as quiet as a stream read fed natively. */
    if (L != NULL && t != NULL)
        L->rx.quiet_read = t->fed_quietly && filled >= 0 && n < filled;
    Py_RETURN_NONE;
}

void zl_transport_fed_quietly(const zl_module_state *st, PyObject *transport)
{
    /* any object may be a TLS protocol's transport: only this module's
     * StreamFastPaths have the layout st holds */
    if (!PyObject_TypeCheck(transport, st->stream_fast_paths_type))
        return;
    zl_transport *t = state_of(st, transport);
    if (t != NULL)
        t->fed_quietly = 1;
}

/* ---- writes ----
 *
 * write() sends at once, as asyncio's does: when it returns, its bytes
 * are in the kernel (or in asyncio's buffer after a partial send), and a
 * send error has already gone to _fatal_error, so is_closing(),
 * get_write_buffer_size(), drain() and the protocol's callbacks see what
 * they see on asyncio.
 *
 * Every send is made without MSG_MORE: a segment held back for a write
 * that follows would reach the peer only when the callback returns, and a
 * peer read meanwhile (in the same callback, or by another process while
 * the callback runs on) would find nothing where on asyncio it finds the
 * bytes (tests/test_write_order.py). */

/* Hands what a send left to _zl_buffer_rest, which buffers it as this
 * Python version's asyncio buffers the rest of a partial send: data of
 * which the first `sent` bytes left (-1: nothing was tried, the buffer
 * was not empty). */
static PyObject *buffer_rest(const zl_names *names, PyObject *self, PyObject *data, Py_ssize_t sent)
{
    PyObject *offset = PyLong_FromSsize_t(sent);
    PyObject *r = offset
                      ? PyObject_CallMethodObjArgs(self, names->_zl_buffer_rest, data, offset, NULL)
                      : NULL;
    Py_XDECREF(offset);
    return r;
}

/* Sends data now, from the caller's buffer, with one send(2) on the
 * descriptor sock holds at this moment; the rest is buffered and an
 * error goes to _fatal_error, as asyncio's write does. */
static PyObject *send_now(const zl_module_state *st, PyObject *self, zl_loop *L, PyObject *sock,
                          PyObject *data, Py_buffer *view)
{
    const zl_names *names =
        &L->state->names; /* L: the transport_write checked the socket with it */
    zl_transport *t = state_of(st, self);
    zl_loop *owner = t != NULL ? L : NULL;
    int fd = zl_socket_fd(socket_type_of(L), sock);
    ptrdiff_t n;
    do {
        /* a closed peer is an error on this transport, never a SIGPIPE,
         * whatever the process's SIGPIPE setting */
        n = zl_sys_send_nosignal(fd, view->buf, view->len);
    } while (n < 0 && zl_sys_interrupted(zl_sys_error()));
    int err = zl_sys_error();
    zl_transport_counts *c = counts(owner, t);
    if (c != NULL) {
        c->writes++;
        c->write_bytes += n > 0 ? (uint64_t)n : 0;
        /* what is left goes to asyncio's buffer (below) */
        c->writes_buffered += n != view->len && (n >= 0 || zl_sys_would_block(err));
    }
    if (n < 0 && !zl_sys_would_block(err)) {
        zl_sys_raise(err);
        return report_fatal(names, self, names->msg_transport_write_error);
    }
    if (n == view->len)
        Py_RETURN_NONE;
    return buffer_rest(names, self, data, n < 0 ? 0 : n);
}

/* The buffer transport_write took: exported (a bytearray, a memoryview)
 * or an exact bytes' own storage, which has nothing to release. */
static void release_view(Py_buffer *view)
{
    if (view->obj != NULL)
        PyBuffer_Release(view);
}

/* asyncio's own write, for what the native one does not serve. */
static PyObject *write_python(const zl_module_state *st, PyObject *self, PyObject *data)
{
    return PyObject_CallMethodOneArg(self, st->names._zl_write_python, data);
}

/* The slots write() reads before it sends, when self's class lets them be
 * read in place (zl_layout_direct) and each holds what it holds on a
 * transport that may send at once: _eof False, _empty_waiter None,
 * _conn_lost 0, _sock and _buffer set. Reading a slot runs no Python
 * code, so read together they cannot tell their order (asyncio's, which
 * the one-by-one reads keep for any other value) and one check of the
 * class serves them all. 1 with *sock and *buffer (new references) and *L
 * (transport_loop's), else 0. */
ZL_ALWAYS_INLINE int usual_write_slots_held(const zl_module_state *st, PyObject *self,
                                            PyObject **sock, PyObject **buffer, zl_loop **L)
{
    const zl_layout *layout = &st->transport_layout;
    if (!zl_layout_direct(layout, self))
        return 0;
#define AT(f) (*(PyObject **)((char *)self + layout->offset[f]))
    PyObject *loop = AT(F_LOOP);
    if (AT(F_EOF) != Py_False || AT(F_EMPTY_WAITER) != Py_None || !is_zero(AT(F_CONN_LOST)) ||
        AT(F_SOCK) == NULL || AT(F_BUFFER) == NULL)
        return 0;
    *sock = Py_NewRef(AT(F_SOCK));
    *buffer = Py_NewRef(AT(F_BUFFER));
#undef AT
    *L = loop != NULL && zl_is_loop(loop) ? (zl_loop *)loop : NULL;
    return 1;
}
#ifdef Py_GIL_DISABLED
/* in a critical section on self without the GIL, as usual_read_slots */
ZL_ALWAYS_INLINE int usual_write_slots(const zl_module_state *st, PyObject *self, PyObject **sock,
                                       PyObject **buffer, zl_loop **L)
{
    int usual;
    Py_BEGIN_CRITICAL_SECTION(self);
    usual = usual_write_slots_held(st, self, sock, buffer, L);
    Py_END_CRITICAL_SECTION();
    return usual;
}
#else
#define usual_write_slots usual_write_slots_held
#endif

/* write(data): asyncio's checks; then, with nothing buffered, the data is
 * sent at once; with data already buffered it is appended behind it, as
 * asyncio does. A lost connection (counted and warned about) and data
 * that is not one contiguous buffer go to asyncio's own write. */
/* asyncio's first checks in write() and writelines() (`what`): after
 * write_eof(), or while sendfile() runs, the call raises RuntimeError with
 * asyncio's message. -1 with an exception set, else 0. */
ZL_ALWAYS_INLINE int refuse_write(const zl_module_state *st, PyObject *self, const char *what)
{
    int flag = field_true(st, self, F_EOF);
    if (flag != 0) {
        if (flag > 0)
            PyErr_Format(PyExc_RuntimeError, "Cannot call %s() after write_eof()", what);
        return -1;
    }
    PyObject *waiter = get_field(st, self, F_EMPTY_WAITER);
    if (waiter == NULL)
        return -1;
    Py_DECREF(waiter);
    if (waiter != Py_None) {
        PyErr_Format(PyExc_RuntimeError, "unable to %s; sendfile is in progress", what);
        return -1;
    }
    return 0;
}

static PyObject *transport_write(PyObject *self, PyObject *data)
{
    const zl_module_state *st = transport_state(self);
    /* Not bytes-like: asyncio's own write raises its TypeError, whose
     * wording changed within 3.13's patch releases (3.13.0 "a bytes-like
     * object", 3.13.15 and 3.14 "a bytes, bytearray, or memoryview
     * object"), so no version check here can give it. A subclass of bytes
     * or bytearray may answer asyncio's `if not data` with its own __len__
     * or __bool__: asyncio's own write asks it too. */
    if (!PyBytes_CheckExact(data) && !PyByteArray_CheckExact(data) && !PyMemoryView_Check(data))
        return write_python(st, self, data);
    int flag;
    /* asyncio's write sends through self._sock: None once the transport
     * closed itself after flushing its buffer (which leaves _conn_lost 0,
     * while _sock_fd may name another descriptor by now), or a socket the
     * native send does not serve, goes to asyncio's own write, which
     * fails or sends as it does. */
    PyObject *sock, *buffer = NULL; /* buffer: set once _conn_lost was read */
    /* held by the transport's slot; no Python code runs from here to the
     * send for the class whose slots are read (the only one with a loop
     * here) */
    zl_loop *L;
    if (!usual_write_slots(st, self, &sock, &buffer, &L)) {
        if (refuse_write(st, self, "write") < 0)
            return NULL;
        if ((sock = get_field(st, self, F_SOCK)) == NULL)
            return NULL;
        L = transport_loop(st, self);
    }
#ifdef Py_GIL_DISABLED
    /* the transport and its buffer are its loop thread's (zl_check_owner) */
    if (L != NULL && zl_check_owner(L) < 0) {
        Py_DECREF(sock);
        Py_XDECREF(buffer);
        return NULL;
    }
#endif
    if (zl_socket_nonblocking_fd(socket_type_of(L), sock) == ZL_NOT_A_SOCKET) {
        Py_DECREF(sock);
        Py_XDECREF(buffer);
        return write_python(st, self, data);
    }
    PyObject *r = NULL;
    Py_buffer view;
    if (PyBytes_CheckExact(data)) {
        /* bytes are immutable and data is held for the call: their
         * storage is what a buffer export would give, without one */
        view = (Py_buffer){.buf = PyBytes_AS_STRING(data),
                           .len = PyBytes_GET_SIZE(data),
                           .readonly = 1,
                           .itemsize = 1};
    } else if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        /* not one contiguous block (a strided memoryview): asyncio's own
         * write handles it, reporting send()'s failure as a fatal error */
        PyErr_Clear();
        Py_DECREF(sock);
        Py_XDECREF(buffer);
        return write_python(st, self, data);
    }
    if (view.len == 0) {
        r = Py_NewRef(Py_None);
        goto done;
    }
    if (buffer == NULL) { /* the slots read one by one, in asyncio's order */
        if ((flag = field_true(st, self, F_CONN_LOST)) != 0) {
            r = flag < 0 ? NULL : write_python(st, self, data);
            goto done;
        }
        if ((buffer = get_field(st, self, F_BUFFER)) == NULL)
            goto done;
    }
    Py_ssize_t buffered = PyObject_Length(buffer);
    Py_CLEAR(buffer);
    if (buffered == 0)
        r = send_now(st, self, L, sock, data, &view);
    else if (buffered > 0) { /* bytes already wait for the socket: this write queues behind them */
        zl_transport_counts *c = counts(transport_loop(st, self), state_of(st, self));
        if (c != NULL)
            c->writes_buffered++;
        r = buffer_rest(&L->state->names, self, data, -1);
    }
done:
    release_view(&view);
    Py_DECREF(sock);
    Py_XDECREF(buffer);
    return r;
}

#ifdef ZL_SYS_GATHER_MAX
/* asyncio's own writelines, for what the native one does not serve. */
static PyObject *writelines_python(const zl_module_state *st, PyObject *self, PyObject *chunks)
{
    return PyObject_CallMethodOneArg(self, st->names._zl_writelines_python, chunks);
}

/* What asyncio's writelines does after its sendmsg took `sent` bytes of
 * chunks (-1: it would have blocked) or failed (the pending exception),
 * done by _zl_writelines_rest and _zl_writelines_failed as this Python
 * version's asyncio does it. */
static PyObject *writelines_after(const zl_names *names, PyObject *self, PyObject *chunks,
                                  ptrdiff_t sent, int failed)
{
    if (failed) {
        if (PyErr_ExceptionMatches(PyExc_SystemExit) ||
            PyErr_ExceptionMatches(PyExc_KeyboardInterrupt))
            return NULL;
        PyObject *exc = zl_fetch_exception();
        if (exc == NULL)
            Py_RETURN_NONE;
        /* exc is being handled while it runs, as in asyncio's except block */
        PyObject *r = zl_call_handling(self, names->_zl_writelines_failed, exc, chunks);
        Py_DECREF(exc);
        return r;
    }
    PyObject *offset = PyLong_FromSsize_t(sent);
    PyObject *r =
        offset ? PyObject_CallMethodObjArgs(self, names->_zl_writelines_rest, chunks, offset, NULL)
               : NULL;
    Py_XDECREF(offset);
    return r;
}

/* The chunks of an exact list or tuple as buffers for one send, in *total
 * their size: 1, or 0 when one is not an exact bytes or bytearray, is
 * empty, or there are more than one send takes (asyncio's own writelines
 * then runs). Borrowed: no Python code may run until the send. */
static int gather_chunks(PyObject *chunks, zl_sys_gather *bufs, int *count, size_t *total)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(chunks);
    if (n > ZL_SYS_GATHER_MAX)
        return 0;
    PyObject **items = PySequence_Fast_ITEMS(chunks);
    *total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *chunk = items[i];
        const char *buf;
        Py_ssize_t len;
        if (PyBytes_CheckExact(chunk)) {
            buf = PyBytes_AS_STRING(chunk);
            len = PyBytes_GET_SIZE(chunk);
        } else if (PyByteArray_CheckExact(chunk)) {
            buf = PyByteArray_AS_STRING(chunk);
            len = PyByteArray_GET_SIZE(chunk);
        } else
            return 0;
        if (len == 0) /* Python versions differ on an empty chunk: asyncio decides */
            return 0;
        zl_sys_gather_set(&bufs[i], buf, (size_t)len);
        *total += (size_t)len;
    }
    *count = (int)n;
    return 1;
}

/* writelines(list_of_data) where asyncio's sends with sendmsg (3.12+):
 * its checks; then, with nothing buffered and nothing that asks for its
 * other steps (a lost connection, a closing transport, a paused protocol,
 * chunks that gather_chunks does not take, an iterable that is not an
 * exact list or tuple), the chunks go out in one gathering send at once,
 * as asyncio's _write_sendmsg sends them; what the send did not take, or
 * its error, is finished in Python as asyncio finishes it. A send that
 * takes everything leaves asyncio nothing to do but call
 * _maybe_resume_protocol (not paused: nothing) and the loop's
 * _remove_writer (no writer is registered: nothing), which are skipped
 * (docs/compatibility.md). */
static PyObject *transport_writelines(PyObject *self, PyObject *chunks)
{
    const zl_module_state *st = transport_state(self);
    if (refuse_write(st, self, "writelines") < 0)
        return NULL;
    int flag;
    if (!PyList_CheckExact(chunks) && !PyTuple_CheckExact(chunks))
        return writelines_python(st, self, chunks);
    if (PySequence_Fast_GET_SIZE(chunks) == 0) /* asyncio's `if not list_of_data: return` */
        Py_RETURN_NONE;
    if ((flag = field_true(st, self, F_CONN_LOST)) != 0 ||
        (flag = field_true(st, self, F_CLOSING)) != 0)
        return flag < 0 ? NULL : writelines_python(st, self, chunks);
    PyObject *buffer = get_field(st, self, F_BUFFER);
    if (buffer == NULL)
        return NULL;
    Py_ssize_t buffered = PyObject_Length(buffer);
    Py_DECREF(buffer);
    if (buffered != 0)
        return buffered < 0 ? NULL : writelines_python(st, self, chunks);
    PyObject *paused = PyObject_GetAttr(self, st->names._protocol_paused);
    if (paused == NULL)
        return NULL;
    flag = PyObject_IsTrue(paused);
    Py_DECREF(paused);
    if (flag != 0)
        return flag < 0 ? NULL : writelines_python(st, self, chunks);
    PyObject *sock = get_field(st, self, F_SOCK);
    if (sock == NULL)
        return NULL;
    zl_loop *L = transport_loop(st, self);
#ifdef Py_GIL_DISABLED
    if (L != NULL && zl_check_owner(L) < 0) { /* as write()'s */
        Py_DECREF(sock);
        return NULL;
    }
#endif
    if (zl_socket_nonblocking_fd(socket_type_of(L), sock) == ZL_NOT_A_SOCKET) {
        Py_DECREF(sock);
        return writelines_python(st, self, chunks);
    }
    zl_sys_gather bufs[ZL_SYS_GATHER_MAX];
    int count = 0;
    size_t total = 0;
    if (!gather_chunks(chunks, bufs, &count, &total)) {
        Py_DECREF(sock);
        return writelines_python(st, self, chunks);
    }
    /* from here to the send no Python code runs: the chunks stay as taken */
    int fd = zl_socket_fd(socket_type_of(L), sock);
    ptrdiff_t n;
    do {
        n = zl_sys_send_gather_nosignal(fd, bufs, count);
    } while (n < 0 && zl_sys_interrupted(zl_sys_error()));
    int err = zl_sys_error();
    Py_DECREF(sock);
    zl_transport_counts *c = counts(L, state_of(st, self));
    if (c != NULL) {
        c->writes++;
        c->write_bytes += n > 0 ? (uint64_t)n : 0;
        c->writes_buffered += (size_t)n != total && (n >= 0 || zl_sys_would_block(err));
    }
    if (n >= 0 && (size_t)n == total)
        Py_RETURN_NONE;
    if (n < 0 && !zl_sys_would_block(err)) {
        zl_sys_raise(err);
        return writelines_after(&st->names, self, chunks, 0, 1);
    }
    return writelines_after(&st->names, self, chunks, n < 0 ? -1 : n, 0);
}
#endif

/* asyncio's is_closing(), which StreamWriter.drain() asks on every call. */
static PyObject *transport_is_closing(PyObject *self, PyObject *unused)
{
    return get_field(transport_state(self), self, F_CLOSING);
}

/* ---- TransportState: zl_transport as a Python object ---- */

static PyObject *state_large_reads(PyObject *self, void *c)
{
    return PyBool_FromLong(((zl_transport *)self)->large_reads);
}

/* kind: which counters of zloopgo.stats() its reads and writes add to,
 * ZL_KIND_TCP (0), ZL_KIND_UNIX (1) or ZL_KIND_OTHER (2); set once by
 * zloopgo's transport from its socket's family. */
static PyObject *state_kind(PyObject *self, void *c)
{
    return PyLong_FromLong(((zl_transport *)self)->kind);
}

static int state_set_kind(PyObject *self, PyObject *v, void *c)
{
    long k = v != NULL ? PyLong_AsLong(v) : -1;
    if (k == -1 && PyErr_Occurred())
        return -1;
    if (k < 0 || k >= ZL_TRANSPORT_KINDS) {
        PyErr_Format(PyExc_ValueError, "kind must be 0 to %d", ZL_TRANSPORT_KINDS - 1);
        return -1;
    }
    ((zl_transport *)self)->kind = (char)k;
    return 0;
}

static PyGetSetDef state_getset[] = {
    /* the last read filled LARGE_READ bytes (tests/test_large_reads.py) */
    {"large_reads", state_large_reads, NULL, NULL, NULL},
    {"kind", state_kind, state_set_kind, NULL, NULL},
    {NULL}};

/* Its own deallocator, which also marks a TransportState of any
 * interpreter's module (state_of): a heap type's instance releases its
 * class. */
static void transport_state_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyType_Slot state_slots[] = {
    {Py_tp_doc, "What zloopgo's native transport methods keep beside asyncio's attributes."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, transport_state_dealloc},
    {Py_tp_getset, state_getset},
    {0, NULL}};

static PyType_Spec state_spec = {"zloopgo._engine.TransportState", sizeof(zl_transport), 0,
                                 Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE, state_slots};

void zl_rx_free(zl_loop *L)
{
    PyMem_RawFree(L->rx.buf);
    L->rx.buf = NULL;
    L->rx.size = 0;
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
#ifdef ZL_SYS_GATHER_MAX
    {"writelines", transport_writelines, METH_O,
     "Write a list of data to the transport (asyncio.WriteTransport.writelines)."},
#endif
    {"is_closing", transport_is_closing, METH_NOARGS,
     "Return True if the transport is closing or closed."},
    {NULL}};

static PyType_Slot fast_slots[] = {
    {Py_tp_doc, "Native per-packet methods for asyncio's socket transport."},
    {Py_tp_methods, fast_methods},
    {0, NULL}};

/* A base of zloopgo's transport class, on asyncio's _FlowControlMixin
 * (zl_native_transport): its instances are made as asyncio makes its
 * transports (object's tp_new, inherited). Mutable as that base is:
 * CPython 3.12+ makes no immutable type on a mutable base. */
static PyType_Spec fast_spec = {"zloopgo._engine.StreamFastPaths", sizeof(zl_native_transport), 0,
                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, fast_slots};

int zl_transport_types_new(PyObject *module, zl_module_state *state)
{
    state->transport_layout = (zl_layout){.n = F_COUNT, .name_at = field_names};
    PyObject *base = zl_flow_control_base();
    if (base == NULL)
        return -1;
    state->stream_fast_paths_type =
        (PyTypeObject *)PyType_FromModuleAndSpec(module, &fast_spec, base);
    Py_DECREF(base);
    if (state->stream_fast_paths_type == NULL ||
        zl_native_base_check(state->stream_fast_paths_type, offsetof(zl_native_transport, state)) <
            0)
        return -1;
    state->transport_state_type =
        (PyTypeObject *)PyType_FromModuleAndSpec(module, &state_spec, NULL);
    return state->transport_state_type == NULL ? -1 : 0;
}
