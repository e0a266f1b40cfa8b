"""ALOOCV as a function of the log-penalty, with its exact derivatives
(``docs/math/hypergradient.md``).

The variable is ``u = log(penalty.params())``: tuning in log space keeps every lambda
positive and makes the curve well scaled. Derivatives are those of the quantity that is
reported (``loo(...).mean``), from the core's reverse-mode hypergradient and its
forward-over-reverse directional derivatives:

    dACV/du_k      = x_k g_k,                          x = exp(u), g = dACV/dparams
    d2ACV/du_k du_l = x_k x_l Hp_kl + [k == l] x_k g_k,  Hp = J1^T T1 + J2^T T2

where ``J1, J2`` map the parameters to the per-feature l1/l2 weights
(:meth:`aloocv.penalties.Penalty.jacobian`) and ``T1, T2`` are the derivatives of the
per-feature gradient along the columns of ``J1, J2``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from .. import _blas, _core
from .._stats import weighted_stderr
from ..penalties import Penalty
from ..results import StateOutput

__all__ = ["Evaluation", "Objective", "StateOutput"]

CACHE_SIZE = 4  # evaluations kept (each holds per-sample arrays: keep few)
START_POINTS = 64  # fitted coefficients kept as warm starts (p + 1 numbers each)
RESTART_GAIN = 1.0  # restart from a kept point that is this much nearer (in log lambda)


#: What a tuning state's ``alo`` / ``alo_tangents`` return.
AloOutput = Union[_core.LooResult, StateOutput]


@dataclass(eq=False)
class Evaluation:
    """ALOOCV and its derivatives at one point ``u = log(params)``.

    Attributes
    ----------
    u : ndarray of shape (m,)
    acv, stderr : float
        The ALO estimate (``loo(...).mean``) and its standard error.
    grad : ndarray of shape (m,) or None
        ``d acv / d u`` (exact).
    hess : ndarray of shape (m, m) or None
        ``d^2 acv / du du^T`` (exact).
    out : aloocv._core.LooResult or StateOutput
        The state's fit and per-sample leave-one-out arrays.
    """

    u: np.ndarray
    acv: float
    grad: np.ndarray | None
    hess: np.ndarray | None
    out: AloOutput
    weights: np.ndarray | None = None

    @property
    def stderr(self) -> float:
        """Standard error of :attr:`acv` (computed on first use)."""
        se = self.__dict__.get("_stderr")
        if se is None and isinstance(self.out, StateOutput):
            se = self.out.stderr  # reduced (dask input)
        if se is None:
            se = self.__dict__["_stderr"] = weighted_stderr(self.out.losses, self.weights)
        return se

    @property
    def order(self) -> int:
        return 2 if self.hess is not None else (1 if self.grad is not None else 0)


class Objective:
    """ALOOCV at ``u = log(params)`` over one fit kept alive in the core.

    Each new point refits warm-started from the previous one (Newton from the previous
    point's Hessian); the evaluations are cached by point, so optimizers that ask for the
    value, the gradient and the Hessian separately pay for one fit. The core state keeps
    a copy of the best point's fitted state: coming back to that point, or to a point
    next to it, starts from the copy and its factor (no refit there, no fresh Hessian).

    Parameters
    ----------
    state : aloocv._core.TuneState
    penalty : Penalty
        The structure being tuned (its parameter values are the starting point).
    sample_weight : ndarray or None
        Weights of the mean.
    n_features : int
    gradient : {"exact", "paper"}
        The gradient of first-order methods: exact, or the paper's eq. 14-16.
    fit_intercept : bool
        Whether the state's fit has an intercept (the layout of its coefficients).
    """

    def __init__(
        self,
        state: Any,
        penalty: Penalty,
        sample_weight: np.ndarray | None,
        n_features: int,
        gradient: str = "exact",
        fit_intercept: bool = True,
    ):
        self.state = state
        self.template = penalty
        self.w = sample_weight
        self.p = n_features
        self.gradient_kind = gradient
        self.intercept = fit_intercept
        self.n_fits = 0
        self._cache: dict[bytes, Evaluation] = {}
        self._jacobian: tuple[np.ndarray, np.ndarray] | None = None
        self._starts: list[tuple[np.ndarray, np.ndarray]] = []  # (u, beta) of fits
        self._at: np.ndarray | None = None  # where the state's fit is
        # The best point so far, whose fitted state (with the factor of its Hessian) the
        # core state keeps a copy of (core TuneState only): a search that comes back to
        # it, or to its neighbourhood, starts from that copy instead of refitting.
        self._kept: np.ndarray | None = None
        self._kept_acv = np.inf
        self._can_keep = hasattr(state, "keep")

    @property
    def n_params(self) -> int:
        return self.template.params().size

    def penalty_at(self, u: np.ndarray) -> Penalty:
        return self.template.with_params(np.exp(np.asarray(u, dtype=np.float64)), check=False)

    def set(self, pen: Penalty) -> None:
        self._at = None  # the state's fit moves away from the last evaluation's point
        self.state.set_penalty(pen.l2_vector(self.p), pen.l1_vector(self.p))

    def evaluate(self, u: np.ndarray, order: int = 1) -> Evaluation:
        """ACV at ``u`` with derivatives up to ``order`` (0, 1 or 2).

        Raises ValueError where the fit is not defined (e.g. a singular Hessian as
        lambda -> 0).
        """
        u = np.array(u, dtype=np.float64, ndmin=1)
        key = u.tobytes()
        hit = self._cache.get(key)
        if hit is not None and hit.order >= order:
            return hit
        pen = self.penalty_at(u)
        # the state's fit is at u already (a lower order was asked there last): its fit
        # and factor serve again, no refit
        at, self._at = self._at, None  # unknown until this evaluation succeeds
        here = at is not None and np.array_equal(at, u)
        if not here and self._restore(u, at):
            at = self._kept
            here = bool(np.array_equal(at, u))
        if not here:
            self.set(pen)
            self._warm_start(u, at)
        with _blas.single_threaded_blas():
            if not here:
                self.state.fit()
                self.n_fits += 1  # a warm refit
            if order >= 2:
                J1, J2 = self._jac()
                out = self.state.alo_tangents(np.asfortranarray(J2), np.asfortranarray(J1))
            elif order == 1 and self._along():
                # one parameter: the exact gradient along its column of the Jacobian, in
                # the leverage pass (docs/math/hypergradient.md, "One direction")
                J1, J2 = self._jac()
                out = self.state.alo(gradient=True, along_l2=J2[:, 0], along_l1=J1[:, 0])
            else:
                out = self.state.alo(gradient=order >= 1, gradient_kind=self.gradient_kind)
        self._remember(u, out)
        if isinstance(out, StateOutput) and out.acv is not None:
            acv = float(out.acv)  # reduced where the per-sample values live (dask input)
        else:
            losses = out.losses
            if self.w is not None:
                acv = float(losses @ self.w / self.w.sum())
            else:  # ndarray.mean's value without its Python wrapper
                acv = float(np.add.reduce(losses)) / losses.shape[0]
        x = np.exp(u)
        grad = hess = None
        if order >= 1:
            along = getattr(out, "grad_along", None)
            g = np.array([along]) if along is not None else pen.chain(out.grad_l1, out.grad_l2)
            grad = g * x
            if order >= 2:
                J1, J2 = self._jac()
                Hp = J1.T @ out.tangent_l1 + J2.T @ out.tangent_l2
                Hp = 0.5 * (Hp + Hp.T)
                hess = Hp * np.outer(x, x) + np.diag(grad)
        ev = Evaluation(u, acv, grad, hess, out, self.w)
        if self._can_keep and acv < self._kept_acv:  # a new best point: its state kept
            self.state.keep()
            self._kept, self._kept_acv = u.copy(), acv
        self.keep(ev)
        return ev

    def held(self, out: Any) -> Any:
        """An evaluation's output as the search's result keeps it: with its per-sample
        arrays held by the workers where the state holds them (dask input on a
        distributed client: the best point's, :mod:`aloocv.backends.dask.held`); ``out``
        itself otherwise."""
        hold = getattr(self.state, "held_output", None)
        return out if hold is None else hold(out)

    def keep(self, ev: Evaluation) -> None:
        """Puts an evaluation made here back among the cached ones (a grid's selected
        point: the final result then reuses it instead of refitting there)."""
        key = np.array(ev.u, dtype=np.float64, ndmin=1).tobytes()
        self._cache.pop(key, None)
        self._cache[key] = ev
        while len(self._cache) > CACHE_SIZE:
            del self._cache[next(iter(self._cache))]

    def _restore(self, u: np.ndarray, at: np.ndarray | None) -> bool:
        """Returns the state to its kept copy (the best point so far) when that is ``u``
        itself, or the nearest fitted point to ``u`` and much nearer than the state's at
        ``at``: its factor then serves ALO there without a refit, or the chord steps of
        the refit at ``u`` (a warm start by :meth:`_warm_start` refits from coefficients
        alone and takes its Hessians anew)."""
        if self._kept is None:
            return False
        dk = float(np.max(np.abs(self._kept - u)))
        if dk > 0.0:
            here = np.inf if at is None else float(np.max(np.abs(at - u)))
            nearest = min(float(np.max(np.abs(v - u))) for v, _ in self._starts)
            if dk + RESTART_GAIN >= here or dk > nearest:
                return False
        return bool(self.state.restore())

    def _warm_start(self, u: np.ndarray, at: np.ndarray | None) -> None:
        """Restart from the kept fit nearest to u when it is much nearer than the state's
        at ``at`` (e.g. a search going back to the best point of its bracketing grid; None:
        the state's point is unknown, after a failed fit)."""
        if not self._starts:
            return
        here = np.inf if at is None else float(np.max(np.abs(at - u)))
        if here <= RESTART_GAIN:  # the usual case: the next point is near the last one
            return
        us = np.array([v for v, _ in self._starts])
        du = np.max(np.abs(us - u), axis=1)
        k = int(np.argmin(du))
        if du[k] + RESTART_GAIN < here:
            self.state.set_beta(self._starts[k][1])

    def _remember(self, u: np.ndarray, out: AloOutput) -> None:
        if isinstance(out, StateOutput) and out.beta is not None:
            beta = out.beta  # states that give their coefficients' layout (multinomial)
        else:
            coef = np.asarray(out.coef, dtype=np.float64).ravel()
            beta = np.concatenate([[float(out.intercept)], coef]) if self.intercept else coef
        self._starts.append((u.copy(), beta))
        del self._starts[:-START_POINTS]
        self._at = u.copy()

    def value(self, u: np.ndarray) -> float:
        return self.evaluate(u, 0).acv

    def _along(self) -> bool:
        """Whether first derivatives come as one directional derivative: one parameter,
        the exact gradient, a core tuning state (the others give the per-feature one)."""
        return (
            self.n_params == 1
            and self.gradient_kind == "exact"
            and isinstance(self.state, _core.TuneState)
        )

    def _jac(self) -> tuple[np.ndarray, np.ndarray]:
        if self._jacobian is None:
            self._jacobian = self.template.jacobian(self.p)
        return self._jacobian
