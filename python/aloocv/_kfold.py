"""K-fold (leave-q-out) cross-validation: approximate (one Newton step per fold from the
full fit, no refit) or exact (one refit per fold)."""

from __future__ import annotations

import numbers
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.exceptions import ConvergenceWarning

from . import _blas, _core
from ._diagnostics import check_classes, check_fold_classes
from ._fit import FitResult, _result, _warn_not_converged
from ._validation import (
    MULTINOMIAL,
    as_penalty,
    check_finite_result,
    check_fit_inputs,
    check_offset,
    check_options,
    core_design,
    is_dask_collection,
    n_threads,
)
from .penalties import Penalty

__all__ = ["KFoldResult", "kfold"]

KFOLD_METHODS = ("alo", "exact")


@dataclass
class KFoldResult:
    """Per-sample and per-fold K-fold cross-validation results.

    Attributes
    ----------
    losses : ndarray of shape (n_samples,)
        Loss of each sample under the model fitted without its fold.
    predictions : ndarray of shape (n_samples,)
        The held-out linear predictors ``eta~_i``.
    folds : ndarray of shape (n_samples,)
        Fold index (``0 .. n_folds - 1``) of each sample; ``fold_labels[folds]`` gives
        the user's labels when ``folds=`` was passed.
    fold_labels : ndarray of shape (n_folds,)
        The label of each fold index: the sorted distinct values of ``folds=``, or
        ``arange(n_folds)`` for shuffled folds.
    fold_means : ndarray of shape (n_folds,)
        (Weighted) mean held-out loss of each fold.
    mean : float
        (Weighted) mean of :attr:`losses` over all samples: the CV estimate. It is also
        the mean of :attr:`fold_means` weighted by the folds' total sample weights.
    stderr : float
        Standard error of :attr:`mean` from the spread of the fold means across folds,
        as ``cv.glmnet`` computes ``cvsd``: ``sqrt(sum_k W_k (m_k - mean)^2 / sum_k W_k
        / (K - 1))`` with ``m_k`` the fold means and ``W_k`` the folds' total weights
        (sizes when unweighted). For equal folds this is ``std(fold_means, ddof=1) /
        sqrt(K)``.
    method : str
        ``"alo"`` or ``"exact"``.
    fit : FitResult
        The full-data fit (the expansion point of ``"alo"``, the warm start of
        ``"exact"``).
    sample_weight : ndarray or None
        The weights of the weighted means.
    timings : dict
        Wall times in seconds of the full fit (``"fit"``) and of the per-fold work
        (``"folds"``: the downdates of ``"alo"``, the refits of ``"exact"``).
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
    sample_weight: np.ndarray | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def n_folds(self) -> int:
        """The number of folds."""
        return int(self.fold_means.shape[0])

    def __repr__(self) -> str:
        return (
            f"KFoldResult(method={self.method!r}, n={self.losses.shape[0]}, "
            f"n_folds={self.n_folds}, mean={self.mean:.6g}, stderr={self.stderr:.3g})"
        )


def _label(labels: np.ndarray, k: int) -> str:
    """repr of the label of fold index k, as a Python value."""
    lab = labels[k]
    return repr(lab.item() if isinstance(lab, np.generic) else lab)


def _check_n_folds(n_folds: Any, n: int) -> int:
    if isinstance(n_folds, bool) or not isinstance(n_folds, numbers.Integral):
        raise TypeError(f"n_folds must be an integer, got {n_folds!r}")
    k = int(n_folds)
    if k < 2:
        raise ValueError(f"n_folds must be >= 2, got {k}")
    if k > n:
        raise ValueError(f"n_folds={k} is larger than the number of samples ({n})")
    return k


def _assign_folds(
    n: int, n_folds: Any, folds: Any, random_state: Any
) -> tuple[np.ndarray, np.ndarray]:
    """(fold index per sample as int32, label of each fold index)."""
    if folds is not None:
        labels = np.asarray(folds)
        if labels.ndim != 1 or labels.shape[0] != n:
            raise ValueError(
                f"folds must have one label per sample ({n}), got shape {labels.shape}"
            )
        if labels.dtype.kind in "fc" and not np.isfinite(labels).all():
            raise ValueError("folds contains NaN or inf labels")
        try:
            uniq, idx = np.unique(labels, return_inverse=True)
        except TypeError as e:
            raise TypeError(f"fold labels must be mutually comparable values: {e}") from None
        if uniq.size < 2:
            raise ValueError(
                "folds must define at least 2 folds (a single fold holds out everything)"
            )
        if n_folds is not None and _check_n_folds(n_folds, n) != uniq.size:
            raise ValueError(
                f"the fold labels define {uniq.size} non-empty folds but n_folds={n_folds}"
                f" (with n_folds={n_folds} some fold would be empty)"
            )
        return idx.reshape(-1).astype(np.int32), uniq
    k = _check_n_folds(10 if n_folds is None else n_folds, n)
    # As scikit-learn's KFold(shuffle=True): contiguous chunks of a random permutation,
    # the first n % k folds one sample larger.
    sizes = np.full(k, n // k)
    sizes[: n % k] += 1
    perm = np.random.default_rng(random_state).permutation(n)
    idx = np.empty(n, dtype=np.int32)
    idx[perm] = np.repeat(np.arange(k, dtype=np.int32), sizes)
    return idx, np.arange(k)


def kfold(
    X: ArrayLike,
    y: ArrayLike,
    loss: Any = "logistic",
    penalty: Penalty | float | None = None,
    n_folds: int | None = None,
    method: str = "alo",
    folds: ArrayLike | None = None,
    random_state: int | np.random.Generator | None = 0,
    fit_intercept: bool = True,
    sample_weight: ArrayLike | None = None,
    tol: float = 1e-8,
    max_iter: int = 100,
    n_jobs: int | None = None,
    offset: ArrayLike | None = None,
) -> KFoldResult:
    """K-fold (or leave-q-out) cross-validation of a penalized GLM.

    Parameters
    ----------
    X, y, loss, penalty, fit_intercept, sample_weight, tol, max_iter, n_jobs, offset
        As in :func:`aloocv.fit`.
    n_folds : int, optional
        Number of shuffled, nearly equal folds (default 10). With ``folds=`` it may be
        given as a check: it must equal the number of distinct labels. ``n_folds ==
        n_samples`` is leave-one-out.
    method : {"alo", "exact"}
        ``"alo"``: the leave-q-out extension of ALO (the paper's remark after
        Definition 6). From the full fit, one Newton step per fold S on the exact
        Hessian without S (a rank-q downdate of the fit's Cholesky factor), in the
        Woodbury form ``eta~_S = eta_S + K_S (I - D_S K_S)^{-1} g_S`` with ``K_S =
        X~_S H^{-1} X~_S^T`` for small folds, or ``beta~_S = beta + H_{-S}^{-1} X~_S^T
        g_S`` for folds larger than about p/2 (same value, cheaper there). No refit:
        ``O(n p^2)`` plus ``O(n q^2)`` or ``O(K p^3)``; exact for squared loss with an L2
        penalty. ``"exact"``: one refit per fold (the full problem with the fold's
        weights set to 0), warm-started from the full fit and solved to ``tol``.
    folds : array_like of shape (n_samples,), optional
        A fold label per sample (ints, strings, any mutually comparable values):
        grouped data (all samples of a group held out together) or leave-q-out with
        user-made folds. Folds may have different sizes.
    random_state : int, numpy Generator or None, default 0
        Seeds ``numpy.random.default_rng`` for the shuffled folds (ignored with
        ``folds=``).

    Returns
    -------
    KFoldResult
        ``losses``, ``predictions``, ``folds``, ``fold_means``, ``mean``, ``stderr``,
        ``fit``.

    Raises
    ------
    ValueError
        For ``n_folds < 2`` or ``> n_samples``, ``folds`` of the wrong length or with a
        single label, ``n_folds`` inconsistent with ``folds``, a fold with zero total
        sample weight, an unknown ``method``, or (``"alo"``) a fold without which the
        problem has no unique minimizer.

    Examples
    --------
    >>> import numpy as np, aloocv
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((500, 5)); y = (X[:, 0] + rng.standard_normal(500) > 0) * 1.0
    >>> cv = aloocv.kfold(X, y, loss="logistic", penalty=aloocv.L2(1.0), n_folds=5)
    >>> cv.fold_means.shape
    (5,)
    >>> groups = np.repeat(np.arange(50), 10)  # leave-one-group-out
    >>> aloocv.kfold(X, y, loss="logistic", folds=groups).n_folds
    50
    """
    if not isinstance(method, str) or method not in KFOLD_METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {list(KFOLD_METHODS)}")
    if is_dask_collection(X):  # map-reduce over the row chunks: aloocv._dask
        from . import _dask

        return _dask.kfold(
            X,
            y,
            loss,
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
            offset,
        )
    if isinstance(loss, str) and loss == MULTINOMIAL:
        from . import _multinomial

        return _multinomial.kfold(
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
        )
    penalty = as_penalty(penalty)
    X, y, loss, pen, l1, w = check_fit_inputs(X, y, loss, penalty, sample_weight, fit_intercept)
    tol, max_iter = check_options(tol, max_iter)
    n = X.shape[0]
    off = check_offset(offset, n)
    idx, labels = _assign_folds(n, n_folds, folds, random_state)
    K = labels.size
    ww = np.ones(n) if w is None else w
    wsum = np.bincount(idx, weights=ww, minlength=K)
    if np.any(wsum <= 0):
        bad = int(np.flatnonzero(wsum <= 0)[0])
        raise ValueError(f"fold {_label(labels, bad)} has zero total sample weight")
    check_classes(y, w, loss, bool(fit_intercept))
    try:
        check_fold_classes(y, w, idx, K, loss, bool(fit_intercept))
    except ValueError as e:
        msg = re.sub(r"fold (\d+)", lambda m: f"fold {_label(labels, int(m.group(1)))}", str(e))
        raise ValueError(msg) from None
    try:
        with _blas.single_threaded_blas():
            out = _core.kfold(
                core_design(X),
                y,
                w,
                loss.core,
                pen,
                bool(fit_intercept),
                idx,
                K,
                method,
                tol,
                max_iter,
                n_threads(n_jobs),
                l1,
                offset=off,
            )
    except ValueError as e:
        if folds is None:
            raise

        # the core names folds by index: name the user's label instead
        msg = re.sub(r"fold (\d+)", lambda m: f"fold {_label(labels, int(m.group(1)))}", str(e))
        raise ValueError(msg) from None
    check_finite_result(
        f"kfold(method={method!r})",
        coef=out["coef"],
        intercept=out["intercept"],
        losses=out["losses"],
        predictions=out["predictions"],
    )
    fitres = _result(out, loss, penalty, bool(fit_intercept))
    _warn_not_converged(fitres, tol, max_iter)
    if out["n_not_converged"]:
        warnings.warn(
            f"exact K-fold: {out['n_not_converged']} of {K} refits did not reach tol={tol:g}",
            ConvergenceWarning,
            stacklevel=2,
        )
    return fold_result(
        out["losses"],
        out["predictions"],
        idx,
        labels,
        ww,
        wsum,
        method,
        fitres,
        w,
        {"fit": float(out["seconds_fit"]), "folds": float(out["seconds_folds"])},
    )


def fold_result(
    losses, predictions, idx, labels, ww, wsum, method, fitres, w, timings
) -> KFoldResult:
    """Per-fold means, the mean and cv.glmnet's standard error of per-sample held-out losses
    (``ww``: weights of the mean, ``wsum``: their sum per fold) as a KFoldResult."""
    K = wsum.shape[0]
    fold_means = np.bincount(idx, weights=ww * losses, minlength=K) / wsum
    total = wsum.sum()
    mean = float(np.sum(ww * losses) / total)
    # cv.glmnet's cvsd: the fold-weighted variance of the fold means around the mean,
    # divided by K - 1
    stderr = float(np.sqrt(np.sum(wsum * (fold_means - mean) ** 2) / total / (K - 1)))
    return KFoldResult(
        losses=losses,
        predictions=predictions,
        folds=idx.astype(np.intp),
        fold_labels=labels,
        fold_means=fold_means,
        mean=mean,
        stderr=stderr,
        method=method,
        fit=fitres,
        sample_weight=w,
        timings=timings,
    )
