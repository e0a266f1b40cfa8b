"""The one Newton driver on sums sources (``_core.sums_fit``, cpp/include/aloocv/sums_model.hpp)
and the dask route built on it: at the DEFAULT tolerance the dask results equal the
in-memory ones to 1e-10 (the same iterates: the same n_iter and Hessian passes)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import aloocv
from aloocv import _core
from aloocv.backends.dask import newton as dask_newton
from aloocv.backends.dask import passes
from conftest import make_data

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

PARITY = 1e-10  # issue 12's target
CHUNK = 70  # rows per chunk: uneven last chunk


def close_rel(a, b, tol=PARITY):
    """Relative (to the largest entry) agreement, for coefficients."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=0, atol=tol * max(1e-300, float(np.max(np.abs(b)))))


def close_abs(a, b, tol=PARITY):
    """Absolute agreement, for losses and their means."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=0, atol=tol)


def dX(X, chunk=CHUNK):
    return da.from_array(X, chunks=(chunk, X.shape[1]))


def data(loss, n=230, p=6, seed=1):
    X, y = make_data(loss, n, p, seed=seed)
    rng = np.random.default_rng(seed)
    return X, y, rng.uniform(0.5, 2.0, n), 0.1 * rng.standard_normal(n)


# ------------------------------------------------------------------ the binding itself
def numpy_source(X, y, w, off, calls=None):
    """A logistic problem's sums by plain numpy (an independent formula)."""
    Xt = np.column_stack([np.ones(len(y)), X])

    def source(beta, step, hessian, clip):
        if calls is not None:
            calls.append(bool(hessian))
        eta = Xt @ beta + off
        mu = 1.0 / (1.0 + np.exp(-eta))
        loss = float(w @ (np.logaddexp(0.0, eta) - y * eta))
        grad = Xt.T @ (w * (mu - y))
        H = None
        if hessian:
            d = np.maximum(w * mu * (1 - mu), 0.0) if clip else w * mu * (1 - mu)
            H = np.asfortranarray(Xt.T @ (d[:, None] * Xt))
        smax = 0.0 if step is None else float(np.max(np.abs(Xt @ step)))
        return loss, grad, H, smax

    return source


def start(y, w, off):
    """The core's cold start: the intercept at the logit of the weighted mean of y."""
    ybar = float(w @ y / w.sum())
    return np.array([np.log(ybar / (1 - ybar)) - float(w @ off) / w.sum()])


@pytest.mark.parametrize("fresh_end", [False, True])
def test_numpy_source_takes_newton_fits_iterates(fresh_end):
    X, y, w, off = data("logistic")
    lam = np.linspace(0.5, 2.0, X.shape[1])
    b0 = np.concatenate([start(y, w, off), np.zeros(X.shape[1])])
    calls: list[bool] = []
    with threadpool_limits(1):
        r = _core.sums_fit(
            numpy_source(X, y, w, off, calls),
            "logistic",
            lam,
            fit_intercept=True,
            beta0=b0,
            weight_sum=float(w.sum()),
            tol=1e-8,
            max_iter=100,
            fresh_end=fresh_end,
        )
    kw = dict(loss="logistic", penalty=aloocv.L2(lam), sample_weight=w, offset=off)
    ref = aloocv.loo(X, y, **kw).fit if fresh_end else aloocv.fit(X, y, **kw)
    close_rel(r.beta[1:], ref.coef_)
    close_rel(r.beta[0], ref.intercept_)
    assert r.n_iter == ref.n_iter_
    assert r.hessian_passes == ref.hessian_passes_
    assert r.converged and r.grad_norm <= 1e-8
    assert r.n_evals == len(calls)
    # fused: a Hessian comes with an evaluation the fit needs anyway, where the source
    # foresees it; a wrong guess of whether a chord phase starts costs one evaluation, never
    # an iterate. Beyond the start's evaluation and one such guess, a fresh end that
    # refactors after a chord step probes the end Hessian's step (settle_end): one more
    assert r.n_evals <= r.n_iter + 2 + int(fresh_end)
    # the plain fit ends on chord steps (fewer Hessians than steps), both reach tol
    if not fresh_end:
        assert r.hessian_passes < r.n_iter
        assert calls[-1] is False  # no Hessian asked for at the end of a plain fit
    # the returned Hessian is the penalized one of the held factor; at beta with fresh_end
    Xt = np.column_stack([np.ones(len(y)), X])
    mu = 1.0 / (1.0 + np.exp(-(Xt @ r.beta + off)))
    H = Xt.T @ ((w * mu * (1 - mu))[:, None] * Xt) + np.diag(np.concatenate([[0.0], lam]))
    if fresh_end:
        assert r.hessian_at_point
        close_rel(r.hessian, H, 1e-12)
    np.testing.assert_allclose(r.hessian - r.unpenalized_hessian, np.diag(np.r_[0.0, lam]))
    # the objective and gradient at beta
    eta = Xt @ r.beta + off
    f = w @ (np.logaddexp(0.0, eta) - y * eta) + 0.5 * lam @ r.beta[1:] ** 2
    assert abs(r.objective - f) <= 1e-12 * abs(f)
    close_rel(r.grad, Xt.T @ (w * (mu - y)) + np.r_[0.0, lam] * r.beta, 1e-6)


@pytest.mark.parametrize("fresh_end", [False, True])
def test_the_hessian_comes_with_the_evaluation_that_needs_it(fresh_end):
    # A Gaussian logistic problem whose first chord step after the first fresh Hessian
    # contracts too little (the drive refreshes there) and whose fresh end polishes with
    # chord steps: the Hessians come with the trial points that need them (the chord
    # step predicted to fail, the end guessed once), so no evaluation is made for a
    # Hessian alone beyond the start's, and at most one Hessian (the first fresh step's,
    # whose contraction is not known yet) and, with the fresh end, one end guess go unused.
    rng = np.random.default_rng(0)
    n, p = 20000, 20
    X = rng.standard_normal((n, p))
    y = rng.random(n) < 1.0 / (1.0 + np.exp(-X @ (2.0 * rng.standard_normal(p) / np.sqrt(p))))
    y = y.astype(np.float64)
    w, off = np.ones(n), np.zeros(n)
    Xt = np.column_stack([np.ones(n), X])
    asked: list[tuple[bool, bool]] = []
    src = numpy_source(X, y, w, off)

    def source(beta, step, hessian, clip):
        asked.append((bool(hessian), step is None))
        return src(beta, step, hessian, clip)

    with threadpool_limits(1):
        r = _core.sums_fit(
            source,
            "logistic",
            np.ones(p),
            fit_intercept=True,
            beta0=np.concatenate([start(y, w, off), np.zeros(p)]),
            weight_sum=float(n),
            tol=1e-8,
            max_iter=100,
            fresh_end=fresh_end,
        )
        kw = dict(loss="logistic", penalty=aloocv.L2(1.0))
        ref = aloocv.loo(X, y, **kw).fit if fresh_end else aloocv.fit(X, y, **kw)
    assert r.converged and r.n_iter == ref.n_iter_ and r.hessian_passes == ref.hessian_passes_
    assert r.hessian_passes >= 2  # the drive refreshed after the start (the case tested)
    assert asked[0] == (True, True)
    assert [a for a in asked[1:] if a == (True, True)] == []  # no Hessian-only evaluation
    assert sum(h for h, _ in asked) - r.hessian_passes <= 1 + int(fresh_end)
    assert r.n_evals == len(asked)
    mu = 1.0 / (1.0 + np.exp(-(Xt @ r.beta)))
    close_rel(r.grad, Xt.T @ (mu - y) + np.r_[0.0, np.ones(p)] * r.beta, 1e-6)


def numpy_enet_source(X, y, w, off, calls):
    """numpy_source with the cols= keyword of the elastic net's working sets."""
    Xt = np.column_stack([np.ones(len(y)), X])

    def source(beta, step, hessian, clip, cols=None):
        calls.append(None if cols is None else list(cols))
        A = Xt if cols is None else Xt[:, cols]
        b = beta if cols is None else beta[cols]
        if cols is not None:  # beta is zero outside the working set
            assert np.count_nonzero(beta) == np.count_nonzero(b)
        eta = A @ b + off
        mu = 1.0 / (1.0 + np.exp(-eta))
        loss = float(w @ (np.logaddexp(0.0, eta) - y * eta))
        H = np.asfortranarray(A.T @ ((w * mu * (1 - mu))[:, None] * A)) if hessian else None
        return loss, A.T @ (w * (mu - y)), H, 0.0

    return source


def test_numpy_source_takes_enet_fits_iterates():
    """The elastic net over a sums source (the dask route) runs enet_fit's iteration:
    the in-memory coefficients, steps and Hessian passes, and the active set's Hessian at
    beta (checked against numpy)."""
    X, y, w, off = data("logistic", p=12)
    lam, l1 = np.full(12, 2.0), np.linspace(1.0, 12.0, 12)
    b0 = np.concatenate([start(y, w, off), np.zeros(12)])
    calls: list = []
    with threadpool_limits(1):
        r = _core.enet_sums_fit(
            numpy_enet_source(X, y, w, off, calls),
            "logistic",
            lam,
            l1,
            fit_intercept=True,
            beta0=b0,
            weight_sum=float(w.sum()),
            tol=1e-8,
            max_iter=100,
        )
        pen = aloocv.ElasticNet(l1=l1, l2=lam)
        ref = aloocv.loo(X, y, loss="logistic", penalty=pen, sample_weight=w, offset=off)
    close_rel(r.beta[1:], ref.fit.coef_)
    close_rel(r.beta[0], ref.fit.intercept_)
    assert 0 < r.active.size < 12
    np.testing.assert_array_equal(r.active, np.flatnonzero(ref.fit.coef_))
    assert r.n_iter == ref.fit.n_iter_ and r.converged and r.grad_norm <= 1e-8
    # the Hessian of every working set and of the active set came from a cols= call
    assert r.hessian_passes == sum(c is not None for c in calls)
    assert r.n_evals == len(calls)
    A = np.r_[0, r.active + 1]
    Xa = np.column_stack([np.ones(len(y)), X])[:, A]
    mu = 1.0 / (1.0 + np.exp(-(Xa @ r.beta[A] + off)))
    H = Xa.T @ ((w * mu * (1 - mu))[:, None] * Xa) + np.diag(np.r_[0.0, lam[r.active]])
    close_rel(r.hessian, H, 1e-12)
    assert calls[-1] == A.tolist()


def call(source):
    w = np.random.default_rng(0).uniform(0.5, 2.0, 60)
    args = dict(
        loss="logistic",
        penalty=np.ones(3),
        fit_intercept=True,
        beta0=np.zeros(4),
        weight_sum=float(w.sum()),
        tol=1e-8,
        max_iter=50,
    )
    return _core.sums_fit(source, **args)


def test_source_errors_propagate():
    def boom(beta, step, hessian, clip):
        raise RuntimeError("the source failed")

    with pytest.raises(RuntimeError, match="the source failed"):
        call(boom)

    n = [0]

    def interrupted(beta, step, hessian, clip):
        n[0] += 1
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        call(interrupted)
    assert n[0] == 1  # nothing retried after the interrupt


def test_bad_sources_are_clear_errors():
    with pytest.raises(TypeError, match="callable"):
        _core.sums_fit(
            3,
            "logistic",
            np.ones(3),
            fit_intercept=True,
            beta0=np.zeros(4),
            weight_sum=1.0,
            tol=1e-8,
            max_iter=10,
        )
    with pytest.raises(TypeError, match="tuple"):
        call(lambda beta, step, hessian, clip: 1.0)
    with pytest.raises(ValueError, match="grad"):
        call(lambda beta, step, hessian, clip: (1.0, np.zeros(2), None, 0.0))
    with pytest.raises(ValueError, match="Hessian"):
        call(lambda beta, step, hessian, clip: (1.0, np.ones(4), None, 0.0))
    with pytest.raises(ValueError, match="objective is not finite"):
        call(lambda beta, step, hessian, clip: (np.inf, np.ones(4), np.eye(4, order="F"), 0.0))
    with pytest.raises(ValueError, match="gradient is not finite"):
        call(lambda beta, step, hessian, clip: (1.0, np.full(4, np.nan), np.eye(4, order="F"), 0.0))


# ------------------------------------------------------------------ dask at the default tol
CASES = [("logistic", 1), ("poisson", 2)]


@pytest.mark.parametrize("loss,seed", CASES)
def test_dask_equals_numpy_at_default_tol(sync, loss, seed):
    X, y, w, off = data(loss, seed=seed)
    pen = aloocv.L2(np.linspace(0.3, 2.0, X.shape[1]))
    for kw in (
        dict(loss=loss, penalty=pen),
        dict(loss=loss, penalty=pen, sample_weight=w, offset=off),
    ):
        with threadpool_limits(1):
            ref = aloocv.fit(X, y, **kw)
            rl = aloocv.loo(X, y, return_gradient=True, **kw)
            rk = aloocv.kfold(X, y, n_folds=4, **kw)
            rke = aloocv.kfold(X, y, n_folds=3, method="exact", **kw)
        got = aloocv.fit(dX(X), y, **kw)
        close_rel(got.coef_, ref.coef_)
        close_rel(got.intercept_, ref.intercept_)
        assert (got.n_iter_, got.hessian_passes_) == (ref.n_iter_, ref.hessian_passes_)
        assert abs(got.objective_ - ref.objective_) <= 1e-12 * abs(ref.objective_)
        gl = aloocv.loo(dX(X), da.from_array(y, chunks=50), return_gradient=True, **kw)
        close_rel(gl.fit.coef_, rl.fit.coef_)
        assert (gl.fit.n_iter_, gl.fit.hessian_passes_) == (rl.fit.n_iter_, rl.fit.hessian_passes_)
        close_abs(gl.losses.compute(), rl.losses)
        close_abs(gl.predictions.compute(), rl.predictions)
        close_abs(gl.leverages.compute(), rl.leverages)
        close_abs(gl.mean, rl.mean)
        close_abs(gl.stderr, rl.stderr)
        close_rel(gl.gradient, rl.gradient)
        gk = aloocv.kfold(dX(X), y, n_folds=4, **kw)
        close_abs(gk.losses, rk.losses)
        close_abs(gk.mean, rk.mean)
        gke = aloocv.kfold(dX(X), y, n_folds=3, method="exact", **kw)
        close_abs(gke.losses, rke.losses)
        close_abs(gke.mean, rke.mean)


def test_dask_tune_and_logistic_cv_at_default_tol(sync):
    X, y, _, _ = data("logistic", n=200, p=5, seed=4)
    grid = [aloocv.L2(v) for v in np.logspace(-2, 2, 5)]
    with threadpool_limits(1):
        r = aloocv.tune(X, y, loss="logistic", penalty=grid[0], method="grid", grid=grid)
        est_r = aloocv.ALOLogisticRegressionCV(Cs=np.logspace(-2, 2, 4)).fit(X, y)
    g = aloocv.tune(dX(X), y, loss="logistic", penalty=grid[0], method="grid", grid=grid)
    # the path iterates of the in-memory tuning runs: the dask tuning fits take their
    # secant-corrected chord steps too (up to one polish step decided at the rounding
    # level; without the secant the counts differ by up to 6 on this path)
    assert np.max(np.abs(g.path_n_iter - r.path_n_iter)) <= 1
    close_abs(g.history["acv"], r.history["acv"])
    close_rel(g.fit.coef_, r.fit.coef_)
    est_g = aloocv.ALOLogisticRegressionCV(Cs=np.logspace(-2, 2, 4)).fit(dX(X), y)
    assert est_g.C_ == est_r.C_
    close_rel(est_g.coef_, est_r.coef_)
    close_rel(est_g.intercept_, est_r.intercept_)
    close_abs(est_g.best_score_, est_r.best_score_)


def test_dask_nonfinite_objective_is_the_projects_error(sync):
    X, y, _, _ = data("poisson", n=100, p=3)
    off = np.full(100, 800.0)  # exp(800) overflows at the start (no intercept absorbs it)
    kw = dict(loss="poisson", offset=off, fit_intercept=False)
    with pytest.raises(ValueError) as ref:
        aloocv.fit(X, y, **kw)
    with pytest.raises(ValueError) as got:
        aloocv.fit(dX(X), y, **kw)
    assert "not finite" in str(ref.value)
    assert str(got.value) == str(ref.value)


def test_dask_task_error_propagates(sync, monkeypatch):
    X, y, _, _ = data("logistic", n=100, p=3)
    real = _core.chunk_sums
    n = [0]

    def flaky(*args, **kwargs):
        n[0] += 1
        if n[0] > 3:  # inside the Newton loop
            raise RuntimeError("worker lost its disk")
        return real(*args, **kwargs)

    monkeypatch.setattr(_core, "chunk_sums", flaky)
    with pytest.raises(RuntimeError, match="worker lost its disk"):
        aloocv.fit(dX(X), y, loss="logistic")


def test_chunk_sums_step_and_clipped_hessian():
    # Tweedie power 3: w l'' = w (2 y e^{-2 eta} - e^{-eta}) changes sign
    rng = np.random.default_rng(5)
    n, p = 80, 3
    X = rng.standard_normal((n, p))
    y = rng.gamma(2.0, 0.5, n)
    w = rng.uniform(0.5, 2.0, n)
    off = 0.3 * rng.standard_normal(n)
    beta, step = rng.standard_normal(p + 1), rng.standard_normal(p + 1)
    Xt = np.column_stack([np.ones(n), X])
    eta = Xt @ beta + off
    d = w * (2.0 * y * np.exp(-2.0 * eta) - np.exp(-eta))
    assert d.min() < 0 < d.max()
    loss = aloocv.Tweedie(3.0).core
    for clip in (False, True):
        out = _core.chunk_sums(
            X,
            y,
            w,
            loss,
            fit_intercept=True,
            beta=beta,
            hessian=True,
            check=True,
            n_threads=1,
            offset=off,
            step=step,
            clip=clip,
        )
        dd = np.maximum(d, 0.0) if clip else d
        close_rel(out.hess, Xt.T @ (dd[:, None] * Xt), 1e-12)
        close_rel(out.step_max, np.max(np.abs(Xt @ step)), 1e-14)
    assert (
        _core.chunk_sums(
            X,
            y,
            w,
            loss,
            fit_intercept=True,
            beta=beta,
            hessian=False,
            check=False,
            n_threads=1,
            offset=off,
        ).step_max
        == 0.0
    )


def test_indefinite_hessian_takes_the_clipped_one():
    # f = 1/2 ||b - c||^2 + 1/2 lam ||b_1:||^2 whose "exact" Hessian is reported indefinite
    # (-I) and the clipped one is the true I: the model refactors with the clipped one
    c = np.array([1.0, -2.0, 0.5])
    lam = np.array([0.5, 2.0])
    asked = []

    def source(beta, step, hessian, clip):
        asked.append((bool(hessian), bool(clip)))
        H = None
        if hessian:
            H = np.eye(3, order="F") if clip else -np.eye(3, order="F")
        return 0.5 * float((beta - c) @ (beta - c)), beta - c, H, 0.0

    r = _core.sums_fit(
        source,
        "poisson",
        lam,
        fit_intercept=True,
        beta0=np.zeros(3),
        weight_sum=1.0,
        tol=1e-10,
        max_iter=20,
    )
    close_rel(r.beta, c / np.r_[1.0, 1.0 + lam], 1e-14)
    assert (True, True) in asked and r.converged
    assert not r.hessian_at_point  # a clipped factor is not the Hessian at beta
    # where the Hessian at beta is needed (fresh_end, as newton_fit), the error says so
    with pytest.raises(ValueError, match="not numerically positive definite"):
        _core.sums_fit(
            source,
            "poisson",
            lam,
            fit_intercept=True,
            beta0=np.zeros(3),
            weight_sum=1.0,
            tol=1e-10,
            max_iter=20,
            fresh_end=True,
        )
    # and so where the clipped one is not positive definite either
    with pytest.raises(ValueError, match="not numerically positive definite"):
        _core.sums_fit(
            lambda beta, step, hessian, clip: (
                0.0,
                beta - c,
                -np.eye(3, order="F") if hessian else None,
                0.0,
            ),
            "poisson",
            lam,
            fit_intercept=True,
            beta0=np.zeros(3),
            weight_sum=1.0,
            tol=1e-10,
            max_iter=20,
        )


@pytest.mark.parametrize("intercept", [True, False])
def test_chunk_sums_one_read_kernel_against_numpy(intercept):
    # enough rows for several row blocks and reduction chunks (the kernel computes eta,
    # X~ step, the loss and X~^T (w l') block by block); zero weights skip their rows
    rng = np.random.default_rng(8)
    n, p = 5000, 3
    X = rng.standard_normal((n, p))
    y = (rng.random(n) < 0.4).astype(float)
    w = rng.uniform(0.5, 2.0, n)
    w[::7] = 0.0
    off = 0.2 * rng.standard_normal(n)
    p1 = p + int(intercept)
    beta, step = 0.5 * rng.standard_normal(p1), rng.standard_normal(p1)
    Xt = np.column_stack([np.ones(n), X]) if intercept else X
    eta = Xt @ beta + off
    mu = 1.0 / (1.0 + np.exp(-eta))
    loss = np.sum(w * (np.logaddexp(0.0, eta) - y * eta))
    out = _core.chunk_sums(
        X,
        y,
        w,
        "logistic",
        fit_intercept=intercept,
        beta=beta,
        hessian=True,
        check=True,
        n_threads=1,
        offset=off,
        step=step,
    )
    close_rel(out.loss, loss, 1e-13)
    close_rel(out.weight, w.sum(), 1e-14)
    close_rel(out.grad, Xt.T @ (w * (mu - y)), 1e-12)
    close_rel(out.hess, Xt.T @ ((w * mu * (1 - mu))[:, None] * Xt), 1e-12)
    close_rel(out.step_max, np.max(np.abs(Xt @ step)), 1e-14)
    # the sums do not depend on the number of threads (fixed reduction chunks)
    two = _core.chunk_sums(
        X,
        y,
        w,
        "logistic",
        fit_intercept=intercept,
        beta=beta,
        hessian=True,
        check=True,
        n_threads=2,
        offset=off,
        step=step,
    )
    for k in ("loss", "grad", "hess", "step_max"):
        np.testing.assert_array_equal(getattr(two, k), getattr(out, k))
    # an empty chunk: zero sums
    e = _core.chunk_sums(
        X[:0],
        y[:0],
        w[:0],
        "logistic",
        fit_intercept=intercept,
        beta=beta,
        hessian=True,
        check=False,
        n_threads=1,
        offset=off[:0],
    )
    assert e.loss == 0.0 and not np.any(e.grad) and not np.any(e.hess)


def test_bad_chunks_report_the_first_bad_row(sync):
    # every chunk is checked; the error raised is the one of the lowest row, whatever
    # order the tasks ran in
    X, y, _, _ = data("logistic", n=230, p=3)
    yb = y.copy()
    yb[[200, 150, 75, 71]] = 2.0
    for _ in range(2):
        with pytest.raises(ValueError, match=r"y\[71\] = 2"):
            aloocv.fit(dX(X), yb, loss="logistic")
    Xb = X.copy()
    Xb[[210, 160, 140], 1] = np.nan
    with pytest.raises(ValueError, match=r"first at row 140, column 1"):
        aloocv.loo(dX(Xb), y, loss="logistic")


def test_one_read_of_y_per_problem(sync, monkeypatch):
    # loo's class counts and the fit's sums of y come from one read of y; a tuning run
    # reads y once and checks X once for all its fits
    X, y, _, _ = data("logistic", n=230, p=3)
    calls = {"y": 0, "check": 0}
    real_y, real_sums = passes._ystats_task, passes._sums_task

    def ystats(*a, **k):
        calls["y"] += 1
        return real_y(*a, **k)

    def sums(*a, **k):
        calls["check"] += bool(a[8])  # the `check` argument
        return real_sums(*a, **k)

    monkeypatch.setattr(passes, "_ystats_task", ystats)
    monkeypatch.setattr(passes, "_sums_task", sums)
    chunks = len(dX(X).chunks[0])
    got = aloocv.loo(dX(X), y, loss="logistic")
    assert calls == {"y": chunks, "check": chunks}
    ref = aloocv.loo(X, y, loss="logistic")
    close_abs(got.losses.compute(), ref.losses)
    calls.update(y=0, check=0)
    grid = np.logspace(-1, 1, 3)
    res = aloocv.tune(dX(X), y, loss="logistic", penalty=aloocv.L2(1.0), method="grid", grid=grid)
    assert calls == {"y": chunks, "check": chunks}
    assert res.n_fits >= 3 and np.isfinite(res.acv)


def _no_probe_rounds(monkeypatch):
    """Spies the dask passes: (beta, hessian) per pass."""
    seen: list[tuple[np.ndarray, bool]] = []
    real = dask_newton._pass

    def spy(data, beta, hessian, *a, **k):
        seen.append((np.array(beta), bool(hessian)))
        return real(data, beta, hessian, *a, **k)

    monkeypatch.setattr(dask_newton, "_pass", spy)
    return seen


def test_fused_guard_rides_on_the_dask_leverage_pass(sync, monkeypatch):
    # the guard of the fit's fused end is measured in the leverage pass (as in memory):
    # no pass evaluates a point already evaluated except to take its Hessian (before, the
    # guard's probe was one more pass at the returned beta), and the result is the
    # in-memory one
    X, y, _, _ = data("logistic", n=400, p=8)
    seen = _no_probe_rounds(monkeypatch)
    got = aloocv.loo(dX(X), y, loss="logistic", penalty=aloocv.L2(0.5))
    betas = [b for b, _ in seen]
    for k in range(1, len(seen)):
        assert seen[k][1] or not np.array_equal(betas[k], betas[k - 1])
    ref = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(0.5), n_jobs=1)
    assert got.fit.n_iter_ == ref.fit.n_iter_
    assert got.fit.hessian_passes_ == ref.fit.hessian_passes_
    close_rel(got.fit.coef_, ref.fit.coef_)
    close_rel(got.leverages.compute(), ref.leverages, 1e-10)
    # a tuning path's points settle theirs in their grid ALO's leverage pass too, and each
    # point's fit starts from the last point's sums, which its penalty changes without a
    # pass (before, a pass at the last point's beta)
    seen.clear()
    grid = np.logspace(-1, 1, 3)
    aloocv.tune(dX(X), y, loss="logistic", penalty=aloocv.L2(1.0), method="grid", grid=grid)
    for k in range(1, len(seen)):
        assert seen[k][1] or not np.array_equal(seen[k][0], seen[k - 1][0])
    # and approximate K-fold's fit in its folds' pass (folds of 12 rows, p = 30: a fresh
    # end, not the fold-wise one)
    X2, y2, _, _ = data("logistic", n=60, p=30)
    seen.clear()
    aloocv.kfold(dX(X2, 20), y2, loss="logistic", penalty=aloocv.L2(0.5), n_folds=5)
    assert len(seen) > 1
    for k in range(1, len(seen)):
        assert seen[k][1] or not np.array_equal(seen[k][0], seen[k - 1][0])


@pytest.mark.filterwarnings("ignore:ALO's mean may be off:aloocv.ALOWarning")
@pytest.mark.parametrize(("seed", "n", "p", "lam"), [(5, 40, 120, 1e-2), (4, 60, 30, 1e-3)])
def test_fused_guard_fails_in_the_dask_leverage_pass_and_falls_back(
    sync, monkeypatch, seed, n, p, lam
):
    # nearly separable (tests/test_fused_end.py): the end Hessian's Newton step still
    # moves some eta_i by more than FUSED_END_ETA. The leverage pass finds it; the fit
    # takes that step with the Hessian at the new point (the core's settle), and the
    # leverages are computed again: the in-memory fit's iterates and leverages
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = (X[:, 0] + 2 * rng.standard_normal(n) > 0) * 1.0
    taken = []
    real = _core.sums_settle_end

    def settle(*a, **k):
        r = real(*a, **k)
        taken.append(r.n_iter)
        return r

    monkeypatch.setattr(_core, "sums_settle_end", settle)
    kw = dict(penalty=aloocv.L2(lam), tol=1e-6)
    with warnings.catch_warnings(record=True) as wg:  # p/n = 1/2: ALO may be off
        warnings.simplefilter("always", aloocv.ALOWarning)
        got = aloocv.loo(dX(X, 13), y, **kw)
    with warnings.catch_warnings(record=True) as wr:
        warnings.simplefilter("always", aloocv.ALOWarning)
        ref = aloocv.loo(X, y, solver="primal", n_jobs=1, **kw)
    assert [str(m.message) for m in wg] == [str(m.message) for m in wr]
    assert ref.fit.fused_end_fallbacks_ == 1
    assert taken == [1]
    assert got.fit.n_iter_ == ref.fit.n_iter_
    assert got.fit.hessian_passes_ == ref.fit.hessian_passes_
    np.testing.assert_allclose(got.fit.coef_, ref.fit.coef_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.leverages.compute(), ref.leverages, rtol=1e-10)
    atol = 1e-11 * np.abs(ref.predictions).max()
    np.testing.assert_allclose(got.predictions.compute(), ref.predictions, rtol=1e-9, atol=atol)
    # approximate K-fold measures its fit's guard in the folds' pass: the same fallback
    gk = aloocv.kfold(dX(X, 13), y, n_folds=5, **kw)
    rk = aloocv.kfold(X, y, n_folds=5, n_jobs=1, **kw)
    assert taken == [1, 1]
    assert (gk.fit.n_iter_, gk.fit.hessian_passes_) == (rk.fit.n_iter_, rk.fit.hessian_passes_)
    np.testing.assert_allclose(gk.fit.coef_, rk.fit.coef_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(gk.losses), rk.losses, rtol=1e-9, atol=1e-12)
