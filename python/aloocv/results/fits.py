"""Fits: what :func:`aloocv.fit` returns, and what a tuning state hands the tuning
package at each point."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .._validation import check_offset, check_X, design_dot
from ..losses import Loss, Multinomial, get_loss, softmax
from ..penalties import Penalty

__all__ = [
    "FitFields",
    "FitResult",
    "MultinomialFitResult",
    "StateOutput",
    "fit_result",
    "multinomial_fit_result",
]


# ----------------------------------------------------------------------------- fits
@dataclass
class FitResult:
    """A fitted model.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
        0.0 when ``fit_intercept=False``.
    n_iter_ : int
        Newton steps taken: on a fresh Hessian far from the optimum, chord steps on the
        last factor (no Hessian pass) near it; see ``hessian_passes_``.
    converged_ : bool
        Whether ``max|gradient| / sum(sample_weight) <= tol`` was reached.
    objective_ : float
        ``sum_i w_i l(y_i, eta_i) + penalty`` at the solution.
    hessian_passes_ : int
        Passes over X that formed a Hessian ``X^T diag(d) X`` (the costly passes; chord
        steps on a held factor form none). A fit for ALO ends on the Hessian at the
        returned coefficients, taken after chord steps converged 100x below tol (at most
        one pass more than a fresh Hessian every step would take; one more where the
        end falls back to a fresh Newton step, see ``fused_end_fallbacks_``).
    single_hessian_passes_ : int
        Of ``hessian_passes_``, the Hessians accumulated from float32 row blocks (float64
        sums): Newton directions far from the optimum on dense float64 X; the end's and
        every Hessian near the optimum are float64 (docs/math/newton.md).
    sampled_hessian_passes_ : int
        Of ``hessian_passes_``, the Hessians estimated from every k-th row of X (their
        curvatures times k; they read 1/k of X): Newton directions in the first decade of a
        fit's descent from the default start on dense C-ordered X with at least 64 rows per
        column; in ALO's fit only where the sample spans the rows (every column's second
        moment within 25%); 0 in warm-started fits (docs/math/newton.md, "Subsampled
        Hessians").
    matvec_passes_ : int
        Matrix-vector passes over X (``X v`` and ``X^T v``, ``O(n p)`` each; a full
        Newton or chord step reads X once for both) of the smooth Newton fits; 0 where
        the route does not count them (L1 fits, multinomial, dask).
    fused_end_fallbacks_ : int
        1 where a fit for ALO ended on chord steps whose last Newton step was not yet at
        the rounding level (ill-conditioned problems) and so took one more Newton step
        and a fresh Hessian at the returned coefficients; else 0.
    loss : Loss
        The registered loss (:mod:`aloocv.losses`); compares equal to its name when it
        has no parameters.
    penalty, fit_intercept
        The problem that was solved.
    """

    coef_: np.ndarray
    intercept_: float
    n_iter_: int
    converged_: bool
    objective_: float
    loss: Loss
    penalty: Penalty
    fit_intercept: bool
    gradient_norm_: float = field(default=0.0, repr=False)
    hessian_passes_: int = field(default=0, repr=False)
    single_hessian_passes_: int = field(default=0, repr=False)
    sampled_hessian_passes_: int = field(default=0, repr=False)
    matvec_passes_: int = field(default=0, repr=False)
    fused_end_fallbacks_: int = field(default=0, repr=False)

    def decision_function(self, X: ArrayLike, offset: ArrayLike | None = None) -> np.ndarray:
        """Linear predictor ``eta = X coef_ + intercept_ (+ offset)``."""
        X = check_X(X)
        if X.shape[1] != self.coef_.shape[0]:
            raise ValueError(
                f"X has {X.shape[1]} features but the model was fitted on {self.coef_.shape[0]}"
            )
        return self._linear_predictor(X, check_offset(offset, X.shape[0]))

    def _linear_predictor(self, X: Any, offset: np.ndarray | None) -> np.ndarray:
        """``decision_function`` of an X and an offset already validated (a Problem's):
        the backends' linear predictor at the fit, without a second check of X."""
        eta = design_dot(X, self.coef_).ravel()  # a new array: updated in place
        eta += self.intercept_
        if offset is not None:
            eta += offset
        return eta

    def predict(self, X: ArrayLike, offset: ArrayLike | None = None) -> np.ndarray:
        """Mean response: the loss's inverse link of ``decision_function(X, offset)``."""
        return get_loss(self.loss).mean(self.decision_function(X, offset))

    @property
    def beta_(self) -> np.ndarray:
        """(intercept, coef) when an intercept is fitted, else coef."""
        if self.fit_intercept:
            return np.concatenate([[self.intercept_], self.coef_])
        return self.coef_.copy()


@dataclass(frozen=True, eq=False)
class FitFields:
    """A fit made in Python (dask input, the tuning states written in Python) with the
    fields of ``_core.FitResult`` that :func:`_result` reads; the pass counts are None
    where not counted."""

    coef: Any
    intercept: Any
    n_iter: int
    converged: bool
    objective: float
    grad_norm: float
    hessian_passes: int | None = None
    matvec_passes: int | None = None
    fused_end_fallbacks: int | None = None


def _count(out: Any, name: str) -> int:
    """A pass count of a fit's output; 0 where not counted (None or no such field: the
    dual route)."""
    v = getattr(out, name, None)
    return 0 if v is None else int(v)


def fit_result(
    out: Any,
    loss: Loss,
    penalty: Penalty,
    fit_intercept: bool,
) -> FitResult:
    return FitResult(
        coef_=out.coef,
        intercept_=float(out.intercept),
        n_iter_=int(out.n_iter),
        converged_=bool(out.converged),
        objective_=float(out.objective),
        loss=loss,
        penalty=penalty,
        fit_intercept=fit_intercept,
        gradient_norm_=float(out.grad_norm),
        hessian_passes_=_count(out, "hessian_passes"),
        single_hessian_passes_=_count(out, "single_hessian_passes"),
        sampled_hessian_passes_=_count(out, "sampled_hessian_passes"),
        matvec_passes_=_count(out, "matvec_passes"),
        fused_end_fallbacks_=_count(out, "fused_end_fallbacks"),
    )


@dataclass
class MultinomialFitResult(FitResult):
    """A fitted multinomial model: ``coef_`` (K, p) and ``intercept_`` (K,) (centered)."""

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """Class scores ``eta = X coef_^T + intercept_``, shape (n, K)."""
        X = check_X(X)
        if X.shape[1] != self.coef_.shape[1]:
            raise ValueError(
                f"X has {X.shape[1]} features but the model was fitted on {self.coef_.shape[1]}"
            )
        return design_dot(X, self.coef_.T) + self.intercept_

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities softmax(eta), shape (n, K)."""
        return softmax(self.decision_function(X))

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Mean response: the class probabilities, shape (n, K)."""
        return self.predict_proba(X)

    @property
    def beta_(self) -> np.ndarray:
        """(K, p + 1) rows (intercept, coef) per class when an intercept is fitted."""
        if self.fit_intercept:
            return np.column_stack([self.intercept_, self.coef_])
        return self.coef_.copy()


def multinomial_fit_result(out: Any, penalty: Penalty, fit_intercept: bool) -> MultinomialFitResult:
    return MultinomialFitResult(
        coef_=out.coef,
        intercept_=np.asarray(out.intercept),
        n_iter_=int(out.n_iter),
        converged_=bool(out.converged),
        objective_=float(out.objective),
        loss=Multinomial(out.coef.shape[0]),
        penalty=penalty,
        fit_intercept=fit_intercept,
        gradient_norm_=float(out.grad_norm),
    )


# ----------------------------------------------------------------------------- tuning states
@dataclass(frozen=True, eq=False)
class StateOutput(FitFields):
    """ALO at the fit of a tuning state written in Python (dask input, the multinomial
    loss): the fields of ``_core.LooResult`` / ``_core.AloTangentsResult`` that the tuning
    package reads, and what those states add.

    Attributes
    ----------
    losses, predictions, leverages : array or dask array
        Per-sample ALO values (dask arrays aligned with X's row chunks on dask input;
        (n, K) scores and (n, K, K) blocks for the multinomial loss).
    grad_l2, grad_l1 : ndarray of shape (p,) or None
        ``d acv / d`` per-feature l2 / l1 weights.
    tangent_l2, tangent_l1 : ndarray of shape (p, m) or None
        Their derivatives along the columns of the Jacobians (``alo_tangents``).
    det : ndarray of shape (n,) or None
        ``det(I - D_i K_i)`` (multinomial).
    beta : ndarray or None
        The coefficients in the state's own layout (multinomial: class-major (K, p1)),
        for warm starts.
    acv, stderr : float or None
        The ALO mean and its standard error where reduced by the state (dask input).
    """

    losses: Any = None
    predictions: Any = None
    leverages: Any = None
    grad_l2: np.ndarray | None = None
    grad_l1: np.ndarray | None = None
    tangent_l2: np.ndarray | None = None
    tangent_l1: np.ndarray | None = None
    det: np.ndarray | None = None
    beta: np.ndarray | None = None
    acv: float | None = None
    stderr: float | None = None
