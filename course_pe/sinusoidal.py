"""Sinusoidal positional encoding (Vaswani et al., 2017, section 3.5).

Conventions used throughout the course
--------------------------------------
* ``p`` is a position (0, 1, 2, ...), ``d_model`` the (even) model width.
* ``i`` is a *pair index*, ``i = 0 ... d_model/2 - 1``. Pair ``i`` has angular frequency

  .. math:: \\omega_i = \\text{base}^{-2i/d_\\text{model}},

  so pair 0 is the fastest (wavelength ``2*pi``) and pair ``d_model/2 - 1`` the slowest
  (wavelength ``2*pi*base**((d_model-2)/d_model)``, just under ``2*pi*base``).
* Layout ``"interleaved"`` (the paper's): ``PE[p, 2i] = sin(p*w_i)``, ``PE[p, 2i+1] = cos(p*w_i)``.
* Layout ``"half"``: all sines first, then all cosines: ``PE[p, i] = sin(p*w_i)``,
  ``PE[p, d/2 + i] = cos(p*w_i)``, so pair ``i`` owns dimensions ``(i, i + d/2)``, the same
  arrangement as RoPE's half layout (``course_pe.layout_permutation(d, to="half")`` maps one to the
  other). Same numbers, different order; tensor2tensor and fairseq use it (with their own frequency
  spacing), so two "sinusoidal" tables from different code bases need not agree. The layout was called
  ``"blocks"`` in earlier versions of the course; that name is refused with a ``ValueError`` that names
  ``"half"``.

Everything is computed in float64 and cast at the end, so float32 tables are correctly rounded.
"""

from __future__ import annotations

import math
import numbers
from typing import Literal

import numpy as np
import torch
from torch import nn

from ._validation import (
    check_bool,
    check_choice,
    check_device,
    check_dtype,
    check_even,
    check_float,
    check_last_dim,
    check_nonnegative_int,
    check_positive_float,
    check_positive_int,
    check_probability,
    check_tensor,
)
from ._validation import check_memory, numel

SinusoidalLayout = Literal["interleaved", "half"]
SINUSOIDAL_LAYOUTS: tuple[str, ...] = ("interleaved", "half")
#: Former layout names, refused with a message naming the current one.
_RENAMED_LAYOUTS = {"blocks": "half"}
#: :class:`SinusoidalPositionalEncoding` keeps at most ``max(max_len, CACHE_LIMIT)`` rows; rows beyond are
#: computed for the call and not kept (one call at a huge offset must not leave a huge buffer behind).
CACHE_LIMIT = 8192

__all__ = [
    "SINUSOIDAL_LAYOUTS",
    "SinusoidalPositionalEncoding",
    "shift_matrix",
    "sinusoidal_encoding",
    "sinusoidal_encoding_np",
    "sinusoidal_frequencies",
    "sinusoidal_wavelengths",
]


#: Largest position a table row may encode: float64 holds every integer up to ``2**53`` exactly (the angles of such
#: positions are accurate only to ``2 p w_i 2**-53`` rad: see :func:`sinusoidal_encoding_np`).
MAX_POSITION = 2**53


def _check_table(num_positions: int, d_model: int, start: int, name: str = "num_positions") -> None:
    """Refuse positions past :data:`MAX_POSITION` and tables larger than the memory budget (before allocating)."""
    if start + num_positions - 1 > MAX_POSITION:
        raise ValueError(
            f"start + num_positions - 1 must be <= 2**53 (float64 holds every integer up to there; 2**53 + 1 would be "
            f"encoded as 2**53), got start={start}, num_positions={num_positions}"
        )
    # float64 positions, angles, sines, cosines and the table, then a cast: about 5 float64 values per entry
    check_memory(name, 5 * 8 * numel(num_positions, d_model), f"a {num_positions} x {d_model} table")


def _check_layout(layout: object) -> str:
    """Return ``layout`` if it is one of :data:`SINUSOIDAL_LAYOUTS`; refuse a former name with its new one."""
    if isinstance(layout, str) and layout in _RENAMED_LAYOUTS:
        new = _RENAMED_LAYOUTS[layout]
        raise ValueError(
            f"layout {layout!r} is now called {new!r} (sines in dimensions 0 ... d/2-1, cosines in d/2 ... d-1, "
            f"pair i at (i, i + d/2), as in RoPE's half layout); pass layout={new!r}"
        )
    return check_choice("layout", layout, SINUSOIDAL_LAYOUTS)


def sinusoidal_frequencies(d_model: int, *, base: float = 10000.0) -> np.ndarray:
    """Angular frequencies ``w_i = base**(-2i/d_model)`` for ``i = 0 ... d_model/2 - 1``.

    Returns a float64 array of shape ``(d_model // 2,)``, decreasing from 1 (constant 1 when ``base == 1``).
    ``d_model`` is a positive even Python/NumPy integer, ``base`` a finite real number > 0.
    """
    d_model = check_even("d_model", d_model)
    base = check_positive_float("base", base)
    check_memory("d_model", 4 * 8 * (d_model // 2), f"{d_model // 2} frequencies")
    i = np.arange(d_model // 2, dtype=np.float64)
    return base ** (-2.0 * i / d_model)


def sinusoidal_wavelengths(d_model: int, *, base: float = 10000.0) -> np.ndarray:
    """Wavelengths ``2*pi / w_i`` in positions, float64 of shape ``(d_model // 2,)``.

    The longest is ``2*pi*base**((d_model - 2)/d_model)``, not ``2*pi*base``.
    """
    return 2.0 * math.pi / sinusoidal_frequencies(d_model, base=base)


def sinusoidal_encoding_np(
    num_positions: int,
    d_model: int,
    *,
    base: float = 10000.0,
    layout: SinusoidalLayout = "interleaved",
    start: int = 0,
) -> np.ndarray:
    """NumPy float64 twin of :func:`sinusoidal_encoding`, for worked examples.

    Returns an array of shape ``(num_positions, d_model)`` for positions
    ``start, start + 1, ..., start + num_positions - 1`` (integers ``num_positions >= 1``, ``start >= 0``, the last
    position at most ``2**53``: float64 holds every integer up to there, and beyond it ``2**53 + 1`` would be
    encoded as ``2**53``). The position is exact, its angles are not: ``p w_i`` is a float64 product of ``p`` and
    a rounded ``w_i``, within ``2 p w_i 2**-53`` rad of the exact angle (the largest error of
    :mod:`course_pe.rope`'s note: 0.51 rad at ``2**53 - 1``).
    """
    num_positions = check_positive_int("num_positions", num_positions)
    start = check_nonnegative_int("start", start)
    _check_layout(layout)
    omega = sinusoidal_frequencies(d_model, base=base)
    _check_table(num_positions, d_model, start)
    p = np.arange(start, start + num_positions, dtype=np.float64)[:, None]
    angles = p * omega[None, :]  # (num_positions, d_model/2)
    table = np.empty((num_positions, d_model), dtype=np.float64)
    if layout == "interleaved":
        table[:, 0::2] = np.sin(angles)
        table[:, 1::2] = np.cos(angles)
    else:
        half = d_model // 2
        table[:, :half] = np.sin(angles)
        table[:, half:] = np.cos(angles)
    return table


def sinusoidal_encoding(
    num_positions: int,
    d_model: int,
    *,
    base: float = 10000.0,
    layout: SinusoidalLayout = "interleaved",
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
    start: int = 0,
) -> torch.Tensor:
    """The sinusoidal table, shape ``(num_positions, d_model)``.

    Row ``r`` is the encoding of position ``start + r``. Computed in float64, then cast to
    ``dtype``. See the module docstring for the two layouts.

    ``dtype`` must be a floating dtype (float16, bfloat16, float32 or float64): an integer table would
    be rounded to zeros and ones, so it is refused.

    Raises:
        ValueError: if ``d_model`` is odd or not positive, ``num_positions < 1``,
            ``base <= 0`` or ``layout`` is unknown.
        TypeError: for a non-integer size, a non-floating ``dtype`` or a malformed ``device``.
    """
    check_dtype("dtype", dtype, "floating")
    device = check_device("device", device)
    table = sinusoidal_encoding_np(num_positions, d_model, base=base, layout=layout, start=start)
    return torch.from_numpy(table).to(dtype=dtype, device=device)


def shift_matrix(
    k: int | float,
    d_model: int,
    *,
    base: float = 10000.0,
    layout: SinusoidalLayout = "interleaved",
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """The matrix ``M_k`` with ``PE(p + k) = M_k @ PE(p)`` for every position ``p``.

    ``M_k`` is block-diagonal: pair ``i`` is acted on by the 2x2 matrix
    ``[[cos(k w_i), sin(k w_i)], [-sin(k w_i), cos(k w_i)]]``, which is ``R(-k w_i)`` with the course's
    counter-clockwise rotation ``R(a) = [[cos a, -sin a], [sin a, cos a]]``: the table stores each pair as
    ``(sin, cos)``, and in that order a step forward turns the point clockwise (in ``(cos, sin)`` order it
    would be ``R(k w_i)``).
    It depends on the offset ``k`` only, never on ``p``. ``k`` may be negative or fractional.

    Returns a ``(d_model, d_model)`` tensor (float64 by default; ``dtype`` must be floating) in the given
    layout. ``k`` is a finite real Python/NumPy number (not a bool, not a tensor) with ``|k| <= 2**53``
    (:data:`MAX_POSITION`, as for positions: beyond it float64 cannot hold every integer, so ``2**53 + 1`` would
    give the matrix of ``2**53``). The angles ``k w_i`` are formed in float64, within ``2 |k w_i| 2**-53`` rad of
    the exact ones (the precision note of :mod:`course_pe.rope`).
    """
    _check_layout(layout)
    if isinstance(k, numbers.Integral) and not isinstance(k, (bool, np.bool_)) and abs(int(k)) > MAX_POSITION:
        # checked before the conversion to float, which would round 2**53 + 1 to 2**53
        raise ValueError(f"k must lie in [-2**53, 2**53] (float64 holds every integer there exactly; beyond, "
                         f"neighbouring offsets round to the same matrix), got {k}")
    k = check_float("k", k)
    if abs(k) > MAX_POSITION:
        raise ValueError(f"k must lie in [-2**53, 2**53] (float64 holds every integer there exactly; beyond, "
                         f"neighbouring offsets round to the same matrix), got {k!r}")
    check_dtype("dtype", dtype, "floating")
    omega = sinusoidal_frequencies(d_model, base=base)
    check_memory("d_model", 3 * 8 * numel(d_model, d_model), f"a {d_model} x {d_model} matrix")
    c, s = np.cos(k * omega), np.sin(k * omega)
    half = d_model // 2
    m = np.zeros((d_model, d_model), dtype=np.float64)
    idx = np.arange(half)
    if layout == "interleaved":
        sin_idx, cos_idx = 2 * idx, 2 * idx + 1
    else:
        sin_idx, cos_idx = idx, half + idx
    # sin((p+k)w) =  cos(kw) sin(pw) + sin(kw) cos(pw)
    # cos((p+k)w) = -sin(kw) sin(pw) + cos(kw) cos(pw)
    m[sin_idx, sin_idx] = c
    m[sin_idx, cos_idx] = s
    m[cos_idx, sin_idx] = -s
    m[cos_idx, cos_idx] = c
    return torch.from_numpy(m).to(dtype)


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the sinusoidal table to batch-first inputs.

    ``forward(x)`` with ``x`` of shape ``(batch, seq, d_model)`` returns
    ``dropout(scale * x + PE[offset : offset + seq])`` where ``scale`` is ``sqrt(d_model)``
    if ``scale_embeddings`` else 1 (Vaswani et al. multiply the token embeddings by
    ``sqrt(d_model)`` and apply dropout to the sum).

    The table is a non-persistent buffer (it is a function of the arguments, so it is not
    saved in ``state_dict``), kept in float64 and rounded once to the input's dtype. It grows on demand up to ``max(max_len, CACHE_LIMIT)`` rows; rows
    beyond are computed for the call only. Sinusoidal encodings are defined for every
    position, so a longer input is not an error (whether the *model* copes is another
    matter; see Part III). ``x`` must be a floating tensor; the output has its dtype.

    Args:
        d_model: model width (even).
        max_len: initial number of cached positions.
        base: the ``10000`` of the formula.
        layout: ``"interleaved"`` or ``"half"``.
        scale_embeddings: multiply ``x`` by ``sqrt(d_model)`` before adding.
        dropout: dropout probability applied to the sum (only in training mode).
    """

    pe: torch.Tensor

    def __init__(
        self,
        d_model: int,
        max_len: int = 512,
        *,
        base: float = 10000.0,
        layout: SinusoidalLayout = "interleaved",
        scale_embeddings: bool = False,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.d_model = check_even("d_model", d_model)
        self.base = check_positive_float("base", base)
        self.layout = _check_layout(layout)
        self.scale_embeddings = check_bool("scale_embeddings", scale_embeddings)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        max_len = check_positive_int("max_len", max_len)
        self.cache_limit = max(max_len, CACHE_LIMIT)
        if max_len - 1 > MAX_POSITION:
            raise ValueError(f"max_len must be <= 2**53 + 1 (positions stay exact in float64), got {max_len}")
        _check_table(max_len, self.d_model, 0, name="max_len and d_model")
        self.register_buffer("pe", self._table(max_len), persistent=False)

    def _table(self, length: int, device: torch.device | None = None) -> torch.Tensor:
        return sinusoidal_encoding(
            length, self.d_model, base=self.base, layout=self.layout, dtype=torch.float64, device=device
        )

    def encoding(self, length: int, *, offset: int = 0) -> torch.Tensor:
        """Rows ``offset ... offset + length - 1`` of the table, shape ``(length, d_model)`` (float64).

        ``length >= 0`` and ``offset >= 0`` are integers. Rows past the bounded cache are computed on the fly.
        """
        length = check_nonnegative_int("length", length)
        offset = check_nonnegative_int("offset", offset)
        if offset + length - 1 > MAX_POSITION:
            raise ValueError(f"offset + length - 1 must be <= 2**53 (float64 holds every integer up to there), got "
                             f"offset={offset}, length={length}")
        check_memory("length", 6 * 8 * numel(length, self.d_model), f"{length} rows of width {self.d_model}")
        end = offset + length
        if self.pe.dtype != torch.float64:  # e.g. after Module.half(): rebuild rather than use a rounded table
            self.pe = self._table(self.pe.shape[0], device=self.pe.device)
        if end > self.pe.shape[0]:
            if end > self.cache_limit:  # computed for this call only, in proportion to length
                if length == 0:
                    return self.pe[:0]
                return sinusoidal_encoding(
                    length, self.d_model, base=self.base, layout=self.layout, dtype=torch.float64,
                    device=self.pe.device, start=offset,
                )
            self.pe = self._table(end, device=self.pe.device)
        return self.pe[offset:end]

    def forward(self, x: torch.Tensor, *, offset: int = 0) -> torch.Tensor:
        """``x``: floating ``(batch, seq, d_model)`` (``seq`` may be 0); returns the same shape and dtype."""
        check_tensor("x", x, "floating", finite=False)
        if x.dim() != 3:
            raise ValueError(
                f"x must be a batch-first input of shape (batch, seq, d_model), got shape {tuple(x.shape)}"
            )
        check_last_dim("x", x, self.d_model)
        pe = self.encoding(x.shape[1], offset=offset).to(dtype=x.dtype, device=x.device)
        scale = math.sqrt(self.d_model) if self.scale_embeddings else 1.0
        return self.dropout(x * scale + pe.unsqueeze(0))

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, base={self.base}, layout={self.layout!r}, "
            f"scale_embeddings={self.scale_embeddings}"
        )
