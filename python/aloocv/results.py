"""Every result type of aloocv, in one place: plain dataclasses of arrays, None (never
NaN) in a field that does not apply. A :class:`LOOResult` carries its backend's exact
refits (:class:`SubsetRefits`): :meth:`LOOResult.certify` asks no route question."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.exceptions import ConvergenceWarning

from ._diagnostics import (
    Certificate,
    certificate_design,
    certificate_from,
    check_certify_options,
    user_stacklevel,
)
from ._stats import weighted_mean_columns, weighted_stderr, weighted_stderr_columns
from ._validation import check_offset, check_X, design_dot
from .losses import Loss, Multinomial, get_loss, softmax
from .penalties import Penalty

__all__ = [
    "DaskLOOResult",
    "FitFields",
    "FitResult",
    "KFoldResult",
    "LOOResult",
    "MultiTargetKFoldResult",
    "MultiTargetLOOResult",
    "MultinomialFitResult",
    "StateOutput",
    "SubsetRefits",
    "TuneResult",
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
    matvec_passes_: int = field(default=0, repr=False)
    fused_end_fallbacks_: int = field(default=0, repr=False)

    def decision_function(self, X: ArrayLike, offset: ArrayLike | None = None) -> np.ndarray:
        """Linear predictor ``eta = X coef_ + intercept_ (+ offset)``."""
        X = check_X(X)
        if X.shape[1] != self.coef_.shape[0]:
            raise ValueError(
                f"X has {X.shape[1]} features but the model was fitted on {self.coef_.shape[0]}"
            )
        eta = design_dot(X, self.coef_).ravel()  # a new array: updated in place
        eta += self.intercept_
        off = check_offset(offset, X.shape[0])
        if off is not None:
            eta += off
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


# ----------------------------------------------------------------------------- leave-one-out
@dataclass(frozen=True, eq=False)
class SubsetRefits:
    """What :meth:`LOOResult.certify` asks of the backend that made the result.

    Attributes
    ----------
    gather : callable
        ``gather(losses, sample_weight) -> (losses, proxy, weights)`` as numpy arrays: the
        leave-one-out losses, the certificate's error proxy (the leave-one-out loss minus
        the in-sample loss at the fit) and the weights (or None); on dask input computed
        over the chunks (n floats each; X stays on the workers).
    refit : callable
        ``refit(rows) -> (exact losses of those samples, refits not at tol)``: exact
        refits without each sample, warm-started at the fit (the route's own).
    tol : float
        The fit tolerance the refits are solved to.
    """

    gather: Callable[[Any, Any], tuple[np.ndarray, np.ndarray, np.ndarray | None]]
    refit: Callable[[np.ndarray], tuple[np.ndarray, int]]
    tol: float


def _certify(res: Any, n_samples, random_state, confidence, n_worst) -> Certificate:
    """:meth:`LOOResult.certify` of an in-memory or dask result."""
    if res.method == "exact":
        raise ValueError("an exact result needs no certificate (method='exact')")
    if res._refits is None:
        raise ValueError(
            "this result does not carry its problem (it was not made by aloocv.loo); "
            "call aloocv.loo(...).certify()"
        )
    confidence = check_certify_options(n_samples, n_worst, confidence)
    losses, proxy, w = res._refits.gather(res.losses, res.sample_weight)
    design = certificate_design(proxy, w, n_samples, n_worst, random_state)
    idx = design.refits
    exact, n_nc = res._refits.refit(np.asarray(idx, dtype=np.int64))
    if n_nc:
        warnings.warn(
            f"certificate: {n_nc} of {idx.size} exact refits did not reach tol={res._refits.tol:g}",
            ConvergenceWarning,
            stacklevel=user_stacklevel(),
        )
    return certificate_from(losses, exact, design, w, res.mean, confidence, res.method)


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
    # the backend's exact refits of this result's problem, for certify()
    _refits: SubsetRefits | None = field(default=None, repr=False, compare=False)

    @property
    def mean(self) -> float:
        """The (weighted) mean leave-one-out loss: the cross-validation estimate."""
        return float(np.average(self.losses, weights=self.sample_weight))

    @property
    def stderr(self) -> float:
        """Standard error of :attr:`mean` (weights act as frequency weights)."""
        return weighted_stderr(self.losses, self.sample_weight)

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
        return _certify(self, n_samples, random_state, confidence, n_worst)


@dataclass(repr=False)
class DaskLOOResult:
    """Leave-one-out results of dask input (:func:`aloocv.loo` with a dask X).

    Attributes
    ----------
    losses, predictions, leverages, downdate : dask arrays of shape (n_samples,)
        As in :class:`aloocv.LOOResult`, chunked like X's rows (None where the method
        has none). On a ``dask.distributed`` client they are persisted in the workers'
        memory; without one they are lazy (computing them reads X once more).
    mean, stderr : float
        Reduced over the chunks in the leverage pass.
    method : str
    fit : FitResult
    sample_weight : dask array or None
    gradient : ndarray or None
        As in :class:`aloocv.LOOResult`.
    unreliable : dask array of bool or None
        As in :class:`aloocv.LOOResult` (samples with ``d_i h_i > ALO_UNRELIABLE_DH``;
        None for ``"exact"``); their count is reduced in the leverage pass and warned
        about as in memory.
    """

    losses: Any
    predictions: Any
    leverages: Any
    method: str
    fit: Any
    mean: float
    stderr: float
    sample_weight: Any = None
    gradient: np.ndarray | None = None
    downdate: Any = None
    n_not_converged: int = field(default=0, repr=False)
    unreliable: Any = None
    # what certify() asks of the backend (None: a result not made by aloocv.loo, or exact)
    _refits: SubsetRefits | None = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        return (
            f"DaskLOOResult(method={self.method!r}, n={self.losses.shape[0]}, "
            f"mean={self.mean:.6g}, stderr={self.stderr:.3g})"
        )

    def certify(
        self,
        n_samples: int = 20,
        random_state: Any = 0,
        confidence: float = 0.95,
        n_worst: int | None = None,
    ):
        """:meth:`aloocv.LOOResult.certify` on dask input: the same design and estimator
        (:class:`aloocv.Certificate`), the exact refits run over the chunks.

        The error proxy, the approximate losses and the weights (n floats each) are
        gathered to the client to draw the samples; X is not. Each of the at most
        ``n_samples`` refits is a fit over the chunks warm-started at the full fit (the
        problem with the sample's weight set to zero; the elastic-net route with an L1
        term), a few passes over X each.
        """
        return _certify(self, n_samples, random_state, confidence, n_worst)


# ----------------------------------------------------------------------------- tuning
@dataclass
class TuneResult:
    """The outcome of :func:`aloocv.tune`.

    Attributes
    ----------
    penalty : Penalty
        The selected penalty.
    fit : FitResult
        The fit at the selected penalty.
    loo : LOOResult or None
        ALO at the selected penalty (``loo.mean`` is :attr:`acv`; a ``DaskLOOResult``
        with dask per-sample arrays on dask input); None after :meth:`without_samples`.
    acv, stderr : float
        ALOOCV estimate at the selected penalty and its standard error.
    history : dict of ndarray
        Per evaluation (grid point or iterate), in order: ``"params"`` (T, m) penalty
        parameters, ``"acv"`` and ``"stderr"`` (T,), ``"grad"`` (T, m) the derivative
        of ACV in ``log(params)`` (NaN where not computed), ``"n_fits"`` (T,)
        cumulative refits.
    method : str
    n_iter : int
        Iterations (grid points for ``"grid"``).
    n_fits : int
        Warm-started refits (each a few Hessian passes; SGD counts Newton steps).
    converged : bool
        The stopping test passed: for gradient methods, the (projected) gradient in
        ``log(lambda)`` fell below ``tol * |acv|``; grids always converge.
    message : str
        Why the search stopped.
    path_losses, path_predictions : ndarray, optional
        Grid points (``"grid"``, and the bracketing grid of ``"auto"``): per-sample
        leave-one-out losses ``(n, T)`` and linear predictors ``(n, T)`` (``(n, K, T)``
        multinomial; ``"grid"`` only), columns in the order of ``history``. On dask
        input they are dask arrays with X's row chunks (computed by the workers, held
        there on a distributed client): only per-point means, standard errors and
        gradients reach the client.
    path_coefs, path_intercepts, path_n_iter : ndarray, optional
        Grid points: coefficients ``(T, p)`` (``(T, K, p)``), intercepts ``(T,)``
        (``(T, K)``) and Newton iterations ``(T,)`` of each warm-started fit.
    path_hessian_passes, path_matvec_passes : ndarray, optional
        ``method="grid"``: passes over X of each grid point's fit (and of ALO's refresh of
        its factor, if any), from the core's counters: Hessian passes (``O(n p^2)`` each)
        and matrix-vector passes (``O(n p)`` each: Newton and chord steps, gradients),
        ``(T,)`` integers; None where the route does not count them (the squared-loss
        ridge path, dask, multinomial matrix-vector passes). ALO adds one leverage pass
        per point on top.
    """

    penalty: Penalty
    fit: FitResult
    loo: LOOResult | None
    acv: float
    stderr: float
    history: dict[str, np.ndarray]
    method: str
    n_iter: int
    n_fits: int
    converged: bool
    selection: str = "min"
    message: str = ""
    path_losses: np.ndarray | None = field(default=None, repr=False)
    _best_index: int = field(default=-1, repr=False)
    path_predictions: np.ndarray | None = field(default=None, repr=False)
    path_coefs: np.ndarray | None = field(default=None, repr=False)
    path_intercepts: np.ndarray | None = field(default=None, repr=False)
    path_n_iter: np.ndarray | None = field(default=None, repr=False)
    path_hessian_passes: np.ndarray | None = field(default=None, repr=False)
    path_matvec_passes: np.ndarray | None = field(default=None, repr=False)

    def without_samples(self) -> TuneResult:
        """A copy without the per-sample arrays (``loo``, ``path_losses``,
        ``path_predictions``): what a fitted estimator keeps unless asked for them."""
        return dataclasses.replace(self, loo=None, path_losses=None, path_predictions=None)

    def plot(self, ax: Any = None, **kwargs: Any) -> Any:
        """ACV against lambda (grid) or ACV and lambda per iteration (gradient runs).

        Needs matplotlib (``pip install aloocv[plot]``); returns the figure.
        """
        from .plotting import plot_tune

        return plot_tune(self, ax=ax, **kwargs)


# ----------------------------------------------------------------------------- K-fold
@dataclass
class KFoldResult:
    """Per-sample and per-fold K-fold cross-validation results.

    Attributes
    ----------
    losses : ndarray of shape (n_samples,)
        Loss of each sample under the model fitted without its fold. With ``cv=``
        splits whose test sets do not partition the samples (:attr:`partition` False):
        the average over the splits that test the sample, NaN for a sample no split
        tests.
    predictions : ndarray of shape (n_samples,)
        The held-out linear predictors ``eta~_i`` (averaged, or NaN, as :attr:`losses`).
    folds : ndarray of shape (n_samples,)
        Fold index (``0 .. n_folds - 1``) of each sample; ``fold_labels[folds]`` gives
        the user's labels when ``folds=`` was passed. Without a partition: the first
        split that tests the sample, -1 for none.
    fold_labels : ndarray of shape (n_folds,)
        The label of each fold index: the sorted distinct values of ``folds=``, or
        ``arange(n_folds)`` for shuffled folds and ``cv=`` splits.
    fold_means : ndarray of shape (n_folds,)
        (Weighted) mean held-out loss of each fold (each split's test set), what
        ``cross_val_score`` reports per split.
    mean : float
        The CV estimate: the mean of :attr:`fold_means` weighted by the folds' total
        sample weights. For a partition (every ``n_folds``/``folds=`` run, and ``cv=``
        splitters such as ``KFold``, ``StratifiedKFold``, ``GroupKFold``,
        ``LeaveOneGroupOut``) it is the (weighted) mean of :attr:`losses`; otherwise
        the (weighted) mean over all (split, test sample) pairs.
    stderr : float
        Standard error of :attr:`mean` from the spread of the fold means across folds
        (None for a single ``cv=`` split: no spread to measure),
        as ``cv.glmnet`` computes ``cvsd``: ``sqrt(sum_k W_k (m_k - mean)^2 / sum_k W_k
        / (K - 1))`` with ``m_k`` the fold means and ``W_k`` the folds' total weights
        (sizes when unweighted). For equal folds this is ``std(fold_means, ddof=1) /
        sqrt(K)``.
    method : str
        ``"alo"`` or ``"exact"``.
    fit : FitResult
        The full-data fit (the expansion point of ``"alo"``, the warm start of
        ``"exact"``).
    sample_weight : ndarray or None
        The weights of the weighted means.
    timings : dict
        Wall times in seconds of the full fit (``"fit"``) and of the per-fold work
        (``"folds"``: the downdates of ``"alo"``, the refits of ``"exact"``).
    test_indices : list of ndarray
        The test indices of each fold or split, in the splitter's order.
    split_losses, split_predictions : list of ndarray
        The held-out losses and predictions of each split's test samples (aligned with
        :attr:`test_indices`; a sample tested by several splits has one value per
        split).
    partition : bool
        Whether the test sets partition the samples with each training set their
        complement (always true without ``cv=``).
    """

    losses: np.ndarray
    predictions: np.ndarray
    folds: np.ndarray
    fold_labels: np.ndarray
    fold_means: np.ndarray
    mean: float
    stderr: float | None
    method: str
    fit: FitResult
    sample_weight: np.ndarray | None = None
    timings: dict[str, float] = field(default_factory=dict)
    test_indices: list[np.ndarray] = field(default_factory=list)
    split_losses: list[np.ndarray] = field(default_factory=list)
    split_predictions: list[np.ndarray] = field(default_factory=list)
    partition: bool = True

    @property
    def n_folds(self) -> int:
        """The number of folds."""
        return int(self.fold_means.shape[0])

    def __repr__(self) -> str:
        return (
            f"KFoldResult(method={self.method!r}, n={self.losses.shape[0]}, "
            f"n_folds={self.n_folds}, mean={self.mean:.6g}, stderr={self.stderr:.3g})"
        )


# ----------------------------------------------------------------------------- several targets
@dataclass
class MultiTargetLOOResult:
    """Leave-one-out results for several targets (squared loss, L2 penalty).

    What :func:`aloocv.loo` returns for a 2-d ``y`` of shape ``(n_samples, n_targets)``.

    Attributes
    ----------
    losses : ndarray of shape (n_samples, n_targets)
        ``1/2 (y_it - eta~_it)^2`` (for ``"lemma3"`` the first-order expansion).
    predictions : ndarray of shape (n_samples, n_targets)
        Leave-one-out predictions ``eta~_it`` (for ``"if"`` the influence-function ones).
    leverages : ndarray of shape (n_samples,) or None
        ``h_i`` (the same for every target; None for ``"exact"``).
    method : str
    coef : ndarray of shape (n_targets, n_features)
        The full-data fit, one row per target (scikit-learn's layout).
    intercept : ndarray of shape (n_targets,)
    sample_weight : ndarray or None
        Weights of the weighted means.
    """

    losses: np.ndarray
    predictions: np.ndarray
    leverages: np.ndarray | None
    method: str
    coef: np.ndarray
    intercept: np.ndarray
    sample_weight: np.ndarray | None = None

    @property
    def n_targets(self) -> int:
        return int(self.losses.shape[1])

    @property
    def mean(self) -> np.ndarray:
        """(n_targets,) (weighted) mean leave-one-out loss of each target."""
        return weighted_mean_columns(self.losses, self.sample_weight)

    @property
    def stderr(self) -> np.ndarray:
        """(n_targets,) standard error of :attr:`mean` (weights act as frequency weights)."""
        return weighted_stderr_columns(self.losses, self.sample_weight)

    def __repr__(self) -> str:
        return (
            f"MultiTargetLOOResult(method={self.method!r}, n={self.losses.shape[0]}, "
            f"n_targets={self.n_targets})"
        )


@dataclass
class MultiTargetKFoldResult:
    """K-fold results for several targets (squared loss, L2 penalty).

    What :func:`aloocv.kfold` returns for a 2-d ``y``.

    Attributes
    ----------
    losses, predictions : ndarray of shape (n_samples, n_targets)
        Held-out losses ``1/2 (y - eta~)^2`` and linear predictors of each sample under the
        model fitted without its fold.
    folds : ndarray of shape (n_samples,)
    fold_labels : ndarray of shape (n_folds,)
    fold_means : ndarray of shape (n_folds, n_targets)
    mean, stderr : ndarray of shape (n_targets,)
        The CV estimate per target and cv.glmnet's standard error (as in
        :class:`aloocv.KFoldResult`).
    method : str
    coef : ndarray of shape (n_targets, n_features)
        The full-data fit.
    intercept : ndarray of shape (n_targets,)
    sample_weight : ndarray or None
    timings : dict
    """

    losses: np.ndarray
    predictions: np.ndarray
    folds: np.ndarray
    fold_labels: np.ndarray
    fold_means: np.ndarray
    mean: np.ndarray
    stderr: np.ndarray
    method: str
    coef: np.ndarray
    intercept: np.ndarray
    sample_weight: np.ndarray | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def n_folds(self) -> int:
        return int(self.fold_means.shape[0])

    @property
    def n_targets(self) -> int:
        return int(self.losses.shape[1])

    def __repr__(self) -> str:
        return (
            f"MultiTargetKFoldResult(method={self.method!r}, n={self.losses.shape[0]}, "
            f"n_folds={self.n_folds}, n_targets={self.n_targets})"
        )
