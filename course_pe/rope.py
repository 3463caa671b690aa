"""Rotary position embedding (RoPE; Su et al., RoFormer, 2021).

RoPE rotates each *pair* of query/key dimensions by an angle proportional to the position:
pair ``i`` of a vector at position ``p`` is turned counter-clockwise by ``p * theta_i``,

.. math:: (a, b) \\mapsto (a \\cos p\\theta_i - b \\sin p\\theta_i,\\; a \\sin p\\theta_i + b \\cos p\\theta_i).

Because rotations compose, ``<R_m q, R_n k> = <q, R_{n-m} k>``: the attention score of a rotated
query and key depends on the positions only through their offset. As matrices acting on column vectors,
``apply_rope(x)`` for a vector ``x`` (the last dimension) at position ``m`` is ``R_m x``; applied to
``torch.eye(d)``, whose *rows* are the basis vectors, it rotates each row and so returns ``R_m`` transposed.

Layouts (which dimensions form a pair; ``h = head_dim // 2``):

* ``"interleaved"``: pairs ``(2i, 2i + 1)``, as in RoFormer and Meta's original LLaMA code.
* ``"half"``: pairs ``(i, i + h)``, as in GPT-NeoX and Hugging Face's LLaMA (``rotate_half``).

They are the same map up to a fixed permutation of dimensions, the matrix ``P`` of
:func:`interleaved_to_half` (``interleaved_to_half(x) = P x``), so a checkpoint moves between them by
permuting the rows of its query and key projections (:func:`permute_qk_weights`).

Precision (``angle_dtype``). By default angles are formed in float64 from integer (or float32-or-wider)
positions, then cos and sin are rounded once. A bfloat16 tensor cannot even hold the position 4095 (it rounds to
4096), so positions are never taken in the input's dtype. Low-precision inputs are rotated in float32 and the
result cast back to the input's dtype. Measured against exact arithmetic (mpmath) for ``head_dim = 128`` and
base 10000, the largest angle error of the default is 8.5e-14 rad at position 2047 and 6.4e-11 rad at
position 10**6. Hugging Face transformers, Meta's Llama code and torchtune instead compute the frequencies,
the positions and their products in float32, where the spacing of numbers near an angle ``a`` is
``a * 2**-23``: their largest angle error is 5.8e-5 rad at position 2047, 3.2e-4 at 10**4, 5.2e-3 at 10**5
and 5.2e-2 at 10**6 (base 500000: 1.1e-4, 3.2e-4, 4.6e-3, 4.6e-2), and cos and sin move by up to about as
much. So the two agree to about 1e-4 within a few thousand positions and part beyond ~10**4, where float32 angles
have lost three or more decimal digits. ``angle_dtype=torch.float32`` (in :func:`apply_rope`,
:class:`RotaryEmbedding`, :func:`rope_cos_sin`, :func:`~course_pe.rope_scaling.rope_frequencies`) reproduces the
reference numerics instead: the frequencies as Hugging Face computes them for every rope type, the float32
angles of all three references, the cos and sin of Hugging Face and torchtune, and the rotation's arithmetic
(Hugging Face's ``x * cos + rotate_half(x) * sin`` in ``x``'s dtype in the half layout; torchtune's per-pair formula
in the interleaved one, on ``x`` upcast to float32 and cast back as torchtune does), bit for bit for float32, bfloat16
and float16 inputs. (A float64 input is rotated in float64, where torchtune would first round it to float32.) Use it to compare with a checkpoint's stored activations; keep the default to
study RoPE itself or to run long contexts. (Meta's ``torch.polar`` computes cos and sin with another routine than
``torch.cos``: its tables differ from these in the last bit of about one entry in twenty.)
``tests/test_rope.py::test_documented_angle_errors`` measures the numbers of this paragraph again.

Positions are accepted up to ``|p| = 2**53`` (:data:`MAX_POSITION`), where float64 still tells neighbouring integers
apart, but the default angle ``p theta_i`` is one float64 product of ``p`` and a rounded ``theta_i``, within
``2 |p theta_i| 2**-53`` rad of the exact angle: the largest error (same measurement) is 5.2e-5 rad at
``p = 2**40`` and 0.51 rad at ``2**53 - 1``, so that far out the score of a rotated query and key depends on more
than their offset. No warning is given: such positions are far beyond any context a model is run at.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import warnings
from typing import Literal

import torch
from torch import nn

from ._validation import (
    check_bool,
    check_choice,
    check_dtype,
    check_even,
    check_float,
    check_index_range,
    check_int,
    check_memory,
    check_positive_float,
    check_positive_int,
    check_tensor,
    numel,
    require_values,
)
from .rope_scaling import (
    DynamicNTKScaling,
    LongRoPEScaling,
    RopeScaling,
    _base_inv_freq,
    _float32_pow_frequencies,
    _module_frequencies,
    rope_frequencies,
)

RopeLayout = Literal["interleaved", "half"]
ROPE_LAYOUTS: tuple[str, ...] = ("interleaved", "half")

__all__ = [
    "ANGLE_DTYPES",
    "DEVICE_CHECKS_VARIABLE",
    "MAX_POSITION",
    "ROPE_LAYOUTS",
    "RotaryEmbedding",
    "apply_rope",
    "clear_caches",
    "device_value_checks",
    "half_to_interleaved",
    "interleaved_to_half",
    "layout_permutation",
    "permute_qk_weights",
    "rope_cos_sin",
    "rotate_with_cos_sin",
]

_WIDE = (torch.float32, torch.float64)
#: Positions kept in a cos/sin cache (``RotaryEmbedding`` keeps ``max(max_positions, CACHE_LIMIT)``; ``apply_rope``
#: caches default tables only up to this length). Beyond it cos and sin are computed for the call and not kept.
CACHE_LIMIT = 8192
#: Largest ``|position|`` accepted anywhere in this module: float64 holds every integer up to ``2**53`` exactly, and
#: beyond it ``2**53 + 1`` rounds to ``2**53``, so two positions would get one rotation without a word. Exact
#: positions are not exact angles: ``p theta_i`` in float64 is off by up to ``2 |p theta_i| 2**-53`` rad (0.51 rad
#: measured at ``2**53 - 1``); see the module's precision note.
MAX_POSITION = 2**53
#: The two ways angles can be computed, exactly (float64, the default) or as the reference implementations do.
ANGLE_DTYPES: tuple[torch.dtype, ...] = (torch.float64, torch.float32)
#: Environment variable that turns the value checks on for accelerator tensors (see :func:`device_value_checks`).
DEVICE_CHECKS_VARIABLE = "COURSE_PE_DEVICE_CHECKS"
_device_checks = os.environ.get(DEVICE_CHECKS_VARIABLE, "") not in ("", "0")


def device_value_checks(enabled: bool | None = None) -> bool:
    """Whether the checks that read tensor values also run on accelerator tensors; ``enabled`` (a bool) sets it.
    Returns the setting in force before the call.

    What is checked where. Every call checks what needs no data: types, dtypes, shapes, layouts, devices, integer
    arguments. Checks that read values (positions finite and within ``[-2**53, 2**53]``, positions ``>= 0`` and
    integral for :class:`RotaryEmbedding`, finite frequencies, offsets in range) run when the tensors are on the CPU,
    in eager mode. On a GPU they would copy a result back to the host and wait for the device at every call (a decode
    step would pay more for its checks than for its rotation), so they are off there by default, and they are never
    traced by ``torch.compile``. Turn them on to debug a model on a GPU (``device_value_checks(True)``, or the
    environment variable ``COURSE_PE_DEVICE_CHECKS=1`` before import). Unchecked bad values are not read out of
    bounds: positions are turned into angles, never used as indices, on that path."""
    global _device_checks
    previous = _device_checks
    if enabled is not None:
        _device_checks = check_bool("enabled", enabled)
    return previous


def _compiling() -> bool:
    return torch.compiler.is_compiling()


def _values_checked(t: torch.Tensor) -> bool:
    """Whether value checks read ``t`` (see :func:`device_value_checks`): eager, not inside ``torch.func``
    transforms, not a meta tensor, and on the CPU unless device checks are on."""
    if _compiling() or t.is_meta or _transformed(t):
        return False
    return t.device.type in _HOST_DEVICES or _device_checks


#: Device types whose tensors live in host memory, where reading a value costs no wait for an accelerator.
_HOST_DEVICES = ("cpu",)


def _check_finite(name: str, t: torch.Tensor) -> None:
    """The finite-values check of :func:`~course_pe._validation.check_tensor`, where values may be read."""
    if t.dtype.is_floating_point and t.numel() and _values_checked(t) and not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} must hold only finite values (no NaN or inf)")


def _check_offset(x: torch.Tensor, offset: object) -> int | torch.Tensor:
    """``offset`` as an ``int`` in ``[0, MAX_POSITION - seq]`` or a ``(batch,)`` integer tensor (4-D ``x`` only)."""
    seq = x.shape[-2]
    if isinstance(offset, torch.Tensor):
        check_tensor("offset", offset, "integer", dim=1)
        if x.dim() != 4 or offset.shape[0] != x.shape[0]:
            raise ValueError(
                f"a per-sequence offset must have shape (batch,) for x of shape (batch, heads, seq, head_dim); got "
                f"offset of shape {tuple(offset.shape)} and x of shape {tuple(x.shape)}"
            )
        _check_same_device("offset", offset, x)
        if _values_checked(offset):
            check_index_range("offset", offset, 0, MAX_POSITION - seq + 1)
        return offset.long()
    return check_int("offset", offset, minimum=0, maximum=MAX_POSITION - seq)


def _check_dense(name: str, t: torch.Tensor) -> None:
    """Refuse sparse and nested tensors: RoPE slices the last dimension into pairs, which needs a dense layout."""
    if t.is_nested or t.layout != torch.strided:
        kind = "a nested tensor" if t.is_nested else f"a tensor of layout {t.layout}"
        raise ValueError(f"{name} must be a dense tensor (layout torch.strided), got {kind}; convert it first "
                         "(to_dense(), or rotate each nested component)")


def _check_same_device(name: str, t: torch.Tensor, x: torch.Tensor) -> None:
    """``t`` must be on ``x``'s device (a meta ``x`` accepts anything: shape inference). Copying it at every call would
    hide a copy between devices, which waits for the device."""
    if t.device != x.device and not x.is_meta:
        raise ValueError(f"{name} is on {t.device} but x is on {x.device}: put {name} on x's device once (a copy "
                         "between devices at every call would make the host wait for the device)")


def _needs_grad(t: torch.Tensor | None) -> bool:
    return t is not None and t.requires_grad and torch.is_grad_enabled()


def _default_positions(x: torch.Tensor, offset: int | torch.Tensor) -> torch.Tensor:
    """``offset, ..., offset + seq - 1`` as int64: ``(seq,)`` for an int offset, ``(batch, seq)`` for a tensor."""
    positions = torch.arange(x.shape[-2], device=x.device)
    if isinstance(offset, torch.Tensor):
        return offset.to(x.device)[:, None] + positions
    return positions + offset


def _check_position_values(name: str, positions: torch.Tensor) -> None:
    """Refuse meta positions (no values), and positions with ``|p| > MAX_POSITION`` (float64 rounds them: ``2**53 + 1``
    becomes ``2**53``) where values are read (:func:`device_value_checks`)."""
    if positions.numel() == 0 or _compiling() or _transformed(positions):
        return
    require_values(name, positions)
    if not _values_checked(positions):
        return
    low, high = positions.detach().min(), positions.detach().max()
    if positions.dtype.is_floating_point:
        bad = float(low) < -MAX_POSITION or float(high) > MAX_POSITION
    else:
        bad = int(low) < -MAX_POSITION or int(high) > MAX_POSITION
    if bad:
        raise ValueError(
            f"{name} must lie in [-2**53, 2**53] (float64 holds every integer there exactly; beyond, neighbouring "
            f"positions round to the same angle), got values from {low.item()} to {high.item()}"
        )


def _check_positions(x: torch.Tensor, positions: object) -> torch.Tensor:
    """Check ``positions`` against ``x`` (shapes always, values where they may be read); return them unchanged."""
    seq = x.shape[-2]
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"positions must be a tensor or None, got {type(positions).__name__}")
    if positions.dtype in (torch.float16, torch.bfloat16):
        raise TypeError(
            f"positions in {positions.dtype} have already lost precision (bfloat16 rounds 4095 to 4096); "
            "pass integer or float32 positions"
        )
    check_tensor("positions", positions, "position", finite=False)
    _check_dense("positions", positions)
    if not x.is_meta:  # a meta x gives a meta result: its positions may be meta too (shape inference)
        _check_finite("positions", positions)
        _check_position_values("positions", positions)
    _check_same_device("positions", positions, x)
    if positions.dim() == 1:
        if positions.shape[0] != seq:
            raise ValueError(
                f"positions has length {positions.shape[0]} but x has seq = {seq} (shape {tuple(x.shape)})"
                + _layout_hint(x, positions.shape[0])
            )
    elif positions.dim() == 2:
        if x.dim() != 4:
            raise ValueError(
                f"per-sequence positions of shape (batch, seq) need x of shape (batch, heads, seq, head_dim), "
                f"got x of shape {tuple(x.shape)}"
            )
        if positions.shape != (x.shape[0], seq):
            raise ValueError(
                f"positions must have shape ({x.shape[0]}, {seq}) for x of shape {tuple(x.shape)}, "
                f"got {tuple(positions.shape)}" + _layout_hint(x, positions.shape[-1])
            )
    else:
        raise ValueError(f"positions must be None, (seq,) or (batch, seq); got shape {tuple(positions.shape)}")
    return positions


def _resolve_positions(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Positions as a float64 tensor of shape ``(seq,)`` or ``(batch, 1, seq)`` (for 4-D ``x``)."""
    positions = _check_positions(x, positions).to(device=x.device, dtype=torch.float64)
    return positions.unsqueeze(1) if positions.dim() == 2 else positions


def _layout_hint(x: torch.Tensor, length: int) -> str:
    """A hint for the Hugging Face layout ``(batch, seq, heads, head_dim)``, where the sequence is dim -3 ("" if
    ``x`` does not look like it)."""
    if x.dim() == 4 and x.shape[1] == length and x.shape[2] != length:
        return (
            "; x looks like (batch, seq, heads, head_dim), the layout of Hugging Face's projections before their "
            "transpose: pass x.transpose(1, 2) (course_pe rotates along dim -2, the sequence axis of "
            "(batch, heads, seq, head_dim)) and transpose the result back"
        )
    return ""


def _check_angle_dtype(angle_dtype: object) -> torch.dtype:
    check_dtype("angle_dtype", angle_dtype, "floating")
    if angle_dtype not in ANGLE_DTYPES:
        raise ValueError(f"angle_dtype must be torch.float64 (exact, the default) or torch.float32 (the reference "
                         f"numerics of Hugging Face, Meta and torchtune), got {angle_dtype}")
    return angle_dtype  # type: ignore[return-value]


def _angle_device(device: torch.device) -> torch.device:
    """Where float64 angles can be formed: ``device``, or the CPU for a device without float64 (Apple's MPS)."""
    return torch.device("cpu") if device.type == "mps" else device


def _cos_sin(
    positions: torch.Tensor,
    inv_freq: torch.Tensor,
    dtype: torch.dtype,
    attention_factor: float | torch.Tensor = 1.0,
    angle_dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`rope_cos_sin` without the checks (for positions this module made or checked itself), on
    ``positions``' device (a device without float64 forms the angles on the CPU and gets the tables back)."""
    device = positions.device
    where = _angle_device(device)
    angles = positions.to(device=where, dtype=angle_dtype)[..., None] \
        * inv_freq.to(device=where, dtype=angle_dtype)
    cos, sin = angles.cos(), angles.sin()
    if isinstance(attention_factor, torch.Tensor) or attention_factor != 1.0:
        cos, sin = cos * attention_factor, sin * attention_factor
    return cos.to(device=device, dtype=dtype), sin.to(device=device, dtype=dtype)


def rope_cos_sin(
    positions: torch.Tensor,
    inv_freq: torch.Tensor,
    *,
    dtype: torch.dtype = torch.float32,
    attention_factor: float = 1.0,
    angle_dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``cos`` and ``sin`` of ``positions[..., None] * inv_freq``, shape ``positions.shape + (h,)``.

    Angles are formed in ``angle_dtype`` and rounded once to ``dtype`` (a floating dtype). ``positions`` is an
    integer or float32/float64 tensor of any shape with finite values in ``[-2**53, 2**53]`` (:data:`MAX_POSITION`;
    beyond, float64 cannot tell neighbouring integers apart, so larger values are refused); ``inv_freq`` a finite
    floating ``(h,)`` tensor. Both outputs are multiplied by ``attention_factor`` (a finite number > 0; YaRN's
    temperature, 1.0 otherwise). The values of ``positions`` and ``inv_freq`` are checked where they may be read
    (on the CPU; see :func:`device_value_checks`).

    ``angle_dtype``: ``torch.float64`` (the default) forms each angle ``p * theta`` in float64, within
    ``|p theta| * 2**-53`` of the product of the given numbers; ``torch.float32`` reproduces the reference numerics:
    positions and ``inv_freq`` rounded to float32, the product (the angles of Hugging Face transformers, Meta's Llama
    code and torchtune, bit for bit), then cos, sin and the attention factor in float32 (Hugging Face's and
    torchtune's tables bit for bit; Meta's ``torch.polar`` differs in the last bit of about one entry in twenty). See
    the precision note of :mod:`course_pe.rope` for when the difference matters.
    """
    check_tensor("positions", positions, "position", finite=False)
    require_values("positions", positions)
    _check_finite("positions", positions)
    _check_position_values("positions", positions)
    check_tensor("inv_freq", inv_freq, "floating", dim=1, finite=False)
    require_values("inv_freq", inv_freq)  # the positions have values, so the angles need the frequencies' values
    _check_finite("inv_freq", inv_freq)
    check_dtype("dtype", dtype, "floating")
    attention_factor = check_float("attention_factor", attention_factor, minimum=0.0, strict_minimum=True)
    angle_dtype = _check_angle_dtype(angle_dtype)
    # the positions and the angles in float64, then cos and sin (float64 before the cast to dtype)
    check_memory("positions and inv_freq", 8 * (positions.numel() + 3 * numel(positions.numel(), inv_freq.numel())),
                 f"cos/sin of {positions.numel()} positions x {inv_freq.numel()} frequencies")
    return _cos_sin(positions, inv_freq, dtype, attention_factor, angle_dtype)


def _fake_mode_active() -> bool:
    """Whether a ``FakeTensorMode`` is active (shape propagation, ``torch.export``'s tracing): tensors made now hold
    no values and must not be kept."""
    get_mode = getattr(torch._C, "_get_dispatch_mode", None)
    key = getattr(getattr(torch._C, "_TorchDispatchModeKey", None), "FAKE", None)
    return get_mode is not None and key is not None and get_mode(key) is not None


def _plain(x: torch.Tensor) -> bool:
    """Whether ``x`` is an ordinary tensor with values (not a fake, functional or other subclass tensor)."""
    return type(x) in (torch.Tensor, nn.Parameter)


def _cacheable(x: torch.Tensor) -> bool:
    """Whether tables for ``x`` may be read from and kept in the shared caches: eager mode, no fake mode, an ordinary
    tensor (a fake tensor's tables would be fake and fail every later real call)."""
    return not _compiling() and _plain(x) and not _fake_mode_active()


@contextlib.contextmanager
def _cache_building():
    """The context in which cached tables are made: outside inference mode (a table made under
    ``torch.inference_mode()`` would be an inference tensor, which autograd refuses to save for a later training
    step) and without autograd history. Inference mode accepts ordinary tensors, so one table serves both."""
    with torch.inference_mode(False), torch.no_grad():
        yield


#: Default tables are kept for lengths that are powers of two (at least 16): a call of length ``n`` slices the table
#: of the next power of two, so that prompts of many lengths share at most a dozen tables per device and dtype.
_MIN_TABLE = 16


def _table_length(needed: int) -> int:
    return min(max(_MIN_TABLE, 1 << max(0, needed - 1).bit_length()), CACHE_LIMIT)


@functools.lru_cache(maxsize=64)
def _default_cos_sin(
    seq: int, rotary_dim: int, base: float, device: torch.device, dtype: torch.dtype, angle_dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin for positions ``0 ... seq - 1`` and default frequencies (read-only, shared)."""
    with _cache_building():
        inv_freq = _device_inv_freq(rotary_dim, base, angle_dtype, device)
        positions = torch.arange(seq, device=device, dtype=torch.float64)
        return _cos_sin(positions, inv_freq, dtype, 1.0, angle_dtype)


@functools.lru_cache(maxsize=64)
def _default_cis(
    seq: int, rotary_dim: int, base: float, device: torch.device, dtype: torch.dtype
) -> torch.Tensor:
    """``cos + i sin`` of :func:`_default_cos_sin` (float64 angles) as one complex table, for the interleaved layout."""
    with _cache_building():
        return torch.complex(*_default_cos_sin(seq, rotary_dim, base, device, dtype, torch.float64))


def _default_inv_freq(rotary_dim: int, base: float, angle_dtype: torch.dtype) -> torch.Tensor:
    """float64 default frequencies on the CPU (shared, read-only), those of :func:`rope_frequencies` without its
    argument checks (the callers checked them), so that ``torch.compile`` can trace them."""
    if not _cacheable_device(torch.device("cpu")):
        return _default_inv_freq_uncached(rotary_dim, base, angle_dtype)
    return _default_inv_freq_cached(rotary_dim, base, angle_dtype)


def _default_inv_freq_uncached(rotary_dim: int, base: float, angle_dtype: torch.dtype) -> torch.Tensor:
    # the master copy lives on the host, whatever the caller's default device (torch.compile cannot enter a device
    # context; it traces the computation on the default device, the CPU unless set otherwise)
    with contextlib.nullcontext() if _compiling() else torch.device("cpu"):
        if angle_dtype == torch.float32:
            return _float32_pow_frequencies(rotary_dim, base).to(torch.float64)
        return _base_inv_freq(rotary_dim, base)


@functools.lru_cache(maxsize=32)
def _default_inv_freq_cached(rotary_dim: int, base: float, angle_dtype: torch.dtype) -> torch.Tensor:
    with _cache_building():
        return _default_inv_freq_uncached(rotary_dim, base, angle_dtype)


@functools.lru_cache(maxsize=64)
def _device_inv_freq_cached(rotary_dim: int, base: float, angle_dtype: torch.dtype, device: torch.device
                            ) -> torch.Tensor:
    with _cache_building():
        return _default_inv_freq_cached(rotary_dim, base, angle_dtype).to(_angle_device(device))


def _device_inv_freq(rotary_dim: int, base: float, angle_dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The default frequencies where the angles are formed for ``device``, copied from the host once per device (a
    copy at every call would wait for the device each time)."""
    if not _cacheable_device(device):
        return _default_inv_freq(rotary_dim, base, angle_dtype).to(_angle_device(device))
    return _device_inv_freq_cached(rotary_dim, base, angle_dtype, device)


def _cacheable_device(device: torch.device) -> bool:
    """Whether tables for ``device`` may be kept: not while ``torch.compile`` traces or a fake mode is active."""
    del device  # every device's tables may be kept (a meta table is keyed by the meta device and serves meta calls)
    return not _compiling() and not _fake_mode_active()


@functools.lru_cache(maxsize=64)
def _kernel_params(rotary_dim: int, base: float, device: torch.device) -> torch.Tensor:
    """The fused kernel's parameters for default frequencies: the float64 frequencies and an attention factor 1."""
    with _cache_building():
        inv_freq = _default_inv_freq(rotary_dim, base, torch.float64)
        return torch.cat([inv_freq, torch.ones(1, dtype=torch.float64)]).to(device)


_CACHES = (_default_cos_sin, _default_cis, _default_inv_freq_cached, _device_inv_freq_cached, _kernel_params)


def clear_caches() -> None:
    """Empty the tables this module shares between calls (default cos/sin tables per length, device and dtype, default
    frequencies and the fused kernel's parameters per device) and forget the fused kernel's failures, e.g. to free
    device memory or after changing the Triton installation. :class:`RotaryEmbedding` keeps its own tables in
    buffers (:meth:`RotaryEmbedding.reset_parameters` rebuilds them). Safe at any time: what is needed again is
    recomputed."""
    for cache in _CACHES:
        cache.cache_clear()
    FUSED_FAILURES.clear()


def _transformed(x: torch.Tensor) -> bool:
    """True inside ``torch.func`` transforms (``vmap``, ``grad``), whose tensors cannot be written with ``out=``."""
    if _compiling():
        return False
    check = getattr(torch._C._functorch, "is_functorch_wrapped_tensor", None)
    return bool(check is not None and check(x))


def _fused(x: torch.Tensor) -> bool:
    """Whether :mod:`course_pe._rope_triton` may rotate ``x``: an ordinary CUDA tensor (or a CPU one under Triton's
    interpreter, for the tests), Triton installed, eager mode (``torch.compile`` fuses the torch formula itself), no
    fake mode, no ``torch.func`` transform."""
    return (_FUSED_ENABLED and _may_fuse_on(x.device) and not _compiling() and _plain(x) and not _fake_mode_active()
            and _triton_module().usable(x) and not _transformed(x))


def _may_fuse_on(device: torch.device) -> bool:
    """Whether the fused kernel could run on ``device`` at all (CUDA, or the CPU under Triton's interpreter), decided
    without importing Triton."""
    return device.type == "cuda" or (device.type == "cpu" and os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"))


def _triton_module():
    """:mod:`course_pe._rope_triton`, imported on first use: only a CUDA tensor (or the CPU under Triton's interpreter)
    needs it, so a CPU session, the grader's environment among them, never imports Triton even where it is
    installed."""
    from . import _rope_triton

    return _rope_triton


#: Whether apply_rope and RotaryEmbedding use the fused Triton kernel where it can run (CUDA).
_FUSED_ENABLED = True
#: Kinds of call (device, dtype, head_dim, rotary_dim, layout, positions' dtype) for which the fused kernel failed with
#: an error that recurs (Triton cannot compile that kernel here), with the error: they take the torch path from then
#: on. A failure of another kind (a launch that failed once) concerns its call only. :func:`clear_caches` empties it.
FUSED_FAILURES: dict[tuple, str] = {}


def _run_fused(
    x: torch.Tensor, positions: torch.Tensor | None, offset: int, params: torch.Tensor, rotary_dim: int, layout: str
) -> torch.Tensor | None:
    """The fused kernel's result, or ``None`` where the torch path must answer: a call the kernel does not take, or a
    failure (with a warning). Out of memory and errors that leave the device unusable propagate (the torch path could
    not run either); a Triton compile error is remembered for its kind of call (:data:`FUSED_FAILURES`)."""
    key = (x.device.type, x.device.index, x.dtype, x.shape[-1], rotary_dim, layout,
           None if positions is None else positions.dtype)
    if key in FUSED_FAILURES:
        return None
    fused = _triton_module()
    try:
        return fused.rotate(x, positions, offset, params, rotary_dim, layout == "interleaved")
    except fused.Unsupported:
        return None
    except Exception as error:  # noqa: BLE001 (Triton's compile and launch errors have no common base class)
        if fused.fatal(error):
            raise
        message = f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
        if fused.deterministic(error):
            FUSED_FAILURES[key] = message
            scope = (f"calls of this kind ({x.dtype}, head_dim {x.shape[-1]}, rotary_dim {rotary_dim}, {layout} "
                     "layout) take the torch path from now on")
        else:
            scope = "the torch path rotates this call"
        warnings.warn(f"course_pe.rope: the fused Triton kernel failed on {x.device} ({message}); {scope}",
                      RuntimeWarning, stacklevel=3)
        return None


def rotate_with_cos_sin(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, layout: RopeLayout = "interleaved"
) -> torch.Tensor:
    """Rotate the pairs of ``x`` (``(..., seq, head_dim)``) by precomputed ``cos``/``sin``.

    ``cos`` and ``sin`` have shape ``(..., seq, head_dim // 2)`` broadcastable against ``x``'s leading
    dimensions (one value per pair, not duplicated): one row per position of ``x``, or a single row for every
    position. ``x``, ``cos`` and ``sin`` must be floating tensors (an integer ``x`` would be rounded back to
    integers). Float32 and float64 inputs are rotated in their own dtype; lower precisions are rotated in float32 and
    cast back. Returns a new tensor with ``x``'s dtype and device. The tables must be finite (checked where values
    may be read: :func:`device_value_checks`); ``x`` may hold anything.
    """
    check_choice("layout", layout, ROPE_LAYOUTS)
    check_tensor("x", x, "floating", min_dim=2, finite=False)
    check_tensor("cos", cos, "floating", min_dim=2, finite=False)
    check_tensor("sin", sin, "floating", min_dim=2, finite=False)
    for name, t in (("x", x), ("cos", cos), ("sin", sin)):
        _check_dense(name, t)
    _check_same_device("cos", cos, x)
    _check_same_device("sin", sin, x)
    if not x.is_meta:  # a real x needs real tables (a meta x gives a meta result from any tables)
        require_values("cos", cos)
        require_values("sin", sin)
    _check_finite("cos", cos)
    _check_finite("sin", sin)
    head_dim = x.shape[-1]
    check_even("head_dim (last dimension of x)", head_dim)
    half = head_dim // 2
    if cos.shape[-1] != half or sin.shape != cos.shape:
        raise ValueError(
            f"cos and sin must both have last dimension head_dim // 2 = {half}; got {tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    want = (*x.shape[:-1], half)
    try:
        fits = torch.broadcast_shapes(cos.shape, want) == want
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"cos and sin of shape {tuple(cos.shape)} do not broadcast to x's (..., seq, head_dim // 2) = {want}: "
            f"they need one row per position of x (seq = {x.shape[-2]}) or a single row for all of them"
        )
    return _rotate(x, cos, sin, layout)


def _rotate(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, cis: torch.Tensor | None = None
) -> torch.Tensor:
    """The rotation, without checks: a constant number of kernels whatever the length (no loop over positions).

    * Under ``torch.compile``, when a gradient is needed, or inside ``torch.func`` transforms: the out-of-place
      formula ``(a cos - b sin, b cos + a sin)``, which autograd differentiates and the compiler fuses into one pass.
    * Interleaved layout, contiguous ``x``: one complex product ``(a + ib)(cos + i sin)`` (``cis`` if given).
    * Otherwise, in eager inference: four kernels on half-width views that write into the output
      (``out_a = a cos; out_a -= b sin; out_b = b cos; out_b += a sin``), so no temporary the size of ``x``.
    """
    half = x.shape[-1] // 2
    compute = x.dtype if x.dtype in _WIDE else torch.float32
    cos, sin = cos.to(device=x.device, dtype=compute), sin.to(device=x.device, dtype=compute)
    functional = (_compiling() or (torch.is_grad_enabled() and (x.requires_grad or cos.requires_grad
                                                                or sin.requires_grad))
                  or _transformed(x) or _transformed(cos) or _transformed(sin))
    if functional:
        xc = x if x.dtype == compute else x.to(compute)
        if layout == "interleaved":
            a, b = xc[..., 0::2], xc[..., 1::2]
            out = torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)
        else:
            a, b = xc[..., :half], xc[..., half:]
            out = torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
    elif layout == "interleaved" and x.is_contiguous():
        # One fused complex multiply: (a + ib)(cos + i sin). Reads x once, writes the result once.
        xc = x if x.dtype == compute else x.to(compute)
        z = torch.view_as_complex(xc.view(*xc.shape[:-1], half, 2))
        table = cis if cis is not None else torch.complex(cos, sin)
        out = torch.view_as_real(z * table).view(xc.shape)
    else:
        # the products read a bfloat16/float16 x directly and compute in float32 (no float32 copy of x first)
        out = torch.empty(x.shape, dtype=compute, device=x.device)
        if layout == "interleaved":
            a, b, out_a, out_b = x[..., 0::2], x[..., 1::2], out[..., 0::2], out[..., 1::2]
        else:
            a, b, out_a, out_b = x[..., :half], x[..., half:], out[..., :half], out[..., half:]
        torch.mul(a, cos, out=out_a)
        out_a.addcmul_(b, sin, value=-1.0)  # a cos - b sin
        torch.mul(b, cos, out=out_b)
        out_b.addcmul_(a, sin)  # b cos + a sin
    return out if out.dtype == x.dtype else out.to(x.dtype)


def _reference_rotation(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, layout: RopeLayout = "interleaved"
) -> torch.Tensor:
    """The rotation as the reference implementations write it, operation for operation (with
    ``angle_dtype=torch.float32``). Half layout: Hugging Face's ``apply_rotary_pos_emb``, ``x * cos + rotate_half(x) *
    sin`` in ``x``'s dtype (its rotary embedding casts cos and sin to ``x``'s dtype first). Interleaved layout:
    torchtune's arithmetic ``(a cos - b sin, b cos + a sin)`` per pair, in float32 for float16, bfloat16 and float32
    inputs (torchtune rotates ``x.float()`` and casts the result back with ``type_as``); a float64 input is rotated in
    float64 (torchtune would round it to float32 first). Separate multiplications and additions round as theirs do;
    the fast paths may fuse or reorder them."""
    if layout == "half":
        cos, sin = cos.to(device=x.device, dtype=x.dtype), sin.to(device=x.device, dtype=x.dtype)
        half = x.shape[-1] // 2
        rotated_half = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * torch.cat([cos, cos], dim=-1) + rotated_half * torch.cat([sin, sin], dim=-1)
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    xc = x.to(compute)
    cos, sin = cos.to(device=x.device, dtype=compute), sin.to(device=x.device, dtype=compute)
    a, b = xc[..., 0::2], xc[..., 1::2]
    return torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2).to(x.dtype)


def _with_passthrough(x: torch.Tensor, rotated: torch.Tensor, rotary_dim: int) -> torch.Tensor:
    """``rotated`` (the first ``rotary_dim`` dimensions) followed by the rest of ``x`` unchanged."""
    if rotary_dim == x.shape[-1]:
        return rotated
    return torch.cat([rotated, x[..., rotary_dim:]], dim=-1)


def apply_rope(
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    inv_freq: torch.Tensor | None = None,
    base: float = 10000.0,
    layout: RopeLayout = "interleaved",
    rotary_dim: int | None = None,
    offset: int | torch.Tensor = 0,
    angle_dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """Rotate queries or keys by their positions.

    Args:
        x: floating ``(..., seq, head_dim)``, e.g. ``(batch, heads, seq, head_dim)`` (float16, bfloat16,
            float32 or float64; integer tensors are refused). ``seq`` may be 0. The sequence is dim -2: a
            Hugging Face projection viewed as ``(batch, seq, heads, head_dim)`` must be transposed first.
        positions: ``None`` (``offset ... offset + seq - 1``), a ``(seq,)`` tensor, or ``(batch, seq)`` (one row per
            sequence) when ``x`` is ``(batch, heads, seq, head_dim)``. Integer or float32/64 (not bool),
            finite; any real value with ``|p| <= 2**53`` (negative, fractional, very large) is a valid position,
            rotated by a float64 angle within ``2 |p theta_i| 2**-53`` rad of the exact ``p theta_i`` (measured:
            0.51 rad at ``2**53 - 1``; see the module's precision note). The values are checked on the CPU, not on
            a GPU (:func:`device_value_checks`).
        inv_freq: ``(rotary_dim // 2,)`` frequencies; default ``base ** (-2i / rotary_dim)``
            (see :func:`~course_pe.rope_scaling.rope_frequencies` for scaled ones).
        base: used only when ``inv_freq`` is None.
        layout: ``"interleaved"`` (pairs ``2i, 2i+1``) or ``"half"`` (pairs ``i, i + rotary_dim/2``).
        rotary_dim: rotate only the first ``rotary_dim`` dimensions ("partial rotary", as in GPT-NeoX
            and GPT-J); the rest pass through unchanged. Default: all of ``head_dim``.
        offset: with ``positions=None``, the position of the first row of ``x``: an ``int >= 0``, or a ``(batch,)``
            integer tensor (one offset per sequence, for 4-D ``x``). During generation with a KV cache holding
            ``t`` keys, the new token sits at position ``t``: ``apply_rope(q_new, offset=t)`` uses the cos/sin of row
            ``t`` of the full-sequence call (the results agree to rounding). Must stay 0 when ``positions`` is given.
        angle_dtype: ``torch.float64`` (exact angles, the default) or ``torch.float32`` (the frequencies and angles
            of Hugging Face, Meta and torchtune, and the rotation of Hugging Face in the half layout and of torchtune
            in the interleaved one, bit for bit for float32, bfloat16 and float16 ``x``); see :func:`rope_cos_sin`
            and the module's precision note.

    Returns:
        A new tensor of ``x``'s shape, dtype and device: row ``r`` of ``x`` (a vector along the last dimension) at
        position ``m`` becomes ``R_m x_r``. (So ``apply_rope(torch.eye(d), torch.full((d,), m))`` returns ``R_m``
        transposed: each *row* of the identity is rotated.)

    Cost. A constant number of kernels whatever the length: on the CPU the interleaved layout is one complex product
    and the half layout four kernels on half-width views, with cos/sin tables of the default positions cached per
    device and dtype (one table per power of two of the length; :func:`clear_caches` empties them); on a CUDA GPU with
    Triton, one fused kernel that computes cos and sin itself and reads ``x`` once and writes once (its gradient is
    the same kernel rotating back, differentiable again); under ``torch.compile`` the formula is traced as one
    expression for the compiler to fuse. On a CUDA GPU nothing is read back to the host and nothing is copied from it
    after the first call on a device (see :func:`device_value_checks` for what that leaves unchecked); ``positions``,
    a tensor ``offset`` and ``inv_freq`` must be on ``x``'s device. On Apple's MPS, which has no float64, the float64
    angles of explicit positions are formed on the CPU: those calls copy the positions to the host and the tables
    back (default positions use cached tables, formed once); ``angle_dtype=torch.float32`` does the same on MPS.

    Under ``torch.compile(fullgraph=True)`` an argument error is raised by Dynamo as ``Unsupported`` with this
    function's message in its text and cause (Dynamo cannot return to eager there); without ``fullgraph`` it is the
    ``ValueError`` or ``TypeError`` itself. Wrong dtypes are ``TypeError`` throughout the package, wrong shapes and
    values ``ValueError``.
    """
    check_choice("layout", layout, ROPE_LAYOUTS)
    check_tensor("x", x, "floating", finite=False)
    _check_dense("x", x)
    if x.dim() < 2:
        raise ValueError(f"x must be (..., seq, head_dim), got shape {tuple(x.shape)}")
    base = check_positive_float("base", base)
    if base <= 1.0 and inv_freq is None:  # (rope_frequencies' check: default frequencies are computed without it)
        raise ValueError(f"base must be > 1 so that frequencies decrease, got {base}")
    head_dim = x.shape[-1]
    if rotary_dim is None:
        rotary_dim = check_even("head_dim (last dimension of x)", head_dim)
    else:
        rotary_dim = check_even("rotary_dim", rotary_dim)
        if rotary_dim > head_dim:
            raise ValueError(f"rotary_dim ({rotary_dim}) exceeds head_dim ({head_dim})")
    offset = _check_offset(x, offset)
    if positions is not None and not (isinstance(offset, int) and offset == 0):
        raise ValueError("offset applies to the default positions only; with explicit positions leave offset=0 "
                         "(add the offset to the positions instead)")
    angle_dtype = _check_angle_dtype(angle_dtype)
    table_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    if inv_freq is not None:
        check_tensor("inv_freq", inv_freq, "floating", finite=False)
        if not x.is_meta:  # a real x is rotated by real angles (a meta x gives a meta result from any frequencies)
            require_values("inv_freq", inv_freq)
        _check_same_device("inv_freq", inv_freq, x)
        _check_finite("inv_freq", inv_freq)
        if inv_freq.shape != (rotary_dim // 2,):
            raise ValueError(f"inv_freq must have shape ({rotary_dim // 2},), got {tuple(inv_freq.shape)}")
    if positions is not None:
        positions = _check_positions(x, positions)
    if angle_dtype == torch.float64 and _fused(x) and not _needs_grad(inv_freq) and not _needs_grad(positions):
        # one kernel: angles, cos and sin in float64 inside it, one read of x and one write (frequencies or positions
        # that need a gradient take the torch path, which differentiates them)
        if inv_freq is None:
            params = _kernel_params(rotary_dim, float(base), x.device)
        else:
            params = torch.cat([inv_freq.detach().to(torch.float64),
                                torch.ones(1, dtype=torch.float64, device=x.device)])
        if isinstance(offset, torch.Tensor):
            positions, offset = _default_positions(x, offset), 0
        out = _run_fused(x, positions, offset, params, rotary_dim, layout)
        if out is not None:
            return out
    cis = None
    default_rows = positions is None and isinstance(offset, int)
    if default_rows and inv_freq is None and offset + x.shape[-2] <= CACHE_LIMIT and _cacheable(x):
        # the common case: positions offset ... offset + seq - 1 and default frequencies; the rows are a slice of a
        # cached table whose length is the next power of two (so that prompts of many lengths and the steps of a
        # decoding loop share a few tables)
        seq = x.shape[-2]
        length = _table_length(offset + seq)
        cos, sin = _default_cos_sin(length, rotary_dim, float(base), x.device, table_dtype, angle_dtype)
        if length != seq:
            cos, sin = cos[offset:offset + seq], sin[offset:offset + seq]
        if layout == "interleaved" and angle_dtype == torch.float64:
            cis = _default_cis(length, rotary_dim, float(base), x.device, table_dtype)
            cis = cis if length == seq else cis[offset:offset + seq]
    else:
        if inv_freq is None:
            inv_freq = _device_inv_freq(rotary_dim, float(base), angle_dtype, x.device)
        if positions is None:
            pos = _default_positions(x, offset).to(torch.float64)
            pos = pos.unsqueeze(1) if pos.dim() == 2 else pos
        else:
            pos = positions.to(device=x.device, dtype=torch.float64)
            pos = pos.unsqueeze(1) if pos.dim() == 2 else pos
        cos, sin = _cos_sin(pos, inv_freq, table_dtype, 1.0, angle_dtype)
    if angle_dtype == torch.float32:
        return _with_passthrough(x, _reference_rotation(x[..., :rotary_dim], cos, sin, layout=layout), rotary_dim)
    part = x if rotary_dim == head_dim else x[..., :rotary_dim]
    return _with_passthrough(x, _rotate(part, cos, sin, layout, cis), rotary_dim)


# --------------------------------------------------------------------------- layouts


def layout_permutation(head_dim: int, *, to: RopeLayout = "half") -> torch.Tensor:
    """Index tensor ``perm`` with ``y = x[..., perm]`` converting *to* the given layout.

    ``to="half"``: ``perm = [0, 2, 4, ..., 1, 3, 5, ...]`` (interleaved -> half);
    ``to="interleaved"``: its inverse. Returns an int64 tensor of shape ``(head_dim,)``.

    As a matrix acting on column vectors: ``P = torch.eye(head_dim)[layout_permutation(head_dim, to="half")]``
    (row ``r`` of ``P`` is the basis vector ``perm[r]``) gives ``interleaved_to_half(x) = P x``; the permutation
    ``to="interleaved"`` gives ``P^T = P^-1``.
    """
    head_dim = check_even("head_dim", head_dim)
    check_choice("to", to, ROPE_LAYOUTS)
    check_memory("head_dim", 5 * 8 * head_dim, f"a permutation of {head_dim} dimensions")
    half = head_dim // 2
    to_half = torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])
    if to == "half":
        return to_half
    inverse = torch.empty_like(to_half)
    inverse[to_half] = torch.arange(head_dim)
    assert inverse.shape == (2 * half,)
    return inverse


def _check_pairs(name: str, x: object) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(x).__name__}")
    if x.dim() == 0:
        raise ValueError(f"{name} must have a last dimension of pairs, got a 0-d tensor")
    check_even(f"last dimension of {name}", x.shape[-1])


def interleaved_to_half(x: torch.Tensor) -> torch.Tensor:
    """Reorder the last dimension from pairs ``(2i, 2i+1)`` to pairs ``(i, i + h)``: ``P x`` for every vector ``x``
    along the last dimension, with ``P = torch.eye(d)[layout_permutation(d, to="half")]``.

    ``x``: a tensor of any dtype with an even, non-zero last dimension. Applied to ``torch.eye(d)``, whose rows are
    the basis vectors, it permutes each row and so returns ``P^T``, not ``P``.
    """
    _check_pairs("x", x)
    return x[..., layout_permutation(x.shape[-1], to="half").to(x.device)]


def half_to_interleaved(x: torch.Tensor) -> torch.Tensor:
    """Reorder the last dimension from pairs ``(i, i + h)`` to pairs ``(2i, 2i+1)``: ``P^T x``, the inverse of
    :func:`interleaved_to_half` (``P`` as there).

    ``x``: a tensor of any dtype with an even, non-zero last dimension. Applied to ``torch.eye(d)`` it returns ``P``.
    """
    _check_pairs("x", x)
    return x[..., layout_permutation(x.shape[-1], to="interleaved").to(x.device)]


def permute_qk_weights(
    weight: torch.Tensor,
    num_heads: int,
    *,
    to: RopeLayout = "half",
    rotary_dim: int | None = None,
) -> torch.Tensor:
    """Permute the output rows of a query or key projection so that a model trained with one RoPE
    layout gives identical attention scores with the other.

    ``weight`` is a floating ``nn.Linear`` weight ``(num_heads * head_dim, in_features)`` or a bias
    ``(num_heads * head_dim,)`` (other ranks are refused: only the first axis holds heads); heads are contiguous
    blocks of rows (the usual ``view(batch, seq, heads, head_dim)`` split). Within each head the rows are reordered by
    :func:`layout_permutation`. Apply it to *both* the query and the key projection (and their biases, if any; values
    and the output projection are untouched). With grouped-query attention pass each projection's own number of heads
    (the key projection's key-value heads).

    ``rotary_dim`` (partial rotary, e.g. GPT-J's 64 of 256 dimensions): only the first ``rotary_dim`` rows of each
    head are rotated, so only they are permuted, by ``layout_permutation(rotary_dim)``; the others keep their place.
    Default: all of ``head_dim``.

    Why it works: if ``P`` permutes dimensions so that ``rope_half(P v) = P rope_interleaved(v)`` for
    every ``v``, then ``<rope_half(P q), rope_half(P k)> = <P rope_i(q), P rope_i(k)> = <rope_i(q), rope_i(k)>``.
    """
    num_heads = check_positive_int("num_heads", num_heads)
    check_tensor("weight", weight, "floating", dim=(1, 2), finite=False)
    check_choice("to", to, ROPE_LAYOUTS)
    rows = weight.shape[0]
    if rows % num_heads:
        raise ValueError(f"weight has {rows} rows, not divisible by num_heads={num_heads}")
    head_dim = rows // num_heads
    if rotary_dim is None:
        rotary_dim = check_even(f"head_dim (rows of weight per head: {rows} rows / num_heads={num_heads})", head_dim)
    else:
        rotary_dim = check_even("rotary_dim", rotary_dim)
        if rotary_dim > head_dim:
            raise ValueError(f"rotary_dim ({rotary_dim}) exceeds head_dim ({head_dim} = {rows} rows / {num_heads} "
                             "heads)")
    perm = torch.cat([layout_permutation(rotary_dim, to=to), torch.arange(rotary_dim, head_dim)]).to(weight.device)
    w = weight.reshape(num_heads, head_dim, *weight.shape[1:])
    return w[:, perm].reshape(weight.shape).clone()


class _DeviceCache(dict):
    """Tensors derived from a module's frequencies, kept per device: a cache, so two caches compare equal (two
    modules of one configuration are alike whatever their caches hold, e.g. for ``train_seeds``)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _DeviceCache)

    __hash__ = None  # type: ignore[assignment]


# --------------------------------------------------------------------------- module


class RotaryEmbedding(nn.Module):
    """RoPE with cached cos/sin tables.

    ``forward(x, positions=None, *, offset=0)`` rotates ``x`` of shape ``(..., seq, head_dim)`` (call it on the
    queries and on the keys). ``x`` is a floating tensor; ``positions`` an integer (or integral
    float32/float64) tensor of positions in ``0 ... 2**53``, of shape ``(seq,)`` or ``(batch, seq)``; without
    positions the rows sit at ``offset, offset + 1, ...`` (generation with a KV cache: see :meth:`forward`).
    The float64 cos/sin cache covers positions ``0 ... cached_positions - 1`` and is
    held in non-persistent buffers (recomputable, so not saved in ``state_dict``); it grows (by powers of
    two) when a larger position is requested, but never beyond ``cache_limit = max(max_positions,
    CACHE_LIMIT)`` positions: a call that needs a position past that limit gets cos and sin computed for
    its own positions only, so memory follows the number of positions, not their values. The cache is
    rebuilt on the input's device if the module was not moved, and rebuilt once on a device it was moved to (after
    ``to_empty``, whose buffers hold uninitialised memory, that is what makes the module correct; PyTorch's
    convention is to call :meth:`reset_parameters`, which does it at once). Built under ``torch.device("meta")`` it
    rotates meta tensors (shape inference). Tables made under ``torch.inference_mode()`` are ordinary tensors, so an
    evaluation pass does not stop a later training step; calls under ``torch.compile`` or a ``FakeTensorMode`` leave
    the module unchanged.

    With :class:`~course_pe.rope_scaling.DynamicNTKScaling` the frequencies depend on the current length ``L'``
    (``max(positions) + 1``, or the ``seq_len`` given to :meth:`forward`/:meth:`cos_sin`): an input longer than
    ``original_max_positions`` gets frequencies stretched for its own length, and a later short input gets the
    original ones back; each call depends on that call only. :class:`~course_pe.rope_scaling.LongRoPEScaling`
    switches the same way between its short and long factors, as Hugging Face's ``dynamic_rope_update`` does.

    **Dynamic NTK over a series of calls differs from Hugging Face's module.** transformers 5.23 keeps the
    frequencies of the longest input so far (its ``max_seq_len_cached``) and drops them only when an input shorter
    than the original length arrives: after a call of length 1000 (original 512), a call of length 800 is rotated
    with the frequencies of 1000, here with those of 800 (the formula's ``L'``). With ``angle_dtype=torch.float32``
    every single call, and every series whose lengths never fall between the original length and an earlier, longer
    one, equals transformers bit for bit; to reproduce any series, keep its longest length yourself and pass it::

        longest = original                          # transformers' max_seq_len_cached, at the start
        for q in inputs:                            # before each call of length L = max(positions) + 1
            L = q.shape[-2]
            longest = L if L > longest else (original if L < original else longest)
            q_rotated = rotary(q, seq_len=longest)

    (``tests/test_rope_scaling_hf.py`` checks this recipe against ``LlamaRotaryEmbedding`` bit for bit.)

    Args:
        head_dim: width of a query/key head.
        base: frequency base.
        max_positions: initial cache length.
        scaling: optional scaling (see :mod:`course_pe.rope_scaling`).
        layout: ``"interleaved"`` or ``"half"``.
        rotary_dim: rotate only the first ``rotary_dim`` dimensions (default all).
        angle_dtype: ``torch.float64`` (exact angles, the default) or ``torch.float32`` (frequencies, angles, cos
            and sin computed as Hugging Face transformers computes them for the same current length, bit for bit;
            the cached tables then hold those float32 values; for dynamic NTK over a series of calls see above).
            See the module's precision note for when the difference matters.
    """

    inv_freq: torch.Tensor
    cos_cached: torch.Tensor
    sin_cached: torch.Tensor

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        max_positions: int = 2048,
        scaling: RopeScaling | None = None,
        layout: RopeLayout = "interleaved",
        rotary_dim: int | None = None,
        angle_dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__()
        self.head_dim = check_even("head_dim", head_dim)
        self.angle_dtype = _check_angle_dtype(angle_dtype)
        self.rotary_dim = self.head_dim if rotary_dim is None else check_even("rotary_dim", rotary_dim)
        if self.rotary_dim > self.head_dim:
            raise ValueError(f"rotary_dim ({self.rotary_dim}) exceeds head_dim ({self.head_dim})")
        self.base = check_positive_float("base", base)
        self.layout = check_choice("layout", layout, ROPE_LAYOUTS)
        self.scaling = scaling
        self.max_positions = check_positive_int("max_positions", max_positions)
        # float64 positions, angles, cos and sin (and their float32 angles in reference mode)
        check_memory("head_dim (rotary_dim) and max_positions", 5 * 8 * max_positions * (self.rotary_dim // 2 + 1),
                     f"a cos/sin cache of {max_positions} positions x {self.rotary_dim // 2} pairs")
        self.cache_limit = max(max_positions, CACHE_LIMIT)
        with torch.device("cpu"):  # the float64 master copies live on the host, even when built under meta
            inv_freq, factor = rope_frequencies(
                self.rotary_dim, base=self.base, scaling=scaling, dtype=torch.float64, angle_dtype=self.angle_dtype
            )
            # the frequencies a length-dependent scaling switches between (the grown ones of dynamic NTK are
            # computed for each length): kept so that torch.compile need not call rope_frequencies
            self._inv_freq_long = (_module_frequencies(self.rotary_dim, self.base, scaling,
                                                       scaling.original_max_positions + 1, self.angle_dtype)[0]
                                   if isinstance(scaling, LongRoPEScaling) else None)
        self.attention_factor = factor
        self._inv_freq_original = inv_freq
        self._freq_seq_len: int | None = None  # the length the current frequencies were built for (None: original)
        # the current float64 frequencies (a plain attribute, so Module.to(dtype) cannot round them): on the host, or
        # for dynamic NTK beyond the original length on the device where they were computed
        self._inv_freq64 = inv_freq
        self._freq_cache = _DeviceCache()  # frequencies and kernel parameters on each device (a cache, not state)
        self._cache_freq: int | None = None  # the _freq_seq_len the cos/sin buffers were built for
        self._built_device: torch.device | None = None  # where the buffers' values were computed
        device = torch.empty(0).device  # the default device (meta under torch.device("meta"))
        # the buffer is the float32 view of the frequencies that checkpoints and other libraries expose
        self.register_buffer("inv_freq", torch.empty(0, device=device), persistent=False)
        self.register_buffer("cos_cached", torch.empty(0, device=device), persistent=False)
        self.register_buffer("sin_cached", torch.empty(0, device=device), persistent=False)
        self._build_cache(max_positions, device)

    @property
    def cached_positions(self) -> int:
        return int(self.cos_cached.shape[0])

    def reset_parameters(self) -> None:
        """Recompute the frequencies and the cos/sin buffers on the device the buffers are on.

        RoPE has no parameters; its buffers are a function of the configuration. This is the method PyTorch's
        convention calls after ``module.to_empty(device=...)`` (a model built under ``torch.device("meta")``, then
        given uninitialised memory), as for ``nn.Linear``. :meth:`forward` also rebuilds, by itself, buffers that were
        not computed on the device they are on (after ``to_empty`` or a move), so forgetting the call is not a silent
        error; under ``torch.compile`` such buffers are not read (the rows are computed for the call)."""
        device = self.cos_cached.device
        self._freq_seq_len = None
        self._inv_freq64 = self._inv_freq_original
        self._freq_cache.clear()
        self._build_cache(max(self.cached_positions, self.max_positions), device)

    def _stateful(self) -> bool:
        """Whether this call may change the module's caches: eager mode, no fake mode (``torch.compile`` and fake
        tracing compute what they need for the call and leave the module as it is)."""
        return not _compiling() and not _fake_mode_active()

    def _build_cache(self, length: int, device: torch.device) -> None:
        with _cache_building():
            inv_freq = self._device_frequencies(device)
            positions = torch.arange(length, device=device, dtype=torch.float64)
            self.cos_cached, self.sin_cached = _cos_sin(
                positions, inv_freq, torch.float64, self.attention_factor, self.angle_dtype)
            self.inv_freq = inv_freq.to(device=device, dtype=torch.float32)
        self._cache_freq = self._freq_seq_len
        self._built_device = device

    def _tables_valid(self, device: torch.device) -> bool:
        """Whether the cos/sin buffers hold the current frequencies' tables on ``device``: computed there (not moved
        by ``to_empty``), in float64 (not rounded by ``.half()``), for the current frequencies."""
        return (self.cos_cached.device == device and self._built_device == device
                and self.cos_cached.dtype == torch.float64 and self._cache_freq == self._freq_seq_len)

    def _per_call_rows(self) -> bool:
        """Dynamic NTK beyond its original length: new frequencies for every length, so the rows of each call are
        computed for that call (as Hugging Face's module does) instead of rebuilding a whole table per step."""
        return isinstance(self.scaling, DynamicNTKScaling) and self._freq_seq_len is not None

    def _wanted_length(self, seq_len: int) -> int | None:
        """The length the frequencies of a length-dependent scaling are built for (``None``: the original ones)."""
        if not isinstance(self.scaling, (DynamicNTKScaling, LongRoPEScaling)):
            return None
        original = self.scaling.original_max_positions
        if seq_len <= original:
            return None
        # LongRoPE: every length beyond the original gives the same (long) factors
        return original + 1 if isinstance(self.scaling, LongRoPEScaling) else seq_len

    def _update_frequencies(self, seq_len: int, device: torch.device, *, rebuild: bool = True) -> None:
        """Length-dependent scalings: dynamic NTK recomputes its frequencies for every length beyond the original
        maximum, on ``device`` (no copy from the host, so no wait in a decoding loop); LongRoPE switches from its
        short to its long factors there (and back for a shorter input). With ``rebuild`` the cos/sin buffers of a
        fixed set of frequencies follow at once; otherwise they are rebuilt when next read."""
        wanted = self._wanted_length(seq_len)
        if wanted == self._freq_seq_len:
            return
        for key in [k for k in self._freq_cache if isinstance(self.scaling, DynamicNTKScaling) and k[1] is not None]:
            del self._freq_cache[key]  # the frequencies of earlier lengths are not needed again
        self._freq_seq_len = wanted
        inv_freq = self._device_frequencies(device)
        self._inv_freq64 = inv_freq
        with _cache_building():
            self.inv_freq = inv_freq.to(device=device, dtype=torch.float32)
        if rebuild and not self._per_call_rows():
            self._build_cache(min(max(seq_len, self.cached_positions), self.cache_limit), device)

    def _ensure_cache(self, needed: int, device: torch.device) -> None:
        """Buffers that cover positions ``0 ... needed - 1`` (``needed <= cache_limit``) on ``device``, in float64,
        for the current frequencies; grown by powers of two."""
        if needed > self.cached_positions or not self._tables_valid(device):
            length = max(needed, self.cached_positions)
            self._build_cache(min(1 << math.ceil(math.log2(length)), self.cache_limit), device)

    def _frequencies_for(self, wanted: int | None | torch.Tensor, device: torch.device | None = None
                         ) -> torch.Tensor:
        """float64 frequencies for the length ``wanted`` (:meth:`_wanted_length`; a Python int, ``None`` for the
        original frequencies, or a 0-d tensor for dynamic NTK) on ``device`` (``wanted``'s device for a tensor; the
        CPU by default), computed with torch operations only: ``torch.compile`` traces them, and on an accelerator no
        value is copied from the host (:func:`~course_pe.rope_scaling.rope_frequencies` checks its arguments with host
        calls). Equal to :func:`_module_frequencies` bit for bit for an int length on the CPU."""
        if isinstance(wanted, torch.Tensor):
            device = wanted.device
        device = torch.device("cpu") if device is None else device
        if wanted is None:
            return self._inv_freq_original.to(device)
        if isinstance(self.scaling, LongRoPEScaling):
            return self._inv_freq_long.to(device)
        scaling, rotary_dim = self.scaling, self.rotary_dim
        assert isinstance(scaling, DynamicNTKScaling)
        original = scaling.original_max_positions
        if self.angle_dtype == torch.float32:  # transformers' float32 tensor arithmetic (see _module_frequencies)
            length = wanted if isinstance(wanted, torch.Tensor) else torch.full((), wanted, dtype=torch.int64,
                                                                                 device=device)
            current = length.long().clamp_min(original)
            new_base = self.base * ((scaling.factor * current / original) - (scaling.factor - 1)) ** (
                rotary_dim / (rotary_dim - 2))
            exponent = torch.arange(0, rotary_dim, 2, dtype=torch.int64, device=device).to(torch.float32) / rotary_dim
            return (1.0 / (new_base**exponent)).to(torch.float64)
        # the float64 formula of rope_scaling._dynamic_ntk (Python floats for an int length, as there)
        stretch = scaling.factor * (wanted.to(torch.float64) if isinstance(wanted, torch.Tensor) else wanted) \
            / original - (scaling.factor - 1.0)
        new_base = self.base * stretch ** (rotary_dim / (rotary_dim - 2))
        pair = torch.arange(rotary_dim // 2, dtype=torch.float64, device=device)
        return new_base ** (-2.0 * pair / rotary_dim)

    def _device_frequencies(self, device: torch.device, seq_len: int | None = None) -> torch.Tensor:
        """float64 frequencies where the angles for ``device`` are formed: the current ones, or (a length-dependent
        scaling) those for ``seq_len``. Kept per device until the frequencies change (not under ``torch.compile`` or
        fake tracing, which do not change the module): a copy from the host at every call would wait for the
        device."""
        wanted = self._freq_seq_len if seq_len is None else self._wanted_length(seq_len)
        where = _angle_device(device)
        if not self._stateful():
            return self._frequencies_for(wanted, where)
        key = ("inv_freq", wanted, where)
        if key not in self._freq_cache:
            with _cache_building():
                self._freq_cache[key] = self._frequencies_for(wanted, where)
        return self._freq_cache[key]

    def _length_frequencies(self, positions: torch.Tensor, seq_len: int | None) -> torch.Tensor:
        """float64 frequencies for a call with explicit ``positions`` on any device, without reading a value back to
        the host: for a length-dependent scaling without ``seq_len`` both candidates (original and grown for the
        current length ``L' = max(positions) + 1``) are computed on the device and one is selected there."""
        device = positions.device
        if seq_len is not None or not isinstance(self.scaling, (DynamicNTKScaling, LongRoPEScaling)):
            return self._device_frequencies(device, seq_len)
        original = self.scaling.original_max_positions
        length = positions.max().to(_angle_device(device)) + 1  # a 0-d tensor on the device: no synchronisation
        short = self._device_frequencies(device, original)
        if isinstance(self.scaling, LongRoPEScaling):
            grown = self._device_frequencies(device, original + 1)
        else:
            grown = self._frequencies_for(length)
        return torch.where(length > original, grown, short)

    def _kernel_params(self, device: torch.device) -> torch.Tensor:
        """The fused kernel's parameters on ``device``: the current float64 frequencies and the attention factor,
        made on the device (a fill, not a copy from the host)."""
        key = ("kernel", self._freq_seq_len, device)
        if key not in self._freq_cache:
            with _cache_building():
                self._freq_cache[key] = torch.cat([self._device_frequencies(device).to(device), torch.full(
                    (1,), self.attention_factor, dtype=torch.float64, device=device)])
        return self._freq_cache[key]

    #: Attributes whose effect lives in the cos/sin buffers. :func:`~course_pe.training.train_seeds` lets them differ
    #: between the models it trains together (their buffers are then stacked, one per model), as long as no call has
    #: to rebuild the buffers from them (see :meth:`_cos_sin_transformed`).
    _seed_stackable_attributes = frozenset({"scaling", "attention_factor", "_inv_freq64", "_freq_seq_len",
                                            "_cache_freq", "_inv_freq_original", "_inv_freq_long"})
    #: Attributes that are caches, not configuration: two modules of one configuration may differ in them (one has
    #: seen longer inputs, or runs on another device); :func:`~course_pe.training.evaluate_seeds` ignores them.
    _cache_attributes = frozenset({"_inv_freq64", "_freq_seq_len", "_cache_freq", "_freq_cache", "_built_device"})

    def _cos_sin_transformed(
        self, positions: torch.Tensor, needed: int, length: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin inside ``torch.func`` transforms (``train_seeds``' ``vmap`` over models), where the module's state
        cannot be updated: the buffers are those of the call (one per model where the models differ), and every
        attribute is ``models[0]``'s. A call that needs new frequencies or positions beyond the cache computes them
        for itself when the buffers are shared (the models agree); where they differ per model it would compute
        every model's from ``models[0]``'s scaling, so it is refused."""
        wanted = self._wanted_length(length)
        if (wanted == self._freq_seq_len and self._cache_freq == self._freq_seq_len
                and needed <= self.cached_positions and self._built_device == self.cos_cached.device):
            return self.cos_cached[positions], self.sin_cached[positions]
        if _transformed(self.cos_cached):
            reason = (f"new frequencies (length {length}, scaling {self.scaling!r})" if wanted != self._freq_seq_len
                      else f"positions up to {needed - 1}, beyond the {self.cached_positions} cached")
            raise ValueError(
                f"RotaryEmbedding: the models trained together have different cos/sin caches (different RoPE "
                f"scalings), and this input needs {reason}, which would be computed from the first model's scaling "
                "for every model. Give every model a cache that covers the input (max_positions >= the input "
                "length) and a scaling that does not depend on the length, or train the models separately"
            )
        inv_freq = self._frequencies_for(wanted, _angle_device(positions.device))
        return _cos_sin(positions, inv_freq, torch.float64, self.attention_factor, self.angle_dtype)

    def cos_sin(self, positions: torch.Tensor, *, seq_len: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """float64 ``cos`` and ``sin`` at ``positions``, shape ``positions.shape + (rotary_dim // 2,)``.

        ``positions``: integer tensor (uint8 included; or float32/float64 holding whole numbers) of values in
        ``0 ... 2**53``. ``seq_len`` (dynamic NTK and LongRoPE only): the current length, an integer in
        ``1 ... 2**53 + 1``, default ``max(positions) + 1``. This method reads the largest position to size the
        cache (on a GPU, one wait for the device); :meth:`forward` does not.
        """
        check_tensor("positions", positions, "position")
        _check_dense("positions", positions)
        self._restore_if_moved()
        return self._cos_sin(positions, seq_len,
                             transformed=_transformed(positions) or _transformed(self.cos_cached))

    def _restore_if_moved(self) -> None:
        """Rebuild buffers whose values were not computed where they are (after ``to_empty``, or built on the meta
        device): :meth:`reset_parameters`, once (eager mode only)."""
        if self._stateful() and self._built_device != self.cos_cached.device and not _transformed(self.cos_cached):
            self.reset_parameters()

    def _cos_sin(
        self, positions: torch.Tensor, seq_len: int | None, *, transformed: bool, tables: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Check ``positions`` (reading their values), set the frequencies for the current length and return the
        float64 cos/sin at ``positions``; with ``tables=False`` only the checks and the frequencies (for the fused
        kernel, which computes cos and sin itself): ``None``."""
        check_tensor("positions", positions, "position", finite=False)
        require_values("positions", positions)
        _check_finite("positions", positions)
        _check_position_values("positions", positions)
        if positions.dtype.is_floating_point and not torch.equal(positions, positions.round()):
            raise ValueError("RotaryEmbedding caches integer positions; use apply_rope for fractional ones")
        check_index_range("positions", positions, 0, None)
        # int64 for indexing: a uint8 index tensor is read by PyTorch as a boolean mask, not as positions
        positions = positions.long()
        if seq_len is not None:
            seq_len = check_int("seq_len", seq_len, minimum=1, maximum=MAX_POSITION + 1)
        needed = int(positions.max()) + 1 if positions.numel() else 1
        # the result: two float64 tables of positions x pairs (and the angles they are computed from)
        check_memory("positions", 4 * 8 * numel(positions.numel(), self.rotary_dim // 2 + 1),
                     f"cos/sin of {positions.numel()} positions x {self.rotary_dim // 2} pairs")
        device = positions.device
        if transformed:
            return self._cos_sin_transformed(positions, needed, seq_len if seq_len is not None else needed)
        self._update_frequencies(seq_len if seq_len is not None else needed, device, rebuild=tables)
        if not tables:
            return None
        if needed > self.cache_limit or self._per_call_rows():
            # past the bounded cache, or frequencies of this length only: cos/sin for these positions only
            return _cos_sin(positions, self._device_frequencies(device), torch.float64, self.attention_factor,
                            self.angle_dtype)
        self._ensure_cache(needed, device)
        return self.cos_cached[positions], self.sin_cached[positions]

    def _rows(
        self, offset: int, seq: int, length: int, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """float64 cos/sin of the rows ``offset ... offset + seq - 1``, with the frequencies for the current length
        ``length``: a slice of the buffers (grown if needed), or computed for the call beyond ``cache_limit``, for
        dynamic NTK beyond its original length, and under ``torch.compile`` or fake tracing (where the module's state
        is not changed). Python integers only: no value is read."""
        needed = offset + seq
        if not self._stateful():
            wanted = self._wanted_length(length)
            if wanted == self._freq_seq_len and needed <= self.cached_positions and self._tables_valid(device):
                return self.cos_cached[offset:needed], self.sin_cached[offset:needed]
            rows = torch.arange(offset, needed, device=device, dtype=torch.float64)
            return _cos_sin(rows, self._device_frequencies(device, length), torch.float64, self.attention_factor,
                            self.angle_dtype)
        self._update_frequencies(length, device)
        if needed > self.cache_limit or self._per_call_rows():
            rows = torch.arange(offset, needed, device=device, dtype=torch.float64)
            return _cos_sin(rows, self._device_frequencies(device), torch.float64, self.attention_factor,
                            self.angle_dtype)
        self._ensure_cache(needed, device)
        return self.cos_cached[offset:needed], self.sin_cached[offset:needed]

    def forward(
        self,
        x: torch.Tensor,
        positions: torch.Tensor | None = None,
        *,
        offset: int | torch.Tensor = 0,
        seq_len: int | None = None,
    ) -> torch.Tensor:
        """Rotate floating ``x`` (``(..., seq, head_dim)``) at ``positions`` (see the class docstring).

        ``offset`` (with ``positions=None``): the position of the first row, an ``int >= 0`` or a ``(batch,)``
        integer tensor for 4-D ``x``. With a KV cache of ``t`` keys, ``rotary(q_new, offset=t)`` rotates the new
        token by the same cos/sin row as the full-sequence call rotates row ``t`` (the rotated values agree to
        rounding; for dynamic NTK and LongRoPE the current length is ``offset + seq``).

        ``seq_len`` (dynamic NTK and LongRoPE only; an integer in ``1 ... 2**53 + 1``): the length whose frequencies
        to use, default ``max(positions) + 1``; the class docstring shows how to reproduce Hugging Face's module
        over a series of calls with it.

        Cost and checks. Without ``positions`` (or with an int ``offset``) the rows are a slice of the cos/sin buffers;
        on a CUDA GPU with Triton one fused kernel computes cos and sin itself. With ``positions`` on the CPU in eager
        mode, they are checked (integral, ``>= 0``, at most ``2**53``) and looked up in the buffers; on a GPU, under
        ``torch.compile`` and under ``vmap`` over positions they are not read back to the host: cos and sin are
        computed from them on the device (and a length-dependent scaling picks its frequencies there), so a decode step
        costs a constant number of kernels and no synchronisation. Dynamic NTK beyond its original length computes new
        frequencies on the device at every length and the cos/sin of the call's rows only (no table per step).
        ``positions`` and a tensor ``offset`` must be on ``x``'s device. On MPS (no float64) the float64 angles of
        explicit positions are formed on the CPU (a copy each way per call). See :func:`device_value_checks`.
        """
        check_tensor("x", x, "floating", min_dim=2, finite=False)
        _check_dense("x", x)
        if x.is_meta and not self.cos_cached.is_meta:
            raise ValueError("x is a meta tensor but the module's buffers are not: RotaryEmbedding reads rows of its "
                             "cos/sin cache on x's device, so a meta x needs a module built on the meta device "
                             "(with torch.device('meta'): ..., for shape inference) or .to('meta'); apply_rope works "
                             "on meta tensors")
        if x.shape[-1] != self.head_dim:
            raise ValueError(f"x must have last dimension head_dim={self.head_dim}, got shape {tuple(x.shape)}")
        offset = _check_offset(x, offset)
        if positions is not None:
            if not (isinstance(offset, int) and offset == 0):
                raise ValueError("offset applies to the default positions only; with explicit positions leave "
                                 "offset=0 (add the offset to the positions instead)")
            _check_positions(x, positions)
            if not x.is_meta:
                require_values("positions", positions)
        if seq_len is not None:
            seq_len = check_int("seq_len", seq_len, minimum=1, maximum=MAX_POSITION + 1)
        seq = x.shape[-2]
        rotate_rows = positions is None and isinstance(offset, int)
        # inside torch.func transforms: x may be shared by every model (in_dims None) while the buffers are stacked,
        # so the buffers and positions are looked at too, not x alone
        transformed = _transformed(x) or _transformed(self.cos_cached) or (
            positions is not None and _transformed(positions))
        if not transformed:
            self._restore_if_moved()
        fused = (not transformed and self.angle_dtype == torch.float64 and _fused(x)
                 and not _needs_grad(positions))  # positions that need a gradient take the torch path
        if rotate_rows and not transformed:
            length = seq_len if seq_len is not None else offset + seq
            if fused:
                self._update_frequencies(length, x.device, rebuild=False)
                out = _run_fused(x, None, offset, self._kernel_params(x.device), self.rotary_dim, self.layout)
                if out is not None:
                    return out
            cos, sin = self._rows(offset, seq, length, x.device)
        else:
            if positions is None:
                positions = _default_positions(x, offset)
            # read the positions: on the CPU in eager mode, and inside train_seeds' vmap over models (positions
            # shared); not on a GPU, under torch.compile, or when the positions themselves are batched by vmap
            read = (_values_checked(positions) or transformed) and not (
                _transformed(positions) and not _transformed(self.cos_cached))
            if read:
                if fused:  # checked here, rotated by the kernel
                    self._cos_sin(positions, seq_len, transformed=False, tables=False)
                    out = _run_fused(x, positions, 0, self._kernel_params(x.device), self.rotary_dim, self.layout)
                    if out is not None:
                        return out
                cos, sin = self._cos_sin(positions, seq_len, transformed=transformed)  # type: ignore[misc]
            else:  # a GPU, torch.compile or vmap over positions: nothing read back to the host
                length_dependent = isinstance(self.scaling, (DynamicNTKScaling, LongRoPEScaling))
                if fused:
                    if length_dependent:
                        params = torch.cat([self._length_frequencies(positions, seq_len).to(x.device), torch.full(
                            (1,), self.attention_factor, dtype=torch.float64, device=x.device)])
                    else:  # the frequencies never change: the cached parameters (a decoding step's common case)
                        params = self._kernel_params(x.device)
                    out = _run_fused(x, positions, 0, params, self.rotary_dim, self.layout)
                    if out is not None:
                        return out
                inv_freq = self._length_frequencies(positions, seq_len)
                cos, sin = _cos_sin(positions, inv_freq, torch.float64, self.attention_factor, self.angle_dtype)
            if positions.dim() == 2:  # (batch, seq, h) -> (batch, 1, seq, h)
                cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        part = x if self.rotary_dim == self.head_dim else x[..., : self.rotary_dim]
        if self.angle_dtype == torch.float32:
            rotated = _reference_rotation(part, cos, sin, layout=self.layout)
        else:
            rotated = _rotate(part, cos, sin, self.layout)
        return _with_passthrough(x, rotated, self.rotary_dim)

    def extra_repr(self) -> str:
        return (
            f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, base={self.base}, "
            f"layout={self.layout!r}, scaling={self.scaling!r}"
            + (f", angle_dtype={self.angle_dtype}" if self.angle_dtype != torch.float64 else "")
        )
