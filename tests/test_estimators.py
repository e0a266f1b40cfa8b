"""scikit-learn estimators: API compliance and agreement with their peers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.linear_model import ElasticNet, LogisticRegression, RidgeCV
from sklearn.model_selection import KFold
from sklearn.utils.estimator_checks import check_estimator

import aloocv
from conftest import loss_value, make_data


@pytest.mark.parametrize(
    "est",
    [
        aloocv.ALORidgeCV(),
        aloocv.ALOElasticNetCV(alphas=5),
        aloocv.ALOLogisticRegressionCV(Cs=4),
        aloocv.ALOPoissonRegressorCV(alphas=(0.01, 1.0)),
        aloocv.ALOGammaRegressorCV(alphas=(0.01, 1.0)),
        aloocv.ALOTweedieRegressorCV(alphas=(0.01, 1.0), power=1.5, search="gradient"),
        aloocv.ALORidgeCV(scoring="r2", store_cv_results=True),
        aloocv.ALOLogisticRegressionCV(Cs=3, scoring="accuracy", class_weight="balanced"),
        aloocv.ALOLogisticRegressionCV(Cs=4, rtol=0.01),
        aloocv.ALOPoissonRegressorCV(alphas=(0.01, 1.0), rtol=0.01, search="gradient"),
        # cv=: the regularization chosen by approximate K-fold
        aloocv.ALORidgeCV(cv=3),
        aloocv.ALOLogisticRegressionCV(Cs=3, cv=3),
        aloocv.ALOElasticNetCV(alphas=4, cv=KFold(3)),
        aloocv.ALOGammaRegressorCV(alphas=(0.01, 1.0), cv=3, search="gradient"),
    ],
    ids=lambda e: (
        type(e).__name__
        + ("_rtol" if getattr(e, "rtol", None) else "")
        + ("_cv" if getattr(e, "cv", None) is not None else "")
    ),
)
def test_check_estimator(est):
    with warnings.catch_warnings():
        # the checks feed deliberately degenerate data (e.g. constant columns)
        warnings.simplefilter("ignore")
        results = check_estimator(est, on_fail=None)
    failed = [
        (r["check_name"], str(r["exception"])[:200]) for r in results if r["status"] == "failed"
    ]
    assert failed == []


@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.smoke
def test_ridge_cv_matches_sklearn(intercept):
    X, y = make_data("squared", 150, 8, seed=110)
    alphas = np.logspace(-3, 3, 15)
    ours = aloocv.ALORidgeCV(alphas=alphas, fit_intercept=intercept, store_cv_results=True)
    ours.fit(X, y)
    ref = RidgeCV(alphas=alphas, fit_intercept=intercept, store_cv_results=True).fit(X, y)
    assert ours.alpha_ == ref.alpha_
    np.testing.assert_allclose(ours.cv_results_, ref.cv_results_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-9, atol=1e-12)
    assert ours.intercept_ == pytest.approx(ref.intercept_, abs=1e-10)
    means = ours.search_results_["loss"][np.argsort(ours.search_results_["alpha"])]
    np.testing.assert_allclose(2 * means, ref.cv_results_.mean(axis=0), rtol=1e-9)
    # leave-one-out predictions for stacking
    k = int(np.flatnonzero(alphas == ref.alpha_)[0])
    np.testing.assert_allclose((y - ours.loo_predictions_) ** 2, ref.cv_results_[:, k], rtol=1e-8)


def test_ridge_cv_per_feature_and_gradient_search():
    rng = np.random.default_rng(111)
    X = rng.standard_normal((150, 12))
    y = X[:, :3] @ np.array([3.0, -2.0, 1.0]) + rng.standard_normal(150)
    grid = aloocv.ALORidgeCV(alphas=np.logspace(-2, 3, 6)).fit(X, y)
    grad = aloocv.ALORidgeCV(alphas=np.logspace(-2, 3, 6), search="gradient").fit(X, y)
    per = aloocv.ALORidgeCV(alphas=np.logspace(-2, 3, 6), alpha_per_feature=True).fit(X, y)
    assert grad.best_score_ >= grid.best_score_ - 1e-12
    assert per.best_score_ >= grad.best_score_ - 1e-12
    assert per.alpha_.shape == (12,)
    assert np.median(per.alpha_[3:]) > 10 * np.median(per.alpha_[:3])


def test_elastic_net_cv_conventions():
    rng = np.random.default_rng(112)
    X = rng.standard_normal((200, 15))
    y = X[:, :4] @ np.array([2.0, -1.0, 1.5, 0.5]) + rng.standard_normal(200)
    est = aloocv.ALOElasticNetCV(l1_ratio=[0.3, 0.8], alphas=12).fit(X, y)
    ref = ElasticNet(alpha=est.alpha_, l1_ratio=est.l1_ratio_, tol=1e-12, max_iter=100000)
    ref.fit(X, y)
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-6)
    # each reported mean is the ALO of that candidate, recomputed independently
    res = est.search_results_
    for a, r, m in list(zip(res["alpha"], res["l1_ratio"], res["loss"]))[::5]:
        pen = aloocv.ElasticNet(200 * a * r, 200 * a * (1 - r))
        assert aloocv.loo(X, y, loss="squared", penalty=pen).mean == pytest.approx(m, rel=1e-7)
    assert -2 * res["loss"].min() == pytest.approx(est.best_score_)
    # ElasticNetCV's layout: alphas_ (n_l1_ratio, n_alphas) decreasing, mse_path_ with
    # one fold; its mean squared errors are the losses of the search, doubled
    assert est.alphas_.shape == (2, 12) and est.mse_path_.shape == (2, 12, 1)
    assert np.all(np.diff(est.alphas_, axis=1) < 0)
    assert est.mse_path_.min() == pytest.approx(-est.best_score_)
    assert est.n_iter_ == est.tune_result_.fit.n_iter_ and est.n_fits_ >= 24
    r1 = int(np.argmin(est.mse_path_[..., 0].ravel()))
    assert est.alpha_ == pytest.approx(est.alphas_.ravel()[r1], rel=1e-12)


@pytest.mark.smoke
def test_logistic_cv():
    X, y = make_data("logistic", 300, 6, seed=113, scale=3.0)
    labels = np.where(y > 0, "yes", "no")
    est = aloocv.ALOLogisticRegressionCV(Cs=8, store_loo=True).fit(X, labels)
    assert list(est.classes_) == ["no", "yes"]
    k = int(np.argmin(est.search_results_["loss"]))
    assert est.C_[0] == pytest.approx(est.search_results_["C"][k])
    ref = LogisticRegression(C=est.C_[0], tol=1e-12, solver="newton-cholesky").fit(X, labels)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(X), atol=1e-8)
    assert np.all(est.predict(X) == ref.predict(X))
    # loo_predictions_ are leave-one-out probabilities: their log-loss is -best_score_
    p = est.loo_predictions_
    ll = -np.mean(np.where(y > 0, np.log(p), np.log1p(-p)))
    assert ll == pytest.approx(-est.best_score_, rel=1e-9)
    assert ll == pytest.approx(loss_value("logistic", y, np.log(p / (1 - p))).mean(), rel=1e-9)


def test_logistic_cv_elasticnet_and_1se():
    X, y = make_data("logistic", 300, 10, seed=114, scale=3.0)
    en = aloocv.ALOLogisticRegressionCV(Cs=6, penalty="elasticnet", l1_ratios=[0.2, 0.9])
    en.fit(X, y)
    assert en.l1_ratio_[0] in (pytest.approx(0.2), pytest.approx(0.9))
    mn = aloocv.ALOLogisticRegressionCV(Cs=12).fit(X, y)
    se = aloocv.ALOLogisticRegressionCV(Cs=12, rule="1se").fit(X, y)
    assert se.C_[0] <= mn.C_[0]


@pytest.mark.parametrize(
    ("est", "match"),
    [
        (aloocv.ALORidgeCV(alphas=[]), "alphas must be a non-empty"),
        (aloocv.ALORidgeCV(alphas=[1.0, -1.0]), "alphas must be positive"),
        (aloocv.ALORidgeCV(search="random"), "search must be one of"),
        (aloocv.ALORidgeCV(rule="2se"), "rule must be one of"),
        (aloocv.ALOElasticNetCV(l1_ratio=0.0), "l1_ratio must be in"),
        (aloocv.ALOLogisticRegressionCV(Cs=0), "Cs must be a positive"),
        (aloocv.ALOLogisticRegressionCV(penalty="elasticnet"), "needs l1_ratios"),
    ],
)
def test_bad_parameters(est, match):
    X, y = make_data("logistic", 50, 3, seed=115)
    with pytest.raises(ValueError, match=match):
        est.fit(X, y)


def test_single_class_is_rejected():
    X, _ = make_data("logistic", 30, 3, seed=116)
    with pytest.raises(ValueError, match="only 1 class"):
        aloocv.ALOLogisticRegressionCV().fit(X, np.zeros(30))


@pytest.mark.smoke
def test_multiclass_one_vs_rest():
    from sklearn.datasets import load_iris

    d = load_iris()
    X = (d.data - d.data.mean(0)) / d.data.std(0)
    est = aloocv.ALOLogisticRegressionCV(Cs=6, multi_class="ovr", store_loo=True)
    est.fit(X, d.target)
    assert est.coef_.shape == (3, 4) and est.C_.shape == (3,)
    for k in range(3):  # each row is the binary problem of class k, tuned on its own
        yk = (d.target == k).astype(int)
        bin_est = aloocv.ALOLogisticRegressionCV(Cs=6).fit(X, yk)
        assert est.C_[k] == pytest.approx(bin_est.C_[0])
        np.testing.assert_allclose(est.coef_[k], bin_est.coef_[0], rtol=1e-9, atol=1e-12)
    P = est.predict_proba(X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    assert np.all(est.predict(X) == est.classes_[np.argmax(P, axis=1)])
    assert est.score(X, d.target) > 0.9
    assert est.loo_predictions_.shape == (150, 3)
    np.testing.assert_allclose(est.loo_predictions_.sum(axis=1), 1.0)
    assert est.search_results_["loss"].shape == (18,)
    assert set(est.scores_) == {0, 1, 2} and est.scores_[0].shape == (1, 6)


def test_plot_cv(tmp_path):
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    X, y = make_data("squared", 100, 5, seed=117)
    disp = aloocv.ALORidgeCV(alphas=np.logspace(-2, 2, 9)).fit(X, y).plot_cv()
    assert isinstance(disp, aloocv.CVCurveDisplay)
    disp.figure_.savefig(tmp_path / "cv.png")
    assert (tmp_path / "cv.png").stat().st_size > 1000


GLM_CASES = [
    (aloocv.ALOPoissonRegressorCV, "PoissonRegressor", {}, "poisson"),
    (aloocv.ALOGammaRegressorCV, "GammaRegressor", {}, "gamma"),
    (aloocv.ALOTweedieRegressorCV, "TweedieRegressor", {"power": 1.5}, "tweedie"),
]


@pytest.mark.parametrize(("cls", "sk_name", "kw", "gen"), GLM_CASES, ids=lambda c: str(c)[:30])
def test_glm_cv_matches_sklearn_and_loo(cls, sk_name, kw, gen):
    import sklearn.linear_model as sklm
    from sklearn.metrics import mean_tweedie_deviance

    X, y = make_data(gen, 200, 5, seed=120)
    w = np.random.default_rng(121).uniform(0.5, 2.0, 200)
    alphas = np.logspace(-3, 0, 4)
    est = cls(alphas=alphas, tol=1e-12, **kw).fit(X, y, sample_weight=w)
    assert est.alpha_ in alphas
    ref = getattr(sklm, sk_name)(alpha=est.alpha_, tol=1e-12, max_iter=1000, **kw)
    ref.fit(X, y, sample_weight=w)
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-6)
    assert est.intercept_ == pytest.approx(ref.intercept_, abs=1e-6)
    np.testing.assert_allclose(est.predict(X), ref.predict(X), rtol=1e-6)
    assert est.score(X, y) == pytest.approx(ref.score(X, y), rel=1e-6)
    # search_results_: the ALO mean of each alpha, alpha -> L2(alpha * sum(w))
    loss = est._loss()
    for a, m in zip(est.search_results_["alpha"], est.search_results_["loss"]):
        r = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(a * w.sum()), sample_weight=w)
        assert m == pytest.approx(r.mean, rel=1e-6)
    best = int(np.argmin(est.search_results_["loss"]))
    assert est.alpha_ == est.search_results_["alpha"][best]
    # best_score_: minus the mean deviance of the leave-one-out means (sklearn's deviance)
    r = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(est.alpha_ * w.sum()), sample_weight=w)
    dev = mean_tweedie_deviance(y, np.exp(r.predictions), sample_weight=w, power=est._power())
    assert est.best_score_ == pytest.approx(-dev, rel=1e-8)
    grad = cls(alphas=alphas, search="gradient", **kw).fit(X, y, sample_weight=w)
    assert grad.best_score_ >= est.best_score_ - 1e-9


def test_poisson_cv_offset():
    rng = np.random.default_rng(122)
    X = rng.standard_normal((300, 4))
    t = rng.uniform(0.2, 5.0, 300)
    y = rng.poisson(t * np.exp(0.2 + X @ np.array([0.4, -0.3, 0.1, 0.0]))).astype(float)
    est = aloocv.ALOPoissonRegressorCV(alphas=(1e-3, 1e-2, 1e-1), tol=1e-12)
    est.fit(X, y, offset=np.log(t))
    f = aloocv.fit(
        X, y, loss="poisson", penalty=aloocv.L2(est.alpha_ * 300), offset=np.log(t), tol=1e-12
    )
    np.testing.assert_allclose(est.coef_, f.coef_, atol=1e-9)
    np.testing.assert_allclose(est.predict(X, offset=np.log(t)), f.predict(X, np.log(t)))


def test_glm_cv_rejects_bad_parameters():
    X, y = make_data("gamma", 40, 2, seed=123)
    with pytest.raises(ValueError, match="power must be >= 1"):
        aloocv.ALOTweedieRegressorCV(power=0.5).fit(X, y)
    with pytest.raises(ValueError, match="link must be one of"):
        aloocv.ALOTweedieRegressorCV(link="identity").fit(X, y)
    with pytest.raises(ValueError, match="outside the domain of the gamma loss"):
        aloocv.ALOGammaRegressorCV().fit(X, np.r_[0.0, y[1:]])
    with pytest.raises(ValueError, match="alphas must be positive"):
        aloocv.ALOPoissonRegressorCV(alphas=(-1.0,)).fit(X, y)


def test_glm_cv_plot(tmp_path):
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    X, y = make_data("poisson", 60, 3, seed=124)
    disp = aloocv.ALOPoissonRegressorCV().fit(X, y).plot_cv()
    disp.figure_.savefig(tmp_path / "cv.png")
    assert (tmp_path / "cv.png").stat().st_size > 1000


# ----------------------------------------------------------------------------- rtol=
def test_rtol_logistic_cv_chooses_exact_loo():
    from test_tuning import breast_cancer_degree2, exact_loo

    X, y = breast_cancer_degree2()
    lams = np.logspace(1, 0, 5)
    exact = np.array([exact_loo(X, y, "logistic", g) for g in lams])
    Cs = 1.0 / lams
    plain = aloocv.ALOLogisticRegressionCV(Cs=Cs).fit(X, y)
    est = aloocv.ALOLogisticRegressionCV(Cs=Cs, rtol=0.01, store_loo=True).fit(X, y)
    best = Cs[int(np.argmin(exact))]
    assert plain.C_[0] != pytest.approx(best)
    assert est.C_[0] == pytest.approx(best, rel=1e-12)
    sr = est.search_results_
    refined = sr["refined"] == 1.0
    assert 3 <= refined.sum() < 5
    for k, C in enumerate(Cs):
        row = int(np.flatnonzero(np.isclose(sr["C"], C, rtol=1e-12))[0])
        if refined[row]:
            assert sr["loss"][row] == pytest.approx(exact[k], rel=0.01)
        else:
            assert sr["loss"][row] == pytest.approx(plain.search_results_["loss"][row], rel=1e-9)
    assert -est.best_score_ == pytest.approx(est.tune_result_.loo.mean)
    assert est.tune_result_.loo.error_estimate.met
    # the model is the fit at the chosen C
    ref = LogisticRegression(C=best, tol=1e-10, solver="newton-cholesky").fit(X, y)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(
    ("est", "loss", "pen"),
    [
        (aloocv.ALOPoissonRegressorCV(alphas=(1e-3, 1e-2, 0.1), rtol=0.01), "poisson", None),
        (aloocv.ALOElasticNetCV(alphas=[0.5, 0.1, 0.02], l1_ratio=0.5, rtol=0.01), "squared", 0.5),
    ],
    ids=["poisson", "elastic_net"],
)
def test_rtol_estimators_refine_near_their_choice(est, loss, pen):
    X, y = make_data(loss, 120, 8, seed=133, scale=1.5)
    est.fit(X, y)
    sr = est.search_results_
    refined = np.flatnonzero(sr["refined"] == 1.0)
    assert refined.size >= 2
    n = X.shape[0]
    for row in refined:  # the refined losses within the budget of exact leave-one-out
        a = sr["alpha"][row]
        penalty = aloocv.L2(a * n) if pen is None else aloocv.ElasticNet(a * n * pen, a * n * pen)
        ex = aloocv.loo(X, y, loss=loss, penalty=penalty, method="exact").mean
        assert sr["loss"][row] == pytest.approx(ex, rel=0.01)


def test_rtol_parameter_conventions(tmp_path):
    ests = [
        aloocv.ALORidgeCV(),
        aloocv.ALOElasticNetCV(),
        aloocv.ALOLogisticRegressionCV(),
        aloocv.ALOPoissonRegressorCV(),
        aloocv.ALOGammaRegressorCV(),
        aloocv.ALOTweedieRegressorCV(),
    ]
    for e in ests:  # stored as given, None by default, settable
        assert e.get_params()["rtol"] is None
        assert e.set_params(rtol=0.05).rtol == 0.05
    X, y = make_data("logistic", 80, 3, seed=134)
    with pytest.raises(ValueError, match="rtol must be in"):
        aloocv.ALOLogisticRegressionCV(rtol=2.0).fit(X, y)
    with pytest.raises(ValueError, match="leave scoring=None"):
        aloocv.ALOLogisticRegressionCV(rtol=0.01, scoring="accuracy").fit(X, y)
    # ridge: ALO is exact leave-one-out, nothing to refine
    Xs, ys = make_data("squared", 80, 3, seed=135)
    r = aloocv.ALORidgeCV(alphas=[0.1, 1.0, 10.0], rtol=0.01).fit(Xs, ys)
    p = aloocv.ALORidgeCV(alphas=[0.1, 1.0, 10.0]).fit(Xs, ys)
    assert r.alpha_ == p.alpha_ and not r.search_results_["refined"].any()
    # plot_cv marks the refined candidates
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    Xl, yl = make_data("logistic", 150, 4, seed=136, scale=3.0)
    est = aloocv.ALOLogisticRegressionCV(Cs=6, rtol=0.01).fit(Xl, yl)
    disp = est.plot_cv()
    labels = [t.get_text() for t in disp.ax_.get_legend().get_texts()]
    assert "refined (rtol=0.01)" in labels
    disp.figure_.savefig(tmp_path / "cv.png")
