"""The inputs of the scikit-learn estimators' ``fit`` on dask collections.

What can be validated without reading X (its chunks are checked in the first pass of
the dask backend), and the per-sample quantities the estimators derive from y (labels,
class weights, 0/1 indicators), each computed chunk by chunk: only a few numbers per
chunk (distinct labels, weighted class counts, ``X^T W y``) reach the client.

dask is an optional dependency: it is imported inside the functions that need it, after
:func:`aloocv._validation_dask.require_dask` has said so clearly when it is missing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.multiclass import check_classification_targets

from ..._validation import check_bool, is_dask_collection
from ..._validation_dask import as_dask_design, as_dask_vector, require_dask

__all__ = [
    "class_weight_vector",
    "enet_top",
    "fit_inputs",
    "label_indicator",
    "labels",
    "local",
]

#: The estimators' flags that keep per-sample arrays (computed to the client).
SAMPLE_FLAGS = ("alpha_per_feature", "store_cv_results", "store_loo")


def fit_inputs(est: Any, X: Any, y: Any, sample_weight: Any) -> tuple[Any, Any, Any]:
    """(X, y, sample_weight) of a regressor's fit on dask input, validated as far as
    possible without reading X; sets ``est.n_features_in_``."""
    require_dask()
    X = as_dask_design(X)
    est.n_features_in_ = int(X.shape[1])
    y = as_dask_vector(y, X, "y")
    if sample_weight is not None:
        sample_weight = as_dask_vector(sample_weight, X, "sample_weight")
    check_bool(est.fit_intercept, "fit_intercept")
    for flag in SAMPLE_FLAGS:
        if hasattr(est, flag):  # the per-sample arrays that these keep (n floats per
            check_bool(getattr(est, flag), flag)  # kept array) are computed to the client
    return X, y, sample_weight


def local(a: Any) -> np.ndarray:
    """A per-sample array on the client: a dask array (dask input, the arrays that
    ``store_loo`` / ``store_cv_results`` / ``scoring=`` ask for) is computed."""
    return np.asarray(a.compute() if is_dask_collection(a) else a, dtype=np.float64)


def enet_top(X: Any, y: Any, sample_weight: Any, fit_intercept: bool) -> tuple[float, np.ndarray]:
    """(sum of weights, X^T W (y - ybar)) of dask input in one pass over X (p floats
    reach the client)."""
    import dask
    import dask.array as da

    w = da.ones_like(y, dtype=np.float64) if sample_weight is None else sample_weight
    n, sy, xwy, xw = dask.compute(w.sum(), (w * y).sum(), X.T @ (w * y), X.T @ w)
    n = float(n)
    ybar = float(sy) / n if (fit_intercept and n > 0) else 0.0
    return n, np.asarray(xwy) - ybar * np.asarray(xw)


def label_indicator(c: Any):
    """A map_blocks function: 1.0 where a chunk of labels equals c, else 0.0."""

    def indicator(yb: np.ndarray) -> np.ndarray:
        return (np.asarray(yb) == c).astype(np.float64)

    return indicator


def _class_weights_of_labels(classes: np.ndarray, cw: np.ndarray):
    """A map_blocks function: the class weight of each label of a chunk of y."""

    def per_sample(yb: np.ndarray) -> np.ndarray:
        return cw[np.searchsorted(classes, yb)]

    return per_sample


def class_weight_vector(class_weight: Any, classes: np.ndarray, y: Any, sample_weight: Any) -> Any:
    """Sample weights (a dask vector) of class_weight on dask y: scikit-learn's
    compute_class_weight on the weighted class counts, taken in one pass over y."""
    import dask

    if isinstance(class_weight, str) and class_weight == "balanced":
        w = 1.0 if sample_weight is None else sample_weight
        counts = np.array(
            dask.compute(
                *[(w * y.map_blocks(label_indicator(c), dtype=np.float64)).sum() for c in classes]
            ),
            dtype=float,
        )
        # each class once, weighted by its count: the same bincount as over y itself
        cw = compute_class_weight("balanced", classes=classes, y=classes, sample_weight=counts)
    else:  # a dict: y is not read
        cw = compute_class_weight(class_weight, classes=classes, y=classes)
    per = y.map_blocks(_class_weights_of_labels(classes, cw), dtype=np.float64)
    return per if sample_weight is None else sample_weight * per


def _chunk_classes(yb: np.ndarray) -> np.ndarray:
    return np.unique(np.asarray(yb))


def _label_vector(y: Any, X: Any) -> Any:
    """y as a 1-d dask vector of labels with X's row chunks (numbers or strings kept)."""
    import dask.array as da

    n = int(X.shape[0])
    if hasattr(y, "to_dask_array") and not isinstance(y, da.Array):  # dask Series
        y = y.to_dask_array(lengths=True)
    if not isinstance(y, da.Array):
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1 or y.shape[0] != n:
            raise ValueError(f"y must be 1-dimensional of length {n}, got shape {y.shape}")
        y = da.from_array(y, chunks=(X.chunks[0],))
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must be 1-dimensional of length {n}, got shape {y.shape}")
    if y.dtype.kind == "c":
        raise ValueError("y holds complex numbers; class labels must be real or strings")
    return y.rechunk((X.chunks[0],))


def labels(X: Any, y: Any, sample_weight: Any) -> tuple[Any, Any, Any, np.ndarray]:
    """(X, y, sample_weight, classes_) of a classifier's fit on dask input: y keeps its
    labels (numbers or strings, as the numpy path), chunked like X's rows; classes_ are
    the sorted distinct labels with y's dtype, from a per-chunk unique reduction (one
    pass over y, not X; only the distinct labels reach the client)."""
    require_dask()
    import dask

    X = as_dask_design(X)
    y = _label_vector(y, X)
    parts = [dask.delayed(_chunk_classes, pure=True)(b) for b in y.to_delayed().ravel()]
    (uniq,) = dask.compute(parts)
    classes = np.unique(np.concatenate([np.asarray(u) for u in uniq]))
    if classes.dtype.kind == "f" and not np.all(np.isfinite(classes)):
        raise ValueError("y contains NaN or inf")
    check_classification_targets(classes)
    if sample_weight is not None:
        sample_weight = as_dask_vector(sample_weight, X, "sample_weight")
    return X, y, sample_weight, classes
