"""The targets of the matrix-free route (issue 27), measured in one run.

Single-threaded, CPU seconds, interleaved repeats (``_timing.py``), every ratio against a
peer timed in the same run:

1. ``ALOLogisticRegressionCV(Cs=10)`` against ``LogisticRegressionCV(cv=5, Cs=10)`` (lbfgs,
   its fastest solver on these designs) on text-like sparse data, n = 20000 (+ 5000 held
   out), p = 100000, 50 non-zeros per row; the held-out log-loss of both.
2. ``aloocv.fit`` and ``aloocv.loo`` (auto route) against scikit-learn's lbfgs
   ``LogisticRegression(C=1)`` fit on 2000 x 20000 and 20000 x 5000 (30 per row).
3. ``aloocv.fit`` against scikit-learn's lbfgs fit on the dense isotropic n = 1e5, p = 200
   logistic design, and the held-out log-loss of both.
4. Multiclass: ``ALOLogisticRegressionCV(Cs=10)`` (the multinomial model on the matrix-free
   route: Newton-CG fits and randomized K x K leverage blocks) against
   ``LogisticRegressionCV(cv=5, Cs=10)`` lbfgs (multinomial) on text-like sparse data with
   K classes, by default n = 20000 (+ 5000 held out), p = 100000, K = 10, 40 non-zeros per
   row; the held-out log-loss of both (``--multiclass-only`` runs this row alone, with
   ``--n``, ``--p``, ``--classes``, ``--nnz`` to size it).

The text-like generator: Zipf(1.1) column frequencies, exponential values, TF-IDF column
weights, L2-normalized rows, a logistic response on a signal weighted toward frequent
columns (the design of ``benchmarks/wide_sparse.md``'s lead measurements).

Usage: ``python benchmarks/matrix_free_targets.py [--repeat 3] [--skip-lrcv]
[--skip-multiclass] [--multiclass-only] [--n 20000] [--p 100000] [--classes 10] [--nnz 40]``.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import interleaved, load_line, single_threaded

import aloocv


def text_like(n: int, p: int, nnz_row: int, seed: int = 0, a: float = 1.1):
    rng = np.random.default_rng(seed)
    prob = np.arange(1, p + 1, dtype=np.float64) ** -a
    prob /= prob.sum()
    cols = rng.choice(p, size=n * nnz_row, p=prob)
    rows = np.repeat(np.arange(n), nnz_row)
    X = sp.csr_matrix((rng.exponential(1.0, n * nnz_row), (rows, cols)), shape=(n, p))
    X.sum_duplicates()
    df = np.bincount(X.indices, minlength=p)
    X = sp.csr_matrix(X @ sp.diags(np.log((1 + n) / (1 + df)) + 1))
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.csr_matrix(sp.diags(1 / np.maximum(norms, 1e-12)) @ X)
    w = rng.normal(size=p) * (prob * p) ** 0.3
    y = (rng.random(n) < 1 / (1 + np.exp(-3 * (X @ w)))).astype(np.float64)
    return X, y


def text_like_multiclass(n: int, p: int, nnz_row: int, K: int, seed: int = 0):
    """``text_like``'s design with K classes: a softmax response on K signals weighted
    toward frequent columns."""
    X, _ = text_like(n, p, nnz_row, seed)
    rng = np.random.default_rng(seed + 1)
    prob = np.arange(1, p + 1, dtype=np.float64) ** -1.1
    prob /= prob.sum()
    W = rng.normal(size=(p, K)) * ((prob * p) ** 0.3)[:, None]
    eta = 3.0 * np.asarray(X @ W)
    P = np.exp(eta - eta.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    y = (P.cumsum(axis=1) < rng.random(n)[:, None]).sum(axis=1).astype(np.float64)
    return X, y


def multiclass_log_loss(y: np.ndarray, eta: np.ndarray) -> float:
    m = eta.max(axis=1)
    lse = m + np.log(np.exp(eta - m[:, None]).sum(axis=1))
    return float(np.mean(lse - eta[np.arange(y.size), y.astype(np.intp)]))


def multiclass_rows(a: argparse.Namespace) -> list[str]:
    """Target 4: the multiclass row."""
    n, p, K = a.n, a.p, a.classes
    X, y = text_like_multiclass(n + n // 4, p, a.nnz, K)
    Xtr, ytr, Xte, yte = X[:n], y[:n], X[n:], y[n:]
    t = interleaved(
        {
            "alo": lambda: aloocv.ALOLogisticRegressionCV(Cs=10, n_jobs=1).fit(Xtr, ytr),
            "lrcv": lambda: LogisticRegressionCV(Cs=10, cv=5, max_iter=1000).fit(Xtr, ytr),
        },
        a.repeat,
        clock="cpu",
        warmup=False,
    )
    ours, peer = t["alo"].result, t["lrcv"].result
    lo = multiclass_log_loss(yte, np.asarray(Xte @ ours.coef_.T) + ours.intercept_)
    lp = multiclass_log_loss(yte, np.asarray(Xte @ peer.coef_.T) + peer.intercept_)
    name = f"{n} x {p} sparse, K = {K}: ALOLogisticRegressionCV(Cs=10) / LRCV(cv=5) lbfgs"
    return [
        row(name, t["alo"].seconds, t["lrcv"].seconds, "<= 1x"),
        f"| held-out log-loss (C chosen: {float(np.ravel(ours.C_)[0]):.4g} / "
        f"{float(np.ravel(peer.C_)[0]):.4g}) | {lo:.5f} | {lp:.5f} | {lo / lp - 1:+.2%} "
        "| <= +0.5% |",
    ]


def log_loss(y: np.ndarray, eta: np.ndarray) -> float:
    return float(np.mean(np.logaddexp(0.0, eta) - y * eta))


def row(name: str, ours: float, peer: float, target: str) -> str:
    return f"| {name} | {ours:.3f} | {peer:.3f} | {ours / peer:.2f}x | {target} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-lrcv", action="store_true")
    ap.add_argument("--multiclass-only", action="store_true")
    ap.add_argument("--skip-multiclass", action="store_true")
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--p", type=int, default=100000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--nnz", type=int, default=40)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    lines = [
        "| measurement | aloocv (s) | peer (s) | ratio | target |",
        "| --- | --- | --- | --- | --- |",
    ]
    with single_threaded():
        if a.multiclass_only:
            print("\n".join(lines + multiclass_rows(a)))
            print(load_line())
            return
        if not a.skip_lrcv:
            X, y = text_like(25000, 100000, 50)
            Xtr, ytr, Xte, yte = X[:20000], y[:20000], X[20000:], y[20000:]
            t = interleaved(
                {
                    "alo": lambda: aloocv.ALOLogisticRegressionCV(Cs=10, n_jobs=1).fit(Xtr, ytr),
                    "lrcv": lambda: LogisticRegressionCV(Cs=10, cv=5, max_iter=1000).fit(Xtr, ytr),
                },
                a.repeat,
                clock="cpu",
                warmup=False,
            )
            ours, peer = t["alo"].result, t["lrcv"].result
            lo = log_loss(yte, Xte @ ours.coef_.ravel() + ours.intercept_[0])
            lp = log_loss(yte, Xte @ peer.coef_.ravel() + peer.intercept_[0])
            lines.append(
                row(
                    "20000 x 100000 sparse: ALOLogisticRegressionCV(Cs=10) / LRCV(cv=5) lbfgs",
                    t["alo"].seconds,
                    t["lrcv"].seconds,
                    "<= 1x",
                )
            )
            lines.append(
                f"| held-out log-loss (C chosen: {float(ours.C_[0]):.4g} / "
                f"{float(peer.C_[0]):.4g}) | {lo:.5f} | {lp:.5f} | {lo / lp - 1:+.2%} | <= +0.5% |"
            )
        for n, p in ((2000, 20000), (20000, 5000)):
            X, y = text_like(n, p, 30, seed=1)
            kw = {"loss": "logistic", "penalty": aloocv.L2(1.0), "n_jobs": 1}
            t = interleaved(
                {
                    "sk": lambda X=X, y=y: LogisticRegression(C=1.0, max_iter=1000).fit(X, y),
                    "fit": lambda X=X, y=y, kw=kw: aloocv.fit(X, y, **kw),
                    "loo": lambda X=X, y=y, kw=kw: aloocv.loo(X, y, **kw),
                },
                a.repeat,
                clock="cpu",
            )
            sk = t["sk"].seconds
            lines.append(
                row(f"{n} x {p} sparse: fit / sklearn lbfgs fit", t["fit"].seconds, sk, "<= 1.5x")
            )
            lines.append(
                row(f"{n} x {p} sparse: loo / sklearn lbfgs fit", t["loo"].seconds, sk, "<= 3x")
            )
        rng = np.random.default_rng(0)
        X = rng.standard_normal((120000, 200))
        b = rng.standard_normal(200) / np.sqrt(200) * 2
        y = (rng.random(120000) < 1 / (1 + np.exp(-(X @ b)))).astype(np.float64)
        Xtr, ytr, Xte, yte = X[:100000], y[:100000], X[100000:], y[100000:]
        kw = {"loss": "logistic", "penalty": aloocv.L2(1.0), "n_jobs": 1}
        t = interleaved(
            {
                "sk": lambda: LogisticRegression(C=1.0).fit(Xtr, ytr),
                "fit": lambda: aloocv.fit(Xtr, ytr, **kw),
                # both stopping at max|grad| / n <= 1e-8 (scikit-learn's tol is that test on
                # its mean loss; its default is 1e-4, ours 1e-8)
                "sk8": lambda: LogisticRegression(C=1.0, tol=1e-8, max_iter=10000).fit(Xtr, ytr),
            },
            a.repeat,
            clock="cpu",
        )
        f, s = t["fit"].result, t["sk"].result
        lf = log_loss(yte, Xte @ f.coef_ + f.intercept_)
        ls = log_loss(yte, Xte @ s.coef_.ravel() + s.intercept_[0])
        lines.append(
            row(
                "dense 100000 x 200 isotropic: fit / sklearn lbfgs fit",
                t["fit"].seconds,
                t["sk"].seconds,
                "<= 1x",
            )
        )
        lines.append(f"| held-out log-loss (aloocv / sklearn) | {lf:.7f} | {ls:.7f} | | same |")
        lines.append(
            row(
                "dense 100000 x 200: fit / sklearn lbfgs fit, both at tol = 1e-8",
                t["fit"].seconds,
                t["sk8"].seconds,
                "(same stopping test)",
            )
        )
        if not (a.skip_lrcv or a.skip_multiclass):
            lines += multiclass_rows(a)
    print("\n".join(lines))
    print(load_line())


if __name__ == "__main__":
    main()
