"""Side-by-side timings of aloocv against its peers, measured in one run.

    python benchmarks/compare.py            # full sizes (a few minutes on 2 cores)
    python benchmarks/compare.py --quick    # small sizes, seconds
    python benchmarks/compare.py --markdown results.md --only hessian fit

Every row times aloocv and the peer on the same data in the same process (median of
repeats), and prints their ratio; absolute times are context only (shared machines
are noisy). Ratios < 1 mean aloocv is faster.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable

import numpy as np

import aloocv
from aloocv import _blas, _core

ROWS: list[tuple[str, str, str, str, str, str]] = []


def timeit(f: Callable[[], object], repeat: int) -> tuple[float, object]:
    ts, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = f()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), out


def row(section, what, ours, peer, peer_name, target="", note=""):
    ratio = ours / peer if peer else float("nan")
    ROWS.append(
        (
            section,
            what,
            f"{ours:.4g}",
            f"{peer:.4g}" if peer else "-",
            f"{ratio:.3g}" if peer else "-",
            f"{peer_name}; {target} {note}".strip("; "),
        )
    )
    print(
        f"  {what:<48} aloocv {ours:9.4f}s  {peer_name:<28} {peer if peer else float('nan'):9.4f}s"
        f"  ratio {ratio:7.3g}  {target} {note}",
        flush=True,
    )


def bench_hessian(q: bool, rep: int) -> None:
    from scipy.linalg.blas import dsyrk

    n, p = (20000, 100) if q else (200000, 200)
    print(f"[hessian] n={n} p={p}: X~^T diag(d) X~")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, p))
    d = rng.uniform(0.0, 1.0, n)

    def ours():
        with _blas.single_threaded_blas():
            return _core.hessian(X, d, False, 0)

    t_ours, H = timeit(ours, rep)
    t_np, Hn = timeit(lambda: (X * d[:, None]).T @ X, rep)
    t_syrk, _ = timeit(lambda: dsyrk(1.0, X * np.sqrt(d)[:, None], trans=1), rep)
    _blas.use_blas(False)
    try:
        t_eig, _ = timeit(ours, rep)
    finally:
        _blas.use_blas(True)
    assert np.allclose(H, Hn, rtol=1e-10, atol=1e-8)
    row(
        "hessian",
        f"Hessian n={n} p={p} (scipy BLAS kernels)",
        t_ours,
        t_np,
        "numpy (X*d).T @ X",
        "target <= 1.0",
    )
    row(
        "hessian",
        f"Hessian n={n} p={p} (scipy BLAS kernels)",
        t_ours,
        t_syrk,
        "scipy dsyrk(sqrt(d) X)",
    )
    row(
        "hessian",
        f"Hessian n={n} p={p} (built-in Eigen, no AVX)",
        t_eig,
        t_np,
        "numpy (X*d).T @ X",
        "",
        "(portable fallback)",
    )


def logistic_data(n, p, seed=0, scale=2.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = rng.standard_normal(p) / np.sqrt(p) * scale
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-X @ beta))).astype(np.float64)
    return X, y, beta


def bench_fit(q: bool, rep: int) -> None:
    from sklearn.linear_model import LogisticRegression

    n, p = (20000, 50) if q else (100000, 200)
    print(f"[fit] logistic n={n} p={p}, lambda = 1 (C = 1), tol = 1e-6 on both")
    X, y, _ = logistic_data(n, p)
    pen = aloocv.L2(1.0)
    t_fit, f = timeit(lambda: aloocv.fit(X, y, loss="logistic", penalty=pen, tol=1e-6), rep)
    t_sk, m = timeit(
        lambda: LogisticRegression(C=1.0, solver="newton-cholesky", tol=1e-6).fit(X, y), rep
    )
    diff = float(np.max(np.abs(f.coef_ - m.coef_[0])))
    row(
        "fit",
        "fit, logistic",
        t_fit,
        t_sk,
        "sklearn newton-cholesky",
        "target <= 1.0",
        f"(iterations {f.n_iter_} vs {int(np.max(m.n_iter_))}, max|coef diff| {diff:.1e})",
    )
    t_loo, _ = timeit(lambda: aloocv.loo(X, y, loss="logistic", penalty=pen, tol=1e-6), rep)
    row(
        "fit",
        "loo(method='alo') including its fit",
        t_loo,
        t_fit,
        "aloocv.fit alone",
        "target <= 1.3",
    )


def bench_exact(q: bool, rep: int) -> None:
    from sklearn.linear_model import LogisticRegression

    n, p = (4000, 20) if q else (20000, 50)
    print(f"[exact] logistic n={n} p={p}: ALO vs exact leave-one-out")
    X, y, _ = logistic_data(n, p, seed=1)
    pen = aloocv.L2(1.0)
    t_alo, a = timeit(lambda: aloocv.loo(X, y, loss="logistic", penalty=pen), rep)
    k = 10 if q else 20
    idx = np.random.default_rng(0).choice(n, k, replace=False)
    t0 = time.perf_counter()
    eta = []
    for i in idx:
        keep = np.ones(n, bool)
        keep[i] = False
        m = LogisticRegression(C=1.0, solver="newton-cholesky", tol=1e-8).fit(X[keep], y[keep])
        eta.append(m.decision_function(X[i : i + 1])[0])
    t_bf = (time.perf_counter() - t0) / k * n
    row(
        "exact",
        f"ALO vs brute-force refits ({k} timed, x n)",
        t_alo,
        t_bf,
        "sklearn refits (extrapolated)",
        "target <= 0.001 (>= 1000x)",
    )
    t_ex, e = timeit(lambda: aloocv.loo(X, y, loss="logistic", penalty=pen, method="exact"), 1)
    err = abs(a.mean - e.mean) / e.mean
    row(
        "exact",
        "ALO vs aloocv exact LOO (all n refits)",
        t_alo,
        t_ex,
        "aloocv method='exact'",
        "",
        f"(|ALO - exact| / exact = {err:.1e}; refits agree with sklearn: "
        f"{np.max(np.abs(e.predictions[idx] - np.array(eta))):.1e})",
    )


def bench_enet(q: bool, rep: int) -> None:
    from sklearn.linear_model import ElasticNet

    n, p = (10000, 200) if q else (50000, 500)
    print(f"[enet] squared n={n} p={p}, 10% true support")
    rng = np.random.default_rng(2)
    X = rng.standard_normal((n, p))
    b = np.zeros(p)
    b[: p // 10] = rng.standard_normal(p // 10)
    y = X @ b + rng.standard_normal(n)
    alpha, r = 0.05, 0.5
    pen = aloocv.ElasticNet(n * alpha * r, n * alpha * (1 - r))
    t_sk, m = timeit(lambda: ElasticNet(alpha=alpha, l1_ratio=r, tol=1e-6).fit(X, y), rep)
    t_fit, f = timeit(lambda: aloocv.fit(X, y, loss="squared", penalty=pen, tol=1e-6), rep)
    # ALO alone: the fitted coefficients given, as after any fit
    t_alo, _ = timeit(
        lambda: aloocv.loo(X, y, loss="squared", penalty=pen, coef=f.coef_, intercept=f.intercept_),
        rep,
    )
    row(
        "enet",
        "elastic-net fit",
        t_fit,
        t_sk,
        "sklearn ElasticNet",
        "target <= 1.0",
        f"(active {np.count_nonzero(f.coef_)} vs {np.count_nonzero(m.coef_)}, "
        f"max|coef diff| {np.max(np.abs(f.coef_ - m.coef_)):.1e})",
    )
    row("enet", "ALO on top of the fit (coef= given)", t_alo, t_fit, "aloocv fit", "target <= 0.5")


def bench_sparse(q: bool, rep: int) -> None:
    import resource

    import scipy.sparse as sp

    n, p = (50000, 5000) if q else (200000, 20000)
    print(f"[sparse] logistic n={n} p={p} density 0.1%, elastic net")
    rng = np.random.default_rng(3)
    X = sp.random(n, p, density=0.001, format="csr", random_state=rng)
    X.data = rng.standard_normal(X.nnz)
    b = np.zeros(p)
    b[:200] = rng.standard_normal(200)
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ b)))).astype(float)
    pen = aloocv.ElasticNet(20.0, 1.0)
    t_loo, r = timeit(lambda: aloocv.loo(X, y, loss="logistic", penalty=pen), rep)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    dense_mb = n * p * 8 / 2**20
    row(
        "sparse",
        "sparse logistic ALO incl. fit",
        t_loo,
        0.0,
        "-",
        "target: seconds",
        f"(active {np.count_nonzero(r.fit.coef_)}; peak RSS {rss:.0f} MiB vs dense X "
        f"{dense_mb:.0f} MiB)",
    )


def bench_tuning(q: bool, rep: int) -> None:
    from sklearn.linear_model import LogisticRegressionCV, RidgeCV
    from sklearn.metrics import log_loss

    print("[tuning] the paper's diagonal ridge; CV estimators")
    rng = np.random.default_rng(4)
    n, p = 150, 50
    X = rng.standard_normal((n, p))
    b = np.zeros(p)
    b[:10] = rng.standard_normal(10)
    y = X @ b + rng.standard_normal(n)
    pen = aloocv.L2(np.full(p, 1 / 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_gd, g = timeit(
            lambda: aloocv.tune(
                X, y, loss="squared", penalty=pen, max_iter=800, tol=1e-12, fit_intercept=False
            ),
            rep,
        )
    row(
        "tuning",
        "paper ridge, 50 lambdas, 800 iterations (Armijo)",
        t_gd,
        28.0,
        "paper's reported 28 s",
        "target <= 0.3 s",
        f"(ACV {g.history['acv'][0]:.3f} -> {g.acv:.3f}, {g.n_fits} fits)",
    )
    n, p = (20000, 50) if q else (100000, 200)
    X, yb, beta = logistic_data(n, p, seed=5)
    yc = X @ beta + rng.standard_normal(n) * 3
    alphas = np.logspace(-1, 5, 10)
    t_a, a = timeit(lambda: aloocv.ALORidgeCV(alphas=alphas).fit(X, yc), rep)
    t_r, r = timeit(lambda: RidgeCV(alphas=alphas).fit(X, yc), rep)
    row(
        "tuning",
        f"ALORidgeCV vs RidgeCV, 10 alphas, n={n} p={p}",
        t_a,
        t_r,
        "sklearn RidgeCV",
        "target <= 0.5",
        f"(alpha_ {a.alpha_:.4g} vs {r.alpha_:.4g})",
    )
    Xte, yte, _ = logistic_data(50000, p, seed=6)
    Xte = np.random.default_rng(6).standard_normal((50000, p))
    yte = (np.random.default_rng(7).random(50000) < 1 / (1 + np.exp(-Xte @ beta))).astype(int)
    t_l, lo = timeit(lambda: aloocv.ALOLogisticRegressionCV(Cs=10).fit(X, yb), rep)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_s, sk = timeit(
            lambda: LogisticRegressionCV(Cs=10, cv=5, scoring="neg_log_loss").fit(X, yb), rep
        )
    ll_o = log_loss(yte, lo.predict_proba(Xte))
    ll_s = log_loss(yte, sk.predict_proba(Xte))
    row(
        "tuning",
        f"ALOLogisticRegressionCV vs LogisticRegressionCV(cv=5), n={n} p={p}",
        t_l,
        t_s,
        "sklearn LogisticRegressionCV",
        "target <= 0.15",
        f"(test log-loss ratio {ll_o / ll_s:.4f}; C_ {lo.C_[0]:.3g} vs {sk.C_[0]:.3g})",
    )
    grid = aloocv.tune(
        X, yb, loss="logistic", penalty=aloocv.L2(1.0), method="grid", grid=np.logspace(-4, 4, 10)
    )
    gd = aloocv.tune(X, yb, loss="logistic", penalty=aloocv.L2(100.0), method="gd")
    print(
        f"  gradient search: ACV {gd.acv:.6f} in {gd.n_fits} fits; 10-point grid: "
        f"{grid.acv:.6f} (stderr {grid.stderr:.2e}) in 10 fits"
    )


def bench_kfold(q: bool, rep: int) -> None:
    from sklearn.linear_model import LogisticRegression

    n, p = (10000, 50) if q else (50000, 200)
    print(f"[kfold] logistic n={n} p={p}, 10 folds")
    X, y, _ = logistic_data(n, p, seed=8)
    pen = aloocv.L2(1.0)
    t_a, a = timeit(lambda: aloocv.kfold(X, y, loss="logistic", penalty=pen), rep)
    t_e, e = timeit(lambda: aloocv.kfold(X, y, loss="logistic", penalty=pen, method="exact"), rep)

    def sklearn_refits():
        for k in range(10):
            S = a.folds == k
            LogisticRegression(C=1.0, solver="newton-cholesky", tol=1e-8).fit(X[~S], y[~S])

    t_s, _ = timeit(sklearn_refits, 1)
    err = float(np.max(np.abs(a.fold_means - e.fold_means) / e.fold_means))
    row(
        "kfold",
        "approximate 10-fold (incl. the full fit)",
        t_a,
        t_e,
        "aloocv exact 10-fold (warm)",
        "target <= 0.05",
        f"(max fold-mean error {err:.1e})",
    )
    row(
        "kfold",
        "approximate 10-fold (incl. the full fit)",
        t_a,
        t_s,
        "sklearn: 10 cold refits",
        "target <= 0.05",
    )


def bench_dual(q: bool, rep: int) -> None:
    n, p = (300, 3000) if q else (500, 20000)
    pp = min(p, 2000 if q else 5000)  # the primal at p=20000 takes minutes (p^3 Cholesky)
    print(f"[dual] n={n} p={p}: the n x n dual route (primal measured at p={pp})")
    rng = np.random.default_rng(9)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[:50] = rng.standard_normal(50)
    y = X @ beta + rng.standard_normal(n)
    yb = (rng.random(n) < 1 / (1 + np.exp(-X @ beta / 5))).astype(float)

    def one(loss, yy, Xd, solver):
        return aloocv.loo(Xd, yy, loss=loss, penalty=aloocv.L2(10.0), solver=solver)

    Xs = X[:, :pp]
    for loss, yy in (("squared", y), ("logistic", yb)):
        t_d, _ = timeit(lambda loss=loss, yy=yy: one(loss, yy, X, "dual"), rep)
        t_ds, ds = timeit(lambda loss=loss, yy=yy: one(loss, yy, Xs, "dual"), rep)
        t_ps, ps = timeit(lambda loss=loss, yy=yy: one(loss, yy, Xs, "primal"), 1)
        diff = float(np.max(np.abs(ds.leverages - ps.leverages) / ps.leverages))
        row(
            "dual",
            f"{loss} ALO incl. fit, dual vs primal at p={pp}",
            t_ds,
            t_ps,
            "primal route",
            "target <= 0.1",
            f"(max relative leverage diff {diff:.1e}; dual at p={p}: {t_d:.3f}s)",
        )


def bench_nested(q: bool, rep: int) -> None:
    n, p = (4000, 30) if q else (20000, 100)
    print(f"[nested] logistic n={n} p={p}, 5 outer folds, 8 candidates")
    X, y, _ = logistic_data(n, p, seed=10, scale=3.0)
    spec = {"loss": "logistic", "candidates": list(np.logspace(-2, 3, 8))}
    t_a, a = timeit(lambda: aloocv.nested_cv(spec, X, y, outer_folds=5, inner="alo"), 1)
    t_e, e = timeit(lambda: aloocv.nested_cv(spec, X, y, outer_folds=5, inner=5), 1)
    row(
        "nested",
        "nested CV, ALO inner loop",
        t_a,
        t_e,
        "exact inner 5-fold",
        "target <= 0.1",
        f"(estimates {a.estimate:.5f} vs {e.estimate:.5f}, stderr {e.stderr:.1e})",
    )


SECTIONS = {
    "hessian": bench_hessian,
    "fit": bench_fit,
    "exact": bench_exact,
    "enet": bench_enet,
    "kfold": bench_kfold,
    "dual": bench_dual,
    "nested": bench_nested,
    "sparse": bench_sparse,
    "tuning": bench_tuning,
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, runs in seconds")
    ap.add_argument("--threads", type=int, default=None, help="OpenMP threads (default: all)")
    ap.add_argument("--repeat", type=int, default=None, help="repeats per timing (median)")
    ap.add_argument("--only", nargs="+", choices=list(SECTIONS), help="run these sections")
    ap.add_argument("--markdown", metavar="FILE", help="also write the table as markdown")
    args = ap.parse_args(argv)
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    from threadpoolctl import threadpool_info

    blas = ", ".join(
        f"{i['internal_api']} {i.get('version')} ({i['num_threads']} threads)"
        for i in threadpool_info()
        if i["user_api"] == "blas"
    )
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, OpenMP threads "
        f"{_core.max_threads()}; python {sys.version.split()[0]}; aloocv {aloocv.__version__}; "
        f"BLAS: {blas}"
    )
    rep = args.repeat or (1 if args.quick else 3)
    for name in args.only or list(SECTIONS):
        SECTIONS[name](args.quick, rep)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write("| section | measurement | aloocv [s] | peer [s] | ratio | peer; target |\n")
            fh.write("|---|---|---|---|---|---|\n")
            for r in ROWS:
                fh.write("| " + " | ".join(r) + " |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
