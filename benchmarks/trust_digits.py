"""Issue 26's target on digits: ``ALOLogisticRegressionCV(rtol=0.01)`` against
``LogisticRegressionCV(cv=5, scoring="neg_log_loss")``, held-out log-loss and CPU time.

    python benchmarks/trust_digits.py                 # seed 0
    python benchmarks/trust_digits.py --seeds 0,1,2   # several train/test splits
    python benchmarks/trust_digits.py --exact         # also exact LOO on the Cs grid

Digits (1797 x 64, 10 classes), a stratified 75/25 train/test split with a fixed seed,
standardized on the training part (``StandardScaler``). Every model is multinomial with
the default ``Cs=10`` (``np.logspace(-4, 4, 10)``). Printed per split: the chosen C, the
held-out log-loss and its ratio to ``LogisticRegressionCV``'s, the CPU time
(``time.process_time``; one thread: ``n_jobs=1`` and single-threaded BLAS), and the exact
refits of the refinement:

- ``LogisticRegressionCV(cv=5, scoring="neg_log_loss")`` as the target states (lbfgs at
  scikit-learn's default tolerance);
- ``LogisticRegression(C=that C)`` solved to ``tol=1e-10``: the same C with its final fit
  converged (the refit of ``LogisticRegressionCV`` stops at ``tol=1e-4``, warm-started
  from the folds' average, which is not the penalized optimum);
- ``ALOLogisticRegressionCV()`` and ``(rtol=0.01)`` on the grid, and with
  ``search="gradient"`` (the grid brackets C, the search refines it; with ``rtol`` on the
  refined estimate near the optimum).

With ``--exact``: exact leave-one-out (every sample refitted) at each C of the grid, the
choice it makes, and its CPU time.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

import aloocv

RTOL = 0.01
TARGET = 0.005  # held-out log-loss within 0.5% of LogisticRegressionCV's


def split(seed: int):
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=seed, stratify=y)
    sc = StandardScaler().fit(Xtr)
    return sc.transform(Xtr), sc.transform(Xte), ytr, yte


def timed(make):
    t0 = time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model = make()
    n_warn = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
    return model, time.process_time() - t0, n_warn


def run(seed: int, exact: bool) -> list[tuple]:
    Xtr, Xte, ytr, yte = split(seed)
    rows = []
    lrcv, t_lrcv, w_lrcv = timed(
        lambda: LogisticRegressionCV(cv=5, scoring="neg_log_loss", n_jobs=1).fit(Xtr, ytr)
    )
    ref = log_loss(yte, lrcv.predict_proba(Xte))
    rows.append(("LogisticRegressionCV(cv=5)", lrcv.C_[0], ref, t_lrcv, "", w_lrcv))
    lr, t_lr, w_lr = timed(
        lambda: LogisticRegression(C=lrcv.C_[0], tol=1e-10, max_iter=10000).fit(Xtr, ytr)
    )
    rows.append(
        ("  LogisticRegression(C_, tol=1e-10)", lrcv.C_[0], log_loss(yte, lr.predict_proba(Xte)),
         t_lr, "", w_lr)
    )  # fmt: skip
    for kw in ({}, {"rtol": RTOL}, {"search": "gradient"}, {"search": "gradient", "rtol": RTOL}):
        est, t, nw = timed(lambda kw=kw: aloocv.ALOLogisticRegressionCV(**kw).fit(Xtr, ytr))
        msg = est.tune_result_.message
        refits = msg.split("; ")[-1] if "rtol" in kw else ""
        name = "ALOLogisticRegressionCV(" + ", ".join(f"{k}={v!r}" for k, v in kw.items()) + ")"
        rows.append((name, est.C_[0], log_loss(yte, est.predict_proba(Xte)), t, refits, nw))
    if exact:
        Cs = np.logspace(-4, 4, 10)
        t0 = time.process_time()
        vals = [
            aloocv.loo(Xtr, ytr, loss="multinomial", penalty=aloocv.L2(1 / C), method="exact").mean
            for C in Cs
        ]
        t = time.process_time() - t0
        C = Cs[int(np.argmin(vals))]
        fit = aloocv.fit(Xtr, ytr, loss="multinomial", penalty=aloocv.L2(1 / C))
        p = aloocv.losses.softmax(Xte @ fit.coef_.T + fit.intercept_)
        rows.append(("exact LOO on the grid", C, log_loss(yte, p), t, f"{len(ytr)} x 10 refits", 0))
    return [(seed, *r, r[2] / ref - 1.0) for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0", help="comma-separated split seeds")
    ap.add_argument("--exact", action="store_true", help="exact LOO on the grid too")
    args = ap.parse_args()
    print(f"{'seed':>4}  {'model':<58} {'C':>9} {'log-loss':>9} {'vs LRCV':>8} {'CPU s':>7}")
    with threadpool_limits(1):
        for seed in (int(s) for s in args.seeds.split(",")):
            for s, name, C, ll, t, note, nw, rel in run(seed, args.exact):
                flag = f"  [{nw} ConvergenceWarning]" if nw else ""
                print(
                    f"{s:>4}  {name:<58} {C:9.4g} {ll:9.5f} {100 * rel:+7.2f}% {t:7.2f}"
                    f"  {note}{flag}"
                )
    print(
        f"\ntarget: ALOLogisticRegressionCV(rtol={RTOL}) within {100 * TARGET:g}% of "
        "LogisticRegressionCV's held-out log-loss (a negative ratio is better)"
    )


if __name__ == "__main__":
    main()
