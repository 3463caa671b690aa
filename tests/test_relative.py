"""Shaw et al. relative positions, T5 buckets and ALiBi."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from course_pe import (
    ShawRelativePositions,
    T5RelativeBias,
    alibi_bias,
    alibi_slopes,
    attention,
    shaw_attention,
    shaw_relative_positions,
    t5_relative_position_bucket,
)

# ----------------------------------------------------------------------------- Shaw


def test_shaw_indices_are_clipped_key_minus_query():
    idx = shaw_relative_positions(4, 4, 2)
    expected = torch.tensor([[2, 3, 4, 4], [1, 2, 3, 4], [0, 1, 2, 3], [0, 0, 1, 2]])
    assert torch.equal(idx, expected)
    assert idx.dtype == torch.long


def test_shaw_attention_matches_naive_loops():
    g = torch.Generator().manual_seed(0)
    b, h, s, d, k = 2, 3, 6, 4, 2
    q, kk, v = (torch.randn(b, h, s, d, generator=g, dtype=torch.float64) for _ in range(3))
    rk, rv = torch.randn(2 * k + 1, d, generator=g, dtype=torch.float64), torch.randn(2 * k + 1, d, generator=g, dtype=torch.float64)
    out = shaw_attention(q, kk, v, rk, rv, max_distance=k)
    expected = torch.zeros_like(out)
    for i in range(s):
        logits = torch.stack(
            [(q[:, :, i] * (kk[:, :, j] + rk[max(-k, min(k, j - i)) + k])).sum(-1) for j in range(s)], dim=-1
        ) / math.sqrt(d)
        w = logits.softmax(-1)
        for j in range(s):
            expected[:, :, i] += w[..., j, None] * (v[:, :, j] + rv[max(-k, min(k, j - i)) + k])
    torch.testing.assert_close(out, expected)


def test_negative_index_pitfall_is_real():
    table = torch.arange(5)  # distances -2 ... 2 stored at 0 ... 4
    assert int(table[-1]) == 4  # distance -1 used raw would read the +2 row
    assert int(table[shaw_relative_positions(2, 2, 2)[1, 0]]) == 1  # the shifted index reads row "-1"


def test_shaw_module_shapes_and_errors():
    module = ShawRelativePositions(8, 3)
    q = torch.randn(1, 2, 5, 8)
    out, w = module(q, q, q, return_weights=True)
    assert out.shape == (1, 2, 5, 8) and w.shape == (1, 2, 5, 5)
    with pytest.raises(ValueError, match="rel_keys"):
        shaw_attention(q, q, q, torch.zeros(3, 8), None, max_distance=3)


# ----------------------------------------------------------------------------- T5


def t5_reference(rel: int, bidirectional: bool, num_buckets: int, max_distance: int) -> int:
    """T5's bucket function, written out for one integer (float32 log as in T5)."""
    import numpy as np

    ret, n = 0, -rel
    if bidirectional:
        num_buckets //= 2
        ret += num_buckets if n < 0 else 0
        n = abs(n)
    else:
        n = max(n, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return ret + n
    val = max_exact + int(
        np.float32(np.log(np.float32(n) / np.float32(max_exact)))
        / np.float32(math.log(max_distance / max_exact))
        * np.float32(num_buckets - max_exact)
    )
    return ret + min(val, num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (16, 64), (8, 20)])
def test_t5_buckets_match_reference(bidirectional, num_buckets, max_distance):
    rel = torch.arange(-300, 301)
    got = t5_relative_position_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    expected = [t5_reference(int(r), bidirectional, num_buckets, max_distance) for r in rel]
    assert got.tolist() == expected


def test_t5_known_values():
    b = lambda r: int(t5_relative_position_bucket(torch.tensor(r)))  # noqa: E731
    assert [b(0), b(-1), b(-7), b(-8), b(1), b(7)] == [0, 1, 7, 8, 17, 23]
    assert b(-128) == b(-10_000) == 15 and b(10_000) == 31


@given(st.integers(0, 2000), st.integers(0, 2000))
def test_t5_monotone_in_distance_and_saturates(a, b):
    lo, hi = sorted((a, b))
    for sign in (1, -1):
        bl = t5_relative_position_bucket(torch.tensor(sign * lo))
        bh = t5_relative_position_bucket(torch.tensor(sign * hi))
        assert int(bl) <= int(bh)
    if lo >= 128:
        assert int(t5_relative_position_bucket(torch.tensor(-lo))) == 15


def test_t5_causal_future_collapses_to_zero():
    got = t5_relative_position_bucket(torch.arange(1, 50), bidirectional=False)
    assert torch.equal(got, torch.zeros(49, dtype=torch.long))


def test_t5_errors():
    with pytest.raises(TypeError, match="integer"):
        t5_relative_position_bucket(torch.tensor([1.0]))
    with pytest.raises(ValueError, match="max_distance"):
        t5_relative_position_bucket(torch.tensor([1]), num_buckets=32, max_distance=4)


def test_t5_bias_module():
    module = T5RelativeBias(4)
    bias = module(5, 5)
    assert bias.shape == (1, 4, 5, 5)
    # constant along diagonals: depends on key - query only
    assert torch.equal(bias[0, :, 1:, 1:], bias[0, :, :-1, :-1])


# ----------------------------------------------------------------------------- ALiBi


def test_alibi_slopes_power_of_two():
    assert alibi_slopes(8, dtype=torch.float64).tolist() == [2.0 ** -(k + 1) for k in range(8)]
    s4 = alibi_slopes(4, dtype=torch.float64)
    torch.testing.assert_close(s4, torch.tensor([2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8], dtype=torch.float64))


def test_alibi_slopes_not_power_of_two():
    # 12 heads: the 8 slopes of n=8, then slopes 0, 2, 4, 6 of n=16 (2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5)
    got = alibi_slopes(12, dtype=torch.float64).tolist()
    expected = [2.0 ** -(k + 1) for k in range(8)] + [2.0 ** -(0.5 + k) for k in range(4)]
    assert got == pytest.approx(expected, abs=1e-15)
    assert len(alibi_slopes(6)) == 6 and len(alibi_slopes(1)) == 1


@given(st.integers(1, 64))
def test_alibi_slopes_positive_distinct(n):
    s = alibi_slopes(n, dtype=torch.float64)
    assert s.shape == (n,) and bool((s > 0).all()) and len(set(s.tolist())) == n


def test_alibi_bias_values():
    bias = alibi_bias(2, 3, 3, dtype=torch.float64)[0]
    m = alibi_slopes(2, dtype=torch.float64)
    assert bias[0, 2, 0] == -2 * m[0] and bias[1, 1, 0] == -m[1]
    assert torch.isinf(bias[0, 0, 1])
    sym = alibi_bias(2, 3, 3, causal=False, dtype=torch.float64)[0]
    assert sym[0, 0, 2] == sym[0, 2, 0] == -2 * m[0]


@given(st.integers(1, 16), st.integers(1, 24))
def test_row_constant_offset_does_not_change_softmax(heads, seq):
    g = torch.Generator().manual_seed(heads * 100 + seq)
    q, k, v = (torch.randn(1, heads, seq, 4, generator=g, dtype=torch.float64) for _ in range(3))
    bias = alibi_bias(heads, seq, seq, dtype=torch.float64)
    key_only = alibi_slopes(heads, dtype=torch.float64)[:, None, None] * torch.arange(seq, dtype=torch.float64)
    _, w1 = attention(q, k, v, bias=bias)
    _, w2 = attention(q, k, v, bias=key_only.unsqueeze(0), causal=True)
    torch.testing.assert_close(w1, w2)


def test_alibi_errors():
    with pytest.raises(ValueError, match="num_heads"):
        alibi_slopes(0)
    with pytest.raises(ValueError, match="q_len"):
        alibi_bias(2, 5, 3)


def test_t5_bias_module_with_fewer_queries_than_keys():
    module = T5RelativeBias(3, bidirectional=False, num_buckets=8, max_distance=20)
    bias = module(2, 5)  # queries are the last two of five positions: 3 and 4
    weight = module.embedding.weight.detach()
    for qi, qpos in enumerate((3, 4)):
        for k in range(5):
            bucket = t5_reference(k - qpos, False, 8, 20)
            assert torch.equal(bias[0, :, qi, k], weight[bucket])
    shifted = module(2, 5, query_offset=0)  # explicit offset: queries at 0 and 1
    assert torch.equal(shifted[0, :, 0, 0], weight[t5_reference(0, False, 8, 20)])
    assert torch.equal(shifted[0, :, 1, 0], weight[t5_reference(-1, False, 8, 20)])
    assert module(0, 0).shape == (1, 3, 0, 0)


def test_alibi_bias_with_fewer_queries_than_keys_and_empty():
    bias = alibi_bias(2, 2, 4, dtype=torch.float64)[0]
    m = [2.0**-4, 2.0**-8]
    for h in range(2):
        for qi, i in enumerate((2, 3)):
            for j in range(4):
                want = -m[h] * (i - j) if j <= i else -math.inf
                assert float(bias[h, qi, j]) == want
    assert alibi_bias(2, 0, 3).shape == (1, 2, 0, 3)


def test_t5_smallest_valid_bucket_counts_and_boundaries():
    # bidirectional 4 buckets: one exact bucket per direction (max_exact = 1) is valid
    got = t5_relative_position_bucket(torch.arange(-3, 4), bidirectional=True, num_buckets=4, max_distance=8)
    assert got.tolist() == [t5_reference(r, True, 4, 8) for r in range(-3, 4)]
    with pytest.raises(ValueError, match="max_distance"):  # max_distance == exact buckets: log(1) = 0 divisor
        t5_relative_position_bucket(torch.tensor([1]), num_buckets=32, max_distance=8)


# ----------------------------------------------------------------------------- found by mutation testing (tests/MUTATION.md)


def test_t5_defaults_are_t5s():
    """Without arguments the buckets are T5's: 32 buckets, bidirectional, max_distance 128."""
    rel = torch.arange(-300, 301)
    expected = [t5_reference(int(r), True, 32, 128) for r in rel]
    assert t5_relative_position_bucket(rel).tolist() == expected
    bias = T5RelativeBias(1)
    weights = bias.embedding.weight[:, 0]
    got = bias(1, 301, query_offset=300)[0, 0, 0]  # key - query = -300 ... 0
    assert torch.equal(got, weights[torch.tensor(expected[:301])])


def test_t5_too_few_buckets_names_the_minimum():
    with pytest.raises(ValueError, match=r"^num_buckets=2 leaves no exact buckets; use at least 4$"):
        t5_relative_position_bucket(torch.arange(3), num_buckets=2)
    with pytest.raises(ValueError, match=r"^num_buckets=1 leaves no exact buckets; use at least 2$"):
        t5_relative_position_bucket(torch.arange(3), bidirectional=False, num_buckets=1)


def test_t5_module_validates_its_own_combination_and_uses_it():
    """The module checks (num_buckets, max_distance, bidirectional) as given, and forward uses the same values."""
    T5RelativeBias(2, bidirectional=False, num_buckets=5, max_distance=20)  # odd is fine when causal
    with pytest.raises(ValueError, match="max_distance"):
        T5RelativeBias(2, num_buckets=32, max_distance=8)  # 8 exact buckets: max_distance must exceed 8
    for bidirectional, nb, md in [(True, 8, 20), (False, 6, 50), (True, 32, 64)]:
        module = T5RelativeBias(3, bidirectional=bidirectional, num_buckets=nb, max_distance=md)
        got = module(4, 200)[0]  # (heads, q, k); queries are the last 4 positions
        rel = torch.arange(200)[None, :] - (196 + torch.arange(4))[:, None]
        buckets = torch.tensor([[t5_reference(int(r), bidirectional, nb, md) for r in row] for row in rel])
        assert torch.equal(got, module.embedding.weight[buckets].permute(2, 0, 1))


def test_t5_init_std_is_small():
    torch.manual_seed(0)
    weights = T5RelativeBias(256).embedding.weight  # 32 * 256 draws of N(0, 0.02^2)
    weights = weights.detach()
    assert 0.018 < float(weights.std()) < 0.022 and abs(float(weights.mean())) < 0.002


def test_t5_forward_keeps_queries_and_keys_on_the_device_asked_for():
    # on the meta device (no data): queries and keys must both be made there, or the subtraction fails
    assert T5RelativeBias(2)(3, 4, device="meta").shape == (1, 2, 3, 4)


def test_messages_start_with_the_argument_name():
    """The bad-input registry only asks that the name appear somewhere; these messages begin with it."""
    for call in (lambda: alibi_slopes(2, dtype=torch.int64), lambda: alibi_bias(2, 3, 3, dtype=torch.int64)):
        with pytest.raises(TypeError, match=r"^dtype must be"):
            call()
    for call in (lambda: alibi_bias(2, 3, 3, device="nonsense"), lambda: T5RelativeBias(2)(3, 3, device="nonsense"),
                 lambda: alibi_bias(2, 3, 3, device=3.5), lambda: T5RelativeBias(2)(3, 3, device=3.5)):
        with pytest.raises((TypeError, ValueError), match=r"^device (is not|must be)"):
            call()


def test_alibi_dtypes_follow_the_argument():
    assert alibi_slopes(4).dtype == torch.float32 and alibi_bias(2, 3, 3).dtype == torch.float32
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        assert alibi_slopes(4, dtype=dtype).dtype == dtype
        assert alibi_bias(2, 3, 3, dtype=dtype).dtype == dtype


def test_alibi_bias_is_computed_in_float64():
    """-m_h * (i - j) with the float64 slope. From 16 heads on the slopes 2^(-8(h+1)/n) are not powers of two, and a
    slope rounded to float32 first would differ in the last bits (reference: Press et al.'s formula, written out)."""
    n = 20  # the 16 slopes of 16 heads, then every other slope of 32 heads for the remaining 4
    slopes = [2.0 ** (-8.0 * (h + 1) / 16) for h in range(16)] + [2.0 ** (-8.0 * (h + 1) / 32) for h in range(32)][0::2][:4]
    got = alibi_bias(n, 5, 7, causal=False, dtype=torch.float64)[0]
    for h, m in enumerate(slopes):
        for q in range(5):
            for k in range(7):
                assert float(got[h, q, k]) == -m * abs((q + 2) - k)
    assert any(float(torch.tensor(m, dtype=torch.float32)) != m for m in slopes)  # the case is not vacuous


def test_alibi_bias_on_the_meta_device():
    """Slopes, query and key positions must all be made on the device asked for (mixing devices fails)."""
    bias = alibi_bias(3, 2, 4, device="meta")
    assert bias.device.type == "meta" and bias.shape == (1, 3, 2, 4)
    assert alibi_bias(3, 2, 4, causal=False, device="meta").device.type == "meta"


# ----------------------------------------------------------------------------- red-team probe, 2026-11-24 (issue 27)


def test_t5_bucket_of_the_most_negative_int64_saturates():
    """abs(-2**63) overflows int64 (it stays -2**63): the bucket used to be -9223372036854775808 (valid: 0 ... 31)."""
    extremes = torch.tensor([-(2**63), -(2**63) + 1, -(2**62), 2**63 - 1, 2**62])
    for bidirectional in (True, False):
        got = t5_relative_position_bucket(extremes, bidirectional=bidirectional)
        assert got.min() >= 0 and got.max() < 32
        assert got[0] == got[1] == got[2]  # far to the left: the last "past" bucket
        assert got[3] == got[4]
    assert t5_relative_position_bucket(extremes).tolist() == [15, 15, 15, 31, 31]


def test_t5_query_offset_is_bounded_not_an_index_error():
    with pytest.raises(ValueError, match=r"^query_offset must be <= 9007199254740992"):
        T5RelativeBias(2)(4, 5, query_offset=2**63)  # an IndexError from the embedding before
    assert T5RelativeBias(2)(1, 1, query_offset=2**53).shape == (1, 2, 1, 1)


@given(num_buckets=st.integers(2, 80), max_distance=st.integers(2, 600), bidirectional=st.booleans())
def test_t5_buckets_match_transformers_for_any_bucket_count(num_buckets, max_distance, bidirectional):
    """T5's and Hugging Face's code accept an odd num_buckets (halved rounding down when bidirectional)."""
    from transformers.models.t5.modeling_t5 import T5Attention

    n = num_buckets // 2 if bidirectional else num_buckets
    if n // 2 < 1 or max_distance <= n // 2:  # no exact bucket, or log(max_distance / exact) <= 0: refused
        with pytest.raises(ValueError):
            t5_relative_position_bucket(torch.arange(3), bidirectional=bidirectional, num_buckets=num_buckets,
                                        max_distance=max_distance)
        return
    rel = torch.arange(-700, 701)
    ours = t5_relative_position_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets,
                                       max_distance=max_distance)
    theirs = T5Attention._relative_position_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets,
                                                   max_distance=max_distance)
    assert torch.equal(ours, theirs)
    assert ours.max() < num_buckets


def test_t5_odd_bucket_count_leaves_the_last_row_unused():
    bias = T5RelativeBias(2, num_buckets=33)
    assert bias.embedding.weight.shape == (33, 2)
    rel = torch.arange(-1000, 1001)
    assert int(t5_relative_position_bucket(rel, num_buckets=33).max()) == 31


def test_shaw_max_distance_beyond_int64_is_refused_not_a_promotion_error():
    """max_distance = 2**63 made torch.clamp promote to uint64 ("Promotion for uint16, uint32, uint64 types is not
    supported"); a clipping distance beyond 2**53 is refused, 2**53 still clips nothing."""
    with pytest.raises(ValueError, match=r"^max_distance must be <= 9007199254740992"):
        shaw_relative_positions(3, 3, 2**63)
    assert torch.equal(shaw_relative_positions(2, 3, 2**53) - 2**53, torch.tensor([[-1, 0, 1], [-2, -1, 0]]))


def test_t5_module_default_table_has_32_rows():
    assert T5RelativeBias(2).embedding.weight.shape == (32, 2)


# ----------------------------------------------------------------------------- found by mutation testing (issue 27)


def test_t5_bucket_bounds_depend_on_direction():
    """A causal (unidirectional) T5 bias has num_buckets // 2 exact buckets, a bidirectional one num_buckets // 2 // 2;
    the module validates with its own direction, and the message names the formula of that direction."""
    bias = T5RelativeBias(2, bidirectional=False, num_buckets=2, max_distance=4)  # one exact bucket: allowed causal
    assert bias(3, 3).shape == (1, 2, 3, 3)
    with pytest.raises(ValueError, match=r"^num_buckets=2 leaves no exact buckets; use at least 4$"):
        T5RelativeBias(2, bidirectional=True, num_buckets=2, max_distance=4)
    with pytest.raises(ValueError, match=r"^max_distance \(3\) must exceed the number of exact buckets \(4 = "
                                         r"num_buckets // 2 with num_buckets=8\); lower num_buckets or raise "
                                         r"max_distance$"):
        T5RelativeBias(2, bidirectional=False, num_buckets=8, max_distance=3)
    with pytest.raises(ValueError, match=r"^max_distance \(2\) must exceed the number of exact buckets \(2 = "
                                         r"num_buckets // 2 // 2 with num_buckets=8\)"):
        T5RelativeBias(2, bidirectional=True, num_buckets=8, max_distance=2)
    assert T5RelativeBias(2, bidirectional=True, num_buckets=8, max_distance=3).num_buckets == 8


@pytest.mark.parametrize("num_heads,message", [(0, r"num_heads must be >= 1, got 0$"),
                                               (2**20 + 1, r"num_heads must be <= 1048576, got 1048577$")])
def test_alibi_bias_checks_num_heads_first(num_heads, message):
    """num_heads is refused before the other arguments are looked at and before the memory estimate it enters."""
    with pytest.raises(ValueError, match="^" + message):
        alibi_bias(num_heads, 4, 4, causal="yes")
    with pytest.raises(ValueError, match="^" + message):
        alibi_bias(num_heads, 2**40, 2**40)
