"""Several targets at once for the squared loss with an L2 penalty.

Every target and every lambda share one decomposition (:class:`aloocv._core.MultiRidge`:
one Hessian pass, one p x p eigendecomposition, ``Z = X_c V`` and ``C = Z^T W Y``); a
grid of lambdas for T targets then costs blocked GEMMs fused with the leave-one-out
epilogue, never n x T temporaries per lambda. For the squared loss with an L2 penalty
the leave-one-out values are exact (the paper's Corollary 2), so ``"alo"`` and
``"exact"`` give the same numbers here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _blas, _core
from ._validation import (
    LOO_METHODS,
    as_penalty,
    check_bool,
    check_finite_result,
    check_loo_samples,
    check_options,
    check_sample_weight,
    check_targets,
    check_X,
    core_design,
    design_dot,
    multi_target_penalty,
    n_threads,
)

__all__ = ["MultiTargetKFoldResult", "MultiTargetLOOResult"]


def _weighted_mean(losses: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    if w is None:
        return losses.mean(axis=0)
    return (w @ losses) / w.sum()


def _weighted_stderr(losses: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    n = losses.shape[0]
    if n < 2:
        return np.full(losses.shape[1], np.nan)
    if w is None:
        return losses.std(axis=0, ddof=1) / np.sqrt(n)
    sw = w.sum()
    m = (w @ losses) / sw
    var = (w @ (losses - m) ** 2) / max(sw - 1.0, 1e-300)
    return np.sqrt(var / sw)


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
        return _weighted_mean(self.losses, self.sample_weight)

    @property
    def stderr(self) -> np.ndarray:
        """(n_targets,) standard error of :attr:`mean` (weights act as frequency weights)."""
        return _weighted_stderr(self.losses, self.sample_weight)

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


def _unsupported(**options: Any) -> None:
    for name, (value, default) in options.items():
        if value is not default and not (isinstance(default, str) and value == default):
            raise ValueError(f"{name}= is not supported with several targets (a 2-d y)")


def decompose(
    X: Any,
    Y: Any,
    penalty: Any,
    fit_intercept: Any,
    sample_weight: Any,
    n_jobs: Any,
    loss: Any = "squared",
) -> tuple[Any, Any, np.ndarray, np.ndarray | None, float, Any]:
    """Validated (X, MultiRidge, Y, w, lambda scale, penalty) for several targets."""
    check_bool(fit_intercept, "fit_intercept")
    X = check_X(X)
    n, p = X.shape
    Y = check_targets(Y, n, loss)
    w = check_sample_weight(sample_weight, n)
    penalty = as_penalty(penalty)
    lam, shape = multi_target_penalty(penalty, p)
    with _blas.single_threaded_blas():
        mr = _core.MultiRidge(
            core_design(X),
            Y,
            w,
            fit_intercept=bool(fit_intercept),
            penalty=shape,
            n_threads=n_threads(n_jobs),
        )
    return X, mr, Y, w, lam, penalty


def loo(
    X: Any,
    Y: Any,
    loss: Any,
    penalty: Any,
    method: str,
    fit_intercept: Any,
    sample_weight: Any,
    n_jobs: Any,
    **unsupported: Any,
) -> MultiTargetLOOResult:
    """:func:`aloocv.loo` for a 2-d y (see its docstring)."""
    if not isinstance(method, str) or method not in LOO_METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {list(LOO_METHODS)}")
    _unsupported(**unsupported)
    X, mr, Y, w, lam, _ = decompose(X, Y, penalty, fit_intercept, sample_weight, n_jobs, loss)
    check_loo_samples(X.shape[0])
    T = Y.shape[1]
    with _blas.single_threaded_blas():
        sol = mr.solve(np.full(T, lam), predictions=True, n_threads=n_threads(n_jobs))
        h = mr.leverages(lam)
    pred = sol.predictions
    ww = np.ones(X.shape[0]) if w is None else w
    wh = (ww * h)[:, None]
    if method in ("alo", "exact"):
        losses = 0.5 * (Y - pred) ** 2
    else:
        # the in-sample residual from the leave-one-out one: eta - y = (eta~ - y)(1 - w h)
        res = (pred - Y) * (1.0 - wh)
        if method == "if":
            pred = Y + res * (1.0 + wh)
            losses = 0.5 * (Y - pred) ** 2
        else:  # lemma3: l + l' w l' h / (1 - w h)
            losses = 0.5 * res**2 + res**2 * wh / (1.0 - wh)
    check_finite_result(f"loo(method={method!r})", coef=sol.coef, losses=losses, predictions=pred)
    return MultiTargetLOOResult(
        losses=losses,
        predictions=pred,
        leverages=None if method == "exact" else h,
        method=method,
        coef=np.ascontiguousarray(sol.coef.T),
        intercept=sol.intercept,
        sample_weight=w,
    )


def kfold(
    X: Any,
    Y: Any,
    loss: Any,
    penalty: Any,
    n_folds: Any,
    method: str,
    folds: Any,
    random_state: Any,
    fit_intercept: Any,
    sample_weight: Any,
    tol: Any,
    max_iter: Any,
    n_jobs: Any,
    **unsupported: Any,
) -> MultiTargetKFoldResult:
    """:func:`aloocv.kfold` for a 2-d y (see its docstring)."""
    from ._kfold import KFOLD_METHODS, _assign_folds, _label

    if not isinstance(method, str) or method not in KFOLD_METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {list(KFOLD_METHODS)}")
    _unsupported(**unsupported)
    check_options(tol, max_iter)
    t0 = time.perf_counter()
    X, mr, Y, w, lam, penalty = decompose(X, Y, penalty, fit_intercept, sample_weight, n_jobs, loss)
    n, T = Y.shape
    idx, labels = _assign_folds(n, n_folds, folds, random_state)
    K = labels.size
    ww = np.ones(n) if w is None else w
    wsum = np.bincount(idx, weights=ww, minlength=K)
    if np.any(wsum <= 0):
        bad = int(np.flatnonzero(wsum <= 0)[0])
        raise ValueError(f"fold {_label(labels, bad)} has zero total sample weight")
    nt = n_threads(n_jobs)
    with _blas.single_threaded_blas():
        full = mr.solve(np.full(T, lam), predictions=False, n_threads=nt)
    t1 = time.perf_counter()
    _, shape = multi_target_penalty(penalty, X.shape[1])
    with _blas.single_threaded_blas():
        if method == "alo":
            pred = mr.folds(lam, idx, K, nt)
        else:
            pred = np.empty((n, T), order="F")
            for k in range(K):  # one refit per fold: the fold's weights set to 0
                out = idx == k
                wk = ww.copy()
                wk[out] = 0.0
                try:
                    mk = _core.MultiRidge(
                        core_design(X),
                        Y,
                        wk,
                        fit_intercept=bool(fit_intercept),
                        penalty=shape,
                        n_threads=nt,
                    )
                    sol = mk.solve(np.full(T, lam), predictions=False, n_threads=nt)
                except ValueError as e:
                    raise ValueError(f"fold {_label(labels, k)}: {e}") from None
                pred[out] = design_dot(X[out], sol.coef) + sol.intercept
    losses = 0.5 * (Y - pred) ** 2
    check_finite_result(f"kfold(method={method!r})", losses=losses, predictions=pred)
    fold_means = np.stack([ww[idx == k] @ losses[idx == k] for k in range(K)]) / wsum[:, None]
    total = wsum.sum()
    mean = (ww @ losses) / total
    stderr = np.sqrt(np.sum(wsum[:, None] * (fold_means - mean) ** 2, axis=0) / total / (K - 1))
    return MultiTargetKFoldResult(
        losses=losses,
        predictions=pred,
        folds=idx.astype(np.intp),
        fold_labels=labels,
        fold_means=fold_means,
        mean=mean,
        stderr=stderr,
        method=method,
        coef=np.ascontiguousarray(full.coef.T),
        intercept=full.intercept,
        sample_weight=w,
        timings={"fit": t1 - t0, "folds": time.perf_counter() - t1},
    )
