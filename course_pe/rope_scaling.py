"""RoPE frequencies and the context-extension scalings that remap them.

RoPE rotates pair ``i`` of a ``head_dim``-wide query or key by ``p * theta_i`` with

.. math:: \\theta_i = \\text{base}^{-2i/d}, \\qquad i = 0, \\dots, d/2 - 1, \\quad d = \\text{head\\_dim}.

(A common bug writes ``base ** (-2 * arange(0, d, 2) / d)``: ``arange(0, d, 2)`` already *is*
``2i``, so the exponent doubles and most pairs barely rotate.)

A *scaling* changes the frequencies so that a model trained on ``original_max_positions`` tokens
can be run on more. Each is a small frozen dataclass; :func:`rope_frequencies` dispatches to one
function per method (the design of Hugging Face's ``modeling_rope_utils``) and returns
``(inv_freq, attention_factor)``: the float32 frequencies and the factor by which cos and sin are
multiplied (1.0 unless the method defines one).

=========================  =====================================================================
``LinearScaling``          position interpolation (Chen et al., 2023): ``theta_i / s``
``NTKScaling``             "NTK-aware" (bloc97, 2023): ``base' = base * s**(d / (d - 2))``
``DynamicNTKScaling``      NTK with ``s`` replaced by ``s L'/L - (s - 1)``, ``L' = max(seq_len, L)``
``YaRNScaling``            YaRN (Peng et al., 2023): per-pair ramp between interpolation and
                           extrapolation, plus attention factor ``0.1 ln s + 1``
``Llama3Scaling``          Llama 3.1 (Meta's reference code ``apply_scaling``, 2024; Hugging Face
                           ``rope_type="llama3"``): long wavelengths divided by ``s``, short ones
                           kept, a smooth blend between
``LongRoPEScaling``        LongRoPE (Ding et al., 2024; Phi-3): one searched factor per pair,
                           a ``short_factor`` set up to the original length and a
                           ``long_factor`` set beyond it, plus an attention factor
``ProportionalScaling``    "proportional" RoPE (Hugging Face ``rope_type="proportional"``, Gemma 4):
                           only the first fraction of the pairs rotate, with the frequencies of
                           the full head; the other pairs get frequency 0
=========================  =====================================================================

:func:`rope_config_from_hf` reads the ``rope_parameters`` (or legacy ``rope_scaling``) of a Hugging Face
``config.json`` into these objects, for every ``rope_type`` of transformers' ``modeling_rope_utils``;
``tests/test_rope_scaling_hf.py`` compares every type with transformers 5.23 on many configurations.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from ._validation import (
    check_bool,
    check_dtype,
    check_memory,
    check_even,
    check_float,
    check_int,
    check_positive_float,
    check_positive_int,
)

__all__ = [
    "DynamicNTKScaling",
    "HF_ROPE_TYPES",
    "LinearScaling",
    "Llama3Scaling",
    "LongRoPEScaling",
    "MAX_LONGROPE_FACTORS",
    "NTKScaling",
    "ProportionalScaling",
    "RopeConfig",
    "RopeScaling",
    "YaRNScaling",
    "complete_turn_pairs",
    "rope_config_from_hf",
    "rope_frequencies",
    "yarn_correction_range",
    "yarn_mscale",
    "yarn_softmax_scale",
]


def _check_factor(factor: float) -> float:
    factor = check_positive_float("factor", factor)
    if factor < 1.0:
        raise ValueError(f"scaling factor must be >= 1 (it stretches the context), got {factor}")
    return factor


@dataclass(frozen=True)
class LinearScaling:
    """Position interpolation: every frequency divided by ``factor`` (positions squeezed by ``s``)."""

    factor: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", _check_factor(self.factor))


@dataclass(frozen=True)
class NTKScaling:
    """NTK-aware scaling: a larger base, ``base * factor**(d / (d - 2))``.

    The exponent makes the *slowest* pair exactly ``factor`` times slower (pure interpolation there)
    while the fastest pair is unchanged (pure extrapolation).
    """

    factor: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", _check_factor(self.factor))


@dataclass(frozen=True)
class DynamicNTKScaling:
    """NTK scaling whose strength grows with the current sequence length.

    For ``seq_len <= original_max_positions`` the frequencies are the original ones. Beyond it,
    ``base' = base * (factor * seq_len / L - (factor - 1)) ** (d / (d - 2))`` (Hugging Face's formula).

    The effective NTK factor ``s' = s L'/L - (s - 1)`` is 1 at ``L' = L`` and grows by ``s`` per original length: at
    ``L' = s L`` it is ``s**2 - s + 1``, not ``s`` (25 at ``4L`` and 57 at ``8L`` for ``s = 8``), so a ``factor``
    above 1 stretches more than the length requires. ``factor = 1`` gives ``s' = L'/L``, the "Dynamic
    Scaling" of the YaRN paper. With a KV cache, keys rotated under the frequencies of an earlier, shorter length are
    mixed with queries rotated under the current ones (Hugging Face caches keys after rotation).
    """

    factor: float
    original_max_positions: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", _check_factor(self.factor))
        object.__setattr__(self, "original_max_positions",
                           check_positive_int("original_max_positions", self.original_max_positions))


@dataclass(frozen=True)
class YaRNScaling:
    """YaRN: "NTK-by-parts" interpolation plus an attention temperature.

    Pairs that complete more than ``beta_fast`` rotations within ``original_max_positions`` keep
    their frequency; pairs with fewer than ``beta_slow`` rotations are interpolated (divided by
    ``factor``); a ramp blends the pairs between, linear in the *pair index* (as in the YaRN reference code and
    Hugging Face), which is linear in the logarithm of the number of turns; the paper writes its ramp
    ``gamma(r) = (r - alpha) / (beta - alpha)`` linear in the number of turns ``r`` itself, which keeps less of the
    pairs inside the range. With ``truncate`` (the default, as in the YaRN reference code) the correction range is
    floored and ceiled to whole pair indices; ``truncate=False`` keeps the fractional bounds (Hugging Face's
    ``"truncate": false``, set by gpt-oss).

    **The temperature, and what it multiplies.** YaRN divides the logits by a temperature ``t`` with
    ``sqrt(1/t) = 0.1 ln(s) + 1`` (the paper, section 3.4). The reference code and Hugging Face implement it by
    multiplying cos and sin by ``attention_factor = 0.1 ln(s) + 1``, so every rotated query-key product, and with
    it the logit, is multiplied by its square (1.32 for ``s = 16``). DeepSeek-V2/V3 split that factor in two with
    ``mscale`` and ``mscale_all_dim`` (:func:`yarn_mscale` is ``0.1 m ln(s) + 1``):

    * cos and sin are multiplied by ``yarn_mscale(s, mscale) / yarn_mscale(s, mscale_all_dim)``
      (``attention_factor``, what :func:`rope_frequencies` returns);
    * the softmax scale ``1 / sqrt(d_qk)`` is multiplied by ``yarn_mscale(s, mscale_all_dim) ** 2``
      (:func:`yarn_softmax_scale`), for the *whole* logit, including the dimensions that are not rotated.

    The rotated part of a logit therefore gets ``yarn_mscale(s, mscale) ** 2`` in total, the unrotated part
    ``yarn_mscale(s, mscale_all_dim) ** 2``. The released configurations set both equal (V2: 0.707, V3: 1.0, with
    ``s = 40``), so cos and sin are *not* scaled at all and the temperature sits entirely in the softmax scale:
    ``x1.59`` for V2 and ``x1.87`` for V3 (``tests/test_rope_scaling_hf.py`` checks these numbers). Reading only
    the cos/sin factor, one would conclude that DeepSeek-V3 has no temperature.

    The rule for ``attention_factor`` is Hugging Face's: an explicit ``attention_factor`` wins; otherwise the ratio
    above when both ``mscale`` and ``mscale_all_dim`` are given and non-zero; otherwise ``yarn_mscale(s)``.
    (DeepSeek's own reference code defaults ``mscale_all_dim`` to 0, where ``yarn_mscale(s, 0) = 1``, and then
    scales cos and sin by ``yarn_mscale(s, mscale)``; Hugging Face ignores an ``mscale`` given alone. No released
    DeepSeek configuration gives one without the other.)

    ``factor >= 1``, ``beta_fast > beta_slow > 0``, ``attention_factor > 0``, ``mscale >= 0`` and
    ``mscale_all_dim >= 0`` are finite real numbers (the last three also ``None``); ``original_max_positions`` a
    positive integer; ``truncate`` a bool.
    """

    factor: float
    original_max_positions: int
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    attention_factor: float | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", _check_factor(self.factor))
        object.__setattr__(self, "original_max_positions",
                           check_positive_int("original_max_positions", self.original_max_positions))
        object.__setattr__(self, "beta_fast", check_positive_float("beta_fast", self.beta_fast))
        object.__setattr__(self, "beta_slow", check_positive_float("beta_slow", self.beta_slow))
        if self.beta_fast <= self.beta_slow:
            raise ValueError(f"beta_fast ({self.beta_fast}) must be greater than beta_slow ({self.beta_slow})")
        if self.attention_factor is not None:
            object.__setattr__(
                self, "attention_factor", check_positive_float("attention_factor", self.attention_factor)
            )
        for name in ("mscale", "mscale_all_dim"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, check_float(name, getattr(self, name), minimum=0.0))
        object.__setattr__(self, "truncate", check_bool("truncate", self.truncate))


@dataclass(frozen=True)
class Llama3Scaling:
    """Llama 3.1's frequency-dependent scaling.

    With ``L = original_max_positions`` and wavelength ``lambda_i = 2 pi / theta_i``:
    wavelengths shorter than ``L / high_freq_factor`` are kept; longer than ``L / low_freq_factor``
    are divided by ``factor``; between, ``(1 - t) theta_i / factor + t theta_i`` with
    ``t = (L / lambda_i - low_freq_factor) / (high_freq_factor - low_freq_factor)``.

    ``high_freq_factor >= low_freq_factor > 0``. Equal factors leave no band between (a hard switch at wavelength
    ``L / low_freq_factor``): Llama 4 Scout's configuration has ``low_freq_factor = high_freq_factor = 1``. A
    wavelength exactly on the switch is divided by ``factor`` (Meta's ``apply_scaling`` asserts that it never
    happens; Hugging Face gives it NaN, 0 / 0).
    """

    factor: float
    original_max_positions: int
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", _check_factor(self.factor))
        object.__setattr__(self, "original_max_positions",
                           check_positive_int("original_max_positions", self.original_max_positions))
        object.__setattr__(self, "low_freq_factor", check_positive_float("low_freq_factor", self.low_freq_factor))
        object.__setattr__(self, "high_freq_factor", check_positive_float("high_freq_factor", self.high_freq_factor))
        if self.high_freq_factor < self.low_freq_factor:
            raise ValueError(
                f"high_freq_factor ({self.high_freq_factor}) must be at least "
                f"low_freq_factor ({self.low_freq_factor})"
            )


#: Most factors a :class:`LongRoPEScaling` list may hold (one per rotation pair: a head of ``2**21`` dimensions). The
#: length is checked before the items, each of which is checked in Python.
MAX_LONGROPE_FACTORS = 2**20


def _check_factor_list(name: str, values: object) -> tuple[float, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, torch.Tensor)):
        raise TypeError(f"{name} must be a sequence of numbers (one per rotation pair), got {type(values).__name__}")
    count = values.numel() if isinstance(values, torch.Tensor) else len(values)
    if count > MAX_LONGROPE_FACTORS:
        raise ValueError(f"{name} must hold one factor per rotation pair, at most {MAX_LONGROPE_FACTORS} (2**20), got "
                         f"{count}")
    if isinstance(values, torch.Tensor):
        if values.dim() != 1 or values.dtype == torch.bool or values.is_complex():
            raise TypeError(f"{name} must be a 1-D tensor of real numbers, got shape {tuple(values.shape)} {values.dtype}")
        values = values.tolist()
    checked = tuple(check_positive_float(f"{name}[{i}]", v) for i, v in enumerate(values))
    if not checked:
        raise ValueError(f"{name} must hold one factor per rotation pair, got an empty sequence")
    return checked


@dataclass(frozen=True)
class LongRoPEScaling:
    """LongRoPE (Ding et al., 2024), as released with Phi-3 (Hugging Face ``rope_type="longrope"``).

    Pair ``i`` gets frequency ``theta_i / lambda_i``, with one rescale factor ``lambda_i`` per pair found by an
    evolutionary search: ``short_factor`` while the sequence fits the original length, ``long_factor`` once it is
    longer. The switch is a function of the *current length*: Hugging Face picks ``long_factor`` when
    ``max(position_ids) + 1 > original_max_positions`` and :class:`~course_pe.rope.RotaryEmbedding` does the same,
    so, as with dynamic NTK, keys cached under the short factors meet queries rotated with the long ones when a
    generation crosses the original length.

    cos and sin are multiplied by ``attention_factor``, by default ``sqrt(1 + ln(factor) / ln(L))`` with
    ``L = original_max_positions`` (1 when ``factor <= 1``), whatever the length: Phi-3-mini-128k (``factor =
    131072 / 4096 = 32``) multiplies every logit by ``1 + ln 32 / ln 4096``.

    ``short_factor`` and ``long_factor``: sequences of finite numbers > 0 of one length (``head_dim // 2`` of the
    rotated width, at most :data:`MAX_LONGROPE_FACTORS`); ``original_max_positions`` a positive integer (at least 2
    when the default attention factor needs ``ln L``); ``factor`` (the context-extension ratio ``max_positions / L``,
    used only for the default attention factor) a finite number >= 1; ``attention_factor`` ``None`` or a finite
    number > 0.
    """

    short_factor: tuple[float, ...]
    long_factor: tuple[float, ...]
    original_max_positions: int
    factor: float = 1.0
    attention_factor: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "short_factor", _check_factor_list("short_factor", self.short_factor))
        object.__setattr__(self, "long_factor", _check_factor_list("long_factor", self.long_factor))
        if len(self.short_factor) != len(self.long_factor):
            raise ValueError(f"short_factor and long_factor must have one length (one factor per pair), got "
                             f"{len(self.short_factor)} and {len(self.long_factor)}")
        object.__setattr__(self, "original_max_positions",
                           check_positive_int("original_max_positions", self.original_max_positions))
        object.__setattr__(self, "factor", _check_factor(self.factor))
        if self.attention_factor is not None:
            object.__setattr__(self, "attention_factor", check_positive_float("attention_factor", self.attention_factor))
        elif self.factor > 1.0 and self.original_max_positions < 2:
            raise ValueError("original_max_positions must be >= 2 for the default attention factor "
                             "sqrt(1 + ln(factor) / ln(original_max_positions)); or give attention_factor")

    @property
    def default_attention_factor(self) -> float:
        """``attention_factor`` if given, else ``sqrt(1 + ln(factor) / ln(L))`` (1 for ``factor <= 1``)."""
        if self.attention_factor is not None:
            return self.attention_factor
        if self.factor <= 1.0:
            return 1.0
        return math.sqrt(1.0 + math.log(self.factor) / math.log(self.original_max_positions))


@dataclass(frozen=True)
class ProportionalScaling:
    """Proportional RoPE (Hugging Face ``rope_type="proportional"``, used by Gemma 4's global layers).

    Of the ``head_dim / 2`` pairs, the first ``int(partial_rotary_factor * head_dim // 2)`` rotate with the
    frequencies of the *full* head, ``base ** (-2i / head_dim)``, and the others get frequency 0 (they never turn):
    unlike ordinary partial rotary (``rotary_dim``, frequencies of a narrower head), the rotated pairs keep the
    frequencies they would have in a fully rotated head. All frequencies are then divided by ``factor``.

    ``partial_rotary_factor`` is a finite number in ``[0, 1]``, ``factor`` a finite number >= 1.
    """

    partial_rotary_factor: float
    factor: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "partial_rotary_factor",
                           check_float("partial_rotary_factor", self.partial_rotary_factor, minimum=0.0, maximum=1.0))
        object.__setattr__(self, "factor", _check_factor(self.factor))


RopeScaling = (
    LinearScaling | NTKScaling | DynamicNTKScaling | YaRNScaling | Llama3Scaling | LongRoPEScaling | ProportionalScaling
)


def _base_inv_freq(head_dim: int, base: float) -> torch.Tensor:
    """float64 ``base ** (-2i / head_dim)``, shape ``(head_dim // 2,)``."""
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return base ** (-2.0 * i / head_dim)


def _default(head_dim: int, base: float, scaling: None, seq_len: int | None) -> tuple[torch.Tensor, float]:
    return _base_inv_freq(head_dim, base), 1.0


def _linear(head_dim: int, base: float, scaling: LinearScaling, seq_len: int | None) -> tuple[torch.Tensor, float]:
    return _base_inv_freq(head_dim, base) / scaling.factor, 1.0


def _ntk(head_dim: int, base: float, scaling: NTKScaling, seq_len: int | None) -> tuple[torch.Tensor, float]:
    new_base = base * scaling.factor ** (head_dim / (head_dim - 2))
    return _base_inv_freq(head_dim, new_base), 1.0


def _dynamic_ntk(
    head_dim: int, base: float, scaling: DynamicNTKScaling, seq_len: int | None
) -> tuple[torch.Tensor, float]:
    original = scaling.original_max_positions
    if seq_len is None or seq_len <= original:
        return _base_inv_freq(head_dim, base), 1.0
    s = scaling.factor * seq_len / original - (scaling.factor - 1.0)
    new_base = base * s ** (head_dim / (head_dim - 2))
    return _base_inv_freq(head_dim, new_base), 1.0


def yarn_correction_range(
    head_dim: int,
    base: float,
    original_max_positions: int,
    beta_fast: float,
    beta_slow: float,
    *,
    truncate: bool = True,
) -> tuple[float, float]:
    """The pair indices ``(low, high)`` between which YaRN ramps. With ``truncate`` (the reference code's rule, the
    default) ``low`` is floored and ``high`` ceiled to whole indices; ``truncate=False`` keeps them fractional.

    Pair ``i`` completes ``L theta_i / (2 pi)`` rotations over ``L`` positions; solving
    ``L theta_i / (2 pi) = beta`` for ``i`` gives ``d ln(L / (2 pi beta)) / (2 ln base)``: ``low`` for
    ``beta_fast``, ``high`` for ``beta_slow``.

    **The clip is one-sided**, as in the YaRN reference code and transformers: ``low`` is raised to 0 if negative and
    ``high`` lowered to ``head_dim - 1`` if above, nothing else. So ``low`` can exceed ``head_dim - 1``, and then
    ``high``: for an original length beyond about ``2 pi beta_fast base**(2 (d - 1) / d)`` (1.5e10 for ``d = 64``,
    base 10000, ``beta_fast = 32``), e.g. ``yarn_correction_range(64, 1e4, 10**12, 32, 1) = (77.0, 63.0)``. The
    ramp ``(i - low) / (high - low)``, clamped to [0, 1], is then 1 for every pair: every pair is interpolated,
    although each completes more than ``beta_fast`` turns and the formula would keep them all. transformers
    computes the same, and :func:`rope_frequencies` follows it; no released model comes near such a length.

    Arguments: ``head_dim`` a positive even integer, ``base > 1`` (``ln base`` is a divisor),
    ``original_max_positions`` a positive integer, ``beta_fast > beta_slow > 0`` finite real numbers, ``truncate``
    a bool.
    """
    head_dim = check_even("head_dim", head_dim)
    base = check_positive_float("base", base)
    if base <= 1.0:
        raise ValueError(f"base must be > 1 (its logarithm is a divisor), got {base}")
    original_max_positions = check_positive_int("original_max_positions", original_max_positions)
    beta_fast = check_positive_float("beta_fast", beta_fast)
    beta_slow = check_positive_float("beta_slow", beta_slow)
    if beta_fast <= beta_slow:
        raise ValueError(f"beta_fast ({beta_fast}) must be greater than beta_slow ({beta_slow})")
    truncate = check_bool("truncate", truncate)

    def pair_index(rotations: float) -> float:
        ratio = original_max_positions / (rotations * 2 * math.pi)
        if ratio == 0.0 or math.isinf(ratio):  # beta near the float limits: ln L - ln(2 pi beta) stays finite
            ratio_log = math.log(original_max_positions) - math.log(rotations) - math.log(2 * math.pi)
        else:
            ratio_log = math.log(ratio)  # the formula of the reference code, rounding for rounding
        return head_dim * ratio_log / (2 * math.log(base))

    low, high = pair_index(beta_fast), pair_index(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    return float(max(low, 0)), float(min(high, head_dim - 1))


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """``0.1 * mscale * ln(factor) + 1`` for ``factor > 1``, else 1: YaRN's ``sqrt(1/t)`` (DeepSeek's
    ``yarn_get_mscale``). ``factor`` is a finite number > 0, ``mscale`` a finite number >= 0."""
    factor = check_positive_float("factor", factor)
    mscale = check_float("mscale", mscale, minimum=0.0)
    return 0.1 * mscale * math.log(factor) + 1.0 if factor > 1.0 else 1.0


def yarn_softmax_scale(qk_head_dim: int, scaling: "RopeScaling | None" = None) -> float:
    """The softmax scale (the number the logits ``q . k`` are multiplied by) of an attention with ``scaling``.

    ``1 / sqrt(qk_head_dim)``, times ``yarn_mscale(factor, mscale_all_dim) ** 2`` when ``scaling`` is a
    :class:`YaRNScaling` with a non-zero ``mscale_all_dim`` (DeepSeek-V2/V3: Hugging Face's ``yarn_apply_mscale``,
    DeepSeek's ``softmax_scale`` in its reference ``inference/model.py``). ``qk_head_dim`` is the full width of the
    query-key product, rotated and unrotated dimensions together (192 for DeepSeek-V3: 128 + 64). See
    :class:`YaRNScaling` for how this and the cos/sin factor divide the temperature between them.
    """
    qk_head_dim = check_positive_int("qk_head_dim", qk_head_dim)
    if scaling is not None and type(scaling) not in _METHODS:
        names = ", ".join(t.__name__ for t in _METHODS if t is not type(None))
        raise TypeError(f"scaling must be None or one of {names}, got {type(scaling).__name__}")
    scale = qk_head_dim**-0.5
    if isinstance(scaling, YaRNScaling) and scaling.mscale_all_dim:
        scale *= yarn_mscale(scaling.factor, scaling.mscale_all_dim) ** 2
    return scale


def _yarn(head_dim: int, base: float, scaling: YaRNScaling, seq_len: int | None) -> tuple[torch.Tensor, float]:
    theta = _base_inv_freq(head_dim, base)
    low, high = yarn_correction_range(
        head_dim, base, scaling.original_max_positions, scaling.beta_fast, scaling.beta_slow,
        truncate=scaling.truncate,
    )
    if low == high:
        high += 0.001  # avoid a zero-width ramp
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0.0, 1.0)
    extrapolate = 1.0 - ramp  # 1 for fast pairs (kept), 0 for slow pairs (interpolated)
    inv_freq = theta / scaling.factor * (1.0 - extrapolate) + theta * extrapolate
    if scaling.attention_factor is not None:
        factor = scaling.attention_factor
    elif scaling.mscale and scaling.mscale_all_dim:
        factor = yarn_mscale(scaling.factor, scaling.mscale) / yarn_mscale(scaling.factor, scaling.mscale_all_dim)
    else:
        factor = 0.1 * math.log(scaling.factor) + 1.0 if scaling.factor > 1 else 1.0
    return inv_freq, float(factor)


def _longrope(
    head_dim: int, base: float, scaling: LongRoPEScaling, seq_len: int | None
) -> tuple[torch.Tensor, float]:
    pairs = head_dim // 2
    if len(scaling.short_factor) != pairs:
        raise ValueError(f"LongRoPE short_factor and long_factor must have head_dim // 2 = {pairs} entries (one per "
                         f"rotation pair), got {len(scaling.short_factor)}")
    long = seq_len is not None and seq_len > scaling.original_max_positions
    factors = torch.tensor(scaling.long_factor if long else scaling.short_factor, dtype=torch.float64)
    return _base_inv_freq(head_dim, base) / factors, scaling.default_attention_factor


def _proportional(
    head_dim: int, base: float, scaling: ProportionalScaling, seq_len: int | None
) -> tuple[torch.Tensor, float]:
    rotated = int(scaling.partial_rotary_factor * head_dim // 2)
    inv_freq = _base_inv_freq(head_dim, base)
    inv_freq[rotated:] = 0.0  # these pairs never turn
    return inv_freq / scaling.factor, 1.0


def _llama3(head_dim: int, base: float, scaling: Llama3Scaling, seq_len: int | None) -> tuple[torch.Tensor, float]:
    theta = _base_inv_freq(head_dim, base)
    original = scaling.original_max_positions
    wavelength = 2 * math.pi / theta
    low_freq_wavelength = original / scaling.low_freq_factor
    high_freq_wavelength = original / scaling.high_freq_factor
    if scaling.high_freq_factor > scaling.low_freq_factor:
        smooth = (original / wavelength - scaling.low_freq_factor) / (
            scaling.high_freq_factor - scaling.low_freq_factor
        )
    else:  # no band between the two regimes: a wavelength on the switch is interpolated
        smooth = torch.zeros_like(theta)
    blended = (1.0 - smooth) * theta / scaling.factor + smooth * theta
    inv_freq = torch.where(
        wavelength < high_freq_wavelength,
        theta,
        torch.where(wavelength > low_freq_wavelength, theta / scaling.factor, blended),
    )
    return inv_freq, 1.0


_METHODS: dict[type, Callable[..., tuple[torch.Tensor, float]]] = {
    type(None): _default,
    LinearScaling: _linear,
    NTKScaling: _ntk,
    DynamicNTKScaling: _dynamic_ntk,
    YaRNScaling: _yarn,
    Llama3Scaling: _llama3,
    LongRoPEScaling: _longrope,
    ProportionalScaling: _proportional,
}


def rope_frequencies(
    head_dim: int,
    *,
    base: float = 10000.0,
    scaling: RopeScaling | None = None,
    seq_len: int | None = None,
    dtype: torch.dtype = torch.float32,
    angle_dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, float]:
    """RoPE frequencies for one head.

    Args:
        head_dim: even width of a query/key head.
        base: the frequency base (10000 in RoFormer and LLaMA 1-2, 500000 in Llama 3).
        scaling: ``None`` or one of the scaling dataclasses of this module.
        seq_len: current sequence length; only :class:`DynamicNTKScaling` and :class:`LongRoPEScaling` (which
            switches to its long factors beyond ``original_max_positions``) use it.
        dtype: floating dtype of the returned frequencies. The default float32 matches what checkpoints and
            other libraries store; :func:`~course_pe.rope.apply_rope` uses float64, because at position
            ``p`` a float32 rounding of ``theta_i`` shifts the angle by up to ``p * theta_i * 2**-24``.
        angle_dtype: ``torch.float64`` (the default) computes the frequencies in float64 and rounds them once;
            ``torch.float32`` computes them as Hugging Face transformers 5.23 does, operation for operation in
            float32 (``1 / base ** (arange(0, d, 2).float() / d)`` and each scaling's float32 arithmetic), so that
            the result equals its ``inv_freq`` buffer bit for bit (those float32 values are often one unit in the
            last place away from the correctly rounded ones). For the default frequencies this is also Meta's and
            torchtune's computation.

    Returns:
        ``(inv_freq, attention_factor)``: a tensor of shape ``(head_dim // 2,)`` (computed in
        ``angle_dtype``, then cast to ``dtype``) and a Python float.
    """
    head_dim = check_even("head_dim", head_dim)
    base = check_positive_float("base", base)
    if base <= 1.0:
        raise ValueError(f"base must be > 1 so that frequencies decrease, got {base}")
    check_dtype("dtype", dtype, "floating")
    if seq_len is not None:
        seq_len = check_int("seq_len", seq_len, minimum=1, maximum=2**53 + 1)  # positions 0 ... 2**53
    method = _METHODS.get(type(scaling))
    if method is None:
        names = ", ".join(t.__name__ for t in _METHODS if t is not type(None))
        raise ValueError(f"unknown RoPE scaling {scaling!r}; expected None or one of {names}")
    if head_dim == 2 and isinstance(scaling, (NTKScaling, DynamicNTKScaling)):
        raise ValueError("NTK scalings need head_dim > 2 (their exponent is d / (d - 2))")
    check_dtype("angle_dtype", angle_dtype, "floating")
    if angle_dtype not in (torch.float32, torch.float64):
        raise ValueError(f"angle_dtype must be torch.float64 (exact) or torch.float32 (reference numerics), got {angle_dtype}")
    check_memory("head_dim", 16 * 8 * (head_dim // 2), f"{head_dim // 2} frequencies")
    inv_freq, attention_factor = method(head_dim, base, scaling, seq_len)
    if angle_dtype == torch.float32:
        inv_freq = _float32_reference(head_dim, base, scaling, seq_len)
    return inv_freq.to(dtype), float(attention_factor)


def _module_frequencies(
    head_dim: int, base: float, scaling: RopeScaling | None, seq_len: int | None, angle_dtype: torch.dtype
) -> tuple[torch.Tensor, float]:
    """float64 :func:`rope_frequencies` as the rotary *modules* of transformers 5.23 compute them.

    They differ from ``ROPE_INIT_FUNCTIONS[...](config, seq_len=n)`` with an integer ``n`` in one case: a dynamic NTK
    module grown beyond its original length passes the length as a tensor (``max(position_ids) + 1``), so its new base
    is computed in float32 tensor arithmetic, not in Python floats, and for about a quarter of the lengths (664 of
    513 ... 2999 with original 512, factor 2) the frequencies differ in the last bit. With ``angle_dtype=float32``
    this function repeats that arithmetic (:class:`~course_pe.rope.RotaryEmbedding` uses it)."""
    inv_freq, attention_factor = rope_frequencies(head_dim, base=base, scaling=scaling, seq_len=seq_len,
                                                  dtype=torch.float64, angle_dtype=angle_dtype)
    if (angle_dtype == torch.float32 and isinstance(scaling, DynamicNTKScaling) and seq_len is not None
            and seq_len > scaling.original_max_positions):
        original = scaling.original_max_positions
        length = torch.maximum(torch.tensor(seq_len), torch.tensor(original, dtype=torch.int64))
        grown = base * ((scaling.factor * length / original) - (scaling.factor - 1)) ** (head_dim / (head_dim - 2))
        exponent = torch.arange(0, head_dim, 2, dtype=torch.int64).to(dtype=torch.float32) / head_dim
        inv_freq = (1.0 / (grown**exponent)).to(torch.float64)
    return inv_freq, attention_factor


def _float32_pow_frequencies(head_dim: int, base: float, count: int | None = None) -> torch.Tensor:
    """``1 / base ** (arange(0, head_dim, 2).float() / head_dim)`` in float32, the reference implementations'
    default frequencies (Hugging Face's ``compute_default_rope_parameters``, Meta's ``precompute_freqs_cis``,
    torchtune's ``RotaryPositionalEmbeddings``); ``count`` pairs (default ``head_dim // 2``)."""
    stop = head_dim if count is None else 2 * count
    exponent = torch.arange(0, stop, 2, dtype=torch.int64).to(dtype=torch.float32) / head_dim
    return 1.0 / (base**exponent)


def _float32_reference(head_dim: int, base: float, scaling: RopeScaling | None, seq_len: int | None) -> torch.Tensor:
    """The frequencies as transformers 5.23's ``modeling_rope_utils`` computes them, in float32, operation for
    operation (the same torch operations on the same float32 values give the same bits)."""
    if scaling is None:
        return _float32_pow_frequencies(head_dim, base)
    if isinstance(scaling, LinearScaling):
        inv_freq = _float32_pow_frequencies(head_dim, base)
        inv_freq /= scaling.factor
        return inv_freq
    if isinstance(scaling, NTKScaling):
        return _float32_pow_frequencies(head_dim, base * scaling.factor ** (head_dim / (head_dim - 2)))
    if isinstance(scaling, DynamicNTKScaling):
        original = scaling.original_max_positions
        length = original if seq_len is None else max(seq_len, original)
        new_base = base * ((scaling.factor * length / original) - (scaling.factor - 1)) ** (head_dim / (head_dim - 2))
        return _float32_pow_frequencies(head_dim, new_base)
    if isinstance(scaling, YaRNScaling):
        pos_freqs = base ** (torch.arange(0, head_dim, 2).to(dtype=torch.float32) / head_dim)
        extrapolated = 1.0 / pos_freqs
        interpolated = 1.0 / (scaling.factor * pos_freqs)
        low, high = yarn_correction_range(head_dim, base, scaling.original_max_positions, scaling.beta_fast,
                                          scaling.beta_slow, truncate=scaling.truncate)
        if low == high:
            high += 0.001
        ramp = torch.clamp((torch.arange(head_dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
        keep = 1 - ramp
        return interpolated * (1 - keep) + extrapolated * keep
    if isinstance(scaling, LongRoPEScaling):
        long = seq_len is not None and seq_len > scaling.original_max_positions
        factors = torch.tensor(scaling.long_factor if long else scaling.short_factor, dtype=torch.float32)
        shape = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim
        return 1.0 / (factors * base**shape)
    if isinstance(scaling, Llama3Scaling):
        inv_freq = _float32_pow_frequencies(head_dim, base)
        original = scaling.original_max_positions
        low_wavelength = original / scaling.low_freq_factor
        high_wavelength = original / scaling.high_freq_factor
        wavelength = 2 * math.pi / inv_freq
        scaled = torch.where(wavelength > low_wavelength, inv_freq / scaling.factor, inv_freq)
        if scaling.high_freq_factor != scaling.low_freq_factor:
            smooth = (original / wavelength - scaling.low_freq_factor) / (
                scaling.high_freq_factor - scaling.low_freq_factor
            )
        else:  # no band: never selected (transformers computes 0 / 0 there and does not select it either)
            smooth = torch.zeros_like(wavelength)
        smoothed = (1 - smooth) * scaled / scaling.factor + smooth * scaled
        medium = ~(wavelength < high_wavelength) * ~(wavelength > low_wavelength)
        return torch.where(medium, smoothed, scaled)
    if isinstance(scaling, ProportionalScaling):
        rotated = int(scaling.partial_rotary_factor * head_dim // 2)
        inv_freq = torch.cat([_float32_pow_frequencies(head_dim, base, rotated),
                              torch.zeros(head_dim // 2 - rotated, dtype=torch.float32)])
        inv_freq /= scaling.factor
        return inv_freq
    raise AssertionError(type(scaling))  # every type of _METHODS is handled above


def complete_turn_pairs(
    rotary_dim: int, base: float, length: int, scaling: "RopeScaling | None" = None, *, seq_len: int | None = None
) -> int:
    """How many pairs of a ``rotary_dim``-wide RoPE complete at least one full turn within ``length`` positions.

    Pair ``i`` turns by ``theta_i`` per position (:func:`rope_frequencies` with ``base`` and ``scaling``, at
    ``seq_len`` for the length-dependent scalings), so its wavelength is ``2 pi / theta_i``; the pairs counted are
    those whose wavelength is at most ``length`` (``length * theta_i >= 2 pi``), the pairs that see every angle when
    offsets reach ``length``. Without a scaling the count is ``floor(d/2 * log_b(length / 2 pi)) + 1`` (at most
    ``d/2``, at least 0); twice it is the "critical dimension" of Liu et al. (2024, *Scaling laws of RoPE-based
    extrapolation*). ``length`` is a positive integer: the training length for a model that attends over its whole
    input, the window for a sliding-window layer, whatever the largest offset a layer can meet is.

    Computed in float64, so the count does not depend on float32 rounding at the boundary.
    """
    length = check_positive_int("length", length)
    inv_freq, _ = rope_frequencies(rotary_dim, base=base, scaling=scaling, seq_len=seq_len, dtype=torch.float64)
    return int((2 * math.pi / inv_freq <= length).sum())


# --------------------------------------------------------------------------- Hugging Face configurations

#: ``rope_type`` values of transformers' ``modeling_rope_utils`` (5.23) that :func:`rope_config_from_hf` reads.
#: ``"axial"`` (the type Qwen2-VL-style models default to) has the default frequencies; the model splits the pairs
#: into ``mrope_section`` groups, which :func:`course_pe.rope_nd.mrope` applies.
HF_ROPE_TYPES: tuple[str, ...] = ("default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional", "axial")


@dataclass(frozen=True)
class RopeConfig:
    """A model's RoPE as ``course_pe`` objects: what :func:`rope_config_from_hf` reads from a ``config.json``.

    ``head_dim`` is the query-key head width, ``rotary_dim`` the part of it that is rotated (``head_dim`` times
    ``partial_rotary_factor``; all of it for ``"proportional"``, whose idle pairs have frequency 0), ``base`` the
    frequency base (``rope_theta``), ``scaling`` the scaling dataclass (``None`` for ``"default"``/``"axial"``),
    ``rope_type`` Hugging Face's name for it, ``max_positions`` the ``max_position_embeddings`` of the config and
    ``mrope_section`` the pair sections of M-RoPE (``None`` without).
    """

    rope_type: str
    head_dim: int
    rotary_dim: int
    base: float
    scaling: RopeScaling | None
    max_positions: int | None = None
    mrope_section: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.rope_type not in HF_ROPE_TYPES:
            raise ValueError(f"unknown rope_type {self.rope_type!r}; expected one of {', '.join(HF_ROPE_TYPES)}")
        object.__setattr__(self, "head_dim", check_even("head_dim", self.head_dim))
        object.__setattr__(self, "rotary_dim", check_even("rotary_dim", self.rotary_dim))
        if self.rotary_dim > self.head_dim:
            raise ValueError(f"rotary_dim ({self.rotary_dim}) exceeds head_dim ({self.head_dim})")
        object.__setattr__(self, "base", check_positive_float("base", self.base))
        if self.scaling is not None and type(self.scaling) not in _METHODS:
            raise TypeError(f"scaling must be None or a scaling dataclass, got {type(self.scaling).__name__}")
        if self.max_positions is not None:
            object.__setattr__(self, "max_positions", check_positive_int("max_positions", self.max_positions))

    def frequencies(
        self, *, seq_len: int | None = None, dtype: torch.dtype = torch.float32, angle_dtype: torch.dtype = torch.float64
    ) -> tuple[torch.Tensor, float]:
        """``(inv_freq, attention_factor)`` as Hugging Face's ``ROPE_INIT_FUNCTIONS[rope_type](config, seq_len=...)``
        computes them: :func:`rope_frequencies` of ``rotary_dim`` (``rotary_dim // 2`` frequencies); with
        ``angle_dtype=torch.float32`` bit for bit."""
        return rope_frequencies(self.rotary_dim, base=self.base, scaling=self.scaling, seq_len=seq_len, dtype=dtype,
                                angle_dtype=angle_dtype)

    def rotary_embedding(self, *, layout: str = "half", max_positions: int = 2048, **kwargs: object) -> "nn.Module":
        """A :class:`~course_pe.rope.RotaryEmbedding` for this configuration (``head_dim``, ``rotary_dim``, ``base``,
        ``scaling``). ``layout`` is ``"half"`` for Hugging Face's ``rotate_half`` models and ``"interleaved"`` for
        the complex-number ones (Llama 4, Meta's reference code); ``max_positions`` the initial cache length (it
        grows on demand; the configuration's ``max_position_embeddings`` may be millions). Other keyword arguments
        go to the constructor."""
        from .rope import RotaryEmbedding

        return RotaryEmbedding(self.head_dim, base=self.base, scaling=self.scaling, rotary_dim=self.rotary_dim,
                               layout=layout, max_positions=max_positions, **kwargs)

    def summary(self, training_length: int | None = None) -> dict[str, object]:
        """What a reader checks first in a configuration, as a dict (the "read a config" recipe of the book).

        Keys: ``rope_type``, ``head_dim``, ``rotary_dim``, ``unrotated_dim`` (``head_dim - rotary_dim``), ``pairs``
        (``rotary_dim // 2``), ``base``, ``scaling`` (the dataclass or ``None``), ``max_positions``,
        ``training_length`` (the argument, else the scaling's ``original_max_positions``, else ``max_positions``),
        ``complete_pairs`` (:func:`complete_turn_pairs` of the *unscaled* frequencies within ``training_length``:
        the pairs that saw a full turn in training), ``slowest_wavelength`` (of the unscaled frequencies, in
        positions) and ``attention_factor`` (the cos/sin factor at ``max_positions``, or at ``training_length``
        when the configuration has no ``max_position_embeddings``; 1.0 for most types).

        The layout (``"half"`` or ``"interleaved"``) is not in a configuration: it belongs to the modelling code that
        loads the checkpoint, so the summary cannot give it. ``training_length`` must be an integer in ``1 ...
        2**53 + 1`` (positions 0 ... 2**53, like ``seq_len`` of :func:`rope_frequencies`); a ``ValueError`` says so
        when none can be found.
        """
        if training_length is None:
            training_length = getattr(self.scaling, "original_max_positions", None) or self.max_positions
            if training_length is None:
                raise ValueError("the configuration gives no training length (no original_max_position_embeddings or "
                                 "max_position_embeddings): pass training_length")
        training_length = check_int("training_length", training_length, minimum=1, maximum=2**53 + 1)
        plain, _ = rope_frequencies(self.rotary_dim, base=self.base, dtype=torch.float64)
        _, attention_factor = self.frequencies(seq_len=self.max_positions or training_length, dtype=torch.float64)
        return {
            "rope_type": self.rope_type,
            "head_dim": self.head_dim,
            "rotary_dim": self.rotary_dim,
            "unrotated_dim": self.head_dim - self.rotary_dim,
            "pairs": self.rotary_dim // 2,
            "base": self.base,
            "scaling": self.scaling,
            "max_positions": self.max_positions,
            "training_length": training_length,
            "complete_pairs": complete_turn_pairs(self.rotary_dim, self.base, training_length),
            "slowest_wavelength": float(2 * math.pi / plain[-1]),
            "attention_factor": float(attention_factor),
        }


def _number(name: str, value: object) -> float:
    """A finite real number read from the configuration; ``name`` says where (``config['rope_theta']``, ...)."""
    return check_float(name, value)


def _param(key: str) -> str:
    return f"config rope parameter {key!r}"


def rope_config_from_hf(
    config: Mapping[str, object],
    *,
    layer_type: str | None = None,
    head_dim: int | None = None,
    default_base: float = 10000.0,
) -> RopeConfig:
    """Read the RoPE of a Hugging Face ``config.json`` (a dict, e.g. ``json.load`` of the file).

    Reads transformers 5's ``rope_parameters`` (flat, or nested by layer type as in Gemma 3's
    ``{"full_attention": ..., "sliding_attention": ...}``) and the legacy form, ``rope_scaling`` plus a top-level
    ``rope_theta`` (``rope_scaling: null`` meaning the default type; Gemma 3's ``rope_local_base_freq`` giving the
    base of its ``"sliding_attention"`` layers). Every ``rope_type`` of transformers' ``modeling_rope_utils`` is
    supported (:data:`HF_ROPE_TYPES`; ``"type"`` is read as ``"rope_type"``), with the defaults and precedence rules
    of transformers 5.23 (``RotaryEmbeddingConfigMixin`` and ``modeling_rope_utils``), except where a rule below
    says otherwise:

    * **both** ``rope_parameters`` **and** ``rope_scaling``: transformers uses ``rope_scaling or rope_parameters``
      (an empty or null ``rope_scaling`` falls back to ``rope_parameters``, an empty ``rope_parameters`` to
      ``rope_scaling``), and then takes ``rope_theta`` from the top level or the model's default, so a
      ``rope_parameters`` block is dropped whole, its base included. A config with both, non-empty, is read both
      ways: if they describe the same RoPE that is the result; if not, a ``ValueError`` names both keys and what
      each gives (such configs arise when a ``"rope_scaling"`` block is added by hand to a transformers-5
      ``config.json``, as model cards suggest for context extension: say which one is meant by removing the other);
    * ``rope_theta`` in the parameters, else at the top level, else ``default_base`` (transformers' default is
      10000, but a model class may have its own: Gemma 3's global layers use 1e6); it must be > 1;
    * ``partial_rotary_factor`` in the parameters, else at the top level, else 1: ``rotary_dim =
      int(head_dim * partial_rotary_factor)`` (an odd result is refused: transformers rounds it in ways that
      differ between models);
    * ``original_max_position_embeddings`` for ``llama3``/``yarn``/``longrope``: in a flat config a top-level value
      wins (Phi-3 stores it there), else the parameters', else ``max_position_embeddings``; in a config nested by
      layer type the layer's own value, else ``max_position_embeddings`` (transformers ignores a top-level value
      there); ``dynamic`` uses ``max_position_embeddings`` as its original length;
    * ``yarn`` and ``longrope`` with ``factor`` null use ``max_position_embeddings / original`` (DeepSeek's configs
      rely on it); so does a ``factor`` left out, where transformers raises a ``KeyError`` for ``yarn``; ``yarn``'s
      ``beta_fast``/``beta_slow`` default to 32/1 (also when 0), ``truncate`` to true (a null ``truncate``, which
      transformers reads as false, is refused: say ``false``);
    * ``head_dim`` from ``hidden_size // num_attention_heads`` when the config has none (transformers' config
      validation refuses a ``hidden_size`` that the heads do not divide; this reader does not check it);
    * a ``rope_ratio`` key (THUDM's remote-code ChatGLM/GLM-4 configurations, whose code multiplies the base by it)
      is refused with a ``ValueError``: ignoring it would return the wrong base without a word;
    * **the one deliberate difference:** ``truncate`` is read from the layer's own parameters. transformers 5.23
      reads it from the top level of ``rope_parameters`` (``config.rope_parameters.get("truncate", True)``), which
      in a nested config holds the layer types, never ``truncate``: it truncates every nested YaRN layer, even one
      that says ``"truncate": false``. ``tests/test_rope_scaling_hf.py`` pins this difference against
      ``Gemma3TextConfig``.

    Args:
        config: the configuration as a mapping.
        layer_type: which entry of a nested ``rope_parameters`` to read (``"full_attention"``,
            ``"sliding_attention"``, ...); needed when there are several.
        head_dim: the query-key width the frequencies are for. Default: ``qk_rope_head_dim`` (DeepSeek's MLA, whose
            rotated part is a separate 64-wide head), else ``head_dim``, else ``hidden_size //
            num_attention_heads``.
        default_base: the base when the configuration names none.

    Returns:
        A :class:`RopeConfig`; ``.frequencies(seq_len=...)`` gives what transformers computes (checked to float32
        tolerance in ``tests/test_rope_scaling_hf.py`` for every type on grids of configurations).

    Raises ``TypeError``/``ValueError`` naming the key that is missing or wrong.
    """
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping (the parsed config.json), got {type(config).__name__}")
    default_base = check_positive_float("default_base", default_base)
    if layer_type is not None and not isinstance(layer_type, str):
        raise TypeError(f"layer_type must be None or a str, got {type(layer_type).__name__}")
    if "rope_ratio" in config:
        # THUDM's remote-code ChatGLM/GLM-4 configurations: their code multiplies the base by rope_ratio and rotates a
        # width it fixes itself, neither through transformers' keys; reading the rest would give a wrong RoPE silently.
        raise ValueError(
            f"config has 'rope_ratio' ({config['rope_ratio']!r}), the key of THUDM's remote-code ChatGLM/GLM-4 "
            "configurations, whose modelling code multiplies the RoPE base by it (base = 10000 * rope_ratio) and sets "
            "the rotated width itself; course_pe reads transformers' keys only (rope_theta, partial_rotary_factor, "
            "rope_scaling/rope_parameters): read the Hugging Face conversion's config.json (GlmConfig), or build the "
            "RopeConfig by hand"
        )
    blocks = {}
    for key in ("rope_parameters", "rope_scaling"):
        value = config.get(key)
        if value is not None and not isinstance(value, Mapping):
            raise TypeError(f"config[{key!r}] must be a mapping or null, got {type(value).__name__}")
        blocks[key] = value
    parameters, legacy = blocks["rope_parameters"], blocks["rope_scaling"]
    if parameters and legacy:
        from_legacy = _read_rope(config, legacy, layer_type, head_dim, default_base)
        from_parameters = _read_rope(config, parameters, layer_type, head_dim, default_base)
        if from_legacy != from_parameters:
            raise ValueError(
                "config has both 'rope_parameters' and 'rope_scaling', and they describe different RoPEs: "
                f"rope_parameters gives {_describe(from_parameters)}, rope_scaling gives {_describe(from_legacy)}. "
                "transformers 5.23 uses rope_scaling and takes its rope_theta from the top level or the model's "
                "default, dropping rope_parameters entirely; remove the key you do not mean"
            )
        return from_legacy
    return _read_rope(config, legacy or parameters or {}, layer_type, head_dim, default_base)


def _describe(rope: RopeConfig) -> str:
    scaling = "" if rope.scaling is None else f", {rope.scaling!r}"
    return f"rope_type {rope.rope_type!r} with base {rope.base:g}{scaling}"


def _read_rope(
    config: Mapping[str, object],
    raw: Mapping[str, object],
    layer_type: str | None,
    head_dim: int | None,
    default_base: float,
) -> RopeConfig:
    """:func:`rope_config_from_hf` with the RoPE block ``raw`` (``rope_parameters`` or ``rope_scaling``) chosen."""
    own_keys = {"rope_type", "type", "rope_theta", "factor", "partial_rotary_factor"}
    nested = bool(raw) and not (own_keys & raw.keys()) and all(v is None or isinstance(v, Mapping) for v in raw.values())
    top_base = config.get("rope_theta", default_base)
    if nested:
        if layer_type is None:
            if len(raw) != 1:
                raise ValueError(f"config's rope_parameters are nested by layer type ({', '.join(map(repr, raw))}): "
                                 "pass layer_type")
            layer_type = next(iter(raw))
        if layer_type not in raw:
            raise ValueError(f"layer_type {layer_type!r} is not in the config's rope_parameters "
                             f"({', '.join(map(repr, raw))})")
        params = dict(raw[layer_type] or {})
    else:
        params = dict(raw)
        if layer_type == "sliding_attention" and "rope_local_base_freq" in config:
            # Gemma 3's legacy form: rope_scaling belongs to the global layers, sliding layers keep the default type
            params = {"rope_type": "default", "rope_theta": config["rope_local_base_freq"]}
        elif layer_type is not None:
            known = config.get("layer_types") or ("full_attention", "sliding_attention")
            if not isinstance(known, (list, tuple)) or layer_type not in known:
                raise ValueError(f"layer_type {layer_type!r} is not a layer type of this config "
                                 f"({', '.join(map(repr, sorted(set(map(str, known)))))}); its rope parameters are "
                                 "not nested by layer type")
    rope_type = params.get("rope_type", params.get("type", "default"))
    if not isinstance(rope_type, str) or rope_type not in HF_ROPE_TYPES:
        raise ValueError(f"unknown rope_type {rope_type!r} in config; course_pe reads {', '.join(HF_ROPE_TYPES)} "
                         "(model-specific types outside transformers' modeling_rope_utils are not covered)")
    base_key = _param("rope_theta") if "rope_theta" in params else "config['rope_theta']"
    base = _number(base_key, params.get("rope_theta", top_base))
    if base <= 1.0:
        raise ValueError(f"{base_key} must be > 1 (the frequencies base ** (-2i / d) must decrease), got {base}")

    if head_dim is None:
        for key in ("qk_rope_head_dim", "head_dim"):
            if config.get(key) is not None:
                head_dim = check_positive_int(f"config[{key!r}]", config[key])
                break
        else:
            try:
                hidden, heads = config["hidden_size"], config["num_attention_heads"]
            except KeyError as missing:
                raise ValueError(f"config has no head_dim and no {missing} to derive it from; pass head_dim") from None
            head_dim = (check_positive_int("config['hidden_size']", hidden)
                        // check_positive_int("config['num_attention_heads']", heads))
        head_dim = check_even("head_dim (from config)", head_dim)
    head_dim = check_even("head_dim", head_dim)
    prf = params.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0))
    prf = check_float(_param("partial_rotary_factor"), 1.0 if prf is None else prf, minimum=0.0, maximum=1.0)
    rotary_dim = int(head_dim * prf)
    if rope_type != "proportional" and (rotary_dim < 2 or rotary_dim % 2):
        raise ValueError(f"head_dim * partial_rotary_factor = {head_dim} * {prf} gives a rotary width of {rotary_dim}; "
                         "it must be even and >= 2")
    max_positions = config.get("max_position_embeddings")
    if max_positions is not None:
        max_positions = check_positive_int("config['max_position_embeddings']", max_positions)

    def original() -> int:
        # a flat config: the top-level value wins (Phi-3); nested: transformers ignores a top-level value
        value = None if nested else config.get("original_max_position_embeddings")
        if value is None:
            value = params.get("original_max_position_embeddings", max_positions)
        if value is None:
            raise ValueError(f"rope_type {rope_type!r} needs original_max_position_embeddings or "
                             "max_position_embeddings in the config")
        return check_positive_int(_param("original_max_position_embeddings"), value)

    def factor_or_ratio() -> float:
        factor = params.get("factor")
        if factor is None:
            if max_positions is None:
                raise ValueError(f"rope_type {rope_type!r} without factor needs max_position_embeddings in the config")
            return max_positions / original()
        return _number(_param("factor"), factor)

    def required(key: str) -> object:
        if params.get(key) is None:
            raise ValueError(f"rope_type {rope_type!r} needs {key!r} in the config's rope parameters")
        return params[key]

    scaling: RopeScaling | None = None
    try:  # the dataclasses check the values; say where they came from
        if rope_type == "linear":
            scaling = LinearScaling(_number(_param("factor"), required("factor")))
        elif rope_type == "dynamic":
            if max_positions is None:
                raise ValueError("rope_type 'dynamic' needs max_position_embeddings (its original length) in the config")
            scaling = DynamicNTKScaling(_number(_param("factor"), required("factor")), max_positions)
        elif rope_type == "yarn":
            scaling = YaRNScaling(
                factor_or_ratio(), original(),
                beta_fast=_number(_param("beta_fast"), params.get("beta_fast") or 32.0),
                beta_slow=_number(_param("beta_slow"), params.get("beta_slow") or 1.0),
                attention_factor=params.get("attention_factor"),
                mscale=params.get("mscale"), mscale_all_dim=params.get("mscale_all_dim"),
                truncate=params.get("truncate", True),
            )
        elif rope_type == "longrope":
            scaling = LongRoPEScaling(
                required("short_factor"), required("long_factor"), original(),  # type: ignore[arg-type]
                factor=factor_or_ratio(), attention_factor=params.get("attention_factor"),
            )
        elif rope_type == "llama3":
            scaling = Llama3Scaling(
                _number(_param("factor"), required("factor")), original(),
                low_freq_factor=_number(_param("low_freq_factor"), required("low_freq_factor")),
                high_freq_factor=_number(_param("high_freq_factor"), required("high_freq_factor")),
            )
        elif rope_type == "proportional":
            scaling = ProportionalScaling(prf, factor=_number(_param("factor"), params.get("factor", 1.0)))
            rotary_dim = head_dim
    except (TypeError, ValueError) as error:
        if str(error).startswith(("config", "rope_type")):  # already says where it comes from
            raise
        raise type(error)(f"config rope parameters of type {rope_type!r}: {error}") from None
    section = params.get("mrope_section", config.get("mrope_section"))
    if section is not None:
        if isinstance(section, (str, bytes)) or not isinstance(section, Sequence):
            raise TypeError(f"config rope parameter 'mrope_section' must be a list of integers, got "
                            f"{type(section).__name__}")
        section = tuple(check_positive_int(f"config rope parameter 'mrope_section'[{i}]", v)
                        for i, v in enumerate(section))
    return RopeConfig(rope_type, head_dim, rotary_dim, base, scaling, max_positions, section)
