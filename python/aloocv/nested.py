"""Risk estimation with hyperparameter choice: nested cross-validation and the dev set.

The quantities and their estimators (the course notes in our sources):

=========================================  ===========================================
quantity to estimate                       estimator
=========================================  ===========================================
``l_D(A(S))`` (a given training set S)     test error on fresh data
``min_theta l_D(A_theta(S))``              development set: :func:`dev_set`
``E[l_D(A(S))]`` (over draws of S)         cross-validation: :func:`aloocv.kfold`,
                                           :func:`aloocv.loo`
``E[min_theta l_D(A_theta(S))]``           nested cross-validation: :func:`nested_cv`
=========================================  ===========================================

``min_theta`` of a CV estimate (what a tuned estimator reports as ``best_score_``) is a
cheap estimate of the last quantity that tends to underestimate it; nested CV runs the
whole tuning inside each outer training part, and ALOOCV makes that inner tuning cost
one fit per candidate instead of ``K'`` refits.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import clone, is_classifier

from ._validation import check_bool, check_labels, check_real_scalar, check_vector, check_X
from .api import fit, kfold
from .estimators import ALOElasticNetCV, ALOLogisticRegressionCV, ALORidgeCV
from .estimators._base import _ALOBase, _ALORegressor, _precheck
from .folds import cv_splits
from .losses import get_loss
from .penalties import L2, ElasticNet, Penalty
from .results import DevSetResult, NestedCVResult
from .tuning import tune

__all__ = ["DevSetResult", "NestedCVResult", "dev_set", "nested_cv"]


def _spec(spec: Any) -> tuple[str, list[Penalty], bool]:
    """(loss, candidate penalties, fit_intercept) from an estimator or a spec dict; at
    least one candidate."""
    loss, cands, intercept = _spec_parts(spec)
    if not cands:
        raise ValueError(
            "there are no candidates to choose from: the estimator's grid (alphas, Cs) or "
            "the spec's 'candidates' is empty"
        )
    return loss, cands, intercept


def _spec_parts(spec: Any) -> tuple[str, list[Penalty], bool]:
    """(loss, candidate penalties, fit_intercept) from an estimator or a spec dict."""
    if isinstance(spec, ALORidgeCV):
        intercept = check_bool(spec.fit_intercept, "fit_intercept")
        return "squared", [L2(a) for a in np.atleast_1d(spec.alphas)], intercept
    if isinstance(spec, ALOLogisticRegressionCV):
        Cs = spec.Cs
        if isinstance(Cs, (bool, np.bool_)):
            raise TypeError(f"Cs must be a positive integer or a grid of numbers, got {Cs!r}")
        Cs = np.logspace(-4, 4, int(Cs)) if isinstance(Cs, (int, np.integer)) else np.asarray(Cs)
        if spec.penalty == "l2":
            cands = [L2(1.0 / C) for C in Cs]
        else:
            ratios = [1.0] if spec.penalty == "l1" else list(spec.l1_ratios)
            cands = [ElasticNet(r / C, (1 - r) / C) for r in ratios for C in Cs]
        return "logistic", cands, check_bool(spec.fit_intercept, "fit_intercept")
    if isinstance(spec, ALOElasticNetCV) or _is_estimator(spec):
        raise ValueError(
            f"{type(spec).__name__} builds its candidate grid from the training data: "
            "use inner='alo' (each outer fold fits the estimator), or pass a spec dict "
            "{'loss': ..., 'candidates': [...]} for exact inner folds"
        )
    if isinstance(spec, dict):
        if "loss" not in spec or "candidates" not in spec:
            raise ValueError("a spec dict needs 'loss' and 'candidates'")
        cands = []
        for c in spec["candidates"]:
            if isinstance(c, Penalty):
                cands.append(c)
            elif np.ndim(c) == 0 and check_real_scalar(c, "candidate") > 0:
                cands.append(L2(float(c)))
            else:
                raise ValueError(f"candidate {c!r} must be a penalty or a positive L2 lambda")
        intercept = check_bool(spec.get("fit_intercept", True), "fit_intercept")
        return get_loss(spec["loss"]), cands, intercept
    raise TypeError(
        "estimator_or_spec must be an aloocv estimator (ALORidgeCV, ALOElasticNetCV, "
        "ALOLogisticRegressionCV, ALOPoissonRegressorCV, ...) or a dict "
        "{'loss': ..., 'candidates': [...]}"
    )


def _splits(
    n: int, outer: Any, random_state: Any, X: Any = None, y: Any = None, groups: Any = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    if hasattr(outer, "split") or (
        not isinstance(outer, (int, np.integer, str, bytes)) and hasattr(outer, "__iter__")
    ):  # a scikit-learn splitter or an iterable of (train, test)
        # the splitter sees the data (StratifiedKFold needs y, GroupKFold groups)
        return cv_splits(outer, X, y, groups, None, n)
    if groups is not None:
        raise ValueError(
            "groups= goes with a group splitter as outer_folds (e.g. GroupKFold(5) or "
            "LeaveOneGroupOut())"
        )
    if isinstance(outer, bool) or not isinstance(outer, (int, np.integer)):
        raise TypeError(f"outer_folds must be an integer or a splitter, got {outer!r}")
    if outer < 2:
        raise ValueError(f"outer_folds must be >= 2, got {outer}")
    if outer > n:
        raise ValueError(f"outer_folds={outer} is larger than the number of samples ({n})")
    rng = np.random.default_rng(random_state)
    labels = np.empty(n, dtype=int)
    labels[rng.permutation(n)] = np.arange(n) % outer
    return [(np.flatnonzero(labels != k), np.flatnonzero(labels == k)) for k in range(outer)]


def _mean_loss(loss: Any, y: np.ndarray, eta: np.ndarray) -> float:
    """Mean of the registered loss's per-sample values (raises on an unknown loss)."""
    return float(np.mean(get_loss(loss).value(y, eta)))


def _is_estimator(spec: Any) -> bool:
    return isinstance(spec, _ALOBase)


def _outer_error(est: Any, X: Any, y: np.ndarray) -> float:
    """Mean loss of a fitted estimator on a test part: the loss it fits (squared, the
    GLM deviances / 2, logistic), multinomial log loss for more than two classes."""
    if is_classifier(est):
        classes = est.classes_
        pos = np.clip(np.searchsorted(classes, y), 0, classes.size - 1)
        if np.any(classes[pos] != y):
            raise ValueError(
                "an outer test part holds a class that its training part lacks; use a "
                "stratified outer splitter (e.g. StratifiedKFold)"
            )
        if classes.size == 2:
            eta = np.asarray(est.decision_function(X), dtype=float)
            return _mean_loss("logistic", pos.astype(float), eta)
        proba = est.predict_proba(X)[np.arange(y.shape[0]), pos]
        return float(np.mean(-np.log(np.maximum(proba, np.finfo(float).tiny))))
    loss = est._loss() if hasattr(est, "_loss") else "squared"
    return _mean_loss(loss, y, _ALORegressor.predict(est, X))


def nested_cv(
    estimator_or_spec: Any,
    X: ArrayLike,
    y: ArrayLike,
    outer_folds: Any = 5,
    inner: str | int = "alo",
    random_state: int | None = 0,
    tol: float = 1e-8,
    n_jobs: int | None = None,
    groups: ArrayLike | None = None,
) -> NestedCVResult:
    """K-fold nested cross-validation (the notes' Algorithm 1).

    Parameters
    ----------
    estimator_or_spec : aloocv estimator or dict
        The family ``{A_theta}``: any of aloocv's estimators (``ALORidgeCV``,
        ``ALOElasticNetCV``, ``ALOLogisticRegressionCV`` binary or multiclass,
        ``ALOPoissonRegressorCV``, ``ALOGammaRegressorCV``, ``ALOTweedieRegressorCV``),
        or ``{"loss": "logistic", "candidates": [aloocv.L2(0.1), ...],
        "fit_intercept": True}`` (a bare positive number is ``L2`` of it). With
        ``inner="alo"`` an estimator is cloned and fitted on each outer training part
        (its own ALO tuning, with all its parameters, then its refit).
    X, y : array_like
    outer_folds : int, scikit-learn splitter or iterable of (train, test)
        Outer folds: an int is that many shuffled folds (seeded by ``random_state``);
        a splitter (``KFold(5)``, ``StratifiedKFold(5)``, ``GroupKFold(5)``,
        ``LeaveOneGroupOut()``, ...) is called as ``outer_folds.split(X, y, groups)``.
    inner : "alo", "exact" or int
        How each outer training part chooses theta: ``"alo"`` by ALOOCV (one fit per
        candidate, warm-started along the grid); ``"exact"`` (5 folds) or an int
        ``K'`` by exact inner ``K'``-fold CV on unshuffled contiguous folds, as
        ``GridSearchCV(cv=K')`` does, scored by the mean of the fold means (a spec
        dict, ``ALORidgeCV`` or a binary ``ALOLogisticRegressionCV``: the estimators
        whose candidate grid does not depend on the training data).
    random_state : int, optional
        Seeds the outer folds (when ``outer_folds`` is an int).
    tol, n_jobs
        Tolerance and threads of the fits of a spec dict or of exact inner folds; an
        estimator fitted with ``inner="alo"`` uses its own ``tol`` and ``n_jobs``.
    groups : array_like of shape (n_samples,), optional
        Group labels for a group splitter as ``outer_folds``.

    Returns
    -------
    NestedCVResult
        ``fold_errors`` are the mean losses of each outer test part: the loss the
        model fits (``(y - eta)^2 / 2`` for squared loss, the GLM loss, the logistic
        loss) or the multinomial log loss of a multiclass classifier.

    Examples
    --------
    >>> import numpy as np, aloocv
    >>> from sklearn.model_selection import GroupKFold
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((120, 4)); y = X[:, 0] + rng.standard_normal(120)
    >>> g = np.repeat(np.arange(12), 10)
    >>> res = aloocv.nested_cv(aloocv.ALOElasticNetCV(l1_ratio=0.5), X, y,
    ...                        outer_folds=GroupKFold(4), groups=g)
    >>> res.fold_errors.shape
    (4,)
    """
    if inner == "exact":
        inner = 5
    if inner != "alo":
        if isinstance(inner, bool) or not isinstance(inner, (int, np.integer)) or inner < 2:
            raise ValueError(f"inner must be 'alo', 'exact' or an integer >= 2, got {inner!r}")
    if _is_estimator(estimator_or_spec) and inner == "alo":
        return _nested_estimator(estimator_or_spec, X, y, outer_folds, random_state, groups)
    loss, cands, intercept = _spec(estimator_or_spec)
    X = check_X(X)
    y = check_vector(y, X.shape[0], "y")
    n = X.shape[0]
    splits = _splits(n, outer_folds, random_state, X, y, groups)
    errors, chosen, scores = [], [], []
    for train, test in splits:
        Xtr, ytr = X[train], y[train]
        if inner == "alo":
            s, best, model = _inner_alo(Xtr, ytr, loss, cands, intercept, tol, n_jobs)
        else:
            s, best, model = _inner_exact(Xtr, ytr, int(inner), loss, cands, intercept, tol, n_jobs)
        errors.append(_mean_loss(loss, y[test], model.decision_function(X[test])))
        chosen.append(cands[best])
        scores.append(s)
    errors = np.asarray(errors)
    return NestedCVResult(
        estimate=float(errors.mean()),
        stderr=float(errors.std(ddof=1) / np.sqrt(len(errors))) if len(errors) > 1 else None,
        fold_errors=errors,
        chosen=chosen,
        inner_scores=np.asarray(scores),
        candidates=cands,
        inner=str(inner),
    )


def _inner_alo(X, y, loss, cands, intercept, tol, n_jobs) -> tuple[np.ndarray, int, Any]:
    """(ALOOCV of every candidate in their order, the chosen index, its fit) on one outer
    training part."""
    res = tune(
        X,
        y,
        loss=loss,
        penalty=cands[0],
        method="grid",
        grid=cands,
        fit_intercept=intercept,
        fit_tol=tol,
        n_jobs=n_jobs,
    )
    # scores in the candidates' order (the grid runs most regularized first)
    hp = res.history["params"]
    order = [
        int(np.flatnonzero(np.all(np.isclose(hp, c.params(), rtol=1e-12, atol=0), 1))[0])
        for c in cands
    ]
    s = res.history["acv"][order]
    # tune selected the same minimum: its final fit is the refit on the training part
    return s, int(np.argmin(s)), res.fit


def _inner_exact(X, y, k, loss, cands, intercept, tol, n_jobs) -> tuple[np.ndarray, int, Any]:
    """(exact k-fold CV of every candidate on contiguous folds, the chosen index, its refit)
    on one outer training part."""
    n = X.shape[0]
    if k > n:
        raise ValueError(f"inner folds ({k}) larger than the outer training part ({n})")
    labels = np.repeat(np.arange(k), _fold_sizes(n, k))
    s = np.array(
        [
            kfold(
                X,
                y,
                loss=loss,
                penalty=c,
                method="exact",
                folds=labels,
                fit_intercept=intercept,
                tol=tol,
                n_jobs=n_jobs,
            ).fold_means.mean()
            for c in cands
        ]
    )
    best = int(np.argmin(s))
    model = fit(
        X, y, loss=loss, penalty=cands[best], fit_intercept=intercept, tol=tol, n_jobs=n_jobs
    )
    return s, best, model


def _nested_estimator(est, X, y, outer_folds, random_state, groups) -> NestedCVResult:
    """Nested CV of an aloocv estimator: clone, fit (its own ALO tuning and refit) on each
    outer training part, score on its test part."""
    _precheck(X)
    X = check_X(X)
    n = X.shape[0]
    y = check_labels(y, n) if is_classifier(est) else check_vector(y, n, "y")
    splits = _splits(n, outer_folds, random_state, X, y, groups)
    errors, chosen, scores, fitted = [], [], [], []
    for train, test in splits:
        model = clone(est).fit(X[train], y[train])
        errors.append(_outer_error(model, X[test], y[test]))
        tr = getattr(model, "tune_result_", None)
        if isinstance(tr, list):
            chosen.append([r.penalty for r in tr])
        else:
            chosen.append(getattr(tr, "penalty", None))
        scores.append(float(model.best_score_))
        fitted.append(model)
    errors = np.asarray(errors)
    return NestedCVResult(
        estimate=float(errors.mean()),
        stderr=float(errors.std(ddof=1) / np.sqrt(len(errors))) if len(errors) > 1 else None,
        fold_errors=errors,
        chosen=chosen,
        inner_scores=np.asarray(scores),
        candidates=[],
        inner="alo",
        estimators=fitted,
    )


def _fold_sizes(n: int, k: int) -> np.ndarray:
    # scikit-learn KFold: the first n % k folds have one extra sample
    sizes = np.full(k, n // k)
    sizes[: n % k] += 1
    return sizes


def dev_set(
    estimator_or_spec: Any,
    X: ArrayLike,
    y: ArrayLike,
    dev_fraction: float = 0.2,
    random_state: int | None = 0,
    tol: float = 1e-8,
    n_jobs: int | None = None,
) -> DevSetResult:
    """Tune on a train/dev split (the notes' development-set estimator).

    Every candidate is fitted on the training part and scored on the dev part; the
    best dev loss estimates ``min_theta l_D(A_theta(S_train))``. The chosen candidate
    is refitted on all the data (``fit``), as is done in practice.
    """
    loss, cands, intercept = _spec(estimator_or_spec)
    X = check_X(X)
    y = check_vector(y, X.shape[0], "y")
    n = X.shape[0]
    if not 0 < check_real_scalar(dev_fraction, "dev_fraction") < 1:
        raise ValueError(f"dev_fraction must be in (0, 1), got {dev_fraction!r}")
    n_dev = round(dev_fraction * n)
    if n_dev < 1 or n - n_dev < 2:
        raise ValueError(f"dev_fraction={dev_fraction} leaves an empty part of {n} samples")
    perm = np.random.default_rng(random_state).permutation(n)
    dev, train = perm[:n_dev], perm[n_dev:]
    scores = []
    prev = None
    for c in cands:
        m = fit(
            X[train],
            y[train],
            loss=loss,
            penalty=c,
            fit_intercept=intercept,
            tol=tol,
            n_jobs=n_jobs,
            warm_start=prev,
        )
        prev = m
        scores.append(_mean_loss(loss, y[dev], m.decision_function(X[dev])))
    scores = np.asarray(scores)
    best = int(np.argmin(scores))
    final = fit(
        X, y, loss=loss, penalty=cands[best], fit_intercept=intercept, tol=tol, n_jobs=n_jobs
    )
    return DevSetResult(
        estimate=float(scores[best]), chosen=cands[best], scores=scores, candidates=cands, fit=final
    )
