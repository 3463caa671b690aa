"""Gradescope autograders for the course's assignments, around the same sandboxed grader as ``make grade``.

    python -m course_pe.coursework.gradescope build [CHAPTER ...] [--out gradescope]   (make gradescope)
    python -m course_pe.coursework.gradescope run [--root /autograder]                  (what run_autograder calls)
    python -m course_pe.coursework.gradescope check [--root /autograder]                (the end of setup.sh)

Gradescope's autograder specification (https://gradescope-autograders.readthedocs.io/en/latest/specs/, the page
"Autograder Specifications"; its source is ``docs/specs.md`` of github.com/gradescope/autograder_samples): the zip
holds ``setup.sh`` (run once, as root, when Gradescope builds the image; Ubuntu 22.04 by default) and
``run_autograder`` (run for every submission, as root, in ``/autograder``, a fresh container; the submission lies in
``/autograder/submission``; the results go to ``/autograder/results/results.json``; standard output is shown to
instructors only).

**The zip** (:func:`build_autograder`), for one assignment (a chapter with coding exercises), holds exactly:
``setup.sh``, ``run_autograder``, ``requirements.txt`` (the pins of the course's ``requirements.txt`` that the grader
needs: course_pe's dependencies and IPython, with everything they require), ``course_pe-<version>-py3-none-any.whl``
(the package alone: no book, no notebook, no solution; the exercise checks are in it, and the sandbox never sees
them) and ``assignment.json`` (the chapter, its exercises, the time limits and the visibility of hidden results).

**One submission** (:func:`run_autograder`): the notebooks in the submission (zero, one or several, any name, in
folders if the student uploaded a zip; links are refused, never followed) are read by the grader's own reader; when
there are several, the one that defines the most of the assignment's functions is graded (then the workbook's name,
then the shallowest and first by name) and the output says which and why. It is copied into a private folder and
graded by :func:`course_pe.coursework.grade.grade_notebook`, the grader of ``make grade``: a fresh sandbox, only the
answer cells, visible and hidden cases drawn with a fresh secret seed, verdicts computed outside the sandbox. Before
anything of the student's runs, the autograder's folders, the results folder and Gradescope's submission metadata are
made unreadable to other users (at the limited level as root the submission runs as a user id of its own, see
:func:`course_pe.coursework.sandbox.limited_drops_privileges`).

**What the student sees** (:func:`results_json`). Two entries per exercise: its *visible cases* (visibility
``visible``, no points, passed or failed), whose output is the grader's diagnosis when a visible case failed and
otherwise the same sentence whether the hidden cases passed or not; and the *graded* entry (all cases; the point;
visibility ``after_due_date`` by default), whose output is the report's message, hidden case included. Gradescope
hides the total score while tests are hidden. Nothing in a visible output depends on the hidden cases: what the
grader tells about them (inputs, expected values, which one failed, whether any failed) waits for the due date.
Standard output (the full report, the seed, the isolation level) is for instructors.

A problem of the grader (not of the submission: the sandbox cannot start, an exception in this module) leaves no
``results.json`` and exits with status 1, so that Gradescope marks an autograder error instead of a grade of 0. So
does an exercise the grader could not finish (``not graded``: the submission's time limit for its whole grading ran
out, its sandbox was killed from outside, its process failed too often): Gradescope has no "not graded" score, and
a 0 would say nothing about the student; the instructor sees why on the autograder's output and runs it again.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import traceback
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._validation import check_argv, check_choice, check_float, check_path, check_str, check_str_sequence
from .exercises import EXERCISES, chapters, exercises_for_chapter

__all__ = ["Candidate", "build_autograder", "choose_notebook", "find_notebooks", "main", "results_json",
           "run_autograder"]

#: the specification this module follows (read 2026-11-24; source: docs/specs.md of gradescope/autograder_samples)
SPEC_URL = "https://gradescope-autograders.readthedocs.io/en/latest/specs/"
#: where setup.sh installs the grader's environment (outside /autograder/source, which only root may read)
VENV = "/opt/course_pe/venv"
#: PyTorch's index of CPU-only wheels (the default torch wheel on PyPI pulls gigabytes of CUDA libraries)
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
#: when the graded entries (hidden cases) become visible to students: Gradescope's visibility values
HIDDEN_VISIBILITIES = ("after_due_date", "after_published", "hidden")
#: the files of every autograder zip (plus the course_pe wheel)
ZIP_FILES = ("assignment.json", "requirements.txt", "run_autograder", "setup.sh")
#: the packages the grader needs besides course_pe's declared dependencies (the sandbox's shell)
EXTRA_ROOTS = ("ipython",)
MAX_NOTEBOOKS = 200
MAX_DEPTH = 8
SKIPPED_FOLDERS = (".ipynb_checkpoints", "__MACOSX", ".git")
#: a fixed date for every zip member: the same sources give the same bytes
ZIP_DATE = (2020, 1, 1, 0, 0, 0)


class GraderFailure(Exception):
    """The grader, not the submission, failed: no results.json is written (Gradescope reports an autograder error)."""


def _printable(text: object, limit: int = 300) -> str:
    """``text`` with control characters replaced by spaces, at most ``limit`` characters."""
    text = "".join(ch if ch.isprintable() else " " for ch in str(text))
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------- finding the notebook


@dataclass
class Candidate:
    """A notebook found in a submission: ``path``, ``shown`` (its path inside the submission, printable),
    ``defines`` (the assignment's functions it defines; None if it could not be read) and ``problem`` (why not)."""

    path: Path
    shown: str
    defines: list[str] | None = None
    problem: str = ""

    def __post_init__(self) -> None:
        self.path = check_path("path", self.path)
        check_str("shown", self.shown)
        if self.defines is not None:
            check_str_sequence("defines", self.defines)
        check_str("problem", self.problem)


def find_notebooks(folder: Path) -> tuple[list[Candidate], list[str]]:
    """The notebooks (``*.ipynb``, any case) under ``folder`` and a line for every other entry that is not graded.

    Folders are searched up to 8 levels deep, without following links; ``.ipynb_checkpoints``, ``__MACOSX`` and
    macOS's ``._`` files are skipped; a link or a non-regular file named ``.ipynb`` is refused with its reason. At most
    200 notebooks. A missing ``folder`` is an empty submission.
    """
    folder = check_path("folder", folder)
    found: list[Candidate] = []
    others: list[str] = []
    if not os.path.isdir(folder) or os.path.islink(folder):
        return found, others
    for current, dirs, files in os.walk(folder, followlinks=False):
        depth = len(Path(current).relative_to(folder).parts)
        kept = []
        for d in sorted(dirs):
            shown = _printable(os.path.relpath(os.path.join(current, d), folder), 120)
            if d in SKIPPED_FOLDERS:
                continue
            if os.path.islink(os.path.join(current, d)):
                others.append(f"{shown}: a link to a folder, not followed")
            elif depth + 1 > MAX_DEPTH:
                others.append(f"{shown}: nested too deeply, not searched")
            else:
                kept.append(d)
        dirs[:] = kept
        for name in sorted(files):
            path = Path(current) / name
            shown = _printable(os.path.relpath(path, folder), 120)
            if not name.lower().endswith(".ipynb") or name.startswith("._"):
                others.append(f"{shown}: not a notebook")
                continue
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                others.append(f"{shown}: a symbolic link, refused (links are never followed)")
            elif not stat.S_ISREG(info.st_mode):
                others.append(f"{shown}: not a regular file")
            elif len(found) >= MAX_NOTEBOOKS:
                others.append(f"{shown}: more than {MAX_NOTEBOOKS} notebooks, not examined")
            else:
                found.append(Candidate(path, shown))
    return found, others


def choose_notebook(candidates: list[Candidate], assignment: str) -> Candidate | None:
    """The candidate to grade for ``assignment``: the one that defines the most of its functions (read by the grader's
    own reader and cell analysis; nothing runs), then one named like the workbook (``<assignment>.ipynb``), then the
    shallowest, then the first by name. Fills each candidate's ``defines`` or ``problem``. None if there is none."""
    from .grade import answer_cells, read_submission

    if not isinstance(candidates, list) or not all(isinstance(c, Candidate) for c in candidates):
        raise TypeError(f"candidates must be a list of Candidate, got {type(candidates).__name__}")
    check_choice("assignment", assignment, chapters())
    functions = [EXERCISES[e].function for e in exercises_for_chapter(assignment)]
    for candidate in candidates:
        try:
            sources = read_submission(candidate.path)
        except ValueError as exc:
            candidate.problem = _printable(exc, 200)
            continue
        candidate.defines = [f for f in functions if answer_cells(sources, [f])]

    def rank(c: Candidate) -> tuple:
        return (-(len(c.defines) if c.defines is not None else -1), Path(c.shown).name.lower() != f"{assignment}.ipynb",
                len(Path(c.shown).parts), c.shown.lower(), c.shown)

    return min(candidates, key=rank) if candidates else None


# --------------------------------------------------------------------------- results.json


def _visible_output(grade: Any) -> tuple[str, str]:
    """(status, text) of an exercise's visible-cases entry: the grader's diagnosis when a visible case failed or the
    exercise could not be graded, and otherwise the same sentence whether the hidden cases passed or not."""
    if grade.status == "passed" or (grade.status == "failed" and grade.failed_hidden):
        return "passed", (f"all {grade.visible_cases} visible cases correct (the examples of the book). The "
                          f"{grade.hidden_cases} hidden cases, drawn at random for every submission, are graded too: "
                          "their result is shown with the graded entry.")
    return "failed", grade.message


def results_json(report: Any, *, summary: str = "", hidden_visibility: str = "after_due_date",
                 execution_time: float = 0.0, extra: dict | None = None) -> dict:
    """Gradescope's results.json for the grader's ``report`` (a :class:`course_pe.coursework.grade.GradeReport`).

    Per exercise, in the report's order: ``<function>: visible cases`` (visibility ``visible``, a status and no
    points) and ``<function>: graded`` (the score and maximum of the report, the report's message, visibility
    ``hidden_visibility``). ``summary``: the top-level output (text); ``execution_time``: seconds; ``extra``: stored
    with the results (``extra_data``), never shown to students. Every output is plain text (no HTML is rendered).
    """
    from .grade import GradeReport

    if not isinstance(report, GradeReport):
        raise TypeError(f"report must be a GradeReport, got {type(report).__name__}")
    check_str("summary", summary)
    check_choice("hidden_visibility", hidden_visibility, HIDDEN_VISIBILITIES)
    execution_time = check_float("execution_time", execution_time, minimum=0.0)
    if extra is not None and not isinstance(extra, dict):
        raise TypeError(f"extra must be a dict, got {type(extra).__name__}")
    tests = []
    for number, grade in enumerate(report.exercises, start=1):
        status, text = _visible_output(grade)
        tests.append({"name": f"{grade.function or grade.exercise}: visible cases", "name_format": "text",
                      "number": f"{number}.1", "status": status, "output": text, "output_format": "text",
                      "tags": [grade.exercise], "visibility": "visible"})
        tests.append({"name": f"{grade.function or grade.exercise}: graded (visible and hidden cases)",
                      "name_format": "text", "number": f"{number}.2", "score": grade.score,
                      "max_score": grade.max_score, "output": grade.message, "output_format": "text",
                      "tags": [grade.exercise], "visibility": hidden_visibility})
    return {"score": report.score, "execution_time": int(round(execution_time)), "output": summary,
            "output_format": "text", "test_output_format": "text", "test_name_format": "text",
            "visibility": "visible", "stdout_visibility": "hidden", "extra_data": dict(extra or {}), "tests": tests}


def _when(hidden_visibility: str) -> str:
    return {"after_due_date": "after the due date", "after_published": "when your instructor publishes the grades",
            "hidden": "to your instructor only"}[hidden_visibility]


# --------------------------------------------------------------------------- one submission

#: what the grader and the sandbox's template keep resident besides the submission (measured about 370 MiB for the
#: whole tree grading a correct submission; the rest is headroom)
GRADER_RESERVE = 640 * 2**20
#: the least memory a submission's process gets (PyTorch alone maps about 590 MiB of address space)
MIN_SANDBOX_MEMORY = 2**30


def container_memory() -> int | None:
    """The memory this container may use, in bytes: its cgroup's limit (v2 ``memory.max``, v1
    ``memory.limit_in_bytes``), at most the machine's memory; None where neither is known."""
    limits = []
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:
            limits.append(int(text))
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    limits.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    return min(limits) if limits else None


def sandbox_memory(container: int | None) -> int:
    """The submission's memory limit in a container of ``container`` bytes: the grader's default (3 GiB) when it
    fits beside the grader, else what is left after the grader's reserve, at least 1 GiB (then the container's own
    limit may strike first: choose more memory in Gradescope's settings)."""
    from .sandbox import SandboxLimits

    default = SandboxLimits().memory_bytes
    if container is None:
        return default
    container = int(check_float("container", container, minimum=0.0))
    return max(MIN_SANDBOX_MEMORY, min(default, container - GRADER_RESERVE))


def _lock_down(root: Path) -> None:
    """Before any submission code runs: only root may read the autograder, the results and Gradescope's metadata
    (previous submissions' results, hidden cases included) and the submission folder."""
    for path, mode in ((root / "source", 0o700), (root / "results", 0o700), (root / "submission", 0o700),
                       (root / "submission_metadata.json", 0o600), (root / "run_autograder", 0o700)):
        try:
            if not os.path.islink(path):
                os.chmod(path, mode)
        except FileNotFoundError:
            pass


def _copy_private(path: Path, folder: Path) -> Path:
    """Copy the regular file ``path`` (never through a link) to ``folder/submission.ipynb``; the grader reads the copy.
    Raises ValueError with the reason if the file cannot be copied (the grader then reports it)."""
    from .grade import MAX_NOTEBOOK_BYTES

    target = folder / "submission.ipynb"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ValueError(f"the file cannot be opened ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise ValueError("not a regular file")
        data = fh.read(MAX_NOTEBOOK_BYTES + 1)
    with open(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
        out.write(data)
    return target


def _isolation(requested: str | None) -> tuple[str, str]:
    """(level, description) for this run: full where available; ``requested`` ("full" or "limited") forces one."""
    from .sandbox import Containment, containment, limited_drops_privileges

    where = containment()
    level = requested or where.level
    if level == "full" and where.level != "full":
        raise GraderFailure("full isolation was asked for and is not available here: " + "; ".join(where.notes))
    if level == where.level:
        description = where.description
    else:
        description = Containment(level, notes=where.notes, seccomp=where.seccomp).description
    if level == "limited" and not limited_drops_privileges() and os.environ.get("COURSE_PE_AUTOGRADER_UNSAFE") != "1":
        raise GraderFailure(
            "only the limited isolation level is available and the submission would run as the grader's user "
            f"({description}): it could then change its own results. Run the autograder as root with a Python that "
            "every user can read (as setup.sh installs it), or set COURSE_PE_AUTOGRADER_UNSAFE=1 to rehearse with "
            "trusted notebooks only")
    return level, description


def _infrastructure_problem(report: Any) -> str | None:
    """The grader's own failure in ``report`` (the sandbox or the declared set-up could not start before any answer
    cell ran), else None. A failure after a crash of the submission's cells is the submission's."""
    if report.cell_errors or any(e.status in ("passed", "failed") for e in report.exercises):
        return None
    for problem in report.problems:
        if problem.startswith(("the sandbox could not start", "the declared set-up")):
            return problem
    return None


def _not_graded(report: Any) -> str | None:
    """Why exercises of ``report`` were not graded (the submission's time limit for its whole grading, a sandbox
    that did not start or was killed, a process that failed too often), else None. Gradescope has no "not graded"
    score: a results.json would record them as 0, which says nothing about the student. The autograder fails
    instead, visibly (Gradescope shows the student and the instructor that the autograder failed, and the instructor
    runs it again), as for a sandbox that did not start (:func:`_infrastructure_problem`)."""
    reasons = [f"{grade.function or grade.exercise}: {grade.message}" for grade in report.exercises
               if grade.status == "not graded"]
    return "; ".join(reasons) if reasons else None


def _read_config(source: Path) -> dict:
    try:
        config = json.loads((source / "assignment.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GraderFailure(f"cannot read {source / 'assignment.json'}: {exc}") from None
    if not isinstance(config, dict) or config.get("assignment") not in chapters():
        raise GraderFailure(f"{source / 'assignment.json'} names no known assignment")
    if config.get("exercises") != exercises_for_chapter(config["assignment"]):
        raise GraderFailure(f"{source / 'assignment.json'} lists exercises {config.get('exercises')} but this course_pe "
                            f"has {exercises_for_chapter(config['assignment'])}: rebuild the zip (make gradescope)")
    check_choice("hidden_visibility", config.get("hidden_visibility"), HIDDEN_VISIBILITIES)
    for key in ("timeout", "cell_timeout", "call_timeout"):
        check_float(key, config.get(key), minimum=0.0, strict_minimum=True)
    return config


def _summary(assignment: str, chosen: Candidate | None, candidates: list[Candidate], others: list[str],
             report: Any, hidden_visibility: str) -> str:
    functions = [EXERCISES[e].function for e in exercises_for_chapter(assignment)]
    lines = []
    if chosen is None:
        lines.append("No notebook (.ipynb file) was found in your submission, so nothing could be graded. Upload the "
                     f"notebook you worked in (in Jupyter: File > Download), for example {assignment}.ipynb.")
    else:
        lines.append(f"Graded {chosen.shown} for the assignment {assignment!r} ({len(functions)} coding exercise"
                     f"{'s' if len(functions) != 1 else ''}: {', '.join(functions)}).")
        if len(candidates) > 1:
            lines.append(f"Your submission has {len(candidates)} notebooks; the one graded defines the most of these "
                         "functions (then: named like the workbook, least nested, first by name). Not graded:")
            for c in candidates:
                if c is not chosen:
                    why = f"could not be read ({c.problem})" if c.defines is None else \
                        f"defines {len(c.defines)} of the {len(functions)} functions"
                    lines.append(f"  - {c.shown}: {why}")
    if others:
        lines.append("Other files (not graded):")
        lines += [f"  - {line}" for line in others[:20]]
        if len(others) > 20:
            lines.append(f"  - ... and {len(others) - 20} more")
    if report is not None:
        for problem in report.problems:
            lines.append(f"Note: {_printable(problem, 500)}")
        if report.cell_errors:
            lines.append("Answer cells that raised an error (grading runs only the cells that define the functions "
                         "and the cells they use, before any check):")
            lines += [f"  - {_printable(e, 400)}" for e in report.cell_errors]
    lines.append("Each exercise is checked on the book's visible cases and on hidden cases drawn at random for every "
                 f"submission. The results of the hidden cases, and your score, are shown {_when(hidden_visibility)}.")
    return "\n".join(lines)


def run_autograder(root: Path, *, isolation: str | None = None) -> int:
    """Grade the submission in ``root`` (laid out like ``/autograder``: ``source/`` holds the zip's files,
    ``submission/`` the student's files, ``results/`` receives ``results.json``). Returns 0 when results were
    written, 1 when the grader failed (no results.json; the reason on standard output). ``isolation``: ``"full"`` or
    ``"limited"`` to force a level (default: ``COURSE_PE_AUTOGRADER_ISOLATION`` or the best available)."""
    from .grade import grade_notebook
    from .sandbox import SandboxLimits

    started = time.monotonic()
    root = Path(check_path("root", root))
    if isolation is not None:
        check_choice("isolation", isolation, ("full", "limited"))
    results = root / "results"
    try:
        results.mkdir(parents=True, exist_ok=True)
        (results / "results.json").unlink(missing_ok=True)
        config = _read_config(root / "source")
        assignment, visibility = config["assignment"], config["hidden_visibility"]
        _lock_down(root)
        requested = isolation or os.environ.get("COURSE_PE_AUTOGRADER_ISOLATION") or None
        if requested not in (None, "full", "limited"):
            raise GraderFailure(f"COURSE_PE_AUTOGRADER_ISOLATION must be full or limited, not {requested!r}")
        level, description = _isolation(requested)
        container = container_memory()
        limits = SandboxLimits(memory_bytes=sandbox_memory(container))
        memory_line = (f"memory: container {container / 2**20:.0f} MiB" if container else "memory: container unknown") \
            + f", the submission's limit {limits.memory_bytes / 2**20:.0f} MiB"
        if container is not None and container - GRADER_RESERVE < MIN_SANDBOX_MEMORY:
            memory_line += (" (WARNING: the container is smaller than the grader's reserve plus 1 GiB; a submission "
                            "that uses much memory can get the whole container killed: choose at least 2 GB in "
                            "Gradescope's autograder settings)")
        candidates, others = find_notebooks(root / "submission")
        chosen = choose_notebook(candidates, assignment)
        private = Path(tempfile.mkdtemp(prefix="course_pe_gradescope_"))
        try:
            report = None
            if chosen is not None:
                try:
                    copy = _copy_private(chosen.path, private)
                except ValueError as exc:
                    chosen.problem = str(exc)
                    copy = chosen.path  # the grader reads it safely and reports why it cannot
                report = grade_notebook(copy, student="submission", assignment=assignment, isolation=level,
                                        timeout=config["timeout"], cell_timeout=config["cell_timeout"],
                                        call_timeout=config["call_timeout"], limits=limits)
                report.notebook = chosen.shown
                problem = _infrastructure_problem(report)
                if problem is not None:
                    print(report.text())
                    raise GraderFailure(f"the grader could not run the submission: {problem}")
                unfinished = _not_graded(report)
                if unfinished is not None:
                    print(report.text())
                    raise GraderFailure(f"the grader could not finish this submission, so no score was recorded (a 0 "
                                        f"would say nothing about the student): NOT GRADED {unfinished}. Run the "
                                        "autograder again for this submission (Rerun Autograder)")
            else:
                from .grade import ExerciseGrade, GradeReport

                report = GradeReport(student="submission", notebook="", assignment=assignment, isolation=description)
                report.exercises = [ExerciseGrade(e, 0.0, 1.0, "not graded", "no notebook (.ipynb file) in the "
                                                  "submission: nothing was graded", function=EXERCISES[e].function)
                                    for e in exercises_for_chapter(assignment)]
        finally:
            shutil.rmtree(private, ignore_errors=True)
        summary = _summary(assignment, chosen, candidates, others, report, visibility)
        seconds = time.monotonic() - started
        data = results_json(report, summary=summary, hidden_visibility=visibility, execution_time=seconds,
                            extra={"assignment": assignment, "notebook": chosen.shown if chosen else None,
                                   "isolation": description, "memory_limit": limits.memory_bytes,
                                   "course_pe": config.get("course_pe", "")})
        temporary = results / ".results.json.partial"
        temporary.unlink(missing_ok=True)
        with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, ensure_ascii=False)
        os.replace(temporary, results / "results.json")
        print(f"course_pe Gradescope autograder, assignment {assignment}; isolation level {level}: {description}")
        print(memory_line)
        print(report.text())
        print(f"seed of the hidden cases: {report.seed} (to reproduce: python -m course_pe.coursework.grade NOTEBOOK "
              f"--student x --assignment {assignment} --seed {report.seed}); wrote {results / 'results.json'} in "
              f"{seconds:.1f} s")
        return 0
    except Exception as exc:  # noqa: BLE001 - a failure of the grader: Gradescope must report an autograder error
        (results / "results.json").unlink(missing_ok=True)
        print(f"course_pe Gradescope autograder FAILED (no results.json was written, so Gradescope reports an "
              f"autograder error; re-run it once fixed): {type(exc).__name__}: {exc}")
        if not isinstance(exc, GraderFailure):
            traceback.print_exc(file=sys.stdout)
        return 1


def check_install(root: Path) -> str:
    """The end of setup.sh: grade a notebook whose functions all raise, as a submission would be graded, and return
    the isolation description. Raises RuntimeError if the sandbox does not start or an exercise is not graded."""
    from .grade import grade_cells

    root = Path(check_path("root", root))
    config = _read_config(root / "source")
    functions = [EXERCISES[e].function for e in config["exercises"]]
    cells = [f"def {f}(*args, **kwargs):\n    raise NotImplementedError\n" for f in functions]
    level, description = _isolation(os.environ.get("COURSE_PE_AUTOGRADER_ISOLATION") or None)
    from .sandbox import SandboxLimits

    limits = SandboxLimits(memory_bytes=sandbox_memory(container_memory()))
    report = grade_cells(cells, config["assignment"], student="install-check", isolation=level, limits=limits)
    if report.problems or any(e.status != "failed" for e in report.exercises):
        raise RuntimeError("the grader does not work in this image:\n" + report.text())
    return description


# --------------------------------------------------------------------------- building the zip


def _pins(requirements: Path) -> dict[str, tuple[str, str]]:
    """Normalised name -> (name as written, version) for every ``name==version`` line of ``requirements``."""
    from packaging.utils import canonicalize_name

    pins = {}
    for line in requirements.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            if not sep:
                raise ValueError(f"{requirements}: {line!r} is not an exact pin")
            pins[canonicalize_name(name)] = (name.strip(), version.strip())
    return pins


def grader_requirements(requirements: Path) -> list[str]:
    """The lines of ``requirements`` (``name==version``) that the grader needs: course_pe's declared dependencies and
    IPython, with every package they require (markers evaluated for this interpreter), sorted. ValueError if one of
    them is not pinned there, or is installed here at another version than its pin."""
    import importlib.metadata as metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = _pins(Path(check_path("requirements", requirements)))
    # course_pe's own requirements without its extras (the "fused" extra's Triton is for GPUs; the grader runs on
    # Gradescope's CPU image): a requirement whose marker names an extra is evaluated with none requested.
    roots = [Requirement(r) for r in (metadata.requires("course_pe") or [])] + [Requirement(r) for r in EXTRA_ROOTS]
    roots = [r for r in roots if r.marker is None or r.marker.evaluate({"extra": ""})]
    needed: dict[str, str] = {}
    stack = list(roots)
    while stack:
        requirement = stack.pop()
        name = canonicalize_name(requirement.name)
        if name in needed:
            continue
        if name not in pins:
            raise ValueError(f"the grader needs {requirement.name}, which {requirements} does not pin")
        installed = metadata.version(name)
        if installed.split("+")[0] != pins[name][1]:
            raise ValueError(f"{requirement.name} is installed at {installed}, pinned at {pins[name][1]}: run make "
                             "install (the zip must hold the pins the course is tested with)")
        needed[name] = pins[name][1]
        for text in metadata.requires(name) or []:
            sub = Requirement(text)
            if sub.marker is None or sub.marker.evaluate({"extra": ""}):
                stack.append(sub)
    return sorted((f"{pins[n][0]}=={v}" for n, v in needed.items()), key=str.lower)


def build_wheel(out: Path) -> Path:
    """Build the course_pe wheel (the package alone) from the repository into ``out``; return its path. The build
    runs in a copy, so the repository gets no build folders; ``SOURCE_DATE_EPOCH`` fixes its dates."""
    from .grading_build import repository_root

    out = Path(check_path("out", out))
    repo = repository_root()
    if repo is None or not (repo / "pyproject.toml").exists():
        raise ValueError("build the autograders from a checkout of the course (pyproject.toml not found)")
    with tempfile.TemporaryDirectory(prefix="course_pe_wheel_") as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(repo / "course_pe", src / "course_pe", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(repo / name, src / name)
        env = dict(os.environ, SOURCE_DATE_EPOCH="1577836800", PIP_DISABLE_PIP_VERSION_CHECK="1")
        built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                                "--no-index", "--quiet", "-w", str(Path(tmp) / "wheel"), str(src)],
                               capture_output=True, text=True, env=env, cwd=tmp)
        wheels = sorted((Path(tmp) / "wheel").glob("course_pe-*.whl"))
        if built.returncode or len(wheels) != 1:
            raise RuntimeError(f"building the course_pe wheel failed:\n{built.stdout[-2000:]}{built.stderr[-2000:]}")
        out.mkdir(parents=True, exist_ok=True)
        target = out / wheels[0].name
        shutil.copy2(wheels[0], target)
    return target


SETUP_SH = r"""#!/usr/bin/env bash
# setup.sh of the course_pe autograder for the assignment "@ASSIGNMENT@" (written by `make gradescope`).
# Gradescope runs it once, as root, when it builds the autograder's image (base image: Ubuntu 22.04, its default).
# It installs Python @PYTHON@ (Ubuntu's package, when /usr/bin has none), a virtual environment in
# @VENV@ with the grader's pinned packages (torch from PyTorch's CPU wheel index, every other pin from PyPI: the
# versions of the course's requirements.txt) and course_pe from the wheel in this folder; then it hides course_pe's
# exercise checks and this folder from other users and grades a notebook of stubs to show that grading works here.
# `bash setup.sh --dry-run` prints the commands instead of running them; COURSE_PE_AUTOGRADER_VENV installs elsewhere
# (to rehearse outside Gradescope).
set -euo pipefail

SOURCE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${COURSE_PE_AUTOGRADER_VENV:-@VENV@}"
DRY_RUN=0
if [ "${1:-}" = "--dry-run" ]; then
    DRY_RUN=1
fi

run() {
    if [ "$DRY_RUN" = 1 ]; then
        printf '+'
        printf ' %q' "$@"
        printf '\n'
    else
        "$@"
    fi
}

# The system's Python (readable by every user, which the sandbox's own user id needs), not another one on the PATH.
PYTHON=/usr/bin/python@PYTHON@
if ! { [ -x "$PYTHON" ] && "$PYTHON" -c "import ensurepip, venv" > /dev/null 2>&1; }; then
    run apt-get update
    run env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python@PYTHON@ python@PYTHON@-venv
fi

run "$PYTHON" -m venv "$VENV"
run "$VENV/bin/python" -m pip install --no-deps --index-url @TORCH_INDEX@ @TORCH_PIN@
run "$VENV/bin/python" -m pip install --no-deps -r "$SOURCE/requirements.txt"
run "$VENV/bin/python" -m pip install --no-deps "$SOURCE/@WHEEL@"
run "$VENV/bin/python" -m pip check
# At the limited isolation level (no namespaces in the container) the submission runs as a user id of its own: it
# must be able to read Python and the packages, and must not read course_pe (the exercise checks and their reference
# formulas) nor this folder.
run chmod -R a+rX "$VENV"
run chmod -R go= "$VENV/lib/python@PYTHON@/site-packages/course_pe"
run chmod -R go= "$SOURCE"
run "$VENV/bin/python" -I -m course_pe.coursework.gradescope check --root "$(dirname "$SOURCE")"
"""

RUN_AUTOGRADER = r"""#!/usr/bin/env bash
# run_autograder of the course_pe autograder for the assignment "@ASSIGNMENT@" (written by `make gradescope`).
# Gradescope runs it for every submission, as root, in /autograder (a fresh container): it grades the notebook in
# /autograder/submission with course_pe's sandboxed grader (the grader of `make grade`) and writes
# /autograder/results/results.json; what it prints is shown to instructors only.
# Overrides, for the course's tests and for rehearsing outside Gradescope: COURSE_PE_AUTOGRADER_ROOT (instead of
# /autograder), COURSE_PE_AUTOGRADER_PYTHON (instead of the interpreter setup.sh installed),
# COURSE_PE_AUTOGRADER_ISOLATION=limited (the level of a container without namespaces).
set -euo pipefail

ROOT="${COURSE_PE_AUTOGRADER_ROOT:-/autograder}"
PYTHON="${COURSE_PE_AUTOGRADER_PYTHON:-@VENV@/bin/python}"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 COURSE_PE_THREADS=1 PYTHONHASHSEED=0
cd "$ROOT"
exec "$PYTHON" -I -m course_pe.coursework.gradescope run --root "$ROOT"
"""


def _fill(template: str, values: dict[str, str]) -> str:
    import re

    for key, value in values.items():
        template = template.replace(f"@{key}@", value)
    left = re.findall(r"@[A-Z_]+@", template)
    if left:
        raise ValueError(f"placeholders of the template were not filled: {left}")
    return template


def build_autograder(assignment: str, out: Path, *, wheel: Path, requirements: list[str],
                     hidden_visibility: str = "after_due_date", timeout: float = 300.0, cell_timeout: float = 60.0,
                     call_timeout: float = 60.0) -> Path:
    """Write ``out/<assignment>/autograder.zip`` (see the module docstring) and return its path.

    ``wheel``: the course_pe wheel (``build_wheel``); ``requirements``: the grader's pins
    (``grader_requirements``); ``hidden_visibility``: when students see the graded entries; the time limits are
    those of ``make grade`` (seconds). The zip's members have fixed dates and modes: the same inputs give the same
    bytes.
    """
    check_choice("assignment", assignment, chapters())
    out = Path(check_path("out", out))
    wheel = Path(check_path("wheel", wheel))
    if not wheel.name.startswith("course_pe-") or not wheel.name.endswith(".whl") or not wheel.is_file():
        raise ValueError(f"wheel must be a course_pe wheel file, got {str(wheel)!r}")
    check_str_sequence("requirements", requirements, nonempty_items=True)
    torch_pins = [r for r in requirements if r.lower().startswith("torch==")]
    if len(torch_pins) != 1:
        raise ValueError("requirements must pin torch exactly once")
    check_choice("hidden_visibility", hidden_visibility, HIDDEN_VISIBILITIES)
    limits = {name: check_float(name, value, minimum=0.0, strict_minimum=True) for name, value in
              (("timeout", timeout), ("cell_timeout", cell_timeout), ("call_timeout", call_timeout))}
    values = {"ASSIGNMENT": assignment, "PYTHON": f"{sys.version_info.major}.{sys.version_info.minor}", "VENV": VENV,
              "TORCH_INDEX": TORCH_INDEX, "TORCH_PIN": torch_pins[0], "WHEEL": wheel.name}
    config = {"assignment": assignment, "exercises": exercises_for_chapter(assignment),
              "hidden_visibility": hidden_visibility, **limits, "course_pe": wheel.name.split("-")[1],
              "wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(), "specification": SPEC_URL}
    members = {
        "assignment.json": (json.dumps(config, indent=1) + "\n").encode(),
        "requirements.txt": ("# The grader's pins, equal to the course's requirements.txt (torch: PyTorch's CPU "
                             "wheel).\n" + "\n".join(requirements) + "\n").encode(),
        "run_autograder": _fill(RUN_AUTOGRADER, values).encode(),
        "setup.sh": _fill(SETUP_SH, values).encode(),
        wheel.name: wheel.read_bytes(),
    }
    target = out / assignment / "autograder.zip"
    target.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(members):
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            info.external_attr = ((0o100755 if name in ("run_autograder", "setup.sh") else 0o100644) << 16)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, members[name])
    target.write_bytes(buffer.getvalue())
    return target


def build_all(out: Path, assignments: list[str] | None = None, **options: Any) -> list[Path]:
    """Build the zip of every assignment (every chapter with coding exercises, or ``assignments``) into ``out``."""
    from .grading_build import repository_root

    out = Path(check_path("out", out))
    assignments = chapters() if assignments is None else check_str_sequence("assignments", assignments)
    for a in assignments:
        check_choice("assignment", a, chapters())
    repo = repository_root()
    if repo is None:
        raise ValueError("build the autograders from a checkout of the course (requirements.txt not found)")
    requirements = grader_requirements(repo / "requirements.txt")
    with tempfile.TemporaryDirectory(prefix="course_pe_gradescope_build_") as tmp:
        wheel = build_wheel(Path(tmp))
        return [build_autograder(a, out, wheel=wheel, requirements=requirements, **options) for a in assignments]


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    """The command line (``python -m course_pe.coursework.gradescope --help``); ``argv`` is None or a list of str."""
    argv = sys.argv[1:] if argv is None else check_argv("argv", argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="write gradescope/<assignment>/autograder.zip")
    build.add_argument("assignments", nargs="*", help=f"chapters (default: all: {', '.join(chapters())})")
    build.add_argument("--out", type=Path, default=Path("gradescope"))
    build.add_argument("--hidden-visibility", choices=HIDDEN_VISIBILITIES, default="after_due_date",
                       help="when students see the graded entries (hidden cases, score); default after_due_date")
    build.add_argument("--timeout", type=float, default=300.0, help="seconds for a whole submission (wall clock)")
    build.add_argument("--cell-timeout", type=float, default=60.0, help="seconds per answer cell")
    build.add_argument("--call-timeout", type=float, default=60.0, help="seconds per exercise (its calls only)")
    for name in ("run", "check"):
        sub = commands.add_parser(name, help="grade /autograder/submission" if name == "run" else
                                  "check that grading works in this image (setup.sh)")
        sub.add_argument("--root", type=Path, default=Path("/autograder"))
    args = parser.parse_args(argv)
    if args.command == "run":
        return run_autograder(args.root)
    if args.command == "check":
        try:
            print(f"course_pe autograder: grading works here; isolation {check_install(args.root)}")
        except (RuntimeError, GraderFailure) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0
    try:
        paths = build_all(args.out, args.assignments or None, hidden_visibility=args.hidden_visibility,
                          timeout=args.timeout, cell_timeout=args.cell_timeout, call_timeout=args.call_timeout)
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in paths:
        print(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB)")
    print(f"upload one zip per Gradescope assignment (see the instructor guide, 'Grading on Gradescope'; {SPEC_URL})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
