"""The dask backend's own constants (chunk fan-in, refit batches and threads), and its
line-search test.

The core's Newton policy is read from :mod:`aloocv._core`, never restated: the line
search's ``ARMIJO`` and ``MAX_HALVINGS``, ``TINY_DECREASE`` (a predicted decrease at the
rounding level) and ``STALL_ITERS`` (newton_driver.hpp), the exact refits'
``EXACT_CHORD_RATIO`` and ``EXACT_MAX_CHORD`` (loo.hpp's exact_loo) and the multinomial
cold start's ``MIN_CLASS_SHARE`` (multinomial.hpp). The modules of the backend read the
constants below as ``policy.NAME`` (one place to change, or to patch in a test).
"""

from __future__ import annotations

import numpy as np

from ... import _core

#: Partial sums added per task of the tree reduction.
TREE_FANIN = 8
#: The last (at most TREE_FANIN) partial sums of a pass are added on the client when
#: they hold at most this many bytes together (one task and one transfer less per pass).
CLIENT_ADD_BYTES = 16 * 2**20
#: Exact leave-one-out refits run in lockstep per pass over X (each pass returns
#: p1 x this many floats; each task holds a row block x this many linear predictors).
EXACT_BATCH = 64
#: Rows of EXACT_FETCH batches are brought to the client at once (their x~_j, y_j, w_j
#: for the Sherman-Morrison downdates): one read of their chunk per EXACT_FETCH batches.
EXACT_FETCH = 16
#: Refits that each run their own chain of passes over the chunks (exact leave-one-out
#: and K-fold with an L1 term or the multinomial loss, the certificate's sampled refits)
#: run this many at a time on a distributed client, each from a thread on the client:
#: their round trips overlap on the cluster (refits._refits). LocalCluster, 2 workers,
#: n=40, p=8: exact leave-one-out with an L1 term 6.8 s instead of 16.0 s, multinomial
#: 5.6 s instead of 15.8 s. With the local threaded scheduler (no round trips to
#: overlap) threads took 1.17-1.23x as long: there the refits run one at a time.
REFIT_THREADS = 8
#: The caller of those refits waits for them in slices of this many seconds (Ctrl-C).
REFIT_POLL_S = 0.1
#: Fewer refits run together where their client-side state (Hessians) would exceed this.
REFIT_BYTES = 256 * 2**20


def tiny_decrease(dec: np.ndarray, f: np.ndarray) -> np.ndarray:
    """The core's tiny_decrease (newton_driver.hpp), elementwise: whether a step's
    predicted decrease `dec` is at the rounding level of the objective `f` (such steps
    are taken without the Armijo test, and count towards the stall detection)."""
    return 0.5 * dec <= _core.TINY_DECREASE * np.maximum(1.0, np.abs(f))


def armijo_accepts(
    f_try: np.ndarray, f: np.ndarray, t: np.ndarray, dec: np.ndarray, tiny: np.ndarray
) -> np.ndarray:
    """The core's Armijo test (newton_driver.hpp's armijo), elementwise over a batch of
    line searches: the objective `f_try` at step length `t` is finite and, unless the
    predicted decrease `dec` is at the rounding level (`tiny`), at most
    ``f - ARMIJO t dec``. The one line-search test of the dask backend's Newton loops
    (the other fits run the core's own driver)."""
    return np.isfinite(f_try) & (tiny | (f_try <= f - _core.ARMIJO * t * dec))
