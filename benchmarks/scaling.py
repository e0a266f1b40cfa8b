"""Multicore scaling of the core: a table over thread counts, measured in one run.

    python benchmarks/scaling.py                        # n=1e6, p=200, 1 2 4 8 16 threads
    python benchmarks/scaling.py --n 50000 --threads 1 2
    python benchmarks/scaling.py --markdown scaling.md

For each thread count t (aloocv's ``n_jobs=t``; numpy's BLAS limited to t threads by
threadpoolctl) on a Gaussian logistic design of n rows and p columns (float64):

* ``hessian``: ``X^T diag(d) X`` by the core's row-blocked OpenMP kernel (each thread
  calls single-threaded BLAS on its row block, then a reduction of the p x p blocks);
* ``numpy``: ``(X * d[:, None]).T @ X``, threaded BLAS, alongside;
* ``fit``: ``aloocv.fit`` (logistic, L2, lambda=1, tol 1e-6);
* ``leverages``: ``loo(method="alo")`` including its fit, minus the fit (the leverage
  pass and what ALO adds on top of the fit);
* ``cv``: ``ALOLogisticRegressionCV(Cs=10)``.

Each cell is the median of ``--repeat`` timed calls after one untimed warm-up call. The
parallel efficiency of a column at t threads is ``T(1) / (t * T(t))``; the issue's
targets: the Hessian at n=1e6, p=200 and 16 threads <= 0.15x numpy's time at 16 threads,
and >= 70% efficiency on the fit at 16 threads. Thread counts above the machine's cores
are still run (they are oversubscribed and say nothing about scaling) and flagged.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

import aloocv
from aloocv import _blas, _core

COLUMNS = ("hessian", "numpy", "fit", "leverages", "cv")


def timeit(f: Callable[[], Any], repeat: int) -> float:
    """Median wall time of ``repeat`` calls of ``f`` after one untimed call."""
    f()
    ts = []
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def data(n: int, p: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gaussian design, logistic labels with ||beta|| ~ 2, and Hessian weights d."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = rng.standard_normal(p) / np.sqrt(p) * 2.0
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-X @ beta))).astype(np.float64)
    d = rng.uniform(0.0, 0.25, n)
    return X, y, d


def measure(X: np.ndarray, y: np.ndarray, d: np.ndarray, t: int, repeat: int) -> dict:
    """The five timings at t threads."""
    pen = aloocv.L2(1.0)
    out: dict[str, float] = {}
    with threadpool_limits(limits=t):

        def hess() -> np.ndarray:
            with _blas.single_threaded_blas():
                return _core.hessian(X, d, fit_intercept=False, n_threads=t)

        out["hessian"] = timeit(hess, repeat)
        out["numpy"] = timeit(lambda: (X * d[:, None]).T @ X, repeat)
        out["fit"] = timeit(
            lambda: aloocv.fit(X, y, loss="logistic", penalty=pen, tol=1e-6, n_jobs=t), repeat
        )
        t_loo = timeit(
            lambda: aloocv.loo(X, y, loss="logistic", penalty=pen, tol=1e-6, n_jobs=t), repeat
        )
        out["leverages"] = max(t_loo - out["fit"], 0.0)
        out["loo"] = t_loo
        out["cv"] = timeit(
            lambda: aloocv.ALOLogisticRegressionCV(Cs=10, n_jobs=t).fit(X, y), max(1, repeat // 2)
        )
    return out


def render(rows: dict[int, dict], cores: int, markdown: bool) -> str:
    """The table: seconds per column, efficiency columns, Hessian / numpy."""
    t1 = rows.get(1)
    head = ["threads"]
    for c in COLUMNS:
        head.append(f"{c} [s]")
        if t1 is not None:
            head.append(f"{c} eff")
    head.append("hessian/numpy")
    lines = []
    for t, r in rows.items():
        cells = [f"{t}" + (" (oversubscribed)" if t > cores else "")]
        for c in COLUMNS:
            cells.append(f"{r[c]:.4g}")
            if t1 is not None:
                eff = t1[c] / (t * r[c]) if r[c] > 0 else float("nan")
                cells.append(f"{100 * eff:.0f}%")
        cells.append(f"{r['hessian'] / r['numpy']:.3f}")
        lines.append(cells)
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "|".join("---:" for _ in head) + "|"]
        out += ["| " + " | ".join(c) + " |" for c in lines]
        return "\n".join(out)
    w = [max(len(x) for x in col) for col in zip(head, *lines)]
    out = ["  ".join(h.rjust(wi) for h, wi in zip(head, w))]
    out.append("  ".join("-" * wi for wi in w))
    out += ["  ".join(x.rjust(wi) for x, wi in zip(c, w)) for c in lines]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Parse the options, measure each thread count, print the table."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--n", type=float, default=1e6, help="rows (default 1e6)")
    ap.add_argument("--p", type=int, default=200, help="columns (default 200)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--repeat", type=int, default=3, help="timed repeats per cell")
    ap.add_argument("--markdown", metavar="FILE", help="also write the table as markdown")
    args = ap.parse_args(argv)
    n, p = int(args.n), args.p
    if n < 2 or p < 1 or any(t < 1 for t in args.threads):
        ap.error("--n >= 2, --p >= 1 and thread counts >= 1 are required")
    cores = os.cpu_count() or 1
    load0 = os.getloadavg()
    print(
        f"cores {cores}, OpenMP max threads {_core.max_threads()}, numpy {np.__version__}, "
        f"aloocv {aloocv.__version__}; load average before {load0}"
    )
    print(f"logistic n={n} p={p} float64 ({n * p * 8 / 2**30:.2f} GiB X); threads {args.threads}")
    X, y, d = data(n, p)
    rows: dict[int, dict] = {}
    for t in sorted(set(args.threads)):
        r = measure(X, y, d, t, args.repeat)
        rows[t] = r
        print(
            f"  {t:3d} threads: "
            + ", ".join(f"{c} {r[c]:.4g} s" for c in (*COLUMNS, "loo"))
            + f" | load {os.getloadavg()[0]:.2f}",
            flush=True,
        )
    load1 = os.getloadavg()
    print(f"\n{render(rows, cores, False)}\n")
    print(
        "eff = T(1) / (t T(t)); leverages = loo(alo) incl. fit - fit; "
        f"load average before {load0}, after {load1}"
    )
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(
                f"n={n} p={p}, {cores} cores; load average before {load0}, after {load1}\n\n"
                + render(rows, cores, True)
                + "\n"
            )
        print(f"wrote {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
