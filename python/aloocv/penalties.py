"""Penalties in the paper's convention: the objective is a *sum* of losses plus
``lambda^T r(theta)``; the intercept is never penalized."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["L1", "L2", "ElasticNet", "Penalty"]


def _check_weights(name: str, value) -> float | np.ndarray:
    raw = np.asarray(value)
    if raw.dtype.kind == "c":
        raise TypeError(f"{name} must be real, got complex dtype {raw.dtype}")
    if raw.dtype.kind not in "iuf":  # strings, bools, objects: no silent conversion
        raise TypeError(f"{name} must be a real number or vector, got {value!r}")
    lam = raw.astype(np.float64)
    if lam.ndim > 1:
        raise ValueError(f"{name} must be a scalar or a 1-d vector, got shape {lam.shape}")
    if lam.ndim == 1 and lam.size == 0:
        raise ValueError(f"{name} vector is empty")
    if not np.all(np.isfinite(lam)):
        raise ValueError(f"{name} must be finite")
    if np.any(lam < 0):
        raise ValueError(f"{name} must be non-negative, got min {lam.min()!r}")
    return float(lam) if lam.ndim == 0 else lam.copy()


def _expand(name: str, value, n_features: int) -> np.ndarray:
    lam = np.asarray(value, dtype=np.float64)
    if lam.ndim == 0:
        return np.full(n_features, float(lam))
    if lam.shape[0] != n_features:
        raise ValueError(f"{name} vector has length {lam.shape[0]} but X has {n_features} features")
    return np.ascontiguousarray(lam)


def _same(a, b) -> bool:
    return np.array_equal(np.asarray(a), np.asarray(b))


def _show(v) -> str:
    return f"array(shape={v.shape})" if isinstance(v, np.ndarray) else repr(v)


class Penalty:
    """Base class of the penalties understood by :func:`aloocv.fit` and :func:`aloocv.loo`."""

    def l2_vector(self, n_features: int) -> np.ndarray:  # pragma: no cover - abstract
        """Per-feature weights of the ``1/2 theta_j^2`` terms."""
        raise NotImplementedError

    def l1_vector(self, n_features: int) -> np.ndarray | None:
        """Per-feature weights of the ``|theta_j|`` terms (None: no L1 term)."""
        return None

    # The free regularization parameters as one flat vector (what tuning moves).
    def params(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def with_params(self, values: np.ndarray) -> Penalty:  # pragma: no cover - abstract
        """A penalty of the same structure with these parameter values."""
        raise NotImplementedError

    def chain(self, grad_l1: np.ndarray, grad_l2: np.ndarray) -> np.ndarray:  # pragma: no cover
        """Derivative wrt :meth:`params` from per-feature derivatives wrt l1_j and l2_j."""
        raise NotImplementedError


def _flat(v) -> np.ndarray:
    return np.atleast_1d(np.asarray(v, dtype=np.float64)).copy()


def _split(v, like, values: np.ndarray, start: int):
    k = 1 if np.ndim(like) == 0 else len(like)
    part = values[start : start + k]
    return (float(part[0]) if np.ndim(like) == 0 else part.copy()), start + k


def _reduce(g: np.ndarray, like) -> np.ndarray:
    return np.array([g.sum()]) if np.ndim(like) == 0 else g


@dataclass(frozen=True, eq=False)
class L2(Penalty):
    """Ridge penalty ``lam / 2 * ||theta||^2``.

    Parameters
    ----------
    lam : float or array_like of shape (n_features,)
        A scalar, or one lambda per feature (the paper's "ridge with diagonal
        regressors": penalty ``sum_j lam_j / 2 * theta_j^2``). Must be finite and
        non-negative.

    Examples
    --------
    >>> import aloocv
    >>> aloocv.L2(0.5)
    L2(lam=0.5)
    """

    lam: float | np.ndarray = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "lam", _check_weights("L2: lam", self.lam))

    def l2_vector(self, n_features: int) -> np.ndarray:
        """The diagonal of the penalty's Hessian, one entry per feature."""
        return _expand("L2: lam", self.lam, n_features)

    def params(self) -> np.ndarray:
        return _flat(self.lam)

    def with_params(self, values: np.ndarray) -> L2:
        lam, _ = _split(self.lam, self.lam, np.asarray(values, dtype=np.float64), 0)
        return L2(lam)

    def chain(self, grad_l1: np.ndarray, grad_l2: np.ndarray) -> np.ndarray:
        return _reduce(grad_l2, self.lam)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, L2) and _same(self.lam, other.lam)

    def __hash__(self) -> int:
        return hash(np.asarray(self.lam).tobytes())

    def __repr__(self) -> str:
        return f"L2(lam={_show(self.lam)})"


@dataclass(frozen=True, eq=False)
class ElasticNet(Penalty):
    """Elastic-net penalty ``l1 * ||theta||_1 + l2 / 2 * ||theta||^2``.

    Parameters
    ----------
    l1, l2 : float or array_like of shape (n_features,)
        Non-negative weights, scalar or per feature. ``ElasticNet(0, l2)`` is
        ``L2(l2)``; ``aloocv.L1(l1)`` is ``ElasticNet(l1, 0)``.

    Notes
    -----
    scikit-learn's ``ElasticNet(alpha, l1_ratio)`` minimizes the *mean* squared
    loss; the same problem here is ``ElasticNet(l1=n*alpha*l1_ratio,
    l2=n*alpha*(1-l1_ratio))`` with ``loss="squared"``.
    ``LogisticRegression(penalty="elasticnet", C=C, l1_ratio=r)`` is
    ``ElasticNet(l1=r/C, l2=(1-r)/C)`` with ``loss="logistic"``.

    Leave-one-out estimates restrict every formula to the active set
    ``{j : theta_j != 0}`` plus the intercept (the paper, end of Section 3).
    """

    l1: float | np.ndarray = 1.0
    l2: float | np.ndarray = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "l1", _check_weights("ElasticNet: l1", self.l1))
        object.__setattr__(self, "l2", _check_weights("ElasticNet: l2", self.l2))

    def l2_vector(self, n_features: int) -> np.ndarray:
        return _expand("ElasticNet: l2", self.l2, n_features)

    def l1_vector(self, n_features: int) -> np.ndarray | None:
        v = _expand("ElasticNet: l1", self.l1, n_features)
        return v if np.any(v > 0) else None

    def params(self) -> np.ndarray:
        return np.concatenate([_flat(self.l1), _flat(self.l2)])

    def with_params(self, values: np.ndarray) -> ElasticNet:
        values = np.asarray(values, dtype=np.float64)
        l1, k = _split(self.l1, self.l1, values, 0)
        l2, _ = _split(self.l2, self.l2, values, k)
        return ElasticNet(l1, l2)

    def chain(self, grad_l1: np.ndarray, grad_l2: np.ndarray) -> np.ndarray:
        return np.concatenate([_reduce(grad_l1, self.l1), _reduce(grad_l2, self.l2)])

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ElasticNet) and _same(self.l1, other.l1) and _same(self.l2, other.l2)
        )

    def __hash__(self) -> int:
        return hash((np.asarray(self.l1).tobytes(), np.asarray(self.l2).tobytes()))

    def __repr__(self) -> str:
        return f"ElasticNet(l1={_show(self.l1)}, l2={_show(self.l2)})"


def L1(l1: float | np.ndarray = 1.0) -> ElasticNet:
    """Lasso penalty ``l1 * ||theta||_1``: ``ElasticNet(l1, 0)``."""
    return ElasticNet(l1, 0.0)
