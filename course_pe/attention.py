"""Multi-head self-attention with pluggable position handling.

One module, :class:`MultiHeadAttention`, covers every way the course injects position *inside*
attention:

===========  ===================================================================================
``"none"``   plain scaled dot-product attention (absolute encodings, if any, were added to the
             input by the model)
``"rope"``   queries and keys rotated by :class:`~course_pe.rope.RotaryEmbedding` (either layout,
             any scaling)
``"shaw"``   Shaw et al. relative key and value embeddings (:mod:`course_pe.shaw`), one pair of tables per
             layer shared by its heads, as in the paper
``"t5"``     T5 bucketed scalar bias per head (:mod:`course_pe.t5`); unlike T5, each layer has its own
             table (T5 shares one per stack) and the logits are divided by ``sqrt(head_dim)`` (T5's are not)
``"alibi"``  ALiBi linear distance penalty (:mod:`course_pe.alibi`)
===========  ===================================================================================

Shapes: inputs are batch-first ``(batch, seq, d_model)``; internally heads are
``(batch, heads, seq, head_dim)``; attention weights are ``(batch, heads, q_len, k_len)``.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from ._validation import (
    check_bool,
    check_choice,
    check_device,
    check_even,
    check_last_dim,
    check_memory,
    check_module_input,
    check_nonnegative_int,
    check_positive_float,
    check_positive_int,
    check_probability,
    check_qkv,
    check_same_device,
    check_tensor,
    numel,
)
from .alibi import alibi_bias, alibi_slopes
from .rope import RopeLayout, RotaryEmbedding
from .rope_scaling import RopeScaling
from .shaw import ShawRelativePositions
from .t5 import T5RelativeBias

PositionMethod = Literal["none", "rope", "shaw", "t5", "alibi"]
ATTENTION_POSITIONS: tuple[str, ...] = ("none", "rope", "shaw", "t5", "alibi")

__all__ = ["ATTENTION_POSITIONS", "MultiHeadAttention", "attention", "causal_mask"]


def causal_mask(q_len: int, k_len: int | None = None, *, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean ``(q_len, k_len)`` mask, True where query ``i`` may see key ``j`` (``j <= i``).

    Queries are the last ``q_len`` of the ``k_len`` positions, so ``0 <= q_len <= k_len`` (integers).
    """
    q_len = check_nonnegative_int("q_len", q_len)
    k_len = q_len if k_len is None else check_nonnegative_int("k_len", k_len)
    if q_len > k_len:
        raise ValueError(f"q_len ({q_len}) cannot exceed k_len ({k_len}): queries are the last q_len positions")
    device = check_device("device", device)
    check_memory("q_len and k_len", numel(q_len, k_len) + 8 * (q_len + k_len), f"a {q_len} x {k_len} mask")
    offset = k_len - q_len
    i = torch.arange(q_len, device=device)[:, None] + offset
    j = torch.arange(k_len, device=device)[None, :]
    return j <= i


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    causal: bool = False,
    dropout: float = 0.0,
    training: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention that also returns its weights.

    Args:
        q: ``(batch, heads, q_len, head_dim)``; k, v: ``(batch, heads, k_len, head_dim)``; floating
            tensors of one dtype (float16, bfloat16, float32 or float64).
        bias: floating, added to the logits, broadcastable to ``(batch, heads, q_len, k_len)``; cast to the logits'
            dtype first (a float64 bias does not turn float32 logits into float64 ones).
        mask: bool tensor, broadcastable to the logits; True = may attend.
        causal: also apply :func:`causal_mask` (needs ``q_len <= k_len``).
        dropout: probability in ``[0, 1)``, applied to the weights only when ``training``.

    Returns ``(output (batch, heads, q_len, head_dim), weights (batch, heads, q_len, k_len))``.

    A query that may attend to no key at all (every key masked, by ``mask``, ``causal`` or a bias of ``-inf``: a
    left-padded query under a causal mask that hides the padding, for example) gets weights 0 and output 0, as
    PyTorch's ``scaled_dot_product_attention`` gives it, and no gradient; the softmax of a row of ``-inf`` alone
    would be NaN, and a NaN row spreads to every query of the next layer (through ``0 * NaN`` in ``weights @ v``).
    """
    check_qkv(q, k, v)
    causal = check_bool("causal", causal)
    dropout = check_probability("dropout", dropout)
    training = check_bool("training", training)
    logits_shape = (*q.shape[:3], k.shape[-2])
    # scores, the masked copies, the weights (and their dropout): about six logit-sized tensors, and a bool one
    check_memory("q and k", (6 * q.dtype.itemsize + 1) * numel(*logits_shape), f"logits of shape {logits_shape}")
    if bias is not None:
        check_tensor("bias", bias, "floating", finite=False)
        _check_broadcast("bias", bias, logits_shape)
        check_same_device("bias", bias, "q", q)
    if mask is not None:
        check_tensor("mask", mask, "bool")
        _check_broadcast("mask", mask, logits_shape)
        check_same_device("mask", mask, "q", q)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias.to(scores.dtype)  # an additive bias in the logits' dtype (not a type promotion)
    if causal:
        scores = scores.masked_fill(~causal_mask(q.shape[-2], k.shape[-2], device=q.device), float("-inf"))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    if mask is not None or causal or bias is not None:
        # queries with no visible key: softmax over zeros (finite, no NaN gradient), then weights 0 (as SDPA)
        blind = torch.isneginf(scores).all(dim=-1, keepdim=True)
        weights = scores.masked_fill(blind, 0.0).softmax(dim=-1).masked_fill(blind, 0.0)
    else:
        weights = scores.softmax(dim=-1)
    if dropout > 0 and training:
        weights = F.dropout(weights, p=dropout)
    return weights @ v, weights


def _check_broadcast(name: str, t: torch.Tensor, shape: tuple[int, ...]) -> None:
    """Raise unless ``t`` broadcasts to exactly ``shape`` (no growth of the logits)."""
    try:
        result = torch.broadcast_shapes(t.shape, shape)
    except RuntimeError:
        result = None
    if result != torch.Size(shape):
        raise ValueError(f"{name} of shape {tuple(t.shape)} does not broadcast to the logits' shape {shape}")


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention; ``position`` chooses how order enters the logits.

    Args:
        d_model: model width; must be divisible by ``num_heads``.
        num_heads: number of heads.
        position: ``"none"``, ``"rope"``, ``"shaw"``, ``"t5"`` or ``"alibi"``.
        causal: mask future keys (decoder self-attention).
        dropout: dropout on the attention weights (training only).
        rope_base, rope_layout, rope_scaling, rope_max_positions: passed to
            :class:`~course_pe.rope.RotaryEmbedding`.
        shaw_max_distance: clipping distance ``K`` of Shaw et al.
        t5_num_buckets, t5_max_distance: T5 bucket parameters.

    ``forward(x, positions=None, mask=None, return_weights=False)``: ``x`` is a floating
    ``(batch, seq, d_model)`` tensor; ``positions`` (RoPE only) as in :class:`~course_pe.rope.RotaryEmbedding`;
    ``mask`` a bool tensor broadcastable to ``(batch, heads, seq, seq)``. Returns ``(batch, seq, d_model)``
    and, if asked, the weights ``(batch, heads, seq, seq)``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        position: PositionMethod = "none",
        causal: bool = False,
        dropout: float = 0.0,
        bias: bool = True,
        rope_base: float = 10000.0,
        rope_layout: RopeLayout = "interleaved",
        rope_scaling: RopeScaling | None = None,
        rope_max_positions: int = 2048,
        shaw_max_distance: int = 16,
        t5_num_buckets: int = 32,
        t5_max_distance: int = 128,
    ) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.num_heads = check_positive_int("num_heads", num_heads)
        d_model, num_heads = self.d_model, self.num_heads  # checked Python ints from here on
        if d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        check_memory("d_model", 2 * 4 * (4 * numel(d_model, d_model) + 4 * d_model), "four d_model x d_model projections")
        self.head_dim = d_model // num_heads
        self.position = check_choice("position", position, ATTENTION_POSITIONS)
        self.causal = check_bool("causal", causal)
        self.dropout = check_probability("dropout", dropout)
        bias = check_bool("bias", bias)
        # every argument is checked, also those the chosen position method does not use
        check_positive_float("rope_base", rope_base)
        check_choice("rope_layout", rope_layout, ("interleaved", "half"))
        check_positive_int("rope_max_positions", rope_max_positions)
        check_nonnegative_int("shaw_max_distance", shaw_max_distance)
        check_positive_int("t5_num_buckets", t5_num_buckets)
        check_positive_int("t5_max_distance", t5_max_distance)
        # the tables the chosen method builds, checked under this module's argument names
        if position == "rope":
            check_memory("rope_max_positions", 4 * 8 * numel(rope_max_positions, self.head_dim),
                         f"a cos/sin cache of {rope_max_positions} positions")
        elif position == "shaw":
            check_memory("shaw_max_distance", 4 * 4 * numel(2 * shaw_max_distance + 1, self.head_dim),
                         f"two tables of {2 * shaw_max_distance + 1} rows")
        elif position == "t5":
            check_memory("t5_num_buckets", 2 * 4 * numel(t5_num_buckets, num_heads), f"a table of {t5_num_buckets} rows")
        if position == "rope":
            check_even("head_dim (d_model // num_heads) for RoPE", self.head_dim)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.rotary: RotaryEmbedding | None = None
        self.shaw: ShawRelativePositions | None = None
        self.t5: T5RelativeBias | None = None
        if position == "rope":
            self.rotary = RotaryEmbedding(
                self.head_dim, base=rope_base, layout=rope_layout,
                scaling=rope_scaling, max_positions=rope_max_positions,
            )
        elif position == "shaw":
            self.shaw = ShawRelativePositions(self.head_dim, shaw_max_distance)
        elif position == "t5":
            self.t5 = T5RelativeBias(
                num_heads, bidirectional=not causal, num_buckets=t5_num_buckets, max_distance=t5_max_distance
            )
        elif position == "alibi":
            alibi_slopes(num_heads)  # validates num_heads

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        b, s, _ = t.shape
        return t.view(b, s, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(
        self,
        x: torch.Tensor,
        *,
        positions: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        return_weights: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        check_tensor("x", x, "floating", finite=False)
        if x.dim() != 3:
            raise ValueError(f"x must be (batch, seq, d_model), got shape {tuple(x.shape)}")
        check_last_dim("x", x, self.d_model)
        check_module_input("x", x, self)
        return_weights = check_bool("return_weights", return_weights)
        if mask is not None:
            check_tensor("mask", mask, "bool")
            _check_broadcast("mask", mask, (x.shape[0], self.num_heads, x.shape[1], x.shape[1]))
            check_same_device("mask", mask, "x", x)
        if positions is not None and self.position != "rope":
            raise ValueError(f"positions are only used by RoPE attention, not position={self.position!r}")
        b, s, _ = x.shape
        q, k, v = self._split(self.q_proj(x)), self._split(self.k_proj(x)), self._split(self.v_proj(x))
        drop = self.dropout if self.training else 0.0
        full_mask = mask
        if self.causal:
            cm = causal_mask(s, device=x.device)
            full_mask = cm if full_mask is None else (full_mask & cm)

        if self.shaw is not None:
            out, weights = self.shaw(q, k, v, mask=full_mask, return_weights=True)
        else:
            bias = None
            if self.rotary is not None:
                q, k = self.rotary(q, positions), self.rotary(k, positions)
            elif self.t5 is not None:
                bias = self.t5(s, s, device=x.device)
            elif self.position == "alibi":
                bias = alibi_bias(self.num_heads, s, s, causal=self.causal, dtype=q.dtype, device=x.device)
            out, weights = attention(q, k, v, bias=bias, mask=full_mask, dropout=drop, training=self.training)
        out = self.out_proj(out.transpose(1, 2).reshape(b, s, self.d_model))
        return (out, weights) if return_weights else out

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, num_heads={self.num_heads}, position={self.position!r}, causal={self.causal}"
