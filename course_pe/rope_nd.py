"""RoPE variants of today's models: 2-D (axial) RoPE, M-RoPE, xPos and DeepSeek's decoupled RoPE.

All four reuse the rotation of :mod:`course_pe.rope`: pair ``i`` of a query or key is turned by an angle
``phi_i``. Plain RoPE uses ``phi_i = p * theta_i`` for a token at position ``p``. The variants here change
only how the angle of each pair is formed, or what is multiplied or concatenated around the rotation:

* :func:`rope_2d`: axial 2-D RoPE for image patches (Heo et al., 2024, "RoPE-Axial"); the first half of the
  pairs turn with the patch's first coordinate, the second half with its second coordinate.
* :func:`mrope`: multimodal RoPE of Qwen2-VL (Wang et al., 2024); three position ids (temporal, height,
  width), consecutive *sections* of pairs read one id each, with the ordinary 1-D frequencies.
  :func:`mrope_position_ids` builds Qwen2-VL's ids for text, one image, text.
* :func:`xpos_scale`, :func:`apply_xpos`: xPos (Sun et al., 2023), RoPE times a per-pair exponential decay.
* :func:`decoupled_rope_logits`: DeepSeek-V2/V3 (MLA), a position-free part plus a small rotated part whose
  key is shared by all heads.
* :func:`multi_axis_rope`: the common core (pair ``i`` turns by coordinate ``axis_of_pair[i]`` times
  ``inv_freq[i]``).

Conventions. ``x`` is ``(..., seq, head_dim)``; multi-axis positions are ``(seq, n_axes)`` (shared by the
batch) or ``(batch, seq, n_axes)`` for ``x`` of shape ``(batch, heads, seq, head_dim)``. A *pair index*
``i`` runs over ``0 ... head_dim/2 - 1`` and owns dimensions ``(2i, 2i+1)`` (``layout="interleaved"``) or
``(i, i + head_dim/2)`` (``layout="half"``), exactly as in :func:`course_pe.rope.apply_rope`. Angles are
formed in float64; the result has ``x``'s dtype and device.

Every variant keeps RoPE's relative property in its own coordinates: the score of a rotated query at
position ``P`` and key at ``K`` depends on the positions only through ``P - K`` (a 2-D or 3-D offset for
the multi-axis schemes). The tests check this, and compare each function with an independent transcription
of the published formula.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ._validation import (
    check_choice,
    check_memory,
    check_nonnegative_int,
    check_positive_float,
    check_positive_int,
    check_tensor,
    numel,
    require_values,
)
from .rope import ROPE_LAYOUTS, RopeLayout, _check_position_values, apply_rope, rotate_with_cos_sin
from .rope_scaling import rope_frequencies

__all__ = [
    "QWEN2_VL_MROPE_SECTION",
    "apply_xpos",
    "decoupled_rope_logits",
    "mrope",
    "mrope_position_ids",
    "multi_axis_rope",
    "rope_2d",
    "rope_2d_frequencies",
    "xpos_scale",
]

#: ``rope_scaling.mrope_section`` of the released Qwen2-VL-7B configuration: 16 + 24 + 24 = 64 pairs of a
#: 128-wide head read the temporal, height and width position ids.
QWEN2_VL_MROPE_SECTION: tuple[int, int, int] = (16, 24, 24)


def _check_positions(x: torch.Tensor, positions: object, n_axes: int) -> torch.Tensor:
    """Multi-axis positions as float64, shape ``(seq, n_axes)`` or ``(batch, 1, seq, n_axes)``."""
    positions = check_tensor("positions", positions, "position")
    _check_position_values("positions", positions)  # |p| <= 2**53, values present (not meta)
    seq = x.shape[-2]
    if positions.dim() == 2:
        if positions.shape != (seq, n_axes):
            raise ValueError(
                f"positions must have shape (seq, {n_axes}) = ({seq}, {n_axes}) for x of shape {tuple(x.shape)} "
                f"(n_axes = {n_axes} coordinates per position), got {tuple(positions.shape)}"
            )
        return positions.to(device=x.device, dtype=torch.float64)
    if positions.dim() == 3:
        if x.dim() != 4 or positions.shape != (x.shape[0], seq, n_axes):
            raise ValueError(
                f"per-sequence positions must have shape (batch, seq, {n_axes}) (n_axes = {n_axes} coordinates per "
                f"position) with x of shape (batch, heads, seq, head_dim); got positions {tuple(positions.shape)} and "
                f"x {tuple(x.shape)}"
            )
        return positions.to(device=x.device, dtype=torch.float64).unsqueeze(1)
    raise ValueError(f"positions must be (seq, {n_axes}) or (batch, seq, {n_axes}) (n_axes = {n_axes} coordinates per "
                     f"position), got shape {tuple(positions.shape)}")


def multi_axis_rope(
    x: torch.Tensor,
    positions: torch.Tensor,
    *,
    inv_freq: torch.Tensor,
    axis_of_pair: torch.Tensor,
    layout: RopeLayout = "interleaved",
    n_axes: int | None = None,
) -> torch.Tensor:
    """Rotate pair ``i`` of ``x`` by ``positions[..., axis_of_pair[i]] * inv_freq[i]``.

    The common core of :func:`rope_2d` and :func:`mrope`. With one axis and ``axis_of_pair`` all zero it is
    :func:`~course_pe.rope.apply_rope`.

    Args:
        x: ``(..., seq, head_dim)``, ``head_dim`` even.
        positions: ``(seq, n_axes)`` or, for 4-D ``x``, ``(batch, seq, n_axes)``; integer or float32/64.
        inv_freq: ``(head_dim // 2,)`` frequency of each pair (radians per unit of its coordinate).
        axis_of_pair: ``(head_dim // 2,)`` integer tensor, the coordinate (``0 ... n_axes - 1``) each pair reads.
        layout: which dimensions form pair ``i`` (see :mod:`course_pe.rope`).
        n_axes: the number of coordinates ``positions`` must carry (default: whatever its last dimension is).

    Returns:
        A new tensor of ``x``'s shape, dtype and device.
    """
    x = check_tensor("x", x, "floating", min_dim=2, finite=False)
    check_choice("layout", layout, ROPE_LAYOUTS)
    if x.shape[-1] % 2:
        raise ValueError(f"x must be (..., seq, head_dim) with head_dim even, got shape {tuple(x.shape)}")
    half = x.shape[-1] // 2
    inv_freq = check_tensor("inv_freq", inv_freq, "floating", dim=1)
    axis_of_pair = check_tensor("axis_of_pair", axis_of_pair, "integer", dim=1)
    require_values("axis_of_pair", axis_of_pair)  # which coordinate each pair reads
    if not x.is_meta:
        require_values("inv_freq", inv_freq)
    if inv_freq.shape != (half,):
        raise ValueError(f"inv_freq must have shape (head_dim // 2,) = ({half},), got {tuple(inv_freq.shape)}")
    if axis_of_pair.shape != (half,):
        raise ValueError(f"axis_of_pair must have shape (head_dim // 2,) = ({half},), got {tuple(axis_of_pair.shape)}")
    positions = check_tensor("positions", positions, "position", min_dim=1)
    if n_axes is None:
        if positions.shape[-1] == 0:
            raise ValueError(f"positions must end in a non-empty axis dimension, got shape {tuple(positions.shape)}")
        n_axes = positions.shape[-1]
    n_axes = check_positive_int("n_axes", n_axes)
    if half and (int(axis_of_pair.min()) < 0 or int(axis_of_pair.max()) >= n_axes):
        raise ValueError(f"axis_of_pair must lie in [0, {n_axes - 1}] for positions with {n_axes} axes")
    pos = _check_positions(x, positions, n_axes)
    coords = pos[..., axis_of_pair.to(device=x.device, dtype=torch.long)]  # (..., seq, half)
    angles = coords * inv_freq.to(device=x.device, dtype=torch.float64)
    table_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    return rotate_with_cos_sin(x, angles.cos().to(table_dtype), angles.sin().to(table_dtype), layout=layout)


# --------------------------------------------------------------------------- 2-D (axial) RoPE


def rope_2d_frequencies(head_dim: int, *, base: float = 100.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Frequencies and axes of axial 2-D RoPE: ``(inv_freq, axis_of_pair)``, each ``(head_dim // 2,)``.

    Pairs ``0 ... head_dim/4 - 1`` read coordinate 0 and pairs ``head_dim/4 ... head_dim/2 - 1`` coordinate 1;
    both halves use the frequencies of a ``head_dim/2``-wide 1-D RoPE, ``base ** (-4j / head_dim)``,
    ``j = 0 ... head_dim/4 - 1``. ``base=100`` is the RoPE-Axial default of Heo et al. (2024).
    """
    head_dim = check_positive_int("head_dim", head_dim)
    if head_dim % 4:
        raise ValueError(f"2-D RoPE needs head_dim divisible by 4 (two axes of rotation pairs), got {head_dim}")
    base = check_positive_float("base", base)
    per_axis, _ = rope_frequencies(head_dim // 2, base=base, dtype=torch.float64)
    inv_freq = torch.cat([per_axis, per_axis])
    axis_of_pair = torch.cat([torch.zeros(head_dim // 4, dtype=torch.long), torch.ones(head_dim // 4, dtype=torch.long)])
    return inv_freq, axis_of_pair


def rope_2d(
    x: torch.Tensor,
    positions: torch.Tensor,
    *,
    base: float = 100.0,
    layout: RopeLayout = "interleaved",
) -> torch.Tensor:
    """Axial 2-D RoPE: rotate image-patch queries or keys by their 2-D grid coordinates.

    Args:
        x: ``(..., seq, head_dim)`` with ``head_dim`` divisible by 4 (``seq`` patches in any order).
        positions: ``(seq, 2)`` (or ``(batch, seq, 2)`` for 4-D ``x``) patch coordinates. Heo et al. put the
            column (x) first and the row (y) second; any fixed order works.
        base: frequency base (Heo et al. use 100 for RoPE-Axial).
        layout: ``"interleaved"`` (Heo et al.'s complex-number code) or ``"half"``.

    The score of a query at ``(r, c)`` and a key at ``(r', c')`` depends only on ``(r - r', c - c')``.
    """
    x = check_tensor("x", x, "floating", min_dim=2, finite=False)
    if x.shape[-1] == 0 or x.shape[-1] % 4:
        raise ValueError(f"x must have a last dimension (head_dim) divisible by 4 for 2-D RoPE, got shape {tuple(x.shape)}")
    inv_freq, axis_of_pair = rope_2d_frequencies(x.shape[-1], base=base)
    return multi_axis_rope(x, positions, inv_freq=inv_freq, axis_of_pair=axis_of_pair, layout=layout, n_axes=2)


# --------------------------------------------------------------------------- M-RoPE (Qwen2-VL)


def _check_sections(sections: Sequence[int], head_dim: int) -> tuple[int, ...]:
    if isinstance(sections, (str, bytes)) or not isinstance(sections, Sequence):
        raise TypeError(f"sections must be a sequence of integers, got {type(sections).__name__}")
    sections = tuple(check_positive_int("each entry of sections", s) for s in sections)
    if sum(sections) != head_dim // 2:
        raise ValueError(
            f"sections must add up to the number of pairs head_dim // 2 = {head_dim // 2}, got {sections} "
            f"(sum {sum(sections)})"
        )
    return sections


def mrope(
    x: torch.Tensor,
    positions: torch.Tensor,
    *,
    sections: Sequence[int] = QWEN2_VL_MROPE_SECTION,
    base: float = 1_000_000.0,
    layout: RopeLayout = "half",
) -> torch.Tensor:
    """Multimodal RoPE (M-RoPE) of Qwen2-VL.

    Each token carries ``len(sections)`` position ids (Qwen2-VL: temporal, height, width). The pairs keep the
    ordinary 1-D frequencies ``base ** (-2i / head_dim)``; the first ``sections[0]`` pairs read id 0, the next
    ``sections[1]`` id 1, and so on. (Unlike :func:`rope_2d`, each axis therefore gets a *different* band of
    frequencies: with ``(16, 24, 24)`` the temporal id drives the fastest pairs and the width id the slowest.)
    A text token has equal ids ``(p, p, p)``, and M-RoPE reduces to plain RoPE for it.

    Args:
        x: ``(..., seq, head_dim)``.
        positions: ``(seq, len(sections))`` or ``(batch, seq, len(sections))``; see :func:`mrope_position_ids`.
        sections: pairs per position id; must add up to ``head_dim // 2``. Default: Qwen2-VL's ``(16, 24, 24)``.
        base: frequency base (Qwen2-VL: ``rope_theta = 1e6``).
        layout: ``"half"`` (Qwen2-VL's ``rotate_half`` code) or ``"interleaved"``.
    """
    x = check_tensor("x", x, "floating", min_dim=2, finite=False)
    head_dim = x.shape[-1]
    if head_dim == 0 or head_dim % 2:
        raise ValueError(f"head_dim (last dimension of x) must be even and > 0, got shape {tuple(x.shape)}")
    sections = _check_sections(sections, head_dim)
    inv_freq, _ = rope_frequencies(head_dim, base=check_positive_float("base", base), dtype=torch.float64)
    axis_of_pair = torch.repeat_interleave(torch.arange(len(sections)), torch.tensor(sections))
    return multi_axis_rope(
        x, positions, inv_freq=inv_freq, axis_of_pair=axis_of_pair, layout=layout, n_axes=len(sections)
    )


def mrope_position_ids(text_before: int, grid: tuple[int, int, int], text_after: int) -> torch.Tensor:
    """Qwen2-VL's ``(temporal, height, width)`` ids for ``text_before`` text tokens, one visual block, text.

    Text token ``k`` gets ``(p, p, p)`` with ``p`` counting on from the previous token. The visual block of
    ``grid = (T, H, W)`` tokens (after Qwen2-VL's 2 x 2 patch merge) is laid out frame by frame, row by row;
    token ``(t, h, w)`` gets ``(s + t, s + h, s + w)`` with ``s`` the next free id. Text after the block
    continues from one past the largest id used so far, ``s + max(T, H, W)``.

    That is the rule of the code Qwen2-VL was published with (transformers 4.x ``get_rope_index``,
    ``st_idx = llm_pos_ids_list[-1].max() + 1``; read at commit ``00b676f`` of ``modeling_qwen2_vl.py``), and the one
    ``grid`` describes: every later token is later on every axis. transformers 5.23 continues at ``s + max(H, W)``
    instead (``current_pos += max(grid_thw[1], grid_thw[2])``, ignoring ``T``): for an image (``T = 1``) and for a
    video with ``T <= max(H, W)`` the two agree, for a longer video (``T > max(H, W)``) the text after it gets
    smaller ids than the last frames' temporal ids in 5.23 (``tests/test_rope_nd.py`` checks both statements
    against transformers 5.23).

    Returns:
        ``(text_before + T*H*W + text_after, 3)`` int64 tensor.
    """
    before = check_nonnegative_int("text_before", text_before)
    after = check_nonnegative_int("text_after", text_after)
    if not isinstance(grid, tuple) or len(grid) != 3:
        raise TypeError(f"grid must be a tuple (T, H, W), got {grid!r}")
    t_n, h_n, w_n = (check_positive_int(name, v) for name, v in zip(("grid T", "grid H", "grid W"), grid))
    total = before + numel(t_n, h_n, w_n) + after
    check_memory("text_before, grid and text_after", 6 * 3 * 8 * total, f"{total} tokens' position ids")
    if total > 2**53:
        raise ValueError(f"text_before, grid and text_after give {total} tokens; positions must stay <= 2**53")
    text = torch.arange(before, dtype=torch.long)
    rows = [text[:, None].expand(before, 3)]
    start = before
    t, h, w = torch.meshgrid(torch.arange(t_n), torch.arange(h_n), torch.arange(w_n), indexing="ij")
    visual = torch.stack([t.flatten(), h.flatten(), w.flatten()], dim=-1) + start
    rows.append(visual)
    nxt = int(visual.max()) + 1
    rows.append((torch.arange(after, dtype=torch.long) + nxt)[:, None].expand(after, 3))
    return torch.cat(rows, dim=0)


# --------------------------------------------------------------------------- xPos


def xpos_scale(
    positions: torch.Tensor, head_dim: int, *, gamma: float = 0.4, scale_base: float = 512.0
) -> torch.Tensor:
    """xPos factors ``zeta_i ** (p / scale_base)``, shape ``positions.shape + (head_dim // 2,)``.

    ``zeta_i = (2i / head_dim + gamma) / (1 + gamma)`` lies in ``(0, 1)``: it is smallest for the fastest pair.
    Queries are multiplied by ``zeta ** (p / B)`` and keys by ``zeta ** (-p / B)``, so their product carries
    ``zeta ** ((p_q - p_k) / B)``, an exponential decay in the offset (Sun et al., 2023).
    """
    positions = check_tensor("positions", positions, "position")
    _check_position_values("positions", positions)
    head_dim = check_positive_int("head_dim", head_dim)
    if head_dim % 2:
        raise ValueError(f"head_dim must be even, got {head_dim}")
    check_memory("head_dim", 3 * 8 * numel(positions.numel(), head_dim // 2), f"{positions.numel()} x {head_dim // 2} factors")
    gamma = check_positive_float("gamma", gamma)
    scale_base = check_positive_float("scale_base", scale_base)
    i = torch.arange(head_dim // 2, dtype=torch.float64, device=positions.device)
    zeta = (2 * i / head_dim + gamma) / (1 + gamma)
    return zeta ** (positions.to(torch.float64)[..., None] / scale_base)


def apply_xpos(
    x: torch.Tensor,
    positions: torch.Tensor,
    *,
    role: str,
    base: float = 10000.0,
    gamma: float = 0.4,
    scale_base: float = 512.0,
    layout: RopeLayout = "interleaved",
) -> torch.Tensor:
    """xPos: RoPE rotation of ``x`` (``(..., seq, head_dim)``) times the per-pair factor of :func:`xpos_scale`.

    ``role="query"`` multiplies by ``zeta ** (p / B)``, ``role="key"`` by ``zeta ** (-p / B)``. ``positions`` is
    ``(seq,)``. Large ``|p|`` overflow the factor in low precision; the reference code therefore centres the
    positions, which changes nothing in the scores (they depend on ``p_q - p_k`` only).
    """
    x = check_tensor("x", x, "floating", min_dim=2, finite=False)
    if x.shape[-1] == 0 or x.shape[-1] % 2:
        raise ValueError(f"x must have an even, non-zero last dimension (head_dim), got shape {tuple(x.shape)}")
    check_choice("role", role, ("query", "key"))
    positions = check_tensor("positions", positions, "position")
    if positions.dim() != 1 or positions.shape[0] != x.shape[-2]:
        raise ValueError(f"positions must have shape (seq,) = ({x.shape[-2]},), got {tuple(positions.shape)}")
    scale = xpos_scale(positions, x.shape[-1], gamma=gamma, scale_base=scale_base).to(x.device)
    if role == "key":
        scale = 1.0 / scale
    rotated = apply_rope(x.to(torch.float64), positions, base=base, layout=layout)
    per_dim = scale.repeat_interleave(2, dim=-1) if layout == "interleaved" else torch.cat([scale, scale], dim=-1)
    return (rotated * per_dim).to(x.dtype)


# --------------------------------------------------------------------------- decoupled RoPE (DeepSeek MLA)


def decoupled_rope_logits(
    q_nope: torch.Tensor,
    q_rope: torch.Tensor,
    k_nope: torch.Tensor,
    k_rope: torch.Tensor,
    *,
    positions: torch.Tensor | None = None,
    base: float = 10000.0,
    layout: RopeLayout = "interleaved",
) -> torch.Tensor:
    """Attention logits with DeepSeek's decoupled RoPE (multi-head latent attention, MLA).

    Each head's query and key have a position-free part (``*_nope``, width ``d_nope``) and a rotated part
    (``*_rope``, width ``d_rope``). The rotated key is computed once per token and *shared by all heads*, so it
    can be cached next to the compressed latent. The logit is

    .. math:: \\frac{q_\\text{nope} \\cdot k_\\text{nope} + (R_m q_\\text{rope}) \\cdot (R_n k_\\text{rope})}
              {\\sqrt{d_\\text{nope} + d_\\text{rope}}}.

    Args:
        q_nope: ``(batch, heads, seq, d_nope)``; q_rope: ``(batch, heads, seq, d_rope)``.
        k_nope: ``(batch, heads, seq, d_nope)``; k_rope: ``(batch, 1, seq, d_rope)``, the shared rotary key
            (its head dimension must be 1; it is broadcast over the heads on purpose).
        positions: ``(seq,)`` token positions (default ``0 ... seq-1``), used for queries and keys.
        base, layout: as in :func:`course_pe.rope.apply_rope`.

    Returns:
        ``(batch, heads, seq, seq)`` logits (no mask, no softmax).
    """
    for name, t in (("q_nope", q_nope), ("q_rope", q_rope), ("k_nope", k_nope), ("k_rope", k_rope)):
        check_tensor(name, t, "floating", dim=4, finite=False)
    if not q_nope.dtype == q_rope.dtype == k_nope.dtype == k_rope.dtype:
        raise TypeError(f"q_nope, q_rope, k_nope and k_rope must share one dtype, got {q_nope.dtype}, {q_rope.dtype}, "
                        f"{k_nope.dtype} and {k_rope.dtype}")
    if not q_nope.device == q_rope.device == k_nope.device == k_rope.device:
        raise ValueError(f"q_nope, q_rope, k_nope and k_rope must be on one device, got {q_nope.device}, "
                         f"{q_rope.device}, {k_nope.device} and {k_rope.device}")
    if q_nope.shape != k_nope.shape:
        raise ValueError(f"q_nope and k_nope must have equal shapes, got {tuple(q_nope.shape)} and {tuple(k_nope.shape)}")
    batch, heads, seq, _ = q_nope.shape
    if q_rope.shape[:3] != (batch, heads, seq):
        raise ValueError(f"q_rope must be (batch, heads, seq, d_rope) = ({batch}, {heads}, {seq}, .), got {tuple(q_rope.shape)}")
    if k_rope.shape != (batch, 1, seq, q_rope.shape[-1]):
        raise ValueError(
            f"k_rope must be (batch, 1, seq, d_rope) = ({batch}, 1, {seq}, {q_rope.shape[-1]}): one rotary key per "
            f"token shared by all heads; got {tuple(k_rope.shape)}"
        )
    check_memory("q_nope and k_nope", 4 * numel(batch, heads, seq, seq) * q_nope.dtype.itemsize,
                 f"logits of shape ({batch}, {heads}, {seq}, {seq})")
    scale = 1.0 / math.sqrt(q_nope.shape[-1] + q_rope.shape[-1])
    q_rot = apply_rope(q_rope, positions, base=base, layout=layout)
    k_rot = apply_rope(k_rope, positions, base=base, layout=layout)
    content = q_nope @ k_nope.transpose(-1, -2)
    position = q_rot @ k_rot.transpose(-1, -2)  # (batch, heads, seq, d) @ (batch, 1, d, seq)
    return (content + position) * scale
