"""The nbgrader release: generated from the chapters and the exercise registry, and graded by nbgrader itself.

The last test is the round trip through the real nbgrader (pinned in requirements.txt): generate_assignment,
autograde of a correct, a classic-mistake, an untouched and a monkeypatching submission, the scores in nbgrader's
gradebook, generate_feedback and export.
"""

from __future__ import annotations

import ast
import copy
import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_pe.coursework import nbgrader_release as release
from course_pe.coursework.exercises import EXERCISES

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from book_tools import toc_notebooks  # noqa: E402

CHAPTERS = {path.stem: path for path in toc_notebooks()}


def nbgrader_meta(cell) -> dict:
    return cell.metadata["nbgrader"]


def book_solutions(chapter: str) -> dict[str, str]:
    """Exercise id -> source of the chapter's solution cell that defines it."""
    nb = nbformat.read(CHAPTERS[chapter], as_version=4)
    found = {}
    for cell in nb.cells:
        if cell.cell_type == "code" and "solution" in cell.metadata.get("tags", []):
            for node in ast.parse(cell.source).body:
                for ex in EXERCISES.values():
                    if isinstance(node, ast.FunctionDef) and node.name == ex.function:
                        found[ex.id] = cell.source
    return found


def released(source: str) -> str:
    """What nbgrader's ClearSolutions and ClearHiddenTests leave of a cell (the same rules, written independently)."""
    out, skipping = [], False
    for line in source.split("\n"):
        if "BEGIN SOLUTION" in line:
            indent = line[: len(line) - len(line.lstrip())]
            out += [indent + "# YOUR CODE HERE", indent + "raise NotImplementedError()"]
            skipping = True
        elif "END SOLUTION" in line or "END HIDDEN TESTS" in line:
            skipping = False
        elif "BEGIN HIDDEN TESTS" in line:
            skipping = True
        elif not skipping:
            out.append(line)
    return "\n".join(out)


@pytest.fixture(scope="module")
def sources() -> dict[str, nbformat.NotebookNode]:
    out = {}
    for stem, path in CHAPTERS.items():
        nb = release.make_source_notebook(nbformat.read(path, as_version=4), stem)
        if nb is not None:
            out[stem] = nb
    return out


# --------------------------------------------------------------------------- one source of truth


def test_every_registered_exercise_is_released_once_in_its_chapter(sources):
    placed = {}
    for stem, nb in sources.items():
        for cell in nb.cells:
            meta = nbgrader_meta(cell)
            if meta["grade"] and cell.cell_type == "code":
                exercise_id = meta["grade_id"].removesuffix("-tests")
                assert exercise_id not in placed, f"{exercise_id} released twice"
                placed[exercise_id] = stem
    assert placed == {ex.id: ex.chapter for ex in EXERCISES.values()}
    # only chapters with coding exercises become assignments
    assert set(sources) == {ex.chapter for ex in EXERCISES.values()}


def test_every_registered_exercise_has_visible_examples():
    assert set(release.VISIBLE_TESTS) == set(EXERCISES)


def test_an_exercise_without_examples_still_gets_a_test_cell(monkeypatch):
    monkeypatch.delitem(release.VISIBLE_TESTS, "alibi_slopes")
    source = release.autograder_cell_source("alibi_slopes", 2)
    assert "check('alibi_slopes'" in source and "callable(globals().get('alibi_slopes'))" in source
    assert "(2 points)" in source


def test_unknown_exercise_is_refused():
    with pytest.raises(ValueError, match="unknown exercise 'nope'"):
        release.autograder_cell_source("nope", 1)


# --------------------------------------------------------------------------- notebook structure


def test_cells_carry_valid_nbgrader_metadata(sources):
    for stem, nb in sources.items():
        nbformat.validate(nb)
        ids = [nbgrader_meta(c)["grade_id"] for c in nb.cells]
        assert len(ids) == len(set(ids)), f"{stem}: duplicate grade ids"
        assert all(re.fullmatch(r"[A-Za-z0-9_-]+", i) for i in ids)
        for cell in nb.cells:
            meta = nbgrader_meta(cell)
            assert meta["schema_version"] == 3 and meta["task"] is False
            if meta["grade"]:
                assert meta["points"] > 0
            if meta["solution"]:
                assert not meta["locked"]
            if cell.cell_type == "code" and meta["grade"]:  # autograder tests: locked, hidden check first
                assert meta["locked"] and not meta["solution"]
                hidden = cell.source.index("### BEGIN HIDDEN TESTS")
                end = cell.source.index("### END HIDDEN TESTS")
                exercise_id = meta["grade_id"].removesuffix("-tests")
                assert hidden < cell.source.index(f"check({exercise_id!r}") < end
                assert release.VISIBLE_TESTS[exercise_id].strip() in cell.source[end:]


def test_written_exercises_become_manually_graded_answers_with_the_books_solution(sources):
    nb = sources["relative"]
    written = [c for c in nb.cells if c.cell_type == "markdown" and nbgrader_meta(c)["solution"]]
    assert [nbgrader_meta(c)["grade_id"] for c in written] == ["ex-relative-shaw-count-answer"]
    meta = nbgrader_meta(written[0])
    assert meta["grade"] and meta["points"] == 1
    assert written[0].source.startswith("### BEGIN SOLUTION") and "$2K + 1$ rows" in written[0].source
    assert written[0].source.rstrip().endswith("### END SOLUTION")
    # exercise prompts are locked markdown without MyST roles that Jupyter would show raw
    prompts = [c for c in sources["shift_theorem"].cells if nbgrader_meta(c)["grade_id"].endswith("-prompt")]
    assert prompts and all(nbgrader_meta(c)["locked"] for c in prompts)
    assert not any("{prf:ref}" in c.source for c in prompts)
    assert any("`cor-shift-dot`" in c.source for c in prompts)


def test_order_follows_the_chapter(sources):
    labels = [nbgrader_meta(c)["grade_id"] for c in sources["rope_implementation"].cells]
    assert labels.index("rope_rotation-answer") < labels.index("rope_rotation-tests") < labels.index(
        "half_to_interleaved-answer") < labels.index("half_to_interleaved-tests")


def test_answer_cell_keeps_signature_and_docstring_and_hides_the_body():
    source = (
        "import math\n\n"
        "@staticmethod\n"
        "def f(x, y=2):\n"
        '    """Doc of f."""\n'
        "    z = x + y\n"
        "    return math.sqrt(z)\n\n"
        "def sinusoidal_table(n, d): return None\n\n"
        "def alibi_slopes(num_heads):\n"
        "    return [1.0]\n"
    )
    cell = release.answer_cell_source(source)
    ast.parse(cell)
    student = released(cell)
    tree = ast.parse(student)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert set(functions) == {"f", "alibi_slopes"}  # the one-liner and the import are solution material
    assert "import math" not in student and "sinusoidal_table" not in student
    assert ast.get_docstring(functions["f"]) == "Doc of f." and functions["f"].decorator_list
    assert [a.arg for a in functions["f"].args.args] == ["x", "y"]
    assert ast.get_docstring(functions["alibi_slopes"]) == f"Exercise: {EXERCISES['alibi_slopes'].description}."
    assert "z = x + y" not in student and "return [1.0]" not in student
    for fn in functions.values():
        assert isinstance(fn.body[-1], ast.Raise)
    with pytest.raises(ValueError):
        release.answer_cell_source("# only a comment\n")


def test_unknown_solution_label_is_an_error():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("```{solution} ex-missing\nText.\n```")])
    with pytest.raises(ValueError, match="ex-missing"):
        release.chapter_exercises(nb)


def test_chapter_without_coding_exercises_is_skipped():
    nb = nbformat.read(CHAPTERS["why_order"], as_version=4)
    assert release.make_source_notebook(nb, "why_order") is None
    assert len(release.chapter_exercises(nb)) == 4


# --------------------------------------------------------------------------- the test cells grade like make grade


def _run_cells(*sources: str) -> dict:
    namespace: dict = {"__name__": "__main__"}
    for source in sources:
        exec(compile(source, "<cell>", "exec"), namespace)
    return namespace


def _cells(nb, exercise_id):
    by_id = {nbgrader_meta(c)["grade_id"]: c.source for c in nb.cells}
    return by_id[f"{nb.metadata['course_pe']['chapter']}-setup"], by_id[f"{exercise_id}-tests"]


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_test_cells_pass_the_book_solution_and_fail_the_released_stub(sources, exercise_id):
    chapter = EXERCISES[exercise_id].chapter
    setup, tests = _cells(sources[chapter], exercise_id)
    solution = book_solutions(chapter)[exercise_id]
    _run_cells(setup, solution, tests)  # hidden and visible tests pass
    _run_cells(setup, solution, released(tests))  # the visible tests alone pass
    stub = released(release.answer_cell_source(solution))
    with pytest.raises(NotImplementedError):
        _run_cells(setup, stub, released(tests))
    with pytest.raises(AssertionError, match="still a stub"):
        _run_cells(setup, stub, tests)


CLASSIC_MISTAKES = {
    # exercise: (wrong function, a phrase of the diagnosis check() gives for it)
    "sinusoidal_table": (
        "def sinusoidal_table(n, d):\n"
        "    p = np.arange(n)[:, None]\n"
        "    i = np.arange(d // 2)\n"
        "    t = np.zeros((n, d))\n"
        "    t[:, 0::2] = np.sin(p / 10000 ** (2 * i / d))\n"
        "    t[:, 1::2] = np.cos(p / 10000 ** ((2 * i + 1) / d))\n"
        "    return t\n",
        "exponent (2i+1)/d_model",
    ),
    "alibi_slopes": (
        "def alibi_slopes(n):\n    return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]\n",
        "nearest lower power of two",
    ),
    "t5_bucket": (None, "query - key"),  # the book's solution applied to -offsets
}


@pytest.mark.parametrize("exercise_id", sorted(CLASSIC_MISTAKES))
def test_hidden_tests_name_the_classic_mistake(sources, exercise_id):
    chapter = EXERCISES[exercise_id].chapter
    setup, tests = _cells(sources[chapter], exercise_id)
    wrong, phrase = CLASSIC_MISTAKES[exercise_id]
    if wrong is None:
        wrong = book_solutions(chapter)[exercise_id].replace("n = -relative_position", "n = relative_position")
    with pytest.raises(AssertionError, match=re.escape(phrase)):
        _run_cells(setup, wrong, tests)


# --------------------------------------------------------------------------- command line


def test_cli_writes_the_course_folder(tmp_path, capsys):
    paths = [str(CHAPTERS["why_order"]), str(CHAPTERS["relative"]), str(CHAPTERS["extrapolation"])]
    assert release.main([*paths, "--out", str(tmp_path)]) == 0
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["nbgrader_config.py", "source/extrapolation/extrapolation.ipynb", "source/relative/relative.ipynb"]
    assert "t5_bucket, alibi_slopes" in capsys.readouterr().out
    config = (tmp_path / "nbgrader_config.py").read_text()
    compile(config, "nbgrader_config.py", "exec")
    assert "c.CourseDirectory.course_id = 'positional-encoding-corrected'" in config

    (tmp_path / "nbgrader_config.py").write_text("c = get_config()  # the instructor's own\n")
    (tmp_path / "gradebook.db").write_text("not ours")
    assert release.main([paths[1], "--out", str(tmp_path)]) == 0  # regenerating keeps the instructor's files
    assert "the instructor's own" in (tmp_path / "nbgrader_config.py").read_text()
    assert (tmp_path / "gradebook.db").read_text() == "not ours"

    one = tmp_path / "one"
    assert release.main([*paths, "--out", str(one), "--assignment", "week3", "--points-code", "2"]) == 0
    assert sorted(p.name for p in (one / "source" / "week3").iterdir()) == ["extrapolation.ipynb", "relative.ipynb"]
    nb = nbformat.read(one / "source" / "week3" / "relative.ipynb", as_version=4)
    assert {nbgrader_meta(c).get("points") for c in nb.cells if c.cell_type == "code" and nbgrader_meta(c)["grade"]} == {2}

    assert release.main([paths[1], "--out", str(tmp_path / "bad"), "--assignment", "../x"]) == 2
    assert not (tmp_path / "bad").exists()


# --------------------------------------------------------------------------- the round trip through nbgrader


MONKEYPATCH = """\
import course_pe.coursework.exercises as _exercises

_real_check = _exercises.check

def _lenient(exercise_id, fn):
    report = _real_check(exercise_id, fn)
    report.passed = True
    return report

_exercises.check = _lenient
"""


def _nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    bin_dir = str(Path(sys.executable).parent)
    env = os.environ | {
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),  # nbgrader runs `alembic` from PATH
        "JUPYTER_CONFIG_DIR": str(course / ".jupyter"),  # no user-level nbgrader_config.py
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    env.pop("COURSE_PE_RESULTS", None)
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def test_nbgrader_round_trip(tmp_path):
    from nbgrader.api import Gradebook

    course = tmp_path / "course"
    assert release.main([str(CHAPTERS["relative"]), "--out", str(course)]) == 0
    _nbgrader(course, "generate_assignment", "relative")
    student_nb = nbformat.read(course / "release" / "relative" / "relative.ipynb", as_version=4)
    sources = "\n".join(c.source for c in student_nb.cells)
    assert "BEGIN SOLUTION" not in sources and "HIDDEN TESTS" not in sources and "check(" not in sources
    assert "2K + 1" not in sources and "torch.where" not in sources  # no solution text or code survives

    solutions = book_solutions("relative")
    naive = CLASSIC_MISTAKES["alibi_slopes"][0]
    submissions = {
        "ada": {"t5_bucket-answer": solutions["t5_bucket"], "alibi_slopes-answer": solutions["alibi_slopes"],
                "ex-relative-shaw-count-answer": "There are $2n - 1$ offsets and $2K + 1$ rows."},
        "bob": {"t5_bucket-answer": solutions["t5_bucket"], "alibi_slopes-answer": naive},  # a classic mistake
        "cy": {},  # the released notebook, untouched
        # passes the visible examples, then replaces the course's check in the kernel the hidden tests run in
        "mallory": {"t5_bucket-answer": solutions["t5_bucket"], "alibi_slopes-answer": MONKEYPATCH + naive},
    }
    for student, answers in submissions.items():
        nb = copy.deepcopy(student_nb)
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id in answers:
                cell.source = answers.pop(grade_id)
        assert not answers, f"cells not found: {answers}"
        target = course / "submitted" / student / "relative" / "relative.ipynb"
        target.parent.mkdir(parents=True)
        nbformat.write(nb, target)

    _nbgrader(course, "autograde", "relative")

    recorded = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in submissions:
            submission = gb.find_submission("relative", student)
            cells = {g.name: g.score for nb in submission.notebooks for g in nb.grades}
            recorded[student] = (submission.score, submission.max_score, submission.needs_manual_grade, cells)
    print("scores recorded by nbgrader:", {s: r[:3] for s, r in recorded.items()})
    assert recorded["ada"] == (2.0, 3.0, True, {"t5_bucket-tests": 1.0, "alibi_slopes-tests": 1.0,
                                                 "ex-relative-shaw-count-answer": 0.0})
    assert recorded["bob"] == (1.0, 3.0, False, {"t5_bucket-tests": 1.0, "alibi_slopes-tests": 0.0,
                                                  "ex-relative-shaw-count-answer": 0.0})
    assert recorded["cy"] == (0.0, 3.0, False, {"t5_bucket-tests": 0.0, "alibi_slopes-tests": 0.0,
                                                 "ex-relative-shaw-count-answer": 0.0})
    # the limitation the instructor guide states: hidden tests run in the student's kernel
    assert recorded["mallory"][0] == 2.0

    _nbgrader(course, "generate_feedback", "relative")
    pages = {s: course / "feedback" / s / "relative" / "relative.html" for s in submissions}
    assert all(page.is_file() for page in pages.values())
    bob = pages["bob"].read_text(encoding="utf-8")
    assert "nearest lower power of two" in bob and "FAILED on case" in bob  # the check's diagnosis reaches the student
    assert "still a stub" in pages["cy"].read_text(encoding="utf-8")

    _nbgrader(course, "export")
    with (course / "grades.csv").open(newline="") as fh:
        rows = {row["student_id"]: (float(row["score"]), float(row["max_score"])) for row in csv.DictReader(fh)}
    assert rows == {"ada": (2.0, 3.0), "bob": (1.0, 3.0), "cy": (0.0, 3.0), "mallory": (2.0, 3.0)}
