"""Passes over the row chunks: the chunk tasks of the sums and of the first read of
(y, w, offset), the tree reduction of their partial sums (fan-in ``policy.TREE_FANIN``),
:func:`_compute` (every pass's one call into dask) and the stop flag of refit threads
(:func:`aloocv.backends.dask.refits._refits`), checked by every pass."""

from __future__ import annotations

import operator
import threading
from typing import Any

import numpy as np

from ... import _core
from ..._diagnostics import check_class_counts
from ..._validation import check_nonnegative_weight, check_vector
from . import policy
from .data import Data, _chunk_arrays, _chunk_starts, _single_blas, _vec

# A refit thread's stop event (:func:`_refits`): set, its next pass raises _RefitsStopped.
_refit_thread = threading.local()


class _RefitsStopped(Exception):
    """A refit stopped because its caller raised (an error of another refit, Ctrl-C)."""


def _check_stopped() -> None:
    """In a refit thread whose call was stopped (:func:`_refits`): _RefitsStopped. Every
    pass checks (through _compute, or in _pass on held chunks)."""
    if getattr(_refit_thread, "stop", None) is not None and _refit_thread.stop.is_set():
        raise _RefitsStopped


def _compute(obj):
    import dask

    _check_stopped()
    (out,) = dask.compute(obj)
    return out


def _stats(losses: np.ndarray, w: np.ndarray | None) -> tuple[float, float, float]:
    """(sum of weights, weighted mean, weighted sum of squared deviations) of a chunk."""
    if w is None:
        n = float(losses.size)
        m = float(losses.mean()) if losses.size else 0.0
        return n, m, float(np.sum((losses - m) ** 2))
    sw = float(w.sum())
    m = float(losses @ w / sw) if sw > 0 else 0.0
    return sw, m, float(w @ (losses - m) ** 2)


def _merge_stats(a, b):
    """Chan et al.'s pairwise update of (weight, mean, M2)."""
    na, ma, sa = a
    nb, mb, sb = b
    n = na + nb
    if n == 0:
        return a
    d = mb - ma
    return n, ma + d * nb / n, sa + sb + d * d * na * nb / n


def _add(*parts):
    """Elementwise sum of dicts of partial sums (min/max for the y range and max|X~ step|;
    of the chunks' input errors the one of the first row; nested dicts added alike)."""
    out = dict(parts[0])
    for q in parts[1:]:
        for k, v in q.items():
            if v is None:
                continue
            if out.get(k) is None:
                out[k] = v
            elif k == "error":
                out[k] = min(out[k], v, key=operator.itemgetter(0))
            elif k in ("ymin", "margin"):
                out[k] = min(out[k], v)
            elif k in ("ymax", "step_max"):
                out[k] = max(out[k], v)
            elif k == "stats":
                out[k] = _merge_stats(out[k], v)
            elif isinstance(v, dict):  # nested partial sums (ALO's indicator's)
                out[k] = _add(out[k], v)
            else:
                out[k] = out[k] + v
    return out


def _raise_first(s: dict) -> dict:
    """s, or the input error of its first bad chunk (a checking pass reports the errors of
    all chunks; the one of the lowest row is raised, whatever the order the tasks ran)."""
    if s.get("error") is not None:
        raise s["error"][1]
    return s


def _tree(parts: list, merge: Any = None) -> Any:
    """The delayed parts merged by a tree of fan-in TREE_FANIN (``merge``: summing
    ``_add`` by default)."""
    from dask import delayed

    merge = _add if merge is None else merge
    while len(parts) > 1:
        parts = [
            delayed(merge, pure=True)(*parts[i : i + policy.TREE_FANIN])
            for i in range(0, len(parts), policy.TREE_FANIN)
        ]
    return parts[0]


def _reduce(parts: list, nbytes: int) -> dict:
    """The sum of the partial sums `parts` (delayed dicts of about `nbytes` bytes each): a
    tree on the workers down to TREE_FANIN of them, which are added on the client when
    they are small (CLIENT_ADD_BYTES), else by one more task."""
    from dask import delayed

    while len(parts) > policy.TREE_FANIN:
        parts = [
            delayed(_add, pure=True)(*parts[i : i + policy.TREE_FANIN])
            for i in range(0, len(parts), policy.TREE_FANIN)
        ]
    if len(parts) * nbytes > policy.CLIENT_ADD_BYTES:
        return _compute(_tree(parts))
    return _add(*_compute(parts))


def _held_sum(client: Any, futs: list, nbytes: int) -> dict:
    """The sum of the partial sums `futs` (futures of chunk tasks mapped over held chunks,
    about `nbytes` bytes each): a tree of tasks on the workers down to TREE_FANIN of
    them, added on the client when small (CLIENT_ADD_BYTES), else by one more task."""
    while len(futs) > policy.TREE_FANIN or (
        len(futs) > 1 and len(futs) * nbytes > policy.CLIENT_ADD_BYTES
    ):
        futs = [
            client.submit(_add, *futs[i : i + policy.TREE_FANIN], pure=False)
            for i in range(0, len(futs), policy.TREE_FANIN)
        ]
    return _add(*client.gather(futs))


@_single_blas
def _sums_task(
    x,
    y,
    w,
    off,
    loss,
    intercept,
    beta,
    hessian,
    check,
    nt,
    cols=None,
    step=None,
    clip=False,
    row0=0,
):
    try:
        x, y, w, off = _chunk_arrays(x, y, w, off, check, row0)
        if cols is not None:  # the working-set columns (beta holds their entries)
            x = np.ascontiguousarray(x[:, cols])
        beta = _vec(beta)
        step = None if step is None else _vec(step)
        out = _core.chunk_sums(
            x,
            y,
            w,
            loss,
            fit_intercept=intercept,
            beta=beta,
            hessian=hessian,
            check=check,
            n_threads=nt,
            offset=off,
            step=step,
            clip=clip,
        )
    except (ValueError, TypeError) as e:
        if not check:
            raise
        return {"error": (row0, e)}  # the client raises the first chunk's (_raise_first)
    ysum = float(y.sum() if w is None else y @ w) if check else 0.0
    offsum = float(0.0 if off is None else (off.sum() if w is None else off @ w))
    yrange = (float(y.min()), float(y.max())) if check and y.size else (np.inf, -np.inf)
    return {
        "loss": out.loss,
        "weight": out.weight,
        "grad": out.grad,
        "hess": out.hess,
        "step_max": out.step_max,
        "ysum": ysum,
        "offsum": offsum,
        "ymin": yrange[0],
        "ymax": yrange[1],
    }


def _pass(
    data: Data,
    beta: np.ndarray,
    hessian: bool,
    check: bool = False,
    cols: Any = None,
    step: np.ndarray | None = None,
    clip: bool = False,
) -> dict:
    """Sums over the chunks at beta; with `cols`, of the columns `cols` of X only (beta
    then holds the intercept, if any, and those columns' coefficients). With `step`, also
    max |X~ step| ("step_max"); with `clip`, the Hessian of w l'' clipped at 0."""
    from dask import delayed

    p1 = data.p1 if cols is None else len(cols) + int(data.fit_intercept)
    nbytes = 8 * (p1 + 16 + (p1 * p1 if hessian else 0))
    held = data.held()
    if held is not None:
        _check_stopped()
        client, chunks = held
        args = (
            data.loss.core,
            data.fit_intercept,
            np.ascontiguousarray(beta, dtype=np.float64),
            hessian,
            check,
            data.n_threads,
            None if cols is None else np.asarray(cols, dtype=np.intp),
            None if step is None else np.ascontiguousarray(step, dtype=np.float64),
            clip,
        )
        k = len(chunks)
        futs = client.map(
            _sums_task,
            *zip(*chunks),
            *([a] * k for a in args),
            _chunk_starts(data) if check else [0] * k,
            pure=False,
        )
        return _raise_first(_held_sum(client, futs, nbytes))
    b = delayed(np.ascontiguousarray(beta, dtype=np.float64), pure=True)
    c = None if cols is None else delayed(np.asarray(cols, dtype=np.intp), pure=True)
    sd = None if step is None else delayed(np.ascontiguousarray(step, dtype=np.float64), pure=True)
    parts = [
        delayed(_sums_task, pure=True)(
            x,
            y,
            w,
            o,
            data.loss.core,
            data.fit_intercept,
            b,
            hessian,
            check,
            data.n_threads,
            c,
            sd,
            clip,
            r0 if check else 0,
        )
        for (x, y, w, o), r0 in zip(data.blocks(), _chunk_starts(data))
    ]
    return _raise_first(_reduce(parts, nbytes))


def _ystats_task(y, w, off, loss, row0=0, classes=False):
    """Checks and sums of one chunk of (y, w, offset) (X is not read); the chunk starts
    at row `row0` (the index that messages name). With `classes`, also the samples of
    positive weight of class 0 ("zeros") and of class 1 ("ones")."""
    try:
        y = check_vector(np.asarray(y), np.shape(y)[0], "y", row0)
        _core.loss_valid(loss, y, row0)
        if w is not None:
            w = check_nonnegative_weight(
                check_vector(np.asarray(w), y.shape[0], "sample_weight", row0), row0
            )
        if off is not None:
            off = check_vector(np.asarray(off), y.shape[0], "offset", row0)
    except (ValueError, TypeError) as e:
        return {"error": (row0, e)}  # the client raises the first chunk's (_raise_first)
    out = {
        "weight": float(y.size if w is None else w.sum()),
        "ysum": float(y.sum() if w is None else y @ w),
        "offsum": float(0.0 if off is None else (off.sum() if w is None else off @ w)),
        "ymin": float(y.min()) if y.size else np.inf,
        "ymax": float(y.max()) if y.size else -np.inf,
    }
    if classes:
        pos = np.ones(y.shape[0], dtype=bool) if w is None else w > 0
        out["zeros"] = int(np.count_nonzero(pos & (y <= 0.5)))
        out["ones"] = int(np.count_nonzero(pos & (y > 0.5)))
    return out


def _first_pass(data: Data, loo: bool = False) -> dict:
    """Sums of weights, y and offset; the y range; every chunk of y, w, offset checked;
    for the logistic loss with an intercept the class counts ("zeros", "ones": samples of
    positive weight), checked as leave-one-out needs them with `loo`. One pass per
    problem: kept in ``data.first``."""
    from dask import delayed

    classes = data.loss == "logistic" and data.fit_intercept
    if data.first is None:
        parts = [
            delayed(_ystats_task, pure=True)(y, w, o, data.loss.core, r0, classes)
            for (_, y, w, o), r0 in zip(data.blocks(), _chunk_starts(data))
        ]
        data.first = _raise_first(_compute(_tree(parts)))
    first = data.first
    if loo and classes:  # as in memory: 2 of each class
        check_class_counts(int(first["zeros"]), int(first["ones"]), loo=True)
    _check_first_pass(data, first)
    return first


def _check_first_pass(data: Data, s: dict) -> None:
    if not s["weight"] > 0:
        raise ValueError("sample_weight sums to zero")
    if data.loss == "logistic" and not (s["ymin"] < s["ymax"]):
        raise ValueError("y has a single class: logistic regression needs both 0 and 1")


def _per_sample(outs: list, data: Data, key: str, tail: tuple = ()) -> Any:
    """The per-chunk outputs' entry `key` (each of shape (rows, *tail)) as one dask array
    with X's row chunks."""
    import dask.array as da
    from dask import delayed

    arrs = [
        da.from_delayed(
            delayed(operator.getitem, pure=True)(o, key), shape=(c, *tail), dtype=np.float64
        )
        for o, c in zip(outs, data.X.chunks[0])
    ]
    return da.concatenate(arrs)


def _scattered(client, v: np.ndarray):
    """v held by a worker, as a dask array (the client keeps no copy)."""
    import dask.array as da
    from dask import delayed

    fut = client.scatter(v)
    return da.from_delayed(delayed(fut), shape=v.shape, dtype=v.dtype)
