"""The result classes of the compiled core (``aloocv._core.*Result``): each one's fields
(types, shapes, None where a call does not produce them), read-only, built once, with a
repr of the scalar fields, and its values against an independent computation on one small
case (scikit-learn, numpy closed forms, brute-force refits)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from aloocv import _core
from conftest import (
    loss_value,
    make_data,
    ridge_exact_loo,
    ridge_solve,
    sklearn_exact_loo,
    sklearn_glm,
)

TOL = 1e-12  # the fits' gradient tolerance
RTOL = 1e-8  # float64 agreement of converged fits and closed forms


def _intercept_design(X):
    return np.column_stack([np.ones(X.shape[0]), X])


def _check_class(res, cls, scalars: dict, arrays: dict, absent: tuple = ()):
    """res is a cls whose scalar fields have the given types and whose arrays are float64 of
    the given shapes, the same object on every access; absent fields are None; no field
    can be set; repr names the class and its scalar fields."""
    assert type(res) is cls
    for name, typ in scalars.items():
        assert isinstance(getattr(res, name), typ), (name, type(getattr(res, name)))
    for name, shape in arrays.items():
        a = getattr(res, name)
        assert isinstance(a, np.ndarray) and a.dtype == np.float64, name
        assert a.shape == shape, (name, a.shape, shape)
        assert getattr(res, name) is a, name  # built once, no copy per access
    for name in absent:
        assert getattr(res, name) is None, name
    for name in (*scalars, *arrays, *absent):
        with pytest.raises(AttributeError):
            setattr(res, name, 0)
    with pytest.raises(AttributeError):
        res.not_a_field = 0  # no new attributes either
    text = repr(res)
    assert text.startswith(cls.__name__ + "(")
    for name in scalars:
        assert f"{name}=" in text, (name, text)
    with pytest.raises(TypeError):
        cls()  # results come from the core only


FIT_SCALARS = {
    "intercept": float,
    "n_iter": int,
    "converged": bool,
    "objective": float,
    "grad_norm": float,
    "hessian_passes": int,
    "matvec_passes": int,
    "fused_end_fallbacks": int,
    "stale_eta": float,
}


def test_fit_result_is_the_sklearn_fit():
    X, y = make_data("logistic", 60, 4, seed=1)
    lam = 0.7
    r = _core.fit(
        X,
        y,
        None,
        "logistic",
        np.full(4, lam),
        fit_intercept=True,
        tol=TOL,
        max_iter=100,
        n_threads=1,
    )
    _check_class(r, _core.FitResult, FIT_SCALARS, {"coef": (4,)})
    with threadpool_limits(1):
        coef, b = sklearn_glm("logistic", X, y, lam)
    np.testing.assert_allclose(r.coef, coef, rtol=1e-7, atol=1e-9)
    assert r.intercept == pytest.approx(b, rel=1e-7, abs=1e-9)
    assert r.converged and r.grad_norm < 1e-10 and r.n_iter >= 1 and r.hessian_passes >= 1
    eta = X @ r.coef + r.intercept
    ref_obj = np.sum(loss_value("logistic", y, eta)) + 0.5 * lam * np.sum(r.coef**2)
    assert r.objective == pytest.approx(ref_obj, rel=1e-12)
    # no intercept: 0.0
    r0 = _core.fit(
        X,
        y,
        None,
        "logistic",
        np.full(4, lam),
        fit_intercept=False,
        tol=TOL,
        max_iter=100,
        n_threads=1,
    )
    assert r0.intercept == 0.0


def test_loo_result_exact_is_the_brute_force_refits():
    X, y = make_data("logistic", 30, 3, seed=2)
    lam = 1.0
    r = _core.loo(
        X,
        y,
        None,
        "logistic",
        np.full(3, lam),
        fit_intercept=True,
        method="exact",
        tol=TOL,
        max_iter=100,
        n_threads=1,
    )
    _check_class(
        r,
        _core.LooResult,
        {**FIT_SCALARS, "n_not_converged": int},
        {"coef": (3,), "losses": (30,), "predictions": (30,)},
        absent=("leverages", "downdate", "grad_l2", "grad_l1", "rcond"),
    )
    assert isinstance(r, _core.FitResult)  # the fit's fields too
    with threadpool_limits(1):
        ref = sklearn_exact_loo("logistic", X, y, lam)
    np.testing.assert_allclose(r.predictions, ref, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(r.losses, loss_value("logistic", y, ref), rtol=1e-7, atol=1e-9)
    assert r.n_not_converged == 0


def test_loo_result_alo_is_press_for_ridge():
    # squared loss + L2: ALO is exact leave-one-out (Corollary 2), h_i the hat diagonal
    X, y = make_data("squared", 30, 3, seed=3)
    lam = np.array([0.5, 1.0, 2.0])
    r = _core.loo(
        X,
        y,
        None,
        "squared",
        lam,
        fit_intercept=True,
        method="alo",
        tol=TOL,
        max_iter=100,
        n_threads=1,
        gradient=True,
    )
    _check_class(
        r,
        _core.LooResult,
        {**FIT_SCALARS, "n_not_converged": int, "rcond": float},
        {
            "coef": (3,),
            "losses": (30,),
            "predictions": (30,),
            "leverages": (30,),
            "downdate": (30,),
            "grad_l2": (3,),
            "grad_l1": (3,),
        },
    )
    with threadpool_limits(1):
        beta = ridge_solve(X, y, lam)
        ref = ridge_exact_loo(X, y, lam)
        Xt = _intercept_design(X)
        H = Xt.T @ Xt + np.diag(np.r_[0.0, lam])
        h = np.einsum("ij,ji->i", Xt, np.linalg.solve(H, Xt.T))
    np.testing.assert_allclose(np.r_[r.intercept, r.coef], beta, rtol=RTOL)
    np.testing.assert_allclose(r.predictions, ref, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(r.leverages, h, rtol=RTOL)
    np.testing.assert_allclose(r.downdate, 1.0 - h, rtol=RTOL)
    assert 0.0 < r.rcond <= 1.0

    # the gradient of the mean leave-one-out loss in each lambda: central differences of
    # the brute-force value
    def mean_loo(lv):
        with threadpool_limits(1):
            return np.mean(loss_value("squared", y, ridge_exact_loo(X, y, lv)))

    step = 1e-5
    fd = [
        (mean_loo(lam + step * np.eye(3)[k]) - mean_loo(lam - step * np.eye(3)[k])) / (2 * step)
        for k in range(3)
    ]
    np.testing.assert_allclose(r.grad_l2, fd, rtol=1e-6, atol=1e-10)


def test_tune_state_results():
    X, y = make_data("logistic", 40, 3, seed=4)
    lam = np.full(3, 0.8)
    ts = _core.TuneState(
        X, y, None, "logistic", lam, fit_intercept=True, tol=TOL, max_iter=100, n_threads=1
    )
    f = ts.fit()
    _check_class(f, _core.FitResult, FIT_SCALARS, {"coef": (3,)})
    with threadpool_limits(1):
        coef, b = sklearn_glm("logistic", X, y, 0.8)
    np.testing.assert_allclose(np.r_[f.intercept, f.coef], np.r_[b, coef], rtol=1e-7, atol=1e-9)
    s = ts.state()
    assert type(s) is _core.FitResult
    np.testing.assert_array_equal(s.coef, f.coef)
    a = ts.alo(gradient=False)
    _check_class(
        a,
        _core.LooResult,
        {**FIT_SCALARS, "n_not_converged": int, "rcond": float},
        {"losses": (40,), "predictions": (40,), "leverages": (40,), "downdate": (40,)},
        absent=("grad_l2", "grad_l1"),
    )
    ref = _core.loo(
        X,
        y,
        None,
        "logistic",
        lam,
        fit_intercept=True,
        method="alo",
        tol=TOL,
        max_iter=100,
        n_threads=1,
    )
    np.testing.assert_allclose(a.predictions, ref.predictions, rtol=1e-9)
    # the tangents: directional derivatives of the exact gradient, against central
    # differences of the gradient along each direction
    D2 = np.asfortranarray(np.column_stack([np.ones(3), [1.0, 0.0, 0.0]]))
    D1 = np.zeros((3, 2), order="F")
    t = ts.alo_tangents(D2, D1)
    _check_class(
        t,
        _core.AloTangentsResult,
        {**FIT_SCALARS, "n_not_converged": int},
        {
            "grad_l2": (3,),
            "grad_l1": (3,),
            "tangent_l2": (3, 2),
            "tangent_l1": (3, 2),
            "losses": (40,),
        },
    )
    assert isinstance(t, _core.LooResult)
    step = 1e-5

    def grad_l2(pen):
        return _core.loo(
            X,
            y,
            None,
            "logistic",
            pen,
            fit_intercept=True,
            method="alo",
            tol=TOL,
            max_iter=100,
            n_threads=1,
            gradient=True,
        ).grad_l2

    for k in range(2):
        g = [grad_l2(lam + sgn * step * D2[:, k]) for sgn in (1.0, -1.0)]
        np.testing.assert_allclose(t.tangent_l2[:, k], (g[0] - g[1]) / (2 * step), rtol=1e-5)


def test_kfold_and_holdout_results_are_the_fold_refits():
    X, y = make_data("squared", 36, 3, seed=5)
    lam = np.full(3, 1.5)
    folds = np.arange(36, dtype=np.int32) % 4
    r = _core.kfold(
        X,
        y,
        None,
        "squared",
        lam,
        fit_intercept=True,
        folds=folds,
        n_folds=4,
        method="exact",
        tol=TOL,
        max_iter=100,
        n_threads=1,
    )
    scalars = {
        **FIT_SCALARS,
        "n_not_converged": int,
        "n_woodbury": int,
        "seconds_fit": float,
        "seconds_folds": float,
    }
    _check_class(r, _core.KFoldResult, scalars, {"losses": (36,), "predictions": (36,)})
    ref = np.empty(36)
    with threadpool_limits(1):
        for k in range(4):
            tr, te = folds != k, folds == k
            beta = ridge_solve(X[tr], y[tr], lam)
            ref[te] = beta[0] + X[te] @ beta[1:]
    np.testing.assert_allclose(r.predictions, ref, rtol=RTOL)
    np.testing.assert_allclose(r.losses, loss_value("squared", y, ref), rtol=1e-7, atol=1e-14)
    assert r.seconds_fit >= 0.0 and r.seconds_folds >= 0.0
    # one step on the exact fold-out Hessian is exact for ridge; folds of 9 samples,
    # p1 = 4: the p x p form
    a = _core.kfold(
        X,
        y,
        None,
        "squared",
        lam,
        fit_intercept=True,
        folds=folds,
        n_folds=4,
        method="alo",
        tol=TOL,
        max_iter=100,
        n_threads=1,
    )
    np.testing.assert_allclose(a.predictions, ref, rtol=RTOL)
    # held-out sets (CSR): set 0 = fold 0, set 1 = samples 0..4 (overlapping it)
    sets = [np.flatnonzero(folds == 0), np.arange(5)]
    idx = np.concatenate(sets).astype(np.int32)
    ptr = np.array([0, sets[0].size, idx.size], dtype=np.int32)
    h = _core.holdout(
        X,
        y,
        None,
        "squared",
        lam,
        fit_intercept=True,
        indices=idx,
        indptr=ptr,
        method="exact",
        tol=TOL,
        max_iter=100,
        n_threads=1,
    )
    _check_class(h, _core.KFoldResult, scalars, {"losses": (idx.size,), "predictions": (idx.size,)})
    with threadpool_limits(1):
        keep = np.ones(36, bool)
        keep[sets[1]] = False
        beta = ridge_solve(X[keep], y[keep], lam)
    np.testing.assert_allclose(h.predictions[: sets[0].size], ref[sets[0]], rtol=RTOL)
    np.testing.assert_allclose(h.predictions[sets[0].size :], beta[0] + X[:5] @ beta[1:], rtol=RTOL)


def test_dual_result_and_kernel_ridge():
    # n < p: the dual route; squared loss + L2, exact leave-one-out in closed form
    X, y = make_data("squared", 12, 20, seed=6)
    lam = np.full(20, 2.0)
    r = _core.dual(
        X,
        y,
        None,
        "squared",
        lam,
        fit_intercept=True,
        method="alo",
        tol=TOL,
        max_iter=100,
        n_threads=1,
    )
    scalars = {
        "intercept": float,
        "n_iter": int,
        "converged": bool,
        "objective": float,
        "grad_norm": float,
        "n_not_converged": int,
    }
    arrays = {
        "coef": (20,),
        "alpha": (12,),
        "losses": (12,),
        "predictions": (12,),
        "leverages": (12,),
        "downdate": (12,),
    }
    _check_class(r, _core.DualResult, scalars, arrays, absent=("grad_l2", "grad_l1"))
    with threadpool_limits(1):
        beta = ridge_solve(X, y, lam)
        ref = ridge_exact_loo(X, y, lam)
    np.testing.assert_allclose(np.r_[r.intercept, r.coef], beta, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(r.predictions, ref, rtol=RTOL, atol=1e-12)
    # the fit only: no leave-one-out fields
    f = _core.dual(
        X,
        y,
        None,
        "squared",
        lam,
        fit_intercept=True,
        method="alo",
        tol=TOL,
        max_iter=100,
        n_threads=1,
        want_loo=False,
    )
    _check_class(
        f,
        _core.DualResult,
        {k: v for k, v in scalars.items() if k != "n_not_converged"},
        {"coef": (20,), "alpha": (12,)},
        absent=("losses", "predictions", "leverages", "downdate", "n_not_converged", "grad_l2"),
    )
    np.testing.assert_array_equal(f.coef, r.coef)
    # kernel ridge from the linear kernel: the same leave-one-out predictions
    k = _core.kernel_ridge_loo(X @ X.T, y, None, 2.0, fit_intercept=True)
    _check_class(k, _core.DualResult, scalars, {"alpha": (12,), "predictions": (12,)})
    np.testing.assert_allclose(k.predictions, ref, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(X.T @ k.alpha / 2.0, beta[1:], rtol=RTOL, atol=1e-12)


def test_ridge_path_and_spectrum_results():
    X, y = make_data("squared", 25, 3, seed=7)
    lams = np.array([0.1, 3.0])
    r = _core.ridge_path(X, y, None, lams, fit_intercept=True, n_threads=1)
    shapes = {"losses": (25, 2), "predictions": (25, 2), "coef": (3, 2), "intercept": (2,)}
    _check_class(r, _core.RidgePathResult, {}, shapes)
    for j, lam in enumerate(lams):
        with threadpool_limits(1):
            beta = ridge_solve(X, y, lam)
            ref = ridge_exact_loo(X, y, lam)
        np.testing.assert_allclose(r.coef[:, j], beta[1:], rtol=RTOL)
        assert r.intercept[j] == pytest.approx(beta[0], rel=RTOL)
        np.testing.assert_allclose(r.predictions[:, j], ref, rtol=RTOL)
        np.testing.assert_allclose(r.losses[:, j], loss_value("squared", y, ref), rtol=1e-7)
    Z = np.column_stack([y, y[::-1]])
    s = _core.ridge_spectrum(X, Z, fit_intercept=True, n_threads=1)
    _check_class(
        s, _core.RidgeSpectrumResult, {}, {"s": (3,), "V": (3, 3), "C": (3, 2), "mu": (3,)}
    )
    Xc = X - X.mean(axis=0)
    np.testing.assert_allclose(s.mu, X.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(np.sort(s.s), np.linalg.eigvalsh(Xc.T @ Xc), rtol=1e-10)
    np.testing.assert_allclose(s.V @ np.diag(s.s) @ s.V.T, Xc.T @ Xc, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(s.C, s.V.T @ Xc.T @ Z, rtol=1e-10, atol=1e-10)


def test_multi_ridge_results():
    rng = np.random.default_rng(8)
    X = rng.standard_normal((30, 3))
    Y = X @ rng.standard_normal((3, 2)) + rng.standard_normal((30, 2))
    mr = _core.MultiRidge(X, Y, None, fit_intercept=True, penalty=None, n_threads=1)
    lams = np.array([0.5, 4.0])
    sc = mr.scores(lams, 1)
    _check_class(sc, _core.MultiRidgeScores, {"rank": int, "passes": float}, {"s2": (2, 2)})
    assert sc.s4.shape == (2, 2)
    for j, lam in enumerate(lams):
        for t in range(2):
            with threadpool_limits(1):
                e = Y[:, t] - ridge_exact_loo(X, Y[:, t], lam)
            assert sc.s2[j, t] == pytest.approx(np.sum(e**2), rel=1e-9)
            assert sc.s4[j, t] == pytest.approx(np.sum(e**4), rel=1e-9)
    sol = mr.solve(np.array([0.5, 4.0]), predictions=True, n_threads=1)
    shapes = {"coef": (3, 2), "intercept": (2,), "predictions": (30, 2)}
    _check_class(sol, _core.MultiRidgeSolution, {}, shapes)
    for t, lam in enumerate([0.5, 4.0]):
        with threadpool_limits(1):
            beta = ridge_solve(X, Y[:, t], lam)
            ref = ridge_exact_loo(X, Y[:, t], lam)
        np.testing.assert_allclose(sol.coef[:, t], beta[1:], rtol=RTOL)
        assert sol.intercept[t] == pytest.approx(beta[0], rel=RTOL)
        np.testing.assert_allclose(sol.predictions[:, t], ref, rtol=RTOL)
    _check_class(
        mr.solve(lams, predictions=False, n_threads=1),
        _core.MultiRidgeSolution,
        {},
        {"coef": (3, 2)},
        absent=("predictions",),
    )


def _softmax(E):
    Z = np.exp(E - E.max(axis=1, keepdims=True))
    return Z / Z.sum(axis=1, keepdims=True)


def _mn_data(n=30, p=2, K=3, seed=9):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = np.argmax(X @ rng.standard_normal((p, K)) + rng.standard_normal((n, K)), axis=1)
    y[:K] = np.arange(K)  # every class present
    return X, y.astype(np.float64)


def _sk_multinomial(X, y, lam):
    with threadpool_limits(1):
        return LogisticRegression(C=1.0 / lam, solver="newton-cholesky", tol=1e-12).fit(X, y)


def test_multinomial_results():
    X, y = _mn_data()
    K, lam = 3, 0.5
    mn_scalars = {
        "n_iter": int,
        "converged": bool,
        "objective": float,
        "grad_norm": float,
        "hessian_passes": int,
        "hessian_products": int,
    }
    f = _core.multinomial_fit(
        X, y, None, K, np.full(2, lam), fit_intercept=True, tol=TOL, max_iter=100, n_threads=1
    )
    _check_class(f, _core.MultinomialFitResult, mn_scalars, {"coef": (K, 2), "intercept": (K,)})
    sk = _sk_multinomial(X, y, lam)
    np.testing.assert_allclose(f.coef, sk.coef_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(
        _softmax(X @ f.coef.T + f.intercept), sk.predict_proba(X), rtol=1e-7, atol=1e-9
    )
    r = _core.multinomial_loo(
        X,
        y,
        None,
        K,
        np.full(2, lam),
        fit_intercept=True,
        method="exact",
        tol=TOL,
        max_iter=100,
        n_threads=1,
    )
    _check_class(
        r,
        _core.MultinomialLooResult,
        {**mn_scalars, "n_not_converged": int},
        {"coef": (K, 2), "predictions": (30, K), "losses": (30,)},
        absent=("leverages", "det", "gradient"),
    )
    assert isinstance(r, _core.MultinomialFitResult)
    ref = np.empty((30, K))
    for i in range(30):
        keep = np.arange(30) != i
        ref[i] = _sk_multinomial(X[keep], y[keep], lam).predict_proba(X[i : i + 1])[0]
    np.testing.assert_allclose(_softmax(r.predictions), ref, rtol=1e-6, atol=1e-8)
    yi = y.astype(int)
    np.testing.assert_allclose(r.losses, -np.log(ref[np.arange(30), yi]), rtol=1e-6)
    a = _core.multinomial_loo(
        X,
        y,
        None,
        K,
        np.full(2, lam),
        fit_intercept=True,
        method="alo",
        tol=TOL,
        max_iter=100,
        n_threads=1,
        beta0=None,
        refit=True,
        return_gradient=True,
    )
    _check_class(
        a,
        _core.MultinomialLooResult,
        mn_scalars,
        {"predictions": (30, K), "leverages": (30, K, K), "det": (30,), "gradient": (2,)},
    )
    assert np.all(a.det > 0.0)


def test_chunk_sums_results():
    X, y = make_data("logistic", 20, 3, seed=10)
    w = np.random.default_rng(0).uniform(0.5, 2.0, 20)
    beta = np.array([0.2, -0.3, 0.1, 0.4])
    step = np.array([0.1, 0.2, -0.1, 0.05])
    c = _core.chunk_sums(
        X,
        y,
        w,
        "logistic",
        fit_intercept=True,
        beta=beta,
        hessian=True,
        check=True,
        n_threads=1,
        offset=None,
        step=step,
    )
    _check_class(
        c,
        _core.ChunkSumsResult,
        {"loss": float, "weight": float, "step_max": float},
        {"grad": (4,), "hess": (4, 4)},
    )
    Xt = _intercept_design(X)
    eta = Xt @ beta
    mu = 1.0 / (1.0 + np.exp(-eta))
    assert c.loss == pytest.approx(w @ loss_value("logistic", y, eta), rel=1e-13)
    assert c.weight == pytest.approx(w.sum(), rel=1e-14)
    np.testing.assert_allclose(c.grad, Xt.T @ (w * (mu - y)), rtol=1e-12, atol=1e-13)
    H = Xt.T @ ((w * mu * (1 - mu))[:, None] * Xt)
    np.testing.assert_allclose(c.hess, H, rtol=1e-12, atol=1e-13)
    assert c.step_max == pytest.approx(np.max(np.abs(Xt @ step)), rel=1e-14)
    no_h = _core.chunk_sums(
        X, y, w, "logistic", fit_intercept=True, beta=beta, hessian=False, check=False, n_threads=1
    )
    _check_class(no_h, _core.ChunkSumsResult, {"step_max": float}, {"grad": (4,)}, ("hess",))
    # the multinomial chunk sums: no step_max
    Xm, ym = _mn_data(n=20)
    bm = np.linspace(-0.3, 0.3, 9)
    m = _core.multinomial_chunk_sums(
        Xm, ym, None, 3, np.ones(2), fit_intercept=True, beta=bm, hessian=False, n_threads=1
    )
    _check_class(
        m,
        _core.ChunkSumsResult,
        {"loss": float, "weight": float},
        {"grad": (9,)},
        absent=("hess", "step_max"),
    )
    E = _intercept_design(Xm) @ bm.reshape(3, 3).T
    ce = np.log(np.exp(E).sum(axis=1)) - E[np.arange(20), ym.astype(int)]
    assert m.loss == pytest.approx(ce.sum(), rel=1e-13)


def test_chunk_loo_results_are_press_for_ridge():
    X, y = make_data("squared", 24, 3, seed=11)
    lam = 1.2
    Xt = _intercept_design(X)
    with threadpool_limits(1):
        beta = ridge_solve(X, y, lam)
        ref = ridge_exact_loo(X, y, lam)
    H = np.asfortranarray(Xt.T @ Xt + np.diag([0.0, lam, lam, lam]))
    half = slice(0, 12)  # one chunk of the problem, given the whole problem's H
    c = _core.chunk_loo(
        X[half],
        y[half],
        None,
        "squared",
        fit_intercept=True,
        beta=beta,
        H=H,
        method="alo",
        gradient=False,
        inv_sw=1 / 24,
        n_threads=1,
    )
    shapes = dict.fromkeys(("eta", "losses", "predictions", "leverages", "downdate"), (12,))
    _check_class(c, _core.ChunkLooResult, {}, shapes, absent=("r", "S"))
    np.testing.assert_allclose(c.predictions, ref[half], rtol=RTOL)
    np.testing.assert_allclose(c.eta, Xt[half] @ beta, rtol=1e-12)
    g = _core.chunk_loo(
        X[half],
        y[half],
        None,
        "squared",
        fit_intercept=True,
        beta=beta,
        H=H,
        method="alo",
        gradient=True,
        inv_sw=1 / 24,
        n_threads=1,
    )
    _check_class(g, _core.ChunkLooResult, {}, {"r": (4,), "S": (4, 4)})
    # the multinomial chunk: leverages are K x K blocks, no r
    Xm, ym = _mn_data(n=20)
    fm = _core.multinomial_fit(
        Xm, ym, None, 3, np.ones(2), fit_intercept=True, tol=TOL, max_iter=100, n_threads=1
    )
    bm = np.column_stack([fm.intercept, fm.coef]).ravel()
    Hm = np.eye(9)  # any SPD matrix: the fields' shapes only
    m = _core.multinomial_chunk_loo(
        Xm,
        ym,
        None,
        3,
        np.ones(2),
        fit_intercept=True,
        beta=bm,
        H=Hm,
        method="alo",
        n_threads=1,
        gradient=True,
    )
    _check_class(
        m,
        _core.ChunkLooResult,
        {},
        {"predictions": (20, 3), "eta": (20, 3), "leverages": (20, 3, 3), "S": (9, 9)},
        absent=("r",),
    )
    np.testing.assert_allclose(m.eta, _intercept_design(Xm) @ bm.reshape(3, 3).T, rtol=1e-12)


def test_chunk_refits_results():
    X, y = make_data("poisson", 15, 2, seed=12)
    B = np.asfortranarray(np.array([[0.1, 0.0], [0.2, -0.1], [-0.3, 0.05]]))  # (p1, 2)
    exclude = np.array([3, -1], dtype=np.int32)
    hess_cols = np.array([1], dtype=np.int32)
    r = _core.chunk_refits(
        X,
        y,
        None,
        "poisson",
        fit_intercept=True,
        beta=B,
        exclude=exclude,
        hess_cols=hess_cols,
        n_threads=1,
    )
    _check_class(r, _core.ChunkRefitsResult, {}, {"loss": (2,), "grad": (3, 2), "hess": (3, 3, 1)})
    Xt = _intercept_design(X)
    for j in range(2):
        keep = np.arange(15) != exclude[j]
        eta = Xt[keep] @ B[:, j]
        assert r.loss[j] == pytest.approx(loss_value("poisson", y[keep], eta).sum(), rel=1e-12)
        np.testing.assert_allclose(
            r.grad[:, j], Xt[keep].T @ (np.exp(eta) - y[keep]), rtol=1e-12, atol=1e-13
        )
    eta = Xt @ B[:, 1]
    np.testing.assert_allclose(
        r.hess[:, :, 0], Xt.T @ (np.exp(eta)[:, None] * Xt), rtol=1e-12, atol=1e-13
    )


def _numpy_source(X, y, loss):
    """A sums source over (X, y) written with numpy: (sum l, X~^T l', X~^T D X~ or None,
    max |X~ step|); with cols= (beta zero elsewhere) the gradient and Hessian on those
    coordinates only."""
    Xt = _intercept_design(X)

    def source(beta, step, hessian, clip, cols=None):
        Xc = Xt if cols is None else Xt[:, cols]
        eta = Xt @ beta
        if loss == "logistic":
            mu = 1.0 / (1.0 + np.exp(-eta))
            d1, d2 = mu - y, mu * (1.0 - mu)
        else:
            d1, d2 = eta - y, np.ones_like(eta)
        hess = np.asfortranarray(Xc.T @ (d2[:, None] * Xc)) if hessian else None
        smax = 0.0 if step is None else float(np.max(np.abs(Xt @ step)))
        return float(loss_value(loss, y, eta).sum()), Xc.T @ d1, hess, smax

    return source


def test_sums_fit_results():
    X, y = make_data("logistic", 50, 3, seed=13)
    lam = 0.9
    r = _core.sums_fit(
        _numpy_source(X, y, "logistic"),
        "logistic",
        np.full(3, lam),
        fit_intercept=True,
        beta0=np.zeros(4),
        weight_sum=50.0,
        tol=TOL,
        max_iter=100,
        fresh_end=True,
    )
    scalars = {
        "hessian_at_point": bool,
        "objective": float,
        "n_iter": int,
        "hessian_passes": int,
        "n_evals": int,
        "converged": bool,
        "stalled": bool,
        "grad_norm": float,
    }
    shapes = {"beta": (4,), "grad": (4,), "hessian": (4, 4), "unpenalized_hessian": (4, 4)}
    _check_class(r, _core.SumsFitResult, scalars, shapes)
    with threadpool_limits(1):
        coef, b = sklearn_glm("logistic", X, y, lam)
    np.testing.assert_allclose(r.beta, np.r_[b, coef], rtol=1e-7, atol=1e-9)
    Xt = _intercept_design(X)
    mu = 1.0 / (1.0 + np.exp(-(Xt @ r.beta)))
    Hx = Xt.T @ ((mu * (1.0 - mu))[:, None] * Xt)
    assert r.hessian_at_point
    np.testing.assert_allclose(r.unpenalized_hessian, Hx, rtol=1e-8)
    np.testing.assert_allclose(r.hessian, Hx + np.diag([0.0, lam, lam, lam]), rtol=1e-8)


def test_enet_sums_fit_result_is_the_lasso():
    X, y = make_data("squared", 60, 4, seed=14)
    y = y + 2.0 * X[:, 0]
    l1 = 12.0
    r = _core.enet_sums_fit(
        _numpy_source(X, y, "squared"),
        "squared",
        np.zeros(4),
        np.full(4, l1),
        fit_intercept=True,
        beta0=np.zeros(5),
        weight_sum=60.0,
        tol=TOL,
        max_iter=100,
    )
    scalars = {
        "objective": float,
        "n_iter": int,
        "hessian_passes": int,
        "n_evals": int,
        "converged": bool,
        "grad_norm": float,
    }
    _check_class(r, _core.EnetSumsFitResult, scalars, {"beta": (5,), "grad": (5,)})
    assert r.active.dtype == np.int64
    from sklearn.linear_model import Lasso

    with threadpool_limits(1):  # (1 / 2n) ||y - X w||^2 + alpha ||w||_1, alpha = l1 / n
        sk = Lasso(alpha=l1 / 60.0, tol=1e-14, max_iter=100000).fit(X, y)
    np.testing.assert_allclose(r.beta, np.r_[sk.intercept_, sk.coef_], rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(r.active, np.flatnonzero(sk.coef_))
    m = 1 + r.active.size
    assert r.hessian.shape == (m, m)
    Xa = _intercept_design(X)[:, np.r_[0, r.active + 1]]
    np.testing.assert_allclose(r.hessian, Xa.T @ Xa, rtol=1e-10)
