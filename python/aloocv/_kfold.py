"""K-fold cross-validation: approximate (one Newton step per fold, no refit) or exact."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.exceptions import ConvergenceWarning

from . import _blas, _core
from ._fit import FitResult, _result
from ._validation import (
    as_penalty,
    check_fit_inputs,
    check_options,
    core_design,
    n_threads,
)
from .penalties import Penalty

__all__ = ["KFoldResult", "kfold"]


@dataclass
class KFoldResult:
    """Per-sample and per-fold K-fold cross-validation results.

    Attributes
    ----------
    losses : ndarray of shape (n_samples,)
        Loss of each sample under the model fitted without its fold.
    predictions : ndarray of shape (n_samples,)
        The held-out linear predictors.
    folds : ndarray of shape (n_samples,)
        Fold index (0..n_folds-1) of each sample.
    fold_labels : ndarray
        The user's label of each fold index (when ``folds=`` was given).
    fold_means : ndarray of shape (n_folds,)
        Weighted mean held-out loss of each fold.
    mean : float
        Weighted mean of :attr:`losses` over all samples: the CV estimate.
    stderr : float
        Standard error of the fold means across folds, ``std(fold_means) /
        sqrt(n_folds)`` (as cv.glmnet reports it).
    method : str
    fit : FitResult
        The full-data fit.
    """

    losses: np.ndarray
    predictions: np.ndarray
    folds: np.ndarray
    fold_labels: np.ndarray
    fold_means: np.ndarray
    mean: float
    stderr: float
    method: str
    fit: FitResult

    @property
    def n_folds(self) -> int:
        return int(self.fold_means.shape[0])


def _assign_folds(n: int, n_folds: Any, folds: Any, random_state: Any):
    if folds is not None:
        labels = np.asarray(folds)
        if labels.ndim != 1 or labels.shape[0] != n:
            raise ValueError(
                f"folds must have one label per sample ({n}), got shape {labels.shape}"
            )
        uniq, idx = np.unique(labels, return_inverse=True)
        if n_folds is not None and int(n_folds) != uniq.size:
            raise ValueError(
                f"the fold labels define {uniq.size} non-empty folds but n_folds={n_folds}"
                " (an empty fold?)"
            )
        if uniq.size < 2:
            raise ValueError("folds must define at least 2 folds (one fold holds out everything)")
        return idx.astype(np.int32), uniq
    k = 10 if n_folds is None else n_folds
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"n_folds must be an integer, got {k!r}")
    if k < 2:
        raise ValueError(f"n_folds must be >= 2, got {k}")
    if k > n:
        raise ValueError(f"n_folds={k} is larger than the number of samples ({n})")
    rng = np.random.default_rng(random_state)
    idx = np.empty(n, dtype=np.int32)
    idx[rng.permutation(n)] = np.arange(n) % k
    return idx, np.arange(k)


def kfold(
    X: ArrayLike,
    y: ArrayLike,
    loss: str = "logistic",
    penalty: Penalty | float | None = None,
    n_folds: int | None = None,
    method: str = "alo",
    folds: ArrayLike | None = None,
    random_state: int | None = 0,
    fit_intercept: bool = True,
    sample_weight: ArrayLike | None = None,
    tol: float = 1e-8,
    max_iter: int = 100,
    n_jobs: int | None = None,
) -> KFoldResult:
    """K-fold cross-validation of a penalized GLM.

    Parameters
    ----------
    X, y, loss, penalty, fit_intercept, sample_weight, tol, max_iter, n_jobs
        As in :func:`aloocv.fit`.
    n_folds : int, default 10
        Number of shuffled, nearly equal folds (ignored in favour of ``folds``).
    method : {"alo", "exact"}
        ``"alo"``: the leave-q-out extension of ALO (the paper's remark after
        Definition 6): from the full fit, one Newton step per fold on the exact
        Hessian without that fold, ``beta~_S = beta + H_{-S}^{-1} X~_S^T g_S`` (the
        Woodbury form of a rank-q downdate); no refit, ``O(n p^2 + K p^3)`` in all,
        exact for squared loss with an L2 penalty. ``"exact"``: one refit per fold,
        warm-started from the full fit.
    folds : array_like of shape (n_samples,), optional
        A fold label per sample (any hashable values): grouped data, or
        leave-q-out with user-made folds.
    random_state : int, optional
        Seeds the shuffled fold assignment.

    Returns
    -------
    KFoldResult
    """
    if method not in ("alo", "exact"):
        raise ValueError(f"unknown method {method!r}; expected 'alo' or 'exact'")
    penalty = as_penalty(penalty)
    X, y, loss, pen, l1, w = check_fit_inputs(X, y, loss, penalty, sample_weight)
    tol, max_iter = check_options(tol, max_iter)
    n = X.shape[0]
    idx, labels = _assign_folds(n, n_folds, folds, random_state)
    K = labels.size
    with _blas.single_threaded_blas():
        out = _core.kfold(
            core_design(X),
            y,
            w,
            loss,
            pen,
            bool(fit_intercept),
            idx,
            K,
            method,
            tol,
            max_iter,
            n_threads(n_jobs),
            l1,
        )
    if out["n_not_converged"]:
        warnings.warn(
            f"exact K-fold: {out['n_not_converged']} of {K} refits did not reach tol={tol:g}",
            ConvergenceWarning,
            stacklevel=2,
        )
    losses = out["losses"]
    ww = np.ones(n) if w is None else w
    sums = np.bincount(idx, weights=ww * losses, minlength=K)
    wsum = np.bincount(idx, weights=ww, minlength=K)
    with np.errstate(invalid="ignore", divide="ignore"):
        fold_means = sums / wsum
    if np.any(wsum <= 0):
        raise ValueError("a fold has zero total sample weight")
    mean = float(np.sum(ww * losses) / np.sum(ww))
    stderr = float(np.std(fold_means, ddof=1) / np.sqrt(K))
    return KFoldResult(
        losses=losses,
        predictions=out["predictions"],
        folds=idx.astype(np.intp),
        fold_labels=labels,
        fold_means=fold_means,
        mean=mean,
        stderr=stderr,
        method=method,
        fit=_result(out, loss, penalty, bool(fit_intercept)),
    )
