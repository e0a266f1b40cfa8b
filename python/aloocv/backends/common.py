"""What the verbs hand the backends (typed requests; the folds' are in :mod:`aloocv.folds`)
and what both backends share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["TANGENT_LOG_STEP", "LOORequest"]

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
    rtol : float or None
        The error budget of ``method="alo"`` (the matrix-free route sizes its probes by it).
    verbose : bool
        Progress of ``method="exact"`` on stderr (its refits in batches).
    """

    method: str = "alo"
    coef: Any = None
    intercept: Any = None
    return_gradient: bool = False
    gradient: str = "exact"
    rtol: float | None = None
    verbose: bool = False
