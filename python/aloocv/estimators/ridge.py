"""Ridge regression with the regularization chosen by (exact) leave-one-out:
:class:`ALORidgeCV`, scikit-learn's ``RidgeCV`` with a gradient search, one alpha per
feature, and a multi-target route through one decomposition of X."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .. import _blas, _scoring
from .._memory import check_memory
from .._scoring import get_scorer
from .._validation import check_bool, check_choice
from ..backends.dask.estimator_inputs import local
from ..backends.memory.multitarget import decompose
from ..folds import check_fold_sums, partition
from ..penalties import L2
from ..problem import Problem
from ..tuning import tune
from ..tuning.drivers import second_order_method
from ._base import _ALORegressor, _Search, _search_results, _SquaredScore
from ._grids import _positive_grid

__all__ = ["ALORidgeCV"]


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
    rtol : float in (0, 1), optional
        The error budget of the other estimators (:class:`ALOLogisticRegressionCV`):
        accepted for one interface, but here ALO is exact leave-one-out (squared loss, L2
        penalty), so nothing is refined.
    memory_limit : int, float or str, optional
        The memory budget of the search's large matrices (the ``p x p`` Hessian or
        eigendecomposition): bytes, or a string such as ``"2GB"`` or ``"1.5 GiB"``; None
        (default): the memory available at ``fit``. A search whose matrices would exceed
        80% of it raises ``MemoryError`` naming the matrix, its size and the alternative
        before anything large is allocated (as :func:`aloocv.fit`'s ``memory_limit``).
    cv : int, scikit-learn splitter or iterable of (train, test), optional
        None (default): leave-one-out (exact here). Otherwise the folds of a K-fold (or
        leave-group-out) cross-validation that selects alpha instead, as
        ``sklearn.model_selection.check_cv`` reads them: an int ``k`` is ``KFold(k)``
        (``StratifiedKFold(k)`` for :class:`ALOLogisticRegressionCV`), unshuffled, as
        scikit-learn's CV estimators; a splitter (``KFold``, ``GroupKFold``, ``LeaveOneGroupOut``,
        ``TimeSeriesSplit``, ...) is called as ``cv.split(X, y, groups)`` with the
        ``groups`` given to ``fit`` (``fit(X, y, groups=g)``, or routed there by
        scikit-learn's metadata routing when it is enabled); an iterable of ``(train,
        test)`` index pairs is used as given. Each candidate costs one fit on all the
        samples and one Newton step per fold on the problem without the fold
        (:func:`aloocv.kfold` with ``method="alo"``), not one refit per fold: exact
        K-fold for the squared loss with an L2 penalty (this estimator), approximate for
        the other losses and the L1 term. ``best_score_``, ``best_stderr_``,
        ``search_results_``, ``cv_results_``, ``loo_predictions_`` and
        ``tune_result_.loo`` (then a :class:`aloocv.KFoldResult`) hold the K-fold
        estimates: the mean over samples of the held-out losses, cv.glmnet's standard
        error across folds, the held-out predictions of each sample's fold (NaN for a
        sample no split tests). A scorer is evaluated on each split's held-out
        predictions and averaged over the splits, as scikit-learn does. The K-fold
        estimate has no exact derivative here: ``search="gradient"`` refines the grid's
        choice by a bounded scalar search of it (``scipy.optimize.minimize_scalar``, to
        1e-3 in log alpha) between the choice's neighbours on the grid (one grid step
        beyond an end), ``rule="min"`` only; not with ``alpha_per_feature``. With
        ``rtol=`` (the other estimators) every candidate's estimate is refined to within
        ``rtol`` of exact K-fold (:func:`aloocv.kfold`'s ``rtol=``). Not for dask input.

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
    passes_per_candidate_ : float or None
        Mean passes over X per grid candidate (``O(n p^2)`` each: the Hessian passes of
        the warm-started fit, from the core's counters, plus ALO's leverage pass); None
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
        rtol: float | None = None,
        memory_limit: float | str | None = None,
        cv: Any = None,
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
        self.rtol = rtol
        self.memory_limit = memory_limit
        self.cv = cv

    def fit(
        self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None, **params: Any
    ) -> ALORidgeCV:
        """Fit, choosing alpha by leave-one-out (or by the folds of ``cv=``).

        ``y`` may be 2-d ``(n_samples, n_targets)`` (see ``alpha_per_target``); ``X`` may
        be a dask array (with a 1-d ``y``: :mod:`aloocv.backends.dask`). ``params``:
        ``groups`` for the splitter of ``cv=`` (``GroupKFold``, ``LeaveOneGroupOut``,
        ...); with scikit-learn's metadata routing enabled, what the splitter requests."""
        X, y, sample_weight, several = self._targets_inputs(X, y, sample_weight)
        with self._folds(X, y, sample_weight, params):
            if several:
                return self._fit_targets(X, y, sample_weight)
            return self._fit_one(X, y, sample_weight)

    def _fit_one(self, X, y, sample_weight) -> ALORidgeCV:
        """One target (1-d ``y``)."""
        alphas = _positive_grid("alphas", self.alphas)
        if self.alpha_per_feature and self.scoring is not None:
            raise ValueError(
                "alpha_per_feature=True tunes by gradient on the leave-one-out loss; it "
                "cannot select by scoring= (leave scoring=None)"
            )
        if self.alpha_per_feature and self._splits is not None:
            raise ValueError(
                "alpha_per_feature=True tunes by gradient on the leave-one-out loss; with "
                "cv= the candidates are scored by K-fold on the grid (use cv=None for one "
                "alpha per feature)"
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
                sw = 1.0 if sample_weight is None else local(sample_weight)[:, None]
                self.cv_results_ = sw * 2.0 * local(res.path_losses[:, search.rows])
            else:
                self.cv_results_ = local(res.path_predictions[:, search.rows]).copy()
        if self.alpha_per_feature:
            search = self._per_feature(search, X, y, sample_weight)
            res = search.res
        self._store(search, {"alpha": alphas})
        lam = res.penalty.lam
        self.alpha_ = float(lam) if np.ndim(lam) == 0 else np.asarray(lam).copy()
        self.coef_ = res.fit.coef_.copy()
        self.intercept_ = float(res.fit.intercept_)
        self.search_results_ = _search_results(
            res, ["alpha"], lambda row: list(row), search.row_score, search.n_grid
        )
        return self

    def _per_feature(self, search: _Search, X, y, sample_weight) -> _Search:
        """One alpha per feature: second-order steps on ALOOCV from the grid's choice,
        kept when they lower the leave-one-out loss."""
        res = search.res
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
            memory_limit=self.memory_limit,
        )
        if not g.acv <= res.acv:
            return search
        wmean = 1.0 if sample_weight is None else float(np.mean(sample_weight))
        out = _Search(
            g,
            search.rows,
            search.loss,
            search.score,
            self._loss_score(g.history["acv"], wmean),
            float(self._loss_score(g.acv, wmean)),
            None,
            search.stderr,
            search.refined,
        )
        out.n_grid = 0
        return out

    def _fit_targets(self, X, Y, sample_weight) -> ALORidgeCV:
        """Several targets: one decomposition, the grid scored for every target at once."""
        scorer = self._targets_scorer()
        per_target = bool(self.alpha_per_target)
        alphas = _positive_grid("alphas", self.alphas)
        pb = Problem.build(
            X,
            Y,
            loss="squared",
            penalty=L2(1.0),
            fit_intercept=self.fit_intercept,
            sample_weight=sample_weight,
            n_jobs=self.n_jobs,
            memory_limit=self.memory_limit,
        )
        check_memory(pb, "primal", "loo")  # the p x p eigendecomposition of several targets
        X, Y, w = pb.X, pb.y, pb.sample_weight
        mr = decompose(pb)[0]
        n, T = Y.shape
        nt = pb.options.n_threads
        cols = np.arange(T)
        sw = float(n if w is None else w.sum())
        if self._splits is not None:
            s2, mean, stderr, preds = _targets_folds(mr, self._splits, Y, w, alphas, nt)
            score = -s2 / n
            if scorer is not None:
                score = _split_target_scores(scorer, self._splits, preds, X, Y, w, per_target)
        else:
            with _blas.single_threaded_blas():
                sc = mr.scores(alphas, nt)
            s2, s4 = sc.s2, sc.s4
            mean = s2 / (2.0 * sw)  # weighted mean of 1/2 e^2, (n_alphas, T)
            var = (s4 / 4.0 - sw * mean**2) / max(sw - 1.0, 1e-300)
            stderr = np.sqrt(np.maximum(var, 0.0) / sw)
            score = -s2 / n  # RidgeCV: -mean over samples of w_i e_i^2, (n_alphas, T)
            preds = None
        if preds is None and (scorer is not None or self.store_cv_results):
            # leave-one-out predictions per alpha, (n, T, n_alphas): what a scorer (and
            # RidgeCV's cv_results_ with one) sees
            preds = np.empty((n, T, alphas.size))
            with _blas.single_threaded_blas():
                for k, a in enumerate(alphas):
                    preds[:, :, k] = mr.solve(
                        np.full(T, float(a)), predictions=True, n_threads=nt
                    ).predictions
        if scorer is not None:
            if self._splits is None:
                _score_targets(scorer, score, preds, X, Y, w, per_target)
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
            "refined": np.zeros(alphas.size * T),
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

    def _targets_scorer(self) -> Any:
        """The parameters of a fit on several targets checked; the scorer (or None)."""
        check_choice("search", self.search, ("grid", "gradient"))
        check_choice("rule", self.rule, ("min", "1se"))
        check_bool(self.alpha_per_feature, "alpha_per_feature")
        check_bool(self.store_cv_results, "store_cv_results")
        self._rtol()
        if self.alpha_per_feature:
            raise ValueError("alpha_per_feature=True needs a 1-d y (one target)")
        if self.search != "grid":
            raise ValueError(
                "search='gradient' needs a 1-d y; use search='grid' for several targets"
            )
        scorer = get_scorer(self, self.scoring)
        if scorer is not None and self.rule != "min":
            raise ValueError(
                "rule='1se' uses the standard error of the leave-one-out loss; with scoring= "
                "use rule='min'"
            )
        if self.rule == "1se" and not self.alpha_per_target:
            raise ValueError(
                "rule='1se' with several targets needs alpha_per_target=True (the "
                "standard error of a mean over targets is not defined here)"
            )
        return scorer

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


def _score_targets(scorer, score: np.ndarray, preds: np.ndarray, X, Y, w, per_target: bool):
    """Fills ``score`` (n_alphas, n_targets) with the scorer's scores of the leave-one-out
    predictions ``preds`` (n, n_targets, n_alphas). As RidgeCV: each target scored on its
    own with alpha_per_target, else the scorer sees all targets at once (one score per
    alpha, shared by the targets)."""
    n, T, n_alphas = preds.shape
    for k in range(n_alphas):
        if per_target:
            for t in range(T):
                rep = _scoring.LOORegressor(n, preds[:, t, k])
                score[k, t] = _scoring.score(scorer, rep, X, Y[:, t], w)
        else:
            rep = _scoring.LOORegressor(n, preds[:, :, k])
            score[k, :] = _scoring.score(scorer, rep, X, Y, w)


def _targets_folds(mr, splits: list, Y, w, alphas: np.ndarray, nt: int) -> tuple:
    """K-fold of several targets over the ``cv=`` splits from the one decomposition
    (exact fold downdates, ``MultiRidge.folds``): ``(s2, mean, stderr, preds)`` as the
    leave-one-out route's, with ``s2`` the weighted sums of the squared held-out errors
    and ``stderr`` cv.glmnet's across folds; ``preds`` ``(n, n_targets, n_alphas)``."""
    n, T = Y.shape
    idx = partition(splits, n)
    if idx is None:
        raise ValueError(
            "cv= splits whose test sets do not partition the samples (TimeSeriesSplit, "
            "ShuffleSplit, ...) are not supported with several targets (a 2-d y): use a "
            "partitioning splitter (KFold, GroupKFold, LeaveOneGroupOut, ...) or one target "
            "at a time"
        )
    K = len(splits)
    ww = np.ones(n) if w is None else w
    wsum = check_fold_sums(np.bincount(idx, weights=ww, minlength=K), np.arange(K))
    preds = np.empty((n, T, alphas.size))
    with _blas.single_threaded_blas():
        for k, a in enumerate(alphas):
            preds[:, :, k] = mr.folds(float(a), idx, K, nt)
    half = 0.5 * ww[:, None, None] * (Y[:, :, None] - preds) ** 2  # (n, T, n_alphas)
    fold_sums = np.zeros((K, T, alphas.size))
    np.add.at(fold_sums, idx, half)
    total = wsum.sum()
    mean = fold_sums.sum(axis=0) / total  # (T, n_alphas)
    fold_means = fold_sums / wsum[:, None, None]
    var = np.sum(wsum[:, None, None] * (fold_means - mean) ** 2, axis=0) / total / (K - 1)
    return 2.0 * mean.T * total, mean.T, np.sqrt(var).T, preds


def _split_target_scores(scorer, splits: list, preds: np.ndarray, X, Y, w, per_target: bool):
    """The scorer's scores ``(n_alphas, n_targets)`` of several targets' held-out
    predictions, per split (as :func:`_score_targets`) and averaged over the splits."""
    score = np.zeros((preds.shape[2], preds.shape[1]))
    part = np.empty_like(score)
    for _, te in splits:
        _score_targets(
            scorer, part, preds[te], X[te], Y[te], None if w is None else w[te], per_target
        )
        score += part
    return score / len(splits)
