"""Regressions of the estimators, BKK and the nested helpers (issue 25, item 9): each test
failed before its fix."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import sparse
from sklearn.linear_model import (
    ElasticNetCV,
    GammaRegressor,
    LogisticRegressionCV,
    PoissonRegressor,
    RidgeCV,
    TweedieRegressor,
)
from sklearn.metrics import make_scorer, roc_auc_score

import aloocv
from aloocv.bkk import BKKCriterion

REGRESSORS = [
    aloocv.ALORidgeCV,
    aloocv.ALOElasticNetCV,
    aloocv.ALOPoissonRegressorCV,
    aloocv.ALOGammaRegressorCV,
    aloocv.ALOTweedieRegressorCV,
]


def regression_data(n=60, p=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = X @ rng.standard_normal(p) + 0.5 * rng.standard_normal(n)
    return X, y


def positive_y(cls, y):
    """A response in the loss's domain (y > 0 fits every GLM here)."""
    return np.exp(0.3 * y) if cls not in (aloocv.ALORidgeCV, aloocv.ALOElasticNetCV) else y


# ------------------------------------------------------------- classifier scorers
@pytest.mark.parametrize("cls", REGRESSORS, ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    "scoring", ["roc_auc", "neg_log_loss", "average_precision", "accuracy", "f1"]
)
def test_classifier_scorer_on_a_regressor_is_a_value_error(cls, scoring):
    X, y = regression_data()
    with pytest.raises(ValueError, match="needs a classifier") as err:
        cls(scoring=scoring).fit(X, positive_y(cls, y))
    assert cls.__name__ in str(err.value)
    assert "LOORegressor" not in str(err.value)


@pytest.mark.parametrize("per_target", [False, True])
def test_classifier_scorer_on_ridge_with_several_targets(per_target):
    X, y = regression_data()
    Y = np.column_stack([y, -y])
    with pytest.raises(ValueError, match="needs a classifier"):
        aloocv.ALORidgeCV(scoring="roc_auc", alpha_per_target=per_target).fit(X, Y)


@pytest.mark.parametrize("cls", REGRESSORS, ids=lambda c: c.__name__)
def test_custom_scorer_asking_for_probabilities_on_a_regressor(cls):
    X, y = regression_data()

    def scorer(est, X, y):  # a callable that assumes a classifier
        return roc_auc_score(y > np.median(y), est.predict_proba(X)[:, 1])

    with pytest.raises(ValueError, match="needs a classifier"):
        cls(scoring=scorer).fit(X, positive_y(cls, y))
    made = make_scorer(roc_auc_score, response_method="decision_function")
    with pytest.raises(ValueError, match="needs a classifier"):
        cls(scoring=made).fit(X, positive_y(cls, y))


def test_regression_scorers_and_classifier_scorers_on_classifiers_still_work():
    X, y = regression_data()
    ridge = aloocv.ALORidgeCV(alphas=[0.1, 10.0], scoring="r2").fit(X, y)
    assert np.isfinite(ridge.best_score_)
    clf = aloocv.ALOLogisticRegressionCV(Cs=3, scoring="roc_auc").fit(X, y > 0)
    assert 0.5 < clf.best_score_ <= 1.0


# ------------------------------------------------------------------------------ BKK
@pytest.mark.parametrize("cls", [aloocv.BKKRidge, aloocv.SBKKRegressor, aloocv.ABKKRegressor])
def test_bkk_refuses_a_negative_tol(cls):
    X, y = regression_data(n=40)
    with pytest.raises(ValueError, match="tol must be non-negative"):
        cls(tol=-1e-4).fit(X, y)
    assert np.all(np.isfinite(cls(tol=0.0, max_iter=5).fit(X, y).coef_))


def test_bkk_criterion_overflow_is_an_error_not_nan():
    X, y = regression_data(n=40)
    crit = BKKCriterion.from_data(X * 1e150, y, T=5)  # eigenvalues ~1e301: their squares overflow
    with pytest.raises(ValueError, match=r"residual_norms is not finite.*rescale"):
        crit.value_and_grad(np.log(1e3))
    with pytest.raises(ValueError, match="rescale X"):
        crit.norms(1e3)
    with pytest.raises(ValueError, match="rescale X"):
        aloocv.BKKRidge(T=5).fit(X * 1e150, y)


@pytest.mark.parametrize("cls", [aloocv.BKKRidge, aloocv.SBKKRegressor, aloocv.ABKKRegressor])
def test_bkk_gram_overflow_names_the_cause(cls):
    X, y = regression_data(n=40)
    with pytest.raises(ValueError, match=r"X\^T X overflows float64.*rescale X"):
        cls(T=3, max_iter=5).fit(X * 1e155, y)
    with pytest.raises(ValueError, match=r"X\^T X overflows float64.*rescale X"):
        BKKCriterion.from_data(sparse.csr_matrix(X * 1e155), y, T=3)


@pytest.mark.parametrize("cls", [aloocv.SBKKRegressor, aloocv.ABKKRegressor])
def test_bkk_families_on_huge_X_give_an_error_or_finite_results(cls):
    X, y = regression_data(n=40)
    try:
        m = cls(T=5, max_iter=20).fit(X * 1e150, y)
    except ValueError as exc:
        assert "rescale" in str(exc)
    else:
        assert np.isfinite(m.criterion_) and np.all(np.isfinite(m.coef_))
        assert np.all(np.isfinite(m.predict(X * 1e150)))


# ---------------------------------------------------------------------- dev_set
@pytest.mark.parametrize(
    "spec",
    [{"loss": "squared", "candidates": []}, aloocv.ALORidgeCV(alphas=[])],
    ids=["spec", "estimator"],
)
def test_dev_set_and_nested_cv_without_candidates(spec):
    X, y = regression_data()
    with pytest.raises(ValueError, match="no candidates"):
        aloocv.dev_set(spec, X, y)
    with pytest.raises(ValueError, match="no candidates"):
        aloocv.nested_cv(spec, X, y, outer_folds=3, inner="exact")


# ------------------------------------------------------- elastic net: l1_ratio list
@pytest.mark.parametrize("alphas", [20, [0.3, 0.1, 0.03, 0.01, 0.003]])
def test_elastic_net_l1_ratio_list_mixing_lasso(alphas):
    X, y = regression_data(n=80, p=6, seed=3)
    kw = dict(alphas=alphas, eps=1e-2)
    both = aloocv.ALOElasticNetCV(l1_ratio=[0.5, 1.0], **kw).fit(X, y)
    singles = [aloocv.ALOElasticNetCV(l1_ratio=r, **kw).fit(X, y) for r in (0.5, 1.0)]
    best = singles[int(np.argmax([s.best_score_ for s in singles]))]
    assert both.l1_ratio_ == best.l1_ratio_
    assert both.alpha_ == best.alpha_
    np.testing.assert_array_equal(both.coef_, best.coef_)
    assert both.intercept_ == best.intercept_
    assert both.best_score_ == best.best_score_
    # ElasticNetCV's layout: (n_l1_ratio, n_alphas[, 1]), each row the single fit's
    np.testing.assert_array_equal(both.alphas_, np.stack([s.alphas_ for s in singles]))
    np.testing.assert_array_equal(both.mse_path_, np.stack([s.mse_path_ for s in singles]))
    assert both.n_fits_ == sum(s.n_fits_ for s in singles)
    assert both.search_results_["loss"].size == sum(s.search_results_["loss"].size for s in singles)
    # as scikit-learn's ElasticNetCV takes the same list
    ElasticNetCV(l1_ratio=[0.5, 1.0], alphas=5, cv=3).fit(X, y)


def test_elastic_net_l1_ratio_list_with_scoring_and_several_targets():
    X, y = regression_data(n=80, p=6, seed=4)
    kw = dict(alphas=[0.3, 0.1, 0.03, 0.01])
    both = aloocv.ALOElasticNetCV(l1_ratio=[1.0, 0.5], scoring="r2", **kw).fit(X, y)
    singles = [aloocv.ALOElasticNetCV(l1_ratio=r, scoring="r2", **kw).fit(X, y) for r in (1, 0.5)]
    best = singles[int(np.argmax([s.best_score_ for s in singles]))]
    assert (both.l1_ratio_, both.alpha_) == (best.l1_ratio_, best.alpha_)
    # a shared alpha over two targets: the mean leave-one-out loss over the targets
    Y = np.column_stack([y, X[:, 0] - y])
    shared = aloocv.ALOElasticNetCV(l1_ratio=[0.5, 1.0], **kw).fit(X, Y)
    losses = {
        r: np.mean([aloocv.ALOElasticNetCV(l1_ratio=r, **kw).fit(X, t).mse_path_ for t in Y.T], 0)
        for r in (0.5, 1.0)
    }
    r_best = min(losses, key=lambda r: losses[r].min())
    assert shared.l1_ratio_ == r_best
    assert shared.alpha_ == pytest.approx(kw["alphas"][int(np.argmin(losses[r_best]))], rel=1e-12)


# ---------------------------------------------------- elastic net: a constant design
@pytest.mark.parametrize("l1_ratio", [0.5, 1.0, [0.5, 1.0]])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_elastic_net_on_a_constant_design_is_the_mean(l1_ratio, fmt):
    rng = np.random.default_rng(5)
    y = rng.standard_normal(50)
    w = rng.uniform(0.5, 2.0, 50)
    Xc = np.ones((50, 3)) * np.array([1.0, -2.0, 3.0])
    X = Xc if fmt == "dense" else sparse.csr_matrix(Xc)
    for sw in (None, w):
        ours = aloocv.ALOElasticNetCV(l1_ratio=l1_ratio, alphas=10).fit(X, y, sample_weight=sw)
        ref = ElasticNetCV(l1_ratio=l1_ratio, alphas=10, cv=5).fit(Xc, y, sample_weight=sw)
        np.testing.assert_array_equal(ours.coef_, ref.coef_)  # zeros
        assert ours.intercept_ == pytest.approx(ref.intercept_, rel=1e-12, abs=1e-15)
        assert ours.intercept_ == pytest.approx(np.average(y, weights=sw), rel=1e-12)
        # the leave-one-out loss of the mean: (y_i - mean without i)^2, by brute force
        sw1 = np.ones(50) if sw is None else sw
        loo = np.array([np.average(np.delete(y, i), weights=np.delete(sw1, i)) for i in range(50)])
        mse = np.average((y - loo) ** 2, weights=sw1)
        np.testing.assert_allclose(np.ravel(ours.mse_path_), mse, rtol=1e-10)
    Y = np.column_stack([y, 2 * y + 1])
    two = aloocv.ALOElasticNetCV(l1_ratio=l1_ratio, alphas=5).fit(X, Y)
    np.testing.assert_array_equal(two.coef_, np.zeros((2, 3)))
    np.testing.assert_allclose(two.intercept_, Y.mean(axis=0), rtol=1e-12)


# ---------------------------------------------------------------------- np.matrix
PEERS = [
    (aloocv.ALORidgeCV(alphas=[0.1, 1.0, 10.0]), RidgeCV(alphas=[0.1, 1.0, 10.0]), "real"),
    (aloocv.ALOElasticNetCV(alphas=5), ElasticNetCV(alphas=5, cv=3), "real"),
    (aloocv.ALOLogisticRegressionCV(Cs=3), LogisticRegressionCV(Cs=3, cv=3), "labels"),
    (aloocv.ALOPoissonRegressorCV(alphas=(0.01, 1.0)), PoissonRegressor(), "positive"),
    (aloocv.ALOGammaRegressorCV(alphas=(0.01, 1.0)), GammaRegressor(), "positive"),
    (aloocv.ALOTweedieRegressorCV(alphas=(0.01, 1.0)), TweedieRegressor(power=1.5), "positive"),
]


def _outcome(est, X, y):
    """("ok", predictions on X) or (exception type, message) of fit + predict."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # LogisticRegressionCV's defaults
        try:
            return "ok", np.asarray(est.fit(X, y).predict(X))
        except (TypeError, ValueError) as exc:
            return type(exc), str(exc)


@pytest.mark.parametrize("ours, peer, kind", PEERS, ids=[type(e[0]).__name__ for e in PEERS])
def test_np_matrix_input_as_scikit_learn(ours, peer, kind):
    """X or y as ``np.matrix`` meets scikit-learn's own validation: where scikit-learn's
    estimator refuses it (its ``check_array``: "np.matrix is not supported", scikit-learn
    >= 1.2) ours refuse it with the same error; where it accepts it, ours fit exactly as
    on the ndarray."""
    X, y = regression_data()
    y = {"real": y, "labels": (y > 0).astype(int), "positive": np.exp(0.3 * y)}[kind]
    base = _outcome(ours, X, y)
    assert base[0] == "ok"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)  # numpy's, on np.matrix
        MX, My = np.asmatrix(X), np.asmatrix(y)
    for Xm, ym in [(MX, y), (X, My), (X, My.T), (MX, My.T)]:
        theirs = _outcome(peer, Xm, ym)
        got = _outcome(ours, Xm, ym)
        if theirs[0] == "ok":
            assert got[0] == "ok"
            np.testing.assert_array_equal(got[1], base[1])
        else:
            assert got == theirs
