"""The hostile vocabulary every differential machine draws from: Python
objects whose special methods run loop operations, as plain JSON data, and
what gives them life in a worker (`Trap`, `make_buffer`, `make_callback`,
`run_actions`).

A *trap* is ["trap", id, {method: [action, ...]}, returns]: an object whose
`method`s (DUNDERS) each record that they ran and, the first time, run
their actions (a loop operation re-entering the loop from inside the
method), then return returns' value for the method. Only the methods the
spec names exist on the object's class, as on a user's class (a trap with
`__eq__` and no `__hash__` is unhashable, one without `__index__` is no
integer). Actions (JSON):

    ["cancel", ref]      cancel a handle: ref "self" (the handle this trap
                         is the callback or an argument of), "last" (the
                         newest handle), or an index into the host's handles
    ["run", ref]         ref's _run(), nested in whatever runs now
    ["soon", actions]    loop.call_soon(a new callback that runs actions)
    ["later", actions]   loop.call_later(0, ...): a timer due at once
    ["raise", name]      raise name ("ValueError", "RuntimeError",
                         "KeyboardInterrupt") out of the method; ends the list
    ["stop"]             loop.stop()
    ["collect"]          gc.collect()
    ["exc_info"]         record sys.exc_info() as the method sees it
    ["op", op]           one of the machine's own ops (close a transport,
                         write, sendto, seek a file...), run by the host

A hostile *buffer* is ["hbuf", kind, trap, size]: size bytes the buffer
protocol exposes, from a bytearray or bytes subclass ("bytearray",
"bytes") whose Python-level methods are the trap's, or (CPython 3.12+)
an object with `__buffer__` and the trap's methods ("buffer"; on older
Pythons it is made a bytearray subclass).

A *callback* is a trap (called through `__call__`) or ["builtin", name,
args]: a C function applied to arguments, traps among them (operator.eq
compares two traps, so the reflected `__eq__` runs after the first one's
actions; len, hash, operator.index, repr, memoryview, bool, select.select
on a trap's fileno()). C code that calls back into Python with borrowed
arguments is where re-entrancy frees what the caller still uses.

Generation takes a `random.Random` (or `Draws`, which turns a hypothesis
`draw` into one, so that hypothesis machines shrink the same choices).
`Vocab` carries what one program's generation knows: the next trap id
and the machine's op generator, for the ["op", ...] actions.

It does not know any machine: the host (`host.Host`) resolves refs, runs
ops and records.
"""

import operator
import select
import sys

# The special methods a trap may have. "__call__" makes it a callback;
# "fileno" is what selectors, add_reader and the file machinery call.
DUNDERS = (
    "__eq__",
    "__hash__",
    "__index__",
    "__len__",
    "__buffer__",
    "__del__",
    "fileno",
    "__call__",
    "__repr__",
)
EXCEPTIONS = {
    "ValueError": ValueError,
    "RuntimeError": RuntimeError,
    "KeyboardInterrupt": KeyboardInterrupt,
}
BUILTINS = {
    "eq": operator.eq,
    "ne": operator.ne,
    "len": len,
    "hash": hash,
    "index": operator.index,
    "repr": repr,
    "bool": bool,
    "memoryview": memoryview,
    "contains": operator.contains,
    "select": select.select,
}
# How many times one trap method's calls are recorded: a loop that calls
# a method more often than asyncio shows, without flooding the record.
RECORD_CALLS = 8
# Actions a program may run in all (host.budget)
ACTION_BUDGET = 2000
HAS_BUFFER_DUNDER = sys.version_info >= (3, 12)


class Draws:
    """random.Random's methods the generators use, over a hypothesis draw
    (so hypothesis shrinks the choices)."""

    def __init__(self, draw):
        from hypothesis import strategies as st

        self._draw = draw
        self._st = st

    def random(self):
        return self._draw(self._st.integers(0, 999)) / 1000

    def randrange(self, n):
        return self._draw(self._st.integers(0, n - 1))

    def randint(self, lo, hi):
        return self._draw(self._st.integers(lo, hi))

    def choice(self, seq):
        return self._draw(self._st.sampled_from(list(seq)))


class Vocab:
    """What generating one program's hostile parts needs: the next trap id,
    and `machine_op(rng, depth)`, the machine's ops for ["op", ...]
    actions (None: the machine has none). `handles` says that handle refs
    (cancel, run) make sense; `weights` may tilt the actions."""

    def __init__(self, machine_op=None, handles=True, weights=None, interrupts=True):
        self.next_id = 1
        # KeyboardInterrupt escapes the loop; code run in another thread
        # (an executor) must not raise it
        self.raises = ["ValueError", "ValueError", "RuntimeError"]
        if interrupts:
            self.raises.append("KeyboardInterrupt")
        self.machine_op = machine_op
        self.handles = handles
        self.weights = dict(ACTION_WEIGHTS, **(weights or {}))
        if machine_op is None:
            self.weights["op"] = 0
        if not handles:
            self.weights["cancel"] = self.weights["run"] = 0

    def new_id(self):
        n = self.next_id
        self.next_id += 1
        return n


ACTION_WEIGHTS = {
    "cancel": 6,
    "run": 4,
    "soon": 3,
    "later": 2,
    "raise": 3,
    "stop": 1,
    "collect": 1,
    "exc_info": 2,
    "op": 6,
}


def _weighted(rng, weights):
    names = [n for n, w in weights.items() for _ in range(w)]
    return rng.choice(names)


def gen_ref(rng):
    pick = rng.randrange(6)
    if pick < 3:
        return "self"
    if pick == 3:
        return "last"
    return rng.randrange(4)


def gen_actions(rng, vocab, depth=0, max_actions=3, in_del=False):
    """A list of actions (none, sometimes: a method that only records).
    in_del: a finalizer's; it neither cancels nor runs a handle, and the
    callbacks it schedules do not raise (when a finalizer runs is not
    compared, see host.Host.flush_finalized, and the exception handler's
    call would come at that moment)."""
    out = []
    for _ in range(rng.randint(0, max_actions)):
        kind = _weighted(rng, vocab.weights)
        if kind == "raise" and in_del and depth > 0:
            kind = "exc_info"
        if kind in ("cancel", "run") and in_del:
            # When a finalizer runs differs (asyncio's frames keep a
            # callback's exception, and what it references, until a
            # collection; a native loop's C frames do not): a cancel or a
            # run it makes, or schedules, lands at another point of the
            # program's own cancels and runs (seen on 3.14).
            kind = "exc_info"
        if kind in ("cancel", "run"):
            out.append([kind, gen_ref(rng)])
        elif kind in ("soon", "later"):
            if depth >= 2:
                out.append(["exc_info"])
            else:
                out.append([kind, gen_actions(rng, vocab, depth + 1, 2, in_del)])
        elif kind == "raise":
            out.append(["raise", rng.choice(vocab.raises)])
            break
        elif kind == "op":
            out.append(["op", vocab.machine_op(rng, depth)])
        else:
            out.append([kind])
    return out


def gen_trap(rng, vocab, methods=None, depth=0, call=False):
    """A trap with `methods` (drawn when None), each with its actions;
    `call`: it must be callable."""
    if methods is None:
        methods = sorted({rng.choice(DUNDERS[:7]) for _ in range(rng.randint(1, 3))})
    methods = list(methods)
    if call and "__call__" not in methods:
        methods.append("__call__")
    if rng.randrange(8) == 0 and "__repr__" not in methods:
        methods.append("__repr__")
    if "__buffer__" in methods and not HAS_BUFFER_DUNDER:
        methods.remove("__buffer__")
    spec = {m: gen_actions(rng, vocab, depth, in_del=m == "__del__") for m in methods}
    returns = {}
    if "__eq__" in spec:
        returns["__eq__"] = rng.choice(["NotImplemented", "NotImplemented", False, True])
    if "__index__" in spec:
        returns["__index__"] = rng.choice([0, 1, 5, 4096, -1])
    if "__len__" in spec:
        returns["__len__"] = rng.choice([0, 1, 5])
    if "__buffer__" in spec:
        returns["__buffer__"] = rng.choice([0, 1, 100])
    return ["trap", vocab.new_id(), spec, returns]


def gen_callback(rng, vocab, depth=0):
    """A callback: a trap, or a C builtin over trap arguments (see the
    module's docstring), as ["builtin", name, [arg, ...]]; "trap" args
    are traps, others plain values."""
    if rng.randrange(5) < 2:
        return gen_trap(rng, vocab, depth=depth, call=True)
    name = rng.choice(sorted(BUILTINS))
    if name in ("eq", "ne"):
        args = [gen_trap(rng, vocab, ["__eq__"], depth), gen_trap(rng, vocab, ["__eq__"], depth)]
    elif name == "contains":
        args = [["list", [gen_trap(rng, vocab, ["__eq__"], depth), 1]], 2]
    elif name == "select":
        args = [["list", [gen_trap(rng, vocab, ["fileno"], depth)]], ["list", []], ["list", []], 0]
    else:
        method = {
            "len": "__len__",
            "bool": "__len__",
            "hash": "__hash__",
            "index": "__index__",
            "repr": "__repr__",
            "memoryview": "__buffer__" if HAS_BUFFER_DUNDER else "__len__",
        }[name]
        args = [gen_trap(rng, vocab, [method], depth)]
    return ["builtin", name, args]


def gen_arg(rng, vocab, depth=0):
    pick = rng.randrange(4)
    if pick == 0:
        return rng.choice([0, 1, "s"])
    return gen_trap(rng, vocab, depth=depth)


def gen_buffer(rng, vocab, size):
    kinds = ["bytearray", "bytes"] + (["buffer"] if HAS_BUFFER_DUNDER else [])
    kind = rng.choice(kinds)
    methods = sorted({rng.choice(["__len__", "__eq__", "__hash__", "__del__"]) for _ in range(2)})
    return ["hbuf", kind, gen_trap(rng, vocab, methods), size]


def traps_in(value):
    """Every trap spec inside a JSON value (a program, an op...)."""
    if isinstance(value, list):
        if len(value) == 4 and value[0] == "trap" and isinstance(value[2], dict):
            yield value
            for actions in value[2].values():
                yield from traps_in(actions)
        else:
            for item in value:
                yield from traps_in(item)


# -- what gives them life (in a worker)


class _TrapBase:
    """Methods common to every trap class; `_fire` is what each special
    method calls first."""

    def _setup(self, host, spec):
        self._host = host
        self._id = spec[1]
        self._spec = spec[2]
        self._returns = spec[3]
        self._calls = {}
        self.owner = None  # the index of the handle this trap belongs to
        # made by a finalizer (or by what one scheduled): what it records
        # goes with the finalizers' records
        self._fin = host.finalizing > 0
        # set by a host whose threads may call it at any time: the key its
        # records are kept under until the host's flush_late
        self._late = None

    def _fire(self, method):
        fin = self._fin or method == "__del__"
        # A call made inside another object's finalizer: when a finalizer
        # runs is not compared, and so neither is what it meets then. Such
        # a call is counted apart, runs no actions and is kept in notes;
        # else which call came first, where its actions were recorded, and
        # how many calls a finalizer's comparisons made would depend on it
        # (handles seed 432 program 73 on 3.11: asyncio's traceback kept
        # a frame, through f_back, that held a finalizer's object past a
        # list.count that compared this trap; zloopgo freed it before, and
        # the finalizer's compare came first and met other handles).
        in_a_finalizer = not fin and self._host.finalizing > 0
        key = (method, "in a finalizer") if in_a_finalizer else method
        late = self._late is not None
        self._host.finalizing += fin
        self._host.lateness += late
        if late:
            outer_key, self._host.late_key = self._host.late_key, self._late
        try:
            n = self._calls.get(key, 0) + 1
            self._calls[key] = n
            if in_a_finalizer:
                notes = self._host.notes.setdefault("called in a finalizer, not compared", [])
                notes.append(["trap", self._id, method])
            elif n <= RECORD_CALLS:
                self._host.rec(["trap", self._id, method])
            if n == 1 and not in_a_finalizer:
                run_actions(self._host, self._spec.get(method, ()), self, method)
        finally:
            self._host.finalizing -= fin
            self._host.lateness -= late
            if late:
                self._host.late_key = outer_key

    def _trap_repr(self):
        return f"<trap {self._id}>"


def _method(name):
    """The special method `name` of a trap class."""

    if name == "__eq__":

        def method(self, other):
            self._fire(name)
            ret = self._returns.get(name, "NotImplemented")
            return NotImplemented if ret == "NotImplemented" else ret

    elif name == "__hash__":

        def method(self):
            self._fire(name)
            return 1000 + self._id

    elif name in ("__index__", "__len__"):

        def method(self):
            self._fire(name)
            return self._returns.get(name, 1)

    elif name == "__buffer__":

        def method(self, flags):
            self._fire(name)
            return memoryview(b"b" * self._returns.get(name, 1))

    elif name == "__del__":

        def method(self):
            self._fire(name)

    elif name == "fileno":

        def method(self):
            self._fire(name)
            return self._host.spare_fd()

    elif name == "__call__":

        def method(self, *args):
            self._fire(name)

    else:  # __repr__

        def method(self):
            self._fire(name)
            return self._trap_repr()

    method.__name__ = name
    return method


_CLASSES = {}


def _trap_class(base, methods):
    key = (base, methods)
    cls = _CLASSES.get(key)
    if cls is None:
        body = {m: _method(m) for m in methods}
        if "__repr__" not in body:
            body["__repr__"] = lambda self: self._trap_repr()
        if "__eq__" in body and "__hash__" not in body:
            body["__hash__"] = None  # as for any class that defines __eq__ alone
        name = "Trap" if base is object else f"Trap{base.__name__.capitalize()}"
        cls = _CLASSES[key] = type(name, (_TrapBase, base), body)
    return cls


def Trap(host, spec):  # it makes an object, as a class would
    obj = _trap_class(object, tuple(sorted(spec[2])))()
    obj._setup(host, spec)
    return obj


def make_buffer(host, spec):
    """The object of a hostile buffer spec ["hbuf", kind, trap, size]."""
    _, kind, trap, size = spec
    data = b"h" * size
    if kind == "buffer" and not HAS_BUFFER_DUNDER:
        kind = "bytearray"
    methods = set(trap[2]) - {"__call__", "fileno", "__index__", "__buffer__"}
    if kind == "buffer":
        # the buffer is what __buffer__ returns: size bytes
        trap = [trap[0], trap[1], dict(trap[2]), dict(trap[3], __buffer__=size)]
        trap[2].setdefault("__buffer__", [])
        obj = _trap_class(object, tuple(sorted(methods | {"__buffer__"})))()
    else:
        base = bytearray if kind == "bytearray" else bytes
        obj = _trap_class(base, tuple(sorted(methods)))(data)
    obj._setup(host, trap)
    return obj


def make_value(host, spec):
    """A JSON value with its traps made: ["trap", ...] a trap, ["hbuf",
    ...] a buffer, ["list", items] a list; anything else itself."""
    if isinstance(spec, list) and spec:
        if spec[0] == "trap":
            return Trap(host, spec)
        if spec[0] == "hbuf":
            return make_buffer(host, spec)
        if spec[0] == "list":
            return [make_value(host, item) for item in spec[1]]
    return spec


def make_callback(host, spec):
    """(callback, args) of a callback spec."""
    if spec[0] == "trap":
        return Trap(host, spec), []
    _, name, args = spec
    return BUILTINS[name], [make_value(host, a) for a in args]


def raised_by_finalizer(unraisable):
    """Whether sys.unraisablehook's argument reports an exception that a
    __del__ raised (a trap's, or any). Up to 3.13 its `object` is the
    __del__ function; from 3.14 `object` is None and `err_msg` is
    "Exception ignored while calling deallocator <function ...>", the
    message of the __del__ slot (slot_tp_finalize) alone."""
    if getattr(unraisable.object, "__name__", None) == "__del__":
        return True
    return (unraisable.err_msg or "").startswith("Exception ignored while calling deallocator")


def run_actions(host, actions, trap=None, method=None):
    """Runs actions in order, each one's outcome recorded; "raise" raises
    out of here (the method that ran them raises it). The callbacks that
    actions make are traps named after where they were made (trap id,
    method, position), so that their names do not depend on when the
    actions ran."""
    where = f"{trap._id}.{method}" if trap is not None else host.where()
    for k, action in enumerate(actions):
        # a program whose actions re-run the step that made them (a
        # nested run of a step's own callback, re-arming an override)
        # would go on for ever, on both loops: a budget ends it
        host.budget -= 1
        if host.budget < 0:
            if host.budget == -1:
                host.rec(["act", "budget spent"])
            return
        kind = action[0]
        if kind == "raise":
            host.rec(["act", "raise", action[1]])
            raise EXCEPTIONS[action[1]](f"raised by trap {trap._id if trap else '-'}")
        try:
            result = _act(host, action, trap, f"{where}.{k}")
        except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt from a nested run too
            host.rec(["act", kind, "!", type(exc).__name__, host.mask(str(exc))])
        else:
            host.rec(["act", kind, result])


def _act(host, action, trap, name):
    kind = action[0]
    if kind in ("cancel", "run"):
        h = host.handle_ref(action[1], trap)
        if h is None:
            return "no handle"
        return repr(h.cancel() if kind == "cancel" else h._run())
    if kind in ("soon", "later"):
        host.schedule_actions(kind, action[1], name)
        return None
    if kind == "stop":
        host.loop.stop()
        return None
    if kind == "collect":
        host.collect()
        return None
    if kind == "exc_info":
        if host.finalizing:
            # a finalizer sees the exception handled where its object's
            # last reference went, and when that is, is not compared
            # (handles seed 433 program 131 on 3.11: a failed callback's
            # argument, kept by asyncio's cycle until the step's
            # collection, freed by zloopgo while its handler's message
            # formatted another callback's arguments for a TypeError)
            return "in a finalizer, not compared"
        info = sys.exc_info()
        return None if info[0] is None else [info[0].__name__, host.mask(str(info[1]))]
    if kind == "op":
        host.run_op(action[1])
        return None
    raise AssertionError(f"unknown action {action!r}")
