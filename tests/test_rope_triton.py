"""The fused Triton kernel of course_pe._rope_triton, run on CPU tensors through Triton's interpreter.

On a GPU the kernel is compiled; here ``TRITON_INTERPRET=1`` (set per test) runs the same program in NumPy, which
checks what it computes: every layout and dtype, partial rotary, positions, offsets, the gradient, every scaling
through RotaryEmbedding, and the fallback to the torch path. Triton is an optional dependency of the course
(``requirements-triton.txt``; PyTorch's CUDA wheels bring it, the CPU wheels do not): ``make test`` installs it, and
without it these tests fail with that instruction rather than skip.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import course_pe as cpe
from course_pe import _rope_triton
from course_pe import rope as rope_module

ROOT = Path(__file__).resolve().parents[1]

if not _rope_triton.available():  # pragma: no cover (make test installs it)
    pytest.fail("Triton is not installed: the fused kernel's tests need it (make install-triton, which make test "
                "runs, or pip install -r requirements-triton.txt)", pytrace=False)


@pytest.fixture
def interpreter(monkeypatch):
    """Triton's interpreter on: the kernel runs on CPU tensors, and apply_rope/RotaryEmbedding route CPU tensors to
    it as they route CUDA tensors on a GPU. Counts the kernel's launches."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(rope_module, "FUSED_FAILURES", {})
    launches = []
    launch = _rope_triton._launch

    def counted(*args, **kwargs):
        launches.append(args[0].shape)
        return launch(*args, **kwargs)

    monkeypatch.setattr(_rope_triton, "_launch", counted)
    return launches


def torch_path(call):
    """The result of ``call()`` on the torch path (the reference), with the fused kernel switched off."""
    rope_module._FUSED_ENABLED = False
    try:
        return call()
    finally:
        rope_module._FUSED_ENABLED = True


TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 1e-2}


def assert_close_to(got: torch.Tensor, expected: torch.Tensor) -> None:
    """Equal up to the rounding of the output dtype: the kernel and the torch path round the rotation in another
    order (one unit in the last place of float32), and the interpreter casts to bfloat16/float16 its own way."""
    assert got.dtype == expected.dtype and got.shape == expected.shape and got.device == expected.device
    scale = max(1.0, float(expected.abs().max())) if expected.numel() else 1.0
    torch.testing.assert_close(got.double(), expected.double(), rtol=0, atol=TOLERANCE[got.dtype] * scale)


def test_the_pinned_triton_is_installed():
    """requirements-triton.txt pins the Triton that torch's CUDA wheel of the pinned version requires."""
    import triton

    lines = [line for line in (ROOT / "requirements-triton.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines == ["triton==3.7.1"]
    pin = lines[0].split("==")[1]
    assert triton.__version__ == pin == "3.7.1"
    assert "torch==2.13.0" in (ROOT / "requirements.txt").read_text()


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
def test_apply_rope_through_the_kernel_equals_the_torch_path(interpreter, layout, dtype):
    g = torch.Generator().manual_seed(1)
    cases = [
        (torch.randn(2, 3, 5, 8, generator=g), {}),
        (torch.randn(2, 3, 5, 8, generator=g), {"positions": torch.tensor([0, 7, 100, 4095, 100000])}),
        (torch.randn(2, 3, 5, 8, generator=g), {"positions": torch.tensor([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]])}),
        (torch.randn(2, 3, 5, 8, generator=g), {"positions": torch.tensor([0.5, -3.0, 2.25, 1e6, 7.0],
                                                                           dtype=torch.float64)}),
        (torch.randn(2, 3, 5, 8, generator=g), {"positions": torch.tensor([5, 0, 255, 3, 9], dtype=torch.uint8)}),
        (torch.randn(2, 3, 1, 16, generator=g), {"offset": 4000}),  # a decoding step
        (torch.randn(2, 3, 4, 16, generator=g), {"offset": torch.tensor([2, 90])}),
        (torch.randn(4, 6, 12, generator=g), {"rotary_dim": 8}),  # partial rotary, 3-D
        (torch.randn(7, 10, generator=g), {}),  # 2-D
        (torch.randn(2, 2, 2, 3, 8, generator=g), {"base": 500000.0}),  # 5-D
        (torch.randn(2, 5, 3, 8, generator=g).transpose(1, 2), {}),  # Hugging Face's transposed projection
        (torch.randn(1, 2, 4, 16, generator=g)[..., :8], {}),  # strided rows
        (torch.randn(1, 2, 0, 8, generator=g), {}),  # empty sequence
        (torch.randn(1, 2, 6, 8, generator=g), {"inv_freq": torch.tensor([1.0, 0.3, 0.01, 1e-4])}),
    ]
    for x, kwargs in cases:
        x = x.to(dtype)
        before = len(interpreter)
        got = cpe.apply_rope(x, layout=layout, **kwargs)
        assert len(interpreter) == before + 1, kwargs  # the kernel rotated it
        assert_close_to(got, torch_path(lambda: cpe.apply_rope(x, layout=layout, **kwargs)))


@pytest.mark.parametrize("unread", [False, True], ids=["values checked", "as on a GPU"])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rotary_embedding_through_the_kernel_for_every_scaling(interpreter, monkeypatch, layout, unread):
    """RotaryEmbedding.forward on the kernel: default rows, an offset, explicit positions (1-D and per sequence) and
    a given seq_len, for every scaling (YaRN's attention factor, dynamic NTK's and LongRoPE's length-dependent
    frequencies included), against the torch path of a fresh module. Explicit positions are checked on the CPU; as
    on a GPU (``unread``), nothing is read and the frequencies are picked on the device."""
    if unread:
        monkeypatch.setattr(rope_module, "_HOST_DEVICES", ())
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 3, 24, 16, generator=g, dtype=torch.float64)
    step = torch.randn(2, 3, 1, 16, generator=g, dtype=torch.float64)
    scalings = [None, cpe.LinearScaling(2.0), cpe.NTKScaling(2.0), cpe.DynamicNTKScaling(2.0, 16),
                cpe.YaRNScaling(4.0, 16), cpe.Llama3Scaling(8.0, 16),
                cpe.LongRoPEScaling([1.0, 1.5, 2.0, 3.0, 1.0, 1.0], [2.0, 3.0, 5.0, 7.0, 1.0, 1.5], 16, factor=4.0)]
    calls = [((x,), {}), ((step,), {"offset": 30}), ((x, torch.arange(24) * 2), {}),
             ((x, torch.stack([torch.arange(24), torch.arange(5, 29)])), {}), ((x,), {"seq_len": 64}),
             ((x, torch.arange(24)), {"seq_len": 40}), ((step, torch.tensor([30])), {})]
    for scaling in scalings:
        for args, kwargs in calls:
            module = cpe.RotaryEmbedding(16, layout=layout, scaling=scaling, max_positions=8, rotary_dim=12)
            fresh = cpe.RotaryEmbedding(16, layout=layout, scaling=scaling, max_positions=8, rotary_dim=12)
            before = len(interpreter)
            got = module(*args, **kwargs)
            assert len(interpreter) == before + 1
            expected = torch_path(lambda: fresh(*args, **kwargs))
            assert_close_to(got, expected)


def test_the_kernel_has_the_rotations_gradient(interpreter):
    """Training on a GPU goes through the kernel too: its gradient is the inverse rotation (times YaRN's attention
    factor), checked numerically in float64."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1, 2, 5, 8, generator=g, dtype=torch.float64, requires_grad=True)
    positions = torch.tensor([[0, 3, 9, 27, 81]])
    module = cpe.RotaryEmbedding(8, scaling=cpe.YaRNScaling(4.0, 4), layout="half")
    assert torch.autograd.gradcheck(lambda t: module(t, positions), (x,))
    assert torch.autograd.gradcheck(lambda t: cpe.apply_rope(t, layout="interleaved", rotary_dim=4), (x,))
    assert len(interpreter) >= 4


def test_a_failing_kernel_falls_back_to_the_torch_path(interpreter, monkeypatch):
    """A GPU that Triton cannot compile for (or a broken installation): one warning, the torch path's result, and
    the torch path from then on."""

    def broken(*args, **kwargs):
        raise RuntimeError("no kernel image is available for execution on the device")

    monkeypatch.setattr(_rope_triton, "_launch", broken)
    x = torch.randn(1, 2, 6, 8)
    with pytest.warns(RuntimeWarning, match=r"fused Triton kernel failed on cpu \(RuntimeError: no kernel image"):
        got = cpe.apply_rope(x, layout="half")
    assert torch.equal(got, torch_path(lambda: cpe.apply_rope(x, layout="half")))
    assert "cpu" in rope_module.FUSED_FAILURES
    assert torch.equal(cpe.RotaryEmbedding(8)(x), torch_path(lambda: cpe.RotaryEmbedding(8)(x)))  # no second try


def test_the_kernel_is_used_only_where_it_can_run(monkeypatch):
    """Without the interpreter a CPU tensor takes the torch path (the kernel is for CUDA); without Triton nothing
    changes but the path; angle_dtype=float32 (the references' numerics) always takes the torch path."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    x = torch.randn(1, 2, 3, 8)
    assert not _rope_triton.usable(x) and not rope_module._fused(x)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert _rope_triton.usable(x)
    monkeypatch.setattr(_rope_triton, "triton", None)
    assert not _rope_triton.usable(x) and not rope_module._fused(x)
    monkeypatch.setattr(_rope_triton, "triton", pytest.importorskip("triton"))
    launches = []
    monkeypatch.setattr(_rope_triton, "_launch", lambda *a, **k: launches.append(1))
    cpe.apply_rope(x, angle_dtype=torch.float32)
    cpe.RotaryEmbedding(8, angle_dtype=torch.float32)(x)
    assert launches == []
