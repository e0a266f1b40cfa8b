"""Per-call overhead (issue 28, item 5): the shortcuts that make small calls cheap give
the same answers as the general code they bypass."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import aloocv
from aloocv import _blas, _core, _memory
from aloocv._memory import UNCHECKED_BYTES, allocations, check_memory, fits
from aloocv._stats import weighted_mean_stderr_columns, weighted_stderr
from aloocv.backends import route
from aloocv.estimators._base import _row_of, _rows_of
from aloocv.penalties import L2, ElasticNet
from aloocv.problem import Problem
from aloocv.tuning.grid import _check_grid
from conftest import make_data


# ----------------------------------------------------------------------------- memory
def _need(pb, solver, verb):
    return sum(a.nbytes for a in allocations(pb, solver, verb))


def test_small_buffers_do_not_read_the_available_memory(monkeypatch):
    reads = []
    monkeypatch.setattr(_memory, "available_memory", lambda: reads.append(1) or 1000)
    X, y = make_data("squared", 50, 10)
    pb = Problem.build(X, y, loss="squared")
    assert _need(pb, "primal", "fit") <= UNCHECKED_BYTES
    assert fits(pb, "primal", "fit")
    check_memory(pb, "primal", "fit")  # 1000 bytes available, yet nothing raised
    aloocv.ALORidgeCV().fit(X, y)
    assert reads == []


def test_large_buffers_read_the_available_memory(monkeypatch):
    reads = []
    monkeypatch.setattr(_memory, "available_memory", lambda: reads.append(1) or 1000)
    X, y = make_data("squared", 20, 1100)
    pb = Problem.build(X, y, loss="squared")
    assert _need(pb, "primal", "fit") > UNCHECKED_BYTES
    assert not fits(pb, "primal", "fit")
    with pytest.raises(MemoryError, match="the available memory"):
        check_memory(pb, "primal", "fit")
    assert len(reads) == 2


def test_memory_limit_checks_small_buffers():
    X, y = make_data("squared", 50, 10)
    pb = Problem.build(X, y, loss="squared", memory_limit=1000)
    assert not fits(pb, "primal", "fit")
    with pytest.raises(MemoryError, match="memory_limit="):
        route.choose(pb, "fit")
    with pytest.raises(MemoryError, match="memory_limit="):
        aloocv.ALORidgeCV(memory_limit=1000).fit(X, y)


def test_available_memory_matches_meminfo_text():
    avail = _memory.available_memory()
    with open(_memory.MEMINFO, encoding="ascii") as f:
        line = next(ln for ln in f if ln.startswith("MemAvailable:"))
    ref = int(line.split()[1]) * 1024
    assert avail is not None and abs(avail - ref) <= 0.05 * ref  # the memory moves a little


# ----------------------------------------------------------------------------- statistics
@pytest.mark.parametrize("n", [2, 7, 130, 1001])
def test_stderr_is_numpys_formula_to_the_bit(n):
    rng = np.random.default_rng(n)
    x = rng.standard_exponential(n) * 1e3
    w = rng.uniform(0.2, 3.0, n)
    assert weighted_stderr(x, None) == float(np.std(x, ddof=1) / np.sqrt(n))
    m = np.average(x, weights=w)
    sw = w.sum()
    ref = float(np.sqrt(np.sum(w * (x - m) ** 2) / max(sw - 1.0, 1e-300) / sw))
    assert weighted_stderr(x, w) == ref
    L = rng.standard_exponential((n, 4))
    mean, se = weighted_mean_stderr_columns(L, None)
    np.testing.assert_array_equal(mean, L.mean(axis=0))
    np.testing.assert_array_equal(se, L.std(axis=0, ddof=1) / np.sqrt(n))
    mean, se = weighted_mean_stderr_columns(L, w)
    np.testing.assert_allclose(mean, [np.average(c, weights=w) for c in L.T], rtol=1e-14)
    for k in range(4):
        assert se[k] == pytest.approx(weighted_stderr(L[:, k], w), rel=1e-14)


def test_stderr_of_huge_losses_falls_back_to_the_scaled_estimator():
    x = np.array([1e300, 3e300, 2e300, 5e300])
    ref = 1e300 * float(np.std(x / 1e300, ddof=1) / 2.0)
    assert weighted_stderr(x, None) == pytest.approx(ref, rel=1e-14)
    with np.errstate(over="ignore"):  # as the ridge path's caller, which falls back
        _, se = weighted_mean_stderr_columns(np.column_stack([x, x]), None)
    assert not np.isfinite(se).any()
    X, y = make_data("squared", 40, 3)
    res = aloocv.tune(X, y * 1e150, loss="squared", penalty=L2(1.0), method="grid", grid=[1.0])
    ref = weighted_stderr(res.path_losses[:, 0], None)  # the scaled estimator
    assert np.isfinite(ref) and res.history["stderr"][0] == pytest.approx(ref, rel=1e-12)


# ----------------------------------------------------------------------------- grids
def test_rows_of_matches_row_of():
    rng = np.random.default_rng(0)
    pts = rng.choice([0.1, 1.0, 10.0, 100.0], size=(12, 2))
    pts[7] = pts[2]  # a repeated row: the first one counts
    grid = [ElasticNet(*row) for row in pts[:5]] + [ElasticNet(3.0, 3.0)]
    ref = [_row_of(pts, g.params()) for g in grid]
    np.testing.assert_array_equal(_rows_of(pts, grid), ref)
    assert ref[-1] == -1 and ref[2] == 2
    np.testing.assert_array_equal(_rows_of(np.empty((0,)), grid), np.full(6, -1))


def test_grid_points_are_checked_and_ordered():
    pen = L2(1.0)
    pts = _check_grid([L2(0.1), L2(10.0), 1.0, np.float64(3.0)], pen, 20)
    np.testing.assert_array_equal(np.concatenate(pts), [10.0, 3.0, 1.0, 0.1])
    with pytest.raises(ValueError, match=r"positive and finite, got -1\.0"):
        _check_grid([1.0, -1.0, [1.0, 2.0]], pen, 20)  # the earlier bad point first
    with pytest.raises(ValueError, match="has 2 parameters"):
        _check_grid([1.0, [1.0, 2.0], -1.0], pen, 20)
    with pytest.raises(ValueError, match=r"positive and finite, got nan"):
        _check_grid([1.0, float("nan")], pen, 20)


@pytest.mark.parametrize("lam", [0.5, np.float64(2.0), 0, -0.0])
def test_scalar_penalty_fast_path_matches_the_array_path(lam):
    fast = L2(lam).lam
    slow = float(np.asarray(lam, dtype=np.float64))
    assert type(fast) is float and fast == slow


@pytest.mark.parametrize("lam", [-1.0, float("nan"), float("inf")])
def test_scalar_penalty_fast_path_refuses_what_the_array_path_refuses(lam):
    with pytest.raises(ValueError, match="L2: lam"):
        L2(lam)


# ----------------------------------------------------------------------------- BLAS
def _blas_threads():
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


@pytest.mark.skipif(not _core.blas_enabled(), reason="no BLAS registered with the core")
@pytest.mark.parametrize("outer", [1, 2])
def test_single_threaded_blas_limits_and_restores(outer):
    with threadpool_limits(limits=outer, user_api="blas"):
        before = _blas_threads()
        with _blas.single_threaded_blas():
            assert set(_blas_threads()) == {1}
        assert _blas_threads() == before
