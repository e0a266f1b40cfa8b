"""Choosing regularization by ALOOCV: Algorithms 1 and 2 of the paper, and grids."""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.exceptions import ConvergenceWarning

from . import _blas, _core
from ._fit import FitResult, _result
from ._loo import LOOResult
from ._validation import (
    as_penalty,
    check_finite_result,
    check_fit_inputs,
    check_loo_samples,
    check_options,
    check_real_values,
    core_design,
    n_threads,
)
from .penalties import L2, Penalty

__all__ = ["TuneResult", "tune"]

METHODS = ("gd", "sgd", "grid")
STEP_RULES = ("armijo", "fixed", "adam")
_LOG_BOUND = 50.0  # |log lambda| beyond this is divergence


@dataclass
class TuneResult:
    """The outcome of :func:`aloocv.tune`.

    Attributes
    ----------
    penalty : Penalty
        The selected penalty.
    fit : FitResult
        The fit at the selected penalty.
    loo : LOOResult
        ALO at the selected penalty (``loo.mean`` is :attr:`acv`).
    acv, stderr : float
        ALOOCV estimate at the selected penalty and its standard error.
    history : dict of ndarray
        Per iteration (or grid point): ``"params"`` (T, m) penalty parameters,
        ``"acv"`` and ``"stderr"`` (T,), ``"grad"`` (T, m) hypergradient wrt the
        parameters (NaN where not computed), ``"n_fits"`` (T,) cumulative refits.
    method : str
    n_iter : int
        Iterations (grid points for ``"grid"``).
    n_fits : int
        Warm-started refits (each a few Hessian passes; SGD counts Newton steps).
    converged : bool
    """

    penalty: Penalty
    fit: FitResult
    loo: LOOResult
    acv: float
    stderr: float
    history: dict[str, np.ndarray]
    method: str
    n_iter: int
    n_fits: int
    converged: bool
    selection: str = "min"
    path_losses: np.ndarray | None = field(default=None, repr=False)
    _best_index: int = field(default=-1, repr=False)

    def plot(self, ax: Any = None, **kwargs: Any) -> Any:
        """ACV against lambda (grid) or ACV and lambda per iteration (gradient runs).

        Needs matplotlib (``pip install aloocv[plot]``); returns the figure.
        """
        from .plotting import plot_tune

        return plot_tune(self, ax=ax, **kwargs)


class _Objective:
    """ALOOCV and its hypergradient as a function of log-parameters, warm-started."""

    def __init__(self, state: Any, penalty: Penalty, w: np.ndarray | None, n_features: int):
        self.state = state
        self.template = penalty
        self.w = w
        self.p = n_features
        self.n_fits = 0

    def penalty_at(self, u: np.ndarray) -> Penalty:
        return self.template.with_params(np.exp(u))

    def set(self, pen: Penalty) -> None:
        self.state.set_penalty(pen.l2_vector(self.p), pen.l1_vector(self.p))

    def evaluate(
        self, u: np.ndarray, gradient: bool = True
    ) -> tuple[float, float, np.ndarray, dict]:
        pen = self.penalty_at(u)
        self.set(pen)
        with _blas.single_threaded_blas():
            self.state.fit()
            out = self.state.alo(gradient)
        self.n_fits += 1
        losses = out["losses"]
        acv = float(np.average(losses, weights=self.w))
        se = _stderr(losses, self.w)
        g = np.full(u.size, np.nan)
        if gradient:
            g = pen.chain(out["grad_l1"], out["grad_l2"]) * np.exp(u)  # d ACV / d log lambda
        return acv, se, g, out


def _stderr(losses: np.ndarray, w: np.ndarray | None) -> float:
    n = losses.shape[0]
    if n < 2:
        return float("nan")
    if w is None:
        return float(np.std(losses, ddof=1) / math.sqrt(n))
    sw = w.sum()
    m = np.average(losses, weights=w)
    return float(math.sqrt(np.sum(w * (losses - m) ** 2) / max(sw - 1.0, 1e-300) / sw))


def _progress(total: int, verbose: bool, desc: str):
    if not verbose:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - optional
        return None
    return tqdm(total=total, desc=desc, leave=False)


def _single_threaded_blas_throughout(func):
    """Run the whole tuning loop inside one single-threaded-BLAS context: the many
    core calls of an optimization then pay nothing for it (the context is re-entrant)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with _blas.single_threaded_blas():
            return func(*args, **kwargs)

    return wrapper


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
    pts = []
    for g in grid if not isinstance(grid, np.ndarray) or grid.ndim > 0 else [grid]:
        v = g.params() if isinstance(g, Penalty) else np.atleast_1d(check_real_values(g, "grid"))
        if v.size == 1 and m > 1:
            v = np.full(m, float(v[0]))
        if v.size != m:
            raise ValueError(f"grid point {g!r} has {v.size} parameters; the penalty has {m}")
        if not np.all(np.isfinite(v)) or np.any(v <= 0):
            raise ValueError(f"grid values must be positive and finite, got {g!r}")
        pts.append(v.astype(float))
    if not pts:
        raise ValueError("the grid is empty")
    # warm starts run from the most to the least regularized point
    order = np.argsort([-float(np.sum(v)) for v in pts], kind="stable")
    return [pts[i] for i in order]


@_single_threaded_blas_throughout
def tune(
    X: ArrayLike,
    y: ArrayLike,
    loss: str = "logistic",
    penalty: Penalty | float | None = None,
    method: str = "gd",
    *,
    max_iter: int = 100,
    tol: float = 1e-4,
    step_rule: str | None = None,
    learning_rate: float | None = None,
    batch_size: int = 1,
    eval_every: int | None = None,
    grid: Sequence[Any] | np.ndarray | None = None,
    n_grid: int = 20,
    selection: str = "min",
    fit_intercept: bool = True,
    sample_weight: ArrayLike | None = None,
    random_state: int | None = 0,
    fit_tol: float = 1e-8,
    fit_max_iter: int = 100,
    n_jobs: int | None = None,
    verbose: bool = False,
    callback: Callable[[int, Penalty, float], Any] | None = None,
) -> TuneResult:
    """Tune regularization parameters by minimizing ALOOCV.

    Parameters
    ----------
    X, y, loss, fit_intercept, sample_weight, n_jobs
        As in :func:`aloocv.fit`.
    penalty : Penalty
        The starting point and the structure being tuned: ``L2(lam)`` (one
        parameter), ``L2(lam_vector)`` (one per feature), ``ElasticNet(l1, l2)``
        (two, or per-feature vectors). Its parameters must be positive.
    method : {"gd", "sgd", "grid"}
        ``"gd"``: Algorithm 1, gradient descent on ``log(lambda)`` with the full
        ALO hypergradient, each step refit warm-started. ``"sgd"``: Algorithm 2, the
        gradient of a random sample (or minibatch of ``batch_size``) per step,
        joint with one warm-started Newton step on the coefficients (for large n).
        ``"grid"``: ALOOCV at every point of ``grid``, warm-started along it.
    max_iter : int
        Iterations for ``"gd"`` / ``"sgd"``.
    tol : float
        ``"gd"`` stops when ACV changes by less than ``tol`` relative or the step in
        ``log(lambda)`` is below ``tol``; ``"sgd"`` when the evaluated ACV has not
        improved by ``tol`` relative over three evaluations.
    step_rule : {"armijo", "fixed", "adam"}
        ``"armijo"`` (default for ``"gd"``): backtracking on the evaluated ACV.
        ``"fixed"``: ``log(lambda) -= learning_rate * gradient``. ``"adam"``
        (default for ``"sgd"``): Adam on ``log(lambda)``.
    learning_rate : float, optional
        For ``"fixed"`` (default 1.0) and ``"adam"`` (default 0.1).
    batch_size : int
        Samples per stochastic gradient (``"sgd"``).
    eval_every : int, optional
        ``"sgd"``: evaluate the full ACV every this many steps (default: about one
        pass over the data, ``ceil(n / batch_size)``, at most 50).
    grid : sequence, optional
        ``"grid"``: penalties, or parameter values (scalars for one-parameter
        penalties, rows of parameters otherwise). Default: 20 points from 1e3 to
        1e-3 times the initial penalty.
    n_grid : int
        Size of the default grid.
    selection : {"min", "1se"}
        ``"grid"``: the minimum, or the most regularized point whose ACV is within
        one standard error of the minimum.
    random_state : int, optional
        Seeds the sample order of ``"sgd"``.
    fit_tol, fit_max_iter
        Tolerance and iterations of each refit.
    verbose : bool
        Progress bar (tqdm, when installed).
    callback : callable, optional
        ``callback(iteration, penalty, acv)`` after each evaluation.

    Returns
    -------
    TuneResult

    Examples
    --------
    >>> import numpy as np, aloocv
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((300, 5)); y = X @ rng.standard_normal(5) + rng.standard_normal(300)
    >>> res = aloocv.tune(X, y, loss="squared", penalty=aloocv.L2(1.0), method="gd")
    >>> res.acv <= res.history["acv"][0]
    True
    """
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {list(METHODS)}")
    if step_rule is None:
        step_rule = "adam" if method == "sgd" else "armijo"
    if step_rule not in STEP_RULES:
        raise ValueError(f"unknown step_rule {step_rule!r}; expected one of {list(STEP_RULES)}")
    if method == "sgd" and step_rule == "armijo":
        raise ValueError("step_rule='armijo' needs full ACV evaluations: use method='gd'")
    if selection not in ("min", "1se"):
        raise ValueError(f"selection must be 'min' or '1se', got {selection!r}")
    if learning_rate is None:
        learning_rate = 0.1 if step_rule == "adam" else 1.0
    if isinstance(learning_rate, (str, bytes, bool, np.bool_, complex)):
        raise TypeError(f"learning_rate must be a real number, got {learning_rate!r}")
    learning_rate = float(learning_rate)
    if not (np.isfinite(learning_rate) and learning_rate > 0):
        raise ValueError(f"learning_rate must be positive, got {learning_rate!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
    if isinstance(tol, (str, bytes, bool, np.bool_, complex)):
        raise TypeError(f"tol must be a real number, got {tol!r}")
    tol = float(tol)
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be positive, got {tol!r}")
    penalty = as_penalty(penalty)
    X, y, loss, pen, l1, w = check_fit_inputs(X, y, loss, penalty, sample_weight, fit_intercept)
    check_loo_samples(X.shape[0])
    fit_tol, fit_max_iter = check_options(fit_tol, fit_max_iter)
    if loss == "logistic" and np.unique(y).size < 2:
        raise ValueError("y has a single class: logistic regression needs both 0 and 1")
    n, p = X.shape
    if method != "grid" and np.any(penalty.params() <= 0):
        raise ValueError("gradient tuning works on log(lambda): the initial penalty must be > 0")
    state = _core.TuneState(
        core_design(X),
        y,
        w,
        loss,
        pen,
        bool(fit_intercept),
        fit_tol,
        fit_max_iter,
        n_threads(n_jobs),
        l1,
    )
    obj = _Objective(state, penalty, w, p)
    if (
        method == "grid"
        and loss == "squared"
        and isinstance(penalty, L2)
        and l1 is None
        and (np.ndim(penalty.lam) == 0)
    ):
        points = _check_grid(grid, penalty, n_grid)
        with _blas.single_threaded_blas():
            path = _core.ridge_path(
                core_design(X),
                y,
                w,
                np.array([v[0] for v in points]),
                bool(fit_intercept),
                n_threads(n_jobs),
            )
        return _ridge_grid(obj, points, path, selection, loss, bool(fit_intercept))
    if method == "grid":
        return _grid(
            obj,
            _check_grid(grid, penalty, n_grid),
            selection,
            verbose,
            callback,
            loss,
            bool(fit_intercept),
        )
    if method == "gd":
        return _gd(
            obj,
            penalty,
            max_iter,
            tol,
            step_rule,
            learning_rate,
            verbose,
            callback,
            loss,
            bool(fit_intercept),
        )
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
    return _sgd(
        obj,
        penalty,
        n,
        max_iter,
        tol,
        step_rule,
        learning_rate,
        int(batch_size),
        int(eval_every),
        random_state,
        verbose,
        callback,
        loss,
        bool(fit_intercept),
        l1 is not None,
    )


class _History:
    def __init__(self, m: int):
        self.m = m
        self.rows: list[tuple[np.ndarray, float, float, np.ndarray, int]] = []

    def add(self, params, acv, se, grad, n_fits):
        self.rows.append(
            (np.asarray(params, float).copy(), acv, se, np.asarray(grad).copy(), n_fits)
        )

    def arrays(self) -> dict[str, np.ndarray]:
        if not self.rows:
            return {k: np.empty((0,)) for k in ("params", "acv", "stderr", "grad", "n_fits")}
        return {
            "params": np.array([r[0] for r in self.rows]),
            "acv": np.array([r[1] for r in self.rows]),
            "stderr": np.array([r[2] for r in self.rows]),
            "grad": np.array([r[3] for r in self.rows]),
            "n_fits": np.array([r[4] for r in self.rows]),
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
) -> TuneResult:
    acv, se, _, out = obj.evaluate(u, gradient=False)
    check_finite_result(
        "tune", coef=out["coef"], intercept=out["intercept"], losses=out["losses"], acv=acv
    )
    pen = obj.penalty_at(u)
    fitres = _result(out, loss, pen, intercept)
    res_loo = LOOResult(
        losses=out["losses"],
        predictions=out["predictions"],
        leverages=out["leverages"],
        method="alo",
        fit=fitres,
        sample_weight=obj.w,
    )
    return TuneResult(
        penalty=pen,
        fit=fitres,
        loo=res_loo,
        acv=acv,
        stderr=se,
        history=hist.arrays(),
        method=method,
        n_iter=n_iter,
        n_fits=obj.n_fits,
        converged=converged,
        selection=selection,
        path_losses=path_losses,
        _best_index=best_index,
    )


def _diverged(msg: str) -> None:
    warnings.warn(
        f"tune: the optimizer diverged ({msg}); returning the best point seen. "
        "Lower learning_rate or use step_rule='armijo'.",
        ConvergenceWarning,
        stacklevel=3,
    )


def _select(h: dict[str, np.ndarray], selection: str) -> int:
    if not np.all(np.isfinite(h["acv"])):
        raise ValueError("ACV is not finite at some grid points")
    best = int(np.argmin(h["acv"]))
    if selection == "1se":
        # points are ordered from most to least regularized: the first within 1 SE
        limit = h["acv"][best] + h["stderr"][best]
        best = int(np.flatnonzero(h["acv"] <= limit)[0])
    return best


def _ridge_grid(obj, points, path, selection, loss, intercept) -> TuneResult:
    # squared loss + scalar L2: the whole grid from one eigendecomposition (exact LOO)
    hist = _History(1)
    losses = path["losses"]
    for k, v in enumerate(points):
        acv = float(np.average(losses[:, k], weights=obj.w))
        hist.add(v, acv, _stderr(losses[:, k], obj.w), np.full(1, np.nan), 0)
    best = _select(hist.arrays(), selection)
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
        np.asarray(losses),
    )


def _grid(obj, points, selection, verbose, callback, loss, intercept) -> TuneResult:
    hist = _History(points[0].size)
    all_losses = []
    bar = _progress(len(points), verbose, "aloocv grid")
    for k, v in enumerate(points):
        acv, se, g, out = obj.evaluate(np.log(v), gradient=False)
        all_losses.append(out["losses"])
        hist.add(v, acv, se, g, obj.n_fits)
        if callback is not None:
            callback(k, obj.penalty_at(np.log(v)), acv)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    best = _select(hist.arrays(), selection)
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
        np.column_stack(all_losses),
    )


def _gd(obj, penalty, max_iter, tol, rule, lr, verbose, callback, loss, intercept) -> TuneResult:
    u = np.log(penalty.params())
    acv, se, g, _ = obj.evaluate(u)
    hist = _History(u.size)
    hist.add(np.exp(u), acv, se, g, obj.n_fits)
    best_u, best_acv = u.copy(), acv
    alpha = 1.0 / max(np.max(np.abs(g)), 1e-12)  # first trial: a factor e on the largest
    m_adam = np.zeros_like(u)
    v_adam = np.zeros_like(u)
    converged = False
    bar = _progress(max_iter, verbose, "aloocv gd")
    it = 0
    for it in range(1, max_iter + 1):
        if rule == "armijo":
            accepted = False
            gg = float(g @ g)
            gmax = max(float(np.max(np.abs(g))), 1e-300)
            while alpha * gmax > tol:  # down to a step of tol in log(lambda)
                u_new = u - alpha * g
                if np.max(np.abs(u_new)) > _LOG_BOUND:
                    alpha *= 0.5
                    continue
                try:
                    acv_new, se_new, g_new, _ = obj.evaluate(u_new)
                except ValueError:  # e.g. a singular Hessian as lambda -> 0
                    alpha *= 0.5
                    continue
                if np.isfinite(acv_new) and acv_new <= acv - 1e-4 * alpha * gg:
                    accepted = True
                    break
                alpha *= 0.5
            if not accepted:
                converged = True  # no decrease along the (approximate) gradient
                break
            # next trial step: Barzilai-Borwein (a secant step in log(lambda)) when the
            # curvature along the step is positive, else a doubled step; at most a
            # factor e^2 on any lambda
            du_, dg_ = u_new - u, g_new - g
            curv = float(du_ @ dg_)
            alpha = float(du_ @ du_) / curv if curv > 0 else 2.0 * alpha
            alpha = min(alpha, 2.0 / max(np.max(np.abs(g_new)), 1e-300))
        else:
            if rule == "fixed":
                step = lr * g
            else:
                m_adam = 0.9 * m_adam + 0.1 * g
                v_adam = 0.999 * v_adam + 0.001 * g * g
                mh = m_adam / (1 - 0.9**it)
                vh = v_adam / (1 - 0.999**it)
                step = lr * mh / (np.sqrt(vh) + 1e-12)
            u_new = u - step
            if not np.all(np.isfinite(u_new)) or np.max(np.abs(u_new)) > _LOG_BOUND:
                _diverged(f"log(lambda) left [-{_LOG_BOUND:g}, {_LOG_BOUND:g}] at iteration {it}")
                u = best_u
                break
            try:
                acv_new, se_new, g_new, _ = obj.evaluate(u_new)
            except ValueError as exc:
                _diverged(f"the fit failed at iteration {it}: {exc}")
                u = best_u
                break
            if not np.isfinite(acv_new) or acv_new > 10 * best_acv + 1.0:
                _diverged(f"ACV rose to {acv_new:.4g} from a best of {best_acv:.4g}")
                u = best_u
                break
        du = np.max(np.abs(u_new - u))
        dacv = abs(acv - acv_new)
        u, acv, se, g = u_new, acv_new, se_new, g_new
        hist.add(np.exp(u), acv, se, g, obj.n_fits)
        if acv < best_acv:
            best_u, best_acv = u.copy(), acv
        if callback is not None:
            callback(it, obj.penalty_at(u), acv)
        if bar is not None:
            bar.update(1)
        if dacv <= tol * max(abs(acv), 1e-12) or du <= tol:
            converged = True
            break
    if bar is not None:
        bar.close()
    if rule != "armijo":
        u = best_u
    if not converged and rule == "armijo":
        warnings.warn(
            f"tune(method='gd') stopped at max_iter={max_iter} before the ACV change "
            f"fell below tol={tol:g}",
            ConvergenceWarning,
            stacklevel=3,
        )
    return _finish(obj, u, hist, "gd", it, converged, loss, intercept)


def _sgd(
    obj,
    penalty,
    n,
    max_iter,
    tol,
    rule,
    lr,
    batch,
    eval_every,
    seed,
    verbose,
    callback,
    loss,
    intercept,
    has_l1,
) -> TuneResult:
    rng = np.random.default_rng(seed)
    u = np.log(penalty.params())
    acv, se, g, _ = obj.evaluate(u)
    hist = _History(u.size)
    hist.add(np.exp(u), acv, se, g, obj.n_fits)
    best_u, best_acv = u.copy(), acv
    m_adam = np.zeros_like(u)
    v_adam = np.zeros_like(u)
    stall = 0
    converged = False
    bar = _progress(max_iter, verbose, "aloocv sgd")
    state = obj.state
    it = 0
    for it in range(1, max_iter + 1):
        idx = rng.integers(0, n, size=batch)
        _, gl1, gl2 = state.sample_gradient(idx)
        pen = obj.penalty_at(u)
        gu = pen.chain(gl1, gl2) * np.exp(u)
        if rule == "fixed":
            step = lr * gu
        else:
            m_adam = 0.9 * m_adam + 0.1 * gu
            v_adam = 0.999 * v_adam + 0.001 * gu * gu
            step = lr * (m_adam / (1 - 0.9**it)) / (np.sqrt(v_adam / (1 - 0.999**it)) + 1e-12)
        u = u - step
        if not np.all(np.isfinite(u)) or np.max(np.abs(u)) > _LOG_BOUND:
            _diverged(f"log(lambda) left [-{_LOG_BOUND:g}, {_LOG_BOUND:g}] at iteration {it}")
            u = best_u
            break
        obj.set(obj.penalty_at(u))
        try:
            with _blas.single_threaded_blas():
                if has_l1:
                    state.fit()  # proximal Newton, warm-started (working set stays small)
                else:
                    # one warm-started Newton step; the factor is refreshed each evaluation
                    if state.step(False) == 0.0:
                        state.step(True)
        except ValueError as exc:
            _diverged(f"the fit failed at iteration {it}: {exc}")
            u = best_u
            break
        obj.n_fits += 1
        if bar is not None:
            bar.update(1)
        if it % eval_every == 0 or it == max_iter:
            acv, se, g, _ = obj.evaluate(u)
            hist.add(np.exp(u), acv, se, g, obj.n_fits)
            if callback is not None:
                callback(it, obj.penalty_at(u), acv)
            if not np.isfinite(acv) or acv > 10 * best_acv + 1.0:
                _diverged(f"ACV rose to {acv:.4g} from a best of {best_acv:.4g}")
                u = best_u
                break
            if acv < best_acv * (1 - tol):
                best_u, best_acv = u.copy(), acv
                stall = 0
            else:
                stall += 1
                if acv < best_acv:
                    best_u, best_acv = u.copy(), acv
            if stall >= 3:
                converged = True
                break
    if bar is not None:
        bar.close()
    return _finish(obj, best_u, hist, "sgd", it, converged, loss, intercept)
