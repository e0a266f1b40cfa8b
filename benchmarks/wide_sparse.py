"""Wide and sparse logistic regression (issue 27): aloocv's matrix-free route against
scikit-learn, side by side, one thread.

    python benchmarks/wide_sparse.py --quick                # small cases (~10 min)
    python benchmarks/wide_sparse.py --cases sparse-target  # the target case
    python benchmarks/wide_sparse.py --full --json out.json # every case

Cases (each trained on n rows and scored on n/4 more held-out rows from the same
generator, seeded):

* ``sparse-*``: text-like CSR. Tokens drawn with Zipf column frequencies (exponent 1.1,
  columns in a random order), term counts to ``1 + log(tf)`` times an idf, rows
  L2-normalized; the response is logistic in a sparse true coefficient vector (200
  columns, drawn among the columns that occur in at least 0.1% of the rows), intercept set
  for about 35% positives. ``sparse-2k-20k`` (n=2000, p=20000) and ``sparse-20k-5k``
  (n=20000, p=5000) with 30 nonzeros a row; ``sparse-target`` (n=20000, p=100000) with 50.
* ``onehot``: 6 categorical columns of 1000-20000 levels, Zipf level frequencies, one-hot
  (CSR), an effect per level plus an intercept (about 35% positives).
* ``dense-wide``: n=2000, p=5000, AR(1) columns (rho 0.8) with log-normal scales
  (sigma 1), 50 true coefficients.
* ``dense-tall``: isotropic Gaussian n=100000, p=200 (``--full`` only).

Measured, CPU seconds (``time.process_time``) under ``threadpool_limits(1)`` and
``n_jobs=1``, min of interleaved repeats (3; one for a call over 20 s on its first run):

1. At C = 1 (lambda = 1: aloocv's objective ``sum_i l_i + lambda/2 ||theta||^2`` is
   scikit-learn's with ``C = 1/lambda``): ``LogisticRegression(solver="lbfgs")`` (tol
   1e-4, max_iter 1000), ``aloocv.fit`` with ``solver="matrix_free"`` and ``"auto"``, and
   ``aloocv.loo`` (auto; the route taken: matrix-free when ``res.randomized`` is set).
   Objective of each fit minus scikit-learn's, held-out log-loss, ratios to the
   scikit-learn fit.
2. ``LogisticRegressionCV(Cs=10, cv=5, scoring="neg_log_loss")`` with lbfgs and saga
   against ``aloocv.ALOLogisticRegressionCV(Cs=10)``: CPU, ratio to the fastest
   scikit-learn solver, chosen C, held-out log-loss. saga runs in a child process with a
   time limit (``--saga-limit``) and is reported as skipped past it. Target (issue 27):
   ALOLogisticRegressionCV at most 1x the fastest solver, held-out log-loss within 0.5%.
3. ALO against exact leave-one-out on sparse cases at C = 1: ``LOOResult.certify(30)``
   (30 exact Newton-CG refits, a census of the largest error indicators and importance
   draws, and an interval for the error of the mean), plus 30 uniformly drawn samples
   refitted by scikit-learn (lbfgs, tol 1e-10) for an independent check (cases with n <=
   ``--sk-refit-max-n`` rows only).
4. The randomization: the matrix-free ALO mean with the jackknife (ours) against the
   plain Hutchinson plug-in from the same probes ("RandALO-style plug-in", no debiasing;
   the ``randalo`` package needs torch and is not installed), at 64 probes and at 16, each
   minus the mean from the exact-refit certificate.
5. Peak memory (``--memory``, on by default for ``sparse-target``): each aloocv call (and
   the lbfgs LogisticRegressionCV) in a fresh child process (this script with
   ``--child``), ``ru_maxrss`` of the child (``getrusage(RUSAGE_CHILDREN)`` of a parent
   that ran only that child), and of a child that only builds the data. Target:
   ALOLogisticRegressionCV at most 1.5 GB on ``sparse-target``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

import aloocv

#: Zipf exponent of the column (and level) frequencies.
ZIPF = 1.1
#: Share of positives the intercept of a generated response aims at.
POSITIVES = 0.35
#: A call slower than this on its first run is not repeated.
ONE_REPEAT_S = 20.0
LAM = 1.0
Cs = 10


# ----------------------------------------------------------------------------- data
@dataclass
class Data:
    name: str
    X: Any
    y: np.ndarray
    Xte: Any
    yte: np.ndarray
    note: str

    @property
    def sparse(self) -> bool:
        return sp.issparse(self.X)


def _zipf_probs(m: int, rng: np.random.Generator) -> np.ndarray:
    """Zipf frequencies over m items in a random order."""
    pr = np.arange(1, m + 1, dtype=np.float64) ** -ZIPF
    return rng.permutation(pr / pr.sum())


def _sigmoid(t: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * t))


def _response(eta: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """0/1 draws from a logistic model with linear predictor eta plus the intercept that
    gives about POSITIVES positives."""
    lo, hi = -20.0, 20.0
    for _ in range(60):  # bisection on the intercept
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _sigmoid(eta + mid).mean() < POSITIVES else (lo, mid)
    return (rng.random(eta.size) < _sigmoid(eta + lo)).astype(np.float64)


def _split(name: str, X: Any, y: np.ndarray, n: int, note: str) -> Data:
    return Data(name, X[:n], y[:n], X[n:], y[n:], note)


def text_like(name: str, n: int, p: int, nnz_row: int, seed: int) -> Data:
    """TF-IDF-like CSR: n train and n/4 held-out rows, about nnz_row distinct columns a
    row."""
    rng = np.random.default_rng(seed)
    m = n + n // 4
    prob = _zipf_probs(p, rng)
    # tokens a row for about nnz_row distinct columns (bisection on 400 rows)
    sample = rng.choice(p, size=(400, 20 * nnz_row), p=prob)
    lo, hi = nnz_row, 20 * nnz_row
    while hi - lo > 1:
        mid = (lo + hi) // 2
        distinct = np.mean([np.unique(r[:mid]).size for r in sample])
        lo, hi = (mid, hi) if distinct < nnz_row else (lo, mid)
    tokens = hi
    cols = rng.choice(p, size=m * tokens, p=prob)
    rows = np.repeat(np.arange(m), tokens)
    X = sp.csr_matrix((np.ones(cols.size), (rows, cols)), shape=(m, p))
    X.sum_duplicates()
    df = np.bincount(X.indices, minlength=p)
    idf = np.log((1.0 + m) / (1.0 + df)) + 1.0
    X.data = (1.0 + np.log(X.data)) * idf[X.indices]
    norms = np.sqrt(np.add.reduceat(X.data**2, X.indptr[:-1]))
    X.data /= np.repeat(np.maximum(norms, 1e-12), np.diff(X.indptr))
    # sparse truth among columns in at least 0.1% of the rows
    pool = np.flatnonzero(df >= max(2, m // 1000))
    support = rng.choice(pool, size=min(200, pool.size), replace=False)
    w = np.zeros(p)
    w[support] = rng.normal(0.0, 1.0, support.size)
    eta = X @ w
    eta *= 2.0 / max(eta.std(), 1e-12)
    y = _response(eta, rng)
    note = f"text-like, Zipf {ZIPF}, {X.nnz / m:.1f} nnz/row"
    return _split(name, X, y, n, note)


def one_hot(name: str, n: int, levels: tuple[int, ...], seed: int) -> Data:
    """One-hot CSR of categorical columns with Zipf level frequencies: n train and n/4
    held-out rows."""
    rng = np.random.default_rng(seed)
    m = n + n // 4
    codes, eta, offset = [], np.zeros(m), 0
    for L in levels:
        c = rng.choice(L, size=m, p=_zipf_probs(L, rng))
        eta += rng.normal(0.0, 0.7, L)[c]
        codes.append(c + offset)
        offset += L
    cols = np.stack(codes, axis=1).ravel()
    X = sp.csr_matrix(
        (np.ones(cols.size), cols, np.arange(0, cols.size + 1, len(levels))), shape=(m, offset)
    )
    y = _response(eta, rng)
    used = np.unique(X.indices).size
    note = f"one-hot, {len(levels)} columns of {min(levels)}-{max(levels)} levels ({used} seen)"
    return _split(name, X, y, n, note)


def dense_wide(name: str, n: int, p: int, seed: int) -> Data:
    """AR(1) columns (rho 0.8) with log-normal scales, 50 true coefficients."""
    rng = np.random.default_rng(seed)
    m = n + n // 4
    rho = 0.8
    X = rng.standard_normal((m, p))
    for j in range(1, p):
        X[:, j] = rho * X[:, j - 1] + np.sqrt(1.0 - rho**2) * X[:, j]
    scale = np.exp(rng.normal(0.0, 1.0, p))
    w = np.zeros(p)
    w[rng.choice(p, 50, replace=False)] = rng.normal(0.0, 1.0, 50)
    eta = X @ w
    eta *= 2.0 / eta.std()
    X *= scale
    y = _response(eta, rng)
    return _split(name, X, y, n, "dense, AR(1) rho 0.8, log-normal column scales")


def dense_tall(name: str, n: int, p: int, seed: int) -> Data:
    rng = np.random.default_rng(seed)
    m = n + n // 4
    X = rng.standard_normal((m, p))
    y = _response(X @ (rng.standard_normal(p) / np.sqrt(p)) * 2.0, rng)
    return _split(name, X, y, n, "dense, isotropic Gaussian")


CASES: dict[str, Callable[[], Data]] = {
    "sparse-2k-20k": lambda: text_like("sparse-2k-20k", 2000, 20000, 30, 1),
    "sparse-20k-5k": lambda: text_like("sparse-20k-5k", 20000, 5000, 30, 2),
    "onehot": lambda: one_hot("onehot", 20000, (1000, 2000, 5000, 5000, 10000, 20000), 4),
    "dense-wide": lambda: dense_wide("dense-wide", 2000, 5000, 5),
    "sparse-target": lambda: text_like("sparse-target", 20000, 100000, 50, 3),
    "dense-tall": lambda: dense_tall("dense-tall", 100000, 200, 6),
}
QUICK = ["sparse-2k-20k", "sparse-20k-5k", "onehot", "dense-wide"]


# ----------------------------------------------------------------------------- helpers
def _cpu(f: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.process_time()
    out = f()
    return time.process_time() - t0, out


def _interleaved(calls: dict[str, Callable[[], Any]], repeat: int) -> tuple[dict, dict, dict]:
    """Min CPU seconds of interleaved repeats (a call over ONE_REPEAT_S on its first run is
    not repeated), the last output and the distinct warnings of each call."""
    times: dict[str, list[float]] = {k: [] for k in calls}
    outs: dict[str, Any] = {}
    warns: dict[str, list[str]] = {k: [] for k in calls}
    for r in range(repeat):
        for k, f in calls.items():
            if r > 0 and times[k][0] > ONE_REPEAT_S:
                continue
            with warnings.catch_warnings(record=True) as rec:
                warnings.simplefilter("always")
                t, outs[k] = _cpu(f)
            times[k].append(t)
            for w in rec:
                if issubclass(w.category, FutureWarning):  # scikit-learn's API notices
                    continue
                msg = f"{w.category.__name__}: {' '.join(str(w.message).split())[:160]}"
                if msg not in warns[k]:
                    warns[k].append(msg)
    return {k: min(v) for k, v in times.items()}, outs, warns


def _log_loss(y: np.ndarray, eta: np.ndarray) -> float:
    return float(np.mean(np.logaddexp(0.0, eta) - y * eta))


def _objective(d: Data, coef: np.ndarray, intercept: float, lam: float) -> float:
    """``sum_i l_i + lam/2 ||coef||^2`` on the training rows."""
    eta = np.asarray(d.X @ coef).ravel() + intercept
    return float(np.sum(np.logaddexp(0.0, eta) - d.y * eta) + 0.5 * lam * coef @ coef)


def _coef(m: Any) -> tuple[np.ndarray, float]:
    """(coef, intercept) of a scikit-learn or aloocv fit."""
    if hasattr(m, "objective_"):
        return np.asarray(m.coef_, dtype=np.float64), float(m.intercept_)
    return np.asarray(m.coef_[0], dtype=np.float64), float(m.intercept_[0])


def _heldout(d: Data, m: Any) -> float:
    coef, b = _coef(m)
    return _log_loss(d.yte, np.asarray(d.Xte @ coef).ravel() + b)


def _routes(d: Data) -> dict[str, Any]:
    """The routes ``solver="auto"`` takes for fit and loo at LAM, with the cost model."""
    from aloocv.backends import route
    from aloocv.problem import Problem

    pb = Problem.build(d.X, d.y, penalty=aloocv.L2(LAM), n_jobs=1)
    return {
        "fit": route.choose(pb, "fit").solver,
        "costs": {k: float(v) for k, v in route.costs(pb).items()},
    }


def _sklearn_lr(C: float, tol: float = 1e-4) -> Any:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=C, solver="lbfgs", tol=tol, max_iter=1000)


def _lrcv(solver: str) -> Any:
    from sklearn.linear_model import LogisticRegressionCV

    return LogisticRegressionCV(Cs=Cs, cv=5, solver=solver, scoring="neg_log_loss", n_jobs=1)


def _alo_cv() -> Any:
    return aloocv.ALOLogisticRegressionCV(Cs=Cs, n_jobs=1)


def _fit_kw() -> dict[str, Any]:
    return {"loss": "logistic", "penalty": aloocv.L2(LAM), "n_jobs": 1}


# ----------------------------------------------------------------------------- child runs
CHILD_CALLS: dict[str, Callable[[Data], Any]] = {
    "data": lambda d: None,
    "fit matrix_free": lambda d: aloocv.fit(d.X, d.y, solver="matrix_free", **_fit_kw()),
    "fit auto": lambda d: aloocv.fit(d.X, d.y, **_fit_kw()),
    "loo auto": lambda d: aloocv.loo(d.X, d.y, **_fit_kw()),
    "ALOLogisticRegressionCV": lambda d: _alo_cv().fit(d.X, d.y),
    "LRCV lbfgs": lambda d: _lrcv("lbfgs").fit(d.X, d.y),
    "LRCV saga": lambda d: _lrcv("saga").fit(d.X, d.y),
}


def _child(case: str, call: str) -> None:
    """One call in this process: prints a JSON line (CPU seconds, ru_maxrss in MB, and the
    chosen C and held-out log-loss of a CV estimator)."""
    d = CASES[case]()
    with threadpool_limits(1), warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        t, m = _cpu(lambda: CHILD_CALLS[call](d))
    msgs = {
        f"{w.category.__name__}: {' '.join(str(w.message).split())[:160]}"
        for w in rec
        if not issubclass(w.category, FutureWarning)
    }
    out: dict[str, Any] = {"cpu": t, "warnings": sorted(msgs)}
    if hasattr(m, "C_"):
        out["C"] = float(np.ravel(m.C_)[0])
        out["heldout"] = _heldout(d, m)
    tr = getattr(m, "tune_result_", None)
    for attr in ("path_n_iter", "path_matvec_passes"):
        if tr is not None and getattr(tr, attr, None) is not None:
            out[attr] = np.asarray(getattr(tr, attr)).tolist()
    out["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps(out), flush=True)


def _run_child(case: str, call: str, limit: float) -> dict[str, Any]:
    """``_child`` in a fresh process; past ``limit`` seconds (wall) it is stopped and
    reported as skipped, with the peak RSS it had reached (VmHWM, polled)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", case, call]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0, hwm = time.perf_counter(), 0.0
    while p.poll() is None:
        hwm = max(hwm, _vm_hwm_mb(p.pid))
        if time.perf_counter() - t0 > limit:
            p.kill()
            p.wait()
            return {"skipped": f"over {limit:.0f} s wall, stopped", "maxrss_mb_so_far": hwm}
        time.sleep(0.5)
    out, err = p.communicate()
    if p.returncode != 0:
        return {"skipped": f"failed: {err.strip().splitlines()[-1:]}"}
    return json.loads(out.strip().splitlines()[-1])


def _vm_hwm_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return float(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


# ----------------------------------------------------------------------------- sections
def bench_fit(d: Data, repeat: int) -> dict[str, Any]:
    """Section 1: one fit and one leave-one-out at C = 1/LAM."""
    X, y = d.X, d.y
    calls = {
        "sklearn lbfgs": lambda: _sklearn_lr(1.0 / LAM).fit(X, y),
        "fit matrix_free": lambda: aloocv.fit(X, y, solver="matrix_free", **_fit_kw()),
        "fit auto": lambda: aloocv.fit(X, y, **_fit_kw()),
        "loo auto": lambda: aloocv.loo(X, y, **_fit_kw()),
    }
    t, outs, warns = _interleaved(calls, repeat)
    sk, res = outs["sklearn lbfgs"], outs["loo auto"]
    obj_sk = _objective(d, *_coef(sk), LAM)
    row: dict[str, Any] = {"cpu": t, "warnings": warns, "routes": _routes(d)}
    row["sklearn_n_iter"] = int(np.ravel(sk.n_iter_)[0])
    row["objective_sklearn"] = obj_sk
    for k in ("fit matrix_free", "fit auto"):
        f = outs[k]
        row[k] = {
            "objective_minus_sklearn": _objective(d, *_coef(f), LAM) - obj_sk,
            "n_iter": int(f.n_iter_),
            "converged": bool(f.converged_),
            "heldout": _heldout(d, f),
        }
    row["heldout_sklearn"] = _heldout(d, sk)
    rz = res.randomized
    row["loo"] = {
        "route": "matrix_free" if rz is not None else "exact leverages",
        "mean": float(res.mean),
        "stderr": float(res.stderr),
        "randomized": None
        if rz is None
        else {
            "n_probes": rz.n_probes,
            "estimator": rz.estimator,
            "mean_stderr": rz.mean_stderr,
            "bias_correction": rz.bias_correction,
            "cg_iterations": rz.cg_iterations,
            "converged": rz.converged,
        },
        "self_check": None
        if res.error_estimate is None
        else {
            "relative_error": float(res.error_estimate.relative_error),
            "n_refits": int(res.error_estimate.n_refits),
        },
    }
    row["_res"] = res
    return row


def bench_cv(
    d: Data, repeat: int, saga_limit: float, children: dict | None = None
) -> dict[str, Any]:
    """Section 2: LogisticRegressionCV against ALOLogisticRegressionCV (taken from the
    child runs of section 5 where given: one run each)."""
    X, y = d.X, d.y
    row: dict[str, Any] = {}
    calls = {
        "ALOLogisticRegressionCV": lambda: _alo_cv().fit(X, y),
        "LRCV lbfgs": lambda: _lrcv("lbfgs").fit(X, y),
    }
    if children is not None:
        for k in calls:
            row[k] = children[k]
        calls = {}
    t, outs, warns = _interleaved(calls, repeat)
    for k, m in outs.items():
        row[k] = {
            "cpu": t[k],
            "C": float(np.ravel(m.C_)[0]),
            "heldout": _heldout(d, m),
            "warnings": warns[k],
        }
    saga = _run_child(d.name, "LRCV saga", saga_limit)
    row["LRCV saga"] = saga
    return row


def bench_accuracy(d: Data, res: Any, sk_refits: bool, n: int = 30) -> dict[str, Any]:
    """Section 3: ALO (auto route) against exact leave-one-out on sampled refits."""
    out: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, c = _cpu(lambda: res.certify(n_samples=n, random_state=0))
    out["certify"] = {
        "cpu": t,
        "median_abs_error": float(c.median_abs_error),
        "max_abs_error": float(c.max_abs_error),
        "mean_error": float(c.mean_error),
        "ci": [c.ci_low, c.ci_high],
        "relative_error": float(c.relative_error),
        "exact_mean": float(c.exact_mean),
        "approx_mean": float(c.approx_mean),
    }
    if sk_refits:
        rng = np.random.default_rng(0)
        idx = np.sort(rng.choice(d.y.size, size=n, replace=False))
        exact = np.empty(n)
        keep = np.ones(d.y.size, dtype=bool)

        def refits() -> None:
            for k, i in enumerate(idx):
                keep[:] = True
                keep[i] = False
                m = _sklearn_lr(1.0 / LAM, tol=1e-10).fit(d.X[keep], d.y[keep])
                coef, b = _coef(m)
                eta = float(np.ravel(d.X[i] @ coef)[0]) + b
                exact[k] = _log_loss(d.y[i : i + 1], np.array([eta]))

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t, _ = _cpu(refits)
        err = res.losses[idx] - exact
        out["sklearn_refits"] = {
            "cpu": t,
            "median_abs_error": float(np.median(np.abs(err))),
            "max_abs_error": float(np.max(np.abs(err))),
            "mean_error": float(err.mean()),
            "mean_error_se": float(err.std(ddof=1) / np.sqrt(n)),
            "exact_mean_of_sample": float(exact.mean()),
        }
    return out


def bench_randomization(d: Data, res: Any, exact_mean: float | None) -> dict[str, Any]:
    """Section 4: the jackknifed randomized ALO mean (ours) against the plain Hutchinson
    plug-in from the same probes, at 8 and 16 probes; and, where an exact-leverage route
    is affordable, against ALO with exact leverages."""
    from aloocv.backends.memory import matrix_free as mf
    from aloocv.problem import Problem

    pb = Problem.build(d.X, d.y, penalty=aloocv.L2(LAM), n_jobs=1)
    beta = np.concatenate([[res.fit.intercept_], res.fit.coef_])
    out: dict[str, Any] = {"exact_loo_mean_est": exact_mean}
    r = mf.leverages(mf.point(pb, beta), 2 * mf.N_PROBES).res  # one probe per group
    for groups in (mf.N_PROBES, 2 * mf.N_PROBES):
        plain = np.asarray(r.plain)[:, :groups]
        control = np.asarray(r.control)[:, :groups] + np.asarray(r.diag0)[:, None]
        row = {}
        for kind, gr in (("plain", plain), ("control", control)):
            est, se = mf._jackknife(pb, r.eta, r.g, r.d, gr)
            row[kind] = {
                # the plug-in mean: the jackknife's plus what it removed
                "plug_in": float(est.losses.mean() + est.info.bias_correction),
                "jackknife": float(est.losses.mean()),
                "jackknife_se": se,
            }
        out[f"{groups} probes"] = row
    if d.X.shape[0] <= 2000 or d.X.shape[1] <= 5000:  # exact leverages affordable
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            solver = "dual" if d.X.shape[0] < d.X.shape[1] else "primal"
            t, ex = _cpu(lambda: aloocv.loo(d.X, d.y, solver=solver, **_fit_kw()))
        out["exact_leverages"] = {"solver": solver, "cpu": t, "mean": float(ex.mean)}
    return out


def bench_memory(d: Data, limit: float) -> dict[str, Any]:
    """Section 5: CPU and peak RSS of each call in a fresh child process."""
    calls = [
        "data",
        "fit matrix_free",
        "fit auto",
        "loo auto",
        "ALOLogisticRegressionCV",
        "LRCV lbfgs",
    ]
    return {c: _run_child(d.name, c, limit) for c in calls}


# ----------------------------------------------------------------------------- tables
def _f(x: Any, fmt: str = ".3g") -> str:
    return "-" if x is None else format(x, fmt)


def tables(results: dict[str, dict[str, Any]]) -> str:
    """The markdown tables of a run."""
    L: list[str] = []
    L.append("Data:\n")
    L.append("| case | n train x p | held-out rows | nnz/row | positives | generator |")
    L.append("| --- | --- | --- | --- | --- | --- |")
    for name, r in results.items():
        i = r["info"]
        L.append(
            f"| {name} | {i['n']} x {i['p']} | {i['n_test']} | {_f(i['nnz_row'], '.1f')} | "
            f"{100 * i['positives']:.0f}% | {i['note']} |"
        )
    L.append(f"\n1. One fit and one ALO at C = {1 / LAM:g} (CPU s, one thread; ratio to the")
    L.append("scikit-learn lbfgs fit in brackets).\n")
    L.append(
        "| case | sklearn lbfgs fit (iters) | fit matrix_free (iters) | fit auto [route] "
        "| loo auto [route] | obj. mf - sklearn | obj. auto - sklearn | held-out "
        "sklearn / mf |"
    )
    L.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, r in results.items():
        f = r.get("fit")
        if f is None:
            continue
        t = f["cpu"]
        s = t["sklearn lbfgs"]
        mf, au, lo = f["fit matrix_free"], f["fit auto"], f["loo"]
        L.append(
            f"| {name} | {s:.3f} ({f['sklearn_n_iter']}) | {t['fit matrix_free']:.3f} "
            f"[{t['fit matrix_free'] / s:.2f}x] ({mf['n_iter']}) | {t['fit auto']:.3f} "
            f"[{t['fit auto'] / s:.2f}x] [{f['routes']['fit']}] | {t['loo auto']:.2f} "
            f"[{t['loo auto'] / s:.1f}x] [{lo['route']}] | {mf['objective_minus_sklearn']:+.2e} "
            f"| {au['objective_minus_sklearn']:+.2e} | {f['heldout_sklearn']:.5f} / "
            f"{mf['heldout']:.5f} |"
        )
    L.append("\nALO at C = 1: the estimate and its randomization.\n")
    L.append(
        "| case | ALO mean | route | probes | estimator | randomization s.e. | jackknife "
        "bias removed | CG iterations | self-check (refits) |"
    )
    L.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, r in results.items():
        f = r.get("fit")
        if f is None:
            continue
        lo = f["loo"]
        z = lo["randomized"] or {}
        sc = lo["self_check"]
        chk = "-" if sc is None else f"{100 * sc['relative_error']:+.2f}% ({sc['n_refits']})"
        L.append(
            f"| {name} | {lo['mean']:.5f} | {lo['route']} | {z.get('n_probes', '-')} | "
            f"{z.get('estimator', '-')} | {_f(z.get('mean_stderr'), '.2e')} | "
            f"{_f(z.get('bias_correction'), '+.2e')} | {z.get('cg_iterations', '-')} | {chk} |"
        )
    L.append("\n2. Tuning over Cs=10 (logspace(-4, 4, 10)), CPU s; ratio = ALO CV / fastest ")
    L.append("LogisticRegressionCV(cv=5) solver; held-out log-loss relative to that solver's.\n")
    L.append(
        "| case | ALOLogisticRegressionCV | LRCV lbfgs | LRCV saga | ratio (target <= 1) "
        "| C_ ALO / lbfgs / saga | held-out ALO / lbfgs / saga | held-out ALO vs "
        "fastest (target <= +0.5%) |"
    )
    L.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, r in results.items():
        c = r.get("cv")
        if c is None:
            continue
        a, lb, sg = c["ALOLogisticRegressionCV"], c["LRCV lbfgs"], c["LRCV saga"]
        peers = {k: v for k, v in (("lbfgs", lb), ("saga", sg)) if "cpu" in v}
        fast = min(peers, key=lambda k: peers[k]["cpu"]) if peers else None

        def cell(v: dict) -> str:
            return v.get("skipped") or f"{v['cpu']:.2f}"

        ratio = ll = "-"
        if fast is not None and "cpu" in a:
            ratio = f"{a['cpu'] / peers[fast]['cpu']:.2f} ({fast})"
            ll = f"{100 * (a['heldout'] / peers[fast]['heldout'] - 1):+.2f}%"
        elif fast is not None:
            ratio = f"> {a['skipped'].split()[1]} s wall / {peers[fast]['cpu']:.2f} s ({fast})"
        L.append(
            f"| {name} | {cell(a)} | {cell(lb)} | {cell(sg)} | {ratio} | {_f(a.get('C'))} / "
            f"{_f(lb.get('C'))} / {_f(sg.get('C'))} | {_f(a.get('heldout'), '.5f')} / "
            f"{_f(lb.get('heldout'), '.5f')} / {_f(sg.get('heldout'), '.5f')} | {ll} |"
        )
    L.append("\n3. ALO (auto route, C = 1) against exact leave-one-out on 30 refitted samples.\n")
    L.append(
        "| case | certify(30): median / max abs error | error of the mean [95% CI] | "
        "relative | CPU s | sklearn refits (30 uniform): median / max abs error | mean "
        "error +- s.e. | CPU s |"
    )
    L.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, r in results.items():
        a = r.get("accuracy")
        if a is None:
            continue
        c = a["certify"]
        lo, hi = c["ci"]
        ci = "-" if lo is None else f"[{lo:+.2e}, {hi:+.2e}]"
        s = a.get("sklearn_refits")
        sk = (
            "- | - | -"
            if s is None
            else f"{s['median_abs_error']:.2e} / {s['max_abs_error']:.2e} | "
            f"{s['mean_error']:+.2e} +- {s['mean_error_se']:.1e} | {s['cpu']:.1f}"
        )
        L.append(
            f"| {name} | {c['median_abs_error']:.2e} / {c['max_abs_error']:.2e} | "
            f"{c['mean_error']:+.2e} {ci} | {100 * c['relative_error']:+.2f}% | "
            f"{c['cpu']:.1f} | {sk} |"
        )
    L.append("\n4. Randomized leverages: the plain Hutchinson plug-in (RandALO-style, no")
    L.append("debiasing) against the jackknife (ours), same probes; minus the reference (ALO")
    L.append("with exact leverages where affordable, else certify's exact-LOO estimate).\n")
    L.append(
        "| case | probes | reference | plain plug-in | plain jackknife (s.e.) | control "
        "plug-in | control jackknife (s.e.) |"
    )
    L.append("| --- | --- | --- | --- | --- | --- | --- |")
    for name, r in results.items():
        z = r.get("randomization")
        if z is None:
            continue
        ex = z.get("exact_leverages")
        ref, what = (
            (ex["mean"], "ALO exact h")
            if ex is not None
            else (z["exact_loo_mean_est"], "exact LOO (est.)")
        )
        for k, v in z.items():
            if not k.endswith("probes"):
                continue
            p, c = v["plain"], v["control"]
            L.append(
                f"| {name} | {k.split()[0]} | {ref:.5f} ({what}) | {p['plug_in'] - ref:+.2e} | "
                f"{p['jackknife'] - ref:+.2e} ({p['jackknife_se']:.1e}) | "
                f"{c['plug_in'] - ref:+.2e} | {c['jackknife'] - ref:+.2e} "
                f"({c['jackknife_se']:.1e}) |"
            )
    mem = {k: r["memory"] for k, r in results.items() if r.get("memory")}
    if mem:
        L.append("\n5. Each call in a fresh child process: CPU s and peak RSS (ru_maxrss, MB;")
        L.append("'data' builds the data only). Target: ALOLogisticRegressionCV <= 1536 MB.\n")
        L.append("| case | call | CPU s | peak RSS MB | over 'data' MB |")
        L.append("| --- | --- | --- | --- | --- |")
        for name, m in mem.items():
            base = m["data"].get("maxrss_mb", 0.0)
            for call, v in m.items():
                if "skipped" in v:
                    hwm = v.get("maxrss_mb_so_far")
                    L.append(
                        f"| {name} | {call} | {v['skipped']} | {_f(hwm, '.0f')} (when stopped)"
                        f" | {_f(None if hwm is None else hwm - base, '.0f')} |"
                    )
                    continue
                L.append(
                    f"| {name} | {call} | {v['cpu']:.2f} | {v['maxrss_mb']:.0f} | "
                    f"{v['maxrss_mb'] - base:.0f} |"
                )
    warn = [
        (name, k, w)
        for name, r in results.items()
        for sec in ("fit", "cv")
        for k, w in _warnings_of(r.get(sec))
    ]
    if warn:
        L.append("\nWarnings raised (distinct messages):\n")
        for name, k, w in warn:
            L.append(f"- {name}, {k}: {w}")
    return "\n".join(L)


def _warnings_of(sec: dict | None) -> list[tuple[str, str]]:
    if not sec:
        return []
    if "warnings" in sec and isinstance(sec["warnings"], dict):
        return [(k, w) for k, ws in sec["warnings"].items() for w in ws]
    return [(k, w) for k, v in sec.items() if isinstance(v, dict) for w in v.get("warnings", [])]


# ----------------------------------------------------------------------------- main
def run_case(name: str, a: argparse.Namespace) -> dict[str, Any]:
    d = CASES[name]()
    n, p = d.X.shape
    out: dict[str, Any] = {
        "info": {
            "n": n,
            "p": p,
            "n_test": int(d.yte.size),
            "nnz_row": d.X.nnz / n if d.sparse else None,
            "positives": float(d.y.mean()),
            "note": d.note,
        }
    }
    memory = a.memory or name == "sparse-target"
    print(f"[{name}] {n} x {p}: {d.note}", file=sys.stderr, flush=True)
    with threadpool_limits(1):
        out["fit"] = bench_fit(d, a.repeat)
        res = out["fit"].pop("_res")
        print(f"[{name}] fit done {out['fit']['cpu']}", file=sys.stderr, flush=True)
        if memory:
            out["memory"] = bench_memory(d, a.child_limit)
            print(f"[{name}] memory done", file=sys.stderr, flush=True)
        out["cv"] = bench_cv(d, a.repeat, a.saga_limit, out.get("memory"))
        print(f"[{name}] cv done", file=sys.stderr, flush=True)
        if d.sparse:
            acc = bench_accuracy(d, res, sk_refits=n * p <= a.sk_refit_max_np)
            out["accuracy"] = acc
            if res.randomized is not None or d.X.shape[0] <= 2000 or d.X.shape[1] <= 5000:
                out["randomization"] = bench_randomization(d, res, acc["certify"]["exact_mean"])
            print(f"[{name}] accuracy done", file=sys.stderr, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    tier = ap.add_mutually_exclusive_group()
    tier.add_argument("--quick", action="store_true", help=f"cases {', '.join(QUICK)}")
    tier.add_argument("--full", action="store_true", help="every case")
    tier.add_argument("--cases", help=f"comma-separated, from {', '.join(CASES)}")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--memory", action="store_true", help="section 5 for every case")
    ap.add_argument("--saga-limit", type=float, default=120.0, help="seconds (wall)")
    ap.add_argument("--child-limit", type=float, default=900.0, help="seconds (wall)")
    ap.add_argument("--sk-refit-max-np", type=float, default=1e8, help="n * p at most")
    ap.add_argument("--json", help="write the results to this path")
    ap.add_argument("--child", nargs=2, metavar=("CASE", "CALL"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        _child(*a.child)
        return
    names = list(CASES) if a.full else a.cases.split(",") if a.cases else QUICK
    print(
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()} {os.cpu_count()} cores, one "
        f"thread; aloocv {aloocv.__version__}; load average {os.getloadavg()[0]:.1f}\n"
    )
    results = {}
    for name in names:
        results[name] = run_case(name, a)
        if a.json:  # after every case: a later failure keeps what was measured
            with open(a.json, "w") as fh:
                json.dump(results, fh, indent=1, default=float)
    print(tables(results))
    print(f"\nload average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
