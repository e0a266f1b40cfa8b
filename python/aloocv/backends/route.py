"""The route table: the one place that asks where a problem lives and how it is solved.

:func:`choose` answers, once per call, the three questions every verb used to ask on its
own: which backend (in memory or dask), which model (a scalar-eta loss, the multinomial
loss with K outputs, or several squared-loss targets) and which solver (the primal p x p
Newton or the dual n x n route). It also refuses the combinations a route does not offer,
with a message that names the alternative. The verbs then call :func:`fit`, :func:`loo`,
:func:`kfold` or :func:`tune_state` with the chosen :class:`Route`; those look the
backend's implementation up in one table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._memory import check_memory, fits, largest_fold
from .._validation import SOLVERS, choose_solver
from ..folds import FoldRequest, fold_plan
from ..penalties import L2
from ..problem import Problem
from .common import LOORequest
from .memory import matrix_free as memory_matrix_free
from .memory import matrix_free_multinomial as memory_mf_multinomial
from .memory import multinomial as memory_multinomial
from .memory import multitarget as memory_multitarget
from .memory import scalar as memory_scalar

__all__ = ["Route", "choose", "costs", "fit", "kfold", "loo", "tune_state"]

#: Products with X~ (O(nnz) each) of a matrix-free ALO including its fit, about: a
#: Newton-CG fit (~8 steps of ~20 CG iterations, two products each) and 64 probes solved
#: in blocks by ~30 PCG iterations. Checked on sparse logistic designs (one thread, ALO with
#: its fit, primal vs matrix-free): 40000 x 300 at 0.6 entries per row 0.08 vs 0.20 s (the
#: model: primal), 20000 x 1000 at 10 per row 0.58 vs 0.35 s and 5000 x 3000 at 30 per
#: row 14.5 vs 0.52 s (matrix-free); the exact routes win below this cost, and their
#: leverages are exact.
MATRIX_FREE_PRODUCTS = 4000.0


@dataclass(frozen=True)
class Route:
    """How one call is solved.

    Attributes
    ----------
    backend : {"memory", "dask"}
    model : {"scalar", "multinomial", "multi_target"}
    solver : {"primal", "dual", "matrix_free", "ridge_path"}
        ``"ridge_path"``: a squared-loss L2 grid from one eigendecomposition (tuning);
        ``"matrix_free"``: Newton-CG and randomized leverages, products with X only.
    """

    backend: str
    model: str
    solver: str = "primal"


def _model(pb: Problem) -> str:
    if pb.is_multinomial:
        return "multinomial"
    if pb.is_multi_target:
        return "multi_target"
    return "scalar"


def _unsupported(what: str, **options: tuple[Any, Any]) -> None:
    """Raise for an option given away from its default where a route has no use for it."""
    for name, (value, default) in options.items():
        if value is not default and not (isinstance(default, str) and value == default):
            raise ValueError(f"{name}= is not supported {what}")


def choose(
    pb: Problem,
    verb: str,
    *,
    solver: str = "auto",
    loo: LOORequest | None = None,
    kfold_splits: bool = False,
    search: str | None = None,
    gradient: str = "exact",
    folds: FoldRequest | None = None,
) -> Route:
    """The route of one call of ``verb`` on ``pb``; raises ValueError for a combination no
    route offers, and MemoryError when the route's large matrices exceed the budget
    (``memory_limit=`` or the available memory; :func:`aloocv._memory.check_memory`).

    Parameters
    ----------
    pb : Problem
    verb : {"fit", "loo", "kfold", "tune"}
    solver : {"auto", "primal", "dual"}
    loo : LOORequest, optional
        The leave-one-out options (``verb="loo"``).
    kfold_splits : bool
        Whether the K-fold call uses ``cv=``/``groups=`` (memory only).
    search, gradient : str, optional
        ``verb="tune"``: the search method and the gradient it asks for. A ``"grid"`` of
        one scalar L2 parameter on the squared loss in memory (no offset) takes the
        ridge path from one eigendecomposition (``solver="ridge_path"``).
    folds : FoldRequest, optional
        ``verb="kfold"``: the folds asked for (their size and method enter the memory
        check).
    """
    r = _choose(pb, verb, solver, loo or LOORequest(), kfold_splits, search, gradient)
    method = folds.method if folds is not None else (loo.method if loo is not None else "alo")
    size = largest_fold(pb.n_samples, folds) if verb == "kfold" and not pb.is_dask else None
    first = (
        verb == "loo"
        and (r.backend, r.model, r.solver) == ("memory", "scalar", "primal")
        and memory_scalar.enet_fit_first(pb, loo or LOORequest())
    )
    check_memory(pb, r, verb, method=method, fold_size=size, fit_first=first)
    return r


def _choose(
    pb: Problem,
    verb: str,
    solver: str,
    req: LOORequest,
    kfold_splits: bool,
    search: str | None,
    gradient: str,
) -> Route:
    """:func:`choose` before the memory check."""
    model = _model(pb)
    if verb == "tune":
        return _tune_route(pb, model, search, gradient)
    if model == "multi_target":
        _unsupported(
            "with several targets (a 2-d y)",
            coef=(req.coef, None),
            intercept=(req.intercept, None),
            return_gradient=(req.return_gradient, False),
            solver=(solver, "auto"),
            gradient=(req.gradient, "exact"),
            offset=(pb.offset, None),
        )
        return Route(pb.backend, model)
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; expected one of {list(SOLVERS)}")
    if verb == "loo" and req.gradient not in ("exact", "paper"):
        raise ValueError(f"unknown gradient {req.gradient!r}; expected 'exact' or 'paper'")
    if pb.is_dask:
        if solver not in ("auto", "primal"):
            raise ValueError(
                f"dask input has the primal solver only (solver='auto' or 'primal'), got {solver!r}"
            )
        if kfold_splits:
            raise ValueError(
                "cv= and groups= are not available for dask input: pass n_folds= or "
                "folds= (fold labels)"
            )
        return Route("dask", model)
    if model == "multinomial":
        if req.gradient != "exact":
            raise ValueError("the multinomial loss has the exact gradient only")
        if solver not in ("auto", "primal", "matrix_free"):
            raise ValueError(
                "the multinomial loss has the primal and matrix-free solvers "
                f"(solver='auto', 'primal' or 'matrix_free'), got {solver!r}"
            )
        use = solver
        if solver == "auto":
            mf = verb in ("fit", "loo") and _multinomial_matrix_free_applies(req)
            use = "matrix_free" if mf and _multinomial_matrix_free(pb, verb) else "primal"
        if use == "matrix_free":
            _check_multinomial_matrix_free(verb, req)
        return Route("memory", model, use)
    paper = verb == "loo" and req.return_gradient and req.gradient == "paper"
    if paper and solver == "dual":
        raise ValueError("gradient='paper' is computed on the primal route: use solver='primal'")
    if verb in ("kfold", "tune"):
        return Route("memory", model)
    use = choose_solver(solver, pb.X, pb.l2, pb.l1, pb.loss)
    if solver == "auto" and not paper and _matrix_free_cheaper(pb, use, req, verb):
        use = "matrix_free"
    if use == "matrix_free":
        _check_matrix_free(pb, verb, req)
    # the paper's approximate gradient lives on the primal route only
    return Route("memory", model, "primal" if paper else use)


def costs(pb: Problem) -> dict[str, float]:
    """Floating-point operations of one ALO (with its fit) on each in-memory route, the
    model :func:`choose` weighs (``docs/math/matrix_free.md``): the primal route's Hessian
    passes and leverage pass (``n p1^2`` each on dense rows; on sparse rows ``O(nnz_i^2)``
    each against the explicit inverse, ``p1^3``) and its factor; the dual route's n x n
    kernel and factor; the matrix-free route's products. The multinomial loss (K classes)
    has no dual route; its primal route makes K (K + 1) / 2 passes of each kind and factors
    a K p1 x K p1 matrix, its matrix-free products are K columns wide."""
    n, p1 = pb.n_samples, pb.n_coef
    sparse = hasattr(pb.X, "nnz")
    nnz = float(pb.X.nnz) if sparse else float(n) * pb.n_features
    row = nnz / max(n, 1)
    if pb.is_multinomial:
        K = float(pb.loss.n_classes)
        pairs, dim = K * (K + 1.0) / 2.0, K * p1
        if sparse:
            primal = 4.0 * pairs * n * (row + 1.0) ** 2 + dim**3
        else:
            primal = 5.0 * pairs * n * float(p1) ** 2 + dim**3 / 3.0
        return {"primal": primal, "matrix_free": MATRIX_FREE_PRODUCTS * K * (nnz + n)}
    if sparse:
        primal = 4.0 * n * (row + 1.0) ** 2 + float(p1) ** 3
    else:
        primal = 5.0 * n * float(p1) ** 2 + float(p1) ** 3 / 3.0
    return {
        "primal": primal,
        "dual": float(n) ** 2 * (row + 1.0) + float(n) ** 3 / 3.0,
        "matrix_free": MATRIX_FREE_PRODUCTS * (nnz + n),
    }


def _matrix_free_cheaper(pb: Problem, use: str, req: LOORequest, verb: str = "loo") -> bool:
    """Whether ``solver="auto"`` takes the matrix-free route instead of ``use``: an L2
    problem whose leave-one-out the route computes, at a lower modelled cost, or whose
    route ``use`` does not fit the memory budget (``aloocv._memory.fits``)."""
    if pb.l1 is not None or req.method not in ("alo", "exact"):
        return False
    c = costs(pb)
    return c["matrix_free"] < c[use] or not fits(pb, use, verb)


def _multinomial_matrix_free(pb: Problem, verb: str) -> bool:
    """Whether ``solver="auto"`` takes the matrix-free route for the multinomial loss: its
    buffers fit the memory budget, and it is cheaper (:func:`costs`) or the primal route's
    K p1 x K p1 Hessian does not fit (else the primal route's memory error names it)."""
    if not fits(pb, "matrix_free", verb):
        return False
    c = costs(pb)
    return c["matrix_free"] < c["primal"] or not fits(pb, "primal", verb)


def _multinomial_matrix_free_applies(req: LOORequest) -> bool:
    """Whether the multinomial matrix-free route computes what ``req`` asks for."""
    return req.method == "alo" and not req.return_gradient


def _check_multinomial_matrix_free(verb: str, req: LOORequest) -> None:
    if verb in ("kfold", "tune"):
        raise ValueError(
            f"solver='matrix_free' with the multinomial loss serves fit and loo, not {verb}"
        )
    if verb == "loo" and not _multinomial_matrix_free_applies(req):
        raise ValueError(
            "solver='matrix_free' with the multinomial loss computes method='alo' without "
            "return_gradient (randomized leverage blocks, no hypergradient); use "
            "solver='primal' for method='exact', 'if', 'lemma3' or the gradient"
        )


def _check_matrix_free(pb: Problem, verb: str, req: LOORequest) -> None:
    if verb == "loo" and req.method not in ("alo", "exact"):
        raise ValueError(
            f"solver='matrix_free' computes method='alo' and 'exact', not {req.method!r}"
        )
    if verb == "loo" and req.return_gradient and float(pb.loss.params().get("power", 1.0)) > 2:
        raise ValueError(
            "return_gradient=True on the matrix-free route needs a loss with non-negative "
            "curvature (Tweedie power <= 2): use solver='primal'"
        )


def _tune_route(pb: Problem, model: str, search: str | None, gradient: str) -> Route:
    """The route of a search: the sgd and the paper's gradient need the in-memory scalar
    route; a one-parameter ridge grid takes the ridge path."""
    if search == "sgd" and model == "multinomial":
        raise ValueError("method='sgd' is not available for the multinomial loss")
    if search == "sgd" and pb.is_dask:
        raise ValueError("method='sgd' is not available for dask input; use 'gd' or 'auto'")
    if gradient != "exact" and model == "multinomial":
        raise ValueError("the multinomial loss has the exact gradient only")
    if gradient != "exact" and pb.is_dask:
        raise ValueError("dask input has the exact gradient only (gradient='exact')")
    if model == "multinomial" and not pb.is_dask:
        mf = _multinomial_matrix_free(pb, "tune")
        if mf and search != "grid":
            # the randomized blocks have no adjoint: no derivative to search on
            raise ValueError(
                "the multinomial model's K (p+1) x K (p+1) Hessian does not fit the memory "
                "budget (or the matrix-free route is cheaper), and the matrix-free route has "
                "no hypergradient: use method='grid' (search='grid' in the estimators)"
            )
        return Route(pb.backend, model, "matrix_free" if mf else "primal")
    ridge_path = (
        search == "grid"
        and not pb.is_dask
        and pb.loss == "squared"
        and isinstance(pb.penalty, L2)
        and pb.l1 is None
        and pb.penalty.params().size == 1
        and pb.offset is None
    )
    if ridge_path:
        return Route(pb.backend, model, "ridge_path")
    if pb.is_dask or model != "scalar" or search == "sgd" or gradient != "exact":
        return Route(pb.backend, model)
    use = choose_solver("auto", pb.X, pb.l2, pb.l1, pb.loss)
    mf = _matrix_free_cheaper(pb, "primal" if use == "dual" else use, LOORequest(), "tune")
    return Route(pb.backend, model, "matrix_free" if mf else "primal")


# ----------------------------------------------------------------------------- the table
def _dask() -> Any:
    # imported on first use: a dask-free install never loads the dask backend's modules
    from . import dask

    return dask


def fit(pb: Problem, route: Route, warm_start: Any = None) -> Any:
    """The fit of ``pb`` on ``route``."""
    if route.backend == "dask":
        dk = _dask()
        op = dk.multinomial_fit if route.model == "multinomial" else dk.fit
        return op(pb, warm_start=warm_start)
    if route.model == "multinomial":
        if route.solver == "matrix_free":
            return memory_mf_multinomial.fit(pb, warm_start)
        return memory_multinomial.fit(pb, warm_start)
    if route.solver == "matrix_free":
        return memory_matrix_free.fit(pb, warm_start)
    return memory_scalar.fit(pb, route.solver, warm_start)


def loo(pb: Problem, route: Route, req: LOORequest) -> Any:
    """Leave-one-out of ``pb`` on ``route``."""
    if route.backend == "dask":
        dk = _dask()
        op = dk.multinomial_loo if route.model == "multinomial" else dk.loo
        return op(
            pb,
            method=req.method,
            coef=req.coef,
            intercept=req.intercept,
            return_gradient=req.return_gradient,
            gradient=req.gradient,
        )
    if route.model == "multi_target":
        return memory_multitarget.loo(pb, req)
    if route.model == "multinomial":
        if route.solver == "matrix_free":
            return memory_mf_multinomial.loo(pb, req)
        return memory_multinomial.loo(pb, req)
    if route.solver == "matrix_free":
        return memory_matrix_free.loo(pb, req)
    return memory_scalar.loo(pb, route.solver, req)


def kfold(pb: Problem, route: Route, req: FoldRequest) -> Any:
    """K-fold of ``pb`` on ``route`` with the folds ``req`` asks for."""
    if route.backend == "dask":
        dk = _dask()
        op = dk.multinomial_kfold if route.model == "multinomial" else dk.kfold
        return op(
            pb,
            n_folds=req.n_folds,
            method=req.method,
            folds=req.folds,
            random_state=req.random_state,
        )
    plan = fold_plan(pb, req)
    if route.model == "multi_target":
        return memory_multitarget.kfold(pb, plan)
    if route.model == "multinomial":
        return memory_multinomial.kfold(pb, plan)
    return memory_scalar.kfold(pb, plan)


def tune_state(pb: Problem, route: Route) -> Any:
    """The tuning state of ``pb`` (what :class:`aloocv.tuning.Objective` drives)."""
    if route.backend == "dask":
        dk = _dask()
        op = dk.multinomial_tune_state if route.model == "multinomial" else dk.tune_state
        return op(pb)
    if route.model == "multinomial":
        if route.solver == "matrix_free":
            return memory_mf_multinomial.tune_state(pb)
        return memory_multinomial.MultinomialTuneState(pb)
    if route.solver == "matrix_free":
        return memory_matrix_free.tune_state(pb)
    return memory_scalar.tune_state(pb)
