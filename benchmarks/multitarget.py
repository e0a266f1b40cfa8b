"""Many targets at once (the himalaya use case): ALORidgeCV against scikit-learn's RidgeCV.

    python benchmarks/multitarget.py [--n 2000 --p 500 --targets 10000 --alphas 20]

Times ``ALORidgeCV(alphas, alpha_per_target=True)`` and
``RidgeCV(alphas, alpha_per_target=True)`` (efficient LOO, ``gcv_mode`` auto: the
eigendecomposition of X^T X for n > p) on the same data in one run, both on
``--threads`` threads (``n_jobs`` for ours, ``threadpoolctl.threadpool_limits`` for the
BLAS under RidgeCV; default 1), and prints the ratio, the largest differences of
``alpha_``, ``coef_`` and ``best_score_``, and the number of spectral filters our grid
needed (the numerical ranks of ``s / (s + alpha)`` over the grid, band by band of the
spectrum, and their cost in full GEMMs; without compression one GEMM per alpha).

Data: X standard normal (n x p), Y = X B + noise with per-target signal strengths, so
that the chosen alphas differ between targets. ``--spectrum wide`` scales the columns of
X over three decades (a grid of full numerical rank: every alpha costs its own GEMM).

Timing (``benchmarks/_timing.py``): both in rotation, the minimum of ``--repeat`` (one
call each by default: a call takes seconds to minutes); CPU seconds on one thread (the
default), wall seconds with the load average on more.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from _timing import clock_for, interleaved, load_line
from sklearn.linear_model import RidgeCV
from threadpoolctl import threadpool_limits

import aloocv
from aloocv import _blas, _core


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--p", type=int, default=500)
    ap.add_argument("--targets", type=int, default=10000)
    ap.add_argument("--alphas", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--spectrum", choices=["gaussian", "wide"], default="gaussian")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1, help="timed calls of each (default 1)")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    X = rng.standard_normal((a.n, a.p))
    if a.spectrum == "wide":
        X *= np.logspace(-1.5, 1.5, a.p)
    strength = np.logspace(-2, 0, a.targets)  # signal-to-noise differs between targets
    Y = (X @ rng.standard_normal((a.p, a.targets))) * strength / np.sqrt(a.p)
    Y += rng.standard_normal((a.n, a.targets))
    alphas = np.logspace(-1, 5, a.alphas)
    print(
        f"n={a.n} p={a.p} targets={a.targets} alphas={a.alphas} threads={a.threads} "
        f"spectrum={a.spectrum} load={os.getloadavg()[0]:.2f} cores={os.cpu_count()}",
        flush=True,
    )
    with _blas.single_threaded_blas():
        sc = _core.MultiRidge(
            X, Y[:, :1], None, fit_intercept=True, penalty=None, n_threads=1
        ).scores(alphas, 1)
    clock = clock_for(a.threads)
    with threadpool_limits(a.threads):
        T = interleaved(
            {
                "ours": lambda: aloocv.ALORidgeCV(
                    alphas=alphas, alpha_per_target=True, n_jobs=a.threads
                ).fit(X, Y),
                "ref": lambda: RidgeCV(alphas=alphas, alpha_per_target=True).fit(X, Y),
            },
            a.repeat,
            clock=clock,
            warmup=a.repeat > 1,
        )
    ours, ref = T["ours"].result, T["ref"].result
    t_ours, t_ref = T["ours"].seconds, T["ref"].seconds
    print(
        f"ALORidgeCV  {t_ours:8.2f} s   (spectral filters: {sc.rank} band GEMMs costing "
        f"{sc.passes:.1f} full ones, for {a.alphas} alphas; {clock} seconds)",
        flush=True,
    )
    print(f"RidgeCV     {t_ref:8.2f} s", flush=True)
    print(f"ratio ALORidgeCV / RidgeCV = {t_ours / t_ref:.3f}")
    same = np.mean(ours.alpha_ == ref.alpha_)
    dc = np.max(np.abs(ours.coef_ - ref.coef_))
    ds = np.max(np.abs(ours.best_score_ - ref.best_score_) / np.abs(ref.best_score_))
    print(f"alpha_ equal on {same:.4%} of targets; max |coef diff| {dc:.2e}; ", end="")
    print(f"max rel best_score_ diff {ds:.2e}; after: {load_line()}")


if __name__ == "__main__":
    main()
