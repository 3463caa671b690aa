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
=========================  =====================================================================
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ._validation import check_dtype, check_even, check_int, check_positive_float, check_positive_int

__all__ = [
    "DynamicNTKScaling",
    "LinearScaling",
    "Llama3Scaling",
    "NTKScaling",
    "RopeScaling",
    "YaRNScaling",
    "rope_frequencies",
    "yarn_correction_range",
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
        check_positive_int("original_max_positions", self.original_max_positions)


@dataclass(frozen=True)
class YaRNScaling:
    """YaRN: "NTK-by-parts" interpolation plus an attention temperature.

    Pairs that complete more than ``beta_fast`` rotations within ``original_max_positions`` keep
    their frequency; pairs with fewer than ``beta_slow`` rotations are interpolated (divided by
    ``factor``); a ramp blends the pairs between, linear in the *pair index* (as in the YaRN reference code and
    Hugging Face), which is linear in the logarithm of the number of turns; the paper writes its ramp
    ``gamma(r) = (r - alpha) / (beta - alpha)`` linear in the number of turns ``r`` itself, which keeps less of the
    pairs inside the range. The correction range is floored and ceiled to whole pair indices. cos and sin are multiplied by ``attention_factor``
    (default ``0.1 * ln(factor) + 1``), so logits are scaled by its square.

    ``factor >= 1``, ``beta_fast > beta_slow > 0`` and ``attention_factor > 0`` are finite real numbers;
    ``original_max_positions`` a positive integer.
    """

    factor: float
    original_max_positions: int
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    attention_factor: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", _check_factor(self.factor))
        check_positive_int("original_max_positions", self.original_max_positions)
        object.__setattr__(self, "beta_fast", check_positive_float("beta_fast", self.beta_fast))
        object.__setattr__(self, "beta_slow", check_positive_float("beta_slow", self.beta_slow))
        if self.beta_fast <= self.beta_slow:
            raise ValueError(f"beta_fast ({self.beta_fast}) must be greater than beta_slow ({self.beta_slow})")
        if self.attention_factor is not None:
            object.__setattr__(
                self, "attention_factor", check_positive_float("attention_factor", self.attention_factor)
            )


@dataclass(frozen=True)
class Llama3Scaling:
    """Llama 3.1's frequency-dependent scaling.

    With ``L = original_max_positions`` and wavelength ``lambda_i = 2 pi / theta_i``:
    wavelengths shorter than ``L / high_freq_factor`` are kept; longer than ``L / low_freq_factor``
    are divided by ``factor``; between, ``(1 - t) theta_i / factor + t theta_i`` with
    ``t = (L / lambda_i - low_freq_factor) / (high_freq_factor - low_freq_factor)``.
    """

    factor: float
    original_max_positions: int
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", _check_factor(self.factor))
        check_positive_int("original_max_positions", self.original_max_positions)
        object.__setattr__(self, "low_freq_factor", check_positive_float("low_freq_factor", self.low_freq_factor))
        object.__setattr__(self, "high_freq_factor", check_positive_float("high_freq_factor", self.high_freq_factor))
        if self.high_freq_factor <= self.low_freq_factor:
            raise ValueError(
                f"high_freq_factor ({self.high_freq_factor}) must be greater than "
                f"low_freq_factor ({self.low_freq_factor})"
            )


RopeScaling = LinearScaling | NTKScaling | DynamicNTKScaling | YaRNScaling | Llama3Scaling


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
    head_dim: int, base: float, original_max_positions: int, beta_fast: float, beta_slow: float
) -> tuple[float, float]:
    """The pair indices ``(low, high)`` between which YaRN ramps, floored and ceiled, clipped to
    ``[0, head_dim - 1]`` (the clip of the YaRN reference code; the ramp itself is clamped to [0, 1]).

    Pair ``i`` completes ``L theta_i / (2 pi)`` rotations over ``L`` positions; solving
    ``L theta_i / (2 pi) = beta`` for ``i`` gives ``d ln(L / (2 pi beta)) / (2 ln base)``.

    Arguments: ``head_dim`` a positive even integer, ``base > 1`` (``ln base`` is a divisor),
    ``original_max_positions`` a positive integer, ``beta_fast > beta_slow > 0`` finite real numbers.
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

    def pair_index(rotations: float) -> float:
        return head_dim * math.log(original_max_positions / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(pair_index(beta_fast)), 0)
    high = min(math.ceil(pair_index(beta_slow)), head_dim - 1)
    return float(low), float(high)


def _yarn(head_dim: int, base: float, scaling: YaRNScaling, seq_len: int | None) -> tuple[torch.Tensor, float]:
    theta = _base_inv_freq(head_dim, base)
    low, high = yarn_correction_range(
        head_dim, base, scaling.original_max_positions, scaling.beta_fast, scaling.beta_slow
    )
    if low == high:
        high += 0.001  # avoid a zero-width ramp
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0.0, 1.0)
    extrapolate = 1.0 - ramp  # 1 for fast pairs (kept), 0 for slow pairs (interpolated)
    inv_freq = theta / scaling.factor * (1.0 - extrapolate) + theta * extrapolate
    if scaling.attention_factor is not None:
        factor = scaling.attention_factor
    else:
        factor = 0.1 * math.log(scaling.factor) + 1.0 if scaling.factor > 1 else 1.0
    return inv_freq, float(factor)


def _llama3(head_dim: int, base: float, scaling: Llama3Scaling, seq_len: int | None) -> tuple[torch.Tensor, float]:
    theta = _base_inv_freq(head_dim, base)
    original = scaling.original_max_positions
    wavelength = 2 * math.pi / theta
    low_freq_wavelength = original / scaling.low_freq_factor
    high_freq_wavelength = original / scaling.high_freq_factor
    smooth = (original / wavelength - scaling.low_freq_factor) / (
        scaling.high_freq_factor - scaling.low_freq_factor
    )
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
}


def rope_frequencies(
    head_dim: int,
    *,
    base: float = 10000.0,
    scaling: RopeScaling | None = None,
    seq_len: int | None = None,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, float]:
    """RoPE frequencies for one head.

    Args:
        head_dim: even width of a query/key head.
        base: the frequency base (10000 in RoFormer and LLaMA 1-2, 500000 in Llama 3).
        scaling: ``None`` or one of the scaling dataclasses of this module.
        seq_len: current sequence length; only :class:`DynamicNTKScaling` uses it.
        dtype: floating dtype of the returned frequencies. The default float32 matches what checkpoints and
            other libraries store; :func:`~course_pe.rope.apply_rope` uses float64, because at position
            ``p`` a float32 rounding of ``theta_i`` shifts the angle by up to ``p * theta_i * 2**-24``.

    Returns:
        ``(inv_freq, attention_factor)``: a tensor of shape ``(head_dim // 2,)`` (computed in
        float64, then cast to ``dtype``) and a Python float.
    """
    head_dim = check_even("head_dim", head_dim)
    base = check_positive_float("base", base)
    if base <= 1.0:
        raise ValueError(f"base must be > 1 so that frequencies decrease, got {base}")
    check_dtype("dtype", dtype, "floating")
    if seq_len is not None:
        seq_len = check_int("seq_len", seq_len, minimum=1, maximum=2**53)
    method = _METHODS.get(type(scaling))
    if method is None:
        names = ", ".join(t.__name__ for t in _METHODS if t is not type(None))
        raise ValueError(f"unknown RoPE scaling {scaling!r}; expected None or one of {names}")
    if head_dim == 2 and isinstance(scaling, (NTKScaling, DynamicNTKScaling)):
        raise ValueError("NTK scalings need head_dim > 2 (their exponent is d / (d - 2))")
    inv_freq, attention_factor = method(head_dim, base, scaling, seq_len)
    return inv_freq.to(dtype), float(attention_factor)
