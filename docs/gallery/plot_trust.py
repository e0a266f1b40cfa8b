"""
When to trust the one-fit estimate: warnings, error budgets and certificates
=============================================================================

The leave-one-out estimate from one fit is exact for ridge regression and very close
to exact refits for smooth, well-regularized models. It can be far off when a few
samples pull the fit hard: nearly separable classes with a weak penalty are the typical
case. aloocv watches for that itself and offers two ways to get a number you can rely
on. This example walks through them on scikit-learn's wine data (cultivar 0 against the
other two, standardized), where the classes are almost separable.
"""

# %%
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_wine
from sklearn.preprocessing import StandardScaler

import aloocv

X, label = load_wine(return_X_y=True)
X = StandardScaler().fit_transform(X)
y = (label == 0).astype(float)

# %%
# A weak penalty: the estimate warns
# ----------------------------------
# At ``C = 100`` (``aloocv.L2(0.01)``) the one-fit estimate refits the few samples its
# per-sample error indicator ranks first, finds that the mean may be off, and says so
# with an :class:`aloocv.ALOWarning`.
penalty = aloocv.L2(0.01)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    plain = aloocv.loo(X, y, loss="logistic", penalty=penalty)
for w in caught:
    print(f"{w.category.__name__}: {w.message}\n")
exact = aloocv.loo(X, y, loss="logistic", penalty=penalty, method="exact")
print(f"one-fit estimate {plain.mean:.5f}, exact leave-one-out {exact.mean:.5f}")

# %%
# The error is carried by few samples: the indicator (``plain.indicator``) ranks them,
# and the samples flagged ``unreliable`` are among those with the largest true error.
true_error = np.abs(plain.losses - exact.losses)
order = np.argsort(plain.indicator)[::-1]
print("samples with the largest indicator:", order[:5])
print("samples with the largest true error:", np.argsort(true_error)[::-1][:5])
print(f"flagged unreliable: {plain.unreliable.sum()} of {len(y)}")

# %%
# An error budget: ``rtol=``
# --------------------------
# ``rtol=0.01`` refits exactly the samples that carry the error until the mean is within
# 1% of exact leave-one-out at 95% confidence.
refined = aloocv.loo(X, y, loss="logistic", penalty=penalty, rtol=0.01)
estimate = refined.error_estimate
print(f"within the budget: {estimate.met}, after {estimate.n_refits} exact refits")
print(f"refined estimate {refined.mean:.5f} (exact {exact.mean:.5f})")
assert abs(refined.mean - exact.mean) <= 0.01 * exact.mean

# %%
# A certificate
# -------------
# ``certify`` measures any approximate result against exact refits of a few samples (the
# top-ranked ones, then others drawn at random) and bounds the error of the mean with a
# confidence interval.
certificate = plain.certify(n_samples=20)
print(certificate)
assert certificate.ci_low <= plain.mean - exact.mean <= certificate.ci_high

# %%
# A stronger penalty: no warning
# ------------------------------
# At ``C = 1`` the self-check finds no sample at risk and stays silent; the estimate is
# within a couple of percent of exact refits, which is what the warning's threshold
# allows.
strong = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0))
strong_exact = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0), method="exact")
relative = strong.mean / strong_exact.mean - 1
print(f"C = 1: estimate {strong.mean:.5f}, exact {strong_exact.mean:.5f} ({relative:+.1%})")
assert abs(relative) < 0.02

# %%
# Per-sample errors against the indicator at ``C = 100``:
# (values below 1e-12, rounding level, are drawn at 1e-12).
floor = 1e-12
fig, ax = plt.subplots()
ax.loglog(np.maximum(plain.indicator, floor), np.maximum(true_error, floor), "o", alpha=0.6)
ax.plot([floor, 1], [floor, 1], "k:", label="indicator = error")
ax.legend()
ax.set_xlabel("error indicator")
ax.set_ylabel("|one-fit estimate - exact leave-one-out| per sample")
ax.set_title("Wine, class 0 against the rest, C = 100")
plt.show()
