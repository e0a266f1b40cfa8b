"""Exact refits over the chunks: refits that run several at a time in threads on a
distributed client (:func:`_refits`), the refits without one sample (the certificate's,
exact leave-one-out with an L1 term) and the lockstep batches of exact leave-one-out
(:func:`_refit_batch`: the core's exact_loo in lockstep, ``_core.RefitBatch``, fed by
passes over the chunks)."""

from __future__ import annotations

import contextvars
import dataclasses
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import _core
from ..._diagnostics import check_singular_refits
from . import policy
from .data import Data, _chunk_arrays, _chunk_starts, _client, _single_blas, _vec
from .newton import _solve_fit, _State
from .passes import _compute, _refit_thread, _RefitsStopped, _scattered, _tree


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

    threads = min(policy.REFIT_THREADS, len(items))
    if nbytes > 0:
        threads = min(threads, max(1, policy.REFIT_BYTES // nbytes))
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
        while not wake.wait(policy.REFIT_POLL_S):
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


def _without_row(w, row, block_info=None):
    """One chunk of the weights with the global sample `row` set to zero."""
    start = block_info[0]["array-location"][0][0]
    out = np.array(w, dtype=np.float64)
    if start <= row < start + out.shape[0]:
        out[row - start] = 0.0
    return out


def _weights_without(data: Data, row: int) -> Any:
    """The weights as a dask array with X's row chunks (empty ones kept), sample `row`'s
    set to zero (the problem of a refit without it)."""
    import dask.array as da

    w = data.w if data.w is not None else da.ones(data.n, chunks=(data.X.chunks[0],))
    return w.map_blocks(_without_row, int(row), dtype=np.float64)


def _first_without(first: dict, w_row: float, y_row: float, off_row: float) -> dict:
    """The first pass (:func:`_first_pass`) of the problem without one sample (its weight
    `w_row` set to zero) from the full problem's, without a read of y: the sums less the
    sample's terms (the y range is over every sample, as the pass reads it; the class
    counts, which only leave-one-out's own check reads, are left out)."""
    out = {k: v for k, v in first.items() if k not in ("zeros", "ones")}
    out["weight"] = first["weight"] - w_row
    out["ysum"] = first["ysum"] - w_row * y_row
    out["offsum"] = first["offsum"] - w_row * off_row
    return out


def _refit_without(
    data: Data, st: _State, row: int, tol: float, max_iter: int, first: dict | None = None
) -> _RefitOut:
    """The fit over the chunks without sample `row` (its weight zero), from the full fit;
    with `first` (:func:`_first_without`) y is not read again and X not checked again."""
    d = dataclasses.replace(data, w=_weights_without(data, row))
    if first is not None:
        d.first, d.checked = first, data.checked
    return _lean(_solve_fit(d, tol, max_iter, st.beta))


def _refit_losses(data: Data, st: _State, rows: np.ndarray, tol: float, max_iter: int):
    """Exact leave-one-out losses of the samples `rows`: per sample, the fit over the
    chunks without it (its weight zero; warm start: the full fit), then its loss at the
    refit's linear predictor. Returns (losses, refits not at tol). The rows of X, y, the
    weights and the offset of those samples (|rows| p floats) come to the client; y is
    not read again (the refits' first passes are the full problem's less the sample)."""

    rows = np.asarray(rows, dtype=np.int64)
    parts = [
        data.X[rows],
        data.y[rows],
        None if data.w is None else data.w[rows],
        None if data.offset is None else data.offset[rows],
    ]
    xr, yr, wr, orr = _compute(parts)
    xr = np.asarray(xr, dtype=np.float64)
    yr = _vec(yr)
    wr = np.ones(rows.size) if wr is None else _vec(wr)
    o = np.zeros(rows.size) if orr is None else _vec(orr)
    off = int(data.fit_intercept)
    etas = np.empty(rows.size)
    data.blocks()  # made once, before the refit threads share data
    firsts = [
        None if data.first is None else _first_without(data.first, wr[k], yr[k], o[k])
        for k in range(rows.size)
    ]
    fits = _refits(
        lambda k: _refit_without(data, st, int(rows[k]), tol, max_iter, firsts[k]),
        list(range(rows.size)),
        _refit_bytes(data.p1),
    )
    n_nc = sum(int(not sk.converged) for sk in fits)
    for k, sk in enumerate(fits):
        etas[k] = xr[k] @ sk.beta[off:] + (sk.beta[0] if off else 0.0)
    etas += o
    exact = _core.loss_value(data.loss.core, yr, _vec(etas))
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
    return _core.loss_value(loss, _vec(y), _vec(eta)), eta


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


def _refit_batch(
    data: Data,
    st: _State,
    rows: np.ndarray,
    batch: list,
    tol: float,
    max_iter: int,
    chord_ratio: float | None = None,
    max_chord: int | None = None,
) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """The exact leave-one-out refits of the samples `rows` (batch: their X, y, w, offset
    as numpy; w, offset may be None), run in lockstep by the core's
    :class:`aloocv._core.RefitBatch` (exact_loo's policy, refit_batch.hpp): each of its
    requests is one pass over the chunks (:func:`_refits_pass`). chord_ratio, max_chord:
    the core's exact_loo policy unless given (tests). Returns (losses, predictions,
    refits not at tol, the rows of the singular refits); a singular refit's values are
    NaN."""
    xb, yb, wb, ob = batch
    ref = _core.RefitBatch(
        st.H,
        np.array(xb, dtype=np.float64),  # buffers received may be unaligned: a copy
        _vec(yb),
        None if wb is None else _vec(wb),
        None if ob is None else _vec(ob),
        data.loss.core,
        fit_intercept=data.fit_intercept,
        beta=st.beta,
        f=st.f,
        grad=st.grad,
        penalty=data.pen,
        weight_sum=st.sw,
        tol=tol,
        max_iter=max_iter,
        chord_ratio=chord_ratio,
        max_chord=max_chord,
    )
    while (req := ref.request()) is not None:
        cols, B, hess_cols = req
        s = _refits_pass(data, B, rows[cols], hess_cols.tolist())
        ref.feed(_vec(s["loss"]), s["grad"], s["hess"])  # received buffers: may be unaligned
    losses, preds, n_nc, singular = ref.results()
    return losses, preds, n_nc, rows[singular]


@dataclass(frozen=True)
class SingularRefits:
    """The samples whose exact refits stopped on a singular leave-one-out Hessian, in the
    fields of the core's ``LooResult`` that
    :func:`aloocv._diagnostics.check_singular_refits` reads."""

    singular_samples: np.ndarray

    @property
    def n_singular(self) -> int:
        return int(self.singular_samples.size)


def _exact(data: Data, st: _State, tol: float, max_iter: int):
    """Exact LOO as refits over the chunks: batches of EXACT_BATCH consecutive samples
    refitted in lockstep (:func:`_refit_batch`), each iteration one pass over X returning
    p1 x batch sums (X is never gathered; a task holds one chunk and a row block x batch
    of linear predictors); on a distributed client up to REFIT_THREADS batches at a
    time. The per-sample results are handed to the workers chunk by chunk on a
    distributed client (the client holds one chunk's worth at a time) and come back as
    dask arrays with X's row chunks."""
    import dask.array as da

    ch = [int(c) for c in data.X.chunks[0]]
    client = _client()
    pending_l: list = []
    pending_p: list = []
    held = 0
    out_l: list = []
    out_p: list = []
    singular: list = []  # rows whose refits are singular, per batch
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
    for f0 in range(0, data.n, policy.EXACT_FETCH * policy.EXACT_BATCH):
        f1 = min(data.n, f0 + policy.EXACT_FETCH * policy.EXACT_BATCH)
        fetched = _compute(
            [
                data.X[f0:f1],
                data.y[f0:f1],
                None if data.w is None else data.w[f0:f1],
                None if data.offset is None else data.offset[f0:f1],
            ]
        )

        def run_batch(r0: int, f0: int = f0, f1: int = f1, fetched: list = fetched):
            rows = np.arange(r0, min(f1, r0 + policy.EXACT_BATCH), dtype=np.int64)
            a, b = r0 - f0, r0 - f0 + rows.size
            return _refit_batch(
                data, st, rows, [None if v is None else v[a:b] for v in fetched], tol, max_iter
            )

        # the fetched rows' batches, several at a time on a distributed client (_refits)
        batches = list(range(f0, f1, policy.EXACT_BATCH))
        for lv, pv, nc, sing in _refits(
            run_batch, batches, _refit_bytes(data.p1, policy.EXACT_BATCH)
        ):
            n_nc += nc
            singular.append(sing)
            pending_l.append(lv)
            pending_p.append(pv)
            held += lv.size
            while len(out_l) < len(ch) and held >= ch[len(out_l)]:
                emit(ch[len(out_l)])
    # as in memory: a singular refit has no leave-one-out value to report
    check_singular_refits("loo(method='exact')", SingularRefits(np.concatenate(singular)))
    return da.concatenate(out_l), da.concatenate(out_p), n_nc
