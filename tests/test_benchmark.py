"""The benchmark's reference implementations, its ratios and its report (no timing limits asserted)."""

import math
import os
import platform

import pytest
import torch

from course_pe import apply_rope, benchmark
from course_pe import rope_cos_sin as cpe_cos_sin
from course_pe import rope_frequencies as cpe_frequencies
from course_pe.benchmark import (
    DECODE_RATIOS,
    GPU_RATIOS,
    RATIOS,
    BenchmarkRow,
    benchmark_ratios,
    complex_rope,
    format_report,
    main,
    ratio_quantiles,
    rotate_half,
    run_decode_benchmark,
    run_rope_benchmark,
    textbook_rope,
    time_call,
)

NAMES = ["clone", "copy into preallocated", "textbook half", "textbook half, preallocated", "apply_rope half",
         "complex interleaved", "apply_rope interleaved", "apply_rope half, positions", "RotaryEmbedding half"]
RATIO_NAMES = ["clone", "textbook half", "apply_rope half", "complex interleaved", "apply_rope interleaved"]


def closed_form_tables(seq: int, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin of p * 10000**(-2i/d) with Python floats (independent of course_pe)."""
    cos = torch.tensor([[math.cos(p * 10000 ** (-2 * i / d)) for i in range(d // 2)] for p in range(seq)], dtype=torch.float64)
    sin = torch.tensor([[math.sin(p * 10000 ** (-2 * i / d)) for i in range(d // 2)] for p in range(seq)], dtype=torch.float64)
    return cos, sin


def test_reference_formulations_agree_with_apply_rope():
    x = torch.randn(2, 3, 10, 8, dtype=torch.float64)
    cos, sin = closed_form_tables(10, 8)
    full_cos, full_sin = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
    torch.testing.assert_close(textbook_rope(x, full_cos, full_sin), apply_rope(x, layout="half"), rtol=0, atol=1e-12)
    torch.testing.assert_close(complex_rope(x, torch.complex(cos, sin)).double(), apply_rope(x.float()).double(),
                               rtol=0, atol=1e-5)
    assert torch.equal(rotate_half(torch.tensor([1.0, 2.0, 3.0, 4.0])), torch.tensor([-3.0, -4.0, 1.0, 2.0]))


def test_benchmark_runs_and_reports_every_implementation():
    rows = run_rope_benchmark((1, 2, 64, 16), repeats=3)
    assert [r.name for r in rows] == NAMES
    assert all(math.isfinite(r.milliseconds) and r.milliseconds > 0 for r in rows)
    ratios = benchmark_ratios(rows)
    times = {r.name: r.milliseconds for r in rows}
    # each ratio is exactly the quotient of the two timings it names (computed from this run's rows)
    assert ratios["textbook half / apply_rope half"] == times["textbook half"] / times["apply_rope half"]
    assert ratios["apply_rope interleaved / complex"] == times["apply_rope interleaved"] / times["complex interleaved"]
    assert ratios["apply_rope interleaved / clone"] == times["apply_rope interleaved"] / times["clone"]


def test_ratios_and_report_from_known_rows():
    rows = [BenchmarkRow(n, ms) for n, ms in zip(RATIO_NAMES, [2.0, 10.0, 4.0, 3.0, 2.5])]
    assert benchmark_ratios(rows) == {
        "textbook half / apply_rope half": 2.5,
        "apply_rope interleaved / complex": 2.5 / 3.0,
        "apply_rope interleaved / clone": 1.25,
        "apply_rope half / clone": 2.0,
    }
    lines = format_report(rows)
    assert len(lines) == len(RATIO_NAMES) + len(RATIOS)
    for line, name, ms in zip(lines, RATIO_NAMES, [2.0, 10.0, 4.0, 3.0, 2.5]):  # one row per implementation, in order
        assert line.split("  ")[1].strip() == name
        assert f"{ms:8.2f} ms" in line and f"{ms / 2.0:5.2f} x clone" in line
    assert lines[5].strip().startswith("textbook half / apply_rope half") and "= 2.50x (target >= 1.25)" in lines[5]
    assert "= 0.83x (target <= 1.2)" in lines[6]
    assert "= 1.25x (target <= 1.5)" in lines[7]
    assert lines[8].strip().startswith("apply_rope half / clone") and "= 2.00x (target <= 3.0)" in lines[8]
    with pytest.raises(ValueError, match="lack"):
        benchmark_ratios(rows[1:])
    # the compiled rows' ratios appear only with the rows
    more = rows + [BenchmarkRow("compiled half", 2.2), BenchmarkRow("compiled interleaved", 1.8)]
    assert benchmark_ratios(more)["compiled half / clone"] == 1.1
    assert benchmark_ratios(more)["compiled interleaved / clone"] == 0.9
    assert len(format_report(more)) == len(more) + len(RATIOS) + 2
    # other target sets: the GPU's and the decoding step's, in microseconds
    gpu = rows + [BenchmarkRow("RotaryEmbedding half", 3.0)]
    assert benchmark_ratios(gpu, targets=GPU_RATIOS)["RotaryEmbedding half / clone"] == 1.5
    decode = [BenchmarkRow(n, ms) for n, ms in (("clone", 0.01), ("textbook half (cos/sin given)", 0.05),
                                                ("apply_rope half, positions", 0.055),
                                                ("RotaryEmbedding half, positions", 0.07))]
    lines = format_report(decode, targets=DECODE_RATIOS, unit="us")
    assert "   55.00 us    5.50 x clone" in lines[2]
    assert "= 1.10x (target <= 1.2)" in lines[4] and "= 1.40x (target <= 1.2)" in lines[5]
    with pytest.raises(TypeError, match="targets must be a dict"):
        format_report(decode, targets={"a": ("clone", "clone", 1.0)})


def test_main_prints_header_rows_and_ratios(capfd):
    main(["--batch", "1", "--heads", "1", "--seq", "16", "--head-dim", "8", "--repeats", "1", "--no-compile"])
    # python -m course_pe.benchmark --device cuda is the same command on a GPU (CUDA events); here no CUDA: refused
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="not available here"):
            main(["--device", "cuda"])
    captured = capfd.readouterr()  # file descriptors: the profiler's C++ side writes to fd 2
    out = captured.out.splitlines()
    assert out[0].startswith("RoPE on cpu (") and "threads" in out[0] and "load average" in out[0]
    assert out[1].startswith("prefill (1, 1, 16, 8) float32, median of 1 rounds")
    rows = out[2:2 + len(NAMES)]
    assert [line.split("  ")[1].strip() for line in rows] == NAMES
    assert all("allocates" in line for line in rows)  # allocations are measured by default
    ratios = out[2 + len(NAMES):2 + len(NAMES) + len(RATIOS)]
    assert [line.strip().split(" = ")[0].strip() for line in ratios] == list(RATIOS)
    assert out[2 + len(NAMES) + len(RATIOS)].startswith("decode step (1, 1, 1, 8) float32 at position 4000")
    assert "profiler_start" not in captured.err


def test_time_call_is_the_median():
    calls = []
    durations = iter([0.0, 0.002, 0.030, 0.0])  # 1 warm-up then three timed calls: 2 ms, 30 ms, 0 ms

    def fn():
        import time

        calls.append(1)
        time.sleep(next(durations))

    ms = time_call(fn, repeats=3, warmup=1)
    assert len(calls) == 4
    assert 2.0 <= ms < 25.0  # the median (2 ms plus overhead), neither the 0 ms call nor the 30 ms outlier


def test_rows_keep_one_sample_per_round_and_report_their_median():
    rows = run_rope_benchmark((1, 2, 64, 16), repeats=5)
    for row in rows:
        assert len(row.samples) == 5
        assert row.milliseconds == sorted(row.samples)[2]
        assert row.quantile(0.25) <= row.milliseconds <= row.quantile(0.75)


def test_ratio_quantiles_pair_the_calls_of_each_round():
    a = BenchmarkRow("a", 4.0, (2.0, 4.0, 9.0))
    b = BenchmarkRow("b", 2.0, (1.0, 2.0, 3.0))
    # per-round ratios 2, 2, 3 (the ratio of medians is also 2, but the spread comes from the pairs)
    assert ratio_quantiles(a, b) == (2.0, 2.0, 2.5)
    with pytest.raises(ValueError):
        ratio_quantiles(a, BenchmarkRow("c", 1.0, (1.0,)))
    with pytest.raises(ValueError):
        run_rope_benchmark((1, 1, 8, 4), repeats=0)


# ----------------------------------------------------------------------------- issue 27: CPU time, allocations, compiled rows


def test_rows_keep_cpu_time_and_allocations():
    rows = run_rope_benchmark((1, 2, 64, 16), repeats=3, allocations=True)
    by_name = {r.name: r for r in rows}
    x_bytes = 1 * 2 * 64 * 16 * 4
    for row in rows:
        assert len(row.cpu_samples) == 3 and row.cpu_milliseconds is not None and row.peak_bytes is not None
    # a clone allocates exactly one copy of x; apply_rope at most one output at any moment (its tables are cached);
    # the textbook formula several temporaries
    assert by_name["clone"].allocated_bytes == by_name["clone"].peak_bytes == x_bytes
    assert by_name["apply_rope half"].peak_bytes == x_bytes
    assert by_name["textbook half"].peak_bytes >= 2 * x_bytes
    assert by_name["textbook half, preallocated"].peak_bytes == 0  # the same passes into buffers made once
    assert by_name["copy into preallocated"].peak_bytes == 0
    lines = format_report(rows)
    assert "allocates 1.00 x clone at peak" in lines[NAMES.index("apply_rope half")] and "CPU" in lines[4]


def test_measure_allocation_counts_bytes():
    from course_pe.benchmark import measure_allocation

    x = torch.zeros(1000, dtype=torch.float64)
    assert measure_allocation(lambda: x.clone()) == (8000, 8000)
    assert measure_allocation(lambda: (x.clone(), x.clone())) == (16000, 16000)
    assert measure_allocation(lambda: x.add_(x)) == (0, 0)  # in place: nothing (a Python scalar would be 8 bytes)


def test_compiled_rows_fall_back_cleanly(monkeypatch, capsys):
    """Where torch.compile fails (no compiler), the compiled rows are left out with the reason, not an error."""
    from course_pe import benchmark

    def broken(*args, **kwargs):
        raise RuntimeError("no C++ compiler found")

    monkeypatch.setattr(torch, "compile", broken)
    fn, reason = benchmark.compiled_rope("half")
    assert fn is None and "no C++ compiler found" in reason
    rows = run_rope_benchmark((1, 1, 8, 4), repeats=1, compiled=True)
    assert [r.name for r in rows] == NAMES
    assert "compiled half: left out (torch.compile failed: RuntimeError: no C++ compiler found)" in capsys.readouterr().err


def test_compiled_rope_is_one_pass_and_right():
    """With a working compiler (this machine has gcc) the compiled rotation equals apply_rope; it allocates one
    output per call (no temporaries)."""
    from course_pe.benchmark import compiled_rope, measure_allocation

    x = torch.randn(1, 2, 16, 8, generator=torch.Generator().manual_seed(1))
    fn, reason = compiled_rope("half", x)
    if fn is None:
        pytest.fail(f"torch.compile does not work on this machine: {reason}")
    inv, _ = cpe_frequencies(8)
    cos, sin = cpe_cos_sin(torch.arange(16), inv)
    torch.testing.assert_close(fn(x, cos, sin), apply_rope(x, layout="half"), rtol=1e-6, atol=1e-6)
    with torch.inference_mode():
        assert measure_allocation(lambda: fn(x, cos, sin))[1] == x.numel() * 4


def test_decode_benchmark_rows_and_checks():
    """The decoding step's rows: every implementation rotates the one position as apply_rope does (checked before
    timing), each row keeps one sample per round (wall time per call)."""
    rows = run_decode_benchmark(device="cpu", dtype=torch.float32, heads=2, head_dim=8, calls=3, repeats=2)
    assert [r.name for r in rows] == ["clone", "textbook half (cos/sin given)", "apply_rope half, offset",
                                      "apply_rope half, positions", "RotaryEmbedding half, offset",
                                      "RotaryEmbedding half, positions"]
    assert all(len(r.samples) == 2 and r.milliseconds > 0 for r in rows)
    assert set(benchmark_ratios(rows, targets=DECODE_RATIOS)) == set(DECODE_RATIOS)
    with pytest.raises(ValueError, match="device must be 'cpu' or a CUDA device"):
        run_decode_benchmark(device="meta")


def test_bfloat16_rows_are_checked_against_the_float64_rotation():
    rows = run_rope_benchmark((1, 2, 16, 8), repeats=1, dtype=torch.bfloat16)
    assert [r.name for r in rows] == NAMES


def test_page_faults_in_a_fresh_process_follow_glibc():
    """In a fresh process with glibc's defaults, every 32 MiB clone is a fresh mapping (one fault per page, or per
    2 MiB with huge pages) and the copy into a tensor allocated once faults nothing. Whether later 31 MiB clones come
    from the heap depends on its room to grow, which glibc does not promise: only counted. Elsewhere only the shape of
    the answer is checked."""
    faults = benchmark.page_faults_in_fresh_process(
        "small, large = torch.randn(1, 31, 2048, 128), torch.randn(1, 32, 2048, 128)\nout = torch.empty_like(large)",
        {"clone 31": "small.clone()", "clone 32": "large.clone()", "copy 32": "out.copy_(large)"}, threads=1)
    assert set(faults) == {"clone 31", "clone 32", "copy 32"}
    glibc_defaults = platform.libc_ver()[0] == "glibc" and not any(
        key.startswith("MALLOC_") or key in ("GLIBC_TUNABLES", "LD_PRELOAD") for key in os.environ)
    if glibc_defaults:
        assert faults["clone 32"] >= 16
        assert faults["copy 32"] * 10 <= faults["clone 32"] and faults["clone 31"] >= 0


def test_page_faults_in_a_fresh_process_reports_a_failing_child():
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        benchmark.page_faults_in_fresh_process("y = 1 / 0", {"one": "1"})
