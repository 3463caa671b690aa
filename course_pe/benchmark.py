"""Speed of RoPE implementations, measured side by side in one run.

    python -m course_pe.benchmark            # (1, 16, 4096, 128) float32, the default
    python -m course_pe.benchmark --seq 1024 --repeats 30

Compared, on the same input and the same precomputed tables where they take tables:

* ``clone``: ``x.clone()``, the cost of reading ``x`` and writing a tensor of its size (a floor);
* ``textbook half``: ``x * cos + rotate_half(x) * sin`` with ``cos``/``sin`` duplicated to ``head_dim``
  (the GPT-NeoX / Hugging Face formulation);
* ``complex interleaved``: ``view_as_complex(x) * exp(i p theta)`` (Meta's LLaMA formulation);
* ``apply_rope half`` and ``apply_rope interleaved``: :func:`course_pe.rope.apply_rope` with default
  positions (its float64-built tables are cached after the first call, as the others' tables are here).

Each is timed as the median of ``repeats`` calls after warm-up, on the current thread count. The numbers
depend on the machine; the ratios are what the course reports.
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ._validation import check_even, check_float, check_int, check_positive_int, check_str, check_tensor
from .rope import apply_rope, rope_cos_sin
from .rope_scaling import rope_frequencies

__all__ = [
    "BenchmarkRow",
    "RATIOS",
    "benchmark_ratios",
    "complex_rope",
    "format_report",
    "rotate_half",
    "run_rope_benchmark",
    "textbook_rope",
    "time_call",
]

#: The ratios the course reports: name -> (numerator row, denominator row, target, "<=" or ">=").
RATIOS: dict[str, tuple[str, str, float, str]] = {
    "textbook half / apply_rope half": ("textbook half", "apply_rope half", 2.5, ">="),
    "apply_rope interleaved / complex": ("apply_rope interleaved", "complex interleaved", 1.2, "<="),
    "apply_rope interleaved / clone": ("apply_rope interleaved", "clone", 1.5, "<="),
}


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``(a, b) -> (-b, a)`` on the two halves of the last dimension (the textbook helper).

    ``x``: a floating tensor with an even last dimension.
    """
    check_tensor("x", x, "floating", min_dim=1, finite=False)
    check_even("last dimension of x", x.shape[-1])
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def textbook_rope(x: torch.Tensor, cos_full: torch.Tensor, sin_full: torch.Tensor) -> torch.Tensor:
    """Half-layout RoPE as usually written: ``x * cos + rotate_half(x) * sin``.

    ``cos_full``/``sin_full`` have the full ``head_dim`` (each frequency repeated for both halves); all three
    are floating tensors whose shapes broadcast to ``x``'s shape.
    """
    check_tensor("x", x, "floating", min_dim=1, finite=False)
    for name, t in (("cos_full", cos_full), ("sin_full", sin_full)):
        check_tensor(name, t, "floating")
        try:
            ok = torch.broadcast_shapes(t.shape, x.shape) == x.shape
        except RuntimeError:
            ok = False
        if not ok:
            raise ValueError(f"{name} of shape {tuple(t.shape)} does not broadcast to x's shape {tuple(x.shape)}")
    return x * cos_full + rotate_half(x) * sin_full


def complex_rope(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """Interleaved RoPE as a complex product; ``freqs_cis`` is ``exp(i p theta)``, shape ``(seq, head_dim // 2)``.

    ``x``: floating ``(..., seq, head_dim)`` with even ``head_dim``; ``freqs_cis`` a complex tensor.
    """
    check_tensor("x", x, "floating", min_dim=2, finite=False)
    check_even("last dimension of x", x.shape[-1])
    if not isinstance(freqs_cis, torch.Tensor) or not freqs_cis.is_complex():
        raise TypeError(f"freqs_cis must be a complex tensor, got {getattr(freqs_cis, 'dtype', type(freqs_cis).__name__)}")
    want = (*x.shape[:-1], x.shape[-1] // 2)
    try:
        ok = torch.broadcast_shapes(freqs_cis.shape, want) == want
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"freqs_cis of shape {tuple(freqs_cis.shape)} does not broadcast to {want}")
    z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], x.shape[-1] // 2, 2))
    return torch.view_as_real(z * freqs_cis).flatten(-2).type_as(x)


def time_call(fn: Callable[[], object], *, repeats: int = 20, warmup: int = 3) -> float:
    """Median wall time of ``fn()`` in milliseconds (``repeats >= 1``, ``warmup >= 0`` integers)."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    repeats = check_positive_int("repeats", repeats)
    warmup = check_int("warmup", warmup, minimum=0)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return 1e3 * times[len(times) // 2]


@dataclass(frozen=True)
class BenchmarkRow:
    """One implementation's name and its median time in milliseconds (a finite number > 0)."""

    name: str
    milliseconds: float

    def __post_init__(self) -> None:
        check_str("name", self.name)
        check_float("milliseconds", self.milliseconds, minimum=0.0, strict_minimum=True)


def benchmark_ratios(rows: list[BenchmarkRow]) -> dict[str, float]:
    """The ratios of :data:`RATIOS`, computed from ``rows`` (each row name must appear once)."""
    if not isinstance(rows, (list, tuple)) or not all(isinstance(r, BenchmarkRow) for r in rows):
        raise TypeError("rows must be a list of BenchmarkRow")
    times = {r.name: r.milliseconds for r in rows}
    if len(times) != len(rows):
        raise ValueError(f"rows must have distinct names, got {[r.name for r in rows]}")
    needed = {n for num, den, _, _ in RATIOS.values() for n in (num, den)}
    missing = sorted(needed - times.keys())
    if missing:
        raise ValueError(f"rows lack the implementations {missing}")
    return {label: times[num] / times[den] for label, (num, den, _, _) in RATIOS.items()}


def format_report(rows: list[BenchmarkRow]) -> list[str]:
    """The lines :func:`main` prints after its header: one per row (time and multiple of ``clone``), then
    one per ratio of :data:`RATIOS` with its target."""
    ratios = benchmark_ratios(rows)
    clone = next(r.milliseconds for r in rows if r.name == "clone") if any(r.name == "clone" for r in rows) else None
    if clone is None:
        raise ValueError("rows lack the clone baseline")
    lines = [f"  {row.name:<24} {row.milliseconds:8.2f} ms   {row.milliseconds / clone:5.2f} x clone" for row in rows]
    for label, (_, _, target, sense) in RATIOS.items():
        lines.append(f"  {label:<40} = {ratios[label]:.2f}x (target {sense} {target})")
    return lines


def run_rope_benchmark(
    shape: tuple[int, int, int, int] = (1, 16, 4096, 128), *, repeats: int = 20, seed: int = 0
) -> list[BenchmarkRow]:
    """Time every implementation on one random float32 input of ``shape`` (batch, heads, seq, head_dim).

    Also checks that they all compute the same rotation (so a fast wrong answer cannot win). ``shape`` is a
    tuple of four positive integers with an even ``head_dim``; ``repeats >= 1`` and ``seed >= 0`` integers.
    """
    if not isinstance(shape, tuple) or len(shape) != 4:
        raise TypeError(f"shape must be a tuple (batch, heads, seq, head_dim), got {shape!r}")
    for name, size in zip(("batch", "heads", "seq", "head_dim"), shape):
        check_positive_int(f"shape {name}", size)
    check_even("head_dim", shape[-1])
    repeats = check_positive_int("repeats", repeats)
    seed = check_int("seed", seed, minimum=0, maximum=2**63 - 1)
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=generator)
    seq, head_dim = shape[-2], shape[-1]
    inv_freq, _ = rope_frequencies(head_dim, dtype=torch.float64)
    cos, sin = rope_cos_sin(torch.arange(seq), inv_freq)
    cos_full, sin_full = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
    freqs_cis = torch.complex(cos, sin)

    ref_half = apply_rope(x, layout="half")
    ref_inter = apply_rope(x, layout="interleaved")
    torch.testing.assert_close(textbook_rope(x, cos_full, sin_full), ref_half, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(complex_rope(x, freqs_cis), ref_inter, rtol=1e-5, atol=1e-5)

    candidates: list[tuple[str, Callable[[], object]]] = [
        ("clone", lambda: x.clone()),
        ("textbook half", lambda: textbook_rope(x, cos_full, sin_full)),
        ("apply_rope half", lambda: apply_rope(x, layout="half")),
        ("complex interleaved", lambda: complex_rope(x, freqs_cis)),
        ("apply_rope interleaved", lambda: apply_rope(x, layout="interleaved")),
    ]
    with torch.inference_mode():
        return [BenchmarkRow(name, time_call(fn, repeats=repeats)) for name, fn in candidates]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    shape = (args.batch, args.heads, args.seq, args.head_dim)
    rows = run_rope_benchmark(shape, repeats=args.repeats)
    print(f"RoPE on {shape} float32, {torch.get_num_threads()} threads, torch {torch.__version__}, "
          f"{platform.processor() or platform.machine()}")
    for line in format_report(rows):
        print(line)


if __name__ == "__main__":
    main()
