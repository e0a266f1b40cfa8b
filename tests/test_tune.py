"""aloocv.tune: Algorithms 1 and 2 and grids, against ACV evaluated independently."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import aloocv
from conftest import make_data, ridge_exact_loo


def diag_ridge_data(seed=90, n=150, p=20, relevant=5):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    b = np.zeros(p)
    b[:relevant] = rng.standard_normal(relevant) * 2
    return X, X @ b + rng.standard_normal(n), b


def test_gd_per_feature_ridge_penalizes_irrelevant_features_more():
    X, y, _ = diag_ridge_data()
    res = aloocv.tune(
        X,
        y,
        loss="squared",
        penalty=aloocv.L2(np.full(20, 1 / 3)),
        method="gd",
        max_iter=300,
        tol=1e-6,
        fit_intercept=False,
    )
    assert res.converged
    lam = res.penalty.lam
    assert np.median(lam[5:]) > 100 * np.median(lam[:5])
    h = res.history
    assert h["acv"][-1] < h["acv"][0]
    assert np.all(np.diff(h["acv"]) <= 1e-12)  # Armijo: monotone
    # the reported ACV is the exact LOO of the selected per-feature ridge (Corollary 2)
    eta = ridge_exact_loo(X, y, lam, intercept=False)
    assert res.acv == pytest.approx(np.mean(0.5 * (y - eta) ** 2), rel=1e-9)
    assert res.loo.mean == pytest.approx(res.acv)


@pytest.mark.filterwarnings("ignore:ALO's mean may be off:aloocv.ALOWarning")
@pytest.mark.smoke
def test_gd_scalar_reaches_the_grid_minimum():
    X, y = make_data("logistic", 300, 10, seed=91, scale=3.0)
    grid = np.logspace(-2, 3, 60)
    acv = [aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(g)).mean for g in grid]
    k = int(np.argmin(acv))
    se_k = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(grid[k])).stderr
    res = aloocv.tune(X, y, loss="logistic", penalty=aloocv.L2(100.0), method="gd")
    assert res.converged
    # the hypergradient is approximate: its zero is near, not at, the grid minimum
    assert res.acv <= acv[k] + se_k / 10
    assert grid[max(k - 2, 0)] <= res.penalty.lam <= grid[min(k + 2, 59)]
    # fewer fits than a 10-point grid would need to be this close
    assert res.n_fits < 40


@pytest.mark.parametrize("rule", ["fixed", "adam"])
def test_other_step_rules_decrease_acv(rule):
    X, y, _ = diag_ridge_data(seed=92)
    lr = 5.0 if rule == "fixed" else 0.1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        res = aloocv.tune(
            X,
            y,
            loss="squared",
            penalty=aloocv.L2(np.ones(20)),
            method="gd",
            tol=1e-7,
            step_rule=rule,
            learning_rate=lr,
            max_iter=200,
            fit_intercept=False,
        )
    assert res.acv < res.history["acv"][0]
    _check_honest(X, y, res, 1e-7, caught, loss="squared", fit_intercept=False)


def _check_honest(X, y, res, tol, caught, **kw):
    """converged=True only when the exact gradient in log(lambda) is below tol * ACV;
    otherwise exactly one ConvergenceWarning."""
    ref = aloocv.loo(X, y, penalty=res.penalty, return_gradient=True, **kw)
    g_u = ref.gradient * res.penalty.params()
    warned = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    if res.converged:
        assert np.max(np.abs(g_u)) <= tol * ref.mean * 1.001
        assert not warned
    else:
        assert len(warned) == 1 and res.message in str(warned[0].message)


def test_divergence_is_reported_not_nan():
    X, y, _ = diag_ridge_data(seed=93)
    with pytest.warns(ConvergenceWarning, match="diverged"):
        res = aloocv.tune(
            X,
            y,
            loss="squared",
            penalty=aloocv.L2(np.ones(20)),
            method="gd",
            step_rule="fixed",
            learning_rate=1e6,
            max_iter=50,
        )
    assert np.isfinite(res.acv) and np.all(np.isfinite(res.penalty.lam))
    assert res.acv <= res.history["acv"][0]


def test_sgd_algorithm_2():
    X, y = make_data("logistic", 2000, 8, seed=94, scale=3.0)
    start = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1000.0)).mean
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        res = aloocv.tune(
            X,
            y,
            loss="logistic",
            penalty=aloocv.L2(1000.0),
            method="sgd",
            batch_size=32,
            max_iter=400,
            learning_rate=0.2,
        )
    assert res.acv < start
    _check_honest(X, y, res, 1e-6, caught, loss="logistic")
    ref = aloocv.tune(X, y, loss="logistic", penalty=aloocv.L2(1000.0))
    assert ref.converged
    assert ref.acv <= res.acv
    assert res.acv <= ref.acv * 1.01
    # the final fit is the converged fit at the returned penalty
    direct = aloocv.fit(X, y, loss="logistic", penalty=res.penalty)
    np.testing.assert_allclose(res.fit.coef_, direct.coef_, rtol=1e-5, atol=1e-8)


def test_sgd_elastic_net_returns_the_best_evaluated_point():
    # ACV of the lasso jumps where the active set changes, so stochastic steps can
    # overshoot; Algorithm 2 returns the best point it evaluated, never a worse one.
    rng = np.random.default_rng(95)
    X = rng.standard_normal((800, 30))
    y = X[:, :4] @ np.array([2.0, -1.5, 1.0, 0.5]) + rng.standard_normal(800)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        res = aloocv.tune(
            X,
            y,
            loss="squared",
            penalty=aloocv.ElasticNet(50.0, 10.0),
            method="sgd",
            batch_size=16,
            max_iter=300,
        )
    _check_honest(X, y, res, 1e-6, caught, loss="squared")
    h = res.history
    assert h["acv"].size >= 2
    assert res.acv == pytest.approx(h["acv"].min(), rel=1e-12)


def test_grid_and_one_se_rule():
    X, y = make_data("squared", 200, 15, seed=96)
    grid = np.logspace(-2, 4, 25)
    res = aloocv.tune(X, y, loss="squared", penalty=aloocv.L2(1.0), method="grid", grid=grid)
    ref = np.array([aloocv.loo(X, y, loss="squared", penalty=aloocv.L2(g)).mean for g in grid])
    h = res.history
    order = np.argsort(h["params"][:, 0])
    np.testing.assert_allclose(h["acv"][order], ref, rtol=1e-9)
    assert res.penalty.lam == pytest.approx(grid[np.argmin(ref)])
    one = aloocv.tune(
        X, y, loss="squared", penalty=aloocv.L2(1.0), method="grid", grid=grid, selection="1se"
    )
    assert one.penalty.lam >= res.penalty.lam
    assert one.acv <= res.acv + res.stderr + 1e-12


def test_grid_elastic_net_pairs():
    X, y = make_data("squared", 150, 10, seed=97)
    pairs = [(l1, l2) for l1 in (1.0, 10.0, 50.0) for l2 in (0.1, 10.0)]
    res = aloocv.tune(
        X, y, loss="squared", penalty=aloocv.ElasticNet(1.0, 1.0), method="grid", grid=pairs
    )
    acv = {
        pr: aloocv.loo(X, y, loss="squared", penalty=aloocv.ElasticNet(*pr)).mean for pr in pairs
    }
    best = min(acv, key=acv.get)
    assert tuple(res.penalty.params()) == pytest.approx(best)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"method": "grid", "grid": []}, "grid is empty"),
        ({"method": "grid", "grid": [1.0, -2.0]}, "grid values must be positive"),
        ({"method": "grid", "grid": [0.0]}, "grid values must be positive"),
        ({"penalty": aloocv.L2(np.ones(3))}, "lam vector has length 3"),
        ({"step_rule": "fixed", "learning_rate": 0.0}, "learning_rate must be positive"),
        ({"step_rule": "adam", "learning_rate": -1.0}, "learning_rate must be positive"),
        ({"method": "newtonian"}, "unknown method"),
        ({"penalty": aloocv.L2(0.0)}, "initial penalty must be > 0"),
        ({"method": "sgd", "batch_size": 0}, "batch_size must be"),
        ({"selection": "2se"}, "selection must be"),
        ({"max_iter": 0}, "max_iter must be"),
    ],
)
def test_bad_input(kw, match):
    X, y = make_data("logistic", 60, 5, seed=98)
    args = {"loss": "logistic", "penalty": aloocv.L2(1.0)}
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        aloocv.tune(X, y, **args)


def test_single_class_logistic():
    X, _ = make_data("logistic", 40, 3, seed=99)
    with pytest.raises(ValueError, match="single class"):
        aloocv.tune(X, np.ones(40), loss="logistic")


def test_plot(tmp_path):
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    X, y, _ = diag_ridge_data(seed=100)
    g = aloocv.tune(X, y, loss="squared", penalty=aloocv.L2(1.0), method="grid", n_grid=8)
    disp = g.plot()
    assert isinstance(disp, aloocv.plotting.TuneDisplay)
    disp.figure_.savefig(tmp_path / "grid.png")
    r = aloocv.tune(X, y, loss="squared", penalty=aloocv.L2(np.ones(20)), max_iter=20, tol=1e-3)
    disp2 = r.plot()
    disp2.figure_.savefig(tmp_path / "gd.png")
    assert (tmp_path / "grid.png").stat().st_size > 1000
    assert len(disp2.figure_.axes) == 2 and disp2.ax_ is disp2.axes_[0]


@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.smoke
def test_ridge_grid_path_equals_pointwise_loo(intercept, sparse):
    # squared + scalar L2 grids run from one eigendecomposition; check every point
    import scipy.sparse as sps

    X, y = make_data("squared", 120, 7, seed=101)
    w = np.random.default_rng(5).uniform(0.3, 3.0, 120)
    Xin = sps.csr_matrix(X) if sparse else X
    grid = np.logspace(-2, 3, 9)
    res = aloocv.tune(
        Xin,
        y,
        loss="squared",
        penalty=aloocv.L2(1.0),
        method="grid",
        grid=grid,
        fit_intercept=intercept,
        sample_weight=w,
    )
    for k, lam in enumerate(res.history["params"][:, 0]):
        ref = aloocv.loo(
            X, y, loss="squared", penalty=aloocv.L2(lam), fit_intercept=intercept, sample_weight=w
        )
        np.testing.assert_allclose(res.path_losses[:, k], ref.losses, rtol=1e-9, atol=1e-14)
        assert res.history["acv"][k] == pytest.approx(ref.mean, rel=1e-10)
        assert res.history["stderr"][k] == pytest.approx(ref.stderr, rel=1e-8)


def test_logistic_grid_path_fits_equal_independent_fits():
    # along a grid each fit starts from the previous point's Hessian (chord steps);
    # the result must be the same converged fit and ALO as a cold start
    X, y = make_data("logistic", 400, 8, seed=102, scale=3.0)
    grid = np.logspace(-3, 3, 8)
    res = aloocv.tune(X, y, loss="logistic", penalty=aloocv.L2(1.0), method="grid", grid=grid)
    for k, lam in enumerate(res.history["params"][:, 0]):
        ref = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(lam))
        # ALO uses the Hessian of the last Newton iterate, which is a different point
        # (within the last, tiny step of the optimum) on the two routes
        np.testing.assert_allclose(res.path_losses[:, k], ref.losses, rtol=1e-5, atol=1e-12)
        coef = aloocv.fit(X, y, loss="logistic", penalty=aloocv.L2(lam)).coef_
        direct = aloocv.fit(X, y, loss="logistic", penalty=res.penalty).coef_
        assert np.all(np.isfinite(coef)) and np.all(np.isfinite(direct))
    np.testing.assert_allclose(res.fit.coef_, direct, rtol=1e-7, atol=1e-10)


def test_grid_result_is_the_selected_points_evaluation():
    # the grid's own evaluation at the selected point is the result: no refit there
    X, y = make_data("logistic", 300, 5, seed=4)
    grid = np.logspace(-4, 2, 10)
    res = aloocv.tune(X, y, loss="logistic", penalty=1.0, method="grid", grid=grid)
    k = int(np.argmin(res.history["acv"]))
    assert k < grid.size - 4  # not among the last evaluations (the objective caches 4)
    assert res.n_fits == grid.size
    np.testing.assert_array_equal(res.loo.losses, res.path_losses[:, k])
    np.testing.assert_array_equal(res.fit.coef_, res.path_coefs[k])
    lam = res.history["params"][k, 0]  # the grid runs from the most regularized point
    assert res.penalty.lam == lam
    ref = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(lam))
    np.testing.assert_allclose(res.loo.losses, ref.losses, rtol=1e-6, atol=1e-9)
