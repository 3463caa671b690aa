"""The gradebook: grades in SQLite, exports for a learning management system (LMS), per-student reports.

Files under the gradebook folder (``grades/`` by default), readable by their owner only (the folder is created with
mode 0700, every file 0600: they hold students' names, grades and messages):

* ``gradebook.sqlite``: table ``grades`` with one row per (student, assignment, exercise): score, max_score, status,
  message, notebook, graded_at (UTC, ISO 8601), seed. Recording a student's assignment replaces all of that
  student's rows for it in one transaction (a regrade never duplicates); the grader refuses to replace existing
  rows unless asked to (``--replace``, ``REPLACE=1``). SQLite's locking with a generous busy timeout makes
  concurrent graders (several ``make grade`` at once) safe.
* ``grades_wide.csv``: one row per student, one column per exercise (score), then total and max: for an LMS import.
* ``grades_long.csv``: one row per student and exercise with status and message.
* ``<assignment>/<student>.json``: the full report of the student's latest grading.

An export holds the database's write lock from reading the rows to renaming the files into place, so two graders
exporting at once cannot write an export that misses a grade recorded in between; files are written to a
temporary name and renamed, so a reader never sees a half-written file.
"""

from __future__ import annotations

import csv
import json
import os
import sqlite3
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .names import validate_name

__all__ = ["Gradebook"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS grades (
    student TEXT NOT NULL,
    assignment TEXT NOT NULL,
    exercise TEXT NOT NULL,
    score REAL NOT NULL,
    max_score REAL NOT NULL,
    status TEXT NOT NULL,
    message TEXT NOT NULL,
    notebook TEXT NOT NULL,
    graded_at TEXT NOT NULL,
    seed INTEGER,
    PRIMARY KEY (student, assignment, exercise)
)
"""


class Gradebook:
    """The gradebook in folder ``folder`` (created on first use, mode 0700)."""

    def __init__(self, folder: Path) -> None:
        if not isinstance(folder, (str, os.PathLike)) or isinstance(folder, bytes):
            raise TypeError(f"folder must be a str or a path, got {type(folder).__name__}")
        if str(folder) == "":
            raise ValueError("folder must not be empty")
        self.folder = Path(folder)
        self.database = self.folder / "gradebook.sqlite"

    def _connect(self) -> sqlite3.Connection:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not self.database.exists():
            os.close(os.open(self.database, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))
        connection = sqlite3.connect(self.database, timeout=300, isolation_level=None)
        connection.execute("PRAGMA busy_timeout = 300000")
        connection.execute(_SCHEMA)
        return connection

    def _rows(self, connection: sqlite3.Connection) -> list[dict[str, Any]]:
        from .exercises import EXERCISES

        order = {e: i for i, e in enumerate(EXERCISES)}
        connection.row_factory = sqlite3.Row
        rows = [dict(r) for r in connection.execute("SELECT * FROM grades")]
        connection.row_factory = None
        return sorted(rows, key=lambda r: (r["student"], r["assignment"], order.get(r["exercise"], len(order)),
                                           r["exercise"]))

    def record(self, report: Any) -> Path:
        """Replace ``report.student``'s rows for ``report.assignment`` by the report's and write its JSON report
        (under the database's write lock). Returns the JSON file's path. ``report`` is a
        :class:`course_pe.coursework.grade.GradeReport` (checked by its fields); its student name must be valid
        (``course_pe.coursework.names.validate_name``)."""
        # by its fields, not isinstance: ``python -m course_pe.coursework.grade`` makes its reports from
        # ``__main__.GradeReport``, and the gradebook must not import the grader (no import circle)
        if not all(hasattr(report, a) for a in ("student", "assignment", "notebook", "exercises", "seed", "to_json")):
            raise TypeError(f"report must be a GradeReport, got {type(report).__name__}")
        try:
            validate_name(report.student)
        except (TypeError, ValueError) as error:
            raise ValueError(f"report.student: {error}") from None
        assignment = report.assignment or "custom"
        if not isinstance(assignment, str) or not all(ch.isalnum() or ch in "._-" for ch in assignment) \
                or assignment.startswith("."):
            raise ValueError(f"invalid report.assignment {assignment!r}")
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        rows = [(report.student, assignment, e.exercise, float(e.score), float(e.max_score), e.status, e.message,
                 report.notebook, now, report.seed) for e in report.exercises]
        json_file = self.folder / assignment / f"{report.student}.json"
        connection = self._connect()
        try:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("DELETE FROM grades WHERE student = ? AND assignment = ?", (report.student, assignment))
            connection.executemany("INSERT INTO grades VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            _atomic_write(json_file, json.dumps(report.to_json(), indent=2, ensure_ascii=False))
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        finally:
            connection.close()
        return json_file

    def graded(self, assignment: str) -> dict[str, str]:
        """Students who already have grades for ``assignment``, with the time of their latest grading."""
        if not isinstance(assignment, str):
            raise TypeError(f"assignment must be a str, got {type(assignment).__name__}")
        if not self.database.exists():
            return {}
        connection = self._connect()
        try:
            return {s: t for s, t in connection.execute(
                "SELECT student, MAX(graded_at) FROM grades WHERE assignment = ? GROUP BY student", (assignment,))}
        finally:
            connection.close()

    def rows(self) -> list[dict[str, Any]]:
        """Every row, ordered by student, assignment and the registry's exercise order."""
        connection = self._connect()
        try:
            return self._rows(connection)
        finally:
            connection.close()

    def export(self) -> tuple[Path, Path]:
        """Write ``grades_wide.csv`` and ``grades_long.csv`` from the database, holding its write lock from reading
        the rows to renaming the files; return their paths."""
        connection = self._connect()
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                return self._export(self._rows(connection))
            finally:
                connection.execute("COMMIT")
        finally:
            connection.close()

    def _export(self, rows: list[dict[str, Any]]) -> tuple[Path, Path]:
        exercises = list(dict.fromkeys(r["exercise"] for r in sorted(rows, key=lambda r: _exercise_rank(r["exercise"]))))
        students = list(dict.fromkeys(r["student"] for r in rows))
        wide = self.folder / "grades_wide.csv"
        long = self.folder / "grades_long.csv"
        table: dict[str, dict[str, float]] = {s: {} for s in students}
        maxima: dict[str, float] = {s: 0.0 for s in students}
        for r in rows:
            table[r["student"]][r["exercise"]] = r["score"]
            maxima[r["student"]] += r["max_score"]
        lines = [["student", *exercises, "total", "max"]]
        for s in students:
            scores = table[s]
            lines.append([s, *[_number(scores[e]) if e in scores else "" for e in exercises],
                          _number(sum(scores.values())), _number(maxima[s])])
        _atomic_write(wide, _csv_text(lines))
        keys = ["student", "assignment", "exercise", "score", "max_score", "status", "message", "notebook",
                "graded_at", "seed"]
        _atomic_write(long, _csv_text([keys] + [[_number(r[k]) if k in ("score", "max_score") else r[k] for k in keys]
                                               for r in rows]))
        return wide, long


def _exercise_rank(exercise: str) -> int:
    from .exercises import EXERCISES

    return list(EXERCISES).index(exercise) if exercise in EXERCISES else len(EXERCISES)


def _number(x: float) -> str:
    return f"{x:g}"


def _csv_text(lines: list[list[Any]]) -> str:
    import io

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for line in lines:
        # a cell starting with =, +, - or @ is a formula in spreadsheets: quote it as text
        writer.writerow([f"'{c}" if isinstance(c, str) and c[:1] in "=+-@" else c for c in line])
    return buf.getvalue()


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
