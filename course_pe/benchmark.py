"""Speed and memory of RoPE implementations, measured side by side in one run, on the CPU or a CUDA GPU.

    python -m course_pe.benchmark                    # CPU: (1, 16, 4096, 128) float32, the current thread count
    python -m course_pe.benchmark --threads 2        # the course's quiet-CPU measurement (issue 33)
    python -m course_pe.benchmark --device cuda      # GPU: (4, 32, 8192, 128) bfloat16 and float32, and a decode step
    python -m course_pe.benchmark --device cuda --json rope-gpu.json   # also store the results as data

Compared, on the same input and the same precomputed tables where they take tables:

* ``clone``: ``x.clone()``: allocate a tensor of ``x``'s size, read ``x`` once and write it once. On a GPU PyTorch's
  caching allocator makes the allocation almost free, and a clone runs at the memory bandwidth. On the CPU the
  allocation is part of its time, and what it costs depends on the C library: glibc serves a request from free memory
  its heap holds when a piece is large enough, and otherwise maps a block at or above its mmap threshold with fresh
  pages from the operating system, page-faulted in on first write; the threshold rises to the size of a freed mapped
  block but never beyond 32 MiB on a 64-bit system, so in a fresh process a clone of 32 MiB or more is a fresh mapping
  at every call, and one of 31 MiB, after the first, usually comes from the heap (when the heap has room to grow;
  :func:`page_faults_in_fresh_process` counts both);
* ``copy into preallocated``: ``out.copy_(x)`` into a tensor allocated once: one pass without the allocation, the
  reference that does not depend on the allocator;
* ``textbook half``: ``x * cos + rotate_half(x) * sin`` with ``cos``/``sin`` duplicated to ``head_dim`` in ``x``'s
  dtype (the GPT-NeoX formulation, and Hugging Face's eager ``apply_rotary_pos_emb``): five operations, five fresh
  temporaries;
* ``textbook half, preallocated``: the same five passes, written into buffers allocated once (``out=``): it separates
  what the passes cost from what the fresh temporaries cost;
* ``compiled textbook half``: ``torch.compile`` of that formula (one fused pass), where a compiler works;
* ``complex interleaved``: ``view_as_complex(x) * exp(i p theta)`` (Meta's LLaMA formulation, in float32);
* ``apply_rope half``, ``apply_rope interleaved``, ``apply_rope half, positions``, ``RotaryEmbedding half``:
  :mod:`course_pe.rope` with default positions, explicit positions, and the module (after a first call that fills
  the caches, as in a model). On a CUDA GPU with Triton they run the fused kernel of ``course_pe._rope_triton``;
* ``compiled half`` and ``compiled interleaved`` (CPU, ``compiled=True``): the one-pass rotation compiled by
  ``torch.compile`` (:func:`compiled_rope`).

After warm-up, the implementations are timed in ``repeats`` rounds; each round calls every implementation once,
in turn, so that a change of machine load affects all of them alike. On the CPU a row keeps every timed call as wall
time and as the CPU time of the calling thread; on a GPU as CUDA-event time (the device's time between two events
around the call). ``milliseconds`` is the median, and :func:`ratio_quantiles` gives the spread of the per-round ratio of
two rows. A decoding step (one position, :func:`run_decode_benchmark`) is timed as wall time per call over many calls,
since there the launches and the Python around them are the cost. The bytes each implementation allocates per call
(:func:`measure_allocation`, CPU) do not depend on the load at all.

What costs time. On the CPU, elementwise code on a tensor of 32 MiB pays for three things: passes over memory (each
kernel reads and writes its operands), fresh allocations (with glibc, a temporary of 32 MiB or more is a new mapping
whose pages fault in on first write, unless the heap already holds a free chunk that large), and the threads (every kernel splits its work between the threads and waits for
all of them at its end, so on a busy machine many small kernels lose more than a few large ones). ``apply_rope``'s half layout runs four kernels on half-width views that
write into one output (three reads and two writes per element of ``x``, one allocation); the textbook formula five
kernels and five allocations. On a GPU, every kernel is a launch (microseconds each, which dominates a decoding step;
views launch nothing, :func:`count_operations` tells them apart), and a large elementwise kernel is bound by the memory
bandwidth, so the bytes moved are the first model of its time (a floor: the H200 measurement the book cites found
Hugging Face's eager formula at 11 clones in bfloat16 where its bytes predict 5). A fused kernel (Triton here, or
``torch.compile``) reads ``x`` once and writes once, as a clone does.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from ._validation import (
    check_bool,
    check_choice,
    check_device,
    check_dtype,
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
from .rope import RotaryEmbedding, apply_rope, rope_cos_sin
from .rope_scaling import rope_frequencies

__all__ = [
    "BenchmarkRow",
    "DECODE_RATIOS",
    "GPU_RATIOS",
    "HOST_READ_OPERATIONS",
    "MAX_REPEATS",
    "NO_KERNEL_OPERATIONS",
    "OPTIONAL_RATIOS",
    "OperationCount",
    "RATIOS",
    "benchmark_ratios",
    "compiled_rope",
    "complex_rope",
    "count_operations",
    "format_report",
    "measure_allocation",
    "page_faults",
    "page_faults_in_fresh_process",
    "ratio_quantiles",
    "rotate_half",
    "run_decode_benchmark",
    "run_rope_benchmark",
    "textbook_rope",
    "time_call",
]

#: Most timed calls (and warm-up calls) one measurement makes; a benchmark that repeats more is not a measurement
#: but a loop that runs for hours.
MAX_REPEATS = 100_000

# The ratios the course reports: name -> (numerator row, denominator row, target, "<=" or ">="). On the CPU, issue 33's
# targets for a quiet machine (2 threads, (1, 16, 4096, 128) float32).
RATIOS: dict[str, tuple[str, str, float, str]] = {
    "textbook half / apply_rope half": ("textbook half", "apply_rope half", 1.25, ">="),
    "apply_rope interleaved / complex": ("apply_rope interleaved", "complex interleaved", 1.2, "<="),
    "apply_rope interleaved / clone": ("apply_rope interleaved", "clone", 1.5, "<="),
    "apply_rope half / clone": ("apply_rope half", "clone", 3.0, "<="),
}
#: Ratios reported only when their rows were measured (the compiled rows need a working ``torch.compile``).
OPTIONAL_RATIOS: dict[str, tuple[str, str, float, str]] = {
    "compiled half / clone": ("compiled half", "clone", 1.3, "<="),
    "compiled interleaved / clone": ("compiled interleaved", "clone", 1.3, "<="),
}
#: The targets of issue 33 on a GPU, for a bfloat16 prefill of shape (4, 32, 8192, 128); at most 1.5 clones.
GPU_RATIOS: dict[str, tuple[str, str, float, str]] = {
    "apply_rope half / clone": ("apply_rope half", "clone", 1.5, "<="),
    "apply_rope interleaved / clone": ("apply_rope interleaved", "clone", 1.5, "<="),
    "RotaryEmbedding half / clone": ("RotaryEmbedding half", "clone", 1.5, "<="),
    "textbook half / apply_rope half": ("textbook half", "apply_rope half", 1.0, ">="),
}
#: The targets of issue 33 for a decoding step; at most 1.2 times the wall time of the textbook formula (cos/sin given).
DECODE_RATIOS: dict[str, tuple[str, str, float, str]] = {
    "apply_rope half, positions / textbook": ("apply_rope half, positions", "textbook half (cos/sin given)", 1.2, "<="),
    "RotaryEmbedding half, positions / textbook": ("RotaryEmbedding half, positions", "textbook half (cos/sin given)",
                                                   1.2, "<="),
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
    return _textbook(x, cos_full, sin_full)


def _textbook(x: torch.Tensor, cos_full: torch.Tensor, sin_full: torch.Tensor) -> torch.Tensor:
    """:func:`textbook_rope` without its checks: the formula alone, as the benchmark times it (a check that reads a
    value would make a GPU wait at every call, which the formula itself does not)."""
    half = x.shape[-1] // 2
    return x * cos_full + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin_full


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
    return _complex(x, freqs_cis)


def _complex(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """:func:`complex_rope` without its checks (Meta's formula alone, as the benchmark times it)."""
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


def _check_targets(targets: object) -> dict[str, tuple[str, str, float, str]]:
    if targets is None:
        return RATIOS
    if not isinstance(targets, dict) or not all(
            isinstance(k, str) and isinstance(v, tuple) and len(v) == 4 and v[3] in ("<=", ">=")
            for k, v in targets.items()):
        raise TypeError("targets must be a dict like RATIOS: name -> (numerator row, denominator row, target, "
                        "'<=' or '>=')")
    return targets


def _all_ratios(rows: list[BenchmarkRow], targets: dict[str, tuple[str, str, float, str]] = RATIOS
                ) -> dict[str, tuple[str, str, float, str]]:
    names = {r.name for r in rows}
    optional = {k: v for k, v in OPTIONAL_RATIOS.items() if v[0] in names and v[1] in names}
    return {**targets, **optional}


def benchmark_ratios(rows: list[BenchmarkRow], *, targets: dict | None = None) -> dict[str, float]:
    """The ratios of ``targets`` (default ``RATIOS``; also :data:`GPU_RATIOS`, :data:`DECODE_RATIOS`), and of
    ``OPTIONAL_RATIOS`` whose rows are present, computed from ``rows``' median times (each row name must appear
    once)."""
    if not isinstance(rows, (list, tuple)) or not all(isinstance(r, BenchmarkRow) for r in rows):
        raise TypeError("rows must be a list of BenchmarkRow")
    targets = _check_targets(targets)
    times = {r.name: r.milliseconds for r in rows}
    if len(times) != len(rows):
        raise ValueError(f"rows must have distinct names, got {[r.name for r in rows]}")
    needed = {n for num, den, _, _ in targets.values() for n in (num, den)}
    missing = sorted(needed - times.keys())
    if missing:
        raise ValueError(f"rows lack the implementations {missing}")
    return {label: times[num] / times[den] for label, (num, den, _, _) in _all_ratios(rows, targets).items()}


def format_report(rows: list[BenchmarkRow], *, targets: dict | None = None, unit: str = "ms") -> list[str]:
    """The lines ``main`` prints after its header: one per row (time and multiple of ``clone``; with CPU samples
    also the CPU time's multiple, with allocations the peak bytes' multiple of clone's), then one per ratio of
    ``targets`` (default ``RATIOS``) with its target. ``unit`` is ``"ms"`` or ``"us"`` (the times printed)."""
    check_choice("unit", unit, ("ms", "us"))
    targets = _check_targets(targets)
    ratios = benchmark_ratios(rows, targets=targets)
    clone = next(r.milliseconds for r in rows if r.name == "clone") if any(r.name == "clone" for r in rows) else None
    if clone is None:
        raise ValueError("rows lack the clone baseline")
    scale = 1.0 if unit == "ms" else 1e3
    by_name = {r.name: r for r in rows}
    base = by_name["clone"]
    paired = all(len(r.samples) == len(base.samples) > 0 for r in rows)
    width = max(24, *(len(r.name) for r in rows))
    lines = []
    for row in rows:
        line = f"  {row.name:<{width}} {row.milliseconds * scale:8.2f} {unit}   {row.milliseconds / clone:5.2f} x clone"
        if paired:  # the spread over rounds: IQR of the calls, and of the per-round ratio to clone
            q1, _, q3 = ratio_quantiles(row, base)
            line += (f" (IQR {row.quantile(0.25) * scale:.2f}-{row.quantile(0.75) * scale:.2f} {unit}; "
                     f"ratio IQR {q1:.2f}-{q3:.2f})")
        if row.cpu_milliseconds is not None and base.cpu_milliseconds:
            line += f"; CPU {row.cpu_milliseconds / base.cpu_milliseconds:.2f} x clone"
        if row.peak_bytes is not None and base.peak_bytes:
            line += f"; allocates {row.peak_bytes / base.peak_bytes:.2f} x clone at peak"
        lines.append(line)
    for label, (num, den, target, sense) in _all_ratios(rows, targets).items():
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


def page_faults(fn: Callable[[], object], *, calls: int = 5) -> float | None:
    """Minor page faults of one call of ``fn`` (the median over ``calls`` calls, after a warm-up call): how many
    pages of fresh memory the call touched for the first time. Where the C library hands back memory it already
    holds, a call faults almost no page; where it maps fresh memory from the operating system (glibc does for a block
    of 32 MiB or more when its heap holds no free chunk that large), every 4 KiB page written faults once. Counted for the whole process
    (``resource.getrusage``), so PyTorch's worker threads are included; ``None`` where the ``resource`` module does
    not exist (Windows). ``fn`` is a callable of no arguments, ``calls`` an integer in ``1 ... 1000``."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    calls = check_int("calls", calls, minimum=1, maximum=1000)
    try:
        import resource
    except ImportError:  # pragma: no cover (Windows)
        return None
    fn()
    counts = []
    for _ in range(calls):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        fn()
        counts.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return float(_quantile(counts, 0.5))


def page_faults_in_fresh_process(setup: str, calls: Mapping[str, str], *, threads: int = 2,
                                 timeout: float = 600.0) -> dict[str, float | None]:
    """Page faults per call (:func:`page_faults`, the median of 5 calls after a warm-up call) of each expression in
    ``calls``, measured in a fresh Python process that first imports ``torch`` (with ``threads`` threads),
    ``course_pe as cpe`` and ``page_faults`` and ``rotate_half`` from this module, then runs the statements ``setup``.

    Why a fresh process: glibc's ``malloc`` first serves a request from free memory the heap already holds (a free
    chunk in its bins, or the top of the heap) when one is large enough, and only otherwise maps fresh pages at or
    above its mmap threshold. In a long-lived process (a notebook kernel) what earlier code freed decides whether a
    block of 32 MiB faults its pages in; a fresh process has a known history.

    ``setup`` is Python source (a ``str``); ``calls`` maps names (non-empty ``str``) to expressions (``str``), at
    least one; ``threads`` is an integer in ``1 ... 1024``; ``timeout`` the seconds the child may run, in
    ``(0, 86400]``. The strings are run as code, as :mod:`timeit` runs its statements: pass only your own code.
    Returns ``{name: faults per call}``, ``None`` where the ``resource`` module does not exist (Windows). A child that
    fails raises :class:`RuntimeError` with its standard error."""
    import json
    import subprocess
    import sys

    setup = check_str("setup", setup)
    if not isinstance(calls, Mapping):
        raise TypeError(f"calls must be a mapping of names to expressions, got {type(calls).__name__}")
    if not calls:
        raise ValueError("calls must hold at least one expression")
    for name, call in calls.items():
        check_str("a name in calls", name)
        check_str(f"calls[{name!r}]", call)
        if not name:
            raise ValueError("the names in calls must not be empty")
        try:
            compile(call, "<call>", "eval")
        except SyntaxError as error:
            raise ValueError(f"calls[{name!r}] is not a Python expression: {call!r}") from error
    try:
        compile(setup, "<setup>", "exec")
    except SyntaxError as error:
        raise ValueError(f"setup is not Python source: {error}") from error
    threads = check_int("threads", threads, minimum=1, maximum=1024)
    timeout = check_float("timeout", timeout, minimum=0.0, maximum=86400.0, strict_minimum=True)
    lines = [
        "import json, torch, course_pe as cpe",
        "from course_pe.benchmark import page_faults, rotate_half",
        f"torch.set_num_threads({threads})",
        setup,
        "print(json.dumps({" + ", ".join(f"{name!r}: page_faults(lambda: {call})" for name, call in calls.items())
        + "}))",
    ]
    done = subprocess.run([sys.executable, "-c", "\n".join(lines)], capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"the fresh process failed (exit status {done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


#: ATen operations that make a view, read metadata or allocate memory; on a GPU none of them launches a kernel.
NO_KERNEL_OPERATIONS = frozenset({
    "aten.slice.Tensor", "aten.view.default", "aten.unsqueeze.default", "aten.expand.default", "aten.select.int",
    "aten.alias.default", "aten.t.default", "aten.transpose.int", "aten.as_strided.default",
    "aten.view_as_real.default", "aten.view_as_complex.default", "aten._unsafe_view.default", "aten.detach.default",
    "aten.split.Tensor", "aten.unbind.int", "aten.squeeze.dim", "aten.permute.default", "aten.empty_like.default",
    "aten.empty.memory_format", "aten.empty_strided.default", "aten.lift_fresh.default", "aten.sym_size.int",
    "aten.sym_stride.int", "aten.is_same_size.default",
})
#: ATen operations that copy a value back to the host; on a GPU each waits for the device to finish its queue.
HOST_READ_OPERATIONS = frozenset({"aten._local_scalar_dense.default", "aten.equal.default", "aten.is_nonzero.default",
                                  "aten.item.default"})


@dataclass(frozen=True)
class OperationCount:
    """The ATen operations one call dispatched, in order (``str`` of each operation), sorted into those that run a
    kernel, those that only make a view or allocate (:data:`NO_KERNEL_OPERATIONS`) and reads back to the host
    (:data:`HOST_READ_OPERATIONS`). On a GPU every kernel is a launch and every host read a wait for the device."""

    operations: tuple[str, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.operations, tuple):
            raise TypeError(f"operations must be a tuple of operation names, got {type(self.operations).__name__}")
        for i, op in enumerate(self.operations):
            check_str(f"operations[{i}]", op)

    @property
    def total(self) -> int:
        return len(self.operations)

    @property
    def kernels(self) -> tuple[str, ...]:
        return tuple(op for op in self.operations if op not in NO_KERNEL_OPERATIONS and op not in HOST_READ_OPERATIONS)

    @property
    def no_kernel(self) -> tuple[str, ...]:
        return tuple(op for op in self.operations if op in NO_KERNEL_OPERATIONS)

    @property
    def host_reads(self) -> tuple[str, ...]:
        return tuple(op for op in self.operations if op in HOST_READ_OPERATIONS)

    def short(self) -> str:
        """``"9 operations: 4 kernels (mul, addcmul_, mul, addcmul_), 5 views or allocations, 0 host reads"``."""
        names = ", ".join(op.split(".")[1] for op in self.kernels)
        return (f"{self.total} operations: {len(self.kernels)} kernels ({names}), {len(self.no_kernel)} views or "
                f"allocations, {len(self.host_reads)} host reads")


def count_operations(fn: Callable[[], object], *, warmup: bool = True) -> OperationCount:
    """The ATen operations one call of ``fn`` dispatches (a ``TorchDispatchMode`` records them), after a first call
    that fills the caches as a model's first step does (``warmup=False`` counts the first call). ``fn`` is a callable
    of no arguments."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    check_bool("warmup", warmup)
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Record(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.operations: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.operations.append(str(func))
            return func(*args, **(kwargs or {}))

    if warmup:
        fn()
    with _Record() as record:
        fn()
    return OperationCount(tuple(record.operations))


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


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine()


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _tolerance(dtype: torch.dtype) -> float:
    return {torch.float64: 1e-9, torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}[dtype]


def _check_device_dtype(device: object, dtype: object) -> tuple[torch.device, torch.dtype]:
    device = check_device("device", device)
    if device is None or device.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or a CUDA device, got {device!r}")
    check_dtype("dtype", dtype, "floating")
    return device, dtype  # type: ignore[return-value]


def run_rope_benchmark(
    shape: tuple[int, int, int, int] = (1, 16, 4096, 128),
    *,
    repeats: int = 20,
    seed: int = 0,
    compiled: bool = False,
    allocations: bool = False,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> list[BenchmarkRow]:
    """Time every implementation on one random input of ``shape`` (batch, heads, seq, head_dim) and ``dtype`` (a
    floating dtype) on ``device`` (``"cpu"`` or a CUDA device).

    Also checks that they all compute the same rotation (within the dtype's rounding), so a fast wrong answer cannot
    win. Each candidate is called 3 times to warm up, then once per round for ``repeats`` rounds, in turn (see the
    module docstring). ``compiled`` adds the ``torch.compile`` rows (left out, with a message on stderr, where
    ``torch.compile`` does not work); ``allocations`` measures the bytes each row allocates on the CPU
    (:func:`measure_allocation`).
    """
    import sys

    if not isinstance(shape, tuple) or len(shape) != 4:
        raise TypeError(f"shape must be a tuple (batch, heads, seq, head_dim), got {shape!r}")
    for name, size in zip(("batch", "heads", "seq", "head_dim"), shape):
        check_positive_int(f"shape {name}", size)
    check_even("head_dim", shape[-1])
    repeats = check_int("repeats", repeats, minimum=1, maximum=MAX_REPEATS)
    device, dtype = _check_device_dtype(device, dtype)
    # x, the references, the tables, the buffers and the candidates' outputs and temporaries: about 20 copies of x
    check_memory("shape", 20 * 8 * numel(*shape), f"an input of shape {shape} and its rotations")
    seed = check_int("seed", seed, minimum=0, maximum=2**63 - 1)
    compiled = check_bool("compiled", compiled)
    allocations = check_bool("allocations", allocations)
    if allocations and device.type != "cpu":
        raise ValueError("allocations are measured on the CPU only (the profiler's CPU memory events)")
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=generator).to(device=device, dtype=dtype)
    seq, head_dim = shape[-2], shape[-1]
    half = head_dim // 2
    inv_freq, _ = rope_frequencies(head_dim, dtype=torch.float64)
    cos, sin = rope_cos_sin(torch.arange(seq), inv_freq)  # float32, (seq, head_dim / 2)
    cos, sin = cos.to(device), sin.to(device)
    cos_full, sin_full = torch.cat([cos, cos], -1).to(dtype), torch.cat([sin, sin], -1).to(dtype)  # as HF: x's dtype
    freqs_cis = torch.complex(cos, sin)
    positions = torch.arange(seq, device=device)
    module = RotaryEmbedding(head_dim, layout="half", max_positions=seq).to(device)
    copy_buffer = torch.empty_like(x)
    negated, rotated, first, second, summed = (torch.empty_like(x[..., :half]), torch.empty_like(x),
                                              torch.empty_like(x), torch.empty_like(x), torch.empty_like(x))

    def textbook_preallocated() -> torch.Tensor:
        torch.neg(x[..., half:], out=negated)
        torch.cat([negated, x[..., :half]], dim=-1, out=rotated)
        torch.mul(x, cos_full, out=first)
        torch.mul(rotated, sin_full, out=second)
        return torch.add(first, second, out=summed)

    ref_half = apply_rope(x.double(), layout="half").to(dtype)
    ref_inter = apply_rope(x.double(), layout="interleaved").to(dtype)
    candidates: list[tuple[str, Callable[[], object], torch.Tensor | None]] = [
        ("clone", lambda: x.clone(), None),
        ("copy into preallocated", lambda: copy_buffer.copy_(x), None),
        ("textbook half", lambda: _textbook(x, cos_full, sin_full), ref_half),
        ("textbook half, preallocated", textbook_preallocated, ref_half),
        ("apply_rope half", lambda: apply_rope(x, layout="half"), ref_half),
        ("complex interleaved", lambda: _complex(x, freqs_cis), ref_inter),
        ("apply_rope interleaved", lambda: apply_rope(x, layout="interleaved"), ref_inter),
        ("apply_rope half, positions", lambda: apply_rope(x, positions, layout="half"), ref_half),
        ("RotaryEmbedding half", lambda: module(x), ref_half),
    ]
    if compiled:
        try:
            fused_textbook = torch.compile(lambda t: _textbook(t, cos_full, sin_full), dynamic=False)
            with torch.inference_mode():
                fused_textbook(x)
            candidates.append(("compiled textbook half", lambda: fused_textbook(x), ref_half))
        except Exception as error:  # no compiler, an unsupported platform: the row is left out, and why
            print(f"compiled textbook half: left out (torch.compile failed: {type(error).__name__})", file=sys.stderr)
        if device.type == "cpu" and dtype == torch.float32:
            for layout, reference in (("half", ref_half), ("interleaved", ref_inter)):
                fn, reason = compiled_rope(layout, x)
                if fn is None:
                    print(f"compiled {layout}: left out ({reason})", file=sys.stderr)
                    continue
                candidates.append((f"compiled {layout}", lambda fn=fn: fn(x, cos, sin), reference))
    tolerance = _tolerance(dtype)
    with torch.inference_mode():
        for name, fn, reference in candidates:
            if reference is not None:
                got = fn()
                assert isinstance(got, torch.Tensor)
                error = float((got.double() - reference.double()).abs().max())
                if error > tolerance * max(1.0, float(reference.abs().max())):
                    raise AssertionError(f"{name} computes another rotation (largest difference {error:.3g})")
    samples: dict[str, list[float]] = {name: [] for name, _, _ in candidates}
    cpu: dict[str, list[float]] = {name: [] for name, _, _ in candidates}
    cuda = device.type == "cuda"
    with torch.inference_mode():
        for _, fn, _ in candidates:
            for _ in range(3):
                fn()
        _synchronize(device)
        for _ in range(repeats):
            for name, fn, _ in candidates:
                if cuda:
                    start_event, end_event = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start_event.record()
                    fn()
                    end_event.record()
                    end_event.synchronize()
                    samples[name].append(float(start_event.elapsed_time(end_event)))
                else:
                    start, cpu_start = time.perf_counter(), time.thread_time()
                    fn()
                    cpu[name].append(1e3 * (time.thread_time() - cpu_start))
                    samples[name].append(1e3 * (time.perf_counter() - start))
        memory = {name: measure_allocation(fn) if allocations else (None, None) for name, fn, _ in candidates}
    return [
        BenchmarkRow(name, max(_quantile(samples[name], 0.5), 1e-9), tuple(samples[name]), tuple(cpu[name]),
                     *memory[name])
        for name, _, _ in candidates
    ]


def run_decode_benchmark(
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.bfloat16,
    heads: int = 32,
    head_dim: int = 128,
    position: int = 4000,
    calls: int = 200,
    repeats: int = 5,
) -> list[BenchmarkRow]:
    """One decoding step, ``x`` of shape ``(1, heads, 1, head_dim)`` at ``position``: the wall time per call (ms),
    over ``calls`` calls back to back (a GPU is synchronised once at the end of each batch), in ``repeats`` rounds that
    take the rows in turn. Here the launches and the Python around them are the cost, not the arithmetic.

    Rows: ``clone``; ``textbook half (cos/sin given)`` (Hugging Face's eager formula with the row of cos/sin made
    once, as a model makes it once for all its layers); ``apply_rope half, offset`` and ``apply_rope half,
    positions``; ``RotaryEmbedding half, offset`` and ``RotaryEmbedding half, positions``. ``heads`` and ``calls``
    in ``1 ... 100000``, ``head_dim`` even, ``position`` in ``0 ... 2**40``.
    """
    device, dtype = _check_device_dtype(device, dtype)
    heads = check_int("heads", heads, minimum=1, maximum=MAX_REPEATS)
    head_dim = check_even("head_dim", head_dim)
    check_memory("head_dim", 64 * heads * head_dim, f"a decoding step of {heads} heads x {head_dim}")
    position = check_int("position", position, minimum=0, maximum=2**40)
    calls = check_int("calls", calls, minimum=1, maximum=MAX_REPEATS)
    repeats = check_int("repeats", repeats, minimum=1, maximum=MAX_REPEATS)
    x = torch.randn(1, heads, 1, head_dim, generator=torch.Generator().manual_seed(0)).to(device=device, dtype=dtype)
    where = torch.tensor([position], device=device)
    inv_freq, _ = rope_frequencies(head_dim, dtype=torch.float64)
    cos, sin = rope_cos_sin(torch.tensor([position]), inv_freq)
    cos_full = torch.cat([cos, cos], -1).to(device=device, dtype=dtype)
    sin_full = torch.cat([sin, sin], -1).to(device=device, dtype=dtype)
    module = RotaryEmbedding(head_dim, layout="half").to(device)
    candidates: list[tuple[str, Callable[[], object]]] = [
        ("clone", lambda: x.clone()),
        ("textbook half (cos/sin given)", lambda: _textbook(x, cos_full, sin_full)),
        ("apply_rope half, offset", lambda: apply_rope(x, offset=position, layout="half")),
        ("apply_rope half, positions", lambda: apply_rope(x, where, layout="half")),
        ("RotaryEmbedding half, offset", lambda: module(x, offset=position)),
        ("RotaryEmbedding half, positions", lambda: module(x, where)),
    ]
    reference = apply_rope(x.double(), where, layout="half").to(dtype)
    samples: dict[str, list[float]] = {name: [] for name, _ in candidates}
    with torch.inference_mode():
        for name, fn in candidates[1:]:
            got = fn()
            assert isinstance(got, torch.Tensor)
            if float((got.double() - reference.double()).abs().max()) > _tolerance(dtype) * 4:
                raise AssertionError(f"{name} computes another rotation")
        for _, fn in candidates:
            for _ in range(10):
                fn()
        _synchronize(device)
        for _ in range(repeats):
            for name, fn in candidates:
                start = time.perf_counter()
                for _ in range(calls):
                    fn()
                _synchronize(device)
                samples[name].append(1e3 * (time.perf_counter() - start) / calls)
    return [BenchmarkRow(name, max(_quantile(samples[name], 0.5), 1e-9), tuple(samples[name]))
            for name, _ in candidates]


def _row_record(row: BenchmarkRow, clone: float) -> dict[str, object]:
    record: dict[str, object] = {"ms": row.milliseconds, "x_clone": row.milliseconds / clone}
    if row.samples:
        record["iqr_ms"] = [row.quantile(0.25), row.quantile(0.75)]
    if row.cpu_milliseconds is not None:
        record["cpu_ms"] = row.cpu_milliseconds
    if row.peak_bytes is not None:
        record["peak_bytes"] = row.peak_bytes
    return record


def main(argv: list[str] | None = None) -> None:
    import datetime
    import json
    import subprocess

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16", "float64"], action="append",
                        help="repeatable; default float32 on the CPU, bfloat16 and float32 on a GPU")
    parser.add_argument("--batch", type=int, default=None, help="default 1 on the CPU, 4 on a GPU")
    parser.add_argument("--heads", type=int, default=None, help="default 16 on the CPU, 32 on a GPU")
    parser.add_argument("--seq", type=int, default=None, help="default 4096 on the CPU, 8192 on a GPU")
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's current count)")
    parser.add_argument("--repeats", type=int, default=None, help="rounds (default 20 on the CPU, 50 on a GPU)")
    parser.add_argument("--no-compile", action="store_true", help="leave out the torch.compile rows")
    parser.add_argument("--no-allocations", action="store_true", help="do not measure the bytes allocated (CPU)")
    parser.add_argument("--no-decode", action="store_true", help="leave out the decoding step")
    parser.add_argument("--json", default=None, help="also write the results, with the machine and load, to this file")
    args = parser.parse_args(argv)
    device = check_device("--device", args.device)
    if device is None or device.type not in ("cpu", "cuda"):
        parser.error(f"--device must be cpu or cuda, got {args.device}")
    gpu = device.type == "cuda"
    if args.threads is not None:
        torch.set_num_threads(check_positive_int("--threads", args.threads))
    shape = (args.batch or (4 if gpu else 1), args.heads or (32 if gpu else 16), args.seq or (8192 if gpu else 4096),
             args.head_dim)
    dtypes = [getattr(torch, name) for name in (args.dtype or (["bfloat16", "float32"] if gpu else ["float32"]))]
    repeats = args.repeats or (50 if gpu else 20)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=os.path.dirname(os.path.abspath(__file__)), timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    from . import _rope_triton
    from .rope import _fused

    fused = _fused(torch.empty(0, device=device))
    triton_version = getattr(_rope_triton.triton, "__version__", None)
    header = (f"RoPE on {device.type} ({_device_name(device)}), torch {torch.__version__}, "
              f"{torch.get_num_threads()} threads, course_pe {commit or '(no git)'}"
              + (f", load average {load:.1f} on {os.cpu_count()} cores" if load is not None else "")
              + (f"; fused Triton kernel {'used' if fused else 'not used'} (triton {triton_version or 'not installed'})"
                 if gpu else ""))
    print(header)
    record: dict[str, object] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": device.type, "device_name": _device_name(device), "torch": torch.__version__,
        "triton": triton_version, "fused_kernel": fused, "course_pe_commit": commit, "threads": torch.get_num_threads(),
        "load_average_1min": load, "cores": os.cpu_count(), "command": "python -m course_pe.benchmark "
        + " ".join(argv if argv is not None else __import__("sys").argv[1:]), "prefill": [], "decode": [],
    }
    targets = GPU_RATIOS if gpu else RATIOS
    for dtype in dtypes:
        rows = run_rope_benchmark(shape, repeats=repeats, compiled=not args.no_compile, device=device, dtype=dtype,
                                  allocations=not args.no_allocations and not gpu)
        print(f"prefill {shape} {str(dtype).replace('torch.', '')}, median of {repeats} rounds"
              + (" (CUDA events)" if gpu else ""))
        for line in format_report(rows, targets=targets):
            print(line)
        clone = next(r.milliseconds for r in rows if r.name == "clone")
        record["prefill"].append({"shape": list(shape), "dtype": str(dtype).replace("torch.", ""),  # type: ignore[union-attr]
                                  "rows": {r.name: _row_record(r, clone) for r in rows}})
    if not args.no_decode:
        for dtype in dtypes:
            rows = run_decode_benchmark(device=device, dtype=dtype, heads=shape[1], head_dim=shape[3])
            print(f"decode step (1, {shape[1]}, 1, {shape[3]}) {str(dtype).replace('torch.', '')} at position 4000, "
                  "wall time per call")
            for line in format_report(rows, targets=DECODE_RATIOS, unit="us"):
                print(line)
            clone = next(r.milliseconds for r in rows if r.name == "clone")
            record["decode"].append({"shape": [1, shape[1], 1, shape[3]], "dtype": str(dtype).replace("torch.", ""),  # type: ignore[union-attr]
                                     "rows": {r.name: _row_record(r, clone) for r in rows}})
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
        print(f"written: {args.json}")


if __name__ == "__main__":
    main()
