"""Multinomial logistic regression (``loss="multinomial"``) and its leave-one-out estimates.

The model is scikit-learn's multinomial ``LogisticRegression(C=1/lam)``: softmax over the
full K-class parametrization, ``coef_`` of shape (K, p), ``intercept_`` of shape (K,),

    min_B  sum_i w_i [logsumexp(eta_i) - eta_{i, y_i}] + lam/2 sum_k ||theta_k||^2,
    eta_i = B x~_i in R^K,

with unpenalized intercepts. The loss does not change when one constant is added to every
intercept; aloocv fixes that gauge by centering the intercepts (``intercept_.sum() == 0``,
scikit-learn's solution), through the term ``tau/2 (sum_k b_k)^2`` in the Newton Hessian.
No leave-one-out quantity depends on it. The core (``cpp/src/multinomial.cpp``) does all
the work; this module validates, dispatches and wraps results.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.exceptions import ConvergenceWarning

from . import _blas, _core
from ._diagnostics import ALO_UNRELIABLE_DH, warn_unreliable
from ._fit import FitFields, FitResult, _warn_given_coef, _warn_not_converged
from ._validation import (
    MULTINOMIAL,
    as_penalty,
    check_bool,
    check_finite_result,
    check_loo_samples,
    check_multinomial_inputs,
    check_options,
    check_X,
    core_design,
    design_dot,
    n_threads,
)
from .penalties import Penalty

if TYPE_CHECKING:
    from .tuning.objective import StateOutput

__all__ = ["MultinomialFitResult", "fit", "loo"]


@dataclass
class MultinomialFitResult(FitResult):
    """A fitted multinomial model: ``coef_`` (K, p) and ``intercept_`` (K,) (centered)."""

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """Class scores ``eta = X coef_^T + intercept_``, shape (n, K)."""
        X = check_X(X)
        if X.shape[1] != self.coef_.shape[1]:
            raise ValueError(
                f"X has {X.shape[1]} features but the model was fitted on {self.coef_.shape[1]}"
            )
        return design_dot(X, self.coef_.T) + self.intercept_

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities softmax(eta), shape (n, K)."""
        return softmax(self.decision_function(X))

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Mean response: the class probabilities, shape (n, K)."""
        return self.predict_proba(X)

    @property
    def beta_(self) -> np.ndarray:
        """(K, p + 1) rows (intercept, coef) per class when an intercept is fitted."""
        if self.fit_intercept:
            return np.column_stack([self.intercept_, self.coef_])
        return self.coef_.copy()


def softmax(eta: np.ndarray) -> np.ndarray:
    """Row-wise softmax of class scores (n, K)."""
    z = np.exp(eta - eta.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def _result(
    out: _core.MultinomialFitResult | FitFields, penalty: Penalty, fit_intercept: bool
) -> MultinomialFitResult:
    return MultinomialFitResult(
        coef_=out.coef,
        intercept_=np.asarray(out.intercept),
        n_iter_=int(out.n_iter),
        converged_=bool(out.converged),
        objective_=float(out.objective),
        loss=MULTINOMIAL,
        penalty=penalty,
        fit_intercept=fit_intercept,
        gradient_norm_=float(out.grad_norm),
    )


def _beta(coef: Any, intercept: Any, K: int, p: int, fit_intercept: bool) -> np.ndarray:
    """Class-major (K, p1) coefficients, flattened, from a user's coef/intercept."""
    c = np.asarray(coef, dtype=np.float64)
    if c.shape != (K, p):
        raise ValueError(f"coef must have shape ({K}, {p}) for the multinomial loss, got {c.shape}")
    if not np.isfinite(c).all():
        raise ValueError("coef contains NaN or inf")
    if not fit_intercept:
        if intercept is not None and np.any(np.asarray(intercept) != 0):
            raise ValueError("intercept given with fit_intercept=False")
        return np.ascontiguousarray(c.ravel())
    b = np.zeros(K) if intercept is None else np.asarray(intercept, dtype=np.float64)
    if b.shape != (K,) or not np.isfinite(b).all():
        raise ValueError(f"intercept must be a finite array of shape ({K},)")
    return np.ascontiguousarray(np.column_stack([b - b.mean(), c]).ravel())


def fit(
    X: ArrayLike,
    y: ArrayLike,
    penalty: Penalty | float | None = None,
    fit_intercept: bool = True,
    sample_weight: ArrayLike | None = None,
    tol: float = 1e-8,
    max_iter: int = 100,
    n_jobs: int | None = None,
    warm_start: FitResult | None = None,
) -> MultinomialFitResult:
    """Multinomial fit by Newton's method (``aloocv.fit(..., loss="multinomial")``)."""
    penalty = as_penalty(penalty)
    X, y, K, pen, w = check_multinomial_inputs(X, y, penalty, sample_weight, fit_intercept)
    tol, max_iter = check_options(tol, max_iter)
    beta0 = None
    if warm_start is not None:
        if not isinstance(warm_start, MultinomialFitResult):
            raise TypeError("warm_start must be a multinomial fit")
        beta0 = _beta(warm_start.coef_, warm_start.intercept_, K, X.shape[1], bool(fit_intercept))
    with _blas.single_threaded_blas():
        out = _core.multinomial_fit(
            core_design(X),
            y,
            w,
            K,
            pen,
            fit_intercept=bool(fit_intercept),
            tol=tol,
            max_iter=max_iter,
            n_threads=n_threads(n_jobs),
            beta0=beta0,
        )
    check_finite_result("fit", coef=out.coef, intercept=out.intercept)
    res = _result(out, penalty, bool(fit_intercept))
    _warn_not_converged(res, tol, max_iter)
    return res


def loo(
    X: ArrayLike,
    y: ArrayLike,
    penalty: Penalty | float | None = None,
    method: str = "alo",
    fit_intercept: bool = True,
    sample_weight: ArrayLike | None = None,
    coef: ArrayLike | None = None,
    intercept: ArrayLike | None = None,
    tol: float = 1e-8,
    max_iter: int = 100,
    n_jobs: int | None = None,
    return_gradient: bool = False,
):
    """Multinomial leave-one-out (``aloocv.loo(..., loss="multinomial")``).

    With ``K_i = X~_i H^{-1} X~_i^T`` (K x K), ``D_i`` the loss Hessian and ``g_i`` the
    gradient of sample i, ALO is ``eta~_i = eta_i + K_i (I - D_i K_i)^{-1} g_i`` (the
    Woodbury downdate of the K rows of sample i), IF is ``eta_i + K_i g_i``, Lemma 3 is
    ``ce(eta_i) + (mu_i - e_{y_i})^T (eta~_i - eta_i)``. The result's ``predictions`` are
    the (n, K) leave-one-out class scores, ``leverages`` the (n, K, K) blocks ``K_i``,
    ``downdate`` is ``det(I - D_i K_i)`` (``1 - d_i h_i`` of the scalar losses) and
    ``unreliable`` flags ``downdate < 1 - ALO_UNRELIABLE_DH``.
    """
    from ._loo import LOOResult

    return_gradient = check_bool(return_gradient, "return_gradient")
    penalty = as_penalty(penalty)
    X, y, K, pen, w = check_multinomial_inputs(X, y, penalty, sample_weight, fit_intercept)
    check_loo_samples(X.shape[0])
    tol, max_iter = check_options(tol, max_iter)
    beta = None
    if coef is not None:
        beta = _beta(coef, intercept, K, X.shape[1], bool(fit_intercept))
    elif intercept is not None:
        raise ValueError("intercept= requires coef=")
    with _blas.single_threaded_blas():
        out = _core.multinomial_loo(
            core_design(X),
            y,
            w,
            K,
            pen,
            fit_intercept=bool(fit_intercept),
            method=method,
            tol=tol,
            max_iter=max_iter,
            n_threads=n_threads(n_jobs),
            beta0=beta,
            refit=beta is None,
            return_gradient=return_gradient,
        )
    check_finite_result(
        f"loo(method={method!r})",
        coef=out.coef,
        losses=out.losses,
        predictions=out.predictions,
        leverages=out.leverages,
        gradient=out.gradient,
    )
    fitres = _result(out, penalty, bool(fit_intercept))
    if beta is None:
        _warn_not_converged(fitres, tol, max_iter)
    else:
        _warn_given_coef(fitres.gradient_norm_, tol, stacklevel=3)
    if out.n_not_converged:
        warnings.warn(
            f"exact LOO: {out.n_not_converged} of {X.shape[0]} refits did not reach tol={tol:g}",
            ConvergenceWarning,
            stacklevel=3,
        )
    downdate = out.det
    unreliable = None if downdate is None else downdate < 1.0 - ALO_UNRELIABLE_DH
    warn_unreliable(unreliable, MULTINOMIAL, False, stacklevel=3)
    grad = None
    if return_gradient:
        grad = penalty.chain(np.zeros(X.shape[1]), out.gradient)
    problem = {
        "X": X,
        "y": y,
        "w": w,
        "n_classes": K,
        "pen": pen,
        "fit_intercept": bool(fit_intercept),
        "tol": tol,
        "max_iter": max_iter,
        "n_threads": n_threads(n_jobs),
    }
    return LOOResult(
        losses=out.losses,
        predictions=out.predictions,
        leverages=out.leverages,
        method=method,
        fit=fitres,
        sample_weight=w,
        gradient=grad,
        downdate=downdate,
        unreliable=unreliable,
        _problem=problem,
    )


def exact_subset(pb: dict[str, Any], beta: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, int]:
    """Exact leave-one-out cross-entropies of the samples idx (refits warm-started at
    beta, the fit's (K, p1) ``beta_``; in the order of idx) and the number of refits that
    did not converge."""
    with _blas.single_threaded_blas():
        out = _core.multinomial_loo(
            core_design(pb["X"]),
            pb["y"],
            pb["w"],
            pb["n_classes"],
            pb["pen"],
            fit_intercept=pb["fit_intercept"],
            method="exact",
            tol=pb["tol"],
            max_iter=pb["max_iter"],
            n_threads=pb["n_threads"],
            beta0=np.ascontiguousarray(beta, dtype=np.float64).ravel(),
            refit=False,
            subset=np.ascontiguousarray(idx, dtype=np.int64),
        )
    return out.losses, int(out.n_not_converged)


def cross_entropy(eta: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-sample cross-entropy of class scores eta (n, K) at class codes y."""
    m = eta.max(axis=1)
    yi = np.asarray(y).astype(np.intp)
    return m + np.log(np.exp(eta - m[:, None]).sum(axis=1)) - eta[np.arange(yi.size), yi]


#: Relative step (in log lambda) of the central difference that gives the second
#: derivative of the multinomial ACV to the tuning package's Newton steps.
TANGENT_LOG_STEP = 1e-4


class MultinomialTuneState:
    """Stands in for ``_core.TuneState`` in :class:`aloocv.tuning.Objective` for the
    multinomial loss (same methods): a warm-started fit plus ALO and its exact gradient
    in one core call per point.

    ``alo_tangents`` (second derivatives, used only to propose Newton steps of the
    second-order searches) is a central difference of the exact gradient, step
    ``TANGENT_LOG_STEP`` in log lambda along each parameter direction (two extra fits per
    parameter); convergence is always tested on the exact gradient.
    """

    def __init__(self, X, y, K, w, pen, fit_intercept, tol, max_iter, n_threads):
        self.design = core_design(X)
        self.y, self.K, self.w = y, K, w
        self.p = X.shape[1]
        self.pen = np.ascontiguousarray(pen, dtype=np.float64)
        self.intercept = bool(fit_intercept)
        self.tol, self.max_iter, self.nt = tol, max_iter, n_threads
        self.beta: np.ndarray | None = None

    def set_penalty(self, l2: np.ndarray, l1: np.ndarray | None = None) -> None:
        self.pen = np.ascontiguousarray(l2, dtype=np.float64)

    def set_beta(self, beta: np.ndarray) -> None:
        self.beta = np.ascontiguousarray(beta, dtype=np.float64)

    def fit(self) -> None:
        """Nothing: :meth:`alo` fits and evaluates in one core call."""

    def _call(self, pen: np.ndarray, gradient: bool) -> StateOutput:
        from .tuning.objective import StateOutput

        out = _core.multinomial_loo(
            self.design,
            self.y,
            self.w,
            self.K,
            pen,
            fit_intercept=self.intercept,
            method="alo",
            tol=self.tol,
            max_iter=self.max_iter,
            n_threads=self.nt,
            beta0=self.beta,
            refit=True,
            return_gradient=gradient,
        )
        B = np.column_stack([out.intercept, out.coef]) if self.intercept else out.coef
        return StateOutput(
            coef=out.coef,
            intercept=out.intercept,
            n_iter=out.n_iter,
            converged=out.converged,
            objective=out.objective,
            grad_norm=out.grad_norm,
            hessian_passes=out.hessian_passes,
            losses=out.losses,
            predictions=out.predictions,
            leverages=out.leverages,
            det=out.det,
            grad_l2=np.zeros(self.p) if out.gradient is None else out.gradient,
            grad_l1=np.zeros(self.p),
            beta=np.ascontiguousarray(B.ravel()),
        )

    def alo(self, *, gradient: bool = True, gradient_kind: str = "exact") -> StateOutput:
        out = self._call(self.pen, gradient)
        self.beta = out.beta
        return out

    def alo_tangents(self, J2: np.ndarray, J1: np.ndarray) -> StateOutput:
        out = self.alo(gradient=True)
        at, pen = self.beta, self.pen
        T2 = np.empty((self.p, J2.shape[1]))
        for k in range(J2.shape[1]):
            d = J2[:, k] * pen * TANGENT_LOG_STEP  # a step in log of the parameter
            scale = float(np.max(J2[:, k] * pen)) * TANGENT_LOG_STEP
            g = [self._call(pen + s * d, gradient=True).grad_l2 for s in (1.0, -1.0)]
            self.beta = at
            T2[:, k] = (g[0] - g[1]) / (2.0 * scale)
        return dataclasses.replace(out, tangent_l2=T2, tangent_l1=np.zeros_like(T2))


def kfold(
    X,
    y,
    penalty,
    n_folds,
    method,
    folds,
    random_state,
    fit_intercept,
    sample_weight,
    tol,
    max_iter,
    n_jobs,
    splits=None,
):
    """Multinomial K-fold (``aloocv.kfold(..., loss="multinomial")``).

    ``"alo"``: one damped Newton step per fold from the full fit on the fold-out objective
    (its exact Hessian at the full fit: the fold's weights set to zero, Armijo backtracking
    when the full step does not decrease it); ``"exact"``: a refit per fold warm-started
    from the full fit. ``predictions`` are the (n, K) held-out class scores. The loop is
    over folds (each a core call), never over samples.
    """
    import time

    from ._kfold import _assign_folds, _label, fold_result, split_result

    penalty = as_penalty(penalty)
    X, y, K, pen, w = check_multinomial_inputs(X, y, penalty, sample_weight, fit_intercept)
    tol, max_iter = check_options(tol, max_iter)
    n = X.shape[0]
    ww = np.ones(n) if w is None else w
    if splits is None:
        idx, labels = _assign_folds(n, n_folds, folds, random_state)
        nf = labels.size
        wsum = np.bincount(idx, weights=ww, minlength=nf)
        if np.any(wsum <= 0):
            raise ValueError(
                f"fold {_label(labels, int(np.flatnonzero(wsum <= 0)[0]))} has zero total "
                "sample weight"
            )
        # (train weights, test indices) of each fold
        parts = [(np.where(idx == k, 0.0, ww), np.flatnonzero(idx == k)) for k in range(nf)]
    else:
        nf = len(splits)
        parts = []
        for k, (tr, te) in enumerate(splits):
            wk = np.zeros(n)
            wk[tr] = ww[tr]
            if not wk.sum() > 0:
                raise ValueError(f"the training set of split {k} has zero total sample weight")
            parts.append((wk, te))
    design, nt, icpt = core_design(X), n_threads(n_jobs), bool(fit_intercept)
    t0 = time.perf_counter()
    with _blas.single_threaded_blas():
        full = _core.multinomial_fit(
            design,
            y,
            w,
            K,
            pen,
            fit_intercept=icpt,
            tol=tol,
            max_iter=max_iter,
            n_threads=nt,
            beta0=None,
        )
    fitres = _result(full, penalty, icpt)
    _warn_not_converged(fitres, tol, max_iter)
    beta = _beta(full.coef, full.intercept, K, X.shape[1], icpt)
    t1 = time.perf_counter()
    pred_tests = []
    failed = 0
    for wk, te in parts:
        with _blas.single_threaded_blas():
            r = _core.multinomial_fit(
                design,
                y,
                wk,
                K,
                pen,
                fit_intercept=icpt,
                tol=tol,
                max_iter=1 if method == "alo" else max_iter,
                n_threads=nt,
                beta0=beta,
            )
        failed += method == "exact" and not r.converged
        pred_tests.append(design_dot(X[te], r.coef.T) + r.intercept)
    t2 = time.perf_counter()
    check_finite_result(
        f"kfold(method={method!r})", coef=full.coef, predictions=np.concatenate(pred_tests)
    )
    if failed:
        warnings.warn(
            f"exact K-fold: {failed} of {nf} refits did not reach tol={tol:g}",
            ConvergenceWarning,
            stacklevel=3,
        )

    timings = {"fit": t1 - t0, "folds": t2 - t1}
    if splits is not None:
        loss_tests = [cross_entropy(pr, y[te]) for pr, (_, te) in zip(pred_tests, parts)]
        return split_result(splits, pred_tests, loss_tests, ww, n, method, fitres, w, timings)
    pred = np.empty((n, K))
    for pr, (_, te) in zip(pred_tests, parts):
        pred[te] = pr
    losses = cross_entropy(pred, y)
    return fold_result(losses, pred, idx, labels, ww, wsum, method, fitres, w, timings)
