"""Multinomial logistic regression: aloocv's fit and ALO against scikit-learn.

    python benchmarks/multinomial.py [--n 50000 --p 100 --k 10 --lam 1.0]

Prints the times of aloocv.fit, of aloocv.loo (fit + ALO; the ALO cost on top of the
fit is the difference), and of scikit-learn's multinomial LogisticRegression(C=1/lam)
with lbfgs and newton-cholesky at their default tol and at tol=1e-8, with each one's max
coefficient distance from aloocv's fit (intercepts centered). Timing
(``benchmarks/_timing.py``): all calls in rotation after a warm-up, the minimum of
``--repeat``; CPU seconds with ``--n-jobs 1`` (the default; BLAS and scikit-learn
limited to one thread too), wall seconds with the load average otherwise.
"""

from __future__ import annotations

import argparse
import warnings
from contextlib import nullcontext

import numpy as np
from _timing import clock_for, interleaved, load_line, single_threaded
from sklearn.linear_model import LogisticRegression

import aloocv


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50000)
    ap.add_argument("--p", type=int, default=100)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--lam", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument(
        "--n-jobs", type=int, default=1, help="default 1 (CPU seconds); 0: all cores (wall)"
    )
    ap.add_argument("--solvers", default="lbfgs,newton-cholesky")
    a = ap.parse_args()
    a.n_jobs = a.n_jobs or None
    clock = clock_for(a.n_jobs)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((a.n, a.p))
    W = rng.standard_normal((a.k, a.p)) / np.sqrt(a.p)
    eta = X @ W.T * 2.0
    P = np.exp(eta - eta.max(1, keepdims=True))
    P /= P.sum(1, keepdims=True)
    y = (P.cumsum(1) > rng.random(a.n)[:, None]).argmax(1)
    pen = aloocv.L2(a.lam)
    calls = {
        "fit": lambda: aloocv.fit(X, y, loss="multinomial", penalty=pen, n_jobs=a.n_jobs),
        "loo": lambda: aloocv.loo(X, y, loss="multinomial", penalty=pen, n_jobs=a.n_jobs),
    }
    peers = [(s, tol) for s in a.solvers.split(",") for tol in (1e-4, 1e-8)]
    for solver, tol in peers:
        calls[f"{solver} {tol:g}"] = lambda solver=solver, tol=tol: LogisticRegression(
            C=1 / a.lam, solver=solver, tol=tol, max_iter=10000
        ).fit(X, y)
    with single_threaded() if clock == "cpu" else nullcontext(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        T = interleaved(calls, a.repeat, clock=clock)
    f, t_fit = T["fit"].result, T["fit"].seconds
    r, t_loo = T["loo"].result, T["loo"].seconds
    print(
        f"n={a.n} p={a.p} K={a.k} lam={a.lam} n_jobs={a.n_jobs}; {clock} seconds"
        + (f", {load_line()}" if clock == "wall" else "")
    )
    print(f"aloocv fit           {t_fit:8.3f} s  ({f.n_iter_} Newton iterations)")
    print(
        f"aloocv loo (fit+ALO) {t_loo:8.3f} s  -> ALO on top {t_loo - t_fit:.3f} s "
        f"= {(t_loo - t_fit) / t_fit:.2f}x the fit; ALO mean {r.mean:.5f}"
    )
    for solver, tol in peers:
        m, t = T[f"{solver} {tol:g}"].result, T[f"{solver} {tol:g}"].seconds
        d = np.abs(m.coef_ - f.coef_).max()
        print(
            f"sklearn {solver:16s} tol={tol:g} {t:8.3f} s  (aloocv fit = "
            f"{t_fit / t:.2f}x; max|coef diff| {d:.1e})"
        )


if __name__ == "__main__":
    main()
