"""float32 designs end to end: time and memory against the same data in float64.

Measures, one run side by side on the same values (X32 and X32.astype(float64)):

- the Hessian pass ``X~^T D X~`` (the core's row-blocked kernel);
- ``fit`` and ``loo(method="alo")`` (logistic, L2);
- the peak resident memory of ``loo`` on float32 X, in a fresh subprocess, against
  ``X.nbytes`` (the issue's target: <= 1.2x), and the same for float64 X;
- the largest relative difference of the ALO losses and coefficients (target 1e-5).

Timing (``benchmarks/_timing.py``): float32 and float64 calls in rotation after a
warm-up, the minimum of ``--repeat``; CPU seconds with ``--n-jobs 1`` (the default, BLAS
limited to one thread too), wall seconds with the load average otherwise.

Usage::

    python benchmarks/float32.py [--n 200000] [--p 200] [--n-jobs 1] [--repeat 3]
    python benchmarks/float32.py --memory [--n 200000] [--p 50,100,200]

``--memory`` prints only the memory table: for each p, the peak resident memory of
``fit`` and of ``loo(method="alo")`` beyond the process's memory before the call, as a
multiple of ``X.nbytes`` (target for float32 loo: peak/X <= 1.2, i.e. extra <= 0.2) and
in float64 vectors of length n (``loo`` returns four of them: losses, predictions,
leverages, downdate factors).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from contextlib import nullcontext

import numpy as np
from _timing import clock_for, interleaved, load_line, single_threaded


def _data(n: int, p: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p), dtype=np.float32)
    beta = rng.standard_normal(p) / np.sqrt(p)
    eta = X.astype(np.float64) @ beta
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-eta))).astype(np.float64)
    return X, y


_CHILD = r"""
import json, sys
import numpy as np
import aloocv

def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024

n, p, dtype, n_jobs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
rng = np.random.default_rng(0)
X = rng.standard_normal((n, p), dtype=np.float32)
if dtype == "float64":
    X = X.astype(np.float64)
y = (rng.random(n) < 0.5).astype(np.float64)
what = sys.argv[5] if len(sys.argv) > 5 else "loo"
call = aloocv.fit if what == "fit" else aloocv.loo
call(X[:100], y[:100], loss="logistic", penalty=aloocv.L2(1.0), n_jobs=n_jobs)
before = status("VmRSS:")
with open("/proc/self/clear_refs", "w") as f:  # resets the high-water mark VmHWM
    f.write("5")
res = call(X, y, loss="logistic", penalty=aloocv.L2(1.0), n_jobs=n_jobs)
peak = status("VmHWM:")
print(json.dumps({"X_bytes": X.nbytes, "before": before, "peak": peak}))
"""


def _peak_rss(n: int, p: int, dtype: str, n_jobs: int, what: str = "loo") -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(n), str(p), dtype, str(n_jobs), what],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


def _hessian(X, d, n_jobs):
    from aloocv import _blas, _core

    with _blas.single_threaded_blas():  # as inside fit: the row blocks are the parallelism
        return _core.hessian(X, d, fit_intercept=True, n_threads=n_jobs)


def memory_table(n: int, ps: list[int], n_jobs: int) -> None:
    """Peak RSS of fit and loo beyond the RSS before the call, per dtype and p."""
    print(f"peak memory beyond the process's before the call, n={n}, n_jobs={n_jobs}")
    print(
        f"{'dtype':8s} {'p':>5s} {'X MiB':>7s} {'fit/X':>7s} {'loo/X':>7s} "
        f"{'fit n-vec':>10s} {'loo n-vec':>10s} {'peak/X':>7s}"
    )
    for p in ps:
        for dtype in ("float32", "float64"):
            m = {what: _peak_rss(n, p, dtype, n_jobs, what) for what in ("fit", "loo")}
            xb = m["loo"]["X_bytes"]
            extra = {w: v["peak"] - v["before"] for w, v in m.items()}
            print(
                f"{dtype:8s} {p:5d} {xb / 2**20:7.1f} {extra['fit'] / xb:7.3f} "
                f"{extra['loo'] / xb:7.3f} {extra['fit'] / (8 * n):10.1f} "
                f"{extra['loo'] / (8 * n):10.1f} {(xb + extra['loo']) / xb:7.3f}"
            )


def main() -> None:
    import aloocv

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--p", type=str, default="200", help="one p, or several: 50,100,200")
    ap.add_argument("--n-jobs", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--memory", action="store_true", help="only the memory table")
    a = ap.parse_args()
    ps = [int(v) for v in a.p.split(",")]
    if a.memory:
        memory_table(a.n, ps, a.n_jobs)
        return
    a.p = ps[0]
    X32, y = _data(a.n, a.p)
    X64 = X32.astype(np.float64)
    d = np.random.default_rng(1).random(a.n)
    pen = aloocv.L2(1.0)
    clock = clock_for(a.n_jobs)
    rows: dict[str, dict[str, float]] = {"float64": {}, "float32": {}}
    data = {"float64": X64, "float32": X32}
    ops = {
        "hessian_s": lambda X: _hessian(X, d, a.n_jobs),
        "fit_s": lambda X: aloocv.fit(X, y, loss="logistic", penalty=pen, n_jobs=a.n_jobs),
        "loo_s": lambda X: aloocv.loo(X, y, loss="logistic", penalty=pen, n_jobs=a.n_jobs),
    }
    if clock == "wall":
        print(f"wall seconds; before: {load_line()}")
    with single_threaded() if clock == "cpu" else nullcontext():
        for op, f in ops.items():  # float64 and float32 in rotation
            T = interleaved(
                {k: (lambda f=f, X=X: f(X)) for k, X in data.items()}, a.repeat, clock=clock
            )
            for k in data:
                rows[k][op] = T[k].seconds
    r32 = aloocv.loo(X32, y, loss="logistic", penalty=pen, n_jobs=a.n_jobs)
    r64 = aloocv.loo(X64, y, loss="logistic", penalty=pen, n_jobs=a.n_jobs)
    H32 = _hessian(X32, d, a.n_jobs)
    H64 = _hessian(X64, d, a.n_jobs)
    print(f"n={a.n} p={a.p} n_jobs={a.n_jobs} ({clock} seconds, min of {a.repeat})")
    print(f"{'':10s} {'hessian':>9s} {'fit':>9s} {'loo':>9s}")
    for name, r in rows.items():
        print(f"{name:10s} {r['hessian_s']:9.3f} {r['fit_s']:9.3f} {r['loo_s']:9.3f}")
    f, s = rows["float32"], rows["float64"]
    print(
        f"{'f32/f64':10s} {f['hessian_s'] / s['hessian_s']:9.2f} "
        f"{f['fit_s'] / s['fit_s']:9.2f} {f['loo_s'] / s['loo_s']:9.2f}"
    )

    def rel(u, v):
        return float(np.max(np.abs(u - v)) / max(1e-300, np.max(np.abs(v))))

    print(
        "max rel diff f32 vs f64 (same values): hessian "
        f"{rel(H32, H64):.2e}, loo losses {rel(r32.losses, r64.losses):.2e}, "
        f"coef {rel(r32.fit.coef_, r64.fit.coef_):.2e}"
    )
    for dtype in ("float32", "float64"):
        m = _peak_rss(a.n, a.p, dtype, a.n_jobs)
        extra = m["peak"] - m["before"]
        print(
            f"loo on {dtype} X: peak RSS {m['peak'] / 2**20:.0f} MiB (process, incl. X and "
            f"the interpreter), X {m['X_bytes'] / 2**20:.0f} MiB, peak/X "
            f"{m['peak'] / m['X_bytes']:.2f}, (peak - RSS before loo)/X "
            f"{extra / m['X_bytes']:.2f}"
        )


if __name__ == "__main__":
    main()
