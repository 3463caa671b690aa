"""One judge, one truth on every path: the same answers get the same verdict from the workbook's check cell, from
nbgrader's test cell run by the student, from ``make grade``, from nbgrader's autograde and from Gradescope's
autograder (issue 34).

For each chapter with coding exercises, two submissions: one of honest answers that students write (float32
computations cast up, the idioms of public code; ``honest_variants.py``), which every path must pass, and one of
answers every path must refuse (the library the exercise asks students to write, a module grading lacks, a classic
mistake). The paths that run in the student's kernel (the check cell, nbgrader's test cell) run here; the three that
grade (``grade_folder``, ``SandboxedExecute``, ``run_autograder``) start the real sandbox.
"""

from __future__ import annotations

import contextlib
import io
import json
import linecache

import nbformat
import pytest

from honest_variants import VARIANTS
from course_pe.coursework.exercises import EXERCISES, GRADING_SETUP, chapters, check, exercises_for_chapter
from course_pe.coursework.grade import grade_folder
from course_pe.coursework.nbgrader_release import SETUP_SOURCE, autograder_cell_source

#: per exercise, the honest answer of each path test (a float32 one where the exercise has float answers)
HONEST = {
    "sinusoidal_table": "annotated_transformer_float32_then_double",
    "shift_matrix": "block_diag_float32",
    "add_positional_encoding": "library_table_float32",
    "rope_rotation": "hf_inv_freq_float32_on_float64",
    "t5_bucket": "log2_ratio_float32",
    "alibi_slopes": "bloom_float32_pow",
    "half_to_interleaved": "zeros_default_float32",
    "extrapolation_gap": "float32_as_python_float",
}
#: per exercise, an answer every path must refuse
REFUSED = {
    "sinusoidal_table": "def sinusoidal_table(n, d):\n    return cpe.sinusoidal_encoding(n, d)\n",
    "shift_matrix": "def shift_matrix(k, d):\n    return cpe.shift_matrix(k, d)\n",
    "add_positional_encoding": "def add_positional_encoding(x):\n"
                               "    return cpe.SinusoidalPositionalEncoding(x.shape[-1], scale_embeddings=True)(x)\n",
    "rope_rotation": "def rope_rotation(x, positions):\n"
                     "    return cpe.apply_rope(x[None, :, None, :], positions=positions)[0, :, 0, :]\n",
    "t5_bucket": "from transformers.models.t5.modeling_t5 import T5Attention\n"
                 "def t5_bucket(r, b=True, nb=32, md=128):\n"
                 "    return T5Attention._relative_position_bucket(r, b, nb, md)\n",
    "alibi_slopes": "def alibi_slopes(n):\n    return cpe.alibi_slopes(n, dtype=torch.float64)\n",
    "half_to_interleaved": "def half_to_interleaved(x):\n    return cpe.half_to_interleaved(x)\n",
    "extrapolation_gap": "def extrapolation_gap(losses, length):\n"
                         "    return float(losses[length - 1:].nanmean() - losses[:length - 1].nanmean())\n",
}
SEED = 20261128


def _answers(chapter: str, kind: str) -> dict[str, str]:
    ids = exercises_for_chapter(chapter)
    if kind == "honest":
        return {e: dict(VARIANTS[e])[HONEST[e]] for e in ids}
    return {e: REFUSED[e] for e in ids}


def _kernel(sources: list[str], label: str) -> dict:
    """Run cells as a Jupyter kernel does (each cell's source known to linecache under a name that is no file)."""
    namespace: dict = {"__name__": "__main__"}
    for i, source in enumerate(sources):
        filename = f"<path test {label} cell {i}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), namespace)
    return namespace


def _workbook_verdicts(chapter: str, kind: str) -> dict[str, bool]:
    """The workbook's check cells (``print(cpe.exercises.check_<id>(<function>))``), in the student's kernel."""
    answers = _answers(chapter, kind)
    namespace = _kernel([GRADING_SETUP, *answers.values()], f"workbook {chapter} {kind}")
    with contextlib.redirect_stdout(io.StringIO()):
        return {e: check(e, namespace[EXERCISES[e].function]).passed for e in answers}


def _nbgrader_student_verdicts(chapter: str, kind: str) -> dict[str, bool]:
    """nbgrader's locked test cells (the course's check with hidden cases, then the book's examples), run by the
    student in their kernel before submitting."""
    verdicts = {}
    for exercise, source in _answers(chapter, kind).items():
        namespace = _kernel([SETUP_SOURCE, source], f"nbgrader {chapter} {kind} {exercise}")
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(autograder_cell_source(exercise, 1), "<test cell>", "exec"), namespace)
            verdicts[exercise] = True
        except Exception:  # a failed assertion, or the answer raising in a visible example: nbgrader scores 0
            verdicts[exercise] = False
    return verdicts


def _nbgrader_autograde_verdicts(chapter: str, kind: str) -> dict[str, bool]:
    """nbgrader's autograde with the course's preprocessor: the answer cells graded in the sandbox, the verdicts
    written into the test cells (an error output scores 0)."""
    from course_pe.coursework.nbgrader_autograde import SandboxedExecute

    answers = _answers(chapter, kind)
    cells = [nbformat.v4.new_code_cell(SETUP_SOURCE)]
    for exercise, source in answers.items():
        cells.append(nbformat.v4.new_code_cell(source))
        test = nbformat.v4.new_code_cell(autograder_cell_source(exercise, 1))
        test.metadata["nbgrader"] = {"grade": True, "grade_id": f"{exercise}-tests", "locked": True, "points": 1,
                                     "schema_version": 3, "solution": False, "task": False}
        cells.append(test)
    nb, _ = SandboxedExecute().preprocess(nbformat.v4.new_notebook(cells=cells),
                                          {"nbgrader": {"student": f"{kind}"}, "unique_key": chapter})
    verdicts = {}
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if grade_id.endswith("-tests"):
            verdicts[grade_id[: -len("-tests")]] = not any(o.output_type == "error" for o in cell.outputs)
    return verdicts


def _gradescope_verdicts(chapter: str, kind: str, tmp_path) -> dict[str, bool]:
    """Gradescope's run_autograder on a folder laid out like /autograder (the graded entry of each exercise)."""
    from course_pe.coursework.gradescope import run_autograder

    root = tmp_path / f"gradescope-{chapter}-{kind}"
    for folder in ("source", "submission", "results"):
        (root / folder).mkdir(parents=True)
    (root / "source" / "assignment.json").write_text(json.dumps({
        "assignment": chapter, "exercises": exercises_for_chapter(chapter), "hidden_visibility": "after_due_date",
        "timeout": 300, "cell_timeout": 60, "call_timeout": 60}))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in
                                         [GRADING_SETUP, *_answers(chapter, kind).values()]])
    nbformat.write(nb, root / "submission" / f"{chapter}.ipynb")
    with contextlib.redirect_stdout(io.StringIO()):
        assert run_autograder(root) == 0
    results = json.loads((root / "results" / "results.json").read_text())
    verdicts = {}
    for test in results["tests"]:
        for exercise in exercises_for_chapter(chapter):
            if test.get("max_score") and exercise in test.get("name", ""):
                verdicts[exercise] = test["score"] == test["max_score"]
    return verdicts


@pytest.mark.parametrize("chapter", chapters())
def test_every_path_gives_the_same_verdicts(chapter, tmp_path):
    pytest.importorskip("transformers")  # the refused T5 answer imports it (grading never has it)
    folder = tmp_path / chapter
    folder.mkdir()
    for kind in ("honest", "refused"):
        cells = [GRADING_SETUP, *_answers(chapter, kind).values()]
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]),
                       folder / f"{kind}.ipynb")
    graded = grade_folder(folder, out=tmp_path / "grades", jobs=2, progress=False, seed=SEED)
    by_student = {r.student: {e.exercise: e.status == "passed" for e in r.exercises} for r in graded.reports}
    ids = exercises_for_chapter(chapter)
    for kind, expected in (("honest", True), ("refused", False)):
        verdicts = {
            "workbook check cell": _workbook_verdicts(chapter, kind),
            "nbgrader test cell (student)": _nbgrader_student_verdicts(chapter, kind),
            "make grade": by_student[kind],
            "nbgrader autograde": _nbgrader_autograde_verdicts(chapter, kind),
            "Gradescope": _gradescope_verdicts(chapter, kind, tmp_path),
        }
        want = {e: expected for e in ids}
        wrong = {path: got for path, got in verdicts.items() if got != want}
        assert not wrong, f"{chapter}, {kind} answers: expected {want} on every path, got {wrong}"
