"""Search drivers: :func:`tune` and its result.

Default search (``method="auto"``): a short coarse grid brackets the minimum of ALOOCV, then
steps on its exact derivatives reach it: for one parameter, model steps on plain values
while they are long, then on the exact gradient (no Hessian: :func:`bracketed_1d`);
trust-region Newton (exact Hessian) for up to ``SECOND_ORDER_MAX`` parameters, L-BFGS-B
beyond.
The paper's Algorithms 1 (``"gd"``) and 2 (``"sgd"``) and plain grids remain.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.exceptions import ConvergenceWarning

from .. import _blas, _core
from .._diagnostics import user_stacklevel
from .._validation import (
    check_loo_samples,
    check_rtol,
    core_design,
)
from ..backends import route
from ..penalties import Penalty
from ..problem import Problem
from ..results import TuneResult
from .grid import BRACKET_POINTS, _Bracket, _bracket, _check_grid, _grid, _neighbours, _ridge_grid
from .objective import Objective
from .optimizers import (
    LOG_BOUND,
    Adam,
    OptimizeResult,
    Trace,
    armijo,
    bracketed_1d,
    lbfgsb,
    newton_1d,
    trust_newton,
)
from .record import _columns, _finish, _History, _progress
from .refine import Refiner, refine_search

__all__ = ["TuneResult", "tune"]

METHODS = ("auto", "newton", "lbfgs", "gd", "sgd", "grid")
STEP_RULES = ("armijo", "fixed", "adam")
_LOG_BOUND = LOG_BOUND
SECOND_ORDER_MAX = 10  # parameters up to which "auto" takes exact Hessians


def _single_threaded_blas_throughout(func):
    """Run the whole tuning loop inside one single-threaded-BLAS context: the many
    core calls of an optimization then pay nothing for it (the context is re-entrant)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with _blas.single_threaded_blas():
            return func(*args, **kwargs)

    return wrapper


@_single_threaded_blas_throughout
def tune(
    X: ArrayLike,
    y: ArrayLike,
    loss: Any = "logistic",
    penalty: Penalty | float | None = None,
    method: str = "auto",
    *,
    max_iter: int = 100,
    tol: float = 1e-6,
    step_rule: str | None = None,
    learning_rate: float | None = None,
    batch_size: int = 1,
    eval_every: int | None = None,
    grid: Sequence[Any] | np.ndarray | None = None,
    n_grid: int | None = None,
    selection: str = "min",
    gradient: str = "exact",
    fit_intercept: bool = True,
    sample_weight: ArrayLike | None = None,
    random_state: int | None = 0,
    fit_tol: float = 1e-8,
    fit_max_iter: int = 100,
    n_jobs: int | None = None,
    verbose: bool = False,
    callback: Callable[[int, Penalty, float], Any] | None = None,
    offset: ArrayLike | None = None,
    rtol: float | None = None,
    memory_limit: float | str | None = None,
) -> TuneResult:
    """Tune regularization parameters by minimizing ALOOCV.

    Parameters
    ----------
    X, y, loss, fit_intercept, sample_weight, n_jobs, offset, memory_limit
        As in :func:`aloocv.fit` (``memory_limit``: the budget of the search's large
        matrices, checked once before the search starts).
    penalty : Penalty
        The starting point and the structure being tuned: ``L2(lam)`` (one
        parameter), ``L2(lam_vector)`` (one per feature), ``L2(lam, groups=labels)``
        (one per group), ``ElasticNet(l1, l2)`` (two, or per-feature vectors). Its
        parameters must be positive.
    method : {"auto", "newton", "lbfgs", "gd", "sgd", "grid"}
        ``"auto"`` (default): a coarse grid of ``n_grid`` points (default 5, from 1e3 to
        1e-3 times the starting penalty, or ``grid``) brackets the minimum, then steps
        on the derivatives of ALOOCV reach it: for one parameter, parabolic steps on the
        plain values (a fit and one leverage pass each) while they are long, then steps
        on the exact gradient at each point, each the minimum of a cubic through two
        points' values and slopes, inside the bracket (no Hessian); trust-region
        Newton (exact Hessian) for up to 10 parameters, L-BFGS-B beyond. ``"newton"``:
        second-order steps from the starting penalty, no grid (a bracketed Newton
        iteration for one parameter). ``"lbfgs"``: L-BFGS-B on the exact gradient from the start.
        ``"gd"``: Algorithm 1, gradient descent on ``log(lambda)``, each step refit
        warm-started. ``"sgd"``: Algorithm 2, an unbiased minibatch estimate of the
        gradient per step, joint with one warm-started Newton step on the
        coefficients (for large n). ``"grid"``: ALOOCV at every point of ``grid``,
        warm-started along it.
    max_iter : int
        Iterations of the gradient methods.
    tol : float
        Gradient methods converge when every component of the (projected) gradient of
        ALOOCV in ``log(lambda)`` is at most ``tol * |ACV|``; a search that stops
        otherwise (``max_iter``, no decrease, a bracket that collapsed) returns its best
        point with ``converged=False`` and a ``ConvergenceWarning`` saying why.
    step_rule : {"armijo", "fixed", "adam"}
        ``"gd"``: ``"armijo"`` (default) backtracking with Barzilai-Borwein trial steps;
        ``"fixed"``: ``log(lambda) -= learning_rate * gradient``; ``"adam"`` (default
        for ``"sgd"``): Adam on ``log(lambda)``.
    learning_rate : float, optional
        For ``"fixed"`` (default 1.0) and ``"adam"`` (default 0.1).
    batch_size : int
        Samples per stochastic gradient (``"sgd"``); at least 2 for non-quadratic losses
        (the exact gradient's unbiased estimate needs two independent draws).
    eval_every : int, optional
        ``"sgd"``: evaluate the full ACV every this many steps (default: about one
        pass over the data, ``ceil(n / batch_size)``, at most 50).
    grid : sequence, optional
        ``"grid"`` and ``"auto"``: penalties, or parameter values (scalars for
        one-parameter penalties, rows of parameters otherwise).
    n_grid : int, optional
        Size of the default grid (20 for ``"grid"``, 5 for ``"auto"``).
    selection : {"min", "1se"}
        The minimum, or the most regularized point whose ACV is within one standard
        error of the minimum (on a grid: the first such grid point; with a gradient
        search of one parameter: the largest lambda where ACV equals that limit, solved
        to ``tol``). ``"1se"`` with more than one parameter raises ValueError.
    gradient : {"exact", "paper"}
        The gradient of the first-order methods (``"gd"``, ``"sgd"``): the exact
        derivative of ALOOCV, or the paper's approximation (Lemma 4, eq. 14-16), for
        the paper's experiments. Second-order methods always use exact derivatives.
    random_state : int, optional
        Seeds the sample order of ``"sgd"``.
    fit_tol, fit_max_iter
        Tolerance and iterations of each refit.
    verbose : bool
        Progress on stderr: a tqdm bar when tqdm is installed, plain lines otherwise
        (:mod:`aloocv._progress`).
    callback : callable, optional
        ``callback(iteration, penalty, acv)`` after each evaluation.
    rtol : float in (0, 1), optional
        Tune on the trusted estimate: the search runs on plain ALO, then near its optimum
        on the refined estimate of :func:`aloocv.loo` with ``rtol=rtol`` (exact refits of
        the samples ALO's error indicator ranks first until the estimated error of the
        mean is within ``rtol``), so that the choice is exact leave-one-out's. A grid
        (``"grid"``): the refined estimate at ALO's argmin and its neighbours, then along
        the grid until the refined argmin has refined neighbours on both sides (or is at
        an end), warm-started at each point's fit; the choice is that argmin (to the
        grid's resolution; ``"1se"``: also towards stronger penalties until a refined
        value exceeds the limit). A gradient search: from ALO's optimum, a search on the
        refined mean with its refitted samples held fixed (smooth in the penalty), until
        the refined estimate at the optimum refits no sample outside that set: L-BFGS-B
        on its exact derivative (ALO's hypergradient for the other samples, implicit
        differentiation of each exact refit; ``docs/math/hypergradient.md``) to ``tol``
        for a scalar-eta loss with an L2 penalty (scalar, per-feature or grouped) in
        memory; elsewhere (the multinomial loss, an L1 term, dask input) a bounded
        search of the refined mean along the ray that scales every parameter alike, to
        ``RAY_XTOL`` (1e-3) in log lambda. The refined evaluations are rows of
        :attr:`TuneResult.history` with ``"refined"`` True; :attr:`TuneResult.loo` is the
        refined estimate at the choice (its ``error_estimate`` names the refitted
        samples). For the squared loss with an L2 penalty ALO is exact leave-one-out:
        nothing is refined. Not with ``gradient="paper"``, nor ``selection="1se"`` in a
        gradient search.

    Returns
    -------
    TuneResult

    Examples
    --------
    >>> import numpy as np, aloocv
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((300, 5)); y = X @ rng.standard_normal(5) + rng.standard_normal(300)
    >>> res = aloocv.tune(X, y, loss="squared", penalty=aloocv.L2(1.0))
    >>> res.converged
    True
    """
    opts = SearchOptions.build(
        method=method,
        max_iter=max_iter,
        tol=tol,
        step_rule=step_rule,
        learning_rate=learning_rate,
        batch_size=batch_size,
        eval_every=eval_every,
        grid=grid,
        n_grid=n_grid,
        selection=selection,
        gradient=gradient,
        random_state=random_state,
        verbose=verbose,
        callback=callback,
    )
    pb = Problem.build(
        X,
        y,
        loss=loss,
        penalty=penalty,
        fit_intercept=fit_intercept,
        sample_weight=sample_weight,
        offset=offset,
        tol=fit_tol,
        max_iter=fit_max_iter,
        n_jobs=n_jobs,
        multi_target=False,
        memory_limit=memory_limit,
    )
    r = route.choose(pb, "tune", search=opts.method, gradient=opts.gradient)
    _check_search(pb, opts)
    rtol = _check_refinement(rtol, opts)
    state = route.tune_state(pb, r)
    obj = Objective(
        state, pb.penalty, pb.sample_weight, pb.n_features, opts.gradient, pb.fit_intercept
    )
    refiner = None
    if rtol is not None and not (pb.loss == "squared" and pb.l1 is None):
        refiner = Refiner(pb, obj, rtol)
    if opts.method == "grid":
        res = _grid_search(pb, r, obj, opts, refiner)
    else:
        res = _gradient_search(pb, obj, opts.for_samples(pb.n_samples), refiner)
    if rtol is not None and refiner is None:
        msg = "; ALO is exact leave-one-out here (squared loss, L2 penalty): nothing to refine"
        res = dataclasses.replace(res, rtol=rtol, message=res.message + msg)
    return res


def _check_refinement(rtol: Any, opts: SearchOptions) -> float | None:
    """``rtol=`` of :func:`tune`, checked against the search."""
    rtol = check_rtol(rtol)
    if rtol is None:
        return None
    if opts.gradient != "exact":
        raise ValueError("rtol= refines on exact derivatives: use gradient='exact'")
    if opts.selection == "1se" and opts.method != "grid":
        raise ValueError(
            "rtol= with selection='1se' needs method='grid' (the one-standard-error point "
            "of a gradient search is found on plain ALO)"
        )
    return rtol


@dataclass(frozen=True)
class SearchOptions:
    """The options of one :func:`tune` search, checked (see :func:`tune` for each)."""

    method: str
    max_iter: int
    tol: float
    step_rule: str
    learning_rate: float
    batch_size: Any
    eval_every: Any
    grid: Any
    n_grid: int
    selection: str
    gradient: str
    random_state: Any
    verbose: bool
    callback: Any

    @classmethod
    def build(cls, **kw: Any) -> SearchOptions:
        method, step_rule = kw["method"], kw["step_rule"]
        if not isinstance(method, str) or method not in METHODS:
            raise ValueError(f"unknown method {method!r}; expected one of {list(METHODS)}")
        if step_rule is None:
            step_rule = "adam" if method == "sgd" else "armijo"
        if step_rule not in STEP_RULES:
            raise ValueError(f"unknown step_rule {step_rule!r}; expected one of {list(STEP_RULES)}")
        if method == "sgd" and step_rule == "armijo":
            raise ValueError("step_rule='armijo' needs full ACV evaluations: use method='gd'")
        if kw["selection"] not in ("min", "1se"):
            raise ValueError(f"selection must be 'min' or '1se', got {kw['selection']!r}")
        if kw["gradient"] not in ("exact", "paper"):
            raise ValueError(f"gradient must be 'exact' or 'paper', got {kw['gradient']!r}")
        learning_rate = kw["learning_rate"]
        if learning_rate is None:
            learning_rate = 0.1 if step_rule == "adam" else 1.0
        if isinstance(learning_rate, (str, bytes, bool, np.bool_, complex)):
            raise TypeError(f"learning_rate must be a real number, got {learning_rate!r}")
        learning_rate = float(learning_rate)
        if not (np.isfinite(learning_rate) and learning_rate > 0):
            raise ValueError(f"learning_rate must be positive, got {learning_rate!r}")
        max_iter, tol = kw["max_iter"], kw["tol"]
        if (
            isinstance(max_iter, bool)
            or not isinstance(max_iter, (int, np.integer))
            or max_iter < 1
        ):
            raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
        if isinstance(tol, (str, bytes, bool, np.bool_, complex)):
            raise TypeError(f"tol must be a real number, got {tol!r}")
        tol = float(tol)
        if not (np.isfinite(tol) and tol > 0):
            raise ValueError(f"tol must be positive, got {tol!r}")
        n_grid = kw["n_grid"]
        if n_grid is None:
            n_grid = BRACKET_POINTS if method == "auto" else 20
        kw.update(
            step_rule=step_rule,
            learning_rate=learning_rate,
            max_iter=int(max_iter),
            tol=tol,
            n_grid=n_grid,
        )
        return cls(**kw)

    def for_samples(self, n: int) -> SearchOptions:
        """``"sgd"``: the minibatch size and evaluation period checked against n."""
        if self.method != "sgd":
            return self
        batch_size, eval_every = self.batch_size, self.eval_every
        if (
            isinstance(batch_size, bool)
            or not isinstance(batch_size, (int, np.integer))
            or not (1 <= batch_size <= n)
        ):
            raise ValueError(f"batch_size must be an integer in [1, n={n}], got {batch_size!r}")
        if eval_every is None:
            eval_every = int(min(50, max(1, math.ceil(n / batch_size))))
        elif (
            isinstance(eval_every, bool)
            or not isinstance(eval_every, (int, np.integer))
            or (eval_every < 1)
        ):
            raise ValueError(f"eval_every must be a positive integer, got {eval_every!r}")
        return dataclasses.replace(self, batch_size=int(batch_size), eval_every=int(eval_every))


def _grid_search(
    pb: Problem, r: route.Route, obj: Objective, opts: SearchOptions, refiner=None
) -> TuneResult:
    """ALOOCV at every grid point: the squared-loss ridge path from one decomposition
    (in memory, scalar L2, no offset), else warm-started fits along the grid."""
    points = _check_grid(opts.grid, pb.penalty, opts.n_grid)
    loss, intercept = pb.loss, pb.fit_intercept
    if r.solver == "ridge_path":
        with _blas.single_threaded_blas():
            path = _core.ridge_path(
                core_design(pb.X),
                pb.y,
                pb.sample_weight,
                np.array([v[0] for v in points]),
                fit_intercept=intercept,
                n_threads=pb.options.n_threads,
            )
        return _ridge_grid(obj, points, path, opts.selection, loss, intercept)
    return _grid(obj, points, opts.selection, opts.verbose, opts.callback, loss, intercept, refiner)


def _gradient_search(
    pb: Problem, obj: Objective, opts: SearchOptions, refiner: Refiner | None = None
) -> TuneResult:
    """A search on the derivatives of ALOOCV in log(lambda), from the starting penalty
    (bracketed by a coarse grid for ``"auto"``)."""
    m = pb.penalty.params().size
    hist = _History(m)
    u0 = np.log(pb.penalty.params())
    box = (np.full(m, -LOG_BOUND), np.full(m, LOG_BOUND))
    br = _Bracket()
    if opts.method == "auto":
        br.points = _check_grid(opts.grid, pb.penalty, opts.n_grid)
        u0, box = _bracket(
            obj, br.points, hist, opts.callback, br.losses, br.coefs, br.icpts, br.iters, br.values
        )
    # the scale of the gradient test: ACV at the start (the bracket's best value, known)
    acv0 = min(f for _, f in br.values) if br.values else obj.evaluate(u0, 0).acv
    gtol = opts.tol * max(abs(acv0), 1e-12)
    cb = _Recorder(obj, hist, opts.callback, opts.verbose, opts.max_iter, opts.method)
    try:
        res = _optimize(pb, obj, opts, u0, box, br, gtol, Trace(cb))
    finally:
        cb.close()
    u, converged, message = res.u, res.converged, res.message
    if opts.selection == "1se":
        u, ok, msg = _one_se(obj, res, br.points, box[1][0], opts.tol, opts.max_iter)
        converged = converged and ok
        message = f"{message}; 1-SE point: {msg}"
    refined = None
    if refiner is not None:
        refined = refine_search(
            refiner, u, box, opts.tol, opts.max_iter, _refined_rows(obj, hist, opts.callback)
        )
        u, converged = refined.u, converged and refined.converged
        message = f"{message}; {refined.message}, {refiner.n_refits} exact refits"
    if not converged and pb.l1 is not None:
        message += (
            " (with an L1 term ALOOCV jumps where the active set changes; its gradient holds "
            "the active set fixed, so a search can stop at such a jump)"
        )
    if not converged:
        warnings.warn(
            f"tune(method={opts.method!r}) stopped before the gradient of ALOOCV in "
            f"log(lambda) fell below tol * |ACV| = {gtol:.3g}: {message}. Returning the "
            "best point.",
            ConvergenceWarning,
            stacklevel=user_stacklevel(),
        )
    return _finish(
        obj,
        u,
        hist,
        opts.method,
        res.n_iter,
        converged,
        pb.loss,
        pb.fit_intercept,
        opts.selection,
        path_losses=_columns(br.losses, 1) if br.losses else None,
        message=message,
        path=br.path(),
        refined_loo=None if refined is None else refined.loo,
        rtol=None if refiner is None else refiner.rtol,
    )


def _refined_rows(obj: Objective, hist: _History, callback: Any):
    """What a refined search records per evaluation: a history row (refined) and the
    callback."""

    def record(p) -> None:
        g = p.grad if p.grad is not None else np.full(p.u.size, np.nan)
        hist.add(np.exp(p.u), p.acv, p.stderr, g, obj.n_fits, plain=p.plain)
        if callback is not None:
            callback(len(hist.rows) - 1, obj.penalty_at(p.u), p.acv)

    return record


def _optimize(pb, obj, opts: SearchOptions, u0, box, br: _Bracket, gtol, trace) -> OptimizeResult:
    """The optimizer of ``opts.method`` from u0 (see :func:`tune`)."""
    m, method, max_iter = u0.size, opts.method, opts.max_iter
    if method == "auto" and m == 1 and br.values:
        return bracketed_1d(
            obj,
            [(float(u[0]), f) for u, f in br.values],
            gtol=gtol,
            max_iter=max_iter,
            bounds=(box[0][0], box[1][0]),
            trace=trace,
        )
    if method in ("auto", "newton") and m == 1:
        lo, hi = _neighbours(u0[0], br.points)
        return newton_1d(
            obj,
            lo,
            u0[0],
            hi,
            gtol=gtol,
            max_iter=max_iter,
            bounds=(box[0][0], box[1][0]),
            trace=trace,
        )
    if method in ("auto", "newton") and (m <= SECOND_ORDER_MAX or method == "newton"):
        return trust_newton(obj, u0, gtol=gtol, max_iter=max_iter, bounds=box, trace=trace)
    if method in ("auto", "lbfgs"):
        return lbfgsb(obj, u0, gtol=gtol, max_iter=max_iter, bounds=box, trace=trace)
    if method == "gd" and opts.step_rule == "armijo":
        return armijo(obj, u0, gtol=gtol, max_iter=max_iter, trace=trace)
    if method == "gd":
        return _first_order(obj, u0, gtol, max_iter, opts.step_rule, opts.learning_rate, trace)
    return _sgd(
        obj,
        u0,
        pb.n_samples,
        gtol,
        max_iter,
        opts.tol,
        opts.step_rule,
        opts.learning_rate,
        opts.batch_size if pb.loss == "squared" else max(2, opts.batch_size),
        opts.eval_every,
        opts.random_state,
        pb.l1 is not None,
        trace,
    )


def _check_search(pb: Problem, opts: SearchOptions) -> None:
    """A valid problem and starting point for the search (the route table refuses the
    searches a route does not offer)."""
    method, selection = opts.method, opts.selection
    if not pb.is_dask:
        check_loo_samples(pb.n_samples)
        if pb.loss == "logistic" and np.unique(pb.y).size < 2:
            raise ValueError("y has a single class: logistic regression needs both 0 and 1")
    params = pb.penalty.params()
    if method != "grid" and np.any(params <= 0):
        raise ValueError("gradient tuning works on log(lambda): the initial penalty must be > 0")
    if method != "grid" and selection == "1se" and params.size > 1:
        raise ValueError(
            f"selection='1se' with a gradient search needs one regularization parameter; the "
            f"penalty has {params.size} (use method='grid', or selection='min')"
        )


def second_order_method(n_params: int) -> str:
    """The second-order method for this many parameters: exact-Hessian trust-region
    Newton up to ``SECOND_ORDER_MAX``, L-BFGS-B beyond."""
    return "newton" if n_params <= SECOND_ORDER_MAX else "lbfgs"


class _Recorder:
    """History, callback and progress bar of a gradient search."""

    def __init__(self, obj, hist, callback, verbose, total, method):
        self.obj, self.hist, self.callback = obj, hist, callback
        self.bar = _progress(total, verbose, f"aloocv {method}")
        self.k = len(hist.rows)

    def __call__(self, ev) -> None:
        g = ev.grad if ev.grad is not None else np.full(ev.u.size, np.nan)
        self.hist.add(np.exp(ev.u), ev.acv, ev.stderr, g, self.obj.n_fits)
        if self.callback is not None:
            self.callback(self.k, self.obj.penalty_at(ev.u), ev.acv)
        self.k += 1
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _one_se(obj, res: OptimizeResult, points, u_max: float, tol: float, max_iter: int):
    """The largest lambda (one parameter) whose ACV equals min ACV + its stderr."""
    best = res.evaluation
    limit = best.acv + best.stderr
    u_star = float(res.u[0])
    f = lambda ev: ev.acv - limit  # noqa: E731
    lo, hi = u_star, None
    cands = sorted(float(np.log(v[0])) for v in points if np.log(v[0]) > u_star)
    cands += [min(u_star + k, u_max) for k in (1.0, 2.0, 4.0, 8.0, 16.0)]
    for c in sorted(set(cands)):
        ev = obj.evaluate(np.array([c]), 1)
        if f(ev) > 0:
            hi, ev_hi = c, ev
            break
        lo = c
        if c >= u_max:
            return np.array([c]), True, f"ACV stays within one stderr up to the box's end ({c:.4g})"
    if hi is None:
        return np.array([lo]), True, "ACV stays within one stderr up to the box's end"
    # safeguarded Newton on ACV(u) - limit within [lo, hi] (f(lo) <= 0 < f(hi))
    u, ev = hi, ev_hi
    for _ in range(max_iter):
        if abs(f(ev)) <= tol * abs(limit):
            return np.array([u]), True, "solved"
        g = float(ev.grad[0])
        u_new = u - f(ev) / g if g != 0 else np.nan
        if not (lo < u_new < hi):
            u_new = 0.5 * (lo + hi)
        ev = obj.evaluate(np.array([u_new]), 1)
        u = u_new
        if f(ev) > 0:
            hi = u
        else:
            lo = u
        if hi - lo <= 1e-12:
            break
    ok = abs(f(ev)) <= tol * abs(limit)
    return np.array([lo if f(ev) > 0 else u]), ok, "solved" if ok else "root not reached"


def _first_order(obj, u0, gtol, max_iter, rule, lr, trace) -> OptimizeResult:
    """Algorithm 1 with fixed or Adam steps; returns the best point evaluated."""
    u = np.asarray(u0, float).copy()
    ev = obj.evaluate(u, 1)
    trace.add(ev)
    best = ev
    adam = Adam(lr, eps=1e-12)
    it = 0
    for it in range(1, max_iter + 1):
        if np.max(np.abs(ev.grad)) <= gtol:
            return OptimizeResult(ev.u, ev, it - 1, True, "gradient below tolerance", trace)
        step = lr * ev.grad if rule == "fixed" else adam.step(ev.grad)
        u_new = u - step
        if not np.all(np.isfinite(u_new)) or np.max(np.abs(u_new)) > LOG_BOUND:
            msg = f"diverged: log(lambda) left [-{LOG_BOUND:g}, {LOG_BOUND:g}] at iteration {it}"
            return OptimizeResult(best.u, best, it, False, msg, trace)
        try:
            ev = obj.evaluate(u_new, 1)
        except ValueError as exc:
            return OptimizeResult(best.u, best, it, False, f"the fit failed: {exc}", trace)
        trace.add(ev)
        if not np.isfinite(ev.acv) or ev.acv > 10 * best.acv + 1.0:
            msg = f"diverged: ACV rose to {ev.acv:.4g} from a best of {best.acv:.4g}"
            return OptimizeResult(best.u, best, it, False, msg, trace)
        if ev.acv < best.acv:
            best = ev
        u = u_new
    conv = bool(np.max(np.abs(best.grad)) <= gtol)
    return OptimizeResult(best.u, best, it, conv, f"max_iter={max_iter} reached", trace)


def _sgd(
    obj,
    u0,
    n,
    gtol,
    max_iter,
    tol,
    rule,
    lr,
    batch,
    eval_every,
    seed,
    has_l1,
    trace,
) -> OptimizeResult:
    """Algorithm 2: unbiased minibatch gradients (at least two samples for non-quadratic
    losses), one warm Newton step per iteration; the full ACV and its exact gradient every
    ``eval_every`` steps."""
    rng = np.random.default_rng(seed)
    u = np.asarray(u0, float).copy()
    ev = obj.evaluate(u, 1)
    trace.add(ev)
    best = ev
    adam = Adam(lr, eps=1e-12)
    stall = 0
    state = obj.state
    it = 0
    message = f"max_iter={max_iter} reached"
    for it in range(1, max_iter + 1):
        idx = rng.integers(0, n, size=batch)
        _, gl1, gl2 = state.sample_gradient(idx)
        pen = obj.penalty_at(u)
        gu = pen.chain(gl1, gl2) * np.exp(u)
        step = lr * gu if rule == "fixed" else adam.step(gu)
        u = u - step
        if not np.all(np.isfinite(u)) or np.max(np.abs(u)) > LOG_BOUND:
            message = f"diverged: |log(lambda)| > {LOG_BOUND:g} at iteration {it}"
            break
        obj.set(obj.penalty_at(u))
        try:
            with _blas.single_threaded_blas():
                if has_l1:
                    state.fit()  # proximal Newton, warm-started (working set stays small)
                elif state.step(refresh=False) == 0.0:  # one warm-started Newton step
                    state.step(refresh=True)
        except ValueError as exc:
            message = f"the fit failed at iteration {it}: {exc}"
            break
        obj.n_fits += 1
        if it % eval_every == 0 or it == max_iter:
            try:
                ev = obj.evaluate(u, 1)
            except ValueError as exc:
                message = f"the fit failed at iteration {it}: {exc}"
                break
            trace.add(ev)
            if not np.isfinite(ev.acv) or ev.acv > 10 * best.acv + 1.0:
                message = f"diverged: ACV rose to {ev.acv:.4g} from a best of {best.acv:.4g}"
                break
            improved = ev.acv < best.acv * (1 - tol)
            if ev.acv < best.acv:
                best = ev
            if np.max(np.abs(best.grad)) <= gtol:
                return OptimizeResult(best.u, best, it, True, "gradient below tolerance", trace)
            stall = 0 if improved else stall + 1
            if stall >= 3:
                message = "ACV did not improve over three evaluations"
                break
    conv = bool(np.max(np.abs(best.grad)) <= gtol)
    return OptimizeResult(best.u, best, it, conv, message, trace)
