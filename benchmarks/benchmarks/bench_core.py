"""asv benchmarks of the core: Hessian accumulation, fits, ALO, tuning.

Sizes stay modest (largest n = 100000, p = 200) so that a full ``asv run`` takes
minutes; ``benchmarks/compare.py`` has the larger side-by-side comparisons. One thread,
CPU seconds, as every job in ``_jobs.py`` (its ``_Job`` base); the peak memory of the
library's calls is ``bench_jobs.py``'s ``track_mem_*``.
"""

from __future__ import annotations

import numpy as np

import aloocv
from aloocv import _blas, _core

from . import _mem
from ._jobs import JOBS, PEN, _Job


def _logistic(n: int, p: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian design, labels from a logistic model with ||beta|| ~ 2."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = rng.standard_normal(p) / np.sqrt(p) * 2
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ beta))).astype(np.float64)
    return X, y


def _problem(n: int, p: int, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """Design and a response suited to ``loss``."""
    X, y = _logistic(n, p)
    if loss == "squared":
        y = X[:, 0] + np.random.default_rng(1).standard_normal(n)
    elif loss == "poisson":
        y = np.random.default_rng(1).poisson(np.exp(0.3 * X[:, 0])).astype(np.float64)
    return X, y


class Hessian(_Job):
    """``X~^T diag(d) X~`` by the core, with scipy's BLAS or the built-in Eigen kernels."""

    params = ([10000, 100000], [50, 200], ["C", "F"], ["blas", "eigen"])
    param_names = ("n", "p", "order", "kernel")

    def make(self, n: int, p: int, order: str, kernel: str) -> None:
        rng = np.random.default_rng(0)
        self.X = np.asarray(rng.standard_normal((n, p)), order=order)
        self.d = rng.uniform(0.0, 1.0, n)
        _blas.use_blas(kernel == "blas")

    def teardown(self, n: int, p: int, order: str, kernel: str) -> None:
        _blas.use_blas(True)
        super().teardown(n, p, order, kernel)

    def _hessian(self) -> np.ndarray:
        with _blas.single_threaded_blas():
            return _core.hessian(self.X, self.d, fit_intercept=True, n_threads=JOBS)

    def time_hessian(self, n: int, p: int, order: str, kernel: str) -> None:
        self._hessian()

    def track_mem_hessian(self, n: int, p: int, order: str, kernel: str) -> int:
        """Peak bytes of the pass: the (p+1)^2 result and the packed row blocks."""
        _mem.require()
        return _mem.call_peak(self._hessian)

    track_mem_hessian.unit = "bytes"


class HessianPeers(_Job):
    """The same product by numpy and by scipy's dsyrk (row-major X, as numpy gives it)."""

    params = ([10000, 100000], [50, 200])
    param_names = ("n", "p")

    def make(self, n: int, p: int) -> None:
        rng = np.random.default_rng(0)
        self.X = rng.standard_normal((n, p))
        self.d = rng.uniform(0.0, 1.0, n)

    def time_numpy(self, n: int, p: int) -> None:
        (self.X * self.d[:, None]).T @ self.X

    def time_scipy_dsyrk(self, n: int, p: int) -> None:
        from scipy.linalg.blas import dsyrk

        dsyrk(1.0, self.X * np.sqrt(self.d)[:, None], trans=1)


class Fit(_Job):
    """``aloocv.fit`` and ``aloocv.loo(method="alo")`` (including its fit), tol 1e-6, at
    two n and two p (their memory: ``bench_jobs.GLM.track_mem_*``)."""

    params = ([10000, 100000], [50, 200], ["squared", "logistic", "poisson"])
    param_names = ("n", "p", "loss")
    timeout = 120

    def make(self, n: int, p: int, loss: str) -> None:
        self.X, self.y = _problem(n, p, loss)
        self.loss = loss

    def time_fit(self, n: int, p: int, loss: str) -> None:
        aloocv.fit(self.X, self.y, loss=self.loss, penalty=PEN, tol=1e-6, n_jobs=JOBS)

    def time_loo_alo(self, n: int, p: int, loss: str) -> None:
        aloocv.loo(self.X, self.y, loss=self.loss, penalty=PEN, method="alo", tol=1e-6, n_jobs=JOBS)

    def track_fit_iterations(self, n: int, p: int, loss: str) -> int:
        """Newton iterations of the fit (each one Hessian pass over X)."""
        return aloocv.fit(
            self.X, self.y, loss=self.loss, penalty=PEN, tol=1e-6, n_jobs=JOBS
        ).n_iter_

    track_fit_iterations.unit = "iterations"


class FitPeer(_Job):
    """scikit-learn's ``LogisticRegression(solver="newton-cholesky")`` at the same tol."""

    params = ([10000, 100000], [50, 200])
    param_names = ("n", "p")
    timeout = 120

    def make(self, n: int, p: int) -> None:
        self.X, self.y = _logistic(n, p)

    def time_sklearn_newton_cholesky(self, n: int, p: int) -> None:
        from sklearn.linear_model import LogisticRegression

        LogisticRegression(C=1.0, solver="newton-cholesky", tol=1e-6).fit(self.X, self.y)


class Hypergradient(_Job):
    """ALO with the hypergradient of a per-feature L2 penalty."""

    params = ([10000, 50000], [50, 200])
    param_names = ("n", "p")

    def make(self, n: int, p: int) -> None:
        self.X, self.y = _logistic(n, p)

    def time_alo_with_gradient(self, n: int, p: int) -> None:
        aloocv.loo(
            self.X,
            self.y,
            loss="logistic",
            penalty=aloocv.L2(np.ones(p)),
            return_gradient=True,
            n_jobs=JOBS,
        )


class Tuning(_Job):
    """A 10-point logistic grid and the paper's 50-lambda ridge run."""

    timeout = 300

    def make(self) -> None:
        self.X, self.y = _logistic(50000, 100)
        rng = np.random.default_rng(4)
        self.Xr = rng.standard_normal((150, 50))
        b = np.zeros(50)
        b[:10] = rng.standard_normal(10)
        self.yr = self.Xr @ b + rng.standard_normal(150)

    def time_logistic_grid_10(self) -> None:
        aloocv.tune(
            self.X,
            self.y,
            loss="logistic",
            penalty=aloocv.L2(1.0),
            method="grid",
            grid=np.logspace(-4, 4, 10),
            n_jobs=JOBS,
        )

    def time_paper_diagonal_ridge_800(self) -> None:
        aloocv.tune(
            self.Xr,
            self.yr,
            loss="squared",
            penalty=aloocv.L2(np.full(50, 1 / 3)),
            max_iter=800,
            tol=1e-12,
            fit_intercept=False,
            n_jobs=JOBS,
        )


class ElasticNetSparse(_Job):
    """Sparse logistic elastic net, ALO including the fit."""

    timeout = 300

    def make(self) -> None:
        import scipy.sparse as sp

        rng = np.random.default_rng(3)
        self.X = sp.random(50000, 5000, density=0.001, format="csr", random_state=rng)
        self.X.data = rng.standard_normal(self.X.nnz)
        b = np.zeros(5000)
        b[:100] = rng.standard_normal(100)
        self.y = (rng.random(50000) < 1 / (1 + np.exp(-(self.X @ b)))).astype(float)

    def time_sparse_enet_alo(self) -> None:
        aloocv.loo(
            self.X, self.y, loss="logistic", penalty=aloocv.ElasticNet(20.0, 1.0), n_jobs=JOBS
        )
