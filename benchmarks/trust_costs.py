"""What trusting ALO costs and buys (issue 26's targets): for each case, the error of plain
ALO and of ``rtol=0.01`` against exact leave-one-out, whether plain ALO warned, the number
of exact refits, and CPU-time ratios (one thread, min of interleaved repeats):
``rtol`` / exact LOO and ``rtol`` / plain ALO (each including its fit).

    python benchmarks/trust_costs.py [--repeat 3] [--quick]

``--quick`` skips the n = 100000 isotropic design.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits, load_wine
from sklearn.preprocessing import PolynomialFeatures, StandardScaler
from threadpoolctl import threadpool_limits

import aloocv


def _std(X):
    return StandardScaler().fit_transform(X)


def cases(quick: bool):
    Xb, yb = load_breast_cancer(return_X_y=True)
    Xb, yb = _std(Xb), yb * 1.0
    for lam in (1.0, 0.1, 1e-3):
        yield f"breast cancer, logistic, lam={lam:g}", Xb, yb, "logistic", lam
    P = _std(PolynomialFeatures(2, include_bias=False).fit_transform(Xb))
    yield "breast cancer degree 2, logistic, lam=1", P, yb, "logistic", 1.0
    Xw, yw = load_wine(return_X_y=True)
    Xw = _std(Xw)
    Pw = _std(PolynomialFeatures(2, include_bias=False).fit_transform(Xw))
    for lam in (0.035, 1.0):
        yield (
            f"wine degree 2 (class 0), logistic, lam={lam:g}",
            Pw,
            (yw == 0) * 1.0,
            "logistic",
            lam,
        )
    yield "wine, multinomial, C=100", Xw, yw, "multinomial", 0.01
    Xd, yd = load_digits(return_X_y=True)
    Xd = _std(Xd[:, Xd.std(0) > 0])
    yield "digits, multinomial, C=100", Xd, yd, "multinomial", 0.01
    Xa, ya = load_diabetes(return_X_y=True)
    Xa = _std(Xa)
    yield "diabetes, Tweedie power 3, lam=1e-3", Xa, ya, aloocv.Tweedie(power=3.0), 1e-3
    yield "diabetes, gamma, lam=1", Xa, ya, "gamma", 1.0
    yield "diabetes counts, Poisson, lam=1", Xa, np.round(ya / 10.0), "poisson", 1.0
    yield "diabetes, ridge, lam=10", Xa, ya, "squared", 10.0
    if not quick:
        rng = np.random.default_rng(0)
        n, p = 100_000, 200
        X = rng.standard_normal((n, p))
        beta = rng.standard_normal(p) / np.sqrt(p)
        y = (rng.random(n) < 1 / (1 + np.exp(-X @ beta))) * 1.0
        yield "isotropic n=1e5 p=200, logistic, lam=1", X, y, "logistic", 1.0


def _cpu(f):
    t = time.process_time()
    out = f()
    return time.process_time() - t, out


def run(repeat: int, quick: bool) -> None:
    print(
        "| case | plain ALO error | warned | self-check estimate | rtol=0.01 error | refits "
        "| rtol / exact LOO | plain ALO / exact LOO | rtol / plain ALO |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, X, y, loss, lam in cases(quick):
        kw = {"loss": loss, "penalty": aloocv.L2(lam), "tol": 1e-10}
        big = X.shape[0] > 20_000
        t_ex, t_plain, t_r = [], [], []
        with threadpool_limits(1):
            for _ in range(repeat):
                if not big:
                    t, ex = _cpu(
                        lambda X=X, y=y, kw=kw: aloocv.loo(X, y, method="exact", n_jobs=1, **kw)
                    )
                    t_ex.append(t)
                with warnings.catch_warnings(record=True) as rec:
                    warnings.simplefilter("always")
                    t, pl = _cpu(lambda X=X, y=y, kw=kw: aloocv.loo(X, y, n_jobs=1, **kw))
                t_plain.append(t)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t, rf = _cpu(
                        lambda X=X, y=y, kw=kw: aloocv.loo(X, y, n_jobs=1, rtol=0.01, **kw)
                    )
                t_r.append(t)
        warned = any("may be off" in str(r.message) for r in rec)
        est = pl.error_estimate
        check = "-" if est is None else f"{100 * est.relative_error:.2g}%"
        ref = None if big else ex.mean
        if big:  # no exact LOO here: the refinement's own interval is the evidence
            e_plain = "-"
            e_r = f"{100 * rf.error_estimate.relative_error:+.3f}% (est.)"
            r_ex = p_ex = "-"
        else:
            e_plain = f"{100 * (pl.mean / ref - 1):+.2f}%"
            e_r = f"{100 * (rf.mean / ref - 1):+.3f}%"
            r_ex = f"{min(t_r) / min(t_ex):.3f}"
            p_ex = f"{min(t_plain) / min(t_ex):.3f}"  # the floor: the fit and one ALO
        print(
            f"| {name} | {e_plain} | {'yes' if warned else 'no'} | {check} | {e_r} | "
            f"{rf.error_estimate.n_refits} | {r_ex} | {p_ex} | {min(t_r) / min(t_plain):.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    run(a.repeat, a.quick)
