"""K-fold results: one target, and several targets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .fits import FitResult

__all__ = ["FoldRefinement", "FoldRefits", "KFoldResult", "MultiTargetKFoldResult"]


# ----------------------------------------------------------------------------- refinement
@dataclass(frozen=True, eq=False)
class FoldRefits:
    """What the refinement of an approximate K-fold result (``kfold(..., rtol=)``) asks of
    the backend that made it.

    Attributes
    ----------
    indicator : callable
        ``indicator(rows, predictions) -> ndarray``: ALO's per-sample error indicator
        (:mod:`aloocv.results.trust`) of the samples ``rows`` at their held-out
        predictions ``predictions`` (the fold's shift in place of the leave-one-out one).
    refit : callable
        ``refit(units) -> (losses, predictions, n_not_converged)``: exact refits without
        each fold (or split) of ``units``, one list entry per unit, aligned with the
        unit's test indices (:attr:`KFoldResult.test_indices`).
    tol : float
        The fit tolerance of the refits.
    """

    indicator: Callable[[np.ndarray, np.ndarray], np.ndarray]
    refit: Callable[[np.ndarray], tuple[list, list, int]]
    tol: float


@dataclass(frozen=True)
class FoldRefinement:
    """What ``kfold(..., rtol=r)`` did to an approximate K-fold result.

    Attributes
    ----------
    rtol : float
        The budget: the estimated error of :attr:`KFoldResult.mean` is within ``rtol`` of
        it (relative) when :attr:`met`.
    refitted : ndarray of int
        The folds (split indices) refitted exactly, in the order they were refitted
        (their samples' ``losses`` and ``predictions`` are exact).
    all_refitted : bool
        Every fold was refitted: the result is exact K-fold (with few folds the budget
        often asks for that).
    error : float
        Estimated magnitude of the error of the mean left by the folds not refitted:
        their summed indicator times the calibration, over the total weight.
    relative_error : float
        ``error`` over the refined mean.
    calibration : float or None
        The calibration of the indicator: the largest measured ``|error| / indicator``
        over the refitted folds, at least ``aloocv.folds.CALIBRATION_FLOOR`` (None:
        infinite, a refitted fold without indicator had a measurable error, and every
        fold was refitted).
    plain_mean : float
        The approximate mean before refinement.
    met : bool
    indicator : ndarray of shape (n_folds,)
        Each fold's (weighted) summed indicator, what ranks the folds.
    """

    rtol: float
    refitted: np.ndarray
    all_refitted: bool
    error: float
    relative_error: float
    calibration: float | None
    plain_mean: float
    met: bool
    indicator: np.ndarray

    def __str__(self) -> str:
        if self.all_refitted:
            return (
                f"K-fold refined to rtol={self.rtol:g}: every fold ({self.refitted.size}) "
                "refitted exactly (exact K-fold)"
            )
        return (
            f"K-fold refined to rtol={self.rtol:g}: {self.refitted.size} of "
            f"{self.indicator.size} folds refitted exactly, estimated error of the rest "
            f"{100 * self.relative_error:.2g}%" + ("" if self.met else " (NOT within budget)")
        )


# ----------------------------------------------------------------------------- K-fold
@dataclass
class KFoldResult:
    """Per-sample and per-fold K-fold cross-validation results.

    Attributes
    ----------
    losses : ndarray of shape (n_samples,)
        Loss of each sample under the model fitted without its fold. With ``cv=``
        splits whose test sets do not partition the samples (:attr:`partition` False):
        the average over the splits that test the sample, NaN for a sample no split
        tests.
    predictions : ndarray of shape (n_samples,)
        The held-out linear predictors ``eta~_i`` (averaged, or NaN, as :attr:`losses`).
    folds : ndarray of shape (n_samples,)
        Fold index (``0 .. n_folds - 1``) of each sample; ``fold_labels[folds]`` gives
        the user's labels when ``folds=`` was passed. Without a partition: the first
        split that tests the sample, -1 for none.
    fold_labels : ndarray of shape (n_folds,)
        The label of each fold index: the sorted distinct values of ``folds=``, or
        ``arange(n_folds)`` for shuffled folds and ``cv=`` splits.
    fold_means : ndarray of shape (n_folds,)
        (Weighted) mean held-out loss of each fold (each split's test set), what
        ``cross_val_score`` reports per split.
    mean : float
        The CV estimate: the mean of :attr:`fold_means` weighted by the folds' total
        sample weights. For a partition (every ``n_folds``/``folds=`` run, and ``cv=``
        splitters such as ``KFold``, ``StratifiedKFold``, ``GroupKFold``,
        ``LeaveOneGroupOut``) it is the (weighted) mean of :attr:`losses`; otherwise
        the (weighted) mean over all (split, test sample) pairs.
    stderr : float
        Standard error of :attr:`mean` from the spread of the fold means across folds
        (None for a single ``cv=`` split: no spread to measure),
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
    test_indices : list of ndarray
        The test indices of each fold or split, in the splitter's order.
    split_losses, split_predictions : list of ndarray
        The held-out losses and predictions of each split's test samples (aligned with
        :attr:`test_indices`; a sample tested by several splits has one value per
        split).
    partition : bool
        Whether the test sets partition the samples with each training set their
        complement (always true without ``cv=``).
    refinement : FoldRefinement or None
        With ``rtol=`` (``method="alo"``): which folds were refitted exactly and the
        estimated error of the rest; None otherwise.
    """

    losses: np.ndarray
    predictions: np.ndarray
    folds: np.ndarray
    fold_labels: np.ndarray
    fold_means: np.ndarray
    mean: float
    stderr: float | None
    method: str
    fit: FitResult
    sample_weight: np.ndarray | None = None
    timings: dict[str, float] = field(default_factory=dict)
    test_indices: list[np.ndarray] = field(default_factory=list)
    split_losses: list[np.ndarray] = field(default_factory=list)
    split_predictions: list[np.ndarray] = field(default_factory=list)
    partition: bool = True
    refinement: FoldRefinement | None = None
    # the backend's exact fold refits and indicator, for kfold(rtol=)
    _refits: FoldRefits | None = field(default=None, repr=False, compare=False)

    @property
    def n_folds(self) -> int:
        """The number of folds."""
        return int(self.fold_means.shape[0])

    def __repr__(self) -> str:
        return (
            f"KFoldResult(method={self.method!r}, n={self.losses.shape[0]}, "
            f"n_folds={self.n_folds}, mean={self.mean:.6g}, stderr={self.stderr:.3g})"
        )


@dataclass
class MultiTargetKFoldResult:
    """K-fold results for several targets (squared loss, L2 penalty).

    What :func:`aloocv.kfold` returns for a 2-d ``y``.

    Attributes
    ----------
    losses, predictions : ndarray of shape (n_samples, n_targets)
        Held-out losses ``1/2 (y - eta~)^2`` and linear predictors of each sample under the
        model fitted without its fold.
    folds : ndarray of shape (n_samples,)
    fold_labels : ndarray of shape (n_folds,)
    fold_means : ndarray of shape (n_folds, n_targets)
    mean, stderr : ndarray of shape (n_targets,)
        The CV estimate per target and cv.glmnet's standard error (as in
        :class:`aloocv.KFoldResult`).
    method : str
    coef : ndarray of shape (n_targets, n_features)
        The full-data fit.
    intercept : ndarray of shape (n_targets,)
    sample_weight : ndarray or None
    timings : dict
    """

    losses: np.ndarray
    predictions: np.ndarray
    folds: np.ndarray
    fold_labels: np.ndarray
    fold_means: np.ndarray
    mean: np.ndarray
    stderr: np.ndarray
    method: str
    coef: np.ndarray
    intercept: np.ndarray
    sample_weight: np.ndarray | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def n_folds(self) -> int:
        return int(self.fold_means.shape[0])

    @property
    def n_targets(self) -> int:
        return int(self.losses.shape[1])

    def __repr__(self) -> str:
        return (
            f"MultiTargetKFoldResult(method={self.method!r}, n={self.losses.shape[0]}, "
            f"n_folds={self.n_folds}, n_targets={self.n_targets})"
        )
