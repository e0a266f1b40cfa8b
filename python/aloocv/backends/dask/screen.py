"""Plain ALO's error indicator over the chunks (``docs/math/trust.md``): per sample the
shift score ``J_i = I_i / rho``, the loss change and, reduced in the leverage pass, what
the self-check reads (:class:`aloocv.results.trust.Screen`): ``sum w l''`` and
``sum w |l'''|`` at the fit (``rho`` their ratio; 1 for the multinomial loss),
``sum w J`` and each chunk's top ``CHECK_REFITS`` samples by ``w J`` (the order of
``w I``), merged across the chunks. No n-sized array reaches the client."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...losses import cross_entropy
from ...results.trust import (
    CHECK_REFITS,
    Screen,
    multinomial_indicator,
    scalar_indicator,
    unreliable_chunk,
)

_TOP = ("rows", "wj", "J", "tie", "losses", "weights")


def scalar_values(loss: Any, y: np.ndarray, w: np.ndarray | None, rec: dict) -> dict:
    """A chunk's screen values of a scalar loss from its leave-one-out record (``eta``,
    ``losses``, ``predictions``, ``leverages``): per sample ``J`` and the loss change,
    and the chunk's ``sum w l''`` (``d2``) and ``sum w |l'''|`` (``d3``) at the fit."""
    eta = rec["eta"]
    l0, _, d2, d3, _ = loss.derivatives(y, eta)
    ww = 1.0 if w is None else w
    J = scalar_indicator(loss, y, eta, rec["predictions"], rec["leverages"], w, rho=1.0)
    return {
        "J": J,
        "change": rec["losses"] - l0,
        "d2": float(np.sum(ww * d2)),
        "d3": float(np.sum(ww * np.abs(d3))),
    }


def multinomial_values(y: np.ndarray, w: np.ndarray | None, rec: dict) -> dict:
    """:func:`scalar_values` of the multinomial loss (``rho = 1``: no d2, d3)."""
    eta = rec["eta"]
    return {
        "J": multinomial_indicator(y, eta, rec["predictions"], rec["leverages"], w),
        "change": rec["losses"] - cross_entropy(eta, y),
    }


def _select(top: dict) -> dict:
    """The CHECK_REFITS rows ranked first: decreasing ``w J``, ties by ``w |change|``,
    then the row (the in-memory ranking's stable order)."""
    order = np.lexsort((top["rows"], -top["tie"], -top["wj"]))[:CHECK_REFITS]
    return {k: top[k][order] for k in _TOP}


def chunk_screen(rec: dict, w: np.ndarray | None, row0: int) -> dict:
    """The partial sums of a chunk's screen (its record holds :func:`scalar_values` or
    :func:`multinomial_values`); the chunk starts at row ``row0``."""
    J, losses = rec["J"], rec["losses"]
    m = J.shape[0]
    ww = np.ones(m) if w is None else np.asarray(w, dtype=np.float64)
    wj = ww * J
    fin = np.isfinite(wj)
    pos = np.flatnonzero(ww > 0)
    top = _select(
        {
            "rows": pos.astype(np.int64) + int(row0),
            "wj": wj[pos],
            "J": J[pos],
            "tie": ww[pos] * np.abs(rec["change"][pos]),
            "losses": losses[pos],
            "weights": ww[pos],
        }
    )
    return {
        "d2": rec.get("d2", 0.0),
        "d3": rec.get("d3", 0.0),
        "wj": float(np.sum(wj[fin])),
        "n_inf": int(np.count_nonzero(~fin)),
        "top": top,
    }


def merge_screen(a: dict, b: dict) -> dict:
    """Two chunks' (or subtrees') screens as one."""
    out = {k: a[k] + b[k] for k in ("d2", "d3", "wj", "n_inf")}
    out["top"] = _select({k: np.concatenate([a["top"][k], b["top"][k]]) for k in _TOP})
    return out


def rho_of(s: dict | None) -> float:
    """``sum w |l'''| / sum w l''`` of a reduced scalar screen (as trust._rho)."""
    if s is None:
        return 0.0
    return float(s["d3"]) / float(s["d2"]) if s["d2"] > 0 else 0.0


def screen_from(s: dict, rho: float, mean: float, weight: float) -> Screen:
    """The self-check's :class:`Screen` from the reduced screen ``s``, the loss's ``rho``
    (1 for the multinomial loss), the mean ALO loss and the sum of the weights."""
    top = s["top"]
    rows = np.asarray(top["rows"], dtype=np.int64)
    if rho == 0.0:  # no third derivative: the indicator is 0 (in-memory scalar_indicator)
        zero = np.zeros(rows.size)
        return Screen(0.0, mean, weight, rows, top["losses"], zero, top["weights"], 0.0)
    fin = np.isfinite(top["wj"])
    total = rho * float(s["wj"]) if s["n_inf"] == 0 else math.inf
    if s["n_inf"] > int(np.count_nonzero(~fin)):
        rest = math.inf  # a sample of infinite indicator is outside the top
    else:
        rest = max(rho * (float(s["wj"]) - float(np.sum(top["wj"][fin]))), 0.0)
    ind = rho * top["J"]
    return Screen(total, mean, weight, rows, top["losses"], ind, top["weights"], rest)


def indicator_array(J: Any, rho: float) -> Any:
    """The per-sample indicator ``I = rho J`` (a dask array like ``J``; 0 where ``rho``
    is, as in memory)."""
    import dask.array as da

    return J * rho if rho != 0.0 else da.zeros_like(J)


def unreliable_array(indicator: Any, losses: Any, downdate: Any, mean: float) -> Any:
    """The in-memory rule (:func:`aloocv.results.trust.unreliable_from`) chunk by chunk,
    with the mean ALO loss reduced in the leverage pass."""
    import dask.array as da

    return da.map_blocks(unreliable_chunk, indicator, losses, downdate, mean, dtype=bool)
