"""Regression tests of core defects (issue 25, item 9): singular exact refits, non-finite
outputs, certify's n_worst. Each reference is computed independently in the test."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import aloocv
from aloocv import _core
from aloocv._validation import core_design


def _isolated_feature_problem(n=30, p=3, seed=0):
    """A logistic problem where feature 1 is seen by sample 0 only: without sample 0 and
    without a penalty, that direction has no curvature."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    X[:, 1] = 0.0
    X[0, 1] = 1.0
    y = (rng.standard_normal(n) > 0) * 1.0
    return X, y


def _logistic_loss(y, eta):
    return np.logaddexp(0.0, eta) - y * eta


def _core_exact_loo(X, y, lam, dual=False):
    args = (core_design(X), y, None, "logistic", np.full(X.shape[1], lam))
    opts = {"fit_intercept": True, "method": "exact", "tol": 1e-8, "max_iter": 100}
    opts["n_threads"] = 1
    if dual:
        return _core.dual(*args, want_loo=True, **opts)
    return _core.loo(*args, **opts)


# ------------------------------------------------------------ singular exact refits


class TestSingularExactRefits:
    def test_reference_leave_one_out_hessian_is_singular(self):
        # the premise, checked independently: without sample 0 the design has a zero column
        X, _ = _isolated_feature_problem()
        Xt = np.hstack([np.ones((X.shape[0] - 1, 1)), X[1:]])
        assert np.linalg.matrix_rank(Xt.T @ Xt) < Xt.shape[1]

    def test_core_counts_singular_refit_and_never_converged(self):
        X, y = _isolated_feature_problem()
        out = _core_exact_loo(X, y, 0.0)
        assert out.n_singular == 1
        assert out.singular_samples.tolist() == [0]
        assert out.n_not_converged >= 1  # a singular refit is never converged
        assert np.isnan(out.losses[0]) and np.isnan(out.predictions[0])
        assert np.isfinite(np.delete(out.losses, 0)).all()

    def test_exact_loo_raises_naming_the_sample(self):
        X, y = _isolated_feature_problem()
        with pytest.raises(ValueError, match=r"singular for sample 0 \(.*positive penalty"):
            aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(0.0), method="exact")

    def test_squared_loss_fewer_samples_than_coefficients(self):
        # n - 1 = 3 samples for p + 1 = 4 coefficients: every refit is singular
        rng = np.random.default_rng(1)
        X, y = rng.standard_normal((4, 3)), rng.standard_normal(4)
        for i in range(4):
            Xt = np.hstack([np.ones((3, 1)), np.delete(X, i, axis=0)])
            assert np.linalg.matrix_rank(Xt.T @ Xt) < 4
        with pytest.raises(ValueError, match=r"singular for samples 0, 1, 2, 3 \("):
            aloocv.loo(X, y, loss="squared", penalty=aloocv.L2(0.0), method="exact")

    def test_nonsingular_core_result_reports_none(self):
        X, y = _isolated_feature_problem()
        out = _core_exact_loo(X, y, 1.0)
        assert out.n_singular == 0 and out.singular_samples.size == 0
        dual = _core_exact_loo(X, y, 1.0, dual=True)
        assert dual.n_singular == 0 and dual.singular_samples.size == 0

    def test_tiny_penalty_refit_leaves_the_warm_start(self):
        # lam = 1e-12: the leave-one-out problem without sample 0 is flat along feature 1 up
        # to the penalty; its minimizer has coef_1 = 0. The warm start (the full fit, coef_1
        # about -15) has a gradient within tol there: the refit must still move.
        X, y = _isolated_feature_problem()
        lam = 1e-12
        ref = aloocv.fit(
            np.delete(X, 0, axis=0), np.delete(y, 0), loss="logistic", penalty=aloocv.L2(lam)
        )
        assert abs(ref.coef_[1]) < 1e-6
        eta0 = ref.intercept_ + X[0] @ ref.coef_
        expect = _logistic_loss(y[0], eta0)
        # the dual's kernel X X^T / lam (entries ~1e12) costs it accuracy at this lam
        for solver, rtol in (("primal", 1e-8), ("dual", 1e-4)):
            r = aloocv.loo(
                X, y, loss="logistic", penalty=aloocv.L2(lam), method="exact", solver=solver
            )
            np.testing.assert_allclose(r.losses[0], expect, rtol=rtol)

    def test_certify_refits_the_tiny_penalty_sample_exactly(self):
        X, y = _isolated_feature_problem()
        lam = 1e-12
        ref = aloocv.fit(
            np.delete(X, 0, axis=0), np.delete(y, 0), loss="logistic", penalty=aloocv.L2(lam)
        )
        expect = _logistic_loss(y[0], ref.intercept_ + X[0] @ ref.coef_)
        with pytest.warns(aloocv.ALOWarning):
            res = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(lam), solver="primal")
        cert = res.certify(n_samples=X.shape[0])
        k = int(np.flatnonzero(cert.indices == 0)[0])
        np.testing.assert_allclose(cert.exact_losses[k], expect, rtol=1e-6)

    def test_exact_kfold_singular_refit_names_the_fold(self):
        X, y = _isolated_feature_problem()
        folds = np.arange(X.shape[0]) % 5  # sample 0 in fold 0
        with pytest.raises(ValueError, match=r"without fold 0 .* is singular"):
            aloocv.kfold(X, y, loss="logistic", penalty=aloocv.L2(0.0), method="exact", folds=folds)


class TestDaskExactRefitsAsInMemory:
    """The dask backend's lockstep refits follow the core's exact_loo: every refit takes
    a step, singular refits are all named, never returned as values."""

    @pytest.fixture(autouse=True)
    def _synchronous(self):
        dask = pytest.importorskip("dask")
        with dask.config.set(scheduler="synchronous"):
            yield

    @staticmethod
    def _dask(X, rows=10):
        import dask.array as da

        return da.from_array(X, chunks=(rows, -1))

    def test_tiny_penalty_refit_leaves_the_warm_start(self):
        X, y = _isolated_feature_problem()
        lam = 1e-12
        ref = aloocv.fit(
            np.delete(X, 0, axis=0), np.delete(y, 0), loss="logistic", penalty=aloocv.L2(lam)
        )
        expect = _logistic_loss(y[0], ref.intercept_ + X[0] @ ref.coef_)
        r = aloocv.loo(self._dask(X), y, loss="logistic", penalty=aloocv.L2(lam), method="exact")
        np.testing.assert_allclose(r.losses[0].compute(), expect, rtol=1e-8)

    def test_singular_refits_are_all_named(self):
        # two isolated unpenalized features, seen by samples 0 and 17 (different chunks)
        X, y = _isolated_feature_problem(n=40, p=4)
        X[:, 2] = 0.0
        X[17, 2] = 1.0
        for Xa in (X, self._dask(X)):
            with pytest.raises(ValueError, match=r"singular for samples 0, 17 \("):
                aloocv.loo(Xa, y, loss="logistic", penalty=aloocv.L2(0.0), method="exact")


# ------------------------------------------------------------ non-finite outputs


def _frac_stderr(losses, w=None):
    """The standard error of the weighted mean in exact rational arithmetic (the square
    root taken on the variance scaled into float64 range)."""
    x = [Fraction(float(v)) for v in losses]
    ww = [Fraction(1)] * len(x) if w is None else [Fraction(float(v)) for v in w]
    sw = sum(ww)
    m = sum(a * b for a, b in zip(ww, x)) / sw
    v = sum(a * (b - m) ** 2 for a, b in zip(ww, x)) / (sw - 1) / sw
    scale = Fraction(10) ** 300
    return float(v / scale**2) ** 0.5 * 1e300


class TestNonFiniteOutputs:
    def _poisson(self):
        rng = np.random.default_rng(0)
        X = rng.standard_normal((40, 3))
        y = rng.poisson(2.0, 40).astype(float)
        y[3] = 1e300
        return X, y

    # y = 1e300: the fit stops at the rounding floor far above tol (ConvergenceWarning)
    @pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
    def test_poisson_huge_y_stderr_is_finite_and_exact(self):
        X, y = self._poisson()
        r = aloocv.loo(X, y, loss="poisson", penalty=aloocv.L2(1.0), solver="primal")
        assert np.isfinite(r.losses).all() and r.losses.max() > 1e299
        expect = _frac_stderr(r.losses)
        assert np.isfinite(r.stderr)
        np.testing.assert_allclose(r.stderr, expect, rtol=1e-12)

    @pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
    def test_weighted_stderr_of_huge_losses(self):
        X, y = self._poisson()
        w = np.linspace(0.5, 2.0, y.size)
        r = aloocv.loo(
            X, y, loss="poisson", penalty=aloocv.L2(1.0), sample_weight=w, solver="primal"
        )
        ref = _frac_stderr(r.losses, w)
        assert np.isfinite(r.stderr)
        np.testing.assert_allclose(r.stderr, ref, rtol=1e-12)

    def test_ordinary_stderr_unchanged(self):
        rng = np.random.default_rng(2)
        X, y = rng.standard_normal((50, 3)), rng.standard_normal(50)
        r = aloocv.loo(X, y, loss="squared", penalty=aloocv.L2(1.0))
        assert r.stderr == float(np.std(r.losses, ddof=1) / np.sqrt(50))

    def test_huge_weights_hypergradient_raises(self):
        rng = np.random.default_rng(0)
        X, y = rng.standard_normal((200, 3)), (rng.standard_normal(200) > 0) * 1.0
        w = np.full(200, 1e300)
        with pytest.raises(ValueError, match="hypergradient is not finite.*sample weights"):
            aloocv.loo(
                X,
                y,
                loss="logistic",
                penalty=aloocv.L2(1.0),
                sample_weight=w,
                return_gradient=True,
                solver="primal",
            )


# ------------------------------------------------------------ certify options


class TestCertifyOptions:
    def _result(self):
        rng = np.random.default_rng(0)
        X = rng.standard_normal((60, 4))
        y = (X[:, 0] + rng.standard_normal(60) > 0) * 1.0
        return aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0))

    def test_n_worst_above_n_samples_raises(self):
        with pytest.raises(ValueError, match="n_worst=6 exceeds n_samples=5"):
            self._result().certify(n_samples=5, n_worst=6)

    def test_n_worst_equal_n_samples_is_a_census_of_the_worst(self):
        cert = self._result().certify(n_samples=5, n_worst=5)
        assert cert.n_worst == 5 and cert.n_draws == 0
