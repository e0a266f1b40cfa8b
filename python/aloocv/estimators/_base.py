"""The machinery shared by aloocv's scikit-learn estimators.

:class:`_ALOBase` runs one search of ALOOCV over an estimator's candidates (a grid, or a
grid refined by second-order steps), scored by the fitted loss or by a scikit-learn
scorer on the leave-one-out predictions, and stores the fitted attributes every
estimator shares; :class:`_ALORegressor` adds the linear prediction and the input
checks of the regressors.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from .. import _scoring
from .._scoring import get_scorer
from .._validation import (
    check_bool,
    check_choice,
    check_labels,
    check_rtol,
    check_sample_weight,
    check_vector,
    check_verbose,
    check_X,
    design_dot,
    is_dask_collection,
    is_multi_target,
    is_sparse,
)
from ..backends.dask.estimator_inputs import SAMPLE_FLAGS, local
from ..backends.dask.estimator_inputs import fit_inputs as dask_fit_inputs
from ..penalties import Penalty
from ..plotting import CVCurveDisplay
from ..tuning import TuneResult, tune


def _precheck(X: Any) -> None:
    """Sparse structure before scikit-learn converts it (scipy's conversions crash on
    out-of-range indices); dense input gets scikit-learn's own messages first."""
    if is_sparse(X):
        check_X(X)


def _checked_input(est, X, y, sample_weight, labels: bool = False) -> None:
    """The validation layer on what scikit-learn's validate_data returned: finite, real,
    canonical input, and real bools for the flags."""
    X = check_X(X)
    n = X.shape[0]
    if labels:
        check_labels(y, n)
    else:
        check_vector(y, n, "y")
    check_sample_weight(sample_weight, n)
    check_bool(est.fit_intercept, "fit_intercept")
    for flag in SAMPLE_FLAGS:
        if hasattr(est, flag):
            check_bool(getattr(est, flag), flag)
    check_choice("search", est.search, ("grid", "gradient"))
    check_choice("rule", est.rule, ("min", "1se"))


def _row_of(params: np.ndarray, v: np.ndarray) -> int:
    """The first history row holding exactly the parameters ``v`` (-1: none)."""
    if params.size == 0:
        return -1
    hit = np.flatnonzero(np.all(params.reshape(params.shape[0], -1) == v.ravel(), axis=1))
    return int(hit[0]) if hit.size else -1


def _rows_of(params: np.ndarray, grid: list[Penalty]) -> np.ndarray:
    """:func:`_row_of` of every candidate of ``grid``, by one table of the rows (the
    parameters are positive and finite: equal values are equal bytes)."""
    if params.size == 0:
        return np.full(len(grid), -1)
    flat = params.reshape(params.shape[0], -1)
    first: dict[bytes, int] = {}
    for i, row in enumerate(flat):
        first.setdefault(row.tobytes(), i)
    rows = []
    for g in grid:
        v = g.params()
        same = v.size == flat.shape[1] and v.dtype == flat.dtype
        rows.append(first.get(v.tobytes(), -1) if same else _row_of(params, v))
    return np.array(rows)


def _passes_per_candidate(searches: list) -> float | None:
    """Mean passes over X per grid candidate of the searches, from the core's counters:
    the Hessian passes of each warm-started fit plus ALO's one leverage pass (the
    ``O(n p^2)`` passes; None where the route does not count them, e.g. the squared-loss
    ridge path or a gradient search)."""
    per = []
    for s in searches:
        hp = s.res.path_hessian_passes
        if hp is None:
            return None
        per.append(np.asarray(hp, dtype=np.float64)[s.rows] + 1.0)
    v = np.concatenate(per) if per else np.empty(0)
    return float(np.mean(v)) if v.size else None


def _search_results(
    res: TuneResult, names: list[str], convert, score: np.ndarray, n_grid: int
) -> dict[str, np.ndarray]:
    """One row per evaluation (grid point or iterate), flat 1-d columns: the estimator's
    own parameters, ``"loss"`` and ``"loss_stderr"`` (leave-one-out loss), ``"score"``
    (higher is better), ``"gradient"`` (1 for the iterates of a gradient search, 0 for
    grid points) and ``"refined"`` (1 where ``"loss"`` is the refined estimate of
    ``rtol=``, 0 where it is plain ALO)."""
    h = res.history
    params = h["params"]
    if params.ndim == 2 and params.shape[1] > 1 and names == ["alpha"]:
        names = [f"alpha_{j}" for j in range(params.shape[1])]
    out: dict[str, list] = {name: [] for name in names}
    for row in params:
        for name, v in zip(names, convert(row)):
            out[name].append(v)
    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}
    arrays["loss"] = h["acv"].copy()
    arrays["loss_stderr"] = h["stderr"].copy()
    arrays["score"] = np.asarray(score, dtype=np.float64)
    arrays["gradient"] = (np.arange(h["acv"].size) >= n_grid).astype(np.float64)
    arrays["refined"] = np.asarray(h["refined"], dtype=np.float64)
    return arrays


def _at_rows(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``values`` of the history rows of the candidates (NaN where a candidate has no
    row: a bracket point of a gradient search)."""
    out = np.full(rows.size, np.nan)
    ok = rows >= 0
    out[ok] = values[rows[ok]]
    return out


def _weight_mean(sample_weight: Any) -> float:
    """The mean sample weight (1 without weights; a dask vector reduced on the workers)."""
    if sample_weight is None:
        return 1.0
    if is_dask_collection(sample_weight):
        return float(sample_weight.mean().compute())
    return float(np.mean(np.asarray(sample_weight)))


def _chosen_by_scorer(res: TuneResult, one: TuneResult, best_row: int) -> TuneResult:
    """The search ``res`` with the fit of the scorer's choice (``one``, its own one-point
    search) in place of the loss's choice; the paths stay the search's."""
    return dataclasses.replace(
        one,
        history=res.history,
        n_iter=res.n_iter,
        n_fits=res.n_fits + one.n_fits,
        path_losses=res.path_losses,
        path_predictions=res.path_predictions,
        path_coefs=res.path_coefs,
        path_intercepts=res.path_intercepts,
        path_n_iter=res.path_n_iter,
        path_hessian_passes=res.path_hessian_passes,
        path_matvec_passes=res.path_matvec_passes,
        _best_index=best_row,
    )


class _Search:
    """The outcome of one search: the chosen result and, per candidate of the grid (in
    the estimator's order), the history row, the mean loss and the score."""

    def __init__(
        self, res, rows, loss, score, row_score, best_score, scorer, stderr=None, refined=None
    ):
        self.res = res
        self.rows = rows
        # which candidates' loss is the refined estimate of rtol= (the history's flags)
        if refined is None:
            refined = _at_rows(res.history["refined"].astype(np.float64), rows) == 1.0
        self.refined = refined
        # rows of the history that are grid points (they come first; set by _search)
        self.n_grid = int(rows.max()) + 1 if rows.size and rows.max() >= 0 else 0
        self.loss = loss
        self.stderr = stderr
        self.score = score
        self.row_score = row_score
        self.best_score = best_score
        self.scorer = scorer


class _ALOBase(BaseEstimator):
    """Shared fitting logic: grid or gradient search of ALOOCV, scored by the fitted loss
    or by a scikit-learn scorer on the leave-one-out predictions."""

    def _loss_score(self, acv: Any, weight_mean: float) -> Any:
        """``best_score_`` without a scorer: the negated mean leave-one-out loss."""
        return -np.asarray(acv, dtype=np.float64)

    def _replay(self, eta: np.ndarray, n: int, offset=None) -> Any:  # pragma: no cover
        raise NotImplementedError

    def _scorer(self) -> Any:
        """The scorer of ``scoring`` (None: select by the leave-one-out loss), refused
        where a scorer cannot select."""
        scorer = get_scorer(self, self.scoring)
        if scorer is not None and self.search != "grid":
            raise ValueError(
                "scoring= needs search='grid': the gradient search minimizes the leave-one-out "
                "loss itself (leave scoring=None to select by that loss)"
            )
        if scorer is not None and self.rule != "min":
            raise ValueError(
                "rule='1se' uses the standard error of the leave-one-out loss; with scoring= "
                "use rule='min'"
            )
        if scorer is not None and self._rtol() is not None:
            raise ValueError(
                "rtol= refines the leave-one-out loss (exact refits of some samples), not the "
                "leave-one-out predictions a scorer reads: leave scoring=None with rtol="
            )
        return scorer

    def _rtol(self) -> float | None:
        """``rtol``, checked (the one validation layer)."""
        return check_rtol(getattr(self, "rtol", None))

    def _search(
        self,
        X,
        y,
        loss: Any,
        grid: list[Penalty],
        sample_weight,
        *,
        offset=None,
        y_score=None,
        score_weight=None,
    ) -> _Search:
        """Tune over ``grid`` (the estimator's candidates, in its order); with a scorer,
        choose the candidate of the highest score of its leave-one-out predictions."""
        scorer = self._scorer()
        common = dict(
            loss=loss,
            fit_intercept=self.fit_intercept,
            sample_weight=sample_weight,
            fit_tol=self.tol,
            fit_max_iter=self.max_iter,
            n_jobs=self.n_jobs,
            offset=offset,
            memory_limit=getattr(self, "memory_limit", None),
        )
        # "gradient": the grid brackets the minimum, second-order steps on the exact
        # derivatives of ALOOCV reach it (tune's "auto" search on this grid)
        method = "grid" if self.search == "grid" else "auto"
        res = tune(
            X,
            y,
            penalty=grid[0],
            method=method,
            grid=grid,
            selection=self.rule,
            verbose=check_verbose(getattr(self, "verbose", 0)),
            rtol=self._rtol(),
            **common,
        )
        h = res.history
        rows = _rows_of(h["params"], grid)
        cand_loss = _at_rows(h["acv"], rows)
        cand_se = _at_rows(h["stderr"], rows)
        wmean = _weight_mean(sample_weight)
        row_score = self._loss_score(h["acv"], wmean)
        if scorer is None:
            score = self._loss_score(cand_loss, wmean)
            best_score = float(self._loss_score(res.acv, wmean))
        else:
            y_true = y if y_score is None else y_score
            score = self._candidate_scores(scorer, res, rows, X, y_true, score_weight, offset)
            best = int(np.argmax(score))
            best_score = float(score[best])
            row_score = np.full(h["acv"].size, np.nan)
            row_score[rows] = score
            if rows[best] != res._best_index:
                one = tune(X, y, penalty=grid[best], method="grid", grid=[grid[best]], **common)
                res = _chosen_by_scorer(res, one, int(rows[best]))
        if method == "grid":
            # the candidate itself, not exp(log(candidate)) from the search's log scale
            chosen = np.flatnonzero(rows == res._best_index)
            if chosen.size:
                res = dataclasses.replace(res, penalty=grid[int(chosen[0])])
        out = _Search(res, rows, cand_loss, score, row_score, best_score, scorer, cand_se)
        if method == "grid":
            out.n_grid = int(h["acv"].size)
        return out

    def _candidate_scores(
        self, scorer, res: TuneResult, rows: np.ndarray, X, y_true, score_weight, offset
    ) -> np.ndarray:
        """The scorer's score of the leave-one-out predictions of every candidate."""
        if is_dask_collection(y_true):  # dask input: the scorer's n labels and weights
            y_true = np.asarray(y_true)  # on the client (X stays on the cluster)
        if is_dask_collection(score_weight):
            score_weight = np.asarray(score_weight)
        return np.array(
            [
                _scoring.score(
                    scorer,
                    self._replay(res.path_predictions[..., r], X.shape[0], offset),
                    X,
                    y_true,
                    score_weight,
                )
                for r in rows
            ]
        )

    def _keep(self) -> bool:
        return bool(getattr(self, "store_loo", False) or getattr(self, "store_cv_results", False))

    def _store(self, search: _Search, grid: dict[str, np.ndarray]) -> None:
        """Fitted attributes shared by all estimators; ``grid`` holds the estimator's own
        parameters per candidate (for :meth:`plot_cv`)."""
        res = search.res
        # small (n_candidates): the grid curve, kept through gradient searches
        self._curve = {
            **{k: np.asarray(v, dtype=np.float64) for k, v in grid.items()},
            "loss": search.loss,
            "loss_stderr": search.stderr,
            "score": np.asarray(search.score, dtype=np.float64),
            "scored": search.scorer is not None,
            "refined": search.refined,
        }
        self.tune_result_ = res if self._keep() else res.without_samples()
        self.best_score_ = search.best_score
        self.best_stderr_ = res.stderr
        self.n_iter_ = int(res.fit.n_iter_)  # the final fit's, as scikit-learn's
        self.n_fits_ = int(res.n_fits)  # warm-started fits during the search
        self.passes_per_candidate_ = _passes_per_candidate([search])
        if self._keep():
            self.loo_predictions_ = local(res.loo.predictions).copy()

    def plot_cv(self, ax: Any = None, *, title: str | None = None) -> CVCurveDisplay:
        """The leave-one-out curve against the estimator's own regularization parameter,
        in the units of ``best_score_``, with its standard-error band, the choice and the
        one-standard-error choice marked.

        Parameters
        ----------
        ax : matplotlib Axes, optional
        title : str, optional

        Returns
        -------
        aloocv.plotting.CVCurveDisplay
            Its ``ax_`` and ``figure_`` hold the plot (see
            :meth:`aloocv.plotting.CVCurveDisplay.from_estimator`).
        """
        return CVCurveDisplay.from_estimator(self, ax=ax, title=title)


class _ALORegressor(RegressorMixin, _ALOBase):
    """Prediction, tags and leave-one-out replay shared by the linear regressors."""

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Linear prediction ``X coef_ + intercept_``."""
        check_is_fitted(self, "coef_")
        X = validate_data(
            self,
            X,
            accept_sparse=["csr", "csc", "coo"],
            reset=False,
            dtype=[np.float64, np.float32],
        )
        if np.ndim(self.coef_) == 2:  # several targets: coef_ (n_targets, n_features)
            return design_dot(X, self.coef_.T) + self.intercept_
        return design_dot(X, self.coef_).ravel() + self.intercept_

    def _replay(self, eta: np.ndarray, n: int, offset=None) -> Any:
        return _scoring.LOORegressor(n, np.asarray(eta, dtype=np.float64))

    def _targets_inputs(self, X, y, sample_weight) -> tuple[Any, Any, Any, bool]:
        """Validated ``(X, y, sample_weight, several_targets)`` of the squared-loss
        regressors (``alpha_per_target``): a dask X chunk by chunk (1-d y), a 2-d y of
        several targets as is, otherwise a 1-d y."""
        if is_dask_collection(X):  # a dask array: chunk by chunk (the dask backend)
            return (*dask_fit_inputs(self, X, y, sample_weight), False)
        _precheck(X)
        X, y = validate_data(
            self,
            X,
            y,
            accept_sparse=["csr", "csc", "coo"],
            y_numeric=True,
            multi_output=True,
            dtype=[np.float64, np.float32],
        )
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64)
        check_bool(self.alpha_per_target, "alpha_per_target")
        if is_multi_target(y):
            return X, y, sample_weight, True
        if y.ndim == 2:
            y = y[:, 0]
        _checked_input(self, X, y, sample_weight)
        return X, y, sample_weight, False

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class _SquaredScore:
    """``best_score_`` of the squared-loss estimators without a scorer: minus the mean
    of ``sample_weight * (y - y_loo)^2``, scikit-learn's ``RidgeCV`` convention."""

    def _loss_score(self, acv: Any, weight_mean: float) -> Any:
        # acv = sum(w e^2 / 2) / sum(w)  ->  mean(w e^2) = 2 acv mean(w)
        return -2.0 * weight_mean * np.asarray(acv, dtype=np.float64)
