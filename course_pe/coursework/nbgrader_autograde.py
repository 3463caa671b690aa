"""nbgrader's ``autograde`` with course_pe's sandbox in place of the kernel.

nbgrader normally grades a submission by running the whole notebook, hidden tests included, in a Jupyter kernel of
the instructor: the student's code can then change what the tests check, call the library, and read or write the
course folder, ``gradebook.db`` included (one submission can zero every other student's grades). The
``nbgrader_config.py`` that ``make nbgrader`` writes replaces nbgrader's ``Execute`` step by
:class:`SandboxedExecute`:

* no kernel runs; the submission's answer cells go through the same grader as ``make grade``
  (:func:`course_pe.coursework.grade.grade_cells`): a fresh sandboxed process per notebook, only the cells that define
  the exercises' functions, a ``course_pe`` without the functions being graded, visible and randomised hidden cases
  drawn with a fresh secret seed, verdicts computed outside the sandbox;
* each autograded test cell (``<exercise>-tests``, restored by nbgrader from the instructor's source) receives the
  verdict as its output: a pass prints the report, a failure is an error output with the diagnosis, which nbgrader
  scores 0; the feedback pages show these messages;
* nothing else changes: nbgrader records the scores in its gradebook, the written answers are graded by hand in the
  Formgrader, ``generate_feedback`` and ``export`` work as usual.

The grader refuses to run where full isolation is unavailable (the instructor is not root) unless
``c.SandboxedExecute.isolation = "limited"`` is set; nbgrader then reports an error for the submission instead of
recording a grade.
"""

from __future__ import annotations

from typing import Any

import nbformat
from nbgrader.preprocessors.base import NbGraderPreprocessor
from traitlets import Any as AnyTrait
from traitlets import validate

from .exercises import EXERCISES
from .names import NAME_PATTERN

__all__ = ["SandboxedExecute"]


class SandboxedExecute(NbGraderPreprocessor):
    """Grade a notebook's coding exercises in course_pe's sandbox and write the verdicts into its test cells.

    Configurable (``c.SandboxedExecute.<name>`` in ``nbgrader_config.py``, or keyword arguments): ``cell_timeout``
    (seconds per answer cell), ``call_timeout`` (seconds per exercise, its calls only), ``timeout`` (seconds for a
    whole notebook, wall clock), ``isolation`` (``""``: full isolation, required; ``"limited"``: grade without root,
    unsafe with hostile submissions). Arguments left at None keep the configured value.
    """

    cell_timeout = AnyTrait(60.0, help="seconds per answer cell").tag(config=True)
    call_timeout = AnyTrait(60.0, help="seconds per exercise (its calls only)").tag(config=True)
    timeout = AnyTrait(300.0, help="seconds for a whole notebook (wall clock)").tag(config=True)
    isolation = AnyTrait("", help="empty for full isolation (required by default), or 'limited' to grade without "
                                  "root, where a hostile submission can read and change the course folder").tag(config=True)

    def __init__(self, *, cell_timeout: float | None = None, call_timeout: float | None = None,
                 timeout: float | None = None, isolation: str | None = None, **kwargs: Any) -> None:
        given = {k: v for k, v in (("cell_timeout", cell_timeout), ("call_timeout", call_timeout),
                                   ("timeout", timeout), ("isolation", isolation)) if v is not None}
        super().__init__(**kwargs, **given)

    @validate("cell_timeout", "call_timeout", "timeout")
    def _seconds(self, proposal: Any) -> float:
        from .._validation import check_float

        return check_float(proposal["trait"].name, proposal["value"], minimum=0.0, strict_minimum=True)

    @validate("isolation")
    def _level(self, proposal: Any) -> str:
        from .._validation import check_choice

        return check_choice("isolation", proposal["value"], ("", "full", "limited"))

    def preprocess(self, nb: Any, resources: Any) -> tuple[Any, Any]:
        """Grade ``nb`` (a notebook after nbgrader's sanitising steps) and return it with the verdicts as the
        outputs of its autograded test cells; ``resources`` is nbgrader's (the student's id is used as the name)."""
        from .grade import grade_cells
        from .sandbox import containment, prepare

        if not isinstance(nb, nbformat.NotebookNode) or not isinstance(getattr(nb, "cells", None), list):
            raise TypeError(f"nb must be an nbformat notebook, got {type(nb).__name__}")
        if not isinstance(resources, dict):
            raise TypeError(f"resources must be a dict, got {type(resources).__name__}")
        level = containment().level
        if level != "full" and self.isolation != "limited":
            raise RuntimeError("full isolation is not available here (" + "; ".join(containment().notes) + "): run "
                               "nbgrader autograde as root, or set c.SandboxedExecute.isolation = 'limited' to grade "
                               "anyway (unsafe with hostile submissions)")
        tests: dict[str, Any] = {}
        for cell in nb.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            grade_id = str(meta.get("grade_id", ""))
            if cell.cell_type == "code" and meta.get("grade") and grade_id.endswith("-tests") \
                    and grade_id[: -len("-tests")] in EXERCISES:
                tests[grade_id[: -len("-tests")]] = cell
        if not tests:
            return nb, resources
        sources = [cell.source for cell in nb.cells if cell.cell_type == "code"]
        student = str(resources.get("nbgrader", {}).get("student") or "student")
        student = student if NAME_PATTERN.fullmatch(student) else "student"
        chapters = {EXERCISES[e].chapter for e in tests}
        assignment = chapters.pop() if len(chapters) == 1 else "custom"
        prepare(self.isolation or level)
        report = grade_cells(sources, assignment, student=student, notebook=str(resources.get("unique_key", "")),
                             exercises=list(tests), cell_timeout=self.cell_timeout, call_timeout=self.call_timeout,
                             timeout=self.timeout, isolation=self.isolation or None)
        self.log.info("%s: %g / %g (%s)", student, report.score, report.max_score, report.isolation)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = []
                cell.execution_count = None
        grades = {e.exercise: e for e in report.exercises}
        for exercise, cell in tests.items():
            grade = grades[exercise]
            if grade.status == "passed":
                cell.outputs = [nbformat.v4.new_output(
                    "stream", name="stdout", text=f"[{exercise}] PASSED: {grade.message} (graded in course_pe's "
                                                  f"sandbox; isolation {report.isolation.split(':')[0]})\n")]
            else:
                lines = [f"[{exercise}] {grade.status.upper()}: {grade.message}"]
                lines += [f"answer cell that raised: {e}" for e in report.cell_errors]
                lines += [f"note: {p}" for p in report.problems]
                cell.outputs = [nbformat.v4.new_output("error", ename="GradingFailed", evalue=grade.message,
                                                       traceback=lines)]
        return nb, resources
