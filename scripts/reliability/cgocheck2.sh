#!/usr/bin/env bash
# Builds zloopgo's extension with Go's strict cgo pointer checks
# (GOEXPERIMENT=cgocheck2: every store of a Go pointer into C memory is
# checked, not only the arguments of each cgo call) into a copy of the
# checkout, and runs the pytest suite against that build. A violation of
# the cgo pointer rules panics the process ("cgo argument has Go pointer to
# unpinned Go pointer", "write of unpinned Go pointer ... into non-Go
# memory"); the script greps for such panics and exits non-zero.
#
#   scripts/reliability/cgocheck2.sh                  # the whole suite
#   PYTHON=.venv-3.11/bin/python scripts/reliability/cgocheck2.sh tests/test_gc.py
#
# The checkout's own zloopgo/_engine*.so is never touched: the copy is
# `git archive HEAD` (committed work only) in $OUT (default
# /tmp/zloopgo-cgocheck2), built there by build-copy.sh, and put first on
# PYTHONPATH.
# PYTHON (default python3) needs pytest and pytest-timeout.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
export PYTHON
OUT=${OUT:-/tmp/zloopgo-cgocheck2}
SRC=$(pwd)

GOEXPERIMENT=cgocheck2 scripts/reliability/build-copy.sh "$OUT"
cd "$OUT"

export PYTHONPATH="$OUT${PYTHONPATH:+:$PYTHONPATH}"
loaded=$("$PYTHON" -c 'import zloopgo, zloopgo._engine as e; print(e.__file__)')
case "$loaded" in
"$OUT"/*) echo "== using $loaded" ;;
*) echo "cgocheck2.sh: $PYTHON imports zloopgo from $loaded, not from $OUT" >&2; exit 2 ;;
esac
"$PYTHON" - <<'PY'
import zloopgo._engine  # noqa: F401  (the runtime starts with the first loop)
import zloopgo, json
loop = zloopgo.new_event_loop()
loop.close()
print("== go runtime:", json.loads(zloopgo._engine.build_info_json())["go_version"], "GOEXPERIMENT=cgocheck2")
PY

LOG="$OUT/pytest.log"
if [ $# -eq 0 ]; then set -- tests; fi
echo "== pytest $* (log: $LOG)"
set +e
GODEBUG=cgocheck=1 "$PYTHON" -m pytest -q -p no:cacheprovider "$@" >"$LOG" 2>&1
rc=$?
set -e
tail -n 5 "$LOG"
if grep -nE "cgo argument has Go pointer|unpinned Go pointer|cgocheck|Go pointer to Go pointer" "$LOG"; then
    echo "cgocheck2.sh: cgo pointer check failed (see $LOG)"
    exit 1
fi
echo "cgocheck2.sh: no cgo pointer-check panic (pytest exit status $rc; source $SRC at $(git -C "$SRC" rev-parse --short HEAD))"
exit $rc
