"""Leave-one-out estimators against brute-force refits computed here."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

import aloocv
from conftest import loss_value, make_data, ridge_exact_loo, sklearn_exact_loo, sklearn_glm


def rel(a, b):
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


# --- Corollary 2: squared loss + L2 -> ALO is exact LOO -----------------------------------


@pytest.mark.parametrize(
    "lam", [0.3, np.array([0.0, 0.1, 1.0, 10.0, 100.0, 3.0, 0.5])], ids=["scalar", "vector"]
)
@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.smoke
def test_squared_alo_equals_exact_loo(lam, intercept, weighted):
    X, y = make_data("squared", 60, 7, seed=20)
    w = np.random.default_rng(2).uniform(0.1, 4.0, 60) if weighted else None
    ref_eta = ridge_exact_loo(X, y, lam, w, intercept)
    ref_loss = 0.5 * (y - ref_eta) ** 2
    for method in ("alo", "exact"):
        res = aloocv.loo(
            X,
            y,
            loss="squared",
            penalty=aloocv.L2(lam),
            method=method,
            fit_intercept=intercept,
            sample_weight=w,
            tol=1e-12,
        )
        assert rel(res.predictions, ref_eta) < 1e-10, method
        assert rel(res.losses, ref_loss) < 1e-10, method
    assert res.mean == pytest.approx(np.average(ref_loss, weights=w), rel=1e-10)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(8, 40),
    p=st.integers(1, 6),
    lam=st.floats(1e-2, 1e2),
    seed=st.integers(0, 2**16),
)
def test_press_identity_property(n, p, lam, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = rng.standard_normal(n)
    res = aloocv.loo(X, y, loss="squared", penalty=aloocv.L2(lam))
    # PRESS: y - eta~ = (y - eta) / (1 - h), with the hat matrix computed in numpy
    Xt = np.hstack([np.ones((n, 1)), X])
    P = np.diag(np.r_[0.0, np.full(p, lam)])
    Hat = Xt @ np.linalg.solve(Xt.T @ Xt + P, Xt.T)
    np.testing.assert_allclose(res.leverages, np.diag(Hat), rtol=1e-9, atol=1e-12)
    resid = (y - Hat @ y) / (1.0 - np.diag(Hat))
    np.testing.assert_allclose(y - res.predictions, resid, rtol=1e-8, atol=1e-10)
    assert np.all((res.leverages > 0) & (res.leverages < 1))


# --- smooth GLMs: ALO close to exact LOO, IF worse when overfitting -------------------------


@pytest.mark.parametrize("loss", ["logistic", "poisson"])
def test_alo_mean_close_to_brute_force(loss):
    X, y = make_data(loss, 150, 10, seed=21)  # n >= 5p
    lam = 1.0
    ref_eta = sklearn_exact_loo(loss, X, y, lam)
    ref = loss_value(loss, y, ref_eta)
    alo = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(lam), method="alo")
    assert abs(alo.mean - ref.mean()) < 0.02 * ref.mean()
    # per-sample: ALO's error is second order, far below the LOO perturbation itself
    fit_loss = loss_value(loss, y, alo.fit.decision_function(X))
    assert np.median(np.abs(alo.losses - ref)) < 0.05 * np.median(np.abs(ref - fit_loss))
    # our exact method agrees with the scikit-learn refits
    ex = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(lam), method="exact", tol=1e-10)
    np.testing.assert_allclose(ex.predictions, ref_eta, rtol=1e-5, atol=1e-6)
    assert ex.leverages is None


@pytest.mark.filterwarnings("ignore:ALO's mean may be off:aloocv.ALOWarning")
def test_if_visibly_worse_than_alo_when_overfitting():
    X, y = make_data("logistic", 80, 30, seed=22, scale=3.0)
    lam = 0.05  # small penalty, p/n large: the fit overfits
    ref = loss_value("logistic", y, sklearn_exact_loo("logistic", X, y, lam)).mean()
    res = {
        m: aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(lam), method=m)
        for m in ("alo", "if", "lemma3")
    }
    err = {m: abs(r.mean - ref) for m, r in res.items()}
    assert err["if"] > 5 * err["alo"]
    insample = loss_value("logistic", y, res["alo"].fit.decision_function(X)).mean()
    assert insample < ref  # the optimism LOO corrects
    assert res["if"].mean < ref and res["alo"].mean > res["if"].mean


def test_lemma3_is_first_order_expansion():
    X, y = make_data("logistic", 200, 5, seed=23)
    alo = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0), method="alo")
    l3 = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0), method="lemma3")
    eta = alo.fit.decision_function(X)
    s = 1 / (1 + np.exp(-eta))
    g = s - y
    expected = loss_value("logistic", y, eta) + g * (alo.predictions - eta)
    np.testing.assert_allclose(l3.losses, expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(l3.predictions, alo.predictions, rtol=1e-12)
    assert abs(l3.mean - alo.mean) < 0.01 * alo.mean


@pytest.mark.smoke
def test_if_formula():
    X, y = make_data("poisson", 100, 4, seed=24)
    alo = aloocv.loo(X, y, loss="poisson", penalty=aloocv.L2(1.0), method="alo")
    inf = aloocv.loo(X, y, loss="poisson", penalty=aloocv.L2(1.0), method="if")
    eta = alo.fit.decision_function(X)
    g = np.exp(eta) - y
    np.testing.assert_allclose(inf.predictions, eta + g * alo.leverages, rtol=1e-10)
    d = np.exp(eta)
    np.testing.assert_allclose(
        alo.predictions, eta + g * alo.leverages / (1 - d * alo.leverages), rtol=1e-10
    )


def test_weighted_glm_alo_vs_brute_force():
    X, y = make_data("logistic", 100, 4, seed=25)
    w = np.random.default_rng(3).uniform(0.5, 2.0, 100)
    res = aloocv.loo(
        X, y, loss="logistic", penalty=aloocv.L2(1.0), sample_weight=w, method="exact", tol=1e-11
    )
    ref = np.empty(100)
    for i in range(100):
        keep = np.arange(100) != i
        c, b = sklearn_glm("logistic", X[keep], y[keep], 1.0, sample_weight=w[keep])
        ref[i] = X[i] @ c + b
    np.testing.assert_allclose(res.predictions, ref, rtol=1e-5, atol=1e-6)
    alo = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0), sample_weight=w)
    assert alo.mean == pytest.approx(res.mean, rel=0.02)
    assert res.mean == pytest.approx(np.average(loss_value("logistic", y, ref), weights=w))


def test_zero_weight_sample_is_its_own_loo():
    X, y = make_data("logistic", 60, 3, seed=26)
    w = np.ones(60)
    w[5] = 0.0
    for m in ("alo", "exact"):
        res = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0), sample_weight=w, method=m)
        assert res.predictions[5] == pytest.approx(res.fit.decision_function(X[5:6])[0])


# --- bring your own fit ---------------------------------------------------------------------


@pytest.mark.smoke
def test_coef_from_sklearn_skips_fit():
    X, y = make_data("logistic", 200, 6, seed=27)
    lam = 0.5
    m = LogisticRegression(C=1 / lam, tol=1e-12, solver="newton-cholesky").fit(X, y)
    a = aloocv.loo(
        X, y, loss="logistic", penalty=aloocv.L2(lam), coef=m.coef_, intercept=m.intercept_
    )
    b = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(lam), tol=1e-12)
    assert a.fit.n_iter_ == 0
    np.testing.assert_allclose(a.losses, b.losses, rtol=1e-7)


@pytest.mark.filterwarnings("ignore:ALO's mean may be off:aloocv.ALOWarning")
def test_coef_of_a_different_objective_warns():
    X, y = make_data("logistic", 200, 6, seed=28)
    m = LogisticRegression(C=100.0).fit(X, y)
    with pytest.warns(ConvergenceWarning, match="not a minimizer"):
        aloocv.loo(
            X, y, loss="logistic", penalty=aloocv.L2(1.0), coef=m.coef_, intercept=m.intercept_
        )


def test_stderr_and_mean():
    X, y = make_data("logistic", 120, 4, seed=29)
    res = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0))
    assert res.mean == pytest.approx(res.losses.mean())
    assert res.stderr == pytest.approx(res.losses.std(ddof=1) / np.sqrt(120))
    assert "alo" in repr(res)


@pytest.mark.parametrize("method", ["alo", "exact"])
@pytest.mark.parametrize("given", [False, True])
def test_the_cores_linear_predictor_is_the_fits(method, given):
    # loo's checks take the fit's eta from the core (no pass over X in Python): it is
    # X coef + intercept + offset at the returned coefficients, whatever the route to them
    from aloocv import _core

    X, y = make_data("poisson", 300, 8, seed=41)
    off = np.random.default_rng(41).normal(0.0, 0.3, 300)
    beta = None
    if given:
        r = aloocv.fit(X, y, loss="poisson", penalty=aloocv.L2(1.0), offset=off)
        beta = np.r_[r.intercept_, r.coef_]
    out = _core.loo(
        X,
        y,
        None,
        "poisson",
        np.ones(8),
        fit_intercept=True,
        method=method,
        tol=1e-8,
        max_iter=100,
        n_threads=1,
        beta=beta,
        offset=off,
    )
    np.testing.assert_allclose(out.eta, X @ out.coef + out.intercept + off, rtol=1e-12, atol=1e-12)
