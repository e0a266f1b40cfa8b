"""Leave-one-out results: in memory, on dask, for several targets; and what their
certificate asks of the backend that made them."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .._diagnostics import ALO_UNRELIABLE_DH, user_stacklevel, warn_alo_error
from .._stats import weighted_mean_columns, weighted_stderr, weighted_stderr_columns
from .certificate import Certificate, certificate_design, certificate_from, check_certify_options
from .fits import FitResult
from .trust import (
    WARN_RTOL,
    ErrorEstimate,
    Gathered,
    Screen,
    calibration_of,
    check_screen,
    refine,
    self_check,
    unreliable_chunk,
    unreliable_from,
)

__all__ = ["DaskLOOResult", "LOOResult", "MultiTargetLOOResult", "SubsetRefits"]


# ----------------------------------------------------------------------------- leave-one-out
@dataclass(frozen=True, eq=False)
class SubsetRefits:
    """What :meth:`LOOResult.certify` asks of the backend that made the result.

    Attributes
    ----------
    gather : callable
        ``gather(result) -> Gathered``: the result's leave-one-out losses, error indicator,
        loss change (the leave-one-out loss minus the in-sample loss at the fit) and
        weights as numpy arrays (:class:`aloocv.results.trust.Gathered`); on dask input
        computed over the chunks (n floats each; X stays on the workers).
    refit : callable
        ``refit(rows) -> (exact losses of those samples, refits not at tol)``: exact
        refits without each sample, warm-started at the fit (the route's own).
    tol : float
        The fit tolerance the refits are solved to.
    """

    gather: Callable[[Any], Gathered]
    refit: Callable[[np.ndarray], tuple[np.ndarray, int]]
    tol: float


def _certify(res: Any, n_samples, random_state, confidence, n_worst) -> Certificate:
    """:meth:`LOOResult.certify` of an in-memory or dask result."""
    if res.method == "exact":
        raise ValueError("an exact result needs no certificate (method='exact')")
    if res._refits is None:
        raise ValueError(
            "this result does not carry its problem (it was not made by aloocv.loo); "
            "call aloocv.loo(...).certify()"
        )
    confidence = check_certify_options(n_samples, n_worst, confidence)
    g = res._refits.gather(res)
    losses, w = g.losses, g.weights
    design = certificate_design(g.indicator, g.change, w, n_samples, n_worst, random_state)
    idx = design.refits
    exact, n_nc = res._refits.refit(np.asarray(idx, dtype=np.int64))
    if n_nc:
        warnings.warn(
            f"certificate: {n_nc} of {idx.size} exact refits did not reach tol={res._refits.tol:g}",
            ConvergenceWarning,
            stacklevel=user_stacklevel(),
        )
    return certificate_from(losses, exact, design, w, res.mean, confidence, res.method)


def _warn_refits(n_nc: int, n_refits: int, tol: float, what: str) -> None:
    if n_nc:
        warnings.warn(
            f"{what}: {n_nc} of {n_refits} exact refits did not reach tol={tol:g}",
            ConvergenceWarning,
            stacklevel=user_stacklevel(),
        )


def _flags(res: Any, g: Gathered | None, est: ErrorEstimate, screen: Screen | None = None) -> Any:
    """The unreliable flags recalibrated by what the refits measured (ALO's losses): of a
    dask result chunk by chunk, from its ``screen`` (the self-check) or ``g`` (gathered
    for the refinement)."""
    if isinstance(res, LOOResult):
        dh = None if res.downdate is None else _dh_flag(res)
        measured = (est.refitted, est.exact_losses)
        return unreliable_from(g.indicator, g.losses, g.weights, dh, measured)
    import dask.array as da

    rows, exact = est.refitted, est.exact_losses
    if g is None:  # the self-check's rows: the screen's top, sorted as est's
        srt = np.argsort(screen.rows)
        alo, ind = screen.losses[srt], screen.indicator[srt]
    else:
        alo, ind = g.losses[rows], g.indicator[rows]
    calib = calibration_of(np.abs(alo - exact), ind)
    return da.map_blocks(
        unreliable_chunk,
        res.indicator,
        res.losses,
        res.downdate,
        res.mean,
        1.0 if calib is None else calib,
        rows,
        exact,
        dtype=bool,
    )


def _dh_flag(res: Any) -> np.ndarray:
    d = np.asarray(res.downdate)
    return d < 1.0 - ALO_UNRELIABLE_DH


def trusted(res: Any, rtol: float | None, random_state: Any = 0) -> Any:
    """An ALO result after its self-check (``rtol=None``: exact refits of the samples the
    error indicator ranks first, only when it says there is risk; an ``ALOWarning`` when
    the estimated error of the mean exceeds ``WARN_RTOL``) or refined to ``rtol``
    (``docs/math/trust.md``); the unreliable flags recalibrated by the refits. Other
    methods and results without their problem come back as they are. A dask result
    self-checks from its screen, reduced in the leverage pass (no n-sized array reaches
    the client; with risk, the top samples' rows are refitted); its refinement gathers n
    floats of the losses, the indicator and the loss change."""
    if res.method != "alo" or getattr(res, "_refits", None) is None:
        return res
    refit, tol = res._refits.refit, res._refits.tol
    if rtol is None:
        lazy = getattr(res, "_screen", None)
        g = screen = None
        if lazy is not None:
            screen = lazy()
            est, n_nc = check_screen(screen, refit)
        else:
            g = res._refits.gather(res)
            est, n_nc = self_check(g, refit)
        if est is None:
            return res
        _warn_refits(n_nc, est.n_refits, tol, "ALO self-check")
        warn_alo_error(est.relative_error, est.n_refits, WARN_RTOL)
        flags = _flags(res, g, est, screen)
        return dataclasses.replace(res, error_estimate=est, unreliable=flags)
    g = res._refits.gather(res)
    losses, est, n_nc = refine(g, refit, rtol, random_state=random_state)
    _warn_refits(n_nc, est.n_refits, tol, f"loo(rtol={rtol:g})")
    flags = _flags(res, g, est)
    if isinstance(res, LOOResult):
        return dataclasses.replace(res, losses=losses, error_estimate=est, unreliable=flags)
    import dask.array as da

    w = g.weights
    return dataclasses.replace(
        res,
        losses=da.from_array(losses, chunks=res.losses.chunks),
        mean=float(np.average(losses, weights=w)),
        stderr=weighted_stderr(losses, w),
        error_estimate=est,
        unreliable=flags,
    )


@dataclass
class LOOResult:
    """Per-sample leave-one-out results.

    Attributes
    ----------
    losses : ndarray of shape (n_samples,)
        ``l(y_i, eta~_i)``: the loss of sample i under the model fitted without it
        (for ``"lemma3"`` the first-order expansion of that loss).
    predictions : ndarray of shape (n_samples,) or (n_samples, K)
        Leave-one-out linear predictors ``eta~_i`` (class scores for
        ``loss="multinomial"``).
    leverages : ndarray of shape (n_samples,), (n_samples, K, K) or None
        ``h_i = x~_i^T H^{-1} x~_i`` (None for ``"exact"``); multinomial: the blocks
        ``K_i = X~_i H^{-1} X~_i^T`` (``K_i[a, b] = x~_i^T (H^{-1})_{ab} x~_i``).
    method : str
    fit : FitResult
        The full-data fit the estimate is built on.
    sample_weight : ndarray or None
        Weights of the weighted mean.
    gradient : ndarray or None
        With ``return_gradient=True``: the derivative of :attr:`mean` with respect to
        the penalty's parameters (``penalty.params()``: ``[lam]`` for a scalar L2, the
        per-feature vector for a vector L2, one per group for ``L2(lam, groups=...)``,
        ``[l1, l2]`` for a scalar elastic net; with an L1 term the active set and its
        signs are held fixed, as the estimate holds them). Exact by default (see
        ``gradient=`` of :func:`loo`).
    downdate : ndarray of shape (n_samples,) or None
        ``1 - d_i h_i``, the factor of the rank-one downdate the closed forms divide by
        (None for ``"exact"``; 1 for zero-weight samples).
    unreliable : ndarray of bool, shape (n_samples,), or None
        Samples whose ALO value is unreliable (None for ``"exact"``): the error indicator
        exceeds ``UNRELIABLE_ERROR`` (10%) of the sample's loss (or of the mean loss), or
        ``d_i h_i > aloocv.ALO_UNRELIABLE_DH`` (0.99: leverage near 1; an
        :class:`aloocv.ALOWarning` gives their count, not for the squared loss with an L2
        penalty, where ALO is exact). :meth:`certify` measures the actual error.
    indicator : ndarray of shape (n_samples,) or None
        ALO's per-sample error indicator: the second-order estimate of ``|ALO loss - exact
        LOO loss|`` (``docs/math/trust.md``); it ranks the samples the self-check, the
        refinement (``rtol=``) and :meth:`certify` refit. None for other methods.
    error_estimate : ErrorEstimate or None
        What exact refits measured of the error of :attr:`mean`: the self-check of plain
        ALO (made only when the indicator says there is risk; None otherwise), or the
        refinement of ``rtol=`` (the refitted samples' ``losses`` are exact; their
        ``predictions`` stay ALO's).
    randomized : RandomizedLeverages or None
        On the matrix-free route (``solver="matrix_free"``): how the leverages were
        estimated (probes, the estimator, the standard error the randomization adds to
        :attr:`mean`, each leverage's standard error); ``losses`` are then the jackknife's
        debiased values (their mean is :attr:`mean`), ``predictions`` and ``leverages``
        the plug-in ones (``docs/math/matrix_free.md``). None on the other routes.
    """

    losses: np.ndarray
    predictions: np.ndarray
    leverages: np.ndarray | None
    method: str
    fit: FitResult
    sample_weight: np.ndarray | None = None
    gradient: np.ndarray | None = None
    downdate: np.ndarray | None = None
    unreliable: np.ndarray | None = None
    indicator: np.ndarray | None = None
    error_estimate: ErrorEstimate | None = None
    randomized: Any = None
    # the backend's exact refits of this result's problem, for certify()
    _refits: SubsetRefits | None = field(default=None, repr=False, compare=False)

    @property
    def mean(self) -> float:
        """The (weighted) mean leave-one-out loss: the cross-validation estimate."""
        return float(np.average(self.losses, weights=self.sample_weight))

    @property
    def stderr(self) -> float:
        """Standard error of :attr:`mean` (weights act as frequency weights)."""
        return weighted_stderr(self.losses, self.sample_weight)

    def __repr__(self) -> str:
        return (
            f"LOOResult(method={self.method!r}, n={self.losses.shape[0]}, "
            f"mean={self.mean:.6g}, stderr={self.stderr:.3g})"
        )

    def certify(
        self,
        n_samples: int = 20,
        random_state: Any = 0,
        confidence: float = 0.95,
        n_worst: int | None = None,
    ) -> Certificate:
        """Measures this approximate result against exact leave-one-out refits.

        Refits the problem exactly without each of at most ``n_samples`` samples (the
        core's exact-LOO refits, warm-started from the fit, on those samples only): a census
        of the samples :attr:`indicator` ranks first (at least ``n_samples // 5``, more where
        the indicator is concentrated, at most half of the refits; ``n_worst`` fixes the
        number), and draws from the others with probabilities proportional to the indicator
        (importance sampling, mixed with 10% uniform). Returns the per-sample errors, their
        median and maximum, and the estimated error of :attr:`mean` with a confidence
        interval that accounts for the heavy tail of the errors, or None bounds when the
        draws cannot give one (see :class:`aloocv.Certificate` for the design, the estimator
        and its measured coverage). Costs at most ``n_samples`` refits; with ``n_samples >=
        n`` it is the exact error.

        Examples
        --------
        >>> import numpy as np, aloocv
        >>> rng = np.random.default_rng(0)
        >>> X = rng.standard_normal((200, 5)); y = (X[:, 0] > 0) * 1.0
        >>> c = aloocv.loo(X, y, penalty=aloocv.L2(1.0)).certify(n_samples=10)
        >>> (c.n_worst, c.n_draws)
        (2, 8)
        """
        return _certify(self, n_samples, random_state, confidence, n_worst)


@dataclass(repr=False)
class DaskLOOResult:
    """Leave-one-out results of dask input (:func:`aloocv.loo` with a dask X).

    Attributes
    ----------
    losses, predictions, leverages, downdate : dask arrays of shape (n_samples,)
        As in :class:`aloocv.LOOResult`, chunked like X's rows (None where the method
        has none). On a ``dask.distributed`` client they are persisted in the workers'
        memory; without one they are lazy (computing them reads X once more).
    mean, stderr : float
        Reduced over the chunks in the leverage pass.
    method : str
    fit : FitResult
    sample_weight : dask array or None
    gradient : ndarray or None
        As in :class:`aloocv.LOOResult`.
    unreliable : dask array of bool or None
        As in :class:`aloocv.LOOResult` (None for ``"exact"``), chunk by chunk: for
        ``"alo"`` the error indicator above ``UNRELIABLE_ERROR`` of the sample's loss (or
        of the mean loss, reduced in the leverage pass) or ``d_i h_i >
        ALO_UNRELIABLE_DH``; for the other methods the latter. The count of the latter is
        reduced in the leverage pass and warned about as in memory.
    indicator : dask array or None
        ALO's per-sample error indicator, as in :class:`aloocv.LOOResult` (None for other
        methods), chunked like X's rows: computed chunk by chunk from the leverage pass's
        outputs (held by the workers on a distributed client; lazy without one, when
        computing it recomputes that pass) with ``rho`` and the reach's ``hbar`` reduced
        in it.
    error_estimate : ErrorEstimate or None
        As in :class:`aloocv.LOOResult`. Plain ALO's self-check decides on a bound
        reduced in the leverage pass (``rho sum w J >= sum w I``, the reach at most 1);
        only where that bound says there is risk (the multinomial loss: always) a second
        pass over the leverage pass's outputs computes the exact sum and the top-ranked
        samples' values; no n-sized array reaches the client. With ``rtol=`` the losses
        (n floats, gathered to the client to rank and draw the samples) come back as a
        dask array of the refined values.
    """

    losses: Any
    predictions: Any
    leverages: Any
    method: str
    fit: Any
    mean: float
    stderr: float
    sample_weight: Any = None
    gradient: np.ndarray | None = None
    downdate: Any = None
    n_not_converged: int = field(default=0, repr=False)
    unreliable: Any = None
    indicator: Any = None
    error_estimate: ErrorEstimate | None = None
    # what certify() asks of the backend (None: a result not made by aloocv.loo, or exact)
    _refits: SubsetRefits | None = field(default=None, repr=False, compare=False)
    # plain ALO's self-check: its screen, computed when called (None: not ALO)
    _screen: Callable[[], Screen] | None = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        return (
            f"DaskLOOResult(method={self.method!r}, n={self.losses.shape[0]}, "
            f"mean={self.mean:.6g}, stderr={self.stderr:.3g})"
        )

    def certify(
        self,
        n_samples: int = 20,
        random_state: Any = 0,
        confidence: float = 0.95,
        n_worst: int | None = None,
    ):
        """:meth:`aloocv.LOOResult.certify` on dask input: the same design and estimator
        (:class:`aloocv.Certificate`), the exact refits run over the chunks.

        The error indicator, the loss change, the approximate losses and the weights (n
        floats each) are gathered to the client to draw the samples; X is not. Each of the at most
        ``n_samples`` refits is a fit over the chunks warm-started at the full fit (the
        problem with the sample's weight set to zero; the elastic-net route with an L1
        term), a few passes over X each.
        """
        return _certify(self, n_samples, random_state, confidence, n_worst)


# ----------------------------------------------------------------------------- several targets
@dataclass
class MultiTargetLOOResult:
    """Leave-one-out results for several targets (squared loss, L2 penalty).

    What :func:`aloocv.loo` returns for a 2-d ``y`` of shape ``(n_samples, n_targets)``.

    Attributes
    ----------
    losses : ndarray of shape (n_samples, n_targets)
        ``1/2 (y_it - eta~_it)^2`` (for ``"lemma3"`` the first-order expansion).
    predictions : ndarray of shape (n_samples, n_targets)
        Leave-one-out predictions ``eta~_it`` (for ``"if"`` the influence-function ones).
    leverages : ndarray of shape (n_samples,) or None
        ``h_i`` (the same for every target; None for ``"exact"``).
    method : str
    coef : ndarray of shape (n_targets, n_features)
        The full-data fit, one row per target (scikit-learn's layout).
    intercept : ndarray of shape (n_targets,)
    sample_weight : ndarray or None
        Weights of the weighted means.
    """

    losses: np.ndarray
    predictions: np.ndarray
    leverages: np.ndarray | None
    method: str
    coef: np.ndarray
    intercept: np.ndarray
    sample_weight: np.ndarray | None = None

    @property
    def n_targets(self) -> int:
        return int(self.losses.shape[1])

    @property
    def mean(self) -> np.ndarray:
        """(n_targets,) (weighted) mean leave-one-out loss of each target."""
        return weighted_mean_columns(self.losses, self.sample_weight)

    @property
    def stderr(self) -> np.ndarray:
        """(n_targets,) standard error of :attr:`mean` (weights act as frequency weights)."""
        return weighted_stderr_columns(self.losses, self.sample_weight)

    def __repr__(self) -> str:
        return (
            f"MultiTargetLOOResult(method={self.method!r}, n={self.losses.shape[0]}, "
            f"n_targets={self.n_targets})"
        )
