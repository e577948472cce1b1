#!/usr/bin/env bash
# Runs a representative part of the pytest suite (zloopgo's side of the
# dual-run tests) under valgrind memcheck, then sorts what valgrind found
# by owner: the C adapter (capi/*.c), the Go runtime, or CPython and the
# rest. Exits non-zero when the adapter has a memory error or a definitely
# lost block.
#
# The extension is rebuilt for this in a copy of the committed checkout
# ($OUT/src, by build-copy.sh): with `-tags valgrind`, which makes the Go
# runtime describe its heap and goroutine stacks to valgrind (Go >= 1.25;
# without it memcheck reports the runtime's stack switches as invalid
# accesses and then aborts on its huge heap reservation), and the C adapter
# with -O1 -g for exact line numbers. The checkout's own build is untouched.
#
#   scripts/reliability/memcheck.sh                 # default subset
#   PYTHON=.venv-3.11/bin/python scripts/reliability/memcheck.sh tests/test_gc.py -k zloopgo
#
# Needs valgrind (Debian: apt-get install -y valgrind) and a Python with
# zloopgo and pytest installed (PYTHON, default python3). CPython runs with
# PYTHONMALLOC=malloc so that memcheck sees every object allocation.
# Takes 5-15 minutes on a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
export PYTHON
OUT=${OUT:-/tmp/zloopgo-memcheck}
mkdir -p "$OUT"
LOG="$OUT/memcheck.log"
REPO=$(pwd)

if ! command -v valgrind >/dev/null; then
    echo "memcheck.sh: valgrind is not installed (Debian: apt-get install -y valgrind)" >&2
    exit 2
fi
if [ $# -eq 0 ]; then
    set -- tests/test_scheduling.py tests/test_timers.py tests/test_handles.py \
        tests/test_descriptors.py tests/test_gc.py tests/test_leaks.py -k "zloopgo and not memory"
fi

CGO_CFLAGS="-O1 -g" scripts/reliability/build-copy.sh "$OUT/src" -tags valgrind
cd "$OUT/src"
export PYTHONPATH="$OUT/src${PYTHONPATH:+:$PYTHONPATH}"
loaded=$("$PYTHON" -c 'import zloopgo._engine as e; print(e.__file__)')
case "$loaded" in
"$OUT/src"/*) ;;
*) echo "memcheck.sh: $PYTHON imports zloopgo from $loaded, not from $OUT/src" >&2; exit 2 ;;
esac

echo "== valgrind memcheck: $PYTHON -m pytest $*  (log: $LOG)"
set +e
PYTHONMALLOC=malloc valgrind \
    --tool=memcheck \
    --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite \
    --num-callers=40 --error-limit=no --max-stackframe=2000000000000000 \
    --suppressions="$REPO/scripts/reliability/go-runtime.supp" \
    --log-file="$LOG" \
    "$PYTHON" -m pytest -q -p no:cacheprovider -p no:timeout "$@" >"$OUT/pytest.log" 2>&1
pytest_rc=$?
set -e
tail -n 3 "$OUT/pytest.log"
echo "pytest exit status under valgrind: $pytest_rc (slow-run failures are listed in $OUT/pytest.log)"
echo
"$PYTHON" "$REPO/scripts/reliability/vgreport.py" "$LOG" capi
