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

from .rope import apply_rope, rope_cos_sin
from .rope_scaling import rope_frequencies

__all__ = ["BenchmarkRow", "complex_rope", "rotate_half", "run_rope_benchmark", "textbook_rope", "time_call"]


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``(a, b) -> (-b, a)`` on the two halves of the last dimension (the textbook helper)."""
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def textbook_rope(x: torch.Tensor, cos_full: torch.Tensor, sin_full: torch.Tensor) -> torch.Tensor:
    """Half-layout RoPE as usually written: ``x * cos + rotate_half(x) * sin``.

    ``cos_full``/``sin_full`` have the full ``head_dim`` (each frequency repeated for both halves).
    """
    return x * cos_full + rotate_half(x) * sin_full


def complex_rope(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """Interleaved RoPE as a complex product; ``freqs_cis`` is ``exp(i p theta)``, shape ``(seq, head_dim // 2)``."""
    z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(z * freqs_cis).flatten(-2).type_as(x)


def time_call(fn: Callable[[], object], *, repeats: int = 20, warmup: int = 3) -> float:
    """Median wall time of ``fn()`` in milliseconds."""
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
    name: str
    milliseconds: float


def run_rope_benchmark(
    shape: tuple[int, int, int, int] = (1, 16, 4096, 128), *, repeats: int = 20, seed: int = 0
) -> list[BenchmarkRow]:
    """Time every implementation on one random float32 input of ``shape`` (batch, heads, seq, head_dim).

    Also checks that they all compute the same rotation (so a fast wrong answer cannot win).
    """
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
    times = {r.name: r.milliseconds for r in rows}
    print(f"RoPE on {shape} float32, {torch.get_num_threads()} threads, torch {torch.__version__}, "
          f"{platform.processor() or platform.machine()}")
    for row in rows:
        print(f"  {row.name:<24} {row.milliseconds:8.2f} ms   {row.milliseconds / times['clone']:5.2f} x clone")
    print(f"  textbook half / apply_rope half           = {times['textbook half'] / times['apply_rope half']:.2f}x (target >= 2.5)")
    print(f"  apply_rope interleaved / complex          = {times['apply_rope interleaved'] / times['complex interleaved']:.2f}x (target <= 1.2)")
    print(f"  apply_rope interleaved / clone            = {times['apply_rope interleaved'] / times['clone']:.2f}x (target <= 1.5)")


if __name__ == "__main__":
    main()
