"""aloocv: approximate leave-one-out cross-validation (ALOOCV) for regularized GLMs.

The whole leave-one-out vector of a penalized fit for about the price of one extra
Hessian pass (Beirami et al., 2017), computed in a C++/Eigen/OpenMP core.
"""

from __future__ import annotations

# isort: off
from . import _threads  # first: it loads the core under its OpenMP wait policy

# isort: on
from . import _blas
from . import losses as losses  # the public registry: aloocv.losses
from . import plotting as plotting  # the displays: aloocv.plotting
from ._diagnostics import (
    ALO_MIN_RCOND,
    ALO_UNRELIABLE_DH,
    SEPARATION_MARGIN,
    ALOWarning,
)
from ._kernel import kernel_ridge_loo
from ._version import __version__
from .api import fit, kfold, loo
from .bkk import ABKKRegressor, BKKCriterion, BKKRidge, SBKKRegressor
from .estimators import (
    ALOElasticNetCV,
    ALOGammaRegressorCV,
    ALOLogisticRegressionCV,
    ALOPoissonRegressorCV,
    ALORidgeCV,
    ALOTweedieRegressorCV,
)
from .losses import Huber, Multinomial, Tweedie
from .nested import dev_set, nested_cv
from .penalties import L1, L2, ElasticNet, Penalty
from .plotting import CVCurveDisplay, TuneDisplay
from .problem import Problem
from .results import (
    Certificate,
    DevSetResult,
    ErrorEstimate,
    FitResult,
    KFoldResult,
    LOOResult,
    MultinomialFitResult,
    MultiTargetKFoldResult,
    MultiTargetLOOResult,
    NestedCVResult,
)
from .tuning import TuneResult, tune

_blas.register()
_threads.register()


__all__ = [
    "ALO_MIN_RCOND",
    "ALO_UNRELIABLE_DH",
    "L1",
    "L2",
    "SEPARATION_MARGIN",
    "ABKKRegressor",
    "ALOElasticNetCV",
    "ALOGammaRegressorCV",
    "ALOLogisticRegressionCV",
    "ALOPoissonRegressorCV",
    "ALORidgeCV",
    "ALOTweedieRegressorCV",
    "ALOWarning",
    "BKKCriterion",
    "BKKRidge",
    "CVCurveDisplay",
    "Certificate",
    "DevSetResult",
    "ElasticNet",
    "ErrorEstimate",
    "FitResult",
    "Huber",
    "KFoldResult",
    "LOOResult",
    "MultiTargetKFoldResult",
    "MultiTargetLOOResult",
    "Multinomial",
    "MultinomialFitResult",
    "NestedCVResult",
    "Penalty",
    "Problem",
    "SBKKRegressor",
    "TuneDisplay",
    "TuneResult",
    "Tweedie",
    "__version__",
    "dev_set",
    "fit",
    "kernel_ridge_loo",
    "kfold",
    "loo",
    "nested_cv",
    "tune",
]
