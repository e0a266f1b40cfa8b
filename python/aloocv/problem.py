"""One :class:`Problem`: the data, the loss, the penalty and the solve options, validated once.

Every public verb (:func:`aloocv.fit`, :func:`aloocv.loo`, :func:`aloocv.kfold`,
:func:`aloocv.tune`) builds a ``Problem`` from its arguments with :meth:`Problem.build`,
then hands it to the route table (:mod:`aloocv.backends.route`), which picks the backend
and the route once. Nothing below the verbs takes a relay of positional arguments or
validates an input again.

What a problem holds depends on where its data live:

- in memory (``backend == "memory"``): ``X`` a checked numpy array (float64 or float32, C,
  Fortran or strided, used in place) or a canonical CSR matrix; ``y`` a float64 vector
  (class labels as float64 for the multinomial loss, an ``(n, n_targets)`` array for
  several squared-loss targets); weights and offset float64 vectors or None;
- on dask (``backend == "dask"``): ``X`` a float64 or float32 dask array chunked by rows only,
  ``y``, weights and offset dask vectors with X's row chunks (or None); their values are
  checked chunk by chunk in the backend's first pass, never gathered.

The multinomial loss is :class:`aloocv.losses.Multinomial`: a :class:`~aloocv.losses.Loss`
with ``n_outputs == K`` (the number of classes; on dask input learned in the first pass,
so ``K`` may be None there until then).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._validation import (
    as_penalty,
    check_bool,
    check_class_labels,
    check_loss,
    check_memory_limit,
    check_multinomial_penalty,
    check_offset,
    check_options,
    check_penalty,
    check_sample_weight,
    check_targets,
    check_vector,
    check_X,
    is_dask_collection,
    is_multi_target,
    n_threads,
)
from ._validation_dask import as_dask_design, as_dask_vector, require_dask
from .losses import Loss, Multinomial
from .penalties import Penalty

__all__ = ["Problem", "SolveOptions"]


@dataclass(frozen=True)
class SolveOptions:
    """How every fit of a problem is solved.

    Attributes
    ----------
    tol : float
        Newton stops when ``max|gradient| / sum(sample_weight) <= tol``.
    max_iter : int
        Newton iterations at most.
    n_threads : int
        OpenMP threads of each core call, converted once from ``n_jobs`` (in memory:
        None means OpenMP's default under threadpoolctl's limits; on dask: the threads of
        each chunk task, None meaning 1).
    memory_limit : float or None
        Bytes the call may use for its large matrices (``memory_limit=``, checked); None:
        the available memory (:mod:`aloocv._memory`).
    """

    tol: float = 1e-8
    max_iter: int = 100
    n_threads: int = 1
    memory_limit: float | None = None

    @classmethod
    def build(
        cls,
        tol: Any,
        max_iter: Any,
        n_jobs: Any,
        backend: str = "memory",
        memory_limit: Any = None,
    ) -> SolveOptions:
        """Checked options (TypeError/ValueError naming a bad one)."""
        tol, max_iter = check_options(tol, max_iter)
        limit = check_memory_limit(memory_limit)
        if backend == "dask" and n_jobs is None:
            return cls(tol, max_iter, 1, limit)
        return cls(tol, max_iter, n_threads(n_jobs), limit)


@dataclass(frozen=True, eq=False)
class Problem:
    """A validated penalized-GLM problem ``min sum_i w_i l(y_i, eta_i) + penalty``.

    Build one with :meth:`build`; the fields are then trusted by every backend.

    Attributes
    ----------
    X : ndarray, scipy CSR matrix or dask array
        The design (see the module docstring for what each backend holds).
    y : ndarray or dask array
        Responses; class labels 0..K-1 as float64 for :class:`~aloocv.losses.Multinomial`;
        ``(n, n_targets)`` for several squared-loss targets.
    loss : Loss
        The registered loss object.
    penalty : Penalty
        The penalty as the user gave it (its parameters are what tuning moves).
    l2 : ndarray of shape (n_features,)
        Per-feature L2 weights of ``penalty``.
    l1 : ndarray of shape (n_features,) or None
        Per-feature L1 weights; None when the penalty has no L1 term (or an all-zero one).
    sample_weight : ndarray, dask array or None
    offset : ndarray, dask array or None
        Known part of the linear predictor (scalar losses only).
    fit_intercept : bool
    options : SolveOptions
    backend : {"memory", "dask"}
    """

    X: Any
    y: Any
    loss: Loss
    penalty: Penalty
    l2: np.ndarray
    l1: np.ndarray | None
    sample_weight: Any
    offset: Any
    fit_intercept: bool
    options: SolveOptions
    backend: str = "memory"

    # ------------------------------------------------------------------ shape and kind
    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def n_coef(self) -> int:
        """Coefficients per output: ``n_features + fit_intercept``."""
        return self.n_features + int(self.fit_intercept)

    @property
    def is_dask(self) -> bool:
        return self.backend == "dask"

    @property
    def is_multinomial(self) -> bool:
        return isinstance(self.loss, Multinomial)

    @property
    def is_multi_target(self) -> bool:
        """Several squared-loss targets sharing one decomposition of X."""
        return not self.is_dask and np.ndim(self.y) == 2

    # ------------------------------------------------------------------ derived problems
    def replace(self, **changes: Any) -> Problem:
        """A copy with some fields changed (no validation: the caller keeps them valid)."""
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(
        cls,
        X: Any,
        y: Any,
        *,
        loss: Any = "logistic",
        penalty: Any = None,
        fit_intercept: Any = True,
        sample_weight: Any = None,
        offset: Any = None,
        tol: Any = 1e-8,
        max_iter: Any = 100,
        n_jobs: Any = None,
        multi_target: bool = True,
        memory_limit: Any = None,
    ) -> Problem:
        """Validate the arguments of a public verb once.

        ``multi_target=False`` refuses a 2-d y (verbs that fit one target);
        ``memory_limit``: the budget of the route's large matrices (bytes, a string such as
        ``"2GB"``, or None for the available memory; :mod:`aloocv._memory`).

        Raises
        ------
        TypeError, ValueError
            Naming the first bad argument (the one validation layer,
            :mod:`aloocv._validation`).
        """
        backend = "dask" if is_dask_collection(X) else "memory"
        fit_intercept = check_bool(fit_intercept, "fit_intercept")
        if backend == "dask":
            loss, penalty = check_loss(loss), as_penalty(penalty)
            options = SolveOptions.build(tol, max_iter, n_jobs, backend, memory_limit)
            _check_no_offset(loss, offset)
            return cls._build_dask(
                X, y, loss, penalty, fit_intercept, sample_weight, offset, options
            )
        # the order of the checks is the message a user sees first: X, y, then the rest
        X = check_X(X)
        n, p = X.shape
        if multi_target and is_multi_target(y):
            Y = check_targets(y, n, loss)
            w = check_sample_weight(sample_weight, n)
            loss, penalty = check_loss(loss), as_penalty(penalty)
            l2, l1 = _penalty_vectors(penalty, p)
            options = SolveOptions.build(tol, max_iter, n_jobs, memory_limit=memory_limit)
            return cls(
                X, Y, loss, penalty, l2, l1, w, check_offset(offset, n), fit_intercept, options
            )
        loss = check_loss(loss)
        if isinstance(loss, Multinomial):
            w = check_sample_weight(sample_weight, n)
            labels, K = check_class_labels(y, n, w)
            penalty = as_penalty(penalty)
            l2 = _contiguous(check_multinomial_penalty(penalty, p))
            options = SolveOptions.build(tol, max_iter, n_jobs, memory_limit=memory_limit)
            _check_no_offset(loss, offset)
            return cls(
                X, labels, Multinomial(K), penalty, l2, None, w, None, fit_intercept, options
            )
        yv = check_vector(y, n, "y")
        penalty = as_penalty(penalty)
        l2, l1 = _penalty_vectors(penalty, p)
        w = check_sample_weight(sample_weight, n)
        options = SolveOptions.build(tol, max_iter, n_jobs, memory_limit=memory_limit)
        return cls(X, yv, loss, penalty, l2, l1, w, check_offset(offset, n), fit_intercept, options)

    @classmethod
    def _build_dask(cls, X, y, loss, penalty, fit_intercept, sample_weight, offset, options):
        require_dask()
        X = as_dask_design(X)
        p = int(X.shape[1])
        w = None if sample_weight is None else as_dask_vector(sample_weight, X, "sample_weight")
        off = None if offset is None else as_dask_vector(offset, X, "offset")
        if isinstance(loss, Multinomial):
            labels = as_dask_vector(y, X, "y", labels=True)
            l2 = _contiguous(check_multinomial_penalty(penalty, p))
            return cls(X, labels, loss, penalty, l2, None, w, None, fit_intercept, options, "dask")
        l2, l1 = _penalty_vectors(penalty, p)
        yv = as_dask_vector(y, X, "y")
        return cls(X, yv, loss, penalty, l2, l1, w, off, fit_intercept, options, "dask")


def _check_no_offset(loss: Loss, offset: Any) -> None:
    if isinstance(loss, Multinomial) and offset is not None:  # the softmax has no offset
        raise ValueError("offset= is not available for the multinomial loss")


def _contiguous(v: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(v, dtype=np.float64)


def _penalty_vectors(penalty: Penalty, p: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Per-feature (l2, l1) weights; l1 None when absent or all zero."""
    l2, l1 = check_penalty(penalty, p)
    if l1 is not None and not np.any(l1 > 0):
        l1 = None
    return _contiguous(l2), None if l1 is None else _contiguous(l1)
