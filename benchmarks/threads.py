"""Threads: ``n_jobs=None`` against ``n_jobs=1`` on small problems, and nested parallelism
(``cross_val_score(..., n_jobs=2)`` around our estimators), side by side in one run.

    python benchmarks/threads.py            # all measurements (a minute or two)
    python benchmarks/threads.py --repeat 5

1. Small problems (``fit``, ``loo``, ``kfold``, ``tune`` and the estimators at n of a
   few hundred to a few thousand): the minimum wall time of ``n_jobs=None`` and of
   ``n_jobs=1``, calls interleaved (None, 1, None, 1, ...) after one untimed warm-up of
   each so that a load change on a shared machine hits both alike
   (``benchmarks/_timing.py``; wall seconds, since one side is threaded). Target: ratio
   None / 1 <= 1.10 (the core runs loops below ``kSerialFlops`` on the calling thread,
   and ``n_jobs=None`` follows OpenMP's default under threadpoolctl's limits).
2. ``cross_val_score(ALOLogisticRegressionCV(n_jobs=inner), X, y, n_jobs=2)`` with
   ``inner=None`` and ``inner=1``, one run each after one untimed call that starts
   joblib's worker processes (their start-up and imports are shown separately, as
   "cold"): joblib's loky workers set ``OMP_NUM_THREADS`` to their share of the cores,
   which the core's default follows, so both should take the same time. Also
   ``n_jobs=1`` outside for reference.

Printed: the machine (cores, load average before and after) and threadpoolctl's view of
the core's thread pool.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from _timing import interleaved as interleave
from sklearn.model_selection import cross_val_score
from threadpoolctl import threadpool_info

import aloocv


def data(kind: str, n: int, p: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    eta = X @ (rng.standard_normal(p) / np.sqrt(p))
    if kind == "squared":
        return X, eta + 0.5 * rng.standard_normal(n)
    return X, (rng.random(n) < 1 / (1 + np.exp(-2 * eta))).astype(float)


def interleaved(f, repeat: int) -> tuple[float, float]:
    """Minimum wall times of f(None) and f(1), calls interleaved after one warm-up each."""
    T = interleave({"none": lambda: f(None), "one": lambda: f(1)}, repeat, clock="wall")
    return T["none"].seconds, T["one"].seconds


def small_problems(repeat: int) -> list[float]:
    cases = []
    pen = aloocv.L2(1.0)
    for n, p in ((200, 10), (1000, 30), (3000, 50)):
        Xs, ys = data("squared", n, p)
        Xl, yl = data("logistic", n, p)
        cases += [
            (
                f"fit logistic {n}x{p}",
                lambda nj, X=Xl, y=yl: aloocv.fit(X, y, penalty=pen, n_jobs=nj),
            ),
            (
                f"loo logistic {n}x{p}",
                lambda nj, X=Xl, y=yl: aloocv.loo(X, y, penalty=pen, n_jobs=nj),
            ),
            (
                f"kfold(10) logistic {n}x{p}",
                lambda nj, X=Xl, y=yl: aloocv.kfold(X, y, penalty=pen, n_folds=10, n_jobs=nj),
            ),
            (
                f"tune grid(20) logistic {n}x{p}",
                lambda nj, X=Xl, y=yl: aloocv.tune(
                    X, y, penalty=pen, method="grid", grid=np.logspace(-2, 3, 20), n_jobs=nj
                ),
            ),
            (
                f"ALORidgeCV {n}x{p}",
                lambda nj, X=Xs, y=ys: aloocv.ALORidgeCV(n_jobs=nj).fit(X, y),
            ),
            (
                f"ALOLogisticRegressionCV {n}x{p}",
                lambda nj, X=Xl, y=yl: aloocv.ALOLogisticRegressionCV(n_jobs=nj).fit(X, y),
            ),
        ]
    print(f"{'problem':40s} {'n_jobs=None':>12s} {'n_jobs=1':>10s} {'None/1':>8s}")
    ratios = []
    for name, f in cases:
        a, b = interleaved(f, repeat)
        ratios.append(a / b)
        flag = "" if a / b <= 1.10 else "  > 1.10"
        print(f"{name:40s} {a * 1e3:10.2f}ms {b * 1e3:8.2f}ms {a / b:8.2f}{flag}", flush=True)
    print(f"worst None/1 ratio: {max(ratios):.2f} (target <= 1.10)")
    return ratios


def nested(n: int, p: int, first: bool) -> None:
    X, y = data("logistic", n, p, seed=1)
    print(f"\ncross_val_score(ALOLogisticRegressionCV(n_jobs=inner), X, y, cv=5), {n}x{p}")

    def run(inner, outer):
        t0 = time.perf_counter()
        cross_val_score(aloocv.ALOLogisticRegressionCV(n_jobs=inner), X, y, n_jobs=outer)
        return time.perf_counter() - t0

    warm_up = run(1, 2)  # the first call starts the loky workers (processes, imports)
    what = "cold: starts the workers" if first else "untimed warm-up"
    print(f"  outer n_jobs=2, first call ({what})  {warm_up:8.3f}s")
    for outer in (2, 1):
        for inner in (None, 1):
            print(f"  outer n_jobs={outer}, inner n_jobs={inner!s:4s}  {run(inner, outer):8.3f}s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    print(f"cores {os.cpu_count()}, load average {os.getloadavg()}")
    mine = [d for d in threadpool_info() if d["internal_api"] == "aloocv"]
    print(f"threadpoolctl: {mine}")
    small_problems(args.repeat)
    nested(300, 10, first=True)
    nested(2000, 30, first=False)
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
