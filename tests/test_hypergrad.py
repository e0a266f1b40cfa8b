"""The exact hypergradient (docs/math/hypergradient.md) and its second derivatives against finite
differences of what loo(...).mean reports; the paper's eq. 14-16 against a numpy version."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

import aloocv
from aloocv import _core
from aloocv._validation import core_design
from aloocv.tuning import Objective
from conftest import make_data, ridge_exact_loo

FD_STEP = 1e-4  # central differences in log(lambda)
FIT_TOL = 1e-13


def make(loss, n, p, seed, weights=False):
    X, y = make_data(loss, n, p, seed=seed, scale=2.0)
    X = X * np.linspace(0.5, 2.0, p)  # unequal scales
    X[:, 1] += 0.6 * X[:, 0]  # correlated columns
    w = np.random.default_rng(seed + 1).uniform(0.3, 2.0, n) if weights else None
    return X, y, w


def acv(X, y, loss, pen, **kw):
    return aloocv.loo(X, y, loss=loss, penalty=pen, tol=FIT_TOL, max_iter=500, **kw).mean


def fd_log(X, y, loss, pen, **kw):
    """Central differences of loo(...).mean in log(params), one parameter at a time."""
    u = np.log(pen.params())
    g = np.empty(u.size)
    for k in range(u.size):
        e = np.zeros(u.size)
        e[k] = FD_STEP
        plus = acv(X, y, loss, pen.with_params(np.exp(u + e)), **kw)
        minus = acv(X, y, loss, pen.with_params(np.exp(u - e)), **kw)
        g[k] = (plus - minus) / (2 * FD_STEP)
    return g


def assert_grad_matches(g, ref, rtol=1e-5):
    # relative to the gradient's size: components near zero are compared absolutely
    scale = np.max(np.abs(ref))
    assert scale > 0
    np.testing.assert_allclose(g, ref, rtol=rtol, atol=rtol * scale)


PENALTIES = {
    "scalar": lambda p: aloocv.L2(3.0),
    "per-feature": lambda p: aloocv.L2(np.geomspace(0.5, 8.0, p)),
    "groups": lambda p: aloocv.L2(np.array([1.0, 6.0]), groups=np.arange(p) % 2),
    "enet": lambda p: aloocv.ElasticNet(2.0, 1.5),
}


@pytest.mark.parametrize("loss", ["squared", "logistic", "poisson"])
@pytest.mark.parametrize("kind", list(PENALTIES))
@pytest.mark.parametrize("weights", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("intercept", [True, False], ids=["intercept", "no-intercept"])
@pytest.mark.parametrize("design", ["dense", "sparse"])
def test_gradient_is_the_derivative_of_the_reported_mean(loss, kind, weights, intercept, design):
    X, y, w = make(loss, 80, 5, seed=80, weights=weights)
    if design == "sparse":
        X[np.abs(X) < 0.4] = 0.0
        X = sp.csr_matrix(X)
    pen = PENALTIES[kind](5)
    kw = dict(sample_weight=w, fit_intercept=intercept)
    res = aloocv.loo(
        X, y, loss=loss, penalty=pen, return_gradient=True, tol=FIT_TOL, max_iter=500, **kw
    )
    assert res.mean == pytest.approx(acv(X, y, loss, pen, **kw), rel=1e-12)
    assert_grad_matches(res.gradient * pen.params(), fd_log(X, y, loss, pen, **kw))


# n < p: some samples have leverage near 1 and ALO says so (ALOWarning); this test is about
# the derivative of the reported estimate, whatever its accuracy against exact LOO
@pytest.mark.filterwarnings("ignore::aloocv.ALOWarning")
@pytest.mark.parametrize("loss", ["squared", "logistic", "poisson"])
@pytest.mark.parametrize("kind", ["scalar", "per-feature", "groups"])
@pytest.mark.parametrize("intercept", [True, False], ids=["intercept", "no-intercept"])
def test_dual_route_gradient(loss, kind, intercept):
    X, y, w = make(loss, 30, 60, seed=81, weights=True)
    pen = PENALTIES[kind](60) if kind != "per-feature" else aloocv.L2(np.geomspace(1, 20, 60))
    kw = dict(sample_weight=w, fit_intercept=intercept, solver="dual")
    res = aloocv.loo(
        X, y, loss=loss, penalty=pen, return_gradient=True, tol=FIT_TOL, max_iter=500, **kw
    )
    primal = aloocv.loo(
        X,
        y,
        loss=loss,
        penalty=pen,
        return_gradient=True,
        tol=FIT_TOL,
        sample_weight=w,
        fit_intercept=intercept,
        solver="primal",
    )
    assert_grad_matches(res.gradient, primal.gradient, rtol=1e-8)
    if kind != "per-feature":  # 60 parameters: finite differences of the few others
        assert_grad_matches(res.gradient * pen.params(), fd_log(X, y, loss, pen, **kw))


def test_squared_gradient_is_exact_derivative_of_exact_loo():
    # squared loss + L2: ALO is exact LOO (Corollary 2); brute-force refits as reference
    X, y = make_data("squared", 40, 5, seed=82)
    pen = aloocv.L2(np.array([0.1, 1.0, 10.0, 100.0, 3.0]))

    def exact(lam):
        return np.mean(0.5 * (y - ridge_exact_loo(X, y, lam)) ** 2)

    res = aloocv.loo(X, y, loss="squared", penalty=pen, return_gradient=True)
    ref = np.empty(5)
    for k in range(5):
        e = np.zeros(5)
        e[k] = 1e-5 * pen.lam[k]
        ref[k] = (exact(pen.lam + e) - exact(pen.lam - e)) / (2 * e[k])
    np.testing.assert_allclose(res.gradient, ref, rtol=1e-6)


def _real(name):
    from sklearn.datasets import load_breast_cancer, load_digits, load_wine

    if name == "breast_cancer":
        d = load_breast_cancer()
        X, y = d.data, d.target.astype(float)
    elif name == "wine":
        d = load_wine()
        X, y = d.data, (d.target == 0).astype(float)
    else:
        d = load_digits()
        keep = (d.target == 3) | (d.target == 8)
        X, y = d.data[keep], (d.target[keep] == 3).astype(float)
    sd = X.std(0)
    return (X - X.mean(0)) / np.where(sd > 0, sd, 1.0), y


@pytest.mark.filterwarnings("ignore:ALO's mean may be off:aloocv.ALOWarning")
@pytest.mark.parametrize("name", ["breast_cancer", "wine", "digits"])
@pytest.mark.parametrize("lam", [0.1, 1.0, 10.0])
def test_real_data_logistic_gradient(name, lam):
    # where the paper's approximation is 10x off, or of the wrong sign (wine, lam=0.1)
    X, y = _real(name)
    pen = aloocv.L2(lam)
    res = aloocv.loo(X, y, loss="logistic", penalty=pen, return_gradient=True, tol=FIT_TOL)
    assert_grad_matches(res.gradient * lam, fd_log(X, y, "logistic", pen))


def _tune_state(X, y, loss, pen, w=None, intercept=True, n_threads=1):
    p = X.shape[1]
    return _core.TuneState(
        core_design(X),
        y,
        w,
        loss,
        pen.l2_vector(p),
        fit_intercept=intercept,
        tol=FIT_TOL,
        max_iter=500,
        n_threads=n_threads,
        l1=pen.l1_vector(p),
    )


def _objective(X, y, loss, pen, w=None, intercept=True):
    state = _tune_state(X, y, loss, pen, w, intercept)
    return Objective(state, pen, w, X.shape[1], fit_intercept=intercept)


@pytest.mark.parametrize(
    ("loss", "kind", "design"),
    [
        ("logistic", "scalar", "dense"),
        ("poisson", "groups", "dense"),
        ("logistic", "per-feature", "dense"),
        ("squared", "enet", "dense"),
        ("logistic", "enet", "dense"),
        ("poisson", "per-feature", "sparse"),
        ("logistic", "enet", "sparse"),
    ],
)
def test_second_derivatives_vs_finite_differences_of_the_gradient(loss, kind, design):
    X, y, w = make(loss, 120, 5, seed=83, weights=True)
    if design == "sparse":
        X[np.abs(X) < 0.4] = 0.0
        X = sp.csr_matrix(X)
    pen = PENALTIES[kind](5)
    obj = _objective(X, y, loss, pen, w)
    u = np.log(pen.params())
    ev = obj.evaluate(u, 2)
    assert ev.acv == pytest.approx(acv(X, y, loss, pen, sample_weight=w), rel=1e-12)
    np.testing.assert_allclose(ev.hess, ev.hess.T, rtol=1e-8, atol=1e-12)
    ref = np.empty((u.size, u.size))
    for k in range(u.size):
        e = np.zeros(u.size)
        e[k] = FD_STEP
        ref[:, k] = (obj.evaluate(u + e, 1).grad - obj.evaluate(u - e, 1).grad) / (2 * FD_STEP)
    scale = np.max(np.abs(ref))
    np.testing.assert_allclose(ev.hess, ref, rtol=1e-5, atol=1e-5 * scale)


def _paper_gradient_numpy(X, y, lam):
    """Eq. 14-16 with H_{-i} at beta_hat, written with numpy (logistic, intercept)."""
    fit = aloocv.fit(X, y, loss="logistic", penalty=aloocv.L2(lam), tol=FIT_TOL)
    Xt = np.hstack([np.ones((X.shape[0], 1)), X])
    beta = np.concatenate([[fit.intercept_], fit.coef_])
    eta = Xt @ beta
    mu = 1 / (1 + np.exp(-eta))
    d = mu * (1 - mu)
    H = Xt.T @ (Xt * d[:, None]) + np.diag(np.r_[0.0, np.full(X.shape[1], lam)])
    A = np.linalg.solve(H, Xt.T)  # columns a_i
    h = np.einsum("ij,ji->i", Xt, A)
    t = 1 - d * h
    s = (mu - y) / t
    et = eta + s * h
    c = -(1 / (1 + np.exp(-et)) - y) / t
    bt = beta[:, None] + s[None, :] * A  # beta~(i)
    g = (A * bt)[1:] @ c / X.shape[0]
    return g.sum()


def test_paper_gradient_option_is_eq_16():
    X, y = make_data("logistic", 150, 4, seed=84, scale=2.0)
    res = aloocv.loo(
        X, y, loss="logistic", penalty=aloocv.L2(2.0), return_gradient=True, gradient="paper"
    )
    assert res.gradient[0] == pytest.approx(_paper_gradient_numpy(X, y, 2.0), rel=1e-8)
    exact = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(2.0), return_gradient=True)
    assert abs(exact.gradient[0] - res.gradient[0]) > 1e-3 * abs(exact.gradient[0])
    with pytest.raises(ValueError, match="unknown gradient"):
        aloocv.loo(X, y, return_gradient=True, gradient="approx")


def test_minibatch_gradient_is_unbiased():
    # Algorithm 2's estimate: its mean over many minibatches is the exact gradient
    X, y, w = make("logistic", 60, 3, seed=85, weights=True)
    pen = aloocv.L2(np.array([0.5, 2.0, 1.0]))
    obj = _objective(X, y, "logistic", pen, w)
    exact = obj.evaluate(np.log(pen.params()), 1).grad / pen.params()
    rng = np.random.default_rng(0)
    draws = np.array(
        [obj.state.sample_gradient(rng.integers(0, 60, size=8))[2] for _ in range(20000)]
    )
    mean, se = draws.mean(0), draws.std(0) / np.sqrt(len(draws))
    assert np.all(np.abs(mean - exact) <= 5 * se + 1e-12), (mean, exact, se)


def test_gradient_alongside_alo_values():
    X, y = make_data("logistic", 300, 6, seed=86)
    a = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0), return_gradient=True)
    b = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0))
    np.testing.assert_allclose(a.losses, b.losses, rtol=1e-13)
    np.testing.assert_allclose(a.leverages, b.leverages, rtol=1e-12)
    assert b.gradient is None


def test_gradient_threads_sparse_and_layouts():
    # large enough (n q^2 > kSerialFlops) for the passes to run on two threads
    X, y = make_data("poisson", 20000, 20, seed=87)
    X[np.abs(X) < 0.8] = 0.0
    kw = dict(loss="poisson", penalty=aloocv.L2(np.linspace(1, 3, 20)), return_gradient=True)
    one = aloocv.loo(X, y, n_jobs=1, **kw)
    two = aloocv.loo(X, y, n_jobs=2, **kw)
    np.testing.assert_array_equal(one.gradient, two.gradient)
    s = aloocv.loo(sp.csr_matrix(X), y, **kw)
    f = aloocv.loo(np.asfortranarray(X), y, **kw)
    np.testing.assert_allclose(s.gradient, one.gradient, rtol=1e-9)
    np.testing.assert_allclose(f.gradient, one.gradient, rtol=1e-9)


def test_gradient_needs_alo():
    X, y = make_data("logistic", 50, 3, seed=88)
    with pytest.raises(ValueError, match="return_gradient=True needs method='alo'"):
        aloocv.loo(X, y, method="exact", return_gradient=True)


def test_groups_penalty():
    pen = aloocv.L2([1.0, 10.0], groups=["a", "a", "b"])
    np.testing.assert_array_equal(pen.l2_vector(3), [1.0, 1.0, 10.0])
    np.testing.assert_array_equal(pen.chain(None, np.array([1.0, 2.0, 3.0])), [3.0, 3.0])
    assert pen.with_params(np.array([2.0, 3.0])) == aloocv.L2([2.0, 3.0], groups=["a", "a", "b"])
    with pytest.raises(ValueError, match="2 groups"):
        aloocv.L2([1.0, 2.0, 3.0], groups=[0, 0, 1])
    with pytest.raises(ValueError, match="3 labels but X has 4 features"):
        pen.l2_vector(4)
    # a grouped penalty is the per-feature one with tied values
    X, y = make_data("logistic", 100, 3, seed=89)
    a = aloocv.loo(X, y, penalty=pen, return_gradient=True)
    b = aloocv.loo(X, y, penalty=aloocv.L2(pen.l2_vector(3)), return_gradient=True)
    assert a.mean == b.mean
    np.testing.assert_allclose(a.gradient, [b.gradient[:2].sum(), b.gradient[2]], rtol=1e-12)


@pytest.mark.filterwarnings("ignore:ALO's mean may be off:aloocv.ALOWarning")
def test_search_stopped_by_max_iter_is_not_converged():
    X, y = _real("wine")
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        res = aloocv.tune(
            X, y, loss="logistic", penalty=aloocv.L2(30.0), method="newton", max_iter=1
        )
    assert not res.converged
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ok = aloocv.tune(X, y, loss="logistic", penalty=aloocv.L2(30.0), method="newton")
    assert ok.converged
    g = aloocv.loo(X, y, loss="logistic", penalty=ok.penalty, return_gradient=True)
    assert abs(g.gradient[0] * ok.penalty.lam) <= 1e-6 * g.mean


def test_no_active_feature_and_no_intercept():
    # the factor is empty (q1 = 0): ACV does not move with lambda locally
    X, y = make_data("squared", 50, 4, seed=90)
    res = aloocv.loo(
        X,
        y,
        loss="squared",
        penalty=aloocv.ElasticNet(1e4, 1.0),
        fit_intercept=False,
        return_gradient=True,
    )
    np.testing.assert_array_equal(res.gradient, 0.0)
    np.testing.assert_array_equal(res.leverages, 0.0)


@pytest.mark.filterwarnings("ignore:ALO's mean may be off:aloocv.ALOWarning")
def test_elastic_net_alo_uses_the_hessian_at_the_fit():
    # the active-set factor is taken at beta: the estimate does not depend on how tightly
    # the fit converged (beyond the fit's own error)
    X, y = _real("breast_cancer")
    pen = aloocv.ElasticNet(0.5, 1.0)
    loose = aloocv.loo(X, y, loss="logistic", penalty=pen, return_gradient=True)
    tight = aloocv.loo(X, y, loss="logistic", penalty=pen, return_gradient=True, tol=FIT_TOL)
    assert loose.mean == pytest.approx(tight.mean, rel=1e-7)
    np.testing.assert_allclose(loose.gradient, tight.gradient, rtol=1e-4)
    # a search either reaches a stationary point or says it stopped at a jump of ACV
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        res = aloocv.tune(X, y, loss="logistic", penalty=pen, method="newton")
    assert res.acv <= loose.mean
    if res.converged:
        g = aloocv.loo(X, y, loss="logistic", penalty=res.penalty, return_gradient=True)
        assert np.max(np.abs(g.gradient * res.penalty.params())) <= 1e-6 * g.mean * 1.001
    else:
        assert len(caught) == 1 and "active set changes" in str(caught[0].message)


def test_minibatch_needs_two_samples_for_curved_losses():
    X, y = make_data("logistic", 60, 3, seed=91)
    obj = _objective(X, y, "logistic", aloocv.L2(1.0))
    obj.evaluate(np.zeros(1), 1)
    with pytest.raises(ValueError, match="at least 2 samples"):
        obj.state.sample_gradient(np.array([3]))


def test_minibatch_after_l1_refit_uses_hessian_at_beta():
    # tune(method="sgd") with an L1 term refits (state.fit()) and draws minibatches with
    # no ALO call in between: the estimates must use the active set's Hessian at the
    # fitted beta, not the last working set's from one step earlier. With every sample
    # in the batch the ACV is the ALO mean there (numpy reference; a loose tol leaves
    # the last step large)
    X, y = make_data("logistic", 40, 10, seed=2)
    n, p, lam = 40, 10, 0.1
    state = _core.TuneState(
        core_design(X),
        y,
        None,
        "logistic",
        np.full(p, lam),
        fit_intercept=True,
        tol=1e-3,
        max_iter=100,
        n_threads=1,
        l1=np.full(p, 2.0),
    )
    f = state.fit()
    b = np.r_[f.intercept, f.coef]
    acv, _, _ = state.sample_gradient(np.arange(n))
    A = np.r_[0, np.flatnonzero(b[1:]) + 1]
    Xa = np.column_stack([np.ones(n), X])[:, A]
    eta = Xa @ b[A]
    mu = 1 / (1 + np.exp(-eta))
    d = mu * (1 - mu)
    H = Xa.T @ (d[:, None] * Xa) + np.diag(np.r_[0.0, np.full(A.size - 1, lam)])
    h = np.einsum("ij,ji->i", Xa, np.linalg.solve(H, Xa.T))
    et = eta + (mu - y) * h / (1 - d * h)
    assert acv == pytest.approx(np.mean(np.logaddexp(0, et) - y * et), rel=1e-12)


def _state(X, y, loss, pen, w=None, intercept=True, n_threads=1):
    state = _tune_state(X, y, loss, pen, w, intercept, n_threads)
    state.fit()
    return state


@pytest.mark.parametrize("loss", ["squared", "logistic", "poisson", "gamma", "tweedie", "binomial"])
@pytest.mark.parametrize("kind", ["per-feature", "enet"])
@pytest.mark.parametrize("weights", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("intercept", [True, False], ids=["intercept", "no-intercept"])
@pytest.mark.parametrize("design", ["dense", "sparse", "float32"])
def test_the_derivative_along_a_direction_is_the_gradients_projection(
    loss, kind, weights, intercept, design
):
    # TuneState.alo(along_l2=, along_l1=) takes the derivative along one direction in the
    # leverage pass (a signed rank-k update of X~^T diag(w l''' X~ v) X~ instead of the pass
    # for q): the per-feature gradient's projection on it, with the same ALO values
    X, y, w = make(loss, 150, 8, seed=84, weights=weights)
    if design == "sparse":
        X[np.abs(X) < 0.4] = 0.0
        X = sp.csr_matrix(X)
    elif design == "float32":
        X = X.astype(np.float32)
    pen = PENALTIES[kind](8) if kind == "enet" else aloocv.L2(np.geomspace(0.5, 8.0, 8))
    state = _state(X, y, loss, pen, w, intercept)
    rng = np.random.default_rng(5)
    d2 = rng.uniform(-1.0, 2.0, 8)
    d1 = rng.uniform(-1.0, 2.0, 8) if kind == "enet" else np.zeros(8)
    full = state.alo(gradient=True)
    along = state.alo(gradient=True, along_l2=d2, along_l1=d1)
    ref = full.grad_l2 @ d2 + full.grad_l1 @ d1
    scale = np.abs(full.grad_l2) @ np.abs(d2) + np.abs(full.grad_l1) @ np.abs(d1)
    assert along.grad_along == pytest.approx(ref, rel=1e-10, abs=1e-12 * scale)
    assert along.grad_l2 is None and along.grad_l1 is None and full.grad_along is None
    np.testing.assert_array_equal(along.losses, full.losses)
    np.testing.assert_array_equal(along.leverages, full.leverages)


@pytest.mark.filterwarnings("ignore:ALO's mean may be off:aloocv.ALOWarning")
@pytest.mark.parametrize(
    ("name", "pen"),
    [
        ("breast_cancer", aloocv.L2(1.0)),
        ("wine", aloocv.L2(0.1)),
        ("digits", aloocv.L2(10.0)),
        ("wine", aloocv.L1(0.01)),
    ],
)
def test_one_parameter_search_derivative_is_the_derivative_of_the_reported_mean(name, pen):
    # the tuning objective of a one-parameter penalty takes its derivative along the
    # penalty's direction: central differences of loo(...).mean on real data
    X, y = _real(name)
    obj = _objective(X, y, "logistic", pen)
    assert obj._along()
    u = np.log(pen.params())
    ev = obj.evaluate(u, 1)
    assert ev.out.grad_along is not None
    assert ev.acv == pytest.approx(acv(X, y, "logistic", pen), rel=1e-12)
    assert_grad_matches(ev.grad, fd_log(X, y, "logistic", pen))


def test_the_derivative_along_a_direction_threaded_equals_serial():
    X, y, _ = make("logistic", 3000, 30, seed=85)
    pen = aloocv.L2(2.0)
    d2, d1 = np.ones(30), np.zeros(30)
    one = _state(X, y, "logistic", pen).alo(gradient=True, along_l2=d2, along_l1=d1)
    two = _state(X, y, "logistic", pen, n_threads=2).alo(gradient=True, along_l2=d2, along_l1=d1)
    assert one.grad_along == two.grad_along


def test_a_direction_is_checked():
    X, y, _ = make("logistic", 60, 4, seed=86)
    state = _state(X, y, "logistic", aloocv.L2(1.0))
    d = np.ones(4)
    with pytest.raises(ValueError, match="along_l2 and along_l1 go together"):
        state.alo(gradient=True, along_l2=d)
    with pytest.raises(ValueError, match="needs gradient=True"):
        state.alo(gradient=False, along_l2=d, along_l1=d)
    with pytest.raises(ValueError, match="along_l1"):
        state.alo(gradient=True, along_l2=d, along_l1=np.ones(3))
    with pytest.raises(ValueError, match="exact gradient's only"):
        state.alo(gradient=True, gradient_kind="paper", along_l2=d, along_l1=d)
