"""The tuning state of the multinomial loss on dask input."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..._validation import check_loo_samples
from ...results import StateOutput
from ..common import TANGENT_LOG_STEP
from .alo import _stderr
from .data import Data, _client
from .held import BestHeld
from .loo_multinomial import _alo_pass, _check_finite, _hypergradient
from .multinomial import first_pass, newton
from .passes import _per_sample


class DaskMultinomialTuneState:
    """Stands in for :class:`aloocv.backends.memory.multinomial.MultinomialTuneState` in
    :class:`aloocv.tuning.Objective` on dask input (grid searches): per point a fit over
    the chunks warm-started at the previous one (as in memory), then the ALO pass. Per
    evaluated point only O((K p1)^2) floats reach the client (the fit, the ALO mean and
    its standard error and the hypergradient's accumulations, summed on the workers);
    the per-sample values (n losses, n K predictions, n K^2 leverages) stay dask arrays
    aligned with X's row chunks: lazy, and on a distributed client held by the workers
    for the best point evaluated so far only (:mod:`.held`)."""

    def __init__(self, data: Data, first: dict, tol: float, max_iter: int):
        self.data, self.first = data, first
        self.K = first["K"]
        self.tol, self.max_iter = tol, max_iter
        self.beta: np.ndarray | None = None
        self.best = BestHeld()
        self._probing = False  # alo_tangents' side points: never held as the best

    def set_penalty(self, l2: np.ndarray, l1: np.ndarray | None = None) -> None:
        self.data.pen = np.ascontiguousarray(l2, dtype=np.float64)

    def set_beta(self, beta: np.ndarray) -> None:
        self.beta = np.array(beta, dtype=np.float64)

    def fit(self) -> None:
        """Nothing: :meth:`alo` fits and evaluates (as the in-memory state)."""

    def held_output(self, out: StateOutput) -> StateOutput:
        """``out`` with its per-sample arrays held by the workers where it is the best
        point's (:meth:`BestHeld.output`)."""
        return self.best.output(out)

    def alo(self, *, gradient: bool = True, gradient_kind: str = "exact") -> StateOutput:

        data, K = self.data, self.K
        st = newton(data, self.first, self.tol, self.max_iter, self.beta, fresh_end=True)
        self.beta = st.beta.copy()
        hold = _client() is not None and not self._probing
        outs, red = _alo_pass(data, st, K, "alo", "best" if hold else "lazy", gradient)
        lazy, held = outs if hold else (outs, None)
        _check_finite(red, "loo(method='alo')")
        grad = _hypergradient(data, st, K, red["S"]) if gradient else np.zeros(data.p)
        B = st.beta.reshape(K, data.p1)
        off = int(data.fit_intercept)
        out = StateOutput(
            **_arrays(data, lazy, K),
            det=_per_sample(lazy, data, "downdate", ()),
            acv=float(red["stats"][1]),
            stderr=_stderr(red["stats"], data.n),
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
        if held is not None:
            self.best.offer(out.acv, out, lambda: _arrays(data, held, K))
        return out

    def alo_tangents(self, J2: np.ndarray, J1: np.ndarray) -> StateOutput:
        """As the in-memory state: central differences of the exact gradient, step
        TANGENT_LOG_STEP in the log of each parameter, both fits from the current one."""

        out = self.alo(gradient=True)
        at, pen = self.beta, self.data.pen.copy()
        self._probing = True
        try:
            T2 = self._tangents(J2, at, pen)
        finally:
            self._probing = False
        self.set_penalty(pen)
        self.beta = at
        return dataclasses.replace(out, tangent_l2=T2, tangent_l1=np.zeros_like(T2))

    def _tangents(self, J2: np.ndarray, at: np.ndarray, pen: np.ndarray) -> np.ndarray:
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
        return T2


def _arrays(data: Data, outs: list, K: int) -> dict:
    """The per-sample fields of a state's output on the chunk outputs ``outs`` (lazy or
    persisted), as dask arrays with X's row chunks."""
    return {
        "losses": _per_sample(outs, data, "losses", ()),
        "predictions": _per_sample(outs, data, "predictions", (K,)),
        "leverages": _per_sample(outs, data, "leverages", (K, K)),
    }


def tune_state(problem: Any) -> DaskMultinomialTuneState:
    """The tuning state of a multinomial problem of dask input for :func:`aloocv.tune`:
    its labels and weights read and checked once."""
    data = Data.from_problem(problem)
    check_loo_samples(data.n)
    first = first_pass(data)
    return DaskMultinomialTuneState(data, first, problem.options.tol, problem.options.max_iter)
