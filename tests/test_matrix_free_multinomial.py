"""The multinomial loss on the matrix-free route (docs/math/matrix_free.md, "The
multinomial loss"): Newton-CG fits against the primal multinomial route and an
independent optimizer, randomized leverage blocks against the primal route's exact blocks,
the route's choice under a memory budget, and a grid search of ALOLogisticRegressionCV."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize

from aloocv import _core
from aloocv._validation import core_design
from aloocv.losses import cross_entropy


def _data(n=240, p=30, K=4, seed=0, density=None):
    rng = np.random.default_rng(seed)
    if density is None:
        X = rng.standard_normal((n, p))
    else:
        X = sp.random(n, p, density=density, random_state=seed, format="csr")
        X.data = rng.standard_normal(X.nnz)
    W = rng.standard_normal((p, K)) * 0.6
    eta = np.asarray(X @ W) + rng.standard_normal(K) * 0.3
    prob = np.exp(eta - eta.max(axis=1, keepdims=True))
    prob /= prob.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(K, p=q) for q in prob])
    return X, y


@pytest.mark.parametrize("case", ["dense", "csr", "float32", "weights", "no_intercept"])
def test_core_fit_equals_primal(case):
    X, y = _data(density=0.3 if case == "csr" else None)
    if case == "float32":
        X = X.astype(np.float32)
    w = np.random.default_rng(1).uniform(0.2, 3.0, y.size) if case == "weights" else None
    kw = dict(fit_intercept=case != "no_intercept", tol=1e-10, max_iter=100, n_threads=1)
    args = (core_design(X), y.astype(float), w, 4, np.full(X.shape[1], 2.0))
    a = _core.multinomial_fit(*args, **kw)
    b = _core.multinomial_cg_fit(*args, **kw)
    assert b.converged and b.grad_norm <= 1e-10
    np.testing.assert_allclose(b.coef, a.coef, atol=1e-7)
    np.testing.assert_allclose(b.intercept, a.intercept, atol=1e-7)


def test_fit_offset_against_lbfgs():
    """The core's offset (n K scores added to X~ B), against scipy's L-BFGS on the same
    objective (the multinomial API has no offset= yet: the core is tested directly)."""
    X, y = _data(n=150, p=8, K=3)
    n, p, K = X.shape[0], X.shape[1], 3
    off = np.random.default_rng(2).standard_normal((n, K))
    lam = np.full(p, 1.5)
    out = _core.multinomial_cg_fit(
        X, y.astype(float), None, K, lam, fit_intercept=True, tol=1e-11, max_iter=100,
        n_threads=1, offset=np.ascontiguousarray(off.ravel()),
    )  # fmt: skip
    assert out.converged

    def f(v):
        B = v.reshape(K, p + 1)
        eta = X @ B[:, 1:].T + B[:, 0] + off
        return cross_entropy(eta, y).sum() + 0.5 * np.sum(lam * B[:, 1:] ** 2)

    ref = minimize(f, np.zeros(K * (p + 1)), method="L-BFGS-B", options={"gtol": 1e-12})
    B = ref.x.reshape(K, p + 1)
    np.testing.assert_allclose(out.coef, B[:, 1:], atol=1e-4)
    # the intercepts up to the gauge (a constant added to every class)
    b = B[:, 0] - B[:, 0].mean()
    np.testing.assert_allclose(out.intercept, b, atol=1e-4)
    assert abs(out.intercept.sum()) < 1e-8
