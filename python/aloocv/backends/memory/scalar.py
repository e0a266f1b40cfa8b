"""Scalar-eta losses in memory: fit, leave-one-out, K-fold and the tuning state, each one
call of the C++ core (``docs/math/alo.md``, ``docs/math/kfold.md``, ``docs/math/dual.md``).
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ... import _blas, _core
from ..._diagnostics import (
    check_classes,
    check_finite_result,
    check_fold_classes,
    check_loo_classes,
    check_separation,
    check_singular_refits,
    unpenalized,
    unreliable_mask,
    user_stacklevel,
    warn_ill_conditioned,
    warn_loo_fit,
    warn_not_converged,
    warn_unreliable,
)
from ..._memory import check_memory, fits
from ..._validation import (
    check_loo_samples,
    check_real_scalar,
    check_vector,
    core_design,
)
from ...folds import (
    FoldPlan,
    check_split_classes,
    fold_result,
    fold_weights,
    relabel_folds,
    split_result,
)
from ...problem import Problem
from ...results import FitResult, FoldRefits, KFoldResult, LOOResult, SubsetRefits, fit_result
from ...results.trust import (
    Gathered,
    indicator_sees_the_error,
    scalar_indicator,
    unreliable_from,
)
from ..common import LOORequest
from .exact_batches import run_batches

__all__ = ["enet_fit_first", "fit", "kfold", "loo", "tune_state"]


def _opts(pb: Problem) -> dict[str, Any]:
    """The keyword options every core call of this problem takes."""
    return {
        "fit_intercept": pb.fit_intercept,
        "tol": pb.options.tol,
        "max_iter": pb.options.max_iter,
        "n_threads": pb.options.n_threads,
        "offset": pb.offset,
    }


def _args(pb: Problem) -> tuple:
    return (core_design(pb.X), pb.y, pb.sample_weight, pb.loss.core, pb.l2)


def _check_separation(
    pb: Problem, res: FitResult, warn: bool, eta: np.ndarray | None = None
) -> None:
    # a separated logistic fit without penalty has no finite solution: raise before the
    # convergence warning (Newton "converges" on the vanishing gradient)
    if pb.loss != "logistic" or not (warn or unpenalized(pb.l2, pb.l1)):
        return  # nothing to raise or warn: no pass over X for the margins
    eta = res._linear_predictor(pb.X, pb.offset) if eta is None else eta
    check_separation(eta, pb.y, pb.sample_weight, pb.l2, pb.l1, warn=warn)


# ----------------------------------------------------------------------------- fit
def _warm_beta(pb: Problem, warm_start: FitResult | None) -> np.ndarray | None:
    if warm_start is None:
        return None
    beta0 = np.ascontiguousarray(
        warm_start.beta_ if pb.fit_intercept == warm_start.fit_intercept else None,
        dtype=np.float64,
    )
    if beta0.shape != (pb.n_coef,):
        raise ValueError("warm_start does not match the shape of this problem")
    return beta0


def fit(pb: Problem, solver: str, warm_start: FitResult | None = None) -> FitResult:
    """The fit of a scalar-loss problem on the primal (p x p) or dual (n x n) route."""
    check_classes(pb.y, pb.sample_weight, pb.loss, pb.fit_intercept)
    beta0 = _warm_beta(pb, warm_start)
    with _blas.single_threaded_blas():
        if solver == "dual":
            out = _core.dual(*_args(pb), method="alo", want_loo=False, **_opts(pb))
        else:
            out = _core.fit(*_args(pb), beta0=beta0, l1=pb.l1, **_opts(pb))
    check_finite_result("fit", coef=out.coef, intercept=out.intercept)
    res = fit_result(out, pb.loss, pb.penalty, pb.fit_intercept)
    _check_separation(pb, res, warn=False)
    warn_not_converged(res, pb.options.tol, pb.options.max_iter)
    return res


# ----------------------------------------------------------------------------- loo
def given_beta(pb: Problem, coef: Any, intercept: Any) -> np.ndarray | None:
    """The (intercept, coef) vector of a given fit, checked; None without ``coef``."""
    if coef is None:
        if intercept is not None:
            raise ValueError("intercept= requires coef=")
        return None
    p = pb.n_features
    c = coef if np.ndim(coef) == 1 else np.ravel(coef)
    if np.ndim(c) != 1 or np.shape(c)[0] != p:
        raise ValueError(f"coef has {np.size(c)} entries but X has {p} features")
    c = check_vector(c, p, "coef")
    b = None
    if intercept is not None:
        b_arr = np.asarray(intercept)
        if b_arr.size != 1:
            raise ValueError(f"intercept must be a scalar, got shape {b_arr.shape}")
        b = check_real_scalar(b_arr.ravel()[0], "intercept")
    if pb.fit_intercept:
        return np.concatenate([[0.0 if b is None else b], c])
    if b is not None and b != 0.0:
        raise ValueError("intercept given with fit_intercept=False")
    return np.ascontiguousarray(c)


@dataclasses.dataclass(frozen=True)
class _FitThenALO:
    """An elastic-net fit (``_core.fit``'s fields) with ALO computed at its coefficients
    by another call: the fields :func:`loo` reads of a core leave-one-out result."""

    coef: np.ndarray
    intercept: float
    n_iter: int
    converged: bool
    objective: float
    grad_norm: float
    hessian_passes: int
    matvec_passes: int
    losses: np.ndarray
    predictions: np.ndarray
    leverages: np.ndarray
    downdate: np.ndarray
    rcond: float | None = None
    n_not_converged: int = 0
    grad_l2: None = None
    grad_l1: None = None


def enet_fit_first(pb: Problem, req: LOORequest) -> bool:
    """Whether :func:`loo` fits an elastic net before its ALO (:func:`_enet_active_dual`):
    ALO without a derivative or a given fit, p > n, every feature with an L2 weight. The
    memory check then counts the fit's working sets first (``aloocv._memory``,
    ``fit_first``) and the active set's matrices once the fit has found it."""
    if pb.l1 is None or req.method != "alo" or req.return_gradient or req.coef is not None:
        return False
    return pb.n_features > pb.n_samples and bool(np.all(pb.l2 > 0))


def _enet_active_dual(pb: Problem, req: LOORequest) -> _FitThenALO | None:
    """ALO of an elastic net whose active set A is wider than the samples, through the
    n x n dual system of the active columns (``_core.dual`` on ``X[:, A]`` with A's L2
    weights, the fit given) instead of the |A| x |A| Hessian's factor and inverse: on the
    active set the L1 term is linear, so ALO there is the ridge formula on A
    (docs/math/alo.md, docs/math/dual.md); where |A| <= n after all, the primal ALO at the
    same fit. The active set's matrices are checked against the memory budget once the
    fit has found A (MemoryError naming them). None where it does not apply
    (:func:`enet_fit_first`): the primal call then."""
    n = pb.n_samples
    if not enet_fit_first(pb, req):
        return None
    with _blas.single_threaded_blas():
        fit = _core.fit(*_args(pb), beta0=None, l1=pb.l1, **_opts(pb))
    coef = np.asarray(fit.coef)
    A = np.flatnonzero(coef)
    XA = pb.X[:, A]
    XA = XA.tocsr() if hasattr(XA, "tocsr") else np.ascontiguousarray(XA)
    active = pb.replace(X=XA, l2=np.ascontiguousarray(pb.l2[A]), l1=np.ascontiguousarray(pb.l1[A]))
    sub = active.replace(l1=None) if A.size > n else None
    if sub is None or not fits(sub, "dual", "loo"):
        check_memory(active, "primal", "loo")  # the |A| x |A| Hessian of the active set
    with _blas.single_threaded_blas():
        if sub is not None and fits(sub, "dual", "loo"):
            b = np.concatenate([[fit.intercept], coef[A]]) if pb.fit_intercept else coef[A]
            out = _core.dual(
                *_args(sub), method="alo", want_loo=True, beta=np.ascontiguousarray(b), **_opts(sub)
            )
        else:  # the active set's Hessian at the fit (prepare_at: no second fit)
            b = np.concatenate([[fit.intercept], coef]) if pb.fit_intercept else coef
            out = _core.loo(
                *_args(pb),
                method="alo",
                beta=np.ascontiguousarray(b),
                refit=False,
                l1=pb.l1,
                **_opts(pb),
            )
    return _FitThenALO(
        coef=np.asarray(fit.coef),
        intercept=float(fit.intercept),
        n_iter=int(fit.n_iter),
        converged=bool(fit.converged),
        objective=float(fit.objective),
        grad_norm=float(fit.grad_norm),
        hessian_passes=int(fit.hessian_passes),
        matvec_passes=int(fit.matvec_passes),
        losses=out.losses,
        predictions=out.predictions,
        leverages=out.leverages,
        downdate=out.downdate,
        rcond=getattr(out, "rcond", None),
    )


def _loo_call(pb: Problem, solver: str, req: LOORequest, beta: np.ndarray | None) -> Any:
    """One core call of leave-one-out (all samples)."""
    method = req.method
    if solver != "dual" and beta is None:
        wide = _enet_active_dual(pb, req)
        if wide is not None:
            return wide
    with _blas.single_threaded_blas():
        if solver == "dual":
            out = _core.dual(
                *_args(pb),
                method=method,
                want_loo=True,
                beta=beta,
                gradient=req.return_gradient,
                **_opts(pb),
            )
        else:
            out = _core.loo(
                *_args(pb),
                method=method,
                beta=beta,
                refit=False,
                l1=pb.l1,
                gradient=req.return_gradient,
                gradient_kind=req.gradient,
                **_opts(pb),
            )
    return out


def _exact_with_progress(pb: Problem, solver: str, beta: np.ndarray | None) -> Any:
    """Exact leave-one-out in batches of refits, progress on stderr after each."""
    opts = _opts(pb)

    def refit(idx: np.ndarray, b: np.ndarray | None) -> Any:
        with _blas.single_threaded_blas():
            if solver == "dual":
                return _core.dual(
                    *_args(pb), method="exact", want_loo=True, beta=b, subset=idx, **opts
                )
            return _core.loo(
                *_args(pb), method="exact", beta=b, refit=False, l1=pb.l1, subset=idx, **opts
            )

    def beta_of(out: Any) -> np.ndarray | None:
        return given_beta(pb, out.coef, out.intercept if pb.fit_intercept else None)

    n_threads = int(opts["n_threads"])
    return run_batches(pb.n_samples, n_threads, refit, beta_of, beta)


def loo(pb: Problem, solver: str, req: LOORequest) -> LOOResult:
    """Leave-one-out of a scalar-loss problem (ALO, IF, Lemma 3 or exact refits)."""
    check_loo_samples(pb.n_samples)
    check_loo_classes(pb.y, pb.sample_weight, pb.loss, pb.fit_intercept)
    beta = given_beta(pb, req.coef, req.intercept)
    method = req.method
    if method == "exact" and req.verbose:
        out = _exact_with_progress(pb, solver, beta)
    else:
        out = _loo_call(pb, solver, req, beta)
    check_singular_refits(f"loo(method={method!r})", out)
    check_finite_result(
        f"loo(method={method!r})",
        coef=out.coef,
        intercept=out.intercept,
        losses=out.losses,
        predictions=out.predictions,
        leverages=out.leverages,
        grad_l2=out.grad_l2,
        grad_l1=out.grad_l1,
    )
    fitres = fit_result(out, pb.loss, pb.penalty, pb.fit_intercept)
    # the fit's linear predictor, for the checks below: the core's (no pass over X here)
    # where the route gives it
    eta = getattr(out, "eta", None)
    if eta is None:
        eta = fitres._linear_predictor(pb.X, pb.offset)
    _check_separation(pb, fitres, warn=method != "exact", eta=eta)
    o = pb.options
    warn_loo_fit(fitres, beta is not None, out.n_not_converged, pb.n_samples, o.tol, o.max_iter)
    grad = pb.penalty.chain(out.grad_l1, out.grad_l2) if req.return_gradient else None
    dh_flag = unreliable_mask(out.downdate)
    warn_unreliable(dh_flag, pb.loss, pb.l1 is not None)
    indicator = None
    unreliable = dh_flag
    if method == "alo":
        indicator = scalar_indicator(
            pb.loss, pb.y, eta, out.predictions, out.leverages, pb.sample_weight
        )
        unreliable = unreliable_from(indicator, out.losses, pb.sample_weight, dh_flag)
    rcond = getattr(out, "rcond", None)  # the primal route's factor (dual: none)
    warn_ill_conditioned(rcond)
    return LOOResult(
        gradient=grad,
        losses=out.losses,
        predictions=out.predictions,
        leverages=out.leverages,
        method=method,
        fit=fitres,
        sample_weight=pb.sample_weight,
        downdate=out.downdate,
        unreliable=unreliable,
        indicator=indicator,
        _refits=refits(pb, solver, fitres, eta, indicator),
    )


def refits(
    pb: Problem,
    solver: str,
    fit: FitResult,
    eta: np.ndarray | None = None,
    indicator: np.ndarray | None = None,
    refit: Callable[[np.ndarray], tuple[np.ndarray, int]] | None = None,
) -> SubsetRefits:
    """Exact leave-one-out refits of a subset of the samples, warm-started at ``fit``;
    ``eta`` the fit's linear predictor and ``indicator`` ALO's error indicator when known
    (computed when asked otherwise); ``refit`` the route's own refits (the matrix-free
    route's Newton-CG), the core's primal or dual refits by default."""

    def core_refit(idx: np.ndarray) -> tuple[np.ndarray, int]:
        opts = _opts(pb)
        beta = np.ascontiguousarray(fit.beta_, dtype=np.float64)
        with _blas.single_threaded_blas():
            if solver == "dual":
                out = _core.dual(
                    *_args(pb), method="exact", want_loo=True, beta=beta, subset=idx, **opts
                )
            else:
                out = _core.loo(
                    *_args(pb),
                    method="exact",
                    refit=False,
                    l1=pb.l1,
                    gradient=False,
                    beta=beta,
                    subset=idx,
                    **opts,
                )
        check_singular_refits("certify()", out)
        return out.losses, int(out.n_not_converged)

    def gather(res: Any) -> Gathered:
        e = fit._linear_predictor(pb.X, pb.offset) if eta is None else eta
        ind = indicator
        if ind is None:
            ind = scalar_indicator(
                pb.loss, pb.y, e, res.predictions, res.leverages, res.sample_weight
            )
        change = res.losses - pb.loss.value(pb.y, e)
        exact = pb.loss == "squared" and pb.l1 is None  # PRESS: ALO is exact
        sees = indicator_sees_the_error(pb.loss, pb.l1 is not None)
        return Gathered(res.losses, ind, change, res.sample_weight, exact=exact, screened=sees)

    return SubsetRefits(gather=gather, refit=refit or core_refit, tol=pb.options.tol)


# ----------------------------------------------------------------------------- K-fold
def _checked_core_result(pb: Problem, out: Any, method: str, n_refits: int) -> FitResult:
    """The full fit of a core K-fold / held-out run, after checking its outputs are finite
    and warning about unconverged fits and refits."""
    check_finite_result(
        f"kfold(method={method!r})",
        coef=out.coef,
        intercept=out.intercept,
        losses=out.losses,
        predictions=out.predictions,
    )
    fitres = fit_result(out, pb.loss, pb.penalty, pb.fit_intercept)
    tol = pb.options.tol
    warn_not_converged(fitres, tol, pb.options.max_iter)
    if out.n_not_converged:
        warnings.warn(
            f"exact K-fold: {out.n_not_converged} of {n_refits} refits did not reach tol={tol:g}",
            ConvergenceWarning,
            stacklevel=user_stacklevel(),
        )
    return fitres


def _timings(out: Any) -> dict[str, float]:
    return {"fit": float(out.seconds_fit), "folds": float(out.seconds_folds)}


def kfold(pb: Problem, plan: FoldPlan) -> KFoldResult:
    """K-fold of a scalar-loss problem: a partition in one core call (downdates or
    refits per fold), or non-partition splits held out one by one."""
    if plan.splits is not None:
        return _kfold_splits(pb, plan)
    n, w = pb.n_samples, pb.sample_weight
    idx, labels = plan.folds, plan.labels
    K = labels.size
    ww, wsum = fold_weights(idx, labels, w, n)
    check_classes(pb.y, w, pb.loss, pb.fit_intercept)
    try:
        check_fold_classes(pb.y, w, idx, K, pb.loss, pb.fit_intercept)
    except ValueError as e:
        raise ValueError(relabel_folds(str(e), labels)) from None
    try:
        with _blas.single_threaded_blas():
            out = _core.kfold(
                *_args(pb), folds=idx, n_folds=K, method=plan.method, l1=pb.l1, **_opts(pb)
            )
    except ValueError as e:
        if not plan.user_labels:
            raise
        # the core names folds by index: name the user's label instead
        raise ValueError(relabel_folds(str(e), labels)) from None
    fitres = _checked_core_result(pb, out, plan.method, K)
    res = fold_result(
        out.losses, out.predictions, idx, labels, ww, wsum, plan.method, fitres, w, _timings(out)
    )
    return _with_fold_refits(pb, plan.method, res, res.test_indices)


def _kfold_splits(pb: Problem, plan: FoldPlan) -> KFoldResult:
    """kfold for splits that do not partition the samples: each split leaves out the
    complement of its training set on its own (one core call for all splits)."""
    n, w, splits = pb.n_samples, pb.sample_weight, plan.splits
    ww = np.ones(n) if w is None else w
    removed = []
    for k, (tr, _) in enumerate(splits):
        if not ww[tr].sum() > 0:
            raise ValueError(f"the training set of split {k} has zero total sample weight")
        keep = np.ones(n, bool)
        keep[tr] = False
        removed.append(np.flatnonzero(keep))
    check_classes(pb.y, w, pb.loss, pb.fit_intercept)
    if pb.loss == "logistic":
        check_split_classes(pb.y, w, splits, pb.fit_intercept)
    indptr = np.zeros(len(removed) + 1, dtype=np.int32)
    indptr[1:] = np.cumsum([r.size for r in removed])
    indices = np.concatenate(removed).astype(np.int32)
    try:
        with _blas.single_threaded_blas():
            out = _core.holdout(
                *_args(pb),
                indices=indices,
                indptr=indptr,
                method=plan.method,
                l1=pb.l1,
                **_opts(pb),
            )
    except ValueError as e:
        msg = re.sub(r"(fold|held-out set) (\d+)", r"split \2", str(e))
        raise ValueError(msg) from None
    fitres = _checked_core_result(pb, out, plan.method, len(splits))
    pred_tests, loss_tests = [], []
    for k, (_, te) in enumerate(splits):
        pos = indptr[k] + np.searchsorted(removed[k], te)  # test is inside the removed set
        pred_tests.append(out.predictions[pos])
        loss_tests.append(out.losses[pos])
    res = split_result(splits, pred_tests, loss_tests, ww, n, plan.method, fitres, w, _timings(out))
    return _with_fold_refits(pb, plan.method, res, removed)


def _with_fold_refits(pb: Problem, method: str, res: KFoldResult, removed: list) -> KFoldResult:
    """An approximate K-fold result with what ``kfold(rtol=)`` asks of this backend
    (:class:`aloocv.results.FoldRefits`); as it is where the approximation is exact (the
    squared loss with an L2 penalty) or for exact K-fold."""
    if method != "alo" or (pb.loss == "squared" and pb.l1 is None):
        return res
    return dataclasses.replace(res, _refits=fold_refits(pb, res.fit, res.test_indices, removed))


def fold_refits(pb: Problem, fit: FitResult, tests: list, removed: list) -> FoldRefits:
    """Exact refits of chosen folds (or splits: ``removed[k]`` the samples outside split
    k's training set, sorted, ``tests[k]`` its test samples among them) and ALO's error
    indicator at the folds' held-out predictions, for the refinement of ``kfold(rtol=)``."""
    eta = fit._linear_predictor(pb.X, pb.offset)
    beta = np.ascontiguousarray(fit.beta_, dtype=np.float64)
    lev: list = []

    def indicator(rows: np.ndarray, predictions: np.ndarray) -> np.ndarray:
        if not lev:  # the leverages of the full fit (one ALO pass), on first use
            with _blas.single_threaded_blas():
                out = _core.loo(
                    *_args(pb), method="alo", beta=beta, refit=False, l1=pb.l1, **_opts(pb)
                )
            lev.append(out.leverages)
        et = eta.copy()
        et[rows] = predictions
        return scalar_indicator(pb.loss, pb.y, eta, et, lev[0], pb.sample_weight)[rows]

    def refit(units: np.ndarray) -> tuple[list, list, int]:
        rem = [removed[u] for u in units]
        indptr = np.zeros(len(rem) + 1, dtype=np.int32)
        indptr[1:] = np.cumsum([r.size for r in rem])
        indices = np.concatenate(rem).astype(np.int32)
        with _blas.single_threaded_blas():
            out = _core.holdout(
                *_args(pb), indices=indices, indptr=indptr, method="exact", l1=pb.l1, **_opts(pb)
            )
        pos = [indptr[j] + np.searchsorted(rem[j], tests[u]) for j, u in enumerate(units)]
        return (
            [out.losses[q] for q in pos],
            [out.predictions[q] for q in pos],
            int(out.n_not_converged),
        )

    return FoldRefits(indicator=indicator, refit=refit, tol=pb.options.tol)


# ----------------------------------------------------------------------------- tuning
def tune_state(pb: Problem) -> _core.TuneState:
    """The core's tuning state: one fit kept alive, refit warm-started per point."""
    return _core.TuneState(*_args(pb), l1=pb.l1, **_opts(pb))
