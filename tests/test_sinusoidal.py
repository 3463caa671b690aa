import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from course_pe import (
    SinusoidalPositionalEncoding,
    shift_matrix,
    sinusoidal_encoding,
    sinusoidal_encoding_np,
    sinusoidal_frequencies,
    sinusoidal_wavelengths,
)
from course_pe.sinusoidal import CACHE_LIMIT


def reference(p: int, dim: int, d_model: int, base: float = 10000.0) -> float:
    """The paper's formula, one entry at a time, in Python floats."""
    i = dim // 2
    angle = p / base ** (2 * i / d_model)
    return math.sin(angle) if dim % 2 == 0 else math.cos(angle)


def test_matches_formula_entry_by_entry():
    table = sinusoidal_encoding_np(50, 16)
    expected = np.array([[reference(p, k, 16) for k in range(16)] for p in range(50)])
    np.testing.assert_allclose(table, expected, rtol=0, atol=1e-13)  # p / b**e vs p * b**-e: 1 ulp of the angle


def test_d_model_4_worked_values():
    # d_model = 4: pair 0 has frequency 1, pair 1 has frequency 1/100.
    pe = sinusoidal_encoding_np(10, 4)
    assert pe[1, 0] == pytest.approx(math.sin(1.0), abs=1e-15)  # 0.8415, not sin(0.0001)
    assert pe[1, 1] == pytest.approx(math.cos(1.0), abs=1e-15)
    assert pe[1, 2] == pytest.approx(math.sin(0.01), abs=1e-15)
    assert pe[2, 2] == pytest.approx(0.019998666693333084, abs=1e-15)
    np.testing.assert_allclose(pe[0], [0, 1, 0, 1])


def test_torch_table_is_float64_rounded_once():
    t32 = sinusoidal_encoding(100, 32)
    t64 = sinusoidal_encoding(100, 32, dtype=torch.float64)
    assert t32.dtype == torch.float32 and t64.dtype == torch.float64
    assert torch.equal(t32, t64.to(torch.float32))


def test_half_layout_is_a_permutation_of_interleaved():
    inter = sinusoidal_encoding_np(20, 8)
    half = sinusoidal_encoding_np(20, 8, layout="half")
    np.testing.assert_array_equal(half[:, :4], inter[:, 0::2])
    np.testing.assert_array_equal(half[:, 4:], inter[:, 1::2])


def test_half_layout_matches_the_rope_layout_permutation():
    # one name, one arrangement: the sinusoidal "half" table is the interleaved one with its columns
    # reordered by the same permutation that RoPE's interleaved_to_half applies (pair i -> dims (i, i + d/2))
    from course_pe import interleaved_to_half, layout_permutation

    inter = sinusoidal_encoding(7, 10, dtype=torch.float64)
    half = sinusoidal_encoding(7, 10, layout="half", dtype=torch.float64)
    assert torch.equal(inter[:, layout_permutation(10, to="half")], half)
    assert torch.equal(interleaved_to_half(inter), half)


@pytest.mark.parametrize(
    "call",
    [
        lambda: sinusoidal_encoding_np(4, 8, layout="blocks"),
        lambda: sinusoidal_encoding(4, 8, layout="blocks"),
        lambda: shift_matrix(1, 8, layout="blocks"),
        lambda: SinusoidalPositionalEncoding(8, layout="blocks"),
    ],
)
def test_former_layout_name_blocks_is_refused_with_the_new_name(call):
    with pytest.raises(ValueError, match=r"'blocks' is now called 'half'"):
        call()


def test_unknown_layout_still_lists_the_choices():
    with pytest.raises(ValueError, match=r"expected one of 'interleaved', 'half'"):
        sinusoidal_encoding_np(4, 8, layout="halves")


def test_start_offset():
    np.testing.assert_allclose(sinusoidal_encoding_np(5, 8, start=7), sinusoidal_encoding_np(12, 8)[7:], atol=0)


def test_frequencies_and_longest_wavelength():
    omega = sinusoidal_frequencies(512)
    assert omega[0] == 1.0
    assert np.all(np.diff(omega) < 0)
    longest = sinusoidal_wavelengths(512).max()
    assert longest == pytest.approx(2 * math.pi * 10000 ** (510 / 512))
    assert longest < 2 * math.pi * 10000


@given(
    d_model=st.integers(1, 32).map(lambda n: 2 * n),
    p=st.integers(0, 5000),
    k=st.integers(-2000, 2000),
    layout=st.sampled_from(["interleaved", "half"]),
)
def test_shift_theorem(d_model, p, k, layout):
    if p + k < 0:
        k = -p
    pe = sinusoidal_encoding(p + max(k, 0) + 1, d_model, dtype=torch.float64, layout=layout)
    m = shift_matrix(k, d_model, layout=layout)
    torch.testing.assert_close(m @ pe[p], pe[p + k], rtol=0, atol=1e-9)


@given(d_model=st.integers(1, 16).map(lambda n: 2 * n), k=st.integers(-100, 100))
def test_shift_matrix_is_orthogonal_and_composes(d_model, k):
    m = shift_matrix(k, d_model)
    torch.testing.assert_close(m.T @ m, torch.eye(d_model, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(shift_matrix(3, d_model) @ m, shift_matrix(k + 3, d_model), atol=1e-10, rtol=0)


@given(d_model=st.integers(1, 32).map(lambda n: 2 * n), p=st.integers(0, 10**6))
def test_norm_squared_is_half_d(d_model, p):
    v = sinusoidal_encoding_np(1, d_model, start=p)[0]
    assert float(v @ v) == pytest.approx(d_model / 2, abs=1e-9)


def test_dot_product_depends_only_on_offset():
    pe = sinusoidal_encoding_np(300, 32)
    for k in (0, 1, 5, 40):
        dots = [pe[p] @ pe[p + k] for p in range(0, 250, 7)]
        np.testing.assert_allclose(dots, dots[0], atol=1e-12)


@pytest.mark.parametrize("d_model", [0, 3, -2, 7])
def test_rejects_bad_width(d_model):
    with pytest.raises(ValueError, match="d_model"):
        sinusoidal_encoding(4, d_model)


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="layout"):
        sinusoidal_encoding(4, 8, layout="sideways")
    with pytest.raises(ValueError, match="num_positions"):
        sinusoidal_encoding(0, 8)
    with pytest.raises(ValueError, match="base"):
        sinusoidal_encoding(4, 8, base=-1.0)
    with pytest.raises(TypeError, match="d_model"):
        sinusoidal_encoding(4, 8.0)
    with pytest.raises(TypeError, match="dtype"):  # an integer table would be all zeros and ones
        sinusoidal_encoding(4, 8, dtype=torch.int64)
    with pytest.raises(TypeError, match="k must be"):
        shift_matrix(True, 8)


class TestModule:
    def test_adds_table_to_batch_first_input(self):
        module = SinusoidalPositionalEncoding(8, max_len=16)
        x = torch.randn(3, 5, 8, dtype=torch.float64)
        out = module(x)
        expected = torch.tensor([[reference(p, k, 8) for k in range(8)] for p in range(5)], dtype=torch.float64)
        torch.testing.assert_close(out, x + expected, rtol=0, atol=1e-15)  # unscaled x plus the table

    def test_non_finite_activations_pass_through(self):
        x = torch.full((1, 2, 4), float("inf"))
        assert torch.isinf(SinusoidalPositionalEncoding(4)(x)).all()  # x is an activation, not checked for finiteness

    def test_half_layout_and_base_reach_the_module(self):
        module = SinusoidalPositionalEncoding(8, layout="half", base=100.0)
        out = module(torch.zeros(1, 3, 8, dtype=torch.float64))[0]
        for p in range(3):
            for i in range(4):
                assert float(out[p, i]) == pytest.approx(math.sin(p * 100.0 ** (-2 * i / 8)), abs=1e-15)
                assert float(out[p, 4 + i]) == pytest.approx(math.cos(p * 100.0 ** (-2 * i / 8)), abs=1e-15)

    def test_scale_and_offset(self):
        module = SinusoidalPositionalEncoding(4, scale_embeddings=True)
        x = torch.ones(1, 2, 4)
        out = module(x, offset=3)
        torch.testing.assert_close(out[0], 2.0 + sinusoidal_encoding(2, 4, start=3))

    def test_grows_for_longer_inputs(self):
        module = SinusoidalPositionalEncoding(8, max_len=4)
        out = module(torch.zeros(1, 10, 8))
        torch.testing.assert_close(out[0], sinusoidal_encoding(10, 8))

    def test_large_offset_keeps_no_large_buffer(self):
        module = SinusoidalPositionalEncoding(512, max_len=16)
        offset = 3 * 10**6  # one call here used to leave a (3e6, 512) buffer (6 GB in float32) behind
        out = module(torch.zeros(1, 2, 512, dtype=torch.float64), offset=offset)
        assert module.pe.shape[0] <= module.cache_limit
        expected = [[reference(offset + p, k, 512) for k in range(0, 512, 37)] for p in range(2)]
        torch.testing.assert_close(out[0, :, ::37], torch.tensor(expected, dtype=torch.float64), rtol=0, atol=1e-9)

    def test_empty_sequence(self):
        out = SinusoidalPositionalEncoding(8)(torch.zeros(3, 0, 8))
        assert out.shape == (3, 0, 8)

    def test_buffer_is_not_persistent_and_follows_dtype(self):
        module = SinusoidalPositionalEncoding(8)
        assert "pe" not in module.state_dict()
        out = module(torch.zeros(1, 3, 8, dtype=torch.float64))
        assert out.dtype == torch.float64
        # float64 values, not a float32 table cast up: the paper's formula to float64 rounding
        expected = torch.tensor([[reference(p, k, 8) for k in range(8)] for p in range(3)], dtype=torch.float64)
        torch.testing.assert_close(out[0], expected, rtol=0, atol=1e-15)
        out32 = module(torch.zeros(1, 3, 8))
        assert out32.dtype == torch.float32 and torch.equal(out32[0], expected.float())
        half = SinusoidalPositionalEncoding(8).half()  # a rounded buffer is rebuilt, not used
        torch.testing.assert_close(half(torch.zeros(1, 3, 8, dtype=torch.float64))[0], expected, rtol=0, atol=1e-15)

    def test_dropout_only_in_training(self):
        module = SinusoidalPositionalEncoding(8, dropout=0.5)
        x = torch.zeros(2, 6, 8)
        expected = torch.tensor([[reference(p, k, 8) for k in range(8)] for p in range(6)], dtype=torch.float32)
        torch.testing.assert_close(module.eval()(x)[1], expected)  # eval: no dropout at all
        torch.manual_seed(0)
        trained = module.train()(x)
        dropped = trained == 0
        assert 0 < int(dropped.sum()) < dropped.numel()  # some, not all, entries dropped
        kept = ~dropped & (expected.expand_as(trained) != 0)
        torch.testing.assert_close(trained[kept], 2.0 * expected.expand_as(trained)[kept])  # survivors scaled by 1/(1-p)

    def test_rejects_sequence_first_and_wrong_width(self):
        module = SinusoidalPositionalEncoding(8)
        with pytest.raises(ValueError, match="batch-first"):
            module(torch.zeros(5, 8))
        with pytest.raises(ValueError, match="last dimension 8"):
            module(torch.zeros(2, 5, 6))


# ----------------------------------------------------------------------------- found by mutation testing (tests/MUTATION.md)


def test_default_base_is_the_papers():
    d = 8
    expected = [10000.0 ** (-2 * i / d) for i in range(d // 2)]  # Vaswani et al. (2017), section 3.5
    assert np.allclose(sinusoidal_frequencies(d), expected, rtol=1e-15, atol=0)


def test_dtypes_follow_the_argument_and_messages_name_it():
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        assert shift_matrix(3, 8, dtype=dtype).dtype == dtype
        assert sinusoidal_encoding(3, 8, dtype=dtype).dtype == dtype
    for call in (lambda: shift_matrix(3, 8, dtype=torch.int64), lambda: sinusoidal_encoding(3, 8, dtype=torch.int64)):
        with pytest.raises(TypeError, match=r"^dtype must be"):
            call()
    for bad in ("nonsense", 3.5):
        with pytest.raises((TypeError, ValueError), match=r"^device (is not|must be)"):
            sinusoidal_encoding(3, 8, device=bad)


def test_tables_are_made_on_the_device_asked_for():
    """The meta device holds no data: a tensor made elsewhere would show (or fail to mix) there."""
    assert sinusoidal_encoding(3, 8, device="meta").device.type == "meta"
    module = SinusoidalPositionalEncoding(8).to("meta")
    assert module.encoding(600).device.type == "meta"  # the cache grows on the module's device
    assert module.encoding(3, offset=10**7).device.type == "meta"  # beyond the cache: computed there too
    assert module.half().encoding(2).device.type == "meta"  # rebuilt in float64 on its device
    x = torch.empty(2, 3, 8, device="meta")
    assert SinusoidalPositionalEncoding(8)(x).device.type == "meta"  # a CPU module follows its input


def test_cache_bounds():
    module = SinusoidalPositionalEncoding(8)
    assert module.pe.shape == (512, 8)  # default max_len
    assert "pe" not in module.state_dict()
    table = module.pe
    module.encoding(20)
    module.encoding(512)  # within the cache: no rebuild
    assert module.pe is table
    module.half()
    module.encoding(2)
    assert module.pe.dtype == torch.float64 and module.pe.shape == (512, 8)  # rebuilt with its length
    module.encoding(CACHE_LIMIT)  # grows up to the limit itself ...
    assert module.pe.shape[0] == CACHE_LIMIT
    module.encoding(1, offset=CACHE_LIMIT)  # ... and no further
    assert module.pe.shape[0] == CACHE_LIMIT


def test_encoding_rows_and_the_rows_beyond_the_cache():
    module = SinusoidalPositionalEncoding(6, base=100.0, layout="half")
    assert torch.equal(module.encoding(3), sinusoidal_encoding(3, 6, base=100.0, layout="half", dtype=torch.float64))
    far = module.encoding(3, offset=10**7)
    expected = sinusoidal_encoding(3, 6, base=100.0, layout="half", dtype=torch.float64, start=10**7)
    assert torch.equal(far, expected)
    assert module.encoding(0, offset=10**7).shape == (0, 6)


# ----------------------------------------------------------------------------- red-team probe, 2026-11-24 (issue 27)


def test_positions_beyond_2_53_are_refused_not_rounded():
    """start = 2**53 + 1 used to encode position 2**53 (sin off by 0.054) without a word."""
    assert sinusoidal_encoding_np(1, 4, start=2**53).shape == (1, 4)  # the largest exact position
    assert sinusoidal_encoding_np(2, 4, start=2**53 - 1).shape == (2, 4)
    for start, count in ((2**53 + 1, 1), (2**53, 2), (2**62, 1)):
        with pytest.raises(ValueError, match=r"^start \+ num_positions - 1 must be <= 2\*\*53"):
            sinusoidal_encoding_np(count, 4, start=start)
        with pytest.raises(ValueError, match=r"^start \+ num_positions - 1 must be <= 2\*\*53"):
            sinusoidal_encoding(count, 4, start=start)
    module = SinusoidalPositionalEncoding(4)
    with pytest.raises(ValueError, match=r"^offset \+ length - 1 must be <= 2\*\*53"):
        module.encoding(1, offset=2**53 + 1)
    with pytest.raises(ValueError, match=r"^offset \+ length - 1 must be <= 2\*\*53"):
        module(torch.zeros(1, 2, 4), offset=2**53)


def test_huge_tables_are_refused_before_allocation(monkeypatch):
    """A table larger than the memory budget is a ValueError (and MemoryError) that says how much it needs."""
    from course_pe._validation import MemoryBudgetError

    monkeypatch.setenv("COURSE_PE_MAX_BYTES", str(2**34))  # 16 GiB, whatever this machine has

    with pytest.raises(MemoryBudgetError, match=r"^num_positions: a 1000000000 x 1000 table would need about 36\.4 TiB"):
        sinusoidal_encoding_np(10**9, 1000)
    with pytest.raises(ValueError, match=r"^max_len and d_model: "):
        SinusoidalPositionalEncoding(1000, max_len=10**12)
    with pytest.raises(MemoryError, match=r"^d_model: a 2000000 x 2000000 matrix would need"):
        shift_matrix(1, 2 * 10**6)


def test_shift_matrix_offsets_beyond_2_53_are_refused_not_rounded():
    """Red team 2, S1: shift_matrix(2**53 + 1, d) was shift_matrix(2**53, d) without a word (cos/sin entries off
    by up to 0.96 against mpmath); like every position in the library, |k| <= 2**53 is accepted, beyond is refused."""
    from course_pe.sinusoidal import MAX_POSITION

    assert MAX_POSITION == 2**53
    for k in (2**53, -(2**53), float(2**53), 12345.5, np.int64(2**53)):
        assert shift_matrix(k, 8).shape == (8, 8)
    for k in (2**53 + 1, -(2**53) - 1, 10**17 + 3, 10**30, 2.0**60, -1e300, np.uint64(2**63)):
        with pytest.raises(ValueError, match=r"^k must lie in \[-2\*\*53, 2\*\*53\]"):
            shift_matrix(k, 8)


# --------------------------------------------------------------------------- found by mutation testing (issue 27)


def test_encoding_rows_up_to_two_to_the_53_are_allowed():
    """``offset + length - 1 <= 2**53``: the last allowed row is position 2**53 itself (computed, not cached)."""
    pe = SinusoidalPositionalEncoding(4, max_len=8)
    rows = pe.encoding(2, offset=2**53 - 1)
    torch.testing.assert_close(rows, sinusoidal_encoding(2, 4, dtype=torch.float64, start=2**53 - 1))
    with pytest.raises(ValueError, match=r"^offset \+ length - 1 must be <= 2\*\*53"):
        pe.encoding(2, offset=2**53)


def test_max_len_bound_is_two_to_the_53_plus_one():
    """``max_len <= 2**53 + 1`` (positions 0 ... 2**53): up to there only the memory budget refuses the table (a
    MemoryBudgetError naming both sizes), one more is refused for its positions, before any estimate."""
    from course_pe._validation import MemoryBudgetError

    for max_len in (2**53, 2**53 + 1):
        with pytest.raises(MemoryBudgetError, match=r"^max_len and d_model: a \d+ x 4 table would need"):
            SinusoidalPositionalEncoding(4, max_len=max_len)
    with pytest.raises(ValueError, match=r"^max_len must be <= 2\*\*53 \+ 1 \(positions stay exact in float64\), "
                                         rf"got {2**53 + 2}$") as caught:
        SinusoidalPositionalEncoding(4, max_len=2**53 + 2)
    assert not isinstance(caught.value, MemoryBudgetError)
