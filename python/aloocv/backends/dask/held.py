"""The per-sample ALO arrays that a tuning state keeps on the workers: those of its best
point only.

A tuning state (:mod:`.tuning`, :mod:`.tuning_multinomial`) evaluates ALO at many points;
each point's per-sample arrays (losses, predictions, leverages: n (1 + K + K^2) floats
for K classes) are made by one leverage pass. On a distributed client that pass's chunk
outputs are persisted (the reduction reads them; the client receives only the sums), and
the workers keep them only while the point is the best one evaluated so far: a better
point releases them. The arrays a state returns per point are lazy (each chunk's leverage
task again when computed), so the points' arrays that a search keeps (``path_losses``,
``path_predictions``) hold no worker memory; :meth:`BestHeld.output` gives the best
point's arrays held by the workers, for the search's result. Without a distributed
client nothing is held: every array is lazy, as the other results of dask input.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable


class BestHeld:
    """The best point's per-sample arrays built on persisted chunk outputs (futures):
    held by the workers as long as this object (or a result made from it) refers to
    them; a better point's arrays replace them, and dropping them releases the old
    futures (dask's reference counting)."""

    def __init__(self) -> None:
        self.acv = math.inf
        self._name: str | None = None
        self._arrays: dict[str, Any] | None = None

    def offer(self, acv: float, lazy: Any, held: Callable[[], dict[str, Any]]) -> bool:
        """Keeps the point whose lazy output is ``lazy`` (its per-sample arrays lazy dask
        arrays) when its ALO value ``acv`` is below the best one so far; ``held()`` makes
        its arrays on the persisted chunk outputs (called only then). Returns whether the
        point was kept."""
        if not acv < self.acv:  # not better (or NaN): its persisted outputs are dropped
            return False
        self.acv = float(acv)
        self._arrays = None  # the previous best's futures are released here
        self._name = lazy.losses.name
        self._arrays = held()
        return True

    def output(self, out: Any) -> Any:
        """``out`` (a state's output) with its per-sample arrays held by the workers when
        it is the best point's; ``out`` itself otherwise (its arrays stay lazy)."""
        if self._arrays is None or getattr(out.losses, "name", None) != self._name:
            return out
        return dataclasses.replace(out, **self._arrays)
