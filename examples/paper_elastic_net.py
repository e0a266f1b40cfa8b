"""The paper's elastic-net experiment (its Figure 4): tuning (l1, l2) by ALOOCV with
Algorithms 1 and 2, and the run time against n compared with exact leave-one-out CV.

For each n: Algorithm 1 (full hypergradient, Armijo steps) and Algorithm 2 (minibatch
stochastic hypergradient) tune the elastic net, each started from the best point of
the same small grid evaluated by ALO (ACV of the lasso is not convex in (l1, l2) and
jumps where the active set changes, so a gradient method needs a sensible start);
the exact alternative evaluates leave-one-out by n refits at every grid point. The
selected penalties are compared by their exact leave-one-out loss.

    python examples/paper_elastic_net.py [--sizes 200 400 800] [--out docs/img]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import aloocv


def data(n: int, p: int = 40, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[:8] = rng.standard_normal(8) * 1.5
    y = X @ beta + rng.standard_normal(n)
    return X, y


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 400, 800, 1600])
    ap.add_argument("--out", default=None, help="folder for the PNG (needs matplotlib)")
    args = ap.parse_args()
    start = aloocv.ElasticNet(5.0, 5.0)
    grid = [(l1, l2) for l1 in (1.0, 5.0, 20.0) for l2 in (0.5, 5.0)]
    rows = []
    print(
        f"{'n':>6} {'alg1 [s]':>9} {'alg2 [s]':>9} {'exact grid [s]':>15} "
        f"{'exact LOO at alg1':>18} {'at alg2':>9} {'at best grid':>13}"
    )
    for n in args.sizes:
        X, y = data(n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            g0 = aloocv.tune(X, y, loss="squared", penalty=start, method="grid", grid=grid)
            a1 = aloocv.tune(X, y, loss="squared", penalty=g0.penalty, method="gd")
            t1 = time.perf_counter()
            g0 = aloocv.tune(X, y, loss="squared", penalty=start, method="grid", grid=grid)
            a2 = aloocv.tune(
                X,
                y,
                loss="squared",
                penalty=g0.penalty,
                method="sgd",
                batch_size=32,
                max_iter=300,
            )
            t2 = time.perf_counter()
            exact = {
                g: aloocv.loo(
                    X, y, loss="squared", penalty=aloocv.ElasticNet(*g), method="exact"
                ).mean
                for g in grid
            }
            t3 = time.perf_counter()

            def ex(pen, X=X, y=y):
                return aloocv.loo(X, y, loss="squared", penalty=pen, method="exact").mean

            r = (n, t1 - t0, t2 - t1, t3 - t2, ex(a1.penalty), ex(a2.penalty), min(exact.values()))
        rows.append(r)
        print(
            f"{r[0]:>6} {r[1]:>9.3f} {r[2]:>9.3f} {r[3]:>15.3f} {r[4]:>18.4f} {r[5]:>9.4f} "
            f"{r[6]:>13.4f}"
        )
    if args.out:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        R = np.array(rows)
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.loglog(R[:, 0], R[:, 1], "o-", label="ALO grid + Algorithm 1")
        ax.loglog(R[:, 0], R[:, 2], "s-", label="ALO grid + Algorithm 2")
        ax.loglog(R[:, 0], R[:, 3], "^-", label=f"exact LOO on a {len(grid)}-point grid")
        ax.set_xlabel("n")
        ax.set_ylabel("run time [s]")
        ax.set_title("Elastic net: tuning time against n")
        ax.legend()
        fig.tight_layout()
        path = f"{args.out}/paper_elastic_net.png"
        fig.savefig(path, dpi=90)
        print(f"saved {path}")


if __name__ == "__main__":
    main()
