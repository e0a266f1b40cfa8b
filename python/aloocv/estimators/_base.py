"""The machinery shared by aloocv's scikit-learn estimators.

:class:`_ALOBase` runs one search of ALOOCV over an estimator's candidates (a grid, or a
grid refined by second-order steps), scored by the fitted loss or by a scikit-learn
scorer on the leave-one-out predictions, and stores the fitted attributes every
estimator shares; :class:`_ALORegressor` adds the linear prediction and the input
checks of the regressors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import scipy.optimize
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, RegressorMixin, is_classifier
from sklearn.utils.metadata_routing import (
    MetadataRouter,
    MethodMapping,
    _raise_for_params,
    _routing_enabled,
    process_routing,
)
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from .. import _scoring
from .._scoring import get_scorer
from .._validation import (
    check_bool,
    check_choice,
    check_cv_arg,
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
from ..api import kfold
from ..backends.dask.estimator_inputs import SAMPLE_FLAGS, local
from ..backends.dask.estimator_inputs import fit_inputs as dask_fit_inputs
from ..folds import cv_splits
from ..penalties import Penalty
from ..plotting import CVCurveDisplay
from ..tuning import TuneResult, tune
from ..tuning.record import _progress, _select
from ..tuning.refine import RAY_XTOL

#: The half-width (in log scale) of the scalar search of ``cv=`` with
#: ``search="gradient"`` on a grid of one point: a decade either side.
RAY_DECADE = float(np.log(10.0))


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


def _fold_history(pens: list[Penalty], results: list) -> dict[str, np.ndarray]:
    """A :class:`TuneResult` history of K-fold evaluations (``pens`` and their
    :class:`aloocv.KFoldResult`): the mean held-out loss as ``"acv"``, its standard error
    across the splits (NaN for a single split), ``"refined"`` where ``rtol=`` refined it."""
    ref = [r.refinement for r in results]
    params = np.array([p.params() for p in pens], dtype=np.float64).reshape(len(pens), -1)
    return {
        "params": params,
        "acv": np.array([r.mean for r in results], dtype=np.float64),
        "stderr": np.array(
            [np.nan if r.stderr is None else r.stderr for r in results], dtype=np.float64
        ),
        "grad": np.full(params.shape, np.nan),
        "n_fits": np.arange(1, len(pens) + 1),
        "refined": np.array([f is not None for f in ref], dtype=bool),
        "plain_acv": np.array(
            [r.mean if f is None else f.plain_mean for r, f in zip(results, ref)],
            dtype=np.float64,
        ),
    }


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
    the estimator's order), the history row, the mean loss and the score; with ``cv=``
    also per candidate and split the split's mean held-out loss (``fold_loss``) and score
    (``fold_score``), shape ``(n_candidates, n_splits)`` (None for leave-one-out)."""

    fold_loss: np.ndarray | None = None
    fold_score: np.ndarray | None = None

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
    or by a scikit-learn scorer on the leave-one-out predictions; with ``cv=``, a grid of
    approximate K-fold estimates (:func:`aloocv.kfold`)."""

    @contextmanager
    def _folds(self, X, y, sample_weight, params: dict) -> Iterator[None]:
        """The splits of ``cv=`` for the searches of one ``fit``, held in ``_splits``
        (None: leave-one-out) while it runs: ``params`` are ``fit``'s extra keyword
        arguments (``groups``; with scikit-learn's metadata routing enabled, whatever the
        splitter requests), ``y`` the labels or responses the splitter sees."""
        cv = check_cv_arg(getattr(self, "cv", None), allow_none=True)
        if cv is None and params.get("groups") is not None:
            raise ValueError(
                "groups= goes with cv= (e.g. cv=GroupKFold(5) or cv=LeaveOneGroupOut()); "
                "with cv=None the estimate is leave-one-out"
            )
        if _routing_enabled():
            split = process_routing(self, "fit", sample_weight=sample_weight, **params)
            split = dict(split.splitter.split)
        else:
            _raise_for_params(params, self, "fit", allow=["groups"])
            split = dict(params)
        splits = None
        if cv is not None:
            if is_dask_collection(X):
                raise ValueError(
                    "cv= needs X in memory; for dask input use cv=None (leave-one-out) or "
                    "aloocv.kfold(X, y, n_folds=...) with fold labels"
                )
            loss = "logistic" if is_classifier(self) else None  # an int: stratified folds
            splits = cv_splits(cv, X, y, split.get("groups"), loss, X.shape[0])
        self._splits = splits
        try:
            yield
        finally:
            del self._splits

    def get_metadata_routing(self) -> MetadataRouter:
        """The metadata routing of this estimator (scikit-learn's): ``fit``'s own
        metadata (``sample_weight``) and what the splitter of ``cv=`` requests for its
        ``split`` (``groups`` for the group splitters)."""
        return (
            MetadataRouter(owner=self)
            .add_self_request(self)
            .add(
                splitter=getattr(self, "cv", None),
                method_mapping=MethodMapping().add(caller="fit", callee="split"),
            )
        )

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
        choose the candidate of the highest score of its leave-one-out predictions. With
        ``cv=``: :meth:`_fold_search`."""
        if getattr(self, "_splits", None) is not None:
            return self._fold_search(
                X,
                y,
                loss,
                grid,
                sample_weight,
                offset=offset,
                y_score=y_score,
                score_weight=score_weight,
            )
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

    def _fold_search(
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
        """The grid ``grid`` scored by approximate K-fold over the splits of ``cv=``
        (:func:`aloocv.kfold` per candidate): the lowest mean held-out loss (``rule``), or
        the highest mean over the splits of the scorer's score of each split's held-out
        predictions. The candidates are evaluated (and the history ordered) from the most
        to the least regularized, as :func:`aloocv.tune`'s grid, so ``rule="1se"`` reads
        the same order. ``search="gradient"``: then a bounded scalar search of the K-fold
        mean along the ray that scales the best candidate's parameters, between its
        neighbours on the grid (:meth:`_fold_ray`)."""
        splits = self._splits
        scorer = self._scorer()
        if self.search == "gradient" and self.rule != "min":
            raise ValueError(
                "with cv=, search='gradient' refines the minimum of the K-fold estimate: use "
                "rule='min', or search='grid' for rule='1se'"
            )
        if self.rule == "1se" and len(splits) < 2:
            raise ValueError(
                "rule='1se' needs the standard error across splits; cv= gave a single split"
            )
        order = np.argsort([-float(np.sum(g.params())) for g in grid], kind="stable")
        T = order.size
        pens = [grid[i] for i in order]
        bar = _progress(T, check_verbose(getattr(self, "verbose", 0)), "aloocv K-fold grid")
        results = []
        for pen in pens:
            results.append(self._fold_estimate(X, y, loss, pen, sample_weight, offset))
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
        history = _fold_history(pens, results)
        rows = np.empty(T, dtype=np.intp)
        rows[order] = np.arange(T)  # candidate -> history row
        cand_loss = history["acv"][rows]
        fold_loss = np.array([results[r].fold_means for r in rows], dtype=np.float64)
        wmean = _weight_mean(sample_weight)
        if scorer is None:
            best = _select(history, self.rule)
            score = self._loss_score(cand_loss, wmean)
            fold_score = self._loss_score(fold_loss, wmean)
        else:
            y_true = np.asarray(y if y_score is None else y_score)
            Xs = X.tocsr() if is_sparse(X) and X.format not in ("csr", "csc") else X
            fold_score = np.array(
                [self._split_scores(scorer, results[r], Xs, y_true, score_weight) for r in rows]
            )
            score = fold_score.mean(axis=1)
            best = int(rows[int(np.argmax(score))])
        path = {
            "path_losses": np.stack([r.losses for r in results], axis=-1),
            "path_predictions": np.stack([r.predictions for r in results], axis=-1),
            "path_coefs": np.stack([np.asarray(r.fit.coef_, dtype=np.float64) for r in results]),
            "path_intercepts": np.array([r.fit.intercept_ for r in results], dtype=np.float64),
            "path_n_iter": np.array([r.fit.n_iter_ for r in results], dtype=np.int64),
        }
        chosen, pen, chosen_row = results[best], pens[best], best
        if self.search == "gradient":
            pen, chosen, chosen_row, history = self._fold_ray(
                X, y, loss, pens, results[best], best, history, sample_weight, offset
            )
        if scorer is None:
            row_score = self._loss_score(history["acv"], wmean)
            best_score = float(self._loss_score(chosen.mean, wmean))
        else:
            row_score = np.empty(T)
            row_score[rows] = score
            best_score = float(np.max(score))
        res = TuneResult(
            penalty=pen,
            fit=chosen.fit,
            loo=chosen,
            acv=float(chosen.mean),
            stderr=chosen.stderr,
            history=history,
            # "auto": a grid, then a search from its best point (here along the ray)
            method="grid" if self.search == "grid" else "auto",
            n_iter=int(history["acv"].size),
            n_fits=int(history["acv"].size),
            converged=True,
            selection=self.rule,
            message=(
                f"grid evaluated by approximate cross-validation over {len(splits)} splits"
                + ("" if self.search == "grid" else ", then a bounded search along the ray")
            ),
            _best_index=chosen_row,
            rtol=self._rtol(),
            **path,
        )
        out = _Search(
            res,
            rows,
            cand_loss,
            score,
            row_score,
            best_score,
            scorer,
            history["stderr"][rows],
            history["refined"][rows],
        )
        out.n_grid = T
        out.fold_loss = fold_loss
        out.fold_score = fold_score
        return out

    def _fold_estimate(self, X, y, loss: Any, pen: Penalty, sample_weight, offset) -> Any:
        """The approximate K-fold estimate of one penalty over the splits of ``cv=``."""
        return kfold(
            X,
            y,
            loss=loss,
            penalty=pen,
            cv=self._splits,
            fit_intercept=self.fit_intercept,
            sample_weight=sample_weight,
            tol=self.tol,
            max_iter=self.max_iter,
            n_jobs=self.n_jobs,
            offset=offset,
            rtol=self._rtol(),
            memory_limit=getattr(self, "memory_limit", None),
        )

    def _fold_ray(
        self,
        X,
        y,
        loss: Any,
        pens: list[Penalty],
        at_best: Any,
        best: int,
        history: dict,
        sample_weight,
        offset,
    ) -> tuple[Penalty, Any, int, dict]:
        """``search="gradient"`` with ``cv=``: the K-fold estimate has no exact derivative
        here, so the grid's best penalty ``pens[best]`` is refined by a bounded scalar
        search (``scipy.optimize.minimize_scalar``, to ``RAY_XTOL`` in log scale) of the
        K-fold mean along the ray that scales all its parameters alike, between its
        neighbours on the grid (one grid step beyond an end; a decade for a grid of one
        point); ``at_best`` is the K-fold result there. Returns (penalty, its K-fold
        result, its history row, the history with the search's evaluations appended)."""
        size = np.log([float(np.sum(p.params())) for p in pens])  # decreasing
        up = size[best - 1] - size[best] if best > 0 else None
        down = size[best + 1] - size[best] if best + 1 < len(pens) else None
        if up is None and down is None:
            up, down = RAY_DECADE, -RAY_DECADE
        up = -down if up is None else up
        down = -up if down is None else down
        base = pens[best].params()
        found: dict[float, tuple[Penalty, Any]] = {}

        def phi(t: float) -> float:
            if t not in found:
                pen = pens[best].with_params(base * np.exp(t))
                found[t] = (pen, self._fold_estimate(X, y, loss, pen, sample_weight, offset))
            return float(found[t][1].mean)

        scipy.optimize.minimize_scalar(
            phi, bounds=(down, up), method="bounded", options={"xatol": RAY_XTOL}
        )
        ts = list(found)
        k = min(range(len(ts)), key=lambda i: found[ts[i]][1].mean)
        pen, chosen = found[ts[k]]
        row = len(pens) + k
        if not chosen.mean < at_best.mean:
            pen, chosen, row = pens[best], at_best, best
        extra = _fold_history([found[t][0] for t in ts], [found[t][1] for t in ts])
        history = {key: np.concatenate([history[key], extra[key]]) for key in history}
        history["n_fits"] = np.arange(1, history["acv"].size + 1)
        return pen, chosen, row, history

    def _split_scores(self, scorer, res, X, y_true, score_weight) -> np.ndarray:
        """The scorer's score of every split's held-out predictions of one candidate."""
        return np.array(
            [
                _scoring.score(
                    scorer,
                    self._replay(pred, te.size),
                    X[te],
                    y_true[te],
                    None if score_weight is None else np.asarray(score_weight)[te],
                )
                for te, pred in zip(res.test_indices, res.split_predictions)
            ]
        )

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
