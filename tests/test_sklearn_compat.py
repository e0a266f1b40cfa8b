"""Drop-in conventions of scikit-learn's CV estimators: scoring=, class_weight,
l1_ratios, fitted attributes, per-sample arrays only when asked, plots."""

from __future__ import annotations

import inspect
import pickle

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression, RidgeCV
from sklearn.metrics import (
    accuracy_score,
    get_scorer,
    mean_absolute_error,
    mean_poisson_deviance,
    r2_score,
    roc_auc_score,
)
from threadpoolctl import threadpool_limits

import aloocv
from conftest import make_data


def _sk(fn, *args, **kwargs):
    with threadpool_limits(1):
        return fn(*args, **kwargs)


# -- scoring= ------------------------------------------------------------------------


def test_ridge_best_score_is_ridgecv_neg_mse():
    X, y = make_data("squared", 120, 6, seed=300)
    alphas = np.logspace(-3, 3, 9)
    ours = aloocv.ALORidgeCV(alphas=alphas).fit(X, y)
    ref = _sk(RidgeCV(alphas=alphas).fit, X, y)
    assert ours.alpha_ == ref.alpha_
    assert ours.best_score_ == pytest.approx(ref.best_score_, rel=1e-8, abs=1e-12)
    # with sample weights RidgeCV scores sample_weight * squared error
    w = np.random.default_rng(301).uniform(0.5, 2.0, 120)
    ours = aloocv.ALORidgeCV(alphas=alphas, store_cv_results=True).fit(X, y, sample_weight=w)
    ref = _sk(RidgeCV(alphas=alphas, store_cv_results=True).fit, X, y, sample_weight=w)
    assert ours.alpha_ == ref.alpha_
    assert ours.best_score_ == pytest.approx(ref.best_score_, rel=1e-8)
    np.testing.assert_allclose(ours.cv_results_, ref.cv_results_, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("scoring", ["r2", "neg_mean_absolute_error"])
def test_ridge_scoring_matches_ridgecv(scoring):
    X, y = make_data("squared", 120, 6, seed=302)
    alphas = np.logspace(-3, 3, 9)
    ours = aloocv.ALORidgeCV(alphas=alphas, scoring=scoring, store_cv_results=True).fit(X, y)
    ref = _sk(RidgeCV(alphas=alphas, scoring=scoring, store_cv_results=True).fit, X, y)
    assert ours.alpha_ == ref.alpha_
    assert ours.best_score_ == pytest.approx(ref.best_score_, rel=1e-8)
    # with a scorer cv_results_ holds the leave-one-out predictions, as RidgeCV's
    np.testing.assert_allclose(ours.cv_results_, ref.cv_results_, rtol=1e-8, atol=1e-10)
    metric = r2_score if scoring == "r2" else mean_absolute_error
    sign = 1 if scoring == "r2" else -1
    scores = [sign * metric(y, ours.cv_results_[:, k]) for k in range(alphas.size)]
    order = np.argsort(ours.search_results_["alpha"])  # the search runs from large alphas
    np.testing.assert_allclose(ours.search_results_["score"][order], scores, rtol=1e-10)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-8, atol=1e-12)
    # sample weights reach the fit and the scorer, as in RidgeCV
    w = np.random.default_rng(321).uniform(0.2, 3.0, 120)
    ours = aloocv.ALORidgeCV(alphas=alphas, scoring=scoring).fit(X, y, sample_weight=w)
    ref = _sk(RidgeCV(alphas=alphas, scoring=scoring).fit, X, y, sample_weight=w)
    assert ours.alpha_ == ref.alpha_
    assert ours.best_score_ == pytest.approx(ref.best_score_, rel=1e-8)


def test_logistic_roc_auc_is_auc_of_loo_probabilities():
    X, y = make_data("logistic", 200, 8, seed=303, scale=2.0)
    Cs = np.logspace(-3, 2, 8)
    est = aloocv.ALOLogisticRegressionCV(Cs=Cs, scoring="roc_auc", store_loo=True).fit(X, y)
    # independent: the LOO probabilities of every C from aloocv.loo, AUC by scikit-learn
    aucs = []
    for C in Cs:
        r = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0 / C))
        aucs.append(roc_auc_score(y, 1.0 / (1.0 + np.exp(-r.predictions))))
    k = int(np.argmax(aucs))
    assert est.C_[0] == pytest.approx(Cs[k])
    assert est.best_score_ == pytest.approx(aucs[k], rel=1e-10)
    assert est.best_score_ == pytest.approx(roc_auc_score(y, est.loo_predictions_), rel=1e-10)
    np.testing.assert_allclose(est.scores_[1.0][0], aucs, rtol=1e-10)
    # the chosen model is LogisticRegression at C_
    ref = _sk(LogisticRegression(C=est.C_[0], tol=1e-12).fit, X, y)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-5, atol=1e-7)
    # sample weights reach the scorer, as in LogisticRegressionCV
    w = np.random.default_rng(322).uniform(0.2, 3.0, 200)
    wtd = aloocv.ALOLogisticRegressionCV(Cs=Cs, scoring="roc_auc", store_loo=True)
    wtd.fit(X, y, sample_weight=w)
    assert wtd.best_score_ == pytest.approx(
        roc_auc_score(y, wtd.loo_predictions_, sample_weight=w), rel=1e-10
    )


def test_logistic_default_score_is_neg_log_loss_and_callable_scorer():
    X, y = make_data("logistic", 150, 5, seed=304, scale=2.0)
    labels = np.where(y > 0, "b", "a")
    est = aloocv.ALOLogisticRegressionCV(Cs=5, store_loo=True).fit(X, labels)
    p = est.loo_predictions_
    ll = -np.mean(np.where(y > 0, np.log(p), np.log1p(-p)))
    assert est.best_score_ == pytest.approx(-ll, rel=1e-10)
    neg = aloocv.ALOLogisticRegressionCV(Cs=5, scoring="neg_log_loss").fit(X, labels)
    assert neg.C_[0] == est.C_[0]
    assert neg.best_score_ == pytest.approx(est.best_score_, rel=1e-9)

    calls = []

    def my_scorer(estimator, X_, y_):
        calls.append(X_.shape[0])
        return accuracy_score(y_, estimator.predict(X_))

    acc = aloocv.ALOLogisticRegressionCV(Cs=5, scoring=my_scorer, store_loo=True)
    acc.fit(X, labels)
    assert calls == [150] * 5
    assert acc.best_score_ == pytest.approx(
        accuracy_score(labels, np.where(acc.loo_predictions_ > 0.5, "b", "a"))
    )


def test_multinomial_and_ovr_scoring():
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    Cs = np.logspace(-2, 2, 5)
    est = aloocv.ALOLogisticRegressionCV(Cs=Cs, scoring="accuracy", store_loo=True).fit(X, y)
    assert est.best_score_ == pytest.approx(
        accuracy_score(y, np.argmax(est.loo_predictions_, axis=1))
    )
    assert est.scores_[0].shape == (1, 5) and est.coefs_paths_[2].shape == (1, 5, 5)
    np.testing.assert_array_equal(est.scores_[0], est.scores_[2])
    ovr = aloocv.ALOLogisticRegressionCV(Cs=Cs, scoring="roc_auc", multi_class="ovr").fit(X, y)
    for k in range(3):  # each class's binary problem, scored on its own
        b = aloocv.ALOLogisticRegressionCV(Cs=Cs, scoring="roc_auc").fit(X, (y == k).astype(int))
        assert ovr.C_[k] == b.C_[0]
        np.testing.assert_allclose(ovr.scores_[k], b.scores_[1])


def test_glm_scoring_on_loo_means():
    X, y = make_data("poisson", 150, 4, seed=305)
    alphas = (1e-3, 1e-2, 1e-1, 1.0)
    est = aloocv.ALOPoissonRegressorCV(
        alphas=alphas, scoring="neg_mean_poisson_deviance", store_loo=True
    ).fit(X, y)
    dev = [
        mean_poisson_deviance(
            y, np.exp(aloocv.loo(X, y, loss="poisson", penalty=aloocv.L2(a * 150)).predictions)
        )
        for a in alphas
    ]
    assert est.alpha_ == alphas[int(np.argmin(dev))]
    assert est.best_score_ == pytest.approx(-min(dev), rel=1e-9)
    assert -est.best_score_ == pytest.approx(
        mean_poisson_deviance(y, np.exp(est.loo_predictions_)), rel=1e-9
    )


def test_enet_scoring_and_scorer_object():
    X, y = make_data("squared", 120, 8, seed=306)
    est = aloocv.ALOElasticNetCV(alphas=6, scoring=get_scorer("r2"), store_loo=True).fit(X, y)
    assert est.best_score_ == pytest.approx(r2_score(y, est.loo_predictions_), rel=1e-10)
    assert est.best_score_ == pytest.approx(est.search_results_["score"].max())


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"scoring": "no_such_metric"}, ValueError, "not a scikit-learn scorer"),
        ({"scoring": ["r2", "neg_mean_squared_error"]}, ValueError, "multimetric"),
        ({"scoring": 3}, TypeError, "scoring must be"),
        ({"scoring": "r2", "search": "gradient"}, ValueError, "needs search='grid'"),
        ({"scoring": "r2", "rule": "1se"}, ValueError, "rule='min'"),
        ({"scoring": "r2", "alpha_per_feature": True}, ValueError, "alpha_per_feature"),
    ],
)
def test_bad_scoring(kwargs, err, match):
    X, y = make_data("squared", 40, 3, seed=307)
    with pytest.raises(err, match=match):
        aloocv.ALORidgeCV(**kwargs).fit(X, y)


# -- class_weight, l1_ratios -----------------------------------------------------------


@pytest.mark.parametrize("class_weight", ["balanced", {0: 3.0, 1: 0.5}])
def test_class_weight_binary_matches_sklearn(class_weight):
    rng = np.random.default_rng(308)
    X = rng.standard_normal((200, 5))
    y = (X[:, 0] + rng.standard_normal(200) > 1.0).astype(int)  # unbalanced
    w = rng.uniform(0.5, 2.0, 200)
    est = aloocv.ALOLogisticRegressionCV(Cs=4, class_weight=class_weight, tol=1e-12)
    est.fit(X, y, sample_weight=w)
    ref = LogisticRegression(C=est.C_[0], class_weight=class_weight, tol=1e-12, max_iter=1000)
    _sk(ref.fit, X, y, sample_weight=w)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-6, atol=1e-8)
    plain = aloocv.ALOLogisticRegressionCV(Cs=4, tol=1e-12).fit(X, y, sample_weight=w)
    assert not np.allclose(plain.intercept_, est.intercept_)


def test_class_weight_multinomial_and_ovr():
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    keep = np.r_[0:50, 50:80, 100:150]  # unbalanced classes
    X, y = X[keep], y[keep]
    est = aloocv.ALOLogisticRegressionCV(Cs=3, class_weight="balanced", tol=1e-12).fit(X, y)
    ref = LogisticRegression(C=est.C_[0], class_weight="balanced", tol=1e-12, max_iter=5000)
    _sk(ref.fit, X, y)
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(X), atol=1e-6)
    # one-vs-rest: each class's binary model with the per-sample weights of the labels
    cw = {0: 2.0, 1: 1.0, 2: 0.5}
    ovr = aloocv.ALOLogisticRegressionCV(Cs=3, class_weight=cw, multi_class="ovr", tol=1e-12)
    ovr.fit(X, y)
    w = np.array([cw[v] for v in y])
    for k in range(3):
        b = LogisticRegression(C=ovr.C_[k], tol=1e-12, max_iter=5000)
        _sk(b.fit, X, (y == k).astype(int), sample_weight=w)
        np.testing.assert_allclose(ovr.coef_[k], b.coef_[0], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    ("cw", "err", "match"),
    [
        ({5: 1.0}, ValueError, "not classes of y"),
        ({0: -1.0}, ValueError, "must be finite and >= 0"),
        ({0: "a"}, TypeError, "real number"),
        ("unbalanced", TypeError, "class_weight must be"),
    ],
)
def test_bad_class_weight(cw, err, match):
    X, y = make_data("logistic", 40, 3, seed=309)
    with pytest.raises(err, match=match):
        aloocv.ALOLogisticRegressionCV(Cs=2, class_weight=cw).fit(X, y)


def test_l1_ratios_are_honoured():
    X, y = make_data("logistic", 200, 8, seed=310, scale=2.0)
    Cs = [0.05, 0.5, 5.0]
    est = aloocv.ALOLogisticRegressionCV(Cs=Cs, l1_ratios=[0.5], tol=1e-12).fit(X, y)
    assert est.l1_ratio_[0] == 0.5
    acv = [
        aloocv.loo(X, y, penalty=aloocv.ElasticNet(0.5 / C, 0.5 / C), tol=1e-12).mean for C in Cs
    ]
    assert est.C_[0] == Cs[int(np.argmin(acv))]
    # sklearn's objective: C sum(logloss) + l1_ratio |w|_1 + (1 - l1_ratio)/2 |w|^2
    ref = LogisticRegression(C=est.C_[0], l1_ratio=0.5, solver="saga", tol=1e-12, max_iter=200000)
    _sk(ref.fit, X, y)
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=2e-5)
    two = aloocv.ALOLogisticRegressionCV(Cs=Cs, l1_ratios=[0.2, 0.8]).fit(X, y)
    assert two.scores_[1.0].shape == (1, 3, 2)
    assert two.coefs_paths_[1.0].shape == (1, 3, 2, 9)
    np.testing.assert_array_equal(two.l1_ratios_, [0.2, 0.8])
    assert aloocv.ALOLogisticRegressionCV(Cs=Cs).fit(X, y).l1_ratios_.tolist() == [None]
    with pytest.raises(ValueError, match="contradicts"):
        aloocv.ALOLogisticRegressionCV(Cs=Cs, penalty="l2", l1_ratios=[0.5]).fit(X, y)
    with pytest.raises(ValueError, match="mixes"):
        aloocv.ALOLogisticRegressionCV(Cs=Cs, l1_ratios=[0.0, 0.5]).fit(X, y)
    with pytest.raises(ValueError, match="L2 penalty only"):
        aloocv.ALOLogisticRegressionCV(Cs=Cs, l1_ratios=[0.5]).fit(X, np.arange(200) % 3)


def test_coefs_paths_are_the_fits_of_each_candidate():
    X, y = make_data("logistic", 120, 4, seed=311, scale=2.0)
    Cs = [0.1, 1.0, 10.0]
    est = aloocv.ALOLogisticRegressionCV(Cs=Cs, tol=1e-12).fit(X, y)
    np.testing.assert_array_equal(est.Cs_, Cs)
    assert est.n_iter_.shape == (1, 1, 3) and np.all(est.n_iter_ >= 1)
    assert est.n_fits_ >= 3
    path = est.coefs_paths_[1.0]
    assert path.shape == (1, 3, 5)
    for k, C in enumerate(Cs):
        ref = _sk(LogisticRegression(C=C, tol=1e-12).fit, X, y)
        np.testing.assert_allclose(path[0, k, :4], ref.coef_[0], rtol=1e-6, atol=1e-8)
        assert path[0, k, 4] == pytest.approx(ref.intercept_[0], abs=1e-7)


# -- names and per-sample arrays --------------------------------------------------------


# -- cv=: the regularization chosen by approximate K-fold / leave-group-out -----------


def _cancer():
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    return (X - X.mean(axis=0)) / X.std(axis=0), y


def _diabetes():
    from sklearn.datasets import load_diabetes

    return load_diabetes(return_X_y=True)


def _refit_cv(make, X, y, splits, loss):
    """Brute force: the pooled mean held-out loss of scikit-learn refits on each training
    set (``loss(y_test, model, X_test)`` summed per test set)."""
    total = sum(loss(y[te], _sk(make().fit, X[tr], y[tr]), X[te]) for tr, te in splits)
    return total / sum(te.size for _, te in splits)


def _half_sq(y, model, X):
    return 0.5 * np.sum((y - model.predict(X)) ** 2)


def _log_loss_sum(y, model, X):
    d = model.decision_function(X)
    return np.sum(np.logaddexp(0.0, d) - y * d)


def test_ridge_cv_is_exact_kfold_of_refits():
    from sklearn.linear_model import Ridge
    from sklearn.model_selection import GroupKFold, KFold

    X, y = _diabetes()
    alphas = np.logspace(-4, 1, 8)
    g = np.arange(y.size) % 11
    for cv, splits, kw in [
        (5, list(KFold(5).split(X)), {}),
        (GroupKFold(4), list(GroupKFold(4).split(X, y, g)), {"groups": g}),
    ]:
        est = aloocv.ALORidgeCV(alphas=alphas, cv=cv, store_cv_results=True).fit(X, y, **kw)
        ref = np.array(
            [_refit_cv(lambda a=a: Ridge(alpha=a), X, y, splits, _half_sq) for a in alphas]
        )
        # squared loss with an L2 penalty: the fold downdate is exact K-fold
        order = np.argsort(est.search_results_["alpha"])
        np.testing.assert_allclose(est.search_results_["loss"][order], ref, rtol=1e-8)
        assert est.alpha_ == alphas[np.argmin(ref)]
        assert est.best_score_ == pytest.approx(-2 * ref.min(), rel=1e-8)
        assert est.cv_results_.shape == (y.size, alphas.size)
        np.testing.assert_allclose(est.cv_results_.mean(axis=0), 2 * ref, rtol=1e-8)
        # the K-fold result of the choice, and the held-out predictions of each fold
        assert isinstance(est.tune_result_.loo, aloocv.KFoldResult)
        tr, te = splits[0]
        held = _sk(Ridge(alpha=est.alpha_).fit, X[tr], y[tr]).predict(X[te])
        np.testing.assert_allclose(est.loo_predictions_[te], held, rtol=1e-8)


def test_logistic_cv_int_is_stratified_and_tracks_refits():
    from sklearn.model_selection import StratifiedKFold

    X, y = _cancer()
    Cs = np.logspace(-3, 1.5, 8)
    est = aloocv.ALOLogisticRegressionCV(Cs=Cs, cv=5).fit(X, y)
    splits = list(StratifiedKFold(5).split(X, y))
    # the same estimate as aloocv.kfold on scikit-learn's stratified folds
    for C, loss in zip(est.search_results_["C"], est.search_results_["loss"]):
        direct = aloocv.kfold(X, y, "logistic", aloocv.L2(1 / C), cv=StratifiedKFold(5))
        assert loss == pytest.approx(direct.mean, rel=1e-10)
    # against refits of scikit-learn's LogisticRegression on every training set: the
    # one-step approximation within a few percent, and the same choice of C
    ref = np.array(
        [
            _refit_cv(
                lambda C=C: LogisticRegression(C=C, tol=1e-10, max_iter=10000),
                X,
                y,
                splits,
                _log_loss_sum,
            )
            for C in Cs
        ]
    )
    np.testing.assert_allclose(est.search_results_["loss"], ref, rtol=0.08)
    assert np.ptp(ref) > 0.5 * ref.min()  # the curve is not flat
    assert est.C_[0] == Cs[np.argmin(ref)]
    assert est.best_score_ == pytest.approx(-est.search_results_["loss"].min())
    # scores_: LogisticRegressionCV's layout, one row per split (minus its mean log-loss)
    direct = aloocv.kfold(X, y, "logistic", aloocv.L2(1 / est.C_[0]), cv=splits)
    assert est.scores_[1].shape == (5, Cs.size)
    k = int(np.flatnonzero(Cs == est.C_[0])[0])
    np.testing.assert_allclose(est.scores_[1][:, k], -direct.fold_means, rtol=1e-10)


def test_logistic_cv_scorer_is_averaged_over_splits():
    from sklearn.model_selection import StratifiedKFold

    X, y = _cancer()
    Cs = np.logspace(-3, 1, 5)
    est = aloocv.ALOLogisticRegressionCV(Cs=Cs, cv=4, scoring="roc_auc").fit(X, y)
    k = int(np.flatnonzero(Cs == est.C_[0])[0])
    direct = aloocv.kfold(X, y, "logistic", aloocv.L2(1 / est.C_[0]), cv=StratifiedKFold(4))
    per = [roc_auc_score(y[te], p) for te, p in zip(direct.test_indices, direct.split_predictions)]
    np.testing.assert_allclose(est.scores_[1][:, k], per, rtol=1e-10)
    assert est.best_score_ == pytest.approx(np.mean(per), rel=1e-12)
    assert est.best_score_ == pytest.approx(est.scores_[1].mean(axis=0).max(), rel=1e-12)


def test_cv_groups_through_fit_and_metadata_routing():
    import sklearn
    from sklearn.model_selection import GroupKFold, LeaveOneGroupOut, cross_validate

    X, y = _cancer()
    g = np.arange(y.size) // 57
    logo = LeaveOneGroupOut()
    est = aloocv.ALOLogisticRegressionCV(Cs=4, cv=logo, store_loo=True).fit(X, y, groups=g)
    C = est.C_[0]
    direct = aloocv.kfold(X, y, "logistic", aloocv.L2(1 / C), folds=g)
    assert -est.best_score_ == pytest.approx(direct.mean, rel=1e-10)
    assert est.tune_result_.loo.n_folds == np.unique(g).size
    with sklearn.config_context(enable_metadata_routing=True):
        routed = aloocv.ALOLogisticRegressionCV(Cs=4, cv=LeaveOneGroupOut()).fit(X, y, groups=g)
        assert routed.C_[0] == C and routed.best_score_ == est.best_score_
        # a meta-estimator routes groups to the outer splitter and to fit's splitter
        out = cross_validate(
            aloocv.ALORidgeCV(alphas=(0.1, 10.0), cv=GroupKFold(3)),
            X,
            y,
            cv=GroupKFold(4),
            params={"groups": g},
        )
    assert out["test_score"].shape == (4,)


def test_cv_glm_enet_and_targets_agree_with_kfold():
    from sklearn.linear_model import Ridge
    from sklearn.model_selection import KFold

    X, y = _diabetes()
    counts = np.round(y / 10)
    alphas = (1e-3, 1e-2, 1e-1)
    est = aloocv.ALOPoissonRegressorCV(alphas=alphas, cv=KFold(4)).fit(X, counts)
    for a, loss in zip(est.search_results_["alpha"], est.search_results_["loss"]):
        pen = aloocv.L2(a * y.size)
        direct = aloocv.kfold(X, counts, aloocv.losses.get_loss("poisson"), pen, cv=KFold(4))
        assert loss == pytest.approx(direct.mean, rel=1e-10)
    # elastic net: ElasticNetCV's mse_path_ with one column per split
    enet = aloocv.ALOElasticNetCV(alphas=4, l1_ratio=[0.5, 1.0], cv=5).fit(X, y)
    assert enet.mse_path_.shape == (2, 4, 5)
    k = np.unravel_index(np.argmin(enet.mse_path_.mean(axis=-1)), (2, 4))
    assert enet.alpha_ == pytest.approx(enet.alphas_[k], rel=1e-12)
    for r, ratio in enumerate((0.5, 1.0)):
        a = y.size * enet.alphas_[r, 1]
        pen = aloocv.L1(a) if ratio == 1.0 else aloocv.ElasticNet(a * ratio, a * (1 - ratio))
        direct = aloocv.kfold(X, y, "squared", pen, cv=KFold(5))
        np.testing.assert_allclose(enet.mse_path_[r, 1], 2 * direct.fold_means, rtol=1e-7)
    # several targets: exact K-fold per target from one decomposition, as refits
    Y = np.column_stack([y, np.sqrt(y), X[:, 2] * 100])
    grid = np.logspace(-4, 1, 6)
    multi = aloocv.ALORidgeCV(alphas=grid, cv=5, alpha_per_target=True).fit(X, Y)
    splits = list(KFold(5).split(X))
    for t in range(Y.shape[1]):
        ref = [_refit_cv(lambda a=a: Ridge(alpha=a), X, Y[:, t], splits, _half_sq) for a in grid]
        assert multi.alpha_[t] == grid[np.argmin(ref)]
        assert multi.best_score_[t] == pytest.approx(-2 * min(ref), rel=1e-8)


def test_cv_gradient_search_refines_the_grid_on_the_kfold_curve():
    from sklearn.model_selection import StratifiedKFold

    X, y = _cancer()
    kw = dict(Cs=np.logspace(-3, 2, 6), cv=5)
    grid = aloocv.ALOLogisticRegressionCV(**kw).fit(X, y)
    grad = aloocv.ALOLogisticRegressionCV(search="gradient", **kw).fit(X, y)
    # between the grid neighbours of the grid's choice, strictly better than it
    assert grad.best_score_ > grid.best_score_
    assert grid.C_[0] / 10 < grad.C_[0] < grid.C_[0] * 10 and grad.C_[0] not in grid.Cs_
    sr = grad.search_results_
    assert sr["gradient"].sum() == sr["C"].size - 6
    assert grad.best_score_ == pytest.approx(sr["score"].max(), rel=1e-12)
    assert grad.C_[0] == pytest.approx(sr["C"][np.argmax(sr["score"])], rel=1e-12)
    # every evaluation of the scalar search is the K-fold estimate at its C
    for C, loss in list(zip(sr["C"], sr["loss"]))[-3:]:
        direct = aloocv.kfold(X, y, "logistic", aloocv.L2(1 / C), cv=StratifiedKFold(5))
        assert loss == pytest.approx(direct.mean, rel=1e-9)
    direct = aloocv.kfold(X, y, "logistic", aloocv.L2(1 / grad.C_[0]), cv=StratifiedKFold(5))
    np.testing.assert_allclose(grad.coef_[0], direct.fit.coef_, rtol=1e-10)


def test_cv_group_splits_make_integer_weights_repeated_rows():
    from sklearn.model_selection import LeaveOneGroupOut

    # leaving out a group of k repeated rows is leaving out one row of weight k (what
    # scikit-learn's sample-weight equivalence check asks of a CV estimator)
    X, y = _cancer()
    X, y = X[:120], y[:120]
    rng = np.random.default_rng(312)
    w = rng.integers(0, 4, size=y.size)
    g = rng.integers(0, 6, size=y.size)
    rows = np.repeat(np.arange(y.size), w)
    kw = dict(Cs=np.logspace(-2, 1, 5), cv=LeaveOneGroupOut(), tol=1e-12)
    weighted = aloocv.ALOLogisticRegressionCV(**kw).fit(X, y, sample_weight=w, groups=g)
    repeated = aloocv.ALOLogisticRegressionCV(**kw).fit(X[rows], y[rows], groups=g[rows])
    sw, sr = weighted.search_results_, repeated.search_results_
    np.testing.assert_allclose(sw["loss"], sr["loss"], rtol=1e-8)
    np.testing.assert_allclose(sw["loss_stderr"], sr["loss_stderr"], rtol=1e-6)
    assert weighted.C_[0] == repeated.C_[0]
    np.testing.assert_allclose(weighted.coef_, repeated.coef_, rtol=1e-8, atol=1e-10)
    # leave-one-out is not: a weight-k row leaves k copies out at once
    loo_w = aloocv.ALOLogisticRegressionCV(Cs=kw["Cs"]).fit(X, y, sample_weight=w)
    loo_r = aloocv.ALOLogisticRegressionCV(Cs=kw["Cs"]).fit(X[rows], y[rows])
    assert not np.allclose(loo_w.search_results_["loss"], loo_r.search_results_["loss"])


def test_cv_none_is_leave_one_out():
    X, y = _cancer()
    Cs = np.logspace(-2, -0.5, 4)
    loo = aloocv.ALOLogisticRegressionCV(Cs=Cs, cv=None).fit(X, y)
    for C, loss in zip(loo.search_results_["C"], loo.search_results_["loss"]):
        assert loss == pytest.approx(aloocv.loo(X, y, "logistic", aloocv.L2(1 / C)).mean)
    assert loo.scores_[1].shape == (1, Cs.size)
    assert isinstance(loo.tune_result_, aloocv.TuneResult)
    kf = aloocv.ALOLogisticRegressionCV(Cs=Cs, cv=3).fit(X, y)
    assert not np.allclose(kf.search_results_["loss"], loo.search_results_["loss"])


@pytest.mark.parametrize(
    "kwargs, fit_kw, err, match",
    [
        ({"cv": 1}, {}, ValueError, "cv must be >= 2"),
        ({"cv": True}, {}, TypeError, "cv must be None"),
        ({"cv": "five"}, {}, TypeError, "cv must be None"),
        ({"cv": 2.5}, {}, TypeError, "cv must be None"),
        ({}, {"groups": np.zeros(60)}, ValueError, "groups= goes with cv="),
        ({"cv": 3}, {"foo": 1}, ValueError, "enable_metadata_routing"),
        ({"cv": [(np.arange(30), np.arange(20, 60))]}, {}, ValueError, "overlap"),
        ({"cv": 3, "search": "gradient", "rule": "1se"}, {}, ValueError, "rule='min'"),
        ({"cv": [(np.arange(30), np.arange(30, 60))], "rule": "1se"}, {}, ValueError, "single"),
        ({"cv": 3, "alpha_per_feature": True}, {}, ValueError, "alpha_per_feature"),
        ({"cv": 61}, {}, ValueError, "cv=61"),
    ],
)
def test_bad_cv(kwargs, fit_kw, err, match):
    X, y = make_data("squared", 60, 3, seed=310)
    with pytest.raises(err, match=match):
        aloocv.ALORidgeCV(**kwargs).fit(X, y, **fit_kw)


def test_bad_cv_with_several_targets_and_dask():
    from sklearn.model_selection import TimeSeriesSplit

    X, y = make_data("squared", 60, 3, seed=311)
    Y = np.column_stack([y, -y])
    with pytest.raises(ValueError, match="partition"):
        aloocv.ALORidgeCV(cv=TimeSeriesSplit(3)).fit(X, Y)
    da = pytest.importorskip("dask.array")
    with pytest.raises(ValueError, match="cv= needs X in memory"):
        aloocv.ALORidgeCV(cv=3).fit(da.from_array(X, chunks=20), da.from_array(y, chunks=20))


def test_signatures_follow_sklearn():
    from sklearn.linear_model import ElasticNetCV, LogisticRegressionCV

    pairs = [
        (aloocv.ALORidgeCV, RidgeCV),
        (aloocv.ALOElasticNetCV, ElasticNetCV),
        (aloocv.ALOLogisticRegressionCV, LogisticRegressionCV),
    ]
    for ours, theirs in pairs:
        mine = inspect.signature(ours).parameters
        ref = inspect.signature(theirs).parameters
        shared = set(mine) & set(ref)
        assert "fit_intercept" in shared
        # no parameter of ours carries a scikit-learn name with another meaning
        for name in ("selection", "n_alphas", "cv_results_"):
            assert name not in mine
        if theirs is not ElasticNetCV:
            assert "scoring" in shared
    assert "store_cv_results" in inspect.signature(aloocv.ALORidgeCV).parameters
    assert "class_weight" in inspect.signature(aloocv.ALOLogisticRegressionCV).parameters


@pytest.mark.parametrize(
    "make",
    [
        lambda: aloocv.ALORidgeCV(alphas=np.logspace(-2, 2, 5)),
        lambda: aloocv.ALOElasticNetCV(alphas=5),
        lambda: aloocv.ALOLogisticRegressionCV(Cs=5),
        lambda: aloocv.ALOPoissonRegressorCV(search="gradient"),
    ],
    ids=["ridge", "enet", "logistic", "poisson"],
)
def test_pickle_size_does_not_grow_with_n(make):
    sizes = []
    for n in (200, 2000):
        gen = "logistic" if "Logistic" in type(make()).__name__ else "squared"
        gen = "poisson" if "Poisson" in type(make()).__name__ else gen
        X, y = make_data(gen, n, 4, seed=312)
        sizes.append(len(pickle.dumps(make().fit(X, y))))
    assert sizes[1] < sizes[0] + 2000, sizes  # O(p * candidates), not O(n)
    X, y = make_data("squared", 2000, 4, seed=313)
    kept = aloocv.ALORidgeCV(store_cv_results=True).fit(X, y)
    assert len(pickle.dumps(kept)) > 2000 * 8 * 3
    assert kept.loo_predictions_.shape == (2000,)
    assert not hasattr(aloocv.ALORidgeCV().fit(X, y), "loo_predictions_")


def test_search_results_become_dataframes():
    pd = pytest.importorskip("pandas")
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    ovr = aloocv.ALOLogisticRegressionCV(Cs=4, multi_class="ovr").fit(X, y)
    df = pd.DataFrame(ovr.search_results_)
    assert len(df) == 12 and set(df["class"]) == {0.0, 1.0, 2.0}
    assert {"C", "l1_ratio", "loss", "loss_stderr", "score", "gradient"} <= set(df.columns)
    Xr, yr = make_data("squared", 80, 4, seed=314)
    per = aloocv.ALORidgeCV(alpha_per_feature=True).fit(Xr, yr)
    assert {"alpha_0", "alpha_3"} <= set(pd.DataFrame(per.search_results_).columns)


# -- plots -----------------------------------------------------------------------------


@pytest.fixture
def agg():
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def _lines(ax):
    return {ln.get_label(): ln for ln in ax.get_lines()}


def test_plot_logistic_in_C_one_curve_per_l1_ratio(agg):
    X, y = make_data("logistic", 150, 5, seed=315, scale=2.0)
    Cs = np.logspace(-2, 2, 5)
    est = aloocv.ALOLogisticRegressionCV(Cs=Cs, l1_ratios=[0.3, 0.7]).fit(X, y)
    ax = est.plot_cv().ax_
    lines = _lines(ax)
    assert {"l1_ratio=0.3", "l1_ratio=0.7", "chosen C"} <= set(lines)
    for r in (0.3, 0.7):
        np.testing.assert_allclose(lines[f"l1_ratio={r}"].get_xdata(), Cs)
        k = 0 if r == 0.3 else 1
        np.testing.assert_allclose(
            lines[f"l1_ratio={r}"].get_ydata(), -est.scores_[1.0][0, :, k], rtol=1e-12
        )
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "C"
    assert lines["chosen C"].get_xdata()[0] == est.C_[0]


def test_plot_gradient_keeps_the_grid_curve(agg):
    X, y = make_data("poisson", 150, 4, seed=316)
    alphas = (1e-3, 1e-2, 1e-1, 1.0)
    est = aloocv.ALOPoissonRegressorCV(alphas=alphas, search="gradient").fit(X, y)
    ax = est.plot_cv().ax_
    lines = _lines(ax)
    curve = lines["leave-one-out mean Poisson deviance (ALO)"]
    np.testing.assert_allclose(curve.get_xdata(), alphas)
    traj = lines["gradient search"]
    grad = est.search_results_["gradient"] > 0
    np.testing.assert_allclose(traj.get_xdata(), est.search_results_["alpha"][grad])
    assert traj.get_xdata().size >= 1
    assert ax.get_xlabel() == "alpha"


def test_plot_per_feature_lines_are_labelled(agg):
    pd = pytest.importorskip("pandas")
    X, y = make_data("squared", 100, 3, seed=317)
    Xf = pd.DataFrame(X, columns=["age", "dose", "weight"])
    est = aloocv.ALORidgeCV(alphas=np.logspace(-2, 2, 5), alpha_per_feature=True).fit(Xf, y)
    lines = _lines(est.plot_cv().ax_)
    curve = "leave-one-out mean squared error (ALO)"
    assert {"age", "dose", "weight", curve} <= set(lines)
    np.testing.assert_allclose(lines[curve].get_xdata(), np.logspace(-2, 2, 5))
    np.testing.assert_allclose(lines["dose"].get_xdata(), est.search_results_["alpha_1"])


def test_plot_scored_enet(agg):
    X, y = make_data("squared", 100, 5, seed=318)
    est = aloocv.ALOElasticNetCV(alphas=6, scoring="r2").fit(X, y)
    ax = est.plot_cv().ax_
    lines = _lines(ax)
    line = lines["leave-one-out r2 (ALO)"]
    np.testing.assert_allclose(line.get_xdata(), np.sort(est.alphas_))
    np.testing.assert_allclose(line.get_ydata(), est.search_results_["score"][::-1])
    assert ax.get_ylabel() == "leave-one-out r2 (ALO)"


def test_verbose_is_validated():
    X, y = make_data("logistic", 60, 3, seed=319)
    with pytest.raises(ValueError, match="verbose must be"):
        aloocv.ALOElasticNetCV(alphas=3, verbose=-1).fit(X, y)
    with pytest.raises(ValueError, match="verbose must be"):
        aloocv.ALOLogisticRegressionCV(Cs=2, verbose="yes").fit(X, y)


def test_verbose_shows_progress(capsys):
    pytest.importorskip("tqdm")
    X, y = make_data("logistic", 60, 3, seed=319)
    aloocv.ALOLogisticRegressionCV(Cs=3, verbose=1).fit(X, y)
    assert "aloocv grid" in capsys.readouterr().err
    aloocv.ALOLogisticRegressionCV(Cs=3, verbose=0).fit(X, y)
    assert capsys.readouterr().err == ""


def test_new_attribute_layout_as_sklearn_1_10():
    from sklearn.linear_model import LogisticRegressionCV

    X, y = make_data("logistic", 150, 4, seed=320, scale=2.0)
    Cs = [0.1, 1.0, 10.0]
    old = aloocv.ALOLogisticRegressionCV(Cs=Cs, l1_ratios=[0.3, 0.6]).fit(X, y)
    new = aloocv.ALOLogisticRegressionCV(Cs=Cs, l1_ratios=[0.3, 0.6], use_legacy_attributes=False)
    new.fit(X, y)
    ref = LogisticRegressionCV(
        Cs=Cs,
        l1_ratios=[0.3, 0.6],
        solver="saga",
        cv=3,
        use_legacy_attributes=False,
        scoring="neg_log_loss",
        max_iter=50,
        tol=1e-2,
    )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _sk(ref.fit, X, y)
    assert isinstance(new.C_, float) and new.C_ == old.C_[0]
    assert isinstance(new.l1_ratio_, float) and new.l1_ratio_ == old.l1_ratio_[0]
    # the shapes of scikit-learn's with one fold
    assert new.coefs_paths_.shape == (1, *ref.coefs_paths_.shape[1:])
    assert new.scores_.shape == (1, *ref.scores_.shape[1:])
    assert new.n_iter_.shape == (1, *ref.n_iter_.shape[1:])
    np.testing.assert_array_equal(new.scores_[0, 1], old.scores_[1.0][0, :, 1])
    np.testing.assert_array_equal(new.coefs_paths_[0, 0, 2, 0], old.coefs_paths_[1.0][0, 2, 0])
    iris = np.arange(150) % 3
    mn = aloocv.ALOLogisticRegressionCV(Cs=Cs, use_legacy_attributes=False).fit(X, iris)
    assert mn.coefs_paths_.shape == (1, 1, 3, 3, 5)
    with pytest.raises(ValueError, match="one C per class"):
        aloocv.ALOLogisticRegressionCV(Cs=Cs, multi_class="ovr", use_legacy_attributes=False).fit(
            X, iris
        )


def test_plot_tune_curves_per_l1_share_and_labelled_parameters(agg):
    X, y = make_data("squared", 100, 4, seed=323)
    grid = [aloocv.ElasticNet(r * a, (1 - r) * a) for r in (0.25, 0.75) for a in (1.0, 10.0, 100.0)]
    res = aloocv.tune(X, y, loss="squared", penalty=grid[0], method="grid", grid=grid)
    lines = _lines(res.plot().ax_)
    for r in (0.25, 0.75):
        np.testing.assert_allclose(lines[f"l1 / (l1 + l2) = {r:g}"].get_xdata(), [1, 10, 100])
    per = aloocv.tune(X, y, loss="squared", penalty=aloocv.L2(np.ones(4)), method="newton")
    right = _lines(per.plot().axes_[1])
    assert [f"lambda[{j}]" for j in range(4)] == [k for k in right if k.startswith("lambda")]
    np.testing.assert_allclose(right["lambda[2]"].get_ydata(), per.history["params"][:, 2])
    auto = aloocv.tune(X, y, loss="squared", penalty=aloocv.L2(1.0), n_grid=5)
    left = _lines(auto.plot().ax_)
    np.testing.assert_allclose(np.sort(left["grid"].get_xdata()), np.logspace(-3, 3, 5))
    np.testing.assert_allclose(left["gradient search"].get_xdata(), auto.history["params"][5:, 0])
