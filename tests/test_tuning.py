"""Searches that end where they say: the default search against dense searches of the curve,
second-order methods, 1-SE with a gradient search, the estimators' gradient search."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from sklearn.exceptions import ConvergenceWarning
from test_hypergrad import _objective, _real

import aloocv
from aloocv.tuning import optimizers
from aloocv.tuning.grid import BRACKET_POINTS
from aloocv.tuning.objective import Objective
from conftest import make_data

TOL = 1e-10  # fit tolerance of the reference curve


def dense_minimum(X, y, loss, pen_of, lo=-9.0, hi=9.0, **kw):
    """min over log(lambda) of loo(...).mean: a dense grid, then a bounded refinement."""

    def f(u):
        with warnings.catch_warnings():  # plain ALO is the curve the search minimizes
            warnings.simplefilter("ignore", aloocv.ALOWarning)
            return aloocv.loo(X, y, loss=loss, penalty=pen_of(np.exp(u)), tol=TOL, **kw).mean

    us = np.linspace(lo, hi, 181)
    vals = np.array([f(u) for u in us])
    k = int(np.argmin(vals))
    a, b = us[max(k - 1, 0)], us[min(k + 1, us.size - 1)]
    ref = minimize_scalar(f, bounds=(a, b), method="bounded", options={"xatol": 1e-9})
    return min(ref.fun, vals[k]), float(np.exp(ref.x))


@pytest.mark.filterwarnings("ignore:ALO's mean may be off:aloocv.ALOWarning")
@pytest.mark.parametrize("name", ["breast_cancer", "wine", "digits"])
def test_default_search_reaches_the_minimum_on_real_data(name):
    X, y = _real(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = aloocv.tune(X, y, loss="logistic", penalty=aloocv.L2(1.0))
    assert res.converged and res.method == "auto"
    best, _ = dense_minimum(X, y, "logistic", aloocv.L2)
    assert res.acv <= best * (1 + 1e-7)
    # at most 6 fits after the 5-point bracketing grid
    assert res.n_fits <= 5 + 6
    # the reported value is what loo reports at the returned penalty (to the fit's
    # tolerance: the search's fits are warm-started, loo's cold)
    with warnings.catch_warnings():  # plain ALO: the estimate the search minimizes
        warnings.simplefilter("ignore", aloocv.ALOWarning)
        at = aloocv.loo(X, y, loss="logistic", penalty=res.penalty, tol=TOL)
    assert res.acv == pytest.approx(at.mean, rel=1e-7)


def test_poisson_counts_with_weights():
    X, y = make_data("poisson", 400, 6, seed=120, scale=2.0)
    w = np.random.default_rng(121).uniform(0.5, 2.0, 400)
    res = aloocv.tune(X, y, loss="poisson", penalty=aloocv.L2(1.0), sample_weight=w)
    assert res.converged
    best, _ = dense_minimum(X, y, "poisson", aloocv.L2, sample_weight=w)
    assert res.acv <= best * (1 + 1e-7)


@pytest.mark.parametrize("method", ["auto", "newton", "lbfgs"])
def test_grouped_ridge_search(method):
    # two groups of features (banded ridge): the second is noise and gets the larger lambda
    rng = np.random.default_rng(122)
    X = rng.standard_normal((300, 8))
    y = X[:, :4] @ np.array([1.0, -1.0, 0.5, 0.8]) + rng.standard_normal(300)
    groups = np.repeat([0, 1], 4)
    res = aloocv.tune(
        X, y, loss="squared", penalty=aloocv.L2(1.0, groups=groups), method=method, tol=1e-8
    )
    assert res.converged
    lam = res.penalty.lam
    assert lam[1] > 10 * lam[0]
    # a stationary point: the exact gradient in log(lambda) is below tol * ACV, except
    # for a parameter that the search's box stops (the noise group's lambda -> infinity)
    g = aloocv.loo(X, y, loss="squared", penalty=res.penalty, return_gradient=True)
    gu = g.gradient * lam
    assert abs(gu[0]) <= 1e-8 * g.mean * 1.001
    if "bound" in res.message:
        assert method == "auto" and lam[1] >= 1e5 and gu[1] < 0
    else:
        assert abs(gu[1]) <= 1e-8 * g.mean * 1.001


def test_trust_region_beats_many_armijo_iterations():
    # the paper's diagonal ridge, 20 lambdas: exact Hessians reach a lower ACV than
    # gradient descent with many more fits
    rng = np.random.default_rng(0)
    X = rng.standard_normal((150, 20))
    beta = np.zeros(20)
    beta[:5] = rng.standard_normal(5)
    y = X @ beta + rng.standard_normal(150)
    kw = dict(loss="squared", penalty=aloocv.L2(np.full(20, 1 / 3)), fit_intercept=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gd = aloocv.tune(X, y, method="gd", max_iter=300, tol=1e-12, **kw)
    tr = aloocv.tune(X, y, method="newton", tol=1e-8, **kw)
    assert tr.converged and tr.acv <= gd.acv and tr.n_fits < gd.n_fits


def test_one_se_with_a_gradient_search():
    X, y = make_data("logistic", 400, 8, seed=123, scale=2.0)
    best = aloocv.tune(X, y, loss="logistic", penalty=aloocv.L2(1.0))
    one = aloocv.tune(X, y, loss="logistic", penalty=aloocv.L2(1.0), selection="1se")
    assert one.converged and one.selection == "1se"
    assert one.penalty.lam > best.penalty.lam
    assert one.acv == pytest.approx(best.acv + best.stderr, rel=1e-6)
    with pytest.raises(ValueError, match="needs one regularization parameter"):
        aloocv.tune(X, y, penalty=aloocv.L2(np.ones(8)), selection="1se")


def test_newton_1d_bracket_and_box():
    X, y = make_data("logistic", 300, 5, seed=124)
    obj = _objective(X, y, "logistic", aloocv.L2(1.0))
    res = optimizers.newton_1d(obj, -5.0, 0.0, 5.0, gtol=1e-9)
    assert res.converged and abs(res.evaluation.grad[0]) <= 1e-9
    # a box that excludes the minimum: converged at the box's end (projected gradient 0)
    lam_star = np.exp(res.u[0])
    box = (np.log(lam_star) + 1.0, np.log(lam_star) + 3.0)
    boxed = optimizers.newton_1d(obj, box[0], box[0] + 1.0, box[1], gtol=1e-9, bounds=box)
    assert boxed.converged and boxed.u[0] == pytest.approx(box[0], abs=1e-9)
    assert boxed.evaluation.grad[0] > 0


class _Orders:
    """An objective that records the derivative order of each evaluation it computes."""

    def __init__(self, obj):
        self.obj, self.orders = obj, []

    def evaluate(self, u, order=1):
        self.orders.append(order)
        return self.obj.evaluate(u, order)


def _bracket_values(obj, us):
    return [(float(u), obj.evaluate(np.array([u]), 0).acv) for u in us]


@pytest.mark.parametrize("grid", [(3.0, -3.0, 5), (6.0, 2.0, 3), (-2.0, -6.0, 3)])
def test_bracketed_1d_reaches_the_minimum_without_hessians(grid):
    # the best grid point inside the grid, and at either end (an open side: the search
    # steps outwards); the end is the dense curve's minimum
    X, y = make_data("logistic", 300, 6, seed=125, scale=2.0)
    obj = _objective(X, y, "logistic", aloocv.L2(1.0))
    us = np.linspace(*grid)
    known = _bracket_values(obj, us)
    rec = _Orders(obj)
    gtol = 1e-6 * min(f for _, f in known)
    res = optimizers.bracketed_1d(rec, known, gtol=gtol, bounds=(us.min() - 7, us.max() + 7))
    assert res.converged and abs(res.evaluation.grad[0]) <= gtol
    assert 2 not in rec.orders  # never a Hessian
    best, lam = dense_minimum(X, y, "logistic", aloocv.L2)
    assert res.evaluation.acv <= best * (1 + 1e-9)
    assert res.u[0] == pytest.approx(np.log(lam), abs=1e-3)


def test_bracketed_1d_stops_at_the_box_and_skips_undefined_points():
    X, y = make_data("logistic", 300, 5, seed=124)
    obj = _objective(X, y, "logistic", aloocv.L2(1.0))
    u_star = optimizers.newton_1d(obj, -5.0, 0.0, 5.0, gtol=1e-10).u[0]
    # a box above the minimum: converged at its lower end, the gradient pointing out
    box = (u_star + 1.0, u_star + 4.0)
    known = _bracket_values(obj, [u_star + 2.0, u_star + 3.0, u_star + 4.0])
    res = optimizers.bracketed_1d(obj, known, gtol=1e-9, bounds=box)
    assert res.converged and "bound" in res.message
    assert res.u[0] == pytest.approx(box[0], abs=1e-12) and res.evaluation.grad[0] > 0
    # a point where the fit is not defined (inf) is a bracket end, not the minimum
    known = [*_bracket_values(obj, [u_star + 2.0, u_star - 2.0]), (u_star - 6.0, np.inf)]
    res = optimizers.bracketed_1d(obj, known, gtol=1e-9, bounds=(u_star - 8, u_star + 8))
    assert res.converged and res.u[0] == pytest.approx(u_star, abs=1e-4)
    with pytest.raises(ValueError, match="not defined at any point"):
        optimizers.bracketed_1d(obj, [(0.0, np.inf)], gtol=1e-9)

    class NoGradient(_Orders):  # values, but the gradient's computation fails
        def evaluate(self, u, order=1):
            if order >= 1:
                raise ValueError("singular")
            return self.obj.evaluate(u, order)

    with pytest.raises(ValueError, match="gradient of ACV is not defined at log"):
        optimizers.bracketed_1d(NoGradient(obj), known, gtol=1e-9)


def test_a_higher_order_at_the_state_point_reuses_its_fit():
    # the gradient asked where the value was just taken: no refit, the same numbers as
    # a fresh objective's
    X, y = make_data("logistic", 300, 6, seed=126, scale=2.0)
    obj = _objective(X, y, "logistic", aloocv.L2(1.0))
    u = np.array([0.7])
    v0 = obj.evaluate(u, 0)
    fits = obj.n_fits
    v1 = obj.evaluate(u, 1)
    assert obj.n_fits == fits and v1.acv == v0.acv
    ref = _objective(X, y, "logistic", aloocv.L2(1.0)).evaluate(u, 1)
    assert v1.grad[0] == pytest.approx(ref.grad[0], rel=1e-8)
    # a worse point next: the fit moves; coming back to the best point so far returns
    # to its kept state (no refit), with a fresh objective's numbers
    far = np.array([3.0])
    assert obj.evaluate(far, 0).acv > v0.acv
    v2 = obj.evaluate(u, 2)
    assert obj.n_fits == fits + 1 and v2.acv == v0.acv
    ref2 = _objective(X, y, "logistic", aloocv.L2(1.0)).evaluate(u, 2)
    assert v2.grad[0] == pytest.approx(ref2.grad[0], rel=1e-8)
    assert v2.hess[0, 0] == pytest.approx(ref2.hess[0, 0], rel=1e-7)
    # coming back to a point that is not the best refits there
    obj.evaluate(far, 1)
    assert obj.n_fits == fits + 2


def test_the_state_keeps_the_best_point_for_a_search_coming_back():
    X, y = _real("breast_cancer")
    p = X.shape[1]
    from test_hypergrad import _tune_state

    state = _tune_state(X, y, "logistic", aloocv.L2(1.0))
    with pytest.raises(ValueError, match="fit"):
        state.keep()
    assert state.restore() is False  # nothing kept
    state.fit()
    state.keep()
    a = state.alo(gradient=True)
    state.set_penalty(np.full(p, 30.0))
    state.fit()
    b = state.alo(gradient=True)
    assert b.losses.mean() != pytest.approx(a.losses.mean(), rel=1e-6)
    # back to the kept state, its penalty included: the same numbers, bit for bit
    assert state.restore() is True
    c = state.alo(gradient=True)
    for name in ("losses", "leverages", "coef", "grad_l2"):
        np.testing.assert_array_equal(getattr(c, name), getattr(a, name))
    # a refit from the kept state at another penalty is that penalty's fit
    state.set_penalty(np.full(p, 30.0))
    state.fit()
    d = state.alo(gradient=True)
    np.testing.assert_allclose(d.losses, b.losses, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(d.grad_l2, b.grad_l2, rtol=1e-6, atol=1e-12)


def _same_end_in_fewer_fits(res, ref):
    """A search ``res`` ends where the search ``ref`` without one of its mechanisms does
    (the same penalty to 1e-5, ACV to 1e-10), in fewer fits."""
    assert res.converged and ref.converged
    assert res.penalty.lam == pytest.approx(ref.penalty.lam, rel=1e-5)
    assert res.acv == pytest.approx(ref.acv, rel=1e-10)
    assert res.n_fits < ref.n_fits


@pytest.mark.parametrize("kind", ["isotropic", "scales"])
def test_a_search_that_returns_to_its_best_point_ends_where_one_without_does(kind):
    # the default search with and without the kept best point: the same minimum, and the
    # kept state saves refits
    X, y = make_data("logistic", 2000, 30, seed=131, scale=3.0 if kind == "scales" else 1.0)
    if kind == "scales":
        X = X * np.logspace(-2, 2, X.shape[1])
    res = aloocv.tune(X, y, loss="logistic", penalty=aloocv.L2(1.0))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Objective, "_restore", lambda self, u, at: False)
        ref = aloocv.tune(X, y, loss="logistic", penalty=aloocv.L2(1.0))
    _same_end_in_fewer_fits(res, ref)


def test_the_cubic_step_from_a_slope_and_both_neighbours_is_exact_on_a_cubic():
    # f(lambda) = (lambda - 1.7)^2 (1 + 0.2 lambda): a cubic in lambda with its minimum
    # at 1.7; the step through f's value and slope at 1.5 and its values at 0.5 and 4.5
    # (evenly spaced in log lambda) lands on it
    def f(lam):
        return (lam - 1.7) ** 2 * (1.0 + 0.2 * lam)

    def df_du(lam):  # d f / d log(lambda)
        return lam * (2.0 * (lam - 1.7) * (1.0 + 0.2 * lam) + 0.2 * (lam - 1.7) ** 2)

    m, lo, hi = np.log([1.5, 0.5, 4.5])
    vals = {float(u): f(np.exp(u)) for u in (lo, m, hi)}
    v = optimizers._bracket_cubic_step(m, m, hi, vals, df_du(1.5), [lo, hi])
    assert v == pytest.approx(np.log(1.7), abs=1e-12)
    # the minimum outside the side searched, or neighbours unevenly spaced: no step
    assert np.isnan(optimizers._bracket_cubic_step(m, lo, m, vals, df_du(1.5), [lo, hi]))
    far = float(np.log(40.0))
    vals[far] = f(40.0)
    assert np.isnan(optimizers._bracket_cubic_step(m, m, far, vals, df_du(1.5), [lo, far]))


@pytest.mark.parametrize("seed", [0, 2])
def test_a_far_vertex_gives_way_to_the_best_points_slope(seed):
    # where the coarse grid's parabola puts its vertex far from the best point, the search
    # takes the best point's gradient first (its kept state: no refit) and steps on the
    # cubic through it and both neighbours: the minimum the search without both reaches,
    # here in fewer fits
    X, y = make_data("logistic", 1500, 40, seed=seed)
    seen = []
    orig = Objective.evaluate

    def spy(self, u, order=1):
        seen.append((float(u[0]), order))
        return orig(self, u, order)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Objective, "evaluate", spy)
        res = aloocv.tune(X, y, loss="logistic", penalty=aloocv.L2(1.0))
    # the coarse grid's best point, from fresh leave-one-out estimates at its points
    grid = [u for u, _ in seen[:BRACKET_POINTS]]
    acv = [aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(np.exp(u))).mean for u in grid]
    first_gradient = next(u for u, order in seen if order >= 1)
    assert first_gradient == grid[int(np.argmin(acv))]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(optimizers, "VERTEX_TRUST", np.inf)
        mp.setattr(optimizers, "_bracket_cubic_step", lambda *a: np.nan)
        ref = aloocv.tune(X, y, loss="logistic", penalty=aloocv.L2(1.0))
    _same_end_in_fewer_fits(res, ref)


def test_default_search_spends_no_hessian():
    X, y = make_data("logistic", 400, 8, seed=127, scale=2.0)
    seen = []
    orig = Objective.evaluate

    def spy(self, u, order=1):
        seen.append(order)
        return orig(self, u, order)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Objective, "evaluate", spy)
        res = aloocv.tune(X, y, loss="logistic", penalty=aloocv.L2(1.0))
    assert res.converged and 2 not in seen and 1 in seen
    # the end is where the exact gradient (computed afresh) is below tol * ACV
    g = aloocv.loo(X, y, loss="logistic", penalty=res.penalty, return_gradient=True)
    assert abs(g.gradient[0] * res.penalty.lam) <= 1e-6 * res.acv * 1.01


def test_adam_is_shared():
    # one Adam, used by tune's step rules and by the BKK estimators
    import aloocv.bkk as bkk

    adam = optimizers.Adam(0.1)
    step = adam.step(np.array([2.0, -1.0]))
    np.testing.assert_allclose(step, [0.1, -0.1], rtol=1e-6)
    assert bkk.Adam is optimizers.Adam


def test_estimators_gradient_search_ends_at_the_minimum():
    X, y = _real("breast_cancer")
    est = aloocv.ALOLogisticRegressionCV(Cs=8, search="gradient").fit(X, y)
    best, lam = dense_minimum(X, y, "logistic", aloocv.L2)
    assert -est.best_score_ <= best * (1 + 1e-7)
    assert 1 / est.C_[0] == pytest.approx(lam, rel=1e-3)
    grid = aloocv.ALOLogisticRegressionCV(Cs=8).fit(X, y)
    assert est.best_score_ >= grid.best_score_
    one = aloocv.ALOLogisticRegressionCV(Cs=8, search="gradient", rule="1se").fit(X, y)
    assert one.C_[0] < est.C_[0]  # more regularized


@pytest.mark.parametrize("method", ["auto", "lbfgs", "newton", "gd"])
def test_history_and_callback_follow_the_search(method):
    X, y = make_data("logistic", 300, 4, seed=125)
    seen = []
    res = aloocv.tune(
        X,
        y,
        loss="logistic",
        penalty=aloocv.L2(np.ones(4)),
        method=method,
        tol=1e-5,
        max_iter=300,
        callback=lambda k, pen, acv: seen.append((k, acv)),
    )
    h = res.history
    # one row per evaluation, each point once, reported as it happened
    assert len(seen) == h["acv"].size
    np.testing.assert_array_equal([s[1] for s in seen], h["acv"])
    assert np.all(np.diff(h["n_fits"]) >= 0)
    # each point once (the bracketing grid's best comes back once, with derivatives)
    rows = h["params"][5:] if method == "auto" else h["params"]
    assert len({tuple(r) for r in rows}) == rows.shape[0]


# ----------------------------------------------------------------------------- rtol=
# Tuning on the trusted estimate: choices against exact leave-one-out computed by the
# core's exact refits of every sample (aloocv.loo(method="exact"), tested against
# scikit-learn refits in test_loo.py).
RTOL = 0.01


def breast_cancer_degree2():
    """Breast cancer, standardized, with its degree-2 features standardized (569 x 495):
    ALO under-estimates exact LOO more as lambda falls (issue 26), so on a grid near the
    optimum its argmin is a weaker penalty than exact LOO's."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import PolynomialFeatures, StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    X = StandardScaler().fit_transform(PolynomialFeatures(2, include_bias=False).fit_transform(X))
    return X, y.astype(float)


def exact_loo(X, y, loss, lam, **kw):
    return aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(lam), method="exact", **kw).mean


def exact_minimum(X, y, loss, lo, hi):
    """The minimizer of exact leave-one-out over log(lambda): a grid, then a bounded
    refinement."""
    us = np.linspace(lo, hi, 13)
    vals = [exact_loo(X, y, loss, np.exp(u), tol=TOL) for u in us]
    k = int(np.argmin(vals))
    assert 0 < k < us.size - 1
    ref = minimize_scalar(
        lambda u: exact_loo(X, y, loss, np.exp(u), tol=TOL),
        bounds=(us[k - 1], us[k + 1]),
        method="bounded",
        options={"xatol": 1e-5},
    )
    return float(np.exp(ref.x))


def test_refined_grid_chooses_exact_loo_argmin():
    X, y = breast_cancer_degree2()
    grid = np.logspace(1, 0, 5)  # most to least regularized
    exact = np.array([exact_loo(X, y, "logistic", g) for g in grid])
    plain = aloocv.tune(X, y, loss="logistic", penalty=aloocv.L2(1.0), method="grid", grid=grid)
    res = aloocv.tune(
        X, y, loss="logistic", penalty=aloocv.L2(1.0), method="grid", grid=grid, rtol=RTOL
    )
    # the case is real: ALO's grid argmin is not exact LOO's
    k_exact = int(np.argmin(exact))
    assert plain.penalty.lam != pytest.approx(grid[k_exact])
    assert res.penalty.lam == pytest.approx(grid[k_exact], rel=1e-12)
    h = res.history
    refined = np.flatnonzero(h["refined"])
    # the refined argmin has refined neighbours on both sides
    assert {k_exact - 1, k_exact, k_exact + 1} <= set(refined.tolist())
    # refined values within the budget of exact LOO; the others are plain ALO
    np.testing.assert_allclose(h["acv"][refined], exact[refined], rtol=RTOL)
    np.testing.assert_array_equal(h["plain_acv"], plain.history["acv"])
    rest = ~h["refined"]
    np.testing.assert_array_equal(h["acv"][rest], plain.history["acv"][rest])
    # the result's estimate is the refined one at the choice, with its refitted samples
    assert res.loo.mean == pytest.approx(res.acv)
    assert res.acv == pytest.approx(h["acv"][k_exact])
    est = res.loo.error_estimate
    assert est.kind == "budget" and est.met and est.refitted.size < X.shape[0] // 4
    assert res.rtol == RTOL and "refined (rtol=0.01)" in res.message
    np.testing.assert_allclose(res.path_losses[:, k_exact], res.loo.losses)


def test_refined_grid_one_se_walks_towards_stronger_penalties():
    X, y = _real("breast_cancer")
    grid = np.logspace(2, -2, 9)
    res = aloocv.tune(
        X, y, penalty=aloocv.L2(1.0), method="grid", grid=grid, selection="1se", rtol=RTOL
    )
    h = res.history
    k_min = int(np.argmin(np.where(h["refined"], h["acv"], np.inf)))
    limit = h["acv"][k_min] + h["stderr"][k_min]
    k = int(np.argmin(np.abs(np.log(grid) - np.log(res.penalty.lam))))
    assert k <= k_min and h["acv"][k] <= limit
    # the point before the choice (stronger) is refined and above the limit, or the grid's end
    assert k == 0 or (h["refined"][k - 1] and h["acv"][k - 1] > limit)


def test_refined_derivative_matches_finite_differences():
    """The refined mean with its refitted set S held fixed: its derivative (ALO's
    hypergradient for the others, implicit differentiation of numpy refits for S) against
    central differences of the same mean with S refitted by the core (an independent
    implementation of the refits)."""
    from aloocv.problem import Problem
    from aloocv.tuning.drivers import Objective, route
    from aloocv.tuning.refine import Refiner

    X, y = _real("breast_cancer")
    w = np.random.default_rng(126).uniform(0.5, 2.0, y.size)
    off = 0.1 * np.random.default_rng(127).standard_normal(y.size)
    groups = np.arange(X.shape[1]) % 2
    for pen in (aloocv.L2(0.05), aloocv.L2(np.array([0.03, 0.2]), groups=groups)):
        pb = Problem.build(
            X, y, loss="logistic", penalty=pen, sample_weight=w, offset=off, tol=1e-11
        )
        r = route.choose(pb, "tune", search="auto")
        obj = Objective(route.tune_state(pb, r), pen, w, X.shape[1], "exact", True)
        rf = Refiner(pb, obj, RTOL)
        u = np.log(pen.params())
        S = np.asarray(rf.at_evaluation(u).error_estimate.refitted)
        assert 10 <= S.size < y.size // 2
        p = rf.fixed(u, S, 1)
        # the value: the same with the core's refits
        assert p.acv == pytest.approx(rf.fixed(u, S, 0).acv, rel=1e-9)
        h = 1e-4
        for k in range(u.size):
            e = np.zeros(u.size)
            e[k] = h
            fd = (rf.fixed(u + e, S, 0).acv - rf.fixed(u - e, S, 0).acv) / (2 * h)
            assert p.grad[k] == pytest.approx(fd, rel=2e-5)
        # and it is not ALO's hypergradient: the refitted samples change it
        assert not np.allclose(p.grad, obj.evaluate(u, 1).grad, rtol=1e-2)


def test_refined_gradient_search_reaches_exact_loo_minimum():
    X, y = _real("breast_cancer")
    lam_exact = exact_minimum(X, y, "logistic", -3.0, 3.0)
    plain = aloocv.tune(X, y, loss="logistic", penalty=aloocv.L2(1.0))
    res = aloocv.tune(X, y, loss="logistic", penalty=aloocv.L2(1.0), rtol=RTOL)
    assert res.converged and res.rtol == RTOL
    off_plain = abs(np.log(plain.penalty.lam / lam_exact))
    off = abs(np.log(res.penalty.lam / lam_exact))
    assert off_plain > 0.02 and off < off_plain / 10
    h = res.history
    assert h["refined"][-1] and not h["refined"][0]
    assert np.all(np.isfinite(h["grad"][h["refined"]]))  # the refined rows' derivatives
    assert res.loo.error_estimate.met


def test_refined_ray_search_for_the_multinomial_loss():
    from sklearn.datasets import load_wine
    from sklearn.preprocessing import StandardScaler

    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    y = y.astype(float)
    lam_exact = exact_minimum(X, y, "multinomial", -4.0, 2.0)
    plain = aloocv.tune(X, y, loss="multinomial", penalty=aloocv.L2(1.0))
    res = aloocv.tune(X, y, loss="multinomial", penalty=aloocv.L2(1.0), rtol=RTOL)
    assert "along the ray" in res.message
    off_plain = abs(np.log(plain.penalty.lam / lam_exact))
    off = abs(np.log(res.penalty.lam / lam_exact))
    assert off_plain > 0.3 and off < 0.01
    # the ray search has no derivative: its refined rows record none
    refined = res.history["refined"]
    assert refined.any() and np.all(np.isnan(res.history["grad"][refined]))


def test_rtol_where_nothing_is_refined_and_refused_combinations():
    X, y = make_data("squared", 200, 5, seed=128)
    res = aloocv.tune(X, y, loss="squared", penalty=aloocv.L2(1.0), rtol=RTOL)
    plain = aloocv.tune(X, y, loss="squared", penalty=aloocv.L2(1.0))
    assert res.rtol == RTOL and "nothing to refine" in res.message
    assert res.penalty.lam == plain.penalty.lam and not res.history["refined"].any()
    Xl, yl = make_data("logistic", 200, 5, seed=129)
    with pytest.raises(ValueError, match="rtol must be in"):
        aloocv.tune(Xl, yl, penalty=aloocv.L2(1.0), rtol=1.5)
    with pytest.raises(ValueError, match="gradient='exact'"):
        aloocv.tune(Xl, yl, penalty=aloocv.L2(1.0), method="gd", gradient="paper", rtol=RTOL)
    with pytest.raises(ValueError, match="needs method='grid'"):
        aloocv.tune(Xl, yl, penalty=aloocv.L2(1.0), selection="1se", rtol=RTOL)


def test_rtol_grid_on_dask_input_is_the_in_memory_one():
    da = pytest.importorskip("dask.array")
    X, y = _real("breast_cancer")
    grid = np.logspace(1, -2, 7)
    kw = dict(penalty=aloocv.L2(1.0), method="grid", grid=grid, rtol=RTOL)
    m = aloocv.tune(X, y, **kw)
    d = aloocv.tune(da.from_array(X, chunks=200), da.from_array(y, chunks=200), **kw)
    np.testing.assert_array_equal(d.history["refined"], m.history["refined"])
    assert d.penalty.lam == m.penalty.lam
    np.testing.assert_allclose(d.history["acv"], m.history["acv"], rtol=1e-6)
