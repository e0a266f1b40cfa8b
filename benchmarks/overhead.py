"""Per-call overhead on small real data: aloocv's CV estimators against scikit-learn's.

    python benchmarks/overhead.py                    # every case, 100 interleaved repeats
    python benchmarks/overhead.py --repeat 200 --cases ridge-diabetes,logistic-wine
    python benchmarks/overhead.py --profile ridge-diabetes   # cProfile top entries

Issue 28, item 5: on small problems (n < 1000) the estimators' fixed cost per call
(validation, routing, the memory check, the BLAS thread limit, result objects) must not
make them slower than scikit-learn: ``ALORidgeCV`` at most 1x ``RidgeCV`` (same alpha
grid, same chosen alpha) and ``ALOLogisticRegressionCV(Cs=10)`` at most 1x
``LogisticRegressionCV(Cs=10)`` with its default ``cv=5``.

The data sets ship with scikit-learn (nothing is downloaded): diabetes (442 x 10),
breast cancer (569 x 30, standardized) and wine (178 x 13, standardized). Ridge on breast
cancer regresses the 0/1 label; ridge on wine regresses the one-hot classes (3 targets,
one decomposition); logistic on diabetes classifies ``y > median(y)``.

Each call is a few milliseconds, so the calls are interleaved (aloocv, scikit-learn,
aloocv, ...) ``--repeat`` times and each side's minimum is kept: on a shared, loaded
machine the minimum is the steadiest estimate of the cost itself. Times are CPU seconds
(``time.process_time``) of one thread: ``threadpool_limits(1)`` and ``n_jobs=1`` on both
sides. The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine
from sklearn.linear_model import LogisticRegressionCV, RidgeCV
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

import aloocv

#: The ridge grid of every ridge case (scikit-learn's RidgeCV default is (0.1, 1, 10)).
ALPHAS = np.logspace(-3, 3, 13)


@dataclass
class Case:
    """One comparison: two zero-argument fits and what must agree between them."""

    name: str
    ours: Callable[[], object]
    theirs: Callable[[], object]
    agree: Callable[[object, object], str]


def _std(X: np.ndarray) -> np.ndarray:
    return StandardScaler().fit_transform(X)


def _same_alpha(a, b) -> str:
    ok = np.allclose(a.alpha_, b.alpha_, rtol=1e-12, atol=0)
    return f"alpha_ {a.alpha_:g} vs {b.alpha_:g} ({'same' if ok else 'DIFFERENT'})"


def _chosen_c(a, b) -> str:
    return f"C_ {float(np.ravel(a.C_)[0]):.3g} vs {float(np.ravel(b.C_)[0]):.3g}"


def _lrcv(X, y) -> object:
    with warnings.catch_warnings():  # scikit-learn's notices of coming default changes
        warnings.simplefilter("ignore", FutureWarning)
        return LogisticRegressionCV(Cs=10, n_jobs=1).fit(X, y)


def cases() -> list[Case]:
    Xd, yd = load_diabetes(return_X_y=True)
    Xb, yb = load_breast_cancer(return_X_y=True)
    Xb = _std(Xb)
    Xw, yw = load_wine(return_X_y=True)
    Xw = _std(Xw)
    Yw = np.eye(3)[yw]
    Xds, yd_bin = _std(Xd), (yd > np.median(yd)).astype(np.int64)
    return [
        Case(
            "ridge-diabetes",
            lambda: aloocv.ALORidgeCV(alphas=ALPHAS).fit(Xd, yd),
            lambda: RidgeCV(alphas=ALPHAS).fit(Xd, yd),
            _same_alpha,
        ),
        Case(
            "ridge-diabetes-3",
            lambda: aloocv.ALORidgeCV().fit(Xd, yd),
            lambda: RidgeCV().fit(Xd, yd),
            _same_alpha,
        ),
        Case(
            "ridge-breast-cancer",
            lambda: aloocv.ALORidgeCV(alphas=ALPHAS).fit(Xb, yb),
            lambda: RidgeCV(alphas=ALPHAS).fit(Xb, yb),
            _same_alpha,
        ),
        Case(
            "ridge-wine-onehot",
            lambda: aloocv.ALORidgeCV(alphas=ALPHAS).fit(Xw, Yw),
            lambda: RidgeCV(alphas=ALPHAS).fit(Xw, Yw),
            _same_alpha,
        ),
        Case(
            "logistic-breast-cancer",
            lambda: aloocv.ALOLogisticRegressionCV(Cs=10, n_jobs=1).fit(Xb, yb),
            lambda: _lrcv(Xb, yb),
            _chosen_c,
        ),
        Case(
            "logistic-wine",
            lambda: aloocv.ALOLogisticRegressionCV(Cs=10, n_jobs=1).fit(Xw, yw),
            lambda: _lrcv(Xw, yw),
            _chosen_c,
        ),
        Case(
            "logistic-diabetes",
            lambda: aloocv.ALOLogisticRegressionCV(Cs=10, n_jobs=1).fit(Xds, yd_bin),
            lambda: _lrcv(Xds, yd_bin),
            _chosen_c,
        ),
    ]


def interleaved(ours, theirs, repeat: int) -> tuple[float, float, object, object]:
    """Minimum CPU seconds of each over ``repeat`` interleaved calls (one untimed call of
    each first), and the last fitted models."""
    a, b = ours(), theirs()
    ta = tb = np.inf
    for _ in range(repeat):
        t0 = time.process_time()
        a = ours()
        ta = min(ta, time.process_time() - t0)
        t0 = time.process_time()
        b = theirs()
        tb = min(tb, time.process_time() - t0)
    return ta, tb, a, b


def profile(case: Case, repeat: int, top: int) -> str:
    """cProfile's top entries (cumulative and own time) of ``repeat`` calls of aloocv's
    side."""
    case.ours()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(repeat):
        case.ours()
    pr.disable()
    out = io.StringIO()
    for key in ("cumulative", "tottime"):
        pstats.Stats(pr, stream=out).strip_dirs().sort_stats(key).print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=100, help="interleaved calls of each")
    ap.add_argument("--cases", default=None, help="comma-separated case names (default: all)")
    ap.add_argument("--profile", default=None, help="profile aloocv's side of this case")
    ap.add_argument("--top", type=int, default=25, help="profile entries shown")
    args = ap.parse_args(argv)
    all_cases = {c.name: c for c in cases()}
    with threadpool_limits(limits=1):
        if args.profile is not None:
            print(profile(all_cases[args.profile], args.repeat, args.top))
            return 0
        names = args.cases.split(",") if args.cases else list(all_cases)
        unknown = [n for n in names if n not in all_cases]
        if unknown:
            ap.error(f"unknown cases {unknown}; expected some of {list(all_cases)}")
        print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
        print(f"min CPU ms over {args.repeat} interleaved calls (one thread)")
        print(f"{'case':24s} {'aloocv':>8s} {'sklearn':>8s} {'ratio':>6s}  agreement")
        for name in names:
            c = all_cases[name]
            ta, tb, a, b = interleaved(c.ours, c.theirs, args.repeat)
            print(f"{name:24s} {ta * 1e3:8.2f} {tb * 1e3:8.2f} {ta / tb:6.2f}  {c.agree(a, b)}")
        print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
