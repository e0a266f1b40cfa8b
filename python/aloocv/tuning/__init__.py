"""Choosing regularization by ALOOCV.

Three layers, each usable on its own:

- :mod:`~aloocv.tuning.objective`: ALOOCV as a function of ``log(lambda)`` with its
  exact gradient and Hessian, over a warm-started fit that is kept alive, with a cache.
- :mod:`~aloocv.tuning.optimizers`: the optimizers (the bracketed scalar search on values
  and gradients, bracketed scalar Newton, trust-region Newton, L-BFGS-B, Armijo gradient
  descent, Adam, the paper's Algorithms 1 and 2); Adam is shared with the BKK estimators.
- :mod:`~aloocv.tuning.drivers`: :func:`tune`, the search drivers (grid, bracketing grid
  followed by derivative steps, gradient methods) and :class:`TuneResult`.
"""

from .drivers import TuneResult, tune
from .objective import Evaluation, Objective

__all__ = ["Evaluation", "Objective", "TuneResult", "tune"]
