"""The estimators' regularization conventions as penalties of the summed objective.

scikit-learn's CV estimators state their penalties per sample (``ElasticNetCV``'s
``alpha`` and ``l1_ratio``) or by an inverse strength (``LogisticRegressionCV``'s ``C``);
these helpers check those grids and convert each candidate exactly to the
``sum of losses + penalty`` objective that aloocv fits.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..penalties import L1, L2, ElasticNet, Penalty


def _positive_grid(name: str, values: Any) -> np.ndarray:
    raw = np.asarray(values)
    if raw.dtype.kind not in "iuf":  # bools, strings, complex: no silent conversion
        raise TypeError(f"{name} must be a real number or a sequence of them, got {values!r}")
    arr = np.atleast_1d(raw.astype(float))
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d sequence")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be positive and finite, got {values!r}")
    return arr


def _l1_l2(pen: Penalty) -> tuple[float, float]:
    """(l1, l2) of a scalar elastic-net penalty (``L1`` and ``L2`` included)."""
    if isinstance(pen, L2):
        return 0.0, float(np.sum(pen.lam))
    return float(np.sum(pen.l1)), float(np.sum(pen.l2))


def _check_one_structure(grid: list[Penalty], name: str) -> None:
    """A grid mixes penalties of one structure: l1_ratio = 1 (pure lasso, one parameter)
    or 0 (pure ridge) cannot share a search with ratios strictly in between (two)."""
    kinds = {type(g) for g in grid}
    if len(kinds) > 1:
        raise ValueError(
            f"{name} mixes 1.0 (pure lasso) or 0.0 (pure ridge) with other values: fit them "
            "separately (a search tunes one penalty structure)"
        )


def _enet_from_sklearn(alpha: float, l1_ratio: float, n: float) -> Penalty:
    """scikit-learn's ElasticNet(alpha, l1_ratio) on n samples as a summed objective."""
    l1, l2 = n * alpha * l1_ratio, n * alpha * (1.0 - l1_ratio)
    if l1 == 0:
        return L2(l2)
    return L1(l1) if l2 == 0 else ElasticNet(l1, l2)


def _check_ratios(values: Any, name: str, low_open: bool) -> np.ndarray:
    raw = np.asarray(values)
    if raw.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be a real number or a sequence of them, got {values!r}")
    ratios = np.atleast_1d(raw.astype(float))
    bad_low = np.any(ratios <= 0) if low_open else np.any(ratios < 0)
    if (
        ratios.ndim != 1
        or ratios.size == 0
        or np.any(~np.isfinite(ratios))
        or bad_low
        or np.any(ratios > 1)
    ):
        interval = "(0, 1]" if low_open else "[0, 1]"
        raise ValueError(f"{name} must be in {interval}, got {values!r}")
    return ratios
