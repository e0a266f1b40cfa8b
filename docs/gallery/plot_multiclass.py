"""
Multiclass classification: one softmax model, its C chosen by leave-one-out
============================================================================

For more than two classes :class:`aloocv.ALOLogisticRegressionCV` fits the multinomial
(softmax) logistic regression, like scikit-learn's
:class:`~sklearn.linear_model.LogisticRegression`, and chooses ``C`` by approximate
leave-one-out log-loss. Here the three cultivars of scikit-learn's bundled wine data.

The approximation is checked against the real thing: ``method="exact"`` refits the
model once per sample (178 refits), affordable at this size.
"""

# %%
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_wine
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import aloocv

X, y = load_wine(return_X_y=True)
Cs = np.logspace(-2, 2, 15)
model = make_pipeline(StandardScaler(), aloocv.ALOLogisticRegressionCV(Cs=Cs))
model.fit(X, y)
clf = model[-1]
print(f"classes: {clf.classes_}, model: {clf.multi_class_}")
print(f"chosen C: {clf.C_[0]:.3g}, leave-one-out log-loss {-clf.best_score_:.4f}")
print(f"coefficients: {clf.coef_.shape} (one row per class)")

# %%
# Approximate against exact leave-one-out
# ---------------------------------------
# ``aloocv.L2(1 / C)`` is the same penalty in aloocv's functions; the labels are class
# indices 0..K-1 for ``loss="multinomial"``. The classes are almost separable and the
# chosen penalty is weak, which is where the one-step approximation is least accurate:
# aloocv checks itself and says so with an :class:`aloocv.ALOWarning`.
Xs = StandardScaler().fit_transform(X)
penalty = aloocv.L2(1 / clf.C_[0])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    approx = aloocv.loo(Xs, y, loss="multinomial", penalty=penalty)
for w in caught:
    print(f"{w.category.__name__}: {w.message}")
exact = aloocv.loo(Xs, y, loss="multinomial", penalty=penalty, method="exact")
print(f"approximate: {approx.mean:.5f}  exact: {exact.mean:.5f}")

# %%
# An error budget
# ---------------
# ``rtol=0.01`` asks for the mean within 1% of exact leave-one-out: aloocv refits the few
# samples that carry the error exactly and reports how many it needed.
refined = aloocv.loo(Xs, y, loss="multinomial", penalty=penalty, rtol=0.01)
print(f"with rtol=0.01: {refined.mean:.5f} ({refined.error_estimate.n_refits} exact refits)")
assert abs(refined.mean - exact.mean) <= 0.01 * exact.mean

# %%
# The estimator takes the same budget: ``ALOLogisticRegressionCV(rtol=0.01)`` chooses C
# on the refined estimate near ALO's choice.
trusted = make_pipeline(StandardScaler(), aloocv.ALOLogisticRegressionCV(Cs=Cs, rtol=0.01))
trusted.fit(X, y)
print(f"chosen C with the error budget: {trusted[-1].C_[0]:.3g}")

# %%
# Leave-one-out class scores: the predicted class of each sample as if it had not been
# seen.
loo_accuracy = np.mean(refined.predictions.argmax(axis=1) == y)
print(f"leave-one-out accuracy: {loo_accuracy:.3f}")

# %%
display = trusted[-1].plot_cv()
display.ax_.set_title("Wine, 3 classes: multinomial logistic regression")
plt.show()
