"""Assembles zloopgo's Windows wheel from a cross-compiled extension:
  make_wheel.py EXTENSION TAG OUTDIR
EXTENSION is the built _engine.<tag>.pyd, TAG the wheel's tag
(cp314-cp314-win_amd64). The metadata is setuptools' own (the PEP 517
hook prepare_metadata_for_build_wheel, from pyproject.toml, which builds
nothing), the package files those pyproject.toml lists (the packages, their
py.typed and .pyi), the extension beside them; then WHEEL and RECORD as the
wheel format (PEP 427) says. Prints the wheel's path.

It knows the wheel format and this project's package layout; nothing of
how the extension was built (scripts/windows)."""

import base64
import contextlib
import hashlib
import os
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PACKAGES = ["zloopgo", "zloopgo/_files"]
PACKAGE_DATA = (".py", ".pyi", "py.typed")


def read(path):
    with open(path, "rb") as f:
        return f.read()


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main():
    extension, tag, outdir = sys.argv[1:4]
    os.chdir(ROOT)
    import setuptools.build_meta as backend

    with tempfile.TemporaryDirectory() as meta:
        with contextlib.redirect_stdout(sys.stderr):  # setuptools' log
            info = backend.prepare_metadata_for_build_wheel(meta)
        files = {}
        for root, _, names in os.walk(os.path.join(meta, info)):
            for n in names:
                path = os.path.join(root, n)
                files[os.path.relpath(path, meta).replace(os.sep, "/")] = read(path)
    name, version = info[: -len(".dist-info")].split("-")
    for package in PACKAGES:
        for n in sorted(os.listdir(package)):
            if n.endswith(PACKAGE_DATA):
                files[f"{package}/{n}"] = read(os.path.join(package, n))
    files[f"zloopgo/{os.path.basename(extension)}"] = read(extension)
    files[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: zloopgo scripts/wine/make_wheel.py\n"
        f"Root-Is-Purelib: false\nTag: {tag}\n"
    ).encode()
    record = f"{info}/RECORD"
    lines = [record_line(n, d) for n, d in files.items()] + [f"{record},,"]
    files[record] = ("\n".join(lines) + "\n").encode()
    os.makedirs(outdir, exist_ok=True)
    wheel = os.path.join(outdir, f"{name}-{version}-{tag}.whl")
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files.items():
            z.writestr(n, d)
    print(wheel)


if __name__ == "__main__":
    main()
