"""Relative position representations of Shaw, Uszkoreit and Vaswani (2018).

Each attention logit gets a learned vector for the *clipped* distance between key and query:

.. math::
    e_{ij} = \\frac{q_i \\cdot (k_j + a^K_{ij})}{\\sqrt{d}}, \\qquad
    z_i = \\sum_j \\alpha_{ij} (v_j + a^V_{ij}),

with ``a_{ij} = w_{clip(j - i, -K, K)}``: one table of ``2K + 1`` vectors for keys and one for
values, shared by all heads of a layer (the sharing of the paper's section 3.3 and of its big model; its base
model kept a pair per head, section 4.1). Distances are *key index minus query index*.

The indexing pitfall: ``j - i`` ranges over ``-K ... K``; used directly as a Python or torch index,
a negative offset silently wraps around to the end of the table. Shifting by ``K`` (the ``+ K``
below) maps it to ``0 ... 2K``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._validation import (
    check_bool,
    check_device,
    check_int,
    check_last_dim,
    check_memory,
    check_module_input,
    check_nonnegative_int,
    check_positive_int,
    check_qkv,
    check_same_device,
    check_tensor,
    numel,
)

__all__ = ["ShawRelativePositions", "shaw_attention", "shaw_relative_positions"]


def shaw_relative_positions(
    q_len: int,
    k_len: int,
    max_distance: int,
    *,
    device: torch.device | str | None = None,
    query_offset: int | None = None,
) -> torch.Tensor:
    """Table indices ``clip(j - i, -K, K) + K`` as a ``(q_len, k_len)`` long tensor.

    ``i`` indexes queries and ``j`` keys. By default queries are the *last* ``q_len`` positions of
    the keys (``query_offset = k_len - q_len``, the usual KV-cache convention), which reduces to
    ``i`` and ``j`` on the same axis when ``q_len == k_len``. ``q_len``, ``k_len``, ``max_distance`` and
    ``query_offset`` are integers >= 0 (empty sequences give an empty table); ``q_len > k_len`` needs an
    explicit ``query_offset``.
    """
    q_len = check_nonnegative_int("q_len", q_len)
    k_len = check_nonnegative_int("k_len", k_len)
    max_distance = check_int("max_distance", max_distance, minimum=0, maximum=2**53)  # a clip; int64 arithmetic
    device = check_device("device", device)
    if query_offset is None:
        if q_len > k_len:
            raise ValueError(f"q_len ({q_len}) exceeds k_len ({k_len}); pass query_offset explicitly")
        query_offset = k_len - q_len
    else:
        query_offset = check_int("query_offset", query_offset, minimum=0, maximum=2**53)
    check_memory("q_len and k_len", 3 * 8 * numel(q_len, k_len), f"a {q_len} x {k_len} index table")
    i = torch.arange(q_len, device=device)[:, None] + query_offset
    j = torch.arange(k_len, device=device)[None, :]
    return (j - i).clamp(-max_distance, max_distance) + max_distance


def shaw_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    rel_keys: torch.Tensor,
    rel_values: torch.Tensor | None,
    *,
    max_distance: int,
    mask: torch.Tensor | None = None,
    return_weights: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Attention with Shaw et al. relative key (and optionally value) embeddings.

    Args:
        q: ``(batch, heads, q_len, head_dim)``; k, v: ``(batch, heads, k_len, head_dim)``; floating, of one dtype
            and device (the tables are cast to it).
        rel_keys, rel_values: floating ``(2 * max_distance + 1, head_dim)`` tables (``rel_values`` may be None).
        max_distance: clipping distance ``K``, an integer >= 0.
        mask: optional bool tensor broadcastable to ``(batch, heads, q_len, k_len)``; True = keep.

    Computed without materialising a ``(q_len, k_len, head_dim)`` tensor: the query is dotted with
    all ``2K + 1`` table rows once and the result gathered, and the attention weights are summed
    into ``2K + 1`` buckets before multiplying by the value table.

    Returns ``(batch, heads, q_len, head_dim)``, and the weights if ``return_weights``. A query whose keys are all
    masked gets weights 0 and output 0, as in :func:`~course_pe.attention.attention` (not the NaN of a softmax over
    ``-inf`` alone).
    """
    check_qkv(q, k, v)
    max_distance = check_nonnegative_int("max_distance", max_distance)
    return_weights = check_bool("return_weights", return_weights)
    check_tensor("rel_keys", rel_keys, "floating")
    check_same_device("rel_keys", rel_keys, "q", q)
    if rel_values is not None:
        check_tensor("rel_values", rel_values, "floating")
        check_same_device("rel_values", rel_values, "q", q)
    if q.shape[-2] > k.shape[-2]:
        raise ValueError(f"q_len ({q.shape[-2]}) cannot exceed k_len ({k.shape[-2]})")
    if mask is not None:
        check_tensor("mask", mask, "bool")
        check_same_device("mask", mask, "q", q)
        try:
            ok = torch.broadcast_shapes(mask.shape, (*q.shape[:3], k.shape[-2])) == (*q.shape[:3], k.shape[-2])
        except RuntimeError:
            ok = False
        if not ok:
            raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to the logits")
    head_dim = q.shape[-1]
    num_rel = 2 * max_distance + 1
    if rel_keys.shape != (num_rel, head_dim):
        raise ValueError(
            f"rel_keys must have shape (2 * max_distance + 1, head_dim) = ({num_rel}, {head_dim}) for "
            f"max_distance={max_distance}, got {tuple(rel_keys.shape)}"
        )
    if rel_values is not None and rel_values.shape != (num_rel, v.shape[-1]):
        raise ValueError(
            f"rel_values must have shape (2 * max_distance + 1, d_v) = ({num_rel}, {v.shape[-1]}), got {tuple(rel_values.shape)}"
        )
    q_len, k_len = q.shape[-2], k.shape[-2]
    logits = numel(*q.shape[:3], k_len)
    check_memory("q and k", (8 * q.dtype.itemsize + 9) * logits + 8 * numel(q_len, k_len), f"{logits} logits")
    idx = shaw_relative_positions(q_len, k_len, max_distance, device=q.device)  # (q_len, k_len)
    content = q @ k.transpose(-2, -1)  # (b, h, q, k)
    rel_all = q @ rel_keys.to(q.dtype).T  # (b, h, q, 2K+1)
    position = rel_all.gather(-1, idx.expand(*rel_all.shape[:-2], q_len, k_len))
    scores = (content + position) / math.sqrt(head_dim)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
        # queries with no visible key: weights 0 and output 0 (as scaled_dot_product_attention), not NaN
        blind = torch.isneginf(scores).all(dim=-1, keepdim=True)
        weights = scores.masked_fill(blind, 0.0).softmax(dim=-1).masked_fill(blind, 0.0)
    else:
        weights = scores.softmax(dim=-1)
    out = weights @ v
    if rel_values is not None:
        buckets = torch.zeros(*weights.shape[:-1], num_rel, dtype=weights.dtype, device=weights.device)
        buckets.scatter_add_(-1, idx.expand_as(weights), weights)
        out = out + buckets @ rel_values.to(weights.dtype)
    return (out, weights) if return_weights else out


class ShawRelativePositions(nn.Module):
    """The two learned tables of Shaw et al., ``(2 * max_distance + 1, head_dim)`` each.

    ``forward(q, k, v, mask=None)`` runs :func:`shaw_attention` with these tables.
    """

    def __init__(self, head_dim: int, max_distance: int = 16, *, values: bool = True) -> None:
        super().__init__()
        self.head_dim = check_positive_int("head_dim", head_dim)
        self.max_distance = check_nonnegative_int("max_distance", max_distance)
        values = check_bool("values", values)
        n = 2 * self.max_distance + 1
        check_memory("max_distance and head_dim", 2 * 2 * 4 * numel(n, self.head_dim), f"two tables of {n} rows")
        self.rel_keys = nn.Parameter(torch.randn(n, self.head_dim) * self.head_dim**-0.5)
        self.rel_values = nn.Parameter(torch.randn(n, self.head_dim) * self.head_dim**-0.5) if values else None

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        *,
        mask: torch.Tensor | None = None,
        return_weights: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        check_last_dim("q", q, self.head_dim)
        check_module_input("q", q, self, same_dtype=False)  # the tables are cast to q's dtype
        return shaw_attention(
            q, k, v, self.rel_keys, self.rel_values,
            max_distance=self.max_distance, mask=mask, return_weights=return_weights,
        )

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, max_distance={self.max_distance}, values={self.rel_values is not None}"
