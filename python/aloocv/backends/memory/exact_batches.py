"""Exact leave-one-out in batches of refits, for progress (``aloocv.loo(...,
method="exact", verbose=1)`` and the command line).

Without progress the core refits all n samples in one call (``subset=None``). With it,
the samples go in about :data:`EXACT_PROGRESS_BATCHES` batches, one core call each (the
core's refit batch runs each batch in parallel over its samples), and the progress is
reported after each batch: no Python loop over samples. The first call fits (or takes
the given coefficients) and refits the first batch; the others refit warm-started from
that fit, so each refit is the one the single call makes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..._progress import Progress

__all__ = ["EXACT_MIN_REFITS_PER_THREAD", "EXACT_PROGRESS_BATCHES", "ExactBatches", "run_batches"]

#: Exact leave-one-out with progress runs its refits in about this many core calls.
EXACT_PROGRESS_BATCHES = 20
#: ... each with at least this many refits per thread (the batch's parallel loop stays
#: busy, the per-call set-up stays small against the refits).
EXACT_MIN_REFITS_PER_THREAD = 4


def batches(n: int, n_threads: int) -> list[np.ndarray]:
    """Consecutive sample indices in batches (int64, for the core's ``subset=``)."""
    size = max(math.ceil(n / EXACT_PROGRESS_BATCHES), EXACT_MIN_REFITS_PER_THREAD * n_threads, 1)
    return [np.arange(s, min(s + size, n), dtype=np.int64) for s in range(0, n, size)]


class ExactBatches:
    """The core's exact leave-one-out result assembled from batches: the per-sample
    values and refit counts of all batches, the fit (and every other attribute) of the
    first core result."""

    def __init__(self, parts: list[Any]):
        self._first = parts[0]
        self.losses = np.concatenate([np.asarray(p.losses) for p in parts])
        self.predictions = np.concatenate([np.asarray(p.predictions) for p in parts], axis=0)
        self.n_not_converged = int(sum(int(p.n_not_converged) for p in parts))
        self.n_singular = int(sum(int(getattr(p, "n_singular", 0) or 0) for p in parts))
        singular = [
            np.asarray(p.singular_samples, dtype=np.int64)
            for p in parts
            if getattr(p, "n_singular", 0)
        ]
        self.singular_samples = np.sort(np.concatenate(singular)) if singular else np.empty(0, int)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._first, name)


def run_batches(
    n: int,
    n_threads: int,
    refit: Callable[[np.ndarray, Any], Any],
    beta_of: Callable[[Any], Any],
    beta: Any = None,
    desc: str = "exact leave-one-out",
) -> ExactBatches:
    """Exact leave-one-out of ``n`` samples in batches with progress on stderr.

    ``refit(idx, beta)`` is the route's core call refitting the samples ``idx`` (beta
    None: fit first, else evaluate at beta); ``beta_of(result)`` the packed coefficients
    of a core result; ``beta`` the given fit, if any."""
    parts = []
    with Progress(n, desc, unit="refit") as bar:
        for idx in batches(n, n_threads):
            out = refit(idx, beta)
            if beta is None:
                beta = beta_of(out)
            parts.append(out)
            bar.update(idx.size)
    return ExactBatches(parts)
