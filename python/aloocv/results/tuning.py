"""The result of :func:`aloocv.tune`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..penalties import Penalty
from .fits import FitResult
from .kfold import KFoldResult
from .loo import LOOResult

__all__ = ["TuneResult"]


# ----------------------------------------------------------------------------- tuning
@dataclass
class TuneResult:
    """The outcome of :func:`aloocv.tune`.

    Attributes
    ----------
    penalty : Penalty
        The selected penalty.
    fit : FitResult
        The fit at the selected penalty.
    loo : LOOResult, KFoldResult or None
        ALO at the selected penalty (``loo.mean`` is :attr:`acv`; a ``DaskLOOResult``
        with dask per-sample arrays on dask input); with ``rtol=`` the refined estimate
        there (``loo(..., rtol=rtol)``: its ``error_estimate`` says which samples were
        refitted and the estimated error); None after :meth:`without_samples`. The
        search of an estimator with ``cv=`` (e.g. ``ALOLogisticRegressionCV(cv=5)``)
        scores its candidates by approximate K-fold: then the :class:`KFoldResult` there,
        and :attr:`acv`, :attr:`stderr` and :attr:`history` hold K-fold estimates.
    acv, stderr : float
        ALOOCV estimate at the selected penalty and its standard error (refined with
        ``rtol=``).
    history : dict of ndarray
        Per evaluation (grid point or iterate), in order: ``"params"`` (T, m) penalty
        parameters, ``"acv"`` and ``"stderr"`` (T,), ``"grad"`` (T, m) the derivative
        of ACV in ``log(params)`` (NaN where not computed), ``"n_fits"`` (T,)
        cumulative refits, ``"refined"`` (T,) bool: the row holds the refined estimate
        (``rtol=``; on a grid the refined value replaces ALO's at that point, a gradient
        search appends its refined evaluations), ``"plain_acv"`` (T,) plain ALO at the
        row's point (equal to ``"acv"`` where not refined).
    method : str
    n_iter : int
        Iterations (grid points for ``"grid"``).
    n_fits : int
        Warm-started refits (each a few Hessian passes; SGD counts Newton steps).
    converged : bool
        The stopping test passed: for gradient methods, the (projected) gradient in
        ``log(lambda)`` fell below ``tol * |acv|``; grids always converge.
    message : str
        Why the search stopped (and, with ``rtol=``, what the refinement did).
    rtol : float or None
        The error budget of the refinement (None: plain ALO throughout).
    path_losses, path_predictions : ndarray, optional
        Grid points (``"grid"``, and the bracketing grid of ``"auto"``): per-sample
        leave-one-out losses ``(n, T)`` and linear predictors ``(n, T)`` (``(n, K, T)``
        multinomial; ``"grid"`` only), columns in the order of ``history``. On dask
        input they are dask arrays with X's row chunks (computed by the workers, held
        there on a distributed client): only per-point means, standard errors and
        gradients reach the client.
    path_coefs, path_intercepts, path_n_iter : ndarray, optional
        Grid points: coefficients ``(T, p)`` (``(T, K, p)``), intercepts ``(T,)``
        (``(T, K)``) and Newton iterations ``(T,)`` of each warm-started fit.
    path_hessian_passes, path_matvec_passes : ndarray, optional
        ``method="grid"``: passes over X of each grid point's fit (and of ALO's refresh of
        its factor, if any), from the core's counters: Hessian passes (``O(n p^2)`` each)
        and matrix-vector passes (``O(n p)`` each: Newton and chord steps, gradients),
        ``(T,)`` integers; None where the route does not count them (the squared-loss
        ridge path, dask, multinomial matrix-vector passes). ALO adds one leverage pass
        per point on top.
    """

    penalty: Penalty
    fit: FitResult
    loo: LOOResult | KFoldResult | None
    acv: float
    stderr: float
    history: dict[str, np.ndarray]
    method: str
    n_iter: int
    n_fits: int
    converged: bool
    selection: str = "min"
    message: str = ""
    path_losses: np.ndarray | None = field(default=None, repr=False)
    _best_index: int = field(default=-1, repr=False)
    rtol: float | None = None
    path_predictions: np.ndarray | None = field(default=None, repr=False)
    path_coefs: np.ndarray | None = field(default=None, repr=False)
    path_intercepts: np.ndarray | None = field(default=None, repr=False)
    path_n_iter: np.ndarray | None = field(default=None, repr=False)
    path_hessian_passes: np.ndarray | None = field(default=None, repr=False)
    path_matvec_passes: np.ndarray | None = field(default=None, repr=False)

    def without_samples(self) -> TuneResult:
        """A copy without the per-sample arrays (``loo``, ``path_losses``,
        ``path_predictions``): what a fitted estimator keeps unless asked for them."""
        return dataclasses.replace(self, loo=None, path_losses=None, path_predictions=None)

    def plot(self, ax: Any = None, **kwargs: Any) -> Any:
        """ACV against lambda (grid) or ACV and lambda per iteration (gradient runs).

        Needs matplotlib (``pip install aloocv[plot]``); returns an
        :class:`aloocv.plotting.TuneDisplay` (its ``figure_`` and ``axes_`` hold the
        plot).
        """
        from ..plotting import plot_tune

        return plot_tune(self, ax=ax, **kwargs)
