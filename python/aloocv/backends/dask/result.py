"""What the certificate of a dask leave-one-out result asks of the backend: the
per-sample values gathered to the client and the route's exact refits
(:class:`aloocv.results.SubsetRefits`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...results import SubsetRefits
from .passes import _compute


def subset_refits(
    insample: Any, refit: Callable[[np.ndarray], tuple[np.ndarray, int]], tol: float
) -> SubsetRefits:
    """The certificate's view of a dask fit: ``insample`` the in-sample losses at the fit
    (a dask array chunked like X's rows), ``refit(rows)`` the route's exact refits."""

    def gather(losses: Any, w: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        losses, proxy, w = _compute((losses, losses - insample, w))
        w = None if w is None else np.asarray(w, dtype=np.float64)
        return np.asarray(losses), np.asarray(proxy), w

    return SubsetRefits(gather=gather, refit=refit, tol=tol)
