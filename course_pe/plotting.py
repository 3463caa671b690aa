"""Plotting helpers with one consistent style for every chapter.

Each function draws on an ``Axes`` (a new figure if none is given) and returns it, so notebooks
can combine panels. Every plot gets a title, axis labels and units.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import torch

__all__ = [
    "COLORS",
    "plot_attention",
    "plot_dimension_curves",
    "plot_encoding_heatmap",
    "plot_loss_by_position",
    "use_course_style",
]

#: One colour per method, used by every chapter so a method looks the same everywhere.
COLORS: dict[str, str] = {
    "none": "#7f7f7f",
    "sinusoidal": "#1f77b4",
    "learned": "#ff7f0e",
    "rope": "#2ca02c",
    "alibi": "#d62728",
    "t5": "#9467bd",
    "shaw": "#8c564b",
    "interpolation": "#e377c2",
    "ntk": "#17becf",
    "yarn": "#bcbd22",
    "llama3": "#393b79",
}


def use_course_style() -> None:
    """Apply the course's matplotlib defaults (size, fonts, grid, a fixed DPI)."""
    mpl.rcParams.update(
        {
            "figure.figsize": (7.0, 3.6),
            "figure.dpi": 100,
            "savefig.dpi": 100,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.titlesize": 11,
            "axes.labelsize": 10,
            "legend.fontsize": 9,
            "legend.frameon": False,
            "image.cmap": "RdBu_r",
        }
    )


def _to_numpy(a: torch.Tensor | np.ndarray) -> np.ndarray:
    return a.detach().cpu().double().numpy() if isinstance(a, torch.Tensor) else np.asarray(a, dtype=np.float64)


def _axes(ax: plt.Axes | None) -> plt.Axes:
    if ax is None:
        _, ax = plt.subplots()
    return ax


def plot_encoding_heatmap(
    table: torch.Tensor | np.ndarray,
    *,
    ax: plt.Axes | None = None,
    title: str = "Positional encoding",
    colorbar: bool = True,
) -> plt.Axes:
    """Heatmap of a ``(num_positions, d_model)`` table: positions down, dimensions across."""
    ax = _axes(ax)
    data = _to_numpy(table)
    image = ax.imshow(data, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax.set(title=title, xlabel="dimension", ylabel="position p")
    ax.grid(False)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label="value")
    return ax


def plot_dimension_curves(
    table: torch.Tensor | np.ndarray,
    dims: Sequence[int],
    *,
    ax: plt.Axes | None = None,
    title: str = "Encoding value by position",
    labels: Sequence[str] | None = None,
) -> plt.Axes:
    """Value of selected dimensions of a ``(num_positions, d_model)`` table against position."""
    ax = _axes(ax)
    data = _to_numpy(table)
    for n, d in enumerate(dims):
        ax.plot(np.arange(data.shape[0]), data[:, d], label=labels[n] if labels else f"dim {d}")
    ax.set(title=title, xlabel="position p", ylabel="value")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=min(4, len(dims)))
    return ax


def plot_attention(
    weights: torch.Tensor | np.ndarray,
    *,
    ax: plt.Axes | None = None,
    tokens: Sequence[str] | None = None,
    title: str = "Attention weights",
) -> plt.Axes:
    """A ``(q_len, k_len)`` attention map (rows: queries, columns: keys)."""
    ax = _axes(ax)
    data = _to_numpy(weights)
    if data.ndim != 2:
        raise ValueError(f"weights must be (q_len, k_len), got shape {data.shape}")
    image = ax.imshow(data, cmap="viridis", vmin=0, vmax=max(1e-12, float(data.max())), interpolation="nearest")
    ax.set(title=title, xlabel="key", ylabel="query")
    ax.grid(False)
    if tokens is not None:
        ax.set_xticks(range(len(tokens)), tokens, rotation=90)
        ax.set_yticks(range(len(tokens)), tokens)
    ax.figure.colorbar(image, ax=ax, label="weight")
    return ax


def plot_loss_by_position(
    curves: Mapping[str, torch.Tensor | np.ndarray],
    *,
    train_length: int | None = None,
    floor: float | None = None,
    ax: plt.Axes | None = None,
    title: str = "Loss by position",
    ylabel: str = "cross-entropy (nats)",
) -> plt.Axes:
    """One curve per method; a dashed line at the training length and an optional loss floor."""
    ax = _axes(ax)
    for name, values in curves.items():
        y = _to_numpy(values)
        ax.plot(np.arange(len(y)), y, label=name, color=COLORS.get(name.split()[0].lower()))
    if train_length is not None:
        ax.axvline(train_length - 0.5, color="black", linestyle="--", linewidth=1, label=f"training length {train_length}")
    if floor is not None:
        ax.axhline(floor, color="gray", linestyle=":", linewidth=1, label=f"entropy rate {floor:.3f}")
    ax.set(title=title, xlabel="position", ylabel=ylabel)
    ax.legend(loc="upper left")
    return ax
