"""Position ids for padded, cached and packed batches (course_pe.positions), and RoPE with a position offset.

Each helper is checked against an independent reference (Hugging Face transformers 5.23, pinned in
requirements.txt: generation's position ids, the flattening collator, the packed-sequence detector, RoBERTa's
``create_position_ids_from_input_ids``) and, where it matters, against the full-sequence forward: a padded, cached
or packed computation must give every real token exactly what the plain computation gives it.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import course_pe as cpe
from course_pe.positions import (
    document_ids_from_position_ids,
    make_positions,
    packed_attention_mask,
    packed_position_ids,
    packed_position_ids_from_boundaries,
    position_ids_from_attention_mask,
)

import transformers  # noqa: E402  (pinned in requirements.txt: a missing package is a failure, not a skip)
from transformers import DataCollatorWithFlattening  # noqa: E402
from transformers.generation.utils import GenerationMixin  # noqa: E402
from transformers.masking_utils import find_packed_sequence_indices  # noqa: E402
from transformers.models.roberta.modeling_roberta import RobertaEmbeddings  # noqa: E402

masks = st.lists(st.lists(st.booleans(), min_size=1, max_size=12), min_size=1, max_size=5).filter(
    lambda rows: len({len(r) for r in rows}) == 1
)
lengths_lists = st.lists(st.integers(0, 9), min_size=0, max_size=7)


# ----------------------------------------------------------------------------- attention mask -> position ids


@given(rows=masks, as_bool=st.booleans())
def test_mask_positions_match_transformers_generate(rows, as_bool):
    mask = torch.tensor(rows, dtype=torch.bool if as_bool else torch.long)
    ours = position_ids_from_attention_mask(mask)
    hf = GenerationMixin._prepare_position_ids_for_generation(None, torch.zeros(mask.shape, dtype=torch.long),
                                                              {"attention_mask": mask.long()})
    assert ours.dtype == torch.long and torch.equal(ours, hf)


@given(rows=masks, pad=st.integers(0, 2**53))
def test_mask_positions_count_real_tokens(rows, pad):
    mask = torch.tensor(rows)
    ids = position_ids_from_attention_mask(mask, pad_value=pad)
    for r, row in enumerate(rows):
        real = [i for i, keep in enumerate(row) if keep]
        assert ids[r, real].tolist() == list(range(len(real)))
        assert all(ids[r, i] == pad for i, keep in enumerate(row) if not keep)


def _left_padded(lengths: list[int], width: int, d_model: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lengths), width, d_model, generator=g, dtype=torch.float64)
    mask = torch.zeros(len(lengths), width, dtype=torch.bool)
    for r, n in enumerate(lengths):
        mask[r, width - n:] = True
    return x, mask


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_left_padded_rope_attention_equals_each_unpadded_sequence(layout, seed):
    """A left-padded batch with mask-derived positions: every real token's output is the unpadded one's."""
    torch.manual_seed(seed)
    attn = cpe.MultiHeadAttention(16, 2, position="rope", causal=True, rope_layout=layout).double().eval()
    lengths, width = [5, 2, 7, 1], 7
    x, mask = _left_padded(lengths, width, 16, seed)
    positions = position_ids_from_attention_mask(mask)
    out = attn(x, positions=positions, mask=mask[:, None, None, :])
    for r, n in enumerate(lengths):
        alone = attn(x[r:r + 1, width - n:])
        torch.testing.assert_close(out[r, width - n:], alone[0], rtol=0, atol=1e-12)
    # RoPE scores depend on offsets only, so positions shifted by the padding give the same outputs up to rounding
    # (a uniform shift); an absolute table is where the shift shows (next test)
    shifted = attn(x, mask=mask[:, None, None, :])
    torch.testing.assert_close(shifted[1, width - 2:], attn(x[1:2, width - 2:])[0], rtol=0, atol=1e-10)


def test_learned_table_with_mask_positions_gives_unpadded_rows():
    emb = cpe.LearnedPositionalEmbedding(8, 4, generator=torch.Generator().manual_seed(0))
    x, mask = _left_padded([3, 5], 5, 4, 0)
    out = emb(x.float(), position_ids_from_attention_mask(mask))
    torch.testing.assert_close(out[0, 2:], emb(x[0:1, 2:].float())[0], rtol=0, atol=0)
    # the default positions 0 ... seq - 1 shift the padded row's tokens by the padding: wrong rows of the table
    assert not torch.allclose(emb(x.float())[0, 2:], emb(x[0:1, 2:].float())[0])


# ----------------------------------------------------------------------------- generation with a KV cache


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize(
    "scaling",
    [None, cpe.LinearScaling(2.0), cpe.YaRNScaling(4.0, 8), cpe.DynamicNTKScaling(2.0, 6), cpe.Llama3Scaling(4.0, 8)],
)
def test_rotary_offset_equals_full_sequence_rows(layout, scaling):
    """Token by token with offset=t, RotaryEmbedding uses exactly the cos/sin row of the full-sequence call, and the
    rotated rows agree to float32 rounding (the complex kernel's vectorised and scalar loops may differ in the last
    bit, so equal inputs of other lengths need not give bit-identical products)."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 12, 8, generator=g)
    rotary = cpe.RotaryEmbedding(8, max_positions=4, layout=layout, scaling=scaling)
    for t in range(12):
        # dynamic NTK's frequencies follow the current length: the full call of length t + 1 is the reference
        full = rotary(x[..., : t + 1, :])
        cos_full, sin_full = rotary.cos_sin(torch.arange(t + 1))
        step = rotary(x[..., t : t + 1, :], offset=t)
        cos_step, sin_step = rotary.cos_sin(torch.tensor([t]), seq_len=t + 1)
        assert torch.equal(cos_step, cos_full[t:]) and torch.equal(sin_step, sin_full[t:]), t
        torch.testing.assert_close(step, full[..., t : t + 1, :], rtol=0, atol=5e-7)
    torch.testing.assert_close(rotary(x[..., 5:9, :], offset=5), rotary(x[..., :9, :])[..., 5:9, :], rtol=0, atol=5e-7)


def test_rotary_per_sequence_offsets():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 2, 4, 8, generator=g, dtype=torch.float64)
    rotary = cpe.RotaryEmbedding(8)
    offsets = torch.tensor([0, 5, 2**20])
    out = rotary(x, offset=offsets)
    for b in range(3):
        assert torch.equal(out[b], rotary(x[b], offset=int(offsets[b])))
        assert torch.equal(out[b], cpe.apply_rope(x[b], torch.arange(4) + offsets[b]))
    assert torch.equal(cpe.apply_rope(x, offset=offsets), out)


@given(t=st.integers(0, 2**40), seq=st.integers(1, 4))
@settings(max_examples=30)
def test_apply_rope_offset_is_shifted_positions(t, seq):
    x = torch.randn(2, seq, 6, generator=torch.Generator().manual_seed(t % 1000), dtype=torch.float64)
    assert torch.equal(cpe.apply_rope(x, offset=t), cpe.apply_rope(x, torch.arange(t, t + seq)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_incremental_decoding_with_cached_keys_equals_causal_attention(seed):
    """Keys rotated once and cached, each new query rotated at offset t: the causal attention outputs of the full
    sequence, row by row (the generation loop of the Part II chapter)."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = torch.randn(3, 1, 2, 9, 8, generator=g, dtype=torch.float64)
    rotary = cpe.RotaryEmbedding(8, layout="half")
    full, _ = cpe.attention(rotary(q), rotary(k), v, causal=True)
    cached_k = torch.zeros(1, 2, 0, 8, dtype=torch.float64)
    for t in range(9):
        cached_k = torch.cat([cached_k, rotary(k[..., t : t + 1, :], offset=t)], dim=-2)
        step, _ = cpe.attention(rotary(q[..., t : t + 1, :], offset=t), cached_k, v[..., : t + 1, :])
        torch.testing.assert_close(step, full[..., t : t + 1, :], rtol=0, atol=1e-12)


def test_offset_is_refused_with_explicit_positions():
    x = torch.randn(3, 8)
    with pytest.raises(ValueError, match="offset"):
        cpe.RotaryEmbedding(8)(x, torch.arange(3), offset=1)
    with pytest.raises(ValueError, match="offset"):
        cpe.apply_rope(x, torch.arange(3), offset=1)
    with pytest.raises(ValueError, match="offset"):
        cpe.apply_rope(x, offset=2**53)  # the last row would be at 2**53 + 2


# ----------------------------------------------------------------------------- packed sequences


@given(lengths=lengths_lists, start=st.integers(0, 3))
def test_packed_positions_match_the_flattening_collator(lengths, start):
    features = [{"input_ids": list(range(1, n + 1))} for n in lengths if n > 0]
    ours = packed_position_ids(lengths, start=start)
    if features:
        hf = DataCollatorWithFlattening(return_tensors="pt", position_ids_start=start)(features)["position_ids"][0]
        assert torch.equal(ours, hf)
    else:
        assert ours.shape == (0,)
    boundaries = [0] + torch.tensor(lengths, dtype=torch.long).cumsum(0).tolist()
    assert torch.equal(packed_position_ids_from_boundaries(boundaries, start=start), ours)
    assert torch.equal(packed_position_ids(torch.tensor(lengths, dtype=torch.int32), start=start), ours)


@given(lengths=lengths_lists.filter(lambda ls: all(n > 0 for n in ls)))
def test_document_ids_match_transformers_packed_sequence_detector(lengths):
    positions = packed_position_ids(lengths)
    ours = document_ids_from_position_ids(positions)
    assert ours.tolist() == [k for k, n in enumerate(lengths) for _ in range(n)]
    if len(lengths) > 1:
        hf = find_packed_sequence_indices(positions[None])
        assert torch.equal(ours[None], hf)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_packed_row_equals_each_document_alone(seed):
    """Packed position ids and the block-diagonal causal mask: each document's outputs are its own forward's."""
    torch.manual_seed(seed)
    attn = cpe.MultiHeadAttention(16, 4, position="rope", causal=True).double().eval()
    lengths = [4, 1, 6, 3]
    g = torch.Generator().manual_seed(seed)
    docs = [torch.randn(1, n, 16, generator=g, dtype=torch.float64) for n in lengths]
    packed = attn(torch.cat(docs, dim=1), positions=packed_position_ids(lengths),
                  mask=packed_attention_mask(lengths))
    start = 0
    for doc in docs:
        n = doc.shape[1]
        torch.testing.assert_close(packed[:, start:start + n], attn(doc), rtol=0, atol=1e-12)
        start += n


def test_packed_attention_mask_blocks():
    mask = packed_attention_mask([2, 0, 3], causal=False)
    expected = torch.zeros(5, 5, dtype=torch.bool)
    expected[:2, :2] = True
    expected[2:, 2:] = True
    assert torch.equal(mask, expected)
    assert torch.equal(packed_attention_mask([2, 0, 3]), expected & torch.ones(5, 5, dtype=torch.bool).tril())
    assert packed_attention_mask([]).shape == (0, 0)


def test_boundaries_must_start_at_zero_and_not_decrease():
    with pytest.raises(ValueError, match="boundaries"):
        packed_position_ids_from_boundaries([1, 3])
    with pytest.raises(ValueError, match="boundaries"):
        packed_position_ids_from_boundaries(torch.tensor([0, 3, 2]))
    with pytest.raises(ValueError, match="boundaries"):
        packed_position_ids_from_boundaries([])


# ----------------------------------------------------------------------------- fairseq / RoBERTa offset


@given(rows=masks, padding_idx=st.integers(0, 3), past=st.integers(0, 5))
def test_make_positions_matches_roberta(rows, padding_idx, past):
    tokens = torch.tensor([[padding_idx if not keep else padding_idx + 1 + i for i, keep in enumerate(row)]
                           for row in rows])
    ours = make_positions(tokens, padding_idx, past_length=past)
    hf = RobertaEmbeddings.create_position_ids_from_input_ids(tokens, padding_idx, past)
    assert ours.dtype == torch.long and torch.equal(ours, hf)


def test_make_positions_worked_example():
    # fairseq's convention: padding_idx = 1, first real token at 2, padding stays 1 (right or left)
    tokens = torch.tensor([[5, 6, 7, 1, 1], [1, 1, 8, 9, 4]])
    assert make_positions(tokens, 1).tolist() == [[2, 3, 4, 1, 1], [1, 1, 2, 3, 4]]
    # the padded row's real tokens get the positions of the unpadded sequence
    assert make_positions(tokens[1:, 2:], 1).tolist() == [[2, 3, 4]]


# ----------------------------------------------------------------------------- found by mutation testing (issue 27)

MAX = 2**53


def test_packed_defaults_start_at_zero():
    assert packed_position_ids([2, 3]).tolist() == [0, 1, 0, 1, 2]
    assert packed_position_ids_from_boundaries([0, 2, 5]).tolist() == [0, 1, 0, 1, 2]


def test_packed_bounds_are_inclusive_and_name_their_argument():
    """Positions up to 2**53 are allowed: ``start + longest - 1 <= 2**53``; each argument is named when wrong."""
    assert packed_position_ids([3, 1], start=MAX - 2).tolist() == [MAX - 2, MAX - 1, MAX, MAX - 2]
    assert packed_position_ids_from_boundaries([0, 3], start=MAX - 2).tolist() == [MAX - 2, MAX - 1, MAX]
    for call in (lambda: packed_position_ids([3, 1], start=MAX - 1),
                 lambda: packed_position_ids_from_boundaries([0, 3], start=MAX - 1)):
        with pytest.raises(ValueError, match=rf"^start \+ the longest length - 1 must be <= 2\*\*53, got {MAX - 1} "
                                             rf"\+ 3 - 1 \("):
            call()
    cases = [
        (lambda: packed_position_ids([2, -1]), r"lengths\[1\] must be >= 0"),
        (lambda: packed_position_ids([2], start=MAX + 1), rf"start must be <= {MAX}"),
        (lambda: packed_position_ids_from_boundaries([0, 2], start=MAX + 1), rf"start must be <= {MAX}"),
        (lambda: packed_position_ids_from_boundaries([0, -1]), r"boundaries\[1\] must be >= 0"),
        (lambda: packed_position_ids_from_boundaries([0, MAX + 1]), rf"boundaries\[1\] must be <= {MAX}"),
        (lambda: packed_position_ids_from_boundaries(list(range(1, 11))),
         r"boundaries must start at 0 \(cu_seqlens\), got \[1, 2, 3, 4, 5, 6, 7, 8\]$"),
        (lambda: packed_position_ids_from_boundaries([0] + list(range(20, 0, -1))),
         r"boundaries must be non-decreasing, got \[0, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6\]$"),
        (lambda: packed_position_ids_from_boundaries("0,2"), r"boundaries must be a sequence of ints or a 1-D integer "
                                                             r"tensor, got str$"),
        (lambda: packed_position_ids(3.5), r"lengths must be a sequence of ints or a 1-D integer tensor, got float$"),
        (lambda: make_positions(torch.ones(1, 2, dtype=torch.long), MAX + 1), rf"padding_idx must be <= {MAX}"),
        (lambda: make_positions(torch.ones(1, 2, dtype=torch.long), 1, past_length=MAX + 1),
         rf"past_length must be <= {MAX}"),
        (lambda: make_positions(torch.ones(1, 2, dtype=torch.long), 1, past_length=MAX - 2),
         rf"padding_idx \+ past_length \+ seq must be <= 2\*\*53, got 1 \+ {MAX - 2} \+ 2$"),
    ]
    for call, message in cases:
        with pytest.raises((TypeError, ValueError), match="^" + message):
            call()
    # the largest allowed: padding_idx + past_length + seq == 2**53
    assert make_positions(torch.tensor([[5, 5]]), 1, past_length=MAX - 3).tolist() == [[MAX - 1, MAX]]


def test_document_ids_of_a_batch_of_rows():
    ids = torch.tensor([[0, 1, 2, 0, 1, 0], [0, 0, 1, 2, 3, 0]])
    assert document_ids_from_position_ids(ids).tolist() == [[0, 0, 0, 1, 1, 2], [0, 1, 1, 1, 1, 2]]
    assert document_ids_from_position_ids(ids[:, :1]).tolist() == [[0], [0]]
