"""Per-sample diagnostics of leave-one-out estimates, ill-posed problems, and the accuracy
certificate of an approximate LOO result (``docs/math/alo.md``: the unreliable flag, the
certificate's importance-sampling estimator and its interval)."""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

__all__ = [
    "ALO_MIN_RCOND",
    "ALO_UNRELIABLE_DH",
    "SEPARATION_MARGIN",
    "ALOWarning",
    "warn_alo_error",
]

#: A sample is flagged unreliable when ``d_i h_i`` exceeds this: the leave-one-out
#: Hessian keeps less than 1% of the full Hessian's curvature along ``x~_i``, ALO's
#: Newton step from the full fit multiplies the influence term ``w_i l'_i h_i`` by
#: ``1 / (1 - d_i h_i) >= 100``, and the estimate for that sample is as sensitive to the
#: fit, to rounding and to the loss's higher derivatives (as ``d_i h_i -> 1`` the sample
#: alone determines a direction of the fit). It is a warning sign, not a measured error:
#: samples below it can be badly off too (e.g. near-separated logistic data), which
#: :meth:`LOOResult.certify` measures. For the squared loss with an L2 penalty ALO is exact
#: whatever ``d_i h_i`` (PRESS): the samples are flagged, but no warning is issued.
ALO_UNRELIABLE_DH = 0.99

#: Logistic fits whose training margins ``(2 y_i - 1) eta_i`` all exceed this (every
#: training loss below 4.5e-5) separate the classes with a negligible penalty: the penalty
#: alone bounds the coefficients, which grow without bound (like ``log(1 / lam)``) as it
#: goes to 0, and leave-one-out estimates, ALO especially, are unreliable; a warning says
#: so. With no penalty at all, any positive margins prove that no finite fit exists: a
#: ValueError.
SEPARATION_MARGIN = 10.0


#: Approximate LOO warns when the factored Hessian's scale-invariant reciprocal condition
#: estimate ``min_j L_jj^2 / H_jj`` (1 - R^2 of the most collinear coordinate given the
#: others, penalty included) is below this: leverages and LOO values then carry relative
#: rounding errors up to about ``eps / rcond`` (2e-5 here; measured: 2.7e-4 against
#: brute-force refits at rcond = 5e-14, cond(X) = 1.8e7 with lam = 1e-12).
ALO_MIN_RCOND = 1e-11


class ALOWarning(UserWarning):
    """A leave-one-out estimate is unreliable: its self-check (exact refits of the samples
    its error indicator ranks first) estimates the error of the mean above a few percent,
    samples with ``d_i h_i`` near 1, or a logistic fit that separates the classes. See
    ``LOOResult.error_estimate``, ``LOOResult.unreliable``, ``LOOResult.certify`` and
    ``rtol=`` of :func:`aloocv.loo`."""


#: The package's directory: a warning points at the first frame outside it.
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_stacklevel() -> int:
    """The ``stacklevel`` of a ``warnings.warn`` in the calling function that points at the
    first frame outside aloocv (the user's call), however deep inside the package the
    warning is raised (verbs, route table, backends, helpers)."""
    f = sys._getframe(1)  # the function that calls warnings.warn
    level = 1
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_PACKAGE_DIR):
        f = f.f_back
        level += 1
    return level


def unreliable_mask(downdate: np.ndarray | None) -> np.ndarray | None:
    """Samples with ``d_i h_i > ALO_UNRELIABLE_DH`` from ``downdate = 1 - d_i h_i``."""
    if downdate is None:
        return None
    return np.asarray(downdate) < 1.0 - ALO_UNRELIABLE_DH


def warn_unreliable(mask: np.ndarray | None, loss: str, has_l1: bool) -> None:
    if mask is None:
        return
    warn_unreliable_count(int(np.count_nonzero(mask)), mask.shape[0], loss, has_l1)


def warn_unreliable_count(count: int, n: int, loss: str, has_l1: bool) -> None:
    """The warning of :func:`warn_unreliable` from the count of flagged samples (dask
    input reduces it over the chunks)."""
    if loss == "squared" and not has_l1:
        return  # exact for the squared loss with an L2 penalty
    if count:
        warnings.warn(
            f"{count} of {n} samples have "
            + (
                f"det(I - D_i K_i) < {1.0 - ALO_UNRELIABLE_DH:g}"
                if loss == "multinomial"
                else f"d_i h_i > {ALO_UNRELIABLE_DH}"
            )
            + " (leverage near 1): their approximate leave-one-out values are unreliable (see "
            "result.unreliable; result.certify() measures the error against exact refits). "
            "A larger penalty helps.",
            ALOWarning,
            stacklevel=user_stacklevel(),
        )


def warn_alo_error(relative_error: float, n_refits: int, threshold: float) -> None:
    """Plain ALO's self-check found the error of the mean above ``threshold`` (relative)."""
    if relative_error > threshold:
        warnings.warn(
            f"ALO's mean may be off by about {100.0 * relative_error:.2g}% of exact "
            f"leave-one-out (exact refits of the {n_refits} samples its error indicator "
            "ranks first; see result.error_estimate): pass rtol=0.01 for an estimate within "
            "1%, or use a larger penalty.",
            ALOWarning,
            stacklevel=user_stacklevel(),
        )


def warn_ill_conditioned(rcond: float | None) -> None:
    if rcond is not None and rcond < ALO_MIN_RCOND:
        warnings.warn(
            f"the Hessian is nearly singular (reciprocal condition estimate {rcond:.2g} < "
            f"{ALO_MIN_RCOND:g}: near-collinear features with a tiny penalty); leave-one-out "
            f"values may carry relative rounding errors up to about {2.2e-16 / rcond:.1g}. "
            "A larger penalty or fewer collinear features helps.",
            ALOWarning,
            stacklevel=user_stacklevel(),
        )


# ----------------------------------------------------------------------------- results
#: The most samples an error message names (check_singular_refits).
MAX_NAMED_SAMPLES = 10
#: The words for the core's result fields in check_finite_result's message.
_RESULT_NAMES = {
    "losses": "the leave-one-out losses",
    "predictions": "the leave-one-out predictions",
    "leverages": "the leverages",
    "grad_l2": "the hypergradient",
    "grad_l1": "the hypergradient (l1 part)",
}


def check_finite_result(what: str, **values: Any) -> None:
    """Raise when a computed result overflowed (never hand back NaN or inf silently)."""
    for key, v in values.items():
        if v is None:
            continue
        a = np.asarray(v)
        if a.dtype.kind in "fc" and not np.isfinite(a).all():
            raise ValueError(
                f"{what}: the computation overflowed ({_RESULT_NAMES.get(key, key)} is not "
                "finite); the data or parameters are too large in magnitude for float64 "
                "(y values, sample weights or X): rescale X, y or the weights (or increase the "
                "penalty)"
            )


def check_singular_refits(what: str, out: Any) -> None:
    """Raise where exact refits stopped on a singular leave-one-out Hessian (the core's
    ``n_singular`` and ``singular_samples``): without those samples the problem has no
    unique minimizer, so there is no leave-one-out value to report."""
    if not getattr(out, "n_singular", None):
        return
    idx = np.asarray(out.singular_samples)
    named = ", ".join(str(int(i)) for i in idx[:MAX_NAMED_SAMPLES])
    more = f" and {idx.size - MAX_NAMED_SAMPLES} more" if idx.size > MAX_NAMED_SAMPLES else ""
    raise ValueError(
        f"{what}: the leave-one-out Hessian is singular for sample{'s' if idx.size > 1 else ''} "
        f"{named}{more} (without such a sample a direction has no curvature from the other "
        "samples and no penalty: the refit has no unique minimizer); use a positive penalty "
        "(lam > 0 on every feature)"
    )


# ----------------------------------------------------------------------------- fits
#: Tolerances below this (about 4.5 machine epsilons) are below the rounding floor of
#: ``max|gradient| / sum(w)`` for data of unit scale: the solvers stop when rounding
#: stalls them (a bounded number of iterations), ``converged_`` says whether ``tol`` was
#: met, and the warning names the cause.
TOL_ROUNDING_FLOOR = 1e-15


#: A given ``coef`` whose max|gradient|/sum(w) exceeds this (or ``tol``) is not a
#: minimizer of the objective: leave-one-out at it warns.
GIVEN_COEF_GRAD_TOL = 1e-6


def warn_given_coef(grad_norm: float, tol: float) -> None:
    """The warning of leave-one-out at a given ``coef`` that is not a minimizer
    (max|gradient|/sum(w) = `grad_norm`)."""
    if grad_norm > max(GIVEN_COEF_GRAD_TOL, tol):
        warnings.warn(
            f"the given coef is not a minimizer of this objective (max|gradient|/sum(w) = "
            f"{grad_norm:.3g}); leave-one-out estimates assume an optimal fit. Check that the "
            "penalty matches the model's regularization.",
            ConvergenceWarning,
            stacklevel=user_stacklevel(),
        )


def warn_not_converged(res: Any, tol: float, max_iter: int) -> None:
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
            stacklevel=user_stacklevel(),
        )


def warn_loo_fit(
    res: Any,
    given: bool,
    n_not_converged: int,
    n: int,
    tol: float,
    max_iter: int,
) -> None:
    """The warnings of a leave-one-out call about its fits: the full fit did not converge
    (or, at a given coef, is not a minimizer), and exact refits that did not reach tol.
    Each points at the user's call (:func:`user_stacklevel`)."""
    if given:
        warn_given_coef(res.gradient_norm_, tol)
    else:
        warn_not_converged(res, tol, max_iter)
    if n_not_converged:
        warnings.warn(
            f"exact LOO: {n_not_converged} of {n} refits did not reach tol={tol:g}",
            ConvergenceWarning,
            stacklevel=user_stacklevel(),
        )


def _positive(w: np.ndarray | None, n: int) -> np.ndarray:
    return np.ones(n, dtype=bool) if w is None else np.asarray(w) > 0


def class_counts(y: np.ndarray, w: np.ndarray | None) -> tuple[int, int]:
    """(zeros, ones) among the samples with positive weight."""
    pos = _positive(w, y.shape[0])
    return int(np.count_nonzero(pos & (y <= 0.5))), int(np.count_nonzero(pos & (y > 0.5)))


def check_class_counts(n0: int, n1: int, loo: bool = False) -> None:
    """Logistic fits with an intercept from the class counts (of positive weight): both
    classes must be present; with `loo`, at least 2 samples of each."""
    if n0 == 0 or n1 == 0:
        raise ValueError(
            "logistic regression needs samples of both classes (with positive weight); y has "
            f"{n0} zeros and {n1} ones: the intercept has no finite value"
        )
    if loo and min(n0, n1) < 2:
        c = 0 if n0 <= n1 else 1
        raise ValueError(
            f"leave-one-out of a logistic regression needs at least 2 samples of each class; "
            f"class {c} has {min(n0, n1)}: without it the training set has one class and the "
            "intercept no finite value"
        )


def check_classes(y: np.ndarray, w: np.ndarray | None, loss: str, fit_intercept: bool) -> None:
    """Logistic loss with an intercept: both classes must be present (else no finite fit)."""
    if loss != "logistic" or not fit_intercept:
        return
    check_class_counts(*class_counts(y, w))


def check_loo_classes(y: np.ndarray, w: np.ndarray | None, loss: str, fit_intercept: bool) -> None:
    """Logistic LOO with an intercept: every leave-one-out training set needs both classes,
    i.e. at least 2 samples of each class."""
    if loss != "logistic" or not fit_intercept:
        return
    check_class_counts(*class_counts(y, w), loo=True)


def check_fold_classes(
    y: np.ndarray,
    w: np.ndarray | None,
    folds: np.ndarray,
    n_folds: int,
    loss: str,
    fit_intercept: bool,
) -> None:
    """Logistic K-fold with an intercept: the training part of every fold needs both classes."""
    if loss != "logistic" or not fit_intercept:
        return
    pos = _positive(w, y.shape[0]).astype(np.float64)
    ones = np.bincount(folds, weights=pos * (y > 0.5), minlength=n_folds)
    zeros = np.bincount(folds, weights=pos * (y <= 0.5), minlength=n_folds)
    check_fold_class_counts(zeros, ones)


def check_fold_class_counts(zeros: np.ndarray, ones: np.ndarray) -> None:
    """:func:`check_fold_classes` from the per-fold counts of each class (of positive
    weight) in the fold."""
    out1 = ones.sum() - ones
    out0 = zeros.sum() - zeros
    bad = np.flatnonzero((out1 < 0.5) | (out0 < 0.5))
    if bad.size:
        k = int(bad[0])
        raise ValueError(
            f"the training part without fold {k} has only one class ({int(out0[k])} zeros, "
            f"{int(out1[k])} ones): a logistic fit on it has no finite intercept; use "
            "stratified or fewer folds"
        )


def check_separation(
    eta: np.ndarray,
    y: np.ndarray,
    w: np.ndarray | None,
    pen: np.ndarray,
    l1: np.ndarray | None,
    warn: bool,
) -> None:
    """Logistic fits: raises when the fit separates the classes with no penalty (no finite
    solution exists), warns (``warn``) when it separates them with every margin above
    SEPARATION_MARGIN."""
    check_separation_margin(min_margin(eta, y, w), pen, l1, warn)


def min_margin(eta: np.ndarray, y: np.ndarray, w: np.ndarray | None) -> float:
    """The smallest training margin ``(2 y_i - 1) eta_i`` of the samples with positive
    weight (inf for none), in row blocks (no temporaries of length n: loo's peak memory
    holds its results and eta only)."""
    m = np.inf
    step = 8192
    for i0 in range(0, y.shape[0], step):
        e, yb = eta[i0 : i0 + step], y[i0 : i0 + step]
        margins = np.where(yb > 0.5, e, -e)
        if w is not None:
            margins = margins[np.asarray(w[i0 : i0 + step]) > 0]
        if margins.size:
            m = min(m, float(margins.min()))
    return float(m)


def unpenalized(pen: np.ndarray, l1: np.ndarray | None) -> bool:
    """No L2 and no L1 weight is positive: a separable logistic fit has no finite solution."""
    return not np.any(pen > 0) and (l1 is None or not np.any(l1 > 0))


def check_separation_margin(m: float, pen: np.ndarray, l1: np.ndarray | None, warn: bool) -> None:
    """:func:`check_separation` from the smallest margin ``m`` (dask input reduces it over
    the chunks)."""
    if not np.isfinite(m):
        return
    if unpenalized(pen, l1) and m > 0:
        raise ValueError(
            "the classes are linearly separable (the fit classifies every training sample "
            f"correctly, minimum margin {m:.3g}): without a penalty the logistic likelihood "
            "has no finite maximizer; use a positive penalty"
        )
    if warn and m > SEPARATION_MARGIN:
        warnings.warn(
            f"the logistic fit separates the classes (every training margin > "
            f"{SEPARATION_MARGIN:g}, minimum {m:.3g}): the penalty alone bounds the "
            "coefficients, and leave-one-out estimates, ALO especially, can be far off; "
            "check them with result.certify() or use a larger penalty",
            ALOWarning,
            stacklevel=user_stacklevel(),
        )
