"""Memory layouts, dtypes, thread counts and the BLAS/Eigen kernels give the same answer."""

from __future__ import annotations

import numpy as np
import pytest

import aloocv
from aloocv import _blas, _core
from conftest import make_data


def _variants(X):
    big = np.zeros((X.shape[0] * 2, X.shape[1] * 3))
    big[::2, ::3] = X
    return {
        "C": np.ascontiguousarray(X),
        "F": np.asfortranarray(X),
        "strided": big[::2, ::3],  # neither C- nor F-contiguous, used in place
        "transposed_view": np.ascontiguousarray(X.T).T,  # F order through a view
    }


@pytest.mark.parametrize("method", ["alo", "exact", "if"])
def test_layouts_give_identical_results(loss, method):
    X, y = make_data(loss, 90, 6, seed=30)
    ref = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(0.8), method=method)
    for name, Xv in _variants(X).items():
        assert Xv.dtype == np.float64
        res = aloocv.loo(Xv, y, loss=loss, penalty=aloocv.L2(0.8), method=method)
        np.testing.assert_allclose(res.losses, ref.losses, rtol=1e-12, atol=1e-14, err_msg=name)
        np.testing.assert_allclose(res.fit.coef_, ref.fit.coef_, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rows_with_a_longer_stride_give_the_contiguous_rows_bits(dtype):
    # the row kernels read rows in place at any row stride (a column slice of a wider
    # C-ordered array): the same products in the same order as the contiguous copy
    X, y = make_data("logistic", 3000, 37, seed=38)
    wide = np.zeros((3000, 45), dtype=dtype)
    wide[:, 3:40] = X
    view, copy = wide[:, 3:40], np.ascontiguousarray(wide[:, 3:40])
    assert not view.flags.c_contiguous and view.strides[1] == view.itemsize
    kw = {"loss": "logistic", "penalty": aloocv.L2(0.5), "n_jobs": 1}
    a, b = aloocv.loo(view, y, **kw), aloocv.loo(copy, y, **kw)
    np.testing.assert_array_equal(a.fit.coef_, b.fit.coef_)
    np.testing.assert_array_equal(a.losses, b.losses)


def test_float32_input(loss):
    X, y = make_data(loss, 120, 5, seed=31)
    X32 = X.astype(np.float32)
    res32 = aloocv.loo(X32, y, loss=loss, penalty=aloocv.L2(1.0))
    # read in place, accumulated in float64 (the Hessian from float32 SSYRK blocks): the
    # upcast input's results to far below float32 resolution
    res64 = aloocv.loo(X32.astype(np.float64), y, loss=loss, penalty=aloocv.L2(1.0))
    np.testing.assert_allclose(res32.losses, res64.losses, rtol=1e-6, atol=1e-12)
    # and close to the float64 data, to float32 resolution
    ref = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(1.0))
    tol = 100 * np.finfo(np.float32).eps
    np.testing.assert_allclose(res32.losses, ref.losses, rtol=tol, atol=tol)


def test_integer_and_list_input():
    X = [[0, 1], [1, 0], [1, 1], [2, 1], [0, 3]]
    y = [0.5, 1.0, 2.0, 1.5, 3.0]
    res = aloocv.fit(X, y, loss="squared", penalty=aloocv.L2(0.1))
    ref = aloocv.fit(np.array(X, float), np.array(y), loss="squared", penalty=aloocv.L2(0.1))
    np.testing.assert_array_equal(res.coef_, ref.coef_)


@pytest.mark.parametrize("method", ["alo", "exact"])
def test_threads_equal_serial(loss, method):
    # big enough for several row chunks and blocks
    X, y = make_data(loss, 5000 if method == "alo" else 600, 20, seed=32)
    one = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(2.0), method=method, n_jobs=1)
    two = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(2.0), method=method, n_jobs=2)
    three = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(2.0), method=method, n_jobs=3)
    # fixed-order reductions: bitwise identical, not merely close
    np.testing.assert_array_equal(one.losses, two.losses)
    np.testing.assert_array_equal(one.losses, three.losses)
    np.testing.assert_array_equal(one.fit.coef_, two.fit.coef_)


def test_hessian_kernel_matches_numpy():
    rng = np.random.default_rng(33)
    X = rng.standard_normal((3000, 17))
    d = rng.uniform(0, 2, 3000)
    for intercept in (True, False):
        Xt = np.hstack([np.ones((3000, 1)), X]) if intercept else X
        ref = Xt.T @ (Xt * d[:, None])
        for Xv in _variants(X).values():
            with _blas.single_threaded_blas():
                H = _core.hessian(Xv, d, fit_intercept=intercept, n_threads=2)
            np.testing.assert_allclose(H, ref, rtol=1e-12, atol=1e-10)
            np.testing.assert_array_equal(H, H.T)


@pytest.mark.parametrize(
    "width", [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 14, 47, 50, 51, 159, 160, 161]
)
@pytest.mark.parametrize("intercept", [True, False], ids=["intercept", "no-intercept"])
def test_narrow_hessians_match_numpy(width, intercept):
    # narrow dense float64 rows take the core's own weighted update (8 x 6 tiles, up to
    # kSmallSyrkMax = 160 columns of X~; d of any sign in one pass): every remainder of
    # the 8-row strips and 6-column tiles, runs of 64 rows with a tail, rows read in
    # place (C order, also with a row stride longer than the width) and packed (F order,
    # a column stride); with the kernel off, the DSYRK path. 140000 rows at width 13:
    # chunks of 2187 rows, two blocks of block_rows(14) = 2048 rows each
    rng = np.random.default_rng(40 + width)
    n = 140000 if width == 13 else 700
    wide = rng.standard_normal((n, width + 3))
    X = wide[:, 1 : width + 1]
    d = rng.uniform(-0.5, 2.0, n)  # negative curvature on some rows (Tweedie, power > 2)
    Xt = np.hstack([np.ones((n, 1)), X]) if intercept else X
    ref = Xt.T @ (Xt * d[:, None])
    scale = (np.abs(Xt).T ** 2 @ np.abs(d)).max()
    layouts = {"row-strided": X, **_variants(np.ascontiguousarray(X))}
    with _blas.single_threaded_blas():
        out = {
            k: _core.hessian(v, d, fit_intercept=intercept, n_threads=1) for k, v in layouts.items()
        }
        two = _core.hessian(X, d, fit_intercept=intercept, n_threads=2)
        _core.use_row_kernels(enabled=False)
        try:
            blas = _core.hessian(X, d, fit_intercept=intercept, n_threads=1)
        finally:
            _core.use_row_kernels(enabled=True)
    for H in [*out.values(), blas]:
        np.testing.assert_allclose(H, ref, rtol=0, atol=1e-13 * scale)
        np.testing.assert_array_equal(H, H.T)
    np.testing.assert_array_equal(out["C"], out["row-strided"])  # rows in place either way
    np.testing.assert_array_equal(two, out["row-strided"])  # chunks fixed by the data


@pytest.mark.parametrize("width", [1, 6, 7, 8, 9, 13, 50, 51, 158, 159, 160])
@pytest.mark.parametrize("intercept", [True, False], ids=["intercept", "no-intercept"])
def test_narrow_leverages_match_numpy(width, intercept):
    # narrow dense float64 rows take the small kernel's leverage pass (||L^{-1} x~_i||^2
    # in 8 x 6 register tiles, L^{-1} padded to a multiple of 8 rows, groups of 6 rows with
    # a tail; the intercept's 1 inside the kernel where rows are read in place): h against
    # x~_i^T H^{-1} x~_i from numpy at the fitted point, every layout, with the kernels off
    # (DTRMM) too
    rng = np.random.default_rng(60 + width)
    n = 1201 if width > 100 else 401  # (ALO's self-check stays quiet)
    X = rng.standard_normal((n, width + 2))[:, 1 : width + 1] * np.geomspace(0.5, 2.0, width)
    y = rng.random(n) < 1 / (1 + np.exp(-X @ rng.standard_normal(width) / np.sqrt(width)))
    y = y.astype(float)
    kw = dict(loss="logistic", penalty=aloocv.L2(1.0), fit_intercept=intercept, tol=1e-12)
    ref = None
    runs = {
        name: Xv for name, Xv in {"row-strided": X, **_variants(np.ascontiguousarray(X))}.items()
    }
    for name, Xv in runs.items():
        res = aloocv.loo(Xv, y, **kw)
        if ref is None:
            Xt = np.hstack([np.ones((n, 1)), X]) if intercept else X
            mu = 1 / (1 + np.exp(-(X @ res.fit.coef_ + res.fit.intercept_)))
            pen = np.r_[[0.0] * intercept, np.ones(width)]
            H = Xt.T @ (Xt * (mu * (1 - mu))[:, None]) + np.diag(pen)
            ref = np.einsum("ij,ji->i", Xt, np.linalg.solve(H, Xt.T))
        np.testing.assert_allclose(res.leverages, ref, rtol=1e-11, err_msg=name)
    _core.use_row_kernels(enabled=False)
    try:
        off = aloocv.loo(X, y, **kw)
    finally:
        _core.use_row_kernels(enabled=True)
    np.testing.assert_allclose(off.leverages, ref, rtol=1e-11)


@pytest.mark.skipif(not _core.has_row_gemv(), reason="the CPU has no AVX2 + FMA")
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("beta", [0.0, 1.0, -0.5])
def test_row_kernels_match_numpy(transpose, beta):
    # the row-block products of the O(n p) passes (C-ordered X): every remainder of the
    # two-accumulator dot and of the axpy, on rows with a stride longer than their width
    rng = np.random.default_rng(36)
    for m in (1, 2, 3, 7, 64):
        for n in (1, 2, 3, 4, 5, 6, 7, 9, 200):
            wide = rng.standard_normal((m, n + 3))
            A = wide[:, 1 : n + 1]  # rows of width n, row stride n + 3
            x = rng.standard_normal(m if transpose else n)
            y0 = rng.standard_normal(n if transpose else m)
            ref = (A.T @ x if transpose else A @ x) + beta * y0
            y = y0.copy()
            assert _core.row_gemv(A, x, y, transpose=transpose, beta=beta)
            np.testing.assert_allclose(y, ref, rtol=1e-13, atol=1e-13 * np.abs(A).sum())


@pytest.mark.skipif(not _core.has_row_gemv(), reason="the CPU has no AVX2 + FMA")
@pytest.mark.parametrize("transpose", [False, True])
def test_float32_row_kernels_equal_the_float64_ones_on_the_same_values(transpose):
    # float32 rows widened in registers: the float64 kernel's products and sums, bit for bit
    rng = np.random.default_rng(37)
    A32 = rng.standard_normal((13, 203)).astype(np.float32)[:, 1:202]
    A64 = A32.astype(np.float64)
    x = rng.standard_normal(13 if transpose else 201)
    y32, y64 = np.zeros(201 if transpose else 13), np.zeros(201 if transpose else 13)
    assert _core.row_gemv(A64, x, y64, transpose=transpose, beta=0.0)
    assert _core.row_gemv(A32, x, y32, transpose=transpose, beta=0.0)
    np.testing.assert_array_equal(y32, y64)
    ref = A64.T @ x if transpose else A64 @ x
    np.testing.assert_allclose(y64, ref, rtol=1e-13, atol=1e-13 * np.abs(A64).sum())


@pytest.mark.skipif(not _core.has_row_gemv(), reason="the CPU has no AVX2 + FMA")
def test_row_kernels_and_the_dgemv_path_agree(loss):
    # C-ordered X: the row kernels, and with them off the path of CPUs without AVX2 + FMA
    X, y = make_data(loss, 3000, 40, seed=39)
    kw = {"loss": loss, "penalty": aloocv.L2(1.0), "n_jobs": 1}
    a = aloocv.loo(X, y, **kw)
    _core.use_row_kernels(enabled=False)
    try:
        assert not _core.has_row_gemv()
        b = aloocv.loo(X, y, **kw)
        b32 = aloocv.loo(X.astype(np.float32), y, **kw)
    finally:
        _core.use_row_kernels(enabled=True)
    assert _core.has_row_gemv()
    a32 = aloocv.loo(X.astype(np.float32), y, **kw)
    np.testing.assert_allclose(a.losses, b.losses, rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(a.fit.coef_, b.fit.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(a32.losses, b32.losses, rtol=1e-9, atol=1e-14)


def test_row_kernels_refuse_a_column_stride():
    A = np.zeros((4, 6))[:, ::2]
    with pytest.raises(ValueError, match="contiguous rows"):
        _core.row_gemv(A, np.zeros(3), np.zeros(4), transpose=False, beta=0.0)
    with pytest.raises(ValueError, match="float64 or float32"):
        _core.row_gemv(
            np.zeros((4, 3), np.int64), np.zeros(3), np.zeros(4), transpose=False, beta=0.0
        )


def test_blas_and_eigen_kernels_agree(loss):
    X, y = make_data(loss, 2000, 15, seed=34)
    assert _core.blas_enabled()
    a = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(1.0))
    _blas.use_blas(False)
    try:
        assert not _core.blas_enabled()
        b = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(1.0))
    finally:
        _blas.use_blas(True)
    np.testing.assert_allclose(a.losses, b.losses, rtol=1e-11)
    np.testing.assert_allclose(a.leverages, b.leverages, rtol=1e-10)


def test_input_arrays_are_not_modified():
    X, y = make_data("logistic", 100, 4, seed=35)
    Xc, yc = X.copy(), y.copy()
    aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0), method="exact")
    np.testing.assert_array_equal(X, Xc)
    np.testing.assert_array_equal(y, yc)


def test_single_threaded_blas_is_reentrant_and_restores():
    from threadpoolctl import threadpool_info

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    before = blas_threads()
    with _blas.single_threaded_blas():
        assert set(blas_threads()) == {1}
        with _blas.single_threaded_blas():
            assert set(blas_threads()) == {1}
        assert set(blas_threads()) == {1}
    assert blas_threads() == before


# -- the core's elementwise kernels (vector_math.hpp) against the C library
def _ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ia, ib = a.view(np.int64), b.view(np.int64)
    return np.abs(ia - ib)


@pytest.mark.parametrize("fn", ["exp", "log1p_unit"])
def test_vector_math_is_within_one_ulp_of_the_c_library(fn):
    import math

    rng = np.random.default_rng(40)
    u = rng.random(20000)
    if fn == "exp":
        # the range the losses meet (-|eta| for the logistic, +-eta for Poisson and gamma),
        # the subnormal results (below -708), overflow (above 709.78) and the edges of the
        # reduction (|r| = log(2) / 2)
        x = np.concatenate([-50.0 * u, -745.2 * u, -1e-3 * u, -np.ldexp(u, -40)])
        x = np.concatenate([x, 50.0 * u - 25.0, 709.9 * u, np.ldexp(u, -30)])
        x = np.r_[x, 0.0, -0.0, -708.0, -709.78, -745.1, -745.2, -800.0, -np.inf, np.inf]
        x = np.r_[x, 708.9, 709.0, 709.5, 709.78, 709.79, 710.0]
        x = np.r_[x, -0.34657359027997264, -0.3465735902799727, -5e-324]
        big = math.log(np.finfo(np.float64).max)  # math.exp raises above it
        ref = np.array([math.exp(v) if v <= big else math.inf for v in x])
    else:
        x = np.concatenate([u, np.exp(-50.0 * u), np.exp(-700.0 * u)])
        x = np.r_[x, 0.0, 1.0, math.sqrt(2.0) - 1.0, 5e-324, 1e-310]
        ref = np.array([math.log1p(v) for v in x])
    got = _core.vector_math(fn, x)
    assert got.shape == x.shape
    # every tail length of the four-wide loop gives the same values
    for m in (1, 2, 3, 5, 7):
        np.testing.assert_array_equal(_core.vector_math(fn, x[-m:]), got[-m:])
    assert _ulps(got, ref).max() <= 1
    nan = _core.vector_math(fn, np.array([np.nan, 0.5]))
    assert np.isnan(nan[0]) and np.isfinite(nan[1])


def test_vector_math_refuses_an_unknown_function():
    with pytest.raises(ValueError, match="exp"):
        _core.vector_math("sin", np.zeros(3))
