"""The fused Triton kernel of course_pe._rope_triton, run on CPU tensors through Triton's interpreter.

On a GPU the kernel is compiled; here ``TRITON_INTERPRET=1`` (set per test) runs the same program in NumPy, which
checks what it computes: every layout and dtype, partial rotary, positions, offsets, the gradient, every scaling
through RotaryEmbedding, and the fallback to the torch path. Triton is an optional dependency of the course
(``requirements-triton.txt``; PyTorch's CUDA wheels bring it, the CPU wheels do not): ``make test`` installs it, and
without it these tests fail with that instruction rather than skip.
"""

from __future__ import annotations

import re
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


def test_gradients_of_every_order_through_the_kernel(interpreter):
    """The kernel's backward is the inverse rotation computed by the same autograd function, so autograd can
    differentiate it again (create_graph=True): gradgradcheck passes, and the Hessian of a loss through RoPE equals
    the torch path's. (Before, the backward launched the raw kernel, unrecorded: the second derivative of the RoPE
    term was silently dropped, 160.0 instead of 158.496106 in the attack report.)"""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(1, 2, 5, 8, generator=g, dtype=torch.float64, requires_grad=True)
    module = cpe.RotaryEmbedding(8, scaling=cpe.YaRNScaling(4.0, 4), layout="half")
    positions = torch.tensor([[0, 3, 9, 27, 81]])
    calls = {"apply_rope half": lambda t: cpe.apply_rope(t, layout="half"),
             "apply_rope interleaved, partial": lambda t: cpe.apply_rope(t, layout="interleaved", rotary_dim=4),
             "RotaryEmbedding YaRN, positions": lambda t: module(t, positions)}
    for name, call in calls.items():
        assert torch.autograd.gradgradcheck(call, (x,)), name

        def hessian_sum(rope):
            loss = (rope(x) ** 3).sum() + (x ** 2).sum()
            (grad,) = torch.autograd.grad(loss, x, create_graph=True)
            (second,) = torch.autograd.grad(grad.sum(), x)
            return second

        before = len(interpreter)
        fused = hessian_sum(call)
        assert len(interpreter) >= before + 3, name  # forward, backward and double backward through the kernel
        torch.testing.assert_close(fused, torch_path(lambda: hessian_sum(call)), rtol=0, atol=1e-10)


def test_positions_that_need_a_gradient_take_the_torch_path(interpreter):
    """Fractional positions are valid and differentiable on the torch path; the kernel gives no gradient to positions,
    so positions (or frequencies) that require one are rotated by the torch path, which differentiates them."""
    x = torch.randn(1, 1, 5, 8, dtype=torch.float64)
    positions = torch.tensor([0.0, 0.5, 1.25, 2.0, 7.5], dtype=torch.float64, requires_grad=True)
    out = cpe.apply_rope(x, positions, layout="half")
    assert interpreter == [] and out.requires_grad
    (grad,) = torch.autograd.grad(out.square().sum() + (out * x).sum(), positions)
    expected = torch_path(lambda: torch.autograd.grad(
        (lambda o: o.square().sum() + (o * x).sum())(cpe.apply_rope(x, positions, layout="half")), positions)[0])
    torch.testing.assert_close(grad, expected, rtol=0, atol=1e-12)
    inv = cpe.rope_frequencies(8, dtype=torch.float64)[0].requires_grad_()
    assert cpe.apply_rope(x, inv_freq=inv).requires_grad and interpreter == []
    cpe.apply_rope(x, positions.detach(), layout="half")
    assert len(interpreter) == 1  # the same call without a gradient to give: the kernel


def test_the_kernel_addresses_tensors_of_2_31_elements_and_more():
    """Element offsets in int64: a float16 view whose batch stride is 2**30 + 64 elements over 4 GiB of untouched
    storage (the offsets of any tensor of 2**31 elements or more, e.g. a (16, 32, 32768, 128) bfloat16 prefill). In
    int32 the offset of the third sequence wrapped around and the interpreter crashed (segmentation fault), so the
    check runs in a child process."""
    import subprocess
    import sys

    program = """
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch, course_pe as cpe
from course_pe import rope, _rope_triton
stride = 2**30 + 64
storage = torch.empty(2 * stride + 8, dtype=torch.float16)  # 4 GiB of address space; only 24 values are written
x = storage.as_strided((3, 1, 1, 8), (stride, 8, 8, 1))
x.copy_(torch.randn(3, 1, 1, 8, generator=torch.Generator().manual_seed(0)).half())
launches = []
launch = _rope_triton._launch
_rope_triton._launch = lambda *a, **k: launches.append(1) or launch(*a, **k)
fused = cpe.apply_rope(x, offset=5, layout="half")
rope._FUSED_ENABLED = False
reference = cpe.apply_rope(x, offset=5, layout="half")
assert launches == [1] and torch.equal(fused, reference), (fused, reference)
print("equal")
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "equal", (done.returncode, done.stdout, done.stderr[-2000:])


def test_the_grid_is_one_dimensional_whatever_the_batch(interpreter, monkeypatch):
    """CUDA allows 65535 programs along a grid's y and z axes: a batch (or merged leading dimensions) beyond that failed
    to launch when the batch was an axis. The grid is one axis of blocks x sequences x head groups (up to 2**31 - 1),
    which the kernel decomposes; a call beyond even that is rotated by the torch path, silently."""
    grids = []

    class Recorder:
        def __getitem__(self, grid):
            grids.append(grid)
            return lambda *args, **kwargs: None

    monkeypatch.setattr(_rope_triton, "_kernel", lambda interpret: Recorder())
    _rope_triton._launch(torch.empty(70000, 2, 1, 8), None, 0, torch.ones(5, dtype=torch.float64), 8, False, 1.0)
    assert grids == [(70000,)]  # 1 block of positions x 70000 sequences x 1 group of both heads
    monkeypatch.setattr(_rope_triton, "MAX_PROGRAMS", 100)
    with pytest.raises(_rope_triton.Unsupported):
        _rope_triton._launch(torch.empty(70000, 2, 1, 8), None, 0, torch.ones(5, dtype=torch.float64), 8, False, 1.0)
    monkeypatch.undo()
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(_rope_triton, "MAX_PROGRAMS", 4)
    x = torch.randn(3, 5, 70, 16)
    with warnings_as_errors():
        got = cpe.apply_rope(x, layout="half")  # too many programs for the limit: the torch path, no warning
    assert torch.equal(got, torch_path(lambda: cpe.apply_rope(x, layout="half")))
    monkeypatch.setattr(_rope_triton, "MAX_PROGRAMS", 2**31 - 1)
    # blocks of positions, sequences and head groups all above one: the decomposition of the program index
    assert_close_to(cpe.apply_rope(x, layout="interleaved"), torch_path(lambda: cpe.apply_rope(x, layout="interleaved")))


def warnings_as_errors():
    import warnings

    manager = warnings.catch_warnings()
    manager.__enter__()
    warnings.simplefilter("error")

    class Exit:
        def __enter__(self):
            return None

        def __exit__(self, *exc):
            manager.__exit__(*exc)
            return False

    return Exit()


def _failing(monkeypatch, error):
    calls = []

    def launch(*args, **kwargs):
        calls.append(1)
        raise error

    monkeypatch.setattr(_rope_triton, "_launch", launch)
    return calls


def test_a_compile_error_sends_its_kind_of_call_to_the_torch_path(interpreter, monkeypatch):
    """A GPU that Triton cannot compile for (or a broken installation): one warning, the torch path's result, and the
    torch path for that kind of call from then on (no compilation attempt at every call); other kinds of call still
    try the kernel. clear_caches() forgets the failure."""
    calls = _failing(monkeypatch, RuntimeError("CUDA error: no kernel image is available for execution on the device"))
    x = torch.randn(1, 2, 6, 8)
    with pytest.warns(RuntimeWarning, match=r"fused Triton kernel failed on cpu \(RuntimeError: CUDA error: no kernel "
                                            r"image.*calls of this kind \(torch.float32, head_dim 8, rotary_dim 8, half"):
        got = cpe.apply_rope(x, layout="half")
    assert torch.equal(got, torch_path(lambda: cpe.apply_rope(x, layout="half")))
    assert list(rope_module.FUSED_FAILURES) == [("cpu", None, torch.float32, 8, 8, "half", None)]
    with warnings_as_errors():
        assert torch.equal(cpe.apply_rope(x, layout="half"), got)
    assert len(calls) == 1  # not tried again for this kind of call
    with pytest.warns(RuntimeWarning):
        cpe.apply_rope(x.double(), layout="half")  # another kind: tried (and failing here too)
    assert len(calls) == 2
    cpe.rope.clear_caches()
    assert rope_module.FUSED_FAILURES == {}


def test_a_failed_launch_falls_back_for_that_call_only(interpreter, monkeypatch):
    """An error that is not Triton's compiler's concerns its call: the torch path answers it, with a warning, and the
    next call tries the kernel again (one failure no longer switches the kernel off for the process)."""
    launch = _rope_triton._launch
    failures = [RuntimeError("a launch that failed once")]

    def flaky(*args, **kwargs):
        if failures:
            raise failures.pop()
        return launch(*args, **kwargs)

    monkeypatch.setattr(_rope_triton, "_launch", flaky)
    x = torch.randn(1, 2, 6, 8)
    with pytest.warns(RuntimeWarning, match=r"a launch that failed once\); the torch path rotates this call"):
        first = cpe.apply_rope(x, layout="half")
    assert rope_module.FUSED_FAILURES == {}
    second = cpe.apply_rope(x, layout="half")
    assert_close_to(second, first)
    monkeypatch.setattr(_rope_triton, "_launch", launch)


@pytest.mark.parametrize("error", [
    torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
    RuntimeError("Triton Error [CUDA]: an illegal memory access was encountered"),
    RuntimeError("CUDA error: device-side assert triggered"),
    torch.AcceleratorError("CUDA error: unspecified launch failure"),
])
def test_out_of_memory_and_sticky_device_errors_propagate(interpreter, monkeypatch, error):
    """The torch path could not answer these (it needs memory too; after a sticky error the device is unusable): they
    reach the caller, and nothing is remembered."""
    _failing(monkeypatch, error)
    with pytest.raises(type(error), match=re.escape(str(error))):
        cpe.apply_rope(torch.randn(1, 2, 6, 8), layout="half")
    with pytest.raises(type(error)):
        cpe.RotaryEmbedding(8)(torch.randn(1, 2, 6, 8))
    assert rope_module.FUSED_FAILURES == {}


def test_the_backward_falls_back_where_the_kernel_fails(interpreter, monkeypatch):
    """The gradient's kernel failing (not fatally) gives the reference computation's gradient, not an error."""
    x = torch.randn(1, 2, 6, 8, dtype=torch.float64, requires_grad=True)
    out = cpe.apply_rope(x, layout="interleaved", offset=3)
    launch = _rope_triton._launch

    def broken(*args, **kwargs):
        raise RuntimeError("a launch that failed once")

    monkeypatch.setattr(_rope_triton, "_launch", broken)
    weights = torch.randn(1, 2, 6, 8, dtype=torch.float64)
    (grad,) = torch.autograd.grad((out * weights).sum(), x)
    monkeypatch.setattr(_rope_triton, "_launch", launch)
    expected = torch_path(lambda: torch.autograd.grad(
        (cpe.apply_rope(x, layout="interleaved", offset=3) * weights).sum(), x)[0])
    torch.testing.assert_close(grad, expected, rtol=0, atol=1e-12)


def test_the_kernels_torch_reference_is_the_kernel(interpreter):
    """_rope_triton.reference (the fallback inside the gradient) computes what the kernel computes."""
    g = torch.Generator().manual_seed(8)
    x = torch.randn(2, 3, 9, 16, generator=g, dtype=torch.float64)
    params = torch.cat([cpe.rope_frequencies(12, dtype=torch.float64)[0], torch.tensor([0.75], dtype=torch.float64)])
    for positions, offset in ((None, 5), (torch.tensor([[0, 2, 4, 6, 8, 10, 12, 14, 16], [1] * 9]), 0)):
        for interleaved in (False, True):
            for sign in (1.0, -1.0):
                kernel = _rope_triton._launch(x, positions, offset, params, 12, interleaved, sign)
                reference = _rope_triton.reference(x, positions, offset, params, 12, interleaved, sign)
                torch.testing.assert_close(kernel, reference, rtol=0, atol=1e-12)


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
