"""The n x n dual route against the primal route for n < p, side by side in one run.

    python benchmarks/dual_compare.py                   # n=500, p=20000 on both routes
    python benchmarks/dual_compare.py --primal-p 5000   # primal side at p=5000 (~30 s)
    python benchmarks/dual_compare.py --n 200 --p 2000  # a quick look

For ridge (squared loss) and L2 logistic regression, times ``aloocv.loo(method="alo")``
including its fit with ``solver="dual"`` and ``solver="primal"`` on the same data and
prints the ratio primal / dual (target >= 10x at n=500, p=20000) and the largest
relative difference of the leverages (target <= 1e-8).

Both fits run to ``--tol`` (default 1e-10): at the library's default 1e-8 the primal
logistic fit stops about 3e-8 away from the optimum in relative leverage, while the
dual's cheap O(n^3) steps converge 100x below the tolerance; the comparison is of the
routes, not of two stopping points. Timing (``benchmarks/_timing.py``): with
``--threads 1`` (the default) CPU seconds under single-threaded BLAS, otherwise wall
seconds with the load average printed; the dual route is the minimum of ``--repeat``
calls after a warm-up, the primal route (minutes at p=20000) one call.

The primal route forms the (p+1) x (p+1) Hessian and factors it: at p=20000 that is
3.2 GB and a p^3/3 Cholesky per fresh factor, minutes on a 2-core machine;
``--primal-p`` measures it on the first columns of X only (the dual is then timed at
both widths, and the ratio is taken at the primal's width).
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext

import numpy as np
from _timing import best_of, clock_for, load_line, single_threaded

import aloocv


def data(n: int, p: int, seed: int = 9) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gaussian X with 50 active features, a linear and a binary response.

    Parameters
    ----------
    n, p : int
        Samples and features.
    seed : int
        Random seed.

    Returns
    -------
    tuple of ndarray
        ``X`` (n, p), ``y`` for the squared loss, ``y`` in {0, 1} for the logistic loss.
    """
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[:50] = rng.standard_normal(50)
    y = X @ beta + rng.standard_normal(n)
    yb = (rng.random(n) < 1 / (1 + np.exp(-X @ beta / 5))).astype(float)
    return X, y, yb


def main(argv: list[str] | None = None) -> int:
    """Run both routes for both losses and print the table.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status (0).
    """
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--n", type=int, default=500, help="samples (default 500)")
    ap.add_argument("--p", type=int, default=20000, help="features (default 20000)")
    ap.add_argument(
        "--primal-p", type=int, default=None, help="features for the primal side (default: p)"
    )
    ap.add_argument("--lam", type=float, default=10.0, help="L2 penalty (default 10)")
    ap.add_argument("--tol", type=float, default=1e-10, help="fit tolerance (default 1e-10)")
    ap.add_argument("--repeat", type=int, default=3, help="timed repeats of the dual route")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="n_jobs (default 1: CPU seconds; 0: all cores, wall seconds)",
    )
    args = ap.parse_args(argv)
    args.threads = args.threads or None
    clock = clock_for(args.threads)
    n, p = args.n, args.p
    pp = min(p, args.primal_p or p)
    X, y, yb = data(n, p)
    Xp = np.ascontiguousarray(X[:, :pp]) if pp < p else X

    def run(Xd: np.ndarray, yy: np.ndarray, loss: str, solver: str) -> aloocv.LOOResult:
        return aloocv.loo(
            Xd,
            yy,
            loss=loss,
            penalty=aloocv.L2(args.lam),
            solver=solver,
            tol=args.tol,
            n_jobs=args.threads,
        )

    also = f" (dual also at p={p})" if pp < p else ""
    print(
        f"aloocv {aloocv.__version__}: loo(method='alo') incl. the fit, n={n}, lambda={args.lam}, "
        f"tol={args.tol:g}, n_jobs={args.threads}; primal route at p={pp}{also}; "
        + ("CPU seconds" if clock == "cpu" else f"wall seconds, {load_line()}")
    )
    head = (
        f"{'loss':<9} {'p':>6} {'dual [s]':>9} {'primal [s]':>11} {'primal/dual':>12} "
        f"{'>= 10x':>6} {'max rel lev diff':>17} {'max abs lev diff':>17}"
    )
    print(head)
    print("-" * len(head))
    for loss, yy in (("squared", y), ("logistic", yb)):
        with single_threaded() if clock == "cpu" else nullcontext():
            if pp < p:
                t_full = best_of(
                    lambda yy=yy, loss=loss: run(X, yy, loss, "dual"), args.repeat, clock=clock
                ).seconds
                dash = "-"
                print(f"{loss:<9} {p:>6} {t_full:>9.3f} {dash:>11} {dash:>12} {'':>6} {dash:>17}")
            td = best_of(
                lambda yy=yy, loss=loss: run(Xp, yy, loss, "dual"), args.repeat, clock=clock
            )
            tp = best_of(
                lambda yy=yy, loss=loss: run(Xp, yy, loss, "primal"), 1, clock=clock, warmup=False
            )
        t_d, d, t_p, pr = td.seconds, td.result, tp.seconds, tp.result
        diff = np.abs(d.leverages - pr.leverages)
        rel = float(np.max(diff / np.abs(pr.leverages)))
        ratio = t_p / t_d
        print(
            f"{loss:<9} {pp:>6} {t_d:>9.3f} {t_p:>11.2f} {ratio:>11.0f}x "
            f"{'yes' if ratio >= 10 else 'NO':>6} {rel:>17.1e} {float(np.max(diff)):>17.1e}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
