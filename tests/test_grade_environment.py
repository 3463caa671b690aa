"""The grader where its own environment is the problem (newcomer review 3, M3 and m2).

A course checkout made with ``mktemp -d`` lives under ``/tmp``; the full isolation level gives each submission a fresh
``/tmp``, which used to hide the checkout's ``.venv`` from the child, so every submission was "not graded" with 0
points, written to the gradebook, and ``make grade`` exited 0. Here: grading from a copy of the course under ``/tmp``
(the copy's own interpreter, package and virtual environment), a submission that lies directly in ``/tmp``, and a
grader that cannot run submissions at all, which must exit non-zero and leave the gradebook as it was.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from _grading import GOOD_SLOPES, GOOD_T5, NAIVE_SLOPES, notebook, scores
from course_pe.coursework.grade import ExerciseGrade, GradeReport, grade_notebook
from course_pe.coursework.gradebook import Gradebook
from course_pe.coursework.sandbox import containment

ROOT = Path(__file__).resolve().parent.parent
FULL = containment().level == "full"
needs_full_isolation = pytest.mark.skipif(not FULL, reason="needs root and namespaces (the level whose fresh /tmp "
                                          "hid a checkout under /tmp)")
IN_VENV = sys.prefix != sys.base_prefix
LEVELS = ["limited"] + (["full"] if FULL else [])


def _copy_tree(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` with hard links where the file system allows (a virtual environment is 2 GB)."""
    done = subprocess.run(["cp", "-al", str(source), str(target)], capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target, symlinks=True)


@pytest.fixture(scope="module")
def tmp_checkout():
    """A copy of this course (package, book, ``_toc.yml``) and of its virtual environment under a fresh folder in
    ``/tmp``, as ``d=$(mktemp -d) && git clone ... $d/c && make install`` gives."""
    if not IN_VENV:
        pytest.skip("the test copies the virtual environment it runs in; this Python is not one")
    base = Path(tempfile.mkdtemp(prefix="course_pe_checkout_", dir="/tmp"))
    os.chmod(base, 0o755)
    copy = base / "c"
    copy.mkdir()
    try:
        shutil.copytree(ROOT / "course_pe", copy / "course_pe", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(ROOT / "book", copy / "book", ignore=shutil.ignore_patterns("_build", ".ipynb_checkpoints"))
        shutil.copy2(ROOT / "_toc.yml", copy / "_toc.yml")
        _copy_tree(Path(sys.prefix), copy / ".venv")
        yield copy
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _wide(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "grades_wide.csv", newline="", encoding="utf-8") as fh:
        return {row["student"]: row for row in csv.DictReader(fh)}


@needs_full_isolation
def test_a_course_checked_out_under_tmp_grades_at_full_isolation(tmp_checkout):
    """M3: the copy's own interpreter (its ``.venv`` under /tmp) grades a class under /tmp at the full level: right
    scores, exit 0, and the submission still sees neither the course's book nor the grader's /tmp."""
    base = tmp_checkout.parent
    secret = base / "secret.txt"
    secret.write_text("the grader's /tmp")
    submissions = base / "relative"
    submissions.mkdir()
    out = base / "grades"
    targets = [str(tmp_checkout / "book"), str(tmp_checkout / "_toc.yml"), str(tmp_checkout / "course_pe"),
               str(secret), str(submissions), str(out)]
    probe = f"""
import os
flags = "".join("1" if os.path.exists(t) else "0" for t in {targets!r})
def alibi_slopes(n):
    raise RuntimeError(f"flags {{flags}}")
"""
    notebook(submissions, "alice", GOOD_T5, GOOD_SLOPES)
    notebook(submissions, "bob", GOOD_T5, NAIVE_SLOPES)
    notebook(submissions, "carol", GOOD_T5, probe)
    script = (
        "import sys, course_pe\n"
        f"assert course_pe.__file__.startswith({str(tmp_checkout)!r} + '/'), course_pe.__file__\n"
        f"assert sys.prefix == {str(tmp_checkout / '.venv')!r}, sys.prefix\n"
        "from course_pe.coursework.grade import main\n"
        f"sys.exit(main(['--dir', {str(submissions)!r}, '--out', {str(out)!r}, '--jobs', '2']))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(tmp_checkout / ".venv" / "bin" / "python"), "-c", script], cwd=tmp_checkout, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "isolation full:" in done.stdout, done.stdout[-2000:]
    wide = _wide(out)
    assert {s: (wide[s]["t5_bucket"], wide[s]["alibi_slopes"]) for s in wide} == {
        "alice": ("1", "1"), "bob": ("1", "0"), "carol": ("1", "0")}, wide
    carol = json.loads((out / "relative" / "carol.json").read_text())
    detail = next(e for e in carol["exercises"] if e["exercise"] == "alibi_slopes")["message"]
    assert "flags 000000" in detail, detail


@needs_full_isolation
def test_a_submission_directly_in_tmp_is_graded():
    """M3: a notebook whose folder is /tmp itself (hidden from the submission by the sandbox's fresh /tmp) used to
    fail the sandbox's isolation check ("/tmp is visible in the sandbox")."""
    path = Path("/tmp") / f"course_pe_submission_{uuid.uuid4().hex}.ipynb"
    notebook(path.parent, path.stem, GOOD_T5, GOOD_SLOPES)
    try:
        report = grade_notebook(path, student="alice", assignment="relative", isolation="full", timeout=300)
    finally:
        path.unlink()
    assert scores(report) == {"t5_bucket": (1.0, "passed"), "alibi_slopes": (1.0, "passed")}, report.text()


# Runs the grader's command line with a broken grading build (an empty folder: the sandbox cannot import course_pe),
# as a half-hidden installation did; SKIP_SELF_CHECK also disables the self-check, so that the batch's own guard
# (no submission's sandbox ever worked) is what stops it.
BROKEN = r'''
import json, os, sys
from pathlib import Path
import course_pe.coursework.sandbox as sandbox
import course_pe.coursework.grade as grade

empty = Path(os.environ["EMPTY_BUILD"])
sandbox.grading_build = lambda unavailable: empty
if os.environ.get("SKIP_SELF_CHECK"):
    grade.self_check = lambda *args, **kwargs: None
sys.exit(grade.main(json.loads(os.environ["GRADE_ARGS"])))
'''


def _run_broken(tmp_path: Path, args: list[str], *, skip_self_check: bool = False) -> subprocess.CompletedProcess:
    empty = tmp_path / "empty_build"
    empty.mkdir(exist_ok=True)
    env = dict(os.environ, EMPTY_BUILD=str(empty), GRADE_ARGS=json.dumps(args))
    if skip_self_check:
        env["SKIP_SELF_CHECK"] = "1"
    return subprocess.run([sys.executable, "-c", BROKEN], env=env, capture_output=True, text=True, timeout=900,
                          cwd=ROOT)


def _old_grades(out: Path) -> Gradebook:
    """A gradebook in which alice already has 2/2 for relative (graded earlier, when the grader worked)."""
    book = Gradebook(out)
    report = GradeReport(student="alice", notebook="alice.ipynb", assignment="relative", isolation="full")
    report.exercises = [ExerciseGrade("t5_bucket", 1.0, 1.0, "passed", "all cases correct", function="t5_bucket"),
                        ExerciseGrade("alibi_slopes", 1.0, 1.0, "passed", "all cases correct",
                                      function="alibi_slopes")]
    book.record(report)
    book.export()
    return book


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("guard", ["self-check", "batch"])
def test_a_broken_grader_stops_the_batch_and_records_nothing(tmp_path, level, guard):
    """M3: when the sandbox cannot run anything, the batch exits 3 with a message that blames the grader, records no
    row, and leaves the existing grades (and the exports an LMS imports) as they were, even with --replace. Caught by
    the self-check before grading, or (``batch``) by the batch itself when no submission's sandbox ever worked."""
    submissions = tmp_path / "relative"
    submissions.mkdir()
    for name in ("alice", "bob", "carol"):
        notebook(submissions, name, GOOD_T5, GOOD_SLOPES)
    out = tmp_path / "grades"
    book = _old_grades(out)
    before = (book.rows(), (out / "grades_wide.csv").read_bytes(), (out / "grades_long.csv").read_bytes())
    done = _run_broken(tmp_path, ["--dir", str(submissions), "--out", str(out), "--replace", "--jobs", "2",
                                  "--isolation", level], skip_self_check=guard == "batch")
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-2000:]
    expected = "self-check" if guard == "self-check" else "no submission could be run"
    assert expected in done.stderr and "course_pe would be imported from" in done.stderr, done.stderr[-2000:]
    assert "nothing was graded or recorded" in done.stderr, done.stderr[-2000:]
    after = (book.rows(), (out / "grades_wide.csv").read_bytes(), (out / "grades_long.csv").read_bytes())
    assert after == before
    assert not (out / "relative" / "bob.json").exists()


@pytest.mark.parametrize("level", LEVELS)
def test_a_broken_grader_records_no_single_notebook(tmp_path, level):
    """M3, one notebook (``make grade NB=...``): exit 3, no gradebook, no report file."""
    path = notebook(tmp_path, "alice", GOOD_T5, GOOD_SLOPES)
    out = tmp_path / "grades"
    done = _run_broken(tmp_path, [str(path), "--student", "alice", "--assignment", "relative", "--out", str(out),
                                  "--isolation", level])
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-2000:]
    assert "self-check" in done.stderr and "nothing was graded or recorded" in done.stderr, done.stderr[-2000:]
    assert not (out / "gradebook.sqlite").exists() and not (out / "relative").exists()


@needs_full_isolation
def test_the_limited_level_is_described_as_limited(tmp_path):
    """m2: on a machine that allows full isolation, ISOLATION=limited reports the limited level, not the machine's."""
    path = notebook(tmp_path, "alice", GOOD_T5, GOOD_SLOPES)
    out = tmp_path / "grades"
    env = dict(os.environ, NB=str(path), STUDENT="alice", ASSIGNMENT="relative", GRADES=str(out),
               ISOLATION="limited")
    done = subprocess.run([sys.executable, "-m", "course_pe.coursework.grade", "--from-env"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    line = next(x for x in done.stdout.splitlines() if "isolation " in x)
    assert "isolation limited: no namespaces" in line and "fresh read-only root" not in line, line
    recorded = json.loads((out / "relative" / "alice.json").read_text())
    assert recorded["isolation"].startswith("limited: no namespaces"), recorded["isolation"]
