"""Property and fuzz tests (hypothesis): every call gives either a clear ValueError or
TypeError, or the result of the same call on the float64-dense C-order copy of its input
(``np.asarray(X.toarray() if sparse else X, dtype=float64, order="C")``) or of an
independent numpy reference. Shapes (n = 0, 1, p = 0, n < p), dtypes, orders, strides,
sparse formats, weights and penalties are drawn; each test is bounded (max_examples)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

import aloocv
from conftest import ridge_solve

FUZZ = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)

CLEAR = (ValueError, TypeError)


def outcome(fn):
    """('ok', result) or ('error', exception type); any other exception propagates."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        try:
            return "ok", fn()
        except CLEAR as e:
            assert str(e), "an error must say what is wrong"
            return "error", type(e)


def same(a, b):
    """Two outcomes agree: both errors of the same type, or both results close."""
    assert a[0] == b[0], (a, b)
    if a[0] == "error":
        assert a[1] is b[1], (a, b)
        return
    ra, rb = a[1], b[1]
    if isinstance(ra, aloocv.FitResult):
        np.testing.assert_allclose(ra.coef_, rb.coef_, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(ra.intercept_, rb.intercept_, rtol=1e-9, atol=1e-10)
    else:
        np.testing.assert_allclose(ra.losses, rb.losses, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(ra.fit.coef_, rb.fit.coef_, rtol=1e-9, atol=1e-10)
        assert np.isfinite(ra.losses).all()


def reference(X):
    """The float64-dense C-order copy of a valid X."""
    if sp.issparse(X):
        X = X.toarray()
    return np.asarray(X, dtype=np.float64, order="C")


@st.composite
def base_data(draw, min_n=0, max_n=9, max_p=5):
    n = draw(st.integers(min_n, max_n))
    p = draw(st.integers(0, max_p))
    vals = st.integers(-4, 4)  # small integers: every dtype below holds them exactly
    X = np.array(draw(st.lists(vals, min_size=n * p, max_size=n * p)), dtype=float).reshape(n, p)
    y = np.array(draw(st.lists(vals, min_size=n, max_size=n)), dtype=float)
    return X, y


def _odd_strides(X):
    rec = np.zeros(X.size, dtype=np.dtype([("v", "<f8"), ("pad", "i1")]))
    rec["v"] = X.ravel()
    return rec["v"].reshape(X.shape)


def _misaligned(X):
    buf = np.zeros(X.size * 8 + 1, np.uint8)[1:].view(np.float64).reshape(X.shape)
    buf[...] = X
    return buf


def _negative(X):
    Z = np.ascontiguousarray(X[::-1, ::-1])
    return Z[::-1, ::-1]


def _strided(X):
    big = np.zeros((X.shape[0] * 2, X.shape[1] * 3))
    big[::2, ::3] = X
    return big[::2, ::3]


LAYOUTS = {
    "C": np.ascontiguousarray,
    "F": np.asfortranarray,
    "negative strides": _negative,
    "odd strides": _odd_strides,
    "misaligned": _misaligned,
    "strided": _strided,
    "list": lambda X: X.tolist(),
}
DTYPES = ["float64", "float32", "float16", "int64", "int8", ">f8", "bool"]
INVALID_DTYPES = ["complex128", "object"]


def _call(fn_name, loss):
    if fn_name == "fit":
        return lambda X, y, **kw: aloocv.fit(X, y, loss=loss, **kw)
    if fn_name == "kfold":
        return lambda X, y, **kw: aloocv.kfold(X, y, loss=loss, n_folds=2, **kw)
    return lambda X, y, **kw: aloocv.loo(X, y, loss=loss, **kw)


@FUZZ
@given(
    data=base_data(),
    layout=st.sampled_from(sorted(LAYOUTS)),
    dtype=st.sampled_from(DTYPES + INVALID_DTYPES),
    fn_name=st.sampled_from(["fit", "loo", "kfold"]),
    lam=st.sampled_from([0.0, 0.5, 3.0]),
    intercept=st.booleans(),
)
def test_dense_dtypes_and_layouts(data, layout, dtype, fn_name, lam, intercept):
    X, y = data
    if dtype == "bool":
        X = X > 0
    Xv = X.astype(dtype)
    if dtype in INVALID_DTYPES:
        Xv = LAYOUTS[layout](Xv) if layout == "list" else Xv
        with pytest.raises(TypeError, match="(real|numeric)"):
            _call(fn_name, "squared")(Xv, y, penalty=lam)
        return
    Xv = LAYOUTS[layout](Xv)
    call = _call(fn_name, "squared")
    with threadpool_limits(1):
        ref = outcome(
            lambda: call(reference(X.astype(dtype)), y, penalty=lam, fit_intercept=intercept)
        )
    got = outcome(lambda: call(Xv, y, penalty=lam, fit_intercept=intercept))
    same(got, ref)
    if X.shape[0] == 0 or X.shape[1] == 0:
        assert got == ("error", ValueError)
    if fn_name != "fit" and X.shape[0] < 2:
        assert got[0] == "error"
    if got[0] == "ok" and fn_name == "fit":
        # and the numpy closed form (unique minimizer when the Hessian is definite)
        with threadpool_limits(1):
            beta = ridge_solve(reference(X.astype(dtype)), y, lam, intercept=intercept)
        np.testing.assert_allclose(got[1].coef_, beta[1:] if intercept else beta, atol=1e-6)


def _split_duplicates(A):
    """The same matrix with every stored entry split into two halves (duplicates)."""
    C = A.tocoo()
    return sp.coo_matrix(
        (np.r_[C.data / 2, C.data / 2], (np.r_[C.row, C.row], np.r_[C.col, C.col])), shape=A.shape
    )


@st.composite
def sparse_case(draw):
    X, y = draw(base_data(min_n=2))
    fmt = draw(st.sampled_from(["csr", "csc", "coo", "bsr", "dia", "lil", "dok"]))
    trick = draw(
        st.sampled_from(["plain", "int64", "unsorted", "duplicates", "explicit zeros", "bool"])
    )
    return X, y, fmt, trick


def _sparse_variant(X, fmt, trick):
    if trick == "bool":
        X = (X > 0).astype(float)
        A = sp.csr_matrix(X > 0)
    else:
        A = sp.csr_matrix(X)
    if trick == "duplicates":
        A = _split_duplicates(A)
        return X, (A if fmt == "coo" else sp.csr_matrix((A.data, (A.row, A.col)), shape=A.shape))
    if trick == "explicit zeros" and A.nnz:
        A = A.tolil().tocsr()
        A.data[0] = 0.0  # stored zero (the dense reference sees a zero too)
        X = A.toarray()
    if trick == "unsorted" and A.nnz > 1:
        A = sp.csr_matrix((A.data[::-1], A.indices[::-1], A.indptr), shape=A.shape)
        A.has_sorted_indices = False
        X = None  # the reversed arrays describe a different matrix: recompute below
    B = A.asformat(fmt)
    if trick == "int64" and fmt in ("csr", "csc", "bsr"):
        B.indices = B.indices.astype(np.int64)
        B.indptr = B.indptr.astype(np.int64)
    if trick == "int64" and fmt == "coo":
        B.row, B.col = B.row.astype(np.int64), B.col.astype(np.int64)
    if X is None:
        X = np.zeros(A.shape)
        for i in range(A.shape[0]):  # a reference written without scipy's canonicalization
            for k in range(A.indptr[i], A.indptr[i + 1]):
                X[i, A.indices[k]] += A.data[k]
    return X, B


@FUZZ
@given(case=sparse_case(), fn_name=st.sampled_from(["fit", "loo"]), intercept=st.booleans())
def test_sparse_formats(case, fn_name, intercept):
    X, y, fmt, trick = case
    X, A = _sparse_variant(X, fmt, trick)
    call = _call(fn_name, "squared")
    with threadpool_limits(1):
        ref = outcome(lambda: call(reference(X), y, penalty=1.0, fit_intercept=intercept))
    got = outcome(lambda: call(A, y, penalty=1.0, fit_intercept=intercept))
    same(got, ref)


@st.composite
def malformed_sparse(draw):
    X, y = draw(base_data(min_n=2, max_n=7))
    X[0, :] = 1.0  # at least one stored entry when p > 0
    fmt = draw(st.sampled_from(["csr", "csc"]))
    A = sp.csr_matrix(X) if fmt == "csr" else sp.csc_matrix(X)
    if A.nnz == 0:
        return A, y
    minor = A.shape[1] if fmt == "csr" else A.shape[0]
    kind = draw(st.sampled_from(["index high", "index == minor", "negative", "indptr", "nnz"]))
    k = draw(st.integers(0, A.nnz - 1))
    if kind == "index high":  # the arrays are changed after construction, as a user could
        A.indices[k] = draw(st.integers(minor, 2**31 - 1))
    elif kind == "index == minor":
        A.indices[k] = minor
    elif kind == "negative":
        A.indices[k] = -draw(st.integers(1, 2**31 - 1))
    elif kind == "indptr":
        A.indptr[1] = A.indptr[-1] + 1
    else:
        A.indptr[-1] = A.indices.shape[0] + 3
    return A, y


@FUZZ
@given(case=malformed_sparse(), fn_name=st.sampled_from(["fit", "loo", "kfold"]))
def test_malformed_sparse_is_a_clear_error(case, fn_name):
    A, y = case
    calls = {
        "fit": lambda: aloocv.fit(A, y, loss="squared"),
        "loo": lambda: aloocv.loo(A, y, loss="squared"),
        "kfold": lambda: aloocv.kfold(A, y, loss="squared", n_folds=2),
    }
    kind, err = outcome(calls[fn_name])
    assert kind == "error" and err in CLEAR


WEIGHTS = st.one_of(
    st.sampled_from(["zeros", "one zero", "negative", "tiny", "huge", "nan", "wrong length"]),
    st.lists(st.floats(0, 10), min_size=1, max_size=3),
)


@FUZZ
@given(data=base_data(min_n=1), weights=WEIGHTS, intercept=st.booleans())
def test_weights(data, weights, intercept):
    X, y = data
    n = X.shape[0]
    if isinstance(weights, list):
        w = np.resize(np.asarray(weights), n)
    else:
        w = {
            "zeros": np.zeros(n),
            "one zero": np.r_[0.0, np.ones(n - 1)],
            "negative": np.r_[-1.0, np.ones(n - 1)],
            "tiny": np.full(n, 1e-200),
            "huge": np.full(n, 1e200),
            "nan": np.r_[np.nan, np.ones(n - 1)],
            "wrong length": np.ones(n + 1),
        }[weights]
    got = outcome(
        lambda: aloocv.fit(
            X, y, loss="squared", penalty=1.0, sample_weight=w, fit_intercept=intercept
        )
    )
    if got[0] == "error":
        return
    with threadpool_limits(1):
        beta = ridge_solve(reference(X), y, 1.0, w, intercept=intercept)
    coef = beta[1:] if intercept else beta
    np.testing.assert_allclose(got[1].coef_, coef, rtol=1e-6, atol=1e-8)
    assert np.all(w >= 0) and w.sum() > 0 and w.shape == (n,)


PENALTIES = st.one_of(
    st.sampled_from([0.0, -1.0, 1e300, np.nan, np.inf, "1.0", True, 1 + 1j, None]),
    st.floats(1e-6, 1e6),
    st.lists(st.floats(0, 100), min_size=0, max_size=6),
)


@FUZZ
@given(data=base_data(min_n=1, max_p=5), lam=PENALTIES, intercept=st.booleans())
def test_penalties(data, lam, intercept):
    X, y = data

    def call():
        return aloocv.fit(X, y, loss="squared", penalty=aloocv.L2(lam), fit_intercept=intercept)

    got = outcome(call)
    if got[0] == "error":
        return
    lam_v = np.asarray(lam, dtype=float)
    assert np.all(np.isfinite(lam_v)) and np.all(lam_v >= 0)
    with threadpool_limits(1):
        beta = ridge_solve(reference(X), y, lam_v, intercept=intercept)
    coef = beta[1:] if intercept else beta
    np.testing.assert_allclose(got[1].coef_, coef, rtol=1e-6, atol=1e-8)


@FUZZ
@given(
    data=base_data(min_n=0),
    y_kind=st.sampled_from(["nan", "complex", "object", "2d", "short", "str", "ok"]),
    loss=st.sampled_from(["squared", "logistic", "poisson"]),
)
def test_responses(data, y_kind, loss):
    X, y = data
    n = X.shape[0]
    if loss != "squared":
        y = np.abs(y) if loss == "poisson" else (y > 0).astype(float)
    yv = {
        "nan": np.r_[y[:-1], np.nan] if n else y,
        "complex": y + 0j,
        "object": y.astype(object),
        "2d": np.c_[y, y],
        "short": y[:-1],
        "str": y.astype(str),
        "ok": y,
    }[y_kind]
    got = outcome(lambda: aloocv.fit(X, yv, loss=loss, penalty=1.0))
    if y_kind in ("complex", "object", "str"):
        assert got == ("error", TypeError)
    elif y_kind in ("2d",) and n > 0:
        assert got == ("error", ValueError)
    elif got[0] == "ok":
        assert y_kind == "ok" and np.isfinite(got[1].coef_).all()


@FUZZ
@given(
    data=base_data(min_n=0, max_n=8),
    layout=st.sampled_from(sorted(LAYOUTS)),
    dtype=st.sampled_from([*DTYPES, *INVALID_DTYPES]),
    lam=st.sampled_from([0.1, 2.0, 0.0, -1.0, "1", 1j]),
    intercept=st.booleans(),
)
def test_kernel_ridge_loo_inputs(data, layout, dtype, lam, intercept):
    Z, y = data
    K = Z @ Z.T + np.eye(Z.shape[0])  # symmetric, small integers: exact in every dtype
    Kv = K.astype(dtype) if dtype != "bool" else K > 0
    if dtype not in INVALID_DTYPES:
        Kv = LAYOUTS[layout](Kv)

    def call(M):
        return aloocv.kernel_ridge_loo(M, y, lam, fit_intercept=intercept)

    got = outcome(lambda: call(Kv))
    if dtype in INVALID_DTYPES or isinstance(lam, (str, complex)):
        assert got == ("error", TypeError) or (got[0] == "error" and K.shape[0] < 2)
        return
    ref_K = reference(K if dtype != "bool" else K > 0)
    with threadpool_limits(1):
        ref = outcome(lambda: call(ref_K))
    assert got[0] == ref[0]
    if got[0] == "ok":
        np.testing.assert_allclose(got[1].losses, ref[1].losses, rtol=1e-12, atol=1e-12)
        n = K.shape[0]
        # and the PRESS identity written in numpy (no intercept: H = K (K + lam I)^-1)
        if not intercept:
            with threadpool_limits(1):
                H = ref_K @ np.linalg.inv(ref_K + lam * np.eye(n))
                res = (y - H @ y) / (1 - np.diag(H))
            np.testing.assert_allclose(got[1].losses, 0.5 * res**2, rtol=1e-7, atol=1e-9)
    else:
        assert got[1] is ref[1]
