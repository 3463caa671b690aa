"""Determinism for notebooks and tests: one call fixes seeds, threads and algorithms.

Printed digits depend on the number of threads (float32 sums are reordered), so notebooks call
:func:`set_determinism` first. Data generators take their own ``torch.Generator``.
"""

from __future__ import annotations

import os
import random

import numpy as np
import torch

__all__ = ["make_generator", "set_determinism"]


def set_determinism(seed: int = 0, *, threads: int | None = None) -> None:
    """Seed Python, NumPy and torch, force deterministic algorithms and fix the thread count.

    ``threads`` defaults to the ``COURSE_PE_THREADS`` environment variable, else 2 (what ``make`` uses, so that
    the stored outputs are reproduced digit for digit; runs with the same thread count are bit-identical).
    """
    if threads is None:
        threads = int(os.environ.get("COURSE_PE_THREADS", "2"))
    torch.set_num_threads(threads)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    np.set_printoptions(precision=4, suppress=True, legacy="1.25")
    torch.set_printoptions(precision=4, sci_mode=False)


def make_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A ``torch.Generator`` seeded with ``seed`` (for data that must not depend on model init)."""
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g
