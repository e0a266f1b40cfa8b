"""The matrix-free route (``solver="matrix_free"``, docs/math/matrix_free.md): Newton-CG
fits against the exact-Hessian fits, randomized leverages against the exact ones (rate in
the number of probes), the jackknife's standard error against the true error, the
route's choice and its refusals."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.stats import t as student_t
from threadpoolctl import threadpool_limits

import aloocv
from aloocv.backends import route
from aloocv.backends.memory import matrix_free as mfm
from aloocv.backends.memory import matrix_free_multinomial as mfm_multi
from aloocv.problem import Problem
from conftest import make_data


def _sparse_text(n: int, p: int, per_row: int, seed: int = 0):
    """A small text-like design: Zipf column frequencies, L2-normalized rows."""
    rng = np.random.default_rng(seed)
    prob = np.arange(1, p + 1) ** -1.1
    prob /= prob.sum()
    cols = rng.choice(p, size=n * per_row, p=prob)
    rows = np.repeat(np.arange(n), per_row)
    X = sp.csr_matrix((rng.exponential(1.0, n * per_row), (rows, cols)), shape=(n, p))
    X.sum_duplicates()
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.csr_matrix(sp.diags(1.0 / np.maximum(norms, 1e-12)) @ X)
    eta = X @ (rng.standard_normal(p) * 3.0)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-eta))).astype(np.float64)
    return X, y


def _quiet(f, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(*args, **kwargs)


# ----------------------------------------------------------------------------- fits
@pytest.mark.parametrize("loss", ["logistic", "poisson", "gamma", "squared"])
@pytest.mark.parametrize("layout", ["C", "F", "csr", "float32"])
def test_newton_cg_fit_equals_the_exact_hessian_fit(loss, layout):
    X, y = make_data(loss, 300, 20, seed=3)
    rng = np.random.default_rng(1)
    w = rng.uniform(0.5, 2.0, X.shape[0])
    if layout == "F":
        X = np.asfortranarray(X)
    elif layout == "csr":
        X = sp.csr_matrix(np.where(np.abs(X) > 0.8, X, 0.0))
    elif layout == "float32":
        X = X.astype(np.float32)
    pen = aloocv.L2(np.linspace(0.5, 3.0, X.shape[1]))
    ref = aloocv.fit(X, y, loss=loss, penalty=pen, sample_weight=w, tol=1e-10, solver="primal")
    got = aloocv.fit(X, y, loss=loss, penalty=pen, sample_weight=w, tol=1e-10, solver="matrix_free")
    assert got.converged_
    scale = 1.0 + np.abs(ref.coef_).max()
    np.testing.assert_allclose(got.coef_, ref.coef_, atol=1e-7 * scale)
    np.testing.assert_allclose(got.intercept_, ref.intercept_, atol=1e-7 * scale)
    assert got.hessian_passes_ == 0  # no p x p matrix was formed


def test_newton_cg_fit_with_an_offset_matches_the_primal_fit():
    X, y = make_data("poisson", 250, 12, seed=5)
    off = np.random.default_rng(2).normal(0.0, 0.3, X.shape[0])
    kw = dict(loss="poisson", penalty=aloocv.L2(1.0), offset=off, tol=1e-10)
    ref = aloocv.fit(X, y, solver="primal", **kw)
    got = aloocv.fit(X, y, solver="matrix_free", **kw)
    np.testing.assert_allclose(got.coef_, ref.coef_, atol=1e-7)


# ----------------------------------------------------------------------------- leverages
def _probe_call(pb, beta, *, n_probes, dual, seed=1):
    return mfm.point(pb, beta).core.random_leverages(
        n_probes=n_probes, n_groups=8, seed=seed, cg_rtol=1e-10, max_cg=2000, dual=dual
    )


def _exact_and_estimates(n_probes_list, seed=1):
    X, y = make_data("logistic", 400, 30, seed=7)
    lam = 2.0
    exact = aloocv.loo(X, y, penalty=aloocv.L2(lam), solver="primal", tol=1e-10)
    pb = Problem.build(X, y, penalty=aloocv.L2(lam), n_jobs=1)
    beta = np.ascontiguousarray(exact.fit.beta_)
    out = []
    for m in n_probes_list:
        r = _probe_call(pb, beta, n_probes=m, dual=False, seed=seed)
        out.append((r.plain.mean(axis=1), r.diag0 + r.control.mean(axis=1)))
    return exact.leverages, out


def test_randomized_leverages_converge_at_the_monte_carlo_rate():
    h, est = _exact_and_estimates([16, 256])
    for which in (0, 1):  # plain and with the control variate
        e16 = np.sqrt(np.mean((est[0][which] - h) ** 2))
        e256 = np.sqrt(np.mean((est[1][which] - h) ** 2))
        # 16x the probes: 4x smaller error (Monte Carlo rate 1/sqrt(m))
        assert 2.5 < e16 / e256 < 6.5


def test_leverage_estimates_are_unbiased():
    h, est = _exact_and_estimates([1024])
    for which in (0, 1):
        err = est[0][which] - h
        # the mean error over samples is far below the per-sample error
        assert abs(err.mean()) < 0.1 * np.sqrt(np.mean(err**2))


def _jackknife_reference(loss, y, w, eta, g, d, groups, clip):
    """The delete-one-group jackknife of ALO written out in numpy (the formulas of
    docs/math/matrix_free.md, "The jackknife: bias and standard error")."""

    def alo(h):
        dpos = np.maximum(d, 0.0)
        h = np.maximum(h, 0.0)
        dh = np.minimum(dpos * h, clip)
        h = np.where(dpos > 0.0, dh / np.where(dpos > 0.0, dpos, 1.0), h)
        pred = eta + g * h / (1.0 - dh)
        return loss.value(y, pred), pred, h

    G = groups.shape[1]
    h_all = groups.mean(axis=1)
    loss_all, pred, h = alo(h_all)
    dels = [alo((G * h_all - groups[:, k]) / (G - 1))[0] for k in range(G)]
    means = np.array([np.average(lk, weights=w) for lk in dels])
    losses = G * loss_all - (G - 1) / G * np.sum(dels, axis=0)
    lev_se = groups.std(axis=1, ddof=1) / np.sqrt(G)
    return losses, loss_all, pred, h, means, lev_se


@pytest.mark.parametrize("loss_name", ["logistic", "poisson"])
@pytest.mark.parametrize("weighted", [False, True])
def test_the_cores_jackknife_equals_the_formulas(loss_name, weighted):
    # noisy group estimates, some negative and some with d h above the clip, at weights
    from aloocv import _core

    rng = np.random.default_rng(3)
    n, G = 3000, 8
    X, y = make_data(loss_name, n, 5, seed=2)
    pb = Problem.build(X, y, loss=loss_name, n_jobs=1)
    eta = rng.normal(0.0, 1.0, n)
    if loss_name == "poisson":  # means near the counts: finite exp(prediction)
        eta = np.log(y + 0.5) + 0.3 * eta
    der = pb.loss.derivatives(y, eta)
    w = rng.uniform(0.5, 2.0, n) if weighted else None
    g, d = (der[1], der[2]) if w is None else (w * der[1], w * der[2])
    # d h up to 1.5 (clipped) for the logistic loss; below 1 for Poisson (finite exp)
    top, noise = (1.5, 0.4) if loss_name == "logistic" else (0.9, 0.1)
    h = rng.uniform(0.0, top, n) / np.maximum(d, 1e-3)
    groups = h[:, None] * (1.0 + rng.normal(0.0, noise, (n, G)))
    want = _jackknife_reference(pb.loss, y, w, eta, g, d, groups, mfm.DH_CLIP)
    got = _core.alo_jackknife(
        pb.loss.core, y, w, eta, g, d, groups, dh_clip=mfm.DH_CLIP, n_threads=1
    )
    # numpy sums a row's estimates in another order: ulps of h, which the jackknife's
    # G L(h) - (G - 1) / G sum_k L(h_(k)) scales up about G^2 times
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)
    with threadpool_limits(2):
        two = _core.alo_jackknife(
            pb.loss.core, y, w, eta, g, d, groups, dh_clip=mfm.DH_CLIP, n_threads=2
        )
    for a, b in zip(got, two, strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="two groups"):
        _core.alo_jackknife(
            pb.loss.core, y, w, eta, g, d, groups[:, :1], dh_clip=mfm.DH_CLIP, n_threads=1
        )


def test_jackknife_stderr_covers_the_error_of_the_mean():
    X, y = _sparse_text(600, 3000, 20, seed=2)
    lam = 0.2
    exact = _quiet(aloocv.loo, X, y, penalty=aloocv.L2(lam), solver="dual", tol=1e-10)
    pb = Problem.build(X, y, penalty=aloocv.L2(lam), n_jobs=1)
    beta = np.ascontiguousarray(exact.fit.beta_)
    z = []
    G = 16
    for seed in range(12):
        parts = [mfm.leverages(mfm.point(pb, beta), 4 * G, per=4, seed=seed)]
        est, se, _ = mfm._best(pb, parts)
        z.append((est.losses.mean() - exact.mean) / se)
    z = np.abs(np.array(z))
    # 95% nominal with the jackknife's G - 1 degrees of freedom (t = 2.13); 12 draws
    assert np.mean(z < student_t.ppf(0.975, G - 1)) >= 0.75
    assert np.max(z) < 4.5


def test_matrix_free_alo_is_close_to_exact_alo_on_text_like_data():
    X, y = _sparse_text(800, 4000, 25, seed=4)
    for lam in (1.0, 0.1):
        exact = _quiet(aloocv.loo, X, y, penalty=aloocv.L2(lam), solver="dual")
        got = _quiet(aloocv.loo, X, y, penalty=aloocv.L2(lam), solver="matrix_free")
        r = got.randomized
        assert r is not None and r.n_probes >= mfm.N_PROBES and r.converged
        assert abs(got.mean - exact.mean) <= 4.0 * r.mean_stderr + 1e-3 * exact.mean
        np.testing.assert_allclose(got.mean, got.losses.mean())  # the reported mean
        assert got.leverages.min() >= 0.0 and got.downdate.min() > 0.0


def test_rtol_adds_probes_and_refits_until_the_budget_holds():
    X, y = make_data("logistic", 200, 8, seed=11)
    lam = 0.5
    exact = aloocv.loo(X, y, penalty=aloocv.L2(lam), method="exact", solver="primal", tol=1e-10)
    got = _quiet(aloocv.loo, X, y, penalty=aloocv.L2(lam), solver="matrix_free", rtol=0.01)
    assert got.randomized.n_probes > mfm.N_PROBES or got.randomized.mean_stderr <= (
        mfm.RANDOM_SHARE * 0.01 * got.mean
    )
    assert abs(got.mean - exact.mean) <= 0.02 * exact.mean


@pytest.mark.parametrize("shape", ["wide", "wide-dual", "tall"])
def test_threads_give_the_same_leverages(shape):
    # one thread fuses the two products of a block (Operator::gram in the dual form,
    # Operator::hessian_rows for n >= p + 1), two take them one after the other (with
    # enough entries that two threads are used): the same sums
    X, y = _sparse_text(500, 6000, 20, seed=6)
    lam = 0.5
    if shape == "wide-dual":  # no confidently wrong rows: the dual form applies
        X, lam = _sparse_text(700, 20000, 1000, seed=6)[0], 5.0
        y = (np.random.default_rng(0).random(700) < 0.5).astype(np.float64)
    elif shape == "tall":
        X, y = _sparse_text(12000, 2000, 14, seed=6)
    if shape != "wide":
        assert X.nnz > 1.25e5
    pb = Problem.build(X, y, penalty=aloocv.L2(lam), n_jobs=1)
    fit = aloocv.fit(X, y, penalty=aloocv.L2(lam), solver="matrix_free", n_jobs=1)
    beta = np.ascontiguousarray(fit.beta_)
    dual = shape == "wide-dual"
    one = mfm.leverages(mfm.point(pb, beta), 16, per=4, dual=dual).res
    with threadpool_limits(2):
        two = mfm.leverages(
            mfm.point(pb.replace(options=dataclasses.replace(pb.options, n_threads=2)), beta),
            16,
            per=4,
            dual=dual,
        ).res
    assert bool(one.dual) == dual and bool(two.dual) == dual
    np.testing.assert_array_equal(one.plain, two.plain)
    np.testing.assert_array_equal(one.control, two.control)


def test_exact_loo_on_the_matrix_free_route_equals_the_primal_refits():
    X, y = make_data("logistic", 60, 5, seed=2)
    kw = dict(penalty=aloocv.L2(1.0), method="exact", tol=1e-10)
    ref = aloocv.loo(X, y, solver="primal", **kw)
    got = aloocv.loo(X, y, solver="matrix_free", **kw)
    np.testing.assert_allclose(got.losses, ref.losses, rtol=1e-6)


# ----------------------------------------------------------------------------- routes
def test_auto_takes_the_matrix_free_route_for_wide_sparse_data_only():
    Xw, yw = _sparse_text(3000, 20000, 20)
    pb = Problem.build(Xw, yw, penalty=aloocv.L2(1.0))
    c = route.costs(pb)
    assert c["matrix_free"] < min(c["primal"], c["dual"])
    assert route.choose(pb, "loo").solver == "matrix_free"
    Xd, yd = make_data("logistic", 500, 20)
    pd = Problem.build(Xd, yd, penalty=aloocv.L2(1.0))
    assert route.choose(pd, "loo").solver == "primal"
    res = _quiet(aloocv.loo, Xw, yw, penalty=aloocv.L2(1.0))
    assert res.randomized is not None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(penalty=aloocv.ElasticNet(0.1, 1.0)), "L1 term"),
        (dict(method="if"), "method='alo' and 'exact'"),
        (dict(return_gradient=True, loss=aloocv.Tweedie(3.0)), "non-negative curvature"),
    ],
)
def test_matrix_free_refuses_what_it_does_not_compute(kwargs, message):
    X, y = make_data("logistic", 80, 5)
    kwargs.setdefault("penalty", aloocv.L2(1.0))
    with pytest.raises(ValueError, match=message):
        aloocv.loo(X, y, solver="matrix_free", **kwargs)


def test_the_estimator_tunes_wide_sparse_data_on_the_matrix_free_route():
    X, y = _sparse_text(500, 8000, 20, seed=8)
    est = _quiet(aloocv.ALOLogisticRegressionCV(Cs=4).fit, X, y)
    assert est.coef_.shape == (1, 8000)
    pb = Problem.build(X, y, penalty=aloocv.L2(1.0))
    assert route.choose(pb, "tune", search="grid").solver == "matrix_free"


# ----------------------------------------------------------------------------- gradient
def _force_estimator(monkeypatch, kind: str) -> None:
    """Makes the matrix-free route use one estimator (plain or control)."""

    def best(pb, parts):
        r = parts[0].res
        groups = mfm.stacked(parts, control=kind == "control")[0]
        est, se = mfm._jackknife(pb, r.eta, r.g, r.d, groups)
        return est, se, kind

    monkeypatch.setattr(mfm, "_best", best)


@pytest.mark.parametrize("kind", ["plain", "control"])
@pytest.mark.parametrize("loss", ["logistic", "poisson"])
def test_hypergradient_is_the_derivative_of_the_reported_mean(monkeypatch, kind, loss):
    monkeypatch.setattr(mfm, "CG_RTOL", 1e-11)
    _force_estimator(monkeypatch, kind)
    X, y = _sparse_text(250, 1200, 12, seed=5)
    if loss == "poisson":
        y = np.random.default_rng(1).poisson(1.0 + 2.0 * y).astype(np.float64)
    w = np.random.default_rng(2).uniform(0.5, 1.5, X.shape[0])
    lam = np.random.default_rng(3).uniform(0.2, 0.6, X.shape[1])
    # return_gradient=True everywhere: the differentiated estimate (the primal form's; the
    # value-only call may take the dual form, another estimate within its standard error)
    kw = dict(loss=loss, solver="matrix_free", sample_weight=w, tol=1e-12, return_gradient=True)
    res = _quiet(aloocv.loo, X, y, penalty=aloocv.L2(lam), **kw)
    assert res.randomized.estimator == kind
    rng = np.random.default_rng(4)
    for j in rng.choice(np.flatnonzero(np.asarray(X.getnnz(axis=0)) > 2), 3, replace=False):
        step = 1e-4 * lam[j]
        vals = []
        for s in (1.0, -1.0):
            lj = lam.copy()
            lj[j] += s * step
            vals.append(_quiet(aloocv.loo, X, y, penalty=aloocv.L2(lj), **kw).mean)
        fd = (vals[0] - vals[1]) / (2 * step)
        assert abs(res.gradient[j] - fd) <= 1e-4 * abs(fd) + 1e-9, (j, res.gradient[j], fd)
    # a scalar penalty: the sum over features
    one = _quiet(aloocv.loo, X, y, penalty=aloocv.L2(0.4), **kw)
    fd = (
        _quiet(aloocv.loo, X, y, penalty=aloocv.L2(0.4 * (1 + 1e-4)), **kw).mean
        - _quiet(aloocv.loo, X, y, penalty=aloocv.L2(0.4 * (1 - 1e-4)), **kw).mean
    ) / (0.8e-4)
    np.testing.assert_allclose(one.gradient[0], fd, rtol=1e-4)


def test_the_tuning_state_gives_loo_s_value_and_gradient():
    X, y = _sparse_text(300, 2000, 15, seed=9)
    pen = aloocv.L2(0.7)
    pb = Problem.build(X, y, penalty=pen)
    st = route.tune_state(pb, route.Route("memory", "scalar", "matrix_free"))
    st.set_penalty(pb.l2)
    out = st.alo(gradient=True)
    ref = _quiet(aloocv.loo, X, y, penalty=pen, solver="matrix_free", return_gradient=True)
    np.testing.assert_allclose(out.losses.mean(), ref.mean, rtol=1e-10)
    np.testing.assert_allclose(out.grad_l2.sum(), ref.gradient[0], rtol=1e-8)
    tan = st.alo_tangents(np.ones((2000, 1)), np.zeros((2000, 1)))
    assert tan.tangent_l2.shape == (2000, 1) and np.all(np.isfinite(tan.tangent_l2))


def test_self_check_measures_alo_not_the_noise_of_the_leverages():
    X, y = _sparse_text(300, 1500, 20, seed=4)
    lam = 0.1
    # tol 1e-10: a refit stops at max|grad| / n <= tol, which on this design leaves its loss
    # within about 1e-5 of the exact one at the default 1e-8 (6.5e-6 on one row), 2e-9 here
    kw = {"penalty": aloocv.L2(lam), "tol": 1e-10}
    mf = _quiet(aloocv.loo, X, y, solver="matrix_free", **kw)
    ref = _quiet(aloocv.loo, X, y, solver="dual", **kw)
    exact_rows = _quiet(aloocv.loo, X, y, solver="dual", method="exact", **kw).losses
    true = abs(ref.mean - exact_rows.mean()) / exact_rows.mean()  # ALO's own error
    est = mf.error_estimate
    assert est is not None  # the indicator saw risk: the check ran
    # its estimate is of ALO's error, not of the noise of the estimated leverages
    assert est.relative_error <= 3.0 * true + 0.005, (est.relative_error, true)
    # the refits (Newton-CG started at the ALO step) are exact leave-one-out
    np.testing.assert_allclose(est.exact_losses, exact_rows[est.refitted], rtol=1e-6)


# ----------------------------------------------------------------------------- dual form
@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_dual_form_estimates_the_exact_leverages(intercept, weighted):
    X, y = _sparse_text(300, 1500, 20, seed=5)
    w = np.random.default_rng(6).uniform(0.5, 2.0, 300) if weighted else None
    lam = 0.05
    kw = {"penalty": aloocv.L2(lam), "fit_intercept": intercept, "sample_weight": w}
    exact = _quiet(aloocv.loo, X, y, solver="dual", tol=1e-10, **kw)
    pb = Problem.build(X, y, n_jobs=1, **kw)
    beta = np.ascontiguousarray(exact.fit.beta_)
    ww = np.ones(300) if w is None else w
    mu = 1.0 / (1.0 + np.exp(-(X @ exact.fit.coef_ + exact.fit.intercept_)))
    d = ww * mu * (1.0 - mu)
    errs = {}
    for m in (32, 512):
        r = _probe_call(pb, beta, n_probes=m, dual=True)
        assert r.dual and r.exact_rows <= 16
        for name, h in (("plain", r.plain.mean(1)), ("control", r.diag0 + r.control.mean(1))):
            # the error of d_i h_i (the hat matrix's diagonal, what ALO uses)
            errs[name, m] = np.sqrt(np.mean((d * (h - exact.leverages)) ** 2))
    for name in ("plain", "control"):
        # 16x the probes: about 4x smaller error (Monte Carlo rate 1/sqrt(m))
        assert 2.5 < errs[name, 32] / errs[name, 512] < 6.5, errs
    # the same probes in the primal form: the same statistical error
    r = _probe_call(pb, beta, n_probes=512, dual=False)
    assert not r.dual
    e_primal = np.sqrt(np.mean((d * (r.plain.mean(1) - exact.leverages)) ** 2))
    assert 0.7 < errs["plain", 512] / e_primal < 1.4


def _jacobi_pcg_iterations(op, minv, B, rtol: float) -> int:
    """Block PCG on op with the preconditioner diag(minv), every column to ``rtol``: the
    iterations until the last column stops."""
    S, R = np.zeros_like(B), B.copy()
    Z = minv[:, None] * R
    P, rz, bn = Z.copy(), (R * Z).sum(0), np.linalg.norm(B, axis=0)
    for it in range(1, 1000):
        Q = op(P)
        a = rz / (P * Q).sum(0)
        S += a * P
        R -= a * Q
        if np.all(np.linalg.norm(R, axis=0) <= rtol * bn):
            return it
        Z = minv[:, None] * R
        rz_new = (R * Z).sum(0)
        P = Z + rz_new / rz * P
        rz = rz_new
    raise AssertionError("no convergence")


def _long_rows(n: int = 600):
    """Rows of about 300 entries, 300 of them in columns every row has (dense normal
    values) and 5 text-like: at a weak penalty the head's pairs per row (k^2 / 2) exceed
    kDualHeadPairs per entry, so the head is cut to fewer columns."""
    rng = np.random.default_rng(0)
    head = sp.csr_matrix(rng.standard_normal((n, 300)) / np.sqrt(300))
    X = sp.hstack([head, _sparse_text(n, 3000, 5, seed=1)[0]]).tocsr()
    return X, (rng.random(n) < 0.5).astype(np.float64)


@pytest.mark.parametrize("design", ["text", "long rows"])
def test_dual_form_solves_take_fewer_iterations_than_jacobi(design):
    # at a weak penalty the frequent columns couple every row: the dual form's solves
    # precondition them exactly (mf::DualHead), in fewer iterations than Jacobi on the same
    # system (written here in numpy) at the same stopping test; rows with hundreds of head
    # entries get fewer head columns (the k x k matrix's pairs), and still fewer iterations
    if design == "text":
        (X, y), lam, share = _sparse_text(400, 4000, 30, seed=5), 1e-3, 0.5
    else:
        (X, y), lam, share = _long_rows(), 1e-2, 0.7
    n = X.shape[0]
    rtol = 3e-3
    fit = _quiet(aloocv.fit, X, y, penalty=aloocv.L2(lam), solver="dual", tol=1e-10)
    pb = Problem.build(X, y, penalty=aloocv.L2(lam), n_jobs=1)
    call = dict(n_probes=8, n_groups=8, seed=1, cg_rtol=rtol, max_cg=2000, dual=True)
    r = mfm.point(pb, fit.beta_).core.random_leverages(**call)
    assert r.dual and r.converged
    sd = np.sqrt(np.asarray(r.d))
    A = sp.csr_matrix(sp.diags(sd) @ X / np.sqrt(lam))
    u = sd / np.linalg.norm(sd)

    def op(V):
        MV = V - np.outer(u, u @ V)
        W = A @ (A.T @ MV)
        return V + W - np.outer(u, u @ W)

    minv = 1.0 / (1.0 + np.asarray(A.multiply(A).sum(axis=1)).ravel())
    Z = np.random.default_rng(0).choice([-1.0, 1.0], size=(n, 8))
    jacobi = _jacobi_pcg_iterations(op, minv, Z, rtol)
    assert r.cg_iterations <= share * jacobi, (r.cg_iterations, jacobi)


def test_dual_form_with_a_cut_head_estimates_the_exact_leverages():
    X, y = _long_rows()
    lam = 1e-2
    exact = _quiet(aloocv.loo, X, y, penalty=aloocv.L2(lam), solver="dual", tol=1e-10)
    pb = Problem.build(X, y, penalty=aloocv.L2(lam), n_jobs=1)
    beta = np.ascontiguousarray(exact.fit.beta_)
    mu = 1.0 / (1.0 + np.exp(-(X @ exact.fit.coef_ + exact.fit.intercept_)))
    d = mu * (1.0 - mu)
    err = {}
    for m in (32, 512):
        r = _probe_call(pb, beta, n_probes=m, dual=True)
        assert r.dual
        err[m] = np.sqrt(np.mean((d * (r.plain.mean(1) - exact.leverages)) ** 2))
    assert 2.5 < err[32] / err[512] < 6.5, err  # the Monte Carlo rate: no bias


def test_dual_form_applies_only_where_it_can():
    X, y = _sparse_text(300, 1500, 20, seed=5)
    lam = 0.05
    exact = _quiet(aloocv.loo, X, y, penalty=aloocv.L2(lam), solver="dual", tol=1e-10)
    beta = np.ascontiguousarray(exact.fit.beta_)
    pb = Problem.build(X, y, penalty=aloocv.L2(lam), n_jobs=1)
    assert _probe_call(pb, beta, n_probes=8, dual=True).dual
    # a feature without a penalty: no dual form
    l2 = np.full(1500, lam)
    l2[3] = 0.0
    pb0 = Problem.build(X, y, penalty=aloocv.L2(l2), n_jobs=1)
    assert not _probe_call(pb0, beta, n_probes=8, dual=True).dual
    # n >= p + 1: no dual form
    Xt, yt = make_data("logistic", 200, 10, seed=8)
    rt = aloocv.fit(Xt, yt, penalty=aloocv.L2(1.0))
    pbt = Problem.build(Xt, yt, penalty=aloocv.L2(1.0), n_jobs=1)
    assert not _probe_call(pbt, np.ascontiguousarray(rt.beta_), n_probes=8, dual=True).dual
    # confidently wrong rows (|l'| > 10 l''): exact leverages for those rows (logistic l''
    # does not depend on y, so the exact leverages stay those of the fit)
    mu = 1.0 / (1.0 + np.exp(-(X @ exact.fit.coef_ + exact.fit.intercept_)))
    conf = np.flatnonzero(np.maximum(mu, 1.0 - mu) > 0.95)[:3]
    assert conf.size == 3
    y2 = y.copy()
    y2[conf] = (mu[conf] < 0.5).astype(np.float64)  # the label the fit finds unlikely
    pb2 = Problem.build(X, y2, penalty=aloocv.L2(lam), n_jobs=1)
    r = _probe_call(pb2, beta, n_probes=8, dual=True)
    assert r.dual and r.exact_rows == 3
    np.testing.assert_allclose(
        r.plain[conf], exact.leverages[conf, None] * np.ones((1, 8)), rtol=1e-6
    )
    np.testing.assert_allclose(r.diag0[conf, None] + r.control[conf], r.plain[conf], rtol=1e-12)


def test_loo_on_wide_data_takes_the_dual_form_unless_differentiated():
    X, y = _sparse_text(300, 1500, 20, seed=4)
    kw = {"penalty": aloocv.L2(0.1), "solver": "matrix_free"}
    a = _quiet(aloocv.loo, X, y, **kw)
    b = _quiet(aloocv.loo, X, y, return_gradient=True, **kw)
    ref = _quiet(aloocv.loo, X, y, penalty=aloocv.L2(0.1), solver="dual")
    assert a.randomized.form == "dual" and b.randomized.form == "primal"
    for r in (a, b):  # both within their stated error of the exact-leverage ALO
        assert abs(r.mean - ref.mean) <= 4.0 * r.randomized.mean_stderr + 1e-3 * ref.mean


def test_probe_calls_stack_into_the_groups_of_one_call(monkeypatch):
    # the doublings (8 probes one by one, 8 more, then groups of 2, 4, 8, 16) give the group
    # estimates of one call with the same probes in MAX_GROUPS groups
    monkeypatch.setattr(mfm, "CG_RTOL", 1e-12)
    X, y = _sparse_text(300, 2000, 15, seed=3)
    fit = aloocv.fit(X, y, penalty=aloocv.L2(0.3), solver="matrix_free", tol=1e-10)
    pb = Problem.build(X, y, penalty=aloocv.L2(0.3), n_jobs=1)
    beta = np.ascontiguousarray(fit.beta_)
    parts, total = [], 0
    for new in (8, 8, 16, 32, 64, 128):
        per = max(1, (total + new) // mfm.MAX_GROUPS)
        parts.append(mfm.leverages(mfm.point(pb, beta), new, per, first_probe=total))
        total += new
    one = mfm.leverages(mfm.point(pb, beta), 256, per=16).res
    for control in (False, True):
        got, per = mfm.stacked(parts, control=control)
        want = np.asarray(one.control if control else one.plain)
        if control:
            want = want + np.asarray(one.diag0)[:, None]
        assert per == 16 and got.shape == (300, 16)
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("loss", ["logistic", "multinomial"])
def test_a_search_starts_each_point_at_half_the_last_points_probes(monkeypatch, loss):
    # weak penalties take more probes (d_i h_i near 1); the next point's first round is half
    # the last point's probes, never fewer than N_PROBES, and its estimate is what probing
    # from N_PROBES up gives (the stacked probes are the same) where those rounds go on
    if loss == "logistic":  # leverages(point, n_probes, per, first_probe=...)
        mod, name, lams = mfm, "leverages", (1e-2, 1e-3)
        start_of = lambda args, kwargs: kwargs["first_probe"]  # noqa: E731
        X, y = _sparse_text(300, 2000, 15, seed=3)
        pb = Problem.build(X, y, penalty=aloocv.L2(1.0), n_jobs=1)
        st = mfm.MatrixFreeTuneState(pb)
    else:
        mod, name, lams = mfm_multi, "_blocks", (1e-3, 1e-4)  # _blocks(..., per, first)
        start_of = lambda args, kwargs: args[0]  # noqa: E731
        X = sp.random(300, 400, density=0.05, random_state=4, format="csr")
        y = np.random.default_rng(4).integers(0, 4, 300).astype(np.float64)
        pb = Problem.build(X, y, loss="multinomial", penalty=aloocv.L2(1.0), n_jobs=1)
        st = mfm_multi.MultinomialMatrixFreeTuneState(pb)
    calls = []
    orig = getattr(mod, name)

    def spy(*args, **kwargs):
        # (point, n_probes, per, ...) or (pb, beta, n_probes, per, ...)
        at = 1 if loss == "logistic" else 2
        pb_ = args[0].pb if loss == "logistic" else args[0]
        calls.append((float(pb_.l2[0]), args[at], start_of(args[at + 2 :], kwargs)))
        return orig(*args, **kwargs)

    monkeypatch.setattr(mod, name, spy)
    totals = []
    for lam in lams:
        st.set_penalty(np.full(X.shape[1], lam))
        out = st.alo(gradient=False)
        firsts = [c for c in calls if c[0] == lam and c[2] == 0]
        totals.append(sum(c[1] for c in calls if c[0] == lam))
        want = max(mod.N_PROBES, totals[0] // 2) if len(totals) == 2 else mod.N_PROBES
        assert len(firsts) == 1 and firsts[0][1] == want
    assert totals[0] >= 4 * mod.N_PROBES  # the second point starts above N_PROBES
    ref = mod.estimate(st.pb, st.beta)  # from N_PROBES up
    assert ref.info.n_probes == totals[1]
    np.testing.assert_allclose(out.losses, ref.losses, rtol=1e-9)


def test_fits_along_a_grid_end_at_the_exact_fits_from_any_start(monkeypatch):
    # the path predictor moves only the fits' start: the same coefficients as fits of
    # each penalty alone (dual route, exact kernel), with fewer passes over X
    X, y = _sparse_text(400, 3000, 15, seed=9)
    lams = np.logspace(2, -3, 6)
    refs = [aloocv.fit(X, y, penalty=aloocv.L2(lam), solver="dual", tol=1e-10) for lam in lams]
    passes = {}
    for predict in (True, False):
        monkeypatch.setattr(mfm, "PATH_MAX_STEP", 1.5 if predict else 0.0)
        st = mfm.MatrixFreeTuneState(Problem.build(X, y, penalty=aloocv.L2(1.0), tol=1e-10))
        passes[predict] = 0
        for lam, ref in zip(lams, refs):
            st.set_penalty(Problem.build(X, y, penalty=aloocv.L2(lam)).l2)
            st.fit()
            passes[predict] += st._out.matvec_passes
            np.testing.assert_allclose(st.beta, ref.beta_, rtol=1e-6, atol=1e-8)
    # 343 vs 428 passes since the fits' CG takes the head block (session 19; the saving in
    # CG iterations shrinks what a better start can save), 20% fewer
    assert passes[True] < 0.85 * passes[False], passes
