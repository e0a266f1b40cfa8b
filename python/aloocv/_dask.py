"""Dask input: ``fit``, ``loo``, ``kfold`` and ``tune`` as map-reduce passes over the row
chunks of a dask array.

Every pass maps one core kernel (``aloocv._core.chunk_*``, the same C++ loss, gradient,
Hessian, leverage and hypergradient code as the in-memory path) over the row chunks of
``(X, y, sample_weight, offset)`` and adds the per-chunk partial sums in a tree
(fan-in :data:`TREE_FANIN`); the p1 x p1 algebra (Cholesky factor, Newton and adjoint
solves) runs on the client. X is never concatenated and never reaches the client: what
comes back of a pass is O(p1^2) (plus, where documented, one float per sample).

The tasks run on whatever dask scheduler is active: the workers of a
``dask.distributed.Client``, or without one dask's threaded scheduler in this process
(out of core: a dask array over ``np.memmap`` or zarr is read chunk by chunk, once per
pass). Lost chunks (a worker that dies) are recomputed by dask; the partial sums of a
chunk do not depend on where or how often it is computed, so the result does not change.

Passes over X: the smooth fits are the core's one Newton driver (``newton_drive``, the
in-memory fits' iterates, steps and Hessian count) on a sums source whose every
evaluation is one pass (:func:`newton`): one pass per Newton iteration (loss, gradient
and, where the next step needs it, the Hessian of the trial point together, so an
accepted full step costs no extra pass; near the optimum chord steps on the last factor
need gradient-only passes, and the Hessian at the solution comes with the last one).
ALO: one more pass (leverages, in the same pass as the hypergradient's first
accumulation); the exact hypergradient of a curved loss:
one more pass. With an L1 term (L1, ElasticNet) the fit is the core's active-set
proximal Newton (:func:`enet_newton`: a gradient pass and a Hessian pass over the
working-set columns per outer iteration, the quadratic model solved on the client by the
core's coordinate descent) and ALO, its hypergradient and the approximate K-fold use
the columns of the active set, as in memory.
Exact leave-one-out (``method="exact"``): the core's refits (each from the full fit, chord
steps on the full factor downdated by the left-out sample, then fresh leave-one-out
Hessians) run in lockstep batches of EXACT_BATCH samples, one pass per iteration that
returns p1 floats per refit (``_core.chunk_refits``); a batch needs about as many passes
as its slowest refit needs Newton steps (10-20 at tol=1e-12). Tuning brings back per
evaluated point the fit, the ALO mean, its standard error and gradient; the per-sample
values stay dask arrays aligned with X's chunks.
Each chunk task uses ``n_jobs`` OpenMP threads (default 1: dask runs the
chunks in parallel) and a single-threaded BLAS; a sums task reads its chunk of X once
(twice with the Hessian), as the in-memory fused step does. On persisted input (every
chunk of X, y, w, offset held by a distributed client's workers) a pass maps over the
chunks' futures (``client.map``) and adds the partial sums on the client: no graph is
built per pass. Every pass costs dask's scheduling of
one task per chunk: chunks of about 100 MB (dask's default chunk size) keep that small
(seen at n=1e6, p=100 on 2 workers: 1.1-1.2x the in-memory time with 100 MB chunks,
1.6-1.8x with 40 MB chunks). The multinomial loss: :mod:`aloocv._dask_multinomial`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
import threading
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from . import _blas, _core
from ._diagnostics import (
    check_class_counts,
    check_fold_class_counts,
    check_separation_margin,
    min_margin,
    unreliable_mask,
    warn_ill_conditioned,
    warn_unreliable_count,
)
from ._validation import (
    MULTINOMIAL,
    as_penalty,
    check_bool,
    check_loss,
    check_nonnegative_weight,
    check_options,
    check_penalty,
    check_vector,
    check_X,
    is_dask_collection,
    n_threads,
    require_dask,
)

if TYPE_CHECKING:
    from .results import StateOutput

__all__ = ["DaskTuneState", "fit", "is_dask_collection", "kfold", "loo"]

#: Partial sums added per task of the tree reduction.
TREE_FANIN = 8
#: The last (at most TREE_FANIN) partial sums of a pass are added on the client when
#: they hold at most this many bytes together (one task and one transfer less per pass).
CLIENT_ADD_BYTES = 16 * 2**20
#: Armijo constant and maximum halvings of the Newton line search (as the core's).
ARMIJO = 1e-4
MAX_HALVINGS = 60
#: Predicted decreases below this times max(1, |f|) are at the rounding level (core's
#: kTinyDecrease); STALL_ITERS such steps without halving the gradient norm stop Newton.
TINY_DECREASE = 1e-13
STALL_ITERS = 3
#: Exact leave-one-out refits run in lockstep per pass over X (each pass returns
#: p1 x this many floats; each task holds a row block x this many linear predictors).
EXACT_BATCH = 64
#: Rows of EXACT_FETCH batches are brought to the client at once (their x~_j, y_j, w_j
#: for the Sherman-Morrison downdates): one read of their chunk per EXACT_FETCH batches.
EXACT_FETCH = 16
#: The exact refits' chord phase (the core's exact_loo policy): chord steps on the
#: downdated full factor while each cuts max|grad| to at most this fraction of the last,
#: at most EXACT_MAX_CHORD in a row; then fresh leave-one-out Hessians.
EXACT_CHORD_RATIO = 0.25
EXACT_MAX_CHORD = 9
#: Refits that each run their own chain of passes over the chunks (exact leave-one-out
#: and K-fold with an L1 term or the multinomial loss, the certificate's sampled refits)
#: run this many at a time on a distributed client, each from a thread on the client:
#: their round trips overlap on the cluster (:func:`_refits`). LocalCluster, 2 workers,
#: n=40, p=8: exact leave-one-out with an L1 term 6.8 s instead of 16.0 s, multinomial
#: 5.6 s instead of 15.8 s. With the local threaded scheduler (no round trips to
#: overlap) threads took 1.17-1.23x as long: there the refits run one at a time.
REFIT_THREADS = 8
#: The caller of those refits waits for them in slices of this many seconds (Ctrl-C).
REFIT_POLL_S = 0.1
#: Fewer refits run together where their client-side state (Hessians) would exceed this.
REFIT_BYTES = 256 * 2**20


# --------------------------------------------------------------------------- inputs
@dataclass
class Data:
    """Validated dask problem: X (n x p, one column chunk, float64), and y, w, offset as
    dask arrays with X's row chunks (w, offset may be None)."""

    X: Any
    y: Any
    w: Any
    offset: Any
    loss: Any
    penalty: Any
    pen: np.ndarray
    fit_intercept: bool
    n_threads: int
    l1: np.ndarray | None = None  # L1 weights per feature (None: no L1 term)
    # What one read of y, w, offset gave (_first_pass), and whether the chunks of X were
    # checked (the first sums pass): once per problem, not once per fit (tune fits many
    # times). Not carried over by dataclasses.replace (a problem with other weights).
    first: dict | None = field(default=None, init=False, repr=False)
    checked: bool = field(default=False, init=False, repr=False)
    _blocks: list | None = field(default=None, init=False, repr=False)
    _held: Any = field(default=None, init=False, repr=False)

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def p(self) -> int:
        return int(self.X.shape[1])

    @property
    def p1(self) -> int:
        return self.p + int(self.fit_intercept)

    def blocks(self) -> list[tuple[Any, Any, Any, Any]]:
        """(X, y, w, offset) delayed objects of every row chunk (made once per problem:
        every pass maps over them)."""
        if self._blocks is None:
            self._blocks = self._make_blocks()
        return self._blocks

    def held(self) -> tuple[Any, list] | None:
        """(client, per row chunk the futures of X, y, w, offset) when a distributed
        client runs this call and holds every chunk in its workers' memory (persisted
        input): passes then map over those futures directly, without building a graph.
        None otherwise (looked up once per problem)."""
        if self._held is None:
            self._held = _held_chunks(self) or False
        return self._held or None

    def _make_blocks(self) -> list[tuple[Any, Any, Any, Any]]:
        xs = self.X.to_delayed().ravel().tolist()
        ys = self.y.to_delayed().ravel().tolist()
        ws = self.w.to_delayed().ravel().tolist() if self.w is not None else [None] * len(xs)
        os_ = (
            self.offset.to_delayed().ravel().tolist()
            if self.offset is not None
            else [None] * len(xs)
        )
        return list(zip(xs, ys, ws, os_))


def _held_chunks(data: Data) -> tuple[Any, list] | None:
    client = _client()
    if client is None:
        return None
    from dask.core import flatten
    from distributed import futures_of

    cols = []
    for arr in (data.X, data.y, data.w, data.offset):
        if arr is None:
            cols.append([None] * len(data.X.chunks[0]))
            continue
        held = {f.key: f for f in futures_of(arr)}
        keys = list(flatten(arr.__dask_keys__()))
        if not all(k in held for k in keys):
            return None
        cols.append([held[k] for k in keys])
    return client, list(zip(*cols))


def _as_dask_2d(X: Any) -> Any:
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
    if X.dtype != np.float64:
        X = X.astype(np.float64)
    if X.numblocks[1] > 1:
        X = X.rechunk({1: -1})  # row chunks only: each task sees whole rows
    return X


def _as_dask_vector(v: Any, X: Any, name: str) -> Any:
    """v as a float64 dask vector with X's row chunks (a numpy vector is validated here,
    a dask one chunk by chunk in the first pass)."""
    import dask.array as da

    n = X.shape[0]
    if hasattr(v, "to_dask_array") and not isinstance(v, da.Array):  # dask Series
        v = v.to_dask_array(lengths=True)
    if isinstance(v, da.Array):
        if v.ndim == 2 and v.shape[1] == 1:
            v = v[:, 0]
        if v.ndim != 1 or v.shape[0] != n:
            raise ValueError(f"{name} must be 1-dimensional of length {n}, got shape {v.shape}")
        if v.dtype.kind not in "fiub":
            raise TypeError(f"{name} must hold real numbers, got dtype {v.dtype}")
        return v.astype(np.float64).rechunk((X.chunks[0],))
    arr = check_vector(v, n, name)
    return da.from_array(arr, chunks=(X.chunks[0],))


def prepare(
    X: Any,
    y: Any,
    loss: Any,
    penalty: Any,
    sample_weight: Any,
    fit_intercept: Any,
    offset: Any,
    n_jobs: Any,
) -> Data:
    """Validates a dask problem (what can be checked without reading X; the chunks are
    checked in the first pass)."""
    require_dask()
    check_bool(fit_intercept, "fit_intercept")
    if isinstance(loss, str) and loss == MULTINOMIAL:  # fit, loo, kfold, tune: _dask_multinomial
        raise ValueError(
            "the multinomial loss on dask input is available in aloocv.fit, aloocv.loo, "
            "aloocv.kfold and aloocv.tune only; use a numpy array"
        )
    X = _as_dask_2d(X)
    loss = check_loss(loss)
    penalty = as_penalty(penalty)
    pen, l1 = check_penalty(penalty, int(X.shape[1]))
    if l1 is not None and not np.any(l1 > 0):
        l1 = None
    y = _as_dask_vector(y, X, "y")
    w = None if sample_weight is None else _as_dask_vector(sample_weight, X, "sample_weight")
    off = None if offset is None else _as_dask_vector(offset, X, "offset")
    return Data(
        X,
        y,
        w,
        off,
        loss,
        penalty,
        np.ascontiguousarray(pen),
        bool(fit_intercept),
        1 if n_jobs is None else n_threads(n_jobs),
        None if l1 is None else np.ascontiguousarray(l1, dtype=np.float64),
    )


def _chunk_arrays(x, y, w, off, check, row0=0):
    """numpy views of one chunk; with `check`, validated as the in-memory path would
    (messages name the row of the whole X: the chunk starts at row `row0`)."""
    x = np.asarray(x)
    y = np.asarray(y, dtype=np.float64)
    if check:
        x = check_X(x, row0=row0, chunk=True)
        y = check_vector(y, y.shape[0], "y", row0)
        if w is not None:
            w = check_nonnegative_weight(
                check_vector(np.asarray(w), y.shape[0], "sample_weight", row0), row0
            )
        if off is not None:
            off = check_vector(np.asarray(off), y.shape[0], "offset", row0)
    x = x if x.dtype == np.float64 else x.astype(np.float64)
    if not x.flags.aligned:  # a buffer deserialized at an odd offset
        x = np.array(x)
    return x, _vec(y), None if w is None else _vec(w), None if off is None else _vec(off)


def _vec(a: Any) -> np.ndarray:
    """A contiguous, aligned float64 copy-if-needed of a small array received by a task
    (pickled buffers can arrive unaligned)."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    return a if a.flags.aligned else a.copy()


# --------------------------------------------------------------------------- chunk tasks
def _single_blas(task):
    """Runs a chunk task with the BLAS libraries limited to one thread (the core's own
    OpenMP loops and dask's tasks are the parallel layers; a threaded BLAS inside each
    task oversubscribes the cores, seen: 4x slower)."""

    @functools.wraps(task)
    def wrapper(*args, **kwargs):
        with _blas.single_threaded_blas():
            return task(*args, **kwargs)

    return wrapper


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


def _chunk_starts(data: Data) -> list[int]:
    """The row of X where each row chunk starts."""
    return [0, *np.cumsum(data.X.chunks[0][:-1]).astype(int).tolist()]


def _add(*parts):
    """Elementwise sum of dicts of partial sums (min/max for the y range and max|X~ step|;
    of the chunks' input errors the one of the first row)."""
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
            else:
                out[k] = out[k] + v
    return out


def _raise_first(s: dict) -> dict:
    """s, or the input error of its first bad chunk (a checking pass reports the errors of
    all chunks; the one of the lowest row is raised, whatever the order the tasks ran)."""
    if s.get("error") is not None:
        raise s["error"][1]
    return s


def _tree(parts: list) -> Any:
    from dask import delayed

    while len(parts) > 1:
        parts = [
            delayed(_add, pure=True)(*parts[i : i + TREE_FANIN])
            for i in range(0, len(parts), TREE_FANIN)
        ]
    return parts[0]


def _compute(obj):
    import dask

    _check_stopped()
    (out,) = dask.compute(obj)
    return out


def _check_stopped() -> None:
    """In a refit thread whose call was stopped (:func:`_refits`): _RefitsStopped. Every
    pass checks (through _compute, or in _pass on held chunks)."""
    if getattr(_refit_thread, "stop", None) is not None and _refit_thread.stop.is_set():
        raise _RefitsStopped


# A refit thread's stop event (:func:`_refits`): set, its next pass raises _RefitsStopped.
_refit_thread = threading.local()


class _RefitsStopped(Exception):
    """A refit stopped because its caller raised (an error of another refit, Ctrl-C)."""


def _refits(fn, items: list, nbytes: int = 0) -> list:
    """``[fn(item) for item in items]``: on a distributed client with up to REFIT_THREADS
    calls at a time (fewer where the calls' client-side state, about `nbytes` each, would
    exceed REFIT_BYTES together), each in a thread of its own (every call a fit with its
    own chain of passes over the chunks, whose round trips then overlap; a local
    scheduler has none to overlap, and there the calls run one after the other). The
    threads run in copies of the caller's context (a client made current by
    ``Client.as_current()`` stays current). When a call raises, the calls not started
    are dropped, the running ones stop at their next pass, and that error (the first to
    occur) is raised; on Ctrl-C the caller returns at once and the running calls stop at
    their next pass."""
    import contextvars
    from concurrent.futures import ThreadPoolExecutor

    threads = min(REFIT_THREADS, len(items))
    if nbytes > 0:
        threads = min(threads, max(1, REFIT_BYTES // nbytes))
    if threads <= 1 or _client() is None:
        return [fn(item) for item in items]
    stop = threading.Event()  # an error: the others stop at their next pass
    wake = threading.Event()  # every call ended, or stop
    errors: list[BaseException] = []
    results: list = [None] * len(items)
    ended = [0]
    lock = threading.Lock()

    def run(k: int) -> None:
        try:
            if stop.is_set():
                raise _RefitsStopped
            _refit_thread.stop = stop
            results[k] = fn(items[k])
        except _RefitsStopped:
            pass
        except BaseException as e:
            errors.append(e)  # before stop: the others' _RefitsStopped never hides it
            stop.set()
        finally:
            _refit_thread.stop = None
            with lock:
                ended[0] += 1
                if ended[0] == len(items) or stop.is_set():
                    wake.set()

    pool = ThreadPoolExecutor(threads, thread_name_prefix="aloocv-refit")
    interrupted = False
    try:
        for k in range(len(items)):
            pool.submit(contextvars.copy_context().run, run, k)
        # wait in short slices (a Ctrl-C that reached another thread is raised here then)
        # on an event, not on the futures' own locks
        while not wake.wait(REFIT_POLL_S):
            pass
        if errors:
            raise errors[0]
        return results
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        stop.set()
        pool.shutdown(wait=not interrupted, cancel_futures=True)


def _reduce(parts: list, nbytes: int) -> dict:
    """The sum of the partial sums `parts` (delayed dicts of about `nbytes` bytes each): a
    tree on the workers down to TREE_FANIN of them, which are added on the client when
    they are small (CLIENT_ADD_BYTES), else by one more task."""
    from dask import delayed

    while len(parts) > TREE_FANIN:
        parts = [
            delayed(_add, pure=True)(*parts[i : i + TREE_FANIN])
            for i in range(0, len(parts), TREE_FANIN)
        ]
    if len(parts) * nbytes > CLIENT_ADD_BYTES:
        return _compute(_tree(parts))
    return _add(*_compute(parts))


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
        while len(futs) > TREE_FANIN or (len(futs) > 1 and len(futs) * nbytes > CLIENT_ADD_BYTES):
            futs = [
                client.submit(_add, *futs[i : i + TREE_FANIN], pure=False)
                for i in range(0, len(futs), TREE_FANIN)
            ]
        return _raise_first(_add(*client.gather(futs)))
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


# --------------------------------------------------------------------------- fit
@dataclass
class _State:
    beta: np.ndarray
    f: float  # penalized objective
    grad: np.ndarray  # penalized gradient
    H: np.ndarray  # penalized Hessian at beta
    sw: float
    n_iter: int
    converged: bool
    grad_norm: float
    active: np.ndarray | None = None  # L1: the nonzero features (H is on them)
    hessian_passes: int = 0  # Hessians factored (as the in-memory fit counts them)
    hx: np.ndarray | None = None  # the unpenalized part of H (smooth fits)
    hessian_at_point: bool = True  # H is the Hessian at beta
    # a fused end's deferred guard (newton's defer_end_guard): the end Hessian's Newton
    # step and its decrement, settled by the leverage pass (_settle_guard); None: none
    guard: tuple[np.ndarray, float] | None = None
    # the source's unpenalized sums at beta (loss, gradient): the next penalty's fit
    # starts from them without a pass (as path_fit's predictor in memory)
    sums: tuple[float, np.ndarray] | None = None


def _penalized(data: Data, beta: np.ndarray, s: dict) -> tuple[float, np.ndarray, np.ndarray]:
    off = int(data.fit_intercept)
    pen1 = np.concatenate([np.zeros(off), data.pen])
    f = float(s["loss"] + 0.5 * pen1 @ (beta * beta))
    g = s["grad"] + pen1 * beta
    H = None
    if s.get("hess") is not None:
        H = np.array(s["hess"])
        H[np.diag_indices_from(H)] += pen1
    return f, g, H


def _cho(H: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.cholesky(H)
    except np.linalg.LinAlgError:
        raise ValueError(
            "the Hessian is not positive definite (singular design without enough penalty, or "
            "a loss with negative curvature): use a larger penalty"
        ) from None


def _solve(L: np.ndarray, b: np.ndarray) -> np.ndarray:
    from scipy.linalg import solve_triangular

    z = solve_triangular(L, b, lower=True, check_finite=False)
    return solve_triangular(L.T, z, lower=False, check_finite=False)


def _init_beta(data: Data, s: dict) -> np.ndarray:
    """The core's cold start: zero slopes, the intercept at the link of the weighted mean
    of y (a mean offset subtracted)."""
    beta = np.zeros(data.p1)
    if data.fit_intercept:
        ybar = s["ysum"] / s["weight"]
        if data.loss.link == "logit":
            q = min(max(ybar, 1e-6), 1.0 - 1e-6)
            b = math.log(q / (1.0 - q))
        elif data.loss.link == "log":
            b = math.log(max(ybar, 1e-10))
        else:
            b = ybar
        beta[0] = b - s["offsum"] / s["weight"]
    return beta


def _check_first_pass(data: Data, s: dict) -> None:
    if not s["weight"] > 0:
        raise ValueError("sample_weight sums to zero")
    if data.loss == "logistic" and not (s["ymin"] < s["ymax"]):
        raise ValueError("y has a single class: logistic regression needs both 0 and 1")


def _sums_source(data: Data):
    """The dask problem as a sums source of the core's Newton driver (``_core.sums_fit``):
    each call is one map-reduce pass over the chunks (:func:`_pass`); the first one of
    the problem also checks every chunk of X."""

    def source(beta, *, step, hessian, clip):
        s = _pass(data, beta, hessian, check=not data.checked, step=step, clip=clip)
        data.checked = True
        hess = None if s["hess"] is None else np.array(s["hess"], dtype=np.float64, order="F")
        return float(s["loss"]), _vec(s["grad"]), hess, float(s["step_max"])

    return source


def newton(
    data: Data,
    tol: float,
    max_iter: int,
    beta0: np.ndarray | None = None,
    fresh_end: bool = False,
    previous: _State | None = None,
    secant: bool = False,
    defer_end_guard: bool = False,
) -> _State:
    """Damped Newton over the chunks: the core's one Newton driver (``newton_drive``) on
    a sums model whose every evaluation is one pass over the chunks (loss, gradient and,
    when the next step needs it, the Hessian of the trial point in the same pass). It
    takes the in-memory fit's iterates: ``newton_fit``'s (with `fresh_end` as the
    leave-one-out formulas use it: chord steps near the optimum and a fresh Hessian at
    the returned beta), or with `previous` (an earlier fit of the same data under another
    penalty) ``path_fit``'s, starting on its Hessian plus the new penalty; `secant` as
    the in-memory tuning runs (FitOptions::secant: secant-corrected chord steps). With
    `defer_end_guard` (a fresh end whose leverage pass follows) the guard of the fused
    end is left in the state's ``guard``: the leverage pass measures it
    (:func:`_settle_guard`) instead of a pass of its own."""
    first = _first_pass(data)
    sw = float(first["weight"])
    if previous is not None:
        beta = np.array(previous.beta, dtype=np.float64)
    elif beta0 is None:
        beta = _init_beta(data, first)
    else:
        beta = np.array(beta0, dtype=np.float64)
    r = _core.sums_fit(
        _sums_source(data),
        data.loss.core,
        data.pen,
        fit_intercept=data.fit_intercept,
        beta0=np.ascontiguousarray(beta),
        weight_sum=sw,
        tol=tol,
        max_iter=max_iter,
        fresh_end=fresh_end,
        previous_hessian=None if previous is None else previous.hx,
        secant=secant,
        defer_end_guard=defer_end_guard,
        start_loss=None if previous is None or previous.sums is None else previous.sums[0],
        start_grad=None if previous is None or previous.sums is None else previous.sums[1],
    )
    guard = None
    if r.end_guard_step is not None:
        guard = (np.array(r.end_guard_step), float(r.end_guard_dec))
    return _State(
        r.beta,
        float(r.objective),
        r.grad,
        r.hessian,
        sw,
        int(r.n_iter),
        bool(r.converged),
        float(r.grad_norm),
        hessian_passes=int(r.hessian_passes),
        hx=r.unpenalized_hessian,
        hessian_at_point=bool(r.hessian_at_point),
        guard=guard,
        sums=(float(r.loss), np.array(r.loss_grad)),
    )


def _kkt(beta: np.ndarray, grad: np.ndarray, l1: np.ndarray) -> np.ndarray:
    """Per coordinate, the minimum-norm subgradient of the objective (the core's
    kkt_violation)."""
    return np.where(
        beta > 0,
        np.abs(grad + l1),
        np.where(beta < 0, np.abs(grad - l1), np.maximum(0.0, np.abs(grad) - l1)),
    )


def _enet_objective(data: Data, beta: np.ndarray, s: dict, l1: np.ndarray):
    f, g, _ = _penalized(data, beta, s)
    return f + float(l1 @ np.abs(beta)), g


def _hess_on(data: Data, beta: np.ndarray, idx: list, pen1: np.ndarray) -> np.ndarray:
    """The penalized Hessian on the coordinates `idx` of beta (intercept first, if any)
    in one pass over those columns of X."""
    off = int(data.fit_intercept)
    cols = [j - off for j in idx if j >= off]
    s = _pass(data, beta[idx], hessian=True, cols=cols)
    H = np.array(s["hess"])
    H[np.diag_indices_from(H)] += pen1[idx]
    return H


def _enet_source(data: Data):
    """The dask problem as a sums source of the core's elastic-net fit
    (``_core.enet_sums_fit``): one map-reduce pass per call; with ``cols`` (a working set's
    coordinates of beta, beta zero elsewhere) the pass reads only those columns of X and
    returns the Hessian and gradient on them. The first call also checks every chunk of X."""
    off = int(data.fit_intercept)
    checked = False

    def source(beta, *, step, hessian, clip, cols=None):
        nonlocal checked
        if cols is None:
            s = _pass(data, beta, hessian, check=not checked)
        else:
            feat = [int(j) - off for j in cols if j >= off]
            s = _pass(data, beta[cols], hessian, check=not checked, cols=feat)
        checked = True
        hess = None if s["hess"] is None else np.array(s["hess"], dtype=np.float64, order="F")
        return float(s["loss"]), _vec(s["grad"]), hess, 0.0

    return source


def enet_newton(data: Data, tol: float, max_iter: int, beta0: np.ndarray | None = None) -> _State:
    """The core's elastic-net fit over the chunks: ``enet_fit``'s working-set proximal
    Newton (``enet_drive`` in enet.hpp, the same iteration as in memory) on a sums source
    (:func:`_enet_source`). Per outer iteration: the Hessian of the working set (one pass
    over its columns), the core's coordinate descent on the quadratic model, and an Armijo
    search on the true objective (one pass per trial, which also gives the next
    gradient). It stops on the KKT violation / sum(w) <= tol. H of the returned state is
    the penalized Hessian at beta on the active set (as the numpy path's leave-one-out
    uses)."""
    first = _first_pass(data)
    sw = float(first["weight"])
    beta = _init_beta(data, first) if beta0 is None else np.array(beta0, dtype=np.float64)
    r = _core.enet_sums_fit(
        _enet_source(data),
        data.loss.core,
        data.pen,
        data.l1,
        fit_intercept=data.fit_intercept,
        beta0=np.ascontiguousarray(beta),
        weight_sum=sw,
        tol=tol,
        max_iter=max_iter,
    )
    return _State(
        r.beta,
        float(r.objective),
        r.grad,
        r.hessian,
        sw,
        int(r.n_iter),
        bool(r.converged),
        float(r.grad_norm),
        np.asarray(r.active, dtype=np.intp),
        hessian_passes=int(r.hessian_passes),
    )


def _solve_fit(
    data: Data,
    tol: float,
    max_iter: int,
    beta0: np.ndarray | None = None,
    fresh_end: bool = False,
    previous: _State | None = None,
    secant: bool = False,
    defer_end_guard: bool = False,
) -> _State:
    """The fit of `data`: damped Newton (:func:`newton`; `fresh_end` where the
    leave-one-out formulas need the Hessian at beta, `previous` to go on from an earlier
    penalty's fit, `secant` in tuning runs, `defer_end_guard` where a leverage pass
    follows), or the elastic-net route with an L1 term."""
    if data.l1 is not None:
        if previous is not None:
            beta0 = previous.beta
        return enet_newton(data, tol, max_iter, beta0)
    return newton(
        data,
        tol,
        max_iter,
        beta0,
        fresh_end=fresh_end,
        previous=previous,
        secant=secant,
        defer_end_guard=defer_end_guard,
    )


def _state_fields(data: Data, st: _State) -> dict[str, Any]:
    """The fit fields (``_core.FitResult``'s names) of a state of the dask fit."""
    off = int(data.fit_intercept)
    return {
        "coef": st.beta[off:].copy(),
        "intercept": float(st.beta[0]) if off else 0.0,
        "n_iter": st.n_iter,
        "converged": st.converged,
        "objective": st.f,
        "grad_norm": st.grad_norm,
    }


def _fit_result(data: Data, st: _State):
    from .results import FitFields
    from .results import fit_result as _result

    out = FitFields(**_state_fields(data, st), hessian_passes=st.hessian_passes)
    return _result(out, data.loss, data.penalty, data.fit_intercept)


def fit(
    X, y, loss, penalty, fit_intercept, sample_weight, tol, max_iter, n_jobs, warm_start, offset
):
    """:func:`aloocv.fit` on dask input (see the module docstring)."""
    from ._diagnostics import warn_not_converged as _warn_not_converged

    if isinstance(loss, str) and loss == MULTINOMIAL:
        from . import _dask_multinomial

        return _dask_multinomial.fit(
            X, y, penalty, fit_intercept, sample_weight, tol, max_iter, n_jobs, warm_start, offset
        )
    data = prepare(X, y, loss, penalty, sample_weight, fit_intercept, offset, n_jobs)
    tol, max_iter = check_options(tol, max_iter)
    beta0 = None
    if warm_start is not None:
        beta0 = np.asarray(warm_start.beta_, dtype=np.float64)
        if warm_start.fit_intercept != data.fit_intercept or beta0.shape != (data.p1,):
            raise ValueError("warm_start does not match the shape of this problem")
    st = _solve_fit(data, tol, max_iter, beta0)
    res = _fit_result(data, st)
    _warn_not_converged(res, tol, max_iter)
    return res


# --------------------------------------------------------------------------- loo
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


@_single_blas
def _loo_task(
    x, y, w, off, loss, intercept, beta, H, method, gradient, inv_sw, nt, cols=None, probe=None
):
    x, y, w, off = _chunk_arrays(x, y, w, off, False)
    if cols is not None:  # the active columns (an L1 fit; beta, H are on them)
        x = np.ascontiguousarray(x[:, cols])
    beta, H = _vec(beta), np.array(H, dtype=np.float64, order="F")
    out = _core.chunk_loo(
        x,
        y,
        w,
        loss,
        fit_intercept=intercept,
        beta=beta,
        H=H,
        method=method,
        gradient=gradient,
        inv_sw=inv_sw,
        n_threads=nt,
        offset=off,
    )
    rec = _chunk_record(out)
    if probe is not None:
        rec["step_max"] = _probe_max(x, probe, intercept)
    return rec


def _probe_max(x: np.ndarray, probe, intercept: bool) -> float:
    """A deferred guard's max_i |x~_i^T step| over a chunk's rows, in a task that reads
    them anyway (the leverage pass, the folds' pass)."""
    probe = _vec(probe)
    xs = x @ probe[int(intercept) :] + (probe[0] if intercept else 0.0)
    return float(np.max(np.abs(xs))) if len(xs) else 0.0


def _chunk_record(out: _core.ChunkLooResult) -> dict[str, Any]:
    """A chunk's leave-one-out values (``_core.chunk_loo`` or
    ``_core.multinomial_chunk_loo``) as the task's record: a dict, which the tasks
    exchange (pickled between worker processes)."""
    return {
        k: getattr(out, k)
        for k in ("eta", "losses", "predictions", "leverages", "downdate", "r", "S")
    }


def _loo_sums(out: dict, y, w, margin: bool) -> dict:
    """The chunk's partial sums of the leverage pass: the (weight, mean, M2) stats, the
    hypergradient accumulations, and the diagnostics (the count of samples with d_i h_i
    above ALO_UNRELIABLE_DH; with `margin`, the smallest logistic training margin)."""
    w = None if w is None else np.asarray(w, dtype=np.float64)
    return {
        "stats": _stats(out["losses"], w),
        "r": out["r"],
        "S": out["S"],
        "n_unreliable": int(np.count_nonzero(unreliable_mask(out["downdate"]))),
        "margin": min_margin(out["eta"], np.asarray(y), w) if margin else np.inf,
        "step_max": out.get("step_max"),
    }


@_single_blas
def _adjoint_task(x, y, w, off, loss, intercept, beta, M, nt, cols=None):
    x, y, w, off = _chunk_arrays(x, y, w, off, False)
    if cols is not None:  # the active columns (an L1 fit; beta, M are on them)
        x = np.ascontiguousarray(x[:, cols])
    beta, M = _vec(beta), np.array(M, dtype=np.float64, order="F")
    return {
        "s": _core.chunk_adjoint(
            x, y, w, loss, fit_intercept=intercept, beta=beta, M=M, n_threads=nt, offset=off
        )
    }


_PER_SAMPLE = ("losses", "predictions", "leverages", "downdate")


def _per_sample_only(out: dict) -> dict:
    return {k: out[k] for k in _PER_SAMPLE}


def _alo(
    data: Data,
    beta: np.ndarray,
    H: np.ndarray,
    method: str,
    gradient: bool,
    sw: float,
    keep: str = "lazy",
    cols: Any = None,
    probe: np.ndarray | None = None,
):
    """The closed forms over the chunks in one leverage pass: the per-chunk outputs
    (`keep`: "lazy" delayed objects, "persist" persisted ones, "gather" numpy dicts
    computed in the same pass as the reduction), the reduced stats and (with `gradient`)
    the exact hypergradient per feature, ``(d mean / d l2_j, d mean / d l1_j)`` (each of
    length p; hypergrad.hpp's alo_with_gradient over the chunks). With `cols` (the active
    set of an L1 fit), the formulas are on those columns of X; beta and H are then on them
    too, and the gradient holds the active set and its signs fixed (as the estimate does):
    zero for the inactive features, ``-u_k sign(theta_k)`` for the L1 weights. The last
    output holds the diagnostics reduced in the pass: ``n_unreliable`` (samples with
    ``d_i h_i > ALO_UNRELIABLE_DH``) and ``margin`` (the smallest logistic training margin,
    inf for other losses), and with `probe` (a deferred guard's step) ``step_max``, the
    largest ``|x~_i^T probe|``."""
    import dask
    from dask import delayed

    b = delayed(np.ascontiguousarray(beta), pure=True)
    Hd = delayed(np.asfortranarray(H), pure=True)
    c = None if cols is None else delayed(np.asarray(cols, dtype=np.intp), pure=True)
    pr = None if probe is None else delayed(np.ascontiguousarray(probe), pure=True)
    blocks = data.blocks()
    outs = [
        delayed(_loo_task, pure=True)(
            x,
            y,
            w,
            o,
            data.loss.core,
            data.fit_intercept,
            b,
            Hd,
            method,
            gradient,
            1.0 / sw,
            data.n_threads,
            c,
            pr,
        )
        for x, y, w, o in blocks
    ]
    if keep == "persist":  # held by the workers; the reduction below reads them
        outs = list(dask.persist(*outs))
    logistic = data.loss == "logistic"
    sums = [
        delayed(_loo_sums, pure=True)(o, blk[1], blk[2], logistic) for o, blk in zip(outs, blocks)
    ]
    if keep == "gather":
        red, outs = _compute((_tree(sums), [delayed(_per_sample_only)(o) for o in outs]))
    else:
        red = _compute(_tree(sums))
    grad = None
    if gradient:
        L = _cho(H)
        S = red["S"]
        M = _solve(L, _solve(L, S).T)
        M = 0.5 * (M + M.T)
        r = red["r"]
        if data.loss.name not in ("squared", "huber"):  # l''' = 0: no second pass
            Md = delayed(np.asfortranarray(M), pure=True)
            parts = [
                delayed(_adjoint_task, pure=True)(
                    x, y, w, o, data.loss.core, data.fit_intercept, b, Md, data.n_threads, c
                )
                for x, y, w, o in blocks
            ]
            r = r - _compute(_tree(parts))["s"]
        u = _solve(L, r)
        off = int(data.fit_intercept)
        bq = beta[off:]
        on = slice(None) if cols is None else np.asarray(cols, dtype=np.intp)
        grad_l2, grad_l1 = np.zeros(data.p), np.zeros(data.p)
        grad_l2[on] = -(u[off:] * bq + np.diag(M)[off:])
        grad_l1[on] = -u[off:] * np.sign(bq)
        grad = (grad_l2, grad_l1)
    return outs, red["stats"], grad, {k: red[k] for k in ("n_unreliable", "margin", "step_max")}


def _on_active(data: Data, st: _State) -> tuple[np.ndarray, Any]:
    """(beta, columns) of the leave-one-out formulas: all of them, or with an L1 term the
    intercept and the active features (H of the state is on those)."""
    if st.active is None:
        return st.beta, None
    off = int(data.fit_intercept)
    return st.beta[list(range(off)) + [int(j) + off for j in st.active]], st.active


def _per_sample(outs: list, data: Data, key: str) -> Any:
    import dask.array as da
    from dask import delayed

    arrs = [
        da.from_delayed(delayed(operator.getitem, pure=True)(o, key), shape=(c,), dtype=np.float64)
        for o, c in zip(outs, data.X.chunks[0])
    ]
    return da.concatenate(arrs)


def _client():
    """The distributed client that runs this call's tasks: None when there is none, or
    when another scheduler is active (``dask.config.set(scheduler="synchronous")`` or
    "threads" beside a client): data scattered to its workers would not reach that
    scheduler's tasks."""
    try:
        from distributed import get_client

        client = get_client()
    except (ImportError, ValueError):
        return None
    from dask.base import get_scheduler

    return client if getattr(get_scheduler(), "__self__", None) is client else None


@dataclass(repr=False)
class DaskLOOResult:
    """Leave-one-out results of dask input (:func:`aloocv.loo` with a dask X).

    Attributes
    ----------
    losses, predictions, leverages, downdate : dask arrays of shape (n_samples,)
        As in :class:`aloocv.LOOResult`, chunked like X's rows (None where the method
        has none). On a ``dask.distributed`` client they are persisted in the workers'
        memory; without one they are lazy (computing them reads X once more).
    mean, stderr : float
        Reduced over the chunks in the leverage pass.
    method : str
    fit : FitResult
    sample_weight : dask array or None
    gradient : ndarray or None
        As in :class:`aloocv.LOOResult`.
    unreliable : dask array of bool or None
        As in :class:`aloocv.LOOResult` (samples with ``d_i h_i > ALO_UNRELIABLE_DH``;
        None for ``"exact"``); their count is reduced in the leverage pass and warned
        about as in memory.
    """

    losses: Any
    predictions: Any
    leverages: Any
    method: str
    fit: Any
    mean: float
    stderr: float
    sample_weight: Any = None
    gradient: np.ndarray | None = None
    downdate: Any = None
    n_not_converged: int = field(default=0, repr=False)
    unreliable: Any = None
    # what certify() refits: (Data, _State, tol, max_iter, eta as a dask array; None for
    # the multinomial loss)
    _problem: Any = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        return (
            f"DaskLOOResult(method={self.method!r}, n={self.losses.shape[0]}, "
            f"mean={self.mean:.6g}, stderr={self.stderr:.3g})"
        )

    def certify(
        self,
        n_samples: int = 20,
        random_state: Any = 0,
        confidence: float = 0.95,
        n_worst: int | None = None,
    ):
        """:meth:`aloocv.LOOResult.certify` on dask input: the same design and estimator
        (:class:`aloocv.Certificate`), the exact refits run over the chunks.

        The error proxy, the approximate losses and the weights (n floats each) are
        gathered to the client to draw the samples; X is not. Each of the at most
        ``n_samples`` refits is a fit over the chunks warm-started at the full fit (the
        problem with the sample's weight set to zero; the elastic-net route with an L1
        term), a few passes over X each.
        """
        import dask.array as da

        from ._diagnostics import certificate_design, certificate_from, check_certify_options

        if self.method == "exact":
            raise ValueError("an exact result needs no certificate (method='exact')")
        if self._problem is None:
            raise ValueError(
                "this result does not carry its problem (it was not made by aloocv.loo); "
                "call aloocv.loo(...).certify()"
            )
        confidence = check_certify_options(n_samples, n_worst, confidence)
        data, st, tol, max_iter, eta = self._problem
        refits = _refit_losses
        if isinstance(data.loss, str) and data.loss == MULTINOMIAL:
            from . import _dask_multinomial

            insample = _dask_multinomial.insample_losses(data, st)
            refits = _dask_multinomial.refit_losses
        else:
            insample = da.map_blocks(_loss_values, data.y, eta, data.loss.core, dtype=np.float64)
        losses, proxy, w = _compute((self.losses, self.losses - insample, data.w))
        losses, proxy = np.asarray(losses), np.asarray(proxy)
        w = None if w is None else np.asarray(w, dtype=np.float64)
        design = certificate_design(proxy, w, n_samples, n_worst, random_state)
        idx = design.refits
        exact, n_nc = refits(data, st, idx, tol, max_iter)
        if n_nc:
            warnings.warn(
                f"certificate: {n_nc} of {idx.size} exact refits did not reach tol={tol:g}",
                ConvergenceWarning,
                stacklevel=2,
            )
        return certificate_from(losses, exact, design, w, self.mean, confidence, self.method)


def _loss_values(y, eta, loss):
    """l(y_i, eta_i) of one chunk."""
    return _core.loss_eval(loss, _vec(y), _vec(eta))[0]


def _without_row(w, n_rows, start, row):
    """One chunk of the weights with the global sample `row` set to zero."""
    out = np.ones(n_rows) if w is None else np.array(w, dtype=np.float64)
    if start <= row < start + n_rows:
        out[row - start] = 0.0
    return out


def _weights_without(data: Data, row: int) -> Any:
    """The weights as a dask array with X's row chunks, sample `row`'s set to zero (the
    problem of a refit without it)."""
    import dask.array as da
    from dask import delayed

    wblocks = [b[2] for b in data.blocks()]
    return da.concatenate(
        [
            da.from_delayed(
                delayed(_without_row, pure=True)(wb, int(m), int(t0), int(row)),
                shape=(int(m),),
                dtype=np.float64,
            )
            for wb, m, t0 in zip(wblocks, data.X.chunks[0], _chunk_starts(data))
        ]
    )


def _refit_bytes(dim: int, count: int = 1) -> int:
    """About the client-side state of one running refit (or a lockstep batch of `count`)
    of a problem of `dim` coefficients: a few dim x dim matrices each (_refits; a
    finished one keeps only its coefficients, _RefitOut)."""
    return 3 * 8 * dim * dim * count


@dataclass(frozen=True)
class _RefitOut:
    """What the callers of _refits keep of a refit (not its p1 x p1 matrices)."""

    beta: np.ndarray
    converged: bool


def _lean(st: _State) -> _RefitOut:
    return _RefitOut(st.beta, bool(st.converged))


def _refit_without(data: Data, st: _State, row: int, tol: float, max_iter: int) -> _RefitOut:
    """The fit over the chunks without sample `row` (its weight zero), from the full fit."""
    return _lean(
        _solve_fit(dataclasses.replace(data, w=_weights_without(data, row)), tol, max_iter, st.beta)
    )


def _refit_losses(data: Data, st: _State, rows: np.ndarray, tol: float, max_iter: int):
    """Exact leave-one-out losses of the samples `rows`: per sample, the fit over the
    chunks without it (its weight zero; warm start: the full fit), then its loss at the
    refit's linear predictor. Returns (losses, refits not at tol). The rows of X, y and
    the offset of those samples (|rows| p floats) come to the client."""

    rows = np.asarray(rows, dtype=np.int64)
    parts = [data.X[rows], data.y[rows], None if data.offset is None else data.offset[rows]]
    xr, yr, orr = _compute(parts)
    xr = np.asarray(xr, dtype=np.float64)
    off = int(data.fit_intercept)
    etas = np.empty(rows.size)
    data.blocks()  # made once, before the refit threads share data
    fits = _refits(
        lambda i: _refit_without(data, st, int(i), tol, max_iter),
        list(rows),
        _refit_bytes(data.p1),
    )
    n_nc = sum(int(not sk.converged) for sk in fits)
    for k, sk in enumerate(fits):
        etas[k] = xr[k] @ sk.beta[off:] + (sk.beta[0] if off else 0.0)
    if orr is not None:
        etas += np.asarray(orr, dtype=np.float64)
    exact = _core.loss_eval(data.loss.core, _vec(yr), _vec(etas))[0]
    return exact, n_nc


def _exact_l1(data: Data, st: _State, tol: float, max_iter: int):
    """Exact leave-one-out with an L1 term: per sample, the elastic-net fit over the
    chunks without it (its weight zero; the core's elastic-net iteration warm-started at
    the full fit, as the numpy route's refits). The refits of one chunk's rows are made
    one after the other; their coefficients (one chunk's rows x p1 floats on the client)
    go to the task holding that chunk, which computes the rows' leave-one-out linear
    predictors and losses. A zero-weight sample does not change the fit: its row takes
    the full fit's coefficients, no refit (as in memory). Returns (losses, predictions)
    as dask arrays with X's row chunks, and the number of refits not at tol."""
    import dask.array as da
    from dask import delayed

    ww = None if data.w is None else np.asarray(_compute(data.w), dtype=np.float64)
    losses, preds = [], []
    n_nc = 0
    data.blocks()  # made once, before the refit threads share data
    for c, (s0, cnt) in enumerate(zip(_chunk_starts(data), data.X.chunks[0])):
        B = np.repeat(st.beta[None, :], int(cnt), axis=0)
        rows = [int(s0) + k for k in range(int(cnt)) if ww is None or ww[int(s0) + k] != 0.0]
        fits = _refits(
            lambda i: _refit_without(data, st, i, tol, max_iter), rows, _refit_bytes(data.p1)
        )
        for i, sk in zip(rows, fits):
            n_nc += int(not sk.converged)
            B[i - int(s0)] = sk.beta
        x, y, _, o = data.blocks()[c]
        out = delayed(_own_row_losses, pure=True, nout=2)(
            x, y, o, B, data.loss.core, data.fit_intercept
        )
        losses.append(da.from_delayed(out[0], shape=(int(cnt),), dtype=np.float64))
        preds.append(da.from_delayed(out[1], shape=(int(cnt),), dtype=np.float64))
    return da.concatenate(losses), da.concatenate(preds), n_nc


def _own_row_losses(x, y, off, B, loss, intercept):
    """Row k of a chunk at its own refit's coefficients B[k] (intercept first): the
    losses and the linear predictors."""
    x = np.asarray(x, dtype=np.float64)
    eta = np.einsum("ij,ij->i", x, B[:, int(intercept) :])
    if intercept:
        eta = eta + B[:, 0]
    if off is not None:
        eta = eta + np.asarray(off, dtype=np.float64)
    return _core.loss_eval(loss, _vec(y), _vec(eta))[0], eta


def _rcond(H: np.ndarray) -> float:
    """The core's reciprocal condition estimate of the factored Hessian (factor.hpp):
    min_j L_jj^2 / H_jj."""
    L = _cho(H)
    d = np.diag(H)
    pos = d > 0.0
    return float(min(1.0, np.min(np.diag(L)[pos] ** 2 / d[pos], initial=1.0)))


def _stderr(stats, n: int) -> float:
    """As LOOResult.stderr (weights act as frequency weights; none for n < 2)."""
    sw, _, m2 = stats
    if n < 2:
        return float("nan")
    return float(math.sqrt(m2 / max(sw - 1.0, 1e-300) / sw))


def _given_beta(data: Data, coef, intercept) -> np.ndarray:
    from ._validation import check_real_scalar

    c = check_vector(np.ravel(coef), data.p, "coef")
    b = 0.0
    if intercept is not None:
        b_arr = np.asarray(intercept)
        if b_arr.size != 1:
            raise ValueError(f"intercept must be a scalar, got shape {b_arr.shape}")
        b = check_real_scalar(b_arr.ravel()[0], "intercept")
        if not data.fit_intercept and b != 0.0:
            raise ValueError("intercept given with fit_intercept=False")
    return np.concatenate([[b], c]) if data.fit_intercept else np.array(c)


def _settle_guard(data: Data, st: _State, moved: float | None, tol: float) -> tuple[_State, bool]:
    """A fused end's deferred guard settled once the leverage pass measured its move
    (the in-memory settle_deferred_end): the state without its guard, and whether the
    point moved. Within ``FUSED_END_ETA`` (or no guard pending) the point and its Hessian
    stand. Otherwise the end Hessian's step is taken (``_core.sums_settle_end``: the
    core's line search, the trial point's Hessian in the same pass) where it halves
    max|grad|; the leverages are then to be computed again for its Hessian."""
    if st.guard is None or moved is None or not moved > _core.FUSED_END_ETA:
        return dataclasses.replace(st, guard=None), False
    step, dec = st.guard
    r = _core.sums_settle_end(
        _sums_source(data),
        data.loss.core,
        data.pen,
        fit_intercept=data.fit_intercept,
        beta=np.ascontiguousarray(st.beta),
        unpenalized_hessian=np.asfortranarray(st.hx),
        step=np.ascontiguousarray(step),
        dec=dec,
        weight_sum=st.sw,
        tol=tol,
        loss_at_beta=st.sums[0],
        grad_at_beta=np.ascontiguousarray(st.sums[1]),
    )
    if r.n_iter == 0:  # the step did not halve max|grad| (the rounding floor): undone
        return dataclasses.replace(st, guard=None), False
    settled = dataclasses.replace(
        st,
        beta=r.beta,
        f=float(r.objective),
        grad=r.grad,
        H=r.hessian,
        hx=r.unpenalized_hessian,
        n_iter=st.n_iter + int(r.n_iter),
        hessian_passes=st.hessian_passes + int(r.hessian_passes),
        converged=bool(r.converged),
        grad_norm=float(r.grad_norm),
        hessian_at_point=bool(r.hessian_at_point),
        guard=None,
        sums=(float(r.loss), np.array(r.loss_grad)),
    )
    return settled, True


def _alo_settled(
    data: Data, st: _State, tol: float, gradient: bool, keep: str, method: str = "alo"
) -> tuple[_State, tuple]:
    """:func:`_alo` at the fitted state, whose deferred guard (if any) is measured in the
    same leverage pass and settled (:func:`_settle_guard`); where the point moved, the
    pass is made again for the new Hessian. Returns the state and _alo's outputs."""
    beta, cols = _on_active(data, st)
    probe = None if st.guard is None else st.guard[0]
    out = _alo(data, beta, st.H, method, gradient, st.sw, keep, cols, probe)
    moved = out[3].get("step_max")
    st, moved_on = _settle_guard(data, st, moved, tol)
    if moved_on:
        beta, cols = _on_active(data, st)
        out = _alo(data, beta, st.H, method, gradient, st.sw, keep, cols)
    return st, out


def _fit_for_loo(data: Data, coef, intercept, tol, max_iter, fresh_end: bool = True) -> _State:
    from ._diagnostics import warn_not_converged as _warn_not_converged

    if coef is None:
        if intercept is not None:
            raise ValueError("intercept= requires coef=")
        # a fresh end's guard is measured in the leverage pass (_alo_settled)
        st = _solve_fit(data, tol, max_iter, fresh_end=fresh_end, defer_end_guard=fresh_end)
        _warn_not_converged(_fit_result(data, st), tol, max_iter)
        if not st.hessian_at_point and st.active is None:
            # a plain fit ends on the factor of an earlier point: the exact refits start
            # on the Hessian at beta (in memory: fresh_factor), one pass
            s = _pass(data, st.beta, hessian=True)
            hx = np.array(s["hess"])
            _, _, H = _penalized(data, st.beta, s)
            st = dataclasses.replace(
                st, H=H, hx=hx, hessian_at_point=True, hessian_passes=st.hessian_passes + 1
            )
        return st
    beta = _given_beta(data, coef, intercept)
    active = None
    if data.l1 is not None:  # the active-set state at beta (the core's enet_prepare_at)
        off = int(data.fit_intercept)
        s = _pass(data, beta, hessian=False, check=True)
        _check_first_pass(data, s)
        l1 = np.concatenate([np.zeros(off), data.l1])
        f, g = _enet_objective(data, beta, s, l1)
        sw = float(s["weight"])
        gn = float(_kkt(beta, g, l1).max()) / sw
        active = np.flatnonzero(beta[off:] != 0.0)
        pen1 = np.concatenate([np.zeros(off), data.pen])
        H = _hess_on(data, beta, list(range(off)) + [int(j) + off for j in active], pen1)
    else:
        s = _pass(data, beta, hessian=True, check=True)
        _check_first_pass(data, s)
        f, g, H = _penalized(data, beta, s)
        sw = float(s["weight"])
        gn = float(np.max(np.abs(g))) / sw
    from ._diagnostics import warn_given_coef as _warn_given_coef

    _warn_given_coef(gn, tol, stacklevel=3)
    return _State(beta, f, g, H, sw, 0, gn <= tol, gn, active)


@_single_blas
def _refits_task(x, y, w, off, loss, intercept, B, exclude, hess_cols, nt):
    """One chunk's sums for the exact refits at the columns of B (see chunk_refits)."""
    x, y, w, off = _chunk_arrays(x, y, w, off, False)
    B = np.asfortranarray(B, dtype=np.float64)
    if not B.flags.aligned:
        B = B.copy(order="F")
    out = _core.chunk_refits(
        x,
        y,
        w,
        loss,
        fit_intercept=intercept,
        beta=B,
        exclude=np.array(exclude, dtype=np.int32),
        hess_cols=np.array(hess_cols, dtype=np.int32),
        n_threads=nt,
        offset=off,
    )
    return {"loss": out.loss, "grad": out.grad, "hess": out.hess}  # a record that pickles


def _refits_pass(data: Data, B: np.ndarray, rows: np.ndarray, hess_cols: list) -> dict:
    """One pass over the chunks for the refits at the columns of B, refit k leaving out
    the global row rows[k]: the loss and gradient sums without that row, and for the
    refits hess_cols the Hessians without it (p1 x p1 each). What comes back is
    O(p1 (B + p1 |hess_cols|))."""
    from dask import delayed

    Bd = delayed(np.asfortranarray(B), pure=True)
    hc = np.asarray(hess_cols, dtype=np.int32)
    starts = np.concatenate([[0], np.cumsum(data.X.chunks[0])])
    parts = []
    for c, (x, y, w, o) in enumerate(data.blocks()):
        s0, s1 = int(starts[c]), int(starts[c + 1])
        ex = np.where((rows >= s0) & (rows < s1), rows - s0, -1).astype(np.int32)
        parts.append(
            delayed(_refits_task, pure=True)(
                x, y, w, o, data.loss.core, data.fit_intercept, Bd, ex, hc, data.n_threads
            )
        )
    return _compute(_tree(parts))


def _loo_singular(row: int, dh: float) -> ValueError:
    return ValueError(
        f"the leave-one-out Hessian is singular for sample {row} (d_i h_i = {dh:g} >= 1): "
        "without this sample the problem has no unique minimizer; use a larger penalty"
    )


def _per_weight(g, scale):
    """max|grad| / (sum(w) - w_j), the refits' stopping value, as the core divides: a
    refit with no weight left (scale 0) gets inf or nan, never at tol, without numpy's
    divide-by-zero warnings."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(g, scale)


class _Refits:
    """The exact leave-one-out refits of one batch of samples, run in lockstep: the
    core's exact_loo (loo.hpp) with its newton_drive policy, each pass evaluating every
    refit of the batch that moves. Refit j starts at the full fit with the objective
    and gradient without sample j, takes chord steps on the full factor downdated by
    sample j (Sherman-Morrison: (H - d_j x~_j x~_j^T)^{-1} = H^{-1} + a_j a_j^T d_j / den_j,
    a_j = H^{-1} x~_j, den_j = 1 - d_j h_j) while each cuts max|grad| EXACT_CHORD_RATIO-fold
    (at most EXACT_MAX_CHORD in a row), then Newton steps on fresh leave-one-out Hessians
    (one p1 x p1 per such refit and pass, taken with its trial points); Armijo's search on
    every step, stop at max|grad| / (sum(w) - w_j) <= tol."""

    def __init__(
        self, data: Data, st: _State, L: np.ndarray, rows: np.ndarray, batch, tol, max_iter
    ):
        """batch: (X, y, w, offset) of the rows `rows` (numpy; w, offset may be None)."""
        self.data, self.tol = data, tol
        self.budget = max(1, max_iter)
        self.rows = rows
        off = int(data.fit_intercept)
        self.pen1 = np.concatenate([np.zeros(off), data.pen])
        xb, yb, wb, ob = batch
        m = rows.size
        xt = np.array(xb, dtype=np.float64)  # buffers received may be unaligned: copies
        if off:
            xt = np.hstack([np.ones((m, 1)), xt])
        self.xt = xt  # (m, p1) the batch's rows x~_j
        self.y = _vec(yb)
        self.w = np.ones(m) if wb is None else _vec(wb)
        self.off = np.zeros(m) if ob is None else _vec(ob)
        eta = xt @ st.beta + self.off
        v, d1, d2 = _core.loss_eval(data.loss.core, self.y, np.ascontiguousarray(eta))[:3]
        self.losses, self.preds = v.copy(), eta.copy()  # a zero weight: the full fit's
        with _blas.single_threaded_blas():  # small solves: BLAS threads only cost here
            self.A = _solve(L, xt.T)  # (p1, m) a_j
        self.d = self.w * d2
        dh = self.d * np.einsum("ij,ji->i", xt, self.A)
        self.den = 1.0 - dh
        tiny = 64 * np.finfo(np.float64).eps
        bad = np.flatnonzero((self.w != 0.0) & ~(self.den > tiny))
        if bad.size:
            raise _loo_singular(int(rows[bad[0]]), float(dh[bad[0]]))
        self.L = L
        self.beta = np.repeat(st.beta[:, None], m, axis=1)  # (p1, m)
        self.f = st.f - self.w * v
        self.g = st.grad[:, None] - (self.w * d1)[None, :] * xt.T
        self.scale = st.sw - self.w
        self.chord = np.ones(m, dtype=bool)
        self.n_chord = np.zeros(m, dtype=np.int64)
        self.attempts = np.zeros(m, dtype=np.int64)
        self.on_fresh = np.zeros(m, dtype=bool)  # a fresh Hessian at the refit's point
        self.hfresh: np.ndarray | None = None  # (m, p1, p1) those Hessians, once needed
        self.best = np.full(m, np.inf)
        self.stalled = np.zeros(m, dtype=np.int64)
        self.gcur = np.max(np.abs(self.g), axis=0)
        self.active = (self.w != 0.0) & (_per_weight(self.gcur, self.scale) > tol)

    def _directions(self, cols: np.ndarray) -> np.ndarray:
        """The steps of the refits `cols` (p1 x cols.size): those on a fresh Hessian solve
        with it (one batched LU solve), the others take the chord step on the full factor
        downdated by their sample, -(H^{-1} g + a (d x~^T H^{-1} g) / den)."""
        G = self.g[:, cols]
        steps = np.empty_like(G)
        fr = self.on_fresh[cols]
        if fr.any():
            sol = np.linalg.solve(self.hfresh[cols[fr]], G[:, fr].T[:, :, None])
            steps[:, fr] = -sol[:, :, 0].T
        if not fr.all():
            c = cols[~fr]
            s = -_solve(self.L, G[:, ~fr])
            coef = self.d[c] * np.einsum("ji,ij->j", self.xt[c], s) / self.den[c]
            steps[:, ~fr] = s + coef * self.A[:, c]
        return steps

    def _set_fresh(self, cols: np.ndarray, hess: np.ndarray) -> None:
        """Fresh penalized Hessians (hess: p1 x p1 x cols.size, unpenalized) for the refits
        `cols`; each must be positive definite (one batched Cholesky checks them)."""
        H = np.moveaxis(hess, 2, 0).copy()
        i = np.arange(H.shape[1])
        H[:, i, i] += self.pen1
        _cho(H)
        if self.hfresh is None:
            self.hfresh = np.empty((self.rows.size, *H.shape[1:]))
        self.hfresh[cols] = H
        self.on_fresh[cols] = True

    def _sums(self, cols: np.ndarray, B: np.ndarray, hess: list) -> dict:
        s = _refits_pass(self.data, B, self.rows[cols], hess)
        f = s["loss"] + 0.5 * (self.pen1[:, None] * B * B).sum(axis=0)
        g = s["grad"] + self.pen1[:, None] * B
        return {"f": f, "g": g, "hess": s["hess"]}

    def run(self) -> None:
        with _blas.single_threaded_blas():  # the batch's p1 x batch algebra, many times
            self._run()

    def _run(self) -> None:
        while self.active.any():
            act = np.flatnonzero(self.active)
            # leaving the chord phase: a fresh Hessian at the refit's point
            need = act[~self.chord[act] & ~self.on_fresh[act]]
            if need.size:
                s = self._sums(need, self.beta[:, need], list(range(need.size)))
                self._set_fresh(need, s["hess"])
                self.n_chord[need] = 0
            fresh = self.on_fresh[act]
            steps = self._directions(act)
            dec = -np.einsum("ij,ij->j", self.g[:, act], steps)
            tiny = 0.5 * dec <= TINY_DECREASE * np.maximum(1.0, np.abs(self.f[act]))
            t = np.ones(act.size)
            ok = np.zeros(act.size, dtype=bool)
            beta, f, g = np.empty_like(steps), np.empty(act.size), np.empty_like(steps)
            hess = None  # (p1, p1, act.size) the accepted points' Hessians, where fresh
            srch = np.arange(act.size)  # the refits (positions in act) still searching
            for _ in range(MAX_HALVINGS):
                if not srch.size:
                    break
                cols = act[srch]
                B = self.beta[:, cols] + t[srch] * steps[:, srch]
                hc = np.flatnonzero(fresh[srch])
                s = self._sums(cols, B, hc.tolist())
                ft = s["f"]
                armijo = ft <= self.f[cols] - ARMIJO * t[srch] * dec[srch]
                good = np.isfinite(ft) & (tiny[srch] | armijo)
                k = srch[good]
                ok[k] = True
                beta[:, k], f[k], g[:, k] = B[:, good], ft[good], s["g"][:, good]
                kh = good[hc]  # the accepted among those with a Hessian
                if kh.any():
                    if hess is None:
                        hess = np.empty((*s["hess"].shape[:2], act.size))
                    hess[:, :, srch[hc[kh]]] = s["hess"][:, :, kh]
                t[srch[~good]] *= 0.5
                srch = srch[~good]
            self._update(act, ok, fresh, dec, beta, f, g, hess)

    def _update(
        self,
        act: np.ndarray,
        ok: np.ndarray,
        fresh: np.ndarray,
        dec: np.ndarray,
        beta: np.ndarray,
        f: np.ndarray,
        g: np.ndarray,
        hess: np.ndarray | None,
    ) -> None:
        """The refits `act` after their search: ok, which found a point (beta, f, g
        there, and the Hessian where fresh); dec, their predicted decrease."""
        self.attempts[act] += 1
        rej, rf = act[~ok], fresh[~ok]
        self.active[rej[rf]] = False  # no decrease on a fresh Hessian: stop
        self.chord[rej[~rf]] = False  # the downdated full factor gives no descent: fresh
        self.active[rej[self.attempts[rej] >= self.budget]] = False
        acc = act[ok]
        if not acc.size:
            return
        self.beta[:, acc], self.f[acc], self.g[:, acc] = beta[:, ok], f[ok], g[:, ok]
        self.on_fresh[acc] = False
        fa = ok & fresh
        if fa.any():
            self._set_fresh(act[fa], hess[:, :, fa])
        gnew = np.max(np.abs(self.g[:, acc]), axis=0)
        floor = 0.5 * dec[ok] <= TINY_DECREASE * np.maximum(1.0, np.abs(self.f[acc]))
        best = self.best[acc]
        self.stalled[acc] = np.where(floor & ~(gnew < 0.5 * best), self.stalled[acc] + 1, 0)
        self.best[acc] = np.where(gnew < best, gnew, best)
        done = (
            (self.stalled[acc] >= STALL_ITERS)
            | (_per_weight(gnew, self.scale[acc]) <= self.tol)
            | (self.attempts[acc] >= self.budget)
        )
        self.active[acc[done]] = False
        ch = ~done & self.chord[acc]
        c = acc[ch]
        self.n_chord[c] += 1
        cut = gnew[ch] <= EXACT_CHORD_RATIO * self.gcur[c]
        leave = ~cut | (self.n_chord[c] >= EXACT_MAX_CHORD)
        self.chord[c[leave]] = False
        self.gcur[acc] = gnew

    def results(self) -> tuple[np.ndarray, np.ndarray, int]:
        """(losses, predictions, refits not at tol) of the batch."""
        moved = self.w != 0.0
        eta = np.einsum("ij,ji->i", self.xt, self.beta) + self.off
        v = _core.loss_eval(self.data.loss.core, self.y, np.ascontiguousarray(eta))[0]
        losses = np.where(moved, v, self.losses)
        preds = np.where(moved, eta, self.preds)
        gn = _per_weight(np.max(np.abs(self.g), axis=0), self.scale)
        return losses, preds, int(np.sum(moved & ~(gn <= self.tol)))


def _exact(data: Data, st: _State, tol: float, max_iter: int):
    """Exact LOO as refits over the chunks: batches of EXACT_BATCH consecutive samples
    refitted in lockstep (:class:`_Refits`), each iteration one pass over X returning
    p1 x batch sums (X is never gathered; a task holds one chunk and a row block x batch
    of linear predictors); on a distributed client up to REFIT_THREADS batches at a
    time. The per-sample results are handed to the workers chunk by chunk on a
    distributed client (the client holds one chunk's worth at a time) and come back as
    dask arrays with X's row chunks."""
    import dask.array as da

    L = _cho(st.H)
    ch = [int(c) for c in data.X.chunks[0]]
    client = _client()
    pending_l: list = []
    pending_p: list = []
    held = 0
    out_l: list = []
    out_p: list = []
    n_nc = 0

    def emit(c: int) -> None:
        nonlocal held, pending_l, pending_p
        lv, pv = np.concatenate(pending_l), np.concatenate(pending_p)
        pending_l, pending_p = [lv[c:]], [pv[c:]]
        held -= c
        for buf, v in ((out_l, lv[:c]), (out_p, pv[:c])):
            v = np.array(v)
            buf.append(da.from_array(v, chunks=(c,)) if client is None else _scattered(client, v))

    data.blocks()  # made once, before the refit threads share data
    for f0 in range(0, data.n, EXACT_FETCH * EXACT_BATCH):
        f1 = min(data.n, f0 + EXACT_FETCH * EXACT_BATCH)
        fetched = _compute(
            [
                data.X[f0:f1],
                data.y[f0:f1],
                None if data.w is None else data.w[f0:f1],
                None if data.offset is None else data.offset[f0:f1],
            ]
        )

        def run_batch(r0: int, f0: int = f0, f1: int = f1, fetched: list = fetched):
            rows = np.arange(r0, min(f1, r0 + EXACT_BATCH), dtype=np.int64)
            a, b = r0 - f0, r0 - f0 + rows.size
            ref = _Refits(
                data, st, L, rows, [None if v is None else v[a:b] for v in fetched], tol, max_iter
            )
            ref.run()
            return ref.results()

        # the fetched rows' batches, several at a time on a distributed client (_refits)
        batches = list(range(f0, f1, EXACT_BATCH))
        for lv, pv, nc in _refits(run_batch, batches, _refit_bytes(data.p1, EXACT_BATCH)):
            n_nc += nc
            pending_l.append(lv)
            pending_p.append(pv)
            held += lv.size
            while len(out_l) < len(ch) and held >= ch[len(out_l)]:
                emit(ch[len(out_l)])
    return da.concatenate(out_l), da.concatenate(out_p), n_nc


def _scattered(client, v: np.ndarray):
    """v held by a worker, as a dask array (the client keeps no copy)."""
    import dask.array as da
    from dask import delayed

    fut = client.scatter(v)
    return da.from_delayed(delayed(fut), shape=v.shape, dtype=v.dtype)


def loo(
    X,
    y,
    loss,
    penalty,
    method,
    fit_intercept,
    sample_weight,
    coef,
    intercept,
    tol,
    max_iter,
    n_jobs,
    return_gradient,
    gradient,
    offset,
):
    """:func:`aloocv.loo` on dask input (see the module docstring)."""
    if isinstance(loss, str) and loss == MULTINOMIAL:
        from . import _dask_multinomial

        return _dask_multinomial.loo(
            X,
            y,
            penalty,
            method,
            fit_intercept,
            sample_weight,
            coef,
            intercept,
            tol,
            max_iter,
            n_jobs,
            return_gradient,
            gradient,
            offset,
        )
    data = prepare(X, y, loss, penalty, sample_weight, fit_intercept, offset, n_jobs)
    if gradient != "exact":
        raise ValueError("dask input has the exact hypergradient only (gradient='exact')")
    if data.n < 2:
        raise ValueError(f"leave-one-out needs at least 2 samples, got n_samples={data.n}")
    tol, max_iter = check_options(tol, max_iter)
    if coef is None or (data.loss == "logistic" and data.fit_intercept):
        _first_pass(data, loo=True)  # the class counts (and the fit's first pass)
    # the closed forms need the Hessian at beta (as in memory: fresh_end)
    st = _fit_for_loo(data, coef, intercept, tol, max_iter, fresh_end=method != "exact")
    fitres = _fit_result(data, st)
    if method == "exact":
        exact = _exact if data.l1 is None else _exact_l1
        losses, preds, n_nc = exact(data, st, tol, max_iter)
        if n_nc:
            warnings.warn(
                f"exact LOO: {n_nc} of {data.n} refits did not reach tol={tol:g}",
                ConvergenceWarning,
                stacklevel=2,
            )
        w = data.w
        ww = None if w is None else w
        wl = losses if ww is None else losses * ww
        sw = st.sw
        mean = float(wl.sum().compute()) / sw
        dev = (losses - mean) ** 2 if ww is None else ww * (losses - mean) ** 2
        m2 = float(dev.sum().compute())
        return DaskLOOResult(
            losses,
            preds,
            None,
            method,
            fitres,
            mean,
            _stderr((sw, mean, m2), data.n),
            data.w,
            n_not_converged=n_nc,
        )
    keep = "persist" if _client() is not None else "lazy"
    st, (outs, stats, hgrad, diag) = _alo_settled(data, st, tol, return_gradient, keep, method)
    fitres = _fit_result(data, st)
    arrs = [_per_sample(outs, data, k) for k in _PER_SAMPLE]
    # the in-memory diagnostics, from what the leverage pass reduced
    if data.loss == "logistic":
        check_separation_margin(diag["margin"], data.pen, data.l1, warn=True, stacklevel=3)
    warn_unreliable_count(
        int(diag["n_unreliable"]), data.n, data.loss, data.l1 is not None, stacklevel=3
    )
    warn_ill_conditioned(_rcond(st.H), stacklevel=3)
    grad = None
    if hgrad is not None:
        grad = data.penalty.chain(hgrad[1], hgrad[0])
    _, mean, _ = stats
    return DaskLOOResult(
        arrs[0],
        arrs[1],
        arrs[2],
        method,
        fitres,
        float(mean),
        _stderr(stats, data.n),
        data.w,
        grad,
        arrs[3],
        unreliable=arrs[3].map_blocks(unreliable_mask, dtype=bool),
        _problem=(data, st, tol, max_iter, _per_sample(outs, data, "eta")),
    )


# --------------------------------------------------------------------------- kfold
@_single_blas
def _folds_task(x, y, w, off, fold, loss, intercept, beta, K, nt, cols=None, probe=None):
    x, y, w, off = _chunk_arrays(x, y, w, off, False)
    if cols is not None:  # the active columns (an L1 fit; beta is on them)
        x = np.ascontiguousarray(x[:, cols])
    fold = np.array(fold, dtype=np.int32)
    beta = _vec(beta)
    H, G = _core.chunk_folds(
        x,
        y,
        w,
        loss,
        fit_intercept=intercept,
        beta=beta,
        fold=fold,
        n_folds=K,
        n_threads=nt,
        offset=off,
    )
    return {"H": H, "G": G, "step_max": None if probe is None else _probe_max(x, probe, intercept)}


@_single_blas
def _heldout_task(x, y, w, off, fold, loss, intercept, B):
    """Held-out linear predictors x~_i^T beta~_{fold(i)} (+ offset) and their losses."""
    x, y, w, off = _chunk_arrays(x, y, w, off, False)
    fold = np.asarray(fold, dtype=np.intp)
    B = np.asarray(B)
    rows = np.arange(fold.size)
    if intercept:
        eta = (x @ B[1:])[rows, fold] + B[0, fold]  # (m x K) products, one per fold
    else:
        eta = (x @ B)[rows, fold]
    if off is not None:
        eta = eta + off
    v = _core.loss_eval(loss, y, np.ascontiguousarray(eta))[0]
    return np.stack([v, eta])


def _counts_task(y, w, fold, K, classes):
    """Per fold (fold None: one) of one chunk: the total weight and, with `classes`, the
    samples of positive weight of class 0 and of class 1."""
    w = None if w is None else np.asarray(w, dtype=np.float64)
    y = np.asarray(y)
    f = np.zeros(y.shape[0], dtype=np.intp) if fold is None else np.asarray(fold)
    out = {"ws": np.bincount(f, weights=w, minlength=K).astype(np.float64)}
    if classes:
        pos = np.ones(y.shape[0]) if w is None else (w > 0).astype(np.float64)
        out["zeros"] = np.bincount(f, weights=pos * (y <= 0.5), minlength=K)
        out["ones"] = np.bincount(f, weights=pos * (y > 0.5), minlength=K)
    return out


def _fold_counts(data: Data, fblocks: list, K: int) -> dict:
    """:func:`_counts_task` summed over the chunks (one pass over y and w; X is not read).
    Class counts for the logistic loss with an intercept only."""
    from dask import delayed

    classes = data.loss == "logistic" and data.fit_intercept
    parts = [
        delayed(_counts_task, pure=True)(blk[1], blk[2], fb, K, classes)
        for blk, fb in zip(data.blocks(), fblocks)
    ]
    return _compute(_tree(parts))


def _refit_weights(w, fold, k):
    keep = (np.asarray(fold) != k).astype(np.float64)
    return keep if w is None else np.asarray(w, dtype=np.float64) * keep


def kfold(
    X,
    y,
    loss,
    penalty,
    n_folds,
    method,
    folds,
    random_state,
    fit_intercept,
    sample_weight,
    tol,
    max_iter,
    n_jobs,
    offset,
):
    """:func:`aloocv.kfold` on dask input. The fold labels (n int32, or the given ones) and
    the per-sample held-out losses and predictions (n floats each) live on the client; X
    does not. With an L1 term, as in memory: ``"alo"`` takes each fold's Newton step on
    the full fit's active set (the intercept and the nonzero features, held fixed),
    ``"exact"`` refits each fold with the elastic-net route from the full fit."""
    import time

    import dask.array as da
    from dask import delayed

    from .folds import KFOLD_METHODS, fold_result, relabel_folds
    from .folds import assign_folds as _assign_folds
    from .folds import fold_label as _label

    if not isinstance(method, str) or method not in KFOLD_METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {list(KFOLD_METHODS)}")
    data = prepare(X, y, loss, penalty, sample_weight, fit_intercept, offset, n_jobs)
    tol, max_iter = check_options(tol, max_iter)
    if is_dask_collection(folds):
        folds = np.asarray(folds.compute())
    idx, labels = _assign_folds(data.n, n_folds, folds, random_state)
    K = labels.size
    fold_da = da.from_array(idx, chunks=(data.X.chunks[0],))
    fblocks = fold_da.to_delayed().ravel().tolist()
    blocks = data.blocks()
    # the folds' weights and (logistic) class counts, checked as in memory before the fit
    counts = _fold_counts(data, fblocks, K)
    wsum = counts["ws"]
    if np.any(wsum <= 0):
        bad = int(np.flatnonzero(wsum <= 0)[0])
        raise ValueError(f"fold {_label(labels, bad)} has zero total sample weight")
    if "ones" in counts:
        check_class_counts(int(counts["zeros"].sum()), int(counts["ones"].sum()))
        try:
            check_fold_class_counts(counts["zeros"], counts["ones"])
        except ValueError as e:
            raise ValueError(relabel_folds(str(e), labels)) from None
    # as in memory: the fit ends on the Hessian at beta, or (the fold-wise end) that
    # Hessian is summed from the folds' blocks, which the downdates take anyway
    has_l1 = data.l1 is not None and bool(np.max(data.l1, initial=0.0) > 0.0)
    foldwise = method == "alo" and _core.kfold_foldwise_end(
        data.loss.core, data.p1, has_l1=has_l1, sizes=np.bincount(idx, minlength=K).astype(np.int64)
    )
    t0 = time.perf_counter()
    # the fresh end's guard is measured in the folds' pass (_settle_guard)
    fresh_end = method == "alo" and not foldwise
    st = _solve_fit(data, tol, max_iter, fresh_end=fresh_end, defer_end_guard=fresh_end)
    from ._diagnostics import warn_not_converged as _warn_not_converged

    _warn_not_converged(_fit_result(data, st), tol, max_iter)
    t1 = time.perf_counter()
    off1 = int(data.fit_intercept)
    n_nc = 0
    if method == "alo":

        def folds_pass(st: _State, probe):
            beta, cols = _on_active(data, st)  # all of beta, or the intercept and active set
            b = delayed(np.ascontiguousarray(beta), pure=True)
            c = None if cols is None else delayed(np.asarray(cols, dtype=np.intp), pure=True)
            pr = None if probe is None else delayed(np.ascontiguousarray(probe), pure=True)
            parts = [
                delayed(_folds_task, pure=True)(
                    x, y, w, o, fb, data.loss.core, data.fit_intercept, b, K, data.n_threads, c, pr
                )
                for (x, y, w, o), fb in zip(blocks, fblocks)
            ]
            return cols, _compute(_tree(parts))

        cols, red = folds_pass(st, None if st.guard is None else st.guard[0])
        st, moved = _settle_guard(data, st, red.get("step_max"), tol)
        if moved:  # the point and its Hessian changed: the folds' sums again
            cols, red = folds_pass(st, None)
        on = np.arange(data.p1) if cols is None else np.concatenate([np.arange(off1), cols + off1])
        H = st.H
        if foldwise:  # the Hessian at beta: the folds' blocks (in fold order) + the penalty
            H = red["H"][:, :, 0].copy()
            for k in range(1, K):
                H += red["H"][:, :, k]
            H[np.diag_indices_from(H)] += np.concatenate([np.zeros(off1), data.pen])
        B = np.repeat(st.beta[:, None], K, axis=1)  # inactive features stay at zero
        for k in range(K):
            Hk = H - red["H"][:, :, k]
            try:
                Lk = np.linalg.cholesky(Hk)
            except np.linalg.LinAlgError:
                raise ValueError(
                    f"the Hessian without fold {labels[k]!r} is singular: use a larger penalty"
                ) from None
            B[on, k] += _solve(Lk, red["G"][:, k])
    else:
        B = np.empty((data.p1, K))

        def refit(k: int) -> _RefitOut:
            wk = [
                delayed(_refit_weights, pure=True)(blk[2], fb, k)
                for blk, fb in zip(blocks, fblocks)
            ]
            wk_da = da.concatenate(
                [
                    da.from_delayed(v, shape=(c,), dtype=np.float64)
                    for v, c in zip(wk, data.X.chunks[0])
                ]
            )
            dk = dataclasses.replace(data, w=wk_da)  # the L1 weights too
            return _lean(_solve_fit(dk, tol, max_iter, st.beta))

        for k, sk in enumerate(_refits(refit, list(range(K)), _refit_bytes(data.p1))):
            n_nc += int(not sk.converged)
            B[:, k] = sk.beta
    fitres = _fit_result(data, st)  # after the guard settled
    Bd = delayed(B, pure=True)
    held = [
        delayed(_heldout_task, pure=True)(x, y, w, o, fb, data.loss.core, data.fit_intercept, Bd)
        for (x, y, w, o), fb in zip(blocks, fblocks)
    ]
    out = np.concatenate(_compute(held), axis=1)
    t2 = time.perf_counter()
    if n_nc:
        warnings.warn(
            f"exact K-fold: {n_nc} of {K} refits did not reach tol={tol:g}",
            ConvergenceWarning,
            stacklevel=2,
        )
    del off1
    w_np = None if data.w is None else np.asarray(data.w.compute())
    ww = np.ones(data.n) if w_np is None else w_np
    return fold_result(
        out[0],
        out[1],
        idx,
        labels,
        ww,
        wsum,
        method,
        fitres,
        w_np,
        {"fit": t1 - t0, "folds": t2 - t1},
    )


# --------------------------------------------------------------------------- tune
class DaskTuneState:
    """Stands in for ``_core.TuneState`` in :class:`aloocv.tuning.Objective` on dask input:
    a warm-started Newton fit over the chunks, then ALO and its exact gradient. Per
    evaluated point only O(p1^2) reaches the client (the fit, the ALO mean and standard
    error reduced on the workers, the gradient); the per-sample ALO values stay dask
    arrays aligned with X's row chunks."""

    def __init__(self, data: Data, tol: float, max_iter: int):
        self.data = data
        self.tol, self.max_iter = tol, max_iter
        self.beta: np.ndarray | None = None
        self._st: _State | None = None
        # the last fit, which the next penalty's fit goes on from (as the in-memory
        # TuneState: path_fit on its Hessian); None after set_beta
        self._prev: _State | None = None

    def set_penalty(self, l2: np.ndarray, l1: np.ndarray | None = None) -> None:
        has_l1 = l1 is not None and np.any(np.asarray(l1) > 0)
        self.data.l1 = np.ascontiguousarray(l1, dtype=np.float64) if has_l1 else None
        self.data.pen = np.ascontiguousarray(l2, dtype=np.float64)
        self._st = None

    def set_beta(self, beta: np.ndarray) -> None:
        self.beta = np.array(beta, dtype=np.float64)
        self._st = None
        self._prev = None

    def fit(self) -> None:
        if self._st is None:
            self._st = _solve_fit(  # as the in-memory TuneState: secant-corrected chords
                self.data,
                self.tol,
                self.max_iter,
                self.beta,
                fresh_end=True,
                previous=self._prev,
                secant=True,
                defer_end_guard=True,  # settled in alo()'s leverage pass
            )
            self._prev = self._st
            self.beta = self._st.beta.copy()

    def alo(self, *, gradient: bool = True, gradient_kind: str = "exact") -> StateOutput:
        from .results import StateOutput

        if gradient_kind != "exact":
            raise ValueError("dask input has the exact hypergradient only (gradient='exact')")
        self.fit()
        assert self._st is not None
        keep = "persist" if _client() is not None else "lazy"
        st, (outs, stats, hgrad, _) = _alo_settled(self.data, self._st, self.tol, gradient, keep)
        self._st = self._prev = st
        self.beta = st.beta.copy()
        return StateOutput(
            # per sample: dask arrays with X's row chunks (held by the workers on a
            # distributed client, lazy without one); the mean and its standard error are
            # reduced on the workers
            losses=_per_sample(outs, self.data, "losses"),
            predictions=_per_sample(outs, self.data, "predictions"),
            leverages=_per_sample(outs, self.data, "leverages"),
            acv=float(stats[1]),
            stderr=_stderr(stats, self.data.n),
            **_state_fields(self.data, st),
            grad_l2=None if hgrad is None else hgrad[0],
            grad_l1=None if hgrad is None else hgrad[1],
        )

    def alo_tangents(self, J2: np.ndarray, J1: np.ndarray) -> StateOutput:
        """Second derivatives by central differences of the exact gradient (as the
        multinomial state), along each parameter's direction ``(J2[:, k], J1[:, k])`` of
        the per-feature (l2, l1) weights, with a step of TANGENT_LOG_STEP in the log of the
        parameter: used only to propose Newton steps of the searches."""
        from .backends.common import TANGENT_LOG_STEP

        out = self.alo(gradient=True)
        at, pen = self.beta, self.data.pen.copy()
        l1 = np.zeros(self.data.p) if self.data.l1 is None else self.data.l1.copy()
        T2 = np.empty((self.data.p, J2.shape[1]))
        T1 = np.empty_like(T2)
        for k in range(J2.shape[1]):
            # the parameter's value: the weight of a feature it moves (the penalties are
            # linear in their parameters, with 0/1 Jacobians)
            value = max(float(np.max(J2[:, k] * pen)), float(np.max(J1[:, k] * l1)))
            h = value * TANGENT_LOG_STEP
            g = []
            for s in (1.0, -1.0):
                self.set_penalty(pen + s * h * J2[:, k], l1 + s * h * J1[:, k])
                self.set_beta(at)
                o = self.alo(gradient=True)
                g.append((o.grad_l2, o.grad_l1))
            T2[:, k] = (g[0][0] - g[1][0]) / (2.0 * h)
            T1[:, k] = (g[0][1] - g[1][1]) / (2.0 * h)
        self.set_penalty(pen, l1)
        self.set_beta(at)
        self.fit()
        return dataclasses.replace(out, tangent_l2=T2, tangent_l1=T1)

    def sample_gradient(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("method='sgd' is not available for dask input; use 'gd' or 'auto'")


def tune_state(X, y, loss, penalty, sample_weight, fit_intercept, offset, n_jobs, tol, max_iter):
    """(state, validated loss, l2 vector, weights (the dask vector) or None, n, p) for
    :func:`aloocv.tune` on dask input."""
    data = prepare(X, y, loss, penalty, sample_weight, fit_intercept, offset, n_jobs)
    if data.n < 2:
        raise ValueError(f"leave-one-out needs at least 2 samples, got n_samples={data.n}")
    _first_pass(data)
    return DaskTuneState(data, tol, max_iter), data.loss, data.pen.copy(), data.w, data.n, data.p


def check_solver(solver: Any) -> None:
    """Dask input has the primal route only."""
    if solver not in ("auto", "primal"):
        raise ValueError(
            f"dask input has the primal solver only (solver='auto' or 'primal'), got {solver!r}"
        )
