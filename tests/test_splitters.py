"""kfold(cv=, groups=), approximate leave-one-group-out and nested_cv with splitters,
groups and every estimator, against brute-force refits with scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import ElasticNet, LogisticRegression, PoissonRegressor, Ridge
from sklearn.model_selection import (
    GroupKFold,
    KFold,
    LeaveOneGroupOut,
    ShuffleSplit,
    StratifiedKFold,
    TimeSeriesSplit,
)
from threadpoolctl import threadpool_limits

import aloocv
from conftest import make_data


def _ridge_refit(X, y, lam, tr, te):
    """Held-out predictions of a ridge refitted on tr (aloocv's L2(lam): lam/2 ||b||^2
    added to sum (y - eta)^2 / 2, i.e. Ridge(alpha=lam))."""
    with threadpool_limits(1):
        return Ridge(alpha=lam).fit(X[tr], y[tr]).predict(X[te])


def _logistic_refit(X, y, lam, tr, te):
    with threadpool_limits(1):
        m = LogisticRegression(C=1.0 / lam, tol=1e-12, max_iter=1000, solver="newton-cholesky")
        return m.fit(X[tr], y[tr]).decision_function(X[te])


def test_cv_partition_equals_folds():
    X, y = make_data("logistic", 150, 5, seed=300)
    pen = aloocv.L2(2.0)
    cv = StratifiedKFold(5)
    labels = np.empty(150, int)
    for k, (_, te) in enumerate(cv.split(X, y)):
        labels[te] = k
    a = aloocv.kfold(X, y, penalty=pen, cv=cv)
    b = aloocv.kfold(X, y, penalty=pen, folds=labels)
    assert a.partition
    np.testing.assert_array_equal(a.losses, b.losses)
    np.testing.assert_array_equal(a.fold_means, b.fold_means)
    # an int is StratifiedKFold for class labels, as check_cv(classifier=True)
    c = aloocv.kfold(X, y, penalty=pen, cv=5)
    np.testing.assert_array_equal(c.losses, a.losses)
    # and KFold for squared loss
    Xs, ys = make_data("squared", 60, 3, seed=301)
    d = aloocv.kfold(Xs, ys, loss="squared", penalty=aloocv.L2(1.0), cv=4)
    for k, (tr, te) in enumerate(KFold(4).split(Xs)):
        np.testing.assert_array_equal(d.test_indices[k], te)
        np.testing.assert_allclose(
            d.split_predictions[k], _ridge_refit(Xs, ys, 1.0, tr, te), rtol=1e-9, atol=1e-9
        )


@pytest.mark.parametrize("splitter", [TimeSeriesSplit(4), ShuffleSplit(6, random_state=1)])
def test_non_partition_squared_is_exact(splitter):
    """Squared loss + L2: the one-step downdate of each training set's complement is the
    refit on the training set, whatever the splits."""
    X, y = make_data("squared", 120, 6, seed=302)
    lam = 3.0
    res = aloocv.kfold(X, y, loss="squared", penalty=aloocv.L2(lam), cv=splitter)
    assert not res.partition
    splits = list(splitter.split(X))
    assert res.n_folds == len(splits)
    sums, counts = np.zeros(120), np.zeros(120)
    for k, (tr, te) in enumerate(splits):
        ref = _ridge_refit(X, y, lam, tr, te)
        np.testing.assert_array_equal(res.test_indices[k], te)
        np.testing.assert_allclose(res.split_predictions[k], ref, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(res.fold_means[k], np.mean(0.5 * (y[te] - ref) ** 2), rtol=1e-9)
        np.add.at(sums, te, ref)
        np.add.at(counts, te, 1)
    tested = counts > 0
    np.testing.assert_allclose(res.predictions[tested], sums[tested] / counts[tested], rtol=1e-9)
    assert np.all(np.isnan(res.predictions[~tested])) and np.all(res.folds[~tested] == -1)
    sizes = np.array([len(te) for _, te in splits])
    assert res.mean == pytest.approx(np.dot(sizes, res.fold_means) / sizes.sum(), rel=1e-12)


def test_non_partition_weighted():
    X, y = make_data("squared", 90, 4, seed=308)
    w = np.random.default_rng(308).uniform(0.2, 3.0, 90)
    cv = TimeSeriesSplit(3)
    res = aloocv.kfold(X, y, loss="squared", penalty=aloocv.L2(2.0), cv=cv, sample_weight=w)
    num = den = 0.0
    for k, (tr, te) in enumerate(cv.split(X)):
        with threadpool_limits(1):
            ref = Ridge(alpha=2.0).fit(X[tr], y[tr], sample_weight=w[tr]).predict(X[te])
        np.testing.assert_allclose(res.split_predictions[k], ref, rtol=1e-9, atol=1e-9)
        m = np.average(0.5 * (y[te] - ref) ** 2, weights=w[te])
        assert res.fold_means[k] == pytest.approx(m, rel=1e-9)
        num, den = num + m * w[te].sum(), den + w[te].sum()
    assert res.mean == pytest.approx(num / den, rel=1e-9)


def test_single_holdout_split():
    X, y = make_data("squared", 50, 3, seed=315)
    tr, te = np.arange(35), np.arange(35, 50)
    res = aloocv.kfold(X, y, loss="squared", penalty=aloocv.L2(1.0), cv=[(tr, te)])
    ref = _ridge_refit(X, y, 1.0, tr, te)
    assert res.mean == pytest.approx(np.mean(0.5 * (y[te] - ref) ** 2), rel=1e-9)
    assert res.stderr is None and res.n_folds == 1  # no spread to measure: None, not NaN


def test_multinomial_cv_int_is_stratified():
    rng = np.random.default_rng(309)
    X = rng.standard_normal((120, 3))
    y = np.argmax(X + rng.standard_normal((120, 3)), axis=1)
    labels = np.empty(120, int)
    for k, (_, te) in enumerate(StratifiedKFold(4).split(X, y)):
        labels[te] = k
    a = aloocv.kfold(X, y, loss="multinomial", penalty=aloocv.L2(1.0), cv=4)
    b = aloocv.kfold(X, y, loss="multinomial", penalty=aloocv.L2(1.0), folds=labels)
    assert a.partition
    np.testing.assert_array_equal(a.losses, b.losses)


def test_non_partition_logistic_exact_and_alo():
    X, y = make_data("logistic", 200, 5, seed=303)
    lam = 5.0
    cv = TimeSeriesSplit(3)
    ex = aloocv.kfold(X, y, penalty=aloocv.L2(lam), cv=cv, method="exact", tol=1e-12)
    al = aloocv.kfold(X, y, penalty=aloocv.L2(lam), cv=cv)
    full = aloocv.fit(X, y, penalty=aloocv.L2(lam))
    for k, (tr, te) in enumerate(cv.split(X)):
        ref = _logistic_refit(X, y, lam, tr, te)
        np.testing.assert_allclose(ex.split_predictions[k], ref, rtol=1e-6, atol=1e-7)
        # one Newton step from the full fit: not exact, far closer to the refit than the
        # full fit is (measured 5-9x), and weakest for the smallest training set (50 of 200)
        err = np.linalg.norm(al.split_predictions[k] - ref) / np.linalg.norm(ref)
        err_full = np.linalg.norm(full.decision_function(X[te]) - ref) / np.linalg.norm(ref)
        assert err < 0.25 * err_full and err < 0.15
    assert al.mean == pytest.approx(ex.mean, rel=0.03)


def test_multinomial_splits_exact():
    rng = np.random.default_rng(304)
    X = rng.standard_normal((150, 4))
    y = np.argmax(X[:, :3] + 0.8 * rng.standard_normal((150, 3)), axis=1)
    lam = 2.0
    cv = TimeSeriesSplit(3)
    res = aloocv.kfold(
        X, y, loss="multinomial", penalty=aloocv.L2(lam), cv=cv, method="exact", tol=1e-12
    )
    assert not res.partition
    for k, (tr, te) in enumerate(cv.split(X)):
        with threadpool_limits(1):
            m = LogisticRegression(C=1 / lam, tol=1e-12, max_iter=2000).fit(X[tr], y[tr])
        ref = m.predict_log_proba(X[te])[np.arange(te.size), y[te]]
        np.testing.assert_allclose(res.split_losses[k], -ref, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_leave_one_group_out(loss):
    """Blocked leave-one-out (time series cut into blocks of 10): exact refits leaving
    each group out, and the ALO approximation close to them at a moderate lambda."""
    X, y = make_data(loss, 240, 6, seed=305)
    groups = np.arange(240) // 10
    lam = 2.0
    alo = aloocv.kfold(
        X, y, loss=loss, penalty=aloocv.L2(lam), cv=LeaveOneGroupOut(), groups=groups
    )
    same = aloocv.kfold(X, y, loss=loss, penalty=aloocv.L2(lam), folds=groups)
    np.testing.assert_array_equal(alo.losses, same.losses)
    ex = aloocv.kfold(
        X,
        y,
        loss=loss,
        penalty=aloocv.L2(lam),
        cv=LeaveOneGroupOut(),
        groups=groups,
        method="exact",
        tol=1e-12,
    )
    refit = _ridge_refit if loss == "squared" else _logistic_refit
    ref = np.empty(240)
    for tr, te in LeaveOneGroupOut().split(X, y, groups):
        ref[te] = refit(X, y, lam, tr, te)
    np.testing.assert_allclose(ex.predictions, ref, rtol=1e-6, atol=1e-7)
    if loss == "squared":
        np.testing.assert_allclose(alo.predictions, ref, rtol=1e-9, atol=1e-9)
    else:
        assert np.max(np.abs(alo.predictions - ref)) < 2e-2
        assert alo.mean == pytest.approx(ex.mean, rel=2e-3)


@pytest.mark.parametrize(
    ("kw", "exc", "match"),
    [
        ({"cv": 5, "n_folds": 5}, ValueError, "not both"),
        ({"groups": np.arange(40) // 4}, ValueError, "groups= goes with cv="),
        ({"cv": GroupKFold(3)}, ValueError, "groups"),
        ({"cv": LeaveOneGroupOut(), "groups": np.zeros(39)}, ValueError, "groups has 39"),
        ({"cv": 1}, ValueError, "cv must be >= 2"),
        ({"cv": True}, TypeError, "cv must be"),
        ({"cv": [(np.arange(20), np.arange(10, 40))]}, ValueError, "overlap"),
        ({"cv": [(np.arange(20), np.array([], int))]}, ValueError, "empty test"),
        ({"cv": [(np.arange(20), np.array([30, 30]))]}, ValueError, "repeats"),
        ({"cv": [(np.arange(20), np.array([50]))]}, ValueError, "out of range"),
        ({"cv": [(np.arange(20), np.array([0.5]))]}, TypeError, "integer indices"),
        ({"cv": [np.arange(3)]}, TypeError, "pair"),
    ],
)
def test_cv_bad_input(kw, exc, match):
    X, y = make_data("squared", 40, 3, seed=306)
    with pytest.raises(exc, match=match):
        aloocv.kfold(X, y, loss="squared", penalty=aloocv.L2(1.0), **kw)


def test_split_one_class_training_set():
    X, y = make_data("logistic", 40, 3, seed=307)
    y = np.r_[np.zeros(20), y[20:]]
    y[-1], y[-2] = 0.0, 1.0
    with pytest.raises(ValueError, match="training set of split 0 has only one class"):
        aloocv.kfold(X, y, cv=[(np.arange(10), np.arange(10, 20))])


# ---------------------------------------------------------------- nested_cv


def test_nested_stratified_and_logistic_estimator():
    X, y = make_data("logistic", 160, 4, seed=310)
    est = aloocv.ALOLogisticRegressionCV(Cs=[0.01, 0.1, 1.0, 10.0])
    outer = StratifiedKFold(4, shuffle=True, random_state=0)
    res = aloocv.nested_cv(est, X, y, outer_folds=outer)
    assert res.fold_errors.shape == (4,) and len(res.estimators) == 4
    for k, (tr, te) in enumerate(outer.split(X, y)):
        m = clone(est).fit(X[tr], y[tr])
        C = float(np.atleast_1d(m.C_)[0])
        eta = _logistic_refit(X, y, 1.0 / C, tr, te)
        ref = np.mean(np.logaddexp(0, eta) - y[te] * eta)
        assert res.fold_errors[k] == pytest.approx(ref, rel=1e-6)


def test_nested_group_kfold_elastic_net():
    X, y = make_data("squared", 150, 6, seed=311)
    groups = np.repeat(np.arange(15), 10)
    est = aloocv.ALOElasticNetCV(l1_ratio=0.5, alphas=8, tol=1e-12)
    outer = GroupKFold(3)
    res = aloocv.nested_cv(est, X, y, outer_folds=outer, groups=groups)
    for k, (tr, te) in enumerate(outer.split(X, y, groups)):
        assert np.intersect1d(groups[tr], groups[te]).size == 0
        a = res.estimators[k].alpha_
        with threadpool_limits(1):
            m = ElasticNet(alpha=a, l1_ratio=0.5, tol=1e-12, max_iter=100000).fit(X[tr], y[tr])
        ref = np.mean(0.5 * (y[te] - m.predict(X[te])) ** 2)
        assert res.fold_errors[k] == pytest.approx(ref, rel=1e-5)


def test_nested_poisson_and_multiclass():
    X, y = make_data("poisson", 120, 3, seed=312)
    est = aloocv.ALOPoissonRegressorCV(alphas=[1e-3, 1e-2, 1e-1])
    res = aloocv.nested_cv(est, X, y, outer_folds=KFold(3))
    for k, (tr, te) in enumerate(KFold(3).split(X)):
        a = res.estimators[k].alpha_
        with threadpool_limits(1):
            m = PoissonRegressor(alpha=a, tol=1e-12, max_iter=1000).fit(X[tr], y[tr])
        lossv = aloocv.losses.get_loss("poisson").value(y[te], np.log(m.predict(X[te])))
        assert res.fold_errors[k] == pytest.approx(np.mean(lossv), rel=1e-5)
    rng = np.random.default_rng(313)
    Xc = rng.standard_normal((150, 3))
    yc = np.argmax(Xc + rng.standard_normal((150, 3)), axis=1)
    cl = aloocv.ALOLogisticRegressionCV(Cs=[0.1, 1.0])
    r = aloocv.nested_cv(cl, Xc, yc, outer_folds=StratifiedKFold(3))
    for k, (_, te) in enumerate(StratifiedKFold(3).split(Xc, yc)):
        p = r.estimators[k].predict_proba(Xc[te])[np.arange(te.size), yc[te]]
        assert r.fold_errors[k] == pytest.approx(np.mean(-np.log(p)), rel=1e-12)


def test_nested_bad_input():
    X, y = make_data("squared", 60, 3, seed=314)
    with pytest.raises(ValueError, match="builds its candidate grid"):
        aloocv.nested_cv(aloocv.ALOElasticNetCV(), X, y, inner=3)
    with pytest.raises(ValueError, match="groups= goes with a group splitter"):
        aloocv.nested_cv(aloocv.ALORidgeCV(), X, y, groups=np.arange(60) % 3)


def test_repeated_training_indices_are_refused():
    """A bootstrap-style split repeats training samples: refused (a set would silently
    drop the repeats), with the remedy named."""
    X, y = make_data("squared", 60, 4, seed=3)
    rng = np.random.default_rng(0)
    train = rng.choice(40, size=40, replace=True)
    splits = [(train, np.arange(40, 60))]
    with pytest.raises(ValueError, match="repeats samples"):
        aloocv.kfold(X, y, loss="squared", penalty=aloocv.L2(1.0), cv=splits)
