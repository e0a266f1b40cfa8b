"""
A pandas DataFrame through a scikit-learn pipeline
==================================================

A typical tabular task: a :class:`pandas.DataFrame` with numeric and categorical
columns, a :class:`~sklearn.compose.ColumnTransformer` that scales the numbers and
one-hot encodes the categories, and a ridge regression whose penalty is chosen by
leave-one-out cross-validation -- all inside one :class:`~sklearn.pipeline.Pipeline`.

:class:`aloocv.ALORidgeCV` takes the place of scikit-learn's
:class:`~sklearn.linear_model.RidgeCV`: for the squared loss with a ridge penalty the
leave-one-out residuals have a closed form, so every candidate ``alpha`` is scored from
one decomposition of the design instead of one refit per sample.

The data are scikit-learn's bundled diabetes measurements (442 patients, disease
progression one year after baseline), with the ``sex`` column turned back into a
category as it would arrive in practice.
"""

# %%
# The data as a user would hold them
# -----------------------------------
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.datasets import load_diabetes
from sklearn.linear_model import RidgeCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

import aloocv

frame = load_diabetes(as_frame=True).frame
frame["sex"] = np.where(frame["sex"] > 0, "male", "female")
frame["age_group"] = pd.cut(
    frame["age"], bins=[-1.0, -0.05, 0.05, 1.0], labels=["younger", "middle", "older"]
).astype(str)
X = frame.drop(columns="target")
y = frame["target"]
X.head()

# %%
# The pipeline
# ------------
# Numeric columns are standardized, categorical ones one-hot encoded; the ridge penalty
# is chosen among 30 candidates by exact leave-one-out cross-validation.
numeric = X.select_dtypes("number").columns.tolist()
categorical = ["sex", "age_group"]
preprocess = ColumnTransformer(
    [("num", StandardScaler(), numeric), ("cat", OneHotEncoder(drop="first"), categorical)]
)
alphas = np.logspace(-2, 4, 30)
model = make_pipeline(preprocess, aloocv.ALORidgeCV(alphas=alphas))
model.fit(X, y)
ridge = model[-1]
print(f"chosen alpha: {ridge.alpha_:.3g}")
print(f"leave-one-out mean squared error at it: {-ridge.best_score_:.1f}")

# %%
# The search results are a table, one row per candidate, and the fitted coefficients
# carry the transformed column names.
results = pd.DataFrame(ridge.search_results_)
print(results.head())
coef = pd.Series(ridge.coef_, index=model[0].get_feature_names_out())
print(coef.round(2))

# %%
# The same choice as scikit-learn's RidgeCV
# -----------------------------------------
# ``RidgeCV`` also scores alphas by efficient leave-one-out for this model, so both must
# choose the same alpha; aloocv reports the standard error of each estimate as well.
reference = make_pipeline(preprocess, RidgeCV(alphas=alphas)).fit(X, y)
print(f"RidgeCV's alpha: {reference[-1].alpha_:.3g}")
assert np.isclose(reference[-1].alpha_, ridge.alpha_)

# %%
# The curve with its +-1 standard-error band:
display = ridge.plot_cv()
display.ax_.set_title("Ridge on the diabetes data: leave-one-out error per alpha")
plt.show()
