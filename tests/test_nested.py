"""Nested CV and dev-set tuning against hand-written scikit-learn loops."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import GridSearchCV, KFold

import aloocv
from conftest import make_data


def test_nested_exact_equals_sklearn_kfold_gridsearch():
    X, y = make_data("squared", 103, 6, seed=140)  # 103: uneven folds on both levels
    alphas = [0.01, 0.3, 3.0, 30.0, 300.0]
    outer = KFold(4, shuffle=True, random_state=0)
    res = aloocv.nested_cv(aloocv.ALORidgeCV(alphas=alphas), X, y, outer_folds=outer, inner=3)
    errs, chosen = [], []
    for train, test in outer.split(X):
        gs = GridSearchCV(
            Ridge(), {"alpha": alphas}, cv=KFold(3), scoring="neg_mean_squared_error"
        ).fit(X[train], y[train])
        chosen.append(gs.best_params_["alpha"])
        errs.append(np.mean(0.5 * (y[test] - gs.predict(X[test])) ** 2))
    assert [c.lam for c in res.chosen] == chosen
    np.testing.assert_allclose(res.fold_errors, errs, rtol=1e-9)
    assert res.estimate == pytest.approx(np.mean(errs), rel=1e-9)
    assert res.stderr == pytest.approx(np.std(errs, ddof=1) / 2, rel=1e-9)


def test_nested_alo_logistic_close_to_exact_inner():
    X, y = make_data("logistic", 400, 8, seed=141, scale=3.0)
    spec = {"loss": "logistic", "candidates": [0.1, 1.0, 10.0, 100.0]}
    a = aloocv.nested_cv(spec, X, y, outer_folds=5, inner="alo")
    e = aloocv.nested_cv(spec, X, y, outer_folds=5, inner=5)
    assert abs(a.estimate - e.estimate) <= e.stderr
    # the outer errors are those of the refitted chosen model: recompute one by hand
    rng = np.random.default_rng(0)
    labels = np.empty(400, dtype=int)
    labels[rng.permutation(400)] = np.arange(400) % 5
    test = labels == 0
    lam = a.chosen[0].lam
    m = LogisticRegression(C=1 / lam, tol=1e-12, solver="newton-cholesky").fit(X[~test], y[~test])
    eta = m.decision_function(X[test])
    ref = np.mean(np.logaddexp(0, eta) - y[test] * eta)
    assert a.fold_errors[0] == pytest.approx(ref, rel=1e-6)


def test_dev_set():
    X, y = make_data("squared", 200, 5, seed=142)
    res = aloocv.dev_set(
        {"loss": "squared", "candidates": [0.1, 10.0, 1000.0]}, X, y, dev_fraction=0.25
    )
    perm = np.random.default_rng(0).permutation(200)
    dev, train = perm[:50], perm[50:]
    scores = [
        np.mean(0.5 * (y[dev] - Ridge(alpha=a).fit(X[train], y[train]).predict(X[dev])) ** 2)
        for a in (0.1, 10.0, 1000.0)
    ]
    np.testing.assert_allclose(res.scores, scores, rtol=1e-9)
    assert res.estimate == pytest.approx(min(scores))
    assert res.fit.coef_.shape == (5,)


@pytest.mark.parametrize(
    ("kw", "exc", "match"),
    [
        ({"outer_folds": 1}, ValueError, "outer_folds must be >= 2"),
        ({"outer_folds": 2.0}, TypeError, "outer_folds must be an integer"),
        ({"inner": 1}, ValueError, "inner must be"),
        ({"inner": "kfold"}, ValueError, "inner must be"),
        ({"inner": 50}, ValueError, "larger than the outer training part"),
    ],
)
def test_bad_input(kw, exc, match):
    X, y = make_data("squared", 40, 3, seed=143)
    with pytest.raises(exc, match=match):
        aloocv.nested_cv({"loss": "squared", "candidates": [1.0, 10.0]}, X, y, **kw)


def test_bad_spec():
    X, y = make_data("squared", 40, 3, seed=144)
    with pytest.raises(TypeError, match="estimator_or_spec"):
        aloocv.nested_cv("ridge", X, y)
    with pytest.raises(ValueError, match="needs 'loss' and 'candidates'"):
        aloocv.nested_cv({"loss": "squared"}, X, y)
    with pytest.raises(ValueError, match="dev_fraction"):
        aloocv.dev_set({"loss": "squared", "candidates": [1.0]}, X, y, dev_fraction=1.5)
