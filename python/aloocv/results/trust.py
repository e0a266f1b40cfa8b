"""How far approximate leave-one-out (ALO) is from exact leave-one-out, and how to bring it
within a budget: the per-sample error indicator, the self-check of plain ALO and the
refinement to a relative tolerance (``docs/math/trust.md``).

ALO is one Newton step from the full fit on each leave-one-out objective. Its error is the
residual of that step, which comes from the change of curvature along it; to second order
(``docs/math/trust.md``, "The indicator") the error of sample i's loss is about

    I_i = 1/2 |l'(y_i, eta~_i)| rho (eta~_i - eta_i)^2 / h_i,
    rho = sum_j w_j |l'''_j| / sum_j w_j l''_j,

the square of the sample's leave-one-out shift over its leverage, scaled by the loss's
relative third derivative. It ranks the samples whose ALO values carry the error; exact
refits of the top-ranked ones measure it, and importance sampling guided by it estimates
what is left.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "BUDGET_DRAWS",
    "CHECK_REFITS",
    "RISK_RTOL",
    "UNRELIABLE_ERROR",
    "WARN_RTOL",
    "ErrorEstimate",
    "Gathered",
    "multinomial_indicator",
    "refine",
    "scalar_indicator",
    "self_check",
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
    """

    losses: np.ndarray
    indicator: np.ndarray
    change: np.ndarray
    weights: np.ndarray | None


@dataclass(frozen=True)
class ErrorEstimate:
    """What is known of the error of a leave-one-out result's :attr:`mean` against exact
    leave-one-out, from exact refits of some samples.

    Attributes
    ----------
    kind : {"check", "budget"}
        ``"check"``: plain ALO's self-check (refits of the top-ranked samples, the rest
        extrapolated by the indicator; the losses are ALO's). ``"budget"``: the refinement
        of ``rtol=`` (the refitted samples' losses are exact; the rest is estimated by
        importance sampling with an interval).
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
        return (
            f"ALO refined to rtol={self.rtol:g}: {self.n_refits} exact refits, estimated error "
            f"{self.error:+.3g} ({100 * self.confidence:g}% CI [{self.ci_low:+.3g}, "
            f"{self.ci_high:+.3g}]; {100 * self.relative_error:+.2g}%), "
            + ("within budget" if self.met else "NOT within budget")
        )


# ----------------------------------------------------------------------------- indicator
def _rho(w: np.ndarray | None, d2: np.ndarray, d3: np.ndarray) -> float:
    """``sum_j w_j |l'''_j| / sum_j w_j l''_j``: the loss's relative third derivative."""
    ww = 1.0 if w is None else w
    den = float(np.sum(ww * d2))
    return float(np.sum(ww * np.abs(d3))) / den if den > 0 else 0.0


def scalar_indicator(
    loss: Any,
    y: np.ndarray,
    eta: np.ndarray,
    eta_tilde: np.ndarray,
    leverages: np.ndarray,
    weights: np.ndarray | None,
) -> np.ndarray:
    """The error indicator ``I_i`` of a scalar-eta loss (module docstring); 0 for losses
    without third derivative (the squared loss, where ALO with an L2 penalty is exact) and
    for samples with zero leverage or weight."""
    _, _, d2, d3, _ = loss.derivatives(y, eta)
    rho = _rho(weights, d2, d3)
    if rho == 0.0:
        return np.zeros(eta.shape[0])
    g_t = loss.derivatives(y, eta_tilde)[1]
    shift = eta_tilde - eta
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 0.5 * np.abs(g_t) * rho * shift * shift / leverages
    out = np.where((leverages > 0) & np.isfinite(out), out, np.where(leverages > 0, np.inf, 0.0))
    if weights is not None:
        out[weights <= 0] = 0.0
    return out


def multinomial_indicator(
    y: np.ndarray,
    eta: np.ndarray,
    eta_tilde: np.ndarray,
    blocks: np.ndarray,
    weights: np.ndarray | None,
) -> np.ndarray:
    """The indicator for the multinomial loss (class codes ``y``, scores ``eta`` and
    ``eta_tilde`` of shape (n, K), leverage blocks ``K_i`` of shape (n, K, K)): ``|g|`` the
    norm of the cross-entropy's gradient at the leave-one-out scores, the shift's squared
    norm over the mean of the block's diagonal, and ``rho = 1`` (the softmax's third
    derivative along a direction is bounded by its second times the largest score change,
    ``docs/math/trust.md``)."""
    n, K = eta.shape
    z = np.exp(eta_tilde - eta_tilde.max(axis=1, keepdims=True))
    z /= z.sum(axis=1, keepdims=True)
    z[np.arange(n), np.asarray(y).astype(np.intp)] -= 1.0
    g = np.linalg.norm(z, axis=1)
    shift = np.sum((eta_tilde - eta) ** 2, axis=1)
    h = np.einsum("ikk->i", blocks) / K
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 0.5 * g * shift / h
    out = np.where((h > 0) & np.isfinite(out), out, np.where(h > 0, np.inf, 0.0))
    if weights is not None:
        out[weights <= 0] = 0.0
    return out


def unreliable_from(
    indicator: np.ndarray,
    losses: np.ndarray,
    weights: np.ndarray | None,
    dh_flag: Any,
    measured: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Samples whose indicator exceeds ``UNRELIABLE_ERROR`` of their loss (or of the mean
    loss, whichever is larger), or flagged by ``d_i h_i`` (``dh_flag``, may be None).

    With ``measured = (rows, exact losses)`` from exact refits, the indicator is first
    scaled by its calibration on this problem (``sum |ALO - exact| / sum I`` over the
    refitted rows), and the refitted rows are flagged by their measured error."""
    mean = abs(float(np.average(losses, weights=weights)))
    scale = np.maximum(np.abs(losses), mean)
    ind = indicator
    if measured is not None:
        rows, ex = measured
        err = np.abs(losses[rows] - ex)
        pred = float(np.sum(indicator[rows]))
        if pred > 0 and np.isfinite(pred):
            ind = indicator * (float(err.sum()) / pred)
    flag = ind > UNRELIABLE_ERROR * scale
    if measured is not None:
        flag[rows] = err > UNRELIABLE_ERROR * scale[rows]
    return flag if dh_flag is None else (flag | np.asarray(dh_flag, dtype=bool))


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


def _ranked(g: Gathered, w: np.ndarray) -> np.ndarray:
    """Positive-weight samples by decreasing weighted indicator (ties: the loss change)."""
    cand = np.flatnonzero(w > 0)
    key = np.lexsort((-w[cand] * np.abs(g.change[cand]), -w[cand] * g.indicator[cand]))
    return cand[key]


def self_check(g: Gathered, refit: Refit) -> tuple[ErrorEstimate | None, int]:
    """Plain ALO's self-check: None (no refit) when the indicator estimates the error of the
    mean below ``RISK_RTOL``; otherwise exact refits of the ``CHECK_REFITS`` top-ranked
    samples, their measured error plus the rest's indicator scaled by what the refits
    measured (the indicator's calibration on this problem). Returns the estimate and the
    number of refits not at tol."""
    w = _weights(g)
    W = float(w.sum())
    mean = float(np.sum(w * g.losses)) / W
    score = w * g.indicator
    if not np.all(np.isfinite(score)):
        est = math.inf
    else:
        est = float(score.sum()) / W
    if est <= RISK_RTOL * abs(mean):
        return None, 0
    order = _ranked(g, w)
    top = order[:CHECK_REFITS]
    rest = order[CHECK_REFITS:]
    exact, n_nc = refit(np.asarray(top, dtype=np.int64))
    e = w[top] * (g.losses[top] - exact)
    known = float(np.sum(score[top]))
    ratio = float(np.sum(np.abs(e))) / known if known > 0 and math.isfinite(known) else 1.0
    rest_score = float(np.sum(score[rest])) if rest.size else 0.0
    err = abs(float(e.sum())) + max(ratio, 0.0) * rest_score
    err /= W
    exact_mean = mean - float(e.sum()) / W
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
            plain_mean=mean,
        ),
        n_nc,
    )


# ----------------------------------------------------------------------------- budget
def _draw_probs(g: Gathered, w: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """Draw probabilities over ``rest``: the indicator, the loss change and uniform mixed
    (each part normalised; a part with zero total falls to uniform)."""
    parts = []
    for s in (w[rest] * g.indicator[rest], w[rest] * np.abs(g.change[rest])):
        s = np.where(np.isfinite(s), s, np.max(s[np.isfinite(s)], initial=1.0))
        tot = float(s.sum())
        parts.append(s / tot if tot > 0 else np.full(rest.size, 1.0 / rest.size))
    uni = np.full(rest.size, 1.0 / rest.size)
    q = _INDICATOR_SHARE * parts[0] + _CHANGE_SHARE * parts[1]
    q += (1.0 - _INDICATOR_SHARE - _CHANGE_SHARE) * uni
    return q / q.sum()


def _census_size(score_sorted: np.ndarray, target: float, at_least: int) -> int:
    """The smallest k >= at_least whose tail ``score_sorted[k:]`` sums to at most target."""
    tail = np.concatenate([np.cumsum(score_sorted[::-1])[::-1], [0.0]])
    ok = np.flatnonzero(tail <= target)
    k = int(ok[0]) if ok.size else score_sorted.size
    return min(max(k, at_least), score_sorted.size)


def refine(
    g: Gathered,
    refit: Refit,
    rtol: float,
    confidence: float = 0.95,
    random_state: Any = 0,
) -> tuple[np.ndarray, ErrorEstimate, int]:
    """Brings the mean of the leave-one-out losses within ``rtol`` of exact leave-one-out
    at ``confidence``: exact refits of the samples ranked first by the indicator (the
    census), the rest's error estimated by importance sampling (a Hansen-Hurwitz estimate
    with its Student-t interval); the census grows until the interval of the error of the
    reported mean lies within ``rtol`` of the exact mean, or every sample is refitted.

    Returns the losses (exact for every refitted sample), the estimate and the number of
    refits not at tol.
    """
    from scipy import stats

    w = _weights(g)
    W = float(w.sum())
    n = g.losses.shape[0]
    plain = float(np.sum(w * g.losses)) / W
    order = _ranked(g, w)
    N = order.size
    score = w[order] * g.indicator[order]
    score = np.where(np.isfinite(score), score, np.inf)
    ex = _Exact(refit, n)
    rng = np.random.default_rng(random_state)
    t = float(stats.t.ppf(0.5 + confidence / 2.0, BUDGET_DRAWS - 1))
    calib = 1.0  # measured |error| / indicator on the refitted samples (grows only)
    k = _census_size(score, 0.5 * rtol * abs(plain) * W, 0)
    while True:
        census = order[:k]
        ex.get(census)
        losses = g.losses.copy()
        if k >= N:  # every sample refitted: exact leave-one-out
            losses[ex.rows] = ex.values[ex.rows]
            mean = float(np.sum(w * losses)) / W
            est = ErrorEstimate(
                "budget", 0.0, 0.0, ex.rows, ex.values[ex.rows], int(ex.rows.size), plain,
                0.0, 0.0, confidence, rtol, True,
            )  # fmt: skip
            return losses, est, ex.n_not_converged
        rest = order[k:]
        q = _draw_probs(g, w, rest)
        j = rng.choice(rest.size, size=BUDGET_DRAWS, replace=True, p=q)
        draws = rest[j]
        exact_draws = ex.get(draws)
        z = w[draws] * (g.losses[draws] - exact_draws) / q[j]
        rest_error = float(z.mean()) / W  # unbiased for the rest's error of the mean
        half = t * float(z.std(ddof=1)) / math.sqrt(BUDGET_DRAWS) / W
        # the reported losses are exact on every refitted sample: the drawn ones leave the
        # rest's error by their known amount
        drawn = np.setdiff1d(np.unique(draws), census)
        known = float(np.sum(w[drawn] * (g.losses[drawn] - ex.values[drawn]))) / W
        err = rest_error - known
        losses[ex.rows] = ex.values[ex.rows]
        mean = float(np.sum(w * losses)) / W
        exact_mean = mean - err
        met = abs(err) + half <= rtol * abs(exact_mean)
        if met:
            rel = err / exact_mean if exact_mean != 0 else math.inf
            est = ErrorEstimate(
                "budget", err, rel, ex.rows, ex.values[ex.rows], int(ex.rows.size), plain,
                err - half, err + half, confidence, rtol, True,
            )  # fmt: skip
            return losses, est, ex.n_not_converged
        # recalibrate the indicator on what was measured, grow the census
        rows = ex.rows
        meas = float(np.sum(w[rows] * np.abs(g.losses[rows] - ex.values[rows])))
        pred = float(np.sum(w[rows] * g.indicator[rows]))
        if pred > 0 and math.isfinite(pred):
            calib = max(calib, meas / pred)
        target = 0.5 * rtol * abs(exact_mean) * W / calib
        k = _census_size(score, target, min(N, max(2 * k, k + BUDGET_DRAWS)))
