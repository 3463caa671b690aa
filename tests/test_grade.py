"""The grader, tried as a hostile or careless student would: every submission here is an attack or an accident.

Each test asserts the grade (a hostile submission scores no more than the untouched stub, 0) and that nothing
outside the sandbox changed: the book, the gradebook, another student's report, a canary file, /tmp. The assignment
is the chapter ``relative`` (two exercises: ``t5_bucket`` and ``alibi_slopes``). Time limits given to the grader
here apply only to the hanging code (imports happen before any student code), so the tests hold on a busy machine.
"""

from __future__ import annotations

import csv
import hashlib
import json
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import nbformat
import pytest

from course_pe.coursework.grade import (
    GradeReport,
    ExerciseGrade,
    assignment_from_path,
    grade_notebook,
    main,
    read_submission,
    sanitize_name,
    validate_name,
)
from _class_tool import correct_t5_source
from course_pe.coursework.gradebook import Gradebook
from course_pe.coursework.sandbox import Sandbox, SandboxTimeout, isolation_level

ROOT = Path(__file__).resolve().parent.parent
FULL = isolation_level() == "full"
needs_full_isolation = pytest.mark.skipif(not FULL, reason="needs root and unshare (the limited isolation level "
                                          "does not hide the book; see the instructor guide's threat model)")

GOOD_T5 = correct_t5_source()  # a correct student answer, written without course_pe (tools/make_class_submissions.py)
GOOD_SLOPES = """
import math
def alibi_slopes(n):
    def pow2(m):
        return [2.0 ** (-8.0 * (h + 1) / m) for h in range(m)]
    c = 2 ** math.floor(math.log2(n))
    return pow2(c) + (pow2(2 * c)[0::2][: n - c] if c != n else [])
"""
FLOAT32_SLOPES = """
import math, torch
def alibi_slopes(n):
    c = 2 ** math.floor(math.log2(n))
    base = 2.0 ** (-8.0 / torch.arange(1, 2 * c + 1, dtype=torch.float32))
    first = torch.tensor([2.0 ** (-8.0 * (h + 1) / c) for h in range(c)], dtype=torch.float32)
    extra = torch.tensor([2.0 ** (-8.0 * (h + 1) / (2 * c)) for h in range(2 * c)], dtype=torch.float32)[0::2]
    return torch.cat([first, extra[: n - c]]) if c != n else first
"""
INT32_T5 = GOOD_T5.replace("return bucket + torch.where(n < max_exact, n, large)",
                           "return (bucket + torch.where(n < max_exact, n, large)).to(torch.int32)")
NAIVE_SLOPES = "def alibi_slopes(n):\n    return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]\n"
STUBS = ("def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):\n"
         "    raise NotImplementedError\n\n"
         "def alibi_slopes(num_heads):\n    raise NotImplementedError\n")
STUB_T5 = STUBS.split("\n\ndef alibi")[0] + "\n"
STUB_SLOPES = "def alibi_slopes(num_heads):\n    raise NotImplementedError\n"


def notebook(folder: Path, name: str, *sources: str, metadata: dict | None = None) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata.update(metadata or {"course_pe": {"exercises": ["t5_bucket", "alibi_slopes"]}})
    path = folder / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def scores(report):
    return {e.exercise: (e.score, e.status) for e in report.exercises}


def tree_digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        h.update(str(p.relative_to(folder)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture
def world(tmp_path):
    """Submissions folder, gradebook with another student's grade, a canary, and the state outside the sandbox."""
    subs, out = tmp_path / "relative", tmp_path / "grades"
    subs.mkdir()
    canary = tmp_path / "canary.txt"
    canary.write_text("untouched")
    other = GradeReport(student="bob", notebook="bob.ipynb", assignment="relative",
                        exercises=[ExerciseGrade("t5_bucket", 1.0, 1.0, "passed", ""),
                                   ExerciseGrade("alibi_slopes", 0.0, 1.0, "failed", "")])
    Gradebook(out).record(other)
    Gradebook(out).export()
    token = uuid.uuid4().hex

    class World:
        pass

    w = World()
    w.subs, w.out, w.canary, w.token, w.tmp = subs, out, canary, token, tmp_path
    w.bob_json = out / "relative" / "bob.json"
    w.before = {"book": tree_digest(ROOT / "book"), "grades": tree_digest(out), "canary": canary.read_text()}

    def grade(name, *sources, **options):
        options.setdefault("assignment", "relative")
        report = grade_notebook(notebook(subs, name, *sources), out=out, **options)
        assert_outside_unchanged(w)
        return report

    w.grade = grade
    return w


def assert_outside_unchanged(w) -> None:
    assert tree_digest(ROOT / "book") == w.before["book"]
    assert tree_digest(w.out) == w.before["grades"], "the gradebook changed while grading (before recording)"
    assert w.canary.read_text() == "untouched"
    assert not list(Path("/tmp").glob(f"*{w.token}*")), "a file appeared in /tmp"
    assert w.bob_json.exists()


def hostile(w, body: str) -> str:
    """Fill in the paths a hostile submission aims at."""
    return (body.replace("CANARY", str(w.canary)).replace("GRADES", str(w.out)).replace("TOKEN", w.token)
            .replace("ROOT", str(ROOT)))


# ----------------------------------------------------------------------------- honest submissions


def test_perfect_stub_partial(world):
    perfect = world.grade("perfect", GOOD_T5, GOOD_SLOPES)
    assert perfect.score == 2 and perfect.max_score == 2 and not perfect.cell_errors, perfect.text()
    stub = world.grade("stub", STUBS)
    assert stub.score == 0 and all(e.status == "failed" and "stub" in e.message for e in stub.exercises)
    partial = world.grade("partial", "1 / 0", GOOD_T5, NAIVE_SLOPES)
    assert scores(partial) == {"t5_bucket": (1.0, "passed"), "alibi_slopes": (0.0, "failed")}
    message = partial.exercises[1].message
    assert message.index("what differs: value") < message.index("diagnosis") and "powers of two" in message
    assert any("ZeroDivisionError" in e for e in partial.cell_errors)


def test_a_correct_float32_submission_scores_full_marks(world):
    report = world.grade("float32", INT32_T5, FLOAT32_SLOPES)
    assert report.score == 2, report.text()


def test_deleted_cell_and_hanging_cell(world):
    report = world.grade("loop", "while True:\n    pass", GOOD_T5, cell_timeout=5)
    assert scores(report) == {"t5_bucket": (1.0, "passed"), "alibi_slopes": (0.0, "failed")}, report.text()
    assert "no function named `alibi_slopes`" in report.exercises[1].message
    assert any("time limit" in e for e in report.cell_errors)


def test_a_hang_in_one_exercise_costs_only_that_exercise(world):
    hanging = "def t5_bucket(*args):\n    while True:\n        pass\n"
    report = world.grade("hang", hanging, GOOD_SLOPES, call_timeout=5)
    assert scores(report) == {"t5_bucket": (0.0, "failed"), "alibi_slopes": (1.0, "passed")}, report.text()
    assert "time limit" in report.exercises[0].message


# ----------------------------------------------------------------------------- attacks on the verdict


def test_replacing_the_check_and_the_registry_gives_nothing(world):
    attack = """
import course_pe, course_pe.coursework.exercises as ex
from course_pe.coursework.exercises import CheckReport
ex.check = lambda exercise_id, fn: CheckReport(exercise_id, True, 1, 1)
ex.judge = lambda exercise, cases, outcomes: CheckReport(exercise, True, 1, 1)
for e in list(ex.EXERCISES):
    ex.EXERCISES[e] = ex.EXERCISES[e].__class__(e, ex.EXERCISES[e].function, "relative", ex.check, "", lambda rng: [])
course_pe.coursework.exercises.call_case = lambda fn, args: ex.Outcome("ok", __import__("numpy").zeros(3))
"""
    report = world.grade("monkeypatch", STUBS, attack)
    assert report.score == 0, report.text()


def test_forged_results_and_system_exit_give_nothing(world):
    forge = hostile(world, """
import json, os
record = {"exercise": "alibi_slopes", "passed": True, "score": 1.0, "cases_run": 7, "cases_total": 7}
for target in [os.environ.get("COURSE_PE_RESULTS", ""), "GRADES/grades_long.csv", "GRADES/grades.csv"]:
    try:
        with open(target, "a") as fh:
            fh.write(json.dumps(record) + "\\n" + "eve,relative,alibi_slopes,1,1,passed,forged\\n")
    except OSError:
        pass
def alibi_slopes(n):
    raise SystemExit(0)
def t5_bucket(*args):
    import os
    os._exit(0)
""")
    report = world.grade("forger", forge)
    assert report.score == 0 and all(e.status == "failed" for e in report.exercises), report.text()
    assert "SystemExit" in report.exercises[1].message


def test_the_exercises_come_from_the_assignment_not_the_metadata(world):
    path = notebook(world.subs, "liar", GOOD_T5, STUB_SLOPES, metadata={"course_pe": {"exercises": ["t5_bucket"]}})
    report = grade_notebook(path, assignment="relative", out=world.out)
    assert (report.score, report.max_score) == (1, 2)
    path = notebook(world.subs, "string_metadata", GOOD_T5, GOOD_SLOPES, metadata={"course_pe": "t5_bucket"})
    assert grade_notebook(path, assignment="relative", out=world.out).score == 2
    assert assignment_from_path(world.subs / "anything.ipynb") == "relative"  # from the folder, not the file


def test_calling_the_library_is_marked(world):
    early = "import course_pe as cpe\n_ref = cpe.alibi_slopes\ndef alibi_slopes(n):\n    return _ref(n, dtype=__import__('torch').float64)\n"
    late = ("import course_pe\ndef t5_bucket(r, b=True, n=32, m=128):\n"
            "    return course_pe.t5_relative_position_bucket(r, bidirectional=b, num_buckets=n, max_distance=m)\n")
    report = world.grade("library", late, early)
    assert report.score == 0, report.text()
    assert "course_pe.t5.t5_relative_position_bucket" in report.exercises[0].message
    assert "course_pe.alibi.alibi_slopes" in report.exercises[1].message


# ----------------------------------------------------------------------------- attacks on the machine


def test_writes_outside_the_sandbox_and_shell_commands_fail(world):
    attack = hostile(world, """
import os, pathlib, subprocess
for action in [
    lambda: pathlib.Path("CANARY").write_text("pwned"),
    lambda: pathlib.Path("GRADES/relative/bob.json").unlink(),
    lambda: pathlib.Path("GRADES/gradebook.sqlite").write_bytes(b"junk"),
    lambda: pathlib.Path("/tmp/pwned-TOKEN").write_text("x"),
    lambda: pathlib.Path("ROOT/book/pwned-TOKEN").write_text("x"),
    lambda: os.system("touch /tmp/shell-TOKEN CANARY.shell"),
    lambda: subprocess.run(["sh", "-c", "echo pwned > CANARY"]),
    lambda: subprocess.Popen(["sh", "-c", "sleep 2; echo late > CANARY"], start_new_session=True),
]:
    try:
        action()
    except Exception:
        pass
""")
    report = world.grade("vandal", STUBS, attack)
    assert report.score == 0
    time.sleep(4)  # the detached child would have written by now
    assert_outside_unchanged(world)
    assert not Path(str(world.canary) + ".shell").exists()


@needs_full_isolation
def test_the_book_and_other_submissions_cannot_be_read(world):
    notebook(world.subs, "alice", GOOD_T5, GOOD_SLOPES)  # a classmate's correct work in the same folder
    attack = hostile(world, """
import json, pathlib
stolen = {}
for source in ["ROOT/book/part2/relative.ipynb", str(pathlib.Path("CANARY").parent / "relative" / "alice.ipynb")]:
    try:
        cells = json.loads(pathlib.Path(source).read_text())["cells"]
        exec("".join(c["source"] if isinstance(c["source"], str) else "".join(c["source"])
                     for c in cells if c["cell_type"] == "code" and "def alibi_slopes" in "".join(c["source"])))
        stolen[source] = True
    except Exception as exc:
        raise RuntimeError(f"could not read {source}: {exc}")
""")
    report = world.grade("thief", STUBS, attack)
    assert report.score == 0, report.text()
    assert "power_of_two" not in report.text() and any("No such file" in e for e in report.cell_errors)


def test_huge_output_and_huge_memory_are_refused(world):
    attack = """
import numpy as np
print("x" * 50_000_000)
try:
    open("big.bin", "wb").write(b"0" * 200_000_000)
except OSError as exc:
    file_error = exc
block = bytearray(4 * 2**30)
"""
    huge = "import numpy as np\ndef alibi_slopes(n):\n    return np.zeros(50_000_000)\n"
    greedy = "def t5_bucket(*args):\n    return bytearray(4 * 2**30)\n"
    report = world.grade("greedy", attack, huge, greedy, GOOD_T5.replace("def t5_bucket", "def unused"))
    assert report.score == 0, report.text()
    assert any("MemoryError" in e for e in report.cell_errors), report.cell_errors
    assert "more than" in report.exercises[1].message
    assert "MemoryError" in report.exercises[0].message
    ok = world.grade("allocates_then_works", "block = bytearray(4 * 2**30)", GOOD_T5, GOOD_SLOPES)
    assert ok.score == 2 and any("MemoryError" in e for e in ok.cell_errors)


def test_the_environment_names_nothing_of_the_grader(world):
    spy = "import os, sys\nraise RuntimeError(repr(dict(os.environ)) + os.getcwd() + repr(sys.path))"
    report = world.grade("spy", spy, STUBS)
    text = " ".join(report.cell_errors)
    assert "COURSE_PE_THREADS" in text  # the spy did report the environment
    assert "COURSE_PE_RESULTS" not in text and str(world.out) not in text and str(world.tmp) not in text
    assert "VIRTUAL_ENV" not in text and "PWD" not in text


# ----------------------------------------------------------------------------- unreadable submissions


@pytest.mark.parametrize("kind", ["empty", "not json", "nbformat 3", "nbformat 5", "folder", "missing",
                                  "cell source not text", "json list"])
def test_unreadable_submissions_get_rows_with_the_reason(tmp_path, kind):
    folder = tmp_path / "relative"
    folder.mkdir()
    path = folder / "broken.ipynb"
    content = {"empty": "", "not json": "this is not json", "nbformat 3": json.dumps({"nbformat": 3, "worksheets": []}),
               "nbformat 5": json.dumps({"nbformat": 5, "cells": []}), "json list": "[1, 2]",
               "cell source not text": json.dumps({"nbformat": 4, "cells": [{"cell_type": "code", "source": 3}]})}
    if kind == "folder":
        path.mkdir()
    elif kind != "missing":
        path.write_text(content[kind])
    out = tmp_path / "grades"
    assert main([str(path), "--out", str(out)]) == 0
    rows = Gradebook(out).rows()
    assert [(r["student"], r["exercise"], r["score"], r["status"]) for r in rows] == [
        ("broken", "t5_bucket", 0.0, "unreadable"), ("broken", "alibi_slopes", 0.0, "unreadable")]
    assert "could not read" in rows[0]["message"]


def test_a_code_cell_without_outputs_is_still_graded(world):
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"course_pe": "nonsense"},
          "cells": [{"cell_type": "code", "source": GOOD_SLOPES.splitlines(True), "metadata": {}},
                    {"cell_type": "markdown", "source": "text"}]}
    path = world.subs / "schema_invalid.ipynb"
    path.write_text(json.dumps(nb))
    assert read_submission(path) == [GOOD_SLOPES]
    report = grade_notebook(path, assignment="relative", out=world.out)
    assert scores(report)["alibi_slopes"] == (1.0, "passed")


# ----------------------------------------------------------------------------- names, command line, gradebook


@pytest.mark.parametrize("name", ["../..", "a/b", "`touch x`", "$(id)", "a;b", "", ".hidden", "-rf", "a b", "x" * 65])
def test_invalid_student_names_are_refused(name):
    with pytest.raises(ValueError, match="invalid student name"):
        validate_name(name)


def test_sanitized_names_are_valid():
    for stem in ["a`touch x`", "../../etc", "ada lovelace", "$(rm -rf ~)", "é", "..."]:
        assert validate_name(sanitize_name(stem))


def test_make_grade_passes_names_through_the_environment(tmp_path):
    recipe = (ROOT / "Makefile").read_text().split("\ngrade: $(STAMP)\n")[1].split("\n\n")[0]
    assert recipe.startswith("\t") and all(f"$({v})" not in recipe for v in ("NB", "STUDENT", "DIR", "ASSIGNMENT"))
    folder = tmp_path / "relative"
    folder.mkdir()
    marker = f"pwned-{uuid.uuid4().hex}"
    evil = notebook(folder, f"x`touch {marker}`$(touch {marker});touch {marker}", GOOD_T5, STUB_SLOPES)
    out = tmp_path / "grades"
    bin_dir = str(Path(sys.executable).parent)
    done = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "grade", "STAMP=", f"BIN={bin_dir}",
                           f"GRADES={out}", f"NB={evil}", "STUDENT=ada"], capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"Grade report for ada ({evil}): 1 / 2"
    assert not (ROOT / marker).exists() and not (tmp_path / marker).exists()
    bad = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "grade", "STAMP=", f"BIN={bin_dir}",
                          f"GRADES={out}", f"NB={evil}", "STUDENT=../../x"], capture_output=True, text=True,
                         timeout=900)
    assert bad.returncode == 2 and "invalid student name" in bad.stderr
    assert sorted(p.name for p in out.rglob("*.json")) == ["ada.json"]


def test_regrading_replaces_rows_and_concurrent_graders_are_safe(tmp_path):
    out = tmp_path / "grades"

    def report(student, score):
        r = GradeReport(student=student, notebook=f"{student}.ipynb", assignment="relative")
        r.exercises = [ExerciseGrade("t5_bucket", score, 1.0, "passed" if score else "failed", "m"),
                       ExerciseGrade("alibi_slopes", 0.0, 1.0, "failed", "=HYPERLINK(\"x\")")]
        return r

    def worker(k):
        book = Gradebook(out)
        for i in range(15):
            book.record(report(f"s{k}", float(i % 2)))
            book.export()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    book = Gradebook(out)
    book.record(report("s0", 1.0))
    book.export()
    rows = book.rows()
    assert len(rows) == 12 and len({(r["student"], r["exercise"]) for r in rows}) == 12
    wide = list(csv.reader((out / "grades_wide.csv").open()))
    assert wide[0] == ["student", "t5_bucket", "alibi_slopes", "total", "max"]
    assert wide[1] == ["s0", "1", "0", "1", "2"] and len(wide) == 7
    long = (out / "grades_long.csv").read_text()
    assert long.count("student,assignment") == 1 and "'=HYPERLINK" in long
    with sqlite3.connect(out / "gradebook.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM grades").fetchone()[0] == 12


def test_a_whole_folder(tmp_path, capsys):
    folder = tmp_path / "relative"
    folder.mkdir()
    notebook(folder, "ada", GOOD_T5, GOOD_SLOPES)
    notebook(folder, "bob;rm -rf ~", STUBS)
    notebook(folder, "carl", "import os\nos._exit(3)", GOOD_T5)
    (folder / "dora.ipynb").write_text("{not json")
    (folder / "eve.ipynb").mkdir()
    (folder / "notes.txt").write_text("not a notebook")
    out = tmp_path / "grades"
    assert main(["--dir", str(folder), "--out", str(out), "--jobs", "2"]) == 0
    printed = capsys.readouterr().out
    assert "graded 5 notebooks" in printed and "passed" in printed
    wide = {row["student"]: row for row in csv.DictReader((out / "grades_wide.csv").open())}
    assert set(wide) == {"ada", "bob_rm_-rf__", "carl", "dora", "eve"}
    assert (wide["ada"]["total"], wide["carl"]["total"], wide["dora"]["total"]) == ("2", "1", "0")
    long = list(csv.DictReader((out / "grades_long.csv").open()))
    assert len(long) == 10 and {r["status"] for r in long if r["student"] in ("dora", "eve")} == {"unreadable"}
    assert (out / "relative" / "ada.json").exists()


def test_command_line_errors(tmp_path, capsys):
    path = notebook(tmp_path, "no_chapter_in_this_name", STUBS)
    assert main([str(path), "--out", str(tmp_path / "g")]) == 2
    assert "ASSIGNMENT" in capsys.readouterr().err
    assert main([str(path), "--assignment", "nope", "--out", str(tmp_path / "g")]) == 2
    assert main([str(path), "--exercises", "no_such_exercise", "--out", str(tmp_path / "g")]) == 2
    assert main(["--out", str(tmp_path / "g")]) == 2
    assert not (tmp_path / "g").exists()


def test_the_limited_sandbox_works_where_namespaces_are_missing():
    # the fallback for a grader that is not root: a separate process, limits, scrubbed environment, fresh folder
    with Sandbox(isolation="limited") as box:
        assert box.run_cell("import os\nassert 'COURSE_PE_RESULTS' not in os.environ and 'VIRTUAL_ENV' not in os.environ",
                            60) is None
        assert "MemoryError" in box.run_cell("x = bytearray(4 * 2**30)", 60)
        assert box.run_cell(GOOD_SLOPES, 60) is None
        outcome = box.call("alibi_slopes", (6,), 60)
        assert outcome.status == "ok" and outcome.value.shape == (6,)
        box.run_cell("def hang(n):\n    while True:\n        pass", 60)
        with pytest.raises(SandboxTimeout):
            box.call("hang", (1,), 3)
