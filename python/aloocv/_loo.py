"""Leave-one-out cross-validation: approximate (ALO, IF, Lemma 3) and exact."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.exceptions import ConvergenceWarning

from . import _blas, _core
from ._diagnostics import (
    Certificate,
    certificate_design,
    certificate_from,
    check_certify_options,
    check_loo_classes,
    check_separation,
    unreliable_mask,
    warn_ill_conditioned,
    warn_unreliable,
)
from ._fit import FitResult, _result, _warn_given_coef, _warn_not_converged
from ._multitarget import MultiTargetLOOResult
from ._validation import (
    LOO_METHODS,
    MULTINOMIAL,
    as_penalty,
    check_bool,
    check_finite_result,
    check_fit_inputs,
    check_loo_samples,
    check_offset,
    check_options,
    check_real_scalar,
    check_singular_refits,
    check_vector,
    choose_solver,
    core_design,
    is_dask_collection,
    is_multi_target,
    n_threads,
)
from .losses import Loss
from .penalties import Penalty

__all__ = ["LOOResult", "loo"]


@dataclass
class LOOResult:
    """Per-sample leave-one-out results.

    Attributes
    ----------
    losses : ndarray of shape (n_samples,)
        ``l(y_i, eta~_i)``: the loss of sample i under the model fitted without it
        (for ``"lemma3"`` the first-order expansion of that loss).
    predictions : ndarray of shape (n_samples,) or (n_samples, K)
        Leave-one-out linear predictors ``eta~_i`` (class scores for
        ``loss="multinomial"``).
    leverages : ndarray of shape (n_samples,), (n_samples, K, K) or None
        ``h_i = x~_i^T H^{-1} x~_i`` (None for ``"exact"``); multinomial: the blocks
        ``K_i = X~_i H^{-1} X~_i^T`` (``K_i[a, b] = x~_i^T (H^{-1})_{ab} x~_i``).
    method : str
    fit : FitResult
        The full-data fit the estimate is built on.
    sample_weight : ndarray or None
        Weights of the weighted mean.
    gradient : ndarray or None
        With ``return_gradient=True``: the derivative of :attr:`mean` with respect to
        the penalty's parameters (``penalty.params()``: ``[lam]`` for a scalar L2, the
        per-feature vector for a vector L2, one per group for ``L2(lam, groups=...)``,
        ``[l1, l2]`` for a scalar elastic net; with an L1 term the active set and its
        signs are held fixed, as the estimate holds them). Exact by default (see
        ``gradient=`` of :func:`loo`).
    downdate : ndarray of shape (n_samples,) or None
        ``1 - d_i h_i``, the factor of the rank-one downdate the closed forms divide by
        (None for ``"exact"``; 1 for zero-weight samples).
    unreliable : ndarray of bool, shape (n_samples,), or None
        Samples with ``d_i h_i > aloocv.ALO_UNRELIABLE_DH`` (0.99): leverage near 1, where
        the approximate leave-one-out value is unreliable (None for ``"exact"``). An
        :class:`aloocv.ALOWarning` gives their count (not for the squared loss with an L2
        penalty, where ALO is exact). :meth:`certify` measures the actual error.
    """

    losses: np.ndarray
    predictions: np.ndarray
    leverages: np.ndarray | None
    method: str
    fit: FitResult
    sample_weight: np.ndarray | None = None
    gradient: np.ndarray | None = None
    downdate: np.ndarray | None = None
    unreliable: np.ndarray | None = None
    # the validated problem, for certify(): keyword arguments of the core calls
    _problem: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def mean(self) -> float:
        """The (weighted) mean leave-one-out loss: the cross-validation estimate."""
        return float(np.average(self.losses, weights=self.sample_weight))

    @property
    def stderr(self) -> float:
        """Standard error of :attr:`mean` (weights act as frequency weights)."""
        w = self.sample_weight
        n = self.losses.shape[0]
        if n < 2:
            return float("nan")
        with np.errstate(over="ignore", invalid="ignore"):  # huge losses: scaled below
            if w is None:
                se = float(np.std(self.losses, ddof=1) / np.sqrt(n))
            else:
                sw = w.sum()
                m = np.average(self.losses, weights=w)
                var = np.sum(w * (self.losses - m) ** 2) / max(sw - 1.0, 1e-300)
                se = float(np.sqrt(var / sw))
        return se if math.isfinite(se) else _scaled_stderr(self.losses, w)

    def __repr__(self) -> str:
        return (
            f"LOOResult(method={self.method!r}, n={self.losses.shape[0]}, "
            f"mean={self.mean:.6g}, stderr={self.stderr:.3g})"
        )

    def certify(
        self,
        n_samples: int = 20,
        random_state: Any = 0,
        confidence: float = 0.95,
        n_worst: int | None = None,
    ) -> Certificate:
        """Measures this approximate result against exact leave-one-out refits.

        Refits the problem exactly without each of at most ``n_samples`` samples (the
        core's exact-LOO refits, warm-started from the fit, on those samples only): the
        ``n_worst`` (default ``n_samples // 5``) samples whose loss the approximation moves
        most from its in-sample value, and draws from the others with probabilities
        proportional to that change (importance sampling, mixed with 5% uniform). Returns
        the per-sample errors, their median and maximum, and the estimated error of
        :attr:`mean` with a Student-t confidence interval (see
        :class:`aloocv.Certificate` for the estimator). Costs at most ``n_samples``
        refits; with ``n_samples >= n`` it is the exact error.

        Examples
        --------
        >>> import numpy as np, aloocv
        >>> rng = np.random.default_rng(0)
        >>> X = rng.standard_normal((200, 5)); y = (X[:, 0] > 0) * 1.0
        >>> c = aloocv.loo(X, y, penalty=aloocv.L2(1.0)).certify(n_samples=10)
        >>> (c.n_worst, c.n_draws)
        (2, 8)
        """
        if self.method == "exact":
            raise ValueError("an exact result needs no certificate (method='exact')")
        if self._problem is None:
            raise ValueError(
                "this result does not carry its problem (it was not made by aloocv.loo); "
                "call aloocv.loo(...).certify()"
            )
        confidence = check_certify_options(n_samples, n_worst, confidence)
        pb = self._problem
        if "n_classes" in pb:  # multinomial
            from . import _multinomial

            insample = _multinomial.cross_entropy(self.fit.decision_function(pb["X"]), pb["y"])
            refits = _multinomial.exact_subset
        else:
            eta = self.fit.decision_function(pb["X"], pb["offset"])
            insample = pb["loss"].value(pb["y"], eta)
            refits = _exact_subset
        design = certificate_design(
            self.losses - insample, self.sample_weight, n_samples, n_worst, random_state
        )
        idx = design.refits
        exact, n_nc = refits(pb, self.fit.beta_, idx)
        if n_nc:
            warnings.warn(
                f"certificate: {n_nc} of {idx.size} exact refits did not reach tol={pb['tol']:g}",
                ConvergenceWarning,
                stacklevel=2,
            )
        return certificate_from(
            self.losses,
            exact,
            design,
            self.sample_weight,
            self.mean,
            confidence,
            self.method,
        )


def _scaled_stderr(losses: np.ndarray, w: np.ndarray | None) -> float:
    """:attr:`LOOResult.stderr` where its squares overflow: the same estimator on the losses
    (and weights) divided by their largest magnitude, scaled back. Finite for finite losses
    unless the standard error itself is beyond float64."""
    if not np.isfinite(losses).all():
        raise ValueError("the leave-one-out losses are not finite: no standard error")
    s = float(np.max(np.abs(losses)))
    z = losses / s
    n = losses.shape[0]
    if w is None:
        return s * float(np.std(z, ddof=1) / np.sqrt(n))
    sw, wmax = float(w.sum()), float(w.max())
    m = np.average(z, weights=w / wmax)
    ss = float(np.sum((w / wmax) * (z - m) ** 2))
    return s * math.sqrt(ss) * math.sqrt(wmax / max(sw - 1.0, 1e-300)) / math.sqrt(sw)


def _exact_subset(pb: dict[str, Any], beta: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, int]:
    """Exact leave-one-out losses of the samples idx (refits warm-started at beta)."""
    args = (core_design(pb["X"]), pb["y"], pb["w"], pb["loss"].core, pb["pen"])
    opts = {
        "fit_intercept": pb["fit_intercept"],
        "method": "exact",
        "tol": pb["tol"],
        "max_iter": pb["max_iter"],
        "n_threads": pb["n_threads"],
        "beta": np.ascontiguousarray(beta, dtype=np.float64),
        "subset": idx,
        "offset": pb["offset"],
    }
    with _blas.single_threaded_blas():
        if pb["dual"]:
            out = _core.dual(*args, want_loo=True, **opts)
        else:
            out = _core.loo(*args, refit=False, l1=pb["l1"], gradient=False, **opts)
    check_singular_refits("certify()", out)
    return out.losses, int(out.n_not_converged)


def loo(
    X: ArrayLike,
    y: ArrayLike,
    loss: str | Loss = "logistic",
    penalty: Penalty | float | None = None,
    method: str = "alo",
    fit_intercept: bool = True,
    sample_weight: ArrayLike | None = None,
    coef: ArrayLike | None = None,
    intercept: float | None = None,
    tol: float = 1e-8,
    max_iter: int = 100,
    n_jobs: int | None = None,
    return_gradient: bool = False,
    solver: str = "auto",
    gradient: str = "exact",
    offset: ArrayLike | None = None,
) -> LOOResult | MultiTargetLOOResult:
    """Leave-one-out cross-validation of an L2-penalized GLM.

    Parameters
    ----------
    X, y, loss, penalty, fit_intercept, sample_weight, tol, max_iter, n_jobs, offset
        As in :func:`aloocv.fit`. ``y`` may also be 2-d, ``(n_samples, n_targets)``, for
        ``loss="squared"`` with an L2 penalty (scalar, or per feature with every entry
        > 0): every target shares one decomposition of ``X`` and the result is a
        :class:`aloocv.MultiTargetLOOResult` (``losses`` and ``predictions`` of shape
        ``(n_samples, n_targets)``, ``mean`` and ``stderr`` of shape ``(n_targets,)``,
        ``coef`` of shape ``(n_targets, n_features)``); ``coef=``, ``intercept=``,
        ``offset=``, ``solver=`` and ``return_gradient=`` are not available there, and
        ``"exact"`` takes the closed form (exact for this model, Corollary 2) instead of
        refits. A column vector ``(n_samples, 1)`` is the 1-d case. Other losses refuse a
        2-d y.
    method : {"alo", "exact", "if", "lemma3"}
        ``"alo"``: the paper's Theorem 1 with the exact rank-one downdate of the
        Hessian, ``eta~_i = eta_i + w_i l'_i h_i / (1 - d_i h_i)``; costs about one
        extra pass over X after the fit (it reuses the fit's Cholesky factor).
        ``"if"``: the influence-function approximation ``eta_i + w_i l'_i h_i`` (no
        downdate). ``"lemma3"``: the first-order expansion
        ``l(y_i, eta_i) + l'_i w_i l'_i h_i / (1 - d_i h_i)``. ``"exact"``: n refits
        without each sample, warm-started from the full fit, solved to ``tol``, in
        parallel over samples.
    coef, intercept : optional
        Bring your own fit: use these coefficients (e.g. from a scikit-learn model
        fitted on the same objective) instead of fitting. They should minimize the
        objective; a ``ConvergenceWarning`` says when their gradient is not small.
    return_gradient : bool
        Also compute the ALO hypergradient (``method="alo"`` only) in the same
        blocked pass that computes the leverages; see :attr:`LOOResult.gradient`.
    solver : {"auto", "primal", "dual"}
        As in :func:`aloocv.fit`: with ``"dual"`` (default when n < p, L2 > 0 on every
        feature) the leverages come from the n x n system, ``O(n^2 p + n^3)``, also
        at a given ``coef`` and for the hypergradient.
    gradient : {"exact", "paper"}
        With ``return_gradient=True``: the exact derivative of :attr:`LOOResult.mean`
        (default; reverse mode, about three passes over X beyond ALO, any number of
        parameters), or the paper's approximation (Lemma 4, eq. 14-16; primal route only).

    Returns
    -------
    LOOResult
        ``losses``, ``predictions``, ``leverages``, ``mean``, ``stderr``, ``fit``. For a
        dask X a ``DaskLOOResult``: the per-sample values are dask arrays chunked like
        X's rows; ``"exact"`` refits in parallel tasks, each on the whole X gathered on
        one worker (X must fit in a worker's memory).

    Examples
    --------
    >>> import numpy as np, aloocv
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((300, 5)); y = (X[:, 0] + rng.standard_normal(300) > 0) * 1.0
    >>> res = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0))
    >>> res.losses.shape
    (300,)
    """
    if is_multi_target(y):
        from . import _multitarget

        return _multitarget.loo(
            X,
            y,
            loss,
            penalty,
            method,
            fit_intercept,
            sample_weight,
            n_jobs,
            coef=(coef, None),
            intercept=(intercept, None),
            return_gradient=(return_gradient, False),
            solver=(solver, "auto"),
            gradient=(gradient, "exact"),
            offset=(offset, None),
        )
    if not isinstance(method, str) or method not in LOO_METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {list(LOO_METHODS)}")
    return_gradient = check_bool(return_gradient, "return_gradient")
    if return_gradient and method != "alo":
        raise ValueError("return_gradient=True needs method='alo'")
    if is_dask_collection(X):  # map-reduce over the row chunks: aloocv._dask
        from . import _dask

        _dask.check_solver(solver)
        return _dask.loo(
            X,
            y,
            loss,
            penalty,
            method,
            fit_intercept,
            sample_weight,
            coef,
            intercept,
            tol,
            max_iter,
            n_jobs,
            return_gradient,
            gradient,
            offset,
        )
    if isinstance(loss, str) and loss == MULTINOMIAL:
        if offset is not None:  # the softmax model has no offset term
            raise ValueError("offset= is not available for the multinomial loss")
        if gradient != "exact":
            raise ValueError("the multinomial loss has the exact gradient only")
        if solver not in ("auto", "primal"):
            raise ValueError("the multinomial loss has the primal solver only (solver='auto')")
        from . import _multinomial

        return _multinomial.loo(
            X,
            y,
            penalty,
            method,
            fit_intercept,
            sample_weight,
            coef,
            intercept,
            tol,
            max_iter,
            n_jobs,
            return_gradient,
        )
    if gradient not in ("exact", "paper"):
        raise ValueError(f"unknown gradient {gradient!r}; expected 'exact' or 'paper'")
    if return_gradient and gradient == "paper" and solver == "dual":
        raise ValueError("gradient='paper' is computed on the primal route: use solver='primal'")
    penalty = as_penalty(penalty)
    X, y, loss, pen, l1, w = check_fit_inputs(X, y, loss, penalty, sample_weight, fit_intercept)
    check_loo_samples(X.shape[0])
    tol, max_iter = check_options(tol, max_iter)
    off = check_offset(offset, X.shape[0])
    check_loo_classes(y, w, loss, bool(fit_intercept))
    beta = None
    if coef is not None:
        c = coef if np.ndim(coef) == 1 else np.ravel(coef)
        if np.ndim(c) != 1 or np.shape(c)[0] != X.shape[1]:
            raise ValueError(f"coef has {np.size(c)} entries but X has {X.shape[1]} features")
        c = check_vector(c, X.shape[1], "coef")
        b = None
        if intercept is not None:
            b_arr = np.asarray(intercept)
            if b_arr.size != 1:
                raise ValueError(f"intercept must be a scalar, got shape {b_arr.shape}")
            b = check_real_scalar(b_arr.ravel()[0], "intercept")
        if fit_intercept:
            beta = np.concatenate([[0.0 if b is None else b], c])
        else:
            if b is not None and b != 0.0:
                raise ValueError("intercept given with fit_intercept=False")
            beta = np.ascontiguousarray(c)
    elif intercept is not None:
        raise ValueError("intercept= requires coef=")
    # the paper's approximate gradient lives on the primal route only
    use_dual = choose_solver(solver, X, pen, l1, loss) == "dual" and not (
        return_gradient and gradient == "paper"
    )
    with _blas.single_threaded_blas():
        if use_dual:
            out = _core.dual(
                core_design(X),
                y,
                w,
                loss.core,
                pen,
                fit_intercept=bool(fit_intercept),
                method=method,
                tol=tol,
                max_iter=max_iter,
                n_threads=n_threads(n_jobs),
                want_loo=True,
                beta=beta,
                gradient=bool(return_gradient),
                offset=off,
            )
        else:
            out = _core.loo(
                core_design(X),
                y,
                w,
                loss.core,
                pen,
                fit_intercept=bool(fit_intercept),
                method=method,
                tol=tol,
                max_iter=max_iter,
                n_threads=n_threads(n_jobs),
                beta=beta,
                refit=False,
                l1=l1,
                gradient=bool(return_gradient),
                gradient_kind=gradient,
                offset=off,
            )
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
    fitres = _result(out, loss, penalty, bool(fit_intercept))
    if loss == "logistic":
        check_separation(
            fitres.decision_function(X, off), y, w, pen, l1, warn=method != "exact", stacklevel=2
        )
    if beta is None:
        _warn_not_converged(fitres, tol, max_iter)
    else:
        _warn_given_coef(fitres.gradient_norm_, tol, stacklevel=2)
    if out.n_not_converged:
        warnings.warn(
            f"exact LOO: {out.n_not_converged} of {X.shape[0]} refits did not reach tol={tol:g}",
            ConvergenceWarning,
            stacklevel=2,
        )
    grad = None
    if return_gradient:
        grad = penalty.chain(out.grad_l1, out.grad_l2)
    downdate = out.downdate
    unreliable = unreliable_mask(downdate)
    warn_unreliable(unreliable, loss, l1 is not None and bool(np.any(l1 > 0)), stacklevel=2)
    rcond = out.rcond if isinstance(out, _core.LooResult) else None
    warn_ill_conditioned(rcond, stacklevel=2)
    problem = {
        "X": X,
        "y": y,
        "w": w,
        "loss": loss,
        "pen": pen,
        "l1": l1,
        "fit_intercept": bool(fit_intercept),
        "tol": tol,
        "max_iter": max_iter,
        "n_threads": n_threads(n_jobs),
        "dual": use_dual,
        "offset": off,
    }
    return LOOResult(
        gradient=grad,
        losses=out.losses,
        predictions=out.predictions,
        leverages=out.leverages,
        method=method,
        fit=fitres,
        sample_weight=w,
        downdate=downdate,
        unreliable=unreliable,
        _problem=problem,
    )
