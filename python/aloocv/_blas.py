"""Hand the core the BLAS/LAPACK routines of the scipy already loaded.

scipy exposes its BLAS and LAPACK as Fortran-ABI function pointers in
``scipy.linalg.cython_blas.__pyx_capi__``; registering them gives the C++ core
optimized, runtime-dispatched kernels (SYRK, TRSM, POTRF) without compiling for
a particular CPU. The Eigen kernels built into the core remain the fallback.

The core calls BLAS from inside its own OpenMP loops, one row block per thread,
so BLAS itself must run single-threaded there: :func:`single_threaded_blas`
limits every loaded BLAS to one thread for the duration of a heavy call. Every
public function does this; a direct call of ``aloocv._core`` must too (measured:
a Hessian of 10000 x 50 took 24 ms with OpenBLAS's own threads inside our OpenMP
threads, 0.7 ms inside the context).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from . import _core

_CONTROLLER = None


def register() -> bool:
    """Register scipy's BLAS/LAPACK with the core; returns whether it worked."""
    try:
        from scipy.linalg import cython_blas, cython_lapack
    except ImportError:  # pragma: no cover - scipy is a hard dependency
        return False
    caps = {
        "dsyrk": cython_blas.__pyx_capi__["dsyrk"],
        "dtrsm": cython_blas.__pyx_capi__["dtrsm"],
        "dgemm": cython_blas.__pyx_capi__["dgemm"],
        "dpotrf": cython_lapack.__pyx_capi__["dpotrf"],
    }
    _core.set_blas(caps)
    return _core.blas_enabled()


def use_blas(enabled: bool) -> None:
    """Switch between scipy's BLAS (True) and the core's Eigen kernels (False)."""
    _core.use_blas(bool(enabled))


def _controller():
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER


_DEPTH = threading.local()


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Limit the loaded BLAS libraries to one thread (our OpenMP loops parallelize).

    Re-entrant and cheap when nested: loops that call the core many times (tuning)
    enter it once, and inner calls cost nothing."""
    depth = getattr(_DEPTH, "n", 0)
    if depth > 0 or not _core.blas_enabled():
        _DEPTH.n = depth + 1
        try:
            yield
        finally:
            _DEPTH.n = depth
        return
    with _controller().limit(limits=1, user_api="blas"):
        _DEPTH.n = 1
        try:
            yield
        finally:
            _DEPTH.n = 0
