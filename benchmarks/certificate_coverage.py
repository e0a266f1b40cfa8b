"""Coverage of ``certify()``'s confidence interval on real data (``real_cases.py``).

For each case: plain ALO (``aloocv.loo``), its true error of the mean (ALO mean minus the
exact leave-one-out mean, ``real_cases.exact_loo``), and ``res.certify(n_samples,
random_state=s)`` for ``--seeds`` seeds. A certificate covers when its interval contains
the true error; an interval the certificate refuses to give (``ci_low``/``ci_high`` None:
not enough draws where the weight is) counts as not covering, and is counted apart. The
table gives per case the true relative error, the seed-0 certificate, the share of seeds
covered and the median relative width; the summary gives the share of (case, seed) pairs
covered, the share of cases whose seed-0 certificate covers (the issue's measure) and the
share of cases covered by at least 90% of the seeds.

    python benchmarks/certificate_coverage.py [--seeds 50] [--n-samples 20] [--json out]
        [--filter NAME ...]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from real_cases import cases, exact_loo  # beside this script

import aloocv

#: A case is "covered" when at least this share of its seeds' intervals contain the truth.
CASE_COVERAGE = 0.9


def _covers(cert, truth: float) -> bool | None:
    if cert.ci_low is None or cert.ci_high is None:
        return None  # refused
    return bool(cert.ci_low <= truth <= cert.ci_high)


def study_case(c, seeds: int, n_samples: int) -> dict:
    """The coverage record of one case."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ALOWarning / ConvergenceWarning: measured here
        res = aloocv.loo(c.X, c.y, loss=c.loss, penalty=c.penalty)
        exact = exact_loo(c)
        truth = res.mean - exact.mean
        t0 = time.perf_counter()
        certs = [res.certify(n_samples=n_samples, random_state=s) for s in range(seeds)]
        dt = (time.perf_counter() - t0) / seeds
    hits = [_covers(ct, truth) for ct in certs]
    widths = [
        (ct.ci_high - ct.ci_low) / abs(exact.mean)
        for ct in certs
        if ct.ci_low is not None and ct.ci_high is not None
    ]
    c0 = certs[0]
    return {
        "name": c.name,
        "n": c.n,
        "p": c.p,
        "exact_mean": exact.mean,
        "alo_mean": res.mean,
        "true_rel": truth / exact.mean,
        "est_rel0": c0.mean_error / exact.mean,
        "lo0": None if c0.ci_low is None else c0.ci_low / exact.mean,
        "hi0": None if c0.ci_high is None else c0.ci_high / exact.mean,
        "covered0": hits[0],
        "coverage": sum(h is True for h in hits) / seeds,
        "refused": sum(h is None for h in hits) / seeds,
        "median_width_rel": float(np.median(widths)) if widths else math.inf,
        "seconds_per_certificate": dt,
    }


def _pct(x) -> str:
    return "  None" if x is None else f"{100 * x:+6.2f}"


def report(rows: list[dict], seeds: int, n_samples: int) -> str:
    lines = [
        f"certify(n_samples={n_samples}) over {seeds} seeds; relative to the exact LOO mean",
        f"{'case':40s} {'true%':>7s} {'est0%':>7s} {'[lo0%':>7s} {'hi0%]':>7s} cov0 "
        f"{'cover':>6s} {'refuse':>6s} {'width%':>7s}",
    ]
    for r in rows:
        c0 = {True: " yes", False: "  NO", None: " ref"}[r["covered0"]]
        lines.append(
            f"{r['name']:40s} {_pct(r['true_rel'])} {_pct(r['est_rel0'])} {_pct(r['lo0'])} "
            f"{_pct(r['hi0'])} {c0} {r['coverage']:6.2f} {r['refused']:6.2f} "
            f"{100 * r['median_width_rel']:7.3f}"
        )
    cov = np.array([r["coverage"] for r in rows])
    c0 = np.array([r["covered0"] is True for r in rows])
    lines.append(
        f"cases: {len(rows)}; (case, seed) pairs covered: {cov.mean():.3f}; cases covered at "
        f"seed 0: {c0.sum()}/{len(rows)} ({c0.mean():.3f}); cases covered by >= "
        f"{CASE_COVERAGE:.0%} of the seeds: {(cov >= CASE_COVERAGE).sum()}/{len(rows)} "
        f"({(cov >= CASE_COVERAGE).mean():.3f}); worst case coverage {cov.min():.2f}"
    )
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--n-samples", type=int, default=20)
    ap.add_argument("--json", type=Path, default=None, help="write the per-case records")
    ap.add_argument("--filter", nargs="*", default=[], help="substrings of case names")
    args = ap.parse_args(argv)
    rows = []
    for c in cases():
        if args.filter and not any(f in c.name for f in args.filter):
            continue
        rows.append(study_case(c, args.seeds, args.n_samples))
        r = rows[-1]
        print(
            f"  {r['name']:40s} true {_pct(r['true_rel'])}% coverage {r['coverage']:.2f}",
            file=sys.stderr,
            flush=True,
        )
    print(report(rows, args.seeds, args.n_samples))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
