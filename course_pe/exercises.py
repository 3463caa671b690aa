"""Automatic checks for the course's coding exercises.

Each ``check_*`` function takes the student's function, runs it on a list of cases (edge cases
included), and returns a :class:`CheckReport`: which case failed, what was expected and what came back,
and a hint. When the wrong answer matches a *classic mistake* (several of them made by the course's
sources), the report names the mistake. Reference values are computed here from the formulas, so a
report never shows the reference implementation, only numbers.

In a notebook::

    report = cpe.exercises.check_sinusoidal_table(my_table)
    print(report)

Every check is registered in ``EXERCISES`` under a stable id; the grader
(``python -m course_pe.grade``) looks functions up by the name given there.
"""

from __future__ import annotations

import json
import math
import os
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from .t5 import t5_relative_position_bucket

__all__ = [
    "EXERCISES",
    "CheckReport",
    "Exercise",
    "check",
    "check_add_positional_encoding",
    "check_alibi_slopes",
    "check_extrapolation_gap",
    "check_half_to_interleaved",
    "check_rope_rotation",
    "check_shift_matrix",
    "check_sinusoidal_table",
    "check_t5_bucket",
]


@dataclass
class CheckReport:
    """The outcome of one check. ``passed`` is True only if every case passed."""

    exercise: str
    passed: bool
    cases_run: int
    cases_total: int
    failed_case: str | None = None
    expected: str | None = None
    got: str | None = None
    mistake: str | None = None
    hint: str | None = None
    error: str | None = None

    @property
    def score(self) -> float:
        return 1.0 if self.passed else 0.0

    def __str__(self) -> str:
        if self.passed:
            return f"[{self.exercise}] PASSED: all {self.cases_total} cases correct."
        lines = [f"[{self.exercise}] FAILED on case {self.cases_run} of {self.cases_total}: {self.failed_case}"]
        if self.error:
            lines.append(f"  your function raised: {self.error}")
        if self.expected is not None:
            lines.append(f"  expected: {self.expected}")
        if self.got is not None:
            lines.append(f"  got:      {self.got}")
        if self.mistake:
            lines.append(f"  diagnosis: {self.mistake}")
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"score": self.score}


@dataclass(frozen=True)
class Exercise:
    """A registered coding exercise: id, the function name students define, chapter, and its check."""

    id: str
    function: str
    chapter: str
    check: Callable[[Callable[..., Any]], CheckReport]
    description: str


EXERCISES: dict[str, Exercise] = {}


def _register(id: str, function: str, chapter: str, description: str):
    def decorate(check_fn: Callable[[Callable[..., Any]], CheckReport]):
        EXERCISES[id] = Exercise(id, function, chapter, check_fn, description)
        return check_fn

    return decorate


# --------------------------------------------------------------------------- helpers


def _as_array(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().double().numpy()
    return np.asarray(value, dtype=np.float64)


def _short(a: Any, limit: int = 6) -> str:
    arr = np.asarray(a)
    if arr.ndim == 0:
        return f"{arr.item():.6g}" if arr.dtype.kind == "f" else str(arr.item())
    flat = arr.reshape(-1)
    body = ", ".join(f"{v:.4f}" if arr.dtype.kind == "f" else str(v) for v in flat[:limit])
    more = ", ..." if flat.size > limit else ""
    return f"shape {tuple(arr.shape)}: [{body}{more}]"


@dataclass
class _Case:
    name: str
    call: Callable[[Callable[..., Any]], Any]
    expected: Any
    compare: Callable[[Any, Any], bool]
    mistakes: Sequence[tuple[str, Any]] = field(default_factory=tuple)
    hint: str | None = None


def _close(atol: float = 1e-5) -> Callable[[Any, Any], bool]:
    def compare(got: Any, expected: Any) -> bool:
        g, e = _as_array(got), _as_array(expected)
        return g.shape == e.shape and bool(np.allclose(g, e, atol=atol, rtol=0))

    return compare


def _equal(got: Any, expected: Any) -> bool:
    g, e = np.asarray(_as_array(got)), np.asarray(_as_array(expected))
    return g.shape == e.shape and bool(np.array_equal(g, e))


def _run(exercise: str, fn: Callable[..., Any], cases: Sequence[_Case]) -> CheckReport:
    report = _evaluate(exercise, fn, cases)
    _record(report)
    return report


def _evaluate(exercise: str, fn: Callable[..., Any], cases: Sequence[_Case]) -> CheckReport:
    total = len(cases)
    if not callable(fn):
        return CheckReport(exercise, False, 0, total, "calling your function", error=f"{fn!r} is not callable")
    for n, case in enumerate(cases, start=1):
        try:
            got = case.call(fn)
        except NotImplementedError:
            return CheckReport(
                exercise, False, n, total, case.name, error="NotImplementedError",
                hint="the function is still a stub: replace `raise NotImplementedError` with your code",
            )
        except Exception as exc:  # report, do not crash the notebook
            return CheckReport(
                exercise, False, n, total, case.name, error=f"{type(exc).__name__}: {exc}", hint=case.hint,
            )
        try:
            ok = case.compare(got, case.expected)
        except Exception:
            ok = False
        if ok:
            continue
        mistake = None
        for description, wrong in case.mistakes:
            try:
                if case.compare(got, wrong):
                    mistake = description
                    break
            except Exception:
                pass
        return CheckReport(
            exercise, False, n, total, case.name, expected=_short(_as_array(case.expected)),
            got=_short(_as_array(got)) if _is_arraylike(got) else repr(got)[:200], mistake=mistake, hint=case.hint,
        )
    return CheckReport(exercise, True, total, total)


def _is_arraylike(x: Any) -> bool:
    try:
        _as_array(x)
        return True
    except Exception:
        return False


def _record(report: CheckReport) -> None:
    """If the grader set ``COURSE_PE_RESULTS``, append the report there (one JSON object per line)."""
    path = os.environ.get("COURSE_PE_RESULTS")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(report.to_json()) + "\n")


def check(exercise_id: str, fn: Callable[..., Any] | None) -> CheckReport:
    """Run the registered check ``exercise_id`` on ``fn`` (never raises; errors become a failed report).

    ``fn=None`` (the function is not defined, e.g. its cell was deleted) gives a failed report that says so.
    """
    if exercise_id not in EXERCISES:
        raise ValueError(f"unknown exercise {exercise_id!r}; known: {', '.join(sorted(EXERCISES))}")
    if fn is None:
        name = EXERCISES[exercise_id].function
        report = CheckReport(
            exercise_id, False, 0, 0, f"looking up `{name}`",
            error=f"no function named `{name}` is defined (was its cell deleted, renamed or not run?)",
            hint=f"define `{name}` with the signature given in the exercise",
        )
        _record(report)
        return report
    try:
        report = EXERCISES[exercise_id].check(fn)
    except Exception:  # a bug in a check must not take the grader down
        report = CheckReport(exercise_id, False, 0, 0, "running the check", error=traceback.format_exc(limit=2))
        _record(report)
    return report


# --------------------------------------------------------------------------- reference formulas


def _table(n: int, d: int, *, base: float = 10000.0, exponent: str = "2i", layout: str = "interleaved") -> np.ndarray:
    p = np.arange(n, dtype=np.float64)[:, None]
    i = np.arange(d // 2, dtype=np.float64)[None, :]
    omega = base ** (-2 * i / d)
    out = np.empty((n, d))
    if exponent == "2i":
        s, c = np.sin(p * omega), np.cos(p * omega)
    elif exponent == "2i+1 for cos":
        s, c = np.sin(p * omega), np.cos(p * base ** (-(2 * i + 1) / d))
    elif exponent == "swapped":
        omega_rev = omega[:, ::-1]
        s, c = np.sin(p * omega_rev), np.cos(p * omega_rev)
    elif exponent == "no 2":
        omega1 = base ** (-i / d)
        s, c = np.sin(p * omega1), np.cos(p * omega1)
    elif exponent == "multiply":
        s, c = np.sin(p * base ** (2 * i / d)), np.cos(p * base ** (2 * i / d))
    else:  # pragma: no cover
        raise ValueError(exponent)
    if layout == "interleaved":
        out[:, 0::2], out[:, 1::2] = s, c
    else:
        out[:, : d // 2], out[:, d // 2 :] = s, c
    return out


# --------------------------------------------------------------------------- Part I


@_register("sinusoidal_table", "sinusoidal_table", "sinusoidal", "the (num_positions, d_model) sinusoidal table, interleaved")
def check_sinusoidal_table(fn: Callable[[int, int], Any]) -> CheckReport:
    """``fn(num_positions, d_model)`` must return the interleaved sinusoidal table (base 10000)."""
    cases = []
    for n, d in [(1, 2), (10, 4), (50, 16), (7, 128)]:
        cases.append(
            _Case(
                f"sinusoidal_table({n}, {d})",
                lambda f, n=n, d=d: f(n, d),
                _table(n, d),
                _close(1e-5),
                mistakes=(
                    ("the cosine uses exponent (2i+1)/d_model; sine and cosine of one pair share the frequency "
                     "base^(-2i/d_model) (the error of source 002, 7.3.2)", _table(n, d, exponent="2i+1 for cos")),
                    ("fast and slow dimensions are swapped: dimension 0 must have frequency 1 (wavelength 2*pi) and the "
                     "last pair the lowest frequency", _table(n, d, exponent="swapped")),
                    ("the exponent is i/d_model; with i the pair index it must be 2i/d_model", _table(n, d, exponent="no 2")),
                    ("positions are multiplied by base^(2i/d_model); they must be divided by it", _table(n, d, exponent="multiply")),
                    ("sines and cosines are in two blocks; this exercise asks for the interleaved layout "
                     "(sin at 2i, cos at 2i+1)", _table(n, d, layout="blocks")),
                ),
                hint="PE[p, 2i] = sin(p / 10000**(2i/d_model)), PE[p, 2i+1] = cos(p / 10000**(2i/d_model)), "
                "with i the pair index 0 ... d_model/2 - 1",
            )
        )
    return _run("sinusoidal_table", fn, cases)


def _shift(k: float, d: int, base: float = 10000.0, transpose: bool = False) -> np.ndarray:
    omega = base ** (-2 * np.arange(d // 2) / d)
    m = np.zeros((d, d))
    for i, w in enumerate(omega):
        c, s = math.cos(k * w), math.sin(k * w)
        block = np.array([[c, s], [-s, c]])
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = block.T if transpose else block
    return m


@_register("shift_matrix", "shift_matrix", "shift_theorem", "the matrix M_k with PE(p + k) = M_k PE(p)")
def check_shift_matrix(fn: Callable[[int, int], Any]) -> CheckReport:
    """``fn(k, d_model)`` must return ``M_k`` (interleaved layout) with ``PE(p + k) = M_k @ PE(p)``."""
    cases = []
    for k, d in [(0, 2), (1, 2), (3, 8), (-5, 8), (100, 16)]:
        cases.append(
            _Case(
                f"shift_matrix({k}, {d})",
                lambda f, k=k, d=d: f(k, d),
                _shift(k, d),
                _close(1e-6),
                mistakes=(
                    ("your matrix shifts by -k: the 2x2 blocks are transposed (the sin entries have the wrong signs)",
                     _shift(k, d, transpose=True)),
                ),
                hint="block i acts on (sin, cos) = (PE[2i], PE[2i+1]); expand sin((p+k)w) and cos((p+k)w) with the "
                "angle-addition formulas",
            )
        )
    return _run("shift_matrix", fn, cases)


@_register("add_positional_encoding", "add_positional_encoding", "model_input",
           "add the sinusoidal table to a batch-first input, with the sqrt(d_model) scale")
def check_add_positional_encoding(fn: Callable[[torch.Tensor], Any]) -> CheckReport:
    """``fn(embeddings)`` with ``embeddings`` of shape ``(batch, seq, d_model)`` must return
    ``sqrt(d_model) * embeddings + PE[:seq]`` (interleaved table, base 10000)."""
    cases = []
    g = torch.Generator().manual_seed(0)
    for b, s, d in [(1, 1, 4), (2, 5, 8), (3, 7, 16), (1, 12, 6)]:
        x = torch.randn(b, s, d, generator=g, dtype=torch.float64)
        table = torch.from_numpy(_table(s, d))
        expected = math.sqrt(d) * x + table
        seq_first_bug = math.sqrt(d) * x + torch.from_numpy(_table(b, d))[:, None, :]  # pe[:batch] broadcast
        cases.append(
            _Case(
                f"embeddings of shape ({b}, {s}, {d})",
                lambda f, x=x: f(x.clone()),
                expected,
                _close(1e-6),
                mistakes=(
                    ("the table was indexed with the batch size: a (max_len, 1, d) table sliced with x.size(0) and added "
                     "to a batch-first input gives every position the encoding of position 0..batch-1 (the silent bug "
                     "of source 003, 5.2)", seq_first_bug),
                    ("the embeddings are not scaled by sqrt(d_model)", x + table),
                    ("the embeddings are divided, not multiplied, by sqrt(d_model)", x / math.sqrt(d) + table),
                ),
                hint="the sequence axis of a batch-first input is dimension 1; broadcast PE[:seq] over the batch",
            )
        )
    return _run("add_positional_encoding", fn, cases)


# --------------------------------------------------------------------------- Part II


def _rope(x: np.ndarray, positions: np.ndarray, *, exponent_scale: float = 2.0, sign: float = 1.0, layout: str = "interleaved") -> np.ndarray:
    d = x.shape[-1]
    i = np.arange(d // 2)
    theta = 10000.0 ** (-exponent_scale * i / d)
    ang = positions[:, None] * theta[None, :] * sign
    c, s = np.cos(ang), np.sin(ang)
    out = np.empty_like(x)
    if layout == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]
        out[..., 0::2], out[..., 1::2] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., : d // 2], x[..., d // 2 :]
        out[..., : d // 2], out[..., d // 2 :] = a * c - b * s, a * s + b * c
    return out


@_register("rope_rotation", "rope_rotation", "rope_implementation", "rotate (seq, head_dim) vectors by RoPE, interleaved")
def check_rope_rotation(fn: Callable[[torch.Tensor, torch.Tensor], Any]) -> CheckReport:
    """``fn(x, positions)``: ``x`` of shape ``(seq, head_dim)``, ``positions`` a ``(seq,)`` long tensor; returns
    the interleaved RoPE rotation with base 10000."""
    g = torch.Generator().manual_seed(1)
    cases = []
    for seq, d, pos in [(1, 2, [0]), (3, 2, [0, 1, 2]), (4, 8, [0, 5, 17, 1000]), (5, 64, [3, 1, 4, 1, 5])]:
        x = torch.randn(seq, d, generator=g, dtype=torch.float64)
        p = torch.tensor(pos)
        xn, pn = x.numpy(), np.asarray(pos, dtype=np.float64)
        cases.append(
            _Case(
                f"x of shape ({seq}, {d}), positions {pos}",
                lambda f, x=x, p=p: f(x.clone(), p.clone()),
                _rope(xn, pn),
                _close(1e-6),
                mistakes=(
                    ("the exponent is doubled: arange(0, d, 2) already equals 2i, so base ** (-2 * arange(0, d, 2) / d) "
                     "uses 4i/d (the bug of source 004, Q4)", _rope(xn, pn, exponent_scale=4.0)),
                    ("you rotate clockwise (by -p*theta); RoPE turns (a, b) into (a cos - b sin, a sin + b cos)",
                     _rope(xn, pn, sign=-1.0)),
                    ("you pair dimension i with i + d/2 (the half layout); this exercise pairs 2i with 2i+1",
                     _rope(xn, pn, layout="half")),
                ),
                hint="theta_i = 10000 ** (-2i / head_dim) for pair i = 0 ... head_dim/2 - 1; rotate (x[2i], x[2i+1]) "
                "by positions * theta_i",
            )
        )
    return _run("rope_rotation", fn, cases)


@_register("t5_bucket", "t5_bucket", "relative", "T5 relative-position buckets for key - query")
def check_t5_bucket(fn: Callable[..., Any]) -> CheckReport:
    """``fn(relative_position, bidirectional, num_buckets, max_distance)`` for a long tensor of
    ``key - query`` offsets; returns bucket ids like T5."""
    cases = []
    for bidirectional, nb, md in [(True, 32, 128), (False, 32, 128), (True, 8, 20)]:
        rel = torch.arange(-200, 201)
        # reference: the library's implementation, itself tested against an independent one (tests/test_relative.py)
        expected = t5_relative_position_bucket(rel, bidirectional=bidirectional, num_buckets=nb, max_distance=md).numpy()
        flipped = t5_relative_position_bucket(-rel, bidirectional=bidirectional, num_buckets=nb, max_distance=md).numpy()
        cases.append(
            _Case(
                f"offsets -200 ... 200, bidirectional={bidirectional}, num_buckets={nb}, max_distance={md}",
                lambda f, rel=rel, b=bidirectional, nb=nb, md=md: f(rel.clone(), b, nb, md),
                expected,
                _equal,
                mistakes=(("you used query - key; the convention here (and T5's) is relative_position = key - query",
                           flipped),),
                hint="exact buckets below num_buckets/4 (bidirectional) or /2 (causal), then logarithmic up to "
                "max_distance, then the last bucket; keys to the right get the upper half when bidirectional",
            )
        )
    return _run("t5_bucket", fn, cases)


def _alibi(n: int) -> list[float]:
    def pow2(m: int) -> list[float]:
        return [2.0 ** (-8.0 * (k + 1) / m) for k in range(m)]

    closest = 2 ** int(math.floor(math.log2(n)))
    return pow2(closest) + (pow2(2 * closest)[0::2][: n - closest] if closest != n else [])


@_register("alibi_slopes", "alibi_slopes", "relative", "ALiBi head slopes, including non-powers of two")
def check_alibi_slopes(fn: Callable[[int], Any]) -> CheckReport:
    """``fn(num_heads)`` returns the ``num_heads`` ALiBi slopes of Press et al."""
    cases = []
    for n in (1, 2, 8, 16, 6, 12, 20):
        naive = [2.0 ** (-8.0 * (k + 1) / n) for k in range(n)]
        cases.append(
            _Case(
                f"alibi_slopes({n})",
                lambda f, n=n: f(n),
                _alibi(n),
                _close(1e-9),
                mistakes=(("you used 2^(-8(h+1)/n) for every n; for head counts that are not powers of two Press et al. "
                           "take the slopes of the nearest lower power of two, then every other slope of the next one",
                           naive),),
                hint="for a power of two n the slopes are 2^(-8/n), 2^(-16/n), ..., 2^(-8)",
            )
        )
    return _run("alibi_slopes", fn, cases)


@_register("half_to_interleaved", "half_to_interleaved", "rope_implementation",
           "reorder the last dimension from pairs (i, i + d/2) to pairs (2i, 2i + 1)")
def check_half_to_interleaved(fn: Callable[[torch.Tensor], Any]) -> CheckReport:
    """``fn(x)`` reorders the last dimension of ``x`` from the half layout to the interleaved layout."""
    cases = []
    for shape in [(2,), (4,), (3, 8), (2, 3, 6)]:
        d = shape[-1]
        x = torch.arange(math.prod(shape), dtype=torch.float64).reshape(shape)
        h = d // 2
        expected = torch.stack([x[..., :h], x[..., h:]], dim=-1).flatten(-2)
        inverse = torch.cat([x[..., 0::2], x[..., 1::2]], dim=-1)
        cases.append(
            _Case(
                f"x of shape {shape}",
                lambda f, x=x: f(x.clone()),
                expected,
                _equal,
                mistakes=(("this is the inverse permutation (interleaved -> half)", inverse),),
                hint="output dimension 2i is input dimension i, output 2i+1 is input i + d/2",
            )
        )
    return _run("half_to_interleaved", fn, cases)


# --------------------------------------------------------------------------- Part III


@_register("extrapolation_gap", "extrapolation_gap", "extrapolation",
           "mean loss beyond the training length minus mean loss within it")
def check_extrapolation_gap(fn: Callable[[torch.Tensor, int], Any]) -> CheckReport:
    """``fn(loss_by_position, train_length)``: mean loss at positions ``>= train_length`` minus the mean at
    positions ``< train_length``, as a Python float; NaN entries (unscored positions) are ignored."""
    cases = []
    for losses, length in [
        ([1.0, 1.0, 2.0, 4.0], 2),
        ([3.0, 1.0, 1.0, 1.0, 1.0, 1.0], 3),
        ([float("nan"), 2.0, 2.0, 5.0, 5.0], 3),
    ]:
        t = torch.tensor(losses, dtype=torch.float64)
        inside, outside = t[:length], t[length:]
        expected = float(outside.nanmean() - inside.nanmean())
        off_by_one = float(t[length - 1 :].nanmean() - t[: length - 1].nanmean())
        cases.append(
            _Case(
                f"losses {losses}, train_length {length}",
                lambda f, t=t, length=length: f(t.clone(), length),
                expected,
                _close(1e-9),
                mistakes=(("off by one: positions 0 ... L-1 were seen in training, position L is the first unseen one",
                           off_by_one),),
                hint="positions are 0-based; ignore NaN with torch.nanmean",
            )
        )
    return _run("extrapolation_gap", fn, cases)
