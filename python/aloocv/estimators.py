"""scikit-learn estimators that choose their regularization by ALOOCV.

Each mirrors the scikit-learn CV estimator it replaces (parameter names and fitted
attributes), converts that estimator's regularization convention exactly to the
paper's objective (a sum of losses plus ``lambda^T r(theta)``), and evaluates every
candidate by approximate leave-one-out instead of K refits.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.linear_model._base import LinearClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ._multinomial import softmax
from ._validation import (
    check_bool,
    check_labels,
    check_sample_weight,
    check_vector,
    check_X,
    is_dask_collection,
    is_sparse,
)
from .losses import Tweedie, get_loss
from .penalties import L1, L2, ElasticNet, Penalty
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


def _check_choice(name: str, value: Any, options: tuple[str, ...]) -> None:
    if value not in options:
        raise ValueError(f"{name} must be one of {list(options)}, got {value!r}")


def _precheck(X: Any) -> None:
    """Sparse structure before scikit-learn converts it (scipy's conversions crash on
    out-of-range indices); dense input gets scikit-learn's own messages first."""
    if is_sparse(X):
        check_X(X)


def _dask_fit_inputs(est, X, y, sample_weight):
    """(X, y, sample_weight) of an estimator's fit on dask input, validated as far as
    possible without reading X (its chunks are checked in the first pass)."""
    from . import _dask

    _dask.require_dask()
    X = _dask._as_dask_2d(X)
    est.n_features_in_ = int(X.shape[1])
    y = _dask._as_dask_vector(y, X, "y")
    if sample_weight is not None:
        sample_weight = _dask._as_dask_vector(sample_weight, X, "sample_weight")
    check_bool(est.fit_intercept, "fit_intercept")
    if hasattr(est, "alpha_per_feature"):
        check_bool(est.alpha_per_feature, "alpha_per_feature")
    return X, y, sample_weight


def _dask_classes(y: Any) -> np.ndarray:
    """The sorted distinct labels of a dask vector (one pass over y, not X)."""
    import dask.array as da

    classes = np.asarray(da.unique(y).compute())
    if not np.all(np.isfinite(classes)):
        raise ValueError("y contains NaN or inf")
    return classes


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
    if hasattr(est, "alpha_per_feature"):
        check_bool(est.alpha_per_feature, "alpha_per_feature")


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


def _cv_results(res: TuneResult, names: list[str], convert) -> dict[str, np.ndarray]:
    h = res.history
    out = {name: [] for name in names}
    for row in h["params"]:
        for name, v in zip(names, convert(row)):
            out[name].append(v)
    out = {k: np.asarray(v) for k, v in out.items()}
    out["mean"] = h["acv"].copy()
    out["stderr"] = h["stderr"].copy()
    return out


class _ALOBase(BaseEstimator):
    """Shared fitting logic: grid or gradient search of ALOOCV."""

    def _search(
        self,
        X,
        y,
        loss: Any,
        start: Penalty,
        grid: list[Penalty] | None,
        sample_weight,
        offset=None,
    ) -> TuneResult:
        _check_choice("search", self.search, ("grid", "gradient"))
        _check_choice("selection", self.selection, ("min", "1se"))
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
            X, y, penalty=start, method=method, grid=grid, selection=self.selection, **common
        )
        self._grid_result = res
        return res

    def _store(self, res: TuneResult) -> None:
        self.tune_result_ = res
        self.loo_predictions_ = res.loo.predictions.copy()
        self.best_score_ = res.acv
        self.best_stderr_ = res.stderr
        self.n_iter_ = res.n_fits  # warm-started fits during the search

    def plot_cv(self, ax: Any = None) -> Any:
        """ACV against the regularization (see :meth:`aloocv.TuneResult.plot`)."""
        check_is_fitted(self, "tune_result_")
        return self.tune_result_.plot(ax=ax)


class _ALORegressor(RegressorMixin, _ALOBase):
    """Prediction and tags shared by the linear regressors."""

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
        return np.asarray(X @ self.coef_).ravel() + self.intercept_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class ALORidgeCV(_ALORegressor):
    """Ridge regression with the regularization chosen by exact leave-one-out.

    For squared loss with an L2 penalty ALOOCV *is* exact LOO (the paper's
    Corollary 2), so this is scikit-learn's ``RidgeCV`` (efficient LOO), plus a
    gradient search and one regularization parameter per feature.

    Parameters
    ----------
    alphas : array_like of positive floats
        Candidate ``alpha`` in scikit-learn's ``Ridge`` convention
        ``||y - X w||^2 + alpha ||w||^2`` (the same problem as ``aloocv.L2(alpha)``).
    fit_intercept : bool
    alpha_per_feature : bool
        After the grid, tune one alpha per feature by gradient descent on ALOOCV
        (the paper's "ridge with diagonal regressors"); ``alpha_`` is then a vector.
    search : {"grid", "gradient"}
        ``"gradient"`` refines the best grid alpha by Algorithm 1.
    selection : {"min", "1se"}
        The minimum, or the largest alpha within one standard error of it.
    tol, max_iter
        Tolerance and iterations of each fit.
    n_jobs : int, optional
        OpenMP threads.

    Attributes
    ----------
    alpha_ : float or ndarray of shape (n_features,)
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    best_score_ : float
        Mean leave-one-out loss ``1/2 (y - y_loo)^2`` at ``alpha_``.
    cv_results_ : dict
        ``"alpha"``, ``"mean"``, ``"stderr"`` per candidate (for gradient searches
        also the iterates).
    loo_values_ : ndarray of shape (n_samples, n_alphas)
        Squared leave-one-out errors per sample and grid alpha, as scikit-learn's
        ``RidgeCV(store_cv_results=True).cv_results_``.
    loo_predictions_ : ndarray of shape (n_samples,)
        Leave-one-out predictions of every training point at ``alpha_``.
    tune_result_ : TuneResult
    """

    def __init__(
        self,
        alphas: ArrayLike = (0.1, 1.0, 10.0),
        *,
        fit_intercept: bool = True,
        alpha_per_feature: bool = False,
        search: str = "grid",
        selection: str = "min",
        tol: float = 1e-8,
        max_iter: int = 100,
        n_jobs: int | None = None,
    ):
        self.alphas = alphas
        self.fit_intercept = fit_intercept
        self.alpha_per_feature = alpha_per_feature
        self.search = search
        self.selection = selection
        self.tol = tol
        self.max_iter = max_iter
        self.n_jobs = n_jobs

    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> ALORidgeCV:
        """Fit, choosing alpha by leave-one-out."""
        if is_dask_collection(X):  # a dask array: chunk by chunk (aloocv._dask)
            X, y, sample_weight = _dask_fit_inputs(self, X, y, sample_weight)
        else:
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
        alphas = _positive_grid("alphas", self.alphas)
        res = self._search(
            X, y, "squared", L2(float(alphas[0])), [L2(float(a)) for a in alphas], sample_weight
        )
        # squared LOO errors per sample and alpha, in the order of `alphas`
        grid_res = self._grid_result
        lam_hist = grid_res.history["params"][:, 0]
        order = [int(np.flatnonzero(lam_hist == a)[0]) for a in alphas]
        vals = 2.0 * grid_res.path_losses[:, order]
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
                res = g
        self._store(res)
        self.loo_values_ = vals
        lam = res.penalty.lam
        self.alpha_ = float(lam) if np.ndim(lam) == 0 else np.asarray(lam).copy()
        self.coef_ = res.fit.coef_.copy()
        self.intercept_ = float(res.fit.intercept_)
        self.cv_results_ = _cv_results(
            res, ["alpha"], lambda row: [row[0] if row.size == 1 else row.copy()]
        )
        return self


def _l1_l2(pen: ElasticNet) -> tuple[float, float]:
    """(l1, l2) of a scalar elastic-net penalty (``L1`` included)."""
    return float(np.sum(pen.l1)), float(np.sum(pen.l2))


def _alpha_ratio(row: np.ndarray, n: float, pure_l1: bool) -> list[float]:
    """(alpha, l1_ratio) in scikit-learn's convention from a row of tuned parameters."""
    if row.size == 1:
        return [row[0] / n, 1.0 if pure_l1 else 0.0]
    return [(row[0] + row[1]) / n, row[0] / (row[0] + row[1])]


def _check_one_structure(grid: list[Penalty], name: str) -> None:
    """A grid mixes penalties of one structure: l1_ratio = 1 (pure lasso, one parameter)
    cannot share a search with l1_ratio < 1 (two parameters)."""
    kinds = {type(g) for g in grid}
    if len(kinds) > 1:
        raise ValueError(
            f"{name} mixes 1.0 (pure lasso) with values below 1: fit them separately (a search "
            "tunes one penalty structure)"
        )


def _enet_from_sklearn(alpha: float, l1_ratio: float, n: float) -> Penalty:
    """scikit-learn's ElasticNet(alpha, l1_ratio) on n samples as a summed objective."""
    l1, l2 = n * alpha * l1_ratio, n * alpha * (1.0 - l1_ratio)
    if l1 == 0:
        return L2(l2)
    return L1(l1) if l2 == 0 else ElasticNet(l1, l2)


class ALOElasticNetCV(_ALORegressor):
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
    n_alphas : int
        Size of the default grid (log-spaced down from the smallest alpha giving an
        all-zero solution).
    alphas : array_like, optional
        Explicit grid.
    fit_intercept, search, selection, tol, max_iter, n_jobs
        As in :class:`ALORidgeCV`.

    Attributes
    ----------
    alpha_, l1_ratio_ : float
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    cv_results_ : dict
        ``"alpha"``, ``"l1_ratio"``, ``"mean"``, ``"stderr"`` per candidate.
    loo_predictions_ : ndarray of shape (n_samples,)
    tune_result_ : TuneResult
    """

    def __init__(
        self,
        *,
        l1_ratio: float | ArrayLike = 0.5,
        eps: float = 1e-3,
        n_alphas: int = 30,
        alphas: ArrayLike | None = None,
        fit_intercept: bool = True,
        search: str = "grid",
        selection: str = "min",
        tol: float = 1e-8,
        max_iter: int = 200,
        n_jobs: int | None = None,
    ):
        self.l1_ratio = l1_ratio
        self.eps = eps
        self.n_alphas = n_alphas
        self.alphas = alphas
        self.fit_intercept = fit_intercept
        self.search = search
        self.selection = selection
        self.tol = tol
        self.max_iter = max_iter
        self.n_jobs = n_jobs

    def fit(
        self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> ALOElasticNetCV:
        """Fit, choosing alpha (and l1_ratio) by ALOOCV."""
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
        sw = np.ones(X.shape[0]) if sample_weight is None else sample_weight
        n = float(sw.sum())
        if not n > 0:
            raise ValueError("sample_weight sums to zero")
        ratios = np.atleast_1d(np.asarray(self.l1_ratio, dtype=float))
        if (
            ratios.size == 0
            or np.any(~np.isfinite(ratios))
            or np.any(ratios <= 0)
            or np.any(ratios > 1)
        ):
            raise ValueError(f"l1_ratio must be in (0, 1], got {self.l1_ratio!r}")
        if self.alphas is not None:
            alphas = _positive_grid("alphas", self.alphas)
        else:
            if not isinstance(self.n_alphas, Integral) or self.n_alphas < 1:
                raise ValueError(f"n_alphas must be a positive integer, got {self.n_alphas!r}")
            if not isinstance(self.eps, Real) or not 0 < self.eps < 1:
                raise ValueError(f"eps must be in (0, 1), got {self.eps!r}")
            yc = y - (np.average(y, weights=sw) if self.fit_intercept else 0.0)
            # the smallest alpha with an all-zero solution: max_j |x_j^T W (y - ybar)| / n
            # (centering of x_j cancels against the weighted-centered y)
            Xw = np.asarray(X.T @ (sw * yc)).ravel()
            amax = float(np.max(np.abs(Xw))) / (n * float(ratios.min()))
            amax = amax if amax > 0 else 1.0
            alphas = amax * np.logspace(0, np.log10(self.eps), int(self.n_alphas))
        grid = [_enet_from_sklearn(float(a), float(r), n) for r in ratios for a in alphas]
        _check_one_structure(grid, "l1_ratio")
        pure_l1 = isinstance(grid[0], L1)
        start = grid[0]
        res = self._search(X, y, "squared", start, grid, sample_weight)
        self._store(res)
        l1, l2 = _l1_l2(res.penalty)
        alpha = (l1 + l2) / n
        self.alpha_ = float(alpha)
        self.l1_ratio_ = float(l1 / (l1 + l2)) if (l1 + l2) > 0 else float(ratios[0])
        self.coef_ = res.fit.coef_.copy()
        self.intercept_ = float(res.fit.intercept_)
        self.cv_results_ = _cv_results(
            res,
            ["alpha", "l1_ratio"],
            lambda row: _alpha_ratio(row, n, pure_l1),
        )
        return self


class ALOLogisticRegressionCV(LinearClassifierMixin, ClassifierMixin, _ALOBase):
    """Logistic regression with ``C`` (and ``l1_ratio``) chosen by ALOOCV.

    Binary targets fit one model. With more classes the default
    (``multi_class="auto"`` or ``"multinomial"``) is one multinomial (softmax) model with
    one C chosen by its multinomial ALOOCV, as scikit-learn's default; with
    ``multi_class="ovr"`` one binary model per class (one-vs-rest), each with its own C
    chosen by its own ALOOCV, and probabilities normalized across classes as
    scikit-learn's one-vs-rest models do.

    Mirrors scikit-learn's ``LogisticRegressionCV``:
    ``C sum_i logloss_i + (1 - l1_ratio)/2 ||w||^2 + l1_ratio ||w||_1`` is
    ``aloocv.ElasticNet(l1_ratio / C, (1 - l1_ratio) / C)`` here (``L2(1 / C)`` for
    ``penalty="l2"``); each candidate costs one warm-started fit and one ALO pass
    instead of ``cv`` refits.

    Parameters
    ----------
    Cs : int or array_like
        Candidate inverse regularization strengths; an int gives
        ``np.logspace(-4, 4, Cs)`` as in scikit-learn.
    fit_intercept : bool
    penalty : {"l2", "l1", "elasticnet"}
    l1_ratios : sequence of float, optional
        For ``penalty="elasticnet"``.
    search, selection, tol, max_iter, n_jobs
        As in :class:`ALORidgeCV`.
    multi_class : {"auto", "multinomial", "ovr"}
        More than two classes: ``"auto"`` and ``"multinomial"`` fit the multinomial
        model (``penalty="l2"`` only); ``"ovr"`` fits one-vs-rest binary models.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    multi_class_ : str
        ``"binary"``, ``"multinomial"`` or ``"ovr"``: the model that was fitted.
    C_, l1_ratio_ : ndarray of shape (1,) (binary) or (n_classes,) (the same C for
        every class in the multinomial model)
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    cv_results_ : dict
        ``"C"``, ``"l1_ratio"``, ``"mean"`` (leave-one-out log-loss), ``"stderr"``; with
        one-vs-rest ``"mean"`` and ``"stderr"`` have one row per class.
    loo_predictions_ : ndarray of shape (n_samples,) or (n_samples, n_classes)
        Leave-one-out probabilities of ``classes_[1]`` (binary) or of every class
        (multinomial, or normalized one-vs-rest) for every training point.
    best_score_ : float
        Leave-one-out log-loss at the choice (multinomial: the cross-entropy; one-vs-rest:
        the mean over classes of the binary log-losses).
    tune_result_ : TuneResult or list of TuneResult (one per class)
    """

    def __init__(
        self,
        Cs: int | ArrayLike = 10,
        *,
        fit_intercept: bool = True,
        penalty: str = "l2",
        l1_ratios: ArrayLike | None = None,
        search: str = "grid",
        selection: str = "min",
        tol: float = 1e-8,
        max_iter: int = 100,
        n_jobs: int | None = None,
        multi_class: str = "auto",
    ):
        self.multi_class = multi_class
        self.Cs = Cs
        self.fit_intercept = fit_intercept
        self.penalty = penalty
        self.l1_ratios = l1_ratios
        self.search = search
        self.selection = selection
        self.tol = tol
        self.max_iter = max_iter
        self.n_jobs = n_jobs

    def fit(
        self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> ALOLogisticRegressionCV:
        """Fit, choosing C by ALOOCV."""
        dask_input = is_dask_collection(X)
        if dask_input:  # a dask array: chunk by chunk (aloocv._dask)
            X, y, sample_weight = _dask_fit_inputs(self, X, y, sample_weight)
            self.classes_ = _dask_classes(y)
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
        if sample_weight is not None and not dask_input:
            weighted = np.unique(y[sample_weight > 0])
            if weighted.size < 2:
                raise ValueError(
                    "ALOLogisticRegressionCV needs samples of at least 2 classes with positive "
                    f"sample_weight; only class {weighted.tolist()} has any"
                )
        _check_choice("penalty", self.penalty, ("l2", "l1", "elasticnet"))
        if isinstance(self.Cs, Integral) and not isinstance(self.Cs, bool):
            if self.Cs < 1:
                raise ValueError(f"Cs must be a positive integer or a grid, got {self.Cs!r}")
            Cs = np.logspace(-4, 4, int(self.Cs))
        else:
            Cs = _positive_grid("Cs", self.Cs)
        if self.penalty == "l2":
            ratios = np.array([0.0])
        elif self.penalty == "l1":
            ratios = np.array([1.0])
        else:
            if self.l1_ratios is None:
                raise ValueError("penalty='elasticnet' needs l1_ratios")
            ratios = np.atleast_1d(np.asarray(self.l1_ratios, dtype=float))
            if (
                ratios.size == 0
                or np.any(~np.isfinite(ratios))
                or np.any((ratios < 0) | (ratios > 1))
            ):
                raise ValueError(f"l1_ratios must lie in [0, 1], got {self.l1_ratios!r}")
        if np.all(ratios == 1):
            grid = [L1(1.0 / C) for C in Cs]
            start = grid[0]
        elif np.any(ratios > 0):
            grid = [ElasticNet(r / C, (1 - r) / C) for r in ratios for C in Cs]
            _check_one_structure(grid, "l1_ratios")
            start = grid[0]
        else:
            grid = [L2(1.0 / C) for C in Cs]
            start = grid[0]
        _check_choice("multi_class", self.multi_class, ("auto", "multinomial", "ovr"))
        binary = self.classes_.size == 2
        if not binary and self.multi_class != "ovr":
            if dask_input:
                raise ValueError(
                    "the multinomial loss is not available for dask input: use "
                    "multi_class='ovr' (one logistic fit per class) or a numpy array"
                )
            return self._fit_multinomial(X, y, start, grid, sample_weight)
        self.multi_class_ = "binary" if binary else "ovr"
        targets = [self.classes_[1]] if binary else list(self.classes_)
        results = [
            self._search(X, (y == c).astype(np.float64), "logistic", start, grid, sample_weight)
            for c in targets
        ]

        def c_ratio(pen):
            if isinstance(pen, ElasticNet):
                l1, l2 = _l1_l2(pen)
                return 1.0 / (l1 + l2), l1 / (l1 + l2)
            return 1.0 / float(pen.lam), 0.0

        pure_l1 = isinstance(start, L1)

        def convert(row):
            if row.size == 1:
                return [1.0 / row[0], 1.0 if pure_l1 else 0.0]
            return [1.0 / (row[0] + row[1]), row[0] / (row[0] + row[1])]

        self._store(results[0])
        cr = [c_ratio(r.penalty) for r in results]
        self.C_ = np.array([c for c, _ in cr])
        self.l1_ratio_ = np.array([r for _, r in cr])
        self.coef_ = np.vstack([r.fit.coef_ for r in results])
        self.intercept_ = np.array([r.fit.intercept_ for r in results])
        probs = np.column_stack([0.5 * (1.0 + np.tanh(0.5 * r.loo.predictions)) for r in results])
        cvs = [_cv_results(r, ["C", "l1_ratio"], convert) for r in results]
        if binary:
            self.loo_predictions_ = probs[:, 0]
            self.cv_results_ = cvs[0]
        else:
            self.tune_result_ = results
            self.loo_predictions_ = probs / probs.sum(axis=1, keepdims=True)
            self.best_score_ = float(np.mean([r.acv for r in results]))
            self.best_stderr_ = float(np.sqrt(np.mean([r.stderr**2 for r in results])))
            self.n_iter_ = int(sum(r.n_fits for r in results))
            merged = dict(cvs[0])
            merged["mean"] = np.vstack([c["mean"] for c in cvs])
            merged["stderr"] = np.vstack([c["stderr"] for c in cvs])
            self.cv_results_ = merged
        return self

    def _fit_multinomial(self, X, y, start, grid, sample_weight) -> ALOLogisticRegressionCV:
        """One multinomial model, C chosen by its ALOOCV (labels encoded 0..K-1)."""
        if self.penalty != "l2":
            raise ValueError(
                "the multinomial model supports penalty='l2' only; use multi_class='ovr' for "
                f"penalty={self.penalty!r}"
            )
        labels = np.searchsorted(self.classes_, y).astype(np.float64)
        res = self._search(X, labels, "multinomial", start, grid, sample_weight)
        self._store(res)
        K = self.classes_.size
        self.multi_class_ = "multinomial"
        self.C_ = np.full(K, 1.0 / float(res.penalty.lam))
        self.l1_ratio_ = np.zeros(K)
        self.coef_ = res.fit.coef_.copy()
        self.intercept_ = np.asarray(res.fit.intercept_).copy()
        self.loo_predictions_ = softmax(res.loo.predictions)
        self.cv_results_ = _cv_results(res, ["C", "l1_ratio"], lambda row: [1.0 / row[0], 0.0])
        return self

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities (softmax for the multinomial model; one-vs-rest ones
        normalized across classes)."""
        d = self.decision_function(X)
        if getattr(self, "multi_class_", None) == "multinomial":
            return softmax(d)
        if d.ndim == 1:
            p1 = 0.5 * (1.0 + np.tanh(0.5 * d))
            return np.column_stack([1.0 - p1, p1])
        p = 0.5 * (1.0 + np.tanh(0.5 * d))
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
        search: str = "grid",
        selection: str = "min",
        tol: float = 1e-8,
        max_iter: int = 100,
        n_jobs: int | None = None,
    ):
        self.alphas = alphas
        self.fit_intercept = fit_intercept
        self.search = search
        self.selection = selection
        self.tol = tol
        self.max_iter = max_iter
        self.n_jobs = n_jobs

    def _loss(self) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def _check_params(self) -> None:
        pass

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
        loss.check_y(np.asarray(y, dtype=np.float64))
        alphas = _positive_grid("alphas", self.alphas)
        s = float(X.shape[0] if sample_weight is None else np.sum(sample_weight))
        grid = [L2(float(a) * s) for a in alphas]
        res = self._search(X, y, loss, grid[0], grid, sample_weight, offset=offset)
        self._store(res)

        def to_alpha(lam: float) -> float:
            # the grid's own alpha when lam came from it (no rounding in lam / s)
            near = np.flatnonzero(np.isclose(alphas * s, lam, rtol=1e-12, atol=0.0))
            return float(alphas[near[0]]) if near.size else float(lam) / s

        self.alpha_ = to_alpha(float(res.penalty.lam))
        self.coef_ = res.fit.coef_.copy()
        self.intercept_ = float(res.fit.intercept_)
        self.cv_results_ = _cv_results(res, ["alpha"], lambda row: [to_alpha(row[0])])
        return self

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
    search : {{"grid", "gradient"}}
        ``"gradient"``: the grid brackets the minimum, then second-order steps on the
        exact derivative of ALOOCV in log(alpha) refine it.
    selection : {{"min", "1se"}}
        The minimum, or the largest alpha within one standard error of it.
    tol, max_iter
        Tolerance and Newton iterations of each fit.
    n_jobs : int, optional
        OpenMP threads.

    Attributes
    ----------
    alpha_ : float
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    best_score_ : float
        Mean approximate leave-one-out loss at ``alpha_`` ({what}).
    best_stderr_ : float
    cv_results_ : dict
        ``"alpha"``, ``"mean"``, ``"stderr"`` per candidate (for gradient searches also
        the iterates).
    loo_predictions_ : ndarray of shape (n_samples,)
        Leave-one-out linear predictors (log means) of the training points.
    tune_result_ : TuneResult
"""


class ALOPoissonRegressorCV(_ALOGLMRegressorCV):
    __doc__ = """Poisson regression (log link) with ``alpha`` chosen by ALOOCV.

    Mirrors scikit-learn's ``PoissonRegressor``; ``fit`` and ``predict`` take an
    optional ``offset`` (e.g. ``log(exposure)``).
""" + _GLM_DOC.format(sk="PoissonRegressor", extra="", what="Poisson negative log-likelihood")

    def _loss(self) -> Any:
        return get_loss("poisson")

    def _power(self) -> float:
        return 1.0


class ALOGammaRegressorCV(_ALOGLMRegressorCV):
    __doc__ = """Gamma regression (log link, y > 0) with ``alpha`` chosen by ALOOCV.

    Mirrors scikit-learn's ``GammaRegressor``; ``fit`` and ``predict`` take an optional
    ``offset``.
""" + _GLM_DOC.format(sk="GammaRegressor", extra="", what="gamma half deviance")

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
    )

    def __init__(
        self,
        alphas: ArrayLike = GLM_DEFAULT_ALPHAS,
        *,
        power: float = 1.5,
        link: str = "log",
        fit_intercept: bool = True,
        search: str = "grid",
        selection: str = "min",
        tol: float = 1e-8,
        max_iter: int = 100,
        n_jobs: int | None = None,
    ):
        self.alphas = alphas
        self.power = power
        self.link = link
        self.fit_intercept = fit_intercept
        self.search = search
        self.selection = selection
        self.tol = tol
        self.max_iter = max_iter
        self.n_jobs = n_jobs

    def _check_params(self) -> None:
        _check_choice("link", self.link, ("log", "auto"))
        Tweedie(power=self.power)

    def _loss(self) -> Any:
        return Tweedie(power=self.power)

    def _power(self) -> float:
        return float(self.power)
