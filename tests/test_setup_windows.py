"""setup.py's Windows branch (windows_build), checked here on Linux, where
no Windows build can run: the compiler check, the link against the
interpreter's import library and the clock's build tag for this
interpreter's version. The build itself runs in the Wheels workflow's
Windows job; scripts/windows cross-builds the same way with zig cc."""

import importlib.util
import os
import sys
import types
from pathlib import Path

import pytest

SETUP = Path(__file__).resolve().parent.parent / "setup.py"


def load_setup(monkeypatch):
    # setup.py's own imports, as stand-ins: setuptools is pip's build
    # dependency, not necessarily in the environment the tests run in
    setuptools = types.ModuleType("setuptools")
    setuptools.Extension = setuptools.setup = None
    build_ext = types.ModuleType("setuptools.command.build_ext")
    build_ext.build_ext = object
    monkeypatch.setitem(sys.modules, "setuptools", setuptools)
    monkeypatch.setitem(sys.modules, "setuptools.command", types.ModuleType("setuptools.command"))
    monkeypatch.setitem(sys.modules, "setuptools.command.build_ext", build_ext)
    spec = importlib.util.spec_from_file_location("zloopgo_setup", SETUP)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines; setup() runs only as __main__
    return module


def fake_prefix(tmp_path, with_lib=True):
    libs = tmp_path / "Python Install" / "libs"
    libs.mkdir(parents=True)
    if with_lib:
        (libs / "python{}{}.lib".format(*sys.version_info[:2])).write_bytes(b"")
    return libs


def test_links_the_import_library_and_picks_the_clock(tmp_path, monkeypatch):
    setup = load_setup(monkeypatch)
    libs = fake_prefix(tmp_path)
    monkeypatch.setattr(sys, "base_prefix", str(libs.parent))
    env = {"CC": "zig cc", "CGO_CFLAGS": '"-IC:/Python 3/include" -O2 -Wall '}
    tags = setup.windows_build(env)
    name = "python{}{}".format(*sys.version_info[:2])
    # quoted: the path has a space, which go would split on otherwise
    assert env["CGO_LDFLAGS"].split(" -l")[0] == f'"-L{libs}"'
    assert env["CGO_LDFLAGS"].split()[-1] == f"-l{name}"
    # time.monotonic() is GetTickCount64 on Windows before 3.13
    assert tags == (["-tags", "zloopgo_tickcount64"] if sys.version_info < (3, 13) else [])


def test_refuses_without_the_import_library(tmp_path, monkeypatch):
    setup = load_setup(monkeypatch)
    libs = fake_prefix(tmp_path, with_lib=False)
    monkeypatch.setattr(sys, "base_prefix", str(libs.parent))
    with pytest.raises(SystemExit, match="import library"):
        setup.windows_build({"CC": "gcc", "CGO_CFLAGS": ""})


def test_refuses_without_a_compiler_cgo_can_use(tmp_path, monkeypatch):
    setup = load_setup(monkeypatch)
    monkeypatch.setattr(sys, "base_prefix", str(fake_prefix(tmp_path).parent))
    monkeypatch.setenv("PATH", str(tmp_path))  # no gcc there
    with pytest.raises(SystemExit, match="GCC-compatible"):
        setup.windows_build({"CGO_CFLAGS": "", "PATH": os.environ["PATH"]})
