"""Bad input raises ValueError/TypeError naming the problem; never a crash or a NaN."""

from __future__ import annotations

import numpy as np
import pytest

import aloocv
from aloocv._validation import check_X
from conftest import make_data

X0, Y0 = make_data("logistic", 40, 3, seed=40)


def call(fn, **kw):
    args = {"X": X0, "y": Y0, "loss": "logistic", "penalty": aloocv.L2(1.0)}
    args.update(kw)
    return fn(**args)


FUNCS = [aloocv.fit, aloocv.loo]


@pytest.mark.parametrize("fn", FUNCS)
@pytest.mark.parametrize(
    ("kw", "exc", "match"),
    [
        ({"X": np.where(np.eye(40, 3) > 0, np.nan, X0)}, ValueError, "X contains NaN or inf"),
        ({"X": np.where(np.eye(40, 3) > 0, np.inf, X0)}, ValueError, "X contains NaN or inf"),
        ({"y": np.r_[Y0[:-1], np.nan]}, ValueError, "y contains NaN"),
        ({"y": Y0[:-1]}, ValueError, "y has 39 entries but X has 40 rows"),
        ({"X": X0[:, 0]}, ValueError, "X must be 2-dimensional"),
        ({"X": np.empty((0, 3)), "y": np.empty(0)}, ValueError, "X is empty"),
        ({"X": np.empty((5, 0)), "y": np.zeros(5)}, ValueError, "X is empty"),
        ({"y": Y0 * 2}, ValueError, r"domain of the logistic loss \(y in \{0, 1\}\)"),
        ({"loss": "poisson", "y": Y0 - 0.5}, ValueError, "domain of the poisson loss"),
        ({"loss": "hinge"}, ValueError, "unknown loss 'hinge'"),
        ({"loss": 3}, TypeError, "loss must be a loss name"),
        ({"penalty": aloocv.L2(np.ones(4))}, ValueError, "lam vector has length 4"),
        ({"penalty": "l2"}, TypeError, "penalty must be an aloocv penalty"),
        ({"sample_weight": -np.ones(40)}, ValueError, "sample_weight must be non-negative"),
        ({"sample_weight": np.zeros(40)}, ValueError, "sample_weight sums to zero"),
        ({"sample_weight": np.ones(39)}, ValueError, "sample_weight has 39 entries"),
        ({"X": np.array([["a"] * 3] * 40)}, TypeError, "X must be a numeric array"),
        ({"tol": -1.0}, ValueError, "tol must be a positive"),
        ({"max_iter": 0}, ValueError, "max_iter must be >= 1"),
        ({"n_jobs": 0}, ValueError, "n_jobs == 0"),
        ({"n_jobs": 1.5}, TypeError, "n_jobs must be an integer"),
    ],
)
def test_bad_input(fn, kw, exc, match):
    with pytest.raises(exc, match=match):
        call(fn, **kw)


@pytest.mark.parametrize("lam", [-1.0, np.array([1.0, -0.1, 1.0]), np.nan, np.inf])
def test_bad_lambda(lam):
    with pytest.raises(ValueError, match="lam must be"):
        aloocv.L2(lam)


def test_lambda_matrix_rejected():
    with pytest.raises(ValueError, match="scalar or a 1-d vector"):
        aloocv.L2(np.ones((2, 2)))


@pytest.mark.parametrize("fn", FUNCS)
@pytest.mark.parametrize("loss", ["squared", "logistic", "poisson"])
def test_singular_hessian(fn, loss):
    X, y = make_data(loss, 10, 30, seed=41)  # p > n, lam = 0
    with pytest.raises(ValueError, match="Hessian .* singular"):
        fn(X, y, loss=loss, penalty=aloocv.L2(0.0))


def test_collinear_features_unpenalized_singular():
    X = np.hstack([X0, X0[:, :1]])
    with pytest.raises(ValueError, match="singular"):
        aloocv.fit(X, Y0, loss="logistic", penalty=aloocv.L2(0.0))


def test_loo_singular_downdate_is_reported():
    # a feature seen by one sample only: without it, theta_j has no data and no penalty
    X = np.zeros((6, 2))
    X[:, 0] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    X[0, 1] = 1.0
    y = np.array([1.0, 2.0, 2.5, 4.2, 5.1, 5.8])
    with pytest.raises(ValueError, match="leave-one-out Hessian is singular for sample 0"):
        aloocv.loo(X, y, loss="squared", penalty=aloocv.L2(0.0))
    with pytest.raises(ValueError, match="leave-one-out Hessian is singular for sample 0"):
        aloocv.loo(X, y, loss="squared", penalty=aloocv.L2(0.0), method="exact")


@pytest.mark.parametrize("method", ["ALO", "loo", None])
def test_unknown_method(method):
    with pytest.raises(ValueError, match="unknown method"):
        aloocv.loo(X0, Y0, method=method)


def test_coef_checks():
    with pytest.raises(ValueError, match="coef has 2 entries but X has 3 features"):
        aloocv.loo(X0, Y0, coef=np.zeros(2))
    with pytest.raises(ValueError, match="coef contains NaN"):
        aloocv.loo(X0, Y0, coef=np.array([0.0, np.nan, 0.0]))
    with pytest.raises(ValueError, match="intercept= requires coef="):
        aloocv.loo(X0, Y0, intercept=1.0)


def test_sparse_with_explicit_nan():
    sp = pytest.importorskip("scipy.sparse")
    A = sp.csr_matrix(X0)
    A.data[3] = np.nan
    with pytest.raises(ValueError, match="X contains NaN or inf .*sparse"):
        aloocv.fit(A, Y0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", ["C", "F", "strided", "reversed", "rows-strided"])
def test_the_scan_of_X_names_the_first_bad_entry(dtype, layout):
    # the core's parallel scan against numpy's mask, for every layout it reads in place
    rng = np.random.default_rng(7)
    base = rng.standard_normal((3000, 40)).astype(dtype)
    for bad, where in (
        (np.nan, [(2999, 39)]),
        (np.inf, [(1700, 0), (2500, 5)]),
        (-np.inf, [(0, 3)]),
    ):
        A = base.copy()
        for i, j in where:
            A[i, j] = bad
        view = {
            "C": A,
            "F": np.asfortranarray(A),
            "strided": np.repeat(A, 2, axis=1)[:, ::2],
            "reversed": A[::-1],
            "rows-strided": np.repeat(A, 2, axis=0)[::2],
        }[layout]
        assert np.array_equal(view, A[::-1] if layout == "reversed" else A, equal_nan=True)
        i, j = np.argwhere(~np.isfinite(view))[0]
        with pytest.raises(
            ValueError, match=rf"X contains NaN or inf \(first at row {i}, column {j}\)"
        ):
            check_X(view)
    assert check_X(base) is base  # all finite: used in place


def test_float64_arrays_are_used_without_copy():
    for X in (X0, np.asfortranarray(X0), np.zeros((80, 6))[::2, ::2]):
        assert check_X(X) is X


def test_extreme_predictors_do_not_give_nan():
    # huge feature scale and no penalty: separable data; the fit stays finite
    X = np.array([[-1e6], [-2e6], [1e6], [2e6]])
    y = np.array([0.0, 0.0, 1.0, 1.0])
    # separated classes (and, depending on rounding, a nearly singular Hessian): warned
    with pytest.warns(aloocv.ALOWarning) as rec:
        res = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0))
    assert any("separates the classes" in str(r.message) for r in rec)
    assert np.isfinite(res.losses).all() and np.isfinite(res.mean)
