"""What the gradebook exports: one result per student and assignment, and the files an instructor imports or sends.

The gradebook (:mod:`course_pe.coursework.gradebook`) holds one row per student, assignment and exercise. This module
turns those rows into *results* and writes the files made from them; ``Gradebook.export`` calls
``write_exports`` under the database's lock after every grading run.

**A result** (``Result``) is one student's grade for one assignment, out of the assignment's **fixed maximum**
(the sum of its exercises' points: one per coding exercise of a chapter, a rubric's total for written work), whatever
has been graded so far. It is *complete* when every exercise has a verdict (passed, failed, unreadable, or marked by
hand). An exercise that was **not graded** (the grader could not run the submission: its sandbox did not start or was
killed, the submission ran past its whole time limit, grading was interrupted) makes the result incomplete: its score
is left **empty, never 0**, with the reason, in every file below, and the assignment is listed as needing attention.
A roster student without a grade for an assignment gets an empty cell too ("no grade recorded").

**Late work.** An assignment may have a due date and a late rule (``make grade ... DUE=... LATE=...``). The rule
``none`` (the default) records lateness and changes no score; ``zero`` gives a late submission 0; ``P%/day`` (or
``P%/hour``) takes P percent of the maximum for every started day (hour) after the due date, down to 0. Scores in the
gradebook stay as graded; the exports show the score after the penalty and say why.

Files, under the gradebook folder (mode 0600, written atomically):

* ``grades_wide.csv``: one row per student (every roster student, then students graded but not on the roster), one
  column per exercise (the score, or empty when it was not graded), then ``total`` (the graded points, penalties
  applied) and ``max`` (the fixed maxima of every assignment graded so far, the same for everyone), ``name`` and
  ``needs attention`` (why a cell is empty).
* ``grades_long.csv``: one row per student and exercise: score (empty when not graded), status, message, notebook,
  time, seed.
* ``canvas.csv`` and ``<assignment>/canvas.csv``: Canvas's gradebook import (every assignment / one assignment), laid
  out as Canvas's own importer reads a file (``CANVAS_IMPORTER``): the student columns ``Student``, ``ID``,
  ``SIS User ID``, ``SIS Login ID``, ``Section`` (the roster's own values when the roster is a Canvas export), a
  ``Points Possible`` row with each assignment's fixed maximum, then one column per assignment titled
  ``<assignment>: coding`` or ``<assignment>: written``; an empty cell is "no grade" (Canvas leaves such a cell
  ungraded). Canvas's format has no place for text (any further column would become a new assignment): the reasons
  are in ``attention.csv`` and the summary.
* ``moodle.csv`` and ``<assignment>/moodle.csv``: Moodle's CSV grade import (``MOODLE_IMPORTER``): the roster's
  identity columns (``First name``, ``Last name``, ``ID number``, ``Email address`` ... as the roster has them, else
  ``Username``), one column per assignment, ``-`` for no grade (what Moodle's importer reads as "no grade", for an
  existing grade item and for a new one), and a ``<title> feedback`` column per assignment with the reason or the
  verdicts, which Moodle imports as the grade's feedback.
* ``attention.csv``: every student and assignment that needs the instructor: not graded (with the reason), no
  grade recorded for a roster student, late, graded but not on the roster.
* ``<assignment>/feedback/<student>.txt``: the feedback to send each student (see
  :mod:`course_pe.coursework.feedback`).
* ``<assignment>/statistics.txt``: the class's statistics (see :mod:`course_pe.coursework.statistics`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

from .._validation import check_str

# (AssignmentInfo, Result, results, the *_rows functions, csv_text and write_exports are the gradebook's internals)
__all__ = ["CANVAS_IMPORTER", "MOODLE_IMPORTER", "StoredRoster", "late_penalty", "parse_due", "parse_late_rule"]

#: The source of Canvas's import rules, which are Instructure's importer, canvas-lms ``app/models/gradebook_importer.rb``
#: (the header test ``row[0].include?("Student") && row[1].include?("ID")`` with "Section" closing the student
#: columns, SIS User ID / SIS Login ID / Integration ID / Root Account between them; the row whose first cell includes
#: "Points Possible"; an assignment column matched by ``Title (id)`` or by title, else created with the Points
#: Possible value; a blank or ``-`` cell is no score, ``EX`` excused) and ``Assignment.title_and_id``
#: (a title, a space, then the id in parentheses at the end).
CANVAS_IMPORTER = "canvas-lms app/models/gradebook_importer.rb (GradebookImporter), Assignment.title_and_id"
#: The source of Moodle's import rules, which are MoodleDocs "Grade import" (Map from and Map to, the user fields
#: userid, useridnumber, useremail, username) and Moodle's importer, ``grade/import/csv/classes/load_data.php`` (an empty or ``-`` value is
#: no grade for an existing grade item, ``-`` for a new one; any other value must be a number or the import stops;
#: a user that cannot be mapped stops the import; a column can be mapped to an item's feedback).
MOODLE_IMPORTER = "MoodleDocs 'Grade import'; moodle grade/import/csv/classes/load_data.php (gradeimport_csv_load_data)"

#: the student columns of a Canvas gradebook file, in Canvas's order (the optional ones between ID and Section)
CANVAS_STUDENT_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Integration ID", "Root Account", "Section")
#: the columns Canvas's importer drops as not being assignments (a title must not contain one of them)
CANVAS_NOT_ASSIGNMENTS = ("Current Score", "Current Points", "Current Grade", "Final Score", "Final Points",
                          "Final Grade", "Override Score", "Override Grade", "Override Status")
#: roster columns kept in the Moodle export (header keys: lower case, spaces as _): who a student is, never a grade
IDENTITY_KEYS = frozenset({
    "first_name", "firstname", "given_name", "last_name", "lastname", "surname", "family_name", "name", "full_name",
    "student", "student_name", "id", "id_number", "idnumber", "student_id", "student_number", "sis_user_id",
    "sis_login_id", "login_id", "integration_id", "username", "user_name", "email", "email_address", "institution",
    "department", "section", "group", "groups", "cohort",
})
LATE_RULES_HELP = "none (record only), zero, or a percentage per started day or hour such as 10%/day"


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.strip().lower()).strip("_")


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class StoredRoster:
    """The class list the gradebook keeps (the last roster graded with): ``header`` as written, ``rows`` (cells per
    student, roster order), ``students`` (the gradebook names, same order) and ``names`` (display names)."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    students: tuple[str, ...]
    names: tuple[str, ...]
    id_column: int
    source: str = ""

    def __post_init__(self) -> None:
        from .._validation import check_int
        from .names import validate_name

        for name in ("header", "students", "names"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
                raise TypeError(f"{name} must be a tuple of str, got {type(value).__name__}")
        if not isinstance(self.rows, tuple) or not all(
                isinstance(r, tuple) and all(isinstance(c, str) for c in r) for r in self.rows):
            raise TypeError("rows must be a tuple of tuples of str")
        if not (len(self.rows) == len(self.students) == len(self.names)):
            raise ValueError("rows, students and names must have one entry per student")
        if any(len(r) != len(self.header) for r in self.rows):
            raise ValueError("rows: every row must have one cell per header column")
        for student in self.students:
            try:
                validate_name(student)
            except ValueError as error:
                raise ValueError(f"students: {error}") from None
        # a NumPy integer is stored as the Python int it stands for
        object.__setattr__(self, "id_column", check_int("id_column", self.id_column, minimum=0))
        if self.id_column >= len(self.header):
            raise ValueError(f"id_column {self.id_column} is not a column of the header")
        check_str("source", self.source)

    def name_of(self) -> dict[str, str]:
        return {s.lower(): n for s, n in zip(self.students, self.names)}


@dataclass(frozen=True)
class AssignmentInfo:
    """An assignment as the exports show it: ``kind`` ``coding`` (a chapter's coding exercises), ``written`` (its
    written and proof exercises, marked by hand) or ``custom``; ``exercises`` with their points (the fixed maximum is
    their sum); ``due`` (UTC, ISO 8601) and ``late_rule`` (see :func:`parse_late_rule`), or None."""

    assignment: str
    kind: str
    exercises: tuple[tuple[str, float], ...]
    due: str | None = None
    late_rule: str | None = None

    @property
    def max_score(self) -> float:
        return float(sum(points for _, points in self.exercises))

    @property
    def title(self) -> str:
        return assignment_title(self.assignment, self.kind)


def assignment_title(assignment: str, kind: str) -> str:
    """The column title of an assignment in the LMS files: ``relative: coding``, ``why_order: written`` (no
    parenthesised number at the end, which Canvas would read as an assignment id, and none of Canvas's
    reserved column names)."""
    base = assignment[: -len("-written")] if assignment.endswith("-written") else assignment
    return f"{base}: {kind}"


@dataclass
class Result:
    """One student's result for one assignment (see the module docstring). ``score`` is None unless the result is
    complete; ``final`` is the score after the late penalty; ``verdicts`` lists ``(exercise, status, score, max)``."""

    student: str
    assignment: str
    max_score: float
    score: float | None = None
    final: float | None = None
    status: str = "no grade"  # complete, not graded, no grade
    reason: str = ""
    verdicts: list[tuple[str, str, float, float]] = field(default_factory=list)
    submitted_at: str | None = None
    late: str = ""  # "" or e.g. "1 d 3 h late: -10%"
    graded_at: str = ""


# --------------------------------------------------------------------------- due dates and late rules


def parse_due(text: str) -> str:
    """A due date given as ISO 8601 (``2026-12-05T23:59``, ``2026-12-05 23:59+01:00``, ``2026-12-05``: the end of that
    day) as UTC ISO 8601 text; a time without an offset is the machine's local time. ``ValueError`` otherwise."""
    check_str("text", text)
    raw = text.strip()
    try:
        when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"the text of DUE must be a date and time such as 2026-12-05T23:59 or "
                         f"2026-12-05T23:59+01:00, got {text!r}") \
            from None
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", raw):
        when = when.replace(hour=23, minute=59, second=59)
    if when.tzinfo is None:
        when = when.astimezone()  # the machine's local time
    return when.astimezone(timezone.utc).isoformat(timespec="seconds")


_RULE = re.compile(r"(?P<percent>\d+(?:\.\d+)?)\s*%\s*/\s*(?P<unit>day|hour)")


def parse_late_rule(text: str) -> str:
    """The late rule ``text`` in its normal form (``none``, ``zero``, ``10%/day``, ``2.5%/hour``); ``ValueError``
    otherwise."""
    check_str("text", text)
    rule = text.strip().lower().replace(" ", "")
    if rule in ("none", "zero"):
        return rule
    match = _RULE.fullmatch(rule)
    if match is None or not 0 < float(match.group("percent")) <= 100:
        raise ValueError(f"the text of LATE must be {LATE_RULES_HELP}, got {text!r}")
    return f"{float(match.group('percent')):g}%/{match.group('unit')}"


def late_penalty(rule: str | None, late_seconds: float) -> float:
    """The fraction of the maximum that ``rule`` (a late rule, or None for none) takes from a submission
    ``late_seconds`` (a finite number) after the due date (0 when it was on time), between 0 and 1."""
    from .._validation import check_float, check_optional_str

    rule = check_optional_str("rule", rule)
    late_seconds = check_float("late_seconds", late_seconds)
    if rule is not None:
        try:
            rule = parse_late_rule(rule)
        except ValueError:
            raise ValueError(f"rule must be {LATE_RULES_HELP}, got {rule!r}") from None
    if not rule or late_seconds <= 0 or rule == "none":
        return 0.0
    if rule == "zero":
        return 1.0
    match = _RULE.fullmatch(rule)
    if match is None:
        raise ValueError(f"unknown late rule {rule!r}")
    unit = 86400.0 if match.group("unit") == "day" else 3600.0
    return min(1.0, math.ceil(late_seconds / unit) * float(match.group("percent")) / 100.0)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    parts = [f"{days} d"] if days else []
    if hours or days:
        parts.append(f"{hours} h")
    if not days:
        parts.append(f"{minutes} min")
    return " ".join(parts)


# --------------------------------------------------------------------------- results


def results(rows: list[dict[str, Any]], assignments: dict[str, AssignmentInfo],
            submissions: dict[tuple[str, str], str]) -> dict[tuple[str, str], Result]:
    """The result of every (student, assignment) that has rows. ``submissions`` maps (student in lower case,
    assignment) to the submission's time (UTC ISO 8601)."""
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault((r["student"], r["assignment"]), []).append(r)
    out: dict[tuple[str, str], Result] = {}
    for (student, assignment), graded in by.items():
        info = assignments[assignment]
        result = Result(student, assignment, info.max_score, graded_at=max(r["graded_at"] for r in graded))
        present = {r["exercise"]: r for r in graded}
        result.verdicts = [(r["exercise"], r["status"], float(r["score"]), float(r["max_score"])) for r in graded]
        waiting = [r for r in graded if r["status"] == "not graded"]
        absent = [e for e, _ in info.exercises if e not in present]
        if waiting:
            result.status = "not graded"
            first = waiting[0]
            result.reason = f"{first['exercise']} not graded: {first['message']}"
            if len(waiting) > 1:
                result.reason += f" (and {len(waiting) - 1} more exercise(s) not graded)"
        elif absent:
            result.status = "not graded"
            result.reason = f"no grade for {', '.join(absent)} yet"
        else:
            result.status = "complete"
            result.score = float(sum(float(r["score"]) for r in graded))
            result.final = result.score
        submitted = submissions.get((student.lower(), assignment))
        result.submitted_at = submitted
        if submitted and info.due:
            late = (datetime.fromisoformat(submitted) - datetime.fromisoformat(info.due)).total_seconds()
            if late > 0:
                penalty = late_penalty(info.late_rule, late)
                result.late = f"submitted {_duration(late)} after the due date"
                if penalty:
                    result.late += f": -{penalty * 100:g}% of {info.max_score:g} ({info.late_rule})"
                    if result.score is not None:
                        result.final = max(0.0, result.score - penalty * info.max_score)
        out[(student, assignment)] = result
    return out


def _order(assignments: dict[str, AssignmentInfo], key: Callable[[str], tuple]) -> list[str]:
    return sorted(assignments, key=key)


# --------------------------------------------------------------------------- who is in the exports


def _students(rows: list[dict[str, Any]], roster: StoredRoster | None) -> tuple[list[str], list[str]]:
    """(every roster student, in roster order, then graded students who are not on it (sorted)), and the second list
    alone. Names compare without case, as everywhere in the gradebook."""
    graded = list(dict.fromkeys(r["student"] for r in rows))
    if roster is None:
        return sorted(graded, key=str.lower), []
    listed = {s.lower() for s in roster.students}
    extra = sorted((s for s in graded if s.lower() not in listed), key=str.lower)
    return list(roster.students) + extra, extra


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def _lookup(found: dict[tuple[str, str], Result], student: str, assignment: str) -> Result | None:
    result = found.get((student, assignment))
    if result is None:  # the roster's spelling may differ in case from the gradebook's
        result = next((r for (s, a), r in found.items() if a == assignment and s.lower() == student.lower()), None)
    return result


# --------------------------------------------------------------------------- grades_wide.csv, grades_long.csv


def wide_rows(rows: list[dict[str, Any]], assignments: dict[str, AssignmentInfo], found: dict[tuple[str, str], Result],
              roster: StoredRoster | None, exercise_order: list[str], assignment_order: list[str]) -> list[list[str]]:
    """The rows of ``grades_wide.csv`` (header first)."""
    students, _ = _students(rows, roster)
    names = roster.name_of() if roster is not None else {}
    exercises = [e for a in assignment_order for e, _ in assignments[a].exercises]
    exercises = sorted(dict.fromkeys(exercises), key=lambda e: exercise_order.index(e) if e in exercise_order
                       else len(exercise_order))
    cells: dict[tuple[str, str], dict[str, Any]] = {(r["student"].lower(), r["exercise"]): r for r in rows}
    maximum = sum(assignments[a].max_score for a in assignment_order)
    out = [["student", *exercises, "total", "max", "name", "needs attention"]]
    for student in students:
        line = [student]
        for exercise in exercises:
            r = cells.get((student.lower(), exercise))
            line.append("" if r is None or r["status"] == "not graded" else f"{float(r['score']):g}")
        total, notes, graded = 0.0, [], False
        for assignment in assignment_order:
            result = _lookup(found, student, assignment)
            if result is None:
                if roster is not None:
                    notes.append(f"{assignment}: no grade recorded")
                continue
            graded = True
            if result.status != "complete":
                notes.append(f"{assignment}: {result.reason}")
                total += sum(score for _, status, score, _ in result.verdicts if status != "not graded")
            else:
                total += result.final if result.final is not None else 0.0
            if result.late:
                notes.append(f"{assignment}: {result.late}")
        line += [f"{total:g}" if graded else "", f"{maximum:g}", names.get(student.lower(), ""), "; ".join(notes)]
        out.append(line)
    return out


LONG_COLUMNS = ["student", "assignment", "exercise", "score", "max_score", "status", "message", "notebook",
                "graded_at", "seed"]


def long_rows(rows: list[dict[str, Any]]) -> list[list[Any]]:
    """The rows of ``grades_long.csv`` (header first): the score cell of an exercise that was not graded is empty."""
    out: list[list[Any]] = [list(LONG_COLUMNS)]
    for r in rows:
        line = []
        for k in LONG_COLUMNS:
            if k == "score":
                line.append("" if r["status"] == "not graded" else f"{float(r[k]):g}")
            elif k == "max_score":
                line.append(f"{float(r[k]):g}")
            else:
                line.append(r[k])
        out.append(line)
    return out


# --------------------------------------------------------------------------- Canvas


def _canvas_identity(roster: StoredRoster | None) -> tuple[list[str], Callable[[str, int | None], list[str]]]:
    """The student columns of the Canvas file and a function (student, roster row index or None) -> their cells."""
    if roster is not None:
        header = [h.strip() for h in roster.header]
        if len(header) > 3 and "Student" in header[0] and "ID" in header[1] and "Section" in header[1:8]:
            end = header.index("Section", 1) + 1  # a Canvas export: its own student columns, exactly
            columns = list(roster.header[:end])
            return columns, lambda student, i: list(roster.rows[i][:end]) if i is not None else \
                [student] + [""] * (end - 1)
        keys = [_key(h) for h in roster.header]

        def pick(*names: str) -> int | None:
            return next((keys.index(n) for n in names if n in keys), None)

        sis_user = pick("sis_user_id", "student_id", "student_number", "id_number", "idnumber")
        section = pick("section", "group", "cohort")
        canvas_id = pick("canvas_user_id", "canvas_id", "id")

        def cells(student: str, i: int | None) -> list[str]:
            row = roster.rows[i] if i is not None else None
            name = (roster.names[i] if i is not None else "") or student
            get = (lambda at: row[at] if row is not None and at is not None else "")
            return [name, get(canvas_id), get(sis_user), student, get(section)]

        return ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"], cells
    return ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"], lambda student, i: [student, "", "", student, ""]


def canvas_rows(rows: list[dict[str, Any]], assignments: dict[str, AssignmentInfo], found: dict[tuple[str, str], Result],
                roster: StoredRoster | None, assignment_order: list[str]) -> list[list[str]]:
    """The rows of a Canvas gradebook import file for the assignments ``assignment_order``: the header, the Points
    Possible row, then one row per roster student (every graded student when there is no roster)."""
    columns, identity = _canvas_identity(roster)
    students, extra = _students(rows, roster)
    index = {s.lower(): i for i, s in enumerate(roster.students)} if roster is not None else {}
    titles = [assignments[a].title for a in assignment_order]
    for title in titles:
        if re.search(r"\s\(\d+\)\Z", title) or any(word in title for word in CANVAS_NOT_ASSIGNMENTS):
            raise ValueError(f"the assignment title {title!r} would be misread by Canvas")
    out = [columns + titles, ["Points Possible"] + [""] * (len(columns) - 1)
           + [f"{assignments[a].max_score:g}" for a in assignment_order]]
    for student in students:
        if roster is not None and student in extra:
            continue  # not on the class list: Canvas would not know them (they are in attention.csv)
        line = identity(student, index.get(student.lower()))
        for assignment in assignment_order:
            result = _lookup(found, student, assignment)
            line.append(_cell(result.final) if result is not None and result.status == "complete" else "")
        out.append(line)
    return out


# --------------------------------------------------------------------------- Moodle


def moodle_rows(rows: list[dict[str, Any]], assignments: dict[str, AssignmentInfo], found: dict[tuple[str, str], Result],
                roster: StoredRoster | None, assignment_order: list[str]) -> list[list[str]]:
    """The rows of a Moodle CSV grade import for ``assignment_order``: the roster's identity columns (``Username``
    without a roster), then per assignment its score (``-``: no grade) and its feedback."""
    students, extra = _students(rows, roster)
    if roster is not None:
        keep = [i for i, h in enumerate(roster.header) if _key(h) in IDENTITY_KEYS or i == roster.id_column]
        columns = [roster.header[i] for i in keep]
        index = {s.lower(): i for i, s in enumerate(roster.students)}
    else:
        keep, columns, index = [], ["Username"], {}
    header = list(columns)
    for assignment in assignment_order:
        header += [assignments[assignment].title, f"{assignments[assignment].title} feedback"]
    out = [header]
    for student in students:
        if roster is not None and student in extra:
            continue
        line = [roster.rows[index[student.lower()]][i] for i in keep] if roster is not None else [student]
        for assignment in assignment_order:
            result = _lookup(found, student, assignment)
            if result is None:
                line += ["-", "no grade recorded"]
            elif result.status != "complete":
                line += ["-", f"not graded yet: {result.reason}"[:1000]]
            else:
                line += [_cell(result.final), _verdict_text(result)[:1000]]
        out.append(line)
    return out


def _verdict_text(result: Result) -> str:
    parts = [f"{exercise}: {status}" for exercise, status, _, _ in result.verdicts]
    text = f"{result.score:g} / {result.max_score:g} ({'; '.join(parts)})"
    if result.late:
        text += f"; {result.late}: {result.final:g} / {result.max_score:g}"
    return text


# --------------------------------------------------------------------------- attention.csv


def attention_rows(rows: list[dict[str, Any]], found: dict[tuple[str, str], Result], roster: StoredRoster | None,
                   assignment_order: list[str]) -> list[list[str]]:
    """Every student and assignment that needs the instructor (header first): not graded, no grade recorded (a roster
    student), late, graded but not on the roster."""
    students, extra = _students(rows, roster)
    names = roster.name_of() if roster is not None else {}
    out = [["student", "name", "assignment", "what", "detail"]]
    for student in students:
        name = names.get(student.lower(), "")
        for assignment in assignment_order:
            result = _lookup(found, student, assignment)
            if result is None:
                if roster is not None and student not in extra:
                    out.append([student, name, assignment, "no grade recorded",
                                "no submission was graded for this student (missing, or not yet graded)"])
                continue
            if result.status != "complete":
                out.append([student, name, assignment, "not graded", result.reason])
            if result.late:
                out.append([student, name, assignment, "late", result.late])
            if student in extra:
                out.append([student, name, assignment, "not on the roster",
                            "graded, but not on the class list: not in canvas.csv or moodle.csv"])
    return out


# --------------------------------------------------------------------------- writing


def csv_text(lines: list[list[Any]]) -> str:
    """``lines`` as CSV text, one ``\\n``-terminated line per row; a cell that a spreadsheet would read as a formula
    (starting with ``= + - @``, a tab or a carriage return: OWASP "CSV injection") is written as text, with a leading
    ``'``, except a plain number and Moodle's no-grade ``-``. A field holding a line break is quoted."""
    out = []
    for line in lines:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\r\n").writerow([_safe(c) for c in line])
        out.append(buf.getvalue()[:-2] + "\n")
    return "".join(out)


def _safe(cell: Any) -> Any:
    if not isinstance(cell, str) or not cell[:1] or cell[:1] not in "=+-@\t\r" or cell == "-":
        return cell
    try:
        float(cell)
        return cell  # a negative number is data
    except ValueError:
        return f"'{cell}"


def write_exports(folder: Path, rows: list[dict[str, Any]], assignments: dict[str, AssignmentInfo],
                  roster: StoredRoster | None, submissions: dict[tuple[str, str], str], exercise_order: list[str],
                  assignment_key: Callable[[str], tuple], write: Callable[[Path, str], None]) -> dict[str, Path]:
    """Write every export into ``folder`` with ``write(path, text)`` (atomic, private); return them by name."""
    from .feedback import feedback_text
    from .statistics import statistics_text

    found = results(rows, assignments, submissions)
    order = [a for a in _order(assignments, assignment_key) if any(r["assignment"] == a for r in rows)]
    written: dict[str, Path] = {}

    def put(name: str, path: Path, text: str) -> None:
        write(path, text)
        written[name] = path

    put("wide", folder / "grades_wide.csv", csv_text(wide_rows(rows, assignments, found, roster, exercise_order, order)))
    put("long", folder / "grades_long.csv", csv_text(long_rows(rows)))
    put("canvas", folder / "canvas.csv", csv_text(canvas_rows(rows, assignments, found, roster, order)))
    put("moodle", folder / "moodle.csv", csv_text(moodle_rows(rows, assignments, found, roster, order)))
    put("attention", folder / "attention.csv", csv_text(attention_rows(rows, found, roster, order)))
    names = roster.name_of() if roster is not None else {}
    for assignment in order:
        own = [r for r in rows if r["assignment"] == assignment]
        put(f"{assignment}/canvas", folder / assignment / "canvas.csv",
            csv_text(canvas_rows(own, assignments, found, roster, [assignment])))
        put(f"{assignment}/moodle", folder / assignment / "moodle.csv",
            csv_text(moodle_rows(own, assignments, found, roster, [assignment])))
        # The statistics (which draw every student's hidden cases again) and the feedback files depend only on the
        # assignment's rows, its settings, the submissions' times and the names: written again only when those
        # changed since the last export (the key beside them says what they were made from).
        mine = {k: v for k, v in found.items() if k[1] == assignment}
        key = hashlib.sha256(json.dumps([own, repr(assignments[assignment]), sorted(
            (s, t) for (s, a), t in submissions.items() if a == assignment), sorted(names.items()),
            _FORMAT], sort_keys=True, default=str).encode()).hexdigest()
        stamp = folder / assignment / ".exports-key"
        statistics = folder / assignment / "statistics.txt"
        written[f"{assignment}/statistics"] = statistics
        try:
            unchanged = stamp.read_text() == key and statistics.exists()
        except OSError:
            unchanged = False
        if unchanged:
            continue
        reports = _reports(folder / assignment)
        write(statistics, statistics_text(assignments[assignment], list(mine.values()), reports,
                                          len(roster.students) if roster is not None else None))
        current = set()
        for (student, _), result in mine.items():
            write(folder / assignment / "feedback" / f"{student}.txt",
                  feedback_text(result, assignments[assignment], reports.get(student.lower()),
                                names.get(student.lower(), "")))
            current.add(f"{student}.txt")
        for old in (folder / assignment / "feedback").glob("*.txt"):  # a student regraded under another spelling
            if old.name not in current:
                old.unlink()
        write(stamp, key)
    return written


def _format_version() -> str:
    """A digest of the code that writes the statistics and the feedback files: when it changes, they are remade."""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for name in ("exports.py", "feedback.py", "statistics.py", "rubrics.py"):
        try:
            digest.update((here / name).read_bytes())
        except OSError:
            digest.update(name.encode())
    return digest.hexdigest()


_FORMAT = _format_version()


def _reports(folder: Path) -> dict[str, dict[str, Any]]:
    """The JSON reports of an assignment's folder, by student (lower case); unreadable ones are skipped."""
    found: dict[str, dict[str, Any]] = {}
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("student"), str):
            found[data["student"].lower()] = data
    return found


def relative_time(iso: str, now: datetime | None = None) -> str:
    """``iso`` (UTC) shown in the machine's local time, minutes precision."""
    when = datetime.fromisoformat(iso).astimezone()
    return when.strftime("%Y-%m-%d %H:%M %Z").strip()


def seconds_between(a: str, b: str) -> float:
    return (datetime.fromisoformat(a) - datetime.fromisoformat(b)) / timedelta(seconds=1)
