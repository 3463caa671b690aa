"""Grade a student's notebook.

    python -m course_pe.grade submission.ipynb [--student NAME] [--out grades/] [--cell-timeout 120] [--timeout 900]
    make grade NB=path/to/submission.ipynb

The submission is executed top to bottom in a fresh kernel (in a temporary folder), with a time limit per cell and
for the whole run. Cells that raise are recorded and execution continues; a cell that runs past its limit is
interrupted. Then a grading cell, appended by the grader, runs the registered check of every coding exercise the
notebook contains on the function the student defined (``course_pe.exercises``). A crash, a hang, a deleted cell or
a missing function costs the exercises it affects, never the grader.

Which exercises: the notebook's ``course_pe.exercises`` metadata (written by ``make workbook``), else ``--exercises``,
else every registered exercise whose chapter name appears in the file name.

Output: a report on stdout, ``<out>/<student>.json`` with every detail, and a row per exercise appended to
``<out>/grades.csv`` (student, notebook, exercise, score, max_score, status, message). Exit status 0 when grading
completed (whatever the score), 2 when the arguments are wrong.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from .exercises import EXERCISES

__all__ = ["ExerciseGrade", "GradeReport", "grade_notebook", "main"]


@dataclass
class ExerciseGrade:
    exercise: str
    score: float
    max_score: float
    status: str  # passed, failed, not graded
    message: str


@dataclass
class GradeReport:
    student: str
    notebook: str
    exercises: list[ExerciseGrade] = field(default_factory=list)
    cell_errors: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def score(self) -> float:
        return sum(e.score for e in self.exercises)

    @property
    def max_score(self) -> float:
        return sum(e.max_score for e in self.exercises)

    def text(self) -> str:
        lines = [f"Grade report for {self.student} ({self.notebook}): {self.score:g} / {self.max_score:g}"]
        for p in self.problems:
            lines.append(f"  ! {p}")
        for e in self.exercises:
            lines.append(f"  [{e.status:>10}] {e.exercise:<24} {e.score:g}/{e.max_score:g}  {e.message}")
        if self.cell_errors:
            lines.append("  cells that raised an error while running the notebook:")
            lines += [f"    - {err}" for err in self.cell_errors]
        lines.append(f"  graded in {self.seconds:.1f} s")
        return "\n".join(lines)


def _which_exercises(nb: nbformat.NotebookNode | None, path: Path, requested: list[str] | None) -> list[str]:
    if requested:
        unknown = [e for e in requested if e not in EXERCISES]
        if unknown:
            raise ValueError(f"unknown exercise(s) {unknown}; known: {sorted(EXERCISES)}")
        return requested
    if nb is not None:
        listed = nb.metadata.get("course_pe", {}).get("exercises")
        if listed:
            return [e for e in listed if e in EXERCISES]
    stem = path.stem
    return [ex.id for ex in EXERCISES.values() if ex.chapter in stem]


def _grading_cell(exercise_ids: list[str]) -> nbformat.NotebookNode:
    pairs = [(ex, EXERCISES[ex].function) for ex in exercise_ids]
    source = (
        "# Added by the grader.\n"
        "import course_pe.exercises as _grader\n"
        f"for _exercise, _name in {pairs!r}:\n"
        "    _grader.check(_exercise, globals().get(_name))\n"
    )
    return nbformat.v4.new_code_cell(source, metadata={"tags": ["grader"]})


def _execute(notebook_file: Path, results_file: Path, cell_timeout: int) -> int:
    """Run in a child process: execute the notebook, write it back, return 0 (errors are stored in the file)."""
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    nb = nbformat.read(notebook_file, as_version=4)
    os.environ["COURSE_PE_RESULTS"] = str(results_file)
    client = NotebookClient(
        nb, kernel_name="python3", timeout=cell_timeout, interrupt_on_timeout=True, allow_errors=True,
        resources={"metadata": {"path": str(notebook_file.parent)}}, record_timing=False,
    )
    try:
        client.execute()
    except DeadKernelError as exc:
        nb.metadata["course_pe_grader_problem"] = f"the kernel died: {exc}"
    nbformat.write(nb, notebook_file)
    return 0


def _cell_errors(nb: nbformat.NotebookNode) -> list[str]:
    errors = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "grader" in cell.metadata.get("tags", []):
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                first_line = cell.source.strip().splitlines()[0] if cell.source.strip() else ""
                errors.append(f"cell {index} ({first_line[:50]!r}): {output.get('ename')}: {str(output.get('evalue'))[:120]}")
    return errors


def grade_notebook(
    path: Path,
    *,
    student: str | None = None,
    exercises: list[str] | None = None,
    cell_timeout: int = 120,
    timeout: int = 900,
) -> GradeReport:
    """Execute and grade one submission. Never raises for problems in the submission itself."""
    start = time.perf_counter()
    path = Path(path)
    report = GradeReport(student=student or path.stem, notebook=str(path))
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # not a notebook, invalid JSON, missing file
        nb = None
        report.problems.append(f"could not read the notebook: {type(exc).__name__}: {exc}")
    expected = _which_exercises(nb, path, exercises)
    if not expected:
        report.problems.append("no coding exercises found for this notebook (pass --exercises to choose them)")
    results: dict[str, dict] = {}
    if nb is not None and expected:
        workdir = Path(tempfile.mkdtemp(prefix="course_pe_grade_"))
        try:
            nb.cells.append(_grading_cell(expected))
            notebook_file, results_file = workdir / "submission.ipynb", workdir / "results.jsonl"
            nbformat.write(nb, notebook_file)
            results_file.touch()
            command = [sys.executable, "-m", "course_pe.grade", "--_execute", str(notebook_file), str(results_file),
                       str(cell_timeout)]
            try:
                subprocess.run(command, timeout=timeout, check=False, capture_output=True, cwd=workdir)
            except subprocess.TimeoutExpired:
                report.problems.append(f"the whole notebook exceeded the time limit of {timeout} s and was stopped")
            try:
                executed = nbformat.read(notebook_file, as_version=4)
                report.cell_errors = _cell_errors(executed)
                if executed.metadata.get("course_pe_grader_problem"):
                    report.problems.append(executed.metadata["course_pe_grader_problem"])
            except Exception:
                report.problems.append("the executed notebook could not be read back")
            for line in results_file.read_text(encoding="utf-8").splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                results[record["exercise"]] = record  # the last record wins: the grader's cell runs last
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    for exercise in expected:
        record = results.get(exercise)
        if record is None:
            report.exercises.append(ExerciseGrade(exercise, 0.0, 1.0, "not graded",
                                                  "the check did not run (the notebook stopped or timed out before it)"))
            continue
        if record["passed"]:
            message = f"all {record['cases_total']} cases correct"
        else:
            parts = [f"case {record['cases_run']} of {record['cases_total']}: {record['failed_case']}"]
            for key in ("error", "mistake", "hint"):
                if record.get(key):
                    parts.append(f"{key}: {record[key]}")
            message = "; ".join(parts)
        report.exercises.append(ExerciseGrade(exercise, float(record["score"]), 1.0,
                                              "passed" if record["passed"] else "failed", message))
    report.seconds = time.perf_counter() - start
    return report


def write_outputs(report: GradeReport, out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    json_file = out / f"{report.student}.json"
    json_file.write_text(json.dumps(asdict(report) | {"score": report.score, "max_score": report.max_score}, indent=2,
                                    ensure_ascii=False), encoding="utf-8")
    csv_file = out / "grades.csv"
    new = not csv_file.exists()
    with csv_file.open("a", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        if new:
            writer.writerow(["student", "notebook", "exercise", "score", "max_score", "status", "message"])
        for e in report.exercises:
            writer.writerow([report.student, report.notebook, e.exercise, e.score, e.max_score, e.status, e.message])
    return json_file, csv_file


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--_execute"]:  # internal: the child process that runs the kernel
        return _execute(Path(argv[1]), Path(argv[2]), int(argv[3]))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--student", help="name used in the report and the output files (default: file name)")
    parser.add_argument("--exercises", help="comma-separated exercise ids (default: from the notebook)")
    parser.add_argument("--out", type=Path, default=Path("grades"))
    parser.add_argument("--cell-timeout", type=int, default=120, help="seconds per cell")
    parser.add_argument("--timeout", type=int, default=900, help="seconds for the whole notebook")
    args = parser.parse_args(argv)
    exercises = [e.strip() for e in args.exercises.split(",")] if args.exercises else None
    try:
        report = grade_notebook(args.notebook, student=args.student, exercises=exercises,
                                cell_timeout=args.cell_timeout, timeout=args.timeout)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    json_file, csv_file = write_outputs(report, args.out)
    print(report.text())
    print(f"wrote {json_file} and {csv_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
