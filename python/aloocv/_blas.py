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
        "dtrmm": cython_blas.__pyx_capi__["dtrmm"],
        "dgemv": cython_blas.__pyx_capi__["dgemv"],
        "ssyrk": cython_blas.__pyx_capi__["ssyrk"],
        "strmm": cython_blas.__pyx_capi__["strmm"],
        "dpotrf": cython_lapack.__pyx_capi__["dpotrf"],
    }
    _core.set_blas(caps)
    return _core.blas_enabled()


def use_blas(enabled: bool) -> None:
    """Switch between scipy's BLAS (True) and the core's Eigen kernels (False)."""
    _core.use_blas(enabled=bool(enabled))


def _controller():
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER


def _blas_libraries() -> list:
    """threadpoolctl's controllers of the loaded BLAS libraries (found once per process,
    with the controller)."""
    global _BLAS_LIBRARIES
    if _BLAS_LIBRARIES is None:
        _BLAS_LIBRARIES = [c for c in _controller().lib_controllers if c.user_api == "blas"]
    return _BLAS_LIBRARIES


_BLAS_LIBRARIES: list | None = None

# One process-wide context: threadpoolctl's limits are process-wide, so the depth that
# decides when to set and when to restore them must be too (a per-thread depth let two
# overlapping calls from different threads each save the other's limit of 1 as "the
# original" and leave BLAS at 1 thread for the rest of the process).
_LOCK = threading.Lock()
_DEPTH = 0
#: The libraries the first entry limited, with their thread counts before it.
_SAVED: list = []


def _release_control() -> None:
    """threadpoolctl (>= 3.6) lets only one "controlling" Python thread change a
    pthreads OpenBLAS's limit and silently ignores the others; the thread that restores
    the limits here may not be the one that set them, so hand control over explicitly."""
    try:
        from threadpoolctl import OpenBLASController
    except ImportError:  # pragma: no cover - older threadpoolctl: no such rule
        return
    clear = getattr(OpenBLASController, "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)


def _set_threads(libraries: list) -> None:
    """``set_num_threads(n)`` of each ``(library, n)``, in control of OpenBLAS."""
    _release_control()
    try:
        for lib, n in libraries:
            lib.set_num_threads(n)
    finally:
        _release_control()


def _enter() -> bool:
    """Count one holder; the first limits every BLAS not already at one thread (what
    ``threadpoolctl``'s ``limit(limits=1, user_api="blas")`` does, without its per-call
    inventory of the libraries). Returns whether this entry counted."""
    global _DEPTH, _SAVED
    with _LOCK:
        if _DEPTH == 0:
            if not _core.blas_enabled():
                return False
            before = [(lib, lib.get_num_threads()) for lib in _blas_libraries()]
            _SAVED = [(lib, n) for lib, n in before if n != 1]
            if _SAVED:
                _set_threads([(lib, 1) for lib, _ in _SAVED])
        _DEPTH += 1
        return True


def _exit() -> None:
    global _DEPTH, _SAVED
    with _LOCK:
        _DEPTH -= 1
        if _DEPTH == 0 and _SAVED:
            saved, _SAVED = _SAVED, []
            # the limits from before the first entry (None: the library does not say)
            _set_threads([(lib, n) for lib, n in saved if n is not None])


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Limit the loaded BLAS libraries to one thread (our OpenMP loops parallelize).

    Re-entrant, cheap when nested and safe across threads: a process-wide counter under
    a lock sets the limit on the first entry and restores the original limits when the
    last holder (of any thread) leaves. Loops that call the core many times (tuning)
    enter it once, and inner calls cost nothing."""
    counted = _enter()
    try:
        yield
    finally:
        if counted:
            _exit()
