"""Coursework in Chinese (issue 36): the Chinese workbook is the English workbook with Chinese prose, and a Chinese
submission is graded end to end by the same grader.

* every notebook of `make workbook-zh` has the code cells (stubs, check cells, set-up), the exercise ids and the
  cell structure of the English workbook (`make workbook`), and Chinese prose with a Chinese answer placeholder;
* a Chinese workbook notebook filled with the book's solutions gets full marks, one with a typical mistake loses the
  exercise, an untouched one gets 0 (`python -m course_pe.coursework.grade --dir`, what `make grade DIR=` runs);
* the Chinese student edition's sources keep no solution and no answer placeholder (make book-student-zh builds and
  checks the site; .ci/run runs it).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import nbformat
import pytest

from _grading import book_solutions, typical_mistake
from course_pe.coursework.exercises import chapters, exercises_for_chapter
from course_pe.coursework.grade import main
from course_pe.coursework.workbook import ANSWER_PLACEHOLDER, make_student_notebook

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import zh_edition as zh  # noqa: E402
from test_assignments import filled  # noqa: E402

CHAPTER = "relative"  # two coding exercises, Java cells, training cells: a demanding chapter to grade


@pytest.fixture(scope="module")
def workbook(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("workbook-zh")
    zh.write_workbook(out, src=tmp_path_factory.mktemp("zh-src") / "src")
    return out


def _without_figure_texts(cell) -> dict:
    metadata = copy.deepcopy(dict(cell.metadata))
    for (group, key), _ in zh.figure_texts(cell):
        metadata["mystnb"][group][key] = None
    return metadata


def _english(doc: str) -> nbformat.NotebookNode:
    return make_student_notebook(nbformat.read(zh.doc_path(doc), as_version=4))


def test_the_chinese_workbook_is_the_english_workbook_with_chinese_prose(workbook):
    placeholder = f"**{zh.label(zh.site_labels(), 'workbook', 'Your answer here.')}**"
    assert zh.CJK.search(placeholder), "site.po: translate the workbook's answer placeholder"
    notebooks = [d for d in zh.toc_docs() if zh.doc_path(d).suffix == ".ipynb"]
    placeholders = 0
    for doc in notebooks:
        chinese = nbformat.read(workbook / f"{doc}.ipynb", as_version=4)
        english = _english(doc)
        assert [c.cell_type for c in chinese.cells] == [c.cell_type for c in english.cells], doc
        for cn, en in zip(chinese.cells, english.cells):
            if en.cell_type == "code":
                assert cn.source == en.source and cn.outputs == [], doc
                # the same metadata, but for a figure's caption and text alternative, which are in Chinese
                assert _without_figure_texts(cn) == _without_figure_texts(en), doc
        assert chinese.metadata["course_pe"] == english.metadata["course_pe"], doc
        prose = "\n".join(c.source for c in chinese.cells if c.cell_type == "markdown")
        assert ANSWER_PLACEHOLDER not in prose, doc
        placeholders += prose.count(placeholder)
        title = next(line for line in prose.splitlines() if line.startswith("# "))
        assert zh.CJK.search(title), f"{doc}: the title is not Chinese: {title!r}"
    assert placeholders > 0


def test_a_chinese_submission_is_graded_end_to_end(workbook, tmp_path, capsys):
    assert CHAPTER in chapters()
    ids = exercises_for_chapter(CHAPTER)
    doc = next(d for d in zh.toc_docs() if d.endswith("/" + CHAPTER))
    student = nbformat.read(workbook / f"{doc}.ipynb", as_version=4)
    solutions = book_solutions(zh.doc_path(doc))
    wrong = dict(solutions)
    wrong[ids[0]] = typical_mistake(solutions[ids[0]], ids[0])
    folder = tmp_path / "submissions" / CHAPTER
    folder.mkdir(parents=True)
    nbformat.write(filled(student, solutions), folder / "correct.ipynb")
    nbformat.write(filled(student, wrong), folder / "wrong.ipynb")
    nbformat.write(student, folder / "untouched.ipynb")
    out = tmp_path / "grades"
    assert main(["--dir", str(folder), "--out", str(out), "--jobs", "1"]) == 0, capsys.readouterr().err
    reports = {name: json.loads((out / CHAPTER / f"{name}.json").read_text()) for name in ("correct", "wrong", "untouched")}
    n = len(ids)
    assert [reports[k]["score"] for k in ("correct", "wrong", "untouched")] == [n, n - 1, 0], reports
    assert reports["correct"]["cell_errors"] == [] and reports["correct"]["problems"] == []


def test_the_chinese_student_sources_hold_no_solution_and_no_placeholder(tmp_path):
    out = tmp_path / "student_zh_src"
    zh.write_student_sources(out)
    config = (out / "_config.yml").read_text(encoding="utf-8")
    assert "（学生版）" in config or zh.label(zh.site_labels(), "config", "(student edition)") in config
    assert "edition_switch_button: false" in config
    for doc in zh.toc_docs():
        path = zh.doc_path(doc, out)
        if path.suffix != ".ipynb":
            continue
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            assert "solution" not in cell.metadata.get("tags", []), doc
            if cell.cell_type == "markdown":
                assert "{solution" not in cell.source and ANSWER_PLACEHOLDER not in cell.source, doc
