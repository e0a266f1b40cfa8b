"""Every public entry point goes through the validation layer.

The public names come from ``aloocv.__all__``: each callable that takes data must have a
caller in ``CALLS`` below, and each must reject NaN, complex and malformed sparse input
with a ValueError/TypeError that names the problem. A new entry point added to
``__all__`` without a caller here fails ``test_every_entry_point_is_enumerated``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import aloocv
from conftest import make_data

N, P = 24, 3
X0, Y0 = make_data("squared", N, P, seed=170)
YC = (Y0 > np.median(Y0)).astype(float)  # class labels for the classifier

# public names that take no data: penalties (checked in test_hardening), result types,
# the diagnostics' warning class, certificate and thresholds, the plots' displays (of a
# fitted estimator or a result: tests/test_plotting.py)
NO_DATA = {
    "CVCurveDisplay",
    "TuneDisplay",
    "L1",
    "L2",
    "ElasticNet",
    "Penalty",
    "Tweedie",
    "Huber",
    "Multinomial",
    "__version__",
    "ALOWarning",
    "Certificate",
    "ErrorEstimate",
    "ALO_UNRELIABLE_DH",
    "ALO_MIN_RCOND",
    "SEPARATION_MARGIN",
}
RESULTS = {n for n in aloocv.__all__ if n.endswith("Result")}


def _kernel(X):
    """A square matrix carrying X's defect (NaN, complex, malformed sparse) into K."""
    if sp.issparse(X):
        return X
    X = np.asarray(X)
    return X @ X.T


SPEC = {"loss": "squared", "candidates": [0.5, 2.0]}

CALLS = {
    "fit": lambda X, y: aloocv.fit(X, y, loss="squared"),
    "loo": lambda X, y: aloocv.loo(X, y, loss="squared"),
    "kfold": lambda X, y: aloocv.kfold(X, y, loss="squared", n_folds=3),
    "Problem": lambda X, y: aloocv.Problem.build(X, y, loss="squared"),
    "tune": lambda X, y: aloocv.tune(X, y, loss="squared", method="grid", n_grid=2),
    "kernel_ridge_loo": lambda X, y: aloocv.kernel_ridge_loo(_kernel(X), y, 1.0),
    "nested_cv": lambda X, y: aloocv.nested_cv(SPEC, X, y, outer_folds=3),
    "dev_set": lambda X, y: aloocv.dev_set(SPEC, X, y),
    "ALORidgeCV": lambda X, y: aloocv.ALORidgeCV().fit(X, y),
    "ALOElasticNetCV": lambda X, y: aloocv.ALOElasticNetCV(alphas=2).fit(X, y),
    "ALOLogisticRegressionCV": lambda X, y: aloocv.ALOLogisticRegressionCV(Cs=2).fit(X, y),
    "ALOPoissonRegressorCV": lambda X, y: aloocv.ALOPoissonRegressorCV(alphas=(0.1, 1.0)).fit(X, y),
    "ALOGammaRegressorCV": lambda X, y: aloocv.ALOGammaRegressorCV(alphas=(0.1, 1.0)).fit(X, y),
    "ALOTweedieRegressorCV": lambda X, y: aloocv.ALOTweedieRegressorCV(alphas=(0.1, 1.0)).fit(X, y),
    "BKKRidge": lambda X, y: aloocv.BKKRidge(T=2, max_iter=3).fit(X, y),
    "SBKKRegressor": lambda X, y: aloocv.SBKKRegressor(T=2, max_iter=3).fit(X, y),
    "ABKKRegressor": lambda X, y: aloocv.ABKKRegressor(T=2, max_iter=3).fit(X, y),
    "BKKCriterion": lambda X, y: aloocv.BKKCriterion.from_data(X, y, T=2),
}


YP = np.abs(Y0) + 0.1  # positive responses for the log-link GLM regressors
GLM_REGRESSORS = {"ALOPoissonRegressorCV", "ALOGammaRegressorCV", "ALOTweedieRegressorCV"}


def _y_for(name):
    if name in GLM_REGRESSORS:
        return YP
    return YC if name == "ALOLogisticRegressionCV" else Y0


def test_every_entry_point_is_enumerated():
    public = {n for n in aloocv.__all__ if n not in NO_DATA | RESULTS}
    assert public == set(CALLS), (
        "a public entry point was added or removed: add its caller to CALLS "
        "(and route its input through aloocv._validation)"
    )
    for n in RESULTS:
        assert isinstance(getattr(aloocv, n), type)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_valid_input_runs(name):
    CALLS[name](X0, _y_for(name))


def _nan_X():
    X = X0.copy()
    X[3, 1] = np.nan
    return X


def _bad_sparse():
    A = sp.csr_matrix(X0)
    A.indices[4] = P  # == p: one past the last column
    if A.shape[0] != A.shape[1]:
        return A
    return A  # pragma: no cover


def _bad_sparse_square():
    A = sp.csr_matrix(X0 @ X0.T)
    A.indices[4] = N
    return A


BAD = {
    "NaN X": (lambda name: (_nan_X(), _y_for(name)), ValueError, "NaN"),
    "inf y": (lambda name: (X0, np.r_[_y_for(name)[:-1], np.inf]), ValueError, "NaN|inf"),
    "complex y": (lambda name: (X0, _y_for(name) + 1j), (TypeError, ValueError), "[Cc]omplex"),
    "complex X": (lambda name: (X0 + 1j, _y_for(name)), (TypeError, ValueError), "[Cc]omplex"),
    "malformed sparse": (
        lambda name: (
            _bad_sparse_square() if name == "kernel_ridge_loo" else _bad_sparse(),
            _y_for(name),
        ),
        (ValueError, TypeError),
        "malformed sparse|out of range|sparse matri",
    ),
    "ragged X": (lambda name: ([[1.0, 2.0], [3.0]] * (N // 2), _y_for(name)), ValueError, "."),
}


@pytest.mark.parametrize("bad", sorted(BAD))
@pytest.mark.parametrize("name", sorted(CALLS))
def test_entry_point_rejects_bad_input(name, bad):
    make, exc, match = BAD[bad]
    X, y = make(name)
    with pytest.raises(exc, match=match):
        CALLS[name](X, y)
