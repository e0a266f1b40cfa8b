"""Command-line entry point: ``python -m aloocv``.

Without arguments it runs the main job on an embedded real dataset: scikit-learn's
breast-cancer data (569 samples, 30 features, shipped inside scikit-learn, no
download), standardized, logistic loss, along a lambda grid; per lambda it prints the
in-sample loss, ALOOCV with its standard error, the influence-function (IF) and
Lemma 3 estimates, and exact leave-one-out (n refits), with timings, then the lambda
each criterion selects, and an accuracy certificate of ALOOCV at its chosen lambda
(exact refits of a few samples, ``--certify N``). ``--dataset wine`` takes scikit-learn's
wine data (class 0 against the rest) instead; ``--data FILE.csv --target COLUMN`` runs the
same on a CSV (read with pandas when it is installed, with the standard library
otherwise): text columns are one-hot encoded with ``--one-hot`` (an error naming the column
without it), missing cells (empty, "NA", "nan", ...) are reported by data row and column
or dropped with ``--drop-missing``; a text target is fitted with the logistic loss (two
classes) or the multinomial loss (more; ``--loss multinomial`` for numeric labels).
``--l1-ratio`` fits the elastic net ``lam (r ||theta||_1 + (1 - r)/2 ||theta||^2)``.
Each lambda's row is printed (and flushed) as soon as it is computed. Progress shows on
stderr once a run lasts over two seconds (``--progress``: at once; ``--no-progress``:
never): the estimates done and, within exact leave-one-out, its refits batch by batch; a
tqdm bar when tqdm is installed and stderr is a terminal, otherwise a plain line every 10
seconds and one when each part ends. Warnings about unreliable
estimates (aloocv.ALOWarning) are printed as notes under the table.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import re
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import L1, L2, ElasticNet, __version__, fit, loo
from ._diagnostics import ALOWarning
from ._progress import Progress, ProgressOptions, has_tqdm, progress_options
from .losses import DEFAULT_HUBER_DELTA, DEFAULT_TWEEDIE_POWER, Huber, Tweedie, get_loss
from .losses import names as loss_names

LOSSES = tuple(loss_names())
#: Cells read as missing (pandas' defaults include these; the standard-library reader
#: uses exactly this set).
MISSING = frozenset({"", "NA", "N/A", "NaN", "nan", "NULL", "null", "None", "#N/A", "-nan"})
#: Seconds before the default progress bar appears (short runs show none).
PROGRESS_DELAY = 2.0
#: Missing cells listed in an error message before "and k more".
MAX_LISTED = 10
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
    p.add_argument(
        "--data",
        metavar="FILE.csv",
        help="CSV file with a header row (read with pandas when installed)",
    )
    p.add_argument("--target", metavar="COLUMN", help="name of the response column (with --data)")
    p.add_argument(
        "--loss",
        choices=LOSSES,
        default=None,
        help=(
            "loss (default: logistic for the embedded data; for --data squared, or "
            "logistic / multinomial for a target of 2 / more text classes)"
        ),
    )
    p.add_argument(
        "--l1-ratio",
        type=float,
        default=0.0,
        metavar="R",
        help=(
            "elastic net: penalty lam (R ||theta||_1 + (1 - R)/2 ||theta||^2), "
            "0 <= R <= 1 (default 0: ridge)"
        ),
    )
    p.add_argument(
        "--one-hot",
        action="store_true",
        help="one-hot encode text (categorical) feature columns (default: an error)",
    )
    p.add_argument(
        "--drop-missing",
        action="store_true",
        help="drop rows with missing values (default: an error listing them)",
    )
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress on stderr, including exact leave-one-out's refits: a tqdm bar when "
        "tqdm is installed and stderr is a terminal, plain lines otherwise (default: on "
        "runs over 2 s)",
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


@dataclass
class Table:
    """A CSV read for the command line: features, target and what was done to them."""

    X: np.ndarray
    y: np.ndarray
    names: list[str]
    classes: np.ndarray | None = None  # the target's class labels (index = encoded label)
    dropped: int = 0  # rows dropped for missing values
    encoded: list[str] = field(default_factory=list)  # one-hot encoded columns
    reader: str = "csv"


def _rows_pandas(path: str, pd: Any) -> list[list[str]]:
    """All rows (header first) as stripped strings; short rows padded with ""."""
    try:
        df = pd.read_csv(
            path,
            header=None,
            dtype=str,
            keep_default_na=False,
            skipinitialspace=True,
            skip_blank_lines=True,
        )
    except OSError as exc:
        raise CLIError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except pd.errors.EmptyDataError:
        raise CLIError(f"{path} is empty") from None
    except pd.errors.ParserError as exc:
        m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(exc))
        if m:
            raise CLIError(
                f"{path}, line {m.group(2)}: {m.group(3)} fields, the header has {m.group(1)}"
            ) from None
        raise CLIError(f"{path}: {exc}") from None
    cells = df.fillna("").to_numpy(dtype=object)
    rows = [[str(c).strip() for c in row] for row in cells]
    return [r for r in rows if any(r)]


def _rows_csv(path: str) -> list[list[str]]:
    try:
        with open(path, newline="") as fh:
            rows = [[c.strip() for c in r] for r in csv.reader(fh)]
    except OSError as exc:
        raise CLIError(f"cannot read {path}: {exc.strerror or exc}") from exc
    rows = [r for r in rows if any(r)]
    if not rows:
        raise CLIError(f"{path} is empty")
    width = len(rows[0])
    for k, r in enumerate(rows[1:], start=2):
        if len(r) > width:
            raise CLIError(f"{path}, line {k}: {len(r)} fields, the header has {width}")
    return [r + [""] * (width - len(r)) for r in rows]


def _as_float(col: np.ndarray) -> np.ndarray | None:
    """The column as floats, or None when some cell is not a number."""
    try:
        return col.astype(np.float64)
    except ValueError:
        return None


def _first_text(col: np.ndarray) -> tuple[int, str]:
    """(index, value) of the first cell that is not a number."""
    for i, v in enumerate(col):
        try:
            float(v)
        except ValueError:
            return i, v
    raise AssertionError("no text cell")  # pragma: no cover - called on text columns only


def read_csv(path: str, target: str, one_hot: bool = False, drop_missing: bool = False) -> Table:
    """Read a CSV with a header row (pandas when installed, else the csv module).

    Missing cells (:data:`MISSING`, short rows) are an error listing them by data row
    (1-based, the header not counted) and column, or their rows are dropped
    (``drop_missing``). Feature columns holding text are an error naming the column and
    its first text cell, or are one-hot encoded (``one_hot``: one 0/1 column per
    distinct value, named ``column=value``). A numeric target is used as it is; a text
    target becomes class labels ``0 .. K-1`` (``Table.classes``)."""
    try:
        import pandas as pd
    except ImportError:
        pd = None
    rows = _rows_pandas(path, pd) if pd is not None else _rows_csv(path)
    header = rows[0]
    if target not in header:
        raise CLIError(f"column {target!r} not found in {path}; columns: {', '.join(header)}")
    for name in set(header):
        if header.count(name) > 1:
            raise CLIError(f"{path}: column name {name!r} appears {header.count(name)} times")
    if len(rows) < 2:
        raise CLIError(f"{path} has a header but no data rows")
    if len(header) < 2:
        raise CLIError(f"{path} has no feature columns besides {target!r}")
    cells = np.array(rows[1:], dtype=object)
    missing = np.isin(cells, list(MISSING))
    dropped = 0
    if missing.any():
        bad_rows = np.flatnonzero(missing.any(axis=1))
        if not drop_missing:
            r, c = np.nonzero(missing)
            listed = ", ".join(
                f"row {i + 1} column {header[j]!r}" for i, j in zip(r[:MAX_LISTED], c)
            )
            more = f" and {r.size - MAX_LISTED} more" if r.size > MAX_LISTED else ""
            raise CLIError(
                f"{path}: {r.size} missing value{'s' if r.size > 1 else ''} in "
                f"{bad_rows.size} row{'s' if bad_rows.size > 1 else ''} (data rows counted "
                f"from 1 after the header): {listed}{more}; use --drop-missing to drop those "
                "rows"
            )
        keep = ~missing.any(axis=1)
        if not keep.any():
            raise CLIError(f"{path}: every data row has a missing value")
        cells, dropped = cells[keep], int(bad_rows.size)
    j = header.index(target)
    ycol = cells[:, j]
    y = _as_float(ycol)
    classes = None
    if y is None:
        classes, y = np.unique(ycol.astype(str), return_inverse=True)
        y = y.astype(np.float64)
        if classes.size < 2:
            i, val = _first_text(ycol)
            raise CLIError(
                f"target {target!r} is not numeric ({val!r} in data row {i + 1}) and, as "
                "class labels, holds a single class"
            )
    names: list[str] = []
    blocks: list[np.ndarray] = []
    encoded: list[str] = []
    for k, name in enumerate(header):
        if k == j:
            continue
        v = _as_float(cells[:, k])
        if v is not None:
            names.append(name)
            blocks.append(v[:, None])
            continue
        if not one_hot:
            i, val = _first_text(cells[:, k])
            raise CLIError(
                f"column {name!r} is not numeric ({val!r} in data row {i + 1}); use "
                "--one-hot to encode text columns as indicator columns"
            )
        levels, codes = np.unique(cells[:, k].astype(str), return_inverse=True)
        blocks.append((codes[:, None] == np.arange(levels.size)).astype(np.float64))
        names += [f"{name}={lv}" for lv in levels]
        encoded.append(name)
    X = np.hstack(blocks)
    return Table(X, y, names, classes, dropped, encoded, "pandas" if pd is not None else "csv")


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


def penalty_for(lam: float, l1_ratio: float) -> Any:
    """The penalty of one lambda: ``lam (r ||theta||_1 + (1 - r)/2 ||theta||^2)``."""
    if l1_ratio == 0:
        return L2(lam)
    if l1_ratio == 1:
        return L1(lam)
    return ElasticNet(l1_ratio * lam, (1.0 - l1_ratio) * lam)


def _ratio(a: float, b: float) -> str:
    """a / b as "37.2x" with three significant digits (never rounded to 0x or 1x)."""
    r = a / max(b, 1e-12)
    return f"{r:.3g}x" if r < 1000 else f"{r:.0f}x"


def _progress_style(enabled: bool | None) -> ProgressOptions | None:
    """How progress shows (None: not at all): a tqdm bar when tqdm is installed and stderr
    is a terminal, plain lines on stderr otherwise (a log, or no tqdm); ``enabled`` None
    (the default) shows it only on runs over :data:`PROGRESS_DELAY` seconds."""
    if enabled is False:
        return None
    bar = sys.stderr.isatty() and has_tqdm()
    delay = 0.0 if enabled else PROGRESS_DELAY
    return ProgressOptions(style="bar" if bar else "plain", delay=delay)


def _inner(shown: ProgressOptions | None, lam: float) -> Any:
    """The progress options of the calls at one lambda (their lines name it)."""
    if shown is None:
        return contextlib.nullcontext()
    return progress_options(style=shown.style, delay=shown.delay, prefix=f"lambda {lam:.4g}: ")


def run(
    X: np.ndarray,
    y: np.ndarray,
    loss: Any,
    lams: Sequence[float],
    methods: Sequence[str],
    intercept: bool,
    n_jobs: int | None,
    out=None,
    certify: int = 0,
    l1_ratio: float = 0.0,
    progress: bool | None = None,
) -> dict[str, float]:
    """Print one row per lambda as soon as it is computed (flushed), the notes of
    aloocv.ALOWarning, and a certificate of ALOOCV at its chosen lambda (``certify``
    refits); returns the lambda chosen by each method."""
    out = sys.stdout if out is None else out
    methods = list(dict.fromkeys(methods))
    cols = ["lambda", "in-sample"]
    for m in methods:
        cols.append(
            {"alo": "ALOOCV +- se", "if": "IF", "lemma3": "Lemma3", "exact": "exact LOO"}[m]
        )
    timed = [m for m in ("alo", "exact") if m in methods]
    cols += [f"t_{m} [ms]" for m in timed]
    both = "alo" in methods and "exact" in methods
    if both:
        cols.append("exact/alo")
    widths = [max(10, len(c)) for c in cols]
    if "alo" in methods:
        widths[cols.index("ALOOCV +- se")] = 22
    shown = _progress_style(progress)
    bar = None
    if shown is not None:
        bar = Progress(
            len(lams) * len(methods),
            "estimates",
            unit="estimate",
            style=shown.style,
            delay=shown.delay,
        )

    def emit(line: str) -> None:
        if bar is not None:
            bar.clear()
        print(line, file=out, flush=True)
        if bar is not None:
            bar.refresh()

    emit("  ".join(c.rjust(w) for c, w in zip(cols, widths)))
    scores: dict[str, list[float]] = {m: [] for m in methods}
    notes: list[str] = []
    alo_results = []
    try:
        for lam in lams:
            pen = penalty_for(lam, l1_ratio)
            f = fit(X, y, loss=loss, penalty=pen, fit_intercept=intercept, n_jobs=n_jobs)
            insample = float(np.mean(_losses(loss, y, f.decision_function(X))))
            row = [f"{lam:.4g}", f"{insample:.5f}"]
            times: dict[str, float] = {}
            for m in methods:
                if bar is not None:
                    bar.set_description(f"lambda {lam:.3g} {m}")
                t0 = time.perf_counter()
                with warnings.catch_warnings(record=True) as rec, _inner(shown, lam):
                    warnings.simplefilter("always", ALOWarning)
                    # exact leave-one-out reports its refits batch by batch
                    r = loo(
                        X,
                        y,
                        loss=loss,
                        penalty=pen,
                        method=m,
                        fit_intercept=intercept,
                        n_jobs=n_jobs,
                        verbose=shown is not None and m == "exact",
                    )
                times[m] = time.perf_counter() - t0
                if bar is not None:
                    bar.update(1)
                for w in rec:
                    if not issubclass(w.category, ALOWarning):  # pragma: no cover - re-emit
                        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
                        continue
                    note = f"lambda {lam:.4g}: {w.message}"
                    if m == "alo" or note not in notes:
                        notes.append(note)
                if m == "alo":
                    alo_results.append(r)
                scores[m].append(r.mean)
                row.append(f"{r.mean:.5f} +- {r.stderr:.5f}" if m == "alo" else f"{r.mean:.5f}")
            row += [f"{1e3 * times[m]:.3g}" for m in timed]
            if both:
                row.append(_ratio(times["exact"], times["alo"]))
            emit("  ".join(c.rjust(w) for c, w in zip(row, widths)))
    finally:
        if bar is not None:
            bar.set_description("estimates")
            bar.close()
    if both:
        print(
            "exact/alo: wall time of exact leave-one-out (n refits, warm-started) over "
            "ALOOCV (one fit and the leave-one-out formula), per lambda",
            file=out,
        )
    chosen = {m: float(lams[int(np.argmin(s))]) for m, s in scores.items()}
    for m, lam in chosen.items():
        print(f"lambda chosen by {m:>6}: {lam:.4g}", file=out)
    for note in dict.fromkeys(notes):
        print(f"note: {note}", file=out)
    if certify > 0 and alo_results and get_loss(loss) == "multinomial":
        print("note: no accuracy certificate for the multinomial loss (--certify 0)", file=out)
    elif certify > 0 and alo_results:
        best = int(np.argmin(scores["alo"]))
        cert = alo_results[best].certify(n_samples=certify, random_state=0)
        print(f"at lambda {lams[best]:.4g}: {cert}", file=out)
    out.flush()
    return chosen


def _losses(loss, y: np.ndarray, eta: np.ndarray) -> np.ndarray:
    """Per-sample losses at eta ((n, K) class scores for the multinomial loss)."""
    return get_loss(loss).value(y, eta)


def _loss_arg(name: str, power: float, delta: float):
    """The loss object of the command line's --loss, --power and --delta."""
    if name == "tweedie":
        return Tweedie(power=power)
    if name == "huber":
        return Huber(delta=delta)
    if name == "multinomial":
        return name
    return get_loss(name)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    notes: list[str] = []
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
            tab = read_csv(args.data, args.target, args.one_hot, args.drop_missing)
            X, y, names = tab.X, tab.y, tab.names
            name = f"{args.data}, {X.shape[0]} x {X.shape[1]}, target {args.target!r}"
            if tab.classes is not None:
                k = tab.classes.size
                loss = args.loss or ("logistic" if k == 2 else "multinomial")
                if loss not in ("logistic", "multinomial"):
                    raise CLIError(
                        f"target {args.target!r} holds text class labels: use --loss "
                        "logistic (2 classes) or multinomial"
                    )
                if loss == "logistic" and k != 2:
                    raise CLIError(
                        f"target {args.target!r} has {k} classes: --loss logistic needs 2 "
                        "(use --loss multinomial)"
                    )
                shown = ", ".join(f"{c}={i}" for i, c in enumerate(tab.classes[:20]))
                notes.append(f"classes: {shown}{' ...' if k > 20 else ''}")
            else:
                loss = args.loss or "squared"
                if loss == "multinomial":  # numeric class labels: encode as 0 .. K-1
                    classes, codes = np.unique(y, return_inverse=True)
                    y = codes.astype(np.float64)
                    shown = ", ".join(f"{c:g}={i}" for i, c in enumerate(classes[:20]))
                    notes.append(f"classes: {shown}{' ...' if classes.size > 20 else ''}")
            if tab.dropped:
                notes.append(f"dropped {tab.dropped} rows with missing values")
            if tab.encoded:
                notes.append(f"one-hot encoded: {', '.join(tab.encoded)}")
            notes.append(f"read with {tab.reader}")
        try:
            loss = _loss_arg(loss, args.power, args.delta)
        except (TypeError, ValueError) as e:
            raise CLIError(str(e)) from None
        if not args.no_standardize:
            X = standardize(X)
        lams = args.lam if args.lam is not None else list(np.logspace(-3, 3, 13))
        if any(not np.isfinite(v) or v < 0 for v in lams):
            raise CLIError("--lam values must be finite and >= 0")
        if not 0.0 <= args.l1_ratio <= 1.0:
            raise CLIError(f"--l1-ratio must be in [0, 1], got {args.l1_ratio}")
        if args.l1_ratio > 0 and any(v <= 0 for v in lams):
            raise CLIError("--lam values must be > 0 with --l1-ratio")
        methods = [m for m in args.methods if not (args.no_exact and m == "exact")]
        pen_text = (
            "L2"
            if args.l1_ratio == 0
            else ("L1" if args.l1_ratio == 1 else f"elastic net, l1_ratio {args.l1_ratio:g}")
        )
        print(
            f"aloocv {__version__}: {name}; loss {loss}; penalty {pen_text}; "
            f"{'standardized' if not args.no_standardize else 'raw'} features"
        )
        if names is not None:
            print(f"features: {', '.join(names)}")
        for note in notes:
            print(note)
        sys.stdout.flush()
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
            l1_ratio=args.l1_ratio,
            progress=args.progress,
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
