"""Small argument checks shared by every module.

Each check raises :class:`ValueError` (or :class:`TypeError` for a wrong type) with a
message that names the argument and the value it received, so a student who passes an
odd ``d_model`` or a wrong layout learns what went wrong from the message alone.
"""

from __future__ import annotations

from collections.abc import Iterable
import numbers

import torch


def check_positive_int(name: str, value: object) -> int:
    """Return ``value`` as an ``int`` if it is an integer >= 1, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


def check_nonnegative_int(name: str, value: object) -> int:
    """Return ``value`` as an ``int`` if it is an integer >= 0, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return int(value)


def check_even(name: str, value: object) -> int:
    """Return ``value`` if it is a positive even integer, else raise.

    Sinusoidal encodings and RoPE work on *pairs* of dimensions, so their width must be even.
    """
    value = check_positive_int(name, value)
    if value % 2:
        raise ValueError(
            f"{name} must be even (dimensions come in (sin, cos) or rotation pairs), got {value}"
        )
    return value


def check_positive_float(name: str, value: object) -> float:
    """Return ``value`` as a ``float`` if it is a finite number > 0, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{name} must be a finite number > 0, got {value}")
    return value


def check_choice(name: str, value: object, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise naming the valid options."""
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; expected one of {', '.join(map(repr, choices))}")
    return value  # type: ignore[return-value]


def check_probability(name: str, value: object) -> float:
    """Return ``value`` if it is a number in [0, 1), else raise (used for dropout rates)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value}")
    return value


def check_last_dim(name: str, x: torch.Tensor, size: int) -> None:
    """Raise if the last dimension of ``x`` is not ``size``."""
    if x.dim() == 0 or x.shape[-1] != size:
        raise ValueError(f"{name} must have last dimension {size}, got shape {tuple(x.shape)}")
