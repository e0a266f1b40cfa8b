"""Trusting ALO (docs/math/trust.md): the error indicator ranks the samples that carry the
error, plain ALO checks itself and warns when its mean is off (and only then), and
``rtol=`` brings the mean within budget of exact leave-one-out, on real data against
brute-force refits."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine
from sklearn.preprocessing import PolynomialFeatures, StandardScaler
from threadpoolctl import threadpool_limits

import aloocv
from aloocv.results.trust import RISK_RTOL, WARN_RTOL
from conftest import loss_value, sklearn_glm


def _std(X):
    return StandardScaler().fit_transform(X)


def breast_cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return _std(X), y * 1.0


def wine_degree2():
    X, y = load_wine(return_X_y=True)
    P = PolynomialFeatures(2, include_bias=False).fit_transform(_std(X))
    return _std(P), (y == 0) * 1.0


def exact(X, y, lam, **kw):
    return aloocv.loo(X, y, penalty=aloocv.L2(lam), method="exact", tol=1e-10, **kw)


def plain(X, y, lam, **kw):
    """Plain ALO with its warnings recorded (not raised)."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        res = aloocv.loo(X, y, penalty=aloocv.L2(lam), tol=1e-10, **kw)
    return res, [r for r in rec if issubclass(r.category, aloocv.ALOWarning)]


# ----------------------------------------------------------------------------- indicator
def test_indicator_is_the_second_order_formula():
    """I_i = 1/2 |l'(eta~_i)| rho (eta~_i - eta_i)^2 / h_i, written here from the
    logistic derivatives and a numpy Hessian at the fit."""
    X, y = breast_cancer()
    lam = 0.1
    res, _ = plain(X, y, lam)
    Xt = np.hstack([np.ones((X.shape[0], 1)), X])
    eta = Xt @ res.fit.beta_
    s = 1.0 / (1.0 + np.exp(-eta))
    d2, d3 = s * (1 - s), s * (1 - s) * (1 - 2 * s)
    H = Xt.T @ (d2[:, None] * Xt) + np.diag(np.r_[0.0, np.full(X.shape[1], lam)])
    h = np.einsum("ij,ji->i", Xt, np.linalg.solve(H, Xt.T))
    eta_t = eta + (s - y) * h / (1 - d2 * h)
    g_t = 1.0 / (1.0 + np.exp(-eta_t)) - y
    rho = np.abs(d3).sum() / d2.sum()
    ref = 0.5 * np.abs(g_t) * rho * (eta_t - eta) ** 2 / h
    np.testing.assert_allclose(res.indicator, ref, rtol=1e-6, atol=1e-12)


def test_indicator_is_zero_where_alo_is_exact():
    X, y = load_diabetes(return_X_y=True)
    res = aloocv.loo(_std(X), y, loss="squared", penalty=aloocv.L2(1.0))
    assert np.all(res.indicator == 0.0)
    assert res.error_estimate is None
    assert aloocv.loo(_std(X), y, loss="squared", method="exact").indicator is None


@pytest.mark.parametrize(
    ("data", "lam"), [(breast_cancer, 0.1), (breast_cancer, 1e-3), (wine_degree2, 0.035)]
)
def test_indicator_ranks_the_worst_samples_first(data, lam):
    X, y = data()
    res, _ = plain(X, y, lam)
    err = np.abs(res.losses - exact(X, y, lam).losses)
    top = np.argsort(-res.indicator)[: max(1, X.shape[0] // 20)]
    # the top 5% by the indicator carry most of the total error ...
    assert err[top].sum() >= 0.95 * err.sum()
    # ... and the flags (recalibrated by the self-check's refits) mark the samples whose
    # error exceeds 10% of their loss (or of the mean): most of them, and few others
    big = err > 0.1 * np.maximum(np.abs(res.losses), res.mean)
    flagged = res.unreliable
    assert big.any() and flagged.any()
    assert np.sum(big & flagged) >= 0.5 * big.sum()
    assert np.sum(flagged & ~big) <= 0.3 * flagged.sum()


# ----------------------------------------------------------------------------- self-check
@pytest.mark.parametrize(
    ("data", "lam"),
    [(breast_cancer, 0.01), (breast_cancer, 1e-3), (wine_degree2, 0.035), (wine_degree2, 1.0)],
)
def test_plain_alo_warns_when_its_mean_is_off(data, lam):
    X, y = data()
    res, rec = plain(X, y, lam)
    true = abs(res.mean / exact(X, y, lam).mean - 1.0)
    assert true > WARN_RTOL  # 18.8%, 15.7%, 12.3%, 2.6% against exact LOO
    assert len(rec) == 1 and "may be off by about" in str(rec[0].message)
    est = res.error_estimate
    assert est.kind == "check" and est.n_refits == 10
    # the estimate is of the right size: within a factor 2 of the truth, never below half
    assert 0.5 * true <= est.relative_error <= 2.0 * true
    assert est.ci_low is None and est.rtol is None and est.met is None


def _gamma_poisson_ridge():
    X, y = load_diabetes(return_X_y=True)
    X = _std(X)
    yield X, y, "squared", 10.0
    yield X, np.round(y / 10.0), "poisson", 1.0
    yield X, y, "gamma", 1.0
    yield X, y, "gamma", 1e-2


@pytest.mark.parametrize("case", range(4))
def test_plain_alo_stays_quiet_where_it_is_accurate(case):
    X, y, loss, lam = list(_gamma_poisson_ridge())[case]
    res, rec = plain(X, y, lam, loss=loss)
    ref = exact(X, y, lam, loss=loss)
    assert abs(res.mean / ref.mean - 1.0) < 0.003
    assert rec == []
    # where the indicator says there is no risk no refit is made at all
    if res.error_estimate is None:
        W = X.shape[0]
        assert res.indicator.sum() / W <= RISK_RTOL * abs(res.mean)


def test_self_check_refits_are_exact_refits():
    X, y = breast_cancer()
    lam = 1e-3
    res, _ = plain(X, y, lam)
    rows = res.error_estimate.refitted
    assert rows.size == 10
    # the self-check's refits are the samples the indicator ranks first
    assert set(rows) == set(np.argsort(-res.indicator)[:10])
    # the losses stay plain ALO's: the loss at eta~ = eta + g h / (1 - d h)
    eta = res.fit.decision_function(X)
    s = 1.0 / (1.0 + np.exp(-eta))
    h = res.leverages
    eta_t = eta + (s - y) * h / (1.0 - s * (1.0 - s) * h)
    np.testing.assert_allclose(res.losses, loss_value("logistic", y, eta_t), rtol=1e-9)


# ----------------------------------------------------------------------------- budget
@pytest.mark.parametrize(
    ("data", "lam"), [(breast_cancer, 1.0), (breast_cancer, 1e-3), (wine_degree2, 0.035)]
)
def test_rtol_meets_the_budget(data, lam):
    X, y = data()
    rtol = 0.01
    ref = exact(X, y, lam)
    res = aloocv.loo(X, y, penalty=aloocv.L2(lam), tol=1e-10, rtol=rtol)
    assert abs(res.mean - ref.mean) <= rtol * ref.mean
    est = res.error_estimate
    assert est.kind == "budget" and est.met and est.rtol == rtol
    assert est.ci_low <= est.error <= est.ci_high
    assert max(abs(est.ci_low), abs(est.ci_high)) <= rtol * abs(res.mean - est.error) * 1.0001
    # the refitted samples' losses are the exact ones; the others stay ALO's
    rows = est.refitted
    np.testing.assert_allclose(res.losses[rows], ref.losses[rows], rtol=1e-6, atol=1e-9)
    alo = aloocv.loo(X, y, penalty=aloocv.L2(lam), tol=1e-10, rtol=0.5).losses
    others = np.setdiff1d(np.arange(X.shape[0]), rows)
    assert est.n_refits == rows.size < X.shape[0]
    assert est.plain_mean == pytest.approx(np.mean(plain(X, y, lam)[0].losses))
    assert np.all(np.isfinite(alo[others]))


def test_refined_samples_equal_scikit_learn_refits():
    X, y = breast_cancer()
    lam = 1e-3
    res = aloocv.loo(X, y, penalty=aloocv.L2(lam), tol=1e-10, rtol=0.01)
    rows = res.error_estimate.refitted[:8]
    keep = np.ones(X.shape[0], bool)
    with threadpool_limits(1):
        for i in rows:
            keep[:] = True
            keep[i] = False
            coef, b = sklearn_glm("logistic", X[keep], y[keep], lam)
            ref = loss_value("logistic", y[i], X[i] @ coef + b)
            assert res.losses[i] == pytest.approx(ref, rel=1e-5, abs=1e-8)


def test_rtol_small_enough_is_exact_leave_one_out():
    X, y = wine_degree2()
    X, y = X[::3], y[::3]  # 60 samples
    lam = 0.1
    res = aloocv.loo(X, y, penalty=aloocv.L2(lam), tol=1e-10, rtol=1e-9)
    ref = exact(X, y, lam)
    # every sample that carries error is refitted: the losses are exact LOO's
    np.testing.assert_allclose(res.losses, ref.losses, rtol=1e-7, atol=1e-10)
    assert abs(res.mean - ref.mean) <= 1e-9 * ref.mean
    assert res.error_estimate.n_refits >= 0.8 * X.shape[0]


@pytest.mark.parametrize(
    ("rtol", "err"),
    [
        (0.0, ValueError),
        (1.0, ValueError),
        (-0.1, ValueError),
        ("1%", TypeError),
        (np.nan, ValueError),
    ],
)
def test_rtol_is_validated(rtol, err):
    X, y = breast_cancer()
    with pytest.raises(err, match="rtol"):
        aloocv.loo(X[:50], y[:50], penalty=aloocv.L2(1.0), rtol=rtol)


def test_rtol_needs_an_approximation():
    X, y = breast_cancer()
    with pytest.raises(ValueError, match="rtol= refines method='alo'"):
        aloocv.loo(X[:50], y[:50], penalty=aloocv.L2(1.0), method="if", rtol=0.01)
    ex = aloocv.loo(X[:50], y[:50], penalty=aloocv.L2(1.0), method="exact", rtol=0.01)
    assert ex.error_estimate is None  # exact needs no budget


# ----------------------------------------------------------------------------- every route
def _weighted_offset_case():
    X, y = breast_cancer()
    rng = np.random.default_rng(3)
    w = rng.integers(1, 4, X.shape[0]).astype(float)
    off = 0.3 * rng.standard_normal(X.shape[0])
    return X, y, {"sample_weight": w, "offset": off}


@pytest.mark.parametrize("route", ["weights_offset", "dual", "elastic_net"])
def test_rtol_on_every_scalar_route(route):
    X, y = breast_cancer()
    kw = {}
    pen = aloocv.L2(1e-3)
    if route == "weights_offset":
        X, y, kw = _weighted_offset_case()
    elif route == "dual":
        X = _std(PolynomialFeatures(2, include_bias=False).fit_transform(X[:, :12]))[:60]
        y = y[:60]
        kw = {"solver": "dual"}
    else:
        pen = aloocv.ElasticNet(l1=0.02, l2=1e-3)
    ref = aloocv.loo(X, y, penalty=pen, method="exact", tol=1e-10, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", aloocv.ALOWarning)
        res = aloocv.loo(X, y, penalty=pen, tol=1e-10, rtol=0.01, **kw)
    assert abs(res.mean - ref.mean) <= 0.01 * ref.mean
    rows = res.error_estimate.refitted
    np.testing.assert_allclose(res.losses[rows], ref.losses[rows], rtol=1e-6, atol=1e-9)


def test_rtol_multinomial_wine():
    """3-class wine at C = 100: plain ALO is off by about +66%; the self-check says so and
    rtol=0.02 brings it within budget."""
    X, y = load_wine(return_X_y=True)
    X = _std(X)
    lam = 0.01
    ref = aloocv.loo(X, y, loss="multinomial", penalty=aloocv.L2(lam), method="exact", tol=1e-10)
    with pytest.warns(aloocv.ALOWarning, match="may be off"):
        res = aloocv.loo(X, y, loss="multinomial", penalty=aloocv.L2(lam), tol=1e-10)
    assert res.mean / ref.mean - 1.0 > 0.3
    assert res.error_estimate.relative_error > 0.3
    res = aloocv.loo(X, y, loss="multinomial", penalty=aloocv.L2(lam), tol=1e-10, rtol=0.02)
    assert abs(res.mean - ref.mean) <= 0.02 * ref.mean
    rows = res.error_estimate.refitted
    np.testing.assert_allclose(res.losses[rows], ref.losses[rows], rtol=1e-6, atol=1e-9)


def test_rtol_needs_no_refit_where_the_indicator_is_far_within_budget():
    """A well-determined design (n = 2000, p = 5): ten times the indicator's estimate of
    the error is within the budget, so no refit is made; exact LOO agrees."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 5))
    y = (rng.random(2000) < 1.0 / (1.0 + np.exp(-X[:, 0]))) * 1.0
    res = aloocv.loo(X, y, penalty=aloocv.L2(1.0), tol=1e-10, rtol=0.01)
    est = res.error_estimate
    assert est.kind == "screened" and est.n_refits == 0 and est.met
    assert est.ci_high <= 0.01 * res.mean
    ref = exact(X, y, 1.0)
    assert abs(res.mean - ref.mean) <= est.ci_high
    np.testing.assert_array_equal(res.losses, aloocv.loo(X, y, penalty=aloocv.L2(1.0)).losses)


@pytest.mark.parametrize("case", ["lasso", "huber"])
def test_indicator_blind_spots_are_always_refitted(case):
    """An L1 term (active-set changes) and the Huber loss (curvature jumps) are outside the
    expansion: their zero or small indicator never spares the refits."""
    X, y = load_diabetes(return_X_y=True)
    X = _std(X)
    if case == "lasso":
        kw = {"loss": "squared", "penalty": aloocv.ElasticNet(l1=5.0, l2=0.1)}
    else:
        kw = {"loss": aloocv.Huber(), "penalty": aloocv.L2(1.0)}
        y = (y - y.mean()) / y.std()
    res = aloocv.loo(X, y, tol=1e-10, rtol=0.01, **kw)
    ref = aloocv.loo(X, y, tol=1e-10, method="exact", **kw)
    est = res.error_estimate
    assert est.kind == "budget" and est.n_refits >= 10
    assert abs(res.mean - ref.mean) <= 0.01 * ref.mean
    rows = est.refitted
    np.testing.assert_allclose(res.losses[rows], ref.losses[rows], rtol=1e-6, atol=1e-9)
    plain = aloocv.loo(X, y, tol=1e-10, **kw)
    assert plain.error_estimate is not None and plain.error_estimate.n_refits == 10


@pytest.mark.parametrize("seed", range(6))
def test_the_self_checks_first_rows_are_the_rankings_first(seed):
    # the partitioned ranking of the self-check's rows equals the head of the full sort:
    # ties in the indicator (broken by the loss change, then the row), zero weights,
    # infinite and NaN indicators
    from types import SimpleNamespace

    from aloocv.results.trust import _ranked

    rng = np.random.default_rng(seed)
    n = 400
    ind = np.round(rng.exponential(1.0, n), 1)  # many ties
    change = np.round(rng.normal(0.0, 1.0, n), 1)
    w = rng.choice([0.0, 1.0, 2.0], n, p=[0.1, 0.6, 0.3])
    if seed % 2:
        ind[rng.choice(n, 5, replace=False)] = np.inf
    if seed % 3 == 2:
        ind[rng.choice(n, 5, replace=False)] = np.nan
    g = SimpleNamespace(indicator=ind, change=change)
    full = _ranked(g, w)
    for k in (1, 3, 10, 50, int(np.count_nonzero(w > 0)), n + 5):
        np.testing.assert_array_equal(_ranked(g, w, k), full[:k])
