"""
Sparse, text-like data: logistic regression without a p x p matrix
==================================================================

Bag-of-words features are sparse and wide: many more columns than documents, and each
document uses few of them. Forming the ``p x p`` Hessian of a logistic regression (or
even the ``n x n`` kernel) is then the expensive part, and aloocv's
``solver="matrix_free"`` never forms either: it fits by Newton steps with conjugate
gradients and estimates the leverages (the diagonal the leave-one-out formula needs) by
random probes. ``solver="auto"`` weighs the routes' costs and picks one by itself.

The corpus is generated in the script (no download): short "reviews" drawn from a
shared vocabulary, where a positive and a negative set of words shift the odds of the
label.
"""

# %%
# A generated corpus, vectorized
# ------------------------------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

import aloocv

rng = np.random.default_rng(0)
vocabulary = np.array([f"w{k}" for k in range(2000)])
positive, negative = vocabulary[:40], vocabulary[40:80]
n_docs = 300
labels = rng.integers(0, 2, n_docs)
docs = []
for label in labels:
    words = list(rng.choice(vocabulary, size=rng.integers(20, 60)))
    cue = positive if label == 1 else negative
    words += list(rng.choice(cue, size=4))
    # some noise: a cue of the other class
    words += list(rng.choice(negative if label == 1 else positive, size=1))
    docs.append(" ".join(words))

X = TfidfVectorizer().fit_transform(docs)  # scipy.sparse CSR, never densified
y = labels.astype(float)
print(f"{X.shape[0]} documents, {X.shape[1]} terms, {X.nnz / np.prod(X.shape):.2%} nonzero")

# %%
# Leave-one-out along a grid of penalties
# ---------------------------------------
# ``aloocv.L2(lam)`` is scikit-learn's ``LogisticRegression(C=1/lam)``. Each call fits
# the model and returns the approximate leave-one-out log-loss with its standard error;
# ``randomized`` is the part of that standard error that the random probes add.
lams = np.logspace(-4, 0, 9)
means, stderrs = [], []
for lam in lams:
    res = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(lam), solver="matrix_free")
    means.append(res.mean)
    stderrs.append(res.stderr)
means, stderrs = np.array(means), np.array(stderrs)
best = lams[np.argmin(means)]
print(f"lambda with the lowest leave-one-out log-loss: {best:.3g} (C = {1 / best:.3g})")

# %%
# Checking the randomized leverages
# ---------------------------------
# With fewer documents than terms, the ``n x n`` dual route computes the leverages
# exactly at a modest cost here; the two estimates agree within a few standard errors of
# the randomization.
free = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(best), solver="matrix_free")
dual = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(best), solver="dual")
print(f"matrix-free, {free.randomized.n_probes} random probes: {free.mean:.5f}")
print(f"  the standard error the probes add to it: {free.randomized.mean_stderr:.1g}")
print(f"dual, exact leverages: {dual.mean:.5f}")
assert abs(free.mean - dual.mean) < 4 * free.randomized.mean_stderr

# %%
# The curve
fig, ax = plt.subplots()
ax.errorbar(lams, means, yerr=stderrs, marker="o", capsize=3)
ax.set_xscale("log")
ax.set_xlabel("lambda (= 1 / C)")
ax.set_ylabel("leave-one-out log-loss")
ax.set_title("Sparse text-like data, matrix-free route")
plt.show()
