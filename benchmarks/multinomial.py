"""Multinomial logistic regression: aloocv's fit and ALO against scikit-learn.

    python benchmarks/multinomial.py [--n 50000 --p 100 --k 10 --lam 1.0]

Prints wall times (best of --repeat) of aloocv.fit, of aloocv.loo (fit + ALO; the ALO
cost on top of the fit is the difference), and of scikit-learn's multinomial
LogisticRegression(C=1/lam) with lbfgs and newton-cholesky at their default tol and at
tol=1e-8, with each one's max coefficient distance from aloocv's fit (intercepts
centered).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.linear_model import LogisticRegression

import aloocv


def best(f, repeat):
    out, ts = None, []
    for _ in range(repeat):
        t = time.perf_counter()
        out = f()
        ts.append(time.perf_counter() - t)
    return out, min(ts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50000)
    ap.add_argument("--p", type=int, default=100)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--lam", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--n-jobs", type=int, default=None)
    ap.add_argument("--solvers", default="lbfgs,newton-cholesky")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((a.n, a.p))
    W = rng.standard_normal((a.k, a.p)) / np.sqrt(a.p)
    eta = X @ W.T * 2.0
    P = np.exp(eta - eta.max(1, keepdims=True))
    P /= P.sum(1, keepdims=True)
    y = (P.cumsum(1) > rng.random(a.n)[:, None]).argmax(1)
    pen = aloocv.L2(a.lam)
    f, t_fit = best(
        lambda: aloocv.fit(X, y, loss="multinomial", penalty=pen, n_jobs=a.n_jobs), a.repeat
    )
    r, t_loo = best(
        lambda: aloocv.loo(X, y, loss="multinomial", penalty=pen, n_jobs=a.n_jobs), a.repeat
    )
    print(f"n={a.n} p={a.p} K={a.k} lam={a.lam} n_jobs={a.n_jobs}")
    print(f"aloocv fit           {t_fit:8.3f} s  ({f.n_iter_} Newton iterations)")
    print(
        f"aloocv loo (fit+ALO) {t_loo:8.3f} s  -> ALO on top {t_loo - t_fit:.3f} s "
        f"= {(t_loo - t_fit) / t_fit:.2f}x the fit; ALO mean {r.mean:.5f}"
    )
    for solver in a.solvers.split(","):
        for tol in (1e-4, 1e-8):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m, t = best(
                    lambda solver=solver, tol=tol: LogisticRegression(
                        C=1 / a.lam, solver=solver, tol=tol, max_iter=10000
                    ).fit(X, y),
                    a.repeat,
                )
            d = np.abs(m.coef_ - f.coef_).max()
            print(
                f"sklearn {solver:16s} tol={tol:g} {t:8.3f} s  (aloocv fit = "
                f"{t_fit / t:.2f}x; max|coef diff| {d:.1e})"
            )


if __name__ == "__main__":
    main()
