"""Dask at scale (issue 28, item 6): float32 X stays float32 from the dask array to the
core's kernels; the multinomial tuning state sums the ALO mean and its gradient on the
workers (only O((K p1)^2) floats reach the client per point, not n (K + K^2 + 2)); a
search keeps on the workers the per-sample arrays of its best point only; the guide's
out-of-core recipe reads X chunk by chunk (resident memory well below the file's size).
Every result against the in-memory one of the same problem."""

from __future__ import annotations

import gc
import json
import re
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import aloocv
from aloocv import _core
from aloocv.backends.dask import data as dask_data
from conftest import make_data

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

TOL = 1e-12  # fit tolerance of both paths
PARITY = 1e-10


def close(a, b, tol=PARITY):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape
    scale = max(1.0, float(np.max(np.abs(b))) if b.size else 1.0)
    np.testing.assert_allclose(a, b, rtol=0, atol=tol * scale)


def mn_data(n=600, p=5, K=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    B = rng.standard_normal((K, p)) / np.sqrt(p)
    eta = X @ B.T
    P = np.exp(eta - eta.max(1, keepdims=True))
    P /= P.sum(1, keepdims=True)
    y = (P.cumsum(1) > rng.random((n, 1))).argmax(1).astype(np.float64)
    y[:K] = np.arange(K)  # every class present
    return X, y


def _spy_dtypes(monkeypatch, names):
    """Wraps the core's chunk kernels ``names``: the dtypes of the X they receive."""
    seen = []
    for name in names:
        real = getattr(_core, name)

        def spy(x, *args, _real=real, **kwargs):
            seen.append(np.asarray(x).dtype)
            return _real(x, *args, **kwargs)

        monkeypatch.setattr(_core, name, spy)
    return seen


# ------------------------------------------------------------------------------ float32
@pytest.mark.parametrize("loss", ["logistic", "poisson", "squared"])
def test_float32_chunks_reach_the_core_as_float32(sync, monkeypatch, loss):
    # a float32 dask X is not widened (no float64 copy of X): every chunk kernel reads
    # float32; fit, ALO and its gradient equal the in-memory results on the same float32
    # X (the fit to rounding; the per-sample values to the float32 leverage pass's
    # accuracy, also against float64 on the widened values)
    X, y = make_data(loss, 900, 6, seed=3)
    X32 = X.astype(np.float32)
    Xd = da.from_array(X32, chunks=(200, 6))
    seen = _spy_dtypes(monkeypatch, ["chunk_sums", "chunk_loo", "chunk_adjoint"])
    got = aloocv.loo(Xd, y, loss=loss, return_gradient=True, tol=TOL)
    lev = got.leverages.compute()
    assert seen and all(dt == np.float32 for dt in seen)
    assert got.losses.dtype == np.float64
    monkeypatch.undo()
    ref = aloocv.loo(X32, y, loss=loss, return_gradient=True, tol=TOL)
    ref64 = aloocv.loo(X32.astype(np.float64), y, loss=loss, return_gradient=True, tol=TOL)
    for r in (ref, ref64):
        close(got.fit.coef_, r.fit.coef_, 1e-9)
        close(got.mean, r.mean, 1e-8)
        close(got.gradient, r.gradient, 1e-7)
        close(lev, r.leverages, 1e-6)
        close(got.losses.compute(), r.losses, 1e-6)


def test_float32_multinomial_and_tune(sync, monkeypatch):
    X, y = mn_data(n=700, p=5, K=3, seed=4)
    X32 = X.astype(np.float32)
    Xd = da.from_array(X32, chunks=(150, 5))
    names = ["multinomial_chunk_sums", "multinomial_chunk_loo", "multinomial_chunk_adjoint"]
    seen = _spy_dtypes(monkeypatch, names)
    got = aloocv.loo(Xd, y, loss="multinomial", return_gradient=True, tol=TOL)
    grid = [aloocv.L2(v) for v in (10.0, 1.0, 0.1)]
    kw = dict(loss="multinomial", method="grid", grid=grid, fit_tol=TOL)
    tg = aloocv.tune(Xd, y, **kw)
    assert seen and all(dt == np.float32 for dt in seen)
    monkeypatch.undo()
    ref = aloocv.loo(X32.astype(np.float64), y, loss="multinomial", return_gradient=True, tol=TOL)
    close(got.fit.coef_, ref.fit.coef_, 1e-9)
    close(got.mean, ref.mean, 1e-8)
    close(got.gradient, ref.gradient, 1e-6)
    close(got.leverages.compute(), ref.leverages, 1e-4)  # the core's float32 block pass
    rt = aloocv.tune(X32, y, **kw)
    close(tg.history["acv"], rt.history["acv"], 1e-7)
    close(tg.fit.coef_, rt.fit.coef_, 1e-8)


def test_float32_input_dtypes():
    from aloocv._validation_dask import as_dask_design

    x32 = da.zeros((10, 3), dtype=np.float32, chunks=(4, 3))
    assert as_dask_design(x32).dtype == np.float32
    assert as_dask_design(x32) is x32  # the same graph: persisted chunks stay held
    assert as_dask_design(x32.astype(np.float16)).dtype == np.float64
    assert as_dask_design(da.zeros((10, 3), dtype=np.int32, chunks=4)).dtype == np.float64


# ----------------------------------------------------------- multinomial tuning state
def test_multinomial_tune_sums_on_the_workers(sync, monkeypatch, computed_bytes):
    # per evaluated point only the O((K p1)^2) sums reach the client (before: the n K^2
    # leverages, n K predictions, n losses and n downdates of every point); the results
    # equal the in-memory tune and estimator
    n, p, K = 4000, 5, 4
    X, y = mn_data(n, p, K, seed=5)
    Xd = da.from_array(X, chunks=(500, p))
    seen = computed_bytes
    grid = [aloocv.L2(v) for v in (10.0, 1.0, 0.1)]
    kw = dict(loss="multinomial", fit_tol=TOL)
    g = aloocv.tune(Xd, y, penalty=grid[0], method="grid", grid=grid, **kw)
    est = aloocv.ALOLogisticRegressionCV(Cs=[0.1, 1.0, 10.0], tol=TOL).fit(Xd, y)
    monkeypatch.undo()
    dim = K * (p + 1)
    assert seen and max(seen) < 2 * dim * dim * 8 + 4096  # a Hessian's or S's size
    assert max(seen) < n * 8 / 4  # not a per-sample array
    assert isinstance(g.loo.losses, da.Array) and isinstance(g.path_losses, da.Array)
    assert g.loo.predictions.chunks[0] == Xd.chunks[0]
    r = aloocv.tune(X, y, penalty=grid[0], method="grid", grid=grid, **kw)
    close(g.history["acv"], r.history["acv"])
    close(g.history["stderr"], r.history["stderr"])
    close(g.acv, r.acv)
    close(g.stderr, r.stderr)
    close(g.path_losses.compute(), r.path_losses)
    close(g.path_predictions.compute(), r.path_predictions)
    close(g.loo.leverages.compute(), r.loo.leverages)
    er = aloocv.ALOLogisticRegressionCV(Cs=[0.1, 1.0, 10.0], tol=TOL).fit(X, y)
    close(est.coef_, er.coef_, 1e-9)
    close(est.best_score_, er.best_score_)


def test_multinomial_bad_x_names_its_row_of_x(sync):
    # a NaN in X of a multinomial problem: the in-memory message (the row of X, the
    # first of several), not the row within its chunk
    X, y = mn_data(n=600, p=4, K=3, seed=8)
    X[[500, 170], [1, 2]] = np.nan
    with pytest.raises(ValueError) as mem:
        aloocv.fit(X, y, loss="multinomial")
    assert "row 170" in str(mem.value)
    with pytest.raises(ValueError, match=re.escape(str(mem.value))):
        aloocv.fit(da.from_array(X, chunks=(150, 4)), y, loss="multinomial")


# ------------------------------------------------------ worker memory: the best point
def _held_bytes(client) -> int:
    """Bytes of the task results the cluster holds in memory."""

    def count(dask_scheduler=None):
        return sum(int(ts.nbytes) for ts in dask_scheduler.tasks.values() if ts.state == "memory")

    return int(client.run_on_scheduler(count))


@pytest.mark.parametrize("loss", ["logistic", "multinomial"])
def test_cluster_search_holds_only_the_best_points_arrays(client, loss):
    # a grid of 6 points on persisted X: after every point the workers hold X, y and the
    # per-sample arrays of one point (the best so far), not one point's per evaluated
    # point; the result's arrays are the held ones and equal the in-memory search's
    if loss == "multinomial":
        X, y = mn_data(n=3000, p=4, K=3, seed=6)
    else:
        X, y = make_data("logistic", 3000, 4, seed=6)
    Xd, yd = da.from_array(X, chunks=(500, 4)), da.from_array(y, chunks=500)
    Xd, yd = client.persist([Xd, yd])
    distributed.wait([Xd, yd])
    base = _held_bytes(client)
    grid = [aloocv.L2(v) for v in np.logspace(3, -2, 6)]
    held = []

    def settled(*_):
        # the bytes held once the releases of this point reached the scheduler (they
        # are sent asynchronously): the lowest of a few looks
        looks = []
        for _ in range(40):
            looks.append(_held_bytes(client) - base)
            if held and looks[-1] < 1.5 * held[0]:
                break
            time.sleep(0.05)
        held.append(min(looks))

    kw = dict(loss=loss, method="grid", grid=grid, fit_tol=TOL)
    res = aloocv.tune(Xd, yd, callback=settled, **kw)
    per_point = held[0]
    assert per_point > 3000 * 8  # one point's per-sample arrays are held
    assert max(held) < 1.5 * per_point  # not growing with the points evaluated
    assert distributed.futures_of(res.loo.losses)  # the result's arrays: the held ones
    ref = aloocv.tune(X, y, **kw)
    close(res.history["acv"], ref.history["acv"])
    close(res.loo.losses.compute(), ref.loo.losses)
    close(res.loo.predictions.compute(), ref.loo.predictions)
    close(res.path_losses.compute(), ref.path_losses)  # lazy: recomputed per point
    del res  # the search's arrays all released
    gc.collect()
    for _ in range(50):  # the release reaches the scheduler asynchronously
        if _held_bytes(client) - base < per_point / 4:
            break
        time.sleep(0.05)
    assert _held_bytes(client) - base < per_point / 4


def test_cluster_multinomial_passes_map_over_held_chunks(client, monkeypatch):
    # X and y persisted on the workers: the multinomial fit's passes map over the chunks'
    # futures (no graph per pass), as the scalar losses' do; the same iterates and fit as
    # the graph route and as in memory; a bad label of a held chunk: the in-memory error
    X, y = mn_data(n=600, p=4, K=3, seed=7)
    Xd, yd = client.persist([da.from_array(X, chunks=(150, 4)), da.from_array(y, chunks=150)])
    distributed.wait([Xd, yd])
    kw = dict(loss="multinomial", penalty=aloocv.L2(0.5), tol=TOL)
    mapped = []
    real = type(client).map

    def spy(self, func, *args, **kwargs):
        mapped.append(func.__name__)
        return real(self, func, *args, **kwargs)

    monkeypatch.setattr(type(client), "map", spy)
    got = aloocv.fit(Xd, yd, **kw)
    monkeypatch.undo()
    assert len(mapped) >= got.n_iter_ > 0 and set(mapped) == {"_sums_task"}
    ref = aloocv.fit(X, y, **kw)
    close(got.coef_, ref.coef_)
    close(got.intercept_, ref.intercept_)
    assert got.n_iter_ == ref.n_iter_
    monkeypatch.setattr(dask_data.Data, "held", lambda self: None)  # the graph route
    again = aloocv.fit(Xd, yd, **kw)
    monkeypatch.undo()
    close(again.coef_, got.coef_, 1e-14)
    assert again.n_iter_ == got.n_iter_
    Xb = X.copy()
    Xb[[500, 170], [1, 2]] = np.nan  # checked by the first pass: held chunks' tasks
    (Xbd,) = client.persist([da.from_array(Xb, chunks=(150, 4))])
    with pytest.raises(ValueError) as mem:
        aloocv.fit(Xb, y, **kw)
    with pytest.raises(ValueError, match=re.escape(str(mem.value))):
        aloocv.fit(Xbd, yd, **kw)


# --------------------------------------------------------------------- out of core
_OUT_OF_CORE = """
import json, resource, sys
import numpy as np
import dask, dask.array as da
import aloocv

path, n, p, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
y = np.load(path + ".y.npy")


def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # peak; Linux: KiB


aloocv.fit(np.ones((50, p)) + np.eye(50, p), np.ones(50), loss="squared")  # warm up
before = rss()


# the guide's recipe (docs/guide/scaling.rst): each task reads its own rows of the file
def read_rows(start, stop):
    item = np.dtype(np.float64).itemsize
    return np.fromfile(
        path, dtype=np.float64, count=(stop - start) * p, offset=start * p * item
    ).reshape(stop - start, p)


X = da.concatenate([
    da.from_delayed(
        dask.delayed(read_rows)(s, min(s + rows, n)),
        shape=(min(s + rows, n) - s, p), dtype=np.float64,
    )
    for s in range(0, n, rows)
])
with dask.config.set(scheduler="threads", num_workers=2):
    fit = aloocv.fit(X, y, loss="squared", penalty=aloocv.L2(1.0))
print(json.dumps({"growth": rss() - before, "coef": fit.coef_.tolist(),
                  "intercept": float(fit.intercept_)}))
"""


@pytest.mark.slow
def test_out_of_core_recipe_reads_x_chunk_by_chunk(tmp_path):
    # a 205 MB X on disk, fitted through the guide's recipe in a fresh process: its peak
    # resident memory grows by a few chunks (6.4 MB each), not by the file's size (the
    # old recipe, da.from_array over one np.memmap, grew by twice the file's size: 512 MB
    # for a 256 MB file); the fit equals the ridge solution from the sums of X
    n, p, rows = 256_000, 100, 8_000
    path = tmp_path / "X.f64"
    mm = np.memmap(path, dtype=np.float64, mode="w+", shape=(n, p))
    rng = np.random.default_rng(0)
    beta = rng.standard_normal(p) / np.sqrt(p)
    y = np.empty(n)
    XtX, Xty, xs = np.zeros((p, p)), np.zeros(p), np.zeros(p)
    for s in range(0, n, 32_000):  # written and summed block by block
        blk = rng.standard_normal((32_000, p))
        mm[s : s + 32_000] = blk
        y[s : s + 32_000] = blk @ beta + rng.standard_normal(32_000)
        XtX += blk.T @ blk
        Xty += blk.T @ y[s : s + 32_000]
        xs += blk.sum(0)
    mm.flush()
    del mm
    np.save(str(path) + ".y.npy", y)
    script = tmp_path / "recipe.py"
    script.write_text(textwrap.dedent(_OUT_OF_CORE))
    run = subprocess.run(
        [sys.executable, str(script), str(path), str(n), str(p), str(rows)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    size = n * p * 8
    assert out["growth"] < size / 3, (out["growth"], size)
    # the independent reference: ridge with an unpenalized intercept from the sums
    A = np.zeros((p + 1, p + 1))
    A[0, 0], A[0, 1:], A[1:, 0], A[1:, 1:] = n, xs, xs, XtX + np.eye(p)
    b = np.linalg.solve(A, np.concatenate([[y.sum()], Xty]))
    close(out["coef"], b[1:], 1e-8)
    close(out["intercept"], b[0], 1e-8)
