"""Memory pre-checks: the budget and the large allocations of each route, in one place.

Before a route allocates its ``O(p^2)``, ``O((K p)^2)``, ``O(n^2)`` or ``O(n K^2)``
buffers, :func:`check_memory` (called once per call by the route table,
:func:`aloocv.backends.route.choose`) compares their size with a budget and raises a
``MemoryError`` that names the matrix, its size, the budget and the route to take instead;
:func:`fits` answers the same question as a bool (for a solver that falls back by itself).

The budget is ``memory_limit=`` (bytes, or a string such as ``"2GB"``, ``"1.5 GiB"``), or
else the memory the operating system reports as available (Linux ``MemAvailable``), times
:data:`SAFETY_FRACTION` in both cases. Where nothing is known there is no cap.

The model counts the dense buffers the core holds at once (``cpp/src/*.cpp``), roughly
(within a small factor, never the per-sample vectors): see :func:`allocations`.

Examples
--------
>>> from aloocv._memory import parse_bytes, format_bytes
>>> parse_bytes("1.5 GiB")
1610612736.0
>>> format_bytes(80e9)
'80.0 GB'
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "Allocation",
    "Budget",
    "allocations",
    "available_memory",
    "budget",
    "check_memory",
    "fits",
    "format_bytes",
    "largest_fold",
    "parse_bytes",
]

#: The share of the budget (``memory_limit=`` or the available memory) that the counted
#: buffers may take: the rest is for what the model leaves out (vectors of length n, the
#: design's row blocks, Python's own objects) and for the other processes.
SAFETY_FRACTION = 0.8
#: Counted buffers of at most this many bytes in all are not checked against the
#: available memory: reading it (``/proc/meminfo``, tens of microseconds on a loaded
#: machine) would cost small calls more than the check can save, and a process short of
#: 8 MiB fails before it gets here. ``memory_limit=`` checks every size.
UNCHECKED_BYTES = 8 * 2**20
#: Bytes of one double.
DOUBLE = 8
#: The core's budget, in doubles, for the partial sums of one row-blocked reduction
#: (``reduction_chunks`` in ``cpp/include/aloocv/common.hpp``: 256 MiB); a single partial
#: larger than that is still allocated once.
PARTIALS_BUDGET_DOUBLES = 32 * 1024 * 1024
#: Primal route: the penalized Hessian, its Cholesky factor and the kept unpenalized copy.
PRIMAL_MATRICES = 3
#: Tuning on the primal route: one more p1 x p1 matrix for the exact hypergradient, and
#: the kept copy of the best point's state (its factor and unpenalized Hessian:
#: ``TuneState.keep``, ``python/aloocv/tuning/objective.py``).
TUNE_EXTRA_MATRICES = 3
#: Exact refits (``method="exact"``): a fresh Hessian factor per thread in flight.
REFIT_MATRICES_PER_THREAD = 1
#: Approximate K-fold: the fold's kernel ``K_S`` (or ``H_{-S}``) and its factor per thread.
FOLD_MATRICES_PER_THREAD = 2
#: Dual route: the column chunks of the kernel's reduction (``dual_kernel``) ...
DUAL_KERNEL_CHUNKS = 8
#: ... whose partials each hold an n x n matrix (at least 32 columns per chunk) ...
DUAL_MIN_CHUNK_COLUMNS = 32
#: ... and the n x n matrices of the Newton steps and leverages (the kernel, the centered
#: kernel, S K, I + S K S and its factor, Q).
DUAL_MATRICES = 5
#: Multinomial loss: the K p1 x K p1 Hessian and its factor (fit); with the hypergradient
#: (tuning) also S, H^{-1} and H^{-1} S H^{-1}.
#: The enet fit's working-set Hessian on sparse rows: formed only while |W|^2 <= this many
#: times nnz(X_W) + n (else the naive model solve, no |W| x |W| matrix; enet_naive.cpp).
ENET_GRAM_RATIO = 4
MULTINOMIAL_MATRICES = 2
MULTINOMIAL_GRADIENT_MATRICES = 3
#: Multinomial ALO: the per-sample K x K leverage blocks and the adjoint's blocks.
MULTINOMIAL_BLOCK_ARRAYS = 2
#: The matrix-free multinomial route: the jackknife's groups (``MAX_GROUPS`` of
#: ``backends/memory/matrix_free_multinomial.py``), the (n, K, K) arrays its evaluations
#: hold at once (the blocks, their symmetric part, K L, L^T K L, its eigenvectors, the
#: curvature's square root L and the returned blocks and their standard errors), and the
#: columns of one block product (``kMnBatchColumns``, cpp/include/aloocv/
#: matrix_free_multinomial.hpp).
MULTINOMIAL_MF_GROUPS = 8
MULTINOMIAL_MF_BLOCK_ARRAYS = 8
MULTINOMIAL_MF_COLUMNS = 32
#: The matrix-free multinomial fit: n x K and p1 x K arrays held at once (scores, trial
#: scores, probabilities, gradient weights and the products' work; coefficients, gradient
#: and the PCG's five vectors and the preconditioner).
MULTINOMIAL_MF_FIT_ARRAYS = 8
#: The ridge path and several targets: the p1 x p1 Gram matrix, the eigenvectors and
#: the eigensolver's workspace.
EIGEN_MATRICES = 3
#: Dask: the Hessian, its factor and the reduced sum on the client ...
DASK_CLIENT_MATRICES = 3
#: ... and one partial Hessian per chunk task on each worker.
DASK_WORKER_MATRICES = 1
#: The alternative solver for scalar L2 losses that holds no p x p matrix.
#: Probes solved side by side by the matrix-free route (cpp/src/matrix_free.cpp).
MATRIX_FREE_BLOCK = 8
MATRIX_FREE = "solver='matrix_free' (Newton-CG and randomized leverages, no p x p matrix)"
#: Units of ``memory_limit=`` strings (case-insensitive; as dask's ``parse_bytes``):
#: decimal (kB = 1000 bytes) and binary (KiB = 1024 bytes).
BYTE_UNITS = {
    "": 1,
    "b": 1,
    **{f"{u}{s}": 1000**k for k, u in enumerate("kmgtp", 1) for s in ("", "b")},
    **{f"{u}i{s}": 1024**k for k, u in enumerate("kmgtp", 1) for s in ("", "b")},
}
_BYTES_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
#: Where Linux reports the available memory.
MEMINFO = "/proc/meminfo"
#: Bytes read of it (MemAvailable is its third line; the whole file is about 1.5 kB).
MEMINFO_BYTES = 8192


# ----------------------------------------------------------------------------- bytes
def parse_bytes(text: str) -> float:
    """Bytes of a string such as ``"2GB"``, ``"1.5 GiB"``, ``"500MB"`` or ``"1e9"``
    (ValueError naming the string otherwise)."""
    m = _BYTES_RE.match(text)
    unit = m.group(2).lower() if m else None
    if m is None or unit not in BYTE_UNITS:
        raise ValueError(
            f"memory_limit={text!r} is not a size: expected a number of bytes or a string "
            "such as '2GB', '1.5 GiB' or '500MB' (units B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)"
        )
    return float(m.group(1)) * BYTE_UNITS[unit]


def format_bytes(n: float) -> str:
    """``n`` bytes in decimal units, three significant figures at most (``'1.6 GB'``)."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} bytes"


# ----------------------------------------------------------------------------- budget
def available_memory() -> int | None:
    """Bytes the operating system says are available now: Linux ``MemAvailable``, else
    the free physical pages; None where neither is known."""
    try:
        # os.read of the whole file: half the time of a text file's line iterator
        fd = os.open(MEMINFO, os.O_RDONLY)
        try:
            text = os.read(fd, MEMINFO_BYTES)
        finally:
            os.close(fd)
        for line in text.splitlines():
            if line.startswith(b"MemAvailable:"):
                return int(line.split()[1]) * 1024  # reported in kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


@dataclass(frozen=True)
class Budget:
    """The bytes a call's counted buffers may take.

    Attributes
    ----------
    nbytes : float or None
        None: nothing is known (no cap).
    source : str
        ``"memory_limit="`` or ``"the available memory"`` (what the budget is a share of).
    total : float or None
        The limit or the available memory it is :data:`SAFETY_FRACTION` of.
    """

    nbytes: float | None
    source: str
    total: float | None = None

    def describe(self) -> str:
        """``'1.6 GB (80% of memory_limit=2.0 GB)'``."""
        if self.nbytes is None or self.total is None:
            return "no cap"
        sep = "" if self.source.endswith("=") else " "
        share = f"{SAFETY_FRACTION:.0%} of {self.source}{sep}{format_bytes(self.total)}"
        return f"{format_bytes(self.nbytes)} ({share})"


def budget(memory_limit: float | None = None) -> Budget:
    """The budget of a call: :data:`SAFETY_FRACTION` of ``memory_limit`` (bytes, checked)
    or of the available memory."""
    if memory_limit is not None:
        return Budget(SAFETY_FRACTION * memory_limit, "memory_limit=", float(memory_limit))
    avail = available_memory()
    if avail is None:
        return Budget(None, "the available memory")
    return Budget(SAFETY_FRACTION * avail, "the available memory", float(avail))


# ----------------------------------------------------------------------------- the model
@dataclass(frozen=True)
class Allocation:
    """One group of large buffers a route holds at once.

    Attributes
    ----------
    name : str
        The matrix in words, with its shape (``"the 50001 x 50001 Hessian of the primal
        route"``).
    nbytes : float
        Bytes of the group (every copy the route holds at once).
    alternative : str
        What to do instead (another solver or route, fewer classes, ...).
    where : {"client", "worker"}
        ``"worker"``: held by each dask worker (checked against ``memory_limit=`` only:
        the workers' memory is not this process's).
    """

    name: str
    nbytes: float
    alternative: str
    where: str = "client"


def _sq(m: int, copies: float = 1.0) -> float:
    return copies * float(m) * float(m) * DOUBLE


def _partials(p1: int, n_threads: int) -> float:
    """Bytes of a row-blocked reduction's partial sums (``hessian`` in the core)."""
    pp = float(p1) * p1
    return DOUBLE * pp * max(1, min(n_threads, PARTIALS_BUDGET_DOUBLES // max(1, int(pp))))


def _route_fields(route: Any, pb: Any) -> tuple[str, str, str]:
    if isinstance(route, str):
        return pb.backend, _model(pb), route
    return route.backend, route.model, route.solver


def _model(pb: Any) -> str:
    if pb.is_multinomial:
        return "multinomial"
    if getattr(pb, "is_multi_target", False):
        return "multi_target"
    return "scalar"


def _dual_applies(pb: Any) -> bool:
    return pb.l1 is None and bool((pb.l2 > 0).all())


def _dual_bytes(pb: Any) -> float:
    n, p = pb.n_samples, pb.n_features
    chunks = max(1, min(DUAL_KERNEL_CHUNKS, p // DUAL_MIN_CHUNK_COLUMNS))
    return _sq(n, max(1 + chunks, DUAL_MATRICES))


def _primal_bytes(pb: Any, extra: int = 0) -> float:
    p1 = pb.n_coef
    return _sq(p1, PRIMAL_MATRICES + extra) + _partials(p1, pb.options.n_threads)


def _scalar_alternative(pb: Any, cap: float | None, solver: str) -> str:
    """The routes a scalar-loss problem can take instead, with their sizes."""
    out = []
    if pb.l1 is None and not pb.is_dask:
        out.append(MATRIX_FREE)
    if solver == "primal" and _dual_applies(pb) and pb.n_samples < pb.n_features:
        d = _dual_bytes(pb)
        if cap is None or d <= cap:
            out.append(f"solver='dual' (n x n matrices, about {format_bytes(d)})")
    if solver == "dual":
        d = _primal_bytes(pb)
        if cap is None or d <= cap:
            out.append(f"solver='primal' (p x p matrices, about {format_bytes(d)})")
    if pb.l1 is None:
        out.append("an L1 term (aloocv.ElasticNet: the Hessian of the active features only)")
    else:
        out.append("a larger L1 penalty (fewer active features)")
    if not pb.is_dask:
        out.append("fewer features")
    return "use " + ", or ".join(out)


def allocations(
    pb: Any,
    route: Any,
    verb: str,
    *,
    method: str = "alo",
    fold_size: int | None = None,
    cap: float | None = None,
    fit_first: bool = False,
) -> list[Allocation]:
    """The large buffers of ``verb`` on ``route`` for the problem ``pb`` (roughly: the
    dense matrices the core holds at once; see the module's constants).

    Parameters
    ----------
    pb : Problem
    route : Route or str
        A :class:`aloocv.backends.route.Route`, or a solver name (``"primal"``,
        ``"dual"``, ``"matrix_free"``) for ``pb``'s backend and model.
    verb : {"fit", "loo", "kfold", "tune"}
    method : str
        The leave-one-out or K-fold method (``"exact"``: refits in parallel).
    fold_size : int, optional
        The largest fold of a K-fold call (None: as large as it matters, p + 1).
    cap : float, optional
        The budget in bytes, to offer only the alternatives that fit it.
    fit_first : bool
        ``verb="loo"`` of an elastic net that fits before its ALO (``enet_fit_first`` of
        the memory backend): the fit's buffers here; the active set's matrices are checked
        once the fit has found it.
    """
    backend, model, solver = _route_fields(route, pb)
    p1, nt = pb.n_coef, pb.options.n_threads
    if model == "multinomial":
        return _multinomial(pb, backend, verb, solver)
    if backend == "dask":
        alt = "use fewer features, or an L1 term (the Hessian of the active features only)"
        return [
            Allocation(
                f"the {p1} x {p1} Hessian of the dask route and its factor on the client",
                _sq(p1, DASK_CLIENT_MATRICES),
                alt,
            ),
            Allocation(
                f"the {p1} x {p1} partial Hessian of each dask worker's chunk task",
                _sq(p1, DASK_WORKER_MATRICES),
                alt,
                "worker",
            ),
        ]
    if solver == "matrix_free":
        # the probe blocks (3 n x m and 7 p1 x m, m = MATRIX_FREE_BLOCK), the CSC index and
        # the dual form's head columns (at most X's entries, and two k x k matrices)
        n = pb.n_samples
        nnz = int(pb.X.nnz) if hasattr(pb.X, "nnz") else 0
        from . import _core

        k = min(_core.DUAL_HEAD_COLUMNS, pb.n_features // 4) if nnz else 0
        nbytes = 8 * MATRIX_FREE_BLOCK * (3 * n + 7 * p1) + 24 * nnz + 16 * k * k
        m = MATRIX_FREE_BLOCK
        what = f"the probe storage of the matrix-free route ({n} x {m} and {p1} x {m} blocks)"
        return [Allocation(what, nbytes, "a larger memory_limit=, or dask input")]
    if model == "multi_target" or solver == "ridge_path":
        what = "several targets" if model == "multi_target" else "the ridge path"
        return [
            Allocation(
                f"the {p1} x {p1} eigendecomposition of X^T X of {what}",
                _sq(p1, EIGEN_MATRICES) + _partials(p1, nt),
                "use fewer features, or (one target) aloocv.fit/loo with " + MATRIX_FREE,
            )
        ]
    alt = _scalar_alternative(pb, cap, solver)
    if solver == "dual":
        n = pb.n_samples
        what = f"the {n} x {n} kernel of the dual route (with its factor and work matrices)"
        return [Allocation(what, _dual_bytes(pb), alt)]
    if pb.l1 is not None and (verb == "fit" or fit_first) and hasattr(pb.X, "nnz"):
        # a fit keeps no active-set factor, and sparse rows bound its working sets' Hessians
        # (docs/math/newton.md, "The elastic net's working sets")
        nbytes = DOUBLE * ENET_GRAM_RATIO * (float(pb.X.nnz) + pb.n_samples) * (1 + nt)
        what = "the working-set Hessians of the elastic-net fit (and their partial sums)"
        return [Allocation(what, nbytes, alt)]
    extra = TUNE_EXTRA_MATRICES if verb == "tune" else 0
    name = "Hessian of the elastic net's active set" if pb.l1 is not None else "Hessian"
    what = f"the {p1} x {p1} {name} of the primal route (with its factor and copies)"
    out = [Allocation(what, _primal_bytes(pb, extra), alt)]
    if method == "exact" and verb in ("loo", "kfold"):
        out.append(
            Allocation(
                f"the {p1} x {p1} factors of exact refits ({nt} threads)",
                _sq(p1, REFIT_MATRICES_PER_THREAD * nt),
                alt,
            )
        )
    elif verb == "kfold":
        q = min(p1, fold_size or p1)
        out.append(
            Allocation(
                f"the {q} x {q} fold downdates of K-fold ({nt} threads)",
                _sq(q, FOLD_MATRICES_PER_THREAD * nt),
                alt,
            )
        )
    return out


def _multinomial(pb: Any, backend: str, verb: str, solver: str = "primal") -> list[Allocation]:
    p1 = pb.n_coef
    K = max(2, int(getattr(pb.loss, "n_outputs", None) or 2))  # dask: learned later
    if solver == "matrix_free":
        n = pb.n_samples
        nnz = int(pb.X.nnz) if hasattr(pb.X, "nnz") else 0
        if verb == "fit":
            # the Newton-CG blocks: n x K scores, probabilities and products, p1 x K
            # coefficients, gradient and PCG vectors; the CSC index
            nbytes = DOUBLE * MULTINOMIAL_MF_FIT_ARRAYS * K * (n + p1) + 12 * nnz
            what = f"the {n} x {K} and {p1} x {K} blocks of the matrix-free multinomial fit"
            return [Allocation(what, nbytes, "a larger memory_limit=, or fewer classes")]
        # the group estimates (plain and control, packed), the per-sample K x K arrays of
        # the jackknife's evaluations, the probe blocks (3 n x m and 7 p1 x m columns,
        # m = MULTINOMIAL_MF_COLUMNS) and the CSC index
        m = max(MULTINOMIAL_MF_COLUMNS, K)
        groups = 2.0 * MULTINOMIAL_MF_GROUPS * n * K * (K + 1) / 2
        nbytes = DOUBLE * (groups + MULTINOMIAL_MF_BLOCK_ARRAYS * n * K * K + m * (3 * n + 7 * p1))
        what = (
            f"the probe storage of the matrix-free multinomial route ({n} x {K} x {K} blocks, "
            f"{MULTINOMIAL_MF_GROUPS} groups of them)"
        )
        alt = "a larger memory_limit=, or fewer classes"
        return [Allocation(what, nbytes + 12 * nnz, alt)]
    dim = K * p1
    copies = MULTINOMIAL_MATRICES + (MULTINOMIAL_GRADIENT_MATRICES if verb == "tune" else 0)
    alt = (
        "use fewer classes (merge rare ones) or fewer features (the Hessian grows as "
        "(K (p+1))^2), or solver='matrix_free' (Newton-CG and randomized leverage blocks, "
        "no K (p+1) x K (p+1) matrix; method='alo', no hypergradient)"
    )
    where = "the dask route's client" if backend == "dask" else "the multinomial route"
    out = [Allocation(f"the {dim} x {dim} (K (p+1))^2 Hessian of {where}", _sq(dim, copies), alt)]
    if verb != "fit" and backend != "dask":
        n = pb.n_samples
        out.append(
            Allocation(
                f"the {n} x {K} x {K} leverage blocks of multinomial ALO",
                float(MULTINOMIAL_BLOCK_ARRAYS) * n * K * K * DOUBLE,
                alt,
            )
        )
    return out


# ----------------------------------------------------------------------------- checks
def _counted(allocs: list[Allocation], b: Budget) -> list[Allocation]:
    """The allocations checked against ``b``: the workers' only against ``memory_limit=``."""
    return [a for a in allocs if a.where == "client" or b.source == "memory_limit="]


def fits(pb: Any, solver: str, verb: str, **kwargs: Any) -> bool:
    """Whether ``verb`` with ``solver`` (``"primal"``, ``"dual"``, ``"matrix_free"``) fits
    the budget of ``pb`` (``memory_limit=`` or the available memory).

    Examples
    --------
    >>> import numpy as np, aloocv
    >>> from aloocv.problem import Problem
    >>> X = np.zeros((10, 3)); y = np.zeros(10)
    >>> pb = Problem.build(X, y, loss="squared", memory_limit="1MB")
    >>> fits(pb, "primal", "fit")
    True
    >>> pb = Problem.build(np.zeros((10, 400)), y, loss="squared", memory_limit="1MB")
    >>> fits(pb, "primal", "fit"), fits(pb, "matrix_free", "fit")
    (False, True)
    """
    if _unchecked(pb, solver, verb, kwargs):
        return True
    b = budget(pb.options.memory_limit)
    if b.nbytes is None:
        return True
    need = sum(a.nbytes for a in _counted(allocations(pb, solver, verb, **kwargs), b))
    return need <= b.nbytes


def _unchecked(pb: Any, route: Any, verb: str, kwargs: dict[str, Any]) -> bool:
    """Whether the counted buffers are too small to be checked against the available
    memory (:data:`UNCHECKED_BYTES`; never with ``memory_limit=``)."""
    if pb.options.memory_limit is not None:
        return False
    none = Budget(None, "the available memory")  # the same allocations are counted
    allocs = allocations(pb, route, verb, **{k: v for k, v in kwargs.items() if k != "cap"})
    return sum(a.nbytes for a in _counted(allocs, none)) <= UNCHECKED_BYTES


def check_memory(pb: Any, route: Any, verb: str, **kwargs: Any) -> None:
    """Raise ``MemoryError`` when the large buffers of ``verb`` on ``route`` exceed the
    budget of ``pb``; the message names the largest matrix, the sizes, the budget and its
    source, and the alternative. ``kwargs``: as :func:`allocations`."""
    if _unchecked(pb, route, verb, kwargs):
        return
    b = budget(pb.options.memory_limit)
    if b.nbytes is None:
        return
    allocs = _counted(allocations(pb, route, verb, cap=b.nbytes, **kwargs), b)
    need = sum(a.nbytes for a in allocs)
    if need <= b.nbytes or not allocs:
        return
    big = max(allocs, key=lambda a: a.nbytes)
    rest = "" if len(allocs) == 1 else f" ({format_bytes(need)} with the route's other buffers)"
    raise MemoryError(
        f"aloocv.{verb}: {big.name} needs about {format_bytes(big.nbytes)}{rest}, more than "
        f"the memory budget of {b.describe()}; {big.alternative}; or raise memory_limit= "
        "if the memory is there"
    )


def largest_fold(n_samples: int, req: Any) -> int | None:
    """The largest fold a K-fold request asks for, where it is cheap to know (None: not
    known before the folds are made)."""
    if req is None or (req.cv is not None and not isinstance(req.cv, int)):
        return None
    if req.folds is not None:
        try:
            return int(np.unique(np.asarray(req.folds), return_counts=True)[1].max())
        except (TypeError, ValueError):
            return None
    k = req.cv if req.cv is not None else req.n_folds
    k = k if isinstance(k, int) and k >= 1 else 10
    return math.ceil(n_samples / k)
