"""ALO including its fit: the fit ends on the Hessian at the returned coefficients, at
the cost of at most one Hessian pass more than the plain fit; the counts are exposed as
``FitResult.hessian_passes_`` (issue 13, item 1)."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import aloocv


def _logistic(n: int, p: int, scale: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = rng.standard_normal(p) / np.sqrt(p) * scale
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-X @ beta))).astype(np.float64)
    return X, y


def _poisson(n: int, p: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = rng.poisson(np.exp(0.3 * X @ rng.standard_normal(p) / np.sqrt(p))).astype(np.float64)
    return X, y


CASES = [
    ("logistic", 1.0, 2.0, 0),
    ("logistic", 0.1, 4.0, 1),
    ("logistic", 10.0, 1.0, 2),
    ("poisson", 1.0, 0.0, 3),
]


def _data(loss: str, scale: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    return _poisson(400, 20, seed) if loss == "poisson" else _logistic(400, 20, scale, seed)


@pytest.mark.parametrize(("loss", "lam", "scale", "seed"), CASES)
def test_alo_factor_is_the_hessian_at_the_returned_beta(loss, lam, scale, seed):
    X, y = _data(loss, scale, seed)
    pen = aloocv.L2(lam)
    r = aloocv.loo(X, y, loss=loss, penalty=pen, n_jobs=1)
    # reference: the Hessian at the returned coefficients, formed in numpy, and the ALO
    # leave-one-out predictors from it
    b = r.fit.coef_
    eta = X @ b + r.fit.intercept_
    with threadpool_limits(1):
        if loss == "poisson":
            mu = np.exp(eta)
            g, d = mu - y, mu
        else:
            mu = 1.0 / (1.0 + np.exp(-eta))
            g, d = mu - y, mu * (1.0 - mu)
        Xt = np.hstack([np.ones((X.shape[0], 1)), X])
        H = Xt.T @ (Xt * d[:, None]) + np.diag(np.r_[0.0, np.full(X.shape[1], lam)])
        h = np.einsum("ij,ij->i", Xt, np.linalg.solve(H, Xt.T).T)
    np.testing.assert_allclose(r.leverages, h, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(r.predictions, eta + g * h / (1.0 - d * h), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("loss", "lam", "scale", "seed"), CASES)
def test_alo_fit_takes_at_most_one_hessian_pass_more_than_the_fit(loss, lam, scale, seed):
    X, y = _data(loss, scale, seed)
    pen = aloocv.L2(lam)
    f = aloocv.fit(X, y, loss=loss, penalty=pen, n_jobs=1)
    r = aloocv.loo(X, y, loss=loss, penalty=pen, n_jobs=1)
    assert f.hessian_passes_ == f.n_iter_  # a plain fit: one Hessian per Newton step
    assert 1 <= r.fit.hessian_passes_ <= f.hessian_passes_ + 1
    # the optimum (the ALO fit is converged to 0.01 tol; the reference far below)
    ref = aloocv.fit(X, y, loss=loss, penalty=pen, tol=1e-13, n_jobs=1)
    np.testing.assert_allclose(r.fit.coef_, ref.coef_, rtol=0, atol=1e-8)
