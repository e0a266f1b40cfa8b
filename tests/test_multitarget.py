"""Several targets (2-d y) for the squared loss: loo, kfold, ALORidgeCV, ALOElasticNetCV."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import ElasticNet, Ridge, RidgeCV
from threadpoolctl import threadpool_limits

import aloocv
from aloocv import _blas, _core


def _data(n=80, p=6, T=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    Y = X @ rng.standard_normal((p, T)) + rng.standard_normal((n, T)) * np.arange(1, T + 1)
    w = rng.uniform(0.2, 3.0, n)
    return X, Y, w


def _close(a, b, tol=1e-8):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol * max(1.0, np.max(np.abs(b))))


ALPHAS = np.logspace(-2, 3, 12)


@pytest.mark.parametrize("per_target", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_ridgecv_parity(per_target, weighted, fit_intercept):
    X, Y, w = _data()
    sw = w if weighted else None
    ours = aloocv.ALORidgeCV(
        alphas=ALPHAS, alpha_per_target=per_target, fit_intercept=fit_intercept
    ).fit(X, Y, sample_weight=sw)
    with threadpool_limits(1):
        ref = RidgeCV(alphas=ALPHAS, alpha_per_target=per_target, fit_intercept=fit_intercept)
        ref.fit(X, Y, sample_weight=sw)
    _close(ours.alpha_, ref.alpha_)
    _close(ours.coef_, ref.coef_)
    _close(ours.intercept_, ref.intercept_)
    _close(ours.best_score_, ref.best_score_)
    _close(ours.predict(X), ref.predict(X))
    if per_target:  # the targets have different noise levels: not one alpha for all
        assert np.unique(ours.alpha_).size > 1


def test_ridgecv_parity_sparse_and_float32():
    X, Y, w = _data(seed=1)
    with threadpool_limits(1):
        ref = RidgeCV(alphas=ALPHAS, alpha_per_target=True).fit(X, Y, sample_weight=w)
    ours = aloocv.ALORidgeCV(alphas=ALPHAS, alpha_per_target=True)
    ours.fit(sp.csr_matrix(X), Y, sample_weight=w)
    _close(ours.alpha_, ref.alpha_)
    _close(ours.coef_, ref.coef_)
    ours.fit(X.astype(np.float32), Y.astype(np.float32))
    with threadpool_limits(1):
        ref = RidgeCV(alphas=ALPHAS, alpha_per_target=True)
        ref.fit(X.astype(np.float32), Y.astype(np.float32))
    _close(ours.alpha_, ref.alpha_)
    _close(ours.coef_, ref.coef_, 1e-5)


@pytest.mark.parametrize("wide", [False, True])
def test_compressed_filters_are_exact(wide):
    """The grid's filters s/(s+lam), compressed band by band of the spectrum to their
    numerical rank (fewer GEMMs than alphas), give the scores of one direct GEMM per
    alpha and RidgeCV's selection."""
    rng = np.random.default_rng(3)
    n, p, T = 400, 200, 5
    X = rng.standard_normal((n, p))
    if wide:
        X *= np.logspace(-1.5, 1.5, p)
    Y = X @ rng.standard_normal((p, T)) / 5 + rng.standard_normal((n, T))
    alphas = np.logspace(-1, 5, 20)
    with _blas.single_threaded_blas():
        mr = _core.MultiRidge(X, Y, None, fit_intercept=True, penalty=None, n_threads=1)
        grid = mr.scores(alphas, 1)
        one = np.vstack([mr.scores(alphas[j : j + 1], 1).s2 for j in range(alphas.size)])
    # a narrow spectrum compresses; a wide one may run every alpha directly
    assert (grid.passes <= alphas.size) if wide else (grid.passes < alphas.size - 2)
    _close(grid.s2, one, 1e-12)
    ours = aloocv.ALORidgeCV(alphas=alphas, alpha_per_target=True).fit(X, Y)
    with threadpool_limits(1):
        ref = RidgeCV(alphas=alphas, alpha_per_target=True).fit(X, Y)
    _close(ours.alpha_, ref.alpha_)
    _close(ours.best_score_, ref.best_score_)
    _close(ours.coef_, ref.coef_)


def test_one_column_is_the_one_target_case():
    X, Y, w = _data()
    a = aloocv.ALORidgeCV(alphas=ALPHAS, alpha_per_target=True).fit(X, Y[:, :1], sample_weight=w)
    b = aloocv.ALORidgeCV(alphas=ALPHAS).fit(X, Y[:, 0], sample_weight=w)
    assert a.alpha_ == b.alpha_
    _close(a.coef_, b.coef_)
    r1 = aloocv.loo(X, Y[:, :1], loss="squared", penalty=aloocv.L2(2.0))
    r0 = aloocv.loo(X, Y[:, 0], loss="squared", penalty=aloocv.L2(2.0))
    _close(r1.losses, r0.losses)
    # each column of a multi-target result is the 1-d result of that column
    rm = aloocv.loo(X, Y, loss="squared", penalty=aloocv.L2(2.0), sample_weight=w)
    for t in range(Y.shape[1]):
        rt = aloocv.loo(X, Y[:, t], loss="squared", penalty=aloocv.L2(2.0), sample_weight=w)
        _close(rm.predictions[:, t], rt.predictions)
        _close(rm.mean[t], rt.mean)
        _close(rm.stderr[t], rt.stderr)
        _close(rm.coef[t], rt.fit.coef_)
        _close(rm.leverages, rt.leverages)


@pytest.mark.parametrize("weighted", [False, True])
def test_loo_against_refits(weighted):
    X, Y, w = _data(n=40, p=5, T=3, seed=4)
    sw = w if weighted else None
    lam = 3.0
    res = aloocv.loo(X, Y, loss="squared", penalty=aloocv.L2(lam), sample_weight=sw)
    assert isinstance(res, aloocv.MultiTargetLOOResult)
    assert res.losses.shape == res.predictions.shape == Y.shape
    assert res.mean.shape == res.stderr.shape == (3,)
    brute = np.empty_like(Y)
    with threadpool_limits(1):
        for i in range(X.shape[0]):
            keep = np.arange(X.shape[0]) != i
            m = Ridge(alpha=lam).fit(X[keep], Y[keep], None if sw is None else sw[keep])
            brute[i] = m.predict(X[i : i + 1])[0]
        full = Ridge(alpha=lam).fit(X, Y, sw)
    _close(res.predictions, brute)
    losses = 0.5 * (Y - brute) ** 2
    _close(res.losses, losses)
    ww = np.ones(X.shape[0]) if sw is None else sw
    mean = ww @ losses / ww.sum()
    _close(res.mean, mean)
    var = ww @ (losses - mean) ** 2 / (ww.sum() - 1)
    _close(res.stderr, np.sqrt(var / ww.sum()))
    _close(res.coef, full.coef_)
    _close(res.intercept, full.intercept_)
    exact = aloocv.loo(
        X, Y, loss="squared", penalty=aloocv.L2(lam), sample_weight=sw, method="exact"
    )
    _close(exact.predictions, brute)
    assert exact.leverages is None


@pytest.mark.parametrize("method", ["if", "lemma3"])
def test_loo_other_methods_match_one_target(method):
    X, Y, w = _data(n=50, seed=5)
    rm = aloocv.loo(X, Y, loss="squared", penalty=aloocv.L2(1.5), method=method, sample_weight=w)
    for t in range(Y.shape[1]):
        rt = aloocv.loo(
            X, Y[:, t], loss="squared", penalty=aloocv.L2(1.5), method=method, sample_weight=w
        )
        _close(rm.losses[:, t], rt.losses)
        _close(rm.predictions[:, t], rt.predictions)


def test_per_feature_penalty():
    X, Y, w = _data(n=60, seed=6)
    lam = np.linspace(0.5, 4.0, X.shape[1])
    rm = aloocv.loo(X, Y, loss="squared", penalty=aloocv.L2(lam), sample_weight=w)
    for t in range(Y.shape[1]):
        rt = aloocv.loo(X, Y[:, t], loss="squared", penalty=aloocv.L2(lam), sample_weight=w)
        _close(rm.predictions[:, t], rt.predictions)
        _close(rm.coef[t], rt.fit.coef_)
    lam[0] = 0.0
    with pytest.raises(ValueError, match="every lambda > 0"):
        aloocv.loo(X, Y, loss="squared", penalty=aloocv.L2(lam))


@pytest.mark.parametrize("method", ["alo", "exact"])
@pytest.mark.parametrize("weighted", [False, True])
def test_kfold_against_refits(method, weighted):
    X, Y, w = _data(n=60, p=5, T=3, seed=7)
    sw = w if weighted else None
    lam = 2.0
    res = aloocv.kfold(
        X, Y, loss="squared", penalty=aloocv.L2(lam), n_folds=5, method=method, sample_weight=sw
    )
    assert isinstance(res, aloocv.MultiTargetKFoldResult)
    assert res.fold_means.shape == (5, 3)
    brute = np.empty_like(Y)
    with threadpool_limits(1):
        for k in range(5):
            out = res.folds == k
            m = Ridge(alpha=lam).fit(X[~out], Y[~out], None if sw is None else sw[~out])
            brute[out] = m.predict(X[out])
    _close(res.predictions, brute)
    _close(res.losses, 0.5 * (Y - brute) ** 2)
    for t in range(3):  # the one-target K-fold of the same folds (the core's own path)
        rt = aloocv.kfold(
            X,
            Y[:, t],
            loss="squared",
            penalty=aloocv.L2(lam),
            folds=res.folds,
            method=method,
            sample_weight=sw,
        )
        _close(res.fold_means[:, t], rt.fold_means)
        _close(res.mean[t], rt.mean)
        _close(res.stderr[t], rt.stderr)


def test_kfold_takes_cv_splitters():
    """cv= reaches the several-target route: a partitioning splitter gives the folds its
    test sets define (checked against Ridge refits on those folds); a splitter whose test
    sets do not partition the samples is refused by name."""
    from sklearn.model_selection import KFold, TimeSeriesSplit

    X, Y, _ = _data(n=48, p=4, T=2, seed=9)
    cv = KFold(4, shuffle=True, random_state=3)
    res = aloocv.kfold(X, Y, loss="squared", penalty=aloocv.L2(1.5), cv=cv)
    brute = np.empty_like(Y)
    with threadpool_limits(1):
        for tr, te in cv.split(X):
            brute[te] = Ridge(alpha=1.5).fit(X[tr], Y[tr]).predict(X[te])
            assert np.unique(res.folds[te]).size == 1  # one fold per test set
    _close(res.predictions, brute)
    with pytest.raises(ValueError, match="do not partition the samples.*several targets"):
        aloocv.kfold(X, Y, loss="squared", penalty=aloocv.L2(1.5), cv=TimeSeriesSplit(3))


@pytest.mark.parametrize("order", ["C", "F"])
def test_target_layout_and_dtype(order):
    X, Y, w = _data(seed=8)
    ref = aloocv.loo(X, Y, loss="squared", penalty=aloocv.L2(1.0), sample_weight=w)
    Yo = np.asarray(Y, order=order)
    res = aloocv.loo(X, Yo, loss="squared", penalty=aloocv.L2(1.0), sample_weight=w)
    _close(res.predictions, ref.predictions, 1e-12)
    strided = np.asfortranarray(np.repeat(Y, 2, axis=1))[:, ::2]
    res = aloocv.loo(X, strided, loss="squared", penalty=aloocv.L2(1.0), sample_weight=w)
    _close(res.predictions, ref.predictions, 1e-12)
    Y32 = Yo.astype(np.float32)
    res = aloocv.loo(X, Y32, loss="squared", penalty=aloocv.L2(1.0), sample_weight=w)
    _close(res.predictions, ref.predictions, 1e-5)


def test_elastic_net_per_target():
    X, Y, w = _data(n=70, p=6, T=3, seed=9)
    m = aloocv.ALOElasticNetCV(l1_ratio=[0.3, 0.8], alphas=6, alpha_per_target=True)
    m.fit(X, Y, sample_weight=w)
    assert m.coef_.shape == (3, 6) and m.alpha_.shape == (3,)
    for t in range(3):
        one = aloocv.ALOElasticNetCV(l1_ratio=[0.3, 0.8], alphas=6).fit(X, Y[:, t], w)
        assert m.alpha_[t] == one.alpha_ and m.l1_ratio_[t] == one.l1_ratio_
        with threadpool_limits(1):
            ref = ElasticNet(alpha=m.alpha_[t], l1_ratio=m.l1_ratio_[t], tol=1e-12, max_iter=10**5)
            ref.fit(X, Y[:, t], sample_weight=w)
        _close(m.coef_[t], ref.coef_, 1e-6)
        _close(m.intercept_[t], ref.intercept_, 1e-6)
    _close(m.predict(X), X @ m.coef_.T + m.intercept_)


def test_elastic_net_shared_alpha():
    X, Y, _ = _data(n=70, p=6, T=3, seed=10)
    m = aloocv.ALOElasticNetCV(l1_ratio=0.5, alphas=6).fit(X, Y)
    res = m.search_results_  # one row per candidate and target
    means = res["loss"].reshape(-1, 3)
    alphas = res["alpha"].reshape(-1, 3)[:, 0]
    np.testing.assert_array_equal(res["target"].reshape(-1, 3), np.tile(np.arange(3.0), (6, 1)))
    best = int(np.argmin(means.mean(axis=1)))
    assert m.alpha_ == alphas[best]
    _close(m.best_score_, -2.0 * means[best])
    n = X.shape[0]
    for g in (3, best):  # the table is each target's own ALOOCV at that penalty
        a = alphas[g]
        pen = aloocv.ElasticNet(n * a * 0.5, n * a * 0.5)
        for t in range(3):
            ref = aloocv.loo(X, Y[:, t], loss="squared", penalty=pen)
            _close(means[g, t], ref.mean, 1e-6)
    for t in range(3):
        with threadpool_limits(1):
            ref = ElasticNet(alpha=m.alpha_, l1_ratio=0.5, tol=1e-12, max_iter=10**5)
            ref.fit(X, Y[:, t])
        _close(m.coef_[t], ref.coef_, 1e-6)
    with pytest.raises(ValueError, match="shared alpha"):
        aloocv.ALOElasticNetCV(search="gradient").fit(X, Y)


def test_bad_input_is_refused():
    X, Y, _ = _data(n=30, seed=11)
    pen = aloocv.L2(1.0)
    with pytest.raises(ValueError, match="loss='squared' only"):
        aloocv.loo(X, Y, loss="logistic", penalty=pen)
    with pytest.raises(ValueError, match="loss='squared' only"):
        aloocv.kfold(X, Y, loss="poisson", penalty=pen)
    with pytest.raises(ValueError, match="1-d class labels"):
        aloocv.loo(X, Y, loss="multinomial", penalty=pen)
    with pytest.raises(ValueError, match="rows"):
        aloocv.loo(X, Y[:-1], loss="squared", penalty=pen)
    with pytest.raises(ValueError, match="NaN"):
        Yn = Y.copy()
        Yn[3, 1] = np.nan
        aloocv.loo(X, Yn, loss="squared", penalty=pen)
    with pytest.raises(ValueError, match="L2 penalty only"):
        aloocv.loo(X, Y, loss="squared", penalty=aloocv.ElasticNet(1.0, 1.0))
    with pytest.raises(ValueError, match="offset="):
        aloocv.loo(X, Y, loss="squared", penalty=pen, offset=np.zeros(30))
    with pytest.raises(ValueError, match="coef="):
        aloocv.loo(X, Y, loss="squared", penalty=pen, coef=np.zeros(6))
    with pytest.raises(ValueError):
        aloocv.loo(X, Y[:, :, None], loss="squared", penalty=pen)
    with pytest.raises(ValueError, match="unknown method"):
        aloocv.loo(X, Y, loss="squared", penalty=pen, method="nope")
    with pytest.raises(ValueError, match="1-d y"):
        aloocv.ALORidgeCV(alpha_per_feature=True).fit(X, Y)
    with pytest.raises(ValueError, match="1-d y"):
        aloocv.ALORidgeCV(search="gradient").fit(X, Y)
    with pytest.raises(ValueError, match="alpha_per_target=True"):
        aloocv.ALORidgeCV(rule="1se").fit(X, Y)
    with pytest.raises(ValueError, match="singular"):
        aloocv.loo(X[:, :5].repeat(2, axis=1), Y, loss="squared", penalty=aloocv.L2(0.0))


def test_one_standard_error_rule_per_target():
    X, Y, _ = _data(n=80, seed=12)
    m = aloocv.ALORidgeCV(alphas=ALPHAS, alpha_per_target=True, rule="1se").fit(X, Y)
    T = Y.shape[1]
    mean = m.search_results_["loss"].reshape(-1, T)
    se = m.search_results_["loss_stderr"].reshape(-1, T)
    for t in range(Y.shape[1]):
        i = int(np.argmin(mean[:, t]))
        ok = mean[:, t] <= mean[i, t] + se[i, t]
        assert m.alpha_[t] == ALPHAS[ok].max()
    # the table is the loo() estimate at each alpha
    ref = aloocv.loo(X, Y, loss="squared", penalty=aloocv.L2(ALPHAS[4]))
    _close(mean[4], ref.mean)
    _close(se[4], ref.stderr, 1e-6)


@pytest.mark.parametrize("per_target", [True, False])
@pytest.mark.parametrize("scoring", [None, "r2", "neg_mean_absolute_error"])
def test_ridgecv_scoring_and_cv_results_parity(per_target, scoring):
    """scoring= and store_cv_results with several targets, as RidgeCV: each target scored
    on its own with alpha_per_target, all at once otherwise; cv_results_ (n, T, n_alphas)."""
    X, Y, w = _data(seed=13)
    kw = dict(alphas=ALPHAS, alpha_per_target=per_target, scoring=scoring, store_cv_results=True)
    ours = aloocv.ALORidgeCV(**kw).fit(X, Y, sample_weight=w)
    with threadpool_limits(1):
        ref = RidgeCV(**kw).fit(X, Y, sample_weight=w)
    _close(ours.alpha_, ref.alpha_)
    _close(ours.coef_, ref.coef_)
    _close(ours.best_score_, ref.best_score_)
    _close(ours.cv_results_, ref.cv_results_)


def test_plot_cv_refuses_several_targets():
    pytest.importorskip("matplotlib")
    X, Y, _ = _data(seed=14)
    m = aloocv.ALORidgeCV(alphas=ALPHAS).fit(X, Y)
    with pytest.raises(ValueError, match="several targets"):
        m.plot_cv()
