"""Type stubs of the compiled core ``aloocv._core`` (pybind11)."""

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

_F64 = NDArray[np.float64]
# X: a 2-d float64 array (any layout) or a CSR tuple (data, indices, indptr, n, p)
_Design = _F64 | tuple[_F64, NDArray[np.int32], NDArray[np.int32], int, int]
# loss: a registered name or (name, tweedie_power, huber_delta)
_Loss = str | tuple[str, float, float]

def set_blas(capsules: dict[str, Any]) -> None: ...
def use_blas(enabled: bool) -> None: ...
def blas_enabled() -> bool: ...
def max_threads() -> int: ...
def loss_names() -> list[str]: ...
def fit(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    loss: _Loss,
    penalty: _F64,
    fit_intercept: bool,
    tol: float,
    max_iter: int,
    n_threads: int,
    beta0: _F64 | None = None,
    l1: _F64 | None = None,
    offset: _F64 | None = None,
) -> dict[str, Any]: ...
def hessian(X: _Design, d: _F64, fit_intercept: bool, n_threads: int) -> _F64: ...
def loss_eval(
    loss: _Loss, y: _F64, eta: _F64, fused: bool = ...
) -> tuple[_F64, _F64, _F64, _F64, _F64, _F64]: ...
def loss_valid(loss: _Loss, y: _F64, index0: int = 0) -> None: ...
def loo(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    loss: _Loss,
    penalty: _F64,
    fit_intercept: bool,
    method: str,
    tol: float,
    max_iter: int,
    n_threads: int,
    beta: _F64 | None = None,
    refit: bool = False,
    l1: _F64 | None = None,
    gradient: bool = False,
    subset: NDArray[np.int64] | None = None,
    offset: _F64 | None = None,
) -> dict[str, Any]: ...
def ridge_path(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    lambdas: _F64,
    fit_intercept: bool,
    n_threads: int,
) -> dict[str, Any]: ...
def kfold(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    loss: _Loss,
    penalty: _F64,
    fit_intercept: bool,
    folds: NDArray[np.int32],
    n_folds: int,
    method: str,
    tol: float,
    max_iter: int,
    n_threads: int,
    l1: _F64 | None = None,
    offset: _F64 | None = None,
) -> dict[str, Any]: ...
def kfold_foldwise_end(loss: _Loss, p1: int, has_l1: bool, sizes: NDArray[np.int64]) -> bool: ...
def holdout(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    loss: _Loss,
    penalty: _F64,
    fit_intercept: bool,
    indices: NDArray[np.int32],
    indptr: NDArray[np.int32],
    method: str,
    tol: float,
    max_iter: int,
    n_threads: int,
    l1: _F64 | None = None,
    offset: _F64 | None = None,
) -> dict[str, Any]: ...
def dual(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    loss: _Loss,
    penalty: _F64,
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
) -> dict[str, Any]: ...
def kernel_ridge_loo(
    K: _F64, y: _F64, sample_weight: _F64 | None, lam: float, fit_intercept: bool
) -> dict[str, Any]: ...
def ridge_spectrum(X: _Design, Z: _F64, fit_intercept: bool, n_threads: int) -> dict[str, Any]: ...

class TuneState:
    def __init__(
        self,
        X: _Design,
        y: _F64,
        sample_weight: _F64 | None,
        loss: _Loss,
        penalty: _F64,
        fit_intercept: bool,
        tol: float,
        max_iter: int,
        n_threads: int,
        l1: _F64 | None = None,
        beta0: _F64 | None = None,
        offset: _F64 | None = None,
    ) -> None: ...
    def set_penalty(self, penalty: _F64, l1: _F64 | None = None) -> None: ...
    def fit(self) -> dict[str, Any]: ...
    def step(self, refresh: bool) -> float: ...
    def alo(self, gradient: bool = True) -> dict[str, Any]: ...
    def sample_gradient(self, indices: NDArray[np.int64]) -> tuple[float, _F64, _F64]: ...
    def state(self) -> dict[str, Any]: ...

def multinomial_fit(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    n_classes: int,
    penalty: _F64,
    fit_intercept: bool,
    tol: float,
    max_iter: int,
    n_threads: int,
    beta0: _F64 | None = None,
) -> dict[str, Any]: ...
def multinomial_loo(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    n_classes: int,
    penalty: _F64,
    fit_intercept: bool,
    method: str,
    tol: float,
    max_iter: int,
    n_threads: int,
    beta0: _F64 | None = None,
    refit: bool = True,
    return_gradient: bool = False,
    subset: NDArray[np.int64] | None = None,
) -> dict[str, Any]: ...
def multinomial_chunk_sums(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    n_classes: int,
    penalty: _F64,
    fit_intercept: bool,
    beta: _F64,
    hessian: bool,
    n_threads: int,
) -> dict[str, Any]: ...
def multinomial_chunk_loo(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    n_classes: int,
    penalty: _F64,
    fit_intercept: bool,
    beta: _F64,
    H: _F64,
    method: str,
    n_threads: int,
    gradient: bool = False,
    weight_sum: float = 1.0,
) -> dict[str, Any]: ...
def multinomial_chunk_adjoint(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    n_classes: int,
    penalty: _F64,
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
        fit_intercept: bool,
        penalty: _F64 | None,
        n_threads: int,
    ) -> None: ...
    @property
    def n_targets(self) -> int: ...
    # {"s2": (k, T) sum_i w_i e_it^2, "s4": (k, T) sum_i w_i e_it^4, "rank": filter GEMMs,
    #  "passes": their cost in full GEMMs of inner dimension p}
    def scores(self, lambdas: _F64, n_threads: int) -> dict[str, Any]: ...
    # {"coef": (p, T), "intercept": (T,), "predictions": (n, T) LOO predictions or None}
    def solve(self, lambdas: _F64, predictions: bool, n_threads: int) -> dict[str, Any]: ...
    def leverages(self, lam: float) -> _F64: ...
    def folds(self, lam: float, folds: NDArray[np.int32], n_folds: int, n_threads: int) -> _F64: ...

def chunk_sums(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    loss: _Loss,
    fit_intercept: bool,
    beta: _F64,
    hessian: bool,
    check: bool,
    n_threads: int,
    offset: _F64 | None = None,
    step: _F64 | None = None,
    clip: bool = False,
) -> dict[str, Any]: ...
def chunk_loo(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    loss: _Loss,
    fit_intercept: bool,
    beta: _F64,
    H: _F64,
    method: str,
    gradient: bool,
    inv_sw: float,
    n_threads: int,
    offset: _F64 | None = None,
) -> dict[str, Any]: ...
def chunk_adjoint(
    X: _Design,
    y: _F64,
    sample_weight: _F64 | None,
    loss: _Loss,
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
    fit_intercept: bool,
    beta: _F64,
    exclude: NDArray[np.int32],
    hess_cols: NDArray[np.int32],
    n_threads: int,
    offset: _F64 | None = None,
) -> dict[str, Any]: ...
def quadratic_cd(H: _F64, g: _F64, beta: _F64, l1: _F64, tol: float) -> _F64: ...

# source(beta, step, hessian, clip) -> (sum w l, X~^T (w l') (p1,), X~^T D X~ (p1, p1) or
# None, max |X~ step| or 0.0)
_SumsSource = Callable[[_F64, _F64 | None, bool, bool], tuple[float, _F64, _F64 | None, float]]

class SumsFitResult:
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

def sums_fit(
    source: _SumsSource,
    loss: _Loss,
    penalty: _F64,
    fit_intercept: bool,
    beta0: _F64,
    weight_sum: float,
    tol: float,
    max_iter: int,
    fresh_end: bool = False,
    previous_hessian: _F64 | None = None,
    secant: bool = False,
) -> SumsFitResult: ...
def multinomial_sums_fit(
    source: _SumsSource,
    n_classes: int,
    penalty: _F64,
    fit_intercept: bool,
    beta0: _F64,
    weight_sum: float,
    tol: float,
    max_iter: int,
    fresh_end: bool = False,
) -> SumsFitResult: ...

class EnetSumsFitResult:
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
    fit_intercept: bool,
    beta0: _F64,
    weight_sum: float,
    tol: float,
    max_iter: int,
) -> EnetSumsFitResult: ...
