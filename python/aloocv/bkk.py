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
from ._diagnostics import check_finite_result
from ._validation import (
    check_bool,
    check_real_scalar,
    check_vector,
    check_X,
    core_design,
    is_sparse,
    n_threads,
)
from .tuning.optimizers import Adam

__all__ = ["ABKKRegressor", "BKKCriterion", "BKKFamilyCriterion", "BKKRidge", "SBKKRegressor"]


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
        fit_intercept = check_bool(fit_intercept, "fit_intercept")
        X = check_X(X)  # dense float64 in place, or canonical CSR
        n = X.shape[0]
        y = check_vector(y, n, "y")
        nt = n_threads(n_jobs)
        rng = np.random.default_rng(random_state)
        Z = np.empty((n, int(T) + 1))
        Z[:, 0] = y
        for t in range(1, int(T) + 1):
            Z[:, t] = y[rng.permutation(n)]
        with _blas.single_threaded_blas():
            try:
                out = _core.ridge_spectrum(
                    core_design(X), Z, fit_intercept=fit_intercept, n_threads=nt
                )
            except ValueError as exc:
                _raise_if_gram_overflows(X, exc)
                raise
        check_finite_result("BKK", eigenvalues=out.s, projections=out.C, mean=out.mu)
        Zc = Z - Z.mean(axis=0) if fit_intercept else Z
        return cls(s=out.s, C=out.C, zz=np.sum(Zc**2, axis=0), n=n, V=out.V, mu=out.mu)

    def norms(self, lam: float) -> tuple[np.ndarray, np.ndarray]:
        """RMS residual norms of the T + 1 ridge fits and their d/d lambda; an overflow
        (X of huge magnitude: the squares of X^T X's eigenvalues) is a ValueError."""
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            s, c2 = self.s[:, None], self.C**2
            rss = self.zz - np.sum(c2 * (s + 2 * lam) / (s + lam) ** 2, axis=0)
            drss = np.sum(c2 * 2 * lam / (s + lam) ** 3, axis=0)
            rss = np.maximum(rss, 0.0)
            norm = np.sqrt(rss / self.n)
            dnorm = drss / (2 * self.n * np.maximum(norm, 1e-300))
        check_finite_result("BKK", residual_norms=norm, norm_derivatives=dnorm)
        return norm, dnorm

    def value_and_grad(self, log_lam) -> tuple[float, float]:
        """BKK and its derivative in log(lambda) (a scalar, or theta = [log lambda])."""
        lam = float(np.exp(np.ravel(log_lam)[0]))
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


def _raise_if_gram_overflows(X, exc: Exception) -> None:
    """A failed eigendecomposition of X^T X whose entries may exceed float64 (n max|x|^2
    overflows) is reported as that overflow, with the remedy."""
    data = X.data if is_sparse(X) else X
    big = float(np.max(np.abs(data))) if data.size else 0.0
    with np.errstate(over="ignore"):
        bound = X.shape[0] * big * big
    if not np.isfinite(bound):
        raise ValueError(
            f"BKK: X^T X overflows float64 (|X| reaches {big:.3g} over {X.shape[0]} rows), "
            "so its eigendecomposition failed; rescale X (e.g. StandardScaler)"
        ) from exc


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
    history_ : ndarray of shape (n_steps, 2)
        (lambda, criterion) per iteration, ``n_iter_ + 1`` rows.
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
        X, y = _checked_xy(self, X, y)
        _check_adam(self, ("lam0", "learning_rate"))
        ybar, scale, yr = _rescaled(y, self.fit_intercept)
        crit = BKKCriterion.from_data(
            X, yr, self.T, self.random_state, self.fit_intercept, self.n_jobs
        )

        def vg(theta):
            value, grad = crit.value_and_grad(theta[0])
            return value, np.array([grad])

        theta, value, it, hist, path = _adam(
            vg,
            np.array([np.log(self.lam0)]),
            self.learning_rate,
            self.beta1,
            self.beta2,
            self.tol,
            self.max_iter,
        )
        lam = float(np.exp(theta[0]))
        beta = crit.coef(lam) * scale
        self.alpha_ = lam
        self.coef_ = beta
        self.intercept_ = ybar - float(crit.mu @ beta) if self.fit_intercept else 0.0
        self.criterion_ = value
        self.n_iter_ = it
        self.history_ = np.column_stack([np.exp(path[:, 0]), hist])
        check_finite_result("BKKRidge", criterion=value, coef=beta, intercept=self.intercept_)
        return self

    def predict(self, X: ArrayLike) -> np.ndarray:
        check_is_fitted(self, "coef_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return X @ self.coef_ + self.intercept_


def _sigmoid(t):
    return 0.5 * (1.0 + np.tanh(0.5 * t))


@dataclass
class BKKFamilyCriterion:
    """BKK (eq. 5) on the ridge (eq. 8), quasi-sparse (Definition 1) and interpolated
    (Definition 2) families, with analytic gradients.

    Parameters are packed as ``theta = (log lambda, log kappa, gamma_1..p, mu)``;
    ``family`` selects which of them matter: ``"ridge"`` (lambda), ``"sparse"``
    (lambda, kappa, gamma), ``"interp"`` (all). For a response z with c = X_c^T z and
    G = X_c^T X_c: beta^R = (G + lambda I)^{-1} c; beta^S = S u with
    u = (S G S + lambda I)^{-1} S c and S = diag(sigmoid(kappa (var_gamma + 0.01)
    (gamma - mean gamma))) where var_gamma = sum_j (gamma_j - mean gamma)^2;
    beta^A = sigmoid(mu) beta^R + (1 - sigmoid(mu)) beta^S; and
    RSS = ||z||^2 - 2 c^T beta + beta^T G beta. All T + 1 responses are columns.
    """

    G: np.ndarray  # (p, p)
    C: np.ndarray  # (p, m) X_c^T Z
    zz: np.ndarray  # (m)
    n: int
    family: str

    @classmethod
    def from_data(
        cls, X, y, T=30, random_state=0, fit_intercept=True, family="ridge", n_jobs=None
    ) -> BKKFamilyCriterion:
        if family not in ("ridge", "sparse", "interp"):
            raise ValueError(f"family must be 'ridge', 'sparse' or 'interp', got {family!r}")
        base = BKKCriterion.from_data(X, y, T, random_state, fit_intercept, n_jobs)
        G = (base.V * base.s) @ base.V.T
        return cls(G=G, C=base.V @ base.C, zz=base.zz, n=base.n, family=family)

    def initial(self, lam0=1e3, kappa0=0.1, mu0=0.0) -> np.ndarray:
        p = self.G.shape[0]
        return np.concatenate([[np.log(lam0), np.log(kappa0)], np.zeros(p), [mu0]])

    def _scales(self, theta):
        kappa = np.exp(theta[1])
        gamma = theta[2:-1]
        gc = gamma - gamma.mean()
        var = float(np.sum(gc**2))
        a = kappa * (var + 1e-2) * gc
        return _sigmoid(a), kappa, gc, var

    def betas(self, theta):
        """(beta (p, m), pieces for the gradient)."""
        lam = np.exp(theta[0])
        p = self.G.shape[0]
        out = {"lam": lam}
        if self.family in ("ridge", "interp"):
            BR = np.linalg.solve(self.G + lam * np.eye(p), self.C)
            out["BR"] = BR
        if self.family in ("sparse", "interp"):
            s, kappa, gc, var = self._scales(theta)
            A = s[:, None] * self.G * s[None, :] + lam * np.eye(p)
            U = np.linalg.solve(A, s[:, None] * self.C)
            out.update(s=s, kappa=kappa, gc=gc, var=var, A=A, U=U, BS=s[:, None] * U)
        if self.family == "ridge":
            beta = out["BR"]
        elif self.family == "sparse":
            beta = out["BS"]
        else:
            sig = _sigmoid(theta[-1])
            out["sig"] = sig
            beta = sig * out["BR"] + (1 - sig) * out["BS"]
        return beta, out

    def value_and_grad(self, theta) -> tuple[float, np.ndarray]:
        theta = np.asarray(theta, dtype=np.float64)
        beta, o = self.betas(theta)
        G, C = self.G, self.C
        GB = G @ beta
        rss = np.maximum(self.zz - 2 * np.sum(C * beta, 0) + np.sum(beta * GB, 0), 0.0)
        norm = np.sqrt(rss / self.n)
        Q = 2 * (GB - C)  # dRSS / dbeta, per response
        m = C.shape[1]
        dR = np.zeros((theta.size, m))  # dRSS / dtheta per response
        lam = o["lam"]
        wR = 1.0 if self.family == "ridge" else (o.get("sig", 0.0))
        wS = 1.0 if self.family == "sparse" else (1.0 - o.get("sig", 1.0))
        if self.family in ("ridge", "interp"):
            dBR = -np.linalg.solve(G + lam * np.eye(G.shape[0]), o["BR"])  # d beta^R / d lam
            dR[0] += wR * lam * np.sum(Q * dBR, 0)
        if self.family in ("sparse", "interp"):
            s, A, U = o["s"], o["A"], o["U"]
            dU = -np.linalg.solve(A, U)  # du / d lam
            dR[0] += wS * lam * np.sum(Q * (s[:, None] * dU), 0)
            V = np.linalg.solve(A, s[:, None] * Q)  # A^{-1} S q (A symmetric)
            GSU = G @ (s[:, None] * U)
            GSV = G @ (s[:, None] * V)
            grad_s = Q * U + V * (C - GSU) - U * GSV  # (p, m): dRSS / ds_j
            g_a = wS * grad_s * (s * (1 - s))[:, None]  # dRSS / da_j
            kappa, gc, var = o["kappa"], o["gc"], o["var"]
            dR[1] += kappa * np.sum(g_a * ((var + 1e-2) * gc)[:, None], 0)  # d/d log kappa
            gbar = g_a.mean(0)
            dR[2:-1] += kappa * (
                2 * gc[:, None] * np.sum(g_a * gc[:, None], 0)[None, :]
                + (var + 1e-2) * (g_a - gbar[None, :])
            )
        if self.family == "interp":
            sig = o["sig"]
            dR[-1] += sig * (1 - sig) * np.sum(Q * (o["BR"] - o["BS"]), 0)
        dnorm = dR / (2 * self.n * np.maximum(norm, 1e-300))[None, :]
        value = norm[0]
        grad = dnorm[:, 0].copy()
        if m > 1:
            gap = 1.0 - norm[1:]
            value += float(np.mean(np.abs(gap)))
            grad += np.mean(-np.sign(gap)[None, :] * dnorm[:, 1:], axis=1)
        return float(value), grad


def _checked_xy(est, X, y) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bookkeeping (n_features_in_, its messages, dense C-order float64)
    after the sparse structure check, then the validation layer on its result."""
    if is_sparse(X):
        check_X(X)  # before any conversion: scipy's crash on out-of-range indices
    X, y = validate_data(est, X, y, y_numeric=True, dtype=np.float64, order="C")
    X = check_X(X)
    y = check_vector(y, X.shape[0], "y")
    check_bool(est.fit_intercept, "fit_intercept")
    return X, y


def _check_adam(est, positive: tuple[str, ...]) -> None:
    """Shared checks of the Adam settings of the BKK estimators."""
    if isinstance(est.T, bool) or not isinstance(est.T, (int, np.integer)) or est.T < 0:
        raise ValueError(f"T must be a non-negative integer, got {est.T!r}")
    for name in ("beta1", "beta2", "tol", *positive):
        check_real_scalar(getattr(est, name), name)
    for name in positive:
        val = getattr(est, name)
        if not (np.isfinite(val) and val > 0):
            raise ValueError(f"{name} must be positive, got {val!r}")
    if est.tol < 0:
        raise ValueError(f"tol must be non-negative, got {est.tol!r}")
    if not (0 <= est.beta1 < 1 and 0 <= est.beta2 < 1):
        raise ValueError("beta1 and beta2 must lie in [0, 1)")
    if (
        isinstance(est.max_iter, bool)
        or not isinstance(est.max_iter, (int, np.integer))
        or (est.max_iter < 1)
    ):
        raise ValueError(f"max_iter must be a positive integer, got {est.max_iter!r}")


def _rescaled(y: np.ndarray, fit_intercept: bool) -> tuple[float, float, np.ndarray]:
    """(mean, RMS scale, centered and rescaled y): the frame of the BKK criteria."""
    y = np.asarray(y, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        ybar = float(y.mean()) if fit_intercept else 0.0
        scale = float(np.sqrt(np.mean((y - ybar) ** 2)))
        if not np.isfinite(scale):  # the squares overflowed: the same norm, computed scaled
            m = float(np.max(np.abs(y - ybar)))
            scale = m * float(np.sqrt(np.mean(((y - ybar) / m) ** 2)))
    check_finite_result("BKK", response_mean=ybar, response_scale=scale)
    scale = scale if scale > 0 else 1.0
    return ybar, scale, (y - ybar) / scale


def _adam(value_and_grad, theta, lr, beta1, beta2, tol, max_iter):
    """Adam (the tuning package's) until the criterion changes by less than tol; (theta,
    value, iterations, criterion per iteration, theta per iteration). log-scale entries
    theta[:2] are kept within [-30, 30]. An overflow (huge data or learning rate) is a
    ValueError, never a NaN criterion."""

    def checked(theta):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            value, grad = value_and_grad(theta)
        check_finite_result("BKK (Adam)", theta=theta, criterion=value, gradient=grad)
        return value, grad

    value, grad = checked(theta)
    adam = Adam(lr, beta1, beta2, eps=1e-8)
    hist = [value]
    path = [theta.copy()]
    for _ in range(int(max_iter)):
        with np.errstate(over="ignore", invalid="ignore"):
            theta = theta - adam.step(grad)
        theta[:2] = np.clip(theta[:2], -30.0, 30.0)
        new, grad = checked(theta)
        hist.append(new)
        path.append(theta.copy())
        done = abs(new - value) < tol
        value = new
        if done:
            break
    return theta, value, adam.t, np.asarray(hist), np.asarray(path)


class _BKKFamilyRegressor(RegressorMixin, BaseEstimator):
    _family = "sparse"

    def __init__(
        self,
        T: int = 30,
        lam0: float = 1e3,
        kappa0: float = 0.1,
        mu0: float = 0.0,
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
        self.kappa0 = kappa0
        self.mu0 = mu0
        self.learning_rate = learning_rate
        self.beta1 = beta1
        self.beta2 = beta2
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.random_state = random_state
        self.n_jobs = n_jobs

    def fit(self, X: ArrayLike, y: ArrayLike):
        """Minimize the criterion over all parameters by Adam, then set the model."""
        X, y = _checked_xy(self, X, y)
        _check_adam(self, ("lam0", "kappa0", "learning_rate"))
        check_real_scalar(self.mu0, "mu0")
        ybar, scale, yr = _rescaled(y, self.fit_intercept)
        crit = BKKFamilyCriterion.from_data(
            X, yr, self.T, self.random_state, self.fit_intercept, self._family, self.n_jobs
        )
        theta0 = crit.initial(self.lam0, self.kappa0, self.mu0)
        theta, value, it, hist, _ = _adam(
            crit.value_and_grad,
            theta0,
            self.learning_rate,
            self.beta1,
            self.beta2,
            self.tol,
            self.max_iter,
        )
        beta, o = crit.betas(theta)
        coef = beta[:, 0] * scale
        mu = X.mean(axis=0) if self.fit_intercept else np.zeros(X.shape[1])
        self.coef_ = coef
        self.intercept_ = ybar - float(mu @ coef) if self.fit_intercept else 0.0
        self.alpha_ = float(np.exp(theta[0]))
        self.kappa_ = float(np.exp(theta[1]))
        self.gamma_ = theta[2:-1].copy()
        self.mu_ = float(theta[-1])
        self.scales_ = o.get("s", np.ones(X.shape[1]))
        self.criterion_ = value
        self.n_iter_ = it
        self.history_ = hist
        check_finite_result(
            type(self).__name__, criterion=value, coef=coef, intercept=self.intercept_
        )
        return self

    def predict(self, X: ArrayLike) -> np.ndarray:
        check_is_fitted(self, "coef_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return X @ self.coef_ + self.intercept_


class SBKKRegressor(_BKKFamilyRegressor):
    """The quasi-sparse family (Definition 1) tuned by the BKK criterion.

    ``beta^S = S beta^R(lambda, X S, Y)`` with the quasi-sparsifying diagonal
    ``S(kappa, gamma)``; lambda, kappa and the p gammas are tuned jointly by Adam on the
    BKK criterion (log lambda, log kappa; the paper's settings and initial values:
    lambda 1e3, kappa 0.1, gamma 0). Attributes: ``coef_``, ``intercept_``, ``alpha_``,
    ``kappa_``, ``gamma_``, ``scales_`` (the diagonal of S), ``criterion_``,
    ``n_iter_``.
    """

    _family = "sparse"


class ABKKRegressor(_BKKFamilyRegressor):
    """The interpolated family (Definition 2): ``sigmoid(mu) beta^R + (1 - sigmoid(mu))
    beta^S``, all of lambda, kappa, gamma and mu tuned by Adam on the BKK criterion
    (initial mu 0). Attributes as :class:`SBKKRegressor` plus ``mu_``."""

    _family = "interp"
