"""How far approximate leave-one-out (ALO) is from exact leave-one-out, and how to bring it
within a budget: the per-sample error indicator, the self-check of plain ALO and the
refinement to a relative tolerance (``docs/math/trust.md``).

ALO is one Newton step from the full fit on each leave-one-out objective. Its error is the
residual of that step, which comes from the change of curvature along it; to second order
(``docs/math/trust.md``, "The indicator") the error of sample i's loss is about

    I_i = 1/2 |l'(y_i, eta~_i)| rho r_i (eta~_i - eta_i)^2 / h_i,
    rho = sum_j w_j |l3_j| / sum_j w_j l2_j,   r_i = min(1, sqrt(h_i hbar) / t_i),

the square of the sample's leave-one-out shift over its leverage, scaled by the loss's
relative third derivative and the reach of the step (``hbar`` the d-weighted mean
leverage). It ranks the samples whose ALO values carry the error; exact refits of the
top-ranked ones measure it, and importance sampling guided by it estimates what is left.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._diagnostics import unreliable_mask

__all__ = [
    "BUDGET_DRAWS",
    "CHECK_REFITS",
    "RISK_RTOL",
    "UNRELIABLE_ERROR",
    "WARN_RTOL",
    "ErrorEstimate",
    "Gathered",
    "Screen",
    "bounded",
    "calibration_of",
    "check_screen",
    "indicator_sees_the_error",
    "mean_leverage",
    "multinomial_indicator",
    "multinomial_reach_terms",
    "refine",
    "scalar_indicator",
    "self_check",
    "unreliable_chunk",
    "unreliable_from",
]

#: Plain ALO checks itself by exact refits when its indicator's estimate of the error of
#: the mean exceeds this share of the mean (the indicator over-states the error 1-4x on
#: real data, ``docs/math/trust.md``); below it no refit is made.
RISK_RTOL = 2e-3
#: Plain ALO warns (``ALOWarning``) when the self-check estimates the error of the mean
#: above this share of the exact leave-one-out mean.
WARN_RTOL = 0.02
#: Exact refits of the self-check: the samples the indicator ranks first.
CHECK_REFITS = 10
#: Importance-sampling draws per round of the refinement (``rtol=``).
BUDGET_DRAWS = 20
#: A sample is flagged unreliable when its indicator exceeds this share of its loss (or of
#: the mean loss, whichever is larger).
UNRELIABLE_ERROR = 0.1
#: The refinement sizes its census with the indicator scaled by this many times its
#: measured calibration (``sum |ALO - exact| / sum I`` on the refitted samples).
CENSUS_SAFETY = 1.0
#: ``rtol=`` needs no refit when this many times the (scalar) indicator's estimate of the
#: error of the mean is within the budget: the indicator under-states the error at most
#: 3x on the real data of ``docs/math/trust.md``.
INDICATOR_SAFETY = 10.0
#: Share of the refinement's draws that follow the indicator (the rest follow the ALO
#: loss change, then uniform: a defensive mixture).
_INDICATOR_SHARE = 0.6
_CHANGE_SHARE = 0.35


@dataclass(frozen=True)
class Gathered:
    """Per-sample values of a leave-one-out result as numpy arrays (gathered to the client
    for dask input): what the certificate and the refinement choose samples by.

    Attributes
    ----------
    losses : ndarray
        The approximate leave-one-out losses.
    indicator : ndarray
        The error indicator ``I_i`` (module docstring).
    change : ndarray
        ``l(y_i, eta~_i) - l(y_i, eta_i)``: how far the approximation moves the loss from
        its in-sample value.
    weights : ndarray or None
    at_rows : callable or None
        ``at_rows(rows) -> (losses, indicator)``: ALO's losses and indicator of some samples
        with their exact leverages, where the route's leverages are estimates (the
        matrix-free route): the self-check then measures ALO's own error on the samples it
        refits, not the noise of their estimated leverages.
    """

    losses: np.ndarray
    indicator: np.ndarray
    change: np.ndarray
    weights: np.ndarray | None
    exact: bool = False
    screened: bool = True
    at_rows: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None


@dataclass(frozen=True)
class ErrorEstimate:
    """What is known of the error of a leave-one-out result's :attr:`mean` against exact
    leave-one-out, from exact refits of some samples.

    Attributes
    ----------
    kind : {"check", "budget", "screened"}
        ``"check"``: plain ALO's self-check (refits of the top-ranked samples, the rest
        extrapolated by the indicator; the losses are ALO's). ``"budget"``: the refinement
        of ``rtol=`` (the refitted samples' losses are exact; the rest is estimated by
        importance sampling with an interval). ``"screened"``: ``rtol=`` met without a
        refit: ``INDICATOR_SAFETY`` times the indicator's estimate of the error is within
        the budget (the interval is that bound, not a sampling interval).
    error : float
        Estimated error of the reported mean (reported minus exact LOO mean). For
        ``"check"`` a magnitude (>= 0): the refits' error plus the indicator's estimate of
        the rest.
    ci_low, ci_high : float or None
        The ``confidence`` interval of ``error`` (``"budget"`` only).
    relative_error : float
        ``error`` over the estimated exact mean.
    confidence : float or None
    rtol : float or None
        The budget (``"budget"`` only).
    met : bool or None
        Whether the interval lies within ``rtol`` of the exact mean (``"budget"`` only).
    refitted : ndarray of int
        The samples refitted exactly, in increasing order (their losses in the result are
        exact for ``"budget"``).
    exact_losses : ndarray
        Their exact leave-one-out losses.
    n_refits : int
        Exact refits made.
    plain_mean : float
        Plain ALO's mean, before any refinement.

    Examples
    --------
    >>> import aloocv
    >>> from sklearn.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = (X - X.mean(0)) / X.std(0)
    >>> res = aloocv.loo(X, y * 1.0, penalty=aloocv.L2(1e-3), rtol=0.01)
    >>> est = res.error_estimate
    >>> (est.kind, est.met, abs(est.plain_mean / res.mean - 1) > 0.1)
    ('budget', True, True)
    """

    kind: str
    error: float
    relative_error: float
    refitted: np.ndarray
    exact_losses: np.ndarray
    n_refits: int
    plain_mean: float
    ci_low: float | None = None
    ci_high: float | None = None
    confidence: float | None = None
    rtol: float | None = None
    met: bool | None = None

    def __str__(self) -> str:
        if self.kind == "check":
            return (
                f"ALO self-check: error of the mean about {100 * self.relative_error:.2g}% "
                f"(exact refits of {self.n_refits} samples)"
            )
        if self.kind == "screened":
            return (
                f"ALO within rtol={self.rtol:g} without a refit: its error indicator bounds "
                f"the error of the mean by {self.ci_high:.3g}"
            )
        return (
            f"ALO refined to rtol={self.rtol:g}: {self.n_refits} exact refits, estimated error "
            f"{self.error:+.3g} ({100 * self.confidence:g}% CI [{self.ci_low:+.3g}, "
            f"{self.ci_high:+.3g}]; {100 * self.relative_error:+.2g}%), "
            + ("within budget" if self.met else "NOT within budget")
        )


# ----------------------------------------------------------------------------- indicator
def indicator_rho(w: np.ndarray | None, d2: np.ndarray, d3: np.ndarray) -> float:
    """``sum_j w_j |l3_j| / sum_j w_j l2_j``: the loss's relative third derivative."""
    ww = 1.0 if w is None else w
    with np.errstate(over="ignore", invalid="ignore"):
        den = np.sum(ww * d2)
        num = np.sum(ww * np.abs(d3))
        rho = num / den if den > 0 else np.float64(0.0)
    return float(rho) if np.isfinite(rho) else math.inf


def mean_leverage(sum_dh: Any, sum_dhh: Any) -> np.float64:
    """``hbar = sum d h^2 / sum d h`` from its two sums (0 where the first is not
    positive): the d-weighted mean leverage of the reach."""
    with np.errstate(over="ignore", invalid="ignore"):
        den = np.float64(sum_dh)
        return np.float64(sum_dhh) / den if den > 0 else np.float64(0.0)


def _reach(h: np.ndarray, d: np.ndarray, hbar: float | None = None) -> np.ndarray:
    """``min(1, sqrt(h_i hbar) / t_i)``: the size of the kernel entries ``K_ij / t_i``
    through which the step's curvature change reaches sample i (Cauchy-Schwarz with the
    d-weighted mean leverage ``hbar = sum d h^2 / sum d h``, of these samples unless
    given), at most 1; ``hbar = inf`` gives the bound 1 everywhere."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        dh = d * h
        if hbar is None:
            hbar = mean_leverage(np.sum(dh), np.sum(dh * h))
        t = np.maximum(1.0 - dh, np.finfo(float).eps)
        r = np.minimum(1.0, np.sqrt(np.maximum(h, 0.0) * hbar) / t)
    return np.where(np.isnan(r), 1.0, r)


def _finish(out: np.ndarray, h: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    """Infinite where the formula is not finite at a positive leverage; 0 at zero
    leverage or weight."""
    out = np.where((h > 0) & np.isfinite(out), out, np.where(h > 0, np.inf, 0.0))
    if weights is not None:
        out[weights <= 0] = 0.0
    return out


def indicator_sees_the_error(loss: Any, has_l1: bool) -> bool:
    """Whether the scalar indicator's size may screen: False with an L1 term (ALO's error
    then includes the active set's change, which the expansion does not see) and for the
    Huber loss (its curvature jumps where the expansion assumes a third derivative)."""
    return not has_l1 and getattr(loss, "name", loss) != "huber"


def scalar_indicator(
    loss: Any,
    y: np.ndarray,
    eta: np.ndarray,
    eta_tilde: np.ndarray,
    leverages: np.ndarray,
    weights: np.ndarray | None,
    rho: float | None = None,
    hbar: float | None = None,
) -> np.ndarray:
    """The error indicator ``I_i`` of a scalar-eta loss (module docstring); 0 for losses
    without third derivative (the squared loss, where ALO with an L2 penalty is exact) and
    for samples with zero leverage or weight. ``rho`` and the reach's ``hbar`` when known
    (reduced over the chunks of dask input), else computed from these samples;
    ``rho=1, hbar=inf`` give ``I_i / (rho r_i)`` (``rho`` times it bounds ``I_i``: the
    reach is at most 1)."""
    d2, d3 = loss.derivatives(y, eta, (2, 3))
    if rho is None:
        rho = indicator_rho(weights, d2, d3)
    if rho == 0.0:
        return np.zeros(eta.shape[0])
    (g_t,) = loss.derivatives(y, eta_tilde, (1,))
    shift = eta_tilde - eta
    d = d2 if weights is None else weights * d2
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = 0.5 * np.abs(g_t) * rho * shift * shift / leverages * _reach(leverages, d, hbar)
    return _finish(out, leverages, weights)


def multinomial_indicator(
    y: np.ndarray,
    eta: np.ndarray,
    eta_tilde: np.ndarray,
    blocks: np.ndarray,
    weights: np.ndarray | None,
    hbar: float | None = None,
) -> np.ndarray:
    """The indicator for the multinomial loss (class codes ``y``, scores ``eta`` and
    ``eta_tilde`` of shape (n, K), leverage blocks ``K_i`` of shape (n, K, K)): ``|g|`` the
    norm of the cross-entropy's gradient at the leave-one-out scores, the shift's squared
    norm over ``h_i`` the mean diagonal of the block without its gauge direction
    (``C K_i C / (K - 1)``, ``C = I - 1 1^T / K``), ``d_i`` the mean of the diagonal of
    the loss Hessian ``diag(p) - p p^T``, and ``rho = 1`` (the softmax's third derivative
    along a direction is bounded by its second times the largest score change,
    ``docs/math/trust.md``). ``hbar`` as in :func:`scalar_indicator`."""
    n = eta.shape[0]
    z = np.exp(eta_tilde - eta_tilde.max(axis=1, keepdims=True))
    z /= z.sum(axis=1, keepdims=True)
    z[np.arange(n), np.asarray(y).astype(np.intp)] -= 1.0
    g = np.linalg.norm(z, axis=1)
    shift = np.sum((eta_tilde - eta) ** 2, axis=1)
    h, d = multinomial_reach_terms(eta, blocks, weights)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = 0.5 * g * shift / h * _reach(h, d, hbar)
    return _finish(out, h, weights)


def multinomial_reach_terms(
    eta: np.ndarray, blocks: np.ndarray, weights: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """The multinomial indicator's ``h_i`` (the mean diagonal of the leverage block
    without its gauge direction) and ``d_i`` (the weighted mean diagonal of
    ``diag(p) - p p^T``) of :func:`multinomial_indicator`."""
    K = eta.shape[1]
    # the blocks without the gauge direction (1, ..., 1), along which no score moves
    C = np.eye(K) - 1.0 / K
    h = np.einsum("ab,iba->i", C, np.einsum("ab,ibc->iac", C, blocks)) / max(K - 1, 1)
    p = np.exp(eta - eta.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    d = np.sum(p * (1.0 - p), axis=1) / K
    if weights is not None:
        d = d * weights
    return h, d


def unreliable_from(
    indicator: np.ndarray,
    losses: np.ndarray,
    weights: np.ndarray | None,
    dh_flag: Any,
    measured: tuple[np.ndarray, np.ndarray] | None = None,
    mean: float | None = None,
    calibration: float | None = None,
) -> np.ndarray:
    """Samples whose indicator exceeds ``UNRELIABLE_ERROR`` of their loss (or of the mean
    loss, whichever is larger), or flagged by ``d_i h_i`` (``dh_flag``, may be None).

    With ``measured = (rows, exact losses)`` from exact refits, the indicator is first
    scaled by its calibration on this problem (``sum |ALO - exact| / sum I`` over the
    refitted rows), and the refitted rows are flagged by their measured error. ``mean``
    and ``calibration`` when known (reduced over the chunks of dask input, whose chunk's
    ``measured`` holds the refitted rows in it), else from these arrays."""
    if mean is None:
        mean = float(np.average(losses, weights=weights))
    mean = abs(float(mean))
    scale = np.maximum(np.abs(losses), mean)
    ind = indicator
    if measured is not None:
        rows, ex = measured
        err = np.abs(losses[rows] - ex)
        if calibration is None:
            calibration = calibration_of(err, indicator[rows])
    if calibration is not None:
        ind = indicator * calibration
    flag = ind > UNRELIABLE_ERROR * scale
    if measured is not None:
        flag[rows] = err > UNRELIABLE_ERROR * scale[rows]
    return flag if dh_flag is None else (flag | np.asarray(dh_flag, dtype=bool))


def calibration_of(errors: np.ndarray, indicator: np.ndarray) -> float | None:
    """``sum |ALO - exact| / sum I`` over refitted samples (their ``errors`` and
    ``indicator``): the indicator's calibration on the problem; None where the indicator
    has no finite positive mass there."""
    pred = float(np.sum(indicator))
    return float(np.sum(errors)) / pred if pred > 0 and np.isfinite(pred) else None


def unreliable_chunk(
    indicator: np.ndarray,
    losses: np.ndarray,
    downdate: np.ndarray,
    mean: float,
    calibration: float | None = None,
    rows: np.ndarray | None = None,
    exact: np.ndarray | None = None,
    block_info: Any = None,
) -> np.ndarray:
    """:func:`unreliable_from` on one row chunk of dask input (``dask.array.map_blocks``:
    ``block_info`` locates it): the ``d_i h_i`` flag from ``downdate = 1 - d_i h_i``, the
    reduced ``mean`` and, after exact refits, their ``calibration`` and the refitted
    ``rows`` (of the whole data) with their ``exact`` losses."""
    dh = unreliable_mask(downdate)
    measured = None
    if rows is not None:
        start, stop = block_info[0]["array-location"][0]
        inb = (rows >= start) & (rows < stop)
        measured = (np.asarray(rows[inb] - start, dtype=np.intp), exact[inb])
    return unreliable_from(indicator, losses, None, dh, measured, mean, calibration)


# ----------------------------------------------------------------------------- refits
#: ``refit(rows) -> (exact losses of those rows, refits not at tol)`` (SubsetRefits.refit).
Refit = Callable[[np.ndarray], tuple[np.ndarray, int]]


class _Exact:
    """The exact leave-one-out losses refitted so far (each sample refitted once)."""

    def __init__(self, refit: Refit, n: int) -> None:
        self._refit = refit
        self.values = np.full(n, np.nan)
        self.done = np.zeros(n, dtype=bool)
        self.n_not_converged = 0

    def get(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        new = np.unique(rows[~self.done[rows]])
        if new.size:
            vals, n_nc = self._refit(new)
            self.values[new] = vals
            self.done[new] = True
            self.n_not_converged += int(n_nc)
        return self.values[rows]

    @property
    def rows(self) -> np.ndarray:
        return np.flatnonzero(self.done)


def _weights(g: Gathered) -> np.ndarray:
    n = g.losses.shape[0]
    return np.ones(n) if g.weights is None else np.asarray(g.weights, dtype=np.float64)


def _ranked(g: Gathered, w: np.ndarray, first: int | None = None) -> np.ndarray:
    """Positive-weight samples by decreasing weighted indicator (ties: the loss change,
    then the row); ``first``: only the first ``first`` of that order, sorted among the
    samples whose indicator reaches the ``first``-th largest (ties included), not all n
    (a partition, O(n), instead of a sort: 3 ms at n = 2e4)."""
    cand = np.flatnonzero(w > 0)
    primary = -w[cand] * g.indicator[cand]
    if first is not None and 0 < first < cand.size:
        kth = np.partition(primary, first - 1)[first - 1]
        if not np.isnan(kth):  # NaNs rank last: then the whole sort
            keep = primary <= kth
            cand, primary = cand[keep], primary[keep]
    key = np.lexsort((-w[cand] * np.abs(g.change[cand]), primary))
    ranked = cand[key]
    return ranked if first is None else ranked[:first]


@dataclass(frozen=True)
class Screen:
    """What plain ALO's self-check reads, reduced over the samples (over the chunks for
    dask input: a bound in the leverage pass, with risk a second pass over its outputs;
    no n-sized array reaches the client).

    Attributes
    ----------
    total : float
        ``sum_i w_i I_i`` (inf when a term is not finite), or an upper bound of it that
        says there is no risk (dask input, whose screen then has no rows).
    mean : float
        The (weighted) mean ALO loss.
    weight : float
        The sum of the weights.
    rows : ndarray of int
        The (at most ``CHECK_REFITS``) samples ranked first: positive weight, by decreasing
        ``w_i I_i``, ties by the weighted loss change ``w_i |change_i|``, then the row.
    losses, indicator, weights : ndarray
        Their ALO losses, indicator ``I_i`` and weights.
    rest : float
        ``sum_i w_i I_i`` over the other samples.
    exact : bool
        ALO is exact (squared loss, L2 penalty): nothing to check.
    screened : bool
        Whether the indicator's estimate may skip the refits (False for the multinomial
        loss, whose indicator under-states the error: its self-check always refits).
    """

    total: float
    mean: float
    weight: float
    rows: np.ndarray
    losses: np.ndarray
    indicator: np.ndarray
    weights: np.ndarray
    rest: float
    exact: bool = False
    screened: bool = True

    @property
    def scores(self) -> np.ndarray:
        """``w_i I_i`` of :attr:`rows`."""
        return self.weights * self.indicator

    @property
    def at_risk(self) -> bool:
        """Whether the self-check refits: ALO is not exact and either the screen does not
        apply (:attr:`screened` False) or the indicator's estimate of the error of the mean
        exceeds ``RISK_RTOL`` of the mean."""
        return not self.exact and (not self.screened or not bounded(self.total, self))


def bounded(total: float, s: Screen) -> bool:
    """Whether ``total / s.weight`` (a sum of ``w_i I_i`` or an upper bound of it) is
    within ``RISK_RTOL`` of the mean of ``s`` (no risk: the self-check makes no refit)."""
    est = total / s.weight if math.isfinite(total) else math.inf
    return est <= RISK_RTOL * abs(s.mean)


def check_screen(s: Screen, refit: Refit) -> tuple[ErrorEstimate | None, int]:
    """Plain ALO's self-check from its :class:`Screen`: None (no refit) when the indicator
    estimates the error of the mean below ``RISK_RTOL``; otherwise exact refits of the
    screen's top-ranked samples, their measured error plus the rest's indicator scaled by
    what the refits measured (the indicator's calibration on this problem). Returns the
    estimate and the number of refits not at tol; None also where ALO is exact
    (``s.exact``) or a refit has no unique minimizer (the check is skipped)."""
    if not s.at_risk:
        return None, 0
    top = np.asarray(s.rows, dtype=np.int64)
    try:
        exact, n_nc = refit(top)
    except ValueError:
        # a refit without a unique minimizer (no penalty on a direction only that sample
        # reaches): there is no exact leave-one-out to check against; the d_i h_i flags
        # and the result's other warnings speak for it
        return None, 0
    e = s.weights * (s.losses - exact)
    known = float(np.sum(s.scores))
    ratio = float(np.sum(np.abs(e))) / known if known > 0 and math.isfinite(known) else 1.0
    err = abs(float(e.sum())) + max(ratio, 0.0) * s.rest
    err /= s.weight
    exact_mean = s.mean - float(e.sum()) / s.weight
    rel = err / abs(exact_mean) if exact_mean != 0 else math.inf
    srt = np.argsort(top)
    return (
        ErrorEstimate(
            kind="check",
            error=err,
            relative_error=rel,
            refitted=top[srt].astype(np.int64),
            exact_losses=np.asarray(exact, dtype=np.float64)[srt],
            n_refits=int(top.size),
            plain_mean=s.mean,
        ),
        n_nc,
    )


def self_check(g: Gathered, refit: Refit) -> tuple[ErrorEstimate | None, int]:
    """Plain ALO's self-check of in-memory values (:func:`check_screen` on their
    :class:`Screen`). Returns the estimate (None: no risk, no refit) and the number of
    refits not at tol."""
    if g.exact:
        return None, 0
    w = _weights(g)
    W = float(w.sum())
    mean = float(np.sum(w * g.losses)) / W
    score = w * g.indicator
    with np.errstate(over="ignore"):
        total = float(np.sum(score)) if np.all(np.isfinite(score)) else math.inf
    empty = np.zeros(0)
    screen = Screen(
        total, mean, W, np.zeros(0, dtype=np.int64), empty, empty, empty, 0.0,
        screened=g.screened,
    )  # fmt: skip
    if not screen.at_risk:
        return None, 0
    top = _ranked(g, w, CHECK_REFITS)
    rest = w > 0
    rest[top] = False
    rest_score = float(np.sum(score[rest]))
    losses, indicator = g.losses[top], g.indicator[top]
    if g.at_rows is not None:
        losses, indicator = g.at_rows(top)
    screen = dataclasses.replace(
        screen, rows=top, losses=losses, indicator=indicator, weights=w[top],
        rest=rest_score,
    )  # fmt: skip
    return check_screen(screen, refit)


# ----------------------------------------------------------------------------- budget
def _draw_probs(
    g: Gathered, w: np.ndarray, rest: np.ndarray, census: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Draw probabilities over ``rest``: the indicator, the loss change and uniform mixed
    (each part normalised over the rest; a part with zero total falls to uniform); and the
    same rule's value at the census samples (as if they were in the rest: the scale on
    which their errors show what the rest's may be)."""
    qr = np.zeros(rest.size)
    qc = np.zeros(census.size)
    for share, v in ((_INDICATOR_SHARE, g.indicator), (_CHANGE_SHARE, np.abs(g.change))):
        sr, sc = w[rest] * v[rest], w[census] * v[census]
        cap = np.max(sr[np.isfinite(sr)], initial=1.0)
        sr, sc = np.where(np.isfinite(sr), sr, cap), np.where(np.isfinite(sc), sc, np.inf)
        tot = float(sr.sum())
        if tot > 0:
            qr += share * sr / tot
            qc += share * sc / tot
        else:
            qr += share / rest.size
            qc += share / rest.size
    uni = (1.0 - _INDICATOR_SHARE - _CHANGE_SHARE) / rest.size
    return qr + uni, qc + uni


def _census_size(score_sorted: np.ndarray, target: float, at_least: int) -> int:
    """The smallest k >= at_least whose tail ``score_sorted[k:]`` sums to at most target."""
    tail = np.concatenate([np.cumsum(score_sorted[::-1])[::-1], [0.0]])
    ok = np.flatnonzero(tail <= target)
    k = int(ok[0]) if ok.size else score_sorted.size
    return min(max(k, at_least), score_sorted.size)


def _calibration(g: Gathered, w: np.ndarray, ex: _Exact) -> float | None:
    """``sum w |ALO - exact| / sum w I`` over the refitted samples (None: no indicator mass
    there)."""
    rows = ex.rows
    pred = float(np.sum(w[rows] * g.indicator[rows]))
    if not (pred > 0 and math.isfinite(pred)):
        return None
    return float(np.sum(w[rows] * np.abs(g.losses[rows] - ex.values[rows]))) / pred


def _budget_estimate(
    g: Gathered, w: np.ndarray, ex: _Exact, plain: float, err: float, half: float,
    confidence: float, rtol: float, met: bool,
) -> tuple[np.ndarray, ErrorEstimate]:  # fmt: skip
    """The refined losses (exact on every refitted sample) and their ErrorEstimate."""
    losses = g.losses.copy()
    rows = ex.rows
    losses[rows] = ex.values[rows]
    mean = float(np.sum(w * losses)) / float(w.sum())
    exact_mean = mean - err
    rel = err / exact_mean if exact_mean != 0 else math.inf
    est = ErrorEstimate(
        "budget", err, rel, rows, ex.values[rows], int(rows.size), plain,
        err - half, err + half, confidence, rtol, met,
    )  # fmt: skip
    return losses, est


def refine(
    g: Gathered,
    refit: Refit,
    rtol: float,
    confidence: float = 0.95,
    random_state: Any = 0,
) -> tuple[np.ndarray, ErrorEstimate, int]:
    """Brings the mean of the leave-one-out losses within ``rtol`` of exact leave-one-out
    at ``confidence`` (``docs/math/trust.md``, "The error budget"): exact refits of the
    ``CHECK_REFITS`` samples ranked first calibrate the indicator on this problem; the
    census is the top set whose calibrated indicator mass left over is within half the
    budget; the rest's error is estimated by importance sampling (a Hansen-Hurwitz
    estimate with its Student-t interval); the census grows until the interval of the
    error of the reported mean lies within ``rtol`` of the exact mean, or every sample is
    refitted. Where ALO is exact (``g.exact``) nothing is refitted.

    Returns the losses (exact for every refitted sample), the estimate and the number of
    refits not at tol.
    """
    from scipy import stats

    w = _weights(g)
    W = float(w.sum())
    n = g.losses.shape[0]
    plain = float(np.sum(w * g.losses)) / W
    ex = _Exact(refit, n)
    if g.exact:
        losses, est = _budget_estimate(g, w, ex, plain, 0.0, 0.0, confidence, rtol, True)
        return losses, est, 0
    with np.errstate(over="ignore"):
        bound = INDICATOR_SAFETY * float(np.sum(w * g.indicator)) / W
    if g.screened and bound <= rtol * abs(plain):
        losses, est = _budget_estimate(g, w, ex, plain, 0.0, bound, confidence, rtol, True)
        return losses, dataclasses.replace(est, kind="screened"), 0
    order = _ranked(g, w)
    N = order.size
    score = w[order] * g.indicator[order]
    score = np.where(np.isfinite(score), score, np.inf)
    rng = np.random.default_rng(random_state)
    t = float(stats.t.ppf(0.5 + confidence / 2.0, BUDGET_DRAWS - 1))
    ex.get(order[:CHECK_REFITS])  # the probe: calibrates the indicator
    calib = 0.0
    k = min(CHECK_REFITS, N)
    exact_mean = plain
    while True:
        c = _calibration(g, w, ex)
        calib = max(calib, CENSUS_SAFETY * (1.0 if c is None else c))
        target = 0.5 * rtol * abs(exact_mean) * W / calib if calib > 0 else math.inf
        k = _census_size(score, target, k)
        census = order[:k]
        if k >= N:  # every sample refitted: exact leave-one-out
            ex.get(census)
            losses, est = _budget_estimate(g, w, ex, plain, 0.0, 0.0, confidence, rtol, True)
            return losses, est, ex.n_not_converged
        rest = order[k:]
        q, q_census = _draw_probs(g, w, rest, census)
        j = rng.choice(rest.size, size=BUDGET_DRAWS, replace=True, p=q / q.sum())
        draws = rest[j]
        ex.get(np.concatenate([census, draws]))  # one call of the route's refits a round
        z = w[draws] * (g.losses[draws] - ex.get(draws)) / q[j]
        rest_error = float(z.mean()) / W  # unbiased for the rest's error of the mean
        # the interval accounts for the heavy tail as the certificate's does: the census's
        # errors on the draws' scale show how far the rest's may stray from the indicator
        zc = w[census] * (g.losses[census] - ex.values[census]) / q_census
        zc = zc[np.isfinite(zc)]
        var = max(float(np.mean(np.concatenate([z, zc]) ** 2)), float(z.var(ddof=1)))
        half = t * math.sqrt(var / BUDGET_DRAWS) / W
        # the reported losses are exact on every refitted sample: those outside the census
        # leave the rest's error by their known amount
        known_rows = np.setdiff1d(ex.rows, census)
        known = float(np.sum(w[known_rows] * (g.losses[known_rows] - ex.values[known_rows])))
        err = rest_error - known / W
        losses, est = _budget_estimate(g, w, ex, plain, err, half, confidence, rtol, False)
        exact_mean = float(np.sum(w * losses)) / W - err
        if abs(err) + half <= rtol * abs(exact_mean):
            return losses, dataclasses.replace(est, met=True), ex.n_not_converged
        k = min(N, k + BUDGET_DRAWS)  # grow at least this much (and as recalibrated)
