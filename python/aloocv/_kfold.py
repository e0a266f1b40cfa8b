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
from ._multitarget import MultiTargetKFoldResult
from ._validation import (
    MULTINOMIAL,
    as_penalty,
    check_finite_result,
    check_fit_inputs,
    check_labels,
    check_offset,
    check_options,
    check_X,
    core_design,
    is_dask_collection,
    is_multi_target,
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
        (NaN for a single ``cv=`` split),
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
    stderr: float
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


def _label(labels: np.ndarray, k: int) -> str:
    """repr of the label of fold index k, as a Python value."""
    lab = labels[k]
    return repr(lab.item() if isinstance(lab, np.generic) else lab)


def relabel_folds(msg: str, labels: np.ndarray) -> str:
    """A core message naming folds by index ("fold 3"), with the user's labels instead."""
    return re.sub(r"fold (\d+)", lambda m: f"fold {_label(labels, int(m.group(1)))}", msg)


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


def _cv_splits(cv: Any, X: Any, y: Any, groups: Any, loss: Any, n: int) -> list:
    """The (train, test) index pairs of ``cv`` as ``sklearn.model_selection.check_cv``
    reads it (an int is ``StratifiedKFold`` for class labels of the logistic and
    multinomial losses, ``KFold`` otherwise; a splitter; an iterable of pairs), checked:
    integer indices in range, non-empty test sets without repeats, non-empty training
    sets disjoint from their test sets."""
    from sklearn.model_selection import check_cv

    if isinstance(cv, bool) or cv is None:
        raise TypeError(f"cv must be an int, a splitter or an iterable of splits, got {cv!r}")
    if isinstance(cv, numbers.Integral) and int(cv) < 2:
        raise ValueError(f"cv must be >= 2 folds, got {cv}")
    if groups is not None:
        groups = check_labels(groups, n, "groups")
    classifier = isinstance(loss, str) and loss in ("logistic", MULTINOMIAL)
    yy = np.asarray(y)
    if not isinstance(cv, numbers.Integral) and not hasattr(cv, "split"):
        if isinstance(cv, (str, bytes)) or not hasattr(cv, "__iter__"):
            raise TypeError(f"cv must be an int, a splitter or an iterable of splits, got {cv!r}")
        raw = list(cv)  # an iterable of (train, test) pairs, checked below
    else:
        try:
            splitter = check_cv(cv, yy, classifier=classifier)
            raw = list(splitter.split(X, yy, groups))
        except ValueError as e:
            raise ValueError(f"cv={cv!r}: {e}") from None
    if not raw:
        raise ValueError(f"cv={cv!r} produced no splits")
    splits = []
    for k, pair in enumerate(raw):
        try:
            tr, te = pair
        except (TypeError, ValueError):
            raise TypeError(f"split {k} of cv is not a (train, test) pair") from None
        tr, te = np.asarray(tr), np.asarray(te)
        for name, a in (("train", tr), ("test", te)):
            if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
                raise TypeError(f"split {k}: {name} must be a 1-d array of integer indices")
            if a.size and (a.min() < 0 or a.max() >= n):
                raise ValueError(f"split {k}: {name} indices out of range [0, {n})")
        tr, te = tr.astype(np.intp), te.astype(np.intp)
        if te.size == 0 or tr.size == 0:
            raise ValueError(f"split {k} has an empty {'test' if te.size == 0 else 'training'} set")
        if np.unique(te).size != te.size:
            raise ValueError(f"split {k}: the test set repeats samples")
        if np.unique(tr).size != tr.size:
            raise ValueError(
                f"split {k}: the training set repeats samples (bootstrap-style splits): pass "
                "the repeat counts as sample_weight instead"
            )
        if np.intersect1d(tr, te).size:
            raise ValueError(
                f"split {k}: training and test sets overlap (a held-out prediction needs the "
                "test samples outside the training set)"
            )
        splits.append((tr, te))
    return splits


def _partition(splits: list, n: int) -> np.ndarray | None:
    """Fold index per sample when the test sets partition the samples and every training
    set is the complement of its test set, else None."""
    idx = np.full(n, -1, dtype=np.int32)
    for k, (tr, te) in enumerate(splits):
        if np.any(idx[te] >= 0) or tr.size + te.size != n or np.unique(tr).size != tr.size:
            return None
        idx[te] = k
    return idx if np.all(idx >= 0) else None


def split_result(splits, pred_tests, loss_tests, ww, n, method, fitres, w, timings) -> KFoldResult:
    """KFoldResult of splits whose test sets do not partition the samples: per-split means
    weighted by the test weights; per-sample values averaged over the splits testing the
    sample (NaN where none)."""
    K = len(splits)
    wsum = np.array([ww[te].sum() for _, te in splits])
    bad = np.flatnonzero(wsum <= 0)
    if bad.size:
        raise ValueError(f"the test set of split {int(bad[0])} has zero total sample weight")
    fold_means = np.array([np.dot(ww[te], lt) for (_, te), lt in zip(splits, loss_tests)]) / wsum
    total = wsum.sum()
    mean = float(np.dot(wsum, fold_means) / total)
    # across splits as for folds; a single split (a holdout) has none
    stderr = (
        float(np.sqrt(np.sum(wsum * (fold_means - mean) ** 2) / total / (K - 1)))
        if K > 1
        else float("nan")
    )
    all_te = np.concatenate([te for _, te in splits])
    count = np.bincount(all_te, minlength=n).astype(float)
    tested = count > 0
    shape = (n, *pred_tests[0].shape[1:])
    pred = np.zeros(shape)
    np.add.at(pred, all_te, np.concatenate(pred_tests))
    losses = np.bincount(all_te, weights=np.concatenate(loss_tests), minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        pred = pred / count.reshape((n,) + (1,) * (pred.ndim - 1))
        losses = losses / count
    pred[~tested] = np.nan
    losses[~tested] = np.nan
    folds = np.full(n, -1, dtype=np.intp)
    for k in range(K - 1, -1, -1):
        folds[splits[k][1]] = k
    return KFoldResult(
        losses=losses,
        predictions=pred,
        folds=folds,
        fold_labels=np.arange(K),
        fold_means=fold_means,
        mean=mean,
        stderr=stderr,
        method=method,
        fit=fitres,
        sample_weight=w,
        timings=timings,
        test_indices=[te for _, te in splits],
        split_losses=list(loss_tests),
        split_predictions=list(pred_tests),
        partition=False,
    )


def check_split_classes(y, w, splits, fit_intercept: bool) -> None:
    """Logistic splits with an intercept: every training set needs both classes."""
    if not fit_intercept:
        return
    pos = np.ones(y.shape[0], bool) if w is None else w > 0
    for k, (tr, _) in enumerate(splits):
        yt = y[tr][pos[tr]]
        n1 = int(np.sum(yt > 0.5))
        if n1 == 0 or n1 == yt.size:
            raise ValueError(
                f"the training set of split {k} has only one class ({yt.size - n1} zeros, "
                f"{n1} ones): a logistic fit on it has no finite intercept"
            )


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
    cv: Any = None,
    groups: ArrayLike | None = None,
) -> KFoldResult | MultiTargetKFoldResult:
    """K-fold (or leave-q-out) cross-validation of a penalized GLM.

    Parameters
    ----------
    X, y, loss, penalty, fit_intercept, sample_weight, tol, max_iter, n_jobs, offset
        As in :func:`aloocv.fit`. A 2-d ``y`` ``(n_samples, n_targets)`` with
        ``loss="squared"`` and an L2 penalty gives a
        :class:`aloocv.MultiTargetKFoldResult` (per-target losses, fold means, mean and
        stderr; every target shares one decomposition, ``"alo"`` is the exact fold
        downdate, ``"exact"`` one refit per fold for all targets at once; no ``offset=``).
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
        ``folds=`` and ``cv=``).
    cv : int, scikit-learn splitter or iterable of (train, test), optional
        The folds as ``sklearn.model_selection.check_cv`` reads them (instead of
        ``n_folds``/``folds``): an int is an unshuffled ``StratifiedKFold`` for class
        labels of the logistic and multinomial losses and ``KFold`` otherwise, as
        scikit-learn does for classifiers; a splitter (``GroupKFold``,
        ``LeaveOneGroupOut``, ``TimeSeriesSplit``, ``ShuffleSplit``, ...) is called as
        ``cv.split(X, y, groups)``. When the test sets partition the samples and each
        training set is the complement of its test set, the result is that of
        ``folds=``. Otherwise (``TimeSeriesSplit``, ``ShuffleSplit``: test sets that
        overlap or miss samples, training sets that leave samples out) every split is
        computed on its own: ``"alo"`` takes one Newton step from the full fit on the
        problem without all the samples outside the training set (the same downdate,
        of that set), ``"exact"`` refits on the training set; :attr:`KFoldResult.
        fold_means` are the per-split test losses and ``split_predictions`` the
        per-split predictions. A split whose training set is a small part of the data
        is far from the full fit, where the one-step approximation is weakest (it is
        exact for squared loss with an L2 penalty).
    groups : array_like of shape (n_samples,), optional
        Group labels passed to ``cv.split`` (``GroupKFold``, ``LeaveOneGroupOut``,
        ``LeavePGroupsOut``, ``StratifiedGroupKFold``). Only with ``cv=``.
        Approximate leave-one-group-out (blocked leave-one-out for grouped data and
        time series cut into blocks) is ``cv=LeaveOneGroupOut(), groups=g``, the same
        as ``folds=g``: one downdate per group, no refit.

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
    >>> from sklearn.model_selection import LeaveOneGroupOut, TimeSeriesSplit
    >>> aloocv.kfold(X, y, loss="logistic", cv=LeaveOneGroupOut(), groups=groups).n_folds
    50
    >>> ts = aloocv.kfold(X, y, loss="logistic", cv=TimeSeriesSplit(4))
    >>> ts.partition, ts.fold_means.shape
    (False, (4,))
    """
    if is_multi_target(y):
        from . import _multitarget

        return _multitarget.kfold(
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
            offset=(offset, None),
        )
    if not isinstance(method, str) or method not in KFOLD_METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {list(KFOLD_METHODS)}")
    if is_dask_collection(X):  # map-reduce over the row chunks: aloocv.backends.dask
        from .backends import dask as _dask

        if cv is not None or groups is not None:
            raise ValueError(
                "cv= and groups= are not available for dask input: pass n_folds= or "
                "folds= (fold labels)"
            )
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
        route = _dask.multinomial_kfold if problem.is_multinomial else _dask.kfold
        return route(
            problem, n_folds=n_folds, method=method, folds=folds, random_state=random_state
        )
    splits = None
    if cv is not None:
        if n_folds is not None or folds is not None:
            raise ValueError("pass the folds as cv= or as n_folds=/folds=, not both")
        X = check_X(X)  # validated once here: canonical arrays pass the later checks as is
        splits = _cv_splits(cv, X, y, groups, loss, X.shape[0])
        part = _partition(splits, X.shape[0])
        if part is not None:
            folds, splits = part, None
    elif groups is not None:
        raise ValueError(
            "groups= goes with cv= (e.g. cv=GroupKFold(5) or cv=LeaveOneGroupOut()); "
            "folds=groups holds out each group"
        )
    if isinstance(loss, str) and loss == MULTINOMIAL:
        if offset is not None:  # the softmax model has no offset term
            raise ValueError("offset= is not available for the multinomial loss")
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
            splits=splits,
        )
    penalty = as_penalty(penalty)
    X, y, loss, pen, l1, w = check_fit_inputs(X, y, loss, penalty, sample_weight, fit_intercept)
    tol, max_iter = check_options(tol, max_iter)
    n = X.shape[0]
    off = check_offset(offset, n)
    if splits is not None:
        return _kfold_splits(
            X,
            y,
            loss,
            penalty,
            pen,
            l1,
            w,
            fit_intercept,
            splits,
            method,
            tol,
            max_iter,
            n_jobs,
            off,
        )
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
        raise ValueError(relabel_folds(str(e), labels)) from None
    try:
        with _blas.single_threaded_blas():
            out = _core.kfold(
                core_design(X),
                y,
                w,
                loss.core,
                pen,
                fit_intercept=bool(fit_intercept),
                folds=idx,
                n_folds=K,
                method=method,
                tol=tol,
                max_iter=max_iter,
                n_threads=n_threads(n_jobs),
                l1=l1,
                offset=off,
            )
    except ValueError as e:
        if folds is None:
            raise

        # the core names folds by index: name the user's label instead
        raise ValueError(relabel_folds(str(e), labels)) from None
    fitres = _checked_core_result(out, method, loss, penalty, fit_intercept, tol, max_iter, K)
    return fold_result(
        out.losses,
        out.predictions,
        idx,
        labels,
        ww,
        wsum,
        method,
        fitres,
        w,
        {"fit": float(out.seconds_fit), "folds": float(out.seconds_folds)},
    )


def _checked_core_result(
    out: _core.KFoldResult, method, loss, penalty, fit_intercept, tol, max_iter, n_refits
):
    """The full fit of a core K-fold / held-out run, after checking its outputs are finite
    and warning about unconverged fits and refits."""
    check_finite_result(
        f"kfold(method={method!r})",
        coef=out.coef,
        intercept=out.intercept,
        losses=out.losses,
        predictions=out.predictions,
    )
    fitres = _result(out, loss, penalty, bool(fit_intercept))
    _warn_not_converged(fitres, tol, max_iter)
    if out.n_not_converged:
        warnings.warn(
            f"exact K-fold: {out.n_not_converged} of {n_refits} refits did not reach tol={tol:g}",
            ConvergenceWarning,
            stacklevel=4,
        )
    return fitres


def _kfold_splits(
    X, y, loss, penalty, pen, l1, w, fit_intercept, splits, method, tol, max_iter, n_jobs, off
) -> KFoldResult:
    """kfold for splits that do not partition the samples: each split leaves out the
    complement of its training set on its own (one core call for all splits)."""
    n = X.shape[0]
    ww = np.ones(n) if w is None else w
    removed = []
    for k, (tr, _) in enumerate(splits):
        if not ww[tr].sum() > 0:
            raise ValueError(f"the training set of split {k} has zero total sample weight")
        keep = np.ones(n, bool)
        keep[tr] = False
        removed.append(np.flatnonzero(keep))
    check_classes(y, w, loss, bool(fit_intercept))
    if loss == "logistic":
        check_split_classes(y, w, splits, bool(fit_intercept))
    indptr = np.zeros(len(removed) + 1, dtype=np.int32)
    indptr[1:] = np.cumsum([r.size for r in removed])
    indices = np.concatenate(removed).astype(np.int32)
    try:
        with _blas.single_threaded_blas():
            out = _core.holdout(
                core_design(X),
                y,
                w,
                loss.core,
                pen,
                fit_intercept=bool(fit_intercept),
                indices=indices,
                indptr=indptr,
                method=method,
                tol=tol,
                max_iter=max_iter,
                n_threads=n_threads(n_jobs),
                l1=l1,
                offset=off,
            )
    except ValueError as e:
        msg = re.sub(r"(fold|held-out set) (\d+)", r"split \2", str(e))
        raise ValueError(msg) from None
    fitres = _checked_core_result(
        out, method, loss, penalty, fit_intercept, tol, max_iter, len(splits)
    )
    pred_tests, loss_tests = [], []
    for k, (_, te) in enumerate(splits):
        pos = indptr[k] + np.searchsorted(removed[k], te)  # test is inside the removed set
        pred_tests.append(out.predictions[pos])
        loss_tests.append(out.losses[pos])
    return split_result(
        splits,
        pred_tests,
        loss_tests,
        ww,
        n,
        method,
        fitres,
        w,
        {"fit": float(out.seconds_fit), "folds": float(out.seconds_folds)},
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
    order = np.argsort(idx, kind="stable")
    test_indices = np.split(order, np.cumsum(np.bincount(idx, minlength=K))[:-1])
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
        test_indices=test_indices,
        split_losses=[losses[t] for t in test_indices],
        split_predictions=[predictions[t] for t in test_indices],
    )
