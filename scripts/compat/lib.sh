# shellcheck shell=bash
# Shared steps of the downstream-suite scripts in scripts/compat/ (one per
# project; they hold only what differs): fetch the project's pinned sdist
# from PyPI, make a throw-away virtualenv with zloopgo and the suite's test
# dependencies, run the suite on stock asyncio and then with zloopgo swapped
# in, prove the swap took effect, and compare. Sourced, not run.
#
# Environment: PYTHON (default python3); ZLOOPGO_SRC, the zloopgo checkout
# to install (default: the one holding this folder); COMPAT_WORK, where each
# project's virtualenv, sources and logs go, wiped at the start of its run
# (default: build/compat/ in this checkout, which git ignores).

COMPAT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ZLOOPGO_SRC=${ZLOOPGO_SRC:-$(cd "$COMPAT_DIR/../.." && pwd)}
COMPAT_WORK=${COMPAT_WORK:-$(cd "$COMPAT_DIR/../.." && pwd)/build/compat}
PYTHON=${PYTHON:-python3}

# compat_setup NAME VERSION SHA256: sets WORK (wiped), VENV (a new
# virtualenv with zloopgo installed from ZLOOPGO_SRC) and SRC (NAME's sdist
# at VERSION from PyPI, its hash checked, unpacked).
compat_setup() {
    local name=$1 version=$2 sha256=$3 sdist
    NAME=$name
    WORK=$COMPAT_WORK/$name
    VENV=$WORK/venv
    SRC=$WORK/src
    SECONDS=0
    rm -rf "$WORK"
    mkdir -p "$WORK/sdist" "$SRC"
    echo "== $name $version on $("$PYTHON" --version), zloopgo from $ZLOOPGO_SRC" \
        "($(git -C "$ZLOOPGO_SRC" rev-parse --short HEAD 2>/dev/null || echo 'not a git checkout'))"
    "$PYTHON" -m venv "$VENV"
    # pip >= 25.1 reads pyproject.toml dependency groups (--group).
    "$VENV/bin/python" -m pip install -q --upgrade "pip>=25.1"
    "$VENV/bin/python" -m pip install -q "$ZLOOPGO_SRC"
    "$VENV/bin/python" -m pip download -q --no-deps --no-binary :all: -d "$WORK/sdist" \
        "$name==$version"
    sdist=$(echo "$WORK"/sdist/*.tar.gz)
    echo "$sha256  $sdist" | sha256sum -c --quiet
    tar -xzf "$sdist" -C "$SRC" --strip-components=1
}

# compat_install ARGS...: pip install ARGS into VENV (the project and its
# test dependencies) with pytest-reportlog (compat_pytest's outcomes); what
# got installed is kept in WORK/pip-freeze.txt.
compat_install() {
    "$VENV/bin/python" -m pip install -q "$@" pytest-reportlog
    "$VENV/bin/python" -m pip freeze >"$WORK/pip-freeze.txt"
    echo "== installed in ${SECONDS}s (versions: $WORK/pip-freeze.txt)"
}

# compat_anyio_backend PARAMS: for an anyio-based suite, appends to its
# tests/conftest.py an anyio_backend fixture whose asyncio backend gets
# loop_factory=zloopgo.new_event_loop, on the zloopgo run only. PARAMS is
# the conftest's list of the suite's own fixture parameters, or None.
compat_anyio_backend() {
    cat >>"$SRC/tests/conftest.py" <<PY

# Appended by zloopgo's scripts/compat: the zloopgo run's asyncio backend
# makes zloopgo loops (a -p plugin would be shadowed by this conftest).
if __import__("os").environ.get("ZL_COMPAT_LOOP") == "zloopgo":
    anyio_backend = __import__("sitecustomize").anyio_backend_fixture($1)
PY
}

# compat_pytest LOOP OUT TIMEOUT ARGS...: one pytest run of the suite with
# LOOP (asyncio or zloopgo); outcomes in WORK/OUT.jsonl (pytest-reportlog's), output in
# WORK/OUT.log, loop counts in WORK/OUT.loops/. Fails only if pytest did
# not finish with tests run (a timeout, an internal or usage error).
compat_pytest() {
    local loop=$1 out=$2 limit=$3 rc=0 start=$SECONDS
    shift 3
    rm -rf "$WORK/$out.jsonl" "$WORK/$out.loops"
    mkdir -p "$WORK/$out.loops"
    (
        cd "$SRC" &&
            PYTHONPATH="$COMPAT_DIR/site${PYTHONPATH:+:$PYTHONPATH}" \
                ZL_COMPAT_LOOP=$loop ZL_COMPAT_COUNTS="$WORK/$out.loops" \
                timeout --kill-after=30 "$limit" "$VENV/bin/pytest" --report-log="$WORK/$out.jsonl" "$@"
    ) >"$WORK/$out.log" 2>&1 </dev/null || rc=$?
    echo "-- $out: $(tail -n 1 "$WORK/$out.log") (exit $rc, $((SECONDS - start))s)"
    "$VENV/bin/python" "$COMPAT_DIR/compare.py" loops "$WORK/$out.loops" --run "$loop" || return 1
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
        echo "$out: pytest did not complete (exit $rc; 124 is the ${limit}s timeout); see $WORK/$out.log"
        return 1
    fi
}

# compat_suite TIMEOUT ARGS...: runs the suite with pytest ARGS on asyncio,
# then on zloopgo (each run killed after TIMEOUT seconds), prints both
# summaries and every difference, reruns alone, on each loop, the tests
# that passed on asyncio only, and fails if any still does.
compat_suite() {
    local limit=$1 status=0
    shift
    echo "== running the suite: pytest $*"
    compat_pytest asyncio asyncio "$limit" "$@" || status=1
    compat_pytest zloopgo zloopgo "$limit" "$@" || status=1
    "$VENV/bin/python" "$COMPAT_DIR/compare.py" report "$WORK/asyncio.jsonl" \
        "$WORK/zloopgo.jsonl" --project "$NAME" --allowlist "$COMPAT_DIR/allowlist.txt" \
        --suspects "$WORK/suspects.txt" || status=1
    if [ -s "$WORK/suspects.txt" ]; then
        compat_pytest asyncio rerun-asyncio "$limit" "$@" "@$WORK/suspects.txt" || status=1
        compat_pytest zloopgo rerun-zloopgo "$limit" "$@" "@$WORK/suspects.txt" || status=1
        "$VENV/bin/python" "$COMPAT_DIR/compare.py" confirm "$WORK/suspects.txt" \
            "$WORK/rerun-asyncio.jsonl" "$WORK/rerun-zloopgo.jsonl" || status=1
    fi
    echo "== $NAME: $([ $status -eq 0 ] && echo ok || echo FAILED) in ${SECONDS}s (logs in $WORK)"
    return $status
}
