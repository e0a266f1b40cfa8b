"""The closed forms over the chunks: the leverage pass (ALO and the other one-step
estimates per chunk, the hypergradient's first accumulation, the diagnostics reduced
on the way) and the adjoint pass of the exact hypergradient."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import _core
from ..._diagnostics import min_margin, unreliable_mask
from .data import Data, _chunk_arrays, _single_blas, _vec
from .newton import _cho, _settle_guard, _solve, _State
from .passes import _compute, _stats, _tree
from .screen import scalar_values


@_single_blas
def _loo_task(
    x,
    y,
    w,
    off,
    loss,
    intercept,
    beta,
    H,
    method,
    gradient,
    inv_sw,
    nt,
    cols=None,
    probe=None,
    screen=None,
):
    x, y, w, off = _chunk_arrays(x, y, w, off, False)
    if cols is not None:  # the active columns (an L1 fit; beta, H are on them)
        x = np.ascontiguousarray(x[:, cols])
    beta, H = _vec(beta), np.array(H, dtype=np.float64, order="F")
    out = _core.chunk_loo(
        x,
        y,
        w,
        loss,
        fit_intercept=intercept,
        beta=beta,
        H=H,
        method=method,
        gradient=gradient,
        inv_sw=inv_sw,
        n_threads=nt,
        offset=off,
    )
    rec = _chunk_record(out)
    if probe is not None:
        rec["step_max"] = _probe_max(x, probe, intercept)
    if screen is not None:  # the loss object: ALO's error indicator (screen.py)
        rec.update(scalar_values(screen, y, w, rec))
    return rec


def _probe_max(x: np.ndarray, probe, intercept: bool) -> float:
    """A deferred guard's max_i |x~_i^T step| over a chunk's rows, in a task that reads
    them anyway (the leverage pass, the folds' pass)."""
    probe = _vec(probe)
    xs = x @ probe[int(intercept) :] + (probe[0] if intercept else 0.0)
    return float(np.max(np.abs(xs))) if len(xs) else 0.0


def _chunk_record(out: _core.ChunkLooResult) -> dict[str, Any]:
    """A chunk's leave-one-out values (``_core.chunk_loo`` or
    ``_core.multinomial_chunk_loo``) as the task's record: a dict, which the tasks
    exchange (pickled between worker processes)."""
    return {
        k: getattr(out, k)
        for k in ("eta", "losses", "predictions", "leverages", "downdate", "r", "S")
    }


def _loo_sums(out: dict, y, w, margin: bool) -> dict:
    """The chunk's partial sums of the leverage pass: the (weight, mean, M2) stats, the
    hypergradient accumulations, the diagnostics (the count of samples with d_i h_i
    above ALO_UNRELIABLE_DH; with `margin`, the smallest logistic training margin) and,
    when the record holds them, the sums of ALO's error indicator (screen.py)."""
    w = None if w is None else np.asarray(w, dtype=np.float64)
    return {
        "screen": out.get("bound"),
        "stats": _stats(out["losses"], w),
        "r": out["r"],
        "S": out["S"],
        "n_unreliable": int(np.count_nonzero(unreliable_mask(out["downdate"]))),
        "margin": min_margin(out["eta"], np.asarray(y), w) if margin else np.inf,
        "step_max": out.get("step_max"),
    }


@_single_blas
def _adjoint_task(x, y, w, off, loss, intercept, beta, M, nt, cols=None):
    x, y, w, off = _chunk_arrays(x, y, w, off, False)
    if cols is not None:  # the active columns (an L1 fit; beta, M are on them)
        x = np.ascontiguousarray(x[:, cols])
    beta, M = _vec(beta), np.array(M, dtype=np.float64, order="F")
    return {
        "s": _core.chunk_adjoint(
            x, y, w, loss, fit_intercept=intercept, beta=beta, M=M, n_threads=nt, offset=off
        )
    }


_PER_SAMPLE = ("losses", "predictions", "leverages", "downdate")


def _alo(
    data: Data,
    beta: np.ndarray,
    H: np.ndarray,
    method: str,
    gradient: bool,
    sw: float,
    keep: str = "lazy",
    cols: Any = None,
    probe: np.ndarray | None = None,
    screen: bool = False,
):
    """The closed forms over the chunks in one leverage pass: the per-chunk outputs
    (`keep`: "lazy" delayed objects, "persist" persisted ones, "best" the pair (lazy,
    persisted) of a tuning state's point, held.py), the reduced stats and (with `gradient`)
    the exact hypergradient per feature, ``(d mean / d l2_j, d mean / d l1_j)`` (each of
    length p; hypergrad.hpp's alo_with_gradient over the chunks). With `cols` (the active
    set of an L1 fit), the formulas are on those columns of X; beta and H are then on them
    too, and the gradient holds the active set and its signs fixed (as the estimate does):
    zero for the inactive features, ``-u_k sign(theta_k)`` for the L1 weights. The last
    output holds the diagnostics reduced in the pass: ``n_unreliable`` (samples with
    ``d_i h_i > ALO_UNRELIABLE_DH``) and ``margin`` (the smallest logistic training margin,
    inf for other losses), with `probe` (a deferred guard's step) ``step_max``, the
    largest ``|x~_i^T probe|``, and with `screen` the sums of ALO's error indicator
    ``screen`` (screen.py; the records then keep ``y``, ``w`` and the loss change)."""
    import dask
    from dask import delayed

    b = delayed(np.ascontiguousarray(beta), pure=True)
    Hd = delayed(np.asfortranarray(H), pure=True)
    c = None if cols is None else delayed(np.asarray(cols, dtype=np.intp), pure=True)
    pr = None if probe is None else delayed(np.ascontiguousarray(probe), pure=True)
    blocks = data.blocks()
    outs = [
        delayed(_loo_task, pure=True)(
            x,
            y,
            w,
            o,
            data.loss.core,
            data.fit_intercept,
            b,
            Hd,
            method,
            gradient,
            1.0 / sw,
            data.n_threads,
            c,
            pr,
            data.loss if screen else None,
        )
        for x, y, w, o in blocks
    ]
    lazy = outs
    if keep in ("persist", "best"):  # held by the workers; the reduction below reads them
        outs = list(dask.persist(*outs))
    logistic = data.loss == "logistic"
    sums = [
        delayed(_loo_sums, pure=True)(o, blk[1], blk[2], logistic) for o, blk in zip(outs, blocks)
    ]
    red = _compute(_tree(sums))
    if keep == "best":  # both: the lazy outputs and the persisted ones (held.py)
        outs = (lazy, outs)
    grad = None
    if gradient:
        L = _cho(H)
        S = red["S"]
        M = _solve(L, _solve(L, S).T)
        M = 0.5 * (M + M.T)
        r = red["r"]
        if data.loss.name not in ("squared", "huber"):  # l''' = 0: no second pass
            Md = delayed(np.asfortranarray(M), pure=True)
            parts = [
                delayed(_adjoint_task, pure=True)(
                    x, y, w, o, data.loss.core, data.fit_intercept, b, Md, data.n_threads, c
                )
                for x, y, w, o in blocks
            ]
            r = r - _compute(_tree(parts))["s"]
        u = _solve(L, r)
        off = int(data.fit_intercept)
        bq = beta[off:]
        on = slice(None) if cols is None else np.asarray(cols, dtype=np.intp)
        grad_l2, grad_l1 = np.zeros(data.p), np.zeros(data.p)
        grad_l2[on] = -(u[off:] * bq + np.diag(M)[off:])
        grad_l1[on] = -u[off:] * np.sign(bq)
        grad = (grad_l2, grad_l1)
    diag = {k: red.get(k) for k in ("n_unreliable", "margin", "step_max", "screen")}
    return outs, red["stats"], grad, diag


def _on_active(data: Data, st: _State) -> tuple[np.ndarray, Any]:
    """(beta, columns) of the leave-one-out formulas: all of them, or with an L1 term the
    intercept and the active features (H of the state is on those)."""
    if st.active is None:
        return st.beta, None
    off = int(data.fit_intercept)
    return st.beta[list(range(off)) + [int(j) + off for j in st.active]], st.active


def _alo_settled(
    data: Data,
    st: _State,
    tol: float,
    gradient: bool,
    keep: str,
    method: str = "alo",
    screen: bool = False,
) -> tuple[_State, tuple]:
    """:func:`_alo` at the fitted state, whose deferred guard (if any) is measured in the
    same leverage pass and settled (:func:`_settle_guard`); where the point moved, the
    pass is made again for the new Hessian. Returns the state and _alo's outputs."""
    beta, cols = _on_active(data, st)
    probe = None if st.guard is None else st.guard[0]
    out = _alo(data, beta, st.H, method, gradient, st.sw, keep, cols, probe, screen)
    moved = out[3].get("step_max")
    st, moved_on = _settle_guard(data, st, moved, tol)
    if moved_on:
        beta, cols = _on_active(data, st)
        out = _alo(data, beta, st.H, method, gradient, st.sw, keep, cols, screen=screen)
    return st, out


def _rcond(H: np.ndarray) -> float:
    """The core's reciprocal condition estimate of the factored Hessian (factor.hpp):
    min_j L_jj^2 / H_jj."""
    L = _cho(H)
    d = np.diag(H)
    pos = d > 0.0
    return float(min(1.0, np.min(np.diag(L)[pos] ** 2 / d[pos], initial=1.0)))


def _stderr(stats, n: int) -> float:
    """As LOOResult.stderr (weights act as frequency weights; none for n < 2)."""
    sw, _, m2 = stats
    if n < 2:
        return float("nan")
    return float(math.sqrt(m2 / max(sw - 1.0, 1e-300) / sw))
