"""A small pre-LayerNorm Transformer for the course's experiments.

``TinyTransformer`` is an encoder (bidirectional) or a causal decoder over token ids. Position
information enters in exactly one of these ways, chosen by ``position``:

* absolute, added to the token embeddings: ``"sinusoidal"`` or ``"learned"``;
* inside every attention layer: ``"rope"``, ``"shaw"``, ``"t5"`` or ``"alibi"``;
* not at all: ``"none"`` (a bidirectional model is then blind to order; a causal one can still
  infer position from its mask).

Shapes: ``tokens`` is ``(batch, seq)`` long; logits are ``(batch, seq, num_outputs)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from ._validation import (
    check_bool,
    check_choice,
    check_index_range,
    check_int,
    check_last_dim,
    check_memory,
    check_module_input,
    check_optional_int,
    check_positive_int,
    check_probability,
    check_tensor,
    numel,
)
from .attention import MultiHeadAttention
from .learned import LearnedPositionalEmbedding
from .rope import RopeLayout, RotaryEmbedding
from .rope_scaling import RopeScaling
from .sinusoidal import SinusoidalPositionalEncoding

ModelPosition = Literal["none", "sinusoidal", "learned", "rope", "shaw", "t5", "alibi"]
MODEL_POSITIONS: tuple[str, ...] = ("none", "sinusoidal", "learned", "rope", "shaw", "t5", "alibi")
ABSOLUTE_POSITIONS: tuple[str, ...] = ("sinusoidal", "learned")

__all__ = ["MAX_LAYERS", "MODEL_POSITIONS", "ModelOutput", "TinyTransformer", "TransformerBlock"]

#: Most blocks :class:`TinyTransformer` builds. The course's models have 1 to 6; each block costs about 40 KiB of
#: Python objects and milliseconds to build even when tiny, so a typo of a few zeros would otherwise build for hours.
MAX_LAYERS = 1024
#: Python-object overhead of one block (measured: about 43 KB for a d_model = 8 block), for the memory estimate.
_BLOCK_OVERHEAD_BYTES = 64 * 1024


def _block_bytes(d_model: int, d_ff: int) -> int:
    """Parameters (float32, with their AdamW-free gradients not counted) of one block plus its object overhead."""
    return 4 * (4 * numel(d_model, d_model) + 2 * numel(d_model, d_ff) + 9 * d_model + d_ff) + _BLOCK_OVERHEAD_BYTES


class TransformerBlock(nn.Module):
    """Pre-LN block: ``x + attn(LN(x))`` then ``x + MLP(LN(x))`` (GELU MLP).

    ``d_model``, ``num_heads`` and ``d_ff`` are positive integers; ``forward`` takes a floating
    ``(batch, seq, d_model)`` tensor.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, *, dropout: float = 0.0, **attention_kwargs) -> None:
        super().__init__()
        d_model = check_positive_int("d_model", d_model)
        d_ff = check_positive_int("d_ff", d_ff)
        dropout = check_probability("dropout", dropout)
        check_memory("d_model and d_ff", _block_bytes(d_model, d_ff), f"a block of width {d_model} and MLP {d_ff}")
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, **attention_kwargs)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.drop = nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, *, positions: torch.Tensor | None = None, return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        check_tensor("x", x, "floating", dim=3, finite=False)
        check_last_dim("x", x, self.ln1.normalized_shape[0])
        check_module_input("x", x, self)
        return_weights = check_bool("return_weights", return_weights)
        attn_out, weights = self.attn(self.ln1(x), positions=positions, return_weights=True)
        x = x + self.drop(attn_out)
        x = x + self.drop(self.mlp(self.ln2(x)))
        return (x, weights) if return_weights else x


@dataclass
class ModelOutput:
    """What :meth:`TinyTransformer.forward` returns with ``return_details=True``.

    ``hidden``: per-layer residual streams, ``num_layers + 1`` tensors ``(batch, seq, d_model)``
    (the input to the first block, then each block's output); ``attention``: per-layer weights
    ``(batch, heads, seq, seq)``.
    """

    logits: torch.Tensor
    hidden: list[torch.Tensor]
    attention: list[torch.Tensor]

    def __post_init__(self) -> None:
        check_tensor("logits", self.logits, "floating", dim=3, finite=False)
        for name in ("hidden", "attention"):
            value = getattr(self, name)
            if not isinstance(value, list) or not all(isinstance(t, torch.Tensor) for t in value):
                raise TypeError(f"{name} must be a list of tensors, got {type(value).__name__}")


class TinyTransformer(nn.Module):
    """Token embedding, optional absolute encoding, ``num_layers`` pre-LN blocks, final LN, linear head.

    Args:
        vocab_size: number of token ids; ``tokens`` must be int64 with values in ``0 ... vocab_size - 1``.
        d_model, num_heads, num_layers: model size (the course uses 64, 4, 2).
        d_ff: MLP width (default ``None``: ``4 * d_model``; a 0 is an error, not the default).
        position: see the module docstring.
        causal: causal (decoder) or bidirectional (encoder) self-attention.
        max_positions: rows of the learned table; initial cache of sinusoidal/RoPE.
        num_outputs: size of the output head (default ``None``: ``vocab_size``).
        scale_embeddings: multiply token embeddings by ``sqrt(d_model)`` (Vaswani et al.).
        dropout: dropout rate (0 in the course's experiments).
        rope_*, shaw_max_distance, t5_*: passed to :class:`~course_pe.attention.MultiHeadAttention`.
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        d_model: int = 64,
        num_heads: int = 4,
        num_layers: int = 2,
        d_ff: int | None = None,
        position: ModelPosition = "none",
        causal: bool = False,
        max_positions: int = 512,
        num_outputs: int | None = None,
        scale_embeddings: bool = False,
        dropout: float = 0.0,
        rope_base: float = 10000.0,
        rope_layout: RopeLayout = "interleaved",
        rope_scaling: RopeScaling | None = None,
        shaw_max_distance: int = 16,
        t5_num_buckets: int = 32,
        t5_max_distance: int = 128,
    ) -> None:
        super().__init__()
        self.vocab_size = check_positive_int("vocab_size", vocab_size)
        self.d_model = check_positive_int("d_model", d_model)
        self.position = check_choice("position", position, MODEL_POSITIONS)
        self.causal = check_bool("causal", causal)
        self.max_positions = check_positive_int("max_positions", max_positions)
        check_probability("dropout", dropout)
        scale_embeddings = check_bool("scale_embeddings", scale_embeddings)
        d_ff = check_optional_int("d_ff", d_ff, minimum=1)
        num_outputs = check_optional_int("num_outputs", num_outputs, minimum=1)
        num_heads = check_positive_int("num_heads", num_heads)
        num_layers = check_int("num_layers", num_layers, minimum=1, maximum=MAX_LAYERS)
        # the checked values from here on (a NumPy integer would otherwise show in the modules' reprs)
        vocab_size, d_model, max_positions = self.vocab_size, self.d_model, self.max_positions
        width = 4 * self.d_model if d_ff is None else d_ff
        outputs = self.vocab_size if num_outputs is None else num_outputs
        check_memory(
            "vocab_size, d_model, num_layers, d_ff, num_outputs and max_positions",
            4 * 2 * (numel(self.vocab_size, self.d_model) + numel(self.d_model, outputs + 1)
                     + numel(self.max_positions, self.d_model)) + num_layers * _block_bytes(self.d_model, width),
            f"a model of {num_layers} blocks of width {self.d_model}",
        )
        self.scale = math.sqrt(d_model) if scale_embeddings else 1.0
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.token_embedding.weight, std=0.02 if not scale_embeddings else d_model**-0.5)
        self.absolute: nn.Module | None = None
        if position == "sinusoidal":
            self.absolute = SinusoidalPositionalEncoding(d_model, max_positions)
        elif position == "learned":
            self.absolute = LearnedPositionalEmbedding(max_positions, d_model)
        self.embed_dropout = nn.Dropout(dropout)
        attention_position = position if position not in ABSOLUTE_POSITIONS else "none"
        self.blocks = nn.ModuleList(
            TransformerBlock(
                d_model, num_heads, 4 * d_model if d_ff is None else d_ff, dropout=dropout,
                position=attention_position, causal=causal,
                rope_base=rope_base, rope_layout=rope_layout, rope_scaling=rope_scaling,
                rope_max_positions=max_positions, shaw_max_distance=shaw_max_distance,
                t5_num_buckets=t5_num_buckets, t5_max_distance=t5_max_distance,
            )
            for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size if num_outputs is None else num_outputs)

    def embed(self, tokens: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Token embeddings plus the absolute encoding (if any): ``(batch, seq, d_model)``."""
        if not isinstance(tokens, torch.Tensor):
            raise TypeError(f"tokens must be a (batch, seq) long tensor, got {type(tokens).__name__}")
        if tokens.dim() != 2 or tokens.dtype != torch.long:
            raise ValueError(f"tokens must be a (batch, seq) long tensor, got {tuple(tokens.shape)} {tokens.dtype}")
        check_module_input("tokens", tokens, self, same_dtype=False)
        check_index_range("tokens", tokens, 0, self.vocab_size)
        x = self.token_embedding(tokens) * self.scale
        if isinstance(self.absolute, SinusoidalPositionalEncoding):
            if positions is not None:
                raise ValueError("custom positions are not supported with the sinusoidal table; use offsets")
            x = self.absolute(x)
        elif isinstance(self.absolute, LearnedPositionalEmbedding):
            x = self.absolute(x, positions)
        return self.embed_dropout(x)

    def forward(
        self,
        tokens: torch.Tensor,
        *,
        positions: torch.Tensor | None = None,
        return_details: bool = False,
    ) -> torch.Tensor | ModelOutput:
        """``tokens``: int64 ``(batch, seq)`` in ``0 ... vocab_size - 1``; ``positions`` (learned or RoPE only):
        integer ``(seq,)`` or ``(batch, seq)``."""
        return_details = check_bool("return_details", return_details)
        if positions is not None and self.position not in ("learned", "rope"):
            raise ValueError(f"positions can be given only with learned or rope position, not {self.position!r}")
        x = self.embed(tokens, positions if self.position == "learned" else None)
        hidden, weights = [x], []
        rope_positions = positions if self.position == "rope" else None
        for block in self.blocks:
            x, w = block(x, positions=rope_positions, return_weights=True)
            hidden.append(x)
            weights.append(w)
        logits = self.head(self.final_norm(x))
        if return_details:
            return ModelOutput(logits=logits, hidden=hidden, attention=weights)
        return logits

    def set_rope_scaling(self, scaling: RopeScaling | None) -> None:
        """Replace the RoPE frequency scaling of every attention layer (for context extension).

        The learned weights are untouched; only the rotation changes, as when a pretrained model is run with
        position interpolation, NTK, YaRN or Llama 3.1 scaling (``Llama3Scaling``). Raises if the model does not
        use RoPE.
        """
        if self.position != "rope":
            raise ValueError(f"set_rope_scaling needs a RoPE model, this one uses position={self.position!r}")
        for block in self.blocks:
            old = block.attn.rotary
            assert old is not None
            block.attn.rotary = RotaryEmbedding(
                old.head_dim, base=old.base, max_positions=old.cached_positions, scaling=scaling,
                layout=old.layout, rotary_dim=old.rotary_dim,
            ).to(old.inv_freq.device)

    def extra_repr(self) -> str:
        return f"position={self.position!r}, causal={self.causal}"
