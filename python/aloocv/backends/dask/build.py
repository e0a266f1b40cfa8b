"""A :class:`aloocv.problem.Problem`-shaped problem of dask input, built from a public
verb's arguments (transitional: the verbs build ``aloocv.problem.Problem`` once the
lower layers are on main, and this module goes).

The entry points of the backend read a problem only through ``Data.from_problem`` and
``problem.options`` (``tol``, ``max_iter``, ``n_threads``): the fields below are the
Problem's names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._validation import MULTINOMIAL, check_options
from . import data as _data
from . import multinomial as _multinomial


@dataclass(frozen=True)
class SolveOptions:
    """Newton's tolerance and iteration budget, the threads of each chunk task."""

    tol: float
    max_iter: int
    n_threads: int


@dataclass(frozen=True, eq=False)
class DaskProblem:
    """The fields of :class:`aloocv.problem.Problem` that the dask backend reads."""

    X: Any
    y: Any
    loss: Any
    penalty: Any
    l2: np.ndarray
    l1: np.ndarray | None
    sample_weight: Any
    offset: Any
    fit_intercept: bool
    options: SolveOptions
    backend: str = "dask"

    @property
    def is_multinomial(self) -> bool:
        return isinstance(self.loss, str) and self.loss == MULTINOMIAL

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])


def build_problem(
    X: Any,
    y: Any,
    *,
    loss: Any,
    penalty: Any,
    fit_intercept: Any,
    sample_weight: Any,
    offset: Any,
    tol: Any,
    max_iter: Any,
    n_jobs: Any,
) -> DaskProblem:
    """Validates a verb's arguments on dask input once (what can be checked without
    reading the data; the chunks are checked in the first pass)."""
    if isinstance(loss, str) and loss == MULTINOMIAL:
        d = _multinomial.prepare(X, y, penalty, sample_weight, fit_intercept, offset, n_jobs)
    else:
        d = _data.prepare(X, y, loss, penalty, sample_weight, fit_intercept, offset, n_jobs)
    tol, max_iter = check_options(tol, max_iter)
    options = SolveOptions(tol, max_iter, d.n_threads)
    return DaskProblem(
        d.X, d.y, d.loss, d.penalty, d.pen, d.l1, d.w, d.offset, d.fit_intercept, options
    )
