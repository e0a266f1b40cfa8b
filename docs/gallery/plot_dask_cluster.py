"""
Data on a dask cluster
======================

When the rows of ``X`` do not fit one machine's memory, or already live on a
:mod:`dask.distributed` cluster, pass a dask array chunked by rows: aloocv maps its
kernels over the chunks where they are and only brings back ``p x p`` summaries, never
``X`` itself. The results are those of the in-memory computation.

This example starts a small local cluster in this process (``processes=False``: threads,
no extra Python processes) so that it runs anywhere; a real deployment connects a
:class:`~distributed.Client` to its scheduler instead and the aloocv calls stay the same.
"""

# %%
import dask.array as da
import numpy as np
from distributed import Client, LocalCluster
from sklearn.datasets import make_classification

import aloocv

X, y = make_classification(n_samples=10_000, n_features=20, n_informative=8, random_state=0)
y = y.astype(float)

cluster = LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0")
client = Client(cluster)

dX = da.from_array(X, chunks=(2_500, X.shape[1]))  # four blocks of rows
dy = da.from_array(y, chunks=2_500)

# %%
# Leave-one-out on the cluster
# ----------------------------
# The same call as for numpy input; the per-sample arrays of the result are dask arrays
# that stay on the workers until computed, the summaries are numbers.
res = aloocv.loo(dX, dy, loss="logistic", penalty=aloocv.L2(1.0))
print(f"leave-one-out log-loss {res.mean:.5f} +- {res.stderr:.5f}")
print(type(res.losses).__name__, res.losses.chunks[0])

in_memory = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0))
print(f"in memory:             {in_memory.mean:.5f}")
assert np.isclose(res.mean, in_memory.mean, rtol=1e-10)

# %%
# The estimators on the cluster
# -----------------------------
# ``fit``, ``kfold``, ``tune`` and the estimators' ``fit`` take the dask array too; each
# pass over the data is one round of tasks on the workers.
clf = aloocv.ALOLogisticRegressionCV(Cs=[0.01, 0.1, 1.0]).fit(dX, dy)
print(f"ALOLogisticRegressionCV on the cluster: C = {clf.C_[0]:.3g}")
reference = aloocv.ALOLogisticRegressionCV(Cs=[0.01, 0.1, 1.0]).fit(X, y)
assert np.allclose(clf.coef_, reference.coef_, rtol=1e-8, atol=1e-10)

# %%
client.close()
cluster.close()
