"""Whose submission is which: a roster (an LMS export) or, without one, the file names, checked.

A submissions folder holds files named by students or by an LMS download, so a file name is a claim, not an
identity. :func:`intake` looks at every entry of the folder once, without following anything, and says for each what
the grader will do with it:

* ``grade``: a notebook (``.ipynb``, any case of the suffix) that belongs to one student;
* ``refused``: it belongs to a student but is a symbolic link, a hard link or not a regular file (never followed or
  opened): the student gets rows with 0 and the reason;
* ``unknown`` (not on the roster), ``duplicate`` (two files claim one student), ``not UTF-8`` (the file name),
  ``invalid name`` (no student name can be derived from it), ``ignored`` (not a notebook): not graded, no rows;
* ``missing``: a roster student with no file (no rows: an earlier grade is kept).

**Roster** (``ROSTER=roster.csv``): a CSV file (comma, semicolon or tab; UTF-8, a BOM is fine), first row a header.
The student column is the first of ``student_id``, ``sis_login_id``, ``login_id``, ``username``, ``email``,
``email_address``, ``student`` that the header has (matched case-insensitively, spaces as ``_``: Canvas's
``SIS Login ID``, Moodle's ``Username`` or ``Email address``), or the one named by ``id_column``; its values are
the names written to the gradebook (:func:`course_pe.coursework.names.validate_name`). An optional ``file`` (or
``filename``, ``submission``) column gives the submission's file name; without it a student's file is
``<student>.ipynb``. Rows with an empty student cell (Canvas's "Points Possible" row) are skipped. Duplicate students
or files, or an invalid student name, make the roster unusable (``ValueError`` naming the rows).

**Without a roster** a file's student is its name without the suffix when that is a valid name, else a name derived
from it (:func:`course_pe.coursework.names.derive_name`). Names are compared without regard to case. When several
files give one name, a file whose name is exactly the student's wins over derived ones; otherwise none is graded.
Nothing is ever renamed silently.
"""

from __future__ import annotations

import csv
import io
import numbers
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from .._validation import check_optional_str, check_path, check_str
from .names import derive_name, validate_name

__all__ = ["Intake", "RosterEntry", "RosterTable", "intake", "read_roster", "read_roster_table"]

ID_COLUMNS = ("student_id", "sis_login_id", "login_id", "username", "email", "email_address", "student")
FILE_COLUMNS = ("file", "filename", "submission")
NAME_COLUMNS = ("name", "full_name", "student_name", "student")  # Canvas: "Student" (when another column is the id)
FIRST_NAMES = ("first_name", "firstname", "given_name")
LAST_NAMES = ("last_name", "lastname", "surname", "family_name")
MAX_ROSTER_BYTES = 10 * 2**20
def hard_link_refusal(names: int) -> str:
    """Why a submission that is a hard link (a file with ``names`` names) is refused: another name of the same file
    may be anything on the machine, the book's solution notebook included (red team N17)."""
    return (f"the submission is a hard link (the same file has {names} names, one of them elsewhere on this machine): "
            "refused, as links are; if you made the folder with cp -l or rsync --link-dest, copy the files instead")


INTAKE_STATUSES = ("grade", "refused", "unknown", "duplicate", "not UTF-8", "invalid name", "ignored", "missing")


@dataclass(frozen=True)
class RosterEntry:
    """One student of a roster: ``student`` (the gradebook name), ``file`` (the submission's file name, or None for
    ``<student>.ipynb``) and ``name`` (for display, may be empty)."""

    student: str
    file: str | None = None
    name: str = ""

    def __post_init__(self) -> None:
        _named("student", self.student)
        if check_optional_str("file", self.file) is not None and (
                not self.file or "/" in self.file or "\0" in self.file or self.file in (".", "..")):
            raise ValueError(f"file must be a plain file name, got {self.file!r}")
        check_str("name", self.name)


@dataclass(frozen=True)
class Intake:
    """What the grader does with one folder entry or roster student (see the module docstring for ``status``).

    ``file``: the entry's name as text (bytes that are not UTF-8 shown as ``\\xe9``), empty for a missing
    submission; ``student``: whose it is (None when unknown); ``detail``: the reason or a note; ``raw``: the
    entry's name in bytes, for opening it relative to the folder."""

    file: str
    student: str | None
    status: str
    detail: str = ""
    raw: bytes | None = None

    def __post_init__(self) -> None:
        check_str("file", self.file)
        if self.student is not None:
            _named("student", self.student)
        if self.status not in INTAKE_STATUSES and self.status != "not graded (interrupted)":
            raise ValueError(f"unknown status {self.status!r}; expected one of {', '.join(INTAKE_STATUSES)}")
        check_str("detail", self.detail)
        if self.raw is not None and not isinstance(self.raw, bytes):
            raise TypeError(f"raw must be None or bytes, got {type(self.raw).__name__}")


def _named(field: str, value: object) -> str:
    try:
        return validate_name(value)  # type: ignore[arg-type]
    except (TypeError, ValueError) as error:
        raise type(error)(f"{field}: {error}") from None


def _header_key(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.strip().lower()).strip("_")


def read_roster(path: Path, id_column: str | None = None) -> list[RosterEntry]:
    """The students of the roster CSV ``path`` (see the module docstring); ``ValueError`` with the rows at fault."""
    path = check_path("path", path)
    id_column = check_optional_str("id_column", id_column)
    return _entries(_roster_rows(path), id_column)


@dataclass(frozen=True)
class RosterTable:
    """A roster as its file has it, for the exports: ``header`` (the column names as written), ``rows`` (one list of
    cells per student, in the file's order, padded to the header's length), ``id_column`` (the index of the student
    column) and ``entries`` (:class:`RosterEntry`, one per row, the same order)."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    id_column: int
    entries: tuple[RosterEntry, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.header, tuple) or not all(isinstance(h, str) for h in self.header):
            raise TypeError(f"header must be a tuple of str, got {type(self.header).__name__}")
        if not isinstance(self.rows, tuple) or not all(
                isinstance(r, tuple) and len(r) == len(self.header) and all(isinstance(c, str) for c in r)
                for r in self.rows):
            raise TypeError("rows must be a tuple of tuples of str, one cell per header column")
        if isinstance(self.id_column, bool) or not isinstance(self.id_column, numbers.Integral) or \
                not 0 <= self.id_column < len(self.header):
            raise ValueError(f"id_column must be the index of a header column, got {self.id_column!r}")
        # a NumPy integer is stored as the Python int it stands for
        object.__setattr__(self, "id_column", int(self.id_column))
        if not isinstance(self.entries, tuple) or not all(isinstance(e, RosterEntry) for e in self.entries) or \
                len(self.entries) != len(self.rows):
            raise TypeError("entries must be a tuple of RosterEntry, one per row")


def read_roster_table(path: Path, id_column: str | None = None) -> RosterTable:
    """The roster CSV ``path`` with every column kept (see :class:`RosterTable`); the same checks and errors as
    :func:`read_roster`. Rows without a student (Canvas's "Points Possible") are left out."""
    path = check_path("path", path)
    id_column = check_optional_str("id_column", id_column)
    raw = _roster_rows(path)
    entries = _entries(raw, id_column)
    header = [_header_key(h) for h in raw[0]]
    wanted = [_header_key(id_column)] if id_column else list(ID_COLUMNS)
    at = next(header.index(c) for c in wanted if c in header)
    width = len(raw[0])
    by_student = {}
    for row in raw[1:]:
        cell = row[at].strip() if at < len(row) else ""
        if cell and cell.lower() != "points possible":
            by_student[cell] = tuple(c.strip() for c in (row + [""] * width)[:width])
    return RosterTable(tuple(h.strip() for h in raw[0]), tuple(by_student[e.student] for e in entries), at,
                       tuple(entries))


def _roster_rows(path: Path) -> list[list[str]]:
    """The rows of the roster CSV ``path`` (header first); ``ValueError`` when it cannot be read."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise ValueError(f"the roster (path) {str(path)!r} cannot be read: {exc.strerror}") from None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
        raise ValueError(f"the roster (path) {str(path)!r} is not a regular file (symbolic links are not followed)")
    if info.st_size > MAX_ROSTER_BYTES:
        raise ValueError(f"the roster has {info.st_size} bytes, more than {MAX_ROSTER_BYTES}")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(MAX_ROSTER_BYTES + 1)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError("the roster is not UTF-8 text: save it as 'CSV UTF-8'") from None
    try:
        dialect = csv.Sniffer().sniff(text[:8192], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    rows = list(csv.reader(io.StringIO(text), dialect))
    if not rows:
        raise ValueError("the roster is empty")
    return rows


def _entries(rows: list[list[str]], id_column: str | None) -> list[RosterEntry]:
    header = [_header_key(h) for h in rows[0]]
    wanted = [_header_key(id_column)] if id_column else list(ID_COLUMNS)
    id_at = next((header.index(c) for c in wanted if c in header), None)
    if id_at is None:
        raise ValueError(f"the roster has no student column: the header is {rows[0]}; expected one of "
                         f"{', '.join(wanted)}" + (" (id_column)" if id_column else ""))
    file_at = next((header.index(c) for c in FILE_COLUMNS if c in header), None)
    name_at = next((header.index(c) for c in NAME_COLUMNS if c in header and header.index(c) != id_at), None)
    first_at, last_at = (next((header.index(c) for c in names if c in header), None) for names in (FIRST_NAMES, LAST_NAMES))
    entries: list[RosterEntry] = []
    problems: list[str] = []
    for number, row in enumerate(rows[1:], start=2):
        cell = row[id_at].strip() if id_at < len(row) else ""
        if not cell or cell.lower() == "points possible":
            continue
        try:
            validate_name(cell)
        except ValueError:
            problems.append(f"row {number}: {cell!r} is not a valid student name (letters, digits, . _ - @ +)")
            continue
        file = row[file_at].strip() if file_at is not None and file_at < len(row) and row[file_at].strip() else None
        if file is not None and ("/" in file or "\0" in file or file in (".", "..")):
            problems.append(f"row {number}: the file {file!r} is not a plain file name")
            continue
        name = row[name_at].strip() if name_at is not None and name_at < len(row) else ""
        if not name and first_at is not None and last_at is not None:  # Moodle: "First name", "Last name"
            name = " ".join(row[i].strip() for i in (first_at, last_at) if i < len(row) and row[i].strip())
        entries.append(RosterEntry(cell, file, name))
    seen: dict[str, int] = {}
    files: dict[str, str] = {}
    for entry in entries:
        key = entry.student.lower()
        seen[key] = seen.get(key, 0) + 1
        if entry.file is not None:
            if entry.file.lower() in files:
                problems.append(f"the file {entry.file!r} is given for both {files[entry.file.lower()]} and "
                                f"{entry.student}")
            files[entry.file.lower()] = entry.student
    problems += [f"the student {s!r} appears {n} times (names are compared without regard to case)"
                 for s, n in seen.items() if n > 1]
    if problems:
        more = f" (and {len(problems) - 8} more)" if len(problems) > 8 else ""
        raise ValueError("the roster cannot be used: " + "; ".join(problems[:8]) + more)
    if not entries:
        raise ValueError("the roster lists no students")
    return entries


def _display(raw: bytes) -> str:
    return raw.decode("utf-8", "backslashreplace")


def intake(folder: Path, roster: list[RosterEntry] | None = None) -> list[Intake]:
    """Decide, for every entry of ``folder`` (not recursive, nothing followed) and every roster student, what the
    grader does (see the module docstring). Sorted: the files to grade first (by student), then the rest."""
    folder = check_path("folder", folder)
    if roster is not None and (not isinstance(roster, list) or not all(isinstance(r, RosterEntry) for r in roster)):
        raise TypeError("roster must be None or a list of RosterEntry (see read_roster)")
    try:
        names = sorted(os.listdir(os.fsencode(folder)))
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise ValueError(f"the folder {str(folder)!r} cannot be read: {exc.strerror}") from None
    out: list[Intake] = []
    candidates: list[tuple[bytes, str, str, str]] = []  # raw name, text, stem, refusal
    try:
        for raw in names:
            shown = _display(raw)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                out.append(Intake(shown, None, "not UTF-8", "the file name is not UTF-8 (an old zip tool?): rename "
                                  "the file", raw))
                continue
            try:
                info = os.lstat(raw, dir_fd=dir_fd)
            except OSError as exc:
                out.append(Intake(shown, None, "ignored", f"cannot be examined: {exc.strerror}", raw))
                continue
            if not text.lower().endswith(".ipynb") or len(text) == len(".ipynb"):
                kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a notebook (.ipynb)"
                out.append(Intake(text, None, "ignored", kind, raw))
                continue
            stem = text[: -len(".ipynb")]
            refusal = ""
            if stat.S_ISLNK(info.st_mode):
                refusal = "the submission is a symbolic link: refused (links are never followed)"
            elif not stat.S_ISREG(info.st_mode):
                refusal = "the submission is not a regular file (a folder, a pipe or a device): refused"
            elif info.st_nlink > 1:
                refusal = hard_link_refusal(info.st_nlink)
            candidates.append((raw, text, stem, refusal))
    finally:
        os.close(dir_fd)

    def note(text: str, extra: str = "") -> str:
        notes = [extra] if extra else []
        if not text.endswith(".ipynb"):
            notes.append(f"the suffix {text[-6:]!r} was taken as .ipynb")
        return "; ".join(notes)

    claims: dict[str, list[tuple[bytes, str, str, bool, str]]] = {}  # student (lower case) -> files
    students: dict[str, str] = {}
    if roster is not None:
        by_file = {r.file.lower(): r for r in roster if r.file is not None}
        by_exact_file = {r.file: r for r in roster if r.file is not None}
        by_student = {r.student.lower(): r for r in roster if r.file is None}
        by_exact_student = {r.student: r for r in roster if r.file is None}
        for raw, text, stem, refusal in candidates:
            entry = by_exact_file.get(text) or by_file.get(text.lower()) or by_exact_student.get(stem) \
                or by_student.get(stem.lower())
            if entry is None:
                out.append(Intake(text, None, "unknown", "not on the roster", raw))
                continue
            exact = text == entry.file if entry.file is not None else text == f"{entry.student}.ipynb"
            extra = "" if exact else f"matched to {entry.student} without regard to case"
            claims.setdefault(entry.student.lower(), []).append((raw, text, refusal, exact, note(text, extra)))
            students[entry.student.lower()] = entry.student
        for r in roster:
            if r.student.lower() not in claims:
                expected = r.file or f"{r.student}.ipynb"
                out.append(Intake("", r.student, "missing", f"no submission ({expected} is not in the folder); an "
                                  "earlier grade is kept"))
    else:
        for raw, text, stem, refusal in candidates:
            try:
                student = validate_name(stem)
                exact = True
            except ValueError:
                try:
                    student = derive_name(stem)
                except ValueError as exc:
                    out.append(Intake(text, None, "invalid name", str(exc), raw))
                    continue
                exact = False
            extra = "" if exact else f"name {student!r} derived from the file name"
            claims.setdefault(student.lower(), []).append((raw, text, refusal, exact, note(text, extra)))
            students.setdefault(student.lower(), student)
    graded: list[Intake] = []
    for key, files in claims.items():
        exact = [f for f in files if f[3]]
        winner = files[0] if len(files) == 1 else exact[0] if len(exact) == 1 else None
        for raw, text, refusal, is_exact, detail in files:
            if winner is not None and raw == winner[0]:
                student = students[key] if roster is not None or not is_exact else text[: -len(".ipynb")]
                if refusal:
                    graded.append(Intake(text, student, "refused", refusal, raw))
                else:
                    graded.append(Intake(text, student, "grade", detail, raw))
            else:
                others = ", ".join(f[1] for f in files if f[0] != raw)
                why = f"{len(files)} files claim the student {students[key]!r} ({text}, {others}): none is graded" \
                    if winner is None else f"the student {students[key]!r} is {winner[1]}; this file is not graded"
                out.append(Intake(text, None, "duplicate", why + "; rename the files or use a roster", raw))
    graded.sort(key=lambda i: (i.student or "").lower())
    return graded + sorted(out, key=lambda i: (INTAKE_STATUSES.index(i.status), i.file, i.student or ""))
