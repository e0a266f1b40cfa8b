"""Statistics of per-sample leave-one-out losses: the standard error of their (weighted)
mean, one formula for every result and the tuning package (weights act as frequency
weights)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "weighted_mean_columns",
    "weighted_mean_stderr_columns",
    "weighted_stderr",
    "weighted_stderr_columns",
]


def weighted_stderr(losses: np.ndarray, w: np.ndarray | None) -> float | None:
    """Standard error of the (weighted) mean of the per-sample losses (weights act as
    frequency weights). Where the squares overflow on finite losses, the same estimator
    on the losses scaled by their largest magnitude (:func:`_scaled_stderr`)."""
    n = losses.shape[0]
    if n < 2:
        return None  # no spread to measure
    with np.errstate(over="ignore", invalid="ignore"):  # huge losses: scaled below
        if not isinstance(losses, np.ndarray) or not (w is None or isinstance(w, np.ndarray)):
            se = _dispatched_stderr(losses, w)  # dask input: the dispatching functions
        # np.std's and np.average's arithmetic, operation for operation (the same bits),
        # without their Python wrappers (they cost more than the sums on a small problem)
        elif w is None:
            d = losses - float(np.add.reduce(losses)) / n
            se = math.sqrt(float(np.add.reduce(d * d)) / (n - 1)) / math.sqrt(n)
        else:
            sw = float(w.sum())
            d = losses - float(np.add.reduce(losses * w)) / sw
            se = math.sqrt(float(np.add.reduce(w * (d * d))) / max(sw - 1.0, 1e-300) / sw)
    return se if math.isfinite(se) else _scaled_stderr(losses, w)


def _dispatched_stderr(losses: Any, w: Any) -> float:
    """:func:`weighted_stderr` through numpy's dispatching functions (arrays of other
    libraries, e.g. dask's per-sample losses)."""
    n = losses.shape[0]
    if w is None:
        return float(np.std(losses, ddof=1) / np.sqrt(n))
    sw = w.sum()
    m = np.average(losses, weights=w)
    return float(np.sqrt(np.sum(w * (losses - m) ** 2) / max(float(sw) - 1.0, 1e-300) / sw))


def _scaled_stderr(losses: np.ndarray, w: np.ndarray | None) -> float:
    """:func:`weighted_stderr` where its squares overflow: the same estimator on the losses
    (and weights) divided by their largest magnitude, scaled back. Finite for finite losses
    unless the standard error itself is beyond float64."""
    if not np.isfinite(losses).all():
        raise ValueError("the leave-one-out losses are not finite: no standard error")
    s = float(np.max(np.abs(losses)))
    z = losses / s
    n = losses.shape[0]
    if w is None:
        return s * float(np.std(z, ddof=1) / np.sqrt(n))
    sw, wmax = float(w.sum()), float(w.max())
    m = np.average(z, weights=w / wmax)
    ss = float(np.sum((w / wmax) * (z - m) ** 2))
    return s * math.sqrt(ss) * math.sqrt(wmax / max(sw - 1.0, 1e-300)) / math.sqrt(sw)


def weighted_mean_columns(losses: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """(Weighted) mean of each column of per-sample losses (several targets)."""
    return weighted_mean_stderr_columns(losses, w)[0]


def weighted_stderr_columns(losses: np.ndarray, w: np.ndarray | None) -> np.ndarray | None:
    """Standard error of each column's (weighted) mean (several targets)."""
    return weighted_mean_stderr_columns(losses, w)[1]


def weighted_mean_stderr_columns(
    losses: np.ndarray, w: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`weighted_mean_columns` and :func:`weighted_stderr_columns` at once (the
    mean computed once; np.add.reduce, not ndarray.mean and its Python wrapper)."""
    n = losses.shape[0]
    if w is None:
        mean = np.add.reduce(losses, axis=0) / n
    else:
        sw = w.sum()
        mean = (w @ losses) / sw
    if n < 2:
        return mean, None  # no spread to measure
    d = losses - mean
    if w is None:  # losses.std(axis=0, ddof=1) / sqrt(n), operation for operation
        return mean, np.sqrt(np.add.reduce(d * d, axis=0) / (n - 1)) / np.sqrt(n)
    var = (w @ d**2) / max(sw - 1.0, 1e-300)
    return mean, np.sqrt(var / sw)
