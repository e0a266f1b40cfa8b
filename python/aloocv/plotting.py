"""Plots of tuning results (matplotlib is an optional dependency: ``aloocv[plot]``)."""

from __future__ import annotations

from typing import Any

import numpy as np


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("plotting needs matplotlib: pip install 'aloocv[plot]'") from exc
    return plt


def plot_tune(result: Any, ax: Any = None, title: str | None = None) -> Any:
    """Plot a :class:`aloocv.TuneResult`.

    Grid results: ACV against the total regularization with a +-1 standard-error
    band and the selected point. Gradient runs (the paper's Figures 1-2): ACV per
    iteration, and each lambda per iteration on a log scale.

    Returns the matplotlib figure.
    """
    plt = _pyplot()
    h = result.history
    if result.method == "grid":
        if ax is None:
            fig, ax = plt.subplots(figsize=(6, 4))
        else:
            fig = ax.figure
        lam = h["params"].sum(axis=1) if h["params"].ndim == 2 else h["params"]
        order = np.argsort(lam)
        lam, acv, se = lam[order], h["acv"][order], h["stderr"][order]
        ax.fill_between(lam, acv - se, acv + se, alpha=0.25, label="+-1 stderr")
        ax.plot(lam, acv, "o-", ms=3, label="ALOOCV")
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
    axes[0].plot(it, h["acv"], "-", lw=1.5)
    axes[0].set_xlabel("evaluation")
    axes[0].set_ylabel("ALOOCV")
    axes[0].set_title(title or f"ALOOCV per iteration ({result.method})")
    if len(axes) > 1:
        axes[1].plot(it, h["params"], lw=0.8)
        axes[1].set_yscale("log")
        axes[1].set_xlabel("evaluation")
        axes[1].set_ylabel("lambda")
        axes[1].set_title("lambda per iteration")
    fig.tight_layout()
    return fig
