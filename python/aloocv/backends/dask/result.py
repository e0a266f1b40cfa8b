"""What the certificate of a dask leave-one-out result asks of the backend: the
per-sample values gathered to the client and the route's exact refits
(:class:`aloocv.results.SubsetRefits`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...results import SubsetRefits
from ...results.trust import Gathered
from .passes import _compute


def subset_refits(
    change: Any,
    indicator: Any,
    refit: Callable[[np.ndarray], tuple[np.ndarray, int]],
    tol: float,
    exact: bool = False,
    screened: bool = True,
) -> SubsetRefits:
    """The certificate's and the refinement's view of a dask fit: ``change`` the
    leave-one-out losses minus the in-sample ones and ``indicator`` ALO's error indicator
    (dask arrays chunked like X's rows, from the leverage pass's records); ``refit(rows)``
    the route's exact refits; ``exact`` and ``screened`` as in
    :class:`aloocv.results.trust.Gathered` (ALO exact: a squared loss without L1; the
    indicator may skip refits: False for the multinomial loss). Gathering brings n floats
    of each, of the losses and of the weights to the client; X stays on the workers."""

    def gather(res: Any) -> Gathered:
        losses, ch, ind, w = _compute((res.losses, change, indicator, res.sample_weight))
        w = None if w is None else np.asarray(w, dtype=np.float64)
        return Gathered(
            np.asarray(losses), np.asarray(ind), np.asarray(ch), w, exact=exact, screened=screened
        )

    return SubsetRefits(gather=gather, refit=refit, tol=tol)
