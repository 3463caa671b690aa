"""Grading a real class: files and names, rosters, the command line, the gradebook's exports, a class of 30 with a
staller, and Ctrl-C.

The red team's attacks 28-42 (names, files, folders, concurrency, the limited level) and the newcomer's F4/F13 are
rebuilt here; every test goes through ``python -m course_pe.coursework.grade`` (:func:`main`, what ``make grade``
runs) unless it tests a smaller piece.
"""

from __future__ import annotations

import csv
import json
import os
import shlex
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from _grading import (CTRL_C_WAIT, GOOD_SLOPES, GOOD_T5, STUBS, TOOL, batch_with_stallers, grader_on_a_terminal,
                      grader_sandbox_uids, notebook, processes_of, recorded_students, sandbox_processes, stopped_at_once,
                      stopped_cleanly, wide)
from course_pe.coursework import grade as grade_module
from course_pe.coursework import sandbox as sandbox_module
from course_pe.coursework.gradebook import Gradebook
from course_pe.coursework.grade import ExerciseGrade, GradeReport, main
from course_pe.coursework.names import derive_name, validate_name
from course_pe.coursework.roster import intake, read_roster
from course_pe.coursework.sandbox import Containment, containment

ROOT = Path(__file__).resolve().parent.parent
FULL = containment().level == "full"


def long_rows(out: Path) -> list[dict[str, str]]:
    with (out / "grades_long.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


# ----------------------------------------------------------------------------- names and files (attacks 28-35)


@pytest.fixture
def messy_folder(tmp_path):
    """A folder as an LMS download or a careless collection leaves it, with the red team's files in it."""
    folder = tmp_path / "relative"
    folder.mkdir()
    notebook(folder, "ada", GOOD_T5, GOOD_SLOPES)
    notebook(folder, "bob", GOOD_T5, GOOD_SLOPES)
    notebook(folder, "_bob", STUBS)  # attack 28: the impostor sorts first
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(GOOD_T5)]), folder / "Carol.IPYNB")  # 29
    with open(os.path.join(os.fsencode(folder), b"ad\xe9la.ipynb"), "wb") as fh:  # attack 30: an old zip's name
        fh.write(nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(GOOD_T5)])).encode())
    os.symlink(ROOT / "book" / "part2" / "relative.ipynb", folder / "eve.ipynb")  # attack 34: the solutions
    os.symlink("/etc/shadow", folder / "frank.ipynb")  # attack 35
    os.symlink("/dev/zero", folder / "gina.ipynb")
    (folder / "ivan_submission.ipynb").write_text("{not json")
    (folder / "notes.txt").write_text("not a notebook")
    (folder / ".ipynb_checkpoints").mkdir()
    notebook(folder, "zed", GOOD_T5, GOOD_SLOPES)
    return folder


def test_a_roster_decides_whose_file_is_which(messy_folder, tmp_path, capsys):
    roster = tmp_path / "roster.csv"
    roster.write_text("\ufeffStudent,SIS Login ID,File\n    Points Possible,,\nLovelace Ada,ada,\nBobson Bob,bob,\n"
                      "Carol C,carol,\nEve E,eve,\nFrank F,frank,\nGina G,gina,\nHank H,hank,\n"
                      "Ivan I,ivan,ivan_submission.ipynb\n", encoding="utf-8")
    out = tmp_path / "grades"
    assert main(["--dir", str(messy_folder), "--roster", str(roster), "--out", str(out), "--jobs", "2"]) == 0
    printed = capsys.readouterr().out
    table = wide(out)
    assert {s: table[s]["total"] for s in table} == {"ada": "2", "bob": "2", "carol": "1", "eve": "0", "frank": "0",
                                                    "gina": "0", "ivan": "0"}
    messages = {(r["student"], r["exercise"]): r["message"] for r in long_rows(out)}
    assert "symbolic link: refused" in messages["eve", "t5_bucket"]
    assert "not a notebook" in messages["ivan", "alibi_slopes"]
    # every file that was not graded, and every student without a file, is named in the summary
    for line in ["unknown  _bob.ipynb: not on the roster", "unknown  zed.ipynb: not on the roster",
                 "not UTF-8  ad\\xe9la.ipynb", "missing  (student hank): no submission", "ignored  notes.txt"]:
        assert line in printed, (line, printed)
    assert json.loads((out / "relative" / "carol.json").read_text())["problems"][0].startswith(
        "matched to carol without regard to case; the suffix '.IPYNB' was taken as .ipynb")


def test_without_a_roster_names_come_from_the_files_and_collisions_are_reported(messy_folder, tmp_path, capsys):
    notebook(messy_folder, "Ada Lovelace", GOOD_T5)
    notebook(messy_folder, "ada lovelace", STUBS)
    out = tmp_path / "grades"
    assert main(["--dir", str(messy_folder), "--out", str(out), "--jobs", "2"]) == 0
    printed = capsys.readouterr().out
    table = wide(out)
    assert set(table) == {"ada", "bob", "Carol", "eve", "frank", "gina", "ivan_submission", "zed"}
    assert table["bob"]["total"] == "2"  # the real Bob, not the impostor
    assert "duplicate  _bob.ipynb: the student 'bob' is bob.ipynb; this file is not graded" in printed
    assert "2 files claim the student 'Ada_Lovelace'" in printed and "Ada_Lovelace" not in table
    assert "not UTF-8" in printed
    assert (out / "grades_long.csv").exists() and (out / "gradebook.sqlite").exists()


def test_intake_never_follows_or_renames(tmp_path):
    folder = tmp_path / "x"
    folder.mkdir()
    (folder / "sub.ipynb").mkdir()
    os.mkfifo(folder / "pipe.ipynb")
    os.symlink("/nonexistent", folder / "dangling.ipynb")
    entries = {e.file: e for e in intake(folder)}
    assert {k: (e.status, e.student) for k, e in entries.items()} == {
        "sub.ipynb": ("refused", "sub"), "pipe.ipynb": ("refused", "pipe"), "dangling.ipynb": ("refused", "dangling")}
    # red team N17: a hard link (here to a notebook elsewhere, as the solution notebook could be) is a link too
    (tmp_path / "elsewhere.ipynb").write_text("{}")
    os.link(tmp_path / "elsewhere.ipynb", folder / "eve.ipynb")
    entries = {e.file: e for e in intake(folder)}
    assert entries["eve.ipynb"].status == "refused" and "hard link" in entries["eve.ipynb"].detail
    assert derive_name("José García") == "Jose_Garcia" and derive_name("..bob") == "bob"
    with pytest.raises(ValueError):
        derive_name("日本")
    assert validate_name("ada.lovelace+cs@uni.edu")


def test_rosters_from_learning_management_systems(tmp_path):
    moodle = tmp_path / "moodle.csv"
    moodle.write_text("First name;Surname;Username;Email address\nAda;Lovelace;ada;ada@uni.edu\nBob;B;bob;b@uni.edu\n")
    assert [e.student for e in read_roster(moodle)] == ["ada", "bob"]
    assert [e.student for e in read_roster(moodle, id_column="Email address")] == ["ada@uni.edu", "b@uni.edu"]
    for text, error in [("student_id\nada\nAda\n", "appears 2 times"), ("student_id\nada lovelace\n", "not a valid"),
                        ("name,grade\nada,1\n", "no student column"),
                        ("student_id,file\nada,x.ipynb\nbob,X.ipynb\n", "given for both"),
                        ("student_id,file\nada,../x.ipynb\n", "not a plain file name")]:
        bad = tmp_path / "bad.csv"
        bad.write_text(text)
        with pytest.raises(ValueError, match=error):
            read_roster(bad)
    link = tmp_path / "link.csv"
    os.symlink(moodle, link)
    with pytest.raises(ValueError, match="symbolic links"):
        read_roster(link)


# ----------------------------------------------------------------------------- one notebook (F4, F13, attacks 31, 37, 38)


def test_one_notebook_from_the_command_line(tmp_path, capsys):
    folder = tmp_path / "relative"
    folder.mkdir()
    out = tmp_path / "grades"
    good = notebook(folder, "ada", GOOD_T5, GOOD_SLOPES)
    assert main([str(good), "--student", "alice", "--out", str(out)]) == 0
    assert wide(out)["alice"]["total"] == "2"
    before = (out / "grades_wide.csv").read_bytes()
    # F4: a mistyped path is an error that changes no grade
    assert main([str(folder / "Alice.ipynb"), "--student", "alice", "--out", str(out)]) == 2
    assert "does not exist; nothing was graded" in capsys.readouterr().err
    # a regrade replaces a grade only on purpose
    stub = notebook(folder, "alice_v2", STUBS)
    assert main([str(stub), "--student", "alice", "--out", str(out)]) == 2
    assert "already has a grade for relative" in capsys.readouterr().err
    assert (out / "grades_wide.csv").read_bytes() == before
    assert main([str(stub), "--student", "alice", "--out", str(out), "--replace"]) == 0
    assert wide(out)["alice"]["total"] == "0"
    # no name from the file: STUDENT is required
    assert main([str(good), "--out", str(out)]) == 2
    # attack 31: the assignment never comes from the file name; the metadata is a hint in the message (F13)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    claimed = notebook(inbox, "ada_extrapolation", GOOD_T5, metadata={"course_pe": {"exercises": ["t5_bucket",
                                                                                                  "alibi_slopes"]}})
    assert main([str(claimed), "--student", "ada", "--out", str(out)]) == 2
    assert "ASSIGNMENT=relative if that is what you assigned" in capsys.readouterr().err
    # red team N17: a hard link to the solution notebook is refused, with the reason, not graded 2/2
    solution = tmp_path / "book" / "relative.ipynb"  # (a copy on this file system: links cannot cross file systems)
    solution.parent.mkdir()
    solution.write_bytes((ROOT / "book" / "part2" / "relative.ipynb").read_bytes())
    os.link(solution, folder / "eve.ipynb")
    assert main([str(folder / "eve.ipynb"), "--student", "eve", "--out", str(out)]) == 0
    assert {(r["status"], r["score"]) for r in long_rows(out) if r["student"] == "eve"} == {("unreadable", "0")}
    assert "hard link" in {r["message"] for r in long_rows(out) if r["student"] == "eve"}.pop()
    # attacks 37 and 38: a deeply nested notebook and a byte-order mark give rows with the reason, not a traceback
    for name, content in [("nested", "[" * 300_000), ("bom", "\ufeff" + nbformat.writes(nbformat.v4.new_notebook()))]:
        path = folder / f"{name}.ipynb"
        path.write_text(content, encoding="utf-8")
        assert main([str(path), "--student", name, "--out", str(out)]) == 0
        assert {r["status"] for r in long_rows(out) if r["student"] == name} == {"unreadable"}
    # F13: everything under the gradebook folder is the owner's only
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    for path in [out / "gradebook.sqlite", out / "grades_wide.csv", out / "grades_long.csv", out / "relative/ada.json"
                 if (out / "relative/ada.json").exists() else out / "relative/alice.json"]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_a_batch_refuses_to_replace_grades_unless_asked(tmp_path, capsys):
    folder = tmp_path / "relative"
    folder.mkdir()
    notebook(folder, "ada", GOOD_T5)
    out = tmp_path / "grades"
    assert main(["--dir", str(folder), "--out", str(out)]) == 0
    assert main(["--dir", str(folder), "--out", str(out)]) == 2
    assert "already have grades for relative" in capsys.readouterr().err
    assert main(["--dir", str(folder), "--out", str(out), "--replace"]) == 0


def test_huge_notebooks_are_graded():
    """Attack 39: 5,000 cells and a 2 MiB cell cost nothing but reading."""
    cells = ["x = 1"] * 5000 + ["# " + "y" * (2 * 2**20) + "\n" + GOOD_SLOPES]
    report = grade_module.grade_cells(cells, "relative", exercises=["alibi_slopes"])
    assert report.score == 1 and report.cells_run == [5000], report.text()


def test_make_grade_passes_names_through_the_environment(tmp_path):
    recipe = (ROOT / "Makefile").read_text().split("\ngrade: $(STAMP)\n")[1].split("\n\n")[0]
    assert recipe.startswith("\t") and all(f"$({v})" not in recipe for v in ("NB", "STUDENT", "DIR", "ASSIGNMENT",
                                                                             "ROSTER"))
    folder = tmp_path / "relative"
    folder.mkdir()
    marker = f"pwned-{os.getpid()}"
    evil = notebook(folder, f"x`touch {marker}`$(touch {marker});touch {marker}", GOOD_T5, TOOL.STUB_SLOPES)
    roster = tmp_path / "roster.csv"
    roster.write_text(f"student_id,file\nada,{evil.name}\n")
    out = tmp_path / "grades"
    bin_dir = str(Path(sys.executable).parent)

    def make(*variables: str) -> subprocess.CompletedProcess:
        return subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "grade", "STAMP=", f"BIN={bin_dir}",
                               f"GRADES={out}", *variables], capture_output=True, text=True, timeout=900)

    done = make(f"DIR={folder}", f"ROSTER={roster}", "JOBS=1")
    assert done.returncode == 0, done.stderr
    assert "ada " in done.stdout and wide(out)["ada"]["total"] == "1"
    bad = make(f"NB={evil}", "STUDENT=../../x", "REPLACE=1")
    assert bad.returncode == 2 and "invalid student name" in bad.stderr
    assert not (ROOT / marker).exists() and not (tmp_path / marker).exists()
    assert sorted(p.name for p in out.rglob("*.json")) == ["ada.json"]


# ----------------------------------------------------------------------------- the gradebook (attack 40) and the level (42)


def _report(student: str, score: float) -> GradeReport:
    report = GradeReport(student=student, notebook=f"{student}.ipynb", assignment="relative")
    report.exercises = [ExerciseGrade("t5_bucket", score, 1.0, "passed" if score else "failed", "m"),
                        ExerciseGrade("alibi_slopes", 0.0, 1.0, "failed", "=HYPERLINK(\"x\")")]
    return report


def test_exports_are_serialised_with_the_database(tmp_path, monkeypatch):
    """Attack 40: grader A reads the rows for its export, grader B records a grade, A writes its export. An export
    holds the database's write lock until its files are in place, so B waits and B's own export has both."""
    out = tmp_path / "grades"
    book = Gradebook(out)
    book.record(_report("ada", 1.0))
    original = Gradebook._export
    inside = threading.Event()

    def slow_export(self, rows):
        inside.set()
        time.sleep(1.0)  # A is between reading the rows and writing the files
        return original(self, rows)

    monkeypatch.setattr(Gradebook, "_export", slow_export)
    a = threading.Thread(target=Gradebook(out).export)
    a.start()
    inside.wait(10)
    monkeypatch.setattr(Gradebook, "_export", original)
    started = time.monotonic()
    Gradebook(out).record(_report("bob", 1.0))
    waited = time.monotonic() - started
    Gradebook(out).export()
    a.join()
    assert waited > 0.5, "the record did not wait for the export"
    assert set(wide(out)) == {"ada", "bob"}
    assert "'=HYPERLINK" in (out / "grades_long.csv").read_text()  # a formula stays text in a spreadsheet


def test_concurrent_graders_and_regrades_are_safe(tmp_path):
    out = tmp_path / "grades"

    def worker(k):
        book = Gradebook(out)
        for i in range(10):
            book.record(_report(f"s{k}", float(i % 2)))
            book.export()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = Gradebook(out).rows()
    assert len(rows) == 8 and len({(r["student"], r["exercise"]) for r in rows}) == 8
    with sqlite3.connect(out / "gradebook.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM grades").fetchone()[0] == 8


def test_the_limited_level_must_be_asked_for(tmp_path, monkeypatch, capsys):
    """Attack 42: without root or namespaces a submission runs as the grader's user. The grader then stops with
    exit status 2 unless ISOLATION=limited is given; every report names the level."""
    limited = Containment("limited", notes=("the grader is not root",))
    monkeypatch.setattr(grade_module, "containment", lambda: limited)
    monkeypatch.setattr(sandbox_module, "containment", lambda: limited)
    folder = tmp_path / "relative"
    folder.mkdir()
    path = notebook(folder, "ada", GOOD_T5)
    out = tmp_path / "grades"
    assert main([str(path), "--student", "ada", "--out", str(out)]) == 2
    assert "ISOLATION=limited" in capsys.readouterr().err and not out.exists()
    assert main([str(path), "--student", "ada", "--out", str(out), "--isolation", "limited"]) == 0
    report = json.loads((out / "relative" / "ada.json").read_text())
    assert report["isolation"].startswith("limited") and report["score"] == 1


# ----------------------------------------------------------------------------- a whole class; Ctrl-C (attacks 7, 8, 27)


def test_a_class_of_30_with_a_staller_grades_in_bounded_time(tmp_path, capsys):
    """30 submissions of tools/make_class_submissions.py (correct, wrong, hostile and broken, a staller among them)
    graded as `make grade DIR=` does, two at a time: every file gets the score its name announces, within bounded
    time, the exports exist and no process is left."""
    assert TOOL.main([str(tmp_path / "class"), "--book-root", str(ROOT)]) == 0
    folder = tmp_path / "class" / "relative"
    files = sorted(folder.iterdir())
    assert len(files) == 30
    out = tmp_path / "grades"
    started = time.monotonic()
    status = main(["--dir", str(folder), "--out", str(out), "--jobs", "2", "--cell-timeout", "5", "--call-timeout",
                   "5", "--timeout", "15"])
    seconds = time.monotonic() - started
    capsys.readouterr()
    assert status == 0
    table = wide(out)
    expected = {p.name[: -len(".ipynb")]: p.name.split("_expect")[1][0] for p in files}
    assert {s: row["total"] for s, row in table.items()} == expected
    # bounded: at most the wall-clock limit per submission, two at a time, plus the machine's load
    assert seconds < 30 * 15 / 2 + 60, seconds
    assert (out / "grades_long.csv").exists() and len(long_rows(out)) == 60
    assert sandbox_processes() == []
    print(f"class of 30 graded in {seconds:.1f} s")


@pytest.mark.parametrize("sigint, stop", [("default", signal.SIGINT), ("ignored", signal.SIGTERM),
                                         ("default", signal.SIGHUP)],
                         ids=["ctrl-c in a terminal", "sigterm to a background job", "the terminal hangs up"])
def test_ctrl_c_stops_a_batch_and_still_writes_the_exports(tmp_path, sigint, stop):
    """Ctrl-C in a terminal (SIGINT), ``kill PID`` (SIGTERM) for a grader started in the background of a script, which
    ignores SIGINT, or a closed terminal or dropped SSH connection (SIGHUP): at once, the stalling submissions are
    killed, the two graded ones exported, the rest marked; no process and no work folder is left."""
    with batch_with_stallers(tmp_path, sigint=sigint) as (process, out):
        started = time.monotonic()
        process.send_signal(stop)
        stdout, stderr = process.communicate(timeout=CTRL_C_WAIT)
        seconds = time.monotonic() - started
    stopped_at_once(process.returncode, seconds, out, process, tmp_path, stderr)
    assert "interrupted: 2 notebook(s) graded and recorded" in stderr
    assert "not graded (interrupted)" in stdout


def test_ctrl_c_with_the_output_piped_to_a_reader_that_ctrl_c_killed(tmp_path):
    """``make grade ... 2>&1 | tee log``: the same Ctrl-C kills ``tee``, and the grader's next write (the progress bar)
    fails. That BrokenPipeError used to replace the Ctrl-C: the stallers ran on to their time limit, further Ctrl-Cs
    and SIGTERM were deferred, and the exit status was 1. Now the output is dropped and the stop is the same."""
    with batch_with_stallers(tmp_path) as (process, out):
        process.stdout.close()  # the reader is gone: every write of the grader fails with EPIPE
        process.stderr.close()
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        returncode = process.wait(timeout=CTRL_C_WAIT)
        seconds = time.monotonic() - started
    stopped_at_once(returncode, seconds, out, process, tmp_path)


def _wait_until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.2)
    return bool(condition())


def test_a_terminal_that_hangs_up_stops_a_batch_that_no_signal_reaches(tmp_path):
    """A closed terminal or a dropped SSH connection signals only the terminal's session leader; when that is make
    (``ssh -t host 'make grade ...'``), which passes no hang-up on, the grader used to grade the whole class for nobody.
    It watches its terminal: here a shell that ignores the hang-up is the leader, the grader its foreground job."""
    folder = tmp_path / "relative"
    folder.mkdir()
    for name in ("a1", "a2"):
        notebook(folder, name, GOOD_T5, GOOD_SLOPES)
    for k in range(4):
        notebook(folder, f"z{k}", "import time\ntime.sleep(10**6)\n" + STUBS)
    out = tmp_path / "grades"
    with grader_on_a_terminal(tmp_path, folder, out, "--jobs", "2", "--cell-timeout", "600") as (shell, grader, hang_up):
        assert _wait_until(lambda: recorded_students(out) == {"a1", "a2"}, 300)
        assert _wait_until(lambda: processes_of(grader_sandbox_uids(grader)), 120), "no staller was running"
        started = time.monotonic()
        hang_up()
        returncode = shell.wait(timeout=CTRL_C_WAIT)
        seconds = time.monotonic() - started
    stopped_at_once(returncode, seconds, out, grader, tmp_path)


def test_a_hang_up_leaves_a_grader_in_the_background_running(tmp_path):
    """``make grade ... & disown`` (or Ctrl-Z, ``bg``, ``disown``), then the terminal closes: its user chose to keep the
    grader running, so the terminal's hang-up must not stop it (the first terminal watch did, after 1 of 6 notebooks;
    the second one still did when the shell exited right after ``bg``). Here the grader is a job of a job-control
    shell that is the terminal's leader."""
    folder = tmp_path / "relative"
    folder.mkdir()
    for name in ("a1", "a2"):
        notebook(folder, name, GOOD_T5, GOOD_SLOPES)
    notebook(folder, "z0", "import time\ntime.sleep(10**6)\n" + STUBS)
    out = tmp_path / "grades"
    with grader_on_a_terminal(tmp_path, folder, out, "--jobs", "2", "--cell-timeout", "15",
                              foreground=False) as (shell, grader, hang_up):
        assert _wait_until(lambda: processes_of(grader_sandbox_uids(grader)), 300), "no sandbox ran"
        hang_up()
        assert _wait_until(lambda: not os.path.exists(f"/proc/{grader}"), 300), "the grader did not finish"
    assert set(wide(out)) == {"a1", "a2", "z0"}, "the batch was stopped"
    assert wide(out)["a1"]["total"] == "2" and wide(out)["z0"]["total"] == "0"
    stopped_cleanly(grader, tmp_path)


@pytest.mark.parametrize("closed", ["2>&-", ">&-"])
def test_a_closed_output_stream_changes_nothing(tmp_path, closed):
    """``make grade ... 2>&-`` (stderr closed: the progress bar used to crash the batch, nothing graded, exit 120) and
    ``>&-`` (stdout closed: exit 120 after a complete run): every notebook is graded and the status is 0."""
    folder = tmp_path / "relative"
    folder.mkdir()
    for name in ("a1", "a2"):
        notebook(folder, name, GOOD_T5, GOOD_SLOPES)
    out = tmp_path / "grades"
    command = (f"exec {shlex.quote(sys.executable)} -m course_pe.coursework.grade --dir {shlex.quote(str(folder))} "
               f"--out {shlex.quote(str(out))} --jobs 2 {closed}")
    process = subprocess.run(["sh", "-c", command], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert process.returncode == 0, (process.stdout, process.stderr)
    assert set(wide(out)) == {"a1", "a2"} and wide(out)["a2"]["total"] == "2"


def test_a_signal_during_recording_takes_effect_after_it(tmp_path, monkeypatch):
    """A Ctrl-C (here SIGTERM, the same path) that arrives while a report is being recorded stops the batch after that
    report is recorded and counted: the gradebook, the report file, the exports and the summary agree."""
    folder = tmp_path / "relative"
    folder.mkdir()
    notebook(folder, "a1", GOOD_T5, GOOD_SLOPES)
    notebook(folder, "a2", GOOD_T5, GOOD_SLOPES)
    real_record = Gradebook.record

    def record(self, report):
        os.kill(os.getpid(), signal.SIGTERM)  # delivered now, in the middle of the recording
        return real_record(self, report)

    monkeypatch.setattr(Gradebook, "record", record)
    out = tmp_path / "grades"
    with pytest.raises(grade_module.GradingInterrupted) as stopped:
        grade_module.grade_folder(folder, out=out, jobs=1, progress=False)
    result = stopped.value.args[0]
    graded = {r.student for r in result.reports}
    assert len(graded) == 1, graded
    assert set(wide(out)) == graded and {p.stem for p in (out / "relative").glob("*.json")} == graded
    marks = {e.student: e.status for e in result.intake}
    assert [marks[s] for s in graded] == ["grade"] and list(marks.values()).count("not graded (interrupted)") == 1


def test_signals_the_grader_was_started_ignoring_stay_ignored():
    """A background job's SIGINT is ignored; the blocks in which the grader defers Ctrl-C must not start catching it (a
    Ctrl-C in the script's terminal turned a complete run into "interrupted", exit 130)."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with grade_module._signals_deferred() as caught:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)
        assert caught == [] and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_the_exports_do_not_wait_for_workers_that_have_not_returned(tmp_path, monkeypatch):
    """After Ctrl-C (here SIGTERM, which takes the same path) the exports are written at once, before grade_folder
    waits for worker threads that have not returned yet (a sandbox still starting on a slow machine): however long
    they take, the exports are there. Before, they were written after that wait (up to a minute)."""
    folder = tmp_path / "relative"
    folder.mkdir()
    notebook(folder, "a1", GOOD_T5, GOOD_SLOPES)
    notebook(folder, "z1", STUBS)
    out = tmp_path / "grades"
    real_grade_cells = grade_module.grade_cells
    blocked, release = threading.Event(), threading.Event()

    def grade_cells(cells, assignment, *, student, **options):
        if student == "z1":  # a worker that killing the sandboxes does not free
            blocked.set()
            release.wait(300)
            raise RuntimeError("released by the test")
        return real_grade_cells(cells, assignment, student=student, **options)

    real_export = Gradebook.export
    exported: list[float] = []

    def export(self):
        exported.append(time.monotonic())
        return real_export(self)

    monkeypatch.setattr(grade_module, "grade_cells", grade_cells)
    monkeypatch.setattr(grade_module, "_INTERRUPT_GRACE", 10.0)
    monkeypatch.setattr(Gradebook, "export", export)
    sent: list[float] = []

    def interrupt_once_a1_is_recorded() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            time.sleep(0.2)
            try:
                with sqlite3.connect(out / "gradebook.sqlite") as db:
                    if blocked.is_set() and db.execute("SELECT 1 FROM grades WHERE student = 'a1'").fetchone():
                        break
            except sqlite3.Error:
                pass
        else:
            release.set()  # grading then ends without an interruption, and the test fails below
            return
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGTERM)  # grade_folder's handler (main thread): the Ctrl-C path

    threading.Thread(target=interrupt_once_a1_is_recorded, daemon=True).start()
    try:
        with pytest.raises(grade_module.GradingInterrupted):
            grade_module.grade_folder(folder, out=out, jobs=2, progress=False)
    finally:
        release.set()
    assert sent and exported, (sent, exported)
    assert exported[0] - sent[0] < 5.0, f"exported {exported[0] - sent[0]:.1f} s after the signal (grace 10 s)"
    assert set(wide(out)) == {"a1"} and wide(out)["a1"]["total"] == "2"
