"""Multicore scaling of the core's passes over X: a table over thread counts one can trust.

On a lent machine (it gets a copy of the repository; build, then run), from the
repository's root::

    pip install . && python benchmarks/scaling.py --quick --out $OUT/scaling.md

Where the machine cannot reach a package index, the build requirements must already be
there (scikit-build-core, pybind11, CMake, a C++17 compiler with OpenMP; cmeel-eigen
carried as a wheel and installed with ``pip install --no-index --no-deps``), and then::

    pip install --no-build-isolation --no-deps .
    python benchmarks/scaling.py --quick --out $OUT/scaling.md

or, without installing, the extension built by CMake into the tree::

    PL=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$PL;$(python3 -c 'import pybind11; print(pybind11.get_cmake_dir())')" \
        -DPython_EXECUTABLE=$(command -v python3)
    cmake --build build/bench -j 16 --target _core && cp build/bench/_core*.so python/aloocv/
    PYTHONPATH=python python3 benchmarks/scaling.py --quick --out $OUT/scaling.md

(``--quick``: n=300000, p=200, 3 rounds; a few minutes on 16 cores, inside a 10-minute
command limit.) With the extension already built in the working tree, as in a
development checkout::

    PYTHONPATH=python python benchmarks/scaling.py --quick --max-threads 2 --out scaling.md
    PYTHONPATH=python python benchmarks/scaling.py --out scaling.md    # n=1e6, p=200

What is measured, for each thread count k (1, 2, 4, ..., up to the cores available):

* ``hessian``: ``X^T diag(d) X`` by the core's row-blocked OpenMP kernel
  (``_core.hessian``; each thread calls single-threaded BLAS on its row block, then a
  reduction of the p x p blocks);
* ``dsyrk``: scipy's threaded BLAS ``dsyrk`` on ``sqrt(d) X`` (scaled beforehand, not
  timed; F-ordered, so no copy), under ``threadpool_limits(k)``: the same flops by the
  BLAS aloocv calls, threaded by the BLAS itself;
* ``numpy``: ``(X * d[:, None]).T @ X`` with numpy's threaded BLAS (the issue's target:
  the core's Hessian at n=1e6, p=200 and 16 threads <= 0.15x this);
* ``leverage``: the leverage pass timed directly (``_core.chunk_loo`` with the penalized
  Hessian given: X beta, the factor, one DTRMM per row block and the row norms, then
  ALO's closed forms), not as a difference of two noisy totals;
* ``pass``: one fused O(n p) pass of the fit (``_core.chunk_sums`` without the Hessian:
  X beta, the loss and its derivative, X^T r, reading X once), reported also as GB/s of
  X read: the memory-bandwidth ceiling of the fit's steps between Hessians;
* ``fit``: ``aloocv.fit`` (logistic, L2 lambda=1, tol 1e-6): Newton iterations, each a
  Hessian pass and O(n p) passes (the issue's target: >= 70% efficiency at 16 threads);
* ``dgemm``: a square DGEMM (scipy's BLAS, m=4096, ``2 m^3`` flops) under
  ``threadpool_limits(k)``: the machine's attainable peak at k threads, measured in the
  same child as the passes, for reference.

How, so that the table can be trusted:

* **a child process per thread count** (``subprocess``), started with
  ``OMP_NUM_THREADS=k``, ``OMP_PROC_BIND=close``, ``OMP_PLACES={c0},...,{ck-1}`` and the
  BLAS thread variables set: OpenMP reads them once, at start, so they cannot be changed
  inside one process;
* **pinning**: each child is bound to the first k cores of this process's affinity mask
  (``os.sched_setaffinity``, before numpy or the core is imported);
* **first-touch placement**: X (and the scaled copy for dsyrk) is allocated empty and
  filled by k threads in the child, each pinned to its core and writing a contiguous
  share of the rows, so that on a multi-socket machine the pages lie on the nodes of the
  threads that read them (rather than all on the node of one initializing thread);
* **interleaving**: rounds over the thread counts in rotation (round r starts at the
  r-th count), and inside each child the calls in rotation after one warm-up call each
  (``benchmarks/_timing.py``); a cell is the minimum over the child's repeats and the
  rounds; ``spread`` is the largest ``max / min - 1`` over the rounds in a row;
* **wall seconds** (threaded rows), with the load average printed before, after, and at
  the start of every child.

GFlop/s count the useful flops of each product, the same for every peer of one product:
``n p (p + 1)`` for ``X^T D X`` (numpy's GEMM does twice that arithmetic; it is charged
the useful count), ``n p (p + 5)`` for the leverage pass (DTRMM ``n p (p + 1)``, X beta
and the row norms ``4 n p``), ``2 m^3`` for the DGEMM. Parallel efficiency at k threads is
``T(1) / (k T(k))``; ``of peak`` is a pass's GFlop/s over the DGEMM's at the same k.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field

#: The timed calls, in the order they run inside a child.
COLUMNS = ("hessian", "dsyrk", "numpy", "leverage", "pass", "fit", "dgemm")
#: Side of the square DGEMM that measures the attainable peak.
DGEMM_M = 4096
#: Problem sizes of the full and the quick run.
FULL = {"n": 1_000_000, "p": 200, "rounds": 3, "repeat": 3}
QUICK = {"n": 300_000, "p": 200, "rounds": 3, "repeat": 2}
#: Seconds a child may run before the benchmark gives up on it.
CHILD_TIMEOUT = 1800


def flops(column: str, n: int, p: int) -> float | None:
    """Useful flops of one call of ``column`` (None: no fixed count, the fit)."""
    if column in ("hessian", "dsyrk", "numpy"):
        return float(n) * p * (p + 1)
    if column == "leverage":
        return float(n) * p * (p + 5)
    if column == "dgemm":
        return 2.0 * DGEMM_M**3
    return None


# ------------------------------------------------------------------------------------
# the child: one thread count, pinned, its own OpenMP and BLAS settings


def pin(cpus: set[int]) -> bool:
    """Bind the calling thread (Linux: pid 0 is the caller) to ``cpus``; False where the
    system refuses (some sandboxes do), and the run goes on unpinned."""
    try:
        os.sched_setaffinity(0, cpus)
    except (OSError, AttributeError):
        return False
    return True


def _fill_first_touch(n: int, p: int, k: int, cpus: list[int], seed: int):
    """X (n x p, C order) and X scaled by sqrt(d) (F order: X^T as p x n, for dsyrk),
    allocated empty and written by k threads, each pinned to its core (first touch)."""
    import threading

    import numpy as np

    X = np.empty((n, p))
    Xs_t = np.empty((p, n), order="F")  # Xs_t.T is n x p, C order: sqrt(d) X
    d = np.random.default_rng([seed, 10**6]).uniform(0.0, 0.25, n)
    sd = np.sqrt(d)
    bounds = [n * i // k for i in range(k + 1)]

    def work(i: int) -> None:
        pin({cpus[i]})  # this thread only
        a, b = bounds[i], bounds[i + 1]
        np.random.default_rng([seed, i]).standard_normal(out=X[a:b])
        np.multiply(X[a:b], sd[a:b, None], out=Xs_t.T[a:b])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return X, Xs_t, d


def child(k: int, n: int, p: int, repeat: int, seed: int) -> dict:
    """Time every column at k threads in this (pinned, freshly started) process."""
    cpus = sorted(os.sched_getaffinity(0))
    load = os.getloadavg()
    pinned = len(cpus) == k
    import numpy as np
    from _timing import interleaved
    from scipy.linalg.blas import dgemm, dsyrk
    from threadpoolctl import threadpool_info, threadpool_limits

    import aloocv
    from aloocv import _blas, _core

    X, Xs_t, d = _fill_first_touch(n, p, k, cpus, seed)
    rng = np.random.default_rng(seed + 1)
    with threadpool_limits(limits=k):
        beta = rng.standard_normal(p) / np.sqrt(p) * 2.0
        y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ beta)))).astype(np.float64)
        A = np.asfortranarray(rng.standard_normal((DGEMM_M, DGEMM_M)))
        B = np.asfortranarray(rng.standard_normal((DGEMM_M, DGEMM_M)))
        with _blas.single_threaded_blas():
            H = _core.hessian(X, d, fit_intercept=False, n_threads=k)
        H[np.diag_indices(p)] += 1.0  # the penalized Hessian of an L2 fit, lambda = 1
        pen = aloocv.L2(1.0)

        def hessian():
            with _blas.single_threaded_blas():
                return _core.hessian(X, d, fit_intercept=False, n_threads=k)

        def leverage():
            with _blas.single_threaded_blas():
                return _core.chunk_loo(
                    X,
                    y,
                    None,
                    "logistic",
                    fit_intercept=False,
                    beta=beta,
                    H=H,
                    method="alo",
                    gradient=False,
                    inv_sw=1.0 / n,
                    n_threads=k,
                )

        calls = {
            "hessian": hessian,
            "dsyrk": lambda: dsyrk(1.0, Xs_t, trans=0),
            "numpy": lambda: (X * d[:, None]).T @ X,
            "leverage": leverage,
            "pass": lambda: _core.chunk_sums(
                X,
                y,
                None,
                "logistic",
                fit_intercept=False,
                beta=beta,
                hessian=False,
                check=False,
                n_threads=k,
            ),
            "fit": lambda: aloocv.fit(X, y, loss="logistic", penalty=pen, tol=1e-6, n_jobs=k),
            "dgemm": lambda: dgemm(1.0, A, B),
        }
        T = interleaved(calls, repeat, clock="wall")
        blas = "; ".join(
            f"{i['internal_api']} {i.get('version') or ''} {i.get('architecture') or ''} "
            f"({os.path.basename(i['filepath'])})"
            for i in threadpool_info()
            if i["user_api"] == "blas"
        )
    # the peers compute the same matrix (dsyrk: its upper triangle)
    Hc, Hs, Hn = T["hessian"].result, T["dsyrk"].result, T["numpy"].result
    agree = bool(
        np.allclose(np.triu(Hc), np.triu(Hs), rtol=1e-9, atol=1e-6)
        and np.allclose(Hc, Hn, rtol=1e-9, atol=1e-6)
    )
    return {
        "k": k,
        "cpus": cpus,
        "load": load,
        "seconds": {c: T[c].seconds for c in COLUMNS},
        "samples": {c: list(T[c].samples) for c in COLUMNS},
        "fit_iter": int(T["fit"].result.n_iter_),
        "agree": agree,
        "pinned": pinned,
        "omp_max_threads": int(_core.max_threads()),
        "blas": blas,
        "numpy": np.__version__,
        "aloocv": aloocv.__version__,
    }


# ------------------------------------------------------------------------------------
# the parent: thread counts in rotation, one child each


def child_env(k: int, cpus: list[int]) -> dict[str, str]:
    """The environment of the child at k threads: OpenMP pinned to ``cpus[:k]``."""
    env = dict(os.environ)
    env.update(
        {
            "OMP_NUM_THREADS": str(k),
            "OMP_PROC_BIND": "close",
            "OMP_PLACES": ",".join(f"{{{c}}}" for c in cpus[:k]),
            "OMP_DYNAMIC": "false",
            "OPENBLAS_NUM_THREADS": str(k),
            "MKL_NUM_THREADS": str(k),
            "BLIS_NUM_THREADS": str(k),
        }
    )
    return env


def run_child(k: int, cpus: list[int], args: argparse.Namespace) -> dict:
    """Start the child for k threads, bound to the first k cores, and read its JSON."""
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        str(k),
        "--n",
        str(args.n),
        "--p",
        str(args.p),
        "--repeat",
        str(args.repeat),
        "--seed",
        str(args.seed),
    ]
    mask = set(cpus[:k])
    out = subprocess.run(
        cmd,
        env=child_env(k, cpus),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        check=False,
        # before exec: the child's numpy, BLAS and OpenMP threads inherit this mask
        preexec_fn=lambda: pin(mask) and None,
    )
    if out.returncode != 0:
        raise RuntimeError(f"child at {k} threads failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


@dataclass
class Cell:
    """The minima of one (thread count, column) over the rounds."""

    rounds: list[float] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return min(self.rounds)

    @property
    def spread(self) -> float:
        return max(self.rounds) / min(self.rounds) - 1.0


def machine() -> str:
    """CPU model, cores, SMT siblings and NUMA nodes of this machine (Linux)."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        nodes = len(
            [
                x
                for x in os.listdir("/sys/devices/system/node")
                if x.startswith("node") and x[4:].isdigit()
            ]
        )
    except OSError:
        nodes = 0
    try:
        with open("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list") as fh:
            sib = fh.read().strip()
    except OSError:
        sib = "?"
    return (
        f"{model}; {os.cpu_count()} logical CPUs, {len(os.sched_getaffinity(0))} available; "
        f"SMT siblings of cpu0: {sib}; NUMA nodes: {nodes or '?'}"
    )


def render(
    cells: dict[int, dict[str, Cell]], info: dict[int, dict], n: int, p: int
) -> tuple[list[str], list[list[str]], list[str], list[list[str]]]:
    """Two tables: seconds and GFlop/s; efficiencies and ratios."""
    ks = sorted(cells)
    one = cells.get(1)
    head1 = ["threads"]
    for c in COLUMNS:
        head1.append(f"{c} [s]")
        if flops(c, n, p) is not None:
            head1.append(f"{c} GF/s")
        if c == "pass":
            head1.append("pass GB/s")
    head1.append("spread")
    rows1 = []
    for k in ks:
        r = [str(k)]
        for c in COLUMNS:
            t = cells[k][c].seconds
            r.append(f"{t:.4g}")
            f = flops(c, n, p)
            if f is not None:
                r.append(f"{f / t / 1e9:.1f}")
            if c == "pass":
                r.append(f"{8.0 * n * p / t / 1e9:.1f}")
        r.append(f"{100 * max(cells[k][c].spread for c in COLUMNS):.0f}%")
        rows1.append(r)
    head2 = ["threads"] + [f"{c} eff" for c in COLUMNS if one is not None]
    head2 += ["hessian/dsyrk", "hessian/numpy", "hessian of peak", "leverage of peak"]
    head2 += ["fit its", "load at start"]
    rows2 = []
    for k in ks:
        s = {c: cells[k][c].seconds for c in COLUMNS}
        r = [str(k)]
        if one is not None:
            r += [f"{100 * one[c].seconds / (k * s[c]):.0f}%" for c in COLUMNS]
        peak = flops("dgemm", n, p) / s["dgemm"]
        r += [
            f"{s['hessian'] / s['dsyrk']:.3f}",
            f"{s['hessian'] / s['numpy']:.3f}",
            f"{100 * flops('hessian', n, p) / s['hessian'] / peak:.0f}%",
            f"{100 * flops('leverage', n, p) / s['leverage'] / peak:.0f}%",
            str(info[k]["fit_iter"]),
            ", ".join(f"{x:.2f}" for x in info[k]["loads"]),
        ]
        rows2.append(r)
    return head1, rows1, head2, rows2


def table(head: list[str], rows: list[list[str]], markdown: bool) -> str:
    """An aligned text table or a Markdown table."""
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "|".join("---:" for _ in head) + "|"]
        return "\n".join(out + ["| " + " | ".join(r) + " |" for r in rows])
    w = [max(len(x) for x in col) for col in zip(head, *rows)]
    out = ["  ".join(h.rjust(wi) for h, wi in zip(head, w)), "  ".join("-" * wi for wi in w)]
    return "\n".join(out + ["  ".join(x.rjust(wi) for x, wi in zip(r, w)) for r in rows])


def main(argv: list[str] | None = None) -> int:
    """Parse the options; as the parent, run the rounds and write the tables."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="n=300000, 3 rounds (minutes)")
    ap.add_argument("--n", type=int, default=None, help="rows (default 1e6; quick 300000)")
    ap.add_argument("--p", type=int, default=None, help="columns (default 200)")
    ap.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=None,
        help="thread counts (default 1 2 4 8 16 ... up to --max-threads)",
    )
    ap.add_argument(
        "--max-threads", type=int, default=None, help="largest thread count (default: cores)"
    )
    ap.add_argument("--rounds", type=int, default=None, help="rounds over the thread counts")
    ap.add_argument("--repeat", type=int, default=None, help="timed repeats in each child")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", metavar="FILE", help="write the tables as Markdown")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    preset = QUICK if args.quick else FULL
    args.n = args.n or preset["n"]
    args.p = args.p or preset["p"]
    args.rounds = args.rounds or preset["rounds"]
    args.repeat = args.repeat or preset["repeat"]
    if args.n < 2 or args.p < 1 or args.rounds < 1 or args.repeat < 1:
        ap.error("--n >= 2, --p >= 1, --rounds >= 1 and --repeat >= 1 are required")
    if args.child is not None:
        print(json.dumps(child(args.child, args.n, args.p, args.repeat, args.seed)))
        return 0

    cpus = sorted(os.sched_getaffinity(0))
    top = min(args.max_threads or len(cpus), len(cpus))
    counts = args.threads or [k for k in (1, 2, 4, 8, 16, 32, 64, 128) if k <= top]
    if top not in counts and args.threads is None:
        counts.append(top)
    over = [k for k in counts if k > len(cpus)]
    if over:
        ap.error(f"thread counts {over} exceed the {len(cpus)} cores available to this process")
    counts = sorted(set(counts))
    if 1 not in counts:
        print("(no 1-thread count: efficiencies are left out)")
    n, p = args.n, args.p
    load0 = os.getloadavg()
    print(f"machine: {machine()}")
    print(
        f"X^T D X and the passes at n={n} p={p} float64 ({n * p * 8 / 2**30:.2f} GiB X); "
        f"threads {counts}; {args.rounds} rounds, {args.repeat} repeats in each child"
    )
    print(f"load average before: {load0}")
    t0 = time.perf_counter()
    cells: dict[int, dict[str, Cell]] = {k: {c: Cell() for c in COLUMNS} for k in counts}
    info: dict[int, dict] = {k: {"loads": []} for k in counts}
    for r in range(args.rounds):
        order = counts[r % len(counts) :] + counts[: r % len(counts)]
        for k in order:
            res = run_child(k, cpus, args)
            for c in COLUMNS:
                cells[k][c].rounds.append(res["seconds"][c])
            info[k]["loads"].append(res["load"][0])
            info[k].update(
                {x: res[x] for x in ("fit_iter", "agree", "pinned", "blas", "omp_max_threads")}
            )
            info[k]["versions"] = f"numpy {res['numpy']}, aloocv {res['aloocv']}"
            print(
                f"  round {r + 1} k={k:3d}: "
                + ", ".join(f"{c} {res['seconds'][c]:.4g}" for c in COLUMNS)
                + f" s | load {res['load'][0]:.2f} | OpenMP max threads {res['omp_max_threads']}"
                + ("" if res["pinned"] else " | NOT PINNED")
                + ("" if res["agree"] else " | PEERS DISAGREE"),
                flush=True,
            )
    load1 = os.getloadavg()
    wall = time.perf_counter() - t0
    h1, r1, h2, r2 = render(cells, info, n, p)
    print(f"\n{table(h1, r1, False)}\n\n{table(h2, r2, False)}\n")
    print(f"load average after: {load1}; {wall:.0f} s")
    bad = [k for k in counts if not info[k]["agree"]]
    if bad:
        print(f"the peers' matrices disagree with the core's at {bad} threads")
    if args.out:
        k0 = counts[0]
        text = [
            f"# Multicore scaling: n={n}, p={p}, float64",
            "",
            f"Machine: {machine()}. BLAS: {info[k0]['blas']}. {info[k0]['versions']}.",
            "",
            f"Thread counts {counts} in {args.rounds} rotated rounds, each count in a child "
            f"process pinned to the first k cores (OMP_PROC_BIND=close, OMP_PLACES one core "
            f"each), X first-touched by k pinned threads; {args.repeat} interleaved repeats "
            f"per child after a warm-up; cells: minimum wall seconds over repeats and rounds. "
            f"Load average before {load0}, after {load1}; {wall:.0f} s in all.",
            "",
            table(h1, r1, True),
            "",
            table(h2, r2, True),
            "",
            "GF/s: useful flops (n p (p+1) for X^T D X whoever computes it, n p (p+5) for the "
            f"leverage pass, 2 m^3 for the DGEMM at m={DGEMM_M}) per second. eff: "
            "T(1) / (k T(k)). of peak: GF/s over the DGEMM's at the same k. spread: the "
            "largest max/min - 1 over the rounds in the row. pass GB/s: bytes of X (8 n p) "
            "read per second by the fused pass. fit its: Newton iterations.",
            "",
            "Peers' matrices agree with the core's: "
            + ("yes" if not bad else f"NO at {bad} threads")
            + ". Children bound to their k cores: "
            + ("yes" if all(info[k]["pinned"] for k in counts) else "NO (the system refused)")
            + ".",
            "",
        ]
        with open(args.out, "w") as fh:
            fh.write("\n".join(text))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
