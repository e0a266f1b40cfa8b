"""The multinomial loss on dask input: ``fit``, ``loo`` (``"alo"``, ``"if"``,
``"lemma3"``; ALO with its exact hypergradient; ``"exact"`` as refits over the chunks),
``kfold`` and ``tune`` as map-reduce passes over the row chunks, as :mod:`aloocv._dask`
does for the scalar losses.

The fit is the core's one Newton driver on a multinomial sums model
(``_core.multinomial_sums_fit``: the in-memory ``mn_fit``'s penalty with its gauge term on
the intercepts, its refresh policy and stopping rule); each evaluation is one pass over
the chunks of ``_core.multinomial_chunk_sums`` (loss, K p1 gradient and, when the next
step needs it, the K p1 x K p1 Hessian by the in-memory block code). In memory, problems
with ``(K + 1) p1 >= 256`` take Newton-CG steps; the dask route uses the exact Hessian
throughout, so there the two agree to the tolerance, not to rounding. ALO: one more pass
(``_core.multinomial_chunk_loo``: the in-memory per-sample code given the factor of the
whole penalized Hessian); the (n, K) predictions and (n, K, K) leverages are dask arrays
chunked like X's rows. The hypergradient (``return_gradient=True``, the gradient
searches of ``tune``): the first accumulation comes with the ALO pass, one more pass for
the second (``_core.multinomial_chunk_adjoint``), the K p1 x K p1 solves on the client.
X is never concatenated and never reaches the client.
"""

from __future__ import annotations

import dataclasses
import operator
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from . import _core
from ._dask import (
    DaskLOOResult,
    Data,
    _as_dask_2d,
    _as_dask_vector,
    _cho,
    _chunk_arrays,
    _chunk_record,
    _client,
    _compute,
    _lean,
    _refit_bytes,
    _RefitOut,
    _refits,
    _single_blas,
    _solve,
    _State,
    _stats,
    _stderr,
    _tree,
    _vec,
)
from ._diagnostics import unreliable_mask, warn_unreliable_count
from ._validation import (
    MULTINOMIAL,
    as_penalty,
    bad_class_label,
    check_bool,
    check_class_label_dtype,
    check_classes_present,
    check_labels,
    check_loo_samples,
    check_multinomial_penalty,
    check_options,
    check_vector,
    class_label_error,
    n_threads,
    require_dask,
)

if TYPE_CHECKING:
    from .results import StateOutput

__all__ = ["DaskMultinomialTuneState", "fit", "kfold", "loo", "prepare", "tune_state"]

#: Class frequencies are clipped here before the log of the starting intercepts (the
#: core's kMinClassShare).
MIN_CLASS_SHARE = 1e-6
#: The methods of the closed forms on dask input.
METHODS = ("alo", "if", "lemma3")


# --------------------------------------------------------------------------- inputs
def _as_dask_labels(y: Any, X: Any) -> Any:
    """y as a dask vector of numeric labels with X's row chunks (its dtype kept: the
    values are checked chunk by chunk in the first pass)."""
    import dask.array as da

    n = X.shape[0]
    if hasattr(y, "to_dask_array") and not isinstance(y, da.Array):  # dask Series
        y = y.to_dask_array(lengths=True)
    if isinstance(y, da.Array):
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1 or y.shape[0] != n:
            raise ValueError(f"y must be 1-dimensional of length {n}, got shape {y.shape}")
        check_class_label_dtype(y.dtype)
        return y.rechunk((X.chunks[0],))
    arr = check_labels(y, n)
    check_class_label_dtype(arr.dtype)
    return da.from_array(arr, chunks=(X.chunks[0],))


def prepare(
    X: Any, y: Any, penalty: Any, sample_weight: Any, fit_intercept: Any, offset: Any, n_jobs: Any
) -> Data:
    """Validates a multinomial dask problem (what can be checked without reading the
    data; the labels and weights are checked in :func:`first_pass`, X in the first pass
    of the fit). ``Data.loss`` is ``"multinomial"``, ``Data.pen`` the per-feature L2
    weights shared by the classes."""
    require_dask()
    check_bool(fit_intercept, "fit_intercept")
    if offset is not None:
        raise ValueError("offset= is not available for the multinomial loss")
    X = _as_dask_2d(X)
    penalty = as_penalty(penalty)
    pen = check_multinomial_penalty(penalty, int(X.shape[1]))
    y = _as_dask_labels(y, X)
    w = None if sample_weight is None else _as_dask_vector(sample_weight, X, "sample_weight")
    return Data(
        X,
        y,
        w,
        None,
        MULTINOMIAL,
        penalty,
        np.ascontiguousarray(pen, dtype=np.float64),
        bool(fit_intercept),
        1 if n_jobs is None else n_threads(n_jobs),
    )


def _labels_task(y, w, start):
    """Checks of one chunk of (y, w) as the in-memory validation does, and its sums: the
    weight, the weight per class, the samples of positive weight per class."""
    y = np.asarray(y)
    y = check_vector(y, y.shape[0], "y") if y.dtype.kind == "f" else y
    lab = y.astype(np.float64)
    if w is not None:
        w = check_vector(np.asarray(w), y.shape[0], "sample_weight")
        if np.any(w < 0):
            raise ValueError("sample_weight must be non-negative")
    bad = bad_class_label(lab)
    if bad is not None:
        raise class_label_error(int(start) + bad, y[bad])
    idx = lab.astype(np.int64)
    pos = np.ones(idx.size, bool) if w is None else w > 0
    # K is the largest label + 1 over every sample, zero weights included (as in memory)
    k = int(idx.max()) + 1 if idx.size else 0
    return {
        "weight": float(idx.size if w is None else w.sum()),
        "class_weight": np.bincount(idx, weights=w, minlength=k).astype(np.float64),
        "present": np.bincount(idx[pos], minlength=k),
    }


def _padded_sum(parts: list, key: str) -> np.ndarray:
    size = max(p[key].size for p in parts)
    out = np.zeros(size)
    for p in parts:
        out[: p[key].size] += p[key]
    return out


def first_pass(data: Data) -> dict:
    """The labels and weights of every chunk checked (one pass over y and w; X is not
    read); returns the number of classes "K", the total "weight" and the weight per class
    "class_weight"."""
    from dask import delayed

    starts = np.concatenate([[0], np.cumsum(data.X.chunks[0])[:-1]])
    parts = [
        delayed(_labels_task, pure=True)(y, w, int(s0))
        for (_, y, w, _), s0 in zip(data.blocks(), starts)
    ]
    parts = _compute(parts)
    present = _padded_sum(parts, "present") > 0
    check_classes_present(present)
    return {
        "K": int(present.size),
        "weight": float(sum(p["weight"] for p in parts)),
        "class_weight": _padded_sum(parts, "class_weight"),
    }


# --------------------------------------------------------------------------- fit
@_single_blas
def _sums_task(x, y, w, K, pen, intercept, beta, hessian, check, nt):
    x, y, w, _ = _chunk_arrays(x, y, w, None, check)
    out = _core.multinomial_chunk_sums(
        x,
        y,
        w,
        K,
        _vec(pen),
        fit_intercept=intercept,
        beta=_vec(beta),
        hessian=hessian,
        n_threads=nt,
    )
    return {"loss": out.loss, "weight": out.weight, "grad": out.grad, "hess": out.hess}


def _source(data: Data, K: int):
    """The problem as a sums source of ``_core.multinomial_sums_fit``: each call is one
    map-reduce pass over the chunks; the first one also checks every chunk of X."""
    from dask import delayed

    checked = False
    pen = delayed(data.pen, pure=True)

    def source(beta, *, step, hessian, clip):
        nonlocal checked
        b = delayed(np.ascontiguousarray(beta, dtype=np.float64), pure=True)
        parts = [
            delayed(_sums_task, pure=True)(
                x, y, w, K, pen, data.fit_intercept, b, hessian, not checked, data.n_threads
            )
            for x, y, w, _ in data.blocks()
        ]
        s = _compute(_tree(parts))
        checked = True
        hess = None if s["hess"] is None else np.array(s["hess"], dtype=np.float64, order="F")
        return float(s["loss"]), _vec(s["grad"]), hess, 0.0

    return source


def _init_beta(data: Data, first: dict) -> np.ndarray:
    """The core's cold start: zero slopes, the centered logs of the class shares."""
    K = first["K"]
    B = np.zeros((K, data.p1))
    if data.fit_intercept:
        share = first["class_weight"][:K] / max(float(first["class_weight"].sum()), 1e-300)
        b = np.log(np.maximum(share, MIN_CLASS_SHARE))
        B[:, 0] = b - b.mean()
    return B.ravel()


def newton(
    data: Data,
    first: dict,
    tol: float,
    max_iter: int,
    beta0: np.ndarray | None = None,
    fresh_end: bool = False,
) -> _State:
    """The multinomial fit over the chunks (see the module docstring); `fresh_end`: end
    on the factor of the Hessian at the returned beta (the closed forms need it), as in
    memory."""
    K = first["K"]
    beta = _init_beta(data, first) if beta0 is None else np.array(beta0, dtype=np.float64)
    r = _core.multinomial_sums_fit(
        _source(data, K),
        K,
        data.pen,
        fit_intercept=data.fit_intercept,
        beta0=np.ascontiguousarray(beta),
        weight_sum=first["weight"],
        tol=tol,
        max_iter=max_iter,
        fresh_end=fresh_end,
    )
    return _State(
        r.beta,
        float(r.objective),
        r.grad,
        r.hessian,
        first["weight"],
        int(r.n_iter),
        bool(r.converged),
        float(r.grad_norm),
        hessian_passes=int(r.hessian_passes),
        hx=r.unpenalized_hessian,
        hessian_at_point=bool(r.hessian_at_point),
    )


def _fit_result(data: Data, st: _State, K: int):
    from .results import FitFields
    from .results import multinomial_fit_result as _result

    B = st.beta.reshape(K, data.p1)
    off = int(data.fit_intercept)
    out = FitFields(
        coef=B[:, off:].copy(),
        intercept=B[:, 0].copy() if off else np.zeros(K),
        n_iter=st.n_iter,
        converged=st.converged,
        objective=st.f,
        grad_norm=st.grad_norm,
    )
    return _result(out, data.penalty, data.fit_intercept)


def fit(X, y, penalty, fit_intercept, sample_weight, tol, max_iter, n_jobs, warm_start, offset):
    """:func:`aloocv.fit` with ``loss="multinomial"`` on dask input."""
    from ._diagnostics import warn_not_converged as _warn_not_converged
    from .losses import pack_beta as _beta
    from .results import MultinomialFitResult

    data = prepare(X, y, penalty, sample_weight, fit_intercept, offset, n_jobs)
    tol, max_iter = check_options(tol, max_iter)
    first = first_pass(data)
    beta0 = None
    if warm_start is not None:
        if not isinstance(warm_start, MultinomialFitResult):
            raise TypeError("warm_start must be a multinomial fit")
        beta0 = _beta(
            warm_start.coef_, warm_start.intercept_, first["K"], data.p, data.fit_intercept
        )
    st = newton(data, first, tol, max_iter, beta0)
    res = _fit_result(data, st, first["K"])
    _warn_not_converged(res, tol, max_iter)
    return res


# --------------------------------------------------------------------------- loo
@_single_blas
def _loo_task(x, y, w, K, pen, intercept, beta, H, method, nt, gradient=False, sw=1.0):
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
    return _chunk_record(out)


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
    count of unreliable samples and of non-finite outputs."""
    w = None if w is None else np.asarray(w, dtype=np.float64)
    return {
        "stats": _stats(out["losses"], w),
        "n_unreliable": int(np.count_nonzero(unreliable_mask(out["downdate"]))),
        "nonfinite": np.array([np.count_nonzero(~np.isfinite(out[k])) for k in _CHECKED]),
        "S": out["S"],
    }


def _per_sample(outs: list, data: Data, key: str, tail: tuple) -> Any:
    import dask.array as da
    from dask import delayed

    arrs = [
        da.from_delayed(
            delayed(operator.getitem, pure=True)(o, key), shape=(c, *tail), dtype=np.float64
        )
        for o, c in zip(outs, data.X.chunks[0])
    ]
    return da.concatenate(arrs)


def _alo_pass(data: Data, st: _State, K: int, method: str, keep: str, gradient: bool = False):
    """The closed forms over the chunks in one pass: (per-chunk outputs, reduced sums).
    `keep`: "lazy" (delayed outputs), "persist" (held by the workers) or "gather" (numpy
    dicts computed in the same pass as the reduction). With `gradient` the sums hold "S",
    the hypergradient's first accumulation."""
    import dask
    from dask import delayed

    b = delayed(np.ascontiguousarray(st.beta), pure=True)
    Hd = delayed(np.asfortranarray(st.H), pure=True)
    pen = delayed(data.pen, pure=True)
    blocks = data.blocks()
    outs = [
        delayed(_loo_task, pure=True)(
            x, y, w, K, pen, data.fit_intercept, b, Hd, method, data.n_threads, gradient, st.sw
        )
        for x, y, w, _ in blocks
    ]
    if keep == "persist":  # held by the workers; the reduction below reads them
        outs = list(dask.persist(*outs))
    sums = _tree([delayed(_loo_sums, pure=True)(o, blk[2]) for o, blk in zip(outs, blocks)])
    if keep == "gather":
        red, outs = _compute((sums, outs))
    else:
        red = _compute(sums)
    return outs, red


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
    from ._validation import check_finite_result

    for k, c in zip(_CHECKED, red["nonfinite"]):
        if c:
            check_finite_result(what, **{k: np.array([np.nan])})


def loo(
    X,
    y,
    penalty,
    method,
    fit_intercept,
    sample_weight,
    coef,
    intercept,
    tol,
    max_iter,
    n_jobs,
    return_gradient,
    gradient,
    offset,
):
    """:func:`aloocv.loo` with ``loss="multinomial"`` on dask input."""
    from ._diagnostics import warn_given_coef as _warn_given_coef
    from ._diagnostics import warn_not_converged as _warn_not_converged
    from ._validation import check_finite_result
    from .losses import pack_beta as _beta

    if gradient != "exact":
        raise ValueError("the multinomial loss has the exact gradient only")
    data = prepare(X, y, penalty, sample_weight, fit_intercept, offset, n_jobs)
    if method not in (*METHODS, "exact"):
        raise ValueError(
            f"unknown method {method!r}; expected one of {sorted((*METHODS, 'exact'))}"
        )
    if method == "exact" and return_gradient:
        raise ValueError("return_gradient=True needs method='alo'")
    check_loo_samples(data.n)
    tol, max_iter = check_options(tol, max_iter)
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
        _warn_given_coef(fitres.gradient_norm_, tol, stacklevel=3)
    if exact:
        losses, preds, n_nc = _exact(data, first, st, tol, max_iter)
        if n_nc:
            warnings.warn(
                f"exact LOO: {n_nc} of {data.n} refits did not reach tol={tol:g}",
                ConvergenceWarning,
                stacklevel=3,
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
    outs, red = _alo_pass(data, st, K, method, keep, return_gradient)
    _check_finite(red, f"loo(method={method!r})")
    grad = None
    if return_gradient:
        grad = data.penalty.chain(np.zeros(data.p), _hypergradient(data, st, K, red["S"]))
        check_finite_result(f"loo(method={method!r})", gradient=grad)
    warn_unreliable_count(int(red["n_unreliable"]), data.n, MULTINOMIAL, False, stacklevel=3)
    losses = _per_sample(outs, data, "losses", ())
    downdate = _per_sample(outs, data, "downdate", ())
    stats = red["stats"]
    return DaskLOOResult(
        losses,
        _per_sample(outs, data, "predictions", (K,)),
        _per_sample(outs, data, "leverages", (K, K)),
        method,
        fitres,
        float(stats[1]),
        _stderr(stats, data.n),
        data.w,
        grad,
        downdate,
        unreliable=downdate.map_blocks(unreliable_mask, dtype=bool),
        _problem=(data, st, tol, max_iter, None),
    )


def _insample_task(x, y, B, intercept):
    """The cross-entropies of one chunk's rows at the fit's coefficients B (K x p1)."""
    return _own_rows_task(x, y, np.broadcast_to(B, (np.shape(y)[0], *B.shape)), intercept)[0]


def insample_losses(data: Data, st: _State) -> Any:
    """The in-sample cross-entropies at the fit (a dask array with X's row chunks):
    certify()'s error proxy is the leave-one-out loss minus this."""
    import dask.array as da
    from dask import delayed

    B = st.beta.reshape(-1, data.p1)
    parts = [
        da.from_delayed(
            delayed(_insample_task, pure=True)(x, y, B, data.fit_intercept),
            shape=(int(c),),
            dtype=np.float64,
        )
        for (x, y, _, _), c in zip(data.blocks(), data.X.chunks[0])
    ]
    return da.concatenate(parts)


def refit_losses(data: Data, st: _State, rows: np.ndarray, tol: float, max_iter: int):
    """certify()'s exact refits: the cross-entropies of the samples `rows` at fits over
    the chunks without each (warm-started at the full fit), and the number of refits not
    at tol. Those samples' rows of X and labels (|rows| p floats) come to the client."""
    import dataclasses

    from ._dask import _weights_without
    from .losses import cross_entropy

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
    from .losses import cross_entropy

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
    import dataclasses

    import dask.array as da
    from dask import delayed

    from ._dask import _chunk_starts, _weights_without

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


# --------------------------------------------------------------------------- kfold
def _fold_weights(w, fold, k):
    """One chunk's weights with the rows of fold k set to zero."""
    fold = np.asarray(fold)
    out = np.ones(fold.size) if w is None else np.array(w, dtype=np.float64)
    out[fold == k] = 0.0
    return out


def _heldout_task(x, y, fold, B, intercept):
    """Held-out class scores x~_i^T B_{fold(i)} (m x K) of one chunk, and their
    cross-entropies; B (n_folds, K, p1)."""
    from .losses import cross_entropy

    x, y, _, _ = _chunk_arrays(x, y, None, None, False)
    fold = np.asarray(fold, dtype=np.intp)
    off = int(intercept)
    eta = np.einsum("ij,ikj->ik", x, B[fold][:, :, off:])
    if off:
        eta += B[fold][:, :, 0]
    return cross_entropy(eta, y), eta


def kfold(
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
):
    """:func:`aloocv.kfold` with ``loss="multinomial"`` on dask input, as in memory
    (:func:`aloocv._multinomial.kfold`): ``"alo"`` one damped Newton step per fold from
    the full fit on the fold-out objective (its exact Hessian at the full fit), ``"exact"``
    a refit per fold warm-started from the full fit; each a fit over the chunks with the
    fold's weights set to zero. The fold labels and the per-sample held-out values (n
    ints, n x K floats) live on the client, X does not."""
    import dataclasses
    import time

    import dask.array as da
    from dask import delayed
    from dask.base import is_dask_collection

    from ._diagnostics import warn_not_converged as _warn_not_converged
    from ._validation import check_finite_result
    from .folds import KFOLD_METHODS, fold_result
    from .folds import assign_folds as _assign_folds
    from .folds import fold_label as _label

    if not isinstance(method, str) or method not in KFOLD_METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {list(KFOLD_METHODS)}")
    data = prepare(X, y, penalty, sample_weight, fit_intercept, None, n_jobs)
    tol, max_iter = check_options(tol, max_iter)
    if is_dask_collection(folds):
        folds = np.asarray(folds.compute())
    idx, labels = _assign_folds(data.n, n_folds, folds, random_state)
    nf = labels.size
    w_np = None if data.w is None else np.asarray(data.w.compute(), dtype=np.float64)
    ww = np.ones(data.n) if w_np is None else w_np
    wsum = np.bincount(idx, weights=ww, minlength=nf)
    if np.any(wsum <= 0):
        bad = int(np.flatnonzero(wsum <= 0)[0])
        raise ValueError(f"fold {_label(labels, bad)} has zero total sample weight")
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
            stacklevel=3,
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


# --------------------------------------------------------------------------- tune
class DaskMultinomialTuneState:
    """Stands in for :class:`aloocv._multinomial.MultinomialTuneState` in
    :class:`aloocv.tuning.Objective` on dask input (grid searches): per point a fit over
    the chunks warm-started at the previous one (as in memory), then the ALO pass. The
    per-sample values (n losses, n K predictions, n K^2 leverages) are gathered to the
    client for the tuning history; X is not."""

    def __init__(self, data: Data, first: dict, tol: float, max_iter: int):
        self.data, self.first = data, first
        self.K = first["K"]
        self.tol, self.max_iter = tol, max_iter
        self.beta: np.ndarray | None = None

    def set_penalty(self, l2: np.ndarray, l1: np.ndarray | None = None) -> None:
        self.data.pen = np.ascontiguousarray(l2, dtype=np.float64)

    def set_beta(self, beta: np.ndarray) -> None:
        self.beta = np.array(beta, dtype=np.float64)

    def fit(self) -> None:
        """Nothing: :meth:`alo` fits and evaluates (as the in-memory state)."""

    def alo(self, *, gradient: bool = True, gradient_kind: str = "exact") -> StateOutput:
        from .results import StateOutput

        data, K = self.data, self.K
        st = newton(data, self.first, self.tol, self.max_iter, self.beta, fresh_end=True)
        self.beta = st.beta.copy()
        per, red = _alo_pass(data, st, K, "alo", "gather", gradient)
        _check_finite(red, "loo(method='alo')")
        grad = _hypergradient(data, st, K, red["S"]) if gradient else np.zeros(data.p)
        B = st.beta.reshape(K, data.p1)
        off = int(data.fit_intercept)
        return StateOutput(
            losses=np.concatenate([o["losses"] for o in per]),
            predictions=np.concatenate([o["predictions"] for o in per]),
            leverages=np.concatenate([o["leverages"] for o in per]),
            det=np.concatenate([o["downdate"] for o in per]),
            coef=B[:, off:].copy(),
            intercept=B[:, 0].copy() if off else np.zeros(K),
            beta=st.beta.copy(),
            n_iter=st.n_iter,
            converged=st.converged,
            objective=st.f,
            grad_norm=st.grad_norm,
            grad_l2=grad,
            grad_l1=np.zeros(data.p),
        )

    def alo_tangents(self, J2: np.ndarray, J1: np.ndarray) -> StateOutput:
        """As the in-memory state: central differences of the exact gradient, step
        TANGENT_LOG_STEP in the log of each parameter, both fits from the current one."""
        from .backends.common import TANGENT_LOG_STEP

        out = self.alo(gradient=True)
        at, pen = self.beta, self.data.pen.copy()
        T2 = np.empty((self.data.p, J2.shape[1]))
        for k in range(J2.shape[1]):
            d = J2[:, k] * pen * TANGENT_LOG_STEP  # a step in log of the parameter
            scale = float(np.max(J2[:, k] * pen)) * TANGENT_LOG_STEP
            g = []
            for sgn in (1.0, -1.0):
                self.set_penalty(pen + sgn * d)
                self.beta = at
                g.append(self.alo(gradient=True).grad_l2)
            T2[:, k] = (g[0] - g[1]) / (2.0 * scale)
        self.set_penalty(pen)
        self.beta = at
        return dataclasses.replace(out, tangent_l2=T2, tangent_l1=np.zeros_like(T2))


def tune_state(X, y, penalty, sample_weight, fit_intercept, offset, n_jobs, tol, max_iter):
    """(state, l2 vector, weights as numpy or None, n, p) for :func:`aloocv.tune` with
    the multinomial loss on dask input."""
    data = prepare(X, y, penalty, sample_weight, fit_intercept, offset, n_jobs)
    check_loo_samples(data.n)
    first = first_pass(data)
    w = None if data.w is None else np.asarray(data.w.compute())
    return DaskMultinomialTuneState(data, first, tol, max_iter), data.pen.copy(), w, data.n, data.p
