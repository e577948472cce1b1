"""Builds zloopgo's extension module with the Go toolchain.

The module zloopgo._engine is a Go c-shared library (capi/ plus core/),
named with the interpreter's extension suffix. On Linux and macOS
CPython's symbols are left unresolved, to be bound to the interpreter that
loads it, as for any extension module; on Windows it links against the
interpreter's python3X.dll through the import library a python.org-style
install carries (libs/python3X.lib), with a GCC-compatible C compiler for
cgo (MinGW-w64 gcc, or zig cc / llvm-mingw's clang named by CC: cgo cannot
use MSVC's cl or clang-cl), and CPython 3.10-3.12's GetTickCount64 clock
(the zloopgo_tickcount64 build tag, core/clock_windows_tickcount64.go).
"""

import os
import re
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

GO_MIN = (1, 26)
HERE = os.path.dirname(os.path.abspath(__file__))


def find_go():
    go = shutil.which("go")
    if go is None:
        sys.exit(
            f"zloopgo: building needs the Go toolchain (go >= {GO_MIN[0]}.{GO_MIN[1]}) on PATH; "
            "install it from https://go.dev/dl/ or your system's package manager"
        )
    version = subprocess.run(
        [go, "env", "GOVERSION"], check=False, capture_output=True, text=True
    ).stdout
    m = re.match(r"go(\d+)\.(\d+)", version.strip())
    if not m or tuple(map(int, m.groups())) < GO_MIN:
        sys.exit(
            f"zloopgo: found {version.strip()!r} at {go}, but building needs "
            f"go >= {GO_MIN[0]}.{GO_MIN[1]}; install a newer Go from https://go.dev/dl/"
        )
    return go


def refuse_free_threaded_windows():
    # A free-threaded CPython runs zloopgo with the GIL on (the engine declares
    # Py_MOD_GIL_USED, and zloopgo/__init__.py refuses PYTHON_GIL=0): built
    # and tested on Linux (docs/architecture.md, "Free-threaded builds: what
    # is still missing"). On Windows such a build would need Py_GIL_DISABLED
    # defined by the build and python3XYt.lib, and has never run.
    if sys.platform == "win32" and sysconfig.get_config_var("Py_GIL_DISABLED"):
        sys.exit(
            "zloopgo: this is a free-threaded CPython build (Py_GIL_DISABLED) on "
            "Windows, where zloopgo has never been built for one or run on one; "
            "build it with a default (GIL) CPython. docs/architecture.md, "
            "'Free-threaded builds: what is still missing', says where free-threaded "
            "builds run."
        )


def windows_build(env):
    """On Windows: the compiler check, the link against python3X.dll and the
    build tags (go build's -tags argument, or [])."""
    if "CC" not in env and shutil.which("gcc") is None:
        sys.exit(
            "zloopgo: building on Windows needs a GCC-compatible C compiler for cgo on "
            "PATH (MinGW-w64's gcc), or CC naming one (CC='zig cc', or llvm-mingw's "
            "clang); MSVC's cl and clang-cl cannot build cgo"
        )
    libs = os.path.join(sys.base_prefix, "libs")
    name = "python{}{}".format(*sys.version_info[:2])
    if not os.path.isfile(os.path.join(libs, name + ".lib")):
        sys.exit(f"zloopgo: no {name}.lib in {libs}: building needs CPython's import library")
    env["CGO_LDFLAGS"] = f'"-L{libs}" -l{name} ' + env.get("CGO_LDFLAGS", "")
    # time.monotonic() is GetTickCount64 before 3.13 (capi/clock.c checks)
    return ["-tags", "zloopgo_tickcount64"] if sys.version_info < (3, 13) else []


class GoBuildExt(build_ext):
    def build_extension(self, ext):
        refuse_free_threaded_windows()
        go = find_go()
        out = os.path.abspath(self.get_ext_fullpath(ext.name))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        env = dict(os.environ)
        include = sysconfig.get_paths()["include"]
        env["CGO_ENABLED"] = "1"
        # quoted: go splits CGO_CFLAGS on spaces outside quotes ("Program Files")
        env["CGO_CFLAGS"] = f'"-I{include}" -O2 -Wall ' + env.get("CGO_CFLAGS", "")
        tags = []
        if sys.platform == "win32":
            tags = windows_build(env)
        elif sys.platform == "darwin":
            env["CGO_LDFLAGS"] = "-undefined dynamic_lookup " + env.get("CGO_LDFLAGS", "")
        else:
            env["CGO_LDFLAGS"] = "-Wl,--unresolved-symbols=ignore-all " + env.get("CGO_LDFLAGS", "")
        # Build beside the target and rename: a process that has the old
        # module mapped keeps it intact instead of seeing it truncated.
        tmp = out + ".building"
        cmd = [
            go,
            "build",
            "-buildmode=c-shared",
            "-trimpath",
            "-buildvcs=false",
            *tags,
            "-o",
            tmp,
            "./capi",
        ]
        print(" ".join(cmd), flush=True)
        subprocess.check_call(cmd, cwd=HERE, env=env)
        os.replace(tmp, out)
        header = tmp[: -len(".building")] + ".h"
        for h in (os.path.splitext(tmp)[0] + ".h", header):
            if os.path.exists(h):
                os.remove(h)


# setuptools runs this file as __main__; tests/test_setup_windows.py imports it
if __name__ == "__main__":
    setup(
        ext_modules=[Extension("zloopgo._engine", sources=["capi/module.c"])],
        cmdclass={"build_ext": GoBuildExt},
    )
