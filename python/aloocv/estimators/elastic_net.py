"""The elastic net with ``alpha`` (and ``l1_ratio``) chosen by ALOOCV:
:class:`ALOElasticNetCV`, scikit-learn's ``ElasticNetCV`` without its K refits."""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import sparse

from .._validation import check_choice, design_tdot, is_dask_collection, is_sparse
from ..api import fit as _fit
from ..backends.dask.estimator_inputs import enet_top
from ..penalties import L1, Penalty
from ._base import (
    _ALORegressor,
    _checked_input,
    _passes_per_candidate,
    _Search,
    _search_results,
    _SquaredScore,
)
from ._grids import _check_ratios, _enet_from_sklearn, _l1_l2, _positive_grid

__all__ = ["ALOElasticNetCV"]


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
        A sequence is searched as ``ElasticNetCV``'s: every (l1_ratio, alpha), the best
        one chosen. Ratios in (0, 1) and 1.0 (the lasso, one parameter fewer) are
        searched apart, one search per penalty structure, and the better choice kept
        (with ``rule="1se"``: the structure of the lowest leave-one-out loss).
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
    rtol : float in (0, 1), optional
        Choose on the trusted estimate: near ALO's choice the leave-one-out loss is
        refined to within ``rtol`` (relative) of exact leave-one-out, at 95% confidence,
        by exact refits of the samples ALO's error indicator ranks first
        (:func:`aloocv.tune`'s ``rtol=``), so that the choice is exact leave-one-out's (to
        the grid's resolution; ``search="gradient"``: to ``tol``).
        ``search_results_["refined"]`` is 1 on the rows whose ``"loss"`` is the refined
        estimate, and :meth:`plot_cv` marks them. None (default): plain ALO. Not with
        ``scoring=`` (a scorer reads the leave-one-out predictions, which stay ALO's).
    alpha_per_target : bool
        With a 2-d ``y`` (several targets): independent elastic nets, one per target,
        each with its own ``alpha`` and ``l1_ratio`` chosen by its own ALOOCV (and its own
        default grid); otherwise one shared ``(alpha, l1_ratio)`` on a common grid (the
        default one from the largest ``alpha_max`` over targets), the one minimizing the
        mean over targets of the ALOOCV estimates (``search="grid"``, ``rule="min"``,
        ``scoring=None`` only). This is *not* the multi-task (group) penalty of
        scikit-learn's ``MultiTaskElasticNetCV``: every target has its own sparsity
        pattern. Ignored for a 1-d ``y``.
    memory_limit : int, float or str, optional
        The memory budget of the search's large matrices, as in :class:`ALORidgeCV`.
    cv : int, scikit-learn splitter or iterable of (train, test), optional
        None (default): leave-one-out by ALO. Otherwise the folds of an approximate
        K-fold (or leave-group-out) cross-validation that selects ``alpha`` and
        ``l1_ratio`` instead, with ``groups`` passed to ``fit``, as in
        :class:`ALORidgeCV` (an int is ``KFold(k)``, as ``ElasticNetCV``'s): one fit per
        candidate and one Newton step per fold on the active set, no refit.
        ``mse_path_`` then has one column per split (the split's mean held-out squared
        error, ``ElasticNetCV``'s layout), and ``best_score_``, ``best_stderr_``,
        ``search_results_`` and ``loo_predictions_`` hold the K-fold estimates.
        ``search="gradient"``: a bounded scalar search of the K-fold estimate along the
        ray that scales the grid's choice (its l1_ratio kept), between its grid
        neighbours, as in :class:`ALORidgeCV`. Not for dask input.

    Attributes
    ----------
    alpha_, l1_ratio_ : float or ndarray of shape (n_targets,)
        Per target with a 2-d ``y`` and ``alpha_per_target=True``.
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features)
    intercept_ : float or ndarray of shape (n_targets,)
    alphas_ : ndarray of shape (n_alphas,) or (n_l1_ratio, n_alphas)
        The candidate alphas per l1_ratio, decreasing.
    mse_path_ : ndarray of shape (n_alphas, n_folds) or (n_l1_ratio, n_alphas, n_folds)
        Leave-one-out mean squared error (weighted by ``sample_weight``) per candidate;
        the last axis is ``ElasticNetCV``'s folds, one here (the leave-one-out estimate),
        so ``mse_path_.mean(axis=-1)`` means what it means there; with ``cv=``, one per
        split (its mean held-out squared error).
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
    passes_per_candidate_ : float or None
        Mean passes over X per grid candidate (``O(n p^2)`` each: the Hessian passes of
        the warm-started fit, from the core's counters, plus ALO's leverage pass); None
        where the route does not count them (squared-loss ridge path, gradient search).
    loo_predictions_ : ndarray of shape (n_samples,) or (n_samples, n_targets)
        Only with ``store_loo=True`` (not for a shared alpha over several targets).
    tune_result_ : TuneResult
        1-d ``y`` only.

    Examples
    --------
    >>> import numpy as np, aloocv
    >>> from sklearn.datasets import load_diabetes
    >>> X, y = load_diabetes(return_X_y=True)
    >>> model = aloocv.ALOElasticNetCV(l1_ratio=[0.5, 1.0], alphas=20).fit(X, y)
    >>> print(f"alpha = {model.alpha_:.3g}, l1_ratio = {model.l1_ratio_}")
    alpha = 0.00309, l1_ratio = 1.0
    >>> int(np.count_nonzero(model.coef_))  # the lasso keeps 9 of the 10 features
    9
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
        rtol: float | None = None,
        memory_limit: float | str | None = None,
        cv: Any = None,
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
        self.rtol = rtol
        self.memory_limit = memory_limit
        self.cv = cv

    def fit(
        self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None, **params: Any
    ) -> ALOElasticNetCV:
        """Fit, choosing alpha (and l1_ratio) by ALOOCV (or by the folds of ``cv=``).

        ``y`` may be 2-d ``(n_samples, n_targets)`` (see ``alpha_per_target``); ``X`` may
        be a dask array (with a 1-d ``y``: :mod:`aloocv.backends.dask`). ``params``:
        ``groups`` for the splitter of ``cv=``, as in :meth:`ALORidgeCV.fit`."""
        X, y, sample_weight, several = self._targets_inputs(X, y, sample_weight)
        with self._folds(X, y, sample_weight, params):
            if several:
                return self._fit_targets(X, y, sample_weight)
            return self._fit_one(X, y, sample_weight)

    def _fit_one(self, X, y, sample_weight) -> ALOElasticNetCV:
        """One target (1-d ``y``)."""
        X = _informative(X, self.fit_intercept)
        n, ratios, alphas = self._grid(X, y, sample_weight)
        grid = _candidates(n, ratios, alphas)
        groups = _structures(grid)
        searches = [
            self._search(
                X, y, "squared", [grid[i] for i in g], sample_weight, score_weight=sample_weight
            )
            for g in groups
        ]
        search = searches[self._best_structure(searches)]
        res = search.res
        n_a = alphas.shape[1]
        self._store(
            search,
            {"alpha": alphas.ravel(), "l1_ratio": np.repeat(ratios, n_a)},
        )
        loss = _merged(groups, [s.loss for s in searches], len(grid))
        if len(groups) > 1:  # the curve over all candidates, the counts over all searches
            self._curve["loss"] = loss
            self._curve["loss_stderr"] = _merged(groups, [s.stderr for s in searches], len(grid))
            self._curve["score"] = _merged(groups, [s.score for s in searches], len(grid))
            parts = [s.refined.astype(np.float64) for s in searches]
            self._curve["refined"] = _merged(groups, parts, len(grid)) > 0
            self.n_fits_ = int(sum(s.res.n_fits for s in searches))
            self.passes_per_candidate_ = _passes_per_candidate(searches)
        l1, l2 = _l1_l2(res.penalty)
        self.alpha_ = float((l1 + l2) / n)
        self.l1_ratio_ = float(l1 / (l1 + l2)) if (l1 + l2) > 0 else float(ratios[0])
        self.coef_ = res.fit.coef_.copy()
        self.intercept_ = float(res.fit.intercept_)
        if searches[0].fold_loss is None:
            mse = (2.0 * loss).reshape(ratios.size, n_a, 1)
        else:  # cv=: ElasticNetCV's one column per split
            folds = _merged(groups, [s.fold_loss for s in searches], len(grid))
            mse = (2.0 * folds).reshape(ratios.size, n_a, -1)
        single = np.ndim(self.l1_ratio) == 0 or ratios.size == 1
        self.alphas_ = alphas[0].copy() if single else alphas
        self.mse_path_ = mse[0] if single else mse
        tables = [
            _search_results(
                s.res,
                ["alpha", "l1_ratio"],
                _to_sklearn(n, isinstance(grid[g[0]], L1)),
                s.row_score,
                s.n_grid,
            )
            for s, g in zip(searches, groups)
        ]
        self.search_results_ = {key: np.concatenate([t[key] for t in tables]) for key in tables[0]}
        return self

    def _best_structure(self, searches: list[_Search]) -> int:
        """The search (one per penalty structure) holding the choice: the highest best
        score (with rule='1se', the lowest minimum of the leave-one-out loss; its own
        1-SE choice is kept); the first on ties."""
        if len(searches) == 1:
            return 0
        if self.rule == "1se":
            return int(np.argmin([np.nanmin(s.loss) for s in searches]))
        return int(np.argmax([s.best_score for s in searches]))

    def _grid(self, X, y, sample_weight) -> tuple[float, np.ndarray, np.ndarray]:
        """(sum of weights, l1_ratios, alphas of shape (n_l1_ratio, n_alphas)); y 1-d or
        2-d (the largest alpha_max over its columns)."""
        if is_dask_collection(X):
            n, xty = enet_top(X, y, sample_weight, self.fit_intercept)
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
        X = _informative(X, self.fit_intercept)
        T = Y.shape[1]
        for name in ("tune_result_", "n_iter_", "n_fits_", "loo_predictions_", "_curve"):
            self.__dict__.pop(name, None)  # attributes of an earlier fit
        if self.alpha_per_target:
            return self._fit_per_target(X, Y, sample_weight)
        check_choice("rule", self.rule, ("min", "1se"))
        if self.search != "grid" or self.rule != "min" or self.scoring is not None:
            raise ValueError(
                "a shared alpha for several targets (alpha_per_target=False) is chosen on the "
                "grid by the minimum of the mean leave-one-out loss: use search='grid', "
                "rule='min', scoring=None, or alpha_per_target=True"
            )
        n, ratios, alphas = self._grid(X, Y, sample_weight)
        grid = _candidates(n, ratios, alphas)
        groups = _structures(grid)
        acv = np.empty((len(grid), T))
        err = np.empty((len(grid), T))
        for t in range(T):
            for g in groups:
                search = self._search(X, Y[:, t], "squared", [grid[i] for i in g], sample_weight)
                acv[g, t] = search.loss
                err[g, t] = search.stderr
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
                memory_limit=self.memory_limit,
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
            "refined": np.zeros(acv.size),
        }
        return self

    def _fit_per_target(self, X, Y, sample_weight) -> ALOElasticNetCV:
        """Independent elastic nets, one per target, each with its own ALOOCV choice."""
        T = Y.shape[1]
        # the splits of cv= resolved once (groups included) for every target
        params = {**self.get_params(), "alpha_per_target": False, "cv": self._splits}
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

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


def _candidates(n: float, ratios: np.ndarray, alphas: np.ndarray) -> list[Penalty]:
    """The penalties of every (l1_ratio, alpha), l1_ratio outer, as scikit-learn's."""
    return [
        _enet_from_sklearn(float(a), float(r), n) for r, row in zip(ratios, alphas) for a in row
    ]


def _structures(grid: list[Penalty]) -> list[np.ndarray]:
    """Indices of the candidates of each penalty structure (pure lasso, l1_ratio = 1, has
    one parameter; the elastic net two), in order of first appearance: one search each,
    as one search tunes one structure."""
    kinds = [type(g) for g in grid]
    order = list(dict.fromkeys(kinds))
    return [np.array([i for i, k in enumerate(kinds) if k is kind]) for kind in order]


def _merged(groups: list[np.ndarray], parts: list[np.ndarray], size: int) -> np.ndarray:
    """Per-candidate values of the searches of ``groups`` in the candidates' order."""
    if len(groups) == 1:
        return parts[0]
    out = np.empty((size, *np.shape(parts[0])[1:]))
    for g, part in zip(groups, parts):
        out[g] = part
    return out


def _to_sklearn(n: float, lasso: bool):
    """A history row (l1 or l2 alone, or (l1, l2)) as ElasticNetCV's [alpha, l1_ratio]."""

    def convert(row: np.ndarray) -> list[float]:
        if row.size == 1:
            l1, l2 = (row[0], 0.0) if lasso else (0.0, row[0])
        else:
            l1, l2 = row[0], row[1]
        return [(l1 + l2) / n, l1 / (l1 + l2)]

    return convert


def _informative(X: Any, fit_intercept: bool) -> Any:
    """X, or with an intercept and every column constant an all-zero sparse design of
    its shape (no copy of X): constant columns are the intercept's direction, so their
    coefficients are zero for every penalty and the fit is the (weighted) mean of y, as
    scikit-learn's ``ElasticNetCV`` finds on the centered X; X itself would leave the
    Hessian singular (no curvature between a constant column and the intercept)."""
    if not fit_intercept or is_dask_collection(X) or X.shape[0] == 0:
        return X
    if is_sparse(X):
        low, high = X.min(axis=0).toarray(), X.max(axis=0).toarray()
    else:
        low, high = np.min(X, axis=0), np.max(X, axis=0)
    if not np.array_equal(low, high):
        return X
    return sparse.csr_matrix(X.shape, dtype=np.float64)
