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

from .._validation import check_optional_str, check_path
from .exports import parse_due, parse_late_rule
from .roster import ID_COLUMNS

__all__ = ["TermSettings", "file_time", "read_times"]

TIME_COLUMNS = ("submitted_at", "submitted", "submission_time", "timestamp", "time")


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.strip().lower()).strip("_")


def file_time(path: Path | bytes | str, dir_fd: int | None = None) -> str:
    """The modification time of ``path`` (not following a link), UTC ISO 8601."""
    info = os.lstat(path, dir_fd=dir_fd)
    return datetime.fromtimestamp(info.st_mtime, timezone.utc).isoformat(timespec="seconds")


def read_times(path: Path, id_column: str | None = None) -> dict[str, str]:
    """Submission times from the CSV file ``path``: student (lower case) -> UTC ISO 8601; ``ValueError`` naming the
    row at fault."""
    path = check_path("path", path)
    try:
        text = Path(path).read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"TIMES {str(path)!r} cannot be read as UTF-8 CSV ({exc})") from None
    try:
        dialect = csv.Sniffer().sniff(text[:8192], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    rows = list(csv.reader(io.StringIO(text), dialect))
    if not rows:
        raise ValueError(f"TIMES {str(path)!r} is empty")
    header = [_key(h) for h in rows[0]]
    wanted = [_key(id_column)] if id_column else list(ID_COLUMNS)
    who = next((header.index(c) for c in wanted if c in header), None)
    when = next((header.index(c) for c in TIME_COLUMNS if c in header), None)
    if who is None or when is None:
        raise ValueError(f"TIMES needs a student column ({', '.join(wanted)}) and a time column "
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
            raise ValueError(f"TIMES row {number}: {value!r} is not a date and time (ISO 8601)") from None
    return times


@dataclass
class TermSettings:
    """The due date (UTC ISO 8601), the late rule and the submission times of one grading run."""

    due: str | None = None
    late_rule: str | None = None
    times: dict[str, str] = field(default_factory=dict)
    has_times: bool = False

    @classmethod
    def make(cls, due: str | None, late: str | None, times: Path | None, id_column: str | None = None) -> "TermSettings":
        """From the command line's text (each None when not given); ``ValueError`` for anything malformed."""
        due = check_optional_str("due", due)
        late = check_optional_str("late", late)
        return cls(parse_due(due) if due else None, parse_late_rule(late) if late else None,
                   read_times(times, id_column) if times is not None else {}, times is not None)

    def apply(self, book: Any, assignment: str) -> None:
        """Keep the due date and rule given (if any) for ``assignment`` in the gradebook ``book``."""
        if self.due is not None or self.late_rule is not None:
            book.set_assignment(assignment, due=self.due, late_rule=self.late_rule)

    def record_submission(self, book: Any, report: Any, dir_fd: int | None, entry: Any) -> None:
        """Record when ``report``'s notebook was submitted: from TIMES, else its file's time (``entry``: the folder
        entry, opened relative to ``dir_fd``)."""
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
        if student.lower() in self.times:
            book.record_submission(student, assignment, self.times[student.lower()], "TIMES")
            return
        try:
            book.record_submission(student, assignment, file_time(path), "file time")
        except OSError:
            pass
