"""Every assignment graded end to end, as an instructor grades it.

For each chapter with coding exercises, the student notebook is made from the book (``make workbook``'s
transformation: every cell of the chapter is there, its demonstrations, training and Java cells included), then
filled three ways: with the book's solutions (full marks), with a typical mistake in the chapter's first exercise
(less than full: 1 of 2 where the chapter has two exercises, 0 of 1 where it has one), and not at all (0). The folder
is graded by ``python -m course_pe.coursework.grade --dir`` (what ``make grade DIR=`` runs). No answer cell of a
correct or untouched notebook may report an error (student problem 10, newcomer F3), and the scalar answer of
``extrapolation_gap`` must pass (red-team attack 19). The same three kinds of submission through nbgrader are in
``test_nbgrader_release.py``.
"""

from __future__ import annotations

import copy
import csv
import json
import sys
from pathlib import Path

import nbformat
import pytest

from _grading import book_solutions, typical_mistake
from course_pe.coursework.exercises import EXERCISES, chapters, exercises_for_chapter
from course_pe.coursework.grade import main
from course_pe.coursework.workbook import make_student_notebook

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from book_tools import toc_notebooks  # noqa: E402

CHAPTER_PATHS = {path.stem: path for path in toc_notebooks()}


def filled(student: nbformat.NotebookNode, answers: dict[str, str]) -> nbformat.NotebookNode:
    """The student notebook with each stub cell replaced by the answer for the exercise it defines."""
    nb = copy.deepcopy(student)
    left = dict(answers)
    for cell in nb.cells:
        if cell.cell_type == "code" and "student" in cell.metadata.get("tags", []):
            for exercise_id in list(left):
                if f"def {EXERCISES[exercise_id].function}(" in cell.source:
                    cell.source = left.pop(exercise_id)
    assert not left, f"no stub found for {sorted(left)}"
    return nb


def test_every_assignment_through_make_grade(tmp_path, capsys):
    assert set(chapters()) <= set(CHAPTER_PATHS)
    out = tmp_path / "grades"
    for chapter in chapters():
        path = CHAPTER_PATHS[chapter]
        ids = exercises_for_chapter(chapter)
        student = make_student_notebook(nbformat.read(path, as_version=4))
        solutions = book_solutions(path)
        wrong = dict(solutions)
        wrong[ids[0]] = typical_mistake(solutions[ids[0]], ids[0])
        folder = tmp_path / "submissions" / chapter
        folder.mkdir(parents=True)
        nbformat.write(filled(student, solutions), folder / "correct.ipynb")
        nbformat.write(filled(student, wrong), folder / "wrong.ipynb")
        nbformat.write(student, folder / "untouched.ipynb")
        assert main(["--dir", str(folder), "--out", str(out), "--jobs", "2"]) == 0, capsys.readouterr().err
        reports = {name: json.loads((out / chapter / f"{name}.json").read_text())
                   for name in ("correct", "wrong", "untouched")}
        n = len(ids)
        assert [reports[k]["score"] for k in ("correct", "wrong", "untouched")] == [n, n - 1, 0], (chapter, reports)
        assert reports["correct"]["cell_errors"] == [] and reports["untouched"]["cell_errors"] == [], chapter
        assert reports["correct"]["problems"] == [], (chapter, reports["correct"]["problems"])
        first = reports["wrong"]["exercises"][0]
        assert first["status"] == "failed" and "diagnosis:" in first["message"], (chapter, first)
        assert all(e["hidden_cases"] >= 3 for e in reports["correct"]["exercises"])
        assert all("stub" in e["message"] for e in reports["untouched"]["exercises"])
        capsys.readouterr()
    with (out / "grades_long.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 3 * len(EXERCISES)
    assert {r["exercise"] for r in rows if r["student"] == "correct" and r["status"] == "passed"} == set(EXERCISES)


def _compiles_java(path: Path) -> bool:
    """Whether a code cell of the notebook runs the Java compiler (``javac``)."""
    return any(c.cell_type == "code" and "javac" in c.source for c in nbformat.read(path, as_version=4).cells)


JAVA_CHAPTERS = sorted(name for name, path in CHAPTER_PATHS.items() if _compiles_java(path))


def test_only_rope_implementation_compiles_java():
    """README, the Makefile's JDK advice and .ci/run name one notebook that needs a JDK; keep them true. (relative's
    E000-11 cell reads source 000's class without a JDK since issue 37b.) A chapter that starts compiling Java fails
    here until those texts and this list name it; the next test then checks its Java cells too."""
    assert JAVA_CHAPTERS == ["rope_implementation"]


@pytest.mark.parametrize("chapter", JAVA_CHAPTERS)
def test_the_chapters_java_cells_never_run(chapter):
    """Every chapter whose Java cells gave every student a false cell error: those cells are not answer cells."""
    from course_pe.coursework.grade import answer_cells

    nb = make_student_notebook(nbformat.read(CHAPTER_PATHS[chapter], as_version=4))
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    java = [i for i, s in enumerate(sources) if "javac" in s]
    assert java, "the chapter has no Java cell any more: this test has nothing to show"
    selected = answer_cells(sources, [EXERCISES[e].function for e in exercises_for_chapter(chapter)])
    assert selected and not set(selected) & set(java)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert all("student" in code_cells[i].metadata.get("tags", []) for i in selected)  # exactly the stubs
