"""ALiBi: attention with linear biases (Press, Smith and Lewis, 2022).

No position vectors at all: head ``h`` subtracts ``m_h * (i - j)`` from the logit of query ``i``
and key ``j``, a penalty growing linearly with distance. The slopes ``m_h`` are a fixed geometric
sequence.

Slopes. For a power of two ``n`` heads, ``m_h = 2**(-8 (h + 1) / n)``, ``h = 0 ... n - 1``: the
sequence starts at ``2**(-8/n)`` and that is also its ratio. For other head counts Press et al.
take all ``2**floor(log2 n)`` slopes of the nearest lower power of two, then every other slope of
the next power of two (``2 * 2**floor(log2 n)`` heads) until there are ``n``.

Why a row-constant offset is harmless: softmax is unchanged when the same number is added to
every logit of a row, so ``-m (i - j)`` and ``m j`` give identical causal attention weights.
"""

from __future__ import annotations

import math

import torch

from ._validation import (
    check_bool,
    check_device,
    check_dtype,
    check_int,
    check_memory,
    check_nonnegative_int,
    check_positive_int,
    numel,
)

__all__ = ["MAX_HEADS", "alibi_bias", "alibi_slopes"]

#: Most heads :func:`alibi_slopes` computes: the slopes are Python floats computed one by one, exactly as in Press et
#: al.'s code (about a second for this many); more would run for minutes while the largest models have a few hundred.
MAX_HEADS = 2**20


def _power_of_two_slopes(n: int) -> list[float]:
    return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]


def alibi_slopes(num_heads: int, *, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The ``(num_heads,)`` ALiBi slopes, computed in float64 and cast to ``dtype`` (a floating dtype).

    ``num_heads`` is an integer in ``1 ... MAX_HEADS`` (2**20)."""
    num_heads = check_int("num_heads", num_heads, minimum=1, maximum=MAX_HEADS)
    check_dtype("dtype", dtype, "floating")
    closest = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = _power_of_two_slopes(closest)
    if closest != num_heads:
        slopes += _power_of_two_slopes(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(slopes, dtype=torch.float64).to(dtype)


def alibi_bias(
    num_heads: int,
    q_len: int,
    k_len: int,
    *,
    causal: bool = True,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The ALiBi bias to add to attention logits, shape ``(1, num_heads, q_len, k_len)``.

    Queries are the last ``q_len`` of the ``k_len`` positions (query ``i`` sits at position
    ``k_len - q_len + i``), which is the ordinary square case when ``q_len == k_len``.

    * ``causal=True``: ``-m_h * (i - j)`` for keys at or before the query and ``-inf`` for keys after
      it, so the causal mask is already included.
    * ``causal=False``: ``-m_h * |i - j|`` (the symmetric variant used for bidirectional encoders).

    ``num_heads`` is an integer in ``1 ... MAX_HEADS``, ``0 <= q_len <= k_len`` integers (0 gives an empty bias),
    ``causal`` a bool, ``dtype`` a floating dtype. A bias larger than the memory budget is refused before anything
    is allocated. On ``device="meta"`` the result is an empty meta tensor of the bias's shape and dtype (shape
    inference; there are no values to compute).
    """
    num_heads = check_int("num_heads", num_heads, minimum=1, maximum=MAX_HEADS)
    causal = check_bool("causal", causal)
    check_dtype("dtype", dtype, "floating")
    device = check_device("device", device)
    q_len = check_nonnegative_int("q_len", q_len)
    k_len = check_nonnegative_int("k_len", k_len)
    if q_len > k_len:
        raise ValueError(f"q_len ({q_len}) cannot exceed k_len ({k_len})")
    entries = numel(q_len, k_len)
    # float64 distances and the bias (twice with the mask), then the cast to dtype
    check_memory("num_heads, q_len and k_len", entries * (16 + 16 * num_heads + dtype.itemsize * num_heads),
                 f"a (1, {num_heads}, {q_len}, {k_len}) bias")
    if device is not None and device.type == "meta":
        # a meta tensor has a shape and no values: answer at once (building it op by op sends every operation through
        # PyTorch's Python meta kernels, seconds on a busy machine, for a result that holds nothing)
        return torch.empty(1, num_heads, q_len, k_len, dtype=dtype, device=device)
    slopes = alibi_slopes(num_heads, dtype=torch.float64).to(device)
    i = torch.arange(q_len, device=device, dtype=torch.float64)[:, None] + (k_len - q_len)
    j = torch.arange(k_len, device=device, dtype=torch.float64)[None, :]
    distance = i - j
    if causal:
        bias = -slopes[:, None, None] * distance
        bias = bias.masked_fill(distance < 0, float("-inf"))
    else:
        bias = -slopes[:, None, None] * distance.abs()
    return bias.to(dtype).unsqueeze(0)
