"""Scalar-eta losses on the matrix-free route in memory (``docs/math/matrix_free.md``):
Newton-CG fits from Hessian-vector products and ALO from randomized leverages, with no
p x p (or n x n) matrix anywhere.

The leverages ``h_i = x~_i^T H^{-1} x~_i`` are Hutchinson estimates from Rademacher probes
solved by preconditioned conjugate gradients (the core's ``random_leverages``), in
``N_GROUPS`` groups. Two estimators are formed from the same solves: the plain one, and
one with the Jacobi diagonal ``sum_j x~_ij^2 / H_jj`` as a control variate; the one whose
jackknife standard error of the ALO mean is smaller is used. ALO is nonlinear in ``h``
(``1 / (1 - d h)``), so a plug-in estimate is biased by the noise of ``h``; the
delete-one-group jackknife removes the ``1 / m`` term of that bias (RandALO's
extrapolation in the number of probes) and gives the standard error that the
randomization adds to the mean.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import t as student_t

from ... import _blas, _core
from ..._diagnostics import (
    check_classes,
    check_finite_result,
    check_loo_classes,
    unreliable_mask,
    warn_loo_fit,
    warn_not_converged,
    warn_unreliable,
)
from ..._stats import weighted_stderr
from ..._validation import check_loo_samples, core_design
from ...problem import Problem
from ...results import FitResult, LOOResult, StateOutput, fit_result
from ...results.trust import indicator_rho, mean_leverage, scalar_indicator, unreliable_from
from ..common import TANGENT_LOG_STEP, LOORequest
from . import scalar

__all__ = [
    "MatrixFreeTuneState",
    "Point",
    "Probed",
    "RandomizedLeverages",
    "estimate",
    "fit",
    "loo",
    "point",
    "probe_until",
    "stacked",
    "tune_state",
]

#: Rademacher probes of a matrix-free ALO: N_PROBES at first, doubled (new probes added to
#: the old) while the standard error the randomization adds to the mean exceeds
#: STDERR_SHARE times the mean's own (sampling) standard error, so that it adds at most 3%
#: to the total uncertainty, up to DEFAULT_MAX_PROBES; with ``rtol=`` also until it is
#: within RANDOM_SHARE * rtol of the mean, up to MAX_PROBES. The probes are the jackknife's
#: units one by one up to MAX_GROUPS of them, then in MAX_GROUPS groups of consecutive
#: probes: the jackknife's standard error has G - 1 degrees of freedom, and the test
#: above takes its 97.5% Student quantile over 1.96 (1.62 at 4 groups, 1.20 at 8, 1.09 at
#: 16), so more groups of fewer probes stop sooner at the same precision. Measured at
#: n = 2e4, p = 1e5 (text-like, a 10-point grid of C): 16 probes first in groups of 4 took
#: 540 CG iterations of 8-probe batches (64 probes at the chosen C), this rule 394 (32).
N_PROBES = 8
MAX_GROUPS = 16
STDERR_SHARE = 0.25
DEFAULT_MAX_PROBES = 128
MAX_PROBES = 1024
RANDOM_SHARE = 0.25
#: A search's candidate whose mean lies RACE_Z standard errors (of the randomization)
#: above the best mean so far takes no more probes: at n = 2e4, p = 1e5 the four weakest
#: penalties of an 8-decade grid otherwise take 128 probes each, 43 of the grid's 50 s.
RACE_Z = 4.0
#: Relative residual of the probe solves, and the most CG iterations of one solve. CG from
#: 0 stops short in the directions it has not yet resolved, which biases the leverages (and
#: ALO) upward, the same way for every probe: a bias that the jackknife's standard error
#: does not see. Measured on 20000 x 100000 text-like data over 7 penalties (32 probes,
#: against solves to 1e-5; the dual form, its frequent columns preconditioned exactly): at
#: 1e-2 up to 3.4e-3 of the mean and 7.1 standard errors (where the standard error is small:
#: strong penalties), at 3e-3 up to 7.1e-4 and 2.9, at 1e-3 1.3e-4 and 1.1; 3e-3 costs 1.39x
#: the iterations of 1e-2, 1e-3 1.70x.
CG_RTOL = 3e-3
#: Relative residual of the solves of exact leverages (a few samples: the self-check's).
EXACT_CG_RTOL = 1e-5
MAX_CG = 2000
#: CG iterations of one Newton-CG direction at most.
MAX_CG_NEWTON = 250
#: A noisy estimate can put d_i h_i at or above 1 (the true value is below 1 with a
#: positive penalty): it is clipped to DH_CLIP.
DH_CLIP = 0.999
#: The path predictor of a tuning state's fits (docs/math/matrix_free.md, "Fits along a
#: path"): the next start is the last fit moved along the last step of the path, when the
#: new log-penalty continues that step on a straight line (to PATH_COLLINEAR relative) by
#: at most PATH_MAX_STEP times its length. Measured on a 10-point grid of C at n = 2e4,
#: p = 1e5 (text-like): 2323 passes over X for the ten Newton-CG fits warm-started at the
#: last fit, 989 from the predicted starts.
PATH_MAX_STEP = 1.5
PATH_COLLINEAR = 1e-6
#: The probes' seed (fixed: the same call gives the same result).
PROBE_SEED = 20240527


@dataclass(frozen=True)
class RandomizedLeverages:
    """How the leverages of a matrix-free ALO were estimated.

    Attributes
    ----------
    n_probes : int
        Rademacher probes (one preconditioned CG solve each).
    n_groups : int
        Groups of probes: the units of the jackknife.
    estimator : {"plain", "control"}
        Hutchinson's estimator as is, or with the Jacobi diagonal as a control variate.
    mean_stderr : float
        The standard error that the randomization adds to the mean (jackknife).
    bias_correction : float
        What the jackknife removed from the plug-in mean (its ``1 / n_probes`` bias).
    leverage_stderr : ndarray of shape (n_samples,)
        Standard error of each estimated leverage.
    cg_iterations : int
        Conjugate-gradient iterations of the probe solves (a block of probes counts once).
    converged : bool
        Whether every probe solve reached its tolerance.
    form : {"primal", "dual"}
        Where the probe solves ran: on coefficient vectors (length p + 1), or on sample
        vectors (length n; wide data whose every feature is penalized, when no derivative is
        asked for). Both estimate the same matrix with the same probes.
    exact_rows : int
        Rows the dual form gave exact leverages (a large ``|l'| / l''``).
    """

    n_probes: int
    n_groups: int
    estimator: str
    mean_stderr: float
    bias_correction: float
    leverage_stderr: np.ndarray
    cg_iterations: int
    converged: bool
    form: str = "primal"
    exact_rows: int = 0


def _args(pb: Problem) -> tuple:
    return (core_design(pb.X), pb.y, pb.sample_weight, pb.loss.core, pb.l2)


def _beta(res: FitResult) -> np.ndarray:
    return np.ascontiguousarray(res.beta_, dtype=np.float64)


# ----------------------------------------------------------------------------- fit
def fit(pb: Problem, warm_start: FitResult | None = None) -> FitResult:
    """Newton-CG fit of a scalar-loss L2 problem."""
    check_classes(pb.y, pb.sample_weight, pb.loss, pb.fit_intercept)
    beta0 = scalar._warm_beta(pb, warm_start)
    out = _cg_fit(pb, beta0)
    check_finite_result("fit", coef=out.coef, intercept=out.intercept)
    res = fit_result(out, pb.loss, pb.penalty, pb.fit_intercept)
    scalar._check_separation(pb, res, warn=False)
    warn_not_converged(res, pb.options.tol, pb.options.max_iter)
    return res


def _cg_fit(pb: Problem, beta0: np.ndarray | None, sample_weight: np.ndarray | None = None) -> Any:
    o = pb.options
    w = pb.sample_weight if sample_weight is None else sample_weight
    with _blas.single_threaded_blas():
        return _core.cg_fit(
            core_design(pb.X),
            pb.y,
            w,
            pb.loss.core,
            pb.l2,
            fit_intercept=pb.fit_intercept,
            tol=o.tol,
            max_iter=o.max_iter,
            n_threads=o.n_threads,
            beta0=beta0,
            offset=pb.offset,
            max_cg=MAX_CG_NEWTON,
        )


# ----------------------------------------------------------------------------- leverages
@dataclass(frozen=True)
class Point:
    """The core's state at one ``beta`` of a problem (``_core.MatrixFreePoint``: eta, the
    loss's derivatives, the preconditioner), made once and shared by every solve there: the
    probes, the exact leverages and refits of the self-check, the hypergradient
    (docs/math/matrix_free.md, "One point, many solves")."""

    pb: Problem
    beta: np.ndarray
    core: Any


def point(pb: Problem, beta: np.ndarray) -> Point:
    """The :class:`Point` of ``pb`` at ``beta`` (one pass over X, one for the Jacobi
    diagonal)."""
    beta = np.ascontiguousarray(beta, dtype=np.float64)
    with _blas.single_threaded_blas():
        core = _core.MatrixFreePoint(
            *_args(pb),
            fit_intercept=pb.fit_intercept,
            beta=beta,
            offset=pb.offset,
            n_threads=pb.options.n_threads,
        )
    return Point(pb, beta, core)


@dataclass(frozen=True)
class _Estimate:
    losses: np.ndarray
    predictions: np.ndarray
    leverages: np.ndarray
    downdate: np.ndarray
    info: RandomizedLeverages
    gradient: np.ndarray | None = None
    point: Point | None = None


def _mean(v: np.ndarray, w: np.ndarray | None) -> float:
    return float(v.mean() if w is None else v @ w / w.sum())


def _jackknife(pb: Problem, eta, g, d, groups: np.ndarray) -> tuple[_Estimate, float]:
    """ALO from the group estimates ``groups`` (n, G): the per-sample delete-one-group
    jackknife of the losses (the core's ``alo_jackknife``: G + 1 loss evaluations per
    sample in one pass), and the standard error of their mean."""
    w = pb.sample_weight
    G = groups.shape[1]
    with _blas.single_threaded_blas():
        losses, loss_all, pred, h, means, lev_se = _core.alo_jackknife(
            pb.loss.core,
            pb.y,
            w,
            eta,
            g,
            d,
            np.ascontiguousarray(groups, dtype=np.float64),
            dh_clip=DH_CLIP,
            n_threads=pb.options.n_threads,
        )
    se = float(np.sqrt((G - 1) / G * np.sum((means - means.mean()) ** 2)))
    info = RandomizedLeverages(
        n_probes=0,
        n_groups=G,
        estimator="",
        mean_stderr=se,
        bias_correction=_mean(loss_all, w) - _mean(losses, w),
        leverage_stderr=lev_se,
        cg_iterations=0,
        converged=True,
    )
    return _Estimate(losses, pred, h, 1.0 - np.maximum(d, 0.0) * h, info), se


def _probes(n_probes: int, per: int, seed: int) -> dict[str, Any]:
    """The keyword options of the core's probe calls: ``n_probes`` probes in groups of
    ``per``."""
    return {
        "n_probes": n_probes,
        "n_groups": n_probes // per,
        "seed": seed,
        "cg_rtol": CG_RTOL,
        "max_cg": MAX_CG,
    }


@dataclass(frozen=True)
class Probed:
    """One call of the core's probes: its result (``eta``, ``g``, ``d``, ``diag0`` and the
    n x G group estimates ``plain`` and ``control``) and the probes per group."""

    res: Any
    per: int


def leverages(
    pt: Point,
    n_probes: int,
    per: int = 1,
    seed: int = PROBE_SEED,
    first_probe: int = 0,
    dual: bool = False,
) -> Probed:
    """The core's leverage estimates at the point ``pt`` from the seed's probes
    ``first_probe, first_probe + 1, ...``, ``n_probes`` of them in groups of ``per``
    consecutive ones; ``dual``: the dual form where it applies (the core decides; not for
    the derivative, whose adjoint solves follow the primal form)."""
    with _blas.single_threaded_blas():
        res = pt.core.random_leverages(
            **_probes(n_probes, per, seed), first_probe=first_probe, dual=dual
        )
    return Probed(res, per)


def stacked(parts: list[Probed], control: bool = False) -> tuple[np.ndarray, int]:
    """The group estimates of every probe of ``parts`` (consecutive calls), n x G (n x G x T
    for the multinomial loss's packed blocks), in groups of the largest ``per`` among them
    (smaller groups averaged with their neighbours, in probe order), and that group size.
    ``control``: the estimates with the control variate, ``diag0`` added back."""
    per = max(q.per for q in parts)
    blocks = [np.asarray(q.res.control if control else q.res.plain) for q in parts]
    if all(q.per == per for q in parts):  # the groups as they are
        out = blocks[0].copy() if len(blocks) == 1 else np.concatenate(blocks, axis=1)
    else:
        cols = np.concatenate(blocks, axis=1)
        size = np.concatenate([np.full(np.shape(q.res.plain)[1], q.per) for q in parts])
        first = np.cumsum(size) - size  # each group's first probe: a multiple of its size
        weights = size.reshape((-1,) + (1,) * (cols.ndim - 2))
        out = np.add.reduceat(cols * weights, np.flatnonzero(first % per == 0), axis=1) / per
    if control:
        out += np.expand_dims(np.asarray(parts[0].res.diag0), 1)
    return out, per


def estimate(
    pb: Problem,
    beta: np.ndarray,
    rtol: float | None = None,
    want_gradient: bool = False,
    race: float | None = None,
    first: int = N_PROBES,
    pt: Point | None = None,
) -> _Estimate:
    """ALO at ``beta`` from randomized leverages, the probes doubled as the module's
    constants say (N_PROBES, MAX_GROUPS, STDERR_SHARE, RANDOM_SHARE); ``want_gradient``:
    also the exact derivative of the reported mean in the per-feature L2 weights.
    ``race``: the lowest mean of a search so far; a candidate whose mean is RACE_Z standard
    errors above it gets no more probes (it cannot be the search's choice). ``first``: the
    probes of the first round (a search's next point starts at half its last point's).
    The estimate carries its :class:`Point` (``pt``, or one made at ``beta``: the
    self-check's solves share it)."""
    pt = point(pb, beta) if pt is None else pt

    def probe(n_probes: int, per: int, start: int) -> Probed:
        return leverages(pt, n_probes, per, first_probe=start, dual=not want_gradient)

    est, parts, kind = probe_until(
        pb, probe, lambda parts: _best(pb, parts), rtol, race, first=first
    )
    grad = gradient(pt, parts, kind) if want_gradient else None
    return dataclasses.replace(est, gradient=grad, point=pt)


def probe_until(
    pb: Problem,
    probe: Callable[[int, int, int], Probed],
    best: Callable[[list[Probed]], tuple[_Estimate, float, str]],
    rtol: float | None,
    race: float | None,
    max_groups: int = MAX_GROUPS,
    first: int = N_PROBES,
    default_max: int = DEFAULT_MAX_PROBES,
) -> tuple[_Estimate, list[Probed], str]:
    """The probes' doubling rule of :func:`estimate` (the module's constants), shared by
    the multinomial loss's blocks: ``probe(n_probes, per, first_probe)`` makes new probes
    in groups of ``per``, ``best(parts)`` the estimate, its jackknife standard error and
    the estimator's name over every probe so far; at most ``max_groups`` groups, ``first``
    probes in the first round, at most ``default_max`` probes without ``rtol``. Returns
    the estimate (its ``info`` completed), the probes and the estimator."""
    parts: list[Probed] = []
    new, total, per = first, 0, 1
    cap = default_max if rtol is None else MAX_PROBES
    while True:
        per = max(per, (total + new) // max_groups)
        parts.append(probe(new, per, total))
        total += new
        est, se, kind = best(parts)
        # the jackknife's G - 1 degrees of freedom: its standard error is noisy at few groups
        se = se * float(student_t.ppf(0.975, total // per - 1)) / 1.96
        enough = se <= STDERR_SHARE * (weighted_stderr(est.losses, pb.sample_weight) or 0.0)
        mean = _mean(est.losses, pb.sample_weight)
        if rtol is not None:
            enough = enough and se <= RANDOM_SHARE * rtol * abs(mean)
        if race is not None and mean - RACE_Z * se > race:
            enough = True
        if enough or 2 * total > cap:
            break
        new = total  # doubles the probes
    res = [q.res for q in parts]
    info = dataclasses.replace(
        est.info,
        n_probes=total,
        estimator=kind,
        cg_iterations=sum(int(q.cg_iterations) for q in res),
        converged=all(bool(q.converged) for q in res),
        form="dual" if all(bool(q.dual) for q in res) else "primal",
        exact_rows=max(int(q.exact_rows) for q in res),
    )
    return dataclasses.replace(est, info=info), parts, kind


def _best(pb: Problem, parts: list[Probed]) -> tuple[_Estimate, float, str]:
    """The estimator (plain, or with the control variate) whose jackknife standard error
    is smaller, over every probe so far."""
    r = parts[0].res
    a = _jackknife(pb, r.eta, r.g, r.d, stacked(parts)[0])
    b = _jackknife(pb, r.eta, r.g, r.d, stacked(parts, control=True)[0])
    return (a[0], a[1], "plain") if a[1] < b[1] else (b[0], b[1], "control")


# ----------------------------------------------------------------------------- gradient
def _coefficients(pb: Problem, eta, g, d, groups: np.ndarray, per: int) -> tuple:
    """The reported mean's coefficients for the core's gradient
    (:meth:`aloocv._core.MatrixFreePoint.random_leverages_gradient`): on each probe
    group's contributions (rho, n x G), on eta at fixed leverages (alpha) and on h over the
    jackknife's subsets (gamma), groups of ``per`` probes; see docs/math/matrix_free.md,
    "Hypergradient"."""
    n, G = groups.shape
    m = G * per
    w = pb.sample_weight
    omega = np.full(n, 1.0 / n) if w is None else w / w.sum()
    (l3,) = pb.loss.derivatives(pb.y, eta, (3,))
    dpos = np.maximum(d, 0.0)
    wl3 = np.where(d > 0.0, (1.0 if w is None else w) * l3, 0.0)
    safe = np.where(dpos > 0.0, dpos, 1.0)
    K = DH_CLIP / (1.0 - DH_CLIP)

    def terms(h: np.ndarray, c: float) -> tuple[np.ndarray, np.ndarray]:
        h0 = np.maximum(h, 0.0)
        dh = dpos * h0
        top = dh > DH_CLIP
        dhc = np.minimum(dh, DH_CLIP)
        hc = np.where(dpos > 0.0, dhc / safe, h0)
        t = 1.0 - dhc
        (lp,) = pb.loss.derivatives(pb.y, eta + g * hc / t, (1,))
        A = 1.0 + dpos * hc / t + g * wl3 * hc**2 / t**2
        A = np.where(top, 1.0 + K * (1.0 - g * wl3 / safe**2), A)
        B = np.where(top | (h < 0.0), 0.0, g / t**2)
        return c * omega * lp * B, c * omega * lp * A

    h_all = groups.mean(axis=1)
    g_all, alpha = terms(h_all, float(G))
    g_del = np.empty((n, G))
    for k in range(G):  # G O(n) evaluations
        gk, ak = terms((G * h_all - groups[:, k]) / (G - 1), -(G - 1) / G)
        g_del[:, k] = gk
        alpha = alpha + ak
    total_del = g_del.sum(axis=1)
    rho = g_all[:, None] / m + (total_del[:, None] - g_del) / (m - per)
    return rho, alpha, g_all + total_del


def gradient(pt: Point, parts: list[Probed], kind: str) -> np.ndarray:
    """d mean / d (per-feature L2 weights) of the matrix-free ALO mean at the point ``pt``
    from the probes of ``parts`` (:func:`leverages` calls of ``PROBE_SEED``, consecutive
    probes) and its estimator."""
    pb = pt.pb
    r = parts[0].res
    groups, per = stacked(parts, control=kind != "plain")
    G = groups.shape[1]
    rho, alpha, gamma = _coefficients(pb, r.eta, r.g, r.d, groups, per)
    with _blas.single_threaded_blas():
        return pt.core.random_leverages_gradient(
            **_probes(G * per, per, PROBE_SEED),
            control=kind == "control",
            rho=rho,
            alpha=alpha,
            gamma=gamma,
        )


# ----------------------------------------------------------------------------- loo
def loo(pb: Problem, req: LOORequest) -> LOOResult:
    """Leave-one-out on the matrix-free route: ALO from randomized leverages, or exact
    Newton-CG refits (``method="exact"``)."""
    check_loo_samples(pb.n_samples)
    check_loo_classes(pb.y, pb.sample_weight, pb.loss, pb.fit_intercept)
    given = scalar.given_beta(pb, req.coef, req.intercept)
    o = pb.options
    if given is None:
        out = _cg_fit(pb, None)
    else:
        with _blas.single_threaded_blas():
            out = _core.cg_state(
                *_args(pb),
                fit_intercept=pb.fit_intercept,
                beta=given,
                tol=o.tol,
                n_threads=o.n_threads,
                offset=pb.offset,
            )
    check_finite_result("loo", coef=out.coef, intercept=out.intercept)
    fitres = fit_result(out, pb.loss, pb.penalty, pb.fit_intercept)
    beta = _beta(fitres)
    pt = point(pb, beta)
    eta = np.asarray(pt.core.eta)  # X~ beta + offset: the point's, which its solves read
    scalar._check_separation(pb, fitres, warn=req.method != "exact", eta=eta)
    if req.method == "exact":
        rows = np.arange(pb.n_samples)
        losses, pred, n_nc = _refit_rows(pt, rows)
        warn_loo_fit(fitres, given is not None, n_nc, pb.n_samples, o.tol, o.max_iter)
        return LOOResult(
            losses=losses,
            predictions=pred,
            leverages=None,
            method="exact",
            fit=fitres,
            sample_weight=pb.sample_weight,
        )
    warn_loo_fit(fitres, given is not None, 0, pb.n_samples, o.tol, o.max_iter)
    est = estimate(pb, beta, req.rtol, want_gradient=req.return_gradient, pt=pt)
    check_finite_result("loo(method='alo')", losses=est.losses, predictions=est.predictions)
    grad = None if est.gradient is None else pb.penalty.chain(None, est.gradient)
    dh_flag = unreliable_mask(est.downdate)
    warn_unreliable(dh_flag, pb.loss, False)
    indicator = scalar_indicator(
        pb.loss, pb.y, eta, est.predictions, est.leverages, pb.sample_weight
    )
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
        gradient=grad,
        _refits=_subset_refits(pb, fitres, eta, est, indicator),
    )


def _subset_refits(pb, fitres, eta, est: _Estimate, indicator) -> Any:
    """The trust layer's refits (Newton-CG) and gathered values, with ALO at exact leverages
    for the samples the self-check refits (``Gathered.at_rows``), at the estimate's point."""
    assert est.point is not None
    l1, l2, l3 = pb.loss.derivatives(pb.y, eta, (1, 2, 3))
    ww = 1.0 if pb.sample_weight is None else pb.sample_weight
    g, d = ww * l1, ww * l2
    solves = _RowSolves(est.point)
    sr = scalar.refits(
        pb, "matrix_free", fitres, eta, indicator, refit=_refitter(est.point, solves, g, d)
    )

    w = pb.sample_weight
    rho = indicator_rho(w, l2, l3)

    def at_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # the indicator at these rows only: its rho and reach's hbar over every sample
        # (scalar_indicator's own), with the rows' exact leverages in hbar
        rows = np.asarray(rows, dtype=np.int64)
        h_rows = solves(rows)[0]
        h = est.leverages.copy()
        h[rows] = h_rows
        t = 1.0 - np.minimum(np.maximum(d[rows], 0.0) * h_rows, DH_CLIP)
        pred = eta[rows] + g[rows] * h_rows / t
        dh = d * h
        hbar = mean_leverage(np.sum(dh), np.sum(dh * h))
        wr = None if w is None else w[rows]
        ind = scalar_indicator(pb.loss, pb.y[rows], eta[rows], pred, h_rows, wr, rho, hbar)
        return pb.loss.value(pb.y[rows], pred), ind

    def gather(res: Any) -> Any:
        return dataclasses.replace(sr.gather(res), at_rows=at_rows)

    return dataclasses.replace(sr, gather=gather)


class _RowSolves:
    """Exact leverages ``h_i`` and solves ``H^{-1} x~_i`` of the samples the self-check
    refits, by one block PCG call per new set of rows, shared by ALO at exact leverages
    (``Gathered.at_rows``) and the refits' Newton start."""

    def __init__(self, pt: Point) -> None:
        self.pt = pt
        self._h: dict[int, float] = {}
        self._s: dict[int, np.ndarray] = {}

    def __call__(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        new = np.array([i for i in np.unique(rows) if int(i) not in self._h], dtype=np.int64)
        if new.size:
            with _blas.single_threaded_blas():
                h, S = self.pt.core.row_leverages(
                    new, cg_rtol=EXACT_CG_RTOL, max_cg=MAX_CG, return_solves=True
                )
            for k, i in enumerate(new.tolist()):
                self._h[i], self._s[i] = float(h[k]), S[k]
        h = np.array([self._h[int(i)] for i in rows])
        S = np.array([self._s[int(i)] for i in rows]).reshape(len(rows), -1)
        return h, S


def _refit_rows(pt: Point, rows: np.ndarray, starts: np.ndarray | None = None) -> tuple:
    """Exact leave-one-out by Newton-CG refits without each sample of ``rows``,
    warm-started at the point's beta (or at ``starts[k]`` for row k), advanced in lockstep
    by the core (``cg_refits``: one block product per step for a batch of refits, the
    point's preconditioner): (losses, predictions, refits not at tol)."""
    pb, o = pt.pb, pt.pb.options
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    with _blas.single_threaded_blas():
        pred, converged, _, _, _ = pt.core.cg_refits(
            rows,
            starts=None if starts is None else np.ascontiguousarray(starts, dtype=np.float64),
            tol=o.tol,
            max_iter=o.max_iter,
            max_cg=MAX_CG_NEWTON,
        )
    losses = pb.loss.value(pb.y[rows], pred)
    return losses, pred, int(rows.size - np.count_nonzero(converged))


def _refitter(pt: Point, solves: _RowSolves, g: np.ndarray, d: np.ndarray):
    """The self-check's refits, each started at the Newton step of its own objective from
    ``beta``: ``beta + g_i H^{-1} x~_i / (1 - d_i h_i)`` (Sherman-Morrison; the solves are
    the exact leverages' own), one Newton-CG iteration from the exact refit where ALO is
    accurate (docs/math/matrix_free.md, "The error budget")."""

    def refit(idx: np.ndarray) -> tuple[np.ndarray, int]:
        idx = np.asarray(idx, dtype=np.int64)
        h, S = solves(idx)
        t = 1.0 - np.minimum(np.maximum(d[idx], 0.0) * h, DH_CLIP)
        starts = pt.beta[None, :] + (g[idx] / t)[:, None] * S
        losses, _, n_nc = _refit_rows(pt, idx, starts=starts)
        return losses, n_nc

    return refit


# ----------------------------------------------------------------------------- tuning
class MatrixFreeTuneState:
    """Stands in for ``_core.TuneState`` in :class:`aloocv.tuning.Objective` on the
    matrix-free route: a Newton-CG fit started from the path's predicted point (or the
    previous fit, or a given start), then ALO from randomized leverages (the same probes
    at every point: the curve is smooth in lambda)."""

    def __init__(self, pb: Problem):
        self.pb = pb
        self.beta: np.ndarray | None = None
        self._out: Any = None
        self.best = np.inf  # the lowest mean so far (RACE_Z)
        self._given = False  # the next fit starts at a beta given by set_beta
        self._path: list[tuple[np.ndarray, np.ndarray]] = []  # (log l2, beta): last 2 fits
        self._probes = N_PROBES  # the last point's probes

    def set_penalty(self, l2: np.ndarray, l1: np.ndarray | None = None) -> None:
        if l1 is not None and np.any(np.asarray(l1) > 0):
            raise ValueError("the matrix-free route tunes L2 penalties only")
        self.pb = self.pb.replace(l2=np.ascontiguousarray(l2, dtype=np.float64))
        self._out = None

    def set_beta(self, beta: np.ndarray) -> None:
        self.beta = np.array(beta, dtype=np.float64)
        self._out = None
        self._given = True

    def fit(self) -> None:
        if self._out is not None:
            return
        if self._given:
            self._path = []  # a new path starts at the given point
        start = self.beta if self._given else self._predicted()
        self._out = _cg_fit(self.pb, start)
        c = np.asarray(self._out.coef, dtype=np.float64)
        self.beta = np.concatenate([[self._out.intercept], c]) if self.pb.fit_intercept else c
        self._path = [*self._path[-1:], (self._log_l2(), self.beta.copy())]
        self._given = False

    def _log_l2(self) -> np.ndarray:
        return np.log(np.maximum(self.pb.l2, np.finfo(np.float64).tiny))

    def _predicted(self) -> np.ndarray | None:
        """The last fit moved along the path's last step, ``beta_1 + t (beta_1 - beta_0)``,
        where the new log-penalty is ``u_1 + t (u_1 - u_0)`` with 0 < t <= PATH_MAX_STEP
        and the objective is lower there than at ``beta_1``; else ``beta_1``."""
        if len(self._path) < 2:
            return self.beta
        (u0, b0), (u1, b1) = self._path
        step, last = self._log_l2() - u1, u1 - u0
        norm2 = float(last @ last)
        t = float(step @ last) / norm2 if norm2 > 0.0 else 0.0
        off_line = float(np.linalg.norm(step - t * last))
        if not 0.0 < t <= PATH_MAX_STEP or off_line > PATH_COLLINEAR * np.linalg.norm(step):
            return b1
        guess = b1 + t * (b1 - b0)
        return guess if self._objective(guess) < self._objective(b1) else b1

    def _objective(self, beta: np.ndarray) -> float:
        """The objective at ``beta`` (two passes over X)."""
        pb = self.pb
        with _blas.single_threaded_blas():
            out = _core.cg_state(
                *_args(pb),
                fit_intercept=pb.fit_intercept,
                beta=np.ascontiguousarray(beta),
                tol=pb.options.tol,
                n_threads=pb.options.n_threads,
                offset=pb.offset,
            )
        f = float(out.objective)
        return f if np.isfinite(f) else np.inf

    def alo(self, *, gradient: bool = True, gradient_kind: str = "exact") -> StateOutput:
        if gradient and gradient_kind != "exact":
            raise ValueError("the matrix-free route has the exact gradient only")
        self.fit()
        assert self.beta is not None
        # the next point starts at half the last one's probes: the doubling rule's earlier
        # rounds would not have stopped there (the curve is smooth in lambda), and the
        # stacked probes are the same whatever the rounds (docs/math/matrix_free.md)
        first = max(N_PROBES, self._probes // 2)
        est = estimate(self.pb, self.beta, want_gradient=gradient, race=self.best, first=first)
        self._probes = est.info.n_probes
        self.best = min(self.best, _mean(est.losses, self.pb.sample_weight))
        o = self._out
        return StateOutput(
            coef=o.coef,
            intercept=o.intercept,
            n_iter=o.n_iter,
            converged=o.converged,
            objective=o.objective,
            grad_norm=o.grad_norm,
            matvec_passes=o.matvec_passes,
            losses=est.losses,
            predictions=est.predictions,
            leverages=est.leverages,
            grad_l2=est.gradient,
            beta=self.beta.copy(),
        )

    def alo_tangents(self, J2: np.ndarray, J1: np.ndarray) -> StateOutput:
        """Second derivatives by central differences of the exact gradient along each
        parameter's direction ``J2[:, k]`` of the per-feature L2 weights (as the dask and
        multinomial states), with a step of TANGENT_LOG_STEP in the log of the parameter:
        used only to propose Newton steps of the searches."""
        out = self.alo(gradient=True)
        at, pen = self.beta.copy(), self.pb.l2.copy()
        T2 = np.empty((pen.size, J2.shape[1]))
        for k in range(J2.shape[1]):
            h = float(np.max(J2[:, k] * pen)) * TANGENT_LOG_STEP
            g = []
            for sgn in (1.0, -1.0):
                self.set_penalty(pen + sgn * h * J2[:, k])
                self.set_beta(at)
                g.append(self.alo(gradient=True).grad_l2)
            T2[:, k] = (g[0] - g[1]) / (2.0 * h)
        self.set_penalty(pen)
        self.set_beta(at)
        self.fit()
        return dataclasses.replace(out, tangent_l2=T2, tangent_l1=np.zeros_like(T2))

    def sample_gradient(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("method='sgd' is not available on the matrix-free route")


def tune_state(pb: Problem) -> MatrixFreeTuneState:
    """The tuning state of a problem on the matrix-free route."""
    check_loo_samples(pb.n_samples)
    return MatrixFreeTuneState(pb)
