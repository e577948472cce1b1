/* Name lookups for loop.getaddrinfo() and loop.getnameinfo() off the GIL.
 *
 * On the loop thread, _zl_getaddrinfo/_zl_getnameinfo parse their arguments
 * exactly as CPython's socket module does (same exceptions, same order),
 * submit the lookup to the worker pool (capi/workers.c: at most
 * ZL_LOOKUP_WORKERS lookups at once in the process) and leave a future;
 * nothing crosses into Go per lookup. A worker performs it on its own
 * thread without the GIL — the C library's getaddrinfo/getnameinfo, as
 * socket.getaddrinfo would — and posts the completion to the loop's
 * engine. zl_dispatch then settles every completion: the result becomes
 * exactly the objects socket.getaddrinfo and socket.getnameinfo return
 * (before their enum conversion, which zloopgo/_loop.py does as socket.py
 * does), or their exception.
 *
 * It knows the loop's futures and what a lookup is; nothing of the engine
 * or of how the pool schedules its workers. */
#include "zl.h"
#include <stdlib.h>
#include <string.h>

/* getnameinfo's own refusals, beside the EAI_* codes */
#define ZL_MULTIPLE_ADDRESSES 1000001
#define ZL_IPV4_ARITY 1000002

/* One lookup: the request, filled on the loop thread, and what resolve()
 * leaves for it. The pool's part comes first. */
typedef struct {
    zl_work work;
    /* the request; host and port are malloc'd */
    char *host;
    char *port;
    int32_t kind; /* 0 getaddrinfo, 1 getnameinfo (then flowinfo, scope_id, arity) */
    int32_t family;
    int32_t socktype;
    int32_t proto;
    int32_t flags; /* getaddrinfo's, or getnameinfo's */
    uint32_t flowinfo;
    uint32_t scope_id;
    int32_t arity; /* getnameinfo: how many items the sockaddr tuple had */
    /* the result */
    int code; /* 0, an EAI_* code, or one of the above */
    int err;  /* errno after the call, for EAI_SYSTEM */
    struct addrinfo *res;
    char result_host[NI_MAXHOST];
    char result_serv[NI_MAXSERV];
} lookup;

/* ---- on a worker's thread: no GIL, no Python ---- */

static void name_info(lookup *r)
{
    /* socket.getnameinfo: the host must be numeric; it becomes a sockaddr
     * through getaddrinfo(AI_NUMERICHOST), then getnameinfo runs on it */
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    hints.ai_flags = AI_NUMERICHOST;
    errno = 0;
    r->code = getaddrinfo(r->host, r->port, &hints, &res);
    r->err = errno;
    if (r->code != 0) /* getaddrinfo sets res only when it succeeds */
        // cppcheck-suppress memleak
        return;
    if (res->ai_next != NULL) {
        r->code = ZL_MULTIPLE_ADDRESSES;
    } else if (res->ai_family == AF_INET && r->arity != 2) {
        r->code = ZL_IPV4_ARITY;
    } else {
        if (res->ai_family == AF_INET6) {
            struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)res->ai_addr;
            sin6->sin6_flowinfo = htonl(r->flowinfo);
            sin6->sin6_scope_id = r->scope_id;
        }
        errno = 0;
        r->code = getnameinfo(res->ai_addr, res->ai_addrlen, r->result_host, sizeof r->result_host,
                              r->result_serv, sizeof r->result_serv, r->flags);
        r->err = errno;
    }
    freeaddrinfo(res);
}

static void resolve(zl_work *w)
{
    lookup *r = (lookup *)w;
    if (r->kind == 1) {
        name_info(r);
        return;
    }
    struct addrinfo hints = {0};
    hints.ai_family = r->family;
    hints.ai_socktype = r->socktype;
    hints.ai_protocol = r->proto;
    hints.ai_flags = r->flags;
    errno = 0;
    r->code = getaddrinfo(r->host, r->port, &hints, &r->res);
    r->err = errno;
    if (r->code != 0)
        r->res = NULL;
}

static void lookup_free(lookup *r)
{
    if (r->res != NULL)
        freeaddrinfo(r->res);
    free(r->host);
    free(r->port);
    free(r);
}

/* A lookup whose loop closed before it finished (with the GIL, though it
 * needs none). */
static void discard(zl_work *w) { lookup_free((lookup *)w); }

static const zl_work_kind lookup_kind = {ZL_WORK_LOOKUP, resolve, discard};

/* ---- fork ----
 *
 * fork() while a worker is inside getaddrinfo can leave one of the C
 * library's own locks held in the child, whose next lookup then hangs
 * (glibc's __check_pf, which getaddrinfo calls to sort several answers,
 * holds one across a netlink round trip; a thread of asyncio's default
 * executor has the same hazard, and it hung this project's fork test once
 * on asyncio). So os.fork()'s before-hook holds lookups back and waits, at
 * most FORK_WAIT_NS, for those inside the C library, with the GIL
 * released: the thread that forks waits, no other thread does. A lookup
 * still inside after that is waiting for a DNS server, not holding a lock
 * of the C library's for that long. Inside fork() itself nothing waits
 * (capi/workers.c), so fork() from C (a fork and exec, say) is never
 * delayed. The after-hook in the parent lets held lookups start; the child
 * forgets the pool. */
#define FORK_WAIT_NS INT64_C(250000000)

static PyObject *before_fork(PyObject *mod, PyObject *unused)
{
    Py_BEGIN_ALLOW_THREADS;
    zl_workers_hold(ZL_WORK_LOOKUP, FORK_WAIT_NS);
    Py_END_ALLOW_THREADS;
    Py_RETURN_NONE;
}

static PyObject *after_fork_in_parent(PyObject *mod, PyObject *unused)
{
    zl_workers_unhold(ZL_WORK_LOOKUP);
    Py_RETURN_NONE;
}

static PyMethodDef fork_hooks[] = {
    {"_zl_lookups_before_fork", before_fork, METH_NOARGS, NULL},
    {"_zl_lookups_after_fork", after_fork_in_parent, METH_NOARGS, NULL},
};

/* os.register_at_fork(before=..., after_in_parent=...); nothing where os
 * has none (Windows: no fork, nothing to hold back). */
static int register_fork_hooks(void)
{
    PyObject *os = PyImport_ImportModule("os");
    if (os != NULL && !PyObject_HasAttrString(os, "register_at_fork")) {
        Py_DECREF(os);
        return 0;
    }
    PyObject *reg = os ? PyObject_GetAttrString(os, "register_at_fork") : NULL;
    PyObject *before = reg ? PyCFunction_New(&fork_hooks[0], NULL) : NULL;
    PyObject *after = before ? PyCFunction_New(&fork_hooks[1], NULL) : NULL;
    PyObject *args = after ? PyTuple_New(0) : NULL;
    PyObject *kwargs =
        args ? Py_BuildValue("{sOsO}", "before", before, "after_in_parent", after) : NULL;
    PyObject *r = kwargs ? PyObject_Call(reg, args, kwargs) : NULL;
    Py_XDECREF(r);
    Py_XDECREF(kwargs);
    Py_XDECREF(args);
    Py_XDECREF(after);
    Py_XDECREF(before);
    Py_XDECREF(reg);
    Py_XDECREF(os);
    return r == NULL ? -1 : 0;
}

/* ---- on the loop thread ---- */

/* CPython's set_gaierror. */
static PyObject *lookup_error(const zl_module_state *state, lookup *r)
{
    if (r->code == EAI_SYSTEM) {
        zl_sys_raise(r->err);
        return NULL;
    }
    if (r->code == ZL_MULTIPLE_ADDRESSES) {
        PyErr_SetString(PyExc_OSError, "sockaddr resolved to multiple addresses");
        return NULL;
    }
    if (r->code == ZL_IPV4_ARITY) {
        PyErr_SetString(PyExc_OSError, "IPv4 sockaddr must be 2 tuple");
        return NULL;
    }
    PyObject *v = Py_BuildValue("(is)", r->code, zl_sys_gai_message(r->code));
    if (v != NULL) {
        PyErr_SetObject(state->gaierror, v);
        Py_DECREF(v);
    }
    return NULL;
}

/* CPython's makesockaddr, for what getaddrinfo returns. */
static PyObject *sockaddr_tuple(const struct sockaddr *sa)
{
    char buf[INET6_ADDRSTRLEN];
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
        if (inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf) == NULL)
            return PyErr_SetFromErrno(PyExc_OSError);
        return Py_BuildValue("si", buf, ntohs(a->sin_port));
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
        if (inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf) == NULL)
            return PyErr_SetFromErrno(PyExc_OSError);
        return Py_BuildValue("siII", buf, ntohs(a->sin6_port), ntohl(a->sin6_flowinfo),
                             a->sin6_scope_id);
    }
    return Py_BuildValue("iy#", sa->sa_family, sa->sa_data, (Py_ssize_t)sizeof(sa->sa_data));
}

/* socket.AddressFamily's and socket.SocketKind's members by value: the
 * list socket.getaddrinfo returns carries members where the value is one
 * (socket._intenum_converter), plain ints otherwise. */

static PyObject *member_or_int(PyObject *members, int value)
{
    PyObject *key = PyLong_FromLong(value);
    if (key == NULL)
        return NULL;
    PyObject *member = PyDict_GetItemWithError(members, key);
    if (member != NULL) {
        Py_DECREF(key);
        return Py_NewRef(member);
    }
    return PyErr_Occurred() ? (Py_DECREF(key), NULL) : key;
}

/* socket.getaddrinfo's list: (family, type, proto, canonname, sockaddr). */
static PyObject *addrinfo_list(const zl_module_state *state, struct addrinfo *res)
{
    PyObject *all = PyList_New(0);
    for (struct addrinfo *ai = res; all != NULL && ai != NULL; ai = ai->ai_next) {
        PyObject *addr = sockaddr_tuple(ai->ai_addr);
        PyObject *family = addr ? member_or_int(state->family_members, ai->ai_family) : NULL;
        PyObject *kind = family ? member_or_int(state->kind_members, ai->ai_socktype) : NULL;
        PyObject *one = kind ? Py_BuildValue("OOisO", family, kind, ai->ai_protocol,
                                             ai->ai_canonname ? ai->ai_canonname : "", addr)
                             : NULL;
        Py_XDECREF(addr);
        Py_XDECREF(family);
        Py_XDECREF(kind);
        if (one == NULL || PyList_Append(all, one) < 0)
            Py_CLEAR(all);
        Py_XDECREF(one);
    }
    return all;
}

static PyObject *settle_value(const zl_module_state *state, int kind, lookup *r)
{
    if (r->code != 0)
        return lookup_error(state, r);
    if (kind == 1)
        return Py_BuildValue("ss", r->result_host, r->result_serv);
    return addrinfo_list(state, r->res);
}

/* Sets fut's outcome, a value or an exception, unless it was cancelled
 * meanwhile (as asyncio's wrapping of an executor future does). */
static int settle_future(const zl_names *names, PyObject *fut, PyObject *value, PyObject *exc)
{
    PyObject *done = PyObject_CallMethodNoArgs(fut, names->done);
    int is_done = done ? PyObject_IsTrue(done) : -1;
    Py_XDECREF(done);
    if (is_done != 0)
        return is_done < 0 ? -1 : 0;
    PyObject *r = value != NULL ? PyObject_CallMethodOneArg(fut, names->set_result, value)
                                : PyObject_CallMethodOneArg(fut, names->set_exception, exc);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

void zl_settle_lookups(zl_loop *L, const zl_completion *done, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const zl_completion *c = &done[i];
        lookup *r = (lookup *)(uintptr_t)c->value;
        L->counters.lookups_done++;
        PyObject *key = PyLong_FromUnsignedLongLong(c->token);
#ifdef Py_GIL_DISABLED
        /* one step that gives a new reference: no borrowed entry between
         * the lookup and the delete (docs/architecture.md, "Free-threaded
         * builds") */
        PyObject *entry = NULL;
        if (key && L->lookups.futures)
            (void)PyDict_Pop(L->lookups.futures, key, &entry);
        if (entry != NULL) {
#else
        PyObject *entry =
            key && L->lookups.futures ? PyDict_GetItemWithError(L->lookups.futures, key) : NULL;
        if (entry != NULL) {
            Py_INCREF(entry);
            (void)PyDict_DelItem(L->lookups.futures, key);
#endif
            long kind = PyLong_AsLong(PyTuple_GET_ITEM(entry, 1));
            PyObject *value = settle_value(L->state, (int)kind, r);
            PyObject *exc = value == NULL ? zl_fetch_exception() : NULL;
            if (settle_future(&L->state->names, PyTuple_GET_ITEM(entry, 0), value, exc) < 0)
                PyErr_WriteUnraisable((PyObject *)L);
            Py_XDECREF(value);
            Py_XDECREF(exc);
            Py_DECREF(entry);
        }
        if (PyErr_Occurred())
            PyErr_WriteUnraisable((PyObject *)L);
        Py_XDECREF(key);
        lookup_free(r);
    }
    zl_workers_drain(zl_interpreter_id());
}

/* Records fut under a new token and submits r, which the pool owns from
 * then on; on failure r is freed. */
static PyObject *enqueue(zl_loop *L, lookup *r, PyObject *fut, int kind)
{
    /* a worker is a goroutine: a child forked after the engine started
     * must not start or wake one */
    if (zl_check_not_forked() < 0 || zl_check_closed(L) < 0)
        goto fail;
    if (L->lookups.futures == NULL && (L->lookups.futures = PyDict_New()) == NULL)
        goto fail;
    r->work.kind = &lookup_kind;
    r->work.token = ++L->lookups.counter;
    r->work.engine = L->engine;
    r->work.owner = zl_interpreter_id();
    r->kind = kind;
    PyObject *key = PyLong_FromUnsignedLongLong(r->work.token);
    PyObject *entry = key ? Py_BuildValue("(Oi)", fut, kind) : NULL;
    int ok = entry && PyDict_SetItem(L->lookups.futures, key, entry) == 0;
    Py_XDECREF(key);
    Py_XDECREF(entry);
    if (!ok)
        goto fail;
    zl_work_submit(&r->work);
    Py_RETURN_NONE;
fail:
    lookup_free(r);
    return NULL;
}

static char *copy_string(const char *s)
{
    if (s == NULL)
        return NULL;
    char *c = strdup(s);
    if (c == NULL)
        PyErr_NoMemory();
    return c;
}

/* A new lookup, or NULL with MemoryError. */
static lookup *lookup_new(void)
{
    lookup *r = calloc(1, sizeof *r);
    if (r == NULL)
        PyErr_NoMemory();
    return r;
}

/* Submits r unless building it failed (an exception is set: r is freed). */
static PyObject *enqueue_or_free(zl_loop *L, lookup *r, PyObject *fut, int kind)
{
    if (PyErr_Occurred()) {
        lookup_free(r);
        return NULL;
    }
    return enqueue(L, r, fut, kind);
}

/* _zl_getaddrinfo(fut, host, port, family=0, type=0, proto=0, flags=0):
 * the arguments as socket.getaddrinfo takes them (socket_getaddrinfo in
 * CPython's Modules/socketmodule.c, same checks in the same order). */
PyObject *zl_loop_getaddrinfo(zl_loop *L, PyObject *args)
{
    PyObject *fut, *hobj, *pobj, *idna = NULL;
    int family = 0, socktype = 0, protocol = 0, flags = 0;
    if (!PyArg_ParseTuple(args, "OOO|iiii:getaddrinfo", &fut, &hobj, &pobj, &family, &socktype,
                          &protocol, &flags))
        return NULL;
    const char *hptr = NULL, *pptr = NULL;
    char pbuf[30];
    if (hobj == Py_None) {
        hptr = NULL;
    } else if (PyUnicode_Check(hobj)) {
        idna = PyUnicode_AsEncodedString(hobj, "idna", NULL);
        if (idna == NULL)
            return NULL;
        hptr = PyBytes_AsString(idna);
    } else if (PyBytes_Check(hobj)) {
        hptr = PyBytes_AsString(hobj);
    } else {
        PyErr_SetString(PyExc_TypeError, "getaddrinfo() argument 1 must be string or None");
        return NULL;
    }
    PyObject *port_text = NULL;
#if PY_VERSION_HEX >= 0x030E0000
    /* 3.14 takes any object with __index__ (a bool, an int subclass) as a number */
    int port_is_int = PyLong_CheckExact(pobj) || (pobj != Py_None && !PyUnicode_Check(pobj) &&
                                                  !PyBytes_Check(pobj) && PyIndex_Check(pobj));
#else
    int port_is_int = PyLong_CheckExact(pobj);
#endif
    if (port_is_int) {
#if PY_VERSION_HEX >= 0x030C0000
        /* 3.12 passes an int of any size on as its decimal text. */
        (void)pbuf;
        PyObject *index = PyNumber_Index(pobj);
        port_text = index ? PyObject_Str(index) : NULL;
        Py_XDECREF(index);
        pptr = port_text ? PyUnicode_AsUTF8(port_text) : NULL;
#else
        /* Before 3.12 an int must fit a C long (OverflowError otherwise). */
        long value = PyLong_AsLong(pobj);
        if (value == -1 && PyErr_Occurred()) {
            Py_XDECREF(idna);
            return NULL;
        }
        PyOS_snprintf(pbuf, sizeof pbuf, "%ld", value);
        pptr = pbuf;
#endif
    } else if (PyUnicode_Check(pobj)) {
        pptr = PyUnicode_AsUTF8(pobj);
    } else if (PyBytes_Check(pobj)) {
        pptr = PyBytes_AS_STRING(pobj);
    } else if (pobj != Py_None) {
        PyErr_SetString(PyExc_OSError, "Int or String expected");
        Py_XDECREF(idna);
        return NULL;
    }
    if (pobj != Py_None && pptr == NULL) {
        Py_XDECREF(idna);
        Py_XDECREF(port_text);
        return NULL;
    }
    lookup *r = lookup_new();
    if (r != NULL) {
        r->family = family;
        r->socktype = socktype;
        r->proto = protocol;
        r->flags = flags;
        r->host = copy_string(hptr);
        r->port = r->host || !hptr ? copy_string(pptr) : NULL;
    }
    Py_XDECREF(idna);
    Py_XDECREF(port_text);
    return r == NULL ? NULL : enqueue_or_free(L, r, fut, 0);
}

/* _zl_getnameinfo(fut, sockaddr, flags): socket.getnameinfo's argument
 * checks (socket_getnameinfo in Modules/socketmodule.c). */
PyObject *zl_loop_getnameinfo(zl_loop *L, PyObject *args)
{
    PyObject *fut, *sa;
    int flags;
    if (!PyArg_ParseTuple(args, "OOi:getnameinfo", &fut, &sa, &flags))
        return NULL;
    if (!PyTuple_Check(sa)) {
        PyErr_SetString(PyExc_TypeError, "getnameinfo() argument 1 must be a tuple");
        return NULL;
    }
    const char *hostp;
    int port;
    unsigned int flowinfo = 0, scope_id = 0;
    if (!PyArg_ParseTuple(sa, "si|II;getnameinfo(): illegal sockaddr argument", &hostp, &port,
                          &flowinfo, &scope_id))
        return NULL;
    if (flowinfo > 0xfffff) {
        PyErr_SetString(PyExc_OverflowError, "getnameinfo(): flowinfo must be 0-1048575.");
        return NULL;
    }
    char pbuf[30];
    PyOS_snprintf(pbuf, sizeof pbuf, "%d", port);
    lookup *r = lookup_new();
    if (r == NULL)
        return NULL;
    r->flags = flags;
    r->flowinfo = flowinfo;
    r->scope_id = scope_id;
    r->arity = (int32_t)PyTuple_GET_SIZE(sa);
    r->host = copy_string(hostp);
    r->port = r->host ? copy_string(pbuf) : NULL;
    return enqueue_or_free(L, r, fut, 1);
}

/* _zl_lookups_in_flight(): how many futures still wait for a lookup. */
PyObject *zl_loop_lookups_in_flight(zl_loop *L, PyObject *unused)
{
    return PyLong_FromSsize_t(L->lookups.futures ? PyDict_GET_SIZE(L->lookups.futures) : 0);
}

/* Forgets the loop's lookups: those still queued or in flight finish on
 * their worker, whose post the closed engine refuses (the pool frees
 * them). */
void zl_drop_lookups(zl_loop *L) { Py_CLEAR(L->lookups.futures); }

int zl_lookups_traverse(zl_loop *L, visitproc visit, void *arg)
{
    Py_VISIT(L->lookups.futures);
    return 0;
}

/* {member.value: member} for every member of enum class name in socket. */
static PyObject *members_by_value(PyObject *socket, const char *name)
{
    PyObject *cls = PyObject_GetAttrString(socket, name);
    PyObject *it = cls ? PyObject_GetIter(cls) : NULL;
    PyObject *members = it ? PyDict_New() : NULL;
    PyObject *m;
    while (members != NULL && (m = PyIter_Next(it)) != NULL) {
        PyObject *value = PyNumber_Index(m);
        if (value == NULL || PyDict_SetItem(members, value, m) < 0)
            Py_CLEAR(members);
        Py_XDECREF(value);
        Py_DECREF(m);
    }
    if (PyErr_Occurred())
        Py_CLEAR(members);
    Py_XDECREF(it);
    Py_XDECREF(cls);
    return members;
}

int zl_resolver_init(void)
{
    if (register_fork_hooks() < 0)
        return -1;
    return 0;
}

int zl_resolver_state_new(zl_module_state *state)
{
    PyObject *socket = PyImport_ImportModule("socket");
    if (socket == NULL)
        return -1;
    state->gaierror = PyObject_GetAttrString(socket, "gaierror");
    state->family_members = state->gaierror ? members_by_value(socket, "AddressFamily") : NULL;
    state->kind_members = state->family_members ? members_by_value(socket, "SocketKind") : NULL;
    Py_DECREF(socket);
    return state->kind_members != NULL ? 0 : -1;
}
