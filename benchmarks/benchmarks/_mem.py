"""The library's own memory in asv: the peak resident memory of one call above the
resident memory at its start.

asv's ``peakmem_`` benchmarks report the process's maximum resident set size, which
includes the interpreter, the imports and the data built in ``setup``: two calls on the
same data then report the same number whenever that baseline dominates (as
``peakmem_fit`` and ``peakmem_loo_alo`` did). :func:`call_peak` measures the call alone
instead, for ``track_`` benchmarks in bytes: it resets the kernel's high-water mark of
the process to its current resident size (Linux: ``5`` written to
``/proc/self/clear_refs``), reads the resident size, runs the call, and returns the
high-water mark's rise. Pages the call allocates and frees again still count (the peak),
pages it leaves behind in its result count too. One untimed call first, so that
one-time allocations (thread pools, BLAS buffers, lazy imports) are not charged to it;
then ``malloc_trim(0)`` hands the memory that call freed back to the system (glibc keeps
freed blocks resident in its heaps, and the measured call would reuse them unseen).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Callable
from typing import Any

_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"


def _status_kib(field: str) -> int:
    """A ``kB`` field of /proc/self/status (VmRSS, VmHWM)."""
    with open(_STATUS) as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"{field} not in {_STATUS}")


def _trim() -> None:
    """glibc's ``malloc_trim(0)``: free heap memory back to the system (all arenas)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def available() -> bool:
    """Whether the high-water mark can be reset here (Linux >= 4.0, not every sandbox)."""
    try:
        with open(_CLEAR_REFS, "w") as fh:
            fh.write("5")
        _status_kib("VmHWM")
    except OSError:
        return False
    return True


def require() -> None:
    """Skip the calling asv benchmark (``NotImplementedError`` in setup) where
    :func:`call_peak` cannot measure."""
    if not available():
        raise NotImplementedError("the resident high-water mark cannot be reset here")


def call_peak(f: Callable[[], Any], warmup: bool = True) -> int:
    """Bytes of resident memory the call ``f()`` adds at its peak.

    Parameters
    ----------
    f : callable
        The call measured.
    warmup : bool, default True
        Call ``f`` once, unmeasured, first.

    Returns
    -------
    int
        ``VmHWM`` after the call less ``VmRSS`` before it, in bytes (0 at least).

    Examples
    --------
    >>> import numpy as np
    >>> call_peak(lambda: np.ones(2**24).sum()) > 100 * 2**20  # a 128 MiB temporary
    True
    """
    if warmup:
        f()
    gc.collect()
    _trim()
    with open(_CLEAR_REFS, "w") as fh:
        fh.write("5")
    base = _status_kib("VmRSS")
    out = f()
    peak = _status_kib("VmHWM")
    del out
    return max(peak - base, 0) * 1024
