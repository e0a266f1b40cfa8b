"""The one Newton driver of the core (cpp/include/aloocv/newton_driver.hpp) serves every
smooth fit route: plain fits, path points, single tuning steps, exact leave-one-out
refits, the dual route and the multinomial loss. Each route must reach the same optimum
(checked against scikit-learn and against each other), with the Hessian-pass economy the
driver's refresh policies promise, and stop honestly at the rounding floor."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, PoissonRegressor
from threadpoolctl import threadpool_limits

import aloocv
from aloocv import _core
from aloocv._validation import core_design
from aloocv.losses import get_loss


def _data(loss, n=120, p=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    eta = 0.2 + X @ np.linspace(0.6, -0.4, p)
    if loss == "logistic":
        y = (rng.random(n) < 1.0 / (1.0 + np.exp(-eta))) * 1.0
    elif loss == "poisson":
        y = rng.poisson(np.exp(0.5 * eta)) * 1.0
    else:  # gamma: a non-canonical link (curvature depends on y)
        y = rng.gamma(2.0, np.exp(0.3 * eta) / 2.0)
    return X, y


def _sklearn(loss, X, y, lam):
    with threadpool_limits(1):
        if loss == "logistic":
            m = LogisticRegression(C=1.0 / lam, tol=1e-12, max_iter=10000).fit(X, y)
            return np.r_[m.intercept_, m.coef_.ravel()]
        m = PoissonRegressor(alpha=lam / len(y), tol=1e-12, max_iter=10000).fit(X, y)
        return np.r_[m.intercept_, m.coef_]


def _core_fit(loss, X, y, lam, tol=1e-12, beta0=None):
    p = X.shape[1]
    out = _core.fit(
        core_design(X),
        y,
        None,
        get_loss(loss).core,
        np.full(p, lam),
        fit_intercept=True,
        tol=tol,
        max_iter=100,
        n_threads=1,
        beta0=beta0,
    )
    return out


def _tune_state(loss, X, y, lam, tol=1e-12):
    p = X.shape[1]
    return _core.TuneState(
        core_design(X),
        y,
        None,
        get_loss(loss).core,
        np.full(p, lam),
        fit_intercept=True,
        tol=tol,
        max_iter=100,
        n_threads=1,
        l1=None,
    )


def _beta(out):
    return np.r_[out.intercept, out.coef]


@pytest.mark.parametrize("loss", ["logistic", "poisson"])
def test_every_route_reaches_the_sklearn_optimum(loss):
    X, y = _data(loss)
    lam = 2.0
    ref = _sklearn(loss, X, y, lam)
    plain = _beta(_core_fit(loss, X, y, lam))
    np.testing.assert_allclose(plain, ref, rtol=1e-6, atol=1e-7)

    # path point: chord steps on the previous point's Hessian, one fresh pass at the end
    ts = _tune_state(loss, X, y, 50.0)
    ts.fit()
    ts.set_penalty(np.full(X.shape[1], lam))
    path = ts.fit()
    np.testing.assert_allclose(_beta(path), plain, rtol=1e-8, atol=1e-10)

    # single tuning steps (chord on a stale factor, then fresh) converge to the same point
    ts = _tune_state(loss, X, y, 50.0)
    ts.fit()
    ts.set_penalty(np.full(X.shape[1], lam))
    for k in range(30):
        assert ts.step(refresh=k % 3 == 0) > 0.0
        if ts.state().grad_norm < 1e-13:
            break
    np.testing.assert_allclose(_beta(ts.state()), plain, rtol=1e-8, atol=1e-10)

    # dual route (n x n system in alpha) to the same point
    dual = aloocv.fit(X, y, loss=loss, penalty=aloocv.L2(lam), solver="dual", tol=1e-12)
    np.testing.assert_allclose(np.r_[dual.intercept_, dual.coef_], plain, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("loss", ["logistic", "gamma"])
def test_exact_refits_equal_brute_force_fits(loss):
    # the refits start with chord steps on the downdated full factor and switch to fresh
    # leave-one-out Hessians when those slow down
    X, y = _data(loss, n=60, p=4, seed=3)
    lam = 0.05  # weak penalty: large leave-one-out moves, the chord phase has work to do
    res = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(lam), method="exact", tol=1e-12)
    for i in [0, 7, 31, 59]:
        keep = np.arange(len(y)) != i
        f = _core_fit(loss, X[keep], y[keep], lam)
        np.testing.assert_allclose(
            res.predictions[i], f.intercept + X[i] @ f.coef, rtol=1e-9, atol=1e-10
        )


def test_warm_and_cold_multinomial_agree():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((200, 5))
    y = np.argmax(X[:, :3] + 0.8 * rng.standard_normal((200, 3)), axis=1)
    cold = aloocv.fit(X, y, loss="multinomial", penalty=aloocv.L2(0.3), tol=1e-12)
    with threadpool_limits(1):
        sk = LogisticRegression(C=1.0 / 0.3, tol=1e-12, max_iter=10000).fit(X, y)
    np.testing.assert_allclose(cold.coef_, sk.coef_, rtol=1e-6, atol=1e-7)
    # from a far point (a wrong sign): fresh Hessians, then chord steps on the last one
    beta0 = np.r_[0.0, -3.0 * np.ones(5), 0.0, np.ones(5), 0.0, 2.0 * np.ones(5)]
    out = _core.multinomial_fit(
        core_design(X),
        y * 1.0,
        None,
        3,
        np.full(5, 0.3),
        fit_intercept=True,
        tol=1e-12,
        max_iter=100,
        n_threads=1,
        beta0=beta0,
    )
    assert out.converged
    np.testing.assert_allclose(np.asarray(out.coef), cold.coef_, rtol=1e-8, atol=1e-10)
    # chord steps: fewer Hessian passes than iterations
    assert out.hessian_passes < out.n_iter


@pytest.mark.parametrize("loss", ["logistic", "poisson", "gamma"])
def test_hessian_pass_economy(loss):
    X, y = _data(loss, n=300, p=8, seed=1)
    p = X.shape[1]
    # a plain fit: at most one Hessian pass per Newton iteration
    f = _core_fit(loss, X, y, 1.0, tol=1e-10)
    assert f.converged and f.hessian_passes <= f.n_iter
    # a path point near the previous one: one pass (the fresh Hessian at its solution)
    ts = _tune_state(loss, X, y, 1.0, tol=1e-8)
    ts.fit()
    ts.set_penalty(np.full(p, 0.8))
    out = ts.fit()
    assert out.converged and out.hessian_passes == 1
    # ... and that factor is the Hessian at the returned point: ALO equals ALO computed
    # from scratch at those coefficients
    alo = ts.alo(gradient=False)
    ref = aloocv.loo(
        X, y, loss=loss, penalty=aloocv.L2(0.8), coef=out.coef, intercept=out.intercept
    )
    np.testing.assert_allclose(alo.predictions, ref.predictions, rtol=1e-10, atol=1e-12)


def test_squared_path_needs_no_hessian_pass():
    X, y = _data("logistic", n=100, p=5)
    y = X @ np.ones(5) + 0.1 * y
    ts = _tune_state("squared", X, y, 1.0)
    ts.fit()
    ts.set_penalty(np.full(5, 0.1))
    out = ts.fit()
    assert out.hessian_passes == 0
    ref = _core_fit("squared", X, y, 0.1)
    np.testing.assert_allclose(_beta(out), _beta(ref), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("route", ["plain", "path", "multinomial"])
def test_rounding_floor_stops_every_route(route):
    # tol below what float64 allows: the stall test ends the drive within a few
    # iterations, at the optimum, with converged honestly False
    X, y = _data("logistic", n=80, p=4, seed=2)
    p = X.shape[1]
    if route == "plain":
        out = _core_fit("logistic", X, y, 1.0, tol=1e-300)
        ref = _core_fit("logistic", X, y, 1.0)
    elif route == "path":
        ts = _tune_state("logistic", X, y, 3.0, tol=1e-300)
        ts.fit()
        ts.set_penalty(np.full(p, 1.0))
        out = ts.fit()
        ref = _core_fit("logistic", X, y, 1.0)
    else:
        args = (core_design(X), y, None, 2, np.full(p, 1.0))
        out = _core.multinomial_fit(
            *args, fit_intercept=True, tol=1e-300, max_iter=100, n_threads=1
        )
        ref = _core.multinomial_fit(*args, fit_intercept=True, tol=1e-12, max_iter=100, n_threads=1)
        np.testing.assert_allclose(out.coef, ref.coef, rtol=1e-8, atol=1e-10)
        assert not out.converged and out.n_iter < 40
        return
    assert not out.converged
    assert out.n_iter < 40
    np.testing.assert_allclose(_beta(out), _beta(ref), rtol=1e-8, atol=1e-10)


def test_exact_refit_max_iter_reports_non_convergence():
    # one step per refit cannot reach tol for a weakly penalized logistic problem: the
    # driver's budget ends the refits and the count of non-converged refits is honest
    X, y = _data("logistic", n=40, p=3, seed=4)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        aloocv.loo(
            X, y, loss="logistic", penalty=aloocv.L2(0.01), method="exact", tol=1e-14, max_iter=1
        )
    assert any(issubclass(r.category, ConvergenceWarning) for r in rec)


def test_multinomial_newton_cg_route():
    # (K + 1) (p + 1) >= 256: Newton-CG steps (conjugate gradients on Hessian-vector
    # products) instead of exact Hessian passes; the exact Hessian only for ALO
    rng = np.random.default_rng(7)
    n, p, K, lam = 200, 50, 6, 3.0
    X = rng.standard_normal((n, p))
    y = np.argmax(X[:, :K] + 0.7 * rng.standard_normal((n, K)), axis=1)
    args = (core_design(X), y * 1.0, None, K, np.full(p, lam))
    out = _core.multinomial_fit(*args, fit_intercept=True, tol=1e-12, max_iter=100, n_threads=1)
    assert out.converged and out.hessian_products > 0
    assert out.hessian_passes <= 1  # the preconditioner's single SYRK pass
    with threadpool_limits(1):
        sk = LogisticRegression(C=1.0 / lam, solver="newton-cholesky", tol=1e-12).fit(X, y)
    np.testing.assert_allclose(np.asarray(out.coef), sk.coef_, rtol=1e-6, atol=1e-7)
    # ALO after a Newton-CG fit needs the Hessian at the returned point: IF = eta + K_i g_i
    # checked against numpy's dense Hessian
    res = aloocv.loo(X, y, loss="multinomial", penalty=aloocv.L2(lam), method="if", tol=1e-12)
    B = np.c_[np.asarray(out.intercept), np.asarray(out.coef)]  # (K, p1)
    B -= B[:, :1].mean() * np.eye(1, p + 1, 0)
    Xt = np.c_[np.ones(n), X]
    E = Xt @ B.T
    mu = np.exp(E - E.max(1, keepdims=True))
    mu /= mu.sum(1, keepdims=True)
    H = np.zeros((K * (p + 1), K * (p + 1)))
    for a in range(K):
        for b in range(K):
            c = mu[:, a] * ((a == b) - mu[:, b])
            H[a * (p + 1) : (a + 1) * (p + 1), b * (p + 1) : (b + 1) * (p + 1)] = (Xt.T * c) @ Xt
    H += np.kron(np.eye(K), np.diag(np.r_[0.0, np.full(p, lam)]))
    idx = np.arange(K) * (p + 1)
    H[np.ix_(idx, idx)] += n / K**2  # the gauge term
    G = mu - np.eye(K)[y]
    for i in [0, 123, 199]:
        Xi = np.kron(np.eye(K), Xt[i])  # (K, K p1)
        Ki = Xi @ np.linalg.solve(H, Xi.T)
        np.testing.assert_allclose(res.predictions[i], E[i] + Ki @ G[i], rtol=1e-7, atol=1e-9)
    # exact refits: Newton-CG preconditioned by the full fit's factor
    ex = aloocv.loo(X, y, loss="multinomial", penalty=aloocv.L2(lam), method="exact", tol=1e-12)
    for i in [0, 123]:
        keep = np.arange(n) != i
        with threadpool_limits(1):
            m = LogisticRegression(C=1.0 / lam, solver="newton-cholesky", tol=1e-12).fit(
                X[keep], y[keep]
            )
        np.testing.assert_allclose(
            ex.predictions[i], m.decision_function(X[i : i + 1])[0], rtol=1e-8, atol=1e-9
        )


@pytest.mark.parametrize("p", [4, 60])  # exact Hessians / Newton-CG ((K + 1) p1 >= 256)
def test_multinomial_memory_orders_agree(p):
    # C-order and Fortran-order X reach BLAS through different products (X_b^T as the
    # left operand, or a transposed GEMM); strided views go through Eigen
    rng = np.random.default_rng(11)
    n, K = 150, 4
    X = rng.standard_normal((n, p))
    y = np.argmax(X[:, :K] + rng.standard_normal((n, K)), axis=1) * 1.0
    wide = np.zeros((n, 2 * p))
    wide[:, ::2] = X
    views = [X, np.asfortranarray(X), wide[:, ::2]]
    outs = [
        _core.multinomial_fit(
            core_design(v),
            y,
            None,
            K,
            np.full(p, 0.5),
            fit_intercept=True,
            tol=1e-12,
            max_iter=100,
            n_threads=1,
        )
        for v in views
    ]
    for out in outs[1:]:
        assert out.converged
        np.testing.assert_allclose(out.coef, outs[0].coef, rtol=1e-10, atol=1e-12)
    with threadpool_limits(1):
        sk = LogisticRegression(C=2.0, solver="newton-cholesky", tol=1e-12).fit(views[0], y)
    np.testing.assert_allclose(outs[1].coef, sk.coef_, rtol=1e-7, atol=1e-9)
