"""Grade students' notebooks: one submission, or a whole folder in parallel.

    python -m course_pe.coursework.grade submission.ipynb --student NAME [--assignment CHAPTER] [--out grades/]
    python -m course_pe.coursework.grade --dir submissions/ [--roster roster.csv] [--assignment CHAPTER] [--jobs N]
    make grade NB=path/to/submission.ipynb STUDENT=name [ASSIGNMENT=chapter] [REPLACE=1]
    make grade DIR=path/to/folder/ [ROSTER=roster.csv] [ASSIGNMENT=chapter] [JOBS=n] [REPLACE=1]

The submission is untrusted code; the grader is the only trusted party.

* **Which exercises.** Those of the assignment: ``--assignment`` (a chapter name such as ``relative``), or else the
  chapter that names the folder holding the submissions (a folder the instructor made). Nothing in the submission
  decides: not its file name, not its metadata (when the assignment is unknown, the error message mentions what the
  notebook's metadata claims, as a hint).
* **Whose.** ``--student`` for one notebook; for a folder, a roster or the file names, checked
  (``course_pe.coursework.roster``): symbolic links are refused, never followed; unknown, duplicate, non-UTF-8
  and unreadable files get clear rows; nothing is renamed silently.
* **Reading.** The notebook is opened without following links, read as JSON (at most 20 MiB, nesting limited) by
  the grader. Only the sources of code cells are used.
* **Running only what is graded.** The grader runs, in a fresh sandboxed process per submission
  (:mod:`course_pe.coursework.sandbox`), the declared set-up (:data:`course_pe.coursework.exercises.GRADING_SETUP`:
  ``math``, ``numpy as np``, ``torch``, ``course_pe as cpe``) and then only the *answer cells*: the code cells that
  define the assignment's functions, plus the cells that define names those cells use (a helper in its own cell),
  in notebook order (:func:`answer_cells`). The chapter's other cells (demonstrations, training, Java) never run.
  The ``course_pe`` the sandbox imports lacks the functions being graded and the exercise checks
  (``course_pe.coursework.grading_build``): there is nothing to unlock.
* **Checking.** For each exercise the grader sends the inputs of every case, visible and hidden (drawn from wide
  ranges with a fresh secret seed per submission, recorded in the report; ``--seed`` reproduces one), receives only
  the raw answers and computes the verdict itself (:func:`course_pe.coursework.exercises.judge`).
* **Time.** ``--cell-timeout`` per answer cell, ``--call-timeout`` per exercise (its calls only), ``--timeout`` for
  the whole submission (a wall-clock limit over everything, restarts included, enforced by a watchdog that kills the
  sandbox). A cell that hangs or kills its process is skipped and the rest runs again in a new process. Ctrl-C stops a
  batch at once: every sandbox is killed and the exports are written for what was graded (exit status 130).
* **Recording.** The gradebook (:mod:`course_pe.coursework.gradebook`). Existing grades are replaced only with
  ``--replace`` (``REPLACE=1``); otherwise the grader stops before grading (exit status 2) and names the students.

* **A broken grader is not a class of zeros.** Before grading, the grader starts one sandbox exactly as a
  submission's would be started and runs a known cell and call in it (:func:`self_check`). If that fails (the sandbox
  cannot start, or cannot import NumPy, PyTorch, IPython or the grading build), nothing is graded or recorded. During
  a batch, a submission whose sandbox never started is recorded only once another submission's checks have run; if
  none ever do, none is recorded (:class:`GraderBroken`).

Exit status 0 when grading completed (whatever the scores), 4 when it completed but some exercises were **not
graded** (the grader could not finish them: a sandbox that did not start or was killed, a submission past its whole
time limit; they are listed under "needs attention", empty in every export, and should be graded again), 2 when the
arguments are wrong (a missing ``NB`` file included: nothing is recorded), 3 when the grader itself cannot run
submissions here (nothing is recorded; the gradebook keeps what it had), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import select
import signal
import stat
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import (
    check_argv,
    check_bool,
    check_choice,
    check_float,
    check_int,
    check_optional_int,
    check_optional_str,
    check_path,
    check_str,
    check_str_sequence,
)
from ._cells import MAX_ANSWER_CELLS, Selection, select_cells, serialised_parsing
from .environment import missing_modules, unavailable_sentence
from .exercises import (
    CALL_TIMEOUT,
    EXERCISES,
    GRADING_SETUP,
    Case,
    CheckReport,
    Outcome,
    chapters,
    exercises_for_chapter,
    judge,
    library_sentence,
)
from .gradebook import Gradebook
from .names import derive_name, validate_name
from .roster import Intake, hard_link_refusal, intake, read_roster_table
from .sandbox import (
    Containment,
    Sandbox,
    _check_folders,
    SandboxDied,
    SandboxLimits,
    SandboxTimeout,
    allow_new,
    containment,
    kill_all,
    prepare,
)

__all__ = [
    "ExerciseGrade",
    "FolderResult",
    "GradeReport",
    "GraderBroken",
    "GradingInterrupted",
    "answer_cells",
    "assignment_from_path",
    "grade_cells",
    "grade_folder",
    "grade_notebook",
    "main",
    "read_submission",
    "self_check",
    "summary_table",
]

MAX_NOTEBOOK_BYTES = 20 * 2**20
MAX_RESTARTS = 4
#: the statuses of an :class:`ExerciseGrade`
GRADE_STATUSES = ("passed", "failed", "not graded", "unreadable")


@dataclass
class ExerciseGrade:
    """The grade of one exercise: ``status`` is ``passed``, ``failed``, ``not graded`` or ``unreadable``;
    ``message`` the diagnosis a student reads. ``function``: the name the student defines; ``visible_cases`` and
    ``hidden_cases``: how many of each the exercise has; ``failed_hidden``: the first failed case was a hidden one
    (its inputs are then shown, but they change at every grading)."""

    exercise: str
    score: float
    max_score: float
    status: str
    message: str
    function: str = ""
    visible_cases: int = 0
    hidden_cases: int = 0
    failed_hidden: bool = False

    def __post_init__(self) -> None:
        check_str("exercise", self.exercise)
        self.max_score = check_float("max_score", self.max_score, minimum=0.0)
        self.score = check_float("score", self.score, minimum=0.0, maximum=self.max_score)
        check_choice("status", self.status, GRADE_STATUSES)
        check_str("message", self.message)
        check_str("function", self.function)
        check_int("visible_cases", self.visible_cases, minimum=0)
        check_int("hidden_cases", self.hidden_cases, minimum=0)
        check_bool("failed_hidden", self.failed_hidden)


@dataclass
class GradeReport:
    """Everything about one graded submission. ``isolation`` says how it was contained (see
    :attr:`course_pe.coursework.sandbox.Containment.description`); ``seed`` reproduces the hidden cases;
    ``cells_run`` lists the indices (among the notebook's code cells) of the cells that ran."""

    student: str
    notebook: str
    assignment: str = ""
    exercises: list[ExerciseGrade] = field(default_factory=list)
    cell_errors: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    isolation: str = ""
    seed: int = 0
    seconds: float = 0.0
    cells_run: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        # types only: the rules for names that become file names are the gradebook's (Gradebook.record)
        for name in ("student", "notebook", "assignment", "isolation"):
            check_str(name, getattr(self, name))
        if not isinstance(self.exercises, list) or not all(isinstance(e, ExerciseGrade) for e in self.exercises):
            raise TypeError(f"exercises must be a list of ExerciseGrade, got {type(self.exercises).__name__}")
        check_str_sequence("cell_errors", self.cell_errors)
        check_str_sequence("problems", self.problems)
        self.seed = check_int("seed", self.seed, minimum=0)
        self.seconds = check_float("seconds", self.seconds, minimum=0.0)
        if not isinstance(self.cells_run, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                           for i in self.cells_run):
            raise TypeError("cells_run must be a list of int")

    @property
    def score(self) -> float:
        return sum(e.score for e in self.exercises)

    @property
    def max_score(self) -> float:
        return sum(e.max_score for e in self.exercises)

    def text(self) -> str:
        lines = [f"Grade report for {self.student} ({self.notebook}): {self.score:g} / {self.max_score:g}"]
        for p in self.problems:
            lines.append(f"  ! {p}")
        for e in self.exercises:
            lines.append(f"  [{e.status:>10}] {e.exercise:<24} {e.score:g}/{e.max_score:g}  {e.message}")
        if self.cell_errors:
            lines.append("  answer cells that raised an error:")
            lines += [f"    - {err}" for err in self.cell_errors]
        lines.append(f"  assignment {self.assignment}; graded in {self.seconds:.1f} s; isolation {self.isolation}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return asdict(self) | {"score": self.score, "max_score": self.max_score}


# --------------------------------------------------------------------------- assignments


def assignment_from_path(path: Path) -> str | None:
    """The chapter named by the folder holding ``path`` (the longest chapter name it contains, if the others it
    contains are part of that one), else None. Never from the file name: a student chooses that."""
    path = check_path("path", path)
    text = path.parent.name
    found = [c for c in chapters() if c in text]
    if found:
        longest = max(found, key=len)
        if all(c in longest for c in found):
            return longest
    return None


def _metadata_hint(data: bytes | None) -> str:
    """What the notebook's metadata says its exercises are (a hint for the instructor, never used to grade)."""
    try:
        claimed = json.loads(data.decode("utf-8"))["metadata"]["course_pe"]["exercises"] if data else None
    except Exception:  # noqa: BLE001 - a hint only
        return ""
    if not isinstance(claimed, list):
        return ""
    chapters_claimed = sorted({EXERCISES[e].chapter for e in claimed if isinstance(e, str) and e in EXERCISES})
    if len(chapters_claimed) == 1:
        return f" (the notebook's metadata says it is the workbook of {chapters_claimed[0]!r}: " \
               f"ASSIGNMENT={chapters_claimed[0]} if that is what you assigned)"
    return ""


# --------------------------------------------------------------------------- reading a submission


def _open_regular(path: Path, dir_fd: int | None = None) -> bytes:
    """The bytes of the regular file ``path``, without following a symbolic link and refusing a hard link (another
    name of the file may be anything on this machine, the book's solution notebook included) (``ValueError`` with
    the reason). The grader reads the bytes once and grades them, not the file."""
    try:
        info = os.lstat(path, dir_fd=dir_fd)
    except FileNotFoundError:
        raise ValueError("the file does not exist") from None
    except OSError as exc:
        raise ValueError(f"the file cannot be examined ({exc.strerror})") from None
    if stat.S_ISLNK(info.st_mode):
        raise ValueError("the submission is a symbolic link: refused (links are never followed)")
    if not stat.S_ISREG(info.st_mode):
        raise ValueError("this is not a regular file (a folder, a pipe or a device)")
    if info.st_nlink > 1:
        raise ValueError(hard_link_refusal(info.st_nlink))
    if info.st_size == 0:
        raise ValueError("the file is empty")
    if info.st_size > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"the file has {info.st_size} bytes, more than the {MAX_NOTEBOOK_BYTES} accepted")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        raise ValueError(f"the file cannot be opened ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        opened = os.fstat(fh.fileno())
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            raise ValueError("the file changed while it was opened")
        if opened.st_nlink > 1:  # a link made between the look and the opening
            raise ValueError(hard_link_refusal(opened.st_nlink))
        data = fh.read(MAX_NOTEBOOK_BYTES + 1)
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"the file has more than the {MAX_NOTEBOOK_BYTES} bytes accepted")
    if not data:
        raise ValueError("the file is empty")
    return data


def _cells_from_bytes(data: bytes) -> list[str]:
    """The sources of the code cells of a notebook given as bytes; ``ValueError`` with the reason."""
    return _code_cells(data)[0]


def _code_cells(data: bytes) -> tuple[list[str], list[int]]:
    """The sources of the code cells of a notebook given as bytes, and each one's number as JupyterLab shows it (the
    status bar's "Cell 23/28": every cell counts, from 1); ``ValueError`` with the reason."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the file is not a notebook (not UTF-8 text)") from None
    if text.startswith("\ufeff"):
        raise ValueError("the file is not a notebook (it starts with a byte-order mark; save it with Jupyter)")
    try:
        nb = json.loads(text)
    except RecursionError:
        raise ValueError("the file is not a notebook (JSON nested too deeply)") from None
    except ValueError as exc:
        raise ValueError(f"the file is not a notebook (not JSON: {type(exc).__name__})") from None
    if not isinstance(nb, dict) or "cells" not in nb and "worksheets" not in nb:
        raise ValueError("the file is JSON but not a notebook")
    version = nb.get("nbformat")
    if version != 4:
        raise ValueError(f"nbformat {version!r} is not supported (save the notebook with Jupyter, nbformat 4)")
    cells = nb.get("cells")
    if not isinstance(cells, list):
        raise ValueError("the notebook's cells are not a list")
    sources, numbers = [], []
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict):
            raise ValueError(f"cell {i + 1} is not a JSON object")
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise ValueError(f"the source of cell {i + 1} is not text")
        sources.append(source)
        numbers.append(i + 1)
    return sources, numbers


def read_submission(path: Path) -> list[str]:
    """The sources of the code cells of notebook ``path``; ``ValueError`` with the reason if it cannot be read.

    Lenient about what grading does not need (outputs, metadata); strict about the rest: a regular file (a symbolic
    link is refused, never followed), at most 20 MiB, UTF-8 JSON (not nested too deeply), an object with
    ``nbformat`` 4 and a list of cells whose sources are text. A ``path`` that is not a str or os.PathLike is a
    ``TypeError``.
    """
    path = check_path("path", path)
    return _cells_from_bytes(_open_regular(path))


# --------------------------------------------------------------------------- which cells run


def answer_cells(sources: list[str], functions: list[str]) -> list[int]:
    """Indices (into ``sources``, a notebook's code cells) of the cells grading runs for ``functions``, in notebook
    order: the cells that define the functions and, transitively, the cells that define the names those cells use
    (a helper or a constant in its own cell, a constant adjusted in a later cell, a set-up function's ``global``, a
    star import), the cells that change those names' objects in place or call the set-up function that assigns them
    (``cache[d] = ...``, ``steps.append(...)``, ``setup()``), at most 40 cells. The rules are those of ``course_pe.coursework._cells.select_cells``; the
    grader applies them inside the submission's sandbox, under its memory limit and deadline."""
    if isinstance(sources, (str, bytes)) or not isinstance(sources, list):
        raise TypeError(f"sources must be a list of str, got {type(sources).__name__}")
    check_str_sequence("sources", sources)
    check_str_sequence("functions", functions)
    return select_cells(sources, list(functions)).cells


# --------------------------------------------------------------------------- grading one submission


def _message(report: CheckReport) -> str:
    if report.passed:
        return f"all {report.cases_total} cases correct"
    which = "hidden case" if report.hidden else "case"
    parts = [f"{which} {report.cases_run} of {report.cases_total}: {report.failed_case}" if report.cases_run else
             f"before any case ran: {report.failed_case}"]
    if report.library_called:
        parts.append(library_sentence(report.library_called))
    if report.unavailable:
        parts.append(unavailable_sentence(report.unavailable))
    for key in ("error", "difference", "expected", "got", "mistake", "hint"):
        value = getattr(report, key)
        if value:
            label = {"difference": "what differs", "mistake": "diagnosis"}.get(key, key)
            parts.append(f"{label}: {value}")
    return "; ".join(parts)


def _description(level: str) -> str:
    """The containment line of the reports for isolation ``level`` (on a machine that allows full isolation, the
    limited level is described as what it is, not as the machine's)."""
    where = containment()
    if level == where.level:
        return where.description
    return Containment(level, notes=where.notes, seccomp=where.seccomp).description


def _explain(text: str, unresolved: list[str]) -> str:
    """``text`` with an explanation added when it is a ``NameError`` for a name that no code cell defines."""
    match = re.search(r"NameError: name '(\w+)' is not defined", text)
    if match is None or match.group(1) not in unresolved:
        return text
    name = match.group(1)
    return (f"{text} (grading runs only the cells that define the exercise's functions and the cells that define, at "
            f"their top level, the names those use; no code cell defines `{name}` at its top level: define it in "
            "the function's cell or in a cell of its own, or call the set-up function that sets it (`global "
            f"{name}`) in a cell of its own)")


def _clean(text: str, limit: int = 300) -> str:
    return "".join(ch if ch.isprintable() else " " for ch in str(text))[:limit]


def _validate_options(cell_timeout: float, call_timeout: float, timeout: float, seed: int | None,
                      limits: SandboxLimits | None, isolation: str | None) -> tuple[float, float, float, int | None]:
    cell_timeout = check_float("cell_timeout", cell_timeout, minimum=0.0, strict_minimum=True)
    call_timeout = check_float("call_timeout", call_timeout, minimum=0.0, strict_minimum=True)
    timeout = check_float("timeout", timeout, minimum=0.0, strict_minimum=True)
    seed = check_optional_int("seed", seed, minimum=0)
    if seed is not None and seed >= 2**63:
        raise ValueError(f"seed must be < 2**63, got {seed}")
    if limits is not None and not isinstance(limits, SandboxLimits):
        raise TypeError(f"limits must be None or a SandboxLimits, got {type(limits).__name__}")
    if isolation is not None:
        check_choice("isolation", isolation, ("full", "limited"))
    return cell_timeout, call_timeout, timeout, seed


def _resolve_exercises(assignment: str | None, exercises: list[str] | None) -> tuple[str | None, list[str] | None]:
    assignment = check_optional_str("assignment", assignment)
    if assignment is not None and assignment not in chapters():
        raise ValueError(f"unknown assignment {assignment!r}; chapters with exercises: {', '.join(chapters())}")
    if exercises is not None:
        check_str_sequence("exercises", exercises)
        unknown = [e for e in exercises if e not in EXERCISES]
        if unknown:
            raise ValueError(f"unknown exercise(s) {unknown} in exercises; known: {sorted(EXERCISES)}")
        if not exercises:
            exercises = None
    return assignment, exercises


class GraderBroken(Exception):
    """The grader itself cannot run submissions here (the sandbox cannot start, or cannot import or run what graded
    code needs): a fault of the machine or the installation, not of any submission. Nothing was graded or recorded."""


#: the self-check's cell: what every graded submission needs (NumPy, PyTorch, the grading build of course_pe, IPython
#: running a cell) and a function the grader then calls over the channel
_SELF_CHECK_CELL = (
    "import numpy as np\nimport torch\nimport course_pe\n"
    "from IPython.core import oinspect  # imported lazily by IPython: fails where the installation is half hidden\n"
    "_total = float(torch.ones(3, dtype=torch.float64) @ torch.arange(3, dtype=torch.float64))\n"
    "def grader_self_check():\n    return np.array([_total, 1.0, 2.0])\n"
)


def self_check(isolation: str | None = None, *, exercises: list[str] | None = None, hide: list[Path] | None = None,
               limits: SandboxLimits | None = None, timeout: float = 120.0) -> None:
    """Start one sandbox as a submission's would be started (``isolation``, the grading build without the functions
    of ``exercises``, the folders ``hide`` hidden) and run a known cell and call in it; raise :class:`GraderBroken`
    with the reason when that fails. The batch and the one-notebook command run it before grading, so that a broken
    environment (for instance a Python installation the sandbox cannot see) stops with an error instead of
    recording every submission as "not graded" with 0 points."""
    level = check_choice("isolation", isolation, ("full", "limited")) if isolation is not None \
        else containment().level
    exercises = exercises_for_chapter(chapters()[0]) if exercises is None else _resolve_exercises(None, exercises)[1]
    timeout = check_float("timeout", timeout, minimum=0.0, strict_minimum=True)
    unavailable = sorted({name for e in exercises or [] for name in EXERCISES[e].library})
    what = f"the grader's self-check at the {level} isolation level failed"
    try:
        with Sandbox(unavailable=unavailable, limits=limits, isolation=level, hide=_check_folders("hide", hide),
                     deadline=time.monotonic() + timeout) as box:
            error = box.run_cell(_SELF_CHECK_CELL, timeout)
            if error is not None:
                raise GraderBroken(f"{what}: a known-good cell raised in the sandbox: {error}")
            got = box.call("grader_self_check", (), timeout)
    except (SandboxDied, SandboxTimeout) as exc:
        raise GraderBroken(f"{what}: {_clean(str(exc), 600)}") from None
    value = got.value if got.status == "ok" else None
    if value is None or np.shape(value) != (3,) or not np.array_equal(np.asarray(value, dtype=np.float64),
                                                                        [3.0, 1.0, 2.0]):
        raise GraderBroken(f"{what}: a known call gave {got.status} {_clean(str(got.error or value), 300)}, not "
                           "[3, 1, 2]")


def _infrastructure_failure(report: GradeReport) -> bool:
    """True when nothing of the submission ran because the grader could not (its sandbox never started, or the grader
    raised): such a 0 says nothing about the student."""
    return bool(report.exercises) and all(e.status == "not graded" for e in report.exercises) and any(
        p.startswith(("the sandbox could not start", "the grader failed on this submission")) for p in report.problems)


def grade_cells(
    cells: list[str],
    assignment: str,
    *,
    student: str = "student",
    notebook: str = "",
    exercises: list[str] | None = None,
    cell_timeout: float = 60.0,
    call_timeout: float = CALL_TIMEOUT,
    timeout: float = 300.0,
    seed: int | None = None,
    limits: SandboxLimits | None = None,
    isolation: str | None = None,
    hide: list[Path] | None = None,
    cell_numbers: list[int] | None = None,
) -> GradeReport:
    """Grade the code cells ``cells`` (their sources, in notebook order) of one submission for ``assignment`` (a
    chapter, or ``"custom"`` with ``exercises``). Never raises for problems in the submission itself.
    ``cell_numbers``: each code cell's number as JupyterLab shows it (see ``_code_cells``), used in the messages
    ("cell 23"); without it the messages count code cells ("code cell 11", from 0).

    This is the grader's one entry point for a single submission (``make grade``, the folder grader and nbgrader's
    sandboxed autograde all go through it): a :class:`GradeReport` with, per exercise, the score, the maximum, the
    function's name, the diagnosis text and whether the failed case was hidden. Time limits in seconds:
    ``cell_timeout`` per answer cell, ``call_timeout`` per exercise (its calls), ``timeout`` for everything (a
    wall-clock limit). ``seed`` draws the hidden cases (default: a fresh secret, recorded in the report).
    ``isolation``: ``"full"`` or ``"limited"`` (default: what the machine allows); ``hide``: folders that must not
    be visible to the submission.
    """
    start = time.monotonic()
    if isinstance(cells, (str, bytes)) or not isinstance(cells, list):
        raise TypeError(f"cells must be a list of str, got {type(cells).__name__}")
    check_str_sequence("cells", cells)
    if cell_numbers is not None and (not isinstance(cell_numbers, list) or len(cell_numbers) != len(cells) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in cell_numbers)):
        raise ValueError("cell_numbers must be a list of int >= 1, one per cell")
    validate_name(check_str("student", student))
    check_str("notebook", notebook)
    cell_timeout, call_timeout, timeout, seed = _validate_options(cell_timeout, call_timeout, timeout, seed, limits,
                                                                  isolation)
    assignment = check_str("assignment", assignment)
    hide = _check_folders("hide", hide)
    if exercises is None:
        if assignment not in chapters():
            raise ValueError(f"unknown assignment {assignment!r}; chapters with exercises: {', '.join(chapters())}")
        exercises = exercises_for_chapter(assignment)
    else:
        _resolve_exercises(None, exercises)
    seed = secrets.randbits(63) if seed is None else seed
    level = isolation or containment().level
    description = _description(level)
    report = GradeReport(student=student, notebook=notebook, assignment=assignment, isolation=description, seed=seed)
    rng = np.random.default_rng(seed)
    cases: dict[str, list[Case]] = {e: EXERCISES[e].cases(rng) for e in exercises}
    functions = [EXERCISES[e].function for e in exercises]
    selection: Selection | None = None
    selected: list[int] = []
    results: dict[str, CheckReport] = {}
    not_graded: dict[str, str] = {}
    cell_errors: dict[int, str] = {}
    skip: set[int] = set()
    remaining = list(exercises)
    restarts = 0
    hard = start + timeout
    limits = limits or SandboxLimits()
    unavailable = sorted({name for e in exercises for name in EXERCISES[e].library})

    def out_of_time() -> bool:
        return time.monotonic() >= hard - 0.05

    while remaining and restarts <= MAX_RESTARTS and not out_of_time():
        box = Sandbox(unavailable=unavailable, limits=limits, isolation=level, hide=hide, deadline=hard)
        try:
            box.start()
        except (SandboxDied, SandboxTimeout) as exc:
            if out_of_time():
                break
            report.problems.append(f"the sandbox could not start ({_clean(str(exc))})")
            break
        if selection is None:
            # Which cells run is decided in the submission's own sandbox, before any of its code runs: analysing a
            # hostile notebook costs its memory and its time limit, never the grader's (and Ctrl-C kills it).
            try:
                selection = box.select(cells, functions, MAX_ANSWER_CELLS, max(hard - time.monotonic(), 1e-3))
            except (SandboxDied, SandboxTimeout, ValueError) as exc:
                box.close()
                if out_of_time():
                    report.problems.append("its code cells could not be analysed within the time limit")
                    break
                why = "the memory limit was reached" if box.oom_killed else _clean(str(exc), 200)
                report.problems.append(f"its code cells could not be analysed ({why})")
                break
            selected = report.cells_run = selection.cells
            if selection.truncated:
                report.problems.append(f"more than {MAX_ANSWER_CELLS} cells define the exercises' functions and the "
                                       "names they use: only the last definitions of each function and the first "
                                       f"{MAX_ANSWER_CELLS} cells in all were run")
            if not selected:  # nothing defines the functions
                box.close()
                for e in exercises:
                    fn = EXERCISES[e].function
                    results[e] = judge(e, cases[e], [Outcome("missing", error=f"no code cell defines `{fn}` (was its "
                                                                               "cell deleted or renamed?)")]
                                       * len(cases[e]))
                remaining = []
                break
        try:
            try:
                error = box.run_cell(GRADING_SETUP, limits.startup_seconds)
            except (SandboxDied, SandboxTimeout) as exc:
                if out_of_time():
                    break
                report.problems.append(f"the declared set-up could not run ({_clean(str(exc))})")
                break
            if error is not None:
                report.problems.append(f"the declared set-up failed: {error} (a problem of the grader, not of the "
                                       "submission)")
                break
            restart = False
            for index in selected:
                if index in skip:
                    continue
                limit = min(cell_timeout, hard - time.monotonic())
                try:
                    error = box.run_cell(cells[index], max(limit, 1e-3))
                except SandboxTimeout:
                    if out_of_time():
                        break
                    cell_errors[index] = f"ran past the time limit of {cell_timeout:g} s (stopped; grading went on " \
                                         "without it)"
                except SandboxDied as exc:
                    why = "the memory limit was reached" if box.oom_killed else _clean(str(exc), 200)
                    cell_errors[index] = f"its process died ({why}); grading went on without it"
                else:
                    if error is not None:
                        cell_errors[index] = _clean(error)
                    continue
                skip.add(index)
                restart = True
                break
            if out_of_time():
                break
            if restart:
                restarts += 1
                continue
            harnessed = [EXERCISES[e].harness for e in remaining if EXERCISES[e].harness]
            try:  # after the answer cells: an exercise whose function takes objects is called through its harness
                harness_error = next((error for error in (box.run_cell(h, limits.startup_seconds) for h in harnessed)
                                      if error is not None), None)
            except (SandboxDied, SandboxTimeout) as exc:
                harness_error = _clean(str(exc))
            if harness_error is not None:
                report.problems.append(f"the grader's harness could not run: {harness_error}")
                break
            for exercise in list(remaining):
                ex = EXERCISES[exercise]
                outcomes: list[Outcome | None] = []
                deadline = min(time.monotonic() + call_timeout, hard)
                dead = False
                for case in cases[exercise]:
                    left = deadline - time.monotonic()
                    try:
                        if left <= 0:
                            raise SandboxTimeout
                        outcome = box.call(ex.function, case.args, left)
                    except SandboxTimeout:
                        box.close()
                        if out_of_time():
                            outcome = None
                        else:
                            outcome = Outcome("timeout", error=f"your function did not return within the time "
                                                               f"limit of {call_timeout:g} s (for all cases together)")
                        dead = True
                    except SandboxDied as exc:
                        why = "the memory limit was reached" if box.oom_killed else _clean(str(exc), 200)
                        outcome = Outcome("error", error=f"the process running your function died ({why})")
                        dead = True
                    if outcome is None:
                        break
                    outcomes.append(outcome)
                    if dead or outcome.status != "ok":
                        break
                if out_of_time() and len(outcomes) < len(cases[exercise]) and \
                        (not outcomes or outcomes[-1].status == "ok"):
                    break
                outcomes += [None] * (len(cases[exercise]) - len(outcomes))
                results[exercise] = judge(exercise, cases[exercise], outcomes)
                remaining.remove(exercise)
                if dead:
                    restarts += 1
                    break
        finally:
            box.close()
    for exercise in remaining:
        if out_of_time():
            not_graded[exercise] = f"the submission ran past the time limit of {timeout:g} s for its whole grading"
        elif restarts > MAX_RESTARTS:
            not_graded[exercise] = "the submission's process failed too often"
        else:
            not_graded[exercise] = "the checks could not run: " + ("; ".join(report.problems) or "unknown reason")
    if any("time limit" in why for why in not_graded.values()):
        report.problems.append(f"stopped: the submission ran past the time limit of {timeout:g} s")
    unresolved = selection.unresolved if selection is not None else []
    first_lines = {i: (cells[i].strip().splitlines() or [""])[0][:50] for i in cell_errors}

    def where(i: int) -> str:
        return f"cell {cell_numbers[i]}" if cell_numbers is not None else f"code cell {i}"

    # a cell that imports what grading does not have (transformers, ...): every failed exercise says so, in the words
    # of the notebook's check
    lacking = sorted({m for error in cell_errors.values() for m in missing_modules(error)})
    for exercise in exercises:
        ex = EXERCISES[exercise]
        visible = sum(1 for c in cases[exercise] if not c.hidden)
        counts = dict(function=ex.function, visible_cases=visible, hidden_cases=len(cases[exercise]) - visible)
        result = results.get(exercise)
        if result is None:
            report.exercises.append(ExerciseGrade(exercise, 0.0, 1.0, "not graded", not_graded[exercise], **counts))
        else:
            message = _message(result)
            extra = [m for m in lacking if m not in result.unavailable]
            if extra and not result.passed:
                message += "; " + unavailable_sentence(extra)
            message = _explain(message, unresolved)
            if not result.passed and result.cases_run == 0 and cell_errors:  # not defined: say what stopped it
                why = f"why: {_crash_cause(ex.function, cells, cell_errors, first_lines, where)}"
                message = message.replace("; hint: ", f"; {why}; hint: ", 1) if "; hint: " in message else \
                    f"{message}; {why}"
            report.exercises.append(ExerciseGrade(exercise, result.score, 1.0, "passed" if result.passed else "failed",
                                                  _clean(message, 2000),
                                                  failed_hidden=result.hidden and not result.passed, **counts))
    report.cell_errors = [f"{where(i)} ({first_lines[i]!r}): {_explain(cell_errors[i], unresolved)}"
                          + (f" ({unavailable_sentence(missing_modules(cell_errors[i]))})"
                             if missing_modules(cell_errors[i]) else "")
                          for i in sorted(cell_errors)]
    report.seconds = time.monotonic() - start
    return report


def _crash_cause(function: str, cells: list[str], cell_errors: dict[int, str], first_lines: dict[int, str],
                 where: Any) -> str:
    """Why ``function`` is not defined although answer cells ran: the error of the cell that should define it (the
    cell stopped before its ``def``), else the errors of the other answer cells."""
    defines = re.compile(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(function)}\b", re.M)
    own = [i for i in sorted(cell_errors) if defines.search(cells[i])]
    shown = own or sorted(cell_errors)
    text = "; ".join(f"{where(i)} ({first_lines[i]!r}) raised {cell_errors[i]}" for i in shown[:3])
    return (f"{text} (the cell stopped there, before `def {function}` ran)" if own else
            f"`{function}` is defined in no cell that ran to its end; answer cells that raised: {text}")


def _unreadable(student: str, notebook: str, assignment: str, exercises: list[str], reason: str,
                isolation: str) -> GradeReport:
    report = GradeReport(student=student, notebook=notebook, assignment=assignment, isolation=isolation)
    report.problems.append(f"could not read the notebook: {reason}")
    report.exercises = [ExerciseGrade(e, 0.0, 1.0, "unreadable", f"could not read the notebook: {reason}",
                                      function=EXERCISES[e].function) for e in exercises]
    return report


def grade_notebook(
    path: Path,
    *,
    student: str | None = None,
    assignment: str | None = None,
    exercises: list[str] | None = None,
    out: Path | None = None,
    cell_timeout: float = 60.0,
    call_timeout: float = CALL_TIMEOUT,
    timeout: float = 300.0,
    seed: int | None = None,
    limits: SandboxLimits | None = None,
    isolation: str | None = None,
) -> GradeReport:
    """Grade one notebook file (see :func:`grade_cells`). Never raises for problems in the submission itself: a
    file that cannot be read (a symbolic link, a folder, empty, not JSON, another nbformat ...) gives rows with 0
    and the reason. A path that does not exist is the caller's error (``ValueError``): nothing is graded.

    ``student``: the gradebook name (default: derived from the file name); ``assignment``: a chapter (default: the
    chapter that names the notebook's folder); ``exercises``: ids chosen by hand instead; ``out``: the gradebook
    folder (kept out of the sandbox's sight; nothing is written here).
    """
    path = check_path("path", path)
    if student is not None:
        try:
            validate_name(student)
        except (TypeError, ValueError) as error:
            raise type(error)(f"student: {error}") from None
    assignment, exercises = _resolve_exercises(assignment, exercises)
    if out is not None:
        out = check_path("out", out)
    _validate_options(cell_timeout, call_timeout, timeout, seed, limits, isolation)
    if not os.path.lexists(path):
        raise ValueError(f"the notebook {str(path)!r} does not exist (nothing was graded)")
    if student is None:
        student = derive_name(path.name[: -len(".ipynb")] if path.name.lower().endswith(".ipynb") else path.name)
    data: bytes | None = None
    try:
        data = _open_regular(path)
        reason = None
    except ValueError as exc:
        reason = str(exc)
    if exercises:
        assignment = assignment or "custom"
    else:
        assignment = assignment or assignment_from_path(path)
        if assignment is None:
            raise ValueError(f"cannot tell which assignment {path.name} is: pass --assignment (ASSIGNMENT=), one of "
                             f"{', '.join(chapters())}{_metadata_hint(data)}")
    ids = exercises or exercises_for_chapter(assignment)
    description = _description(isolation or containment().level)
    if reason is None:
        try:
            cells, numbers = _code_cells(data)  # type: ignore[arg-type]
        except ValueError as exc:
            reason = str(exc)
    if reason is not None:
        return _unreadable(student, str(path), assignment, ids, reason, description)
    hide = [path.resolve().parent] + ([out.resolve()] if out is not None else [])
    return grade_cells(cells, assignment, student=student, notebook=str(path), exercises=exercises,
                       cell_timeout=cell_timeout, call_timeout=call_timeout, timeout=timeout, seed=seed,
                       limits=limits, isolation=isolation, hide=hide, cell_numbers=numbers)


# --------------------------------------------------------------------------- a folder


class GradingInterrupted(Exception):
    """Ctrl-C (or SIGTERM) stopped a batch; the exports were written for what was graded."""


@dataclass
class FolderResult:
    """The outcome of grading a folder: ``reports`` (recorded), ``intake`` (every file and roster student, with what
    happened to it), ``interrupted`` (Ctrl-C stopped the batch) and ``seconds``."""

    reports: list[GradeReport]
    intake: list[Intake]
    interrupted: bool = False
    seconds: float = 0.0
    names: dict[str, str] = field(default_factory=dict)  # student (lower case) -> the roster's display name

    def __post_init__(self) -> None:
        if not isinstance(self.reports, list) or not all(isinstance(r, GradeReport) for r in self.reports):
            raise TypeError(f"reports must be a list of GradeReport, got {type(self.reports).__name__}")
        if not isinstance(self.intake, list) or not all(isinstance(i, Intake) for i in self.intake):
            raise TypeError(f"intake must be a list of Intake, got {type(self.intake).__name__}")
        check_bool("interrupted", self.interrupted)
        self.seconds = check_float("seconds", self.seconds, minimum=0.0)


def grade_folder(folder: Path, *, assignment: str | None = None, out: Path, roster: Path | None = None,
                 roster_column: str | None = None, jobs: int | None = None, progress: bool = True,
                 replace: bool = False, due: str | None = None, late: str | None = None, times: Path | None = None,
                 **options: Any) -> FolderResult:
    """Grade every notebook in ``folder`` (not recursive), ``jobs`` at a time, recording each in the gradebook under
    ``out`` as soon as it is graded and writing the exports at the end (also after Ctrl-C).

    Whose file is which comes from ``roster`` (a CSV file, see ``course_pe.coursework.roster``) or from the file
    names (checked, never renamed); ``roster_column`` names the roster's student column when it is not one of the
    usual ones. Students who already have grades for the assignment make this a ``ValueError``
    before anything is graded, unless ``replace`` is True. ``options``: those of :func:`grade_cells` (timeouts, seed,
    limits, isolation, exercises). Raises :class:`GradingInterrupted` (after writing the exports) on Ctrl-C.

    The roster is kept in the gradebook as the class list of the exports. ``due`` (ISO 8601) and ``late`` (a late
    rule, :func:`course_pe.coursework.exports.parse_late_rule`) are the assignment's due date and late rule; each
    submission's time comes from ``times`` (a CSV file: a student column as in a roster and ``submitted_at``) or else
    from its file's modification time (see :mod:`course_pe.coursework.term`).
    """
    started = time.monotonic()
    folder = check_path("folder", folder)
    if not folder.is_dir():
        raise ValueError(f"folder {str(folder)!r} is not a folder")
    assignment, exercises = _resolve_exercises(assignment, options.pop("exercises", None))
    out = check_path("out", out)
    if roster is not None:
        roster = check_path("roster", roster)
    roster_column = check_optional_str("roster_column", roster_column)
    jobs = check_optional_int("jobs", jobs, minimum=1)
    check_bool("progress", progress)
    check_bool("replace", replace)
    unknown = set(options) - {"cell_timeout", "call_timeout", "timeout", "seed", "limits", "isolation"}
    if unknown:
        raise TypeError(f"unexpected options {sorted(unknown)}")
    _validate_options(options.get("cell_timeout", 60.0), options.get("call_timeout", 60.0),
                      options.get("timeout", 300.0), options.get("seed"), options.get("limits"),
                      options.get("isolation"))
    if exercises:
        assignment = assignment or "custom"
    else:
        assignment = assignment or assignment_from_path(folder / "x.ipynb")
        if assignment is None:
            raise ValueError(f"cannot tell which assignment {folder} holds: pass --assignment (ASSIGNMENT=), one of "
                             f"{', '.join(chapters())}")
    ids = exercises or exercises_for_chapter(assignment)
    from .term import TermSettings

    term = TermSettings.make(due, late, times, roster_column)
    table = read_roster_table(roster, roster_column) if roster is not None else None
    entries = intake(folder, list(table.entries) if table is not None else None)
    to_grade = [e for e in entries if e.status in ("grade", "refused")]
    book = Gradebook(out)
    already = {s.lower() for s in book.graded(assignment)}  # names that differ only in case are one student
    clash = sorted(e.student for e in to_grade if e.student is not None and e.student.lower() in already)
    if clash and not replace:
        shown = ", ".join(clash[:10]) + (f" and {len(clash) - 10} more" if len(clash) > 10 else "")
        raise ValueError(f"{len(clash)} student(s) already have grades for {assignment} in {out}: {shown}. Nothing "
                         "was graded. Pass --replace (REPLACE=1) to grade them again and replace those grades, or "
                         "grade into another folder (GRADES=...)")
    jobs = jobs or max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    level = options.get("isolation") or containment().level
    description = _description(level)
    prepare(level)  # the template process belongs to this (main) thread, not to a worker
    allow_new()
    stop = threading.Event()
    hide = [folder.resolve(), out.resolve()]
    if to_grade:  # before anything is graded or recorded: a broken grader stops here (GraderBroken)
        with serialised_parsing():
            self_check(level, exercises=ids, hide=hide, limits=options.get("limits"))
    if table is not None:  # the class list of the exports (after the self-check: a broken grader records nothing)
        book.store_roster(table, roster.name)
    term.apply(book, assignment)
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    by_student = {e.student: e for e in to_grade}

    def one(entry: Intake) -> GradeReport | None:
        if stop.is_set():
            return None
        student = entry.student
        assert student is not None and entry.raw is not None
        if entry.status == "refused":
            return _unreadable(student, entry.file, assignment, ids, entry.detail, description)
        try:
            data = _open_regular(Path(os.fsdecode(entry.raw)), dir_fd=dir_fd)
            cells, numbers = _code_cells(data)
        except ValueError as exc:
            return _unreadable(student, entry.file, assignment, ids, str(exc), description)
        try:
            report = grade_cells(cells, assignment, student=student, notebook=entry.file,
                                 exercises=exercises, hide=hide, cell_numbers=numbers, **options)
        except Exception as exc:  # never let one student stop the batch
            report = GradeReport(student=student, notebook=entry.file, assignment=assignment, isolation=description)
            report.problems.append(f"the grader failed on this submission: {type(exc).__name__}: {_clean(str(exc))}")
            report.exercises = [ExerciseGrade(e, 0.0, 1.0, "not graded", report.problems[0],
                                              function=EXERCISES[e].function) for e in ids]
        if stop.is_set():
            return None  # interrupted while grading: its partial result is not recorded
        if entry.detail:
            report.problems.insert(0, entry.detail)
        return report

    from tqdm import tqdm

    reports: list[GradeReport] = []
    # Reports of submissions that the grader could not run at all (see _infrastructure_failure) wait here until one
    # submission's sandbox has worked: if none ever does, the grader is broken and none of them is recorded.
    held: list[GradeReport] = []
    sandbox_worked = False
    interrupted = False
    failed = False  # an exception other than Ctrl-C left the loop: the sandboxes are stopped as for Ctrl-C
    previous = {}
    if threading.current_thread() is threading.main_thread():
        def on_signal(signum: int, frame: Any) -> None:
            raise KeyboardInterrupt

        # SIGTERM (kill PID) and SIGHUP (the terminal closed, the SSH connection dropped) stop a batch as Ctrl-C does;
        # a signal this process was started ignoring (nohup, a script's background job) stays ignored
        previous = {sig: signal.signal(sig, on_signal) for sig in _STOP_SIGNALS
                    if sig != signal.SIGINT and signal.getsignal(sig) is not signal.SIG_IGN}

    def record(report: GradeReport) -> None:
        # a Ctrl-C during the recording takes effect after it: a report is recorded and counted, or neither
        with _signals_deferred() as caught:
            book.record(report)
            term.record_submission(book, report, dir_fd, by_student.get(report.student))
            reports.append(report)
        if caught:
            raise KeyboardInterrupt
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="grade")
    futures: dict[Future, Intake] = {}
    parsing = serialised_parsing().__enter__()  # ast.parse is not thread-safe (CPython 3.11): see _cells
    finished = threading.Event()
    if getattr(signal, "SIGHUP", None) in previous:  # (not when the grader was started ignoring hang-ups: nohup)
        threading.Thread(target=_watch_terminal, args=(finished,), name="grade-terminal", daemon=True).start()
    try:
        try:
            futures = {pool.submit(one, e): e for e in to_grade}
            pending = set(futures)
            with tqdm(total=len(to_grade), desc="grading", unit="notebook", disable=not progress,
                      file=_Unbreakable(sys.stderr)) as bar:
                while pending:
                    done, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
                    for future in done:
                        report = future.result()
                        if report is not None:
                            if _infrastructure_failure(report) and not sandbox_worked:
                                held.append(report)
                            else:
                                # checks ran (passed or failed): the sandbox works, the held ones were individual
                                sandbox_worked = sandbox_worked or any(
                                    e.status in ("passed", "failed") for e in report.exercises)
                                if sandbox_worked:
                                    while held:
                                        record(held.pop(0))
                                record(report)
                        bar.update(1)
        except KeyboardInterrupt:
            interrupted = True
        except BaseException:
            failed = True  # (re-raised after the finally block)
            raise
    finally:
        finished.set()
        # From here on a further Ctrl-C (or SIGTERM) cannot skip the exports: it is noted, and acted on after them.
        with _signals_deferred() as caught:
            if interrupted or caught or failed:
                interrupted = interrupted or bool(caught)
                stop.set()
                for future in futures:
                    future.cancel()
                kill_all(refuse_new=True)
                # Only this thread records, and nothing is recorded from now on: export what was recorded before
                # waiting for the workers, so that however long they take, the exports are there.
                book.export()
                # every sandbox is dead, so the workers return at once; a sandbox that was starting is killed as
                # soon as it has started; nothing that finishes now is recorded
                give_up = time.monotonic() + _INTERRUPT_GRACE
                while any(not f.done() for f in futures) and time.monotonic() < give_up:
                    wait([f for f in futures if not f.done()], timeout=0.25)
                    kill_all()
            pool.shutdown(wait=not (interrupted or failed), cancel_futures=True)
            if all(f.done() for f in futures):  # (else a worker is still returning: the lock stays installed)
                parsing.__exit__(None, None, None)
            allow_new()
            os.close(dir_fd)
            broken = bool(held) and not interrupted  # (interrupted: the held ones are reported as not graded)
            if not (interrupted or failed):
                book.export()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        interrupted = interrupted or bool(caught)
    recorded = {r.student for r in reports}
    final = [Intake(e.file, e.student, e.status if e.student in recorded or e.status not in ("grade", "refused")
                    else "not graded (interrupted)" if interrupted else e.status, e.detail, e.raw) for e in entries]
    result = FolderResult(sorted(reports, key=lambda r: r.student.lower()), final, interrupted,
                          time.monotonic() - started,
                          {e.student.lower(): e.name for e in table.entries if e.name} if table is not None else {})
    if interrupted:
        raise GradingInterrupted(result)
    if broken:
        reasons = sorted({r.problems[0] for r in held if r.problems})
        raise GraderBroken(f"no submission could be run: the sandbox failed for all {len(held)} notebook(s) the "
                           f"grader tried ({'; '.join(_clean(x, 300) for x in reasons[:3])}). None of them was "
                           f"recorded; the gradebook in {out} keeps what it had")
    return result


# After Ctrl-C, how long (seconds) grade_folder waits for worker threads whose sandbox was still starting before it
# returns without them (the exports are written before this wait).
_INTERRUPT_GRACE = 60.0
# The signals that stop a grading run: Ctrl-C, kill PID, and the terminal's hang-up.
_STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


def _watch_terminal(finished: threading.Event) -> None:
    """Until ``finished``: when the controlling terminal hangs up, send this process SIGHUP, provided that it runs in
    the process group of the terminal's session leader and in the terminal's foreground.

    The kernel signals a hang-up to the session leader only. A job-control shell (an interactive bash or zsh) runs
    each command line as a process group of its own and passes the hang-up on to its jobs, except those its user put
    in the background to outlive the terminal (``& disown``, Ctrl-Z then ``bg`` and ``disown``): for those, nothing
    must be done here. But ``make`` as the leader (``ssh -t host 'make grade ...'``, ``xterm -e make grade ...``), or a
    non-interactive shell, runs the grader in its own process group and passes no hang-up on: without this watch the
    grader would go on grading the whole class for nobody. ``setsid`` leaves the grader without a controlling
    terminal, and so unwatched. A hung-up terminal reports POLLHUP."""
    try:
        if os.getpgrp() != os.getsid(0):  # a job-control shell's job: the shell decides
            return
    except OSError:
        return
    poller = select.poll()
    watched = 0
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp():  # ENOTTY: not this process's terminal
                poller.register(fd, 0)  # POLLHUP, POLLERR and POLLNVAL are reported whatever is asked for
                watched += 1
        except OSError:
            pass
    while watched and not finished.is_set():
        if any(event & (select.POLLHUP | select.POLLERR) for _, event in poller.poll(500)):
            if not finished.is_set():
                os.kill(os.getpid(), signal.SIGHUP)
            return
        time.sleep(0.5)  # (a hung-up terminal reports at once: the sleep only paces the loop)


class _Unbreakable:
    """A text stream that stops writing, silently, once writing fails: the progress bar on a terminal that was closed
    or piped to a ``tee`` that Ctrl-C killed must not replace the Ctrl-C with a BrokenPipeError (which used to leave
    the stalling submissions running)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.broken = stream is None  # Python's stream for a descriptor that was closed at start (2>&-)

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                self.stream.write(text)
            except (OSError, ValueError):  # EPIPE, EIO after a hang-up; ValueError: the stream was closed
                self._break()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self.stream.flush()
            except (OSError, ValueError):
                self._break()

    def _break(self) -> None:
        # what is still buffered goes to /dev/null, so that the interpreter's last flush does not fail either
        self.broken = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass

    def isatty(self) -> bool:
        try:
            return not self.broken and self.stream.isatty()
        except (OSError, ValueError):
            return False

    def fileno(self) -> int:
        if self.stream is None:
            raise OSError("no stream")
        return self.stream.fileno()


class _signals_deferred:
    """Within this block (in the main thread) SIGINT, SIGTERM and SIGHUP do not interrupt: they are recorded in the
    list the block receives, and the previous handlers come back at its end; a signal that was ignored stays ignored.
    Elsewhere it does nothing."""

    def __init__(self) -> None:
        self.caught: list[int] = []
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> list[int]:
        if threading.current_thread() is threading.main_thread():
            for sig in _STOP_SIGNALS:
                if signal.getsignal(sig) is not signal.SIG_IGN:  # ignored (a background job's SIGINT): stays so
                    self.previous[sig] = signal.signal(sig, lambda signum, frame: self.caught.append(signum))
        return self.caught

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def summary_table(result: FolderResult | list[GradeReport], names: dict[str, str] | None = None) -> str:
    """A plain-text table: one line per student (with the roster's name beside the login), how many passed each
    exercise, then every exercise that was not graded, with its reason (its cell is empty in every export, never 0),
    every file that was not graded (unknown, duplicate, refused ...) and every roster student without a submission.
    ``names``: student (lower case) -> display name (default: the folder result's)."""
    if not isinstance(result, FolderResult) and (not isinstance(result, list) or not all(
            isinstance(r, GradeReport) for r in result)):
        raise TypeError(f"result must be a FolderResult or a list of GradeReport, got {type(result).__name__}")
    reports = result.reports if isinstance(result, FolderResult) else result
    entries = result.intake if isinstance(result, FolderResult) else []
    if names is None:
        names = result.names if isinstance(result, FolderResult) else {}
    lines: list[str] = []
    if reports:
        ids = list(dict.fromkeys(e.exercise for r in reports for e in r.exercises))
        width = max(8, *(len(r.student) for r in reports))
        shown = {r.student: _clean(names.get(r.student.lower(), ""), 24) for r in reports}
        name_width = max((len(n) for n in shown.values()), default=0)
        name_column = f"  {'name':<{name_width}}" if name_width else ""
        short = {e: e[:12] for e in ids}
        header = f"{'student':<{width}}{name_column}  {'score':>7}  " + "  ".join(f"{short[e]:>12}" for e in ids) \
            + "  notes"
        lines += [header, "-" * len(header)]
        for r in reports:
            status = {e.exercise: e.status for e in r.exercises}
            notes = "; ".join(r.problems + [f"{len(r.cell_errors)} answer cell(s) raised" if r.cell_errors else ""])
            name = f"  {shown[r.student]:<{name_width}}" if name_width else ""
            lines.append(f"{r.student:<{width}}{name}  {r.score:>3g}/{r.max_score:<3g}  "
                         + "  ".join(f"{status.get(e, '-'):>12}" for e in ids) + f"  {notes.strip('; ')[:80]}")
        lines.append("-" * len(header))
        passed = {e: sum(1 for r in reports for g in r.exercises if g.exercise == e and g.status == "passed")
                  for e in ids}
        lines.append(f"{'passed':<{width}}{' ' * len(name_column)}  {'':>7}  "
                     + "  ".join(f"{passed[e]:>9}/{len(reports):<2}" for e in ids))
    else:
        lines.append("no submissions graded")
    waiting = [(r, g) for r in reports for g in r.exercises if g.status == "not graded"]
    if waiting:
        lines.append("")
        lines.append(f"needs attention: {len(waiting)} exercise(s) of {len({r.student for r, _ in waiting})} "
                     "student(s) NOT GRADED (the grader could not finish them; their cells are empty in every export, "
                     "never 0, and attention.csv lists them): grade these files again")
        for r, g in waiting:
            who = f"{r.student} ({names[r.student.lower()]})" if names.get(r.student.lower()) else r.student
            lines.append(f"  {_clean(who, 60)}, {r.notebook}: {g.exercise}: {_clean(g.message, 200)}")
    others = [e for e in entries if e.status not in ("grade", "refused")]
    if others:
        lines.append("")
        lines.append("not graded:")
        for e in others:
            what = e.file or f"(student {e.student})"
            name = names.get(e.student.lower(), "") if e.student else ""
            lines.append(f"  {e.status:>12}  {_clean(what, 80)}: {_clean(e.detail, 160)}"
                         + (f" [{_clean(name, 60)}]" if name else ""))
    return "\n".join(lines)


def not_graded(reports: list[GradeReport]) -> int:
    """How many exercises of ``reports`` were not graded (the grader could not finish them)."""
    return sum(1 for r in reports for g in r.exercises if g.status == "not graded")


# --------------------------------------------------------------------------- command line


def _truthy(text: str) -> bool:
    return text.strip().lower() in ("1", "yes", "true", "on")


def main(argv: list[str] | None = None) -> int:
    """The command line (``python -m course_pe.coursework.grade --help``); ``argv`` is None (``sys.argv``) or a list of
    str."""
    argv = sys.argv[1:] if argv is None else check_argv("argv", argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook", type=Path, nargs="?")
    parser.add_argument("--dir", type=Path, help="grade every notebook in this folder")
    parser.add_argument("--roster", type=Path, help="CSV file: whose submission is which (see roster.py)")
    parser.add_argument("--roster-column", help="the roster's student column, when it is none of the usual ones")
    parser.add_argument("--from-env", action="store_true",
                        help="read NB, DIR, ROSTER, ROSTER_COLUMN, STUDENT, ASSIGNMENT, JOBS, GRADES (the --out folder), "
                             "REPLACE, ISOLATION, DUE, LATE and TIMES from the environment (used by make)")
    parser.add_argument("--student", help="name used in the gradebook (one notebook; default: the file name)")
    parser.add_argument("--assignment", help=f"chapter: {', '.join(chapters())} (default: from the folder's name)")
    parser.add_argument("--exercises", help="comma-separated exercise ids instead of an assignment's")
    parser.add_argument("--out", type=Path, default=Path("grades"))
    parser.add_argument("--jobs", type=int, help="submissions graded at once with --dir (default: available cores)")
    parser.add_argument("--replace", action="store_true", help="replace existing grades of the students graded")
    parser.add_argument("--isolation", choices=("full", "limited"),
                        help="'limited' allows grading without root (unsafe with hostile submissions)")
    parser.add_argument("--cell-timeout", type=float, default=60, help="seconds per answer cell")
    parser.add_argument("--call-timeout", type=float, default=CALL_TIMEOUT,
                        help="seconds per exercise (its calls only)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds for a whole submission (wall clock)")
    parser.add_argument("--seed", type=int, help="seed of the hidden cases (default: a fresh secret per submission)")
    parser.add_argument("--due", help="the assignment's due date, ISO 8601 (2026-12-05T23:59, local time without an "
                                      "offset); kept in the gradebook")
    parser.add_argument("--late", help="late rule: none (record lateness only, the default), zero, or 10%%/day "
                                       "(a share of the maximum per started day or hour)")
    parser.add_argument("--times", type=Path, help="CSV file of submission times (a student column and "
                                                   "submitted_at); default: each file's modification time")
    args = parser.parse_args(argv)
    if args.from_env:
        env = {k: os.environ.get(k, "").strip() for k in ("NB", "DIR", "ROSTER", "ROSTER_COLUMN", "STUDENT",
                                                           "ASSIGNMENT", "JOBS", "GRADES", "REPLACE", "ISOLATION",
                                                           "DUE", "LATE", "TIMES")}
        if env["GRADES"]:
            args.out = Path(env["GRADES"])
        args.notebook = Path(env["NB"]) if env["NB"] else None
        args.dir = Path(env["DIR"]) if env["DIR"] else None
        args.roster = Path(env["ROSTER"]) if env["ROSTER"] else None
        args.roster_column = env["ROSTER_COLUMN"] or None
        args.student = env["STUDENT"] or None
        args.assignment = env["ASSIGNMENT"] or None
        args.replace = _truthy(env["REPLACE"])
        args.due = env["DUE"] or None
        args.late = env["LATE"] or None
        args.times = Path(env["TIMES"]) if env["TIMES"] else None
        if env["ISOLATION"]:
            if env["ISOLATION"] not in ("full", "limited"):
                print(f"error: ISOLATION must be full or limited, not {env['ISOLATION']!r}", file=sys.stderr)
                return 2
            args.isolation = env["ISOLATION"]
        if env["JOBS"]:
            if not env["JOBS"].isdigit() or int(env["JOBS"]) < 1:
                print(f"error: JOBS must be a positive integer, not {env['JOBS']!r}", file=sys.stderr)
                return 2
            args.jobs = int(env["JOBS"])
    if (args.notebook is None) == (args.dir is None):
        print("usage: make grade NB=path/to/submission.ipynb STUDENT=name [ASSIGNMENT=chapter] [REPLACE=1]\n"
              "   or: make grade DIR=path/to/folder/ [ROSTER=roster.csv] [ASSIGNMENT=chapter] [JOBS=n] [REPLACE=1]",
              file=sys.stderr)
        return 2
    where = containment()
    if args.isolation == "full" and where.level != "full" or args.isolation is None and where.level != "full":
        print("error: full isolation is not available here (" + "; ".join(where.notes) + "). Grade as root on "
              "Linux, or pass ISOLATION=limited (--isolation limited) to grade anyway: a hostile submission can then "
              "read the book and the gradebook and change grades (see the instructor guide, threat model)",
              file=sys.stderr)
        return 2
    exercises = [e.strip() for e in args.exercises.split(",") if e.strip()] if args.exercises else None
    options = dict(exercises=exercises, cell_timeout=args.cell_timeout, call_timeout=args.call_timeout,
                   timeout=args.timeout, seed=args.seed, isolation=args.isolation)
    previous = {sig: signal.signal(sig, _interrupt) for sig in _STOP_SIGNALS if sig != signal.SIGINT and
                signal.getsignal(sig) is not signal.SIG_IGN} \
        if threading.current_thread() is threading.main_thread() else {}
    try:
        return _run(args, options, exercises, where)
    except KeyboardInterrupt:  # before a batch started grading, or during one notebook: nothing was recorded
        print("interrupted: nothing was graded or recorded (every sandbox is killed at exit)", file=sys.stderr)
        return 130
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


_BROKEN_HELP = ("The grader, not a submission, is at fault: nothing was graded or recorded, and the gradebook keeps "
                "what it had. Check that the course's installation works (make install), try ISOLATION=limited to "
                "see whether only the full isolation level fails, and see the instructor guide (grading, "
                "troubleshooting).")


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _run(args: argparse.Namespace, options: dict[str, Any], exercises: list[str] | None, where: Any) -> int:
    try:
        if args.dir is not None:
            if args.student:
                raise ValueError("--student (STUDENT=) names one submission; with --dir names come from a roster "
                                 "(ROSTER=) or the file names")
            try:
                result = grade_folder(args.dir, assignment=args.assignment, out=args.out, roster=args.roster,
                                      roster_column=args.roster_column, jobs=args.jobs, replace=args.replace,
                                      due=args.due, late=args.late, times=args.times, **options)
            except GraderBroken as broken:
                print(f"error: {broken}\n{_BROKEN_HELP}", file=sys.stderr)
                return 3
            except GradingInterrupted as stop:
                result = stop.args[0]
                print(summary_table(result))
                print(f"interrupted: {len(result.reports)} notebook(s) graded and recorded before the stop; every "
                      f"sandbox was killed; wrote {args.out / 'grades_wide.csv'} and {args.out / 'grades_long.csv'}",
                      file=sys.stderr)
                return 130
            print(summary_table(result))
            description = _description(options["isolation"] or where.level)
            graded_as = {r.assignment for r in result.reports}
            for name in sorted(graded_as):
                statistics = args.out / name / "statistics.txt"
                if statistics.exists():
                    print("\n" + statistics.read_text(encoding="utf-8").rstrip())
            print(f"graded {len(result.reports)} notebooks in {result.seconds:.0f} s (isolation {description}); wrote "
                  f"{args.out / 'gradebook.sqlite'}, {args.out / 'grades_wide.csv'}, {args.out / 'grades_long.csv'}, "
                  f"the LMS files {args.out / 'canvas.csv'} and {args.out / 'moodle.csv'} (and per assignment in "
                  f"{args.out / '<assignment>'}/), {args.out / 'attention.csv'}, and each student's feedback in "
                  f"{args.out / '<assignment>' / 'feedback'}/")
            if not_graded(result.reports):
                print(f"exit status 4: {not_graded(result.reports)} exercise(s) were not graded (see 'needs attention' "
                      "above): grade those notebooks again before importing their grades", file=sys.stderr)
                return 4
            return 0
        if args.roster is not None:
            raise ValueError("--roster (ROSTER=) is for a folder (DIR=); with one notebook pass STUDENT=")
        if args.student is None:
            raise ValueError("STUDENT= (--student) is required with one notebook: the file name is not an identity")
        validate_name(args.student)
        if not os.path.lexists(args.notebook):
            raise ValueError(f"the notebook {str(args.notebook)!r} does not exist; nothing was graded or recorded")
        book = Gradebook(args.out)
        from .term import TermSettings

        term = TermSettings.make(args.due, args.late, args.times, args.roster_column)
        assignment = args.assignment or ("custom" if exercises else assignment_from_path(args.notebook))
        if assignment and not args.replace:
            same = book.same_student(assignment, args.student)
            if same is not None:
                raise ValueError(f"{args.student} already has a grade for {assignment} (as {same[0]!r}, graded "
                                 f"{same[1]}; names that differ only in case are one student); pass REPLACE=1 "
                                 "(--replace) to replace it")
        try:
            self_check(options["isolation"] or where.level, exercises=exercises or (
                exercises_for_chapter(assignment) if assignment in chapters() else None),
                hide=[args.notebook.resolve().parent, args.out.resolve()])
            report = grade_notebook(args.notebook, student=args.student, assignment=args.assignment, out=args.out,
                                    **options)
            if _infrastructure_failure(report):
                raise GraderBroken(f"the sandbox failed for {args.notebook} before any of its code ran "
                                   f"({_clean(report.problems[0], 400)}); nothing was recorded")
            term.apply(book, report.assignment)
        except GraderBroken as broken:
            print(f"error: {broken}\n{_BROKEN_HELP}", file=sys.stderr)
            return 3
        with _signals_deferred() as caught:  # recorded and exported whole, or not at all
            json_file = book.record(report)
            term.record_path(book, report.student, report.assignment, args.notebook)
            book.export()
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(report.text())
    print(f"wrote {json_file}, {args.out / 'gradebook.sqlite'}, {args.out / 'grades_wide.csv'}, "
          f"{args.out / 'grades_long.csv'}, the LMS files and "
          f"{args.out / report.assignment / 'feedback' / (report.student + '.txt')}")
    if caught:
        return 130
    if not_graded([report]):
        print(f"exit status 4: {not_graded([report])} exercise(s) were not graded (the grader could not finish them): "
              "grade this notebook again (REPLACE=1)", file=sys.stderr)
        return 4
    return 0


if __name__ == "__main__":
    # Output to a closed terminal or to a pipe whose reader is gone (``| tee log`` killed by the same Ctrl-C) is dropped
    # instead of raising: the grading, the exports and the exit status do not depend on who still reads the output.
    sys.stdout, sys.stderr = _Unbreakable(sys.stdout), _Unbreakable(sys.stderr)
    status = main()
    # everything is recorded and exported: a further Ctrl-C would only print a traceback from the interpreter's exit
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if status == 130:
        # Interrupted: every sandbox has been killed and the exports are written, but a worker thread may still be
        # waiting for a sandbox that was starting (a busy machine can take long to start one); the interpreter's exit
        # would join it. Leave at once: what a worker still holds dies with this process (the keepers' parent-death
        # signal kills their children).
        sys.stdout.flush()
        sys.stderr.flush()
        from .grading_build import remove_work_root

        remove_work_root()  # (the exit below skips the atexit clean-up) the sandboxes are dead: their folders go
        os._exit(status)
    sys.exit(status)
