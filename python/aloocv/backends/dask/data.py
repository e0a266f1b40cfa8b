"""The dask backend's inputs: the validated problem (:class:`Data`), its row chunks as
delayed objects or (persisted input on a distributed client) futures, and the numpy
views a chunk task works on."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ... import _blas
from ..._validation import (
    check_nonnegative_weight,
    check_vector,
    check_X,
)


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


@dataclass
class Data:
    """Validated dask problem: X (n x p, one column chunk, float64 or float32), and y, w,
    offset as dask arrays with X's row chunks (w, offset may be None)."""

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

    @classmethod
    def from_problem(cls, problem: Any) -> Data:
        """The dask data of a problem (:class:`aloocv.problem.Problem` of dask input;
        its fields are trusted: validated when it was built)."""
        return cls(
            problem.X,
            problem.y,
            problem.sample_weight,
            problem.offset,
            problem.loss,
            problem.penalty,
            problem.l2,
            problem.fit_intercept,
            problem.options.n_threads,
            problem.l1,
        )

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


def _chunk_arrays(x, y, w, off, check, row0=0):
    """numpy views of one chunk (X float64 or float32, as the dask array holds it: the
    core reads float32 in place); with `check`, validated as the in-memory path would
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
    if x.dtype != np.float64 and x.dtype != np.float32:  # float32 is read in place
        x = x.astype(np.float64)
    if not x.flags.aligned:  # a buffer deserialized at an odd offset
        x = np.array(x)
    return x, _vec(y), None if w is None else _vec(w), None if off is None else _vec(off)


def _vec(a: Any) -> np.ndarray:
    """A contiguous, aligned float64 copy-if-needed of a small array received by a task
    (pickled buffers can arrive unaligned)."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    return a if a.flags.aligned else a.copy()


def _chunk_starts(data: Data) -> list[int]:
    """The row of X where each row chunk starts."""
    return [0, *np.cumsum(data.X.chunks[0][:-1]).astype(int).tolist()]


def _single_blas(task):
    """Runs a chunk task with the BLAS libraries limited to one thread (the core's own
    OpenMP loops and dask's tasks are the parallel layers; a threaded BLAS inside each
    task oversubscribes the cores, seen: 4x slower)."""

    @functools.wraps(task)
    def wrapper(*args, **kwargs):
        with _blas.single_threaded_blas():
            return task(*args, **kwargs)

    return wrapper
