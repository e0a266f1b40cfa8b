"""Logistic regression with ``C`` (and ``l1_ratio``) chosen by ALOOCV:
:class:`ALOLogisticRegressionCV`, scikit-learn's ``LogisticRegressionCV`` without its K
refits (binary, multinomial, one-vs-rest)."""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import ClassifierMixin
from sklearn.linear_model._base import LinearClassifierMixin
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, validate_data

from .. import _scoring
from .._validation import check_bool, check_choice, check_class_weight, is_dask_collection
from ..backends.dask.estimator_inputs import class_weight_vector, label_indicator, local
from ..backends.dask.estimator_inputs import labels as dask_labels
from ..losses import softmax
from ..penalties import Penalty
from ..tuning import TuneResult
from ._base import (
    _ALOBase,
    _checked_input,
    _passes_per_candidate,
    _precheck,
    _Search,
    _search_results,
)
from ._grids import _check_one_structure, _check_ratios, _enet_from_sklearn, _l1_l2, _positive_grid

__all__ = ["ALOLogisticRegressionCV"]


def _encode_labels(y: Any, classes: np.ndarray) -> np.ndarray:
    """Class labels as their indices 0..K-1 in the sorted `classes` (float64)."""
    return np.searchsorted(classes, np.asarray(y)).astype(np.float64)


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
    rtol : float in (0, 1), optional
        Choose on the trusted estimate: near ALO's choice the leave-one-out log-loss is
        refined to within ``rtol`` (relative) of exact leave-one-out, at 95% confidence,
        by exact refits of the samples ALO's error indicator ranks first
        (:func:`aloocv.tune`'s ``rtol=``), so that the choice of C is exact
        leave-one-out's (to the grid's resolution; ``search="gradient"``: to ``tol``;
        one-vs-rest: each class's model's). ``search_results_["refined"]`` is 1 on the
        rows whose ``"loss"`` is the refined estimate, and :meth:`plot_cv` marks them.
        None (default): plain ALO. Not with ``scoring=`` (a scorer reads the
        leave-one-out predictions, which stay ALO's).
    use_legacy_attributes : bool
        True (scikit-learn 1.9's default): the attributes below. False (scikit-learn
        1.10's default): ``C_`` and ``l1_ratio_`` floats, ``coefs_paths_`` an array of
        shape (1, n_l1_ratios, n_cs, n_classes or 1, n_dof), ``scores_`` and ``n_iter_``
        of shape (1, n_l1_ratios, n_cs); not with one-vs-rest (a C per class).
    memory_limit : int, float or str, optional
        The memory budget of the search's large matrices (the multinomial model's
        ``K (p+1) x K (p+1)`` Hessian included), as in :class:`ALORidgeCV`. A multinomial
        model whose Hessian does not fit (or whose matrix-free route is cheaper: wide
        sparse X) is searched on the matrix-free route (Newton-CG fits, randomized
        leverage blocks, ``docs/math/matrix_free.md``); that route has no hypergradient,
        so ``search="grid"`` there (``search="gradient"`` raises a ValueError).
    cv : int, scikit-learn splitter or iterable of (train, test), optional
        None (default): leave-one-out by ALO. Otherwise the folds of an approximate
        K-fold (or leave-group-out) cross-validation that selects C (and l1_ratio)
        instead, as ``LogisticRegressionCV``'s ``cv``: an int ``k`` is
        ``StratifiedKFold(k)`` (unshuffled, on the class labels, the same folds for every
        one-vs-rest model), a splitter is called as ``cv.split(X, y, groups)`` with the
        ``groups`` given to ``fit`` (see :class:`ALORidgeCV`). Each candidate costs one
        fit on all the samples and one Newton step per fold on the problem without the
        fold (:func:`aloocv.kfold`), not one refit per fold. ``scores_`` then has one row
        per split (``LogisticRegressionCV``'s layout: the split's score, or minus its mean
        held-out log-loss), while ``coefs_paths_`` and ``n_iter_`` keep one entry, the
        fit on all the samples; ``best_score_``, ``best_stderr_``, ``search_results_``,
        ``loo_predictions_`` and ``tune_result_.loo`` hold the K-fold estimates. A scorer
        is averaged over the splits, as scikit-learn does. ``search="gradient"``: a
        bounded scalar search of the K-fold estimate between the grid neighbours of the
        grid's choice, as in :class:`ALORidgeCV`. With ``rtol=`` every candidate's
        estimate is refined to within ``rtol`` of exact K-fold. Not for dask input.

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
        with one "fold" (the leave-one-out estimate); with ``cv=`` one row per split
        (n_folds, n_cs[, n_l1_ratios]). Higher is better.
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
    passes_per_candidate_ : float or None
        Mean passes over X per grid candidate (``O(n p^2)`` each: the Hessian passes of
        the warm-started fit, from the core's counters, plus ALO's leverage pass); None
        where the route does not count them (squared-loss ridge path, gradient search).
    loo_predictions_ : ndarray of shape (n_samples,) or (n_samples, n_classes)
        Only with ``store_loo=True``: leave-one-out probabilities of ``classes_[1]``
        (binary) or of every class.
    tune_result_ : TuneResult or list of TuneResult (one per class)

    Examples
    --------
    >>> import aloocv
    >>> from sklearn.datasets import load_breast_cancer, load_wine
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> model = make_pipeline(StandardScaler(), aloocv.ALOLogisticRegressionCV(Cs=10))
    >>> clf = model.fit(X, y)[-1]
    >>> print(f"C = {clf.C_[0]:.3g}, leave-one-out log-loss {-clf.best_score_:.3f}")
    C = 0.359, leave-one-out log-loss 0.077
    >>> model.predict(X[:3])
    array([0, 0, 0])

    Three classes give one multinomial (softmax) model:

    >>> X, y = load_wine(return_X_y=True)
    >>> model = make_pipeline(StandardScaler(), aloocv.ALOLogisticRegressionCV(Cs=5))
    >>> clf = model.fit(X, y)[-1]
    >>> clf.multi_class_, clf.coef_.shape
    ('multinomial', (3, 13))
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
        rtol: float | None = None,
        memory_limit: float | str | None = None,
        cv: Any = None,
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
        self.rtol = rtol
        self.memory_limit = memory_limit
        self.cv = cv

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
        self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None, **params: Any
    ) -> ALOLogisticRegressionCV:
        """Fit, choosing C (and l1_ratio) by ALOOCV (or by the folds of ``cv=``).

        ``params``: ``groups`` for the splitter of ``cv=`` (``GroupKFold``,
        ``StratifiedGroupKFold``, ``LeaveOneGroupOut``, ...); with scikit-learn's
        metadata routing enabled, what the splitter requests."""
        X, y, sample_weight, dask_input = self._fit_inputs(X, y, sample_weight)
        fit_weight = self._fit_weight(y, sample_weight, dask_input)
        Cs, ratios, grid, legacy = self._candidates()
        values = {"C": np.tile(Cs, ratios.size), "l1_ratio": np.repeat(ratios, Cs.size)}
        with self._folds(X, y, sample_weight, params):
            searches = self._searches(X, y, grid, fit_weight, sample_weight, dask_input)
        self._store(searches[0], values)
        if self.multi_class_ == "multinomial":
            scores, paths = self._store_multinomial(searches[0], ratios, Cs)
        else:
            scores, paths = self._store_binary(searches, ratios, Cs)
        self.scores_ = scores
        self.coefs_paths_ = paths
        # scikit-learn's legacy layout: (n_models, n_folds=1, n_cs[, n_l1_ratios])
        self.n_iter_ = np.stack(
            [self._shape_scores(s.res.path_n_iter[s.rows], ratios, Cs) for s in searches]
        ).astype(np.int64)
        if not legacy:
            self._new_attributes(searches[0], ratios, Cs)
        return self

    def _fit_inputs(self, X, y, sample_weight) -> tuple[Any, Any, Any, bool]:
        """Validated ``(X, y, sample_weight, dask_input)``; sets ``classes_``."""
        dask_input = is_dask_collection(X)
        if dask_input:  # a dask array: chunk by chunk (the dask backend)
            X, y, sample_weight, self.classes_ = dask_labels(X, y, sample_weight)
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
        return X, y, sample_weight, dask_input

    def _fit_weight(self, y, sample_weight, dask_input: bool) -> Any:
        """The weights of the fitted loss: ``sample_weight`` times the class weights."""
        check_class_weight(self.class_weight, self.classes_)
        fit_weight = sample_weight
        if self.class_weight is not None and dask_input:
            fit_weight = class_weight_vector(self.class_weight, self.classes_, y, sample_weight)
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
        return fit_weight

    def _candidates(self) -> tuple[np.ndarray, np.ndarray, list[Penalty], bool]:
        """``(Cs, l1_ratios, penalties in scikit-learn's order, legacy attributes)``;
        sets ``Cs_``, ``l1_ratios_`` and the penalty kind."""
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
        return Cs, ratios, grid, legacy

    def _searches(
        self, X, y, grid: list[Penalty], fit_weight, sample_weight, dask_input: bool
    ) -> list[_Search]:
        """One multinomial search, or one binary search per model (the positive class,
        or every class for one-vs-rest); sets ``multi_class_``."""
        binary = self.classes_.size == 2
        if not binary and self.multi_class != "ovr":
            if self._kind != "l2":
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
            return [search]
        self.multi_class_ = "binary" if binary else "ovr"
        targets = [self.classes_[1]] if binary else list(self.classes_)
        searches = []
        for c in targets:
            if dask_input:  # the 0/1 encoding chunk by chunk
                yc = y.map_blocks(label_indicator(c), dtype=np.float64)
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
        return searches

    def _store_multinomial(
        self, search: _Search, ratios: np.ndarray, Cs: np.ndarray
    ) -> tuple[dict, dict]:
        """The fitted attributes of the multinomial model; (scores_, coefs_paths_)."""
        K = self.classes_.size
        res = search.res
        C, ratio = self._c_ratio(res.penalty)
        self.C_ = np.full(K, C)
        self.l1_ratio_ = np.full(K, ratio)
        self.coef_ = res.fit.coef_.copy()
        self.intercept_ = np.asarray(res.fit.intercept_, dtype=np.float64).copy()
        self.search_results_ = _search_results(
            res,
            ["C", "l1_ratio"],
            lambda row: [1.0 / row[0], 0.0],
            search.row_score,
            search.n_grid,
        )
        path = self._coefs_path(res, search.rows)  # (T, K, n_dof)
        keys = list(self.classes_)
        scores = {c: self._scores_of(search, ratios, Cs) for c in keys}
        paths = {c: self._shape_path(path[:, k], ratios, Cs) for k, c in enumerate(keys)}
        if self._keep():
            self.loo_predictions_ = softmax(local(res.loo.predictions))
        return scores, paths

    def _store_binary(
        self, searches: list[_Search], ratios: np.ndarray, Cs: np.ndarray
    ) -> tuple[dict, dict]:
        """The fitted attributes of the binary model or of the one-vs-rest models;
        (scores_, coefs_paths_)."""
        binary = self.classes_.size == 2
        results = [s.res for s in searches]
        cr = [self._c_ratio(r.penalty) for r in results]
        self.C_ = np.array([c for c, _ in cr])
        self.l1_ratio_ = np.array([r for _, r in cr])
        self.coef_ = np.vstack([r.fit.coef_ for r in results])
        self.intercept_ = np.array([float(r.fit.intercept_) for r in results])
        keys = [self.classes_[1]] if binary else list(self.classes_)
        scores = {c: self._scores_of(s, ratios, Cs) for c, s in zip(keys, searches)}
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
        self.search_results_ = {key: np.concatenate([t[key] for t in tables]) for key in tables[0]}
        if not binary:
            self._store_ovr(searches)
        if self._keep():
            probs = np.column_stack([_sigmoid(local(r.loo.predictions)) for r in results])
            self.loo_predictions_ = (
                probs[:, 0] if binary else probs / probs.sum(axis=1, keepdims=True)
            )
        return scores, paths

    def _store_ovr(self, searches: list[_Search]) -> None:
        """The one-vs-rest summaries over the per-class searches."""
        results = [s.res for s in searches]
        self.tune_result_ = [r if self._keep() else r.without_samples() for r in results]
        self.best_score_ = float(np.mean([s.best_score for s in searches]))
        self.best_stderr_ = float(np.sqrt(np.mean([r.stderr**2 for r in results])))
        self.n_fits_ = int(sum(r.n_fits for r in results))
        self.passes_per_candidate_ = _passes_per_candidate(searches)
        self._curve["loss"] = np.mean([s.loss for s in searches], axis=0)
        self._curve["loss_stderr"] = np.sqrt(np.mean([s.stderr**2 for s in searches], axis=0))
        self._curve["score"] = np.mean([s.score for s in searches], axis=0)
        self._curve["refined"] = np.any([s.refined for s in searches], axis=0)

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
        if search.fold_score is None:
            self.scores_ = np.asarray(search.score, dtype=np.float64).reshape(shape)
        else:  # cv=: one row per split
            per = search.fold_score.reshape(ratios.size, Cs.size, -1)
            self.scores_ = np.moveaxis(per, -1, 0).copy()
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

    def _scores_of(self, search: _Search, ratios: np.ndarray, Cs: np.ndarray) -> np.ndarray:
        """``scores_`` of one model in the legacy layout: one "fold" (the leave-one-out
        estimate), or with ``cv=`` one row per split."""
        if search.fold_score is None:
            return self._shape_scores(search.score, ratios, Cs)
        per = search.fold_score.reshape(ratios.size, Cs.size, -1)  # (l1_ratio, C, split)
        if self._kind == "elasticnet":
            return np.transpose(per, (2, 1, 0)).copy()
        return per[0].T.copy()

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
