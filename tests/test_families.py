"""The GLM families beyond squared / logistic / Poisson (gamma, Tweedie, binomial
proportions, Huber) and offsets: fits against scikit-learn or scipy, LOO against
brute-force refits, the exact hypergradient against finite differences, K-fold, tuning,
sparse X, the dual route; unknown loss names raise everywhere."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.special import gammaln
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import (
    GammaRegressor,
    LogisticRegression,
    PoissonRegressor,
    TweedieRegressor,
)

import aloocv
from aloocv.losses import get_loss
from conftest import make_data

FIT_TOL = 1e-12
COEF_TOL = 1e-6  # the target against scikit-learn
ALO_REL = 0.01  # ALO within 1% of brute-force refits in mean loss
FD_STEP = 1e-4  # central differences in log(lambda)
GRAD_RTOL = 1e-5

# family -> (loss argument, data generator name)
FAMILIES = {
    "gamma": ("gamma", "gamma"),
    "tweedie-1.5": (aloocv.Tweedie(power=1.5), "tweedie"),
    "tweedie-2.6": (aloocv.Tweedie(power=2.6), "gamma"),
    "binomial": ("binomial", "binomial"),
    "huber": (aloocv.Huber(delta=1.0), "huber"),
}


def family_data(family, n=80, p=4, seed=0):
    loss, gen = FAMILIES[family]
    X, y = make_data(gen, n, p, seed=seed)
    return X, y, loss


def brute_force_loo_mean(X, y, loss, lam, offset=None):
    """n refits without each sample (aloocv.fit on n - 1 rows), the loss at the held-out row."""
    L = get_loss(loss)
    n = X.shape[0]
    out = np.empty(n)
    for i in range(n):
        keep = np.arange(n) != i
        off = None if offset is None else offset[keep]
        f = aloocv.fit(X[keep], y[keep], loss=loss, penalty=aloocv.L2(lam), tol=FIT_TOL, offset=off)
        eta = f.decision_function(X[i : i + 1]) + (0.0 if offset is None else offset[i])
        out[i] = L.value(y[i : i + 1], eta)[0]
    return out


def scipy_fit(X, y, loss, lam, w=None, offset=None):
    """The penalized objective minimized by scipy (an independent reference)."""
    L = get_loss(loss)
    n, p = X.shape
    w = np.ones(n) if w is None else w
    off = np.zeros(n) if offset is None else offset

    def fg(b):
        eta = b[0] + X @ b[1:] + off
        v, d1 = L.derivatives(y, eta)[:2]
        f = np.sum(w * v) + 0.5 * lam * b[1:] @ b[1:]
        g = np.r_[np.sum(w * d1), X.T @ (w * d1) + lam * b[1:]]
        return f, g

    r = minimize(
        fg,
        np.zeros(p + 1),
        jac=True,
        method="L-BFGS-B",
        options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10000},
    )
    return r.x


# ----------------------------------------------------------------------------- fits


@pytest.mark.parametrize("power", [1.0, 1.5, 2.0])
def test_tweedie_and_gamma_fits_match_scikit_learn(power):
    X, y = make_data("gamma", 150, 4, seed=3)
    n, lam = X.shape[0], 2.0
    kw = {"alpha": lam / n, "tol": 1e-12, "max_iter": 1000, "solver": "newton-cholesky"}
    ref = TweedieRegressor(power=power, link="log", **kw).fit(X, y)
    f = aloocv.fit(X, y, loss=aloocv.Tweedie(power=power), penalty=aloocv.L2(lam), tol=FIT_TOL)
    np.testing.assert_allclose(f.coef_, ref.coef_, atol=COEF_TOL)
    assert f.intercept_ == pytest.approx(ref.intercept_, abs=COEF_TOL)
    if power == 2.0:
        g = GammaRegressor(**kw).fit(X, y)
        fg = aloocv.fit(X, y, loss="gamma", penalty=aloocv.L2(lam), tol=FIT_TOL)
        np.testing.assert_allclose(fg.coef_, g.coef_, atol=COEF_TOL)
        # Tweedie(power=2) is the gamma model
        np.testing.assert_allclose(f.coef_, fg.coef_, atol=1e-9)
    if power == 1.0:
        fp = aloocv.fit(X, y, loss="poisson", penalty=aloocv.L2(lam), tol=FIT_TOL)
        np.testing.assert_allclose(f.coef_, fp.coef_, atol=1e-9)
        pr = PoissonRegressor(**kw).fit(X, y)
        np.testing.assert_allclose(fp.coef_, pr.coef_, atol=COEF_TOL)


def _deviance_objective(X, y, loss, f, lam, w, off, l1=0.0):
    """The penalized objective at f's coefficients from the formulas written out here
    (gamma: y/mu + log(mu/y) - 1; Tweedie, p not 1 or 2: y^(2-p)/((1-p)(2-p))
    - y mu^(1-p)/(1-p) + mu^(2-p)/(2-p); p = 1: y log(y/mu) - y + mu; Poisson:
    mu - y eta + log(y!))."""
    eta = X @ f.coef_ + f.intercept_ + off
    mu = np.exp(eta)
    if loss == "poisson":
        return _penalized(np.sum(w * (mu - y * eta + gammaln(y + 1.0))), f.coef_, lam, l1)
    p = 2.0 if loss == "gamma" else loss.power
    if p == 2.0:
        v = y / mu + np.log(mu / y) - 1.0
    elif p == 1.0:
        v = np.where(y > 0, y * np.log(np.where(y > 0, y, 1.0) / mu), 0.0) - y + mu
    else:
        a, b = 1.0 - p, 2.0 - p
        v = y**b / (a * b) - y * mu**a / a + mu**b / b
    return _penalized(np.sum(w * v), f.coef_, lam, l1)


def _penalized(loss, c, lam, l1):
    return loss + 0.5 * lam * c @ c + l1 * np.abs(c).sum()


@pytest.mark.parametrize(
    "loss",
    [
        "gamma",
        aloocv.Tweedie(power=1.0),
        aloocv.Tweedie(power=1.5),
        aloocv.Tweedie(power=3.0),
        "poisson",
    ],
    ids=["gamma", "tweedie-1", "tweedie-1.5", "tweedie-3", "poisson-rates"],
)
def test_reported_objective_is_the_deviance_at_the_fit(loss):
    # The fits evaluate the terms in y alone (a log, a pow or an lgamma of y) once per
    # sample and read them back at every later step (YPartCache, newton.hpp): the
    # objective they report after several steps, with zero weights, exact zeros of y
    # (Tweedie p < 2, Poisson), rates (Poisson: counts over exposures, lgamma for the
    # non-integers) and an offset, is the one written out here, plain and with L1.
    rng = np.random.default_rng(4)
    if loss == "poisson":
        X, y = make_data("poisson", 120, 5, seed=4)
        y = y / rng.choice([1.0, 2.0, 3.0], size=y.size)
        assert np.any(y != np.round(y)) and np.any(y == 0.0)
    else:
        gen = "tweedie" if loss != "gamma" and loss.power < 2 else "gamma"
        X, y = make_data(gen, 120, 5, seed=4)
    w = rng.uniform(0.5, 2.0, y.size)
    w[::7] = 0.0
    off = 0.1 * rng.standard_normal(y.size)
    if loss != "gamma" and (loss == "poisson" or loss.power < 2):
        assert np.any(y[w > 0] == 0.0)
    lam, l1 = 1.5, 0.7
    for pen, a in ((aloocv.L2(lam), 0.0), (aloocv.ElasticNet(l1=l1, l2=lam), l1)):
        f = aloocv.fit(X, y, loss=loss, penalty=pen, sample_weight=w, offset=off, tol=FIT_TOL)
        assert f.n_iter_ >= 3
        ref = _deviance_objective(X, y, loss, f, lam, w, off, a)
        assert f.objective_ == pytest.approx(ref, rel=1e-12)


def test_tweedie_power_above_two_matches_scipy():
    X, y = make_data("gamma", 150, 4, seed=4, scale=2.0)
    loss = aloocv.Tweedie(power=2.6)
    # some samples have negative curvature at the fit: the exact Hessian is used
    f = aloocv.fit(X, y, loss=loss, penalty=aloocv.L2(1.0), tol=FIT_TOL)
    assert f.converged_
    np.testing.assert_allclose(f.beta_, scipy_fit(X, y, loss, 1.0), atol=1e-6)


def test_binomial_proportions_equal_logistic_on_expanded_trials():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((60, 3))
    trials = rng.integers(1, 6, 60)
    succ = rng.binomial(trials, 1 / (1 + np.exp(-X[:, 0])))
    lam = 1.5
    f = aloocv.fit(
        X,
        succ / trials,
        loss="binomial",
        penalty=aloocv.L2(lam),
        sample_weight=trials.astype(float),
        tol=FIT_TOL,
    )
    # the Bernoulli rows: succ ones and trials - succ zeros per row
    Xe = np.repeat(np.vstack([X, X]), np.r_[succ, trials - succ], axis=0)
    ye = np.repeat(np.r_[np.ones(60), np.zeros(60)], np.r_[succ, trials - succ])
    ref = LogisticRegression(C=1 / lam, tol=1e-12, max_iter=10000).fit(Xe, ye)
    np.testing.assert_allclose(f.coef_, ref.coef_.ravel(), atol=COEF_TOL)
    assert f.intercept_ == pytest.approx(ref.intercept_[0], abs=COEF_TOL)


def test_huber_fit_matches_scipy_and_resists_outliers():
    X, y = make_data("huber", 200, 3, seed=6)
    loss = aloocv.Huber(delta=1.0)
    f = aloocv.fit(X, y, loss=loss, penalty=aloocv.L2(0.5), tol=FIT_TOL)
    np.testing.assert_allclose(f.beta_, scipy_fit(X, y, loss, 0.5), atol=1e-6)
    # with 10% gross outliers the Huber fit is nearer the truth than least squares
    X0, y0 = make_data("squared", 200, 3, seed=6)  # same X and signal, no outliers
    sq = aloocv.fit(X, y, loss="squared", penalty=aloocv.L2(0.5))
    clean = aloocv.fit(X0, y0, loss="squared", penalty=aloocv.L2(0.5))
    assert np.linalg.norm(f.coef_ - clean.coef_) < np.linalg.norm(sq.coef_ - clean.coef_)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_predict_applies_the_inverse_link(family):
    X, y, loss = family_data(family)
    f = aloocv.fit(X, y, loss=loss, penalty=aloocv.L2(1.0))
    eta = X @ f.coef_ + f.intercept_
    expected = {"identity": eta, "log": np.exp(eta), "logit": 1 / (1 + np.exp(-eta))}
    np.testing.assert_allclose(f.predict(X), expected[get_loss(loss).link], rtol=1e-12)


# ----------------------------------------------------------------------------- offsets


def test_poisson_offset_equals_rate_with_exposure_weights():
    rng = np.random.default_rng(7)
    X = rng.standard_normal((300, 4))
    t = rng.uniform(0.2, 5.0, 300)
    y = rng.poisson(t * np.exp(0.2 + X @ np.array([0.4, -0.3, 0.1, 0.0]))).astype(float)
    lam = 3.0
    f = aloocv.fit(X, y, loss="poisson", penalty=aloocv.L2(lam), offset=np.log(t), tol=FIT_TOL)
    ref = PoissonRegressor(
        alpha=lam / t.sum(), tol=1e-12, max_iter=1000, solver="newton-cholesky"
    ).fit(X, y / t, sample_weight=t)
    np.testing.assert_allclose(f.coef_, ref.coef_, atol=COEF_TOL)
    assert f.intercept_ == pytest.approx(ref.intercept_, abs=COEF_TOL)
    np.testing.assert_allclose(f.predict(X, offset=np.log(t)), t * ref.predict(X), rtol=1e-6)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_offset_matches_scipy_for_every_family(family):
    X, y, loss = family_data(family, n=100)
    off = np.random.default_rng(8).uniform(-0.5, 0.5, X.shape[0])
    f = aloocv.fit(X, y, loss=loss, penalty=aloocv.L2(1.0), offset=off, tol=FIT_TOL)
    np.testing.assert_allclose(f.beta_, scipy_fit(X, y, loss, 1.0, offset=off), atol=1e-6)


def test_offset_in_loo_kfold_and_tune():
    rng = np.random.default_rng(9)
    X = rng.standard_normal((60, 3))
    t = rng.uniform(0.5, 3.0, 60)
    y = rng.poisson(t * np.exp(X[:, 0] * 0.5)).astype(float)
    off = np.log(t)
    lam = 2.0
    r = aloocv.loo(
        X, y, loss="poisson", penalty=aloocv.L2(lam), offset=off, method="exact", tol=FIT_TOL
    )
    np.testing.assert_allclose(r.losses, brute_force_loo_mean(X, y, "poisson", lam, off), rtol=1e-6)
    a = aloocv.loo(X, y, loss="poisson", penalty=aloocv.L2(lam), offset=off)
    assert a.mean == pytest.approx(r.mean, rel=ALO_REL)
    # no offset is a different problem
    assert abs(aloocv.loo(X, y, loss="poisson", penalty=aloocv.L2(lam)).mean - a.mean) > 1e-3
    folds = np.arange(60) % 4
    ke = aloocv.kfold(X, y, loss="poisson", penalty=lam, folds=folds, method="exact", offset=off)
    ref = np.empty(60)
    for k in range(4):
        tr = folds != k
        fk = aloocv.fit(X[tr], y[tr], loss="poisson", penalty=lam, offset=off[tr], tol=FIT_TOL)
        eta = fk.decision_function(X[~tr], off[~tr])
        ref[~tr] = get_loss("poisson").value(y[~tr], eta)
    np.testing.assert_allclose(ke.losses, ref, rtol=1e-6)
    tr = aloocv.tune(
        X, y, loss="poisson", penalty=aloocv.L2(1.0), method="grid", n_grid=5, offset=off
    )
    # the grid's ALO at each point is loo(..., offset=off) there
    lam_best = float(np.ravel(tr.penalty.params())[0])
    ref_best = aloocv.loo(X, y, loss="poisson", penalty=aloocv.L2(lam_best), offset=off)
    assert tr.acv == pytest.approx(ref_best.mean, rel=1e-6)
    with pytest.raises(ValueError, match="offset"):
        aloocv.fit(X, y, loss="poisson", offset=np.ones(5))
    with pytest.raises(ValueError, match="offset contains NaN"):
        aloocv.fit(X, y, loss="poisson", offset=np.r_[np.nan, np.zeros(59)])


# ----------------------------------------------------------------------------- LOO


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_loo_against_brute_force_refits(family):
    X, y, loss = family_data(family, n=60, seed=10)
    lam = 2.0
    ref = brute_force_loo_mean(X, y, loss, lam)
    ex = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(lam), method="exact", tol=FIT_TOL)
    np.testing.assert_allclose(ex.losses, ref, rtol=1e-6, atol=1e-9)
    alo = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(lam), tol=FIT_TOL)
    assert alo.mean == pytest.approx(ref.mean(), rel=ALO_REL)
    for method in ("if", "lemma3"):
        r = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(lam), method=method)
        assert np.isfinite(r.losses).all()
        assert r.mean == pytest.approx(ref.mean(), rel=0.1)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_hypergradient_matches_finite_differences(family):
    X, y, loss = family_data(family, n=70, seed=11)
    lam = 1.5

    def acv(v):
        return aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(v), tol=1e-13, max_iter=500).mean

    g = aloocv.loo(
        X, y, loss=loss, penalty=aloocv.L2(lam), tol=1e-13, max_iter=500, return_gradient=True
    ).gradient
    fd = (acv(lam * np.exp(FD_STEP)) - acv(lam * np.exp(-FD_STEP))) / (2 * FD_STEP)
    # gradient is d mean / d lambda; the differences are in log(lambda)
    assert g[0] * lam == pytest.approx(fd, rel=GRAD_RTOL, abs=GRAD_RTOL * abs(fd) + 1e-12)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_kfold_approx_and_exact(family):
    X, y, loss = family_data(family, n=80, seed=12)
    folds = np.arange(80) % 5
    ex = aloocv.kfold(X, y, loss=loss, penalty=1.0, folds=folds, method="exact")
    if family == "tweedie-2.6":
        with pytest.raises(ValueError, match="non-negative curvature"):
            aloocv.kfold(X, y, loss=loss, penalty=1.0, folds=folds)
        return
    ap = aloocv.kfold(X, y, loss=loss, penalty=1.0, folds=folds)
    assert ap.mean == pytest.approx(ex.mean, rel=0.05)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_sparse_X_matches_dense(family):
    X, y, loss = family_data(family, n=80, seed=13)
    X[np.abs(X) < 0.5] = 0.0
    d = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(1.0), tol=FIT_TOL)
    s = aloocv.loo(sp.csr_matrix(X), y, loss=loss, penalty=aloocv.L2(1.0), tol=FIT_TOL)
    np.testing.assert_allclose(s.fit.coef_, d.fit.coef_, atol=1e-9)
    np.testing.assert_allclose(s.losses, d.losses, rtol=1e-7, atol=1e-10)


@pytest.mark.filterwarnings("ignore:ALO's mean may be off:aloocv.ALOWarning")
@pytest.mark.parametrize("family", ["gamma", "tweedie-1.5", "binomial", "huber"])
def test_dual_route_matches_primal(family):
    X, y, loss = family_data(family, n=30, p=50, seed=14)
    pen = aloocv.L2(5.0)
    pr = aloocv.loo(X, y, loss=loss, penalty=pen, solver="primal", tol=FIT_TOL)
    du = aloocv.loo(X, y, loss=loss, penalty=pen, solver="dual", tol=FIT_TOL)
    np.testing.assert_allclose(du.fit.coef_, pr.fit.coef_, atol=1e-7)
    np.testing.assert_allclose(du.losses, pr.losses, rtol=1e-6, atol=1e-9)
    g = aloocv.loo(
        X, y, loss=loss, penalty=pen, solver="dual", tol=FIT_TOL, return_gradient=True
    ).gradient
    gp = aloocv.loo(
        X, y, loss=loss, penalty=pen, solver="primal", tol=FIT_TOL, return_gradient=True
    ).gradient
    np.testing.assert_allclose(g, gp, rtol=1e-5)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_tune_grid_and_gradient(family):
    X, y, loss = family_data(family, n=80, seed=15)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        grid = aloocv.tune(
            X, y, loss=loss, penalty=aloocv.L2(1.0), method="grid", grid=np.geomspace(0.01, 100, 9)
        )
        gd = aloocv.tune(X, y, loss=loss, penalty=aloocv.L2(1.0), method="auto")
    g_best = float(np.min(grid.history["acv"]))
    assert np.isfinite(gd.fit.coef_).all()
    # the gradient search ends at or below the grid's best ALO (up to its tolerance)
    assert gd.acv <= g_best + 1e-3 * abs(g_best)


# ----------------------------------------------------------------------------- names


def test_domains_are_checked():
    X, _ = make_data("gamma", 20, 2)
    with pytest.raises(ValueError, match="outside the domain of the gamma loss"):
        aloocv.fit(X, np.r_[0.0, np.ones(19)], loss="gamma")
    with pytest.raises(ValueError, match="outside the domain of the binomial loss"):
        aloocv.fit(X, np.r_[1.5, np.zeros(19)], loss="binomial")
    with pytest.raises(ValueError, match="outside the domain of the tweedie loss"):
        aloocv.fit(X, np.r_[0.0, np.ones(19)], loss=aloocv.Tweedie(power=2.5))
    aloocv.fit(X, np.r_[0.0, np.ones(19)], loss=aloocv.Tweedie(power=1.5))


BAD_LOSS = "gama"


@pytest.mark.parametrize(
    "call",
    [
        lambda X, y: aloocv.fit(X, y, loss=BAD_LOSS),
        lambda X, y: aloocv.loo(X, y, loss=BAD_LOSS),
        lambda X, y: aloocv.kfold(X, y, loss=BAD_LOSS, n_folds=3),
        lambda X, y: aloocv.tune(X, y, loss=BAD_LOSS),
        lambda X, y: aloocv.nested_cv({"loss": BAD_LOSS, "candidates": [1.0]}, X, y),
        lambda X, y: aloocv.dev_set({"loss": BAD_LOSS, "candidates": [1.0]}, X, y),
        lambda X, y: aloocv.nested._mean_loss(BAD_LOSS, y, y),
        lambda X, y: aloocv.losses.get_loss(BAD_LOSS),
    ],
)
def test_unknown_loss_raises_everywhere(call):
    X, y = make_data("gamma", 30, 2)
    with pytest.raises(ValueError, match="unknown loss 'gama'"):
        call(X, y)


def test_unknown_loss_in_predict_and_cli(capsys):
    X, y = make_data("gamma", 30, 2)
    f = aloocv.fit(X, y, loss="gamma")
    f.loss = BAD_LOSS
    with pytest.raises(ValueError, match="unknown loss 'gama'"):
        f.predict(X)
    from aloocv.__main__ import main

    with pytest.raises(SystemExit):
        main(["--loss", BAD_LOSS])
    assert "invalid choice" in capsys.readouterr().err


def test_tweedie_above_two_auto_solver_stays_primal():
    X, y = make_data("gamma", 20, 40, seed=16, scale=2.0)
    loss = aloocv.Tweedie(power=3.0)
    r = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(2.0))  # n < p: "auto" would be dual
    p = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(2.0), solver="primal")
    np.testing.assert_allclose(r.losses, p.losses)


@pytest.mark.parametrize("family", ["gamma", "tweedie-1.5", "huber"])
def test_hypergradient_with_weights_offset_and_sparse_X(family):
    X, y, loss = family_data(family, n=70, seed=17)
    rng = np.random.default_rng(18)
    w = rng.uniform(0.5, 2.0, 70)
    off = rng.uniform(-0.3, 0.3, 70)
    Xs = sp.csr_matrix(np.where(np.abs(X) < 0.4, 0.0, X))
    lam = np.array([0.5, 1.0, 2.0, 4.0])

    def acv(v):
        return aloocv.loo(
            Xs, y, loss=loss, penalty=aloocv.L2(v), sample_weight=w, offset=off, tol=1e-13
        ).mean

    g = aloocv.loo(
        Xs,
        y,
        loss=loss,
        penalty=aloocv.L2(lam),
        sample_weight=w,
        offset=off,
        tol=1e-13,
        return_gradient=True,
    ).gradient
    fd = np.empty(4)
    for k in range(4):
        e = np.zeros(4)
        e[k] = FD_STEP
        fd[k] = (acv(lam * np.exp(e)) - acv(lam * np.exp(-e))) / (2 * FD_STEP)
    scale = np.max(np.abs(fd))
    np.testing.assert_allclose(g * lam, fd, rtol=GRAD_RTOL, atol=GRAD_RTOL * scale)


@pytest.mark.parametrize("n_folds", [9, 45], ids=["p-by-p form", "Woodbury form"])
def test_kfold_approx_with_offset_close_to_exact(n_folds):
    X, y = make_data("poisson", 90, 3, seed=19)
    off = np.random.default_rng(20).uniform(-0.5, 0.5, 90)
    folds = np.arange(90) % n_folds
    ap = aloocv.kfold(X, y, loss="poisson", penalty=1.0, folds=folds, offset=off)
    ex = aloocv.kfold(X, y, loss="poisson", penalty=1.0, folds=folds, offset=off, method="exact")
    assert ap.mean == pytest.approx(ex.mean, rel=0.02)


def test_offset_on_dual_route_and_with_given_coef():
    X, y = make_data("poisson", 30, 50, seed=21)
    off = np.random.default_rng(22).uniform(-0.5, 0.5, 30)
    pen = aloocv.L2(5.0)
    kw = {"loss": "poisson", "penalty": pen, "offset": off, "tol": FIT_TOL}
    pr = aloocv.loo(X, y, solver="primal", return_gradient=True, **kw)
    du = aloocv.loo(X, y, solver="dual", return_gradient=True, **kw)
    np.testing.assert_allclose(du.fit.coef_, pr.fit.coef_, atol=1e-8)
    np.testing.assert_allclose(du.predictions, pr.predictions, rtol=1e-7)
    np.testing.assert_allclose(du.gradient, pr.gradient, rtol=1e-6)
    ex_d = aloocv.loo(X, y, solver="dual", method="exact", **kw)
    ex_p = aloocv.loo(X, y, solver="primal", method="exact", **kw)
    np.testing.assert_allclose(ex_d.losses, ex_p.losses, rtol=1e-7)
    given = aloocv.loo(X, y, coef=pr.fit.coef_, intercept=pr.fit.intercept_, **kw)
    np.testing.assert_allclose(given.predictions, pr.predictions, rtol=1e-8)


@pytest.mark.parametrize(
    "est, scorer",
    [
        (aloocv.ALOPoissonRegressorCV, "neg_mean_poisson_deviance"),
        (aloocv.ALOGammaRegressorCV, "neg_mean_gamma_deviance"),
        (aloocv.ALOTweedieRegressorCV, "tweedie"),
    ],
)
@pytest.mark.parametrize("weighted", [False, True])
def test_glm_default_best_score_is_minus_mean_deviance(est, scorer, weighted):
    """Without a scorer, best_score_ is minus the mean deviance of the leave-one-out
    means: what scikit-learn's deviance scorer gives on them (same choice of alpha)."""
    from sklearn.metrics import make_scorer, mean_tweedie_deviance

    loss = {"neg_mean_poisson_deviance": "poisson", "neg_mean_gamma_deviance": "gamma"}
    X, y = make_data(loss.get(scorer, "tweedie"), 200, 4, seed=5)
    w = np.random.default_rng(1).uniform(0.5, 2.0, y.size) if weighted else None
    if scorer == "tweedie":
        scorer = make_scorer(mean_tweedie_deviance, power=1.5, greater_is_better=False)
    alphas = np.logspace(-3, 0, 5)
    plain = est(alphas=alphas).fit(X, y, sample_weight=w)
    scored = est(alphas=alphas, scoring=scorer).fit(X, y, sample_weight=w)
    assert plain.alpha_ == scored.alpha_
    np.testing.assert_allclose(plain.best_score_, scored.best_score_, rtol=1e-10)
    np.testing.assert_allclose(
        plain.search_results_["score"], scored.search_results_["score"], rtol=1e-10
    )
