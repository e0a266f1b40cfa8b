"""
Claim counts with exposure: Poisson regression with an offset
=============================================================

Insurance claim counts, visits or defects are counts observed over different lengths of
time (the *exposure*): a policy held for three months has fewer claims than the same
policy held for a year. The standard model is a Poisson regression of the counts with
``log(exposure)`` as an *offset*, a known part of the linear predictor:
``log E[count] = log(exposure) + X coef + intercept``.

:class:`aloocv.ALOPoissonRegressorCV` fits it, with ``alpha`` chosen by leave-one-out,
and takes the offset in ``fit`` and ``predict``. The data are generated in the script:
policyholders with a driver age band, a vehicle power and a region, each observed for a
random fraction of a year.
"""

# %%
# Generated policies
# ------------------
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.preprocessing import OneHotEncoder

import aloocv

rng = np.random.default_rng(42)
n = 5000
policies = pd.DataFrame(
    {
        "age_band": rng.choice(["18-25", "26-40", "41-60", "60+"], n, p=[0.15, 0.35, 0.35, 0.15]),
        "power": rng.choice(["low", "medium", "high"], n),
        "region": rng.choice([f"R{k}" for k in range(8)], n),
    }
)
exposure = rng.uniform(0.1, 1.0, n)  # years observed
true_rate = (
    0.1
    * policies["age_band"].map({"18-25": 2.5, "26-40": 1.0, "41-60": 0.8, "60+": 1.2})
    * policies["power"].map({"low": 0.8, "medium": 1.0, "high": 1.4})
).to_numpy()
claims = rng.poisson(true_rate * exposure)
print(f"{claims.sum()} claims over {exposure.sum():.0f} policy-years")

X = OneHotEncoder(sparse_output=False).fit_transform(policies)

# %%
# Counts with an offset
# ---------------------
# ``alphas`` are in scikit-learn's ``PoissonRegressor`` convention (mean deviance plus
# ``alpha / 2 ||coef||^2``).
offset = np.log(exposure)
model = aloocv.ALOPoissonRegressorCV(alphas=np.logspace(-5, -1, 12))
model.fit(X, claims, offset=offset)
print(f"chosen alpha: {model.alpha_:.3g}")

# %%
# The same model as rates with weights
# ------------------------------------
# Dividing the counts by the exposure and weighting each policy by its exposure gives the
# same fit (the Poisson likelihood of the rates with these weights equals that of the
# counts with the offset, up to a constant); this is how scikit-learn's
# ``PoissonRegressor`` is used without an offset. One detail: ``alpha`` multiplies the
# *mean* deviance, and the mean is now over the total exposure instead of the number of
# policies, so the same penalty is ``alpha * n / sum(exposure)``.
rates = aloocv.ALOPoissonRegressorCV(alphas=[model.alpha_ * n / exposure.sum()])
rates.fit(X, claims / exposure, sample_weight=exposure)
print("largest coefficient difference:", np.abs(rates.coef_ - model.coef_).max())
assert np.allclose(rates.coef_, model.coef_, atol=1e-6)

# %%
# Predictions
# -----------
# ``predict`` without an offset gives the yearly claim frequency; with the offset, the
# expected number of claims over each policy's own exposure.
frequency = model.predict(X)
expected = model.predict(X, offset=offset)
print(f"expected claims {expected.sum():.1f}, observed {claims.sum()}")
by_age = pd.DataFrame({"age_band": policies["age_band"], "fitted": frequency})
by_age["true"] = true_rate
print(by_age.groupby("age_band")[["fitted", "true"]].mean().round(3))

# %%
# The leave-one-out curve of the Poisson deviance:
display = model.plot_cv()
display.ax_.set_title("Poisson regression with exposure")
plt.show()
