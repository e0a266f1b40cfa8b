"""What the certificate of a dask leave-one-out result asks of the backend: the
per-sample values gathered to the client and the route's exact refits
(:class:`aloocv.results.SubsetRefits`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...results import SubsetRefits
from ...results.trust import Gathered, multinomial_indicator, scalar_indicator
from .passes import _compute


def subset_refits(
    insample: Any,
    eta: Any,
    y: Any,
    loss: Any,
    refit: Callable[[np.ndarray], tuple[np.ndarray, int]],
    tol: float,
) -> SubsetRefits:
    """The certificate's and the refinement's view of a dask fit: ``insample`` the
    in-sample losses and ``eta`` the linear predictors (class scores) at the fit, ``y`` the
    responses (class codes), dask arrays chunked like X's rows; ``refit(rows)`` the route's
    exact refits. Gathering brings n floats of each (n K^2 for the multinomial leverage
    blocks) to the client; X stays on the workers."""

    def gather(res: Any) -> Gathered:
        losses, ins, e, yy, pred, lev, w = _compute(
            (res.losses, insample, eta, y, res.predictions, res.leverages, res.sample_weight)
        )
        w = None if w is None else np.asarray(w, dtype=np.float64)
        losses, e, pred, lev = (np.asarray(a) for a in (losses, e, pred, lev))
        if loss.vector_valued:
            ind = multinomial_indicator(np.asarray(yy), e, pred, lev, w)
        else:
            ind = scalar_indicator(loss, np.asarray(yy, dtype=np.float64), e, pred, lev, w)
        return Gathered(losses, ind, losses - np.asarray(ins), w, screened=not loss.vector_valued)

    return SubsetRefits(gather=gather, refit=refit, tol=tol)
