"""K-fold / leave-q-out CV: the approximate (Woodbury / downdated Newton step) estimate
against brute-force refits and independent references."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.model_selection import KFold
from threadpoolctl import threadpool_limits

import aloocv
from aloocv import _blas, _core
from conftest import loss_value, make_data, ridge_solve, sklearn_glm


def brute_ridge_kfold(X, y, lam, folds, w=None, intercept=True):
    """Held-out predictions of closed-form weighted ridge refits, one per fold."""
    pred = np.empty(len(y))
    w = np.ones(len(y)) if w is None else w
    for k in np.unique(folds):
        S = folds == k
        b = ridge_solve(X[~S], y[~S], lam, w[~S], intercept)
        pred[S] = (b[0] + X[S] @ b[1:]) if intercept else X[S] @ b
    return pred


def newton_step_kfold(loss, X, y, lam, folds, coef, intercept, w=None):
    """One Newton step per fold from (intercept, coef) on the exact fold-out Hessian,
    written with numpy: the quantity the approximate K-fold computes."""
    n, p = X.shape
    w = np.ones(n) if w is None else w
    Xt = np.hstack([np.ones((n, 1)), X])
    beta = np.concatenate([[intercept], coef])
    eta = Xt @ beta
    if loss == "logistic":
        mu = 1.0 / (1.0 + np.exp(-eta))
        g, d = w * (mu - y), w * mu * (1 - mu)
    else:  # poisson
        g, d = w * (np.exp(eta) - y), w * np.exp(eta)
    P = np.diag(np.concatenate([[0.0], np.broadcast_to(lam, (p,))]))
    H = Xt.T @ (Xt * d[:, None]) + P
    pred = np.empty(n)
    for k in np.unique(folds):
        S = folds == k
        HS = H - Xt[S].T @ (Xt[S] * d[S, None])
        pred[S] = Xt[S] @ (beta + np.linalg.solve(HS, Xt[S].T @ g[S]))
    return pred


def glmnet_stderr(losses, folds, w=None):
    w = np.ones(len(losses)) if w is None else w
    labs = np.unique(folds)
    W = np.array([w[folds == k].sum() for k in labs])
    m = np.array([np.average(losses[folds == k], weights=w[folds == k]) for k in labs])
    mean = np.sum(W * m) / W.sum()
    return np.sqrt(np.sum(W * (m - mean) ** 2) / W.sum() / (len(labs) - 1))


# n = 90, p = 6 (+ intercept): 7 folds of ~13 take the p x p form, 45 folds of 2 the
# q x q Woodbury form; both are exact for ridge
@pytest.mark.parametrize("n_folds", [7, 45], ids=["p-space", "woodbury"])
@pytest.mark.parametrize("lam", [1.5, np.linspace(0.1, 10, 6)], ids=["scalar", "vector"])
@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.smoke
def test_squared_approx_kfold_is_exact(n_folds, lam, intercept, weighted):
    X, y = make_data("squared", 90, 6, seed=120)
    w = np.random.default_rng(1).uniform(0.2, 3, 90) if weighted else None
    for method in ("alo", "exact"):
        res = aloocv.kfold(
            X,
            y,
            loss="squared",
            penalty=aloocv.L2(lam),
            n_folds=n_folds,
            method=method,
            fit_intercept=intercept,
            sample_weight=w,
            tol=1e-12,
        )
        ref = brute_ridge_kfold(X, y, lam, res.folds, w, intercept)
        np.testing.assert_allclose(res.predictions, ref, rtol=1e-10, atol=1e-12)
        ww = np.ones(90) if w is None else w
        ref_loss = 0.5 * (y - ref) ** 2
        np.testing.assert_allclose(res.losses, ref_loss, rtol=1e-9, atol=1e-14)
        assert res.mean == pytest.approx(np.average(ref_loss, weights=ww), rel=1e-10)
        assert res.stderr == pytest.approx(glmnet_stderr(ref_loss, res.folds, w), rel=1e-8)
    sizes = np.bincount(res.folds)
    assert sizes.max() - sizes.min() <= 1 and sizes.size == n_folds


@pytest.mark.parametrize("loss", ["logistic", "poisson"])
def test_alo_is_the_downdated_newton_step_for_mixed_fold_sizes(loss):
    # folds of 1, 2, 3 (q x q form) and 40, 74 (p x p form) in one call
    X, y = make_data(loss, 120, 5, seed=128)
    w = np.random.default_rng(2).uniform(0.5, 2, 120)
    sizes = [1, 2, 3, 40, 74]
    folds = np.random.default_rng(3).permutation(np.repeat(np.arange(5), sizes))
    lam = np.array([0.5, 1.0, 2.0, 0.3, 1.0])
    res = aloocv.kfold(
        X, y, loss=loss, penalty=aloocv.L2(lam), folds=folds, sample_weight=w, tol=1e-12
    )
    ref = newton_step_kfold(loss, X, y, lam, folds, res.fit.coef_, res.fit.intercept_, w)
    np.testing.assert_allclose(res.predictions, ref, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(res.losses, loss_value(loss, y, ref), rtol=1e-9, atol=1e-11)
    # both forms were used
    with _blas.single_threaded_blas():
        out = _core.kfold(
            X,
            y,
            w,
            loss,
            lam,
            fit_intercept=True,
            folds=folds.astype(np.int32),
            n_folds=5,
            method="alo",
            tol=1e-12,
            max_iter=100,
            n_threads=1,
            l1=None,
        )
    assert out.n_woodbury == 3
    np.testing.assert_array_equal(out.predictions, res.predictions)


@pytest.mark.parametrize("loss", ["logistic", "poisson"])
def test_foldwise_end_is_the_downdated_newton_step_at_the_plain_fit(loss):
    # 4 folds of 60 (p x p form) that partition the samples: H at beta_hat is summed from
    # the folds' blocks, so the fit is a plain one (no end Hessian of its own); zero
    # weights, an offset and a vector penalty
    n, p = 240, 6
    X, y = make_data(loss, n, p, seed=132)
    rng = np.random.default_rng(6)
    w = rng.uniform(0.5, 2, n)
    w[:7] = 0.0
    off = 0.2 * rng.standard_normal(n)
    lam = np.array([0.5, 1.0, 2.0, 0.3, 1.0, 0.8])
    folds = rng.permutation(np.arange(n) % 4)
    kw = dict(loss=loss, penalty=aloocv.L2(lam), sample_weight=w, offset=off, tol=1e-9)
    sizes = np.bincount(folds).astype(np.int64)
    assert _core.kfold_foldwise_end(loss, p + 1, has_l1=False, sizes=sizes)
    # not for an L1 term, a constant curvature or folds in the q x q form
    assert not _core.kfold_foldwise_end(loss, p + 1, has_l1=True, sizes=sizes)
    assert not _core.kfold_foldwise_end("squared", p + 1, has_l1=False, sizes=sizes)
    assert not _core.kfold_foldwise_end(loss, p + 1, has_l1=False, sizes=np.r_[sizes, 3])
    res = aloocv.kfold(X, y, folds=folds, **kw)
    plain = aloocv.fit(X, y, **kw)
    np.testing.assert_array_equal(res.fit.coef_, plain.coef_)
    assert res.fit.hessian_passes_ == plain.hessian_passes_
    with threadpool_limits(1):  # numpy: one Newton step per fold at the fit's beta
        Xt = np.hstack([np.ones((n, 1)), X])
        beta = np.concatenate([[res.fit.intercept_], res.fit.coef_])
        eta = Xt @ beta + off
        if loss == "logistic":
            mu = 1.0 / (1.0 + np.exp(-eta))
            g, d = w * (mu - y), w * mu * (1 - mu)
        else:
            g, d = w * (np.exp(eta) - y), w * np.exp(eta)
        H = Xt.T @ (Xt * d[:, None]) + np.diag(np.r_[0.0, lam])
        ref = np.empty(n)
        for k in range(4):
            S = folds == k
            HS = H - Xt[S].T @ (Xt[S] * d[S, None])
            ref[S] = Xt[S] @ (beta + np.linalg.solve(HS, Xt[S].T @ g[S])) + off[S]
    np.testing.assert_allclose(res.predictions, ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(res.losses, loss_value(loss, y, ref), rtol=1e-10, atol=1e-12)
    sparse = aloocv.kfold(sp.csr_matrix(X), y, folds=folds, **kw)
    np.testing.assert_allclose(sparse.predictions, ref, rtol=1e-9, atol=1e-11)
    # the held-out sets of _core.holdout (a partition, in fold order): the same values
    sets = [np.flatnonzero(folds == k) for k in range(4)]
    ptr = np.r_[0, np.cumsum([len(S) for S in sets])].astype(np.int32)
    args = (X, y, w, loss, lam)
    opts = dict(method="alo", tol=1e-9, max_iter=100, n_threads=1, offset=off)
    with _blas.single_threaded_blas():
        out = _core.holdout(
            *args,
            fit_intercept=True,
            indices=np.concatenate(sets).astype(np.int32),
            indptr=ptr,
            **opts,
        )
    np.testing.assert_allclose(out.predictions, ref[np.concatenate(sets)], rtol=1e-10)
    assert out.hessian_passes == plain.hessian_passes_
    # overlapping sets (not a partition): the fit ends on its own Hessian at beta
    with _blas.single_threaded_blas():
        ov = _core.holdout(
            *args,
            fit_intercept=True,
            indices=np.r_[sets[0], sets[1], sets[1]].astype(np.int32),
            indptr=np.array([0, 60, 120, 180], np.int32),
            **opts,
        )
    np.testing.assert_allclose(ov.predictions[:120], ref[np.r_[sets[0], sets[1]]], rtol=1e-6)


@pytest.mark.parametrize("n_jobs", [1, 2])
@pytest.mark.smoke
def test_exact_logistic_kfold_matches_sklearn_refits(n_jobs):
    X, y = make_data("logistic", 160, 5, seed=121)
    res = aloocv.kfold(
        X,
        y,
        loss="logistic",
        penalty=aloocv.L2(0.7),
        n_folds=5,
        method="exact",
        tol=1e-11,
        n_jobs=n_jobs,
    )
    ref = np.empty(160)
    for k in range(5):
        S = res.folds == k
        coef, b = sklearn_glm("logistic", X[~S], y[~S], 0.7)
        ref[S] = X[S] @ coef + b
    np.testing.assert_allclose(res.predictions, ref, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(res.losses, loss_value("logistic", y, ref), rtol=1e-6)
    f = aloocv.fit(X, y, loss="logistic", penalty=aloocv.L2(0.7), tol=1e-11)
    np.testing.assert_allclose(res.fit.coef_, f.coef_, rtol=1e-8)


@pytest.mark.parametrize("loss", ["logistic", "poisson"])
def test_approx_close_to_exact(loss):
    X, y = make_data(loss, 400, 8, seed=122)  # n >= 10 p
    a = aloocv.kfold(X, y, loss=loss, penalty=aloocv.L2(1.0), n_folds=10)
    e = aloocv.kfold(X, y, loss=loss, penalty=aloocv.L2(1.0), n_folds=10, method="exact")
    np.testing.assert_array_equal(a.folds, e.folds)
    np.testing.assert_allclose(a.fold_means, e.fold_means, rtol=0.03)
    assert a.mean == pytest.approx(e.mean, rel=0.01)
    assert a.stderr == pytest.approx(e.stderr, rel=0.1)


@pytest.mark.parametrize("loss", ["squared", "logistic", "poisson"])
@pytest.mark.parametrize("weighted", [False, True])
def test_n_folds_equal_n_is_alo(loss, weighted):
    X, y = make_data(loss, 60, 4, seed=123)
    w = np.random.default_rng(4).uniform(0.5, 2, 60) if weighted else None
    pen = aloocv.L2(np.array([1.0, 0.5, 2.0, 1.0]))
    k = aloocv.kfold(X, y, loss=loss, penalty=pen, n_folds=60, sample_weight=w, tol=1e-12)
    l = aloocv.loo(X, y, loss=loss, penalty=pen, method="alo", sample_weight=w, tol=1e-12)
    np.testing.assert_allclose(k.predictions, l.predictions, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(k.losses, l.losses, rtol=1e-10, atol=1e-12)
    assert k.mean == pytest.approx(l.mean, rel=1e-10)
    np.testing.assert_array_equal(np.sort(k.folds), np.arange(60))


def test_user_folds_with_labels_and_uneven_sizes():
    X, y = make_data("squared", 50, 3, seed=124)
    labels = np.array(["b"] * 10 + ["a"] * 25 + ["c"] * 15)
    for method in ("alo", "exact"):
        res = aloocv.kfold(
            X, y, loss="squared", penalty=aloocv.L2(1.0), folds=labels, method=method, tol=1e-12
        )
        assert list(res.fold_labels) == ["a", "b", "c"]
        assert res.n_folds == 3 and set(res.timings) == {"fit", "folds"}
        np.testing.assert_array_equal(res.fold_labels[res.folds], labels)
        ref = brute_ridge_kfold(X, y, 1.0, labels)
        np.testing.assert_allclose(res.predictions, ref, rtol=1e-10)
        ref_loss = loss_value("squared", y, ref)
        means = [np.mean(ref_loss[labels == g]) for g in "abc"]
        np.testing.assert_allclose(res.fold_means, means, rtol=1e-10)
        # cv.glmnet: fold means weighted by fold sizes, spread over K - 1
        W = np.array([25, 10, 15])
        m = np.sum(W * means) / 50
        assert res.mean == pytest.approx(m, rel=1e-10)
        se = np.sqrt(np.sum(W * (np.asarray(means) - m) ** 2) / 50 / 2)
        assert res.stderr == pytest.approx(se, rel=1e-10)


def test_grouped_leave_q_out_with_integer_groups_and_n_folds_check():
    X, y = make_data("logistic", 90, 3, seed=129)
    groups = np.repeat([7, 3, 11, 5, 2, 8, 1, 9, 4, 6], 9)  # 10 groups of 3 x 3 samples
    a = aloocv.kfold(X, y, loss="logistic", folds=groups, n_folds=10)
    b = aloocv.kfold(X, y, loss="logistic", folds=groups)
    np.testing.assert_array_equal(a.losses, b.losses)
    assert a.n_folds == 10
    np.testing.assert_array_equal(a.fold_labels, np.arange(1, 12)[np.arange(1, 12) != 10])
    e = aloocv.kfold(X, y, loss="logistic", folds=groups, method="exact")
    np.testing.assert_allclose(a.fold_means, e.fold_means, rtol=0.05)


def test_shuffled_folds_are_sklearn_kfold_chunks_of_a_permutation():
    X, y = make_data("squared", 53, 2, seed=130)
    res = aloocv.kfold(X, y, loss="squared", n_folds=5, random_state=7)
    perm = np.random.default_rng(7).permutation(53)
    for k, (_, test) in enumerate(KFold(5).split(perm)):
        np.testing.assert_array_equal(np.flatnonzero(res.folds == k), np.sort(perm[test]))
    other = aloocv.kfold(X, y, loss="squared", n_folds=5, random_state=8)
    assert not np.array_equal(res.folds, other.folds)


def test_elastic_net_and_sparse():
    rng = np.random.default_rng(125)
    X = rng.standard_normal((200, 10))
    X[np.abs(X) < 0.7] = 0
    y = X[:, :3] @ np.array([2.0, -1.0, 1.0]) + rng.standard_normal(200)
    pen = aloocv.ElasticNet(10.0, 1.0)
    for n_folds in (5, 100):  # p x p and q x q forms on the active set
        d = aloocv.kfold(X, y, loss="squared", penalty=pen, n_folds=n_folds)
        s = aloocv.kfold(sp.csr_matrix(X), y, loss="squared", penalty=pen, n_folds=n_folds)
        np.testing.assert_allclose(d.losses, s.losses, rtol=1e-9)
        e = aloocv.kfold(X, y, loss="squared", penalty=pen, n_folds=n_folds, method="exact")
        assert d.mean == pytest.approx(e.mean, rel=0.05)
    # L2 only: sparse equals dense
    yp = rng.poisson(np.exp(0.3 * X[:, 0])).astype(float)
    d = aloocv.kfold(X, yp, loss="poisson", penalty=aloocv.L2(2.0), n_folds=40)
    s = aloocv.kfold(sp.csr_matrix(X), yp, loss="poisson", penalty=aloocv.L2(2.0), n_folds=40)
    np.testing.assert_allclose(d.losses, s.losses, rtol=1e-10)


@pytest.mark.parametrize(
    ("method", "n_folds"), [("alo", 10), ("alo", 400), ("exact", 10), ("exact", 3)]
)
@pytest.mark.smoke
def test_threads_equal_serial(method, n_folds):
    X, y = make_data("logistic", 1200, 8, seed=126)
    kw = dict(loss="logistic", penalty=aloocv.L2(1.0), n_folds=n_folds, method=method)
    a = aloocv.kfold(X, y, n_jobs=1, **kw)
    b = aloocv.kfold(X, y, n_jobs=2, **kw)
    np.testing.assert_array_equal(a.losses, b.losses)
    np.testing.assert_array_equal(a.predictions, b.predictions)


@pytest.mark.parametrize(
    ("kw", "exc", "match"),
    [
        ({"n_folds": 1}, ValueError, "n_folds must be >= 2"),
        ({"n_folds": 41}, ValueError, "larger than the number of samples"),
        ({"n_folds": 2.5}, TypeError, "n_folds must be an integer"),
        ({"n_folds": True}, TypeError, "n_folds must be an integer"),
        ({"folds": np.zeros(39)}, ValueError, "one label per sample"),
        ({"folds": np.zeros((40, 2))}, ValueError, "one label per sample"),
        ({"folds": np.zeros(40)}, ValueError, "at least 2 folds"),
        ({"folds": np.r_[np.nan, np.arange(39) % 2]}, ValueError, "NaN"),
        ({"folds": np.arange(40) % 3, "n_folds": 4}, ValueError, "empty"),
        ({"folds": np.arange(40) % 3, "n_folds": 1.0}, TypeError, "n_folds must be an integer"),
        ({"folds": np.array([1] * 20 + ["a"] * 20, dtype=object)}, TypeError, "comparable"),
        ({"method": "lemma3"}, ValueError, "unknown method"),
        ({"method": None}, ValueError, "unknown method"),
        (
            {"sample_weight": np.r_[np.zeros(20), np.ones(20)], "folds": np.arange(40) // 20},
            ValueError,
            "fold 0 has zero total sample weight",
        ),
        ({"loss": "hinge"}, ValueError, "unknown loss"),
        ({"tol": -1.0}, ValueError, "tol must be"),
        ({"n_jobs": 0}, ValueError, "n_jobs"),
    ],
)
def test_bad_input(kw, exc, match):
    X, y = make_data("logistic", 40, 3, seed=127)
    kw = {"loss": "logistic", **kw}
    with pytest.raises(exc, match=match):
        aloocv.kfold(X, y, **kw)


def test_singular_fold_is_reported():
    # p x p form: feature 1 seen by sample 0 only, unpenalized
    X = np.zeros((6, 2))
    X[:, 0] = np.arange(6.0)
    X[0, 1] = 1.0
    y = np.arange(6.0)
    with pytest.raises(ValueError, match="without fold 'u'"):
        aloocv.kfold(X, y, loss="squared", penalty=aloocv.L2(0.0), folds=list("uuvvww"))
    # q x q form (folds of one sample out of p1 = 7): the same situation for sample 3
    X, y = make_data("logistic", 30, 6, seed=131)
    X[:, 5] = 0.0
    X[3, 5] = 1.0
    pen = aloocv.L2(np.array([1.0, 1, 1, 1, 1, 0]))
    with pytest.raises(ValueError, match=r"without fold \d+ \(1 sample\).*not positive definite"):
        aloocv.kfold(X, y, loss="squared", penalty=pen, n_folds=30)  # shuffled LOO
    with pytest.raises(ValueError, match="without fold 13 .*not positive definite"):
        aloocv.kfold(X, y, loss="squared", penalty=pen, folds=np.arange(30) + 10)


# ----------------------------------------------------------------------------- rtol=
# The refinement of approximate K-fold against exact K-fold (one refit per fold, tested
# against scikit-learn refits above) on real data.
def _breast_cancer():
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), y.astype(float)


@pytest.mark.parametrize("n_folds", [10, 50])
@pytest.mark.parametrize("lam", [1.0, 0.01])
def test_rtol_kfold_is_within_budget_of_exact_kfold(n_folds, lam):
    X, y = _breast_cancer()
    kw = dict(loss="logistic", penalty=aloocv.L2(lam), n_folds=n_folds)
    a = aloocv.kfold(X, y, **kw)
    r = aloocv.kfold(X, y, rtol=0.01, **kw)
    e = aloocv.kfold(X, y, method="exact", **kw)
    ref = r.refinement
    assert ref.plain_mean == a.mean and ref.met and ref.rtol == 0.01
    assert abs(r.mean - e.mean) <= 0.01 * e.mean
    if lam == 0.01:  # plain approximate K-fold is far off here
        assert abs(a.mean - e.mean) > 0.1 * e.mean
    # the refitted folds are exact K-fold's; the others stay approximate
    done = np.isin(r.folds, ref.refitted)
    assert done.any() and ref.all_refitted == done.all()
    np.testing.assert_allclose(r.losses[done], e.losses[done], rtol=1e-6)
    np.testing.assert_allclose(r.predictions[done], e.predictions[done], rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(r.losses[~done], a.losses[~done])
    # means and standard error recomputed from the refined losses
    np.testing.assert_allclose(r.fold_means, np.bincount(r.folds, r.losses) / np.bincount(r.folds))
    assert r.mean == pytest.approx(np.mean(r.losses))
    assert r.stderr == pytest.approx(glmnet_stderr(r.losses, r.folds))
    # the folds are refitted in the order of their indicator
    np.testing.assert_array_equal(
        ref.refitted, np.argsort(-ref.indicator, kind="stable")[: ref.refitted.size]
    )
    assert "refits" in r.timings


def test_rtol_kfold_ranks_the_folds_that_carry_the_error():
    X, y = _breast_cancer()
    kw = dict(loss="logistic", penalty=aloocv.L2(0.01), n_folds=50)
    r = aloocv.kfold(X, y, rtol=0.01, **kw)
    a = aloocv.kfold(X, y, **kw)
    e = aloocv.kfold(X, y, method="exact", **kw)
    err = np.abs(a.fold_means - e.fold_means)
    refitted = r.refinement.refitted
    # the refitted folds carry most of the error; the rest's error is within the estimate
    assert err[refitted].sum() >= 0.9 * err.sum()
    rest = np.setdiff1d(np.arange(50), refitted)
    assert err[rest].sum() / 50 <= r.refinement.error * (1 + 1e-9)


def test_rtol_kfold_multinomial_and_splits():
    from sklearn.datasets import load_wine
    from sklearn.model_selection import TimeSeriesSplit
    from sklearn.preprocessing import StandardScaler

    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    kw = dict(loss="multinomial", penalty=aloocv.L2(0.01), n_folds=20)
    a = aloocv.kfold(X, y, **kw)
    r = aloocv.kfold(X, y, rtol=0.01, **kw)
    e = aloocv.kfold(X, y, method="exact", **kw)
    assert abs(a.mean - e.mean) > 0.05 * e.mean
    assert abs(r.mean - e.mean) <= 0.01 * e.mean and r.refinement.met
    done = np.isin(r.folds, r.refinement.refitted)
    np.testing.assert_allclose(r.predictions[done], e.predictions[done], rtol=1e-5, atol=1e-6)
    # splits that do not partition the samples (a training set leaves samples out)
    Xb, yb = _breast_cancer()
    kw = dict(loss="logistic", penalty=aloocv.L2(0.01), cv=TimeSeriesSplit(5))
    a = aloocv.kfold(Xb, yb, **kw)
    r = aloocv.kfold(Xb, yb, rtol=0.01, **kw)
    e = aloocv.kfold(Xb, yb, method="exact", **kw)
    assert not r.partition
    assert abs(r.mean - e.mean) <= 0.01 * e.mean
    for k in r.refinement.refitted:
        np.testing.assert_allclose(r.split_losses[k], e.split_losses[k], rtol=1e-6)


def test_rtol_kfold_few_folds_may_refit_every_fold_and_exact_cases():
    X, y = _breast_cancer()
    r = aloocv.kfold(X, y, loss="logistic", penalty=aloocv.L2(1e-3), n_folds=3, rtol=0.001)
    e = aloocv.kfold(X, y, loss="logistic", penalty=aloocv.L2(1e-3), n_folds=3, method="exact")
    assert r.refinement.all_refitted and "every fold" in str(r.refinement)
    np.testing.assert_allclose(r.losses, e.losses, rtol=1e-6)
    assert r.refinement.error == 0.0
    # where the approximation is exact nothing is refitted; exact K-fold needs no budget
    Xs, ys = make_data("squared", 100, 4, seed=132)
    s = aloocv.kfold(Xs, ys, loss="squared", penalty=aloocv.L2(1.0), n_folds=5, rtol=0.01)
    assert s.refinement is None
    x = aloocv.kfold(X, y, penalty=aloocv.L2(1.0), n_folds=5, method="exact", rtol=0.01)
    assert x.refinement is None
    with pytest.raises(ValueError, match="rtol must be in"):
        aloocv.kfold(X, y, penalty=aloocv.L2(1.0), rtol=0.0)
    da = pytest.importorskip("dask.array")
    with pytest.raises(ValueError, match="refits folds in memory"):
        aloocv.kfold(da.from_array(X, chunks=200), y, penalty=aloocv.L2(1.0), rtol=0.01)
