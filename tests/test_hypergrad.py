"""The ALO hypergradient (Lemma 4, eq. 14-16) against finite differences."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import aloocv
from conftest import make_data, ridge_exact_loo


def exact_ridge_cv(X, y, lam):
    eta = ridge_exact_loo(X, y, lam)
    return np.mean(0.5 * (y - eta) ** 2)


def fd_params(f, params, rel=1e-5):
    """Central differences of f in each parameter (relative steps)."""
    g = np.empty_like(params)
    for k in range(params.size):
        e = np.zeros_like(params)
        e[k] = rel * params[k]
        g[k] = (f(params + e) - f(params - e)) / (2 * e[k])
    return g


@pytest.mark.parametrize("lam", [0.5, 20.0, np.array([0.1, 1.0, 10.0, 100.0, 3.0])])
def test_squared_gradient_is_exact_derivative_of_exact_loo(lam):
    # squared loss + L2: ALO is exact LOO and the hypergradient its exact derivative
    X, y = make_data("squared", 40, 5, seed=80)
    pen = aloocv.L2(lam)
    res = aloocv.loo(X, y, loss="squared", penalty=pen, return_gradient=True)
    ref = fd_params(lambda v: exact_ridge_cv(X, y, pen.with_params(v).lam), pen.params())
    np.testing.assert_allclose(res.gradient, ref, rtol=1e-5, atol=1e-12)
    assert res.mean == pytest.approx(exact_ridge_cv(X, y, lam), rel=1e-10)


def test_squared_elastic_net_gradient():
    # on a fixed support the lasso path is smooth: ACV's derivative in (l1, l2)
    rng = np.random.default_rng(81)
    X = rng.standard_normal((60, 8))
    y = X[:, :3] @ np.array([3.0, -2.0, 1.5]) + rng.standard_normal(60)
    pen = aloocv.ElasticNet(5.0, 2.0)

    def acv(v):
        return aloocv.loo(X, y, loss="squared", penalty=pen.with_params(v), tol=1e-13).mean

    res = aloocv.loo(X, y, loss="squared", penalty=pen, return_gradient=True, tol=1e-13)
    np.testing.assert_allclose(res.gradient, fd_params(acv, pen.params()), rtol=1e-5)


# Non-quadratic losses: the hypergradient differentiates the exact LOO with H_{-i}
# evaluated at the ALO point to first order (see hypergrad.hpp), and ACV itself
# approximates exact LOO; both errors are O(1/n) relative to the per-sample terms.
# With n >= 20 p we require agreement with finite differences of ACV to 10% of each
# component plus 5% of the largest component (components near zero).


def _check(g, ref):
    tol = 0.10 * np.abs(ref) + 0.05 * np.max(np.abs(ref))
    assert np.all(np.abs(g - ref) <= tol), (g, ref)


@pytest.mark.parametrize("loss", ["logistic", "poisson"])
@pytest.mark.parametrize(
    "pen",
    [aloocv.L2(2.0), aloocv.L2(np.array([0.5, 1.0, 2.0, 4.0, 8.0])), aloocv.ElasticNet(3.0, 1.0)],
    ids=["scalar", "vector", "enet"],
)
def test_glm_gradient_vs_finite_differences_of_acv(loss, pen):
    X, y = make_data(loss, 200, 5, seed=82, scale=2.0)

    def acv(v):
        return aloocv.loo(X, y, loss=loss, penalty=pen.with_params(v), tol=1e-13).mean

    res = aloocv.loo(X, y, loss=loss, penalty=pen, return_gradient=True, tol=1e-13)
    _check(res.gradient, fd_params(acv, pen.params(), rel=1e-4))


@pytest.mark.parametrize("lam", [3.0, 10.0])
def test_logistic_gradient_tracks_exact_loo_derivative(lam):
    # away from the CV minimum (near it the gradient is ~0 and only absolute errors
    # of the order of ACV's own error in slope, ~1e-4 here, can be asked for)
    X, y = make_data("logistic", 150, 5, seed=83, scale=2.0)
    pen = aloocv.L2(lam)

    def exact(v):
        return aloocv.loo(
            X, y, loss="logistic", penalty=pen.with_params(v), method="exact", tol=1e-13
        ).mean

    res = aloocv.loo(X, y, loss="logistic", penalty=pen, return_gradient=True, tol=1e-13)
    _check(res.gradient, fd_params(exact, pen.params(), rel=1e-4))


def test_gradient_alongside_alo_values():
    X, y = make_data("logistic", 300, 6, seed=84)
    a = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0), return_gradient=True)
    b = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0))
    np.testing.assert_allclose(a.losses, b.losses, rtol=1e-13)
    np.testing.assert_allclose(a.leverages, b.leverages, rtol=1e-12)
    assert b.gradient is None


def test_gradient_threads_sparse_and_layouts():
    X, y = make_data("poisson", 3000, 8, seed=85)
    X[np.abs(X) < 0.8] = 0.0
    kw = dict(loss="poisson", penalty=aloocv.L2(np.linspace(1, 3, 8)), return_gradient=True)
    one = aloocv.loo(X, y, n_jobs=1, **kw)
    two = aloocv.loo(X, y, n_jobs=2, **kw)
    np.testing.assert_array_equal(one.gradient, two.gradient)
    s = aloocv.loo(sp.csr_matrix(X), y, **kw)
    f = aloocv.loo(np.asfortranarray(X), y, **kw)
    np.testing.assert_allclose(s.gradient, one.gradient, rtol=1e-9)
    np.testing.assert_allclose(f.gradient, one.gradient, rtol=1e-9)


def test_gradient_needs_alo():
    X, y = make_data("logistic", 50, 3, seed=86)
    with pytest.raises(ValueError, match="return_gradient=True needs method='alo'"):
        aloocv.loo(X, y, method="exact", return_gradient=True)
