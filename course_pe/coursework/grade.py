"""Grade students' notebooks: one submission, or a whole folder in parallel.

    python -m course_pe.coursework.grade submission.ipynb [--student NAME] [--assignment CHAPTER] [--out grades/]
    python -m course_pe.coursework.grade --dir submissions/ [--assignment CHAPTER] [--jobs N] [--out grades/]
    make grade NB=path/to/submission.ipynb [STUDENT=name] [ASSIGNMENT=chapter]
    make grade DIR=path/to/folder/ [ASSIGNMENT=chapter] [JOBS=n]

The submission is untrusted code; the grader is the only trusted party.

* **Which exercises.** Those of the assignment: ``--assignment`` (a chapter name such as ``relative``), or else the
  chapter named by the folder or the file name; ``--exercises`` picks ids by hand. Nothing in the submission (its
  metadata included) decides what is graded.
* **Reading.** The notebook is read as JSON by the grader (nbformat 4 only). Only the sources of code cells are
  used. A file that cannot be read (missing, a folder, empty, not JSON, another nbformat, a cell that is not text)
  still gets a row per exercise, with score 0 and the reason.
* **Running.** The code cells run one after another in a sandboxed child process (:mod:`course_pe.coursework.sandbox`: resource
  limits, fresh folder, scrubbed environment; as root also an unprivileged user id, no network, and the book, the
  gradebook and the other submissions hidden). A cell that raises is recorded and the next cell runs; a cell that
  runs past ``--cell-timeout`` or kills its process is skipped and the notebook is run again without it.
* **Checking.** The library functions that implement the assignment's exercises are made unavailable (a call is
  recorded and fails). For each exercise the grader sends the inputs of every case, visible and hidden (randomised,
  seeded by ``--seed``), receives only the raw answers (arrays of numbers as ``.npy``, size-limited) and computes the
  verdict itself (:func:`course_pe.coursework.exercises.judge`). Each exercise has its own time limit (``--call-timeout``, for
  the student's function calls only); a hang or a crash costs that exercise, and the rest are checked in a new
  process.
* **Recording.** A report on stdout (first line ``Grade report for NAME (NOTEBOOK): X / Y``), the gradebook
  ``<out>/gradebook.sqlite`` (one row per student and exercise; a regrade replaces the student's rows for that
  assignment), the LMS exports ``<out>/grades_wide.csv`` and ``<out>/grades_long.csv``, and
  ``<out>/<assignment>/<student>.json`` with every detail (see :mod:`course_pe.coursework.gradebook`).

Student names: letters, digits, ``-``, ``_`` and ``.``, starting with a letter or digit, at most 64 characters. With
``--dir`` they come from the file names, sanitised (other characters become ``_``). Exit status 0 when grading
completed (whatever the scores), 2 when the arguments are wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .exercises import EXERCISES, CheckReport, Outcome, chapters, exercises_for_chapter, judge
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
from .gradebook import Gradebook
from .sandbox import Sandbox, SandboxDied, SandboxLimits, SandboxTimeout, isolation_level

__all__ = [
    "ExerciseGrade",
    "GradeReport",
    "assignment_from_path",
    "grade_folder",
    "grade_notebook",
    "main",
    "read_submission",
    "sanitize_name",
    "validate_name",
]

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_NOTEBOOK_BYTES = 20 * 2**20
MAX_RESTARTS = 4
#: the statuses of an :class:`ExerciseGrade`
GRADE_STATUSES = ("passed", "failed", "not graded", "unreadable")


@dataclass
class ExerciseGrade:
    """The grade of one exercise: ``status`` is ``passed``, ``failed``, ``not graded`` or ``unreadable``."""

    exercise: str
    score: float
    max_score: float
    status: str
    message: str

    def __post_init__(self) -> None:
        check_str("exercise", self.exercise)
        self.max_score = check_float("max_score", self.max_score, minimum=0.0)
        self.score = check_float("score", self.score, minimum=0.0, maximum=self.max_score)
        check_choice("status", self.status, GRADE_STATUSES)
        check_str("message", self.message)


@dataclass
class GradeReport:
    """Everything about one graded submission (``seed`` reproduces the hidden cases)."""

    student: str
    notebook: str
    assignment: str = ""
    exercises: list[ExerciseGrade] = field(default_factory=list)
    cell_errors: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    isolation: str = ""
    seed: int = 0
    seconds: float = 0.0

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
            lines.append("  cells that raised an error while running the notebook:")
            lines += [f"    - {err}" for err in self.cell_errors]
        lines.append(f"  assignment {self.assignment}; isolation {self.isolation}; graded in {self.seconds:.1f} s")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return asdict(self) | {"score": self.score, "max_score": self.max_score}


# --------------------------------------------------------------------------- names and assignments


def validate_name(name: str) -> str:
    """Return ``name`` if it is a valid student name, else raise ``ValueError`` naming the rule."""
    check_str("name", name)
    if not NAME_PATTERN.fullmatch(name):
        raise ValueError(f"invalid student name {name!r}: use letters, digits, '-', '_' and '.', starting with a "
                         "letter or digit, at most 64 characters (no '/' or other path parts)")
    return name


def sanitize_name(text: str) -> str:
    """A valid student name made from ``text`` (a file name): other characters become ``_``."""
    check_str("text", text)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", text)
    name = re.sub(r"^[^A-Za-z0-9]+", "", name)[:64]
    return name or "student"


def assignment_from_path(path: Path) -> str | None:
    """The chapter named by the folder holding ``path`` or by its file name (longest match), if exactly one."""
    path = check_path("path", path)
    for text in (path.parent.name, path.stem):
        found = [c for c in chapters() if c in text]
        if found:
            longest = max(found, key=len)
            if all(c in longest for c in found):
                return longest
    return None


# --------------------------------------------------------------------------- reading a submission


def read_submission(path: Path) -> list[str]:
    """The sources of the code cells of notebook ``path``; ``ValueError`` with the reason if it cannot be read.

    Lenient about what grading does not need (outputs, metadata); strict about the rest: a file (not a folder),
    at most 20 MiB, UTF-8 JSON, an object with ``nbformat`` 4 and a list of cells whose sources are text.
    A ``path`` that is not a str or os.PathLike is a ``TypeError``.
    """
    path = check_path("path", path)
    if not path.exists():
        raise ValueError("the file does not exist")
    if not path.is_file():
        raise ValueError("this is not a file (a folder?)")
    size = path.stat().st_size
    if size == 0:
        raise ValueError("the file is empty")
    if size > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"the file has {size} bytes, more than the {MAX_NOTEBOOK_BYTES} accepted")
    try:
        nb = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"the file is not a notebook (not JSON: {type(exc).__name__})") from None
    if not isinstance(nb, dict) or "cells" not in nb and "worksheets" not in nb:
        raise ValueError("the file is JSON but not a notebook")
    version = nb.get("nbformat")
    if version != 4:
        raise ValueError(f"nbformat {version!r} is not supported (save the notebook with Jupyter, nbformat 4)")
    cells = nb.get("cells")
    if not isinstance(cells, list):
        raise ValueError("the notebook's cells are not a list")
    sources = []
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict):
            raise ValueError(f"cell {i} is not a JSON object")
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise ValueError(f"the source of cell {i} is not text")
        sources.append(source)
    return sources


# --------------------------------------------------------------------------- grading one submission


def _repository_root() -> Path | None:
    root = Path(__file__).resolve().parent.parent
    return root if (root / "book").is_dir() or (root / "_toc.yml").exists() else None


def _hidden_folders(path: Path, out: Path | None) -> tuple[list[Path], list[Path]]:
    """Folders hidden from the sandbox, and folders inside them kept visible (read-only)."""
    hide = [Path(path).resolve().parent]
    if out is not None:
        hide.append(Path(out).resolve())
    root = _repository_root()
    if root is not None:
        hide.append(root)
        git = root / ".git"
        if git.is_file():  # a git worktree: the history (with the solutions) lives in the main repository's .git
            text = git.read_text(encoding="utf-8", errors="replace").strip()
            if text.startswith("gitdir:"):
                gitdir = (root / text[len("gitdir:"):].strip()).resolve()
                hide.append(gitdir.parent.parent if gitdir.parent.name == "worktrees" else gitdir)
    keep = [Path(__file__).resolve().parent, Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()]
    for folder in keep:  # an ancestor that others cannot enter (e.g. /root holding pyenv) is replaced by a stub
        for ancestor in folder.parents:
            try:
                if not ancestor.stat().st_mode & 0o001:
                    hide.append(ancestor)
            except OSError:
                pass
    vital = [Path(p) for p in ("/usr", "/etc", "/lib", "/lib64", "/bin", "/dev", "/proc", "/sys", "/tmp")]
    unique = sorted(set(hide), key=lambda p: len(p.parts))
    return [h for h in unique if not any(v == h or h in v.parents for v in vital) and not any(
        k == h or k in h.parents for k in keep)], keep


def _message(report: CheckReport) -> str:
    if report.passed:
        return f"all {report.cases_total} cases correct"
    which = "hidden case" if report.hidden else "case"
    parts = [f"{which} {report.cases_run} of {report.cases_total}: {report.failed_case}"]
    if report.library_called:
        parts.append(f"called {', '.join(report.library_called)} (not allowed: implement it yourself)")
    for key in ("error", "difference", "expected", "got", "mistake", "hint"):
        value = getattr(report, key)
        if value:
            label = {"difference": "what differs", "mistake": "diagnosis"}.get(key, key)
            parts.append(f"{label}: {value}")
    return "; ".join(parts)


def _clean(text: str, limit: int = 300) -> str:
    return "".join(ch if ch.isprintable() else " " for ch in text)[:limit]


def grade_notebook(
    path: Path,
    *,
    student: str | None = None,
    assignment: str | None = None,
    exercises: list[str] | None = None,
    out: Path | None = None,
    cell_timeout: float = 120.0,
    call_timeout: float = 60.0,
    timeout: float = 900.0,
    seed: int | None = None,
    limits: SandboxLimits | None = None,
) -> GradeReport:
    """Grade one submission. Never raises for problems in the submission itself.

    ``assignment``: a chapter (default: from the path, see :func:`assignment_from_path`); ``exercises``: ids chosen
    by hand instead. ``out``: the gradebook folder (hidden from the sandbox; nothing is written here). Time limits in
    seconds: ``cell_timeout`` per code cell, ``call_timeout`` per exercise (its function calls only), ``timeout`` for
    running all cells. ``seed`` draws the hidden cases (default: random, recorded in the report).
    """
    start = time.monotonic()
    path = check_path("path", path)
    if student is not None:
        try:
            validate_name(student)
        except (TypeError, ValueError) as error:
            raise type(error)(f"student: {error}") from None
    student = student if student is not None else validate_name(sanitize_name(path.stem))
    assignment = check_optional_str("assignment", assignment)
    if assignment is not None and assignment not in chapters():
        raise ValueError(f"unknown assignment {assignment!r}; chapters with exercises: {', '.join(chapters())}")
    if exercises is not None:
        check_str_sequence("exercises", exercises)
    if out is not None:
        out = check_path("out", out)
    cell_timeout = check_float("cell_timeout", cell_timeout, minimum=0.0, strict_minimum=True)
    call_timeout = check_float("call_timeout", call_timeout, minimum=0.0, strict_minimum=True)
    timeout = check_float("timeout", timeout, minimum=0.0, strict_minimum=True)
    seed = check_optional_int("seed", seed, minimum=0)
    if limits is not None and not isinstance(limits, SandboxLimits):
        raise TypeError(f"limits must be None or a SandboxLimits, got {type(limits).__name__}")
    if exercises:
        unknown = [e for e in exercises if e not in EXERCISES]
        if unknown:
            raise ValueError(f"unknown exercise(s) {unknown} in exercises; known: {sorted(EXERCISES)}")
        assignment = assignment or "custom"
    else:
        assignment = assignment or assignment_from_path(path)
        if assignment is None:
            raise ValueError(f"cannot tell which assignment {path.name} is: pass --assignment (ASSIGNMENT=), one of "
                             f"{', '.join(chapters())}")
        exercises = exercises_for_chapter(assignment)
    seed = secrets.randbelow(2**31) if seed is None else int(seed)
    report = GradeReport(student=student, notebook=str(path), assignment=assignment, isolation=isolation_level(),
                         seed=seed)
    try:
        cells = read_submission(path)
    except (ValueError, OSError) as exc:
        reason = f"could not read the notebook: {exc}"
        report.problems.append(reason)
        report.exercises = [ExerciseGrade(e, 0.0, 1.0, "unreadable", reason) for e in exercises]
        report.seconds = time.monotonic() - start
        return report

    rng = np.random.default_rng(seed)
    cases = {e: EXERCISES[e].cases(rng) for e in exercises}
    library = sorted({name for e in exercises for name in EXERCISES[e].library})
    hide, keep = _hidden_folders(path, out)
    results: dict[str, CheckReport] = {}
    cell_errors: dict[int, str] = {}
    skip: set[int] = set()
    remaining = list(exercises)
    restarts = 0
    cells_deadline = time.monotonic() + timeout
    while remaining and restarts <= MAX_RESTARTS:
        sandbox = Sandbox(limits=limits or SandboxLimits(), hide=hide, keep=keep, isolation=report.isolation)
        try:
            sandbox.start()
        except (SandboxDied, SandboxTimeout) as exc:
            report.problems.append(f"the sandbox could not start ({_clean(str(exc))})")
            break
        try:
            # 1. the notebook's code cells, in order
            restart = False
            for index, source in enumerate(cells):
                if index in skip:
                    continue
                left = cells_deadline - time.monotonic()
                if left <= 0:
                    if "time limit" not in " ".join(report.problems):
                        report.problems.append(f"the notebook's cells ran past the limit of {timeout:g} s; the "
                                               "remaining cells were not run")
                    break
                try:
                    error = sandbox.run_cell(source, min(cell_timeout, left))
                except SandboxTimeout:
                    cell_errors[index] = f"ran past the time limit of {min(cell_timeout, left):g} s (interrupted; " \
                                         "the notebook was run again without it)"
                except SandboxDied:
                    cell_errors[index] = "its process died (memory limit, os._exit, a signal ...); the notebook " \
                                         "was run again without it"
                else:
                    if error is not None:
                        cell_errors[index] = _clean(error)
                    continue
                skip.add(index)
                restart = True
                break
            if restart:
                restarts += 1
                continue
            # 2. the checks, with the library's implementations unavailable
            try:
                sandbox.lock(library)
            except (SandboxDied, SandboxTimeout):
                restarts += 1
                continue
            for exercise in list(remaining):
                ex = EXERCISES[exercise]
                outcomes: list[Outcome | None] = []
                deadline = time.monotonic() + call_timeout
                dead = False
                for case in cases[exercise]:
                    try:
                        outcome = sandbox.call(ex.function, case.args, max(0.0, deadline - time.monotonic()))
                    except SandboxTimeout:
                        outcome = Outcome("timeout", error=f"your function did not return within the time limit of "
                                                           f"{call_timeout:g} s (for all cases together)")
                        dead = True
                    except SandboxDied as exc:
                        outcome = Outcome("error", error=f"the process running your function died ({_clean(str(exc))}; "
                                                         "memory limit, os._exit, a signal ...)")
                        dead = True
                    outcomes.append(outcome)
                    if dead or outcome.status != "ok":
                        break
                outcomes += [None] * (len(cases[exercise]) - len(outcomes))
                results[exercise] = judge(exercise, cases[exercise], outcomes)
                remaining.remove(exercise)
                if dead:
                    restarts += 1
                    break
        finally:
            sandbox.close()
    for exercise in exercises:
        result = results.get(exercise)
        if result is None:
            why = "the sandbox failed too often" if restarts > MAX_RESTARTS else "the checks could not run"
            report.exercises.append(ExerciseGrade(exercise, 0.0, 1.0, "not graded", why))
        else:
            report.exercises.append(ExerciseGrade(exercise, result.score, 1.0, "passed" if result.passed else "failed",
                                                  _clean(_message(result), 2000)))
    first_lines = {i: (cells[i].strip().splitlines() or [""])[0][:50] for i in cell_errors}
    report.cell_errors = [f"cell {i} ({first_lines[i]!r}): {cell_errors[i]}" for i in sorted(cell_errors)]
    report.seconds = time.monotonic() - start
    return report


# --------------------------------------------------------------------------- a folder


def grade_folder(folder: Path, *, assignment: str | None = None, out: Path, jobs: int | None = None,
                 progress: bool = True, **options) -> list[GradeReport]:
    """Grade every ``*.ipynb`` in ``folder`` (not recursive), ``jobs`` at a time, recording each in the gradebook
    under ``out`` as soon as it is graded. Names come from the file names (sanitised, made unique)."""
    folder = check_path("folder", folder)
    if not folder.is_dir():
        raise ValueError(f"folder {str(folder)!r} is not a folder")
    assignment = check_optional_str("assignment", assignment)
    if assignment is not None and assignment not in chapters():
        raise ValueError(f"unknown assignment {assignment!r}; chapters with exercises: {', '.join(chapters())}")
    out = check_path("out", out)
    jobs = check_optional_int("jobs", jobs, minimum=1)
    check_bool("progress", progress)
    assignment = assignment or assignment_from_path(folder / "x.ipynb")
    if assignment is None and not options.get("exercises"):
        raise ValueError(f"cannot tell which assignment {folder} holds: pass --assignment (ASSIGNMENT=), one of "
                         f"{', '.join(chapters())}")
    files = sorted(p for p in folder.iterdir() if p.name.endswith(".ipynb"))
    names: dict[Path, str] = {}
    used: set[str] = set()
    for p in files:
        name, n = sanitize_name(p.name[: -len(".ipynb")]), 1
        while name in used:
            n += 1
            name = f"{sanitize_name(p.name[: -len('.ipynb')])[:60]}-{n}"
        used.add(name)
        names[p] = name
    jobs = jobs or max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    book = Gradebook(out)
    reports: list[GradeReport] = []

    def one(p: Path) -> GradeReport:
        try:
            return grade_notebook(p, student=names[p], assignment=assignment, out=out, **options)
        except Exception as exc:  # never let one student stop the batch
            report = GradeReport(student=names[p], notebook=str(p), assignment=assignment or "custom",
                                 isolation=isolation_level())
            report.problems.append(f"the grader failed on this submission: {type(exc).__name__}: {_clean(str(exc))}")
            ids = options.get("exercises") or exercises_for_chapter(assignment)
            report.exercises = [ExerciseGrade(e, 0.0, 1.0, "not graded", report.problems[0]) for e in ids]
            return report

    from tqdm import tqdm

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(one, p) for p in files]
        with tqdm(total=len(files), desc="grading", unit="notebook", disable=not progress, file=sys.stderr) as bar:
            for future in as_completed(futures):
                report = future.result()
                book.record(report)
                reports.append(report)
                bar.update(1)
    book.export()
    return sorted(reports, key=lambda r: r.student)


def summary_table(reports: list[GradeReport]) -> str:
    """A plain-text table: one line per student, then how many passed each exercise."""
    if not reports:
        return "no submissions"
    ids = list(dict.fromkeys(e.exercise for r in reports for e in r.exercises))
    width = max(8, *(len(r.student) for r in reports))
    short = {e: e[:12] for e in ids}
    header = f"{'student':<{width}}  {'score':>7}  " + "  ".join(f"{short[e]:>12}" for e in ids) + "  notes"
    lines = [header, "-" * len(header)]
    for r in reports:
        status = {e.exercise: e.status for e in r.exercises}
        notes = "; ".join(r.problems)[:60]
        lines.append(f"{r.student:<{width}}  {r.score:>3g}/{r.max_score:<3g}  "
                     + "  ".join(f"{status.get(e, '-'):>12}" for e in ids) + f"  {notes}")
    lines.append("-" * len(header))
    passed = {e: sum(1 for r in reports for g in r.exercises if g.exercise == e and g.status == "passed") for e in ids}
    lines.append(f"{'passed':<{width}}  {'':>7}  " + "  ".join(f"{passed[e]:>9}/{len(reports):<2}" for e in ids))
    return "\n".join(lines)


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    """The command line (``python -m course_pe.coursework.grade --help``); ``argv`` is None (``sys.argv``) or a list of str."""
    argv = sys.argv[1:] if argv is None else check_argv("argv", argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook", type=Path, nargs="?")
    parser.add_argument("--dir", type=Path, help="grade every .ipynb in this folder")
    parser.add_argument("--from-env", action="store_true",
                        help="read NB, DIR, STUDENT, ASSIGNMENT, JOBS and GRADES (the --out folder) from the environment (used by make)")
    parser.add_argument("--student", help="name used in the report and the gradebook (default: the file name)")
    parser.add_argument("--assignment", help=f"chapter: {', '.join(chapters())} (default: from the path)")
    parser.add_argument("--exercises", help="comma-separated exercise ids instead of an assignment's")
    parser.add_argument("--out", type=Path, default=Path("grades"))
    parser.add_argument("--jobs", type=int, help="submissions graded at once with --dir (default: available cores)")
    parser.add_argument("--cell-timeout", type=float, default=120, help="seconds per code cell")
    parser.add_argument("--call-timeout", type=float, default=60, help="seconds per exercise (its calls only)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds for all the notebook's cells")
    parser.add_argument("--seed", type=int, help="seed of the hidden cases (default: random, recorded)")
    args = parser.parse_args(argv)
    if args.from_env:
        env = {k: os.environ.get(k, "").strip() for k in ("NB", "DIR", "STUDENT", "ASSIGNMENT", "JOBS", "GRADES")}
        if env["GRADES"]:
            args.out = Path(env["GRADES"])
        args.notebook = Path(env["NB"]) if env["NB"] else None
        args.dir = Path(env["DIR"]) if env["DIR"] else None
        args.student = env["STUDENT"] or None
        args.assignment = env["ASSIGNMENT"] or None
        if env["JOBS"]:
            if not env["JOBS"].isdigit() or int(env["JOBS"]) < 1:
                print(f"error: JOBS must be a positive integer, not {env['JOBS']!r}", file=sys.stderr)
                return 2
            args.jobs = int(env["JOBS"])
    if (args.notebook is None) == (args.dir is None):
        print("usage: make grade NB=path/to/submission.ipynb [STUDENT=name] [ASSIGNMENT=chapter]\n"
              "   or: make grade DIR=path/to/folder/ [ASSIGNMENT=chapter] [JOBS=n]", file=sys.stderr)
        return 2
    exercises = [e.strip() for e in args.exercises.split(",") if e.strip()] if args.exercises else None
    options = dict(exercises=exercises, cell_timeout=args.cell_timeout, call_timeout=args.call_timeout,
                   timeout=args.timeout, seed=args.seed)
    try:
        if args.assignment is not None and args.assignment not in chapters():
            raise ValueError(f"unknown assignment {args.assignment!r}; chapters with exercises: {', '.join(chapters())}")
        if args.dir is not None:
            if args.student:
                raise ValueError("--student (STUDENT=) names one submission; with --dir names come from file names")
            started = time.monotonic()
            reports = grade_folder(args.dir, assignment=args.assignment, out=args.out, jobs=args.jobs, **options)
            print(summary_table(reports))
            print(f"graded {len(reports)} notebooks in {time.monotonic() - started:.0f} s (isolation "
                  f"{isolation_level()}); wrote {args.out / 'gradebook.sqlite'}, {args.out / 'grades_wide.csv'}, "
                  f"{args.out / 'grades_long.csv'}")
            return 0
        if args.student is not None:
            validate_name(args.student)
        report = grade_notebook(args.notebook, student=args.student, assignment=args.assignment, out=args.out,
                                **options)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    book = Gradebook(args.out)
    json_file = book.record(report)
    book.export()
    print(report.text())
    print(f"wrote {json_file}, {args.out / 'gradebook.sqlite'}, {args.out / 'grades_wide.csv'} and "
          f"{args.out / 'grades_long.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
