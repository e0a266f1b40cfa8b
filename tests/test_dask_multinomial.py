"""The multinomial loss on dask input (issue 12): ``aloocv.fit`` and ``aloocv.loo`` over
the row chunks equal the in-memory ones (1e-10 where both take exact Newton steps, to the
tolerance where the in-memory fit takes Newton-CG steps); the per-chunk kernels against
numpy formulas; bad input gives the in-memory messages."""

from __future__ import annotations

import re

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import aloocv
from aloocv import _core

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

PARITY = 1e-10
CHUNK = 70  # rows per chunk: uneven last chunk


def dX(X, chunk=CHUNK):
    return da.from_array(X, chunks=(chunk, X.shape[1]))


def mn_data(n=230, p=5, K=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    B = rng.standard_normal((K, p)) / np.sqrt(p)
    eta = X @ B.T + rng.standard_normal(K) * 0.3
    P = np.exp(eta - eta.max(1, keepdims=True))
    P /= P.sum(1, keepdims=True)
    y = np.array([rng.choice(K, p=pi) for pi in P])
    y[:K] = np.arange(K)  # every class present
    return X, y, rng.uniform(0.5, 2.0, n)


def close_rel(a, b, tol=PARITY):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=0, atol=tol * max(1e-300, float(np.max(np.abs(b)))))


def close_abs(a, b, tol=PARITY):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=0, atol=tol)


# ------------------------------------------------------------------ per-chunk kernels
def test_chunk_sums_against_numpy():
    """Loss, gradient and unpenalized Hessian of one chunk by plain numpy formulas."""
    X, y, w = mn_data(n=40, p=3, K=3, seed=3)
    K, p1 = 3, 4
    rng = np.random.default_rng(1)
    beta = rng.standard_normal(K * p1) * 0.3
    out = _core.multinomial_chunk_sums(
        X,
        y.astype(float),
        w,
        K,
        np.ones(3),
        fit_intercept=True,
        beta=beta,
        hessian=True,
        n_threads=1,
    )
    Xt = np.column_stack([np.ones(len(y)), X])
    B = beta.reshape(K, p1)
    eta = Xt @ B.T
    lse = np.log(np.exp(eta).sum(1))
    mu = np.exp(eta - lse[:, None])
    E = np.eye(K)[y]
    loss = float(w @ (lse - eta[np.arange(len(y)), y]))
    grad = ((w[:, None] * (mu - E)).T @ Xt).ravel()  # class-major
    H = np.zeros((K * p1, K * p1))
    for a in range(K):
        for b in range(K):
            c = w * mu[:, a] * ((a == b) - mu[:, b])
            H[a * p1 : (a + 1) * p1, b * p1 : (b + 1) * p1] = Xt.T @ (c[:, None] * Xt)
    assert out.loss == pytest.approx(loss, rel=1e-13)
    close_abs(out.grad, grad, 1e-12)
    close_abs(out.hess, H, 1e-12)
    assert out.weight == pytest.approx(w.sum())
    no_h = _core.multinomial_chunk_sums(
        X,
        y.astype(float),
        w,
        K,
        np.ones(3),
        fit_intercept=True,
        beta=beta,
        hessian=False,
        n_threads=1,
    )
    assert no_h.hess is None


def numpy_mn_source(X, y, w, K, calls):
    """A multinomial problem's sums by plain numpy (class-major beta)."""
    Xt = np.column_stack([np.ones(len(y)), X])
    p1 = Xt.shape[1]
    E = np.eye(K)[y]

    def source(beta, step, hessian, clip):
        calls.append(bool(hessian))
        eta = Xt @ beta.reshape(K, p1).T
        lse = np.log(np.exp(eta).sum(1))
        mu = np.exp(eta - lse[:, None])
        loss = float(w @ (lse - eta[np.arange(len(y)), y]))
        grad = ((w[:, None] * (mu - E)).T @ Xt).ravel()
        H = None
        if hessian:
            H = np.zeros((K * p1, K * p1))
            for a in range(K):
                for b in range(K):
                    c = w * mu[:, a] * ((a == b) - mu[:, b])
                    H[a * p1 : (a + 1) * p1, b * p1 : (b + 1) * p1] = Xt.T @ (c[:, None] * Xt)
            H = np.asfortranarray(H)
        return loss, grad, H, 0.0

    return source


@pytest.mark.parametrize("fresh_end", [False, True])
def test_sums_fit_on_numpy_source(fresh_end):
    """_core.multinomial_sums_fit on a numpy source: the in-memory fit's coefficients and
    steps, and no Hessian computed that is not used (a Hessian costs K (K + 1) / 2 passes)."""
    X, y, w = mn_data(n=150, p=3, K=3, seed=15)
    K, p1 = 3, 4
    with threadpool_limits(1):
        ref = aloocv.fit(X, y, loss="multinomial", penalty=0.5, sample_weight=w)
    share = np.bincount(y, weights=w) / w.sum()
    b0 = np.zeros((K, p1))
    b0[:, 0] = np.log(share) - np.log(share).mean()
    calls: list = []
    r = _core.multinomial_sums_fit(
        numpy_mn_source(X, y, w, K, calls),
        K,
        np.full(3, 0.5),
        fit_intercept=True,
        beta0=b0.ravel(),
        weight_sum=w.sum(),
        tol=1e-8,
        max_iter=100,
        fresh_end=fresh_end,
    )
    B = r.beta.reshape(K, p1)
    close_rel(B[:, 1:], ref.coef_)
    close_abs(B[:, 0], ref.intercept_, PARITY * max(1.0, np.abs(ref.intercept_).max()))
    assert r.n_iter == ref.n_iter_
    assert sum(calls) == r.hessian_passes
    if fresh_end:
        assert r.hessian_at_point


# ------------------------------------------------------------------ fit
@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_fit_matches_numpy(sync, intercept, weighted):
    X, y, w = mn_data()
    sw = w if weighted else None
    kw = dict(loss="multinomial", penalty=aloocv.L2(0.7), fit_intercept=intercept)
    with threadpool_limits(1):
        ref = aloocv.fit(X, y, sample_weight=sw, **kw)
    dw = None if sw is None else da.from_array(sw, chunks=CHUNK)
    got = aloocv.fit(dX(X), da.from_array(y, chunks=50), sample_weight=dw, **kw)
    assert type(got) is type(ref)
    close_rel(got.coef_, ref.coef_)
    close_abs(got.intercept_, ref.intercept_, PARITY * max(1.0, np.abs(ref.intercept_).max()))
    assert got.n_iter_ == ref.n_iter_
    assert got.converged_
    assert got.objective_ == pytest.approx(ref.objective_, rel=1e-12)
    if intercept:
        assert abs(got.intercept_.sum()) < 1e-10  # the gauge: centered intercepts


def test_fit_many_classes_uses_exact_hessian(sync):
    """(K + 1) p1 >= 256: in memory Newton-CG, on dask exact Newton: equal to the tolerance."""
    X, y, _ = mn_data(n=300, p=60, K=4, seed=5)
    kw = dict(loss="multinomial", penalty=aloocv.L2(2.0), tol=1e-11)
    with threadpool_limits(1):
        ref = aloocv.fit(X, y, **kw)
    got = aloocv.fit(dX(X, 100), y, **kw)
    close_rel(got.coef_, ref.coef_, 1e-8)
    close_abs(got.intercept_, ref.intercept_, 1e-8)


def test_warm_start(sync):
    X, y, _ = mn_data(seed=2)
    with threadpool_limits(1):
        ref = aloocv.fit(X, y, loss="multinomial", penalty=1.0)
        warm = aloocv.fit(X[:150], y[:150], loss="multinomial", penalty=1.0)
        ref_w = aloocv.fit(X, y, loss="multinomial", penalty=1.0, warm_start=warm)
    got = aloocv.fit(dX(X), y.astype(float), loss="multinomial", penalty=1.0, warm_start=warm)
    close_rel(got.coef_, ref_w.coef_)
    assert got.n_iter_ == ref_w.n_iter_
    close_rel(got.coef_, ref.coef_, 1e-7)


# ------------------------------------------------------------------ loo
@pytest.mark.parametrize("method", ["alo", "if", "lemma3"])
@pytest.mark.parametrize("intercept", [True, False])
def test_loo_matches_numpy(sync, method, intercept):
    X, y, w = mn_data(seed=4)
    kw = dict(loss="multinomial", penalty=aloocv.L2(0.5), method=method, fit_intercept=intercept)
    with threadpool_limits(1):
        ref = aloocv.loo(X, y, sample_weight=w, **kw)
    got = aloocv.loo(dX(X), y, sample_weight=da.from_array(w, chunks=CHUNK), **kw)
    assert got.predictions.shape == (230, 3)
    assert got.predictions.chunks[0] == dX(X).chunks[0]
    assert got.leverages.shape == (230, 3, 3)
    close_abs(got.losses.compute(), ref.losses)
    close_abs(got.predictions.compute(), ref.predictions)
    close_abs(got.leverages.compute(), ref.leverages)
    close_abs(got.downdate.compute(), ref.downdate)
    np.testing.assert_array_equal(got.unreliable.compute(), ref.unreliable)
    if method == "alo":  # the error indicator (tests/test_dask_trust.py: the self-check)
        close_rel(got.indicator.compute(), ref.indicator)
    else:
        assert got.indicator is None and ref.indicator is None
    close_abs(got.mean, ref.mean)
    close_abs(got.stderr, ref.stderr)
    close_rel(got.fit.coef_, ref.fit.coef_)
    assert got.fit.n_iter_ == ref.fit.n_iter_


def test_loo_against_brute_force(sync):
    """ALO on dask tracks exact refits (independent of the in-memory ALO code): much
    nearer to them than the full fit's class scores are."""
    X, y, _ = mn_data(n=120, p=3, seed=6)
    got = aloocv.loo(dX(X, 50), y, loss="multinomial", penalty=2.0)
    preds = got.predictions.compute()
    full = got.fit.decision_function(X)
    err_alo, err_full = [], []
    with threadpool_limits(1):
        for i in range(0, 120, 17):
            keep = np.arange(120) != i
            f = aloocv.fit(X[keep], y[keep], loss="multinomial", penalty=2.0, tol=1e-12)
            exact = f.decision_function(X[i : i + 1])[0]
            c = exact - exact.mean()  # class scores up to the gauge
            err_alo.append(np.abs(preds[i] - preds[i].mean() - c).max())
            err_full.append(np.abs(full[i] - full[i].mean() - c).max())
    assert max(err_alo) < 5e-3
    assert max(err_alo) < 0.2 * max(err_full)


@pytest.mark.parametrize("intercept", [True, False])
def test_hypergradient_matches_numpy(sync, intercept):
    X, y, w = mn_data(n=180, p=4, seed=12)
    pen = aloocv.L2(np.array([0.3, 1.0, 2.0, 0.5]))
    kw = dict(loss="multinomial", penalty=pen, fit_intercept=intercept, return_gradient=True)
    with threadpool_limits(1):
        ref = aloocv.loo(X, y, sample_weight=w, **kw)
    got = aloocv.loo(dX(X, 50), y, sample_weight=w, **kw)
    close_rel(got.gradient, ref.gradient)
    close_abs(got.mean, ref.mean)


def test_hypergradient_against_finite_differences(sync):
    """d mean / d lam of the dask ALO by a central difference of dask ALO means."""
    X, y, _ = mn_data(n=150, p=3, seed=13)
    lam, h = 0.8, 1e-5
    got = aloocv.loo(dX(X, 40), y, loss="multinomial", penalty=lam, return_gradient=True, tol=1e-12)
    m = [
        aloocv.loo(dX(X, 40), y, loss="multinomial", penalty=lam * (1 + s * h), tol=1e-12).mean
        for s in (1.0, -1.0)
    ]
    fd = (m[0] - m[1]) / (2 * lam * h)
    assert got.gradient.shape == (1,)
    assert got.gradient[0] == pytest.approx(fd, rel=1e-5)


def test_loo_at_given_coef(sync):
    X, y, _ = mn_data(seed=7)
    with threadpool_limits(1):
        f = aloocv.fit(X, y, loss="multinomial", penalty=1.0, tol=1e-12)
        ref = aloocv.loo(
            X, y, loss="multinomial", penalty=1.0, coef=f.coef_, intercept=f.intercept_
        )
    got = aloocv.loo(
        dX(X), y, loss="multinomial", penalty=1.0, coef=f.coef_, intercept=f.intercept_
    )
    close_abs(got.losses.compute(), ref.losses)
    close_abs(got.predictions.compute(), ref.predictions)
    assert got.fit.n_iter_ == 0


def test_loo_unreliable_warning_as_numpy(sync):
    """Weak penalty, few samples: some blocks near singular; the same warning and flags."""
    X, y, _ = mn_data(n=30, p=25, seed=8)
    kw = dict(loss="multinomial", penalty=1e-2)
    with threadpool_limits(1), pytest.warns(aloocv.ALOWarning) as rec_np:
        ref = aloocv.loo(X, y, **kw)
    with pytest.warns(aloocv.ALOWarning) as rec:
        got = aloocv.loo(dX(X, 12), y, **kw)
    assert [str(r.message) for r in rec] == [str(r.message) for r in rec_np]
    np.testing.assert_array_equal(got.unreliable.compute(), ref.unreliable)


# ------------------------------------------------------------------ bad input
def numpy_error(fn, *args, **kw):
    with pytest.raises((ValueError, TypeError)) as e:
        fn(*args, **kw)
    return e.type, re.escape(str(e.value))


@pytest.mark.parametrize(
    "case",
    [
        "l1",
        "zero_lam",
        "fraction",
        "negative",
        "strings",
        "missing_class",
        "nan",
        "zero_weight_top",
    ],
)
def test_bad_input_gives_numpy_message(sync, case):
    X, y, _ = mn_data(n=100, p=3)
    kw: dict = dict(loss="multinomial", penalty=1.0)
    yy = y.astype(float)
    if case == "l1":
        kw["penalty"] = aloocv.ElasticNet(1.0, 0.5)
    elif case == "zero_lam":
        kw["penalty"] = aloocv.L2(0.0)
    elif case == "fraction":
        yy[83] = 1.5
    elif case == "negative":
        yy = y.copy()
        yy[91] = -1
    elif case == "strings":
        yy = np.array(["a", "b", "c"])[y]
    elif case == "missing_class":
        yy = y.copy()
        yy[yy == 1] = 3
    elif case == "nan":
        yy[12] = np.nan
    elif case == "zero_weight_top":  # the top label only on a zero-weight sample (row 75)
        yy = y.copy()
        yy[75] = 3
        kw["sample_weight"] = np.where(np.arange(100) == 75, 0.0, 1.0)
    for fn in (aloocv.fit, aloocv.loo):
        typ, msg = numpy_error(fn, X, yy, **kw)
        with pytest.raises(typ, match=msg):
            fn(dX(X), yy, **kw)
        if case in ("fraction", "negative", "missing_class", "nan", "zero_weight_top"):
            with pytest.raises(typ, match=msg):
                fn(dX(X), da.from_array(yy, chunks=CHUNK), **kw)


def test_unavailable_on_dask(sync):
    X, y, _ = mn_data(n=100, p=3)
    with pytest.raises(ValueError, match="unknown method 'exakt'"):
        aloocv.loo(dX(X), y, loss="multinomial", method="exakt")
    with pytest.raises(ValueError, match="return_gradient=True needs method='alo'"):
        aloocv.loo(dX(X), y, loss="multinomial", method="exact", return_gradient=True)
    for fn in (aloocv.fit, aloocv.loo, aloocv.kfold):  # as in memory (before: ignored there)
        with pytest.raises(ValueError, match="offset= is not available for the multinomial"):
            fn(X, y, loss="multinomial", offset=np.zeros(100))
        with pytest.raises(ValueError, match="offset= is not available for the multinomial"):
            fn(dX(X), y, loss="multinomial", offset=np.zeros(100))


def test_exact_loo_matches_numpy_and_refits(sync):
    """Exact multinomial LOO on dask: a refit over the chunks per sample (exact Newton;
    in memory Newton-CG, so the two agree to the tolerance) and plain refits."""
    X, y, w = mn_data(n=40, p=3, seed=4)
    kw = dict(loss="multinomial", penalty=aloocv.L2(1.0), sample_weight=w, tol=1e-10)
    with threadpool_limits(1):
        ref = aloocv.loo(X, y, method="exact", **kw)
    got = aloocv.loo(dX(X, 15), y, method="exact", **kw)
    assert got.leverages is None and got.predictions.chunks == ((15, 15, 10), (3,))
    close_rel(got.predictions.compute(), ref.predictions, 1e-7)
    close_abs(got.losses.compute(), ref.losses, 1e-7)
    close_abs(got.mean, ref.mean, 1e-8)
    close_abs(got.stderr, ref.stderr, 1e-8)
    i = 17
    keep = np.arange(40) != i
    f = aloocv.fit(
        X[keep],
        y[keep],
        loss="multinomial",
        penalty=aloocv.L2(1.0),
        sample_weight=w[keep],
        tol=1e-10,
    )
    close_rel(got.predictions[i].compute(), X[i] @ f.coef_.T + f.intercept_, 1e-7)


def test_certify_matches_numpy(sync):
    """certify() of a multinomial ALO result on dask: the same samples as in memory and
    their exact refits over the chunks."""
    X, y, w = mn_data(n=60, p=3, seed=6)
    kw = dict(loss="multinomial", penalty=aloocv.L2(1.0), sample_weight=w, tol=1e-10)
    with threadpool_limits(1):
        ref = aloocv.loo(X, y, **kw).certify(n_samples=6, random_state=2)
    got = aloocv.loo(dX(X, 25), y, **kw).certify(n_samples=6, random_state=2)
    np.testing.assert_array_equal(got.indices, ref.indices)
    close_abs(got.exact_losses, ref.exact_losses, 1e-7)
    close_abs(got.mean_error, ref.mean_error, 1e-7)


@pytest.mark.parametrize("method", ["alo", "exact"])
def test_kfold_matches_numpy(sync, method):
    """Multinomial K-fold on dask: per fold the fit over the chunks with the fold's
    weights zero (one damped Newton step for "alo", a refit for "exact"), as in memory;
    "exact" also against plain refits without each fold."""
    X, y, w = mn_data(n=150, p=4, seed=5)
    folds = np.arange(150) % 4
    kw = dict(loss="multinomial", penalty=aloocv.L2(2.0), method=method, sample_weight=w)
    with threadpool_limits(1):
        ref = aloocv.kfold(X, y, folds=folds, **kw)
    got = aloocv.kfold(dX(X), y, folds=da.from_array(folds, chunks=CHUNK), **kw)
    close_rel(got.predictions, ref.predictions)
    close_abs(got.losses, ref.losses)
    close_abs(got.mean, ref.mean)
    close_abs(got.stderr, ref.stderr)
    close_abs(got.fold_means, ref.fold_means)
    if method == "exact":
        for k in (0, 3):
            tr, te = folds != k, folds == k
            f = aloocv.fit(
                X[tr], y[tr], loss="multinomial", penalty=aloocv.L2(2.0), sample_weight=w[tr]
            )
            close_rel(got.predictions[te], X[te] @ f.coef_.T + f.intercept_, 1e-7)
    with pytest.raises(ValueError, match="fold 2 has zero total sample weight"):
        aloocv.kfold(
            dX(X), y, folds=folds, loss="multinomial", sample_weight=np.where(folds == 2, 0.0, w)
        )


# ------------------------------------------------------------------ tune and estimator
def test_tune_grid_matches_numpy(sync):
    X, y, w = mn_data(n=150, p=4, seed=9)
    grid = [aloocv.L2(v) for v in (0.1, 1.0, 10.0)]
    kw = dict(loss="multinomial", method="grid", grid=grid, sample_weight=w)
    with threadpool_limits(1):
        ref = aloocv.tune(X, y, **kw)
    got = aloocv.tune(dX(X, 40), y, **kw)
    close_abs(got.history["acv"], ref.history["acv"])
    close_abs(got.loo.predictions, ref.loo.predictions)
    close_rel(got.fit.coef_, ref.fit.coef_)
    assert got.penalty.params() == pytest.approx(ref.penalty.params())
    with pytest.raises(ValueError, match="method='sgd' is not available for the multinomial"):
        aloocv.tune(dX(X, 40), y, loss="multinomial", method="sgd")


def test_tune_gradient_search_matches_numpy(sync):
    X, y, w = mn_data(n=150, p=4, seed=14)
    kw = dict(loss="multinomial", penalty=aloocv.L2(1.0), sample_weight=w)
    with threadpool_limits(1):
        ref = aloocv.tune(X, y, **kw)
    got = aloocv.tune(dX(X, 40), y, **kw)
    assert got.penalty.params() == pytest.approx(ref.penalty.params(), rel=1e-6)
    close_abs(got.acv, ref.acv)
    assert got.history["acv"].shape == ref.history["acv"].shape
    close_abs(got.history["acv"], ref.history["acv"], 1e-8)


@pytest.mark.parametrize("search", ["grid", "gradient"])
def test_logistic_cv_many_classes_matches_numpy(sync, search):
    X, y, w = mn_data(n=160, p=4, K=4, seed=10)
    labels = np.array([3, 5, 8, 13])[y]  # not 0..K-1: encoded by the estimator
    kw = dict(Cs=[0.05, 0.5, 5.0], store_loo=True, search=search)
    with threadpool_limits(1):
        ref = aloocv.ALOLogisticRegressionCV(**kw).fit(X, labels, sample_weight=w)
    got = aloocv.ALOLogisticRegressionCV(**kw).fit(
        dX(X, 50), da.from_array(labels, chunks=50), sample_weight=w
    )
    assert got.multi_class_ == ref.multi_class_ == "multinomial"
    np.testing.assert_array_equal(got.classes_, ref.classes_)
    assert got.classes_.dtype == ref.classes_.dtype
    close_rel(got.C_, ref.C_, 1e-8 if search == "gradient" else 0.0)
    tol = 1e-8 if search == "gradient" else PARITY  # the searches stop at a tolerance
    close_rel(got.coef_, ref.coef_, tol)
    close_abs(got.intercept_, ref.intercept_, tol)
    close_abs(got.best_score_, ref.best_score_, tol)
    close_abs(got.loo_predictions_, ref.loo_predictions_, tol)
    close_abs(got.predict_proba(X), ref.predict_proba(X), tol)
    np.testing.assert_array_equal(got.predict(X), ref.predict(X))
    for key in ref.search_results_:
        close_abs(got.search_results_[key], ref.search_results_[key], max(tol, 1e-6 * (key == "C")))


def test_loo_on_local_cluster():
    """Two worker processes: the tasks pickle, the predictions persist on the workers, the
    results equal the in-memory ones."""
    distributed = pytest.importorskip("distributed")
    X, y, w = mn_data(n=200, p=4, seed=11)
    with threadpool_limits(1):
        ref = aloocv.loo(X, y, loss="multinomial", penalty=0.5, sample_weight=w)
    with (
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster),
    ):
        got = aloocv.loo(dX(X), y, loss="multinomial", penalty=0.5, sample_weight=w)
        close_abs(got.predictions.compute(), ref.predictions)
        close_abs(got.losses.compute(), ref.losses)
    close_abs(got.mean, ref.mean)
    close_rel(got.fit.coef_, ref.fit.coef_)
    assert got.fit.n_iter_ == ref.fit.n_iter_
