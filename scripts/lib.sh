# Shared set-up for scripts/test and scripts/bench: finds the Pythons to use
# and gives each a virtualenv with zloopgo built in place. Sourced, not run.
# shellcheck shell=bash

# The Pythons scripts/test and scripts/e2e run on: those ZL_TEST_PYTHONS
# names (commands on PATH or paths, e.g. "python3.10 python3.15"), else the
# default python3 and the newest other CPython installed (pyenv's, or a
# python3.N on PATH, as in the CPython 3.14/3.15 root scripts/newpy runs
# commands in).
zl_pythons() {
    local default newest py minor best=""
    if [ -n "${ZL_TEST_PYTHONS:-}" ]; then
        for py in $ZL_TEST_PYTHONS; do
            command -v "$py" || { echo "ZL_TEST_PYTHONS: $py is not a command or file" >&2; return 1; }
        done
        return 0
    fi
    default=$(command -v python3)
    echo "$default"
    newest=""
    while read -r py; do
        minor=$("$py" -c 'import sys; print("%d.%02d" % sys.version_info[:2])')
        if [ -z "$best" ] || [ "$(printf '%s\n%s\n' "$best" "$minor" | sort -V | tail -n 1)" = "$minor" ]; then
            best=$minor
            newest=$py
        fi
    done < <(zl_cpythons)
    if [ -n "$newest" ] && [ "$("$newest" -c 'import sys; print(sys.version)')" != "$("$default" -c 'import sys; print(sys.version)')" ]; then
        echo "$newest"
    fi
}

# zl_rotated_python: one more CPython for scripts/test's py stage when
# ZL_TEST_PYTHONS is not set: of those installed that zl_pythons leaves out
# (on the project machine 3.10 and 3.12), the one the checkout's commit
# count picks, so that successive commits take them by turns and none of
# the versions the README claims goes unrun for long (both had rotted
# unseen once). Prints nothing when none is left out.
zl_rotated_python() {
    local chosen="" count py
    local -a others=()
    [ -z "${ZL_TEST_PYTHONS:-}" ] || return 0
    # by minor version: python3 and pyenv's interpreter of the same minor are one
    for py in $(zl_pythons); do
        chosen="$chosen $("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])') "
    done
    while read -r py; do
        case "$chosen" in *" $("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])') "*) continue ;; esac
        others+=("$py")
    done < <(zl_cpythons | sort -V)
    [ ${#others[@]} -gt 0 ] || return 0
    count=$(git rev-list --count HEAD 2>/dev/null || echo 0)
    echo "${others[$((count % ${#others[@]}))]}"
}

# what the suite imports besides zloopgo (scripts/test's py and ft stages,
# scripts/gil-off suite)
# shellcheck disable=SC2034 # read by the scripts that source this file
py_test_packages=(pytest pytest-timeout hypothesis trustme opentelemetry-sdk gunicorn uvicorn uvicorn-worker mypy "pyright[nodejs]")

# zl_venv PYTHON PACKAGES...: prints the path of a virtualenv for PYTHON
# (.venv-X.Y in the checkout, with the build's ABI flags after it:
# .venv-X.Yt for a free-threaded build, .venv-X.Ytd for a debug one;
# .venv-MACHINE-X.Y on a machine other than x86_64, such as scripts/arm64's
# aarch64 root, which shares the checkout) with zloopgo installed editable
# and PACKAGES from PyPI. One X.Y's venv serves one interpreter at a time:
# made by another (pyenv's 3.13.0 on the host, the newpy root's Debian
# 3.13.15 in the same checkout), it is made again, empty, for this one.
zl_venv() {
    local py=$1; shift
    local ver dir which='import sys; print(sys.version, sys.base_prefix)'
    ver=$("$py" -c 'import sys; print("%d.%d%s" % (*sys.version_info[:2], sys.abiflags))')
    dir=".venv-$(zl_machine_tag)$ver"
    if [ ! -x "$dir/bin/python" ] ||
        [ "$("$dir/bin/python" -c "$which")" != "$("$py" -c "$which")" ]; then
        "$py" -m venv --clear "$dir" >&2
    fi
    "$dir/bin/python" -m pip install -q --upgrade pip >&2
    "$dir/bin/python" -m pip install -q -e . "$@" >&2
    echo "$dir"
}

# zl_machine_tag: "" on x86_64, else the machine and a dash ("aarch64-"):
# what the names of a checkout's per-Python directories carry, so that the
# x86_64 ones and those of the arm64 root (scripts/arm64) do not mix.
zl_machine_tag() {
    local machine
    machine=$(uname -m)
    [ "$machine" = x86_64 ] || echo -n "$machine-"
}

# zl_need COMMAND PACKAGE: makes sure COMMAND is on PATH, installing the
# Debian/Ubuntu PACKAGE with apt-get (through sudo unless root) when it is
# missing; where apt-get is not there, fails saying what to install.
zl_need() {
    local cmd=$1 pkg=$2
    local -a sudo=()
    command -v "$cmd" >/dev/null 2>&1 && return 0
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "needs $cmd on PATH (the Debian/Ubuntu package $pkg); no apt-get here: install it with this system's package manager" >&2
        return 1
    fi
    if [ "$(id -u)" -ne 0 ]; then
        if ! command -v sudo >/dev/null 2>&1; then
            echo "needs $cmd on PATH: run apt-get install -y $pkg as root" >&2
            return 1
        fi
        sudo=(sudo)
    fi
    echo "# installing $pkg (for $cmd) with apt-get" >&2
    # a fresh machine may have no package lists yet: update, then retry
    if ! "${sudo[@]}" apt-get install -y -qq "$pkg" >&2; then
        if ! { "${sudo[@]}" apt-get update -qq && "${sudo[@]}" apt-get install -y -qq "$pkg"; } >&2; then
            echo "apt-get could not install $pkg (for $cmd)" >&2
            return 1
        fi
    fi
    command -v "$cmd" >/dev/null 2>&1
}

# zl_shell_files: the checkout's shell scripts (scripts/, its folders one
# level down, .ci/run): files named *.sh or whose first line is a shell's
# #! line or a shellcheck shell= directive.
zl_shell_files() {
    local f
    for f in scripts/* scripts/*/* .ci/run; do
        [ -f "$f" ] || continue
        case "$f" in
            *.sh) echo "$f" ;;
            *) case "$(head -n 1 "$f")" in '#!'*[/\ ]bash | '#!'*[/\ ]sh | '# shellcheck shell='*) echo "$f" ;; esac ;;
        esac
    done
}

# zl_host_zig: (on x86_64) installs zig's C compiler from PyPI (ziglang, into
# scripts/cross's .venv-cross-X.Y) and prints its binary's path relative to
# the checkout: a static x86_64 program, which also runs natively inside the
# arm64 root (mounted at /src there), where the root's gcc runs emulated.
zl_host_zig() {
    local cross
    cross=.venv-cross-$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    if [ ! -x "$cross/bin/python" ]; then python3 -m venv "$cross" >&2; fi
    "$cross/bin/python" -m pip install -q ziglang==0.17.1 >&2
    "$cross/bin/python" -c 'import os, ziglang; print(os.path.relpath(os.path.join(os.path.dirname(ziglang.__file__), "zig")))'
}

# zl_zig_cgo_env PYTHON ZIG DIR: CC= and CGO_CFLAGS= (one line each) for cgo
# to compile for aarch64 with ZIG (zl_host_zig's binary), against glibc 2.17
# (the Wheels workflow's floor): a wrapper in DIR, as scripts/cross makes,
# and DIR/pyconfig, which holds Debian's multiarch pyconfig.h that PYTHON's
# include/pyconfig.h includes as <aarch64-linux-gnu/python3.X/pyconfig.h>
# (zig searches its own libc headers, not /usr/include).
zl_zig_cgo_env() {
    local py=$1 zig=$2 dir=$3 multiarch pyver
    multiarch=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("MULTIARCH") or "")')
    pyver=$("$py" -c 'import sys; print("python%d.%d%s" % (*sys.version_info[:2], sys.abiflags))')
    mkdir -p "$dir/pyconfig/$multiarch"
    if [ -n "$multiarch" ] && [ -d "/usr/include/$multiarch/$pyver" ]; then
        ln -sfn "/usr/include/$multiarch/$pyver" "$dir/pyconfig/$multiarch/$pyver"
    fi
    # zig's driver refuses --unresolved-symbols (setup.py's), and its lld
    # leaves a shared object's undefined symbols (CPython's) to the loader anyway
    # shellcheck disable=SC2016 # expanded by the wrapper
    printf '#!/bin/sh\nfor a do shift; [ "$a" = -Wl,--unresolved-symbols=ignore-all ] || set -- "$@" "$a"; done\nexec %s cc -target aarch64-linux-gnu.2.17 "$@"\n' "$zig" >"$dir/zigcc"
    chmod +x "$dir/zigcc"
    # -O2: a CGO_CFLAGS replaces cgo's default -O2 -g, and zig's clang
    # without optimization turns on UBSan, whose runtime nothing links
    printf '%s\n' "CC=$dir/zigcc" "CGO_CFLAGS=-O2 -g -I$dir/pyconfig"
}

# zl_new_headers_root: a directory whose usr/include holds CPython 3.14's
# and 3.15's headers (Debian's layout: pythonX.Y/ and MULTIARCH/pythonX.Y/
# pyconfig.h), for what compiles against a CPython this machine need not
# have (scripts/freethreaded, scripts/windows). The first of:
#   - the CPython 3.14/3.15 root of ../shared/tools/newpy/run.sh
#     ($ZL_NEWPY_ROOT, default ~/.cache/zl-newpy-root);
#   - Debian testing's libpython3.14-dev and libpython3.15-dev, fetched
#     once with apt-get (its own package lists in a temporary folder,
#     checked with this machine's Debian keys: about 10 MB of lists and 12
#     MB of packages; no root needed) and unpacked into $ZL_FT_HEADERS
#     (default ~/.cache/zl-ft-headers), where later runs find them.
# Prints nothing and returns 1 where neither can be had (no root and no
# apt-get: not Debian or Ubuntu); a failed fetch returns 1 after its log.
zl_new_headers_root() {
    local root=${ZL_NEWPY_ROOT:-$HOME/.cache/zl-newpy-root}
    if [ -d "$root/usr/include/python3.14" ]; then
        echo "$root"
        return
    fi
    root=${ZL_FT_HEADERS:-$HOME/.cache/zl-ft-headers}
    if [ ! -d "$root/usr/include" ]; then
        if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
            return 1
        fi
        _zl_fetch_debian_headers "$root" || return 1
    fi
    echo "$root"
}

_zl_fetch_debian_headers() {
    local dir=$1 mirror apt_dir deb version
    mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
    [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
    apt_dir=$(mktemp -d)
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/debs"
    echo "deb [target=Packages] $mirror testing main" >"$apt_dir/sources.list"
    local -a apt=(apt-get -q -o "Dir::Etc::SourceList=$apt_dir/sources.list"
        -o Dir::Etc::SourceParts=/nonexistent -o "Dir::State::Lists=$apt_dir/lists"
        -o "Dir::Cache=$apt_dir/cache" -o Acquire::Languages=none -o APT::Sandbox::User=root)
    echo "== fetching Debian testing's CPython 3.14 and 3.15 headers into $dir (once)" >&2
    local -a packages=()
    for version in 3.14 3.15; do packages+=("libpython$version-dev/testing"); done
    if ! "${apt[@]}" update >"$apt_dir/log" 2>&1 ||
        ! (cd "$apt_dir/debs" && "${apt[@]}" download "${packages[@]}") >"$apt_dir/log" 2>&1; then
        cat "$apt_dir/log" >&2
        rm -rf "$apt_dir"
        return 1
    fi
    rm -rf "$dir.partial" && mkdir -p "$dir.partial"
    for deb in "$apt_dir"/debs/*.deb; do dpkg-deb -x "$deb" "$dir.partial"; done
    rm -rf "$dir" "$apt_dir" && mv "$dir.partial" "$dir"
}

# ---- scripts/bench only -------------------------------------------------------

# zl_cpythons: every CPython >= 3.10 installed (pyenv's, else python3.N on
# PATH), newest first, one interpreter per minor version.
zl_cpythons() {
    local root v py seen=" " minor
    {
        if command -v pyenv >/dev/null 2>&1; then
            root=$(pyenv root)
            for v in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.[0-9]+\.[0-9]+$' | sort -rV); do
                echo "$root/versions/$v/bin/python3"
            done
        fi
        for v in $(seq 30 -1 10); do
            command -v "python3.$v" 2>/dev/null || true
        done
    } | while read -r py; do
        [ -x "$py" ] || continue
        minor=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2]) if sys.version_info >= (3, 10) and sys.implementation.name == "cpython" else None' 2>/dev/null) || continue
        if [ -z "$minor" ] || [ "$minor" = None ]; then continue; fi
        case "$seen" in *" $minor "*) continue ;; esac
        seen="$seen$minor "
        echo "$py"
    done
}

# zl_source_stamp DIR: a fingerprint of the zloopgo code in DIR (its commit
# plus any uncommitted change to what the build uses).
zl_source_stamp() {
    local paths=(capi core zloopgo setup.py go.mod go.sum pyproject.toml MANIFEST.in)
    (
        cd "$1" || exit 1
        git rev-parse HEAD 2>/dev/null || echo no-git
        git diff HEAD -- "${paths[@]}" 2>/dev/null
        git ls-files --others --exclude-standard -- "${paths[@]}" 2>/dev/null
    ) | sha256sum | cut -c1-16
}

# zl_bench_venv PYTHON SRC PACKAGES...: prints the path of .venv-bench-X.Y
# (.venv-bench-X.Yt for a free-threaded build; in the checkout) with
# zloopgo installed from SRC as a copy, not editable (so a rebuild of SRC
# during a run cannot change what is measured; it is reinstalled when
# SRC's code changed) and PACKAGES from PyPI.
zl_bench_venv() {
    local py=$1 src=$2; shift 2
    local ver dir want
    ver=$("$py" -c 'import sys; print("%d.%d%s" % (*sys.version_info[:2], "t" if "t" in sys.abiflags else ""))')
    dir=".venv-bench-$ver"
    if [ ! -x "$dir/bin/python" ]; then
        "$py" -m venv "$dir" >&2
        "$dir/bin/python" -m pip install -q --upgrade pip >&2
    fi
    want=$(zl_source_stamp "$src")
    if [ "$(cat "$dir/.zloopgo-stamp" 2>/dev/null)" != "$want" ]; then
        echo "# building zloopgo from $src into $dir" >&2
        "$dir/bin/python" -m pip install -q --force-reinstall --no-deps "$src" >&2
        echo "$want" >"$dir/.zloopgo-stamp"
    fi
    if [ $# -gt 0 ]; then
        "$dir/bin/python" -m pip install -q "$@" >&2
    fi
    echo "$dir"
}
