"""bbai, an optional peer of the benchmarks, run in a child process of its own.

Importing bbai starts its bridge: a helper process that spins on a core for as long as
the importing process lives (seen in one ``compare.py`` run: 24 CPU minutes in its 36
minutes of wall time). In the benchmark's own process it would slow every timing that
follows, aloocv's and the other peers' alike, and it outlives that process (an orphan that
goes on spinning). Each call here imports and runs bbai in a freshly spawned process,
which stops the bridge and ends when the call returns.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BbaiFit:
    """One bbai ``LogisticRegression`` measurement: the minimum wall time of the timed
    fits (wall: bbai computes in a helper process whose CPU time this process does not
    see), the C it chose, and P(y = 1) on the held-out rows (None without them)."""

    seconds: float
    C: float
    proba: np.ndarray | None


def available() -> bool:
    """Whether bbai is installed (it is not imported here)."""
    return importlib.util.find_spec("bbai") is not None


def _fit_in_child(
    X: np.ndarray,
    y: np.ndarray,
    Xte: np.ndarray | None,
    threads: int | None,
    repeat: int,
    warmup: bool,
) -> BbaiFit:
    from _timing import best_of
    from bbai.glm import LogisticRegression
    from threadpoolctl import threadpool_limits

    try:
        yi = np.asarray(y).astype(int)
        with threadpool_limits(threads) if threads else nullcontext():
            t = best_of(
                lambda: LogisticRegression().fit(X, yi), repeat, clock="wall", warmup=warmup
            )
        m = t.result
        proba = None if Xte is None else np.asarray(m.predict_proba(Xte))[:, 1]
        return BbaiFit(t.seconds, float(np.ravel(m.C_)[0]), proba)
    finally:
        # the bridge outlives its parent unless stopped (an orphan keeps spinning)
        from bbai._computation import _bridge

        _bridge.handle.kill()
        _bridge.handle.wait()


def logistic_fit(
    X: np.ndarray,
    y: np.ndarray,
    Xte: np.ndarray | None = None,
    *,
    threads: int | None = None,
    repeat: int = 1,
    warmup: bool = False,
) -> BbaiFit:
    """bbai's ``LogisticRegression().fit(X, y)`` (C by exact optimization of ALO), timed
    in a spawned child process (BLAS limited to `threads` there when given): `repeat`
    timed fits, after one untimed fit when `warmup`."""
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as ex:
        return ex.submit(_fit_in_child, X, y, Xte, threads, repeat, warmup).result()
