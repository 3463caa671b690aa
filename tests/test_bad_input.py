"""Bad input gives a clear TypeError or ValueError; valid extreme input works.

``REGISTRY`` holds one :class:`Case` per public callable of ``course_pe`` (functions, classes, and the public
methods a class defines itself). Each case has a factory of valid keyword arguments, a hypothesis strategy of
wrong values for every argument it checks, and valid extreme arguments (empty, length 1, very large positions).
:func:`test_registry_covers_the_public_api` enumerates ``course_pe.__all__`` and the ``__all__`` of every
module, so a new public function or method without a case here fails the suite.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import pkgutil
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import course_pe  # noqa: E402
import course_pe as cpe  # noqa: E402
import nbformat  # noqa: E402

from course_pe import benchmark, bilingual, plotting, reproducibility, seeds_benchmark, training  # noqa: E402
from course_pe.long_context_eval import (  # noqa: E402
    PasskeyTask,
    passkey_accuracy_by_distance,
    sliding_window_report,
    window_forward_bytes,
)
from course_pe.coursework import gradescope  # noqa: E402
from course_pe.coursework import (  # noqa: E402
    environment,
    exercises,
    grade,
    grading_build,
    names,
    nbgrader_autograde,
    nbgrader_release,
    roster,
    sandbox,
    workbook,
)
from course_pe.coursework.grade import ExerciseGrade, GradeReport  # noqa: E402
from course_pe.coursework.gradebook import Gradebook  # noqa: E402
from course_pe.coursework.sandbox import Sandbox, SandboxLimits  # noqa: E402

# Every module's public API is covered here, the coursework tools (exercises, grade, workbook, nbgrader_release)
# included; their behaviour on students' submissions is tested in their own files.
# Public callables that have no argument that can be wrong, each with the reason. Only exception classes qualify
# (checked by test_exemptions_are_exception_classes): like every Exception they accept any message.
NO_BAD_INPUT: dict[str, str] = {
    "sandbox.SandboxDied": "an exception class: it takes any message, as every Exception does",
    "sandbox.SandboxTimeout": "an exception class: it takes any message, as every Exception does",
    "grade.GradingInterrupted": "an exception class: it takes any message, as every Exception does",
    "grade.GraderBroken": "an exception class: it takes any message, as every Exception does",
}

# ----------------------------------------------------------------------------- strategies of wrong values

NON_NUMBERS = st.sampled_from(["3", b"3", [3], (3,), {"a": 3}, object(), torch.tensor(3), np.array([3])])


def bad_int(minimum: int | None = 1, maximum: int | None = None) -> st.SearchStrategy:
    """Wrong values where an integer in [minimum, maximum] is meant: out of range, bool, float, non-number."""
    parts = [st.booleans(), st.floats(allow_nan=True, allow_infinity=True), NON_NUMBERS]
    if minimum is not None:
        parts.append(st.integers(max_value=minimum - 1))
    if maximum is not None:
        parts.append(st.integers(min_value=maximum + 1))
    return st.one_of(*parts)


def bad_float(minimum: float | None = None, strict: bool = True) -> st.SearchStrategy:
    """Wrong values where a finite real number (> or >= minimum) is meant."""
    parts = [st.booleans(), st.sampled_from([math.nan, math.inf, -math.inf]), NON_NUMBERS, st.just(1 + 2j)]
    if minimum is not None:
        below = st.floats(max_value=minimum, allow_nan=False, allow_infinity=False)
        parts.append(below if strict else below.filter(lambda v: v < minimum))
    return st.one_of(*parts)


BAD_BOOL = st.one_of(st.integers(), st.floats(), st.sampled_from(["yes", "", None, [True], torch.tensor(True)]))
BAD_DTYPE = st.sampled_from(
    [torch.int64, torch.int32, torch.uint8, torch.bool, torch.complex64, "float32", float, None, np.float32]
)
BAD_DEVICE = st.sampled_from(["nonsense", "gpu", 3.5, [0], object()])
BAD_GENERATOR = st.sampled_from([0, "g", torch.tensor(0), np.random.default_rng(0), object()])


def bad_choice(choices: tuple[str, ...]) -> st.SearchStrategy:
    return st.one_of(st.text(max_size=6).filter(lambda s: s not in choices), st.integers(), st.none(), st.just([choices[0]]))


def wrong_kind_tensors(shape: tuple[int, ...], kind: str) -> st.SearchStrategy:
    """Tensors of the right shape but a wrong dtype, and non-tensors holding the same numbers."""
    dtypes = {
        "floating": [torch.int64, torch.int32, torch.uint8, torch.bool, torch.complex64],
        "integer": [torch.float32, torch.float64, torch.float16, torch.bool, torch.complex64],
        "position": [torch.bool, torch.float16, torch.bfloat16, torch.complex64],
        "bool": [torch.int64, torch.float32, torch.uint8],
    }[kind]
    tensors = st.sampled_from(dtypes).map(lambda dt: torch.ones(shape, dtype=dt))
    others = st.sampled_from([np.ones(shape), np.ones(shape).tolist(), 1.0, "x"])  # None is valid where optional
    return st.one_of(tensors, others)


def bad_tensor(
    shape: tuple[int, ...], kind: str = "floating", *, nonfinite: bool = False, wrong_shapes: tuple = ()
) -> st.SearchStrategy:
    """Wrong dtypes, non-tensors, wrong shapes and (optionally) NaN/inf entries."""
    parts = [wrong_kind_tensors(shape, kind)]
    if wrong_shapes:
        dtype = {"floating": torch.float32, "integer": torch.long, "position": torch.long, "bool": torch.bool}[kind]
        parts.append(st.sampled_from(wrong_shapes).map(lambda s: torch.zeros(s, dtype=dtype)))
    if nonfinite:
        def poison(value: float) -> torch.Tensor:
            t = torch.ones(shape, dtype=torch.float64)
            t.view(-1)[0] = value
            return t
        parts.append(st.sampled_from([math.nan, math.inf, -math.inf]).map(poison))
    return st.one_of(*parts)


def index_tensors_out_of_range(shape: tuple[int, ...], low: int, high: int | None) -> st.SearchStrategy:
    """Integer tensors holding one entry below ``low`` or at/above ``high``."""
    values = st.integers(max_value=low - 1, min_value=-(2**40))
    if high is not None:
        values = st.one_of(values, st.integers(min_value=high, max_value=2**40))

    def make(v: int) -> torch.Tensor:
        t = torch.full(shape, max(low, 0), dtype=torch.long)
        t.view(-1)[-1] = v
        return t

    return values.map(make)


# ----------------------------------------------------------------------------- cases


@dataclass
class Case:
    """One public callable: ``target`` (for the signature check), ``call`` (how to invoke it, default the
    target itself), ``valid`` (a factory of valid keyword arguments), ``bad`` (argument -> strategy of wrong
    values), ``mentions`` (argument -> text the message must contain, default the argument name) and
    ``extremes`` (overrides of ``valid`` that must run without error). ``reported`` (argument -> strategy) is for
    the one kind of argument that is documented to give a failed report instead of an error: the student's function
    handed to an exercise check (a student's mistake is feedback, never a crash)."""

    target: Callable
    valid: Callable[[], dict]
    bad: dict[str, st.SearchStrategy]
    call: Callable | None = None
    mentions: dict[str, str] = field(default_factory=dict)
    extremes: list[dict] = field(default_factory=list)
    examples: int = 25
    reported: dict[str, st.SearchStrategy] = field(default_factory=dict)

    def invoke(self, kwargs: dict) -> object:
        return (self.call or self.target)(**kwargs)


def randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0), dtype=dtype)


LONG = 10**7  # a "very large position": far past every cache


def _tiny_model(position: str = "none") -> cpe.TinyTransformer:
    torch.manual_seed(0)
    return cpe.TinyTransformer(7, d_model=8, num_heads=2, num_layers=1, position=position, max_positions=16)


_TRAIN_CFG = dict(steps=2, batch_size=2, seq_len=3, warmup=1, log_every=1)

# One sandbox child (limited isolation: no namespaces) shared by the cases of Sandbox's methods, started on first
# use and closed after this module; bad arguments are refused before anything is sent to it.
_SANDBOXES: list[Sandbox] = []


def _sandbox() -> Sandbox:
    if not _SANDBOXES or _SANDBOXES[0]._to_child < 0:
        box = Sandbox(isolation="limited")
        box.start()
        assert box.run_cell("def double(x):\n    return 2 * x", 600) is None
        _SANDBOXES[:] = [box]
    return _SANDBOXES[0]


@pytest.fixture(scope="module", autouse=True)
def _close_sandboxes():
    yield
    for box in _SANDBOXES:
        box.close()
    _SANDBOXES.clear()


_GRADEBOOK_DIR = tempfile.TemporaryDirectory(prefix="course_pe_bad_input_")


def _two_models() -> list[torch.nn.Module]:
    return cpe.init_seeds(lambda: cpe.TinyTransformer(7, d_model=8, num_heads=2, num_layers=1, max_positions=16),
                          [0, 1])


def _rows(*pairs: tuple[str, tuple[float, ...]]) -> list[benchmark.BenchmarkRow]:
    return [benchmark.BenchmarkRow(n, sorted(s)[len(s) // 2], s) for n, s in pairs]


def _drawn_in(language: str) -> str:
    """Enter and leave ``plotting.drawn_in(language)`` (a context manager checks its argument on entry)."""
    with plotting.drawn_in(language):
        return plotting.figure_language()


def _small_figure() -> "plt.Figure":
    fig, ax = plt.subplots(figsize=(1, 1), dpi=20)
    ax.set_title(plotting.t("Binary digits of $p$ (red 1, blue 0)"))
    return fig


_PNG = b"\x89PNG\r\n\x1a\n" + bytes(16)  # a PNG's signature: what BilingualFigure checks its images for


BAD_SECONDS = st.sampled_from([None, (1.0,), [], [-1.0], [math.nan], ["1"], [True], [1.0, 2.0]])
BAD_PATHS = st.sampled_from(["/tmp", 3, [3], [""], [b"/tmp"], {"a": 1}])

REGISTRY: dict[str, Case] = {
    # -------------------------------------------------------------- sinusoidal
    "sinusoidal.sinusoidal_frequencies": Case(
        cpe.sinusoidal_frequencies,
        lambda: dict(d_model=8, base=10000.0),
        {"d_model": st.one_of(bad_int(1), st.integers(1, 100).map(lambda n: 2 * n + 1)), "base": bad_float(0.0)},
        extremes=[dict(d_model=2), dict(base=1.0), dict(d_model=4096)],
    ),
    "sinusoidal.sinusoidal_wavelengths": Case(
        cpe.sinusoidal_wavelengths,
        lambda: dict(d_model=8),
        {"d_model": bad_int(1), "base": bad_float(0.0)},
        extremes=[dict(d_model=2)],
    ),
    "sinusoidal.sinusoidal_encoding_np": Case(
        cpe.sinusoidal_encoding_np,
        lambda: dict(num_positions=4, d_model=8),
        {
            "num_positions": bad_int(1),
            "d_model": bad_int(1),
            "base": bad_float(0.0),
            "layout": bad_choice(cpe.SINUSOIDAL_LAYOUTS),
            "start": bad_int(0),
        },
        extremes=[dict(num_positions=1), dict(start=LONG), dict(start=2**40, num_positions=2)],
    ),
    "sinusoidal.sinusoidal_encoding": Case(
        cpe.sinusoidal_encoding,
        lambda: dict(num_positions=4, d_model=8),
        {
            "num_positions": bad_int(1),
            "d_model": bad_int(1),
            "base": bad_float(0.0),
            "layout": bad_choice(cpe.SINUSOIDAL_LAYOUTS),
            "dtype": BAD_DTYPE,
            "device": BAD_DEVICE,
            "start": bad_int(0),
        },
        extremes=[dict(num_positions=1), dict(start=LONG), dict(dtype=torch.bfloat16)],
    ),
    "sinusoidal.shift_matrix": Case(
        cpe.shift_matrix,
        lambda: dict(k=3, d_model=8),
        {"k": bad_float(None), "d_model": bad_int(1), "layout": bad_choice(cpe.SINUSOIDAL_LAYOUTS), "dtype": BAD_DTYPE,
         "base": bad_float(0.0)},
        extremes=[dict(k=0), dict(k=-LONG), dict(k=0.5), dict(k=np.int64(4)), dict(d_model=2)],
    ),
    "sinusoidal.SinusoidalPositionalEncoding": Case(
        cpe.SinusoidalPositionalEncoding,
        lambda: dict(d_model=8),
        {
            "d_model": bad_int(1),
            "max_len": bad_int(1),
            "base": bad_float(0.0),
            "layout": bad_choice(cpe.SINUSOIDAL_LAYOUTS),
            "scale_embeddings": BAD_BOOL,
            "dropout": bad_float(0.0, strict=False),
        },
        extremes=[dict(max_len=1), dict(dropout=0.0)],
    ),
    "sinusoidal.SinusoidalPositionalEncoding.encoding": Case(
        cpe.SinusoidalPositionalEncoding.encoding,
        lambda: dict(length=3),
        {"length": bad_int(0), "offset": bad_int(0)},
        call=lambda **kw: cpe.SinusoidalPositionalEncoding(8, max_len=4).encoding(**kw),
        extremes=[dict(length=0), dict(length=1), dict(length=2, offset=LONG)],
    ),
    "sinusoidal.SinusoidalPositionalEncoding.forward": Case(
        cpe.SinusoidalPositionalEncoding.forward,
        lambda: dict(x=randn(2, 3, 8)),
        {"x": bad_tensor((2, 3, 8), wrong_shapes=((3, 8), (2, 3, 6), (1, 2, 3, 8))), "offset": bad_int(0)},
        call=lambda **kw: cpe.SinusoidalPositionalEncoding(8, max_len=4)(**kw),
        extremes=[dict(x=randn(2, 0, 8)), dict(x=randn(1, 1, 8)), dict(offset=LONG), dict(x=randn(1, 3, 8, dtype=torch.float64))],
    ),
    # -------------------------------------------------------------- rope
    "rope.device_value_checks": Case(
        cpe.rope.device_value_checks, lambda: dict(enabled=None),
        {"enabled": st.sampled_from([1, 0, "yes", "", [True], torch.tensor(True), 1.0])},
        extremes=[dict(enabled=False)],
    ),
    "rope.rope_cos_sin": Case(
        cpe.rope_cos_sin,
        lambda: dict(positions=torch.arange(4), inv_freq=torch.ones(3)),
        {
            "positions": bad_tensor((4,), "position", nonfinite=True),
            "inv_freq": bad_tensor((3,), nonfinite=True, wrong_shapes=((3, 1),)),
            "dtype": BAD_DTYPE,
            "attention_factor": bad_float(0.0),
        },
        extremes=[dict(positions=torch.arange(0)), dict(positions=torch.tensor([LONG, 2**40]))],
    ),
    "rope.rotate_with_cos_sin": Case(
        cpe.rotate_with_cos_sin,
        lambda: dict(x=randn(3, 8), cos=torch.ones(3, 4), sin=torch.zeros(3, 4)),
        {
            "x": bad_tensor((3, 8), wrong_shapes=((8,), (3, 7))),
            "cos": bad_tensor((3, 4), nonfinite=True, wrong_shapes=((3, 3),)),
            "sin": bad_tensor((3, 4), nonfinite=True, wrong_shapes=((3, 3),)),
            "layout": bad_choice(cpe.ROPE_LAYOUTS),
        },
        extremes=[dict(x=randn(0, 8), cos=torch.ones(0, 4), sin=torch.ones(0, 4)),
                  dict(x=randn(0, 8), cos=torch.ones(0, 4), sin=torch.ones(0, 4), layout="half")],
    ),
    "rope.apply_rope": Case(
        cpe.apply_rope,
        lambda: dict(x=randn(2, 4, 8)),
        {
            "x": bad_tensor((2, 4, 8), wrong_shapes=((8,), (2, 4, 7))),
            "positions": st.one_of(
                bad_tensor((4,), "position", nonfinite=True, wrong_shapes=((3,), (2, 4), (1, 1, 4))),
            ),
            "inv_freq": bad_tensor((4,), nonfinite=True, wrong_shapes=((3,),)),
            "base": bad_float(0.0),
            "layout": bad_choice(cpe.ROPE_LAYOUTS),
            "rotary_dim": st.one_of(bad_int(1), st.just(3), st.just(10)),
        },
        mentions={"positions": "positions"},
        extremes=[
            dict(x=randn(2, 0, 8)),
            dict(x=randn(2, 0, 8), layout="half"),
            dict(x=randn(2, 0, 8).transpose(0, 1)),
            dict(x=randn(1, 8)),
            dict(x=randn(1, 8), positions=torch.tensor([LONG])),
            dict(x=randn(1, 8), positions=torch.tensor([2**40])),
            dict(x=randn(1, 8), positions=torch.tensor([-5.5], dtype=torch.float64)),
        ],
    ),
    "rope.layout_permutation": Case(
        cpe.layout_permutation,
        lambda: dict(head_dim=8),
        {"head_dim": bad_int(1), "to": bad_choice(cpe.ROPE_LAYOUTS)},
        extremes=[dict(head_dim=2), dict(head_dim=2, to="interleaved")],
    ),
    "rope.interleaved_to_half": Case(
        cpe.interleaved_to_half,
        lambda: dict(x=randn(3, 8)),
        {"x": st.one_of(st.sampled_from([torch.zeros(3, 7), torch.tensor(1.0), [1.0, 2.0], np.ones(4)]))},
        extremes=[dict(x=randn(0, 8)), dict(x=torch.arange(4))],
    ),
    "rope.half_to_interleaved": Case(
        cpe.half_to_interleaved,
        lambda: dict(x=randn(3, 8)),
        {"x": st.one_of(st.sampled_from([torch.zeros(3, 7), torch.tensor(1.0), [1.0, 2.0], np.ones(4)]))},
        extremes=[dict(x=randn(0, 8)), dict(x=torch.arange(4))],
    ),
    "rope.permute_qk_weights": Case(
        cpe.permute_qk_weights,
        lambda: dict(weight=randn(16, 5), num_heads=2),
        {
            "weight": bad_tensor((16, 5), wrong_shapes=((2, 8, 5), (2, 2, 4, 5), (15, 5))),
            "num_heads": st.one_of(bad_int(1), st.just(3), st.just(16)),
            "to": bad_choice(cpe.ROPE_LAYOUTS),
            "rotary_dim": st.one_of(bad_int(1), st.just(3), st.just(10)),
        },
        extremes=[dict(weight=randn(16)), dict(weight=randn(16, 0)), dict(rotary_dim=2)],
    ),
    "rope.RotaryEmbedding": Case(
        cpe.RotaryEmbedding,
        lambda: dict(head_dim=8),
        {
            "head_dim": bad_int(1),
            "base": bad_float(1.0),
            "max_positions": bad_int(1),
            "scaling": st.sampled_from(["linear", 2.0, cpe.LinearScaling]),
            "layout": bad_choice(cpe.ROPE_LAYOUTS),
            "rotary_dim": st.one_of(bad_int(1), st.just(10)),
        },
        mentions={"scaling": "scaling", "base": "base"},
        extremes=[dict(max_positions=1), dict(head_dim=2), dict(rotary_dim=2)],
    ),
    "rope.RotaryEmbedding.cos_sin": Case(
        cpe.RotaryEmbedding.cos_sin,
        lambda: dict(positions=torch.arange(4)),
        {
            "positions": st.one_of(
                bad_tensor((4,), "position", nonfinite=True),
                index_tensors_out_of_range((4,), 0, None),
                st.just(torch.tensor([0.5, 1.0])),
                st.just(torch.tensor([1e30], dtype=torch.float64)),
            ),
            "seq_len": bad_int(1),
        },
        call=lambda **kw: cpe.RotaryEmbedding(8, max_positions=4).cos_sin(**kw),
        extremes=[dict(positions=torch.arange(0)), dict(positions=torch.tensor([LONG])),
                  dict(positions=torch.tensor([3.0]))],
    ),
    "rope.RotaryEmbedding.forward": Case(
        cpe.RotaryEmbedding.forward,
        lambda: dict(x=randn(2, 3, 8)),
        {
            "x": bad_tensor((2, 3, 8), wrong_shapes=((8,), (2, 3, 6))),
            "positions": st.one_of(
                bad_tensor((3,), "position", nonfinite=True, wrong_shapes=((4,),)),
                index_tensors_out_of_range((3,), 0, None),
            ),
            "seq_len": bad_int(1, 2**53 + 1),
        },
        call=lambda **kw: cpe.RotaryEmbedding(8, max_positions=4, scaling=cpe.DynamicNTKScaling(2.0, 2))(**kw),
        extremes=[dict(x=randn(2, 0, 8)), dict(x=randn(1, 1, 8), positions=torch.tensor([3 * 10**6])),
                  dict(seq_len=2**53 + 1), dict(seq_len=1)],
    ),
    # -------------------------------------------------------------- rope_scaling
    "rope_scaling.LinearScaling": Case(cpe.LinearScaling, lambda: dict(factor=2.0), {"factor": bad_float(1.0, strict=False)},
                                       extremes=[dict(factor=1), dict(factor=1e6)]),
    "rope_scaling.NTKScaling": Case(cpe.NTKScaling, lambda: dict(factor=2.0), {"factor": bad_float(1.0, strict=False)},
                                    extremes=[dict(factor=1)]),
    "rope_scaling.DynamicNTKScaling": Case(
        cpe.DynamicNTKScaling,
        lambda: dict(factor=2.0, original_max_positions=16),
        {"factor": bad_float(1.0, strict=False), "original_max_positions": bad_int(1)},
        extremes=[dict(original_max_positions=1)],
    ),
    "rope_scaling.YaRNScaling": Case(
        cpe.YaRNScaling,
        lambda: dict(factor=2.0, original_max_positions=16),
        {
            "factor": bad_float(1.0, strict=False),
            "original_max_positions": bad_int(1),
            "beta_fast": st.one_of(bad_float(0.0), st.just(0.5)),
            "beta_slow": st.one_of(bad_float(0.0), st.just(64.0)),
            "attention_factor": bad_float(0.0),
        },
        extremes=[dict(original_max_positions=1), dict(attention_factor=None)],
    ),
    "rope_scaling.Llama3Scaling": Case(
        cpe.Llama3Scaling,
        lambda: dict(factor=2.0, original_max_positions=16),
        {
            "factor": bad_float(1.0, strict=False),
            "original_max_positions": bad_int(1),
            "low_freq_factor": st.one_of(bad_float(0.0), st.just(8.0)),
            "high_freq_factor": st.one_of(bad_float(0.0), st.just(0.5)),
        },
        extremes=[dict(original_max_positions=1)],
    ),
    "rope_scaling.rope_frequencies": Case(
        cpe.rope_frequencies,
        lambda: dict(head_dim=8),
        {
            "head_dim": bad_int(1),
            "base": bad_float(1.0),
            "scaling": st.sampled_from(["yarn", 4.0, object()]),
            "seq_len": bad_int(1),
            "dtype": BAD_DTYPE,
        },
        mentions={"scaling": "scaling"},
        extremes=[dict(head_dim=2), dict(seq_len=2**50, scaling=cpe.DynamicNTKScaling(2.0, 16))],
    ),
    "rope_scaling.yarn_correction_range": Case(
        cpe.yarn_correction_range,
        lambda: dict(head_dim=8, base=10000.0, original_max_positions=64, beta_fast=32.0, beta_slow=1.0),
        {
            "head_dim": bad_int(1),
            "base": bad_float(1.0),
            "original_max_positions": bad_int(1),
            "beta_fast": bad_float(0.0),
            "beta_slow": st.one_of(bad_float(0.0), st.just(40.0)),
        },
        extremes=[dict(original_max_positions=1), dict(original_max_positions=2**40)],
    ),
    "rope_scaling.LongRoPEScaling": Case(
        cpe.LongRoPEScaling, lambda: dict(short_factor=[1.0, 1.5], long_factor=[2.0, 8.0], original_max_positions=16),
        {"short_factor": st.sampled_from([None, "1.0", 1.0, [], [1.0, 0.0], [1.0, math.nan], [1.0], [1.0, "2"],
                                          [True, 1.0]]),
         "long_factor": st.sampled_from([None, [2.0], [2.0, -1.0], [2.0, math.inf], [2.0] * (2**20 + 1)]),
         "original_max_positions": bad_int(1), "factor": bad_float(1.0, strict=False),
         "attention_factor": bad_float(0.0)},
        extremes=[dict(factor=8.0), dict(original_max_positions=1), dict(factor=2.0, original_max_positions=2),
                  dict(short_factor=torch.tensor([1.0, 1.0]), long_factor=(3, 4), attention_factor=1e-9)],
    ),
    "rope_scaling.ProportionalScaling": Case(
        cpe.ProportionalScaling, lambda: dict(partial_rotary_factor=0.25),
        {"partial_rotary_factor": st.one_of(bad_float(0.0, strict=False), st.floats(1.0, 10.0, exclude_min=True)),
         "factor": bad_float(1.0, strict=False)},
        extremes=[dict(partial_rotary_factor=0.0), dict(partial_rotary_factor=1, factor=1e6)],
    ),
    "rope_scaling.RopeConfig": Case(
        cpe.RopeConfig, lambda: dict(rope_type="default", head_dim=8, rotary_dim=8, base=10000.0, scaling=None),
        {"rope_type": st.sampled_from(["ntk", "", None, "Default"]), "head_dim": bad_int(1),
         "rotary_dim": st.one_of(bad_int(1), st.just(10), st.just(3)), "base": bad_float(0.0),
         "scaling": st.sampled_from(["linear", 2.0, cpe.LinearScaling]), "max_positions": bad_int(1)},
        mentions={"rope_type": "rope_type", "rotary_dim": "rotary_dim"},
        extremes=[dict(rotary_dim=2), dict(max_positions=1), dict(rope_type="linear", scaling=cpe.LinearScaling(2.0))],
    ),
    "rope_scaling.RopeConfig.frequencies": Case(
        cpe.RopeConfig.frequencies, lambda: dict(),
        {"seq_len": bad_int(1, 2**53 + 1), "dtype": BAD_DTYPE},
        call=lambda **kw: cpe.RopeConfig("dynamic", 8, 8, 10000.0, cpe.DynamicNTKScaling(2.0, 16)).frequencies(**kw),
        extremes=[dict(seq_len=1), dict(seq_len=2**53 + 1, dtype=torch.float64)],
    ),
    "rope_scaling.RopeConfig.rotary_embedding": Case(
        cpe.RopeConfig.rotary_embedding, lambda: dict(),
        {"layout": bad_choice(cpe.ROPE_LAYOUTS), "max_positions": bad_int(1)},
        call=lambda **kw: cpe.RopeConfig("default", 8, 4, 10000.0, None).rotary_embedding(**kw),
        extremes=[dict(layout="interleaved"), dict(max_positions=1)],
    ),
    "rope_scaling.rope_config_from_hf": Case(
        cpe.rope_config_from_hf, lambda: dict(config={"hidden_size": 64, "num_attention_heads": 4}),
        {"config": st.sampled_from([None, "config.json", [("head_dim", 8)], {"head_dim": 7},
                                    {"head_dim": 8, "rope_parameters": "yarn"},
                                    {"head_dim": 8, "rope_scaling": {"rope_type": "yarn"}},
                                    {"head_dim": 8, "rope_theta": "1e4"}, {"hidden_size": 64},
                                    {"head_dim": 8, "rope_scaling": {"type": "linear", "factor": 0.5}}]),
         "layer_type": st.sampled_from([3, "nope", ["full_attention"]]), "head_dim": bad_int(1),
         "default_base": bad_float(0.0)},
        mentions={"config": "config", "head_dim": "head_dim"},
        extremes=[dict(config={"head_dim": 8, "rope_scaling": None}),
                  dict(config={"head_dim": 8, "rope_parameters": {"sliding_attention": {"rope_type": "default"}}}),
                  dict(head_dim=2), dict(config={"head_dim": 8, "rope_theta": 1e300})],
    ),
    "rope_scaling.RopeConfig.summary": Case(
        cpe.RopeConfig.summary, lambda: dict(training_length=4096),
        {"training_length": bad_int(1)},
        call=lambda **kw: cpe.RopeConfig("default", 8, 8, 10000.0, None).summary(**kw),
        extremes=[dict(training_length=1), dict(training_length=2**53)],
    ),
    "rope_scaling.complete_turn_pairs": Case(
        cpe.complete_turn_pairs, lambda: dict(rotary_dim=8, base=10000.0, length=4096),
        {"rotary_dim": st.one_of(bad_int(1), st.just(7)), "base": bad_float(1.0, strict=False), "length": bad_int(1),
         "scaling": st.sampled_from(["linear", 2.0, cpe.LinearScaling]), "seq_len": bad_int(1)},
        mentions={"rotary_dim": "head_dim"},
        extremes=[dict(length=1), dict(length=2**62), dict(rotary_dim=2),
                  dict(scaling=cpe.DynamicNTKScaling(4.0, 16), seq_len=2**20)],
    ),
    "rope_scaling.yarn_mscale": Case(
        cpe.yarn_mscale, lambda: dict(factor=40.0, mscale=0.707),
        {"factor": bad_float(0.0), "mscale": bad_float(0.0, strict=False)},
        extremes=[dict(factor=0.5), dict(mscale=0.0), dict(factor=1e308)],
    ),
    "rope_scaling.yarn_softmax_scale": Case(
        cpe.yarn_softmax_scale, lambda: dict(qk_head_dim=192, scaling=cpe.YaRNScaling(40.0, 4096, mscale_all_dim=1.0)),
        {"qk_head_dim": bad_int(1), "scaling": st.sampled_from(["yarn", 40.0, cpe.YaRNScaling, {"factor": 40}])},
        extremes=[dict(scaling=None), dict(scaling=cpe.LinearScaling(2.0)), dict(qk_head_dim=1)],
    ),
    # -------------------------------------------------------------- t5, alibi, shaw
    "t5.t5_relative_position_bucket": Case(
        cpe.t5_relative_position_bucket,
        lambda: dict(relative_position=torch.arange(-5, 5)),
        {
            "relative_position": bad_tensor((10,), "integer"),
            "bidirectional": BAD_BOOL,
            "num_buckets": st.one_of(bad_int(1), st.just(3), st.just(2)),
            "max_distance": st.one_of(bad_int(1), st.just(2)),
        },
        mentions={"num_buckets": "num_buckets", "max_distance": "max_distance"},
        extremes=[dict(relative_position=torch.arange(0)), dict(relative_position=torch.tensor([-(2**40), 2**40]))],
    ),
    "t5.T5RelativeBias": Case(
        cpe.T5RelativeBias,
        lambda: dict(num_heads=2),
        {"num_heads": bad_int(1), "bidirectional": BAD_BOOL, "num_buckets": st.one_of(bad_int(1), st.just(3)),
         "max_distance": bad_int(1)},
        mentions={"max_distance": "max_distance"},
        extremes=[dict(num_heads=1)],
    ),
    "t5.T5RelativeBias.forward": Case(
        cpe.T5RelativeBias.forward,
        lambda: dict(q_len=3, k_len=4),
        {"q_len": st.one_of(bad_int(0), st.just(9)), "k_len": bad_int(0), "query_offset": bad_int(0), "device": BAD_DEVICE},
        call=lambda **kw: cpe.T5RelativeBias(2)(**kw),
        mentions={"q_len": "q_len"},
        extremes=[dict(q_len=0, k_len=0), dict(q_len=1, k_len=1), dict(q_len=1, k_len=1, query_offset=LONG)],
    ),
    "alibi.alibi_slopes": Case(
        cpe.alibi_slopes, lambda: dict(num_heads=4), {"num_heads": bad_int(1), "dtype": BAD_DTYPE},
        extremes=[dict(num_heads=1), dict(num_heads=1000)],
    ),
    "alibi.alibi_bias": Case(
        cpe.alibi_bias,
        lambda: dict(num_heads=2, q_len=3, k_len=4),
        {"num_heads": bad_int(1), "q_len": st.one_of(bad_int(0), st.just(5)), "k_len": bad_int(0), "causal": BAD_BOOL,
         "dtype": BAD_DTYPE, "device": BAD_DEVICE},
        extremes=[dict(q_len=0, k_len=0), dict(q_len=1, k_len=1), dict(q_len=0, k_len=3)],
    ),
    "shaw.shaw_relative_positions": Case(
        cpe.shaw_relative_positions,
        lambda: dict(q_len=3, k_len=4, max_distance=2),
        {"q_len": st.one_of(bad_int(0), st.just(5)), "k_len": bad_int(0), "max_distance": bad_int(0),
         "device": BAD_DEVICE, "query_offset": bad_int(0)},
        extremes=[dict(q_len=0, k_len=0), dict(q_len=1, k_len=1, max_distance=0), dict(max_distance=LONG),
                  dict(query_offset=LONG)],
    ),
    "shaw.shaw_attention": Case(
        cpe.shaw_attention,
        lambda: dict(q=randn(1, 2, 3, 4), k=randn(1, 2, 3, 4), v=randn(1, 2, 3, 4), rel_keys=randn(5, 4),
                     rel_values=randn(5, 4), max_distance=2),
        {
            "q": bad_tensor((1, 2, 3, 4), wrong_shapes=((2, 3, 4), (1, 2, 3, 5), (1, 2, 4, 4))),
            "k": bad_tensor((1, 2, 3, 4), wrong_shapes=((2, 3, 4), (1, 1, 3, 4))),
            "v": bad_tensor((1, 2, 3, 4), wrong_shapes=((1, 2, 2, 4),)),
            "rel_keys": bad_tensor((5, 4), wrong_shapes=((4, 4),)),
            "rel_values": bad_tensor((5, 4), wrong_shapes=((5, 3),)),
            "max_distance": st.one_of(bad_int(0), st.just(3)),
            "mask": bad_tensor((3, 3), "bool", wrong_shapes=((4, 3),)),
            "return_weights": BAD_BOOL,
        },
        extremes=[dict(q=randn(1, 2, 0, 4), k=randn(1, 2, 0, 4), v=randn(1, 2, 0, 4)),
                  dict(q=randn(1, 2, 1, 4), k=randn(1, 2, 1, 4), v=randn(1, 2, 1, 4), rel_values=None)],
    ),
    "shaw.ShawRelativePositions": Case(
        cpe.ShawRelativePositions, lambda: dict(head_dim=4),
        {"head_dim": bad_int(1), "max_distance": bad_int(0), "values": BAD_BOOL},
        extremes=[dict(max_distance=0), dict(values=False)],
    ),
    "shaw.ShawRelativePositions.forward": Case(
        cpe.ShawRelativePositions.forward,
        lambda: dict(q=randn(1, 2, 3, 4), k=randn(1, 2, 3, 4), v=randn(1, 2, 3, 4)),
        {"q": bad_tensor((1, 2, 3, 4), wrong_shapes=((1, 2, 3, 5),)), "k": bad_tensor((1, 2, 3, 4)),
         "v": bad_tensor((1, 2, 3, 4)), "mask": bad_tensor((3, 3), "bool"), "return_weights": BAD_BOOL},
        call=lambda **kw: cpe.ShawRelativePositions(4, 2)(**kw),
        extremes=[dict(q=randn(1, 2, 0, 4), k=randn(1, 2, 0, 4), v=randn(1, 2, 0, 4))],
    ),
    # -------------------------------------------------------------- attention
    "attention.causal_mask": Case(
        cpe.causal_mask, lambda: dict(q_len=3, k_len=4),
        {"q_len": st.one_of(bad_int(0), st.just(5)), "k_len": bad_int(0), "device": BAD_DEVICE},
        extremes=[dict(q_len=0, k_len=0), dict(q_len=1, k_len=None), dict(q_len=0, k_len=5)],
    ),
    "attention.attention": Case(
        cpe.attention,
        lambda: dict(q=randn(1, 2, 3, 4), k=randn(1, 2, 3, 4), v=randn(1, 2, 3, 4)),
        {
            "q": bad_tensor((1, 2, 3, 4), wrong_shapes=((2, 3, 4), (1, 2, 3, 5), (1, 3, 3, 4))),
            "k": bad_tensor((1, 2, 3, 4), wrong_shapes=((1, 2, 4, 4),)),
            "v": bad_tensor((1, 2, 3, 4), wrong_shapes=((1, 2, 2, 4),)),
            "bias": bad_tensor((1, 2, 3, 3), wrong_shapes=((3, 4), (2, 1, 2, 3, 3))),
            "mask": bad_tensor((3, 3), "bool", wrong_shapes=((3, 4), (2, 1, 2, 3, 3))),
            "causal": BAD_BOOL,
            "dropout": bad_float(0.0, strict=False),
            "training": BAD_BOOL,
        },
        extremes=[dict(q=randn(1, 2, 0, 4), k=randn(1, 2, 0, 4), v=randn(1, 2, 0, 4), causal=True),
                  dict(q=randn(1, 1, 1, 4), k=randn(1, 1, 1, 4), v=randn(1, 1, 1, 4))],
    ),
    "attention.MultiHeadAttention": Case(
        cpe.MultiHeadAttention,
        lambda: dict(d_model=8, num_heads=2),
        {
            "d_model": st.one_of(bad_int(1), st.just(7)),
            "num_heads": st.one_of(bad_int(1), st.just(3)),
            "position": bad_choice(cpe.ATTENTION_POSITIONS),
            "causal": BAD_BOOL,
            "dropout": bad_float(0.0, strict=False),
            "bias": BAD_BOOL,
            "rope_base": bad_float(0.0),
            "rope_layout": bad_choice(cpe.ROPE_LAYOUTS),
            "rope_max_positions": bad_int(1),
            "shaw_max_distance": bad_int(0),
            "t5_num_buckets": bad_int(1),
            "t5_max_distance": bad_int(1),
        },
        mentions={"d_model": "d_model", "num_heads": "num_heads"},
        extremes=[dict(num_heads=1), dict(position="rope", d_model=4, num_heads=2)],
    ),
    "attention.MultiHeadAttention.forward": Case(
        cpe.MultiHeadAttention.forward,
        lambda: dict(x=randn(2, 3, 8)),
        {"x": bad_tensor((2, 3, 8), wrong_shapes=((3, 8), (2, 3, 6))), "mask": bad_tensor((3, 3), "bool", wrong_shapes=((3, 4),)),
         "return_weights": BAD_BOOL, "positions": st.just(torch.arange(3))},
        call=lambda **kw: cpe.MultiHeadAttention(8, 2)(**kw),
        extremes=[dict(x=randn(2, 0, 8)), dict(x=randn(1, 1, 8))],
    ),
    # -------------------------------------------------------------- learned
    "learned.LearnedPositionalEmbedding": Case(
        cpe.LearnedPositionalEmbedding,
        lambda: dict(max_positions=8, d_model=4),
        {"max_positions": bad_int(1), "d_model": bad_int(1), "init_std": bad_float(0.0), "generator": BAD_GENERATOR},
        extremes=[dict(max_positions=1, d_model=1)],
    ),
    "learned.LearnedPositionalEmbedding.lookup": Case(
        cpe.LearnedPositionalEmbedding.lookup,
        lambda: dict(positions=torch.arange(3)),
        {"positions": st.one_of(bad_tensor((3,), "integer"), index_tensors_out_of_range((3,), 0, 8))},
        call=lambda **kw: cpe.LearnedPositionalEmbedding(8, 4).lookup(**kw),
        extremes=[dict(positions=torch.arange(0)), dict(positions=torch.tensor(7))],
    ),
    "learned.LearnedPositionalEmbedding.forward": Case(
        cpe.LearnedPositionalEmbedding.forward,
        lambda: dict(x=randn(2, 3, 4)),
        {"x": bad_tensor((2, 3, 4), wrong_shapes=((3, 4), (2, 3, 5))),
         "positions": st.one_of(bad_tensor((3,), "integer", wrong_shapes=((2,),)), index_tensors_out_of_range((3,), 0, 8))},
        call=lambda **kw: cpe.LearnedPositionalEmbedding(8, 4)(**kw),
        extremes=[dict(x=randn(2, 0, 4)), dict(x=randn(1, 1, 4))],
    ),
    "learned.LearnedPositionalEmbedding.interpolate": Case(
        cpe.LearnedPositionalEmbedding.interpolate,
        lambda: dict(new_max_positions=6),
        {"new_max_positions": st.one_of(bad_int(1), st.just(1))},
        call=lambda **kw: cpe.LearnedPositionalEmbedding(4, 2).interpolate(**kw),
        extremes=[dict(new_max_positions=4), dict(new_max_positions=2)],
    ),
    # -------------------------------------------------------------- permutation
    "permutation.random_permutation": Case(
        cpe.random_permutation, lambda: dict(n=5),
        {"n": bad_int(1), "generator": BAD_GENERATOR, "derangement": BAD_BOOL},
        extremes=[dict(n=1), dict(n=2)],
    ),
    "permutation.permutation_matrix": Case(
        cpe.permutation_matrix, lambda: dict(perm=torch.tensor([2, 0, 1])),
        {"perm": st.one_of(bad_tensor((3,), "integer", wrong_shapes=((3, 1),)), st.just(torch.tensor([0, 0, 1])),
                           st.just(torch.tensor([0, 3, 1]))),
         "dtype": BAD_DTYPE},
        extremes=[dict(perm=torch.arange(0)), dict(perm=torch.tensor([0]))],
    ),
    "permutation.permute_sequence": Case(
        cpe.permute_sequence, lambda: dict(x=randn(2, 3, 4), perm=torch.tensor([2, 0, 1])),
        {"x": st.sampled_from([randn(3), [1.0, 2.0], np.ones((3, 3)), randn(2, 4, 4)]),
         "perm": st.one_of(bad_tensor((3,), "integer"), st.just(torch.tensor([0, 0, 1])))},
        mentions={"perm": "perm"},
        extremes=[dict(x=randn(0, 4), perm=torch.arange(0)), dict(x=randn(1, 2, 3, 4))],
    ),
    "permutation.equivariance_error": Case(
        cpe.equivariance_error, lambda: dict(f=lambda t: 2 * t, x=randn(2, 3, 4), perm=torch.tensor([2, 0, 1])),
        {"f": st.sampled_from([None, 3, "f", lambda t: [1], lambda t: t.sum(-2)]),
         "x": bad_tensor((2, 3, 4), wrong_shapes=((3,),)),
         "perm": st.one_of(bad_tensor((3,), "integer"), st.just(torch.tensor([1, 1, 0])))},
        mentions={"perm": "perm"},
        extremes=[dict(x=randn(2, 0, 4), perm=torch.arange(0)), dict(x=randn(1, 1, 4), perm=torch.tensor([0]))],
    ),
    "permutation.invariance_error": Case(
        cpe.invariance_error, lambda: dict(g=lambda t: t.sum(-2), x=randn(2, 3, 4), perm=torch.tensor([2, 0, 1])),
        {"g": st.sampled_from([None, 3, "g", lambda t: 1.0]),
         "x": bad_tensor((2, 3, 4), wrong_shapes=((3,),)),
         "perm": st.one_of(bad_tensor((3,), "integer"), st.just(torch.tensor([1, 1, 0])))},
        mentions={"perm": "perm"},
        extremes=[dict(x=randn(2, 0, 4), perm=torch.arange(0))],
    ),
    # -------------------------------------------------------------- model
    "model.TransformerBlock": Case(
        cpe.TransformerBlock, lambda: dict(d_model=8, num_heads=2, d_ff=16),
        {"d_model": bad_int(1), "num_heads": bad_int(1), "d_ff": bad_int(1), "dropout": bad_float(0.0, strict=False)},
        extremes=[dict(d_ff=1)],
    ),
    "model.TransformerBlock.forward": Case(
        cpe.TransformerBlock.forward, lambda: dict(x=randn(2, 3, 8)),
        {"x": bad_tensor((2, 3, 8), wrong_shapes=((3, 8), (2, 3, 4))), "return_weights": BAD_BOOL},
        call=lambda **kw: cpe.TransformerBlock(8, 2, 16)(**kw),
        mentions={"x": "x"},
        extremes=[dict(x=randn(2, 0, 8)), dict(x=randn(1, 1, 8))],
    ),
    "model.ModelOutput": Case(
        cpe.ModelOutput, lambda: dict(logits=randn(1, 2, 3), hidden=[randn(1, 2, 4)], attention=[randn(1, 1, 2, 2)]),
        {"logits": bad_tensor((1, 2, 3), wrong_shapes=((2, 3),)), "hidden": st.sampled_from([None, randn(1, 2, 4), [1.0]]),
         "attention": st.sampled_from([None, randn(1, 1, 2, 2), ["a"]])},
        mentions={"logits": "logits"},
        extremes=[dict(hidden=[], attention=[])],
    ),
    "model.TinyTransformer": Case(
        cpe.TinyTransformer, lambda: dict(vocab_size=7, d_model=8, num_heads=2, num_layers=1, max_positions=16),
        {
            "vocab_size": bad_int(1),
            "d_model": bad_int(1),
            "num_heads": st.one_of(bad_int(1), st.just(3)),
            "num_layers": bad_int(1),
            "d_ff": bad_int(1),
            "position": bad_choice(cpe.MODEL_POSITIONS),
            "causal": BAD_BOOL,
            "max_positions": bad_int(1),
            "num_outputs": bad_int(1),
            "scale_embeddings": BAD_BOOL,
            "dropout": bad_float(0.0, strict=False),
            "rope_base": bad_float(0.0),
            "rope_layout": bad_choice(cpe.ROPE_LAYOUTS),
            "shaw_max_distance": bad_int(0),
            "t5_num_buckets": bad_int(1),
            "t5_max_distance": bad_int(1),
        },
        mentions={"num_heads": "num_heads"},
        extremes=[dict(d_ff=None, num_outputs=None), dict(vocab_size=1, max_positions=1)],
        examples=15,
    ),
    "model.TinyTransformer.embed": Case(
        cpe.TinyTransformer.embed, lambda: dict(tokens=torch.tensor([[1, 2, 3]])),
        {"tokens": st.one_of(bad_tensor((1, 3), "integer", wrong_shapes=((3,),)), index_tensors_out_of_range((1, 3), 0, 7))},
        call=lambda **kw: _tiny_model().embed(**kw),
        mentions={"tokens": "tokens"},
        extremes=[dict(tokens=torch.zeros(2, 0, dtype=torch.long)), dict(tokens=torch.tensor([[6]]))],
        examples=15,
    ),
    "model.TinyTransformer.forward": Case(
        cpe.TinyTransformer.forward, lambda: dict(tokens=torch.tensor([[1, 2, 3]])),
        {"tokens": st.one_of(bad_tensor((1, 3), "integer", wrong_shapes=((3,),)), index_tensors_out_of_range((1, 3), 0, 7)),
         "positions": st.just(torch.arange(3)), "return_details": BAD_BOOL},
        call=lambda **kw: _tiny_model()(**kw),
        mentions={"tokens": "tokens"},
        extremes=[dict(tokens=torch.zeros(2, 0, dtype=torch.long)), dict(tokens=torch.tensor([[6]]))],
        examples=15,
    ),
    "model.TinyTransformer.set_rope_scaling": Case(
        cpe.TinyTransformer.set_rope_scaling, lambda: dict(scaling=cpe.LinearScaling(2.0)),
        {"scaling": st.sampled_from(["linear", 2.0, object()])},
        call=lambda **kw: _tiny_model("rope").set_rope_scaling(**kw),
        extremes=[dict(scaling=None), dict(scaling=cpe.YaRNScaling(4.0, 16))],
        examples=10,
    ),
    # -------------------------------------------------------------- tasks
    **{
        f"tasks.{cls.__name__}": Case(cls, lambda: dict(num_symbols=5), {"num_symbols": bad_int(1), "causal": BAD_BOOL},
                                      extremes=[dict(num_symbols=1)])
        for cls in (cpe.ReverseTask, cpe.SortTask, cpe.CopyTask)
    },
    "tasks.HistogramTask": Case(cpe.HistogramTask, lambda: dict(num_symbols=5),
                                {"num_symbols": bad_int(1), "max_count": bad_int(1), "causal": BAD_BOOL},
                                extremes=[dict(num_symbols=1, max_count=1)]),
    "tasks.PositionTask": Case(cpe.PositionTask, lambda: dict(num_symbols=5),
                               {"num_symbols": bad_int(1), "max_len": bad_int(1), "causal": BAD_BOOL},
                               extremes=[dict(max_len=1)]),
    "tasks.MarkovTask": Case(
        cpe.MarkovTask, lambda: dict(num_symbols=4),
        {"num_symbols": st.one_of(bad_int(1), st.just(100)), "order": st.one_of(bad_int(1, 2)), "branching": bad_int(1, 4),
         "seed": bad_int(0), "bos": BAD_BOOL, "causal": BAD_BOOL},
        mentions={"num_symbols": "num_symbols"},
        extremes=[dict(num_symbols=1, branching=1), dict(order=1)],
        examples=15,
    ),
    **{
        f"tasks.{cls.__name__}.sample": Case(
            cls.sample, lambda: dict(batch_size=2, seq_len=3),
            {"batch_size": bad_int(1), "seq_len": bad_int(1), "generator": BAD_GENERATOR},
            call=lambda _cls=cls, **kw: _cls(num_symbols=4).sample(**kw),
            extremes=[dict(seq_len=1), dict(batch_size=1, seq_len=1)],
        )
        for cls in (cpe.ReverseTask, cpe.SortTask, cpe.HistogramTask, cpe.PositionTask, cpe.CopyTask, cpe.MarkovTask)
    },
    "tasks.PrefixTask": Case(
        cpe.PrefixTask, lambda: dict(task=cpe.MarkovTask(4), full_len=8),
        {"task": st.sampled_from([None, 3, "markov", cpe.MarkovTask]), "full_len": bad_int(1)},
        extremes=[dict(full_len=1), dict(full_len=2**40)],
    ),
    "tasks.PrefixTask.sample": Case(
        cpe.PrefixTask.sample, lambda: dict(batch_size=2, seq_len=3),
        {"batch_size": bad_int(1), "seq_len": st.one_of(bad_int(1), st.integers(9, 10**6)), "generator": BAD_GENERATOR},
        call=lambda **kw: cpe.PrefixTask(cpe.MarkovTask(4), 8).sample(**kw),
        extremes=[dict(seq_len=1), dict(seq_len=8), dict(batch_size=1, seq_len=1)],
    ),
    "tasks.ReverseTask.position_free_optimum": Case(
        cpe.ReverseTask.position_free_optimum, lambda: dict(seq_len=4), {"seq_len": bad_int(1, 64)},
        call=lambda **kw: cpe.ReverseTask(4).position_free_optimum(**kw),
        extremes=[dict(seq_len=1), dict(seq_len=2)],
    ),
    "tasks.SortTask.position_free_optimum": Case(
        cpe.SortTask.position_free_optimum, lambda: dict(seq_len=4), {"seq_len": bad_int(1, 64)},
        call=lambda **kw: cpe.SortTask(4).position_free_optimum(**kw),
        extremes=[dict(seq_len=1), dict(seq_len=64)],
    ),
    "tasks.MarkovTask.loss_floor_by_position": Case(
        cpe.MarkovTask.loss_floor_by_position, lambda: dict(seq_len=4), {"seq_len": bad_int(1)},
        call=lambda **kw: cpe.MarkovTask(4).loss_floor_by_position(**kw),
        extremes=[dict(seq_len=1)],
    ),
    "tasks.Batch": Case(
        cpe.Batch, lambda: dict(inputs=torch.zeros(2, 3, dtype=torch.long), targets=torch.zeros(2, 3, dtype=torch.long)),
        {"inputs": bad_tensor((2, 3), "integer", wrong_shapes=((3,), (1, 3))),
         "targets": bad_tensor((2, 3), "integer", wrong_shapes=((3,), (1, 3)))},
        extremes=[dict(inputs=torch.zeros(1, 0, dtype=torch.long), targets=torch.zeros(1, 0, dtype=torch.long))],
    ),
    # -------------------------------------------------------------- training
    "training.TrainConfig": Case(
        cpe.TrainConfig, lambda: dict(),
        {"steps": bad_int(1, 2**20), "batch_size": bad_int(1), "seq_len": bad_int(1), "lr": bad_float(0.0),
         "weight_decay": bad_float(0.0, strict=False), "warmup": bad_int(0), "grad_clip": bad_float(0.0),
         "seed": bad_int(0), "log_every": bad_int(1)},
        extremes=[dict(warmup=0, weight_decay=0.0, grad_clip=None, steps=1), dict(steps=2**20)],
    ),
    "training.TrainResult": Case(
        cpe.TrainResult, lambda: dict(losses=[1.0]), {"losses": st.sampled_from([None, 1.0, (1.0,)]),
                                                       "logged": st.sampled_from([None, 1.0])},
        extremes=[dict(losses=[])],
    ),
    "training.PositionReport": Case(
        cpe.PositionReport, lambda: dict(loss=torch.ones(3), accuracy=torch.ones(3)),
        {"loss": bad_tensor((3,), wrong_shapes=((2,), (3, 1))), "accuracy": bad_tensor((3,), wrong_shapes=((2,),))},
        extremes=[dict(loss=torch.ones(0), accuracy=torch.ones(0))],
    ),
    "training.PositionReport.mean_loss": Case(
        cpe.PositionReport.mean_loss, lambda: dict(), {"start": bad_int(None), "stop": bad_int(None)},
        call=lambda **kw: cpe.PositionReport(torch.ones(3), torch.ones(3)).mean_loss(**kw),
        extremes=[dict(start=5), dict(start=-1, stop=None)],
    ),
    "training.PositionReport.mean_accuracy": Case(
        cpe.PositionReport.mean_accuracy, lambda: dict(), {"start": bad_int(None), "stop": bad_int(None)},
        call=lambda **kw: cpe.PositionReport(torch.ones(3), torch.ones(3)).mean_accuracy(**kw),
        extremes=[dict(start=2, stop=3)],
    ),
    "training.train": Case(
        cpe.train, lambda: dict(model=_tiny_model(), task=cpe.ReverseTask(7), config=cpe.TrainConfig(**_TRAIN_CFG),
                                progress=False),
        {"model": st.sampled_from([None, "model", lambda t: t]), "task": st.sampled_from([None, "task", 3]),
         "config": st.sampled_from([None, dict(steps=2), "cfg"]), "progress": BAD_BOOL,
         "description": st.sampled_from([3, b"x", ["d"]])},
        extremes=[dict(config=cpe.TrainConfig(steps=1, batch_size=1, seq_len=1, warmup=0, grad_clip=None))],
        examples=10,
    ),
    "training.evaluate_by_position": Case(
        cpe.evaluate_by_position, lambda: dict(model=_tiny_model(), task=cpe.ReverseTask(7), seq_len=3,
                                               batch_size=2, num_batches=1),
        {"model": st.sampled_from([None, "model"]), "task": st.sampled_from([None, 3]), "seq_len": bad_int(1),
         "batch_size": bad_int(1), "num_batches": bad_int(1), "seed": bad_int(0)},
        extremes=[dict(seq_len=1, batch_size=1)],
        examples=10,
    ),
    # -------------------------------------------------------------- reproducibility
    "reproducibility.set_determinism": Case(
        cpe.set_determinism, lambda: dict(seed=0, threads=1), {"seed": bad_int(0, 2**32 - 1), "threads": bad_int(1)},
        extremes=[dict(seed=2**32 - 1)],
    ),
    "reproducibility.make_generator": Case(
        cpe.make_generator, lambda: dict(seed=0), {"seed": bad_int(0, 2**63 - 1), "device": BAD_DEVICE},
        extremes=[dict(seed=2**63 - 1)],
    ),
    "reproducibility.rounded": Case(
        reproducibility.rounded, lambda: dict(value=1.23456, digits=2),
        {"value": st.sampled_from([object(), {1: 2}, torch.ones(2), 1 + 2j]), "digits": st.sampled_from([True, 1.5, "2"]),
         "sig": st.sampled_from([0, -1, True, 1.5])},
        mentions={"digits": "digits", },
        extremes=[dict(value=[], digits=1), dict(value=0.0, digits=None, sig=1)],
    ),
    "reproducibility.glue": Case(
        reproducibility.glue, lambda: dict(name="x", value=1.5, digits=1),
        {"name": st.sampled_from([3, None, "", b"x"]), "value": st.sampled_from([object(), {1: 2}, 1 + 2j])},
        mentions={"name": "name", },
        extremes=[dict(value=0.5, digits=None, sig=2)],
    ),
    # -------------------------------------------------------------- plotting
    "plotting.use_course_style": Case(plotting.use_course_style, lambda: dict(), {}, extremes=[dict()]),
    "plotting.plot_encoding_heatmap": Case(
        plotting.plot_encoding_heatmap, lambda: dict(table=randn(4, 6)),
        {"table": st.sampled_from([randn(4), [[1.0]], torch.ones(2, 2, dtype=torch.bool), np.array([["a"]])]),
         "ax": st.sampled_from([3, "ax"]), "title": st.sampled_from([3, None]), "colorbar": BAD_BOOL},
        extremes=[dict(table=randn(1, 1)), dict(table=np.ones((0, 3)))],
        examples=10,
    ),
    "plotting.plot_dimension_curves": Case(
        plotting.plot_dimension_curves, lambda: dict(table=randn(4, 6), dims=[0, 1]),
        {"table": st.sampled_from([randn(4), torch.ones(2, 2, dtype=torch.bool)]),
         "dims": st.sampled_from([[], [6], [-1], [0.5], "0", 3]),
         "labels": st.sampled_from([["a"], "ab", [1, 2]]), "ax": st.sampled_from([3]), "title": st.sampled_from([3])},
        mentions={"dims": "dims"},
        extremes=[dict(table=randn(1, 1), dims=[0]), dict(labels=["a", "b"])],
        examples=10,
    ),
    "plotting.plot_attention": Case(
        plotting.plot_attention, lambda: dict(weights=torch.eye(3)),
        {"weights": st.sampled_from([torch.ones(2, 2, 2), [[1.0]], torch.ones(2, 2, dtype=torch.bool)]),
         "tokens": st.sampled_from([["a"], "abc", [1, 2, 3]]), "ax": st.sampled_from([3]), "title": st.sampled_from([3])},
        extremes=[dict(weights=np.ones((1, 1))), dict(weights=np.ones((2, 2)), tokens=["a", "b"])],
        examples=10,
    ),
    "plotting.plot_loss_by_position": Case(
        plotting.plot_loss_by_position, lambda: dict(curves={"rope": np.ones(4)}),
        {"curves": st.sampled_from([{}, None, [np.ones(3)], {"rope": np.ones((2, 2))}, {3: np.ones(3)}]),
         "train_length": bad_int(1), "floor": bad_float(None), "ax": st.sampled_from([3]),
         "title": st.sampled_from([3]), "ylabel": st.sampled_from([None])},
        extremes=[dict(curves={"": np.ones(1)}), dict(curves={"rope": np.array([np.nan, 1.0])}, floor=0.0)],
        examples=10,
    ),
    "plotting.t": Case(
        plotting.t, lambda: dict(text="training length {n}"),
        {"text": st.sampled_from([3, None, b"x", ["a"]])},
        call=lambda **kw: plotting.t(**kw, n=64),
        extremes=[dict(text=""), dict(text="no field")],
    ),
    "plotting.drawn_in": Case(
        plotting.drawn_in, lambda: dict(language="zh_CN"),
        {"language": st.sampled_from(["zh", "de", "", "EN", 3, None, b"en"])},
        call=lambda **kw: _drawn_in(**kw),
        extremes=[dict(language="en"), dict(language="zh_CN")],
    ),
    "plotting.figure_language": Case(plotting.figure_language, lambda: dict(), {}, extremes=[dict()]),
    "plotting.cjk_font_family": Case(plotting.cjk_font_family, lambda: dict(), {}, extremes=[dict()]),
    "plotting.bilingual_figure": Case(
        plotting.bilingual_figure, lambda: dict(draw=_small_figure),
        {"draw": st.sampled_from([None, 3, "plot", lambda: None, lambda: 3, lambda: plt.gca()])},
        examples=6,
        extremes=[dict()],
    ),
    "plotting.BilingualFigure": Case(
        plotting.BilingualFigure, lambda: dict(english=_PNG, chinese=None, text="<Figure>"),
        {"english": st.sampled_from([None, "png", b"", b"GIF89a", bytearray(_PNG)]),
         "chinese": st.sampled_from(["png", b"not a png", 3]), "text": st.sampled_from([None, 3, b"x"])},
        extremes=[dict(chinese=_PNG), dict(text="")],
    ),
    # -------------------------------------------------------------- bilingual
    "bilingual.BilingualText": Case(
        bilingual.BilingualText, lambda: dict(english="PASSED", chinese="通过"),
        {"english": st.sampled_from([None, 3, b"x"]), "chinese": st.sampled_from([None, 3, b"x"])},
        extremes=[dict(english="", chinese="")],
    ),
    "bilingual.verdict": Case(
        bilingual.verdict, lambda: dict(english="PASSED: the table matches.", chinese="通过：表格一致。"),
        {"english": st.sampled_from([None, 3, "", "   "]),
         "chinese": st.sampled_from([None, 3, "", " ", "PASSED", "passe: ok"])},
        extremes=[dict(english="x", chinese="中")],
    ),
    # -------------------------------------------------------------- benchmark
    "benchmark.rotate_half": Case(
        benchmark.rotate_half, lambda: dict(x=randn(2, 4)), {"x": bad_tensor((2, 4), wrong_shapes=((2, 3), ()))},
        mentions={"x": "x"},
        extremes=[dict(x=randn(0, 4))],
    ),
    "benchmark.textbook_rope": Case(
        benchmark.textbook_rope, lambda: dict(x=randn(3, 4), cos_full=torch.ones(3, 4), sin_full=torch.zeros(3, 4)),
        {"x": bad_tensor((3, 4)), "cos_full": bad_tensor((3, 4), wrong_shapes=((3, 5), (2, 3, 4))),
         "sin_full": bad_tensor((3, 4), wrong_shapes=((4, 4),))},
        extremes=[dict(x=randn(0, 4), cos_full=torch.ones(0, 4), sin_full=torch.ones(0, 4))],
    ),
    "benchmark.complex_rope": Case(
        benchmark.complex_rope, lambda: dict(x=randn(3, 4), freqs_cis=torch.ones(3, 2, dtype=torch.complex64)),
        {"x": bad_tensor((3, 4), wrong_shapes=((3, 3),)),
         "freqs_cis": st.sampled_from([torch.ones(3, 2), torch.ones(3, 3, dtype=torch.complex64), None])},
        extremes=[dict(x=randn(0, 4), freqs_cis=torch.ones(0, 2, dtype=torch.complex64))],
    ),
    "benchmark.time_call": Case(
        benchmark.time_call, lambda: dict(fn=lambda: None, repeats=2, warmup=0),
        {"fn": st.sampled_from([None, 3]), "repeats": bad_int(1), "warmup": bad_int(0)},
        extremes=[dict(repeats=1)],
    ),
    "benchmark.BenchmarkRow": Case(
        benchmark.BenchmarkRow, lambda: dict(name="clone", milliseconds=1.0),
        {"name": st.sampled_from([None, 3]), "milliseconds": bad_float(0.0),
         "samples": st.sampled_from([None, [1.0], 1.0, (-1.0,), (math.nan,), ("1",), (1.0, math.inf), (True,)]),
         "cpu_samples": st.sampled_from([None, [1.0], (-1.0,), (math.nan,), ("1",)]),
         "allocated_bytes": bad_int(0), "peak_bytes": bad_int(0)},
        extremes=[dict(milliseconds=1e-9), dict(samples=(0.0, 2.0)), dict(samples=(np.float64(1.0),)),
                  dict(samples=(1.0,), cpu_samples=(0.5,), allocated_bytes=0, peak_bytes=2**40)],
    ),
    "benchmark.BenchmarkRow.quantile": Case(
        benchmark.BenchmarkRow.quantile, lambda: dict(q=0.5),
        {"q": st.one_of(bad_float(None), st.floats(min_value=1.0, exclude_min=True, allow_infinity=False),
                        st.floats(max_value=0.0, exclude_max=True, allow_infinity=False))},
        call=lambda **kw: benchmark.BenchmarkRow("a", 2.0, (1.0, 2.0, 4.0)).quantile(**kw),
        extremes=[dict(q=0.0), dict(q=1), dict(q=np.float64(0.25))],
    ),
    "benchmark.ratio_quantiles": Case(
        benchmark.ratio_quantiles,
        lambda: dict(numerator=_rows(("a", (2.0, 4.0)))[0], denominator=_rows(("b", (1.0, 2.0)))[0]),
        {"numerator": st.sampled_from([None, 2.0, "a", benchmark.BenchmarkRow("a", 1.0), _rows(("a", (1.0,)))[0]]),
         "denominator": st.sampled_from([None, (1.0, 2.0), _rows(("b", (1.0, 2.0, 3.0)))[0]]),
         "qs": st.sampled_from([[1.5], [-0.1], "0.5", 0.5, [math.nan], [True], None, [0.5, "1"]])},
        extremes=[dict(qs=()), dict(qs=[0.0, 1.0]),
                  dict(numerator=_rows(("a", (3.0,)))[0], denominator=_rows(("b", (1.0,)))[0])],
    ),
    "benchmark.benchmark_ratios": Case(
        benchmark.benchmark_ratios,
        lambda: dict(rows=[benchmark.BenchmarkRow(n, 1.0) for n in
                           ("clone", "textbook half", "apply_rope half", "complex interleaved", "apply_rope interleaved")]),
        {"rows": st.sampled_from([None, [1.0], [benchmark.BenchmarkRow("clone", 1.0)],
                                  [benchmark.BenchmarkRow("clone", 1.0)] * 2])},
    ),
    "benchmark.format_report": Case(
        benchmark.format_report,
        lambda: dict(rows=[benchmark.BenchmarkRow(n, 1.0) for n in
                           ("clone", "textbook half", "apply_rope half", "complex interleaved", "apply_rope interleaved")]),
        {"rows": st.sampled_from([None, [benchmark.BenchmarkRow("clone", 1.0)]])},
    ),
    "benchmark.run_rope_benchmark": Case(
        benchmark.run_rope_benchmark, lambda: dict(shape=(1, 1, 4, 4), repeats=1),
        {"shape": st.sampled_from([(1, 1, 4), (1, 1, 4, 3), (1, 0, 4, 4), [1, 1, 4, 4], (1, 1, 4.0, 4)]),
         "repeats": bad_int(1), "seed": bad_int(0), "compiled": BAD_BOOL, "allocations": BAD_BOOL,
         "device": st.sampled_from(["meta", "nonsense", 3]), "dtype": st.sampled_from([torch.int64, "float32", None])},
        extremes=[dict(shape=(1, 1, 1, 2)), dict(shape=(1, 1, 2, 2), allocations=True),
                  dict(shape=(1, 1, 2, 2), dtype=torch.bfloat16)],
        examples=10,
    ),
    "benchmark.run_decode_benchmark": Case(
        benchmark.run_decode_benchmark, lambda: dict(dtype=torch.float32, heads=1, head_dim=4, calls=1, repeats=1),
        {"device": st.sampled_from(["meta", "nonsense", 3]), "dtype": st.sampled_from([torch.int64, "float32", None]),
         "heads": bad_int(1, benchmark.MAX_REPEATS), "head_dim": st.one_of(bad_int(1), st.sampled_from([3, 5])),
         "position": bad_int(0, 2**40), "calls": bad_int(1, benchmark.MAX_REPEATS),
         "repeats": bad_int(1, benchmark.MAX_REPEATS)},
        extremes=[dict(position=2**40), dict(dtype=torch.bfloat16, head_dim=2)],
        examples=10,
    ),
    "rope.clear_caches": Case(cpe.rope.clear_caches, lambda: dict(), {}, extremes=[dict()]),
    "benchmark.count_operations": Case(
        benchmark.count_operations, lambda: dict(fn=lambda: torch.zeros(3)),
        {"fn": st.sampled_from([None, 3, "fn", torch.zeros(2)]), "warmup": BAD_BOOL},
        extremes=[dict(fn=lambda: None), dict(warmup=False)],
    ),
    "benchmark.OperationCount": Case(
        benchmark.OperationCount, lambda: dict(operations=("aten.mul.Tensor",)),
        {"operations": st.sampled_from([None, ["aten.mul.Tensor"], "aten.mul.Tensor", (3,), (None,)])},
        extremes=[dict(operations=())],
    ),
    "benchmark.page_faults": Case(
        benchmark.page_faults, lambda: dict(fn=lambda: torch.zeros(3)),
        {"fn": st.sampled_from([None, 3, "fn", torch.zeros(2)]), "calls": bad_int(1, 1000)},
        extremes=[dict(fn=lambda: None), dict(calls=1)],
    ),
    "benchmark.page_faults_in_fresh_process": Case(
        benchmark.page_faults_in_fresh_process, lambda: dict(setup="x = torch.zeros(3)", calls={"clone": "x.clone()"}),
        {"setup": st.sampled_from([None, 3, b"x = 1", "x = (", ["x = 1"]]),
         "calls": st.sampled_from([None, {}, {"a": 3}, {3: "x"}, {"": "x"}, {"a": "import os"}, {"a": "x ="}, ["x"]]),
         "threads": bad_int(1, 1024), "timeout": st.one_of(bad_float(0.0), st.just(1e9))},
        examples=10,
    ),
    "benchmark.measure_allocation": Case(
        benchmark.measure_allocation, lambda: dict(fn=lambda: torch.zeros(3)),
        {"fn": st.sampled_from([None, 3, "fn", torch.zeros(2)])},
        extremes=[dict(fn=lambda: None)],
    ),
    "benchmark.compiled_rope": Case(
        benchmark.compiled_rope, lambda: dict(layout="half", example=randn(1, 2, 4)),
        {"layout": bad_choice(("half", "interleaved")),
         "example": bad_tensor((1, 2, 4), wrong_shapes=((4,), (1, 2, 3)))},
        mentions={"example": "example"},
        extremes=[dict(layout="interleaved"), dict(example=None)],
        examples=10,
    ),
    # -------------------------------------------------------------- rope_nd
    "rope_nd.multi_axis_rope": Case(
        cpe.multi_axis_rope,
        lambda: dict(x=randn(2, 3, 8), positions=torch.tensor([[0, 0], [0, 1], [1, 0]]), inv_freq=torch.ones(4),
                     axis_of_pair=torch.tensor([0, 0, 1, 1])),
        {
            "x": bad_tensor((2, 3, 8), wrong_shapes=((8,), (2, 3, 7))),
            "positions": bad_tensor((3, 2), "position", nonfinite=True,
                                    wrong_shapes=((4, 2), (3,), (2, 3, 2), (3, 0), (3, 2, 1, 1))),
            "inv_freq": bad_tensor((4,), nonfinite=True, wrong_shapes=((3,), (4, 1))),
            "axis_of_pair": st.one_of(bad_tensor((4,), "integer", wrong_shapes=((3,), (4, 1))),
                                      st.just(torch.tensor([0, 0, 1, 2])), st.just(torch.tensor([-1, 0, 1, 1]))),
            "layout": bad_choice(cpe.ROPE_LAYOUTS),
            "n_axes": bad_int(1),
        },
        extremes=[dict(x=randn(2, 0, 8), positions=torch.zeros(0, 2, dtype=torch.long)),
                  dict(x=randn(1, 8), positions=torch.tensor([[LONG, -LONG]])),
                  dict(positions=torch.zeros(3, 2, dtype=torch.float64), layout="half", n_axes=2),
                  dict(x=randn(2, 1, 3, 8), positions=torch.zeros(2, 3, 2, dtype=torch.long)),
                  dict(positions=torch.zeros(3, 5, dtype=torch.long))],
    ),
    "rope_nd.rope_2d_frequencies": Case(
        cpe.rope_2d_frequencies, lambda: dict(head_dim=8),
        {"head_dim": st.one_of(bad_int(1), st.sampled_from([2, 6, 10])), "base": bad_float(1.0)},
        extremes=[dict(head_dim=4), dict(head_dim=4096), dict(base=1e12)],
    ),
    "rope_nd.rope_2d": Case(
        cpe.rope_2d, lambda: dict(x=randn(2, 3, 8), positions=torch.tensor([[0, 0], [0, 1], [1, 0]])),
        {"x": bad_tensor((2, 3, 8), wrong_shapes=((8,), (2, 3, 6), (2, 3, 0))),
         "positions": bad_tensor((3, 2), "position", nonfinite=True, wrong_shapes=((3, 3), (3,), (4, 2))),
         "base": bad_float(1.0), "layout": bad_choice(cpe.ROPE_LAYOUTS)},
        extremes=[dict(x=randn(2, 0, 8), positions=torch.zeros(0, 2, dtype=torch.long)),
                  dict(x=randn(1, 4), positions=torch.tensor([[LONG, 2**40]])),
                  dict(x=randn(1, 2, 3, 4), positions=torch.zeros(1, 3, 2), layout="half")],
    ),
    "rope_nd.mrope": Case(
        cpe.mrope, lambda: dict(x=randn(2, 3, 8), positions=torch.zeros(3, 3, dtype=torch.long), sections=(2, 1, 1)),
        {"x": bad_tensor((2, 3, 8), wrong_shapes=((8,), (2, 3, 7), (2, 3, 0))),
         "positions": bad_tensor((3, 3), "position", nonfinite=True, wrong_shapes=((3, 2), (3,), (4, 3))),
         "sections": st.sampled_from([(2, 1), (2, 1, 2), "211", 4, (2, 1.0, 1), (4, 0), (True, 1, 2), None]),
         "base": bad_float(1.0), "layout": bad_choice(cpe.ROPE_LAYOUTS)},
        extremes=[dict(sections=(4,), positions=torch.zeros(3, 1, dtype=torch.long)),
                  dict(x=randn(2, 0, 8), positions=torch.zeros(0, 3, dtype=torch.long)),
                  dict(x=randn(1, 2, 128), positions=torch.full((2, 3), LONG), sections=cpe.QWEN2_VL_MROPE_SECTION),
                  dict(sections=[1, 1, 2], layout="interleaved")],
    ),
    "rope_nd.mrope_position_ids": Case(
        cpe.mrope_position_ids, lambda: dict(text_before=2, grid=(1, 2, 2), text_after=3),
        {"text_before": bad_int(0), "text_after": bad_int(0),
         "grid": st.sampled_from([(1, 2), [1, 2, 2], (1, 0, 2), (1, 2.0, 2), (True, 1, 1), "122", None])},
        extremes=[dict(text_before=0, text_after=0, grid=(1, 1, 1)), dict(grid=(3, 1, 5))],
    ),
    "rope_nd.xpos_scale": Case(
        cpe.xpos_scale, lambda: dict(positions=torch.arange(4), head_dim=8),
        {"positions": bad_tensor((4,), "position", nonfinite=True), "head_dim": st.one_of(bad_int(1), st.just(7)),
         "gamma": bad_float(0.0), "scale_base": bad_float(0.0)},
        extremes=[dict(positions=torch.arange(0)), dict(head_dim=2), dict(positions=torch.tensor([LONG, -LONG])),
                  dict(positions=torch.zeros(2, 3, dtype=torch.float64))],
    ),
    "rope_nd.apply_xpos": Case(
        cpe.apply_xpos, lambda: dict(x=randn(2, 3, 8), positions=torch.arange(3), role="query"),
        {"x": bad_tensor((2, 3, 8), wrong_shapes=((8,), (2, 3, 7), (2, 3, 0))),
         "positions": bad_tensor((3,), "position", nonfinite=True, wrong_shapes=((4,), (3, 1))),
         "role": bad_choice(("query", "key")), "base": bad_float(0.0), "gamma": bad_float(0.0),
         "scale_base": bad_float(0.0), "layout": bad_choice(cpe.ROPE_LAYOUTS)},
        extremes=[dict(role="key"), dict(x=randn(2, 0, 8), positions=torch.arange(0)),
                  dict(positions=torch.tensor([-1.5, 0.0, 2.5], dtype=torch.float64), layout="half"),
                  dict(x=randn(1, 2), positions=torch.tensor([LONG]))],
    ),
    "rope_nd.decoupled_rope_logits": Case(
        cpe.decoupled_rope_logits,
        lambda: dict(q_nope=randn(1, 2, 3, 4), q_rope=randn(1, 2, 3, 2), k_nope=randn(1, 2, 3, 4),
                     k_rope=randn(1, 1, 3, 2)),
        {"q_nope": bad_tensor((1, 2, 3, 4), wrong_shapes=((2, 3, 4), (1, 2, 4, 4))),
         "q_rope": bad_tensor((1, 2, 3, 2), wrong_shapes=((1, 2, 3), (1, 3, 3, 2), (1, 2, 4, 2))),
         "k_nope": bad_tensor((1, 2, 3, 4), wrong_shapes=((1, 2, 3, 5), (2, 3, 4))),
         "k_rope": bad_tensor((1, 1, 3, 2), wrong_shapes=((1, 2, 3, 2), (1, 1, 3, 4), (1, 3, 2))),
         "positions": bad_tensor((3,), "position", nonfinite=True, wrong_shapes=((4,),)),
         "base": bad_float(0.0), "layout": bad_choice(cpe.ROPE_LAYOUTS)},
        extremes=[dict(q_nope=randn(1, 2, 0, 4), q_rope=randn(1, 2, 0, 2), k_nope=randn(1, 2, 0, 4),
                       k_rope=randn(1, 1, 0, 2)),
                  dict(positions=torch.tensor([LONG, LONG + 1, LONG + 2]), layout="half"),
                  dict(q_nope=randn(1, 2, 3, 0), k_nope=randn(1, 2, 3, 0))],
    ),
    # -------------------------------------------------------------- positions
    "positions.position_ids_from_attention_mask": Case(
        cpe.position_ids_from_attention_mask, lambda: dict(attention_mask=torch.tensor([[0, 1, 1], [1, 1, 1]])),
        {"attention_mask": st.one_of(bad_tensor((2, 3), "integer").filter(lambda t: not isinstance(t, torch.Tensor)
                                                                          or t.dtype != torch.bool),
                                     st.sampled_from([torch.tensor(1), torch.tensor([[0, 2, 1]]),
                                                      torch.tensor([-1, 1])])),
         "pad_value": bad_int(0, 2**53)},
        extremes=[dict(attention_mask=torch.zeros(2, 0, dtype=torch.bool)), dict(pad_value=2**53),
                  dict(attention_mask=torch.tensor([False, True])), dict(attention_mask=torch.zeros(1, 3, 4, dtype=torch.uint8))],
    ),
    "positions.packed_position_ids": Case(
        cpe.packed_position_ids, lambda: dict(lengths=[3, 2]),
        {"lengths": st.sampled_from([None, "32", 3, [3, -1], [2.0], [True], torch.tensor([[3, 2]]),
                                     torch.tensor([3.0]), torch.tensor([3, -2])]),
         "start": bad_int(0, 2**53)},
        extremes=[dict(lengths=[]), dict(lengths=[0, 0]), dict(lengths=torch.tensor([1], dtype=torch.uint8)),
                  dict(start=2**53, lengths=[1])],
    ),
    "positions.packed_position_ids_from_boundaries": Case(
        cpe.packed_position_ids_from_boundaries, lambda: dict(boundaries=[0, 3, 5]),
        {"boundaries": st.sampled_from([None, "035", 0, [], [1, 3], [0, 3, 2], [0, 1.5], torch.tensor([[0, 1]]),
                                        torch.tensor([0.0, 1.0])]),
         "start": bad_int(0, 2**53)},
        extremes=[dict(boundaries=[0]), dict(boundaries=torch.tensor([0, 0, 4]))],
    ),
    "positions.packed_attention_mask": Case(
        cpe.packed_attention_mask, lambda: dict(lengths=[2, 1]),
        {"lengths": st.sampled_from([None, "21", [2, -1], [1.5], torch.tensor([2.0])]), "causal": BAD_BOOL},
        extremes=[dict(lengths=[]), dict(lengths=[0, 3], causal=False)],
    ),
    "positions.document_ids_from_position_ids": Case(
        cpe.document_ids_from_position_ids, lambda: dict(position_ids=torch.tensor([0, 1, 0])),
        {"position_ids": bad_tensor((3,), "integer", wrong_shapes=((),))},
        extremes=[dict(position_ids=torch.zeros(0, dtype=torch.long)), dict(position_ids=torch.zeros(2, 0, dtype=torch.long)),
                  dict(position_ids=torch.tensor([[-(2**63), 2**63 - 1]]))],
    ),
    "positions.make_positions": Case(
        cpe.make_positions, lambda: dict(tokens=torch.tensor([[1, 4, 5]]), padding_idx=1),
        {"tokens": bad_tensor((1, 3), "integer", wrong_shapes=((3,), (1, 1, 3))), "padding_idx": bad_int(0, 2**53),
         "past_length": st.one_of(bad_int(0, 2**53), st.just(2**53 - 2))},
        extremes=[dict(tokens=torch.zeros(2, 0, dtype=torch.long)), dict(past_length=5),
                  dict(tokens=torch.tensor([[1, 1]], dtype=torch.uint8), padding_idx=0)],
    ),
    # -------------------------------------------------------------- training with several seeds
    "training.seed_streams": Case(
        cpe.seed_streams, lambda: dict(seed=3), {"seed": bad_int(0, 2**63 - 1 - training.DATA_SEED_OFFSET)},
        extremes=[dict(seed=0), dict(seed=2**63 - 1 - training.DATA_SEED_OFFSET), dict(seed=np.int64(5))],
    ),
    "training.init_seeds": Case(
        cpe.init_seeds, lambda: dict(make_model=lambda: torch.nn.Linear(2, 2), seeds=[0, 1]),
        {"make_model": st.sampled_from([None, 3, "m", lambda: 3, lambda: [torch.nn.Linear(2, 2)]]),
         "seeds": st.sampled_from([[], [0, 0], "01", 0, [-1], [1.5], [True], None, [2**63]])},
        extremes=[dict(seeds=[0]), dict(seeds=(2**63 - 1 - training.DATA_SEED_OFFSET,)), dict(seeds=[np.int64(4), 2])],
    ),
    "training.SeedsResult": Case(
        cpe.SeedsResult, lambda: dict(data_seeds=[1, 2], losses=torch.zeros(3, 2, dtype=torch.float64)),
        {"data_seeds": st.sampled_from([None, (1, 2), [1], [1, -2], [1, "2"], [1, 2.0], [True, 2]]),
         "losses": bad_tensor((3, 2), wrong_shapes=((3,), (3, 3), (1, 3, 2)))},
        extremes=[dict(losses=torch.zeros(0, 2, dtype=torch.float64)), dict(data_seeds=[], losses=torch.zeros(3, 0))],
    ),
    "training.SeedsResult.result": Case(
        cpe.SeedsResult.result, lambda: dict(index=0), {"index": bad_int(-2, 1)},
        call=lambda **kw: cpe.SeedsResult([1, 2], torch.zeros(3, 2, dtype=torch.float64)).result(**kw),
        extremes=[dict(index=1), dict(index=-2), dict(index=np.int64(1))],
    ),
    "training.train_seeds": Case(
        cpe.train_seeds,
        lambda: dict(models=_two_models(), task=cpe.ReverseTask(7), config=cpe.TrainConfig(**_TRAIN_CFG),
                     data_seeds=[5, 6], progress=False),
        {"models": st.sampled_from([None, [], [3], _tiny_model(), "m", [_tiny_model(), _tiny_model("rope")]]),
         "task": st.sampled_from([None, 3, "task"]),
         "config": st.sampled_from([None, dict(steps=2), "cfg"]),
         "data_seeds": st.sampled_from([[1], "ab", [1, -1], [1, 1.5], 3, [1, None]]),
         "progress": BAD_BOOL, "description": st.sampled_from([3, b"x", ["d"]])},
        extremes=[dict(data_seeds=None),
                  dict(config=cpe.TrainConfig(steps=1, batch_size=1, seq_len=1, warmup=0, grad_clip=None)),
                  dict(models=_two_models()[:1], data_seeds=[0])],
        examples=10,
    ),
    "training.evaluate_seeds": Case(
        cpe.evaluate_seeds, lambda: dict(models=_two_models(), task=cpe.ReverseTask(7), seq_len=3, batch_size=2,
                                         num_batches=1),
        {"models": st.sampled_from([None, [], [3], _tiny_model(), "m"]), "task": st.sampled_from([None, 3]),
         "seq_len": bad_int(1), "batch_size": bad_int(1), "num_batches": bad_int(1), "seed": bad_int(0)},
        extremes=[dict(seq_len=1, batch_size=1), dict(models=_two_models()[:1])],
        examples=10,
    ),
    # -------------------------------------------------------------- seeds_benchmark
    "seeds_benchmark.SeedsTiming": Case(
        seeds_benchmark.SeedsTiming,
        lambda: dict(seeds=2, separate_wall=[1.0], batched_wall=[0.5], separate_cpu=[1.0], batched_cpu=[0.5]),
        {"seeds": bad_int(1), "separate_wall": BAD_SECONDS, "batched_wall": BAD_SECONDS, "separate_cpu": BAD_SECONDS,
         "batched_cpu": BAD_SECONDS},
        extremes=[dict(seeds=1, separate_cpu=[0.0], batched_cpu=[0.0]),
                  dict(separate_wall=[1, 2], batched_wall=[1, 2], separate_cpu=[1, 2], batched_cpu=[1, 2])],
    ),
    "seeds_benchmark.run_seeds_benchmark": Case(
        seeds_benchmark.run_seeds_benchmark,
        lambda: dict(seeds=1, steps=1, repeats=1, position="none", d_model=8, seq_len=2, batch_size=1),
        {"seeds": bad_int(1), "steps": bad_int(1), "repeats": bad_int(1), "position": bad_choice(cpe.MODEL_POSITIONS),
         "d_model": bad_int(1), "seq_len": bad_int(1), "batch_size": bad_int(1)},
        extremes=[dict(seeds=2, position="rope")],
        examples=15,
    ),
    # -------------------------------------------------------------- gradebook
    "gradebook.Gradebook": Case(
        Gradebook, lambda: dict(folder=_GRADEBOOK_DIR.name),
        {"folder": st.sampled_from([None, 3, b"grades", ["g"], ""])},
        extremes=[dict(folder=tempfile.gettempdir() + "/course_pe_never_created/deeper")],
    ),
    "gradebook.Gradebook.record": Case(
        Gradebook.record, lambda: dict(report=GradeReport(student="ada", notebook="nb.ipynb", assignment="rope")),
        {"report": st.sampled_from([None, "ada", {"student": "ada"}, GradeReport(student="../x", notebook="n"),
                                    GradeReport(student="ada", notebook="n", assignment="../up"),
                                    GradeReport(student="", notebook="n")])},
        call=lambda **kw: Gradebook(_GRADEBOOK_DIR.name).record(**kw),
        extremes=[dict(report=GradeReport(student="b", notebook="", assignment="")),
                  dict(report=GradeReport(student="x" * 128, notebook="nb.ipynb", assignment="a.b-c_d"))],
    ),
    "gradebook.Gradebook.graded": Case(
        Gradebook.graded, lambda: dict(assignment="relative"),
        {"assignment": st.sampled_from([None, 3, b"relative", ["relative"]])},
        call=lambda **kw: Gradebook(_GRADEBOOK_DIR.name).graded(**kw),
        extremes=[dict(assignment=""), dict(assignment="no such assignment")],
    ),
    "gradebook.Gradebook.check": Case(
        Gradebook.check, lambda: dict(create=True),
        {"create": st.sampled_from([None, 1, "yes", [True]])},
        call=lambda **kw: Gradebook(_GRADEBOOK_DIR.name).check(**kw),
        extremes=[dict(create=False)],
    ),
    "gradebook.Gradebook.same_student": Case(
        Gradebook.same_student, lambda: dict(assignment="relative", student="ada"),
        {"assignment": st.sampled_from([None, 3, b"relative", ["relative"]]),
         "student": st.sampled_from([None, 3, b"ada", ["ada"]])},
        call=lambda **kw: Gradebook(_GRADEBOOK_DIR.name).same_student(**kw),
        extremes=[dict(student=""), dict(student="ADA"), dict(assignment="no such assignment")],
    ),
    # -------------------------------------------------------------- sandbox (constructors only, and one shared child)
    "sandbox.SandboxLimits": Case(
        SandboxLimits, lambda: dict(),
        {**{name: bad_int(1) for name in ("memory_bytes", "cpu_seconds", "file_bytes", "processes", "open_files",
                                          "tmp_bytes", "answer_bytes")},
         "startup_seconds": bad_float(0.0)},
        extremes=[dict(memory_bytes=1, cpu_seconds=1, processes=1, open_files=1), dict(startup_seconds=1e-3),
                  dict(answer_bytes=2**62)],
    ),
    "sandbox.Sandbox": Case(
        Sandbox, lambda: dict(isolation="limited"),
        {"limits": st.sampled_from([{}, 3, "x", SandboxLimits]),
         "unavailable": st.sampled_from(["course_pe.alibi.alibi_slopes", [3], [""], None, b"x"]),
         "hide": BAD_PATHS, "deadline": bad_float(),
         "isolation": st.one_of(st.text(max_size=6).filter(lambda s: s not in ("full", "limited")), st.integers(),
                                st.just(["limited"]))},
        extremes=[dict(hide=[]), dict(hide=["/nonexistent"], unavailable=("course_pe.alibi.alibi_slopes",)),
                  dict(limits=SandboxLimits(memory_bytes=2**30), deadline=0.0)],
    ),
    "sandbox.Sandbox.run_cell": Case(
        Sandbox.run_cell, lambda: dict(source="y = 1", timeout=600),
        {"source": st.sampled_from([None, 3, b"y = 1", ["y = 1"]]), "timeout": bad_float(0.0, strict=False)},
        call=lambda **kw: _sandbox().run_cell(**kw),
        extremes=[dict(source=""), dict(source="raise ValueError('no')"), dict(timeout=LONG)],
        examples=15,
    ),
    "sandbox.Sandbox.select": Case(
        Sandbox.select, lambda: dict(sources=["x = 1", "def f():\n    return x"], functions=["f"], limit=40, timeout=600),
        {"sources": st.sampled_from([None, "x = 1", [3], (["x"],), b"x"]),
         "functions": st.sampled_from([None, "f", [3], [b"f"]]),
         "limit": bad_int(1), "timeout": bad_float(0.0, strict=False)},
        call=lambda **kw: _sandbox().select(**kw),
        extremes=[dict(sources=[]), dict(functions=[]), dict(limit=1), dict(sources=["%%time\n)"] * 3)],
        examples=15,
    ),
    "sandbox.Sandbox.call": Case(
        Sandbox.call, lambda: dict(function="double", args=(torch.ones(2),), timeout=600),
        {"function": st.sampled_from([3, None, "not a name", "", b"double"]),
         "args": st.sampled_from([None, [1.0], (object(),), ("x",), 1.0, (None,)]),
         "timeout": bad_float(0.0, strict=False)},
        call=lambda **kw: _sandbox().call(**kw),
        extremes=[dict(args=(np.ones(3),)), dict(args=(2.0,)), dict(function="no_such_function"), dict(args=())],
        examples=15,
    ),
    "sandbox.Containment": Case(
        sandbox.Containment, lambda: dict(level="limited"),
        {"level": st.sampled_from([None, 3, "", "half", ["full"]]),
         "kill_group": st.sampled_from([3, b"/sys", ["/sys"]]), "memory_group": st.sampled_from([3, b"/", [""]]),
         "pids_group": st.sampled_from([3, b"/", [""]]), "memory_version": st.sampled_from([3, -1, "1", 1.5]),
         "pids_version": st.sampled_from([3, -1, "2", None]), "notes": st.sampled_from(["note", [3], None])},
        extremes=[dict(level="full", kill_group="/sys/fs/cgroup/x", memory_group="/m", memory_version=2,
                       pids_group="/p", pids_version=1, notes=("n",))],
    ),
    "sandbox.isolation_level": Case(sandbox.isolation_level, lambda: dict(), {}),
    "sandbox.allow_new": Case(sandbox.allow_new, lambda: dict(), {}),
    "sandbox.kill_all": Case(sandbox.kill_all, lambda: dict(), {"refuse_new": BAD_BOOL},
                             extremes=[dict(refuse_new=False)]),
    "sandbox.prepare": Case(
        sandbox.prepare, lambda: dict(level="limited"),
        {"level": st.sampled_from([None, 3, "", "half", ["limited"]]), "timeout": bad_float(0.0)},
        extremes=[dict(level="limited", timeout=LONG)],
    ),
}


# ----------------------------------------------------------------------------- long_context_eval (library)


def _passkey_model() -> cpe.TinyTransformer:
    torch.manual_seed(0)
    return cpe.TinyTransformer(PasskeyTask(4, 3).vocab_size, d_model=8, num_heads=2, num_layers=1, position="rope",
                               causal=True, max_positions=16)


REGISTRY.update({
    "long_context_eval.PasskeyTask": Case(
        PasskeyTask, lambda: dict(num_filler=4, num_values=3),
        {"num_filler": bad_int(1, 2**61), "num_values": bad_int(2, 2**61), "distance": bad_int(1, 2**16 - 3),
         "distractors": BAD_BOOL, "causal": st.sampled_from([False, 1, "yes", None])},
        extremes=[dict(num_filler=1, num_values=2), dict(num_filler=2**61, num_values=2**61),
                  dict(distance=2**16 - 3, distractors=True), dict(num_filler=np.int64(4))],
    ),
    "long_context_eval.PasskeyTask.at_distance": Case(
        PasskeyTask.at_distance, lambda: dict(distance=3), {"distance": bad_int(1, 2**16 - 3)},
        call=lambda **kw: PasskeyTask(4, 3).at_distance(**kw), extremes=[dict(distance=1), dict(distance=2**16 - 3)],
    ),
    "long_context_eval.PasskeyTask.sample": Case(
        PasskeyTask.sample, lambda: dict(batch_size=2, seq_len=8),
        {"batch_size": bad_int(1), "seq_len": bad_int(4, 2**16), "generator": st.sampled_from([3, "g", torch.tensor(1)])},
        call=lambda **kw: PasskeyTask(4, 3).sample(**kw),
        extremes=[dict(batch_size=1, seq_len=4), dict(batch_size=1, seq_len=2**16),
                  dict(generator=torch.Generator().manual_seed(0))],
    ),
    "long_context_eval.passkey_accuracy_by_distance": Case(
        passkey_accuracy_by_distance,
        lambda: dict(models=_passkey_model(), task=PasskeyTask(4, 3), seq_len=8, distances=[1, 5], num_sequences=2),
        {"models": st.sampled_from([None, "model", [], [None], (_passkey_model(), 3)]),
         "task": st.sampled_from([None, 3, PasskeyTask, cpe.CopyTask(4)]), "seq_len": bad_int(4, 2**16),
         "distances": st.sampled_from([[], [0], [1, 1], [6], "15", 3, [1.5], {1, 2}]),
         "num_sequences": bad_int(1), "seed": bad_int(0, 2**63 - 1), "chunk": bad_int(1)},
        mentions={"models": "models", "distances": "distances"},
        extremes=[dict(distances=[1]), dict(distances=range(1, 6)), dict(num_sequences=1, chunk=1),
                  dict(models=[_passkey_model(), _passkey_model()])],
        examples=15,
    ),
    "long_context_eval.sliding_window_report": Case(
        sliding_window_report,
        lambda: dict(model=_passkey_model(), task=PasskeyTask(4, 3), seq_len=8, window=4, batch_size=2, num_batches=1),
        {"model": st.sampled_from([None, "model", _tiny_model()]), "task": st.sampled_from([None, 3, PasskeyTask]),
         "seq_len": bad_int(1), "window": bad_int(1), "sink": st.one_of(bad_int(0), st.integers(4, 10**6)),
         "batch_size": st.one_of(bad_int(1), st.just(2**24)), "num_batches": bad_int(1, 2**20),
         "seed": bad_int(0, 2**63 - 1)},
        mentions={"model": "model"},
        extremes=[dict(window=8, sink=3), dict(window=1), dict(seq_len=4, window=100), dict(window=4, sink=2)],
        examples=10,
    ),
    "long_context_eval.window_forward_bytes": Case(
        window_forward_bytes, lambda: dict(model=_passkey_model(), length=4),
        {"model": st.sampled_from([None, "m", 3]), "length": bad_int(1), "batch": bad_int(1)},
        extremes=[dict(length=1, batch=1), dict(length=10**6, batch=10**6)],
    ),
})


# -------------------------------------------------------------------------- coursework tools: shared values

def _solution_notebook() -> nbformat.NotebookNode:
    """A chapter in the book's form: a coding exercise with a tagged solution cell, and a written one."""
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    return nbformat.v4.new_notebook(cells=[
        md("# ALiBi"),
        md("```{exercise}\n:label: ex-slopes\nWrite `alibi_slopes(num_heads)`.\n```"),
        md("```{solution-start} ex-slopes\n:class: dropdown\n```"),
        code("def alibi_slopes(num_heads):\n    return [2.0 ** (-8.0 * (h + 1) / num_heads) for h in range(num_heads)]\n",
             metadata={"tags": ["solution"]}),
        md("```{solution-end}\n```"),
        md("```{exercise}\n:label: ex-why\nWhy geometric slopes?\n```"),
        md("```{solution} ex-why\n:class: dropdown\nSo that heads see different ranges.\n```"),
    ])


def _notebook_file(folder: str, name: str, nb: nbformat.NotebookNode | None = None) -> str:
    path = f"{folder}/{name}"
    nbformat.write(nb if nb is not None else _solution_notebook(), path)
    return path


_COURSE_DIR = tempfile.TemporaryDirectory(prefix="course_pe_bad_input_course_")


def _fake_wheel() -> str:
    """A file with a wheel's name (build_autograder only copies it)."""
    path = f"{_COURSE_DIR.name}/course_pe-0.1.0-py3-none-any.whl"
    with open(path, "wb") as fh:
        fh.write(b"PK")
    return path


def _roster_file(text: str) -> str:
    fd, path = tempfile.mkstemp(suffix=".csv", dir=_COURSE_DIR.name)
    with open(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path
NOT_A_NOTEBOOK = st.sampled_from([
    None, "nb", {"cells": []}, [nbformat.v4.new_code_cell("x = 1")], nbformat.from_dict({"cells": "x = 1"}),
    nbformat.from_dict({"cells": [{"cell_type": "code"}]}), nbformat.from_dict({"nbformat": 4}),
])
SYNTAX_ERROR_NOTEBOOK = nbformat.v4.new_notebook(
    cells=[nbformat.v4.new_code_cell("def f(:\n    pass", metadata={"tags": ["solution"]})])
BAD_PATH = st.sampled_from([None, 3, b"x.ipynb", ["x.ipynb"], ""])
BAD_ARGV = st.sampled_from(["x.ipynb", 3, b"x", [3], ["a", b"b"], ("--out", None), {"a": 1}])
BAD_TEXT = st.sampled_from([None, 3, b"x", ["x"], 1.5])
NOT_CALLABLE = st.sampled_from([None, 3, "alibi_slopes", torch.ones(2), [lambda n: n]])
_ALIBI_CASES = exercises.EXERCISES["alibi_slopes"].cases(None)

REGISTRY.update({
    # -------------------------------------------------------------- exercises
    "exercises.Case": Case(
        exercises.Case, lambda: dict(name="c", args=(1,), expected=np.zeros(2)),
        {"name": BAD_TEXT, "args": st.sampled_from([[1], 1, None, "ab"]),
         "expected": st.sampled_from([[0.0], 0.0, torch.zeros(2), np.array(["a"]), None]),
         "atol": bad_float(0.0, strict=False), "exact": BAD_BOOL,
         "dtypes": st.sampled_from([["float32"], "float32", (np.float32,), 3]),
         "mistakes": st.sampled_from([[("m", np.zeros(2))], (("m",),), ((3, np.zeros(2)),), "m"]),
         "hint": st.sampled_from([3, b"h", ["h"]]), "hidden": BAD_BOOL,
         "lower": st.sampled_from([[0, 0], np.zeros(2), np.zeros(3, dtype=np.int64), np.array(["a", "b"])]),
         "upper": st.sampled_from([[0, 0], np.zeros(2), np.zeros(3, dtype=np.int64), np.array(["a", "b"])]),
         "axes": st.sampled_from([[("i {i}", None)], ("i",), ((3, None),), (("i", [1, 2]),)])},
        extremes=[dict(args=(), expected=np.zeros((0, 3))), dict(expected=np.array(7, dtype=np.int64), exact=True,
                                                                  dtypes=None),
                  dict(expected=np.zeros(2, dtype=np.int64), exact=True, lower=np.zeros(2, dtype=np.int64),
                       upper=np.ones(2, dtype=np.int64), axes=(("offset {v} (entry {i})", (-1, 1)),))],
    ),
    "exercises.CheckReport": Case(
        exercises.CheckReport, lambda: dict(exercise="e", passed=False, cases_run=0, cases_total=1),
        {"exercise": BAD_TEXT, "passed": BAD_BOOL, "cases_run": st.one_of(bad_int(0), st.integers(2, 10**6)),
         "cases_total": bad_int(0), **{n: st.sampled_from([3, b"x", ["x"]]) for n in
                                       ("failed_case", "expected", "got", "mistake", "hint", "error", "difference")},
         "hidden": BAD_BOOL, "library_called": st.sampled_from(["course_pe.f", [3], ("course_pe.f",), None])},
        extremes=[dict(cases_run=0, cases_total=0, passed=True), dict(cases_run=10**9, cases_total=10**9)],
    ),
    "exercises.Exercise": Case(
        exercises.Exercise,
        lambda: dict(id="x", function="f", chapter="c", check=lambda fn: None, description="d"),
        {"id": st.sampled_from([None, 3, ""]), "function": st.sampled_from([None, "not a name", "", "f()"]),
         "chapter": BAD_TEXT, "check": NOT_CALLABLE, "description": BAD_TEXT,
         "cases": NOT_CALLABLE.filter(lambda v: v is not None),
         "library": st.sampled_from([["a.b"], "a.b", ("",), (3,)])},
        extremes=[dict(cases=lambda rng: [], library=("course_pe.alibi.alibi_slopes",)), dict(function="_f1")],
    ),
    "exercises.Outcome": Case(
        exercises.Outcome, lambda: dict(status="ok", value=np.zeros(3)),
        {"status": bad_choice(exercises.OUTCOME_STATUSES), "value": st.sampled_from([[1.0], 1.0, torch.ones(2), "x"]),
         "error": st.sampled_from([3, b"e", ["e"]]),
         "library_called": st.sampled_from([["course_pe.f"], "course_pe.f", (3,), None])},
        extremes=[dict(status="stub", value=None), dict(status="ok", value=np.zeros((0,))),
                  dict(status="timeout", value=None, error="x" * 10**5)],
    ),
    "exercises.call_case": Case(
        exercises.call_case, lambda: dict(fn=lambda n: [1.0] * n, args=(2,)),
        {"fn": NOT_CALLABLE, "args": st.sampled_from([[2], 2, None, "2"])},
        extremes=[dict(fn=lambda: 1.0, args=()), dict(fn=lambda n: 1 / 0), dict(fn=lambda n: object()),
                  dict(fn=lambda n: torch.zeros(0, n))],
    ),
    "exercises.chapters": Case(exercises.chapters, lambda: dict(), {}),
    "exercises.library_sentence": Case(
        exercises.library_sentence, lambda: dict(names=["course_pe.alibi.alibi_slopes"]),
        {"names": st.sampled_from(["course_pe.alibi.alibi_slopes", None, [3], [""], {"a": 1}])},
        extremes=[dict(names=()), dict(names=("a", "b"))]),
    "exercises.tolerance_text": Case(exercises.tolerance_text, lambda: dict(tolerance=1e-4),
                                     {"tolerance": bad_float(0.0)}, extremes=[dict(tolerance=5e-3), dict(tolerance=2.0)]),
    "environment.missing_modules": Case(environment.missing_modules, lambda: dict(error="No module named 'x'"),
                                        {"error": st.sampled_from([3, b"x", ["x"]])},
                                        extremes=[dict(error=None), dict(error="")]),
    "environment.unavailable_sentence": Case(
        environment.unavailable_sentence, lambda: dict(modules=["transformers"]),
        {"modules": st.sampled_from(["transformers", None, [3], [""]])}, extremes=[dict(modules=())]),
    "environment.site_folders": Case(environment.site_folders, lambda: dict(), {}),
    "environment.other_site_folders": Case(environment.other_site_folders, lambda: dict(), {}),
    "exercises.check": Case(
        exercises.check, lambda: dict(exercise_id="alibi_slopes", fn=lambda n: [1.0] * n),
        {"exercise_id": st.sampled_from([None, 3, "nope", "", ["alibi_slopes"]]), "hidden": BAD_BOOL,
         "seed": bad_int(0)},
        reported={"fn": NOT_CALLABLE},
        extremes=[dict(fn=None), dict(fn=lambda *a: 1 / 0), dict(fn=lambda *a, **k: None), dict(hidden=True),
                  dict(hidden=True, seed=2**62)],
    ),
    **{f"exercises.check_{exercise_id}": Case(
        getattr(exercises, f"check_{exercise_id}"), lambda: dict(fn=lambda *args: 0.0), {},
        reported={"fn": NOT_CALLABLE.filter(lambda v: v is not None)},
        extremes=[dict(fn=lambda *args: torch.zeros(0)), dict(fn=lambda *args: [[1.0], [1.0, 2.0]])],
    ) for exercise_id in exercises.EXERCISES},
    "exercises.exercises_for_chapter": Case(
        exercises.exercises_for_chapter, lambda: dict(chapter="relative"),
        {"chapter": st.sampled_from([None, 3, "", "nope", ["relative"], b"relative"])},
        extremes=[dict(chapter=c) for c in exercises.chapters()],
    ),
    "exercises.judge": Case(
        exercises.judge,
        lambda: dict(exercise="alibi_slopes", cases=_ALIBI_CASES, outcomes=[None] * len(_ALIBI_CASES)),
        {"exercise": BAD_TEXT, "cases": st.sampled_from(["ab", [1], None, [_ALIBI_CASES[0].expected]]),
         "outcomes": st.sampled_from([[], [None], [3] * len(_ALIBI_CASES), "x" * len(_ALIBI_CASES), None])},
        extremes=[dict(cases=[], outcomes=[]),
                  dict(outcomes=[exercises.Outcome("ok", c.expected) for c in _ALIBI_CASES]),
                  dict(outcomes=[exercises.Outcome("ok", np.zeros(10**5))] * len(_ALIBI_CASES))],
    ),
    "exercises.to_output": Case(
        exercises.to_output, lambda: dict(value=[1.0, 2.0]),
        {"value": st.sampled_from([None, object(), "0.5", {"a": 1}, [[1.0], [1.0, 2.0]],
                                   torch.zeros(2, dtype=torch.bfloat16), torch.zeros(2, dtype=torch.complex64),
                                   [object()], np.array(["a"])])},
        mentions={"value": "answer"},
        extremes=[dict(value=[]), dict(value=np.float64(2.5)), dict(value=torch.empty(0, 3)), dict(value=True),
                  dict(value=[torch.tensor(1.0), 2.0]), dict(value=torch.zeros(2, 3, requires_grad=True))],
    ),
    # -------------------------------------------------------------- grade
    "grade.ExerciseGrade": Case(
        ExerciseGrade, lambda: dict(exercise="e", score=0.5, max_score=1.0, status="failed", message=""),
        {"exercise": BAD_TEXT, "score": st.one_of(bad_float(0.0, strict=False), st.floats(1.001, 1e9)),
         "max_score": bad_float(0.0, strict=False), "status": bad_choice(grade.GRADE_STATUSES), "message": BAD_TEXT,
         "function": BAD_TEXT, "visible_cases": bad_int(0), "hidden_cases": bad_int(0), "failed_hidden": BAD_BOOL},
        extremes=[dict(score=0, max_score=0), dict(score=1e9, max_score=1e9, status="passed"),
                  dict(status="unreadable", message="x" * 10**5, function="f", visible_cases=10**6, hidden_cases=0,
                       failed_hidden=True)],
    ),
    "grade.GradeReport": Case(
        GradeReport, lambda: dict(student="ada", notebook="ada.ipynb"),
        {"student": BAD_TEXT, "notebook": BAD_TEXT, "assignment": BAD_TEXT, "isolation": BAD_TEXT,
         "exercises": st.sampled_from(["e", [1], None, [{"exercise": "e"}]]),
         "cell_errors": st.sampled_from(["e", [3], None]), "problems": st.sampled_from(["p", [None], 3]),
         "seed": bad_int(0), "seconds": bad_float(0.0, strict=False),
         "cells_run": st.sampled_from([None, 3, [1.5], [True], (1,)])},
        extremes=[dict(student="", notebook=""), dict(seed=2**63, seconds=1e9),
                  dict(exercises=[ExerciseGrade("e", 1.0, 1.0, "passed", "")], cell_errors=["x"], problems=["y"],
                       cells_run=[0, 10**6])],
    ),
    "grade.FolderResult": Case(
        grade.FolderResult, lambda: dict(reports=[], intake=[]),
        {"reports": st.sampled_from([None, "r", [3]]), "intake": st.sampled_from([None, "i", [3]]),
         "interrupted": BAD_BOOL, "seconds": bad_float(0.0, strict=False)},
        extremes=[dict(interrupted=True, seconds=1e9)],
    ),
    "grade.answer_cells": Case(
        grade.answer_cells, lambda: dict(sources=["x = 1", "def f():\n    return x"], functions=["f"]),
        {"sources": st.sampled_from([None, "x = 1", [3], (("x",),), [b"x"]]),
         "functions": st.sampled_from([None, "f", [3], [b"f"]])},
        extremes=[dict(sources=[], functions=[]), dict(sources=["def f(:"] * 3, functions=["f"]),
                  dict(sources=["%%time\ndef f(): pass", "!ls"], functions=["f", "g"]),
                  dict(sources=["(" * 10**5], functions=["f"])],
    ),
    "grade.assignment_from_path": Case(
        grade.assignment_from_path, lambda: dict(path="submissions/relative/ada.ipynb"), {"path": BAD_PATH},
        extremes=[dict(path="x"), dict(path="/"), dict(path=f"{'relative' * 100}/{'r' * 200}.ipynb")],
    ),
    "grade.grade_cells": Case(
        grade.grade_cells, lambda: dict(cells=[], assignment="relative"),
        {"cells": st.sampled_from([None, "x = 1", [3], [b"x"]]),
         "assignment": st.sampled_from([None, 3, "nope", ["relative"]]),
         "student": st.sampled_from([3, "", "../x", "a" * 129, b"ada"]), "notebook": BAD_TEXT,
         "exercises": st.sampled_from(["t5_bucket", [3], ["nope"], ("t5_bucket", None)]),
         "cell_timeout": bad_float(0.0), "call_timeout": bad_float(0.0), "timeout": bad_float(0.0),
         "seed": st.one_of(bad_int(0), st.just(2**63)), "limits": st.sampled_from([{}, 3, "limits", SandboxLimits]),
         "isolation": st.sampled_from([3, "", "half", ["full"]]), "hide": BAD_PATHS},
        extremes=[dict(cells=["x = 1"] * 3), dict(assignment="custom", exercises=["alibi_slopes"], seed=2**40)],
        examples=15,
    ),
    "grade.grade_folder": Case(
        grade.grade_folder,
        lambda: dict(folder=tempfile.mkdtemp(dir=_COURSE_DIR.name), assignment="relative",
                     out=f"{_COURSE_DIR.name}/grades", progress=False),
        {"folder": st.one_of(BAD_PATH, st.just(f"{tempfile.gettempdir()}/course_pe_no_such_folder")),
         "assignment": st.sampled_from([3, "nope", ["relative"]]), "out": BAD_PATH, "jobs": bad_int(1),
         "progress": BAD_BOOL, "replace": BAD_BOOL, "roster_column": st.sampled_from([3, b"id", ["id"]]),
         "roster": st.one_of(st.sampled_from([3, b"r.csv", ["r.csv"], ""]),
                             st.just(f"{tempfile.gettempdir()}/course_pe_no_such_roster.csv"))},
        extremes=[dict(jobs=1), dict(jobs=10**6, assignment="sinusoidal", replace=True)],
        examples=15,
    ),
    "grade.grade_notebook": Case(
        grade.grade_notebook,
        lambda: dict(path=_notebook_file(_COURSE_DIR.name, "ada.ipynb"), assignment="relative"),
        {"path": st.one_of(BAD_PATH, st.just(f"{_COURSE_DIR.name}/missing.ipynb")),
         "student": st.sampled_from([3, "", "../x", "a" * 129, b"ada"]),
         "assignment": st.sampled_from([3, "nope", ["relative"]]),
         "exercises": st.sampled_from(["t5_bucket", [3], ["nope"], ("t5_bucket", None)]),
         "out": BAD_PATH.filter(lambda v: v is not None),
         "cell_timeout": bad_float(0.0), "call_timeout": bad_float(0.0), "timeout": bad_float(0.0),
         "seed": bad_int(0), "limits": st.sampled_from([{}, 3, "limits", SandboxLimits]),
         "isolation": st.sampled_from([3, "", "half", ["full"]])},
        extremes=[dict(student="a", seed=0), dict(exercises=["alibi_slopes"], assignment=None, seed=2**40),
                  dict(path=_COURSE_DIR.name, cell_timeout=1e-9, timeout=LONG, out=_COURSE_DIR.name)],
        examples=15,
    ),
    "grade.main": Case(grade.main, lambda: dict(argv=[]), {"argv": BAD_ARGV},
                       extremes=[dict(argv=("--dir", "a", "--student", "b"))]),
    "grade.read_submission": Case(
        grade.read_submission, lambda: dict(path=_notebook_file(_COURSE_DIR.name, "read.ipynb")), {"path": BAD_PATH},
        extremes=[dict(path=_notebook_file(_COURSE_DIR.name, "empty.ipynb", nbformat.v4.new_notebook()))],
    ),
    "grade.self_check": Case(
        grade.self_check, lambda: dict(isolation="limited", exercises=["t5_bucket"]),
        {"isolation": st.sampled_from([3, "", "half", ["full"]]),
         "exercises": st.sampled_from(["t5_bucket", [3], ["nope"], ("t5_bucket", None)]),
         "hide": BAD_PATHS, "limits": st.sampled_from([{}, 3, "limits", SandboxLimits]), "timeout": bad_float(0.0)},
        extremes=[dict(exercises=[], hide=[], timeout=LONG)],
        examples=10,
    ),
    "grade.summary_table": Case(
        grade.summary_table, lambda: dict(result=[]),
        {"result": st.sampled_from([None, "r", 3])},
        extremes=[dict(result=grade.FolderResult([GradeReport(student="ada", notebook="n")], []))],
    ),
    # -------------------------------------------------------------- names, roster, grading_build, nbgrader_autograde
    "names.validate_name": Case(
        names.validate_name, lambda: dict(name="ada"),
        {"name": st.sampled_from([None, 3, b"ada", "", "../x", "a" * 129, "-a", "a/b", "a b", ["ada"], "=1+1"])},
        extremes=[dict(name="a"), dict(name="x" * 128), dict(name="0.a-b_c"), dict(name="ada.lovelace+cs@uni.edu")],
    ),
    "names.derive_name": Case(
        names.derive_name, lambda: dict(text="Ada Lovelace"), {"text": st.sampled_from([None, 3, b"x", ["x"], "", "...",
                                                                                        "日本"])},
        extremes=[dict(text="é" * 10**4 + "a"), dict(text="../../etc/passwd"), dict(text="José")],
    ),
    "roster.RosterEntry": Case(roster.RosterEntry, lambda: dict(student="ada"),
                               {"student": st.sampled_from([None, 3, "", "a b", "../x"]),
                                "file": st.sampled_from([3, b"x", "", "a/b.ipynb"]), "name": BAD_TEXT},
                               extremes=[dict(file="ada.ipynb", name="Ada Lovelace")]),
    "roster.Intake": Case(roster.Intake, lambda: dict(file="ada.ipynb", student="ada", status="grade"),
                          {"file": BAD_TEXT, "student": st.sampled_from([3, b"ada", "", "a b"]),
                           "status": bad_choice(roster.INTAKE_STATUSES), "detail": BAD_TEXT,
                           "raw": st.sampled_from([3, "ada.ipynb", ["x"]])},
                          extremes=[dict(student=None, status="unknown", raw=b"\xe9.ipynb")]),
    "roster.intake": Case(
        roster.intake, lambda: dict(folder=tempfile.mkdtemp(dir=_COURSE_DIR.name)),
        {"folder": st.one_of(BAD_PATH, st.just(f"{tempfile.gettempdir()}/course_pe_no_such_folder")),
         "roster": st.sampled_from(["r.csv", [3], [{"student": "ada"}], 3])},
        extremes=[dict(roster=[]), dict(roster=[roster.RosterEntry("ada", "ada.ipynb")])],
    ),
    "roster.read_roster": Case(
        roster.read_roster, lambda: dict(path=_roster_file("student_id\nada\n")),
        {"path": st.one_of(BAD_PATH, st.just(f"{tempfile.gettempdir()}/course_pe_no_such_roster.csv")),
         "id_column": st.sampled_from([3, b"id", ["id"], "no such column"])},
        extremes=[dict(path=_roster_file("\ufeffSIS Login ID;Name\nada;Ada\n" + "x,\n" * 0)),
                  dict(path=_roster_file("email\n" + "".join(f"s{i}@uni.edu\n" for i in range(5000))))],
    ),
    "grading_build.grading_build": Case(
        grading_build.grading_build, lambda: dict(unavailable=["course_pe.alibi.alibi_slopes"]),
        {"unavailable": st.sampled_from([None, "course_pe.alibi.alibi_slopes", [3], [""], ["course_pe.no.such"]])},
        extremes=[dict(unavailable=[]), dict(unavailable=("course_pe.t5.T5RelativeBias.forward",))],
    ),
    "grading_build.package_folder": Case(grading_build.package_folder, lambda: dict(), {}),
    "grading_build.repository_root": Case(grading_build.repository_root, lambda: dict(), {}),
    "gradescope.Candidate": Case(
        gradescope.Candidate, lambda: dict(path="x.ipynb", shown="x.ipynb"),
        {"path": BAD_PATH, "shown": BAD_TEXT, "defines": st.sampled_from(["f", [3], (b"f",)]), "problem": BAD_TEXT},
        extremes=[dict(defines=[], problem="unreadable")],
    ),
    "gradescope.find_notebooks": Case(gradescope.find_notebooks, lambda: dict(folder=_COURSE_DIR.name),
                                      {"folder": BAD_PATH}, extremes=[dict(folder=f"{_COURSE_DIR.name}/absent")]),
    "gradescope.choose_notebook": Case(
        gradescope.choose_notebook, lambda: dict(candidates=[], assignment="relative"),
        {"candidates": st.sampled_from([None, "x.ipynb", [3], ("x",)]),
         "assignment": st.sampled_from([None, 3, "", "chapter9", ["relative"]])},
        extremes=[dict(candidates=[gradescope.Candidate(_notebook_file(_COURSE_DIR.name, "gs.ipynb"), "gs.ipynb")])],
    ),
    "gradescope.results_json": Case(
        gradescope.results_json, lambda: dict(report=GradeReport(student="ada", notebook="n.ipynb")),
        {"report": st.sampled_from([None, {"score": 1}, "report"]), "summary": BAD_TEXT,
         "hidden_visibility": st.sampled_from([None, 3, "visible", "after_deadline"]),
         "execution_time": bad_float(0.0, strict=False), "extra": st.sampled_from(["x", [1], 3])},
        extremes=[dict(hidden_visibility="hidden", execution_time=0.0, extra={})],
    ),
    "gradescope.build_autograder": Case(
        gradescope.build_autograder,
        lambda: dict(assignment="relative", out=f"{_COURSE_DIR.name}/gradescope", wheel=_fake_wheel(),
                     requirements=["torch==2.13.0", "numpy==2.4.6"]),
        {"assignment": st.sampled_from([None, 3, "", "chapter9"]), "out": BAD_PATH,
         "wheel": st.sampled_from([None, 3, "", f"{_COURSE_DIR.name}/absent.whl", f"{_COURSE_DIR.name}"]),
         "requirements": st.sampled_from([None, "torch==2.13.0", [3], ["numpy==2.4.6"], [""]]),
         "hidden_visibility": st.sampled_from([None, "visible", 3]), "timeout": bad_float(0.0),
         "cell_timeout": bad_float(0.0), "call_timeout": bad_float(0.0)},
        extremes=[dict(hidden_visibility="after_published", timeout=1e-3, cell_timeout=LONG)],
    ),
    "gradescope.run_autograder": Case(
        gradescope.run_autograder, lambda: dict(root=f"{_COURSE_DIR.name}/autograder"),
        {"root": BAD_PATH, "isolation": st.sampled_from(["", "half", 3, ["full"]])},
        extremes=[dict(isolation="limited")],
    ),
    "gradescope.main": Case(gradescope.main, lambda: dict(argv=["run", "--root", f"{_COURSE_DIR.name}/autograder"]),
                            {"argv": BAD_ARGV}),
    "nbgrader_autograde.SandboxedExecute": Case(
        nbgrader_autograde.SandboxedExecute, lambda: dict(),
        {"cell_timeout": bad_float(0.0), "call_timeout": bad_float(0.0), "timeout": bad_float(0.0),
         "isolation": st.sampled_from([3, "half", ["full"], b"full"])},
        extremes=[dict(timeout=1e-3, isolation="limited"), dict(cell_timeout=LONG, isolation="")],
    ),
    "nbgrader_autograde.SanitizeWrittenAnswers": Case(
        nbgrader_autograde.SanitizeWrittenAnswers, lambda: dict(),
        {"config": st.sampled_from([3, "x", {"a": 1}, ["c"]])},
        extremes=[dict(config=None)],
    ),
    "nbgrader_autograde.SanitizeWrittenAnswers.preprocess": Case(
        nbgrader_autograde.SanitizeWrittenAnswers.preprocess,
        lambda: dict(nb=nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("<script>x</script>")]),
                     resources={}),
        {"nb": st.sampled_from([None, "nb", {"cells": []}, 3]), "resources": st.sampled_from([None, "r", [1]])},
        call=lambda **kw: nbgrader_autograde.SanitizeWrittenAnswers().preprocess(**kw),
        extremes=[dict(nb=nbformat.v4.new_notebook(), resources={"nbgrader": {"student": "../x"}}),
                  dict(resources={"nbgrader": None})],
    ),
    "nbgrader_autograde.html_is_inert": Case(
        nbgrader_autograde.html_is_inert, lambda: dict(text="<p>ok</p>"),
        {"text": st.sampled_from([None, 3, b"<p>", ["<p>"]])},
        extremes=[dict(text=""), dict(text="<" * 10_000), dict(text="<script>" * 1000)],
    ),
    "nbgrader_autograde.SandboxedExecute.preprocess": Case(
        nbgrader_autograde.SandboxedExecute.preprocess,
        lambda: dict(nb=nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), resources={}),
        {"nb": st.sampled_from([None, "nb", {"cells": []}, 3]), "resources": st.sampled_from([None, "r", [1]])},
        call=lambda **kw: nbgrader_autograde.SandboxedExecute().preprocess(**kw),
        extremes=[dict(nb=nbformat.v4.new_notebook(), resources={"nbgrader": {"student": "../x"}})],
    ),
    # -------------------------------------------------------------- nbgrader_release
    "nbgrader_release.ChapterExercise": Case(
        nbgrader_release.ChapterExercise, lambda: dict(label="ex", prompt="p"),
        {"label": BAD_TEXT, "prompt": BAD_TEXT, "solution_text": BAD_TEXT,
         "solution_cells": st.sampled_from(["x", [3], None]), "demo_code": st.sampled_from(["x", [b"x"], 3]),
         "exercise_ids": st.sampled_from(["t5_bucket", [None], 3])},
        extremes=[dict(label="", prompt=""), dict(solution_cells=["x"] * 1000, exercise_ids=["t5_bucket"])],
    ),
    "nbgrader_release.answer_cell_source": Case(
        nbgrader_release.answer_cell_source, lambda: dict(source="def f(x):\n    return x\n"),
        {"source": st.sampled_from([None, 3, b"def f(): pass", "def f(:\n    pass", "", "# only a comment\n"])},
        extremes=[dict(source="x = 1"), dict(source='def f():\n    """doc"""'), dict(source="def f(): return 1"),
                  dict(source="async def g(x):\n    return x\n")],
    ),
    "nbgrader_release.autograder_cell_source": Case(
        nbgrader_release.autograder_cell_source, lambda: dict(exercise_id="t5_bucket", points=1),
        {"exercise_id": st.sampled_from([None, 3, "nope", "", ["t5_bucket"]]), "points": bad_float(0.0)},
        extremes=[dict(points=1e-9), dict(points=1e9), dict(exercise_id="extrapolation_gap", points=np.float64(2))],
    ),
    "nbgrader_release.chapter_exercises": Case(
        nbgrader_release.chapter_exercises, lambda: dict(nb=_solution_notebook()), {"nb": NOT_A_NOTEBOOK},
        extremes=[dict(nb=nbformat.v4.new_notebook())],
    ),
    "nbgrader_release.config_source": Case(
        nbgrader_release.config_source, lambda: dict(course_id="c"),
        {"course_id": st.sampled_from([None, 3, "", b"c"]), "cell_timeout": bad_int(1)},
        extremes=[dict(cell_timeout=1), dict(cell_timeout=10**9, course_id="x'\"\\n")],
    ),
    "nbgrader_release.main": Case(
        nbgrader_release.main,
        lambda: dict(argv=[_notebook_file(_COURSE_DIR.name, "relative.ipynb"), "--out", f"{_COURSE_DIR.name}/nbg"]),
        {"argv": BAD_ARGV},
        extremes=[dict(argv=(_notebook_file(_COURSE_DIR.name, "relative.ipynb"), "--out", f"{_COURSE_DIR.name}/nbg",
                             "--points-written", "0"))],
        examples=15,
    ),
    "nbgrader_release.make_source_notebook": Case(
        nbgrader_release.make_source_notebook, lambda: dict(nb=_solution_notebook(), chapter="relative"),
        {"nb": NOT_A_NOTEBOOK, "chapter": st.sampled_from([None, 3, "", b"x"]), "points_code": bad_float(0.0),
         "points_written": bad_float(0.0, strict=False)},
        extremes=[dict(nb=nbformat.v4.new_notebook()), dict(points_written=0), dict(points_code=1e-9)],
    ),
    "nbgrader_release.write_course": Case(
        nbgrader_release.write_course,
        lambda: dict(notebooks=[_notebook_file(_COURSE_DIR.name, "relative.ipynb")], out=f"{_COURSE_DIR.name}/nbg"),
        {"notebooks": st.sampled_from(["x.ipynb", None, [3], [""], [b"x.ipynb"]]), "out": BAD_PATH,
         "assignment": st.sampled_from([3, "a/b", "", "../x", ["a"]]), "points_code": bad_float(0.0),
         "points_written": bad_float(0.0, strict=False), "course_id": st.sampled_from([None, 3, ""])},
        extremes=[dict(notebooks=[]), dict(assignment="all-chapters_1", points_written=0)],
        examples=15,
    ),
    # -------------------------------------------------------------- workbook
    "workbook.exercises_in": Case(
        workbook.exercises_in, lambda: dict(nb=_solution_notebook()),
        {"nb": st.one_of(NOT_A_NOTEBOOK, st.just(SYNTAX_ERROR_NOTEBOOK))},
        extremes=[dict(nb=nbformat.v4.new_notebook())],
    ),
    "workbook.main": Case(
        workbook.main,
        lambda: dict(argv=[_notebook_file(_COURSE_DIR.name, "relative.ipynb"), "--out", f"{_COURSE_DIR.name}/wb"]),
        {"argv": BAD_ARGV},
        extremes=[dict(argv=(_notebook_file(_COURSE_DIR.name, "e.ipynb", nbformat.v4.new_notebook()), "--out",
                             f"{_COURSE_DIR.name}/wb", "--keep-outputs"))],
        examples=15,
    ),
    "workbook.make_student_notebook": Case(
        workbook.make_student_notebook, lambda: dict(nb=_solution_notebook()),
        {"nb": NOT_A_NOTEBOOK, "keep_outputs": BAD_BOOL},
        extremes=[dict(nb=nbformat.v4.new_notebook()), dict(keep_outputs=True)],
    ),
    "workbook.stub_source": Case(
        workbook.stub_source, lambda: dict(source="def f(x):\n    return x\n"),
        {"source": st.sampled_from([None, 3, b"def f(): pass", "def f(:\n    pass", "", "x = 1"])},
        extremes=[dict(source="def f(): pass"), dict(source='async def g(x):\n    """doc"""\n    return x\n'),
                  dict(source="import math\n\ndef alibi_slopes(n):\n    return n\n")],
    ),
})

# ----------------------------------------------------------------------------- the enumerating test


# ----------------------------------------------------------------------------- the instructor's term (issue 35)
from course_pe.coursework import exports, feedback, rubrics, term, written  # noqa: E402
from course_pe.coursework import statistics as course_statistics  # noqa: E402

_TERM_DIR = tempfile.TemporaryDirectory(prefix="course_pe_bad_input_term_")
_CANVAS_ROSTER = "Student,ID,SIS User ID,SIS Login ID,Section\n\"Lovelace, Ada\",1,S1,ada,A\n"


def _term_book() -> Gradebook:
    return Gradebook(_TERM_DIR.name + "/grades")


def _roster_table() -> roster.RosterTable:
    return roster.read_roster_table(_roster_file(_CANVAS_ROSTER))


def _assignment_info(kind: str = "coding") -> exports.AssignmentInfo:
    return exports.AssignmentInfo("relative", kind, (("t5_bucket", 1.0), ("alibi_slopes", 1.0)))


def _result() -> exports.Result:
    return exports.Result("ada", "relative", 2.0, 1.0, 1.0, "complete", "",
                          [("t5_bucket", "passed", 1.0, 1.0), ("alibi_slopes", "failed", 0.0, 1.0)])


def _marking_sheet() -> str:
    folder = tempfile.mkdtemp(dir=_TERM_DIR.name) + "/why_order-written"
    import os

    os.makedirs(folder)
    header = ["student", "name"] + [x for r in rubrics.rubrics_for_chapter("why_order")
                                    for x in (f"{r.label} (max {r.points:g})", f"{r.label} comment")]
    with open(f"{folder}/marking.csv", "w", encoding="utf-8") as fh:
        fh.write(",".join(header) + "\n" + "ada,Ada,1,ok" + ",,," * 0 + "\n")
    return f"{folder}/marking.csv"


BAD_BOOK = st.sampled_from([None, "grades", 3, object()])
REGISTRY.update({
    "exercises.Exercise.adapt": Case(
        exercises.Exercise.adapt, lambda: dict(fn=lambda attn, layer, s: None), {"fn": NOT_CALLABLE},
        call=lambda **kw: exercises.EXERCISES["t5_position_bias"].adapt(**kw),
        extremes=[dict(fn=print)],
    ),
    "exports.StoredRoster": Case(
        exports.StoredRoster, lambda: dict(header=("Student", "SIS Login ID"), rows=(("Ada", "ada"),), students=("ada",),
                                           names=("Ada",), id_column=1),
        {"header": st.sampled_from([["Student"], "Student", (3,), None]),
         "rows": st.sampled_from([[("Ada", "ada")], (("Ada",),), ((3, 4),), None]),
         "students": st.sampled_from([("../x",), ["ada"], (3,), ("a b",)]),
         "names": st.sampled_from([["Ada"], (3,), (), None]),
         "id_column": st.sampled_from([2, -1, 1.5, "1", None, True]), "source": BAD_TEXT},
        mentions={"rows": "rows"},
        extremes=[dict(header=(), rows=(), students=(), names=(), id_column=0, header_=None) if False else
                  dict(source="roster.csv")],
    ),
    "exports.late_penalty": Case(
        exports.late_penalty, lambda: dict(rule="10%/day", late_seconds=3600.0),
        {"rule": st.sampled_from([3, b"zero", "lots", "10%", "200%/day"]), "late_seconds": bad_float()},
        extremes=[dict(rule=None), dict(rule="zero", late_seconds=-5.0), dict(rule="0.5%/hour", late_seconds=1e12)],
    ),
    "exports.parse_due": Case(
        exports.parse_due, lambda: dict(text="2026-12-05T23:59"),
        {"text": st.one_of(BAD_TEXT, st.sampled_from(["tomorrow", "", "2026-13-01", "12/05/2026"]))},
        extremes=[dict(text="2026-12-05"), dict(text="2026-12-05T23:59:59Z"), dict(text="0001-01-02T00:00+00:00")],
    ),
    "exports.parse_late_rule": Case(
        exports.parse_late_rule, lambda: dict(text="10%/day"),
        {"text": st.one_of(BAD_TEXT, st.sampled_from(["", "10", "0%/day", "101%/day", "5%/week", "-1%/day"]))},
        extremes=[dict(text="none"), dict(text=" ZERO "), dict(text="100%/hour"), dict(text="0.001%/day")],
    ),
    "feedback.feedback_text": Case(
        feedback.feedback_text, lambda: dict(result=_result(), info=_assignment_info(), report=None),
        {"result": st.sampled_from([None, "ada", {"student": "ada"}]),
         "info": st.sampled_from([None, "relative", ("relative", "coding")]),
         "report": st.sampled_from(["{}", [1], 3]), "name": BAD_TEXT},
        extremes=[dict(report={"exercises": [], "cell_errors": ["cell 3 ('x'): boom"], "problems": ["late"]}),
                  dict(info=_assignment_info("written"), name="Ada Lovelace")],
    ),
    "statistics.hidden_ranges": Case(
        course_statistics.hidden_ranges, lambda: dict(exercises=["t5_bucket", "alibi_slopes"], reports=[]),
        {"exercises": st.sampled_from([None, "t5_bucket", [3], ["no_such_exercise"]]),
         "reports": st.sampled_from([None, {}, ["report"], [3]])},
        extremes=[dict(exercises=[], reports=[{"seed": 1, "exercises": [{"exercise": "x"}]}]),
                  dict(reports=[{"seed": 3, "exercises": [{"exercise": "t5_bucket", "status": "passed"},
                                                          {"exercise": "alibi_slopes", "status": "passed"}]}])],
    ),
    "statistics.statistics_text": Case(
        course_statistics.statistics_text, lambda: dict(info=_assignment_info(), results=[_result()], reports={}),
        {"info": st.sampled_from([None, "relative"]), "results": st.sampled_from([None, [None], ["ada"], _result()]),
         "reports": st.sampled_from([None, [], {"ada": 3}, {3: {}}]), "roster_size": bad_int(0)},
        extremes=[dict(results=[]), dict(info=_assignment_info("written"), roster_size=0),
                  dict(roster_size=10**6)],
    ),
    "gradebook.Gradebook.store_roster": Case(
        Gradebook.store_roster, lambda: dict(table=_roster_table()),
        {"table": st.sampled_from([None, "roster.csv", [("ada",)], {"header": []}]), "source": BAD_TEXT},
        call=lambda **kw: _term_book().store_roster(**kw),
        extremes=[dict(source="Canvas export (1).csv")],
    ),
    "gradebook.Gradebook.set_assignment": Case(
        Gradebook.set_assignment, lambda: dict(assignment="relative", due=None, late_rule=None),
        {"assignment": st.sampled_from([None, 3, "", "../x", ".hidden", "a b"]),
         "due": st.sampled_from([3, "tomorrow", "2026-12-05T23:59", b"2026"]),
         "late_rule": st.sampled_from([3, "lots", "10 %/day", "10%/Day"])},
        call=lambda **kw: _term_book().set_assignment(**kw),
        extremes=[dict(due="2026-12-05T22:59:00+00:00", late_rule="10%/day"), dict(assignment="why_order-written")],
    ),
    "gradebook.Gradebook.record_submission": Case(
        Gradebook.record_submission,
        lambda: dict(student="ada", assignment="relative", submitted_at="2026-12-01T10:00:00+00:00", source="TIMES"),
        {"student": st.sampled_from([None, 3, "", "a b", "../x"]), "assignment": st.sampled_from([None, "", "../x"]),
         "submitted_at": st.sampled_from([None, 3, "yesterday", "2026-12-01T10:00:00"]),
         "source": st.sampled_from([None, 3, ""])},
        call=lambda **kw: _term_book().record_submission(**kw),
        extremes=[dict(student="x" * 128, submitted_at="0001-01-01T00:00:00+00:00", source="file time")],
    ),
    "nbgrader_autograde.RestoreReleasedCells": Case(
        nbgrader_autograde.RestoreReleasedCells, lambda: dict(),
        {"config": st.sampled_from([3, "x", {"a": 1}, ["c"]])},
        extremes=[dict(config=None)],
    ),
    "nbgrader_autograde.RestoreReleasedCells.preprocess": Case(
        nbgrader_autograde.RestoreReleasedCells.preprocess,
        lambda: dict(nb=nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("answer")]),
                     resources={"nbgrader": {"db_url": "sqlite:///gradebook.db", "notebook": "n", "assignment": "a"}}),
        {"nb": st.sampled_from([None, "nb", {"cells": []}, 3]),
         "resources": st.sampled_from([None, "r", [1], {}, {"nbgrader": {"db_url": "x"}},
                                       {"nbgrader": {"db_url": "", "notebook": "n", "assignment": "a"}}])},
        call=lambda **kw: nbgrader_autograde.RestoreReleasedCells().preprocess(**kw),
        extremes=[dict(nb=nbformat.v4.new_notebook())],
    ),
    "roster.RosterTable": Case(
        roster.RosterTable, lambda: dict(header=("SIS Login ID",), rows=(("ada",),), id_column=0,
                                         entries=(roster.RosterEntry("ada"),)),
        {"header": st.sampled_from([["SIS Login ID"], "SIS Login ID", (3,), None]),
         "rows": st.sampled_from([[("ada",)], (("ada", "x"),), ((3,),), None]),
         "id_column": st.sampled_from([1, -1, 0.0, "0", True, None]),
         "entries": st.sampled_from([None, ("ada",), (), [roster.RosterEntry("ada")]])},
        extremes=[dict(header=("a", "b"), rows=(("x", "ada"),), id_column=1)],
    ),
    "roster.read_roster_table": Case(
        roster.read_roster_table, lambda: dict(path=_roster_file(_CANVAS_ROSTER)),
        {"path": st.one_of(BAD_PATH, st.just(f"{tempfile.gettempdir()}/course_pe_no_such_roster.csv")),
         "id_column": st.sampled_from([3, b"id", ["id"], "no such column"])},
        extremes=[dict(path=_roster_file("First name,Last name,Email address\nAda,Lovelace,ada@uni.edu\n")),
                  dict(id_column="SIS User ID")],
    ),
    "rubrics.Criterion": Case(
        rubrics.Criterion, lambda: dict(points=1, text="A criterion."),
        {"points": st.sampled_from([0, -1, None, "1", True, math.nan]), "text": st.one_of(BAD_TEXT, st.just("  "))},
        extremes=[dict(points=0.25), dict(points=100, text="x" * 10_000)],
    ),
    "rubrics.Rubric": Case(
        rubrics.Rubric, lambda: dict(label="ex-x", chapter="relative", kind="written",
                                     criteria=(rubrics.Criterion(1, "A."),)),
        {"label": BAD_TEXT, "chapter": st.sampled_from([None, "nowhere", 3]),
         "kind": st.sampled_from([None, "essay", 3]), "criteria": st.sampled_from([None, (), ("A.",), [1]])},
        extremes=[dict(kind="coding", criteria=tuple(rubrics.Criterion(1, f"{i}.") for i in range(50)))],
    ),
    "rubrics.rubric_text": Case(
        rubrics.rubric_text, lambda: dict(rubric=rubrics.RUBRICS["ex-relative-shaw-count"]),
        {"rubric": st.sampled_from([None, "ex-relative-shaw-count", 3, {"label": "x"}])},
        extremes=[dict(rubric=rubrics.Rubric("x", "relative", "proof", (rubrics.Criterion(0.5, "a_b * c."),)))],
    ),
    "rubrics.rubrics_for_chapter": Case(
        rubrics.rubrics_for_chapter, lambda: dict(chapter="why_order"), {"chapter": BAD_TEXT},
        extremes=[dict(chapter=""), dict(chapter="no such chapter"), dict(chapter="errata")],
    ),
    "term.TermSettings": Case(
        term.TermSettings, lambda: dict(),
        {"due": st.sampled_from([3, "2026-12-05T23:59", "tomorrow"]), "late_rule": st.sampled_from([3, "lots", "10 %/day"]),
         "times": st.sampled_from([None, [("ada", "x")], {"ada": 3}]), "has_times": BAD_BOOL},
        extremes=[dict(due="2026-12-05T22:59:00+00:00", late_rule="zero", times={"ada": "2026-12-01T00:00:00+00:00"},
                       has_times=True)],
    ),
    "term.TermSettings.apply": Case(
        term.TermSettings.apply, lambda: dict(book=_term_book(), assignment="relative"),
        {"book": BAD_BOOK, "assignment": BAD_TEXT},
        call=lambda **kw: term.TermSettings(late_rule="zero").apply(**kw),
        extremes=[dict(assignment="why_order-written")],
    ),
    "term.TermSettings.record_path": Case(
        term.TermSettings.record_path,
        lambda: dict(book=_term_book(), student="ada", assignment="relative", path=_roster_file("x")),
        {"book": BAD_BOOK, "student": BAD_TEXT, "assignment": BAD_TEXT, "path": BAD_PATH},
        call=lambda **kw: term.TermSettings().record_path(**kw),
        extremes=[dict(path=f"{tempfile.gettempdir()}/course_pe_no_such_file.ipynb")],
    ),
    "term.TermSettings.record_submission": Case(
        term.TermSettings.record_submission,
        lambda: dict(book=_term_book(), report=GradeReport(student="ada", notebook="n", assignment="relative"),
                     dir_fd=None, entry=None),
        {"book": BAD_BOOK, "report": st.sampled_from([None, "ada", {"student": "ada"}]),
         "dir_fd": st.sampled_from([-1, "3", 1.5, True]), "entry": st.sampled_from(["ada.ipynb", 3, {"raw": b"x"}])},
        call=lambda **kw: term.TermSettings(times={"ada": "2026-12-01T00:00:00+00:00"}).record_submission(**kw),
        extremes=[dict(entry=roster.Intake("ada.ipynb", "ada", "grade", raw=b"ada.ipynb"))],
    ),
    "term.file_time": Case(
        term.file_time, lambda: dict(path=_roster_file("x")),
        {"path": st.sampled_from([None, 3, ["x"], "", b""]), "dir_fd": st.sampled_from([-1, "3", 1.5, True])},
        extremes=[dict(path=tempfile.gettempdir())],
    ),
    "term.read_times": Case(
        term.read_times, lambda: dict(path=_roster_file("SIS Login ID,submitted_at\nada,2026-12-01T10:00\n")),
        {"path": st.one_of(BAD_PATH, st.just(_roster_file("SIS Login ID\nada\n")),
                           st.just(_roster_file("SIS Login ID,submitted_at\nada,yesterday\n"))),
         "id_column": st.sampled_from([3, b"x", "no such column"])},
        extremes=[dict(path=_roster_file("username;timestamp\nada;2026-12-01\nbob;\n")), dict(id_column="SIS Login ID")],
    ),
    "written.WrittenMark": Case(
        written.WrittenMark, lambda: dict(exercise="ex-x", score=1.0, max_score=2.0, status="marked", message=""),
        {"exercise": st.one_of(BAD_TEXT, st.just("")), "score": st.one_of(bad_float(0.0, strict=False), st.just(3.0)),
         "max_score": bad_float(0.0, strict=False), "status": bad_choice(("marked", "not graded")), "message": BAD_TEXT},
        mentions={"max_score": "max_score"},
        extremes=[dict(score=0.0, max_score=0.0), dict(status="not graded", message="not marked yet")],
    ),
    "written.WrittenReport": Case(
        written.WrittenReport, lambda: dict(student="ada", assignment="why_order-written", notebook="marking.csv"),
        {"student": st.sampled_from([None, "", "a b", "../x"]), "assignment": st.sampled_from([None, "why_order", 3]),
         "notebook": BAD_TEXT, "exercises": st.sampled_from([None, ["ex"], ("x",)]), "seed": bad_int(0),
         "cell_errors": st.sampled_from([None, "x", [3]]), "problems": st.sampled_from([None, "x", [3]])},
        extremes=[dict(exercises=[written.WrittenMark("ex-x", 1.0, 1.0, "marked", "ok")])],
    ),
    "written.main": Case(
        written.main, lambda: dict(argv=["sheet", "no-such-chapter", "--grades", _TERM_DIR.name + "/g"]),
        {"argv": BAD_ARGV}, extremes=[dict(argv=["record", "/no/such/why_order-written/marking.csv"])],
    ),
    "written.read_sheet": Case(
        written.read_sheet, lambda: dict(sheet=_marking_sheet(), chapter="why_order"),
        {"sheet": st.one_of(BAD_PATH, st.just(_roster_file("student,name\n"))),
         "chapter": st.one_of(BAD_TEXT, st.sampled_from(["errata", "relativ", ""]))},
        mentions={"sheet": "sheet"},
        extremes=[dict(sheet=_roster_file(""), chapter="why_order") if False else dict(chapter="why_order")],
    ),
    "written.record_sheet": Case(
        written.record_sheet, lambda: dict(sheet=_marking_sheet(), grades=_TERM_DIR.name + "/marks", replace=True),
        {"sheet": st.one_of(BAD_PATH, st.just(_roster_file("x"))), "grades": BAD_PATH, "replace": BAD_BOOL},
        extremes=[dict(replace=True)],
    ),
    "written.write_sheet": Case(
        written.write_sheet, lambda: dict(chapter="why_order", grades=tempfile.mkdtemp(dir=_TERM_DIR.name) + "/g",
                                          roster=_roster_file(_CANVAS_ROSTER)),
        {"chapter": st.one_of(BAD_TEXT, st.sampled_from(["errata", "nowhere"])), "grades": BAD_PATH,
         "roster": st.one_of(BAD_PATH.filter(lambda v: v is not None), st.just(_roster_file("nothing\n"))),
         "roster_column": st.sampled_from([3, b"x", "no such column"])},
        mentions={"roster": "roster"},
        extremes=[dict(roster_column="SIS Login ID")],
    ),
})

def public_callables() -> set[str]:
    """``module.name`` for every public function and class, ``module.Class.method`` for public methods."""
    names: set[str] = set()
    objects = [getattr(course_pe, n) for n in course_pe.__all__]
    for info in pkgutil.walk_packages(course_pe.__path__, prefix="course_pe."):
        if info.name.rsplit(".", 1)[-1].startswith("_") or info.ispkg:
            continue
        module = importlib.import_module(info.name)
        objects += [getattr(module, n) for n in getattr(module, "__all__", [])]
    for obj in objects:
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue  # constants, modules, type aliases
        module = obj.__module__.rsplit(".", 1)[-1]
        names.add(f"{module}.{obj.__qualname__}")
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                # a method whose only parameter is self (extra_repr) has no argument to get wrong
                if not attr.startswith("_") and inspect.isfunction(member) and len(inspect.signature(member).parameters) > 1:
                    names.add(f"{module}.{obj.__qualname__}.{attr}")
    return names


def test_registry_covers_the_public_api():
    public = public_callables()
    missing = sorted(public - REGISTRY.keys() - NO_BAD_INPUT.keys())
    stale = sorted((REGISTRY.keys() | NO_BAD_INPUT.keys()) - public)
    assert not REGISTRY.keys() & NO_BAD_INPUT.keys()
    assert not missing, f"public callables without bad-input cases in tests/test_bad_input.py: {missing}"
    assert not stale, f"registry entries for names that are not public: {stale}"


@pytest.mark.parametrize("key", sorted(NO_BAD_INPUT))
def test_exemptions_are_exception_classes(key):
    """An exemption is only for an exception class, which (as every Exception) takes any message."""
    module, name = key.split(".")
    # a module of course_pe.coursework (sandbox, grade, roster, ...) or of course_pe itself, whichever exists
    package = "course_pe.coursework" if importlib.util.find_spec(f"course_pe.coursework.{module}") else "course_pe"
    cls = getattr(importlib.import_module(f"{package}.{module}"), name)
    assert inspect.isclass(cls) and issubclass(cls, Exception) and NO_BAD_INPUT[key]
    with pytest.raises(cls, match="a message"):
        raise cls("a message")


@pytest.mark.parametrize("key", sorted(REGISTRY))
def test_registry_arguments_exist(key):
    """Every argument a case perturbs is a real parameter (so Python's own 'unexpected keyword' TypeError
    can never pass for a check), and the valid arguments bind."""
    case = REGISTRY[key]
    signature = inspect.signature(case.target)
    params = set(signature.parameters)
    assert set(case.bad) | set(case.reported) <= params, (set(case.bad) | set(case.reported)) - params
    assert set(case.valid()) <= params


@pytest.mark.parametrize("key", sorted(REGISTRY))
def test_bad_input_raises_a_clear_error(key):
    case = REGISTRY[key]
    if not case.bad:
        # only a callable without parameters, or one whose only argument is reported on (an exercise check), has no
        # wrong value to raise for
        assert case.reported or not inspect.signature(case.target).parameters, key
        if not case.reported:
            with pytest.raises(TypeError):
                case.invoke({"unexpected": 1})
        return

    @settings(max_examples=case.examples, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(data=st.data())
    def run(data):
        argument = data.draw(st.sampled_from(sorted(case.bad)), label="argument")
        value = data.draw(case.bad[argument], label="value")
        kwargs = case.valid()
        kwargs[argument] = value
        try:
            result = case.invoke(kwargs)
        except (TypeError, ValueError) as error:
            message = str(error)
            assert message, "empty error message"
            mention = case.mentions.get(argument, argument)
            # the argument's name as a whole word (a mangled name such as "XXxXX" does not count)
            assert re.search(rf"(?<![A-Za-z0-9_]){re.escape(mention)}(?![A-Za-z0-9_])", message), message
        else:
            pytest.fail(f"{key}({argument}={value!r}) returned {type(result).__name__} instead of raising")
        finally:
            plt.close("all")

    run()


@pytest.mark.parametrize("key", sorted(k for k in REGISTRY if REGISTRY[k].reported))
def test_students_mistakes_give_a_failed_report(key):
    """An exercise check handed something that is not the student's function reports it (a failed check that says
    what it got) instead of raising: it runs in the student's notebook and in the grader."""
    case = REGISTRY[key]

    @settings(max_examples=case.examples, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(data=st.data())
    def run(data):
        argument = data.draw(st.sampled_from(sorted(case.reported)), label="argument")
        value = data.draw(case.reported[argument], label="value")
        kwargs = case.valid()
        kwargs[argument] = value
        report = case.invoke(kwargs)
        assert isinstance(report, exercises.CheckReport) and not report.passed and report.score == 0.0
        text = str(report)
        assert "FAILED" in text and ("not callable" in text or "no function named" in text), text

    run()


@pytest.mark.parametrize("key", sorted(REGISTRY))
def test_valid_arguments_and_extremes_work(key):
    case = REGISTRY[key]
    for override in [{}, *case.extremes]:
        kwargs = case.valid()
        kwargs.update(override)
        case.invoke(kwargs)
    plt.close("all")
