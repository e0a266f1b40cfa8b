"""scipy.sparse X: same answers as dense input, never densified."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

import aloocv
from aloocv import _blas, _core
from conftest import make_data


def sparse_data(loss, n, p, density, seed):
    rng = np.random.default_rng(seed)
    A = sp.random(n, p, density=density, format="csr", random_state=rng)
    A.data = rng.standard_normal(A.nnz)
    _, y = make_data(loss, n, 1, seed=seed)
    beta = rng.standard_normal(p)
    eta = A @ beta * 0.5
    if loss == "squared":
        y = eta + rng.standard_normal(n)
    elif loss == "logistic":
        y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
    else:
        y = rng.poisson(np.exp(0.3 * eta)).astype(float)
    return A, y


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize("method", ["alo", "if", "lemma3", "exact"])
@pytest.mark.parametrize("intercept", [True, False])
def test_sparse_equals_dense(loss, fmt, method, intercept):
    A, y = sparse_data(loss, 150, 12, 0.3, seed=50)
    lam = np.linspace(0.5, 3.0, 12)
    dense = aloocv.loo(
        A.toarray(), y, loss=loss, penalty=aloocv.L2(lam), method=method, fit_intercept=intercept
    )
    res = aloocv.loo(
        A.asformat(fmt),
        y,
        loss=loss,
        penalty=aloocv.L2(lam),
        method=method,
        fit_intercept=intercept,
    )
    np.testing.assert_allclose(res.fit.coef_, dense.fit.coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(res.losses, dense.losses, rtol=1e-9, atol=1e-12)
    if method != "exact":
        np.testing.assert_allclose(res.leverages, dense.leverages, rtol=1e-9, atol=1e-13)


def test_sparse_hessian_kernel():
    A, _ = sparse_data("squared", 3000, 40, 0.05, seed=51)
    d = np.random.default_rng(0).uniform(0, 2, 3000)
    for intercept in (True, False):
        D = A.toarray()
        Xt = np.hstack([np.ones((3000, 1)), D]) if intercept else D
        ref = Xt.T @ (Xt * d[:, None])
        with _blas.single_threaded_blas():
            H = _core.hessian(
                (A.data, A.indices, A.indptr, 3000, 40), d, fit_intercept=intercept, n_threads=2
            )
        np.testing.assert_allclose(H, ref, rtol=1e-12, atol=1e-12)


def test_unsorted_duplicate_and_int64_indices():
    A, y = sparse_data("squared", 80, 6, 0.4, seed=52)
    coo = A.tocoo()
    # split every entry into two duplicates, shuffled, with 64-bit indices
    rows = np.r_[coo.row, coo.row].astype(np.int64)
    cols = np.r_[coo.col, coo.col].astype(np.int64)
    vals = np.r_[coo.data * 0.25, coo.data * 0.75]
    perm = np.random.default_rng(1).permutation(rows.size)
    B = sp.csr_matrix((vals[perm], (rows[perm], cols[perm])), shape=A.shape)
    B.indices = B.indices.astype(np.int64)
    B.indptr = B.indptr.astype(np.int64)
    a = aloocv.loo(A, y, loss="squared", penalty=aloocv.L2(1.0))
    b = aloocv.loo(B, y, loss="squared", penalty=aloocv.L2(1.0))
    np.testing.assert_allclose(a.losses, b.losses, rtol=1e-12)


def test_sparse_threads_equal_serial():
    A, y = sparse_data("logistic", 4000, 30, 0.1, seed=53)
    one = aloocv.loo(A, y, loss="logistic", penalty=aloocv.L2(1.0), n_jobs=1)
    two = aloocv.loo(A, y, loss="logistic", penalty=aloocv.L2(1.0), n_jobs=2)
    np.testing.assert_array_equal(one.losses, two.losses)


def test_sparse_is_never_densified():
    n, p = 40000, 300
    A, y = sparse_data("logistic", n, p, 0.002, seed=54)
    dense_bytes = n * p * 8  # 96 MB
    # the primal route's sparse kernels; the matrix-free route (what "auto" takes here)
    # holds n x 16 group estimates of the leverages besides its n-vectors
    for solver, share in (("primal", 10), ("matrix_free", 4)):
        tracemalloc.start()
        try:
            res = aloocv.loo(A, y, loss="logistic", penalty=aloocv.L2(1.0), solver=solver)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert np.isfinite(res.mean)
        assert peak < dense_bytes / share, solver
