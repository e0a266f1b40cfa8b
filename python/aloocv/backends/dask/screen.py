"""Plain ALO's error indicator over the chunks (``docs/math/trust.md``).

``I_i = 1/2 |l'(eta~_i)| rho r_i Delta_i^2 / h_i`` reads two globals: ``rho = sum w |l'''|
/ sum w l''`` and the reach's ``hbar = sum d h^2 / sum d h``. The leverage pass reduces
their sums and the bound ``rho sum w J >= sum w I`` (``J_i = I_i / (rho r_i)``: the
reach is at most 1); its records keep what the indicator is computed from (``y``, the
weights and the loss change beside the leave-one-out values). Plain ALO's
self-check (:class:`aloocv.results.trust.Screen`) makes its decision on the bound; only
where that bound says there is risk (for the multinomial loss, whose screen never skips
the refits: always) a second pass over the records computes ``I_i`` chunk by chunk, the
exact ``sum w I`` and the ``CHECK_REFITS`` samples ranked first, merged across the
chunks. No n-sized array reaches the client. On a distributed client the records are
held by the workers and the second pass reads no X; without one they are lazy and the
second pass (like any compute of the indicator) recomputes the leverage pass.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...losses import cross_entropy
from ...results.trust import (
    CHECK_REFITS,
    Screen,
    mean_leverage,
    multinomial_indicator,
    multinomial_reach_terms,
    scalar_indicator,
    unreliable_chunk,
)
from .passes import _compute
from .passes import _tree as _merge_tree

_TOP = ("rows", "score", "indicator", "tie", "losses", "weights")


# ----------------------------------------------------------------------------- pass one
def _finite_sum(v: np.ndarray) -> tuple[float, int]:
    """(sum of the finite entries, count of the others)."""
    fin = np.isfinite(v)
    return float(np.sum(v[fin])), int(np.count_nonzero(~fin))


def scalar_values(loss: Any, y: np.ndarray, w: np.ndarray | None, rec: dict) -> dict:
    """What a chunk's record of a scalar loss (``eta``, ``losses``, ``predictions``,
    ``leverages``) keeps for the indicator (``y``, ``w``, the loss change) and its partial
    sums (``bound``): ``sum w l''`` (``d2``) and ``sum w |l'''|`` (``d3``) at the fit,
    ``sum d h`` and ``sum d h^2`` (``dh``, ``dhh``; ``d = w l''``) and the finite part of
    ``sum w J`` (``wj``) with the count of its other terms (``n_inf``)."""
    eta, h = rec["eta"], rec["leverages"]
    l0, d2, d3 = loss.derivatives(y, eta, (0, 2, 3))
    ww = 1.0 if w is None else w
    d = d2 if w is None else w * d2
    with np.errstate(over="ignore", invalid="ignore"):
        J = scalar_indicator(loss, y, eta, rec["predictions"], h, w, rho=1.0, hbar=math.inf)
        dh = d * h
        wj, n_inf = _finite_sum(ww * J)
        bound = {
            "d2": float(np.sum(ww * d2)),
            "d3": float(np.sum(ww * np.abs(d3))),
            "dh": float(np.sum(dh)),
            "dhh": float(np.sum(dh * h)),
            "wj": wj,
            "n_inf": n_inf,
        }
    return {"y": y, "w": w, "change": rec["losses"] - l0, "bound": bound}


def multinomial_values(y: np.ndarray, w: np.ndarray | None, rec: dict) -> dict:
    """:func:`scalar_values` of the multinomial loss: ``rho = 1`` and no bound (its
    screen always refits), the reach's ``dh`` and ``dhh`` only."""
    eta = rec["eta"]
    h, d = multinomial_reach_terms(eta, rec["leverages"], w)
    with np.errstate(over="ignore", invalid="ignore"):
        dh = d * h
        bound = {"dh": float(np.sum(dh)), "dhh": float(np.sum(dh * h))}
    return {"y": y, "w": w, "change": rec["losses"] - cross_entropy(eta, y), "bound": bound}


# ----------------------------------------------------------------------------- pass two
def chunk_indicator(rec: dict, loss: Any, rho: float, hbar: float) -> np.ndarray:
    """A chunk's indicator ``I_i`` from its record, with the reduced ``rho`` and ``hbar``
    (``loss`` None: the multinomial loss)."""
    args = (rec["y"], rec["eta"], rec["predictions"], rec["leverages"], rec["w"])
    if loss is None:
        return multinomial_indicator(*args, hbar=hbar)
    return scalar_indicator(loss, *args, rho=rho, hbar=hbar)


def _select(top: dict) -> dict:
    """The CHECK_REFITS rows ranked first: decreasing ``w I``, ties by ``w |change|``,
    then the row (the in-memory ranking's stable order)."""
    order = np.lexsort((top["rows"], -top["tie"], -top["score"]))[:CHECK_REFITS]
    return {k: top[k][order] for k in _TOP}


def chunk_screen(ind: np.ndarray, rec: dict, row0: int) -> dict:
    """A chunk's part of the screen (the chunk starts at row ``row0``): the finite part
    of ``sum w I`` (``total``), the count of its other terms (``n_inf``) and the chunk's
    ``CHECK_REFITS`` positive-weight samples ranked first (``top``)."""
    m = ind.shape[0]
    ww = np.ones(m) if rec["w"] is None else np.asarray(rec["w"], dtype=np.float64)
    score = ww * ind
    total, n_inf = _finite_sum(score)
    pos = np.flatnonzero(ww > 0)
    top = _select(
        {
            "rows": pos.astype(np.int64) + int(row0),
            "score": score[pos],
            "indicator": ind[pos],
            "tie": ww[pos] * np.abs(rec["change"][pos]),
            "losses": rec["losses"][pos],
            "weights": ww[pos],
        }
    )
    return {"total": total, "n_inf": n_inf, "top": top}


def merge(*parts: dict) -> dict:
    """Chunks' (or subtrees') parts of the screen as one: the numbers added, the ``top``
    samples merged (:func:`_select`)."""
    out = {k: sum(p[k] for p in parts) for k in ("total", "n_inf")}
    out["top"] = _select({k: np.concatenate([p["top"][k] for p in parts]) for k in _TOP})
    return out


def _tree(parts: list) -> Any:
    """The merged screen of the chunks' delayed parts (a tree of fan-in TREE_FANIN)."""
    return _merge_tree(parts, merge)


# ----------------------------------------------------------------------------- the result
def rho_of(bound: dict) -> float:
    """``sum w |l'''| / sum w l''`` of the reduced sums (as ``trust.indicator_rho``: 0 where the
    denominator is not positive, inf where the ratio is not finite)."""
    with np.errstate(over="ignore", invalid="ignore"):
        den = np.float64(bound["d2"])
        rho = np.float64(bound["d3"]) / den if den > 0 else np.float64(0.0)
    return float(rho) if np.isfinite(rho) else math.inf


def _bound_total(bound: dict, rho: float) -> float:
    """``rho sum w J``, an upper bound of ``sum w I`` (inf when a term is not finite)."""
    if rho == 0.0:
        return 0.0
    return rho * float(bound["wj"]) if bound["n_inf"] == 0 else math.inf


def _screen_from(s: dict, base: Screen) -> Screen:
    """``base`` with the second pass's reduced screen ``s``: the exact total, the top
    samples and the rest's share."""
    top = s["top"]
    fin = np.isfinite(top["score"])
    total = float(s["total"]) if s["n_inf"] == 0 else math.inf
    if s["n_inf"] > int(np.count_nonzero(~fin)):
        rest = math.inf  # a sample of infinite indicator is outside the top
    else:
        rest = max(float(s["total"]) - float(np.sum(top["score"][fin])), 0.0)
    return Screen(
        total, base.mean, base.weight, np.asarray(top["rows"], dtype=np.int64),
        top["losses"], top["indicator"], top["weights"], rest, base.exact, base.screened,
    )  # fmt: skip


class Indicator:
    """ALO's indicator over the chunks after the leverage pass: its per-sample dask
    array and plain ALO's self-check :class:`~aloocv.results.trust.Screen` (called: the
    screen from the bound, or with risk from the second pass, computed once).

    Parameters
    ----------
    outs : list
        The leverage pass's per-chunk records (persisted or lazy delayed objects).
    chunks : tuple of int
        X's row chunks.
    loss : Loss or None
        The scalar loss (None: multinomial).
    bound : dict
        The leverage pass's reduced sums (:func:`scalar_values`, :func:`multinomial_values`).
    mean, weight : float
        The mean ALO loss and the sum of the weights.
    exact : bool
        ALO is exact (a squared loss without L1): nothing to check.
    screened : bool
        The indicator's size may screen (:func:`aloocv.results.trust.indicator_sees_the_error`;
        False for the multinomial loss).
    """

    def __init__(
        self, outs: list, chunks: tuple, loss: Any, bound: dict, mean: float, weight: float,
        exact: bool, screened: bool,
    ) -> None:  # fmt: skip
        import dask.array as da
        from dask import delayed

        self.rho = 1.0 if loss is None else rho_of(bound)
        self.hbar = float(mean_leverage(bound["dh"], bound["dhh"]))
        self._parts = [
            delayed(chunk_indicator, pure=True)(o, loss, self.rho, self.hbar) for o in outs
        ]
        self._outs, self._chunks = outs, tuple(int(c) for c in chunks)
        self.array = da.concatenate(
            [
                da.from_delayed(p, shape=(c,), dtype=np.float64)
                for p, c in zip(self._parts, self._chunks)
            ]
        )
        empty = np.zeros(0)
        self._base = Screen(
            _bound_total(bound, self.rho) if loss is not None else math.inf,
            mean, weight, np.zeros(0, dtype=np.int64), empty, empty, empty, 0.0,
            exact=exact, screened=screened,
        )  # fmt: skip
        self._screen: Screen | None = None

    def screen(self) -> Screen:
        """The self-check's screen: from the bound where it says there is no risk (or ALO
        is exact; the total is then the bound), else from the second pass."""
        if self._screen is None:
            self._screen = self._second_pass() if self._base.at_risk else self._base
        return self._screen

    def _second_pass(self) -> Screen:
        from dask import delayed

        starts = np.concatenate([[0], np.cumsum(self._chunks)[:-1]]).astype(int)
        parts = [
            delayed(chunk_screen, pure=True)(p, o, int(r0))
            for p, o, r0 in zip(self._parts, self._outs, starts)
        ]
        return _screen_from(_compute(_tree(parts)), self._base)


def unreliable_array(indicator: Any, losses: Any, downdate: Any, mean: float) -> Any:
    """The in-memory rule (:func:`aloocv.results.trust.unreliable_from`) chunk by chunk,
    with the mean ALO loss reduced in the leverage pass."""
    import dask.array as da

    return da.map_blocks(unreliable_chunk, indicator, losses, downdate, mean, dtype=bool)
