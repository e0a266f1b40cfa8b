"""The per-sample losses of the core: values, derivatives, stability at extremes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aloocv
from aloocv import _core
from conftest import loss_value


def _y_for(loss, m, rng):
    if loss == "logistic":
        return rng.integers(0, 2, m).astype(float)
    if loss == "poisson":
        return rng.poisson(2.0, m).astype(float)
    return rng.standard_normal(m)


def test_loss_registry():
    expected = {"squared", "logistic", "poisson", "gamma", "tweedie", "binomial", "huber"}
    assert set(_core.loss_names()) == expected
    # one Python registry entry per C++ struct, plus the multinomial loss (K outputs per
    # sample, its own core routines)
    scalar = [n for n in aloocv.losses.names() if not aloocv.losses.get_loss(n).vector_valued]
    assert sorted(scalar) == sorted(_core.loss_names())
    assert set(aloocv.losses.names()) - set(scalar) == {"multinomial"}


def test_multinomial_is_a_registered_loss():
    """The multinomial loss is a Loss object like the others: named by its string, K
    outputs, cross-entropy values and softmax means against numpy written out here."""
    rng = np.random.default_rng(3)
    loss = aloocv.losses.get_loss("multinomial")
    assert isinstance(loss, aloocv.Multinomial) and loss == "multinomial"
    assert loss.n_outputs == 0 and aloocv.Multinomial(4).n_outputs == 4
    assert aloocv.Multinomial(4) == aloocv.Multinomial(3) == "multinomial"
    eta = rng.standard_normal((7, 4)) * 3
    y = rng.integers(0, 4, 7)
    p = np.exp(eta) / np.exp(eta).sum(axis=1, keepdims=True)
    ref = np.log(np.exp(eta).sum(axis=1)) - eta[np.arange(7), y]
    np.testing.assert_allclose(loss.value(y, eta), ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(loss.mean(eta), p, rtol=1e-13)
    with pytest.raises(ValueError, match=r"y\[1\] = 1.5"):
        loss.check_y(np.array([0.0, 1.5]))
    with pytest.raises(TypeError, match="vector derivatives"):
        loss.derivatives(y, eta)
    # the verbs take the object as they take the name
    X = rng.standard_normal((60, 3))
    yk = rng.integers(0, 3, 60)
    a = aloocv.fit(X, yk, loss="multinomial", penalty=aloocv.L2(1.0))
    b = aloocv.fit(X, yk, loss=aloocv.Multinomial(), penalty=aloocv.L2(1.0))
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.loss.n_classes == 3


def _family_y(name, m, rng):
    if name in ("gamma",) or (name == "tweedie>2"):
        return rng.gamma(2.0, 1.0, m)
    if name == "tweedie<2":
        y = rng.gamma(2.0, 1.0, m)
        y[: m // 4] = 0.0
        return y
    if name == "binomial":
        return rng.random(m)
    return 2.0 * rng.standard_normal(m)


FAMILIES = {
    "gamma": "gamma",
    "tweedie<2": aloocv.Tweedie(power=1.5),
    "tweedie>2": aloocv.Tweedie(power=2.6),
    "tweedie=1": aloocv.Tweedie(power=1.0),
    "tweedie=2": aloocv.Tweedie(power=2.0),
    "binomial": "binomial",
    "huber": aloocv.Huber(delta=0.7),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_derivatives_1_to_4_match_finite_differences(family):
    """Each derivative is the central difference of the one below it (and l' of l)."""
    rng = np.random.default_rng(5)
    loss = aloocv.losses.get_loss(FAMILIES[family])
    data = {"tweedie=1": "tweedie<2", "tweedie=2": "tweedie>2"}.get(family, family)
    y = _family_y(data, 60, rng)
    eta = rng.uniform(-2, 2, 60)
    if family == "huber":  # stay off the kinks |y - eta| = delta
        r = y - eta
        eta = np.where(np.abs(np.abs(r) - loss.delta) < 1e-3, eta + 1e-2, eta)
    h = 1e-5
    d = loss.derivatives(y, eta)
    dp = loss.derivatives(y, eta + h)
    dm = loss.derivatives(y, eta - h)
    for k in range(1, 5):
        fd = (dp[k - 1] - dm[k - 1]) / (2 * h)
        np.testing.assert_allclose(d[k], fd, rtol=1e-6, atol=1e-7, err_msg=f"d{k}")


def test_new_family_values_match_independent_formulas():
    rng = np.random.default_rng(6)
    eta = rng.uniform(-2, 2, 40)
    mu = np.exp(eta)
    y = rng.gamma(2.0, 1.0, 40)
    G = aloocv.losses.get_loss("gamma")
    np.testing.assert_allclose(G.value(y, eta), y / mu - np.log(y / mu) - 1.0, rtol=1e-12)
    for p in (1.5, 2.6):
        T = aloocv.Tweedie(power=p)
        ref = (
            y ** (2 - p) / ((1 - p) * (2 - p))
            - y * mu ** (1 - p) / (1 - p)
            + mu ** (2 - p) / (2 - p)
        )
        np.testing.assert_allclose(T.value(y, eta), ref, rtol=1e-10, atol=1e-12)
    # power 1 and 2: the Poisson and gamma half deviances
    np.testing.assert_allclose(
        aloocv.Tweedie(power=1.0).value(y, eta), y * np.log(y / mu) - y + mu, rtol=1e-10, atol=1e-12
    )
    np.testing.assert_allclose(aloocv.Tweedie(power=2.0).value(y, eta), G.value(y, eta), rtol=1e-12)
    q = rng.random(40)
    np.testing.assert_allclose(
        aloocv.losses.get_loss("binomial").value(q, eta), np.logaddexp(0, eta) - q * eta, rtol=1e-12
    )
    r = y - eta
    H = aloocv.Huber(delta=0.7)
    ref = np.where(np.abs(r) <= 0.7, 0.5 * r**2, 0.7 * (np.abs(r) - 0.35))
    np.testing.assert_allclose(H.value(y, eta), ref, rtol=1e-12)
    # inverse links
    np.testing.assert_allclose(G.mean(eta), mu)
    np.testing.assert_allclose(aloocv.losses.get_loss("binomial").mean(eta), 1 / (1 + np.exp(-eta)))
    np.testing.assert_allclose(H.mean(eta), eta)


def test_loss_objects_and_names():
    assert aloocv.losses.get_loss("gamma") == "gamma"
    assert aloocv.Tweedie(power=1.5) == aloocv.Tweedie(power=1.5)
    assert aloocv.Tweedie(power=1.5) != aloocv.Tweedie(power=1.2)
    assert aloocv.Tweedie(power=1.5) != "tweedie"
    assert aloocv.losses.get_loss("tweedie").power == aloocv.losses.DEFAULT_TWEEDIE_POWER
    with pytest.raises(ValueError, match="power must be >= 1"):
        aloocv.Tweedie(power=0.5)
    with pytest.raises(ValueError, match="delta must be > 0"):
        aloocv.Huber(delta=0.0)
    with pytest.raises(TypeError, match="power must be a real"):
        aloocv.Tweedie(power="1.5")
    with pytest.raises(ValueError, match="unknown loss 'gama'"):
        aloocv.losses.get_loss("gama")
    with pytest.raises(TypeError, match="loss must be"):
        aloocv.losses.get_loss(3)


def test_values_match_independent_formulas(loss):
    rng = np.random.default_rng(1)
    y = _y_for(loss, 50, rng)
    eta = rng.uniform(-5, 5, 50)
    v = _core.loss_eval(loss, y, eta)[0]
    np.testing.assert_allclose(v, loss_value(loss, y, eta), rtol=1e-13, atol=1e-13)


def test_poisson_log_factorial_table_matches_gammaln():
    # log(y!) of the Poisson loss comes from a table for integer y below 256 and from
    # lgamma elsewhere: both sides of the boundary, fractions, 0 and large counts.
    from scipy.special import gammaln

    y = np.r_[np.arange(0.0, 260.0), 254.5, 255.5, 256.0 - 1e-13, 0.25, 1e-300, 1e6, 3.5e7]
    eta = np.linspace(-2.0, 2.0, y.size)
    v = _core.loss_eval("poisson", y, eta)[0]
    ref = np.exp(eta) - y * eta + gammaln(y + 1.0)
    np.testing.assert_allclose(v, ref, rtol=1e-14, atol=1e-13)
    # the fused evaluation of the Newton steps reads the same table
    np.testing.assert_array_equal(_core.loss_eval("poisson", y, eta, fused=True)[0], v)


def test_derivatives_match_finite_differences(loss):
    rng = np.random.default_rng(2)
    y = _y_for(loss, 40, rng)
    eta = rng.uniform(-4, 4, 40)
    h = 1e-5
    _v, d1, d2 = _core.loss_eval(loss, y, eta)[:3]
    vp, d1p = _core.loss_eval(loss, y, eta + h)[:2]
    vm, d1m = _core.loss_eval(loss, y, eta - h)[:2]
    # central differences: truncation O(h^2) ~ 1e-10, rounding ~ eps/h ~ 1e-11
    np.testing.assert_allclose(d1, (vp - vm) / (2 * h), rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(d2, (d1p - d1m) / (2 * h), rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize(
    "name", ["squared", "logistic", "poisson", "gamma", "binomial", "huber", "tweedie"]
)
def test_selected_derivatives_are_loss_evals_outputs(name):
    # Loss.derivatives(orders=...) (the core's loss_derivatives) gives the arrays of
    # loss_eval for the orders asked, in the order asked, bit for bit, in eta's shape
    loss = aloocv.losses.get_loss(name)
    rng = np.random.default_rng(3)
    y = {
        "gamma": rng.gamma(2.0, 1.0, 60),
        "binomial": rng.integers(0, 11, 60) / 10.0,
        "tweedie": rng.poisson(1.0, 60) * rng.gamma(2.0, 0.5, 60),
    }.get(name, _y_for(name, 60, rng))
    eta = rng.uniform(-3, 3, 60)
    ref = _core.loss_eval(loss.core, y, eta)[:5]
    assert all(np.all(np.isfinite(r)) for r in ref)
    for orders in [(0, 1, 2, 3, 4), (2, 3), (1,), (3, 0), (4, 4)]:
        got = loss.derivatives(y, eta, orders)
        assert len(got) == len(orders)
        for k, a in zip(orders, got):
            np.testing.assert_array_equal(a, ref[k])
    got = loss.derivatives(np.tile(y[:, None], (1, 2)), np.c_[eta, eta], (1,))[0]
    assert got.shape == (60, 2)
    np.testing.assert_array_equal(got[:, 1], ref[1])
    with pytest.raises(ValueError, match="0 \\(the value\\) to 4, got 5"):
        loss.derivatives(y, eta, (1, 5))


@pytest.mark.parametrize("eta", [-1e4, -800.0, -40.0, 40.0, 800.0, 1e4])
def test_logistic_is_stable_at_extreme_predictors(eta):
    y = np.array([0.0, 1.0])
    e = np.full(2, eta)
    v, d1, d2 = _core.loss_eval("logistic", y, e)[:3]
    assert np.all(np.isfinite(v)) and np.all(np.isfinite(d1)) and np.all(np.isfinite(d2))
    # log(1 + e^eta) - y eta: the "wrong" label costs |eta|, the right one ~ 0
    wrong = 0 if eta > 0 else 1
    assert v[wrong] == pytest.approx(abs(eta), rel=1e-12)
    assert 0.0 <= v[1 - wrong] < 1e-15 + 1e-16 * abs(eta)
    assert np.all((d2 >= 0) & (d2 <= 0.25))


def test_poisson_large_negative_predictor_is_finite():
    v, d1, d2 = _core.loss_eval("poisson", np.array([0.0, 3.0]), np.array([-700.0, -700.0]))[:3]
    assert np.all(np.isfinite(v)) and np.all(np.isfinite(d1)) and np.all(d2 >= 0)


@settings(max_examples=60, deadline=None)
@given(
    eta=st.floats(-30, 30, allow_nan=False),
    y=st.sampled_from([0.0, 1.0]),
)
def test_logistic_convex_and_consistent(eta, y):
    v, d1, d2 = _core.loss_eval("logistic", np.array([y]), np.array([eta]))[:3]
    s = 1.0 / (1.0 + np.exp(-eta))
    assert v[0] >= 0
    assert d1[0] == pytest.approx(s - y, abs=1e-15)
    # s (1 - s) = 1 / ((1 + e^-eta)(1 + e^eta)), free of the cancellation in 1 - s
    assert d2[0] == pytest.approx(1.0 / ((1 + np.exp(-eta)) * (1 + np.exp(eta))), rel=1e-12)


@pytest.mark.parametrize("name", _core.loss_names())
def test_python_registry_mirrors_the_core(name):
    """Each registry entry's inverse link equals the C++ struct's mean, and its domain
    check is the core's."""
    loss = aloocv.losses.get_loss(name)
    assert loss.name == name
    eta = np.linspace(-3, 3, 13)
    y = np.full(13, 0.5)
    core_mean = _core.loss_eval(loss.core, y, eta)[5]
    np.testing.assert_allclose(loss.mean(eta), core_mean, rtol=1e-14)
    with pytest.raises(ValueError, match=f"outside the domain of the {name} loss"):
        loss.check_y(np.array([0.5, np.inf]))


def _fused_case(name, rng, m):
    """(loss, y, reference l', reference l'' as functions of eta) for the fused test."""
    zeros = rng.gamma(2.0, 1.0, m)
    zeros[: m // 4] = 0.0
    positive = rng.gamma(2.0, 1.0, m)

    def tweedie(p, y):
        def d12(eta):
            a, b = 1.0 - p, 2.0 - p
            ya = y * np.exp(a * eta)
            return -ya + np.exp(b * eta), -a * ya + b * np.exp(b * eta)

        return aloocv.Tweedie(power=p), y, d12

    def sig(eta):
        return 0.5 * (1.0 + np.tanh(0.5 * eta))

    if name == "logistic":
        y = rng.integers(0, 2, m).astype(float)
        return "logistic", y, lambda e: (sig(e) - y, sig(e) * sig(-e))
    if name == "binomial":
        y = rng.random(m)
        return "binomial", y, lambda e: (sig(e) - y, sig(e) * sig(-e))
    if name == "poisson":
        y = zeros
        return "poisson", y, lambda e: (np.exp(e) - y, np.exp(e))
    if name == "gamma":
        y = positive
        return "gamma", y, lambda e: (1.0 - y * np.exp(-e), y * np.exp(-e))
    if name == "squared":
        y = rng.standard_normal(m)
        return "squared", y, lambda e: (e - y, np.ones_like(e))
    if name == "huber":
        y = 2.0 * rng.standard_normal(m)
        return (
            aloocv.Huber(delta=0.7),
            y,
            lambda e: (np.clip(e - y, -0.7, 0.7), (np.abs(y - e) <= 0.7).astype(float)),
        )
    p = {"tweedie<2": 1.5, "tweedie>2": 2.6, "tweedie=1": 1.0, "tweedie=2": 2.0}[name]
    return tweedie(p, zeros if p < 2.0 else positive)


FUSED = [
    "logistic",
    "binomial",
    "poisson",
    "gamma",
    "squared",
    "huber",
    "tweedie<2",
    "tweedie>2",
    "tweedie=1",
    "tweedie=2",
]


@pytest.mark.parametrize("name", FUSED)
def test_fused_evaluation_equals_the_separate_functions_bitwise(name):
    # Newton steps evaluate value, l' and l'' of a row at once (Loss::eval: one exp); the
    # results must be the separate functions' bit for bit (fits unchanged), y = 0 and
    # linear predictors far out in both tails included.
    rng = np.random.default_rng(11)
    m = 200
    loss, y_bulk, d12 = _fused_case(name, rng, m)
    core = aloocv.losses.get_loss(loss).core
    eta_bulk = rng.uniform(-3, 3, m)
    tails = np.array([-40.0, -700.0, 0.0, 35.0, 700.0])
    eta = np.r_[eta_bulk, tails]
    y = np.r_[y_bulk, y_bulk[-5:]]
    sep = _core.loss_eval(core, y, eta)
    fus = _core.loss_eval(core, y, eta, fused=True)
    with np.errstate(invalid="ignore"):
        for k in range(3):
            np.testing.assert_array_equal(fus[k], sep[k], err_msg=f"{name}: output {k}")
    # and the independent formulas of l' and l'' in the bulk
    g, h = d12(eta_bulk)
    np.testing.assert_allclose(fus[1][:m], g, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fus[2][:m], h, rtol=1e-12, atol=1e-12)
