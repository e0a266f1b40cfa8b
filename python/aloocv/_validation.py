"""The one validation layer: every public entry point passes its inputs through here.

Every problem surfaces as a ValueError or TypeError whose message names it; nothing
reaches the core unchecked. Valid float64 or float32 arrays in C or Fortran order (or
any strided view with whole-element, aligned strides) are used in place: validation never
copies them (the core widens float32 row blocks as it reads them). Sparse input is
range-checked (indptr, indices, shape) before scipy or the core touches it, then put in
canonical CSR form (int32 indices, sorted, duplicates summed) without densifying.
"""

from __future__ import annotations

import numbers
import os
from typing import Any

import numpy as np

from .penalties import Penalty

LOO_METHODS = ("alo", "exact", "if", "lemma3")

_INT32_MAX = 2**31 - 1


def _check_dtype(dtype: np.dtype, name: str, what: str = "array") -> None:
    """Real numbers only (bool, integer, float); complex and everything else is a TypeError."""
    if dtype.kind == "c":
        raise TypeError(
            f"{name} must be real-valued, got complex dtype {dtype} (the imaginary part "
            "would be silently dropped; pass .real explicitly if that is meant)"
        )
    if dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a numeric {what}, got dtype {dtype}")


def check_bool(value: Any, name: str) -> bool:
    """A real bool (or numpy bool); strings, numbers and None are TypeErrors."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be a bool (True or False), got {value!r}")


def check_real_values(value: Any, name: str) -> np.ndarray:
    """A real number or array of them as float64 (bools, strings, complex: TypeError)."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be real numbers, got {value!r}")
    return arr.astype(np.float64)


def check_real_scalar(value: Any, name: str) -> float:
    """A finite real number (not a bool, string or complex)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    out = float(value)
    if not np.isfinite(out):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return out


def check_rtol(rtol: Any, method: str = "alo") -> float | None:
    """``rtol=`` of the error budget: None, or a real number in (0, 1) with an ALO method
    (``"exact"`` needs no budget: returned as None)."""
    if rtol is None:
        return None
    r = check_real_scalar(rtol, "rtol")
    if not 0.0 < r < 1.0:
        raise ValueError(f"rtol must be in (0, 1) (a relative tolerance), got {rtol!r}")
    if method not in ("alo", "exact"):
        raise ValueError(f"rtol= refines method='alo' (or needs nothing: 'exact'), not {method!r}")
    return None if method == "exact" else r


# ----------------------------------------------------------------------------- dask


def is_dask_collection(x: Any) -> bool:
    """True for a dask array, DataFrame or Series (checked without importing dask)."""
    mod = type(x).__module__ or ""
    return (mod == "dask" or mod.startswith(("dask.", "dask_"))) and hasattr(x, "__dask_graph__")


#: The public functions that take dask input; elsewhere a dask collection is refused
#: rather than silently gathered to the client.
DASK_ENTRY_POINTS = (
    "aloocv.fit, aloocv.loo, aloocv.kfold, aloocv.tune, ALOLogisticRegressionCV.fit and "
    "ALORidgeCV.fit"
)


# ----------------------------------------------------------------------------- sparse


def is_sparse(X: Any) -> bool:
    return hasattr(X, "tocsr") and hasattr(X, "nnz")


def _index_array(a: Any, name: str, what: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise ValueError(f"{name}: {what} must be 1-dimensional, got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name}: {what} must hold integers, got dtype {arr.dtype}")
    return arr


def _check_compressed(
    indptr: Any, indices: Any, n_data: int, n_major: int, n_minor: int, name: str, axes: str
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Range checks of a compressed (CSR: axes 'row'/'column'; CSC the reverse) structure.

    Returns (indptr, indices[:nnz], canonical) where canonical means indices strictly
    increase within each major slice (sorted, no duplicates). O(nnz), no copy."""
    major, minor = axes.split("/")
    indptr = _index_array(indptr, name, "indptr")
    indices = _index_array(indices, name, "indices")
    if indptr.shape[0] != n_major + 1:
        raise ValueError(
            f"{name}: indptr has {indptr.shape[0]} entries but the matrix has {n_major} "
            f"{major}s ({n_major + 1} expected): malformed sparse matrix"
        )
    if indptr[0] != 0:
        raise ValueError(
            f"{name}: indptr must start at 0, got {indptr[0]}: malformed sparse matrix"
        )
    if n_major > 0 and np.any(indptr[1:] < indptr[:-1]):
        raise ValueError(f"{name}: indptr is not non-decreasing: malformed sparse matrix")
    nnz = int(indptr[-1])
    if nnz > indices.shape[0] or nnz > n_data:
        raise ValueError(
            f"{name}: indptr says {nnz} stored entries but indices has {indices.shape[0]} and "
            f"data {n_data}: malformed sparse matrix"
        )
    idx = indices[:nnz]
    if nnz:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= n_minor:
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"{name}: {minor} index {bad} is out of range [0, {n_minor}) for shape "
                f"{'x'.join(map(str, (n_major, n_minor)))}: malformed sparse matrix"
            )
    canonical = True
    if nnz > 1:
        drop = np.flatnonzero(idx[1:] <= idx[:-1]) + 1  # entries not above their left one
        # allowed only where a new major slice starts (a mask, not np.isin: O(nnz))
        if drop.size:
            starts = np.zeros(nnz + 1, dtype=bool)
            starts[indptr] = True
            canonical = bool(starts[drop].all())
    return indptr, idx, canonical


def _float_data(data: Any, nnz: int, name: str) -> np.ndarray:
    data = np.asarray(data)
    if data.ndim != 1:
        raise ValueError(f"{name}: data must be 1-dimensional: malformed sparse matrix")
    data = data[:nnz]
    # before any summing of duplicates (bool or small integers would saturate or wrap)
    if data.dtype == np.float64 or data.dtype == np.float32:
        return data
    return data.astype(np.float64)


def _check_sparse(X: Any, name: str):
    """Canonical scipy CSR with float64 data and int32 indices; never densified.

    A canonical float64 CSR matrix with int32 indices is used without copying its
    arrays; anything else (CSC, COO, BSR, DIA, LIL, DOK, int64 indices, unsorted or
    duplicate entries, integer data) is converted once, after its index structure
    has been range-checked (out-of-range indices would crash scipy's own conversions)."""
    import scipy.sparse as sp

    shape = getattr(X, "shape", None)
    if shape is None or len(shape) != 2:
        raise ValueError(f"{name} must be 2-dimensional, got shape {shape}")
    n, p = int(shape[0]), int(shape[1])
    if n == 0 or p == 0:
        raise ValueError(f"{name} is empty: shape {tuple(shape)}")
    _check_dtype(np.dtype(X.dtype), name, "sparse matrix")
    fmt = getattr(X, "format", None)
    if fmt == "csr" or fmt == "csc":
        rows = fmt == "csr"
        indptr, idx, canonical = _check_compressed(
            X.indptr,
            X.indices,
            np.size(X.data),
            n if rows else p,
            p if rows else n,
            name,
            "row/column" if rows else "column/row",
        )
        data = _float_data(X.data, idx.shape[0], name)
        reuse = (
            rows
            and type(X) is sp.csr_matrix
            and isinstance(X.data, np.ndarray)
            and X.data.dtype in (np.float64, np.float32)
            and X.data.shape == data.shape
            and X.data.flags.c_contiguous
            and X.data.flags.aligned
            and idx.shape == X.indices.shape
            and X.indices.dtype == np.int32
            and X.indptr.dtype == np.int32
            and all(a.flags.c_contiguous and a.flags.aligned for a in (X.indices, X.indptr))
        )
        if rows:
            A = sp.csr_matrix((data, idx, indptr), shape=(n, p), copy=False)
        else:
            A = sp.csc_matrix((data, idx, indptr), shape=(n, p), copy=False).tocsr()
            canonical = False
        if reuse and canonical:
            if not np.isfinite(X.data).all():
                raise ValueError(
                    f"{name} contains NaN or inf (explicitly stored entries of the sparse matrix)"
                )
            X.has_canonical_format = True
            return X  # used in place: nothing copied
    elif fmt == "coo":
        row = _index_array(X.row, name, "row")
        col = _index_array(X.col, name, "col")
        data = _float_data(X.data, row.shape[0], name)
        if not (row.shape == col.shape == data.shape):
            raise ValueError(f"{name}: row, col and data differ in length: malformed sparse matrix")
        for what, v, lim in (("row", row, n), ("column", col, p)):
            if v.size and (int(v.min()) < 0 or int(v.max()) >= lim):
                bad = int(v.min()) if int(v.min()) < 0 else int(v.max())
                raise ValueError(
                    f"{name}: {what} index {bad} is out of range [0, {lim}): "
                    "malformed sparse matrix"
                )
        A = sp.csr_matrix((data, (row, col)), shape=(n, p))
        canonical = False
    elif fmt == "bsr":
        R, C = X.blocksize
        if R < 1 or C < 1 or n % R or p % C:
            raise ValueError(f"{name}: blocksize {X.blocksize} does not divide shape {(n, p)}")
        data = np.asarray(X.data)
        if data.ndim != 3 or data.shape[1:] != (R, C):
            raise ValueError(f"{name}: BSR data must have shape (nnz_blocks, {R}, {C})")
        indptr, idx, _ = _check_compressed(
            X.indptr, X.indices, data.shape[0], n // R, p // C, name, "block row/block column"
        )
        data = data[: idx.shape[0]].astype(np.float64, copy=False)
        A = sp.bsr_matrix((data, idx, indptr), shape=(n, p), copy=False).tocsr()
        canonical = False
    else:
        A = X.tocsr()
        if not sp.issparse(A) or A.format != "csr" or A.shape != (n, p):
            raise TypeError(f"{name}: cannot read a sparse matrix of type {type(X).__name__}")
        indptr, idx, canonical = _check_compressed(
            A.indptr, A.indices, np.size(A.data), n, p, name, "row/column"
        )
        data = _float_data(A.data, idx.shape[0], name)
        A = sp.csr_matrix((data, idx, indptr), shape=(n, p), copy=False)
    if A.nnz > _INT32_MAX or n >= _INT32_MAX or p > _INT32_MAX:
        raise ValueError(
            f"{name}: sparse matrices with 2^31 or more rows, columns or stored entries are "
            f"not supported (shape {(n, p)}, nnz {A.nnz})"
        )
    if not canonical:
        # own copies (the arrays may be the caller's), then sorted and duplicates summed;
        # the ranges are checked above, so scipy's routines are safe here
        A = sp.csr_matrix((np.array(A.data), np.array(A.indices), np.array(A.indptr)), shape=(n, p))
        A.sum_duplicates()
    data, indices, indptr = A.data, A.indices, A.indptr
    # int32, contiguous and aligned (the ranges are checked above: narrowing is exact)
    indices = np.ascontiguousarray(indices, dtype=np.int32)
    indptr = np.ascontiguousarray(indptr, dtype=np.int32)
    if not (indices.flags.aligned and indptr.flags.aligned):  # pragma: no cover
        indices, indptr = indices.copy(), indptr.copy()
    keep = data.dtype == np.float32 or data.dtype == np.float64  # native float32 stays
    if not keep or not (data.flags.c_contiguous and data.flags.aligned):
        data = np.ascontiguousarray(data, dtype=data.dtype if keep else np.float64)
    if not (
        type(A) is sp.csr_matrix and data is A.data and indices is A.indices and indptr is A.indptr
    ):
        A = sp.csr_matrix((data, indices, indptr), shape=(n, p), copy=False)
    if A.indices.dtype != np.int32 or A.indptr.dtype != np.int32:  # pragma: no cover
        raise ValueError(f"{name}: could not convert the sparse indices to int32")
    A.has_canonical_format = True
    if not np.isfinite(A.data).all():
        raise ValueError(
            f"{name} contains NaN or inf (explicitly stored entries of the sparse matrix)"
        )
    return A


def core_design(X: Any) -> Any:
    """The argument the core takes for a checked X: the array, or a CSR tuple."""
    if is_sparse(X):
        return (X.data, X.indices, X.indptr, X.shape[0], X.shape[1])
    return X


# ----------------------------------------------------------------------------- dense


def as_float64(arr: np.ndarray) -> np.ndarray:
    """arr itself when the core can read it in place (native float64, aligned, strides in
    whole elements: C, F or strided views); otherwise one C-order float64 copy."""
    if arr.dtype != np.float64:  # float32/float16/int/bool, or non-native byte order
        return arr.astype(np.float64)
    if not arr.flags.aligned or any(s % arr.itemsize for s in arr.strides):
        return np.array(arr, dtype=np.float64, order="C")
    return arr


def _as_real_array(X: Any, name: str) -> np.ndarray:
    if is_dask_collection(X):
        raise TypeError(
            f"{name} is a dask collection: dask input is taken by {DASK_ENTRY_POINTS} "
            "(chunk by chunk, without gathering it); elsewhere call .compute() first"
        )
    if is_sparse(X):
        raise TypeError(f"{name} must be a dense array, got a sparse matrix")
    try:
        arr = np.asarray(X)
    except (ValueError, TypeError) as exc:  # ragged nested sequences and the like
        raise ValueError(f"{name} cannot be read as a numeric array: {exc}") from None
    _check_dtype(arr.dtype, name)
    return arr


def as_design_dtype(arr: np.ndarray) -> np.ndarray:
    """arr itself when the core can read it in place as a design: native float64 or
    float32 (read as it is, widened to float64 row block by row block inside the core),
    aligned, strides in whole elements; otherwise one C-order float64 copy."""
    if arr.dtype == np.float32:
        if arr.flags.aligned and not any(s % arr.itemsize for s in arr.strides):
            return arr
        return np.array(arr, dtype=np.float32, order="C")
    return as_float64(arr)


def design_dot(X: Any, W: np.ndarray) -> np.ndarray:
    """X @ W in float64 for a checked X (dense or CSR) and a float64 W (1-d or 2-d).

    float32 X is widened a row block at a time (numpy's mixed-type product would cast the
    whole X to float64 first: a hidden copy twice the size of X)."""
    dt = X.data.dtype if is_sparse(X) else X.dtype
    if dt == np.float64:
        return np.asarray(X @ W)
    n = X.shape[0]
    out = np.empty((n, *np.shape(W)[1:]), dtype=np.float64)
    step = max(256, (1 << 16) // max(1, X.shape[1]))  # row blocks of about 512 KiB
    for i0 in range(0, n, step):
        out[i0 : i0 + step] = np.asarray(X[i0 : i0 + step].astype(np.float64) @ W)
    return out


def design_tdot(X: Any, V: np.ndarray) -> np.ndarray:
    """X^T @ V in float64 for a checked X and a float64 V with n rows (float32 X widened a
    row block at a time, as in :func:`design_dot`)."""
    dt = X.data.dtype if is_sparse(X) else X.dtype
    if dt == np.float64:
        return np.asarray(X.T @ V)
    out = np.zeros((X.shape[1], *np.shape(V)[1:]), dtype=np.float64)
    step = max(256, (1 << 16) // max(1, X.shape[1]))  # row blocks of about 512 KiB
    for i0 in range(0, X.shape[0], step):
        out += np.asarray(X[i0 : i0 + step].astype(np.float64).T @ V[i0 : i0 + step])
    return out


def _first_bad_2d(arr: np.ndarray, name: str, row0: int = 0) -> None:
    # one read of the array by the core in parallel row blocks (OpenMP's default team under
    # the thread limits), without the n p bytes of an isfinite mask
    from . import _core

    i = int(_core.first_nonfinite_row(arr, n_threads=0))
    if i >= 0:
        j = int(np.flatnonzero(~np.isfinite(arr[i]))[0])
        raise ValueError(f"{name} contains NaN or inf (first at row {row0 + i}, column {j})")


def check_X(X: Any, name: str = "X", row0: int = 0, chunk: bool = False) -> Any:
    """A 2-d float64 or float32 array, used in place when it already is one (C, F or
    strided, aligned; float32 stays float32: the core widens it as it reads it); or a
    canonical scipy.sparse CSR matrix with float64 or float32 data (see
    :func:`_check_sparse`). `row0`: the row of the whole X where this array starts (a
    chunk of a dask array), for the row that messages name. `chunk`: X is one row chunk
    of a larger array, which may have no rows (the whole array was checked non-empty)."""
    if is_sparse(X):
        return _check_sparse(X, name)
    arr = _as_real_array(X, name)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-dimensional, got shape {arr.shape}")
    if (arr.shape[0] == 0 and not chunk) or arr.shape[1] == 0:
        raise ValueError(f"{name} is empty: shape {arr.shape}")
    arr = as_design_dtype(arr)
    _first_bad_2d(arr, name, row0)
    return arr


def check_kernel(K: Any, name: str = "K") -> np.ndarray:
    """A finite, symmetric, square float64 matrix (used in place when it can be)."""
    Km = _as_real_array(K, name)
    if Km.ndim != 2 or Km.shape[0] != Km.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {Km.shape}")
    Km = as_float64(Km)
    _first_bad_2d(Km, name)
    if Km.size:
        scale = max(float(np.max(np.abs(Km))), 1e-300)
        if np.max(np.abs(Km - Km.T)) > 1e-10 * scale:
            raise ValueError(f"{name} is not symmetric")
    return Km


def check_vector(v: Any, n: int, name: str, index0: int = 0) -> np.ndarray:
    """A finite contiguous float64 vector of length n (a column (n, 1) is flattened).
    `index0`: the index of its first entry in the whole vector (a chunk of a dask array),
    for the index that messages name."""
    arr = _as_real_array(v, name)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-dimensional, got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries but X has {n} rows")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not arr.flags.aligned:  # ascontiguousarray keeps a misaligned buffer as it is
        arr = arr.copy()
    if not np.isfinite(arr).all():
        raise ValueError(
            f"{name} contains NaN or inf (first at index "
            f"{index0 + np.flatnonzero(~np.isfinite(arr))[0]})"
        )
    return arr


def is_multi_target(y: Any) -> bool:
    """True for a 2-d y with more than one column (a column vector counts as 1-d)."""
    shape = np.shape(y) if not is_sparse(y) else y.shape
    return len(shape) == 2 and shape[1] > 1


def check_targets(Y: Any, n: int, loss: Any = "squared", name: str = "y") -> np.ndarray:
    """A finite 2-d float64 array (n, n_targets) of responses, read in place when it already
    is one (C, F or strided order); only the squared loss takes several targets."""
    loss_name = loss if isinstance(loss, str) else getattr(loss, "name", repr(loss))
    if loss_name != "squared":
        if loss_name == MULTINOMIAL:
            raise ValueError(
                f"{name} has shape {np.shape(Y)}: the multinomial loss takes 1-d class labels"
            )
        raise ValueError(
            f"{name} has shape {np.shape(Y)}: several targets (a 2-d y) are supported for "
            f"loss='squared' only, got loss={loss_name!r}"
        )
    arr = _as_real_array(Y, name)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-dimensional, got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} rows but X has {n}")
    if arr.shape[1] == 0:
        raise ValueError(f"{name} has no targets: shape {arr.shape}")
    arr = as_float64(arr)
    _first_bad_2d(arr, name)
    return arr


def multi_target_penalty(penalty: Penalty, n_features: int) -> tuple[float, np.ndarray | None]:
    """(scale, shape) of an L2 penalty for several targets: ``scale * diag(shape)``, the
    shape None for a scalar lambda, else positive per feature."""
    pen = as_penalty(penalty)
    l2, l1 = pen.l2_vector(n_features), pen.l1_vector(n_features)
    if l1 is not None:
        raise ValueError(
            "several targets (a 2-d y) are supported with an L2 penalty only; fit an elastic "
            "net per target (ALOElasticNetCV does)"
        )
    if np.all(l2 == l2[0]):
        return float(l2[0]), None
    if np.any(l2 <= 0):
        raise ValueError(
            "several targets (a 2-d y) with a per-feature L2 penalty need every lambda > 0 "
            "(an unpenalized feature cannot share the spectral decomposition)"
        )
    return 1.0, np.ascontiguousarray(l2, dtype=np.float64)


def check_labels(y: Any, n: int, name: str = "y") -> np.ndarray:
    """Class labels: any 1-d array of n hashable values; numeric ones must be real, finite."""
    try:
        arr = np.asarray(y)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{name} cannot be read as an array: {exc}") from None
    if arr.dtype.kind == "c":
        _check_dtype(arr.dtype, name)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-dimensional, got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries but X has {n} rows")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or inf")
    return arr


# ----------------------------------------------------------------------------- the rest


def check_loss(loss: Any):
    """The registered :class:`aloocv.losses.Loss` of a ``loss`` argument (a name or a
    loss object); raises on an unknown name."""
    from .losses import get_loss

    return get_loss(loss)


def check_offset(offset: Any, n: int) -> np.ndarray | None:
    """None, or a finite float64 vector of length n (eta = X beta + offset)."""
    if offset is None:
        return None
    return check_vector(offset, n, "offset")


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


def check_nonnegative_weight(w: np.ndarray, index0: int = 0) -> np.ndarray:
    """w (a checked float64 vector) when no entry is negative; `index0` as in
    :func:`check_vector`."""
    neg = np.flatnonzero(w < 0)
    if neg.size:
        raise ValueError(
            f"sample_weight must be non-negative (first negative at index {index0 + neg[0]})"
        )
    return w


def check_sample_weight(sample_weight: Any, n: int) -> np.ndarray | None:
    if sample_weight is None:
        return None
    w = check_nonnegative_weight(check_vector(sample_weight, n, "sample_weight"))
    if not w.sum() > 0:
        raise ValueError("sample_weight sums to zero")
    return w


def check_options(tol: Any, max_iter: Any) -> tuple[float, int]:
    if isinstance(tol, (bool, np.bool_)) or not isinstance(tol, (numbers.Real, np.ndarray)):
        raise TypeError(f"tol must be a real number, got {tol!r}")
    tol = float(tol)
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be a positive finite number, got {tol!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)):
        raise TypeError(f"max_iter must be an integer, got {max_iter!r}")
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter}")
    return tol, int(max_iter)


def n_threads(n_jobs: Any) -> int:
    """OpenMP threads for n_jobs (None: OpenMP's default under the thread limits that
    threadpoolctl, joblib and ``OMP_NUM_THREADS`` set, see :mod:`aloocv._threads`; -1: all
    cores; -k: all but k-1)."""
    if n_jobs is None:
        from . import _core

        return int(_core.max_threads())
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


MULTINOMIAL = "multinomial"


def check_class_label_dtype(dtype: Any) -> None:
    """Multinomial labels must be numbers (TypeError otherwise)."""
    if dtype.kind == "b" or dtype.kind not in "iuf":
        raise TypeError(
            f"y must hold integer class labels 0..K-1 for the multinomial loss, got dtype "
            f"{dtype} (encode labels first, e.g. with sklearn.preprocessing.LabelEncoder)"
        )


def bad_class_label(lab: np.ndarray) -> int | None:
    """Index of the first label of `lab` (float64) that is not an integer >= 0, or None."""
    bad = np.flatnonzero((lab != np.floor(lab)) | (lab < 0))
    return int(bad[0]) if bad.size else None


def class_label_error(index: int, value: Any) -> ValueError:
    return ValueError(
        f"y must hold integer class labels 0..K-1 for the multinomial loss: y[{index}] = {value!r}"
    )


def check_classes_present(present: np.ndarray) -> None:
    """`present` (K booleans): every class has a sample of positive weight, K >= 2."""
    K = int(present.size)
    if K < 2 or not present.all():
        missing = np.flatnonzero(~present).tolist()
        raise ValueError(
            "the multinomial loss needs labels 0..K-1 with K >= 2 and every class present "
            f"(with positive weight); got K = {K}"
            + (f", classes {missing} absent" if missing else "")
        )


def check_class_labels(y: Any, n: int, weight: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Multinomial labels: integers 0..K-1, every class present (with positive weight),
    K >= 2. Returns (labels as float64, K)."""
    arr = check_labels(y, n)
    check_class_label_dtype(arr.dtype)
    lab = arr.astype(np.float64)
    bad = bad_class_label(lab) if n else None
    if bad is not None:
        raise class_label_error(bad, arr[bad])
    K = int(lab.max()) + 1 if n else 0
    pos = np.ones(n, bool) if weight is None else weight > 0
    check_classes_present(np.bincount(lab[pos].astype(np.int64), minlength=K) > 0)
    return np.ascontiguousarray(lab), K


def check_multinomial_penalty(penalty: Any, n_features: int) -> np.ndarray:
    """The per-feature L2 weights of a multinomial problem: an L2 penalty with lam > 0 on
    every feature (the full K-class parametrization needs it)."""
    pen, l1 = check_penalty(penalty, n_features)
    if l1 is not None and np.any(l1 > 0):
        raise ValueError("the multinomial loss supports an L2 penalty only (no L1 term)")
    if not np.all(pen > 0):
        raise ValueError(
            "the multinomial loss needs an L2 penalty lam > 0 on every feature: the full "
            "K-class parametrization is not identifiable without it"
        )
    return pen


SOLVERS = ("auto", "primal", "dual", "matrix_free")


def choose_solver(
    solver: Any, X: Any, pen: np.ndarray, l1: np.ndarray | None, loss: Any = None
) -> str:
    """'primal', 'dual' or 'matrix_free' for a checked problem ('auto': dual when n < p,
    L2 only, every feature penalized, and a loss whose curvature cannot be negative; see
    ``docs/math/dual.md``; the route table then weighs the matrix-free route's cost,
    ``docs/math/matrix_free.md``)."""
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; expected one of {list(SOLVERS)}")
    n, p = X.shape
    dual_ok = l1 is None and bool(np.all(pen > 0))
    if solver == "matrix_free":
        if l1 is not None:
            raise ValueError(
                "solver='matrix_free' fits smooth (L2) penalties; an L1 term uses the active "
                "set (solver='primal')"
            )
        return "matrix_free"
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
        # Tweedie with power > 2 can have l'' < 0, which the dual's I + S K S form refuses
        signed = loss is not None and float(loss.params().get("power", 1.0)) > 2.0
        return "dual" if (dual_ok and n < p and not signed) else "primal"
    return "primal"


def check_scoring_param(scoring: Any) -> None:
    """``scoring=``: None, a scorer name or a callable ``scorer(estimator, X, y)``; one
    metric (no lists or dicts)."""
    if scoring is None or callable(scoring):
        return
    if isinstance(scoring, str):
        from sklearn.metrics import get_scorer_names

        if scoring not in get_scorer_names():
            raise ValueError(
                f"scoring={scoring!r} is not a scikit-learn scorer name; see "
                "sklearn.metrics.get_scorer_names()"
            )
        return
    if isinstance(scoring, (list, tuple, set, dict)):
        raise ValueError(
            "scoring must be one metric (a name or a callable); multimetric is not supported"
        )
    raise TypeError(f"scoring must be None, a scorer name or a callable, got {scoring!r}")


def check_class_weight(class_weight: Any, classes: np.ndarray) -> None:
    """``class_weight``: None, ``"balanced"`` or a dict of positive weights keyed by labels
    of ``classes``."""
    if class_weight is None or (isinstance(class_weight, str) and class_weight == "balanced"):
        return
    if not isinstance(class_weight, dict):
        raise TypeError(f"class_weight must be None, 'balanced' or a dict, got {class_weight!r}")
    unknown = [k for k in class_weight if k not in set(classes.tolist())]
    if unknown:
        raise ValueError(
            f"class_weight has keys {unknown} that are not classes of y {classes.tolist()}"
        )
    for k, v in class_weight.items():
        if isinstance(v, (bool, np.bool_)) or not isinstance(
            v, (int, float, np.integer, np.floating)
        ):
            raise TypeError(f"class_weight[{k!r}] must be a real number, got {v!r}")
        if not (np.isfinite(v) and v >= 0):
            raise ValueError(f"class_weight[{k!r}] must be finite and >= 0, got {v!r}")


def check_choice(name: str, value: Any, options: tuple[str, ...]) -> None:
    """A string option among ``options``."""
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{name} must be one of {list(options)}, got {value!r}")


def check_cv_arg(cv: Any, allow_none: bool = False) -> Any:
    """A ``cv=`` argument: an int >= 2, a splitter (with ``split``) or an iterable of
    ``(train, test)`` pairs (checked where read, :func:`aloocv.folds.cv_splits`); None
    where ``allow_none`` (an estimator's leave-one-out default)."""
    if cv is None and allow_none:
        return None
    if isinstance(cv, (int, np.integer)) and not isinstance(cv, (bool, np.bool_)):
        if int(cv) < 2:
            raise ValueError(f"cv must be >= 2 folds, got {int(cv)}")
        return int(cv)
    kind = isinstance(cv, (bool, np.bool_, str, bytes, dict)) or cv is None
    if kind or not (hasattr(cv, "split") or hasattr(cv, "__iter__")):
        what = "None (leave-one-out), " if allow_none else ""
        raise TypeError(
            f"cv must be {what}an int >= 2, a scikit-learn splitter or an iterable of (train, "
            f"test) splits, got {cv!r}"
        )
    return cv


def check_verbose(verbose: Any) -> bool:
    """``verbose``: a bool or a non-negative integer (scikit-learn's convention)."""
    if isinstance(verbose, (bool, np.bool_)):
        return bool(verbose)
    if not isinstance(verbose, (int, np.integer)) or verbose < 0:
        raise ValueError(f"verbose must be a non-negative integer, got {verbose!r}")
    return verbose > 0


def check_memory_limit(memory_limit: Any) -> float | None:
    """``memory_limit=``: None (the available memory is the budget), a positive finite
    number of bytes, or a string such as ``"2GB"``, ``"1.5 GiB"``, ``"500MB"`` (see
    :mod:`aloocv._memory`). Returns the bytes as a float, or None."""
    from ._memory import parse_bytes

    if memory_limit is None:
        return None
    if isinstance(memory_limit, str):
        out = parse_bytes(memory_limit)
    elif isinstance(memory_limit, (bool, np.bool_)) or not isinstance(memory_limit, numbers.Real):
        raise TypeError(
            f"memory_limit must be None, a number of bytes or a string such as '2GB', got "
            f"{memory_limit!r}"
        )
    else:
        out = float(memory_limit)
    if not (np.isfinite(out) and out >= 1.0):
        raise ValueError(
            f"memory_limit must be a finite size of at least 1 byte, got {memory_limit!r}"
        )
    return out
