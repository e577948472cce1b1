/* DatagramFastPaths: native versions of the two methods of asyncio's
 * datagram transport that run for every datagram, _read_ready and
 * sendto, for the cases that make up a UDP server's traffic. zloopgo's
 * datagram transport puts this type first in its bases; every other case
 * goes to the Python methods it names (_zl_read_ready_python, asyncio's
 * own _zl_sendto_python), so behaviour and messages stay asyncio's.
 *
 * _read_ready, for an IPv4 or IPv6 socket (the Python side gives only
 * those a DatagramState) and an int max_size: recvfrom
 * into the loop's receive buffer, the datagram copied into a bytes of its
 * size and the sender's address made as the socket module makes it, then
 * protocol.datagram_received(data, addr), or error_received(exc) for an
 * OSError, as asyncio does.
 *
 * sendto, for a non-empty bytes with nothing buffered and the connection
 * not lost: send() on a connected socket, sendto() to the address the
 * last datagram came from (given as that tuple, or one equal to it item
 * for item, of the same types) on an unconnected one. Both have no other
 * outcome than asyncio's: an OSError goes to error_received; a send the
 * kernel cannot take now (EAGAIN, EINTR) goes to asyncio's sendto, which
 * tries again and buffers.
 *
 * Both make their system call on the descriptor the transport's socket
 * holds at that moment (sockets.c), never on the number kept in
 * _sock_fd, which another socket may own by then; a transport whose _sock
 * is gone or not a plain non-blocking socket takes asyncio's methods.
 *
 * It knows asyncio's datagram transport attributes by name and the loop's
 * receive buffer (transport.c); nothing of the engine. */
#include "zl.h"

/* zloopgo's datagram class keeps these attributes in __slots__ (_extra is
 * asyncio's BaseTransport's own slot); set_datagram_layout() records their
 * offsets, so reading one is a load (zl_layout, util.c). */
enum { D_CONN_LOST, D_SOCK, D_PROTOCOL, D_ADDRESS, D_BUFFER, D_EXTRA, D_LOOP, D_STATE, D_COUNT };
#define NAME_AT(name) offsetof(zl_names, name)
static const size_t field_names[D_COUNT] = {
    NAME_AT(_conn_lost), NAME_AT(_sock),  NAME_AT(_protocol), NAME_AT(_address),
    NAME_AT(_buffer),    NAME_AT(_extra), NAME_AT(_loop),     NAME_AT(_zl_dgram)};
_Static_assert(D_COUNT <= ZL_LAYOUT_MAX, "too many datagram fields for a zl_layout");

/* The state of the module whose DatagramFastPaths self's class derives
 * from, which holds the layout, kept in self: every native method's first
 * step. */
static inline zl_module_state *datagram_state(PyObject *self)
{
    return zl_state_of_native(self, &((zl_native_transport *)self)->state);
}

/* Once per module object, as set_transport_layout (transport.c). */
PyObject *zl_set_datagram_layout(PyObject *mod, PyObject *cls)
{
    zl_module_state *state = PyModule_GetState(mod);
    return zl_set_layout_once(mod, "set_datagram_layout", &state->datagram_layout, cls);
}

/* The most a native read takes: larger max_size values go to Python. */
#define MAX_NATIVE_READ (16 * 1024 * 1024)

/* DatagramState: what the native methods keep per transport, the address
 * of the last datagram received, as the kernel gave it and as the tuple
 * handed to datagram_received. */
typedef struct {
    PyObject_HEAD
    struct sockaddr_storage last;
    socklen_t last_len;
    PyObject *last_addr; /* the tuple, or NULL before the first datagram */
} zl_datagram;

/* Its own deallocator, which also marks a DatagramState of any
 * interpreter's module (state_of): a heap type's instance releases its
 * class. */
static void datagram_state_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    Py_CLEAR(((zl_datagram *)self)->last_addr);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyType_Slot state_slots[] = {
    {Py_tp_doc, "What a datagram transport's native methods keep: the last sender's address."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, datagram_state_dealloc},
    {0, NULL}};

static PyType_Spec state_spec = {"zloopgo._engine.DatagramState", sizeof(zl_datagram), 0,
                                 Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE, state_slots};

/* self's zloopgo loop, from its slot (borrowed: the slot holds it), or
 * NULL (no error set) when the slot is unset or holds no zloopgo loop. */
static inline zl_loop *slot_loop(const zl_module_state *st, PyObject *self)
{
    PyObject *loop = zl_layout_slot(&st->datagram_layout, self, D_LOOP);
    return loop != NULL && zl_is_loop(loop) ? (zl_loop *)loop : NULL;
}

/* The socket.socket of L's interpreter, whose sockets alone the native
 * calls serve: NULL (none) without a zloopgo loop. */
static inline const PyTypeObject *socket_type_of(const zl_loop *L)
{
    return L != NULL ? L->state->socket_type : NULL;
}

/* The transport's DatagramState (a new reference), known by its
 * deallocator, or NULL (no error set) when it has none. */
ZL_ALWAYS_INLINE zl_datagram *state_of(const zl_module_state *st, PyObject *self)
{
    PyObject *s = zl_layout_get(&st->datagram_layout, self, D_STATE);
    if (s != NULL && Py_TYPE(s)->tp_dealloc == datagram_state_dealloc)
        return (zl_datagram *)s;
    Py_XDECREF(s);
    PyErr_Clear();
    return NULL;
}

/* v (a new reference, or NULL with an exception set), which is released,
 * as a C long in *out: 1, 0 if it is not an exact int (or is out of
 * range), -1 with an exception set. */
static int exact_long(PyObject *v, long *out)
{
    if (v == NULL)
        return -1;
    int ok = zl_exact_long(v, out);
    Py_DECREF(v);
    return ok;
}

/* A tuple of n new references (NULL with an exception set if any is
 * NULL, releasing the others), built without Py_BuildValue's parse of a
 * format string for every datagram. */
static PyObject *tuple_of(int n, PyObject **items)
{
    PyObject *t = NULL;
    int complete = 1;
    for (int i = 0; i < n; i++)
        complete = complete && items[i] != NULL;
    if (complete)
        t = PyTuple_New(n);
    for (int i = 0; i < n; i++) {
        if (t != NULL)
            PyTuple_SET_ITEM(t, i, items[i]); /* steals it */
        else
            Py_XDECREF(items[i]);
    }
    return t;
}

/* The address tuple the socket module makes for ss, or NULL with an
 * exception set; Py_None for an empty address. */
static PyObject *address_of(const struct sockaddr_storage *ss, socklen_t len)
{
    char host[INET6_ADDRSTRLEN];
    if (len == 0)
        Py_RETURN_NONE;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        if (inet_ntop(AF_INET, &a->sin_addr, host, sizeof host) == NULL) {
            zl_sys_raise(zl_sys_error());
            return NULL;
        }
        PyObject *items[] = {PyUnicode_FromString(host), PyLong_FromLong(ntohs(a->sin_port))};
        return tuple_of(2, items);
    }
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
    if (inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host) == NULL) {
        zl_sys_raise(zl_sys_error());
        return NULL;
    }
    PyObject *items[] = {PyUnicode_FromString(host), PyLong_FromLong(ntohs(a->sin6_port)),
                         PyLong_FromUnsignedLong(ntohl(a->sin6_flowinfo)),
                         PyLong_FromUnsignedLong(a->sin6_scope_id)};
    return tuple_of(4, items);
}

/* The address tuple of the datagram just received from ss (a new
 * reference, or NULL with an exception set), kept in d as the last
 * sender's. A datagram from the same sockaddr as the last one, byte for
 * byte (a client's every datagram to a server, a server's every reply),
 * gets the very tuple made for that one: address_of would make an equal
 * one, of the same types (only `is` could tell them apart; both are
 * immutable), and sendto finds it by identity. */
static PyObject *sender_address(zl_datagram *d, const struct sockaddr_storage *ss, socklen_t len)
{
    if (d->last_addr != NULL && len == d->last_len && memcmp(ss, &d->last, len) == 0)
        return Py_NewRef(d->last_addr);
    PyObject *addr = address_of(ss, len);
    if (addr == NULL)
        return NULL;
    memcpy(&d->last, ss, len);
    d->last_len = len;
    Py_XSETREF(d->last_addr, Py_NewRef(addr));
    return addr;
}

/* After an OSError (set) from the socket: self._protocol.error_received(exc),
 * inside the handling of exc, as asyncio's `except OSError as exc:`. */
static PyObject *to_error_received(const zl_module_state *st, PyObject *self)
{
    PyObject *exc = zl_fetch_exception();
    PyObject *protocol = zl_layout_get(&st->datagram_layout, self, D_PROTOCOL);
    PyObject *r =
        protocol != NULL ? zl_call_handling(protocol, st->names.error_received, exc, NULL) : NULL;
    Py_XDECREF(protocol);
    Py_DECREF(exc);
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

/* After any other exception (set) of the receive: self._fatal_error(exc,
 * message), as asyncio's `except BaseException as exc:`. */
static PyObject *to_fatal_error(const zl_module_state *st, PyObject *self)
{
    PyObject *exc = zl_fetch_exception();
    PyObject *r =
        zl_call_handling(self, st->names._fatal_error, exc, st->names.msg_datagram_read_error);
    Py_DECREF(exc);
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

static PyObject *read_python(const zl_module_state *st, PyObject *self)
{
    return PyObject_CallMethodNoArgs(self, st->names._zl_read_ready_python);
}

static PyObject *dg_read_ready(PyObject *self, PyObject *unused)
{
    const zl_module_state *st = datagram_state(self);
    int lost = zl_layout_true(&st->datagram_layout, self, D_CONN_LOST);
    if (lost != 0)
        return lost < 0 ? NULL : Py_NewRef(Py_None);
    /* asyncio's self._sock.recvfrom(self.max_size): the socket first */
    PyObject *sock = zl_layout_get(&st->datagram_layout, self, D_SOCK);
    if (sock == NULL)
        return NULL;
    long max_size;
    /* the loop dispatching this read: alive until it returns */
    zl_loop *L = slot_loop(st, self);
    const PyTypeObject *socket_type = socket_type_of(L);
    int ok = zl_socket_nonblocking_fd(socket_type, sock) != ZL_NOT_A_SOCKET
                 ? exact_long(PyObject_GetAttr(self, st->names.max_size), &max_size)
                 : 0;
    zl_datagram *d =
        ok > 0 && max_size > 0 && max_size <= MAX_NATIVE_READ ? state_of(st, self) : NULL;
    if (d == NULL) {
        Py_DECREF(sock);
        return ok < 0 ? NULL : read_python(st, self);
    }
    /* the descriptor the socket holds now, after max_size's lookup */
    int fd = zl_socket_fd(socket_type, sock);
    Py_DECREF(sock);
    char *own, *into = zl_rx_take(L, (size_t)max_size, &own);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    ptrdiff_t n = -1;
    int err = 0;
    if (into != NULL) {
        do {
            len = sizeof ss;
            n = zl_sys_recvfrom(fd, into, (size_t)max_size, &ss, &len);
        } while (n < 0 && zl_sys_interrupted(zl_sys_error()));
        err = zl_sys_error();
    }
    PyObject *data = n >= 0 ? PyBytes_FromStringAndSize(into, n) : NULL;
    if (into != NULL)
        zl_rx_give_back(L, own);
    if (into == NULL || (n >= 0 && data == NULL)) { /* MemoryError, as recvfrom raises it */
        Py_DECREF(d);
        return to_fatal_error(st, self);
    }
    if (n < 0) {
        Py_DECREF(d);
        if (zl_sys_would_block(err))
            Py_RETURN_NONE;
        zl_sys_raise(err);
        return to_error_received(st, self);
    }
    PyObject *addr = sender_address(d, &ss, len);
    Py_DECREF(d);
    if (addr == NULL) {
        Py_DECREF(data);
        return to_fatal_error(st, self);
    }
    PyObject *protocol = zl_layout_get(&st->datagram_layout, self, D_PROTOCOL);
    PyObject *args[] = {protocol, data, addr}; /* protocol.datagram_received(data, addr) */
    PyObject *r = protocol != NULL
                      ? PyObject_VectorcallMethod(st->names.datagram_received, args, 3, NULL)
                      : NULL;
    Py_XDECREF(protocol);
    Py_DECREF(data);
    Py_DECREF(addr);
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

/* a and the tuple address_of made hold the same values, of the same exact
 * types item for item: sending to a is sending to that sockaddr. */
static int same_address(PyObject *a, PyObject *made)
{
    if (a == made)
        return 1;
    if (!PyTuple_CheckExact(a) || PyTuple_GET_SIZE(a) != PyTuple_GET_SIZE(made))
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(a); i++) {
        PyObject *x = PyTuple_GET_ITEM(a, i), *y = PyTuple_GET_ITEM(made, i);
        if (Py_TYPE(x) != Py_TYPE(y))
            return 0;
        int eq = PyUnicode_CheckExact(x) ? PyUnicode_Compare(x, y) == 0
                                         : PyObject_RichCompareBool(x, y, Py_EQ) == 1;
        if (PyErr_Occurred())
            PyErr_Clear();
        if (!eq)
            return 0;
    }
    return 1;
}

static PyObject *sendto_python(const zl_module_state *st, PyObject *self, PyObject *const *args,
                               Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *method = PyObject_GetAttr(self, st->names._zl_sendto_python);
    if (method == NULL)
        return NULL;
    PyObject *r = PyObject_Vectorcall(method, args, (size_t)nargs, kwnames);
    Py_DECREF(method);
    return r;
}

/* Whether the fast path may send: 1 yes, with *connected, and for an
 * unconnected socket the state holding the destination in *d (a new
 * reference); 0 no (asyncio's sendto decides); -1 with an exception set.
 * addr is what the caller passed (None if nothing). */
static int may_send(const zl_module_state *st, PyObject *self, PyObject *addr, int *connected,
                    zl_datagram **d)
{
    *d = NULL;
    PyObject *address = zl_layout_get(&st->datagram_layout, self, D_ADDRESS);
    int bound = address != NULL ? PyObject_IsTrue(address) : -1;
    int other = bound > 0 && addr != Py_None && addr != address; /* asyncio compares it */
    Py_XDECREF(address);
    if (bound < 0 || other)
        return bound < 0 ? -1 : 0;
    int lost = zl_layout_true(&st->datagram_layout, self, D_CONN_LOST),
        buffered = lost == 0 ? zl_layout_true(&st->datagram_layout, self, D_BUFFER) : 0;
    if (lost != 0 || buffered != 0)
        return lost < 0 || buffered < 0 ? -1 : 0;
    PyObject *extra = zl_layout_get(&st->datagram_layout, self, D_EXTRA);
#ifdef Py_GIL_DISABLED
    /* a strong reference from the dictionary's own lookup: another thread
     * may set _extra['peername'], and free the old value, meanwhile */
    PyObject *peer = NULL;
    if (extra != NULL && PyDict_CheckExact(extra))
        PyDict_GetItemRef(extra, st->names.peername, &peer);
    *connected = peer != NULL ? PyObject_IsTrue(peer) : -1;
    Py_XDECREF(peer);
#else
    PyObject *peer = extra != NULL && PyDict_CheckExact(extra)
                         ? PyDict_GetItemWithError(extra, st->names.peername) /* borrowed */
                         : NULL;
    *connected = peer != NULL ? PyObject_IsTrue(peer) : -1;
#endif
    Py_XDECREF(extra);
    if (*connected < 0) {
        PyErr_Clear(); /* no peername key, or not a dict: asyncio's own error */
        return 0;
    }
    if (*connected)
        return 1;
    if (bound)
        return 0; /* an address of its own but no peer: asyncio's sendto */
    *d = state_of(st, self);
    if (*d != NULL && (*d)->last_addr != NULL && same_address(addr, (*d)->last_addr))
        return 1;
    Py_CLEAR(*d);
    return 0;
}

static PyObject *dg_sendto(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    const zl_module_state *st = datagram_state(self);
    if (kwnames != NULL || nargs < 1 || nargs > 2 || !PyBytes_CheckExact(args[0]) ||
        PyBytes_GET_SIZE(args[0]) == 0)
        return sendto_python(st, self, args, nargs, kwnames);
    PyObject *data = args[0];
    int connected = 0;
    zl_datagram *d = NULL;
    int ok = may_send(st, self, nargs == 2 ? args[1] : Py_None, &connected, &d);
    /* asyncio sends through self._sock: None once the transport closed
     * itself after flushing its buffer (_conn_lost stays 0 then, and
     * _sock_fd may name another socket by now) and a socket the native
     * send does not serve take asyncio's sendto, which fails or sends */
    PyObject *sock = ok > 0 ? zl_layout_get(&st->datagram_layout, self, D_SOCK) : NULL;
    int fd = sock != NULL ? zl_socket_nonblocking_fd(socket_type_of(slot_loop(st, self)), sock)
                          : ZL_NOT_A_SOCKET;
    Py_XDECREF(sock);
    if (ok > 0 && (sock == NULL || fd == ZL_NOT_A_SOCKET)) {
        ok = sock == NULL ? -1 : 0;
        Py_CLEAR(d);
    }
    if (ok <= 0)
        return ok < 0 ? NULL : sendto_python(st, self, args, nargs, kwnames);
#ifdef Py_GIL_DISABLED
    /* the transport is its loop thread's (zl_check_owner) */
    const zl_loop *owner = slot_loop(st, self);
    if (owner != NULL && zl_check_owner(owner) < 0) {
        Py_XDECREF(d);
        return NULL;
    }
#endif
    ptrdiff_t n;
    if (connected)
        n = zl_sys_send(fd, PyBytes_AS_STRING(data), (size_t)PyBytes_GET_SIZE(data));
    else
        n = zl_sys_sendto(fd, PyBytes_AS_STRING(data), (size_t)PyBytes_GET_SIZE(data), &d->last,
                          d->last_len);
    int err = zl_sys_error();
    Py_XDECREF(d);
    if (n >= 0)
        Py_RETURN_NONE;
    if (zl_sys_would_block(err) || zl_sys_interrupted(err))
        return sendto_python(st, self, args, nargs, kwnames); /* tries again, buffers */
    zl_sys_raise(err);
    return to_error_received(st, self);
}

static PyMethodDef dg_methods[] = {
    {"_read_ready", (PyCFunction)dg_read_ready, METH_NOARGS,
     "Receive one datagram and hand it to the protocol (asyncio's _read_ready)."},
    {"sendto", (PyCFunction)(void (*)(void))dg_sendto, METH_FASTCALL | METH_KEYWORDS,
     "sendto(data, addr=None)\n--\n\nSend data to addr (asyncio's DatagramTransport.sendto)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot dg_slots[] = {
    {Py_tp_doc, "Native per-datagram methods for asyncio's datagram transport."},
    {Py_tp_methods, dg_methods},
    {0, NULL}};

/* A base of zloopgo's datagram transport class, on asyncio's
 * _FlowControlMixin (zl_native_transport): its instances are made as
 * asyncio makes its transports (object's tp_new, inherited). Mutable as
 * that base is: CPython 3.12+ makes no immutable type on a mutable base. */
static PyType_Spec dg_spec = {"zloopgo._engine.DatagramFastPaths", sizeof(zl_native_transport), 0,
                              Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, dg_slots};

int zl_datagram_types_new(PyObject *module, zl_module_state *state)
{
    state->datagram_layout = (zl_layout){.n = D_COUNT, .name_at = field_names};
    PyObject *base = zl_flow_control_base();
    if (base == NULL)
        return -1;
    state->datagram_fast_paths_type =
        (PyTypeObject *)PyType_FromModuleAndSpec(module, &dg_spec, base);
    Py_DECREF(base);
    if (state->datagram_fast_paths_type == NULL ||
        zl_native_base_check(state->datagram_fast_paths_type,
                             offsetof(zl_native_transport, state)) < 0)
        return -1;
    state->datagram_state_type =
        (PyTypeObject *)PyType_FromModuleAndSpec(module, &state_spec, NULL);
    return state->datagram_state_type == NULL ? -1 : 0;
}
