#!/usr/bin/env bash
# Builds aloocv with AddressSanitizer + UndefinedBehaviorSanitizer into its own virtual
# environment and build directory, then runs the test suite under the sanitizers.
#
#   tools/sanitize.sh                      # the whole suite
#   tools/sanitize.sh tests/test_loo.py -x # pytest arguments select a subset
#
# Environment: ASAN_VENV (default build/asan-venv), PYTHON (default python3). The build
# lives in build/asan (ignored by git); the regular build is not touched.
#
# Python itself is not built with ASan, so libasan must be loaded first (LD_PRELOAD; with
# libstdc++ so that ASan's operator new/delete interceptors see the C++ runtime), and leak
# detection is off: the interpreter keeps memory alive at exit by design. UBSan stops at
# the first error (-fno-sanitize-recover) so that a report fails the run.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PYTHON=${PYTHON:-python3}
VENV=${ASAN_VENV:-$ROOT/build/asan-venv}
SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
# shellcheck disable=SC1091
. "$VENV/bin/activate"
python -m pip install -q scikit-build-core pybind11 cmeel-eigen
python -m pip install -q --no-build-isolation \
  -C build-dir=build/asan \
  -C cmake.build-type=RelWithDebInfo \
  -C "cmake.args=-DCMAKE_CXX_FLAGS=$SAN;-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined;-DCMAKE_MODULE_LINKER_FLAGS=-fsanitize=address,undefined" \
  ".[test]"

LIBASAN=$(gcc -print-file-name=libasan.so)
LIBSTDCXX=$(gcc -print-file-name=libstdc++.so)
if [ ! -e "$LIBASAN" ]; then
  echo "sanitize.sh: libasan.so not found (gcc -print-file-name)" >&2
  exit 2
fi
# the installed (sanitized) package, not the source tree
export LD_PRELOAD="$LIBASAN $LIBSTDCXX"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:strict_init_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$ROOT"
python -c "import aloocv, sys; print('sanitized aloocv from', aloocv.__file__, file=sys.stderr)"
exec python -m pytest -p no:cacheprovider "$@"
