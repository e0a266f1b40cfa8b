"""ALOOCV along a grid with its standard-error band, on the breast-cancer data.

Logistic regression, standardized features; compares the selection of the minimum
and the 1-SE rule and saves the curve.

    python examples/cv_curve.py [--out docs/img]
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.datasets import load_breast_cancer

import aloocv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="folder for the PNG (needs matplotlib)")
    args = ap.parse_args()
    d = load_breast_cancer()
    X = (d.data - d.data.mean(0)) / d.data.std(0)
    y = d.target.astype(float)
    grid = np.logspace(-3, 3, 40)
    best = aloocv.tune(X, y, loss="logistic", penalty=aloocv.L2(1.0), method="grid", grid=grid)
    one_se = aloocv.tune(
        X, y, loss="logistic", penalty=aloocv.L2(1.0), method="grid", grid=grid, selection="1se"
    )
    print(f"minimum ALOOCV {best.acv:.4f} +- {best.stderr:.4f} at lambda {best.penalty.lam:.3g}")
    print(f"1-SE rule picks lambda {one_se.penalty.lam:.3g} (ALOOCV {one_se.acv:.4f})")
    if args.out:
        import matplotlib

        matplotlib.use("Agg")
        fig = one_se.plot(title="ALOOCV of logistic regression, breast cancer")
        path = f"{args.out}/cv_curve.png"
        fig.savefig(path, dpi=90)
        print(f"saved {path}")


if __name__ == "__main__":
    main()
