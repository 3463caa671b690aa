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

**One judge, one truth.** The notebook's check and the grader decide by the same rule (:func:`judge`) on the same
kinds of cases: the visible cases include the largest sizes the hidden ones reach. Each exercise has one tolerance,
stated in its text (``Exercise.tolerance``), set by what the exercise asks for and by the precision a reasonable
implementation reaches (float32 arithmetic cast to float64 included), never by the dtype the answer is returned in.
What the grader refuses, the check refuses with the same sentence: a call of the library functions the exercise asks
students to write (watched while the function runs, and looked up in the cell that defines it), and modules that the
grading environment does not have (``course_pe.coursework.environment``).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import linecache
import math
import os
import secrets
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from . import _child
from .environment import unavailable_module, unavailable_sentence
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
    "TOLERANCES",
    "Case",
    "CheckReport",
    "Exercise",
    "Outcome",
    "call_case",
    "chapters",
    "check",
    "check_add_positional_encoding",
    "check_alibi_slopes",
    "check_convert_qk_weight",
    "check_extrapolation_gap",
    "check_half_to_interleaved",
    "check_rope_rotation",
    "check_shift_matrix",
    "check_sinusoidal_table",
    "check_t5_bucket",
    "check_t5_position_bias",
    "exercises_for_chapter",
    "judge",
    "library_sentence",
    "to_output",
    "tolerance_text",
]

FLOAT_DTYPES = ("float32", "float64")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
#: the statuses of an :class:`Outcome`
OUTCOME_STATUSES = ("ok", "stub", "error", "missing", "timeout", "invalid")
#: the grader's default time for the calls of one exercise, all its cases together (``--call-timeout``): the notebook's
#: check fails an answer whose visible cases alone take longer, and adds a note when they take a third of it
CALL_TIMEOUT = 60.0
#: The set-up the grader runs before a submission's answer cells, the imports the exercises may use (the same as the
#: set-up cell of the nbgrader release). Its ``course_pe`` is the grading build, without the functions being graded.
GRADING_SETUP = "import math\n\nimport numpy as np\nimport torch\n\nimport course_pe as cpe\n"


def tolerance_text(tolerance: float) -> str:
    """A tolerance as the exercises' texts write it: ``1e-4``, ``5e-3``."""
    mantissa, exponent = f"{check_float('tolerance', tolerance, minimum=0.0, strict_minimum=True):.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def library_sentence(names: Sequence[str]) -> str:
    """The one sentence the notebook's check and the grader give when a submission uses a library function that the
    exercise asks students to write themselves (absent from the ``course_pe`` a graded submission imports).
    ``names``: a list or tuple of dotted names."""
    kind = tuple if isinstance(names, tuple) else list
    shown = ", ".join(check_str_sequence("names", names, kind=kind, nonempty_items=True))
    return (f"your answer uses {shown}, which this exercise does not allow: implement it yourself (when your work is "
            "graded, course_pe does not have it)")


@dataclass
class CheckReport:
    """The outcome of one check. ``passed`` is True only if every case passed.

    ``difference`` says what differed (shape, dtype or value, and where); ``mistake`` names a classic mistake when
    the answer matches one; ``hidden`` is True when the failed case is one of the grader's hidden cases;
    ``library_called`` lists the course_pe functions the submission used although the exercise does not allow them;
    ``unavailable`` the modules it used that the grading environment does not have; ``note`` says something the
    student should know although nothing failed (a function close to the grader's time limit).
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
    unavailable: list[str] = field(default_factory=list)
    note: str | None = None

    def __post_init__(self) -> None:
        check_str("exercise", self.exercise)
        check_bool("passed", self.passed)
        check_int("cases_run", self.cases_run, minimum=0)
        check_int("cases_total", self.cases_total, minimum=0)
        if self.cases_run > self.cases_total:
            raise ValueError(f"cases_run ({self.cases_run}) must be <= cases_total ({self.cases_total})")
        for name in ("failed_case", "expected", "got", "mistake", "hint", "error", "difference", "note"):
            check_optional_str(name, getattr(self, name))
        check_bool("hidden", self.hidden)
        check_str_sequence("library_called", self.library_called)
        check_str_sequence("unavailable", self.unavailable)

    @property
    def score(self) -> float:
        return 1.0 if self.passed else 0.0

    def __str__(self) -> str:
        if self.passed:
            passed = f"[{self.exercise}] PASSED: all {self.cases_total} cases correct."
            return passed + (f"\n  note: {self.note}" if self.note else "")
        which = "hidden case" if self.hidden else "case"
        lines = [f"[{self.exercise}] FAILED on {which} {self.cases_run} of {self.cases_total}: {self.failed_case}"
                 if self.cases_run else f"[{self.exercise}] FAILED before any case ran: {self.failed_case}"]
        if self.library_called:
            lines.append(f"  {library_sentence(self.library_called)}")
        if self.unavailable:
            lines.append(f"  {unavailable_sentence(self.unavailable)}")
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
        if self.note:
            lines.append(f"  note: {self.note}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"score": self.score}


@dataclass(frozen=True)
class Case:
    """One call of the student's function and its reference answer.

    ``args`` are plain values only: ints, floats, bools, and ``torch.Tensor`` or ``np.ndarray`` of a numeric dtype
    (the grader sends them to the sandbox as ``.npy`` data). ``expected`` is a NumPy array (0-d for a scalar).
    A float answer is right when every entry is within ``atol`` of ``expected``, whatever dtype it is returned in (the
    exercise's tolerance, stated in its text). ``exact`` cases (integers) compare with ``==``; where the reference
    itself is uncertain (T5's buckets at a logarithm that lands on a bucket boundary, where float32 and float64
    round differently) ``lower`` and ``upper`` give the range accepted for each entry. ``dtypes`` lists the allowed
    answer dtypes (None: any numeric dtype). ``mistakes`` pairs a description with the wrong answer it produces.
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
    mistakes: tuple[tuple[str, np.ndarray], ...] = ()
    hint: str | None = None
    hidden: bool = False
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
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
        if not isinstance(self.mistakes, tuple) or not all(
                isinstance(m, tuple) and len(m) == 2 and isinstance(m[0], str) for m in self.mistakes):
            raise TypeError("mistakes must be a tuple of (description, wrong answer) pairs")
        check_optional_str("hint", self.hint)
        check_bool("hidden", self.hidden)
        for name in ("lower", "upper"):
            bound = getattr(self, name)
            if bound is None:
                continue
            if not isinstance(bound, np.ndarray) or bound.dtype.kind not in "biu":
                raise TypeError(f"{name} must be None or an integer np.ndarray, got {type(bound).__name__}")
            if bound.shape != self.expected.shape:
                raise ValueError(f"{name} must have the shape of expected {self.expected.shape}, got {bound.shape}")
            if not self.exact:
                raise ValueError(f"{name} is for exact (integer) cases only")
        if (self.lower is None) != (self.upper is None):
            raise ValueError("lower and upper must be given together")
        if self.lower is not None and not (np.all(self.lower <= self.expected) and np.all(self.expected <= self.upper)):
            raise ValueError("expected must lie within [lower, upper]")
        if not isinstance(self.axes, tuple) or not all(
                isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], str) and (a[1] is None or isinstance(a[1], tuple))
                for a in self.axes):
            raise TypeError("axes must be a tuple of (label, values or None) pairs")


@dataclass(frozen=True)
class Outcome:
    """What came back from one call: ``status`` is ``ok`` (``value`` holds the answer), ``stub``
    (NotImplementedError), ``error`` (``error`` holds the exception), ``missing`` (no such function), ``timeout``,
    or ``invalid`` (the answer is not a plain numeric array; ``error`` says why). ``library_called``: the library
    functions the exercise does not allow that the call used; ``unavailable``: the modules it used that grading
    lacks."""

    status: str
    value: np.ndarray | None = None
    error: str | None = None
    library_called: tuple[str, ...] = ()
    unavailable: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_choice("status", self.status, OUTCOME_STATUSES)
        if self.value is not None and not isinstance(self.value, np.ndarray):
            raise TypeError(f"value must be None or an np.ndarray (see to_output), got {type(self.value).__name__}")
        if self.status == "ok" and self.value is None:
            raise ValueError("value must be given when status is 'ok'")
        check_optional_str("error", self.error)
        check_str_sequence("library_called", self.library_called, kind=tuple)
        check_str_sequence("unavailable", self.unavailable, kind=tuple)


@dataclass(frozen=True)
class Exercise:
    """A registered coding exercise.

    ``id``: stable id; ``function``: the name students define; ``chapter``: the chapter (assignment) whose notebook
    contains it (a notebook's file name without ``.ipynb``); ``check``: ``check(fn) -> CheckReport`` on the visible
    cases; ``description``: one line; ``cases``: ``cases(rng)`` returns the visible cases, followed by hidden
    randomised ones drawn from ``rng`` when it is a ``numpy.random.Generator``; ``library``: dotted names of the
    course_pe functions that implement the exercise (unavailable to the student's code while it is graded, refused by
    the notebook's check); ``tolerance``: the largest difference accepted in every entry of a float answer, whatever
    its dtype, as the exercise's text states it (None: the answer is compared exactly).
    """

    id: str
    function: str
    chapter: str
    check: Callable[[Callable[..., Any]], CheckReport]
    description: str
    cases: Callable[[np.random.Generator | None], list[Case]] | None = None
    library: tuple[str, ...] = ()
    tolerance: float | None = None
    #: code run after the answer cells that rebinds ``function`` to a function of the cases' plain arguments, for an
    #: exercise whose function takes objects (a module, a cache); see ``exercises_generation.py``
    harness: str = ""

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
        if self.tolerance is not None:
            check_float("tolerance", self.tolerance, minimum=0.0, strict_minimum=True)
        check_str("harness", self.harness)

    def adapt(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` as the cases call it: through the exercise's harness when it has one (run here, in this process),
        else ``fn`` itself (a callable)."""
        check_callable("fn", fn)
        if not self.harness:
            return fn
        namespace: dict[str, Any] = {self.function: fn}
        exec(compile(self.harness, f"<harness of {self.id}>", "exec"), namespace)  # noqa: S102 - the course's code
        return namespace[self.function]


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


def _register(id: str, function: str, chapter: str, description: str, library: tuple[str, ...] = (),
              tolerance: float | None = None):
    def decorate(cases_fn: Callable[[np.random.Generator | None], list[Case]]):
        def check_fn(fn: Callable[..., Any]) -> CheckReport:
            return check(id, fn)

        check_fn.__name__ = check_fn.__qualname__ = f"check_{id}"
        check_fn.__doc__ = (f"Run the visible cases of exercise ``{id}`` ({description}) on ``fn`` and return the "
                            f"report.\n\n{inspect.cleandoc(cases_fn.__doc__ or '')}")
        EXERCISES[id] = Exercise(id, function, chapter, check_fn, description, cases_fn, library, tolerance)
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


def _bad_entries(case: Case, got: np.ndarray, reference: np.ndarray, bounds: bool = True) -> np.ndarray:
    """A boolean array: the entries of ``got`` that are wrong against ``reference`` (same shape) by ``case``'s rule:
    within ``case.atol`` whatever the dtype, or, for an exact case, equal (within ``[lower, upper]`` when ``bounds``
    and the case has them). Non-finite entries are wrong."""
    g, r = got.astype(np.float64), reference.astype(np.float64)
    if case.exact:
        if bounds and case.lower is not None and case.upper is not None:
            return ~np.isfinite(g) | (g < case.lower) | (g > case.upper)
        return ~np.isfinite(g) | (g != r)
    return ~(np.abs(g - r) <= case.atol)


def _values_match(case: Case, got: np.ndarray, reference: np.ndarray, bounds: bool = True) -> bool:
    if got.shape != reference.shape:
        return False
    return not bool(np.any(_bad_entries(case, got, reference, bounds)))


def _unit_axes_as_expected(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """``got`` in the shape of ``expected`` when the two differ only by axes of length 1 (a table returned with the
    leading batch axis of ``pe.unsqueeze(0)``, slopes of shape ``(heads, 1, 1)``, a mean kept with ``keepdim``): the
    entries and their order are the same, so the answer is judged on its values; otherwise ``got`` unchanged."""
    if got.shape != expected.shape and got.size == expected.size and \
            tuple(n for n in got.shape if n != 1) == tuple(n for n in expected.shape if n != 1):
        return got.reshape(expected.shape)
    return got


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
    bad = _bad_entries(case, got, e)
    if not np.any(bad):
        return None
    index = tuple(int(i) for i in np.argwhere(bad)[0]) if e.ndim else ()
    flat = int(np.ravel_multi_index(index, e.shape)) if e.ndim else None
    where = f" at {_where(case, index)}" if index else ""
    n_bad = int(np.count_nonzero(bad))
    total = f" ({n_bad} of {e.size} entries differ)" if e.ndim else ""
    shown_e, shown_g = _fmt_pair(e[index], got[index])
    if case.exact:
        accepted = ""
        if case.lower is not None and case.upper is not None and case.lower[index] != case.upper[index]:
            accepted = f" (this entry lies on a bucket boundary: {int(case.lower[index])} or " \
                       f"{int(case.upper[index])} is accepted)"
        return f"value{where}: expected {shown_e}, got {shown_g}{accepted}{total}", flat
    difference = abs(float(got[index]) - float(e[index])) if np.isfinite(got[index]) else float("inf")
    tolerance = tolerance_text(case.atol) if case.atol > 0 else "0"
    return (f"value{where}: expected {shown_e}, got {shown_g} (difference {difference:.3g}, tolerance {tolerance}, "
            f"whatever the dtype){total}", flat)


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
    unavailable = sorted({name for o in outcomes if o is not None for name in o.unavailable})
    for n, (case, outcome) in enumerate(zip(cases, outcomes), start=1):
        base = {"failed_case": case.name, "hidden": case.hidden, "library_called": called, "unavailable": unavailable}
        if outcome is None:
            return CheckReport(exercise, False, n, total, error="this case was not run", **base)
        if outcome.status == "missing":
            return CheckReport(exercise, False, 0, total, failed_case="looking up the function",
                               error=outcome.error, hint="define the function with the signature given in the exercise",
                               library_called=called, unavailable=unavailable)
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
        got = _unit_axes_as_expected(outcome.value, case.expected)
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
                if _values_match(case, got, np.asarray(wrong), bounds=False):
                    mistake = description
                    break
            except Exception:
                pass
        return CheckReport(exercise, False, n, total, expected=_short(case.expected, flat), got=_short(got, flat),
                           mistake=mistake, hint=case.hint, difference=difference, **base)
    if called or unavailable:  # every value right, but through the library or a module grading does not have
        return CheckReport(exercise, False, total, total, failed_case="the whole exercise",
                           library_called=called, unavailable=unavailable)
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


def _resolve(dotted: str) -> Any:
    """The object named by a dotted name such as ``course_pe.rope.RotaryEmbedding.forward`` (the longest importable
    module prefix, then attributes), or None."""
    parts = dotted.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:split]))
            break
        except ImportError:
            continue
    else:
        return None
    try:
        for attr in parts[split:]:
            obj = getattr(obj, attr)
    except AttributeError:
        return None
    return obj


def _code_of(obj: Any) -> Any:
    try:
        return getattr(inspect.unwrap(obj), "__code__", None)
    except Exception:  # noqa: BLE001 - an object whose unwrapping fails is nobody's library function
        return None


def _library_codes(exercise: Exercise) -> dict[Any, str]:
    """Code object -> dotted name, for the library functions ``exercise`` does not allow."""
    codes = {}
    for dotted in exercise.library:
        code = _code_of(_resolve(dotted))
        if code is not None:
            codes[code] = dotted
    return codes


class _Watch:
    """While active (``with``), notes every call of the exercise's library functions, whatever name the function is
    reached by (``sys.setprofile``: Python-level calls; the library's functions are Python functions)."""

    def __init__(self, codes: dict[Any, str]) -> None:
        self.codes = codes
        self.called: set[str] = set()
        self._previous: Any = None

    def _hook(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            name = self.codes.get(frame.f_code)
            if name is not None:
                caller = frame.f_back
                while caller is not None:  # the outermost one only, as the grader names it (its stub raises first)
                    if caller.f_code in self.codes:
                        return
                    caller = caller.f_back
                self.called.add(name)

    def __enter__(self) -> _Watch:
        self._previous = sys.getprofile()
        sys.setprofile(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(self._previous)


#: modules of the notebook's own machinery (the kernel, the test runner), never held against an answer
_INFRASTRUCTURE = frozenset({"ipykernel", "IPython", "jupyter_client", "jupyter_core", "zmq", "tornado", "debugpy",
                             "comm", "pytest", "_pytest", "pluggy", "nbclient", "nbval"})


def _defining_cell(fn: Any) -> tuple[str, str, dict[str, Any]] | None:
    """The file name and source of the notebook cell that defined ``fn``, and its globals, when ``fn`` was defined in
    a cell (its code's file name is a cell's, known to ``linecache`` but not a file on disk); else None."""
    try:
        target = inspect.unwrap(fn)
    except Exception:  # noqa: BLE001
        return None
    code = getattr(target, "__code__", None)
    if code is None:
        return None
    filename = code.co_filename
    if not filename or os.path.exists(filename):
        return None
    lines = linecache.getlines(filename)
    if not lines:
        return None
    return filename, "".join(lines), getattr(target, "__globals__", {})


def _home_module(obj: Any) -> str | None:
    """The top-level module an object comes from: a module's own name, a function's or class's ``__module__``,
    else its type's."""
    try:
        if inspect.ismodule(obj):
            name = obj.__name__
        elif inspect.isclass(obj) or inspect.isroutine(obj):
            name = getattr(obj, "__module__", None)
        else:
            name = getattr(type(obj), "__module__", None)
    except Exception:  # noqa: BLE001 - an object that refuses to be looked at
        return None
    return name.split(".")[0] if isinstance(name, str) and name else None


def _bound_names(node: ast.AST) -> set[str]:
    """The module-level names a top-level statement binds (assignment and loop targets, ``def``, ``class``, imports,
    ``with ... as``, walrus; not the local variables of the functions, lambdas and classes it defines)."""
    names: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
            if n is not node:
                continue
            names |= {g for m in ast.walk(n) if isinstance(m, ast.Global) for g in m.names}
            continue
        if isinstance(n, ast.Lambda):
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in n.names if a.name != "*")
        stack.extend(ast.iter_child_nodes(n))
    return names


def _reachable(tree: ast.Module, line: int) -> list[ast.AST]:
    """The top-level statements of a cell that matter for the function defined at ``line`` when the grader runs the
    cell: every statement before the one that defines it (one that fails there, such as a library call the grader
    stubs, stops the cell before the function exists), that statement, and the later statements that bind a name
    it reads, transitively (a table precomputed after the ``def``). Later code that the function cannot reach (a
    self-test, a hypothesis test, a comparison with the library) does not decide what the grader does with the
    function, and is left out. The whole cell when no statement holds ``line``."""
    body = list(tree.body)
    index = next((k for k, node in enumerate(body)
                  if min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) <= line
                  <= (node.end_lineno or node.lineno)), None)
    if index is None:
        return body
    chosen = body[: index + 1]
    wanted = {n.id for n in ast.walk(body[index]) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    later = body[index + 1:]
    grew = True
    while grew:
        grew = False
        for node in list(later):
            if _bound_names(node) & wanted:
                chosen.append(node)
                later.remove(node)
                wanted |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
                grew = True
    return chosen


def _static_uses(fn: Any, codes: dict[Any, str]) -> tuple[set[str], set[str]]:
    """What the notebook cell defining ``fn`` (and the cells defining the helpers it names) uses that the grader will
    not have, in the part of the cell that decides what the grader gets (:func:`_reachable`: the statements before
    the ``def``, the ``def``, and what it reads that is set later in the cell): the exercise's library functions
    (``codes``), also where the function does not call them (a table precomputed with the library at the cell's top
    level), and modules absent from the grading environment (imported there, or the home of an object the cell
    names, such as a class imported in another cell)."""
    library: set[str] = set()
    modules: set[str] = set()
    todo, seen = [fn], set()
    while todo and len(seen) < 20:
        current = todo.pop()
        found = _defining_cell(current)
        code = getattr(inspect.unwrap(current), "__code__", None) if found is not None else None
        if found is None or code in seen:
            continue
        filename, source, namespace = found
        seen.add(code)
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            continue
        parts = _reachable(tree, code.co_firstlineno)

        def note(obj: Any) -> None:
            if obj is None:
                return
            name = codes.get(_code_of(obj))
            if name is not None:
                library.add(name)
            home = _home_module(obj)
            if home and home not in _INFRASTRUCTURE and unavailable_module(home):
                modules.add(home)
            if inspect.isfunction(obj) and _defining_cell(obj) is not None:
                todo.append(obj)  # a helper defined in a cell: its cell is read too

        for node in (n for part in parts for n in ast.walk(part)):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if unavailable_module(alias.name):
                        modules.add(alias.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                if unavailable_module(node.module):
                    modules.add(node.module.split(".")[0])
                elif node.module.split(".")[0] == "course_pe":
                    for alias in node.names:
                        note(_resolve(f"{node.module}.{alias.name}"))
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                chain, base = [], node
                while isinstance(base, ast.Attribute):
                    chain.append(base.attr)
                    base = base.value
                if not isinstance(base, ast.Name) or base.id not in namespace:
                    continue
                obj = namespace[base.id]
                for attr in reversed(chain):
                    if not (inspect.ismodule(obj) or inspect.isclass(obj)):
                        obj = None
                        break
                    try:
                        obj = inspect.getattr_static(obj, attr)
                    except AttributeError:
                        obj = None
                        break
                    if isinstance(obj, (staticmethod, classmethod)):
                        obj = obj.__func__
                note(obj)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in namespace:
                note(namespace[node.id])
    return library, modules


def check(exercise_id: str, fn: Callable[..., Any] | None, *, hidden: bool = False, seed: int | None = None) -> CheckReport:
    """Run the cases of ``exercise_id`` on ``fn`` here, in this process (never raises for the student's errors; an
    unknown id is a ``ValueError``). ``fn=None`` (the function is not defined, e.g. its cell was deleted) gives a
    failed report that says so.

    By default only the visible cases run: feedback for the student. ``hidden=True`` adds the randomised hidden
    cases, drawn from ``seed`` (default: a fresh secret seed, so nobody can know them in advance); nbgrader's hidden
    tests use this. The grade itself comes from the grader, which runs the same cases in a sandbox and judges them by
    the same rule; what the sandbox lacks is refused here too, with the grader's sentence: the library functions the
    exercise asks students to write (called by ``fn``, or named in the notebook cell that defines it) and modules
    the grading environment does not have.
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
        codes = _library_codes(exercise)
        try:
            library, modules = _static_uses(fn, codes)
        except Exception:  # noqa: BLE001 - the look-up is a courtesy; the calls below are watched anyway
            library, modules = set(), set()
        outcomes = []
        called = exercise.adapt(fn)  # through the exercise's harness, as the grader calls it
        started = time.monotonic()
        for case in cases:
            with _Watch(codes) as watch:
                outcome = call_case(called, case.args)
            library |= watch.called
            outcomes.append(Outcome(outcome.status, outcome.value, outcome.error, tuple(sorted(library)),
                                    tuple(sorted(modules))))
            if outcome.status != "ok":
                break
        seconds = time.monotonic() - started
        outcomes += [None] * (len(cases) - len(outcomes))
        report = judge(exercise_id, cases, outcomes)
        if hidden or not report.passed:
            return report
        # the grader allows CALL_TIMEOUT seconds for the calls of all cases, visible and hidden together
        limit = (f"the grader allows {CALL_TIMEOUT:g} s for the calls of all cases of an exercise, visible and hidden "
                 f"together (on its own machine, which may be slower than yours)")
        if seconds > CALL_TIMEOUT:
            return CheckReport(exercise_id, False, len(cases), len(cases), failed_case="the time limit",
                               error=f"your function took {seconds:.0f} s for the visible cases alone; {limit}",
                               hint="make it faster: vectorise the inner loops with NumPy or torch")
        if seconds > CALL_TIMEOUT / 3:
            report.note = f"your function took {seconds:.0f} s for the visible cases; {limit}: make it faster"
        return report
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
# parameters draws at least one hidden case from a range of thousands of values (see the instructor guide). The
# visible cases include the largest sizes the hidden ones reach, so that an answer whose precision passes the
# notebook's check passes the grader's too.
HIDDEN_CASES = 3

#: The tolerance of each exercise with a float answer (the largest difference accepted in any entry, whatever the
#: answer's dtype), as its text in the book states it. Each is set by what the exercise asks for and by the precision
#: a reasonable implementation reaches: float32 arithmetic (cast to float64 or not) at the largest inputs, with a
#: margin of at least 4 (tests/test_honest_variants.py measures it), and far below what any classic mistake is off by.
TOLERANCES = {
    "sinusoidal_table": 1e-4,  # float32 angles p * w: about 2e-5 at position 200
    "shift_matrix": 1e-3,  # float32 angles k * w: about 1e-4 at k = 2000
    "add_positional_encoding": 1e-4,  # float32 table and scaling: about 1e-5
    "rope_rotation": 5e-3,  # float32 angles at position 4096: about 2.4e-4 rad, times entries of order 1 to 4
    "alibi_slopes": 1e-4,  # float32 powers (BLOOM's torch.pow on a float32 base): about 1e-5 at 4096 heads
    "half_to_interleaved": 1e-6,  # values are moved, not computed: a float32 copy is off by at most 3e-7 here
    "convert_qk_weight": 1e-6,  # rows are moved, not computed: a float32 copy is off by at most 3e-7 here
    "extrapolation_gap": 1e-4,  # float32 means (even summed in a Python loop) of up to 1000 losses: about 3e-6
}


# --------------------------------------------------------------------------- Part I


@_register("sinusoidal_table", "sinusoidal_table", "sinusoidal",
           "the (num_positions, d_model) sinusoidal table, interleaved",
           library=("course_pe.sinusoidal.sinusoidal_encoding", "course_pe.sinusoidal.sinusoidal_encoding_np",
                    "course_pe.sinusoidal.SinusoidalPositionalEncoding.forward"),
           tolerance=TOLERANCES["sinusoidal_table"])
def _sinusoidal_table_cases(rng: np.random.Generator | None) -> list[Case]:
    """``fn(num_positions, d_model)`` must return the interleaved sinusoidal table (base 10000), every entry within
    1e-4 of the reference, whatever its dtype.
    Hidden cases: ``num_positions`` in 2 ... 200, ``d_model`` even in 2 ... 256 (the visible cases include
    200 x 256)."""
    sizes = [(1, 2, False), (10, 4, False), (50, 16, False), (7, 128, False), (200, 256, False)]
    if rng is not None:
        sizes += [(int(rng.integers(2, 201)), _even(rng, 2, 256), True) for _ in range(HIDDEN_CASES)]
    cases = []
    for n, d, hidden in sizes:
        cases.append(Case(
            f"sinusoidal_table({n}, {d})", (n, d), _table(n, d), atol=TOLERANCES["sinusoidal_table"], hidden=hidden,
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
           library=("course_pe.sinusoidal.shift_matrix",), tolerance=TOLERANCES["shift_matrix"])
def _shift_matrix_cases(rng: np.random.Generator | None) -> list[Case]:
    """``fn(k, d_model)`` must return ``M_k`` (interleaved layout) with ``PE(p + k) = M_k @ PE(p)``, every entry within
    1e-3 of the reference, whatever its dtype.
    Hidden cases: ``k`` in -2000 ... 2000, ``d_model`` even in 2 ... 64 (the visible cases include k = +-2000, 64)."""
    sizes = [(0, 2, False), (1, 2, False), (3, 8, False), (-5, 8, False), (100, 16, False), (2000, 64, False),
             (-1999, 62, False)]
    if rng is not None:
        sizes += [(int(rng.integers(-2000, 2001)), _even(rng, 2, 64), True) for _ in range(HIDDEN_CASES)]
    return [
        Case(f"shift_matrix({k}, {d})", (k, d), _shift(k, d), atol=TOLERANCES["shift_matrix"],
             hidden=hidden, axes=(("row {i}", None), ("column {i}", None)),
             mistakes=(("your matrix shifts by -k: the 2x2 blocks are transposed (the sin entries have the wrong "
                        "signs)", _shift(k, d, transpose=True)),),
             hint="block i acts on (sin, cos) = (PE[2i], PE[2i+1]); expand sin((p+k)w) and cos((p+k)w) with the "
             "angle-addition formulas")
        for k, d, hidden in sizes
    ]


@_register("add_positional_encoding", "add_positional_encoding", "model_input",
           "add the sinusoidal table to a batch-first input, with the sqrt(d_model) scale",
           library=("course_pe.sinusoidal.SinusoidalPositionalEncoding.forward",),
           tolerance=TOLERANCES["add_positional_encoding"])
def _add_positional_encoding_cases(rng: np.random.Generator | None) -> list[Case]:
    """``fn(embeddings)`` with ``embeddings`` of shape ``(batch, seq, d_model)`` (float64 tensor) must return
    ``sqrt(d_model) * embeddings + PE[:seq]`` (interleaved table, base 10000), every entry within 1e-4, whatever its
    dtype. ``cpe.sinusoidal_encoding`` may give the table; ``cpe.SinusoidalPositionalEncoding`` (which adds it: the
    exercise itself) may not.
    Hidden cases: random embeddings, batch 1 ... 4, seq 1 ... 64, ``d_model`` even in 2 ... 64 (the visible cases
    include 4 x 64 x 64)."""
    g = np.random.default_rng(0)
    sizes = [(1, 1, 4, False), (2, 5, 8, False), (3, 7, 16, False), (1, 12, 6, False), (4, 64, 64, False)]
    if rng is not None:
        sizes += [(int(rng.integers(1, 5)), int(rng.integers(1, 65)), _even(rng, 2, 64), True)
                  for _ in range(HIDDEN_CASES)]
    cases = []
    for b, s, d, hidden in sizes:
        x = (rng if hidden else g).standard_normal((b, s, d))
        table = _table(s, d)
        seq_first_bug = math.sqrt(d) * x + _table(b, d)[:, None, :]  # pe[:batch] broadcast over the sequence
        cases.append(Case(
            f"embeddings of shape ({b}, {s}, {d})", (torch.from_numpy(x),), math.sqrt(d) * x + table,
            atol=TOLERANCES["add_positional_encoding"], hidden=hidden,
            axes=(("sequence {i} of the batch", None), ("position {i}", None), ("dimension {i}", None)),
            mistakes=(
                ("the table was indexed with the batch size: a (max_len, 1, d) table sliced with x.size(0) and added "
                 "to a batch-first input gives every position the encoding of position 0..batch-1 (the silent bug "
                 "of source 003, 5.2)", seq_first_bug),
                ("the embeddings are not scaled by sqrt(d_model)", x + table),
                ("the embeddings are divided, not multiplied, by sqrt(d_model)", x / math.sqrt(d) + table),
                ("this is the half layout of the table (all sines, then all cosines); the exercise uses the "
                 "interleaved table (sin at 2i, cos at 2i+1), as cpe.sinusoidal_encoding gives it",
                 math.sqrt(d) * x + _table(s, d, layout="half")),
                ("positions start at 1; the first token has position 0",
                 math.sqrt(d) * x + _table(s + 1, d)[1:]),
            ),
            hint="the sequence axis of a batch-first input is dimension 1: add PE[:seq] (shape (seq, d_model)), "
            "which broadcasts over the batch, to sqrt(d_model) * embeddings",
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
                    "course_pe.benchmark._complex"),
           tolerance=TOLERANCES["rope_rotation"])
def _rope_rotation_cases(rng: np.random.Generator | None) -> list[Case]:
    """``fn(x, positions)``: ``x`` a float64 tensor of shape ``(seq, head_dim)``, ``positions`` a ``(seq,)`` long
    tensor; returns the interleaved RoPE rotation with base 10000, every entry within 5e-3, whatever its dtype.
    Hidden cases: random vectors, seq 1 ... 16, ``head_dim`` even in 2 ... 64, positions in 0 ... 4096 in any order
    (the visible cases include 16 x 64 at positions up to 4096)."""
    g = np.random.default_rng(1)
    far = [4096, 0, 4095, 2049, 3999, 1, 4000, 2500, 3072, 17, 4093, 1024, 3583, 4094, 2, 3333]
    sizes = [(1, 2, [0], False), (3, 2, [0, 1, 2], False), (4, 8, [0, 5, 17, 1000], False),
             (5, 64, [3, 1, 4, 1, 5], False), (16, 64, far, False)]
    if rng is not None:
        for _ in range(HIDDEN_CASES):
            seq = int(rng.integers(1, 17))
            sizes.append((seq, _even(rng, 2, 64), [int(p) for p in rng.integers(0, 4097, seq)], True))
    cases = []
    for seq, d, pos, hidden in sizes:
        xn, pn = (rng if hidden else g).standard_normal((seq, d)), np.asarray(pos, dtype=np.float64)
        cases.append(Case(
            f"x of shape ({seq}, {d}), positions {pos}", (torch.from_numpy(xn), torch.tensor(pos)), _rope(xn, pn),
            atol=TOLERANCES["rope_rotation"], hidden=hidden,
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
    same order, float32 logarithm included, so that a correct student answer written the usual way matches exactly.
    ``relative_position`` is ``key - query``; written independently of ``course_pe.t5``."""
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


def _t5_bounds(relative_position: np.ndarray, bidirectional: bool, num_buckets: int,
               max_distance: int) -> tuple[np.ndarray, np.ndarray]:
    """For each offset, the lowest and the highest bucket a correct implementation can give: the same bucket, except
    where the logarithm lands within its float32 rounding error of a bucket boundary (then float32 and float64, or
    ``log(n / e)`` and ``log(n) - log(e)``, truncate to neighbouring buckets; T5's own float32 result is one of them).
    The bound on the rounding error is 4 times that of a float32 logarithm of ``n`` and of ``max_exact``, carried
    through the scale factor ``(B' - B_ex) / ln(D / B_ex)``."""
    n = -relative_position.astype(np.int64)
    ret = np.zeros_like(n)
    if bidirectional:
        num_buckets //= 2
        ret = (n < 0).astype(np.int64) * num_buckets
        n = np.abs(n)
    else:
        n = np.maximum(n, 0)
    max_exact = num_buckets // 2
    small = n < max_exact
    big = np.maximum(n, max(max_exact, 1)).astype(np.float64)
    scale = (num_buckets - max_exact) / math.log(max_distance / max_exact)
    value = max_exact + np.log(big / max_exact) * scale
    slack = 4 * 1.2e-7 * (np.abs(np.log(big)) + abs(math.log(max_exact)) + 1.0) * abs(scale) + 1e-9
    low = np.clip(np.floor(value - slack), max_exact, num_buckets - 1).astype(np.int64)
    high = np.clip(np.floor(value + slack), max_exact, num_buckets - 1).astype(np.int64)
    return ret + np.where(small, n, low), ret + np.where(small, n, high)


@_register("t5_bucket", "t5_bucket", "relative", "T5 relative-position buckets for key - query",
           library=("course_pe.t5.t5_relative_position_bucket", "course_pe.t5.T5RelativeBias.forward"))
def _t5_bucket_cases(rng: np.random.Generator | None) -> list[Case]:
    """``fn(relative_position, bidirectional, num_buckets, max_distance)`` for a long tensor of ``key - query``
    offsets; returns bucket ids (an integer tensor) like T5. Where the logarithm lands on a bucket boundary (within
    float32 rounding), either neighbouring bucket is accepted.
    Hidden cases: ``num_buckets`` even in 4 ... 128, ``max_distance`` from just above the exact range to
    32 * ``num_buckets``, 300 offsets in -4 ``max_distance`` ... 4 ``max_distance`` (with the boundaries); the visible
    cases include 128 buckets, ``max_distance`` 4096 and offsets up to 16384."""
    g = np.random.default_rng(5)
    wide = np.unique(np.concatenate([g.integers(-16384, 16385, 300), [0, 1, -1, 31, -31, 32, -32, 4096, -4096,
                                                                       4097, -4097, 16384, -16384]]))
    settings: list[tuple[bool, int, int, torch.Tensor, bool]] = [
        (True, 32, 128, torch.arange(-200, 201), False), (False, 32, 128, torch.arange(-200, 201), False),
        (True, 8, 20, torch.arange(-200, 201), False), (True, 4, 2, torch.arange(-10, 11), False),
        (True, 128, 4096, torch.from_numpy(wide), False), (False, 128, 4096, torch.from_numpy(wide), False)]
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
        lower, upper = _t5_bounds(rel.numpy(), bidirectional, nb, md)
        flipped = _t5_buckets(-rel, bidirectional, nb, md).numpy()
        contiguous = rel.numel() > 1 and bool(torch.all(rel[1:] - rel[:-1] == 1))
        shown = f"offsets {int(rel[0])} ... {int(rel[-1])}" if contiguous else \
            f"{rel.numel()} offsets in {int(rel[0])} ... {int(rel[-1])}"
        cases.append(Case(
            f"{shown}, bidirectional={bidirectional}, num_buckets={nb}, max_distance={md}",
            (rel, bidirectional, nb, md), expected, exact=True, dtypes=INT_DTYPES, hidden=hidden,
            lower=lower, upper=upper,
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
           library=("course_pe.alibi.alibi_slopes",), tolerance=TOLERANCES["alibi_slopes"])
def _alibi_slopes_cases(rng: np.random.Generator | None) -> list[Case]:
    """``fn(num_heads)`` returns the ``num_heads`` ALiBi slopes of Press et al. (a list or a 1-D tensor), each within
    1e-4, whatever its dtype, computed without ``cpe.alibi_slopes``.
    Hidden cases: one head count in 3 ... 64, the others in 65 ... 4096 (the visible cases include 3000 and 4096)."""
    counts = [(n, False) for n in (1, 2, 8, 16, 6, 12, 20, 3000, 4096)]
    if rng is not None:
        counts.append((int(rng.integers(3, 65)), True))
        counts += [(int(rng.integers(65, 4097)), True) for _ in range(HIDDEN_CASES - 1)]
    return [
        Case(f"alibi_slopes({n})", (n,), np.asarray(_alibi(n)), atol=TOLERANCES["alibi_slopes"], hidden=hidden,
             axes=(("head {i}", None),),
             mistakes=(("you used 2^(-8(h+1)/n) for every n; for head counts that are not powers of two Press et al. "
                        "take the slopes of the nearest lower power of two, then every other slope of the next one",
                        np.asarray([2.0 ** (-8.0 * (k + 1) / n) for k in range(n)])),),
             hint="for a power of two n the slopes are 2^(-8/n), 2^(-16/n), ..., 2^(-8)")
        for n, hidden in counts
    ]


@_register("half_to_interleaved", "half_to_interleaved", "rope_implementation",
           "reorder the last dimension from pairs (i, i + d/2) to pairs (2i, 2i + 1)",
           library=("course_pe.rope.half_to_interleaved", "course_pe.rope.layout_permutation"),
           tolerance=TOLERANCES["half_to_interleaved"])
def _half_to_interleaved_cases(rng: np.random.Generator | None) -> list[Case]:
    """``fn(x)`` reorders the last dimension of the float64 tensor ``x`` from the half layout to the interleaved
    layout, without ``cpe.half_to_interleaved`` (values are moved: each within 1e-6, so a float32 copy passes).
    Hidden cases: random values, 0 to 2 leading dimensions of 1 ... 4, a last dimension even in 2 ... 256 (the visible
    cases include 4 x 4 x 256)."""
    g = np.random.default_rng(2)
    shapes = [((2,), False), ((4,), False), ((3, 8), False), ((2, 3, 6), False), ((4, 4, 256), False)]
    if rng is not None:
        for _ in range(HIDDEN_CASES):
            leading = tuple(int(n) for n in rng.integers(1, 5, int(rng.integers(0, 3))))
            shapes.append((leading + (_even(rng, 2, 256),), True))
    cases = []
    for shape, hidden in shapes:
        d = shape[-1]
        if hidden:
            x = rng.standard_normal(shape)
        elif math.prod(shape) <= 64:
            x = np.arange(math.prod(shape), dtype=np.float64).reshape(shape)
        else:
            x = g.standard_normal(shape)
        h = d // 2
        expected = np.stack([x[..., :h], x[..., h:]], axis=-1).reshape(shape)
        inverse = np.concatenate([x[..., 0::2], x[..., 1::2]], axis=-1)
        axes = tuple((f"index {{i}} of axis {k}", None) for k in range(len(shape) - 1)) + (("output dimension {i}", None),)
        cases.append(Case(f"x of shape {shape}", (torch.from_numpy(x),), expected,
                          atol=TOLERANCES["half_to_interleaved"], hidden=hidden, axes=axes,
                          mistakes=(("this is the inverse permutation (interleaved -> half)", inverse),),
                          hint="output dimension 2i is input dimension i, output 2i+1 is input i + d/2"))
    return cases


def _to_half_rows(weight: np.ndarray, num_heads: int, *, inverse: bool = False, heads: int | None = None
                  ) -> np.ndarray:
    """The rows of each of ``heads`` (default ``num_heads``) contiguous head blocks reordered from the interleaved
    layout to the half layout (``inverse``: the other way), written with NumPy indexing, not with the library."""
    heads = num_heads if heads is None else heads
    head_dim = weight.shape[0] // heads
    to_half = np.concatenate([np.arange(0, head_dim, 2), np.arange(1, head_dim, 2)])
    order = np.argsort(to_half) if inverse else to_half
    blocks = weight.reshape(heads, head_dim, *weight.shape[1:])
    return blocks[:, order].reshape(weight.shape)


@_register("convert_qk_weight", "convert_qk_weight", "rope_implementation",
           "convert a query or key projection (weight or bias) from the interleaved to the half layout",
           library=("course_pe.rope.permute_qk_weights", "course_pe.rope.layout_permutation",
                    "course_pe.rope.interleaved_to_half", "course_pe.rope.half_to_interleaved"),
           tolerance=TOLERANCES["convert_qk_weight"])
def _convert_qk_weight_cases(rng: np.random.Generator | None) -> list[Case]:
    """``fn(weight, num_heads)``: ``weight`` a float64 tensor, a projection's weight ``(num_heads * head_dim,
    d_model)`` or bias ``(num_heads * head_dim,)`` in the interleaved layout, heads in contiguous blocks of rows;
    returns it for the half layout (within each head, row ``r`` of the result is row ``2r`` of the input for ``r <
    head_dim / 2`` and row ``2(r - head_dim / 2) + 1`` after), each value within 1e-6 (moved, not computed), without
    ``cpe.permute_qk_weights``. With grouped-query attention ``num_heads`` is the projection's own (the key's
    key-value heads).
    Hidden cases: random values, ``num_heads`` in 1 ... 8, ``head_dim`` even in 2 ... 128, a bias or a weight with
    1 ... 16 columns (the visible cases include 8 heads of 128 rows)."""
    g = np.random.default_rng(6)
    settings = [((2,), 1, False), ((8,), 2, False), ((8, 3), 1, False), ((12, 5), 3, False), ((16, 4), 2, False),
                ((1024,), 8, False), ((1024, 16), 8, False)]
    if rng is not None:
        for _ in range(HIDDEN_CASES):
            heads, head_dim = int(rng.integers(1, 9)), _even(rng, 2, 128)
            columns = () if rng.integers(0, 2) else (int(rng.integers(1, 17)),)
            settings.append(((heads * head_dim, *columns), heads, True))
    cases = []
    for shape, heads, hidden in settings:
        if hidden:
            w = rng.standard_normal(shape)
        elif math.prod(shape) <= 64:
            w = np.arange(math.prod(shape), dtype=np.float64).reshape(shape)
        else:
            w = g.standard_normal(shape)
        head_dim = shape[0] // heads
        mistakes = [("this is the inverse permutation (half -> interleaved): the conversion from Meta's interleaved "
                     "checkpoints to the half layout takes, within each head, the even rows first, then the odd ones",
                     _to_half_rows(w, heads, inverse=True))]
        if heads > 1:
            mistakes.append((f"the rows were permuted as one head of {shape[0]}; they are {heads} heads of "
                             f"{head_dim} rows, each permuted by itself", _to_half_rows(w, heads, heads=1)))
        if len(shape) == 2 and shape[1] % heads == 0 and (shape[1] // heads) % 2 == 0:
            columns = _to_half_rows(w.T, heads).T
            mistakes.append(("the columns (input features) were permuted; the layout is that of the output rows, "
                             "the query and key dimensions", columns))
        axes = (("row {i}", None),) + ((("column {i}", None),) if len(shape) == 2 else ())
        cases.append(Case(
            f"{'bias' if len(shape) == 1 else 'weight'} of shape {shape}, num_heads={heads}",
            (torch.from_numpy(w), heads), _to_half_rows(w, heads), atol=TOLERANCES["convert_qk_weight"],
            hidden=hidden, axes=axes, mistakes=tuple(mistakes),
            hint="view the rows as (num_heads, head_dim, ...), reorder each head's rows as 0, 2, 4, ..., 1, 3, 5, "
            "..., and reshape back"))
    return cases


# --------------------------------------------------------------------------- Part III


def _random_losses(rng: np.random.Generator, length: int, beyond: int) -> list[float]:
    losses = rng.uniform(0.5, 5.0, length + beyond)
    for part, size in ((0, length), (length, beyond)):
        if size >= 3:  # some unscored positions, never all of a part
            losses[part + rng.choice(size, size=int(rng.integers(1, size // 2 + 1)), replace=False)] = np.nan
    return [float(v) for v in losses]


@_register("extrapolation_gap", "extrapolation_gap", "extrapolation",
           "mean loss beyond the training length minus mean loss within it",
           tolerance=TOLERANCES["extrapolation_gap"])
def _extrapolation_gap_cases(rng: np.random.Generator | None) -> list[Case]:
    """``fn(loss_by_position, train_length)``: mean loss at positions ``>= train_length`` minus the mean at
    positions ``< train_length``, as a Python float (within 1e-4, so float32 arithmetic passes); NaN entries
    (unscored positions) are ignored.
    Hidden cases: random losses, ``train_length`` in 2 ... 500, 1 ... 500 positions beyond it, a few NaN (the visible
    cases include 500 + 500 positions)."""
    data = [([1.0, 1.0, 2.0, 4.0], 2, False), ([3.0, 1.0, 1.0, 1.0, 1.0, 1.0], 3, False),
            ([float("nan"), 2.0, 2.0, 5.0, 5.0], 3, False),
            (_random_losses(np.random.default_rng(3), 500, 500), 500, False)]
    if rng is not None:
        for _ in range(HIDDEN_CASES):
            length = int(rng.integers(2, 501))
            data.append((_random_losses(rng, length, int(rng.integers(1, 501))), length, True))
    cases = []
    for losses, length, hidden in data:
        t = np.asarray(losses, dtype=np.float64)
        expected = np.nanmean(t[length:]) - np.nanmean(t[:length])
        off_by_one = np.nanmean(t[length - 1 :]) - np.nanmean(t[: length - 1])
        shown = f"losses {[round(v, 3) for v in losses]}" if t.size <= 10 else \
            f"{t.size} random losses ({int(np.isnan(t).sum())} NaN)"
        cases.append(Case(
            f"{shown}, train_length {length}", (torch.from_numpy(t), length), np.asarray(expected),
            atol=TOLERANCES["extrapolation_gap"], hidden=hidden,
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
check_convert_qk_weight = EXERCISES["convert_qk_weight"].check
check_extrapolation_gap = EXERCISES["extrapolation_gap"].check

from . import exercises_generation  # noqa: E402,F401 - registers the generation chapter's exercise (and its harness)

EXERCISES["t5_position_bias"] = dataclasses.replace(EXERCISES["t5_position_bias"], harness=exercises_generation.HARNESS)
check_t5_position_bias = EXERCISES["t5_position_bias"].check
