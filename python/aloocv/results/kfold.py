"""K-fold results: one target, and several targets."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .fits import FitResult

__all__ = ["KFoldResult", "MultiTargetKFoldResult"]


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
