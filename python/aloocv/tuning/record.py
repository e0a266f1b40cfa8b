"""What a search records per evaluation and how its :class:`~aloocv.results.TuneResult`
is assembled at the end."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._diagnostics import check_finite_result
from .._progress import Progress
from .._validation import is_dask_collection
from ..losses import Multinomial
from ..results import DaskLOOResult, LOOResult, TuneResult, fit_result, multinomial_fit_result


class _History:
    """The rows of a search's history: one per evaluation, plain ALO or refined."""

    def __init__(self, m: int):
        self.m = m
        self.rows: list[tuple[np.ndarray, float, float, np.ndarray, int]] = []
        self.refined: dict[int, float] = {}  # row -> the plain ALO value there

    def add(self, params, acv, se, grad, n_fits, plain: float | None = None):
        """A row; ``plain`` (the ALO value at the same point) marks a refined one."""
        self.rows.append(
            (np.asarray(params, float).copy(), acv, se, np.asarray(grad).copy(), n_fits)
        )
        if plain is not None:
            self.refined[len(self.rows) - 1] = float(plain)

    def refine(self, row: int, acv: float, se: float) -> None:
        """Replaces row ``row``'s ALO value by the refined one."""
        params, plain, _, grad, n_fits = self.rows[row]
        self.rows[row] = (params, float(acv), se, grad, n_fits)
        self.refined[row] = float(plain)

    def arrays(self) -> dict[str, np.ndarray]:
        if not self.rows:
            out = {k: np.empty((0,)) for k in ("params", "acv", "stderr", "grad", "n_fits")}
            return {**out, "refined": np.empty(0, dtype=bool), "plain_acv": np.empty(0)}
        acv = np.array([r[1] for r in self.rows])
        refined = np.zeros(acv.size, dtype=bool)
        plain = acv.copy()
        for row, v in self.refined.items():
            refined[row] = True
            plain[row] = v
        return {
            "params": np.array([r[0] for r in self.rows]),
            "acv": acv,
            "stderr": np.array([r[2] for r in self.rows]),
            "grad": np.array([r[3] for r in self.rows]),
            "n_fits": np.array([r[4] for r in self.rows]),
            "refined": refined,
            "plain_acv": plain,
        }


def _finish(
    obj,
    u,
    hist,
    method,
    n_iter,
    converged,
    loss,
    intercept,
    selection="min",
    best_index=-1,
    path_losses=None,
    message="",
    path=None,
    refined_loo=None,
    rtol=None,
) -> TuneResult:
    """The TuneResult at ``u``; ``refined_loo`` (with ``rtol``): the refined estimate
    there, which is then :attr:`TuneResult.loo` and gives ``acv`` and ``stderr``."""
    ev = obj.evaluate(u, 0)
    out = obj.held(ev.out)
    on_dask = is_dask_collection(out.losses)  # per-sample arrays stay on the workers
    check_finite_result(
        "tune",
        coef=out.coef,
        intercept=out.intercept,
        losses=None if on_dask else out.losses,
        acv=ev.acv,
        stderr=ev.stderr if on_dask else None,
    )
    pen = obj.penalty_at(u)
    if isinstance(loss, Multinomial):
        fitres = multinomial_fit_result(out, pen, intercept)
    else:
        fitres = fit_result(out, loss, pen, intercept)
    if on_dask:
        res_loo: Any = DaskLOOResult(
            out.losses,
            out.predictions,
            out.leverages,
            "alo",
            fitres,
            ev.acv,
            ev.stderr,
            obj.w,
        )
    else:
        res_loo = LOOResult(
            losses=out.losses,
            predictions=out.predictions,
            leverages=out.leverages,
            method="alo",
            fit=fitres,
            sample_weight=obj.w,
        )
    acv, stderr = ev.acv, ev.stderr
    if refined_loo is not None:
        res_loo, acv, stderr = refined_loo, float(refined_loo.mean), refined_loo.stderr
    return TuneResult(
        penalty=pen,
        fit=fitres,
        loo=res_loo,
        acv=acv,
        stderr=stderr,
        history=hist.arrays(),
        method=method,
        n_iter=n_iter,
        n_fits=obj.n_fits,
        converged=converged,
        selection=selection,
        message=message,
        path_losses=path_losses,
        _best_index=best_index,
        rtol=rtol,
        **(path or {}),
    )


def _samples(v: Any) -> Any:
    """A per-sample array of an evaluation: float64 numpy, or a dask array as it is (dask
    input: it stays on the workers)."""
    return v if is_dask_collection(v) else np.array(v, dtype=np.float64)


def _columns(arrays: list, axis: int) -> Any:
    """Per-point per-sample arrays stacked along `axis` (a dask array for dask input)."""
    if arrays and is_dask_collection(arrays[0]):
        import dask.array as da

        return da.stack(arrays, axis=axis)
    return np.stack(arrays, axis=axis)


def _select(h: dict[str, np.ndarray], selection: str) -> int:
    if not np.all(np.isfinite(h["acv"])):
        raise ValueError("ACV is not finite at some grid points")
    best = int(np.argmin(h["acv"]))
    if selection == "1se":
        # points are ordered from most to least regularized: the first within 1 SE
        limit = h["acv"][best] + h["stderr"][best]
        best = int(np.flatnonzero(h["acv"] <= limit)[0])
    return best


def _passes(out: Any, name: str) -> int | None:
    """A pass count of an evaluation's fit; None where the state does not count them."""
    v = getattr(out, name, None)
    return None if v is None else int(v)


def _pass_counts(counts: list[int | None]) -> np.ndarray | None:
    """The per-point pass counts of a grid; None where the route does not count them."""
    if not counts or any(c is None for c in counts):
        return None
    return np.array(counts, dtype=np.int64)


def _progress(total: int, verbose: bool, desc: str) -> Progress | None:
    """The progress of a search with ``verbose`` (a tqdm bar, or plain lines without
    tqdm); None without."""
    return Progress(total, desc, unit="point") if verbose else None
