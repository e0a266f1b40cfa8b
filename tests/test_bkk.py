"""The BKK criterion on the ridge family: values, gradients, permutations, estimator."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.linear_model import Ridge
from sklearn.utils.estimator_checks import check_estimator

import aloocv
from aloocv.bkk import BKKCriterion


def data(seed=150, n=60, p=20):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = X[:, :3] @ np.array([1.0, -1.0, 0.5]) + rng.standard_normal(n)
    y = (y - y.mean()) / np.sqrt(np.mean((y - y.mean()) ** 2))
    return X, y


def rms(v):
    return np.sqrt(np.mean(v**2))


def brute_bkk(X, y, lam, T, seed):
    """eq. 5 written directly: T + 1 ridge fits with an intercept (sklearn Ridge)."""
    rng = np.random.default_rng(seed)
    perms = [rng.permutation(len(y)) for _ in range(T)]
    r0 = rms(y - Ridge(alpha=lam).fit(X, y).predict(X))
    gaps = [abs(1 - rms(y[q] - Ridge(alpha=lam).fit(X, y[q]).predict(X))) for q in perms]
    return r0 + (np.mean(gaps) if T else 0.0)


@pytest.mark.parametrize("T", [0, 1, 7])
@pytest.mark.parametrize("lam", [0.1, 3.0, 100.0])
def test_criterion_value_matches_direct_computation(T, lam):
    X, y = data()
    crit = BKKCriterion.from_data(X, y, T=T, random_state=3)
    value, _ = crit.value_and_grad(np.log(lam))
    assert value == pytest.approx(brute_bkk(X, y, lam, T, 3), rel=1e-10)


def test_T0_is_the_empirical_risk():
    X, y = data()
    crit = BKKCriterion.from_data(X, y, T=0)
    value, _ = crit.value_and_grad(np.log(2.0))
    assert value == pytest.approx(rms(y - Ridge(alpha=2.0).fit(X, y).predict(X)), rel=1e-12)


@pytest.mark.parametrize("lam", [0.05, 1.0, 30.0])
def test_gradient_vs_finite_differences(lam):
    X, y = data()
    crit = BKKCriterion.from_data(X, y, T=10, random_state=1)
    u, h = np.log(lam), 1e-6
    _, g = crit.value_and_grad(u)
    fd = (crit.value_and_grad(u + h)[0] - crit.value_and_grad(u - h)[0]) / (2 * h)
    assert g == pytest.approx(fd, rel=1e-6, abs=1e-10)


def test_permutations_are_seeded():
    X, y = data()
    a = BKKCriterion.from_data(X, y, T=5, random_state=7)
    b = BKKCriterion.from_data(X, y, T=5, random_state=7)
    c = BKKCriterion.from_data(X, y, T=5, random_state=8)
    np.testing.assert_array_equal(a.C, b.C)
    assert not np.allclose(a.C, c.C)


def test_estimator_fits_ridge_at_the_selected_lambda():
    rng = np.random.default_rng(151)
    X = rng.standard_normal((100, 30))
    y = 3.0 + X[:, :4] @ np.array([2.0, -1.0, 1.0, 0.5]) * 2 + rng.standard_normal(100)
    m = aloocv.BKKRidge().fit(X, y)
    ref = Ridge(alpha=m.alpha_).fit(X, y)
    np.testing.assert_allclose(m.coef_, ref.coef_, rtol=1e-9, atol=1e-12)
    assert m.intercept_ == pytest.approx(ref.intercept_, rel=1e-9)
    assert m.n_iter_ <= 1000 and m.history_.shape[1] == 2
    assert m.score(X, y) > 0.5


def test_bad_input():
    X, y = data()
    with pytest.raises(ValueError, match="T must be a non-negative integer"):
        BKKCriterion.from_data(X, y, T=-1)
    with pytest.raises(ValueError, match="T must be a non-negative integer"):
        aloocv.BKKRidge(T=-2).fit(X, y)
    with pytest.raises(ValueError, match="lam0 must be positive"):
        aloocv.BKKRidge(lam0=0.0).fit(X, y)
    with pytest.raises(ValueError, match="learning_rate"):
        aloocv.BKKRidge(learning_rate=-1.0).fit(X, y)


def test_check_estimator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(aloocv.BKKRidge(), on_fail=None)
    failed = [
        (r["check_name"], str(r["exception"])[:200]) for r in results if r["status"] == "failed"
    ]
    assert failed == []


def sig(t):
    return 1 / (1 + np.exp(-t))


def brute_family_value(X, y, theta, family, T, seed):
    """BKK of Definitions 1-2 written directly from the paper, with sklearn Ridge."""
    lam, kappa = np.exp(theta[0]), np.exp(theta[1])
    gamma, mu = theta[2:-1], theta[-1]
    gc = gamma - gamma.mean()
    s = sig(kappa * (np.sum(gc**2) + 1e-2) * gc)
    rng = np.random.default_rng(seed)
    resp = [y] + [y[rng.permutation(len(y))] for _ in range(T)]
    norms = []
    for z in resp:
        bR = Ridge(alpha=lam).fit(X, z)
        mS = Ridge(alpha=lam).fit(X * s, z)
        predS = (X * s) @ mS.coef_ + mS.intercept_
        if family == "ridge":
            pred = bR.predict(X)
        elif family == "sparse":
            pred = predS
        else:
            pred = sig(mu) * bR.predict(X) + (1 - sig(mu)) * predS
        norms.append(rms(z - pred))
    return norms[0] + (np.mean([abs(1 - v) for v in norms[1:]]) if T else 0.0)


@pytest.mark.parametrize("family", ["ridge", "sparse", "interp"])
def test_family_criteria_values_and_gradients(family):
    from aloocv.bkk import BKKFamilyCriterion

    X, y = data(seed=152, n=50, p=8)
    crit = BKKFamilyCriterion.from_data(X, y, T=4, random_state=2, family=family)
    theta = crit.initial(2.0, 0.5, 0.4)
    theta[2:-1] = np.random.default_rng(0).standard_normal(8) * 0.7
    value, grad = crit.value_and_grad(theta)
    assert value == pytest.approx(brute_family_value(X, y, theta, family, 4, 2), rel=1e-9)
    h = 1e-6
    fd = np.array(
        [
            (crit.value_and_grad(theta + e)[0] - crit.value_and_grad(theta - e)[0]) / (2 * h)
            for e in np.eye(theta.size) * h
        ]
    )
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("cls", [aloocv.SBKKRegressor, aloocv.ABKKRegressor])
def test_family_estimators(cls):
    rng = np.random.default_rng(153)
    X = rng.standard_normal((100, 20))
    y = 1.0 + X[:, :3] @ np.array([3.0, -2.0, 1.5]) + rng.standard_normal(100)
    m = cls().fit(X, y)
    assert m.score(X, y) > 0.7
    assert m.n_iter_ >= 1 and np.all((m.scales_ > 0) & (m.scales_ <= 1))
    # the coefficients are the family's estimator at the returned parameters
    s = m.scales_
    ys = (y - y.mean()) / np.sqrt(np.mean((y - y.mean()) ** 2))
    bS = s * Ridge(alpha=m.alpha_).fit(X * s, ys).coef_ * np.sqrt(np.mean((y - y.mean()) ** 2))
    if cls is aloocv.SBKKRegressor:
        np.testing.assert_allclose(m.coef_, bS, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("cls", [aloocv.SBKKRegressor, aloocv.ABKKRegressor])
def test_family_check_estimator(cls):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(cls(max_iter=50), on_fail=None)
    failed = [
        (r["check_name"], str(r["exception"])[:200]) for r in results if r["status"] == "failed"
    ]
    assert failed == []
