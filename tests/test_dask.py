"""Dask input: fit, loo, kfold, tune and the estimators chunk by chunk, against the
in-memory numpy results, on a LocalCluster of 2 worker processes and on the local
schedulers (out of core over np.memmap)."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import threading
import time
import warnings
from functools import partial

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import aloocv
from aloocv import _core
from aloocv.backends.dask import data as dask_data
from aloocv.backends.dask import passes, policy, refits
from aloocv.backends.dask import tuning as dask_tuning
from conftest import make_data, nbytes_of

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

TOL = 1e-12  # fit tolerance of both paths: Newton ends far below it, so both agree to
PARITY = 1e-10  # the parity target of the issue (relative to the scale of the values)
CHUNK = 70  # rows per chunk: uneven last chunk
_DASK_MODULES = [
    importlib.import_module(f"aloocv.backends.dask.{m.name}")
    for m in pkgutil.iter_modules(importlib.import_module("aloocv.backends.dask").__path__)
]


def close(a, b, tol=PARITY):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    scale = max(1.0, float(np.max(np.abs(b))) if b.size else 1.0)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=0, atol=tol * scale)


def dX(X, chunk=CHUNK):
    return da.from_array(X, chunks=(chunk, X.shape[1]))


LOSSES = ["squared", "logistic", "poisson", "gamma", "binomial", "huber", aloocv.Tweedie(1.5)]


def loss_data(loss, n=230, p=6, seed=1):
    X, y = make_data(loss, n, p, seed=seed)
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.5, 2.0, n)
    if str(loss) == "binomial":
        w = rng.integers(1, 10, n).astype(float)
    off = 0.1 * rng.standard_normal(n)
    return X, y, w, off


# ------------------------------------------------------------------ local schedulers
@pytest.mark.parametrize("loss", LOSSES, ids=str)
def test_fit_loo_parity_every_loss(sync, loss):
    X, y, w, off = loss_data(loss)
    pen = aloocv.L2(np.linspace(0.5, 2.0, X.shape[1]))
    kw = dict(loss=loss, penalty=pen, sample_weight=w, offset=off, tol=TOL)
    ref = aloocv.fit(X, y, **kw)
    got = aloocv.fit(dX(X), y, **kw)
    close(got.coef_, ref.coef_)
    close(got.intercept_, ref.intercept_)
    assert got.converged_
    for method in ("alo", "if", "lemma3"):
        r = aloocv.loo(X, y, method=method, **kw)
        g = aloocv.loo(dX(X), da.from_array(y, chunks=50), method=method, **kw)
        assert isinstance(g.losses, da.Array) and g.losses.chunks == dX(X).chunks[:1]
        close(g.losses.compute(), r.losses)
        close(g.predictions.compute(), r.predictions)
        close(g.leverages.compute(), r.leverages)
        close(g.downdate.compute(), r.downdate)
        close(g.mean, r.mean)
        close(g.stderr, r.stderr)
        # the error indicator (with weights and an offset) and the flags it sets
        assert (g.indicator is None) == (r.indicator is None) == (method != "alo")
        if method == "alo":
            close(g.indicator.compute(), r.indicator)
        np.testing.assert_array_equal(g.unreliable.compute(), r.unreliable)
        assert (g.error_estimate is None) == (r.error_estimate is None)


@pytest.mark.parametrize("loss", ["logistic", "poisson", "squared", "gamma"])
def test_exact_hypergradient_parity(sync, loss):
    X, y, w, off = loss_data(loss, n=200, p=5, seed=3)
    for pen in (aloocv.L2(0.7), aloocv.L2(np.linspace(0.3, 3.0, 5))):
        kw = dict(loss=loss, penalty=pen, sample_weight=w, offset=off, tol=TOL)
        r = aloocv.loo(X, y, return_gradient=True, **kw)
        g = aloocv.loo(dX(X), y, return_gradient=True, **kw)
        close(g.gradient, r.gradient)
        close(g.mean, r.mean)


def test_hypergradient_matches_finite_differences(sync):
    # an independent check of the dask route: central differences of its own mean
    X, y, _, _ = loss_data("logistic", n=200, p=4, seed=5)
    lam, h = 0.8, 1e-5
    g = aloocv.loo(dX(X), y, penalty=aloocv.L2(lam), return_gradient=True, tol=TOL).gradient
    m = [aloocv.loo(dX(X), y, penalty=aloocv.L2(v), tol=TOL).mean for v in (lam + h, lam - h)]
    np.testing.assert_allclose(g[0], (m[0] - m[1]) / (2 * h), rtol=1e-5)


def test_dataframe_and_no_intercept(sync):
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    X, y, _, _ = loss_data("logistic", n=150, p=4)
    df = dd.from_pandas(pd.DataFrame(X, columns=list("abcd")), npartitions=3)
    ref = aloocv.loo(X, y, fit_intercept=False, tol=TOL)
    got = aloocv.loo(df, y, fit_intercept=False, tol=TOL)
    close(got.mean, ref.mean)
    close(got.losses.compute(), ref.losses)


def test_out_of_core_memmap(tmp_path):
    X, y, w, _ = loss_data("poisson", n=400, p=5, seed=7)
    path = tmp_path / "X.f64"
    mm = np.memmap(path, dtype=np.float64, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    Xd = da.from_array(np.memmap(path, dtype=np.float64, mode="r", shape=X.shape), chunks=64)
    ref = aloocv.loo(X, y, loss="poisson", sample_weight=w, tol=TOL)
    with dask.config.set(scheduler="threads"):
        got = aloocv.loo(Xd, y, loss="poisson", sample_weight=w, tol=TOL)
        close(got.losses.compute(), ref.losses)
    close(got.mean, ref.mean)
    close(got.fit.coef_, ref.fit.coef_)


def test_out_of_core_zarr(tmp_path):
    zarr = pytest.importorskip("zarr")
    X, y, _, _ = loss_data("squared", n=300, p=4, seed=11)
    z = zarr.open(str(tmp_path / "X.zarr"), mode="w", shape=X.shape, chunks=(64, 4), dtype="f8")
    z[:] = X
    ref = aloocv.loo(X, y, loss="squared", return_gradient=True, tol=TOL)
    with dask.config.set(scheduler="threads"):
        got = aloocv.loo(da.from_zarr(z), y, loss="squared", return_gradient=True, tol=TOL)
        close(got.predictions.compute(), ref.predictions)
    close(got.mean, ref.mean)
    close(got.gradient, ref.gradient)


@pytest.mark.parametrize("loss", ["logistic", "poisson"])
def test_exact_loo_refits_over_chunks(sync, loss, monkeypatch):
    # exact LOO as lockstep refits, each pass one task per chunk of X: equals the numpy
    # exact LOO and brute-force refits; no task sees more than one chunk of X
    X, y, w, off = loss_data(loss, n=150, p=4, seed=2)
    w[7] = 0.0  # a zero weight: its "refit" is the full fit
    kw = dict(loss=loss, penalty=aloocv.L2(1.0), sample_weight=w, offset=off, tol=TOL)
    seen = []
    real = _core.chunk_refits

    def spy(x, *a, **k):
        seen.append(x.shape[0])
        return real(x, *a, **k)

    monkeypatch.setattr(_core, "chunk_refits", spy)
    r = aloocv.loo(X, y, method="exact", **kw)
    g = aloocv.loo(dX(X, 50), y, method="exact", **kw)
    assert seen and max(seen) <= 50
    close(g.losses.compute(), r.losses)
    close(g.predictions.compute(), r.predictions)
    close(g.mean, r.mean)
    close(g.stderr, r.stderr)
    assert g.losses.chunks == ((50, 50, 50),)
    assert g.n_not_converged == 0
    for i in (0, 7, 64, 149):  # independent: refits without sample i
        wi = w.copy()
        wi[i] = 0.0
        f = aloocv.fit(X, y, loss=loss, penalty=aloocv.L2(1.0), sample_weight=wi, offset=off,
                       tol=TOL)  # fmt: skip
        eta = X[i] @ f.coef_ + f.intercept_ + off[i]
        close(g.predictions[i].compute(), eta)


def test_exact_loo_fresh_hessians_and_budget(sync, monkeypatch):
    # refits that leave the chord phase after one step take fresh leave-one-out Hessians
    # (a pass returning p1 x p1 per such refit): still the exact refits
    X, y, w, _ = loss_data("logistic", n=90, p=3, seed=23)
    kw = dict(loss="logistic", penalty=aloocv.L2(0.5), sample_weight=w, tol=TOL)
    r = aloocv.loo(X, y, method="exact", **kw)
    hess = []
    real = refits._refits_pass

    def spy(data, B, rows, hess_cols):
        hess.append(len(hess_cols))
        return real(data, B, rows, hess_cols)

    monkeypatch.setattr(refits, "_refits_pass", spy)
    monkeypatch.setattr(refits, "_refit_batch", partial(refits._refit_batch, max_chord=1))
    monkeypatch.setattr(policy, "EXACT_BATCH", 16)  # batches across chunk borders, rows
    monkeypatch.setattr(policy, "EXACT_FETCH", 2)  # fetched two batches at a time
    g = aloocv.loo(dX(X, 40), y, method="exact", **kw)
    assert sum(hess) > 0
    close(g.losses.compute(), r.losses)
    close(g.predictions.compute(), r.predictions)
    # a budget of one step per refit: not at tol, reported
    fit = dict(coef=r.fit.coef_, intercept=r.fit.intercept_)
    with pytest.warns(ConvergenceWarning, match="refits did not reach"):
        b = aloocv.loo(dX(X, 40), y, method="exact", max_iter=1, **fit, **kw)
    assert 0 < b.n_not_converged <= 90


def test_exact_loo_batch_mixing_chord_and_fresh_refits(sync, monkeypatch):
    # a tight chord ratio: in one pass some refits of a batch are on the downdated full
    # factor and others on fresh Hessians (their searches in the same pass); still the
    # numpy exact LOO and brute-force refits
    rng = np.random.default_rng(5)
    X = rng.standard_normal((120, 3)) * np.where(rng.random((120, 1)) < 0.1, 6.0, 1.0)
    y = (X @ np.array([1.0, -1.0, 0.5]) + rng.standard_normal(120) > 0).astype(float)
    kw = dict(loss="logistic", penalty=0.05, tol=TOL)
    r = aloocv.loo(X, y, method="exact", **kw)
    seen = []
    real = refits._refits_pass

    def spy(data, B, rows, hess_cols):
        seen.append((B.shape[1], len(hess_cols)))
        return real(data, B, rows, hess_cols)

    monkeypatch.setattr(refits, "_refits_pass", spy)
    monkeypatch.setattr(refits, "_refit_batch", partial(refits._refit_batch, chord_ratio=0.01))
    monkeypatch.setattr(policy, "EXACT_BATCH", 32)
    g = aloocv.loo(dX(X, 40), y, method="exact", **kw)
    assert any(0 < h < b for b, h in seen)
    assert g.n_not_converged == 0
    close(g.losses.compute(), r.losses)
    close(g.predictions.compute(), r.predictions)
    for i in np.flatnonzero(np.abs(X).max(axis=1) > 6.0)[:3]:  # independent refits
        keep = np.arange(120) != i
        f = aloocv.fit(X[keep], y[keep], loss="logistic", penalty=0.05, tol=TOL)
        close(g.predictions[i].compute(), X[i] @ f.coef_ + f.intercept_)


def test_exact_loo_singular_names_the_row_of_X(sync):
    # feature 2 is nonzero in row 83 only and unpenalized: without that row the problem
    # has no unique minimizer; the message names row 83 of X (chunk 3, its row 3)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 3))
    X[:, 2] = 0.0
    X[83, 2] = 1.0
    y = rng.standard_normal(100)
    kw = dict(loss="squared", penalty=aloocv.L2(np.array([1.0, 1.0, 0.0])), method="exact")
    for Xa in (X, dX(X, 40)):
        with pytest.raises(ValueError, match="singular for sample 83 "):
            aloocv.loo(Xa, y, **kw)


def test_exact_loo_and_kfold(sync):
    X, y, w, off = loss_data("logistic", n=120, p=4, seed=2)
    kw = dict(loss="logistic", penalty=aloocv.L2(1.0), sample_weight=w, offset=off, tol=TOL)
    r = aloocv.loo(X, y, method="exact", **kw)
    g = aloocv.loo(dX(X, 50), y, method="exact", **kw)
    close(g.losses.compute(), r.losses)
    close(g.mean, r.mean)
    for method in ("alo", "exact"):
        rk = aloocv.kfold(X, y, n_folds=5, method=method, **kw)
        gk = aloocv.kfold(dX(X, 50), y, n_folds=5, method=method, **kw)
        close(gk.losses, rk.losses, PARITY if method == "alo" else 1e-8)
        close(gk.fold_means, rk.fold_means, PARITY if method == "alo" else 1e-8)
        close(gk.mean, rk.mean, PARITY if method == "alo" else 1e-8)
        np.testing.assert_array_equal(gk.folds, rk.folds)


def test_tune_grid_and_gradient(sync):
    X, y, _, _ = loss_data("logistic", n=200, p=5, seed=4)
    grid = [aloocv.L2(v) for v in np.logspace(-2, 2, 6)]
    kw = dict(loss="logistic", fit_tol=TOL)
    r = aloocv.tune(X, y, penalty=grid[0], method="grid", grid=grid, **kw)
    g = aloocv.tune(dX(X), y, penalty=grid[0], method="grid", grid=grid, **kw)
    close(g.history["acv"], r.history["acv"])
    close(g.fit.coef_, r.fit.coef_)
    r = aloocv.tune(X, y, penalty=aloocv.L2(1.0), method="gd", max_iter=5, **kw)
    g = aloocv.tune(dX(X), y, penalty=aloocv.L2(1.0), method="gd", max_iter=5, **kw)
    close(g.history["params"], r.history["params"], 1e-8)
    close(g.history["acv"], r.history["acv"], 1e-8)


def test_ridge_cv_estimator(sync):
    X, y, _, _ = loss_data("squared", n=150, p=4, seed=6)
    alphas = np.logspace(-2, 2, 5)
    r = aloocv.ALORidgeCV(alphas=alphas, tol=TOL).fit(X, y)
    g = aloocv.ALORidgeCV(alphas=alphas, tol=TOL).fit(dX(X), da.from_array(y, chunks=40))
    assert g.alpha_ == r.alpha_
    close(g.coef_, r.coef_)
    close(g.best_score_, r.best_score_)
    close(g.search_results_["loss"], r.search_results_["loss"])
    assert g.n_features_in_ == 4


ENET_CASES = [
    ("squared", aloocv.L1(np.linspace(5.0, 15.0, 8))),
    ("logistic", aloocv.ElasticNet(4.0, 1.0)),
    ("poisson", aloocv.ElasticNet(20.0, 0.5)),
]


@pytest.mark.parametrize("loss,pen", ENET_CASES, ids=lambda v: str(v)[:12])
def test_l1_fit_loo_parity(sync, loss, pen):
    # the active-set proximal Newton over the chunks ends where the core's does; the
    # closed forms on the active set agree to the fits' tolerance
    X, y, w, off = loss_data(loss, n=230, p=8, seed=3)
    kw = dict(loss=loss, penalty=pen, sample_weight=w, offset=off, tol=TOL)
    ref = aloocv.fit(X, y, **kw)
    got = aloocv.fit(dX(X), y, **kw)
    nz = ref.coef_ != 0
    assert 0 < nz.sum() < X.shape[1]  # a sparse fit: the test exercises the active set
    np.testing.assert_array_equal(got.coef_ != 0, nz)
    close(got.coef_, ref.coef_, 1e-8)
    close(got.intercept_, ref.intercept_, 1e-8)
    assert got.converged_
    for method in ("alo", "if", "lemma3"):
        r = aloocv.loo(X, y, method=method, **kw)
        g = aloocv.loo(dX(X), y, method=method, **kw)
        for key in ("losses", "predictions", "leverages"):
            close(getattr(g, key).compute(), getattr(r, key), 1e-8)
        close(g.mean, r.mean, 1e-8)
        close(g.stderr, r.stderr, 1e-8)
    # bring your own fit: the active-set state at the given coefficients
    r = aloocv.loo(X, y, coef=ref.coef_, intercept=ref.intercept_, **kw)
    g = aloocv.loo(dX(X), y, coef=ref.coef_, intercept=ref.intercept_, **kw)
    close(g.losses.compute(), r.losses, 1e-10)


@pytest.mark.parametrize("loss,pen", ENET_CASES[:2], ids=lambda v: str(v)[:12])
def test_l1_exact_loo(sync, loss, pen):
    # exact LOO with an L1 term: the elastic-net refits over the chunks equal the numpy
    # route's and plain refits without each sample (an independent reference)
    X, y, w, off = loss_data(loss, n=60, p=8, seed=3)
    kw = dict(loss=loss, penalty=pen, sample_weight=w, offset=off, tol=TOL)
    r = aloocv.loo(X, y, method="exact", **kw)
    g = aloocv.loo(dX(X, 25), y, method="exact", **kw)
    assert g.leverages is None and g.predictions.chunks == ((25, 25, 10),)
    close(g.predictions.compute(), r.predictions, 1e-8)
    close(g.losses.compute(), r.losses, 1e-8)
    close(g.mean, r.mean, 1e-8)
    close(g.stderr, r.stderr, 1e-8)
    for i in (0, 31, 59):
        keep = np.arange(60) != i
        kwi = dict(kw, sample_weight=w[keep], offset=off[keep])
        f = aloocv.fit(X[keep], y[keep], **kwi)
        close(g.predictions[i].compute(), X[i] @ f.coef_ + f.intercept_ + off[i], 1e-7)


def test_l1_exact_loo_zero_weights_not_refitted(sync):
    # as in memory, a zero-weight sample does not change the fit: its leave-one-out
    # prediction is the full fit's own and it costs no refit (nor counts as one that did
    # not converge; max_iter=1 leaves every refit short of tol)
    X, y, w, _ = loss_data("logistic", n=30, p=4, seed=3)
    zero = [0, 5, 29]
    w[zero] = 0.0
    kw = dict(loss="logistic", penalty=aloocv.ElasticNet(0.5, 0.3), sample_weight=w)
    kw.update(method="exact", tol=1e-12, max_iter=1)
    with pytest.warns(ConvergenceWarning) as rec_np:
        r = aloocv.loo(X, y, **kw)
    with pytest.warns(ConvergenceWarning) as rec:
        g = aloocv.loo(dX(X, 7), y, **kw)
    assert [str(m.message) for m in rec] == [str(m.message) for m in rec_np]
    eta = X[zero] @ g.fit.coef_ + g.fit.intercept_
    close(g.predictions.compute()[zero], eta, 1e-12)
    close(g.predictions.compute(), r.predictions, 1e-10)


def test_l1_leverages_brute_force(sync):
    # independent of the core's loo: for the lasso with squared loss the ALO leverages
    # are those of the least-squares fit on the active columns (plus the intercept)
    X, y, _, _ = loss_data("squared", n=150, p=10, seed=5)
    res = aloocv.loo(dX(X), y, loss="squared", penalty=aloocv.L1(20.0), tol=TOL)
    A = np.flatnonzero(res.fit.coef_)
    assert 0 < A.size < 10
    Z = np.column_stack([np.ones(150), X[:, A]])
    h = np.einsum("ij,ji->i", Z, np.linalg.solve(Z.T @ Z, Z.T))
    close(res.leverages.compute(), h, 1e-10)


def test_l1_tune_grid_and_estimators(sync):
    X, y, _, _ = loss_data("squared", n=200, p=8, seed=7)
    grid = [aloocv.ElasticNet(v, 0.5 * v) for v in (2.0, 10.0, 40.0)]
    kt = dict(loss="squared", method="grid", grid=grid, fit_tol=TOL)
    r = aloocv.tune(X, y, penalty=grid[0], **kt)
    g = aloocv.tune(dX(X), y, penalty=grid[0], **kt)
    close(g.history["acv"], r.history["acv"], 1e-8)
    close(g.fit.coef_, r.fit.coef_, 1e-8)
    kw = dict(l1_ratio=[0.5, 0.9], alphas=5, tol=TOL)
    er = aloocv.ALOElasticNetCV(**kw).fit(X, y)
    eg = aloocv.ALOElasticNetCV(**kw).fit(dX(X), da.from_array(y, chunks=60))
    close(eg.alphas_, er.alphas_, 1e-12)
    assert (eg.alpha_, eg.l1_ratio_) == pytest.approx((er.alpha_, er.l1_ratio_), rel=1e-12)
    close(eg.coef_, er.coef_, 1e-8)
    close(eg.mse_path_, er.mse_path_, 1e-8)


@pytest.mark.parametrize("loss,pen", ENET_CASES, ids=lambda v: str(v)[:12])
def test_l1_kfold_parity(sync, loss, pen):
    # approximate (a Newton step per fold on the active set) and exact (elastic-net
    # refits) K-fold over the chunks equal the in-memory core's
    X, y, w, off = loss_data(loss, n=230, p=8, seed=3)
    kw = dict(loss=loss, penalty=pen, sample_weight=w, offset=off, tol=TOL)
    for method in ("alo", "exact"):
        r = aloocv.kfold(X, y, n_folds=5, method=method, **kw)
        g = aloocv.kfold(dX(X), y, n_folds=5, method=method, **kw)
        assert 0 < np.count_nonzero(r.fit.coef_) < X.shape[1]
        np.testing.assert_array_equal(g.folds, r.folds)
        for key in ("losses", "predictions", "fold_means"):
            close(getattr(g, key), getattr(r, key))
        close(g.mean, r.mean)
        close(g.stderr, r.stderr)


def test_l1_kfold_singletons_are_alo(sync):
    # independent of the core's K-fold: with one sample per fold the approximate K-fold
    # is ALO's leave-one-out on the active set (the q x q form with q = 1)
    X, y, w, _ = loss_data("logistic", n=90, p=6, seed=4)
    kw = dict(loss="logistic", penalty=aloocv.ElasticNet(3.0, 0.5), sample_weight=w, tol=TOL)
    g = aloocv.kfold(dX(X, 40), y, n_folds=90, **kw)
    r = aloocv.loo(X, y, **kw)
    assert 0 < np.count_nonzero(r.fit.coef_) < 6
    close(g.losses, r.losses)
    close(g.predictions, r.predictions)


@pytest.mark.parametrize("loss,pen", ENET_CASES, ids=lambda v: str(v)[:12])
def test_l1_hypergradient_parity(sync, loss, pen):
    X, y, w, off = loss_data(loss, n=230, p=8, seed=3)
    kw = dict(loss=loss, sample_weight=w, offset=off, tol=TOL)
    r = aloocv.loo(X, y, penalty=pen, return_gradient=True, **kw)
    g = aloocv.loo(dX(X), y, penalty=pen, return_gradient=True, **kw)
    close(g.gradient, r.gradient)
    close(g.mean, r.mean)
    # central differences of the dask route's own mean, the active set unchanged (a
    # scalar parameter each; for the per-feature L1 one active and one inactive feature)
    theta = pen.params()
    nz = r.fit.coef_ != 0
    ks = range(theta.size) if theta.size <= 2 else [int(np.argmax(nz)), int(np.argmin(nz))]
    for k in ks:
        h = 1e-5 * theta[k]
        m = []
        for s in (1.0, -1.0):
            t = theta.copy()
            t[k] += s * h
            res = aloocv.loo(dX(X), y, penalty=pen.with_params(t), **kw)
            np.testing.assert_array_equal(res.fit.coef_ != 0, nz)
            m.append(res.mean)
        fd = (m[0] - m[1]) / (2 * h)
        np.testing.assert_allclose(g.gradient[k], fd, rtol=1e-5, atol=1e-9 * abs(r.mean) / h)


def recorded(fn, *args, **kwargs):
    """(result, messages of the warnings it emitted)."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    return out, [str(m.message) for m in rec]


def test_l1_gradient_tuning(sync):
    # gradient searches with an L1 term: the exact hypergradient on the active set; the
    # same iterates and the same warnings (a search stopped by its iteration budget)
    X, y, _, _ = loss_data("logistic", n=200, p=8, seed=11)
    kw = dict(loss="logistic", penalty=aloocv.ElasticNet(4.0, 1.0), fit_tol=TOL)
    r, wr = recorded(aloocv.tune, X, y, method="gd", max_iter=4, **kw)
    g, wg = recorded(aloocv.tune, dX(X), y, method="gd", max_iter=4, **kw)
    assert wg == wr
    close(g.history["params"], r.history["params"], 1e-8)
    close(g.history["acv"], r.history["acv"], 1e-8)
    # second-order steps: the dask state's tangents are central differences of the
    # exact gradient along (J2, J1), the core's are exact; the iterates agree closely
    r, wr = recorded(aloocv.tune, X, y, method="newton", max_iter=2, **kw)
    g, wg = recorded(aloocv.tune, dX(X), y, method="newton", max_iter=2, **kw)
    assert len(wg) == len(wr)
    np.testing.assert_allclose(g.history["params"], r.history["params"], rtol=1e-6)
    close(g.history["acv"], r.history["acv"], 1e-8)


def test_l1_tangents_match_core(sync):
    # the dask state's second derivatives against the core TuneState's exact ones
    from aloocv.tuning.objective import Objective

    X, y, _, _ = loss_data("poisson", n=200, p=6, seed=2)
    pen = aloocv.ElasticNet(8.0, 1.5)
    problem = aloocv.Problem.build(dX(X), y, loss="poisson", penalty=pen, tol=TOL)
    state = dask_tuning.tune_state(problem)
    u = np.log(pen.params())
    hd = Objective(state, pen, None, 6).evaluate(u, order=2)
    from aloocv._validation import check_loss, core_design

    core = aloocv._core.TuneState(
        core_design(X),
        y,
        None,
        check_loss("poisson").core,
        pen.l2_vector(6),
        fit_intercept=True,
        tol=TOL,
        max_iter=100,
        n_threads=1,
        l1=pen.l1_vector(6),
    )
    hc = Objective(core, pen, None, 6).evaluate(u, order=2)
    close(hd.grad, hc.grad)
    np.testing.assert_allclose(hd.hess, hc.hess, rtol=1e-5)


def test_l1_gradient_search_estimator(sync):
    # (a dense optimum: where the active set changes along the search ALOOCV jumps and
    # the search stops at the jump after many more fits, in both paths)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 8))
    y = X[:, :3] @ np.array([1.0, -0.7, 0.5]) + rng.standard_normal(200)
    kw = dict(l1_ratio=0.7, alphas=4, search="gradient", tol=TOL)
    er, wr = recorded(aloocv.ALOElasticNetCV(**kw).fit, X, y)
    eg, wg = recorded(aloocv.ALOElasticNetCV(**kw).fit, dX(X), da.from_array(y, chunks=60))
    assert len(wg) == len(wr)
    np.testing.assert_allclose(eg.alpha_, er.alpha_, rtol=1e-6)
    close(eg.coef_, er.coef_, 1e-6)


def test_diagnostics_parity(sync):
    # the in-memory diagnostics on dask input: unreliable samples (a feature seen by one
    # sample only: d_i h_i near 1) with their warning, the error indicator and plain
    # ALO's self-check (tests/test_dask_trust.py), separated classes, a nearly singular
    # Hessian; the same flags and the same messages
    X, y, _, _ = loss_data("poisson", n=120, p=4, seed=6)
    X = np.column_stack([X, np.zeros(120)])
    X[7, 4], y[7] = 30.0, 3.0
    kw = dict(loss="poisson", penalty=aloocv.L2(1e-3), tol=TOL)
    with pytest.warns(aloocv.ALOWarning) as wr:
        r = aloocv.loo(X, y, **kw)
    with pytest.warns(aloocv.ALOWarning) as wg:
        g = aloocv.loo(dX(X), y, **kw)
    assert [str(m.message) for m in wg] == [str(m.message) for m in wr]
    assert "d_i h_i" in str(wg[0].message)
    np.testing.assert_array_equal(g.unreliable.compute(), r.unreliable)
    assert r.unreliable[7]
    # sample 7's indicator (its leverage near 1) carries its loss's 2e-9 disagreement
    close(g.indicator.compute(), r.indicator, 1e-8)
    np.testing.assert_array_equal(g.error_estimate.refitted, r.error_estimate.refitted)
    # the error (6e-5, a difference of O(1) means) carries sample 7's amplified
    # disagreement too: the two fits' tol-level differences times 1 / (1 - d_7 h_7)
    assert g.error_estimate.error == pytest.approx(r.error_estimate.error, rel=1e-5)
    rng = np.random.default_rng(0)
    Xs = rng.standard_normal((30, 3))
    ys = (Xs[:, 0] > 0) * 1.0  # separable classes, a tiny penalty: margins above 10
    ks = dict(loss="logistic", penalty=aloocv.L2(1e-8))
    with pytest.warns(aloocv.ALOWarning, match="separates the classes") as wr:
        aloocv.loo(Xs, ys, **ks)
    with pytest.warns(aloocv.ALOWarning, match="separates the classes") as wg:
        aloocv.loo(dX(Xs, 10), ys, **ks)
    assert len(wg) == len(wr)  # (tol-far fits of an ill-posed problem: margins differ)
    assert str(wg[0].message).split("minimum")[0] == str(wr[0].message).split("minimum")[0]
    Z = rng.standard_normal((60, 4))
    Xc = np.c_[Z, Z[:, 0] + 1e-7 * rng.standard_normal(60)]  # cond(X) ~ 1e7
    yc = Z[:, 0] + rng.standard_normal(60)
    kc = dict(loss="squared", penalty=aloocv.L2(1e-12))
    with pytest.warns(aloocv.ALOWarning, match="nearly singular") as wr:
        aloocv.loo(Xc, yc, **kc)
    with pytest.warns(aloocv.ALOWarning, match="nearly singular") as wg:
        aloocv.loo(dX(Xc, 25), yc, **kc)
    assert len(wg) == len(wr)
    got, ref = (float(str(m[0].message).split("estimate ")[1].split(" <")[0]) for m in (wg, wr))
    np.testing.assert_allclose(got, ref, rtol=0.1)


@pytest.mark.parametrize(
    "loss,pen",
    [("logistic", aloocv.L2(0.5)), ("poisson", aloocv.ElasticNet(20.0, 0.5))],
    ids=["logistic-l2", "poisson-enet"],
)
def test_certify_parity(sync, loss, pen):
    # the same design, exact refits over the chunks equal the core's exact refits
    X, y, w, off = loss_data(loss, n=150, p=8, seed=3)
    w[[4, 9]] = 0.0  # zero-weight samples are not drawn
    kw = dict(loss=loss, penalty=pen, sample_weight=w, offset=off, tol=TOL)
    cr = aloocv.loo(X, y, **kw).certify(n_samples=5, random_state=1)
    res = aloocv.loo(dX(X), y, **kw)
    cg = res.certify(n_samples=5, random_state=1)
    np.testing.assert_array_equal(cg.indices, cr.indices)
    close(cg.approx_losses, cr.approx_losses)
    close(cg.exact_losses, cr.exact_losses)
    for key in ("mean_error", "ci_low", "ci_high", "approx_mean", "max_abs_error"):
        close(getattr(cg, key), getattr(cr, key))
    assert (cg.n_worst, cg.n_draws, cg.n_population) == (cr.n_worst, cr.n_draws, 148)
    with pytest.raises(ValueError, match="n_samples must be >= 1"):
        res.certify(n_samples=0)
    with pytest.raises(TypeError, match="n_samples must be an integer"):
        res.certify(n_samples=2.5)
    with pytest.raises(ValueError, match="confidence"):
        res.certify(confidence=1.5)


def test_certify_refits_brute_force(sync):
    # independent of the core: each refit equals a fit without the sample
    X, y, _, _ = loss_data("logistic", n=100, p=4, seed=8)
    kw = dict(loss="logistic", penalty=aloocv.L2(0.3), tol=TOL)
    c = aloocv.loo(dX(X, 30), y, **kw).certify(n_samples=3)
    for i, e in zip(c.indices, c.exact_losses):
        keep = np.arange(100) != i
        f = aloocv.fit(X[keep], y[keep], **kw)
        eta = X[i] @ f.coef_ + f.intercept_
        close(e, np.logaddexp(0.0, eta) - y[i] * eta)


@pytest.mark.parametrize("cw", ["balanced", {0: 1.0, 1: 3.0}], ids=["balanced", "dict"])
def test_logistic_cv_class_weight(sync, cw):
    X, y, w, _ = loss_data("logistic", n=200, p=4, seed=12)
    y[:60] = 0.0  # unbalanced classes
    kw = dict(Cs=np.logspace(-2, 2, 4), class_weight=cw, tol=TOL)
    r = aloocv.ALOLogisticRegressionCV(**kw).fit(X, y, sample_weight=w)
    g = aloocv.ALOLogisticRegressionCV(**kw).fit(dX(X), da.from_array(y, chunks=70), w)
    close(g.C_, r.C_, 1e-12)
    close(g.coef_, r.coef_)
    close(g.intercept_, r.intercept_)
    close(g.best_score_, r.best_score_)
    # independent: the fit at the chosen C with the class weights spelled out
    counts = np.array([w[y == c].sum() for c in (0.0, 1.0)])
    cwv = counts.sum() / (2 * counts) if cw == "balanced" else np.array([1.0, 3.0])
    ref = aloocv.fit(
        X, y, loss="logistic", penalty=aloocv.L2(1.0 / r.C_[0]),
        sample_weight=w * cwv[y.astype(int)], tol=TOL,
    )  # fmt: skip
    close(g.coef_.ravel(), ref.coef_)


def test_scoring_and_stored_loo(sync):
    # scoring= needs the candidates' leave-one-out predictions and y on the client (X
    # stays chunked); store_loo / store_cv_results keep those per-sample arrays
    X, y, w, _ = loss_data("logistic", n=200, p=4, seed=13)
    kw = dict(Cs=np.logspace(-3, 2, 5), scoring="accuracy", store_loo=True, tol=TOL)
    r = aloocv.ALOLogisticRegressionCV(**kw).fit(X, y, sample_weight=w)
    g = aloocv.ALOLogisticRegressionCV(**kw).fit(dX(X), da.from_array(y, chunks=70), w)
    close(g.C_, r.C_, 1e-12)
    close(g.best_score_, r.best_score_)
    close(g.coef_, r.coef_)
    close(g.loo_predictions_, r.loo_predictions_)
    # independent: the accuracy of the chosen C's exact ALO predictions, by numpy
    pen = aloocv.L2(1.0 / r.C_[0])
    loo = aloocv.loo(X, y, loss="logistic", penalty=pen, sample_weight=w, tol=TOL)
    acc = np.average((loo.predictions > 0) == (y > 0.5), weights=w)
    close(g.best_score_, acc)
    Xs, ys, _, _ = loss_data("squared", n=150, p=4, seed=14)
    kw = dict(alphas=np.logspace(-2, 2, 4), store_cv_results=True, tol=TOL)
    r = aloocv.ALORidgeCV(**kw, scoring="r2").fit(Xs, ys, sample_weight=w[:150])
    g = aloocv.ALORidgeCV(**kw, scoring="r2").fit(dX(Xs), ys, sample_weight=w[:150])
    assert g.alpha_ == r.alpha_
    close(g.cv_results_, r.cv_results_)
    close(g.best_score_, r.best_score_)
    r = aloocv.ALORidgeCV(**kw).fit(Xs, ys, sample_weight=w[:150])
    g = aloocv.ALORidgeCV(**kw).fit(dX(Xs), ys, sample_weight=da.from_array(w[:150], chunks=70))
    close(g.cv_results_, r.cv_results_)


def test_bad_dask_input(sync):
    X, y, _, _ = loss_data("logistic", n=100, p=3)
    with pytest.raises(ValueError, match="primal"):
        aloocv.fit(dX(X), y, solver="dual")
    with pytest.raises(ValueError, match="length 100"):
        aloocv.fit(dX(X), da.from_array(y[:90], chunks=30))
    Xn = X.copy()
    Xn[75, 1] = np.nan  # in the second chunk: messages name the row of X, not the chunk's
    with pytest.raises(ValueError, match=r"X contains NaN or inf \(first at row 75, column 1\)"):
        aloocv.fit(dX(Xn), y)
    with pytest.raises(ValueError, match=r"domain.*y\[0\] = "):
        aloocv.fit(dX(X), y + 2.0)
    yb = y.copy()
    yb[83] = 0.5
    with pytest.raises(ValueError, match=r"domain.*y\[83\] = 0.5"):
        aloocv.fit(dX(X), yb)
    yb[83] = np.inf
    with pytest.raises(ValueError, match=r"y contains NaN or inf \(first at index 83\)"):
        aloocv.fit(dX(X), da.from_array(yb, chunks=CHUNK))
    wb = np.ones(100)
    wb[91] = -1.0
    with pytest.raises(ValueError, match=r"non-negative \(first negative at index 91\)"):
        aloocv.loo(dX(X), y, sample_weight=da.from_array(wb, chunks=CHUNK))
    wb[91] = np.nan
    with pytest.raises(ValueError, match=r"sample_weight contains NaN .*index 91\)"):
        aloocv.fit(dX(X), y, sample_weight=da.from_array(wb, chunks=CHUNK))
    ob = np.zeros(100)
    ob[99] = np.inf
    with pytest.raises(ValueError, match=r"offset contains NaN .*index 99\)"):
        aloocv.fit(dX(X), y, offset=da.from_array(ob, chunks=CHUNK))
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        aloocv.fit(dX(X)[dX(X)[:, 0] > 0], y)
    with pytest.raises(ValueError, match="sgd"):
        aloocv.tune(dX(X), y, penalty=aloocv.L2(1.0), method="sgd")
    # elsewhere a dask collection is refused, not silently gathered to the client
    with pytest.raises(TypeError, match="y is a dask collection"):
        aloocv.fit(X, da.from_array(y, chunks=30))
    with pytest.raises(TypeError, match="X is a dask collection"):
        aloocv.fit(X, y).decision_function(dX(X))


def test_class_and_fold_checks_parity(sync):
    # the in-memory checks of logistic classes and fold weights, with the same messages
    X, y, _, _ = loss_data("logistic", n=60, p=3)
    y1 = np.zeros(60)
    y1[5] = 1.0  # one sample of class 1: its leave-one-out training set has one class
    labels = np.array(["a", "b", "c"])[np.arange(60) % 3]
    yf = (labels == "b") * 1.0  # without fold "b" the training part has one class
    w0 = np.where(labels == "c", 0.0, 1.0)  # fold "c" has zero weight
    cases = [
        (aloocv.loo, (y1,), {}),
        (aloocv.loo, (np.zeros(60),), {}),
        (aloocv.kfold, (yf,), dict(folds=labels)),
        (aloocv.kfold, (y,), dict(folds=labels, sample_weight=w0)),
    ]
    for fn, (yy,), extra in cases:
        with pytest.raises(ValueError) as er:
            fn(X, yy, loss="logistic", **extra)
        with pytest.raises(ValueError) as eg:
            fn(dX(X, 25), yy, loss="logistic", **extra)
        assert str(eg.value) == str(er.value)
    assert "fold 'b'" in str(er.value) or "fold 'c'" in str(er.value)


def test_missing_dask_is_a_clear_error(monkeypatch):
    class FakeDask:  # looks like a dask collection; dask itself is "not installed"
        __module__ = "dask.array.core"

        def __dask_graph__(self):
            return {}

    monkeypatch.setitem(sys.modules, "dask", None)
    monkeypatch.setitem(sys.modules, "dask.array", None)
    with pytest.raises(ImportError, match=r"aloocv\[dask\]"):
        aloocv.fit(FakeDask(), np.zeros(3))


# ------------------------------------------------------------------ distributed cluster
def test_cluster_parity_fit_loo_kfold(client):
    X, y, w, off = loss_data("logistic", n=300, p=6, seed=8)
    kw = dict(loss="logistic", penalty=aloocv.L2(0.5), sample_weight=w, offset=off, tol=TOL)
    ref = aloocv.loo(X, y, return_gradient=True, **kw)
    got = aloocv.loo(dX(X), y, return_gradient=True, **kw)
    close(got.fit.coef_, ref.fit.coef_)
    close(got.losses.compute(), ref.losses)
    close(got.predictions.compute(), ref.predictions)
    close(got.leverages.compute(), ref.leverages)
    close(got.mean, ref.mean)
    close(got.stderr, ref.stderr)
    close(got.gradient, ref.gradient)
    kw.pop("sample_weight")
    rk = aloocv.kfold(X, y, n_folds=4, **kw)
    gk = aloocv.kfold(dX(X, 100), y, n_folds=4, **kw)
    close(gk.losses, rk.losses)
    close(gk.stderr, rk.stderr)


def test_cluster_equals_numpy_at_default_tol(client):
    # the one Newton driver on both routes: the same iterates at the default tol (see also
    # tests/test_dask_driver.py)
    X, y, w, off = loss_data("logistic", n=300, p=6, seed=8)
    kw = dict(loss="logistic", penalty=aloocv.L2(0.5), sample_weight=w, offset=off)
    ref = aloocv.loo(X, y, **kw)
    got = aloocv.loo(dX(X, 100), y, **kw)
    close(got.fit.coef_, ref.fit.coef_)
    assert (got.fit.n_iter_, got.fit.hessian_passes_) == (ref.fit.n_iter_, ref.fit.hessian_passes_)
    close(got.losses.compute(), ref.losses)
    close(got.mean, ref.mean)


def test_cluster_persisted_input_maps_over_held_chunks(client, monkeypatch):
    # X, y, w, offset persisted on the workers: the passes map over their futures (no
    # graph per pass); the same iterates and results as in memory, and as the graph route
    X, y, w, off = loss_data("logistic", n=300, p=6, seed=8)
    kw = dict(loss="logistic", penalty=aloocv.L2(0.5))
    arrs = client.persist([dX(X, 100)] + [da.from_array(v, chunks=100) for v in (y, w, off)])
    distributed.wait(arrs)
    Xd, yd, wd, od = arrs

    def data_of(yy):
        pb = aloocv.Problem.build(Xd, yy, sample_weight=wd, offset=od, **kw)
        return dask_data.Data.from_problem(pb)

    assert data_of(yd).held() is not None
    assert data_of(y).held() is None  # y given as numpy: not held by the workers
    ref = aloocv.loo(X, y, sample_weight=w, offset=off, **kw)
    got = aloocv.loo(Xd, yd, sample_weight=wd, offset=od, **kw)
    close(got.fit.coef_, ref.fit.coef_)
    assert (got.fit.n_iter_, got.fit.hessian_passes_) == (ref.fit.n_iter_, ref.fit.hessian_passes_)
    close(got.losses.compute(), ref.losses)
    close(got.mean, ref.mean)
    # the graph route on the same input gives the same numbers to rounding
    monkeypatch.setattr(dask_data.Data, "held", lambda self: None)
    again = aloocv.loo(Xd, yd, sample_weight=wd, offset=od, **kw)
    close(again.fit.coef_, got.fit.coef_, 1e-14)
    close(again.mean, got.mean, 1e-14)
    monkeypatch.undo()
    # bad input: the first bad row, from the held chunks too
    yb = y.copy()
    yb[[250, 120]] = 3.0
    (ybd,) = client.persist([da.from_array(yb, chunks=100)])
    with pytest.raises(ValueError, match=r"y\[120\] = 3"):
        aloocv.fit(Xd, ybd, loss="logistic")


def test_cluster_worker_lost_with_persisted_input(client):
    # a worker dies after X was persisted: the chunks it held are recomputed from their
    # graph when the passes need them, and the result does not change
    n, p, c = 1200, 5, 100
    X = da.map_blocks(_slow_block, chunks=((c,) * (n // c), (p,)), dtype=np.float64)
    Xn = X.compute()
    y = (Xn[:, 0] - Xn[:, 2] + 0.3 > 0).astype(np.float64)
    ref = aloocv.loo(Xn, y, tol=TOL)
    Xd, yd = client.persist([X, da.from_array(y, chunks=c)])
    distributed.wait([Xd, yd])
    victim = next(iter(client.scheduler_info()["workers"]))
    client.run(lambda: __import__("os")._exit(1), workers=[victim], on_error="ignore")
    got = aloocv.loo(Xd, yd, tol=TOL)
    assert victim not in client.scheduler_info()["workers"]
    close(got.fit.coef_, ref.fit.coef_)
    close(got.losses.compute(), ref.losses)
    client.wait_for_workers(2, timeout=30)


def test_tune_auto_search(sync):
    X, y, _, _ = loss_data("logistic", n=240, p=5, seed=9)
    r = aloocv.tune(X, y, penalty=aloocv.L2(1.0), method="auto", fit_tol=TOL)
    g = aloocv.tune(dX(X), y, penalty=aloocv.L2(1.0), method="auto", fit_tol=TOL)
    close(g.penalty.lam, r.penalty.lam, 1e-6)  # a search stopping at its tolerance
    close(g.acv, r.acv, 1e-8)


def test_cluster_tune_and_logistic_cv(client):
    X, y, _, _ = loss_data("logistic", n=240, p=5, seed=9)
    grid = [aloocv.L2(v) for v in (0.1, 1.0, 10.0)]
    r = aloocv.tune(X, y, penalty=grid[0], method="grid", grid=grid, fit_tol=TOL)
    g = aloocv.tune(dX(X), y, penalty=grid[0], method="grid", grid=grid, fit_tol=TOL)
    close(g.history["acv"], r.history["acv"])
    close(g.history["stderr"], r.history["stderr"])
    Cs = np.logspace(-2, 2, 3)
    est_r = aloocv.ALOLogisticRegressionCV(Cs=Cs, tol=TOL).fit(X, y)
    est_g = aloocv.ALOLogisticRegressionCV(Cs=Cs, tol=TOL).fit(dX(X), da.from_array(y, chunks=50))
    np.testing.assert_array_equal(est_g.classes_, est_r.classes_)
    close(est_g.C_, est_r.C_)
    close(est_g.coef_, est_r.coef_)
    close(est_g.intercept_, est_r.intercept_)
    close(est_g.best_score_, est_r.best_score_)
    close(est_g.predict_proba(X), est_r.predict_proba(X))


def test_cluster_l1_loo_and_logistic_cv(client):
    X, y, w, _ = loss_data("logistic", n=240, p=8, seed=11)
    kw = dict(loss="logistic", penalty=aloocv.ElasticNet(25.0, 1.0), sample_weight=w, tol=TOL)
    r = aloocv.loo(X, y, **kw)
    g = aloocv.loo(dX(X), y, **kw)
    assert 0 < np.count_nonzero(r.fit.coef_) < 8
    close(g.fit.coef_, r.fit.coef_, 1e-8)
    close(g.losses.compute(), r.losses, 1e-8)
    close(g.leverages.compute(), r.leverages, 1e-8)
    close(g.mean, r.mean, 1e-8)
    kw = dict(Cs=[0.1, 1.0], l1_ratios=[0.5, 0.9], tol=TOL)
    est_r = aloocv.ALOLogisticRegressionCV(**kw).fit(X, y)
    est_g = aloocv.ALOLogisticRegressionCV(**kw).fit(dX(X), da.from_array(y, chunks=50))
    close(est_g.C_, est_r.C_, 1e-12)
    close(est_g.l1_ratio_, est_r.l1_ratio_, 1e-12)
    close(est_g.coef_, est_r.coef_, 1e-8)
    close(est_g.intercept_, est_r.intercept_, 1e-8)
    close(est_g.best_score_, est_r.best_score_, 1e-8)


def test_cluster_l1_kfold_gradient_certify(client):
    # the L1 routes and the certificate on worker processes (exact K-fold: the
    # local-scheduler tests)
    X, y, w, off = loss_data("poisson", n=200, p=8, seed=3)
    pen = aloocv.ElasticNet(20.0, 0.5)
    kw = dict(loss="poisson", penalty=pen, sample_weight=w, offset=off, tol=TOL)
    r = aloocv.loo(X, y, return_gradient=True, **kw)
    g = aloocv.loo(dX(X), y, return_gradient=True, **kw)
    assert 0 < np.count_nonzero(r.fit.coef_) < 8
    close(g.gradient, r.gradient)
    cr, cg = r.certify(n_samples=1), g.certify(n_samples=1)
    np.testing.assert_array_equal(cg.indices, cr.indices)
    close(cg.exact_losses, cr.exact_losses)
    rk = aloocv.kfold(X, y, n_folds=4, **kw)
    gk = aloocv.kfold(dX(X, 100), y, n_folds=4, **kw)
    close(gk.losses, rk.losses)
    close(gk.mean, rk.mean)


def test_cluster_client_gathers_no_X(client, monkeypatch):
    # structural: everything a pass brings to the client is O(p1^2) (plus one float
    # per sample where documented), never X; X (n p floats) is made on the workers
    n, p = 6000, 20
    X = da.random.RandomState(0).standard_normal((n, p), chunks=(500, p))
    y = (X[:, 0] + X[:, 1] > 0).astype(np.float64)
    seen = []
    real = passes._compute

    def spy(obj):
        out = real(obj)
        seen.append(sum(nbytes_of(v) for v in (out if isinstance(out, list) else [out])))
        return out

    for mod in _DASK_MODULES:  # every module of the backend that computes
        if hasattr(mod, "_compute"):
            monkeypatch.setattr(mod, "_compute", spy)
    res = aloocv.loo(X, y, penalty=aloocv.L2(1.0), return_gradient=True)
    assert seen and max(seen) < 10 * (p + 1) ** 2 * 8
    assert max(seen) < n * p * 8 / 50
    assert np.isfinite(res.mean)


def test_cluster_exact_loo(client, monkeypatch):
    # the refits' passes on the workers; the per-sample results handed to the workers;
    # then batches of 16 fetched 4 at a time and run 3 at a time (_refits), whose results
    # must come back in the rows' order across fetches and chunks
    X, y, w, _ = loss_data("poisson", n=150, p=3, seed=22)
    for n, batch in ((60, None), (150, 16)):
        if batch:
            monkeypatch.setattr(policy, "EXACT_BATCH", batch)
            monkeypatch.setattr(policy, "EXACT_FETCH", 4)
            monkeypatch.setattr(policy, "REFIT_THREADS", 3)
        kw = dict(loss="poisson", penalty=aloocv.L2(2.0), sample_weight=w[:n], tol=TOL)
        r = aloocv.loo(X[:n], y[:n], method="exact", **kw)
        g = aloocv.loo(dX(X[:n], 25), y[:n], method="exact", **kw)
        assert g.losses.chunks == ((25,) * (n // 25) + ((n % 25,) if n % 25 else ()),)
        close(g.losses.compute(), r.losses)
        close(g.predictions.compute(), r.predictions)
        close(g.mean, r.mean)
        close(g.stderr, r.stderr)


def test_cluster_refit_routes(client):
    # the refit routes added last, on worker processes (small: each refit is a few
    # round trips): exact LOO with an L1 term, multinomial K-fold, exact LOO and the
    # multinomial certificate
    X, y, w, _ = loss_data("logistic", n=40, p=3, seed=23)
    y[:2] = [0.0, 1.0]
    kw = dict(loss="logistic", penalty=aloocv.ElasticNet(2.0, 1.0), sample_weight=w[:8], tol=TOL)
    r = aloocv.loo(X[:8], y[:8], method="exact", **kw)
    g = aloocv.loo(dX(X[:8], 4), y[:8], method="exact", **kw)
    close(g.losses.compute(), r.losses, 1e-8)
    ym = (np.arange(40) % 3).astype(float)
    kw = dict(loss="multinomial", penalty=aloocv.L2(1.0), tol=TOL)
    r = aloocv.kfold(X, ym, folds=np.arange(40) % 3, sample_weight=w, **kw)
    g = aloocv.kfold(dX(X, 15), ym, folds=np.arange(40) % 3, sample_weight=w, **kw)
    close(g.predictions, r.predictions, 1e-8)
    r = aloocv.loo(X[:8], ym[:8], method="exact", **kw)
    g = aloocv.loo(dX(X[:8], 4), ym[:8], method="exact", **kw)
    close(g.losses.compute(), r.losses, 1e-7)
    c = aloocv.loo(dX(X, 15), ym, **kw).certify(n_samples=2)
    ref = aloocv.loo(X, ym, **kw).certify(n_samples=2)
    np.testing.assert_array_equal(c.indices, ref.indices)
    close(c.exact_losses, ref.exact_losses, 1e-7)


SPIN_S = 60.0  # a refit of the test below that is never stopped fails it after this


def test_refits_run_together_on_a_client_and_stop_together(client, monkeypatch):
    # _refits: on a distributed client the calls run in threads, REFIT_THREADS at a time
    # (fewer where REFIT_BYTES says so), in the caller's context, and return in order;
    # when one raises, the calls not started are dropped, the running ones stop at their
    # next pass (_compute raises in them) and the error reaches the caller; Ctrl-C returns
    # at once; no refit thread is left behind
    import threading
    import time

    monkeypatch.setattr(policy, "REFIT_THREADS", 3)
    active, most, lock = [0], [0], threading.Lock()

    def square(i):
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        try:
            return passes._compute(da.from_array(np.arange(4.0)) * i).sum()
        finally:
            with lock:
                active[0] -= 1

    assert refits._refits(square, list(range(12))) == [6.0 * i for i in range(12)]
    assert 1 < most[0] <= 3

    started, stopped = [], []

    def fail_or_spin(i, fails, pass_s=0.0):
        """Call i fails after fails[i] seconds; the others pass after pass until stopped
        (or SPIN_S: then the test fails instead of hanging)."""
        started.append(i)
        if i in fails:
            time.sleep(fails[i])
            raise ValueError(f"refit {i} failed")
        t0 = time.perf_counter()
        try:
            while time.perf_counter() - t0 < SPIN_S:  # one pass after another
                passes._compute(da.ones(2).sum())
                time.sleep(pass_s)
        except passes._RefitsStopped:
            stopped.append(i)
            raise
        raise AssertionError(f"refit {i} was not stopped within {SPIN_S} s")

    def refit_threads():
        return [t for t in threading.enumerate() if t.name.startswith("aloocv-refit")]

    # the error of the first call, of a later one, and of the first of two to fail (the
    # later call, first)
    for fails, first in (({0: 0.2}, 0), ({2: 0.2}, 2), ({0: 0.6, 2: 0.2}, 2)):
        started.clear()
        stopped.clear()
        t0 = time.perf_counter()
        with pytest.raises(ValueError, match=f"refit {first} failed"):
            refits._refits(lambda i, fails=fails: fail_or_spin(i, fails), list(range(40)))
        assert time.perf_counter() - t0 < 30
        assert sorted(started) == [0, 1, 2]
        assert sorted(stopped) == sorted({0, 1, 2} - set(fails))
        assert not refit_threads()

    # Ctrl-C in the caller (SIGINT, as interrupt_main sends it) while every refit is in a
    # pass of 2 s: the caller returns at once; the refits end at their next pass. Python's
    # own SIGINT handler for the while: a process started with SIGINT ignored (a background
    # job of a non-interactive shell, as a CI runner may start it) has none, and there
    # interrupt_main does nothing.
    import _thread
    import signal

    def interrupt_or_spin(i):
        if i == 0:
            time.sleep(0.2)
            _thread.interrupt_main()
        return fail_or_spin(i, {}, pass_s=2.0)

    started.clear()
    stopped.clear()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        t0 = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            refits._refits(interrupt_or_spin, list(range(40)))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.perf_counter() - t0 < 1.5
    while refit_threads() and time.perf_counter() - t0 < 30:
        time.sleep(0.05)
    assert not refit_threads()
    assert sorted(started) == sorted(stopped) == [0, 1, 2]

    # fewer at a time where their state would exceed REFIT_BYTES together
    active[0] = most[0] = 0
    monkeypatch.setattr(policy, "REFIT_BYTES", 2000)
    assert refits._refits(square, list(range(6)), nbytes=1000) == [6.0 * i for i in range(6)]
    assert most[0] == 2
    monkeypatch.setattr(policy, "REFIT_BYTES", 256 * 2**20)

    # a client made current by as_current() (not the default one) runs the refits' passes
    other = distributed.Client(client.cluster, set_as_default=False)
    try:
        with other.as_current():
            seen = refits._refits(lambda i: distributed.get_client() is other, list(range(6)))
        assert seen == [True] * 6
    finally:
        other.close()


def test_tune_gathers_no_per_sample_arrays(sync, monkeypatch, computed_bytes):
    # tune (grid, and the gradient search) and the estimator: per candidate only means,
    # standard errors, gradients and the fit reach the client, not n floats; results
    # equal the numpy tune
    n, p = 3000, 6
    X, y, _, _ = loss_data("logistic", n=n, p=p, seed=21)
    Xd = dX(X, 500)
    seen = computed_bytes
    grid = [aloocv.L2(v) for v in (0.1, 1.0, 10.0)]
    kw = dict(loss="logistic", fit_tol=TOL)
    g = aloocv.tune(Xd, y, penalty=grid[0], method="grid", grid=grid, **kw)
    ga = aloocv.tune(Xd, y, penalty=aloocv.L2(1.0), method="auto", grid=grid, **kw)
    est = aloocv.ALOLogisticRegressionCV(Cs=[0.1, 1.0, 10.0], tol=TOL).fit(Xd, y)
    assert seen and max(seen) < 10 * (p + 1) ** 2 * 8  # independent of n
    assert max(seen) < n * 8 / 4
    monkeypatch.undo()
    assert isinstance(g.loo.predictions, da.Array) and isinstance(g.path_losses, da.Array)
    assert g.loo.predictions.chunks == Xd.chunks[:1]
    r = aloocv.tune(X, y, penalty=grid[0], method="grid", grid=grid, **kw)
    close(g.history["acv"], r.history["acv"])
    close(g.history["stderr"], r.history["stderr"])
    close(g.path_losses.compute(), r.path_losses)
    close(g.path_predictions.compute(), r.path_predictions)
    close(g.loo.predictions.compute(), r.loo.predictions)
    close(g.acv, r.acv)
    close(g.stderr, r.stderr)
    ra = aloocv.tune(X, y, penalty=aloocv.L2(1.0), method="auto", grid=grid, **kw)
    close(ga.penalty.lam, ra.penalty.lam, 1e-6)  # a search stopping at its tolerance
    close(ga.acv, ra.acv, 1e-8)
    er = aloocv.ALOLogisticRegressionCV(Cs=[0.1, 1.0, 10.0], tol=TOL).fit(X, y)
    close(est.coef_, er.coef_)
    close(est.best_score_, er.best_score_)
    close(est.scores_[1.0], er.scores_[1.0])


def _slow_block(block_info=None):
    # deterministic chunk i of X (seeded by its index), slow enough for a worker to die
    # while the fit runs
    i = block_info[None]["chunk-location"][0]
    time.sleep(0.05)
    return np.random.default_rng(100 + i).standard_normal(block_info[None]["chunk-shape"])


def test_cluster_worker_killed_mid_run(client):
    n, p, c = 1200, 5, 100
    X = da.map_blocks(_slow_block, chunks=((c,) * (n // c), (p,)), dtype=np.float64)
    Xn = X.compute()
    y = (Xn[:, 0] - Xn[:, 2] + 0.3 > 0).astype(np.float64)
    ref = aloocv.fit(Xn, y, tol=TOL)
    victim = next(iter(client.scheduler_info()["workers"]))

    killed = []

    def kill():
        time.sleep(0.4)
        client.run(lambda: __import__("os")._exit(1), workers=[victim], on_error="ignore")
        killed.append(time.perf_counter())

    t = threading.Thread(target=kill)
    t.start()
    got = aloocv.fit(X, y, tol=TOL)
    done = time.perf_counter()
    t.join()
    assert killed and killed[0] < done  # the worker died while the fit ran
    assert victim not in client.scheduler_info()["workers"]
    close(got.coef_, ref.coef_)
    close(got.intercept_, ref.intercept_)
    client.wait_for_workers(2, timeout=30)


@pytest.mark.parametrize(
    "labels", [np.array(["no", "yes"]), np.array([3, 7]), np.array([-1.0, 1.0])], ids=str
)
def test_logistic_cv_labels(sync, labels):
    # classes_ of the dask path equal the numpy path's (values and dtype, strings too);
    # the 0/1 encoding is made chunk by chunk
    X, y, w, _ = loss_data("logistic", n=160, p=4, seed=15)
    yl = labels[y.astype(int)]
    kw = dict(Cs=np.logspace(-2, 2, 3), tol=TOL)
    r = aloocv.ALOLogisticRegressionCV(**kw).fit(X, yl, sample_weight=w)
    for yd in (yl, da.from_array(yl, chunks=40)):
        g = aloocv.ALOLogisticRegressionCV(**kw).fit(dX(X), yd, sample_weight=w)
        assert g.classes_.dtype == r.classes_.dtype
        np.testing.assert_array_equal(g.classes_, r.classes_)
        close(g.coef_, r.coef_)
        close(g.intercept_, r.intercept_)
        close(g.best_score_, r.best_score_)
        np.testing.assert_array_equal(g.predict(X), r.predict(X))


def test_logistic_cv_string_labels_ovr(sync):
    # one-vs-rest over three string labels, with class weights
    X, _, _, _ = loss_data("logistic", n=160, p=4, seed=15)
    y3 = np.array(["a", "b", "c"])[(np.arange(160) * 7) % 3]
    kw = dict(Cs=[0.1, 1.0], multi_class="ovr", class_weight="balanced", tol=TOL)
    r = aloocv.ALOLogisticRegressionCV(**kw).fit(X, y3)
    g = aloocv.ALOLogisticRegressionCV(**kw).fit(dX(X), da.from_array(y3, chunks=40))
    np.testing.assert_array_equal(g.classes_, r.classes_)
    close(g.coef_, r.coef_)
    with pytest.raises(ValueError, match="continuous|Unknown label type"):
        aloocv.ALOLogisticRegressionCV(**kw).fit(dX(X), X[:, 0])
    yn = (X[:, 0] > 0).astype(float)
    yn[100] = np.nan
    with pytest.raises(ValueError, match="y contains NaN"):
        aloocv.ALOLogisticRegressionCV(**kw).fit(dX(X), da.from_array(yn, chunks=40))


def test_empty_row_chunks(sync):
    # a dask array with 0-row chunks (as a filter leaves them after compute_chunk_sizes) is
    # a valid X: every route skips them and equals numpy
    X, y, w, off = loss_data("poisson", n=120, p=4, seed=21)
    ch = ((0, 50, 0, 70, 0), (4,))
    Xd = da.from_array(X, chunks=ch)
    kw = dict(loss="poisson", penalty=1.0, sample_weight=w, offset=off, tol=TOL)
    close(aloocv.fit(Xd, y, **kw).coef_, aloocv.fit(X, y, **kw).coef_)
    for method in ("alo", "exact"):
        got, ref = aloocv.loo(Xd, y, method=method, **kw), aloocv.loo(X, y, method=method, **kw)
        assert got.losses.shape == (120,)
        close(got.losses.compute(), ref.losses)
        close(got.mean, ref.mean)
    close(aloocv.kfold(Xd, y, n_folds=4, **kw).mean, aloocv.kfold(X, y, n_folds=4, **kw).mean)
    grid = [aloocv.L2(v) for v in (0.1, 1.0, 10.0)]
    kt = dict(loss="poisson", penalty=grid[0], method="grid", grid=grid, tol=TOL)
    close(aloocv.tune(Xd, y, **kt).history["acv"], aloocv.tune(X, y, **kt).history["acv"])


def test_tune_names_a_bad_chunk(sync):
    # X's chunks are checked in the fits' first pass: the bracketing grid of tune must
    # not turn that error into "ALOOCV is not defined at any point"
    X, y, _, _ = loss_data("squared", n=120, p=4, seed=22)
    X[77, 2] = np.nan
    with pytest.raises(ValueError, match=r"X contains NaN or inf \(first at row 77, column 2\)"):
        aloocv.tune(dX(X, 40), y, loss="squared")


def test_exact_loo_refit_with_no_weight_left(sync):
    # all the weight on one sample, no intercept: its refit has no data left (sum of the
    # other weights 0, the refit is the penalty's minimizer 0); as in memory, without
    # numpy's divide-by-zero warnings
    X, y, _, _ = loss_data("squared", n=60, p=3, seed=23)
    w = np.zeros(60)
    w[17] = 2.0
    kw = dict(loss="squared", penalty=1.0, sample_weight=w, fit_intercept=False, method="exact")
    with pytest.warns(ConvergenceWarning) as ref_rec:
        ref = aloocv.loo(X, y, **kw)
    with pytest.warns(ConvergenceWarning) as rec:
        got = aloocv.loo(dX(X, 25), y, **kw)
    assert [type(r.message) for r in rec] == [type(r.message) for r in ref_rec]
    assert got.losses.compute()[17] == pytest.approx(0.5 * y[17] ** 2, rel=1e-12)
    close(got.losses.compute(), ref.losses)


@pytest.mark.parametrize("scheduler", ["synchronous", "threads"])
def test_local_scheduler_beside_a_client(client, scheduler):
    # a local scheduler chosen while a distributed client exists: the results are not
    # scattered to the client's workers, which that scheduler's tasks cannot read
    X, y, _, _ = loss_data("poisson", n=90, p=3, seed=24)
    kw = dict(loss="poisson", penalty=1.0, tol=TOL)
    with dask.config.set(scheduler=scheduler):
        for method in ("exact", "alo"):
            got = aloocv.loo(dX(X, 40), y, method=method, **kw)
            close(got.losses.compute(), aloocv.loo(X, y, method=method, **kw).losses)
