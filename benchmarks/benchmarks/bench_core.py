"""asv benchmarks of the core: Hessian accumulation, fits, ALO, tuning."""

from __future__ import annotations

import numpy as np

import aloocv
from aloocv import _blas, _core


def _logistic(n, p, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = rng.standard_normal(p) / np.sqrt(p) * 2
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ beta))).astype(np.float64)
    return X, y


class Hessian:
    params = ([10000, 100000], [50, 200], ["C", "F"])
    param_names = ("n", "p", "order")

    def setup(self, n, p, order):
        rng = np.random.default_rng(0)
        self.X = np.asarray(rng.standard_normal((n, p)), order=order)
        self.d = rng.uniform(0, 1, n)

    def time_hessian(self, n, p, order):
        with _blas.single_threaded_blas():
            _core.hessian(self.X, self.d, True, 0)

    def time_numpy_peer(self, n, p, order):
        (self.X * self.d[:, None]).T @ self.X


class Fit:
    params = ([10000, 100000], [50, 200], ["squared", "logistic", "poisson"])
    param_names = ("n", "p", "loss")

    def setup(self, n, p, loss):
        X, y = _logistic(n, p)
        if loss == "squared":
            y = X[:, 0] + np.random.default_rng(1).standard_normal(n)
        elif loss == "poisson":
            y = np.random.default_rng(1).poisson(np.exp(0.3 * X[:, 0])).astype(float)
        self.X, self.y, self.loss = X, y, loss

    def time_fit(self, n, p, loss):
        aloocv.fit(self.X, self.y, loss=self.loss, penalty=aloocv.L2(1.0), tol=1e-6)

    def time_loo_alo(self, n, p, loss):
        aloocv.loo(self.X, self.y, loss=self.loss, penalty=aloocv.L2(1.0), tol=1e-6)

    def peakmem_loo_alo(self, n, p, loss):
        aloocv.loo(self.X, self.y, loss=self.loss, penalty=aloocv.L2(1.0), tol=1e-6)


class Hypergradient:
    params = ([10000, 50000], [50, 200])
    param_names = ("n", "p")

    def setup(self, n, p):
        self.X, self.y = _logistic(n, p)

    def time_alo_with_gradient(self, n, p):
        aloocv.loo(
            self.X, self.y, loss="logistic", penalty=aloocv.L2(np.ones(p)), return_gradient=True
        )


class Tuning:
    timeout = 300

    def setup(self):
        self.X, self.y = _logistic(50000, 100)
        rng = np.random.default_rng(4)
        self.Xr = rng.standard_normal((150, 50))
        b = np.zeros(50)
        b[:10] = rng.standard_normal(10)
        self.yr = self.Xr @ b + rng.standard_normal(150)

    def time_logistic_grid_10(self):
        aloocv.tune(
            self.X,
            self.y,
            loss="logistic",
            penalty=aloocv.L2(1.0),
            method="grid",
            grid=np.logspace(-4, 4, 10),
        )

    def time_paper_diagonal_ridge_800(self):
        aloocv.tune(
            self.Xr,
            self.yr,
            loss="squared",
            penalty=aloocv.L2(np.full(50, 1 / 3)),
            max_iter=800,
            tol=1e-12,
            fit_intercept=False,
        )


class ElasticNetSparse:
    timeout = 300

    def setup(self):
        import scipy.sparse as sp

        rng = np.random.default_rng(3)
        self.X = sp.random(50000, 5000, density=0.001, format="csr", random_state=rng)
        self.X.data = rng.standard_normal(self.X.nnz)
        b = np.zeros(5000)
        b[:100] = rng.standard_normal(100)
        self.y = (rng.random(50000) < 1 / (1 + np.exp(-(self.X @ b)))).astype(float)

    def time_sparse_enet_alo(self):
        aloocv.loo(self.X, self.y, loss="logistic", penalty=aloocv.ElasticNet(20.0, 1.0))
