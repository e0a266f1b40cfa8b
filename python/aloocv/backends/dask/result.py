"""The result of leave-one-out on dask input, and what its certificate asks of the
backend (:func:`certify_refits`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..._diagnostics import certificate_design, certificate_from, check_certify_options
from .passes import _compute


@dataclass(frozen=True)
class CertifyRefits:
    """What :meth:`DaskLOOResult.certify` needs of the fitted problem.

    Attributes
    ----------
    insample : dask array of shape (n_samples,)
        The in-sample losses at the fit, chunked like X's rows (the certificate's error
        proxy is the leave-one-out loss minus these).
    refit_losses : callable
        ``refit_losses(rows) -> (exact losses of those samples, refits not at tol)``:
        the exact refits over the chunks without each sample, warm-started at the fit
        (the route's own: scalar, elastic net or multinomial).
    tol : float
        The fit tolerance the refits are solved to.
    """

    insample: Any
    refit_losses: Callable[[np.ndarray], tuple[np.ndarray, int]]
    tol: float


def certify_refits(refits: CertifyRefits, rows: np.ndarray) -> tuple[np.ndarray, int]:
    """The exact leave-one-out losses of the samples `rows` (refits over the chunks) and
    the number of those refits that did not reach the tolerance."""
    return refits.refit_losses(np.asarray(rows, dtype=np.int64))


@dataclass(repr=False)
class DaskLOOResult:
    """Leave-one-out results of dask input (:func:`aloocv.loo` with a dask X).

    Attributes
    ----------
    losses, predictions, leverages, downdate : dask arrays of shape (n_samples,)
        As in :class:`aloocv.LOOResult`, chunked like X's rows (None where the method
        has none). On a ``dask.distributed`` client they are persisted in the workers'
        memory; without one they are lazy (computing them reads X once more).
    mean, stderr : float
        Reduced over the chunks in the leverage pass.
    method : str
    fit : FitResult
    sample_weight : dask array or None
    gradient : ndarray or None
        As in :class:`aloocv.LOOResult`.
    unreliable : dask array of bool or None
        As in :class:`aloocv.LOOResult` (samples with ``d_i h_i > ALO_UNRELIABLE_DH``;
        None for ``"exact"``); their count is reduced in the leverage pass and warned
        about as in memory.
    """

    losses: Any
    predictions: Any
    leverages: Any
    method: str
    fit: Any
    mean: float
    stderr: float
    sample_weight: Any = None
    gradient: np.ndarray | None = None
    downdate: Any = None
    n_not_converged: int = field(default=0, repr=False)
    unreliable: Any = None
    # what certify() asks of the backend (None: a result not made by aloocv.loo, or exact)
    _refits: CertifyRefits | None = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        return (
            f"DaskLOOResult(method={self.method!r}, n={self.losses.shape[0]}, "
            f"mean={self.mean:.6g}, stderr={self.stderr:.3g})"
        )

    def certify(
        self,
        n_samples: int = 20,
        random_state: Any = 0,
        confidence: float = 0.95,
        n_worst: int | None = None,
    ):
        """:meth:`aloocv.LOOResult.certify` on dask input: the same design and estimator
        (:class:`aloocv.Certificate`), the exact refits run over the chunks.

        The error proxy, the approximate losses and the weights (n floats each) are
        gathered to the client to draw the samples; X is not. Each of the at most
        ``n_samples`` refits is a fit over the chunks warm-started at the full fit (the
        problem with the sample's weight set to zero; the elastic-net route with an L1
        term), a few passes over X each.
        """
        if self.method == "exact":
            raise ValueError("an exact result needs no certificate (method='exact')")
        if self._refits is None:
            raise ValueError(
                "this result does not carry its problem (it was not made by aloocv.loo); "
                "call aloocv.loo(...).certify()"
            )
        confidence = check_certify_options(n_samples, n_worst, confidence)
        insample = self._refits.insample
        losses, proxy, w = _compute((self.losses, self.losses - insample, self.sample_weight))
        losses, proxy = np.asarray(losses), np.asarray(proxy)
        w = None if w is None else np.asarray(w, dtype=np.float64)
        design = certificate_design(proxy, w, n_samples, n_worst, random_state)
        idx = design.refits
        exact, n_nc = certify_refits(self._refits, idx)
        tol = self._refits.tol
        if n_nc:
            warnings.warn(
                f"certificate: {n_nc} of {idx.size} exact refits did not reach tol={tol:g}",
                ConvergenceWarning,
                stacklevel=2,
            )
        return certificate_from(losses, exact, design, w, self.mean, confidence, self.method)
