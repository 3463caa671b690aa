"""Speed and memory of RoPE implementations, measured side by side in one run.

    python -m course_pe.benchmark            # (1, 16, 4096, 128) float32, the default, with the compiled rows
    python -m course_pe.benchmark --seq 1024 --repeats 30 --no-compile

Compared, on the same input and the same precomputed tables where they take tables:

* ``clone``: ``x.clone()``: allocate a tensor of ``x``'s size, read ``x`` once and write it once. The reference
  for "one pass over the data", not a lower bound: the allocation (a fresh mapping from the operating system
  for large tensors, page-faulted in on first write) is part of its time;
* ``textbook half``: ``x * cos + rotate_half(x) * sin`` with ``cos``/``sin`` duplicated to ``head_dim``
  (the GPT-NeoX / Hugging Face formulation);
* ``complex interleaved``: ``view_as_complex(x) * exp(i p theta)`` (Meta's LLaMA formulation);
* ``apply_rope half`` and ``apply_rope interleaved``: :func:`course_pe.rope.apply_rope` with default
  positions (its float64-built tables are cached after the first call, as the others' tables are here);
* ``compiled half`` and ``compiled interleaved`` (``compiled=True``, the command line's default): the one-pass
  rotation compiled by ``torch.compile`` (:func:`compiled_rope`); where no compiler works (no C++ compiler, an
  unsupported platform) the rows are left out and the report says why.

After warm-up, the implementations are timed in ``repeats`` rounds; each round calls every implementation once,
in turn, so that a change of machine load affects all of them alike. A row keeps every timed call, as wall time and
as the CPU time of the calling thread (with one thread, the CPU time of the kernels: far less sensitive to other
processes than wall time, though caches are still shared); its ``milliseconds`` is the median wall time, and
:func:`ratio_quantiles` gives the spread of the per-round ratio of two rows. Timings depend on the machine, its load
and the thread count (the current one is used): on a shared machine, read them with their spread. The bytes each
implementation allocates per call (:func:`measure_allocation`, from the PyTorch profiler's memory events) do not
depend on the load at all.

Why the half layout stays above a clone in eager PyTorch (bytes moved per element). A clone reads each element of
``x`` once and writes it once. A fused rotation does the same (plus the cos/sin tables, shared by the batch and the
heads): ``torch.compile`` produces such a kernel, and for the interleaved layout so does PyTorch's complex product.
In eager PyTorch every operation is a kernel that writes its whole result to memory, and no single operation forms
``a cos - b sin`` from two halves ``a``, ``b`` of a tensor (``addcmul`` adds one product to a tensor that must
already hold the other), so each output half takes at least two passes: ``apply_rope``'s half layout runs four
kernels on half-width views, ``out_a = a cos``, ``out_a -= b sin``, ``out_b = b cos``, ``out_b += a sin``, that is
three loads and two stores per element of ``x`` against the clone's one and one. Running them on blocks of
``2**17`` elements (512 KiB, which stay in the L2 cache between the two passes) brings the cost from about 2.5 toward
1.5 clones. Measured on the course machine (2026-11-24, one thread, under a load average of about 5, so in CPU time):
``apply_rope`` half 1.5 clones, interleaved 1.3, compiled half 1.1; every one of them allocates one output, the
textbook formula about five. So the 1.3-clone target of issue 27 is met by the compiled path and the interleaved
layout, not by the eager half layout, and cannot be: its two passes are the floor of eager PyTorch.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ._validation import (
    check_bool,
    check_choice,
    check_even,
    check_float,
    check_int,
    check_memory,
    check_positive_int,
    check_same_device,
    check_str,
    check_tensor,
    numel,
)
from .rope import apply_rope, rope_cos_sin
from .rope_scaling import rope_frequencies

__all__ = [
    "BenchmarkRow",
    "MAX_REPEATS",
    "OPTIONAL_RATIOS",
    "RATIOS",
    "benchmark_ratios",
    "compiled_rope",
    "complex_rope",
    "format_report",
    "measure_allocation",
    "ratio_quantiles",
    "rotate_half",
    "run_rope_benchmark",
    "textbook_rope",
    "time_call",
]

#: Most timed calls (and warm-up calls) one measurement makes; a benchmark that repeats more is not a measurement
#: but a loop that runs for hours.
MAX_REPEATS = 100_000

# The ratios the course reports: name -> (numerator row, denominator row, target, "<=" or ">=").
RATIOS: dict[str, tuple[str, str, float, str]] = {
    "textbook half / apply_rope half": ("textbook half", "apply_rope half", 2.5, ">="),
    "apply_rope interleaved / complex": ("apply_rope interleaved", "complex interleaved", 1.2, "<="),
    "apply_rope interleaved / clone": ("apply_rope interleaved", "clone", 1.5, "<="),
    "apply_rope half / clone": ("apply_rope half", "clone", 1.3, "<="),
}
#: Ratios reported only when their rows were measured (the compiled rows need a working ``torch.compile``).
OPTIONAL_RATIOS: dict[str, tuple[str, str, float, str]] = {
    "compiled half / clone": ("compiled half", "clone", 1.3, "<="),
    "compiled interleaved / clone": ("compiled interleaved", "clone", 1.3, "<="),
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
        check_same_device(name, t, "x", x)
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
    check_same_device("freqs_cis", freqs_cis, "x", x)
    # view_as_complex needs pairs adjacent in memory: a transposed or strided x is copied first (a no-op otherwise)
    z = torch.view_as_complex(x.float().contiguous().reshape(*x.shape[:-1], x.shape[-1] // 2, 2))
    return torch.view_as_real(z * freqs_cis).flatten(-2).type_as(x)


def time_call(fn: Callable[[], object], *, repeats: int = 20, warmup: int = 3) -> float:
    """Median wall time of ``fn()`` in milliseconds (``repeats`` in ``1 ... MAX_REPEATS``, ``warmup`` in
    ``0 ... MAX_REPEATS``, integers)."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    repeats = check_int("repeats", repeats, minimum=1, maximum=MAX_REPEATS)
    warmup = check_int("warmup", warmup, minimum=0, maximum=MAX_REPEATS)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return 1e3 * times[len(times) // 2]


def _quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile of a non-empty sequence (as ``numpy.quantile``'s default)."""
    if not values:
        raise ValueError("values must not be empty")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must lie in [0, 1], got {q}")
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True)
class BenchmarkRow:
    """One implementation's timings: ``milliseconds`` is the median of ``samples`` (every timed call, in ms,
    in round order; empty for rows built by hand). ``cpu_samples`` are the same calls' CPU times of the calling
    thread in ms (empty when not measured); ``allocated_bytes`` and ``peak_bytes`` what one call allocates in all and
    at most at once (``None`` when not measured)."""

    name: str
    milliseconds: float
    samples: tuple[float, ...] = ()
    cpu_samples: tuple[float, ...] = ()
    allocated_bytes: int | None = None
    peak_bytes: int | None = None

    @property
    def cpu_milliseconds(self) -> float | None:
        """Median CPU time of the timed calls in ms, or ``None`` without CPU samples."""
        return _quantile(self.cpu_samples, 0.5) if self.cpu_samples else None

    def quantile(self, q: float) -> float:
        """The ``q``-quantile of the timed calls in milliseconds (``q = 0.25`` and ``0.75`` give the IQR);
        ``q`` is a number in ``[0, 1]``, and the row must hold samples."""
        q = check_float("q", q, minimum=0.0, maximum=1.0)
        if not self.samples:
            raise ValueError(f"row {self.name!r} has no samples (built by hand?); quantile needs the timed calls")
        return _quantile(self.samples, q)

    def __post_init__(self) -> None:
        check_str("name", self.name)
        check_float("milliseconds", self.milliseconds, minimum=0.0, strict_minimum=True)
        if not isinstance(self.samples, tuple):
            raise TypeError(f"samples must be a tuple of milliseconds, got {type(self.samples).__name__}")
        for i, v in enumerate(self.samples):
            check_float(f"samples[{i}]", v, minimum=0.0)
        if not isinstance(self.cpu_samples, tuple):
            raise TypeError(f"cpu_samples must be a tuple of milliseconds, got {type(self.cpu_samples).__name__}")
        for i, v in enumerate(self.cpu_samples):
            check_float(f"cpu_samples[{i}]", v, minimum=0.0)
        if self.cpu_samples and self.samples and len(self.cpu_samples) != len(self.samples):
            raise ValueError(f"cpu_samples must have one entry per timed call ({len(self.samples)}), got "
                             f"{len(self.cpu_samples)}")
        for name in ("allocated_bytes", "peak_bytes"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, check_int(name, getattr(self, name), minimum=0))


def ratio_quantiles(
    numerator: BenchmarkRow, denominator: BenchmarkRow, qs: Sequence[float] = (0.25, 0.5, 0.75)
) -> tuple[float, ...]:
    """Quantiles of the per-round ratio ``numerator / denominator`` (rows from the same :func:`run_rope_benchmark`).

    Pairing the calls of one round cancels load changes that hit both rows alike.
    """
    for name, row in (("numerator", numerator), ("denominator", denominator)):
        if not isinstance(row, BenchmarkRow):
            raise TypeError(f"{name} must be a BenchmarkRow, got {type(row).__name__}")
    if not numerator.samples:
        raise ValueError(f"numerator {numerator.name!r} has no samples (one per round are needed)")
    if len(numerator.samples) != len(denominator.samples):
        raise ValueError(f"numerator and denominator need the same number of samples (one per round), got "
                         f"{len(numerator.samples)} and {len(denominator.samples)}")
    if isinstance(qs, (str, bytes)) or not isinstance(qs, Sequence):
        raise TypeError(f"qs must be a sequence of numbers in [0, 1], got {type(qs).__name__}")
    qs = [check_float(f"qs[{i}]", q, minimum=0.0, maximum=1.0) for i, q in enumerate(qs)]
    ratios = [a / b for a, b in zip(numerator.samples, denominator.samples)]
    return tuple(_quantile(ratios, q) for q in qs)


def _all_ratios(rows: list[BenchmarkRow]) -> dict[str, tuple[str, str, float, str]]:
    names = {r.name for r in rows}
    optional = {k: v for k, v in OPTIONAL_RATIOS.items() if v[0] in names and v[1] in names}
    return {**RATIOS, **optional}


def benchmark_ratios(rows: list[BenchmarkRow]) -> dict[str, float]:
    """The ratios of ``RATIOS`` (and of ``OPTIONAL_RATIOS`` whose rows are present), computed from ``rows``' median
    wall times (each row name must appear once)."""
    if not isinstance(rows, (list, tuple)) or not all(isinstance(r, BenchmarkRow) for r in rows):
        raise TypeError("rows must be a list of BenchmarkRow")
    times = {r.name: r.milliseconds for r in rows}
    if len(times) != len(rows):
        raise ValueError(f"rows must have distinct names, got {[r.name for r in rows]}")
    needed = {n for num, den, _, _ in RATIOS.values() for n in (num, den)}
    missing = sorted(needed - times.keys())
    if missing:
        raise ValueError(f"rows lack the implementations {missing}")
    return {label: times[num] / times[den] for label, (num, den, _, _) in _all_ratios(rows).items()}


def format_report(rows: list[BenchmarkRow]) -> list[str]:
    """The lines ``main`` prints after its header: one per row (time and multiple of ``clone``; with CPU samples
    also the CPU time's multiple, with allocations the peak bytes' multiple of clone's), then one per ratio with its
    target."""
    ratios = benchmark_ratios(rows)
    clone = next(r.milliseconds for r in rows if r.name == "clone") if any(r.name == "clone" for r in rows) else None
    if clone is None:
        raise ValueError("rows lack the clone baseline")
    by_name = {r.name: r for r in rows}
    base = by_name["clone"]
    paired = all(len(r.samples) == len(base.samples) > 0 for r in rows)
    lines = []
    for row in rows:
        line = f"  {row.name:<24} {row.milliseconds:8.2f} ms   {row.milliseconds / clone:5.2f} x clone"
        if paired:  # the spread over rounds: IQR of the calls, and of the per-round ratio to clone
            q1, _, q3 = ratio_quantiles(row, base)
            line += f" (IQR {row.quantile(0.25):.2f}-{row.quantile(0.75):.2f} ms; ratio IQR {q1:.2f}-{q3:.2f})"
        if row.cpu_milliseconds is not None and base.cpu_milliseconds:
            line += f"; CPU {row.cpu_milliseconds / base.cpu_milliseconds:.2f} x clone"
        if row.peak_bytes is not None and base.peak_bytes:
            line += f"; allocates {row.peak_bytes / base.peak_bytes:.2f} x clone at peak"
        lines.append(line)
    for label, (num, den, target, sense) in _all_ratios(rows).items():
        line = f"  {label:<40} = {ratios[label]:.2f}x (target {sense} {target})"
        if paired:
            q1, _, q3 = ratio_quantiles(by_name[num], by_name[den])
            met = ratios[label] >= target if sense == ">=" else ratios[label] <= target
            line += f"; per-round IQR {q1:.2f}-{q3:.2f}; {'met' if met else 'NOT met'}"
        lines.append(line)
    return lines


@contextlib.contextmanager
def _quiet_stderr():
    """Silence file descriptor 2 for the block: the profiler's C++ side prints a "profiler_start"/"profiler_stop"
    line there on every use, which would drown the report. (Left alone where fd 2 cannot be duplicated.)"""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def measure_allocation(fn: Callable[[], object]) -> tuple[int, int]:
    """``(allocated, peak)``: the bytes one call of ``fn`` allocates on the CPU in all and at most at once (after a
    warm-up call that fills caches), from the memory events of the PyTorch profiler. Unlike a time, this does not
    depend on the machine's load. ``fn`` is a callable of no arguments."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    from torch.profiler import ProfilerActivity, profile

    fn()
    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted((e for e in prof.events() if e.self_cpu_memory_usage), key=lambda e: e.time_range.start)
    allocated = sum(e.self_cpu_memory_usage for e in events if e.self_cpu_memory_usage > 0)
    current = peak = 0
    for event in events:
        current += event.self_cpu_memory_usage
        peak = max(peak, current)
    return int(allocated), int(peak)


def _one_pass_half(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


def _one_pass_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)


def compiled_rope(layout: str, example: torch.Tensor | None = None) -> tuple[Callable | None, str]:
    """The rotation ``(x, cos, sin) -> x rotated`` compiled by ``torch.compile`` into one pass, or ``None`` and the
    reason where no compiler works here.

    ``layout`` is ``"half"`` or ``"interleaved"``; ``cos``/``sin`` have one value per pair, ``(..., seq, head_dim /
    2)``. The function is compiled for the shapes of ``example`` (a floating ``(..., seq, head_dim)`` tensor; default
    a small one) and checked against :func:`~course_pe.rope.apply_rope` there, so a broken compiler gives ``None``
    rather than wrong numbers. Compiling takes seconds to a minute (a C++ compiler runs).
    """
    check_choice("layout", layout, ("half", "interleaved"))
    if example is None:
        example = torch.randn(1, 2, 8, 8, generator=torch.Generator().manual_seed(0))
    check_tensor("example", example, "floating", min_dim=2)
    check_even("head_dim (last dimension of example)", example.shape[-1])
    fn = _one_pass_half if layout == "half" else _one_pass_interleaved
    inv_freq, _ = rope_frequencies(example.shape[-1], dtype=torch.float64)
    cos, sin = rope_cos_sin(torch.arange(example.shape[-2]), inv_freq, dtype=example.dtype)
    try:
        compiled = torch.compile(fn, dynamic=False)
        with torch.inference_mode():
            got = compiled(example, cos, sin)
    except Exception as error:  # no compiler, an unsupported platform, a backend failure: fall back cleanly
        return None, f"torch.compile failed: {type(error).__name__}: {str(error).splitlines()[0][:160] if str(error) else ''}"
    expected = apply_rope(example, layout=layout)
    if not torch.allclose(got, expected, rtol=1e-5, atol=1e-5):
        return None, "torch.compile gave another rotation than apply_rope; not used"
    return compiled, "compiled"


def run_rope_benchmark(
    shape: tuple[int, int, int, int] = (1, 16, 4096, 128),
    *,
    repeats: int = 20,
    seed: int = 0,
    compiled: bool = False,
    allocations: bool = False,
) -> list[BenchmarkRow]:
    """Time every implementation on one random float32 input of ``shape`` (batch, heads, seq, head_dim).

    Also checks that they all compute the same rotation (so a fast wrong answer cannot win). Each candidate is
    called 3 times to warm up, then once per round for ``repeats`` rounds, in turn (see the module docstring); every
    call's wall time and CPU time is kept. ``compiled`` adds the two :func:`compiled_rope` rows (left out, with a
    message on stderr, where ``torch.compile`` does not work); ``allocations`` measures the bytes each row allocates
    (:func:`measure_allocation`).
    """
    import sys

    if not isinstance(shape, tuple) or len(shape) != 4:
        raise TypeError(f"shape must be a tuple (batch, heads, seq, head_dim), got {shape!r}")
    for name, size in zip(("batch", "heads", "seq", "head_dim"), shape):
        check_positive_int(f"shape {name}", size)
    check_even("head_dim", shape[-1])
    repeats = check_int("repeats", repeats, minimum=1, maximum=MAX_REPEATS)
    # x, the two references, the tables and the candidates' outputs and temporaries: about 16 copies of x
    check_memory("shape", 16 * 4 * numel(*shape), f"a float32 input of shape {shape} and its rotations")
    seed = check_int("seed", seed, minimum=0, maximum=2**63 - 1)
    compiled = check_bool("compiled", compiled)
    allocations = check_bool("allocations", allocations)
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
    if compiled:
        for layout, reference in (("half", ref_half), ("interleaved", ref_inter)):
            fn, reason = compiled_rope(layout, x)
            if fn is None:
                print(f"compiled {layout}: left out ({reason})", file=sys.stderr)
                continue
            torch.testing.assert_close(fn(x, cos, sin), reference, rtol=1e-5, atol=1e-5)
            candidates.append((f"compiled {layout}", lambda fn=fn: fn(x, cos, sin)))
    samples: dict[str, list[float]] = {name: [] for name, _ in candidates}
    cpu: dict[str, list[float]] = {name: [] for name, _ in candidates}
    with torch.inference_mode():
        for _, fn in candidates:
            for _ in range(3):
                fn()
        for _ in range(repeats):
            for name, fn in candidates:
                start, cpu_start = time.perf_counter(), time.thread_time()
                fn()
                cpu[name].append(1e3 * (time.thread_time() - cpu_start))
                samples[name].append(1e3 * (time.perf_counter() - start))
        memory = {name: measure_allocation(fn) if allocations else (None, None) for name, fn in candidates}
    return [
        BenchmarkRow(name, _quantile(samples[name], 0.5), tuple(samples[name]), tuple(cpu[name]), *memory[name])
        for name, _ in candidates
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--no-compile", action="store_true", help="leave out the torch.compile rows")
    parser.add_argument("--no-allocations", action="store_true", help="do not measure the bytes allocated")
    args = parser.parse_args(argv)
    shape = (args.batch, args.heads, args.seq, args.head_dim)
    rows = run_rope_benchmark(shape, repeats=args.repeats, compiled=not args.no_compile,
                              allocations=not args.no_allocations)
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    print(f"RoPE on {shape} float32, {torch.get_num_threads()} threads, torch {torch.__version__}, "
          f"{platform.processor() or platform.machine()}{load}")
    for line in format_report(rows):
        print(line)


if __name__ == "__main__":
    main()
