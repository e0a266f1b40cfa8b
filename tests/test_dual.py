"""The n x n dual route (n < p) and kernel ridge LOO, against the primal and brute force."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

import aloocv
from conftest import ridge_exact_loo


def wide(loss, n=40, p=120, seed=130):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    eta = X[:, :5] @ rng.standard_normal(5) * 0.5
    if loss == "squared":
        y = eta + rng.standard_normal(n)
    elif loss == "logistic":
        y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
    else:
        y = rng.poisson(np.exp(0.3 * eta)).astype(float)
    return X, y


def loo_flagged(X, y, **kw):
    """aloocv.loo where the ALOWarning on samples with d_i h_i near 1 (Poisson with n < p
    at moderate penalties) is expected exactly when the result flags samples."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        res = aloocv.loo(X, y, **kw)
    for r in rec:
        assert issubclass(r.category, aloocv.ALOWarning), str(r.message)
        assert "d_i h_i > 0.99" in str(r.message)
    assert len(rec) == int(res.unreliable.any() and kw["loss"] != "squared")
    return res


@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("lam", [2.0, "vector"])
def test_dual_equals_primal(loss, intercept, weighted, lam):
    X, y = wide(loss)
    lam = np.linspace(0.5, 5.0, 120) if lam == "vector" else lam
    w = None
    if weighted:
        w = np.random.default_rng(1).uniform(0.5, 2.0, 40)
        w[3] = 0.0  # a sample without weight has no curvature: the dual never divides by it
    kw = dict(
        loss=loss, penalty=aloocv.L2(lam), fit_intercept=intercept, sample_weight=w, tol=1e-12
    )
    pr = loo_flagged(X, y, solver="primal", **kw)
    du = loo_flagged(X, y, solver="dual", **kw)
    np.testing.assert_array_equal(du.unreliable, pr.unreliable)
    np.testing.assert_allclose(du.fit.coef_, pr.fit.coef_, rtol=1e-8, atol=1e-10)
    assert du.fit.intercept_ == pytest.approx(pr.fit.intercept_, abs=1e-9)
    np.testing.assert_allclose(du.leverages, pr.leverages, rtol=1e-8)
    np.testing.assert_allclose(du.losses, pr.losses, rtol=1e-6, atol=1e-9)
    f = aloocv.fit(X, y, solver="dual", **kw)
    np.testing.assert_allclose(f.coef_, pr.fit.coef_, rtol=1e-8, atol=1e-10)


@pytest.mark.filterwarnings("ignore:ALO's mean may be off:aloocv.ALOWarning")
@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("method", ["alo", "exact"])
def test_dual_at_given_coef(intercept, method):
    """coef= (bring your own fit) goes through the dual too, and matches the primal."""
    X, y = wide("logistic", n=30, p=80)
    kw = dict(loss="logistic", penalty=aloocv.L2(1.0), fit_intercept=intercept, method=method)
    ref = aloocv.fit(X, y, solver="primal", tol=1e-12, **{k: kw[k] for k in kw if k != "method"})
    given = dict(coef=ref.coef_, intercept=ref.intercept_ if intercept else None)
    pr = aloocv.loo(X, y, solver="primal", tol=1e-11, **given, **kw)
    du = aloocv.loo(X, y, solver="dual", tol=1e-11, **given, **kw)
    np.testing.assert_array_equal(du.fit.coef_, ref.coef_)
    np.testing.assert_allclose(du.losses, pr.losses, rtol=1e-8, atol=1e-12)
    if method == "alo":
        np.testing.assert_allclose(du.leverages, pr.leverages, rtol=1e-8)
    assert du.fit.gradient_norm_ == pytest.approx(pr.fit.gradient_norm_, rel=1e-6, abs=1e-14)
    # a coef that is not the minimizer: the same warning as on the primal route
    with pytest.warns(ConvergenceWarning, match="not a minimizer"):
        aloocv.loo(X, y, solver="dual", coef=2 * ref.coef_, intercept=given["intercept"], **kw)


def test_auto_hypergradient_takes_the_primal():
    # the dual route has no hypergradient: auto takes the primal route for it, whose
    # gradient is d mean / d lambda_j (ALO is exact LOO here: central differences of the mean)
    X, y = wide("squared", n=30, p=60)
    lam = np.linspace(0.5, 2.0, 60)
    kw = dict(loss="squared", return_gradient=True)
    res = aloocv.loo(X, y, penalty=aloocv.L2(lam), **kw)
    ref = aloocv.loo(X, y, penalty=aloocv.L2(lam), solver="primal", **kw)
    np.testing.assert_allclose(res.gradient, ref.gradient, rtol=1e-10, atol=1e-14)
    for j in (0, 17, 59):
        step = 1e-5 * lam[j]
        up, down = lam.copy(), lam.copy()
        up[j] += step
        down[j] -= step
        fd = (
            aloocv.loo(X, y, loss="squared", penalty=aloocv.L2(up)).mean
            - aloocv.loo(X, y, loss="squared", penalty=aloocv.L2(down)).mean
        ) / (2.0 * step)
        np.testing.assert_allclose(res.gradient[j], fd, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("method", ["if", "lemma3", "exact"])
def test_dual_other_methods(method):
    X, y = wide("logistic", n=30, p=80)
    kw = dict(loss="logistic", penalty=aloocv.L2(1.0), method=method, tol=1e-11)
    a = aloocv.loo(X, y, solver="primal", **kw)
    b = aloocv.loo(X, y, solver="dual", **kw)
    np.testing.assert_allclose(b.losses, a.losses, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("lam", [3.0, "vector"])
def test_wide_squared_alo_is_exact_loo(intercept, weighted, lam):
    X, y = wide("squared", n=30, p=100)
    lam = np.linspace(0.5, 5.0, 100) if lam == "vector" else lam
    w = np.random.default_rng(2).uniform(0.5, 2.0, 30) if weighted else None
    res = aloocv.loo(  # auto -> dual
        X, y, loss="squared", penalty=aloocv.L2(lam), fit_intercept=intercept, sample_weight=w
    )
    ref = ridge_exact_loo(X, y, lam, w, intercept)  # 30 closed-form refits
    np.testing.assert_allclose(res.predictions, ref, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(res.losses, 0.5 * (y - ref) ** 2, rtol=1e-9, atol=1e-12)


def test_auto_switch_and_sparse():
    X, y = wide("logistic")
    X[np.abs(X) < 1.0] = 0.0
    a = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0))  # dual (n < p)
    b = aloocv.loo(sp.csr_matrix(X), y, loss="logistic", penalty=aloocv.L2(1.0), solver="dual")
    c = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0), solver="primal")
    np.testing.assert_allclose(a.losses, b.losses, rtol=1e-9)
    np.testing.assert_allclose(a.losses, c.losses, rtol=1e-6)


@pytest.mark.parametrize("kind", ["C", "F", "sparse", "exact"])
def test_dual_threads_equal_serial(kind):
    X, y = wide("logistic", n=50, p=3000)  # two feature chunks in the kernel
    if kind == "F":
        X = np.asfortranarray(X)
    elif kind == "sparse":
        X[np.abs(X) < 1.0] = 0.0
        X = sp.csr_matrix(X)
    kw = dict(loss="logistic", penalty=aloocv.L2(1.0), solver="dual")
    kw["method"] = "exact" if kind == "exact" else "alo"
    a = aloocv.loo(X, y, n_jobs=1, **kw)
    b = aloocv.loo(X, y, n_jobs=2, **kw)
    np.testing.assert_array_equal(a.fit.coef_, b.fit.coef_)
    assert a.fit.intercept_ == b.fit.intercept_
    np.testing.assert_array_equal(a.predictions, b.predictions)
    np.testing.assert_array_equal(a.losses, b.losses)
    if kind != "exact":
        np.testing.assert_array_equal(a.leverages, b.leverages)


def test_dual_bad_input():
    X, y = wide("squared")
    with pytest.raises(ValueError, match="strictly positive penalty"):
        aloocv.loo(X, y, loss="squared", penalty=aloocv.L2(np.r_[0.0, np.ones(119)]), solver="dual")
    with pytest.raises(ValueError, match="unknown solver"):
        aloocv.fit(X, y, loss="squared", solver="cholesky")
    with pytest.raises(ValueError, match="needs an L2 penalty"):
        aloocv.fit(X, y, loss="squared", penalty=aloocv.ElasticNet(1.0, 1.0), solver="dual")
    with pytest.raises(ValueError, match="gradient='paper' is computed on the primal route"):
        aloocv.loo(X, y, loss="squared", return_gradient=True, gradient="paper", solver="dual")


def rbf(A, gamma=0.5):
    sq = np.sum(A**2, 1)
    return np.exp(-gamma * (sq[:, None] + sq[None, :] - 2 * A @ A.T))


@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_kernel_ridge_loo_equals_brute_force(intercept, weighted):
    rng = np.random.default_rng(131)
    A = rng.uniform(-2, 2, (40, 2))
    y = np.sin(A[:, 0]) + 0.1 * rng.standard_normal(40)
    w = rng.uniform(0.5, 2.0, 40) if weighted else np.ones(40)
    K = rbf(A)
    lam = 0.1

    def solve(k, y):
        """Kernel ridge on the samples `k`: f = K alpha + b minimizing
        sum w/2 (y - f)^2 + lam/2 alpha^T K alpha, i.e. (W K + lam I) alpha + W 1 b = W y,
        1^T W (K alpha + b - y) = 0."""
        m = int(k.sum())
        Wk = np.diag(w[k])
        Kk = K[np.ix_(k, k)]
        if not intercept:
            return np.linalg.solve(Wk @ Kk + lam * np.eye(m), w[k] * y[k]), 0.0
        M = np.block([[Wk @ Kk + lam * np.eye(m), w[k][:, None]], [w[k][None, :] @ Kk, w[k].sum()]])
        sol = np.linalg.solve(M, np.r_[w[k] * y[k], w[k] @ y[k]])
        return sol[:-1], sol[-1]

    res = aloocv.kernel_ridge_loo(K, y, lam, fit_intercept=intercept, sample_weight=w)
    pred = np.empty(40)
    for i in range(40):
        k = np.arange(40) != i
        alpha, b = solve(k, y)
        pred[i] = K[i, k] @ alpha + b
    np.testing.assert_allclose(res.predictions, pred, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(res.losses, 0.5 * (y - pred) ** 2, rtol=1e-8, atol=1e-12)
    # leverages: d f_hat_i / d (w_i y_i), the diagonal of the hat matrix over the weights
    everyone = np.ones(40, dtype=bool)
    alpha, b = solve(everyone, y)
    np.testing.assert_allclose(res.fit.coef_, alpha, rtol=1e-8, atol=1e-10)
    assert res.fit.intercept_ == pytest.approx(b, abs=1e-10)
    hat = np.empty(40)
    for i in range(40):
        e = np.zeros(40)
        e[i] = 1.0 / w[i]  # y + e_i / w_i moves w * y by the unit vector e_i
        a_i, b_i = solve(everyone, y + e)
        hat[i] = (K[i] @ a_i + b_i) - (K[i] @ alpha + b)
    np.testing.assert_allclose(res.leverages, hat, rtol=1e-7, atol=1e-10)


def test_kernel_ridge_matches_sklearn_fit():
    from sklearn.kernel_ridge import KernelRidge

    rng = np.random.default_rng(132)
    A = rng.uniform(-2, 2, (30, 3))
    y = A[:, 0] ** 2 + 0.1 * rng.standard_normal(30)
    K = rbf(A)
    res = aloocv.kernel_ridge_loo(K, y, 0.3)
    ref = KernelRidge(alpha=0.3, kernel="precomputed").fit(K, y)
    np.testing.assert_allclose(res.fit.coef_, ref.dual_coef_, rtol=1e-8)


@pytest.mark.parametrize(
    ("K", "y", "lam", "match"),
    [
        (np.ones((3, 4)), np.ones(3), 1.0, "square"),
        (np.array([[1.0, 0.5], [0.2, 1.0]]), np.ones(2), 1.0, "not symmetric"),
        (np.eye(3), np.ones(4), 1.0, "y has 4 entries"),
        (np.eye(3), np.ones(3), 0.0, "lam must be positive"),
        (np.eye(3), np.ones(3), -1.0, "lam must be positive"),
        (np.array([[np.nan, 0], [0, 1.0]]), np.ones(2), 1.0, "NaN"),
    ],
)
def test_kernel_bad_input(K, y, lam, match):
    with pytest.raises(ValueError, match=match):
        aloocv.kernel_ridge_loo(K, y, lam)
