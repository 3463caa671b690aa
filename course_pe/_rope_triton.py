"""A fused RoPE kernel in Triton: one read of ``x``, one write of the result, cos and sin computed in the kernel.

:mod:`course_pe.rope` calls :func:`rotate` for CUDA tensors when Triton is installed (PyTorch's CUDA wheels for Linux
depend on it; ``torch==2.13.0`` pins ``triton==3.7.1``). The torch path of :mod:`course_pe.rope` stays the reference and
the fallback: on the CPU, on other accelerators, under ``torch.compile`` (which fuses the torch formula itself), for
``angle_dtype=torch.float32`` (the reference numerics of Hugging Face, Meta and torchtune, operation for operation)
and for frequencies that need a gradient.

What the kernel computes is what the torch path computes: the angle ``p * theta_i`` in float64 from the integer (or
float32/float64) position and the float64 frequency, its cos and sin in float64, multiplied by the attention factor,
rounded to float32 (float64 for a float64 ``x``), and the rotation ``(a cos - b sin, b cos + a sin)`` in that precision,
rounded once to ``x``'s dtype. It differs from the torch path only by the order of rounding inside the rotation (the
compiler may fuse a multiply and an add), a unit in the last place of float32.

Layout of the work. ``x`` is viewed as ``(batch, heads, seq, head_dim)`` with any strides except along ``head_dim``.
Each program takes ``BLOCK_S`` positions of one sequence and a group of heads: it computes the cos/sin tile of its
positions once and reuses it for every head of its group, so the float64 trigonometry costs ``batch * seq * pairs``
evaluations, not one per element of ``x``. Dimensions beyond ``rotary_dim`` (partial rotary) are copied in the same pass.

Tests run the kernel on CPU tensors through Triton's interpreter (``TRITON_INTERPRET=1``); :func:`interpreted` says
whether that mode is on. The interpreter runs the same program in NumPy: it checks what the kernel computes, not how
fast it runs on a GPU.
"""

from __future__ import annotations

import functools
import os

import torch

try:  # Triton ships with PyTorch's CUDA wheels for Linux; the CPU wheels (the course's pin on Linux) have none
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover (depends on the installation)
    triton = None
    tl = None

__all__: list[str] = []  # private: course_pe.rope decides when to call it

#: Positions per program (a power of two); fewer for short sequences.
BLOCK_S = 32
#: Programs wanted at least, so that a GPU has work for every multiprocessor; heads are split into groups to reach it.
MIN_PROGRAMS = 2048


def available() -> bool:
    """Whether Triton can be imported here."""
    return triton is not None


def interpreted() -> bool:
    """Whether Triton runs kernels in its interpreter (``TRITON_INTERPRET=1``), on CPU tensors."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def usable(x: torch.Tensor) -> bool:
    """Whether the kernel can rotate ``x`` here: a CUDA tensor with Triton installed, or a CPU tensor under the
    interpreter."""
    if triton is None:
        return False
    if x.device.type == "cuda":
        return True
    return x.device.type == "cpu" and interpreted()


if triton is not None:  # the kernel's annotations need triton.language

    def _kernel_source(
        x_ptr, out_ptr, pos_ptr, params_ptr,
        offset, sign,
        num_heads, seq, heads_per_program,
        sxb, sxh, sxs, sob, soh, sos, spb, sps,
        ROT_HALF: tl.constexpr, HEAD_DIM: tl.constexpr,
        BLOCK: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_R: tl.constexpr,
        INTERLEAVED: tl.constexpr, HAS_POS: tl.constexpr, WIDE: tl.constexpr,
    ):
        """One program: ``BLOCK`` positions of sequence ``program_id(1)``, heads ``program_id(2) * heads_per_program``
        onwards. ``params_ptr`` holds the ``ROT_HALF`` float64 frequencies followed by the attention factor."""
        pid_s = tl.program_id(0)
        b = tl.program_id(1)
        pid_h = tl.program_id(2)
        rows = pid_s * BLOCK + tl.arange(0, BLOCK)
        row_ok = rows < seq
        pairs = tl.arange(0, BLOCK_P)
        pair_ok = pairs < ROT_HALF
        if HAS_POS:
            p = tl.load(pos_ptr + b * spb + rows * sps, mask=row_ok, other=0).to(tl.float64)
        else:
            p = (rows.to(tl.int64) + offset).to(tl.float64)
        inv = tl.load(params_ptr + pairs, mask=pair_ok, other=0.0)
        factor = tl.load(params_ptr + ROT_HALF)
        angle = p[:, None] * inv[None, :]
        c = tl.cos(angle) * factor
        s = tl.sin(angle) * factor * sign
        if not WIDE:
            c = c.to(tl.float32)
            s = s.to(tl.float32)
        if INTERLEAVED:
            col_a = 2 * pairs
            col_b = 2 * pairs + 1
        else:
            col_a = pairs
            col_b = pairs + ROT_HALF
        mask = row_ok[:, None] & pair_ok[None, :]
        rest = 2 * ROT_HALF + tl.arange(0, BLOCK_R)
        rest_mask = row_ok[:, None] & (rest < HEAD_DIM)[None, :]
        h_start = pid_h * heads_per_program
        h_stop = tl.minimum(h_start + heads_per_program, num_heads)
        for h in range(h_start, h_stop):
            x_rows = x_ptr + b * sxb + h * sxh + rows[:, None] * sxs
            o_rows = out_ptr + b * sob + h * soh + rows[:, None] * sos
            a = tl.load(x_rows + col_a[None, :], mask=mask, other=0.0)
            bb = tl.load(x_rows + col_b[None, :], mask=mask, other=0.0)
            if WIDE:
                a = a.to(tl.float64)
                bb = bb.to(tl.float64)
            else:
                a = a.to(tl.float32)
                bb = bb.to(tl.float32)
            first = a * c - bb * s
            second = bb * c + a * s
            tl.store(o_rows + col_a[None, :], first.to(out_ptr.dtype.element_ty), mask=mask)
            tl.store(o_rows + col_b[None, :], second.to(out_ptr.dtype.element_ty), mask=mask)
            if BLOCK_R > 1 or 2 * ROT_HALF < HEAD_DIM:
                kept = tl.load(x_rows + rest[None, :], mask=rest_mask, other=0.0)
                tl.store(o_rows + rest[None, :], kept.to(out_ptr.dtype.element_ty), mask=rest_mask)


@functools.lru_cache(maxsize=2)
def _kernel(interpret: bool):
    """The kernel, made by ``triton.jit`` for the current mode (compiled for a GPU, or the interpreter): Triton picks
    the mode when a function is decorated, so the interpreted and compiled versions are kept apart."""
    del interpret  # the cache key: triton.jit reads TRITON_INTERPRET itself
    return triton.jit(_kernel_source, do_not_specialize=["offset", "seq", "num_heads", "heads_per_program"])


def _as_four_dims(t: torch.Tensor) -> torch.Tensor:
    """``t`` (``(..., seq, head_dim)``) as ``(batch, heads, seq, head_dim)``: 2-D and 3-D get leading ones, more than
    4-D have their leading dimensions merged (a copy only where they cannot be merged)."""
    if t.dim() == 2:
        return t[None, None]
    if t.dim() == 3:
        return t[None]
    if t.dim() == 4:
        return t
    return t.reshape(-1, *t.shape[-3:])


def _launch(
    x: torch.Tensor, positions: torch.Tensor | None, offset: int, params: torch.Tensor, rotary_dim: int,
    interleaved: bool, sign: float,
) -> torch.Tensor:
    if x.stride(-1) != 1:
        x = x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    x4, o4 = _as_four_dims(x), _as_four_dims(out)
    batch, heads, seq, head_dim = x4.shape
    if positions is None:
        spb = sps = 0
        pos_arg = params  # not read (HAS_POS is False); any pointer of the right device
    else:
        if positions.dim() == 1:
            spb, sps = 0, positions.stride(0)
        else:
            spb, sps = positions.stride(0), positions.stride(1)
        pos_arg = positions
    block = min(BLOCK_S, triton.next_power_of_2(seq))
    blocks = triton.cdiv(seq, block)
    groups = min(heads, max(1, triton.cdiv(MIN_PROGRAMS, blocks * batch)))
    heads_per_program = triton.cdiv(heads, groups)
    groups = triton.cdiv(heads, heads_per_program)
    half = rotary_dim // 2
    rest = head_dim - rotary_dim
    _kernel(interpreted())[(blocks, batch, groups)](
        x4, o4, pos_arg, params, offset, sign, heads, seq, heads_per_program,
        x4.stride(0), x4.stride(1), x4.stride(2), o4.stride(0), o4.stride(1), o4.stride(2), spb, sps,
        ROT_HALF=half, HEAD_DIM=head_dim, BLOCK=block, BLOCK_P=triton.next_power_of_2(half),
        BLOCK_R=triton.next_power_of_2(rest) if rest else 1, INTERLEAVED=interleaved, HAS_POS=positions is not None,
        WIDE=x.dtype == torch.float64,
    )
    return out


class _FusedRope(torch.autograd.Function):
    """The kernel with its gradient: RoPE is a rotation (times the attention factor), so the gradient of ``x`` is
    the upstream gradient rotated back, by the same kernel with the sine negated."""

    @staticmethod
    def forward(ctx, x, positions, offset, params, rotary_dim, interleaved):  # type: ignore[override]
        ctx.save_for_backward(*(() if positions is None else (positions,)), params)
        ctx.has_positions, ctx.offset, ctx.rotary_dim, ctx.interleaved = positions is not None, offset, rotary_dim, \
            interleaved
        return _launch(x, positions, offset, params, rotary_dim, interleaved, 1.0)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        saved = ctx.saved_tensors
        positions, params = (saved[0], saved[1]) if ctx.has_positions else (None, saved[0])
        grad_x = _launch(grad, positions, ctx.offset, params, ctx.rotary_dim, ctx.interleaved, -1.0)
        return grad_x, None, None, None, None, None


def rotate(
    x: torch.Tensor, positions: torch.Tensor | None, offset: int, params: torch.Tensor, rotary_dim: int,
    interleaved: bool,
) -> torch.Tensor:
    """RoPE of ``x`` (``(..., seq, head_dim)``, floating) in one pass.

    ``positions``: ``None`` (rows ``offset, offset + 1, ...``), a ``(seq,)`` tensor or a ``(batch, seq)`` one for 4-D
    ``x``, integer or float32/float64, on ``x``'s device. ``params``: float64 on ``x``'s device, the
    ``rotary_dim // 2`` frequencies followed by the attention factor. The caller has checked the shapes; nothing
    here reads a value back to the host."""
    if torch.is_grad_enabled() and x.requires_grad:
        return _FusedRope.apply(x, positions, offset, params, rotary_dim, interleaved)
    return _launch(x, positions, offset, params, rotary_dim, interleaved, 1.0)
