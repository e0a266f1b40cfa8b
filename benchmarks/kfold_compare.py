"""Approximate 10-fold CV against exact 10-fold CV, side by side in one run.

    python benchmarks/kfold_compare.py            # logistic n=50000, p=200 (a minute or two)
    python benchmarks/kfold_compare.py --quick    # n=5000, p=50
    python benchmarks/kfold_compare.py --n-jobs 1

Both estimates use the same folds and the same full-data fit:

* ``aloocv.kfold(method="alo")``: the fit, then one rank-q downdate of its Hessian per
  fold (a Newton step on the exact fold-out Hessian), no refit;
* ``aloocv.kfold(method="exact")``: the fit, then one refit per fold (the fold's
  weights set to zero), warm-started from the full fit and solved to the same tol.

Printed (``benchmarks/_timing.py``): the time of each route, the minimum of ``--repeat``
calls of both in rotation after an untimed warm-up, in CPU seconds with ``--n-jobs 1``
(the default; BLAS limited to one thread too) or wall seconds otherwise (with the load
average), the split
of each call into the full fit and the per-fold work (``KFoldResult.timings``), the
Hessian passes of the full fit, the ratio approximate / exact (issue 13 target: <= 0.1),
its floor fit / (fit + refits) (both routes start from the same full fit, so no per-fold
work however cheap takes the ratio below it), and per-fold means of both with their
relative differences (target: every fold mean within 2 % of the exact one).
"""

from __future__ import annotations

import argparse
import os
import platform
from contextlib import nullcontext

import numpy as np
from _timing import clock_for, interleaved, load_line, single_threaded
from threadpoolctl import threadpool_info

import aloocv


def logistic_data(n: int, p: int, seed: int = 0, scale: float = 2.0):
    """Gaussian design and Bernoulli labels from a logistic model with ||beta|| ~ scale."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = rng.standard_normal(p) / np.sqrt(p) * scale
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-X @ beta))).astype(np.float64)
    return X, y


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="n=5000, p=50")
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--p", type=int, default=None)
    ap.add_argument("--folds", type=int, default=10)
    ap.add_argument("--lam", type=float, default=1.0)
    ap.add_argument("--tol", type=float, default=1e-8)
    ap.add_argument("--repeat", type=int, default=3, help="timed calls of each route")
    ap.add_argument(
        "--n-jobs", type=int, default=1, help="threads (default 1: CPU seconds; 0: all cores)"
    )
    args = ap.parse_args(argv)
    args.n_jobs = args.n_jobs or None
    clock = clock_for(args.n_jobs)
    n = args.n or (5000 if args.quick else 50000)
    p = args.p or (50 if args.quick else 200)
    K = args.folds

    blas = ", ".join(f"{b['internal_api']} ({b['num_threads']} thr)" for b in threadpool_info())
    print(
        f"aloocv {aloocv.__version__}, numpy {np.__version__}, python "
        f"{platform.python_version()}, {os.cpu_count()} cores, n_jobs={args.n_jobs}; "
        f"BLAS: {blas or 'none'}"
    )
    print(f"logistic n={n} p={p} lambda={args.lam} tol={args.tol}, {K} shuffled folds")
    X, y = logistic_data(n, p, seed=8)
    pen = aloocv.L2(args.lam)
    kw = dict(loss="logistic", penalty=pen, n_folds=K, tol=args.tol, n_jobs=args.n_jobs)

    if clock == "wall":
        print(f"wall seconds; before: {load_line()}")
    with single_threaded() if clock == "cpu" else nullcontext():
        T = interleaved(
            {
                "alo": lambda: aloocv.kfold(X, y, method="alo", **kw),
                "exact": lambda: aloocv.kfold(X, y, method="exact", **kw),
            },
            args.repeat,
            clock=clock,
        )
    t_alo, a, t_ex, e = T["alo"].seconds, T["alo"].result, T["exact"].seconds, T["exact"].result
    if clock == "wall":
        print(f"after: {load_line()}")
    assert np.array_equal(a.folds, e.folds)

    print()
    print(
        f"{'':14s}{clock + ' (s)':>10s}{'full fit':>10s}{'per fold':>10s}"
        f"{'fit H':>7s}{'mean':>12s}{'stderr':>11s}"
    )
    for name, t, r in (("approximate", t_alo, a), ("exact", t_ex, e)):
        print(
            f"{name:14s}{t:10.3f}{r.timings['fit']:10.3f}{r.timings['folds']:10.3f}"
            f"{r.fit.hessian_passes_:7d}{r.mean:12.6f}{r.stderr:11.2e}"
        )
    print(f"(per fold: {K} rank-q downdates for approximate, {K} warm-started refits for exact;")
    print(" full fit and per fold: wall times; fit H: Hessian passes of the full fit)")
    print()
    sizes = np.bincount(a.folds, minlength=K)
    rel = (a.fold_means - e.fold_means) / e.fold_means
    print(f"{'fold':>4s}{'q':>7s}{'approximate':>14s}{'exact':>12s}{'rel. diff':>12s}")
    for k in range(K):
        print(f"{k:4d}{sizes[k]:7d}{a.fold_means[k]:14.6f}{e.fold_means[k]:12.6f}{rel[k]:12.2e}")
    print(f"{'all':>4s}{n:7d}{a.mean:14.6f}{e.mean:12.6f}{(a.mean - e.mean) / e.mean:12.2e}")
    print()
    ratio = t_alo / t_ex
    beyond = e.timings["folds"] / max(a.timings["folds"], 1e-9)
    floor = e.timings["fit"] / (e.timings["fit"] + e.timings["folds"])
    err = float(np.max(np.abs(rel)))
    met = "met" if ratio <= 0.1 else "NOT met"
    print(f"time approximate / exact, whole calls:        {ratio:8.3f}  (target <= 0.1: {met})")
    print(f"floor of that ratio, fit / (fit + refits):    {floor:8.3f}")
    print(f"time exact / approximate, per-fold work only: {beyond:8.1f}x")
    met = "met" if err <= 0.02 else "NOT met"
    print(f"max relative fold-mean difference:            {err:10.2e} (target <= 2e-02: {met})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
