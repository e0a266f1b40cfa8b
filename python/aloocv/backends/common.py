"""What the verbs hand the backends (typed requests) and what both backends share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["TANGENT_LOG_STEP", "FoldPlan", "LOORequest"]

#: Relative step (in log lambda) of the central difference that gives the second
#: derivative of the multinomial ACV to the tuning package's Newton steps (both backends'
#: multinomial tuning states).
TANGENT_LOG_STEP = 1e-4


@dataclass(frozen=True)
class LOORequest:
    """The options of one leave-one-out call (:func:`aloocv.loo`), checked.

    Attributes
    ----------
    method : {"alo", "exact", "if", "lemma3"}
    coef, intercept
        A given fit (as the user passed them) or None: fit first.
    return_gradient : bool
    gradient : {"exact", "paper"}
    """

    method: str = "alo"
    coef: Any = None
    intercept: Any = None
    return_gradient: bool = False
    gradient: str = "exact"


@dataclass(frozen=True, eq=False)
class FoldPlan:
    """The folds of one K-fold call: a partition (``folds`` with its ``labels``) or, for
    ``cv=`` splits whose test sets do not partition the samples, the ``splits``.

    Attributes
    ----------
    method : {"alo", "exact"}
    folds : ndarray of int32 or None
        Fold index per sample (a partition).
    labels : ndarray or None
        The label of each fold index.
    splits : list of (train, test) or None
        Non-partition splits.
    user_labels : bool
        Whether the folds came from the user's labels (errors then name those labels).
    """

    method: str
    folds: np.ndarray | None = None
    labels: np.ndarray | None = None
    splits: list | None = None
    user_labels: bool = False

    @property
    def n_folds(self) -> int:
        return len(self.splits) if self.splits is not None else int(self.labels.size)
