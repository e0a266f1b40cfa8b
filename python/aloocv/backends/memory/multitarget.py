"""Several squared-loss targets with an L2 penalty, in memory.

Every target and every lambda share one decomposition (:class:`aloocv._core.MultiRidge`:
one Hessian pass, one p x p eigendecomposition, ``Z = X_c V`` and ``C = Z^T W Y``); a grid
of lambdas for T targets then costs blocked GEMMs fused with the leave-one-out epilogue,
never n x T temporaries per lambda. For the squared loss with an L2 penalty the
leave-one-out values are exact (``docs/math/alo.md``, PRESS), so ``"alo"`` and
``"exact"`` give the same numbers here.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ... import _blas, _core
from ..._diagnostics import check_finite_result
from ..._validation import (
    check_loo_samples,
    core_design,
    design_dot,
    multi_target_penalty,
)
from ...folds import FoldPlan, fold_label, fold_weights
from ...problem import Problem
from ...results import MultiTargetKFoldResult, MultiTargetLOOResult
from ..common import LOORequest

__all__ = ["decompose", "kfold", "loo", "multi_ridge"]


def multi_ridge(X: Any, Y: np.ndarray, w: Any, fit_intercept: bool, shape: Any, nt: int) -> Any:
    """The shared decomposition of checked arrays (``shape``: per-feature L2 shape or None)."""
    with _blas.single_threaded_blas():
        return _core.MultiRidge(
            core_design(X), Y, w, fit_intercept=fit_intercept, penalty=shape, n_threads=nt
        )


def decompose(pb: Problem) -> tuple[Any, float, np.ndarray | None]:
    """(MultiRidge, lambda scale, per-feature shape or None) of a multi-target problem."""
    lam, shape = multi_target_penalty(pb.penalty, pb.n_features)
    mr = multi_ridge(pb.X, pb.y, pb.sample_weight, pb.fit_intercept, shape, pb.options.n_threads)
    return mr, lam, shape


def loo(pb: Problem, req: LOORequest) -> MultiTargetLOOResult:
    """:func:`aloocv.loo` for a 2-d y (see its docstring)."""
    method, Y, w = req.method, pb.y, pb.sample_weight
    mr, lam, _ = decompose(pb)
    check_loo_samples(pb.n_samples)
    T = Y.shape[1]
    with _blas.single_threaded_blas():
        sol = mr.solve(np.full(T, lam), predictions=True, n_threads=pb.options.n_threads)
        h = mr.leverages(lam)
    pred = sol.predictions
    ww = np.ones(pb.n_samples) if w is None else w
    wh = (ww * h)[:, None]
    if method in ("alo", "exact"):
        losses = 0.5 * (Y - pred) ** 2
    else:
        # the in-sample residual from the leave-one-out one: eta - y = (eta~ - y)(1 - w h)
        res = (pred - Y) * (1.0 - wh)
        if method == "if":
            pred = Y + res * (1.0 + wh)
            losses = 0.5 * (Y - pred) ** 2
        else:  # lemma3: l + l' w l' h / (1 - w h)
            losses = 0.5 * res**2 + res**2 * wh / (1.0 - wh)
    check_finite_result(f"loo(method={method!r})", coef=sol.coef, losses=losses, predictions=pred)
    return MultiTargetLOOResult(
        losses=losses,
        predictions=pred,
        leverages=None if method == "exact" else h,
        method=method,
        coef=np.ascontiguousarray(sol.coef.T),
        intercept=sol.intercept,
        sample_weight=w,
    )


def kfold(pb: Problem, plan: FoldPlan) -> MultiTargetKFoldResult:
    """:func:`aloocv.kfold` for a 2-d y (see its docstring)."""
    if plan.splits is not None:
        raise ValueError(
            "cv= splits whose test sets do not partition the samples (TimeSeriesSplit, "
            "ShuffleSplit, ...) are not supported with several targets (a 2-d y): use a "
            "partitioning splitter (KFold, GroupKFold, LeaveOneGroupOut, ...) or one target "
            "at a time"
        )
    t0 = time.perf_counter()
    mr, lam, shape = decompose(pb)
    Y, w = pb.y, pb.sample_weight
    n, T = Y.shape
    idx, labels = plan.folds, plan.labels
    K = labels.size
    ww, wsum = fold_weights(idx, labels, w, n)
    nt = pb.options.n_threads
    with _blas.single_threaded_blas():
        full = mr.solve(np.full(T, lam), predictions=False, n_threads=nt)
    t1 = time.perf_counter()
    if plan.method == "alo":
        with _blas.single_threaded_blas():
            pred = mr.folds(lam, idx, K, nt)
    else:
        pred = _refit_folds(pb, idx, labels, ww, lam, shape)
    losses = 0.5 * (Y - pred) ** 2
    check_finite_result(f"kfold(method={plan.method!r})", losses=losses, predictions=pred)
    fold_means = np.stack([ww[idx == k] @ losses[idx == k] for k in range(K)]) / wsum[:, None]
    total = wsum.sum()
    mean = (ww @ losses) / total
    stderr = np.sqrt(np.sum(wsum[:, None] * (fold_means - mean) ** 2, axis=0) / total / (K - 1))
    return MultiTargetKFoldResult(
        losses=losses,
        predictions=pred,
        folds=idx.astype(np.intp),
        fold_labels=labels,
        fold_means=fold_means,
        mean=mean,
        stderr=stderr,
        method=plan.method,
        coef=np.ascontiguousarray(full.coef.T),
        intercept=full.intercept,
        sample_weight=w,
        timings={"fit": t1 - t0, "folds": time.perf_counter() - t1},
    )


def _refit_folds(pb: Problem, idx, labels, ww, lam: float, shape) -> np.ndarray:
    """Held-out predictions of one refit per fold (the fold's weights set to 0)."""
    X, Y, nt = pb.X, pb.y, pb.options.n_threads
    n, T = Y.shape
    pred = np.empty((n, T), order="F")
    for k in range(labels.size):
        out = idx == k
        wk = ww.copy()
        wk[out] = 0.0
        try:
            mk = multi_ridge(X, Y, wk, pb.fit_intercept, shape, nt)
            with _blas.single_threaded_blas():
                sol = mk.solve(np.full(T, lam), predictions=False, n_threads=nt)
        except ValueError as e:
            raise ValueError(f"fold {fold_label(labels, k)}: {e}") from None
        pred[out] = design_dot(X[out], sol.coef) + sol.intercept
    return pred
