"""The benchmarks' timing protocol (benchmarks/_timing.py) and the asv suite's measure of
a call's own memory (benchmarks/benchmarks/_mem.py): not part of the package, loaded from
their files."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

_BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
if not (_BENCH / "_timing.py").exists():
    # a copy of tests/ alone, as the wheel checks run the smoke subset from
    pytest.skip("needs the source checkout (benchmarks/)", allow_module_level=True)


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


timing = _load("bench_timing", _BENCH / "_timing.py")
mem = _load("bench_mem", _BENCH / "benchmarks" / "_mem.py")


def test_interleaved_runs_the_calls_in_rotation_after_one_warm_up_each():
    order: list[str] = []
    calls = {k: (lambda k=k: order.append(k) or k) for k in ("ours", "peer", "third")}
    out = timing.interleaved(calls, 3, clock="cpu")
    assert order == ["ours", "peer", "third"] * 4  # the warm-up round, then 3 timed
    assert {k: len(t.samples) for k, t in out.items()} == {"ours": 3, "peer": 3, "third": 3}
    assert out["peer"].result == "peer" and out["ours"].clock == "cpu"
    order.clear()
    timing.interleaved(calls, 2, clock="wall", warmup=False)
    assert order == ["ours", "peer", "third"] * 2


def test_interleaved_reports_the_minimum_and_the_spread(monkeypatch):
    # a fake clock: each call of f takes the next of these durations
    durations = iter([5.0, 1.0, 3.0, 2.0, 4.0, 6.0])
    ticks = {"t": 0.0}

    def clock() -> float:
        return ticks["t"]

    def f() -> None:
        ticks["t"] += next(durations)

    monkeypatch.setitem(timing.CLOCKS, "cpu", clock)
    out = timing.interleaved({"a": f, "b": f}, 3, clock="cpu", warmup=False)
    assert out["a"].samples == (5.0, 3.0, 4.0) and out["b"].samples == (1.0, 2.0, 6.0)
    assert out["a"].seconds == 3.0 and out["b"].seconds == 1.0
    assert out["a"].spread == pytest.approx(5.0 / 3.0 - 1.0)
    assert out["b"].spread == pytest.approx(5.0)


def test_stopwatch_sums_its_blocks(monkeypatch):
    ticks = iter([10.0, 12.5, 20.0, 21.0])
    monkeypatch.setitem(timing.CLOCKS, "wall", lambda: next(ticks))
    sw = timing.Stopwatch("wall")
    with sw:
        pass
    with sw:
        pass
    assert sw.seconds == pytest.approx(3.5)


def test_clock_for_one_thread_is_cpu_time():
    assert timing.clock_for(1) == "cpu"
    assert timing.clock_for(None) == "wall" and timing.clock_for(4) == "wall"


def test_cpu_clock_does_not_count_sleep():
    import time

    t = timing.best_of(lambda: time.sleep(0.05), 1, clock="cpu", warmup=False)
    w = timing.best_of(lambda: time.sleep(0.05), 1, clock="wall", warmup=False)
    assert t.seconds < 0.02 and w.seconds >= 0.05


@pytest.mark.skipif(not mem.available(), reason="the high-water mark cannot be reset here")
def test_call_peak_measures_the_call_not_the_process():
    big = np.ones(2**24)  # 128 MiB held by the process before the calls, not counted
    mib = 2**20

    def temporary() -> float:  # a 64 MiB temporary, freed before the call returns
        return float(np.ones(2**23).sum())

    def kept() -> np.ndarray:  # 32 MiB left in the result
        return np.ones(2**22)

    assert 60 * mib <= mem.call_peak(temporary) <= 72 * mib
    assert 28 * mib <= mem.call_peak(kept) <= 40 * mib
    assert mem.call_peak(lambda: big.sum()) <= 4 * mib


def test_a_package_from_elsewhere_is_named(tmp_path, capsys):
    # the benchmarks time whatever `import aloocv` finds: a stale install in the
    # environment instead of the checkout is named on stderr (once, at import)
    assert timing.foreign_package(tmp_path / "missing") is None  # no checkout: nothing
    elsewhere = tmp_path / "python"
    (elsewhere / "aloocv").mkdir(parents=True)
    found = timing.foreign_package(elsewhere)
    assert found is not None and Path(found) != (elsewhere / "aloocv").resolve()
    here = Path(importlib.util.find_spec("aloocv").origin).resolve().parent
    assert timing.foreign_package(here.parent) is None  # the package's own tree: nothing
