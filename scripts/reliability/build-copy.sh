#!/usr/bin/env bash
# build-copy.sh DIR [GO BUILD FLAGS...]: copies the committed checkout
# (`git archive HEAD`, or the commit REV names) to DIR and builds
# zloopgo's extension there with the given extra `go build` flags and the
# environment's GOEXPERIMENT, CGO_CFLAGS, CGO_LDFLAGS and GOFLAGS. The
# checkout's own zloopgo/_engine*.so is never touched. Prints nothing but
# the build; used by memcheck.sh, cgocheck2.sh and scripts/sanitize.
# PYTHON (default python3) picks the interpreter to build for; REV=main,
# say, builds main's code (a before/after pair for
# scripts/probes/instructions.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
dir=$1
shift
rm -rf "$dir"
mkdir -p "$dir"
git archive "${REV:-HEAD}" | tar -x -C "$dir"
cd "$dir"
suffix=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
include=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
echo "== ${GOEXPERIMENT:+GOEXPERIMENT=$GOEXPERIMENT }go build -buildmode=c-shared $* -> $dir/zloopgo/_engine$suffix"
CGO_ENABLED=1 \
    CGO_CFLAGS="-I$include ${CGO_CFLAGS:--O2} -Wall" \
    CGO_LDFLAGS="-Wl,--unresolved-symbols=ignore-all ${CGO_LDFLAGS:-}" \
    go build -buildmode=c-shared -trimpath -buildvcs=false "$@" \
    -o "zloopgo/_engine$suffix" ./capi
rm -f zloopgo/_engine*.h
