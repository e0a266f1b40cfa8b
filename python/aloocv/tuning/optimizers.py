"""Optimizers over ``u = log(lambda)``.

Each takes an :class:`~aloocv.tuning.objective.Objective` (or, for :class:`Adam`, plain
gradients) and reports whether its stopping test really passed: ``converged`` is True only
when the (projected) gradient in ``log(lambda)`` is at most ``gtol``.

- :func:`bracketed_1d`: one parameter, from the values of a bracketing grid (the default
  search): parabolic steps on plain values (a fit and a leverage pass each) while they
  are long, then secant steps on the exact gradient (no Hessian) near the minimum.
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
    "bracketed_1d",
    "lbfgsb",
    "newton_1d",
    "projected_gradient",
    "trust_newton",
]

LOG_BOUND = 50.0  # |log lambda| beyond this is divergence
MAX_LOG_STEP = 2.0  # longest step in log(lambda) of a Newton iteration on an open side
ARMIJO_C = 1e-4  # sufficient-decrease constant of the backtracking line search

# The policy of :func:`bracketed_1d` (the default one-parameter search). An evaluation of
# the value alone costs a fit and one leverage pass over X; with the exact gradient a few
# passes more; with the exact second derivative several times that: the search spends
# the gradient only where a step is short, and never the second derivative.
#: The vertex of the bracket's parabola at most this far (in log lambda) from the best
#: point is taken with the exact gradient; farther, at the value alone (and the gradient
#: at the best point next where the vertex does not improve on it).
SLOPE_SWITCH = 2.0
#: The vertex is trusted only this close to the best point, as a share of the width of
#: the bracket's side it lies in (farther, it extrapolates the curve's asymmetry across
#: the coarse grid's spacing): the search takes the best point's slope first (no refit
#: where the objective kept that point's fitted state).
VERTEX_TRUST = 1.0 / 3.0
#: A model's step that lands within this share of its side's width from the side's far
#: end is replaced by the side's midpoint.
SIDE_MARGIN = 0.01
#: Two points closer than this (in log lambda) are one: the search stops there.
U_RESOLUTION = 1e-10
#: The best point's neighbours at most this many times as far from it as each other (in
#: log lambda) give the first step from its slope as a cubic through all three
#: (:func:`_bracket_cubic_step`).
CUBIC_SPREAD = 2.0


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


def _parabola_vertex(a, fa, b, fb, c, fc) -> float:
    """The vertex of the parabola through three points (nan when it is not convex)."""
    r = (b - a) * (fb - fc)
    q = (b - c) * (fb - fa)
    den = 2.0 * (q - r)
    if not (np.isfinite(den) and den != 0.0):
        return np.nan
    v = b - ((b - c) * q - (b - a) * r) / den
    # convex: the vertex is a minimum (second divided difference positive)
    curv = ((fc - fb) / (c - b) - (fb - fa) / (b - a)) / (c - a)
    return float(v) if curv > 0 else np.nan


def _gradient_target(
    m: float,
    g: float,
    lo: float,
    hi: float,
    vals: dict[float, float],
    evs: dict[float, Evaluation],
    steps: list[float],
    vertex: float | None = None,
) -> float | None:
    """:func:`bracketed_1d`'s next point from the best point ``m`` with its gradient
    ``g``: on the side the gradient points away from, the bracket's parabola's
    ``vertex`` where one waits for this slope and lies there, else a capped step towards
    the box's end where that side is open, else the model step (a bisection where there
    is none or the steps stop halving; its length appended to ``steps``). None: the
    bracket collapsed."""
    a, b = (lo, m) if g > 0 else (m, hi)
    far = a if g > 0 else b
    if b - a <= U_RESOLUTION * max(1.0, abs(m)):
        return None
    if vertex is not None and a < vertex < b:
        return float(vertex)
    if far not in vals:  # an open side: a capped step towards the box's end
        return float(far if abs(far - m) <= MAX_LOG_STEP else m + np.sign(far - m) * MAX_LOG_STEP)
    v = _model_step(m, a, b, far, vals, evs)
    if not np.isfinite(v) or (len(steps) > 1 and abs(v - m) > 0.5 * steps[-2]):
        v = 0.5 * (m + far)  # no model step, or steps that do not shrink
    steps.append(abs(v - m))
    return float(v)


def bracketed_1d(
    obj: Objective,
    known: list[tuple[float, float]],
    *,
    gtol: float,
    max_iter: int = 50,
    bounds: tuple[float, float] = (-LOG_BOUND, LOG_BOUND),
    trace: Trace | None = None,
) -> OptimizeResult:
    """Minimize a one-parameter ACV from the values ``known`` of a bracketing grid.

    ``known`` holds ``(u, ACV(u))`` pairs already evaluated (``inf`` where undefined); the
    bracket is the best point and its nearest known points (the box ``bounds`` where a
    side has none). Without a gradient at the best point, the next point is the vertex of
    the parabola through the bracket's values (in ``log(lambda)`` or ``lambda``, whichever
    predicts the values it leaves out better), with the gradient within ``SLOPE_SWITCH``
    of the best point. A vertex farther than ``VERTEX_TRUST`` of its side's width from
    the best point waits for the gradient there (no refit where the objective kept that
    point's state): the vertex is then taken where it lies on the side the slope points
    to, else the cubic through the slope and both neighbours' values. With gradients,
    each step is the minimum of a cubic through two points' values and slopes; the
    gradients' signs then shrink the bracket, a step that does not halve (Brent) or
    leaves the bracket is a bisection. Converged when the projected gradient is at most
    ``gtol``; the Hessian is never formed.
    """
    trace = Trace() if trace is None else trace
    blo, bhi = bounds
    vals: dict[float, float] = {}  # u -> ACV (inf where undefined)
    evs: dict[float, Evaluation] = {}  # u -> the evaluation with its gradient
    for u, f in known:
        if blo <= u <= bhi:
            vals[float(u)] = float(f) if np.isfinite(f) else np.inf
    finite = [u for u in vals if np.isfinite(vals[u])]
    if not finite:
        raise ValueError("ACV is not defined at any point of the bracket")
    m = min(finite, key=lambda u: (vals[u], -u))  # ties: the more regularized point
    lo = max((u for u in vals if u < m), default=blo)
    hi = min((u for u in vals if u > m), default=bhi)

    def take(u: float, order: int) -> bool:
        """Evaluate at u (on the box's end when within resolution of it); True when u
        becomes the best point."""
        nonlocal m, lo, hi
        for end in (blo, bhi):
            if abs(u - end) <= U_RESOLUTION * max(1.0, abs(end)):
                u = end
        ev = _try(obj, np.array([u]), order, trace)
        if ev is None and u == m:
            raise _Undefined(u)
        vals[u] = np.inf if ev is None else ev.acv
        if ev is not None and order >= 1:
            evs[u] = ev
        if u == m:
            return False
        if ev is not None and order >= 1 and m in evs:
            # from a point with its gradient on: the gradients' signs bracket the minimum
            # and the new point is the iterate (values, which can jump by more than the
            # gradient's tolerance moves them, decide nothing here)
            if slope(m) < 0:
                lo = max(lo, m)
            else:
                hi = min(hi, m)
            m = u
            return True
        if vals[u] < vals[m]:
            lo, hi = (m, hi) if u > m else (lo, m)
            m = u
            return True
        if u > m:
            hi = u
        else:
            lo = u
        return False

    def slope(u: float) -> float:
        return float(evs[u].grad[0])

    it = 0
    message = f"max_iter={max_iter} reached"
    steps: list[float] = []  # the lengths of the gradient steps (Brent's shrink rule)
    vertex: float | None = None  # an untrusted vertex, taken where the slope agrees
    try:
        for it in range(1, max_iter + 1):
            if m in evs:
                g = slope(m)
                um = np.array([m])
                pg = projected_gradient(np.array([g]), um, np.array([blo]), np.array([bhi]))
                if abs(pg[0]) <= gtol:
                    msg = _converged_message(um, np.array([blo]), np.array([bhi]))
                    return OptimizeResult(um, evs[m], it - 1, True, msg, trace)
                v = _gradient_target(m, g, lo, hi, vals, evs, steps, vertex)
                vertex = None
                if v is None:
                    message = "bracket collapsed before the gradient fell below tolerance"
                    break
                take(v, 1)
                continue
            if lo not in vals or hi not in vals:
                # an open side: step outwards by the known spacing (the gradient where no
                # neighbour is known, or where the best point sits on the box's end)
                open_end = lo if lo not in vals else hi
                known_end = hi if lo not in vals else lo
                step = abs(known_end - m) if known_end in vals else 0.0
                if abs(open_end - m) <= U_RESOLUTION or step <= U_RESOLUTION:
                    take(m, 1)
                elif step >= abs(open_end - m):
                    take(open_end, 0)  # the box's end itself
                else:
                    take(float(m + np.sign(open_end - m) * step), 0)
                continue
            v = _value_step(lo, m, hi, vals) if lo < m < hi else np.nan
            usable = bool(np.isfinite(v)) and lo < v < hi and abs(v - m) > U_RESOLUTION
            if not usable or evs:  # (a gradient taken elsewhere: the best point's next)
                take(m, 1)
                continue
            if abs(v - m) > VERTEX_TRUST * ((hi - m) if v > m else (m - lo)):
                take(m, 1)  # the side from the slope first (the vertex waits for it)
                vertex = float(v)
            elif abs(v - m) <= SLOPE_SWITCH:
                take(float(v), 1)
            elif not take(float(v), 0):
                take(m, 1)  # the parabola misled: the gradient at the best point
    except _Undefined as exc:  # a value there, but not its gradient
        message = f"the gradient of ACV is not defined at log(lambda) = {exc.u:.6g}"
    if not evs:
        raise ValueError(f"no gradient of ACV near the bracket's best point: {message}")

    def stationarity(w: float) -> float:
        pgw = projected_gradient(evs[w].grad, np.array([w]), np.array([blo]), np.array([bhi]))
        return abs(float(pgw[0]))

    u = min(evs, key=stationarity)  # the most nearly stationary point
    pg = projected_gradient(evs[u].grad, np.array([u]), np.array([blo]), np.array([bhi]))
    conv = bool(abs(pg[0]) <= gtol)
    msg = _converged_message(np.array([u]), np.array([blo]), np.array([bhi])) if conv else message
    return OptimizeResult(np.array([u]), evs[u], it, conv, msg, trace)


class _Undefined(Exception):
    """The fit failed at the best point itself (its value was defined)."""

    def __init__(self, u: float):
        super().__init__(u)
        self.u = u


def _value_step(lo: float, m: float, hi: float, vals: dict) -> float:
    """The vertex of the parabola through the bracket's three values, in ``log(lambda)``
    or in ``lambda``, whichever predicts the nearest known values it leaves out (one on
    each side) better (nan where neither is convex)."""
    left = [u for u in vals if u < lo and np.isfinite(vals[u])]
    right = [u for u in vals if u > hi and np.isfinite(vals[u])]
    tests = ([max(left)] if left else []) + ([min(right)] if right else [])
    best, best_err = np.nan, np.inf
    for to_x, to_u, _ in MODEL_COORDINATES:
        x = [to_x(u) for u in (lo, m, hi)]
        f = [vals[u] for u in (lo, m, hi)]
        if not x[0] < x[1] < x[2]:  # (lambda under- or overflows at the box's ends)
            continue
        xv = _parabola_vertex(x[0], f[0], x[1], f[1], x[2], f[2])
        v = to_u(xv) if np.isfinite(xv) else np.nan
        err = 0.0
        for test in tests:  # the parabola's values at the left-out points (Lagrange form)
            t = to_x(test)
            err += abs(
                sum(
                    f[i] * np.prod([(t - x[j]) / (x[i] - x[j]) for j in range(3) if j != i])
                    for i in range(3)
                )
                - vals[test]
            )
        if np.isfinite(v) and err < best_err:
            best, best_err = float(v), err
    return best


def _model_step(m: float, a: float, b: float, far: float, vals: dict, evs: dict) -> float:
    """The next trial point from the best point ``m`` (with its gradient) in the side
    ``(a, b)`` of the bracket the gradient points away from (``far``: its other end): the
    minimum of the model through m's value and slope and another point's value (and
    slope, where known), in ``log(lambda)`` or in ``lambda``, whichever predicts the
    nearest known value the model leaves out better. The other point is the nearest one
    with a gradient (a secant-like step), else the nearest one in the side; nan where no
    model has a minimum in the side away from its far end."""
    grads = {u: float(ev.grad[0]) for u, ev in evs.items()}
    others = [u for u in vals if u != m and np.isfinite(vals[u])]
    side = [u for u in others if (u - m) * (far - m) > 0 and abs(u - m) <= abs(far - m)]
    with_grad = [u for u in others if u in grads]
    if not with_grad:  # m's slope alone: the cubic through it and both neighbours' values
        v = _bracket_cubic_step(m, a, b, vals, grads[m], others)
        if np.isfinite(v) and abs(v - far) > SIDE_MARGIN * (b - a):
            return v
    partners = []
    if with_grad:
        partners.append(min(with_grad, key=lambda u: abs(u - m)))
    if side:
        partners.append(min(side, key=lambda u: abs(u - m)))
    for w in partners:
        tests = [u for u in others if u != w]
        test = min(tests, key=lambda u: abs(u - m)) if tests else None
        best, best_err = np.nan, np.inf
        for to_x, to_u, du_dx in MODEL_COORDINATES:
            x0, x1 = to_x(m), to_x(w)
            g1 = grads[w] * du_dx(x1) if w in grads else None
            x, model = _hermite_min(x0, vals[m], grads[m] * du_dx(x0), x1, vals[w], g1)
            v = to_u(x) if np.isfinite(x) else np.nan
            err = 0.0 if test is None else abs(model(to_x(test)) - vals[test])
            if np.isfinite(v) and np.isfinite(err) and err < best_err:
                best, best_err = float(v), err
        if a < best < b and abs(best - far) > SIDE_MARGIN * (b - a) and best != m:
            return best
    return np.nan


def _bracket_cubic_step(
    m: float, a: float, b: float, vals: dict, g: float, others: list[float]
) -> float:
    """The minimum in the side ``(a, b)`` of the cubic in ``lambda`` through the best
    point's value and slope and the values of its nearest known points on both sides,
    where these are about as far from it in ``log(lambda)`` (within ``CUBIC_SPREAD``: the
    best point of an evenly spaced grid; nan otherwise, or where the cubic has no
    minimum there). In ``lambda``, not ``log(lambda)``: the values rise steeply on the
    over-regularized side, which a cubic in ``log(lambda)`` spreads over the whole
    bracket (it then steps a small fraction of the way to the minimum)."""
    left = [u for u in others if u < m]
    right = [u for u in others if u > m]
    if not (left and right):
        return np.nan
    lo, hi = max(left), min(right)
    if max(m - lo, hi - m) > CUBIC_SPREAD * min(m - lo, hi - m):
        return np.nan
    x0 = float(np.exp(m))
    d1, d2 = float(np.exp(lo)) - x0, float(np.exp(hi)) - x0
    if not (np.isfinite(d1) and np.isfinite(d2) and d1 < 0.0 < d2):
        return np.nan  # (lambda under- or overflows at the box's ends)
    f0, s0 = vals[m], g / x0
    # c(t) = f0 + s0 t + c2 t^2 + c3 t^3 through (d1, f(lo)) and (d2, f(hi))
    r1 = (vals[lo] - f0 - s0 * d1) / (d1 * d1)
    r2 = (vals[hi] - f0 - s0 * d2) / (d2 * d2)
    c3 = (r2 - r1) / (d2 - d1)
    c2 = r1 - c3 * d1
    # c'(t) = s0 + 2 c2 t + 3 c3 t^2 = 0 at its root where c'' > 0, stable as c3 -> 0
    disc = c2 * c2 - 3.0 * c3 * s0
    den = c2 + np.sqrt(disc) if disc >= 0.0 else np.nan
    t = -s0 / den if den > 0.0 else np.nan
    v = _log_or_nan(x0 + t) if np.isfinite(t) else np.nan
    return float(v) if a < v < b and v != m else np.nan


def _log_or_nan(x: float) -> float:
    return float(np.log(x)) if x > 0 else np.nan


#: The coordinates of the step models: (u -> x, x -> u, du/dx).
MODEL_COORDINATES = (
    (lambda u: u, lambda x: x, lambda x: 1.0),
    (np.exp, _log_or_nan, lambda x: 1.0 / x),
)


def _hermite_min(x0: float, f0: float, g0: float, x1: float, f1: float, g1: float | None):
    """The minimum of the cubic through ``x0``'s value and slope and ``x1``'s value and
    slope (the parabola through x1's value where ``g1`` is None) and the model itself;
    the minimum is nan where the model has none."""
    d = x1 - x0
    if not (np.isfinite(d) and d != 0.0):  # (lambda under- or overflows)
        return np.nan, lambda x: np.nan
    if g1 is not None:
        s0, s1 = g0 * d, g1 * d
        A = s0 + s1 - 2.0 * (f1 - f0)
        B = 3.0 * (f1 - f0) - 2.0 * s0 - s1

        def model(x: float) -> float:
            t = (x - x0) / d
            return f0 + t * (s0 + t * (B + t * A))

        # c'(t) = s0 + 2 B t + 3 A t^2 = 0 at its root where c'' > 0, in the form that
        # stays accurate as A -> 0 (a parabola)
        disc = B * B - 3.0 * A * s0
        den = B + np.sqrt(disc) if disc >= 0 else np.nan
        t = -s0 / den if den > 0 else np.nan
        return (x0 + t * d if np.isfinite(t) else np.nan), model
    h = 2.0 * (f1 - f0 - g0 * d) / (d * d)

    def parabola(x: float) -> float:
        return f0 + (x - x0) * (g0 + 0.5 * h * (x - x0))

    return (x0 - g0 / h if h > 0 else np.nan), parabola


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
