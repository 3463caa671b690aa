"""The gradebook: grades in SQLite, exports for a learning management system (LMS), per-student reports.

Files under the gradebook folder (``grades/`` by default), readable by their owner only (the folder is created with
mode 0700, every file 0600: they hold students' names, grades and messages). A folder that already exists must
belong to the grader's user and be writable by nobody else, and so must the database; otherwise the gradebook
refuses it (``ValueError``) rather than record into, or export, grades that someone else can forge. A folder or
database that others may only read is made private (0700, 0600). A folder above it that every user may write
(without the sticky bit of ``/tmp``) is refused too: anyone could replace the gradebook folder.

* ``gradebook.sqlite``: table ``grades`` with one row per (student, assignment, exercise): score, max_score, status,
  message, notebook, graded_at (UTC, ISO 8601), seed. Recording a student's assignment replaces all of that
  student's rows for it in one transaction (a regrade never duplicates). Names that differ only in case are one
  student (``BOB`` and ``bob``, as in the roster): recording ``BOB`` replaces ``bob``'s rows, and the grader refuses
  to replace existing rows unless asked to (``--replace``, ``REPLACE=1``). SQLite's locking with a generous busy timeout makes
  concurrent graders (several ``make grade`` at once) safe.
* tables ``roster`` and ``meta``: the class list of the last roster graded with (every column of the file, kept for
  the LMS exports); ``assignments``: an assignment's due date and late rule; ``submissions``: when each student's
  graded notebook was submitted.
* ``<assignment>/<student>.json``: the full report of the student's latest grading.
* the exports (:mod:`course_pe.coursework.exports`): ``grades_wide.csv``, ``grades_long.csv``, ``canvas.csv``,
  ``moodle.csv`` and ``attention.csv`` for every assignment, ``<assignment>/canvas.csv``, ``<assignment>/moodle.csv``,
  ``<assignment>/statistics.txt`` and ``<assignment>/feedback/<student>.txt`` for each. An exercise that was not
  graded is an empty cell with its reason in every one of them, never a 0.

An export holds the database's write lock from reading the rows to renaming the files into place, so two graders
exporting at once cannot write an export that misses a grade recorded in between; files are written to a
temporary name and renamed, so a reader never sees a half-written file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .._validation import check_str
from .exports import csv_text as _csv_text  # noqa: F401 (the exports' CSV writer; tests use it from here)
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
# The class list, the assignments' due dates and the submissions' times (for the exports; see exports.py).
_TERM_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS roster (position INTEGER PRIMARY KEY, student TEXT NOT NULL, name TEXT NOT NULL, "
    "cells TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS assignments (assignment TEXT PRIMARY KEY, due TEXT, late_rule TEXT)",
    "CREATE TABLE IF NOT EXISTS submissions (student TEXT NOT NULL, assignment TEXT NOT NULL, submitted_at TEXT NOT "
    "NULL, source TEXT NOT NULL, PRIMARY KEY (student, assignment))",
)


class Gradebook:
    """The gradebook in folder ``folder`` (created on first use, mode 0700)."""

    def __init__(self, folder: Path) -> None:
        if not isinstance(folder, (str, os.PathLike)) or isinstance(folder, bytes):
            raise TypeError(f"folder must be a str or a path, got {type(folder).__name__}")
        if str(folder) == "":
            raise ValueError("folder must not be empty")
        self.folder = Path(folder)
        self.database = self.folder / "gradebook.sqlite"
        self._term_state: tuple[Any, Any, Any] = ({}, None, {})  # what export() read with the rows

    def check(self, create: bool = True) -> None:
        """Make sure that the gradebook folder and its database belong to the grader's user and that nobody else can
        write them (see the module docstring): create the folder (0700) when ``create`` and it is missing, make an
        existing one private, and raise ``ValueError`` naming the problem otherwise."""
        if not isinstance(create, bool):
            raise TypeError(f"create must be a bool, got {type(create).__name__}")
        euid = os.geteuid()
        if not os.path.lexists(self.folder):
            _check_above(Path(os.path.abspath(self.folder)))
            if not create:
                return
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        real = Path(os.path.realpath(self.folder))
        info = os.stat(real)
        if not stat.S_ISDIR(info.st_mode):
            raise ValueError(f"the grades folder {str(self.folder)!r} is not a folder")
        _check_above(real)
        if info.st_uid != euid:
            raise ValueError(f"the grades folder {str(self.folder)!r} belongs to user id {info.st_uid}, not to the "
                             f"grader's (user id {euid}): whoever owns it can forge or change grades. Grade into a "
                             "folder of your own (GRADES=...), or give this one to the grader's user")
        if info.st_mode & 0o022:
            raise ValueError(f"the grades folder {str(self.folder)!r} can be written by other users (mode "
                             f"{stat.S_IMODE(info.st_mode):04o}): they could forge or change grades. Grade into a new "
                             "folder (GRADES=...), or check its contents and `chmod 700` it")
        if info.st_mode & 0o077:
            os.chmod(real, 0o700)
        for name in ("gradebook.sqlite", "gradebook.sqlite-journal", "gradebook.sqlite-wal", "gradebook.sqlite-shm"):
            try:
                file = os.lstat(real / name)
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(file.st_mode) or file.st_uid != euid or file.st_nlink != 1 or file.st_mode & 0o022:
                raise ValueError(f"the grades folder {str(self.folder)!r} holds a {name} that is not a private file "
                                 f"of the grader's user (a link, another user's file, or writable by others): "
                                 "refusing to use grades someone else may have written. Grade into a new folder "
                                 "(GRADES=...)")
            if file.st_mode & 0o077:
                os.chmod(real / name, 0o600)

    def _connect(self) -> sqlite3.Connection:
        self.check()
        try:  # created private (another grader may be creating it at the same moment)
            os.close(os.open(self.database, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
        except FileExistsError:
            pass
        connection = sqlite3.connect(self.database, timeout=300, isolation_level=None)
        connection.execute("PRAGMA busy_timeout = 300000")
        connection.execute(_SCHEMA)
        for statement in _TERM_SCHEMA:
            connection.execute(statement)
        return connection

    def _rows(self, connection: sqlite3.Connection) -> list[dict[str, Any]]:
        from .exercises import EXERCISES
        from .rubrics import RUBRICS

        order = {e: i for i, e in enumerate([*EXERCISES, *RUBRICS])}  # the registry's order, then the book's
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
            # names that differ only in case are one student (names are ASCII: NOCASE folds exactly those)
            connection.execute("DELETE FROM grades WHERE student = ? COLLATE NOCASE AND assignment = ?",
                               (report.student, assignment))
            connection.executemany("INSERT INTO grades VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            _atomic_write(json_file, json.dumps(report.to_json(), indent=2, ensure_ascii=False))
            for other in json_file.parent.iterdir():  # the report under another spelling of the name
                if other.name.lower() == json_file.name.lower() and other.name != json_file.name:
                    other.unlink()
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
        self.check(create=False)
        if not self.database.exists():
            return {}
        connection = self._connect()
        try:
            return {s: t for s, t in connection.execute(
                "SELECT student, MAX(graded_at) FROM grades WHERE assignment = ? GROUP BY student", (assignment,))}
        finally:
            connection.close()

    def same_student(self, assignment: str, student: str) -> tuple[str, str] | None:
        """The name under which ``student`` (compared without case) has a grade for ``assignment``, with the time of
        that grading, or None."""
        if not isinstance(student, str):
            raise TypeError(f"student must be a str, got {type(student).__name__}")
        graded = self.graded(assignment)
        return next(((name, when) for name, when in sorted(graded.items()) if name.lower() == student.lower()), None)

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
                rows = self._rows(connection)
                self._term_state = (self._assignments(rows, connection), self._roster(connection),
                                    self._submissions(connection))  # read under the same lock as the rows
                return self._export(rows)
            finally:
                connection.execute("COMMIT")
        finally:
            connection.close()

    def _export(self, rows: list[dict[str, Any]]) -> tuple[Path, Path]:
        from .exports import write_exports

        assignments, roster, submissions = self._term_state
        written = write_exports(self.folder, rows, assignments, roster, submissions, _exercise_order(),
                                _assignment_key, _atomic_write)
        return written["wide"], written["long"]

    # ------------------------------------------------------------------ the term: roster, due dates, submissions

    def store_roster(self, table: Any, source: str = "") -> None:
        """Keep ``table`` (a :class:`course_pe.coursework.roster.RosterTable`) as the class list of the exports,
        replacing the one kept before; ``source``: where it came from (its file name), for the record."""
        from .roster import RosterTable

        if not isinstance(table, RosterTable):
            raise TypeError(f"table must be a RosterTable (roster.read_roster_table), got {type(table).__name__}")
        check_str("source", source)
        connection = self._connect()
        try:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("DELETE FROM roster")
            connection.executemany("INSERT INTO roster VALUES (?, ?, ?, ?)", [
                (i, e.student, e.name, json.dumps(list(row), ensure_ascii=False))
                for i, (e, row) in enumerate(zip(table.entries, table.rows))])
            for key, value in (("roster_header", json.dumps(list(table.header), ensure_ascii=False)),
                               ("roster_id_column", str(table.id_column)), ("roster_source", source)):
                connection.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        finally:
            connection.close()

    def roster(self) -> Any:
        """The class list kept by :meth:`store_roster` (a :class:`course_pe.coursework.exports.StoredRoster`), or
        None."""
        self.check(create=False)
        if not self.database.exists():
            return None
        connection = self._connect()
        try:
            return self._roster(connection)
        finally:
            connection.close()

    def _roster(self, connection: sqlite3.Connection) -> Any:
        from .exports import StoredRoster

        meta = dict(connection.execute("SELECT key, value FROM meta"))
        entries = connection.execute("SELECT student, name, cells FROM roster ORDER BY position").fetchall()
        if "roster_header" not in meta or not entries:
            return None
        return StoredRoster(tuple(json.loads(meta["roster_header"])), tuple(tuple(json.loads(c)) for _, _, c in entries),
                            tuple(s for s, _, _ in entries), tuple(n for _, n, _ in entries),
                            int(meta["roster_id_column"]), meta.get("roster_source", ""))

    def set_assignment(self, assignment: str, *, due: str | None, late_rule: str | None) -> None:
        """Set ``assignment``'s due date (UTC ISO 8601, see :func:`course_pe.coursework.exports.parse_due`) and late
        rule (:func:`~course_pe.coursework.exports.parse_late_rule`); None keeps what was set before."""
        _check_assignment(assignment)
        if due is not None:
            check_str("due", due)
            try:
                when = datetime.fromisoformat(due)
            except ValueError:
                raise ValueError(f"due must be a date and time in ISO 8601, got {due!r}") from None
            if when.tzinfo is None:
                raise ValueError(f"due must carry its time zone (exports.parse_due gives UTC), got {due!r}")
        if late_rule is not None:
            from .exports import parse_late_rule

            check_str("late_rule", late_rule)
            try:
                parse_late_rule(late_rule)
            except ValueError as error:
                raise ValueError(f"late_rule: {error}") from None
            if parse_late_rule(late_rule) != late_rule:
                raise ValueError(f"late_rule must be in its normal form ({parse_late_rule(late_rule)!r}), got "
                                 f"{late_rule!r}")
        connection = self._connect()
        try:
            connection.execute("BEGIN IMMEDIATE")
            old = connection.execute("SELECT due, late_rule FROM assignments WHERE assignment = ?",
                                     (assignment,)).fetchone() or (None, None)
            connection.execute("INSERT OR REPLACE INTO assignments VALUES (?, ?, ?)",
                               (assignment, due if due is not None else old[0],
                                late_rule if late_rule is not None else old[1]))
            connection.execute("COMMIT")
        finally:
            connection.close()

    def record_submission(self, student: str, assignment: str, submitted_at: str, source: str) -> None:
        """Record when ``student``'s graded notebook for ``assignment`` was submitted (UTC ISO 8601) and how that is
        known (``source``: "file time", "TIMES")."""
        try:
            validate_name(student)
        except (TypeError, ValueError) as error:
            raise type(error)(f"student: {error}") from None
        _check_assignment(assignment)
        check_str("submitted_at", submitted_at)
        try:
            if datetime.fromisoformat(submitted_at).tzinfo is None:
                raise ValueError
        except ValueError:
            raise ValueError(f"submitted_at must be a date and time in ISO 8601 with its time zone, got "
                             f"{submitted_at!r}") from None
        if not check_str("source", source):
            raise ValueError("source must not be empty")
        connection = self._connect()
        try:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("DELETE FROM submissions WHERE student = ? COLLATE NOCASE AND assignment = ?",
                               (student, assignment))
            connection.execute("INSERT INTO submissions VALUES (?, ?, ?, ?)", (student, assignment, submitted_at, source))
            connection.execute("COMMIT")
        finally:
            connection.close()

    def _submissions(self, connection: sqlite3.Connection) -> dict[tuple[str, str], str]:
        return {(s.lower(), a): t for s, a, t in connection.execute(
            "SELECT student, assignment, submitted_at FROM submissions")}

    def _assignments(self, rows: list[dict[str, Any]], connection: sqlite3.Connection) -> dict[str, Any]:
        from .exports import AssignmentInfo

        settings = {a: (d, r) for a, d, r in connection.execute("SELECT assignment, due, late_rule FROM assignments")}
        found: dict[str, Any] = {}
        for assignment in dict.fromkeys(r["assignment"] for r in rows):
            kind, exercises = _assignment_exercises(assignment, [r for r in rows if r["assignment"] == assignment])
            due, rule = settings.get(assignment, (None, None))
            found[assignment] = AssignmentInfo(assignment, kind, exercises, due, rule)
        return found


def _check_assignment(assignment: object) -> str:
    """``assignment`` if it is a valid assignment name (letters, digits, ``. _ -``, not starting with a dot)."""
    check_str("assignment", assignment)
    if not assignment or not all(ch.isalnum() or ch in "._-" for ch in assignment) or assignment.startswith("."):
        raise ValueError(f"invalid assignment {assignment!r}: letters, digits, '.', '_' and '-'")
    return assignment  # type: ignore[return-value]


def _assignment_exercises(assignment: str, rows: list[dict[str, Any]]) -> tuple[str, tuple[tuple[str, float], ...]]:
    """The kind of ``assignment`` and its exercises with their points, which fix its maximum: a chapter's registered
    coding exercises, a chapter's rubrics (``<chapter>-written``), or the exercises its rows name."""
    from .exercises import chapters, exercises_for_chapter

    points = {r["exercise"]: float(r["max_score"]) for r in rows}
    if assignment in chapters():
        return "coding", tuple((e, points.get(e, 1.0)) for e in exercises_for_chapter(assignment))
    if assignment.endswith("-written"):
        from .rubrics import rubrics_for_chapter

        rubrics = rubrics_for_chapter(assignment[: -len("-written")])
        if rubrics:
            return "written", tuple((r.label, r.points) for r in rubrics)
    return "custom", tuple(points.items())


def _exercise_order() -> list[str]:
    from .exercises import EXERCISES

    return list(EXERCISES)


def _assignment_key(assignment: str) -> tuple:
    """Assignments in the book's order (its chapters with exercises), coding before written, then others by name."""
    from .rubrics import CHAPTERS

    chapter = assignment[: -len("-written")] if assignment.endswith("-written") else assignment
    return (CHAPTERS.index(chapter) if chapter in CHAPTERS else len(CHAPTERS), assignment.endswith("-written"),
            assignment)


def _check_above(folder: Path) -> None:
    """Refuse ``folder`` when a folder above it can be written by every user without the sticky bit (anyone could
    then rename the gradebook folder away and put their own in its place)."""
    for parent in folder.parents:
        try:
            info = os.stat(parent)
        except FileNotFoundError:
            continue
        if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
            raise ValueError(f"the grades folder {str(folder)!r} lies in {str(parent)!r}, which every user can write "
                             "(without the sticky bit of /tmp): anyone could replace the gradebook. Grade into a "
                             "folder of your own (GRADES=...)")


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.stat(path.parent)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise ValueError(f"{str(path.parent)!r} is not a private folder of the grader's user")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
