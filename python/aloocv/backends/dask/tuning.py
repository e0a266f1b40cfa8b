"""The tuning states of dask input: stand-ins for ``_core.TuneState`` (scalar losses)
and the in-memory multinomial state in :class:`aloocv.tuning.Objective`."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ...results import StateOutput
from ..common import TANGENT_LOG_STEP
from .alo import _alo_settled, _stderr
from .data import Data, _client
from .held import BestHeld
from .newton import _solve_fit, _State, _state_fields
from .passes import _first_pass, _per_sample


class DaskTuneState:
    """Stands in for ``_core.TuneState`` in :class:`aloocv.tuning.Objective` on dask input:
    a warm-started Newton fit over the chunks, then ALO and its exact gradient. Per
    evaluated point only O(p1^2) reaches the client (the fit, the ALO mean and standard
    error reduced on the workers, the gradient); the per-sample ALO values stay dask
    arrays aligned with X's row chunks: lazy, and on a distributed client held by the
    workers for the best point evaluated so far only (:mod:`.held`)."""

    def __init__(self, data: Data, tol: float, max_iter: int):
        self.data = data
        self.tol, self.max_iter = tol, max_iter
        self.beta: np.ndarray | None = None
        self._st: _State | None = None
        # the last fit, which the next penalty's fit goes on from (as the in-memory
        # TuneState: path_fit on its Hessian); None after set_beta
        self._prev: _State | None = None
        self.best = BestHeld()
        self._probing = False  # alo_tangents' side points: never held as the best

    def held_output(self, out: StateOutput) -> StateOutput:
        """``out`` with its per-sample arrays held by the workers where it is the best
        point's (:meth:`BestHeld.output`)."""
        return self.best.output(out)

    def set_penalty(self, l2: np.ndarray, l1: np.ndarray | None = None) -> None:
        has_l1 = l1 is not None and np.any(np.asarray(l1) > 0)
        self.data.l1 = np.ascontiguousarray(l1, dtype=np.float64) if has_l1 else None
        self.data.pen = np.ascontiguousarray(l2, dtype=np.float64)
        self._st = None

    def set_beta(self, beta: np.ndarray) -> None:
        self.beta = np.array(beta, dtype=np.float64)
        self._st = None
        self._prev = None

    def fit(self) -> None:
        if self._st is None:
            self._st = _solve_fit(  # as the in-memory TuneState: secant-corrected chords
                self.data,
                self.tol,
                self.max_iter,
                self.beta,
                fresh_end=True,
                previous=self._prev,
                secant=True,
                defer_end_guard=True,  # settled in alo()'s leverage pass
            )
            self._prev = self._st
            self.beta = self._st.beta.copy()

    def alo(self, *, gradient: bool = True, gradient_kind: str = "exact") -> StateOutput:

        if gradient_kind != "exact":
            raise ValueError("dask input has the exact hypergradient only (gradient='exact')")
        self.fit()
        assert self._st is not None
        hold = _client() is not None and not self._probing
        keep = "best" if hold else "lazy"
        st, (outs, stats, hgrad, _) = _alo_settled(self.data, self._st, self.tol, gradient, keep)
        self._st = self._prev = st
        self.beta = st.beta.copy()
        lazy, held = outs if hold else (outs, None)
        out = StateOutput(
            # per sample: lazy dask arrays with X's row chunks (the best point's held by
            # the workers, held.py); the mean and its standard error are reduced on the
            # workers
            **_arrays(self.data, lazy),
            acv=float(stats[1]),
            stderr=_stderr(stats, self.data.n),
            **_state_fields(self.data, st),
            grad_l2=None if hgrad is None else hgrad[0],
            grad_l1=None if hgrad is None else hgrad[1],
        )
        if held is not None:
            self.best.offer(out.acv, out, lambda: _arrays(self.data, held))
        return out

    def alo_tangents(self, J2: np.ndarray, J1: np.ndarray) -> StateOutput:
        """Second derivatives by central differences of the exact gradient (as the
        multinomial state), along each parameter's direction ``(J2[:, k], J1[:, k])`` of
        the per-feature (l2, l1) weights, with a step of TANGENT_LOG_STEP in the log of the
        parameter: used only to propose Newton steps of the searches."""

        out = self.alo(gradient=True)
        at, pen = self.beta, self.data.pen.copy()
        l1 = np.zeros(self.data.p) if self.data.l1 is None else self.data.l1.copy()
        T2 = np.empty((self.data.p, J2.shape[1]))
        T1 = np.empty_like(T2)
        self._probing = True  # the side points' arrays are never held
        try:
            for k in range(J2.shape[1]):
                # the parameter's value: the weight of a feature it moves (the penalties
                # are linear in their parameters, with 0/1 Jacobians)
                value = max(float(np.max(J2[:, k] * pen)), float(np.max(J1[:, k] * l1)))
                h = value * TANGENT_LOG_STEP
                g = []
                for s in (1.0, -1.0):
                    self.set_penalty(pen + s * h * J2[:, k], l1 + s * h * J1[:, k])
                    self.set_beta(at)
                    o = self.alo(gradient=True)
                    g.append((o.grad_l2, o.grad_l1))
                T2[:, k] = (g[0][0] - g[1][0]) / (2.0 * h)
                T1[:, k] = (g[0][1] - g[1][1]) / (2.0 * h)
        finally:
            self._probing = False
        self.set_penalty(pen, l1)
        self.set_beta(at)
        self.fit()
        return dataclasses.replace(out, tangent_l2=T2, tangent_l1=T1)

    def sample_gradient(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("method='sgd' is not available for dask input; use 'gd' or 'auto'")


def tune_state(problem: Any) -> DaskTuneState:
    """The tuning state of a problem of dask input (a scalar loss) for
    :func:`aloocv.tune`: its first pass made (y, w, offset read and checked once)."""
    data = Data.from_problem(problem)
    if data.n < 2:
        raise ValueError(f"leave-one-out needs at least 2 samples, got n_samples={data.n}")
    _first_pass(data)
    return DaskTuneState(data, problem.options.tol, problem.options.max_iter)


def _arrays(data: Data, outs: list) -> dict:
    """The per-sample fields of a state's output on the chunk outputs ``outs`` (lazy or
    persisted), as dask arrays with X's row chunks."""
    return {k: _per_sample(outs, data, k) for k in ("losses", "predictions", "leverages")}
