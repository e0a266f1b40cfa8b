"""K-fold cross-validation on dask input (scalar losses)."""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ... import _core
from ..._diagnostics import check_class_counts, check_fold_class_counts, user_stacklevel
from ..._diagnostics import warn_not_converged as _warn_not_converged
from ..._validation import is_dask_collection
from ...folds import KFOLD_METHODS, check_fold_sums, fold_result, relabel_folds
from ...folds import assign_folds as _assign_folds
from .alo import _on_active, _probe_max
from .data import Data, _chunk_arrays, _single_blas, _vec
from .newton import _fit_result, _settle_guard, _solve, _solve_fit, _State
from .passes import _compute, _tree
from .refits import _lean, _refit_bytes, _RefitOut, _refits


@_single_blas
def _folds_task(x, y, w, off, fold, loss, intercept, beta, K, nt, cols=None, probe=None):
    x, y, w, off = _chunk_arrays(x, y, w, off, False)
    if cols is not None:  # the active columns (an L1 fit; beta is on them)
        x = np.ascontiguousarray(x[:, cols])
    fold = np.array(fold, dtype=np.int32)
    beta = _vec(beta)
    H, G = _core.chunk_folds(
        x,
        y,
        w,
        loss,
        fit_intercept=intercept,
        beta=beta,
        fold=fold,
        n_folds=K,
        n_threads=nt,
        offset=off,
    )
    return {"H": H, "G": G, "step_max": None if probe is None else _probe_max(x, probe, intercept)}


@_single_blas
def _heldout_task(x, y, w, off, fold, loss, intercept, B):
    """Held-out linear predictors x~_i^T beta~_{fold(i)} (+ offset) and their losses."""
    x, y, w, off = _chunk_arrays(x, y, w, off, False)
    fold = np.asarray(fold, dtype=np.intp)
    B = np.asarray(B)
    rows = np.arange(fold.size)
    if intercept:
        eta = (x @ B[1:])[rows, fold] + B[0, fold]  # (m x K) products, one per fold
    else:
        eta = (x @ B)[rows, fold]
    if off is not None:
        eta = eta + off
    v = _core.loss_value(loss, y, np.ascontiguousarray(eta))
    return np.stack([v, eta])


def _counts_task(y, w, fold, K, classes):
    """Per fold (fold None: one) of one chunk: the total weight and, with `classes`, the
    samples of positive weight of class 0 and of class 1."""
    w = None if w is None else np.asarray(w, dtype=np.float64)
    y = np.asarray(y)
    f = np.zeros(y.shape[0], dtype=np.intp) if fold is None else np.asarray(fold)
    out = {"ws": np.bincount(f, weights=w, minlength=K).astype(np.float64)}
    if classes:
        pos = np.ones(y.shape[0]) if w is None else (w > 0).astype(np.float64)
        out["zeros"] = np.bincount(f, weights=pos * (y <= 0.5), minlength=K)
        out["ones"] = np.bincount(f, weights=pos * (y > 0.5), minlength=K)
    return out


def _fold_counts(data: Data, fblocks: list, K: int) -> dict:
    """:func:`_counts_task` summed over the chunks (one pass over y and w; X is not read).
    Class counts for the logistic loss with an intercept only."""
    from dask import delayed

    classes = data.loss == "logistic" and data.fit_intercept
    parts = [
        delayed(_counts_task, pure=True)(blk[1], blk[2], fb, K, classes)
        for blk, fb in zip(data.blocks(), fblocks)
    ]
    return _compute(_tree(parts))


def _refit_weights(w, fold, k):
    keep = (np.asarray(fold) != k).astype(np.float64)
    return keep if w is None else np.asarray(w, dtype=np.float64) * keep


def _checked_fold_weights(data: Data, fblocks: list, K: int, labels: np.ndarray) -> np.ndarray:
    """The folds' weights, and (logistic) class counts checked as in memory before the
    fit (one pass over y and w): the weight of each fold."""

    counts = _fold_counts(data, fblocks, K)
    wsum = check_fold_sums(counts["ws"], labels)
    if "ones" in counts:
        check_class_counts(int(counts["zeros"].sum()), int(counts["ones"].sum()))
        try:
            check_fold_class_counts(counts["zeros"], counts["ones"])
        except ValueError as e:
            raise ValueError(relabel_folds(str(e), labels)) from None
    return wsum


def _approximate_folds(
    data: Data, st: _State, fblocks: list, labels: np.ndarray, foldwise: bool, tol: float
) -> tuple[_State, np.ndarray]:
    """``"alo"``: each fold's Newton step from the full fit (on its active set with an L1
    term), from the folds' Hessian blocks and gradients summed in one pass (which also
    measures the fit's deferred guard). Returns the (settled) state and the folds'
    coefficients (p1 x K)."""
    from dask import delayed

    K = labels.size
    off1 = int(data.fit_intercept)

    def folds_pass(st: _State, probe):
        beta, cols = _on_active(data, st)  # all of beta, or the intercept and active set
        b = delayed(np.ascontiguousarray(beta), pure=True)
        c = None if cols is None else delayed(np.asarray(cols, dtype=np.intp), pure=True)
        pr = None if probe is None else delayed(np.ascontiguousarray(probe), pure=True)
        parts = [
            delayed(_folds_task, pure=True)(
                x, y, w, o, fb, data.loss.core, data.fit_intercept, b, K, data.n_threads, c, pr
            )
            for (x, y, w, o), fb in zip(data.blocks(), fblocks)
        ]
        return cols, _compute(_tree(parts))

    cols, red = folds_pass(st, None if st.guard is None else st.guard[0])
    st, moved = _settle_guard(data, st, red.get("step_max"), tol)
    if moved:  # the point and its Hessian changed: the folds' sums again
        cols, red = folds_pass(st, None)
    on = np.arange(data.p1) if cols is None else np.concatenate([np.arange(off1), cols + off1])
    H = st.H
    if foldwise:  # the Hessian at beta: the folds' blocks (in fold order) + the penalty
        H = red["H"][:, :, 0].copy()
        for k in range(1, K):
            H += red["H"][:, :, k]
        H[np.diag_indices_from(H)] += np.concatenate([np.zeros(off1), data.pen])
    B = np.repeat(st.beta[:, None], K, axis=1)  # inactive features stay at zero
    for k in range(K):
        Hk = H - red["H"][:, :, k]
        try:
            Lk = np.linalg.cholesky(Hk)
        except np.linalg.LinAlgError:
            raise ValueError(
                f"the Hessian without fold {labels[k]!r} is singular: use a larger penalty"
            ) from None
        B[on, k] += _solve(Lk, red["G"][:, k])
    return st, B


def _exact_folds(
    data: Data, st: _State, fblocks: list, K: int, tol: float, max_iter: int
) -> tuple[np.ndarray, int]:
    """``"exact"``: a refit per fold from the full fit (the fold's weights zero; the
    elastic-net route with an L1 term), several at a time on a distributed client.
    Returns the folds' coefficients (p1 x K) and the number of refits not at tol."""
    import dask.array as da
    from dask import delayed

    B = np.empty((data.p1, K))

    def refit(k: int) -> _RefitOut:
        wk = [
            delayed(_refit_weights, pure=True)(blk[2], fb, k)
            for blk, fb in zip(data.blocks(), fblocks)
        ]
        wk_da = da.concatenate(
            [da.from_delayed(v, shape=(c,), dtype=np.float64) for v, c in zip(wk, data.X.chunks[0])]
        )
        dk = dataclasses.replace(data, w=wk_da)  # the L1 weights too
        return _lean(_solve_fit(dk, tol, max_iter, st.beta))

    n_nc = 0
    for k, sk in enumerate(_refits(refit, list(range(K)), _refit_bytes(data.p1))):
        n_nc += int(not sk.converged)
        B[:, k] = sk.beta
    return B, n_nc


def kfold(
    problem: Any,
    *,
    n_folds: Any = None,
    method: str = "alo",
    folds: Any = None,
    random_state: Any = None,
):
    """:func:`aloocv.kfold` on dask input (a scalar loss). The fold labels (n int32, or
    the given ones) and the per-sample held-out losses and predictions (n floats each)
    live on the client; X does not. With an L1 term, as in memory: ``"alo"`` takes each
    fold's Newton step on the full fit's active set (the intercept and the nonzero
    features, held fixed), ``"exact"`` refits each fold with the elastic-net route from
    the full fit."""
    import dask.array as da
    from dask import delayed

    if not isinstance(method, str) or method not in KFOLD_METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {list(KFOLD_METHODS)}")
    data = Data.from_problem(problem)
    tol, max_iter = problem.options.tol, problem.options.max_iter
    if is_dask_collection(folds):
        folds = np.asarray(folds.compute())
    idx, labels = _assign_folds(data.n, n_folds, folds, random_state)
    K = labels.size
    fblocks = da.from_array(idx, chunks=(data.X.chunks[0],)).to_delayed().ravel().tolist()
    wsum = _checked_fold_weights(data, fblocks, K, labels)
    # as in memory: the fit ends on the Hessian at beta, or (the fold-wise end) that
    # Hessian is summed from the folds' blocks, which the downdates take anyway
    has_l1 = data.l1 is not None and bool(np.max(data.l1, initial=0.0) > 0.0)
    foldwise = method == "alo" and _core.kfold_foldwise_end(
        data.loss.core, data.p1, has_l1=has_l1, sizes=np.bincount(idx, minlength=K).astype(np.int64)
    )
    t0 = time.perf_counter()
    # the fresh end's guard is measured in the folds' pass (_settle_guard)
    fresh_end = method == "alo" and not foldwise
    st = _solve_fit(data, tol, max_iter, fresh_end=fresh_end, defer_end_guard=fresh_end)
    _warn_not_converged(_fit_result(data, st), tol, max_iter)
    t1 = time.perf_counter()
    n_nc = 0
    if method == "alo":
        st, B = _approximate_folds(data, st, fblocks, labels, foldwise, tol)
    else:
        B, n_nc = _exact_folds(data, st, fblocks, K, tol, max_iter)
    fitres = _fit_result(data, st)  # after the guard settled
    Bd = delayed(B, pure=True)
    held = [
        delayed(_heldout_task, pure=True)(x, y, w, o, fb, data.loss.core, data.fit_intercept, Bd)
        for (x, y, w, o), fb in zip(data.blocks(), fblocks)
    ]
    out = np.concatenate(_compute(held), axis=1)
    t2 = time.perf_counter()
    if n_nc:
        warnings.warn(
            f"exact K-fold: {n_nc} of {K} refits did not reach tol={tol:g}",
            ConvergenceWarning,
            stacklevel=user_stacklevel(),
        )
    w_np = None if data.w is None else np.asarray(data.w.compute())
    ww = np.ones(data.n) if w_np is None else w_np
    timings = {"fit": t1 - t0, "folds": t2 - t1}
    return fold_result(out[0], out[1], idx, labels, ww, wsum, method, fitres, w_np, timings)
