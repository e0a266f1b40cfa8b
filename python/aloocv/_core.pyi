"""Type stubs of the compiled core ``aloocv._core`` (pybind11)."""

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

_F64 = NDArray[np.float64]
# X: a 2-d float64 array (any layout) or a CSR tuple (data, indices, indptr, n, p)
_Design = _F64 | tuple[_F64, NDArray[np.int32], NDArray[np.int32], int, int]
# loss: a registered name or (name, tweedie_power, huber_delta)
_Loss = str | tuple[str, float, float]

# ---------------------------------------------------------------- result classes
# Read-only; arrays are built once per result (a property returns the same array).

class FitResult:
    """A fitted GLM (the core's Newton or elastic-net fit)."""

    @property
    def coef(self) -> _F64: ...
    @property
    def intercept(self) -> float: ...
    @property
    def n_iter(self) -> int: ...
    @property
    def converged(self) -> bool: ...
    @property
    def objective(self) -> float: ...
    @property
    def grad_norm(self) -> float: ...
    @property
    def hessian_passes(self) -> int: ...
    @property
    def single_hessian_passes(self) -> int: ...
    @property
    def sampled_hessian_passes(self) -> int: ...
    @property
    def matvec_passes(self) -> int: ...
    @property
    def fused_end_fallbacks(self) -> int: ...
    @property
    def stale_eta(self) -> float: ...
    @property
    def cg_iterations(self) -> int: ...

class RandomLeveragesResult:
    """Per-group Hutchinson estimates of the leverages (docs/math/matrix_free.md)."""

    @property
    def plain(self) -> _F64: ...
    @property
    def control(self) -> _F64: ...
    @property
    def diag0(self) -> _F64: ...
    @property
    def eta(self) -> _F64: ...
    @property
    def g(self) -> _F64: ...
    @property
    def d(self) -> _F64: ...
    @property
    def dual(self) -> bool: ...
    @property
    def exact_rows(self) -> int: ...
    @property
    def cg_iterations(self) -> int: ...
    @property
    def passes(self) -> int: ...
    @property
    def converged(self) -> bool: ...
    @property
    def worst_residual(self) -> float: ...

class LooResult(FitResult):
    """A fit and its leave-one-out values."""

    @property
    def losses(self) -> _F64: ...
    @property
    def predictions(self) -> _F64: ...
    @property
    def leverages(self) -> _F64 | None: ...
    @property
    def downdate(self) -> _F64 | None: ...
    @property
    def rcond(self) -> float | None: ...
    @property
    def n_not_converged(self) -> int: ...
    @property
    def n_singular(self) -> int: ...
    @property
    def singular_samples(self) -> NDArray[np.int64] | None: ...
    @property
    def grad_l2(self) -> _F64 | None: ...
    @property
    def grad_l1(self) -> _F64 | None: ...
    @property
    def grad_along(self) -> float | None: ...
    @property
    def eta(self) -> _F64 | None: ...

class AloTangentsResult(LooResult):
    """ALO, its exact gradient and the gradient's directional derivatives."""

    @property
    def tangent_l2(self) -> _F64: ...
    @property
    def tangent_l1(self) -> _F64: ...

class KFoldResult(FitResult):
    """The full fit and the held-out values of K-fold or held-out sets."""

    @property
    def losses(self) -> _F64: ...
    @property
    def predictions(self) -> _F64: ...
    @property
    def n_not_converged(self) -> int: ...
    @property
    def n_woodbury(self) -> int: ...
    @property
    def seconds_fit(self) -> float: ...
    @property
    def seconds_folds(self) -> float: ...

class DualResult:
    """A fit through the n x n dual system, with its leave-one-out values when asked for."""

    @property
    def coef(self) -> _F64: ...
    @property
    def intercept(self) -> float: ...
    @property
    def n_iter(self) -> int: ...
    @property
    def converged(self) -> bool: ...
    @property
    def objective(self) -> float: ...
    @property
    def grad_norm(self) -> float: ...
    @property
    def alpha(self) -> _F64: ...
    @property
    def losses(self) -> _F64 | None: ...
    @property
    def predictions(self) -> _F64 | None: ...
    @property
    def leverages(self) -> _F64 | None: ...
    @property
    def downdate(self) -> _F64 | None: ...
    @property
    def n_not_converged(self) -> int | None: ...
    @property
    def n_singular(self) -> int | None: ...
    @property
    def singular_samples(self) -> NDArray[np.int64] | None: ...
    @property
    def grad_l2(self) -> _F64 | None: ...
    @property
    def grad_l1(self) -> _F64 | None: ...

class RidgePathResult:
    """Exact ridge leave-one-out along a grid of k lambdas."""

    @property
    def losses(self) -> _F64: ...  # (n, k)
    @property
    def predictions(self) -> _F64: ...  # (n, k)
    @property
    def coef(self) -> _F64: ...  # (p, k)
    @property
    def intercept(self) -> _F64: ...  # (k,)

class RidgeSpectrumResult:
    """X_c^T X_c = V diag(s) V^T and C = V^T X_c^T Z."""

    @property
    def s(self) -> _F64: ...
    @property
    def V(self) -> _F64: ...
    @property
    def C(self) -> _F64: ...
    @property
    def mu(self) -> _F64: ...

class MultiRidgeScores:
    """Leave-one-out residual sums of many responses along a grid of k lambdas."""

    @property
    def s2(self) -> _F64: ...  # (k, T) sum_i w_i e_it^2
    @property
    def s4(self) -> _F64: ...  # (k, T) sum_i w_i e_it^4
    @property
    def rank(self) -> int: ...  # filter GEMMs
    @property
    def passes(self) -> float: ...  # their cost in full GEMMs of inner dimension p

class MultiRidgeSolution:
    """Ridge coefficients of many responses, one lambda each."""

    @property
    def coef(self) -> _F64: ...  # (p, T)
    @property
    def intercept(self) -> _F64: ...  # (T,)
    @property
    def predictions(self) -> _F64 | None: ...  # (n, T) LOO predictions

class MultinomialFitResult:
    """A multinomial logistic fit."""

    @property
    def coef(self) -> _F64: ...  # (K, p)
    @property
    def intercept(self) -> _F64: ...  # (K,)
    @property
    def n_iter(self) -> int: ...
    @property
    def converged(self) -> bool: ...
    @property
    def objective(self) -> float: ...
    @property
    def grad_norm(self) -> float: ...
    @property
    def hessian_passes(self) -> int: ...
    @property
    def hessian_products(self) -> int: ...

class MultinomialLooResult(MultinomialFitResult):
    """A multinomial fit and its leave-one-out values."""

    @property
    def predictions(self) -> _F64: ...  # (n, K)
    @property
    def losses(self) -> _F64: ...
    @property
    def n_not_converged(self) -> int: ...
    @property
    def leverages(self) -> _F64 | None: ...  # (n, K, K)
    @property
    def det(self) -> _F64 | None: ...
    @property
    def gradient(self) -> _F64 | None: ...

class ChunkSumsResult:
    """One row chunk's sums at beta."""

    @property
    def loss(self) -> float: ...
    @property
    def weight(self) -> float: ...
    @property
    def grad(self) -> _F64: ...
    @property
    def hess(self) -> _F64 | None: ...
    @property
    def step_max(self) -> float | None: ...

class ChunkLooResult:
    """One row chunk's leave-one-out values."""

    @property
    def eta(self) -> _F64: ...
    @property
    def losses(self) -> _F64: ...
    @property
    def predictions(self) -> _F64: ...
    @property
    def leverages(self) -> _F64: ...
    @property
    def downdate(self) -> _F64: ...
    @property
    def r(self) -> _F64 | None: ...
    @property
    def S(self) -> _F64 | None: ...

class ChunkRefitsResult:
    """One row chunk's sums for a batch of B leave-one-out refits."""

    @property
    def loss(self) -> _F64: ...  # (B,)
    @property
    def grad(self) -> _F64: ...  # (p1, B)
    @property
    def hess(self) -> _F64: ...  # (p1, p1, m)

def set_blas(capsules: dict[str, Any]) -> None: ...
def use_blas(*, enabled: bool) -> None: ...
def blas_enabled() -> bool: ...
def has_row_gemv() -> bool: ...
def use_row_kernels(*, enabled: bool) -> None: ...
def row_gemv(
    A: NDArray[np.float64] | NDArray[np.float32],
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    *,
    transpose: bool,
    beta: float,
) -> bool: ...
def vector_math(fn: str, x: NDArray[np.float64]) -> NDArray[np.float64]: ...
def max_threads() -> int: ...
def loss_names() -> list[str]: ...
def fit(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    loss: _Loss,
    penalty: _F64,
    *,
    fit_intercept: bool,
    tol: float,
    max_iter: int,
    n_threads: int,
    beta0: _F64 | None = None,
    l1: _F64 | None = None,
    offset: _F64 | None = None,
) -> FitResult: ...
def hessian(X: _Design, d: _F64, *, fit_intercept: bool, n_threads: int) -> _F64: ...
def first_nonfinite_row(X: _Design, *, n_threads: int) -> int: ...
def cg_fit(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    loss: _Loss,
    penalty: _F64,
    *,
    fit_intercept: bool,
    tol: float,
    max_iter: int,
    n_threads: int,
    beta0: _F64 | None = None,
    offset: _F64 | None = None,
    max_cg: int = 250,
) -> FitResult: ...
def cg_state(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    loss: _Loss,
    penalty: _F64,
    *,
    fit_intercept: bool,
    beta: _F64,
    tol: float,
    n_threads: int,
    offset: _F64 | None = None,
) -> FitResult: ...
def alo_jackknife(
    loss: _Loss,
    y: _F64,
    sample_weight: _F64 | None,
    eta: _F64,
    g: _F64,
    d: _F64,
    groups: _F64,
    *,
    dh_clip: float,
    n_threads: int,
) -> tuple[_F64, _F64, _F64, _F64, _F64, _F64]: ...

class MatrixFreePoint:
    """The matrix-free route's state at one beta, shared by its solves there
    (docs/math/matrix_free.md, "One point, many solves")."""

    def __init__(
        self,
        X: _Design,
        y: _F64,
        sample_weight: _F64 | None,
        loss: _Loss,
        penalty: _F64,
        *,
        fit_intercept: bool,
        beta: _F64,
        offset: _F64 | None = None,
        n_threads: int,
    ) -> None: ...
    @property
    def eta(self) -> _F64: ...
    def random_leverages(
        self,
        *,
        n_probes: int,
        n_groups: int,
        seed: int,
        cg_rtol: float,
        max_cg: int,
        first_probe: int = 0,
        dual: bool = False,
    ) -> RandomLeveragesResult: ...
    def row_leverages(
        self,
        rows: NDArray[np.int64],
        *,
        cg_rtol: float,
        max_cg: int,
        return_solves: bool = False,
    ) -> _F64 | tuple[_F64, _F64]: ...
    def cg_refits(
        self,
        rows: NDArray[np.int64],
        *,
        starts: _F64 | None = None,
        tol: float,
        max_iter: int,
        max_cg: int = 250,
    ) -> tuple[_F64, NDArray[np.bool_], NDArray[np.int64], int, int]: ...
    def random_leverages_gradient(
        self,
        *,
        n_probes: int,
        n_groups: int,
        seed: int,
        cg_rtol: float,
        max_cg: int,
        first_probe: int = 0,
        control: bool,
        rho: _F64,
        alpha: _F64,
        gamma: _F64,
    ) -> _F64: ...

def loss_eval(
    loss: _Loss, y: _F64, eta: _F64, *, fused: bool = False
) -> tuple[_F64, _F64, _F64, _F64, _F64, _F64]: ...
def loss_derivatives(
    loss: _Loss, y: _F64, eta: _F64, *, orders: Sequence[int]
) -> tuple[_F64, ...]: ...
def loss_value(loss: _Loss, y: _F64, eta: _F64) -> _F64: ...
def loss_valid(loss: _Loss, y: _F64, index0: int = 0) -> None: ...
def loo(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    loss: _Loss,
    penalty: _F64,
    *,
    fit_intercept: bool,
    method: str,
    tol: float,
    max_iter: int,
    n_threads: int,
    beta: _F64 | None = None,
    refit: bool = False,
    l1: _F64 | None = None,
    gradient: bool = False,
    gradient_kind: str = "exact",
    subset: NDArray[np.int64] | None = None,
    offset: _F64 | None = None,
) -> LooResult: ...
def ridge_path(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    lambdas: _F64,
    *,
    fit_intercept: bool,
    n_threads: int,
) -> RidgePathResult: ...
def kfold(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    loss: _Loss,
    penalty: _F64,
    *,
    fit_intercept: bool,
    folds: NDArray[np.int32],
    n_folds: int,
    method: str,
    tol: float,
    max_iter: int,
    n_threads: int,
    l1: _F64 | None = None,
    offset: _F64 | None = None,
) -> KFoldResult: ...
def kfold_foldwise_end(loss: _Loss, p1: int, *, has_l1: bool, sizes: NDArray[np.int64]) -> bool: ...
def holdout(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    loss: _Loss,
    penalty: _F64,
    *,
    fit_intercept: bool,
    indices: NDArray[np.int32],
    indptr: NDArray[np.int32],
    method: str,
    tol: float,
    max_iter: int,
    n_threads: int,
    l1: _F64 | None = None,
    offset: _F64 | None = None,
) -> KFoldResult: ...
def dual(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    loss: _Loss,
    penalty: _F64,
    *,
    fit_intercept: bool,
    method: str,
    tol: float,
    max_iter: int,
    n_threads: int,
    want_loo: bool = True,
    beta: _F64 | None = None,
    subset: NDArray[np.int64] | None = None,
    gradient: bool = False,
    offset: _F64 | None = None,
) -> DualResult: ...
def kernel_ridge_loo(
    K: _F64, y: _F64, sample_weight: _F64 | None, lam: float, *, fit_intercept: bool
) -> DualResult: ...
def ridge_spectrum(
    X: _Design, Z: _F64, *, fit_intercept: bool, n_threads: int
) -> RidgeSpectrumResult: ...

class TuneState:
    def __init__(
        self,
        X: _Design,
        y: _F64,
        sample_weight: _F64 | None,
        loss: _Loss,
        penalty: _F64,
        *,
        fit_intercept: bool,
        tol: float,
        max_iter: int,
        n_threads: int,
        l1: _F64 | None = None,
        beta0: _F64 | None = None,
        offset: _F64 | None = None,
    ) -> None: ...
    def set_penalty(self, penalty: _F64, l1: _F64 | None = None) -> None: ...
    def set_beta(self, beta: _F64) -> None: ...
    def keep(self) -> None: ...
    def restore(self) -> bool: ...
    def fit(self) -> FitResult: ...
    def step(self, *, refresh: bool) -> float: ...
    def alo(
        self,
        *,
        gradient: bool = True,
        gradient_kind: str = "exact",
        along_l2: _F64 | None = None,
        along_l1: _F64 | None = None,
    ) -> LooResult: ...
    def alo_tangents(self, d_l2: _F64, d_l1: _F64) -> AloTangentsResult: ...
    def sample_gradient(self, indices: NDArray[np.int64]) -> tuple[float, _F64, _F64]: ...
    def state(self) -> FitResult: ...

def multinomial_fit(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    n_classes: int,
    penalty: _F64,
    *,
    fit_intercept: bool,
    tol: float,
    max_iter: int,
    n_threads: int,
    beta0: _F64 | None = None,
) -> MultinomialFitResult: ...
def multinomial_cg_fit(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    n_classes: int,
    penalty: _F64,
    *,
    fit_intercept: bool,
    tol: float,
    max_iter: int,
    n_threads: int,
    beta0: _F64 | None = None,
    offset: _F64 | None = None,
    max_cg: int = 250,
) -> MultinomialFitResult: ...
def multinomial_random_blocks(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    n_classes: int,
    penalty: _F64,
    *,
    fit_intercept: bool,
    beta: _F64,
    offset: _F64 | None = None,
    n_probes: int,
    n_groups: int,
    seed: int,
    cg_rtol: float,
    max_cg: int,
    n_threads: int,
    first_probe: int = 0,
) -> tuple[_F64, _F64, _F64, _F64, int, int, bool, float]: ...
def multinomial_row_blocks(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    n_classes: int,
    penalty: _F64,
    *,
    fit_intercept: bool,
    beta: _F64,
    offset: _F64 | None = None,
    rows: NDArray[np.int64],
    cg_rtol: float,
    max_cg: int,
    n_threads: int,
) -> _F64: ...
def multinomial_loo(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    n_classes: int,
    penalty: _F64,
    *,
    fit_intercept: bool,
    method: str,
    tol: float,
    max_iter: int,
    n_threads: int,
    beta0: _F64 | None = None,
    refit: bool = True,
    return_gradient: bool = False,
    subset: NDArray[np.int64] | None = None,
) -> MultinomialLooResult: ...
def multinomial_chunk_sums(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    n_classes: int,
    penalty: _F64,
    *,
    fit_intercept: bool,
    beta: _F64,
    hessian: bool,
    n_threads: int,
) -> ChunkSumsResult: ...
def multinomial_chunk_loo(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    n_classes: int,
    penalty: _F64,
    *,
    fit_intercept: bool,
    beta: _F64,
    H: _F64,
    method: str,
    n_threads: int,
    gradient: bool = False,
    weight_sum: float = 1.0,
) -> ChunkLooResult: ...
def multinomial_chunk_adjoint(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    n_classes: int,
    penalty: _F64,
    *,
    fit_intercept: bool,
    beta: _F64,
    H: _F64,
    M: _F64,
    weight_sum: float,
    n_threads: int,
) -> _F64: ...
def thread_limit() -> int: ...
def set_thread_limit(n: int) -> None: ...

class MultiRidge:
    """Ridge (squared loss, L2) for many responses sharing one decomposition of X."""

    def __init__(
        self,
        X: _Design,
        Y: _F64,
        sample_weight: _F64 | None,
        *,
        fit_intercept: bool,
        penalty: _F64 | None,
        n_threads: int,
    ) -> None: ...
    @property
    def n_targets(self) -> int: ...
    def scores(self, lambdas: _F64, n_threads: int) -> MultiRidgeScores: ...
    def solve(self, lambdas: _F64, *, predictions: bool, n_threads: int) -> MultiRidgeSolution: ...
    def leverages(self, lam: float) -> _F64: ...
    def folds(self, lam: float, folds: NDArray[np.int32], n_folds: int, n_threads: int) -> _F64: ...

def chunk_sums(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    loss: _Loss,
    *,
    fit_intercept: bool,
    beta: _F64,
    hessian: bool,
    check: bool,
    n_threads: int,
    offset: _F64 | None = None,
    step: _F64 | None = None,
    clip: bool = False,
) -> ChunkSumsResult: ...
def chunk_loo(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    loss: _Loss,
    *,
    fit_intercept: bool,
    beta: _F64,
    H: _F64,
    method: str,
    gradient: bool,
    inv_sw: float,
    n_threads: int,
    offset: _F64 | None = None,
) -> ChunkLooResult: ...
def chunk_adjoint(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    loss: _Loss,
    *,
    fit_intercept: bool,
    beta: _F64,
    M: _F64,
    n_threads: int,
    offset: _F64 | None = None,
) -> _F64: ...
def chunk_folds(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    loss: _Loss,
    *,
    fit_intercept: bool,
    beta: _F64,
    fold: NDArray[np.int32],
    n_folds: int,
    n_threads: int,
    offset: _F64 | None = None,
) -> tuple[_F64, _F64]: ...
def chunk_refits(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    loss: _Loss,
    *,
    fit_intercept: bool,
    beta: _F64,
    exclude: NDArray[np.int32],
    hess_cols: NDArray[np.int32],
    n_threads: int,
    offset: _F64 | None = None,
) -> ChunkRefitsResult: ...
def quadratic_cd(H: _F64, g: _F64, beta: _F64, l1: _F64, tol: float) -> _F64: ...

class RefitBatch:
    """Exact leave-one-out refits of a batch in lockstep (exact_loo's policy), their sums
    supplied by the caller (refit_batch.hpp)."""

    def __init__(
        self,
        H: _F64,
        X: _F64,
        y: _F64,
        sample_weight: _F64 | None,
        offset: _F64 | None,
        loss: _Loss,
        *,
        fit_intercept: bool,
        beta: _F64,
        f: float,
        grad: _F64,
        penalty: _F64,
        weight_sum: float,
        tol: float,
        max_iter: int,
        chord_ratio: float | None = None,
        max_chord: int | None = None,
    ) -> None: ...
    # (cols (k,), beta (p1, k), hess_cols) or None when finished
    def request(self) -> tuple[NDArray[np.int64], _F64, NDArray[np.int64]] | None: ...
    def feed(self, loss: _F64, grad: _F64, hess: _F64) -> None: ...
    # (losses, predictions, n_not_converged, singular positions)
    def results(self) -> tuple[_F64, _F64, int, NDArray[np.int64]]: ...

# source(beta, *, step, hessian, clip) -> (sum w l, X~^T (w l') (p1,), X~^T D X~ (p1, p1)
# or None, max |X~ step| or 0.0); the options come as keywords
_SumsSource = Callable[..., tuple[float, _F64, _F64 | None, float]]

class SumsFitResult:
    """A Newton fit over a sums source."""

    @property
    def beta(self) -> _F64: ...
    @property
    def grad(self) -> _F64: ...
    @property
    def hessian(self) -> _F64: ...
    @property
    def unpenalized_hessian(self) -> _F64: ...
    @property
    def hessian_at_point(self) -> bool: ...
    @property
    def objective(self) -> float: ...
    @property
    def n_iter(self) -> int: ...
    @property
    def hessian_passes(self) -> int: ...
    @property
    def n_evals(self) -> int: ...
    @property
    def converged(self) -> bool: ...
    @property
    def stalled(self) -> bool: ...
    @property
    def grad_norm(self) -> float: ...
    @property
    def loss(self) -> float: ...
    @property
    def loss_grad(self) -> _F64: ...
    @property
    def end_guard_step(self) -> _F64 | None: ...
    @property
    def end_guard_dec(self) -> float: ...

FUSED_END_ETA: float

# The core's Newton policy (newton_driver.hpp, loo.hpp's exact_loo, multinomial.hpp)
ARMIJO: float
MAX_HALVINGS: int
TINY_DECREASE: float
STALL_ITERS: int
EXACT_CHORD_RATIO: float
EXACT_MAX_CHORD: int
MIN_CLASS_SHARE: float
DUAL_HEAD_COLUMNS: int

def sums_settle_end(
    source: _SumsSource,
    loss: _Loss,
    penalty: _F64,
    *,
    fit_intercept: bool,
    beta: _F64,
    unpenalized_hessian: _F64,
    step: _F64,
    dec: float,
    weight_sum: float,
    tol: float,
    loss_at_beta: float,
    grad_at_beta: _F64,
) -> SumsFitResult: ...
def sums_fit(
    source: _SumsSource,
    loss: _Loss,
    penalty: _F64,
    *,
    fit_intercept: bool,
    beta0: _F64,
    weight_sum: float,
    tol: float,
    max_iter: int,
    fresh_end: bool = False,
    previous_hessian: _F64 | None = None,
    secant: bool = False,
    defer_end_guard: bool = False,
    start_loss: float | None = None,
    start_grad: _F64 | None = None,
) -> SumsFitResult: ...
def multinomial_sums_fit(
    source: _SumsSource,
    n_classes: int,
    penalty: _F64,
    *,
    fit_intercept: bool,
    beta0: _F64,
    weight_sum: float,
    tol: float,
    max_iter: int,
    fresh_end: bool = False,
) -> SumsFitResult: ...

class EnetSumsFitResult:
    """An elastic-net fit over a sums source."""

    @property
    def beta(self) -> _F64: ...
    @property
    def grad(self) -> _F64: ...
    @property
    def hessian(self) -> _F64: ...
    @property
    def active(self) -> NDArray[np.int64]: ...
    @property
    def objective(self) -> float: ...
    @property
    def n_iter(self) -> int: ...
    @property
    def hessian_passes(self) -> int: ...
    @property
    def n_evals(self) -> int: ...
    @property
    def converged(self) -> bool: ...
    @property
    def grad_norm(self) -> float: ...

def enet_sums_fit(
    source: Callable[..., tuple[float, _F64, _F64 | None, float]],
    loss: _Loss,
    penalty: _F64,
    l1: _F64,
    *,
    fit_intercept: bool,
    beta0: _F64,
    weight_sum: float,
    tol: float,
    max_iter: int,
) -> EnetSumsFitResult: ...
