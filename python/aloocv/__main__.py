"""Command-line entry point: ``python -m aloocv``.

Without arguments it runs the main job on an embedded real dataset: scikit-learn's
breast-cancer data (569 samples, 30 features, shipped inside scikit-learn, no
download), standardized, logistic loss, along a lambda grid; per lambda it prints the
in-sample loss, ALOOCV with its standard error, the influence-function (IF) and
Lemma 3 estimates, and exact leave-one-out (n refits), with timings, then the lambda
each criterion selects, and an accuracy certificate of ALOOCV at its chosen lambda
(exact refits of a few samples, ``--certify N``). ``--dataset wine`` takes scikit-learn's
wine data (class 0 against the rest) instead; ``--data FILE.csv --target COLUMN`` runs the
same on a CSV. Warnings about unreliable estimates (aloocv.ALOWarning) are printed as notes
under the table.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
import warnings
from collections.abc import Sequence

import numpy as np

from . import L2, __version__, fit, loo
from ._diagnostics import ALOWarning
from .losses import DEFAULT_HUBER_DELTA, DEFAULT_TWEEDIE_POWER, Huber, Tweedie, get_loss
from .losses import names as loss_names

LOSSES = tuple(loss_names())
METHODS = ("alo", "if", "lemma3", "exact")
DATASETS = ("breast_cancer", "wine")


class CLIError(Exception):
    """A user error: printed without a traceback, exit status 2."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m aloocv",
        description=(
            "Approximate leave-one-out cross-validation (ALOOCV) of an L2-penalized GLM "
            "along a lambda grid, side by side with the influence-function and Lemma 3 "
            "approximations and exact leave-one-out. Without --data: scikit-learn's "
            "breast-cancer data, standardized, logistic loss."
        ),
        epilog=(
            "The objective is sum_i l(y_i, eta_i) + lam/2 ||theta||^2 (a sum, not a mean; "
            "the intercept is not penalized). Example: python -m aloocv --data d.csv "
            "--target y --loss squared --lam 0.1 1 10"
        ),
    )
    p.add_argument("--data", metavar="FILE.csv", help="CSV file with a header row; numeric columns")
    p.add_argument("--target", metavar="COLUMN", help="name of the response column (with --data)")
    p.add_argument(
        "--loss",
        choices=LOSSES,
        default=None,
        help="loss (default: logistic for the embedded data, squared for --data)",
    )
    p.add_argument(
        "--power",
        type=float,
        default=DEFAULT_TWEEDIE_POWER,
        help=f"Tweedie variance power (with --loss tweedie; default {DEFAULT_TWEEDIE_POWER})",
    )
    p.add_argument(
        "--delta",
        type=float,
        default=DEFAULT_HUBER_DELTA,
        help=f"Huber threshold (with --loss huber; default {DEFAULT_HUBER_DELTA})",
    )
    p.add_argument(
        "--lam",
        type=float,
        nargs="+",
        metavar="LAMBDA",
        help="lambda values (default: 13 values log-spaced from 1e-3 to 1e3)",
    )
    p.add_argument(
        "--methods",
        nargs="+",
        choices=METHODS,
        default=list(METHODS),
        help="leave-one-out estimates to compute (default: all)",
    )
    p.add_argument(
        "--no-exact",
        action="store_true",
        help="skip exact leave-one-out (n refits); useful on large data",
    )
    p.add_argument(
        "--no-standardize",
        action="store_true",
        help="use the features as they are (default: centered and scaled)",
    )
    p.add_argument("--no-intercept", action="store_true", help="fit no intercept")
    p.add_argument(
        "--dataset",
        choices=DATASETS,
        default="breast_cancer",
        help="embedded scikit-learn data without --data (wine: class 0 against the rest)",
    )
    p.add_argument(
        "--certify",
        type=int,
        default=20,
        metavar="N",
        help="refit N samples exactly to certify ALOOCV at its chosen lambda (0: off)",
    )
    p.add_argument("--n-jobs", type=int, default=None, help="OpenMP threads (default: all)")
    p.add_argument("--version", action="version", version=f"aloocv {__version__}")
    return p


def read_csv(path: str, target: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Read a numeric CSV with a header; returns X, y and the feature names."""
    try:
        with open(path, newline="") as fh:
            rows = list(csv.reader(fh))
    except OSError as exc:
        raise CLIError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if not rows:
        raise CLIError(f"{path} is empty")
    header = [h.strip() for h in rows[0]]
    if target not in header:
        raise CLIError(f"column {target!r} not found in {path}; columns: {', '.join(header)}")
    body = [r for r in rows[1:] if any(c.strip() for c in r)]
    if not body:
        raise CLIError(f"{path} has a header but no data rows")
    for k, r in enumerate(body, start=2):
        if len(r) != len(header):
            raise CLIError(f"{path}, line {k}: {len(r)} fields, the header has {len(header)}")
    try:
        data = np.array(body, dtype=np.float64)
    except ValueError as exc:
        raise CLIError(f"{path}: non-numeric value ({exc})") from exc
    j = header.index(target)
    names = [h for i, h in enumerate(header) if i != j]
    if not names:
        raise CLIError(f"{path} has no feature columns besides {target!r}")
    return np.delete(data, j, axis=1), data[:, j], names


def load_default(name: str = "breast_cancer") -> tuple[np.ndarray, np.ndarray, str]:
    if name == "wine":
        from sklearn.datasets import load_wine

        d = load_wine()
        y = (d.target == 0).astype(np.float64)
        return d.data, y, "wine (scikit-learn), class 0 vs rest, 178 x 13"
    from sklearn.datasets import load_breast_cancer

    d = load_breast_cancer()
    return d.data, d.target.astype(np.float64), "breast cancer (scikit-learn), 569 x 30"


def standardize(X: np.ndarray) -> np.ndarray:
    sd = X.std(axis=0)
    sd[sd == 0] = 1.0
    return (X - X.mean(axis=0)) / sd


def run(
    X: np.ndarray,
    y: np.ndarray,
    loss: str,
    lams: Sequence[float],
    methods: Sequence[str],
    intercept: bool,
    n_jobs: int | None,
    out=None,
    certify: int = 0,
) -> dict[str, float]:
    """Print one row per lambda, the notes of aloocv.ALOWarning, and a certificate of ALOOCV
    at its chosen lambda (``certify`` refits); returns the lambda chosen by each method."""
    out = sys.stdout if out is None else out
    methods = list(dict.fromkeys(methods))
    cols = ["lambda", "in-sample"]
    for m in methods:
        cols.append(
            {"alo": "ALOOCV +- se", "if": "IF", "lemma3": "Lemma3", "exact": "exact LOO"}[m]
        )
    timed = [m for m in ("alo", "exact") if m in methods]
    cols += [f"t_{m} [ms]" for m in timed]
    if "alo" in methods and "exact" in methods:
        cols.append("exact/alo")
    widths = [max(10, len(c)) for c in cols]
    widths[cols.index("ALOOCV +- se")] = 22 if "alo" in methods else widths[0]
    print("  ".join(c.rjust(w) for c, w in zip(cols, widths)), file=out)
    scores: dict[str, list[float]] = {m: [] for m in methods}
    notes: list[str] = []
    alo_results = []
    for lam in lams:
        pen = L2(lam)
        t0 = time.perf_counter()
        f = fit(X, y, loss=loss, penalty=pen, fit_intercept=intercept, n_jobs=n_jobs)
        insample = float(np.mean(_losses(loss, y, f.decision_function(X))))
        row = [f"{lam:.4g}", f"{insample:.5f}"]
        times: dict[str, float] = {}
        for m in methods:
            t0 = time.perf_counter()
            with warnings.catch_warnings(record=True) as rec:
                warnings.simplefilter("always", ALOWarning)
                r = loo(
                    X, y, loss=loss, penalty=pen, method=m, fit_intercept=intercept, n_jobs=n_jobs
                )
            times[m] = time.perf_counter() - t0
            for w in rec:
                if not issubclass(w.category, ALOWarning):  # pragma: no cover - re-emit others
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
                    continue
                note = f"lambda {lam:.4g}: {w.message}"
                if m == "alo" or note not in notes:
                    notes.append(note)
            if m == "alo":
                alo_results.append(r)
            scores[m].append(r.mean)
            row.append(f"{r.mean:.5f} +- {r.stderr:.5f}" if m == "alo" else f"{r.mean:.5f}")
        row += [f"{1e3 * times[m]:.1f}" for m in timed]
        if "alo" in methods and "exact" in methods:
            row.append(f"{times['exact'] / max(times['alo'], 1e-9):.0f}x")
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)), file=out)
    chosen = {m: float(lams[int(np.argmin(s))]) for m, s in scores.items()}
    for m, lam in chosen.items():
        print(f"lambda chosen by {m:>6}: {lam:.4g}", file=out)
    for note in dict.fromkeys(notes):
        print(f"note: {note}", file=out)
    if certify > 0 and alo_results:
        best = int(np.argmin(scores["alo"]))
        cert = alo_results[best].certify(n_samples=certify, random_state=0)
        print(f"at lambda {lams[best]:.4g}: {cert}", file=out)
    return chosen


def _losses(loss, y: np.ndarray, eta: np.ndarray) -> np.ndarray:
    return get_loss(loss).value(y, eta)


def _loss_arg(name: str, power: float, delta: float):
    """The loss object of the command line's --loss, --power and --delta."""
    if name == "tweedie":
        return Tweedie(power=power)
    if name == "huber":
        return Huber(delta=delta)
    return get_loss(name)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.data is None:
            if args.target is not None:
                raise CLIError("--target needs --data")
            X, y, name = load_default(args.dataset)
            loss = args.loss or "logistic"
            names = None
        else:
            if args.target is None:
                raise CLIError("--data needs --target COLUMN")
            X, y, names = read_csv(args.data, args.target)
            name = f"{args.data}, {X.shape[0]} x {X.shape[1]}, target {args.target!r}"
            loss = args.loss or "squared"
        try:
            loss = _loss_arg(loss, args.power, args.delta)
        except (TypeError, ValueError) as e:
            raise CLIError(str(e)) from None
        if not args.no_standardize:
            X = standardize(X)
        lams = args.lam if args.lam is not None else list(np.logspace(-3, 3, 13))
        if any(not np.isfinite(v) or v < 0 for v in lams):
            raise CLIError("--lam values must be finite and >= 0")
        methods = [m for m in args.methods if not (args.no_exact and m == "exact")]
        print(
            f"aloocv {__version__}: {name}; loss {loss}; "
            f"{'standardized' if not args.no_standardize else 'raw'} features"
        )
        if names is not None:
            print(f"features: {', '.join(names)}")
        if args.certify < 0:
            raise CLIError("--certify must be >= 0")
        run(
            X,
            y,
            loss,
            lams,
            methods,
            not args.no_intercept,
            args.n_jobs,
            certify=args.certify if "alo" in methods else 0,
        )
    except CLIError as exc:
        print(f"python -m aloocv: error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, TypeError) as exc:
        print(f"python -m aloocv: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
