"""The dask backend: ``fit``, ``loo``, ``kfold`` and ``tune`` as map-reduce passes over
the row chunks of a dask array.

Every pass maps one core kernel (``aloocv._core.chunk_*``, the same C++ loss, gradient,
Hessian, leverage and hypergradient code as the in-memory path) over the row chunks of
``(X, y, sample_weight, offset)`` and adds the per-chunk partial sums in a tree
(fan-in ``policy.TREE_FANIN``); the p1 x p1 algebra (Cholesky factor, Newton and adjoint
solves) runs on the client. X is never concatenated and never reaches the client: what
comes back of a pass is O(p1^2) (plus, where documented, one float per sample).

The tasks run on whatever dask scheduler is active: the workers of a
``dask.distributed.Client``, or without one dask's threaded scheduler in this process
(out of core: a dask array whose tasks read their own rows from disk, or over zarr, is
read chunk by chunk, once per pass; float32 chunks stay float32, read in place by the
kernels). Lost chunks (a worker that dies) are recomputed by dask; the partial sums of a
chunk do not depend on where or how often it is computed, so the result does not change.

Passes over X: the smooth fits are the core's one Newton driver (``newton_drive``, the
in-memory fits' iterates, steps and Hessian count) on a sums source whose every
evaluation is one pass (:mod:`.newton`): one pass per Newton iteration (loss, gradient
and, where the next step needs it, the Hessian of the trial point together, so an
accepted full step costs no extra pass; near the optimum chord steps on the last factor
need gradient-only passes, and the Hessian at the solution comes with the last one).
ALO (:mod:`.alo`): one more pass (leverages, in the same pass as the hypergradient's
first accumulation and the sums of ALO's error indicator, :mod:`.screen`: plain ALO's
self-check decides on their bound; where it says there is risk, and always for the
multinomial loss, one more pass over the leverage pass's outputs (no read of X on a
distributed client) ranks the samples, and their top ones are refitted exactly, whose
rows of X alone come to the client); the exact hypergradient of a curved loss: one more
pass. With an L1 term (L1, ElasticNet) the fit is the core's active-set proximal Newton (a gradient
pass and a Hessian pass over the working-set columns per outer iteration, the quadratic
model solved on the client by the core's coordinate descent) and ALO, its hypergradient
and the approximate K-fold use the columns of the active set, as in memory.
Exact leave-one-out (``method="exact"``, :mod:`.refits`): the core's refits (each from
the full fit, chord steps on the full factor downdated by the left-out sample, then
fresh leave-one-out Hessians; the core's policy constants read from ``_core``) run in
lockstep batches of ``policy.EXACT_BATCH`` samples, one pass per iteration that returns
p1 floats per refit (``_core.chunk_refits``). Tuning (:mod:`.tuning`, :mod:`.tuning_multinomial`)
brings back per evaluated point the fit, the ALO mean, its standard error and gradient;
the per-sample values stay lazy dask arrays aligned with X's chunks, and on a
distributed client the workers hold those of the best point so far only (:mod:`.held`).
Each chunk task uses ``n_jobs`` OpenMP threads (default 1: dask runs the chunks in
parallel) and a single-threaded BLAS. On persisted input (every chunk of X, y, w,
offset held by a distributed client's workers) a pass maps over the chunks' futures
(``client.map``) and adds the partial sums on the client: no graph is built per pass.
Every pass costs dask's scheduling of one task per chunk: chunks of about 100 MB (dask's
default chunk size) keep that small (seen at n=1e6, p=100 on 2 workers: 1.1-1.2x the
in-memory time with 100 MB chunks, 1.6-1.8x with 40 MB chunks). The multinomial loss:
:mod:`.multinomial`, :mod:`.loo_multinomial`, :mod:`.kfold_multinomial`,
:mod:`.tuning_multinomial`.

The entry points take a problem (:class:`aloocv.problem.Problem` of dask input), one per
route (the route table, :mod:`aloocv.backends.route`, picks it):
:func:`fit`, :func:`loo`, :func:`kfold`, :func:`tune_state` for the scalar losses and
:func:`multinomial_fit`, :func:`multinomial_loo`, :func:`multinomial_kfold`,
:func:`multinomial_tune_state` for the multinomial loss.
"""

from .data import Data
from .kfold import kfold
from .kfold_multinomial import kfold as multinomial_kfold
from .loo import loo
from .loo_multinomial import loo as multinomial_loo
from .multinomial import fit as multinomial_fit
from .newton import fit
from .tuning import DaskTuneState, tune_state
from .tuning_multinomial import DaskMultinomialTuneState
from .tuning_multinomial import tune_state as multinomial_tune_state

__all__ = [
    "DaskMultinomialTuneState",
    "DaskTuneState",
    "Data",
    "fit",
    "kfold",
    "loo",
    "multinomial_fit",
    "multinomial_kfold",
    "multinomial_loo",
    "multinomial_tune_state",
    "tune_state",
]
