"""Fitting L2-penalized GLMs with the core's Newton solver."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.exceptions import ConvergenceWarning

from . import _blas, _core
from ._diagnostics import check_classes, check_separation
from ._validation import (
    MULTINOMIAL,
    as_penalty,
    check_finite_result,
    check_fit_inputs,
    check_offset,
    check_options,
    check_X,
    choose_solver,
    core_design,
    design_dot,
    is_dask_collection,
    n_threads,
)
from .losses import Loss, get_loss
from .penalties import Penalty

__all__ = ["FitResult", "fit"]


@dataclass
class FitResult:
    """A fitted model.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
        0.0 when ``fit_intercept=False``.
    n_iter_ : int
        Newton steps taken: on a fresh Hessian far from the optimum, chord steps on the
        last factor (no Hessian pass) near it; see ``hessian_passes_``.
    converged_ : bool
        Whether ``max|gradient| / sum(sample_weight) <= tol`` was reached.
    objective_ : float
        ``sum_i w_i l(y_i, eta_i) + penalty`` at the solution.
    hessian_passes_ : int
        Passes over X that formed a Hessian ``X^T diag(d) X`` (the costly passes; chord
        steps on a held factor form none). A fit for ALO ends on the Hessian at the
        returned coefficients, taken after chord steps converged 100x below tol (at most
        one pass more than a fresh Hessian every step would take; one more where the
        end falls back to a fresh Newton step, see ``fused_end_fallbacks_``).
    matvec_passes_ : int
        Matrix-vector passes over X (``X v`` and ``X^T v``, ``O(n p)`` each; a full
        Newton or chord step reads X once for both) of the smooth Newton fits; 0 where
        the route does not count them (L1 fits, multinomial, dask).
    fused_end_fallbacks_ : int
        1 where a fit for ALO ended on chord steps whose last Newton step was not yet at
        the rounding level (ill-conditioned problems) and so took one more Newton step
        and a fresh Hessian at the returned coefficients; else 0.
    loss : Loss
        The registered loss (:mod:`aloocv.losses`); compares equal to its name when it
        has no parameters.
    penalty, fit_intercept
        The problem that was solved.
    """

    coef_: np.ndarray
    intercept_: float
    n_iter_: int
    converged_: bool
    objective_: float
    loss: Loss
    penalty: Penalty
    fit_intercept: bool
    gradient_norm_: float = field(default=0.0, repr=False)
    hessian_passes_: int = field(default=0, repr=False)
    matvec_passes_: int = field(default=0, repr=False)
    fused_end_fallbacks_: int = field(default=0, repr=False)

    def decision_function(self, X: ArrayLike, offset: ArrayLike | None = None) -> np.ndarray:
        """Linear predictor ``eta = X coef_ + intercept_ (+ offset)``."""
        X = check_X(X)
        if X.shape[1] != self.coef_.shape[0]:
            raise ValueError(
                f"X has {X.shape[1]} features but the model was fitted on {self.coef_.shape[0]}"
            )
        eta = design_dot(X, self.coef_).ravel()  # a new array: updated in place
        eta += self.intercept_
        off = check_offset(offset, X.shape[0])
        if off is not None:
            eta += off
        return eta

    def predict(self, X: ArrayLike, offset: ArrayLike | None = None) -> np.ndarray:
        """Mean response: the loss's inverse link of ``decision_function(X, offset)``."""
        return get_loss(self.loss).mean(self.decision_function(X, offset))

    @property
    def beta_(self) -> np.ndarray:
        """(intercept, coef) when an intercept is fitted, else coef."""
        if self.fit_intercept:
            return np.concatenate([[self.intercept_], self.coef_])
        return self.coef_.copy()


@dataclass(frozen=True, eq=False)
class FitFields:
    """A fit made in Python (dask input, the tuning states written in Python) with the
    fields of ``_core.FitResult`` that :func:`_result` reads; the pass counts are None
    where not counted."""

    coef: Any
    intercept: Any
    n_iter: int
    converged: bool
    objective: float
    grad_norm: float
    hessian_passes: int | None = None
    matvec_passes: int | None = None
    fused_end_fallbacks: int | None = None


def _count(out: Any, name: str) -> int:
    """A pass count of a fit's output; 0 where not counted (None or no such field: the
    dual route)."""
    v = getattr(out, name, None)
    return 0 if v is None else int(v)


def _result(
    out: _core.FitResult | _core.DualResult | FitFields,
    loss: Loss,
    penalty: Penalty,
    fit_intercept: bool,
) -> FitResult:
    return FitResult(
        coef_=out.coef,
        intercept_=float(out.intercept),
        n_iter_=int(out.n_iter),
        converged_=bool(out.converged),
        objective_=float(out.objective),
        loss=loss,
        penalty=penalty,
        fit_intercept=fit_intercept,
        gradient_norm_=float(out.grad_norm),
        hessian_passes_=_count(out, "hessian_passes"),
        matvec_passes_=_count(out, "matvec_passes"),
        fused_end_fallbacks_=_count(out, "fused_end_fallbacks"),
    )


#: Tolerances below this (about 4.5 machine epsilons) are below the rounding floor of
#: ``max|gradient| / sum(w)`` for data of unit scale: the solvers stop when rounding
#: stalls them (a bounded number of iterations), ``converged_`` says whether ``tol`` was
#: met, and the warning names the cause.
TOL_ROUNDING_FLOOR = 1e-15


#: A given ``coef`` whose max|gradient|/sum(w) exceeds this (or ``tol``) is not a
#: minimizer of the objective: leave-one-out at it warns.
GIVEN_COEF_GRAD_TOL = 1e-6


def _warn_given_coef(grad_norm: float, tol: float, stacklevel: int = 3) -> None:
    """The warning of leave-one-out at a given ``coef`` that is not a minimizer
    (max|gradient|/sum(w) = `grad_norm`); `stacklevel` counts from the caller."""
    if grad_norm > max(GIVEN_COEF_GRAD_TOL, tol):
        warnings.warn(
            f"the given coef is not a minimizer of this objective (max|gradient|/sum(w) = "
            f"{grad_norm:.3g}); leave-one-out estimates assume an optimal fit. Check that the "
            "penalty matches the model's regularization.",
            ConvergenceWarning,
            stacklevel=stacklevel + 1,
        )


def _warn_not_converged(res: FitResult, tol: float, max_iter: int) -> None:
    if not res.converged_:
        hint = "Increase max_iter or the penalty."
        if tol < TOL_ROUNDING_FLOOR or res.n_iter_ < max_iter:
            hint = (
                "It stopped early: no further progress is possible in float64 arithmetic "
                f"(tol below this problem's rounding floor, about {TOL_ROUNDING_FLOOR:g} for "
                "unit-scale data); use a larger tol."
            )
        warnings.warn(
            f"the solver did not converge in {res.n_iter_} iterations (max_iter={max_iter}): "
            f"max|gradient|/sum(w) = {res.gradient_norm_:.3g} > tol = {tol:.3g}. " + hint,
            ConvergenceWarning,
            stacklevel=3,
        )


def _check_fit(res, X, y, w, pen, l1, tol, max_iter, off=None) -> None:
    # a separated logistic fit without penalty has no finite solution: raise before the
    # convergence warning (Newton "converges" on the vanishing gradient)
    if res.loss == "logistic":
        check_separation(res.decision_function(X, off), y, w, pen, l1, warn=False, stacklevel=3)
    _warn_not_converged(res, tol, max_iter)


def fit(
    X: ArrayLike,
    y: ArrayLike,
    loss: str | Loss = "logistic",
    penalty: Penalty | float | None = None,
    fit_intercept: bool = True,
    sample_weight: ArrayLike | None = None,
    tol: float = 1e-8,
    max_iter: int = 100,
    n_jobs: int | None = None,
    warm_start: FitResult | None = None,
    solver: str = "auto",
    offset: ArrayLike | None = None,
) -> FitResult:
    """Fit ``min_beta sum_i w_i l(y_i, x~_i^T beta) + lambda^T r(theta)`` by Newton's method.

    Parameters
    ----------
    X : array_like of shape (n_samples, n_features)
        float64 in C or Fortran order (or any strided view) is used without a
        copy; float32 and integer input are converted once. A dask array chunked by
        rows (or a dask DataFrame) is processed chunk by chunk on the active dask
        scheduler, never gathered (see ``aloocv.backends.dask``).
    y : array_like of shape (n_samples,)
        Response in the loss's domain: real (``"squared"``, Huber), in {0, 1}
        (``"logistic"``), proportions in [0, 1] (``"binomial"``, trials as
        ``sample_weight``), counts >= 0 (``"poisson"``), > 0 (``"gamma"``), >= 0 or > 0
        (Tweedie, by its power), integer class labels 0..K-1 (``"multinomial"``).
    loss : str or Loss
        A name of :data:`aloocv.losses.REGISTRY` (``"squared"``, ``"logistic"``,
        ``"poisson"``, ``"gamma"``, ``"binomial"``), ``"multinomial"`` (the softmax
        cross-entropy of K classes: scikit-learn's multinomial
        ``LogisticRegression(C=1/lam)``, ``coef_`` of shape (K, p), ``intercept_`` (K,)
        centered to sum zero, an L2 penalty > 0 on every feature; see
        ``aloocv._multinomial``) or a parametrized loss object
        (``aloocv.Tweedie(power=1.5)``, ``aloocv.Huber(delta=1.35)``).
    penalty : Penalty or float, default L2(1.0)
        ``aloocv.L2(lam)`` with a scalar or per-feature ``lam``; a float means L2.
    fit_intercept : bool
        Fit an unpenalized intercept.
    sample_weight : array_like of shape (n_samples,), optional
        Non-negative weights multiplying each sample's loss.
    tol : float
        Stop when ``max_j |gradient_j| / sum(sample_weight) <= tol``.
    max_iter : int
        Maximum Newton iterations; a ``ConvergenceWarning`` is emitted when reached.
    n_jobs : int, optional
        OpenMP threads (None: OpenMP's default, -1: all cores). For dask input: the
        threads of each chunk task (None: 1; dask runs the chunks in parallel).
    warm_start : FitResult, optional
        Start Newton from this solution (primal solver).
    solver : {"auto", "primal", "dual"}
        ``"primal"``: Newton on the p x p Hessian, O(n p^2 + p^3) per step.
        ``"dual"``: Newton on the n x n system with ``K = X P^{-1} X^T`` computed once
        (O(n^2 p)), then O(n^3) per step; needs an L2 penalty > 0 on every feature.
        ``"auto"``: the dual when n < p and it applies.
    offset : array_like of shape (n_samples,), optional
        Known part of the linear predictor: ``eta = X coef + intercept + offset``
        (e.g. ``log(exposure)`` with a log link).

    Returns
    -------
    FitResult
        With ``coef_``, ``intercept_``, ``n_iter_``, ``converged_``.

    Notes
    -----
    Scaling conventions: ``L2(lam)`` with squared loss equals scikit-learn's
    ``Ridge(alpha=lam)``; with logistic loss ``LogisticRegression(C=1/lam)``; with
    Poisson, gamma and Tweedie losses ``PoissonRegressor`` / ``GammaRegressor`` /
    ``TweedieRegressor(alpha=lam/n_samples)``.

    Examples
    --------
    >>> import numpy as np, aloocv
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 3)); y = (X[:, 0] > 0).astype(float)
    >>> res = aloocv.fit(X, y, loss="logistic", penalty=aloocv.L2(1.0))
    >>> res.converged_
    True
    """
    if is_dask_collection(X):  # map-reduce over the row chunks: aloocv.backends.dask
        from .backends import dask as _dask

        _dask.check_solver(solver)
        problem = _dask.build_problem(
            X,
            y,
            loss=loss,
            penalty=penalty,
            fit_intercept=fit_intercept,
            sample_weight=sample_weight,
            offset=offset,
            tol=tol,
            max_iter=max_iter,
            n_jobs=n_jobs,
        )
        if problem.is_multinomial:
            return _dask.multinomial_fit(problem, warm_start=warm_start)
        return _dask.fit(problem, warm_start=warm_start)
    if isinstance(loss, str) and loss == MULTINOMIAL:
        if offset is not None:  # the softmax model has no offset term
            raise ValueError("offset= is not available for the multinomial loss")
        if solver not in ("auto", "primal"):
            raise ValueError("the multinomial loss has the primal solver only (solver='auto')")
        from . import _multinomial

        return _multinomial.fit(
            X, y, penalty, fit_intercept, sample_weight, tol, max_iter, n_jobs, warm_start
        )
    penalty = as_penalty(penalty)
    X, y, loss, pen, l1, w = check_fit_inputs(X, y, loss, penalty, sample_weight, fit_intercept)
    tol, max_iter = check_options(tol, max_iter)
    off = check_offset(offset, X.shape[0])
    check_classes(y, w, loss, bool(fit_intercept))
    beta0 = None
    if warm_start is not None:
        beta0 = np.ascontiguousarray(
            warm_start.beta_ if fit_intercept == warm_start.fit_intercept else None,
            dtype=np.float64,
        )
        if beta0.shape != (X.shape[1] + int(fit_intercept),):
            raise ValueError("warm_start does not match the shape of this problem")
    if choose_solver(solver, X, pen, l1, loss) == "dual":
        with _blas.single_threaded_blas():
            out = _core.dual(
                core_design(X),
                y,
                w,
                loss.core,
                pen,
                fit_intercept=bool(fit_intercept),
                method="alo",
                tol=tol,
                max_iter=max_iter,
                n_threads=n_threads(n_jobs),
                want_loo=False,
                offset=off,
            )
        check_finite_result("fit", coef=out.coef, intercept=out.intercept)
        res = _result(out, loss, penalty, bool(fit_intercept))
        _check_fit(res, X, y, w, pen, l1, tol, max_iter, off)
        return res
    with _blas.single_threaded_blas():
        out = _core.fit(
            core_design(X),
            y,
            w,
            loss.core,
            pen,
            fit_intercept=bool(fit_intercept),
            tol=tol,
            max_iter=max_iter,
            n_threads=n_threads(n_jobs),
            beta0=beta0,
            l1=l1,
            offset=off,
        )
    check_finite_result("fit", coef=out.coef, intercept=out.intercept)
    res = _result(out, loss, penalty, bool(fit_intercept))
    _check_fit(res, X, y, w, pen, l1, tol, max_iter, off)
    return res
