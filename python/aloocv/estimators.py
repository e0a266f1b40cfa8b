"""scikit-learn estimators that choose their regularization by ALOOCV.

Each mirrors the scikit-learn CV estimator it replaces (parameter names and fitted
attributes), converts that estimator's regularization convention exactly to the
paper's objective (a sum of losses plus ``lambda^T r(theta)``), and evaluates every
candidate by approximate leave-one-out instead of K refits.
"""

from __future__ import annotations

import dataclasses
from numbers import Integral, Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.linear_model._base import LinearClassifierMixin
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from . import _blas, _scoring
from ._scoring import get_scorer
from ._validation import (
    check_bool,
    check_choice,
    check_class_weight,
    check_labels,
    check_sample_weight,
    check_vector,
    check_verbose,
    check_X,
    design_dot,
    design_tdot,
    is_dask_collection,
    is_multi_target,
    is_sparse,
    n_threads,
)
from ._validation_dask import as_dask_design, as_dask_vector, require_dask
from .api import fit as _fit
from .backends.memory.multitarget import decompose
from .losses import Tweedie, get_loss, softmax
from .penalties import L1, L2, ElasticNet, Penalty
from .problem import Problem
from .tuning import TuneResult, tune
from .tuning.drivers import second_order_method

__all__ = [
    "ALOElasticNetCV",
    "ALOGammaRegressorCV",
    "ALOLogisticRegressionCV",
    "ALOPoissonRegressorCV",
    "ALORidgeCV",
    "ALOTweedieRegressorCV",
]

#: Default ``alphas`` of the GLM regressors (scikit-learn's convention: mean deviance / 2
#: + alpha / 2 ||w||^2).
GLM_DEFAULT_ALPHAS = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)


def _precheck(X: Any) -> None:
    """Sparse structure before scikit-learn converts it (scipy's conversions crash on
    out-of-range indices); dense input gets scikit-learn's own messages first."""
    if is_sparse(X):
        check_X(X)


def _dask_fit_inputs(est, X, y, sample_weight):
    """(X, y, sample_weight) of an estimator's fit on dask input, validated as far as
    possible without reading X (its chunks are checked in the first pass)."""
    require_dask()
    X = as_dask_design(X)
    est.n_features_in_ = int(X.shape[1])
    y = as_dask_vector(y, X, "y")
    if sample_weight is not None:
        sample_weight = as_dask_vector(sample_weight, X, "sample_weight")
    check_bool(est.fit_intercept, "fit_intercept")
    for flag in ("alpha_per_feature", "store_cv_results", "store_loo"):
        if hasattr(est, flag):  # the per-sample arrays that these keep (n floats per
            check_bool(getattr(est, flag), flag)  # kept array) are computed to the client
    return X, y, sample_weight


def _local(a: Any) -> np.ndarray:
    """A per-sample array on the client: a dask array (dask input, the arrays that
    ``store_loo`` / ``store_cv_results`` / ``scoring=`` ask for) is computed."""
    return np.asarray(a.compute() if is_dask_collection(a) else a, dtype=np.float64)


def _dask_enet_top(X, y, sample_weight, fit_intercept: bool) -> tuple[float, np.ndarray]:
    """(sum of weights, X^T W (y - ybar)) of dask input in one pass over X (p floats
    reach the client)."""
    import dask
    import dask.array as da

    w = da.ones_like(y, dtype=np.float64) if sample_weight is None else sample_weight
    n, sy, xwy, xw = dask.compute(w.sum(), (w * y).sum(), X.T @ (w * y), X.T @ w)
    n = float(n)
    ybar = float(sy) / n if (fit_intercept and n > 0) else 0.0
    return n, np.asarray(xwy) - ybar * np.asarray(xw)


def _class_weights_of_labels(classes: np.ndarray, cw: np.ndarray):
    """A map_blocks function: the class weight of each label of a chunk of y."""

    def per_sample(yb: np.ndarray) -> np.ndarray:
        return cw[np.searchsorted(classes, yb)]

    return per_sample


def _dask_class_weight(class_weight, classes: np.ndarray, y, sample_weight):
    """Sample weights (a dask vector) of class_weight on dask y: scikit-learn's
    compute_class_weight on the weighted class counts, taken in one pass over y."""
    import dask

    if isinstance(class_weight, str) and class_weight == "balanced":
        w = 1.0 if sample_weight is None else sample_weight
        counts = np.array(
            dask.compute(
                *[(w * y.map_blocks(_label_indicator(c), dtype=np.float64)).sum() for c in classes]
            ),
            dtype=float,
        )
        # each class once, weighted by its count: the same bincount as over y itself
        cw = compute_class_weight("balanced", classes=classes, y=classes, sample_weight=counts)
    else:  # a dict: y is not read
        cw = compute_class_weight(class_weight, classes=classes, y=classes)
    per = y.map_blocks(_class_weights_of_labels(classes, cw), dtype=np.float64)
    return per if sample_weight is None else sample_weight * per


def _chunk_classes(yb: np.ndarray) -> np.ndarray:
    return np.unique(np.asarray(yb))


def _dask_labels(X: Any, y: Any, sample_weight: Any) -> tuple[Any, Any, Any, np.ndarray]:
    """(X, y, sample_weight, classes_) of a classifier's fit on dask input: y keeps its
    labels (numbers or strings, as the numpy path), chunked like X's rows; classes_ are
    the sorted distinct labels with y's dtype, from a per-chunk unique reduction (one
    pass over y, not X; only the distinct labels reach the client)."""
    import dask
    import dask.array as da

    require_dask()
    X = as_dask_design(X)
    n = int(X.shape[0])
    if hasattr(y, "to_dask_array") and not isinstance(y, da.Array):  # dask Series
        y = y.to_dask_array(lengths=True)
    if not isinstance(y, da.Array):
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1 or y.shape[0] != n:
            raise ValueError(f"y must be 1-dimensional of length {n}, got shape {y.shape}")
        y = da.from_array(y, chunks=(X.chunks[0],))
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must be 1-dimensional of length {n}, got shape {y.shape}")
    if y.dtype.kind == "c":
        raise ValueError("y holds complex numbers; class labels must be real or strings")
    y = y.rechunk((X.chunks[0],))
    parts = [dask.delayed(_chunk_classes, pure=True)(b) for b in y.to_delayed().ravel()]
    (uniq,) = dask.compute(parts)
    classes = np.unique(np.concatenate([np.asarray(u) for u in uniq]))
    if classes.dtype.kind == "f" and not np.all(np.isfinite(classes)):
        raise ValueError("y contains NaN or inf")
    check_classification_targets(classes)
    if sample_weight is not None:
        sample_weight = as_dask_vector(sample_weight, X, "sample_weight")
    return X, y, sample_weight, classes


def _label_indicator(c: Any):
    """A map_blocks function: 1.0 where a chunk of labels equals c, else 0.0."""

    def indicator(yb: np.ndarray) -> np.ndarray:
        return (np.asarray(yb) == c).astype(np.float64)

    return indicator


def _checked_input(est, X, y, sample_weight, labels: bool = False) -> None:
    """The validation layer on what scikit-learn's validate_data returned: finite, real,
    canonical input, and real bools for the flags."""
    X = check_X(X)
    n = X.shape[0]
    if labels:
        check_labels(y, n)
    else:
        check_vector(y, n, "y")
    check_sample_weight(sample_weight, n)
    check_bool(est.fit_intercept, "fit_intercept")
    for flag in ("alpha_per_feature", "store_cv_results", "store_loo"):
        if hasattr(est, flag):
            check_bool(getattr(est, flag), flag)
    check_choice("search", est.search, ("grid", "gradient"))
    check_choice("rule", est.rule, ("min", "1se"))


def _positive_grid(name: str, values: Any) -> np.ndarray:
    raw = np.asarray(values)
    if raw.dtype.kind not in "iuf":  # bools, strings, complex: no silent conversion
        raise TypeError(f"{name} must be a real number or a sequence of them, got {values!r}")
    arr = np.atleast_1d(raw.astype(float))
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d sequence")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be positive and finite, got {values!r}")
    return arr


def _row_of(params: np.ndarray, v: np.ndarray) -> int:
    """The first history row holding exactly the parameters ``v`` (-1: none)."""
    if params.size == 0:
        return -1
    hit = np.flatnonzero(np.all(params.reshape(params.shape[0], -1) == v.ravel(), axis=1))
    return int(hit[0]) if hit.size else -1


def _passes_per_candidate(searches: list) -> float:
    """Mean passes over X per grid candidate of the searches, from the core's counters:
    the Hessian passes of each warm-started fit plus ALO's one leverage pass (the
    ``O(n p^2)`` passes; NaN where the route does not count them, e.g. the squared-loss
    ridge path or a gradient search)."""
    per = []
    for s in searches:
        hp = s.res.path_hessian_passes
        if hp is None:
            return float("nan")
        per.append(np.asarray(hp, dtype=np.float64)[s.rows] + 1.0)
    v = np.concatenate(per) if per else np.empty(0)
    return float(np.mean(v)) if v.size and np.all(np.isfinite(v)) else float("nan")


def _search_results(
    res: TuneResult, names: list[str], convert, score: np.ndarray, n_grid: int
) -> dict[str, np.ndarray]:
    """One row per evaluation (grid point or iterate), flat 1-d columns: the estimator's
    own parameters, ``"loss"`` and ``"loss_stderr"`` (leave-one-out loss), ``"score"``
    (higher is better) and ``"gradient"`` (1 for the iterates of a gradient search, 0 for
    grid points)."""
    h = res.history
    params = h["params"]
    if params.ndim == 2 and params.shape[1] > 1 and names == ["alpha"]:
        names = [f"alpha_{j}" for j in range(params.shape[1])]
    out: dict[str, list] = {name: [] for name in names}
    for row in params:
        for name, v in zip(names, convert(row)):
            out[name].append(v)
    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}
    arrays["loss"] = h["acv"].copy()
    arrays["loss_stderr"] = h["stderr"].copy()
    arrays["score"] = np.asarray(score, dtype=np.float64)
    arrays["gradient"] = (np.arange(h["acv"].size) >= n_grid).astype(np.float64)
    return arrays


def _encode_labels(y: Any, classes: np.ndarray) -> np.ndarray:
    """Class labels as their indices 0..K-1 in the sorted `classes` (float64)."""
    return np.searchsorted(classes, np.asarray(y)).astype(np.float64)


class _Search:
    """The outcome of one search: the chosen result and, per candidate of the grid (in
    the estimator's order), the history row, the mean loss and the score."""

    def __init__(self, res, rows, loss, score, row_score, best_score, scorer, stderr=None):
        self.res = res
        self.rows = rows
        # rows of the history that are grid points (they come first; set by _search)
        self.n_grid = int(rows.max()) + 1 if rows.size and rows.max() >= 0 else 0
        self.loss = loss
        self.stderr = stderr
        self.score = score
        self.row_score = row_score
        self.best_score = best_score
        self.scorer = scorer


class _ALOBase(BaseEstimator):
    """Shared fitting logic: grid or gradient search of ALOOCV, scored by the fitted loss
    or by a scikit-learn scorer on the leave-one-out predictions."""

    def _loss_score(self, acv: Any, weight_mean: float) -> Any:
        """``best_score_`` without a scorer: the negated mean leave-one-out loss."""
        return -np.asarray(acv, dtype=np.float64)

    def _replay(self, eta: np.ndarray, n: int, offset=None) -> Any:  # pragma: no cover
        raise NotImplementedError

    def _search(
        self,
        X,
        y,
        loss: Any,
        grid: list[Penalty],
        sample_weight,
        *,
        offset=None,
        y_score=None,
        score_weight=None,
    ) -> _Search:
        """Tune over ``grid`` (the estimator's candidates, in its order); with a scorer,
        choose the candidate of the highest score of its leave-one-out predictions."""
        scorer = get_scorer(self, self.scoring)
        if scorer is not None and self.search != "grid":
            raise ValueError(
                "scoring= needs search='grid': the gradient search minimizes the leave-one-out "
                "loss itself (leave scoring=None to select by that loss)"
            )
        if scorer is not None and self.rule != "min":
            raise ValueError(
                "rule='1se' uses the standard error of the leave-one-out loss; with scoring= "
                "use rule='min'"
            )
        common = dict(
            loss=loss,
            fit_intercept=self.fit_intercept,
            sample_weight=sample_weight,
            fit_tol=self.tol,
            fit_max_iter=self.max_iter,
            n_jobs=self.n_jobs,
            offset=offset,
        )
        # "gradient": the grid brackets the minimum, second-order steps on the exact
        # derivatives of ALOOCV reach it (tune's "auto" search on this grid)
        method = "grid" if self.search == "grid" else "auto"
        res = tune(
            X,
            y,
            penalty=grid[0],
            method=method,
            grid=grid,
            selection=self.rule,
            verbose=check_verbose(getattr(self, "verbose", 0)),
            **common,
        )
        h = res.history
        rows = np.array([_row_of(h["params"], g.params()) for g in grid])
        ok = rows >= 0
        cand_loss = np.full(len(grid), np.nan)
        cand_loss[ok] = h["acv"][rows[ok]]
        cand_se = np.full(len(grid), np.nan)
        cand_se[ok] = h["stderr"][rows[ok]]
        if sample_weight is None:
            wmean = 1.0
        elif is_dask_collection(sample_weight):  # reduced on the workers
            wmean = float(sample_weight.mean().compute())
        else:
            wmean = float(np.mean(np.asarray(sample_weight)))
        row_score = self._loss_score(h["acv"], wmean)
        if scorer is None:
            score = self._loss_score(cand_loss, wmean)
            best_score = float(self._loss_score(res.acv, wmean))
        else:
            y_true = y if y_score is None else y_score
            if is_dask_collection(y_true):  # dask input: the scorer's n labels and weights
                y_true = np.asarray(y_true)  # on the client (X stays on the cluster)
            if is_dask_collection(score_weight):
                score_weight = np.asarray(score_weight)
            score = np.array(
                [
                    _scoring.score(
                        scorer,
                        self._replay(res.path_predictions[..., r], X.shape[0], offset),
                        X,
                        y_true,
                        score_weight,
                    )
                    for r in rows
                ]
            )
            best = int(np.argmax(score))
            best_score = float(score[best])
            row_score = np.full(h["acv"].size, np.nan)
            row_score[rows] = score
            if rows[best] != res._best_index:
                one = tune(X, y, penalty=grid[best], method="grid", grid=[grid[best]], **common)
                res = dataclasses.replace(
                    one,
                    history=res.history,
                    n_iter=res.n_iter,
                    n_fits=res.n_fits + one.n_fits,
                    path_losses=res.path_losses,
                    path_predictions=res.path_predictions,
                    path_coefs=res.path_coefs,
                    path_intercepts=res.path_intercepts,
                    path_n_iter=res.path_n_iter,
                    path_hessian_passes=res.path_hessian_passes,
                    path_matvec_passes=res.path_matvec_passes,
                    _best_index=int(rows[best]),
                )
        if method == "grid":
            # the candidate itself, not exp(log(candidate)) from the search's log scale
            chosen = np.flatnonzero(rows == res._best_index)
            if chosen.size:
                res = dataclasses.replace(res, penalty=grid[int(chosen[0])])
        out = _Search(res, rows, cand_loss, score, row_score, best_score, scorer, cand_se)
        if method == "grid":
            out.n_grid = int(h["acv"].size)
        return out

    def _keep(self) -> bool:
        return bool(getattr(self, "store_loo", False) or getattr(self, "store_cv_results", False))

    def _store(self, search: _Search, grid: dict[str, np.ndarray]) -> None:
        """Fitted attributes shared by all estimators; ``grid`` holds the estimator's own
        parameters per candidate (for :meth:`plot_cv`)."""
        res = search.res
        # small (n_candidates): the grid curve, kept through gradient searches
        self._curve = {
            **{k: np.asarray(v, dtype=np.float64) for k, v in grid.items()},
            "loss": search.loss,
            "loss_stderr": search.stderr,
            "score": np.asarray(search.score, dtype=np.float64),
            "scored": search.scorer is not None,
        }
        self.tune_result_ = res if self._keep() else res.without_samples()
        self.best_score_ = search.best_score
        self.best_stderr_ = res.stderr
        self.n_iter_ = int(res.fit.n_iter_)  # the final fit's, as scikit-learn's
        self.n_fits_ = int(res.n_fits)  # warm-started fits during the search
        self.passes_per_candidate_ = _passes_per_candidate([search])
        if self._keep():
            self.loo_predictions_ = _local(res.loo.predictions).copy()

    def plot_cv(self, ax: Any = None) -> Any:
        """Leave-one-out loss against the estimator's own regularization parameter (see
        :func:`aloocv.plotting.plot_cv`)."""
        check_is_fitted(self, "search_results_")
        if np.ndim(self.coef_) == 2 and "target" in self.search_results_:
            raise ValueError(
                "plot_cv draws one curve of one target: plot search_results_ per target (column "
                "'target') for a fit on several targets"
            )
        from .plotting import plot_cv

        return plot_cv(self, ax=ax)


class _ALORegressor(RegressorMixin, _ALOBase):
    """Prediction, tags and leave-one-out replay shared by the linear regressors."""

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Linear prediction ``X coef_ + intercept_``."""
        check_is_fitted(self, "coef_")
        X = validate_data(
            self,
            X,
            accept_sparse=["csr", "csc", "coo"],
            reset=False,
            dtype=[np.float64, np.float32],
        )
        if np.ndim(self.coef_) == 2:  # several targets: coef_ (n_targets, n_features)
            return design_dot(X, self.coef_.T) + self.intercept_
        return design_dot(X, self.coef_).ravel() + self.intercept_

    def _replay(self, eta: np.ndarray, n: int, offset=None) -> Any:
        return _scoring.LOORegressor(n, np.asarray(eta, dtype=np.float64))

    def _targets_inputs(self, X, y, sample_weight) -> tuple[Any, Any, Any, bool]:
        """Validated ``(X, y, sample_weight, several_targets)`` of the squared-loss
        regressors (``alpha_per_target``): a dask X chunk by chunk (1-d y), a 2-d y of
        several targets as is, otherwise a 1-d y."""
        if is_dask_collection(X):  # a dask array: chunk by chunk (aloocv._dask)
            return (*_dask_fit_inputs(self, X, y, sample_weight), False)
        _precheck(X)
        X, y = validate_data(
            self,
            X,
            y,
            accept_sparse=["csr", "csc", "coo"],
            y_numeric=True,
            multi_output=True,
            dtype=[np.float64, np.float32],
        )
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64)
        check_bool(self.alpha_per_target, "alpha_per_target")
        if is_multi_target(y):
            return X, y, sample_weight, True
        if y.ndim == 2:
            y = y[:, 0]
        _checked_input(self, X, y, sample_weight)
        return X, y, sample_weight, False

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class _SquaredScore:
    """``best_score_`` of the squared-loss estimators without a scorer: minus the mean
    of ``sample_weight * (y - y_loo)^2``, scikit-learn's ``RidgeCV`` convention."""

    def _loss_score(self, acv: Any, weight_mean: float) -> Any:
        # acv = sum(w e^2 / 2) / sum(w)  ->  mean(w e^2) = 2 acv mean(w)
        return -2.0 * weight_mean * np.asarray(acv, dtype=np.float64)


_SCORING_DOC = """scoring : str, callable or None
        A scikit-learn scorer name (``sklearn.metrics.get_scorer_names()``) or a callable
        ``scorer(estimator, X, y)``, evaluated on the leave-one-out predictions of each
        candidate (with ``sample_weight`` when fit got one); the candidate of the highest
        score is chosen (``search="grid"`` and ``rule="min"`` only). None: the candidate
        of the lowest leave-one-out loss."""


class ALORidgeCV(_SquaredScore, _ALORegressor):
    """Ridge regression with the regularization chosen by exact leave-one-out.

    For squared loss with an L2 penalty ALOOCV *is* exact LOO (the paper's
    Corollary 2), so this is scikit-learn's ``RidgeCV`` (efficient LOO), plus a
    gradient search and one regularization parameter per feature.

    Parameters
    ----------
    alphas : float or array_like of positive floats
        Candidate ``alpha`` in scikit-learn's ``Ridge`` convention
        ``||y - X w||^2 + alpha ||w||^2`` (the same problem as ``aloocv.L2(alpha)``).
    fit_intercept : bool
    scoring : str, callable or None
        A scikit-learn scorer name or a callable ``scorer(estimator, X, y)``, evaluated
        on the leave-one-out predictions of each alpha (with ``sample_weight`` when fit
        got one, as ``RidgeCV`` does); the alpha of the highest score is chosen (``search="grid"``,
        ``rule="min"``). None (default): the lowest leave-one-out squared error, and
        ``best_score_`` is minus the mean squared error, as ``RidgeCV``.
    store_cv_results : bool
        Keep the per-sample arrays: ``cv_results_``, ``loo_predictions_`` and
        ``tune_result_.loo`` (default False: a fitted model holds no array of length
        n_samples).
    alpha_per_feature : bool
        After the grid, tune one alpha per feature by gradient descent on ALOOCV
        (the paper's "ridge with diagonal regressors"); ``alpha_`` is then a vector.
        1-d ``y`` only.
    alpha_per_target : bool
        With a 2-d ``y`` (several targets), choose one alpha per target (as
        ``RidgeCV(alpha_per_target=True)``); otherwise one alpha for all targets,
        minimizing the mean over targets and samples of the squared leave-one-out
        errors. Ignored for a 1-d ``y``.
    search : {"grid", "gradient"}
        ``"gradient"`` refines the best grid alpha by second-order steps on the exact
        derivative of the leave-one-out loss (1-d ``y`` only).
    rule : {"min", "1se"}
        The minimum of the leave-one-out loss, or the largest alpha within one standard
        error of it.
    tol, max_iter
        Tolerance and iterations of each fit.
    n_jobs : int, optional
        OpenMP threads.

    Several targets (``y`` of shape ``(n_samples, n_targets)``, ``n_targets > 1``) share
    one decomposition of ``X``: a Hessian pass, a ``p x p`` eigendecomposition and one
    blocked GEMM per spectral filter of the grid (compressed to its numerical rank, see
    ``aloocv._core.MultiRidge``), so thousands of targets cost a few passes over an
    ``n x n_targets`` array, not one fit per target and alpha. The leave-one-out
    errors, the chosen alphas, ``coef_``, ``intercept_`` and ``best_score_`` are those of
    scikit-learn's ``RidgeCV`` (efficient LOO, including its weighted convention).

    Attributes
    ----------
    alpha_ : float or ndarray of shape (n_features,) or (n_targets,)
        Per feature with ``alpha_per_feature=True``; per target with a 2-d ``y`` and
        ``alpha_per_target=True``.
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features)
    intercept_ : float or ndarray of shape (n_targets,)
        0.0 without an intercept.
    best_score_ : float or ndarray of shape (n_targets,)
        Score of ``alpha_``, higher is better: the scorer's, or without one minus the
        mean of ``sample_weight * (y - y_loo)^2`` (``RidgeCV``'s ``best_score_``). With a
        2-d ``y``: per target with ``alpha_per_target=True``, else averaged over targets.
    best_stderr_ : float or ndarray of shape (n_targets,)
        Standard error of the mean leave-one-out loss ``1/2 (y - y_loo)^2`` at ``alpha_``
        (per target with a 2-d ``y``).
    cv_results_ : ndarray of shape (n_samples, n_alphas) or (n_samples, n_targets, n_alphas)
        Only with ``store_cv_results=True``, as ``RidgeCV``'s: per sample (and target) and
        alpha (in the order of ``alphas``), ``sample_weight * (y - y_loo)^2`` without a
        scorer, the leave-one-out prediction ``y_loo`` with one.
    loo_predictions_ : ndarray of shape (n_samples,)
        Only with ``store_cv_results=True`` and a 1-d ``y``: leave-one-out predictions at
        ``alpha_``.
    search_results_ : dict of 1-d ndarray
        One row per evaluation (grid alpha, or gradient iterate): ``"alpha"`` (per-feature
        alphas: ``"alpha_0"``, ``"alpha_1"``, ...), ``"loss"``, ``"loss_stderr"`` (mean
        leave-one-out loss and its standard error) and ``"score"``; with a 2-d ``y`` one
        row per alpha and target (column ``"target"``). ``pandas.DataFrame(search_results_)``
        works.
    n_iter_ : int
        Iterations of the final fit (scikit-learn's meaning; 1-d ``y``).
    n_fits_ : int
        Warm-started fits during the search (1-d ``y``).
    passes_per_candidate_ : float
        Mean passes over X per grid candidate (``O(n p^2)`` each: the Hessian passes of
        the warm-started fit, from the core's counters, plus ALO's leverage pass); NaN
        where the route does not count them (squared-loss ridge path, gradient search).
    tune_result_ : TuneResult
        1-d ``y`` only.

    Examples
    --------
    >>> import numpy as np, aloocv
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((100, 5)); Y = X @ rng.standard_normal((5, 3))
    >>> m = aloocv.ALORidgeCV(alphas=[0.1, 1.0, 10.0], alpha_per_target=True).fit(X, Y)
    >>> m.alpha_.shape, m.coef_.shape
    ((3,), (3, 5))
    """

    def __init__(
        self,
        alphas: ArrayLike = (0.1, 1.0, 10.0),
        *,
        fit_intercept: bool = True,
        scoring: Any = None,
        store_cv_results: bool = False,
        alpha_per_feature: bool = False,
        alpha_per_target: bool = False,
        search: str = "grid",
        rule: str = "min",
        tol: float = 1e-8,
        max_iter: int = 100,
        n_jobs: int | None = None,
    ):
        self.alphas = alphas
        self.fit_intercept = fit_intercept
        self.scoring = scoring
        self.store_cv_results = store_cv_results
        self.alpha_per_feature = alpha_per_feature
        self.alpha_per_target = alpha_per_target
        self.search = search
        self.rule = rule
        self.tol = tol
        self.max_iter = max_iter
        self.n_jobs = n_jobs

    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> ALORidgeCV:
        """Fit, choosing alpha by leave-one-out.

        ``y`` may be 2-d ``(n_samples, n_targets)`` (see ``alpha_per_target``); ``X`` may
        be a dask array (with a 1-d ``y``: :mod:`aloocv._dask`)."""
        X, y, sample_weight, several = self._targets_inputs(X, y, sample_weight)
        if several:
            return self._fit_targets(X, y, sample_weight)
        alphas = _positive_grid("alphas", self.alphas)
        if self.alpha_per_feature and self.scoring is not None:
            raise ValueError(
                "alpha_per_feature=True tunes by gradient on the leave-one-out loss; it "
                "cannot select by scoring= (leave scoring=None)"
            )
        search = self._search(
            X,
            y,
            "squared",
            [L2(float(a)) for a in alphas],
            sample_weight,
            score_weight=sample_weight,
        )
        res = search.res
        if self.store_cv_results:
            if search.scorer is None:
                sw = 1.0 if sample_weight is None else _local(sample_weight)[:, None]
                self.cv_results_ = sw * 2.0 * _local(res.path_losses[:, search.rows])
            else:
                self.cv_results_ = _local(res.path_predictions[:, search.rows]).copy()
        if self.alpha_per_feature:
            start = L2(np.full(X.shape[1], float(res.penalty.lam)))
            g = tune(
                X,
                y,
                loss="squared",
                penalty=start,
                method=second_order_method(X.shape[1]),
                fit_intercept=self.fit_intercept,
                sample_weight=sample_weight,
                fit_tol=self.tol,
                fit_max_iter=self.max_iter,
                n_jobs=self.n_jobs,
            )
            if g.acv <= res.acv:
                wmean = 1.0 if sample_weight is None else float(np.mean(sample_weight))
                search = _Search(
                    g,
                    search.rows,
                    search.loss,
                    search.score,
                    self._loss_score(g.history["acv"], wmean),
                    float(self._loss_score(g.acv, wmean)),
                    None,
                    search.stderr,
                )
                search.n_grid = 0
                res = g
        self._store(search, {"alpha": alphas})
        lam = res.penalty.lam
        self.alpha_ = float(lam) if np.ndim(lam) == 0 else np.asarray(lam).copy()
        self.coef_ = res.fit.coef_.copy()
        self.intercept_ = float(res.fit.intercept_)
        self.search_results_ = _search_results(
            res, ["alpha"], lambda row: list(row), search.row_score, search.n_grid
        )
        return self

    def _fit_targets(self, X, Y, sample_weight) -> ALORidgeCV:
        """Several targets: one decomposition, the grid scored for every target at once."""
        check_choice("search", self.search, ("grid", "gradient"))
        check_choice("rule", self.rule, ("min", "1se"))
        check_bool(self.alpha_per_feature, "alpha_per_feature")
        check_bool(self.store_cv_results, "store_cv_results")
        if self.alpha_per_feature:
            raise ValueError("alpha_per_feature=True needs a 1-d y (one target)")
        if self.search != "grid":
            raise ValueError(
                "search='gradient' needs a 1-d y; use search='grid' for several targets"
            )
        scorer = get_scorer(self, self.scoring)
        per_target = bool(self.alpha_per_target)
        if scorer is not None and self.rule != "min":
            raise ValueError(
                "rule='1se' uses the standard error of the leave-one-out loss; with scoring= "
                "use rule='min'"
            )
        if self.rule == "1se" and not per_target:
            raise ValueError(
                "rule='1se' with several targets needs alpha_per_target=True (the "
                "standard error of a mean over targets is not defined here)"
            )
        alphas = _positive_grid("alphas", self.alphas)
        pb = Problem.build(
            X,
            Y,
            loss="squared",
            penalty=L2(1.0),
            fit_intercept=self.fit_intercept,
            sample_weight=sample_weight,
            n_jobs=self.n_jobs,
        )
        X, Y, w = pb.X, pb.y, pb.sample_weight
        mr = decompose(pb)[0]
        n, T = Y.shape
        nt = n_threads(self.n_jobs)
        with _blas.single_threaded_blas():
            sc = mr.scores(alphas, nt)
        s2, s4 = sc.s2, sc.s4
        sw = float(n if w is None else w.sum())
        mean = s2 / (2.0 * sw)  # weighted mean of 1/2 e^2, (n_alphas, T)
        var = (s4 / 4.0 - sw * mean**2) / max(sw - 1.0, 1e-300)
        stderr = np.sqrt(np.maximum(var, 0.0) / sw)
        cols = np.arange(T)
        score = -s2 / n  # RidgeCV: -mean over samples of w_i e_i^2, (n_alphas, T)
        preds = None
        if scorer is not None or self.store_cv_results:
            # leave-one-out predictions per alpha, (n, T, n_alphas): what a scorer (and
            # RidgeCV's cv_results_ with one) sees
            preds = np.empty((n, T, alphas.size))
            with _blas.single_threaded_blas():
                for k, a in enumerate(alphas):
                    preds[:, :, k] = mr.solve(
                        np.full(T, float(a)), predictions=True, n_threads=nt
                    ).predictions
        if scorer is not None:
            # as RidgeCV: each target scored on its own with alpha_per_target, else the
            # scorer sees all targets at once (one score per alpha, shared by the targets)
            for k in range(alphas.size):
                if per_target:
                    for t in range(T):
                        rep = _scoring.LOORegressor(n, preds[:, t, k])
                        score[k, t] = _scoring.score(scorer, rep, X, Y[:, t], w)
                else:
                    rep = _scoring.LOORegressor(n, preds[:, :, k])
                    score[k, :] = _scoring.score(scorer, rep, X, Y, w)
            best = np.argmax(score, axis=0) if per_target else np.full(T, np.argmax(score[:, 0]))
        elif per_target:
            best = np.argmin(s2, axis=0)  # the first minimum, as RidgeCV keeps the first best
            if self.rule == "1se":
                limit = mean[best, cols] + stderr[best, cols]
                ok = mean <= limit
                big = np.where(ok, alphas[:, None], -np.inf)
                best = np.argmax(big, axis=0)
        else:
            best = np.full(T, int(np.argmin(s2.sum(axis=1))))
        lam = alphas[best]
        with _blas.single_threaded_blas():
            sol = mr.solve(np.ascontiguousarray(lam), predictions=False, n_threads=nt)
        self.alpha_ = lam.copy() if per_target else float(lam[0])
        self.coef_ = np.ascontiguousarray(sol.coef.T)
        # as RidgeCV: per target, or 0.0 without an intercept
        self.intercept_ = sol.intercept if self.fit_intercept else 0.0
        chosen = score[best, cols]
        self.best_score_ = chosen if per_target else float(np.mean(chosen))
        self.best_stderr_ = stderr[best, cols]
        self.search_results_ = {
            "alpha": np.repeat(alphas, T),
            "target": np.tile(np.arange(T, dtype=np.float64), alphas.size),
            "loss": mean.ravel(),
            "loss_stderr": stderr.ravel(),
            "score": score.ravel(),
            "gradient": np.zeros(alphas.size * T),
        }
        for name in ("cv_results_", "loo_predictions_", "tune_result_", "n_iter_", "n_fits_"):
            self.__dict__.pop(name, None)  # attributes of an earlier fit
        self.__dict__.pop("_curve", None)
        if self.store_cv_results:  # RidgeCV's (n_samples, n_targets, n_alphas) array
            if scorer is not None:
                self.cv_results_ = preds
            else:
                wcol = 1.0 if w is None else w[:, None, None]
                self.cv_results_ = wcol * (Y[:, :, None] - preds) ** 2
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


def _l1_l2(pen: Penalty) -> tuple[float, float]:
    """(l1, l2) of a scalar elastic-net penalty (``L1`` and ``L2`` included)."""
    if isinstance(pen, L2):
        return 0.0, float(np.sum(pen.lam))
    return float(np.sum(pen.l1)), float(np.sum(pen.l2))


def _check_one_structure(grid: list[Penalty], name: str) -> None:
    """A grid mixes penalties of one structure: l1_ratio = 1 (pure lasso, one parameter)
    or 0 (pure ridge) cannot share a search with ratios strictly in between (two)."""
    kinds = {type(g) for g in grid}
    if len(kinds) > 1:
        raise ValueError(
            f"{name} mixes 1.0 (pure lasso) or 0.0 (pure ridge) with other values: fit them "
            "separately (a search tunes one penalty structure)"
        )


def _enet_from_sklearn(alpha: float, l1_ratio: float, n: float) -> Penalty:
    """scikit-learn's ElasticNet(alpha, l1_ratio) on n samples as a summed objective."""
    l1, l2 = n * alpha * l1_ratio, n * alpha * (1.0 - l1_ratio)
    if l1 == 0:
        return L2(l2)
    return L1(l1) if l2 == 0 else ElasticNet(l1, l2)


def _check_ratios(values: Any, name: str, low_open: bool) -> np.ndarray:
    raw = np.asarray(values)
    if raw.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be a real number or a sequence of them, got {values!r}")
    ratios = np.atleast_1d(raw.astype(float))
    bad_low = np.any(ratios <= 0) if low_open else np.any(ratios < 0)
    if (
        ratios.ndim != 1
        or ratios.size == 0
        or np.any(~np.isfinite(ratios))
        or bad_low
        or np.any(ratios > 1)
    ):
        interval = "(0, 1]" if low_open else "[0, 1]"
        raise ValueError(f"{name} must be in {interval}, got {values!r}")
    return ratios


class ALOElasticNetCV(_SquaredScore, _ALORegressor):
    """Elastic net with ``alpha`` (and ``l1_ratio``) chosen by ALOOCV.

    Mirrors scikit-learn's ``ElasticNetCV``: the objective
    ``1/(2 n) ||y - X w||^2 + alpha l1_ratio ||w||_1 + alpha (1 - l1_ratio)/2 ||w||^2``
    is ``aloocv.ElasticNet(n alpha l1_ratio, n alpha (1 - l1_ratio))`` here (with
    ``n`` the sum of the sample weights). The leave-one-out formulas live on the
    active set (the paper, end of its Section 3).

    Parameters
    ----------
    l1_ratio : float or sequence of float in (0, 1]
    eps : float
        ``alpha_min / alpha_max`` of the default grid.
    alphas : int or array_like
        An int: the size of the default grid per l1_ratio (log-spaced down from the
        smallest alpha giving an all-zero solution), as ``ElasticNetCV``'s ``alphas``;
        an array: the candidate alphas (tried in decreasing order).
    fit_intercept : bool
    scoring : str, callable or None
        A scikit-learn scorer evaluated on the leave-one-out predictions of each
        candidate (see :class:`ALORidgeCV`); None: the lowest leave-one-out squared error.
    store_loo : bool
        Keep the per-sample arrays (``loo_predictions_``, ``tune_result_.loo``).
    search : {"grid", "gradient"}
    rule : {"min", "1se"}
        As in :class:`ALORidgeCV` (not ``ElasticNetCV``'s ``selection``, the coordinate
        order of its solver, which has no counterpart here).
    tol, max_iter, n_jobs
        As in :class:`ALORidgeCV`.
    verbose : int
        A progress bar per search (tqdm, when installed) when positive.
    alpha_per_target : bool
        With a 2-d ``y`` (several targets): independent elastic nets, one per target,
        each with its own ``alpha`` and ``l1_ratio`` chosen by its own ALOOCV (and its own
        default grid); otherwise one shared ``(alpha, l1_ratio)`` on a common grid (the
        default one from the largest ``alpha_max`` over targets), the one minimizing the
        mean over targets of the ALOOCV estimates (``search="grid"``, ``rule="min"``,
        ``scoring=None`` only). This is *not* the multi-task (group) penalty of
        scikit-learn's ``MultiTaskElasticNetCV``: every target has its own sparsity
        pattern. Ignored for a 1-d ``y``.

    Attributes
    ----------
    alpha_, l1_ratio_ : float or ndarray of shape (n_targets,)
        Per target with a 2-d ``y`` and ``alpha_per_target=True``.
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features)
    intercept_ : float or ndarray of shape (n_targets,)
    alphas_ : ndarray of shape (n_alphas,) or (n_l1_ratio, n_alphas)
        The candidate alphas per l1_ratio, decreasing.
    mse_path_ : ndarray of shape (n_alphas, 1) or (n_l1_ratio, n_alphas, 1)
        Leave-one-out mean squared error (weighted by ``sample_weight``) per candidate;
        the last axis is ``ElasticNetCV``'s folds, one here (the leave-one-out estimate),
        so ``mse_path_.mean(axis=-1)`` means what it means there.
    best_score_ : float or ndarray of shape (n_targets,)
        Score of the choice, higher is better: the scorer's, or minus the mean of
        ``sample_weight * (y - y_loo)^2`` (per target with a 2-d ``y``).
    best_stderr_ : float or ndarray of shape (n_targets,)
    search_results_ : dict of 1-d ndarray
        ``"alpha"``, ``"l1_ratio"``, ``"loss"``, ``"loss_stderr"``, ``"score"`` per
        evaluation (2-d ``y``: per candidate and target, column ``"target"``).
    n_iter_ : int
        Iterations of the final fit (scikit-learn's meaning).
    n_fits_ : int
        Warm-started fits during the search.
    passes_per_candidate_ : float
        Mean passes over X per grid candidate (``O(n p^2)`` each: the Hessian passes of
        the warm-started fit, from the core's counters, plus ALO's leverage pass); NaN
        where the route does not count them (squared-loss ridge path, gradient search).
    loo_predictions_ : ndarray of shape (n_samples,) or (n_samples, n_targets)
        Only with ``store_loo=True`` (not for a shared alpha over several targets).
    tune_result_ : TuneResult
        1-d ``y`` only.
    """

    def __init__(
        self,
        *,
        l1_ratio: float | ArrayLike = 0.5,
        eps: float = 1e-3,
        alphas: int | ArrayLike = 100,
        fit_intercept: bool = True,
        scoring: Any = None,
        store_loo: bool = False,
        search: str = "grid",
        rule: str = "min",
        tol: float = 1e-8,
        max_iter: int = 200,
        n_jobs: int | None = None,
        verbose: int = 0,
        alpha_per_target: bool = False,
    ):
        self.l1_ratio = l1_ratio
        self.eps = eps
        self.alphas = alphas
        self.fit_intercept = fit_intercept
        self.scoring = scoring
        self.store_loo = store_loo
        self.search = search
        self.rule = rule
        self.tol = tol
        self.max_iter = max_iter
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.alpha_per_target = alpha_per_target

    def fit(
        self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> ALOElasticNetCV:
        """Fit, choosing alpha (and l1_ratio) by ALOOCV.

        ``y`` may be 2-d ``(n_samples, n_targets)`` (see ``alpha_per_target``); ``X`` may
        be a dask array (with a 1-d ``y``: :mod:`aloocv._dask`)."""
        X, y, sample_weight, several = self._targets_inputs(X, y, sample_weight)
        if several:
            return self._fit_targets(X, y, sample_weight)
        n, ratios, alphas = self._grid(X, y, sample_weight)
        grid = [
            _enet_from_sklearn(float(a), float(r), n) for r, row in zip(ratios, alphas) for a in row
        ]
        _check_one_structure(grid, "l1_ratio")
        search = self._search(X, y, "squared", grid, sample_weight, score_weight=sample_weight)
        res = search.res
        n_a = alphas.shape[1]
        self._store(
            search,
            {"alpha": alphas.ravel(), "l1_ratio": np.repeat(ratios, n_a)},
        )
        l1, l2 = _l1_l2(res.penalty)
        self.alpha_ = float((l1 + l2) / n)
        self.l1_ratio_ = float(l1 / (l1 + l2)) if (l1 + l2) > 0 else float(ratios[0])
        self.coef_ = res.fit.coef_.copy()
        self.intercept_ = float(res.fit.intercept_)
        mse = (2.0 * search.loss).reshape(ratios.size, n_a, 1)
        single = np.ndim(self.l1_ratio) == 0 or ratios.size == 1
        self.alphas_ = alphas[0].copy() if single else alphas
        self.mse_path_ = mse[0] if single else mse

        def convert(row):
            l1, l2 = (
                (row[0], 0.0)
                if row.size == 1 and isinstance(grid[0], L1)
                else ((0.0, row[0]) if row.size == 1 else (row[0], row[1]))
            )
            return [(l1 + l2) / n, l1 / (l1 + l2)]

        self.search_results_ = _search_results(
            res, ["alpha", "l1_ratio"], convert, search.row_score, search.n_grid
        )
        return self

    def _grid(self, X, y, sample_weight) -> tuple[float, np.ndarray, np.ndarray]:
        """(sum of weights, l1_ratios, alphas of shape (n_l1_ratio, n_alphas)); y 1-d or
        2-d (the largest alpha_max over its columns)."""
        if is_dask_collection(X):
            n, xty = _dask_enet_top(X, y, sample_weight, self.fit_intercept)
        else:
            sw = np.ones(X.shape[0]) if sample_weight is None else sample_weight
            n = float(sw.sum())
        if not n > 0:
            raise ValueError("sample_weight sums to zero")
        ratios = _check_ratios(self.l1_ratio, "l1_ratio", low_open=True)
        if not (isinstance(self.alphas, Integral) and not isinstance(self.alphas, bool)):
            a = np.sort(_positive_grid("alphas", self.alphas))[::-1]
            return n, ratios, np.tile(a, (ratios.size, 1))
        if self.alphas < 1:
            raise ValueError(f"alphas must be a positive integer or a grid, got {self.alphas!r}")
        if not isinstance(self.eps, Real) or not 0 < self.eps < 1:
            raise ValueError(f"eps must be in (0, 1), got {self.eps!r}")
        # the smallest alpha with an all-zero solution: max_j |x_j^T W (y - ybar)| / n
        # (centering of x_j cancels against the weighted-centered y), per l1_ratio
        if is_dask_collection(X):
            top = float(np.max(np.abs(xty))) / n
        else:
            Y = y.reshape(y.shape[0], -1)
            yc = Y - (np.average(Y, axis=0, weights=sw) if self.fit_intercept else 0.0)
            top = float(np.max(np.abs(design_tdot(X, sw[:, None] * yc)))) / n
        steps = np.logspace(0, np.log10(self.eps), int(self.alphas))
        return n, ratios, np.array([(top / r if top > 0 else 1.0) * steps for r in ratios])

    def _fit_targets(self, X, Y, sample_weight) -> ALOElasticNetCV:
        """Several targets: independent elastic nets (not the multi-task penalty)."""
        for t in range(Y.shape[1]):
            _checked_input(self, X, Y[:, t], sample_weight)
        T = Y.shape[1]
        for name in ("tune_result_", "n_iter_", "n_fits_", "loo_predictions_", "_curve"):
            self.__dict__.pop(name, None)  # attributes of an earlier fit
        if self.alpha_per_target:
            params = {**self.get_params(), "alpha_per_target": False}
            fits = [type(self)(**params).fit(X, Y[:, t], sample_weight) for t in range(T)]
            self.alpha_ = np.array([f.alpha_ for f in fits])
            self.l1_ratio_ = np.array([f.l1_ratio_ for f in fits])
            self.coef_ = np.stack([f.coef_ for f in fits])
            self.intercept_ = np.array([f.intercept_ for f in fits])
            self.best_score_ = np.array([f.best_score_ for f in fits])
            self.best_stderr_ = np.array([f.best_stderr_ for f in fits])
            if self.store_loo:
                self.loo_predictions_ = np.stack([f.loo_predictions_ for f in fits], axis=1)
            self.search_results_ = {
                key: np.concatenate(
                    [
                        f.search_results_[key]
                        if key != "target"
                        else np.full(f.search_results_["loss"].size, float(t))
                        for t, f in enumerate(fits)
                    ]
                )
                for key in ["target", *fits[0].search_results_]
            }
            return self
        check_choice("rule", self.rule, ("min", "1se"))
        if self.search != "grid" or self.rule != "min" or self.scoring is not None:
            raise ValueError(
                "a shared alpha for several targets (alpha_per_target=False) is chosen on the "
                "grid by the minimum of the mean leave-one-out loss: use search='grid', "
                "rule='min', scoring=None, or alpha_per_target=True"
            )
        n, ratios, alphas = self._grid(X, Y, sample_weight)
        grid = [
            _enet_from_sklearn(float(a), float(r), n) for r, row in zip(ratios, alphas) for a in row
        ]
        _check_one_structure(grid, "l1_ratio")
        acv = np.empty((len(grid), T))
        err = np.empty((len(grid), T))
        for t in range(T):
            search = self._search(X, Y[:, t], "squared", grid, sample_weight)
            acv[:, t] = search.loss
            err[:, t] = search.stderr
        best = int(np.argmin(acv.mean(axis=1)))
        fits = [
            _fit(
                X,
                Y[:, t],
                loss="squared",
                penalty=grid[best],
                fit_intercept=self.fit_intercept,
                sample_weight=sample_weight,
                tol=self.tol,
                max_iter=self.max_iter,
                n_jobs=self.n_jobs,
            )
            for t in range(T)
        ]
        l1, l2 = _l1_l2(grid[best])
        self.alpha_ = float((l1 + l2) / n)
        self.l1_ratio_ = float(l1 / (l1 + l2)) if (l1 + l2) > 0 else float(ratios[0])
        self.coef_ = np.stack([f.coef_ for f in fits])
        self.intercept_ = np.array([float(f.intercept_) for f in fits])
        wmean = 1.0 if sample_weight is None else float(np.mean(sample_weight))
        self.best_score_ = self._loss_score(acv[best], wmean)
        self.best_stderr_ = err[best].copy()
        self.search_results_ = {
            "alpha": np.repeat(alphas.ravel(), T),
            "l1_ratio": np.repeat(np.repeat(ratios, alphas.shape[1]), T),
            "target": np.tile(np.arange(T, dtype=np.float64), len(grid)),
            "loss": acv.ravel(),
            "loss_stderr": err.ravel(),
            "score": self._loss_score(acv, wmean).ravel(),
            "gradient": np.zeros(acv.size),
        }
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


def _sigmoid(eta: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * eta))


class ALOLogisticRegressionCV(LinearClassifierMixin, ClassifierMixin, _ALOBase):
    """Logistic regression with ``C`` (and ``l1_ratio``) chosen by ALOOCV.

    Binary targets fit one model. With more classes the default
    (``multi_class="auto"`` or ``"multinomial"``) is one multinomial (softmax) model with
    one C chosen by its multinomial ALOOCV, as scikit-learn's default; with
    ``multi_class="ovr"`` one binary model per class (one-vs-rest), each with its own C
    chosen by its own ALOOCV, and probabilities normalized across classes as
    scikit-learn's one-vs-rest models do.

    Mirrors scikit-learn's ``LogisticRegressionCV``:
    ``C sum_i s_i logloss_i + (1 - l1_ratio)/2 ||w||^2 + l1_ratio ||w||_1`` is
    ``aloocv.ElasticNet(l1_ratio / C, (1 - l1_ratio) / C)`` here (``L2(1 / C)`` for
    ``l1_ratio=0``, ``L1(1 / C)`` for 1); each candidate costs one warm-started fit and
    one ALO pass instead of ``cv`` refits.

    Parameters
    ----------
    Cs : int or array_like
        Candidate inverse regularization strengths; an int gives
        ``np.logspace(-4, 4, Cs)`` as in scikit-learn.
    l1_ratios : sequence of float in [0, 1], optional
        Elastic-net mixing parameters, all tried (scikit-learn 1.8's way to choose the
        penalty): None or all 0 is the L2 penalty, all 1 the L1 penalty (lasso), values
        in (0, 1) elastic net. 0 or 1 cannot be mixed with values in between (one
        search tunes one penalty structure).
    fit_intercept : bool
    penalty : {"l2", "l1", "elasticnet"}, optional
        Deprecated in scikit-learn 1.8 in favour of ``l1_ratios``; when given it must
        agree with ``l1_ratios`` (``"elasticnet"`` needs them).
    scoring : str, callable or None
        A scikit-learn scorer name (``"roc_auc"``, ``"accuracy"``, ``"neg_log_loss"``,
        ...) or a callable ``scorer(estimator, X, y)``, evaluated on the leave-one-out
        class probabilities / decision values of each candidate (with ``sample_weight``
        when fit got one); the candidate of the highest score is chosen (``search="grid"``,
        ``rule="min"``). None (default): the lowest leave-one-out log-loss, and
        ``best_score_`` is the negated log-loss -- scikit-learn's ``"neg_log_loss"``, the
        default it announces for 1.11 (1.9's default is accuracy: pass
        ``scoring="accuracy"`` for it). One-vs-rest scores each binary problem.
    class_weight : dict or "balanced", optional
        Weights per class, multiplying ``sample_weight`` as in scikit-learn
        (``"balanced"``: ``n_samples / (n_classes * bincount(y))`` with the sample weights,
        ``sklearn.utils.class_weight.compute_class_weight``); the leave-one-out loss is
        weighted alike. Scorers get the plain ``sample_weight``.
    multi_class : {"auto", "multinomial", "ovr"}
        More than two classes: ``"auto"`` and ``"multinomial"`` fit the multinomial
        model (L2 only); ``"ovr"`` fits one-vs-rest binary models (any ``l1_ratios``).
    store_loo : bool
        Keep the per-sample arrays (``loo_predictions_``, ``tune_result_.loo``).
    search, rule, tol, max_iter, n_jobs
        As in :class:`ALORidgeCV`.
    verbose : int
        A progress bar per search (tqdm, when installed) when positive.
    use_legacy_attributes : bool
        True (scikit-learn 1.9's default): the attributes below. False (scikit-learn
        1.10's default): ``C_`` and ``l1_ratio_`` floats, ``coefs_paths_`` an array of
        shape (1, n_l1_ratios, n_cs, n_classes or 1, n_dof), ``scores_`` and ``n_iter_``
        of shape (1, n_l1_ratios, n_cs); not with one-vs-rest (a C per class).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    multi_class_ : str
        ``"binary"``, ``"multinomial"`` or ``"ovr"``: the model that was fitted.
    Cs_ : ndarray of shape (n_cs,)
    l1_ratios_ : ndarray of shape (n_l1_ratios,) or ``[None]`` (not elastic net), as
        scikit-learn's.
    C_, l1_ratio_ : ndarray of shape (1,) (binary) or (n_classes,) (the same for every
        class in the multinomial model), scikit-learn's legacy attributes.
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    scores_ : dict
        Per class (``classes_[1]`` only for binary), the score of every candidate,
        shape (1, n_cs), or (1, n_cs, n_l1_ratios) for elastic net: scikit-learn's layout
        with one "fold" (the leave-one-out estimate). Higher is better.
    coefs_paths_ : dict
        Per class, coefficients (intercept last) of every candidate, shape
        (1, n_cs, n_dof) or (1, n_cs, n_l1_ratios, n_dof).
    best_score_ : float
        Score at the choice, higher is better (one-vs-rest: mean over classes): the
        scorer's, or minus the mean leave-one-out log-loss, weighted by ``sample_weight``
        and, with ``class_weight``, by the class weights too (the loss that is fitted;
        ``scoring="neg_log_loss"`` gives the log-loss without the class weights).
    best_stderr_ : float
        Standard error of the leave-one-out log-loss at the choice.
    search_results_ : dict of 1-d ndarray
        One row per evaluation (and class, for one-vs-rest): ``"C"``, ``"l1_ratio"``,
        ``"loss"`` (leave-one-out log-loss), ``"loss_stderr"``, ``"score"`` (and
        ``"class"``, the class index, for one-vs-rest); ``pandas.DataFrame`` works.
    n_iter_ : ndarray of shape (n_models, 1, n_cs) or (n_models, 1, n_cs, n_l1_ratios)
        Newton iterations of the warm-started fit of every candidate (``n_models``: 1, or
        n_classes for one-vs-rest), scikit-learn's legacy layout with one fold.
    n_fits_ : int
        Warm-started fits during the search.
    passes_per_candidate_ : float
        Mean passes over X per grid candidate (``O(n p^2)`` each: the Hessian passes of
        the warm-started fit, from the core's counters, plus ALO's leverage pass); NaN
        where the route does not count them (squared-loss ridge path, gradient search).
    loo_predictions_ : ndarray of shape (n_samples,) or (n_samples, n_classes)
        Only with ``store_loo=True``: leave-one-out probabilities of ``classes_[1]``
        (binary) or of every class.
    tune_result_ : TuneResult or list of TuneResult (one per class)
    """

    def __init__(
        self,
        Cs: int | ArrayLike = 10,
        *,
        l1_ratios: ArrayLike | None = None,
        fit_intercept: bool = True,
        penalty: str | None = None,
        scoring: Any = None,
        class_weight: dict | str | None = None,
        multi_class: str = "auto",
        store_loo: bool = False,
        search: str = "grid",
        rule: str = "min",
        tol: float = 1e-8,
        max_iter: int = 100,
        n_jobs: int | None = None,
        verbose: int = 0,
        use_legacy_attributes: bool = True,
    ):
        self.Cs = Cs
        self.use_legacy_attributes = use_legacy_attributes
        self.l1_ratios = l1_ratios
        self.fit_intercept = fit_intercept
        self.penalty = penalty
        self.scoring = scoring
        self.class_weight = class_weight
        self.multi_class = multi_class
        self.store_loo = store_loo
        self.search = search
        self.rule = rule
        self.tol = tol
        self.max_iter = max_iter
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _ratios(self) -> tuple[np.ndarray, str]:
        """The l1_ratios to try and the penalty they mean."""
        if self.l1_ratios is None:
            ratios = None
        else:
            ratios = _check_ratios(self.l1_ratios, "l1_ratios", low_open=False)
        if self.penalty is not None:
            check_choice("penalty", self.penalty, ("l2", "l1", "elasticnet"))
        if ratios is None:
            if self.penalty == "elasticnet":
                raise ValueError("penalty='elasticnet' needs l1_ratios")
            ratios = np.array([1.0 if self.penalty == "l1" else 0.0])
        if np.all(ratios == 0):
            kind = "l2"
        elif np.all(ratios == 1):
            kind = "l1"
        else:
            kind = "elasticnet"
        if self.penalty is not None and self.l1_ratios is not None and self.penalty != kind:
            if not (self.penalty == "elasticnet"):
                raise ValueError(
                    f"penalty={self.penalty!r} contradicts l1_ratios={self.l1_ratios!r}; "
                    "leave penalty=None and choose by l1_ratios"
                )
            kind = "elasticnet"
        return ratios, kind

    def fit(
        self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> ALOLogisticRegressionCV:
        """Fit, choosing C (and l1_ratio) by ALOOCV."""
        dask_input = is_dask_collection(X)
        if dask_input:  # a dask array: chunk by chunk (aloocv._dask)
            X, y, sample_weight, self.classes_ = _dask_labels(X, y, sample_weight)
            self.n_features_in_ = int(X.shape[1])
            check_bool(self.fit_intercept, "fit_intercept")
            check_bool(self.store_loo, "store_loo")
        else:
            _precheck(X)
            X, y = validate_data(
                self, X, y, accept_sparse=["csr", "csc", "coo"], dtype=[np.float64, np.float32]
            )
            check_classification_targets(y)
            if sample_weight is not None:
                sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64)
            _checked_input(self, X, y, sample_weight, labels=True)
            self.classes_ = np.unique(y)
        if self.classes_.size < 2:
            raise ValueError(
                "ALOLogisticRegressionCV needs at least 2 classes; y has only "
                f"{self.classes_.size} class"
            )
        check_class_weight(self.class_weight, self.classes_)
        fit_weight = sample_weight
        if self.class_weight is not None and dask_input:
            fit_weight = _dask_class_weight(self.class_weight, self.classes_, y, sample_weight)
        elif self.class_weight is not None:
            cw = compute_class_weight(
                self.class_weight, classes=self.classes_, y=y, sample_weight=sample_weight
            )
            per_sample = cw[np.searchsorted(self.classes_, y)]
            fit_weight = per_sample if sample_weight is None else sample_weight * per_sample
        if fit_weight is not None and not dask_input:
            weighted = np.unique(y[fit_weight > 0])
            if weighted.size < 2:
                raise ValueError(
                    "ALOLogisticRegressionCV needs samples of at least 2 classes with positive "
                    f"(sample or class) weight; only class {weighted.tolist()} has any"
                )
        if isinstance(self.Cs, Integral) and not isinstance(self.Cs, bool):
            if self.Cs < 1:
                raise ValueError(f"Cs must be a positive integer or a grid, got {self.Cs!r}")
            Cs = np.logspace(-4, 4, int(self.Cs))
        else:
            Cs = _positive_grid("Cs", self.Cs)
        ratios, kind = self._ratios()
        # candidates in scikit-learn's order: l1_ratio outer, C inner; C sum(loss) +
        # penalty is sum(loss) + penalty / C
        grid = [_enet_from_sklearn(1.0 / C, float(r), 1.0) for r in ratios for C in Cs]
        _check_one_structure(grid, "l1_ratios")
        check_choice("multi_class", self.multi_class, ("auto", "multinomial", "ovr"))
        legacy = check_bool(self.use_legacy_attributes, "use_legacy_attributes")
        if not legacy and self.multi_class == "ovr" and self.classes_.size > 2:
            raise ValueError(
                "use_legacy_attributes=False reports one C; multi_class='ovr' chooses one C "
                "per class (keep use_legacy_attributes=True)"
            )
        self.Cs_ = Cs.copy()
        self.l1_ratios_ = ratios.copy() if kind == "elasticnet" else np.array([None])
        self._kind = kind
        values = {"C": np.tile(Cs, ratios.size), "l1_ratio": np.repeat(ratios, Cs.size)}
        K = self.classes_.size
        binary = K == 2
        if not binary and self.multi_class != "ovr":
            if kind != "l2":
                raise ValueError(
                    "the multinomial model supports the L2 penalty only (l1_ratios=None or 0); "
                    f"use multi_class='ovr' for l1_ratios={self.l1_ratios!r}"
                )
            self.multi_class_ = "multinomial"
            if dask_input:  # encoded chunk by chunk
                labels = y.map_blocks(_encode_labels, self.classes_, dtype=np.float64)
            else:
                labels = _encode_labels(y, self.classes_)
            search = self._search(
                X, labels, "multinomial", grid, fit_weight, y_score=y, score_weight=sample_weight
            )
            searches = [search]
        else:
            self.multi_class_ = "binary" if binary else "ovr"
            targets = [self.classes_[1]] if binary else list(self.classes_)
            searches = []
            for c in targets:
                if dask_input:  # the 0/1 encoding chunk by chunk
                    yc = y.map_blocks(_label_indicator(c), dtype=np.float64)
                else:
                    yc = (y == c).astype(np.float64)
                self._target = np.array([0, 1]) if not binary else self.classes_
                y_score = y if binary else yc.astype(np.int64)
                searches.append(
                    self._search(
                        X,
                        yc,
                        "logistic",
                        grid,
                        fit_weight,
                        y_score=y_score,
                        score_weight=sample_weight,
                    )
                )
            del self._target
        results = [s.res for s in searches]
        self._store(searches[0], values)
        cr = [self._c_ratio(r.penalty) for r in results]
        if self.multi_class_ == "multinomial":
            res = results[0]
            self.C_ = np.full(K, cr[0][0])
            self.l1_ratio_ = np.full(K, cr[0][1])
            self.coef_ = res.fit.coef_.copy()
            self.intercept_ = np.asarray(res.fit.intercept_, dtype=np.float64).copy()
            self.search_results_ = _search_results(
                res,
                ["C", "l1_ratio"],
                lambda row: [1.0 / row[0], 0.0],
                searches[0].row_score,
                searches[0].n_grid,
            )
            path = self._coefs_path(res, searches[0].rows)  # (T, K, n_dof)
            keys = list(self.classes_)
            scores = {c: self._shape_scores(searches[0].score, ratios, Cs) for c in keys}
            paths = {c: self._shape_path(path[:, k], ratios, Cs) for k, c in enumerate(keys)}
            if self._keep():
                self.loo_predictions_ = softmax(_local(res.loo.predictions))
        else:
            self.C_ = np.array([c for c, _ in cr])
            self.l1_ratio_ = np.array([r for _, r in cr])
            self.coef_ = np.vstack([r.fit.coef_ for r in results])
            self.intercept_ = np.array([float(r.fit.intercept_) for r in results])
            keys = [self.classes_[1]] if binary else list(self.classes_)
            scores = {c: self._shape_scores(s.score, ratios, Cs) for c, s in zip(keys, searches)}
            paths = {
                c: self._shape_path(self._coefs_path(s.res, s.rows), ratios, Cs)
                for c, s in zip(keys, searches)
            }
            tables = []
            for k, s in enumerate(searches):
                t = _search_results(s.res, ["C", "l1_ratio"], self._convert, s.row_score, s.n_grid)
                if not binary:
                    t["class"] = np.full(t["C"].size, float(k))
                tables.append(t)
            self.search_results_ = {
                key: np.concatenate([t[key] for t in tables]) for key in tables[0]
            }
            if not binary:
                self.tune_result_ = [r if self._keep() else r.without_samples() for r in results]
                self.best_score_ = float(np.mean([s.best_score for s in searches]))
                self.best_stderr_ = float(np.sqrt(np.mean([r.stderr**2 for r in results])))
                self.n_fits_ = int(sum(r.n_fits for r in results))
                self.passes_per_candidate_ = _passes_per_candidate(searches)
                self._curve["loss"] = np.mean([s.loss for s in searches], axis=0)
                self._curve["loss_stderr"] = np.sqrt(
                    np.mean([s.stderr**2 for s in searches], axis=0)
                )
                self._curve["score"] = np.mean([s.score for s in searches], axis=0)
            if self._keep():
                probs = np.column_stack([_sigmoid(_local(r.loo.predictions)) for r in results])
                self.loo_predictions_ = (
                    probs[:, 0] if binary else probs / probs.sum(axis=1, keepdims=True)
                )
        self.scores_ = scores
        self.coefs_paths_ = paths
        # scikit-learn's legacy layout: (n_models, n_folds=1, n_cs[, n_l1_ratios])
        self.n_iter_ = np.stack(
            [self._shape_scores(s.res.path_n_iter[s.rows], ratios, Cs) for s in searches]
        ).astype(np.int64)
        if not legacy:
            self._new_attributes(searches[0], ratios, Cs)
        return self

    def _new_attributes(self, search: _Search, ratios: np.ndarray, Cs: np.ndarray) -> None:
        """scikit-learn 1.10's layout (``use_legacy_attributes=False``): one C and
        l1_ratio as floats, arrays over (fold, l1_ratio, C[, class, dof]) with one fold."""
        self.C_ = float(self.C_[0])
        self.l1_ratio_ = float(self.l1_ratio_[0])
        path = self._coefs_path(search.res, search.rows)  # (T, n_dof) or (T, K, n_dof)
        if path.ndim == 2:
            path = path[:, None, :]
        self.coefs_paths_ = path.reshape(ratios.size, Cs.size, *path.shape[1:])[None]
        shape = (1, ratios.size, Cs.size)
        self.scores_ = np.asarray(search.score, dtype=np.float64).reshape(shape)
        self.n_iter_ = search.res.path_n_iter[search.rows].astype(np.int64).reshape(shape)

    def _replay(self, eta: np.ndarray, n: int, offset=None) -> Any:
        eta = np.asarray(eta, dtype=np.float64)
        if eta.ndim == 2:  # multinomial
            return _scoring.LOOClassifier(n, self.classes_, softmax(eta), eta)
        p1 = _sigmoid(eta)
        return _scoring.LOOClassifier(n, self._target, np.column_stack([1.0 - p1, p1]), eta)

    def _c_ratio(self, pen: Penalty) -> tuple[float, float]:
        l1, l2 = _l1_l2(pen)
        return 1.0 / (l1 + l2), l1 / (l1 + l2)

    def _convert(self, row: np.ndarray) -> list[float]:
        if row.size == 1:
            return [1.0 / row[0], 1.0 if self._kind == "l1" else 0.0]
        return [1.0 / (row[0] + row[1]), row[0] / (row[0] + row[1])]

    def _coefs_path(self, res: TuneResult, rows: np.ndarray) -> np.ndarray:
        """Coefficients of every candidate, intercept last: (T, n_dof) or (T, K, n_dof)."""
        coefs = res.path_coefs[rows]
        icpt = res.path_intercepts[rows]
        out = np.concatenate([coefs, icpt[..., None]], axis=-1) if self.fit_intercept else coefs
        out = np.array(out, dtype=np.float64)
        out[rows < 0] = np.nan  # a bracket point of a gradient search where no fit exists
        return out

    def _shape_scores(self, score: np.ndarray, ratios: np.ndarray, Cs: np.ndarray) -> np.ndarray:
        s = np.asarray(score, dtype=np.float64).reshape(ratios.size, Cs.size)
        return s.T[None] if self._kind == "elasticnet" else s[0][None]

    def _shape_path(self, path: np.ndarray, ratios: np.ndarray, Cs: np.ndarray) -> np.ndarray:
        p = path.reshape(ratios.size, Cs.size, path.shape[-1])
        return np.moveaxis(p, 0, 1)[None] if self._kind == "elasticnet" else p[0][None]

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities (softmax for the multinomial model; one-vs-rest ones
        normalized across classes)."""
        d = self.decision_function(X)
        if getattr(self, "multi_class_", None) == "multinomial":
            return softmax(d)
        if d.ndim == 1:
            p1 = _sigmoid(d)
            return np.column_stack([1.0 - p1, p1])
        p = _sigmoid(d)
        return p / p.sum(axis=1, keepdims=True)

    def predict_log_proba(self, X: ArrayLike) -> np.ndarray:
        """Log of :meth:`predict_proba` (without overflow for two classes)."""
        d = self.decision_function(X)
        if d.ndim == 1:
            return np.column_stack([-np.logaddexp(0.0, d), -np.logaddexp(0.0, -d)])
        if getattr(self, "multi_class_", None) == "multinomial":
            m = d.max(axis=1, keepdims=True)
            return d - m - np.log(np.exp(d - m).sum(axis=1, keepdims=True))
        return np.log(self.predict_proba(X))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class _ALOGLMRegressorCV(_ALORegressor):
    """Shared logic of the log-link GLM regressors (Poisson, gamma, Tweedie).

    scikit-learn's objective ``1/(2 s) sum_i s_i dev_i + alpha/2 ||w||^2`` (``s`` the
    sample weights, ``dev`` the unit deviance) times ``s = sum(s_i)`` is the summed
    objective here with ``aloocv.L2(alpha * s)``: the same minimizer.
    """

    def __init__(
        self,
        alphas: ArrayLike = GLM_DEFAULT_ALPHAS,
        *,
        fit_intercept: bool = True,
        scoring: Any = None,
        store_loo: bool = False,
        search: str = "grid",
        rule: str = "min",
        tol: float = 1e-8,
        max_iter: int = 100,
        n_jobs: int | None = None,
        verbose: int = 0,
    ):
        self.alphas = alphas
        self.fit_intercept = fit_intercept
        self.scoring = scoring
        self.store_loo = store_loo
        self.search = search
        self.rule = rule
        self.tol = tol
        self.max_iter = max_iter
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _loss(self) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def _check_params(self) -> None:
        pass

    def _loss_score(self, acv: Any, weight_mean: float) -> Any:
        """``best_score_`` without a scorer: minus the mean deviance of the leave-one-out
        means (scikit-learn's ``neg_mean_poisson_deviance`` / ``neg_mean_gamma_deviance``
        / Tweedie deviance scorers): the deviance is twice the loss above the saturated
        model's, whose weighted mean is ``_saturated`` (zero for the half-deviance losses,
        the log-likelihood constant for the Poisson one)."""
        return -2.0 * (np.asarray(acv, dtype=np.float64) - self._saturated)

    def fit(
        self,
        X: ArrayLike,
        y: ArrayLike,
        sample_weight: ArrayLike | None = None,
        offset: ArrayLike | None = None,
    ):
        """Fit, choosing ``alpha`` by ALOOCV.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Responses in the loss's domain (counts >= 0, y > 0 for gamma, ...).
        sample_weight : array-like of shape (n_samples,), optional
        offset : array-like of shape (n_samples,), optional
            Known part of the linear predictor (e.g. ``log(exposure)``).

        Returns
        -------
        self
        """
        _precheck(X)
        X, y = validate_data(
            self,
            X,
            y,
            accept_sparse=["csr", "csc", "coo"],
            y_numeric=True,
            dtype=[np.float64, np.float32],
        )
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64)
        _checked_input(self, X, y, sample_weight)
        self._check_params()
        loss = self._loss()
        yd = np.asarray(y, dtype=np.float64)
        loss.check_y(yd)
        # the loss of the saturated model (mean = y; y = 0 at the smallest normal mean)
        sat = get_loss(loss).value(yd, np.log(np.maximum(yd, np.finfo(np.float64).tiny)))
        self._saturated = float(np.average(sat, weights=sample_weight))
        alphas = _positive_grid("alphas", self.alphas)
        s = float(X.shape[0] if sample_weight is None else np.sum(sample_weight))
        grid = [L2(float(a) * s) for a in alphas]
        search = self._search(
            X, y, loss, grid, sample_weight, offset=offset, score_weight=sample_weight
        )
        res = search.res
        self._store(search, {"alpha": alphas})

        def to_alpha(lam: float) -> float:
            # the grid's own alpha when lam came from it (no rounding in lam / s)
            near = np.flatnonzero(np.isclose(alphas * s, lam, rtol=1e-12, atol=0.0))
            return float(alphas[near[0]]) if near.size else float(lam) / s

        self.alpha_ = to_alpha(float(res.penalty.lam))
        self.coef_ = res.fit.coef_.copy()
        self.intercept_ = float(res.fit.intercept_)
        self.search_results_ = _search_results(
            res, ["alpha"], lambda row: [to_alpha(row[0])], search.row_score, search.n_grid
        )
        return self

    def _replay(self, eta: np.ndarray, n: int, offset=None) -> Any:
        # the leave-one-out linear predictors include the offset: the mean response
        return _scoring.LOORegressor(n, get_loss(self._loss()).mean(eta))

    def predict(self, X: ArrayLike, offset: ArrayLike | None = None) -> np.ndarray:
        """Mean response ``exp(X coef_ + intercept_ (+ offset))``."""
        eta = super().predict(X)
        if offset is not None:
            eta = eta + check_vector(offset, eta.shape[0], "offset")
        return get_loss(self._loss()).mean(eta)

    def score(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
        """D^2, the fraction of deviance explained (scikit-learn's GLM score)."""
        from sklearn.metrics import d2_tweedie_score

        return float(
            d2_tweedie_score(y, self.predict(X), sample_weight=sample_weight, power=self._power())
        )

    def _power(self) -> float:  # pragma: no cover - overridden
        raise NotImplementedError

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = True
        return tags


_GLM_DOC = """
    Parameters
    ----------
    alphas : array_like of positive floats
        Candidate ``alpha`` in scikit-learn's ``{sk}`` convention
        ``1/(2 sum(s)) sum_i s_i deviance_i + alpha/2 ||w||^2``; it is
        ``aloocv.L2(alpha * sum(sample_weight))`` in the summed objective here.{extra}
    fit_intercept : bool
    scoring : str, callable or None
        A scikit-learn scorer name (e.g. ``"neg_mean_poisson_deviance"``, ``"r2"``) or a
        callable ``scorer(estimator, X, y)``, evaluated on the leave-one-out mean
        responses of each alpha (with ``sample_weight`` when fit got one); the alpha of
        the highest score is chosen (``search="grid"``, ``rule="min"``). None: the
        lowest leave-one-out loss; ``best_score_`` is then minus that loss.
    store_loo : bool
        Keep the per-sample arrays (``loo_predictions_``, ``tune_result_.loo``).
    search : {{"grid", "gradient"}}
        ``"gradient"``: the grid brackets the minimum, then second-order steps on the
        exact derivative of ALOOCV in log(alpha) refine it.
    rule : {{"min", "1se"}}
        The minimum, or the largest alpha within one standard error of it.
    tol, max_iter
        Tolerance and Newton iterations of each fit.
    n_jobs : int, optional
        OpenMP threads.
    verbose : int
        A progress bar per search (tqdm, when installed) when positive.

    Attributes
    ----------
    alpha_ : float
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    best_score_ : float
        Score at ``alpha_``, higher is better: the scorer's, or minus the mean deviance of
        the approximate leave-one-out means ({dev}; ``search_results_["loss"]`` holds the
        mean leave-one-out {what}).
    best_stderr_ : float
        Standard error of that mean loss.
    search_results_ : dict of 1-d ndarray
        ``"alpha"``, ``"loss"``, ``"loss_stderr"``, ``"score"`` per evaluation (grid
        point or gradient iterate).
    n_iter_ : int
        Iterations of the final fit (scikit-learn's meaning).
    n_fits_ : int
        Warm-started fits during the search.
    passes_per_candidate_ : float
        Mean passes over X per grid candidate (``O(n p^2)`` each: the Hessian passes of
        the warm-started fit, from the core's counters, plus ALO's leverage pass); NaN
        where the route does not count them (squared-loss ridge path, gradient search).
    loo_predictions_ : ndarray of shape (n_samples,)
        Only with ``store_loo=True``: leave-one-out linear predictors (log means).
    tune_result_ : TuneResult
"""


class ALOPoissonRegressorCV(_ALOGLMRegressorCV):
    __doc__ = """Poisson regression (log link) with ``alpha`` chosen by ALOOCV.

    Mirrors scikit-learn's ``PoissonRegressor``; ``fit`` and ``predict`` take an
    optional ``offset`` (e.g. ``log(exposure)``).
""" + _GLM_DOC.format(
        sk="PoissonRegressor",
        extra="",
        what="Poisson negative log-likelihood",
        dev='scikit-learn\'s ``"neg_mean_poisson_deviance"``',
    )

    def _loss(self) -> Any:
        return get_loss("poisson")

    def _power(self) -> float:
        return 1.0


class ALOGammaRegressorCV(_ALOGLMRegressorCV):
    __doc__ = """Gamma regression (log link, y > 0) with ``alpha`` chosen by ALOOCV.

    Mirrors scikit-learn's ``GammaRegressor``; ``fit`` and ``predict`` take an optional
    ``offset``.
""" + _GLM_DOC.format(
        sk="GammaRegressor",
        extra="",
        what="gamma half deviance",
        dev='scikit-learn\'s ``"neg_mean_gamma_deviance"``',
    )

    def _loss(self) -> Any:
        return get_loss("gamma")

    def _power(self) -> float:
        return 2.0


class ALOTweedieRegressorCV(_ALOGLMRegressorCV):
    __doc__ = """Tweedie regression (log link) with ``alpha`` chosen by ALOOCV.

    Mirrors scikit-learn's ``TweedieRegressor`` with ``power >= 1`` and the log link;
    ``fit`` and ``predict`` take an optional ``offset``.
""" + _GLM_DOC.format(
        sk="TweedieRegressor",
        extra="""
    power : float, default 0.0 in scikit-learn, 1.5 here
        Tweedie variance power, >= 1 (1: Poisson, 2: gamma, in between: compound
        Poisson-gamma with exact zeros allowed).
    link : {"log", "auto"}
        Only the log link is implemented (``"auto"`` is the log link for power >= 1).""",
        what="Tweedie half deviance",
        dev="``mean_tweedie_deviance`` with ``power``",
    )

    def __init__(
        self,
        alphas: ArrayLike = GLM_DEFAULT_ALPHAS,
        *,
        power: float = 1.5,
        link: str = "log",
        fit_intercept: bool = True,
        scoring: Any = None,
        store_loo: bool = False,
        search: str = "grid",
        rule: str = "min",
        tol: float = 1e-8,
        max_iter: int = 100,
        n_jobs: int | None = None,
        verbose: int = 0,
    ):
        self.alphas = alphas
        self.power = power
        self.link = link
        self.fit_intercept = fit_intercept
        self.scoring = scoring
        self.store_loo = store_loo
        self.search = search
        self.rule = rule
        self.tol = tol
        self.max_iter = max_iter
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _check_params(self) -> None:
        check_choice("link", self.link, ("log", "auto"))
        Tweedie(power=self.power)

    def _loss(self) -> Any:
        return Tweedie(power=self.power)

    def _power(self) -> float:
        return float(self.power)
