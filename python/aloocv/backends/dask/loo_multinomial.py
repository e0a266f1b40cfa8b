"""Leave-one-out with the multinomial loss on dask input: ``"alo"``, ``"if"``,
``"lemma3"`` in one pass (``_core.multinomial_chunk_loo``: the in-memory per-sample code
given the factor of the whole penalized Hessian; the (n, K) predictions and (n, K, K)
leverages are dask arrays chunked like X's rows), the exact hypergradient (one more
pass, ``_core.multinomial_chunk_adjoint``; the K p1 x K p1 solves on the client) and
``"exact"`` as refits over the chunks."""

from __future__ import annotations

import dataclasses
import functools
import warnings
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ... import _core
from ..._diagnostics import (
    check_finite_result,
    unreliable_mask,
    user_stacklevel,
    warn_unreliable_count,
)
from ..._diagnostics import warn_given_coef as _warn_given_coef
from ..._diagnostics import warn_not_converged as _warn_not_converged
from ..._validation import MULTINOMIAL, check_loo_samples
from ...losses import cross_entropy
from ...losses import pack_beta as _beta
from ...results import DaskLOOResult
from .alo import _chunk_record, _stderr
from .data import Data, _chunk_arrays, _chunk_starts, _client, _single_blas, _vec
from .multinomial import METHODS, _fit_result, first_pass, newton
from .newton import _cho, _solve, _State
from .passes import _compute, _per_sample, _stats, _tree
from .refits import _lean, _refit_bytes, _RefitOut, _refits, _weights_without
from .result import subset_refits
from .screen import Indicator, multinomial_values, unreliable_array


@_single_blas
def _loo_task(
    x, y, w, K, pen, intercept, beta, H, method, nt, gradient=False, sw=1.0, screen=False
):
    x, y, w, _ = _chunk_arrays(x, y, w, None, False)
    out = _core.multinomial_chunk_loo(
        x,
        y,
        w,
        K,
        _vec(pen),
        fit_intercept=intercept,
        beta=_vec(beta),
        H=np.asfortranarray(H),
        method=method,
        n_threads=nt,
        gradient=gradient,
        weight_sum=sw,
    )
    rec = _chunk_record(out)
    if screen:  # ALO's error indicator (screen.py)
        rec.update(multinomial_values(y, w, rec))
    return rec


@_single_blas
def _adjoint_task(x, y, w, K, pen, intercept, beta, H, M, sw, nt):
    x, y, w, _ = _chunk_arrays(x, y, w, None, False)
    rho = _core.multinomial_chunk_adjoint(
        x,
        y,
        w,
        K,
        _vec(pen),
        fit_intercept=intercept,
        beta=_vec(beta),
        H=np.asfortranarray(H),
        M=np.asfortranarray(M),
        weight_sum=sw,
        n_threads=nt,
    )
    return {"rho": rho}


_CHECKED = ("losses", "predictions", "leverages")


def _loo_sums(out: dict, w) -> dict:
    """The chunk's partial sums of the leverage pass: the (weight, mean, M2) stats, the
    count of unreliable samples and of non-finite outputs and, when the record holds
    them, the sums of ALO's error indicator (screen.py)."""
    w = None if w is None else np.asarray(w, dtype=np.float64)
    return {
        "screen": out.get("bound"),
        "stats": _stats(out["losses"], w),
        "n_unreliable": int(np.count_nonzero(unreliable_mask(out["downdate"]))),
        "nonfinite": np.array([np.count_nonzero(~np.isfinite(out[k])) for k in _CHECKED]),
        "S": out["S"],
    }


def _alo_pass(
    data: Data,
    st: _State,
    K: int,
    method: str,
    keep: str,
    gradient: bool = False,
    screen: bool = False,
):
    """The closed forms over the chunks in one pass: (per-chunk outputs, reduced sums).
    `keep`: "lazy" (delayed outputs), "persist" (held by the workers) or "best" (the pair
    (lazy, persisted) of a tuning state's point, held.py); only the sums reach the
    client. With `gradient` the sums hold "S",
    the hypergradient's first accumulation; with `screen`, "screen", the sums of ALO's
    error indicator (screen.py; the records then keep "y", "w" and the loss change)."""
    import dask
    from dask import delayed

    b = delayed(np.ascontiguousarray(st.beta), pure=True)
    Hd = delayed(np.asfortranarray(st.H), pure=True)
    pen = delayed(data.pen, pure=True)
    blocks = data.blocks()
    outs = [
        delayed(_loo_task, pure=True)(
            x,
            y,
            w,
            K,
            pen,
            data.fit_intercept,
            b,
            Hd,
            method,
            data.n_threads,
            gradient,
            st.sw,
            screen,
        )
        for x, y, w, _ in blocks
    ]
    lazy = outs
    if keep in ("persist", "best"):  # held by the workers; the reduction below reads them
        outs = list(dask.persist(*outs))
    sums = _tree([delayed(_loo_sums, pure=True)(o, blk[2]) for o, blk in zip(outs, blocks)])
    red = _compute(sums)
    return ((lazy, outs) if keep == "best" else outs), red


def _hypergradient(data: Data, st: _State, K: int, S: np.ndarray) -> np.ndarray:
    """The exact derivative of the mean ALO loss with respect to each feature's L2 weight
    (mn_loo's reverse mode over the chunks): M = H^{-1} S H^{-1} on the client, one pass
    for rho = X~^T gamma, then -sum_k [(H^{-1} rho)_q beta_q + M_qq] over the classes'
    entries q of each feature."""
    from dask import delayed

    L = _cho(st.H)
    M = _solve(L, _solve(L, S).T)
    M = 0.5 * (M + M.T)
    b = delayed(np.ascontiguousarray(st.beta), pure=True)
    Hd = delayed(np.asfortranarray(st.H), pure=True)
    Md = delayed(np.asfortranarray(M), pure=True)
    pen = delayed(data.pen, pure=True)
    parts = [
        delayed(_adjoint_task, pure=True)(
            x, y, w, K, pen, data.fit_intercept, b, Hd, Md, st.sw, data.n_threads
        )
        for x, y, w, _ in data.blocks()
    ]
    u = _solve(L, _compute(_tree(parts))["rho"])
    off = int(data.fit_intercept)
    per = (u * st.beta + np.diag(M)).reshape(K, data.p1)[:, off:]
    return -per.sum(axis=0)


def _check_finite(red: dict, what: str) -> None:
    """The in-memory check of the outputs, on the counts reduced in the pass."""

    for k, c in zip(_CHECKED, red["nonfinite"]):
        if c:
            check_finite_result(what, **{k: np.array([np.nan])})


def loo(
    problem: Any,
    *,
    method: str = "alo",
    coef: Any = None,
    intercept: Any = None,
    return_gradient: bool = False,
    gradient: str = "exact",
):
    """:func:`aloocv.loo` with ``loss="multinomial"`` on dask input."""

    if gradient != "exact":
        raise ValueError("the multinomial loss has the exact gradient only")
    data = Data.from_problem(problem)
    if method not in (*METHODS, "exact"):
        raise ValueError(
            f"unknown method {method!r}; expected one of {sorted((*METHODS, 'exact'))}"
        )
    if method == "exact" and return_gradient:
        raise ValueError("return_gradient=True needs method='alo'")
    check_loo_samples(data.n)
    tol, max_iter = problem.options.tol, problem.options.max_iter
    first = first_pass(data)
    K = first["K"]
    beta0 = None
    if coef is not None:
        beta0 = _beta(coef, intercept, K, data.p, data.fit_intercept)
    elif intercept is not None:
        raise ValueError("intercept= requires coef=")
    # as in memory: the fit (or, at a given coef, no step) ending on the Hessian at beta
    exact = method == "exact"
    st = newton(data, first, tol, max_iter if beta0 is None else 0, beta0, fresh_end=not exact)
    fitres = _fit_result(data, st, K)
    check_finite_result(f"loo(method={method!r})", coef=fitres.coef_)
    if beta0 is None:
        _warn_not_converged(fitres, tol, max_iter)
    else:
        _warn_given_coef(fitres.gradient_norm_, tol)
    if exact:
        losses, preds, n_nc = _exact(data, first, st, tol, max_iter)
        if n_nc:
            warnings.warn(
                f"exact LOO: {n_nc} of {data.n} refits did not reach tol={tol:g}",
                ConvergenceWarning,
                stacklevel=user_stacklevel(),
            )
        return DaskLOOResult(
            losses,
            preds,
            None,
            method,
            fitres,
            *_exact_stats(losses, data.w, first["weight"], data.n),
            data.w,
            n_not_converged=n_nc,
        )
    keep = "persist" if _client() is not None else "lazy"
    alo = method == "alo"
    outs, red = _alo_pass(data, st, K, method, keep, return_gradient, screen=True)
    _check_finite(red, f"loo(method={method!r})")
    grad = None
    if return_gradient:
        grad = data.penalty.chain(np.zeros(data.p), _hypergradient(data, st, K, red["S"]))
        check_finite_result(f"loo(method={method!r})", gradient=grad)
    warn_unreliable_count(int(red["n_unreliable"]), data.n, MULTINOMIAL, False)
    losses = _per_sample(outs, data, "losses", ())
    downdate = _per_sample(outs, data, "downdate", ())
    sw, mean, _ = red["stats"]
    # the indicator (rho = 1; certify() reads it whatever the method) and ALO's screen
    ind = Indicator(outs, data.X.chunks[0], None, red["screen"], mean, sw, False, False)
    return DaskLOOResult(
        losses,
        _per_sample(outs, data, "predictions", (K,)),
        _per_sample(outs, data, "leverages", (K, K)),
        method,
        fitres,
        float(mean),
        _stderr(red["stats"], data.n),
        data.w,
        grad,
        downdate,
        unreliable=(
            unreliable_array(ind.array, losses, downdate, float(mean))
            if alo
            else downdate.map_blocks(unreliable_mask, dtype=bool)
        ),
        indicator=ind.array if alo else None,
        _screen=ind.screen if alo else None,
        _refits=subset_refits(
            _per_sample(outs, data, "change", ()),
            ind.array,
            functools.partial(refit_losses, data, st, tol=tol, max_iter=max_iter),
            tol,
            screened=False,
        ),
    )


def refit_losses(data: Data, st: _State, rows: np.ndarray, tol: float, max_iter: int):
    """certify()'s exact refits: the cross-entropies of the samples `rows` at fits over
    the chunks without each (warm-started at the full fit), and the number of refits not
    at tol. Those samples' rows of X and labels (|rows| p floats) come to the client."""

    K = st.beta.size // data.p1
    rows = np.asarray(rows, dtype=np.int64)
    xr, yr = _compute([data.X[rows], data.y[rows]])
    xr = np.asarray(xr, dtype=np.float64)
    ww = None if data.w is None else np.asarray(data.w[rows].compute(), dtype=np.float64)
    off = int(data.fit_intercept)
    scores = np.empty((rows.size, K))

    def refit(k: int) -> _RefitOut:
        wk = _weights_without(data, int(rows[k]))
        first = {"K": K, "weight": st.sw - (1.0 if ww is None else float(ww[k]))}
        return _lean(newton(dataclasses.replace(data, w=wk), first, tol, max_iter, st.beta))

    data.blocks()  # made once, before the refit threads share data
    fits = _refits(refit, list(range(rows.size)), _refit_bytes(K * data.p1))
    n_nc = sum(int(not sk.converged) for sk in fits)
    for k, sk in enumerate(fits):
        B = sk.beta.reshape(K, data.p1)
        scores[k] = B[:, off:] @ xr[k] + (B[:, 0] if off else 0.0)
    return cross_entropy(scores, np.asarray(yr)), n_nc


def _own_rows_task(x, y, B, intercept):
    """Row k of a chunk at its own refit's coefficients B[k] (K x p1): the cross-entropies
    and the class scores (m x K)."""

    x, y, _, _ = _chunk_arrays(x, y, None, None, False)
    off = int(intercept)
    eta = np.einsum("ij,ikj->ik", x, B[:, :, off:])
    if off:
        eta += B[:, :, 0]
    return cross_entropy(eta, y), eta


def _exact(data: Data, first: dict, st: _State, tol: float, max_iter: int):
    """Exact multinomial leave-one-out: per sample, the fit over the chunks without it
    (its weight zero), warm-started at the full fit. In memory the refits take
    Newton-CG steps preconditioned by the full factor, here exact Newton steps: the two
    agree to the tolerance. One chunk's refits at a time; their coefficients go to the
    task holding the chunk, which computes the rows' scores and losses (X stays on the
    workers). Returns (losses, (n, K) scores) as dask arrays with X's row chunks and the
    number of refits not at tol."""

    import dask.array as da
    from dask import delayed

    K = first["K"]
    starts = _chunk_starts(data)
    blocks = data.blocks()
    ww = None if data.w is None else np.asarray(data.w.compute(), dtype=np.float64)
    losses, preds = [], []
    n_nc = 0

    def refit(i: int) -> _RefitOut:
        wk = _weights_without(data, i)
        fk = dict(first, weight=first["weight"] - (1.0 if ww is None else float(ww[i])))
        return _lean(newton(dataclasses.replace(data, w=wk), fk, tol, max_iter, st.beta))

    for (x, y, _, _), s0, cnt in zip(blocks, starts, data.X.chunks[0]):
        B = np.empty((int(cnt), K, data.p1))
        rows = [int(s0) + k for k in range(int(cnt))]
        for k, sk in enumerate(_refits(refit, rows, _refit_bytes(K * data.p1))):
            n_nc += int(not sk.converged)
            B[k] = sk.beta.reshape(K, data.p1)
        out = delayed(_own_rows_task, pure=True, nout=2)(x, y, B, data.fit_intercept)
        losses.append(da.from_delayed(out[0], shape=(int(cnt),), dtype=np.float64))
        preds.append(da.from_delayed(out[1], shape=(int(cnt), K), dtype=np.float64))
    return da.concatenate(losses), da.concatenate(preds), n_nc


def _exact_stats(losses, w, sw: float, n: int) -> tuple[float, float]:
    """The weighted mean of the leave-one-out losses and its standard error."""
    wl = losses if w is None else losses * w
    mean = float(wl.sum().compute()) / sw
    dev = (losses - mean) ** 2 if w is None else w * (losses - mean) ** 2
    return mean, _stderr((sw, mean, float(dev.sum().compute())), n)
