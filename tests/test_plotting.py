"""plot_cv's display (aloocv.plotting.CVCurveDisplay): the curve in the units of
best_score_, against independent references (brute-force refits, scikit-learn's metrics),
the standard-error band and the one-standard-error mark."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import gammaln
from sklearn.exceptions import NotFittedError
from sklearn.metrics import log_loss, mean_poisson_deviance

import aloocv
from aloocv.plotting import CVCurveDisplay, one_standard_error_index
from conftest import make_data


@pytest.fixture
def plt():
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    import matplotlib.pyplot as pyplot

    yield pyplot
    pyplot.close("all")


def _ridge_brute_force(X, y, alphas):
    """Mean squared leave-one-out error per alpha and its standard error, by n refits
    (numpy, unpenalized intercept)."""
    n, p = X.shape
    Xt = np.hstack([np.ones((n, 1)), X])
    means, ses = [], []
    for a in alphas:
        pen = np.diag(np.r_[0.0, np.full(p, a)])
        e2 = np.empty(n)
        for i in range(n):
            m = np.arange(n) != i
            b = np.linalg.solve(Xt[m].T @ Xt[m] + pen, Xt[m].T @ y[m])
            e2[i] = (y[i] - Xt[i] @ b) ** 2
        means.append(e2.mean())
        ses.append(e2.std(ddof=1) / np.sqrt(n))
    return np.array(means), np.array(ses)


def _one_se_by_hand(strength, values, ses):
    """The most regularized candidate within one standard error of the lowest value."""
    best = int(np.argmin(values))
    limit = values[best] + ses[best]
    pick = None
    for k in range(values.size):
        if values[k] <= limit and (pick is None or strength[k] > strength[pick]):
            pick = k
    return pick


def _ridge_data():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((60, 8))
    y = 0.3 * X[:, 0] + rng.standard_normal(60)
    return X, y, np.logspace(-2, 3, 11)


def test_ridge_curve_band_and_one_se_mark_against_refits(plt):
    X, y, alphas = _ridge_data()
    est = aloocv.ALORidgeCV(alphas=alphas).fit(X, y)
    disp = est.plot_cv()
    assert isinstance(disp, CVCurveDisplay)
    assert disp.ax_.get_ylabel() == "leave-one-out mean squared error (ALO)"
    assert disp.ax_.get_xlabel() == "alpha" and disp.ax_.get_xscale() == "log"
    assert disp.figure_ is disp.ax_.figure
    mse, se = _ridge_brute_force(X, y, alphas)
    # the drawn curve is the exact leave-one-out MSE; its minimum is -best_score_
    line = disp.lines_[0]
    np.testing.assert_allclose(line.get_xdata(), alphas)
    np.testing.assert_allclose(line.get_ydata(), mse, rtol=1e-10)
    assert np.min(line.get_ydata()) == pytest.approx(-est.best_score_, rel=1e-12)
    np.testing.assert_allclose(disp.stderr, se, rtol=1e-8)
    # the band spans +-1 standard error
    verts = disp.bands_[0].get_paths()[0].vertices
    np.testing.assert_allclose(verts[:, 1].max(), np.max(mse + se), rtol=1e-10)
    np.testing.assert_allclose(verts[:, 1].min(), np.min(mse - se), rtol=1e-10)
    # the 1-SE mark: the largest alpha within one standard error of the best
    k = _one_se_by_hand(alphas, mse, se)
    assert k != int(np.argmin(mse))  # the data make the two choices differ
    assert disp.one_se_index_ == k
    np.testing.assert_allclose(disp.one_se_marker_.get_xdata(), [alphas[k]])
    np.testing.assert_allclose(disp.one_se_marker_.get_ydata(), [mse[k]], rtol=1e-10)
    assert disp.one_se_marker_.get_label() == f"1-SE choice (alpha={alphas[k]:.3g})"
    # the chosen alpha's line, and rule="1se" chooses the marked candidate
    np.testing.assert_allclose(disp.chosen_lines_[0].get_xdata(), [est.alpha_] * 2)
    one_se = aloocv.ALORidgeCV(alphas=alphas, rule="1se").fit(X, y)
    assert one_se.alpha_ == alphas[k]


def test_poisson_curve_is_minus_best_score_in_deviance_units(plt):
    X, y = make_data("poisson", 150, 4, seed=401)
    w = np.random.default_rng(402).uniform(0.5, 2.0, 150)
    alphas = np.logspace(-3, 1, 6)
    est = aloocv.ALOPoissonRegressorCV(alphas=alphas, tol=1e-12).fit(X, y, sample_weight=w)
    disp = est.plot_cv()
    assert disp.ax_.get_ylabel() == "leave-one-out mean Poisson deviance (ALO)"
    assert not disp.greater_is_better
    # per alpha: scikit-learn's mean Poisson deviance of the leave-one-out means
    dev = []
    for a in alphas:
        r = aloocv.loo(X, y, loss="poisson", penalty=aloocv.L2(a * w.sum()), sample_weight=w)
        dev.append(mean_poisson_deviance(y, np.exp(r.predictions), sample_weight=w))
    np.testing.assert_allclose(disp.lines_[0].get_ydata(), dev, rtol=1e-7)
    assert np.min(disp.lines_[0].get_ydata()) == pytest.approx(-est.best_score_, rel=1e-10)
    # unweighted: the band is the standard error rule="1se" uses, that of the mean
    # negative log-likelihood (log y! included), times 2: in deviance units
    est = aloocv.ALOPoissonRegressorCV(alphas=alphas, tol=1e-12).fit(X, y)
    disp = est.plot_cv()
    for k, a in enumerate(alphas):
        r = aloocv.loo(X, y, loss="poisson", penalty=aloocv.L2(a * 150))
        mu = np.exp(r.predictions)
        d = 2.0 * (np.where(y > 0, y * np.log(np.where(y > 0, y, 1.0) / mu), 0.0) - y + mu)
        assert disp.values[k] == pytest.approx(d.mean(), rel=1e-7)
        nll = mu - y * r.predictions + gammaln(y + 1.0)
        assert disp.stderr[k] == pytest.approx(2.0 * nll.std(ddof=1) / np.sqrt(150), rel=1e-7)
    k = _one_se_by_hand(alphas, disp.values, disp.stderr)
    assert disp.one_se_index_ == k
    np.testing.assert_allclose(disp.one_se_marker_.get_xdata(), [alphas[k]])


def test_logistic_curve_in_log_loss_and_one_se_in_C(plt):
    X, y = make_data("logistic", 200, 6, seed=403, scale=0.5)
    Cs = np.logspace(-3, 2, 9)
    est = aloocv.ALOLogisticRegressionCV(Cs=Cs, tol=1e-12).fit(X, y)
    disp = est.plot_cv()
    assert disp.ax_.get_ylabel() == "leave-one-out log-loss (ALO)"
    assert disp.ax_.get_xlabel() == "C"
    r = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0 / est.C_[0]), tol=1e-12)
    p1 = 1.0 / (1.0 + np.exp(-r.predictions))
    assert -est.best_score_ == pytest.approx(log_loss(y, p1), rel=1e-8)
    assert np.min(disp.values) == pytest.approx(-est.best_score_, rel=1e-12)
    # the most regularized candidate is the smallest C
    k = _one_se_by_hand(1.0 / Cs, disp.values, disp.stderr)
    assert disp.one_se_index_ == k
    np.testing.assert_allclose(disp.one_se_marker_.get_xdata(), [Cs[k]])
    one_se = aloocv.ALOLogisticRegressionCV(Cs=Cs, tol=1e-12, rule="1se").fit(X, y)
    assert one_se.C_[0] == Cs[k]


@pytest.mark.parametrize(
    ("cls", "kw", "gen", "label"),
    [
        (aloocv.ALOGammaRegressorCV, {}, "gamma", "mean gamma deviance"),
        (aloocv.ALOTweedieRegressorCV, {"power": 1.5}, "tweedie", "mean Tweedie deviance"),
    ],
)
def test_glm_labels_and_units(plt, cls, kw, gen, label):
    from sklearn.metrics import mean_tweedie_deviance

    X, y = make_data(gen, 120, 3, seed=404)
    est = cls(alphas=np.logspace(-3, 0, 4), tol=1e-12, **kw).fit(X, y)
    disp = est.plot_cv()
    assert disp.ax_.get_ylabel().startswith(f"leave-one-out {label}")
    r = aloocv.loo(X, y, loss=est._loss(), penalty=aloocv.L2(est.alpha_ * 120), tol=1e-12)
    dev = mean_tweedie_deviance(y, np.exp(r.predictions), power=est._power())
    assert np.min(disp.values) == pytest.approx(dev, rel=1e-7)
    assert np.min(disp.values) == pytest.approx(-est.best_score_, rel=1e-12)


def test_scorer_curve_is_the_score_without_band(plt):
    X, y = make_data("squared", 100, 5, seed=405)
    est = aloocv.ALORidgeCV(alphas=np.logspace(-2, 2, 6), scoring="r2").fit(X, y)
    disp = est.plot_cv()
    assert disp.greater_is_better and disp.stderr is None
    assert disp.one_se_marker_ is None and disp.bands_ == []
    assert disp.ax_.get_ylabel() == "leave-one-out r2 (ALO)"
    assert np.max(disp.values) == pytest.approx(est.best_score_, rel=1e-12)


def test_display_redraws_on_given_axes(plt):
    X, y, alphas = _ridge_data()
    est = aloocv.ALORidgeCV(alphas=alphas).fit(X, y)
    fig, (a, b) = plt.subplots(1, 2)
    disp = CVCurveDisplay.from_estimator(est, ax=a, title="mine")
    assert disp.ax_ is a and disp.figure_ is fig and a.get_title() == "mine"
    assert disp.plot(ax=b) is disp and disp.ax_ is b
    np.testing.assert_allclose(b.get_lines()[0].get_ydata(), a.get_lines()[0].get_ydata())
    assert aloocv.plotting.plot_cv(est).values.tolist() == disp.values.tolist()


def test_display_refuses_unfitted_estimator():
    with pytest.raises(NotFittedError):
        CVCurveDisplay.from_estimator(aloocv.ALORidgeCV())


def test_one_standard_error_index():
    # lower is better: 0.95 <= 0.9 + 0.1, the strongest within one SE
    assert one_standard_error_index([0.1, 1.0, 10.0], [1.0, 0.9, 0.95], [0.1] * 3) == 2
    assert one_standard_error_index([0.1, 1.0, 10.0], [1.0, 0.9, 1.05], [0.1] * 3) == 1
    # higher is better, NaN skipped, ties of strength broken by the better value
    idx = one_standard_error_index(
        [1.0, 2.0, 2.0, 3.0], [0.8, 0.75, 0.78, np.nan], [0.05] * 4, greater_is_better=True
    )
    assert idx == 2
    assert one_standard_error_index([1.0], [np.nan], [0.1]) is None


def test_tune_display_one_se_mark_against_refits(plt):
    """TuneResult.plot(): ACV (the mean of e^2 / 2) against lambda, the 1-SE mark at the
    largest lambda within one standard error of the best, as selection="1se" chooses."""
    X, y, alphas = _ridge_data()
    res = aloocv.tune(X, y, loss="squared", penalty=aloocv.L2(1.0), method="grid", grid=alphas)
    disp = res.plot()
    assert isinstance(disp, aloocv.plotting.TuneDisplay)
    assert disp.ax_.get_ylabel() == "leave-one-out mean of (y - eta)^2 / 2 (ALO)"
    mse, se = _ridge_brute_force(X, y, alphas)
    k = _one_se_by_hand(alphas, mse / 2.0, se / 2.0)
    assert k != int(np.argmin(mse))
    lam = res.history["params"].sum(axis=1)
    assert lam[disp.one_se_index_] == pytest.approx(alphas[k], rel=1e-12)
    (marker,) = [ln for ln in disp.ax_.get_lines() if ln.get_label().startswith("1-SE choice")]
    np.testing.assert_allclose(marker.get_xdata(), [alphas[k]], rtol=1e-12)
    np.testing.assert_allclose(marker.get_ydata(), [mse[k] / 2.0], rtol=1e-10)
    one_se = aloocv.tune(
        X, y, loss="squared", penalty=aloocv.L2(1.0), method="grid", grid=alphas, selection="1se"
    )
    assert float(one_se.penalty.lam) == pytest.approx(alphas[k], rel=1e-12)
