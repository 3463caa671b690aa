"""Position ids at generation and training time: padded batches, packed sequences, fairseq's offset.

A model with position information needs, for every token, the position it should be encoded at. For one
unpadded sequence that is ``0, 1, ..., N - 1``; three common situations change it:

* **Left padding** (batched generation): the prompts of a batch are padded on the left so that their last tokens
  line up. A padded slot is no token, so the first *real* token must still be at position 0:
  :func:`position_ids_from_attention_mask` counts the real tokens (``cumsum(mask) - 1``) and gives padded slots a
  fixed value of your choice. Then every real token of a padded row gets the rotation (or table row) it would get
  in the unpadded sequence, and with a mask that hides the padded keys the row's outputs are those of the unpadded
  sequence (``tests/test_positions.py`` checks this against the full-sequence forward).
* **Generation with a KV cache**: a new token after ``t`` cached ones sits at position ``t``; pass
  ``offset=t`` to :class:`~course_pe.rope.RotaryEmbedding` or :func:`~course_pe.rope.apply_rope`, or take the
  last column of :func:`position_ids_from_attention_mask` when the batch is padded.
* **Packed sequences** (several documents concatenated into one training row, "padding-free" batches): positions
  restart at 0 at every document, :func:`packed_position_ids` (from document lengths) or
  :func:`packed_position_ids_from_boundaries` (from the cumulative boundaries ``cu_seqlens`` of FlashAttention's
  variable-length kernels); :func:`packed_attention_mask` keeps each document's tokens from attending to the others,
  and :func:`document_ids_from_position_ids` recovers the documents from packed position ids.

Absolute learned tables of fairseq and the RoBERTa family do not start at 0: position ids start at
``padding_idx + 1`` and padded tokens get ``padding_idx`` itself (a row that is never trained), see
:func:`make_positions`.

Every function returns int64 tensors on the device of its tensor argument (CPU for Python lists) and validates its
input (``TypeError``/``ValueError`` naming the argument); sizes are checked against the memory budget before
anything is allocated.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ._validation import check_bool, check_int, check_memory, check_tensor

__all__ = [
    "document_ids_from_position_ids",
    "make_positions",
    "packed_attention_mask",
    "packed_position_ids",
    "packed_position_ids_from_boundaries",
    "position_ids_from_attention_mask",
]

#: Largest position or padding index accepted (float64, which RoPE computes angles in, holds integers exactly up to
#: here; see :data:`course_pe.rope.MAX_POSITION`).
_MAX_POSITION = 2**53


def _check_mask(name: str, mask: object) -> torch.Tensor:
    """A bool or integer tensor of 0/1 entries with at least one dimension, as a bool tensor."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a bool or 0/1 integer tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        check_tensor(name, mask, "integer")
        # (a meta tensor has no values to check: its position ids are a meta tensor too)
        if mask.numel() and not mask.is_meta and not bool(((mask == 0) | (mask == 1)).all()):
            raise ValueError(f"{name} must hold only 0 (padding) and 1 (token), got values {mask.unique().tolist()[:8]}")
    if mask.dim() == 0:
        raise ValueError(f"{name} must be (seq,) or (batch, seq), got a 0-d tensor")
    return mask.bool()


def position_ids_from_attention_mask(attention_mask: torch.Tensor, *, pad_value: int = 0) -> torch.Tensor:
    """Position ids of a padded batch: real tokens count ``0, 1, 2, ...`` and padded slots get ``pad_value``.

    ``attention_mask`` is a bool or 0/1 integer tensor of shape ``(..., seq)`` (usually ``(batch, seq)``), 1 for a
    real token and 0 for padding, on either side (left padding for generation, right padding for training). The
    result has its shape, dtype int64: ``cumsum(mask) - 1`` where the mask is 1, ``pad_value`` where it is 0. This is
    the rule of Hugging Face transformers' ``generate`` (``_prepare_position_ids_for_generation``), whose padded slots
    get 0 in transformers 5.23; older releases and some model code use 1.

    Which value a padded slot gets does not change any real token's output as long as the padded keys are masked
    out of attention: the padded queries' own outputs are discarded. It only has to be a position the model
    accepts (a row of a learned table, for example), so ``pad_value`` is an integer in ``0 ... 2**53``.

    With a KV cache the mask covers the cached and the new tokens; the new tokens' position ids are the last
    columns of the result (``position_ids_from_attention_mask(mask)[:, -new:]``).
    """
    mask = _check_mask("attention_mask", attention_mask)
    pad_value = check_int("pad_value", pad_value, minimum=0, maximum=_MAX_POSITION)
    check_memory("attention_mask", 2 * mask.numel() * 8, "its int64 position ids")
    counts = mask.long().cumsum(-1) - 1
    return counts.masked_fill(~mask, pad_value)


def _check_lengths(name: str, lengths: object) -> torch.Tensor:
    """Document lengths (a sequence of ints or a 1-D integer tensor, each >= 0) as a 1-D int64 CPU-or-device tensor."""
    if isinstance(lengths, torch.Tensor):
        check_tensor(name, lengths, "integer", dim=1)
        values = lengths.long()
    elif isinstance(lengths, Sequence) and not isinstance(lengths, (str, bytes)):
        # bounded before torch.tensor, which cannot hold 2**63 ("Overflow when unpacking long long")
        values = torch.tensor([check_int(f"{name}[{i}]", n, minimum=0, maximum=_MAX_POSITION)
                               for i, n in enumerate(lengths)], dtype=torch.long)
    else:
        raise TypeError(f"{name} must be a sequence of ints or a 1-D integer tensor, got {type(lengths).__name__}")
    if values.numel() and int(values.min()) < 0:
        raise ValueError(f"{name} must hold lengths >= 0, got {int(values.min())}")
    if values.numel() and int(values.max()) > _MAX_POSITION:
        raise ValueError(f"{name} must hold lengths <= 2**53, got {int(values.max())}")
    return values


def _packed(values: torch.Tensor, start: int, name: str) -> torch.Tensor:
    total = int(values.sum()) if values.numel() else 0
    check_memory(name, 3 * total * 8, f"{total} packed position ids")
    if total == 0:
        return torch.zeros(0, dtype=torch.long, device=values.device)
    longest = int(values.max())
    if start + longest - 1 > _MAX_POSITION:
        raise ValueError(f"start + the longest length - 1 must be <= 2**53, got {start} + {longest} - 1 ({name})")
    firsts = torch.cumsum(values, 0) - values  # index of each document's first token
    return torch.arange(total, device=values.device) - torch.repeat_interleave(firsts, values) + start


def packed_position_ids(lengths: Sequence[int] | torch.Tensor, *, start: int = 0) -> torch.Tensor:
    """Position ids of documents packed into one row: ``start ... start + n - 1`` for each document of length ``n``.

    ``lengths`` is a sequence of integers ``>= 0`` or a 1-D integer tensor (a length of 0 adds nothing). Returns an
    int64 tensor of shape ``(sum(lengths),)``, e.g. ``packed_position_ids([3, 2]) = [0, 1, 2, 0, 1]``: what Hugging
    Face's ``DataCollatorWithFlattening`` returns as ``position_ids`` (``start`` is its ``position_ids_start``; the
    RoBERTa family needs ``padding_idx + 1``, see :func:`make_positions`). ``start`` is an integer in
    ``0 ... 2**53``.
    """
    values = _check_lengths("lengths", lengths)
    start = check_int("start", start, minimum=0, maximum=_MAX_POSITION)
    return _packed(values, start, "lengths")


def packed_position_ids_from_boundaries(boundaries: Sequence[int] | torch.Tensor, *, start: int = 0) -> torch.Tensor:
    """:func:`packed_position_ids` from cumulative boundaries ``[0, n_1, n_1 + n_2, ..., total]``.

    ``boundaries`` is the ``cu_seqlens`` tensor of FlashAttention's variable-length kernels (Hugging Face's
    ``cu_seq_lens_q``): a non-decreasing 1-D integer tensor or sequence of ints that starts at 0, with at least one
    entry. Document ``k`` occupies rows ``boundaries[k] ... boundaries[k + 1] - 1``. Returns int64 of shape
    ``(boundaries[-1],)``.
    """
    if isinstance(boundaries, torch.Tensor):
        check_tensor("boundaries", boundaries, "integer", dim=1)
        values = boundaries.long()
    elif isinstance(boundaries, Sequence) and not isinstance(boundaries, (str, bytes)):
        values = torch.tensor([check_int(f"boundaries[{i}]", b, minimum=0, maximum=_MAX_POSITION)
                               for i, b in enumerate(boundaries)], dtype=torch.long)
    else:
        raise TypeError(f"boundaries must be a sequence of ints or a 1-D integer tensor, got {type(boundaries).__name__}")
    if values.numel() == 0 or int(values[0]) != 0:
        raise ValueError(f"boundaries must start at 0 (cu_seqlens), got {values.tolist()[:8]}")
    lengths = values.diff()
    if lengths.numel() and int(lengths.min()) < 0:
        raise ValueError(f"boundaries must be non-decreasing, got {values.tolist()[:16]}")
    start = check_int("start", start, minimum=0, maximum=_MAX_POSITION)
    return _packed(lengths, start, "boundaries")


def packed_attention_mask(lengths: Sequence[int] | torch.Tensor, *, causal: bool = True) -> torch.Tensor:
    """Bool ``(total, total)`` mask for packed documents: True where query ``m`` may attend to key ``n``.

    Both tokens must belong to the same document (a block-diagonal mask), and with ``causal`` also ``n <= m``.
    Broadcast it against ``(batch, heads, total, total)`` logits. Together with :func:`packed_position_ids` it makes
    a packed row compute, for every document, what the document computes alone.
    """
    values = _check_lengths("lengths", lengths)
    causal = check_bool("causal", causal)
    total = int(values.sum()) if values.numel() else 0
    check_memory("lengths", 3 * total * total + 16 * total, f"a {total} x {total} bool mask")
    document = torch.repeat_interleave(torch.arange(values.numel(), device=values.device), values)
    mask = document[:, None] == document[None, :]
    if causal:
        mask &= torch.ones(total, total, dtype=torch.bool, device=values.device).tril()
    return mask


def document_ids_from_position_ids(position_ids: torch.Tensor) -> torch.Tensor:
    """Which packed document each token belongs to, recovered from its position ids.

    A new document starts wherever a position is not its predecessor plus one (the rule of Hugging Face's
    ``find_packed_sequence_indices``): ``[0, 1, 2, 0, 1, 0]`` gives ``[0, 0, 0, 1, 1, 2]``. ``position_ids`` is an
    integer tensor ``(..., seq)``; the result has its shape, int64, counting documents from 0 in each row. (A
    document that happens to start right after a position one smaller, e.g. ``[0, 1]`` then ``[2, ...]``, cannot be
    told apart: pass lengths where they are known.)
    """
    check_tensor("position_ids", position_ids, "integer", min_dim=1)
    ids = position_ids.long()
    if ids.shape[-1] == 0:
        return torch.zeros_like(ids)
    step = ids[..., 1:] - ids[..., :-1]
    starts = torch.cat([torch.zeros_like(ids[..., :1]), (step != 1).long()], dim=-1)
    return starts.cumsum(-1)


def make_positions(tokens: torch.Tensor, padding_idx: int, *, past_length: int = 0) -> torch.Tensor:
    """fairseq's ``make_positions``: position ids that start at ``padding_idx + 1``, padding at ``padding_idx``.

    fairseq's learned and sinusoidal position tables reserve row ``padding_idx`` for padding (so that padded
    tokens get one fixed, untrained vector), and number real tokens from ``padding_idx + 1``; the RoBERTa family
    in Hugging Face transformers does the same (``create_position_ids_from_input_ids``, with ``padding_idx = 1``,
    so the first token is at position 2 and a table of ``max_positions + 2`` rows is needed). Real tokens are
    counted from the left, skipping padding; ``past_length`` cached tokens shift the count (generation).

    Args:
        tokens: integer token ids ``(batch, seq)``; a token equal to ``padding_idx`` is padding.
        padding_idx: an integer in ``0 ... 2**53``.
        past_length: number of earlier tokens in a KV cache, an integer ``>= 0``.

    Returns:
        int64 ``(batch, seq)``: ``padding_idx + past_length + (number of real tokens up to and including this one)``
        for real tokens, ``padding_idx`` for padding.
    """
    check_tensor("tokens", tokens, "integer", dim=2)
    padding_idx = check_int("padding_idx", padding_idx, minimum=0, maximum=_MAX_POSITION)
    past_length = check_int("past_length", past_length, minimum=0, maximum=_MAX_POSITION)
    if padding_idx + past_length + tokens.shape[-1] > _MAX_POSITION:
        raise ValueError(f"padding_idx + past_length + seq must be <= 2**53, got {padding_idx} + {past_length} + "
                         f"{tokens.shape[-1]}")
    check_memory("tokens", 3 * tokens.numel() * 8, "its int64 position ids")
    real = tokens.ne(padding_idx).long()
    return (real.cumsum(-1) + past_length) * real + padding_idx
