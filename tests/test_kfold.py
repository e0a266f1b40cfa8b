"""K-fold CV: the Woodbury/Newton-step approximation against brute-force refits."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import aloocv
from conftest import loss_value, make_data, ridge_solve, sklearn_glm


def brute_ridge_kfold(X, y, lam, folds, w=None, intercept=True):
    pred = np.empty(len(y))
    w = np.ones(len(y)) if w is None else w
    for k in np.unique(folds):
        S = folds == k
        b = ridge_solve(X[~S], y[~S], lam, w[~S], intercept)
        pred[S] = (b[0] + X[S] @ b[1:]) if intercept else X[S] @ b
    return pred


@pytest.mark.parametrize("lam", [1.5, np.linspace(0.1, 10, 6)], ids=["scalar", "vector"])
@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_squared_approx_kfold_is_exact(lam, intercept, weighted):
    X, y = make_data("squared", 90, 6, seed=120)
    w = np.random.default_rng(1).uniform(0.2, 3, 90) if weighted else None
    for method in ("alo", "exact"):
        res = aloocv.kfold(
            X,
            y,
            loss="squared",
            penalty=aloocv.L2(lam),
            n_folds=7,
            method=method,
            fit_intercept=intercept,
            sample_weight=w,
            tol=1e-12,
        )
        ref = brute_ridge_kfold(X, y, lam, res.folds, w, intercept)
        np.testing.assert_allclose(res.predictions, ref, rtol=1e-10, atol=1e-12)
        ww = np.ones(90) if w is None else w
        assert res.mean == pytest.approx(np.average(0.5 * (y - ref) ** 2, weights=ww), rel=1e-10)
    sizes = np.bincount(res.folds)
    assert sizes.max() - sizes.min() <= 1 and sizes.size == 7


def test_exact_logistic_kfold_matches_sklearn_refits():
    X, y = make_data("logistic", 160, 5, seed=121)
    res = aloocv.kfold(
        X, y, loss="logistic", penalty=aloocv.L2(0.7), n_folds=5, method="exact", tol=1e-11
    )
    ref = np.empty(160)
    for k in range(5):
        S = res.folds == k
        coef, b = sklearn_glm("logistic", X[~S], y[~S], 0.7)
        ref[S] = X[S] @ coef + b
    np.testing.assert_allclose(res.predictions, ref, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("loss", ["logistic", "poisson"])
def test_approx_close_to_exact(loss):
    X, y = make_data(loss, 400, 8, seed=122)  # n >= 10 p
    a = aloocv.kfold(X, y, loss=loss, penalty=aloocv.L2(1.0), n_folds=10)
    e = aloocv.kfold(X, y, loss=loss, penalty=aloocv.L2(1.0), n_folds=10, method="exact")
    np.testing.assert_array_equal(a.folds, e.folds)
    np.testing.assert_allclose(a.fold_means, e.fold_means, rtol=0.03)
    assert a.mean == pytest.approx(e.mean, rel=0.01)


def test_n_folds_equal_n_is_alo():
    X, y = make_data("logistic", 60, 4, seed=123)
    k = aloocv.kfold(X, y, loss="logistic", penalty=aloocv.L2(1.0), n_folds=60)
    l = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0))
    np.testing.assert_allclose(k.losses, l.losses, rtol=1e-10)


def test_user_folds_with_labels_and_uneven_sizes():
    X, y = make_data("squared", 50, 3, seed=124)
    labels = np.array(["a"] * 10 + ["b"] * 25 + ["c"] * 15)
    res = aloocv.kfold(X, y, loss="squared", penalty=aloocv.L2(1.0), folds=labels)
    assert list(res.fold_labels) == ["a", "b", "c"]
    ref = brute_ridge_kfold(X, y, 1.0, labels)
    np.testing.assert_allclose(res.predictions, ref, rtol=1e-10)
    means = [np.mean(loss_value("squared", y[labels == g], ref[labels == g])) for g in "abc"]
    np.testing.assert_allclose(res.fold_means, means, rtol=1e-10)
    assert res.stderr == pytest.approx(np.std(means, ddof=1) / np.sqrt(3), rel=1e-10)


def test_elastic_net_and_sparse():
    rng = np.random.default_rng(125)
    X = rng.standard_normal((200, 10))
    X[np.abs(X) < 0.7] = 0
    y = X[:, :3] @ np.array([2.0, -1.0, 1.0]) + rng.standard_normal(200)
    pen = aloocv.ElasticNet(10.0, 1.0)
    d = aloocv.kfold(X, y, loss="squared", penalty=pen, n_folds=5)
    s = aloocv.kfold(sp.csr_matrix(X), y, loss="squared", penalty=pen, n_folds=5)
    np.testing.assert_allclose(d.losses, s.losses, rtol=1e-9)
    e = aloocv.kfold(X, y, loss="squared", penalty=pen, n_folds=5, method="exact")
    assert d.mean == pytest.approx(e.mean, rel=0.05)


def test_threads_equal_serial():
    X, y = make_data("logistic", 3000, 10, seed=126)
    a = aloocv.kfold(X, y, loss="logistic", penalty=aloocv.L2(1.0), n_jobs=1)
    b = aloocv.kfold(X, y, loss="logistic", penalty=aloocv.L2(1.0), n_jobs=2)
    np.testing.assert_array_equal(a.losses, b.losses)


@pytest.mark.parametrize(
    ("kw", "exc", "match"),
    [
        ({"n_folds": 1}, ValueError, "n_folds must be >= 2"),
        ({"n_folds": 41}, ValueError, "larger than the number of samples"),
        ({"n_folds": 2.5}, TypeError, "n_folds must be an integer"),
        ({"folds": np.zeros(39)}, ValueError, "one label per sample"),
        ({"folds": np.zeros(40)}, ValueError, "at least 2 folds"),
        ({"folds": np.arange(40) % 3, "n_folds": 4}, ValueError, "empty fold"),
        ({"method": "lemma3"}, ValueError, "unknown method"),
    ],
)
def test_bad_input(kw, exc, match):
    X, y = make_data("logistic", 40, 3, seed=127)
    with pytest.raises(exc, match=match):
        aloocv.kfold(X, y, loss="logistic", **kw)


def test_singular_fold_is_reported():
    X = np.zeros((6, 2))
    X[:, 0] = np.arange(6.0)
    X[0, 1] = 1.0  # feature 1 seen by sample 0 only
    y = np.arange(6.0)
    with pytest.raises(ValueError, match="without fold"):
        aloocv.kfold(X, y, loss="squared", penalty=aloocv.L2(0.0), folds=[0, 0, 1, 1, 2, 2])
