"""Tools for checking how a sequence model reacts to reordering its input.

A function ``f`` from sequences ``(seq, d)`` to sequences is *permutation-equivariant* if
``f(P X) = P f(X)`` for every permutation matrix ``P`` (reordering the input reorders the output
the same way), and a function to a single vector is *permutation-invariant* if ``g(P X) = g(X)``.
Self-attention without position information is equivariant, not invariant.

All helpers accept batch-first tensors ``(batch, seq, d)`` and permute the ``seq`` axis.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ._validation import check_positive_int

__all__ = [
    "equivariance_error",
    "invariance_error",
    "permutation_matrix",
    "permute_sequence",
    "random_permutation",
]


def random_permutation(n: int, *, generator: torch.Generator | None = None, derangement: bool = True) -> torch.Tensor:
    """A random permutation of ``0 ... n-1`` as a long tensor.

    With ``derangement=True`` (and ``n > 1``) no element stays in place, so a test using it cannot
    pass by accident on fixed points.
    """
    n = check_positive_int("n", n)
    while True:
        perm = torch.randperm(n, generator=generator)
        if not derangement or n == 1 or bool((perm != torch.arange(n)).all()):
            return perm


def permutation_matrix(perm: torch.Tensor, *, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The ``(n, n)`` matrix ``P`` with ``(P @ X)[r] = X[perm[r]]``."""
    n = perm.numel()
    if perm.dim() != 1 or not torch.equal(perm.sort().values, torch.arange(n)):
        raise ValueError(f"perm must be a permutation of 0 ... n-1, got {perm.tolist()}")
    p = torch.zeros(n, n, dtype=dtype)
    p[torch.arange(n), perm] = 1
    return p


def permute_sequence(x: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """Reorder the sequence axis of ``x`` (``(seq, ...)`` or ``(batch, seq, ...)``; dim -2 if 2-D+)."""
    if x.dim() < 2:
        raise ValueError(f"x must have a sequence axis, got shape {tuple(x.shape)}")
    axis = 0 if x.dim() == 2 else 1
    if x.shape[axis] != perm.numel():
        raise ValueError(f"perm has {perm.numel()} entries but the sequence axis has {x.shape[axis]}")
    return x.index_select(axis, perm.to(x.device))


def equivariance_error(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, perm: torch.Tensor) -> float:
    """``max |f(P X) - P f(X)|``: zero (up to rounding) for an equivariant ``f``."""
    with torch.no_grad():
        return float((f(permute_sequence(x, perm)) - permute_sequence(f(x), perm)).abs().max())


def invariance_error(g: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, perm: torch.Tensor) -> float:
    """``max |g(P X) - g(X)|``: zero (up to rounding) for an invariant ``g``."""
    with torch.no_grad():
        return float((g(permute_sequence(x, perm)) - g(x)).abs().max())
