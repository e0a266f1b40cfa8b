"""scikit-learn scorers evaluated on leave-one-out predictions.

A scorer (``sklearn.metrics.get_scorer(name)``, ``make_scorer(...)`` or any callable
``scorer(estimator, X, y)``) asks an estimator for ``predict``, ``predict_proba`` or
``decision_function`` on X. To score a candidate by its leave-one-out predictions, the
scorer is handed a *replay* estimator that answers those calls, for the training X, with
the leave-one-out responses of that candidate (the linear predictors through the loss's
inverse link, or the softmax). Every scorer kind works that way, including custom
callables, without touching scikit-learn's private scorer classes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, is_classifier
from sklearn.metrics import check_scoring

from ._validation import check_scoring_param

__all__: list[str] = []


#: The prediction methods that only a classifier answers.
CLASSIFIER_RESPONSES = ("predict_proba", "predict_log_proba", "decision_function")

#: scikit-learn's module of the metrics that compare class labels.
_CLASSIFICATION_METRICS = "sklearn.metrics._classification"

#: scikit-learn's scorer functions of class labels defined outside that module.
_CLASSIFICATION_SCORE_FUNCS = ("positive_likelihood_ratio", "negative_likelihood_ratio")


def get_scorer(estimator: Any, scoring: Any):
    """The scorer for ``scoring`` (None: no scorer), through scikit-learn's
    ``check_scoring``; a clear error for anything else, and for a scorer of classifiers
    on a regressor (before any fit)."""
    check_scoring_param(scoring)
    if scoring is None:
        return None
    scorer = check_scoring(estimator, scoring=scoring)
    if not is_classifier(estimator) and needs_classifier(scorer):
        raise classifier_scorer_error(scoring, type(estimator).__name__)
    return scorer


def needs_classifier(scorer: Any) -> bool:
    """Whether a scikit-learn scorer scores class probabilities or decision values, or
    compares class labels (``roc_auc``, ``neg_log_loss``, ``accuracy``, ``f1``, ...).
    A custom callable is not inspected (False): :func:`score` reports it when called."""
    method = getattr(scorer, "_response_method", None)
    methods = (method,) if isinstance(method, str) else tuple(method or ())
    if methods and all(m in CLASSIFIER_RESPONSES for m in methods):
        return True
    func = getattr(scorer, "_score_func", None)
    return getattr(func, "__module__", None) == _CLASSIFICATION_METRICS or (
        getattr(func, "__name__", None) in _CLASSIFICATION_SCORE_FUNCS
    )


def classifier_scorer_error(scoring: Any, estimator_name: str = "this estimator") -> ValueError:
    """The error of a classifier's scorer on a regressor."""
    what = f"scoring={scoring!r}" if isinstance(scoring, str) else "the scorer"
    return ValueError(
        f"{what} needs a classifier (it scores class labels, probabilities or decision "
        f"values); {estimator_name} is a regressor: use a regression scorer such as "
        "'neg_mean_squared_error' or 'r2'"
    )


class _Replay(BaseEstimator):
    """Answers prediction calls for the n training rows from stored leave-one-out values."""

    def __init__(self, n: int):
        self.n = n

    def fit(self, X, y=None):  # pragma: no cover - never refitted
        return self

    def _rows(self, X) -> None:
        shape = getattr(X, "shape", None)  # sparse matrices have no len()
        rows = shape[0] if shape is not None else len(X)
        if rows != self.n:
            raise ValueError(
                "a leave-one-out replay answers for the training rows only; the scorer "
                f"passed {rows} rows, not {self.n}"
            )


def _call(scorer, replay: _Replay, X, y, sample_weight) -> Any:
    if sample_weight is None:
        return scorer(replay, X, y)
    try:
        return scorer(replay, X, y, sample_weight=sample_weight)
    except TypeError as exc:
        if "sample_weight" not in str(exc):
            raise
        return scorer(replay, X, y)


class LOORegressor(RegressorMixin, _Replay):
    """``predict`` returns the leave-one-out mean responses."""

    def __init__(self, n: int, mean: np.ndarray):
        super().__init__(n)
        self.mean = mean

    def predict(self, X) -> np.ndarray:
        self._rows(X)
        return self.mean


class LOOClassifier(ClassifierMixin, _Replay):
    """``predict_proba``, ``decision_function`` and ``predict`` from the leave-one-out
    class probabilities and decision values."""

    def __init__(self, n: int, classes: np.ndarray, proba: np.ndarray, decision: np.ndarray):
        super().__init__(n)
        self.classes_ = classes
        self.proba = proba
        self.decision = decision

    def predict_proba(self, X) -> np.ndarray:
        self._rows(X)
        return self.proba

    def predict_log_proba(self, X) -> np.ndarray:
        return np.log(self.predict_proba(X))

    def decision_function(self, X) -> np.ndarray:
        self._rows(X)
        return self.decision

    def predict(self, X) -> np.ndarray:
        self._rows(X)
        return self.classes_[np.argmax(self.proba, axis=1)]


def score(scorer, replay: _Replay, X, y, sample_weight) -> float:
    """``scorer(replay, X, y)``, with ``sample_weight`` when given (scikit-learn's scorers
    take it; a custom callable that does not is called without). A scorer that asks a
    regressor's replay for class probabilities or decision values is a ValueError."""
    try:
        value = _call(scorer, replay, X, y, sample_weight)
    except AttributeError as exc:
        if isinstance(replay, LOORegressor) and any(m in str(exc) for m in CLASSIFIER_RESPONSES):
            raise classifier_scorer_error(scorer) from exc
        raise
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"the scorer returned a non-finite score ({value})")
    return value
