"""Every correct answer a student could reasonably write gets full marks (issue 34, "one judge, one truth").

The variants are in ``honest_variants.py``: for every coding exercise, the correct answers students actually write
(float32 then float64, NumPy, lists, loops, the idioms of the Annotated Transformer, Hugging Face, Meta, fairseq,
GPT-J, RoFormer, BLOOM, MosaicML, Press et al.'s reference code, the library's helpers where the statement allows
them, printing a lot, slow but within limits).

How they are graded, and why so:

* **100 hidden seeds per variant, in this process** (:func:`test_every_honest_variant_passes_100_hidden_seeds`): the
  notebook's check (the visible cases, with its watch for library calls and unavailable modules) once, then the hidden
  cases of seeds 0 ... 99 judged by :func:`course_pe.coursework.exercises.judge`, the grader's own verdict. The
  cases and the judge are the grader's; only the process differs. This is where a tolerance set too tight shows (the
  red team's N11 failed 39 of 100 seeds, N12 100 of 100), and it costs about a minute on a 2-core machine.
* **In the real sandbox** (:func:`test_every_honest_variant_passes_in_the_sandbox`): one sandbox per chapter, as the
  grader starts it (the grading build without the exercise's library functions, the grading environment's packages,
  the seccomp filter), each variant's cell run and its function called over the channel on the visible cases and the
  hidden cases of 3 seeds: what differs between this process and the sandbox (what can be imported, what the library
  lacks) cannot hide here.
* **Whole notebooks through the grader** (:func:`test_whole_notebooks_of_honest_answers_get_full_marks`): a folder per
  chapter graded by ``grade_folder``, as ``make grade DIR=`` does, with an answer cell that imports the course's
  checker (red team N9) and one that prints a lot.
"""

from __future__ import annotations

import contextlib
import io
import linecache

import nbformat
import numpy as np
import pytest
import torch

from honest_variants import VARIANTS
from course_pe.coursework.exercises import (
    EXERCISES,
    GRADING_SETUP,
    call_case,
    chapters,
    check,
    exercises_for_chapter,
    judge,
)
from course_pe.coursework.grade import grade_folder
from course_pe.coursework.sandbox import Sandbox

SEEDS = range(100)
SANDBOX_SEEDS = range(3)


def define(exercise_id: str, name: str, source: str):
    """The function a variant's cell defines, defined as a notebook cell defines it: the cell's source known to
    ``linecache`` under a name that is no file (the notebook's check then also reads the cell, as in Jupyter)."""
    filename = f"<honest variant {exercise_id}:{name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict = {"__name__": "__main__"}
    exec(compile(GRADING_SETUP, "<set-up>", "exec"), namespace)
    exec(compile(source, filename, "exec"), namespace)
    return namespace[EXERCISES[exercise_id].function]


def test_every_exercise_has_honest_variants():
    assert set(VARIANTS) == set(EXERCISES), "a registered exercise without honest variants (add them)"
    for exercise_id, variants in VARIANTS.items():
        names = [name for name, _ in variants]
        assert len(names) >= 5 and len(set(names)) == len(names), exercise_id


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_every_honest_variant_passes_100_hidden_seeds(exercise_id):
    exercise = EXERCISES[exercise_id]
    functions = {name: define(exercise_id, name, source) for name, source in VARIANTS[exercise_id]}
    visible = len(exercise.cases(None))
    failures: dict[str, list[str]] = {name: [] for name in functions}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the variants that print a lot
            for name, fn in functions.items():
                report = check(exercise_id, fn)  # the notebook's check cell
                if not report.passed:
                    failures[name].append(f"the notebook's check: {report}")
            for seed in SEEDS:
                hidden = exercise.cases(np.random.default_rng(seed))[visible:]
                for name, fn in functions.items():
                    report = judge(exercise_id, hidden, [call_case(fn, case.args) for case in hidden])
                    if not report.passed:
                        failures[name].append(f"seed {seed}: {report}")
    finally:
        torch.set_num_threads(threads)
    failed = {name: found for name, found in failures.items() if found}
    counts = {name: len(found) for name, found in failed.items()}
    assert not failed, f"honest variants that lost marks (seeds failed of {len(SEEDS)}): {counts}\n" + "\n".join(
        f"{name}: {found[0]}" for name, found in failed.items())


def _sandbox_verdicts(chapter: str) -> dict[str, str]:
    """Each variant of ``chapter``'s exercises run in one sandbox started as the grader starts it; the judge's verdict
    on the visible cases and the hidden cases of SANDBOX_SEEDS. Returns the failures (variant -> report)."""
    ids = exercises_for_chapter(chapter)
    unavailable = sorted({name for e in ids for name in EXERCISES[e].library})
    failures = {}
    with Sandbox(unavailable=unavailable) as box:
        assert box.run_cell(GRADING_SETUP, 300) is None
        for exercise_id in ids:
            exercise = EXERCISES[exercise_id]
            visible = exercise.cases(None)
            for name, source in VARIANTS[exercise_id]:
                error = box.run_cell(source, 120)
                if error is not None:
                    failures[f"{exercise_id}:{name}"] = f"its cell raised {error}"
                    continue
                for seed in SANDBOX_SEEDS:
                    cases = visible + exercise.cases(np.random.default_rng(seed))[len(visible):]
                    outcomes = [box.call(exercise.function, case.args, 120) for case in cases]
                    report = judge(exercise_id, cases, outcomes)
                    if not report.passed:
                        failures[f"{exercise_id}:{name}"] = f"seed {seed}: {report}"
                        break
    return failures


@pytest.mark.parametrize("chapter", chapters())
def test_every_honest_variant_passes_in_the_sandbox(chapter):
    failures = _sandbox_verdicts(chapter)
    assert not failures, "\n".join(f"{name}: {why}" for name, why in failures.items())


def _with_checker(exercise_id: str, source: str) -> str:
    """The answer cell as the workbook teaches it: the course's checker imported at the top, called at the end."""
    function = EXERCISES[exercise_id].function
    return (f"from course_pe.coursework.exercises import check_{exercise_id}\n{source}\n"
            f"print(check_{exercise_id}({function}))\nprint(cpe.exercises.check_{exercise_id}({function}))\n")


def test_whole_notebooks_of_honest_answers_get_full_marks(tmp_path):
    """For each chapter, two notebooks graded as ``make grade DIR=`` grades a class: the first variants of its
    exercises, and the last variants with the checker imported and called in the answer cell (N9: the cell used to
    fail in the sandbox before its def), after a set-up cell and a cell that prints a lot."""
    reports = {}
    for chapter in chapters():
        folder = tmp_path / chapter
        folder.mkdir()
        ids = exercises_for_chapter(chapter)
        first = [VARIANTS[e][0][1] for e in ids]
        last = [_with_checker(e, VARIANTS[e][-1][1]) for e in ids]
        for student, cells in (("first", first), ("last", ["for i in range(20000):\n    print(i)", *last])):
            nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(GRADING_SETUP)]
                                          + [nbformat.v4.new_code_cell(c) for c in cells])
            nbformat.write(nb, folder / f"{student}.ipynb")
        result = grade_folder(folder, out=tmp_path / f"grades-{chapter}", jobs=2, progress=False, seed=20261128)
        reports[chapter] = result.reports
    lost = [f"{chapter}/{r.student}:\n{r.text()}" for chapter, rs in reports.items() for r in rs
            if r.score != r.max_score or r.cell_errors]
    assert not lost, "\n".join(lost)
    assert sum(len(rs) for rs in reports.values()) == 2 * len(chapters())
