#!/usr/bin/env bash
# The multicore table on a lent machine that cannot reach a package index (issue 28,
# item 7): build the extension into the tree with the machine's own compiler, Python,
# pybind11 and CMake, then run benchmarks/scaling.py.
#
# Here, once (the wheels travel with the working tree; .whl/ is ignored by git):
#
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#         --implementation cp --platform manylinux_2_28_x86_64 -d .whl \
#         cmeel==0.62.0 cmeel-eigen==3.4.1 pybind11==3.1.0
#
# There, from the repository's root (OUT: where the tables and logs go):
#
#     OUT=$OUT bash benchmarks/lent_machine.sh --quick
#
# Arguments are passed to scaling.py (default: --quick).
set -euo pipefail
OUT=${OUT:-$PWD/scaling-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
SITE=/tmp/aloocv-site
JOBS=$(nproc)

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
echo "== load: $(cat /proc/loadavg)"
"$PY" -c "import sys, numpy, scipy, sklearn, threadpoolctl; print(sys.version.split()[0], \
'numpy', numpy.__version__, 'scipy', scipy.__version__, 'sklearn', sklearn.__version__)"
"$PY" -c "from threadpoolctl import threadpool_info as t; import numpy; \
print([(i['internal_api'], i.get('version'), i['num_threads']) for i in t()])"

if ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" .whl/*.whl
  export PYTHONPATH=$SITE
fi
PB=$("$PY" -c "import pybind11; print(pybind11.get_cmake_dir())")
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)

t0=$(date +%s)
cmake -S . -B build/lent "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$SITE;$PB" -DPython_EXECUTABLE="$(command -v "$PY")" \
  >"$OUT/cmake.log" 2>&1 || { tail -40 "$OUT/cmake.log"; exit 1; }
cmake --build build/lent -j "$JOBS" --target _core >"$OUT/build.log" 2>&1 ||
  { tail -60 "$OUT/build.log"; exit 1; }
cp build/lent/_core*.so python/aloocv/
echo "== built in $(( $(date +%s) - t0 )) s"

export PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
"$PY" -c "import aloocv, numpy as np; X = np.random.default_rng(0).normal(size=(500, 5)); \
y = (X[:, 0] > 0).astype(float); print('smoke: loo mean', aloocv.loo(X, y, loss='logistic', penalty=1.0).mean)"
ARGS=("$@")
[ ${#ARGS[@]} -eq 0 ] && ARGS=(--quick)
"$PY" benchmarks/scaling.py "${ARGS[@]}" --out "$OUT/scaling.md" 2>&1 | tee "$OUT/scaling.log"
echo "== load: $(cat /proc/loadavg)"
