"""Input checks shared by the public functions. Every problem surfaces as a
ValueError or TypeError whose message names it; nothing reaches the core unchecked."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from . import _core
from .penalties import Penalty

LOO_METHODS = ("alo", "exact", "if", "lemma3")


def _check_sparse(X: Any, name: str):
    """Canonical CSR with float64 data and int32 indices; never densified.

    CSR float64 input with int32 indices is used in place; CSC (or other formats)
    is converted to CSR once, which copies the nonzeros but never densifies."""
    import scipy.sparse as sp

    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-dimensional, got shape {X.shape}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name} is empty: shape {X.shape}")
    if not (
        np.issubdtype(X.dtype, np.floating)
        or np.issubdtype(X.dtype, np.integer)
        or X.dtype == np.bool_
    ):
        raise TypeError(f"{name} must be a numeric sparse matrix, got dtype {X.dtype}")
    A = X if sp.issparse(X) and X.format == "csr" else sp.csr_matrix(X)
    if A.dtype != np.float64:
        A = A.astype(np.float64)
    if not A.has_canonical_format:
        A = A.copy()
        A.sum_duplicates()
    if A.nnz >= 2**31 - 1:
        raise ValueError(f"{name}: sparse matrices with 2^31 or more nonzeros are not supported")
    if A.indices.dtype != np.int32 or A.indptr.dtype != np.int32:
        A = A.copy()
        A.indices = A.indices.astype(np.int32)
        A.indptr = A.indptr.astype(np.int32)
    if not np.isfinite(A.data).all():
        raise ValueError(
            f"{name} contains NaN or inf (explicitly stored entries of the sparse matrix)"
        )
    return A


def is_sparse(X: Any) -> bool:
    return hasattr(X, "tocsr") and hasattr(X, "nnz")


def core_design(X: Any) -> Any:
    """The argument the core takes for a checked X: the array, or a CSR tuple."""
    if is_sparse(X):
        return (X.data, X.indices, X.indptr, X.shape[0], X.shape[1])
    return X


def check_X(X: Any, name: str = "X") -> Any:
    """A 2-d float64 array, used in place when it already is one (C, F or strided);
    or a canonical scipy.sparse CSR matrix (see :func:`_check_sparse`)."""
    if is_sparse(X):
        return _check_sparse(X, name)
    arr = np.asarray(X)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.floating)
        or np.issubdtype(arr.dtype, np.integer)
        or arr.dtype == np.bool_
    ):
        raise TypeError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-dimensional, got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} is empty: shape {arr.shape}")
    if arr.dtype != np.float64:
        arr = arr.astype(np.float64)  # float32/int input: one conversion copy
    elif arr.strides[0] % 8 or arr.strides[1] % 8:
        arr = np.array(arr, dtype=np.float64, order="C")
    if not np.isfinite(arr).all():
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(f"{name} contains NaN or inf (first at row {bad[0]}, column {bad[1]})")
    return arr


def check_vector(v: Any, n: int, name: str) -> np.ndarray:
    arr = np.asarray(v)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-dimensional, got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries but X has {n} rows")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise ValueError(
            f"{name} contains NaN or inf (first at index {np.flatnonzero(~np.isfinite(arr))[0]})"
        )
    return arr


def check_loss(loss: Any) -> str:
    if not isinstance(loss, str):
        raise TypeError(f"loss must be a string, got {type(loss).__name__}")
    names = _core.loss_names()
    if loss not in names:
        raise ValueError(f"unknown loss {loss!r}; expected one of {names}")
    return loss


def as_penalty(penalty: Any) -> Penalty:
    """None -> L2(1.0); a number or a 1-d array -> L2(penalty); a Penalty as is."""
    from .penalties import L2

    if penalty is None:
        return L2(1.0)
    if isinstance(penalty, Penalty):
        return penalty
    if isinstance(penalty, (int, float, np.floating, np.integer)) and not isinstance(penalty, bool):
        return L2(float(penalty))
    if isinstance(penalty, np.ndarray) and np.issubdtype(penalty.dtype, np.number):
        return L2(penalty)
    raise TypeError(f"penalty must be an aloocv penalty such as aloocv.L2(1.0), got {penalty!r}")


def check_penalty(penalty: Penalty, n_features: int) -> tuple[np.ndarray, np.ndarray | None]:
    """(l2 weights, l1 weights or None), one entry per feature."""
    pen = as_penalty(penalty)
    return pen.l2_vector(n_features), pen.l1_vector(n_features)


def check_sample_weight(sample_weight: Any, n: int) -> np.ndarray | None:
    if sample_weight is None:
        return None
    w = check_vector(sample_weight, n, "sample_weight")
    if np.any(w < 0):
        raise ValueError("sample_weight must be non-negative")
    if not w.sum() > 0:
        raise ValueError("sample_weight sums to zero")
    return w


def check_options(tol: Any, max_iter: Any) -> tuple[float, int]:
    tol = float(tol)
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be a positive finite number, got {tol!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)):
        raise TypeError(f"max_iter must be an integer, got {max_iter!r}")
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter}")
    return tol, int(max_iter)


def n_threads(n_jobs: Any) -> int:
    """OpenMP threads for n_jobs (None: OpenMP's default; -1: all cores; -k: all but k-1)."""
    if n_jobs is None:
        return 0
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)):
        raise TypeError(f"n_jobs must be an integer or None, got {n_jobs!r}")
    if n_jobs == 0:
        raise ValueError("n_jobs == 0 has no meaning; use None, -1 or a positive count")
    if n_jobs < 0:
        return max(1, (os.cpu_count() or 1) + 1 + int(n_jobs))
    return int(n_jobs)


def check_loo_samples(n: int) -> None:
    if n < 2:
        raise ValueError(f"leave-one-out needs at least 2 samples, got n_samples={n}")


def check_fit_inputs(X, y, loss, penalty, sample_weight):
    X = check_X(X)
    n, p = X.shape
    y = check_vector(y, n, "y")
    loss = check_loss(loss)
    pen, l1 = check_penalty(penalty, p)
    w = check_sample_weight(sample_weight, n)
    return X, y, loss, pen, l1, w


SOLVERS = ("auto", "primal", "dual")


def choose_solver(solver: Any, X: Any, pen: np.ndarray, l1: np.ndarray | None) -> str:
    """'primal' or 'dual' for a checked problem ('auto': dual when n < p, L2 only, and
    every feature penalized)."""
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; expected one of {list(SOLVERS)}")
    n, p = X.shape
    dual_ok = l1 is None and bool(np.all(pen > 0))
    if solver == "dual":
        if l1 is not None:
            raise ValueError("solver='dual' needs an L2 penalty (an L1 term uses the active set)")
        if not dual_ok:
            raise ValueError(
                "solver='dual' needs a strictly positive penalty on every feature; "
                f"{int(np.sum(pen <= 0))} feature(s) have lam = 0"
            )
        return "dual"
    if solver == "auto":
        return "dual" if (dual_ok and n < p) else "primal"
    return "primal"
