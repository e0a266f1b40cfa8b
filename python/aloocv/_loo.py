"""Leave-one-out cross-validation: approximate (ALO, IF, Lemma 3) and exact."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from sklearn.exceptions import ConvergenceWarning

from . import _blas, _core
from ._fit import FitResult, _result, _warn_not_converged
from ._validation import (
    LOO_METHODS,
    as_penalty,
    check_bool,
    check_finite_result,
    check_fit_inputs,
    check_loo_samples,
    check_options,
    check_real_scalar,
    check_vector,
    choose_solver,
    core_design,
    n_threads,
)
from .penalties import Penalty

__all__ = ["LOOResult", "loo"]


@dataclass
class LOOResult:
    """Per-sample leave-one-out results.

    Attributes
    ----------
    losses : ndarray of shape (n_samples,)
        ``l(y_i, eta~_i)``: the loss of sample i under the model fitted without it
        (for ``"lemma3"`` the first-order expansion of that loss).
    predictions : ndarray of shape (n_samples,)
        Leave-one-out linear predictors ``eta~_i``.
    leverages : ndarray of shape (n_samples,) or None
        ``h_i = x~_i^T H^{-1} x~_i`` (None for ``"exact"``).
    method : str
    fit : FitResult
        The full-data fit the estimate is built on.
    sample_weight : ndarray or None
        Weights of the weighted mean.
    gradient : ndarray or None
        With ``return_gradient=True``: the paper's approximate gradient (Lemma 4,
        eq. 14-16) of :attr:`mean` with respect to the penalty's parameters
        (``penalty.params()``: ``[lam]`` for a scalar L2, the per-feature vector for a
        vector L2, ``[l1, l2]`` for a scalar elastic net).
    """

    losses: np.ndarray
    predictions: np.ndarray
    leverages: np.ndarray | None
    method: str
    fit: FitResult
    sample_weight: np.ndarray | None = None
    gradient: np.ndarray | None = None

    @property
    def mean(self) -> float:
        """The (weighted) mean leave-one-out loss: the cross-validation estimate."""
        return float(np.average(self.losses, weights=self.sample_weight))

    @property
    def stderr(self) -> float:
        """Standard error of :attr:`mean` (weights act as frequency weights)."""
        w = self.sample_weight
        n = self.losses.shape[0]
        if n < 2:
            return float("nan")
        if w is None:
            return float(np.std(self.losses, ddof=1) / np.sqrt(n))
        sw = w.sum()
        m = np.average(self.losses, weights=w)
        var = np.sum(w * (self.losses - m) ** 2) / max(sw - 1.0, 1e-300)
        return float(np.sqrt(var / sw))

    def __repr__(self) -> str:
        return (
            f"LOOResult(method={self.method!r}, n={self.losses.shape[0]}, "
            f"mean={self.mean:.6g}, stderr={self.stderr:.3g})"
        )


def loo(
    X: ArrayLike,
    y: ArrayLike,
    loss: str = "logistic",
    penalty: Penalty | float | None = None,
    method: str = "alo",
    fit_intercept: bool = True,
    sample_weight: ArrayLike | None = None,
    coef: ArrayLike | None = None,
    intercept: float | None = None,
    tol: float = 1e-8,
    max_iter: int = 100,
    n_jobs: int | None = None,
    return_gradient: bool = False,
    solver: str = "auto",
) -> LOOResult:
    """Leave-one-out cross-validation of an L2-penalized GLM.

    Parameters
    ----------
    X, y, loss, penalty, fit_intercept, sample_weight, tol, max_iter, n_jobs
        As in :func:`aloocv.fit`.
    method : {"alo", "exact", "if", "lemma3"}
        ``"alo"``: the paper's Theorem 1 with the exact rank-one downdate of the
        Hessian, ``eta~_i = eta_i + w_i l'_i h_i / (1 - d_i h_i)``; costs about one
        extra pass over X after the fit (it reuses the fit's Cholesky factor).
        ``"if"``: the influence-function approximation ``eta_i + w_i l'_i h_i`` (no
        downdate). ``"lemma3"``: the first-order expansion
        ``l(y_i, eta_i) + l'_i w_i l'_i h_i / (1 - d_i h_i)``. ``"exact"``: n refits
        without each sample, warm-started from the full fit, solved to ``tol``, in
        parallel over samples.
    coef, intercept : optional
        Bring your own fit: use these coefficients (e.g. from a scikit-learn model
        fitted on the same objective) instead of fitting. They should minimize the
        objective; a ``ConvergenceWarning`` says when their gradient is not small.
    return_gradient : bool
        Also compute the ALO hypergradient (``method="alo"`` only) in the same
        blocked pass that computes the leverages; see :attr:`LOOResult.gradient`.
    solver : {"auto", "primal", "dual"}
        As in :func:`aloocv.fit`: with ``"dual"`` (default when n < p, L2 > 0 on every
        feature) the leverages come from the n x n system, ``O(n^2 p + n^3)``, also
        at a given ``coef``. ``"auto"`` with ``return_gradient=True`` takes the primal.

    Returns
    -------
    LOOResult
        ``losses``, ``predictions``, ``leverages``, ``mean``, ``stderr``, ``fit``.

    Examples
    --------
    >>> import numpy as np, aloocv
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((300, 5)); y = (X[:, 0] + rng.standard_normal(300) > 0) * 1.0
    >>> res = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0))
    >>> res.losses.shape
    (300,)
    """
    if not isinstance(method, str) or method not in LOO_METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {list(LOO_METHODS)}")
    return_gradient = check_bool(return_gradient, "return_gradient")
    if return_gradient and method != "alo":
        raise ValueError("return_gradient=True needs method='alo'")
    penalty = as_penalty(penalty)
    X, y, loss, pen, l1, w = check_fit_inputs(X, y, loss, penalty, sample_weight, fit_intercept)
    check_loo_samples(X.shape[0])
    tol, max_iter = check_options(tol, max_iter)
    beta = None
    if coef is not None:
        c = coef if np.ndim(coef) == 1 else np.ravel(coef)
        if np.ndim(c) != 1 or np.shape(c)[0] != X.shape[1]:
            raise ValueError(f"coef has {np.size(c)} entries but X has {X.shape[1]} features")
        c = check_vector(c, X.shape[1], "coef")
        b = None
        if intercept is not None:
            b_arr = np.asarray(intercept)
            if b_arr.size != 1:
                raise ValueError(f"intercept must be a scalar, got shape {b_arr.shape}")
            b = check_real_scalar(b_arr.ravel()[0], "intercept")
        if fit_intercept:
            beta = np.concatenate([[0.0 if b is None else b], c])
        else:
            if b is not None and b != 0.0:
                raise ValueError("intercept given with fit_intercept=False")
            beta = np.ascontiguousarray(c)
    elif intercept is not None:
        raise ValueError("intercept= requires coef=")
    # "auto" leaves the hypergradient (primal only) to the primal route
    use_dual = choose_solver(solver, X, pen, l1) == "dual" and not (
        return_gradient and solver == "auto"
    )
    if use_dual and return_gradient:
        raise ValueError("return_gradient=True needs solver='primal'")
    with _blas.single_threaded_blas():
        if use_dual:
            out = _core.dual(
                core_design(X),
                y,
                w,
                loss,
                pen,
                bool(fit_intercept),
                method,
                tol,
                max_iter,
                n_threads(n_jobs),
                True,
                beta,
            )
        else:
            out = _core.loo(
                core_design(X),
                y,
                w,
                loss,
                pen,
                bool(fit_intercept),
                method,
                tol,
                max_iter,
                n_threads(n_jobs),
                beta,
                False,
                l1,
                bool(return_gradient),
            )
    check_finite_result(
        f"loo(method={method!r})",
        coef=out["coef"],
        intercept=out["intercept"],
        losses=out["losses"],
        predictions=out["predictions"],
        leverages=out["leverages"],
    )
    fitres = _result(out, loss, penalty, bool(fit_intercept))
    if beta is None:
        _warn_not_converged(fitres, tol, max_iter)
    elif fitres.gradient_norm_ > max(1e-6, tol):
        warnings.warn(
            f"the given coef is not a minimizer of this objective (max|gradient|/sum(w) = "
            f"{fitres.gradient_norm_:.3g}); leave-one-out estimates assume an optimal fit. "
            "Check that the penalty matches the model's regularization.",
            ConvergenceWarning,
            stacklevel=2,
        )
    if out["n_not_converged"]:
        warnings.warn(
            f"exact LOO: {out['n_not_converged']} of {X.shape[0]} refits did not reach tol={tol:g}",
            ConvergenceWarning,
            stacklevel=2,
        )
    gradient = None
    if return_gradient:
        gradient = penalty.chain(out["grad_l1"], out["grad_l2"])
    return LOOResult(
        gradient=gradient,
        losses=out["losses"],
        predictions=out["predictions"],
        leverages=out["leverages"],
        method=method,
        fit=fitres,
        sample_weight=w,
    )
