"""scikit-learn estimators that choose their regularization by ALOOCV.

Each mirrors the scikit-learn CV estimator it replaces (parameter names and fitted
attributes), converts that estimator's regularization convention exactly to the
paper's objective (a sum of losses plus ``lambda^T r(theta)``), and evaluates every
candidate by approximate leave-one-out instead of K refits. One module per family:
:mod:`.ridge`, :mod:`.elastic_net`, :mod:`.logistic` and :mod:`.glm` (Poisson, gamma,
Tweedie), on the search machinery of :mod:`._base`.
"""

from __future__ import annotations

from .elastic_net import ALOElasticNetCV
from .glm import ALOGammaRegressorCV, ALOPoissonRegressorCV, ALOTweedieRegressorCV
from .logistic import ALOLogisticRegressionCV
from .ridge import ALORidgeCV

__all__ = [
    "ALOElasticNetCV",
    "ALOGammaRegressorCV",
    "ALOLogisticRegressionCV",
    "ALOPoissonRegressorCV",
    "ALORidgeCV",
    "ALOTweedieRegressorCV",
]
