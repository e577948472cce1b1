/* A socket object as the native paths read it: the descriptor and the
 * timeout a socket.socket holds now, read from its C layout, as its own
 * recv, send and fileno read them at the moment of each call.
 *
 * Every native path that makes a system call on a socket the program
 * handed over (a transport's read and write, a datagram's receive and
 * send, the loop's sock_* methods) asks here at the moment of the call,
 * after any Python code that could have run: a descriptor number kept
 * from earlier could by then belong to another socket (the transport
 * closed itself, the program closed the socket, a signal handler did),
 * and bytes would reach the wrong one. Asked here, a closed socket reads
 * -1 and the call fails with EBADF, as the socket's own method does.
 *
 * The layout is CPython's PySocketSockObject (zl_socket_head, zl.h, whose
 * inline accessors read it), which the self-test here checks at import;
 * without it, or for anything but a plain socket.socket, callers call the
 * socket's methods. It knows the socket module; nothing of loops,
 * transports or the engine. */
#include "zl.h"

int zl_socket_layout_known;

/* settimeout(value) on sock, then whether the layout's timeout reads
 * `expect` (any negative number for a negative expect). */
static int timeout_reads(PyObject *sock, PyObject *value, int64_t expect)
{
    PyObject *r = PyObject_CallMethod(sock, "settimeout", "O", value);
    Py_XDECREF(r);
    int64_t t = ((zl_socket_head *)sock)->sock_timeout;
    return r != NULL && (expect < 0 ? t < 0 : t == expect);
}

/* Whether zl_socket_head is where this CPython keeps a socket's descriptor,
 * family, type and timeout: read off a fresh UDP socket set three ways,
 * and its descriptor off it once closed. */
static int check_layout(PyTypeObject *socket_type)
{
    if (socket_type->tp_basicsize < (Py_ssize_t)sizeof(zl_socket_head))
        return 0;
    PyObject *sock = PyObject_CallFunction((PyObject *)socket_type, "ii", AF_INET, SOCK_DGRAM);
    if (sock == NULL) {
        PyErr_Clear();
        return 0;
    }
    zl_socket_head *h = (zl_socket_head *)sock;
    PyObject *fileno = PyObject_CallMethod(sock, "fileno", NULL);
    PyObject *half = PyFloat_FromDouble(2.5), *zero = PyFloat_FromDouble(0.0);
    int ok = fileno != NULL && half != NULL && zero != NULL &&
             PyLong_AsLong(fileno) == h->sock_fd && h->sock_family == AF_INET &&
             h->sock_type == SOCK_DGRAM && timeout_reads(sock, half, 2500000000) &&
             timeout_reads(sock, Py_None, -1) && timeout_reads(sock, zero, 0);
    Py_XDECREF(fileno);
    Py_XDECREF(half);
    Py_XDECREF(zero);
    PyObject *r = PyObject_CallMethod(sock, "close", NULL);
    ok = ok && r != NULL && h->sock_fd == -1;
    Py_XDECREF(r);
    Py_DECREF(sock);
    PyErr_Clear();
    return ok;
}

PyObject *zl_socket_layout_ok(PyObject *mod, PyObject *unused)
{
    return PyBool_FromLong(zl_socket_layout_known);
}

/* The importing interpreter's socket.socket, a new reference, or NULL
 * with an exception set. */
static PyTypeObject *socket_class(void)
{
    PyObject *m = PyImport_ImportModule("socket");
    PyObject *t = m != NULL ? PyObject_GetAttrString(m, "socket") : NULL;
    Py_XDECREF(m);
    if (t == NULL)
        return NULL;
    if (!PyType_Check(t)) {
        Py_DECREF(t);
        PyErr_SetString(PyExc_TypeError, "socket.socket must be a class");
        return NULL;
    }
    return (PyTypeObject *)t;
}

/* The layout is the interpreter binary's: tested once, on the first
 * importing interpreter's class. */
int zl_sockets_init(void)
{
    PyTypeObject *t = socket_class();
    if (t == NULL)
        return -1;
    zl_socket_layout_known = check_layout(t);
    Py_DECREF(t);
    return 0;
}

int zl_sockets_state_new(zl_module_state *state)
{
    state->socket_type = socket_class();
    return state->socket_type == NULL ? -1 : 0;
}
