"""asv benchmarks on realistic designs (issue 13): correlated columns, unequal scales,
rare positives and sparse one-hot blocks, logistic loss.

Small sizes (n = 5000) so that ``asv run --quick`` stays fast; ``benchmarks/compare.py
--only designs`` has the side-by-side comparisons with the peers at full size.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

import aloocv

from ._jobs import JOBS, _Job

N = 5000
P = 50
CS = np.logspace(-4, 4, 10)


def _labels(rng: np.random.Generator, eta: np.ndarray) -> np.ndarray:
    return (rng.random(eta.shape[0]) < 1.0 / (1.0 + np.exp(-eta))).astype(np.float64)


def design(kind: str, n: int = N, p: int = P, seed: int = 0):
    """The design ``kind`` and its logistic labels.

    ``ar1``: AR(1) columns with rho 0.9; ``scales``: Gaussian columns scaled log-uniformly
    over 3 decades; ``rare``: ~1.5% positives; ``onehot``: CSR one-hot blocks of
    categoricals with 10, 50 and 200 levels plus 3 numeric columns (p = 263).
    """
    rng = np.random.default_rng(seed)
    if kind == "onehot":
        blocks, eta = [], np.full(n, -1.0)
        for L in (10, 50, 200):
            pr = 1.0 / np.arange(1, L + 1) ** 1.1
            codes = rng.choice(L, size=n, p=pr / pr.sum())
            eta += rng.standard_normal(L)[codes] * 0.7
            blocks.append(sp.csr_matrix((np.ones(n), (np.arange(n), codes)), shape=(n, L)))
        num = rng.standard_normal((n, 3))
        eta += num @ rng.standard_normal(3) * 0.5
        blocks.append(sp.csr_matrix(num))
        return sp.hstack(blocks, format="csr"), _labels(rng, eta)
    X = rng.standard_normal((n, p))
    beta = rng.standard_normal(p) / np.sqrt(p) * 2.0
    b0 = 0.0
    if kind == "ar1":
        for j in range(1, p):
            X[:, j] = 0.9 * X[:, j - 1] + math.sqrt(1 - 0.81) * X[:, j]
    elif kind == "scales":
        s = 10.0 ** rng.uniform(-1.5, 1.5, p)
        X *= s
        beta /= s
    elif kind == "rare":
        b0 = -math.log(1 / 0.015 - 1) - 0.5 * float(np.var(X @ beta))
    return X, _labels(rng, X @ beta + b0)


class Designs(_Job):
    """Fit, ALO including the fit, and ``ALOLogisticRegressionCV`` (10 Cs) per design."""

    params = (["ar1", "scales", "rare", "onehot"],)
    param_names = ("design",)
    timeout = 120

    def make(self, kind: str) -> None:
        self.X, self.y = design(kind)

    def time_fit(self, kind: str) -> None:
        aloocv.fit(self.X, self.y, loss="logistic", penalty=aloocv.L2(1.0), tol=1e-6, n_jobs=JOBS)

    def time_loo_alo(self, kind: str) -> None:
        aloocv.loo(self.X, self.y, loss="logistic", penalty=aloocv.L2(1.0), tol=1e-6, n_jobs=JOBS)

    def time_logistic_cv(self, kind: str) -> None:
        aloocv.ALOLogisticRegressionCV(Cs=CS, n_jobs=JOBS).fit(self.X, self.y)

    def track_cv_newton_iterations_per_c(self, kind: str) -> float:
        """Newton iterations per candidate C (each one Hessian pass over X)."""
        est = aloocv.ALOLogisticRegressionCV(Cs=CS, n_jobs=JOBS).fit(self.X, self.y)
        return float(np.sum(est.n_iter_)) / len(CS)

    track_cv_newton_iterations_per_c.unit = "iterations"


class DesignPeers(_Job):
    """scikit-learn's ``LogisticRegressionCV(cv=5)`` on the same designs, for reference."""

    params = (["ar1", "scales", "rare", "onehot"], ["lbfgs", "newton-cholesky"])
    param_names = ("design", "solver")
    timeout = 300

    def make(self, kind: str, solver: str) -> None:
        self.X, self.y = design(kind)

    def time_sklearn_logistic_cv(self, kind: str, solver: str) -> None:
        import warnings

        from sklearn.linear_model import LogisticRegressionCV

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            LogisticRegressionCV(Cs=CS, cv=5, solver=solver).fit(self.X, self.y)
