"""The dask backend's own constants (chunk fan-in, refit batches and threads).

The core's Newton policy is never restated here: the smooth fits run the core's driver on
chunk sums, the lockstep exact leave-one-out refits run the core's
``_core.RefitBatch`` (exact_loo's policy: its line search, stall rule and chord phase,
refit_batch.hpp), and the multinomial cold start reads ``MIN_CLASS_SHARE``
(multinomial.hpp) from :mod:`aloocv._core`. The modules of the backend read the
constants below as ``policy.NAME`` (one place to change, or to patch in a test).
"""

from __future__ import annotations

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
