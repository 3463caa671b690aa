"""The nbgrader release: generated from the chapters and the exercise registry, and graded by nbgrader itself.

The last test is the round trip through the real nbgrader (pinned in requirements.txt) for every chapter with
coding exercises: generate_assignment, autograde (in course_pe's sandbox, as the generated configuration asks) of
correct, typical-mistake, untouched and hostile submissions, the scores in nbgrader's gradebook, generate_feedback
and export.
"""

from __future__ import annotations

import ast
import copy
import csv
import html
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_pe.coursework import nbgrader_release as release
from course_pe.coursework.exercises import EXERCISES, tolerance_text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from book_tools import toc_notebooks  # noqa: E402

CHAPTERS = {path.stem: path for path in toc_notebooks()}


def nbgrader_meta(cell) -> dict:
    """A cell's nbgrader metadata; for the student's answer cell of a written exercise (not an nbgrader cell), the
    metadata of a cell nbgrader ignores."""
    return cell.metadata.get("nbgrader") or {"grade": False, "solution": False, "locked": False, "task": False,
                                             "grade_id": ""}


def book_solutions(chapter: str) -> dict[str, str]:
    """Exercise id -> source of the chapter's solution cell that defines it."""
    from _grading import book_solutions as solutions_of

    return solutions_of(CHAPTERS[chapter])


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
    # every chapter with exercises becomes an assignment, also those with written exercises only
    assert set(sources) == {stem for stem, path in CHAPTERS.items()
                            if release.chapter_exercises(nbformat.read(path, as_version=4))}
    assert {"why_order", "rope_proof", "generation", "todays_models"} <= set(sources)


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
        ids = [nbgrader_meta(c)["grade_id"] for c in nb.cells if "nbgrader" in c.metadata]
        assert len(ids) == len(set(ids)), f"{stem}: duplicate grade ids"
        assert all(re.fullmatch(r"[A-Za-z0-9_-]+", i) for i in ids)
        for cell in nb.cells:
            if "nbgrader" not in cell.metadata:  # a written exercise's answer cell: the student's own
                assert cell.cell_type == "markdown" and cell.source == release.WRITTEN_ANSWER
                continue
            meta = nbgrader_meta(cell)
            assert meta["schema_version"] == 3 and meta["task"] is (meta["grade_id"].endswith("-task"))
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
                tolerance = EXERCISES[exercise_id].tolerance
                visible = release.VISIBLE_TESTS[exercise_id].format(tol=tolerance_text(tolerance) if tolerance else "0")
                assert visible.strip() in cell.source[end:]


def test_written_exercises_become_manually_graded_tasks_with_their_rubric(sources):
    """Each written exercise: a locked task cell worth its rubric's points, whose mark scheme (the rubric and the
    book's worked solution) nbgrader shows to graders and in the feedback, then the student's answer cell."""
    from course_pe.coursework.rubrics import RUBRICS, rubrics_for_chapter

    nb = sources["relative"]
    tasks = [c for c in nb.cells if nbgrader_meta(c).get("task")]
    assert [nbgrader_meta(c)["grade_id"] for c in tasks] == ["ex-relative-shaw-count-task"]
    meta = nbgrader_meta(tasks[0])
    assert meta["locked"] and not meta["grade"] and not meta["solution"]
    assert meta["points"] == RUBRICS["ex-relative-shaw-count"].points == 4
    begin, end = release.MARK_SCHEME
    assert tasks[0].source.index("How many relative offsets") < tasks[0].source.index(begin)
    scheme = tasks[0].source[tasks[0].source.index(begin):]
    assert scheme.rstrip().endswith(end) and "**Marking (4 points, written)**" in scheme
    assert "$2K + 1$ rows" in scheme  # the book's worked solution, for the grader
    answer = nb.cells[nb.cells.index(tasks[0]) + 1]
    assert answer.id == "ex-relative-shaw-count-answer" and answer.source == release.WRITTEN_ANSWER
    # every chapter: one task per rubric, in the book's order, worth the rubric's points
    for stem, source in sources.items():
        found = [(nbgrader_meta(c)["grade_id"], nbgrader_meta(c)["points"]) for c in source.cells
                 if nbgrader_meta(c).get("task")]
        assert found == [(f"{r.label}-task", r.points) for r in rubrics_for_chapter(stem)], stem
    # --points-written gives every written exercise one number; 0 leaves them out
    path = CHAPTERS["why_order"]
    same = release.make_source_notebook(nbformat.read(path, as_version=4), "why_order", points_written=2)
    assert {nbgrader_meta(c)["points"] for c in same.cells if nbgrader_meta(c).get("task")} == {2}
    assert release.make_source_notebook(nbformat.read(path, as_version=4), "why_order", points_written=0) is None
    # exercise prompts are locked markdown without MyST roles that Jupyter would show raw
    prompts = [c for c in sources["shift_theorem"].cells if nbgrader_meta(c).get("grade_id", "").endswith(("-prompt", "-task"))]
    assert prompts and all(nbgrader_meta(c)["locked"] for c in prompts)
    assert not any("{prf:ref}" in c.source for c in prompts)
    assert any("`cor-shift-dot`" in c.source for c in prompts)


def test_order_follows_the_chapter(sources):
    labels = [nbgrader_meta(c)["grade_id"] for c in sources["rope_implementation"].cells]
    assert labels.index("rope_rotation-answer") < labels.index("rope_rotation-tests") < labels.index(
        "half_to_interleaved-answer") < labels.index("half_to_interleaved-tests") < labels.index(
        "convert_qk_weight-answer") < labels.index("convert_qk_weight-tests")


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


def test_a_chapter_without_exercises_is_skipped():
    assert release.make_source_notebook(nbformat.read(CHAPTERS["errata"], as_version=4), "errata") is None
    nb = nbformat.read(CHAPTERS["why_order"], as_version=4)  # written exercises only: an assignment of its own
    assert len(release.chapter_exercises(nb)) == 4 and release.make_source_notebook(nb, "why_order") is not None


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
    assert written == ["nbgrader_config.py", "source/extrapolation/extrapolation.ipynb", "source/relative/relative.ipynb",
                       "source/why_order/why_order.ipynb"]
    printed = capsys.readouterr().out
    assert "t5_bucket, alibi_slopes; 1 written exercise(s) marked by rubric (4 points)" in printed
    assert "why_order.ipynb: 0 coding exercise(s); 4 written exercise(s)" in printed
    # newcomer F7: the printed next step works from a plain shell (nbgrader needs the environment's PATH)
    assert f"source {Path(sys.prefix) / 'bin' / 'activate'} && cd {tmp_path} && nbgrader generate_assignment" in printed
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
    assert sorted(p.name for p in (one / "source" / "week3").iterdir()) == ["extrapolation.ipynb", "relative.ipynb",
                                                                           "why_order.ipynb"]
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


GRADEBOOK_VANDAL = """\
import glob, sqlite3
# attack 45: go for nbgrader's gradebook and the other submissions (the course folder's path, as a student who knows
# it would write it, and the relative paths the red team used), zero every grade, damage a classmate's notebook
for db in ["COURSE/gradebook.db", "../../../gradebook.db", "../../gradebook.db"]:
    try:
        with sqlite3.connect(db) as connection:
            connection.execute("UPDATE grade SET auto_score = 0")
    except Exception:
        pass
for path in glob.glob("COURSE/submitted/*/all/*.ipynb") + glob.glob("../../*/all/*.ipynb"):
    try:
        open(path, "w").write("{}")
    except OSError:
        pass
"""
def _live_handlers_and_scripts(page: str) -> list[str]:
    """The event-handler attributes of a page's tags, and its scripts that mention ``alert`` (the page's own scripts,
    MathJax and require.js, do not)."""
    from html.parser import HTMLParser

    found: list[str] = []

    class Parser(HTMLParser):
        in_script = False

        def handle_starttag(self, tag, attrs):
            found.extend(f"{tag} {name}" for name, _ in attrs if name.startswith("on"))
            self.in_script = tag == "script"

        def handle_endtag(self, tag):
            self.in_script = False

        def handle_data(self, data):
            if self.in_script and "alert(" in data:
                found.append("script: " + data[:80])

    Parser().feed(page)
    return found


WRITTEN_XSS = '<img src=x onerror="alert(document.cookie)"><script>alert(3)</script>'
LIBRARY_T5 = ("def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):\n"
              "    return cpe.t5_relative_position_bucket(relative_position, bidirectional=bidirectional,\n"
              "                                           num_buckets=num_buckets, max_distance=max_distance)\n")
VISIBLE_ONLY_SLOPES = ("def alibi_slopes(num_heads):\n    table = {\n" + "".join(
    f"        {n}: {[2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]!r},\n" for n in (1, 2, 8, 16)) +
    "        6: [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125],\n"  # the book's examples, as a table
    "    }\n    return table.get(num_heads) or [2.0 ** (-8.0 * (h + 1) / num_heads) for h in range(num_heads)]\n")


def test_nbgrader_round_trip(tmp_path):
    """Every chapter with coding exercises, released as one nbgrader assignment and autograded by nbgrader with the
    generated configuration (course_pe's sandbox instead of a kernel): the book's solutions get every coding point,
    a typical mistake in each chapter's first exercise loses that point, an untouched notebook gets none. The red
    team's nbgrader attacks: hard-coding the visible examples (43) fails the hidden cases, calling the library (44)
    fails, and a submission that goes for gradebook.db and the classmates' notebooks (45) changes nothing.""" 
    from nbgrader.api import Gradebook

    from _grading import typical_mistake

    course = tmp_path / "course"
    chapters = sorted({ex.chapter for ex in EXERCISES.values()})
    assert release.main([*(str(CHAPTERS[c]) for c in chapters), "--out", str(course), "--assignment", "all"]) == 0
    assert "SandboxedExecute" in (course / "nbgrader_config.py").read_text()
    _nbgrader(course, "generate_assignment", "all")
    released_nbs = {c: nbformat.read(course / "release" / "all" / f"{c}.ipynb", as_version=4) for c in chapters}
    for nb in released_nbs.values():
        sources = "\n".join(c.source for c in nb.cells)
        assert "BEGIN SOLUTION" not in sources and "HIDDEN TESTS" not in sources and "check(" not in sources
    assert "2K + 1" not in "\n".join(c.source for c in released_nbs["relative"].cells)  # no solution text survives

    solutions = {c: book_solutions(c) for c in chapters}

    def answers(chapter: str, kind: str) -> dict[str, str]:
        ids = [ex.id for ex in EXERCISES.values() if ex.chapter == chapter]
        given = {f"{e}-answer": solutions[chapter][e] for e in ids}
        if kind == "wrong":
            given[f"{ids[0]}-answer"] = typical_mistake(solutions[chapter][ids[0]], ids[0])
        return given

    submissions = {
        "ada": {c: answers(c, "right") for c in chapters},
        "bob": {c: answers(c, "wrong") for c in chapters},
        # dee's t5_bucket cell crashes before its def: the message says why, with the cell's number in JupyterLab
        "dee": {"relative": {"t5_bucket-answer": "import einops\n" + solutions["relative"]["t5_bucket"]}},
        # cy hands the notebooks back untouched, but for a comment added to one locked test cell
        "cy": {c: {} for c in chapters} | {"relative": {"alibi_slopes-tests": None}},
        # attacks 43-45 in one submission, graded last (as the red team's was): it could have reached every grade
        "zed": {"relative": {"t5_bucket-answer": "try:\n    exec(" + repr(GRADEBOOK_VANDAL.replace("COURSE", str(course))
                                                                       + MONKEYPATCH) + ")\nexcept Exception:\n"
                                                 "    pass\n" + LIBRARY_T5,
                             "alibi_slopes-answer": VISIBLE_ONLY_SLOPES,
                             # red team 2, I4: HTML in a written answer, for the instructor's Formgrader
                             "ex-relative-shaw-count-answer": WRITTEN_XSS}},
    }
    submitted: dict[Path, str] = {}
    for student, by_chapter in submissions.items():
        for chapter, given in by_chapter.items():
            nb = copy.deepcopy(released_nbs[chapter])
            left = dict(given)
            for cell in nb.cells:
                grade_id = cell.metadata.get("nbgrader", {}).get("grade_id") or cell.get("id")  # (written: the id)
                if grade_id in left:
                    given_source = left.pop(grade_id)
                    cell.source = cell.source + "\n# changed" if given_source is None else given_source
            assert not left, f"cells not found: {left}"
            target = course / "submitted" / student / "all" / f"{chapter}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, target)
            submitted[target] = target.read_text()

    # red team 2, I7: a limit given on nbgrader's command line arrives as text
    autograde = _nbgrader(course, "autograde", "all", "--SandboxedExecute.cell_timeout=120")
    # newcomer F24: no "checksum has changed!" for the cells students left as released (hidden tests, mark schemes),
    # and one for the locked cell cy changed; no SQLAlchemy warnings from nbgrader's gradebook
    log = autograde.stdout + autograde.stderr
    assert re.findall(r"Attribute 'checksum' for cell (\S+) has changed", log) == ["alibi_slopes-tests"], log[-3000:]
    assert "SAWarning" not in log

    assert {p: p.read_text() for p in submitted} == submitted  # nobody's submitted notebook was touched
    code_points = {c: sum(1 for ex in EXERCISES.values() if ex.chapter == c) for c in chapters}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        def code_score(student: str) -> dict[str, float]:
            submission = gb.find_submission("all", student)
            return {nb.name: sum(g.score for g in nb.grades if g.name.endswith("-tests")) for nb in submission.notebooks}

        scores = {student: code_score(student) for student in submissions}
    print("coding points recorded by nbgrader:", scores)
    assert scores["ada"] == {c: code_points[c] for c in chapters}
    assert scores["bob"] == {c: code_points[c] - 1 for c in chapters}
    assert scores["cy"] == {c: 0 for c in chapters}
    assert scores["zed"]["relative"] == 0  # and ada's and bob's grades, recorded before zed's, are intact
    zed = (course / "autograded" / "zed" / "all" / "relative.ipynb").read_text()
    assert "course_pe.t5.t5_relative_position_bucket is not available" in zed  # attack 44
    assert "hidden case" in zed  # attack 43: the book's examples, hard-coded, pass; a hidden case fails

    dee = nbformat.read(course / "autograded" / "dee" / "all" / "relative.ipynb", as_version=4)
    number = 1 + next(i for i, c in enumerate(dee.cells) if c.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                      == "t5_bucket-answer")
    failed = next(c for c in dee.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "t5_bucket-tests")
    assert f"why: cell {number} ('import einops') raised ModuleNotFoundError" in failed.outputs[0]["evalue"]

    # I4: zed's written answer is shown as text in the Formgrader (the autograded notebook) and on the feedback page
    from nbconvert.exporters import HTMLExporter

    from course_pe.coursework.nbgrader_autograde import html_is_inert

    zed_nb = nbformat.read(course / "autograded" / "zed" / "all" / "relative.ipynb", as_version=4)
    written = [c for c in zed_nb.cells if c.get("id") == "ex-relative-shaw-count-answer"]
    assert len(written) == 1 and "alert(document.cookie)" in written[0].source
    assert html_is_inert(HTMLExporter().markdown2html({"cell": written[0]}, written[0].source)) == []
    _nbgrader(course, "generate_feedback", "all", "--student", "zed", "--notebook", "relative")
    feedback = (course / "feedback/zed/all/relative.html").read_text(encoding="utf-8")
    assert "alert(document.cookie)" in feedback  # shown, as text
    assert _live_handlers_and_scripts(feedback) == []

    _nbgrader(course, "generate_feedback", "all", "--student", "bob", "--notebook", "relative")
    page = html.unescape(re.sub(r"<[^>]+>", "", (course / "feedback/bob/all/relative.html").read_text(encoding="utf-8")))
    assert "diagnosis: you used query - key" in page  # the check's diagnosis reaches the student

    # a written exercise is a manually graded task worth its rubric's points, with the rubric on the feedback page
    from course_pe.coursework.rubrics import RUBRICS

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        tasks = {c.name: c.max_score for c in gb.find_notebook("relative", "all").task_cells}
    assert tasks == {"ex-relative-shaw-count-task": RUBRICS["ex-relative-shaw-count"].points}
    assert "Marking (4 points, written)" in page and "2N - 1 offsets occur" in page

    _nbgrader(course, "export")
    with (course / "grades.csv").open(newline="") as fh:
        rows = {row["student_id"]: float(row["score"]) for row in csv.DictReader(fh)}
    assert rows["ada"] == sum(code_points.values()) and rows["cy"] == 0.0


# --------------------------------------------------------------------------- red team r2, F4b: not graded is no 0


def test_an_exercise_the_grader_could_not_finish_is_never_scored():
    """A submission cut off by its time limit for the whole grading is "not graded"; SandboxedExecute wrote it as an
    error output, which nbgrader scores 0. nbgrader has no "not graded" score (no output would be full marks), so the
    notebook's autograde now fails with the reason (nbgrader then records no grade from the run and names the student
    in its error summary), as when full isolation is unavailable."""
    from course_pe.coursework.nbgrader_autograde import SandboxedExecute

    slow = [nbformat.v4.new_code_cell(f"import time\nSLOW{k} = time.sleep(2.5)") for k in range(3)]
    answer = nbformat.v4.new_code_cell(
        "def sinusoidal_table(n, d):\n    return np.zeros((n, d)) + (SLOW0 or 0) + (SLOW1 or 0) + (SLOW2 or 0)")
    tests = nbformat.v4.new_code_cell("# hidden tests", metadata={"nbgrader": {
        "grade": True, "grade_id": "sinusoidal_table-tests", "points": 1, "solution": False, "locked": True}})
    nb = nbformat.v4.new_notebook(cells=[*slow, answer, tests])
    level = "" if os.geteuid() == 0 else "limited"
    with pytest.raises(RuntimeError) as raised:
        SandboxedExecute(timeout=5, cell_timeout=4, isolation=level).preprocess(nb, {"nbgrader": {"student": "x4"}})
    message = str(raised.value)
    assert "NOT GRADED sinusoidal_table" in message and "ran past the time limit of 5 s" in message, message
    assert "'x4'" in message and "--student x4" in message
