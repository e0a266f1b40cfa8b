"""How the benchmarks time things: one place for the clock, the repeats and the summary.

Protocol (the project's rule: speed claims from CPU seconds and interleaved repeats):

* **Single-threaded rows** are timed in **CPU seconds** of the process
  (``time.process_time``) under :func:`single_threaded` (OpenMP and BLAS limited to one
  thread by threadpoolctl; aloocv's ``n_jobs=1`` is passed by the caller). CPU time is
  what the computation costs; another process competing for the core makes it wait but
  does not add CPU seconds to it (only cache and memory-bandwidth effects remain).
* **Threaded rows** are timed in **wall seconds** (``time.perf_counter``): CPU seconds
  summed over threads would hide the speed-up. Wall time on a shared machine depends on
  its load, so the callers print :func:`load_line` with every threaded table.
* **Interleaved repeats**: the calls compared in one row run in rotation (ours, peer,
  ours, peer, ...) after one untimed warm-up call each, so a slow phase of the machine
  hits both sides alike instead of one whole block.
* **Minimum over repeats**: noise on a timing only adds to it, so the smallest of the
  repeats is the estimate least disturbed by it. The spread ``max / min - 1`` of the
  repeats is kept to show how noisy a measurement was.
* **Which aloocv**: the benchmarks time the package that ``import aloocv`` finds; a note
  on stderr (:func:`foreign_package`) says so when that is not this checkout's
  ``python/`` (an older install in the environment timed instead of the tree: run them
  with ``PYTHONPATH=python`` from the checkout's root, or install it first).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Clock = Literal["cpu", "wall"]

#: The clock each kind of row reads.
CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}


def clock_for(threads: int | None) -> Clock:
    """``"cpu"`` for a single-threaded measurement (``threads == 1``), else ``"wall"``."""
    return "cpu" if threads == 1 else "wall"


@dataclass(frozen=True)
class Timing:
    """The repeats of one timed call.

    Attributes
    ----------
    seconds : float
        The minimum over the repeats (the estimate).
    samples : tuple of float
        Every repeat, in the order run.
    clock : {"cpu", "wall"}
        Which clock was read.
    result : object
        What the last timed call returned.
    """

    seconds: float
    samples: tuple[float, ...]
    clock: Clock
    result: Any = field(default=None, compare=False, repr=False)

    @property
    def spread(self) -> float:
        """``max / min - 1`` over the repeats (0 for one repeat)."""
        lo = min(self.samples)
        return max(self.samples) / lo - 1.0 if lo > 0 else 0.0


def interleaved(
    calls: Mapping[str, Callable[[], Any]],
    repeat: int,
    *,
    clock: Clock,
    warmup: bool = True,
) -> dict[str, Timing]:
    """Time the ``calls`` in rotation, ``repeat`` rounds, after one untimed call each.

    Parameters
    ----------
    calls : mapping of str to callable
        The calls compared, by name; each round runs them in this order.
    repeat : int
        Timed rounds (at least 1).
    clock : {"cpu", "wall"}
        ``"cpu"``: ``time.process_time`` (single-threaded rows); ``"wall"``:
        ``time.perf_counter`` (threaded rows).
    warmup : bool, default True
        Run each call once, untimed, before the first round (lazy imports, first-touch
        allocations and caches then do not land in a timing).

    Returns
    -------
    dict of str to Timing
        Per name: the minimum over the rounds, every round, the last result.

    Examples
    --------
    >>> t = interleaved({"a": lambda: sum(range(1000)), "b": lambda: 0}, 3, clock="cpu")
    >>> sorted(t), len(t["a"].samples), t["a"].result
    (['a', 'b'], 3, 499500)
    """
    now = CLOCKS[clock]
    out: dict[str, Any] = {}
    if warmup:
        for name, f in calls.items():
            out[name] = f()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(max(1, repeat)):
        for name, f in calls.items():
            t0 = now()
            out[name] = f()
            samples[name].append(now() - t0)
    return {name: Timing(min(ts), tuple(ts), clock, out[name]) for name, ts in samples.items()}


def best_of(f: Callable[[], Any], repeat: int, *, clock: Clock, warmup: bool = True) -> Timing:
    """One call timed alone: :func:`interleaved` with a single entry."""
    return interleaved({"f": f}, repeat, clock=clock, warmup=warmup)["f"]


class Stopwatch:
    """Seconds summed over several timed blocks (``with sw: ...``) on one clock.

    Examples
    --------
    >>> sw = Stopwatch("cpu")
    >>> with sw:
    ...     _ = sum(range(10))
    >>> sw.seconds >= 0.0
    True
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.seconds = 0.0
        self._now = CLOCKS[clock]
        self._t0 = 0.0

    def __enter__(self) -> Stopwatch:
        self._t0 = self._now()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds += self._now() - self._t0


@contextmanager
def single_threaded() -> Iterator[None]:
    """OpenMP and BLAS (numpy, scipy, scikit-learn, aloocv's core) limited to one thread.

    Pass ``n_jobs=1`` to aloocv as well: its own thread count is an argument.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield


def load_line() -> str:
    """The machine's load averages (1, 5, 15 min) and core count, for a threaded table."""
    one, five, fifteen = os.getloadavg()
    return (
        f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min) "
        f"on {os.cpu_count()} cores"
    )


def foreign_package(checkout: Path | None = None) -> str | None:
    """Where ``import aloocv`` would load the package from when that is not the checkout's
    ``python/aloocv`` (None when it is, or with no checkout or package to compare).

    Parameters
    ----------
    checkout : Path, optional
        The checkout's ``python/`` directory (default: the one next to this file).

    Examples
    --------
    >>> foreign_package(Path("/nonexistent")) is None
    True
    """
    checkout = (Path(__file__).resolve().parents[1] / "python") if checkout is None else checkout
    spec = importlib.util.find_spec("aloocv")
    if not checkout.is_dir() or spec is None or spec.origin is None:
        return None
    origin = Path(spec.origin).resolve().parent
    return None if origin == (checkout / "aloocv").resolve() else str(origin)


def _note_foreign_package() -> None:
    where = foreign_package()
    if where is not None:
        print(
            f"note: timing aloocv from {where}, not this checkout's python/ "
            "(PYTHONPATH=python times the checkout)",
            file=sys.stderr,
        )


_note_foreign_package()
