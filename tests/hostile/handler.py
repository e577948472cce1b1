"""What an exception handler sees, as observations every differential
harness records each time the loop's exception handler runs (issue 39,
item 4: asyncio calls a custom handler inside the `except` block of the
callback that raised, so `sys.exc_info()`, `logging.exception()` and the
`__context__` of anything the handler raises name that exception).

`HandlerProbe(loop, rec, mode)` installs the handler. Every call records
["handler", message, exception, context keys, probe] where probe is
[sys.exc_info() as [type, message] or None, whether logging.exception()
would print a traceback, the __context__ of an exception raised and caught
inside the handler]. Then, by mode:

- "custom": nothing more;
- "raises": the handler raises RuntimeError; asyncio's loop logs "Unhandled
  error in exception handler" with it, and `LogProbe` records the
  `__context__` of that logged exception;
- "delegate": the handler calls loop.default_exception_handler(context),
  which logs what `LogProbe` records;
- "default": no custom handler at all (the default handler logs).

`LogProbe` is a logging handler for the "asyncio" logger: each record as
["log", level, its message's first line, the names of the context lines
after it, the exception's [type, message] and its __context__'s].

`mask` removes what differs between two loops for reasons that are not
behaviour: object addresses, source locations, descriptor numbers and the
names of zloopgo's own transport and protocol classes (docs/compatibility.md).
"""

import logging
import re
import sys

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_SOURCE = re.compile(r" (created )?at [^\s>]+:\d+")
_FD = re.compile(r"\b(fd=|fileno=|File descriptor |pid[= ]|process |Read pipe |Write pipe )\d+")
_WHEN = re.compile(r"\bwhen=[-\d.e]+")
# zloopgo's own classes (and asyncio's of the same role) by one name
_CLASSES = re.compile(
    r"\b(_SelectorSocketTransport|_SelectorDatagramTransport|_UnixReadPipeTransport"
    r"|_UnixWritePipeTransport|SocketTransport|DatagramTransport|ReadPipeTransport"
    r"|WritePipeTransport)\b"
)
# zloopgo.open()'s two classes (the native path's on zloopgo's loop,
# the executor path's on another): a call with missing arguments names
# its class (files seed 29 program 321)
_FILE_CLASSES = re.compile(r"\b(NativeFile|ExecutorFile)\b")
_MODULES = re.compile(r"\b(zloopgo\._\w+|asyncio\.\w+)\.(?=[A-Z_])")
_ERRNO_PATH = re.compile(r"'/[^']*'")
MODES = ("custom", "raises", "delegate", "default")


_CALLBACK = re.compile(r"^(Exception in callback )([\w.]+\.)?(\w+)(\(.*)$", re.DOTALL)


def _callback_message(m):
    """'Exception in callback' and the callback's name (its class is each
    loop's own); its arguments unless their reprs hold addresses or were
    cut short (reprlib)."""
    args = m.group(4)
    if "0x" in args or "..." in args:
        args = "(...)"
    return f"{m.group(1)}{m.group(3)}{args}"


def mask(text):
    text = _CALLBACK.sub(_callback_message, str(text))
    text = _ADDRESS.sub("0x", text)
    text = _SOURCE.sub("", text)
    text = _FD.sub(r"\1N", text)
    text = _WHEN.sub("when=<t>", text)
    text = _MODULES.sub("", text)
    text = _CLASSES.sub("<transport>", text)
    text = _FILE_CLASSES.sub("<file>", text)
    return _ERRNO_PATH.sub("'<path>'", text)


def _exc(exc, mask=mask):
    return None if exc is None else [type(exc).__name__, mask(exc)]


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(message)s"))
        self.text = ""

    def emit(self, record):
        self.text = self.format(record)


_probe_logger = logging.getLogger("hostile.probe")
_probe_logger.propagate = False
_capture = _Capture()
_probe_logger.addHandler(_capture)


def probe():
    """[sys.exc_info(), logging.exception() prints a traceback, the
    __context__ of an exception raised here] as seen by the caller."""
    info = sys.exc_info()
    _capture.text = ""
    _probe_logger.exception("probe")
    printed = "Traceback (most recent call last)" in _capture.text
    try:
        raise LookupError("raised inside the handler")
    except LookupError as exc:
        context = exc.__context__
    return [_exc(info[1]) if info[0] else None, printed, _exc(context)]


# Where a callback was scheduled, in debug mode: asyncio's Python frames
# and zloopgo's differ (docs/compatibility.md), so these are not compared.
TRACEBACK_KEYS = ("source_traceback", "handle_traceback")


def log_line(text, mask=mask):
    """The default exception handler's log line: [its first line (masked),
    the names of the context lines after it]."""
    first, *rest = str(text).split("\n")
    keys = [line.split(":", 1)[0] for line in rest if re.match(r"^\w+: ", line)]
    return [mask(first), [k for k in keys if k not in TRACEBACK_KEYS]]


def context_keys(context):
    return sorted(k for k in context if k not in ("message", "exception") + TRACEBACK_KEYS)


class HandlerProbe:
    """The loop's exception handler of one program (see the module's
    docstring); `extra` is called after recording (a harness's own
    handler work), `message` shortens the message (None: masked whole)."""

    def __init__(self, loop, rec, mode="custom", extra=None, message=None, skip=None):
        self.loop = loop
        self.rec = rec
        self.mode = mode
        self.extra = extra
        self.message = message or mask
        self.skip = skip  # skip(message): a call that is not compared
        if mode != "default":
            loop.set_exception_handler(self)

    def __call__(self, loop, context):
        if self.skip is not None and self.skip(str(context.get("message"))):
            return
        exc = context.get("exception")
        self.rec(
            [
                "handler",
                self.message(context.get("message")),
                _exc(exc, self.message),
                context_keys(context),
                probe(),
            ]
        )
        if self.extra is not None:
            self.extra(loop, context)
        if self.mode == "raises":
            raise RuntimeError("raised by the exception handler")
        if self.mode == "delegate":
            loop.default_exception_handler(context)


class LogProbe(logging.Handler):
    """Records the "asyncio" logger's records (see the module's docstring);
    `skip(text)` drops timing records."""

    def __init__(self, rec, skip=None, mask=mask):
        super().__init__(logging.DEBUG)
        self.rec = rec
        self.skip = skip
        self.mask = mask

    def emit(self, record):
        try:
            text = record.getMessage()
        except Exception as exc:  # noqa: BLE001 - a record whose args do not format
            text = f"<unformattable: {type(exc).__name__}>"
        if self.skip is not None and self.skip(text):
            return
        first, keys = log_line(text, self.mask)
        exc = record.exc_info[1] if record.exc_info else None
        self.rec(
            [
                "log",
                record.levelname,
                first,
                keys,
                _exc(exc, self.mask),
                _exc(exc.__context__, self.mask) if exc is not None else None,
            ]
        )

    def __enter__(self):
        logger = logging.getLogger("asyncio")
        self._saved = (logger.level, logger.propagate)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        logger.addHandler(self)
        return self

    def __exit__(self, *exc):
        logger = logging.getLogger("asyncio")
        logger.removeHandler(self)
        logger.setLevel(self._saved[0])
        logger.propagate = self._saved[1]
