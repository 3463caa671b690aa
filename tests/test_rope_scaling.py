import math

import pytest
import torch

from course_pe import (
    DynamicNTKScaling,
    LinearScaling,
    Llama3Scaling,
    LongRoPEScaling,
    NTKScaling,
    ProportionalScaling,
    RopeConfig,
    RotaryEmbedding,
    YaRNScaling,
    rope_config_from_hf,
    rope_frequencies,
    yarn_correction_range,
)
from course_pe.rope_scaling import _module_frequencies

# pinned in requirements.txt (as for test_rope_scaling_hf.py): a missing package is a failure, not a skip
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS


def theta(d, base=10000.0):
    return torch.tensor([base ** (-2 * i / d) for i in range(d // 2)], dtype=torch.float64)


def test_default_frequencies():
    inv, factor = rope_frequencies(128)
    assert inv.dtype == torch.float32 and inv.shape == (64,) and factor == 1.0
    torch.testing.assert_close(inv.double(), theta(128), rtol=1e-7, atol=0)
    assert inv[0] == 1.0


def test_doubled_exponent_bug_is_different():
    d = 64
    buggy = 10000 ** (-2 * torch.arange(0, d, 2, dtype=torch.float64) / d)  # exponent doubled
    inv, _ = rope_frequencies(d)
    assert not torch.allclose(buggy, inv.double())
    torch.testing.assert_close(buggy[: d // 4], inv.double()[0::2][: d // 4], rtol=1e-6, atol=0)


def test_linear_and_ntk():
    inv, _ = rope_frequencies(64, scaling=LinearScaling(4.0))
    torch.testing.assert_close(inv.double(), theta(64) / 4, rtol=1e-7, atol=0)
    inv, _ = rope_frequencies(64, scaling=NTKScaling(4.0))
    torch.testing.assert_close(inv.double(), theta(64, 10000 * 4 ** (64 / 62)), rtol=1e-6, atol=0)
    assert inv[0] == 1.0  # fastest pair unchanged
    assert float(inv[-1]) == pytest.approx(float(theta(64)[-1]) / 4, rel=1e-6)  # slowest exactly interpolated


def test_dynamic_ntk():
    s = DynamicNTKScaling(2.0, original_max_positions=100)
    for seq_len in (None, 50, 100):
        got = rope_frequencies(32, scaling=s, seq_len=seq_len, dtype=torch.float64)[0]
        torch.testing.assert_close(got, theta(32), rtol=1e-15, atol=0)
    inv, _ = rope_frequencies(32, scaling=s, seq_len=300)
    scale = 2.0 * 300 / 100 - 1.0
    torch.testing.assert_close(inv.double(), theta(32, 10000 * scale ** (32 / 30)), rtol=1e-6, atol=0)


def yarn_reference(d, base, L, s, beta_fast=32.0, beta_slow=1.0):
    """YaRN's frequencies transcribed from the paper (Peng et al., 2023, eq. 23-25 and section 3.2) and the
    reference code's helpers (find_correction_range: floor/ceil, clipped to [0, d - 1]; linear_ramp_mask:
    0.001 added to a zero-width range), in Python floats."""
    corr = lambda r: d * math.log(L / (r * 2 * math.pi)) / (2 * math.log(base))  # noqa: E731
    low, high = max(math.floor(corr(beta_fast)), 0), min(math.ceil(corr(beta_slow)), d - 1)
    if low == high:
        high += 0.001
    expected = []
    for i, t in enumerate(theta(d, base).tolist()):
        ramp = min(1.0, max(0.0, (i - low) / (high - low)))
        expected.append(t / s * ramp + t * (1 - ramp))
    return torch.tensor(expected, dtype=torch.float64)


@pytest.mark.parametrize(
    "d,base,L,s",
    [
        (128, 10000.0, 4096, 16.0),
        (64, 500000.0, 8192, 4.0),
        (8, 10000.0, 4 * 10**9, 2.0),  # both ends clipped to d - 1: the zero-width ramp case
        (8, 10000.0, 1, 2.0),  # both ends clipped to 0
    ],
)
def test_yarn_against_reference(d, base, L, s):
    inv, factor = rope_frequencies(d, base=base, scaling=YaRNScaling(s, L), dtype=torch.float64)
    torch.testing.assert_close(inv, yarn_reference(d, base, L, s), rtol=1e-14, atol=0)
    assert factor == pytest.approx(0.1 * math.log(s) + 1, rel=1e-15)
    assert rope_frequencies(d, scaling=YaRNScaling(s, L, attention_factor=1.0))[1] == 1.0
    assert rope_frequencies(d, scaling=YaRNScaling(s, L, attention_factor=0.5))[1] == 0.5


def test_yarn_correction_range_values():
    d, base, L = 128, 10000.0, 4096
    corr = lambda r: d * math.log(L / (r * 2 * math.pi)) / (2 * math.log(base))  # noqa: E731
    assert yarn_correction_range(d, base, L, 32, 1) == (math.floor(corr(32)), math.ceil(corr(1))) == (20.0, 46.0)
    assert yarn_correction_range(8, base, 1, 32, 1) == (0.0, 0.0)  # clipped below
    assert yarn_correction_range(8, base, 4 * 10**9, 32, 1) == (7.0, 7.0)  # clipped above


def test_attention_factor_is_one_except_for_yarn():
    for scaling in (None, LinearScaling(4.0), NTKScaling(4.0), DynamicNTKScaling(4.0, 16), Llama3Scaling(8.0, 64)):
        assert rope_frequencies(32, scaling=scaling, seq_len=100)[1] == 1.0


@pytest.mark.parametrize("low,high,s", [(1.0, 4.0, 8.0), (2.0, 8.0, 4.0), (0.5, 3.0, 16.0)])
def test_llama3_against_reference(low, high, s):
    """Transcription of Meta's apply_scaling (llama-models, Llama 3.1) in Python floats."""
    d, base, L = 128, 500000.0, 8192
    inv, _ = rope_frequencies(d, base=base, scaling=Llama3Scaling(s, L, low, high), dtype=torch.float64)
    out = []
    for t in theta(d, base).tolist():
        wl = 2 * math.pi / t
        if wl < L / high:
            out.append(t)
        elif wl > L / low:
            out.append(t / s)
        else:
            sm = (L / wl - low) / (high - low)
            out.append((1 - sm) * t / s + sm * t)
    torch.testing.assert_close(inv, torch.tensor(out, dtype=torch.float64), rtol=1e-14, atol=0)


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda: LinearScaling(0.5), "factor must be >= 1"),
        (lambda: NTKScaling(-1), "factor"),
        (lambda: YaRNScaling(4, 128, beta_fast=1, beta_slow=2), "beta_fast"),
        (lambda: Llama3Scaling(8, 128, low_freq_factor=4, high_freq_factor=1), "high_freq_factor"),
        (lambda: DynamicNTKScaling(2, 0), "original_max_positions"),
        (lambda: rope_frequencies(7), "even"),
        (lambda: rope_frequencies(8, scaling="yarn"), "unknown RoPE scaling"),
        (lambda: rope_frequencies(8, base=1.0), "base"),
    ],
)
def test_errors(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(base=1.0), "base must be > 1"),  # used to raise ZeroDivisionError
        (dict(beta_slow=0.0), "beta_slow"),  # used to raise "math domain error"
        (dict(original_max_positions=0), "original_max_positions"),
        (dict(beta_fast=1.0, beta_slow=2.0), "beta_fast"),
    ],
)
def test_yarn_correction_range_names_the_bad_argument(kwargs, match):
    args = dict(head_dim=64, base=10000.0, original_max_positions=2048, beta_fast=32.0, beta_slow=1.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        yarn_correction_range(**args)


def test_yarn_correction_range_accepts_small_bases_and_rejects_equal_betas():
    d, L = 16, 64
    corr = lambda r, base: d * math.log(L / (r * 2 * math.pi)) / (2 * math.log(base))  # noqa: E731
    low, high = yarn_correction_range(d, 1.5, L, 32, 1)
    assert (low, high) == (max(math.floor(corr(32, 1.5)), 0), min(math.ceil(corr(1, 1.5)), d - 1))
    with pytest.raises(ValueError, match="beta_fast"):
        yarn_correction_range(d, 10000.0, L, 2.0, 2.0)


# ----------------------------------------------------------------------------- found by mutation testing (tests/MUTATION.md)


def test_scaling_fields_are_stored_as_checked_floats():
    import numpy as np

    for scaling in (LinearScaling(2), NTKScaling(np.float32(2.0)), DynamicNTKScaling(2, 64),
                    YaRNScaling(2, 64, beta_fast=32, beta_slow=1, attention_factor=1),
                    Llama3Scaling(8, 8192, low_freq_factor=1, high_freq_factor=4)):
        for name in ("factor", "beta_fast", "beta_slow", "attention_factor", "low_freq_factor", "high_freq_factor"):
            if hasattr(scaling, name):
                assert type(getattr(scaling, name)) is float, (scaling, name)


def test_equal_bounds_are_refused():
    with pytest.raises(ValueError, match=r"^beta_fast \(2.0\) must be greater than beta_slow \(2.0\)"):
        YaRNScaling(2.0, 64, beta_fast=2.0, beta_slow=2.0)
    with pytest.raises(ValueError, match=r"^high_freq_factor \(1.5\) must be at least low_freq_factor \(2.0\)"):
        Llama3Scaling(8.0, 8192, low_freq_factor=2.0, high_freq_factor=1.5)


def test_llama3_equal_factors_switch_hard():
    """Llama 4 Scout ships low_freq_factor = high_freq_factor = 1: no blend band, every wavelength below
    L = 8192 kept and every one above divided by the factor (16)."""
    d, base, L = 128, 500000.0, 8192
    inv, _ = rope_frequencies(d, base=base, scaling=Llama3Scaling(16.0, L, 1.0, 1.0), dtype=torch.float64)
    t = theta(d, base)
    expected = torch.where(2 * math.pi / t < L, t, t / 16.0)
    torch.testing.assert_close(inv, expected, rtol=1e-14, atol=0)
    assert 0 < int((2 * math.pi / t < L).sum()) < d // 2  # both regimes occur


def test_dynamic_ntk_at_the_original_length_is_exactly_the_original():
    # factor * L / L - (factor - 1) is 1 + 2**-50 in floating point for these values: the formula must not be used
    scaling = DynamicNTKScaling(factor=7.91081440723109, original_max_positions=69805)
    got, _ = rope_frequencies(8, scaling=scaling, seq_len=69805, dtype=torch.float64)
    assert torch.equal(got, rope_frequencies(8, dtype=torch.float64)[0])


def test_yarn_without_stretch_keeps_attention_scale_one():
    inv, attention = rope_frequencies(8, scaling=YaRNScaling(1.0, 64))
    assert attention == 1.0


def test_rope_frequencies_argument_bounds():
    assert rope_frequencies(8, base=1.5, dtype=torch.float64)[0][1].item() == 1.5 ** -0.25  # any base > 1
    rope_frequencies(8, scaling=DynamicNTKScaling(2.0, 64), seq_len=1)
    rope_frequencies(8, scaling=DynamicNTKScaling(2.0, 64), seq_len=2**53 + 1)  # the length of positions 0 ... 2**53
    for seq_len in (2**53 + 2, 2**54 + 1, 3**53):
        with pytest.raises(ValueError, match=r"^seq_len must be <= 9007199254740993"):
            rope_frequencies(8, scaling=DynamicNTKScaling(2.0, 64), seq_len=seq_len)
    with pytest.raises(TypeError, match=r"^dtype must be"):
        rope_frequencies(8, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"expected None or one of LinearScaling, NTKScaling, DynamicNTKScaling, "
                                         r"YaRNScaling, Llama3Scaling, LongRoPEScaling, ProportionalScaling$"):
        rope_frequencies(8, scaling="linear")
    for scaling in (NTKScaling(2.0), DynamicNTKScaling(2.0, 64)):
        with pytest.raises(ValueError, match=r"^NTK scalings need head_dim > 2 \(their exponent is d / \(d - 2\)\)$"):
            rope_frequencies(2, scaling=scaling, seq_len=128)


# ----------------------------------------------------------------------------- LongRoPE, proportional, YaRN's options
# (tests/test_rope_scaling_hf.py compares every type with transformers; these check the formulas themselves)


def test_longrope_short_and_long_factors_and_attention_factor():
    from course_pe import LongRoPEScaling

    short, long = [1.0, 1.5, 2.0, 3.0], [4.0, 8.0, 16.0, 32.0]
    scaling = LongRoPEScaling(short, long, 64, factor=16.0)
    t = theta(8)
    for seq_len in (None, 1, 64):
        inv, factor = rope_frequencies(8, scaling=scaling, seq_len=seq_len, dtype=torch.float64)
        torch.testing.assert_close(inv, t / torch.tensor(short, dtype=torch.float64), rtol=1e-15, atol=0)
    inv, factor = rope_frequencies(8, scaling=scaling, seq_len=65, dtype=torch.float64)
    torch.testing.assert_close(inv, t / torch.tensor(long, dtype=torch.float64), rtol=1e-15, atol=0)
    assert factor == math.sqrt(1 + math.log(16.0) / math.log(64))
    assert rope_frequencies(8, scaling=LongRoPEScaling(short, long, 64), seq_len=65)[1] == 1.0  # factor 1
    assert rope_frequencies(8, scaling=LongRoPEScaling(short, long, 64, 16.0, attention_factor=0.5))[1] == 0.5
    with pytest.raises(ValueError, match="head_dim // 2 = 8"):
        rope_frequencies(16, scaling=scaling)
    with pytest.raises(ValueError, match="^short_factor and long_factor must have one length"):
        LongRoPEScaling(short, long[:3], 64)


def test_rotary_embedding_switches_longrope_factors_both_ways():
    from course_pe import LongRoPEScaling, RotaryEmbedding

    scaling = LongRoPEScaling([1.0, 2.0], [5.0, 50.0], 8, factor=4.0)
    module = RotaryEmbedding(4, scaling=scaling, max_positions=4)
    short = torch.tensor([[1 / 1.0, 0.01 / 2.0]], dtype=torch.float64)
    long = torch.tensor([[1 / 5.0, 0.01 / 50.0]], dtype=torch.float64)
    af = math.sqrt(1 + math.log(4.0) / math.log(8))
    for last, table in ((7, short), (8, long), (3, short), (100, long)):  # length 8 is short, 9 long
        cos, sin = module.cos_sin(torch.arange(last + 1))
        angle = torch.tensor([float(last)], dtype=torch.float64)[:, None] * table
        torch.testing.assert_close(cos[-1:], angle.cos() * af, rtol=1e-14, atol=1e-15)
        torch.testing.assert_close(sin[-1:], angle.sin() * af, rtol=1e-14, atol=1e-15)


def test_yarn_without_truncation_keeps_fractional_bounds():
    d, base, L, s = 64, 150000.0, 4096, 32.0
    corr = lambda r: d * math.log(L / (r * 2 * math.pi)) / (2 * math.log(base))  # noqa: E731
    low, high = max(corr(32.0), 0), min(corr(1.0), d - 1)
    assert yarn_correction_range(d, base, L, 32.0, 1.0, truncate=False) == (low, high)
    assert yarn_correction_range(d, base, L, 32.0, 1.0) == (math.floor(low), math.ceil(high))
    inv, factor = rope_frequencies(d, base=base, scaling=YaRNScaling(s, L, truncate=False), dtype=torch.float64)
    expected = []
    for i, t in enumerate(theta(d, base).tolist()):
        ramp = min(1.0, max(0.0, (i - low) / (high - low)))
        expected.append(t / s * ramp + t * (1 - ramp))
    torch.testing.assert_close(inv, torch.tensor(expected, dtype=torch.float64), rtol=1e-14, atol=0)
    assert factor == 0.1 * math.log(s) + 1


def test_yarn_mscale_rules():
    from course_pe import yarn_mscale, yarn_softmax_scale

    s = 40.0
    assert yarn_mscale(s, 0.707) == 0.1 * 0.707 * math.log(s) + 1 and yarn_mscale(0.5, 3.0) == 1.0
    ratio = rope_frequencies(8, scaling=YaRNScaling(s, 64, mscale=0.5, mscale_all_dim=1.0))[1]
    assert ratio == pytest.approx((0.05 * math.log(s) + 1) / (0.1 * math.log(s) + 1), rel=1e-15)
    # Hugging Face's rule: an mscale alone (or with mscale_all_dim 0) is ignored; attention_factor wins over both
    for kwargs in (dict(mscale=0.5), dict(mscale=0.5, mscale_all_dim=0.0)):
        assert rope_frequencies(8, scaling=YaRNScaling(s, 64, **kwargs))[1] == 0.1 * math.log(s) + 1
    assert rope_frequencies(8, scaling=YaRNScaling(s, 64, mscale=1, mscale_all_dim=1, attention_factor=2.0))[1] == 2.0
    assert yarn_softmax_scale(192, YaRNScaling(s, 64, mscale_all_dim=1.0)) == 192**-0.5 * yarn_mscale(s, 1.0) ** 2
    assert yarn_softmax_scale(192, YaRNScaling(s, 64)) == 192**-0.5 == yarn_softmax_scale(192)


def test_proportional_rotates_a_fraction_with_full_head_frequencies():
    from course_pe import ProportionalScaling

    inv, factor = rope_frequencies(16, scaling=ProportionalScaling(0.5, factor=2.0), dtype=torch.float64)
    expected = theta(16) / 2.0
    expected[4:] = 0.0
    torch.testing.assert_close(inv, expected, rtol=1e-15, atol=0)
    assert factor == 1.0


# ----------------------------------------------------------------------------- found by mutation testing, issue 27 round


def test_new_scaling_fields_are_checked_and_stored_as_python_values():
    import numpy as np

    from course_pe import LongRoPEScaling, ProportionalScaling

    yarn = YaRNScaling(4, 64, mscale=np.float32(0.5), mscale_all_dim=1, truncate=np.bool_(False))
    assert type(yarn.truncate) is bool and yarn.truncate is False
    assert type(yarn.mscale) is float and type(yarn.mscale_all_dim) is float
    for name in ("mscale", "mscale_all_dim"):
        with pytest.raises(ValueError, match=rf"^{name} must be >= 0.0, got -0.5"):
            YaRNScaling(4, 64, **{name: -0.5})
    long = LongRoPEScaling(torch.tensor([1.0, 2.0]), np.array([3, 4]).tolist(), np.int64(8), factor=np.int64(2),
                           attention_factor=np.float32(1.5))
    assert long.short_factor == (1.0, 2.0) and long.long_factor == (3.0, 4.0)
    assert all(type(v) is float for v in long.short_factor + long.long_factor)
    assert type(long.factor) is float and type(long.attention_factor) is float
    assert type(long.original_max_positions) is int
    with pytest.raises(ValueError, match=r"^original_max_positions must be >= 2 for the default attention factor"):
        LongRoPEScaling([1.0], [2.0], 1, factor=1.5)
    assert LongRoPEScaling([1.0], [2.0], 1, factor=1.0).default_attention_factor == 1.0
    with pytest.raises(TypeError, match=r"^short_factor must be a sequence of numbers \(one per rotation pair\), got str"):
        LongRoPEScaling("12", [2.0], 8)
    with pytest.raises(TypeError, match=r"^long_factor must be a 1-D tensor of real numbers"):
        LongRoPEScaling([1.0], torch.tensor([True]), 8)
    with pytest.raises(ValueError, match=r"^short_factor must hold one factor per rotation pair, got an empty"):
        LongRoPEScaling([], [], 8)
    prop = ProportionalScaling(np.float64(0.25), np.int64(2))
    assert type(prop.partial_rotary_factor) is float and type(prop.factor) is float
    with pytest.raises(ValueError, match=r"^partial_rotary_factor must be <= 1.0, got 1.5"):
        ProportionalScaling(1.5)


def test_longrope_factors_are_used_in_float64():
    """Factors that float32 cannot hold (1.1) must not be rounded on the way (transformers rounds them: float32)."""
    from course_pe import LongRoPEScaling

    scaling = LongRoPEScaling([1.1, 1.3], [7.7, 9.9], 16)
    inv, _ = rope_frequencies(4, scaling=scaling, dtype=torch.float64)
    assert inv.tolist() == [1.0 / 1.1, 0.01 / 1.3]
    inv, _ = rope_frequencies(4, scaling=scaling, seq_len=17, dtype=torch.float64)
    assert inv.tolist() == [1.0 / 7.7, 0.01 / 9.9]


def test_yarn_correction_range_for_betas_near_the_float_limits():
    """L / (2 pi beta) underflows to 0 for beta = 1e308: the bounds use ln L - ln beta - ln 2 pi there."""
    d, base, L = 64, 10000.0, 4096
    exact = d * (math.log(L) - math.log(1e308) - math.log(2 * math.pi)) / (2 * math.log(base))
    assert yarn_correction_range(d, base, L, 1e308, 1.0, truncate=False)[0] == max(exact, 0.0)
    # L / (2 pi beta) overflows to inf for L = 2**1020 and beta = 1e-300: the slow bound is then clipped at d - 1
    low, high = yarn_correction_range(d, base, 2**1020, 2.0, 1e-300, truncate=False)
    assert high == d - 1 and low == d * math.log(2**1020 / (2 * 2 * math.pi)) / (2 * math.log(base))
    with pytest.raises(TypeError, match=r"^truncate must be a bool"):
        yarn_correction_range(d, base, L, 32.0, 1.0, truncate=1)


def test_yarn_mscale_values():
    from course_pe import yarn_mscale

    assert yarn_mscale(1.5, 1.0) == 0.1 * math.log(1.5) + 1.0
    assert yarn_mscale(1.0, 5.0) == 1.0 and yarn_mscale(0.25) == 1.0
    assert yarn_mscale(4.0) == 0.1 * math.log(4.0) + 1.0  # mscale defaults to 1


def test_yarn_softmax_scale_names_what_it_got():
    from course_pe import yarn_softmax_scale

    with pytest.raises(TypeError, match=r"^scaling must be None or one of LinearScaling, NTKScaling, DynamicNTKScaling, "
                                        r"YaRNScaling, Llama3Scaling, LongRoPEScaling, ProportionalScaling, got str$"):
        yarn_softmax_scale(64, "yarn")


def test_yarn_correction_range_clip_is_one_sided_as_documented():
    """Red team 2: the docstring said "clipped to [0, head_dim - 1]", but low is only raised to 0 and high only
    lowered to head_dim - 1 (as in the reference code and transformers): for an absurd original length low exceeds
    head_dim - 1 and high. The docstring now says so; this pins the documented example and its consequence."""
    from course_pe.rope_scaling import yarn_correction_range

    assert yarn_correction_range(64, 1e4, 10**12, 32, 1) == (77.0, 63.0)
    assert yarn_correction_range(64, 1e4, 10**12, 32, 1, truncate=False)[1] == 63.0
    low, high = yarn_correction_range(64, 1e4, 2048, 32, 1)
    assert 0.0 <= low <= high <= 63.0  # an ordinary length: inside, and ordered
    # the threshold of the docstring, 2 pi beta_fast base**(2 (d - 1) / d): low passes d - 1 = 63 there
    threshold = 2 * math.pi * 32 * 1e4 ** (2 * 63 / 64)
    assert yarn_correction_range(64, 1e4, int(threshold * 0.99), 32, 1, truncate=False)[0] < 63.0
    assert yarn_correction_range(64, 1e4, int(threshold * 1.01), 32, 1, truncate=False)[0] > 63.0
    # consequence: every pair interpolated (divided by the factor)
    inv, _ = rope_frequencies(64, base=1e4, scaling=YaRNScaling(4.0, 10**12), dtype=torch.float64)
    torch.testing.assert_close(inv, rope_frequencies(64, base=1e4, dtype=torch.float64)[0] / 4.0, rtol=1e-15, atol=0)


def test_longrope_factor_lists_are_measured_before_their_items():
    """Red team 2: LongRoPEScaling([1.0] * 10**7, ...) checked every item in Python (over 20 s) before anything
    compared the length with head_dim // 2. The length is now bounded first (2**20 factors, a 2**21-wide head)."""
    from course_pe.rope_scaling import MAX_LONGROPE_FACTORS, LongRoPEScaling

    assert MAX_LONGROPE_FACTORS == 2**20
    too_long = [1.0] * (2**20 + 1)
    for args in ((too_long, [1.0], 8), ([1.0], too_long, 8), (torch.ones(2**20 + 1), [1.0], 8)):
        with pytest.raises(ValueError, match=r"^(short|long)_factor must hold one factor per rotation pair, at most "
                                             r"1048576 \(2\*\*20\), got 1048577$"):
            LongRoPEScaling(*args)
    # a list whose length fits still has every item checked (the bound is not a shortcut around the items)
    with pytest.raises(ValueError, match=r"^short_factor\[2\] must be a finite number > 0"):
        LongRoPEScaling([1.0, 2.0, -1.0], [1.0, 1.0, 1.0], 8)


# --------------------------------------------------------------------------- found by mutation testing (issue 27)
# Survivors of the issue-27 mutmut run (tests/MUTATION.md): the float32 reference path of the scalings that
# transformers has no function for (NTK), the edges of the YaRN and Llama 3 float32 paths, the reader's precedence
# rules that no config had exercised, and messages that must begin with the argument's name.


def _hf_reference(rope_parameters: dict, head_dim: int, max_positions: int) -> torch.Tensor:
    """transformers 5.23's float32 ``inv_freq`` for ``rope_parameters`` (a LlamaConfig with one head)."""
    config = LlamaConfig(hidden_size=head_dim, num_attention_heads=1, head_dim=head_dim,
                         max_position_embeddings=max_positions, rope_parameters=dict(rope_parameters))
    return ROPE_INIT_FUNCTIONS[rope_parameters["rope_type"]](config)[0]


def test_float32_ntk_is_the_float32_power_of_the_stretched_base():
    """transformers has no static NTK type, so no differential test reaches it: the float32 path must be
    ``1 / b' ** (arange(0, d, 2).float() / d)`` with ``b' = base * s ** (d / (d - 2))``, and agree with float64."""
    for d, base, s in ((64, 1e4, 4.0), (128, 5e5, 8.0), (8, 1e4, 2.0)):
        got, factor = rope_frequencies(d, base=base, scaling=NTKScaling(s), angle_dtype=torch.float32)
        stretched = base * s ** (d / (d - 2))
        expected = 1.0 / (stretched ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        assert got.dtype == torch.float32 and torch.equal(got, expected) and factor == 1.0
        exact = stretched ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        torch.testing.assert_close(got.double(), exact, rtol=1e-6, atol=0)


@pytest.mark.parametrize("d,base,original,low_high", [
    (4, 2.0, 700, (3.0, 3.0)),  # low floored to d - 1 and high clipped to d - 1
    (64, 1e4, 6, (0.0, 0.0)),  # both below 0: low clipped to 0, high ceiled to 0
])
def test_float32_yarn_with_a_zero_width_ramp_is_transformers(d, base, original, low_high):
    """low == high (only through the clip) widens the ramp by 0.001, in the float32 path as in transformers."""
    assert yarn_correction_range(d, base, original, 32, 1) == low_high
    scaling = YaRNScaling(4.0, original)
    got, _ = rope_frequencies(d, base=base, scaling=scaling, angle_dtype=torch.float32)
    theirs = _hf_reference({"rope_type": "yarn", "factor": 4.0, "rope_theta": base,
                            "original_max_position_embeddings": original}, d, 4 * original)
    assert torch.equal(got, theirs)
    exact, _ = rope_frequencies(d, base=base, scaling=scaling, dtype=torch.float64)
    torch.testing.assert_close(got.double(), exact, rtol=1e-6, atol=0)


def test_float32_llama3_at_a_wavelength_exactly_on_the_low_frequency_edge():
    """A float32 wavelength exactly ``L / low_freq_factor`` is in the band (blend weight 0: divided once by the
    factor), as in transformers: neither kept nor divided twice."""
    d, base, original, s = 64, 5e5, 8192, 8.0
    inv = rope_frequencies(d, base=base, angle_dtype=torch.float32)[0]
    k = 22
    wavelength = (2 * math.pi / inv)[k].item()
    low = original / wavelength  # the edge L / low = wavelength, exactly in float32
    assert float(torch.tensor(original / low, dtype=torch.float32)) == wavelength
    scaling = Llama3Scaling(s, original, low_freq_factor=low, high_freq_factor=4.0)
    got, _ = rope_frequencies(d, base=base, scaling=scaling, angle_dtype=torch.float32)
    theirs = _hf_reference({"rope_type": "llama3", "factor": s, "rope_theta": base, "low_freq_factor": low,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": original}, d, 4 * original)
    assert torch.equal(got, theirs)
    torch.testing.assert_close(got[k], inv[k] / s, rtol=1e-6, atol=0)


def test_llama3_equal_factors_divide_a_wavelength_exactly_on_the_switch():
    """Llama3Scaling's docstring: with no band, a wavelength exactly on the switch is divided by the factor (no
    0 / 0). Found with float64 wavelengths equal to ``L / low_freq_factor`` bit for bit."""
    d, base, original, s = 64, 5e5, 8192, 8.0
    theta = rope_frequencies(d, base=base, dtype=torch.float64)[0]
    for k in (20, 22):
        wavelength = (2 * math.pi / theta)[k].item()
        low = original / wavelength
        assert original / low == wavelength
        got, _ = rope_frequencies(d, base=base, scaling=Llama3Scaling(s, original, low, low), dtype=torch.float64)
        assert not got.isnan().any()
        assert got[k].item() == theta[k].item() / s
        torch.testing.assert_close(got[:k], theta[:k], rtol=0, atol=0)  # shorter wavelengths kept
        torch.testing.assert_close(got[k + 1:], theta[k + 1:] / s, rtol=0, atol=0)


def test_float32_reference_does_not_follow_torchs_default_dtype():
    """The float32 path is float32 because transformers writes ``.float()``/``dtype=torch.float32``, not because
    torch's default dtype happens to be float32: under ``torch.set_default_dtype(torch.float64)`` the bits stay."""
    scalings = [None, LinearScaling(2.0), NTKScaling(4.0), DynamicNTKScaling(2.0, 64), YaRNScaling(4.0, 64),
                Llama3Scaling(8.0, 64), LongRoPEScaling([1.0, 1.1, 1.3, 2.7], [1.5, 2.1, 3.3, 9.7], 64, factor=4.0),
                ProportionalScaling(0.5, factor=3.0)]
    expected = [rope_frequencies(8, scaling=s, seq_len=100, dtype=torch.float64, angle_dtype=torch.float32)[0]
                for s in scalings]
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        got = [rope_frequencies(8, scaling=s, seq_len=100, dtype=torch.float64, angle_dtype=torch.float32)[0]
               for s in scalings]
        module = RotaryEmbedding(8, scaling=DynamicNTKScaling(2.0, 64), angle_dtype=torch.float32)
        module_inv = _module_frequencies(8, 1e4, DynamicNTKScaling(2.0, 64), 100, torch.float32)[0]
    finally:
        torch.set_default_dtype(previous)
    for scaling, a, b in zip(scalings, expected, got):
        assert torch.equal(a, b), scaling
        assert torch.equal(a, a.float().double()), scaling  # float32 values
    assert torch.equal(module_inv, _module_frequencies(8, 1e4, DynamicNTKScaling(2.0, 64), 100, torch.float32)[0])
    assert module.angle_dtype == torch.float32


def test_yarn_correction_range_in_the_overflow_branch():
    """beta_slow = 1e-320: L / (2 pi beta) overflows, and ln L - ln beta - ln 2 pi is used instead (no clip for a
    base of 1e300)."""
    low, high = yarn_correction_range(64, 1e300, 4096, 1.0, 1e-320, truncate=False)
    expected = 64 * (math.log(4096) - math.log(1e-320) - math.log(2 * math.pi)) / (2 * math.log(1e300))
    assert 34.0 < high < 35.0 and high == pytest.approx(expected, rel=1e-12)
    assert low == pytest.approx(64 * math.log(4096 / (2 * math.pi)) / (2 * math.log(1e300)), rel=1e-12)


@pytest.mark.parametrize("make,error,message", [
    (lambda: YaRNScaling(2.0, 64, truncate="yes"), TypeError, r"truncate must be"),
    (lambda: rope_frequencies(8, angle_dtype=torch.int64), TypeError, r"angle_dtype must be a floating"),
    (lambda: rope_frequencies(8, angle_dtype=torch.float16), ValueError,
     r"angle_dtype must be torch.float64 \(exact\) or torch.float32 \(reference numerics\), got torch.float16$"),
    (lambda: LongRoPEScaling(torch.tensor(1.0), [1.0], 8), TypeError,
     r"short_factor must be a 1-D tensor of real numbers, got shape \(\) torch.float32$"),
    (lambda: LongRoPEScaling([1.0], [1.0], 1, factor=2.0), ValueError,
     r"original_max_positions must be >= 2 for the default attention factor "
     r"sqrt\(1 \+ ln\(factor\) / ln\(original_max_positions\)\); or give attention_factor$"),
    (lambda: rope_frequencies(8, scaling=LongRoPEScaling([1.0] * 3, [1.0] * 3, 8)), ValueError,
     r"LongRoPE short_factor and long_factor must have head_dim // 2 = 4 entries \(one per rotation pair\), got 3$"),
    (lambda: RopeConfig("default", 8, 10, 1e4, None), ValueError, r"rotary_dim \(10\) exceeds head_dim \(8\)$"),
    (lambda: RopeConfig("default", 8, 8, 1e4, "linear"), TypeError,
     r"scaling must be None or a scaling dataclass, got str$"),
    (lambda: RopeConfig("ntk", 8, 8, 1e4, None), ValueError,
     r"unknown rope_type 'ntk'; expected one of default, linear, dynamic, yarn, longrope, llama3, proportional, "
     r"axial$"),
])
def test_messages_begin_with_the_argument(make, error, message):
    with pytest.raises(error, match="^" + message):
        make()


def test_longrope_factor_bound_is_inclusive(monkeypatch):
    """MAX_LONGROPE_FACTORS factors are accepted, one more refused (the bound lowered to 4 to keep this fast)."""
    import course_pe.rope_scaling as rs

    monkeypatch.setattr(rs, "MAX_LONGROPE_FACTORS", 4)
    assert LongRoPEScaling([1.0] * 4, [2.0] * 4, 8).short_factor == (1.0,) * 4
    assert LongRoPEScaling(torch.ones(4), torch.ones(4), 8).long_factor == (1.0,) * 4
    with pytest.raises(ValueError, match=r"^short_factor must hold one factor per rotation pair, at most 4 .*got 5$"):
        LongRoPEScaling([1.0] * 5, [2.0] * 5, 8)


def test_rope_config_stores_checked_python_values():
    import numpy as np

    config = RopeConfig("default", np.int64(8), 8, 10000, None, max_positions=np.int64(4096))
    assert type(config.base) is float and config.base == 10000.0
    assert type(config.max_positions) is int and config.max_positions == 4096
    assert type(config.head_dim) is int
    assert not hasattr(config, "BASE") and not hasattr(config, "XXbaseXX")
    module = config.rotary_embedding()
    assert module.cached_positions == 2048  # the documented default initial cache


@pytest.mark.parametrize("key", ["rope_type", "type", "rope_theta", "factor", "partial_rotary_factor"])
def test_reader_a_flat_block_with_a_null_value_is_not_nested(key):
    """A block is nested by layer type only if none of its keys is a RoPE parameter: ``{key: null}`` is a flat
    block (a null parameter), not a layer type called ``key``."""
    config = {"head_dim": 8, "rope_parameters": {key: None}}
    if key in ("rope_type", "type"):
        with pytest.raises(ValueError, match=r"^unknown rope_type None in config"):
            rope_config_from_hf(config)
    elif key == "rope_theta":
        with pytest.raises(TypeError, match=r"^config rope parameter 'rope_theta' must be a real number, got NoneType"):
            rope_config_from_hf(config)
    else:  # a null factor is ignored by the default type; a layer type may be asked of a flat block
        assert rope_config_from_hf(config, layer_type="full_attention") == rope_config_from_hf({"head_dim": 8})


def test_reader_default_layer_types_of_a_flat_block():
    """Without ``layer_types`` in the config, a flat block is read for either of transformers' two standard layer
    types, and refused for another, naming both."""
    config = {"head_dim": 8, "rope_parameters": {"rope_type": "linear", "factor": 2.0}}
    for layer_type in ("full_attention", "sliding_attention"):
        assert rope_config_from_hf(config, layer_type=layer_type).scaling == LinearScaling(2.0)
    with pytest.raises(ValueError, match=r"^layer_type 'chunked' is not a layer type of this config "
                                         r"\('full_attention', 'sliding_attention'\); its rope parameters are not "
                                         r"nested by layer type$"):
        rope_config_from_hf(config, layer_type="chunked")


def test_reader_both_blocks_read_with_the_given_layer_type_and_head_dim():
    """With rope_parameters and rope_scaling both present, each is read for the layer type and head width asked."""
    config = {"head_dim": 64, "max_position_embeddings": 4096, "rope_theta": 1e6, "rope_local_base_freq": 1e4,
              "rope_scaling": {"rope_type": "linear", "factor": 8.0},
              "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                                  "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}}}
    sliding = rope_config_from_hf(config, layer_type="sliding_attention", head_dim=32)
    assert (sliding.rope_type, sliding.base, sliding.scaling, sliding.head_dim) == ("default", 1e4, None, 32)
    full = rope_config_from_hf(config, layer_type="full_attention", head_dim=16)
    assert (full.rope_type, full.base, full.scaling, full.head_dim) == ("linear", 1e6, LinearScaling(8.0), 16)
    conflict = {"head_dim": 8, "rope_parameters": {"rope_type": "linear", "factor": 2.0},
                "rope_scaling": {"rope_type": "linear", "factor": 4.0}}
    with pytest.raises(ValueError, match=r"\. transformers 5\.23 uses rope_scaling and takes its rope_theta from the "
                                         r"top level or the model's default, dropping rope_parameters entirely; "
                                         r"remove the key you do not mean$"):
        rope_config_from_hf(conflict)


@pytest.mark.parametrize("params,key", [
    ({"rope_type": "yarn", "factor": "4"}, "factor"),
    ({"rope_type": "longrope", "factor": "4", "short_factor": [1.0] * 4, "long_factor": [1.0] * 4}, "factor"),
    ({"rope_type": "dynamic", "factor": "2"}, "factor"),
    ({"rope_type": "yarn", "factor": 4.0, "beta_slow": "1"}, "beta_slow"),
    ({"rope_type": "llama3", "factor": "8", "low_freq_factor": 1.0, "high_freq_factor": 4.0}, "factor"),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": "1", "high_freq_factor": 4.0}, "low_freq_factor"),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": "4"}, "high_freq_factor"),
])
def test_reader_messages_name_the_parameter(params, key):
    config = {"head_dim": 8, "max_position_embeddings": 4096,
              "rope_parameters": {"original_max_position_embeddings": 1024, **params}}
    with pytest.raises(TypeError, match=rf"^config rope parameter '{key}' must be a real number, got str"):
        rope_config_from_hf(config)


# ------------------------------------------------------------------------------ complete_turn_pairs, RopeConfig.summary


@pytest.mark.parametrize("d", [16, 32, 64, 96, 128, 256])
@pytest.mark.parametrize("base", [100.0, 1e4, 5e5, 1e6])
@pytest.mark.parametrize("length", [17, 1000, 4096, 8192, 131072])
def test_complete_turn_pairs_brute_force_and_formula(d, base, length):
    from course_pe import complete_turn_pairs

    count = complete_turn_pairs(d, base, length)
    brute = sum(1 for i in range(d // 2) if length * base ** (-2 * i / d) >= 2 * math.pi)  # a full turn within length
    assert count == brute
    formula = min(d // 2, max(0, math.floor(d / 2 * math.log(length / (2 * math.pi)) / math.log(base)) + 1))
    assert count == formula


def test_complete_turn_pairs_known_values_and_scaling():
    from course_pe import complete_turn_pairs

    assert complete_turn_pairs(128, 1e4, 4096) == 46  # Llama 2: the critical dimension 92 of Liu et al.
    assert complete_turn_pairs(128, 1e4, 8192) == 50
    # interpolation by s turns every pair s times slower: within s * L the same pairs turn as within L unscaled
    for s in (2.0, 4.0, 8.0):
        assert complete_turn_pairs(128, 1e4, int(4096 * s), LinearScaling(s)) == 46
    with pytest.raises(ValueError, match="length"):
        complete_turn_pairs(128, 1e4, 0)


def test_rope_config_summary():
    from course_pe import complete_turn_pairs

    phi2 = rope_config_from_hf({"hidden_size": 2560, "num_attention_heads": 32, "partial_rotary_factor": 0.4,
                                "rope_theta": 10000.0, "max_position_embeddings": 2048}).summary()
    assert (phi2["head_dim"], phi2["rotary_dim"], phi2["unrotated_dim"], phi2["pairs"]) == (80, 32, 48, 16)
    assert phi2["training_length"] == 2048 and phi2["complete_pairs"] == complete_turn_pairs(32, 1e4, 2048)
    assert phi2["slowest_wavelength"] == pytest.approx(2 * math.pi * 1e4 ** (30 / 32))
    assert phi2["scaling"] is None and phi2["attention_factor"] == 1.0
    llama31 = rope_config_from_hf({"head_dim": 128, "rope_theta": 500000.0, "max_position_embeddings": 131072,
                                   "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                    "high_freq_factor": 4.0,
                                                    "original_max_position_embeddings": 8192}}).summary()
    assert llama31["training_length"] == 8192 and llama31["complete_pairs"] == 35  # the unscaled pairs, within 8192
    assert isinstance(llama31["scaling"], Llama3Scaling) and llama31["max_positions"] == 131072
    yarn = rope_config_from_hf({"head_dim": 64, "rope_theta": 150000, "max_position_embeddings": 131072,
                                "rope_scaling": {"rope_type": "yarn", "factor": 32.0,
                                                 "original_max_position_embeddings": 4096}}).summary()
    assert yarn["attention_factor"] == pytest.approx(0.1 * math.log(32) + 1)
    assert rope_config_from_hf({"head_dim": 64}).summary(training_length=100)["training_length"] == 100
    with pytest.raises(ValueError, match="training_length"):
        rope_config_from_hf({"head_dim": 64}).summary()


@pytest.mark.parametrize("ratio", [1, 500, 10000.0])
def test_reader_refuses_glm_rope_ratio(ratio):
    """THUDM's GLM-4 configurations multiply the base by ``rope_ratio`` in their own code; reading the other keys
    would silently give base 10000, so the reader refuses the key (even at 1, where the base would be right, because
    the rotated width is also set by that code), naming it and the conversion to use."""
    config = {"hidden_size": 4096, "num_attention_heads": 32, "rope_ratio": ratio, "seq_length": 131072}
    with pytest.raises(ValueError, match=r"^config has 'rope_ratio' \(.*\).*base = 10000 \* rope_ratio.*GlmConfig"):
        rope_config_from_hf(config)
    del config["rope_ratio"]
    assert rope_config_from_hf(config).base == 10000.0  # what would have come back without the check
