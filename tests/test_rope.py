import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from course_pe import (
    DynamicNTKScaling,
    LongRoPEScaling,
    RotaryEmbedding,
    YaRNScaling,
    apply_rope,
    half_to_interleaved,
    interleaved_to_half,
    permute_qk_weights,
    rope_cos_sin,
    rope_frequencies,
    rotate_with_cos_sin,
)

dims = st.integers(1, 24).map(lambda n: 2 * n)
layouts = st.sampled_from(["interleaved", "half"])


def reference_rope(x: torch.Tensor, positions: list[int], layout: str, base: float = 10000.0) -> torch.Tensor:
    """Pair by pair, with Python floats (float64 throughout)."""
    seq, d = x.shape
    h = d // 2
    out = torch.empty_like(x, dtype=torch.float64)
    for s in range(seq):
        for i in range(h):
            theta = base ** (-2 * i / d)
            angle = positions[s] * theta
            a_idx, b_idx = (2 * i, 2 * i + 1) if layout == "interleaved" else (i, i + h)
            a, b = float(x[s, a_idx]), float(x[s, b_idx])
            out[s, a_idx] = a * math.cos(angle) - b * math.sin(angle)
            out[s, b_idx] = a * math.sin(angle) + b * math.cos(angle)
    return out


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_matches_pairwise_reference(layout):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(7, 10, generator=g, dtype=torch.float64)
    positions = [0, 1, 2, 5, 100, 4095, 70000]
    got = apply_rope(x, torch.tensor(positions), layout=layout)
    # angles up to 7e4 rad: float64 spacing there is 1.5e-11, so agreement to 1e-10 is exact arithmetic
    torch.testing.assert_close(got, reference_rope(x, positions, layout), rtol=0, atol=1e-10)


def test_rotation_direction_counter_clockwise():
    x = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    out = apply_rope(x, torch.tensor([1]))  # theta_0 = 1 rad
    torch.testing.assert_close(out, torch.tensor([[math.cos(1.0), math.sin(1.0)]], dtype=torch.float64))


@given(d=dims, m=st.integers(0, 5000), n=st.integers(0, 5000), layout=layouts, seed=st.integers(0, 10**6))
def test_relative_property(d, m, n, layout, seed):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 1, d, generator=g, dtype=torch.float64)
    lhs = (apply_rope(q, torch.tensor([m]), layout=layout) * apply_rope(k, torch.tensor([n]), layout=layout)).sum()
    rhs = (apply_rope(q, torch.tensor([m - n]), layout=layout) * k).sum()
    assert float(lhs) == pytest.approx(float(rhs), abs=1e-9)


@given(d=dims, p=st.integers(0, 10**6), layout=layouts, seed=st.integers(0, 10**6))
def test_norm_preserved(d, p, layout, seed):
    x = torch.randn(1, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    out = apply_rope(x, torch.tensor([p]), layout=layout)
    assert float(out.norm()) == pytest.approx(float(x.norm()), rel=1e-12)


@given(d=dims, layout=layouts, seed=st.integers(0, 10**6))
def test_position_zero_is_identity(d, layout, seed):
    x = torch.randn(3, 1, d, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(apply_rope(x, torch.zeros(1, dtype=torch.long), layout=layout), x)


@given(d=dims, seed=st.integers(0, 10**6))
def test_layouts_agree_up_to_permutation(d, seed):
    x = torch.randn(2, 5, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    a = interleaved_to_half(apply_rope(x, layout="interleaved"))
    b = apply_rope(interleaved_to_half(x), layout="half")
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    assert torch.equal(half_to_interleaved(interleaved_to_half(x)), x)


def test_weight_permutation_gives_identical_scores():
    torch.manual_seed(0)
    heads, hd, d_model, seq = 2, 8, 16, 6
    wq, wk = torch.randn(heads * hd, d_model, dtype=torch.float64), torch.randn(heads * hd, d_model, dtype=torch.float64)
    x = torch.randn(seq, d_model, dtype=torch.float64)

    def scores(wq, wk, layout):
        q = (x @ wq.T).view(seq, heads, hd).transpose(0, 1)
        k = (x @ wk.T).view(seq, heads, hd).transpose(0, 1)
        return apply_rope(q, layout=layout) @ apply_rope(k, layout=layout).transpose(-1, -2)

    s_inter = scores(wq, wk, "interleaved")
    s_half = scores(permute_qk_weights(wq, heads), permute_qk_weights(wk, heads), "half")
    torch.testing.assert_close(s_inter, s_half, rtol=0, atol=1e-10)
    assert not torch.allclose(s_inter, scores(wq, wk, "half"))  # without the permutation they differ
    back = permute_qk_weights(permute_qk_weights(wq, heads), heads, to="interleaved")
    assert torch.equal(back, wq)


def test_per_sequence_positions():
    x = torch.randn(2, 3, 4, 8, dtype=torch.float64)
    pos = torch.tensor([[0, 1, 2, 3], [10, 11, 12, 13]])
    out = apply_rope(x, pos)
    for b in range(2):
        for h in range(3):
            expected = reference_rope(x[b, h], pos[b].tolist(), "interleaved")
            torch.testing.assert_close(out[b, h], expected, rtol=0, atol=1e-12)


def test_integer_and_bool_inputs_are_refused():
    with pytest.raises(TypeError, match="x must be a floating"):
        apply_rope(torch.ones(3, 8, dtype=torch.long))  # used to return zeros
    with pytest.raises(TypeError, match="positions"):
        apply_rope(torch.randn(3, 8), torch.tensor([True, False, True]))
    with pytest.raises(ValueError, match="finite"):
        apply_rope(torch.randn(2, 8), torch.tensor([0.0, float("nan")]))


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_empty_sequence_in_every_layout_and_path(layout):
    for x in (torch.randn(2, 0, 8), torch.randn(0, 2, 8).transpose(0, 1)):
        out = apply_rope(x, layout=layout)
        assert out.shape == x.shape


def test_default_tables_are_not_cached_for_huge_lengths():
    from course_pe.rope import CACHE_LIMIT, _default_cos_sin

    _default_cos_sin.cache_clear()
    apply_rope(torch.randn(1, CACHE_LIMIT + 1, 2))
    assert _default_cos_sin.cache_info().currsize == 0
    apply_rope(torch.randn(1, 5, 2))
    assert _default_cos_sin.cache_info().currsize == 1


def test_dtype_device_and_bfloat16_positions():
    x = torch.randn(1, 1, 4096, 8).to(torch.bfloat16)
    out = apply_rope(x)
    assert out.dtype == torch.bfloat16
    # position 4095 must be rotated by 4095 * theta, not by bfloat16(4095) = 4096
    assert float(torch.tensor(4095.0, dtype=torch.bfloat16)) == 4096.0
    exact = apply_rope(x[..., 4095:, :].double(), torch.tensor([4095]))
    wrong = apply_rope(x[..., 4095:, :].double(), torch.tensor([4096]))
    err_exact = (out[..., 4095:, :].double() - exact).abs().max()
    err_wrong = (out[..., 4095:, :].double() - wrong).abs().max()
    assert err_exact < 0.02 < err_wrong
    with pytest.raises(TypeError, match="bfloat16"):
        apply_rope(x, torch.arange(4096).to(torch.bfloat16))


def test_partial_rotary():
    x = torch.randn(2, 5, 16)
    out = apply_rope(x, rotary_dim=8)
    assert torch.equal(out[..., 8:], x[..., 8:])
    torch.testing.assert_close(out[..., :8], apply_rope(x[..., :8]))


def test_non_contiguous_input_matches_contiguous():
    x = torch.randn(2, 6, 4, 8).transpose(1, 2)  # (2, 4, 6, 8) non-contiguous
    torch.testing.assert_close(apply_rope(x), apply_rope(x.contiguous()))


def test_large_input_blocks_match_reference():
    x = torch.randn(1, 4, 3000, 64, dtype=torch.float64)
    for layout in ("interleaved", "half"):
        got = apply_rope(x.transpose(1, 2).contiguous().transpose(1, 2), layout=layout)  # strided path
        torch.testing.assert_close(got, apply_rope(x.contiguous(), layout=layout))


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        (dict(layout="diagonal"), ValueError, "layout"),
        (dict(positions=torch.arange(3)), ValueError, "length 3"),
        (dict(positions=torch.zeros(2, 5, dtype=torch.long)), ValueError, r"\(batch, seq\)"),
        (dict(inv_freq=torch.ones(3)), ValueError, "inv_freq"),
        (dict(rotary_dim=32), ValueError, "rotary_dim"),
    ],
)
def test_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        apply_rope(torch.randn(5, 16), **kwargs)


def test_odd_head_dim_is_rejected():
    with pytest.raises(ValueError, match="even"):
        apply_rope(torch.randn(4, 7))


class TestRotaryEmbedding:
    def test_matches_apply_rope(self):
        rope = RotaryEmbedding(16, max_positions=8, layout="half")
        x = torch.randn(2, 3, 20, 16)
        torch.testing.assert_close(rope(x), apply_rope(x, layout="half"))
        assert rope.cached_positions >= 20  # grew
        assert "cos_cached" not in rope.state_dict() and "inv_freq" not in rope.state_dict()

    def test_positions_and_dtype(self):
        rope = RotaryEmbedding(8)
        x = torch.randn(2, 1, 4, 8, dtype=torch.float64)
        pos = torch.tensor([[3, 4, 5, 6], [0, 2, 4, 6]])
        out = rope(x, pos)
        assert out.dtype == torch.float64
        # float64 in, float64 tables: agreement with the pair-by-pair formula to float64 rounding
        for b in range(2):
            expected = reference_rope(x[b, 0], pos[b].tolist(), "interleaved")
            torch.testing.assert_close(out[b, 0], expected, atol=1e-14, rtol=0)

    def test_cache_is_bounded_and_far_positions_are_exact(self):
        rope = RotaryEmbedding(8, max_positions=16)
        x = torch.randn(1, 1, 8, dtype=torch.float64)
        p = 3 * 10**6  # the cache used to grow to 2**22 positions for this one token
        out = rope(x, torch.tensor([p]))
        assert rope.cached_positions <= rope.cache_limit < p
        torch.testing.assert_close(out[0], reference_rope(x[0], [p], "interleaved"), atol=1e-9, rtol=0)
        rope(torch.randn(1, 40, 8))
        assert rope.cached_positions == 64  # ordinary growth (powers of two) below the limit is unchanged

    def test_float_integral_positions_and_empty(self):
        rope = RotaryEmbedding(8)
        x = torch.randn(3, 8, dtype=torch.float64)
        torch.testing.assert_close(rope(x, torch.tensor([0.0, 5.0, 9.0])), rope(x, torch.tensor([0, 5, 9])), rtol=0, atol=0)
        with pytest.raises(ValueError, match="integer positions"):
            rope(x, torch.tensor([0.0, 0.5, 1.0]))
        assert rope(torch.randn(1, 0, 8)).shape == (1, 0, 8)

    def test_dynamic_ntk_short_equals_unscaled_and_resets(self):
        scaling = DynamicNTKScaling(4.0, original_max_positions=16)
        rope = RotaryEmbedding(8, scaling=scaling, max_positions=16)
        plain = RotaryEmbedding(8, max_positions=16)
        short = torch.randn(1, 1, 10, 8)
        torch.testing.assert_close(rope(short), plain(short))
        long = torch.randn(1, 1, 40, 8)
        inv_long, _ = rope_frequencies(8, scaling=scaling, seq_len=40)
        torch.testing.assert_close(rope(long), apply_rope(long, inv_freq=inv_long), atol=1e-6, rtol=0)
        assert not torch.allclose(rope(long), plain(long))
        torch.testing.assert_close(rope(short), plain(short))  # back to the original frequencies

    def test_dynamic_ntk_uses_the_module_base_and_float64(self):
        scaling = DynamicNTKScaling(4.0, original_max_positions=16)
        rope = RotaryEmbedding(8, base=500000.0, scaling=scaling, max_positions=16)
        x = torch.randn(1, 40, 8, dtype=torch.float64)
        out = rope(x)
        new_base = 500000.0 * (4.0 * 40 / 16 - 3.0) ** (8 / 6)  # Dynamic NTK's base for length 40
        torch.testing.assert_close(out[0], reference_rope(x[0], list(range(40)), "interleaved", base=new_base),
                                   rtol=0, atol=1e-12)
        assert rope.inv_freq.dtype == torch.float32  # the exposed buffer: float32 of the new frequencies
        expected = torch.tensor([new_base ** (-2 * i / 8) for i in range(4)], dtype=torch.float64).float()
        assert torch.equal(rope.inv_freq, expected)

    def test_yarn_attention_factor_scales_cos_sin(self):
        scaling = YaRNScaling(4.0, original_max_positions=64)
        rope = RotaryEmbedding(16, scaling=scaling)
        x = torch.randn(1, 1, 5, 16, dtype=torch.float64)
        inv, factor = rope_frequencies(16, scaling=scaling)
        assert factor == pytest.approx(0.1 * math.log(4.0) + 1)
        torch.testing.assert_close(rope(x), factor * apply_rope(x, inv_freq=inv), atol=1e-6, rtol=0)

    def test_errors(self):
        with pytest.raises(ValueError, match="even"):
            RotaryEmbedding(7)
        rope = RotaryEmbedding(8)
        with pytest.raises(ValueError, match="head_dim=8"):
            rope(torch.randn(1, 4, 6))
        with pytest.raises(ValueError, match=">= 0"):
            rope(torch.randn(4, 8), torch.tensor([0, 1, -1, 2]))


# ----------------------------------------------------------------------------- found by mutation testing (tests/MUTATION.md)

import numpy as np  # noqa: E402

from course_pe.rope import rope_cos_sin, rotate_with_cos_sin  # noqa: E402

_LONG_ELEMENTS = 1 << 17  # 512 KiB of float32: the block size of the old blocked path, kept as a "long" input


def numpy_rope(x, positions, *, base=10000.0, layout="interleaved", rotary_dim=None):
    """RoFormer's rotation (Su et al., eq. 34) written out in NumPy float64, independent of course_pe."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1] if rotary_dim is None else rotary_dim
    theta = base ** (-2.0 * np.arange(d // 2) / d)
    angle = np.asarray(positions, dtype=np.float64)[..., None] * theta
    c, s = np.cos(angle), np.sin(angle)
    out = x.copy()
    if layout == "interleaved":
        a, b = x[..., 0:d:2], x[..., 1:d:2]
        out[..., 0:d:2], out[..., 1:d:2] = a * c - b * s, b * c + a * s
    else:
        a, b = x[..., : d // 2], x[..., d // 2 : d]
        out[..., : d // 2], out[..., d // 2 : d] = a * c - b * s, b * c + a * s
    return out


def _cos_sin(positions, d, base=10000.0):
    theta = base ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)
    angle = positions.to(torch.float64)[:, None] * theta
    return torch.cos(angle), torch.sin(angle)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("path", ["fused", "grad", "blocks", "strided", "strided-grad"])
def test_every_arithmetic_path_matches_the_reference(layout, path):
    """rotate_with_cos_sin has three code paths (fused complex multiply for contiguous interleaved input, an
    out-of-place one when gradients are needed, four in-place kernels on half-width views otherwise): each must
    rotate correctly."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 5, 8, generator=g, dtype=torch.float64)
    positions = torch.tensor([0, 1, 7, 100, 12345])
    cos, sin = _cos_sin(positions, 8)
    if path == "grad":
        x.requires_grad_(True)
    if path.startswith("strided"):  # a non-contiguous view: never the fused path
        x = torch.randn(2, 3, 8, 5, generator=g, dtype=torch.float64).transpose(-1, -2)
        assert not x.is_contiguous()
        x.requires_grad_(path == "strided-grad")
    out = rotate_with_cos_sin(x, cos, sin, layout=layout)
    expected = numpy_rope(x.detach().numpy(), positions.numpy(), layout=layout)
    assert out.shape == x.shape and out.dtype == x.dtype
    assert np.allclose(out.detach().numpy(), expected, rtol=0, atol=1e-12)
    if x.requires_grad:  # and the gradient is the inverse rotation of the upstream gradient (orthogonal map)
        w = torch.randn(out.shape, generator=g, dtype=torch.float64)
        (out * w).sum().backward()
        back = numpy_rope(w.numpy(), -positions.numpy(), layout=layout)
        assert np.allclose(x.grad.numpy(), back, rtol=0, atol=1e-12)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_a_long_input_and_broadcast_tables(layout):
    """A long input (once cut into blocks of positions, now rotated by one set of kernels), and a (1, head_dim // 2)
    table shared by every position."""
    seq, d = 2 * _LONG_ELEMENTS // 64 + 3, 32  # 2 heads: a little over 4 of the old blocks
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, seq, d, generator=g, dtype=torch.float64)
    if layout == "interleaved":
        x = x.transpose(0, 1).contiguous().transpose(0, 1)  # non-contiguous: the blocked path
    positions = torch.arange(seq)
    cos, sin = _cos_sin(positions, d)
    out = rotate_with_cos_sin(x, cos, sin, layout=layout)
    assert np.allclose(out.numpy(), numpy_rope(x.numpy(), positions.numpy(), layout=layout), rtol=0, atol=1e-9)
    one_cos, one_sin = _cos_sin(torch.tensor([3]), d)
    out = rotate_with_cos_sin(x, one_cos, one_sin, layout=layout)
    assert np.allclose(out.numpy(), numpy_rope(x.numpy(), np.full(seq, 3), layout=layout), rtol=0, atol=1e-9)


def test_low_precision_results_keep_the_input_dtype():
    for x in (torch.zeros(2, 0, 8, dtype=torch.float16), torch.zeros(0, 3, 8, dtype=torch.bfloat16),
              torch.ones(2, 3, 8, dtype=torch.float16)):
        cos, sin = _cos_sin(torch.arange(x.shape[-2]), 8)
        for layout in ("interleaved", "half"):
            assert rotate_with_cos_sin(x, cos, sin, layout=layout).dtype == x.dtype


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rotary_embedding_partial_rotary(layout):
    """rotary_dim < head_dim: the first rotary_dim dimensions rotate (frequencies of width rotary_dim), the rest
    pass through, at given positions or 0 ... seq - 1."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 3, 6, 12, generator=g, dtype=torch.float64)
    module = RotaryEmbedding(12, rotary_dim=8, layout=layout)
    for positions in (None, torch.tensor([5, 0, 3, 2, 9, 40])):
        pos = np.arange(6) if positions is None else positions.numpy()
        expected = numpy_rope(x.numpy(), pos, layout=layout, rotary_dim=8)
        got = module(x, positions)
        assert got.shape == x.shape and np.allclose(got.numpy(), expected, rtol=0, atol=1e-6)
        assert torch.equal(got[..., 8:], x[..., 8:])
        assert np.allclose(apply_rope(x, positions, layout=layout, rotary_dim=8).numpy(), expected, rtol=0, atol=1e-12)


def test_rotation_follows_x_to_its_device():
    """Tables made on the CPU are moved to x's device (the meta device holds no data; mixing devices fails)."""
    x = torch.empty(2, 3, 8, device="meta")
    cos, sin = _cos_sin(torch.arange(3), 8)
    for layout in ("interleaved", "half"):
        assert rotate_with_cos_sin(x, cos, sin, layout=layout).device.type == "meta"
    assert interleaved_to_half(x).device.type == "meta" and half_to_interleaved(x).device.type == "meta"
    assert permute_qk_weights(torch.empty(16, 4, device="meta"), num_heads=2).device.type == "meta"


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_gradient_reaches_tables_that_need_it(layout):
    """Only cos needs a gradient (e.g. learned frequencies feeding cos but not sin): the differentiable path is
    taken, d(out)/d(cos) = x's own pair entries."""
    x = torch.randn(1, 4, 8, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    x = x.transpose(0, 1).contiguous().transpose(0, 1) if layout == "interleaved" else x  # never the fused path
    cos, sin = _cos_sin(torch.arange(4), 8)
    cos.requires_grad_(True)
    rotate_with_cos_sin(x, cos, sin, layout=layout).sum().backward()
    a, b = (x[..., 0::2], x[..., 1::2]) if layout == "interleaved" else (x[..., :4], x[..., 4:])
    assert torch.allclose(cos.grad, (a + b).sum(0), rtol=0, atol=1e-12)


def test_rope_cos_sin_attention_factor_and_messages():
    positions, inv = torch.arange(5), torch.tensor([1.0, 0.01], dtype=torch.float64)
    cos, sin = rope_cos_sin(positions, inv, dtype=torch.float64)
    cos2, sin2 = rope_cos_sin(positions, inv, dtype=torch.float64, attention_factor=2.0)
    assert torch.equal(cos2, 2 * cos) and torch.equal(sin2, 2 * sin)
    with pytest.raises(ValueError, match=r"^attention_factor must be > 0.0, got 0.0"):
        rope_cos_sin(positions, inv, attention_factor=0.0)
    with pytest.raises(TypeError, match=r"^dtype must be"):
        rope_cos_sin(positions, inv, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"^head_dim \(rows of weight per head\) must be even"):
        permute_qk_weights(torch.zeros(6, 2), num_heads=2)
    with pytest.raises(ValueError, match=r"^weight has 6 rows, not divisible by num_heads=4$"):
        permute_qk_weights(torch.zeros(6, 2), num_heads=4)


def test_non_finite_x_is_rotated_not_refused():
    """x may hold NaN or inf (e.g. masked padding): they propagate; only the tables must be finite."""
    x = torch.ones(1, 3, 4, dtype=torch.float64)
    x[0, 1, 0] = math.nan
    for out in (apply_rope(x), apply_rope(x, torch.arange(3)), RotaryEmbedding(4)(x),
                rotate_with_cos_sin(x, *_cos_sin(torch.arange(3), 4))):
        assert torch.isnan(out[0, 1, :2]).all() and torch.isfinite(out[0, 0]).all() and torch.isfinite(out[0, 2]).all()


def test_rope_messages_say_what_was_given():
    x = torch.zeros(2, 3, 8)
    with pytest.raises(ValueError, match=r"^x must be \(\.\.\., seq, head_dim\), got shape \(8,\)$"):
        apply_rope(torch.zeros(8))
    with pytest.raises(ValueError, match=r"^positions must have shape \(2, 3\) for x of shape \(2, 5, 3, 8\), got \(3, 3\)$"):
        apply_rope(torch.zeros(2, 5, 3, 8), torch.zeros(3, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"^positions must be None, \(seq,\) or \(batch, seq\); got shape \(1, 1, 3\)$"):
        apply_rope(x, torch.zeros(1, 1, 3, dtype=torch.long))
    with pytest.raises(TypeError, match=r"^positions must be a tensor or None, got list$"):
        apply_rope(x, [0, 1, 2])
    with pytest.raises(ValueError, match=r"^inv_freq must have shape \(4,\), got \(3,\)$"):
        apply_rope(x, inv_freq=torch.ones(3))
    with pytest.raises(ValueError, match=r"^head_dim \(last dimension of x\) must be even"):
        apply_rope(torch.zeros(2, 3, 7))
    with pytest.raises(ValueError, match=r"^rotary_dim \(10\) exceeds head_dim \(8\)$"):
        RotaryEmbedding(8, rotary_dim=10)
    assert apply_rope(x, rotary_dim=8).shape == x.shape  # rotary_dim == head_dim is allowed
    with pytest.raises(TypeError, match=r"^x must be a tensor, got list$"):
        interleaved_to_half([1.0, 2.0])
    with pytest.raises(ValueError, match=r"^RotaryEmbedding caches integer positions; use apply_rope for fractional"):
        RotaryEmbedding(8).cos_sin(torch.tensor([0.5]))


def test_rotary_embedding_cache_and_buffers():
    module = RotaryEmbedding(8)
    assert module.cached_positions == 2048  # default max_positions
    assert module.inv_freq.dtype == torch.float32  # the float32 view that checkpoints expose
    assert dict(module.state_dict()) == {}  # inv_freq and the tables are derived, never saved
    reference = RotaryEmbedding(8).cos_sin(torch.arange(6))
    module.half()  # the cache is rebuilt in float64 rather than read back rounded
    cos, sin = module.cos_sin(torch.arange(6))
    assert cos.dtype == torch.float64 and torch.equal(cos, reference[0]) and torch.equal(sin, reference[1])
    assert module.cos_sin(torch.tensor([2.0**53], dtype=torch.float64))[0].shape == (1, 4)  # largest exact position
    with pytest.raises(ValueError, match=r"^positions must lie in \[-2\*\*53, 2\*\*53\]"):
        module.cos_sin(torch.tensor([2.0**53 + 2], dtype=torch.float64))
    with pytest.raises(ValueError, match=r"^positions must lie in \[-2\*\*53, 2\*\*53\]"):
        module.cos_sin(torch.tensor([2**53 + 1]))  # an int64 position float64 cannot hold


def test_rotary_embedding_dynamic_ntk_uses_the_seq_len_given():
    scaling = DynamicNTKScaling(2.0, 16)
    module = RotaryEmbedding(8, scaling=scaling)
    cos, sin = module.cos_sin(torch.arange(4), seq_len=64)
    inv, _ = rope_frequencies(8, scaling=scaling, seq_len=64, dtype=torch.float64)
    angle = torch.arange(4, dtype=torch.float64)[:, None] * inv
    assert torch.allclose(cos, angle.cos(), rtol=0, atol=1e-12) and torch.allclose(sin, angle.sin(), rtol=0, atol=1e-12)


def test_rotary_embedding_beyond_the_cache_keeps_the_attention_factor():
    scaling = YaRNScaling(4.0, 64)
    module = RotaryEmbedding(8, scaling=scaling, max_positions=16)
    inv, factor = rope_frequencies(8, scaling=scaling, dtype=torch.float64)
    assert factor != 1.0
    far = torch.tensor([module.cache_limit + 5])
    cos, sin = module.cos_sin(far)
    assert torch.allclose(cos, factor * (far.double()[:, None] * inv).cos(), rtol=0, atol=1e-9)


def test_rotate_with_cos_sin_refuses_bad_tables_and_widths():
    x = torch.zeros(3, 8)
    with pytest.raises(ValueError, match=r"^cos and sin must both have last dimension head_dim // 2 = 4"):
        rotate_with_cos_sin(x, torch.zeros(3, 3), torch.zeros(3, 3))
    with pytest.raises(ValueError, match=r"^head_dim \(last dimension of x\) must be even"):
        rotate_with_cos_sin(torch.zeros(3, 7), torch.zeros(3, 3), torch.zeros(3, 3))
    with pytest.raises(TypeError, match=r"^positions in torch.float16 have already lost precision .*pass integer or "
                                        r"float32 positions$"):
        apply_rope(x[None], torch.zeros(3, dtype=torch.float16))
    with pytest.raises(ValueError, match=r"^weight must be 1-D or 2-D"):
        permute_qk_weights(torch.zeros(2, 8, 4), num_heads=2)


# ----------------------------------------------------------------------------- red-team probe, 2026-11-24 (issue 27)


@pytest.mark.parametrize("length", [6, 4, 9])
def test_uint8_positions_are_positions_not_masks(length):
    """uint8 index tensors are boolean masks to PyTorch; RotaryEmbedding must read them as positions (it returned
    the rotation of rows 0 ... 5 for positions [5] * 6, and an IndexError about a mask for other lengths)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, length, 8, generator=g)
    module = RotaryEmbedding(8, max_positions=6)
    for values in ([5] * length, list(range(length)), [255, 0] * (length // 2) + [7] * (length % 2)):
        wide, narrow = torch.tensor(values), torch.tensor(values, dtype=torch.uint8)
        assert torch.equal(module(x, narrow), module(x, wide))
        assert torch.equal(module.cos_sin(narrow)[0], module.cos_sin(wide)[0])
        assert torch.equal(apply_rope(x, narrow), apply_rope(x, wide))


def test_positions_beyond_2_53_are_refused_not_rounded():
    """2**53 + 1 used to be rounded to 2**53 without a word (two positions, one rotation)."""
    x = torch.randn(1, 4, dtype=torch.float64)
    inv = rope_frequencies(4, dtype=torch.float64)[0]
    exact = apply_rope(x, torch.tensor([2**53]))  # the largest exact position still works
    assert torch.isfinite(exact).all()
    for bad in (torch.tensor([2**53 + 1]), torch.tensor([-(2**53) - 1]), torch.tensor([2**62]),
                torch.tensor([-(2**63)]), torch.tensor([1e30], dtype=torch.float64)):
        for call in (lambda p: apply_rope(x, p), lambda p: rope_cos_sin(p, inv), lambda p: RotaryEmbedding(4)(x, p)):
            with pytest.raises(ValueError, match=r"^positions must lie in \[-2\*\*53, 2\*\*53\]"):
                call(bad)


# ----------------------------------------------------------------------------- notation decision 6: P and R_m as matrices


@pytest.mark.parametrize("d", [2, 4, 8, 12])
def test_layout_permutation_as_a_matrix(d):
    """interleaved_to_half(x) = P x with P = eye[layout_permutation(d, to="half")]; applied to eye(d) it returns P^T;
    half_to_interleaved is P^T (and returns P on the identity)."""
    from course_pe import layout_permutation

    P = torch.eye(d, dtype=torch.float64)[layout_permutation(d, to="half")]
    x = torch.randn(d, dtype=torch.float64, generator=torch.Generator().manual_seed(d))
    assert torch.equal(interleaved_to_half(x), P @ x)
    assert torch.equal(half_to_interleaved(x), P.T @ x)
    assert torch.equal(interleaved_to_half(torch.eye(d, dtype=torch.float64)), P.T)
    assert torch.equal(half_to_interleaved(torch.eye(d, dtype=torch.float64)), P)
    assert torch.equal(torch.eye(d, dtype=torch.float64)[layout_permutation(d, to="interleaved")], P.T)
    if d >= 6:  # (d = 4 swaps dims 1 and 2: P is symmetric there)
        assert not torch.equal(P, P.T)  # the statements are not vacuous


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_on_the_identity_returns_r_m_transposed(layout):
    d, m = 6, 3
    eye = torch.eye(d, dtype=torch.float64)
    R_m_T = apply_rope(eye, torch.full((d,), m), layout=layout)
    x = torch.randn(d, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(R_m_T.T @ x, apply_rope(x[None], torch.tensor([m]), layout=layout)[0], rtol=0, atol=1e-15)
    assert not torch.allclose(R_m_T, R_m_T.T)


# ----------------------------------------------------------------------------- reference numerics (angle_dtype)


def _exact_angle_errors(base: float, p: int, d: int = 128) -> tuple[float, float]:
    """Largest |angle - exact| over the pairs at position p, for float32 (reference) and float64 (default) angles;
    exact = p * base**(-2i/d) in 40-digit mpmath."""
    from mpmath import mp, mpf

    mp.dps = 40
    exact = [mpf(p) * mpf(base) ** (mpf(-2 * i) / d) for i in range(d // 2)]
    inv32 = rope_frequencies(d, base=base, angle_dtype=torch.float32)[0]
    inv64 = rope_frequencies(d, base=base, dtype=torch.float64)[0]
    a32 = (torch.tensor([p]).float()[:, None] * inv32)[0].tolist()
    a64 = (torch.tensor([p]).double()[:, None] * inv64)[0].tolist()
    return (max(abs(float(mpf(a) - e)) for a, e in zip(a32, exact)),
            max(abs(float(mpf(a) - e)) for a, e in zip(a64, exact)))


def test_documented_angle_errors():
    """The numbers of the precision note in course_pe.rope's docstring, measured again (2 significant digits)."""
    import course_pe.rope as module

    doc = " ".join(module.__doc__.split())
    e32, e64 = _exact_angle_errors(10000.0, 2047)
    assert f"{e64:.1e}".replace("e-", "e-") == "8.5e-14" and "8.5e-14 rad at position 2047" in doc
    assert f"{e32:.1e}" == "5.8e-05" and "5.8e-5 rad at position 2047" in doc
    for p, text in ((10**4, "3.2e-4"), (10**5, "5.2e-3"), (10**6, "5.2e-2")):
        e32, e64 = _exact_angle_errors(10000.0, p)
        assert f"{e32:.1e}" == text.replace("e-", "e-0") and text in doc, (p, e32)
        assert e64 < 1e-10
    assert f"{_exact_angle_errors(10000.0, 10**6)[1]:.1e}" == "6.4e-11" and "6.4e-11 rad" in doc
    for p, text in ((2047, "1.1e-4"), (10**4, "3.2e-4"), (10**5, "4.6e-3"), (10**6, "4.6e-2")):
        assert f"{_exact_angle_errors(500000.0, p)[0]:.1e}" == text.replace("e-", "e-0") and text in doc


def _meta_precompute_angles(dim: int, end: int, theta: float) -> torch.Tensor:
    """Transcription of the float32 steps of Meta's ``precompute_freqs_cis`` (llama-models): frequencies from
    ``arange(0, dim, 2).float() / dim``, positions ``arange(end, dtype=float32)``, their outer product."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, dtype=torch.float32)
    return torch.outer(t, freqs)


def _torchtune_rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Transcription of torchtune's ``RotaryPositionalEmbeddings.forward`` arithmetic on float32 pairs (2i, 2i+1)."""
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)
    out = torch.stack([pairs[..., 0] * cos - pairs[..., 1] * sin, pairs[..., 1] * cos + pairs[..., 0] * sin], -1)
    return out.flatten(-2).type_as(x)


@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_float32_angles_are_the_references_bit_for_bit(base):
    d, end = 128, 70000
    meta = _meta_precompute_angles(d, end, base)
    cos, sin = RotaryEmbedding(d, base=base, angle_dtype=torch.float32).cos_sin(torch.arange(end))
    # float32 values held in the float64 cache: identical to cos/sin of Meta's (and torchtune's) float32 angles
    assert torch.equal(cos.float(), meta.cos()) and torch.equal(sin.float(), meta.sin())
    assert torch.equal(cos, cos.float().double())
    # Meta's torch.polar uses another cos/sin routine: equal to the last bit or one unit in the last place away
    polar = torch.polar(torch.ones_like(meta), meta)
    assert (polar.real - cos.float()).abs().max() <= 2**-23 and (polar.imag - sin.float()).abs().max() <= 2**-23
    # the default (float64 angles) parts from them at large positions, as the docstring says
    exact, _ = RotaryEmbedding(d, base=base).cos_sin(torch.arange(end))
    assert float((exact - cos).abs().max()) > 1e-3


def test_float32_rotation_is_torchtunes_in_the_interleaved_layout():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 50, 64, generator=g)
    positions = torch.arange(1000, 1050)
    angles = _meta_precompute_angles(64, 1050, 10000.0)[1000:]
    ours = apply_rope(x, positions, angle_dtype=torch.float32)
    assert torch.equal(ours, _torchtune_rotate(x, angles.cos(), angles.sin()))
    assert torch.equal(RotaryEmbedding(64, angle_dtype=torch.float32)(x, positions), ours)
    assert not torch.equal(ours, apply_rope(x, positions))  # the default differs (exact angles)


def test_angle_dtype_is_checked():
    x = torch.randn(3, 8)
    for bad in (torch.float16, torch.bfloat16):
        with pytest.raises(ValueError, match="angle_dtype"):
            apply_rope(x, angle_dtype=bad)
        with pytest.raises(ValueError, match="angle_dtype"):
            RotaryEmbedding(8, angle_dtype=bad)
    with pytest.raises(TypeError, match="angle_dtype"):
        rope_cos_sin(torch.arange(3), torch.ones(4), angle_dtype="float32")


def test_hugging_face_layout_hint():
    """F14 (newcomer review): positions that match dim 1 of a 4-D x suggest x.transpose(1, 2); other mismatches do not."""
    hint = r"; x looks like \(batch, seq, heads, head_dim\), the layout of Hugging Face's projections before their " \
           r"transpose: pass x.transpose\(1, 2\) \(course_pe rotates along dim -2, the sequence axis of " \
           r"\(batch, heads, seq, head_dim\)\) and transpose the result back$"
    hf = torch.zeros(2, 10, 4, 64)
    with pytest.raises(ValueError, match=r"^positions has length 10 but x has seq = 4 \(shape \(2, 10, 4, 64\)\)" + hint):
        apply_rope(hf, torch.arange(10))
    with pytest.raises(ValueError, match=r"^positions must have shape \(2, 4\) for x of shape \(2, 10, 4, 64\), "
                                         r"got \(2, 10\)" + hint):
        apply_rope(hf, torch.zeros(2, 10, dtype=torch.long))
    for x, positions in ((torch.zeros(2, 4, 10, 64), torch.arange(7)), (torch.zeros(3, 10, 64), torch.arange(3)),
                         (torch.zeros(2, 10, 10, 64), torch.arange(9)), (torch.zeros(1, 2, 3, 4, 64), torch.arange(2))):
        with pytest.raises(ValueError) as info:
            apply_rope(x, positions)
        assert "Hugging Face" not in str(info.value)
    assert apply_rope(hf.transpose(1, 2), torch.arange(10)).transpose(1, 2).shape == hf.shape


def test_large_position_angle_bound():
    """Red team 2: positions up to 2**53 are exact but their float64 angles are not. The docstrings state the bound
    2 |p theta_i| 2**-53 and the largest errors at 2**40 and 2**53 - 1; measured here against 40-digit mpmath."""
    from mpmath import mp, mpf

    import course_pe.rope as module

    mp.dps = 40
    d, base = 128, 10000.0
    inv64 = rope_frequencies(d, base=base, dtype=torch.float64)[0]
    for p in (10**6, 2**40, 2**40 + 12345, 2**45 + 3, 123456789012345, 2**52 + 1, 2**53 - 1, 2**53):
        exact = [mpf(p) * mpf(base) ** (mpf(-2 * i) / d) for i in range(d // 2)]
        angles = (torch.tensor([p]).double()[:, None] * inv64)[0].tolist()
        for a, e in zip(angles, exact):
            assert abs(float(mpf(a) - e)) <= 2 * float(e) * 2.0**-53, (p, a)
    doc = " ".join(module.__doc__.split())
    assert f"{_exact_angle_errors(base, 2**40)[1]:.1e}" == "5.2e-05" and "5.2e-5 rad at ``p = 2**40``" in doc
    assert f"{_exact_angle_errors(base, 2**53 - 1)[1]:.2f}" == "0.51" and "0.51 rad at ``2**53 - 1``" in doc


# --------------------------------------------------------------------------- found by mutation testing (issue 27)


def test_offset_checks_name_offset_and_keep_their_bounds():
    """``offset``: an int in ``[0, 2**53 - seq]`` or a ``(batch,)`` integer tensor for 4-D ``x``, same bounds."""
    x4 = torch.ones(2, 1, 3, 4)
    seq = 3
    for bad, error, message in (
        (torch.zeros(2, 1, dtype=torch.long), ValueError, r"offset must be 1-D, got shape \(2, 1\)$"),
        (torch.zeros(2), TypeError, r"offset must be an integer"),
        (-1, ValueError, r"offset must be >= 0, got -1$"),
        (torch.tensor([0, -1]), ValueError, r"offset must be >= 0"),
        (torch.tensor([0, 2**53 - seq + 1]), ValueError, rf"offset must be < {2**53 - seq + 1}, got {2**53 - seq + 1}$"),
        (2**53 - seq + 1, ValueError, rf"offset must be <= {2**53 - seq}, got {2**53 - seq + 1}$"),
    ):
        for call in (lambda: apply_rope(x4, offset=bad), lambda: RotaryEmbedding(4, max_positions=8)(x4, offset=bad)):
            with pytest.raises(error, match="^" + message):
                call()
    # the largest offsets are accepted, as int and as tensor
    top = 2**53 - seq
    assert apply_rope(x4, offset=top).shape == x4.shape
    assert apply_rope(x4, offset=torch.tensor([0, top])).shape == x4.shape
    # a per-sequence offset needs 4-D x whose batch it matches
    with pytest.raises(ValueError, match=r"^a per-sequence offset must have shape \(batch,\) for x of shape "
                                         r"\(batch, heads, seq, head_dim\); got offset of shape \(2,\) and x of shape "
                                         r"\(2, 3, 4\)$"):
        apply_rope(torch.ones(2, 3, 4), offset=torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"^a per-sequence offset .* got offset of shape \(3,\) and x of shape "
                                         r"\(2, 1, 3, 4\)$"):
        apply_rope(x4, offset=torch.zeros(3, dtype=torch.long))


def test_positions_at_minus_two_to_the_53_are_accepted():
    """``|p| <= 2**53`` is allowed, both ends included, for integer and float64 positions."""
    inv_freq = torch.tensor([1.0, 0.5], dtype=torch.float64)
    for positions in (torch.tensor([-(2**53), 2**53]), torch.tensor([-(2.0**53), 2.0**53], dtype=torch.float64)):
        cos, _ = rope_cos_sin(positions, inv_freq)
        assert cos.shape == (2, 2)
    for positions in (torch.tensor([-(2**53) - 1]), torch.tensor([-(2.0**53) - 2], dtype=torch.float64)):
        with pytest.raises(ValueError, match=r"^positions must lie in \[-2\*\*53, 2\*\*53\]"):
            rope_cos_sin(positions, inv_freq)


def test_layout_hint_compares_the_sequence_axis_not_the_head_width():
    """x of shape (1, 6, 4, 6) with 6 positions looks like (batch, seq, heads, head_dim): the hint is given even
    though head_dim happens to equal the position count."""
    with pytest.raises(ValueError, match=r"x looks like \(batch, seq, heads, head_dim\)"):
        apply_rope(torch.zeros(1, 6, 4, 6), positions=torch.arange(6))
    with pytest.raises(ValueError, match=r"x looks like \(batch, seq, heads, head_dim\)"):
        apply_rope(torch.zeros(2, 6, 4, 6), positions=torch.arange(12).reshape(2, 6))


@pytest.mark.parametrize("call,message", [
    (lambda: rotate_with_cos_sin(torch.zeros(4), torch.zeros(1, 2), torch.zeros(1, 2)), r"x must have at least 2 dim"),
    (lambda: rotate_with_cos_sin(torch.zeros(1, 4), torch.zeros(2), torch.zeros(1, 2)), r"cos must have at least 2 dim"),
    (lambda: rotate_with_cos_sin(torch.zeros(1, 4), torch.zeros(1, 2), torch.zeros(2)), r"sin must have at least 2 dim"),
    (lambda: rope_cos_sin(torch.tensor([True]), torch.ones(2)), r"positions must"),
    (lambda: RotaryEmbedding(4).cos_sin(torch.tensor([True])), r"positions must"),
    (lambda: apply_rope(torch.zeros(1, 4), angle_dtype=torch.int32), r"angle_dtype must be a floating"),
    (lambda: RotaryEmbedding(4).cos_sin(torch.tensor([1]), seq_len=2**53 + 2), r"seq_len must be <= 9007199254740993"),
])
def test_messages_begin_with_the_argument_rope(call, message):
    with pytest.raises((TypeError, ValueError), match="^" + message):
        call()


def test_rope_cos_sin_passes_angle_dtype_on():
    """``rope_cos_sin(angle_dtype=torch.float32)``: angles, cos and sin in float32 (the reference numerics)."""
    positions = torch.tensor([0, 1, 2047, 100_000])
    inv_freq = 10000.0 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64)
    cos, sin = rope_cos_sin(positions, inv_freq, dtype=torch.float64, angle_dtype=torch.float32)
    angles = positions.float()[:, None] * inv_freq.float()
    assert torch.equal(cos, angles.cos().double()) and torch.equal(sin, angles.sin().double())
    exact, _ = rope_cos_sin(positions, inv_freq, dtype=torch.float64)
    assert not torch.equal(cos, exact)  # float32 angles at position 100000 are visibly off


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rotation_of_many_positions(layout):
    """x of 2 x 1536 x 128 float32 values (the eager path, no grad, a non-contiguous x for the interleaved layout):
    every position must be rotated by its own row of cos/sin."""
    g = torch.Generator().manual_seed(27)
    seq, d = 1536, 128
    x = torch.randn(1, 2, d, seq, generator=g).transpose(-1, -2)  # non-contiguous (1, 2, seq, d)
    if layout == "half":
        x = x.contiguous()
    cos, sin = rope_cos_sin(torch.arange(seq), 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d))
    got = rotate_with_cos_sin(x, cos, sin, layout=layout)
    xd, c, s = x.double(), cos.double(), sin.double()
    a, b = (xd[..., : d // 2], xd[..., d // 2:]) if layout == "half" else (xd[..., 0::2], xd[..., 1::2])
    first, second = a * c - b * s, b * c + a * s
    expected = (torch.cat([first, second], -1) if layout == "half"
                else torch.stack([first, second], -1).flatten(-2))
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=1e-5)


def test_apply_rope_rotates_low_precision_in_float32():
    """bfloat16/float16 x is rotated in float32 and rounded once (not in bfloat16 arithmetic)."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1, 2, 64, 32, generator=g)
    for dtype in (torch.bfloat16, torch.float16):
        xl = x.to(dtype)
        assert torch.equal(apply_rope(xl, layout="half"), apply_rope(xl.float(), layout="half").to(dtype))
        assert torch.equal(RotaryEmbedding(32)(xl), RotaryEmbedding(32)(xl.float()).to(dtype))


@pytest.mark.parametrize("angle_dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("scaling", [None, YaRNScaling(4.0, 16), DynamicNTKScaling(2.0, 16),
                                     LongRoPEScaling([1.0, 1.5, 2.0, 3.0], [2.0, 3.0, 5.0, 7.0], 16, factor=4.0)],
                         ids=["none", "yarn", "dynamic", "longrope"])
def test_rotary_embedding_under_vmap_beyond_its_cache(scaling, angle_dtype):
    """Inside ``torch.func.vmap`` (``train_seeds``) the module cannot grow its cache or change its frequencies:
    positions beyond the cache and length-dependent scalings are computed for the call, with the scaling's
    frequencies, attention factor and angle dtype, as outside vmap."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 1, 2, 24, 8, generator=g, dtype=torch.float64)  # 24 positions: beyond 8 cached, 16 original
    module = RotaryEmbedding(8, scaling=scaling, max_positions=8, angle_dtype=angle_dtype, layout="half")
    got = torch.func.vmap(module)(x)
    assert module.cached_positions == 8 and module._freq_seq_len is None  # nothing stored inside the transform
    fresh = RotaryEmbedding(8, scaling=scaling, max_positions=8, angle_dtype=angle_dtype, layout="half")
    expected = torch.stack([fresh(x[i]) for i in range(2)])
    torch.testing.assert_close(got, expected, rtol=0, atol=4e-15)


def test_rotary_embedding_float32_angles_keep_float64_tables_and_say_so():
    """``cos_sin`` returns float64 tables whatever the angle dtype (float32 angles, widened), and ``repr`` names a
    non-default angle dtype."""
    module = RotaryEmbedding(8, max_positions=16, angle_dtype=torch.float32)
    cos, sin = module.cos_sin(torch.arange(4))
    assert cos.dtype == sin.dtype == torch.float64 and module.cos_cached.dtype == torch.float64
    angles = torch.arange(4).float()[:, None] * module.inv_freq.float()
    assert torch.equal(cos, angles.cos().double())
    assert repr(module).endswith("angle_dtype=torch.float32)")
    assert "angle_dtype" not in repr(RotaryEmbedding(8)) and repr(RotaryEmbedding(8)).endswith("scaling=None)")
    # past the bounded cache (cache_limit = 8192 rows) the rows computed for the call are float64 too
    far = torch.tensor([9000, 20000])
    cos_far, sin_far = module.cos_sin(far)
    assert cos_far.dtype == sin_far.dtype == torch.float64
    assert torch.equal(cos_far, (far.float()[:, None] * module.inv_freq.float()).cos().double())


def test_permute_qk_weights_moves_non_finite_values_too():
    """A permutation of rows: NaN and inf are moved like any value, not refused."""
    weight = torch.arange(16.0).reshape(4, 4)
    weight[1, 2], weight[3, 0] = float("nan"), float("inf")
    out = permute_qk_weights(weight, 1, to="half")
    torch.testing.assert_close(out, weight[layout_permutation_rows(4)], rtol=0, atol=0, equal_nan=True)
    assert out.isnan().sum() == 1 and out.isinf().sum() == 1


def layout_permutation_rows(head_dim: int) -> list[int]:
    """Rows of one head in the half layout: the even rows (first of each pair), then the odd ones."""
    return list(range(0, head_dim, 2)) + list(range(1, head_dim, 2))


def test_rotary_embedding_under_vmap_uses_the_given_seq_len():
    """Dynamic NTK inside vmap: an explicit ``seq_len`` (40) sets the frequencies, not the positions' length (24)."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 1, 2, 24, 8, generator=g, dtype=torch.float64)
    scaling = DynamicNTKScaling(2.0, 16)
    module = RotaryEmbedding(8, scaling=scaling, max_positions=8, layout="half")
    got = torch.func.vmap(lambda xb: module(xb, seq_len=40))(x)
    fresh = RotaryEmbedding(8, scaling=scaling, max_positions=8, layout="half")
    expected = torch.stack([fresh(x[i], seq_len=40) for i in range(2)])
    torch.testing.assert_close(got, expected, rtol=0, atol=4e-15)
    assert not torch.allclose(got, torch.func.vmap(module)(x))  # 24 gives other frequencies


def _models_call(models):
    from torch.func import functional_call, stack_module_state

    params, buffers = stack_module_state(models)
    shell = RotaryEmbedding(8, scaling=models[0].scaling, max_positions=models[0].cached_positions, layout="half")
    return params, buffers, lambda p, b, x: functional_call(shell, (p, b), (x,))


def test_rotary_embedding_vmapped_over_models_with_different_caches():
    """``train_seeds``' case: vmap over stacked models whose caches differ. Inside the cache each model reads its
    own rows; an input that needs rows or frequencies the caches do not hold is refused (they would all be computed
    from the first model's scaling), saying what it needs."""
    x = torch.randn(2, 1, 12, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    models = [RotaryEmbedding(8, scaling=YaRNScaling(f, 16), max_positions=16, layout="half") for f in (2.0, 4.0)]
    params, buffers, call = _models_call(models)
    out = torch.func.vmap(call)(params, buffers, torch.stack([x, x]))
    for i in range(2):
        torch.testing.assert_close(out[i], models[i](x), rtol=0, atol=4e-15)
    models = [RotaryEmbedding(8, scaling=YaRNScaling(f, 16), max_positions=8, layout="half") for f in (2.0, 4.0)]
    params, buffers, call = _models_call(models)
    with pytest.raises(ValueError, match=r"^RotaryEmbedding: the models trained together have different cos/sin caches "
                                         r"\(different RoPE scalings\), and this input needs positions up to 11, beyond "
                                         r"the 8 cached, which would be computed from the first model's scaling for "
                                         r"every model\. Give every model a cache that covers the input \(max_positions "
                                         r">= the input length\) and a scaling that does not depend on the length, or "
                                         r"train the models separately$"):
        torch.func.vmap(call)(params, buffers, torch.stack([x, x]))
    models = [RotaryEmbedding(8, scaling=DynamicNTKScaling(f, 8), max_positions=16, layout="half") for f in (2.0, 4.0)]
    params, buffers, call = _models_call(models)
    with pytest.raises(ValueError, match=r"needs new frequencies \(length 12, scaling DynamicNTKScaling\(factor=2\.0, "
                                         r"original_max_positions=8\)\), which would be computed"):
        torch.func.vmap(call)(params, buffers, torch.stack([x, x]))


# --------------------------------------------------------------------------- vmap over models with one shared input
# (found by mutation testing, issue 27: inside torch.func, forward looked at x alone to decide whether it was
# transformed, so a shared x with stacked buffers silently used the first model's scaling beyond the cache)


def _stacked_rotaries(max_positions: int):
    from torch.func import stack_module_state

    models = [RotaryEmbedding(8, max_positions=max_positions, scaling=YaRNScaling(f, original_max_positions=4))
              for f in (2.0, 4.0)]
    params, buffers = stack_module_state(models)
    return models, params, buffers


def test_vmap_over_models_with_a_shared_input_rotates_each_model_by_its_own_cache():
    from torch.func import functional_call, vmap

    models, params, buffers = _stacked_rotaries(max_positions=16)
    x = torch.randn(1, 2, 12, 8, dtype=torch.float64)

    def run(p, b, x):
        return functional_call(models[0], (p, b), (x,))

    out = vmap(run, in_dims=(0, 0, None))(params, buffers, x)
    assert out.shape == (2, 1, 2, 12, 8)
    for k, model in enumerate(models):
        torch.testing.assert_close(out[k], model(x))
    assert not torch.allclose(out[0], out[1])  # the two scalings differ


def test_vmap_over_models_with_a_shared_input_beyond_the_cache_is_refused():
    from torch.func import functional_call, vmap

    models, params, buffers = _stacked_rotaries(max_positions=8)
    x = torch.randn(1, 2, 12, 8, dtype=torch.float64)

    def run(p, b, x):
        return functional_call(models[0], (p, b), (x,))

    with pytest.raises(ValueError, match="different cos/sin caches"):
        vmap(run, in_dims=(0, 0, None))(params, buffers, x)
