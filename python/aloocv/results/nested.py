"""The results of :func:`aloocv.nested_cv` and :func:`aloocv.dev_set`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..penalties import Penalty

__all__ = ["DevSetResult", "NestedCVResult"]


@dataclass
class NestedCVResult:
    """Outcome of :func:`nested_cv`.

    Attributes
    ----------
    estimate : float
        Mean of the outer fold errors: the nested-CV estimate of
        ``E[min_theta l_D(A_theta(S))]`` for training sets of the outer training size.
    stderr : float or None
        ``std(fold_errors) / sqrt(outer_folds)`` (None for a single outer fold).
    fold_errors : ndarray of shape (outer_folds,)
        Mean loss on each outer test part of the model tuned and refitted on its
        training part.
    chosen : list of Penalty
        The penalty chosen in each outer fold.
    inner_scores : ndarray of shape (outer_folds, n_candidates) or (outer_folds,)
        The inner CV estimate of every candidate in every outer fold; with an
        estimator tuned by its own ``fit`` (``inner="alo"``), the fitted estimator's
        ``best_score_`` in each outer fold (higher is better, unlike the inner losses).
    candidates : list of Penalty
        The candidate grid (empty when each outer fold's estimator builds its own).
    inner : str
    estimators : list
        With an estimator and ``inner="alo"``: the estimator fitted (tuned and refitted)
        on each outer training part; empty otherwise.
    """

    estimate: float
    stderr: float | None
    fold_errors: np.ndarray
    chosen: list[Penalty]
    inner_scores: np.ndarray
    candidates: list[Penalty]
    inner: str
    estimators: list = field(default_factory=list)


@dataclass
class DevSetResult:
    """Outcome of :func:`dev_set`: ``estimate`` is the dev-set loss of the chosen
    candidate, an estimate of ``min_theta l_D(A_theta(S_train))``; ``fit`` is the
    chosen candidate refitted on all of S."""

    estimate: float
    chosen: Penalty
    scores: np.ndarray
    candidates: list[Penalty]
    fit: Any
