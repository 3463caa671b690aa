"""The benchmark's reference implementations, its ratios and its report (no timing limits asserted)."""

import math

import pytest
import torch

from course_pe import apply_rope
from course_pe.benchmark import (
    RATIOS,
    BenchmarkRow,
    benchmark_ratios,
    complex_rope,
    format_report,
    main,
    ratio_quantiles,
    rotate_half,
    run_rope_benchmark,
    textbook_rope,
    time_call,
)

NAMES = ["clone", "textbook half", "apply_rope half", "complex interleaved", "apply_rope interleaved"]


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
    rows = [BenchmarkRow(n, ms) for n, ms in zip(NAMES, [2.0, 10.0, 4.0, 3.0, 2.5])]
    assert benchmark_ratios(rows) == {
        "textbook half / apply_rope half": 2.5,
        "apply_rope interleaved / complex": 2.5 / 3.0,
        "apply_rope interleaved / clone": 1.25,
    }
    lines = format_report(rows)
    assert len(lines) == len(NAMES) + len(RATIOS)
    for line, name, ms in zip(lines, NAMES, [2.0, 10.0, 4.0, 3.0, 2.5]):  # one row per implementation, in order
        assert line.split("  ")[1].strip() == name
        assert f"{ms:8.2f} ms" in line and f"{ms / 2.0:5.2f} x clone" in line
    assert lines[5].strip().startswith("textbook half / apply_rope half") and "= 2.50x (target >= 2.5)" in lines[5]
    assert "= 0.83x (target <= 1.2)" in lines[6]
    assert "= 1.25x (target <= 1.5)" in lines[7]
    with pytest.raises(ValueError, match="lack"):
        benchmark_ratios(rows[1:])


def test_main_prints_header_rows_and_ratios(capsys):
    main(["--batch", "1", "--heads", "1", "--seq", "16", "--head-dim", "8", "--repeats", "1"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("RoPE on (1, 1, 16, 8) float32")
    assert [line.split("  ")[1].strip() for line in out[1:6]] == NAMES
    assert [line.strip().split(" = ")[0].strip() for line in out[6:]] == list(RATIOS)


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
