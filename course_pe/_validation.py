"""Small argument checks shared by every module.

Each check raises :class:`ValueError` (or :class:`TypeError` for a wrong type) with a
message that names the argument and the value it received, so a student who passes an
odd ``d_model`` or a wrong layout learns what went wrong from the message alone.
"""

from __future__ import annotations

from collections.abc import Iterable
import functools
import math
import numbers
import os

import numpy as np
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
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{name} must be a finite number > 0, got {value}")
    return value


def check_choice(name: str, value: object, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise naming the valid options."""
    choices = tuple(choices)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, one of {', '.join(map(repr, choices))}; got {type(value).__name__}")
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
    """Raise if ``x`` is not a tensor or its last dimension is not ``size``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(x).__name__}")
    if x.dim() == 0 or x.shape[-1] != size:
        raise ValueError(f"{name} must have last dimension {size}, got shape {tuple(x.shape)}")


# --------------------------------------------------------------------------- scalars

def check_int(name: str, value: object, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as an ``int`` if it is an integer (not a bool) in ``[minimum, maximum]``, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_optional_int(name: str, value: object, *, minimum: int | None = None) -> int | None:
    """``None`` passes through; anything else must satisfy :func:`check_int`. (A 0 is never read as "missing".)"""
    return None if value is None else check_int(name, value, minimum=minimum)


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` if it is a ``bool`` (or NumPy bool), else raise :class:`TypeError`.

    Flags are not coerced with ``bool(...)``: ``causal="no"`` would otherwise silently mean ``True``.
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be a bool, got {type(value).__name__} {value!r}")


def check_float(
    name: str,
    value: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    strict_minimum: bool = False,
) -> float:
    """Return ``value`` as a finite ``float`` (ints accepted, bools and non-numbers rejected) within bounds."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if minimum is not None and (value <= minimum if strict_minimum else value < minimum):
        raise ValueError(f"{name} must be {'>' if strict_minimum else '>='} {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_str(name: str, value: object) -> str:
    """Return ``value`` if it is a ``str``, else raise :class:`TypeError`."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__} {value!r}")
    return value


# --------------------------------------------------------------------------- torch objects

FLOATING_DTYPES: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
INTEGER_DTYPES: tuple[torch.dtype, ...] = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)

_KIND_TEXT = {
    "floating": "a floating-point tensor (float16, bfloat16, float32 or float64)",
    "integer": "an integer tensor (int8 ... int64 or uint8; not bool)",
    "bool": "a bool tensor",
    "position": "an integer or float32/float64 tensor (not bool; float16/bfloat16 cannot hold large positions)",
}


def _wrapped(value: torch.Tensor) -> bool:
    """True inside ``torch.func.vmap``/``grad`` (``train_seeds``): there a tensor's values cannot be read, so the
    checks of values (finite entries, index ranges) are skipped; dtypes and shapes are still checked."""
    return bool(torch._C._functorch.is_functorch_wrapped_tensor(value))


def _dtype_ok(dtype: torch.dtype, kind: str) -> bool:
    if kind == "floating":
        return dtype in FLOATING_DTYPES
    if kind == "integer":
        return dtype in INTEGER_DTYPES
    if kind == "bool":
        return dtype == torch.bool
    if kind == "position":
        return dtype in INTEGER_DTYPES or dtype in (torch.float32, torch.float64)
    raise AssertionError(kind)


def check_tensor(
    name: str,
    value: object,
    kind: str,
    *,
    dim: int | tuple[int, ...] | None = None,
    min_dim: int | None = None,
    finite: bool = True,
) -> torch.Tensor:
    """Return ``value`` if it is a tensor of the wanted ``kind`` of dtype and number of dimensions.

    ``kind`` is ``"floating"``, ``"integer"`` (bool excluded: a bool mask is not an index), ``"bool"`` or
    ``"position"`` (integer, float32 or float64). Floating tensors must hold only finite values when ``finite``.
    Raises :class:`TypeError` for a non-tensor or a wrong dtype and :class:`ValueError` for a wrong shape or a
    non-finite value; every message names the argument, what was expected and what was given.
    """
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be {_KIND_TEXT[kind]}, got {type(value).__name__}")
    if not _dtype_ok(value.dtype, kind):
        raise TypeError(f"{name} must be {_KIND_TEXT[kind]}, got dtype {value.dtype}")
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else dim
        if value.dim() not in dims:
            want = " or ".join(f"{d}-D" for d in dims)
            raise ValueError(f"{name} must be {want}, got shape {tuple(value.shape)}")
    if min_dim is not None and value.dim() < min_dim:
        raise ValueError(f"{name} must have at least {min_dim} dimensions, got shape {tuple(value.shape)}")
    # a meta tensor has no values to check; what is computed from it is a meta tensor too (shape inference)
    if finite and value.dtype.is_floating_point and value.numel() and not _wrapped(value) and not value.is_meta \
            and not bool(torch.isfinite(value).all()):
        raise ValueError(f"{name} must hold only finite values (no NaN or inf)")
    return value


def require_values(name: str, value: torch.Tensor) -> None:
    """Raise a ``ValueError`` naming ``name`` if ``value`` is a meta tensor (a shape without values) and the caller is
    about to read its values. Functions that only compute with shapes accept meta tensors and return meta tensors."""
    if value.is_meta:
        raise ValueError(f"{name} is a meta tensor (a shape without values), but its values are needed here; pass a "
                         "tensor on a real device (cpu, cuda, ...)")


def check_dtype(name: str, value: object, kind: str = "floating") -> torch.dtype:
    """Return ``value`` if it is a ``torch.dtype`` of the wanted kind (``"floating"`` by default)."""
    if not isinstance(value, torch.dtype):
        raise TypeError(f"{name} must be a torch.dtype, got {type(value).__name__} {value!r}")
    if not _dtype_ok(value, kind):
        raise TypeError(f"{name} must be {_KIND_TEXT[kind].replace('tensor', 'dtype')}, got {value}")
    return value


def check_device(name: str, value: object) -> torch.device | None:
    """``None`` or a valid ``torch.device`` (or a string naming one) that exists on this machine, as a
    ``torch.device``: ``"cuda"`` without a GPU is a ``ValueError`` naming the argument. ``"meta"`` is accepted (shape
    inference); functions that need values refuse meta tensors."""
    if value is None:
        return None
    if not isinstance(value, (str, torch.device)):
        raise TypeError(f"{name} must be None, a str or a torch.device, got {type(value).__name__} {value!r}")
    try:
        device = torch.device(value)
    except (RuntimeError, ValueError) as error:
        raise ValueError(f"{name} is not a valid device: {value!r} ({error})") from None
    if device.type not in ("cpu", "meta"):
        try:  # an accelerator this build or machine lacks: PyTorch would fail later with an AssertionError
            torch.empty(0, device=device)
        except (AssertionError, RuntimeError) as error:
            raise ValueError(f"{name}={value!r} is not available here: {str(error).splitlines()[0][:200]}") from None
    return device


def check_generator(name: str, value: object) -> torch.Generator | None:
    """``None`` or a ``torch.Generator``."""
    if value is not None and not isinstance(value, torch.Generator):
        raise TypeError(f"{name} must be None or a torch.Generator, got {type(value).__name__}")
    return value


def check_index_range(name: str, value: torch.Tensor, low: int, high: int) -> None:
    """Raise if an integer tensor has entries outside ``[low, high)`` (``high=None`` means unbounded)."""
    if value.numel() == 0:
        return
    if _wrapped(value):
        return
    require_values(name, value)
    lo, hi = int(value.min()), int(value.max())
    if lo < low:
        raise ValueError(f"{name} must be >= {low}, got {lo}")
    if high is not None and hi >= high:
        raise ValueError(f"{name} must be < {high}, got {hi}")


# --------------------------------------------------------------------------- bounded cost

#: Environment variable that sets the memory budget in bytes (see :func:`memory_budget`).
MEMORY_BUDGET_VARIABLE = "COURSE_PE_MAX_BYTES"


class MemoryBudgetError(ValueError, MemoryError):
    """A size argument asks for more memory than the process may use; raised *before* anything is allocated.

    Both a ``ValueError`` (a bad argument, named in the message) and a ``MemoryError``. ``needed`` is the estimate in
    bytes and ``budget`` the bytes allowed (``None`` where the error was made by hand).
    """

    def __init__(self, message: str, needed: int | None = None, budget: int | None = None) -> None:
        super().__init__(message)
        self.needed = needed
        self.budget = budget


def _address_space_in_use() -> int:
    """Bytes of address space this process has mapped (``VmSize`` of ``/proc/self/status``; 0 where unknown)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024  # the kernel reports kB
    except (OSError, ValueError, IndexError):  # pragma: no cover (not Linux)
        pass
    return 0


def _machine_bytes() -> int:
    """Physical memory, lowered to the cgroup's ``memory.max`` and to what is left of the address-space limit where
    those are set. ``RLIMIT_AS`` bounds the address space the process maps in all, and importing torch alone maps
    hundreds of MiB of it, so the budget is the limit *minus* what is mapped already (read at every call: a sandbox
    may lower the limit after import, and the process grows). The cgroup limit is kept whole: the memory a cgroup
    counts includes page cache that the kernel reclaims before an allocation fails."""
    limits = [_fixed_machine_bytes()]
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft not in (resource.RLIM_INFINITY, -1) and soft > 0:
            limits.append(max(0, soft - _address_space_in_use()))
    except (ImportError, OSError, ValueError):  # pragma: no cover (not POSIX)
        pass
    return min(limits)


@functools.lru_cache(maxsize=1)
def _fixed_machine_bytes() -> int:
    """Physical memory and the cgroup limit (they do not change while the process runs)."""
    limits = []
    try:
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover (not POSIX)
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
            if text.isdigit():
                limits.append(int(text))
        except OSError:
            pass
    return min(limits) if limits else 2**40


def memory_budget() -> int:
    """The most bytes one call of ``course_pe`` may ask for: the machine's memory (physical memory, lowered to a
    cgroup limit, or to the part of ``RLIMIT_AS`` not yet mapped by the process, where set), or the value of the
    ``COURSE_PE_MAX_BYTES`` environment variable."""
    text = os.environ.get(MEMORY_BUDGET_VARIABLE)
    if text:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{MEMORY_BUDGET_VARIABLE} must be a number of bytes, got {text!r}") from None
        if value < 1:
            raise ValueError(f"{MEMORY_BUDGET_VARIABLE} must be a positive number of bytes, got {text!r}")
        return value
    return _machine_bytes()


def human_bytes(n: int | float) -> str:
    """``n`` bytes as a short text: ``'512 B'``, ``'1.5 GiB'``, ``'8.0 EiB'``, ``'6.8e+10 YiB'``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB"):
        if abs(value) < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.3g} YiB"


def check_memory(name: str, nbytes: int | float, what: str) -> None:
    """Raise :class:`MemoryBudgetError` naming ``name`` if ``nbytes`` (an estimate of what a call would allocate
    for ``what``) exceeds :func:`memory_budget`. Call it before allocating."""
    budget = memory_budget()
    if nbytes > budget:
        raise MemoryBudgetError(
            f"{name}: {what} would need about {human_bytes(nbytes)}, more than the {human_bytes(budget)} this "
            f"process may use (the machine's memory; set {MEMORY_BUDGET_VARIABLE} to change the budget)",
            int(math.ceil(nbytes)), budget,
        )


def check_module_input(name: str, x: torch.Tensor, module: "torch.nn.Module", *, same_dtype: bool = True) -> None:
    """``x`` must be on the device of ``module``'s parameters and, with ``same_dtype``, of their dtype: a clear
    error naming ``name`` instead of PyTorch's "mat1 and mat2 must have the same dtype" or "Tensor on device cpu is
    not on the expected device meta"."""
    reference = next(module.parameters(), None)
    if reference is None:
        return
    if x.device != reference.device:
        raise ValueError(f"{name} is on {x.device} but the module's parameters are on {reference.device}; move one "
                         f"of them (module.to({str(x.device)!r}) or {name}.to({str(reference.device)!r}))")
    if same_dtype and x.dtype != reference.dtype:
        raise TypeError(f"{name} has dtype {x.dtype} but the module's parameters are {reference.dtype}; convert one of "
                        f"them (module.to({x.dtype}) or {name}.to({reference.dtype}))")


def check_same_device(name: str, value: torch.Tensor, other_name: str, other: torch.Tensor) -> None:
    """Raise a ``ValueError`` naming both tensors if they are on different devices."""
    if value.device != other.device:
        raise ValueError(f"{name} is on {value.device} but {other_name} is on {other.device}; put them on one device")


def numel(*sizes: int) -> int:
    """The product of ``sizes`` as an exact Python int (no overflow, unlike ``torch.Size.numel`` past 2**63)."""
    return math.prod(int(s) for s in sizes)


# --------------------------------------------------------------------------- coursework tools (files, notebooks)

def check_optional_str(name: str, value: object) -> str | None:
    """``None`` or a ``str``."""
    return None if value is None else check_str(name, value)


def check_str_sequence(name: str, value: object, *, kind: type = list, nonempty_items: bool = False) -> list[str]:
    """A ``kind`` (list or tuple) of ``str`` (a bare string is refused: it is not a list of names)."""
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be a {kind.__name__} of str, got {type(value).__name__} {value!r}"[:300])
    for item in value:
        if not isinstance(item, str):
            raise TypeError(f"{name} must hold only str, got {type(item).__name__} {item!r}"[:300])
        if nonempty_items and not item:
            raise ValueError(f"{name} must not hold an empty string")
    return list(value)


def check_path(name: str, value: object):
    """A ``pathlib.Path`` from a non-empty ``str`` or ``os.PathLike`` (bytes refused)."""
    import os
    from pathlib import Path

    if isinstance(value, (bytes, bytearray)) or not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a str or os.PathLike path, got {type(value).__name__} {value!r}"[:300])
    if isinstance(value, str) and not value:
        raise ValueError(f"{name} must not be an empty path")
    path = Path(value)
    if isinstance(os.fspath(path), bytes):  # pragma: no cover (a PathLike returning bytes)
        raise TypeError(f"{name} must be a text path, got bytes")
    return path


def check_argv(name: str, value: object) -> list[str] | None:
    """``None`` (use ``sys.argv``) or a list or tuple of ``str``."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{name} must be None or a list of str, got {type(value).__name__} {value!r}"[:300])
    return check_str_sequence(name, list(value))


def check_notebook(name: str, value: object):
    """A notebook (``nbformat.NotebookNode``, nbformat 4) whose ``cells`` are a list of cells with text sources."""
    import nbformat

    if not isinstance(value, nbformat.NotebookNode):
        raise TypeError(f"{name} must be an nbformat.NotebookNode (nbformat.read(..., as_version=4)), got "
                        f"{type(value).__name__}")
    cells = value.get("cells")
    if not isinstance(cells, list):
        raise ValueError(f"{name} must have a list of cells, got {type(cells).__name__}")
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str) \
                or not isinstance(cell.get("source"), str):
            raise ValueError(f"{name}: cell {i} must be a cell with a cell_type and a str source (nbformat 4)")
    return value


def check_callable(name: str, value: object) -> object:
    """A callable."""
    if not callable(value):
        raise TypeError(f"{name} must be callable, got {type(value).__name__}")
    return value


def check_qkv(q: object, k: object, v: object, *, same_dtype: bool = True) -> None:
    """Check attention inputs: floating tensors q ``(batch, heads, q_len, d)``, k ``(batch, heads, k_len, d)`` and
    v ``(batch, heads, k_len, d_v)``; with ``same_dtype`` also one dtype for all three. Raises TypeError/ValueError."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t, "floating", dim=4, finite=False)
    if same_dtype and not q.dtype == k.dtype == v.dtype:  # type: ignore[union-attr]
        raise TypeError(f"q, k and v must share one dtype, got {q.dtype}, {k.dtype} and {v.dtype}")  # type: ignore[union-attr]
    if not q.device == k.device == v.device:  # type: ignore[union-attr]
        raise ValueError(f"q, k and v must be on one device, got {q.device}, {k.device} and {v.device}")  # type: ignore[union-attr]
    if k.shape[:3] != v.shape[:3] or q.shape[:2] != k.shape[:2] or q.shape[-1] != k.shape[-1]:  # type: ignore[union-attr]
        raise ValueError(
            "expected q (batch, heads, q_len, d), k (batch, heads, k_len, d) and v (batch, heads, k_len, d_v), "
            f"got {tuple(q.shape)}, {tuple(k.shape)} and {tuple(v.shape)}"  # type: ignore[union-attr]
        )
