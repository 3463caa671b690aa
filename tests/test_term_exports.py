"""The instructor's term: what a grading run exports, and that nothing is recorded that did not happen.

* N27 (issue 34): a sandbox killed from outside in the middle of a batch; that student's exercises are *not graded*:
  an empty cell with the reason in every export (grades_long, grades_wide, canvas, moodle, attention, the feedback
  file), never 0; the summary lists them under "needs attention" and the grader's exit status is 4.
* The LMS files import under Canvas's and Moodle's own rules (``_lms_rules.py`` restates them from their importers'
  source): every roster student found by the roster's identity columns, one column per assignment with its fixed
  maximum, not graded distinct from 0.
* Due dates and late rules, submission times, names beside logins, per-student feedback and class statistics.
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _grading import (GOOD_SLOPES, GOOD_T5, NAIVE_SLOPES, STUBS, grader_sandbox_uids, notebook, processes_of,
                      recorded_students)
from _lms_rules import canvas_import, moodle_import
from course_pe.coursework.exports import late_penalty, parse_due, parse_late_rule
from course_pe.coursework.grade import main
from course_pe.coursework.gradebook import Gradebook
from course_pe.coursework.sandbox import containment

ROOT = Path(__file__).resolve().parent.parent
FULL = containment().level == "full"
needs_full_isolation = pytest.mark.skipif(not FULL, reason="full isolation (root, namespaces) is not available here")

CANVAS_ROSTER = ("Student,ID,SIS User ID,SIS Login ID,Section\n"
                 "    Points Possible,,,,\n"
                 "\"Lovelace, Ada\",101,S-1,a1,Tue\n"
                 "\"Byron, Bob\",102,S-2,a2,Tue\n"
                 "\"Vane, Vic\",103,S-3,v1,Wed\n"
                 "\"Wolfe, Wen\",104,S-4,v2,Wed\n"
                 "\"Absent, Ann\",105,S-5,ann,Wed\n")


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def _templates(grader: int) -> list[int]:
    """The grader's sandbox template processes (``_child.py``, started by the grader)."""
    found = []
    for pid in _children(grader):
        try:
            if b"_child.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            pass
    return found


# ----------------------------------------------------------------------------- N27: a sandbox killed from outside


@needs_full_isolation
def test_a_sandbox_killed_from_outside_mid_batch_is_not_graded_in_every_export(tmp_path):
    """Four students of a Canvas roster graded one at a time: a1 and a2 (correct) are recorded; then, while v1's answer
    cell runs, everything of the grader's sandboxes is killed from outside (the sandbox's processes and its template,
    as a job that kills processes by user id, or an administrator, would), and kept killed until the grader ends. v1
    and v2 cannot be graded: their cells are empty with the reason in every export, never 0."""
    folder = tmp_path / "relative"
    folder.mkdir()
    for name in ("a1", "a2"):
        notebook(folder, name, GOOD_T5, GOOD_SLOPES)
    notebook(folder, "v1", "import time\ntime.sleep(120)\n" + GOOD_T5, GOOD_SLOPES)  # a correct answer, slowly
    notebook(folder, "v2", GOOD_T5, GOOD_SLOPES)
    roster = tmp_path / "roster.csv"
    roster.write_text(CANVAS_ROSTER, encoding="utf-8")
    out = tmp_path / "grades"
    (tmp_path / "tmp").mkdir()
    process = subprocess.Popen([sys.executable, "-m", "course_pe.coursework.grade", "--dir", str(folder), "--roster",
                                str(roster), "--out", str(out), "--jobs", "1", "--cell-timeout", "300", "--timeout",
                                "600"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                               env=dict(os.environ, TMPDIR=str(tmp_path / "tmp")))
    killed = 0
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and recorded_students(out) != {"a1", "a2"}:
            time.sleep(0.2)
        assert recorded_students(out) == {"a1", "a2"}, "a1 and a2 were not graded within 300 s"
        while time.monotonic() < deadline and not processes_of(grader_sandbox_uids(process.pid)):
            time.sleep(0.05)  # v1's sandbox is starting
        assert processes_of(grader_sandbox_uids(process.pid)), "v1's sandbox never ran"
        time.sleep(1.0)  # v1's answer cell is running (it sleeps for 120 s)
        while process.poll() is None and time.monotonic() < deadline:  # from outside, until the grader gives up
            for pid in processes_of(grader_sandbox_uids(process.pid)) + _templates(process.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass
            time.sleep(0.01)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=60)
    assert killed, "nothing was killed"
    assert process.returncode == 4, (process.returncode, stdout[-3000:], stderr[-3000:])
    assert "exit status 4" in stderr and "not graded" in stderr

    # grades_long.csv: the status and the reason, no score
    long = [r for r in _csv(out / "grades_long.csv") if r["student"] in ("v1", "v2")]
    assert len(long) == 4 and all(r["status"] == "not graded" and r["score"] == "" and r["message"] for r in long)
    reason = long[0]["message"]
    # grades_wide.csv: empty exercise cells, the reason under "needs attention", the roster's name beside the login
    wide = {r["student"]: r for r in _csv(out / "grades_wide.csv")}
    assert set(wide) == {"a1", "a2", "v1", "v2", "ann"}
    for student in ("v1", "v2"):
        assert wide[student]["t5_bucket"] == wide[student]["alibi_slopes"] == ""
        assert "not graded" in wide[student]["needs attention"]
    assert wide["a1"]["t5_bucket"] == "1" and wide["a1"]["total"] == "2" and wide["a1"]["name"] == "Lovelace, Ada"
    assert wide["v1"]["name"] == "Vane, Vic"
    # Canvas: the cell is empty (Canvas's "no score"); imported under Canvas's rules, v1 and v2 get no grade at all
    canvas = canvas_import(out / "canvas.csv", roster)
    assert canvas.scores["relative: coding"] == {"a1": 2.0, "a2": 2.0, "v1": None, "v2": None, "ann": None}
    # Moodle: "-" (Moodle's "no grade") and the reason as the grade's feedback
    moodle = moodle_import(out / "moodle.csv", roster, map_from="SIS Login ID")
    assert moodle.grades["relative: coding"] == {"a1": 2.0, "a2": 2.0, "v1": None, "v2": None, "ann": None}
    assert "not graded" in moodle.feedback["relative: coding"]["v1"]
    # attention.csv, the feedback file and the summary
    attention = [(r["student"], r["what"]) for r in _csv(out / "attention.csv")]
    assert ("v1", "not graded") in attention and ("v2", "not graded") in attention
    assert ("ann", "no grade recorded") in attention
    feedback = (out / "relative" / "feedback" / "v1.txt").read_text()
    assert "Vane, Vic (v1)" in feedback and "not a mark against you" in feedback and "Score: not complete" in feedback
    assert "needs attention: 4 exercise(s) of 2 student(s) NOT GRADED" in stdout
    assert "v1 (Vane, Vic)" in stdout and reason[:40] in stdout


# ----------------------------------------------------------------------------- a term: two assignments, late work


def _graded_term(tmp_path: Path, capsys) -> tuple[Path, Path]:
    """Grade two assignments of a five-student Canvas roster: relative (due in the past, 10%/day) and model_input."""
    roster = tmp_path / "roster.csv"
    roster.write_text(CANVAS_ROSTER, encoding="utf-8")
    out = tmp_path / "grades"
    relative = tmp_path / "relative"
    relative.mkdir()
    notebook(relative, "a1", GOOD_T5, GOOD_SLOPES)
    notebook(relative, "a2", GOOD_T5, NAIVE_SLOPES)
    notebook(relative, "v1", STUBS)
    notebook(relative, "v2", "import einops\n" + GOOD_T5, GOOD_SLOPES)  # a crash before the def
    # the due date was two days ago; a1 submitted half a day after it (late: one started day), the others before it
    late, early = time.time() - 86400 * 1.5, time.time() - 86400 * 3
    for name in ("a2", "v1", "v2"):
        os.utime(relative / f"{name}.ipynb", (early, early))
    os.utime(relative / "a1.ipynb", (late, late))
    due = time.strftime("%Y-%m-%dT%H:%M", time.localtime(time.time() - 86400 * 2))
    assert main(["--dir", str(relative), "--roster", str(roster), "--out", str(out), "--jobs", "2", "--due", due,
                 "--late", "10%/day", "--isolation", containment().level]) == 0
    model_input = tmp_path / "model_input"
    model_input.mkdir()
    solution = _book_solution("part1/model_input.ipynb", "add_positional_encoding")
    notebook(model_input, "a1", solution)
    notebook(model_input, "a2", solution.replace("math.sqrt(d) * embeddings", "embeddings"))
    assert main(["--dir", str(model_input), "--roster", str(roster), "--out", str(out), "--jobs", "2",
                 "--isolation", containment().level]) == 0
    return out, roster


def _book_solution(chapter: str, exercise: str) -> str:
    from _grading import book_solutions

    return book_solutions(ROOT / "book" / chapter)[exercise]


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("term")

    class _Capsys:
        pass

    return _graded_term(tmp_path, _Capsys())


def test_canvas_import_finds_every_roster_student_one_column_per_assignment(term):
    out, roster = term
    result = canvas_import(out / "canvas.csv", roster)
    assert result.new_students == [] and result.errors == []
    assert result.identified_by == {"a1": "ID", "a2": "ID", "v1": "ID", "v2": "ID", "ann": "ID"}
    assert result.points_possible == {"relative: coding": 2.0, "model_input: coding": 1.0}
    relative = result.scores["relative: coding"]
    # a1: 2 points, submitted half a day after the due date: one started day, -10% of 2
    assert relative == {"a1": 1.8, "a2": 1.0, "v1": 0.0, "v2": 1.0, "ann": None}
    assert result.scores["model_input: coding"] == {"a1": 1.0, "a2": 0.0, "v1": None, "v2": None, "ann": None}
    # one assignment's own file: the same students, that column only
    alone = canvas_import(out / "relative" / "canvas.csv", roster)
    assert list(alone.scores) == ["relative: coding"] and alone.scores["relative: coding"] == relative


def test_moodle_import_maps_every_roster_student(term):
    out, roster = term
    result = moodle_import(out / "moodle.csv", roster, map_from="SIS Login ID")
    assert result.errors == []
    assert result.grades["relative: coding"] == {"a1": 1.8, "a2": 1.0, "v1": 0.0, "v2": 1.0, "ann": None}
    assert result.grades["model_input: coding"]["ann"] is None and result.grades["model_input: coding"]["a1"] == 1.0
    assert "alibi_slopes: failed" in result.feedback["relative: coding"]["a2"]
    assert result.feedback["relative: coding"]["ann"] == "no grade recorded"
    header = next(csv.reader(io.StringIO((out / "moodle.csv").read_text())))
    assert header[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]  # the roster's own columns


def test_a_crash_names_its_cause_and_the_cell_as_jupyterlab_numbers_it(term):
    out, _ = term
    messages = {r["exercise"]: r["message"] for r in _csv(out / "grades_long.csv") if r["student"] == "v2"}
    assert "ModuleNotFoundError: No module named 'einops'" in messages["t5_bucket"], messages
    assert "cell 1 ('import einops')" in messages["t5_bucket"]
    assert "case 0 of" not in messages["t5_bucket"] and "before any case ran" in messages["t5_bucket"]
    feedback = (out / "relative" / "feedback" / "v2.txt").read_text()
    assert "cell 1 ('import einops')" in feedback and "ModuleNotFoundError" in feedback


def test_late_work_names_and_feedback_files(term):
    out, _ = term
    wide = {r["student"]: r for r in _csv(out / "grades_wide.csv")}
    assert "relative: submitted 12 h" in wide["a1"]["needs attention"] and "-10% of 2" in wide["a1"]["needs attention"]
    assert wide["a1"]["total"] == "2.8" and wide["a1"]["max"] == "3" and wide["ann"]["total"] == ""
    attention = {(r["student"], r["assignment"], r["what"]) for r in _csv(out / "attention.csv")}
    assert ("a1", "relative", "late") in attention and ("ann", "model_input", "no grade recorded") in attention
    feedback = (out / "relative" / "feedback" / "a1.txt").read_text()
    assert feedback.startswith("Positional Encoding, Corrected: relative (coding exercises)\nStudent: Lovelace, Ada (a1)")
    assert "Score: 2 / 2 (submitted 12 h" in feedback and ": 1.8 / 2)" in feedback
    assert "alibi_slopes: failed" in (out / "relative" / "feedback" / "a2.txt").read_text()
    with Gradebook(out)._connect() as db:
        due, rule = db.execute("SELECT due, late_rule FROM assignments WHERE assignment = 'relative'").fetchone()
    assert rule == "10%/day" and due.endswith("+00:00")


def test_statistics_of_an_assignment(term):
    out, _ = term
    text = (out / "relative" / "statistics.txt").read_text()
    assert "Class statistics: relative: coding (maximum 2)" in text
    assert "results: 4 complete, 0 not graded yet" in text
    assert "mean 0.95" in text  # (1.8 + 1 + 0 + 1) / 4
    assert "alibi_slopes" in text and "t5_bucket" in text


def test_due_and_late_rules():
    assert parse_late_rule(" 10 %/Day ") == "10%/day" and parse_late_rule("zero") == "zero"
    for bad in ("10", "150%/day", "-5%/day", "10%/week", ""):
        with pytest.raises(ValueError):
            parse_late_rule(bad)
    assert late_penalty("10%/day", 1) == pytest.approx(0.1) and late_penalty("10%/day", 86401) == pytest.approx(0.2)
    assert late_penalty("zero", 5) == 1.0 and late_penalty("none", 1e6) == 0.0 and late_penalty("10%/day", -5) == 0.0
    assert late_penalty("30%/day", 86400 * 10) == 1.0
    assert parse_due("2026-12-05T23:59+01:00") == "2026-12-05T22:59:00+00:00"
    assert parse_due("2026-12-05Z".replace("Z", "")).startswith("2026-12-0")  # the end of that day, local time
    with pytest.raises(ValueError):
        parse_due("next friday")


def test_bad_term_options_grade_nothing(tmp_path, capsys):
    folder = tmp_path / "relative"
    folder.mkdir()
    notebook(folder, "ada", GOOD_T5, GOOD_SLOPES)
    out = tmp_path / "grades"
    assert main(["--dir", str(folder), "--out", str(out), "--due", "tomorrow", "--isolation",
                 containment().level]) == 2
    assert "DUE must be a date" in capsys.readouterr().err and not out.exists()
    assert main(["--dir", str(folder), "--out", str(out), "--late", "lots", "--isolation", containment().level]) == 2
    assert not out.exists()


# ----------------------------------------------------------------------------- written work, marked by rubric


def test_written_work_is_marked_into_the_same_exports(tmp_path):
    """make marking / make mark: a marking sheet per chapter from the class list, filled in and recorded as the
    assignment <chapter>-written, exported beside the coding assignments with its rubric's fixed maximum."""
    from course_pe.coursework import written
    from course_pe.coursework.roster import read_roster_table
    from course_pe.coursework.rubrics import rubrics_for_chapter

    roster = tmp_path / "roster.csv"
    roster.write_text(CANVAS_ROSTER, encoding="utf-8")
    out = tmp_path / "grades"
    Gradebook(out).store_roster(read_roster_table(roster), "roster.csv")
    assert written.main(["sheet", "why_order", "--grades", str(out)]) == 0
    sheet = out / "why_order-written" / "marking.csv"
    rows = list(csv.reader(io.StringIO(sheet.read_text())))
    labels = [r.label for r in rubrics_for_chapter("why_order")]
    assert rows[0][:4] == ["student", "name", f"{labels[0]} (max 4)", f"{labels[0]} comment"]
    assert [r[:2] for r in rows[1:]] == [["a1", "Lovelace, Ada"], ["a2", "Byron, Bob"], ["v1", "Vane, Vic"],
                                         ["v2", "Wolfe, Wen"], ["ann", "Absent, Ann"]]
    assert "**Marking (4 points, written)**" in (out / "why_order-written" / "rubric.md").read_text()
    assert written.main(["sheet", "why_order", "--grades", str(out)]) == 2  # never overwrites a sheet with marks

    rows[1][2:] = ["4", "complete", "3,5", "", "3.5", "", "2", "the float32 step is missing"]  # a1: 13 of 15
    rows[2][2:4] = ["1", "only the shift case"]  # a2: one exercise marked, three not yet
    bad = [list(r) for r in rows]
    bad[3][2] = "5"  # v1: above the maximum of 4
    sheet.write_text("".join(",".join(f'"{c}"' for c in r) + "\n" for r in bad), encoding="utf-8")
    assert written.main(["record", str(sheet), "--grades", str(out)]) == 2
    assert "why_order-written" not in {r["assignment"] for r in Gradebook(out).rows()}  # nothing recorded
    sheet.write_text("".join(",".join(f'"{c}"' for c in r) + "\n" for r in rows), encoding="utf-8")
    assert written.main(["record", str(sheet), "--grades", str(out)]) == 0

    canvas = canvas_import(out / "canvas.csv", roster)
    assert canvas.points_possible == {"why_order: written": 15.0}
    assert canvas.scores["why_order: written"] == {"a1": 13.0, "a2": None, "v1": None, "v2": None, "ann": None}
    moodle = moodle_import(out / "moodle.csv", roster, map_from="SIS Login ID")
    assert moodle.grades["why_order: written"]["a1"] == 13.0 and "not marked yet" in moodle.feedback["why_order: written"]["a2"]
    attention = {(r["student"], r["what"]) for r in _csv(out / "attention.csv")}
    assert ("a2", "not graded") in attention and ("v1", "no grade recorded") in attention
    feedback = (out / "why_order-written" / "feedback" / "a1.txt").read_text()
    assert "Score: 13 / 15" in feedback and "comment: the float32 step is missing" in feedback
    assert "marked with this rubric:" in feedback
    assert "mean points of the students marked" in (out / "why_order-written" / "statistics.txt").read_text()
    # marks already recorded are replaced only on purpose
    assert written.main(["record", str(sheet), "--grades", str(out)]) == 2
    assert written.main(["record", str(sheet), "--grades", str(out), "--replace"]) == 0
    assert written.main(["sheet", "errata", "--grades", str(out)]) == 2  # no exercise marked by hand there


@needs_full_isolation
def test_the_term_rehearsal_runs_the_guides_commands(tmp_path, capsys):
    """tools/rehearse_term.py (the guide's "Running a term"): a small class through one coding and one written
    assignment with make grade, make marking and make mark, the exports imported by Canvas's and Moodle's rules."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("rehearse_term", ROOT / "tools" / "rehearse_term.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.main([str(tmp_path / "term"), "--students", "8", "--chapters", "relative,why_order"]) == 0
    printed = capsys.readouterr().out
    assert "Canvas: 8 of 8 students found" in printed and "every roster student imported" in printed
    assert "$ DIR=" in printed and "make --no-print-directory grade" in printed and "make --no-print-directory mark" in printed
    assert {r["student"] for r in _csv(tmp_path / "term" / "grades" / "attention.csv") if r["what"] == "late"}
