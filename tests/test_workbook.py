"""Student notebooks: no solutions left, stubs that fail every check helpfully, exercises recorded."""

import sys
from pathlib import Path

import nbformat
import pytest

from course_pe.coursework.exercises import EXERCISES, check
from course_pe.coursework.workbook import (
    GLUE_RECORD, exercises_in, _format_glue_text, _glue_values, make_student_notebook, stub_source, _substitute_glue,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import book_tools  # noqa: E402

NOTEBOOKS = book_tools.toc_notebooks()


def test_stub_keeps_signature_and_docstring():
    stub = stub_source('def f(a, b=2):\n    """Doc."""\n    return a + b\n\nx = 3\n')
    namespace: dict = {}
    exec(stub, namespace)
    assert namespace["f"].__doc__ == "Doc." and "x" not in namespace
    with pytest.raises(NotImplementedError):
        namespace["f"](1)
    with pytest.raises(ValueError, match="at least one function"):
        stub_source("x = 1\n")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_student_version_has_no_solutions_and_no_outputs(path):
    solution = nbformat.read(path, as_version=4)
    student = make_student_notebook(solution)
    text = "\n".join(c.source for c in student.cells)
    for marker in ("{solution-start}", "{solution-end}", "{solution}"):
        assert marker not in text
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in student.cells if c.cell_type == "code")
    assert student.metadata["course_pe"]["exercises"] == exercises_in(solution)
    # the solution notebook itself is untouched
    assert any(c.get("outputs") for c in solution.cells if c.cell_type == "code")


def test_every_registered_exercise_is_in_a_chapter_and_its_stub_fails_helpfully():
    found = {}
    for path in NOTEBOOKS:
        student = make_student_notebook(nbformat.read(path, as_version=4))
        for cell in student.cells:
            if "student" in cell.metadata.get("tags", []):
                namespace: dict = {}
                exec(cell.source, namespace)
                for exercise in EXERCISES.values():
                    if exercise.function in namespace:
                        found[exercise.id] = namespace[exercise.function]
    assert set(found) == set(EXERCISES), f"exercises without a chapter: {set(EXERCISES) - set(found)}"
    for exercise_id, stub in found.items():
        report = check(exercise_id, stub)
        assert not report.passed and "stub" in str(report), str(report)


def test_solution_prose_and_demo_code_are_removed():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("```{exercise}\n:label: e1\nDo it.\n```\n\n```{solution-start} e1\n:class: dropdown\n```\n\nThe secret."),
        nbformat.v4.new_code_cell("def alibi_slopes(n):\n    return [0.5] * n", metadata={"tags": ["solution"]}),
        nbformat.v4.new_code_cell("print('worked solution demo')"),
        nbformat.v4.new_markdown_cell("```{solution-end}\n```\n\n```{exercise}\n:label: e2\nWhy?\n```\n\n```{solution} e2\n:class: dropdown\n\nBecause.\n```\nAfter."),
        nbformat.v4.new_code_cell("print(cpe.exercises.check_alibi_slopes(alibi_slopes))"),
    ])
    student = make_student_notebook(nb)
    text = "\n".join(c.source for c in student.cells)
    assert "The secret." not in text and "Because." not in text and "worked solution demo" not in text
    assert "Do it." in text and "Why?" in text and "After." in text and "check_alibi_slopes" in text
    assert student.metadata["course_pe"]["exercises"] == ["alibi_slopes"]


# ------------------------------------------------------------------ glue roles become the numbers the book shows


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_workbook_prose_has_the_books_numbers_and_no_glue_roles(path):
    solution = nbformat.read(path, as_version=4)
    student = make_student_notebook(solution)
    text = "\n".join(c.source for c in student.cells if c.cell_type == "markdown")
    assert "{glue" not in text, "JupyterLab renders no glue role: the workbook must carry the literal text"


def test_glue_formatting_matches_myst_nb():
    from myst_nb.core.variables import format_plain_text

    cases = [("0.123456", ".3f"), ("12", "d"), ("0.5", ".1%"), ("'text'", "s"), ("3.0", ""), ("7", "s"),
             ("1234567.0", ",.0f"), ("0.000123", ".2e"), ("np.float64(1.5)", "s")]
    for text, fmt in cases:
        assert _format_glue_text(text, fmt) == format_plain_text(text, fmt), (text, fmt)


def test_glue_roles_are_substituted_from_the_stored_records():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("glue('a', 0.1234)", outputs=[nbformat.v4.new_output(
            "display_data", data={GLUE_RECORD: "0.1234"},
            metadata={"scrapbook": {"name": "a", "mime_prefix": "application/papermill.record/"}})]),
        nbformat.v4.new_markdown_cell("Loss {glue:text}`a:.2f`, raw {glue:text}`a`, any {glue:}`a`."),
    ])
    student = make_student_notebook(nb)
    assert student.cells[1].source == "Loss 0.12, raw 0.1234, any 0.1234."
    assert _substitute_glue("no roles", {}) == "no roles"
    with pytest.raises(ValueError, match="no stored glue record 'b'"):
        _substitute_glue("{glue:text}`b:.2f`", {"a": "1"})
    with pytest.raises(ValueError, match="another notebook"):
        _substitute_glue("{glue:text}`other.ipynb::a`", {"a": "1"})


def test_a_known_sentence_reads_with_its_number():
    path = next(p for p in NOTEBOOKS if p.name == "context_extension.ipynb")
    solution = nbformat.read(path, as_version=4)
    values = _glue_values(solution)
    student = make_student_notebook(solution, source=path)
    student_text = "\n".join(c.source for c in student.cells if c.cell_type == "markdown")
    assert len(values) > 20

    def other_values(document: str) -> dict[str, str]:  # a role that pastes from another chapter of Part III
        return _glue_values(nbformat.read(path.parent / document, as_version=4))

    for cell in solution.cells:
        if cell.cell_type == "markdown" and "{glue:text}" in cell.source and "{solution" not in cell.source:
            expected = _substitute_glue(cell.source, values, other_values)
            assert expected in student_text
            assert "{glue" not in expected
            break
    else:
        raise AssertionError("context_extension has no prose glue role to check")


def test_a_code_answer_gets_no_written_placeholder():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("```{exercise}\n:label: e1\nCode it.\n```\n\n```{solution-start} e1\n:class: dropdown\n```\n\nHint."),
        nbformat.v4.new_code_cell("def alibi_slopes(n):\n    return [0.5] * n", metadata={"tags": ["solution"]}),
        nbformat.v4.new_markdown_cell("```{solution-end}\n```\n\n```{exercise}\n:label: e2\nExplain.\n```\n\n"
                                      "```{solution-start} e2\n:class: dropdown\n```\n\nThe reason."),
        nbformat.v4.new_markdown_cell("```{solution-end}\n```"),
    ])
    text = "\n".join(c.source for c in make_student_notebook(nb).cells)
    assert text.count("*Your answer here.*") == 1  # for e2 only; e1 is answered in its stub cell
    assert text.index("Explain.") < text.index("*Your answer here.*")
    assert "Hint." not in text and "The reason." not in text
