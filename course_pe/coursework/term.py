"""Due dates, late rules and submission times: what ``make grade ... DUE= LATE= TIMES=`` adds to a grading run.

* ``DUE`` (``--due``): the assignment's due date, ISO 8601 (``2026-12-05T23:59``, with an offset such as ``+01:00``
  or ``Z``, or a date alone for the end of that day); a time without an offset is the grading machine's local time.
* ``LATE`` (``--late``): what lateness costs (:func:`course_pe.coursework.exports.parse_late_rule`): ``none`` records
  it and changes no score (the default, for an LMS that applies its own late policy), ``zero``, or ``10%/day``
  (``2%/hour``): that share of the maximum for every started day (hour), down to 0.
* ``TIMES`` (``--times``): a CSV file with a student column (as a roster's: ``SIS Login ID``, ``Username``, ...)
  and a ``submitted_at`` column (also ``submitted``, ``timestamp``, ``time``), for when the LMS tells the submission
  times. Without it a submission's time is its file's modification time, which a download or a copy may change: the
  exports say which was used.

The due date and the rule are kept in the gradebook per assignment (a later run without ``DUE`` keeps them); the
scores stay as graded and the exports apply the rule (:mod:`course_pe.coursework.exports`).
"""

from __future__ import annotations

import csv
import io
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .._validation import check_optional_str, check_path, check_str
from .exports import parse_due, parse_late_rule
from .roster import ID_COLUMNS, Intake

__all__ = ["TermSettings", "file_time", "read_times"]

TIME_COLUMNS = ("submitted_at", "submitted", "submission_time", "timestamp", "time")


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.strip().lower()).strip("_")


def file_time(path: Path | bytes | str, dir_fd: int | None = None) -> str:
    """The modification time of ``path`` (a path, or a name in bytes relative to ``dir_fd``, a folder's descriptor),
    not following a link, as UTC ISO 8601; ``OSError`` when it cannot be examined."""
    if not isinstance(path, bytes):
        path = check_path("path", path)
    elif not path:
        raise ValueError("path must not be empty")
    if dir_fd is not None and (isinstance(dir_fd, bool) or not isinstance(dir_fd, int) or dir_fd < 0):
        raise ValueError(f"dir_fd must be None or a file descriptor (an int >= 0), got {dir_fd!r}")
    info = os.lstat(path, dir_fd=dir_fd)
    return datetime.fromtimestamp(info.st_mtime, timezone.utc).isoformat(timespec="seconds")


def read_times(path: Path, id_column: str | None = None) -> dict[str, str]:
    """Submission times from the CSV file ``path``: student (lower case) -> UTC ISO 8601; ``ValueError`` naming the
    row at fault."""
    path = check_path("path", path)
    id_column = check_optional_str("id_column", id_column)
    try:
        text = Path(path).read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"the TIMES file (path) {str(path)!r} cannot be read as UTF-8 CSV ({exc})") from None
    try:
        dialect = csv.Sniffer().sniff(text[:8192], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    rows = list(csv.reader(io.StringIO(text), dialect))
    if not rows:
        raise ValueError(f"the TIMES file (path) {str(path)!r} is empty")
    header = [_key(h) for h in rows[0]]
    wanted = [_key(id_column)] if id_column else list(ID_COLUMNS)
    who = next((header.index(c) for c in wanted if c in header), None)
    when = next((header.index(c) for c in TIME_COLUMNS if c in header), None)
    if who is None or when is None:
        raise ValueError(f"the TIMES file (path) needs a student column ({', '.join(wanted)}"
                         + (", the id_column given" if id_column else "") + f") and a time column "
                         f"({', '.join(TIME_COLUMNS)}); its header is {rows[0]}")
    times = {}
    for number, row in enumerate(rows[1:], start=2):
        student = row[who].strip() if who < len(row) else ""
        value = row[when].strip() if when < len(row) else ""
        if not student or student.lower() == "points possible":
            continue
        if not value:
            continue
        try:
            times[student.lower()] = parse_due(value)
        except ValueError:
            raise ValueError(f"the TIMES file (path), row {number}: {value!r} is not a date and time (ISO 8601)") \
                from None
    return times


@dataclass
class TermSettings:
    """The due date (UTC ISO 8601), the late rule and the submission times of one grading run."""

    due: str | None = None
    late_rule: str | None = None
    times: dict[str, str] = field(default_factory=dict)
    has_times: bool = False

    def __post_init__(self) -> None:
        from .._validation import check_bool

        for name, parse in (("due", parse_due), ("late_rule", parse_late_rule)):
            value = check_optional_str(name, getattr(self, name))
            if value is None:
                continue
            try:
                normal = parse(value)
            except ValueError as error:
                raise ValueError(f"{name}: {error}") from None
            if normal != value:
                raise ValueError(f"{name} must be in its normal form ({normal!r}, as TermSettings.make gives it), "
                                 f"got {value!r}")
        if not isinstance(self.times, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                       for k, v in self.times.items()):
            raise TypeError("times must be a dict of str (student in lower case) to str (UTC ISO 8601)")
        check_bool("has_times", self.has_times)

    @classmethod
    def make(cls, due: str | None, late: str | None, times: Path | None, id_column: str | None = None) -> "TermSettings":
        """From the command line's text (each None when not given); ``ValueError`` for anything malformed."""
        due = check_optional_str("due", due)
        late = check_optional_str("late", late)
        return cls(parse_due(due) if due else None, parse_late_rule(late) if late else None,
                   read_times(times, id_column) if times is not None else {}, times is not None)

    def apply(self, book: Any, assignment: str) -> None:
        """Keep the due date and rule given (if any) for ``assignment`` in the gradebook ``book``."""
        _check_book(book)
        check_str("assignment", assignment)
        if self.due is not None or self.late_rule is not None:
            book.set_assignment(assignment, due=self.due, late_rule=self.late_rule)

    def record_submission(self, book: Any, report: Any, dir_fd: int | None, entry: Any) -> None:
        """Record when ``report``'s notebook was submitted: from TIMES, else its file's time (``entry``: the folder
        entry, opened relative to ``dir_fd``)."""
        _check_book(book)
        if not isinstance(getattr(report, "student", None), str) or not isinstance(getattr(report, "assignment", None), str):
            raise TypeError(f"report must be a GradeReport (with a student and an assignment), got {type(report).__name__}")
        if entry is not None and not isinstance(entry, Intake):
            raise TypeError(f"entry must be None or a roster.Intake, got {type(entry).__name__}")
        if dir_fd is not None and (isinstance(dir_fd, bool) or not isinstance(dir_fd, int) or dir_fd < 0):
            raise ValueError(f"dir_fd must be None or a file descriptor (an int >= 0), got {dir_fd!r}")
        student = report.student
        if student.lower() in self.times:
            book.record_submission(student, report.assignment, self.times[student.lower()], "TIMES")
            return
        raw = getattr(entry, "raw", None)
        if raw is None:
            return
        try:
            when = file_time(raw, dir_fd=dir_fd)
        except OSError:
            return
        book.record_submission(student, report.assignment, when, "file time (not in TIMES)" if self.has_times
                               else "file time")

    def record_path(self, book: Any, student: str, assignment: str, path: Path) -> None:
        """As :meth:`record_submission`, for one notebook given by its path."""
        _check_book(book)
        check_str("student", student)
        check_str("assignment", assignment)
        path = check_path("path", path)
        if student.lower() in self.times:
            book.record_submission(student, assignment, self.times[student.lower()], "TIMES")
            return
        try:
            book.record_submission(student, assignment, file_time(path), "file time")
        except OSError:
            pass


def _check_book(book: object) -> None:
    from .gradebook import Gradebook

    if not isinstance(book, Gradebook):
        raise TypeError(f"book must be a Gradebook, got {type(book).__name__}")
