"""The benchmark's reference implementations compute the same rotation (no timing asserted here)."""

import pytest
import torch

from course_pe import apply_rope, rope_cos_sin, rope_frequencies
from course_pe.benchmark import (
    BenchmarkRow, complex_rope, ratio_quantiles, rotate_half, run_rope_benchmark, textbook_rope,
)


def test_reference_formulations_agree_with_apply_rope():
    x = torch.randn(2, 3, 10, 8, dtype=torch.float64)
    inv, _ = rope_frequencies(8, dtype=torch.float64)
    cos, sin = rope_cos_sin(torch.arange(10), inv, dtype=torch.float64)
    full_cos, full_sin = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
    torch.testing.assert_close(textbook_rope(x, full_cos, full_sin), apply_rope(x, layout="half"))
    torch.testing.assert_close(complex_rope(x, torch.complex(cos, sin)), apply_rope(x))
    assert torch.equal(rotate_half(torch.tensor([1.0, 2.0, 3.0, 4.0])), torch.tensor([-3.0, -4.0, 1.0, 2.0]))


def test_benchmark_runs_and_reports_every_implementation():
    rows = run_rope_benchmark((1, 2, 64, 16), repeats=1)
    assert [r.name for r in rows] == ["clone", "textbook half", "apply_rope half", "complex interleaved", "apply_rope interleaved"]
    assert all(r.milliseconds > 0 for r in rows)


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
