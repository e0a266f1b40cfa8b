"""Grids of penalties: the ``"grid"`` search (warm-started along the grid, or the
squared-loss ridge path from one decomposition) and the coarse bracketing grid of
``"auto"``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import _core
from .._stats import weighted_mean_stderr_columns, weighted_stderr
from .._validation import check_real_values
from ..penalties import Penalty
from ..results import TuneResult
from .optimizers import LOG_BOUND
from .record import _columns, _finish, _History, _pass_counts, _passes, _progress, _samples, _select
from .refine import walk_grid

BRACKET_POINTS = 5  # the coarse grid of "auto": 1e3 .. 1e-3 times the start
BRACKET_MARGIN = 3.0 * math.log(10.0)  # the box: the grid's range and 3 decades beyond


def _check_grid(grid: Any, penalty: Penalty, n_grid: int) -> list[np.ndarray]:
    m = penalty.params().size
    if grid is None:
        if not isinstance(n_grid, (int, np.integer)) or n_grid < 1:
            raise ValueError(f"n_grid must be a positive integer, got {n_grid!r}")
        base = penalty.params()
        if np.any(base <= 0):
            raise ValueError("the default grid scales the initial penalty: it must be positive")
        factors = np.logspace(3, -3, int(n_grid))
        return [base * f for f in factors]
    if isinstance(grid, Penalty):
        grid = [grid]
    given = list(grid) if not isinstance(grid, np.ndarray) or grid.ndim > 0 else [grid]
    pts = []
    for g in given:
        v = g.params() if isinstance(g, Penalty) else np.atleast_1d(check_real_values(g, "grid"))
        if v.size == 1 and m > 1:
            v = np.full(m, float(v[0]))
        if v.size != m:
            _check_grid_values(pts, given)  # an earlier point's bad values are named first
            raise ValueError(f"grid point {g!r} has {v.size} parameters; the penalty has {m}")
        pts.append(v)
    if not pts:
        raise ValueError("the grid is empty")
    values = _check_grid_values(pts, given)
    # warm starts run from the most to the least regularized point
    order = np.argsort(-values.sum(axis=1), kind="stable")
    return list(values[order])


def _check_grid_values(pts: list[np.ndarray], given: list) -> np.ndarray:
    """The grid points as rows of one float64 array, checked positive and finite at once
    (ValueError naming the first bad point as given)."""
    if not pts:
        return np.empty((0, 0))
    values = np.array(pts, dtype=np.float64).reshape(len(pts), -1)
    bad = ~(np.isfinite(values) & (values > 0)).all(axis=1)
    if bad.any():
        raise ValueError(f"grid values must be positive and finite, got {given[np.argmax(bad)]!r}")
    return values


@dataclass
class _Bracket:
    """The coarse grid of ``"auto"``: its points and each point's fit and losses."""

    points: list = field(default_factory=list)
    losses: list = field(default_factory=list)
    coefs: list = field(default_factory=list)
    icpts: list = field(default_factory=list)
    iters: list = field(default_factory=list)
    values: list = field(default_factory=list)  # (log params, ACV or inf where undefined)

    def path(self) -> dict[str, np.ndarray] | None:
        if not self.coefs:
            return None
        return {
            "path_coefs": np.stack(self.coefs),
            "path_intercepts": np.stack(self.icpts),
            "path_n_iter": np.array(self.iters, dtype=np.int64),
        }


def _bracket(obj, points, hist, callback, losses, coefs, icpts, iters, values=None):
    """ACV on the coarse grid (per-sample losses appended to ``losses``, ``(u, ACV)``
    to ``values``, ``inf`` where the fit is not defined): the best point and the search
    box around the grid."""
    values = [] if values is None else values
    best_u, best_acv = None, np.inf
    error: ValueError | None = None
    for k, v in enumerate(points):
        u = np.log(v)
        try:
            ev = obj.evaluate(u, 0)
        except ValueError as exc:
            error = exc  # e.g. singular as lambda -> 0: the bracket ends before
            values.append((u, np.inf))
            continue
        values.append((u, ev.acv if np.isfinite(ev.acv) else np.inf))
        hist.add(v, ev.acv, ev.stderr, np.full(v.size, np.nan), obj.n_fits)
        losses.append(ev.out.losses)
        coefs.append(np.array(ev.out.coef, dtype=np.float64))
        icpts.append(np.array(ev.out.intercept, dtype=np.float64))
        iters.append(int(ev.out.n_iter))
        if callback is not None:
            callback(k, obj.penalty_at(u), ev.acv)
        if ev.acv < best_acv:
            best_u, best_acv = u, ev.acv
    if best_u is None:
        # the last point's reason (dask input: a bad chunk of X, found by the first fit)
        raise ValueError(
            f"ALOOCV is not defined at any point of the bracketing grid: {error}"
        ) from error
    us = np.log(np.array(points))
    lo = np.maximum(us.min(axis=0) - BRACKET_MARGIN, -LOG_BOUND)
    hi = np.minimum(us.max(axis=0) + BRACKET_MARGIN, LOG_BOUND)
    return best_u, (lo, hi)


def _neighbours(u: float, points: list[np.ndarray]) -> tuple[float, float]:
    """The grid points on either side of u (infinite where u is at the grid's edge)."""
    us = np.sort(np.log([v[0] for v in points])) if points else np.empty(0)
    below, above = us[us < u], us[us > u]
    return (below[-1] if below.size else -np.inf), (above[0] if above.size else np.inf)


def _column_stats(losses: np.ndarray, w: np.ndarray | None) -> tuple[np.ndarray, list]:
    """The (weighted) mean of each column of per-sample losses (one per grid point) and
    its standard error (:func:`aloocv._stats.weighted_stderr`, None without spread), all
    columns at once."""
    with np.errstate(over="ignore", invalid="ignore"):  # huge losses: scaled below
        acv, se = weighted_mean_stderr_columns(losses, w)
    if se is None:
        return acv, [None] * losses.shape[1]
    # a column whose squares overflow: the scaled estimator of weighted_stderr
    return acv, [
        s if math.isfinite(s) else weighted_stderr(losses[:, k], w)
        for k, s in enumerate(se.tolist())
    ]


def _ridge_grid(obj, points, path: _core.RidgePathResult, selection, loss, intercept) -> TuneResult:
    # squared loss + scalar L2: the whole grid from one eigendecomposition (exact LOO)
    hist = _History(1)
    losses = np.asarray(path.losses)
    acv, stderr = _column_stats(losses, obj.w)
    no_grad = np.full(1, np.nan)  # copied by each row
    for v, a, se in zip(points, acv.tolist(), stderr):
        hist.add(v, a, se, no_grad, 0)
    arrays = {
        "path_predictions": np.asarray(path.predictions),
        "path_coefs": np.asarray(path.coef).T.copy(),
        "path_intercepts": np.asarray(path.intercept).copy(),
        "path_n_iter": np.zeros(len(points), dtype=np.int64),
        "path_hessian_passes": None,  # the ridge path forms no Newton Hessians
        "path_matvec_passes": None,
    }
    return _grid_result(obj, points, hist, selection, loss, intercept, np.asarray(losses), arrays)


def _grid_result(
    obj, points, hist, selection, loss, intercept, losses, arrays, refined=None
) -> TuneResult:
    """The selected grid point as a TuneResult (per-point losses in ``path_losses``);
    ``refined``: the refinement's ``(chosen index, refined result there, rtol, message)``."""
    best = _select(hist.arrays(), selection)
    loo = rtol = None
    message = "grid evaluated"
    if refined is not None:
        best, loo, rtol, note = refined
        message += f"; {note}"
    return _finish(
        obj,
        np.log(points[best]),
        hist,
        "grid",
        len(points),
        True,
        loss,
        intercept,
        selection,
        best,
        losses,
        message,
        arrays,
        refined_loo=loo,
        rtol=rtol,
    )


def _refine_grid(refiner, points, hist, all_losses, coefs, icpts, selection):
    """The refinement of a grid (:func:`aloocv.tuning.refine.walk_grid`): the refined
    values and losses replace ALO's at the points refined; ``(chosen index, refined
    result there, rtol, message)``."""
    _select(hist.arrays(), "min")  # ALO finite everywhere, or the same error as without
    refined, best = walk_grid(
        hist.arrays()["acv"],
        lambda k: refiner.at(np.log(points[k]), coefs[k], icpts[k]),
        selection,
    )
    for k, r in refined.items():
        hist.refine(k, float(r.mean), r.stderr)
        all_losses[k] = r.losses
    note = (
        f"refined (rtol={refiner.rtol:g}) at {len(refined)} of {len(points)} points, "
        f"{refiner.n_refits} exact refits"
    )
    return best, refined[best], refiner.rtol, note


def _grid(obj, points, selection, verbose, callback, loss, intercept, refiner=None) -> TuneResult:
    hist = _History(points[0].size)
    all_losses = []
    preds, coefs, icpts, iters, hpasses, mpasses = [], [], [], [], [], []
    bar = _progress(len(points), verbose, "aloocv grid")
    best = None  # the lowest ACV so far (the first one on ties, as np.argmin)
    for k, v in enumerate(points):
        ev = obj.evaluate(np.log(v), 0)
        if best is None or ev.acv < best.acv:
            best = ev
        all_losses.append(ev.out.losses)
        preds.append(_samples(ev.out.predictions))
        coefs.append(np.array(ev.out.coef, dtype=np.float64))
        icpts.append(np.array(ev.out.intercept, dtype=np.float64))
        iters.append(int(ev.out.n_iter))
        hpasses.append(_passes(ev.out, "hessian_passes"))
        mpasses.append(_passes(ev.out, "matvec_passes"))
        hist.add(v, ev.acv, ev.stderr, np.full(v.size, np.nan), obj.n_fits)
        if callback is not None:
            callback(k, obj.penalty_at(np.log(v)), ev.acv)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    arrays = {
        "path_predictions": _columns(preds, -1),
        "path_coefs": np.stack(coefs),
        "path_intercepts": np.stack(icpts),
        "path_n_iter": np.array(iters, dtype=np.int64),
        "path_hessian_passes": _pass_counts(hpasses),
        "path_matvec_passes": _pass_counts(mpasses),
    }
    if selection == "min" and best is not None:
        obj.keep(best)  # the result is this evaluation: no refit at the selected point
    refined = None
    if refiner is not None:
        refined = _refine_grid(refiner, points, hist, all_losses, coefs, icpts, selection)
    return _grid_result(
        obj, points, hist, selection, loss, intercept, _columns(all_losses, 1), arrays, refined
    )
