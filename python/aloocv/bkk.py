"""The ER-G / BKK criterion on the ridge family (Lounici et al.), tuned by Adam.

BKK(lambda) = ||Y - X beta(lambda, Y)||_2
              + 1/T sum_t | 1 - ||pi_t(Y) - X beta(lambda, pi_t(Y))||_2 |        (eq. 5)

with ``||v||_2 = sqrt(mean(v^2))`` (the square-root quadratic loss), the response
centered and rescaled to ``||Y||_2 = 1``, ``beta(lambda, Z) = (X^T X + lambda I)^{-1}
X^T Z`` the ridge family (eq. 8) on centered features, and T random permutations
pi_t of the response. The T + 1 ridge solves share one eigendecomposition of
``X^T X`` (the core's batched solves), after which the criterion and its analytic
gradient cost O(p (T + 1)) per Adam iteration. With T = 0 it is the empirical risk.

Adam runs on ``log(lambda)`` (so that lambda stays positive) with the paper's
settings (its Table 1): tolerance 1e-4, at most 1e3 iterations, learning rate 0.5,
beta1 0.5, beta2 0.9, T = 30, initial lambda 1e3.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from . import _blas, _core
from ._validation import core_design

__all__ = ["BKKCriterion", "BKKRidge"]


@dataclass
class BKKCriterion:
    """BKK on the ridge family for fixed data and permutations (eq. 5 and 8).

    Build it with :meth:`from_data`; :meth:`value_and_grad` returns the criterion and
    its derivative with respect to ``log(lambda)``.
    """

    s: np.ndarray  # (p) eigenvalues of X_c^T X_c
    C: np.ndarray  # (p, T + 1) V^T X_c^T [Y, pi_1(Y), ...]
    zz: np.ndarray  # (T + 1) ||z_j||^2 (sums)
    n: int
    V: np.ndarray
    mu: np.ndarray

    @classmethod
    def from_data(
        cls,
        X,
        y: np.ndarray,
        T: int = 30,
        random_state=0,
        fit_intercept=True,
        n_jobs: int | None = None,
    ) -> BKKCriterion:
        if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or T < 0:
            raise ValueError(f"T must be a non-negative integer, got {T!r}")
        n = y.shape[0]
        rng = np.random.default_rng(random_state)
        Z = np.empty((n, int(T) + 1))
        Z[:, 0] = y
        for t in range(1, int(T) + 1):
            Z[:, t] = y[rng.permutation(n)]
        with _blas.single_threaded_blas():
            out = _core.ridge_spectrum(
                core_design(X), Z, bool(fit_intercept), 0 if n_jobs is None else int(n_jobs)
            )
        Zc = Z - Z.mean(axis=0) if fit_intercept else Z
        return cls(s=out["s"], C=out["C"], zz=np.sum(Zc**2, axis=0), n=n, V=out["V"], mu=out["mu"])

    def norms(self, lam: float) -> tuple[np.ndarray, np.ndarray]:
        """RMS residual norms of the T + 1 ridge fits and their d/d lambda."""
        s, c2 = self.s[:, None], self.C**2
        rss = self.zz - np.sum(c2 * (s + 2 * lam) / (s + lam) ** 2, axis=0)
        drss = np.sum(c2 * 2 * lam / (s + lam) ** 3, axis=0)
        rss = np.maximum(rss, 0.0)
        norm = np.sqrt(rss / self.n)
        dnorm = drss / (2 * self.n * np.maximum(norm, 1e-300))
        return norm, dnorm

    def value_and_grad(self, log_lam: float) -> tuple[float, float]:
        lam = float(np.exp(log_lam))
        norm, dnorm = self.norms(lam)
        value = norm[0]
        grad = dnorm[0]
        if norm.size > 1:
            gap = 1.0 - norm[1:]
            value += float(np.mean(np.abs(gap)))
            grad += float(np.mean(-np.sign(gap) * dnorm[1:]))
        return float(value), float(grad * lam)

    def coef(self, lam: float, column: int = 0) -> np.ndarray:
        return self.V @ (self.C[:, column] / (self.s + lam))


class BKKRidge(RegressorMixin, BaseEstimator):
    """Ridge regression with lambda chosen by the BKK criterion (no hold-out data).

    Parameters
    ----------
    T : int
        Number of response permutations (0: plain empirical risk).
    lam0 : float
        Initial lambda (the paper: 1e3).
    learning_rate, beta1, beta2 : float
        Adam on log(lambda) (the paper: 0.5, 0.5, 0.9).
    tol : float
        Stop when the criterion changes by less than ``tol`` (the paper: 1e-4).
    max_iter : int
        At most this many Adam iterations (the paper: 1e3).
    fit_intercept : bool
    random_state : int, optional
        Seeds the permutations.
    n_jobs : int, optional

    Attributes
    ----------
    alpha_ : float
        The selected lambda, in ``Ridge(alpha)``'s convention for the rescaled response.
    coef_, intercept_
        In the original units of y.
    criterion_ : float
    n_iter_ : int
    history_ : ndarray of shape (n_iter_ + 1, 2)
        (lambda, criterion) per iteration.
    """

    def __init__(
        self,
        T: int = 30,
        lam0: float = 1e3,
        learning_rate: float = 0.5,
        beta1: float = 0.5,
        beta2: float = 0.9,
        tol: float = 1e-4,
        max_iter: int = 1000,
        fit_intercept: bool = True,
        random_state: int | None = 0,
        n_jobs: int | None = None,
    ):
        self.T = T
        self.lam0 = lam0
        self.learning_rate = learning_rate
        self.beta1 = beta1
        self.beta2 = beta2
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.random_state = random_state
        self.n_jobs = n_jobs

    def fit(self, X: ArrayLike, y: ArrayLike) -> BKKRidge:
        """Minimize BKK over lambda by Adam, then fit the ridge at that lambda."""
        X, y = validate_data(self, X, y, y_numeric=True, dtype=np.float64, order="C")
        if not (np.isfinite(self.lam0) and self.lam0 > 0):
            raise ValueError(f"lam0 must be positive, got {self.lam0!r}")
        if not (self.learning_rate > 0):
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate!r}")
        if not (0 <= self.beta1 < 1 and 0 <= self.beta2 < 1):
            raise ValueError("beta1 and beta2 must lie in [0, 1)")
        if (
            isinstance(self.max_iter, bool)
            or not isinstance(self.max_iter, (int, np.integer))
            or (self.max_iter < 1)
        ):
            raise ValueError(f"max_iter must be a positive integer, got {self.max_iter!r}")
        y = np.asarray(y, dtype=np.float64)
        ybar = float(y.mean()) if self.fit_intercept else 0.0
        scale = float(np.sqrt(np.mean((y - ybar) ** 2)))
        if not scale > 0:
            scale = 1.0
        yr = (y - ybar) / scale
        crit = BKKCriterion.from_data(
            X, yr, self.T, self.random_state, self.fit_intercept, self.n_jobs
        )
        u = float(np.log(self.lam0))
        m = v = 0.0
        value, grad = crit.value_and_grad(u)
        hist = [(np.exp(u), value)]
        it = 0
        for it in range(1, int(self.max_iter) + 1):
            m = self.beta1 * m + (1 - self.beta1) * grad
            v = self.beta2 * v + (1 - self.beta2) * grad * grad
            step = (
                self.learning_rate
                * (m / (1 - self.beta1**it))
                / (np.sqrt(v / (1 - self.beta2**it)) + 1e-8)
            )
            u = float(np.clip(u - step, -30.0, 30.0))
            new, grad = crit.value_and_grad(u)
            hist.append((np.exp(u), new))
            done = abs(new - value) < self.tol
            value = new
            if done:
                break
        lam = float(np.exp(u))
        beta = crit.coef(lam) * scale
        self.alpha_ = lam
        self.coef_ = beta
        self.intercept_ = ybar - float(crit.mu @ beta) if self.fit_intercept else 0.0
        self.criterion_ = value
        self.n_iter_ = it
        self.history_ = np.asarray(hist)
        return self

    def predict(self, X: ArrayLike) -> np.ndarray:
        check_is_fitted(self, "coef_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return X @ self.coef_ + self.intercept_
