"""RoPE at device speed (issue 33): a constant number of ATen operations, no value read back to the host on an
accelerator, torch.compile(fullgraph=True), and the three leftovers of the library probe.

No GPU is needed: the operations are counted on the CPU with a ``TorchDispatchMode`` (on a GPU each would be a
kernel launch), and the accelerator's path is exercised on CPU tensors by declaring the CPU an accelerator
(``rope._HOST_DEVICES = ()``), which is the one switch the library reads to decide where values may be read.
"""

from __future__ import annotations

import shutil

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


class HostTransfers(TorchDispatchMode):
    """Every operation inside the ``with`` block that moves data between the host and another device: a value read
    back to the host (``.item()``, ``bool(t)``, ``int(t)``) or a tensor copied from the host to the device
    (``.to(device)``, ``torch.tensor(..., device=...)``). On a GPU each makes the host wait for the device (a
    pageable host-to-device copy synchronises the stream)."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = str(func)
        inputs = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        outputs = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(o, torch.Tensor)]
        if name in HOST_READS:
            self.events.append(name)
        elif any(t.device.type == "cpu" and t.dim() > 0 for t in inputs) and \
                any(o.device.type != "cpu" for o in outputs):
            self.events.append(f"{name} host -> {outputs[0].device}")
        return out


def _meta_calls():
    """Calls on the meta device, which stands in for an accelerator without the fused kernel (CUDA without Triton,
    MPS, XPU; and the fused path's own frequencies): every argument on the device, caches filled by earlier calls."""
    meta = torch.device("meta")
    step = torch.empty(1, 8, 1, 128, device=meta)
    prompt = torch.empty(1, 8, 64, 128, device=meta)
    position = torch.empty(1, dtype=torch.long, device=meta)
    offset = torch.empty(1, dtype=torch.long, device=meta)
    with meta:
        modules = {name: cpe.RotaryEmbedding(128, layout="half", scaling=scaling)
                   for name, scaling in (("default", None), ("dynamic NTK", cpe.DynamicNTKScaling(2.0, 512)),
                                         ("YaRN", cpe.YaRNScaling(4.0, 512)),
                                         ("LongRoPE", cpe.LongRoPEScaling([1.0] * 64, [2.0] * 64, 512, factor=4.0)))}
    modules["dynamic NTK, float32 angles"] = cpe.RotaryEmbedding(
        128, layout="half", scaling=cpe.DynamicNTKScaling(2.0, 512), angle_dtype=torch.float64).to(meta)
    calls = {}
    for layout in ("half", "interleaved"):
        for angle_dtype in (torch.float64, torch.float32):
            tag = f"apply_rope {layout} {str(angle_dtype)[6:]}"
            calls[f"{tag}, decode at t"] = lambda t, a=angle_dtype, l=layout: cpe.apply_rope(
                step, offset=t, layout=l, angle_dtype=a)
            calls[f"{tag}, prompt at t"] = lambda t, a=angle_dtype, l=layout: cpe.apply_rope(
                prompt, offset=t, layout=l, angle_dtype=a)
            calls[f"{tag}, positions"] = lambda t, a=angle_dtype, l=layout: cpe.apply_rope(
                step, position, layout=l, angle_dtype=a)
            calls[f"{tag}, tensor offset"] = lambda t, a=angle_dtype, l=layout: cpe.apply_rope(
                step, offset=offset, layout=l, angle_dtype=a)
    for name, module in modules.items():
        calls[f"RotaryEmbedding {name}, decode at t"] = lambda t, m=module: m(step, offset=t)
        calls[f"RotaryEmbedding {name}, positions"] = lambda t, m=module: m(step, position)
        calls[f"RotaryEmbedding {name}, tensor offset"] = lambda t, m=module: m(step, offset=offset)
    return calls


def test_no_host_transfer_per_call_on_an_accelerator():
    """The attack report's method: on the meta device (an accelerator whose values are never read), a call after the
    first makes no host read and no copy from the host, at any position: decoding steps within and beyond the cached
    tables (CACHE_LIMIT = 8192), beyond a dynamic NTK model's original length (new frequencies at every step, made on
    the device), explicit positions and per-sequence offsets on the device, both angle dtypes. Before, default
    frequencies were kept on the host and copied at every such call (one wait per call), and dynamic NTK copied its
    new frequencies twice per step."""
    calls = _meta_calls()
    for name, call in calls.items():
        for t in (100, 600, 9000):  # fill the caches a model's first calls fill
            call(t)
        for t in (601, 9001, 20000):  # the steps that follow: new lengths, new dynamic NTK frequencies
            with HostTransfers() as counter:
                call(t)
            assert counter.events == [], (name, t, counter.events)
    with HostTransfers() as counter:  # the counter sees a copy from the host and a read back
        torch.arange(3).to("meta")
        bool(torch.ones(1).sum() > 0)
    assert len(counter.events) == 2


def test_dynamic_ntk_decoding_builds_no_table_per_step():
    """Beyond its original length, dynamic NTK gets new frequencies at every step. The module computes the cos/sin
    of the step's rows only (as Hugging Face's module does), not a table of every cached position: no cos/sin of more
    than the step's positions x pairs is computed, and each step costs the same operations. The rows equal those
    of a fresh module called at that length."""
    torch.manual_seed(0)
    scaling = cpe.DynamicNTKScaling(2.0, 64)
    module = cpe.RotaryEmbedding(16, scaling=scaling, layout="half", max_positions=64)
    step = torch.randn(1, 2, 1, 16, dtype=torch.float64)
    module(torch.randn(1, 2, 100, 16, dtype=torch.float64))  # a prompt beyond the original length
    counts = set()
    for t in range(100, 140):
        with CountOps() as counter:
            got = module(step, offset=t)
        counts.add(len(counter.ops))
        fresh = cpe.RotaryEmbedding(16, scaling=scaling, layout="half", max_positions=64)
        expected = fresh(torch.cat([torch.zeros(1, 2, t, 16, dtype=torch.float64), step], dim=-2))[..., -1:, :]
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
    assert len(counts) == 1 and counts.pop() <= MAX_OPS

    class Shapes(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.trig = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func in (torch.ops.aten.cos.default, torch.ops.aten.sin.default):
                self.trig.append(out.numel())
            return out

    with Shapes() as shapes:
        module(step, offset=200)
    assert shapes.trig and max(shapes.trig) == 8  # one position x 8 pairs (a table would be 256 x 8 or more)


# ----------------------------------------------------------------------------- caches


def test_caches_made_in_inference_mode_serve_training():
    """A first call under torch.inference_mode() (an evaluation pass) fills the shared tables and the module's
    buffers; a later training step must still be able to save them for backward (inference tensors cannot be), for
    both layouts, the module's growth and explicit positions."""
    cpe.rope.clear_caches()
    x = torch.randn(1, 2, 24, 8)
    module = cpe.RotaryEmbedding(8, max_positions=8, layout="half")
    with torch.inference_mode():
        for layout in ("half", "interleaved"):
            cpe.apply_rope(x, layout=layout)
            cpe.apply_rope(x, offset=3, layout=layout)
        module(torch.randn(1, 2, 64, 8))  # the cache grows under inference mode
        module(x, torch.arange(24))
    assert not module.cos_cached.is_inference() and not module.inv_freq.is_inference()
    for call in (lambda t: cpe.apply_rope(t, layout="half"), lambda t: cpe.apply_rope(t, layout="interleaved"),
                 lambda t: cpe.apply_rope(t, offset=3, layout="half"), lambda t: module(t),
                 lambda t: module(t, torch.arange(24))):
        leaf = x.clone().requires_grad_()
        call(leaf).square().sum().backward()
        assert leaf.grad is not None and torch.isfinite(leaf.grad).all()


def test_fake_tensor_mode_leaves_the_caches_real():
    """Shape propagation under FakeTensorMode (as torch.export and memory estimators run it) must not store fake
    tables in the shared caches or in a module: every later real call would fail."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    cpe.rope.clear_caches()
    module = cpe.RotaryEmbedding(8, max_positions=8, scaling=cpe.DynamicNTKScaling(2.0, 8))
    with FakeTensorMode(allow_non_fake_inputs=True):
        fake = torch.randn(1, 2, 40, 8)
        for layout in ("half", "interleaved"):
            assert cpe.apply_rope(fake, layout=layout).shape == fake.shape
            assert cpe.apply_rope(fake, offset=3, layout=layout, angle_dtype=torch.float32).shape == fake.shape
        assert module(fake).shape == fake.shape and module(fake, offset=5).shape == fake.shape
    assert not isinstance(module.cos_cached, FakeTensor) and module.cached_positions == 8
    x = torch.randn(1, 2, 40, 8)
    reference = cpe.RotaryEmbedding(8, max_positions=8, scaling=cpe.DynamicNTKScaling(2.0, 8))
    torch.testing.assert_close(module(x), reference(x), rtol=0, atol=0)
    for layout in ("half", "interleaved"):
        assert type(cpe.apply_rope(x, layout=layout)) is torch.Tensor
        assert type(cpe.apply_rope(x, offset=3, layout=layout, angle_dtype=torch.float32)) is torch.Tensor


def test_clear_caches_empties_the_shared_tables():
    x = torch.randn(1, 2, 40, 8)
    before = cpe.apply_rope(x, layout="interleaved")
    cpe.apply_rope(x, offset=7, angle_dtype=torch.float32)
    assert rope_module._default_cos_sin.cache_info().currsize > 0
    rope_module.FUSED_FAILURES[("cpu", None)] = "a remembered failure"
    cpe.rope.clear_caches()
    for cache in rope_module._CACHES:
        assert cache.cache_info().currsize == 0, cache
    assert rope_module.FUSED_FAILURES == {}
    assert torch.equal(cpe.apply_rope(x, layout="interleaved"), before)  # recomputed, the same


def test_prompts_of_many_lengths_share_a_few_tables():
    """Default tables are kept per power of two: 60 prompt lengths from 1 to 5000 use at most a dozen tables (the
    cache held 16, so a server seeing more distinct lengths rebuilt a table at every call). Rows are the same as a
    table of exactly that length."""
    cpe.rope.clear_caches()
    lengths = sorted({int(v) for v in torch.linspace(1, 5000, 60)})
    for n in lengths:
        x = torch.randn(1, 1, n, 8, dtype=torch.float64)
        got = cpe.apply_rope(x, layout="half")
        cos, sin = cpe.rope_cos_sin(torch.arange(n), cpe.rope_frequencies(8, dtype=torch.float64)[0],
                                    dtype=torch.float64)
        torch.testing.assert_close(got, cpe.rotate_with_cos_sin(x, cos, sin, layout="half"), rtol=0, atol=0)
    assert rope_module._default_cos_sin.cache_info().currsize <= 12


def test_a_module_built_on_meta_is_rebuilt_after_to_empty():
    """PyTorch's deferred initialisation: build under torch.device("meta"), then to_empty(device=...). The buffers
    hold uninitialised memory; forward rebuilds them by itself (and reset_parameters() does it explicitly), so the
    module rotates exactly as one built normally, for default rows, positions, rows past the cache and a
    length-dependent scaling. The same holds for to_empty on a module built on the CPU."""
    x = torch.randn(1, 2, 5, 16, dtype=torch.float64)
    for scaling in (None, cpe.DynamicNTKScaling(2.0, 8)):
        reference = cpe.RotaryEmbedding(16, max_positions=16, scaling=scaling, layout="half")
        with torch.device("meta"):
            lazy = cpe.RotaryEmbedding(16, max_positions=16, scaling=scaling, layout="half")
        assert lazy.cos_cached.is_meta and lazy(torch.empty(1, 2, 5, 16, device="meta")).is_meta
        lazy = lazy.to_empty(device="cpu")
        for call in (lambda m: m(x), lambda m: m(x, torch.tensor([0, 3, 9, 27, 15])), lambda m: m(x, offset=9000)):
            torch.testing.assert_close(call(lazy), call(reference), rtol=0, atol=0)
        assert torch.equal(lazy.inv_freq, reference.inv_freq)
        emptied = cpe.RotaryEmbedding(16, max_positions=16, scaling=scaling).to_empty(device="cpu")
        emptied.cos_cached.fill_(7.0)
        emptied.reset_parameters()
        assert torch.equal(emptied.cos_cached, cpe.RotaryEmbedding(16, max_positions=16, scaling=scaling).cos_cached)
    with torch.device("meta"):
        lazy = cpe.RotaryEmbedding(16, max_positions=16)
    lazy = lazy.to_empty(device="cpu")
    compiled = torch.compile(lazy, backend="aot_eager", fullgraph=True)  # under compile the rows are computed
    torch.testing.assert_close(compiled(x), cpe.RotaryEmbedding(16)(x), rtol=0, atol=1e-12)
    torch._dynamo.reset()
    with pytest.raises(ValueError, match="the module's buffers are not"):
        cpe.RotaryEmbedding(16)(torch.empty(1, 2, 5, 16, device="meta"))


def test_tensors_on_another_device_than_x_are_refused():
    """A positions, offset or table tensor on another device than x would be copied at every call (a hidden wait for
    the device); it is a clear error instead (PyTorch's own operations refuse mixed devices). A meta x accepts host
    tensors (shape inference)."""
    from types import SimpleNamespace

    cuda_x = SimpleNamespace(device=torch.device("cuda", 0), is_meta=False)
    with pytest.raises(ValueError, match=r"^positions is on cpu but x is on cuda:0: put positions on x's device"):
        rope_module._check_same_device("positions", torch.arange(3), cuda_x)
    rope_module._check_same_device("positions", SimpleNamespace(device=torch.device("cuda", 0)), cuda_x)
    with pytest.raises(ValueError, match=r"^inv_freq is a meta tensor"):  # (no values: said first)
        cpe.apply_rope(torch.randn(2, 8), inv_freq=torch.empty(4, device="meta"))
    assert cpe.apply_rope(torch.empty(2, 8, device="meta"), torch.arange(2), inv_freq=torch.ones(4)).is_meta
    with pytest.raises(ValueError, match=r"^cos is on meta but x is on cpu"):
        cpe.rotate_with_cos_sin(torch.randn(2, 8), torch.empty(2, 4, device="meta"), torch.ones(2, 4))


def test_sparse_and_nested_inputs_are_clear_errors():
    dense = torch.randn(2, 3, 8)
    for bad in (dense.to_sparse(), torch.nested.nested_tensor([torch.randn(3, 8), torch.randn(5, 8)])):
        with pytest.raises(ValueError, match=r"^x must be a dense tensor \(layout torch.strided\)"):
            cpe.apply_rope(bad)
        with pytest.raises(ValueError, match=r"^x must be a dense tensor"):
            cpe.RotaryEmbedding(8)(bad)
    with pytest.raises(ValueError, match=r"^positions must be a dense tensor"):
        cpe.apply_rope(dense, torch.arange(3).to_sparse())


def test_float_positions_with_a_gradient_warn_nothing():
    """Reading the range of float positions that require a gradient used float(t) on them, which warns; the
    check reads detached values."""
    import warnings

    positions = torch.tensor([0.0, 1.5, 3.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = cpe.apply_rope(torch.randn(1, 3, 8), positions)
    out.sum().backward()
    assert positions.grad is not None


def test_vmap_over_positions():
    """torch.func.vmap over positions (one row of positions per batch element) reads no value (it could not: a vmapped
    tensor has no single value); the result equals the loop of single calls."""
    module = cpe.RotaryEmbedding(8, scaling=cpe.DynamicNTKScaling(2.0, 8))
    x = torch.randn(3, 2, 5, 8, dtype=torch.float64)
    positions = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11], [3, 1, 4, 1, 5]])
    got = torch.func.vmap(lambda t, p: module(t, p))(x, positions)
    expected = torch.stack([cpe.RotaryEmbedding(8, scaling=cpe.DynamicNTKScaling(2.0, 8))(x[i], positions[i])
                            for i in range(3)])
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
    got = torch.func.vmap(lambda t, p: cpe.apply_rope(t, p, layout="half"))(x, positions)
    expected = torch.stack([cpe.apply_rope(x[i], positions[i], layout="half") for i in range(3)])
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


def test_errors_under_torch_compile_name_the_problem():
    """Under torch.compile the argument checks that need no value are traced. Without fullgraph, a bad call leaves
    the graph and raises the library's own ValueError; with fullgraph=True, Dynamo wraps it in its Unsupported error
    (it cannot return to eager there), whose message and cause still carry the library's message."""
    torch._dynamo.reset()
    x = torch.randn(2, 3, 5, 8)
    with pytest.raises(ValueError, match="positions has length 6 but x has seq = 5"):
        torch.compile(lambda t, p: cpe.apply_rope(t, p), backend="eager")(x, torch.arange(6))
    with pytest.raises(Exception) as info:
        torch.compile(lambda t, p: cpe.apply_rope(t, p), backend="eager", fullgraph=True)(x, torch.arange(6))
    assert "positions has length 6 but x has seq = 5" in str(info.value)
    torch._dynamo.reset()


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
    from course_pe.benchmark import count_operations

    # counted, not timed: the old path dispatched every operation of the bias through the meta kernels; now one
    # allocation of the result, and no kernel
    counted = count_operations(lambda: cpe.alibi_bias(8, 3, 5, device="meta", dtype=torch.float16), warmup=False)
    assert counted.kernels == () and len(counted.operations) <= 2, counted.operations
    bias = cpe.alibi_bias(8, 3, 5, device="meta", dtype=torch.float16)
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


def test_evaluate_seeds_refuses_same_shaped_models_of_other_configurations():
    """Same parameter names and shapes are not one configuration: RoPE against ALiBi or sinusoidal, another RoPE base
    or layout. Seeds of one configuration are evaluated even when their RoPE caches differ (one saw longer inputs)."""
    task = cpe.ReverseTask(7)

    def model(seed=0, **changes):
        torch.manual_seed(seed)
        return cpe.TinyTransformer(12, d_model=8, num_heads=2, num_layers=1, max_positions=16,
                                   **{"position": "rope", **changes})

    for changes, difference in (({"position": "alibi"}, r"\.position: 'rope' vs 'alibi'"),
                                ({"position": "sinusoidal"}, r"absolute|position"),
                                ({"rope_base": 10.0}, r"rotary\.base: 10000\.0 vs 10\.0"),
                                ({"rope_layout": "half"}, r"rotary\.layout: 'interleaved' vs 'half'")):
        with pytest.raises(ValueError, match=r"^models\[1\] is configured differently from models\[0\] \(.*"
                                             + difference):
            cpe.evaluate_seeds([model(), model(1, **changes)], task, 3, batch_size=2, num_batches=1)
    seeds = [model(0), model(1)]
    seeds[1](torch.zeros(1, 40, dtype=torch.long))  # its RoPE cache grows: a cache, not a configuration
    assert len(cpe.evaluate_seeds(seeds, task, 3, batch_size=2, num_batches=1)) == 2


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
    measurements/ with the scripts that produced it), row for row."""
    import json
    import re
    from pathlib import Path

    import importlib.resources

    root = Path(__file__).resolve().parents[1]
    data = json.loads(importlib.resources.files("course_pe").joinpath("data/rope_h200_2026-11-28.json").read_text())
    report = (root / data["report"]).read_text()
    assert data["report"] == "measurements/2026-11-28-h200-rope.md" and data["date"] == "2026-11-28"
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


def test_a_cpu_session_never_imports_triton():
    """Triton is imported only where the fused kernel could run (CUDA, or Triton's interpreter): the grader's
    environment has no Triton, and make test installs it here, so importing it on the CPU made the grading
    environment's packages differ from what grading loads (tests/test_gradescope.py)."""
    import subprocess
    import sys

    program = (
        "import os, sys\n"
        "os.environ.pop('TRITON_INTERPRET', None)\n"
        "import torch, course_pe as cpe\n"
        "x = torch.randn(1, 2, 8, 8, requires_grad=True)\n"
        "cpe.apply_rope(x, layout='half').sum().backward()\n"
        "cpe.RotaryEmbedding(8)(x.detach())\n"
        "assert 'triton' not in sys.modules and 'course_pe._rope_triton' not in sys.modules, "
        "sorted(m for m in sys.modules if 'triton' in m)\n"
    )
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
