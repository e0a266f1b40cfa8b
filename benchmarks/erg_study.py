"""The ER-G paper's synthetic study, side by side with ALOOCV and cross-validation.

Scenarios (p = 80, n_train = 100, n_test = 1000, noise sigma = 10 or 50; the paper
defers its generation to an appendix we do not have, so we document ours):

* A, correlated features: x ~ N(0, Sigma) with Sigma_ij = 0.8^|i-j|, a dense
  beta*_j ~ N(0, 2^2) (Ridge-friendly, the Lasso is prone to fail);
* B, sparse: x ~ N(0, I), 10 non-zero coefficients of size U(5, 10) with random
  signs (Lasso-friendly);
* C, both: x ~ N(0, Sigma) as in A with the sparse beta* of B.

For each repetition every procedure is fitted on the training set and scored on the
test set by the paper's R^2 of eq. 11, ``1 - ||y - y_hat||_2 / ||y - ybar||_2``, and
timed in CPU seconds on one thread (``benchmarks/_timing.py``; every procedure with
``n_jobs=1`` semantics under ``threadpool_limits(1)``). The table reports medians over
the repetitions (different data sets: the median summarizes a distribution, not the
noise of repeats) and, per scenario, the
two-sided Mann-Whitney U test of each procedure's R^2 against the procedure with the
best median (p < 0.05: significantly different).

    python benchmarks/erg_study.py [--reps 20] [--markdown docs/erg_study.md]
"""

from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np
from _timing import Stopwatch, single_threaded
from scipy.stats import mannwhitneyu
from sklearn.linear_model import ElasticNetCV, LassoCV, RidgeCV

import aloocv

ALPHAS = np.logspace(-3, 4, 30)
PROCEDURES = {
    "BKK": lambda: aloocv.BKKRidge(),
    "SBKK": lambda: aloocv.SBKKRegressor(),
    "ABKK": lambda: aloocv.ABKKRegressor(),
    "RidgeCV": lambda: RidgeCV(alphas=ALPHAS),
    "LassoCV": lambda: LassoCV(cv=5, alphas=30),
    "ElasticNetCV": lambda: ElasticNetCV(cv=5, l1_ratio=[0.1, 0.5, 0.9], alphas=30),
    "ALORidgeCV": lambda: aloocv.ALORidgeCV(alphas=ALPHAS),
    "ALOElasticNetCV": lambda: aloocv.ALOElasticNetCV(l1_ratio=[0.1, 0.5, 0.9], alphas=30),
}


def scenario(name: str, sigma: float, rng, p=80, n_train=100, n_test=1000):
    corr = name in ("A", "C")
    if corr:
        idx = np.arange(p)
        L = np.linalg.cholesky(0.8 ** np.abs(idx[:, None] - idx[None, :]))
    if name == "A":
        beta = rng.standard_normal(p) * 2.0
    else:
        beta = np.zeros(p)
        nz = rng.choice(p, 10, replace=False)
        beta[nz] = rng.uniform(5, 10, 10) * rng.choice([-1, 1], 10)

    def draw(n):
        X = rng.standard_normal((n, p))
        if corr:
            X = X @ L.T
        return X, X @ beta + sigma * rng.standard_normal(n)

    return draw(n_train), draw(n_test)


def r2(y, pred):
    return 1.0 - np.sqrt(np.mean((y - pred) ** 2)) / np.sqrt(np.mean((y - y.mean()) ** 2))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--markdown", help="write the table to this file")
    args = ap.parse_args(argv)
    lines = [
        f"# ER-G synthetic study: median R^2 (eq. 11) and fit time over {args.reps} repetitions",
        "",
        "`*`: the best median R^2 of the row; other entries carry the Mann-Whitney p-value "
        "of their R^2 against it.",
        "",
        "| scenario | sigma | " + " | ".join(PROCEDURES) + " |",
        "|---|---|" + "---|" * len(PROCEDURES),
    ]
    times_all = {k: [] for k in PROCEDURES}
    for name in ("A", "B", "C"):
        for sigma in (10.0, 50.0):
            rng = np.random.default_rng([ord(name), int(sigma)])  # reproducible
            scores = {k: [] for k in PROCEDURES}
            for _ in range(args.reps):
                (Xtr, ytr), (Xte, yte) = scenario(name, sigma, rng)
                for k, make in PROCEDURES.items():
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        sw = Stopwatch("cpu")
                        with sw, single_threaded():
                            m = make().fit(Xtr, ytr)
                        times_all[k].append(sw.seconds)
                    scores[k].append(r2(yte, m.predict(Xte)))
            med = {k: float(np.median(v)) for k, v in scores.items()}
            best = max(med, key=med.get)
            cells = []
            for k in PROCEDURES:
                if k == best:
                    cells.append(f"**{med[k]:.3f}** *")
                else:
                    pv = mannwhitneyu(scores[k], scores[best], alternative="two-sided").pvalue
                    cells.append(f"{med[k]:.3f} (p={pv:.2g})")
            lines.append(f"| {name} | {sigma:g} | " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    lines += ["", "| procedure | median fit time [CPU ms, one thread] |", "|---|---|"]
    for k, v in times_all.items():
        lines.append(f"| {k} | {1e3 * np.median(v):.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
