"""Tuning on the trusted estimate (``tune(..., rtol=r)``, ``docs/math/trust.md``,
``docs/math/hypergradient.md`` "The refined objective").

The search runs on plain ALO; near its optimum the estimate is replaced by the refined
one of :func:`aloocv.loo` with ``rtol=r`` (exact refits of the samples ALO's error
indicator ranks first, until the estimated error of the mean is within ``r``), so that the
chosen penalty is exact leave-one-out's choice:

- a grid: the refined estimate at ALO's argmin and its neighbours, then along the grid
  until the refined argmin has refined neighbours on both sides (or is at an end); the
  choice is that argmin (:func:`walk_grid`);
- a gradient search: from ALO's optimum, a search on the refined mean with its set of
  refitted samples S held fixed (a smooth function of the penalty): L-BFGS-B on its exact
  derivative (:mod:`aloocv.tuning.implicit`) for a scalar-eta loss with an L2 penalty in
  memory; elsewhere (multinomial, an L1 term, dask) a bounded scalar search along the
  ray that scales every parameter alike. The refined estimate at the new point then
  names its own refitted samples; while they are not all in S, S grows by them and the
  search runs again (at most ``REFINE_ROUNDS`` times).

Every refined evaluation is a row of the search's history with ``refined`` True and
``plain_acv`` the ALO value at the same point.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.optimize

from .._diagnostics import ALOWarning
from .._stats import weighted_stderr
from ..backends import route
from ..backends.common import LOORequest
from ..results import trusted
from .implicit import refined_terms

__all__ = ["OUTSIDE_SHARE", "RAY_STEP", "RAY_XTOL", "REFINE_ROUNDS", "Refiner", "walk_grid"]

#: Rounds of a gradient refinement: the refitted set grows by the samples the refined
#: estimate at the new optimum refits and are not in it yet, at most this many times.
REFINE_ROUNDS = 3
#: A round of a gradient refinement is the last when the samples the refined estimate at
#: its optimum refits outside the fixed set move the mean by at most this share of the
#: budget (their exact losses against their ALO ones there).
OUTSIDE_SHARE = 0.1
#: Step (in log lambda) of the walk that brackets the refined minimum along the ray.
RAY_STEP = 0.25
#: Tolerance (in log lambda) of the bounded search along the ray.
RAY_XTOL = 1e-3


@dataclass
class RefinedPoint:
    """The refined mean with a fixed refitted set at one point (a history row)."""

    u: np.ndarray
    acv: float
    stderr: float | None
    plain: float
    grad: np.ndarray | None


def _gathered(v: Any) -> np.ndarray:
    """A per-sample array as numpy (a dask array computed: n floats)."""
    return np.asarray(v, dtype=np.float64)


class Refiner:
    """The refined estimate of one tuning problem at the points a search asks for.

    Parameters
    ----------
    pb : Problem
    obj : Objective
        The search's ALO objective (its fits are the expansion points).
    rtol : float
        The error budget of :func:`aloocv.loo`'s ``rtol=``.
    """

    def __init__(self, pb: Any, obj: Any, rtol: float):
        self.pb, self.obj, self.rtol = pb, obj, rtol
        self.n_refits = 0
        self.n_not_converged = 0
        self._last: tuple[bytes, np.ndarray, np.ndarray] | None = None  # (S, beta, refits)

    # ------------------------------------------------------------------ one point
    def problem_at(self, u: np.ndarray) -> Any:
        pen = self.obj.penalty_at(u)
        p = self.pb.n_features
        l1 = pen.l1_vector(p)
        if l1 is not None and not np.any(l1 > 0):
            l1 = None
        return self.pb.replace(
            penalty=pen,
            l2=np.ascontiguousarray(pen.l2_vector(p), dtype=np.float64),
            l1=None if l1 is None else np.ascontiguousarray(l1, dtype=np.float64),
        )

    def plain_at(self, u: np.ndarray, coef: Any, intercept: Any) -> Any:
        """ALO at ``u`` from the fit ``(coef, intercept)``, through the route table (the
        result carries its backend's exact refits)."""
        pbu = self.problem_at(u)
        icpt = intercept if self.pb.fit_intercept else None
        req = LOORequest("alo", np.asarray(coef), icpt)
        with warnings.catch_warnings():
            # leverages near 1 are what the refinement is for: no warning of plain ALO
            warnings.simplefilter("ignore", ALOWarning)
            return route.loo(pbu, route.choose(pbu, "loo", loo=req), req)

    def at(self, u: np.ndarray, coef: Any, intercept: Any) -> Any:
        """The refined estimate at ``u`` (``loo(..., rtol=rtol)`` at this fit)."""
        res = trusted(self.plain_at(u, coef, intercept), self.rtol)
        if res.error_estimate is not None:
            self.n_refits += int(res.error_estimate.n_refits)
        return res

    def at_evaluation(self, u: np.ndarray) -> Any:
        out = self.obj.evaluate(u, 0).out
        return self.at(u, out.coef, out.intercept)

    # ------------------------------------------------------------------ a fixed refitted set
    def fixed(self, u: np.ndarray, S: np.ndarray, order: int) -> RefinedPoint:
        """The mean with the samples S exact at ``u`` (and its derivative in ``u`` with
        ``order`` 1, where :func:`exact_derivative` applies)."""
        ev = self.obj.evaluate(u, order)
        if S.size == 0:  # nothing refitted (the budget was met by ALO as it is)
            return RefinedPoint(np.array(u, float), ev.acv, ev.stderr, ev.acv, ev.grad)
        w = None if self.obj.w is None else _gathered(self.obj.w)
        losses = _gathered(ev.out.losses).copy()
        grad = None
        if order >= 1:
            J2 = self.obj.template.jacobian(self.pb.n_features)[1]
            beta = np.concatenate([[float(ev.out.intercept)], ev.out.coef])
            beta = beta if self.pb.fit_intercept else np.asarray(ev.out.coef)
            t = refined_terms(self.problem_at(u), beta, J2, S, self._start(S, beta))
            self._last = (S.tobytes(), beta, t.refits)
            exact, n_nc = t.exact, t.n_not_converged
            grad = ev.grad + np.exp(u) * t.grad
        else:
            res = self.plain_at(u, ev.out.coef, ev.out.intercept)
            exact, n_nc = res._refits.refit(np.asarray(S, dtype=np.int64))
        self.n_refits += int(S.size)
        self.n_not_converged += int(n_nc)
        losses[S] = exact
        acv = float(np.average(losses, weights=w))
        return RefinedPoint(np.array(u, float), acv, weighted_stderr(losses, w), ev.acv, grad)

    def _start(self, S: np.ndarray, beta: np.ndarray) -> np.ndarray | None:
        """The last point's refits of the same samples, moved by the fit's change."""
        if self._last is None or self._last[0] != S.tobytes():
            return None
        return self._last[2] + (beta - self._last[1])[:, None]


def exact_derivative(pb: Any) -> bool:
    """Whether the refined mean's exact derivative is available: a scalar-eta loss with an
    L2 penalty (no L1 term), in memory."""
    return not pb.is_dask and not pb.is_multinomial and pb.l1 is None


# ----------------------------------------------------------------------------- grids
def walk_grid(
    values: np.ndarray, refine: Callable[[int], Any], selection: str
) -> tuple[dict[int, Any], int]:
    """The refined estimate on a grid (points ordered from the most to the least
    regularized), ALO's ``values`` given: at ALO's argmin and its neighbours, then along
    the grid until the refined argmin has refined neighbours on both sides (or is at an
    end). With ``selection="1se"`` also towards stronger penalties from there until a
    refined value exceeds the minimum plus its standard error. Returns the refined
    results by grid index and the chosen index."""
    T = values.size
    refined: dict[int, Any] = {}
    k0 = int(np.argmin(values))
    todo = [k0 - 1, k0, k0 + 1]
    while True:
        for k in todo:
            if 0 <= k < T and k not in refined:
                refined[k] = refine(k)
        best = min(sorted(refined), key=lambda k: refined[k].mean)
        todo = [k for k in (best - 1, best + 1) if 0 <= k < T and k not in refined]
        if not todo:
            break
    if selection != "1se":
        return refined, best
    limit = refined[best].mean + (refined[best].stderr or 0.0)
    k = best - 1
    while k >= 0:
        if k not in refined:
            refined[k] = refine(k)
        if refined[k].mean > limit:
            break
        k -= 1
    mixed = np.array([refined[k].mean if k in refined else values[k] for k in range(T)])
    return refined, int(np.flatnonzero(mixed <= limit)[0])


# ----------------------------------------------------------------------------- searches
@dataclass
class SearchRefinement:
    """The end of a refined gradient search."""

    u: np.ndarray
    loo: Any
    converged: bool
    message: str


def _lbfgs(rf: Refiner, u0, S, box, gtol, max_iter, record) -> tuple[np.ndarray, bool]:
    """L-BFGS-B on the refined mean with S fixed, from u0; (best u, converged)."""
    cache: dict[bytes, RefinedPoint] = {}

    def point(u):
        key = np.asarray(u, float).tobytes()
        if key not in cache:
            cache[key] = rf.fixed(np.asarray(u, float), S, 1)
            record(cache[key])
        return cache[key]

    lo, hi = box
    res = scipy.optimize.minimize(
        lambda u: point(u).acv,
        u0,
        jac=lambda u: point(u).grad,
        method="L-BFGS-B",
        bounds=list(zip(lo, hi)),
        options={"gtol": gtol, "maxiter": int(max_iter), "ftol": 0.0, "maxfun": 4 * max_iter},
    )
    best = min(cache.values(), key=lambda p: p.acv)
    g = best.grad.copy()
    g[(best.u <= lo) & (g > 0)] = 0.0
    g[(best.u >= hi) & (g < 0)] = 0.0
    return best.u, bool(np.max(np.abs(g)) <= gtol) or bool(res.success)


def _ray(rf: Refiner, u0, S, box, record) -> tuple[np.ndarray, bool]:
    """A bounded scalar search of the refined mean (S fixed) along ``u0 + t``."""
    lo = float(np.max(box[0] - u0))
    hi = float(np.min(box[1] - u0))
    vals: dict[float, float] = {}

    def phi(t: float) -> float:
        t = float(min(max(t, lo), hi))
        if t not in vals:
            p = rf.fixed(u0 + t, S, 0)
            record(p)
            vals[t] = p.acv
        return vals[t]

    step = RAY_STEP
    a, b = max(-step, lo), min(step, hi)
    direction = -1.0 if phi(a) < phi(0.0) else (1.0 if phi(b) < phi(0.0) else 0.0)
    left, right = a, b
    if direction != 0.0:
        t = a if direction < 0 else b
        while lo < t < hi:
            nxt = float(min(max(t + direction * step, lo), hi))
            if phi(nxt) >= phi(t):
                left, right = sorted((t - direction * step, nxt))
                break
            t = nxt
            step *= 2.0
        else:
            left, right = sorted((t - direction * step, t))
    left, right = max(left, lo), min(right, hi)
    opt = scipy.optimize.minimize_scalar(
        phi, bounds=(left, right), method="bounded", options={"xatol": RAY_XTOL}
    )
    t_best = min(vals, key=vals.get)
    return u0 + t_best, bool(opt.success)


def _outside_shift(rf: Refiner, u: np.ndarray, loo: Any, S: np.ndarray) -> tuple[np.ndarray, float]:
    """The samples the refined estimate at ``u`` refitted outside S, and how much their
    exact losses move the mean from their ALO values there."""
    est = loo.error_estimate
    outside = ~np.isin(est.refitted, S)
    rows = np.asarray(est.refitted[outside], dtype=np.int64)
    if rows.size == 0:
        return rows, 0.0
    alo = _gathered(rf.obj.evaluate(u, 0).out.losses)
    w = np.ones(alo.size) if rf.obj.w is None else _gathered(rf.obj.w)
    return rows, float(w[rows] @ (alo[rows] - est.exact_losses[outside])) / float(w.sum())


def refine_search(
    rf: Refiner,
    u: np.ndarray,
    box: tuple[np.ndarray, np.ndarray],
    tol: float,
    max_iter: int,
    record: Callable[[RefinedPoint], None],
) -> SearchRefinement:
    """From ALO's optimum ``u``: the search on the refined mean (module docstring). A
    round ends the search when the samples the refined estimate at its optimum refits
    outside S move the mean by at most ``OUTSIDE_SHARE`` of the budget."""
    loo = rf.at_evaluation(u)
    S = np.asarray(loo.error_estimate.refitted, dtype=np.int64)
    derivative = exact_derivative(rf.pb)
    how = "minimized on its exact derivative" if derivative else "minimized along the ray"
    converged = True
    for _ in range(REFINE_ROUNDS):
        if derivative:
            gtol = tol * max(abs(loo.mean), 1e-12)
            u, converged = _lbfgs(rf, u, S, box, gtol, max_iter, record)
        else:
            u, converged = _ray(rf, u, S, box, record)
        loo = rf.at_evaluation(u)
        rows, shift = _outside_shift(rf, u, loo, S)
        if abs(shift) <= OUTSIDE_SHARE * rf.rtol * abs(loo.mean):
            message = f"refined (rtol={rf.rtol:g}): the mean with {S.size} samples exact {how}"
            return SearchRefinement(u, loo, converged, message)
        S = np.union1d(S, rows)
    message = (
        f"refined (rtol={rf.rtol:g}): the samples refitted outside the set ({S.size}) still "
        f"moved the mean by more than {OUTSIDE_SHARE:g} of the budget after {REFINE_ROUNDS} "
        "rounds"
    )
    return SearchRefinement(u, loo, False, message)
