"""The dask backend's fits: the core's Newton driver (``_core.sums_fit``) and its
elastic-net route (``_core.enet_sums_fit``) on sums sources whose every evaluation is
one pass over the chunks; the fit of a leave-one-out call (fresh end, given
coefficients) and the settling of a fused end's deferred guard."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import solve_triangular

from ... import _core
from ..._diagnostics import warn_given_coef as _warn_given_coef
from ..._diagnostics import warn_not_converged as _warn_not_converged
from ..._validation import check_real_scalar, check_vector
from ...results import FitFields
from ...results import fit_result as _result
from .data import Data, _vec
from .passes import _check_first_pass, _first_pass, _pass


@dataclass
class _State:
    beta: np.ndarray
    f: float  # penalized objective
    grad: np.ndarray  # penalized gradient
    H: np.ndarray  # penalized Hessian at beta
    sw: float
    n_iter: int
    converged: bool
    grad_norm: float
    active: np.ndarray | None = None  # L1: the nonzero features (H is on them)
    hessian_passes: int = 0  # Hessians factored (as the in-memory fit counts them)
    hx: np.ndarray | None = None  # the unpenalized part of H (smooth fits)
    hessian_at_point: bool = True  # H is the Hessian at beta
    # a fused end's deferred guard (newton's defer_end_guard): the end Hessian's Newton
    # step and its decrement, settled by the leverage pass (_settle_guard); None: none
    guard: tuple[np.ndarray, float] | None = None
    # the source's unpenalized sums at beta (loss, gradient): the next penalty's fit
    # starts from them without a pass (as path_fit's predictor in memory)
    sums: tuple[float, np.ndarray] | None = None


def _penalized(data: Data, beta: np.ndarray, s: dict) -> tuple[float, np.ndarray, np.ndarray]:
    off = int(data.fit_intercept)
    pen1 = np.concatenate([np.zeros(off), data.pen])
    f = float(s["loss"] + 0.5 * pen1 @ (beta * beta))
    g = s["grad"] + pen1 * beta
    H = None
    if s.get("hess") is not None:
        H = np.array(s["hess"])
        H[np.diag_indices_from(H)] += pen1
    return f, g, H


def _cho(H: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.cholesky(H)
    except np.linalg.LinAlgError:
        raise ValueError(
            "the Hessian is not positive definite (singular design without enough penalty, or "
            "a loss with negative curvature): use a larger penalty"
        ) from None


def _solve(L: np.ndarray, b: np.ndarray) -> np.ndarray:

    z = solve_triangular(L, b, lower=True, check_finite=False)
    return solve_triangular(L.T, z, lower=False, check_finite=False)


def _init_beta(data: Data, s: dict) -> np.ndarray:
    """The core's cold start: zero slopes, the intercept at the link of the weighted mean
    of y (a mean offset subtracted)."""
    beta = np.zeros(data.p1)
    if data.fit_intercept:
        ybar = s["ysum"] / s["weight"]
        if data.loss.link == "logit":
            q = min(max(ybar, 1e-6), 1.0 - 1e-6)
            b = math.log(q / (1.0 - q))
        elif data.loss.link == "log":
            b = math.log(max(ybar, 1e-10))
        else:
            b = ybar
        beta[0] = b - s["offsum"] / s["weight"]
    return beta


def _sums_source(data: Data):
    """The dask problem as a sums source of the core's Newton driver (``_core.sums_fit``):
    each call is one map-reduce pass over the chunks (:func:`_pass`); the first one of
    the problem also checks every chunk of X."""

    def source(beta, *, step, hessian, clip):
        s = _pass(data, beta, hessian, check=not data.checked, step=step, clip=clip)
        data.checked = True
        hess = None if s["hess"] is None else np.array(s["hess"], dtype=np.float64, order="F")
        return float(s["loss"]), _vec(s["grad"]), hess, float(s["step_max"])

    return source


def newton(
    data: Data,
    tol: float,
    max_iter: int,
    beta0: np.ndarray | None = None,
    fresh_end: bool = False,
    previous: _State | None = None,
    secant: bool = False,
    defer_end_guard: bool = False,
) -> _State:
    """Damped Newton over the chunks: the core's one Newton driver (``newton_drive``) on
    a sums model whose every evaluation is one pass over the chunks (loss, gradient and,
    when the next step needs it, the Hessian of the trial point in the same pass). It
    takes the in-memory fit's iterates: ``newton_fit``'s (with `fresh_end` as the
    leave-one-out formulas use it: chord steps near the optimum and a fresh Hessian at
    the returned beta), or with `previous` (an earlier fit of the same data under another
    penalty) ``path_fit``'s, starting on its Hessian plus the new penalty; `secant` as
    the in-memory tuning runs (FitOptions::secant: secant-corrected chord steps). With
    `defer_end_guard` (a fresh end whose leverage pass follows) the guard of the fused
    end is left in the state's ``guard``: the leverage pass measures it
    (:func:`_settle_guard`) instead of a pass of its own."""
    first = _first_pass(data)
    sw = float(first["weight"])
    if previous is not None:
        beta = np.array(previous.beta, dtype=np.float64)
    elif beta0 is None:
        beta = _init_beta(data, first)
    else:
        beta = np.array(beta0, dtype=np.float64)
    r = _core.sums_fit(
        _sums_source(data),
        data.loss.core,
        data.pen,
        fit_intercept=data.fit_intercept,
        beta0=np.ascontiguousarray(beta),
        weight_sum=sw,
        tol=tol,
        max_iter=max_iter,
        fresh_end=fresh_end,
        previous_hessian=None if previous is None else previous.hx,
        secant=secant,
        defer_end_guard=defer_end_guard,
        start_loss=None if previous is None or previous.sums is None else previous.sums[0],
        start_grad=None if previous is None or previous.sums is None else previous.sums[1],
    )
    guard = None
    if r.end_guard_step is not None:
        guard = (np.array(r.end_guard_step), float(r.end_guard_dec))
    return _State(
        r.beta,
        float(r.objective),
        r.grad,
        r.hessian,
        sw,
        int(r.n_iter),
        bool(r.converged),
        float(r.grad_norm),
        hessian_passes=int(r.hessian_passes),
        hx=r.unpenalized_hessian,
        hessian_at_point=bool(r.hessian_at_point),
        guard=guard,
        sums=(float(r.loss), np.array(r.loss_grad)),
    )


def _kkt(beta: np.ndarray, grad: np.ndarray, l1: np.ndarray) -> np.ndarray:
    """Per coordinate, the minimum-norm subgradient of the objective (the core's
    kkt_violation)."""
    return np.where(
        beta > 0,
        np.abs(grad + l1),
        np.where(beta < 0, np.abs(grad - l1), np.maximum(0.0, np.abs(grad) - l1)),
    )


def _enet_objective(data: Data, beta: np.ndarray, s: dict, l1: np.ndarray):
    f, g, _ = _penalized(data, beta, s)
    return f + float(l1 @ np.abs(beta)), g


def _hess_on(data: Data, beta: np.ndarray, idx: list, pen1: np.ndarray) -> np.ndarray:
    """The penalized Hessian on the coordinates `idx` of beta (intercept first, if any)
    in one pass over those columns of X."""
    off = int(data.fit_intercept)
    cols = [j - off for j in idx if j >= off]
    s = _pass(data, beta[idx], hessian=True, cols=cols)
    H = np.array(s["hess"])
    H[np.diag_indices_from(H)] += pen1[idx]
    return H


def _enet_source(data: Data):
    """The dask problem as a sums source of the core's elastic-net fit
    (``_core.enet_sums_fit``): one map-reduce pass per call; with ``cols`` (a working set's
    coordinates of beta, beta zero elsewhere) the pass reads only those columns of X and
    returns the Hessian and gradient on them. The first call also checks every chunk of X."""
    off = int(data.fit_intercept)
    checked = False

    def source(beta, *, step, hessian, clip, cols=None):
        nonlocal checked
        if cols is None:
            s = _pass(data, beta, hessian, check=not checked)
        else:
            feat = [int(j) - off for j in cols if j >= off]
            s = _pass(data, beta[cols], hessian, check=not checked, cols=feat)
        checked = True
        hess = None if s["hess"] is None else np.array(s["hess"], dtype=np.float64, order="F")
        return float(s["loss"]), _vec(s["grad"]), hess, 0.0

    return source


def enet_newton(data: Data, tol: float, max_iter: int, beta0: np.ndarray | None = None) -> _State:
    """The core's elastic-net fit over the chunks: ``enet_fit``'s working-set proximal
    Newton (``enet_drive`` in enet.hpp, the same iteration as in memory) on a sums source
    (:func:`_enet_source`). Per outer iteration: the Hessian of the working set (one pass
    over its columns), the core's coordinate descent on the quadratic model, and an Armijo
    search on the true objective (one pass per trial, which also gives the next
    gradient). It stops on the KKT violation / sum(w) <= tol. H of the returned state is
    the penalized Hessian at beta on the active set (as the numpy path's leave-one-out
    uses)."""
    first = _first_pass(data)
    sw = float(first["weight"])
    beta = _init_beta(data, first) if beta0 is None else np.array(beta0, dtype=np.float64)
    r = _core.enet_sums_fit(
        _enet_source(data),
        data.loss.core,
        data.pen,
        data.l1,
        fit_intercept=data.fit_intercept,
        beta0=np.ascontiguousarray(beta),
        weight_sum=sw,
        tol=tol,
        max_iter=max_iter,
    )
    return _State(
        r.beta,
        float(r.objective),
        r.grad,
        r.hessian,
        sw,
        int(r.n_iter),
        bool(r.converged),
        float(r.grad_norm),
        np.asarray(r.active, dtype=np.intp),
        hessian_passes=int(r.hessian_passes),
    )


def _solve_fit(
    data: Data,
    tol: float,
    max_iter: int,
    beta0: np.ndarray | None = None,
    fresh_end: bool = False,
    previous: _State | None = None,
    secant: bool = False,
    defer_end_guard: bool = False,
) -> _State:
    """The fit of `data`: damped Newton (:func:`newton`; `fresh_end` where the
    leave-one-out formulas need the Hessian at beta, `previous` to go on from an earlier
    penalty's fit, `secant` in tuning runs, `defer_end_guard` where a leverage pass
    follows), or the elastic-net route with an L1 term."""
    if data.l1 is not None:
        if previous is not None:
            beta0 = previous.beta
        return enet_newton(data, tol, max_iter, beta0)
    return newton(
        data,
        tol,
        max_iter,
        beta0,
        fresh_end=fresh_end,
        previous=previous,
        secant=secant,
        defer_end_guard=defer_end_guard,
    )


def _state_fields(data: Data, st: _State) -> dict[str, Any]:
    """The fit fields (``_core.FitResult``'s names) of a state of the dask fit."""
    off = int(data.fit_intercept)
    return {
        "coef": st.beta[off:].copy(),
        "intercept": float(st.beta[0]) if off else 0.0,
        "n_iter": st.n_iter,
        "converged": st.converged,
        "objective": st.f,
        "grad_norm": st.grad_norm,
    }


def _fit_result(data: Data, st: _State):

    out = FitFields(**_state_fields(data, st), hessian_passes=st.hessian_passes)
    return _result(out, data.loss, data.penalty, data.fit_intercept)


def fit(problem: Any, *, warm_start: Any = None):
    """:func:`aloocv.fit` on dask input (a scalar loss; see the package docstring)."""

    data = Data.from_problem(problem)
    tol, max_iter = problem.options.tol, problem.options.max_iter
    beta0 = None
    if warm_start is not None:
        beta0 = np.asarray(warm_start.beta_, dtype=np.float64)
        if warm_start.fit_intercept != data.fit_intercept or beta0.shape != (data.p1,):
            raise ValueError("warm_start does not match the shape of this problem")
    st = _solve_fit(data, tol, max_iter, beta0)
    res = _fit_result(data, st)
    _warn_not_converged(res, tol, max_iter)
    return res


def _given_beta(data: Data, coef, intercept) -> np.ndarray:

    c = check_vector(np.ravel(coef), data.p, "coef")
    b = 0.0
    if intercept is not None:
        b_arr = np.asarray(intercept)
        if b_arr.size != 1:
            raise ValueError(f"intercept must be a scalar, got shape {b_arr.shape}")
        b = check_real_scalar(b_arr.ravel()[0], "intercept")
        if not data.fit_intercept and b != 0.0:
            raise ValueError("intercept given with fit_intercept=False")
    return np.concatenate([[b], c]) if data.fit_intercept else np.array(c)


def _settle_guard(data: Data, st: _State, moved: float | None, tol: float) -> tuple[_State, bool]:
    """A fused end's deferred guard settled once the leverage pass measured its move
    (the in-memory settle_deferred_end): the state without its guard, and whether the
    point moved. Within ``FUSED_END_ETA`` (or no guard pending) the point and its Hessian
    stand. Otherwise the end Hessian's step is taken (``_core.sums_settle_end``: the
    core's line search, the trial point's Hessian in the same pass) where it halves
    max|grad|; the leverages are then to be computed again for its Hessian."""
    if st.guard is None or moved is None or not moved > _core.FUSED_END_ETA:
        return dataclasses.replace(st, guard=None), False
    step, dec = st.guard
    r = _core.sums_settle_end(
        _sums_source(data),
        data.loss.core,
        data.pen,
        fit_intercept=data.fit_intercept,
        beta=np.ascontiguousarray(st.beta),
        unpenalized_hessian=np.asfortranarray(st.hx),
        step=np.ascontiguousarray(step),
        dec=dec,
        weight_sum=st.sw,
        tol=tol,
        loss_at_beta=st.sums[0],
        grad_at_beta=np.ascontiguousarray(st.sums[1]),
    )
    if r.n_iter == 0:  # the step did not halve max|grad| (the rounding floor): undone
        return dataclasses.replace(st, guard=None), False
    settled = dataclasses.replace(
        st,
        beta=r.beta,
        f=float(r.objective),
        grad=r.grad,
        H=r.hessian,
        hx=r.unpenalized_hessian,
        n_iter=st.n_iter + int(r.n_iter),
        hessian_passes=st.hessian_passes + int(r.hessian_passes),
        converged=bool(r.converged),
        grad_norm=float(r.grad_norm),
        hessian_at_point=bool(r.hessian_at_point),
        guard=None,
        sums=(float(r.loss), np.array(r.loss_grad)),
    )
    return settled, True


def _fit_for_loo(data: Data, coef, intercept, tol, max_iter, fresh_end: bool = True) -> _State:

    if coef is None:
        if intercept is not None:
            raise ValueError("intercept= requires coef=")
        # a fresh end's guard is measured in the leverage pass (_alo_settled)
        st = _solve_fit(data, tol, max_iter, fresh_end=fresh_end, defer_end_guard=fresh_end)
        _warn_not_converged(_fit_result(data, st), tol, max_iter)
        if not st.hessian_at_point and st.active is None:
            # a plain fit ends on the factor of an earlier point: the exact refits start
            # on the Hessian at beta (in memory: fresh_factor), one pass
            s = _pass(data, st.beta, hessian=True)
            hx = np.array(s["hess"])
            _, _, H = _penalized(data, st.beta, s)
            st = dataclasses.replace(
                st, H=H, hx=hx, hessian_at_point=True, hessian_passes=st.hessian_passes + 1
            )
        return st
    beta = _given_beta(data, coef, intercept)
    active = None
    if data.l1 is not None:  # the active-set state at beta (the core's enet_prepare_at)
        off = int(data.fit_intercept)
        s = _pass(data, beta, hessian=False, check=True)
        _check_first_pass(data, s)
        l1 = np.concatenate([np.zeros(off), data.l1])
        f, g = _enet_objective(data, beta, s, l1)
        sw = float(s["weight"])
        gn = float(_kkt(beta, g, l1).max()) / sw
        active = np.flatnonzero(beta[off:] != 0.0)
        pen1 = np.concatenate([np.zeros(off), data.pen])
        H = _hess_on(data, beta, list(range(off)) + [int(j) + off for j in active], pen1)
    else:
        s = _pass(data, beta, hessian=True, check=True)
        _check_first_pass(data, s)
        f, g, H = _penalized(data, beta, s)
        sw = float(s["weight"])
        gn = float(np.max(np.abs(g))) / sw

    _warn_given_coef(gn, tol)
    return _State(beta, f, g, H, sw, 0, gn <= tol, gn, active)
