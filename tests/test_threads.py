"""The core's OpenMP threads under threadpoolctl: the registered controller, the limit
that n_jobs=None follows, and what the core is asked for (no timings here: see
benchmarks/threads.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from threadpoolctl import ThreadpoolController, threadpool_info, threadpool_limits

import aloocv
from aloocv import _core, _threads
from aloocv._validation import n_threads
from conftest import make_data


def _ours(info):
    return [d for d in info if d["internal_api"] == "aloocv"]


def test_threadpool_info_lists_the_core():
    mine = _ours(threadpool_info())
    assert len(mine) == 1
    assert os.path.realpath(mine[0]["filepath"]) == os.path.realpath(_core.__file__)
    assert mine[0]["user_api"] == "openmp"
    assert mine[0]["version"] == aloocv.__version__
    assert mine[0]["num_threads"] == _core.max_threads() >= 1


def _spy_fit(monkeypatch):
    """Record the n_threads the core's fit is asked for (a keyword argument)."""
    asked = []
    real = _core.fit

    def spy(*args, **kw):
        asked.append(kw["n_threads"])
        return real(*args, **kw)

    monkeypatch.setattr(_core, "fit", spy)
    return asked


@pytest.mark.parametrize("user_api", [None, "openmp"])
def test_threadpool_limits_reach_the_core(monkeypatch, user_api):
    X, y = make_data("logistic", 50, 3, seed=400)
    asked = _spy_fit(monkeypatch)
    before = _core.max_threads()
    with threadpool_limits(limits=1, user_api=user_api):
        (ctl,) = _ours(threadpool_info())
        assert ctl["num_threads"] == 1
        assert _core.thread_limit() == 1 and _core.max_threads() == 1
        assert n_threads(None) == 1
        aloocv.fit(X, y, penalty=aloocv.L2(1.0))
        # an explicit n_jobs is the caller's choice and is used as given
        aloocv.fit(X, y, penalty=aloocv.L2(1.0), n_jobs=3)
    assert asked == [1, 3]
    assert _core.max_threads() == before
    aloocv.fit(X, y, penalty=aloocv.L2(1.0))
    assert asked[-1] == before


def test_controller_limit_is_a_cap():
    """The limit caps OpenMP's default; it never raises it; 0 lifts it."""
    ctl = ThreadpoolController().select(internal_api="aloocv")
    base = _core.max_threads()
    try:
        _core.set_thread_limit(base + 5)
        assert _core.max_threads() == base
        _core.set_thread_limit(1)
        assert ctl.info()[0]["num_threads"] == 1
    finally:
        _core.set_thread_limit(0)
    assert _core.thread_limit() == 0 and _core.max_threads() == base


def test_register_is_idempotent():
    assert _threads.register()
    assert _threads.register()
    assert len(_ours(threadpool_info())) == 1


def test_results_do_not_depend_on_the_limit():
    X, y = make_data("logistic", 300, 8, seed=401)
    a = aloocv.loo(X, y, penalty=aloocv.L2(1.0))
    with threadpool_limits(1):
        b = aloocv.loo(X, y, penalty=aloocv.L2(1.0))
    np.testing.assert_array_equal(a.losses, b.losses)


_DISPLAY = """
import ctypes, os, sys
import aloocv
from threadpoolctl import threadpool_info
assert "OMP_WAIT_POLICY" not in os.environ or os.environ["OMP_WAIT_POLICY"] == "active"
for d in threadpool_info():
    if d["prefix"] == "libgomp" and "scikit_learn" not in d["filepath"]:
        lib = ctypes.CDLL(d["filepath"])
        if hasattr(lib, "omp_display_env"):
            sys.stderr.flush()
            lib.omp_display_env(0)
            sys.exit(0)
sys.exit(3)
"""


def test_wait_policy_passive():
    """The core's OpenMP runtime is loaded passive when the environment does not choose,
    and the environment is left as it was (a fresh process: libgomp reads it once)."""
    environ = {k: v for k, v in os.environ.items() if k not in _threads.WAIT_POLICY_VARIABLES}
    res = subprocess.run(
        [sys.executable, "-c", _DISPLAY], env=environ, capture_output=True, text=True, timeout=60
    )
    if res.returncode == 3:
        pytest.skip("the core's OpenMP runtime is not a libgomp with omp_display_env")
    assert res.returncode == 0, res.stderr
    assert "OMP_WAIT_POLICY = 'PASSIVE'" in res.stderr


@pytest.mark.parametrize("var", _threads.WAIT_POLICY_VARIABLES)
def test_wait_policy_of_the_user_is_kept(monkeypatch, var):
    for v in _threads.WAIT_POLICY_VARIABLES:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv(var, "7")
    _threads._load_core_passive()
    assert os.environ[var] == "7"
    assert var == "OMP_WAIT_POLICY" or "OMP_WAIT_POLICY" not in os.environ
    monkeypatch.delenv(var)
    _threads._load_core_passive()
    assert not any(v in os.environ for v in _threads.WAIT_POLICY_VARIABLES)
