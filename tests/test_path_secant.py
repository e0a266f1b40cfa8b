"""Secant-corrected chord steps along tuning paths (issue 13).

A tuning run's fits (the cold first one and every warm-started path point) correct their
chord steps with the secant pairs of the steps since their factor. Checked here against
independent references: every candidate of an 8-decade grid equals a numpy Newton fit
from scratch, its ALO predictions equal numpy's closed form at that fit, and the warm
candidates take one Hessian pass each (without the correction the several-fold lambda
steps of such a grid took 2-3)."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import aloocv


def _data(n, p, seed, rho=0.0, scales=None, loss="logistic"):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    for j in range(1, p):  # AR(1) columns of unit variance
        X[:, j] = rho * X[:, j - 1] + np.sqrt(1.0 - rho * rho) * X[:, j]
    beta = rng.standard_normal(p) * 2.0 / np.sqrt(p)
    eta = X @ beta
    if scales is not None:
        X = X * scales
    if loss == "poisson":
        y = rng.poisson(np.exp(0.5 * eta)).astype(np.float64)
    else:
        y = (rng.random(n) < 1.0 / (1.0 + np.exp(-eta))).astype(np.float64)
    return X, y


def _derivs(loss, y, eta):
    if loss == "poisson":
        mu = np.exp(eta)
        return mu - y, mu
    pr = 1.0 / (1.0 + np.exp(-eta))
    return pr - y, pr * (1.0 - pr)


def _numpy_fit(X, y, lam, loss):
    """Newton to the rounding floor from zero; intercept first and unpenalized."""
    Xt = np.hstack([np.ones((X.shape[0], 1)), X])
    pen = np.r_[0.0, np.full(X.shape[1], lam)]
    b = np.zeros(Xt.shape[1])
    for _ in range(100):
        g, d = _derivs(loss, y, Xt @ b)
        grad = Xt.T @ g + pen * b
        step = np.linalg.solve((Xt * d[:, None]).T @ Xt + np.diag(pen), grad)
        b = b - step
        if np.max(np.abs(step)) <= 1e-15 * max(1.0, np.max(np.abs(b))):
            break
    return b


def _numpy_alo(X, y, b, lam, loss):
    """ALO linear predictors eta_i + g_i h_i / (1 - d_i h_i) and the leverages h_i."""
    Xt = np.hstack([np.ones((X.shape[0], 1)), X])
    eta = Xt @ b
    g, d = _derivs(loss, y, eta)
    H = (Xt * d[:, None]).T @ Xt + np.diag(np.r_[0.0, np.full(X.shape[1], lam)])
    Z = np.linalg.solve(np.linalg.cholesky(H), Xt.T)
    h = np.einsum("ij,ij->j", Z, Z)
    return eta + g * h / (1.0 - d * h), h


@pytest.mark.parametrize("rho", [0.0, 0.9])
def test_logistic_cv_candidates_equal_fits_from_scratch(rho):
    X, y = _data(300, 12, 1, rho)
    Cs = np.logspace(-4, 4, 10)
    with threadpool_limits(1):
        est = aloocv.ALOLogisticRegressionCV(Cs=Cs, tol=1e-12, store_loo=True).fit(X, y)
        tr = est.tune_result_
        path = est.coefs_paths_[1.0][0]  # (n_cs, p + 1), intercept last
        for k, C in enumerate(Cs):
            b = _numpy_fit(X, y, 1.0 / C, "logistic")
            np.testing.assert_allclose(path[k, -1], b[0], rtol=0, atol=1e-9)
            np.testing.assert_allclose(path[k, :-1], b[1:], rtol=0, atol=1e-9)
            pred, _ = _numpy_alo(X, y, b, 1.0 / C, "logistic")
            np.testing.assert_allclose(tr.path_predictions[:, k], pred, rtol=1e-9, atol=1e-12)


def test_poisson_grid_path_equals_fits_from_scratch():
    X, y = _data(300, 10, 2, 0.5, loss="poisson")
    lams = 10.0 ** np.arange(3.0, -4.0, -1.0)
    with threadpool_limits(1):
        res = aloocv.tune(
            X, y, loss="poisson", penalty=aloocv.L2(1.0), method="grid", grid=lams, fit_tol=1e-12
        )
        for k, lam in enumerate(lams):
            b = _numpy_fit(X, y, lam, "poisson")
            np.testing.assert_allclose(res.path_intercepts[k], b[0], rtol=0, atol=1e-9)
            np.testing.assert_allclose(res.path_coefs[k], b[1:], rtol=0, atol=1e-9)
            pred, _ = _numpy_alo(X, y, b, lam, "poisson")
            np.testing.assert_allclose(res.path_predictions[:, k], pred, rtol=1e-9, atol=1e-12)
    assert np.all(res.path_hessian_passes[1:] <= 2)


@pytest.mark.parametrize("rho", [0.0, 0.9])
def test_warm_candidates_take_one_hessian_pass(rho):
    """The grid of Cs=10 is 7.7x in lambda per step: the secant-corrected chord steps
    converge on the previous candidate's factor (without the correction: 2-3 Hessian
    passes at several candidates of these problems)."""
    X, y = _data(2000, 40, 1, rho)
    with threadpool_limits(1):
        est = aloocv.ALOLogisticRegressionCV(Cs=10).fit(X, y)
    h = est.tune_result_.path_hessian_passes
    assert h[0] <= 2  # the cold fit: the Hessian at the start and the one at the end
    np.testing.assert_array_equal(h[1:], 1.0)
    assert est.passes_per_candidate_ <= 2.1
    # the chord steps stay within what a handful of Hessian passes would cost
    assert np.all(est.tune_result_.path_matvec_passes <= 25)


def test_leverages_of_unequally_scaled_correlated_columns():
    """Leverages are invariant to column scaling, and so is Cholesky.rcond() (which picks
    the explicit-inverse route): columns over 6 decades of scale and AR(1) 0.9 give
    numpy's leverages to rounding."""
    p = 15
    scales = 10.0 ** np.linspace(-3.0, 3.0, p)
    X, y = _data(400, p, 3, 0.9, scales=scales)
    with threadpool_limits(1):
        for lam in (1e-4, 1.0, 1e3):
            r = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(lam), tol=1e-12)
            b = np.r_[r.fit.intercept_, r.fit.coef_]
            pred, h = _numpy_alo(X, y, b, lam, "logistic")
            np.testing.assert_allclose(r.leverages, h, rtol=1e-9)
            np.testing.assert_allclose(r.predictions, pred, rtol=1e-9, atol=1e-12)
