"""The core's OpenMP threads under threadpoolctl.

``n_jobs=None`` runs the core's parallel loops on OpenMP's default team (the calling
thread's ``omp_get_max_threads()``: ``OMP_NUM_THREADS``, ``omp_set_num_threads``), capped
by a process-wide thread limit of the core. :class:`ALOOCVController` exposes that limit
to threadpoolctl, so ``threadpoolctl.threadpool_limits(1)`` (which scikit-learn and joblib
use to keep nested parallelism from oversubscribing the machine) caps the core too, and
``threadpoolctl.threadpool_info()`` lists it (``internal_api="aloocv"``, ``user_api=
"openmp"``). joblib's process workers (loky) set ``OMP_NUM_THREADS`` to their share of the
cores, which OpenMP's default already follows. An explicit ``n_jobs`` is used as given.

Small problems run serially whatever the limit (the core's ``kSerialFlops``): waking a
team costs more than it saves there.

Wait policy: unless the environment chooses one (``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT``
or ``KMP_BLOCKTIME`` set), the core's OpenMP runtime is loaded with
``OMP_WAIT_POLICY=passive``: idle team threads sleep instead of spinning for up to
~300k iterations between parallel regions. Spinning threads take the cores from the
thread that runs the serial steps between regions (Cholesky factorizations, line
searches); on a machine loaded by other processes that made ``n_jobs=None`` many times
slower than ``n_jobs=1`` (measured: ``loo`` of a 3000 x 50 logistic fit, 2 cores at load
8.6: 104 ms with two spinning threads, 3.6 ms passive, 3.4 ms on one thread). The core
enters a parallel region only for about a millisecond of work or more, where waking a
sleeping thread costs little. The variable is set only while the extension loads and
removed after; it takes effect only when the process had not loaded that OpenMP runtime
before (libgomp reads it once, when loaded). ``OMP_WAIT_POLICY=active`` restores
spinning.
"""

from __future__ import annotations

import os

#: Environment variables by which a user chooses an OpenMP wait policy (then kept as is).
WAIT_POLICY_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


def _load_core_passive() -> None:
    """Import the extension (and its OpenMP runtime) with a passive wait policy unless
    the environment sets one; the environment is left as it was."""
    if any(k in os.environ for k in WAIT_POLICY_VARIABLES):
        from . import _core

        return
    os.environ["OMP_WAIT_POLICY"] = "passive"
    try:
        from . import _core  # noqa: F401 - imported for its side effect: loading
    finally:
        os.environ.pop("OMP_WAIT_POLICY", None)


_load_core_passive()

from . import _core  # noqa: E402 - loaded above
from ._version import __version__  # noqa: E402

__all__ = ["ALOOCVController", "register"]

try:
    from threadpoolctl import LibController
except ImportError:  # pragma: no cover - threadpoolctl < 3.5 has no public base class
    LibController = None  # type: ignore[assignment,misc]


if LibController is not None:

    class ALOOCVController(LibController):
        """threadpoolctl controller of the aloocv core's OpenMP threads."""

        user_api = "openmp"
        internal_api = "aloocv"
        filename_prefixes = ("_core",)
        check_symbols = ("aloocv_get_num_threads", "aloocv_set_num_threads")

        def get_num_threads(self) -> int:
            """Threads a call with ``n_jobs=None`` gets now."""
            return int(self.dynlib.aloocv_get_num_threads())

        def set_num_threads(self, num_threads: int) -> None:
            """Cap the core's threads (process-wide)."""
            self.dynlib.aloocv_set_num_threads(int(num_threads))

        def get_version(self) -> str:
            return __version__

else:  # pragma: no cover
    ALOOCVController = None  # type: ignore[assignment,misc]


def register() -> bool:
    """Register :class:`ALOOCVController` with threadpoolctl (>= 3.5); returns whether it
    could be registered."""
    if ALOOCVController is None:  # pragma: no cover - old threadpoolctl
        return False
    import threadpoolctl

    reg = getattr(threadpoolctl, "register", None)
    if reg is None:  # pragma: no cover - old threadpoolctl
        return False
    if ALOOCVController not in getattr(threadpoolctl, "_ALL_CONTROLLERS", ()):
        reg(ALOOCVController)
    return True


def max_threads() -> int:
    """Threads of a call with ``n_jobs=None`` now (OpenMP's default under the limit)."""
    return int(_core.max_threads())
