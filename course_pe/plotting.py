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

from ._validation import check_bool, check_float, check_int, check_memory, check_positive_int, check_str, require_values

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


def _to_numpy(a: torch.Tensor | np.ndarray, name: str = "data", ndim: int | None = None) -> np.ndarray:
    """A float64 copy of a real tensor or array (bool, complex, strings and objects are refused)."""
    if isinstance(a, torch.Tensor):
        if a.dtype == torch.bool or a.is_complex():
            raise TypeError(f"{name} must hold real numbers, got dtype {a.dtype}")
        require_values(name, a)  # a meta tensor has no values to draw
        data = a.detach().cpu().double().numpy()
    elif isinstance(a, np.ndarray):
        if a.dtype.kind not in "iuf":
            raise TypeError(f"{name} must hold real numbers, got dtype {a.dtype}")
        data = a.astype(np.float64)
    else:
        raise TypeError(f"{name} must be a tensor or a NumPy array, got {type(a).__name__}")
    if ndim is not None and data.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {data.shape}")
    return data  # NaN is allowed: matplotlib leaves a gap (unscored positions of a loss curve)


def _check_image_memory(name: str, a: object) -> None:
    """An image of ``n`` values holds about 9.5 float64 copies of itself at its peak while matplotlib draws it
    (measured with tracemalloc for 10**6 to 4 * 10**6 values); 12 copies are checked against the memory budget."""
    size = a.numel() if isinstance(a, torch.Tensor) else getattr(a, "size", 0)
    check_memory(name, 12 * 8 * int(size), f"an image of {int(size)} values")


def _axes(ax: plt.Axes | None) -> plt.Axes:
    if ax is not None and not isinstance(ax, plt.Axes):
        raise TypeError(f"ax must be None or a matplotlib Axes, got {type(ax).__name__}")
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
    """Heatmap of a real ``(num_positions, d_model)`` tensor or array: positions down, dimensions across."""
    _check_image_memory("table", table)
    data = _to_numpy(table, "table", 2)
    check_str("title", title)
    colorbar = check_bool("colorbar", colorbar)
    ax = _axes(ax)
    image = ax.imshow(data, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax.set(title=title, xlabel="dimension", ylabel=r"position $p$")
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
    """Value of selected dimensions of a real ``(num_positions, d_model)`` table against position.

    ``dims``: a non-empty sequence of column indices in ``0 ... d_model - 1``; ``labels``: None or one str per dim.
    """
    data = _to_numpy(table, "table", 2)
    if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence) or len(dims) == 0:
        raise TypeError(f"dims must be a non-empty sequence of integers, got {dims!r}")
    dims = [check_int("dims entry", d, minimum=0, maximum=data.shape[1] - 1) for d in dims]
    if labels is not None:
        if isinstance(labels, str) or not isinstance(labels, Sequence) or not all(isinstance(t, str) for t in labels):
            raise TypeError(f"labels must be None or a sequence of str, got {labels!r}")
        if len(labels) != len(dims):
            raise ValueError(f"labels must have one entry per dim ({len(dims)}), got {len(labels)}")
    check_str("title", title)
    ax = _axes(ax)
    for n, d in enumerate(dims):
        ax.plot(np.arange(data.shape[0]), data[:, d], label=labels[n] if labels is not None else f"dim {d}")
    ax.set(title=title, xlabel=r"position $p$", ylabel="value")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=min(4, len(dims)))
    return ax


def plot_attention(
    weights: torch.Tensor | np.ndarray,
    *,
    ax: plt.Axes | None = None,
    tokens: Sequence[str] | None = None,
    title: str = "Attention weights",
    colorbar: bool = True,
) -> plt.Axes:
    """A real ``(q_len, k_len)`` attention map (rows: queries, columns: keys); ``tokens``: None, or one str
    per key (and per query when the map is square). ``colorbar=False`` leaves the colour bar out, so that panels
    side by side can share one (``fig.colorbar(ax.get_images()[0], ax=axes)``); the colour scale runs from 0 to
    the map's largest weight either way."""
    _check_image_memory("weights", weights)
    data = _to_numpy(weights, "weights")
    if data.ndim != 2:
        raise ValueError(f"weights must be (q_len, k_len), got shape {data.shape}")
    if tokens is not None:
        if isinstance(tokens, str) or not isinstance(tokens, Sequence) or not all(isinstance(t, str) for t in tokens):
            raise TypeError(f"tokens must be None or a sequence of str, got {tokens!r}")
        if len(tokens) != data.shape[1] or data.shape[0] != data.shape[1]:
            raise ValueError(f"tokens ({len(tokens)}) must label a square map of that size, got shape {data.shape}")
    check_str("title", title)
    colorbar = check_bool("colorbar", colorbar)
    ax = _axes(ax)
    image = ax.imshow(data, cmap="viridis", vmin=0, vmax=max(1e-12, float(data.max())), interpolation="nearest")
    ax.set(title=title, xlabel="key", ylabel="query")
    ax.grid(False)
    if tokens is not None:
        ax.set_xticks(range(len(tokens)), tokens, rotation=90)
        ax.set_yticks(range(len(tokens)), tokens)
    if colorbar:
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
    """One curve per method; a dashed line at the training length and an optional loss floor.

    ``curves`` maps a str name to a real 1-D tensor or array; ``train_length`` is None or a positive integer,
    ``floor`` None or a finite number.
    """
    if not isinstance(curves, Mapping) or not curves:
        raise TypeError(f"curves must be a non-empty mapping of name -> values, got {type(curves).__name__}")
    ys = {}
    for name, values in curves.items():
        check_str("curves key", name)
        ys[name] = _to_numpy(values, f"curves[{name!r}]", 1)
    if train_length is not None:
        train_length = check_positive_int("train_length", train_length)
    if floor is not None:
        floor = check_float("floor", floor)
    check_str("title", title)
    check_str("ylabel", ylabel)
    ax = _axes(ax)
    for name, y in ys.items():
        ax.plot(np.arange(len(y)), y, label=name, color=COLORS.get(name.split()[0].lower()) if name.split() else None)
    if train_length is not None:
        ax.axvline(train_length - 0.5, color="black", linestyle="--", linewidth=1, label=f"training length {train_length}")
    if floor is not None:
        ax.axhline(floor, color="gray", linestyle=":", linewidth=1, label=f"entropy rate {floor:.3f}")
    ax.set(title=title, xlabel="position", ylabel=ylabel)
    ax.legend(loc="upper left")
    return ax
