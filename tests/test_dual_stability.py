"""The dual route (n < p) and kernel ridge LOO at small lambda: the stable form of
1 - d_i h_i, checked against brute-force refits and numpy leverages."""

from __future__ import annotations

import numpy as np
import pytest

import aloocv


def wide(n=50, p=200, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = X[:, :5].sum(1) + rng.standard_normal(n)
    return X, y


def ridge_refits_svd(X, y, lam, intercept):
    """Brute-force LOO predictions of ridge: n refits, each from an SVD of the centered
    data without sample i (accurate at any lambda > 0, unlike the normal equations)."""
    n = len(y)
    out = np.empty(n)
    for i in range(n):
        keep = np.arange(n) != i
        Xm, ym = X[keep], y[keep]
        mu = Xm.mean(0) if intercept else np.zeros(X.shape[1])
        yb = ym.mean() if intercept else 0.0
        U, s, Vt = np.linalg.svd(Xm - mu, full_matrices=False)
        theta = Vt.T @ (s / (s**2 + lam) * (U.T @ (ym - yb)))
        out[i] = yb + (X[i] - mu) @ theta
    return out


def numpy_leverages(X, d, lam, intercept):
    n, p = X.shape
    Xt = np.hstack([np.ones((n, 1)), X]) if intercept else X
    pen = np.r_[0.0, np.full(p, lam)] if intercept else np.full(p, lam)
    H = Xt.T @ (Xt * d[:, None]) + np.diag(pen)
    Z = np.linalg.solve(np.linalg.cholesky(H), Xt.T)
    return (Z**2).sum(0)


@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("lam, target", [(1e-2, 1e-8), (1e-4, 1e-7), (1e-6, 2e-5)])
def test_dual_squared_matches_brute_force_refits(lam, target, intercept):
    X, y = wide()
    ref = ridge_refits_svd(X, y, lam, intercept)
    res = aloocv.loo(
        X, y, loss="squared", penalty=aloocv.L2(lam), solver="dual", fit_intercept=intercept
    )
    # errors relative to the LOO residuals (what 1 / (1 - d_i h_i) amplifies)
    err = np.max(np.abs(res.predictions - ref) / np.abs(y - ref))
    assert err < target
    # before the stable form: 3.5e-2 at 1e-4 and a spurious "singular" error at 1e-6
    h = numpy_leverages(X, np.ones(len(y)), lam, intercept)
    np.testing.assert_allclose(res.leverages, h, rtol=1e-9)
    np.testing.assert_allclose(1.0 - res.leverages, res.downdate, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("lam", [1e-4, 1e-6])
def test_dual_logistic_leverages_match_primal(lam):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((40, 120))
    y = (X[:, 0] + 2 * rng.standard_normal(40) > 0) * 1.0
    # n < p: the classes are separable, and some d_i h_i are near 1
    with pytest.warns(aloocv.ALOWarning) as rec:
        # the dual fit at tol=1e-10 stops about 1e-6 (in coef) from the optimum at lam=1e-6
        # (ALO predictions 3e-5 off those at a tol=1e-15 fit); the primal ends within 2e-10
        d = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(lam), solver="dual", tol=1e-13)
        p = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(lam), solver="primal", tol=1e-10)
    msgs = [str(r.message) for r in rec]
    assert sum("separates the classes" in m for m in msgs) == 2
    assert all("separates the classes" in m or "d_i h_i > 0.99" in m for m in msgs)
    np.testing.assert_array_equal(d.unreliable, p.unreliable)
    # numpy's leverages at each route's own coefficients
    for res in (d, p):
        eta = res.fit.decision_function(X)
        mu = 1.0 / (1.0 + np.exp(-eta))
        h = numpy_leverages(X, mu * (1 - mu), lam, True)
        np.testing.assert_allclose(res.leverages, h, rtol=1e-7)  # before: 1.5e-4 off at 1e-4
    np.testing.assert_allclose(d.predictions, p.predictions, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("lam", [1e-3, 1e-5])
def test_kernel_ridge_small_lambda_matches_refits(lam, intercept):
    X, y = wide(40, 150, seed=2)
    K = X @ X.T
    res = aloocv.kernel_ridge_loo(K, y, lam, fit_intercept=intercept)
    # kernel ridge on K = X X^T is ridge on X with penalty lam: refit by SVD
    ref = ridge_refits_svd(X, y, lam, intercept)
    err = np.max(np.abs(res.predictions - ref) / np.abs(y - ref))
    assert err < 1e-5  # before: 1.2% off in the mean at 1e-5 (x14 per sample)
    ref_mean = np.mean(0.5 * (y - ref) ** 2)
    assert abs(res.mean - ref_mean) < 1e-8 * ref_mean


@pytest.mark.parametrize("intercept", [True, False])
def test_dual_leverages_at_large_lambda(intercept):
    """d_i h_i tiny: the leverages take the direct form (no 1 - den cancellation)."""
    X, y = wide()
    w = np.ones(len(y))
    w[4] = 0.0  # no curvature: the direct form too
    res = aloocv.loo(
        X,
        y,
        loss="squared",
        penalty=aloocv.L2(1e6),
        solver="dual",
        fit_intercept=intercept,
        sample_weight=w,
    )
    h = numpy_leverages(X, w, 1e6, intercept)
    np.testing.assert_allclose(res.leverages, h, rtol=1e-10)
    assert res.downdate[4] == 1.0
