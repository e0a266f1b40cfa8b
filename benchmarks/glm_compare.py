"""The GLM families of issue 10 against scikit-learn and brute-force refits.

1. Fits: gamma, Tweedie (power 1.5 and 3) and Poisson with an offset against
   scikit-learn's regressors (alpha = lam / sum(w)); max |coef difference|.
2. ALO against brute-force leave-one-out refits: relative error of the mean loss.
3. ``ALOPoissonRegressorCV`` against ``GridSearchCV(PoissonRegressor(), cv=5)`` on the
   same alphas: time and held-out mean Poisson deviance.

Run: ``python benchmarks/glm_compare.py [--n 100000 --p 100] [--n-jobs 1]``. Timing
(``benchmarks/_timing.py``): CPU seconds on one thread (``--n-jobs 1``, the default;
BLAS limited too), wall seconds with the load average otherwise; in 3 one call each (the
grid search refits 25 times), ours first.
"""

from __future__ import annotations

import argparse
import warnings
from contextlib import nullcontext

import numpy as np
from _timing import Clock, Stopwatch, clock_for, interleaved, load_line, single_threaded
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import GammaRegressor, PoissonRegressor, TweedieRegressor
from sklearn.metrics import mean_poisson_deviance
from sklearn.model_selection import GridSearchCV

import aloocv

SK_TOL = 1e-12


def data(kind: str, n: int, p: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = rng.standard_normal(p) / np.sqrt(p)
    mu = np.exp(0.3 + X @ beta * 0.5)
    if kind == "gamma":
        return X, rng.gamma(3.0, mu / 3.0), None
    if kind == "tweedie":
        counts = rng.poisson(mu)
        return X, np.array([rng.gamma(2.0, 0.5, k).sum() for k in counts]), None
    t = rng.uniform(0.2, 5.0, n)
    return X, rng.poisson(t * mu).astype(float), t


def fits(n: int = 2000, p: int = 10) -> None:
    print(f"1. fits against scikit-learn (n={n}, p={p}, lam=5): max |coef diff|")
    lam = 5.0
    cases = [
        ("gamma", "gamma", GammaRegressor, {}),
        ("tweedie", aloocv.Tweedie(power=1.5), TweedieRegressor, {"power": 1.5, "link": "log"}),
        ("gamma", aloocv.Tweedie(power=3.0), TweedieRegressor, {"power": 3.0, "link": "log"}),
    ]
    for kind, loss, cls, kw in cases:
        X, y, _ = data(kind, n, p)
        f = aloocv.fit(X, y, loss=loss, penalty=aloocv.L2(lam), tol=1e-12)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            solver = "lbfgs" if kw.get("power", 0) > 2 else "newton-cholesky"
            ref = cls(alpha=lam / n, tol=SK_TOL, max_iter=10000, solver=solver, **kw).fit(X, y)
        d = max(np.abs(f.coef_ - ref.coef_).max(), abs(f.intercept_ - ref.intercept_))
        print(f"   {loss!s:>22}: {d:.2e}  ({cls.__name__}, solver={solver})")
    X, y, t = data("poisson", n, p)
    f = aloocv.fit(X, y, loss="poisson", penalty=aloocv.L2(lam), offset=np.log(t), tol=1e-12)
    ref = PoissonRegressor(
        alpha=lam / t.sum(), tol=SK_TOL, max_iter=10000, solver="newton-cholesky"
    ).fit(X, y / t, sample_weight=t)
    d = max(np.abs(f.coef_ - ref.coef_).max(), abs(f.intercept_ - ref.intercept_))
    print(f"   {'poisson + log(t) offset':>22}: {d:.2e}  (PoissonRegressor on y/t, weights t)")


def alo_vs_refits(n: int = 300, p: int = 10, clock: Clock = "cpu") -> None:
    print(f"2. ALO against brute-force refits (n={n}, p={p}, lam=2): mean loss, rel. error")
    cases = [
        ("gamma", "gamma"),
        ("tweedie", aloocv.Tweedie(power=1.5)),
        ("gamma", aloocv.Tweedie(power=3.0)),
        ("poisson", "poisson"),
    ]
    for kind, loss in cases:
        X, y, t = data(kind, n, p, seed=1)
        off = None if t is None else np.log(t)
        L = aloocv.losses.get_loss(loss)
        sw_alo, sw_ref = Stopwatch(clock), Stopwatch(clock)
        with sw_alo:
            alo = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(2.0), offset=off)
        ref = np.empty(n)
        with sw_ref:
            for i in range(n):
                keep = np.arange(n) != i
                fi = aloocv.fit(
                    X[keep],
                    y[keep],
                    loss=loss,
                    penalty=aloocv.L2(2.0),
                    tol=1e-10,
                    offset=None if off is None else off[keep],
                )
                eta = fi.decision_function(X[i : i + 1]) + (0.0 if off is None else off[i])
                ref[i] = L.value(y[i : i + 1], eta)[0]
        t_alo, t_ref = sw_alo.seconds, sw_ref.seconds
        rel = abs(alo.mean - ref.mean()) / abs(ref.mean())
        name = str(loss) + (" + offset" if off is not None else "")
        print(
            f"   {name:>22}: ALO {alo.mean:.6f}  refits {ref.mean():.6f}  rel {rel:.2e}  "
            f"({1e3 * t_alo:.1f} ms vs {t_ref:.2f} s)"
        )


def cv_vs_gridsearch(n: int, p: int, n_jobs: int | None) -> None:
    print(f"3. ALOPoissonRegressorCV vs GridSearchCV(PoissonRegressor(), cv=5), n={n}, p={p}")
    rng = np.random.default_rng(2)
    X = rng.standard_normal((2 * n, p))
    beta = rng.standard_normal(p) * 0.3 / np.sqrt(p) * (rng.random(p) < 0.3)
    y = rng.poisson(np.exp(0.2 + X @ beta)).astype(float)
    Xtr, ytr, Xte, yte = X[:n], y[:n], X[n:], y[n:]
    alphas = np.logspace(-5, -1, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        T = interleaved(
            {
                "ours": lambda: aloocv.ALOPoissonRegressorCV(alphas=alphas, n_jobs=n_jobs).fit(
                    Xtr, ytr
                ),
                "gs": lambda: GridSearchCV(
                    PoissonRegressor(),
                    {"alpha": list(alphas)},
                    cv=5,
                    scoring="neg_mean_poisson_deviance",
                    n_jobs=n_jobs,
                ).fit(Xtr, ytr),
            },
            1,
            clock=clock_for(n_jobs),
            warmup=False,
        )
    ours, gs = T["ours"].result, T["gs"].result
    t_ours, t_gs = T["ours"].seconds, T["gs"].seconds
    dev_ours = mean_poisson_deviance(yte, ours.predict(Xte))
    dev_gs = mean_poisson_deviance(yte, gs.predict(Xte))
    print(f"   aloocv: {t_ours:7.2f} s  alpha {ours.alpha_:.0e}  held-out deviance {dev_ours:.6f}")
    print(
        f"   GridSearchCV: {t_gs:7.2f} s  alpha {gs.best_params_['alpha']:.0e}  held-out "
        f"deviance {dev_gs:.6f}"
    )
    print(f"   time ratio aloocv / GridSearchCV: {t_ours / t_gs:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--p", type=int, default=100)
    ap.add_argument(
        "--n-jobs", type=int, default=1, help="default 1 (CPU seconds); 0: all cores (wall)"
    )
    ap.add_argument("--skip-cv", action="store_true")
    args = ap.parse_args()
    n_jobs = args.n_jobs or None
    clock = clock_for(n_jobs)
    print(f"{clock} seconds" + (f"; {load_line()}" if clock == "wall" else ""))
    with single_threaded() if clock == "cpu" else nullcontext():
        fits()
        alo_vs_refits(clock=clock)
        if not args.skip_cv:
            cv_vs_gridsearch(args.n, args.p, n_jobs)


if __name__ == "__main__":
    main()
