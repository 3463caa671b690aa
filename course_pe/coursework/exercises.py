"""Automatic checks for the course's coding exercises.

Each exercise is a list of *cases*: the arguments the grader passes to the student's function and the reference
value it compares the answer with. References are computed here from the formulas (the T5 buckets from a
transcription of T5's published bucket function), never by the student's code and never by the library functions
the exercise asks students to reimplement (``tests/test_exercises.py`` replaces those with wrong ones and checks that
no reference changes). A failed case
produces a :class:`CheckReport` that says what differed (shape, dtype or value, and at which input) and then, when
the wrong answer matches a *classic mistake* (several of them made by the course's sources), names the mistake.

In a notebook::

    report = cpe.exercises.check_sinusoidal_table(my_table)
    print(report)

runs the *visible* cases in the student's own kernel, for feedback. The grader (``python -m course_pe.coursework.grade``) uses
the same cases plus *hidden*, randomised ones, calls the student's function in a sandboxed process, gets back only
the raw outputs (see :func:`to_output`) and computes the verdict itself with :func:`judge`.

The registry ``EXERCISES`` maps a stable id to an :class:`Exercise`: the name of the function students define, the
chapter (assignment) it belongs to, its check, a description, the case builder, the output kind and the library
functions that implement it (which the grader makes unavailable while the student's function is checked).
"""

from __future__ import annotations

import inspect
import math
import secrets
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from . import _child
from .._validation import (
    check_bool,
    check_callable,
    check_choice,
    check_float,
    check_int,
    check_optional_str,
    check_str,
    check_str_sequence,
)

__all__ = [
    "EXERCISES",
    "GRADING_SETUP",
    "Case",
    "CheckReport",
    "Exercise",
    "Outcome",
    "call_case",
    "chapters",
    "check",
    "check_add_positional_encoding",
    "check_alibi_slopes",
    "check_extrapolation_gap",
    "check_half_to_interleaved",
    "check_rope_rotation",
    "check_shift_matrix",
    "check_sinusoidal_table",
    "check_t5_bucket",
    "exercises_for_chapter",
    "judge",
    "to_output",
]

FLOAT_DTYPES = ("float32", "float64")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
#: tolerance floor for a float32 answer, relative to the largest reference magnitude (float32 eps is 1.2e-7; a
#: correct float32 computation of these formulas stays well inside 2e-5, every classic mistake is off by >1e-2)
FLOAT32_RELATIVE_TOLERANCE = 2e-5
#: the statuses of an :class:`Outcome`
OUTCOME_STATUSES = ("ok", "stub", "error", "missing", "timeout", "invalid")
#: The set-up the grader runs before a submission's answer cells, the imports the exercises may use (the same as the
#: set-up cell of the nbgrader release). Its ``course_pe`` is the grading build, without the functions being graded.
GRADING_SETUP = "import math\n\nimport numpy as np\nimport torch\n\nimport course_pe as cpe\n"


@dataclass
class CheckReport:
    """The outcome of one check. ``passed`` is True only if every case passed.

    ``difference`` says what differed (shape, dtype or value, and where); ``mistake`` names a classic mistake when
    the answer matches one; ``hidden`` is True when the failed case is one of the grader's hidden cases;
    ``library_called`` lists the course_pe functions the submission called although they were unavailable.
    """

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
    difference: str | None = None
    hidden: bool = False
    library_called: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_str("exercise", self.exercise)
        check_bool("passed", self.passed)
        check_int("cases_run", self.cases_run, minimum=0)
        check_int("cases_total", self.cases_total, minimum=0)
        if self.cases_run > self.cases_total:
            raise ValueError(f"cases_run ({self.cases_run}) must be <= cases_total ({self.cases_total})")
        for name in ("failed_case", "expected", "got", "mistake", "hint", "error", "difference"):
            check_optional_str(name, getattr(self, name))
        check_bool("hidden", self.hidden)
        check_str_sequence("library_called", self.library_called)

    @property
    def score(self) -> float:
        return 1.0 if self.passed else 0.0

    def __str__(self) -> str:
        if self.passed:
            return f"[{self.exercise}] PASSED: all {self.cases_total} cases correct."
        which = "hidden case" if self.hidden else "case"
        lines = [f"[{self.exercise}] FAILED on {which} {self.cases_run} of {self.cases_total}: {self.failed_case}"]
        if self.library_called:
            lines.append(f"  your function called {', '.join(self.library_called)}, which is not allowed in this "
                         "exercise (implement it yourself)")
        if self.error:
            lines.append(f"  your function raised: {self.error}")
        if self.difference:
            lines.append(f"  what differs: {self.difference}")
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
class Case:
    """One call of the student's function and its reference answer.

    ``args`` are plain values only: ints, floats, bools, and ``torch.Tensor`` or ``np.ndarray`` of a numeric dtype
    (the grader sends them to the sandbox as ``.npy`` data). ``expected`` is a NumPy array (0-d for a scalar).
    ``exact`` cases compare with ``==``; the others with an absolute tolerance ``atol`` for a float64 answer and
    ``max(atol, atol32)`` for a float32 answer (``atol32=None``: ``FLOAT32_RELATIVE_TOLERANCE`` times the largest
    reference magnitude, at least 1). ``dtypes`` lists the allowed answer dtypes (None: any numeric dtype).
    ``mistakes`` pairs a description with the wrong answer it produces. ``alternatives`` are other answers accepted
    as right (T5's buckets computed with a float64 logarithm differ from T5's float32 ones at a few boundaries).
    ``axes`` name the input each axis of the answer belongs to, for messages: one ``(label, values)`` pair per axis,
    ``values`` the input at each index or None (``("offset", (-200, ..., 200))`` turns index 110 into
    ``offset -90``).
    """

    name: str
    args: tuple[Any, ...]
    expected: np.ndarray
    atol: float = 0.0
    exact: bool = False
    dtypes: tuple[str, ...] | None = FLOAT_DTYPES
    atol32: float | None = None
    mistakes: tuple[tuple[str, np.ndarray], ...] = ()
    hint: str | None = None
    hidden: bool = False
    alternatives: tuple[np.ndarray, ...] = ()
    axes: tuple[tuple[str, tuple[Any, ...] | None], ...] = ()

    def __post_init__(self) -> None:
        check_str("name", self.name)
        if not isinstance(self.args, tuple):
            raise TypeError(f"args must be a tuple, got {type(self.args).__name__}")
        if not isinstance(self.expected, np.ndarray) or self.expected.dtype.kind not in "biuf":
            raise TypeError(f"expected must be a numeric np.ndarray, got {type(self.expected).__name__}")
        check_float("atol", self.atol, minimum=0.0)
        check_bool("exact", self.exact)
        if self.dtypes is not None:
            check_str_sequence("dtypes", self.dtypes, kind=tuple)
        if self.atol32 is not None:
            check_float("atol32", self.atol32, minimum=0.0)
        if not isinstance(self.mistakes, tuple) or not all(
                isinstance(m, tuple) and len(m) == 2 and isinstance(m[0], str) for m in self.mistakes):
            raise TypeError("mistakes must be a tuple of (description, wrong answer) pairs")
        check_optional_str("hint", self.hint)
        check_bool("hidden", self.hidden)
        if not isinstance(self.alternatives, tuple) or not all(
                isinstance(a, np.ndarray) and a.dtype.kind in "biuf" for a in self.alternatives):
            raise TypeError("alternatives must be a tuple of numeric np.ndarray")
        if not isinstance(self.axes, tuple) or not all(
                isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], str) and (a[1] is None or isinstance(a[1], tuple))
                for a in self.axes):
            raise TypeError("axes must be a tuple of (label, values or None) pairs")


@dataclass(frozen=True)
class Outcome:
    """What came back from one call: ``status`` is ``ok`` (``value`` holds the answer), ``stub``
    (NotImplementedError), ``error`` (``error`` holds the exception), ``missing`` (no such function), ``timeout``,
    or ``invalid`` (the answer is not a plain numeric array; ``error`` says why)."""

    status: str
    value: np.ndarray | None = None
    error: str | None = None
    library_called: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_choice("status", self.status, OUTCOME_STATUSES)
        if self.value is not None and not isinstance(self.value, np.ndarray):
            raise TypeError(f"value must be None or an np.ndarray (see to_output), got {type(self.value).__name__}")
        if self.status == "ok" and self.value is None:
            raise ValueError("value must be given when status is 'ok'")
        check_optional_str("error", self.error)
        check_str_sequence("library_called", self.library_called, kind=tuple)


@dataclass(frozen=True)
class Exercise:
    """A registered coding exercise.

    ``id``: stable id; ``function``: the name students define; ``chapter``: the chapter (assignment) whose notebook
    contains it (a notebook's file name without ``.ipynb``); ``check``: ``check(fn) -> CheckReport`` on the visible
    cases; ``description``: one line; ``cases``: ``cases(rng)`` returns the visible cases, followed by hidden
    randomised ones drawn from ``rng`` when it is a ``numpy.random.Generator``; ``library``: dotted names of the
    course_pe functions that implement the exercise (unavailable to the student's code while it is graded).
    """

    id: str
    function: str
    chapter: str
    check: Callable[[Callable[..., Any]], CheckReport]
    description: str
    cases: Callable[[np.random.Generator | None], list[Case]] | None = None
    library: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("id", "function", "chapter", "description"):
            if not check_str(name, getattr(self, name)):
                raise ValueError(f"{name} must not be empty")
        if not self.function.isidentifier():
            raise ValueError(f"function must be a Python identifier, got {self.function!r}")
        check_callable("check", self.check)
        if self.cases is not None:
            check_callable("cases", self.cases)
        check_str_sequence("library", self.library, kind=tuple, nonempty_items=True)


EXERCISES: dict[str, Exercise] = {}


def chapters() -> list[str]:
    """The chapters (assignments) that have coding exercises, in registry order."""
    return list(dict.fromkeys(ex.chapter for ex in EXERCISES.values()))


def exercises_for_chapter(chapter: str) -> list[str]:
    """Ids of the exercises of ``chapter`` (a notebook's file name without ``.ipynb``), in registry order."""
    check_str("chapter", chapter)
    if chapter not in chapters():
        raise ValueError(f"chapter {chapter!r} has no coding exercises; chapters with exercises: {', '.join(chapters())}")
    return [ex.id for ex in EXERCISES.values() if ex.chapter == chapter]


def _register(id: str, function: str, chapter: str, description: str, library: tuple[str, ...] = ()):
    def decorate(cases_fn: Callable[[np.random.Generator | None], list[Case]]):
        def check_fn(fn: Callable[..., Any]) -> CheckReport:
            return check(id, fn)

        check_fn.__name__ = check_fn.__qualname__ = f"check_{id}"
        check_fn.__doc__ = (f"Run the visible cases of exercise ``{id}`` ({description}) on ``fn`` and return the "
                            f"report.\n\n{inspect.cleandoc(cases_fn.__doc__ or '')}")
        EXERCISES[id] = Exercise(id, function, chapter, check_fn, description, cases_fn, library)
        return cases_fn

    return decorate


# --------------------------------------------------------------------------- outputs and verdicts


def to_output(value: Any) -> np.ndarray:
    """Convert what a student's function returned into a plain numeric NumPy array (a copy).

    Tensors are detached and moved to the CPU with their dtype kept; lists, tuples, Python and NumPy numbers go
    through ``np.array``; a 0-d answer stays 0-d (a Python float is an array of shape ``()``), and big-endian data
    is converted to the native byte order. Raises ``TypeError`` for anything that is not numeric (objects, strings,
    ragged lists) and for dtypes NumPy cannot hold (bfloat16, complex). The grader's sandbox uses the same function.
    """
    return _child.to_output(value)


def _fmt(x: Any) -> str:
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    if isinstance(x, (float, np.floating)):
        return f"{float(x):.6g}"
    return str(x)


def _fmt_pair(expected: Any, got: Any) -> tuple[str, str]:
    """``expected`` and ``got`` printed with enough significant digits (6 to 17) to show that they differ:
    ``expected 2, got 2.000001``, never ``expected 2, got 2``."""
    if isinstance(expected, (float, np.floating)) or isinstance(got, (float, np.floating)):
        try:
            e, g = float(expected), float(got)
        except (TypeError, ValueError):
            return _fmt(expected), _fmt(got)
        for digits in (6, 9, 12, 17):
            shown = f"{e:.{digits}g}", f"{g:.{digits}g}"
            if shown[0] != shown[1]:
                return shown
        return shown
    return _fmt(expected), _fmt(got)


def _short(a: np.ndarray, around: int | None = None, limit: int = 6) -> str:
    """A preview: shape, dtype and ``limit`` entries of the flattened array, starting a little before entry
    ``around`` (the first difference) so that the entries shown include it."""
    arr = np.asarray(a)
    if arr.ndim == 0:
        return _fmt(arr.item())
    flat = arr.reshape(-1)
    start = 0 if around is None else max(0, min(around - 2, flat.size - limit))
    shown = flat[start : start + limit]
    body = ", ".join(f"{v:.4f}" if arr.dtype.kind == "f" else str(v) for v in shown)
    before = "..., " if start > 0 else ""
    after = ", ..." if start + limit < flat.size else ""
    where = f" (entries {start} to {start + len(shown) - 1} of {flat.size})" if start > 0 else ""
    return f"shape {tuple(arr.shape)}, dtype {arr.dtype}: [{before}{body}{after}]{where}"


def _is_float64(got: np.ndarray) -> bool:
    return got.dtype.kind == "f" and got.dtype.itemsize >= 8


def _tolerance(case: Case, got: np.ndarray) -> float:
    if _is_float64(got) or case.exact:
        return case.atol
    scale = float(np.max(np.abs(case.expected))) if case.expected.size else 1.0
    floor = case.atol32 if case.atol32 is not None else FLOAT32_RELATIVE_TOLERANCE * max(1.0, scale)
    return max(case.atol, floor)


def _values_match(case: Case, got: np.ndarray, expected: np.ndarray) -> bool:
    if got.shape != expected.shape:
        return False
    if case.exact:  # a float32 answer to an exact case is compared with the reference rounded to float32
        e = expected.astype(got.dtype) if got.dtype.kind == "f" and expected.dtype.kind == "f" else expected
        return bool(np.array_equal(got.astype(np.float64), e.astype(np.float64)))
    g, e = got.astype(np.float64), expected.astype(np.float64)
    return bool(np.all(np.abs(g - e) <= _tolerance(case, got)))


def _where(case: Case, index: tuple[int, ...]) -> str:
    """The input an entry of the answer belongs to, from ``case.axes``: ``offset -90 (entry 110)``,
    ``position 3, dimension 5``; the plain index when the case names no axes."""
    if not index:
        return ""
    if len(case.axes) != len(index):
        return f"index {index}"
    parts = []
    for (template, values), i in zip(case.axes, index):
        value = values[i] if values is not None and 0 <= i < len(values) else i
        parts.append(template.format(i=i, v=value))
    return ", ".join(parts)


def _difference(case: Case, got: np.ndarray) -> tuple[str, int | None] | None:
    """None if ``got`` is a correct answer to ``case``; else what differs (shape, dtype or value, and for a value
    at which input) and the flat index of the first differing entry."""
    e = case.expected
    if got.shape != e.shape:
        return f"shape: expected {tuple(e.shape)}, got {tuple(got.shape)}", None
    if case.dtypes is not None and got.dtype.name not in case.dtypes:
        allowed = "an integer dtype" if case.dtypes == INT_DTYPES else " or ".join(case.dtypes)
        return f"dtype: got {got.dtype.name}; this exercise accepts {allowed}", None
    if _values_match(case, got, e) or any(
            a.shape == got.shape and _values_match(case, got, a) for a in case.alternatives):
        return None
    g, r = got.astype(np.float64), e.astype(np.float64)
    if case.exact and got.dtype.kind == "f" and e.dtype.kind == "f":
        r = e.astype(got.dtype).astype(np.float64)
    bad = ~np.isfinite(g) | (g != r) if case.exact else ~(np.abs(g - r) <= _tolerance(case, got))
    index = tuple(int(i) for i in np.argwhere(bad)[0]) if e.ndim else ()
    flat = int(np.ravel_multi_index(index, e.shape)) if e.ndim else None
    where = f" at {_where(case, index)}" if index else ""
    n_bad = int(np.count_nonzero(bad))
    total = f" ({n_bad} of {e.size} entries differ)" if e.ndim else ""
    shown_e, shown_g = _fmt_pair(e[index], got[index])
    if case.exact:
        return f"value{where}: expected {shown_e}, got {shown_g}{total}", flat
    return (f"value{where}: expected {shown_e}, got {shown_g} (difference "
            f"{abs(g[index] - r[index]):.3g}, tolerance {_tolerance(case, got):.1g} for {got.dtype.name}){total}",
            flat)


def judge(exercise: str, cases: Sequence[Case], outcomes: Sequence[Outcome | None]) -> CheckReport:
    """The verdict on ``outcomes[i]`` (what came back for ``cases[i]``; None: not run). Never raises."""
    check_str("exercise", exercise)
    if isinstance(cases, (str, bytes)) or not isinstance(cases, Sequence) \
            or not all(isinstance(c, Case) for c in cases):
        raise TypeError(f"cases must be a sequence of Case, got {type(cases).__name__}")
    if isinstance(outcomes, (str, bytes)) or not isinstance(outcomes, Sequence) \
            or not all(o is None or isinstance(o, Outcome) for o in outcomes):
        raise TypeError(f"outcomes must be a sequence of Outcome or None, got {type(outcomes).__name__}")
    if len(outcomes) != len(cases):
        raise ValueError(f"outcomes must have one entry per case: {len(cases)} cases, {len(outcomes)} outcomes")
    total = len(cases)
    called = sorted({name for o in outcomes if o is not None for name in o.library_called})
    for n, (case, outcome) in enumerate(zip(cases, outcomes), start=1):
        base = {"failed_case": case.name, "hidden": case.hidden, "library_called": called}
        if outcome is None:
            return CheckReport(exercise, False, n, total, error="this case was not run", **base)
        if outcome.status == "missing":
            return CheckReport(exercise, False, 0, total, failed_case="looking up the function",
                               error=outcome.error, hint="define the function with the signature given in the exercise",
                               library_called=called)
        if outcome.status == "stub":
            return CheckReport(exercise, False, n, total, error="NotImplementedError",
                               hint="the function is still a stub: replace `raise NotImplementedError` with your code",
                               **base)
        if outcome.status == "timeout":
            return CheckReport(exercise, False, n, total, error=outcome.error or "time limit exceeded", **base)
        if outcome.status == "error":
            return CheckReport(exercise, False, n, total, error=outcome.error, hint=case.hint, **base)
        if outcome.status != "ok" or outcome.value is None:
            return CheckReport(exercise, False, n, total, difference=f"type: {outcome.error}", hint=case.hint, **base)
        got = outcome.value
        try:
            found = _difference(case, got)
        except Exception as exc:  # a bug here must not take the grader down
            found = f"the answer could not be compared ({type(exc).__name__}: {exc})", None
        if found is None:
            continue
        difference, flat = found
        mistake = None
        for description, wrong in case.mistakes if difference.startswith("value") else ():
            try:
                if _values_match(case, got, np.asarray(wrong)):
                    mistake = description
                    break
            except Exception:
                pass
        return CheckReport(exercise, False, n, total, expected=_short(case.expected, flat), got=_short(got, flat),
                           mistake=mistake, hint=case.hint, difference=difference, **base)
    if called:  # every value right, but through the library
        return CheckReport(exercise, False, total, total, failed_case="the whole exercise",
                           error="the library's implementation was called", library_called=called)
    return CheckReport(exercise, True, total, total)


def fresh_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Copies of ``args`` (the student's function may modify its inputs in place)."""
    return _child.fresh_args(args)


def call_case(fn: Callable[..., Any], args: tuple[Any, ...]) -> Outcome:
    """Call ``fn(*args)`` (on copies) and turn the result or the exception into an :class:`Outcome`.

    ``fn`` must be callable and ``args`` a tuple (``TypeError`` otherwise); what ``fn`` raises or returns is the
    student's and never raises here. The grader's sandbox runs the same code."""
    check_callable("fn", fn)
    if not isinstance(args, tuple):
        raise TypeError(f"args must be a tuple, got {type(args).__name__}")
    status, value, error = _child.run_call(fn, args)
    return Outcome(status, value, error)


def check(exercise_id: str, fn: Callable[..., Any] | None, *, hidden: bool = False, seed: int | None = None) -> CheckReport:
    """Run the cases of ``exercise_id`` on ``fn`` here, in this process (never raises for the student's errors; an
    unknown id is a ``ValueError``). ``fn=None`` (the function is not defined, e.g. its cell was deleted) gives a
    failed report that says so.

    By default only the visible cases run: feedback for the student. ``hidden=True`` adds the randomised hidden
    cases, drawn from ``seed`` (default: a fresh secret seed, so nobody can know them in advance); nbgrader's hidden
    tests use this. The grade itself comes from the grader, which runs the same cases in a sandbox.
    """
    check_str("exercise_id", exercise_id)
    check_bool("hidden", hidden)
    if seed is not None:
        check_int("seed", seed, minimum=0)
    if exercise_id not in EXERCISES:
        raise ValueError(f"unknown exercise {exercise_id!r} (exercise_id); known: {', '.join(sorted(EXERCISES))}")
    exercise = EXERCISES[exercise_id]
    rng = np.random.default_rng(secrets.randbits(64) if seed is None else seed) if hidden else None
    try:
        cases = exercise.cases(rng) if exercise.cases else []
    except Exception:  # a bug in a check must not take the notebook down
        return CheckReport(exercise_id, False, 0, 0, "building the cases", error=traceback.format_exc(limit=2))
    if fn is None:
        outcomes = [Outcome("missing", error=f"no function named `{exercise.function}` is defined (was its cell "
                                             "deleted, renamed or not run?)")] * len(cases)
    elif not callable(fn):
        outcomes = [Outcome("missing", error=f"{type(fn).__name__} object is not callable")] * len(cases)
    else:
        outcomes = []
        for case in cases:
            outcome = call_case(fn, case.args)
            outcomes.append(outcome)
            if outcome.status != "ok":
                break
        outcomes += [None] * (len(cases) - len(outcomes))
    return judge(exercise_id, cases, outcomes)


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
    else:  # the half layout: all sines, then all cosines
        out[:, : d // 2], out[:, d // 2 :] = s, c
    return out


def _even(rng: np.random.Generator, low: int, high: int) -> int:
    return 2 * int(rng.integers(low // 2, high // 2 + 1))


# Hidden cases. They are drawn by the grader from wide ranges with a seed nobody knows in advance (a fresh secret per
# grading), so that no table of answers written into a notebook can cover them: every exercise with integer
# parameters draws at least one hidden case from a range of thousands of values (see the instructor guide).
HIDDEN_CASES = 3


# --------------------------------------------------------------------------- Part I


@_register("sinusoidal_table", "sinusoidal_table", "sinusoidal",
           "the (num_positions, d_model) sinusoidal table, interleaved",
           library=("course_pe.sinusoidal.sinusoidal_encoding", "course_pe.sinusoidal.sinusoidal_encoding_np",
                    "course_pe.sinusoidal.SinusoidalPositionalEncoding.forward"))
def _sinusoidal_table_cases(rng: np.random.Generator | None) -> list[Case]:
    """``fn(num_positions, d_model)`` must return the interleaved sinusoidal table (base 10000).
    Hidden cases: ``num_positions`` in 2 ... 200, ``d_model`` even in 2 ... 256."""
    sizes = [(1, 2, False), (10, 4, False), (50, 16, False), (7, 128, False)]
    if rng is not None:
        sizes += [(int(rng.integers(2, 201)), _even(rng, 2, 256), True) for _ in range(HIDDEN_CASES)]
    cases = []
    for n, d, hidden in sizes:
        cases.append(Case(
            f"sinusoidal_table({n}, {d})", (n, d), _table(n, d), atol=1e-5, hidden=hidden,
            atol32=2e-5 + 3e-7 * n,  # a float32 angle p * w carries an error of about p * 6e-8
            axes=(("position {i}", None), ("dimension {i}", None)),
            mistakes=(
                ("the cosine uses exponent (2i+1)/d_model; sine and cosine of one pair share the frequency "
                 "base^(-2i/d_model) (the error of source 002, 7.3.2)", _table(n, d, exponent="2i+1 for cos")),
                ("fast and slow dimensions are swapped: dimension 0 must have frequency 1 (wavelength 2*pi) and the "
                 "last pair the lowest frequency", _table(n, d, exponent="swapped")),
                ("the exponent is i/d_model; with i the pair index it must be 2i/d_model", _table(n, d, exponent="no 2")),
                ("positions are multiplied by base^(2i/d_model); they must be divided by it", _table(n, d, exponent="multiply")),
                ("this is the half layout (all sines, then all cosines); this exercise asks for the interleaved "
                 "layout (sin at 2i, cos at 2i+1)", _table(n, d, layout="half")),
            ),
            hint="PE[p, 2i] = sin(p / 10000**(2i/d_model)), PE[p, 2i+1] = cos(p / 10000**(2i/d_model)), "
            "with i the pair index 0 ... d_model/2 - 1",
        ))
    return cases


def _shift(k: float, d: int, base: float = 10000.0, transpose: bool = False) -> np.ndarray:
    omega = base ** (-2 * np.arange(d // 2) / d)
    m = np.zeros((d, d))
    for i, w in enumerate(omega):
        c, s = math.cos(k * w), math.sin(k * w)
        block = np.array([[c, s], [-s, c]])
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = block.T if transpose else block
    return m


@_register("shift_matrix", "shift_matrix", "shift_theorem", "the matrix M_k with PE(p + k) = M_k PE(p)",
           library=("course_pe.sinusoidal.shift_matrix",))
def _shift_matrix_cases(rng: np.random.Generator | None) -> list[Case]:
    """``fn(k, d_model)`` must return ``M_k`` (interleaved layout) with ``PE(p + k) = M_k @ PE(p)``.
    Hidden cases: ``k`` in -2000 ... 2000, ``d_model`` even in 2 ... 64."""
    sizes = [(0, 2, False), (1, 2, False), (3, 8, False), (-5, 8, False), (100, 16, False)]
    if rng is not None:
        sizes += [(int(rng.integers(-2000, 2001)), _even(rng, 2, 64), True) for _ in range(HIDDEN_CASES)]
    return [
        Case(f"shift_matrix({k}, {d})", (k, d), _shift(k, d), atol=1e-6, atol32=1e-4 + 1.2e-7 * abs(k),
             hidden=hidden, axes=(("row {i}", None), ("column {i}", None)),
             mistakes=(("your matrix shifts by -k: the 2x2 blocks are transposed (the sin entries have the wrong "
                        "signs)", _shift(k, d, transpose=True)),),
             hint="block i acts on (sin, cos) = (PE[2i], PE[2i+1]); expand sin((p+k)w) and cos((p+k)w) with the "
             "angle-addition formulas")
        for k, d, hidden in sizes
    ]


@_register("add_positional_encoding", "add_positional_encoding", "model_input",
           "add the sinusoidal table to a batch-first input, with the sqrt(d_model) scale",
           library=("course_pe.sinusoidal.SinusoidalPositionalEncoding.forward",))
def _add_positional_encoding_cases(rng: np.random.Generator | None) -> list[Case]:
    """``fn(embeddings)`` with ``embeddings`` of shape ``(batch, seq, d_model)`` (float64 tensor) must return
    ``sqrt(d_model) * embeddings + PE[:seq]`` (interleaved table, base 10000).
    Hidden cases: random embeddings, batch 1 ... 4, seq 1 ... 64, ``d_model`` even in 2 ... 64."""
    g = np.random.default_rng(0)
    sizes = [(1, 1, 4, False), (2, 5, 8, False), (3, 7, 16, False), (1, 12, 6, False)]
    if rng is not None:
        sizes += [(int(rng.integers(1, 5)), int(rng.integers(1, 65)), _even(rng, 2, 64), True)
                  for _ in range(HIDDEN_CASES)]
    cases = []
    for b, s, d, hidden in sizes:
        x = (rng if hidden else g).standard_normal((b, s, d))
        table = _table(s, d)
        seq_first_bug = math.sqrt(d) * x + _table(b, d)[:, None, :]  # pe[:batch] broadcast over the sequence
        cases.append(Case(
            f"embeddings of shape ({b}, {s}, {d})", (torch.from_numpy(x),), math.sqrt(d) * x + table, atol=1e-6,
            hidden=hidden, axes=(("sequence {i} of the batch", None), ("position {i}", None), ("dimension {i}", None)),
            mistakes=(
                ("the table was indexed with the batch size: a (max_len, 1, d) table sliced with x.size(0) and added "
                 "to a batch-first input gives every position the encoding of position 0..batch-1 (the silent bug "
                 "of source 003, 5.2)", seq_first_bug),
                ("the embeddings are not scaled by sqrt(d_model)", x + table),
                ("the embeddings are divided, not multiplied, by sqrt(d_model)", x / math.sqrt(d) + table),
            ),
            hint="the sequence axis of a batch-first input is dimension 1; broadcast PE[:seq] over the batch",
        ))
    return cases


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


@_register("rope_rotation", "rope_rotation", "rope_implementation", "rotate (seq, head_dim) vectors by RoPE, interleaved",
           # every copy of the rotation in the library: the public ones, the transformers-exact float32 path, and the
           # benchmark's variants (complex_rope on interleaved pairs is the answer itself)
           library=("course_pe.rope.apply_rope", "course_pe.rope.rotate_with_cos_sin",
                    "course_pe.rope.RotaryEmbedding.forward", "course_pe.rope._reference_rotation",
                    "course_pe.benchmark._one_pass_interleaved", "course_pe.benchmark._one_pass_half",
                    "course_pe.benchmark.textbook_rope", "course_pe.benchmark.complex_rope",
                    "course_pe.rope._rotate", "course_pe._rope_triton.rotate", "course_pe.benchmark._textbook",
                    "course_pe.benchmark._complex"))
def _rope_rotation_cases(rng: np.random.Generator | None) -> list[Case]:
    """``fn(x, positions)``: ``x`` a float64 tensor of shape ``(seq, head_dim)``, ``positions`` a ``(seq,)`` long
    tensor; returns the interleaved RoPE rotation with base 10000.
    Hidden cases: random vectors, seq 1 ... 16, ``head_dim`` even in 2 ... 64, positions in 0 ... 4096 in any order."""
    g = np.random.default_rng(1)
    sizes = [(1, 2, [0], False), (3, 2, [0, 1, 2], False), (4, 8, [0, 5, 17, 1000], False),
             (5, 64, [3, 1, 4, 1, 5], False)]
    if rng is not None:
        for _ in range(HIDDEN_CASES):
            seq = int(rng.integers(1, 17))
            sizes.append((seq, _even(rng, 2, 64), [int(p) for p in rng.integers(0, 4097, seq)], True))
    cases = []
    for seq, d, pos, hidden in sizes:
        xn, pn = (rng if hidden else g).standard_normal((seq, d)), np.asarray(pos, dtype=np.float64)
        scale = max(1.0, float(np.max(np.abs(xn))))
        cases.append(Case(
            f"x of shape ({seq}, {d}), positions {pos}", (torch.from_numpy(xn), torch.tensor(pos)), _rope(xn, pn),
            # a float32 angle p * theta carries an error of about p * 6e-8 radians
            atol=1e-6, atol32=5e-4 + 3e-7 * max(pos) * scale, hidden=hidden,
            axes=(("position {v} (row {i})", tuple(pos)), ("dimension {i}", None)),
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
        ))
    return cases


def _t5_buckets(relative_position: torch.Tensor, bidirectional: bool, num_buckets: int, max_distance: int,
                log_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """T5's bucket function, transcribed (not imported) from its published implementation: Mesh TensorFlow
    ``transformer/attention.py::_relative_position_bucket`` as ported to PyTorch by Hugging Face
    (``transformers/models/t5/modeling_t5.py``, ``T5Attention._relative_position_bucket``). Same operations in the
    same order, float32 logarithm included, so that a correct student answer written the usual way matches exactly
    (``log_dtype=torch.float64`` gives the accepted alternative). ``relative_position`` is ``key - query``; written
    independently of ``course_pe.t5``."""
    ret = torch.zeros_like(relative_position)
    n = -relative_position
    if bidirectional:
        num_buckets //= 2
        ret = ret + (n < 0).to(torch.long) * num_buckets
        n = torch.abs(n)
    else:
        n = torch.max(n, torch.zeros_like(n))
    max_exact = num_buckets // 2
    is_small = n < max_exact
    val_if_large = max_exact + (
        torch.log(n.to(log_dtype) / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    ).to(torch.long)
    val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
    return ret + torch.where(is_small, n, val_if_large)


@_register("t5_bucket", "t5_bucket", "relative", "T5 relative-position buckets for key - query",
           library=("course_pe.t5.t5_relative_position_bucket", "course_pe.t5.T5RelativeBias.forward"))
def _t5_bucket_cases(rng: np.random.Generator | None) -> list[Case]:
    """``fn(relative_position, bidirectional, num_buckets, max_distance)`` for a long tensor of ``key - query``
    offsets; returns bucket ids (an integer tensor) like T5.
    Hidden cases: ``num_buckets`` even in 4 ... 128, ``max_distance`` from just above the exact range to
    32 * ``num_buckets``, 300 offsets in -4 ``max_distance`` ... 4 ``max_distance`` (with the boundaries)."""
    settings: list[tuple[bool, int, int, torch.Tensor, bool]] = [
        (True, 32, 128, torch.arange(-200, 201), False), (False, 32, 128, torch.arange(-200, 201), False),
        (True, 8, 20, torch.arange(-200, 201), False)]
    if rng is not None:
        for _ in range(HIDDEN_CASES):
            nb = _even(rng, 4, 128)
            bidirectional = bool(rng.integers(0, 2))
            exact = (nb // 2 if bidirectional else nb) // 2
            md = int(rng.integers(exact + 1, 32 * nb + 1))
            special = [0, 1, -1, exact, -exact, exact - 1, 1 - exact, md, -md, md + 1, -md - 1]
            offsets = np.unique(np.concatenate([rng.integers(-4 * md, 4 * md + 1, 300), special]))
            settings.append((bidirectional, nb, md, torch.from_numpy(offsets.astype(np.int64)), True))
    cases = []
    for bidirectional, nb, md, rel, hidden in settings:
        expected = _t5_buckets(rel, bidirectional, nb, md).numpy()
        float64_log = _t5_buckets(rel, bidirectional, nb, md, log_dtype=torch.float64).numpy()
        flipped = _t5_buckets(-rel, bidirectional, nb, md).numpy()
        shown = f"offsets {int(rel[0])} ... {int(rel[-1])}" if not hidden else \
            f"{rel.numel()} offsets in {int(rel[0])} ... {int(rel[-1])}"
        cases.append(Case(
            f"{shown}, bidirectional={bidirectional}, num_buckets={nb}, max_distance={md}",
            (rel, bidirectional, nb, md), expected, exact=True, dtypes=INT_DTYPES, hidden=hidden,
            alternatives=(float64_log,) if not np.array_equal(float64_log, expected) else (),
            axes=(("offset {v} (entry {i})", tuple(int(r) for r in rel)),),
            mistakes=(("you used query - key; the convention here (and T5's) is relative_position = key - query",
                       flipped),),
            hint="exact buckets below num_buckets/4 (bidirectional) or /2 (causal), then logarithmic up to "
            "max_distance, then the last bucket; keys to the right get the upper half when bidirectional",
        ))
    return cases


def _alibi(n: int) -> list[float]:
    def pow2(m: int) -> list[float]:
        return [2.0 ** (-8.0 * (k + 1) / m) for k in range(m)]

    closest = 2 ** int(math.floor(math.log2(n)))
    return pow2(closest) + (pow2(2 * closest)[0::2][: n - closest] if closest != n else [])


@_register("alibi_slopes", "alibi_slopes", "relative", "ALiBi head slopes, including non-powers of two",
           library=("course_pe.alibi.alibi_slopes",))
def _alibi_slopes_cases(rng: np.random.Generator | None) -> list[Case]:
    """``fn(num_heads)`` returns the ``num_heads`` ALiBi slopes of Press et al. (a list or a 1-D tensor).
    Hidden cases: one head count in 3 ... 64, the others in 65 ... 4096."""
    counts = [(n, False) for n in (1, 2, 8, 16, 6, 12, 20)]
    if rng is not None:
        counts.append((int(rng.integers(3, 65)), True))
        counts += [(int(rng.integers(65, 4097)), True) for _ in range(HIDDEN_CASES - 1)]
    return [
        Case(f"alibi_slopes({n})", (n,), np.asarray(_alibi(n)), atol=1e-9, hidden=hidden, axes=(("head {i}", None),),
             mistakes=(("you used 2^(-8(h+1)/n) for every n; for head counts that are not powers of two Press et al. "
                        "take the slopes of the nearest lower power of two, then every other slope of the next one",
                        np.asarray([2.0 ** (-8.0 * (k + 1) / n) for k in range(n)])),),
             hint="for a power of two n the slopes are 2^(-8/n), 2^(-16/n), ..., 2^(-8)")
        for n, hidden in counts
    ]


@_register("half_to_interleaved", "half_to_interleaved", "rope_implementation",
           "reorder the last dimension from pairs (i, i + d/2) to pairs (2i, 2i + 1)",
           library=("course_pe.rope.half_to_interleaved", "course_pe.rope.layout_permutation"))
def _half_to_interleaved_cases(rng: np.random.Generator | None) -> list[Case]:
    """``fn(x)`` reorders the last dimension of the float64 tensor ``x`` from the half layout to the interleaved
    layout (values must be moved exactly).
    Hidden cases: random values, 0 to 2 leading dimensions of 1 ... 4, a last dimension even in 2 ... 256."""
    shapes = [((2,), False), ((4,), False), ((3, 8), False), ((2, 3, 6), False)]
    if rng is not None:
        for _ in range(HIDDEN_CASES):
            leading = tuple(int(n) for n in rng.integers(1, 5, int(rng.integers(0, 3))))
            shapes.append((leading + (_even(rng, 2, 256),), True))
    cases = []
    for shape, hidden in shapes:
        d = shape[-1]
        x = rng.standard_normal(shape) if hidden else np.arange(math.prod(shape), dtype=np.float64).reshape(shape)
        h = d // 2
        expected = np.stack([x[..., :h], x[..., h:]], axis=-1).reshape(shape)
        inverse = np.concatenate([x[..., 0::2], x[..., 1::2]], axis=-1)
        axes = tuple((f"index {{i}} of axis {k}", None) for k in range(len(shape) - 1)) + (("output dimension {i}", None),)
        cases.append(Case(f"x of shape {shape}", (torch.from_numpy(x),), expected, exact=True, hidden=hidden,
                          axes=axes, mistakes=(("this is the inverse permutation (interleaved -> half)", inverse),),
                          hint="output dimension 2i is input dimension i, output 2i+1 is input i + d/2"))
    return cases


# --------------------------------------------------------------------------- Part III


@_register("extrapolation_gap", "extrapolation_gap", "extrapolation",
           "mean loss beyond the training length minus mean loss within it")
def _extrapolation_gap_cases(rng: np.random.Generator | None) -> list[Case]:
    """``fn(loss_by_position, train_length)``: mean loss at positions ``>= train_length`` minus the mean at
    positions ``< train_length``, as a Python float; NaN entries (unscored positions) are ignored.
    Hidden cases: random losses, ``train_length`` in 2 ... 500, 1 ... 500 positions beyond it, a few NaN."""
    data = [([1.0, 1.0, 2.0, 4.0], 2, False), ([3.0, 1.0, 1.0, 1.0, 1.0, 1.0], 3, False),
            ([float("nan"), 2.0, 2.0, 5.0, 5.0], 3, False)]
    if rng is not None:
        for _ in range(HIDDEN_CASES):
            length = int(rng.integers(2, 501))
            losses = rng.uniform(0.5, 5.0, length + int(rng.integers(1, 501)))
            for part, size in ((0, length), (length, losses.size - length)):
                if size >= 3:  # some unscored positions, never all of a part
                    losses[part + rng.choice(size, size=int(rng.integers(1, size // 2 + 1)), replace=False)] = np.nan
            data.append(([float(v) for v in losses], length, True))
    cases = []
    for losses, length, hidden in data:
        t = np.asarray(losses, dtype=np.float64)
        expected = np.nanmean(t[length:]) - np.nanmean(t[:length])
        off_by_one = np.nanmean(t[length - 1 :]) - np.nanmean(t[: length - 1])
        shown = f"losses {[round(v, 3) for v in losses]}" if not hidden else \
            f"{t.size} random losses ({int(np.isnan(t).sum())} NaN)"
        cases.append(Case(
            f"{shown}, train_length {length}", (torch.from_numpy(t), length), np.asarray(expected), atol=1e-9,
            hidden=hidden,
            mistakes=(("off by one: positions 0 ... L-1 were seen in training, position L is the first unseen one",
                       np.asarray(off_by_one)),),
            hint="positions are 0-based; ignore NaN with torch.nanmean",
        ))
    return cases


check_sinusoidal_table = EXERCISES["sinusoidal_table"].check
check_shift_matrix = EXERCISES["shift_matrix"].check
check_add_positional_encoding = EXERCISES["add_positional_encoding"].check
check_rope_rotation = EXERCISES["rope_rotation"].check
check_t5_bucket = EXERCISES["t5_bucket"].check
check_alibi_slopes = EXERCISES["alibi_slopes"].check
check_half_to_interleaved = EXERCISES["half_to_interleaved"].check
check_extrapolation_gap = EXERCISES["extrapolation_gap"].check
