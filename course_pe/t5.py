"""T5's bucketed relative position bias (Raffel et al., 2020, section 2.1).

Each head adds one learned scalar to every attention logit, chosen by a *bucket* of the relative
position ``key - query``. Small distances get a bucket each; larger ones share logarithmically
wider buckets up to ``max_distance``; everything farther saturates in the last bucket.

Sign convention: here (as in T5's own code) ``relative_position = key_position - query_position``,
so a key to the *left* of the query has a negative relative position. Some code bases use
``query - key``; their buckets for "past" and "future" are then swapped.

For a bidirectional encoder half of the buckets are used for keys to the right
(``relative_position > 0``) and half for the rest; a causal decoder uses all buckets for the past.
An odd ``num_buckets`` is accepted as T5's code and Hugging Face accept it: a bidirectional bias then uses
``2 * (num_buckets // 2)`` buckets and its last row is never read.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._validation import (
    check_bool,
    check_device,
    check_int,
    check_memory,
    check_nonnegative_int,
    check_positive_int,
    check_tensor,
    numel,
)

__all__ = ["T5RelativeBias", "t5_relative_position_bucket"]

_MAX_OFFSET = 2**53  # query positions stay exact integers in float64, as everywhere in course_pe


def t5_relative_position_bucket(
    relative_position: torch.Tensor,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    """Map relative positions (``key - query``, an integer tensor of any shape; not bool, not floating) to
    bucket ids.

    Returns a long tensor of the same shape with values in ``0 ... num_buckets - 1``.

    With ``n = num_buckets`` (halved, rounding down, when bidirectional) and ``e = n // 2`` exact buckets, a distance
    ``r = |relative_position|`` (or ``max(-relative_position, 0)`` when causal) maps to
    ``r`` if ``r < e``, else ``min(n - 1, e + floor(log(r / e) / log(max_distance / e) * (n - e)))``.
    Every int64 value is a valid relative position (``-2**63`` included: distances saturate in the last bucket).
    """
    check_tensor("relative_position", relative_position, "integer")
    bidirectional = check_bool("bidirectional", bidirectional)
    num_buckets = check_positive_int("num_buckets", num_buckets)
    max_distance = check_positive_int("max_distance", max_distance)
    n = num_buckets
    if bidirectional:
        n //= 2  # an odd count leaves the last bucket unused, as in T5's and Hugging Face's code
    max_exact = n // 2
    if max_exact < 1:
        raise ValueError(f"num_buckets={num_buckets} leaves no exact buckets; use at least {4 if bidirectional else 2}")
    if max_distance <= max_exact:
        half = "num_buckets // 2 // 2" if bidirectional else "num_buckets // 2"
        raise ValueError(f"max_distance ({max_distance}) must exceed the number of exact buckets ({max_exact} = {half} "
                         f"with num_buckets={num_buckets}); lower num_buckets or raise max_distance")

    # -2**63 has no int64 absolute value (abs() returns -2**63 again); one less saturates in the same bucket
    check_memory("relative_position", 10 * 8 * relative_position.numel(), "its buckets and their temporaries")
    relative_position = relative_position.long().clamp(min=-(2**63 - 1))
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        buckets = buckets + (relative_position > 0).long() * n  # keys to the right use the upper half
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)  # future keys collapse onto distance 0
    is_small = distance < max_exact
    # clamp(min=max_exact) keeps log() finite where the small branch is taken anyway
    ratio = distance.clamp(min=max_exact).float() / max_exact  # float32, as T5 computes it
    log_bucket = max_exact + (torch.log(ratio) / math.log(max_distance / max_exact) * (n - max_exact)).long()
    log_bucket = log_bucket.clamp(max=n - 1)
    return buckets + torch.where(is_small, distance, log_bucket)


class T5RelativeBias(nn.Module):
    """One learned scalar per (bucket, head), added to attention logits.

    ``forward(q_len, k_len)`` (integers >= 0) returns a bias of shape ``(1, num_heads, q_len, k_len)`` in the
    embedding's dtype. Queries are the last ``q_len`` positions of the ``k_len`` keys unless
    ``query_offset`` (an integer in ``0 ... 2**53``) is given; ``q_len > k_len`` then needs an explicit offset.
    """

    def __init__(
        self,
        num_heads: int,
        *,
        bidirectional: bool = True,
        num_buckets: int = 32,
        max_distance: int = 128,
    ) -> None:
        super().__init__()
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.bidirectional = check_bool("bidirectional", bidirectional)
        self.num_buckets = check_positive_int("num_buckets", num_buckets)
        self.max_distance = check_positive_int("max_distance", max_distance)
        check_memory("num_buckets and num_heads", 2 * 4 * numel(self.num_buckets, self.num_heads),
                     f"a {self.num_buckets} x {self.num_heads} table")
        # validate the combination once, up front
        t5_relative_position_bucket(
            torch.zeros(1, dtype=torch.long), bidirectional=self.bidirectional,
            num_buckets=self.num_buckets, max_distance=self.max_distance,
        )
        self.embedding = nn.Embedding(self.num_buckets, self.num_heads)
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(
        self,
        q_len: int,
        k_len: int,
        *,
        query_offset: int | None = None,
        device: torch.device | str | None = None,
    ) -> torch.Tensor:
        q_len = check_nonnegative_int("q_len", q_len)
        k_len = check_nonnegative_int("k_len", k_len)
        if query_offset is None:
            if q_len > k_len:
                raise ValueError(f"q_len ({q_len}) exceeds k_len ({k_len}); pass query_offset explicitly")
            query_offset = k_len - q_len
        else:
            query_offset = check_int("query_offset", query_offset, minimum=0, maximum=_MAX_OFFSET)
        device = check_device("device", device)
        check_memory("q_len and k_len", numel(q_len, k_len) * (12 * 8 + 2 * self.num_heads * 4),
                     f"a (1, {self.num_heads}, {q_len}, {k_len}) bias")
        device = self.embedding.weight.device if device is None else device
        query = torch.arange(q_len, device=device)[:, None] + query_offset
        key = torch.arange(k_len, device=device)[None, :]
        buckets = t5_relative_position_bucket(
            key - query, bidirectional=self.bidirectional,
            num_buckets=self.num_buckets, max_distance=self.max_distance,
        )
        return self.embedding(buckets).permute(2, 0, 1).unsqueeze(0)  # (1, heads, q, k)

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, bidirectional={self.bidirectional}, "
            f"num_buckets={self.num_buckets}, max_distance={self.max_distance}"
        )
