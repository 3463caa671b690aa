"""The grader's second red team (``/work/coord/reviews/grader-redteam2.md``), rebuilt attack by attack.

Rows H1-H3 and I6 (one notebook stalls the grader during cell analysis, Ctrl-C then loses the exports), D1-D5
(honest notebooks graded 0 by the static cell selection), A4 (a second copy of the graded rotation in the grading
build), G5 (a grades folder someone else controls), F13 (``BOB`` and ``bob``), I4 and I7 (nbgrader: students' HTML
in the Formgrader, limits given on nbgrader's command line), and two notes (C1: "expected 2, got 2"; F10: a leading
tab in a CSV cell). Also CPython 3.11's thread-unsafe ``ast.parse``, which made ``make grade`` (two grading threads)
fail a correct submission with ``SystemError: AST constructor recursion depth mismatch``.
"""

from __future__ import annotations

import ast
import csv
import gc
import io
import os
import signal
import sqlite3
import stat
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from _grading import (CTRL_C_WAIT, GOOD_SLOPES, GOOD_T5, batch_with_stallers, notebook, sandbox_processes, stopped_at_once,
                      wide)
from course_pe.coursework import _cells
from course_pe.coursework import grade as grade_module
from course_pe.coursework.grade import answer_cells, grade_cells, main
from course_pe.coursework.gradebook import Gradebook, _csv_text
from course_pe.coursework.sandbox import containment

FULL = containment().level == "full"
needs_full_isolation = pytest.mark.skipif(not FULL, reason="needs root and namespaces")


def grade(*cells: str, exercises: tuple[str, ...] = ("t5_bucket", "alibi_slopes"), **options):
    return grade_cells(list(cells), "relative", exercises=list(exercises), **options)


# ----------------------------------------------------------------------------- ast.parse and threads


class _Overlap:
    """A stand-in for ``ast.parse`` that records how many threads are inside it at once (it sleeps inside, so that
    two unserialised callers always overlap)."""

    def __init__(self) -> None:
        self.real = ast.parse
        self.inside = 0
        self.most = 0
        self.calls = 0
        self.guard = threading.Lock()

    def __call__(self, *args, **kwargs):
        with self.guard:
            self.inside += 1
            self.calls += 1
            self.most = max(self.most, self.inside)
        try:
            time.sleep(0.002)
            return self.real(*args, **kwargs)
        finally:
            with self.guard:
                self.inside -= 1


def test_parsing_in_the_grader_is_serialised_across_threads(monkeypatch):
    """make grade grades in threads (JOBS=2); CPython 3.11's ast.parse is not thread-safe. Every parse of the
    grader's process goes through one lock: four threads selecting cells never parse at the same time."""
    overlap = _Overlap()
    monkeypatch.setattr(ast, "parse", overlap)
    cells = ["import math\nBASE = 2", "%time x = 1\n!ls\ndef t5_bucket(r):\n    return r + BASE", GOOD_SLOPES,
             "def helper(n):\n    return n"] * 5
    errors = []

    def work():
        try:
            for _ in range(5):
                assert answer_cells(cells, ["t5_bucket", "alibi_slopes"])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert overlap.calls > 20 and overlap.most == 1, (overlap.calls, overlap.most)


def test_parse_survives_threads_and_a_busy_garbage_collector():
    """The failure of test_assignments under make grade, reproduced: three threads parsing while the garbage
    collector runs Python finalizers. Plain ast.parse fails here within seconds on CPython 3.11.7 ("AST constructor
    recursion depth mismatch", 49 times in 8 s when this test was written); the grader's parse never does."""
    source = "\n".join(f"def f{i}(x):\n    return [x + {i} for _ in range(3)] if x else {{'a': (x, {i})}}"
                       for i in range(300))

    class Cyclic:
        def __init__(self) -> None:
            self.me = self

        def __del__(self) -> None:
            sum(range(50))

    errors: list[str] = []
    stop = time.monotonic() + 3.0

    def work():
        while time.monotonic() < stop:
            for _ in range(20):
                Cyclic()
            try:
                _cells.parse(source)
            except SystemError as exc:
                errors.append(str(exc))

    thresholds, interval = gc.get_threshold(), sys.getswitchinterval()
    gc.set_threshold(50, 5, 5)
    sys.setswitchinterval(1e-5)
    try:
        threads = [threading.Thread(target=work) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        gc.set_threshold(*thresholds)
        sys.setswitchinterval(interval)
    assert errors == []


def test_a_folder_graded_in_threads_analyses_cells_in_the_sandboxes_only(tmp_path, monkeypatch):
    """H1: which cells run is decided inside each submission's sandbox; the grader's threads never analyse (or parse)
    a submission's cells."""
    def forbidden(*args, **kwargs):
        raise AssertionError("the grader analysed a submission's cells in its own process")

    monkeypatch.setattr(_cells, "select_cells", forbidden)
    overlap = _Overlap()
    monkeypatch.setattr(ast, "parse", overlap)
    folder = tmp_path / "relative"
    folder.mkdir()
    for k in range(6):
        notebook(folder, f"s{k}", "import math\nHALF = 1", "HALF += 1\n" + GOOD_T5, "%%time\n" + GOOD_SLOPES)
    result = grade_module.grade_folder(folder, out=tmp_path / "grades", jobs=2, progress=False)
    assert sorted(r.score for r in result.reports) == [2.0] * 6, [r.text() for r in result.reports]
    assert overlap.most <= 1
    assert sandbox_processes() == []


# ----------------------------------------------------------------------------- H1, H3, I6: bounded analysis


def _bang_cell(lines: int = 2000) -> str:
    return "\n".join(["!ls"] * lines) + "\n)"


def test_magic_heavy_cells_do_not_stall_grading():
    """H1/I6: 12 cells of 2,000 `!ls` lines and a syntax error (IPython's transformer took 32 s for each, in the
    grader, outside every time limit). Now the cells are rewritten in one pass, in the sandbox: the honest answers
    beside them are graded within the submission's time limit."""
    started = time.monotonic()
    report = grade(*[_bang_cell()] * 12, GOOD_T5, GOOD_SLOPES, timeout=60)
    seconds = time.monotonic() - started
    assert report.score == 2, report.text()
    assert seconds < 60, seconds  # was 12 x 32 s = 6 min in the grader
    assert sandbox_processes() == []


def test_selection_is_linear_and_capped():
    """H3: 16,000 cells defining the same function (17 s, quadratic, and all of them sent to the sandbox). Now each
    function brings its last few definitions, the selection holds at most 40 cells, and says when it was cut."""
    def calls(n: int) -> tuple[list[int], int]:
        """The selection for n definitions, and how many calls of _cells' own functions it took: a count of work
        that does not depend on the machine or its load (a wall-clock limit would)."""
        cells = ["def t5_bucket(r, b=True, n=32, m=128):\n    return q\n"] * n + ["q = 1"]
        count = 0

        def profile(frame, event, arg):
            nonlocal count
            if event == "call" and frame.f_code.co_filename == _cells.__file__:
                count += 1

        sys.setprofile(profile)
        try:
            selected = answer_cells(cells, ["t5_bucket"])
        finally:
            sys.setprofile(None)
        return selected, count

    selected, large = calls(16_000)
    assert selected == [15_996, 15_997, 15_998, 15_999, 16_000], selected[:10]
    _, small = calls(4_000)
    # linear: four times the cells, about four times the work (quadratic would be sixteen)
    assert large <= 5 * small, (small, large)
    helpers = [f"H{k} = {k}" for k in range(100)]
    uses = "def t5_bucket(r):\n    return " + " + ".join(f"H{k}" for k in range(100))
    selection = _cells.select_cells(helpers + [uses], ["t5_bucket"])
    assert len(selection.cells) == _cells.MAX_ANSWER_CELLS and selection.truncated
    assert selection.cells[-1] == 100  # the function's cell first


# ----------------------------------------------------------------------------- H2: Ctrl-C, twice


def test_ctrl_c_twice_still_writes_the_exports(tmp_path):
    """H2: a second Ctrl-C during the shutdown raised inside ThreadPoolExecutor.shutdown: no exports, no summary."""
    with batch_with_stallers(tmp_path) as (process, out):
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=CTRL_C_WAIT)
        seconds = time.monotonic() - started
    stopped_at_once(process.returncode, seconds, out, process, tmp_path, stderr)
    assert "Traceback" not in stderr, stderr
    assert (out / "grades_long.csv").exists()


# ----------------------------------------------------------------------------- D1-D5: honest notebooks


D_NOTEBOOKS = {
    "D1 %%time": (["%%time\n" + GOOD_T5, "%%capture out\n" + GOOD_SLOPES], [0, 1]),
    "D2 a constant adjusted later": (["import math\nHALF = 1", "x = 3", "HALF += 1",
                                      GOOD_T5.replace("num_buckets //= 2", "num_buckets //= HALF")], [0, 2, 3]),
    "D3 a helper named like a builtin": (["def pow(n):\n    return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]",
                                          "def alibi_slopes(n):\n    c = 2 ** math.floor(math.log2(n))\n"
                                          "    return pow(c) + (pow(2 * c)[0::2][: n - c] if c != n else [])"],
                                         [0, 1]),
    "D4 a star import": (["from math import *", "x = 1",
                          "def alibi_slopes(n):\n    c = 2 ** floor(log2(n))\n"
                          "    s = lambda m: [2.0 ** (-8.0 * (h + 1) / m) for h in range(m)]\n"
                          "    return s(c) + (s(2 * c)[0::2][: n - c] if c != n else [])"], [0, 2]),
    "D5 a global set in a set-up function": (["def setup():\n    global BASE\n    BASE = 2\nsetup()",
                                              "def alibi_slopes(n):\n    c = BASE ** math.floor(math.log2(n))\n"
                                              "    s = lambda m: [2.0 ** (-8.0 * (h + 1) / m) for h in range(m)]\n"
                                              "    return s(c) + (s(2 * c)[0::2][: n - c] if c != n else [])"],
                                             [0, 1]),
}


@pytest.mark.parametrize("case", sorted(D_NOTEBOOKS))
def test_honest_notebooks_select_the_cells_they_need(case):
    """D1-D5: each of these notebooks is correct in the student's kernel; each was graded 0 ("no code cell defines",
    NameError) because a cell it needs was not selected."""
    cells, expected = D_NOTEBOOKS[case]
    functions = ["t5_bucket", "alibi_slopes"]
    assert answer_cells(cells, functions) == expected


def test_honest_notebooks_get_full_marks():
    """D1-D5 end to end: the same notebooks, graded in the sandbox, pass."""
    assert "num_buckets //= 2" in GOOD_T5  # the D2 notebook's premise
    for case, (cells, _) in D_NOTEBOOKS.items():
        graded = [e for e in ("t5_bucket", "alibi_slopes") if any(f"def {e}" in c for c in cells)]
        report = grade(*cells, exercises=tuple(graded))
        assert report.score == len(graded) and not report.cell_errors, (case, report.text())


def test_a_name_no_cell_defines_is_explained():
    """A NameError that the selection foresaw says why: no cell defines the name at its top level."""
    report = grade("def alibi_slopes(n):\n    return [BASE] * n", exercises=("alibi_slopes",))
    assert report.score == 0
    assert "no code cell defines `BASE` at its top level" in report.exercises[0].message, report.text()


# ----------------------------------------------------------------------------- A4: copies of the rotation


ROTATION_VIA_COPY = {
    "_reference_rotation": "cpe.rope._reference_rotation(x, *cpe.rope_cos_sin(positions, inv_freq, dtype=x.dtype))",
    "_one_pass_interleaved": "__import__('course_pe.benchmark').benchmark._one_pass_interleaved("
                             "x, *cpe.rope_cos_sin(positions, inv_freq, dtype=x.dtype))",
}


@pytest.mark.parametrize("helper", sorted(ROTATION_VIA_COPY))
def test_no_copy_of_the_rotation_is_left_in_the_grading_build(helper):
    """A4: the interleaved rotation, computed by a private copy of it in the library, passed 7/7."""
    answer = ("def rope_rotation(x, positions):\n    d = x.shape[-1]\n"
              "    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)\n"
              f"    return {ROTATION_VIA_COPY[helper]}\n")
    report = grade_cells([answer], "rope_implementation", exercises=["rope_rotation"])
    assert report.score == 0, report.text()
    assert helper in report.exercises[0].message and "not available" in report.exercises[0].message, report.text()


# ----------------------------------------------------------------------------- G5, F13: the gradebook


def test_a_grades_folder_others_can_write_is_refused(tmp_path):
    """G5: a grades folder (or database) that another user can write is refused before anything is recorded; one
    that others may only read is made private."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(ValueError, match="can be written by other users"):
        Gradebook(shared).graded("relative")
    own = tmp_path / "own"
    own.mkdir(mode=0o755)
    os.chmod(own, 0o755)
    Gradebook(own).graded("relative")
    assert stat.S_IMODE(os.stat(own).st_mode) == 0o700
    planted = tmp_path / "planted"
    planted.mkdir(mode=0o700)
    (planted / "gradebook.sqlite").touch()
    os.chmod(planted / "gradebook.sqlite", 0o666)
    with pytest.raises(ValueError, match="not a private file"):
        Gradebook(planted).graded("relative")
    open_above = tmp_path / "open"
    open_above.mkdir()
    os.chmod(open_above, 0o777)
    with pytest.raises(ValueError, match="every user can write"):
        Gradebook(open_above / "grades").graded("relative")


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_a_grades_folder_of_another_user_is_refused(tmp_path, capsys):
    """G5 as the red team ran it: uid 4242 owns the folder and a database with a forged row."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    with sqlite3.connect(shared / "gradebook.sqlite") as db:
        db.execute("CREATE TABLE t (x)")
    os.chown(shared, 4242, 4242)
    os.chown(shared / "gradebook.sqlite", 4242, 4242)
    folder = tmp_path / "relative"
    folder.mkdir()
    notebook(folder, "ada", GOOD_T5, GOOD_SLOPES)
    assert main(["--dir", str(folder), "--out", str(shared), "--jobs", "1"]) == 2
    assert "belongs to user id 4242" in capsys.readouterr().err
    assert not (shared / "grades_wide.csv").exists()
    os.chown(shared, 0, 0)  # the folder is the grader's, the database still another user's
    assert main(["--dir", str(folder), "--out", str(shared), "--jobs", "1"]) == 2
    assert "not a private file" in capsys.readouterr().err


def test_names_that_differ_in_case_are_one_student(tmp_path, capsys):
    """F13: `--student BOB` beside `bob` made a second LMS row and bypassed the REPLACE guard."""
    folder = tmp_path / "relative"
    folder.mkdir()
    path = notebook(folder, "sub", GOOD_T5, GOOD_SLOPES)
    out = tmp_path / "grades"
    assert main([str(path), "--student", "bob", "--assignment", "relative", "--out", str(out)]) == 0
    assert main([str(path), "--student", "BOB", "--assignment", "relative", "--out", str(out)]) == 2
    assert "already has a grade" in capsys.readouterr().err
    assert main([str(path), "--student", "BOB", "--assignment", "relative", "--out", str(out), "--replace"]) == 0
    assert list(wide(out)) == ["BOB"]
    assert sorted(p.name for p in (out / "relative").iterdir()) == ["BOB.json"]
    batch = tmp_path / "batch" / "relative"
    batch.mkdir(parents=True)
    notebook(batch, "bob", GOOD_T5, GOOD_SLOPES)
    assert main(["--dir", str(batch), "--out", str(out), "--jobs", "1"]) == 2  # a folder's bob is BOB too
    assert "already have grades" in capsys.readouterr().err


# ----------------------------------------------------------------------------- I4, I7: nbgrader


XSS = '<img src=x onerror="alert(document.cookie)"><script>alert(3)</script> and [a](javascript:alert(1))'


def test_written_answers_render_inert_in_the_formgrader():
    """I4: a markdown answer holding HTML reached the Formgrader live. After autograde's SanitizeWrittenAnswers it is
    shown as text; an ordinary answer (markdown, math, a link) is left exactly as it was."""
    from nbconvert.exporters import HTMLExporter

    from course_pe.coursework.nbgrader_autograde import SanitizeWrittenAnswers, html_is_inert

    meta = {"nbgrader": {"solution": True, "grade": True, "locked": False, "grade_id": "q-answer", "points": 1}}
    honest = "The table has $2K + 1$ rows, see [the paper](https://arxiv.org/abs/1803.02155).<br>**Done.**"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(XSS, metadata=meta),
                                         nbformat.v4.new_markdown_cell(honest, metadata=meta),
                                         nbformat.v4.new_raw_cell("<script>alert(4)</script>")])
    exporter = HTMLExporter()
    assert html_is_inert(exporter.markdown2html({"cell": nb.cells[0]}, XSS))  # the attack renders live
    nb, _ = SanitizeWrittenAnswers().preprocess(nb, {})
    for cell in nb.cells[:2]:
        rendered = exporter.markdown2html({"cell": cell}, cell.source)
        assert html_is_inert(rendered) == [], rendered
    assert "alert(document.cookie)" in nb.cells[0].source  # still shown to the instructor, as text
    assert nb.cells[1].source == honest
    assert "<script>" not in nb.cells[2].source
    from course_pe.coursework.nbgrader_release import config_source

    assert "SanitizeWrittenAnswers" in config_source()


def test_nbgrader_limits_given_on_the_command_line_are_numbers():
    """I7: `nbgrader autograde --SandboxedExecute.timeout=30` gave the string '30', and every submission failed."""
    from traitlets import TraitError
    from traitlets.config.loader import KVArgParseConfigLoader

    from course_pe.coursework.nbgrader_autograde import SandboxedExecute

    config = KVArgParseConfigLoader(["--SandboxedExecute.timeout=30", "--SandboxedExecute.cell_timeout=7.5"],
                                    classes=[SandboxedExecute]).load_config()
    pre = SandboxedExecute(config=config)
    assert pre.timeout == 30.0 and pre.cell_timeout == 7.5
    wrong = KVArgParseConfigLoader(["--SandboxedExecute.timeout=soon"], classes=[SandboxedExecute])
    with pytest.raises(TraitError):
        SandboxedExecute(config=wrong.load_config())


# ----------------------------------------------------------------------------- notes C1, F10


def test_a_small_difference_is_printed_with_enough_digits():
    """C1: "expected 2, got 2 (difference 1e-06 ...)". (Off by just more than the exercise's tolerance, 1e-4.)"""
    report = grade_cells(["def extrapolation_gap(loss_by_position, train_length):\n"
                          "    return float(loss_by_position[train_length:].nanmean() - "
                          "loss_by_position[:train_length].nanmean()) + 1.01e-4\n"], "extrapolation",
                         exercises=["extrapolation_gap"])
    message = report.exercises[0].message
    assert report.score == 0 and "value" in message, report.text()
    expected, got = message.split("expected ")[1].split(", got ")[:2]
    assert expected.split()[0].rstrip(",") != got.split()[0].rstrip(","), message


def test_a_leading_tab_or_carriage_return_cannot_start_a_formula():
    """F10: OWASP lists a leading tab and carriage return beside = + - @."""
    text = _csv_text([["\t=HYPERLINK(\"x\")", "\r=1+1", "=2", "ok"]])
    row = next(csv.reader(io.StringIO(text, newline="")))
    assert [cell[:1] for cell in row] == ["'", "'", "'", "o"], row
