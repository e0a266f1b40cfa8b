"""The core's lockstep exact leave-one-out refits (``_core.RefitBatch``,
cpp/include/aloocv/refit_batch.hpp) driven with sums computed here by numpy (brute force,
no dask): its leave-one-out values equal independent refits without each sample
(aloocv.fit with the sample's weight zero), a zero-weight sample keeps the full fit's
values, a singular refit is listed with NaN values."""

from __future__ import annotations

import numpy as np
import pytest

import aloocv
from aloocv import _core

TOL = 1e-11  # the refits' tolerance (max|grad| / (sum w - w_j))


def _design(X, intercept):
    return np.hstack([np.ones((X.shape[0], 1)), X]) if intercept else X


def _sums(Xt, y, w, off, loss, b, skip):
    """Brute force: the unpenalized loss, gradient and Hessian at b without sample skip."""
    ww = w.copy()
    ww[skip] = 0.0
    v, d1, d2 = _core.loss_eval(loss, y, np.ascontiguousarray(Xt @ b + off))[:3]
    return ww @ v, Xt.T @ (ww * d1), (Xt * (ww * d2)[:, None]).T @ Xt


def _full(Xt, y, w, off, loss, beta, pen1):
    """The full penalized objective, gradient and Hessian at beta."""
    f, g, H = _sums(Xt, y, w, off, loss, beta, [])
    return f + 0.5 * pen1 @ beta**2, g + pen1 * beta, H + np.diag(pen1)


def _drive(X, y, w, off, loss, lam, rows, intercept=True, **policy):
    """Fit, then the batch `rows` refitted by RefitBatch on numpy sums. Returns the
    results and the number of Hessians requested."""
    p = X.shape[1]
    pen = np.broadcast_to(np.asarray(lam, dtype=float), (p,)).copy()
    fit = aloocv.fit(
        X,
        y,
        loss=loss,
        penalty=aloocv.L2(pen),
        sample_weight=w,
        offset=off,
        fit_intercept=intercept,
        tol=1e-13,
    )
    beta = np.concatenate([[fit.intercept_], fit.coef_]) if intercept else fit.coef_.copy()
    Xt = _design(X, intercept)
    pen1 = np.concatenate([[0.0], pen]) if intercept else pen
    f, g, H = _full(Xt, y, w, off, loss, beta, pen1)
    ref = _core.RefitBatch(
        H,
        np.ascontiguousarray(X[rows]),
        y[rows].copy(),
        w[rows].copy(),
        off[rows].copy(),
        loss,
        fit_intercept=intercept,
        beta=beta,
        f=float(f),
        grad=g,
        penalty=pen,
        weight_sum=float(w.sum()),
        tol=TOL,
        max_iter=100,
        **policy,
    )
    n_hess = 0
    while (req := ref.request()) is not None:
        cols, B, hc = req
        k = cols.size
        loss_s, G = np.empty(k), np.empty((Xt.shape[1], k))
        Hs = np.empty((Xt.shape[1], Xt.shape[1], hc.size))
        for c in range(k):
            loss_s[c], G[:, c], Hc = _sums(Xt, y, w, off, loss, B[:, c], rows[cols[c]])
            if c in hc:
                Hs[:, :, list(hc).index(c)] = Hc
        n_hess += hc.size
        ref.feed(loss_s, G, Hs)
    assert ref.request() is None
    with pytest.raises(ValueError, match="finished"):
        ref.feed(np.zeros(0), np.zeros((Xt.shape[1], 0)), np.zeros((Xt.shape[1],) * 2 + (0,)))
    return ref, fit, n_hess


def _refit_value(X, y, w, off, loss, lam, i, intercept=True):
    """Independent refit without sample i (its weight zero): its loss and prediction."""
    ww = w.copy()
    ww[i] = 0.0
    p = X.shape[1]
    pen = np.broadcast_to(np.asarray(lam, dtype=float), (p,)).copy()
    r = aloocv.fit(
        X,
        y,
        loss=loss,
        penalty=aloocv.L2(pen),
        sample_weight=ww,
        offset=off,
        fit_intercept=intercept,
        tol=1e-13,
    )
    eta = X[i] @ r.coef_ + (r.intercept_ if intercept else 0.0) + off[i]
    v = _core.loss_eval(loss, y[i : i + 1], np.array([eta]))[0][0]
    return v, eta


def _problem(loss="logistic", n=60, p=4, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    eta = X @ rng.standard_normal(p) * 0.7
    if loss == "logistic":
        y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
    elif loss == "poisson":
        y = rng.poisson(np.exp(0.3 * eta)).astype(float)
    else:
        y = eta + rng.standard_normal(n)
    w = rng.uniform(0.5, 2.0, n)
    w[7] = 0.0  # a zero-weight sample
    off = 0.1 * rng.standard_normal(n)
    return X, y, w, off


@pytest.mark.parametrize(
    ("loss", "intercept", "policy"),
    [
        ("logistic", True, {}),
        ("poisson", False, {}),
        ("logistic", True, {"max_chord": 1}),  # fresh leave-one-out Hessians
        ("poisson", True, {"chord_ratio": 0.0}),  # no chord phase: Newton from the start
    ],
)
def test_refits_equal_independent_refits(loss, intercept, policy):
    X, y, w, off = _problem(loss)
    lam = 0.3
    rows = np.array([0, 5, 7, 12, 33, 59])
    ref, fit, n_hess = _drive(X, y, w, off, loss, lam, rows, intercept, **policy)
    losses, preds, n_nc, singular = ref.results()
    assert n_nc == 0
    assert singular.size == 0
    if policy:
        assert n_hess > 0
    for k, i in enumerate(rows):
        v, eta = _refit_value(X, y, w, off, loss, lam, i, intercept)
        np.testing.assert_allclose(preds[k], eta, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(losses[k], v, rtol=1e-9, atol=1e-12)
    # the zero-weight sample (position 2) keeps the full fit's values
    k7 = 2
    eta7 = X[7] @ fit.coef_ + (fit.intercept_ if intercept else 0.0) + off[7]
    np.testing.assert_allclose(preds[k7], eta7, rtol=1e-12)


def test_singular_refit_is_listed_with_nan_values():
    # feature 2 is nonzero in sample 9 only and unpenalized: without sample 9 the
    # problem has no unique minimizer (1 - d h at the rounding level)
    X, y, w, off = _problem("squared", n=30, p=3, seed=8)
    X[:, 2] = 0.0
    X[9, 2] = 1.5
    lam = np.array([0.5, 0.5, 0.0])
    rows = np.array([3, 7, 9, 20])
    ref, _, _ = _drive(X, y, w, off, "squared", lam, rows)
    losses, preds, n_nc, singular = ref.results()
    assert singular.tolist() == [2]  # position of sample 9 in the batch
    assert np.isnan(losses[2]) and np.isnan(preds[2])
    assert n_nc == 1
    for k in (0, 1, 3):
        v, eta = _refit_value(X, y, w, off, "squared", lam, rows[k])
        np.testing.assert_allclose(preds[k], eta, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(losses[k], v, rtol=1e-9, atol=1e-12)


def test_feed_checks_shapes_and_end():
    X, y, w, off = _problem("logistic", n=20, p=2)
    p1 = 3
    fit = aloocv.fit(X, y, penalty=aloocv.L2(1.0), sample_weight=w, offset=off, tol=1e-13)
    beta = np.concatenate([[fit.intercept_], fit.coef_])
    Xt = _design(X, True)
    f, g, H = _full(Xt, y, w, off, "logistic", beta, np.array([0.0, 1.0, 1.0]))
    ref = _core.RefitBatch(
        H,
        np.ascontiguousarray(X[:2]),
        y[:2].copy(),
        None,
        None,
        "logistic",
        fit_intercept=True,
        beta=beta,
        f=float(f),
        grad=g,
        penalty=np.ones(2),
        weight_sum=float(w.sum()),
        tol=TOL,
        max_iter=100,
    )
    cols, B, _ = ref.request()
    assert B.shape == (p1, cols.size)
    with pytest.raises(ValueError, match="loss"):
        ref.feed(np.zeros(cols.size + 1), np.zeros((p1, cols.size)), np.zeros((p1, p1, 0)))
    with pytest.raises(ValueError, match="grad"):
        ref.feed(np.zeros(cols.size), np.zeros((p1, cols.size + 1)), np.zeros((p1, p1, 0)))
    with pytest.raises(ValueError, match="hess"):
        ref.feed(np.zeros(cols.size), np.zeros((p1, cols.size)), np.zeros((p1, p1, 1)))
    with pytest.raises(ValueError, match="H must be"):
        _core.RefitBatch(
            H[:2, :2],
            np.ascontiguousarray(X[:2]),
            y[:2].copy(),
            None,
            None,
            "logistic",
            fit_intercept=True,
            beta=beta,
            f=float(f),
            grad=g,
            penalty=np.ones(2),
            weight_sum=float(w.sum()),
            tol=TOL,
            max_iter=100,
        )
