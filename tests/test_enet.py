"""Elastic net / lasso: fits against scikit-learn, LOO against brute-force refits."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import ElasticNet, Lasso, LogisticRegression

import aloocv
from conftest import loss_value


def sparse_truth(n, p, k, seed, loss="squared"):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    b = np.zeros(p)
    b[:k] = rng.standard_normal(k) * 2
    eta = X @ b
    if loss == "squared":
        y = eta + rng.standard_normal(n)
    elif loss == "logistic":
        y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
    else:
        y = rng.poisson(np.exp(0.2 * eta)).astype(float)
    return X, y


@pytest.mark.parametrize(("alpha", "ratio"), [(0.05, 1.0), (0.1, 0.5), (0.3, 0.9)])
def test_squared_matches_sklearn(alpha, ratio):
    X, y = sparse_truth(200, 30, 5, seed=60)
    n = X.shape[0]
    if ratio == 1.0:
        ref = Lasso(alpha=alpha, tol=1e-14, max_iter=100000).fit(X, y)
        pen = aloocv.L1(n * alpha)
    else:
        ref = ElasticNet(alpha=alpha, l1_ratio=ratio, tol=1e-14, max_iter=100000).fit(X, y)
        pen = aloocv.ElasticNet(n * alpha * ratio, n * alpha * (1 - ratio))
    res = aloocv.fit(X, y, loss="squared", penalty=pen, tol=1e-12)
    assert res.converged_
    np.testing.assert_allclose(res.coef_, ref.coef_, atol=1e-9)
    assert res.intercept_ == pytest.approx(ref.intercept_, abs=1e-9)
    np.testing.assert_array_equal(res.coef_ != 0, ref.coef_ != 0)
    assert 0 < np.count_nonzero(res.coef_) < 30


def test_logistic_matches_sklearn_saga():
    X, y = sparse_truth(200, 20, 4, seed=61, loss="logistic")
    C, r = 0.5, 0.6
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", FutureWarning)
        ref = LogisticRegression(
            penalty="elasticnet", solver="saga", C=C, l1_ratio=r, tol=1e-12, max_iter=100000
        ).fit(X, y)
    res = aloocv.fit(
        X, y, loss="logistic", penalty=aloocv.ElasticNet(r / C, (1 - r) / C), tol=1e-12
    )
    np.testing.assert_allclose(res.coef_, ref.coef_[0], atol=1e-5)
    assert res.intercept_ == pytest.approx(ref.intercept_[0], abs=1e-5)


def test_poisson_kkt_conditions():
    # independent optimality check of the composite objective, written in numpy
    X, y = sparse_truth(300, 15, 3, seed=62, loss="poisson")
    l1, l2 = 8.0, 1.0
    res = aloocv.fit(X, y, loss="poisson", penalty=aloocv.ElasticNet(l1, l2), tol=1e-12)
    eta = X @ res.coef_ + res.intercept_
    g = X.T @ (np.exp(eta) - y) + l2 * res.coef_
    nz = res.coef_ != 0
    assert abs(np.sum(np.exp(eta) - y)) < 1e-8
    np.testing.assert_allclose(g[nz], -l1 * np.sign(res.coef_[nz]), atol=1e-8)
    assert np.all(np.abs(g[~nz]) <= l1 + 1e-8)
    assert 0 < nz.sum() < 15


@pytest.mark.parametrize("method", ["alo", "if", "lemma3", "exact"])
def test_zero_l1_reduces_to_ridge(loss, method):
    rng = np.random.default_rng(63)
    X = rng.standard_normal((80, 5))
    y = {
        "squared": rng.standard_normal(80),
        "logistic": (rng.random(80) < 0.5) * 1.0,
        "poisson": rng.poisson(1.0, 80) * 1.0,
    }[loss]
    a = aloocv.loo(X, y, loss=loss, penalty=aloocv.ElasticNet(0.0, 2.0), method=method)
    b = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(2.0), method=method)
    np.testing.assert_array_equal(a.losses, b.losses)


def lasso_brute_force(X, y, lam):
    n = X.shape[0]
    eta = np.empty(n)
    for i in range(n):
        k = np.arange(n) != i
        m = Lasso(alpha=lam / (n - 1), tol=1e-14, max_iter=100000).fit(X[k], y[k])
        eta[i] = m.predict(X[i : i + 1])[0]
    return eta


def test_lasso_exact_loo_matches_sklearn_refits():
    X, y = sparse_truth(80, 12, 3, seed=64)
    lam = 20.0
    ref = lasso_brute_force(X, y, lam)
    ex = aloocv.loo(X, y, loss="squared", penalty=aloocv.L1(lam), method="exact", tol=1e-12)
    np.testing.assert_allclose(ex.predictions, ref, atol=1e-8)


def test_lasso_alo_close_to_exact_when_support_is_stable():
    # Strong signal on 3 features, the rest pure noise: the support does not change
    # when one sample is left out, and on a fixed support the lasso LOO is the ridge
    # LOO of the active columns, where ALO is exact for squared loss. Tolerance: the
    # residual error comes from the samples whose removal does flip a coefficient
    # near the threshold; we require the mean within 1% and the median per-sample
    # error below 1e-6 of the typical loss.
    X, y = sparse_truth(120, 10, 3, seed=65)
    lam = 40.0
    ref = lasso_brute_force(X, y, lam)
    alo = aloocv.loo(X, y, loss="squared", penalty=aloocv.L1(lam), tol=1e-12)
    ref_loss = loss_value("squared", y, ref)
    assert alo.mean == pytest.approx(ref_loss.mean(), rel=0.01)
    assert np.median(np.abs(alo.losses - ref_loss)) < 1e-6 * np.median(ref_loss)
    # the leverages live on the active set: they are those of the restricted ridge
    A = np.flatnonzero(alo.fit.coef_)
    Xt = np.hstack([np.ones((120, 1)), X[:, A]])
    hat = np.einsum("ij,ji->i", Xt, np.linalg.solve(Xt.T @ Xt, Xt.T))
    np.testing.assert_allclose(alo.leverages, hat, rtol=1e-9)


def test_logistic_enet_alo_close_to_exact():
    X, y = sparse_truth(200, 20, 4, seed=66, loss="logistic")
    pen = aloocv.ElasticNet(2.0, 1.0)
    ex = aloocv.loo(X, y, loss="logistic", penalty=pen, method="exact", tol=1e-10)
    alo = aloocv.loo(X, y, loss="logistic", penalty=pen)
    inf = aloocv.loo(X, y, loss="logistic", penalty=pen, method="if")
    assert alo.mean == pytest.approx(ex.mean, rel=0.02)
    assert abs(inf.mean - ex.mean) > abs(alo.mean - ex.mean)


def test_sparse_X_enet_equals_dense():
    X, y = sparse_truth(150, 25, 4, seed=67, loss="logistic")
    X[np.abs(X) < 1.0] = 0.0
    pen = aloocv.ElasticNet(3.0, 0.5)
    d = aloocv.loo(X, y, loss="logistic", penalty=pen)
    s = aloocv.loo(sp.csr_matrix(X), y, loss="logistic", penalty=pen)
    np.testing.assert_allclose(s.fit.coef_, d.fit.coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(s.losses, d.losses, rtol=1e-9)


def _wide_text(n, p, per_row, seed, loss):
    # a wide sparse design (p >> n, a few non-zeros per row): working sets of hundreds of
    # columns, where the fit solves its model without forming the working set's Hessian
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(n), per_row)
    cols = rng.integers(0, p, n * per_row)
    X = sp.csr_matrix((rng.exponential(1.0, n * per_row), (rows, cols)), shape=(n, p))
    X.sum_duplicates()
    eta = X @ (rng.standard_normal(p) * 2.0)
    if loss == "squared":
        return X, eta + rng.standard_normal(n)
    return X, (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)


def test_wide_sparse_squared_matches_sklearn():
    X, y = _wide_text(120, 3000, 8, seed=69, loss="squared")
    n, alpha, ratio = X.shape[0], 0.002, 0.7
    ref = ElasticNet(alpha=alpha, l1_ratio=ratio, tol=1e-14, max_iter=1000000).fit(X, y)
    pen = aloocv.ElasticNet(n * alpha * ratio, n * alpha * (1 - ratio))
    res = aloocv.fit(X, y, loss="squared", penalty=pen, tol=1e-12)
    assert res.converged_
    assert np.count_nonzero(res.coef_) > 100  # a wide active set
    np.testing.assert_allclose(res.coef_, ref.coef_, atol=1e-8)
    assert res.intercept_ == pytest.approx(ref.intercept_, abs=1e-8)


@pytest.mark.parametrize("loss", ["logistic", "poisson"])
def test_wide_sparse_enet_equals_dense(loss):
    # sparse rows take the model solve without the working set's Hessian, dense rows the
    # one with it: the same fit and the same leave-one-out
    X, y = _wide_text(150, 2000, 6, seed=70, loss="logistic")
    if loss == "poisson":
        y = np.random.default_rng(71).poisson(1.0 + y).astype(float)
    pen = aloocv.ElasticNet(0.1, 20.0)  # about 600 active columns; ALO within its budget
    s = aloocv.loo(X, y, loss=loss, penalty=pen, tol=1e-12)
    d = aloocv.loo(X.toarray(), y, loss=loss, penalty=pen, tol=1e-12)
    assert np.count_nonzero(d.fit.coef_) > 300
    np.testing.assert_allclose(s.fit.coef_, d.fit.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(s.fit.coef_ != 0, d.fit.coef_ != 0)
    np.testing.assert_allclose(s.losses, d.losses, rtol=1e-7)


@pytest.mark.parametrize("loss", ["squared", "logistic", "poisson"])
def test_wide_active_set_alo_through_the_dual(loss, monkeypatch):
    # |A| > n: ALO on the active set by the n x n dual system of X[:, A] (no |A| x |A|
    # factor), checked against the ridge formula on A written in numpy
    X, y = _wide_text(80, 1500, 6, seed=72, loss="squared" if loss == "squared" else "logistic")
    rng = np.random.default_rng(73)
    w = rng.uniform(0.5, 2.0, X.shape[0])
    off = None
    if loss == "poisson":
        y = rng.poisson(1.0 + y).astype(float)
        off = rng.normal(0.0, 0.3, X.shape[0])
    calls = []
    dual = aloocv._core.dual
    monkeypatch.setattr(aloocv._core, "dual", lambda *a, **k: calls.append(1) or dual(*a, **k))
    l2, pen = 5.0, aloocv.ElasticNet(0.05, 5.0)
    with warnings.catch_warnings():
        # the trust layer may say ALO is a few % off here: the formula is what is tested
        warnings.simplefilter("ignore", aloocv.ALOWarning)
        res = aloocv.loo(X, y, loss=loss, penalty=pen, sample_weight=w, offset=off, tol=1e-12)
    A = np.flatnonzero(res.fit.coef_)
    assert A.size > X.shape[0] and calls == [1]
    eta = X @ res.fit.coef_ + res.fit.intercept_ + (0.0 if off is None else off)
    _, g, d = (w * v for v in aloocv.losses.get_loss(loss).derivatives(y, eta)[:3])
    XA = np.hstack([np.ones((X.shape[0], 1)), X[:, A].toarray()])
    H = XA.T @ (d[:, None] * XA) + np.diag(np.r_[0.0, np.full(A.size, l2)])
    h = np.einsum("ij,ji->i", XA, np.linalg.solve(H, XA.T))
    np.testing.assert_allclose(res.leverages, h, rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(res.predictions, eta + g * h / (1 - d * h), rtol=1e-9, atol=1e-12)


def test_wide_small_active_set_alo_at_the_same_fit(monkeypatch):
    # p > n but |A| <= n: the primal ALO at the one fit (no dual, no second fit), equal to
    # the core's fit-and-ALO call
    X, y = _wide_text(80, 1500, 6, seed=74, loss="logistic")
    pen = aloocv.ElasticNet(1.0, 10.0)
    calls = []
    dual = aloocv._core.dual
    monkeypatch.setattr(aloocv._core, "dual", lambda *a, **k: calls.append(1) or dual(*a, **k))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", aloocv.ALOWarning)  # ALO's own error: not the point
        res = aloocv.loo(X, y, loss="logistic", penalty=pen, tol=1e-12)
    assert 0 < np.count_nonzero(res.fit.coef_) <= X.shape[0] and calls == []
    assert res.fit.n_iter_ > 0 and res.fit.converged_
    Xc = aloocv._validation.core_design(X)
    ref = aloocv._core.loo(
        Xc,
        y,
        None,
        "logistic",
        np.full(1500, 10.0),
        fit_intercept=True,
        method="alo",
        l1=np.full(1500, 1.0),
        tol=1e-12,
        max_iter=100,
        n_threads=1,
    )
    np.testing.assert_allclose(res.fit.coef_, ref.coef, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(res.leverages, ref.leverages, rtol=1e-8, atol=1e-13)
    np.testing.assert_allclose(res.losses, ref.losses, rtol=1e-8)


def test_all_zero_solution():
    X, y = sparse_truth(60, 5, 2, seed=68)
    res = aloocv.loo(X, y, loss="squared", penalty=aloocv.L1(1e6))
    assert np.all(res.fit.coef_ == 0)
    # only the intercept remains: h_i = 1/n, the LOO of the mean
    np.testing.assert_allclose(res.leverages, 1 / 60)
    loo_mean = (y.sum() - y) / 59
    np.testing.assert_allclose(res.predictions, loo_mean, rtol=1e-12)


def test_many_features_working_set():
    # p > n with a strong L1 term: the working set stays small, the fit is exact
    X, y = sparse_truth(100, 2000, 3, seed=69)
    lam = 60.0
    res = aloocv.fit(X, y, loss="squared", penalty=aloocv.L1(lam), tol=1e-12)
    ref = Lasso(alpha=lam / 100, tol=1e-14, max_iter=100000).fit(X, y)
    np.testing.assert_allclose(res.coef_, ref.coef_, atol=1e-8)


@pytest.mark.parametrize("bad", [-1.0, np.nan, np.array([1.0, -1.0])])
def test_bad_penalties(bad):
    with pytest.raises(ValueError, match="must be"):
        aloocv.ElasticNet(bad, 1.0)
    with pytest.raises(ValueError, match="must be"):
        aloocv.ElasticNet(1.0, bad)


def test_penalty_equality_and_l1_helper():
    assert aloocv.L1(2.0) == aloocv.ElasticNet(2.0, 0.0)
    assert aloocv.ElasticNet(1.0, 2.0) != aloocv.ElasticNet(1.0, 3.0)
    with pytest.raises(ValueError, match="l1 vector has length 3"):
        aloocv.fit(np.eye(4, 2), np.ones(4), loss="squared", penalty=aloocv.L1(np.ones(3)))


def test_coef_from_sklearn_lasso():
    X, y = sparse_truth(150, 10, 3, seed=70)
    lam = 30.0
    m = Lasso(alpha=lam / 150, tol=1e-14, max_iter=100000).fit(X, y)
    a = aloocv.loo(
        X, y, loss="squared", penalty=aloocv.L1(lam), coef=m.coef_, intercept=m.intercept_
    )
    b = aloocv.loo(X, y, loss="squared", penalty=aloocv.L1(lam), tol=1e-12)
    assert a.fit.n_iter_ == 0
    np.testing.assert_allclose(a.losses, b.losses, rtol=1e-7)


@pytest.mark.filterwarnings("ignore:ALO's mean may be off:aloocv.ALOWarning")
def test_pure_lasso_is_tunable():
    # L1 has one parameter (l1); grids and gradient searches move it, the L2 weight stays 0
    pen = aloocv.L1(2.0)
    assert pen.params().tolist() == [2.0] and pen == aloocv.ElasticNet(2.0, 0.0)
    assert pen.with_params(np.array([3.0])) == aloocv.L1(3.0)
    import pickle

    assert pickle.loads(pickle.dumps(pen)) == pen
    rng = np.random.default_rng(140)
    X = rng.standard_normal((150, 6))
    y = X[:, :2] @ np.array([2.0, -1.0]) + rng.standard_normal(150)
    grid = np.logspace(-1, 2, 12)
    res = aloocv.tune(X, y, loss="squared", penalty=pen, method="grid", grid=grid)
    ref = [aloocv.loo(X, y, loss="squared", penalty=aloocv.L1(g)).mean for g in grid]
    assert res.penalty.l1 == pytest.approx(grid[int(np.argmin(ref))])
    assert res.acv == pytest.approx(min(ref), rel=1e-10)
    # scikit-learn's ElasticNetCV(l1_ratio=1) convention: alpha_ = l1 / n
    est = aloocv.ALOElasticNetCV(l1_ratio=1.0, alphas=grid / 150).fit(X, y)
    assert est.l1_ratio_ == 1.0
    assert est.alpha_ * 150 == pytest.approx(res.penalty.l1, rel=1e-12)
    yc = (y > 0).astype(float)
    clf = aloocv.ALOLogisticRegressionCV(penalty="l1", Cs=[0.01, 0.1, 1.0, 10.0]).fit(X, yc)
    acv = [aloocv.loo(X, yc, penalty=aloocv.L1(1 / C)).mean for C in (0.01, 0.1, 1.0, 10.0)]
    assert clf.C_[0] == pytest.approx((0.01, 0.1, 1.0, 10.0)[int(np.argmin(acv))])
    assert clf.l1_ratio_[0] == 1.0
    # ALOElasticNetCV's l1_ratio list may mix 1.0 with ratios in between (one search per
    # penalty structure: tests/test_estimator_regressions.py); l1_ratios here may not
    with pytest.raises(ValueError, match="mixes 1.0"):
        aloocv.ALOLogisticRegressionCV(l1_ratios=[0.5, 1.0]).fit(X, yc)


@pytest.mark.parametrize("l1_ratio", [0.3, 0.5, 1.0])
@pytest.mark.parametrize("seed", [10, 11, 12])
def test_top_of_default_grid_is_the_empty_model(l1_ratio, seed):
    """At alpha_max (|x_j^T r| = l1 exactly for the first feature to enter) the fit is
    all zeros, so the leave-one-out loss is that of the intercept-only model, whose LOO
    residuals are (y_i - ybar) n / (n - 1); a rounding tie used to leave a ~1e-17
    coefficient that made the feature active for the leave-one-out formulas."""
    rng = np.random.default_rng(seed)
    n, p = 70, 6
    X = rng.standard_normal((n, p))
    y = X @ rng.standard_normal(p) + rng.standard_normal(n)
    m = aloocv.ALOElasticNetCV(l1_ratio=l1_ratio, alphas=6).fit(X, y)
    assert np.all(m.tune_result_.path_coefs[0] == 0.0)
    ref = 0.5 * np.mean(((y - y.mean()) * n / (n - 1)) ** 2)
    np.testing.assert_allclose(m.search_results_["loss"][0], ref, rtol=1e-10)
