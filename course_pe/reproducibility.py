"""Determinism for notebooks and tests: one call fixes seeds, threads and algorithms.

Printed digits depend on the number of threads (float32 sums are reordered), so notebooks call
:func:`set_determinism` first. Data generators take their own ``torch.Generator``.
"""

from __future__ import annotations

import numbers
import os
import random

import numpy as np
import torch

from ._validation import check_device, check_int

__all__ = ["MAX_STORED_SIGNIFICANT_DIGITS", "glue", "make_generator", "rounded", "set_determinism"]


def set_determinism(seed: int = 0, *, threads: int | None = None) -> None:
    """Seed Python, NumPy and torch, force deterministic algorithms and fix the thread count.

    ``threads`` defaults to the ``COURSE_PE_THREADS`` environment variable, else 1 (what ``make`` uses; runs with the
    same thread count are bit-identical, and stored outputs are rounded so that they do not depend on it).
    ``seed`` is an integer in ``0 ... 2**32 - 1`` (NumPy's range), ``threads`` None or a positive integer.
    """
    seed = check_int("seed", seed, minimum=0, maximum=2**32 - 1)  # a NumPy integer becomes an int
    if threads is None:
        threads = int(os.environ.get("COURSE_PE_THREADS", "1"))
    threads = check_int("threads", threads, minimum=1, maximum=4096)  # torch overflows past int32
    torch.set_num_threads(threads)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    np.set_printoptions(precision=4, suppress=True, legacy="1.25")
    torch.set_printoptions(precision=4, sci_mode=False)


def make_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A ``torch.Generator`` seeded with ``seed`` (an integer in ``0 ... 2**63 - 1``; for data that must not
    depend on model init)."""
    seed = check_int("seed", seed, minimum=0, maximum=2**63 - 1)
    device = check_device("device", device)
    if device.type == "meta":
        raise ValueError("device='meta' has no random numbers: a torch.Generator needs a real device (cpu, cuda, ...)")
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


# Portability policy (README, "Changing a chapter"): a number stored in a notebook output, printed or glued, carries
# at most this many significant digits. Another CPU, BLAS kernel or thread count changes the low-order digits of a
# float computation; six significant digits of a float64 result are stable, and the book's text uses fewer.
MAX_STORED_SIGNIFICANT_DIGITS = 6


def rounded(value, digits: int | None = None, *, sig: int | None = None):
    """``value`` rounded for storage in a notebook: to ``digits`` decimals, or to ``sig`` significant digits.

    Floats (Python, NumPy or 0-d torch scalars) become Python ``float``; lists and tuples are rounded element-wise;
    ints, bools and strings are returned unchanged. Exactly one of ``digits`` and ``sig`` must be given when the
    value contains a float. Raises ``ValueError`` for a bad rounding request and ``TypeError`` for values that are
    neither numbers, strings nor lists/tuples of them.
    """
    if digits is not None and sig is not None:
        raise ValueError("rounded: give digits or sig, not both")
    if sig is not None and (isinstance(sig, (bool, np.bool_)) or not isinstance(sig, numbers.Integral) or sig < 1):
        raise ValueError(f"rounded: sig must be a positive int, got {sig!r}")
    if digits is not None and (isinstance(digits, (bool, np.bool_)) or not isinstance(digits, numbers.Integral)):
        raise ValueError(f"rounded: digits must be an int, got {digits!r}")
    digits = None if digits is None else int(digits)  # a NumPy integer works as the int it holds
    sig = None if sig is None else int(sig)
    if isinstance(value, (list, tuple)):
        return type(value)(rounded(v, digits, sig=sig) for v in value)
    if isinstance(value, (bool, int, str, np.integer, np.bool_)):
        return value.item() if isinstance(value, (np.integer, np.bool_)) else value
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise TypeError(f"rounded: value must be a scalar, got a tensor of shape {tuple(value.shape)}")
        value = value.item()
        if not isinstance(value, float):
            return value
    if isinstance(value, (float, np.floating)):
        x = float(value)
        if digits is None and sig is None:
            raise ValueError("rounded: a float needs digits= or sig= (see the portability policy in the README)")
        if not np.isfinite(x) or x == 0.0:
            return x
        if sig is not None:
            digits = sig - 1 - int(np.floor(np.log10(abs(x))))
        return float(round(x, digits)) + 0.0  # + 0.0 turns -0.0 into 0.0
    raise TypeError(f"rounded: value must be a number, a str or a list/tuple of them; cannot round a {type(value).__name__}")


def glue(name: str, value, *, digits: int | None = None, sig: int | None = None, display: bool = False):
    """``myst_nb.glue`` after :func:`rounded`, so the stored record reproduces on any machine.

    Use ``digits``/``sig`` matching the precision the text shows (a prose ``{glue:text}`` with ``:.3f`` wants
    ``digits=3``). Floats must be rounded; ints and strings pass through.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {type(name).__name__} {name!r}")
    from myst_nb import glue as _glue

    _glue(name, rounded(value, digits, sig=sig), display=display)
