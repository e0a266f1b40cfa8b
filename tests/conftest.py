"""Shared data generators and independent references (numpy / scikit-learn refits)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression, PoissonRegressor


def make_data(loss, n: int, p: int, seed: int = 0, scale: float = 1.0):
    """Synthetic, well-conditioned GLM data (loss: a registered name or loss object)."""
    loss = str(loss)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = rng.standard_normal(p) * scale / np.sqrt(p)
    eta = X @ beta + 0.3
    if loss == "squared":
        y = eta + 0.5 * rng.standard_normal(n)
    elif loss == "logistic":
        y = (rng.random(n) < 1.0 / (1.0 + np.exp(-2 * eta))).astype(np.float64)
    elif loss == "poisson":
        y = rng.poisson(np.exp(0.5 * eta)).astype(np.float64)
    elif loss == "gamma":  # shape 3, mean exp(0.5 eta)
        y = rng.gamma(3.0, np.exp(0.5 * eta) / 3.0)
    elif loss == "tweedie":  # compound Poisson-gamma: y >= 0 with exact zeros
        mu = np.exp(0.5 * eta)
        counts = rng.poisson(mu)
        y = np.array([rng.gamma(2.0, 0.5, k).sum() for k in counts]) + 0.0
    elif loss == "binomial":  # proportions of up to 10 trials
        y = rng.binomial(10, 1.0 / (1.0 + np.exp(-eta))) / 10.0
    elif loss == "huber":  # Gaussian noise with 10% gross outliers
        y = eta + 0.5 * rng.standard_normal(n)
        out = rng.random(n) < 0.1
        y[out] += 8.0 * rng.standard_normal(out.sum())
    else:  # pragma: no cover
        raise ValueError(loss)
    return X, y


def ridge_solve(X, y, lam, w=None, intercept=True):
    """Closed-form weighted ridge with an unpenalized intercept: (b, theta)."""
    n, p = X.shape
    Xt = np.hstack([np.ones((n, 1)), X]) if intercept else X
    w = np.ones(n) if w is None else w
    pen = np.broadcast_to(np.asarray(lam, dtype=float), (p,))
    P = np.diag(np.concatenate([[0.0], pen]) if intercept else pen)
    return np.linalg.solve(Xt.T @ (Xt * w[:, None]) + P, Xt.T @ (w * y))


def ridge_exact_loo(X, y, lam, w=None, intercept=True):
    """Brute-force leave-one-out predictions of weighted ridge: n closed-form refits."""
    n = X.shape[0]
    w = np.ones(n) if w is None else w
    eta = np.empty(n)
    for i in range(n):
        keep = np.arange(n) != i
        beta = ridge_solve(X[keep], y[keep], lam, w[keep], intercept)
        eta[i] = (beta[0] + X[i] @ beta[1:]) if intercept else X[i] @ beta
    return eta


def sklearn_glm(loss: str, X, y, lam: float, sample_weight=None):
    """scikit-learn fit of the same objective (sum of losses + lam/2 ||theta||^2)."""
    n = X.shape[0]
    if loss == "logistic":
        m = LogisticRegression(C=1.0 / lam, tol=1e-12, max_iter=1000, solver="newton-cholesky")
    elif loss == "poisson":
        sw = n if sample_weight is None else float(np.sum(sample_weight))
        m = PoissonRegressor(alpha=lam / sw, tol=1e-12, max_iter=1000, solver="newton-cholesky")
    else:  # pragma: no cover
        raise ValueError(loss)
    m.fit(X, y, sample_weight=sample_weight)
    coef = np.ravel(m.coef_)
    return coef, float(np.ravel(m.intercept_)[0])


def sklearn_exact_loo(loss: str, X, y, lam: float):
    """Brute-force leave-one-out linear predictors by n scikit-learn refits."""
    n = X.shape[0]
    eta = np.empty(n)
    for i in range(n):
        keep = np.arange(n) != i
        coef, b = sklearn_glm(loss, X[keep], y[keep], lam)
        eta[i] = X[i] @ coef + b
    return eta


def loss_value(loss: str, y, eta):
    """Per-sample losses written independently of the core."""
    if loss == "squared":
        return 0.5 * (y - eta) ** 2
    if loss == "logistic":
        return np.logaddexp(0.0, eta) - y * eta
    from scipy.special import gammaln

    return np.exp(eta) - y * eta + gammaln(y + 1.0)


@pytest.fixture(params=["squared", "logistic", "poisson"])
def loss(request):
    return request.param


# ----------------------------------------------------------------------------- dask
def nbytes_of(v) -> int:
    """Bytes of the arrays in a nested dict / list / tuple (8 per other leaf): what a
    dask task hands back to the client."""
    if isinstance(v, np.ndarray):
        return v.nbytes
    if isinstance(v, dict):
        return sum(nbytes_of(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return sum(nbytes_of(x) for x in v)
    return 8


@pytest.fixture
def computed_bytes(monkeypatch) -> list:
    """The bytes that each ``dask.compute`` call of the test hands back to the client, in
    call order (a list filled as the test runs)."""
    import dask
    import dask.base

    seen: list = []
    real = dask.base.compute

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        seen.append(nbytes_of(list(out)))
        return out

    monkeypatch.setattr(dask.base, "compute", spy)
    monkeypatch.setattr(dask, "compute", spy)
    return seen


@pytest.fixture(scope="module")
def client():
    """A two-process local dask.distributed cluster for a test module."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
    )
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture
def sync():
    """dask's synchronous scheduler for the duration of a test."""
    dask = pytest.importorskip("dask")
    with dask.config.set(scheduler="synchronous"):
        yield
