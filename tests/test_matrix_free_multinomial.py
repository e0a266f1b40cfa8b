"""The multinomial loss on the matrix-free route (docs/math/matrix_free.md, "The
multinomial loss"): Newton-CG fits against the primal multinomial route and an
independent optimizer, randomized leverage blocks against the primal route's exact blocks,
the route's choice under a memory budget, and a grid search of ALOLogisticRegressionCV."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize

import aloocv
from aloocv import _core
from aloocv._validation import core_design
from aloocv.backends import route
from aloocv.backends.common import LOORequest
from aloocv.backends.memory import matrix_free as mf
from aloocv.backends.memory import matrix_free_multinomial as mfm
from aloocv.losses import cross_entropy
from aloocv.problem import Problem


def _data(n=240, p=30, K=4, seed=0, density=None):
    rng = np.random.default_rng(seed)
    if density is None:
        X = rng.standard_normal((n, p))
    else:
        X = sp.random(n, p, density=density, random_state=seed, format="csr")
        X.data = rng.standard_normal(X.nnz)
    W = rng.standard_normal((p, K)) * 0.6
    eta = np.asarray(X @ W) + rng.standard_normal(K) * 0.3
    prob = np.exp(eta - eta.max(axis=1, keepdims=True))
    prob /= prob.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(K, p=q) for q in prob])
    return X, y


def _fit(X, y, solver, **kw):
    return aloocv.fit(X, y, loss="multinomial", solver=solver, tol=1e-10, **kw)


@pytest.mark.parametrize(
    "case",
    ["dense", "csr", "float32", "weights", "no_intercept", "fortran", "per_feature"],
)
def test_fit_equals_primal(case):
    X, y = _data(density=0.3 if case == "csr" else None)
    kw = {"penalty": 2.0}
    if case == "float32":
        X = X.astype(np.float32)
    if case == "fortran":
        X = np.asfortranarray(X)
    if case == "weights":
        kw["sample_weight"] = np.random.default_rng(1).uniform(0.2, 3.0, y.size)
    if case == "no_intercept":
        kw["fit_intercept"] = False
    if case == "per_feature":
        kw["penalty"] = aloocv.L2(np.linspace(0.5, 4.0, X.shape[1]))
    a = _fit(X, y, "primal", **kw)
    b = _fit(X, y, "matrix_free", **kw)
    assert b.converged_ and b.gradient_norm_ <= 1e-10
    np.testing.assert_allclose(b.coef_, a.coef_, atol=1e-7)
    np.testing.assert_allclose(b.intercept_, a.intercept_, atol=1e-7)
    np.testing.assert_allclose(b.objective_, a.objective_, rtol=1e-10)
    if kw.get("fit_intercept", True):
        assert abs(b.intercept_.sum()) < 1e-8  # the primal route's gauge


@pytest.mark.parametrize("case", ["dense", "csr", "float32", "weights", "no_intercept"])
def test_core_fit_equals_primal(case):
    X, y = _data(density=0.3 if case == "csr" else None)
    if case == "float32":
        X = X.astype(np.float32)
    w = np.random.default_rng(1).uniform(0.2, 3.0, y.size) if case == "weights" else None
    kw = dict(fit_intercept=case != "no_intercept", tol=1e-10, max_iter=100, n_threads=1)
    args = (core_design(X), y.astype(float), w, 4, np.full(X.shape[1], 2.0))
    a = _core.multinomial_fit(*args, **kw)
    b = _core.multinomial_cg_fit(*args, **kw)
    assert b.converged and b.grad_norm <= 1e-10
    np.testing.assert_allclose(b.coef, a.coef, atol=1e-7)
    np.testing.assert_allclose(b.intercept, a.intercept, atol=1e-7)


def test_fit_matches_sklearn():
    from sklearn.linear_model import LogisticRegression

    X, y = _data(density=0.3)
    ours = _fit(X, y, "matrix_free", penalty=1.0)
    ref = LogisticRegression(C=1.0, tol=1e-12, max_iter=10000).fit(X, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, atol=1e-5)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, atol=1e-5)


def test_fit_offset_against_lbfgs():
    """The core's offset (n K scores added to X~ B), against scipy's L-BFGS on the same
    objective (the multinomial API has no offset= yet: the core is tested directly)."""
    X, y = _data(n=150, p=8, K=3)
    n, p, K = X.shape[0], X.shape[1], 3
    off = np.random.default_rng(2).standard_normal((n, K))
    lam = np.full(p, 1.5)
    out = _core.multinomial_cg_fit(
        X, y.astype(float), None, K, lam, fit_intercept=True, tol=1e-11, max_iter=100,
        n_threads=1, offset=np.ascontiguousarray(off.ravel()),
    )  # fmt: skip
    assert out.converged

    def f(v):
        B = v.reshape(K, p + 1)
        eta = X @ B[:, 1:].T + B[:, 0] + off
        return cross_entropy(eta, y).sum() + 0.5 * np.sum(lam * B[:, 1:] ** 2)

    ref = minimize(f, np.zeros(K * (p + 1)), method="L-BFGS-B", options={"gtol": 1e-12})
    B = ref.x.reshape(K, p + 1)
    np.testing.assert_allclose(out.coef, B[:, 1:], atol=1e-4)
    # the intercepts up to the gauge (a constant added to every class)
    b = B[:, 0] - B[:, 0].mean()
    np.testing.assert_allclose(out.intercept, b, atol=1e-4)
    assert abs(out.intercept.sum()) < 1e-8


def test_warm_start_and_given_state():
    X, y = _data(density=0.3)
    a = _fit(X, y, "matrix_free", penalty=2.0)
    b = aloocv.fit(X, y, loss="multinomial", solver="matrix_free", penalty=2.0, tol=1e-10,
                   warm_start=a)  # fmt: skip
    assert b.n_iter_ == 0
    np.testing.assert_array_equal(b.coef_, a.coef_)


def _problem(X, y, lam=2.0, **kw):
    return Problem.build(X, y, loss="multinomial", penalty=lam, tol=1e-10, **kw)


def test_row_blocks_equal_primal_leverages():
    X, y = _data(density=0.3)
    ref = aloocv.loo(X, y, loss="multinomial", solver="primal", penalty=2.0, tol=1e-10)
    pb = _problem(X, y)
    beta = mfm._beta(ref.fit, pb)
    rows = np.array([0, 7, 100, 239])
    np.testing.assert_allclose(mfm.row_blocks(pb, beta, rows), ref.leverages[rows], atol=1e-7)


def _group_means(pb, beta, n_probes, seed=mf.PROBE_SEED):
    plain, control, diag0, *_ = _core.multinomial_random_blocks(
        *mfm._common(pb), fit_intercept=pb.fit_intercept, beta=beta, n_probes=n_probes,
        n_groups=1, seed=seed, cg_rtol=1e-10, max_cg=1000, n_threads=1,
    )  # fmt: skip
    return plain[:, 0], control[:, 0] + diag0


def test_random_blocks_converge_to_exact():
    """Block Hutchinson: E[(A z)_i z_i^T] = A_ii; the error of the mean over probes falls
    like 1/sqrt(m) for both estimators."""
    X, y = _data(density=0.3)
    ref = aloocv.loo(X, y, loss="multinomial", solver="primal", penalty=2.0, tol=1e-10)
    pb = _problem(X, y)
    beta = mfm._beta(ref.fit, pb)
    a, b = np.triu_indices(4)
    exact = ref.leverages[:, a, b]  # packed, row by row
    errs = {}
    for m in (16, 4096):
        plain, control = _group_means(pb, beta, m)
        errs[m] = [np.sqrt(np.mean((e - exact) ** 2)) for e in (plain, control)]
    scale = np.sqrt(np.mean(exact**2))
    for k in range(2):
        assert errs[4096][k] < 0.1 * errs[16][k]  # 1/16 expected
        assert errs[4096][k] < 0.1 * scale
    assert errs[4096][1] < errs[4096][0]  # the control variate helps here


def test_alo_mean_and_stderr_cover_exact_blocks(monkeypatch):
    """The randomized ALO mean against ALO at the exact blocks (the primal route), over
    several probe seeds: the reported standard error covers the error, and the mean
    converges as the probes grow (rtol= asks for more)."""
    X, y = _data(n=600, p=40, density=0.25)
    ref = aloocv.loo(X, y, loss="multinomial", solver="primal", penalty=1.0, tol=1e-10)
    pb = _problem(X, y, 1.0)
    beta = mfm._beta(ref.fit, pb)
    covered, errs, ses = 0, [], []
    for seed in range(6):
        monkeypatch.setattr(mf, "PROBE_SEED", 1000 + seed)
        est = mfm.estimate(pb, beta)
        err = abs(est.losses.mean() - ref.losses.mean())
        se = est.info.mean_stderr
        covered += err <= 3.0 * se
        errs.append(err)
        ses.append(se)
    assert covered >= 5
    assert np.mean(errs) < 0.01 * ref.losses.mean()
    monkeypatch.setattr(mf, "PROBE_SEED", 1000)
    fine = mfm.estimate(pb, beta, rtol=1e-3)
    assert fine.info.n_probes > 8
    assert fine.info.mean_stderr < np.mean(ses)
    assert abs(fine.losses.mean() - ref.losses.mean()) < 3.0 * fine.info.mean_stderr + 1e-4


def test_alo_at_exact_blocks_equals_primal():
    """The jackknife's evaluation (_alo_blocks) at the exact blocks is the primal route's
    ALO: scores, losses and det(I - D K)."""
    X, y = _data(density=0.3)
    w = np.random.default_rng(3).uniform(0.5, 2.0, y.size)
    ref = aloocv.loo(X, y, loss="multinomial", solver="primal", penalty=2.0, tol=1e-10,
                     sample_weight=w)  # fmt: skip
    pb = _problem(X, y, sample_weight=w)
    eta = ref.fit.decision_function(X)
    loss, pred, det = mfm._alo_blocks(pb, mfm._Curvature.at(pb, eta), ref.leverages)
    np.testing.assert_allclose(pred, ref.predictions, atol=1e-9)
    np.testing.assert_allclose(loss, ref.losses, atol=1e-9)
    np.testing.assert_allclose(det, ref.downdate, atol=1e-9)


def test_loo_result_fields():
    X, y = _data(n=600, density=0.3)
    res = aloocv.loo(X, y, loss="multinomial", solver="matrix_free", penalty=5.0, tol=1e-10)
    n, K = y.size, 4
    assert res.fit.converged_ and res.error_estimate is not None
    assert res.predictions.shape == (n, K) and res.leverages.shape == (n, K, K)
    assert res.randomized is not None and res.randomized.n_probes >= 8
    assert res.randomized.leverage_stderr.shape == (n, K, K)
    assert res.downdate.shape == (n,) and res.method == "alo"
    np.testing.assert_allclose(res.losses.mean(), res.mean, rtol=1e-12)


def test_loo_at_given_coef_and_with_rtol():
    """Bring your own fit: the same estimate at the same coefficients (the same probes);
    rtol= asks the probes and the trust layer's refits for a mean within rtol."""
    X, y = _data(n=600, density=0.3)
    kw = {"loss": "multinomial", "solver": "matrix_free", "penalty": 5.0, "tol": 1e-10}
    res = aloocv.loo(X, y, **kw)
    given = aloocv.loo(X, y, coef=res.fit.coef_, intercept=res.fit.intercept_, **kw)
    np.testing.assert_allclose(given.losses, res.losses, rtol=1e-9)
    fine = aloocv.loo(X, y, rtol=0.02, **kw)
    ref = aloocv.loo(X, y, **{**kw, "solver": "primal"})
    assert fine.randomized.n_probes >= res.randomized.n_probes
    assert abs(fine.mean - ref.mean) <= 0.02 * ref.mean


def test_route_under_memory_limit():
    """A small memory_limit= rules the primal route's K p1 x K p1 Hessian out: auto takes
    the matrix-free route, solver='primal' raises MemoryError."""
    X, y = _data(n=1000, p=300, K=5, density=0.05)
    pb = _problem(X, y, memory_limit="20MB")
    assert route.choose(pb, "loo", loo=LOORequest()).solver == "matrix_free"
    assert route.choose(pb, "fit").solver == "matrix_free"
    with pytest.raises(MemoryError, match="Hessian"):
        route.choose(pb, "loo", solver="primal", loo=LOORequest())
    with pytest.raises(MemoryError):
        aloocv.loo(X, y, loss="multinomial", penalty=20.0, solver="primal", memory_limit="20MB")
    res = aloocv.loo(X, y, loss="multinomial", penalty=20.0, memory_limit="20MB")
    assert res.randomized is not None
    # the cost model: matrix-free on these sparse rows even with room (measured 0.19 vs
    # 0.67 CPU s), the primal route's exact blocks on a small dense problem (0.01 vs 0.09 s)
    assert route.choose(_problem(X, y), "loo", loo=LOORequest()).solver == "matrix_free"
    assert route.choose(_problem(*_data()), "loo", loo=LOORequest()).solver == "primal"


def test_route_refusals():
    X, y = _data(density=0.3)
    pb = _problem(X, y)
    for req in (LOORequest(method="exact"), LOORequest(return_gradient=True)):
        with pytest.raises(ValueError, match="solver='primal'"):
            route.choose(pb, "loo", solver="matrix_free", loo=req)
    with pytest.raises(ValueError, match="fit and loo"):
        route.choose(pb, "kfold", solver="matrix_free")
    with pytest.raises(ValueError, match="solver"):
        route.choose(pb, "loo", solver="dual", loo=LOORequest())
    small = _problem(*_data(n=300, p=400, K=5, density=0.05), memory_limit="20MB")
    with pytest.raises(ValueError, match="method='grid'"):
        route.choose(small, "tune", search="auto")
    assert route.choose(small, "tune", search="grid").solver == "matrix_free"


def test_costs_multinomial():
    X, y = _data(n=300, p=400, K=5, density=0.05)
    c = route.costs(_problem(X, y))
    assert set(c) == {"primal", "matrix_free"}
    assert c["primal"] > (5 * 401) ** 3 and c["matrix_free"] > 0


def test_logistic_cv_multiclass_sparse_same_C():
    """ALOLogisticRegressionCV on sparse X with 4 classes, on the matrix-free route (the
    cost model's choice here, and forced by the memory budget): the C of the primal
    route's exact-block ALO over the same grid."""
    X, y = _data(n=400, p=300, K=4, density=0.05, seed=4)
    Cs = np.logspace(-2, 0, 5)
    for kw in ({}, {"memory_limit": "10MB"}):
        assert route.choose(_problem(X, y, **kw), "tune", search="grid").solver == "matrix_free"
    ref = [
        aloocv.loo(X, y, loss="multinomial", penalty=1.0 / C, solver="primal", tol=1e-10)
        for C in Cs
    ]
    best = int(np.argmin([r.mean for r in ref]))
    for kw in ({}, {"memory_limit": "10MB"}):
        clf = aloocv.ALOLogisticRegressionCV(Cs=Cs, **kw).fit(X, y)
        assert clf.multi_class_ == "multinomial"
        np.testing.assert_array_equal(clf.C_, Cs[best])
        np.testing.assert_allclose(clf.coef_, ref[best].fit.coef_, atol=1e-5)
    with pytest.raises(ValueError, match="method='grid'"):
        aloocv.ALOLogisticRegressionCV(Cs=Cs, search="gradient").fit(X, y)
    # a small dense problem stays on the primal route
    assert route.choose(_problem(*_data()), "tune", search="grid").solver == "primal"
