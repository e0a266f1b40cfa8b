"""The matrix-free route's exact refits (``_core.MatrixFreePoint.cg_refits``,
docs/math/matrix_free.md, "Exact refits"): Newton-CG refits advanced in lockstep, one block
product per step for a batch, against fits on the data without the sample (aloocv's
exact-Hessian fit and scikit-learn's), across batches, from the Sherman-Morrison starts of
the self-check, and their report of refits that did not reach tol."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

import aloocv
from aloocv.backends.memory import matrix_free as mfm
from aloocv.problem import Problem
from conftest import make_data


def _brute_force(X, y, rows, lam, loss, w=None, offset=None, fit_intercept=True):
    """x~_i^T beta_(-i) + offset_i by aloocv's exact-Hessian fit on the data without i."""
    out = np.empty(rows.size)
    n = X.shape[0]
    for k, i in enumerate(rows):
        keep = np.arange(n) != i
        f = aloocv.fit(
            X[keep], y[keep], loss=loss, penalty=aloocv.L2(lam), solver="primal",
            fit_intercept=fit_intercept, tol=1e-12,
            sample_weight=None if w is None else w[keep],
            offset=None if offset is None else offset[keep],
        )  # fmt: skip
        xi = X[i].toarray().ravel() if sp.issparse(X) else X[i]
        out[k] = xi @ f.coef_ + f.intercept_ + (0.0 if offset is None else offset[i])
    return out


def _full_beta(pb: Problem) -> np.ndarray:
    fit = mfm.fit(pb)
    return mfm._beta(fit)


@pytest.mark.parametrize("loss", ["logistic", "poisson"])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("extras", [False, True])
def test_lockstep_refits_equal_fits_without_the_sample(loss, sparse, extras):
    X, y = make_data(loss, 80, 6, seed=3)
    if sparse:
        X = sp.csr_matrix(np.where(np.abs(X) > 0.8, X, 0.0))
    rng = np.random.default_rng(0)
    w = rng.uniform(0.5, 2.0, 80) if extras else None
    off = rng.normal(0.0, 0.2, 80) if extras else None
    lam = 2.0
    pb = Problem.build(
        X, y, loss=loss, penalty=aloocv.L2(lam), sample_weight=w, offset=off, tol=1e-11,
        n_jobs=1, fit_intercept=not extras,
    )  # fmt: skip
    beta = _full_beta(pb)
    # 21 rows: two batches of the core (kBatchRefits = 16), a repeated row among them
    rows = np.concatenate([np.arange(0, 80, 4), [8]]).astype(np.int64)
    losses, pred, n_nc = mfm._refit_rows(mfm.point(pb, beta), rows)
    ref = _brute_force(X, y, rows, lam, loss, w, off, fit_intercept=not extras)
    assert n_nc == 0
    np.testing.assert_allclose(pred, ref, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(losses, pb.loss.value(y[rows], ref), rtol=1e-7, atol=1e-9)


def test_lockstep_refits_equal_scikit_learn_refits():
    sklearn = pytest.importorskip("sklearn.linear_model")
    X, y = make_data("logistic", 120, 8, seed=5)
    lam = 1.5
    pb = Problem.build(X, y, penalty=aloocv.L2(lam), tol=1e-11, n_jobs=1)
    rows = np.array([3, 50, 119], dtype=np.int64)
    _, pred, n_nc = mfm._refit_rows(mfm.point(pb, _full_beta(pb)), rows)
    assert n_nc == 0
    for k, i in enumerate(rows):
        keep = np.arange(120) != i
        m = sklearn.LogisticRegression(C=1.0 / lam, tol=1e-12, max_iter=10000)
        m.fit(X[keep], y[keep])
        ref = X[i] @ m.coef_.ravel() + m.intercept_[0]
        np.testing.assert_allclose(pred[k], ref, rtol=1e-6, atol=1e-7)


def test_self_check_refits_from_the_sherman_morrison_start_are_exact():
    X, y = make_data("logistic", 150, 10, seed=7)
    X = sp.csr_matrix(np.where(np.abs(X) > 0.5, X, 0.0))
    lam = 0.5
    pb = Problem.build(X, y, penalty=aloocv.L2(lam), tol=1e-11, n_jobs=1)
    fit = mfm.fit(pb)
    beta = mfm._beta(fit)
    derivs = pb.loss.derivatives(y, fit.decision_function(pb.X, None))
    g, d = derivs[1], derivs[2]
    rows = np.array([0, 17, 40, 41, 99, 149], dtype=np.int64)
    pt = mfm.point(pb, beta)
    refit = mfm._refitter(pt, mfm._RowSolves(pt), g, d)
    losses, n_nc = refit(rows)
    ref = _brute_force(X, y, rows, lam, "logistic")
    assert n_nc == 0
    np.testing.assert_allclose(losses, pb.loss.value(y[rows], ref), rtol=1e-7)


def test_refits_not_at_tol_are_counted():
    X, y = make_data("logistic", 60, 5, seed=1)
    beta = _full_beta(Problem.build(X, y, penalty=aloocv.L2(0.1), n_jobs=1))
    pb = Problem.build(X, y, penalty=aloocv.L2(0.1), tol=1e-15, max_iter=1, n_jobs=1)
    rows = np.arange(5, dtype=np.int64)
    _, _, n_nc = mfm._refit_rows(mfm.point(pb, beta), rows)
    assert n_nc == rows.size  # one Newton step from the full fit cannot reach 1e-15


def test_cg_refits_refuses_bad_rows_and_starts():
    X, y = make_data("logistic", 30, 4, seed=0)
    pb = Problem.build(X, y, penalty=aloocv.L2(1.0), n_jobs=1)
    beta = np.zeros(5)
    kw = dict(tol=1e-8, max_iter=10)
    pt = mfm.point(pb, beta).core
    with pytest.raises(ValueError, match="out of range"):
        pt.cg_refits(np.array([30], dtype=np.int64), **kw)
    with pytest.raises(ValueError, match="starts"):
        pt.cg_refits(np.array([1, 2], dtype=np.int64), starts=np.zeros((2, 4)), **kw)
    with pytest.raises(ValueError, match="beta"):
        mfm.point(pb, np.zeros(4))


def _text(n: int, p: int, per_row: int, seed: int):
    """Sparse rows with Zipf column frequencies (frequent columns: the preconditioner's
    dense block, ``mf::HeadBlock``, applies once p + 1 > 128)."""
    rng = np.random.default_rng(seed)
    prob = np.arange(1, p + 1) ** -1.1
    prob /= prob.sum()
    X = sp.csr_matrix(
        (rng.exponential(1.0, n * per_row), (np.repeat(np.arange(n), per_row),
         rng.choice(p, size=n * per_row, p=prob))), shape=(n, p),
    )  # fmt: skip
    X.sum_duplicates()
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ rng.standard_normal(p))))).astype(float)
    return X, y


@pytest.mark.parametrize("intercept", [True, False])
def test_solves_with_the_dense_head_preconditioner_are_exact(intercept):
    X, y = _text(400, 300, 12, seed=2)
    lam = 0.3
    pb = Problem.build(X, y, penalty=aloocv.L2(lam), fit_intercept=intercept, tol=1e-11, n_jobs=1)
    fit = mfm.fit(pb)
    beta = mfm._beta(fit)
    eta = fit.decision_function(pb.X, None)
    d = pb.loss.derivatives(y, eta)[2]
    Xt = np.hstack([np.ones((400, 1)), X.toarray()]) if intercept else X.toarray()
    pen = np.r_[0.0, np.full(300, lam)] if intercept else np.full(300, lam)
    H = Xt.T @ (d[:, None] * Xt) + np.diag(pen)
    rows = np.array([0, 7, 123, 399], dtype=np.int64)
    h, S = mfm._RowSolves(mfm.point(pb, beta))(rows)
    S_ref = np.linalg.solve(H, Xt[rows].T).T
    # a relative residual of 1e-5 (EXACT_CG_RTOL); the leverage errs by its square
    assert np.linalg.norm(S - S_ref) <= 1e-4 * np.linalg.norm(S_ref)
    np.testing.assert_allclose(h, np.einsum("ij,ij->i", Xt[rows], S_ref), rtol=1e-8)
    # and the lockstep refits with it (the batch's Newton-CG directions)
    _, pred, n_nc = mfm._refit_rows(mfm.point(pb, beta), rows)
    assert n_nc == 0
    ref = _brute_force(X, y, rows, lam, "logistic", fit_intercept=intercept)
    np.testing.assert_allclose(pred, ref, rtol=1e-6, atol=1e-7)


def test_refits_on_one_and_two_threads_give_the_same_bits():
    # one thread: each refit's curvature column in the one pass by rows
    # (Operator::hessian_rows) and the gradients scattered by rows; two threads: the
    # products one after the other by the CSC index (enough entries that two are used)
    X, y = _text(12000, 2000, 14, seed=6)
    assert X.nnz > 1.25e5
    pb = Problem.build(X, y, penalty=aloocv.L2(0.5), n_jobs=1)
    beta = _full_beta(pb)
    rows = np.arange(0, 12000, 1200).astype(np.int64)
    one = mfm._refit_rows(mfm.point(pb, beta), rows)
    with threadpool_limits(2):
        two = mfm._refit_rows(
            mfm.point(pb.replace(options=replace(pb.options, n_threads=2)), beta), rows
        )
    np.testing.assert_array_equal(one[1], two[1])
    assert one[2] == two[2] == 0
