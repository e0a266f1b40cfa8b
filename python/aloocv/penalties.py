"""Penalties in the paper's convention: the objective is a *sum* of losses plus
``lambda^T r(theta)``; the intercept is never penalized (``docs/math/index.md``; the chain
rule to the parameters, ``chain`` and ``jacobian``: ``docs/math/hypergradient.md``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["L1", "L2", "ElasticNet", "Penalty"]


def _check_weights(name: str, value) -> float | np.ndarray:
    if type(value) in (float, np.float64) and math.isfinite(value) and value >= 0:
        return float(value)  # the common scalar, without the array round trip
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

    def with_params(self, values: np.ndarray, check: bool = True) -> Penalty:  # pragma: no cover
        """A penalty of the same structure with these parameter values (``check=False``:
        values known to be positive and finite, as in a tuning loop, skip validation)."""
        raise NotImplementedError

    def chain(self, grad_l1: np.ndarray, grad_l2: np.ndarray) -> np.ndarray:  # pragma: no cover
        """Derivative wrt :meth:`params` from per-feature derivatives wrt l1_j and l2_j."""
        raise NotImplementedError

    def jacobian(self, n_features: int) -> tuple[np.ndarray, np.ndarray]:
        """``(J1, J2)``, each (n_features, n_params): the derivatives of the per-feature
        l1 and l2 weights with respect to :meth:`params` (constant: every penalty is
        linear in its parameters). ``chain(g1, g2) == J1.T @ g1 + J2.T @ g2``."""
        m = self.params().size
        J1, J2 = np.zeros((n_features, m)), np.zeros((n_features, m))
        for k in range(m):
            e = np.zeros(m)
            e[k] = 1.0
            pen = self.with_params(e)
            J2[:, k] = pen.l2_vector(n_features)
            l1 = pen.l1_vector(n_features)
            if l1 is not None:
                J1[:, k] = l1
        return J1, J2


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
    lam : float or array_like
        A scalar, one lambda per feature (the paper's "ridge with diagonal
        regressors": penalty ``sum_j lam_j / 2 * theta_j^2``), or, with ``groups``, one
        per group. Must be finite and non-negative.
    groups : array_like of shape (n_features,), optional
        A group label per feature (any sortable labels): one lambda per group, shared by
        its features (banded ridge). ``lam`` is then a scalar (the same start for every
        group) or a vector with one entry per group, in the order of ``np.unique(groups)``.
        Tuning moves one parameter per group.

    Examples
    --------
    >>> import aloocv
    >>> aloocv.L2(0.5)
    L2(lam=0.5)
    >>> aloocv.L2([1.0, 10.0], groups=[0, 0, 1]).l2_vector(3)
    array([ 1.,  1., 10.])
    """

    lam: float | np.ndarray = 1.0
    groups: np.ndarray | None = None

    def __post_init__(self) -> None:
        lam = _check_weights("L2: lam", self.lam)
        if self.groups is not None:
            labels = np.asarray(self.groups)
            if labels.ndim != 1 or labels.size == 0:
                raise ValueError("L2: groups must be a non-empty 1-d sequence of labels")
            if labels.dtype.kind in "fc" and not np.all(np.isfinite(labels)):
                raise ValueError("L2: groups contains NaN or inf")
            if labels.dtype.kind not in "biufUSO":
                raise TypeError(f"L2: groups must hold labels, got dtype {labels.dtype}")
            uniq, inverse = np.unique(labels, return_inverse=True)
            n_groups = uniq.size
            if np.ndim(lam) == 0:
                lam = np.full(n_groups, float(lam))
            elif lam.shape[0] != n_groups:
                raise ValueError(
                    f"L2: lam has {lam.shape[0]} entries but groups has {n_groups} groups"
                )
            object.__setattr__(self, "groups", labels.copy())
            object.__setattr__(self, "_inverse", inverse.ravel())
        object.__setattr__(self, "lam", lam)

    def l2_vector(self, n_features: int) -> np.ndarray:
        """The diagonal of the penalty's Hessian, one entry per feature."""
        if self.groups is None:
            return _expand("L2: lam", self.lam, n_features)
        if self._inverse.size != n_features:
            raise ValueError(
                f"L2: groups has {self._inverse.size} labels but X has {n_features} features"
            )
        return np.ascontiguousarray(self.lam[self._inverse])

    def params(self) -> np.ndarray:
        return _flat(self.lam)

    def with_params(self, values: np.ndarray, check: bool = True) -> L2:
        lam, _ = _split(self.lam, self.lam, np.asarray(values, dtype=np.float64), 0)
        if check or self.groups is not None:
            return L2(lam, groups=self.groups)
        out = object.__new__(L2)
        object.__setattr__(out, "lam", lam)
        object.__setattr__(out, "groups", None)
        return out

    def chain(self, grad_l1: np.ndarray, grad_l2: np.ndarray) -> np.ndarray:
        if self.groups is not None:
            return np.bincount(self._inverse, weights=grad_l2, minlength=self.lam.size)
        return _reduce(grad_l2, self.lam)

    def jacobian(self, n_features: int) -> tuple[np.ndarray, np.ndarray]:
        if self.groups is not None:
            J2 = np.zeros((n_features, self.lam.size))
            J2[np.arange(n_features), self._inverse[:n_features]] = 1.0
        elif np.ndim(self.lam) == 0:
            J2 = np.ones((n_features, 1))
        else:
            J2 = np.eye(n_features)
        return np.zeros_like(J2), J2

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, L2)
            and _same(self.lam, other.lam)
            and (self.groups is None) == (other.groups is None)
            and (self.groups is None or _same(self.groups, other.groups))
        )

    def __hash__(self) -> int:
        return hash(np.asarray(self.lam).tobytes())

    def __repr__(self) -> str:
        if self.groups is not None:
            return f"L2(lam={_show(self.lam)}, groups=array(shape={self.groups.shape}))"
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

    def with_params(self, values: np.ndarray, check: bool = True) -> ElasticNet:
        values = np.asarray(values, dtype=np.float64)
        l1, k = _split(self.l1, self.l1, values, 0)
        l2, _ = _split(self.l2, self.l2, values, k)
        if check:
            return ElasticNet(l1, l2)
        out = object.__new__(ElasticNet)
        object.__setattr__(out, "l1", l1)
        object.__setattr__(out, "l2", l2)
        return out

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


class L1(ElasticNet):
    """Lasso penalty ``l1 * ||theta||_1``: ``ElasticNet(l1, 0)`` with ``l1`` as its only
    parameter (what tuning moves; the L2 weight stays 0).

    Examples
    --------
    >>> import aloocv
    >>> aloocv.L1(2.0) == aloocv.ElasticNet(2.0, 0.0), aloocv.L1(2.0).params()
    (True, array([2.]))
    """

    def __init__(self, l1: float | np.ndarray = 1.0):
        super().__init__(l1, 0.0)

    def params(self) -> np.ndarray:
        return _flat(self.l1)

    def with_params(self, values: np.ndarray, check: bool = True) -> L1:
        l1, _ = _split(self.l1, self.l1, np.asarray(values, dtype=np.float64), 0)
        if check:
            return L1(l1)
        out = object.__new__(L1)
        object.__setattr__(out, "l1", l1)
        object.__setattr__(out, "l2", 0.0)
        return out

    def chain(self, grad_l1: np.ndarray, grad_l2: np.ndarray) -> np.ndarray:
        return _reduce(grad_l1, self.l1)

    def __reduce__(self):
        return (L1, (self.l1,))

    def __repr__(self) -> str:
        return f"L1(l1={_show(self.l1)})"
