"""Canvas's and Moodle's CSV grade imports, restated from their own code, to import the course's exports in a test.

Neither system can be reached from the course's machines, so the tests read each export as that system's importer
does. The rules, with where they come from:

**Canvas** (instructure/canvas-lms, ``app/models/gradebook_importer.rb``, class ``GradebookImporter``):

* the file is comma separated (semicolon when the first lines split consistently on ``;``); lines of only ``,``, ``;``
  and spaces are skipped; a number written with a decimal comma is read with a point (``decimal_comma_to_period``);
* the header (``header?``): more than 3 columns, the first containing ``Student`` and the second ``ID``; the student
  columns are ``Student, ID, [SIS User ID, SIS Login ID [, Integration ID] [, Root Account] | SIS Login ID], Section``
  (``update_column_count``), and the last of them must contain ``Section``, else "Invalid header row";
* columns after them whose title contains ``Current Score``, ``Final Grade``... are dropped
  (``NON_ASSIGNMENT_COLUMN_HEADERS``); each other column is an assignment, found by ``Title (id)``
  (``Assignment.title_and_id``: ``/\\A(.*)\\s\\((\\d+)\\)\\z/``) or by its title, else created;
* a row whose first cell contains ``Points Possible`` gives the points of the assignments (``process_pp``);
* a student (``process_student``) is found by the Canvas user id in the second column, else by ``SIS User ID``, else
  by ``SIS Login ID``, else by name (``name`` or ``sortable_name``); otherwise it is a new, unknown student, which the
  import screen asks the instructor to resolve by hand;
* a grade cell: blank or ``-`` is no score (``no_score?``), ``EX`` is excused.

**Moodle** (MoodleDocs "Grade import"; moodle/moodle ``grade/import/csv/classes/load_data.php``):

* the instructor maps one column ("Map from") to a user field ("Map to": ``userid``, ``useridnumber``, ``useremail``,
  ``username``); a value that matches no user stops the whole import (``check_user_exists``: "usermappingerror"), and
  so does a row whose user cannot be found ("usermappingerrorusernotfound");
* each other column is mapped to a grade item (existing or new), to an item's feedback, or ignored;
* a grade value: empty or ``-`` is no grade (``update_grade_item``; for a *new* item only ``-``:
  ``import_new_grade_item``), otherwise it must be a number (a decimal comma is accepted: ``unformat_float``) or the
  import stops ("badgrade"); a grade above the site's maximum (100 by default) stops it too ("gradevaluetoobig");
* lines with at most one field are skipped.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

CANVAS_RESERVED = ("Student", "LastName", "FirstName", "ID", "SIS User ID", "SIS Login ID", "Section",
                   "Integration ID", "Root Account")
CANVAS_NON_ASSIGNMENT = ("Current Score", "Current Points", "Current Grade", "Final Score", "Final Points",
                         "Final Grade", "Override Score", "Override Grade", "Override Status")


@dataclass
class Person:
    """A student of the course or site: what Canvas and Moodle can find them by."""

    login: str
    name: str = ""
    canvas_id: str = ""
    sis_user_id: str = ""
    email: str = ""
    idnumber: str = ""


def people(roster: Path) -> list[Person]:
    """The course's students, from a roster file as Canvas or Moodle exports it (the LMS knows them by these)."""
    rows = list(csv.reader(io.StringIO(roster.read_text(encoding="utf-8-sig"))))
    header = [h.strip() for h in rows[0]]
    at = {h: i for i, h in enumerate(header)}
    found = []
    for row in rows[1:]:
        get = (lambda name: row[at[name]].strip() if name in at and at[name] < len(row) else "")
        if "Points Possible" in get("Student"):
            continue
        if "SIS Login ID" in at:
            found.append(Person(get("SIS Login ID"), get("Student"), get("ID"), get("SIS User ID")))
        else:  # Moodle: First name, Last name, ID number, Email address (and Username when exported)
            found.append(Person(get("Username") or get("Email address"), f"{get('First name')} {get('Last name')}",
                                email=get("Email address"), idnumber=get("ID number")))
    return found


# --------------------------------------------------------------------------- Canvas


@dataclass
class CanvasResult:
    points_possible: dict[str, float] = field(default_factory=dict)
    scores: dict[str, dict[str, float | str | None]] = field(default_factory=dict)  # title -> login -> score
    new_students: list[str] = field(default_factory=list)
    identified_by: dict[str, str] = field(default_factory=dict)
    new_assignments: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _decimal_comma_to_period(value: str | None) -> str | None:
    if value is not None and re.fullmatch(r"-?[0-9.,]+%?", value):
        parts = re.split(r"[,.]", value)
        last = parts.pop()
        return last if not parts else "".join(parts) + "." + last
    return value


def canvas_import(path: Path, roster: Path, existing_assignments: dict[str, str] | None = None) -> CanvasResult:
    """Read the export ``path`` as Canvas's gradebook importer does, in a course whose students are ``roster``'s
    (``existing_assignments``: title -> Canvas id of assignments the course already has)."""
    text = path.read_text(encoding="utf-8")
    first = text.splitlines()[:3]
    semicolon = len({len(next(csv.reader([line], delimiter=";"))) for line in first}) == 1 and \
        len(next(csv.reader([first[0]], delimiter=";"))) > len(next(csv.reader([first[0]])))
    rows = [row for row in csv.reader(io.StringIO(text), delimiter=";" if semicolon else ",")
            if not re.fullmatch(r"[;, ]+", ",".join(row))]
    result = CanvasResult()
    header = rows[0]
    if not (len(header) > 3 and "Student" in header[0] and "ID" in header[1]):
        result.errors.append("Invalid header row")
        return result
    student_columns = 3
    sis_user = sis_login = None
    if re.search(r"SIS\s+Login\s+ID", header[2]):
        sis_login, student_columns = 2, 4
    elif re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3]):
        extra = 1 if re.search(r"Integration\s+ID", header[4]) else 0
        sis_user, sis_login = 2, 3
        student_columns += 2 + extra
        if re.search(r"Root\s+Account", header[4 + extra]):
            student_columns += 1
    if "Section" not in header[student_columns - 1]:
        result.errors.append("Invalid header row")
        return result
    columns = [(i, h) for i, h in enumerate(header) if i >= student_columns
               and not any(word in h for word in CANVAS_NON_ASSIGNMENT)]
    existing = existing_assignments or {}
    titles = {}
    for index, name in columns:
        match = re.fullmatch(r"(.*)\s\((\d+)\)", name)
        title = match.group(1) if match else name
        if not (match and match.group(2) in existing.values()) and title not in existing:
            result.new_assignments.append(title)
        titles[index] = title
        result.scores[title] = {}
    course = people(roster)
    for row in rows[1:]:
        if row and "Points Possible" in row[0]:
            for index, title in titles.items():
                if index < len(row) and row[index]:
                    result.points_possible[title] = float(_decimal_comma_to_period(row[index]))
            continue
        if all(re.fullmatch(r"\s*(Muted|Manual Posting.*)?\s*", c, flags=re.I) for c in row):
            continue
        person, how = None, ""
        if row[1].strip():
            person, how = next((p for p in course if p.canvas_id == row[1].strip()), None), "ID"
        if person is None and sis_user is not None and row[sis_user].strip():
            person, how = next((p for p in course if p.sis_user_id == row[sis_user].strip()), None), "SIS User ID"
        if person is None and sis_login is not None and row[sis_login].strip():
            person, how = next((p for p in course if p.login == row[sis_login].strip()), None), "SIS Login ID"
        if person is None:
            person, how = next((p for p in course if p.name == row[0]), None), "name"
        if person is None:
            result.new_students.append(row[0])
            continue
        result.identified_by[person.login] = how
        for index, title in titles.items():
            raw = _decimal_comma_to_period(row[index].strip() if index < len(row) else "")
            if not raw or raw == "-":
                result.scores[title][person.login] = None
            elif raw.upper() == "EX":
                result.scores[title][person.login] = "EX"
            else:
                try:
                    result.scores[title][person.login] = float(raw)
                except ValueError:
                    result.errors.append(f"{person.login}: {raw!r} is not a score of the points-graded {title!r}")
    for person in course:  # a student the file does not mention keeps whatever Canvas has: no score here
        for title in result.scores:
            result.scores[title].setdefault(person.login, None)
    return result


# --------------------------------------------------------------------------- Moodle


@dataclass
class MoodleResult:
    grades: dict[str, dict[str, float | None]] = field(default_factory=dict)  # item -> user -> grade
    feedback: dict[str, dict[str, str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def moodle_import(path: Path, roster: Path, *, map_from: str, map_to: str = "username",
                  grade_point_max: float = 100.0) -> MoodleResult:
    """Import the export ``path`` as Moodle's CSV grade import does, with the user column ``map_from`` mapped to the
    user field ``map_to`` (``username``, ``useremail``, ``useridnumber``); each other column named ``<item>`` becomes
    the grade item ``<item>`` (new) and ``<item> feedback`` its feedback; every other column is ignored. Stops at the
    first error, as Moodle does (``errors`` says why; nothing is imported then)."""
    rows = [row for row in csv.reader(io.StringIO(path.read_text(encoding="utf-8")))]
    header = [h.strip() for h in rows[0]]
    if map_from not in header:
        return MoodleResult(errors=[f"no column {map_from!r} to map users from"])
    who = header.index(map_from)
    field_of = {"username": "login", "useremail": "email", "useridnumber": "idnumber"}[map_to]
    items = {i: h for i, h in enumerate(header) if i != who and f"{h} feedback" in header}
    feedback = {i: h[: -len(" feedback")] for i, h in enumerate(header) if h.endswith(" feedback")
                and h[: -len(" feedback")] in items.values()}
    result = MoodleResult({h: {} for h in items.values()}, {h: {} for h in items.values()})
    site = {getattr(p, field_of): p for p in people(roster) if getattr(p, field_of)}
    for number, row in enumerate(rows[1:], start=2):
        if len(row) <= 1:
            continue
        value = row[who].strip()
        if not value or value not in site:
            return MoodleResult(errors=[f"row {number}: no user with {map_to} {value!r} (usermappingerror)"])
        user = site[value].login
        for index, item in items.items():
            raw = row[index].strip()
            if raw == "-":  # the only "no grade" for a new item; "" too for an existing one
                result.grades[item][user] = None
                continue
            try:
                grade = float(raw.replace(",", "."))
            except ValueError:
                return MoodleResult(errors=[f"row {number}: {raw!r} in {item!r} is not a grade (badgrade)"])
            if grade > grade_point_max:
                return MoodleResult(errors=[f"row {number}: {grade} is above {grade_point_max} (gradevaluetoobig)"])
            result.grades[item][user] = grade
        for index, item in feedback.items():
            result.feedback[item][user] = row[index]
    return result
