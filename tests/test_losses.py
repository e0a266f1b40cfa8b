"""The per-sample losses of the core: values, derivatives, stability at extremes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aloocv import _core
from conftest import loss_value


def _y_for(loss, m, rng):
    if loss == "logistic":
        return rng.integers(0, 2, m).astype(float)
    if loss == "poisson":
        return rng.poisson(2.0, m).astype(float)
    return rng.standard_normal(m)


def test_loss_registry():
    assert set(_core.loss_names()) == {"squared", "logistic", "poisson"}


def test_values_match_independent_formulas(loss):
    rng = np.random.default_rng(1)
    y = _y_for(loss, 50, rng)
    eta = rng.uniform(-5, 5, 50)
    v, _, _ = _core.loss_eval(loss, y, eta)
    np.testing.assert_allclose(v, loss_value(loss, y, eta), rtol=1e-13, atol=1e-13)


def test_derivatives_match_finite_differences(loss):
    rng = np.random.default_rng(2)
    y = _y_for(loss, 40, rng)
    eta = rng.uniform(-4, 4, 40)
    h = 1e-5
    _v, d1, d2 = _core.loss_eval(loss, y, eta)
    vp, d1p, _ = _core.loss_eval(loss, y, eta + h)
    vm, d1m, _ = _core.loss_eval(loss, y, eta - h)
    # central differences: truncation O(h^2) ~ 1e-10, rounding ~ eps/h ~ 1e-11
    np.testing.assert_allclose(d1, (vp - vm) / (2 * h), rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(d2, (d1p - d1m) / (2 * h), rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("eta", [-1e4, -800.0, -40.0, 40.0, 800.0, 1e4])
def test_logistic_is_stable_at_extreme_predictors(eta):
    y = np.array([0.0, 1.0])
    e = np.full(2, eta)
    v, d1, d2 = _core.loss_eval("logistic", y, e)
    assert np.all(np.isfinite(v)) and np.all(np.isfinite(d1)) and np.all(np.isfinite(d2))
    # log(1 + e^eta) - y eta: the "wrong" label costs |eta|, the right one ~ 0
    wrong = 0 if eta > 0 else 1
    assert v[wrong] == pytest.approx(abs(eta), rel=1e-12)
    assert 0.0 <= v[1 - wrong] < 1e-15 + 1e-16 * abs(eta)
    assert np.all((d2 >= 0) & (d2 <= 0.25))


def test_poisson_large_negative_predictor_is_finite():
    v, d1, d2 = _core.loss_eval("poisson", np.array([0.0, 3.0]), np.array([-700.0, -700.0]))
    assert np.all(np.isfinite(v)) and np.all(np.isfinite(d1)) and np.all(d2 >= 0)


@settings(max_examples=60, deadline=None)
@given(
    eta=st.floats(-30, 30, allow_nan=False),
    y=st.sampled_from([0.0, 1.0]),
)
def test_logistic_convex_and_consistent(eta, y):
    v, d1, d2 = _core.loss_eval("logistic", np.array([y]), np.array([eta]))
    s = 1.0 / (1.0 + np.exp(-eta))
    assert v[0] >= 0
    assert d1[0] == pytest.approx(s - y, abs=1e-15)
    # s (1 - s) = 1 / ((1 + e^-eta)(1 + e^eta)), free of the cancellation in 1 - s
    assert d2[0] == pytest.approx(1.0 / ((1 + np.exp(-eta)) * (1 + np.exp(eta))), rel=1e-12)
