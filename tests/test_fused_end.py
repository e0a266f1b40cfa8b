"""ALO including its fit: the fit ends on the Hessian at the returned coefficients, at
the cost of at most one Hessian pass more than a Newton fit (a fresh Hessian every step,
computed in numpy here); the counts are exposed as ``FitResult.hessian_passes_`` (issue 13,
item 1). The plain fit ends on chord steps, with fewer Hessians than steps."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
from threadpoolctl import threadpool_limits

import aloocv
from aloocv import _core
from aloocv._validation import core_design
from conftest import make_data


def _logistic(n: int, p: int, scale: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = rng.standard_normal(p) / np.sqrt(p) * scale
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-X @ beta))).astype(np.float64)
    return X, y


def _poisson(n: int, p: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = rng.poisson(np.exp(0.3 * X @ rng.standard_normal(p) / np.sqrt(p))).astype(np.float64)
    return X, y


CASES = [
    ("logistic", 1.0, 2.0, 0),
    ("logistic", 0.1, 4.0, 1),
    ("logistic", 10.0, 1.0, 2),
    ("poisson", 1.0, 0.0, 3),
]


def _data(loss: str, scale: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    return _poisson(400, 20, seed) if loss == "poisson" else _logistic(400, 20, scale, seed)


@pytest.mark.parametrize(("loss", "lam", "scale", "seed"), CASES)
def test_alo_factor_is_the_hessian_at_the_returned_beta(loss, lam, scale, seed):
    X, y = _data(loss, scale, seed)
    pen = aloocv.L2(lam)
    r = aloocv.loo(X, y, loss=loss, penalty=pen, n_jobs=1)
    # reference: the Hessian at the returned coefficients, formed in numpy, and the ALO
    # leave-one-out predictors from it
    b = r.fit.coef_
    eta = X @ b + r.fit.intercept_
    with threadpool_limits(1):
        if loss == "poisson":
            mu = np.exp(eta)
            g, d = mu - y, mu
        else:
            mu = 1.0 / (1.0 + np.exp(-eta))
            g, d = mu - y, mu * (1.0 - mu)
        Xt = np.hstack([np.ones((X.shape[0], 1)), X])
        H = Xt.T @ (Xt * d[:, None]) + np.diag(np.r_[0.0, np.full(X.shape[1], lam)])
        h = np.einsum("ij,ij->i", Xt, np.linalg.solve(H, Xt.T).T)
    np.testing.assert_allclose(r.leverages, h, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(r.predictions, eta + g * h / (1.0 - d * h), rtol=1e-10, atol=1e-12)


def _newton_steps(X: np.ndarray, y: np.ndarray, loss: str, lam: float, tol: float) -> int:
    """Damped Newton in numpy with a fresh Hessian every step (Armijo backtracking) from
    the core's start (zero slopes, the intercept at the link of mean(y)): the number of
    steps to max|grad| / n <= tol, each one Hessian."""
    n = X.shape[0]
    Xt = np.hstack([np.ones((n, 1)), X])
    pen = np.r_[0.0, np.full(X.shape[1], lam)]
    ybar = y.mean()
    b = np.zeros(Xt.shape[1])
    b[0] = np.log(ybar) if loss == "poisson" else np.log(ybar / (1.0 - ybar))

    def parts(b):
        eta = Xt @ b
        if loss == "poisson":
            mu = np.exp(eta)
            f = np.sum(mu - y * eta)
            g, d = mu - y, mu
        else:
            mu = 1.0 / (1.0 + np.exp(-eta))
            f = np.sum(np.logaddexp(0.0, eta) - y * eta)
            g, d = mu - y, mu * (1.0 - mu)
        return f + 0.5 * pen @ (b * b), Xt.T @ g + pen * b, d

    with threadpool_limits(1):
        f, grad, d = parts(b)
        for k in range(100):
            if np.max(np.abs(grad)) / n <= tol:
                return k
            H = Xt.T @ (Xt * d[:, None]) + np.diag(pen)
            step = -np.linalg.solve(H, grad)
            t = 1.0
            while parts(b + t * step)[0] > f + 1e-4 * t * (grad @ step):
                t *= 0.5
            b = b + t * step
            f, grad, d = parts(b)
    raise AssertionError("the numpy Newton reference did not converge")


@pytest.mark.parametrize(("loss", "lam", "scale", "seed"), CASES)
def test_alo_fit_takes_at_most_one_hessian_pass_more_than_newton(loss, lam, scale, seed):
    X, y = _data(loss, scale, seed)
    pen = aloocv.L2(lam)
    newton = _newton_steps(X, y, loss, lam, 1e-8)
    f = aloocv.fit(X, y, loss=loss, penalty=pen, n_jobs=1)
    r = aloocv.loo(X, y, loss=loss, penalty=pen, n_jobs=1)
    # a plain fit: fresh Hessians far from the optimum, chord steps on the last factor near
    # it, to tol (checked in numpy: converged_ means the stopping test passed)
    assert f.converged_
    assert f.hessian_passes_ < f.n_iter_
    assert f.hessian_passes_ <= newton
    eta = X @ f.coef_ + f.intercept_
    mu = np.exp(eta) if loss == "poisson" else 1.0 / (1.0 + np.exp(-eta))
    grad = np.r_[np.sum(mu - y), X.T @ (mu - y) + lam * f.coef_]
    assert np.max(np.abs(grad)) / X.shape[0] <= 1e-8
    # ALO's fit: at most a Newton fit's Hessians plus the one at the returned point
    assert 1 <= r.fit.hessian_passes_ <= newton + 1
    # the optimum (the ALO fit is converged to 0.01 tol; the reference far below)
    ref = aloocv.fit(X, y, loss=loss, penalty=pen, tol=1e-13, n_jobs=1)
    np.testing.assert_allclose(r.fit.coef_, ref.coef_, rtol=0, atol=1e-8)


def _numpy_leverages(X: np.ndarray, coef: np.ndarray, intercept: float, lam: float) -> np.ndarray:
    with threadpool_limits(1):
        eta = X @ coef + intercept
        mu = 1.0 / (1.0 + np.exp(-eta))
        Xt = np.hstack([np.ones((X.shape[0], 1)), X])
        H = Xt.T @ (Xt * (mu * (1.0 - mu))[:, None])
        H += np.diag(np.r_[0.0, np.full(X.shape[1], lam)])
        return np.einsum("ij,ij->i", Xt, np.linalg.solve(H, Xt.T).T)


@pytest.mark.parametrize(("lam", "scale", "seed"), [(1.0, 2.0, 0), (0.1, 4.0, 1), (10.0, 1.0, 2)])
def test_fused_end_takes_no_more_hessian_passes_than_newton(lam, scale, seed):
    # the common case: the one Hessian of the end replaces a Newton fit's last one
    X, y = _logistic(400, 20, scale, seed)
    pen = aloocv.L2(lam)
    f = aloocv.fit(X, y, penalty=pen, n_jobs=1)
    r = aloocv.loo(X, y, penalty=pen, n_jobs=1)
    assert r.fit.fused_end_fallbacks_ == 0
    assert r.fit.hessian_passes_ <= _newton_steps(X, y, "logistic", lam, 1e-8)
    # a plain fit from the default start (zero slopes: eta without a pass over X): the
    # starting gradient, one fused pass per step
    assert f.matvec_passes_ == f.n_iter_ + 1


def test_fused_end_falls_back_where_the_last_step_is_not_at_rounding():
    # separable, n < p, lam = 1e-4: a gradient at 1e-12 is still a step of 1e-7 in eta
    rng = np.random.default_rng(1)
    X = rng.standard_normal((40, 120))
    y = (X[:, 0] + 2 * rng.standard_normal(40) > 0) * 1.0
    lam = 1e-4
    with pytest.warns(aloocv.ALOWarning):
        r = aloocv.loo(X, y, penalty=aloocv.L2(lam), solver="primal", tol=1e-10, n_jobs=1)
    ref = aloocv.fit(X, y, penalty=aloocv.L2(lam), tol=1e-15, max_iter=200, n_jobs=1)
    # the leverages at the returned point equal those at the optimum to rounding
    h_ref = _numpy_leverages(X, ref.coef_, ref.intercept_, lam)
    np.testing.assert_allclose(r.leverages, h_ref, rtol=1e-9)
    assert r.fit.fused_end_fallbacks_ in (0, 1)


def _separable(seed: int, n: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    return X, (X[:, 0] + 2 * rng.standard_normal(n) > 0) * 1.0


def _alo_at_coef(X, y, lam: float, r, n_jobs: int) -> aloocv.LOOResult:
    """ALO at the coefficients r returned (no fit: the Hessian formed at them)."""
    pen = aloocv.L2(lam)
    return aloocv.loo(
        X, y, penalty=pen, coef=r.fit.coef_, intercept=r.fit.intercept_, n_jobs=n_jobs
    )


@pytest.mark.parametrize(("lam", "scale", "seed"), [(1.0, 2.0, 0), (0.1, 4.0, 1), (10.0, 1.0, 2)])
def test_fused_guard_rides_on_the_leverage_pass(lam, scale, seed):
    # the guard's probe max_i |x~_i^T step| is taken in the leverage pass: the fit of
    # loo() reads X as often as a plain fit per step (before: one probe pass more), and
    # the factor is still the Hessian at the returned coefficients
    X, y = _logistic(400, 20, scale, seed)
    r = aloocv.loo(X, y, penalty=aloocv.L2(lam), n_jobs=1)
    assert r.fit.fused_end_fallbacks_ == 0
    assert r.fit.matvec_passes_ == r.fit.n_iter_ + 1
    ref = _alo_at_coef(X, y, lam, r, 1)
    np.testing.assert_allclose(r.leverages, ref.leverages, rtol=1e-12)
    np.testing.assert_allclose(r.predictions, ref.predictions, rtol=1e-12, atol=1e-14)
    # threaded == serial (the probe is a max over rows; the kernels sum in fixed chunks)
    r2 = aloocv.loo(X, y, penalty=aloocv.L2(lam), n_jobs=2)
    np.testing.assert_array_equal(r2.fit.coef_, r.fit.coef_)
    np.testing.assert_array_equal(r2.leverages, r.leverages)


@pytest.mark.filterwarnings("ignore:ALO's mean may be off:aloocv.ALOWarning")
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize(("seed", "n", "p", "lam"), [(5, 40, 120, 1e-2), (4, 60, 30, 1e-3)])
def test_fused_guard_fails_in_the_leverage_pass_and_falls_back(seed, n, p, lam, sparse):
    # nearly separable: the end Hessian's Newton step still moves some eta_i by more than
    # kFusedEndEta. The probe in the leverage pass finds it; the fit then takes that step
    # and a fresh Hessian, and the leverages are computed again for it.
    X, y = _separable(seed, n, p)
    Xa = scipy.sparse.csr_matrix(X) if sparse else X
    r = aloocv.loo(Xa, y, penalty=aloocv.L2(lam), solver="primal", tol=1e-6, n_jobs=1)
    assert r.fit.fused_end_fallbacks_ == 1
    # the fallback's step is one of n_iter; still no probe pass of its own
    assert r.fit.matvec_passes_ == r.fit.n_iter_ + 1
    h = _numpy_leverages(X, r.fit.coef_, r.fit.intercept_, lam)
    np.testing.assert_allclose(r.leverages, h, rtol=1e-10)
    ref = _alo_at_coef(Xa, y, lam, r, 1)
    np.testing.assert_allclose(r.leverages, ref.leverages, rtol=1e-12)
    # a prediction near 0 is a difference of terms of the size of the largest ones
    atol = 1e-13 * np.abs(ref.predictions).max()
    np.testing.assert_allclose(r.predictions, ref.predictions, rtol=1e-12, atol=atol)
    r2 = aloocv.loo(Xa, y, penalty=aloocv.L2(lam), solver="primal", tol=1e-6, n_jobs=2)
    assert r2.fit.fused_end_fallbacks_ == 1
    np.testing.assert_array_equal(r2.fit.coef_, r.fit.coef_)
    np.testing.assert_array_equal(r2.leverages, r.leverages)


def test_fused_guard_fails_and_its_step_is_undone():
    # lam = 1e-4, tol = 1e-10: the probe fails, but the end Hessian's step does not halve
    # max|grad| (the rounding floor): it is undone, and the point and factor stand
    X, y = _separable(1, 40, 120)
    lam = 1e-4
    with pytest.warns(aloocv.ALOWarning):
        r = aloocv.loo(X, y, penalty=aloocv.L2(lam), solver="primal", tol=1e-10, n_jobs=1)
    assert r.fit.fused_end_fallbacks_ == 0
    # the undone trial step read X once
    assert r.fit.matvec_passes_ == r.fit.n_iter_ + 2
    with pytest.warns(aloocv.ALOWarning):
        ref = _alo_at_coef(X, y, lam, r, 1)
    np.testing.assert_allclose(r.leverages, ref.leverages, rtol=1e-11)
    h = _numpy_leverages(X, r.fit.coef_, r.fit.intercept_, lam)
    np.testing.assert_allclose(r.leverages, h, rtol=1e-9)


def test_fused_guard_of_the_gradient_route_probes_in_a_pass_of_its_own():
    # loo(return_gradient=True) forms its leverages in the hypergradient's own pass: the
    # deferred guard is settled before it (fresh_factor), by one probe pass, with the
    # same fallback as loo()'s
    X, y = _separable(5, 40, 120)
    lam = 1e-2
    kw = dict(penalty=aloocv.L2(lam), solver="primal", tol=1e-6, n_jobs=1)
    r = aloocv.loo(X, y, return_gradient=True, **kw)
    assert r.fit.fused_end_fallbacks_ == 1
    assert r.fit.matvec_passes_ == r.fit.n_iter_ + 2
    h = _numpy_leverages(X, r.fit.coef_, r.fit.intercept_, lam)
    np.testing.assert_allclose(r.leverages, h, rtol=1e-10)
    a = aloocv.loo(X, y, **kw)
    np.testing.assert_array_equal(r.fit.coef_, a.fit.coef_)
    np.testing.assert_allclose(r.leverages, a.leverages, rtol=1e-12)
    # the common case: the guard holds, one probe pass
    X, y = _logistic(400, 20, 2.0, 0)
    r = aloocv.loo(X, y, penalty=aloocv.L2(1.0), return_gradient=True, n_jobs=1)
    assert r.fit.fused_end_fallbacks_ == 0
    assert r.fit.matvec_passes_ == r.fit.n_iter_ + 2
    a = aloocv.loo(X, y, penalty=aloocv.L2(1.0), n_jobs=1)
    np.testing.assert_array_equal(r.fit.coef_, a.fit.coef_)
    np.testing.assert_allclose(r.leverages, a.leverages, rtol=1e-12)


def _grid_reference(X, y, lams):
    """Fits from scratch at a tight tolerance and their ALO predictions."""
    coefs, preds = [], []
    for lam in lams:
        f = aloocv.fit(X, y, penalty=aloocv.L2(lam), tol=1e-13, max_iter=200, n_jobs=1)
        r = aloocv.loo(X, y, penalty=aloocv.L2(lam), coef=f.coef_, intercept=f.intercept_)
        coefs.append(f.coef_)
        preds.append(r.predictions)
    return np.array(coefs), np.column_stack(preds)


def test_path_predictor_matches_fits_from_scratch():
    X, y = _logistic(500, 15, 2.0, 7)
    lams = np.logspace(2, -2, 8)
    res = aloocv.tune(
        X, y, loss="logistic", penalty=aloocv.L2(1.0), method="grid", grid=lams, n_jobs=1
    )
    coefs, preds = _grid_reference(X, y, lams)
    np.testing.assert_allclose(res.path_coefs, coefs, rtol=0, atol=1e-9)
    np.testing.assert_allclose(res.path_predictions, preds, rtol=1e-9, atol=1e-10)


def test_path_pass_counts_are_the_core_counters():
    X, y = _logistic(500, 15, 2.0, 8)
    lams = np.logspace(2, -2, 8)
    res = aloocv.tune(
        X, y, loss="logistic", penalty=aloocv.L2(1.0), method="grid", grid=lams, n_jobs=1
    )
    hp, mp = res.path_hessian_passes, res.path_matvec_passes
    # the cold first point is the fit of loo() at that penalty, with the secant-corrected
    # chord steps of tuning runs (tests/test_path_secant.py): at most its Hessian passes;
    # one matrix-vector pass per step plus the start's gradient (its eta takes no pass);
    # the end's guard probes in the leverage pass of the grid's ALO, as loo()'s does
    first = aloocv.loo(X, y, penalty=aloocv.L2(lams[0]), n_jobs=1).fit
    assert 1 <= hp[0] <= first.hessian_passes_
    assert first.fused_end_fallbacks_ == 0
    assert first.matvec_passes_ == first.n_iter_ + 1
    assert mp[0] == res.path_n_iter[0] + 1
    # warm points: at least the one Hessian at the returned beta; the predictor's
    # gradient takes no pass, so the matrix-vector passes are the steps' (one each)
    assert np.all(hp[1:] >= 1)
    np.testing.assert_array_equal(mp[1:], res.path_n_iter[1:])
    est = aloocv.ALOLogisticRegressionCV(Cs=1.0 / lams, n_jobs=1).fit(X, y)
    est_hp = est.tune_result_.path_hessian_passes
    assert est_hp.size == lams.size
    np.testing.assert_allclose(est.passes_per_candidate_, np.mean(est_hp) + 1.0)


def test_path_guard_fails_in_the_leverage_pass_and_falls_back():
    # a tuning point's fit leaves its fused end's guard to the ALO that follows (its
    # leverage pass measures it). On this nearly separable problem the guard of the path
    # point at 1e-2 fails: alo() takes the end Hessian's step (one more iteration and
    # Hessian pass than fit() reported) and its leverages are those of the returned
    # coefficients; state() reports the settled fit, and set_penalty() or state() settle
    # a guard that no alo() consumed, with the same result
    X, y = _separable(5, 40, 120)
    p = X.shape[1]

    def path_point():
        ts = _core.TuneState(
            core_design(X),
            y,
            None,
            "logistic",
            np.full(p, 3e-2),
            fit_intercept=True,
            tol=1e-6,
            max_iter=100,
            n_threads=1,
        )
        ts.fit()
        ts.alo(gradient=False)
        ts.set_penalty(np.full(p, 1e-2))
        return ts, ts.fit()

    ts, f = path_point()
    out = ts.alo(gradient=False)
    assert (out.n_iter, out.hessian_passes) == (f.n_iter + 1, f.hessian_passes + 1)
    assert out.fused_end_fallbacks == f.fused_end_fallbacks + 1
    ref = aloocv.loo(
        X,
        y,
        penalty=aloocv.L2(1e-2),
        coef=out.coef,
        intercept=out.intercept,
        solver="primal",
        n_jobs=1,
    )
    np.testing.assert_allclose(out.leverages, ref.leverages, rtol=1e-10)
    h = _numpy_leverages(X, out.coef, out.intercept, 1e-2)
    np.testing.assert_allclose(out.leverages, h, rtol=1e-9)
    st = ts.state()
    assert st.n_iter == out.n_iter
    np.testing.assert_array_equal(st.coef, out.coef)
    # settled without an alo(): by state(), or by set_penalty() before the penalty changes
    ts2, _ = path_point()
    s2 = ts2.state()
    assert s2.n_iter == out.n_iter
    np.testing.assert_array_equal(s2.coef, out.coef)
    ts3, _ = path_point()
    ts3.set_penalty(np.full(p, 5e-3))  # settled under 1e-2 first; state() refits nothing
    s3 = ts3.state()
    assert s3.n_iter == out.n_iter
    np.testing.assert_array_equal(s3.coef, out.coef)


def test_a_step_at_the_rounding_floor_that_loses_tol_is_undone():
    # tol = 1e-13 on a small Poisson problem: the fresh end's target (tol / 100) is below
    # its rounding floor (about 5e-15). Past tol the steps' predicted decrease is at the
    # rounding level, so the line search cannot check them; one of them took max|grad|
    # from 6e-15 to 4e-13 and the drive stalled there (converged False). Such a step is
    # now a trial, undone where it loses tol.
    X, y = make_data("poisson", 80, 5, seed=80, scale=2.0)
    X = X * np.linspace(0.5, 2.0, 5)
    X[:, 1] += 0.6 * X[:, 0]
    pen = aloocv.L2(np.geomspace(0.5, 8.0, 5))
    kw = dict(loss="poisson", penalty=pen, tol=1e-13, max_iter=500, n_jobs=1)
    r = aloocv.loo(X, y, **kw)  # warnings are errors: no ConvergenceWarning
    assert r.fit.converged_ and r.fit.gradient_norm_ <= 1e-13
    ref = aloocv.fit(X, y, **kw)
    np.testing.assert_allclose(r.fit.coef_, ref.coef_, rtol=1e-11, atol=1e-13)
    with threadpool_limits(1):
        Xt = np.hstack([np.ones((80, 1)), X])
        mu = np.exp(Xt @ np.r_[r.fit.intercept_, r.fit.coef_])
        H = Xt.T @ (Xt * mu[:, None]) + np.diag(np.r_[0.0, pen.lam])
        h = np.einsum("ij,ij->i", Xt, np.linalg.solve(H, Xt.T).T)
    np.testing.assert_allclose(r.leverages, h, rtol=1e-9)
