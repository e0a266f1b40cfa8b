"""Penalties in the paper's convention: the objective is a *sum* of losses plus
``lambda^T r(theta)``; the intercept is never penalized."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["L2", "Penalty"]


class Penalty:
    """Base class of the penalties understood by :func:`aloocv.fit` and :func:`aloocv.loo`."""

    def l2_vector(self, n_features: int) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


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
        lam = np.asarray(self.lam, dtype=np.float64)
        if lam.ndim > 1:
            raise ValueError(f"L2: lam must be a scalar or a 1-d vector, got shape {lam.shape}")
        if lam.ndim == 1 and lam.size == 0:
            raise ValueError("L2: lam vector is empty")
        if not np.all(np.isfinite(lam)):
            raise ValueError("L2: lam must be finite")
        if np.any(lam < 0):
            raise ValueError(f"L2: lam must be non-negative, got min {lam.min()!r}")
        object.__setattr__(self, "lam", float(lam) if lam.ndim == 0 else lam.copy())

    def l2_vector(self, n_features: int) -> np.ndarray:
        """The diagonal of the penalty's Hessian, one entry per feature."""
        lam = np.asarray(self.lam, dtype=np.float64)
        if lam.ndim == 0:
            return np.full(n_features, float(lam))
        if lam.shape[0] != n_features:
            raise ValueError(
                f"L2: lam vector has length {lam.shape[0]} but X has {n_features} features"
            )
        return np.ascontiguousarray(lam)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, L2) and np.array_equal(np.asarray(self.lam), np.asarray(other.lam))

    def __hash__(self) -> int:
        return hash(np.asarray(self.lam).tobytes())

    def __repr__(self) -> str:
        lam = self.lam
        if isinstance(lam, np.ndarray):
            return f"L2(lam=array(shape={lam.shape}))"
        return f"L2(lam={lam!r})"
