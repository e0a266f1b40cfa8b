"""aloocv.fit against scikit-learn and closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Ridge

import aloocv
from conftest import make_data, ridge_solve, sklearn_glm


def rel_err(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) / max(1.0, np.max(np.abs(b)))


@pytest.mark.parametrize("lam", [0.1, 1.0, 30.0])
@pytest.mark.smoke
def test_squared_matches_sklearn_ridge(lam):
    X, y = make_data("squared", 300, 12, seed=3)
    res = aloocv.fit(X, y, loss="squared", penalty=aloocv.L2(lam))
    ref = Ridge(alpha=lam, solver="cholesky").fit(X, y)
    assert rel_err(res.coef_, ref.coef_) < 1e-10
    assert res.intercept_ == pytest.approx(ref.intercept_, rel=1e-10, abs=1e-12)
    assert res.converged_ and res.n_iter_ == 1  # one Newton step solves a quadratic


@pytest.mark.parametrize("loss", ["logistic", "poisson"])
@pytest.mark.parametrize("lam", [0.05, 1.0, 20.0])
@pytest.mark.smoke
def test_glm_matches_sklearn(loss, lam):
    X, y = make_data(loss, 400, 10, seed=4)
    res = aloocv.fit(X, y, loss=loss, penalty=aloocv.L2(lam), tol=1e-10)
    coef, b = sklearn_glm(loss, X, y, lam)
    assert res.converged_
    assert rel_err(res.coef_, coef) < 1e-6
    assert res.intercept_ == pytest.approx(b, rel=1e-6, abs=1e-8)


def test_per_feature_lambda_matches_closed_form():
    X, y = make_data("squared", 120, 6, seed=5)
    lam = np.array([0.0, 0.5, 1.0, 5.0, 50.0, 500.0])
    res = aloocv.fit(X, y, loss="squared", penalty=aloocv.L2(lam))
    beta = ridge_solve(X, y, lam)
    assert rel_err(res.beta_, beta) < 1e-10


def test_per_feature_lambda_logistic_optimality():
    # independent check: the gradient of the objective written in numpy vanishes
    X, y = make_data("logistic", 300, 5, seed=6)
    lam = np.array([0.1, 1.0, 10.0, 100.0, 0.01])
    res = aloocv.fit(X, y, loss="logistic", penalty=aloocv.L2(lam), tol=1e-12)
    eta = X @ res.coef_ + res.intercept_
    r = 1.0 / (1.0 + np.exp(-eta)) - y
    grad = np.concatenate([[r.sum()], X.T @ r + lam * res.coef_])
    assert np.max(np.abs(grad)) < 1e-9


@pytest.mark.parametrize("loss", ["squared", "logistic", "poisson"])
def test_integer_weights_equal_duplicated_rows(loss):
    X, y = make_data(loss, 80, 5, seed=7)
    w = np.random.default_rng(0).integers(0, 4, 80).astype(float)
    a = aloocv.fit(X, y, loss=loss, penalty=aloocv.L2(0.7), sample_weight=w, tol=1e-12)
    rep = np.repeat(np.arange(80), w.astype(int))
    b = aloocv.fit(X[rep], y[rep], loss=loss, penalty=aloocv.L2(0.7), tol=1e-12)
    assert rel_err(a.coef_, b.coef_) < 1e-9
    assert a.intercept_ == pytest.approx(b.intercept_, rel=1e-9, abs=1e-10)
    assert a.objective_ == pytest.approx(b.objective_, rel=1e-10)


def test_weights_match_sklearn():
    X, y = make_data("logistic", 200, 4, seed=8)
    w = np.random.default_rng(1).uniform(0.2, 3.0, 200)
    res = aloocv.fit(X, y, loss="logistic", penalty=aloocv.L2(2.0), sample_weight=w, tol=1e-12)
    coef, b = sklearn_glm("logistic", X, y, 2.0, sample_weight=w)
    assert rel_err(res.coef_, coef) < 1e-6 and res.intercept_ == pytest.approx(b, rel=1e-6)


def test_without_intercept():
    X, y = make_data("squared", 100, 4, seed=9)
    res = aloocv.fit(X, y, loss="squared", penalty=aloocv.L2(1.5), fit_intercept=False)
    assert res.intercept_ == 0.0
    assert rel_err(res.coef_, ridge_solve(X, y, 1.5, intercept=False)) < 1e-10
    ref = Ridge(alpha=1.5, fit_intercept=False).fit(X, y)
    assert rel_err(res.coef_, ref.coef_) < 1e-10


def test_non_convergence_warns():
    X, y = make_data("logistic", 300, 5, seed=10, scale=4.0)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        res = aloocv.fit(X, y, loss="logistic", penalty=aloocv.L2(0.01), max_iter=1)
    assert not res.converged_ and res.n_iter_ == 1


def test_warm_start_converges_immediately():
    X, y = make_data("logistic", 300, 5, seed=11)
    a = aloocv.fit(X, y, loss="logistic", penalty=aloocv.L2(1.0), tol=1e-10)
    b = aloocv.fit(X, y, loss="logistic", penalty=aloocv.L2(1.0), tol=1e-10, warm_start=a)
    assert b.n_iter_ == 1
    assert rel_err(a.coef_, b.coef_) < 1e-10


def test_separable_logistic_with_penalty_converges():
    X = np.array([[-2.0], [-1.0], [1.0], [2.0]])
    y = np.array([0.0, 0.0, 1.0, 1.0])
    res = aloocv.fit(X, y, loss="logistic", penalty=aloocv.L2(1e-3), tol=1e-10)
    assert res.converged_ and np.isfinite(res.coef_).all() and res.coef_[0] > 1


def test_predict_and_decision_function():
    X, y = make_data("poisson", 100, 3, seed=12)
    res = aloocv.fit(X, y, loss="poisson", penalty=aloocv.L2(1.0))
    eta = X @ res.coef_ + res.intercept_
    np.testing.assert_allclose(res.decision_function(X), eta)
    np.testing.assert_allclose(res.predict(X), np.exp(eta))


# -- float32 Newton Hessians far from the optimum (docs/math/newton.md) ----------------
@pytest.mark.parametrize("loss", ["logistic", "poisson"])
def test_single_precision_hessians_leave_the_fit_exact(loss):
    X, y = make_data(loss, 3000, 40, seed=21)
    res = aloocv.fit(X, y, loss=loss, penalty=aloocv.L2(1.0), tol=1e-10)
    coef, b = sklearn_glm(loss, X, y, 1.0)
    # the first Newton steps ran on float32 Hessians; the answer is the float64 optimum
    assert res.single_hessian_passes_ >= 1
    assert res.converged_ and res.gradient_norm_ <= 1e-10
    assert rel_err(res.coef_, coef) < 1e-7
    assert res.intercept_ == pytest.approx(b, rel=1e-7, abs=1e-9)
    # ALO's fit ends on a float64 Hessian: leave-one-out equals the one from a float64
    # factor at the same point (the primal route's leverages, recomputed from the fit)
    loo = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(1.0), tol=1e-10)
    f = loo.fit
    again = aloocv.loo(
        X, y, loss=loss, penalty=aloocv.L2(1.0), coef=f.coef_, intercept=f.intercept_
    )
    np.testing.assert_allclose(loo.leverages, again.leverages, rtol=1e-9)


# -- Hessians from a row subsample in the first decade of a cold fit (docs/math/newton.md)
@pytest.mark.parametrize("loss", ["logistic", "poisson"])
@pytest.mark.parametrize("order", ["random", "sorted", "weighted"])
def test_subsampled_hessians_leave_the_fit_exact(loss, order):
    X, y = make_data(loss, 3000, 20, seed=23)
    w = None
    if order == "sorted":  # rows grouped by the response: every k-th row still spans them
        o = np.argsort(y, kind="stable")
        X, y = X[o], y[o]
    elif order == "weighted":
        w = np.random.default_rng(24).uniform(0.2, 3.0, 3000)
    res = aloocv.fit(X, y, loss=loss, penalty=aloocv.L2(1.0), tol=1e-10, sample_weight=w)
    coef, b = sklearn_glm(loss, X, y, 1.0, sample_weight=w)
    # 3000 rows, 21 columns with the intercept: every 4th row (>= 32 rows per column)
    assert res.sampled_hessian_passes_ >= 1
    assert res.converged_ and res.gradient_norm_ <= 1e-10
    assert rel_err(res.coef_, coef) < 1e-7
    assert res.intercept_ == pytest.approx(b, rel=1e-7, abs=1e-9)
    # the same problem with X in Fortran order is fitted on full Hessians only
    full = aloocv.fit(
        np.asfortranarray(X), y, loss=loss, penalty=aloocv.L2(1.0), tol=1e-10, sample_weight=w
    )
    assert full.sampled_hessian_passes_ == 0
    assert rel_err(res.coef_, full.coef_) < 1e-8


def test_subsampled_hessians_need_64_rows_per_column_and_a_cold_start():
    X, y = make_data("logistic", 3000, 50, seed=25)  # 3000 < 64 x 51 rows
    assert aloocv.fit(X, y, penalty=aloocv.L2(1.0)).sampled_hessian_passes_ == 0
    assert aloocv.loo(X, y, penalty=aloocv.L2(1.0)).fit.sampled_hessian_passes_ == 0
    X, y = make_data("logistic", 3000, 20, seed=25)
    a = aloocv.fit(X, y, penalty=aloocv.L2(1.0), tol=1e-4)
    b = aloocv.fit(X, y, penalty=aloocv.L2(1.0), tol=1e-10, warm_start=a)
    assert a.sampled_hessian_passes_ >= 1 and b.sampled_hessian_passes_ == 0


@pytest.mark.parametrize("loss", ["logistic", "poisson", "gamma"])
def test_alo_fit_with_sampled_hessians_ends_where_full_hessians_end(loss):
    # ALO's fit samples its first Hessians where the sample spans the rows, and still ends
    # on the float64 Hessian at a point polished to the rounding level: leave-one-out
    # equals the one of X in Fortran order (full Hessians only) to rounding
    X, y = make_data(loss, 3000, 20, seed=28)
    kw = {"loss": loss, "penalty": aloocv.L2(1.0)}
    a = aloocv.loo(X, y, **kw)
    b = aloocv.loo(np.asfortranarray(X), y, **kw)
    assert a.fit.sampled_hessian_passes_ >= 1 and b.fit.sampled_hessian_passes_ == 0
    assert a.fit.converged_ and a.fit.gradient_norm_ <= 1e-12
    np.testing.assert_allclose(a.fit.coef_, b.fit.coef_, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(a.losses, b.losses, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(a.leverages, b.leverages, rtol=1e-10)


def test_alo_fit_samples_no_hessian_where_the_sample_misses_heavy_rows():
    # every 4th row sampled (3000 x 21): where the other rows carry the weight, or the rows
    # are heavy-tailed (Student t with 1.2 degrees of freedom), the sampled second moments
    # of the columns are off by more than kSubsampleMomentError: ALO's fit takes full
    # Hessians (a plain fit still samples: its sampled factors serve no fresh end)
    X, y = make_data("logistic", 3000, 20, seed=29)
    w = np.where(np.arange(3000) % 4 == 1, 50.0, 1.0)
    kw = {"penalty": aloocv.L2(1.0)}
    assert aloocv.loo(X, y, sample_weight=w, **kw).fit.sampled_hessian_passes_ == 0
    assert aloocv.loo(X, y, **kw).fit.sampled_hessian_passes_ >= 1
    T = np.random.default_rng(29).standard_t(1.2, (3000, 20))
    assert aloocv.loo(T, y, **kw).fit.sampled_hessian_passes_ == 0
    assert aloocv.fit(T, y, **kw).sampled_hessian_passes_ >= 1


def test_a_damped_step_on_a_sampled_hessian_switches_to_full_ones():
    # Poisson on Student-t(2) rows, every 8th row sampled: the sample misses the heavy rows
    # and underestimates their curvature, so its steps are damped; the drive took 100
    # damped sampled steps without converging before it switched to full Hessians at the
    # first damped one
    rng = np.random.default_rng(1)
    X = rng.standard_t(2, (20000, 10))
    beta = rng.standard_normal(10) / np.sqrt(10) * 2
    y = rng.poisson(np.exp(np.clip(X @ beta, -5, 3))).astype(np.float64)
    kw = {"loss": "poisson", "penalty": aloocv.L2(1.0), "tol": 1e-8}
    res = aloocv.fit(X, y, **kw)
    full = aloocv.fit(np.asfortranarray(X), y, **kw)
    assert full.sampled_hessian_passes_ == 0 and res.sampled_hessian_passes_ >= 1
    assert res.converged_ and res.n_iter_ <= 2 * full.n_iter_
    assert rel_err(res.coef_, full.coef_) < 1e-7


def test_a_plain_fit_with_a_large_sample_samples_every_hessian():
    # 70000 rows, 8 columns with the intercept: every 8th row leaves 8750 >= 1024 x 8
    # sampled rows per column (kSubsampleThroughoutRows): every Hessian of the plain fit is
    # sampled, and the fit ends where full Hessians end
    X, y = make_data("logistic", 70000, 7, seed=30)
    kw = {"penalty": aloocv.L2(1.0), "tol": 1e-10}
    res = aloocv.fit(X, y, **kw)
    assert res.converged_ and res.hessian_passes_ == res.sampled_hessian_passes_ >= 1
    full = aloocv.fit(np.asfortranarray(X), y, **kw)
    assert full.sampled_hessian_passes_ == 0
    assert rel_err(res.coef_, full.coef_) < 1e-8
    # below 1024 rows per column the late Hessians take every row
    X, y = make_data("logistic", 70000, 20, seed=30)
    res = aloocv.fit(X, y, **kw)
    assert res.converged_ and 1 <= res.sampled_hessian_passes_ < res.hessian_passes_


def test_sampling_throughout_ends_where_the_sample_contracts_poorly():
    # Student-t(1.2) rows, 100000 x 11 sampled every 8th row (>= 1024 rows per column):
    # near the optimum the sampled factors contracted max|grad| by only 0.58 a step and the
    # drive stalled above tol; a step contracting by less than kSubsampleLocalContraction
    # (0.5) there switches to full Hessians
    rng = np.random.default_rng(0)
    X = rng.standard_t(1.2, (100000, 10))
    s = np.std(np.clip(X, -10, 10) @ np.ones(10))
    eta = np.clip(X @ rng.standard_normal(10) / s * 1.5, -6, 6)
    y = (rng.random(100000) < 1 / (1 + np.exp(-eta))).astype(np.float64)
    kw = {"penalty": aloocv.L2(1.0), "tol": 1e-8}
    res = aloocv.fit(X, y, **kw)
    full = aloocv.fit(np.asfortranarray(X), y, **kw)
    assert res.converged_ and 1 <= res.sampled_hessian_passes_ < res.hessian_passes_
    assert res.n_iter_ <= full.n_iter_ + 4
    assert rel_err(res.coef_, full.coef_) < 1e-7


def test_subsampled_fit_is_the_same_on_one_and_two_threads():
    # 80000 x 21 sampled every 8th row: 4.4e6 flops, above the serial threshold (4e6)
    X, y = make_data("logistic", 80000, 20, seed=27)
    a = aloocv.fit(X, y, penalty=aloocv.L2(1.0), n_jobs=1)
    b = aloocv.fit(X, y, penalty=aloocv.L2(1.0), n_jobs=2)
    assert a.sampled_hessian_passes_ >= 1
    assert a.n_iter_ == b.n_iter_ and a.sampled_hessian_passes_ == b.sampled_hessian_passes_
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.intercept_ == b.intercept_
    # ALO's fit, its sample's second moments included
    la = aloocv.loo(X, y, penalty=aloocv.L2(1.0), n_jobs=1)
    lb = aloocv.loo(X, y, penalty=aloocv.L2(1.0), n_jobs=2)
    assert la.fit.sampled_hessian_passes_ >= 1
    assert la.fit.n_iter_ == lb.fit.n_iter_
    np.testing.assert_array_equal(la.losses, lb.losses)


def test_subsampled_hessian_on_a_column_the_sample_misses_is_taken_again():
    # a column non-zero in rows 1-3 only, which every 4th row misses, with no penalty on
    # it: the sampled Hessian is singular there and is taken again from every row
    X, y = make_data("logistic", 3000, 20, seed=26)
    X = np.hstack([X, np.zeros((3000, 1))])
    X[1:4, -1] = 1.0
    y[1:4] = [0.0, 1.0, 1.0]
    pen = np.r_[np.ones(20), 0.0]
    res = aloocv.fit(X, y, penalty=aloocv.L2(pen), tol=1e-10)
    assert res.converged_ and res.sampled_hessian_passes_ == 0
    full = aloocv.fit(np.asfortranarray(X), y, penalty=aloocv.L2(pen), tol=1e-10)
    assert rel_err(res.coef_, full.coef_) < 1e-8 and abs(res.coef_[-1]) < 10


def test_ill_conditioned_hessians_stay_in_double_precision():
    rng = np.random.default_rng(22)
    z = rng.standard_normal((2000, 5))
    X = np.hstack([z, z + 1e-4 * rng.standard_normal((2000, 5))])  # near-collinear pairs
    y = (rng.random(2000) < 1 / (1 + np.exp(-z.sum(1)))).astype(np.float64)
    res = aloocv.fit(X, y, penalty=aloocv.L2(1e-6), tol=1e-10)
    assert res.single_hessian_passes_ == 0  # rcond below kSingleMinRcond: float64
    assert res.converged_
    coef, _ = sklearn_glm("logistic", X, y, 1e-6)
    np.testing.assert_allclose(X @ res.coef_, X @ coef, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("loss", ["logistic", "binomial"])
def test_logistic_objective_equals_numpy_to_rounding(loss):
    # the fused step's loss sum (log1p of exp(-|eta|) four rows at a time) against numpy's
    # logaddexp, over |eta| up to ~50 and weighted rows
    rng = np.random.default_rng(40)
    n, p = 20000, 30
    X = rng.standard_normal((n, p)) * 3
    b = rng.standard_normal(p)
    mu = 1 / (1 + np.exp(-(X @ b)))
    y = (rng.random(n) < mu).astype(float) if loss == "logistic" else np.round(mu, 2)
    w = rng.uniform(0.5, 2.0, n)
    r = aloocv.fit(X, y, loss=loss, penalty=aloocv.L2(0.3), sample_weight=w, n_jobs=1)
    eta = X @ r.coef_ + r.intercept_
    assert np.abs(eta).max() > 20
    ref = np.sum(w * (np.logaddexp(0.0, eta) - y * eta)) + 0.5 * 0.3 * np.sum(r.coef_**2)
    assert r.objective_ == pytest.approx(ref, rel=1e-13)
