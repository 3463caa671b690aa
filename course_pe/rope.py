"""Rotary position embedding (RoPE; Su et al., RoFormer, 2021).

RoPE rotates each *pair* of query/key dimensions by an angle proportional to the position:
pair ``i`` of a vector at position ``p`` is turned counter-clockwise by ``p * theta_i``,

.. math:: (a, b) \\mapsto (a \\cos p\\theta_i - b \\sin p\\theta_i,\\; a \\sin p\\theta_i + b \\cos p\\theta_i).

Because rotations compose, ``<R_m q, R_n k> = <q, R_{n-m} k>``: the attention score of a rotated
query and key depends on the positions only through their offset. As matrices acting on column vectors,
``apply_rope(x)`` for a vector ``x`` (the last dimension) at position ``m`` is ``R_m x``; applied to
``torch.eye(d)``, whose *rows* are the basis vectors, it rotates each row and so returns ``R_m`` transposed.

Layouts (which dimensions form a pair; ``h = head_dim // 2``):

* ``"interleaved"``: pairs ``(2i, 2i + 1)``, as in RoFormer and Meta's original LLaMA code.
* ``"half"``: pairs ``(i, i + h)``, as in GPT-NeoX and Hugging Face's LLaMA (``rotate_half``).

They are the same map up to a fixed permutation of dimensions, the matrix ``P`` of
:func:`interleaved_to_half` (``interleaved_to_half(x) = P x``), so a checkpoint moves between them by
permuting the rows of its query and key projections (:func:`permute_qk_weights`).

Precision (``angle_dtype``). By default angles are formed in float64 from integer (or float32-or-wider)
positions, then cos and sin are rounded once. A bfloat16 tensor cannot even hold the position 4095 (it rounds to
4096), so positions are never taken in the input's dtype. Low-precision inputs are rotated in float32 and the
result cast back to the input's dtype. Measured against exact arithmetic (mpmath) for ``head_dim = 128`` and
base 10000, the largest angle error of the default is 8.5e-14 rad at position 2047 and 6.4e-11 rad at
position 10**6. Hugging Face transformers, Meta's Llama code and torchtune instead compute the frequencies,
the positions and their products in float32, where the spacing of numbers near an angle ``a`` is
``a * 2**-23``: their largest angle error is 5.8e-5 rad at position 2047, 3.2e-4 at 10**4, 5.2e-3 at 10**5
and 5.2e-2 at 10**6 (base 500000: 1.1e-4, 3.2e-4, 4.6e-3, 4.6e-2), and cos and sin move by up to about as
much. So the two agree to about 1e-4 within a few thousand positions and part beyond ~10**4, where float32 angles
have lost three or more decimal digits. ``angle_dtype=torch.float32`` (in :func:`apply_rope`,
:class:`RotaryEmbedding`, :func:`rope_cos_sin`, :func:`~course_pe.rope_scaling.rope_frequencies`) reproduces the
reference numerics instead: the frequencies as Hugging Face computes them for every rope type, the float32
angles of all three references, the cos and sin of Hugging Face and torchtune, and the rotation's arithmetic
(Hugging Face's ``x * cos + rotate_half(x) * sin`` in the half layout, torchtune's per-pair formula in the
interleaved one), bit for bit. Use it to compare with a checkpoint's stored activations; keep the default to
study RoPE itself or to run long contexts. (Meta's ``torch.polar`` computes cos and sin with another routine than
``torch.cos``: its tables differ from these in the last bit of about one entry in twenty.)
``tests/test_rope.py::test_documented_angle_errors`` measures the numbers of this paragraph again.

Positions are accepted up to ``|p| = 2**53`` (:data:`MAX_POSITION`), where float64 still tells neighbouring integers
apart, but the default angle ``p theta_i`` is one float64 product of ``p`` and a rounded ``theta_i``, within
``2 |p theta_i| 2**-53`` rad of the exact angle: the largest error (same measurement) is 5.2e-5 rad at
``p = 2**40`` and 0.51 rad at ``2**53 - 1``, so that far out the score of a rotated query and key depends on more
than their offset. No warning is given: such positions are far beyond any context a model is run at.
"""

from __future__ import annotations

import functools
import math
from typing import Literal

import torch
from torch import nn

from ._validation import (
    check_choice,
    check_dtype,
    check_even,
    check_float,
    check_index_range,
    check_int,
    check_memory,
    check_positive_float,
    check_positive_int,
    check_tensor,
    numel,
    require_values,
)
from .rope_scaling import DynamicNTKScaling, LongRoPEScaling, RopeScaling, _module_frequencies, rope_frequencies

RopeLayout = Literal["interleaved", "half"]
ROPE_LAYOUTS: tuple[str, ...] = ("interleaved", "half")

__all__ = [
    "ANGLE_DTYPES",
    "MAX_POSITION",
    "ROPE_LAYOUTS",
    "RotaryEmbedding",
    "apply_rope",
    "half_to_interleaved",
    "interleaved_to_half",
    "layout_permutation",
    "permute_qk_weights",
    "rope_cos_sin",
    "rotate_with_cos_sin",
]

_WIDE = (torch.float32, torch.float64)
# elements of x per block in the real-arithmetic path: 512 KiB of float32, small enough that a block's first-pass
# results are still in the L2 cache when the second kernel reads them (measured best of 2**14 ... 2**20 on the course
# machine for (1, 16, 4096, 128) and (4, 32, 1024, 64); see course_pe.benchmark)
_BLOCK_ELEMENTS = 1 << 17
#: Positions kept in a cos/sin cache (``RotaryEmbedding`` keeps ``max(max_positions, CACHE_LIMIT)``; ``apply_rope``
#: caches default tables only up to this length). Beyond it cos and sin are computed for the call and not kept.
CACHE_LIMIT = 8192
#: Largest ``|position|`` accepted anywhere in this module: float64 holds every integer up to ``2**53`` exactly, and
#: beyond it ``2**53 + 1`` rounds to ``2**53``, so two positions would get one rotation without a word. Exact
#: positions are not exact angles: ``p theta_i`` in float64 is off by up to ``2 |p theta_i| 2**-53`` rad (0.51 rad
#: measured at ``2**53 - 1``); see the module's precision note.
MAX_POSITION = 2**53
#: The two ways angles can be computed, exactly (float64, the default) or as the reference implementations do.
ANGLE_DTYPES: tuple[torch.dtype, ...] = (torch.float64, torch.float32)


def _check_offset(x: torch.Tensor, offset: object) -> int | torch.Tensor:
    """``offset`` as an ``int`` in ``[0, MAX_POSITION - seq]`` or a ``(batch,)`` integer tensor (4-D ``x`` only)."""
    seq = x.shape[-2]
    if isinstance(offset, torch.Tensor):
        check_tensor("offset", offset, "integer", dim=1)
        if x.dim() != 4 or offset.shape[0] != x.shape[0]:
            raise ValueError(
                f"a per-sequence offset must have shape (batch,) for x of shape (batch, heads, seq, head_dim); got "
                f"offset of shape {tuple(offset.shape)} and x of shape {tuple(x.shape)}"
            )
        check_index_range("offset", offset, 0, MAX_POSITION - seq + 1)
        return offset.long()
    return check_int("offset", offset, minimum=0, maximum=MAX_POSITION - seq)


def _default_positions(x: torch.Tensor, offset: int | torch.Tensor) -> torch.Tensor:
    """``offset, ..., offset + seq - 1`` as int64: ``(seq,)`` for an int offset, ``(batch, seq)`` for a tensor."""
    positions = torch.arange(x.shape[-2], device=x.device)
    if isinstance(offset, torch.Tensor):
        return offset.to(x.device)[:, None] + positions
    return positions + offset


def _check_position_values(name: str, positions: torch.Tensor) -> None:
    """Refuse positions with ``|p| > MAX_POSITION`` (float64 rounds them: ``2**53 + 1`` becomes ``2**53``)."""
    if positions.numel() == 0 or _transformed(positions):
        return
    require_values(name, positions)
    low, high = positions.min(), positions.max()
    if positions.dtype.is_floating_point:
        bad = float(low) < -MAX_POSITION or float(high) > MAX_POSITION
    else:
        bad = int(low) < -MAX_POSITION or int(high) > MAX_POSITION
    if bad:
        raise ValueError(
            f"{name} must lie in [-2**53, 2**53] (float64 holds every integer there exactly; beyond, neighbouring "
            f"positions round to the same angle), got values from {low.item()} to {high.item()}"
        )


def _resolve_positions(x: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
    """Positions as a float64 tensor of shape ``(seq,)`` or ``(batch, 1, seq)`` (for 4-D ``x``)."""
    seq = x.shape[-2]
    if positions is None:
        return torch.arange(seq, device=x.device, dtype=torch.float64)
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"positions must be a tensor or None, got {type(positions).__name__}")
    if positions.dtype in (torch.float16, torch.bfloat16):
        raise TypeError(
            f"positions in {positions.dtype} have already lost precision (bfloat16 rounds 4095 to 4096); "
            "pass integer or float32 positions"
        )
    check_tensor("positions", positions, "position")
    _check_position_values("positions", positions)
    if positions.dim() == 1:
        if positions.shape[0] != seq:
            raise ValueError(
                f"positions has length {positions.shape[0]} but x has seq = {seq} (shape {tuple(x.shape)})"
                + _layout_hint(x, positions.shape[0])
            )
        return positions.to(device=x.device, dtype=torch.float64)
    if positions.dim() == 2:
        if x.dim() != 4:
            raise ValueError(
                f"per-sequence positions of shape (batch, seq) need x of shape (batch, heads, seq, head_dim), "
                f"got x of shape {tuple(x.shape)}"
            )
        if positions.shape != (x.shape[0], seq):
            raise ValueError(
                f"positions must have shape ({x.shape[0]}, {seq}) for x of shape {tuple(x.shape)}, "
                f"got {tuple(positions.shape)}" + _layout_hint(x, positions.shape[-1])
            )
        return positions.to(device=x.device, dtype=torch.float64).unsqueeze(1)
    raise ValueError(f"positions must be None, (seq,) or (batch, seq); got shape {tuple(positions.shape)}")


def _layout_hint(x: torch.Tensor, length: int) -> str:
    """A hint for the Hugging Face layout ``(batch, seq, heads, head_dim)``, where the sequence is dim -3 ("" if
    ``x`` does not look like it)."""
    if x.dim() == 4 and x.shape[1] == length and x.shape[2] != length:
        return (
            "; x looks like (batch, seq, heads, head_dim), the layout of Hugging Face's projections before their "
            "transpose: pass x.transpose(1, 2) (course_pe rotates along dim -2, the sequence axis of "
            "(batch, heads, seq, head_dim)) and transpose the result back"
        )
    return ""


def _check_angle_dtype(angle_dtype: object) -> torch.dtype:
    check_dtype("angle_dtype", angle_dtype, "floating")
    if angle_dtype not in ANGLE_DTYPES:
        raise ValueError(f"angle_dtype must be torch.float64 (exact, the default) or torch.float32 (the reference "
                         f"numerics of Hugging Face, Meta and torchtune), got {angle_dtype}")
    return angle_dtype  # type: ignore[return-value]


def _cos_sin(
    positions: torch.Tensor,
    inv_freq: torch.Tensor,
    dtype: torch.dtype,
    attention_factor: float = 1.0,
    angle_dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`rope_cos_sin` without the checks (for positions this module made itself)."""
    angles = positions.to(angle_dtype)[..., None] * inv_freq.to(device=positions.device, dtype=angle_dtype)
    cos, sin = angles.cos(), angles.sin()
    if attention_factor != 1.0:
        cos, sin = cos * attention_factor, sin * attention_factor
    return cos.to(dtype), sin.to(dtype)


def rope_cos_sin(
    positions: torch.Tensor,
    inv_freq: torch.Tensor,
    *,
    dtype: torch.dtype = torch.float32,
    attention_factor: float = 1.0,
    angle_dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``cos`` and ``sin`` of ``positions[..., None] * inv_freq``, shape ``positions.shape + (h,)``.

    Angles are formed in ``angle_dtype`` and rounded once to ``dtype`` (a floating dtype). ``positions`` is an
    integer or float32/float64 tensor of any shape with finite values in ``[-2**53, 2**53]`` (:data:`MAX_POSITION`;
    beyond, float64 cannot tell neighbouring integers apart, so larger values are refused); ``inv_freq`` a finite
    floating ``(h,)`` tensor. Both outputs are multiplied by ``attention_factor`` (a finite number > 0; YaRN's
    temperature, 1.0 otherwise).

    ``angle_dtype``: ``torch.float64`` (the default) forms each angle ``p * theta`` in float64, within
    ``|p theta| * 2**-53`` of the product of the given numbers; ``torch.float32`` reproduces the reference numerics
    of Hugging Face transformers, Meta's Llama code and torchtune bit for bit: positions and ``inv_freq`` rounded to
    float32, the product, cos, sin and the attention factor in float32 (see the precision note of
    :mod:`course_pe.rope` for when the difference matters).
    """
    check_tensor("positions", positions, "position")
    _check_position_values("positions", positions)
    check_tensor("inv_freq", inv_freq, "floating", dim=1)
    require_values("inv_freq", inv_freq)  # the positions have values, so the angles need the frequencies' values
    check_dtype("dtype", dtype, "floating")
    attention_factor = check_float("attention_factor", attention_factor, minimum=0.0, strict_minimum=True)
    angle_dtype = _check_angle_dtype(angle_dtype)
    # the positions and the angles in float64, then cos and sin (float64 before the cast to dtype)
    check_memory("positions and inv_freq", 8 * (positions.numel() + 3 * numel(positions.numel(), inv_freq.numel())),
                 f"cos/sin of {positions.numel()} positions x {inv_freq.numel()} frequencies")
    return _cos_sin(positions, inv_freq, dtype, attention_factor, angle_dtype)


@functools.lru_cache(maxsize=16)
def _default_cos_sin(
    seq: int, rotary_dim: int, base: float, device: torch.device, dtype: torch.dtype, angle_dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin for positions ``0 ... seq - 1`` and default frequencies (read-only, shared)."""
    inv_freq, _ = rope_frequencies(rotary_dim, base=base, dtype=torch.float64, angle_dtype=angle_dtype)
    positions = torch.arange(seq, device=device, dtype=torch.float64)
    return _cos_sin(positions, inv_freq, dtype, 1.0, angle_dtype)


def _transformed(x: torch.Tensor) -> bool:
    """True inside ``torch.func`` transforms (``vmap``, ``grad``), whose tensors cannot be written with ``out=``."""
    check = getattr(torch._C._functorch, "is_functorch_wrapped_tensor", None)
    return bool(check is not None and check(x))


def rotate_with_cos_sin(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, layout: RopeLayout = "interleaved"
) -> torch.Tensor:
    """Rotate the pairs of ``x`` (``(..., seq, head_dim)``) by precomputed ``cos``/``sin``.

    ``cos`` and ``sin`` have shape ``(..., seq, head_dim // 2)`` broadcastable against ``x``'s leading
    dimensions (one value per pair, not duplicated). ``x``, ``cos`` and ``sin`` must be floating
    tensors (an integer ``x`` would be rounded back to integers). Float32 and float64 inputs are rotated
    in their own dtype; lower precisions are rotated in float32 and cast back. Returns a new tensor with
    ``x``'s dtype and device.
    """
    check_choice("layout", layout, ROPE_LAYOUTS)
    check_tensor("x", x, "floating", min_dim=2, finite=False)
    check_tensor("cos", cos, "floating", min_dim=2)
    check_tensor("sin", sin, "floating", min_dim=2)
    if not x.is_meta:  # a real x needs real tables (a meta x gives a meta result from any tables)
        require_values("cos", cos)
        require_values("sin", sin)
    head_dim = x.shape[-1]
    check_even("head_dim (last dimension of x)", head_dim)
    half = head_dim // 2
    if cos.shape[-1] != half or sin.shape != cos.shape:
        raise ValueError(
            f"cos and sin must both have last dimension head_dim // 2 = {half}; got {tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    if x.dim() < 2 or cos.dim() < 2:
        raise ValueError(
            f"x must be (..., seq, head_dim) and cos/sin (..., seq, head_dim // 2); got {tuple(x.shape)} and {tuple(cos.shape)}"
        )
    compute = x.dtype if x.dtype in _WIDE else torch.float32
    xc = x if x.dtype == compute else x.to(compute)
    cos, sin = cos.to(device=x.device, dtype=compute), sin.to(device=x.device, dtype=compute)

    if layout == "interleaved" and xc.is_contiguous():
        # One fused complex multiply: (a + ib)(cos + i sin). Reads x once, writes the result once.
        z = torch.view_as_complex(xc.view(*xc.shape[:-1], half, 2))
        out = torch.view_as_real(z * torch.complex(cos, sin)).view(xc.shape)
    elif ((torch.is_grad_enabled() and (xc.requires_grad or cos.requires_grad or sin.requires_grad))
          or _transformed(xc) or _transformed(cos) or _transformed(sin)):
        # Differentiable path (training, or inside vmap): the same arithmetic, out of place.
        if layout == "interleaved":
            a, b = xc[..., 0::2], xc[..., 1::2]
            out = torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)
        else:
            a, b = xc[..., :half], xc[..., half:]
            out = torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
    else:
        out = torch.empty_like(xc, memory_format=torch.contiguous_format)
        seq = xc.shape[-2]
        if out.numel() == 0:  # empty sequence, batch or heads: nothing to rotate
            return out if out.dtype == x.dtype else out.to(x.dtype)
        # Work on blocks of positions small enough (512 KiB) that each block's partial result is
        # still in cache when the second kernel reads it back; one block for small inputs.
        rows = max(1, min(seq, _BLOCK_ELEMENTS // max(1, xc.numel() // seq)))
        for start in range(0, seq, rows):
            block = slice(start, start + rows)
            xb, ob = xc[..., block, :], out[..., block, :]
            cb, sb = (cos, sin) if cos.shape[-2] == 1 else (cos[..., block, :], sin[..., block, :])
            if layout == "interleaved":
                a, b, out_a, out_b = xb[..., 0::2], xb[..., 1::2], ob[..., 0::2], ob[..., 1::2]
            else:
                a, b, out_a, out_b = xb[..., :half], xb[..., half:], ob[..., :half], ob[..., half:]
            # Four kernels on half-width views, writing straight into the output; no temporaries.
            torch.mul(a, cb, out=out_a)
            out_a.addcmul_(b, sb, value=-1.0)  # a cos - b sin
            torch.mul(b, cb, out=out_b)
            out_b.addcmul_(a, sb)  # b cos + a sin
    return out if out.dtype == x.dtype else out.to(x.dtype)


def _reference_rotation(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, layout: RopeLayout = "interleaved"
) -> torch.Tensor:
    """The rotation as the reference implementations write it, operation for operation, in ``x``'s dtype (with
    ``angle_dtype=torch.float32``): half layout ``x * cos + rotate_half(x) * sin`` (Hugging Face's
    ``apply_rotary_pos_emb``), interleaved ``(a cos - b sin, b cos + a sin)`` per pair (torchtune's arithmetic).
    Separate multiplications and additions round as theirs do; the fast paths may fuse or reorder them."""
    cos, sin = cos.to(device=x.device, dtype=x.dtype), sin.to(device=x.device, dtype=x.dtype)
    if layout == "half":
        half = x.shape[-1] // 2
        rotated_half = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * torch.cat([cos, cos], dim=-1) + rotated_half * torch.cat([sin, sin], dim=-1)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)


def apply_rope(
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    inv_freq: torch.Tensor | None = None,
    base: float = 10000.0,
    layout: RopeLayout = "interleaved",
    rotary_dim: int | None = None,
    offset: int | torch.Tensor = 0,
    angle_dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """Rotate queries or keys by their positions.

    Args:
        x: floating ``(..., seq, head_dim)``, e.g. ``(batch, heads, seq, head_dim)`` (float16, bfloat16,
            float32 or float64; integer tensors are refused). ``seq`` may be 0. The sequence is dim -2: a
            Hugging Face projection viewed as ``(batch, seq, heads, head_dim)`` must be transposed first.
        positions: ``None`` (``offset ... offset + seq - 1``), a ``(seq,)`` tensor, or ``(batch, seq)`` (one row per
            sequence) when ``x`` is ``(batch, heads, seq, head_dim)``. Integer or float32/64 (not bool),
            finite; any real value with ``|p| <= 2**53`` (negative, fractional, very large) is a valid position,
            rotated by a float64 angle within ``2 |p theta_i| 2**-53`` rad of the exact ``p theta_i`` (measured:
            0.51 rad at ``2**53 - 1``; see the module's precision note).
        inv_freq: ``(rotary_dim // 2,)`` frequencies; default ``base ** (-2i / rotary_dim)``
            (see :func:`~course_pe.rope_scaling.rope_frequencies` for scaled ones).
        base: used only when ``inv_freq`` is None.
        layout: ``"interleaved"`` (pairs ``2i, 2i+1``) or ``"half"`` (pairs ``i, i + rotary_dim/2``).
        rotary_dim: rotate only the first ``rotary_dim`` dimensions ("partial rotary", as in GPT-NeoX
            and GPT-J); the rest pass through unchanged. Default: all of ``head_dim``.
        offset: with ``positions=None``, the position of the first row of ``x``: an ``int >= 0``, or a ``(batch,)``
            integer tensor (one offset per sequence, for 4-D ``x``). During generation with a KV cache holding
            ``t`` keys, the new token sits at position ``t``: ``apply_rope(q_new, offset=t)`` uses the cos/sin of row
            ``t`` of the full-sequence call (the results agree to rounding). Must stay 0 when ``positions`` is given.
        angle_dtype: ``torch.float64`` (exact angles, the default) or ``torch.float32`` (the frequencies and angles
            of Hugging Face, Meta and torchtune, bit for bit); see :func:`rope_cos_sin` and the module's precision
            note.

    Returns:
        A new tensor of ``x``'s shape, dtype and device: row ``r`` of ``x`` (a vector along the last dimension) at
        position ``m`` becomes ``R_m x_r``. (So ``apply_rope(torch.eye(d), torch.full((d,), m))`` returns ``R_m``
        transposed: each *row* of the identity is rotated.)
    """
    check_choice("layout", layout, ROPE_LAYOUTS)
    check_tensor("x", x, "floating", finite=False)
    if x.dim() < 2:
        raise ValueError(f"x must be (..., seq, head_dim), got shape {tuple(x.shape)}")
    base = check_positive_float("base", base)
    head_dim = x.shape[-1]
    if rotary_dim is None:
        rotary_dim = check_even("head_dim (last dimension of x)", head_dim)
    else:
        rotary_dim = check_even("rotary_dim", rotary_dim)
        if rotary_dim > head_dim:
            raise ValueError(f"rotary_dim ({rotary_dim}) exceeds head_dim ({head_dim})")
    offset = _check_offset(x, offset)
    if positions is not None and not (isinstance(offset, int) and offset == 0):
        raise ValueError("offset applies to the default positions only; with explicit positions leave offset=0 "
                         "(add the offset to the positions instead)")
    angle_dtype = _check_angle_dtype(angle_dtype)
    table_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    if inv_freq is not None:
        check_tensor("inv_freq", inv_freq, "floating")
        if not x.is_meta:  # a real x is rotated by real angles (a meta x gives a meta result from any frequencies)
            require_values("inv_freq", inv_freq)
        if inv_freq.shape != (rotary_dim // 2,):
            raise ValueError(f"inv_freq must have shape ({rotary_dim // 2},), got {tuple(inv_freq.shape)}")
    default_rows = positions is None and isinstance(offset, int) and offset == 0
    if default_rows and inv_freq is None and x.shape[-2] <= CACHE_LIMIT:
        # the common case: positions 0 ... seq-1 and default frequencies; tables are cached
        cos, sin = _default_cos_sin(x.shape[-2], rotary_dim, float(base), x.device, table_dtype, angle_dtype)
    else:
        if inv_freq is None:
            inv_freq, _ = rope_frequencies(rotary_dim, base=base, dtype=torch.float64, angle_dtype=angle_dtype)
        if positions is None:
            pos = _default_positions(x, offset).to(torch.float64)
            pos = pos.unsqueeze(1) if pos.dim() == 2 else pos
        else:
            pos = _resolve_positions(x, positions)
        cos, sin = _cos_sin(pos, inv_freq, table_dtype, 1.0, angle_dtype)
    rotate = _reference_rotation if angle_dtype == torch.float32 else rotate_with_cos_sin
    if rotary_dim == head_dim:
        return rotate(x, cos, sin, layout=layout)
    rotated = rotate(x[..., :rotary_dim], cos, sin, layout=layout)
    return torch.cat([rotated, x[..., rotary_dim:]], dim=-1)


# --------------------------------------------------------------------------- layouts


def layout_permutation(head_dim: int, *, to: RopeLayout = "half") -> torch.Tensor:
    """Index tensor ``perm`` with ``y = x[..., perm]`` converting *to* the given layout.

    ``to="half"``: ``perm = [0, 2, 4, ..., 1, 3, 5, ...]`` (interleaved -> half);
    ``to="interleaved"``: its inverse. Returns an int64 tensor of shape ``(head_dim,)``.

    As a matrix acting on column vectors: ``P = torch.eye(head_dim)[layout_permutation(head_dim, to="half")]``
    (row ``r`` of ``P`` is the basis vector ``perm[r]``) gives ``interleaved_to_half(x) = P x``; the permutation
    ``to="interleaved"`` gives ``P^T = P^-1``.
    """
    head_dim = check_even("head_dim", head_dim)
    check_choice("to", to, ROPE_LAYOUTS)
    check_memory("head_dim", 5 * 8 * head_dim, f"a permutation of {head_dim} dimensions")
    half = head_dim // 2
    to_half = torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])
    if to == "half":
        return to_half
    inverse = torch.empty_like(to_half)
    inverse[to_half] = torch.arange(head_dim)
    assert inverse.shape == (2 * half,)
    return inverse


def _check_pairs(name: str, x: object) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(x).__name__}")
    if x.dim() == 0:
        raise ValueError(f"{name} must have a last dimension of pairs, got a 0-d tensor")
    check_even(f"last dimension of {name}", x.shape[-1])


def interleaved_to_half(x: torch.Tensor) -> torch.Tensor:
    """Reorder the last dimension from pairs ``(2i, 2i+1)`` to pairs ``(i, i + h)``: ``P x`` for every vector ``x``
    along the last dimension, with ``P = torch.eye(d)[layout_permutation(d, to="half")]``.

    ``x``: a tensor of any dtype with an even, non-zero last dimension. Applied to ``torch.eye(d)``, whose rows are
    the basis vectors, it permutes each row and so returns ``P^T``, not ``P``.
    """
    _check_pairs("x", x)
    return x[..., layout_permutation(x.shape[-1], to="half").to(x.device)]


def half_to_interleaved(x: torch.Tensor) -> torch.Tensor:
    """Reorder the last dimension from pairs ``(i, i + h)`` to pairs ``(2i, 2i+1)``: ``P^T x``, the inverse of
    :func:`interleaved_to_half` (``P`` as there).

    ``x``: a tensor of any dtype with an even, non-zero last dimension. Applied to ``torch.eye(d)`` it returns ``P``.
    """
    _check_pairs("x", x)
    return x[..., layout_permutation(x.shape[-1], to="interleaved").to(x.device)]


def permute_qk_weights(
    weight: torch.Tensor,
    num_heads: int,
    *,
    to: RopeLayout = "half",
) -> torch.Tensor:
    """Permute the output rows of a query or key projection so that a model trained with one RoPE
    layout gives identical attention scores with the other.

    ``weight`` is a floating ``nn.Linear`` weight ``(num_heads * head_dim, in_features)`` or a bias
    ``(num_heads * head_dim,)`` (other ranks are refused: only the first axis holds heads); heads are contiguous blocks of rows (the usual
    ``view(batch, seq, heads, head_dim)`` split). Within each head the rows are reordered by
    :func:`layout_permutation`. Apply it to *both* the query and the key projection (values and the
    output projection are untouched).

    Why it works: if ``P`` permutes dimensions so that ``rope_half(P v) = P rope_interleaved(v)`` for
    every ``v``, then ``<rope_half(P q), rope_half(P k)> = <P rope_i(q), P rope_i(k)> = <rope_i(q), rope_i(k)>``.
    """
    num_heads = check_positive_int("num_heads", num_heads)
    check_tensor("weight", weight, "floating", dim=(1, 2), finite=False)
    check_choice("to", to, ROPE_LAYOUTS)
    rows = weight.shape[0]
    if rows % num_heads:
        raise ValueError(f"weight has {rows} rows, not divisible by num_heads={num_heads}")
    head_dim = rows // num_heads
    check_even("head_dim (rows of weight per head)", head_dim)
    perm = layout_permutation(head_dim, to=to).to(weight.device)
    w = weight.reshape(num_heads, head_dim, *weight.shape[1:])
    return w[:, perm].reshape(weight.shape).clone()


# --------------------------------------------------------------------------- module


class RotaryEmbedding(nn.Module):
    """RoPE with cached cos/sin tables.

    ``forward(x, positions=None, *, offset=0)`` rotates ``x`` of shape ``(..., seq, head_dim)`` (call it on the
    queries and on the keys). ``x`` is a floating tensor; ``positions`` an integer (or integral
    float32/float64) tensor of positions in ``0 ... 2**53``, of shape ``(seq,)`` or ``(batch, seq)``; without
    positions the rows sit at ``offset, offset + 1, ...`` (generation with a KV cache: see :meth:`forward`).
    The float64 cos/sin cache covers positions ``0 ... cached_positions - 1`` and is
    held in non-persistent buffers (recomputable, so not saved in ``state_dict``); it grows (by powers of
    two) when a larger position is requested, but never beyond ``cache_limit = max(max_positions,
    CACHE_LIMIT)`` positions: a call that needs a position past that limit gets cos and sin computed for
    its own positions only, so memory follows the number of positions, not their values. The cache is
    rebuilt on the input's device if the module was not moved.

    With :class:`~course_pe.rope_scaling.DynamicNTKScaling` the frequencies depend on the current length ``L'``
    (``max(positions) + 1``, or the ``seq_len`` given to :meth:`forward`/:meth:`cos_sin`): an input longer than
    ``original_max_positions`` gets frequencies stretched for its own length, and a later short input gets the
    original ones back; each call depends on that call only. :class:`~course_pe.rope_scaling.LongRoPEScaling`
    switches the same way between its short and long factors, as Hugging Face's ``dynamic_rope_update`` does.

    **Dynamic NTK over a series of calls differs from Hugging Face's module.** transformers 5.23 keeps the
    frequencies of the longest input so far (its ``max_seq_len_cached``) and drops them only when an input shorter
    than the original length arrives: after a call of length 1000 (original 512), a call of length 800 is rotated
    with the frequencies of 1000, here with those of 800 (the formula's ``L'``). With ``angle_dtype=torch.float32``
    every single call, and every series whose lengths never fall between the original length and an earlier, longer
    one, equals transformers bit for bit; to reproduce any series, keep its longest length yourself and pass it::

        longest = original                          # transformers' max_seq_len_cached, at the start
        for q in inputs:                            # before each call of length L = max(positions) + 1
            L = q.shape[-2]
            longest = L if L > longest else (original if L < original else longest)
            q_rotated = rotary(q, seq_len=longest)

    (``tests/test_rope_scaling_hf.py`` checks this recipe against ``LlamaRotaryEmbedding`` bit for bit.)

    Args:
        head_dim: width of a query/key head.
        base: frequency base.
        max_positions: initial cache length.
        scaling: optional scaling (see :mod:`course_pe.rope_scaling`).
        layout: ``"interleaved"`` or ``"half"``.
        rotary_dim: rotate only the first ``rotary_dim`` dimensions (default all).
        angle_dtype: ``torch.float64`` (exact angles, the default) or ``torch.float32`` (frequencies, angles, cos
            and sin computed as Hugging Face transformers computes them for the same current length, bit for bit;
            the cached tables then hold those float32 values; for dynamic NTK over a series of calls see above).
            See the module's precision note for when the difference matters.
    """

    inv_freq: torch.Tensor
    cos_cached: torch.Tensor
    sin_cached: torch.Tensor

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        max_positions: int = 2048,
        scaling: RopeScaling | None = None,
        layout: RopeLayout = "interleaved",
        rotary_dim: int | None = None,
        angle_dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__()
        self.head_dim = check_even("head_dim", head_dim)
        self.angle_dtype = _check_angle_dtype(angle_dtype)
        self.rotary_dim = self.head_dim if rotary_dim is None else check_even("rotary_dim", rotary_dim)
        if self.rotary_dim > self.head_dim:
            raise ValueError(f"rotary_dim ({self.rotary_dim}) exceeds head_dim ({self.head_dim})")
        self.base = check_positive_float("base", base)
        self.layout = check_choice("layout", layout, ROPE_LAYOUTS)
        self.scaling = scaling
        max_positions = check_positive_int("max_positions", max_positions)
        # float64 positions, angles, cos and sin (and their float32 angles in reference mode)
        check_memory("head_dim (rotary_dim) and max_positions", 5 * 8 * max_positions * (self.rotary_dim // 2 + 1),
                     f"a cos/sin cache of {max_positions} positions x {self.rotary_dim // 2} pairs")
        self.cache_limit = max(max_positions, CACHE_LIMIT)
        inv_freq, factor = rope_frequencies(
            self.rotary_dim, base=self.base, scaling=scaling, dtype=torch.float64, angle_dtype=self.angle_dtype
        )
        self.attention_factor = factor
        self._freq_seq_len: int | None = None  # the seq_len the current inv_freq was built for (dynamic NTK)
        # float64 master copy (a plain attribute, so Module.to(dtype) cannot round it); the buffer is the
        # float32 view that checkpoints and other libraries expose.
        self._inv_freq64 = inv_freq
        self.register_buffer("inv_freq", inv_freq.to(torch.float32), persistent=False)
        self.register_buffer("cos_cached", torch.empty(0), persistent=False)
        self.register_buffer("sin_cached", torch.empty(0), persistent=False)
        self._build_cache(max_positions, self.inv_freq.device)

    @property
    def cached_positions(self) -> int:
        return int(self.cos_cached.shape[0])

    def _build_cache(self, length: int, device: torch.device) -> None:
        positions = torch.arange(length, device=device, dtype=torch.float64)
        self.cos_cached, self.sin_cached = _cos_sin(
            positions, self._inv_freq64.to(device), torch.float64, self.attention_factor, self.angle_dtype
        )

    def _wanted_length(self, seq_len: int) -> int | None:
        """The length the frequencies of a length-dependent scaling are built for (``None``: the original ones)."""
        if not isinstance(self.scaling, (DynamicNTKScaling, LongRoPEScaling)):
            return None
        original = self.scaling.original_max_positions
        if seq_len <= original:
            return None
        # LongRoPE: every length beyond the original gives the same (long) factors
        return original + 1 if isinstance(self.scaling, LongRoPEScaling) else seq_len

    def _update_frequencies(self, seq_len: int, device: torch.device) -> None:
        """Length-dependent scalings: dynamic NTK recomputes its frequencies for every length beyond the original
        maximum; LongRoPE switches from its short to its long factors there (and back for a shorter input)."""
        wanted = self._wanted_length(seq_len)
        if wanted == self._freq_seq_len:
            return
        inv_freq, _ = _module_frequencies(self.rotary_dim, self.base, self.scaling, wanted, self.angle_dtype)
        self._inv_freq64 = inv_freq
        self.inv_freq = inv_freq.to(device=device, dtype=torch.float32)
        self._freq_seq_len = wanted
        self._build_cache(min(max(seq_len, self.cached_positions), self.cache_limit), device)

    #: Attributes whose effect lives in the cos/sin buffers. :func:`~course_pe.training.train_seeds` lets them differ
    #: between the models it trains together (their buffers are then stacked, one per model), as long as no call has
    #: to rebuild the buffers from them (see :meth:`_cos_sin_transformed`).
    _seed_stackable_attributes = frozenset({"scaling", "attention_factor", "_inv_freq64", "_freq_seq_len"})

    def _cos_sin_transformed(
        self, positions: torch.Tensor, needed: int, length: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin inside ``torch.func`` transforms (``train_seeds``' ``vmap`` over models), where the module's state
        cannot be updated: the buffers are those of the call (one per model where the models differ), and every
        attribute is ``models[0]``'s. A call that needs new frequencies or positions beyond the cache computes them
        for itself when the buffers are shared (the models agree); where they differ per model it would compute
        every model's from ``models[0]``'s scaling, so it is refused."""
        wanted = self._wanted_length(length)
        if wanted == self._freq_seq_len and needed <= self.cached_positions:
            return self.cos_cached[positions], self.sin_cached[positions]
        if _transformed(self.cos_cached):
            reason = (f"new frequencies (length {length}, scaling {self.scaling!r})" if wanted != self._freq_seq_len
                      else f"positions up to {needed - 1}, beyond the {self.cached_positions} cached")
            raise ValueError(
                f"RotaryEmbedding: the models trained together have different cos/sin caches (different RoPE "
                f"scalings), and this input needs {reason}, which would be computed from the first model's scaling "
                "for every model. Give every model a cache that covers the input (max_positions >= the input "
                "length) and a scaling that does not depend on the length, or train the models separately"
            )
        inv_freq = self._inv_freq64
        if wanted != self._freq_seq_len:
            inv_freq, _ = _module_frequencies(self.rotary_dim, self.base, self.scaling, wanted, self.angle_dtype)
        return _cos_sin(positions, inv_freq.to(positions.device), torch.float64, self.attention_factor,
                        self.angle_dtype)

    def cos_sin(self, positions: torch.Tensor, *, seq_len: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """float64 ``cos`` and ``sin`` at ``positions``, shape ``positions.shape + (rotary_dim // 2,)``.

        ``positions``: integer tensor (uint8 included; or float32/float64 holding whole numbers) of values in
        ``0 ... 2**53``. ``seq_len`` (dynamic NTK and LongRoPE only): the current length, an integer in
        ``1 ... 2**53 + 1``, default ``max(positions) + 1``.
        """
        check_tensor("positions", positions, "position")
        return self._cos_sin(positions, seq_len,
                             transformed=_transformed(positions) or _transformed(self.cos_cached))

    def _cos_sin(
        self, positions: torch.Tensor, seq_len: int | None, *, transformed: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        check_tensor("positions", positions, "position")
        _check_position_values("positions", positions)
        if positions.dtype.is_floating_point and not torch.equal(positions, positions.round()):
            raise ValueError("RotaryEmbedding caches integer positions; use apply_rope for fractional ones")
        check_index_range("positions", positions, 0, None)
        # int64 for indexing: a uint8 index tensor is read by PyTorch as a boolean mask, not as positions
        positions = positions.long()
        if seq_len is not None:
            seq_len = check_int("seq_len", seq_len, minimum=1, maximum=MAX_POSITION + 1)
        needed = int(positions.max()) + 1 if positions.numel() else 1
        # the result: two float64 tables of positions x pairs (and the angles they are computed from)
        check_memory("positions", 4 * 8 * numel(positions.numel(), self.rotary_dim // 2 + 1),
                     f"cos/sin of {positions.numel()} positions x {self.rotary_dim // 2} pairs")
        device = positions.device
        if transformed:
            return self._cos_sin_transformed(positions, needed, seq_len if seq_len is not None else needed)
        self._update_frequencies(seq_len if seq_len is not None else needed, device)
        if needed > self.cache_limit:
            # past the bounded cache: compute cos/sin for these positions only (memory ~ positions.numel())
            return _cos_sin(positions, self._inv_freq64.to(device), torch.float64, self.attention_factor,
                            self.angle_dtype)
        stale = self.cos_cached.device != device or self.cos_cached.dtype != torch.float64  # e.g. after .half()
        if needed > self.cached_positions or stale:
            length = max(needed, self.cached_positions)
            self._build_cache(min(1 << math.ceil(math.log2(length)), self.cache_limit), device)
        return self.cos_cached[positions], self.sin_cached[positions]

    def forward(
        self,
        x: torch.Tensor,
        positions: torch.Tensor | None = None,
        *,
        offset: int | torch.Tensor = 0,
        seq_len: int | None = None,
    ) -> torch.Tensor:
        """Rotate floating ``x`` (``(..., seq, head_dim)``) at ``positions`` (see the class docstring).

        ``offset`` (with ``positions=None``): the position of the first row, an ``int >= 0`` or a ``(batch,)``
        integer tensor for 4-D ``x``. With a KV cache of ``t`` keys, ``rotary(q_new, offset=t)`` rotates the new
        token by the same cos/sin row as the full-sequence call rotates row ``t`` (the rotated values agree to
        rounding; for dynamic NTK and LongRoPE the current length is ``offset + seq``).

        ``seq_len`` (dynamic NTK and LongRoPE only; an integer in ``1 ... 2**53 + 1``): the length whose frequencies
        to use, default ``max(positions) + 1``; the class docstring shows how to reproduce Hugging Face's module
        over a series of calls with it.
        """
        check_tensor("x", x, "floating", min_dim=2, finite=False)
        if x.is_meta:
            raise ValueError("x is a meta tensor: RotaryEmbedding reads rows of its cos/sin cache on x's device, "
                             "which needs a real device (apply_rope works on meta tensors)")
        if x.shape[-1] != self.head_dim:
            raise ValueError(f"x must have last dimension head_dim={self.head_dim}, got shape {tuple(x.shape)}")
        offset = _check_offset(x, offset)
        if positions is None:
            positions = _default_positions(x, offset)
        else:
            if not (isinstance(offset, int) and offset == 0):
                raise ValueError("offset applies to the default positions only; with explicit positions leave "
                                 "offset=0 (add the offset to the positions instead)")
            _resolve_positions(x, positions)  # shape and range checks only
            positions = positions.to(x.device)
        # inside torch.func transforms: x may be shared by every model (in_dims None) while the buffers are stacked,
        # so the buffers and positions are looked at too, not x alone
        transformed = _transformed(x) or _transformed(positions) or _transformed(self.cos_cached)
        cos, sin = self._cos_sin(positions, seq_len, transformed=transformed)
        if positions.dim() == 2:  # (batch, seq, h) -> (batch, 1, seq, h)
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        rotate = _reference_rotation if self.angle_dtype == torch.float32 else rotate_with_cos_sin
        if self.rotary_dim == self.head_dim:
            return rotate(x, cos, sin, layout=self.layout)
        rotated = rotate(x[..., : self.rotary_dim], cos, sin, layout=self.layout)
        return torch.cat([rotated, x[..., self.rotary_dim :]], dim=-1)

    def extra_repr(self) -> str:
        return (
            f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, base={self.base}, "
            f"layout={self.layout!r}, scaling={self.scaling!r}"
            + (f", angle_dtype={self.angle_dtype}" if self.angle_dtype != torch.float64 else "")
        )
