"""Regression tests of issue 9 (part A): no crash, no silent wrong answer, one validation
layer. Each test names the defect it pins down (the numbers of the issue)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import scipy.sparse as sp
from threadpoolctl import threadpool_info, threadpool_limits

import aloocv
from aloocv import _blas, _core
from aloocv._validation import check_X
from conftest import make_data

X0, Y0 = make_data("squared", 40, 5, seed=90)
XL, YL = make_data("logistic", 60, 4, seed=91)


def sparse_X(seed=92, n=40, p=5):
    rng = np.random.default_rng(seed)
    D = rng.standard_normal((n, p)) * (rng.random((n, p)) < 0.5)
    return D


# ------------------------------------------------------------------ 1. BKK's input


def test_bkk_p0_is_a_value_error():
    with pytest.raises(ValueError, match="X is empty"):
        aloocv.BKKCriterion.from_data(np.zeros((10, 0)), np.arange(10.0))


def test_bkk_list_equals_array():
    a = aloocv.BKKCriterion.from_data(X0.tolist(), Y0, T=3)
    b = aloocv.BKKCriterion.from_data(X0, Y0, T=3)
    np.testing.assert_array_equal(a.s, b.s)
    np.testing.assert_array_equal(a.C, b.C)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "bsr", "lil"])
def test_bkk_sparse_formats_equal_dense(fmt):
    D = sparse_X(n=6, p=6)  # square: a CSC read as CSR would be the transpose
    y = np.arange(6.0)
    ref = aloocv.BKKCriterion.from_data(D, y, T=2)
    got = aloocv.BKKCriterion.from_data(sp.csr_matrix(D).asformat(fmt), y, T=2)
    np.testing.assert_allclose(got.s, ref.s, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.abs(got.C), np.abs(ref.C), rtol=1e-10, atol=1e-12)


def test_bkk_duplicate_entries_are_summed():
    D = sparse_X(n=8, p=4)
    A = sp.coo_matrix(D)
    # split every entry into two halves stored twice (unsorted, duplicated CSR)
    dup = sp.csr_matrix(
        (np.r_[A.data / 2, A.data / 2], (np.r_[A.row, A.row], np.r_[A.col, A.col])), shape=D.shape
    )
    raw = sp.csr_matrix((dup.data, dup.indices, dup.indptr), shape=D.shape)
    y = np.arange(8.0)
    ref = aloocv.BKKCriterion.from_data(D, y, T=1)
    got = aloocv.BKKCriterion.from_data(raw, y, T=1)
    np.testing.assert_allclose(got.s, ref.s, rtol=1e-12)


def test_bkk_nan_y_and_bad_flags():
    with pytest.raises(ValueError, match="y contains NaN"):
        aloocv.BKKCriterion.from_data(X0, np.r_[Y0[:-1], np.nan])
    with pytest.raises(TypeError, match="fit_intercept must be a bool"):
        aloocv.BKKCriterion.from_data(X0, Y0, fit_intercept="no")


# ------------------------------------------------------------------ 2. sparse ranges


def _bad_csr(kind):
    A = sp.csr_matrix(sparse_X())
    if kind == "index>p":
        A.indices[3] = 10**6
    elif kind == "index=p":
        A.indices[3] = A.shape[1]
    elif kind == "negative":
        A.indices[3] = -1
    elif kind == "indptr":
        A.indptr[5], A.indptr[6] = A.indptr[6], A.indptr[5] + 1
    elif kind == "indptr_end":
        A.indptr[-1] += 5
    return A


ENTRY = {
    "fit": lambda X, y: aloocv.fit(X, y, loss="squared"),
    "loo": lambda X, y: aloocv.loo(X, y, loss="squared"),
    "kfold": lambda X, y: aloocv.kfold(X, y, loss="squared", n_folds=4),
    "tune": lambda X, y: aloocv.tune(X, y, loss="squared", method="grid", n_grid=3),
    "ALORidgeCV": lambda X, y: aloocv.ALORidgeCV().fit(X, y),
    "ALOElasticNetCV": lambda X, y: aloocv.ALOElasticNetCV(alphas=3).fit(X, y),
    "BKK": lambda X, y: aloocv.BKKCriterion.from_data(X, y, T=1),
}


@pytest.mark.parametrize("kind", ["index>p", "index=p", "negative", "indptr", "indptr_end"])
@pytest.mark.parametrize("entry", sorted(ENTRY))
def test_malformed_sparse_is_a_value_error(entry, kind):
    with pytest.raises(ValueError, match="malformed sparse matrix"):
        ENTRY[entry](_bad_csr(kind), Y0)


@pytest.mark.parametrize("fmt", ["csc", "coo"])
def test_malformed_other_formats(fmt):
    A = sp.csr_matrix(sparse_X()).asformat(fmt)
    if fmt == "csc":
        A.indices[2] = A.shape[0]
    else:
        A.col[2] = A.shape[1] + 3
    with pytest.raises(ValueError, match="out of range"):
        aloocv.fit(A, Y0, loss="squared")


def test_int64_indices_are_checked_then_narrowed():
    D = sparse_X()
    A = sp.csr_matrix(D)
    A64 = sp.csr_matrix(
        (A.data, A.indices.astype(np.int64), A.indptr.astype(np.int64)), shape=A.shape
    )
    got = aloocv.loo(A64, Y0, loss="squared")
    ref = aloocv.loo(D, Y0, loss="squared")
    np.testing.assert_allclose(got.losses, ref.losses, rtol=1e-12)
    # an int64 index that would wrap to a valid int32 one is out of range, not narrowed
    bad = A.copy()
    bad.indices = A.indices.astype(np.int64)
    bad.indptr = A.indptr.astype(np.int64)
    bad.indices[0] = 2**32 + 1  # int32(2**32 + 1) == 1: a valid column
    with pytest.raises(ValueError, match="out of range"):
        aloocv.fit(bad, Y0, loss="squared")


def test_too_wide_sparse_is_refused():
    A = sp.csr_matrix(
        (np.ones(3), np.array([0, 1, 2**31 + 2], dtype=np.int64), np.array([0, 1, 2, 3, 3, 3])),
        shape=(5, 2**31 + 5),
    )
    with pytest.raises(ValueError, match="2\\^31 or more"):
        aloocv.fit(A, np.arange(5.0), loss="squared")


def test_canonical_csr_is_used_in_place_and_input_untouched():
    A = sp.csr_matrix(sparse_X())
    assert check_X(A) is A
    # unsorted and duplicated: the caller's arrays are not modified
    B = sp.csr_matrix((np.array([1.0, 2.0, 3.0]), np.array([2, 0, 2]), np.array([0, 3])), (1, 3))
    data, idx = B.data.copy(), B.indices.copy()
    C = check_X(B)
    np.testing.assert_array_equal(C.toarray(), [[2.0, 0.0, 4.0]])
    np.testing.assert_array_equal(B.data, data)
    np.testing.assert_array_equal(B.indices, idx)


def test_core_rejects_what_validation_would():
    # a direct call of the core: structural checks in the binding as a second line
    A = _bad_csr("index=p")
    y = Y0.copy()
    pen = np.ones(5)
    with pytest.raises(ValueError, match="out of range"):
        _core.fit(
            (A.data, A.indices, A.indptr, 40, 5),
            y,
            None,
            "squared",
            pen,
            fit_intercept=True,
            tol=1e-8,
            max_iter=10,
            n_threads=1,
            beta0=None,
        )
    with pytest.raises(TypeError, match="numpy array"):
        _core.fit(
            X0.tolist(),
            y,
            None,
            "squared",
            pen,
            fit_intercept=True,
            tol=1e-8,
            max_iter=10,
            n_threads=1,
            beta0=None,
        )


# ------------------------------------------------------------------ 5. kernel strides


def _odd_strides(M):
    """A float64 view whose byte strides are not multiples of 8 (a field of a packed record)."""
    rec = np.zeros(M.size, dtype=np.dtype([("v", "<f8"), ("pad", "i1")], align=False))
    rec["v"] = M.ravel()
    view = rec["v"].reshape(M.shape)
    assert view.strides[1] == 9
    return view


def test_kernel_odd_strides():
    rng = np.random.default_rng(93)
    Z = rng.standard_normal((12, 3))
    K = Z @ Z.T
    y = rng.standard_normal(12)
    ref = aloocv.kernel_ridge_loo(K, y, 0.5)
    got = aloocv.kernel_ridge_loo(_odd_strides(K), y, 0.5)
    np.testing.assert_array_equal(got.losses, ref.losses)
    with pytest.raises(ValueError, match="strides"):
        _core.kernel_ridge_loo(_odd_strides(K), y, None, 0.5, fit_intercept=False)


# ------------------------------------------------------------------ 6. BLAS threads


def _blas_threads():
    return sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})


def test_overlapping_threads_restore_blas_limits():
    assert _core.blas_enabled()
    with threadpool_limits(limits=3, user_api="blas"):
        before = _blas_threads()
        a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
        errors = []

        def first():
            try:
                with _blas.single_threaded_blas():
                    a_in.set()
                    b_in.wait(10)
                a_out.set()  # leaves while the second thread is still inside
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        def second():
            try:
                a_in.wait(10)
                with _blas.single_threaded_blas():
                    b_in.set()
                    a_out.wait(10)
                    assert _blas_threads() == [1]  # still limited: one holder is left
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        ts = [threading.Thread(target=first), threading.Thread(target=second)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
        assert not errors
        assert _blas_threads() == before


def test_concurrent_calls_restore_blas_limits():
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        out = {}

        def work(k):
            out[k] = [aloocv.loo(XL, YL, loss="logistic").mean for _ in range(15)]

        ts = [threading.Thread(target=work, args=(k,)) for k in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        assert _blas_threads() == before
        assert out[0] == out[1] == out[2]


# ------------------------------------------------------------------ 8. misleading / silent


@pytest.mark.parametrize("solver", ["primal", "dual"])
def test_huge_penalty_is_not_singular(solver):
    res = aloocv.loo(XL, YL, loss="logistic", penalty=1e15, solver=solver)
    assert np.isfinite(res.mean)
    np.testing.assert_allclose(res.fit.coef_, 0.0, atol=1e-12)


def test_tiny_weights_are_scale_free():
    # w -> c w with lam -> c lam is the same problem: tiny weights are not singular
    c = 1e-17
    a = aloocv.loo(XL, YL, loss="logistic", penalty=c, sample_weight=np.full(60, c))
    b = aloocv.loo(XL, YL, loss="logistic", penalty=1.0)
    np.testing.assert_allclose(a.fit.coef_, b.fit.coef_, rtol=1e-8)
    np.testing.assert_allclose(a.losses, b.losses, rtol=1e-8)


def test_singular_message_is_accurate():
    X = np.hstack([X0, X0[:, :1]])
    with pytest.raises(ValueError, match="singular .* no curvature"):
        aloocv.fit(X, Y0, loss="squared", penalty=0.0)


COMPLEX = {
    "y": lambda: aloocv.fit(X0, Y0 + 0j, loss="squared"),
    "X": lambda: aloocv.fit(X0 + 0j, Y0, loss="squared"),
    "sample_weight": lambda: aloocv.fit(X0, Y0, loss="squared", sample_weight=np.ones(40) + 1j),
    "K": lambda: aloocv.kernel_ridge_loo(np.eye(4) + 0j, np.ones(4), 1.0),
    "lam": lambda: aloocv.kernel_ridge_loo(np.eye(4), np.ones(4), 1.0 + 0j),
    "L2": lambda: aloocv.L2(np.ones(3) + 1j),
    "ElasticNet": lambda: aloocv.ElasticNet(1.0 + 1j, 0.0),
    "coef": lambda: aloocv.loo(X0, Y0, loss="squared", coef=np.zeros(5) + 0j),
    "sparse X": lambda: aloocv.fit(sp.csr_matrix(X0 + 0j), Y0, loss="squared"),
}


@pytest.mark.parametrize("what", sorted(COMPLEX))
def test_complex_input_is_a_type_error(what):
    with pytest.raises(TypeError, match="(real|complex)"):
        COMPLEX[what]()


def test_overflow_is_a_value_error():
    with pytest.raises(ValueError, match="overflow"):
        aloocv.loo(X0[:3], np.array([1e300, -1e300, 1e300]), loss="squared", solver="dual")
    with pytest.raises(ValueError, match="overflow"):
        aloocv.loo(X0, np.full(40, 1e300), loss="poisson", fit_intercept=False)
    with pytest.raises(ValueError, match="overflow"):
        aloocv.SBKKRegressor(learning_rate=1e300, max_iter=5).fit(X0, Y0)
    with pytest.raises(ValueError, match="overflow|eigendecomposition"):
        aloocv.BKKRidge(max_iter=5).fit(X0 * 1e200, Y0)
    with pytest.raises(ValueError, match="overflow"):
        aloocv.BKKRidge(max_iter=5).fit(X0, np.r_[np.full(39, 1.7e308), 0.0])
    # a huge but representable response is fine: BKK works on the rescaled response
    big = aloocv.BKKRidge(max_iter=5).fit(X0, Y0 * 1e300)
    ref = aloocv.BKKRidge(max_iter=5).fit(X0, Y0)
    np.testing.assert_allclose(big.coef_, ref.coef_ * 1e300, rtol=1e-10)


BOOL_FLAGS = {
    "fit": lambda v: aloocv.fit(X0, Y0, loss="squared", fit_intercept=v),
    "loo": lambda v: aloocv.loo(X0, Y0, loss="squared", fit_intercept=v),
    "loo gradient": lambda v: aloocv.loo(X0, Y0, loss="squared", return_gradient=v),
    "kfold": lambda v: aloocv.kfold(X0, Y0, loss="squared", fit_intercept=v),
    "tune": lambda v: aloocv.tune(X0, Y0, loss="squared", method="grid", fit_intercept=v),
    "kernel": lambda v: aloocv.kernel_ridge_loo(np.eye(4), np.ones(4), 1.0, fit_intercept=v),
    "nested": lambda v: aloocv.nested_cv(
        {"loss": "squared", "candidates": [1.0], "fit_intercept": v}, X0, Y0
    ),
    "ALORidgeCV": lambda v: aloocv.ALORidgeCV(fit_intercept=v).fit(X0, Y0),
    "ALOLogisticRegressionCV": lambda v: aloocv.ALOLogisticRegressionCV(fit_intercept=v).fit(
        XL, YL
    ),
    "BKKRidge": lambda v: aloocv.BKKRidge(fit_intercept=v).fit(X0, Y0),
}


@pytest.mark.parametrize("value", ["no", 1, None])
@pytest.mark.parametrize("entry", sorted(BOOL_FLAGS))
def test_flags_must_be_bools(entry, value):
    with pytest.raises(TypeError, match="must be a bool"):
        BOOL_FLAGS[entry](value)


def test_numpy_bools_are_bools():
    a = aloocv.fit(X0, Y0, loss="squared", fit_intercept=np.bool_(False))
    assert a.intercept_ == 0.0


@pytest.mark.parametrize("bad", ["1.5", True, b"1", None, [1.0, "a"]])
def test_penalty_values_must_be_real_numbers(bad):
    with pytest.raises(TypeError):
        aloocv.L2(bad)


@pytest.mark.parametrize(
    "est",
    [
        aloocv.ALOLogisticRegressionCV(Cs=True),
        aloocv.ALOLogisticRegressionCV(Cs="10"),
        aloocv.ALORidgeCV(alphas=True),
        aloocv.ALORidgeCV(alphas=["1"]),
    ],
)
def test_grids_must_be_real_numbers(est):
    with pytest.raises(TypeError, match="must be a real number"):
        est.fit(XL, YL)


def test_nested_cv_refuses_boolean_Cs():
    with pytest.raises(TypeError, match="Cs must be"):
        aloocv.nested_cv(aloocv.ALOLogisticRegressionCV(Cs=True), XL, YL)


def test_misaligned_float64_is_copied_once():
    buf = np.zeros(X0.size * 8 + 1, np.uint8)[1:].view(np.float64).reshape(X0.shape)
    buf[:] = X0
    assert not buf.flags.aligned
    Xc = check_X(buf)
    assert Xc.flags.aligned and Xc is not buf
    np.testing.assert_array_equal(Xc, X0)
    ref = aloocv.loo(X0, Y0, loss="squared")
    np.testing.assert_array_equal(aloocv.loo(buf, Y0, loss="squared").losses, ref.losses)
    # misaligned vectors too (y, sample_weight, coef)
    ybuf = np.zeros(Y0.size * 8 + 1, np.uint8)[1:].view(np.float64)
    ybuf[:] = Y0
    assert not ybuf.flags.aligned
    got = aloocv.loo(X0, ybuf, loss="squared", sample_weight=ybuf * 0 + 1.0)
    np.testing.assert_array_equal(got.losses, ref.losses)


# ------------------------------------------------------------------ 9. thread counts


def test_dual_kernel_bitwise_above_8_threads():
    # p / 1024 >= 9 column chunks would have given 9 partials with 9 threads
    rng = np.random.default_rng(94)
    X = rng.standard_normal((40, 9300))
    y = rng.standard_normal(40)
    one = aloocv.loo(X, y, loss="squared", penalty=3.0, solver="dual", n_jobs=1)
    many = aloocv.loo(X, y, loss="squared", penalty=3.0, solver="dual", n_jobs=9)
    np.testing.assert_array_equal(one.losses, many.losses)
    np.testing.assert_array_equal(one.fit.coef_, many.fit.coef_)


def test_hessian_bitwise_above_64_threads():
    # n / 256 >= 65 row chunks would have given 65 partials with 65 threads
    X, y = make_data("squared", 65 * 256 + 100, 3, seed=95)
    one = aloocv.fit(X, y, loss="squared", n_jobs=1)
    many = aloocv.fit(X, y, loss="squared", n_jobs=65)
    three = aloocv.fit(X, y, loss="squared", n_jobs=3)
    np.testing.assert_array_equal(one.coef_, many.coef_)
    np.testing.assert_array_equal(one.coef_, three.coef_)
    with _blas.single_threaded_blas():
        d = np.linspace(0.5, 1.5, X.shape[0])
        np.testing.assert_array_equal(
            _core.hessian(X, d, fit_intercept=True, n_threads=1),
            _core.hessian(X, d, fit_intercept=True, n_threads=65),
        )


def test_prediction_and_grid_inputs_are_validated():
    f = aloocv.fit(X0, Y0, loss="squared")
    with pytest.raises(ValueError, match="NaN"):
        f.decision_function(np.full((2, 5), np.nan))
    with pytest.raises(TypeError, match="real"):
        f.predict(X0 + 1j)
    with pytest.raises(ValueError, match="X has 4 features but the model was fitted on 5"):
        f.predict(X0[:, :4])
    np.testing.assert_allclose(f.predict(sp.csr_matrix(X0)), f.predict(X0), rtol=1e-13)
    for grid in (["1.0", "2.0"], [1.0 + 1j], [True]):
        with pytest.raises(TypeError, match="grid must be real numbers"):
            aloocv.tune(X0, Y0, loss="squared", method="grid", grid=grid)


@pytest.mark.parametrize(
    "call",
    [
        lambda: aloocv.tune(X0, Y0, loss="squared", tol="1e-3"),
        lambda: aloocv.tune(X0, Y0, loss="squared", learning_rate=True),
        lambda: aloocv.fit(X0, Y0, loss="squared", tol="1e-8"),
        lambda: aloocv.dev_set(
            {"loss": "squared", "candidates": [1.0]}, X0, Y0, dev_fraction="0.2"
        ),
        lambda: aloocv.kernel_ridge_loo(np.eye(4), np.ones(4), "1.0"),
        lambda: aloocv.nested_cv({"loss": "squared", "candidates": ["1.0"]}, X0, Y0),
    ],
)
def test_numbers_given_as_strings_are_type_errors(call):
    with pytest.raises(TypeError, match="must be a real number"):
        call()


def test_small_matrix_at_an_odd_address():
    """A p x p matrix whose buffer does not start at a multiple of 8 (as a dask task can
    receive it after unpickling) is read correctly by the bindings (byte-wise copy; the
    sanitizer build flags a misaligned load otherwise)."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((6, 6))
    H = A @ A.T + 6 * np.eye(6)
    raw = bytearray(H.nbytes + 1)
    odd = np.frombuffer(raw, dtype=np.float64, count=H.size, offset=1).reshape(6, 6)
    odd[...] = H
    assert not odd.flags.aligned
    g, beta, l1 = rng.standard_normal(6), np.zeros(6), np.full(6, 0.1)
    ref = _core.quadratic_cd(H, g, beta, l1, 1e-12)
    np.testing.assert_array_equal(_core.quadratic_cd(odd, g, beta, l1, 1e-12), ref)
