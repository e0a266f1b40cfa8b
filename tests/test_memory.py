"""Memory pre-checks (issue 27, part 3): a budget (``memory_limit=`` or the available
memory), a model of each route's large matrices, and a ``MemoryError`` that names the
matrix, its size, the budget and the alternative before anything large is allocated;
a ``std::bad_alloc`` from the core is never reported bare."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import aloocv
from aloocv import _memory
from aloocv._memory import SAFETY_FRACTION, allocations, budget, check_memory, fits, parse_bytes
from aloocv._validation import check_memory_limit
from aloocv.backends import route
from aloocv.problem import Problem
from conftest import make_data

GB = 1e9
#: A limit no small problem reaches: results must be those of no limit at all.
GENEROUS = "100GB"
#: A limit every route of a small problem exceeds.
TINY = 1000


@pytest.fixture
def machine_16gb(monkeypatch):
    """The available memory reads 16 GB whatever the machine (no test allocates it)."""
    monkeypatch.setattr(_memory, "available_memory", lambda: int(16 * GB))


# ----------------------------------------------------------------------------- the limit
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2GB", 2e9),
        ("1.5 GiB", 1.5 * 2**30),
        ("500MB", 5e8),
        ("500 mb", 5e8),
        ("64KiB", 65536.0),
        ("1e9", 1e9),
        ("2g", 2e9),
        (" 3 TB ", 3e12),
        (1024, 1024.0),
        (2.5e9, 2.5e9),
        (np.int64(4096), 4096.0),
        (None, None),
    ],
)
def test_memory_limit_parses(value, expected):
    assert check_memory_limit(value) == expected


@pytest.mark.parametrize("value", ["", "GB", "2 XB", "-1GB", "1,5GB", "two GB", "0B", 0, -5.0])
def test_memory_limit_rejects_bad_values(value):
    with pytest.raises(ValueError, match="memory_limit"):
        check_memory_limit(value)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_memory_limit_rejects_non_finite(value):
    with pytest.raises(ValueError, match="finite"):
        check_memory_limit(value)


@pytest.mark.parametrize("value", [True, [1], b"1GB", {"limit": 1}])
def test_memory_limit_rejects_bad_types(value):
    with pytest.raises(TypeError, match="memory_limit"):
        check_memory_limit(value)


def test_memory_limit_is_checked_by_every_verb():
    X, y = make_data("logistic", 30, 3)
    for verb in (aloocv.fit, aloocv.loo, aloocv.kfold, aloocv.tune):
        with pytest.raises(ValueError, match="memory_limit"):
            verb(X, y, memory_limit="lots")
    with pytest.raises(TypeError, match="memory_limit"):
        aloocv.ALOLogisticRegressionCV(Cs=2, memory_limit=True).fit(X, y)


def test_parse_bytes_units():
    assert parse_bytes("1kB") == 1000 and parse_bytes("1KiB") == 1024
    assert parse_bytes("1 MiB") == 2**20 and parse_bytes("1 GiB") == 2**30
    assert _memory.format_bytes(1.6e9) == "1.6 GB" and _memory.format_bytes(12) == "12 bytes"


# ----------------------------------------------------------------------------- the budget
def test_budget_from_memory_limit():
    b = budget(2e9)
    assert b.nbytes == pytest.approx(SAFETY_FRACTION * 2e9)
    assert b.source == "memory_limit="
    assert "memory_limit=2.0 GB" in b.describe()


def test_budget_from_available_memory(machine_16gb):
    b = budget(None)
    assert b.nbytes == pytest.approx(SAFETY_FRACTION * 16e9)
    assert "available memory" in b.describe()


def test_no_cap_where_nothing_is_known(monkeypatch):
    monkeypatch.setattr(_memory, "available_memory", lambda: None)
    assert budget(None).nbytes is None
    X, y = make_data("squared", 20, 1100)  # p x p matrices above UNCHECKED_BYTES
    pb = Problem.build(X, y, loss="squared")
    assert fits(pb, "primal", "fit")
    check_memory(pb, "primal", "fit")  # nothing raised


def test_available_memory_reads_meminfo(monkeypatch, tmp_path):
    info = tmp_path / "meminfo"
    info.write_text("MemTotal:       32000000 kB\nMemAvailable:    1000000 kB\n")
    monkeypatch.setattr(_memory, "MEMINFO", str(info))
    assert _memory.available_memory() == 1000000 * 1024


def test_available_memory_falls_back_to_sysconf(monkeypatch, tmp_path):
    monkeypatch.setattr(_memory, "MEMINFO", str(tmp_path / "absent"))
    pages = {"SC_AVPHYS_PAGES": 1000, "SC_PAGE_SIZE": 4096}
    monkeypatch.setattr(_memory.os, "sysconf", lambda name: pages[name])
    assert _memory.available_memory() == 4096000


def test_available_memory_unknown(monkeypatch, tmp_path):
    def absent(name):
        raise ValueError(name)

    monkeypatch.setattr(_memory, "MEMINFO", str(tmp_path / "absent"))
    monkeypatch.setattr(_memory.os, "sysconf", absent)
    assert _memory.available_memory() is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/meminfo is Linux's")
def test_available_memory_of_this_machine():
    avail = _memory.available_memory()
    assert avail is not None and 0 < avail


# ----------------------------------------------------------------------------- every route
def _raises(match_matrix: str, match_alt: str, call):
    with pytest.raises(MemoryError) as info:
        call()
    msg = str(info.value)
    assert match_matrix in msg, msg
    assert match_alt in msg, msg
    assert "memory_limit=" in msg and "bad_alloc" not in msg
    return msg


def test_primal_route_names_the_hessian_and_matrix_free():
    X, y = make_data("logistic", 40, 30)
    msg = _raises(
        "31 x 31 Hessian of the primal route",
        "solver='matrix_free'",
        lambda: aloocv.fit(X, y, memory_limit=TINY, solver="primal"),
    )
    assert "800 bytes (80% of memory_limit=1.0 kB)" in msg


def test_auto_takes_the_matrix_free_route_where_the_primal_does_not_fit():
    X, y = make_data("logistic", 400, 300)
    p1 = 301
    limit = 2 * p1 * p1 * 8  # below the primal route's buffers, far above matrix-free's
    pb = Problem.build(X, y, penalty=aloocv.L2(1.0), memory_limit=limit)
    assert not _memory.fits(pb, "primal", "loo") and _memory.fits(pb, "matrix_free", "loo")
    assert route.choose(pb, "loo").solver == "matrix_free"
    res = aloocv.fit(X, y, penalty=aloocv.L2(1.0), memory_limit=limit)
    ref = aloocv.fit(X, y, penalty=aloocv.L2(1.0))
    np.testing.assert_allclose(res.coef_, ref.coef_, atol=1e-6)
    assert res.hessian_passes_ == 0


def test_primal_route_offers_the_dual_where_it_fits():
    X, y = make_data("squared", 10, 2000)
    msg = _raises(
        "2001 x 2001 Hessian",
        "solver='dual'",
        lambda: aloocv.loo(X, y, loss="squared", solver="primal", memory_limit="10MB"),
    )
    assert "solver='matrix_free'" in msg
    # "auto" takes the dual route by itself here, and it fits
    aloocv.loo(X, y, loss="squared", memory_limit="10MB")


def test_dual_route_names_the_kernel():
    X, y = make_data("logistic", 60, 80)
    _raises(
        "60 x 60 kernel of the dual route",
        "solver='matrix_free'",
        lambda: aloocv.loo(X, y, solver="dual", memory_limit=TINY),
    )


def test_dual_route_offers_the_primal_where_it_fits():
    X, y = make_data("squared", 400, 500)
    pb = Problem.build(X, y, loss="squared", n_jobs=1)
    dual = sum(a.nbytes for a in allocations(pb, "dual", "fit"))
    primal = sum(a.nbytes for a in allocations(pb, "primal", "fit"))
    assert dual > primal  # n = 400 < p = 500, but the dual holds several n x n matrices
    limit = (primal + dual) / 2 / SAFETY_FRACTION
    _raises(
        "400 x 400 kernel",
        "solver='primal'",
        lambda: aloocv.fit(X, y, loss="squared", solver="dual", memory_limit=limit, n_jobs=1),
    )


def test_elastic_net_names_the_active_set_and_a_larger_l1():
    X, y = make_data("squared", 40, 30)
    _raises(
        "Hessian of the elastic net's active set",
        "a larger L1 penalty",
        lambda: aloocv.loo(X, y, loss="squared", penalty=aloocv.L1(1.0), memory_limit=TINY),
    )


def _wide_sparse(n: int, p: int):
    """Sparse rows with about 10 entries each and a binary response."""
    rng = np.random.default_rng(5)
    X = sp.random(n, p, density=10 / p, format="csr", random_state=rng)
    y = (X @ rng.standard_normal(p) + 0.1 * rng.standard_normal(n) > 0).astype(float)
    return X, y


def test_wide_sparse_elastic_net_needs_no_p_by_p_matrix():
    # 300 x 20000 sparse rows: the fit solves its working-set models without a |W| x |W|
    # Hessian when that is larger than a few times the rows' non-zeros, and keeps no
    # active-set factor; loo fits first and then needs only the active set's matrices
    X, y = _wide_sparse(300, 20000)
    pen = aloocv.ElasticNet(0.05, 1.0)
    limit = "100MB"  # p1^2 doubles would be 3.2 GB
    res = aloocv.fit(X, y, loss="logistic", penalty=pen, memory_limit=limit, n_jobs=1)
    ref = aloocv.fit(X, y, loss="logistic", penalty=pen, memory_limit=GENEROUS, n_jobs=1)
    assert res.converged_ and np.count_nonzero(res.coef_) > 50
    np.testing.assert_array_equal(res.coef_, ref.coef_)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", aloocv.ALOWarning)  # ALO is off here (weak L2)
        a = aloocv.loo(X, y, loss="logistic", penalty=pen, memory_limit=limit, n_jobs=1)
        b = aloocv.loo(X, y, loss="logistic", penalty=pen, memory_limit=GENEROUS, n_jobs=1)
    np.testing.assert_array_equal(a.losses, b.losses)


def test_wide_sparse_elastic_net_loo_checks_the_active_set_after_its_fit():
    # 2000 x 40000: the fit's working sets fit 20 MB, its active set (|A| > 15000 > n) does
    # not, nor the n x n dual of X[:, A]: the MemoryError names the active set's size,
    # which only the fit knows (not the p1 = 40001 of the worst case)
    X, y = _wide_sparse(2000, 40000)
    pen = aloocv.ElasticNet(0.002, 1.0)
    fit = aloocv.fit(X, y, loss="logistic", penalty=pen, memory_limit="20MB", n_jobs=1)
    k = np.count_nonzero(fit.coef_) + 1
    assert k > 15000
    _raises(
        f"the {k} x {k} Hessian of the elastic net's active set",
        "a larger L1 penalty",
        lambda: aloocv.loo(X, y, loss="logistic", penalty=pen, memory_limit="20MB", n_jobs=1),
    )


def test_multinomial_names_the_kp_hessian_and_fewer_classes():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 20))
    y = np.arange(60) % 3
    for verb in (aloocv.fit, aloocv.loo, aloocv.kfold, aloocv.tune):
        _raises(
            "63 x 63 (K (p+1))^2 Hessian of the multinomial route",
            "fewer classes",
            lambda verb=verb: verb(X, y, loss="multinomial", memory_limit=TINY),
        )


def test_multinomial_alo_names_the_leverage_blocks():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 1))
    y = np.arange(3000) % 3
    # the 6 x 6 Hessian is small; 3000 K x K blocks are not
    _raises(
        "3000 x 3 x 3 leverage blocks of multinomial ALO",
        "fewer classes",
        lambda: aloocv.loo(X, y, loss="multinomial", memory_limit="200kB"),
    )
    aloocv.fit(X, y, loss="multinomial", memory_limit="200kB")  # the fit holds no blocks


def test_ridge_path_names_the_eigendecomposition():
    X, y = make_data("squared", 40, 30)
    _raises(
        "31 x 31 eigendecomposition of X^T X of the ridge path",
        "fewer features",
        lambda: aloocv.tune(X, y, loss="squared", method="grid", n_grid=3, memory_limit=TINY),
    )


def test_several_targets_name_the_eigendecomposition():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((40, 30)), rng.standard_normal((40, 3))
    for verb in (aloocv.loo, aloocv.kfold):
        _raises(
            "eigendecomposition of X^T X of several targets",
            "fewer features",
            lambda verb=verb: verb(X, Y, loss="squared", memory_limit=TINY),
        )


def test_kfold_counts_the_fold_downdates_and_the_refits():
    X, y = make_data("logistic", 200, 30)
    _raises(
        "31 x 31 Hessian", "solver='matrix_free'", lambda: aloocv.kfold(X, y, memory_limit=TINY)
    )
    pb = Problem.build(X, y, n_jobs=2)
    names = [a.name for a in allocations(pb, "primal", "kfold", fold_size=20)]
    assert any("20 x 20 fold downdates" in s for s in names), names
    names = [a.name for a in allocations(pb, "primal", "kfold", method="exact")]
    assert any("factors of exact refits (2 threads)" in s for s in names), names
    # a fold larger than p + 1 is downdated in the p x p form: capped at p1
    big = allocations(pb, "primal", "kfold", fold_size=150)[1]
    assert "31 x 31 fold downdates" in big.name


def test_largest_fold_of_a_request():
    from aloocv.folds import FoldRequest

    assert _memory.largest_fold(100, FoldRequest(n_folds=None)) == 10
    assert _memory.largest_fold(100, FoldRequest(n_folds=3)) == 34
    assert _memory.largest_fold(100, FoldRequest(folds=np.repeat([0, 1], [70, 30]))) == 70
    assert _memory.largest_fold(100, FoldRequest(cv=4)) == 25
    assert _memory.largest_fold(100, FoldRequest(cv=object())) is None


def test_tune_primal_route():
    X, y = make_data("logistic", 40, 30)
    # the primal route does not fit: tuning takes the matrix-free route, which does not
    # fit either
    _raises(
        "probe storage of the matrix-free route",
        "memory_limit=",
        lambda: aloocv.tune(X, y, memory_limit=TINY),
    )


ESTIMATORS = [
    (aloocv.ALORidgeCV, "squared", {}),
    (aloocv.ALOElasticNetCV, "squared", {"alphas": 3}),
    (aloocv.ALOLogisticRegressionCV, "logistic", {"Cs": 3}),
    (aloocv.ALOPoissonRegressorCV, "poisson", {}),
    (aloocv.ALOGammaRegressorCV, "gamma", {}),
    (aloocv.ALOTweedieRegressorCV, "tweedie", {}),
]


@pytest.mark.parametrize(
    ("cls", "loss", "params"), ESTIMATORS, ids=lambda v: getattr(v, "__name__", "")
)
def test_estimators_check_memory(cls, loss, params):
    X, y = make_data(loss, 60, 8)
    # the exact routes' 9 x 9 matrices, or (scalar L2 grids, which then take the
    # matrix-free route) its probe blocks
    with pytest.raises(MemoryError, match="9 x 9|probe storage of the matrix-free route"):
        cls(memory_limit=TINY, **params).fit(X, y)
    a = cls(memory_limit=GENEROUS, **params).fit(X, y)
    b = cls(**params).fit(X, y)
    assert np.array_equal(a.coef_, b.coef_) and a.best_score_ == b.best_score_
    assert cls(memory_limit="2GB").get_params()["memory_limit"] == "2GB"


def test_estimators_several_targets_and_classes():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((40, 30)), rng.standard_normal((40, 3))
    with pytest.raises(MemoryError, match="several targets"):
        aloocv.ALORidgeCV(memory_limit=TINY).fit(X, Y)
    with pytest.raises(MemoryError, match="several targets"):
        aloocv.ALORidgeCV(memory_limit=TINY, alpha_per_target=True).fit(X, Y)
    y = np.arange(40) % 3
    with pytest.raises(MemoryError, match="fewer classes"):
        aloocv.ALOLogisticRegressionCV(Cs=2, memory_limit=TINY).fit(X, y)


def test_dask_route_checks_the_client_and_the_workers(sync):
    da = pytest.importorskip("dask.array")
    X, y = make_data("logistic", 60, 30)
    Xd, yd = da.from_array(X, chunks=(20, 30)), da.from_array(y, chunks=20)
    _raises(
        "31 x 31 Hessian of the dask route",
        "fewer features",
        lambda: aloocv.fit(Xd, yd, memory_limit=TINY),
    )
    pb = Problem.build(Xd, yd)
    where = {a.where for a in allocations(pb, "primal", "fit")}
    assert where == {"client", "worker"}
    # the workers' memory is not this process's: only memory_limit= bounds their share
    worker = next(a for a in allocations(pb, "primal", "fit") if a.where == "worker")
    client = sum(a.nbytes for a in allocations(pb, "primal", "fit") if a.where == "client")
    limit = (client + worker.nbytes / 2) / SAFETY_FRACTION
    assert not fits(Problem.build(Xd, yd, memory_limit=limit), "primal", "fit")
    assert fits(Problem.build(Xd, yd, memory_limit=limit + worker.nbytes), "primal", "fit")


def test_dask_multinomial_route(sync):
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((60, 5)), (np.arange(60) % 3).astype(float)
    Xd, yd = da.from_array(X, chunks=(20, 5)), da.from_array(y, chunks=20)
    _raises(
        "Hessian of the dask route's client",
        "fewer classes",
        lambda: aloocv.fit(Xd, yd, loss="multinomial", memory_limit=TINY),
    )


# ----------------------------------------------------------------------------- the cases
def _sparse(n: int, p: int, per_row: int = 2):
    """A CSR matrix with ``per_row`` random entries a row (built in O(n), never dense)."""
    rng = np.random.default_rng(0)
    rows = np.repeat(np.arange(n), per_row)
    cols = rng.integers(0, p, n * per_row)
    return sp.csr_matrix((rng.standard_normal(n * per_row), (rows, cols)), shape=(n, p))


# Each ends in a MemoryError that names the matrix before anything is allocated (a few MB
# of input each; the matrices they would need are 20-80 GB).
def test_ridge_with_p_50000(machine_16gb):
    X, y = make_data("squared", 10, 50000)
    msg = _raises(
        "50001 x 50001 Hessian of the primal route",
        "solver='matrix_free'",
        lambda: aloocv.fit(X, y, loss="squared", solver="primal"),
    )
    assert "of the available memory 16.0 GB" in msg
    aloocv.fit(X, y, loss="squared")  # "auto" takes the 10 x 10 dual route


def test_sparse_50000_square_logistic(machine_16gb):
    n = p = 50000
    X = _sparse(n, p)
    y = (np.arange(n) % 2).astype(float)
    _raises(
        "50001 x 50001 Hessian", "solver='matrix_free'", lambda: aloocv.fit(X, y, solver="primal")
    )


def test_dual_route_at_n_30000(machine_16gb):
    X = _sparse(30000, 40000)
    y = (np.arange(30000) % 2).astype(float)
    _raises(
        "30000 x 30000 kernel of the dual route",
        "solver='matrix_free'",
        lambda: aloocv.loo(X, y, solver="dual"),
    )
    res = aloocv.loo(X, y)  # solver="auto" takes the matrix-free route instead
    assert res.randomized is not None


def test_multinomial_with_500_classes(machine_16gb):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1000, 100))
    y = np.arange(1000) % 500
    # ALO: neither the primal route's Hessian nor the matrix-free route's 500 x 500 blocks
    # fit; the error names the primal route's matrix and both ways out
    _raises(
        "50500 x 50500 (K (p+1))^2 Hessian",
        "fewer classes",
        lambda: aloocv.loo(X, y, loss="multinomial"),
    )
    # the fit holds n x K and p1 x K blocks on the matrix-free route: solver="auto" takes it
    pb = Problem.build(X, y, loss="multinomial")
    assert route.choose(pb, "fit").solver == "matrix_free"
    with pytest.raises(MemoryError, match="50500 x 50500"):
        route.choose(pb, "fit", solver="primal")


# ----------------------------------------------------------------------------- no change
def test_a_generous_limit_changes_nothing():
    X, y = make_data("logistic", 80, 6)
    f0, f1 = aloocv.fit(X, y), aloocv.fit(X, y, memory_limit=GENEROUS)
    assert np.array_equal(f0.coef_, f1.coef_) and f0.intercept_ == f1.intercept_
    l0, l1 = aloocv.loo(X, y), aloocv.loo(X, y, memory_limit=GENEROUS)
    assert np.array_equal(l0.losses, l1.losses) and np.array_equal(l0.leverages, l1.leverages)
    k0, k1 = aloocv.kfold(X, y, n_folds=5), aloocv.kfold(X, y, n_folds=5, memory_limit=GENEROUS)
    assert np.array_equal(k0.losses, k1.losses)
    t0, t1 = aloocv.tune(X, y), aloocv.tune(X, y, memory_limit=2**40)
    assert np.array_equal(t0.penalty.params(), t1.penalty.params()) and t0.acv == t1.acv


# ----------------------------------------------------------------------------- the model
@pytest.mark.parametrize(
    ("solver", "verb"),
    [
        ("primal", "fit"),
        ("primal", "loo"),
        ("primal", "tune"),
        ("dual", "loo"),
        ("primal", "kfold"),
    ],
)
def test_fits_agrees_with_the_model(solver, verb):
    X, y = make_data("logistic", 50, 70)
    pb = Problem.build(X, y)
    need = sum(a.nbytes for a in allocations(pb, solver, verb))
    for limit, expected in (
        (need / SAFETY_FRACTION * 1.001, True),
        (need / SAFETY_FRACTION * 0.999, False),
    ):
        pbl = Problem.build(X, y, memory_limit=limit)
        assert fits(pbl, solver, verb) is expected
        if expected:
            check_memory(pbl, solver, verb)
        else:
            with pytest.raises(MemoryError):
                check_memory(pbl, solver, verb)


def test_the_model_counts_the_core_buffers():
    X, y = make_data("squared", 50, 70)
    pb = Problem.build(X, y, loss="squared", n_jobs=1)
    p1 = 71
    # Hessian, factor, unpenalized copy, and one thread's reduction partial
    assert allocations(pb, "primal", "fit")[0].nbytes == 8 * 4 * p1**2
    # dual: the kernel's 2 column chunks (p = 70 < 8 x 32) or 5 Newton/leverage matrices
    assert allocations(pb, "dual", "fit")[0].nbytes == 8 * 5 * 50**2
    # matrix-free: its probe blocks (3 n and 7 p1 rows of 8 doubles; dense: no CSC index)
    assert allocations(pb, "matrix_free", "fit")[0].nbytes == 8 * 8 * (3 * 50 + 7 * p1)
    # multinomial: K p1 x K p1 Hessian and factor
    yk = np.arange(50) % 4
    pbk = Problem.build(X, yk, loss="multinomial")
    assert allocations(pbk, "primal", "fit")[0].nbytes == 8 * 2 * (4 * p1) ** 2


def test_reduction_partials_follow_the_cores_budget():
    # many threads, small p: the 256 MiB budget of all partials; large p: one partial
    assert _memory._partials(100, 64) == 8 * 64 * 100**2
    assert _memory._partials(5000, 64) == 8 * (_memory.PARTIALS_BUDGET_DOUBLES // 5000**2) * 5000**2
    assert _memory._partials(20000, 64) == 8 * 20000**2


# ----------------------------------------------------------------------------- std::bad_alloc
# In a child process whose address space is capped 2 GB above what it has mapped: the
# core's first large allocation fails at once, with nothing touched (no swap).
_CAPPED = """
import resource, numpy as np, aloocv
from aloocv import _core

def vm_size():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024

cap = vm_size() + 2 * 2**30
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
try:
    {call}
except MemoryError as e:
    print("MemoryError:", e)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
@pytest.mark.parametrize(
    "call",
    [
        # inside run_released: the 20001 x 20001 Hessian (3.2 GB); the pre-check is told 1 TB
        "aloocv.fit(np.ones((10, 20000)), np.zeros(10), loss='squared', solver='primal', "
        "memory_limit='1TB', n_jobs=1)",
        # outside run_released: the binding's own 30000 x 30000 copy of a broadcast kernel
        "_core.kernel_ridge_loo(np.broadcast_to(np.eye(1), (30000, 30000)), np.zeros(30000), "
        "None, 1.0, fit_intercept=True)",
    ],
    ids=["run_released", "binding"],
)
def test_bad_alloc_becomes_a_memory_error_that_says_why(call):
    env_script = textwrap.dedent(_CAPPED).replace("{call}", call)
    out = subprocess.run(
        [sys.executable, "-c", env_script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"},
    )
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    assert line.startswith("MemoryError: an allocation in aloocv's C++ core failed"), line
    assert "memory_limit=" in line and "solver='matrix_free'" in line
