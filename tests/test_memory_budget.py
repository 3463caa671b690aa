"""The memory budget (course_pe._validation.check_memory) and the estimate each function checks before it allocates.

An error that refuses a size says how much the call would need; these tests pin that number (``MemoryBudgetError.
needed``) and the message for the estimates of the core modules, so a changed estimate is a decision, not an accident.
The estimates are upper bounds of what the call allocates at once (outputs and float64 temporaries), written out here
from each function's docstring or comment. A budget of a few bytes (``COURSE_PE_MAX_BYTES``) makes the first estimate
of each call refuse.
"""

from __future__ import annotations

import pytest
import torch

import course_pe as cpe
from course_pe._validation import MemoryBudgetError, human_bytes, memory_budget
from course_pe.long_context_eval import PasskeyTask
from course_pe.positions import (
    make_positions,
    packed_attention_mask,
    packed_position_ids,
    packed_position_ids_from_boundaries,
    position_ids_from_attention_mask,
)


def _refusal(monkeypatch, budget: int, call) -> MemoryBudgetError:
    monkeypatch.setenv("COURSE_PE_MAX_BYTES", str(budget))
    with pytest.raises(MemoryBudgetError) as info:
        call()
    return info.value


CASES = [
    # (id, budget, call, needed, message start)
    ("alibi_bias", 1, lambda: cpe.alibi_bias(3, 4, 5), 20 * (16 + 16 * 3 + 4 * 3),
     "num_heads, q_len and k_len: a (1, 3, 4, 5) bias would need about 1.5 KiB"),
    ("alibi_bias float64", 1, lambda: cpe.alibi_bias(2, 1, 3, dtype=torch.float64), 3 * (16 + 16 * 2 + 8 * 2),
     "num_heads, q_len and k_len: a (1, 2, 1, 3) bias would need about 192 B"),
    ("position_ids_from_attention_mask", 1, lambda: position_ids_from_attention_mask(torch.ones(2, 3, dtype=torch.bool)), 2 * 6 * 8,
     "attention_mask: its int64 position ids would need about 96 B"),
    ("packed_position_ids", 1, lambda: packed_position_ids([3, 2]), 3 * 5 * 8, "lengths: 5 packed position ids would"),
    ("packed_position_ids_from_boundaries", 1, lambda: packed_position_ids_from_boundaries([0, 3, 5]), 3 * 5 * 8,
     "boundaries: 5 packed position ids would"),
    ("packed_attention_mask", 1, lambda: packed_attention_mask([3, 2]), 3 * 25 + 16 * 5,
     "lengths: a 5 x 5 bool mask would need about 155 B"),
    ("make_positions", 1, lambda: make_positions(torch.ones(2, 3, dtype=torch.long), 0), 3 * 6 * 8,
     "tokens: its int64 position ids would need about 144 B"),
    ("layout_permutation", 1, lambda: cpe.layout_permutation(8), 5 * 8 * 8,
     "head_dim: a permutation of 8 dimensions would need about 320 B"),
    ("RotaryEmbedding cache", 1, lambda: cpe.RotaryEmbedding(8, max_positions=16, rotary_dim=4), 5 * 8 * 16 * (2 + 1),
     "head_dim (rotary_dim) and max_positions: a cos/sin cache of 16 positions x 2 pairs would need about 1.9 KiB"),
    ("rope_frequencies", 1, lambda: cpe.rope_frequencies(8), 16 * 8 * 4, "head_dim: 4 frequencies would need about 512 B"),
    ("sinusoidal_frequencies", 1, lambda: cpe.sinusoidal_frequencies(8), 4 * 8 * 4,
     "d_model: 4 frequencies would need about 128 B"),
    ("sinusoidal table", 500, lambda: cpe.sinusoidal_encoding_np(3, 8), 5 * 8 * 24,
     "num_positions: a 3 x 8 table would need about 960 B"),
    ("shift_matrix", 1000, lambda: cpe.shift_matrix(1, 8), 3 * 8 * 64, "d_model: a 8 x 8 matrix would need about 1.5 KiB"),
    ("SinusoidalPositionalEncoding", 1, lambda: cpe.SinusoidalPositionalEncoding(8, max_len=4), 5 * 8 * 32,
     "max_len and d_model: a 4 x 8 table would need about 1.2 KiB"),
    ("t5_relative_position_bucket", 1, lambda: cpe.t5_relative_position_bucket(torch.arange(10)), 10 * 8 * 10,
     "relative_position: its buckets and their temporaries would need about 800 B"),
    ("T5RelativeBias", 1, lambda: cpe.T5RelativeBias(2, num_buckets=32), 2 * 4 * 64,
     "num_buckets and num_heads: a 32 x 2 table would need about 512 B"),
    # red team 2: outputs of positions x a width, unchecked before (32 GB and 16 GB in one call)
    ("rope_cos_sin", 1, lambda: cpe.rope_cos_sin(torch.arange(10), torch.ones(4)), 8 * (10 + 3 * 40),
     "positions and inv_freq: cos/sin of 10 positions x 4 frequencies would need about 1.0 KiB"),
    ("PasskeyTask.sample", 1, lambda: PasskeyTask(4, 3).sample(2, 8), 3 * 8 * 16 + 4 * 8 * 2, "batch_size and seq_len: a batch of 2 x 8 tokens would need about 448 B"),
]


@pytest.mark.parametrize("name,budget,call,needed,message", CASES, ids=[c[0] for c in CASES])
def test_estimates_and_messages(monkeypatch, name, budget, call, needed, message):
    error = _refusal(monkeypatch, budget, call)
    assert error.needed == needed and error.budget == budget
    assert str(error).startswith(message), str(error)
    assert str(error).endswith(f"more than the {human_bytes(budget)} this process may use (the machine's memory; "
                               "set COURSE_PE_MAX_BYTES to change the budget)")
    monkeypatch.setenv("COURSE_PE_MAX_BYTES", str(needed))  # exactly the estimate: allowed
    if name not in ("sinusoidal table", "shift_matrix"):  # (these check the frequencies first, within this budget)
        call()


def test_estimates_of_module_calls(monkeypatch):
    """Estimates checked when a built module is called: its sizes come from the call, not the constructor."""
    module = cpe.SinusoidalPositionalEncoding(8, max_len=4)
    error = _refusal(monkeypatch, 1, lambda: module.encoding(3, offset=10**7))
    assert error.needed == 6 * 8 * 3 * 8 and str(error).startswith("length: 3 rows of width 8 would need")
    monkeypatch.delenv("COURSE_PE_MAX_BYTES")
    bias = cpe.T5RelativeBias(3)
    error = _refusal(monkeypatch, 1, lambda: bias(2, 5))
    assert error.needed == 10 * (12 * 8 + 2 * 3 * 4)
    assert str(error).startswith("q_len and k_len: a (1, 3, 2, 5) bias would need")
    monkeypatch.delenv("COURSE_PE_MAX_BYTES")
    rotary = cpe.RotaryEmbedding(8, max_positions=16)
    error = _refusal(monkeypatch, 1, lambda: rotary.cos_sin(torch.arange(10)))
    assert error.needed == 4 * 8 * 10 * (4 + 1) and str(error).startswith("positions: cos/sin of 10 positions x 4 pairs")
    monkeypatch.delenv("COURSE_PE_MAX_BYTES")
    table = cpe.LearnedPositionalEmbedding(8, 6)
    error = _refusal(monkeypatch, 1, lambda: table.lookup(torch.zeros(10, dtype=torch.long)))
    assert error.needed == 8 * 10 + 10 * 6 * 4 and str(error).startswith("positions: 10 rows of width 6 would need")


def test_address_space_limit_counts_what_is_already_mapped():
    """Red team 2: under RLIMIT_AS the budget was the whole limit, although importing torch maps hundreds of MiB of
    it; causal_mask(52000) (2.7 GB) passed the check under a 3 GiB limit and failed in the allocator. The budget is
    now the limit minus the mapped address space (VmSize), so the call is refused before allocating."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import resource, torch
        import course_pe as cpe
        from course_pe._validation import MemoryBudgetError, _address_space_in_use, memory_budget
        mapped = _address_space_in_use()
        assert mapped > 50 * 2**20, mapped  # torch and course_pe are mapped
        limit = mapped + 3 * 2**30
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))
        budget = memory_budget()
        assert 3 * 2**30 - 256 * 2**20 < budget <= 3 * 2**30, (budget, mapped)
        import math
        n = math.isqrt(3 * 2**30 + mapped // 2)  # a mask within the limit, beyond what is left of it
        try:
            cpe.causal_mask(n)
        except MemoryBudgetError as error:
            assert str(error).startswith(f"q_len and k_len: a {n} x {n} mask would need"), str(error)
            print("refused")
    """)
    env = {k: v for k, v in __import__("os").environ.items() if k != "COURSE_PE_MAX_BYTES"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0 and result.stdout.strip() == "refused", result.stderr[-2000:]


def test_budget_sources(monkeypatch):
    monkeypatch.setenv("COURSE_PE_MAX_BYTES", "12345")
    assert memory_budget() == 12345
    for bad in ("lots", "0", "-5"):
        monkeypatch.setenv("COURSE_PE_MAX_BYTES", bad)
        with pytest.raises(ValueError, match="^COURSE_PE_MAX_BYTES must be a"):
            memory_budget()
    monkeypatch.delenv("COURSE_PE_MAX_BYTES")
    assert 2**20 < memory_budget() <= 2**60  # the machine's memory, not a placeholder
    error = MemoryBudgetError("by hand")
    assert isinstance(error, ValueError) and isinstance(error, MemoryError) and error.needed is None


def test_human_bytes():
    assert [human_bytes(n) for n in (0, 512, 1536, 3 * 2**30, 2**63, 2**100)] == [
        "0 B", "512 B", "1.5 KiB", "3.0 GiB", "8.0 EiB", "1.05e+06 YiB"]
