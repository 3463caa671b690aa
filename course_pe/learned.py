"""Learned absolute position embeddings (as in BERT and GPT-2).

A learned table is an ``nn.Parameter`` of shape ``(max_positions, d_model)``: row ``p`` is the
vector added to the token at position ``p``. Unlike the sinusoidal table it has no value for
positions it was not given, so asking for position ``max_positions`` or beyond is an error.
:meth:`LearnedPositionalEmbedding.interpolate` stretches a table to a new length by linear
interpolation (the absolute-embedding analogue of RoPE position interpolation).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ._validation import (
    check_generator,
    check_index_range,
    check_last_dim,
    check_memory,
    check_module_input,
    check_positive_float,
    check_positive_int,
    check_tensor,
    numel,
)

__all__ = ["LearnedPositionalEmbedding"]


class LearnedPositionalEmbedding(nn.Module):
    """A trainable table of position vectors, added to batch-first inputs.

    Args:
        max_positions: number of rows (positions ``0 ... max_positions - 1``).
        d_model: width of each row (any positive integer).
        init_std: rows are initialised from ``N(0, init_std**2)`` (0.02, as BERT and Hugging Face's GPT-2 do;
            OpenAI's released GPT-2 code starts its position table at 0.01).
        generator: optional ``torch.Generator`` for a reproducible initialisation.

    Shapes:
        ``lookup(positions)``: ``positions`` is an integer tensor (not bool, not floating) of any shape ``S``
        with values in ``0 ... max_positions - 1``; returns ``S + (d_model,)``.
        ``forward(x, positions=None)``: ``x`` is a floating ``(batch, seq, d_model)``; ``positions`` is ``None``
        (``0 ... seq - 1``), ``(seq,)`` or ``(batch, seq)``; returns ``x + table[positions]``.
    """

    def __init__(
        self,
        max_positions: int,
        d_model: int,
        *,
        init_std: float = 0.02,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.max_positions = check_positive_int("max_positions", max_positions)
        self.d_model = check_positive_int("d_model", d_model)
        self.init_std = check_positive_float("init_std", init_std)
        check_generator("generator", generator)
        # the draw, its scaled copy and the parameter
        check_memory("max_positions and d_model", 3 * 4 * numel(self.max_positions, self.d_model),
                     f"a {self.max_positions} x {self.d_model} table")
        weight = torch.randn(self.max_positions, self.d_model, generator=generator) * self.init_std
        self.weight = nn.Parameter(weight)

    def _check_positions(self, positions: torch.Tensor) -> None:
        check_tensor("positions", positions, "integer")
        if positions.numel() == 0:
            return
        check_index_range("positions", positions, 0, None)
        high = int(positions.max())
        if high >= self.max_positions:
            raise ValueError(
                f"position {high} is outside this learned table, which has max_positions="
                f"{self.max_positions} (positions 0 ... {self.max_positions - 1}); a learned table "
                f"has no row for unseen positions. Use .interpolate(new_max_positions) to stretch it, "
                f"and expect to fine-tune afterwards."
            )

    def lookup(self, positions: torch.Tensor) -> torch.Tensor:
        """Rows of the table for integer ``positions`` (any shape; uint8 ... int64); gradients flow to ``weight``.
        The result, ``positions.shape + (d_model,)``, must fit the memory budget."""
        self._check_positions(positions)
        # the int64 indices and the rows gathered, in the table's dtype
        rows = numel(positions.numel(), self.d_model) * self.weight.element_size()
        check_memory("positions", 8 * positions.numel() + rows, f"{positions.numel()} rows of width {self.d_model}")
        # int64 for indexing: PyTorch reads a uint8 index tensor as a boolean mask, not as row numbers
        return self.weight[positions.to(device=self.weight.device, dtype=torch.long)]

    def forward(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        check_tensor("x", x, "floating", finite=False)
        if x.dim() != 3:
            raise ValueError(
                f"x must be a batch-first input of shape (batch, seq, d_model), got shape {tuple(x.shape)}"
            )
        check_last_dim("x", x, self.d_model)
        check_module_input("x", x, self, same_dtype=False)  # any floating dtype: the rows are cast to x's
        batch, seq, _ = x.shape
        if positions is None:
            positions = torch.arange(seq, device=x.device)
        check_tensor("positions", positions, "integer")
        if positions.shape not in ((seq,), (batch, seq)):
            raise ValueError(
                f"positions must have shape ({seq},) or ({batch}, {seq}) for x of shape "
                f"{tuple(x.shape)}, got {tuple(positions.shape)}"
            )
        return x + self.lookup(positions).to(x.dtype)

    @torch.no_grad()
    def interpolate(self, new_max_positions: int) -> "LearnedPositionalEmbedding":
        """A new module whose table is this one linearly interpolated to ``new_max_positions`` rows.

        Row ``j`` of the new table is the value of the old table at fractional position
        ``j * (L - 1) / (L' - 1)`` (the first and last rows are kept exactly). The same length gives
        an identical table. The new module is independent of this one (its own parameter).
        """
        new_max_positions = check_positive_int("new_max_positions", new_max_positions)
        check_memory("new_max_positions", 6 * 4 * numel(new_max_positions, self.d_model),
                     f"a {new_max_positions} x {self.d_model} table")
        if new_max_positions == self.max_positions:
            table = self.weight.detach().clone()
        elif self.max_positions == 1 or new_max_positions == 1:
            raise ValueError(
                f"new_max_positions must be >= 2 to change the length of a table of {self.max_positions} rows "
                "(interpolation needs at least two positions in the old and the new table)"
            )
        else:
            # F.interpolate works on (batch, channels, length): channels = d_model.
            table = F.interpolate(
                self.weight.detach().T.unsqueeze(0),
                size=new_max_positions,
                mode="linear",
                align_corners=True,
            )[0].T.contiguous()
        new = LearnedPositionalEmbedding(new_max_positions, self.d_model, init_std=self.init_std)
        new.weight.copy_(table)
        return new.to(device=self.weight.device, dtype=self.weight.dtype)

    def extra_repr(self) -> str:
        return f"max_positions={self.max_positions}, d_model={self.d_model}"

