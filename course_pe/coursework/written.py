"""Marking written work into the gradebook, so that a written day reaches the LMS like a coding day.

    python -m course_pe.coursework.written sheet CHAPTER [--grades grades/] [--roster roster.csv]
    python -m course_pe.coursework.written record SHEET [--grades grades/] [--replace]
    make marking CHAPTER=why_order [ROSTER=roster.csv]     make mark SHEET=grades/why_order-written/marking.csv

``sheet`` writes ``<grades>/<chapter>-written/marking.csv``, one row per student of the class list (the roster given,
which the gradebook then keeps as the class list, else the one it keeps from ``make grade``) and, per exercise marked by hand, a points column headed with
its maximum (``ex-why-order-conv (max 4)``) and a comment column, and beside it ``rubric.md``, the chapter's rubrics
(:mod:`course_pe.coursework.rubrics`). Fill it in with a spreadsheet (keep it CSV, UTF-8). ``record`` reads it back
and records each student's marks in the gradebook as the assignment ``<chapter>-written``: an exercise's points
(0 ... its maximum, a decimal comma is fine) and comment; a row left empty records nothing; an exercise left empty in a
row that has marks is *not graded* (an empty cell with the reason in every export, until it is marked). A mark out of
range, a student not on the class list or a changed header stops the recording before anything is written, naming the
rows. Marks already recorded are replaced only with ``--replace`` (``REPLACE=1``), as with ``make grade``. The exports
(Canvas, Moodle, feedback files, statistics) then include the written assignment beside the coding ones.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .._validation import check_argv, check_bool, check_path, check_str
from .gradebook import Gradebook, _atomic_write
from .names import validate_name
from .rubrics import CHAPTERS, rubric_text, rubrics_for_chapter

__all__ = ["WrittenMark", "WrittenReport", "main", "read_sheet", "record_sheet", "write_sheet"]

_POINTS = re.compile(r"^(?P<label>\S+) \(max (?P<max>[0-9.]+)\)$")


@dataclass
class WrittenMark:
    """One exercise's mark (the gradebook's fields): ``status`` is ``marked`` or ``not graded``."""

    exercise: str
    score: float
    max_score: float
    status: str
    message: str

    def __post_init__(self) -> None:
        from .._validation import check_choice, check_float

        if not check_str("exercise", self.exercise):
            raise ValueError("exercise must not be empty")
        self.max_score = check_float("max_score", self.max_score, minimum=0.0)
        self.score = check_float("score", self.score, minimum=0.0, maximum=self.max_score)
        check_choice("status", self.status, ("marked", "not graded"))
        check_str("message", self.message)


@dataclass
class WrittenReport:
    """A student's marks for one chapter's written exercises, in the form the gradebook records."""

    student: str
    assignment: str
    notebook: str
    exercises: list[WrittenMark] = field(default_factory=list)
    seed: int = 0
    cell_errors: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        from .._validation import check_int, check_str_sequence

        try:
            validate_name(self.student)
        except (TypeError, ValueError) as error:
            raise type(error)(f"student: {error}") from None
        if not check_str("assignment", self.assignment).endswith("-written"):
            raise ValueError(f"assignment must be <chapter>-written, got {self.assignment!r}")
        check_str("notebook", self.notebook)
        if not isinstance(self.exercises, list) or not all(isinstance(e, WrittenMark) for e in self.exercises):
            raise TypeError("exercises must be a list of WrittenMark")
        # a seed, as everywhere in course_pe at most 2**63 - 1; a NumPy integer is stored as a Python int
        self.seed = check_int("seed", self.seed, minimum=0, maximum=2**63 - 1)
        check_str_sequence("cell_errors", self.cell_errors)
        check_str_sequence("problems", self.problems)

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"score": sum(e.score for e in self.exercises),
                               "max_score": sum(e.max_score for e in self.exercises)}


def _chapter(chapter: str) -> str:
    check_str("chapter", chapter)
    if chapter not in CHAPTERS or not rubrics_for_chapter(chapter):
        marked = [c for c in CHAPTERS if rubrics_for_chapter(c)]
        raise ValueError(f"chapter {chapter!r} has no exercises marked by hand; chapters that do: {', '.join(marked)}")
    return chapter


def write_sheet(chapter: str, grades: Path, roster: Path | None = None, roster_column: str | None = None) -> Path:
    """Write the marking sheet and ``rubric.md`` of ``chapter`` under ``grades``; return the sheet's path."""
    from .roster import read_roster_table

    chapter = _chapter(chapter)
    grades = check_path("grades", grades)
    if roster_column is not None:
        check_str("roster_column", roster_column)
    book = Gradebook(grades)
    if roster is not None:
        try:
            table = read_roster_table(check_path("roster", roster), roster_column)
        except ValueError as error:
            raise ValueError(f"roster: {error}" + (f" (roster_column {roster_column!r})" if roster_column else "")) \
                from None
        students = [(e.student, e.name) for e in table.entries]
        book.store_roster(table, Path(roster).name)  # the class list of the exports, as make grade keeps it
    else:
        kept = book.roster()
        if kept is None:
            raise ValueError("no class list: pass ROSTER= (--roster), or grade an assignment with a roster first")
        students = list(zip(kept.students, kept.names))
    book.check()
    rubrics = rubrics_for_chapter(chapter)
    header = ["student", "name"]
    for rubric in rubrics:
        header += [f"{rubric.label} (max {rubric.points:g})", f"{rubric.label} comment"]
    lines = [header] + [[s, n] + [""] * (2 * len(rubrics)) for s, n in students]
    folder = grades / f"{chapter}-written"
    sheet = folder / "marking.csv"
    if sheet.exists():
        raise ValueError(f"{sheet} exists (it may hold marks): record it, or move it away to start a new one")
    from .exports import csv_text

    _atomic_write(sheet, csv_text(lines))
    _atomic_write(folder / "rubric.md", f"# Rubrics: {chapter}\n\n" + "\n\n".join(
        f"## {r.label}\n\n{rubric_text(r)}" for r in rubrics) + "\n")
    return sheet


def read_sheet(sheet: Path, chapter: str) -> list[WrittenReport]:
    """The marks of a filled-in marking sheet of ``chapter``; ``ValueError`` naming every row at fault."""
    chapter = _chapter(chapter)
    sheet = check_path("sheet", sheet)
    try:
        text = Path(sheet).read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"the marking sheet {str(sheet)!r} cannot be read as UTF-8 CSV ({exc})") from None
    try:
        dialect = csv.Sniffer().sniff(text[:8192], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    rows = list(csv.reader(io.StringIO(text), dialect))
    rubrics = rubrics_for_chapter(chapter)
    expected = ["student", "name"]
    for rubric in rubrics:
        expected += [f"{rubric.label} (max {rubric.points:g})", f"{rubric.label} comment"]
    if not rows or [h.strip() for h in rows[0]][: len(expected)] != expected:
        raise ValueError(f"the marking sheet's header is not {chapter}'s: expected {expected}, got "
                         f"{rows[0] if rows else []} (make a new sheet with make marking CHAPTER={chapter})")
    reports, problems = [], []
    for number, row in enumerate(rows[1:], start=2):
        row = [c.strip() for c in row] + [""] * (len(expected) - len(row))
        student = row[0]
        if not student:
            continue
        try:
            validate_name(student)
        except ValueError:
            problems.append(f"row {number}: {student!r} is not a valid student name")
            continue
        marks, given = [], False
        for k, rubric in enumerate(rubrics):
            raw, comment = row[2 + 2 * k], row[3 + 2 * k]
            if not raw:
                marks.append(WrittenMark(rubric.label, 0.0, rubric.points, "not graded",
                                         "not marked yet" + (f" ({comment})" if comment else "")))
                continue
            given = True
            try:
                points = float(raw.replace(",", "."))
            except ValueError:
                problems.append(f"row {number} ({student}): {raw!r} for {rubric.label} is not a number")
                continue
            if not 0 <= points <= rubric.points:
                problems.append(f"row {number} ({student}): {raw} for {rubric.label} is outside 0 ... {rubric.points:g}")
                continue
            marks.append(WrittenMark(rubric.label, points, rubric.points, "marked", comment))
        if given:
            reports.append(WrittenReport(student, f"{chapter}-written", Path(sheet).name, marks))
    if problems:
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        raise ValueError("the marking sheet cannot be recorded: " + "; ".join(problems[:10]) + more +
                         ". Nothing was recorded")
    return reports


def record_sheet(sheet: Path, grades: Path, *, replace: bool = False) -> list[WrittenReport]:
    """Record a filled-in marking sheet (its chapter is its folder's, ``<chapter>-written``) into the gradebook
    under ``grades`` and export; return what was recorded."""
    sheet = check_path("sheet", sheet)
    check_bool("replace", replace)
    folder = Path(sheet).resolve().parent.name
    if not folder.endswith("-written"):
        raise ValueError(f"the sheet must lie in its <chapter>-written folder (as make marking wrote it), not in {folder!r}")
    chapter = folder[: -len("-written")]
    reports = read_sheet(sheet, chapter)
    book = Gradebook(check_path("grades", grades))
    kept = book.roster()
    if kept is not None:
        listed = {s.lower() for s in kept.students}
        strangers = [r.student for r in reports if r.student.lower() not in listed]
        if strangers:
            raise ValueError(f"not on the class list: {', '.join(strangers[:10])}. Nothing was recorded")
    already = {s.lower() for s in book.graded(f"{chapter}-written")}
    clash = [r.student for r in reports if r.student.lower() in already]
    if clash and not replace:
        raise ValueError(f"{len(clash)} student(s) already have marks for {chapter}-written: "
                         f"{', '.join(clash[:10])}. Nothing was recorded; pass --replace (REPLACE=1) to replace them")
    for report in reports:
        book.record(report)
    book.export()
    return reports


def main(argv: list[str] | None = None) -> int:
    """The command line (``python -m course_pe.coursework.written --help``)."""
    argv = check_argv("argv", argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    sheet = commands.add_parser("sheet", help="write a chapter's marking sheet and rubric")
    sheet.add_argument("chapter", help=f"one of {', '.join(c for c in CHAPTERS if rubrics_for_chapter(c))}")
    sheet.add_argument("--grades", type=Path, default=Path("grades"))
    sheet.add_argument("--roster", type=Path, help="the class list (default: the one the gradebook keeps)")
    sheet.add_argument("--roster-column", help="the roster's student column, when it is none of the usual ones")
    record = commands.add_parser("record", help="record a filled-in marking sheet into the gradebook")
    record.add_argument("sheet", type=Path)
    record.add_argument("--grades", type=Path, default=Path("grades"))
    record.add_argument("--replace", action="store_true", help="replace marks already recorded")
    args = parser.parse_args(argv)
    try:
        if args.command == "sheet":
            path = write_sheet(args.chapter, args.grades, args.roster, args.roster_column)
            print(f"wrote {path} and {path.parent / 'rubric.md'}: fill in the points (and comments) and run\n"
                  f"  make mark SHEET={path}")
            return 0
        reports = record_sheet(args.sheet, args.grades, replace=args.replace)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    waiting = sum(1 for r in reports for e in r.exercises if e.status != "marked")
    print(f"recorded the marks of {len(reports)} student(s)" + (f" ({waiting} exercise(s) not marked yet: empty "
                                                                 "cells, listed in attention.csv)" if waiting else "")
          + f"; exports written to {args.grades}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
