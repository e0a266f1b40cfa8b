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
