"""Plots of tuning results (matplotlib is an optional dependency: ``aloocv[plot]``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .penalties import ElasticNet

__all__ = ["plot_cv", "plot_tune"]


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


def plot_tune(result: Any, ax: Any = None, title: str | None = None) -> Any:
    """Plot a :class:`aloocv.TuneResult`.

    Grid results: ACV against the total regularization with a +-1 standard-error
    band and the selected point; elastic-net grids draw one curve per share
    ``l1 / (l1 + l2)``. Gradient runs (the paper's Figures 1-2): ACV per evaluation
    (for a one-parameter ``"auto"`` search: ACV against lambda, the bracketing grid as a
    curve and the iterates over it), and each parameter per evaluation on a log scale,
    one labelled line each.

    Returns the matplotlib figure.
    """
    plt = _pyplot()
    h = result.history
    params = h["params"] if h["params"].ndim == 2 else h["params"][:, None]
    m = params.shape[1]
    if result.method == "grid":
        if ax is None:
            fig, ax = plt.subplots(figsize=(6, 4))
        else:
            fig = ax.figure
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
        ax.set_xscale("log")
        ax.set_xlabel("lambda (sum of penalty parameters)")
        ax.set_ylabel("leave-one-out loss")
        ax.legend()
        ax.set_title(title or "ALOOCV along the grid")
        fig.tight_layout()
        return fig
    if ax is None:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    else:
        axes = np.atleast_1d(ax)
        fig = axes[0].figure
    it = np.arange(h["acv"].shape[0])
    n_grid = (
        len(result.path_n_iter) if result.method == "auto" and result.path_n_iter is not None else 0
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
    axes[0].set_ylabel("ALOOCV")
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
    fig.tight_layout()
    return fig


def _feature_names(estimator: Any, p: int) -> list[str]:
    names = getattr(estimator, "feature_names_in_", None)
    return [str(v) for v in names] if names is not None else [f"feature {j}" for j in range(p)]


def plot_cv(estimator: Any, ax: Any = None, title: str | None = None) -> Any:
    """Plot a fitted ALO estimator's search in its own regularization parameter.

    The leave-one-out loss (with a +-1 standard-error band), or the score when the
    estimator was fitted with ``scoring=``, against ``C`` (logistic) or ``alpha``
    (Ridge, ElasticNet, GLM regressors) on a log axis: one curve per ``l1_ratio``, a
    dashed vertical line at the choice, open squares on the candidates whose value is the
    refined estimate of ``rtol=``. The iterates of a gradient search are drawn
    over the grid curve ("gradient search"); with ``alpha_per_feature`` one labelled
    line per feature (its alpha along the iterates against the loss). One-vs-rest
    classifiers show the mean over classes of the grid curves and one trajectory per
    class.

    Parameters
    ----------
    estimator : fitted ALO estimator
    ax : matplotlib Axes, optional
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    plt = _pyplot()
    curve = getattr(estimator, "_curve", None)
    if curve is None:
        raise ValueError("plot_cv needs a fitted ALO estimator (call fit first)")
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 4))
    else:
        fig = ax.figure
    param = "C" if "C" in curve else "alpha"
    scored = bool(curve["scored"])
    yname = "score" if scored else "loss"
    x_all = curve[param]
    ratios = curve.get("l1_ratio")
    groups = [None] if ratios is None else list(dict.fromkeys(ratios.tolist()))
    for r in groups:
        mask = np.ones(x_all.size, bool) if r is None else ratios == r
        order = np.argsort(x_all[mask])
        x, yv = x_all[mask][order], curve[yname][mask][order]
        label = "leave-one-out " + ("score" if scored else "loss")
        if r is not None and len(groups) > 1:
            label = f"l1_ratio={r:g}"
        (line,) = ax.plot(x, yv, "o-", ms=3, label=label)
        if not scored:
            se = curve["loss_stderr"][mask][order]
            ax.fill_between(x, yv - se, yv + se, alpha=0.2, color=line.get_color())
    refined = curve.get("refined")
    if refined is not None and np.any(refined):  # rtol=: the refined estimate there
        ax.plot(
            x_all[refined],
            curve[yname][refined],
            "s",
            ms=7,
            mfc="none",
            color="k",
            label=f"refined (rtol={estimator.rtol:g})",
        )
    res = estimator.search_results_
    grad = res["gradient"] > 0
    if np.any(grad):
        per_feature = [k for k in res if k.startswith("alpha_")]
        if per_feature:
            names = _feature_names(estimator, len(per_feature))
            for k, name in zip(per_feature, names):
                ax.plot(res[k][grad], res["loss"][grad], ".-", lw=1, label=name)
        else:
            classes = res["class"] if "class" in res else np.zeros(grad.size)
            for c in np.unique(classes[grad]):
                m = grad & (classes == c)
                label = "gradient search"
                if "class" in res:
                    label += f" (class {estimator.classes_[int(c)]})"
                ax.plot(res[param][m], res["loss"][m], "x--", lw=1, label=label)
    chosen = np.unique(np.atleast_1d(getattr(estimator, param + "_")))
    if chosen.size <= 3 and not (param == "alpha" and np.ndim(estimator.alpha_) > 0):
        for k, c in enumerate(chosen):
            ax.axvline(
                float(c), color="k", ls="--", lw=1, label=f"chosen {param}" if k == 0 else None
            )
    ax.set_xscale("log")
    ax.set_xlabel(param)
    ax.set_ylabel("leave-one-out score" if scored else "leave-one-out loss")
    ax.legend(fontsize="small")
    ax.set_title(title or f"{type(estimator).__name__}: {param} by leave-one-out")
    fig.tight_layout()
    return fig
