"""The exact derivative in the penalty of the refined leave-one-out mean, for a scalar-eta
loss with an L2 penalty (``docs/math/hypergradient.md``, "The refined objective").

The refined mean of a set ``S`` of refitted samples is

    R_S(lambda) = (1/W) [ sum_{i not in S} w_i l(y_i, eta~_i) + sum_{i in S} w_i l(y_i, eta*_i) ]

with ``eta~_i`` ALO's prediction and ``eta*_i = x~_i^T beta*_{-i}`` the prediction of the
exact refit without sample i. Its derivative is ALO's hypergradient (from the core) minus
the ALO terms of the samples of ``S`` plus their exact terms:

- ALO's term of sample i (``a = w_i l'_i``, ``d = w_i l''_i``, ``h = x~_i^T H^{-1} x~_i``,
  ``eta~ = eta + a h / (1 - d h)``): with ``dbeta/dlambda_k = -H^{-1} (J2_k * theta)``,
  ``deta = X~ dbeta``, ``da = w l'' deta``, ``dd = w l''' deta`` and ``dh = -u^T (dH) u``
  (``u = H^{-1} x~_i``, ``dH = X~^T diag(w l''' deta) X~ + diag(J2_k)``),
  ``d eta~ = deta + [(da h + a dh)(1 - d h) + a h (dd h + d dh)] / (1 - d h)^2``;
- the exact term (implicit differentiation of the refit's optimality condition
  ``grad F_{-i}(beta*_{-i}) = 0``): ``d l(y_i, eta*_i) / dlambda_k = -l'(y_i, eta*_i)
  z_i^T (J2_k * theta*_{-i})`` with ``H_{-i}(beta*_{-i}) z_i = x~_i``.

The refits ``beta*_{-i}`` are computed here in numpy, for the few samples of ``S`` at once:
Newton from the full fit, each Newton system solved by conjugate gradients preconditioned
by the rank-one downdate of the full fit's Hessian (Sherman-Morrison), which is the exact
Hessian of the refit at the full fit; the same solver gives ``z_i``. Each iteration costs
``O(n p |S|)``; nothing of size ``p^2`` per sample is formed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg

from .. import _blas, _core
from .._validation import core_design, design_dot

__all__ = ["FixedSetTerms", "RefitDerivatives", "refined_terms"]

#: The refits' Newton iterations stop when ``max|gradient| / sum(w)`` is below this share
#: of the fit tolerance (the derivative then holds to the fit's precision).
REFIT_TOL_SHARE = 1e-2
#: Newton iterations of the refits at most, and conjugate-gradient iterations per system.
REFIT_MAX_ITER = 50
CG_MAX_ITER = 200
#: Relative residual of the conjugate-gradient solves: the derivative's systems, and the
#: Newton steps of the refits (inexact Newton: the step's relative error multiplies the
#: gradient's decrease, so a loose solve costs no iteration at this size).
CG_RTOL = 1e-11
NEWTON_CG_RTOL = 1e-6
#: Halvings of a Newton step that does not decrease the refit's objective.
MAX_HALVINGS = 30


@dataclass(frozen=True)
class _Design:
    """The design with its intercept column: products ``X~ B`` and ``X~^T R``."""

    X: Any
    intercept: bool
    offset: np.ndarray | None

    def dot(self, B: np.ndarray) -> np.ndarray:
        """``X~ B`` (B of shape (p1, m))."""
        ic = int(self.intercept)
        out = design_dot(self.X, np.ascontiguousarray(B[ic:]))
        if ic:
            out = out + B[0]
        return out

    def tdot(self, R: np.ndarray) -> np.ndarray:
        """``X~^T R`` (R of shape (n, m))."""
        XtR = np.asarray(self.X.T @ R, dtype=np.float64)
        if self.intercept:
            return np.vstack([R.sum(axis=0, keepdims=True), XtR])
        return XtR

    def eta(self, B: np.ndarray) -> np.ndarray:
        E = self.dot(B)
        return E if self.offset is None else E + self.offset[:, None]


def _pcg(matvec, precond, R: np.ndarray, rtol: float = CG_RTOL) -> np.ndarray:
    """Solves ``A_j z_j = r_j`` for every column j of R (each A_j symmetric positive
    definite) by preconditioned conjugate gradients, to the relative residual ``rtol``.
    ``matvec(V, cols)`` and ``precond(V, cols)`` act on the columns ``cols`` of the batch;
    a column stops as soon as it is solved."""
    Z = np.zeros_like(R)
    r = R.copy()
    norm0 = np.linalg.norm(R, axis=0)
    act = np.flatnonzero(norm0 > 0)
    if act.size == 0:
        return Z
    d = np.zeros_like(R)
    rs = np.zeros(R.shape[1])
    s = precond(r[:, act], act)
    d[:, act] = s
    rs[act] = np.sum(r[:, act] * s, axis=0)
    for _ in range(CG_MAX_ITER):
        q = matvec(d[:, act], act)
        dq = np.sum(d[:, act] * q, axis=0)
        alpha = np.where(dq > 0, rs[act] / np.where(dq > 0, dq, 1.0), 0.0)
        Z[:, act] += alpha * d[:, act]
        r[:, act] -= alpha * q
        keep = (np.linalg.norm(r[:, act], axis=0) > rtol * norm0[act]) & (dq > 0)
        act = act[keep]
        if act.size == 0:
            break
        s = precond(r[:, act], act)
        rs_new = np.sum(r[:, act] * s, axis=0)
        beta = rs_new / np.where(rs[act] != 0, rs[act], 1.0)
        d[:, act] = s + beta * d[:, act]
        rs[act] = rs_new
    return Z


def _on(precond, cols_of_batch: np.ndarray):
    """``precond`` of the whole set acting on a batch of its columns."""

    def apply(R: np.ndarray, cols: np.ndarray) -> np.ndarray:
        return precond(R, cols_of_batch[cols])

    return apply


class RefitDerivatives:
    """The full fit of one penalty and what the refined derivative needs of it.

    Parameters
    ----------
    pb : Problem
        In memory, a scalar-eta loss, an L2 penalty (no L1 term).
    beta : ndarray of shape (p1,)
        The full fit (intercept first).
    J2 : ndarray of shape (p, m)
        The derivatives of the per-feature L2 weights in the penalty's parameters.
    """

    def __init__(self, pb: Any, beta: np.ndarray, J2: np.ndarray):
        self.pb = pb
        self.beta = np.asarray(beta, dtype=np.float64)
        self.J2 = np.asarray(J2, dtype=np.float64)
        self.ic = int(pb.fit_intercept)
        n = pb.n_samples
        self.w = np.ones(n) if pb.sample_weight is None else np.asarray(pb.sample_weight)
        self.D = _Design(pb.X, pb.fit_intercept, pb.offset)
        self.pad = np.concatenate([np.zeros(self.ic), pb.l2])  # penalty Hessian diagonal
        self.eta = self.D.eta(self.beta[:, None])[:, 0]
        self.g1, self.g2, self.g3 = pb.loss.derivatives(pb.y, self.eta, (1, 2, 3))
        with _blas.single_threaded_blas():
            H = _core.hessian(
                core_design(pb.X),
                np.ascontiguousarray(self.w * self.g2),
                fit_intercept=pb.fit_intercept,
                n_threads=pb.options.n_threads,
            )
        H = np.array(H) + np.diag(self.pad)
        self.chol = scipy.linalg.cho_factor(H, lower=True)

    def _solve(self, R: np.ndarray) -> np.ndarray:
        return scipy.linalg.cho_solve(self.chol, R)

    def _rows(self, S: np.ndarray) -> np.ndarray:
        """``X~_S^T`` of shape (p1, |S|)."""
        E = np.zeros((self.pb.n_samples, S.size))
        E[S, np.arange(S.size)] = 1.0
        return self.D.tdot(E)

    # ------------------------------------------------------------------ ALO's terms
    def alo_terms(self, S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(l(y_i, eta~_i), d l(y_i, eta~_i) / d params)`` of the samples S: shapes
        (|S|,) and (|S|, m)."""
        pb, w, ic = self.pb, self.w, self.ic
        theta = self.beta[ic:]
        rhs = np.zeros((self.beta.size, self.J2.shape[1]))
        rhs[ic:] = self.J2 * theta[:, None]
        dbeta = -self._solve(rhs)  # (p1, m)
        deta = self.D.dot(dbeta)  # (n, m)
        Xs = self._rows(S)
        U = self._solve(Xs)  # (p1, |S|)
        h = np.sum(Xs * U, axis=0)
        Z = self.D.dot(U)  # (n, |S|)
        dh = -((Z * Z).T @ ((w * self.g3)[:, None] * deta) + (U[ic:] ** 2).T @ self.J2)
        a = (w * self.g1)[S][:, None]
        d = (w * self.g2)[S][:, None]
        da = (w * self.g2)[S][:, None] * deta[S]
        dd = (w * self.g3)[S][:, None] * deta[S]
        h = h[:, None]
        q = 1.0 - d * h
        eta_t = self.eta[S][:, None] + a * h / q
        deta_t = deta[S] + ((da * h + a * dh) * q + a * h * (dd * h + d * dh)) / q**2
        lt, l1t = pb.loss.derivatives(pb.y[S][:, None], eta_t, (0, 1))
        return lt[:, 0], l1t * deta_t

    # ------------------------------------------------------------------ exact refits
    def _weights(self, S: np.ndarray) -> np.ndarray:
        Wm = np.repeat(self.w[:, None], S.size, axis=1)
        Wm[S, np.arange(S.size)] = 0.0
        return Wm

    def _objective(self, Wm: np.ndarray, E: np.ndarray, B: np.ndarray) -> np.ndarray:
        lv = self.pb.loss.value(self.pb.y[:, None], E)
        return np.sum(Wm * lv, axis=0) + 0.5 * np.sum(self.pad[:, None] * B * B, axis=0)

    def _precond(self, S: np.ndarray):
        """``H_{-i}(beta)^{-1}`` for every column (Sherman-Morrison on the full factor)."""
        Xs = self._rows(S)
        U = self._solve(Xs)
        h = np.sum(Xs * U, axis=0)
        d = (self.w * self.g2)[S]
        q = 1.0 - d * h
        coef = np.where(q > 1e-12, d / np.where(q > 1e-12, q, 1.0), 0.0)

        def apply(R: np.ndarray, cols: np.ndarray) -> np.ndarray:
            Uc = U[:, cols]
            return self._solve(R) + Uc * (coef[cols] * np.sum(Uc * R, axis=0))

        return apply

    def _hess_matvec(self, Wm: np.ndarray, E: np.ndarray):
        c = Wm * self.pb.loss.derivatives(self.pb.y[:, None], E, (2,))[0]

        def apply(V: np.ndarray, cols: np.ndarray) -> np.ndarray:
            return self.D.tdot(c[:, cols] * self.D.dot(V)) + self.pad[:, None] * V

        return apply

    def _gradient(self, Wm: np.ndarray, E: np.ndarray, B: np.ndarray) -> np.ndarray:
        (g1,) = self.pb.loss.derivatives(self.pb.y[:, None], E, (1,))
        return self.D.tdot(Wm * g1) + self.pad[:, None] * B

    def refits(
        self, S: np.ndarray, start: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, int]:
        """The exact refits without each sample of S (columns of B, shape (p1, |S|)),
        from ``start`` (default: the full fit), their linear predictors (n, |S|), and how
        many did not reach the tolerance."""
        Wm = self._weights(S)
        Wsum = Wm.sum(axis=0)
        tol = self.pb.options.tol * REFIT_TOL_SHARE
        precond = self._precond(S)
        B = np.repeat(self.beta[:, None], S.size, axis=1) if start is None else start.copy()
        E = self.D.eta(B)
        act = np.arange(S.size)  # the refits still iterating
        for _ in range(REFIT_MAX_ITER):
            Wa, Ea, Ba = Wm[:, act], E[:, act], B[:, act]
            G = self._gradient(Wa, Ea, Ba)
            todo = np.max(np.abs(G), axis=0) / Wsum[act] > tol
            act, G, Wa, Ea, Ba = act[todo], G[:, todo], Wa[:, todo], Ea[:, todo], Ba[:, todo]
            if act.size == 0:
                break
            step = _pcg(self._hess_matvec(Wa, Ea), _on(precond, act), G, NEWTON_CG_RTOL)
            dE = self.D.dot(step)
            f = self._objective(Wa, Ea, Ba)
            t = np.ones(act.size)
            for _ in range(MAX_HALVINGS):  # damped where the full step does not decrease
                bad = ~(self._objective(Wa, Ea - t * dE, Ba - t * step) <= f + 1e-12 * np.abs(f))
                if not np.any(bad):
                    break
                t = np.where(bad, 0.5 * t, t)
            B[:, act] = Ba - t * step
            E[:, act] = Ea - t * dE
        G = self._gradient(Wm, E, B)
        n_nc = int(np.sum(np.max(np.abs(G), axis=0) / Wsum > self.pb.options.tol))
        return B, E, n_nc

    def exact_terms(
        self, S: np.ndarray, start: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
        """``(l(y_i, eta*_i), d l(y_i, eta*_i) / d params, refits not at tol, refits)`` of
        the samples S: shapes (|S|,), (|S|, m) and (p1, |S|) (refits from ``start``)."""
        pb, ic = self.pb, self.ic
        B, E, n_nc = self.refits(S, start)
        Wm = self._weights(S)
        cols = np.arange(S.size)
        eta_star = E[S, cols]
        ls, l1s = pb.loss.derivatives(pb.y[S], eta_star, (0, 1))
        Z = _pcg(self._hess_matvec(Wm, E), self._precond(S), self._rows(S), CG_RTOL)
        # d l / d lambda_k = -l' z^T (J2_k * theta*)
        grad = -(l1s[:, None]) * ((Z[ic:] * B[ic:]).T @ self.J2)
        return ls, grad, n_nc, B


@dataclass(frozen=True)
class FixedSetTerms:
    """What the refitted samples S change of ALO's mean at one penalty.

    Attributes
    ----------
    exact : ndarray of shape (|S|,)
        Their exact leave-one-out losses.
    value : float
        ``R_S - ALO mean``.
    grad : ndarray of shape (m,)
        ``d(R_S - ALO mean) / d params``.
    n_not_converged : int
        Refits that did not reach the fit tolerance.
    refits : ndarray of shape (p1, |S|)
        The refits' coefficients (a warm start at a nearby penalty).
    """

    exact: np.ndarray
    value: float
    grad: np.ndarray
    n_not_converged: int
    refits: np.ndarray


def refined_terms(
    pb: Any, beta: np.ndarray, J2: np.ndarray, S: np.ndarray, start: np.ndarray | None = None
) -> FixedSetTerms:
    """What the samples S change of ALO's mean and of its derivative at the fit ``beta``
    when their ALO losses are replaced by exact leave-one-out ones (module docstring);
    the refits start from ``start`` (p1, |S|) when given, else from ``beta``."""
    S = np.asarray(S, dtype=np.int64)
    rd = RefitDerivatives(pb, beta, J2)
    W = float(rd.w.sum())
    la, ga = rd.alo_terms(S)
    le, ge, n_nc, B = rd.exact_terms(S, start)
    ws = rd.w[S]
    return FixedSetTerms(le, float(ws @ (le - la)) / W, (ws @ (ge - ga)) / W, n_nc, B)
