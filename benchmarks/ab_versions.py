"""A/B of two builds of aloocv on the same problems: CPU time and bitwise equality.

    python benchmarks/ab_versions.py OLD_PYTHONPATH NEW_PYTHONPATH [--repeat 5] [--quick]
        [--cases logistic:loo,iso-logistic:loo]

Each argument is a directory holding an importable ``aloocv`` package (with its compiled
``_core``): for instance a worktree's ``python/`` folder with the extension copied in, or
a virtual environment's site-packages. Every case runs in a child process per build,
one thread (``n_jobs=1`` and threadpoolctl's BLAS limit), the builds interleaved case by
case and repeat by repeat; the table gives the minimum CPU seconds of each and their
ratio new / old, and whether every public result array (coefficients, per-sample
leave-one-out values, means, gradients, chosen penalties) is bitwise equal.

Cases: the public verbs on realistic designs (AR(1) columns with rho 0.9 and unequal
column scales; a sparse one-hot design; the multinomial loss; dense isotropic, Student-t(2)
and one-hot rows for ALO's fit), plus small problems called many times, where the per-call
overhead of the Python layer shows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

CHILD = r"""
import json, sys, time, warnings
import numpy as np
from threadpoolctl import threadpool_limits
warnings.simplefilter("ignore")
import aloocv

case, reps_inner, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]


def ar1(n, p, seed, rho=0.9):
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, p))
    X = np.empty_like(Z)
    X[:, 0] = Z[:, 0]
    for j in range(1, p):
        X[:, j] = rho * X[:, j - 1] + np.sqrt(1 - rho**2) * Z[:, j]
    X *= np.exp(rng.uniform(-3.45, 3.45, p))  # scales over 3 decades
    eta = X @ (rng.standard_normal(p) / np.sqrt(p) / X.std(0))
    return X, eta, rng


def onehot(n, seed):
    import scipy.sparse as sp
    rng = np.random.default_rng(seed)
    blocks = []
    for levels in (10, 100, 1000):
        codes = rng.integers(0, levels, n)
        blocks.append(sp.csr_matrix((np.ones(n), (np.arange(n), codes)), shape=(n, levels)))
    X = sp.hstack(blocks + [sp.csr_matrix(rng.standard_normal((n, 5)))]).tocsr()
    eta = X @ (rng.standard_normal(X.shape[1]) * 0.5)
    return X, eta, rng


def dense_rows(kind, n, p, seed):
    # dense C-ordered designs of ALO's sampled first Hessians (docs/math/newton.md):
    # isotropic Gaussian rows, Student-t(2) rows (heavy tails: the sample is refused), and
    # one-hot codes of p / 10 factors with 10 levels each, stored dense
    rng = np.random.default_rng(seed)
    if kind == "t2":
        X = rng.standard_t(2, (n, p))
    elif kind == "dense1hot":
        codes = rng.integers(0, 10, (n, p // 10))
        X = np.zeros((n, p))
        X[np.arange(n)[:, None], np.arange(p // 10) * 10 + codes] = 1.0
    else:
        X = rng.standard_normal((n, p))
    eta = X @ (rng.standard_normal(p) / np.sqrt(p) / X.std(0).clip(1e-12) * 2)
    return X, eta, rng


def problem(case):
    if case.startswith("small"):
        X, eta, rng = ar1(300, 10, 1)
    elif case.startswith("sparse"):
        X, eta, rng = onehot(20000, 2)
    elif case.startswith("iso"):
        X, eta, rng = dense_rows("iso", 100000, 200, 4)
    elif case.startswith(("t2", "dense1hot")):
        X, eta, rng = dense_rows(case.split("-")[0], 60000, 200, 5)
    else:
        X, eta, rng = ar1(20000, 50, 3)
    if "multinomial" in case:
        E = np.column_stack([eta, -eta, 0.5 * eta]) + rng.standard_normal((X.shape[0], 3))
        return X, np.argmax(E, axis=1).astype(float), "multinomial"
    if "poisson" in case:
        return X, rng.poisson(np.exp(np.clip(eta, -5, 3))).astype(float), "poisson"
    if "squared" in case:
        return X, eta + rng.standard_normal(X.shape[0]), "squared"
    if "gamma" in case:
        mu = np.exp(np.clip(0.3 * eta, -5, 3))
        return X, rng.gamma(2.0, mu / 2.0), "gamma"
    return X, (eta + rng.logistic(size=X.shape[0]) > 0).astype(float), "logistic"


def run(case, X, y, loss):
    pen = aloocv.L2(1.0)
    verb = case.split(":")[1]
    if verb == "fit":
        f = aloocv.fit(X, y, loss=loss, penalty=pen, n_jobs=1)
        return {"coef": f.coef_, "icpt": np.atleast_1d(f.intercept_)}
    if verb == "loo":
        r = aloocv.loo(X, y, loss=loss, penalty=pen, n_jobs=1, return_gradient=True)
        return {"losses": r.losses, "pred": r.predictions, "grad": r.gradient,
                "mean": np.array([r.mean, r.stderr])}
    if verb == "enet":
        r = aloocv.loo(X, y, loss=loss, penalty=aloocv.ElasticNet(5.0, 1.0), n_jobs=1)
        return {"losses": r.losses, "coef": r.fit.coef_}
    if verb == "kfold":
        r = aloocv.kfold(X, y, loss=loss, penalty=pen, n_folds=5, n_jobs=1)
        return {"losses": r.losses, "fold_means": r.fold_means}
    if verb == "tune":
        r = aloocv.tune(X, y, loss=loss, penalty=pen, n_jobs=1)
        return {"params": r.penalty.params(), "acv": np.array([r.acv]), "coef": r.fit.coef_}
    if verb == "grid":
        r = aloocv.tune(X, y, loss=loss, penalty=pen, method="grid", n_grid=10, n_jobs=1)
        return {"acv": r.history["acv"], "coef": r.fit.coef_}
    if verb == "lrcv":
        e = aloocv.ALOLogisticRegressionCV(Cs=10, n_jobs=1).fit(X, y)
        return {"coef": e.coef_, "C": np.atleast_1d(e.C_)}
    if verb == "ridgecv":
        e = aloocv.ALORidgeCV(alphas=np.logspace(-3, 3, 10)).fit(X, y)
        return {"coef": e.coef_, "alpha": np.atleast_1d(e.alpha_)}
    raise ValueError(case)


X, y, loss = problem(case)
with threadpool_limits(1):
    res = run(case, X, y, loss)  # warm-up, and the results compared
    t0 = time.process_time()
    for _ in range(reps_inner):
        run(case, X, y, loss)
    cpu = (time.process_time() - t0) / reps_inner
np.savez(out, **{k: np.asarray(v) for k, v in res.items() if v is not None})
print(json.dumps({"cpu": cpu}))
"""

CASES = {
    "logistic:fit": 1,
    "logistic:loo": 1,
    "logistic:enet": 1,
    "logistic:kfold": 1,
    "logistic:tune": 1,
    "logistic:grid": 1,
    "poisson:loo": 1,
    "multinomial:loo": 1,
    "sparse-logistic:loo": 1,
    "iso-logistic:loo": 1,
    "iso-gamma:loo": 1,
    "t2-logistic:loo": 1,
    "dense1hot-poisson:loo": 1,
    "small-logistic:loo": 50,
    "small-logistic:lrcv": 5,
    "small-squared:ridgecv": 20,
    "small-multinomial:fit": 50,
}
QUICK = ("logistic:loo", "logistic:tune", "small-logistic:loo", "small-squared:ridgecv")


def one(path: str, case: str, inner: int, out: str) -> float:
    env = dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1")
    r = subprocess.run(
        [sys.executable, "-c", CHILD, case, str(inner), out],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(json.loads(r.stdout.strip().splitlines()[-1])["cpu"])


def same(a: str, b: str) -> bool:
    A, B = np.load(a), np.load(b)
    if set(A.files) != set(B.files):
        return False
    return all(np.array_equal(A[k], B[k], equal_nan=True) for k in A.files)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cases", help="comma-separated case names (default: every case)")
    args = ap.parse_args(argv)
    chosen = args.cases.split(",") if args.cases else None
    unknown = sorted(set(chosen or ()) - set(CASES))
    if unknown:
        ap.error(f"unknown cases {unknown}; known: {sorted(CASES)}")
    cases = {
        c: k
        for c, k in CASES.items()
        if (chosen is None or c in chosen) and (not args.quick or c in QUICK)
    }
    print(f"{'case':28s} {'old CPU s':>10s} {'new CPU s':>10s} {'new/old':>8s}  bitwise")
    with tempfile.TemporaryDirectory() as tmp:
        for case, inner in cases.items():
            t = {"old": [], "new": []}
            files = {}
            for _ in range(args.repeat):
                for tag in ("old", "new"):
                    files[tag] = os.path.join(tmp, f"{tag}.npz")
                    t[tag].append(one(getattr(args, tag), case, inner, files[tag]))
            o, n = min(t["old"]), min(t["new"])
            eq = "yes" if same(files["old"], files["new"]) else "NO"
            print(f"{case:28s} {o:10.4f} {n:10.4f} {n / o:8.3f}  {eq}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
