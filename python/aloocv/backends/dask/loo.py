"""Leave-one-out on dask input (scalar losses)."""

from __future__ import annotations

import functools
import warnings
from typing import Any

from sklearn.exceptions import ConvergenceWarning

from ..._diagnostics import (
    check_separation_margin,
    unreliable_mask,
    user_stacklevel,
    warn_ill_conditioned,
    warn_unreliable_count,
)
from ...results import DaskLOOResult
from ...results.trust import indicator_sees_the_error
from .alo import _PER_SAMPLE, _alo_settled, _rcond, _stderr
from .data import Data, _client
from .newton import _fit_for_loo, _fit_result
from .passes import _first_pass, _per_sample
from .refits import _exact, _exact_l1, _refit_losses
from .result import subset_refits
from .screen import Indicator, unreliable_array


def loo(
    problem: Any,
    *,
    method: str = "alo",
    coef: Any = None,
    intercept: Any = None,
    return_gradient: bool = False,
    gradient: str = "exact",
):
    """:func:`aloocv.loo` on dask input (a scalar loss; see the package docstring)."""

    data = Data.from_problem(problem)
    if gradient != "exact":
        raise ValueError("dask input has the exact hypergradient only (gradient='exact')")
    if data.n < 2:
        raise ValueError(f"leave-one-out needs at least 2 samples, got n_samples={data.n}")
    tol, max_iter = problem.options.tol, problem.options.max_iter
    if coef is None or (data.loss == "logistic" and data.fit_intercept):
        _first_pass(data, loo=True)  # the class counts (and the fit's first pass)
    # the closed forms need the Hessian at beta (as in memory: fresh_end)
    st = _fit_for_loo(data, coef, intercept, tol, max_iter, fresh_end=method != "exact")
    fitres = _fit_result(data, st)
    if method == "exact":
        exact = _exact if data.l1 is None else _exact_l1
        losses, preds, n_nc = exact(data, st, tol, max_iter)
        if n_nc:
            warnings.warn(
                f"exact LOO: {n_nc} of {data.n} refits did not reach tol={tol:g}",
                ConvergenceWarning,
                stacklevel=user_stacklevel(),
            )
        w = data.w
        ww = None if w is None else w
        wl = losses if ww is None else losses * ww
        sw = st.sw
        mean = float(wl.sum().compute()) / sw
        dev = (losses - mean) ** 2 if ww is None else ww * (losses - mean) ** 2
        m2 = float(dev.sum().compute())
        return DaskLOOResult(
            losses,
            preds,
            None,
            method,
            fitres,
            mean,
            _stderr((sw, mean, m2), data.n),
            data.w,
            n_not_converged=n_nc,
        )
    keep = "persist" if _client() is not None else "lazy"
    alo = method == "alo"
    st, (outs, stats, hgrad, diag) = _alo_settled(
        data, st, tol, return_gradient, keep, method, screen=True
    )
    fitres = _fit_result(data, st)
    arrs = [_per_sample(outs, data, k) for k in _PER_SAMPLE]
    # the in-memory diagnostics, from what the leverage pass reduced
    if data.loss == "logistic":
        check_separation_margin(diag["margin"], data.pen, data.l1, warn=True)
    warn_unreliable_count(
        int(diag["n_unreliable"]),
        data.n,
        data.loss,
        data.l1 is not None,
    )
    warn_ill_conditioned(_rcond(st.H))
    grad = None
    if hgrad is not None:
        grad = data.penalty.chain(hgrad[1], hgrad[0])
    sw, mean, _ = stats
    exact = data.loss == "squared" and data.l1 is None  # PRESS: ALO is exact
    # the indicator (certify() reads it whatever the method) and plain ALO's screen
    sees = indicator_sees_the_error(data.loss, data.l1 is not None)
    ind = Indicator(outs, data.X.chunks[0], data.loss, diag["screen"], mean, sw, exact, sees)
    return DaskLOOResult(
        arrs[0],
        arrs[1],
        arrs[2],
        method,
        fitres,
        float(mean),
        _stderr(stats, data.n),
        data.w,
        grad,
        arrs[3],
        unreliable=(
            unreliable_array(ind.array, arrs[0], arrs[3], float(mean))
            if alo
            else arrs[3].map_blocks(unreliable_mask, dtype=bool)
        ),
        indicator=ind.array if alo else None,
        _screen=ind.screen if alo else None,
        _refits=subset_refits(
            _per_sample(outs, data, "change"),
            ind.array,
            functools.partial(_refit_losses, data, st, tol=tol, max_iter=max_iter),
            tol,
            exact=exact,
            screened=sees,
        ),
    )
