"""Exact leave-one-out of kernel ridge regression from a precomputed kernel
(``docs/math/dual.md``)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from . import _blas, _core
from ._diagnostics import check_finite_result, unreliable_mask
from ._validation import (
    check_bool,
    check_kernel,
    check_loo_samples,
    check_real_scalar,
    check_sample_weight,
    check_vector,
)
from .penalties import L2
from .results import FitResult, LOOResult

__all__ = ["kernel_ridge_loo"]


def kernel_ridge_loo(
    K: ArrayLike,
    y: ArrayLike,
    lam: float,
    fit_intercept: bool = False,
    sample_weight: ArrayLike | None = None,
) -> LOOResult:
    """Exact leave-one-out of kernel ridge regression (the paper's Corollary 2).

    Minimizes ``sum_i w_i/2 (y_i - f_i)^2 + lam/2 alpha^T K alpha`` with
    ``f = K alpha (+ b)`` (scikit-learn's ``KernelRidge(alpha=lam)`` without weights
    and intercept) and returns the leave-one-out losses from the PRESS identity: one
    O(n^3) factorization, no refits.

    Parameters
    ----------
    K : array_like of shape (n_samples, n_samples)
        A symmetric positive semi-definite kernel matrix.
    y : array_like of shape (n_samples,)
    lam : float
        Regularization, > 0.
    fit_intercept : bool
        Add an unpenalized constant to the kernel model.
    sample_weight : array_like, optional

    Returns
    -------
    LOOResult
        ``losses`` (1/2 squared LOO residuals), ``predictions``, ``leverages`` (the
        diagonal of the hat matrix), ``mean``, ``stderr``; ``fit.coef_`` holds the
        dual coefficients ``alpha``.
    """
    fit_intercept = check_bool(fit_intercept, "fit_intercept")
    Km = check_kernel(K)  # float64 with whole-element strides (the binding reads it in place)
    n = Km.shape[0]
    check_loo_samples(n)
    lam = check_real_scalar(lam, "lam")
    if not (np.isfinite(lam) and lam > 0):
        raise ValueError(f"lam must be positive and finite, got {lam!r}")
    y = check_vector(y, n, "y")
    w = check_sample_weight(sample_weight, n)
    with _blas.single_threaded_blas():
        out = _core.kernel_ridge_loo(Km, y, w, lam, fit_intercept=bool(fit_intercept))
    check_finite_result(
        "kernel_ridge_loo",
        alpha=out.alpha,
        intercept=out.intercept,
        losses=out.losses,
        predictions=out.predictions,
        leverages=out.leverages,
    )
    fit = FitResult(
        coef_=out.alpha / lam,
        intercept_=float(out.intercept),
        n_iter_=int(out.n_iter),
        converged_=bool(out.converged),
        objective_=float(out.objective),
        loss="squared",
        penalty=L2(lam),
        fit_intercept=bool(fit_intercept),
    )
    return LOOResult(
        losses=out.losses,
        predictions=out.predictions,
        leverages=out.leverages,
        downdate=out.downdate,
        unreliable=unreliable_mask(out.downdate),
        method="alo",
        fit=fit,
        sample_weight=w,
    )
