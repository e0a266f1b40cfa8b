"""ALOLogisticRegressionCV (10 Cs) against LogisticRegressionCV(cv=5), one run side by side.

    python benchmarks/lrcv_compare.py                       # n=100000, p=200, iso and ar1
    python benchmarks/lrcv_compare.py --n 50000 --designs iso,ar1,scales
    python benchmarks/lrcv_compare.py --solvers lbfgs       # skip newton-cholesky
    python benchmarks/lrcv_compare.py --phases              # time per candidate and phase

Issue 13's targets: ALOLogisticRegressionCV(Cs=10) at most 0.3x the fastest
``LogisticRegressionCV(cv=5)`` solver on the isotropic design and 0.1x on the correlated
one (AR(1) columns, rho 0.9), with the same held-out log-loss. The designs are
``compare.py``'s (train rows, 50000 held-out rows). Everything runs with ``n_jobs=1`` and
single-threaded BLAS (the machine may be shared: ratios measured side by side are what
counts).

Printed per design: the wall and CPU time (``time.process_time``: all of it runs on one
thread, so on a loaded machine the CPU time is the steadier measure) and held-out
log-loss of each, their ratios, aloocv's
passes over X per candidate (Hessian passes of each warm-started fit plus ALO's leverage
pass) and the O(n p) passes, and the pass-count lower bound: one Hessian and one leverage
pass per candidate, timed here on this X (``--phases`` also splits aloocv's time into the
fit and the ALO pass of every candidate).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

import aloocv
from aloocv import _core
from aloocv._validation import core_design
from aloocv.tuning import objective as _objective

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import _dense_design, _log_loss

SEEDS = {"iso": 20, "ar1": 21, "scales": 22, "rare": 23}


class _TimedState:
    """A TuneState whose fit() and alo() calls are timed (``--phases``)."""

    def __init__(self, state, log: list):
        self._state, self._log = state, log

    def fit(self):
        t0 = time.perf_counter()
        out = self._state.fit()
        self._log.append(["fit", time.perf_counter() - t0, out])
        return out

    def alo(self, *args, **kwargs):
        t0 = time.perf_counter()
        out = self._state.alo(*args, **kwargs)
        self._log.append(["alo", time.perf_counter() - t0, None])
        return out

    def __getattr__(self, name):
        return getattr(self._state, name)


def _lower_bound(X, y, est, reps: int = 3) -> tuple[float, float]:
    """CPU seconds of one Hessian pass and of one leverage pass on X at the chosen C."""
    beta = np.concatenate([[float(est.intercept_[0])], est.coef_[0]])
    eta = X @ est.coef_[0] + est.intercept_[0]
    pr = 1.0 / (1.0 + np.exp(-eta))
    Xd = core_design(X)
    pen = np.full(X.shape[1], 1.0 / est.C_[0])
    th, tl = [], []
    for _ in range(reps):
        t0 = time.process_time()
        _core.hessian(Xd, pr * (1 - pr), fit_intercept=True, n_threads=1)
        th.append(time.process_time() - t0)
        t0 = time.process_time()
        _core.loo(
            Xd,
            y,
            None,
            "logistic",
            pen,
            fit_intercept=True,
            method="alo",
            tol=1e-8,
            max_iter=100,
            n_threads=1,
            beta=beta,
        )
        tl.append(time.process_time() - t0)
    # loo at given coefficients: one Hessian pass, two O(n p) passes, the leverage pass
    t_mv = min(_time(lambda: X @ est.coef_[0]) for _ in range(reps))
    return min(th), max(min(tl) - min(th) - 2 * t_mv, 0.0)


def _time(f) -> float:
    t0 = time.process_time()
    f()
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--p", type=int, default=200)
    ap.add_argument("--designs", default="iso,ar1")
    ap.add_argument("--solvers", default="lbfgs,newton-cholesky")
    ap.add_argument("--phases", action="store_true")
    a = ap.parse_args()
    from sklearn.linear_model import LogisticRegressionCV

    Cs = np.logspace(-4, 4, 10)
    solvers = [s for s in a.solvers.split(",") if s]
    print(f"n={a.n} p={a.p} Cs=logspace(-4, 4, 10) n_jobs=1, BLAS 1 thread")
    print(f"load average at start {os.getloadavg()[0]:.1f}", flush=True)
    log: list = []
    init = _objective.Objective.__init__
    if a.phases:

        def timed_init(self, state, *args, **kwargs):
            init(self, _TimedState(state, log), *args, **kwargs)

        _objective.Objective.__init__ = timed_init
    with threadpool_limits(1):
        for kind in a.designs.split(","):
            d = _dense_design(kind, a.n, a.p, SEEDS[kind])
            log.clear()
            t0, c0 = time.perf_counter(), time.process_time()
            est = aloocv.ALOLogisticRegressionCV(Cs=Cs, n_jobs=1).fit(d.X, d.y)
            t_ours, c_ours = time.perf_counter() - t0, time.process_time() - c0
            ll = _log_loss(d.yte, est.predict_proba(d.Xte)[:, 1])
            tr = est.tune_result_
            print(
                f"\n{kind} ({d.note or 'isotropic Gaussian'}): ALOLogisticRegressionCV "
                f"{t_ours:.2f} s (CPU {c_ours:.2f} s), log-loss {ll:.5f}, C_ {est.C_[0]:.3g}, "
                "passes per "
                f"candidate {est.passes_per_candidate_:.2f}",
                flush=True,
            )
            print(f"  Hessian passes per C {tr.path_hessian_passes.astype(int).tolist()}")
            print(f"  O(n p) passes per C  {tr.path_matvec_passes.astype(int).tolist()}")
            if a.phases:
                fits = [e for e in log if e[0] == "fit"]
                alos = [e for e in log if e[0] == "alo"]
                tf, ta = sum(e[1] for e in fits), sum(e[1] for e in alos)
                print(
                    f"  fits {tf:.2f} s, ALO passes {ta:.2f} s, rest (Python, scoring, "
                    f"validation) {t_ours - tf - ta:.2f} s"
                )
                print(
                    "  per C: fit/ALO s "
                    + " ".join(f"{f[1]:.2f}/{g[1]:.2f}" for f, g in zip(fits, alos))
                )
            t_h, t_l = _lower_bound(d.X, d.y, est)
            bound = Cs.size * (t_h + t_l)
            print(
                f"  one Hessian pass {t_h:.3f} s, one leverage pass {t_l:.3f} s (CPU): lower "
                f"bound for {Cs.size} candidates {bound:.2f} s ({c_ours / bound:.2f}x of it)"
            )
            for s in solvers:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m = LogisticRegressionCV(
                        Cs=Cs, cv=5, solver=s, scoring="neg_log_loss", n_jobs=1
                    )
                    t0, c0 = time.perf_counter(), time.process_time()
                    m.fit(d.X, d.y)
                    t_s, c_s = time.perf_counter() - t0, time.process_time() - c0
                ll_s = _log_loss(d.yte, m.predict_proba(d.Xte)[:, 1])
                print(
                    f"  LogisticRegressionCV(cv=5, {s}) {t_s:.2f} s (CPU {c_s:.2f} s), log-loss "
                    f"{ll_s:.5f}, C_ {m.C_[0]:.3g}: ratio {t_ours / t_s:.3f}, CPU "
                    f"{c_ours / c_s:.3f} (bound {bound / c_s:.3f})",
                    flush=True,
                )
    _objective.Objective.__init__ = init
    print(f"\nload average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
