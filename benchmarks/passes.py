"""Passes over X of the logistic fit and of ``loo(method="alo")`` including its fit.

Prints, side by side in one run: the time, Newton iterations and Hessian passes of the
plain fit (``_core.fit``) and of the ALO run (``_core.loo``: its fit ends on the Hessian at
the returned beta, then one leverage pass), and the ratio loo / fit (issue 28 target:
<= 1.4 at n=100000, p=200; its floor, the fit plus one Hessian pass and one leverage
pass, is printed with ``--breakdown``).

Usage: ``python benchmarks/passes.py [--n N] [--p P] [--tol TOL] [--n-jobs J] [--breakdown]``.
Timing (``benchmarks/_timing.py``): fit and ALO in rotation, the minimum of 3 after a
warm-up; CPU seconds with ``--n-jobs 1`` (the default; BLAS limited to one thread),
wall seconds otherwise.

With ``--breakdown``: the unit costs behind the ratio (minimum CPU seconds of 3 runs, one
thread): a Hessian pass, the O(n p) products X v and X^T g, and ALO at the returned
coefficients (a Hessian, two O(n p) passes and the leverage pass), hence the leverage pass.
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext

import numpy as np
from _timing import Stopwatch, best_of, clock_for, interleaved, load_line, single_threaded

from aloocv import _core


def logistic_data(n: int, p: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = rng.standard_normal(p) / np.sqrt(p) * 2.0
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-X @ beta))).astype(np.float64)
    return X, y


def _cpu(f, k: int = 3) -> float:
    return best_of(f, k, clock="cpu", warmup=False).seconds


def breakdown(
    X: np.ndarray, y: np.ndarray, args: tuple, r: _core.LooResult, a: argparse.Namespace
) -> None:
    """Unit costs of the passes (see the module docstring), single-threaded."""
    from threadpoolctl import threadpool_limits

    beta = np.r_[r.intercept, r.coef]
    with threadpool_limits(1):
        mu = 1.0 / (1.0 + np.exp(-(X @ r.coef + r.intercept)))
        d, g = mu * (1.0 - mu), mu - y
        th = _cpu(lambda: _core.hessian(X, d, fit_intercept=True, n_threads=1))
        tv = _cpu(lambda: X @ beta[1:])
        tg = _cpu(lambda: X.T @ g)
        ta = _cpu(
            lambda: _core.loo(
                *args,
                fit_intercept=True,
                method="alo",
                tol=a.tol,
                max_iter=100,
                n_threads=1,
                beta=beta,
            )
        )
        tf = _cpu(
            lambda: _core.fit(*args, fit_intercept=True, tol=a.tol, max_iter=100, n_threads=1)
        )
    print(f"CPU s, one thread: Hessian pass {th:.4f}  X v {tv:.4f}  X^T g {tg:.4f}")
    lev = ta - th - tv - tg
    print(f"  ALO at the returned coefficients {ta:.4f}: leverage pass about {lev:.4f}")
    # one O(n p) step of the fit (X~ step, the loss and its derivatives, X~^T g in one
    # fused pass), derived: the fit's CPU time less its Hessian passes, per O(n p) pass
    f = _core.fit(*args, fit_intercept=True, tol=a.tol, max_iter=100, n_threads=1)
    step = (tf - f.hessian_passes * th) / max(1, f.matvec_passes)
    if step > 0.0:
        print(f"  fit {tf:.4f}: one O(n p) step about {step:.4f} (numpy X v + X^T g {tv + tg:.4f})")
    else:  # sampled and float32 Hessians cost less than the float64 pass timed above
        print(f"  fit {tf:.4f}: its {f.hessian_passes} Hessian passes are sampled or float32")
    # ALO needs the Hessian at the returned beta and the leverage pass on top of any fit
    floor = (tf + th + lev) / tf
    print(f"  floor of loo / fit: (fit + Hessian pass + leverage pass) / fit = {floor:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--p", type=int, default=200)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--lam", type=float, default=1.0)
    ap.add_argument("--n-jobs", type=int, default=1)
    ap.add_argument("--breakdown", action="store_true", help="unit costs (see above)")
    a = ap.parse_args()
    with single_threaded() if clock_for(a.n_jobs) == "cpu" else nullcontext():
        run(a)


def run(a: argparse.Namespace) -> None:
    """Measure and print (see the module docstring)."""
    X, y = logistic_data(a.n, a.p)
    pen = np.full(a.p, a.lam)
    args = (X, y, None, "logistic", pen)

    def fit() -> _core.FitResult:
        return _core.fit(*args, fit_intercept=True, tol=a.tol, max_iter=100, n_threads=a.n_jobs)

    def loo() -> _core.LooResult:
        return _core.loo(
            *args, fit_intercept=True, method="alo", tol=a.tol, max_iter=100, n_threads=a.n_jobs
        )

    clock = clock_for(a.n_jobs)
    T = interleaved({"fit": fit, "loo": loo}, 3, clock=clock)
    f, r = T["fit"].result, T["loo"].result
    tf, tl = T["fit"].seconds, T["loo"].seconds
    print(
        f"logistic n={a.n} p={a.p} lam={a.lam:g} tol={a.tol:g} n_jobs={a.n_jobs}; {clock} "
        "seconds" + (f", {load_line()}" if clock == "wall" else "")
    )
    print(
        f"fit : {tf:7.3f} s  n_iter {f.n_iter:3d}  hessian passes {f.hessian_passes}"
        f"  O(np) passes {f.matvec_passes}"
    )
    print(
        f"loo : {tl:7.3f} s  n_iter {r.n_iter:3d}  hessian passes {r.hessian_passes}"
        f"  O(np) passes {r.matvec_passes} (+1 leverage pass)"
    )
    print(f"loo incl. fit / fit = {tl / tf:.2f} (target <= 1.4; floor: --breakdown)")
    print(f"max |coef diff| = {np.max(np.abs(f.coef - r.coef)):.1e}")
    if a.breakdown:
        breakdown(X, y, args, r, a)

    # a 10-point grid of penalties (descending lambda, as the estimators walk it), each
    # point warm-started from the previous one's state (path_fit) and followed by ALO
    lams = np.logspace(2, -2, 10)
    ts = _core.TuneState(
        X,
        y,
        None,
        "logistic",
        np.full(a.p, lams[0]),
        fit_intercept=True,
        tol=a.tol,
        max_iter=100,
        n_threads=a.n_jobs,
    )
    rows = []
    sw = Stopwatch(clock)
    with sw:
        for lam in lams:
            ts.set_penalty(np.full(a.p, lam))
            out = ts.fit()
            ts.alo(gradient=False)
            rows.append((lam, out.n_iter, out.hessian_passes))
    tp = sw.seconds
    print(f"path of {len(lams)} penalties, fit + ALO each: {tp:.3f} s = {tp / tf:.2f} fits")
    for lam, it, hp in rows:
        print(f"  lam {lam:9.3g}: n_iter {it:2d}  hessian passes {hp}  (+1 leverage pass)")
    print(f"  mean Hessian passes per candidate: {np.mean([r[2] for r in rows]):.2f} (+1 leverage)")


if __name__ == "__main__":
    main()
