"""The grader scores perfect, empty, partly right, crashing and hanging submissions correctly."""

import csv
import json

import nbformat
import pytest

from course_pe.grade import grade_notebook, main

GOOD_TABLE = """
import numpy as np
def sinusoidal_table(n, d):
    p = np.arange(n)[:, None]
    w = 10000.0 ** (-np.arange(0, d, 2) / d)
    t = np.zeros((n, d))
    t[:, 0::2], t[:, 1::2] = np.sin(p * w), np.cos(p * w)
    return t
"""
GOOD_SLOPES = """
import math
def alibi_slopes(n):
    def pow2(m):
        return [2.0 ** (-8.0 * (h + 1) / m) for h in range(m)]
    c = 2 ** math.floor(math.log2(n))
    return pow2(c) + (pow2(2 * c)[0::2][: n - c] if c != n else [])
"""
NAIVE_SLOPES = "def alibi_slopes(n):\n    return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]\n"
HANGING_SLOPES = "def alibi_slopes(n):\n    while True:\n        pass\n"
STUBS = ("def sinusoidal_table(n, d):\n    raise NotImplementedError\n\n"
         "def alibi_slopes(n):\n    raise NotImplementedError\n")


def submission(tmp_path, name, *sources):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["course_pe"] = {"exercises": ["sinusoidal_table", "alibi_slopes"]}
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def scores(report):
    return {e.exercise: (e.score, e.status) for e in report.exercises}


def test_perfect(tmp_path):
    report = grade_notebook(submission(tmp_path, "perfect", GOOD_TABLE, GOOD_SLOPES), cell_timeout=30)
    assert report.score == 2 and report.max_score == 2 and not report.cell_errors


def test_empty_stubs(tmp_path):
    report = grade_notebook(submission(tmp_path, "empty", STUBS), cell_timeout=30)
    assert report.score == 0
    assert all(e.status == "failed" and "stub" in e.message for e in report.exercises)


def test_crash_and_deleted_cell(tmp_path):
    report = grade_notebook(submission(tmp_path, "crash", "1 / 0", GOOD_TABLE), cell_timeout=30)
    assert scores(report)["sinusoidal_table"] == (1.0, "passed")
    assert scores(report)["alibi_slopes"] == (0.0, "failed")
    assert "no function named `alibi_slopes`" in report.exercises[1].message
    assert any("ZeroDivisionError" in e for e in report.cell_errors)


def test_infinite_loops_are_interrupted(tmp_path):
    path = submission(tmp_path, "loop", "while True:\n    pass", GOOD_TABLE, HANGING_SLOPES)
    report = grade_notebook(path, cell_timeout=4, timeout=120)
    assert scores(report)["sinusoidal_table"] == (1.0, "passed")  # the loop cell was interrupted, grading went on
    assert scores(report)["alibi_slopes"][0] == 0.0
    assert report.seconds < 60


def test_partly_right_via_cli_and_not_a_notebook(tmp_path, capsys):
    bad = tmp_path / "sinusoidal_broken.ipynb"
    bad.write_text("this is not json")
    report = grade_notebook(bad)
    assert report.score == 0 and report.problems and report.exercises  # exercises inferred from the file name
    # a partly right submission, through the command line: one exercise passes, the other fails with its mistake named
    out = tmp_path / "grades"
    assert main([str(submission(tmp_path, "partial", GOOD_TABLE, NAIVE_SLOPES)), "--student", "ada", "--out", str(out),
                 "--cell-timeout", "30"]) == 0
    assert "1 / 2" in capsys.readouterr().out
    rows = list(csv.DictReader((out / "grades.csv").open()))
    assert [(r["student"], r["exercise"], r["score"], r["status"]) for r in rows] == [
        ("ada", "sinusoidal_table", "1.0", "passed"), ("ada", "alibi_slopes", "0.0", "failed")]
    assert "powers of two" in rows[1]["message"]
    assert json.loads((out / "ada.json").read_text())["score"] == 1.0
    assert main([str(bad), "--exercises", "no_such_exercise", "--out", str(out)]) == 2
