import pytest

from course_pe.seeds_benchmark import SeedsTiming, main, run_seeds_benchmark


def test_seeds_benchmark_times_both_arms(capsys):
    t = run_seeds_benchmark(2, steps=2, repeats=2, d_model=16, seq_len=4, batch_size=2)
    assert isinstance(t, SeedsTiming) and t.seeds == 2
    for times in (t.separate_wall, t.batched_wall, t.separate_cpu, t.batched_cpu):
        assert len(times) == 2 and all(x >= 0 for x in times)
    assert t.speedup > 0
    main(["--seeds", "2", "--steps", "1", "--repeats", "1", "--d-model", "16", "--seq", "4", "--batch", "2"])
    out = capsys.readouterr().out
    assert "speed-up" in out and "separate" in out and "batched" in out


def test_seeds_benchmark_rejects_bad_arguments():
    with pytest.raises(ValueError, match="seeds"):
        run_seeds_benchmark(0)
    with pytest.raises(TypeError, match="repeats"):
        run_seeds_benchmark(2, repeats=1.5)
