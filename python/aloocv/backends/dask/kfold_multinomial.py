"""K-fold cross-validation with the multinomial loss on dask input."""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..._diagnostics import check_finite_result, user_stacklevel
from ..._diagnostics import warn_not_converged as _warn_not_converged
from ..._validation import is_dask_collection
from ...folds import KFOLD_METHODS, fold_result, fold_weights
from ...folds import assign_folds as _assign_folds
from ...losses import cross_entropy
from .data import Data, _chunk_arrays
from .multinomial import _fit_result, first_pass, newton
from .passes import _compute
from .refits import _lean, _refit_bytes, _RefitOut, _refits


def _fold_weights(w, fold, k):
    """One chunk's weights with the rows of fold k set to zero."""
    fold = np.asarray(fold)
    out = np.ones(fold.size) if w is None else np.array(w, dtype=np.float64)
    out[fold == k] = 0.0
    return out


def _heldout_task(x, y, fold, B, intercept):
    """Held-out class scores x~_i^T B_{fold(i)} (m x K) of one chunk, and their
    cross-entropies; B (n_folds, K, p1)."""

    x, y, _, _ = _chunk_arrays(x, y, None, None, False)
    fold = np.asarray(fold, dtype=np.intp)
    off = int(intercept)
    eta = np.einsum("ij,ikj->ik", x, B[fold][:, :, off:])
    if off:
        eta += B[fold][:, :, 0]
    return cross_entropy(eta, y), eta


def kfold(
    problem: Any,
    *,
    n_folds: Any = None,
    method: str = "alo",
    folds: Any = None,
    random_state: Any = None,
):
    """:func:`aloocv.kfold` with ``loss="multinomial"`` on dask input, as in memory
    (:func:`aloocv.backends.memory.multinomial.kfold`): ``"alo"`` one damped Newton step
    per fold from the full fit on the fold-out objective (its exact Hessian at the full
    fit), ``"exact"`` a refit per fold warm-started from the full fit; each a fit over
    the chunks with the fold's weights set to zero. The fold labels and the per-sample
    held-out values (n ints, n x K floats) live on the client, X does not."""

    import dask.array as da
    from dask import delayed

    if not isinstance(method, str) or method not in KFOLD_METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {list(KFOLD_METHODS)}")
    data = Data.from_problem(problem)
    tol, max_iter = problem.options.tol, problem.options.max_iter
    if is_dask_collection(folds):
        folds = np.asarray(folds.compute())
    idx, labels = _assign_folds(data.n, n_folds, folds, random_state)
    nf = labels.size
    w_np = None if data.w is None else np.asarray(data.w.compute(), dtype=np.float64)
    ww, wsum = fold_weights(idx, labels, w_np, data.n)
    first = first_pass(data)
    K = first["K"]
    t0 = time.perf_counter()
    full = newton(data, first, tol, max_iter)
    fitres = _fit_result(data, full, K)
    _warn_not_converged(fitres, tol, max_iter)
    t1 = time.perf_counter()
    fblocks = da.from_array(idx, chunks=(data.X.chunks[0],)).to_delayed().ravel().tolist()
    blocks = data.blocks()
    B = np.empty((nf, K, data.p1))

    def refit(k: int) -> _RefitOut:
        wk = da.concatenate(
            [
                da.from_delayed(
                    delayed(_fold_weights, pure=True)(blk[2], fb, k), shape=(c,), dtype=np.float64
                )
                for blk, fb, c in zip(blocks, fblocks, data.X.chunks[0])
            ]
        )
        dk = dataclasses.replace(data, w=wk)
        fk = dict(first, weight=float(ww.sum() - wsum[k]))
        return _lean(newton(dk, fk, tol, 1 if method == "alo" else max_iter, full.beta))

    failed = 0
    for k, sk in enumerate(_refits(refit, list(range(nf)), _refit_bytes(K * data.p1))):
        failed += method == "exact" and not sk.converged
        B[k] = sk.beta.reshape(K, data.p1)
    Bd = delayed(B, pure=True)
    held = _compute(
        [
            delayed(_heldout_task, pure=True, nout=2)(x, y_, fb, Bd, data.fit_intercept)
            for (x, y_, _, _), fb in zip(blocks, fblocks)
        ]
    )
    losses = np.concatenate([h[0] for h in held])
    pred = np.concatenate([h[1] for h in held])
    t2 = time.perf_counter()
    check_finite_result(f"kfold(method={method!r})", coef=fitres.coef_, predictions=pred)
    if failed:
        warnings.warn(
            f"exact K-fold: {failed} of {nf} refits did not reach tol={tol:g}",
            ConvergenceWarning,
            stacklevel=user_stacklevel(),
        )
    return fold_result(
        losses,
        pred,
        idx,
        labels,
        ww,
        wsum,
        method,
        fitres,
        w_np,
        {"fit": t1 - t0, "folds": t2 - t1},
    )
