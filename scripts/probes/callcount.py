"""Runs a module with every call counted, for probes/perrequest.py's
--measure calls: which Python functions, and which C functions called
from Python, run how often. Two loops that run the same Python the same
number of times differ only inside their own code and the interpreter's C;
a function that runs on one loop only (a method Python on one, native on
the others) shows by name.

    python -m probes.callcount OUT PYTHON -m MODULE [ARGS...]

PYTHON (the interpreter the command would have started) is dropped: the
module runs in this process, under sys.setprofile and
threading.setprofile. The counts are written to OUT, "count<TAB>what"
per line, when the process ends: at os._exit (how the application
servers end on GET /exit) or at a normal exit. A Python function is
named by its file (from site-packages on), first line and qualified name;
a C function by its module, qualified name and the type it is bound to.
It knows nothing of the servers or of the loops.
"""

import atexit
import collections
import os
import runpy
import sys
import threading


def _name_of_c(function):
    bound = type(getattr(function, "__self__", None)).__name__
    qualname = getattr(function, "__qualname__", repr(function))
    return f"c {getattr(function, '__module__', None)} {qualname} on {bound}"


def _name_of_python(code):
    where = code.co_filename.rsplit("site-packages/", 1)[-1]
    # co_qualname is 3.11's; 3.10's code objects know only their own name
    qualname = getattr(code, "co_qualname", code.co_name)
    return f"py {where}:{code.co_firstlineno} {qualname}"


def main(argv):
    out, args = argv[0], argv[1:]
    if len(args) < 3 or args[1] != "-m":
        raise SystemExit("usage: python -m probes.callcount OUT PYTHON -m MODULE [ARGS...]")
    counts = collections.Counter()
    # code objects live on, so each is named once; a C function is often a
    # bound method made for the call, named each time
    code_names = {}

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            name = code_names.get(code)
            if name is None:
                name = code_names[code] = _name_of_python(code)
            counts[name] += 1
        elif event == "c_call":
            counts[_name_of_c(arg)] += 1

    written = []

    def write():
        if written:
            return
        written.append(True)
        sys.setprofile(None)
        threading.setprofile(None)
        with open(out, "w") as f:
            for what, n in counts.most_common():
                f.write(f"{n}\t{what}\n")

    real_exit = os._exit

    def exit_after_writing(code):
        write()
        real_exit(code)

    os._exit = exit_after_writing
    atexit.register(write)
    sys.argv = [args[2], *args[3:]]
    sys.path[0] = os.getcwd()  # as `python -m` has it
    threading.setprofile(profile)
    sys.setprofile(profile)
    runpy.run_module(args[2], run_name="__main__", alter_sys=True)


def read(out):
    """{what: count} and "total" from a file main wrote, or None."""
    got = {}
    try:
        with open(out) as f:
            for line in f:
                n, what = line.rstrip("\n").split("\t", 1)
                got[what] = int(n)
    except FileNotFoundError:
        return None
    if not got:
        return None
    got["total"] = sum(got.values())
    return got


if __name__ == "__main__":
    main(sys.argv[1:])
