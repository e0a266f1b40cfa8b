"""Dask input (issue 12): distributed overhead, out of core, dask-ml, worker scaling.

(a) ``overhead``: fit + ALO of a logistic model at n=1e6, p=100, in memory (numpy,
    ``n_jobs`` threads) against the same X as a dask array on a
    ``LocalCluster(n_workers=n_jobs, threads_per_worker=1)`` (X persisted on the workers
    first, as a cluster user would): wall times and their ratio (target <= 1.5x);
    ``--repeat N`` alternates N pairs and prints the ratio of the minima over the pairs
    (``benchmarks/_timing.py``'s protocol; and that of the CPU time, in memory against
    the client's, the scheduler's and the workers', less noisy on a loaded machine),
    ``--breakdown`` the dask passes by kind (y, sums with/without Hessian and X~ step,
    leverages) and time.
(b) ``ooc``: out of core on one machine: X (n x p float64) written to a raw file on
    disk, read chunk by chunk as a dask array (plain reads, or ``--reader memmap``:
    ``np.memmap``, whose resident file pages count in this process's RSS; the file's
    pages are evicted from the page cache before the timed runs), fit + ALO with the threaded
    scheduler; peak RSS of this process, wall time, the number of passes over X, and the
    time of one plain read of X (``X.sum()`` over the same dask array) for the target
    "time <= 3 x (passes x read time)". The issue's size is n=5e7, p=50 (20 GB); pass
    ``--ooc-n`` to choose.
(c) ``daskml``: ``ALOLogisticRegressionCV`` on dask input against
    ``GridSearchCV(dask_ml.linear_model.LogisticRegression(), cv=5)`` on the same C grid
    (dask-ml's L2 objective ``1/2 ||theta||^2 * lam`` with ``lam = 1/C``, solver lbfgs):
    wall time and the held-out log-loss of each chosen model on a test set.
(d) ``scaling``: fit + ALO with 1, 2, 4, 8 workers (needs as many cores; run on a
    16-core machine).
(e) ``refits``: exact leave-one-out on a ``LocalCluster(n_workers=--workers)`` whose
    refits each run their own chain of passes (an elastic-net logistic model at --n,
    --p; a 3-class multinomial one; an L2 logistic one at 32 --n in lockstep batches),
    one at a time (``REFIT_THREADS = 1``) against several at a time (the default),
    alternated --repeat times; wall times, and the largest difference of the losses from
    the in-memory route's.

Run: ``python benchmarks/dask_compare.py overhead|ooc|daskml|scaling|refits [options]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import tempfile
import threading
import time
import warnings

import numpy as np

import aloocv


@contextlib.contextmanager
def _local_client(workers: int):
    """A client of a LocalCluster of `workers` processes with one thread each."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def _peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


class _RssSampler:
    """Peak RSS of this process (sampled every 50 ms) since start()."""

    def __init__(self):
        import psutil

        self.proc = psutil.Process()
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.05)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


def _logistic_data(n, p, seed=0, chunk=100_000):
    import dask.array as da

    rs = da.random.RandomState(seed)
    X = rs.standard_normal((n, p), chunks=(chunk, p))
    beta = np.random.default_rng(seed).standard_normal(p) / np.sqrt(p)
    eta = X @ beta
    u = rs.random_sample((n,), chunks=(chunk,))
    y = (u < 1.0 / (1.0 + da.exp(-2.0 * eta))).astype(np.float64)
    return X, y


class _PassLog:
    """Wall time of every pass of the dask route, by kind (the y pass, sums passes with
    or without the Hessian and X~ step, the leverage pass): wraps the private pass
    functions of the dask backend (``aloocv.backends.dask``) in every module of it that
    uses them, while active."""

    def __init__(self):
        import importlib
        import pkgutil

        import aloocv.backends.dask as pkg

        self._modules = [
            importlib.import_module(f"{pkg.__name__}.{m.name}")
            for m in pkgutil.iter_modules(pkg.__path__)
        ]
        self.calls: list[tuple[str, float]] = []
        self._saved: list = []

    def _wrap(self, name, kind):
        f = next(getattr(m, name) for m in self._modules if hasattr(m, name))

        def timed(*args, **kwargs):
            t = time.perf_counter()
            out = f(*args, **kwargs)
            self.calls.append((kind(*args, **kwargs), time.perf_counter() - t))
            return out

        for m in self._modules:
            if getattr(m, name, None) is f:
                self._saved.append((m, name, f))
                setattr(m, name, timed)

    def __enter__(self):
        def sums_kind(data, beta, hessian, check=False, cols=None, step=None, clip=False):
            parts = ["sums", "+H" if hessian else "", "+step" if step is not None else ""]
            return "".join(parts) + (" (checks X)" if check else "")

        self._wrap("_pass", sums_kind)
        self._wrap("_first_pass", lambda *a, **k: "y (first pass)")
        self._wrap("_alo", lambda *a, **k: "leverages (ALO)")
        return self

    def __exit__(self, *exc):
        for m, name, f in self._saved:
            setattr(m, name, f)

    def report(self) -> str:
        kinds: dict[str, list[float]] = {}
        for k, t in self.calls:
            if k == "y (first pass)" and t < 1e-3:
                continue  # kept from an earlier read (no pass)
            kinds.setdefault(k, []).append(t)
        lines = [
            f"      {k:24s} x{len(v):2d}: {sum(v):6.2f} s ({1e3 * np.median(v):.0f} ms each)"
            for k, v in kinds.items()
        ]
        return "\n".join(lines)


def _cpu_seconds(procs) -> float:
    """User + system CPU time of this process and of `procs` (psutil processes)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime + sum(sum(q.cpu_times()[:2]) for q in procs)


def overhead(n: int, p: int, workers: int, chunk: int, repeat: int, breakdown: bool) -> None:
    import dask
    import psutil
    from distributed import wait

    X, y = _logistic_data(n, p, chunk=chunk)
    Xn, yn = dask.compute(X, y)
    pen = aloocv.L2(1.0)
    print(f"(a) n={n}, p={p}, {workers} cores, chunks of {chunk} rows; load {os.getloadavg()}")
    with _local_client(workers) as client:
        # the same X (seeded), generated and kept on the workers
        Xd, yd = client.persist([X, y])
        wait([Xd, yd])
        # the worker (and nanny) processes: their CPU time with this process's (the
        # client and the scheduler) is the dask route's CPU time
        kids = psutil.Process().children(recursive=True)
        t_mems, t_ds, c_mems, c_ds = [], [], [], []
        for r in range(repeat):  # alternating pairs
            c = _cpu_seconds([])
            t = time.perf_counter()
            ref = aloocv.loo(Xn, yn, penalty=pen, n_jobs=workers)
            t_mem = time.perf_counter() - t
            c_mem = _cpu_seconds([]) - c
            log = _PassLog()
            with log if breakdown else contextlib.nullcontext():
                c = _cpu_seconds(kids)
                t = time.perf_counter()
                got = aloocv.loo(Xd, yd, penalty=pen, n_jobs=1)
                t_d = time.perf_counter() - t
                c_d = _cpu_seconds(kids) - c
            t_mems.append(t_mem)
            t_ds.append(t_d)
            c_mems.append(c_mem)
            c_ds.append(c_d)
            f = ref.fit
            print(
                f"  pair {r + 1} (load {os.getloadavg()[0]:.1f}): in memory fit+ALO {t_mem:.2f} s "
                f"({f.n_iter_} iterations, {f.hessian_passes_} Hessian passes, "
                f"{f.matvec_passes_} O(np) passes); dask LocalCluster({workers} workers x 1 "
                f"thread), X persisted: {t_d:.2f} s ({got.fit.n_iter_} iterations, "
                f"{got.fit.hessian_passes_} Hessian passes); ratio {t_d / t_mem:.2f}x; CPU time "
                f"{c_mem:.2f} s vs {c_d:.2f} s (client, scheduler and workers): {c_d / c_mem:.2f}x"
            )
            if breakdown:
                print(log.report())
            dmean = abs(got.mean - ref.mean)
            dcoef = np.max(np.abs(got.fit.coef_ - ref.fit.coef_))
            del got  # its leverage pass's outputs (held by the workers) are not reused
    print(
        f"    ratio of the minima {min(t_ds) / min(t_mems):.2f}x (CPU time "
        f"{min(c_ds) / min(c_mems):.2f}x) over {repeat} pairs; |mean difference| "
        f"{dmean:.2e}, max |coef difference| {dcoef:.2e}"
    )


def _drop_cache(path: str) -> None:
    """Evicts the file's clean pages from the page cache (no root needed), so that the
    next read comes from disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def ooc(n: int, p: int, chunk: int, path: str | None, reader: str) -> None:
    import dask
    import dask.array as da

    path = path or os.path.join(tempfile.gettempdir(), f"aloocv_ooc_{n}x{p}.f64")
    beta = np.random.default_rng(1).standard_normal(p) / np.sqrt(p)
    if not os.path.exists(path) or os.path.getsize(path) != n * p * 8:
        t = time.perf_counter()
        mm = np.memmap(path, dtype=np.float64, mode="w+", shape=(n, p))
        rng = np.random.default_rng(0)
        for i0 in range(0, n, chunk):
            i1 = min(n, i0 + chunk)
            mm[i0:i1] = rng.standard_normal((i1 - i0, p))
        mm.flush()
        del mm
        print(
            f"(b) wrote X ({n * p * 8 / 2**30:.1f} GiB) to {path} in "
            f"{time.perf_counter() - t:.0f} s"
        )
    if reader == "memmap":
        X = da.from_array(
            np.memmap(path, dtype=np.float64, mode="r", shape=(n, p)), chunks=(chunk, p)
        )
    else:  # plain reads (pread): file pages stay in the page cache, not in this process
        from dask import delayed

        def rows(i0, i1):
            out = np.empty((i1 - i0, p))
            with open(path, "rb") as fh:
                fh.seek(i0 * p * 8)
                fh.readinto(memoryview(out).cast("B"))
            return out

        X = da.concatenate(
            [
                da.from_delayed(
                    delayed(rows, pure=True)(i0, min(n, i0 + chunk)),
                    shape=(min(n, i0 + chunk) - i0, p),
                    dtype=np.float64,
                )
                for i0 in range(0, n, chunk)
            ]
        )
    _drop_cache(path)
    # y from X's own chunks (one pass), kept on disk-free memory: n floats
    rng = np.random.default_rng(2)
    y = (X @ beta).compute()
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-2.0 * y))).astype(np.float64)
    yd = da.from_array(y, chunks=(chunk,))
    with dask.config.set(scheduler="threads", num_workers=os.cpu_count()):
        _drop_cache(path)
        t = time.perf_counter()
        X.sum().compute()
        t_read = time.perf_counter() - t
        _drop_cache(path)
        with _RssSampler() as s:
            t = time.perf_counter()
            res = aloocv.loo(X, yd, penalty=aloocv.L2(1.0))
            t_alo = time.perf_counter() - t
    passes = res.fit.n_iter_ + 2  # the checking pass, one per Newton iteration, ALO
    print(
        f"(b) out of core n={n}, p={p} ({n * p * 8 / 2**30:.1f} GiB on disk), threaded "
        f"scheduler: fit+ALO {t_alo:.1f} s, {passes} passes over X; one read of X "
        f"{t_read:.1f} s -> {t_alo / (passes * t_read):.2f}x the read time per pass; peak "
        f"RSS during the run {s.peak / 2**30:.2f} GiB (process peak {_peak_rss_gib():.2f} "
        f"GiB); ACV {res.mean:.5f}"
    )


def daskml(n: int, p: int, n_c: int, chunk: int) -> None:
    import dask
    import dask.array as da
    from dask_ml.linear_model import LogisticRegression as DLR
    from dask_ml.model_selection import GridSearchCV

    X, y = _logistic_data(n + 20_000, p, seed=3, chunk=chunk)
    X, y = dask.compute(X, y)
    Xte, yte = X[n:], y[n:]
    X, y = X[:n], y[:n]
    Xd, yd = da.from_array(X, chunks=(chunk, p)), da.from_array(y, chunks=(chunk,))
    Cs = np.logspace(-3, 2, n_c)

    def logloss(eta):
        return float(np.mean(np.logaddexp(0.0, eta) - yte * eta))

    with dask.config.set(scheduler="threads"):
        t = time.perf_counter()
        est = aloocv.ALOLogisticRegressionCV(Cs=Cs).fit(Xd, yd)
        t_alo = time.perf_counter() - t
        eta_alo = Xte @ est.coef_[0] + est.intercept_[0]
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gs = GridSearchCV(
                DLR(penalty="l2", solver="lbfgs", max_iter=100),
                {"C": list(Cs)},
                cv=5,
                scoring="neg_log_loss",
            ).fit(Xd, yd)
        t_dml = time.perf_counter() - t
    best = gs.best_estimator_
    eta_dml = Xte @ np.ravel(best.coef_) + float(np.ravel(best.intercept_)[0])
    print(f"(c) n={n}, p={p}, {n_c} values of C, threaded scheduler")
    print(
        f"    ALOLogisticRegressionCV (dask input): {t_alo:.1f} s, C={est.C_[0]:.3g}, "
        f"held-out log-loss {logloss(eta_alo):.5f}"
    )
    print(
        f"    GridSearchCV(dask_ml LogisticRegression, cv=5): {t_dml:.1f} s, "
        f"C={gs.best_params_['C']:.3g}, held-out log-loss {logloss(eta_dml):.5f}"
    )
    print(f"    speed-up {t_dml / t_alo:.1f}x")


def scaling(n: int, p: int, chunk: int, counts: list[int]) -> None:
    from distributed import wait

    X, y = _logistic_data(n, p, chunk=chunk)
    print(f"(d) worker scaling, n={n}, p={p}: fit+ALO wall time")
    for k in counts:
        with _local_client(k) as client:
            Xd, yd = client.persist([X, y])
            wait([Xd, yd])
            t = time.perf_counter()
            aloocv.loo(Xd, yd, penalty=aloocv.L2(1.0), n_jobs=1)
            print(f"    {k} workers: {time.perf_counter() - t:.2f} s")


def refits(n: int, p: int, workers: int, repeat: int) -> None:
    import dask.array as da

    from aloocv.backends.dask import policy

    rng = np.random.default_rng(0)
    cases = []
    for name, m, kw in (
        ("exact LOO, elastic net", n, dict(loss="logistic", penalty=aloocv.ElasticNet(2.0, 1.0))),
        ("exact LOO, multinomial", n, dict(loss="multinomial", penalty=aloocv.L2(1.0))),
        ("exact LOO, L2 (lockstep batches)", 32 * n, dict(loss="logistic", penalty=aloocv.L2(1.0))),
    ):
        X = rng.standard_normal((m, p))
        eta = X @ rng.standard_normal(p)
        if kw["loss"] == "multinomial":
            y = (np.arange(m) % 3).astype(float)
        else:
            y = (eta + rng.standard_normal(m) > 0).astype(float)
        cases.append((name, X, y, dict(kw, tol=1e-8)))
    default = policy.REFIT_THREADS
    print(f"(e) refits on a LocalCluster({workers} workers x 1 thread), p={p}")
    with _local_client(workers) as client:
        for name, X, y, kw in cases:
            ref = aloocv.loo(X, y, method="exact", **kw).losses
            Xd = client.persist(da.from_array(X, chunks=(max(1, X.shape[0] // workers), p)))
            times: dict[int, list[float]] = {1: [], default: []}
            err = 0.0
            for _ in range(repeat):
                for k in (1, default):
                    policy.REFIT_THREADS = k
                    t = time.perf_counter()
                    got = aloocv.loo(Xd, y, method="exact", **kw).losses.compute()
                    times[k].append(time.perf_counter() - t)
                    err = max(err, float(np.max(np.abs(got - ref))))
            policy.REFIT_THREADS = default
            one, many = min(times[1]), min(times[default])  # interleaved, the minima
            print(
                f"    {name}, n={X.shape[0]}: one at a time {one:.2f} s, {default} at a time "
                f"{many:.2f} s ({one / many:.2f}x); max |loss - in memory| {err:.1e}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["overhead", "ooc", "daskml", "scaling", "refits"])
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--p", type=int, default=None)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=None)
    ap.add_argument("--n-cs", type=int, default=10)
    ap.add_argument("--path", default=None, help="(ooc) where to write X")
    ap.add_argument("--counts", default="1,2,4,8")
    ap.add_argument("--repeat", type=int, default=1, help="(overhead, refits) alternating pairs")
    ap.add_argument(
        "--breakdown", action="store_true", help="(overhead) the dask passes by kind and time"
    )
    ap.add_argument(
        "--reader", choices=["pread", "memmap"], default="pread", help="(ooc) how chunks are read"
    )
    a = ap.parse_args()
    if a.what == "overhead":
        overhead(a.n or 1_000_000, a.p or 100, a.workers, a.chunk or 125_000, a.repeat, a.breakdown)
    elif a.what == "ooc":
        ooc(a.n or 50_000_000, a.p or 50, a.chunk or 200_000, a.path, a.reader)
    elif a.what == "daskml":
        daskml(a.n or 200_000, a.p or 20, a.n_cs, a.chunk or 25_000)
    elif a.what == "refits":
        refits(a.n or 40, a.p or 8, a.workers, a.repeat)
    else:
        scaling(
            a.n or 4_000_000, a.p or 100, a.chunk or 100_000, [int(c) for c in a.counts.split(",")]
        )


if __name__ == "__main__":
    main()
