"""Write an nbgrader course folder from the course's chapters and exercise registry.

    python -m course_pe.coursework.nbgrader_release book/part1/sinusoidal.ipynb ... --out nbgrader/
    make nbgrader                      # every chapter in the TOC that has coding exercises, into nbgrader/

The output is the *instructor's* side of an nbgrader course::

    nbgrader/
        nbgrader_config.py
        source/<chapter>/<chapter>.ipynb     one assignment per chapter with coding exercises
                                             (or all in one assignment with --assignment NAME)

Each source notebook holds the chapter's exercises, in the chapter's order, after a locked set-up cell:

* a coding exercise (a ``solution``-tagged cell of the chapter that defines a function of the registry
  ``course_pe.coursework.exercises.EXERCISES``) becomes an autograded-answer cell, in which each function keeps its signature and
  docstring and its body lies between ``### BEGIN SOLUTION`` and ``### END SOLUTION``, followed by a locked
  autograder-test cell worth ``--points-code`` points. Its visible tests are small examples taken from the book
  (``VISIBLE_TESTS``), which students can run before submitting. Its hidden tests (``### BEGIN HIDDEN TESTS``) are
  the course's check with the visible *and* the randomised hidden cases, drawn with a fresh secret seed
  (``course_pe.coursework.exercises.check(..., hidden=True)``), so that a failure names the failing case, the
  expected and obtained values and any recognised classic mistake. With the ``nbgrader_config.py`` written here,
  nbgrader's autograde does not run these cells in a kernel at all: :mod:`course_pe.coursework.nbgrader_autograde`
  grades the answer cells in the sandbox of ``make grade`` and writes the verdicts into the test cells;
* a written exercise becomes a manually graded markdown answer cell worth ``--points-written`` points, holding the
  book's worked solution between the solution markers (nbgrader replaces it by "YOUR ANSWER HERE" on release).

The list of coding exercises comes from the registry, through :func:`course_pe.coursework.workbook.exercises_in`, exactly as for
``make workbook`` and ``make grade``; a new registered exercise appears in all three.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .._validation import check_argv, check_float, check_int, check_notebook, check_path, check_str, check_str_sequence
from ._cells import parse
from .exercises import EXERCISES, tolerance_text
from .workbook import SOLUTION_TAG, _parse

__all__ = [
    "ChapterExercise",
    "VISIBLE_TESTS",
    "chapter_exercises",
    "config_source",
    "main",
    "make_source_notebook",
    "answer_cell_source",
    "autograder_cell_source",
    "write_course",
]

NBGRADER_SCHEMA_VERSION = 3
COURSE_ID = "positional-encoding-corrected"

_DIRECTIVE = re.compile(r"^(?P<fence>`{3,})\{(?P<name>exercise|solution|solution-start|solution-end)\}\s*(?P<arg>.*)$")
_OPTION = re.compile(r"^:(?P<key>[\w-]+):\s*(?P<value>.*)$")
_ROLE = re.compile(r"\{(?P<role>[\w:-]+)\}`(?P<body>[^`]*)`")
_CITE_ROLES = {"cite", "cite:p", "cite:t", "footcite", "footcite:p", "footcite:t"}

SETUP_SOURCE = """\
# Set-up (locked): the packages the exercises may use. Run this cell first.
import math

import numpy as np
import torch

import course_pe as cpe

cpe.set_determinism(0)
"""

# Visible tests: examples stated in the book, runnable by students before they submit. Each is the body of a test
# cell (the hidden tests come first in the cell). They use only numpy, torch and math, and give a readable message.
# They accept what the grader accepts: ``{tol}`` is replaced by the exercise's tolerance (whatever the answer's
# dtype, as its text states it), so that a float32 answer the grader passes never fails here.
VISIBLE_TESTS: dict[str, str] = {
    "sinusoidal_table": """\
# For d_model = 4 the frequencies are 1 and 0.01, so PE(p) = (sin p, cos p, sin 0.01p, cos 0.01p)
# (chapter "A worked example"); PE(0) alternates 0 and 1. Entries are compared to within {tol}, whatever the dtype.
_got = torch.as_tensor(np.asarray(sinusoidal_table(3, 4), dtype=np.float64))
assert tuple(_got.shape) == (3, 4), f"sinusoidal_table(3, 4) should have shape (3, 4), got {{tuple(_got.shape)}}"
for _p in range(3):
    _row = [math.sin(_p), math.cos(_p), math.sin(0.01 * _p), math.cos(0.01 * _p)]
    assert torch.allclose(_got[_p], torch.tensor(_row, dtype=torch.float64), rtol=0, atol={tol}), (
        f"row {{_p}} of sinusoidal_table(3, 4) should be {{[round(v, 4) for v in _row]}}, got {{_got[_p].tolist()}}")
""",
    "shift_matrix": """\
# M_0 is the identity, and for d_model = 2 the matrix M_1 maps (sin p, cos p) to (sin(p + 1), cos(p + 1)).
# Entries are compared to within {tol}, whatever the dtype.
_m0 = torch.as_tensor(np.asarray(shift_matrix(0, 4), dtype=np.float64))
assert torch.allclose(_m0, torch.eye(4, dtype=torch.float64), rtol=0, atol={tol}), f"shift_matrix(0, 4) should be the identity, got {{_m0.tolist()}}"
_m1 = torch.as_tensor(np.asarray(shift_matrix(1, 2), dtype=np.float64))
assert tuple(_m1.shape) == (2, 2), f"shift_matrix(1, 2) should have shape (2, 2), got {{tuple(_m1.shape)}}"
for _p in (0, 3):
    _moved = _m1 @ torch.tensor([math.sin(_p), math.cos(_p)], dtype=torch.float64)
    _want = torch.tensor([math.sin(_p + 1), math.cos(_p + 1)], dtype=torch.float64)
    assert torch.allclose(_moved, _want, rtol=0, atol={tol}), f"shift_matrix(1, 2) @ PE({{_p}}) should be PE({{_p + 1}}) = {{_want.tolist()}}, got {{_moved.tolist()}}"
""",
    "add_positional_encoding": """\
# With zero embeddings the result is the table itself, the same for every sequence of the batch;
# with embeddings of ones (d_model = 4) every entry is raised by sqrt(4) = 2. Compared to within {tol}.
_pe = torch.tensor([[math.sin(p), math.cos(p), math.sin(0.01 * p), math.cos(0.01 * p)] for p in range(3)], dtype=torch.float64)
_out = torch.as_tensor(np.asarray(add_positional_encoding(torch.zeros(2, 3, 4, dtype=torch.float64)), dtype=np.float64))
assert tuple(_out.shape) == (2, 3, 4), f"the output should keep the shape (2, 3, 4), got {{tuple(_out.shape)}}"
for _b in range(2):
    assert torch.allclose(_out[_b], _pe, rtol=0, atol={tol}), f"sequence {{_b}} of zero embeddings should receive PE[:3] = {{_pe.tolist()}}, got {{_out[_b].tolist()}}"
_out = torch.as_tensor(np.asarray(add_positional_encoding(torch.ones(1, 3, 4, dtype=torch.float64)), dtype=np.float64))
assert torch.allclose(_out[0], 2.0 + _pe, rtol=0, atol={tol}), f"embeddings of ones should give 2 + PE[:3] = {{(2.0 + _pe).tolist()}}, got {{_out[0].tolist()}}"
""",
    "rope_rotation": """\
# Position 0 leaves a vector unchanged; RoPE turns the pair (a, b) into (a cos - b sin, a sin + b cos),
# so (1, 0) at position 1 (head_dim 2, theta_0 = 1) becomes (cos 1, sin 1). Compared to within {tol}.
_x = torch.tensor([[0.5, -1.0, 2.0, 0.25]], dtype=torch.float64)
_out = torch.as_tensor(np.asarray(rope_rotation(_x.clone(), torch.tensor([0])), dtype=np.float64))
assert tuple(_out.shape) == (1, 4), f"the output should keep the shape (1, 4), got {{tuple(_out.shape)}}"
assert torch.allclose(_out, _x, rtol=0, atol={tol}), f"position 0 should leave x unchanged, got {{_out.tolist()}}"
_out = torch.as_tensor(np.asarray(rope_rotation(torch.tensor([[1.0, 0.0]], dtype=torch.float64), torch.tensor([1])), dtype=np.float64))
_want = torch.tensor([[math.cos(1.0), math.sin(1.0)]], dtype=torch.float64)
assert torch.allclose(_out, _want, rtol=0, atol={tol}), f"(1, 0) at position 1 should become {{_want.tolist()}}, got {{_out.tolist()}}"
""",
    "t5_bucket": """\
# Offsets are key - query. Bidirectional with 32 buckets: 16 per direction, of which offsets 0 ... 7 are exact;
# keys to the left (negative offsets) use the lower half, keys to the right the upper half.
_rel = torch.tensor([0, -1, -3, -7, 1, 3])
_got = torch.as_tensor(np.asarray(t5_bucket(_rel.clone(), True, 32, 128)))
assert tuple(_got.shape) == (6,), f"the output should have the shape of the input (6,), got {{tuple(_got.shape)}}"
assert _got.tolist() == [0, 1, 3, 7, 17, 19], f"buckets of offsets {{_rel.tolist()}} should be [0, 1, 3, 7, 17, 19], got {{_got.tolist()}}"
# Causal (bidirectional=False): every key to the right of the query falls into bucket 0.
_got = torch.as_tensor(np.asarray(t5_bucket(torch.tensor([0, -3, 2, 5]), False, 32, 128)))
assert _got.tolist() == [0, 3, 0, 0], f"causal buckets of offsets [0, -3, 2, 5] should be [0, 3, 0, 0], got {{_got.tolist()}}"
""",
    "alibi_slopes": """\
# For a power of two n the slopes are 2^(-8/n), 2^(-16/n), ..., 2^(-8): for 8 heads, 1/2, 1/4, ..., 1/256.
# Slopes are compared to within {tol}, whatever the dtype.
_got = [float(s) for s in alibi_slopes(8)]
_want = [2.0 ** -(h + 1) for h in range(8)]
assert len(_got) == 8 and all(abs(g - w) <= {tol} for g, w in zip(_got, _want)), f"alibi_slopes(8) should be {{_want}}, got {{_got}}"
assert len(alibi_slopes(6)) == 6, "alibi_slopes(6) should return 6 slopes"
""",
    "half_to_interleaved": """\
# Output dimension 2i is input dimension i, output 2i + 1 is input i + d/2: (0, 1, 2, 3) becomes (0, 2, 1, 3).
_got = torch.as_tensor(np.asarray(half_to_interleaved(torch.arange(4.0)), dtype=np.float64))
assert _got.tolist() == [0.0, 2.0, 1.0, 3.0], f"half_to_interleaved(tensor([0., 1., 2., 3.])) should be [0., 2., 1., 3.], got {{_got.tolist()}}"
_got = torch.as_tensor(np.asarray(half_to_interleaved(torch.zeros(2, 3, 6))))
assert tuple(_got.shape) == (2, 3, 6), f"the output should keep the shape (2, 3, 6), got {{tuple(_got.shape)}}"
""",
    "extrapolation_gap": """\
# Trained on length 2: positions 0 and 1 are inside (mean loss 1), positions 2 and 3 beyond (mean 3): the gap is 2.
_got = float(extrapolation_gap(torch.tensor([1.0, 1.0, 2.0, 4.0], dtype=torch.float64), 2))
assert abs(_got - 2.0) <= {tol}, f"extrapolation_gap([1, 1, 2, 4], 2) should be 2.0, got {{_got}}"
""",
}


@dataclass
class ChapterExercise:
    """One ``{exercise}`` of a chapter, with its worked solution as the book gives it.

    ``solution_cells`` are the chapter's ``solution``-tagged code cells inside the exercise's solution (coding
    exercises); ``exercise_ids`` the registered exercises those cells define; ``demo_code`` the other code cells of a
    worked solution (demonstrations, kept in the written model answer).
    """

    label: str
    prompt: str
    solution_text: str = ""
    solution_cells: list[str] = field(default_factory=list)
    demo_code: list[str] = field(default_factory=list)
    exercise_ids: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name in ("label", "prompt", "solution_text"):
            check_str(name, getattr(self, name))
        for name in ("solution_cells", "demo_code", "exercise_ids"):
            check_str_sequence(name, getattr(self, name))

    @property
    def is_coding(self) -> bool:
        return bool(self.exercise_ids)


def _plain_markdown(text: str) -> str:
    """MyST roles rendered readably in plain Jupyter markdown (references become code spans, citations brackets)."""

    def replace(match: re.Match[str]) -> str:
        role, body = match.group("role"), match.group("body")
        if role in _CITE_ROLES:
            return f"[{body}]"
        titled = re.match(r"^(?P<title>.+?)\s*<(?P<target>[^>]+)>$", body)
        return titled.group("title") if titled else f"`{body}`"

    return _ROLE.sub(replace, text).strip("\n")


def _registered_functions(source: str) -> list[str]:
    names = {ex.function: ex.id for ex in EXERCISES.values()}
    found = []
    for node in parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            found.append(names[node.name])
    return found


def chapter_exercises(nb: nbformat.NotebookNode) -> list[ChapterExercise]:
    """The exercises of a chapter notebook, in order, with prompts and worked solutions.

    Recognised MyST forms (those the book uses): a fenced ``{exercise}`` with a ``:label:``; its solution as a fenced
    ``{solution} label`` block, or as the material (markdown and code cells) between ``{solution-start} label`` and
    ``{solution-end}``.
    """
    check_notebook("nb", nb)
    exercises: list[ChapterExercise] = []
    by_label: dict[str, ChapterExercise] = {}
    gated: ChapterExercise | None = None  # the exercise whose solution-start region we are in

    for cell in nb.cells:
        if cell.cell_type == "code":
            if gated is None:
                continue
            if SOLUTION_TAG in cell.metadata.get("tags", []):
                gated.solution_cells.append(cell.source)
                for exercise_id in _registered_functions(cell.source):
                    if exercise_id not in gated.exercise_ids:
                        gated.exercise_ids.append(exercise_id)
            elif cell.source.strip():
                gated.demo_code.append(cell.source)
            continue
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.split("\n")
        i = 0
        while i < len(lines):
            match = _DIRECTIVE.match(lines[i])
            if not match:
                if gated is not None:
                    gated.solution_text += lines[i] + "\n"
                i += 1
                continue
            fence, name, arg = match.group("fence"), match.group("name"), match.group("arg").strip()
            body: list[str] = []
            options: dict[str, str] = {}
            i += 1
            while i < len(lines) and lines[i].strip() != fence:
                option = _OPTION.match(lines[i])
                if option and not body:
                    options[option.group("key")] = option.group("value").strip()
                else:
                    body.append(lines[i])
                i += 1
            i += 1  # the closing fence
            text = "\n".join(body).strip("\n")
            if name == "exercise":
                label = options.get("label") or f"exercise-{len(exercises) + 1}"
                exercise = ChapterExercise(label=label, prompt=_plain_markdown(text))
                exercises.append(exercise)
                by_label[label] = exercise
            elif name == "solution":
                if arg not in by_label:
                    raise ValueError(f"a solution refers to the unknown exercise {arg!r}")
                by_label[arg].solution_text += text + "\n"
            elif name == "solution-start":
                if arg not in by_label:
                    raise ValueError(f"a solution-start refers to the unknown exercise {arg!r}")
                gated = by_label[arg]
            else:  # solution-end
                gated = None
    for exercise in exercises:
        exercise.solution_text = _plain_markdown(exercise.solution_text)
    return exercises


def answer_cell_source(source: str) -> str:
    """An nbgrader answer cell from a book solution cell.

    Every top-level function keeps its decorators, signature and docstring (a docstring from the registry's description
    is added if it has none); its body goes between ``### BEGIN SOLUTION`` and ``### END SOLUTION``. Other top-level
    statements go into a solution region of their own, so that the released cell holds only the signatures.
    ``source`` must be valid Python text with some code (``ValueError`` otherwise).
    """
    tree = _parse("source", check_str("source", source))
    lines = source.split("\n")
    described = {ex.function: ex.description for ex in EXERCISES.values()}
    pieces: list[str] = []
    loose: list[str] = []
    for node in tree.body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
        segment = lines[first : node.end_lineno]
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.body[0].lineno == node.lineno:
            loose.extend(segment)  # not a function, or a one-line function: wholly solution
            continue
        has_docstring = ast.get_docstring(node, clean=False) is not None
        body_start = node.body[1].lineno if has_docstring and len(node.body) > 1 else node.body[0].lineno
        header = lines[first : (node.body[0].end_lineno if has_docstring else node.body[0].lineno - 1)]
        indent = re.match(r"\s*", lines[node.body[0].lineno - 1]).group(0)
        if not has_docstring and node.name in described:
            header.append(f'{indent}"""Exercise: {described[node.name]}."""')
        if has_docstring and len(node.body) == 1:  # only a docstring: nothing to hide
            pieces.append("\n".join(segment))
            continue
        body = lines[body_start - 1 : node.end_lineno]
        pieces.append("\n".join(header + [f"{indent}### BEGIN SOLUTION", *body, f"{indent}### END SOLUTION"]))
    if loose:
        pieces.insert(0, "\n".join(["### BEGIN SOLUTION", *loose, "### END SOLUTION"]))
    if not pieces:
        raise ValueError("source (a solution cell) must contain code")
    return "\n\n\n".join(pieces) + "\n"


def autograder_cell_source(exercise_id: str, points: float) -> str:
    """The autograder-test cell of a registered exercise: hidden course check first, then the visible examples.
    ``points`` is a finite number > 0."""
    check_str("exercise_id", exercise_id)
    points = check_float("points", points, minimum=0.0, strict_minimum=True)
    if exercise_id not in EXERCISES:
        raise ValueError(f"unknown exercise {exercise_id!r} (exercise_id); known: {', '.join(sorted(EXERCISES))}")
    name = EXERCISES[exercise_id].function
    template = VISIBLE_TESTS.get(exercise_id)
    tolerance = EXERCISES[exercise_id].tolerance
    visible = template.format(tol=tolerance_text(tolerance) if tolerance else "0") if template else (
        f"assert callable(globals().get({name!r})), 'define the function `{name}` and run its cell first'\n"
    )
    hidden = textwrap.dedent(f"""\
        ### BEGIN HIDDEN TESTS
        # The course's own check with its visible and its randomised hidden cases (a fresh secret seed at every run);
        # a failure names the case, the expected and obtained values, and the classic mistake when it recognises one.
        # With the nbgrader_config.py of `make nbgrader`, autograde does not run this cell: course_pe's sandbox grades
        # the answer cells (course_pe.coursework.nbgrader_autograde) and writes the verdict here.
        import course_pe.coursework.exercises as _course_exercises
        _report = _course_exercises.check({exercise_id!r}, globals().get({name!r}), hidden=True)
        assert _report.passed, "\\n" + str(_report)
        print(_report)
        ### END HIDDEN TESTS
        """)
    header = (f"# Tests of `{name}` ({points:g} point{'s' if points != 1 else ''}). Run this cell to check your function on "
              "the book's examples;\n# grading runs further tests.\n")
    return header + hidden + visible


def _meta(grade_id: str, *, solution: bool, grade: bool, locked: bool, points: float | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": NBGRADER_SCHEMA_VERSION,
            "solution": solution, "task": False}
    if grade:
        meta["points"] = points
    return {"nbgrader": meta}


def _title(nb: nbformat.NotebookNode, fallback: str) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.split("\n"):
                if line.startswith("# "):
                    return line[2:].strip()
    return fallback


def make_source_notebook(
    nb: nbformat.NotebookNode, chapter: str, *, points_code: float = 1, points_written: float = 1
) -> nbformat.NotebookNode | None:
    """The nbgrader source notebook (solutions included) for one chapter, or ``None`` if it has no coding exercise.

    ``chapter`` is the chapter's file stem (used in cell ids and the introduction).
    """
    check_notebook("nb", nb)
    if not check_str("chapter", chapter):
        raise ValueError("chapter must not be empty")
    points_code = check_float("points_code", points_code, minimum=0.0, strict_minimum=True)
    points_written = check_float("points_written", points_written, minimum=0.0)
    exercises = chapter_exercises(nb)
    if not any(ex.is_coding for ex in exercises):
        return None
    new_md, new_code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    title = _title(nb, chapter)
    cells = [
        new_md(
            f"# Exercises: {title}\n\n"
            f"These are the exercises of the chapter *{title}* of *Positional Encoding, Corrected*; read the chapter "
            "first. Write your code in the cells that say `YOUR CODE HERE` (keep each function's name and signature) "
            "and your written answers in the cells that say `YOUR ANSWER HERE`. Each coding exercise is followed by a "
            "locked test cell: run it to check your function against the book's examples. Grading runs further tests "
            "(the course's automatic checks) and a person grades the written answers. Before you submit, restart the "
            "kernel and run all cells.",
            metadata=_meta(f"{chapter}-intro", solution=False, grade=False, locked=True),
        ),
        new_code(SETUP_SOURCE, metadata=_meta(f"{chapter}-setup", solution=False, grade=False, locked=True)),
    ]
    for number, exercise in enumerate(exercises, start=1):
        cells.append(new_md(f"## Exercise {number}\n\n{exercise.prompt}",
                            metadata=_meta(f"{exercise.label}-prompt", solution=False, grade=False, locked=True)))
        if exercise.is_coding:
            for source in exercise.solution_cells:
                ids = _registered_functions(source)
                answer_id = f"{ids[0] if ids else exercise.label}-answer"
                cells.append(new_code(answer_cell_source(source),
                                      metadata=_meta(answer_id, solution=True, grade=False, locked=False)))
            for exercise_id in exercise.exercise_ids:
                cells.append(new_code(autograder_cell_source(exercise_id, points_code),
                                      metadata=_meta(f"{exercise_id}-tests", solution=False, grade=True, locked=True,
                                                     points=points_code)))
        elif points_written > 0:
            model = exercise.solution_text or "(no worked solution in the book)"
            for code in exercise.demo_code:
                model += f"\n\n```python\n{code.strip()}\n```"
            cells.append(new_md(f"### BEGIN SOLUTION\n{model}\n### END SOLUTION",
                                metadata=_meta(f"{exercise.label}-answer", solution=True, grade=True, locked=False,
                                               points=points_written)))
    for cell in cells:
        cell.id = cell.metadata["nbgrader"]["grade_id"]
    source = nbformat.v4.new_notebook(cells=cells)
    source.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    source.metadata["language_info"] = {"name": "python"}
    source.metadata["course_pe"] = {"chapter": chapter,
                                    "exercises": [e for ex in exercises for e in ex.exercise_ids],
                                    "version": "nbgrader"}
    nbformat.validate(source)
    return source


def config_source(course_id: str = COURSE_ID, *, cell_timeout: int = 120) -> str:
    """The ``nbgrader_config.py`` written at the root of the course folder (``course_id`` a non-empty str,
    ``cell_timeout`` an integer number of seconds >= 1)."""
    if not check_str("course_id", course_id):
        raise ValueError("course_id must not be empty")
    cell_timeout = check_int("cell_timeout", cell_timeout, minimum=1)
    return textwrap.dedent(f"""\
        # nbgrader configuration for the exercises of "Positional Encoding, Corrected"
        # (written by `make nbgrader`, i.e. python -m course_pe.coursework.nbgrader_release, only when this file is absent:
        # edit freely, a later `make nbgrader` keeps your version).
        c = get_config()  # noqa: F821 (defined by nbgrader when it reads this file)

        c.CourseDirectory.course_id = {course_id!r}
        # The gradebook, a SQLite file beside this one.
        c.CourseDirectory.db_url = "sqlite:///gradebook.db"
        # Seconds per cell when nbgrader executes a notebook (validate, autograde), like `make grade --cell-timeout`;
        # a cell that runs longer is interrupted and recorded as an error.
        c.Execute.timeout = {cell_timeout}
        c.Execute.interrupt_on_timeout = True
        # Students and assignments are created in the gradebook when first seen.
        c.Autograde.create_student = True
        c.GenerateAssignment.create_assignment = True

        # Autograde without a kernel: course_pe's sandbox (the grader of `make grade`) grades each submitted notebook's
        # answer cells in a fresh, contained process and writes the verdicts into the autograded test cells. The
        # student's code never runs in this process, never sees this folder or gradebook.db, and cannot import the
        # functions it is graded on. Remove these lines to go back to nbgrader's kernel (then read the instructor
        # guide, "Using nbgrader": one submission can change every student's grades).
        from nbconvert.preprocessors import ClearMetadataPreprocessor
        from nbgrader.preprocessors import AssignLatePenalties, CheckCellMetadata, IgnorePattern, LimitOutput, SaveAutoGrades

        from course_pe.coursework.nbgrader_autograde import SandboxedExecute, SanitizeWrittenAnswers

        # SanitizeWrittenAnswers: the Formgrader and the feedback pages render students' markdown as live HTML; a
        # written answer holding HTML or a link that could run code in your browser is shown as text instead.
        c.Autograde.autograde_preprocessors = [SandboxedExecute, SanitizeWrittenAnswers, IgnorePattern,
                                               ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,
                                               AssignLatePenalties, CheckCellMetadata]
        c.SandboxedExecute.timeout = {5 * cell_timeout}  # seconds for a whole notebook
        c.SandboxedExecute.cell_timeout = {cell_timeout}
        # c.SandboxedExecute.isolation = "limited"  # to grade without root (unsafe with hostile submissions)
        """)


def write_course(
    notebooks: list[Path],
    out: Path,
    *,
    assignment: str | None = None,
    points_code: float = 1,
    points_written: float = 1,
    course_id: str = COURSE_ID,
) -> list[Path]:
    """Write ``out/source/<assignment>/<chapter>.ipynb`` and, if absent, ``out/nbgrader_config.py``.

    Returns the notebooks written. Source notebooks are overwritten (they are generated from the book); nothing else
    in ``out`` (the gradebook, release, submitted, autograded and feedback folders) is touched. Chapters without
    coding exercises are skipped. With ``assignment=None`` each chapter is its own assignment, named
    after the chapter's file stem; otherwise all notebooks go into the one assignment named.
    """
    if not isinstance(notebooks, (list, tuple)):
        raise TypeError(f"notebooks must be a list of paths, got {type(notebooks).__name__}")
    notebooks = [check_path("notebooks", p) for p in notebooks]
    out = check_path("out", out)
    if assignment is not None and not re.fullmatch(r"[A-Za-z0-9_-]+", check_str("assignment", assignment)):
        raise ValueError(f"assignment must be letters, digits, '-' or '_', got {assignment!r}")
    points_code = check_float("points_code", points_code, minimum=0.0, strict_minimum=True)
    points_written = check_float("points_written", points_written, minimum=0.0)
    if not check_str("course_id", course_id):
        raise ValueError("course_id must not be empty")
    written = []
    for path in notebooks:
        chapter = path.stem
        source = make_source_notebook(nbformat.read(path, as_version=4), chapter,
                                      points_code=points_code, points_written=points_written)
        if source is None:
            continue
        target = out / "source" / (assignment or chapter) / f"{chapter}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(source, target)
        written.append(target)
    out.mkdir(parents=True, exist_ok=True)
    config = out / "nbgrader_config.py"
    if not config.exists():  # an instructor's edited configuration is kept
        config.write_text(config_source(course_id), encoding="utf-8")
    return written


def main(argv: list[str] | None = None) -> int:
    """The command line (``python -m course_pe.coursework.nbgrader_release --help``); ``argv`` is None (``sys.argv``) or a list
    of str."""
    argv = check_argv("argv", argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="+", type=Path, help="chapter notebooks (with solutions)")
    parser.add_argument("--out", type=Path, default=Path("nbgrader"), help="course folder (default: nbgrader/)")
    parser.add_argument("--assignment", help="put every chapter into this one assignment (default: one per chapter)")
    parser.add_argument("--points-code", type=float, default=1.0, help="points per coding exercise (default 1)")
    parser.add_argument("--points-written", type=float, default=1.0,
                        help="points per written exercise, manually graded (default 1; 0 leaves them out)")
    parser.add_argument("--course-id", default=COURSE_ID, help=f"nbgrader course id (default {COURSE_ID})")
    args = parser.parse_args(argv)
    try:
        written = write_course(args.notebooks, args.out, assignment=args.assignment, points_code=args.points_code,
                               points_written=args.points_written, course_id=args.course_id)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for target in written:
        meta = nbformat.read(target, as_version=4).metadata["course_pe"]
        print(f"{target}: {len(meta['exercises'])} coding exercise(s): {', '.join(meta['exercises'])}")
    activate = Path(sys.prefix) / "bin" / "activate"
    print(f"course folder {args.out}; next (nbgrader needs the course's environment on PATH):\n"
          f"  source {activate} && cd {args.out} && nbgrader generate_assignment <assignment>")
    return 0


if __name__ == "__main__":
    sys.exit(main())
