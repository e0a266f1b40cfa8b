"""Optimizers over ``u = log(lambda)``.

Each takes an :class:`~aloocv.tuning.objective.Objective` (or, for :class:`Adam`, plain
gradients) and reports whether its stopping test really passed: ``converged`` is True only
when the (projected) gradient in ``log(lambda)`` is at most ``gtol``.

- :func:`newton_1d`: one parameter; Newton steps with the exact second derivative from
  the best point of a bracketing triplet (``f(lo) >= f(mid) <= f(hi)``), bisection of
  the side the derivative points to when a Newton step leaves it.
- :func:`trust_newton`: a few parameters; box-constrained trust-region Newton on the exact
  gradient and Hessian.
- :func:`lbfgsb`: many parameters; scipy's L-BFGS-B on the exact gradient, in a box.
- :func:`armijo`: gradient descent with backtracking and Barzilai-Borwein trial steps
  (the paper's Algorithm 1 with a line search).
- :class:`Adam`: the Adam update (Algorithm 1/2 with Adam steps, and the BKK estimators).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.optimize

from .objective import Evaluation, Objective

__all__ = [
    "LOG_BOUND",
    "Adam",
    "OptimizeResult",
    "armijo",
    "lbfgsb",
    "newton_1d",
    "projected_gradient",
    "trust_newton",
]

LOG_BOUND = 50.0  # |log lambda| beyond this is divergence
MAX_LOG_STEP = 2.0  # longest step in log(lambda) of a Newton iteration on an open side
ARMIJO_C = 1e-4  # sufficient-decrease constant of the backtracking line search


@dataclass
class OptimizeResult:
    """Where an optimizer stopped.

    Attributes
    ----------
    u : ndarray
        The best point (log parameters).
    evaluation : Evaluation
        ACV and derivatives there.
    n_iter : int
    converged : bool
        The (projected) gradient is below the tolerance at ``u``.
    message : str
        Why it stopped.
    trace : list of Evaluation
        The points evaluated, in order (for :func:`armijo`, the accepted iterates).
    """

    u: np.ndarray
    evaluation: Evaluation
    n_iter: int
    converged: bool
    message: str
    trace: list[Evaluation] = field(default_factory=list)


def projected_gradient(g: np.ndarray, u: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The gradient with the components that push out of the box [lo, hi] removed."""
    pg = np.array(g, dtype=float)
    pg[(u <= lo) & (g > 0)] = 0.0
    pg[(u >= hi) & (g < 0)] = 0.0
    return pg


def _converged_message(u, lo, hi) -> str:
    at = np.flatnonzero((u <= lo) | (u >= hi))
    if at.size:
        return (
            f"projected gradient below tolerance; parameters {at.tolist()} at the search "
            "box's bound"
        )
    return "gradient below tolerance"


class Trace(list):
    """The evaluations of a search, in order, each once; ``hook(ev)`` sees each as it comes
    (history, callbacks and progress bars during the search, not after it)."""

    def __init__(self, hook: Callable[[Evaluation], None] | None = None):
        super().__init__()
        self.hook = hook

    def add(self, ev: Evaluation) -> None:
        if self and self[-1] is ev:
            return
        self.append(ev)
        if self.hook is not None:
            self.hook(ev)


def _try(obj: Objective, u: np.ndarray, order: int, trace: Trace | None) -> Evaluation | None:
    """Evaluate, or None where the fit is not defined there (e.g. a singular Hessian)."""
    try:
        ev = obj.evaluate(u, order)
    except ValueError:
        return None
    if not np.isfinite(ev.acv):
        return None
    if trace is not None:
        trace.add(ev)
    return ev


def newton_1d(
    obj: Objective,
    lo: float,
    mid: float,
    hi: float,
    *,
    gtol: float,
    max_iter: int = 50,
    bounds: tuple[float, float] = (-LOG_BOUND, LOG_BOUND),
    trace: Trace | None = None,
) -> OptimizeResult:
    """Minimize a one-parameter ACV on the bracket ``lo <= mid <= hi``.

    ``f(mid)`` should not exceed ``f(lo)`` and ``f(hi)`` (``lo``/``hi`` may be
    ``-inf``/``inf``: the side is open up to ``bounds``). Every iteration is one warm
    fit with the exact first and second derivatives.
    """
    trace = Trace() if trace is None else trace
    blo, bhi = bounds
    lo, hi = max(lo, blo), min(hi, bhi)
    best = _try(obj, np.array([mid]), 2, trace)
    if best is None:
        raise ValueError(f"ACV is not defined at the starting point lambda = {np.exp(mid):.4g}")
    m = mid
    it = 0
    tried: set[float] = set()
    message = f"max_iter={max_iter} reached"
    for it in range(1, max_iter + 1):
        g, h = float(best.grad[0]), float(best.hess[0, 0])
        pg = projected_gradient(np.array([g]), np.array([m]), np.array([blo]), np.array([bhi]))
        if abs(pg[0]) <= gtol:
            msg = _converged_message(np.array([m]), np.array([blo]), np.array([bhi]))
            return OptimizeResult(np.array([m]), best, it - 1, True, msg, trace)
        # the minimum lies on the side the derivative points away from
        side_lo, side_hi = (lo, m) if g > 0 else (m, hi)
        if side_hi - side_lo <= 1e-12 * max(1.0, abs(m)):
            message = "bracket collapsed before the gradient fell below tolerance"
            break
        u_new = m - g / h if h > 0 else np.nan
        far = side_lo if g > 0 else side_hi
        if not (side_lo < u_new < side_hi) or abs(u_new - m) > MAX_LOG_STEP:
            if far in (blo, bhi) and far not in tried and abs(far - m) <= MAX_LOG_STEP:
                u_new = far  # the box's end, once: the minimum may sit on it
                tried.add(far)
            else:  # bisect the side, or a capped step towards an open side
                u_new = 0.5 * (m + far)
                if abs(u_new - m) > MAX_LOG_STEP:
                    u_new = m - np.sign(g) * MAX_LOG_STEP
        ev = _try(obj, np.array([u_new]), 2, trace)
        if ev is not None and ev.acv <= best.acv:
            # new best: the old mid becomes the bracket end on its side
            if u_new > m:
                lo = m
            else:
                hi = m
            m, best = u_new, ev
        elif u_new > m:
            hi = u_new
        else:
            lo = u_new
    pg = projected_gradient(best.grad, np.array([m]), np.array([blo]), np.array([bhi]))
    if abs(pg[0]) <= gtol:
        msg = _converged_message(np.array([m]), np.array([blo]), np.array([bhi]))
        return OptimizeResult(np.array([m]), best, it, True, msg, trace)
    return OptimizeResult(np.array([m]), best, it, False, message, trace)


def _box(n: int, bounds) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = bounds
    return np.broadcast_to(np.asarray(lo, float), (n,)).copy(), np.broadcast_to(
        np.asarray(hi, float), (n,)
    ).copy()


def _scipy_objective(obj: Objective, order: int, trace: list, lo, hi, u0):
    # a finite wall outside the box and where the fit fails: the step is rejected
    big = 1e6 * (1.0 + abs(obj.evaluate(u0, order).acv))

    def fun(u):
        if np.any(u < lo - 1e-12) or np.any(u > hi + 1e-12):
            return big
        ev = _try(obj, u, order, trace)
        return big if ev is None else ev.acv

    def outside(u):
        return bool(np.any(u < lo - 1e-12) or np.any(u > hi + 1e-12))

    def jac(u):
        ev = None if outside(u) else _try(obj, u, max(order, 1), trace)
        return np.zeros_like(u) if ev is None else ev.grad

    def hess(u):
        ev = None if outside(u) else _try(obj, u, 2, trace)
        return np.eye(u.size) if ev is None else ev.hess

    return fun, jac, hess


def _finish_scipy(obj, res, trace, gtol, lo, hi, order) -> OptimizeResult:
    ok = [ev for ev in trace if ev.grad is not None]
    if not ok:
        raise ValueError("ACV is not defined at the starting point")
    best = min(ok, key=lambda ev: ev.acv)
    pg = projected_gradient(best.grad, best.u, lo, hi)
    conv = bool(np.max(np.abs(pg)) <= gtol)
    msg = _converged_message(best.u, lo, hi) if conv else f"stopped: {res.message}"
    return OptimizeResult(best.u.copy(), best, int(res.nit), conv, msg, trace)


def trust_newton(
    obj: Objective,
    u0: np.ndarray,
    *,
    gtol: float,
    max_iter: int = 100,
    bounds=(-LOG_BOUND, LOG_BOUND),
    trace: Trace | None = None,
) -> OptimizeResult:
    """Box-constrained trust-region Newton with the exact Hessian in log(lambda).

    For a few parameters. Parameters at a bound whose gradient points out of the box are
    held there; the others take the Newton step of the Hessian shifted to be positive
    definite (Levenberg-Marquardt), limited to the trust radius (in the max norm) and
    projected on the box; a step is accepted when ACV decreases by at least a fraction of
    the model's prediction. Each iteration costs one warm fit and about five passes over X
    per parameter.
    """
    trace = Trace() if trace is None else trace
    lo, hi = _box(np.size(u0), bounds)
    u = np.clip(np.asarray(u0, float), lo, hi)
    ev = _try(obj, u, 2, trace)
    if ev is None:
        raise ValueError("ACV is not defined at the starting point")
    radius = 1.0
    it = 0
    message = f"max_iter={max_iter} reached"
    for it in range(1, max_iter + 1):
        g, H = ev.grad, ev.hess
        pg = projected_gradient(g, u, lo, hi)
        if np.max(np.abs(pg)) <= gtol:
            return OptimizeResult(u, ev, it - 1, True, _converged_message(u, lo, hi), trace)
        free = ~(((u <= lo) & (g > 0)) | ((u >= hi) & (g < 0)))
        Hf = H[np.ix_(free, free)]
        w, V = np.linalg.eigh(Hf)
        floor = 1e-10 * max(np.max(np.abs(w)), 1e-300)
        w = np.where(w > floor, w, np.maximum(np.abs(w), floor))  # Levenberg-Marquardt-like
        step = np.zeros_like(u)
        step[free] = -V @ ((V.T @ g[free]) / w)
        while True:
            d = step * min(1.0, radius / max(np.max(np.abs(step)), 1e-300))
            u_new = np.clip(u + d, lo, hi)
            d = u_new - u
            pred = -(g @ d + 0.5 * d @ H @ d)
            cand = _try(obj, u_new, 2, trace) if pred > 0 else None
            if cand is not None and ev.acv - cand.acv >= 1e-4 * pred:
                ratio = (ev.acv - cand.acv) / pred
                if ratio > 0.75 and np.max(np.abs(d)) >= 0.99 * radius:
                    radius = min(2.0 * radius, MAX_LOG_STEP * 4)
                elif ratio < 0.25:
                    radius *= 0.5
                u, ev = u_new, cand
                break
            radius *= 0.25
            if radius < 1e-12:
                msg = "the trust region collapsed: no step decreases ACV"
                return OptimizeResult(u, ev, it, False, msg, trace)
    pg = projected_gradient(ev.grad, u, lo, hi)
    conv = bool(np.max(np.abs(pg)) <= gtol)
    return OptimizeResult(
        u, ev, it, conv, _converged_message(u, lo, hi) if conv else message, trace
    )


def lbfgsb(
    obj: Objective,
    u0: np.ndarray,
    *,
    gtol: float,
    max_iter: int = 200,
    bounds=(-LOG_BOUND, LOG_BOUND),
    trace: Trace | None = None,
) -> OptimizeResult:
    """L-BFGS-B on the exact gradient in log(lambda), in the box ``bounds``.

    For many parameters (per-feature penalties): one fit and about three passes over X
    per evaluation, whatever the number of parameters.
    """
    trace = Trace() if trace is None else trace
    lo, hi = _box(np.size(u0), bounds)
    fun, jac, _ = _scipy_objective(obj, 1, trace, lo, hi, np.clip(np.asarray(u0, float), lo, hi))
    res = scipy.optimize.minimize(
        fun,
        np.clip(np.asarray(u0, float), lo, hi),
        jac=jac,
        method="L-BFGS-B",
        bounds=list(zip(lo, hi)),
        options={"gtol": gtol, "maxiter": int(max_iter), "ftol": 0.0, "maxfun": 4 * max_iter},
    )
    return _finish_scipy(obj, res, trace, gtol, lo, hi, 1)


def armijo(
    obj: Objective,
    u0: np.ndarray,
    *,
    gtol: float,
    max_iter: int = 100,
    trace: Trace | None = None,
) -> OptimizeResult:
    """Gradient descent with backtracking (Armijo) and Barzilai-Borwein trial steps.

    Stops when the gradient is at most ``gtol`` (converged), or when no step of at least
    ``1e-10`` in log(lambda) decreases ACV (not converged: the gradient is not small).
    """
    trace = Trace() if trace is None else trace
    u = np.asarray(u0, float).copy()
    ev = _try(obj, u, 1, trace)
    if ev is None:
        raise ValueError("ACV is not defined at the starting point")
    alpha = 1.0 / max(np.max(np.abs(ev.grad)), 1e-12)  # first trial: a factor e
    it = 0
    for it in range(1, max_iter + 1):
        g = ev.grad
        if np.max(np.abs(g)) <= gtol:
            return OptimizeResult(u, ev, it - 1, True, "gradient below tolerance", trace)
        gg = float(g @ g)
        gmax = float(np.max(np.abs(g)))
        new = None
        while alpha * gmax > 1e-10:
            u_try = u - alpha * g
            if np.max(np.abs(u_try)) <= LOG_BOUND:
                cand = _try(obj, u_try, 1, None)  # trials; the trace keeps the iterates
                if cand is not None and cand.acv <= ev.acv - ARMIJO_C * alpha * gg:
                    new = cand
                    break
            alpha *= 0.5
        if new is None:
            return OptimizeResult(
                u, ev, it, False, "line search found no decrease along the gradient", trace
            )
        # Barzilai-Borwein trial step (a secant step) when the curvature is positive,
        # else a doubled step; at most a factor e^2 on any lambda
        du_, dg_ = new.u - u, new.grad - g
        curv = float(du_ @ dg_)
        alpha = float(du_ @ du_) / curv if curv > 0 else 2.0 * alpha
        alpha = min(alpha, 2.0 / max(np.max(np.abs(new.grad)), 1e-300))
        u, ev = new.u.copy(), new
        trace.add(ev)
    conv = bool(np.max(np.abs(ev.grad)) <= gtol)
    msg = "gradient below tolerance" if conv else f"max_iter={max_iter} reached"
    return OptimizeResult(u, ev, it, conv, msg, trace)


class Adam:
    """The Adam update (Kingma & Ba): ``step(grad)`` returns the change to subtract.

    Parameters
    ----------
    learning_rate, beta1, beta2, eps : float
    """

    def __init__(
        self, learning_rate: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8
    ):
        self.lr, self.beta1, self.beta2, self.eps = learning_rate, beta1, beta2, eps
        self.m: np.ndarray | None = None
        self.v: np.ndarray | None = None
        self.t = 0

    def step(self, grad: np.ndarray) -> np.ndarray:
        grad = np.asarray(grad, dtype=float)
        if self.m is None:
            self.m = np.zeros_like(grad)
            self.v = np.zeros_like(grad)
        self.t += 1
        self.m = self.beta1 * self.m + (1 - self.beta1) * grad
        self.v = self.beta2 * self.v + (1 - self.beta2) * grad * grad
        mh = self.m / (1 - self.beta1**self.t)
        vh = self.v / (1 - self.beta2**self.t)
        return self.lr * mh / (np.sqrt(vh) + self.eps)
