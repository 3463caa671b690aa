"""RoPE at device speed (issue 33): a constant number of ATen operations, no value read back to the host on an
accelerator, torch.compile(fullgraph=True), and the three leftovers of the library probe.

No GPU is needed: the operations are counted on the CPU with a ``TorchDispatchMode`` (on a GPU each would be a
kernel launch), and the accelerator's path is exercised on CPU tensors by declaring the CPU an accelerator
(``rope._HOST_DEVICES = ()``), which is the one switch the library reads to decide where values may be read.
"""

from __future__ import annotations

import shutil
import time

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import course_pe as cpe
from course_pe import rope as rope_module

#: ATen operations that copy a value from a tensor to the host: on a GPU each waits for the device.
HOST_READS = {"aten._local_scalar_dense.default", "aten.equal.default", "aten.is_nonzero.default",
              "aten.item.default"}
MAX_OPS = 40


class CountOps(TorchDispatchMode):
    """Every ATen operation dispatched inside the ``with`` block, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def ops_of(call) -> list[str]:
    """The operations of one call, after a first call that fills the caches (the steady state of a model)."""
    call()
    with CountOps() as counter:
        call()
    return counter.ops


def _calls(seq: int, layout: str, heads: int = 8):
    x = torch.randn(1, heads, seq, 128)
    positions = torch.arange(seq)
    batch_positions = torch.arange(seq).expand(1, seq)
    module = cpe.RotaryEmbedding(128, layout=layout)
    return {
        "apply_rope": lambda: cpe.apply_rope(x, layout=layout),
        "apply_rope(positions)": lambda: cpe.apply_rope(x, positions, layout=layout),
        "apply_rope(batch positions)": lambda: cpe.apply_rope(x, batch_positions, layout=layout),
        "apply_rope(offset)": lambda: cpe.apply_rope(x, offset=3, layout=layout),
        "RotaryEmbedding": lambda: module(x),
        "RotaryEmbedding(positions)": lambda: module(x, positions),
        "RotaryEmbedding(offset)": lambda: module(x, offset=5),
    }


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_the_number_of_operations_does_not_grow_with_the_length(layout):
    """Done-when of issue 33: at seq 512 and 8192 (8 heads, head_dim 128) the same number of ATen operations, at
    most 40. The blocked half layout dispatched 783 at seq 8192 (four kernels per block of positions)."""
    short, long = _calls(512, layout), _calls(8192, layout)
    for name in short:
        a, b = ops_of(short[name]), ops_of(long[name])
        assert len(a) <= MAX_OPS and len(b) <= MAX_OPS, (name, len(a), len(b), a, b)
        if "offset" not in name:  # (an offset that takes 8192 rows past the cached table computes cos/sin: 18 ops)
            assert len(a) == len(b), (name, a, b)
    # the rotation itself: a handful of kernels (complex product, or four kernels on half-width views)
    assert len(ops_of(short["apply_rope"])) <= 10


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_decoding_steps_cost_the_same_at_every_offset(layout):
    """A decode step (one position) at offset 10, 1000 and 6000: the same operations each time, and no table is
    rebuilt per step (tables for later offsets are cached per power of two)."""
    x = torch.randn(1, 32, 1, 128)
    module = cpe.RotaryEmbedding(128, layout=layout)
    counts = {len(ops_of(lambda t=t: cpe.apply_rope(x, offset=t, layout=layout))) for t in (10, 1000, 6000)}
    assert len(counts) == 1 and counts.pop() <= MAX_OPS
    counts = {len(ops_of(lambda t=t: module(x, offset=t))) for t in (10, 1000, 6000)}
    assert len(counts) == 1 and counts.pop() <= MAX_OPS


@pytest.fixture
def cpu_as_accelerator(monkeypatch):
    """The CPU treated as an accelerator: no value of a tensor may be read back to the host."""
    monkeypatch.setattr(rope_module, "_HOST_DEVICES", ())
    monkeypatch.setattr(rope_module, "_FUSED_ENABLED", False)  # the torch path (the kernel has its own tests)


def _scalings():
    return [None, cpe.LinearScaling(2.0), cpe.NTKScaling(2.0), cpe.DynamicNTKScaling(2.0, 16), cpe.YaRNScaling(4.0, 16),
            cpe.Llama3Scaling(8.0, 16),
            cpe.LongRoPEScaling([1.0, 1.5, 2.0, 3.0, 1.0, 1.0, 1.0, 1.0], [2.0, 3.0, 5.0, 7.0, 1.0, 1.5, 2.0, 2.5], 16,
                                factor=4.0)]


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_no_value_is_read_back_on_an_accelerator(cpu_as_accelerator, layout):
    """On an accelerator apply_rope and RotaryEmbedding.forward (every scaling, default and explicit positions, a
    long and a decoding call) dispatch no operation that copies a value to the host, and compute what the checked
    CPU path computes. On the CPU the same calls do read values (their checks), which shows the counter sees them."""
    x = torch.randn(2, 3, 40, 16, dtype=torch.float64)
    step = torch.randn(2, 3, 1, 16, dtype=torch.float64)
    positions = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6] * 5)
    batch_positions = torch.stack([torch.arange(40), torch.arange(100, 140)])
    for scaling in _scalings():
        for args, kwargs in (((x,), {}), ((x, positions), {}), ((x, batch_positions), {}), ((step,), {"offset": 37}),
                             ((step, torch.tensor([37])), {}), ((x, positions), {"seq_len": 64})):
            module = cpe.RotaryEmbedding(16, layout=layout, scaling=scaling, max_positions=16)
            reference = cpe.RotaryEmbedding(16, layout=layout, scaling=scaling, max_positions=16)
            ops = ops_of(lambda: module(*args, **kwargs))
            assert not HOST_READS & set(ops), (type(scaling).__name__, [o for o in ops if o in HOST_READS])
            rope_module._HOST_DEVICES = ("cpu",)
            expected = reference(*args, **kwargs)
            rope_module._HOST_DEVICES = ()
            torch.testing.assert_close(module(*args, **kwargs), expected, rtol=0, atol=1e-12)
    for args in ((x,), (x, positions), (x, batch_positions)):
        assert not HOST_READS & set(ops_of(lambda: cpe.apply_rope(*args, layout=layout)))
    assert not HOST_READS & set(ops_of(lambda: cpe.apply_rope(step, offset=torch.tensor([5, 9]), layout=layout)))
    rope_module._HOST_DEVICES = ("cpu",)
    assert HOST_READS & set(ops_of(lambda: cpe.apply_rope(x, positions, layout=layout)))


def test_dynamic_ntk_picks_its_frequencies_on_the_device(cpu_as_accelerator):
    """Without a value read, a length-dependent scaling selects its frequencies from max(positions) + 1 on the
    device: positions inside the original length get the original frequencies, longer ones the grown ones."""
    x = torch.randn(1, 1, 4, 8, dtype=torch.float64)
    scaling = cpe.DynamicNTKScaling(2.0, 16)
    module = cpe.RotaryEmbedding(8, scaling=scaling)
    for positions, length in ((torch.tensor([0, 3, 7, 15]), 16), (torch.tensor([0, 3, 7, 39]), 40)):
        inv, _ = cpe.rope_frequencies(8, scaling=scaling, seq_len=length, dtype=torch.float64)
        torch.testing.assert_close(module(x, positions), cpe.apply_rope(x, positions, inv_freq=inv), rtol=0,
                                   atol=1e-12)


def test_value_checks_run_on_the_cpu_and_can_be_turned_on_for_devices(cpu_as_accelerator):
    """Bad positions are a clear error on the CPU; on an accelerator they are not read unless device value checks
    are turned on (then the same errors)."""
    x = torch.randn(1, 4, 8)
    bad = torch.tensor([0, 1, 2**53 + 1, 3])
    assert cpe.apply_rope(x, bad).shape == x.shape  # unchecked on the "accelerator"
    previous = cpe.rope.device_value_checks(True)
    try:
        with pytest.raises(ValueError, match=r"^positions must lie in \[-2\*\*53, 2\*\*53\]"):
            cpe.apply_rope(x, bad)
        with pytest.raises(ValueError, match=r"^positions must hold only finite values"):
            cpe.apply_rope(x, torch.tensor([0.0, float("nan"), 1.0, 2.0]))
    finally:
        assert cpe.rope.device_value_checks(previous) is True
    with pytest.raises(TypeError, match=r"^enabled must be a bool"):
        cpe.rope.device_value_checks("yes")
    rope_module._HOST_DEVICES = ("cpu",)
    with pytest.raises(ValueError, match=r"^positions must lie in"):
        cpe.apply_rope(x, bad)
    # shape, dtype and layout errors need no value: they are raised on every device
    rope_module._HOST_DEVICES = ()
    with pytest.raises(ValueError, match="length 3"):
        cpe.apply_rope(x, torch.arange(3))
    with pytest.raises(TypeError, match="bfloat16"):
        cpe.apply_rope(x, torch.arange(4).to(torch.bfloat16))
    with pytest.raises(ValueError, match="layout"):
        cpe.RotaryEmbedding(8, layout="diagonal")


# ----------------------------------------------------------------------------- torch.compile


def _compile_cases():
    x = torch.randn(2, 4, 40, 16)
    positions = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6] * 5)
    batch_positions = torch.stack([torch.arange(40), torch.arange(7, 47)])
    return x, {"default": None, "positions": positions, "batch positions": batch_positions}


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_compile_fullgraph_aot_eager_matches_eager(layout):
    """torch.compile(fullgraph=True) captures apply_rope and RotaryEmbedding.forward (every scaling, with and
    without positions, both angle dtypes for the length-dependent ones) and matches eager; the module's state (its
    cache) is not changed by a compiled call. backend="aot_eager" needs no C compiler."""
    torch._dynamo.reset()
    x, cases = _compile_cases()
    for name, positions in cases.items():
        compiled = torch.compile(lambda x, p: cpe.apply_rope(x, p, layout=layout), backend="aot_eager",
                                 fullgraph=True)
        torch.testing.assert_close(compiled(x, positions), cpe.apply_rope(x, positions, layout=layout),
                                   rtol=0, atol=1e-6)
    for scaling in _scalings():
        dtypes = [torch.float64, torch.float32] if isinstance(scaling, (cpe.DynamicNTKScaling, type(None))) \
            else [torch.float64]
        for angle_dtype in dtypes:
            for name, positions in cases.items():
                module = cpe.RotaryEmbedding(16, layout=layout, scaling=scaling, max_positions=16,
                                             angle_dtype=angle_dtype)
                eager = cpe.RotaryEmbedding(16, layout=layout, scaling=scaling, max_positions=16,
                                            angle_dtype=angle_dtype)
                compiled = torch.compile(module, backend="aot_eager", fullgraph=True)
                got = compiled(x, positions)
                torch.testing.assert_close(got, eager(x, positions), rtol=0, atol=1e-6,
                                           msg=lambda m: f"{type(scaling).__name__} {angle_dtype} {name}: {m}")
                assert module.cached_positions == 16
        torch._dynamo.reset()


@pytest.mark.skipif(shutil.which("gcc") is None and shutil.which("cc") is None,
                    reason="inductor on the CPU needs a C compiler")
def test_compile_fullgraph_inductor_matches_eager():
    """With a C compiler (the course machine has gcc), inductor compiles both layouts of apply_rope and
    RotaryEmbedding.forward, with and without positions, into code that matches eager. (The first compilation builds
    inductor's runtime: a minute or two on a busy machine.)"""
    torch._dynamo.reset()
    x, cases = _compile_cases()
    for layout in ("half", "interleaved"):
        for name in ("default", "positions"):
            positions = cases[name]
            compiled = torch.compile(lambda x, p: cpe.apply_rope(x, p, layout=layout), backend="inductor",
                                     fullgraph=True)
            torch.testing.assert_close(compiled(x, positions), cpe.apply_rope(x, positions, layout=layout),
                                       rtol=0, atol=1e-6)
            module = cpe.RotaryEmbedding(16, layout=layout, scaling=cpe.DynamicNTKScaling(2.0, 16), max_positions=16)
            eager = cpe.RotaryEmbedding(16, layout=layout, scaling=cpe.DynamicNTKScaling(2.0, 16), max_positions=16)
            compiled = torch.compile(module, backend="inductor", fullgraph=True)
            torch.testing.assert_close(compiled(x, positions), eager(x, positions), rtol=0, atol=1e-6)
    torch._dynamo.reset()


def test_compiled_training_step_has_the_eager_gradient():
    """The compiled rotation is differentiable: the gradient of a compiled apply_rope equals eager's."""
    torch._dynamo.reset()
    x = torch.randn(1, 2, 12, 8, dtype=torch.float64, requires_grad=True)
    w = torch.randn(1, 2, 12, 8, dtype=torch.float64)
    compiled = torch.compile(lambda t: (cpe.apply_rope(t, layout="half") * w).sum(), backend="aot_eager",
                             fullgraph=True)
    (grad_compiled,) = torch.autograd.grad(compiled(x), x)
    (grad_eager,) = torch.autograd.grad((cpe.apply_rope(x, layout="half") * w).sum(), x)
    torch.testing.assert_close(grad_compiled, grad_eager, rtol=0, atol=1e-12)
    torch._dynamo.reset()


# ----------------------------------------------------------------------------- the probe's three leftovers


def test_alibi_bias_on_the_meta_device_answers_at_once():
    """alibi_bias(..., device="meta") went through PyTorch's Python meta kernels (seconds, more than 20 s on a busy
    machine); now it returns the bias's shape and dtype on meta without computing anything."""
    start = time.perf_counter()
    bias = cpe.alibi_bias(8, 3, 5, device="meta", dtype=torch.float16)
    assert time.perf_counter() - start < 5.0  # generous: the old path needed seconds even on an idle machine
    assert bias.device.type == "meta" and bias.shape == (1, 8, 3, 5) and bias.dtype == torch.float16
    assert cpe.alibi_bias(4, 0, 0, device="meta").shape == (1, 4, 0, 0)
    with pytest.raises(ValueError, match=r"q_len \(3\) cannot exceed k_len \(2\)"):
        cpe.alibi_bias(4, 3, 2, device="meta")


def test_evaluate_seeds_refuses_models_of_different_architectures():
    task = cpe.ReverseTask(7)
    small = cpe.TinyTransformer(12, d_model=8, num_heads=2, num_layers=1, max_positions=16)
    other = cpe.TinyTransformer(12, d_model=16, num_heads=4, num_layers=2, max_positions=16)
    with pytest.raises(ValueError, match=r"^models\[1\] has a different architecture from models\[0\]"):
        cpe.evaluate_seeds([small, other], task, 3, batch_size=2, num_batches=1)
    with pytest.raises(ValueError, match=r"^models\[2\] has a different architecture"):
        cpe.evaluate_seeds([small, small, torch.nn.Linear(2, 2)], task, 3, batch_size=2, num_batches=1)
    reports = cpe.evaluate_seeds([small, small], task, 3, batch_size=2, num_batches=1)  # one architecture: evaluated
    assert len(reports) == 2 and torch.equal(reports[0].loss, reports[1].loss)


def test_rotate_with_cos_sin_says_when_tables_do_not_fit_x():
    """An empty sequence with tables of 3 rows (and the reverse) is a clear ValueError, not a broadcasting
    RuntimeError; an empty sequence with empty or single-row tables is rotated (an empty result)."""
    x = torch.randn(1, 2, 0, 8)
    message = r"^cos and sin of shape \(3, 4\) do not broadcast to x's \(\.\.\., seq, head_dim // 2\) = \(1, 2, 0, 4\)"
    with pytest.raises(ValueError, match=message):
        cpe.rotate_with_cos_sin(x, torch.ones(3, 4), torch.ones(3, 4))
    with pytest.raises(ValueError, match=r"need one row per position of x \(seq = 3\)"):
        cpe.rotate_with_cos_sin(torch.randn(1, 2, 3, 8), torch.ones(0, 4), torch.ones(0, 4))
    for layout in ("half", "interleaved"):
        assert cpe.rotate_with_cos_sin(x, torch.ones(0, 4), torch.ones(0, 4), layout=layout).shape == x.shape
        assert cpe.rotate_with_cos_sin(x, torch.ones(1, 4), torch.zeros(1, 4), layout=layout).shape == x.shape


# ----------------------------------------------------------------------------- the H200 measurement the chapter cites


def test_the_stored_h200_measurement_is_its_report():
    """course_pe/data: the JSON the chapter reads holds the numbers of the measurement's report (copied unchanged to
    book/reference/measurements/ with the scripts that produced it), row for row."""
    import json
    import re
    from pathlib import Path

    import importlib.resources

    root = Path(__file__).resolve().parents[1]
    data = json.loads(importlib.resources.files("course_pe").joinpath("data/rope_h200_2026-11-28.json").read_text())
    report = (root / data["report"]).read_text()
    assert data["report"] == "book/reference/measurements/2026-11-28-h200-rope.md" and data["date"] == "2026-11-28"
    for script in data["scripts"]:
        assert (root / script).is_file()
    table = {}
    for line in report.splitlines():
        cells = [c.strip().strip("*") for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and re.fullmatch(r"[0-9.]+", cells[1]):
            table[cells[0].strip("`")] = [float(c) for c in cells[1:]]
    rows = data["prefill"]["rows"]
    assert len(rows) == len(table) == 8
    for row, (name, numbers) in zip(rows, table.items()):
        assert numbers == [row["bf16_ms"], row["bf16_x_clone"], row["fp32_ms"], row["fp32_x_clone"]], name
    decode = {c[0].strip("`"): float(c[1]) for c in
              ([x.strip() for x in line.strip().strip("|").split("|")] for line in report.splitlines())
              if len(c) == 2 and re.fullmatch(r"[0-9]+", c[1])}
    assert [r["us_per_call"] for r in data["decode"]["rows"]] == list(decode.values()) == [56, 579, 572]
    assert "783 ATen operations" in report and data["breakdown_bf16"]["aten_operations_seq_8192_8_heads"]["half"] == 783
