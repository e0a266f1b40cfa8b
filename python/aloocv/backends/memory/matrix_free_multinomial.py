"""The multinomial loss on the matrix-free route in memory (``docs/math/matrix_free.md``,
"The multinomial loss"): a Newton-CG fit from Hessian-vector products and ALO from
randomized K x K leverage blocks, with no K p1 x K p1 (or p1 x p1) matrix anywhere.

The model and its coefficients are the primal multinomial route's
(:mod:`aloocv.backends.memory.multinomial`: scikit-learn's multinomial
``LogisticRegression``, intercepts centered). The blocks ``K_i = X~_i H^{-1} X~_i^T`` are
block Hutchinson estimates, ``E[(A z)_i z_i^T] = A_ii`` for Rademacher probes ``z`` in
``R^{n K}`` and ``A = X~ H^{-1} X~^T`` (the core's ``multinomial_random_blocks``), plain
and with the blocks of the preconditioner's ``X~ M^{-1} X~^T`` as a control variate; the
probes are doubled, the estimator chosen and the delete-one-group jackknife applied as on
the scalar matrix-free route (:func:`aloocv.backends.memory.matrix_free.probe_until`).
The hypergradient of this route is not implemented: a search on it is a grid
(``search="grid"``; the route raises for the others), and ``method="exact"`` or
``return_gradient=True`` take the primal route (``solver="primal"``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import _blas, _core
from ..._diagnostics import (
    ALO_UNRELIABLE_DH,
    check_finite_result,
    warn_loo_fit,
    warn_not_converged,
    warn_unreliable,
)
from ..._memory import MULTINOMIAL_MF_GROUPS
from ..._validation import check_loo_samples, core_design
from ...losses import cross_entropy, pack_beta, softmax
from ...problem import Problem
from ...results import (
    FitResult,
    LOOResult,
    MultinomialFitResult,
    StateOutput,
    multinomial_fit_result,
)
from ...results.trust import multinomial_indicator, unreliable_from
from ..common import LOORequest
from . import matrix_free as mf
from . import multinomial as primal

__all__ = [
    "BlockProbes",
    "MultinomialMatrixFreeTuneState",
    "estimate",
    "fit",
    "loo",
    "row_blocks",
    "tune_state",
]

#: The jackknife's groups at most: the core returns two (n, G, K (K + 1) / 2) arrays of
#: group estimates (plain and with the control variate), 2 x 8 x 2e4 x 55 doubles = 141 MB
#: at K = 10, n = 2e4; more groups of fewer probes would multiply that (the memory check
#: counts them: aloocv._memory.MULTINOMIAL_MF_GROUPS).
MAX_GROUPS = MULTINOMIAL_MF_GROUPS
#: Probes of the first round (the scalar route's N_PROBES is 8): a block estimate from few
#: probes is heavy-tailed (a noisy block can put an eigenvalue of ``D_i K_i`` next to 1,
#: and ALO's step then grows up to 1 / (1 - DH_CLIP)). Measured on 300 x 40 dense data
#: (K = 4, ALO mean 1.04), the jackknife's error of the mean against exact blocks averaged
#: over six probe seeds: -9.8 (plain) and -0.59 (control) at 16 probes, -0.005 and -0.002
#: at 128; with 8 probes first, one seed in eight stopped there 2.3 off.
N_PROBES = 16
#: Probes at most without ``rtol=`` (the scalar route's DEFAULT_MAX_PROBES is 128). Where
#: many samples have eigenvalues of ``D_i K_i`` about 0.5 (p near n, a weak penalty) the
#: jackknife's first-order correction falls short at 128 probes: measured on 400 x 300
#: sparse data (K = 4, C = 0.316, ALO mean 1.2246), the error of the mean -0.037 at 128
#: probes (2.8 of its standard errors), -0.006 at 512 (0.7), -0.004 at 2048 (1.1); the
#: doubling rule asks for them there (the randomization's standard error is above
#: STDERR_SHARE of the sampling one) and stops at 16 or 32 probes where the blocks are
#: small. No sample is given its exact block on account of its own jackknife spread: that
#: choice follows the probes' noise, and on the data above (twelve seeds) it moved the
#: mean error from -0.76 to -1.33 standard errors.
DEFAULT_MAX_PROBES = 512
#: Relative residual of the solves of exact blocks (the self-check's samples). Tighter than
#: the scalar route's EXACT_CG_RTOL: an off-diagonal entry ``b_a^T S_b`` of a block is not
#: a quadratic form, so it errs by the residual itself, not by its square (at 1e-5 the
#: blocks were 5.5e-6 relative off, at 1e-6 within 1e-7 absolute).
EXACT_BLOCK_CG_RTOL = 1e-6


def _K(pb: Problem) -> int:
    return pb.loss.n_classes


def _common(pb: Problem) -> tuple:
    return (core_design(pb.X), pb.y, pb.sample_weight, _K(pb), pb.l2)


# ----------------------------------------------------------------------------- fit
def _cg_fit(
    pb: Problem, beta0: np.ndarray | None, sample_weight: Any = None, max_iter: int | None = None
) -> Any:
    o = pb.options
    w = pb.sample_weight if sample_weight is None else sample_weight
    with _blas.single_threaded_blas():
        return _core.multinomial_cg_fit(
            core_design(pb.X),
            pb.y,
            w,
            _K(pb),
            pb.l2,
            fit_intercept=pb.fit_intercept,
            tol=o.tol,
            max_iter=o.max_iter if max_iter is None else max_iter,
            n_threads=o.n_threads,
            beta0=beta0,
            max_cg=mf.MAX_CG_NEWTON,
        )


def _warm_beta(pb: Problem, warm_start: FitResult | None) -> np.ndarray | None:
    if warm_start is None:
        return None
    if not isinstance(warm_start, MultinomialFitResult):
        raise TypeError("warm_start must be a multinomial fit")
    return pack_beta(
        warm_start.coef_, warm_start.intercept_, _K(pb), pb.n_features, pb.fit_intercept
    )


def fit(pb: Problem, warm_start: FitResult | None = None) -> MultinomialFitResult:
    """Multinomial fit by Newton-CG (``aloocv.fit(..., loss="multinomial",
    solver="matrix_free")``): the primal route's model, objective and stopping test."""
    out = _cg_fit(pb, _warm_beta(pb, warm_start))
    check_finite_result("fit", coef=out.coef, intercept=out.intercept)
    res = multinomial_fit_result(out, pb.penalty, pb.fit_intercept)
    warn_not_converged(res, pb.options.tol, pb.options.max_iter)
    return res


# ----------------------------------------------------------------------------- blocks
@dataclass(frozen=True)
class BlockProbes:
    """One call of the core's block probes (the attributes
    :func:`aloocv.backends.memory.matrix_free.stacked` reads): the (n, G, T) group
    estimates ``plain`` and ``control`` of the packed blocks (T = K (K + 1) / 2), the
    control variate's blocks ``diag0`` (n, T), the scores ``eta`` (n, K) and the solves'
    counts."""

    plain: np.ndarray
    control: np.ndarray
    diag0: np.ndarray
    eta: np.ndarray
    cg_iterations: int
    passes: int
    converged: bool
    dual: bool = False
    exact_rows: int = 0


def _blocks(pb: Problem, beta: np.ndarray, n_probes: int, per: int, first_probe: int) -> mf.Probed:
    with _blas.single_threaded_blas():
        r = _core.multinomial_random_blocks(
            *_common(pb),
            fit_intercept=pb.fit_intercept,
            beta=beta,
            n_probes=n_probes,
            n_groups=n_probes // per,
            seed=mf.PROBE_SEED,
            cg_rtol=mf.CG_RTOL,
            max_cg=mf.MAX_CG,
            n_threads=pb.options.n_threads,
            first_probe=first_probe,
        )
    plain, control, diag0, eta, iters, passes, converged, _ = r
    return mf.Probed(BlockProbes(plain, control, diag0, eta, iters, passes, converged), per)


def _unpacking(K: int) -> np.ndarray:
    """The (K, K) indices of a packed upper triangle (row by row) for each entry."""
    a, b = np.triu_indices(K)
    idx = np.empty((K, K), dtype=np.intp)
    idx[a, b] = np.arange(a.size)
    idx[b, a] = idx[a, b]
    return idx


@dataclass(frozen=True)
class _Curvature:
    """The softmax at the fit: scores, ``g_i = w_i (mu_i - e_{y_i})`` and a square root
    ``L_i`` of ``D_i = w_i (diag(mu_i) - mu_i mu_i^T) = L_i L_i^T``."""

    eta: np.ndarray
    g: np.ndarray
    L: np.ndarray

    @classmethod
    def at(cls, pb: Problem, eta: np.ndarray) -> _Curvature:
        n, K = eta.shape
        mu = softmax(eta)
        w = np.ones(n) if pb.sample_weight is None else pb.sample_weight
        g = mu.copy()
        g[np.arange(n), pb.y.astype(np.intp)] -= 1.0
        D = w[:, None, None] * (mu[:, :, None] * np.eye(K) - mu[:, :, None] * mu[:, None, :])
        lam, V = np.linalg.eigh(D)
        return cls(eta, w[:, None] * g, V * np.sqrt(np.maximum(lam, 0.0))[:, None, :])


def _alo_blocks(pb: Problem, c: _Curvature, blocks: np.ndarray) -> tuple:
    """ALO's losses, scores and ``det(I - D_i K_i)`` at the (n, K, K) blocks: the step
    ``K g + K L (I - L^T K L)^{-1} L^T K g`` (= ``K (I - D K)^{-1} g``), the eigenvalues of
    the symmetric ``L^T K L`` (those of ``D K``) clipped at DH_CLIP as the scalar routes'
    ``d h`` (a noisy block can put them at or above 1; the true ones are below 1)."""
    Kb = 0.5 * (blocks + np.swapaxes(blocks, 1, 2))
    KL = Kb @ c.L
    T = np.swapaxes(c.L, 1, 2) @ KL
    theta, U = np.linalg.eigh(T)
    theta = np.minimum(theta, mf.DH_CLIP)
    Kg = np.einsum("nab,nb->na", Kb, c.g)
    u = np.einsum("nba,nb->na", c.L, Kg)  # L^T K g
    u = np.einsum("nab,nb->na", U, np.einsum("nba,nb->na", U, u) / (1.0 - theta))
    pred = c.eta + Kg + np.einsum("nab,nb->na", KL, u)
    return cross_entropy(pred, pb.y), pred, np.prod(1.0 - theta, axis=1)


def _jackknife(pb: Problem, c: _Curvature, groups: np.ndarray) -> tuple:
    """ALO from the packed group estimates (n, G, T): the delete-one-group jackknife of
    the losses and the standard error of their mean (as the scalar route's)."""
    w = pb.sample_weight
    n, G, _ = groups.shape
    idx = _unpacking(_K(pb))
    all_ = groups.mean(axis=1)
    loss_all, pred, det = _alo_blocks(pb, c, all_[:, idx])
    loss_del = np.zeros(n)
    means = np.empty(G)
    for k in range(G):  # G O(n K^3) evaluations
        lk = _alo_blocks(pb, c, ((G * all_ - groups[:, k]) / (G - 1))[:, idx])[0]
        loss_del += lk
        means[k] = mf._mean(lk, w)
    losses = G * loss_all - (G - 1) / G * loss_del
    se = float(np.sqrt((G - 1) / G * np.sum((means - means.mean()) ** 2)))
    lev_se = (groups.std(axis=1, ddof=1) / np.sqrt(G))[:, idx]
    info = mf.RandomizedLeverages(
        n_probes=0,
        n_groups=G,
        estimator="",
        mean_stderr=se,
        bias_correction=mf._mean(loss_all, w) - mf._mean(losses, w),
        leverage_stderr=lev_se,
        cg_iterations=0,
        converged=True,
    )
    return mf._Estimate(losses, pred, all_[:, idx], det, info), se


def estimate(
    pb: Problem,
    beta: np.ndarray,
    rtol: float | None = None,
    race: float | None = None,
    first: int = N_PROBES,
) -> Any:
    """ALO at ``beta`` (class-major) from randomized leverage blocks, the probes doubled
    as on the scalar matrix-free route (its N_PROBES, STDERR_SHARE, RANDOM_SHARE, RACE_Z),
    in at most MAX_GROUPS groups, ``first`` probes in the first round. Returns the scalar
    route's estimate type (``leverages`` the (n, K, K) blocks, ``downdate``
    ``det(I - D_i K_i)``, ``leverage_stderr`` per entry of the blocks)."""
    curv: list[_Curvature] = []

    def best(parts: list[mf.Probed]) -> tuple:
        if not curv:
            curv.append(_Curvature.at(pb, np.asarray(parts[0].res.eta)))
        a = _jackknife(pb, curv[0], mf.stacked(parts)[0])
        b = _jackknife(pb, curv[0], mf.stacked(parts, control=True)[0])
        return (a[0], a[1], "plain") if a[1] < b[1] else (b[0], b[1], "control")

    def probe(n_probes: int, per: int, start: int) -> mf.Probed:
        return _blocks(pb, beta, n_probes, per, start)

    return mf.probe_until(pb, probe, best, rtol, race, MAX_GROUPS, first, DEFAULT_MAX_PROBES)[0]


def row_blocks(pb: Problem, beta: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The exact blocks ``K_i`` (len(rows), K, K) of some samples at ``beta`` (K PCG
    solves per sample, to EXACT_BLOCK_CG_RTOL)."""
    with _blas.single_threaded_blas():
        return _core.multinomial_row_blocks(
            *_common(pb),
            fit_intercept=pb.fit_intercept,
            beta=np.ascontiguousarray(beta, dtype=np.float64),
            rows=np.ascontiguousarray(rows, dtype=np.int64),
            cg_rtol=EXACT_BLOCK_CG_RTOL,
            max_cg=mf.MAX_CG,
            n_threads=pb.options.n_threads,
        )


# ----------------------------------------------------------------------------- loo
def _beta(res: MultinomialFitResult, pb: Problem) -> np.ndarray:
    return pack_beta(res.coef_, res.intercept_, _K(pb), pb.n_features, pb.fit_intercept)


def loo(pb: Problem, req: LOORequest) -> LOOResult:
    """Multinomial ALO on the matrix-free route (the route sends ``method="alo"`` without
    the gradient here): ``predictions`` (n, K), ``leverages`` the estimated (n, K, K)
    blocks, ``downdate`` ``det(I - D_i K_i)``, ``randomized`` how the blocks were
    estimated; the trust layer's refits are Newton-CG fits without each sample."""
    check_loo_samples(pb.n_samples)
    given = None
    if req.coef is not None:
        given = pack_beta(req.coef, req.intercept, _K(pb), pb.n_features, pb.fit_intercept)
    elif req.intercept is not None:
        raise ValueError("intercept= requires coef=")
    o = pb.options
    if given is None:
        fitres = fit(pb)
    else:  # bring your own fit: the state at the given coefficients (max_iter=0)
        fitres = multinomial_fit_result(
            _cg_fit(pb, given, max_iter=0), pb.penalty, pb.fit_intercept
        )
    warn_loo_fit(fitres, given is not None, 0, pb.n_samples, o.tol, o.max_iter)
    beta = _beta(fitres, pb)
    est = estimate(pb, beta, req.rtol)
    check_finite_result("loo(method='alo')", losses=est.losses, predictions=est.predictions)
    eta = np.asarray(fitres.decision_function(pb.X))
    dh_flag = est.downdate < 1.0 - ALO_UNRELIABLE_DH
    warn_unreliable(dh_flag, "multinomial", False)
    indicator = multinomial_indicator(pb.y, eta, est.predictions, est.leverages, pb.sample_weight)
    return LOOResult(
        losses=est.losses,
        predictions=est.predictions,
        leverages=est.leverages,
        method="alo",
        fit=fitres,
        sample_weight=pb.sample_weight,
        downdate=est.downdate,
        unreliable=unreliable_from(indicator, est.losses, pb.sample_weight, dh_flag),
        indicator=indicator,
        randomized=est.info,
        _refits=_subset_refits(pb, fitres, beta, eta, est, indicator),
    )


def _subset_refits(pb: Problem, fitres, beta, eta, est, indicator) -> Any:
    """The trust layer's refits (Newton-CG) and gathered values, with ALO at the exact
    blocks of the samples the self-check refits (``Gathered.at_rows``: it then measures
    ALO's own error there, not the noise of their estimated blocks)."""
    sr = primal.refits(pb, fitres, eta, indicator, refit=_refitter(pb, beta))
    curv = _Curvature.at(pb, eta)

    def at_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = np.asarray(rows, dtype=np.int64)
        blocks = est.leverages.copy()
        blocks[rows] = row_blocks(pb, beta, rows)
        sub = _Curvature(curv.eta[rows], curv.g[rows], curv.L[rows])
        loss, pred_rows, _ = _alo_blocks(pb.replace(y=pb.y[rows]), sub, blocks[rows])
        pred = est.predictions.copy()
        pred[rows] = pred_rows
        ind = multinomial_indicator(pb.y, eta, pred, blocks, pb.sample_weight)
        return loss, ind[rows]

    def gather(res: Any) -> Any:
        return dataclasses.replace(sr.gather(res), at_rows=at_rows)

    return dataclasses.replace(sr, gather=gather)


def _refitter(pb: Problem, beta: np.ndarray):
    """Exact leave-one-out cross-entropies of a few samples (the trust layer's self-check)
    by Newton-CG fits with the sample's weight set to 0, warm-started at ``beta``: one core
    call per refit, over the chosen samples only."""
    w = np.ones(pb.n_samples) if pb.sample_weight is None else pb.sample_weight

    def refit(idx: np.ndarray) -> tuple[np.ndarray, int]:
        idx = np.asarray(idx, dtype=np.int64)
        losses = np.empty(idx.size)
        failed = 0
        for k, i in enumerate(idx.tolist()):
            wk = w.copy()
            wk[i] = 0.0
            out = _cg_fit(pb, beta, sample_weight=wk)
            failed += not out.converged
            eta = pb.X[i : i + 1] @ np.asarray(out.coef).T + np.asarray(out.intercept)
            losses[k] = cross_entropy(np.atleast_2d(eta), pb.y[i : i + 1])[0]
        return losses, failed

    return refit


# ----------------------------------------------------------------------------- tuning
class MultinomialMatrixFreeTuneState:
    """Stands in for ``_core.TuneState`` in :class:`aloocv.tuning.Objective` for the
    multinomial loss on the matrix-free route: a Newton-CG fit warm-started at the previous
    one, then ALO from randomized blocks (the same probes at every point). No derivative:
    only a grid search runs on it (``alo(gradient=True)`` raises)."""

    def __init__(self, pb: Problem):
        self.pb = pb
        self.beta: np.ndarray | None = None
        self._out: Any = None
        self.best = np.inf  # the lowest mean so far (the scalar route's RACE_Z)
        self._probes = N_PROBES  # the last point's probes

    def set_penalty(self, l2: np.ndarray, l1: np.ndarray | None = None) -> None:
        self.pb = self.pb.replace(l2=np.ascontiguousarray(l2, dtype=np.float64))
        self._out = None

    def set_beta(self, beta: np.ndarray) -> None:
        self.beta = np.array(beta, dtype=np.float64).ravel()
        self._out = None

    def fit(self) -> None:
        if self._out is not None:
            return
        self._out = _cg_fit(self.pb, self.beta)
        pb = self.pb
        self.beta = pack_beta(
            self._out.coef, self._out.intercept, _K(pb), pb.n_features, pb.fit_intercept
        )

    def alo(self, *, gradient: bool = True, gradient_kind: str = "exact") -> StateOutput:
        if gradient:
            raise ValueError(
                "the matrix-free multinomial route has no hypergradient: use search='grid' "
                "(or solver='primal' where its K (p+1) x K (p+1) Hessian fits)"
            )
        self.fit()
        assert self.beta is not None
        # half the last point's probes first, as the scalar route's search
        first = max(N_PROBES, self._probes // 2)
        est = estimate(self.pb, self.beta, race=self.best, first=first)
        self._probes = est.info.n_probes
        self.best = min(self.best, mf._mean(est.losses, self.pb.sample_weight))
        o = self._out
        pb = self.pb
        B = np.column_stack([o.intercept, o.coef]) if pb.fit_intercept else np.asarray(o.coef)
        return StateOutput(
            coef=o.coef,
            intercept=o.intercept,
            n_iter=o.n_iter,
            converged=o.converged,
            objective=o.objective,
            grad_norm=o.grad_norm,
            hessian_passes=o.hessian_passes,
            losses=est.losses,
            predictions=est.predictions,
            leverages=est.leverages,
            det=est.downdate,
            beta=np.ascontiguousarray(B.ravel()),
        )

    def alo_tangents(self, J2: np.ndarray, J1: np.ndarray) -> StateOutput:
        return self.alo(gradient=True)

    def sample_gradient(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("method='sgd' is not available for the multinomial loss")


def tune_state(pb: Problem) -> MultinomialMatrixFreeTuneState:
    """The tuning state of a multinomial problem on the matrix-free route."""
    check_loo_samples(pb.n_samples)
    return MultinomialMatrixFreeTuneState(pb)
