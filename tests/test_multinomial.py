"""Multinomial logistic regression: fit, leave-one-out (ALO, IF, Lemma 3, exact),
hypergradient, weights, sparse input and validation, each against an independent
reference computed here (scikit-learn refits or numpy Newton algebra)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_iris, load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

import aloocv

TIGHT = dict(tol=1e-12, max_iter=100000)


def _std(X):
    return (X - X.mean(0)) / X.std(0)


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return _std(X), y


@pytest.fixture(scope="module")
def small():
    """60 iris samples (20 per class), 4 features: small enough for brute-force refits."""
    X, y = load_iris(return_X_y=True)
    idx = np.concatenate([np.arange(k * 50, k * 50 + 20) for k in range(3)])
    return _std(X[idx]), y[idx]


def _sk(X, y, lam, w=None, intercept=True):
    m = LogisticRegression(C=1.0 / lam, fit_intercept=intercept, solver="newton-cholesky", **TIGHT)
    return m.fit(X, y, sample_weight=w)


def _softmax(e):
    z = np.exp(e - e.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def _ce(e, y):
    e = np.atleast_2d(e)
    m = e.max(axis=1)
    return m + np.log(np.exp(e - m[:, None]).sum(axis=1)) - e[np.arange(e.shape[0]), y]


@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("data", ["iris", "wine"])
def test_fit_matches_sklearn(data, intercept):
    X, y = (load_iris if data == "iris" else load_wine)(return_X_y=True)
    X = _std(X)
    for lam in (0.1, 1.0, 10.0):
        f = aloocv.fit(
            X, y, loss="multinomial", penalty=aloocv.L2(lam), fit_intercept=intercept, tol=1e-12
        )
        sk = _sk(X, y, lam, intercept=intercept)
        assert f.converged_ and f.coef_.shape == sk.coef_.shape
        np.testing.assert_allclose(f.coef_, sk.coef_, atol=1e-6)
        if intercept:
            # the gauge: aloocv centers the intercepts (sum zero)
            assert abs(f.intercept_.sum()) < 1e-10
            np.testing.assert_allclose(
                f.intercept_, sk.intercept_ - sk.intercept_.mean(), atol=1e-6
            )
        np.testing.assert_allclose(f.predict_proba(X), sk.predict_proba(X), atol=1e-7)


def _newton_loo_step(X, y, lam, coef, icpt, i, out=None):
    """Independent numpy reference of ALO for sample i: one exact Newton step from the
    full fit on the leave-i-out objective (the Woodbury form is exactly this step)."""
    n, p = X.shape
    K = coef.shape[0]
    Xt = np.hstack([np.ones((n, 1)), X])
    B = np.column_stack([icpt, coef])  # (K, p1)
    mu = _softmax(Xt @ B.T)
    Y = np.eye(K)[y.astype(int)]
    keep = np.arange(n) != i if out is None else ~out
    G = (mu - Y)[keep]
    grad = (G.T @ Xt[keep]).ravel() + lam * np.concatenate(
        [np.column_stack([np.zeros(K), coef]).ravel()]
    )
    p1 = p + 1
    H = np.zeros((K * p1, K * p1))
    for a in range(K):
        for b in range(K):
            v = mu[keep, a] * ((a == b) - mu[keep, b])
            H[a * p1 : (a + 1) * p1, b * p1 : (b + 1) * p1] = Xt[keep].T @ (Xt[keep] * v[:, None])
    H += lam * np.diag(np.tile(np.r_[0.0, np.ones(p)], K))
    step = -np.linalg.pinv(H) @ grad  # the gauge direction has no curvature: pseudo-inverse
    Bn = (B.ravel() + step).reshape(K, p1)
    return Bn @ Xt[i] if out is None else Xt[out] @ Bn.T


def test_alo_if_lemma3_against_numpy_newton_step(small):
    X, y = small
    lam = 1.0
    alo = aloocv.loo(X, y, loss="multinomial", penalty=aloocv.L2(lam), tol=1e-12)
    f = alo.fit
    assert alo.predictions.shape == (60, 3) and alo.leverages.shape == (60, 3, 3)
    for i in (0, 7, 25, 59):
        ref = _newton_loo_step(X, y, lam, f.coef_, f.intercept_, i)
        # scores are defined up to a constant per sample: compare centered
        np.testing.assert_allclose(
            alo.predictions[i] - alo.predictions[i].mean(), ref - ref.mean(), atol=1e-8
        )
        np.testing.assert_allclose(alo.losses[i], _ce(ref, y[i : i + 1].astype(int))[0], rtol=1e-8)
    # IF and Lemma 3 from the same blocks, recomputed in numpy
    eta = f.decision_function(X)
    mu = _softmax(eta)
    G = mu - np.eye(3)[y.astype(int)]
    Kb = alo.leverages
    iff = aloocv.loo(X, y, loss="multinomial", penalty=aloocv.L2(lam), method="if", tol=1e-12)
    np.testing.assert_allclose(iff.predictions, eta + np.einsum("nab,nb->na", Kb, G), atol=1e-9)
    l3 = aloocv.loo(X, y, loss="multinomial", penalty=aloocv.L2(lam), method="lemma3", tol=1e-12)
    ref3 = _ce(eta, y.astype(int)) + np.einsum("na,na->n", G, alo.predictions - eta)
    np.testing.assert_allclose(l3.losses, ref3, rtol=1e-9)
    # the K_i blocks: x~_i^T (H^{-1})_ab x~_i with the gauge-fixed Hessian is symmetric
    np.testing.assert_allclose(Kb, np.swapaxes(Kb, 1, 2), atol=1e-12)


def test_exact_loo_matches_sklearn_refits(small):
    X, y = small
    lam = 0.5
    ex = aloocv.loo(X, y, loss="multinomial", penalty=aloocv.L2(lam), method="exact", tol=1e-10)
    ref = np.empty(60)
    for i in range(60):
        keep = np.arange(60) != i
        sk = _sk(X[keep], y[keep], lam)
        ref[i] = -sk.predict_log_proba(X[i : i + 1])[0, int(y[i])]
    np.testing.assert_allclose(ex.losses, ref, rtol=1e-5, atol=1e-7)
    alo = aloocv.loo(X, y, loss="multinomial", penalty=aloocv.L2(lam))
    assert abs(alo.mean / ex.mean - 1) < 0.02
    # IF and Lemma 3 are cruder but in the neighbourhood
    for m in ("if", "lemma3"):
        r = aloocv.loo(X, y, loss="multinomial", penalty=aloocv.L2(lam), method=m)
        assert abs(r.mean / ex.mean - 1) < 0.1


def test_certify_against_sklearn_refits(small):
    """certify() on a multinomial result: its exact refits are scikit-learn's refits, and
    with every sample certified its error of the mean is the exact one."""
    X, y = small
    lam = 0.5
    res = aloocv.loo(X, y, loss="multinomial", penalty=aloocv.L2(lam), tol=1e-10)
    cert = res.certify(n_samples=8, random_state=3)
    # a census of 8 // 5 = 1 to 4 (the take-all rule, at most half of the refits)
    assert 1 <= cert.n_worst <= 4 and np.unique(cert.indices).size == cert.indices.size
    ref = np.empty(cert.indices.size)
    with threadpool_limits(1):
        for k, i in enumerate(cert.indices):
            keep = np.arange(60) != i
            sk = _sk(X[keep], y[keep], lam)
            ref[k] = -sk.predict_log_proba(X[i : i + 1])[0, int(y[i])]
    np.testing.assert_allclose(cert.exact_losses, ref, rtol=1e-5, atol=1e-7)
    # the census holds the largest loss changes |ce(eta~) - ce(eta)|
    change = np.abs(res.losses - _ce(res.fit.decision_function(X), y))
    assert cert.indices[0] == np.argmax(change)
    full = res.certify(n_samples=100)
    assert sorted(full.indices.tolist()) == list(range(60)) and full.n_draws == 0
    ex = aloocv.loo(X, y, loss="multinomial", penalty=aloocv.L2(lam), method="exact", tol=1e-10)
    assert full.mean_error == pytest.approx(res.mean - ex.mean, rel=1e-6, abs=1e-12)
    with pytest.raises(ValueError, match="exact"):
        ex.certify()


@pytest.mark.parametrize("data", ["iris", "wine"])
def test_alo_within_2_percent_of_exact(data):
    X, y = (load_iris if data == "iris" else load_wine)(return_X_y=True)
    X = _std(X)
    ex = aloocv.loo(X, y, loss="multinomial", penalty=aloocv.L2(1.0), method="exact")
    alo = aloocv.loo(X, y, loss="multinomial", penalty=aloocv.L2(1.0))
    assert abs(alo.mean / ex.mean - 1) < 0.02


def _fd(f, x, h=1e-4):
    return (f(x * np.exp(h)) - f(x * np.exp(-h))) / (2 * h)


@pytest.mark.parametrize("intercept", [True, False])
def test_gradient_scalar_matches_finite_differences(iris, intercept):
    X, y = iris
    lam = 0.7
    res = aloocv.loo(
        X,
        y,
        loss="multinomial",
        penalty=aloocv.L2(lam),
        return_gradient=True,
        fit_intercept=intercept,
        tol=1e-13,
    )

    def mean(v):
        return aloocv.loo(
            X, y, loss="multinomial", penalty=aloocv.L2(v), fit_intercept=intercept, tol=1e-13
        ).mean

    d_log = _fd(mean, lam)
    assert res.gradient.shape == (1,)
    assert abs(res.gradient[0] * lam - d_log) <= 1e-5 * max(1.0, abs(d_log))


def test_gradient_per_feature_and_weights(iris):
    X, y = iris
    rng = np.random.default_rng(1)
    w = rng.uniform(0.5, 2.0, X.shape[0])
    lam = np.array([0.5, 1.0, 2.0, 0.3])
    res = aloocv.loo(
        X,
        y,
        loss="multinomial",
        penalty=aloocv.L2(lam),
        sample_weight=w,
        return_gradient=True,
        tol=1e-13,
    )
    for j in range(4):

        def mean(v, j=j):
            q = lam.copy()
            q[j] = v
            return aloocv.loo(
                X, y, loss="multinomial", penalty=aloocv.L2(q), sample_weight=w, tol=1e-13
            ).mean

        d = _fd(mean, lam[j])
        assert abs(res.gradient[j] * lam[j] - d) <= 1e-5 * max(1.0, abs(d))


def test_weights_equal_repeated_rows(iris):
    X, y = iris
    rng = np.random.default_rng(0)
    w = rng.integers(1, 4, X.shape[0]).astype(float)
    rep = np.repeat(np.arange(X.shape[0]), w.astype(int))
    a = aloocv.fit(X, y, loss="multinomial", penalty=aloocv.L2(2.0), sample_weight=w, tol=1e-12)
    b = aloocv.fit(X[rep], y[rep], loss="multinomial", penalty=aloocv.L2(2.0), tol=1e-12)
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-9)
    np.testing.assert_allclose(a.intercept_, b.intercept_, atol=1e-9)
    # zero weight == the row removed (fit and every other sample's ALO)
    w0 = np.ones(X.shape[0])
    w0[3] = 0.0
    keep = np.arange(X.shape[0]) != 3
    r0 = aloocv.loo(X, y, loss="multinomial", penalty=aloocv.L2(1.0), sample_weight=w0)
    r1 = aloocv.loo(X[keep], y[keep], loss="multinomial", penalty=aloocv.L2(1.0))
    np.testing.assert_allclose(r0.losses[keep], r1.losses, rtol=1e-8)
    assert abs(r0.mean - r1.mean) < 1e-10


def test_sparse_equals_dense(iris):
    X, y = iris
    Xs = X.copy()
    Xs[np.abs(Xs) < 0.5] = 0.0
    S = sp.csr_matrix(Xs)
    for method in ("alo", "if", "lemma3"):
        d = aloocv.loo(
            Xs,
            y,
            loss="multinomial",
            penalty=aloocv.L2(1.0),
            method=method,
            return_gradient=method == "alo",
        )
        s = aloocv.loo(
            S,
            y,
            loss="multinomial",
            penalty=aloocv.L2(1.0),
            method=method,
            return_gradient=method == "alo",
        )
        np.testing.assert_allclose(s.predictions, d.predictions, atol=1e-10)
        np.testing.assert_allclose(s.losses, d.losses, rtol=1e-10)
        if method == "alo":
            np.testing.assert_allclose(s.gradient, d.gradient, rtol=1e-8)
    fd = aloocv.fit(Xs, y, loss="multinomial", penalty=aloocv.L2(1.0))
    fs = aloocv.fit(S, y, loss="multinomial", penalty=aloocv.L2(1.0))
    np.testing.assert_allclose(fs.coef_, fd.coef_, atol=1e-10)


def test_bring_your_own_fit_and_warm_start(iris):
    X, y = iris
    sk = _sk(X, y, 1.0)
    a = aloocv.loo(
        X, y, loss="multinomial", penalty=aloocv.L2(1.0), coef=sk.coef_, intercept=sk.intercept_
    )
    b = aloocv.loo(X, y, loss="multinomial", penalty=aloocv.L2(1.0), tol=1e-12)
    np.testing.assert_allclose(a.losses, b.losses, rtol=1e-6)
    f = aloocv.fit(X, y, loss="multinomial", penalty=aloocv.L2(1.0), tol=1e-12)
    g = aloocv.fit(X, y, loss="multinomial", penalty=aloocv.L2(1.0), warm_start=f, tol=1e-12)
    assert g.n_iter_ == 0
    np.testing.assert_allclose(g.coef_, f.coef_)


def test_converged_is_honest(iris):
    X, y = iris
    with pytest.warns(ConvergenceWarning):
        f = aloocv.fit(X, y, loss="multinomial", penalty=aloocv.L2(1.0), max_iter=1)
    assert not f.converged_
    assert f.gradient_norm_ > 1e-8


def test_bad_input(iris):
    X, y = iris
    with pytest.raises(ValueError, match="classes \\[0\\] absent"):
        aloocv.fit(X, y + 1, loss="multinomial")
    with pytest.raises(ValueError, match="K >= 2"):
        aloocv.fit(X, np.zeros(X.shape[0]), loss="multinomial")
    with pytest.raises(ValueError, match="integer class labels"):
        aloocv.loo(X, y + 0.5, loss="multinomial")
    with pytest.raises(ValueError, match="integer class labels"):
        aloocv.fit(X, y - 1, loss="multinomial")
    with pytest.raises(TypeError, match="integer class labels"):
        aloocv.fit(X, y.astype(str), loss="multinomial")
    with pytest.raises(ValueError, match="lam > 0"):
        aloocv.fit(X, y, loss="multinomial", penalty=aloocv.L2(np.array([1.0, 0.0, 1.0, 1.0])))
    with pytest.raises(ValueError, match="L2 penalty only"):
        aloocv.fit(X, y, loss="multinomial", penalty=aloocv.ElasticNet(0.1, 1.0))
    with pytest.raises(ValueError, match="coef must have shape"):
        aloocv.loo(X, y, loss="multinomial", coef=np.zeros(4))
    with pytest.raises(ValueError, match="unknown method"):
        aloocv.loo(X, y, loss="multinomial", method="nope")
    with pytest.raises(ValueError, match="primal and matrix-free solvers"):
        aloocv.loo(X, y, loss="multinomial", solver="dual")
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError):
        aloocv.fit(Xn, y, loss="multinomial")


def _split(load):
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X, y = load(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
    sc = StandardScaler().fit(Xtr)
    return sc.transform(Xtr), sc.transform(Xte), ytr, yte


def _sk_cv(Cs, X, y):
    """scikit-learn's LogisticRegressionCV (5-fold, log-loss scoring) as the reference."""
    import warnings

    from sklearn.linear_model import LogisticRegressionCV

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # its changing defaults
        est = LogisticRegressionCV(Cs=Cs, scoring="neg_log_loss", max_iter=10000)
        return est.fit(X, y)


@pytest.mark.parametrize("search", ["grid", "gradient"])
def test_estimator_multinomial_iris(search):
    from sklearn.metrics import log_loss

    Xtr, Xte, ytr, yte = _split(load_iris)
    est = aloocv.ALOLogisticRegressionCV(Cs=10, search=search, store_loo=True).fit(Xtr, ytr)
    assert est.multi_class_ == "multinomial"
    assert est.coef_.shape == (3, 4) and est.intercept_.shape == (3,)
    P = est.predict_proba(Xte)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    np.testing.assert_allclose(np.log(P), est.predict_log_proba(Xte), atol=1e-12)
    assert est.loo_predictions_.shape == (Xtr.shape[0], 3)
    # the chosen model is scikit-learn's multinomial LogisticRegression at C_
    sk = _sk(Xtr, ytr, 1.0 / est.C_[0])
    np.testing.assert_allclose(P, sk.predict_proba(Xte), atol=1e-6)
    ref = _sk_cv(10, Xtr, ytr)
    assert log_loss(yte, P) <= 1.1 * log_loss(yte, ref.predict_proba(Xte))
    est.plot_cv()
    import matplotlib.pyplot as plt

    plt.close("all")


def test_estimator_multinomial_digits_beats_ovr():
    from sklearn.datasets import load_digits
    from sklearn.metrics import log_loss

    Xtr, Xte, ytr, yte = _split(load_digits)
    Cs = np.logspace(-2, 1, 4)
    est = aloocv.ALOLogisticRegressionCV(Cs=Cs).fit(Xtr, ytr)
    ovr = aloocv.ALOLogisticRegressionCV(Cs=Cs, multi_class="ovr").fit(Xtr, ytr)
    ref = _sk_cv(Cs, Xtr, ytr)
    mine = log_loss(yte, est.predict_proba(Xte))
    assert mine <= 1.1 * log_loss(yte, ref.predict_proba(Xte))
    assert mine < log_loss(yte, ovr.predict_proba(Xte))
    assert (est.predict(Xte) == yte).mean() > 0.95


def test_estimator_multinomial_labels_and_errors():
    X, y = load_iris(return_X_y=True)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    est = aloocv.ALOLogisticRegressionCV(Cs=3).fit(X, names)
    assert set(est.predict(X)) <= set(names)
    with pytest.raises(ValueError, match="L2 penalty only"):
        aloocv.ALOLogisticRegressionCV(Cs=3, penalty="l1").fit(X, y)
    with pytest.raises(ValueError, match="multi_class"):
        aloocv.ALOLogisticRegressionCV(Cs=3, multi_class="bad").fit(X, y)
    ovr = aloocv.ALOLogisticRegressionCV(Cs=3, multi_class="ovr").fit(X, y)
    assert ovr.multi_class_ == "ovr"


@pytest.mark.filterwarnings("ignore:ALO's mean may be off:aloocv.ALOWarning")
def test_tune_multinomial_reaches_gradient_zero(iris):
    X, y = iris
    t = aloocv.tune(X, y, loss="multinomial", penalty=aloocv.L2(1.0))
    assert t.converged
    lam = float(t.penalty.lam)
    r = aloocv.loo(X, y, loss="multinomial", penalty=aloocv.L2(lam), return_gradient=True)
    assert abs(r.gradient[0] * lam) <= 1e-5 * r.mean
    assert abs(r.mean - t.acv) < 1e-8
    # the minimum on a fine grid is not below the tuned value
    grid = lam * np.exp(np.linspace(-0.5, 0.5, 5))
    vals = [aloocv.loo(X, y, loss="multinomial", penalty=aloocv.L2(v)).mean for v in grid]
    assert min(vals) >= t.acv - 1e-8  # up to the fits' tolerance


def test_kfold_alo_and_exact(small):
    X, y = small
    lam = 1.0
    a = aloocv.kfold(X, y, loss="multinomial", penalty=aloocv.L2(lam), n_folds=4)
    e = aloocv.kfold(
        X, y, loss="multinomial", penalty=aloocv.L2(lam), n_folds=4, method="exact", tol=1e-11
    )
    assert a.predictions.shape == (60, 3) and np.all(a.folds == e.folds)
    f = aloocv.fit(X, y, loss="multinomial", penalty=aloocv.L2(lam), tol=1e-12)
    for k in range(4):
        m = e.folds == k
        sk = _sk(X[~m], y[~m], lam)
        ref = -sk.predict_log_proba(X[m])[np.arange(m.sum()), y[m].astype(int)]
        np.testing.assert_allclose(e.losses[m], ref, rtol=1e-6)
        step = _newton_loo_step(X, y, lam, f.coef_, f.intercept_, None, out=m)
        np.testing.assert_allclose(
            a.predictions[m] - a.predictions[m].mean(1, keepdims=True),
            step - step.mean(1, keepdims=True),
            atol=1e-6,
        )
    assert abs(a.mean / e.mean - 1) < 0.1


def test_thread_count_invariance():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((3000, 8))
    y = rng.integers(0, 4, 3000)
    a = aloocv.loo(X, y, loss="multinomial", n_jobs=1, return_gradient=True)
    b = aloocv.loo(X, y, loss="multinomial", n_jobs=2, return_gradient=True)
    assert np.array_equal(a.losses, b.losses) and np.array_equal(a.gradient, b.gradient)
    assert np.array_equal(a.fit.coef_, b.fit.coef_)
