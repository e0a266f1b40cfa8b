"""K-fold bookkeeping shared by every backend: fold assignment, scikit-learn splitters,
and the per-fold means and cv.glmnet standard error of held-out losses
(``docs/math/kfold.md``)."""

from __future__ import annotations

import dataclasses
import numbers
import re
import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ._diagnostics import user_stacklevel
from ._validation import check_cv_arg, check_labels
from .results import FoldRefinement, KFoldResult

__all__ = [
    "CALIBRATION_FLOOR",
    "KFOLD_METHODS",
    "FoldPlan",
    "FoldRequest",
    "assign_folds",
    "check_fold_sums",
    "check_n_folds",
    "check_split_classes",
    "cv_splits",
    "fold_label",
    "fold_plan",
    "fold_result",
    "fold_weights",
    "partition",
    "refine_folds",
    "relabel_folds",
    "split_result",
]

KFOLD_METHODS = ("alo", "exact")


@dataclass(frozen=True, eq=False)
class FoldRequest:
    """The folds a K-fold call asks for (:func:`aloocv.kfold`'s arguments, as given):
    ``n_folds`` shuffled folds seeded by ``random_state``, fold labels ``folds``, or a
    scikit-learn ``cv=`` with its ``groups``."""

    method: str = "alo"
    n_folds: Any = None
    folds: Any = None
    random_state: Any = 0
    cv: Any = None
    groups: Any = None


@dataclass(frozen=True, eq=False)
class FoldPlan:
    """The folds of one K-fold call: a partition (``folds`` with its ``labels``) or, for
    ``cv=`` splits whose test sets do not partition the samples, the ``splits``.

    Attributes
    ----------
    method : {"alo", "exact"}
    folds : ndarray of int32 or None
        Fold index per sample (a partition).
    labels : ndarray or None
        The label of each fold index.
    splits : list of (train, test) or None
        Non-partition splits.
    user_labels : bool
        Whether the folds came from the user's labels (errors then name those labels).
    """

    method: str
    folds: np.ndarray | None = None
    labels: np.ndarray | None = None
    splits: list | None = None
    user_labels: bool = False

    @property
    def n_folds(self) -> int:
        return len(self.splits) if self.splits is not None else int(self.labels.size)


#: Losses whose y are class labels: an integer ``cv=`` means stratified folds for them.
CLASSIFIER_LOSSES = ("logistic", "multinomial")


def fold_label(labels: np.ndarray, k: int) -> str:
    """repr of the label of fold index k, as a Python value."""
    lab = labels[k]
    return repr(lab.item() if isinstance(lab, np.generic) else lab)


def relabel_folds(msg: str, labels: np.ndarray) -> str:
    """A core message naming folds by index ("fold 3"), with the user's labels instead."""
    return re.sub(r"fold (\d+)", lambda m: f"fold {fold_label(labels, int(m.group(1)))}", msg)


def check_n_folds(n_folds: Any, n: int) -> int:
    if isinstance(n_folds, bool) or not isinstance(n_folds, numbers.Integral):
        raise TypeError(f"n_folds must be an integer, got {n_folds!r}")
    k = int(n_folds)
    if k < 2:
        raise ValueError(f"n_folds must be >= 2, got {k}")
    if k > n:
        raise ValueError(f"n_folds={k} is larger than the number of samples ({n})")
    return k


def assign_folds(
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
        if n_folds is not None and check_n_folds(n_folds, n) != uniq.size:
            raise ValueError(
                f"the fold labels define {uniq.size} non-empty folds but n_folds={n_folds}"
                f" (with n_folds={n_folds} some fold would be empty)"
            )
        return idx.reshape(-1).astype(np.int32), uniq
    k = check_n_folds(10 if n_folds is None else n_folds, n)
    # As scikit-learn's KFold(shuffle=True): contiguous chunks of a random permutation,
    # the first n % k folds one sample larger.
    sizes = np.full(k, n // k)
    sizes[: n % k] += 1
    perm = np.random.default_rng(random_state).permutation(n)
    idx = np.empty(n, dtype=np.int32)
    idx[perm] = np.repeat(np.arange(k, dtype=np.int32), sizes)
    return idx, np.arange(k)


def cv_splits(cv: Any, X: Any, y: Any, groups: Any, loss: Any, n: int) -> list:
    """The (train, test) index pairs of ``cv`` as ``sklearn.model_selection.check_cv``
    reads it (an int is ``StratifiedKFold`` for class labels of the logistic and
    multinomial losses, ``KFold`` otherwise; a splitter; an iterable of pairs), checked:
    integer indices in range, non-empty test sets without repeats, non-empty training
    sets disjoint from their test sets."""
    from sklearn.model_selection import check_cv

    cv = check_cv_arg(cv)
    if groups is not None:
        groups = check_labels(groups, n, "groups")
    classifier = getattr(loss, "name", loss) in CLASSIFIER_LOSSES
    yy = np.asarray(y)
    if not isinstance(cv, numbers.Integral) and not hasattr(cv, "split"):
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


def partition(splits: list, n: int) -> np.ndarray | None:
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
        float(np.sqrt(np.sum(wsum * (fold_means - mean) ** 2) / total / (K - 1))) if K > 1 else None
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


def fold_weights(
    folds: np.ndarray, labels: np.ndarray, w: np.ndarray | None, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """(per-sample weights of the means, each fold's total weight), checked: every fold
    needs a positive total weight."""
    ww = np.ones(n) if w is None else w
    return ww, check_fold_sums(np.bincount(folds, weights=ww, minlength=labels.size), labels)


def check_fold_sums(wsum: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``wsum`` (each fold's total weight) when every fold's is positive."""
    if np.any(wsum <= 0):
        bad = int(np.flatnonzero(wsum <= 0)[0])
        raise ValueError(f"fold {fold_label(labels, bad)} has zero total sample weight")
    return wsum


def fold_plan(pb: Any, req: FoldRequest) -> FoldPlan:
    """The folds of a K-fold call on an in-memory problem (a
    :class:`FoldRequest`): ``cv=`` splits (a partition becomes fold
    labels), user labels, or shuffled folds."""
    n = pb.n_samples
    folds = req.folds
    if req.cv is not None:
        splits = cv_splits(req.cv, pb.X, pb.y, req.groups, pb.loss, n)
        part = partition(splits, n)
        if part is None:
            return FoldPlan(req.method, splits=splits)
        folds = part
    idx, labels = assign_folds(n, req.n_folds, folds, req.random_state)
    return FoldPlan(req.method, idx, labels, user_labels=folds is not None)


# ----------------------------------------------------------------------------- rtol=
#: Measured errors of a refitted fold below this share of the budget count as zero (the
#: refits' tolerance), for the calibration of folds whose indicator is zero.
NEGLIGIBLE_SHARE = 1e-3
#: The calibration of the folds' indicator (measured |error| / indicator) is at least this:
#: on real data the indicator over-states the error at most about 4x
#: (``docs/math/trust.md``, "The indicator"), so refitted folds that happen to be accurate
#: do not let the estimate of the rest fall below a quarter of the indicator.
CALIBRATION_FLOOR = 0.25


def _census(score_sorted: np.ndarray, target: float, at_least: int) -> int:
    """The smallest k >= at_least whose tail ``score_sorted[k:]`` sums to at most target."""
    tail = np.concatenate([np.cumsum(score_sorted[::-1])[::-1], [0.0]])
    ok = np.flatnonzero(tail <= target)
    k = int(ok[0]) if ok.size else score_sorted.size
    return min(max(k, at_least), score_sorted.size)


def _calibration(ind: np.ndarray, err: np.ndarray, done: list, small: float) -> float:
    """The largest measured ``|error| / indicator`` over the refitted folds, at least
    ``CALIBRATION_FLOOR`` (inf when a fold without indicator has a measurable error)."""
    ratios = [abs(err[u]) / ind[u] for u in done if 0 < ind[u] < np.inf]
    if any(ind[u] == 0 and abs(err[u]) > small for u in done):
        return np.inf
    return max(CALIBRATION_FLOOR, *ratios)


def refine_folds(res: KFoldResult, rtol: float) -> KFoldResult:
    """An approximate K-fold result brought within ``rtol`` of exact K-fold
    (``kfold(..., rtol=)``, ``docs/math/kfold.md``): the folds (or splits) ranked by the
    sum of their samples' weighted error indicator (ALO's indicator at the fold's held-out
    prediction), the first ones refitted exactly until the estimated error of the rest
    (their summed indicator times the largest measured error/indicator ratio of the
    refitted folds, at least ``CALIBRATION_FLOOR``, over the total weight) is within
    ``rtol`` of the refined mean."""
    rf = res._refits
    t0 = time.perf_counter()
    tests = res.test_indices
    K = len(tests)
    w = np.ones(res.losses.shape[0]) if res.sample_weight is None else res.sample_weight
    wt = [w[te] for te in tests]
    W = float(sum(x.sum() for x in wt))
    ind = np.array(
        [float(wt[k] @ rf.indicator(tests[k], res.split_predictions[k])) for k in range(K)]
    )
    ind = np.where(np.isfinite(ind), ind, np.inf)
    losses = [np.array(v, dtype=np.float64) for v in res.split_losses]
    preds = [np.array(v, dtype=np.float64) for v in res.split_predictions]
    plain = res.mean
    order = np.argsort(-ind, kind="stable")
    err = np.zeros(K)
    done: list[int] = []
    n_nc = 0
    k = _census(ind[order], 0.5 * rtol * abs(plain) * W, 1)
    while True:
        new = np.array([u for u in order[:k] if u not in done], dtype=np.int64)
        ls, ps, nc = rf.refit(new)
        n_nc += int(nc)
        for u, lu, pu in zip(new.tolist(), ls, ps):
            err[u] = float(wt[u] @ (losses[u] - lu))
            losses[u], preds[u] = np.asarray(lu, dtype=np.float64), np.asarray(pu)
            done.append(u)
        mean = float(sum(wt[u] @ losses[u] for u in range(K))) / W
        calib = _calibration(ind, err, done, NEGLIGIBLE_SHARE * rtol * abs(mean) * W)
        rest = np.array([u for u in order if u not in done], dtype=np.int64)
        rest_ind = float(ind[rest].sum()) if rest.size else 0.0
        est = 0.0 if rest_ind == 0.0 else calib * rest_ind / W
        if rest.size == 0 or est <= rtol * abs(mean):
            break
        target = 0.5 * rtol * abs(mean) * W / calib
        k = _census(ind[order], target, min(K, max(2 * len(done), len(done) + 1)))
    if n_nc:
        warnings.warn(
            f"kfold(rtol={rtol:g}): {n_nc} of {len(done)} exact fold refits did not reach "
            f"tol={rf.tol:g}",
            ConvergenceWarning,
            stacklevel=user_stacklevel(),
        )
    refinement = FoldRefinement(
        rtol=rtol,
        refitted=np.array(done, dtype=np.int64),
        all_refitted=len(done) == K,
        error=est,
        relative_error=est / abs(mean) if mean != 0 else (0.0 if est == 0 else np.inf),
        calibration=float(calib) if np.isfinite(calib) else None,
        plain_mean=plain,
        met=bool(est <= rtol * abs(mean)),
        indicator=ind,
    )
    timings = {**res.timings, "refits": time.perf_counter() - t0}
    out = _rebuilt(res, losses, preds, timings)
    return dataclasses.replace(out, refinement=refinement, _refits=rf)


def _rebuilt(res: KFoldResult, losses: list, preds: list, timings: dict) -> KFoldResult:
    """``res`` with the per-split losses and predictions replaced (means recomputed)."""
    n = res.losses.shape[0]
    w = res.sample_weight
    ww = np.ones(n) if w is None else w
    if not res.partition:
        splits = [(None, te) for te in res.test_indices]
        return split_result(splits, preds, losses, ww, n, res.method, res.fit, w, timings)
    L = res.losses.copy()
    P = np.array(res.predictions, dtype=np.float64, copy=True)
    for te, lu, pu in zip(res.test_indices, losses, preds):
        L[te], P[te] = lu, pu
    idx = res.folds.astype(np.int32)
    wsum = np.bincount(idx, weights=ww, minlength=res.fold_labels.size)
    return fold_result(L, P, idx, res.fold_labels, ww, wsum, res.method, res.fit, w, timings)
