"""Every exercise marked by hand has a rubric, and every rubric belongs to an exercise of the book."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
import yaml

from course_pe.coursework.exercises import EXERCISES
from course_pe.coursework.nbgrader_release import chapter_exercises
from course_pe.coursework.rubrics import CHAPTERS, RUBRICS, Criterion, Rubric, rubric_text, rubrics_for_chapter

ROOT = Path(__file__).resolve().parent.parent


def _toc_chapters() -> list[Path]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [ROOT / f"{c['file']}.ipynb" for part in toc["parts"] for c in part["chapters"]
            if (ROOT / f"{c['file']}.ipynb").exists()]


@pytest.fixture(scope="module")
def book_exercises() -> dict[str, list]:
    return {path.stem: chapter_exercises(nbformat.read(path, as_version=4)) for path in _toc_chapters()}


def test_the_chapters_with_exercises_are_the_books_in_its_order(book_exercises):
    assert list(CHAPTERS) == [c for c, found in book_exercises.items() if found]


def test_every_exercise_marked_by_hand_has_a_rubric_and_every_rubric_an_exercise(book_exercises):
    by_hand = {e.label: chapter for chapter, found in book_exercises.items() for e in found if not e.is_coding}
    assert {label: RUBRICS[label].chapter for label in RUBRICS} == by_hand
    coding = {e.label for found in book_exercises.values() for e in found if e.is_coding}
    assert not coding & set(RUBRICS)  # a coding exercise is graded automatically, not by rubric
    assert {EXERCISES[e].chapter for found in book_exercises.values() for x in found for e in x.exercise_ids} <= set(CHAPTERS)


def test_rubrics_follow_the_books_order_and_have_points(book_exercises):
    for chapter in CHAPTERS:
        labels = [e.label for e in book_exercises[chapter] if not e.is_coding]
        assert [r.label for r in rubrics_for_chapter(chapter)] == labels
    for rubric in RUBRICS.values():
        assert 2 <= rubric.points <= 5 and all(c.text.endswith((".", ")")) for c in rubric.criteria), rubric.label


def test_rubric_text_and_bad_rubrics():
    text = rubric_text(RUBRICS["ex-relative-shaw-count"])
    assert text.startswith("**Marking (4 points, written)**") and "- 1 pt: 2N - 1 offsets occur" in text
    with pytest.raises(ValueError):
        Criterion(0, "nothing")
    with pytest.raises(ValueError):
        Rubric("x", "nowhere", "written", (Criterion(1, "a."),))
    with pytest.raises(ValueError):
        Rubric("x", "relative", "essay", (Criterion(1, "a."),))
    with pytest.raises(TypeError):
        rubric_text("ex-relative-shaw-count")


def test_the_guides_schedule_assigns_every_chapter_with_exercises():
    """The instructor guide's two-week schedule gives every chapter with exercises its graded work: the coding
    assignment of each chapter with coding exercises, and the written assignment of each chapter with rubrics."""
    from course_pe.coursework.exercises import chapters

    guide = (ROOT / "book" / "reference" / "instructor_guide.md").read_text(encoding="utf-8")
    schedule = guide[guide.index("## A two-week module"):guide.index("## Making the student version")]
    rows = [line for line in schedule.splitlines() if line.startswith("| ") and line[2:3].isdigit()]
    assert len(rows) == 10
    coding: set[str] = set()
    written: set[str] = set()
    for row in rows:
        for part in row.split(" | ")[3].split("; "):
            kind, _, names = part.partition(": ")
            found = {n.strip("` ") for n in names.split(" (")[0].split(", ")}
            if kind == "coding":
                coding |= found
            elif kind == "written":
                written |= found
    assert coding == set(chapters())
    assert written == {c for c in CHAPTERS if rubrics_for_chapter(c)}
    assert set(CHAPTERS) == coding | written
