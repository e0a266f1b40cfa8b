"""Every main job of aloocv as an asv benchmark class, sizes left to the tier.

The classes here are bases (their names start with ``_``, so asv does not collect
them); ``quick.py`` (the quick tier) and ``bench_jobs.py`` (the full tier) subclass each
with the sizes of their tier in ``size``. One definition of a job, two sizes.

Protocol: one thread (aloocv's ``n_jobs=1``, OpenMP and BLAS limited by threadpoolctl in
``setup``, restored in ``teardown``) and CPU seconds (``timer = time.process_time``), as
in ``benchmarks/_timing.py``; threaded scaling is ``benchmarks/scaling.py``'s.
``track_mem_*`` benchmarks are the peak resident bytes a call adds above the resident
memory at its start (``_mem.py``), not the whole process's peak.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

import aloocv

from . import _mem

#: aloocv's thread count in every job (CPU seconds are per thread).
JOBS = 1
#: The penalty of the single-penalty jobs.
PEN = aloocv.L2(1.0)


def gaussian(n: int, p: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian design and its linear predictor with ||beta|| ~ 2."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    return X, X @ (rng.standard_normal(p) / np.sqrt(p) * 2.0)


def response(loss: str, eta: np.ndarray, seed: int = 1) -> np.ndarray:
    """A response suited to ``loss`` from the linear predictor ``eta``."""
    rng = np.random.default_rng(seed)
    if loss == "squared":
        return eta + rng.standard_normal(eta.shape[0])
    if loss == "logistic":
        return (rng.random(eta.shape[0]) < 1.0 / (1.0 + np.exp(-eta))).astype(np.float64)
    if loss == "poisson":
        return rng.poisson(np.exp(0.3 * eta)).astype(np.float64)
    if loss == "gamma":
        mu = np.exp(0.3 * eta)
        return rng.gamma(2.0, mu / 2.0)
    if loss == "tweedie":  # compound Poisson-gamma, power between 1 and 2: zeros and mass
        counts = rng.poisson(np.exp(0.3 * eta))
        y = np.zeros(eta.shape[0])
        hit = counts > 0  # a sum of c Gamma(2, 1/2) draws is one Gamma(2c, 1/2) draw
        y[hit] = rng.gamma(2.0 * counts[hit], 0.5)
        return y
    raise ValueError(f"no response for loss {loss!r}")


def text_like(n: int, p: int, per_row: int, seed: int = 0) -> tuple[sp.csr_matrix, np.ndarray]:
    """A wide sparse text-like design (Zipf column frequencies, unit rows) and labels."""
    rng = np.random.default_rng(seed)
    prob = np.arange(1, p + 1) ** -1.1
    prob /= prob.sum()
    cols = rng.choice(p, size=n * per_row, p=prob)
    rows = np.repeat(np.arange(n), per_row)
    X = sp.csr_matrix((rng.exponential(1.0, n * per_row), (rows, cols)), shape=(n, p))
    X.sum_duplicates()
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.csr_matrix(sp.diags(1.0 / np.maximum(norms, 1e-12)) @ X)
    eta = X @ (rng.standard_normal(p) * 3.0)
    return X, (rng.random(n) < 1.0 / (1.0 + np.exp(-eta))).astype(np.float64)


class _Job:
    """Set-up shared by every job: one thread, CPU seconds."""

    timer = time.process_time
    timeout = 600
    #: The tier's problem sizes (set by the subclass).
    size: ClassVar[dict[str, int]] = {}

    def setup(self, *params: Any) -> None:
        from threadpoolctl import threadpool_limits

        self._limits = threadpool_limits(limits=1)
        self.make(*params)

    def teardown(self, *params: Any) -> None:
        self._limits.restore_original_limits()

    def make(self, *params: Any) -> None:
        """Build the data of one parameter combination."""


class _GLM(_Job):
    """``aloocv.fit`` and ``aloocv.loo(method="alo")`` (including its fit) per loss."""

    params: ClassVar[list] = [["squared", "logistic", "poisson"]]
    param_names: ClassVar[list] = ["loss"]

    def make(self, loss: str) -> None:
        X, eta = gaussian(self.size["n"], self.size["p"])
        self.X, self.y, self.loss = X, response(loss, eta), loss

    def _fit(self) -> aloocv.FitResult:
        return aloocv.fit(self.X, self.y, loss=self.loss, penalty=PEN, tol=1e-6, n_jobs=JOBS)

    def _loo(self) -> aloocv.LOOResult:
        return aloocv.loo(
            self.X, self.y, loss=self.loss, penalty=PEN, method="alo", tol=1e-6, n_jobs=JOBS
        )

    def time_fit(self, loss: str) -> None:
        self._fit()

    def time_loo_alo(self, loss: str) -> None:
        self._loo()

    def track_mem_fit(self, loss: str) -> int:
        """Peak bytes the fit adds (X excluded: it is the caller's)."""
        _mem.require()
        return _mem.call_peak(self._fit)

    track_mem_fit.unit = "bytes"

    def track_mem_loo_alo(self, loss: str) -> int:
        """Peak bytes ALO including its fit adds: the fit's plus the leverage pass's
        row blocks and the n-vectors of the result."""
        _mem.require()
        return _mem.call_peak(self._loo)

    track_mem_loo_alo.unit = "bytes"

    def track_fit_iterations(self, loss: str) -> int:
        """Newton iterations of the fit (each one Hessian pass over X)."""
        return int(self._fit().n_iter_)

    track_fit_iterations.unit = "iterations"


class _ExactLOO(_Job):
    """Exact leave-one-out (``method="exact"``: n warm-started refits), logistic."""

    def make(self) -> None:
        X, eta = gaussian(self.size["n"], self.size["p"], seed=2)
        self.X, self.y = X, response("logistic", eta)

    def time_loo_exact(self) -> None:
        aloocv.loo(self.X, self.y, loss="logistic", penalty=PEN, method="exact", n_jobs=JOBS)


class _KFold(_Job):
    """10-fold CV, approximate (rank-q downdates) and exact (warm refits), logistic."""

    params: ClassVar[list] = [["alo", "exact"]]
    param_names: ClassVar[list] = ["method"]

    def make(self, method: str) -> None:
        X, eta = gaussian(self.size["n"], self.size["p"], seed=3)
        self.X, self.y = X, response("logistic", eta)

    def time_kfold(self, method: str) -> None:
        aloocv.kfold(
            self.X, self.y, loss="logistic", penalty=PEN, n_folds=10, method=method, n_jobs=JOBS
        )


class _Nested(_Job):
    """Nested CV, 5 outer folds, 8 candidates, ALO as the inner loop."""

    def make(self) -> None:
        X, eta = gaussian(self.size["n"], self.size["p"], seed=4)
        self.X, self.y = X, response("logistic", eta)
        self.spec = {"loss": "logistic", "candidates": list(np.logspace(-2, 3, 8))}

    def time_nested_alo(self) -> None:
        aloocv.nested_cv(self.spec, self.X, self.y, outer_folds=5, inner="alo", n_jobs=JOBS)


class _Tune(_Job):
    """``aloocv.tune``: the default search, a 10-point grid, and the paper's diagonal
    ridge (50 per-feature penalties, 800 gradient steps)."""

    def make(self) -> None:
        X, eta = gaussian(self.size["n"], self.size["p"], seed=5)
        self.X, self.y = X, response("logistic", eta)
        rng = np.random.default_rng(4)
        self.Xr = rng.standard_normal((150, 50))
        b = np.zeros(50)
        b[:10] = rng.standard_normal(10)
        self.yr = self.Xr @ b + rng.standard_normal(150)

    def time_tune_default(self) -> None:
        aloocv.tune(self.X, self.y, loss="logistic", penalty=aloocv.L2(1.0), n_jobs=JOBS)

    def time_tune_grid_10(self) -> None:
        aloocv.tune(
            self.X,
            self.y,
            loss="logistic",
            penalty=aloocv.L2(1.0),
            method="grid",
            grid=np.logspace(-4, 4, 10),
            n_jobs=JOBS,
        )

    def time_tune_paper_diagonal_ridge(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the paper's run stops at max_iter
            aloocv.tune(
                self.Xr,
                self.yr,
                loss="squared",
                penalty=aloocv.L2(np.full(50, 1 / 3)),
                method="gd",
                max_iter=800,
                tol=1e-12,
                fit_intercept=False,
                n_jobs=JOBS,
            )


#: Each estimator and the loss of the response it is fitted to.
ESTIMATORS: dict[str, str] = {
    "ALORidgeCV": "squared",
    "ALOElasticNetCV": "squared",
    "ALOLogisticRegressionCV": "logistic",
    "ALOPoissonRegressorCV": "poisson",
    "ALOGammaRegressorCV": "gamma",
    "ALOTweedieRegressorCV": "tweedie",
    "BKKRidge": "squared",
    "SBKKRegressor": "squared",
    "ABKKRegressor": "squared",
}


class _Estimators(_Job):
    """``fit`` of every estimator at its defaults (``n_jobs=1``)."""

    params: ClassVar[list] = [list(ESTIMATORS)]
    param_names: ClassVar[list] = ["estimator"]

    def make(self, name: str) -> None:
        X, eta = gaussian(self.size["n"], self.size["p"], seed=6)
        self.X, self.y = X, response(ESTIMATORS[name], eta)
        self.est = getattr(aloocv, name)(n_jobs=JOBS)

    def _fit(self) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence notes of some defaults
            return self.est.fit(self.X, self.y)

    def time_fit(self, name: str) -> None:
        self._fit()

    def track_mem_fit(self, name: str) -> int:
        """Peak bytes the estimator's fit adds."""
        _mem.require()
        return _mem.call_peak(self._fit)

    track_mem_fit.unit = "bytes"


class _Multinomial(_Job):
    """Multinomial logistic regression (K classes): fit and ALO including the fit."""

    def make(self) -> None:
        n, p, k = self.size["n"], self.size["p"], self.size["k"]
        rng = np.random.default_rng(7)
        X = rng.standard_normal((n, p))
        eta = X @ (rng.standard_normal((k, p)) / np.sqrt(p)).T * 2.0
        P = np.exp(eta - eta.max(1, keepdims=True))
        P /= P.sum(1, keepdims=True)
        self.X, self.y = X, (P.cumsum(1) > rng.random(n)[:, None]).argmax(1)

    def _loo(self) -> Any:
        return aloocv.loo(self.X, self.y, loss="multinomial", penalty=PEN, n_jobs=JOBS)

    def time_fit(self) -> None:
        aloocv.fit(self.X, self.y, loss="multinomial", penalty=PEN, n_jobs=JOBS)

    def time_loo_alo(self) -> None:
        self._loo()

    def track_mem_loo_alo(self) -> int:
        """Peak bytes multinomial ALO including its fit adds."""
        _mem.require()
        return _mem.call_peak(self._loo)

    track_mem_loo_alo.unit = "bytes"


class _Float32(_Job):
    """ALO including the fit on the same design stored as float32 and as float64: the
    float32 design is read in place (no float64 copy), which ``track_mem`` shows."""

    params: ClassVar[list] = [["float32", "float64"]]
    param_names: ClassVar[list] = ["dtype"]

    def make(self, dtype: str) -> None:
        X, eta = gaussian(self.size["n"], self.size["p"], seed=8)
        self.X, self.y = X.astype(dtype), response("logistic", eta)

    def _loo(self) -> aloocv.LOOResult:
        return aloocv.loo(self.X, self.y, loss="logistic", penalty=PEN, tol=1e-6, n_jobs=JOBS)

    def time_loo_alo(self, dtype: str) -> None:
        self._loo()

    def track_mem_loo_alo(self, dtype: str) -> int:
        """Peak bytes ALO adds to a design of this dtype."""
        _mem.require()
        return _mem.call_peak(self._loo)

    track_mem_loo_alo.unit = "bytes"


class _Sparse(_Job):
    """Sparse CSR X (0.1% dense), logistic elastic net: fit and ALO including the fit."""

    def make(self) -> None:
        n, p = self.size["n"], self.size["p"]
        rng = np.random.default_rng(3)
        X = sp.random(n, p, density=0.001, format="csr", random_state=rng)
        X.data = rng.standard_normal(X.nnz)
        b = np.zeros(p)
        b[: max(p // 50, 1)] = rng.standard_normal(max(p // 50, 1))
        self.X = X
        self.y = (rng.random(n) < 1 / (1 + np.exp(-(X @ b)))).astype(float)
        self.pen = aloocv.ElasticNet(20.0, 1.0)

    def _loo(self) -> aloocv.LOOResult:
        return aloocv.loo(self.X, self.y, loss="logistic", penalty=self.pen, n_jobs=JOBS)

    def time_fit(self) -> None:
        aloocv.fit(self.X, self.y, loss="logistic", penalty=self.pen, n_jobs=JOBS)

    def time_loo_alo(self) -> None:
        self._loo()

    def track_mem_loo_alo(self) -> int:
        """Peak bytes sparse ALO adds (it must stay far below a dense n x p)."""
        _mem.require()
        return _mem.call_peak(self._loo)

    track_mem_loo_alo.unit = "bytes"


class _MatrixFree(_Job):
    """The matrix-free route (``solver="matrix_free"``: Newton-CG and randomized
    leverages) on wide sparse text-like data, L2 logistic."""

    def make(self) -> None:
        self.X, self.y = text_like(self.size["n"], self.size["p"], 20, seed=9)

    def _loo(self) -> aloocv.LOOResult:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the randomized estimate's error note
            return aloocv.loo(
                self.X,
                self.y,
                loss="logistic",
                penalty=aloocv.L2(1.0),
                solver="matrix_free",
                n_jobs=JOBS,
            )

    def time_fit(self) -> None:
        aloocv.fit(
            self.X,
            self.y,
            loss="logistic",
            penalty=aloocv.L2(1.0),
            solver="matrix_free",
            n_jobs=JOBS,
        )

    def time_loo_alo(self) -> None:
        self._loo()

    def track_mem_loo_alo(self) -> int:
        """Peak bytes the matrix-free ALO adds (no p x p matrix: O(nnz + n + p))."""
        _mem.require()
        return _mem.call_peak(self._loo)

    track_mem_loo_alo.unit = "bytes"


class _Dask(_Job):
    """A dask array chunked by rows (the dask backend), synchronous scheduler: fit and
    ALO including the fit, chunk by chunk."""

    def make(self) -> None:
        try:
            import dask
            import dask.array as da
        except ImportError as e:  # asv skips the benchmark
            raise NotImplementedError("dask is not installed") from e
        X, eta = gaussian(self.size["n"], self.size["p"], seed=10)
        self.y = response("logistic", eta)
        self.dX = da.from_array(X, chunks=(self.size["chunk"], X.shape[1]))
        self._dask_config = dask.config.set(scheduler="synchronous")
        self._dask_config.__enter__()

    def teardown(self, *params: Any) -> None:
        self._dask_config.__exit__(None, None, None)
        super().teardown(*params)

    def time_fit(self) -> None:
        aloocv.fit(self.dX, self.y, loss="logistic", penalty=PEN, n_jobs=JOBS)

    def time_loo_alo(self) -> None:
        aloocv.loo(self.dX, self.y, loss="logistic", penalty=PEN, n_jobs=JOBS)
