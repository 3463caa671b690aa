"""Plotting helpers with one consistent style for every chapter.

Each function draws on an ``Axes`` (a new figure if none is given) and returns it, so notebooks
can combine panels. Every plot gets a title, axis labels and units.
"""

from __future__ import annotations

import base64
import hashlib
import io
import logging
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import torch

from ._validation import check_bool, check_float, check_int, check_memory, check_positive_int, check_str, require_values

__all__ = [
    "COLORS",
    "LABELS_ZH",
    "BilingualFigure",
    "bilingual_figure",
    "cjk_font_family",
    "drawn_in",
    "figure_language",
    "t",
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
    ax.set(title=_default(title, "Positional encoding"), xlabel=t("dimension"), ylabel=t(r"position $p$"))
    ax.grid(False)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label=t("value"))
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
        ax.plot(np.arange(data.shape[0]), data[:, d], label=labels[n] if labels is not None else t("dim {d}", d=d))
    ax.set(title=_default(title, "Encoding value by position"), xlabel=t(r"position $p$"), ylabel=t("value"))
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
    ax.set(title=_default(title, "Attention weights"), xlabel=t("key"), ylabel=t("query"))
    ax.grid(False)
    if tokens is not None:
        ax.set_xticks(range(len(tokens)), tokens, rotation=90)
        ax.set_yticks(range(len(tokens)), tokens)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label=t("weight"))
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
        ax.axvline(train_length - 0.5, color="black", linestyle="--", linewidth=1,
                   label=t("training length {n}", n=train_length))
    if floor is not None:
        ax.axhline(floor, color="gray", linestyle=":", linewidth=1, label=t("entropy rate {floor:.3f}", floor=floor))
    ax.set(title=_default(title, "Loss by position"), xlabel=t("position"), ylabel=_default(ylabel, "cross-entropy (nats)"))
    ax.legend(loc="upper left")
    return ax


# ----------------------------------------------------------------------------------------- figures in two languages
# The book has an English and a Chinese edition built from the same stored outputs (the Chinese edition does not run
# the notebooks again: some train models for minutes). A figure whose drawn text (title, axes, legend) should read in
# both languages is drawn twice when its cell runs, by ``bilingual_figure(draw)``: ``draw`` builds the figure, and
# every text it draws goes through ``t``, which gives the English text, or its Chinese from ``LABELS_ZH`` while the
# Chinese copy is drawn. The notebook shows the English figure (its stored output is the one the English edition
# renders, byte for byte what a plain ``plt.show()`` gave); the Chinese PNG is stored in the same output's metadata,
# ``{"course_pe": {"zh_CN": {"image/png": ...}}}``, where nbval does not compare and the English edition does not look,
# and tools/zh_edition.py puts it in place of the English image in the Chinese notebooks.

#: The Chinese of every text the course draws in a figure, keyed by the English exactly as ``t`` receives it: MathText
#: in ``$...$`` and ``str.format`` fields included (a literal brace is doubled, as in any format string). English is
#: drawn as it is. A text missing here fails the Chinese drawing (``KeyError``), so no figure goes half translated.
#:
#: :meta hide-value:
LABELS_ZH: dict[str, str] = {
    # the library's own labels (the plot_* functions above)
    "Positional encoding": "位置编码",
    "dimension": "维度",
    r"position $p$": r"位置 $p$",
    "position": "位置",
    "value": "取值",
    "Encoding value by position": "编码值随位置的变化",
    "dim {d}": "维度 {d}",
    "Attention weights": "注意力权重",
    "key": "键",
    "query": "查询",
    "weight": "权重",
    "Loss by position": "逐位置的损失",
    "cross-entropy (nats)": "交叉熵（nat）",
    "training length {n}": "训练长度 {n}",
    "entropy rate {floor:.3f}": "熵率 {floor:.3f}",
    # book/part1/sinusoidal.ipynb
    r"Binary digits of $p$ (red 1, blue 0)": r"$p$ 的各个二进制位（红为 1，蓝为 0）",
    r"bit $j$ (period $2^{{j+1}}$)": r"第 $j$ 位（周期 $2^{{j+1}}$）",
    r"Sinusoidal table, $d_{{\mathrm{{model}}}} = {d}$": r"正弦位置编码表，$d_{{\mathrm{{model}}}} = {d}$",
    # book/part2/rope_implementation.ipynb
    "interleaved": "交错布局",
    "half": "对半布局",
    r"Pairs share a colour; $P$ moves dimension $2i$ to $i$ and $2i+1$ to $i + d/2$ ($d = {d}$)":
        r"同色的两格为一对；$P$ 把维度 $2i$ 移到 $i$，把 $2i+1$ 移到 $i + d/2$（$d = {d}$）",
    "clone": "克隆（clone）",
    "textbook half": "教科书式对半布局",
    "textbook half, preallocated": "教科书式对半布局，预分配",
    "apply_rope half": "apply_rope 对半布局",
    "complex interleaved": "复数乘法（交错布局）",
    "apply_rope interleaved": "apply_rope 交错布局",
    "time per call over a copy into a preallocated tensor (median and IQR of 15 rounds)":
        "每次调用的时间，以复制到预分配张量为单位（15 轮的中位数与四分位距）",
    "(1, 16, 4096, 128) float32, 2 threads, load average {load:.1f} on {cores} cores":
        "(1, 16, 4096, 128) float32，2 个线程，{cores} 个核，平均负载 {load:.1f}",
    r"Sinusoidal table, {n} positions, $d_{{\mathrm{{model}}}} = {d}$":
        r"正弦位置编码表，{n} 个位置，$d_{{\mathrm{{model}}}} = {d}$",
    r"dim {dim} ($i = {i}$, wavelength {wl:.1f})": r"维度 {dim}（$i = {i}$，波长 {wl:.1f}）",
    r"$\sin(p\,\omega_i)$ for four pairs (dots: integer positions)": r"四个维度对的 $\sin(p\,\omega_i)$（圆点：整数位置）",
    r"Distance between $\mathrm{{PE}}(p)$ and $\mathrm{{PE}}(p + k)$, $d_{{\mathrm{{model}}}} = 64$ (any $p$)":
        r"$\mathrm{{PE}}(p)$ 与 $\mathrm{{PE}}(p + k)$ 之间的距离，$d_{{\mathrm{{model}}}} = 64$（任意 $p$）",
    r"offset $k$ (positions, log scale)": r"偏移量 $k$（位置，对数坐标）",
    "Euclidean distance": "欧氏距离",
    r"position $n$": r"位置 $n$",
    r"dot product $\mathrm{{PE}}(m) \cdot \mathrm{{PE}}(n)$": r"点积 $\mathrm{{PE}}(m) \cdot \mathrm{{PE}}(n)$",
    # book/part2/relative.ipynb
    "bidirectional (32 buckets)": "双向（32 个桶）",
    "causal (32 buckets)": "因果（32 个桶）",
    r"last bucket from $|n - m| = {d}$ (bidirectional)": r"从 $|n - m| = {d}$ 起为最后一个桶（双向）",
    r"last bucket from $n - m = -{d}$ (causal)": r"从 $n - m = -{d}$ 起为最后一个桶（因果）",
    "T5 relative-position buckets (max_distance = 128)": "T5 的相对位置桶（max_distance = 128）",
    r"offset $n - m$ (key $-$ query)": r"偏移量 $n - m$（键 $-$ 查询）",
    "bucket id": "桶编号",
    "bias against distance": "偏置随距离的变化",
    r"distance $m - n$": r"距离 $m - n$",
    r"bias $-\mu_h (m - n)$": r"偏置 $-\mu_h (m - n)$",
    "weights, equal content, {n} keys": "权重：内容相同，{n} 个键",
    "attention weight": "注意力权重",
    "ALiBi, {h} heads: the last query of a {n}-token window": "ALiBi，{h} 个头：{n} 个词元窗口中的最后一个查询",
    # book/part2/rope_first_principles.ipynb
    r"pair {i}: $\theta_{i} = {theta:.3g}$": r"第 {i} 对：$\theta_{i} = {theta:.3g}$",
    ("One query's hands (each pair scaled to length 1) at positions 0 (dark) to 6 (light)\n"
     r"$d = 16$, base 10000; pair $i$ turns by $\theta_i$ radians per position"):
        ("一个查询的时钟指针（每对缩放到长度 1），位置 0（深色）到 6（浅色）\n"
         r"$d = 16$，基数 10000；第 $i$ 对每个位置转 $\theta_i$ 弧度"),
    r"base $10^4$ (RoFormer, LLaMA 1-2)": r"基数 $10^4$（RoFormer、LLaMA 1-2）",
    r"base $5 \cdot 10^5$ (Llama 3)": r"基数 $5 \cdot 10^5$（Llama 3）",
    r"base $10^8$ ($10^4$ with a doubled exponent)": r"基数 $10^8$（$10^4$ 的指数加倍）",
    "{ctx} context ({n})": "{ctx} 上下文（{n}）",
    r"RoPE wavelengths $\lambda_i = 2\pi b^{{2i/d}}$, $d = {d}$": r"RoPE 波长 $\lambda_i = 2\pi b^{{2i/d}}$，$d = {d}$",
    "pair index $i$": "维度对下标 $i$",
    "positions per full turn": "转满一圈所需的位置数",
    r"RoPE score of one random $(q, k)$, $d = 64$, against offset $m - n$":
        r"一个随机 $(q, k)$ 的 RoPE 分数随偏移量 $m - n$ 的变化，$d = 64$",
    r"offset $m - n$ (positions)": r"偏移量 $m - n$（位置）",
    # book/part2/rope_proof.ipynb
    "base {b}": "基数 {b}",
    r"RoPE long-term decay bound, $d = 128$ (RoFormer Fig. 2: base $10^4$)":
        r"RoPE 的远程衰减上界，$d = 128$（RoFormer 图 2：基数 $10^4$）",
    "relative distance": "相对距离",
    "proved range of the long-run mean, base $10^4$ ({lower:.1f}-{upper:.1f})":
        "基数 $10^4$ 下已证明的长期均值范围（{lower:.1f} 至 {upper:.1f}）",
    "random phases ({value:.2f})": "随机相位（{value:.2f}）",
    r"The decay bound far out, $d = 128$": r"远距离处的衰减上界，$d = 128$",
    "relative distance (log scale)": "相对距离（对数坐标）",
    # book/foundations/why_order.ipynb
    r"$\mathrm{{Attn}}(X)$, head {h}": r"$\mathrm{{Attn}}(X)$，第 {h} 个头",
    "Reordering the input reorders the attention weights (rows and columns)":
        "把输入重新排序，注意力权重也随之重新排序（行和列一起）",
    "a, a, a, ... (no BOS)": "a, a, a, ...（无 BOS）",
    "A causal head with uniform attention encodes position": "采用均匀注意力的因果注意力头能编码位置",
    r"position $m$": r"位置 $m$",
    "output coordinate {coord}": "输出坐标 {coord}",
    # book/part1/encoder_decoder.ipynb
    "mean over seeds {seeds}": "种子 {seeds} 的均值",
    "one seed": "单个种子",
    "Causal decoder without encoding: probe error by position": "不带编码的因果解码器：探针误差随位置的变化",
    "position (0 = start token)": "位置（0 = 起始词元）",
    "mean |predicted − true| (positions)": "平均 |预测值 − 真实值|（位置）",
    # book/part1/learned.ipynb
    "best without positions": "无位置时最优",  # short: the line of B passes just right of it
    "learning rate": "学习率",
    "held-out accuracy": "留出准确率",
    "Accuracy after {n} steps": "{n} 步后的准确率",
    "step": "步数",
    "training loss (nats)": "训练损失（nat）",
    "Training loss at lr {lr:g}": "学习率 {lr:g} 下的训练损失",
    "sinusoidal table": "正弦编码表",
    "learned table D (seed {seed}), trained": "可学习编码表 D（种子 {seed}），训练后",
    "cosine similarity of centred rows": "中心化行的余弦相似度",
    "sinusoidal": "正弦位置编码",
    "learned D, trained (each seed)": "可学习编码表 D，训练后（每个种子）",
    "learned D, at initialisation (each seed)": "可学习编码表 D，初始化时（每个种子）",
    r"Mean similarity of centred rows $k$ apart": r"相距 $k$ 的中心化行的平均相似度",
    r"offset $k$": r"偏移量 $k$",
    "mean cosine similarity": "平均余弦相似度",
    # book/part1/worked_example.ipynb
    r"pair {pair}: $\omega_{pair} = {omega:g}$": r"第 {pair} 对：$\omega_{pair} = {omega:g}$",
    "cos (dimension {n})": "cos（维度 {n}）",
    "sin (dimension {n})": "sin（维度 {n}）",
    r"$\mathrm{{PE}}(p)$ for $p = 0, \dots, 9$, one unit circle per pair":
        r"$p = 0, \dots, 9$ 时的 $\mathrm{{PE}}(p)$，每个维度对一个单位圆",
    # book/part1/shift_theorem.ipynb
    r"Pair 1 ($d_{{\mathrm{{model}}}} = 32$): $\mathrm{{PE}}(p) \to \mathrm{{PE}}(p + 1)$, $p = 0, \dots, 10$":
        r"第 1 对（$d_{{\mathrm{{model}}}} = 32$）：$\mathrm{{PE}}(p) \to \mathrm{{PE}}(p + 1)$，$p = 0, \dots, 10$",
    "dimension {n} (sin)": "维度 {n}（sin）",
    "dimension {n} (cos)": "维度 {n}（cos）",
    r"limit: $\int_0^1 \cos(k\,b^{{-t}})\,\mathrm{{d}}t$": r"极限：$\int_0^1 \cos(k\,b^{{-t}})\,\mathrm{{d}}t$",
    r"Normalised dot product $\mathrm{{PE}}(p) \cdot \mathrm{{PE}}(p+k)\,/\,(d_{{\mathrm{{model}}}}/2)$":
        r"归一化点积 $\mathrm{{PE}}(p) \cdot \mathrm{{PE}}(p+k)\,/\,(d_{{\mathrm{{model}}}}/2)$",
    r"offset $k$ (positions)": r"偏移量 $k$（位置）",
    # book/part3/context_extension.ipynb
    "interpolation": "插值",
    "Llama 3.1 rule": "Llama 3.1 规则",
    "plain RoPE": "普通 RoPE",
    "{method} (attention factor {factor:.3f})": "{method}（注意力因子 {factor:.3f}）",
    "dynamic NTK at length {n}": "动态 NTK，长度 {n}",
    "Frequency scaling, d = {d}, L = {L}, s = {s:g}": "频率缩放，d = {d}，L = {L}，s = {s:g}",
    "pair index i (fast → slow)": "维度对下标 i（由快到慢）",
    "swept in training (offsets 0 to {last})": "训练中扫过（偏移量 0 到 {last}）",
    "{method} at {s:g}L": "{method}，在 {s:g}L 处",
    "largest angle (turns, at most 1)": "最大角度（圈，至多 1）",
    "Angles swept in training and reached at {s:g}L, d = {d}, b = {base:g}, L = {L}":
        "训练中扫过的角度与在 {s:g}L 处到达的角度，d = {d}，b = {base:g}，L = {L}",
    # book/part4/todays_models.ipynb
    r"pair index $i$ (fast → slow)": r"维度对下标 $i$（由快到慢）",  # no arrow: around MathText, no fallback font draws it
    r"wavelength $\lambda_i = 2\pi b^{{2i/d}}$ (positions)": r"波长 $\lambda_i = 2\pi b^{{2i/d}}$（位置数）",
    r"Wavelength of each pair; dotted: training length $L$": r"每个维度对的波长；点线：训练长度 $L$",
    "2-D RoPE (b = 100)": "二维 RoPE（b = 100）",
    "1-D RoPE on the flattened index (b = 100)": "展平下标上的一维 RoPE（b = 100）",
    "key column": "键所在列",
    "key row": "键所在行",
    "Score of a query at the centre (x) with every key; q = k = 1, so each pair adds 2 cos(angle difference)":
        "中心处查询（x）与每个键的分数；q = k = 1，所以每个维度对贡献 2 cos(角度差)",
    "score with the query (x)": "与查询（x）的分数",
}

LANGUAGES = ("en", "zh_CN")
_LANGUAGE: ContextVar[str] = ContextVar("course_pe_figure_language", default="en")


def figure_language() -> str:
    """The language figures are being drawn in: ``"en"``, or ``"zh_CN"`` inside ``drawn_in("zh_CN")``."""
    return _LANGUAGE.get()


@contextmanager
def drawn_in(language: str) -> Iterator[None]:
    """Draw figures in ``language`` (one of ``LANGUAGES``) inside the ``with`` block: ``t`` answers in it."""
    check_str("language", language)
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    token = _LANGUAGE.set(language)
    try:
        yield
    finally:
        _LANGUAGE.reset(token)


def t(text: str, **fields: object) -> str:
    """A text drawn in a figure, in the language figures are being drawn in, with ``fields`` formatted in.

    ``t("training length {n}", n=64)`` is "training length 64", or, while the Chinese copy of a figure is drawn,
    the Chinese of "training length {n}" from ``LABELS_ZH`` with 64 in it (``KeyError`` if it has none)."""
    check_str("text", text)
    if _LANGUAGE.get() == "zh_CN":
        try:
            text = LABELS_ZH[text]
        except KeyError:
            raise KeyError(f"no Chinese for the figure text {text!r}: add it to course_pe.plotting.LABELS_ZH") from None
    return text.format(**fields)


def _default(text: str, default: str) -> str:
    """A plot function's title or label: the caller's text as given, or the default in the figure's language."""
    return t(default) if text == default else text


# A font that draws Chinese, for the Chinese copy of a figure. Looked for in this order: the file named by
# COURSE_PE_CJK_FONT; the font the book's site serves (tools/fonts/ of the repository, Noto Sans SC, SIL OFL 1.1),
# converted once from WOFF2 (which matplotlib cannot read) to OpenType in the temporary folder; a system font that
# matplotlib knows. Digits and Latin letters keep matplotlib's default font (DejaVu Sans), as in the English copy.
CJK_FONT_ENV = "COURSE_PE_CJK_FONT"
_REPOSITORY_FONT = Path(__file__).resolve().parents[1] / "tools" / "fonts" / "noto-sans-sc-chinese-simplified-400-normal.woff2"
_SYSTEM_CJK_FAMILIES = ("Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "WenQuanYi Micro Hei",
                        "Microsoft YaHei", "PingFang SC", "SimHei")


def _register(path: Path) -> str:
    """Add the font file to matplotlib's font manager; return its family name."""
    from matplotlib import font_manager

    font_manager.fontManager.addfont(str(path))
    return font_manager.FontProperties(fname=str(path)).get_name()


def _opentype_from_woff2(path: Path) -> Path:
    """An OpenType copy of a WOFF2 font in the temporary folder (made once per font file)."""
    data = path.read_bytes()
    target = Path(tempfile.gettempdir()) / f"course_pe-cjk-{hashlib.sha256(data).hexdigest()[:16]}.otf"
    if not target.is_file():
        from fontTools.ttLib import TTFont

        font = TTFont(io.BytesIO(data))
        font.flavor = None
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        font.save(str(partial))
        partial.replace(target)
    return target


def cjk_font_family() -> str | None:
    """The family name of a font matplotlib can draw Chinese with (registered with matplotlib), or None."""
    from matplotlib import font_manager

    named = os.environ.get(CJK_FONT_ENV)
    if named:
        path = Path(named)
        if not path.is_file():
            raise ValueError(f"{CJK_FONT_ENV}={named!r} is not a font file")
        return _register(_opentype_from_woff2(path) if path.suffix.lower() == ".woff2" else path)
    if _REPOSITORY_FONT.is_file():
        return _register(_opentype_from_woff2(_REPOSITORY_FONT))
    known = {entry.name for entry in font_manager.fontManager.ttflist}
    return next((family for family in _SYSTEM_CJK_FAMILIES if family in known), None)


def _chinese_rc(family: str) -> dict[str, object]:
    """matplotlib settings for the Chinese copy: text in the Chinese font first, DejaVu Sans for what it lacks (font
    fallback). The Chinese font comes first because the text around MathText (``"位置 $p$"``) is drawn with the text's
    first font alone; the math itself stays in MathText's DejaVu fonts, as in the English copy."""
    return {"font.family": [family, "DejaVu Sans"]}


def _png(fig: plt.Figure) -> bytes:
    """The figure as the notebook's inline backend stores it (PNG at the figure's dpi, tight bounding box)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=fig.dpi, bbox_inches="tight", facecolor=fig.get_facecolor(),
                edgecolor=fig.get_edgecolor())
    return buffer.getvalue()


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class BilingualFigure:
    """A figure drawn in English and in Chinese (``bilingual_figure``). Displayed, it is the English PNG with the
    figure's usual text form, and the Chinese PNG in the output's metadata (absent where no font draws Chinese)."""

    def __init__(self, english: bytes, chinese: bytes | None, text: str) -> None:
        for name, value in (("english", english), ("chinese", chinese)):
            if value is None and name == "chinese":
                continue
            if not isinstance(value, bytes) or not value.startswith(_PNG_SIGNATURE):
                raise TypeError(f"{name} must be the bytes of a PNG image, got {type(value).__name__}"
                                + (" that is not a PNG" if isinstance(value, bytes) else ""))
        self.english = english
        self.chinese = chinese
        self.text = check_str("text", text)

    def _repr_mimebundle_(self, include=None, exclude=None) -> tuple[dict, dict]:
        data = {"image/png": base64.b64encode(self.english).decode("ascii"), "text/plain": self.text}
        chinese = {"image/png": base64.b64encode(self.chinese).decode("ascii")} if self.chinese is not None else None
        return data, {"course_pe": {"zh_CN": chinese}}

    def __repr__(self) -> str:
        return self.text


def bilingual_figure(draw: Callable[[], plt.Figure]) -> BilingualFigure:
    """Draw a figure in English and in Chinese: ``draw()`` makes the figure (every text through ``t``) and returns it.

    The English copy is drawn first and is what a notebook shows; the Chinese copy is drawn with a font that has Chinese
    (``cjk_font_family``), or not at all where there is none. Both figures are closed. The last expression of a
    notebook cell, ``bilingual_figure(draw)``, takes the place of ``plt.show()``."""
    if not callable(draw):
        raise TypeError(f"draw must be a function that returns a matplotlib Figure, got {type(draw).__name__}")

    def drawn() -> plt.Figure:
        before = set(plt.get_fignums())
        try:
            fig = draw()
            if not isinstance(fig, plt.Figure):
                raise TypeError(f"draw() must return a matplotlib Figure, got {type(fig).__name__}")
        except BaseException:
            for number in set(plt.get_fignums()) - before:  # no half-drawn figure is left for the notebook to show
                plt.close(number)
            raise
        return fig

    with drawn_in("en"):
        fig = drawn()
        english, text = _png(fig), repr(fig)
        plt.close(fig)
    chinese = None
    family = cjk_font_family()
    if family is not None:
        with drawn_in("zh_CN"), mpl.rc_context(_chinese_rc(family)), _every_glyph_drawn():
            fig = drawn()
            try:
                chinese = _png(fig)
            finally:
                plt.close(fig)
    return BilingualFigure(english, chinese, text)


class _MissingGlyphs(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "glyph" in record.getMessage().lower():
            self.messages.append(record.getMessage())


@contextmanager
def _every_glyph_drawn() -> Iterator[None]:
    """Fail (``ValueError``) where a character of the figure has no glyph in its fonts: matplotlib would draw a box.
    matplotlib says so with a warning (text) or a log message (MathText)."""
    import warnings

    handler = _MissingGlyphs()
    logger = logging.getLogger("matplotlib")
    logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:
        logger.removeHandler(handler)
    missing = handler.messages + [str(w.message) for w in caught if "missing from font" in str(w.message)]
    if missing:
        raise ValueError(f"the Chinese copy of the figure has characters its fonts cannot draw: {missing[:3]}")
