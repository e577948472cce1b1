/* TLSFastPaths and TLSTransportFastPaths: native versions of the methods
 * of asyncio.sslproto that run for every TLS record once a connection is
 * up (CPython 3.11 to 3.15, whose sslproto is the same in these methods;
 * tests/test_asyncio_internals.py pins their source):
 *
 *   the SSLProtocol, under the socket transport: get_buffer,
 *   buffer_updated, _do_read, _do_read__copied, _do_write,
 *   _process_outgoing, _write_appdata, _control_app_writing and
 *   _control_ssl_reading;
 *   the _SSLProtocolTransport the application holds: write and
 *   is_closing.
 *
 * Each does, step by step, what asyncio's Python method does, through the
 * same attributes and the same calls (MemoryBIO.read and write,
 * SSLObject.read and write, the protocol's data_received, the socket
 * transport's write), so the state machine's attributes, what the peer
 * receives, the exceptions and their messages are asyncio's. What is rare
 * runs asyncio's own Python method: every state but WRAPPED (handshake,
 * flushing, shutdown, a write after close), a BufferedProtocol
 * application (_do_read__buffered), and the moment a flow-control mark is
 * crossed (the _control_* methods check the marks here and call asyncio's
 * method only when it has something to do). zloopgo's subclasses
 * (zloopgo/_tls.py) put these types first in their bases.
 *
 * Two shortcuts, neither visible: an ssl.SSLObject whose read (write)
 * is still ssl's own is read (written) through the _ssl object it wraps,
 * as that method does, without its Python frame; and an
 * asyncio.StreamReaderProtocol application takes what was read through
 * the stream fast path (streamfeed.c).
 *
 * Where asyncio calls a method of the protocol or of the SSL object
 * (self._do_write(), self._sslobj.read(n)...), the native code takes the
 * step itself only while that method is still the one it stands for:
 * this type's native method, asyncio's or ssl's function. A method set on
 * the instance (tracing, mock.patch.object) or replaced in a subclass or
 * on ssl.SSLObject is called instead, as asyncio calls it (resolves_to).
 *
 * It knows asyncio.sslproto's attribute names; nothing of the loop or the
 * engine. */
#include "zl.h"

/* zloopgo's SSLProtocol and AppTransport keep the attributes read for
 * every record in __slots__, whose offsets set_tls() records (zl_layout,
 * util.c): reading one is then a load. Other instances, or a slot not yet
 * set, take the ordinary lookup. */
enum {
    F_STATE,
    F_INCOMING,
    F_OUTGOING,
    F_SSLOBJ,
    F_SSL_BUFFER,
    F_SSL_BUFFER_VIEW,
    F_APP_PROTOCOL,
    F_APP_PROTOCOL_IS_BUFFER,
    F_APP_READING_PAUSED,
    F_WRITE_BACKLOG,
    F_WRITE_BUFFER_SIZE,
    F_SSL_WRITING_PAUSED,
    F_TRANSPORT,
    F_OUTGOING_HIGH_WATER,
    F_OUTGOING_LOW_WATER,
    F_APP_WRITING_PAUSED,
    F_INCOMING_HIGH_WATER,
    F_INCOMING_LOW_WATER,
    F_SSL_READING_PAUSED,
    F_REPLACED,
    F_COUNT
};
#define NAME_AT(name) offsetof(zl_names, name)
static const size_t field_names[F_COUNT] = {
    NAME_AT(_state),
    NAME_AT(_incoming),
    NAME_AT(_outgoing),
    NAME_AT(_sslobj),
    NAME_AT(_ssl_buffer),
    NAME_AT(_ssl_buffer_view),
    NAME_AT(_app_protocol),
    NAME_AT(_app_protocol_is_buffer),
    NAME_AT(_app_reading_paused),
    NAME_AT(_write_backlog),
    NAME_AT(_write_buffer_size),
    NAME_AT(_ssl_writing_paused),
    NAME_AT(_transport),
    NAME_AT(_outgoing_high_water),
    NAME_AT(_outgoing_low_water),
    NAME_AT(_app_writing_paused),
    NAME_AT(_incoming_high_water),
    NAME_AT(_incoming_low_water),
    NAME_AT(_ssl_reading_paused),
    NAME_AT(_zl_replaced),
};
_Static_assert(F_COUNT <= ZL_LAYOUT_MAX, "too many TLS protocol fields for a zl_layout");

static PyObject *get_field(const zl_module_state *st, PyObject *self, int f)
{
    return zl_layout_get(&st->tls.layout, self, f);
}

static int field_true(const zl_module_state *st, PyObject *self, int f)
{
    return zl_layout_true(&st->tls.layout, self, f);
}

/* self.<field f> = v: stored in its slot (as the slot's descriptor
 * stores it) where zl_layout_direct allows, else set by name; 0 or -1. */
static int set_field(const zl_module_state *st, PyObject *self, int f, PyObject *v)
{
    const zl_layout *layout = &st->tls.layout;
    if (!zl_layout_direct(layout, self))
        return PyObject_SetAttr(self, zl_layout_name(layout, &st->names, f), v);
#ifdef Py_GIL_DISABLED
    /* as the slot's descriptor stores: in a critical section on self, the
     * old value dropped after it (zl_layout_slot_ref, zl.h) */
    PyObject *old;
    Py_BEGIN_CRITICAL_SECTION(self);
    PyObject **slot = (PyObject **)((char *)self + layout->offset[f]);
    old = *slot;
    __atomic_store_n(slot, Py_NewRef(v), __ATOMIC_RELEASE);
    Py_END_CRITICAL_SECTION();
    Py_XDECREF(old);
#else
    Py_XSETREF(*(PyObject **)((char *)self + layout->offset[f]), Py_NewRef(v));
#endif
    return 0;
}

enum { A_CLOSED, A_SSL_PROTOCOL, A_COUNT };
static const size_t app_field_names[A_COUNT] = {NAME_AT(_closed), NAME_AT(_ssl_protocol)};

/* The method table of TLSFastPaths, which names it among a class's bases. */
#define N_PROTOCOL_METHODS 9
static PyMethodDef protocol_methods[N_PROTOCOL_METHODS];

/* The state of the module whose TLSFastPaths self's class derives from
 * (the protocol's), or whose TLSTransportFastPaths (the app transport's),
 * kept in self: each native method's first step, handed down to every
 * step it takes. */
static inline zl_module_state *protocol_state(PyObject *self)
{
    return zl_state_of_native(self, &((zl_native_protocol *)self)->state);
}

static inline zl_module_state *app_state(PyObject *self)
{
    return zl_state_of_native(self, &((zl_native_transport *)self)->state);
}

static PyObject *app_field(const zl_module_state *st, PyObject *self, int f)
{
    return zl_layout_get(&st->tls.app_layout, self, f);
}

static PyObject *set_tls(PyObject *mod, PyObject *args)
{
    PyObject *proto_cls, *states, *again, *sslobject, *ours, *our_app;
    int asks;
    if (!PyArg_ParseTuple(args, "O!OO!O!pOO", &PyType_Type, &proto_cls, &states, &PyTuple_Type,
                          &again, &PyType_Type, &sslobject, &asks, &ours, &our_app))
        return NULL;
    zl_module_state *st = PyModule_GetState(mod);
    /* sslobject_type: set last, by a call that succeeded */
    if (zl_refuse_set_again("set_tls", st->tls.sslobject_type) < 0)
        return NULL;
    if (zl_layout_record(&st->tls.layout, &st->names, ours) < 0 ||
        zl_layout_record(&st->tls.app_layout, &st->names, our_app) < 0)
        return NULL;
    struct {
        PyObject **slot;
        const char *name;
    } methods[] = {
        {&st->tls.py_get_buffer, "get_buffer"},
        {&st->tls.py_write_appdata, "_write_appdata"},
        {&st->tls.py_do_read_copied, "_do_read__copied"},
        {&st->tls.py_control_app_writing, "_control_app_writing"},
        {&st->tls.py_control_ssl_reading, "_control_ssl_reading"},
    };
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        PyObject *m = PyObject_GetAttrString(proto_cls, methods[i].name);
        if (m == NULL)
            return NULL;
        Py_XSETREF(*methods[i].slot, m);
    }
    struct {
        PyObject **slot;
        const char *name;
    } members[] = {
        {&st->tls.st_do_handshake, "DO_HANDSHAKE"}, {&st->tls.st_wrapped, "WRAPPED"},
        {&st->tls.st_flushing, "FLUSHING"},         {&st->tls.st_shutdown, "SHUTDOWN"},
        {&st->tls.st_unwrapped, "UNWRAPPED"},
    };
    for (size_t i = 0; i < sizeof members / sizeof members[0]; i++) {
        PyObject *m = PyObject_GetAttrString(states, members[i].name);
        if (m == NULL)
            return NULL;
        Py_XSETREF(*members[i].slot, m);
    }
    Py_XSETREF(st->tls.again_errors, Py_NewRef(again));
    /* 3.13.15, 3.14+: _SSLProtocolTransport.is_closing() asks this method */
    PyObject *closing = asks ? PyObject_GetAttrString(proto_cls, "_is_transport_closing") : NULL;
    if (asks && closing == NULL)
        return NULL;
    Py_XSETREF(st->tls.py_is_transport_closing, closing);
    PyObject *read = _PyType_Lookup((PyTypeObject *)sslobject, st->names.read); /* borrowed */
    PyObject *write = _PyType_Lookup((PyTypeObject *)sslobject, st->names.write);
    if (read == NULL || write == NULL)
        return PyErr_Format(PyExc_TypeError, "%R has no read or write", sslobject);
    Py_XSETREF(st->tls.sslobject_read, Py_NewRef(read));
    Py_XSETREF(st->tls.sslobject_write, Py_NewRef(write));
    Py_XSETREF(st->tls.sslobject_type, (PyTypeObject *)Py_NewRef(sslobject));
    st->tls.sslobject_version = st->tls.protocol_version = 0; /* looked at on first use */
    st->tls.is_closing_asks_transport = asks;
    Py_RETURN_NONE;
}

/* Once per module object (zl_refuse_set_again), in a critical section on
 * the module, as set_transport_layout (transport.c). */
PyObject *zl_set_tls(PyObject *mod, PyObject *args)
{
    PyObject *r;
    Py_BEGIN_CRITICAL_SECTION(mod);
    r = set_tls(mod, args);
    Py_END_CRITICAL_SECTION();
    return r;
}

/* ---- small steps ---- */

/* a op b as Python compares them (1, 0 or -1): two exact ints that fit a
 * long are compared here (the counts and marks of every record:
 * zl_exact_long), anything else by PyObject_RichCompareBool. */
static int compare(PyObject *a, PyObject *b, int op)
{
    long x, y;
    if (zl_exact_long(a, &x) && zl_exact_long(b, &y)) {
        switch (op) {
        case Py_LT:
            return x < y;
        case Py_LE:
            return x <= y;
        case Py_GT:
            return x > y;
        case Py_GE:
            return x >= y;
        case Py_EQ:
            return x == y;
        default:
            return x != y;
        }
    }
    return PyObject_RichCompareBool(a, b, op);
}

/* state == member for an SSLProtocolState member: identity decides when
 * state is a member of the same class and that class compares as object
 * does (Enum defines no __eq__: a member equals only itself), which is
 * what == then finds; anything else asks ==. 1, 0 or -1. */
static int same_state(PyObject *state, PyObject *member)
{
    if (state == member)
        return 1;
    if (Py_TYPE(state) == Py_TYPE(member) &&
        Py_TYPE(state)->tp_richcompare == PyBaseObject_Type.tp_richcompare)
        return 0;
    return PyObject_RichCompareBool(state, member, Py_EQ);
}

/* self._state == member: 1, 0, or -1 */
static int state_is(zl_module_state *st, PyObject *self, PyObject *member)
{
    PyObject *state = get_field(st, self, F_STATE);
    if (state == NULL)
        return -1;
    int r = same_state(state, member);
    Py_DECREF(state);
    return r;
}

/* obj.name(arg) or obj.name() (arg NULL); the result dropped: 0 or -1 */
static int call_method(PyObject *obj, PyObject *name, PyObject *arg)
{
    PyObject *r = arg != NULL ? PyObject_CallMethodOneArg(obj, name, arg)
                              : PyObject_CallMethodNoArgs(obj, name);
    Py_XDECREF(r);
    return r != NULL ? 0 : -1;
}

/* fn(self) for one of asyncio's recorded methods: a new reference or NULL */
static PyObject *call_python(PyObject *fn, PyObject *self, PyObject *arg)
{
    return arg != NULL ? PyObject_CallFunctionObjArgs(fn, self, arg, NULL)
                       : PyObject_CallOneArg(fn, self);
}

/* Whether obj.name is what the native code does in its place: the C
 * method `native` of these types, or `fn` (asyncio's or ssl's function),
 * found on the class as a method call finds it (_PyObject_GetMethod: an
 * attribute of the instance comes first, and no bound method is made).
 * 1, 0 (set on the instance, replaced in a subclass or on the class), or
 * -1 with the exception the lookup raised. */
static int resolves_to(PyObject *obj, PyObject *name, PyObject *fn, PyCFunction native)
{
    PyObject *m = NULL;
    int unbound = _PyObject_GetMethod(obj, name, &m);
    if (m == NULL)
        return -1;
    int same = unbound && (m == fn || (native != NULL && Py_IS_TYPE(m, &PyMethodDescr_Type) &&
                                       ((PyMethodDescrObject *)m)->d_method->ml_meth == native));
    Py_DECREF(m);
    return same;
}

/* ssl.SSLObject still holds its own read and write. */
static inline int sslobject_unchanged(zl_module_state *st)
{
#ifdef Py_GIL_DISABLED
    /* as streamfeed.c's class_unchanged: relaxed atomic tags, the class's
     * taken before the lookups, which are compared by identity alone */
    unsigned int tag = ZL_FT_LOAD(st->tls.sslobject_type->tp_version_tag);
    if (tag != 0 && tag == ZL_FT_LOAD(st->tls.sslobject_version))
        return 1;
    tag = zl_tag_before_lookups(st->tls.sslobject_type);
    if (_PyType_Lookup(st->tls.sslobject_type, st->names.read) != st->tls.sslobject_read ||
        _PyType_Lookup(st->tls.sslobject_type, st->names.write) != st->tls.sslobject_write)
        return 0;
    ZL_FT_STORE(st->tls.sslobject_version, tag);
    return 1;
#else
    if (st->tls.sslobject_version != 0 &&
        st->tls.sslobject_type->tp_version_tag == st->tls.sslobject_version)
        return 1;
    if (_PyType_Lookup(st->tls.sslobject_type, st->names.read) != st->tls.sslobject_read ||
        _PyType_Lookup(st->tls.sslobject_type, st->names.write) != st->tls.sslobject_write)
        return 0;
    st->tls.sslobject_version =
        st->tls.sslobject_type->tp_version_tag; /* the lookups gave it one */
    return 1;
#endif
}

/* What self._sslobj.<name>(...) reaches when `fn` is ssl.SSLObject's own
 * method `name`: the _ssl object it wraps (new reference) while sslobj
 * is an ssl.SSLObject whose `name` is still fn, else sslobj itself (new
 * reference), whose method is then called as asyncio calls it. The
 * common case needs no lookup: the class unchanged and the instance
 * holding nothing but the _sslobj that SSLObject._create sets, so
 * nothing of its own replaces a method. */
static PyObject *ssl_target(zl_module_state *st, PyObject *sslobj, PyObject *name, PyObject *fn)
{
    if (Py_TYPE(sslobj) == st->tls.sslobject_type && sslobject_unchanged(st)) {
        PyObject *dict = PyObject_GenericGetDict(sslobj, NULL);
#ifdef Py_GIL_DISABLED
        /* a strong reference from the dictionary's own lookup: another
         * thread may replace the item, and free it, meanwhile */
        PyObject *inner = NULL;
        if (dict != NULL && PyDict_GET_SIZE(dict) == 1)
            PyDict_GetItemRef(dict, st->names._sslobj, &inner);
#else
        PyObject *inner = dict != NULL && PyDict_GET_SIZE(dict) == 1
                              ? PyDict_GetItemWithError(dict, st->names._sslobj) /* borrowed */
                              : NULL;
        Py_XINCREF(inner);
#endif
        Py_XDECREF(dict);
        if (inner != NULL)
            return inner;
        PyErr_Clear(); /* asked again below */
    }
    if (Py_TYPE(sslobj) == st->tls.sslobject_type) {
        int own = resolves_to(sslobj, name, fn, NULL);
        if (own > 0) {
            PyObject *inner = PyObject_GetAttr(sslobj, st->names._sslobj);
            if (inner != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError))
                return inner;
        }
        PyErr_Clear(); /* the method's own call meets it again */
    }
    return Py_NewRef(sslobj);
}

/* self._sslobj.read(n) or self._sslobj.write(data): a new reference, or
 * NULL with the exception set */
static PyObject *ssl_call(zl_module_state *st, PyObject *self, PyObject *method, PyObject *arg)
{
    PyObject *sslobj = get_field(st, self, F_SSLOBJ);
    if (sslobj == NULL)
        return NULL;
    PyObject *target =
        ssl_target(st, sslobj, method,
                   method == st->names.read ? st->tls.sslobject_read : st->tls.sslobject_write);
    Py_DECREF(sslobj);
    if (target == NULL)
        return NULL;
    PyObject *r = PyObject_CallMethodOneArg(target, method, arg);
    Py_DECREF(target);
    return r;
}

/* Whether the next self._sslobj.read() can only raise SSLWantReadError,
 * so that _do_read__copied's loop may stop without making it: the SSL
 * object is an unchanged ssl.SSLObject, the incoming BIO holds nothing and
 * is not at EOF, and OpenSSL holds no decrypted bytes (SSL_pending). A
 * TLS stream's records are read from the BIO exactly (no read-ahead), so
 * OpenSSL then has nothing to read from; the read it skips would cost
 * more than the round trip's own record (the exception alone, ~2 us).
 * 1, 0 (also when asking fails: the read is then made), or -1 with an
 * exception set. */
static int nothing_to_read(zl_module_state *st, PyObject *self)
{
    PyObject *sslobj = get_field(st, self, F_SSLOBJ);
    if (sslobj == NULL)
        return -1;
    int r = 0;
    PyObject *target = ssl_target(st, sslobj, st->names.read, st->tls.sslobject_read);
    if (target == NULL) {
        r = -1;
    } else if (target != sslobj) {
        PyObject *incoming = get_field(st, self, F_INCOMING);
        PyObject *pending = incoming ? PyObject_GetAttr(incoming, st->names.pending) : NULL;
        PyObject *eof = pending ? PyObject_GetAttr(incoming, st->names.eof) : NULL;
        PyObject *held = eof ? PyObject_CallMethodNoArgs(target, st->names.pending) : NULL;
        if (held != NULL)
            r = PyLong_CheckExact(pending) && PyLong_AsLong(pending) == 0 && eof == Py_False &&
                PyLong_CheckExact(held) && PyLong_AsLong(held) == 0;
        else if (PyErr_ExceptionMatches(PyExc_Exception))
            PyErr_Clear(); /* asyncio asks none of these: then make the read */
        else
            r = -1;
        Py_XDECREF(held);
        Py_XDECREF(eof);
        Py_XDECREF(pending);
        Py_XDECREF(incoming);
    }
    Py_XDECREF(target);
    Py_DECREF(sslobj);
    return r;
}

/* The pending exception is one of sslproto.SSLAgainErrors: cleared, 1. */
static int clear_again(zl_module_state *st)
{
    if (!PyErr_ExceptionMatches(st->tls.again_errors))
        return 0;
    PyErr_Clear();
    return 1;
}

/* `except Exception as ex: self._fatal_error(ex, 'Fatal error on SSL
 * protocol')` around a step that failed; other exceptions propagate. */
static PyObject *ssl_fatal(zl_module_state *st, PyObject *self)
{
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return NULL;
    PyObject *exc = zl_fetch_exception();
    PyObject *r = zl_call_handling(self, st->names._fatal_error, exc, st->names.msg_ssl_fatal);
    Py_DECREF(exc);
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

/* a, b the flow-control test of _control_*: (size >= high and not paused)
 * -> 1, (size <= low and paused) -> 1, otherwise 0; -1 on error */
static int mark_crossed(zl_module_state *st, PyObject *self, PyObject *size, int high_f, int low_f,
                        int paused_f)
{
    PyObject *high = get_field(st, self, high_f);
    if (high == NULL)
        return -1;
    int over = compare(size, high, Py_GE);
    Py_DECREF(high);
    if (over < 0)
        return -1;
    int paused = field_true(st, self, paused_f);
    if (paused < 0)
        return -1;
    if (over && !paused)
        return 1;
    PyObject *low = get_field(st, self, low_f);
    if (low == NULL)
        return -1;
    int under = compare(size, low, Py_LE);
    Py_DECREF(low);
    if (under < 0)
        return -1;
    return under && paused;
}

/* ---- asyncio's calls of the protocol's own methods ---- */

/* A step the native code takes where asyncio calls self.<method>(): it
 * sets *loud when program code ran or something was written. */
typedef PyObject *(*step_fn)(zl_module_state *st, PyObject *self, int *loud);

static PyObject *control_app_writing(PyObject *self, PyObject *unused);
static PyObject *control_ssl_reading(PyObject *self, PyObject *unused);
static PyObject *process_outgoing(PyObject *self, PyObject *unused);
static PyObject *do_write(PyObject *self, PyObject *unused);
static PyObject *do_read(PyObject *self, PyObject *unused);

/* The protocol's methods the native code stands for where asyncio calls
 * them by name: this type's C method, or asyncio's function (recorded by
 * set_tls; _is_transport_closing is NULL where sslproto has none, 3.11 to 3.13.0). */
typedef struct {
    size_t name_at; /* offsetof(zl_names, ...) */
    size_t fn_at;   /* offsetof(zl_tls_classes, ...) of asyncio's function, or NO_FN */
    PyCFunction native;
} zl_step_method;
#define NO_FN ((size_t)-1)
#define FN_AT(name) offsetof(zl_tls_classes, name)
static const zl_step_method step_methods[] = {
    {NAME_AT(_do_read), NO_FN, do_read},
    {NAME_AT(_do_read__copied), FN_AT(py_do_read_copied), NULL},
    {NAME_AT(_do_write), NO_FN, do_write},
    {NAME_AT(_process_outgoing), NO_FN, process_outgoing},
    {NAME_AT(_control_app_writing), NO_FN, control_app_writing},
    {NAME_AT(_control_ssl_reading), NO_FN, control_ssl_reading},
    {NAME_AT(_is_transport_closing), FN_AT(py_is_transport_closing), NULL},
};
/* A step method's name in names. */
static inline PyObject *step_name(const zl_names *names, const zl_step_method *m)
{
    return *(PyObject *const *)((const char *)names + m->name_at);
}
#define N_STEP_METHODS (sizeof step_methods / sizeof step_methods[0])

/* zloopgo's SSLProtocol class (and its bases) still holds each of them. */
static int protocol_class_unchanged(zl_module_state *st)
{
    PyTypeObject *t = st->tls.layout.type;
#ifdef Py_GIL_DISABLED
    /* the tag taken before the lookups; a descriptor followed (d_method)
     * through a strong reference (zl_type_lookup_ref, zl.h) */
    unsigned int tag = zl_tag_before_lookups(t);
    for (size_t i = 0; i < N_STEP_METHODS; i++) {
        const zl_step_method *m = &step_methods[i];
        PyObject *fn = m->fn_at != NO_FN ? *(PyObject **)((char *)&st->tls + m->fn_at) : NULL;
        if (m->fn_at != NO_FN && fn == NULL)
            continue;
        PyObject *d = zl_type_lookup_ref(t, step_name(&st->names, m));
        int same = fn != NULL ? d == fn
                              : d != NULL && Py_IS_TYPE(d, &PyMethodDescr_Type) &&
                                    ((PyMethodDescrObject *)d)->d_method->ml_meth == m->native;
        Py_XDECREF(d);
        if (!same)
            return 0;
    }
    ZL_FT_STORE(st->tls.protocol_version, tag);
    return 1;
#else
    for (size_t i = 0; i < N_STEP_METHODS; i++) {
        const zl_step_method *m = &step_methods[i];
        PyObject *fn = m->fn_at != NO_FN ? *(PyObject **)((char *)&st->tls + m->fn_at) : NULL;
        if (m->fn_at != NO_FN && fn == NULL)
            continue;
        PyObject *d = _PyType_Lookup(t, step_name(&st->names, m)); /* borrowed */
        int same = fn != NULL ? d == fn
                              : d != NULL && Py_IS_TYPE(d, &PyMethodDescr_Type) &&
                                    ((PyMethodDescrObject *)d)->d_method->ml_meth == m->native;
        if (!same)
            return 0;
    }
    st->tls.protocol_version = t->tp_version_tag;
    return 1;
#endif
}

/* Nothing replaces those methods on self without a lookup telling: self
 * is an instance of zloopgo's SSLProtocol itself, whose class holds
 * them, and none of their names was ever set on it (tls_setattro marks
 * the instance when one is: any assignment, mock.patch.object). 1, or 0:
 * ask resolves_to. */
static inline int unreplaced(zl_module_state *st, PyObject *self)
{
    PyTypeObject *t = st->tls.layout.type;
    if (t == NULL || Py_TYPE(self) != t)
        return 0;
#ifdef Py_GIL_DISABLED
    unsigned int cached = ZL_FT_LOAD(st->tls.protocol_version);
    if ((cached == 0 || ZL_FT_LOAD(t->tp_version_tag) != cached) && !protocol_class_unchanged(st))
        return 0;
#else
    if ((st->tls.protocol_version == 0 || t->tp_version_tag != st->tls.protocol_version) &&
        !protocol_class_unchanged(st))
        return 0;
#endif
    return *(PyObject **)((char *)self + st->tls.layout.offset[F_REPLACED]) == NULL;
}

/* Setting an attribute of the protocol: one named as a method of
 * step_methods marks the instance (unreplaced then asks every time). */
static int tls_setattro(PyObject *self, PyObject *name, PyObject *value)
{
    const zl_module_state *st = PyUnicode_Check(name) ? protocol_state(self) : NULL;
    if (st != NULL && st->tls.layout.type != NULL &&
        PyObject_TypeCheck(self, st->tls.layout.type)) {
        int interned = PyUnicode_CHECK_INTERNED(name);
        for (size_t i = 0; i < N_STEP_METHODS; i++) {
            PyObject *method = step_name(&st->names, &step_methods[i]);
            if (name == method || (!interned && PyUnicode_Compare(name, method) == 0)) {
                PyObject **mark = (PyObject **)((char *)self + st->tls.layout.offset[F_REPLACED]);
#ifdef Py_GIL_DISABLED
                /* True is immortal: nothing to drop but what was there */
                PyObject *old;
                Py_BEGIN_CRITICAL_SECTION(self);
                old = __atomic_exchange_n(mark, Py_True, __ATOMIC_RELEASE);
                Py_END_CRITICAL_SECTION();
                Py_XDECREF(old);
#else
                Py_XSETREF(*mark, Py_NewRef(Py_True));
#endif
                break;
            }
        }
    }
    return PyObject_GenericSetAttr(self, name, value);
}

/* self.<name>() as asyncio makes it: `step` when self.name is still the
 * native method `native` or asyncio's function `fn` (unreplaced, else
 * resolves_to), else whatever self.name is now, called (*loud set). */
static PyObject *run_step(zl_module_state *st, PyObject *self, PyObject *name, PyObject *fn,
                          PyCFunction native, step_fn step, int *loud)
{
    int own = unreplaced(st, self) ? 1 : resolves_to(self, name, fn, native);
    if (own < 0)
        return NULL;
    if (own)
        return step(st, self, loud);
    *loud = 1;
    return PyObject_CallMethodNoArgs(self, name);
}

/* ---- flow control ---- */

/* What _control_app_writing and _control_ssl_reading do with their size
 * (stolen; NULL passes an exception on): asyncio's method runs only when
 * the size crossed a mark, and *loud is set then (it calls the protocol). */
static PyObject *control_if_crossed(zl_module_state *st, PyObject *self, PyObject *size, int high,
                                    int low, int paused, PyObject *method, int *loud)
{
    if (size == NULL)
        return NULL;
    int crossed = mark_crossed(st, self, size, high, low, paused);
    Py_DECREF(size);
    if (crossed < 0)
        return NULL;
    if (crossed) {
        *loud = 1;
        return call_python(method, self, NULL);
    }
    Py_RETURN_NONE;
}

/* _control_app_writing: size = self._outgoing.pending + self._write_buffer_size */
static PyObject *app_writing_marks(zl_module_state *st, PyObject *self, int *loud)
{
    PyObject *outgoing = get_field(st, self, F_OUTGOING);
    PyObject *pending = outgoing ? PyObject_GetAttr(outgoing, st->names.pending) : NULL;
    Py_XDECREF(outgoing);
    PyObject *buffered = pending ? get_field(st, self, F_WRITE_BUFFER_SIZE) : NULL;
    PyObject *size = buffered ? PyNumber_Add(pending, buffered) : NULL;
    Py_XDECREF(pending);
    Py_XDECREF(buffered);
    return control_if_crossed(st, self, size, F_OUTGOING_HIGH_WATER, F_OUTGOING_LOW_WATER,
                              F_APP_WRITING_PAUSED, st->tls.py_control_app_writing, loud);
}

static PyObject *control_app_writing(PyObject *self, PyObject *unused)
{
    zl_module_state *st = protocol_state(self);
    int loud = 0;
    return app_writing_marks(st, self, &loud);
}

/* _control_ssl_reading: size = self._incoming.pending */
static PyObject *ssl_reading_marks(zl_module_state *st, PyObject *self, int *loud)
{
    PyObject *incoming = get_field(st, self, F_INCOMING);
    PyObject *size = incoming ? PyObject_GetAttr(incoming, st->names.pending) : NULL;
    Py_XDECREF(incoming);
    return control_if_crossed(st, self, size, F_INCOMING_HIGH_WATER, F_INCOMING_LOW_WATER,
                              F_SSL_READING_PAUSED, st->tls.py_control_ssl_reading, loud);
}

static PyObject *control_ssl_reading(PyObject *self, PyObject *unused)
{
    zl_module_state *st = protocol_state(self);
    int loud = 0;
    return ssl_reading_marks(st, self, &loud);
}

/* ---- outgoing ---- */

/* _process_outgoing: what the SSL object wrote goes to the socket
 * transport (which sets *loud) */
static PyObject *send_outgoing(zl_module_state *st, PyObject *self, int *loud)
{
    int paused = field_true(st, self, F_SSL_WRITING_PAUSED);
    if (paused < 0)
        return NULL;
    if (!paused) {
        PyObject *outgoing = get_field(st, self, F_OUTGOING);
        PyObject *data = outgoing ? PyObject_CallMethodNoArgs(outgoing, st->names.read) : NULL;
        Py_XDECREF(outgoing);
        if (data == NULL)
            return NULL;
        Py_ssize_t n = PyObject_Size(data);
        int rc = 0;
        if (n < 0) {
            rc = -1;
        } else if (n > 0) {
            *loud = 1;
            PyObject *transport = get_field(st, self, F_TRANSPORT);
            rc = transport ? call_method(transport, st->names.write, data) : -1;
            Py_XDECREF(transport);
        }
        Py_DECREF(data);
        if (rc < 0)
            return NULL;
    }
    return run_step(st, self, st->names._control_app_writing, NULL, control_app_writing,
                    app_writing_marks, loud);
}

static PyObject *process_outgoing(PyObject *self, PyObject *unused)
{
    zl_module_state *st = protocol_state(self);
    int loud = 0;
    return send_outgoing(st, self, &loud);
}

/* self._write_buffer_size -= n: 0 or -1 */
static int buffered_less(zl_module_state *st, PyObject *self, PyObject *n)
{
    PyObject *size = get_field(st, self, F_WRITE_BUFFER_SIZE);
    if (size == NULL)
        return -1;
    PyObject *less = PyNumber_InPlaceSubtract(size, n);
    Py_DECREF(size);
    if (less == NULL)
        return -1;
    int rc = set_field(st, self, F_WRITE_BUFFER_SIZE, less);
    Py_DECREF(less);
    return rc;
}

/* One turn of _do_write's loop: the first backlog item into the SSL
 * object. 1: go on; 0: the backlog is empty; -1: an exception. */
static int write_one(zl_module_state *st, PyObject *self)
{
    PyObject *backlog = get_field(st, self, F_WRITE_BACKLOG);
    if (backlog == NULL)
        return -1;
    int any = PyObject_IsTrue(backlog);
    if (any <= 0) {
        Py_DECREF(backlog);
        return any;
    }
    int rc = -1;
    PyObject *count = NULL, *len = NULL, *rest = NULL, *slice = NULL;
    PyObject *data = PyObject_GetItem(backlog, st->zero);
    if (data == NULL)
        goto done;
    if ((count = ssl_call(st, self, st->names.write, data)) == NULL)
        goto done;
    Py_ssize_t data_len = PyObject_Size(data);
    if (data_len < 0 || (len = PyLong_FromSsize_t(data_len)) == NULL)
        goto done;
    int partial = compare(count, len, Py_LT);
    if (partial < 0)
        goto done;
    if (partial) {
        if ((slice = PySlice_New(count, NULL, NULL)) == NULL ||
            (rest = PyObject_GetItem(data, slice)) == NULL ||
            PyObject_SetItem(backlog, st->zero, rest) < 0 || buffered_less(st, self, count) < 0)
            goto done;
    } else if (PyObject_DelItem(backlog, st->zero) < 0 || buffered_less(st, self, len) < 0) {
        goto done;
    }
    rc = 1;
done:
    Py_XDECREF(slice);
    Py_XDECREF(rest);
    Py_XDECREF(len);
    Py_XDECREF(count);
    Py_XDECREF(data);
    Py_DECREF(backlog);
    return rc;
}

/* _do_write: the backlog into the SSL object until it takes no more, then
 * self._process_outgoing() */
static PyObject *write_backlog(zl_module_state *st, PyObject *self, int *loud)
{
    int rc;
    while ((rc = write_one(st, self)) > 0)
        ;
    if (rc < 0 && !clear_again(st))
        return NULL;
    return run_step(st, self, st->names._process_outgoing, NULL, process_outgoing, send_outgoing,
                    loud);
}

static PyObject *do_write(PyObject *self, PyObject *unused)
{
    zl_module_state *st = protocol_state(self);
    int loud = 0;
    return write_backlog(st, self, &loud);
}

/* _write_appdata(list_of_data) in the states that write; asyncio's method
 * for a write after the connection began to close (it counts and logs). */
static PyObject *write_appdata(PyObject *self, PyObject *list_of_data)
{
    zl_module_state *st = protocol_state(self);
    PyObject *state = get_field(st, self, F_STATE);
    if (state == NULL)
        return NULL;
    int closed = 0;
    PyObject *closed_states[] = {st->tls.st_flushing, st->tls.st_shutdown, st->tls.st_unwrapped};
    for (int i = 0; i < 3 && !closed; i++) {
        closed = same_state(state, closed_states[i]);
        if (closed < 0) {
            Py_DECREF(state);
            return NULL;
        }
    }
    Py_DECREF(state);
    if (closed)
        return call_python(st->tls.py_write_appdata, self, list_of_data);
    PyObject *it = PyObject_GetIter(list_of_data);
    if (it == NULL)
        return NULL;
    PyObject *data;
    while ((data = PyIter_Next(it)) != NULL) {
        PyObject *backlog = get_field(st, self, F_WRITE_BACKLOG);
        int rc = backlog ? call_method(backlog, st->names.append, data) : -1;
        Py_XDECREF(backlog);
        PyObject *size = rc == 0 ? get_field(st, self, F_WRITE_BUFFER_SIZE) : NULL;
        Py_ssize_t n = size ? PyObject_Size(data) : -1;
        PyObject *len = n >= 0 ? PyLong_FromSsize_t(n) : NULL;
        PyObject *more = len ? PyNumber_InPlaceAdd(size, len) : NULL;
        rc = more ? set_field(st, self, F_WRITE_BUFFER_SIZE, more) : -1;
        Py_XDECREF(more);
        Py_XDECREF(len);
        Py_XDECREF(size);
        Py_DECREF(data);
        if (rc < 0) {
            Py_DECREF(it);
            return NULL;
        }
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return NULL;
    int wrapped = state_is(st, self, st->tls.st_wrapped), loud = 0;
    PyObject *r =
        wrapped > 0 ? run_step(st, self, st->names._do_write, NULL, do_write, write_backlog, &loud)
        : wrapped == 0 ? Py_NewRef(Py_None)
                       : NULL;
    if (r == NULL)
        return ssl_fatal(st, self);
    return r;
}

/* ---- incoming ---- */

/* The application protocol's data_received(data), through the stream fast
 * path when it is asyncio's StreamReaderProtocol (else *loud is set): 0
 * or -1 */
static int deliver(zl_module_state *st, PyObject *self, PyObject *data, int *loud)
{
    PyObject *app = get_field(st, self, F_APP_PROTOCOL);
    if (app == NULL)
        return -1;
    int rc = 0;
    if (PyBytes_CheckExact(data))
        rc = zl_stream_feed(st, app, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data));
    if (rc == 0) {
        *loud = 1;
        rc = call_method(app, st->names.data_received, data);
    } else if (rc > 0) {
        rc = 0;
    }
    Py_DECREF(app);
    return rc;
}

/* _do_read__copied: SSL object reads until it has no more, handed to the
 * application in one data_received; close_notify starts the shutdown. */
static int read_copied(zl_module_state *st, PyObject *self, int *loud)
{
    PyObject *chunk = Py_NewRef(Py_None); /* stands for b'1': truthy, never delivered */
    PyObject *first = NULL, *list = NULL;
    int rc = -1, eof = 0;
    for (;;) {
        PyObject *max_size = PyObject_GetAttr(self, st->names.max_size);
        if (max_size == NULL)
            goto done;
        PyObject *got = ssl_call(st, self, st->names.read, max_size);
        Py_DECREF(max_size);
        if (got == NULL) {
            if (clear_again(st))
                break;
            goto done;
        }
        Py_SETREF(chunk, got);
        int any = PyObject_IsTrue(chunk);
        if (any < 0)
            goto done;
        if (!any) {
            eof = 1;
            break;
        }
        if (list != NULL) {
            if (PyList_Append(list, chunk) < 0)
                goto done;
        } else if (first == NULL) {
            first = Py_NewRef(chunk);
        } else {
            if ((list = PyList_New(2)) == NULL)
                goto done;
            PyList_SET_ITEM(list, 0, first);
            PyList_SET_ITEM(list, 1, Py_NewRef(chunk));
            first = NULL;
        }
        int drained = nothing_to_read(st, self);
        if (drained < 0)
            goto done;
        if (drained) /* what the next read would raise SSLWantReadError for */
            break;
    }
    if (first != NULL) {
        if (deliver(st, self, first, loud) < 0)
            goto done;
    } else if (list != NULL) {
        PyObject *joined = PyObject_CallMethodOneArg(st->empty_bytes, st->names.join, list);
        int d = joined ? deliver(st, self, joined, loud) : -1;
        Py_XDECREF(joined);
        if (d < 0)
            goto done;
    }
    *loud |= eof;
    if (eof && (call_method(self, st->names._call_eof_received, NULL) < 0 ||
                call_method(self, st->names._start_shutdown, NULL) < 0))
        goto done;
    rc = 0;
done:
    Py_XDECREF(first);
    Py_XDECREF(list);
    Py_DECREF(chunk);
    return rc;
}

static PyObject *copied_step(zl_module_state *st, PyObject *self, int *loud)
{
    return read_copied(st, self, loud) < 0 ? NULL : Py_NewRef(Py_None);
}

/* The body of _do_read's try: read for the application unless it paused
 * reading, write what waits (or what the reads made: a TLS 1.3 key
 * update), then the read marks. 0 or -1. */
static int read_step(zl_module_state *st, PyObject *self, int *loud)
{
    int paused = field_true(st, self, F_APP_READING_PAUSED);
    if (paused < 0)
        return -1;
    if (!paused) {
        int buffered = field_true(st, self, F_APP_PROTOCOL_IS_BUFFER);
        if (buffered < 0)
            return -1;
        PyObject *r;
        if (buffered) { /* self._do_read__buffered(), asyncio's */
            *loud = 1;
            r = PyObject_CallMethodNoArgs(self, st->names._do_read__buffered);
        } else {
            r = run_step(st, self, st->names._do_read__copied, st->tls.py_do_read_copied, NULL,
                         copied_step, loud);
        }
        if (r == NULL)
            return -1;
        Py_DECREF(r);
        int waiting = field_true(st, self, F_WRITE_BACKLOG);
        if (waiting < 0)
            return -1;
        *loud |= waiting;
        r = waiting ? run_step(st, self, st->names._do_write, NULL, do_write, write_backlog, loud)
                    : run_step(st, self, st->names._process_outgoing, NULL, process_outgoing,
                               send_outgoing, loud);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
    }
    PyObject *r = run_step(st, self, st->names._control_ssl_reading, NULL, control_ssl_reading,
                           ssl_reading_marks, loud);
    Py_XDECREF(r);
    return r != NULL ? 0 : -1;
}

/* _do_read, in WRAPPED and FLUSHING; *loud is set unless it only handed
 * decrypted bytes to a stream natively (no program code, no write) */
static PyObject *read_records(zl_module_state *st, PyObject *self, int *loud)
{
    int wrapped = state_is(st, self, st->tls.st_wrapped);
    int reads = wrapped != 0 ? wrapped : state_is(st, self, st->tls.st_flushing);
    if (reads < 0)
        return NULL;
    if (!reads)
        Py_RETURN_NONE;
    if (read_step(st, self, loud) < 0) {
        *loud = 1;
        return ssl_fatal(st, self);
    }
    Py_RETURN_NONE;
}

static PyObject *do_read(PyObject *self, PyObject *unused)
{
    zl_module_state *st = protocol_state(self);
    int loud = 0;
    return read_records(st, self, &loud);
}

/* get_buffer(n): the protocol's own buffer, grown to want bytes */
static PyObject *get_buffer(PyObject *self, PyObject *n)
{
    zl_module_state *st = protocol_state(self);
    PyObject *buf = get_field(st, self, F_SSL_BUFFER);
    if (buf == NULL)
        return NULL;
    int ours = PyLong_CheckExact(n) && PyByteArray_CheckExact(buf);
    Py_DECREF(buf);
    if (!ours) /* anything unusual: asyncio's own method */
        return call_python(st->tls.py_get_buffer, self, n);
    PyObject *want = Py_NewRef(n);
    PyObject *max_size = PyObject_GetAttr(self, st->names.max_size);
    if (max_size == NULL)
        goto fail;
    int low = compare(want, st->zero, Py_LE);
    int high = low == 0 ? compare(want, max_size, Py_GT) : 0;
    if (low < 0 || high < 0)
        goto fail;
    if (low || high)
        Py_SETREF(want, Py_NewRef(max_size));
    Py_CLEAR(max_size);
    if ((buf = get_field(st, self, F_SSL_BUFFER)) == NULL)
        goto fail;
    Py_ssize_t have = PyObject_Size(buf);
    Py_DECREF(buf);
    if (have < 0)
        goto fail;
    PyObject *have_obj = PyLong_FromSsize_t(have);
    int short_ = have_obj ? compare(have_obj, want, Py_LT) : -1;
    Py_XDECREF(have_obj);
    if (short_ < 0)
        goto fail;
    if (short_) {
        PyObject *fresh = PyObject_CallOneArg((PyObject *)&PyByteArray_Type, want);
        int rc = fresh ? set_field(st, self, F_SSL_BUFFER, fresh) : -1;
        PyObject *view = rc == 0 ? get_field(st, self, F_SSL_BUFFER) : NULL;
        PyObject *mv = view ? PyMemoryView_FromObject(view) : NULL;
        rc = mv ? set_field(st, self, F_SSL_BUFFER_VIEW, mv) : -1;
        Py_XDECREF(mv);
        Py_XDECREF(view);
        Py_XDECREF(fresh);
        if (rc < 0)
            goto fail;
    }
    Py_DECREF(want);
    return get_field(st, self, F_SSL_BUFFER_VIEW);
fail:
    Py_XDECREF(max_size);
    Py_DECREF(want);
    return NULL;
}

/* buffer_updated(nbytes): the bytes into the incoming BIO, then the step
 * of the current state */
static PyObject *buffer_updated(PyObject *self, PyObject *nbytes)
{
    zl_module_state *st = protocol_state(self);
    PyObject *incoming = get_field(st, self, F_INCOMING);
    if (incoming == NULL)
        return NULL;
    PyObject *view = get_field(st, self, F_SSL_BUFFER_VIEW);
    PyObject *slice = view ? PySlice_New(NULL, nbytes, NULL) : NULL;
    PyObject *part = slice ? PyObject_GetItem(view, slice) : NULL;
    int rc = part ? call_method(incoming, st->names.write, part) : -1;
    Py_XDECREF(part);
    Py_XDECREF(slice);
    Py_XDECREF(view);
    Py_DECREF(incoming);
    if (rc < 0)
        return NULL;
    int is = state_is(st, self, st->tls.st_do_handshake);
    if (is != 0)
        return is < 0 ? NULL : PyObject_CallMethodNoArgs(self, st->names._do_handshake);
    if ((is = state_is(st, self, st->tls.st_wrapped)) != 0) {
        if (is < 0)
            return NULL;
        int loud = 0;
        PyObject *r = run_step(st, self, st->names._do_read, NULL, do_read, read_records, &loud);
        if (r != NULL && !loud) { /* the socket transport's read counts as quiet */
            PyObject *transport = get_field(st, self, F_TRANSPORT);
            if (transport == NULL) {
                Py_DECREF(r);
                return NULL;
            }
            zl_transport_fed_quietly(st, transport);
            Py_DECREF(transport);
        }
        return r;
    }
    if ((is = state_is(st, self, st->tls.st_flushing)) != 0)
        return is < 0 ? NULL : PyObject_CallMethodNoArgs(self, st->names._do_flush);
    if ((is = state_is(st, self, st->tls.st_shutdown)) != 0)
        return is < 0 ? NULL : PyObject_CallMethodNoArgs(self, st->names._do_shutdown);
    Py_RETURN_NONE;
}

static PyMethodDef protocol_methods[N_PROTOCOL_METHODS] = {
    {"get_buffer", get_buffer, METH_O, NULL},
    {"buffer_updated", buffer_updated, METH_O, NULL},
    {"_do_read", do_read, METH_NOARGS, NULL},
    {"_do_write", do_write, METH_NOARGS, NULL},
    {"_write_appdata", write_appdata, METH_O, NULL},
    {"_process_outgoing", process_outgoing, METH_NOARGS, NULL},
    {"_control_app_writing", control_app_writing, METH_NOARGS, NULL},
    {"_control_ssl_reading", control_ssl_reading, METH_NOARGS, NULL},
    {NULL}};

static PyType_Slot protocol_slots[] = {
    {Py_tp_doc, "Native per-record methods for asyncio's sslproto.SSLProtocol."},
    /* no tp_new: object's, inherited, makes the instances, as it makes
     * asyncio's SSLProtocol's (object.__new__ of the class then works as
     * there: it refuses a class whose first static base's tp_new is not
     * object's) */
    {Py_tp_methods, protocol_methods},
    {Py_tp_setattro, tls_setattro},
    {0, NULL}};

static PyType_Spec protocol_spec = {
    "zloopgo._engine.TLSFastPaths", sizeof(zl_native_protocol), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE, protocol_slots};

/* proto's class has a TLSFastPaths of any interpreter's module in its
 * MRO (a heap type made from protocol_spec has its methods), as
 * PyObject_TypeCheck would ask of one class. */
static int is_tls_fast_paths(PyObject *proto)
{
    PyObject *mro = Py_TYPE(proto)->tp_mro;
    if (mro == NULL)
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++)
        if (((PyTypeObject *)PyTuple_GET_ITEM(mro, i))->tp_methods == protocol_methods)
            return 1;
    return 0;
}

/* ---- the application's transport ---- */

/* write(data): bytes-like data to the SSL protocol's backlog */
static PyObject *app_write(PyObject *self, PyObject *data)
{
    if (!PyBytes_Check(data) && !PyByteArray_Check(data) && !PyMemoryView_Check(data)) {
#if PY_VERSION_HEX >= 0x030B0000
        PyObject *name = PyType_GetName(Py_TYPE(data));
#else
        PyObject *name = PyObject_GetAttrString((PyObject *)Py_TYPE(data), "__name__");
#endif
        if (name != NULL) {
            PyErr_Format(PyExc_TypeError, "data: expecting a bytes-like instance, got %U", name);
            Py_DECREF(name);
        }
        return NULL;
    }
    int any = PyObject_IsTrue(data);
    if (any <= 0)
        return any < 0 ? NULL : Py_NewRef(Py_None);
    const zl_module_state *st = app_state(self);
    PyObject *proto = app_field(st, self, A_SSL_PROTOCOL);
    PyObject *one = proto ? PyTuple_Pack(1, data) : NULL;
    PyObject *r = one ? PyObject_CallMethodOneArg(proto, st->names._write_appdata, one) : NULL;
    Py_XDECREF(one);
    Py_XDECREF(proto);
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

/* is_closing(): self._closed, and where asyncio's asks it (3.13.15, 3.14+) or the socket
 * transport's */
static PyObject *app_is_closing(PyObject *self, PyObject *unused)
{
    zl_module_state *st = app_state(self);
    PyObject *closed = app_field(st, self, A_CLOSED);
    if (closed == NULL || !st->tls.is_closing_asks_transport)
        return closed;
    int yes = PyObject_IsTrue(closed);
    if (yes != 0)
        return yes < 0 ? (Py_DECREF(closed), NULL) : closed;
    Py_DECREF(closed);
    PyObject *proto = app_field(st, self, A_SSL_PROTOCOL);
    if (proto == NULL)
        return NULL;
    /* not zloopgo's protocol, or its method replaced: the method */
    int own = !is_tls_fast_paths(proto) ? 0
              : unreplaced(st, proto)   ? 1
                                        : resolves_to(proto, st->names._is_transport_closing,
                                                      st->tls.py_is_transport_closing, NULL);
    if (own <= 0) {
        PyObject *r =
            own == 0 ? PyObject_CallMethodNoArgs(proto, st->names._is_transport_closing) : NULL;
        Py_DECREF(proto);
        return r;
    }
    /* SSLProtocol._is_transport_closing */
    PyObject *transport = get_field(st, proto, F_TRANSPORT);
    Py_DECREF(proto);
    if (transport == NULL)
        return NULL;
    if (transport == Py_None) {
        Py_DECREF(transport);
        Py_RETURN_FALSE;
    }
    PyObject *r = PyObject_CallMethodNoArgs(transport, st->names.is_closing);
    Py_DECREF(transport);
    return r;
}

static PyMethodDef app_methods[] = {
    {"write", app_write, METH_O, "Write data to the transport (asyncio.WriteTransport.write)."},
    {"is_closing", app_is_closing, METH_NOARGS,
     "Return True if the transport is closing or closed."},
    {NULL}};

static PyType_Slot app_slots[] = {
    {Py_tp_doc, "Native write and is_closing for asyncio's sslproto._SSLProtocolTransport."},
    {Py_tp_methods, app_methods},
    {0, NULL}};

/* A base of zloopgo's app transport class, on asyncio's _FlowControlMixin
 * (zl_native_transport): its instances are made as asyncio makes its
 * transports (object's tp_new, inherited). Mutable as that base is:
 * CPython 3.12+ makes no immutable type on a mutable base. */
static PyType_Spec app_spec = {"zloopgo._engine.TLSTransportFastPaths", sizeof(zl_native_transport),
                               0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, app_slots};

void zl_tls_state_free(zl_module_state *state)
{
    zl_tls_classes *c = &state->tls;
    PyObject **held[] = {&c->py_get_buffer,
                         &c->py_write_appdata,
                         &c->py_do_read_copied,
                         &c->py_control_app_writing,
                         &c->py_control_ssl_reading,
                         &c->py_is_transport_closing,
                         &c->st_do_handshake,
                         &c->st_wrapped,
                         &c->st_flushing,
                         &c->st_shutdown,
                         &c->st_unwrapped,
                         &c->again_errors,
                         (PyObject **)&c->sslobject_type,
                         &c->sslobject_read,
                         &c->sslobject_write};
    for (size_t i = 0; i < sizeof held / sizeof held[0]; i++)
        Py_CLEAR(*held[i]);
}

int zl_tls_types_new(PyObject *module, zl_module_state *state)
{
    state->tls.layout = (zl_layout){.n = F_COUNT, .name_at = field_names};
    state->tls.app_layout = (zl_layout){.n = A_COUNT, .name_at = app_field_names};
    state->tls_fast_paths_type =
        (PyTypeObject *)PyType_FromModuleAndSpec(module, &protocol_spec, NULL);
    if (state->tls_fast_paths_type == NULL ||
        zl_native_base_check(state->tls_fast_paths_type, offsetof(zl_native_protocol, state)) < 0)
        return -1;
    PyObject *base = zl_flow_control_base();
    if (base == NULL)
        return -1;
    state->tls_transport_fast_paths_type =
        (PyTypeObject *)PyType_FromModuleAndSpec(module, &app_spec, base);
    Py_DECREF(base);
    if (state->tls_transport_fast_paths_type == NULL)
        return -1;
    return zl_native_base_check(state->tls_transport_fast_paths_type,
                                offsetof(zl_native_transport, state));
}
