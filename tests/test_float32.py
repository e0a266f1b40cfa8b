"""float32 designs are read in place (no float64 copy of X) and every result matches the
float64 computation on the same values (X32.astype(float64)) to well within 1e-5."""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

import aloocv
from aloocv._validation import check_X
from conftest import make_data

RTOL = 1e-5  # the target; the widened float64 arithmetic is far closer


def _layouts(X32):
    big = np.zeros((X32.shape[0] * 2, X32.shape[1] * 3), dtype=np.float32)
    big[::2, ::3] = X32
    return {
        "C": np.ascontiguousarray(X32),
        "F": np.asfortranarray(X32),
        "strided": big[::2, ::3],
    }


def _close(a, b, name=""):
    a, b = np.asarray(a, float), np.asarray(b, float)
    scale = max(1.0, float(np.max(np.abs(b)))) if b.size else 1.0
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=RTOL * scale, err_msg=name)


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_check_X_keeps_float32_in_place(layout):
    X32 = make_data("squared", 50, 4, seed=1)[0].astype(np.float32)
    Xv = _layouts(X32)[layout]
    out = check_X(Xv)
    assert out is Xv and out.dtype == np.float32
    S = sp.csr_matrix(X32)
    assert check_X(S) is S and S.data.dtype == np.float32


def test_float32_sparse_non_canonical_stays_float32():
    X32 = make_data("squared", 40, 5, seed=2)[0].astype(np.float32)
    X32[np.abs(X32) < 0.8] = 0.0
    out = check_X(sp.csc_matrix(X32))
    assert out.format == "csr" and out.data.dtype == np.float32
    np.testing.assert_array_equal(out.toarray(), X32)


@pytest.mark.parametrize("method", ["alo", "if", "lemma3", "exact"])
def test_loo_float32_layouts_match_float64(loss, method):
    X, y = make_data(loss, 150, 6, seed=3)
    X32 = X.astype(np.float32)
    X64 = X32.astype(np.float64)
    pen = aloocv.L2(0.7)
    ref = aloocv.loo(X64, y, loss=loss, penalty=pen, method=method)
    for name, Xv in [*_layouts(X32).items(), ("sparse", sp.csr_matrix(X32))]:
        res = aloocv.loo(Xv, y, loss=loss, penalty=pen, method=method)
        _close(res.losses, ref.losses, name)
        _close(res.fit.coef_, ref.fit.coef_, name)
        _close(res.fit.intercept_, ref.fit.intercept_, name)


def test_fit_predict_and_gradient_float32(loss):
    X, y = make_data(loss, 200, 5, seed=4)
    X32 = X.astype(np.float32)
    X64 = X32.astype(np.float64)
    pen = aloocv.L2(np.linspace(0.3, 2.0, 5))
    f32 = aloocv.fit(np.asfortranarray(X32), y, loss=loss, penalty=pen)
    f64 = aloocv.fit(X64, y, loss=loss, penalty=pen)
    _close(f32.coef_, f64.coef_)
    pred = f32.decision_function(X32)
    assert pred.dtype == np.float64
    # the reference product in float64 numpy
    _close(pred, X64 @ f64.coef_ + f64.intercept_)
    g32 = aloocv.loo(X32, y, loss=loss, penalty=pen, return_gradient=True).gradient
    g64 = aloocv.loo(X64, y, loss=loss, penalty=pen, return_gradient=True).gradient
    _close(g32, g64)


def test_kfold_tune_enet_dual_float32():
    X, y = make_data("logistic", 120, 8, seed=5)
    X32 = X.astype(np.float32)
    X64 = X32.astype(np.float64)
    for method in ("alo", "exact"):
        a = aloocv.kfold(X32, y, loss="logistic", penalty=aloocv.L2(1.0), n_folds=4, method=method)
        b = aloocv.kfold(X64, y, loss="logistic", penalty=aloocv.L2(1.0), n_folds=4, method=method)
        _close(a.losses, b.losses, method)
    t32 = aloocv.tune(X32, y, loss="logistic", penalty=aloocv.L2(1.0), method="gd", max_iter=15)
    t64 = aloocv.tune(X64, y, loss="logistic", penalty=aloocv.L2(1.0), method="gd", max_iter=15)
    _close(t32.fit.coef_, t64.fit.coef_)
    _close(t32.acv, t64.acv)
    en = aloocv.ElasticNet(0.05, 0.02)
    e32 = aloocv.loo(X32, y, loss="logistic", penalty=en)
    e64 = aloocv.loo(X64, y, loss="logistic", penalty=en)
    _close(e32.losses, e64.losses)
    _close(e32.fit.coef_, e64.fit.coef_)
    Xw, yw = make_data("squared", 30, 60, seed=6)  # n < p: the dual route
    Xw32 = Xw.astype(np.float32)
    d32 = aloocv.loo(Xw32, yw, loss="squared", penalty=aloocv.L2(2.0), solver="dual")
    d64 = aloocv.loo(Xw32.astype(float), yw, loss="squared", penalty=aloocv.L2(2.0), solver="dual")
    _close(d32.losses, d64.losses)


def test_estimators_float32():
    X, y = make_data("logistic", 160, 5, seed=7)
    X32 = X.astype(np.float32)
    X64 = X32.astype(np.float64)
    a = aloocv.ALOLogisticRegressionCV(Cs=4).fit(X32, y)
    b = aloocv.ALOLogisticRegressionCV(Cs=4).fit(X64, y)
    _close(a.coef_, b.coef_)
    _close(a.decision_function(X32), b.decision_function(X64))
    Xr, yr = make_data("squared", 120, 5, seed=8)
    Xr32 = Xr.astype(np.float32)
    r32 = aloocv.ALORidgeCV(alphas=np.logspace(-2, 2, 5)).fit(Xr32, yr)
    r64 = aloocv.ALORidgeCV(alphas=np.logspace(-2, 2, 5)).fit(Xr32.astype(float), yr)
    _close(r32.coef_, r64.coef_)
    _close(r32.predict(Xr32), r64.predict(Xr32.astype(float)))


def test_multinomial_float32():
    rng = np.random.default_rng(9)
    X32 = rng.standard_normal((150, 4)).astype(np.float32)
    y = rng.integers(0, 3, 150)
    X64 = X32.astype(np.float64)
    for Xv in (X32, np.asfortranarray(X32)):
        a = aloocv.loo(Xv, y, loss="multinomial", penalty=aloocv.L2(1.0))
        b = aloocv.loo(X64, y, loss="multinomial", penalty=aloocv.L2(1.0))
        _close(a.losses, b.losses)


def test_multinomial_float32_leverage_blocks():
    # the blocks' all-ones part (the intercepts' gauge: the softmax ignores a shift common
    # to the classes) is unidentified and differs with rounding; the class-centred blocks,
    # which ALO uses, agree with the float64 pass to 1e-6 on unequal column scales
    rng = np.random.default_rng(12)
    n, K = 3000, 4
    X32 = (rng.standard_normal((n, 20)) * np.exp(rng.standard_normal(20))).astype(np.float32)
    y = rng.integers(0, K, n)
    a = aloocv.loo(X32, y, loss="multinomial", penalty=aloocv.L2(1.0))
    b = aloocv.loo(X32.astype(np.float64), y, loss="multinomial", penalty=aloocv.L2(1.0))
    C = np.eye(K) - 1.0 / K
    La, Lb = C @ np.asarray(a.leverages) @ C, C @ np.asarray(b.leverages) @ C
    assert np.max(np.abs(La - Lb)) <= 1e-6 * np.max(np.abs(Lb))
    np.testing.assert_allclose(a.predictions, b.predictions, rtol=0, atol=1e-4)
    np.testing.assert_allclose(a.losses, b.losses, rtol=1e-7)


def test_loo_float32_makes_no_copy_of_X():
    # numpy's allocations are traced: a float64 copy of X would be 2 X32.nbytes
    X, y = make_data("logistic", 8000, 80, seed=10)
    X32 = np.asfortranarray(X.astype(np.float32))
    aloocv.loo(X32, y, loss="logistic", penalty=aloocv.L2(1.0))  # warm-up (imports, caches)
    tracemalloc.start()
    try:
        res = aloocv.loo(X32, y, loss="logistic", penalty=aloocv.L2(1.0))
        res.fit.decision_function(X32)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 0.5 * X32.nbytes, (peak, X32.nbytes)


def _status_bytes(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


@pytest.mark.skipif(
    not (sys.platform.startswith("linux") and os.path.exists("/proc/self/clear_refs")),
    reason="peak RSS reset needs Linux /proc/self/clear_refs",
)
@pytest.mark.skipif(
    "libasan" in os.environ.get("LD_PRELOAD", ""),
    reason="AddressSanitizer's shadow memory and quarantine inflate the peak RSS",
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_loo_peak_memory_has_no_copy_of_X(dtype):
    # Peak resident memory of loo beyond the memory before the call (allocations of the
    # C++ core included, which tracemalloc does not see), in units of the float32 X
    # (n p 4 bytes). loo holds about 5 float64 vectors of length n (4 returned + eta), a
    # few p x p matrices and buffers of fixed size: measured 0.2 (float32) and 0.27
    # (float64) here, most of it fixed buffers at this small n. Any copy of X adds at
    # least 1 (float32 copy) or 2 (float64 copy of float32 X).
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "malloc_trim"):
        pytest.skip("needs glibc malloc_trim")
    rng = np.random.default_rng(3)
    n, p = 40000, 100
    X = rng.standard_normal((n, p), dtype=np.float32).astype(dtype)
    y = (rng.random(n) < 0.5).astype(np.float64)
    pen = aloocv.L2(1.0)
    aloocv.loo(X[:2000], y[:2000], loss="logistic", penalty=pen, n_jobs=1)  # warm-up
    gc.collect()
    libc.malloc_trim(0)  # freed heap memory back to the system: RSS counts what is new
    before = _status_bytes("VmRSS:")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets the high-water mark VmHWM to the current RSS
    res = aloocv.loo(X, y, loss="logistic", penalty=pen, n_jobs=1)
    extra = _status_bytes("VmHWM:") - before
    assert res.losses.shape == (n,)
    assert extra < 0.6 * (n * p * 4), (extra, X.nbytes)


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_hessian_float32_against_numpy(layout):
    # float32 blocks through SSYRK, summed in float64; d of both signs (Tweedie, power > 2)
    from aloocv import _blas, _core

    rng = np.random.default_rng(11)
    X32 = rng.standard_normal((3000, 7)).astype(np.float32)
    d = rng.uniform(-0.5, 2.0, 3000)
    Xt = np.column_stack([np.ones(3000), X32.astype(np.float64)])
    ref = (Xt * d[:, None]).T @ Xt
    with _blas.single_threaded_blas():
        H = _core.hessian(_layouts(X32)[layout], d, fit_intercept=True, n_threads=1)
    _close(H, ref, layout)
    np.testing.assert_array_equal(H, H.T)


def test_dask_float32_chunks():
    da = pytest.importorskip("dask.array")
    import dask

    X, y = make_data("logistic", 300, 5, seed=12)
    X32 = X.astype(np.float32)
    ref = aloocv.loo(X32.astype(np.float64), y, loss="logistic", penalty=aloocv.L2(1.0))
    with dask.config.set(scheduler="synchronous"):
        got = aloocv.loo(
            da.from_array(X32, chunks=(100, 5)), y, loss="logistic", penalty=aloocv.L2(1.0)
        )
        _close(got.losses.compute(), ref.losses)
    _close(got.fit.coef_, ref.fit.coef_)


def _register_without_strmm() -> None:
    """scipy's BLAS without STRMM: the float64 leverage pass for every design."""
    from scipy.linalg import cython_blas, cython_lapack

    from aloocv import _core

    names = ["dsyrk", "dtrsm", "dgemm", "dtrmm", "dgemv", "ssyrk"]
    caps = {k: cython_blas.__pyx_capi__[k] for k in names}
    caps["dpotrf"] = cython_lapack.__pyx_capi__["dpotrf"]
    _core.set_blas(caps)


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
@pytest.mark.parametrize("scales", ["equal", "unequal"])
def test_float32_leverage_pass_within_1e_6(layout, scales):
    # float32 X: the leverage pass runs in float32 (L^{-1} rounded once, STRMM, float64
    # norms) where the factor is well conditioned; it adds at most 1e-6 (relative) to the
    # float64 pass at the same factor, here on correlated, unequally scaled columns too
    from aloocv import _blas

    rng = np.random.default_rng(12)
    n, p = 4000, 30
    Z = rng.standard_normal((n, p))
    if scales == "unequal":
        Z = np.cumsum(Z, axis=1) * np.logspace(-2, 2, p)  # AR-like columns, 1e4 in scale
    X32 = _layouts(Z.astype(np.float32))[layout]
    y = (rng.random(n) < 1 / (1 + np.exp(-Z[:, :3].sum(1) / Z[:, :3].std()))).astype(float)
    kw = {"penalty": aloocv.L2(1.0), "tol": 1e-12}
    single = aloocv.loo(X32, y, **kw)
    try:
        _register_without_strmm()
        double = aloocv.loo(X32, y, **kw)
    finally:
        _blas.register()
    np.testing.assert_allclose(single.leverages, double.leverages, rtol=1e-6)
    # against float64 X: the float32 design's Hessian (SSYRK blocks) dominates the error
    ref = aloocv.loo(np.asarray(X32, dtype=np.float64), y, **kw)
    np.testing.assert_allclose(
        single.leverages, ref.leverages, rtol=1e-6 if scales == "equal" else 1e-4
    )
