"""Tools for checking how a sequence model reacts to reordering its input.

A function ``f`` from sequences ``(seq, d)`` to sequences is *permutation-equivariant* if
``f(P X) = P f(X)`` for every permutation matrix ``P`` (reordering the input reorders the output
the same way), and a function to a single vector is *permutation-invariant* if ``g(P X) = g(X)``.
Self-attention without position information is equivariant, not invariant.

All helpers permute the sequence axis, which is dim -2: ``(seq, d)``, batch-first ``(batch, seq, d)``
and attention-style ``(batch, heads, seq, head_dim)`` tensors alike.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ._validation import (
    check_bool,
    check_dtype,
    check_generator,
    check_memory,
    check_positive_int,
    check_tensor,
    numel,
    require_values,
)


def _check_perm(perm: object) -> torch.Tensor:
    """``perm`` as an int64 tensor (a uint8 index tensor would be read by PyTorch as a boolean mask)."""
    check_tensor("perm", perm, "integer", dim=1)
    require_values("perm", perm)
    n = perm.numel()
    perm = perm.long()
    if not torch.equal(perm.sort().values.cpu(), torch.arange(n)):
        raise ValueError(f"perm must be a permutation of 0 ... n-1, got {perm.tolist()[:64]}")
    return perm

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
    pass by accident on fixed points. ``n`` is a positive integer, ``generator`` None or a
    ``torch.Generator``.
    """
    n = check_positive_int("n", n)
    check_generator("generator", generator)
    derangement = check_bool("derangement", derangement)
    check_memory("n", 4 * 8 * n, f"a permutation of {n} elements")
    while True:
        perm = torch.randperm(n, generator=generator)
        if not derangement or n == 1 or bool((perm != torch.arange(n)).all()):
            return perm


def permutation_matrix(perm: torch.Tensor, *, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The ``(n, n)`` matrix ``P`` with ``(P @ X)[r] = X[perm[r]]``.

    ``perm``: a 1-D integer tensor holding a permutation of ``0 ... n-1``; ``dtype`` a floating dtype.
    """
    perm = _check_perm(perm)
    check_dtype("dtype", dtype, "floating")
    n = perm.numel()
    check_memory("perm", numel(n, n) * dtype.itemsize, f"a {n} x {n} matrix")
    p = torch.zeros(n, n, dtype=dtype)
    p[torch.arange(n), perm] = 1
    return p


def permute_sequence(x: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """Reorder the sequence axis of ``x``: dim -2 of ``(seq, d)``, ``(batch, seq, d)`` or
    ``(batch, heads, seq, head_dim)`` (a tensor of any dtype); ``perm`` as in :func:`permutation_matrix`.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a tensor, got {type(x).__name__}")
    if x.dim() < 2:
        raise ValueError(f"x must have a sequence axis, got shape {tuple(x.shape)}")
    perm = _check_perm(perm)
    axis = x.dim() - 2
    if x.shape[axis] != perm.numel():
        raise ValueError(f"perm has {perm.numel()} entries but x has {x.shape[axis]} positions on its sequence axis (dim -2)")
    return x.index_select(axis, perm.to(x.device))


def equivariance_error(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, perm: torch.Tensor) -> float:
    """``max |f(P X) - P f(X)|``: zero (up to rounding) for an equivariant ``f``.

    ``f`` maps a tensor to a tensor of the same sequence length; ``x`` is a floating tensor with a
    sequence axis at dim -2. An empty sequence gives 0.0.
    """
    if not callable(f):
        raise TypeError(f"f must be callable, got {type(f).__name__}")
    check_tensor("x", x, "floating", min_dim=2, finite=False)
    require_values("x", x)  # the error is a number computed from f's outputs
    with torch.no_grad():
        permuted_out = _tensor_result("f(permuted x)", f(permute_sequence(x, perm)))
        out = _tensor_result("f(x)", f(x))
        if out.dim() < 2 or out.shape[-2] != x.shape[-2]:
            raise ValueError(
                f"f must keep the sequence axis (dim -2) of x, of length {x.shape[-2]}; f(x) has shape {tuple(out.shape)}"
            )
        expected = permute_sequence(out, perm)
        return _max_abs_difference(permuted_out, expected)


def invariance_error(g: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, perm: torch.Tensor) -> float:
    """``max |g(P X) - g(X)|``: zero (up to rounding) for an invariant ``g``.

    ``g`` maps a tensor to a tensor; ``x`` is a floating tensor with a sequence axis at dim -2.
    """
    if not callable(g):
        raise TypeError(f"g must be callable, got {type(g).__name__}")
    check_tensor("x", x, "floating", min_dim=2, finite=False)
    require_values("x", x)
    with torch.no_grad():
        permuted_out = _tensor_result("g(permuted x)", g(permute_sequence(x, perm)))
        return _max_abs_difference(permuted_out, _tensor_result("g(x)", g(x)))


def _tensor_result(name: str, value: object) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must return a tensor, got {type(value).__name__}")
    return value


def _max_abs_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:  # never broadcast one output against the other
        raise ValueError(f"the two outputs have different shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.numel() == 0:
        return 0.0
    return float((a - b).abs().max())
