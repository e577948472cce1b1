/* Name lookups for loop.getaddrinfo() and loop.getnameinfo() off the GIL.
 *
 * On the loop thread, _zl_getaddrinfo/_zl_getnameinfo parse their arguments
 * exactly as CPython's socket module does (same exceptions, same order),
 * put a request on the process-wide queue below and leave a future; nothing
 * crosses into Go per lookup (only starting one of the at most
 * ZL_RESOLVER_WORKERS workers does). A worker goroutine (capi/resolver.go)
 * waits in zl_resolver_next for a request, performs it here on its own
 * thread without the GIL — the C library's getaddrinfo/getnameinfo, as
 * socket.getaddrinfo would — and posts the result to the loop's engine.
 * zl_dispatch then settles every completion: the result becomes exactly
 * the objects socket.getaddrinfo and socket.getnameinfo return (before
 * their enum conversion, which zloopgo/_loop.py does as socket.py does),
 * or their exception.
 *
 * It knows the loop's futures and the queue; nothing of the engine. */
#include "zl.h"
#include "_cgo_export.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* getnameinfo's own refusals, beside the EAI_* codes */
#define ZL_MULTIPLE_ADDRESSES 1000001
#define ZL_IPV4_ARITY 1000002

/* What resolve() leaves for the loop thread. */
typedef struct {
    int code; /* 0, an EAI_* code, or one of the above */
    int err;  /* errno after the call, for EAI_SYSTEM */
    struct addrinfo *res;
    char host[NI_MAXHOST];
    char serv[NI_MAXSERV];
} lookup_result;

/* ---- on a resolver worker's thread: no GIL, no Python ---- */

static void name_info(const zl_lookup *req, lookup_result *r)
{
    /* socket.getnameinfo: the host must be numeric; it becomes a sockaddr
     * through getaddrinfo(AI_NUMERICHOST), then getnameinfo runs on it */
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    hints.ai_flags = AI_NUMERICHOST;
    errno = 0;
    r->code = getaddrinfo(req->host, req->port, &hints, &res);
    r->err = errno;
    if (r->code != 0) /* getaddrinfo sets res only when it succeeds */
        // cppcheck-suppress memleak
        return;
    if (res->ai_next != NULL) {
        r->code = ZL_MULTIPLE_ADDRESSES;
    } else if (res->ai_family == AF_INET && req->arity != 2) {
        r->code = ZL_IPV4_ARITY;
    } else {
        if (res->ai_family == AF_INET6) {
            struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)res->ai_addr;
            sin6->sin6_flowinfo = htonl(req->flowinfo);
            sin6->sin6_scope_id = req->scope_id;
        }
        errno = 0;
        r->code = getnameinfo(res->ai_addr, res->ai_addrlen, r->host, sizeof r->host, r->serv,
                              sizeof r->serv, req->flags);
        r->err = errno;
    }
    freeaddrinfo(res);
}

static void resolve(const zl_lookup *req, zl_completion *out)
{
    out->token = req->token;
    out->status = 0;
    lookup_result *r = calloc(1, sizeof *r);
    out->value = (uint64_t)(uintptr_t)r;
    if (r == NULL)
        return; /* settled as a MemoryError */
    if (req->kind == 1) {
        name_info(req, r);
        return;
    }
    struct addrinfo hints = {0};
    hints.ai_family = req->family;
    hints.ai_socktype = req->socktype;
    hints.ai_protocol = req->proto;
    hints.ai_flags = req->flags;
    errno = 0;
    r->code = getaddrinfo(req->host, req->port, &hints, &r->res);
    r->err = errno;
    if (r->code != 0)
        r->res = NULL;
}

/* ---- the queue between loops and workers ---- */

/* Lookups in progress at once, for every loop of the process together:
 * each holds a thread while the C library waits for a DNS server. */
#define ZL_RESOLVER_WORKERS 8

typedef struct queued {
    zl_lookup req;
    struct queued *next;
} queued;

/* A worker waiting for work. Idle workers form a stack: a lookup wakes
 * the one that went idle last, whose thread and caches are the warmest. */
typedef struct idle_worker {
    pthread_cond_t wake;
    int woken;
    struct idle_worker *below;
} idle_worker;

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static queued *queue_head, *queue_tail;
static idle_worker *idle_top;
static int workers;
/* Lookups inside the C library right now, and the signal that the count
 * fell to 0 (fork waits for it, below). */
static int busy;
static pthread_cond_t lookups_done = PTHREAD_COND_INITIALIZER;

/* fork() while a worker is inside getaddrinfo can leave one of the C
 * library's own locks held in the child, whose next lookup then hangs
 * (stock asyncio's executor threads have that hazard). Before a fork the
 * forking thread takes the queue, so that no lookup starts, and waits up
 * to FORK_WAIT_SECONDS for those in flight; they need neither the GIL nor
 * anything the forking thread holds. */
#define FORK_WAIT_SECONDS 2

static void before_fork(void)
{
    pthread_mutex_lock(&queue_lock);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += FORK_WAIT_SECONDS;
    while (busy > 0)
        if (pthread_cond_timedwait(&lookups_done, &queue_lock, &deadline) == ETIMEDOUT)
            break;
}

static void after_fork_in_parent(void) { pthread_mutex_unlock(&queue_lock); }

/* The child has none of the workers: it starts from nothing (what was
 * queued is the parent's; the child's loops cannot run anyway). */
static void after_fork_in_child(void)
{
    queue_head = queue_tail = NULL;
    idle_top = NULL;
    workers = busy = 0;
    pthread_cond_t fresh = PTHREAD_COND_INITIALIZER;
    lookups_done = fresh;
    pthread_mutex_unlock(&queue_lock);
}

static pthread_once_t fork_guard = PTHREAD_ONCE_INIT;

static void install_fork_guard(void)
{
    pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
}

/* Queues req (its strings move to the queue) and wakes the idle worker on
 * top of the stack, else starts a new worker if the bound allows; with
 * every worker busy, the lookup waits its turn. -1 if out of memory. */
static int submit(const zl_lookup *req)
{
    queued *q = malloc(sizeof *q);
    if (q == NULL)
        return -1;
    q->req = *req;
    q->next = NULL;
    pthread_once(&fork_guard, install_fork_guard);
    pthread_mutex_lock(&queue_lock);
    if (queue_tail != NULL)
        queue_tail->next = q;
    else
        queue_head = q;
    queue_tail = q;
    idle_worker *w = idle_top;
    if (w != NULL) {
        idle_top = w->below;
        w->woken = 1;
    }
    int spawn = w == NULL && workers < ZL_RESOLVER_WORKERS;
    if (spawn)
        workers++;
    pthread_mutex_unlock(&queue_lock);
    /* Signalled after unlocking: the worker does not wake into a held lock. */
    if (w != NULL)
        pthread_cond_signal(&w->wake);
    if (spawn)
        zlgo_resolver_spawn();
    return 0;
}

void zl_resolver_next(zl_lookup *req, zl_completion *out)
{
    /* Each worker thread's own place on the idle stack; threads live as
     * long as the process. */
    static __thread idle_worker self = {.wake = PTHREAD_COND_INITIALIZER};
    pthread_mutex_lock(&queue_lock);
    while (queue_head == NULL) {
        self.woken = 0;
        self.below = idle_top;
        idle_top = &self;
        /* A woken worker may find the lookup taken by a busy worker that
         * came back first; it then goes back on the stack. */
        while (!self.woken)
            pthread_cond_wait(&self.wake, &queue_lock);
    }
    queued *q = queue_head;
    queue_head = q->next;
    if (queue_head == NULL)
        queue_tail = NULL;
    busy++;
    pthread_mutex_unlock(&queue_lock);
    *req = q->req;
    free(q);
    resolve(req, out);
    pthread_mutex_lock(&queue_lock);
    if (--busy == 0)
        pthread_cond_broadcast(&lookups_done);
    pthread_mutex_unlock(&queue_lock);
    free(req->host);
    free(req->port);
    req->host = req->port = NULL;
}

void zl_resolved_free(uint64_t value)
{
    lookup_result *r = (lookup_result *)(uintptr_t)value;
    if (r == NULL)
        return;
    if (r->res != NULL)
        freeaddrinfo(r->res);
    free(r);
}

/* ---- on the loop thread ---- */

static PyObject *gaierror; /* socket.gaierror */

/* CPython's set_gaierror. */
static PyObject *lookup_error(lookup_result *r)
{
    if (r->code == EAI_SYSTEM) {
        errno = r->err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (r->code == ZL_MULTIPLE_ADDRESSES) {
        PyErr_SetString(PyExc_OSError, "sockaddr resolved to multiple addresses");
        return NULL;
    }
    if (r->code == ZL_IPV4_ARITY) {
        PyErr_SetString(PyExc_OSError, "IPv4 sockaddr must be 2 tuple");
        return NULL;
    }
    PyObject *v = Py_BuildValue("(is)", r->code, gai_strerror(r->code));
    if (v != NULL) {
        PyErr_SetObject(gaierror, v);
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
static PyObject *family_members, *kind_members;

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
static PyObject *addrinfo_list(struct addrinfo *res)
{
    PyObject *all = PyList_New(0);
    for (struct addrinfo *ai = res; all != NULL && ai != NULL; ai = ai->ai_next) {
        PyObject *addr = sockaddr_tuple(ai->ai_addr);
        PyObject *family = addr ? member_or_int(family_members, ai->ai_family) : NULL;
        PyObject *kind = family ? member_or_int(kind_members, ai->ai_socktype) : NULL;
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

static PyObject *settle_value(int kind, lookup_result *r)
{
    if (r == NULL)
        return PyErr_NoMemory();
    if (r->code != 0)
        return lookup_error(r);
    if (kind == 1)
        return Py_BuildValue("ss", r->host, r->serv);
    return addrinfo_list(r->res);
}

static PyObject *s_set_result, *s_set_exception, *s_cancelled, *s_done;

/* Sets fut's outcome, a value or an exception, unless it was cancelled
 * meanwhile (as asyncio's wrapping of an executor future does). */
static int settle_future(PyObject *fut, PyObject *value, PyObject *exc)
{
    PyObject *done = PyObject_CallMethodNoArgs(fut, s_done);
    int is_done = done ? PyObject_IsTrue(done) : -1;
    Py_XDECREF(done);
    if (is_done != 0)
        return is_done < 0 ? -1 : 0;
    PyObject *r = value != NULL ? PyObject_CallMethodOneArg(fut, s_set_result, value)
                                : PyObject_CallMethodOneArg(fut, s_set_exception, exc);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

void zl_settle_lookups(zl_loop *L, const zl_completion *done, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const zl_completion *c = &done[i];
        lookup_result *r = (lookup_result *)(uintptr_t)c->value;
        L->counters.lookups_done++;
        PyObject *key = PyLong_FromUnsignedLongLong(c->token);
        PyObject *entry =
            key && L->lookups.futures ? PyDict_GetItemWithError(L->lookups.futures, key) : NULL;
        if (entry != NULL) {
            Py_INCREF(entry);
            (void)PyDict_DelItem(L->lookups.futures, key);
            long kind = PyLong_AsLong(PyTuple_GET_ITEM(entry, 1));
            PyObject *value = settle_value((int)kind, r);
            PyObject *exc = value == NULL ? zl_fetch_exception() : NULL;
            if (settle_future(PyTuple_GET_ITEM(entry, 0), value, exc) < 0)
                PyErr_WriteUnraisable((PyObject *)L);
            Py_XDECREF(value);
            Py_XDECREF(exc);
            Py_DECREF(entry);
        }
        if (PyErr_Occurred())
            PyErr_WriteUnraisable((PyObject *)L);
        Py_XDECREF(key);
        zl_resolved_free(c->value);
    }
}

/* Records fut under a new token and queues req for the resolver. */
static PyObject *enqueue(zl_loop *L, zl_lookup *req, PyObject *fut, int kind)
{
    /* a worker is a goroutine: a child forked after the engine started
     * must not start or wake one */
    if (zl_check_not_forked() < 0)
        return NULL;
    if (zl_check_closed(L) < 0)
        return NULL;
    if (L->lookups.futures == NULL && (L->lookups.futures = PyDict_New()) == NULL)
        return NULL;
    req->token = ++L->lookups.counter;
    req->kind = kind;
    req->engine = L->engine;
    PyObject *key = PyLong_FromUnsignedLongLong(req->token);
    PyObject *entry = key ? Py_BuildValue("(Oi)", fut, kind) : NULL;
    int r = entry ? PyDict_SetItem(L->lookups.futures, key, entry) : -1;
    if (r == 0 && submit(req) < 0) {
        (void)PyDict_DelItem(L->lookups.futures, key);
        PyErr_NoMemory();
        r = -1;
    }
    Py_XDECREF(key);
    Py_XDECREF(entry);
    if (r < 0)
        return NULL;
    Py_RETURN_NONE;
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

/* Queues req unless building it failed (an exception is set); otherwise,
 * or if queueing fails, frees its strings. */
static PyObject *enqueue_or_free(zl_loop *L, zl_lookup *req, PyObject *fut, int kind)
{
    PyObject *r = PyErr_Occurred() ? NULL : enqueue(L, req, fut, kind);
    if (r == NULL) {
        free(req->host);
        free(req->port);
    }
    return r;
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
    zl_lookup req = {0};
    req.family = family;
    req.socktype = socktype;
    req.proto = protocol;
    req.flags = flags;
    req.host = copy_string(hptr);
    req.port = req.host || !hptr ? copy_string(pptr) : NULL;
    Py_XDECREF(idna);
    Py_XDECREF(port_text);
    return enqueue_or_free(L, &req, fut, 0);
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
    zl_lookup req = {0};
    req.flags = flags;
    req.flowinfo = flowinfo;
    req.scope_id = scope_id;
    req.arity = (int32_t)PyTuple_GET_SIZE(sa);
    req.host = copy_string(hostp);
    req.port = req.host ? copy_string(pbuf) : NULL;
    return enqueue_or_free(L, &req, fut, 1);
}

/* _zl_lookups_in_flight(): how many futures still wait for a lookup. */
PyObject *zl_loop_lookups_in_flight(zl_loop *L, PyObject *unused)
{
    return PyLong_FromSsize_t(L->lookups.futures ? PyDict_GET_SIZE(L->lookups.futures) : 0);
}

/* Forgets the loop's lookups: those still queued or in flight finish on
 * their worker, whose post the closed engine refuses. */
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

int zl_resolver_ready(void)
{
    PyObject *socket = PyImport_ImportModule("socket");
    if (socket == NULL)
        return -1;
    gaierror = PyObject_GetAttrString(socket, "gaierror");
    family_members = gaierror ? members_by_value(socket, "AddressFamily") : NULL;
    kind_members = family_members ? members_by_value(socket, "SocketKind") : NULL;
    Py_DECREF(socket);
    s_set_result = PyUnicode_InternFromString("set_result");
    s_set_exception = PyUnicode_InternFromString("set_exception");
    s_cancelled = PyUnicode_InternFromString("cancelled");
    s_done = PyUnicode_InternFromString("done");
    return kind_members && s_set_result && s_set_exception && s_cancelled && s_done ? 0 : -1;
}
