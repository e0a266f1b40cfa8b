"""Plots of tuning results (matplotlib is an optional dependency: ``aloocv[plot]``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .penalties import ElasticNet

__all__ = [
    "CVCurveDisplay",
    "Trajectory",
    "TuneDisplay",
    "one_standard_error_index",
    "plot_cv",
    "plot_tune",
]


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("plotting needs matplotlib: pip install 'aloocv[plot]'") from exc
    return plt


def _param_labels(result: Any, m: int) -> list[str]:
    if isinstance(result.penalty, ElasticNet) and m == 2:
        return ["l1", "l2"]
    return ["lambda"] if m == 1 else [f"lambda[{j}]" for j in range(m)]


def _tune_loss_name(result: Any) -> str:
    """What a tuning result's ACV averages, for an axis label."""
    loss = getattr(result.fit, "loss", None)
    name = str(loss) if loss is not None else ""
    if name == "squared":
        return "leave-one-out mean of (y - eta)^2 / 2 (ALO)"
    return f"leave-one-out mean {name} loss (ALO)" if name else "leave-one-out mean loss (ALO)"


class TuneDisplay:
    """Plot of a :class:`aloocv.TuneResult`, scikit-learn's display convention.

    Grid results: ACV (the mean leave-one-out loss, ALO) against the total
    regularization with a +-1 standard-error band, the selected point, and (one
    parameter) the one-standard-error choice (:func:`one_standard_error_index`, what
    ``selection="1se"`` selects); elastic-net grids draw one curve per share
    ``l1 / (l1 + l2)``. Gradient runs (the paper's Figures 1-2): ACV per evaluation (for a
    one-parameter ``"auto"`` search: ACV against lambda, the bracketing grid as a curve
    and the iterates over it), and each parameter per evaluation on a log scale, one
    labelled line each.

    Parameters
    ----------
    result : TuneResult

    Attributes
    ----------
    result : TuneResult
    one_se_index_ : int or None
        History row of the one-standard-error choice (grids of one parameter only).
    ax_ : matplotlib Axes
        The ACV axes.
    axes_ : ndarray of matplotlib Axes
        All axes (two for gradient runs: ACV, and the parameters per evaluation).
    figure_ : matplotlib Figure

    Examples
    --------
    >>> import numpy as np, aloocv
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((60, 3)); y = X[:, 0] + rng.standard_normal(60)
    >>> res = aloocv.tune(X, y, loss="squared", penalty=aloocv.L2(1.0), method="grid")
    >>> disp = res.plot()
    >>> disp.ax_.get_xlabel()
    'lambda (sum of penalty parameters)'
    """

    def __init__(self, result: Any):
        self.result = result
        self.one_se_index_: int | None = None

    @classmethod
    def from_result(cls, result: Any, *, ax: Any = None, title: str | None = None) -> TuneDisplay:
        """The display of ``result``, drawn (see :meth:`plot`)."""
        return cls(result).plot(ax=ax, title=title)

    def plot(self, ax: Any = None, *, title: str | None = None) -> TuneDisplay:
        """Draw the result.

        Parameters
        ----------
        ax : matplotlib Axes, or a pair of them for a gradient run, optional
        title : str, optional

        Returns
        -------
        TuneDisplay
            ``self``, with ``ax_``, ``axes_`` and ``figure_`` set.
        """
        plt = _pyplot()
        result = self.result
        h = result.history
        params = h["params"] if h["params"].ndim == 2 else h["params"][:, None]
        m = params.shape[1]
        ylabel = _tune_loss_name(result)
        if result.method == "grid":
            if ax is None:
                _, ax = plt.subplots(figsize=(6, 4))
            total = params.sum(axis=1)
            if m == 2:
                share = np.round(params[:, 0] / np.where(total > 0, total, 1.0), 12)
            else:
                share = np.zeros(total.size)
            groups = list(dict.fromkeys(share.tolist()))
            for r in groups:
                mask = share == r
                order = np.argsort(total[mask])
                lam = total[mask][order]
                acv, se = h["acv"][mask][order], h["stderr"][mask][order]
                label = "ALOOCV" if len(groups) == 1 else f"l1 / (l1 + l2) = {r:g}"
                (line,) = ax.plot(lam, acv, "o-", ms=3, label=label)
                ax.fill_between(lam, acv - se, acv + se, alpha=0.2, color=line.get_color())
            chosen = float(np.sum(result.penalty.params()))
            ax.axvline(chosen, color="k", ls="--", lw=1, label=f"selected ({result.selection})")
            # one parameter: the strongest within one standard error, as selection="1se"
            k = one_standard_error_index(total, h["acv"], h["stderr"]) if m == 1 else None
            self.one_se_index_ = k
            if k is not None:
                ax.plot(
                    [total[k]],
                    [h["acv"][k]],
                    "D",
                    ms=7,
                    mfc="none",
                    mew=1.5,
                    color="C3",
                    label=f"1-SE choice (lambda={total[k]:.3g})",
                )
            ax.set_xscale("log")
            ax.set_xlabel("lambda (sum of penalty parameters)")
            ax.set_ylabel(ylabel)
            ax.legend()
            ax.set_title(title or "ALOOCV along the grid")
            self.axes_ = np.array([ax])
        else:
            if ax is None:
                _, axes = plt.subplots(1, 2, figsize=(10, 4))
            else:
                axes = np.atleast_1d(ax)
            self._plot_run(axes, params, title, ylabel)
            self.axes_ = axes
        self.ax_ = self.axes_[0]
        self.figure_ = self.ax_.figure
        self.figure_.tight_layout()
        return self

    def _plot_run(self, axes: Any, params: np.ndarray, title: str | None, ylabel: str) -> None:
        """A gradient run: ACV per evaluation (or against lambda for a one-parameter
        ``"auto"`` search) and the parameters per evaluation."""
        result = self.result
        h = result.history
        m = params.shape[1]
        it = np.arange(h["acv"].shape[0])
        n_grid = (
            len(result.path_n_iter)
            if result.method == "auto" and result.path_n_iter is not None
            else 0
        )
        if n_grid and m == 1:
            lam = params[:, 0]
            order = np.argsort(lam[:n_grid])
            axes[0].plot(lam[:n_grid][order], h["acv"][:n_grid][order], "o-", ms=3, label="grid")
            axes[0].plot(lam[n_grid:], h["acv"][n_grid:], "x--", lw=1, label="gradient search")
            chosen = float(np.sum(result.penalty.params()))
            axes[0].axvline(chosen, color="k", ls="--", lw=1, label="selected")
            axes[0].set_xscale("log")
            axes[0].set_xlabel("lambda")
            axes[0].legend()
        else:
            axes[0].plot(it, h["acv"], "-", lw=1.5)
            axes[0].set_xlabel("evaluation")
        axes[0].set_ylabel(ylabel)
        axes[0].set_title(title or f"ALOOCV ({result.method})")
        if len(axes) > 1:
            for j, label in enumerate(_param_labels(result, m)):
                axes[1].plot(it, params[:, j], lw=0.8, label=label)
            axes[1].set_yscale("log")
            axes[1].set_xlabel("evaluation")
            axes[1].set_ylabel("lambda")
            axes[1].set_title("penalty parameters per evaluation")
            if m <= 20:
                axes[1].legend(fontsize="small", ncol=max(1, m // 10))


def plot_tune(result: Any, ax: Any = None, title: str | None = None) -> TuneDisplay:
    """Plot a :class:`aloocv.TuneResult`: ``TuneDisplay.from_result(result, ax=ax,
    title=title)`` (see :class:`TuneDisplay`).

    Returns
    -------
    TuneDisplay
    """
    return TuneDisplay.from_result(result, ax=ax, title=title)


def _feature_names(estimator: Any, p: int) -> list[str]:
    names = getattr(estimator, "feature_names_in_", None)
    return [str(v) for v in names] if names is not None else [f"feature {j}" for j in range(p)]


def _scorer_name(scoring: Any) -> str:
    """A scorer's name for an axis label: the string given, or the scoring function's."""
    if isinstance(scoring, str):
        return scoring
    func = getattr(scoring, "_score_func", scoring)  # scikit-learn's make_scorer objects
    return getattr(func, "__name__", "score")


def _metric(estimator: Any) -> tuple[str, bool]:
    """``(axis label, greater_is_better)`` of the quantity ``best_score_`` measures: the
    scorer's score (higher is better), or the leave-one-out loss of the estimator's own
    metric, drawn positive (lower is better; ``best_score_`` is its negation)."""
    if estimator._curve["scored"]:
        return f"leave-one-out {_scorer_name(estimator.scoring)} (ALO)", True
    power = getattr(estimator, "_power", None)
    if callable(power):  # the GLM regressors: minus the mean deviance
        p = float(power())
        named = {1.0: "mean Poisson deviance", 2.0: "mean gamma deviance"}
        metric = named.get(p, f"mean Tweedie deviance (power={p:g})")
    elif hasattr(estimator, "classes_"):  # logistic: minus the mean log-loss
        metric = "log-loss"
        if getattr(estimator, "class_weight", None) is not None:
            metric += " (class-weighted)"
        if getattr(estimator, "multi_class_", None) == "ovr":
            metric += ", mean over classes"
    else:  # the squared-loss regressors: minus the mean of w e^2 (RidgeCV's)
        metric = "mean squared error"
    return f"leave-one-out {metric} (ALO)", False


def one_standard_error_index(
    strength: ArrayLike, values: ArrayLike, stderr: ArrayLike, greater_is_better: bool = False
) -> int | None:
    """The one-standard-error choice among candidates: of those whose value is within one
    standard error (the best candidate's) of the best value, the most regularized
    (largest ``strength``; on ties of strength, the best value), as ``rule="1se"``
    selects. NaN values (candidates without an evaluation) are skipped; None when no
    candidate has a finite value and standard error.

    Parameters
    ----------
    strength : array-like of shape (n_candidates,)
        Regularization strength, larger is stronger (``alpha``, or ``1 / C``).
    values, stderr : array-like of shape (n_candidates,)
        The criterion and its standard error.
    greater_is_better : bool
        Whether larger values are better (a score) or smaller (a loss).

    Returns
    -------
    int or None

    Examples
    --------
    >>> one_standard_error_index([0.1, 1.0, 10.0], [1.0, 0.9, 0.95], [0.1, 0.1, 0.1])
    2
    """
    strength = np.asarray(strength, dtype=np.float64)
    loss = np.asarray(values, dtype=np.float64) * (-1.0 if greater_is_better else 1.0)
    se = np.asarray(stderr, dtype=np.float64)
    ok = np.isfinite(loss) & np.isfinite(se)
    if not ok.any():
        return None
    idx = np.flatnonzero(ok)
    best = idx[np.argmin(loss[idx])]
    within = idx[loss[idx] <= loss[best] + se[best]]
    # strongest first, then the lowest loss
    return int(within[np.lexsort((loss[within], -strength[within]))[0]])


@dataclass(frozen=True)
class Trajectory:
    """Iterates of a gradient search drawn over the grid curve: their parameter values
    and criterion values (the display's units), with a legend label."""

    label: str
    param_values: np.ndarray
    values: np.ndarray


class CVCurveDisplay:
    """Leave-one-out curve of a fitted ALO estimator, scikit-learn's display convention.

    Build one with :meth:`from_estimator` (or an estimator's ``plot_cv()``), which draws
    it; :meth:`plot` draws it again on other axes. The curve is in the units of the
    estimator's ``best_score_``: a scorer's score as it is (``greater_is_better``; the
    best value is ``best_score_``), otherwise the leave-one-out loss of the estimator's
    own metric drawn positive (log-loss, mean squared error as ``RidgeCV`` weighs it,
    mean Poisson / gamma / Tweedie deviance; the lowest value is ``-best_score_``). A
    +-1 standard-error band (loss only: the standard error of the mean fitted loss that
    ``rule="1se"`` uses, in the plotted units; for the GLMs that of the mean negative
    log-likelihood, whose per-sample saturated term adds to the spread of the
    deviances), a dashed line at the chosen value, and a
    diamond at the one-standard-error choice: of the candidates within one standard
    error of the best one, the most regularized (:func:`one_standard_error_index`; what
    ``rule="1se"`` selects), with a dotted line at the best value plus one standard
    error.

    Parameters
    ----------
    param_name : {"C", "alpha"}
        The estimator's regularization parameter (the x axis, log scale).
    param_values : ndarray of shape (n_candidates,)
    values : ndarray of shape (n_candidates,)
        The criterion per candidate (NaN: no evaluation there).
    value_name : str
        What ``values`` are (the y axis label).
    greater_is_better : bool, default False
    stderr : ndarray of shape (n_candidates,), optional
        Standard errors of ``values`` (None: no band and no one-standard-error choice).
    l1_ratios : ndarray of shape (n_candidates,), optional
        One curve per distinct ``l1_ratio``.
    chosen : ndarray, optional
        The chosen parameter values (one per one-vs-rest class); empty: none drawn (a
        parameter per feature).
    refined : ndarray of bool of shape (n_candidates,), optional
        Candidates whose value is the refined estimate of ``rtol=`` (open squares).
    trajectories : list of Trajectory, optional
        Gradient-search iterates drawn over the curve.
    rtol : float, optional
        The estimator's ``rtol=`` (for the legend).
    estimator_name : str, optional

    Attributes
    ----------
    best_index_ : int or None
        The candidate of the best value.
    one_se_index_ : int or None
        The one-standard-error choice (None without standard errors).
    ax_ : matplotlib Axes
    figure_ : matplotlib Figure
    lines_ : list of matplotlib Line2D
        One curve per ``l1_ratio``.
    bands_ : list of matplotlib PolyCollection
        The standard-error bands of ``lines_``.
    chosen_lines_ : list of matplotlib Line2D
    one_se_marker_ : matplotlib Line2D or None

    Examples
    --------
    >>> import numpy as np, aloocv
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((80, 4)); y = X[:, 0] + rng.standard_normal(80)
    >>> est = aloocv.ALORidgeCV(alphas=np.logspace(-2, 3, 8)).fit(X, y)
    >>> disp = aloocv.plotting.CVCurveDisplay.from_estimator(est)
    >>> bool(np.isclose(np.nanmin(disp.values), -est.best_score_))
    True
    >>> disp.ax_.get_ylabel()
    'leave-one-out mean squared error (ALO)'
    """

    def __init__(
        self,
        *,
        param_name: str,
        param_values: ArrayLike,
        values: ArrayLike,
        value_name: str,
        greater_is_better: bool = False,
        stderr: ArrayLike | None = None,
        l1_ratios: ArrayLike | None = None,
        chosen: ArrayLike | None = None,
        refined: ArrayLike | None = None,
        trajectories: list[Trajectory] | None = None,
        rtol: float | None = None,
        estimator_name: str | None = None,
    ):
        self.param_name = param_name
        self.param_values = np.asarray(param_values, dtype=np.float64)
        self.values = np.asarray(values, dtype=np.float64)
        self.value_name = value_name
        self.greater_is_better = bool(greater_is_better)
        self.stderr = None if stderr is None else np.asarray(stderr, dtype=np.float64)
        self.l1_ratios = None if l1_ratios is None else np.asarray(l1_ratios, dtype=np.float64)
        self.chosen = np.empty(0) if chosen is None else np.atleast_1d(np.asarray(chosen, float))
        self.refined = (
            np.zeros(self.values.size, bool) if refined is None else np.asarray(refined, bool)
        )
        self.trajectories = list(trajectories or [])
        self.rtol = rtol
        self.estimator_name = estimator_name
        finite = np.isfinite(self.values)
        self.best_index_: int | None = None
        if finite.any():
            signed = np.where(finite, self.values, np.nan)
            pick = np.nanargmax if self.greater_is_better else np.nanargmin
            self.best_index_ = int(pick(signed))
        self.one_se_index_: int | None = None
        if self.stderr is not None:
            self.one_se_index_ = one_standard_error_index(
                self._strength(), self.values, self.stderr, self.greater_is_better
            )

    def _strength(self) -> np.ndarray:
        """Regularization strength per candidate (larger is stronger)."""
        return 1.0 / self.param_values if self.param_name == "C" else self.param_values

    @classmethod
    def from_estimator(
        cls, estimator: Any, *, ax: Any = None, title: str | None = None
    ) -> CVCurveDisplay:
        """The display of a fitted ALO estimator's search, drawn.

        Parameters
        ----------
        estimator : fitted ALO estimator
            ``ALOLogisticRegressionCV`` (in ``C``), ``ALORidgeCV``, ``ALOElasticNetCV``,
            ``ALOPoissonRegressorCV``, ``ALOGammaRegressorCV`` or
            ``ALOTweedieRegressorCV`` (in ``alpha``), fitted on one target.
            One-vs-rest classifiers show the mean over classes of the per-class curves
            (``best_score_`` is the mean of the per-class bests) and one trajectory per
            class.
        ax : matplotlib Axes, optional
        title : str, optional

        Returns
        -------
        CVCurveDisplay
        """
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(estimator, "search_results_")
        curve = getattr(estimator, "_curve", None)
        if curve is None:
            if np.ndim(getattr(estimator, "coef_", None)) == 2 and "target" in getattr(
                estimator, "search_results_", {}
            ):
                raise ValueError(
                    "plot_cv draws one curve of one target: plot search_results_ per target "
                    "(column 'target') for a fit on several targets"
                )
            raise ValueError("plot_cv needs a fitted ALO estimator (call fit first)")
        name, greater = _metric(estimator)
        sign = 1.0 if greater else -1.0  # values = sign * score
        param = "C" if "C" in curve else "alpha"
        x = curve[param]
        values = sign * np.asarray(curve["score"], dtype=np.float64)
        stderr = None
        if not greater and curve["loss_stderr"] is not None:
            stderr = _score_slope(curve, estimator) * np.asarray(curve["loss_stderr"], float)
        chosen = np.unique(np.atleast_1d(getattr(estimator, param + "_")))
        if param == "alpha" and np.ndim(estimator.alpha_) > 0:  # one alpha per feature
            chosen = np.empty(0)
        disp = cls(
            param_name=param,
            param_values=x,
            values=values,
            value_name=name,
            greater_is_better=greater,
            stderr=stderr,
            l1_ratios=curve.get("l1_ratio"),
            chosen=chosen,
            refined=curve.get("refined"),
            trajectories=_trajectories(estimator, param, sign),
            rtol=getattr(estimator, "rtol", None),
            estimator_name=type(estimator).__name__,
        )
        return disp.plot(ax=ax, title=title)

    def plot(self, ax: Any = None, *, title: str | None = None) -> CVCurveDisplay:
        """Draw the curve.

        Parameters
        ----------
        ax : matplotlib Axes, optional
            Where to draw (default: a new figure).
        title : str, optional

        Returns
        -------
        CVCurveDisplay
            ``self``, with ``ax_``, ``figure_`` and the artists set.
        """
        plt = _pyplot()
        if ax is None:
            _, ax = plt.subplots(figsize=(6, 4))
        x_all, y_all = self.param_values, self.values
        ratios = self.l1_ratios
        groups = [None] if ratios is None else list(dict.fromkeys(ratios.tolist()))
        self.lines_, self.bands_ = [], []
        for r in groups:
            mask = np.ones(x_all.size, bool) if r is None else ratios == r
            order = np.argsort(x_all[mask])
            x, yv = x_all[mask][order], y_all[mask][order]
            label = self.value_name
            if r is not None and len(groups) > 1:
                label = f"l1_ratio={r:g}"
            (line,) = ax.plot(x, yv, "o-", ms=3, label=label)
            self.lines_.append(line)
            if self.stderr is not None:
                se = self.stderr[mask][order]
                band = ax.fill_between(x, yv - se, yv + se, alpha=0.2, color=line.get_color())
                self.bands_.append(band)
        if np.any(self.refined):  # rtol=: the refined estimate there
            ax.plot(
                x_all[self.refined],
                y_all[self.refined],
                "s",
                ms=7,
                mfc="none",
                color="k",
                label=f"refined (rtol={self.rtol:g})" if self.rtol is not None else "refined",
            )
        for t in self.trajectories:
            ax.plot(t.param_values, t.values, _trajectory_style(t), lw=1, label=t.label)
        self.chosen_lines_ = []
        if 0 < self.chosen.size <= MAX_CHOSEN_LINES:
            for k, c in enumerate(self.chosen):
                label = f"chosen {self.param_name}" if k == 0 else None
                self.chosen_lines_.append(
                    ax.axvline(float(c), color="k", ls="--", lw=1, label=label)
                )
        self.one_se_marker_ = None
        k = self.one_se_index_
        if k is not None and self.best_index_ is not None and self.stderr is not None:
            b = self.best_index_
            limit = y_all[b] + (-1.0 if self.greater_is_better else 1.0) * self.stderr[b]
            ax.axhline(limit, color="0.4", ls=":", lw=1, label="best + 1 standard error")
            (self.one_se_marker_,) = ax.plot(
                [x_all[k]],
                [y_all[k]],
                "D",
                ms=7,
                mfc="none",
                mew=1.5,
                color="C3",
                label=f"1-SE choice ({self.param_name}={x_all[k]:.3g})",
            )
        ax.set_xscale("log")
        ax.set_xlabel(self.param_name)
        ax.set_ylabel(self.value_name)
        ax.legend(fontsize="small")
        who = self.estimator_name or "ALO estimator"
        ax.set_title(title or f"{who}: {self.param_name} by leave-one-out")
        self.ax_ = ax
        self.figure_ = ax.figure
        self.figure_.tight_layout()
        return self


#: At most this many distinct chosen values get a vertical line (one-vs-rest: one per
#: class); beyond it the lines would hide the curve.
MAX_CHOSEN_LINES = 3


def _trajectory_style(t: Trajectory) -> str:
    """Line style of a trajectory: crosses for a search in the estimator's parameter,
    dots for one parameter of a per-feature search."""
    return "x--" if t.label.startswith("gradient search") else ".-"


def _score_slope(curve: dict, estimator: Any) -> float:
    """``|d score / d loss|``: the score without a scorer is affine in the mean loss
    (``-loss`` for logistic, ``-2 mean(w) loss`` for the squared loss, ``-2 (loss -
    saturated)`` for the GLMs); its slope from two candidates of distinct loss, or, with
    fewer, from the estimator's map at unit mean weight."""
    loss = np.asarray(curve["loss"], dtype=np.float64)
    score = np.asarray(curve["score"], dtype=np.float64)
    ok = np.flatnonzero(np.isfinite(loss) & np.isfinite(score))
    if ok.size >= 2:
        lo, hi = ok[np.argmin(loss[ok])], ok[np.argmax(loss[ok])]
        if loss[hi] > loss[lo]:
            return abs(float((score[hi] - score[lo]) / (loss[hi] - loss[lo])))
    two = np.asarray(estimator._loss_score(np.array([0.0, 1.0]), 1.0), dtype=np.float64)
    return abs(float(two[1] - two[0]))


def _trajectories(estimator: Any, param: str, sign: float) -> list[Trajectory]:
    """The iterates of a gradient search in the display's units: one trajectory per
    one-vs-rest class, or one per feature (its alpha along the iterates)."""
    res = estimator.search_results_
    grad = res["gradient"] > 0
    if not np.any(grad):
        return []
    values = sign * np.asarray(res["score"], dtype=np.float64)
    per_feature = [k for k in res if k.startswith("alpha_")]
    if per_feature:
        names = _feature_names(estimator, len(per_feature))
        return [Trajectory(n, res[k][grad], values[grad]) for k, n in zip(per_feature, names)]
    classes = res["class"] if "class" in res else np.zeros(grad.size)
    out = []
    for c in np.unique(classes[grad]):
        m = grad & (classes == c)
        label = "gradient search"
        if "class" in res:
            label += f" (class {estimator.classes_[int(c)]})"
        out.append(Trajectory(label, res[param][m], values[m]))
    return out


def plot_cv(estimator: Any, ax: Any = None, title: str | None = None) -> CVCurveDisplay:
    """Plot a fitted ALO estimator's search in its own regularization parameter.

    ``CVCurveDisplay.from_estimator(estimator, ax=ax, title=title)``: the criterion in
    the units of ``best_score_`` (see :class:`CVCurveDisplay`) against ``C`` (logistic)
    or ``alpha`` (Ridge, ElasticNet, GLM regressors) on a log axis: one curve per
    ``l1_ratio``, a +-1 standard-error band, a dashed vertical line at the choice, a
    diamond at the one-standard-error choice, open squares on the candidates whose
    value is the refined estimate of ``rtol=``. The iterates of a gradient search are
    drawn over the grid curve ("gradient search"); with ``alpha_per_feature`` one
    labelled line per feature (its alpha along the iterates against the criterion).

    Parameters
    ----------
    estimator : fitted ALO estimator
    ax : matplotlib Axes, optional
    title : str, optional

    Returns
    -------
    CVCurveDisplay
    """
    return CVCurveDisplay.from_estimator(estimator, ax=ax, title=title)
