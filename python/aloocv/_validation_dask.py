"""The validation layer for dask input: what can be checked without reading the data
(shapes, dtypes, chunking). The values are checked chunk by chunk in the dask backend's
first pass, with the same messages as :mod:`aloocv._validation` gives in memory."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._validation import check_class_label_dtype, check_labels, check_vector

__all__ = ["as_dask_design", "as_dask_vector", "require_dask"]


def require_dask() -> None:
    """Raises a clear ImportError when the optional dependency dask is missing."""
    try:
        import dask.array
        import dask.delayed  # noqa: F401
    except ImportError:
        raise ImportError(
            "dask input needs the optional dependency dask: pip install 'aloocv[dask]' "
            "(or pip install 'dask[array,distributed]')"
        ) from None


def as_dask_design(X: Any) -> Any:
    """A dask array or DataFrame as a float64 or float32 dask array chunked by rows only
    (what can be checked without reading it; the chunks' values are checked in the
    backend's first pass). float32 stays float32 (no widened copy of X: half the reads
    and the memory of float64; each chunk task hands it to the core, which widens it as
    it reads it, as in memory); other real dtypes are widened to float64."""
    import dask.array as da

    if hasattr(X, "to_dask_array") and not isinstance(X, da.Array):  # dask DataFrame
        X = X.to_dask_array(lengths=True)
    if not isinstance(X, da.Array):
        raise TypeError(f"X must be a dask array or a dask DataFrame, got {type(X).__name__}")
    if X.ndim != 2:
        raise ValueError(f"X must be 2-dimensional, got shape {X.shape}")
    if any(math.isnan(c) for c in X.chunks[0]):
        raise ValueError(
            "X has unknown chunk sizes; for a dask DataFrame use df.to_dask_array(lengths=True)"
        )
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X is empty: shape {X.shape}")
    if X.dtype.kind not in "fiub" or X.dtype.kind == "b":
        raise TypeError(f"X must hold real numbers, got dtype {X.dtype}")
    if X.dtype not in (np.float64, np.float32):  # float32 kept: read and held as it is
        X = X.astype(np.float64)
    if X.numblocks[1] > 1:
        X = X.rechunk({1: -1})  # row chunks only: each task sees whole rows
    return X


def as_dask_vector(v: Any, X: Any, name: str, labels: bool = False) -> Any:
    """v as a float64 dask vector with X's row chunks (a numpy vector is validated here,
    a dask one chunk by chunk in the first pass). ``labels=True``: multinomial class
    labels, their dtype kept (checked to be numeric; values checked in the first pass)."""
    import dask.array as da

    n = X.shape[0]
    if hasattr(v, "to_dask_array") and not isinstance(v, da.Array):  # dask Series
        v = v.to_dask_array(lengths=True)
    if isinstance(v, da.Array):
        if v.ndim == 2 and v.shape[1] == 1:
            v = v[:, 0]
        if v.ndim != 1 or v.shape[0] != n:
            raise ValueError(f"{name} must be 1-dimensional of length {n}, got shape {v.shape}")
        if labels:
            check_class_label_dtype(v.dtype)
            return v.rechunk((X.chunks[0],))
        if v.dtype.kind not in "fiub":
            raise TypeError(f"{name} must hold real numbers, got dtype {v.dtype}")
        return v.astype(np.float64).rechunk((X.chunks[0],))
    if labels:
        arr = check_labels(v, n, name)
        check_class_label_dtype(arr.dtype)
    else:
        arr = check_vector(v, n, name)
    return da.from_array(arr, chunks=(X.chunks[0],))
