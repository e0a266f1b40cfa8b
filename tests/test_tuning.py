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
from conftest import make_data

TOL = 1e-10  # fit tolerance of the reference curve


def dense_minimum(X, y, loss, pen_of, lo=-9.0, hi=9.0, **kw):
    """min over log(lambda) of loo(...).mean: a dense grid, then a bounded refinement."""

    def f(u):
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
    assert res.acv == pytest.approx(
        aloocv.loo(X, y, loss="logistic", penalty=res.penalty, tol=TOL).mean, rel=1e-7
    )


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
