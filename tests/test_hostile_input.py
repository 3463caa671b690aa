"""Hostile input the red team's library probe used (2026-11-24, issue 27), as property tests over the registry.

``tests/test_bad_input.py`` holds one case per public callable (a valid call and its wrong values). Here every case of
the library (the coursework tools are tested in their own files) is called again with each of its arguments replaced
by what broke it in the probe:

* **huge sizes** (10**12, 2**62, 2**63) for every argument that sizes an allocation or a loop (:data:`SIZES`; an
  integer argument that is no size is listed in :data:`NOT_SIZES` with the reason): a ``ValueError`` naming the
  argument, raised before anything is allocated and within seconds (a memory estimate checked against the budget,
  or an explicit upper bound), never an allocator error, an overflow, or a hang;
* **meta tensors** for every tensor argument: a result (shape inference) or a clear error naming the argument;
* **uint8** copies of integer tensors: the int64 answer (a uint8 index is a boolean mask to PyTorch) or a clear error;
* **other floating dtypes** (float64, bfloat16, float16) for float32 tensors: a result or a clear error naming the
  argument (``MultiHeadAttention`` on float64 input used to fail with "mat1 and mat2 must have the same dtype");
* **NumPy integers** for every integer argument: the answer of the Python int;
* ``device="cuda"`` on a machine without CUDA (and ``"meta"``) for every device argument: a clear error or a result.

The memory budget is fixed at 16 GiB here (``COURSE_PE_MAX_BYTES``), so the verdicts do not depend on the machine.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import re
import signal

import numpy as np
import pytest
import torch

from test_bad_input import REGISTRY

import course_pe as cpe

COURSEWORK = ("exercises", "grade", "nbgrader_release", "workbook", "gradebook", "sandbox", "plotting")
LIBRARY = sorted(k for k in REGISTRY if k.split(".")[0] not in COURSEWORK)
HUGE = (10**12, 2**62, 2**63)
TIME_LIMIT = 120  # seconds per call: generous for a loaded machine; a hang would run for hours

# ----------------------------------------------------------------------------- which integer arguments are sizes

#: case -> size arguments, each a name or (name, overrides that make the argument matter).
SIZES: dict[str, tuple] = {
    "alibi.alibi_bias": ("num_heads", "q_len", "k_len"),
    "alibi.alibi_slopes": ("num_heads",),
    "attention.MultiHeadAttention": ("d_model", "num_heads", ("rope_max_positions", {"position": "rope"}),
                                     ("shaw_max_distance", {"position": "shaw"}),
                                     ("t5_num_buckets", {"position": "t5", "t5_max_distance": 2**63})),
    "attention.causal_mask": ("q_len", "k_len"),
    "benchmark.run_rope_benchmark": ("repeats",),
    "benchmark.run_decode_benchmark": ("heads", "head_dim", "calls", "repeats"),
    "benchmark.time_call": ("repeats", "warmup"),
    "learned.LearnedPositionalEmbedding": ("max_positions", "d_model"),
    "learned.LearnedPositionalEmbedding.interpolate": ("new_max_positions",),
    "model.TinyTransformer": ("vocab_size", "d_model", "num_heads", "num_layers", "max_positions", "d_ff",
                              "num_outputs", ("shaw_max_distance", {"position": "shaw"}),
                              ("t5_num_buckets", {"position": "t5", "t5_max_distance": 2**63})),
    "model.TransformerBlock": ("d_model", "num_heads", "d_ff"),
    "permutation.random_permutation": ("n",),
    "rope.RotaryEmbedding": ("head_dim", "max_positions"),
    "rope.layout_permutation": ("head_dim",),
    "rope.permute_qk_weights": ("num_heads",),
    "rope_nd.mrope_position_ids": ("text_before", "text_after"),
    "rope_nd.rope_2d_frequencies": ("head_dim",),
    "rope_nd.xpos_scale": ("head_dim",),
    "rope_scaling.RopeConfig.rotary_embedding": ("max_positions",),
    "rope_scaling.rope_frequencies": ("head_dim",),
    "seeds_benchmark.run_seeds_benchmark": ("seeds", "steps", "repeats", "d_model", "seq_len", "batch_size"),
    "shaw.ShawRelativePositions": ("head_dim", "max_distance"),
    "shaw.shaw_attention": ("max_distance",),
    "shaw.shaw_relative_positions": ("q_len", "k_len"),
    "sinusoidal.SinusoidalPositionalEncoding": ("d_model", "max_len"),
    "sinusoidal.SinusoidalPositionalEncoding.encoding": ("length",),
    "sinusoidal.shift_matrix": ("d_model",),
    "sinusoidal.sinusoidal_encoding": ("num_positions", "d_model"),
    "sinusoidal.sinusoidal_encoding_np": ("num_positions", "d_model"),
    "sinusoidal.sinusoidal_frequencies": ("d_model",),
    "sinusoidal.sinusoidal_wavelengths": ("d_model",),
    "t5.T5RelativeBias": ("num_heads", ("num_buckets", {"max_distance": 2**63})),
    "t5.T5RelativeBias.forward": ("q_len", "k_len"),
    **{f"tasks.{task}.sample": ("batch_size", "seq_len")
       for task in ("ReverseTask", "SortTask", "HistogramTask", "PositionTask", "CopyTask", "MarkovTask")},
    "tasks.MarkovTask": ("num_symbols",),
    "tasks.MarkovTask.loss_floor_by_position": ("seq_len",),
    "tasks.ReverseTask.position_free_optimum": ("seq_len",),
    "tasks.SortTask.position_free_optimum": ("seq_len",),
    "training.evaluate_by_position": ("seq_len", "batch_size", "num_batches"),
    "training.TrainConfig": ("steps",),
    "long_context_eval.PasskeyTask.sample": ("batch_size", "seq_len"),
    "long_context_eval.sliding_window_report": ("seq_len", "batch_size", "num_batches"),
    "training.evaluate_seeds": ("seq_len", "batch_size", "num_batches"),
    "reproducibility.set_determinism": ("threads",),
    "benchmark.page_faults": ("calls",),  # a loop count, at most 1000
    "benchmark.page_faults_in_fresh_process": ("threads",),  # torch threads of the child, at most 1024
    "long_context_eval.passkey_accuracy_by_distance": ("seq_len", "num_sequences"),
    "rope_scaling.complete_turn_pairs": ("rotary_dim",),  # the frequencies of rotary_dim / 2 pairs are built
    "tasks.PrefixTask.sample": ("batch_size", "seq_len"),
}

#: Sizes hidden in a container argument: case -> argument -> huge values.
HUGE_VALUES: dict[str, dict[str, list]] = {
    "benchmark.run_rope_benchmark": {"shape": [(1, 1, 10**12, 4), (2**63, 1, 1, 2), (1, 2**40, 2**40, 2)]},
    "positions.packed_position_ids": {"lengths": [[10**12], [2**53, 2**53], torch.tensor([2**62, 5])]},
    "positions.packed_position_ids_from_boundaries": {"boundaries": [[0, 10**12], [0, 2**53]]},
    "positions.packed_attention_mask": {"lengths": [[10**7], [2**31, 2**31]]},
    "rope_nd.mrope_position_ids": {"grid": [(10**12, 1, 1), (2**40, 2**40, 2**40)]},
    # (steps: TrainConfig itself refuses more than MAX_TRAIN_STEPS, see SIZES)
    "training.train": {"config": [cpe.TrainConfig(batch_size=10**12, steps=1), cpe.TrainConfig(seq_len=2**63, steps=1)]},
    "training.train_seeds": {"config": [cpe.TrainConfig(batch_size=10**12, steps=1)]},
}

#: Integer arguments that are no size, and why a huge value is harmless (or a documented position).
NOT_SIZES: dict[str, str] = {
    "attention.MultiHeadAttention.t5_max_distance": "only divides a logarithm",
    "model.TinyTransformer.t5_max_distance": "only divides a logarithm",
    "t5.T5RelativeBias.max_distance": "only divides a logarithm",
    "t5.t5_relative_position_bucket.max_distance": "only divides a logarithm",
    "t5.t5_relative_position_bucket.num_buckets": "a bucket count; no table is made here (T5RelativeBias checks it)",
    "benchmark.run_rope_benchmark.seed": "a seed",
    "benchmark.run_decode_benchmark.position": "a position (checked against 2**40)",
    "positions.make_positions.padding_idx": "a position (checked against 2**53)",
    "positions.make_positions.past_length": "a position offset (checked against 2**53)",
    "positions.packed_position_ids.start": "a position (checked against 2**53)",
    "positions.packed_position_ids_from_boundaries.start": "a position (checked against 2**53)",
    "positions.position_ids_from_attention_mask.pad_value": "a position (checked against 2**53)",
    "reproducibility.glue.digits": "a rounding precision (round(x, 10**12) is x)",
    "reproducibility.rounded.digits": "a rounding precision (round(x, 10**12) is x)",
    "reproducibility.make_generator.seed": "a seed, bounded by 2**63 - 1",
    "reproducibility.set_determinism.seed": "a seed, bounded by 2**32 - 1",
    "rope.RotaryEmbedding.forward.offset": "a position offset (checked against 2**53)",
    "rope.apply_rope.offset": "a position offset (checked against 2**53)",
    "rope_scaling.DynamicNTKScaling.original_max_positions": "a length in a formula",
    "rope_scaling.Llama3Scaling.original_max_positions": "a length in a formula",
    "rope_scaling.LongRoPEScaling.original_max_positions": "a length in a formula",
    "rope_scaling.YaRNScaling.original_max_positions": "a length in a formula",
    "rope_scaling.yarn_correction_range.original_max_positions": "a length in a formula",
    "rope_scaling.yarn_correction_range.head_dim": "a width in a formula; nothing is allocated",
    "rope_scaling.yarn_softmax_scale.qk_head_dim": "a width in a formula",
    "rope_scaling.RopeConfig.head_dim": "stored; RopeConfig.frequencies and .rotary_embedding check what they build",
    "rope_scaling.RopeConfig.rotary_dim": "stored; RopeConfig.frequencies and .rotary_embedding check what they build",
    "seeds_benchmark.SeedsTiming.seeds": "a count stored with the timings",
    "shaw.shaw_relative_positions.max_distance": "a clipping distance (clamp only), bounded by 2**53",
    "sinusoidal.SinusoidalPositionalEncoding.encoding.offset": "a position (checked against 2**53)",
    "sinusoidal.SinusoidalPositionalEncoding.forward.offset": "a position (checked against 2**53)",
    "sinusoidal.shift_matrix.k": "an offset (any real number)",
    "sinusoidal.sinusoidal_encoding.start": "a position (checked against 2**53)",
    "sinusoidal.sinusoidal_encoding_np.start": "a position (checked against 2**53)",
    "tasks.CopyTask.num_symbols": "stored, at most 2**61 (token ids fit int64); the model's vocab_size is checked where "
                                 "a table is made",
    "tasks.HistogramTask.num_symbols": "stored, at most 2**61 (token ids fit int64); the model's vocab_size is checked where "
                                 "a table is made",
    "tasks.HistogramTask.max_count": "stored (num_outputs of the model, checked there)",
    "tasks.PositionTask.num_symbols": "stored, at most 2**61 (token ids fit int64); the model's vocab_size is checked where "
                                 "a table is made",
    "tasks.PositionTask.max_len": "stored (num_outputs of the model, checked there)",
    "tasks.ReverseTask.num_symbols": "stored, at most 2**61 (token ids fit int64); the model's vocab_size is checked where "
                                 "a table is made",
    "tasks.SortTask.num_symbols": "stored, at most 2**61 (token ids fit int64); the model's vocab_size is checked where "
                                 "a table is made",
    "tasks.MarkovTask.order": "1 or 2",
    "tasks.MarkovTask.branching": "at most num_symbols",
    "tasks.MarkovTask.seed": "a seed, bounded by 2**63 - 1",
    "training.PositionReport.mean_accuracy.start": "a slice bound (any integer)",
    "training.PositionReport.mean_loss.start": "a slice bound (any integer)",
    "training.SeedsResult.result.index": "an index into the seeds",
    "training.TrainConfig.batch_size": "stored; train() checks the memory it needs",
    "training.TrainConfig.seq_len": "stored; train() checks the memory it needs",
    "training.TrainConfig.warmup": "a step count in a formula",
    "training.TrainConfig.seed": "a seed, bounded by 2**63 - 1",
    "training.TrainConfig.log_every": "a step count in a modulus",
    "training.evaluate_by_position.seed": "a seed, bounded by 2**63 - 1",
    "training.evaluate_seeds.seed": "a seed, bounded by 2**63 - 1",
    "training.seed_streams.seed": "a seed, bounded",
    "rope_scaling.rope_config_from_hf.head_dim": "checked by what the configuration builds",
    "long_context_eval.PasskeyTask.num_filler": "a symbol count, at most 2**61 (token ids fit int64); only stored",
    "long_context_eval.PasskeyTask.num_values": "a symbol count, at most 2**61 (token ids fit int64); only stored",
    "long_context_eval.PasskeyTask.at_distance.distance": "a distance inside the sequence, at most 2**16 - 3",
    "long_context_eval.sliding_window_report.window": "a window longer than the input is the whole input (plain "
                                                      "evaluation); the tokens run are bounded via batch_size",
    "long_context_eval.sliding_window_report.sink": "smaller than window (checked)",
    "long_context_eval.sliding_window_report.seed": "a seed, bounded by 2**63 - 1",
    "long_context_eval.window_forward_bytes.length": "an estimate in bytes: nothing is allocated",
    "long_context_eval.window_forward_bytes.batch": "an estimate in bytes: nothing is allocated",
    "long_context_eval.passkey_accuracy_by_distance.chunk": "a batch bound: at most the num_sequences x distances "
                                                            "sequences run at once, and that forward pass is checked "
                                                            "against the budget",
    "long_context_eval.passkey_accuracy_by_distance.seed": "a seed, bounded by 2**63 - 1",
    "rope_scaling.RopeConfig.summary.training_length": "a length compared with wavelengths in a formula; nothing is "
                                                        "allocated (bounded by 2**53 + 1, like positions)",
    "rope_scaling.complete_turn_pairs.length": "a length compared with wavelengths in a formula; nothing is allocated",
    "tasks.PrefixTask.full_len": "stored; PrefixTask.sample checks the memory of the full-length draw (naming "
                                 "full_len) before drawing (test_prefix_task_refuses_a_huge_full_len)",
    "written.WrittenReport.seed": "a seed, only stored, bounded by 2**63 - 1",
    "exports.StoredRoster.id_column": "an index into the header (checked against its length)",
    "roster.RosterTable.id_column": "an index into the header (checked against its length)",
    "rubrics.Criterion.points": "a score, only summed and printed",
}


def _int_arguments(key: str) -> set[str]:
    """The integer arguments of a case: valid values that are ints, and parameters with an int default."""
    case = REGISTRY[key]
    valid = case.valid()
    names = {a for a, v in valid.items() if isinstance(v, (int, np.integer)) and not isinstance(v, bool)}
    for name, p in inspect.signature(case.target).parameters.items():
        if name not in valid and isinstance(p.default, int) and not isinstance(p.default, bool):
            names.add(name)
    return names


def _size_entries(key: str) -> list[tuple[str, dict]]:
    return [(e, {}) if isinstance(e, str) else e for e in SIZES.get(key, ())]


def test_every_integer_argument_is_classified():
    """A new integer argument needs a decision: a size (refused when huge) or not (with the reason)."""
    unclassified = []
    for key in LIBRARY:
        sizes = {name for name, _ in _size_entries(key)}
        for name in sorted(_int_arguments(key)):
            if name not in sizes and f"{key}.{name}" not in NOT_SIZES:
                unclassified.append(f"{key}.{name}")
    assert not unclassified, f"integer arguments neither in SIZES nor in NOT_SIZES: {unclassified}"
    assert set(SIZES) <= set(LIBRARY) and set(HUGE_VALUES) <= set(LIBRARY)
    for entry in NOT_SIZES:
        key, name = entry.rsplit(".", 1)
        assert key in LIBRARY and name in inspect.signature(REGISTRY[key].target).parameters, entry


@contextlib.contextmanager
def time_limit(seconds: int):
    def expire(signum, frame):
        raise TimeoutError(f"no answer within {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def budget(monkeypatch):
    monkeypatch.setenv("COURSE_PE_MAX_BYTES", str(2**34))


def _mentions(message: str, name: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", message) is not None


def _huge_cases() -> list[tuple[str, str, object, dict]]:
    cases = []
    for key in LIBRARY:
        for name, overrides in _size_entries(key):
            cases += [(key, name, value, overrides) for value in HUGE]
        for name, values in HUGE_VALUES.get(key, {}).items():
            cases += [(key, name, value, {}) for value in values]
    return cases


@pytest.mark.parametrize("key,name,value,overrides", _huge_cases(),
                         ids=lambda v: v if isinstance(v, str) else (repr(v)[:24] if not isinstance(v, dict) else ""))
def test_huge_sizes_are_refused_before_allocation(budget, key, name, value, overrides):
    case = REGISTRY[key]
    kwargs = case.valid()
    kwargs.update(overrides)
    kwargs[name] = value
    with time_limit(TIME_LIMIT):
        try:
            result = case.invoke(kwargs)
        except (TypeError, ValueError) as error:
            assert _mentions(str(error), case.mentions.get(name, name)), str(error)
        else:
            pytest.fail(f"{key}({name}={value!r}) returned {type(result).__name__}")


# ----------------------------------------------------------------------------- other hostile values


def _same(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        # NaN where nothing is scored (a PositionReport) is the same answer as NaN
        return torch.equal(a, b) or (a.is_floating_point() and torch.equal(a.isnan(), b.isnan())
                                     and torch.equal(a.nan_to_num(), b.nan_to_num()))
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.nn.Module) and isinstance(b, torch.nn.Module):
        sa, sb = a.state_dict(), b.state_dict()
        return repr(a) == repr(b) and sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    if hasattr(a, "__dataclass_fields__") and type(a) is type(b):
        return all(_same(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__ if f in vars(a))
    if isinstance(a, torch.Generator) and isinstance(b, torch.Generator):
        return a.device == b.device and torch.equal(a.get_state(), b.get_state())
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


NONDETERMINISTIC = {"benchmark.time_call", "benchmark.run_rope_benchmark", "benchmark.run_decode_benchmark",
                    "seeds_benchmark.run_seeds_benchmark"}


def _invoke(case, kwargs):
    torch.manual_seed(0)
    with time_limit(TIME_LIMIT):
        return case.invoke(kwargs)


def _variants(value: object) -> list[tuple[str, object]]:
    out = []
    if isinstance(value, torch.Tensor):
        out.append(("meta", value.to("meta")))
        if not value.dtype.is_floating_point and not value.is_complex() and value.dtype != torch.bool and value.numel() \
                and int(value.min()) >= 0 and int(value.max()) < 256:
            out.append(("uint8", value.to(torch.uint8)))
        if value.dtype == torch.float32:
            out += [("float64", value.double()), ("bfloat16", value.bfloat16()), ("float16", value.half())]
    elif isinstance(value, int) and not isinstance(value, bool):
        out.append(("numpy", np.int64(value)))
    return out


def _variant_cases() -> list[tuple[str, str, str]]:
    cases = []
    for key in LIBRARY:
        for name, value in REGISTRY[key].valid().items():
            cases += [(key, name, label) for label, _ in _variants(value)]
        if "device" in inspect.signature(REGISTRY[key].target).parameters:
            cases += [(key, "device", "cuda"), (key, "device", "meta")]
    return cases


@pytest.mark.parametrize("key,name,label", _variant_cases())
def test_meta_uint8_dtypes_numpy_and_devices(budget, key, name, label):
    case = REGISTRY[key]
    kwargs = case.valid()
    if name == "device":
        if label == "cuda" and torch.cuda.is_available():
            pytest.skip("this machine has CUDA: 'cuda' is a valid device here")
        kwargs[name] = label
    else:
        kwargs[name] = dict(_variants(kwargs[name]))[label]
    try:
        result = _invoke(case, kwargs)
    except (TypeError, ValueError) as error:
        assert _mentions(str(error), case.mentions.get(name, name)), f"{type(error).__name__}: {error}"
        assert label != "numpy", f"a NumPy integer was refused: {error}"
        return
    if label in ("uint8", "numpy") and key not in NONDETERMINISTIC:
        assert _same(result, _invoke(case, case.valid())), f"{label} {name} gave another answer than the plain value"


def test_budget_follows_an_address_space_limit_set_after_import():
    """A sandbox (the grader's) may lower RLIMIT_AS after course_pe was imported and used: the budget follows it."""
    import subprocess
    import sys

    code = ("import resource, course_pe as c\n"
            "c.sinusoidal_frequencies(8)\n"
            "resource.setrlimit(resource.RLIMIT_AS, (2**33, resource.getrlimit(resource.RLIMIT_AS)[1]))\n"
            "from course_pe._validation import memory_budget\n"
            "print(memory_budget())\n"
            "try:\n    c.sinusoidal_frequencies(10**9)\nexcept MemoryError as e:\n    print(type(e).__name__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         env={k: v for k, v in __import__("os").environ.items() if k != "COURSE_PE_MAX_BYTES"})
    lines = out.stdout.split()
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(lines[0]) <= 2**33 and lines[1] == "MemoryBudgetError"


# ----------------------------------------------------------------------------- red team 2: the unclear errors


def _raises(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


def test_red_team_2_unclear_errors_are_clear():
    """The 30 + 7 unclear errors of the second probe (library-redteam2.md, section 6), each now a clear error that
    names the argument, or a result where the input was valid."""
    from course_pe.benchmark import complex_rope
    from course_pe.plotting import plot_attention, plot_encoding_heatmap
    from course_pe.rope_nd import multi_axis_rope
    from course_pe.shaw import shaw_attention

    q = torch.randn(1, 2, 3, 4)
    meta_mask = torch.ones(3, 3, dtype=torch.bool, device="meta")
    _raises(lambda: cpe.attention(q, q, q, mask=meta_mask), ValueError, r"^mask is on meta but q is on cpu")
    _raises(lambda: cpe.attention(q, q, q, bias=torch.ones(3, 3, device="meta")), ValueError, r"^bias is on meta")
    _raises(lambda: cpe.MultiHeadAttention(8, 2)(torch.randn(1, 3, 8), mask=meta_mask), ValueError,
            r"^mask is on meta but x is on cpu")
    _raises(lambda: shaw_attention(q, q, q, torch.randn(5, 4), None, max_distance=2, mask=meta_mask), ValueError,
            r"^mask is on meta")
    _raises(lambda: cpe.apply_rope(torch.randn(1, 3, 4), inv_freq=torch.ones(2, device="meta")), ValueError,
            r"^inv_freq is a meta tensor")
    _raises(lambda: plot_attention(torch.zeros(3, 3, device="meta")), ValueError, r"^weights is a meta tensor")
    _raises(lambda: plot_encoding_heatmap(torch.zeros(3, 4, device="meta")), ValueError, r"^table is a meta tensor")
    for call in (lambda: cpe.packed_position_ids([2**63]), lambda: cpe.packed_attention_mask([3, 2**63])):
        _raises(call, ValueError, r"^lengths\[\d\] must be <= 9007199254740992")
    for task in (cpe.CopyTask, cpe.ReverseTask, cpe.SortTask):
        _raises(lambda: task(num_symbols=2**63), ValueError, r"^num_symbols must be <= 2305843009213693952")
    _raises(lambda: cpe.t5_relative_position_bucket(torch.arange(3), num_buckets=2**62), ValueError,
            r"^max_distance \(128\) must exceed the number of exact buckets \(1152921504606846976 = num_buckets // 2 "
            r"// 2 with num_buckets=4611686018427387904\); lower num_buckets or raise max_distance$")
    _raises(lambda: multi_axis_rope(torch.randn(1, 3, 8), torch.zeros(3, 2, dtype=torch.long), inv_freq=torch.ones(4),
                                    axis_of_pair=torch.zeros(4, dtype=torch.long), n_axes=2**40),
            ValueError, r"^positions must have shape \(seq, 1099511627776\) = \(3, 1099511627776\) for x of shape "
                        r"\(1, 3, 8\) \(n_axes = 1099511627776 coordinates per position\), got \(3, 2\)$")
    # valid inputs that crashed: the largest position in a dynamic module, a transposed x in complex_rope
    rotary = cpe.RotaryEmbedding(8, scaling=cpe.DynamicNTKScaling(2.0, 16))
    cos, _ = rotary.cos_sin(torch.tensor([2**53]))
    assert cos.shape == (1, 4) and torch.isfinite(cos).all()
    x = torch.randn(1, 8, 3).transpose(-1, -2)
    freqs = torch.polar(torch.ones(3, 4), torch.randn(3, 4))
    assert torch.equal(complex_rope(x, freqs), complex_rope(x.contiguous(), freqs))


@pytest.mark.parametrize("full_len", HUGE)
def test_prefix_task_refuses_a_huge_full_len(budget, full_len):
    """``PrefixTask`` draws at ``full_len`` before cutting: a huge one is refused by ``sample`` naming it, in time."""
    task = cpe.PrefixTask(cpe.MarkovTask(4), full_len)
    with time_limit(TIME_LIMIT), pytest.raises(ValueError, match=r"(?<![A-Za-z0-9_])full_len(?![A-Za-z0-9_])"):
        task.sample(2, 3)


def test_written_report_seed_is_bounded_and_stored_as_int():
    """A seed past 2**63 - 1 is refused naming it; a NumPy seed is stored as a Python int (JSON-ready)."""
    from course_pe.coursework import written

    args = dict(student="ada", assignment="why_order-written", notebook="marking.csv")
    with pytest.raises(ValueError, match="seed"):
        written.WrittenReport(**args, seed=2**63)
    report = written.WrittenReport(**args, seed=np.int64(7))
    assert type(report.seed) is int and report.seed == 7


def test_summary_refuses_a_training_length_past_2_53():
    """Without max_positions the summary evaluates the frequencies at training_length: a huge one is refused naming
    training_length (not the seq_len of an inner call)."""
    config = cpe.RopeConfig("default", 8, 8, 10000.0, None)
    for value in (2**53 + 2, 2**63):
        with pytest.raises(ValueError, match=r"^training_length"):
            config.summary(training_length=value)
    assert config.summary(training_length=np.int64(4096)) == config.summary(training_length=4096)
