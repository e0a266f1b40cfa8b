"""Tuning by the exact hypergradient, side by side in one run.

    python benchmarks/tune_compare.py [--quick] [--threads N]

1. Gradient accuracy: d loo(...).mean / d log(lambda), exact (default) and the paper's
   eq. 14-16, against central finite differences of loo(...).mean (step 1e-4 in
   log(lambda), fits to 1e-13): real data (breast cancer, wine, digits 3 vs 8), Poisson
   counts, per-feature and grouped L2, the elastic net, with weights.
2. Where the default search ends: ALO at the tuned C against the minimum of the curve
   (a 181-point grid in log(lambda) and a bounded scalar refinement) and against ALO at
   bbai's C (bbai.glm.LogisticRegression, when installed: exact ALO gradient and Hessian,
   trust-region steps).
3. Time to tune C: ``aloocv.tune`` (default search) against bbai, second call in the
   process, on breast cancer and at n=50000, p=100.
4. The paper's 50-lambda ridge: 800 Armijo iterations (Algorithm 1), L-BFGS-B, and the
   exact-Hessian trust region: ACV reached and fits.
5. Cost of the gradient: loo(return_gradient=True) / loo(method="alo"), both including
   the fit, at n=100000, p=200 (logistic).
6. Cost of the default search against a 10-point grid (``tune(method="grid", n_grid=10)``,
   and the estimator's ``search="gradient"`` against its ``search="grid"``, ``Cs=10``):
   CPU seconds on one thread, the minimum over interleaved repeats, logistic, p=200, an
   isotropic Gaussian design and AR(1) 0.9 columns of unequal scales, n=20000 and 100000
   (``--quick``: 20000 only); where the search ends against the minimum of the curve (a
   second search from there, exact Hessians, to ``tol=1e-10``).

    python benchmarks/tune_compare.py --cost-only [--quick] [--repeats R]

Timing (``benchmarks/_timing.py``): ``--threads 1`` (the default) gives CPU seconds on
one thread, other counts (0: all cores) wall seconds; the calls compared in 5 run in
rotation, each time is a minimum over repeats after a warm-up. Against bbai (3) both
sides are wall seconds: bbai computes in a helper process whose CPU time is not seen.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable

import numpy as np
from scipy.optimize import minimize_scalar
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.exceptions import ConvergenceWarning

import aloocv

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bbai  # the optional peer bbai, run in a child process
from _timing import Clock, best_of, clock_for, interleaved, load_line

JOBS: int | None = 1
CLOCK: Clock = "cpu"
TOL = 1e-13


def real(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name == "breast_cancer":
        d = load_breast_cancer()
        X, y = d.data, d.target.astype(float)
    elif name == "wine":
        d = load_wine()
        X, y = d.data, (d.target == 0).astype(float)
    else:
        d = load_digits()
        keep = (d.target == 3) | (d.target == 8)
        X, y = d.data[keep], (d.target[keep] == 3).astype(float)
    sd = X.std(0)
    return (X - X.mean(0)) / np.where(sd > 0, sd, 1.0), y


def fd_log(X, y, loss, pen, **kw) -> np.ndarray:
    u = np.log(pen.params())
    g = np.empty(u.size)
    for k in range(u.size):
        e = np.zeros(u.size)
        e[k] = 1e-4
        f = [
            aloocv.loo(
                X, y, loss=loss, penalty=pen.with_params(np.exp(u + s * e)), tol=TOL, **kw
            ).mean
            for s in (1, -1)
        ]
        g[k] = (f[0] - f[1]) / 2e-4
    return g


def rel_err(g: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(g - ref)) / np.max(np.abs(ref)))


def accuracy() -> None:
    print("1. gradient vs central finite differences of loo().mean in log(lambda)")
    rng = np.random.default_rng(0)
    cases = []
    for name in ("breast_cancer", "wine", "digits"):
        X, y = real(name)
        for lam in (0.1, 1.0, 10.0):
            cases.append((f"{name} logistic lam={lam:g}", X, y, "logistic", aloocv.L2(lam), {}))
    Xp = rng.standard_normal((500, 8)) * np.linspace(0.5, 2, 8)
    yp = rng.poisson(np.exp(0.3 * Xp[:, :3].sum(1))).astype(float)
    w = rng.uniform(0.5, 2.0, 500)
    cases.append(
        ("poisson counts, weights", Xp, yp, "poisson", aloocv.L2(2.0), {"sample_weight": w})
    )
    X, y = real("wine")
    cases.append(
        ("wine per-feature L2", X, y, "logistic", aloocv.L2(np.geomspace(0.1, 10, 13)), {})
    )
    cases.append(
        (
            "wine grouped L2 (3 groups)",
            X,
            y,
            "logistic",
            aloocv.L2([0.3, 1.0, 3.0], groups=np.arange(13) % 3),
            {},
        )
    )
    cases.append(
        (
            "wine elastic net (l1, l2), weights",
            X,
            y,
            "logistic",
            aloocv.ElasticNet(0.5, 0.5),
            {"sample_weight": rng.uniform(0.5, 2.0, X.shape[0])},
        )
    )
    print(f"  {'case':44s} {'exact':>9s} {'paper':>9s}")
    worst = 0.0
    for label, X, y, loss, pen, kw in cases:
        ref = fd_log(X, y, loss, pen, **kw)
        ex = aloocv.loo(X, y, loss=loss, penalty=pen, tol=TOL, return_gradient=True, **kw)
        pa = aloocv.loo(
            X, y, loss=loss, penalty=pen, tol=TOL, return_gradient=True, gradient="paper", **kw
        )
        e1 = rel_err(ex.gradient * pen.params(), ref)
        e2 = rel_err(pa.gradient * pen.params(), ref)
        worst = max(worst, e1)
        print(f"  {label:44s} {e1:9.1e} {e2:9.1e}")
    print(f"  worst exact relative error {worst:.1e} (target <= 1e-5)")


def curve_min(X, y) -> float:
    def f(u):
        return aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(np.exp(u)), tol=1e-10).mean

    us = np.linspace(-9, 9, 181)
    vals = np.array([f(u) for u in us])
    k = int(np.argmin(vals))
    r = minimize_scalar(
        f,
        bounds=(us[max(k - 1, 0)], us[min(k + 1, 180)]),
        method="bounded",
        options={"xatol": 1e-10},
    )
    return float(min(r.fun, vals[k]))


def timed(f, repeat=3, clock: Clock | None = None):
    """Minimum of ``repeat`` calls after an untimed one, on the run's clock by default."""
    t = best_of(f, repeat, clock=clock or CLOCK)
    return t.seconds, t.result


def searches(quick: bool) -> None:
    print("2-3. default search vs the curve's minimum and vs bbai")
    data = [(name, *real(name)) for name in ("breast_cancer", "wine", "digits")]
    if not quick:
        rng = np.random.default_rng(1)
        n, p = 50000, 100
        X = rng.standard_normal((n, p))
        beta = rng.standard_normal(p) / np.sqrt(p) * 2
        y = (rng.random(n) < 1 / (1 + np.exp(-X @ beta))).astype(float)
        data.append(("gaussian n=50000 p=100", X, y))
    hdr = f"  {'data':24s} {'ours ACV':>12s} {'rel to min':>10s} {'bbai ACV':>12s} {'fits':>4s}"
    print(hdr + f" {'ours [s]':>9s} {'bbai [s]':>9s} {'ratio':>6s}")
    for name, X, y in data:
        t_o, r = timed(
            lambda X=X, y=y: aloocv.tune(X, y, loss="logistic", n_jobs=JOBS), clock="wall"
        )
        best = curve_min(X, y) if X.shape[0] < 5000 else r.acv
        b_acv = t_b = float("nan")
        if _bbai.available():
            # the same protocol as ours: one untimed fit, the minimum of 3 (in a child)
            b = _bbai.logistic_fit(X, y, threads=JOBS, repeat=3, warmup=True)
            t_b = b.seconds
            b_acv = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1 / b.C), tol=1e-10).mean
        print(
            f"  {name:24s} {r.acv:12.9f} {(r.acv - best) / best:10.1e} {b_acv:12.9f} "
            f"{r.n_fits - 5:4d} {t_o:9.4f} {t_b:9.4f} {t_o / t_b:6.2f}"
        )
    print("  (fits: after the 5-point bracketing grid; ratio: ours / bbai; wall seconds)")


def paper_ridge() -> None:
    print("4. the paper's 50-lambda ridge (n=150, p=50, 40 irrelevant features, start 1/3)")
    rng = np.random.default_rng(4)
    X = rng.standard_normal((150, 50))
    b = np.zeros(50)
    b[:10] = rng.standard_normal(10)
    y = X @ b + rng.standard_normal(150)
    kw = dict(
        loss="squared", penalty=aloocv.L2(np.full(50, 1 / 3)), fit_intercept=False, n_jobs=JOBS
    )
    for label, extra in (
        ("Armijo (Algorithm 1), 800 iterations", dict(method="gd", max_iter=800, tol=1e-12)),
        ("L-BFGS-B", dict(method="lbfgs", max_iter=800)),
        ("trust-region Newton (exact Hessian)", dict(method="newton")),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            t, r = timed(lambda extra=extra: aloocv.tune(X, y, **kw, **extra), repeat=1)
        print(
            f"  {label:40s} ACV {r.acv:.7f}  fits {r.n_fits:5d}  {t:7.3f} s  "
            f"converged={r.converged}"
        )


def gradient_cost(quick: bool) -> None:
    n, p = (20000, 100) if quick else (100000, 200)
    print(f"5. cost of the exact gradient, logistic n={n} p={p} (both including the fit)")
    rng = np.random.default_rng(2)
    X = rng.standard_normal((n, p))
    beta = rng.standard_normal(p) / np.sqrt(p) * 2
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ beta))).astype(float)
    pen = aloocv.L2(10.0)
    kw = dict(loss="logistic", penalty=pen, n_jobs=JOBS)
    T = interleaved(
        {
            "alo": lambda: aloocv.loo(X, y, **kw),
            "exact": lambda: aloocv.loo(X, y, **kw, return_gradient=True),
            "paper": lambda: aloocv.loo(X, y, **kw, return_gradient=True, gradient="paper"),
            "fit": lambda: aloocv.fit(X, y, **kw),
        },
        3,
        clock=CLOCK,
    )
    t_a, t_g, t_p, t_f = (T[k].seconds for k in ("alo", "exact", "paper", "fit"))
    print(
        f"  fit {t_f:.3f} s; loo(alo) {t_a:.3f} s; with exact gradient {t_g:.3f} s "
        f"(ratio {t_g / t_a:.2f}, target <= 1.5); with the paper's {t_p:.3f} s ({CLOCK})"
    )


COST_P = 200  # features of the search-cost section
GRID_POINTS = 10  # the grid the default search is measured against


def cost_design(kind: str, n: int, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Logistic data, p=COST_P: ``"isotropic"`` Gaussian columns, or ``"ar1"``: AR(1)
    columns with correlation 0.9 and scales from 0.1 to 10 (the signal in the original
    units)."""
    rng = np.random.default_rng(seed)
    p = COST_P
    Z = rng.standard_normal((n, p))
    scale = np.ones(p)
    if kind == "ar1":
        rho = 0.9
        X = np.empty_like(Z)
        X[:, 0] = Z[:, 0]
        for j in range(1, p):
            X[:, j] = rho * X[:, j - 1] + np.sqrt(1.0 - rho**2) * Z[:, j]
        scale = np.geomspace(0.1, 10.0, p)
        X *= scale
    else:
        X = Z
    beta = rng.standard_normal(p) / np.sqrt(p) * 2.0 / scale
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ beta)))).astype(float)
    return X, y


def cpu_min(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, tuple[float, object]]:
    """The minimum CPU seconds of each callable over ``repeats`` interleaved rounds (one
    untimed call of each first; ``_timing.interleaved``), and its last result."""
    t = interleaved(fns, repeats, clock="cpu")
    return {k: (v.seconds, v.result) for k, v in t.items()}


def cost_calls(X: np.ndarray, y: np.ndarray, jobs: int) -> dict[str, Callable[[], object]]:
    """The searches section 6 times: tune's grid and default search, the estimator's."""
    kw = dict(loss="logistic", n_jobs=jobs)

    def est(search: str) -> Callable[[], object]:
        model = aloocv.ALOLogisticRegressionCV(Cs=GRID_POINTS, search=search, n_jobs=jobs)
        return lambda: model.fit(X, y)

    return {
        "grid": lambda: aloocv.tune(X, y, method="grid", n_grid=GRID_POINTS, **kw),
        "tune": lambda: aloocv.tune(X, y, **kw),
        "est_grid": est("grid"),
        "est_grad": est("gradient"),
    }


def search_cost(quick: bool, repeats: int) -> None:
    jobs = 1 if JOBS is None else JOBS
    print(
        f"6. cost of the default search against a {GRID_POINTS}-point grid "
        f"(CPU s, n_jobs={jobs}, min of {repeats} interleaved repeats; logistic, p={COST_P})"
    )
    hdr = f"  {'design':10s} {'n':>6s} {'grid [s]':>8s} {'tune [s]':>8s} {'ratio':>6s} {'fits':>4s}"
    print(hdr + f" {'conv':>5s} {'ACV gap':>8s} {'est grid':>8s} {'est grad':>8s} {'ratio':>6s}")
    ns = (20000,) if quick else (20000, 100000)
    for n in ns:
        for kind in ("isotropic", "ar1"):
            X, y = cost_design(kind, n)
            kw = dict(loss="logistic", n_jobs=jobs)
            fns = cost_calls(X, y, jobs)
            t = cpu_min(fns, repeats)
            r = t["tune"][1]
            # the curve's minimum: exact-Hessian Newton from the search's end, to 1e-10
            ref = aloocv.tune(X, y, penalty=r.penalty, method="newton", tol=1e-10, **kw)
            gap = (r.acv - ref.acv) / ref.acv
            tg, tt, eg, ed = (t[k][0] for k in ("grid", "tune", "est_grid", "est_grad"))
            print(
                f"  {kind:10s} {n:6d} {tg:8.2f} {tt:8.2f} {tt / tg:6.2f} {r.n_fits:4d} "
                f"{r.converged!s:>5s} {gap:8.1e} {eg:8.2f} {ed:8.2f} {ed / eg:6.2f}"
            )
    print("  (ACV gap: (ACV at the tuned penalty - the curve's minimum) / the minimum)")


def main() -> None:
    global JOBS, CLOCK
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--threads", type=int, default=1, help="default 1 (CPU seconds); 0: all cores (wall)"
    )
    ap.add_argument("--cost-only", action="store_true", help="only section 6")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repeats of section 6")
    args = ap.parse_args()
    JOBS = args.threads or None
    CLOCK = clock_for(JOBS)
    print(f"{CLOCK} seconds; {load_line()}")
    if JOBS:
        from threadpoolctl import threadpool_limits

        threadpool_limits(JOBS)
    if not args.cost_only:
        accuracy()
        searches(args.quick)
        paper_ridge()
        gradient_cost(args.quick)
    search_cost(args.quick, args.repeats)


if __name__ == "__main__":
    main()
