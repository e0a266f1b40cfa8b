"""The multinomial loss in memory (``docs/math/multinomial.md``).

The model is scikit-learn's multinomial ``LogisticRegression(C=1/lam)``: softmax over the
full K-class parametrization, ``coef_`` of shape (K, p), ``intercept_`` of shape (K,),

    min_B  sum_i w_i [logsumexp(eta_i) - eta_{i, y_i}] + lam/2 sum_k ||theta_k||^2,
    eta_i = B x~_i in R^K,

with unpenalized intercepts. The loss does not change when one constant is added to every
intercept; aloocv fixes that gauge by centering the intercepts (``intercept_.sum() == 0``,
scikit-learn's solution), through the term ``tau/2 (sum_k b_k)^2`` in the Newton Hessian.
No leave-one-out quantity depends on it. The core (``cpp/src/multinomial.cpp``) does all
the work; this module wraps its results.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ... import _blas, _core
from ..._diagnostics import (
    ALO_UNRELIABLE_DH,
    check_finite_result,
    user_stacklevel,
    warn_loo_fit,
    warn_not_converged,
    warn_unreliable,
)
from ..._validation import check_loo_samples, core_design, design_dot
from ...folds import FoldPlan, check_fold_sums, fold_result, split_result
from ...losses import cross_entropy, pack_beta
from ...problem import Problem
from ...results import (
    FitResult,
    FoldRefits,
    KFoldResult,
    LOOResult,
    MultinomialFitResult,
    StateOutput,
    SubsetRefits,
    multinomial_fit_result,
)
from ...results.trust import Gathered, multinomial_indicator, unreliable_from
from ..common import TANGENT_LOG_STEP, LOORequest
from .exact_batches import run_batches

__all__ = ["MultinomialTuneState", "fit", "kfold", "loo"]


def _K(pb: Problem) -> int:
    return pb.loss.n_classes


def _fit_call(pb: Problem, w: Any, beta0: Any, max_iter: int | None = None) -> Any:
    with _blas.single_threaded_blas():
        return _core.multinomial_fit(
            core_design(pb.X),
            pb.y,
            w,
            _K(pb),
            pb.l2,
            fit_intercept=pb.fit_intercept,
            tol=pb.options.tol,
            max_iter=pb.options.max_iter if max_iter is None else max_iter,
            n_threads=pb.options.n_threads,
            beta0=beta0,
        )


def fit(pb: Problem, warm_start: FitResult | None = None) -> MultinomialFitResult:
    """Multinomial fit by Newton's method (``aloocv.fit(..., loss="multinomial")``)."""
    beta0 = None
    if warm_start is not None:
        if not isinstance(warm_start, MultinomialFitResult):
            raise TypeError("warm_start must be a multinomial fit")
        beta0 = pack_beta(
            warm_start.coef_, warm_start.intercept_, _K(pb), pb.n_features, pb.fit_intercept
        )
    out = _fit_call(pb, pb.sample_weight, beta0)
    check_finite_result("fit", coef=out.coef, intercept=out.intercept)
    res = multinomial_fit_result(out, pb.penalty, pb.fit_intercept)
    warn_not_converged(res, pb.options.tol, pb.options.max_iter)
    return res


def _loo_call(pb: Problem, method: str, beta: Any, refit: bool, **extra: Any) -> Any:
    with _blas.single_threaded_blas():
        return _core.multinomial_loo(
            core_design(pb.X),
            pb.y,
            pb.sample_weight,
            _K(pb),
            pb.l2,
            fit_intercept=pb.fit_intercept,
            method=method,
            tol=pb.options.tol,
            max_iter=pb.options.max_iter,
            n_threads=pb.options.n_threads,
            beta0=beta,
            refit=refit,
            **extra,
        )


def loo(pb: Problem, req: LOORequest) -> LOOResult:
    """Multinomial leave-one-out (``aloocv.loo(..., loss="multinomial")``).

    With ``K_i = X~_i H^{-1} X~_i^T`` (K x K), ``D_i`` the loss Hessian and ``g_i`` the
    gradient of sample i, ALO is ``eta~_i = eta_i + K_i (I - D_i K_i)^{-1} g_i`` (the
    Woodbury downdate of the K rows of sample i), IF is ``eta_i + K_i g_i``, Lemma 3 is
    ``ce(eta_i) + (mu_i - e_{y_i})^T (eta~_i - eta_i)``. The result's ``predictions`` are
    the (n, K) leave-one-out class scores, ``leverages`` the (n, K, K) blocks ``K_i``,
    ``downdate`` is ``det(I - D_i K_i)`` (``1 - d_i h_i`` of the scalar losses) and
    ``unreliable`` flags ``downdate < 1 - ALO_UNRELIABLE_DH``.
    """
    check_loo_samples(pb.n_samples)
    method = req.method
    beta = None
    if req.coef is not None:
        beta = pack_beta(req.coef, req.intercept, _K(pb), pb.n_features, pb.fit_intercept)
    elif req.intercept is not None:
        raise ValueError("intercept= requires coef=")
    if method == "exact" and req.verbose:  # refits in batches, progress after each
        out = run_batches(
            pb.n_samples,
            pb.options.n_threads,
            lambda idx, b: _loo_call(pb, method, b, b is None, subset=idx),
            lambda o: pack_beta(o.coef, o.intercept, _K(pb), pb.n_features, pb.fit_intercept),
            beta,
        )
    else:
        out = _loo_call(pb, method, beta, beta is None, return_gradient=req.return_gradient)
    check_finite_result(
        f"loo(method={method!r})",
        coef=out.coef,
        losses=out.losses,
        predictions=out.predictions,
        leverages=out.leverages,
        gradient=out.gradient,
    )
    fitres = multinomial_fit_result(out, pb.penalty, pb.fit_intercept)
    o = pb.options
    warn_loo_fit(fitres, beta is not None, out.n_not_converged, pb.n_samples, o.tol, o.max_iter)
    downdate = out.det
    unreliable = None if downdate is None else downdate < 1.0 - ALO_UNRELIABLE_DH
    warn_unreliable(unreliable, "multinomial", False)
    eta = fitres.decision_function(pb.X)
    indicator = None
    if method == "alo":
        indicator = multinomial_indicator(
            pb.y, eta, out.predictions, out.leverages, pb.sample_weight
        )
        unreliable = unreliable_from(indicator, out.losses, pb.sample_weight, unreliable)
    grad = None
    if req.return_gradient:
        grad = pb.penalty.chain(np.zeros(pb.n_features), out.gradient)
    return LOOResult(
        losses=out.losses,
        predictions=out.predictions,
        leverages=out.leverages,
        method=method,
        fit=fitres,
        sample_weight=pb.sample_weight,
        gradient=grad,
        downdate=downdate,
        unreliable=unreliable,
        indicator=indicator,
        _refits=refits(pb, fitres, eta, indicator),
    )


def refits(
    pb: Problem,
    fit: FitResult,
    eta: np.ndarray | None = None,
    indicator: np.ndarray | None = None,
    refit: Callable[[np.ndarray], tuple[np.ndarray, int]] | None = None,
) -> SubsetRefits:
    """Exact leave-one-out cross-entropies of a subset of the samples (refits
    warm-started at the fit's (K, p1) ``beta_``; in the order of idx). ``refit``: another
    route's refits (the matrix-free route's Newton-CG), ``idx -> (losses, not converged)``."""

    def primal_refit(idx: np.ndarray) -> tuple[np.ndarray, int]:
        b = np.ascontiguousarray(fit.beta_, dtype=np.float64).ravel()
        out = _loo_call(pb, "exact", b, False, subset=np.ascontiguousarray(idx, dtype=np.int64))
        return out.losses, int(out.n_not_converged)

    def gather(res: Any) -> Gathered:
        e = fit.decision_function(pb.X) if eta is None else eta
        ind = indicator
        if ind is None:
            ind = multinomial_indicator(pb.y, e, res.predictions, res.leverages, res.sample_weight)
        change = res.losses - cross_entropy(e, pb.y)
        return Gathered(res.losses, ind, change, res.sample_weight, screened=False)

    return SubsetRefits(gather=gather, refit=refit or primal_refit, tol=pb.options.tol)


# ----------------------------------------------------------------------------- K-fold
def _fold_parts(pb: Problem, plan: FoldPlan, ww: np.ndarray):
    """(train weights, test indices) of each fold or split, and the folds' test weights."""
    n = pb.n_samples
    if plan.splits is None:
        idx, labels = plan.folds, plan.labels
        wsum = check_fold_sums(np.bincount(idx, weights=ww, minlength=labels.size), labels)
        return [
            (np.where(idx == k, 0.0, ww), np.flatnonzero(idx == k)) for k in range(labels.size)
        ], wsum
    parts = []
    for k, (tr, te) in enumerate(plan.splits):
        wk = np.zeros(n)
        wk[tr] = ww[tr]
        if not wk.sum() > 0:
            raise ValueError(f"the training set of split {k} has zero total sample weight")
        parts.append((wk, te))
    return parts, None


def kfold(pb: Problem, plan: FoldPlan) -> KFoldResult:
    """Multinomial K-fold (``aloocv.kfold(..., loss="multinomial")``).

    ``"alo"``: one damped Newton step per fold from the full fit on the fold-out objective
    (its exact Hessian at the full fit: the fold's weights set to zero, Armijo backtracking
    when the full step does not decrease it); ``"exact"``: a refit per fold warm-started
    from the full fit. ``predictions`` are the (n, K) held-out class scores. The loop is
    over folds (each a core call), never over samples.
    """
    n, K, w, method = pb.n_samples, _K(pb), pb.sample_weight, plan.method
    ww = np.ones(n) if w is None else w
    parts, wsum = _fold_parts(pb, plan, ww)
    t0 = time.perf_counter()
    full = _fit_call(pb, w, None)
    fitres = multinomial_fit_result(full, pb.penalty, pb.fit_intercept)
    warn_not_converged(fitres, pb.options.tol, pb.options.max_iter)
    beta = pack_beta(full.coef, full.intercept, K, pb.n_features, pb.fit_intercept)
    t1 = time.perf_counter()
    pred_tests = []
    failed = 0
    for wk, te in parts:
        r = _fit_call(pb, wk, beta, max_iter=1 if method == "alo" else None)
        failed += method == "exact" and not r.converged
        pred_tests.append(design_dot(pb.X[te], r.coef.T) + r.intercept)
    t2 = time.perf_counter()
    check_finite_result(
        f"kfold(method={method!r})", coef=full.coef, predictions=np.concatenate(pred_tests)
    )
    if failed:
        warnings.warn(
            f"exact K-fold: {failed} of {len(parts)} refits did not reach tol={pb.options.tol:g}",
            ConvergenceWarning,
            stacklevel=user_stacklevel(),
        )
    timings = {"fit": t1 - t0, "folds": t2 - t1}
    if plan.splits is not None:
        loss_tests = [cross_entropy(pr, pb.y[te]) for pr, (_, te) in zip(pred_tests, parts)]
        res = split_result(plan.splits, pred_tests, loss_tests, ww, n, method, fitres, w, timings)
    else:
        pred = np.empty((n, K))
        for pr, (_, te) in zip(pred_tests, parts):
            pred[te] = pr
        losses = cross_entropy(pred, pb.y)
        res = fold_result(
            losses, pred, plan.folds, plan.labels, ww, wsum, method, fitres, w, timings
        )
    if method != "alo":
        return res
    eta = fitres.decision_function(pb.X)
    return dataclasses.replace(res, _refits=fold_refits(pb, beta, eta, parts))


def fold_refits(pb: Problem, beta: np.ndarray, eta: np.ndarray, parts: list) -> FoldRefits:
    """Exact refits of chosen folds or splits (``parts[k]``: the training weights and the
    test samples of unit k) warm-started at the full fit ``beta``, and ALO's error
    indicator at the folds' held-out scores, for the refinement of ``kfold(rtol=)``."""
    blocks: list = []

    def indicator(rows: np.ndarray, predictions: np.ndarray) -> np.ndarray:
        if not blocks:  # the full fit's leverage blocks (one ALO pass), on first use
            blocks.append(_loo_call(pb, "alo", beta.ravel(), False).leverages)
        w = None if pb.sample_weight is None else pb.sample_weight[rows]
        return multinomial_indicator(pb.y[rows], eta[rows], predictions, blocks[0][rows], w)

    def refit(units: np.ndarray) -> tuple[list, list, int]:
        losses, preds, failed = [], [], 0
        for u in units:
            wk, te = parts[u]
            r = _fit_call(pb, wk, beta)
            failed += not r.converged
            pr = design_dot(pb.X[te], r.coef.T) + r.intercept
            preds.append(pr)
            losses.append(cross_entropy(pr, pb.y[te]))
        return losses, preds, failed

    return FoldRefits(indicator=indicator, refit=refit, tol=pb.options.tol)


# ----------------------------------------------------------------------------- tuning
class MultinomialTuneState:
    """Stands in for ``_core.TuneState`` in :class:`aloocv.tuning.Objective` for the
    multinomial loss (same methods): a warm-started fit plus ALO and its exact gradient
    in one core call per point.

    ``alo_tangents`` (second derivatives, used only to propose Newton steps of the
    second-order searches) is a central difference of the exact gradient, step
    ``TANGENT_LOG_STEP`` in log lambda along each parameter direction (two extra fits per
    parameter); convergence is always tested on the exact gradient.
    """

    def __init__(self, pb: Problem):
        self.pb = pb
        self.p = pb.n_features
        self.pen = np.ascontiguousarray(pb.l2, dtype=np.float64)
        self.beta: np.ndarray | None = None

    def set_penalty(self, l2: np.ndarray, l1: np.ndarray | None = None) -> None:
        self.pen = np.ascontiguousarray(l2, dtype=np.float64)

    def set_beta(self, beta: np.ndarray) -> None:
        self.beta = np.ascontiguousarray(beta, dtype=np.float64)

    def fit(self) -> None:
        """Nothing: :meth:`alo` fits and evaluates in one core call."""

    def _call(self, pen: np.ndarray, gradient: bool) -> StateOutput:
        pb = self.pb.replace(l2=pen)
        out = _loo_call(pb, "alo", self.beta, True, return_gradient=gradient)
        B = np.column_stack([out.intercept, out.coef]) if pb.fit_intercept else out.coef
        return StateOutput(
            coef=out.coef,
            intercept=out.intercept,
            n_iter=out.n_iter,
            converged=out.converged,
            objective=out.objective,
            grad_norm=out.grad_norm,
            hessian_passes=out.hessian_passes,
            losses=out.losses,
            predictions=out.predictions,
            leverages=out.leverages,
            det=out.det,
            grad_l2=np.zeros(self.p) if out.gradient is None else out.gradient,
            grad_l1=np.zeros(self.p),
            beta=np.ascontiguousarray(B.ravel()),
        )

    def alo(self, *, gradient: bool = True, gradient_kind: str = "exact") -> StateOutput:
        out = self._call(self.pen, gradient)
        self.beta = out.beta
        return out

    def alo_tangents(self, J2: np.ndarray, J1: np.ndarray) -> StateOutput:
        out = self.alo(gradient=True)
        at, pen = self.beta, self.pen
        T2 = np.empty((self.p, J2.shape[1]))
        for k in range(J2.shape[1]):
            d = J2[:, k] * pen * TANGENT_LOG_STEP  # a step in log of the parameter
            scale = float(np.max(J2[:, k] * pen)) * TANGENT_LOG_STEP
            g = [self._call(pen + s * d, gradient=True).grad_l2 for s in (1.0, -1.0)]
            self.beta = at
            T2[:, k] = (g[0] - g[1]) / (2.0 * scale)
        return dataclasses.replace(out, tangent_l2=T2, tangent_l1=np.zeros_like(T2))
