"""The multinomial loss on dask input: its inputs, the first pass over the labels and
the fit.

The fit is the core's one Newton driver on a multinomial sums model
(``_core.multinomial_sums_fit``: the in-memory ``mn_fit``'s penalty with its gauge term on
the intercepts, its refresh policy and stopping rule); each evaluation is one pass over
the chunks of ``_core.multinomial_chunk_sums`` (loss, K p1 gradient and, when the next
step needs it, the K p1 x K p1 Hessian by the in-memory block code). In memory, problems
with ``(K + 1) p1 >= 256`` take Newton-CG steps; the dask route uses the exact Hessian
throughout, so there the two agree to the tolerance, not to rounding. Leave-one-out:
:mod:`.loo_multinomial`; K-fold: :mod:`.kfold_multinomial`. X is never concatenated
and never reaches the client.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import _core
from ..._diagnostics import warn_not_converged as _warn_not_converged
from ..._validation import (
    bad_class_label,
    check_classes_present,
    check_vector,
    class_label_error,
)
from ...losses import pack_beta as _beta
from ...results import FitFields, MultinomialFitResult
from ...results import multinomial_fit_result as _result
from .data import Data, _chunk_arrays, _chunk_starts, _single_blas, _vec
from .newton import _State
from .passes import _check_stopped, _compute, _held_sum, _raise_first, _tree

#: The methods of the closed forms on dask input.
METHODS = ("alo", "if", "lemma3")


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


@_single_blas
def _sums_task(x, y, w, K, pen, intercept, beta, hessian, check, nt, row0=0):
    """One chunk's sums; with `check` its X checked first (the chunk starts at row
    `row0` of X: an input error is returned with it, and the client raises the one of
    the lowest row, ``passes._raise_first``)."""
    try:
        x, y, w, _ = _chunk_arrays(x, y, w, None, check, row0)
    except (ValueError, TypeError) as e:
        if not check:
            raise
        return {"error": (row0, e)}
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
    map-reduce pass over the chunks (on persisted input mapped over the chunks' futures,
    without a graph, as the scalar losses' passes); the first one also checks every
    chunk of X."""
    from dask import delayed

    checked = False
    pen = delayed(data.pen, pure=True)
    held = data.held()
    starts = _chunk_starts(data)

    def source(beta, *, step, hessian, clip):
        nonlocal checked
        beta = np.ascontiguousarray(beta, dtype=np.float64)
        if held is not None:
            _check_stopped()
            client, chunks = held
            k = len(chunks)
            args = (K, data.pen, data.fit_intercept, beta, hessian, not checked, data.n_threads)
            xs, ys, ws, _ = zip(*chunks)
            rows = starts if not checked else [0] * k
            futs = client.map(_sums_task, xs, ys, ws, *([a] * k for a in args), rows, pure=False)
            nbytes = 8 * (beta.size + 4 + (beta.size**2 if hessian else 0))
            s = _raise_first(_held_sum(client, futs, nbytes))
        else:
            b = delayed(beta, pure=True)
            parts = [
                delayed(_sums_task, pure=True)(
                    *(x, y, w, K, pen, data.fit_intercept, b, hessian),
                    *(not checked, data.n_threads, r0 if not checked else 0),
                )
                for (x, y, w, _), r0 in zip(data.blocks(), starts)
            ]
            s = _raise_first(_compute(_tree(parts)))
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
        b = np.log(np.maximum(share, _core.MIN_CLASS_SHARE))
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


def fit(problem: Any, *, warm_start: Any = None):
    """:func:`aloocv.fit` with ``loss="multinomial"`` on dask input."""

    data = Data.from_problem(problem)
    tol, max_iter = problem.options.tol, problem.options.max_iter
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
