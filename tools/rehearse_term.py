"""Rehearse an instructor's term: a class of N students (120 by default) through every assignment of the book.

    python tools/rehearse_term.py OUT [--students 120] [--chapters relative,generation] [--jobs 2]

What an instructor does, in order, with the commands of the instructor guide, timed:

1. a Canvas roster of N students (``Student, ID, SIS User ID, SIS Login ID, Section`` and Canvas's "Points Possible"
   row), ``OUT/roster.csv``;
2. for every chapter with coding exercises, a folder of submissions ``OUT/submissions/<chapter>/`` made from the
   chapter's workbook notebook, as students hand them in: most answer with the book's solution, some make a mistake,
   some hand the stub back, some crash (an import of a module that is not installed), a few are late (their file
   time after the due date) and a few hand in nothing; then ``make grade DIR=... ROSTER=... DUE=... LATE=10%/day``
   into ``OUT/grades``;
3. for every chapter with exercises marked by hand, ``make marking CHAPTER=...``, the sheet filled in with marks (a few
   students left unmarked), ``make mark SHEET=...``;
4. the exports ``OUT/grades/canvas.csv`` and ``moodle.csv`` imported under Canvas's and Moodle's rules
   (``tests/_lms_rules.py``): every roster student found by the roster's identity columns, one column per
   assignment, not graded distinct from 0.

Prints each command with its wall-clock time, and a summary. Run it as root (the grader's full isolation). It writes
only under OUT.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
FIRST = ("Ada", "Alan", "Barbara", "Claude", "Edsger", "Frances", "Grace", "Hedy", "John", "Katherine", "Leslie",
         "Margaret", "Niklaus", "Radia", "Shafi", "Tim")
LAST = ("Lovelace", "Turing", "Liskov", "Shannon", "Dijkstra", "Allen", "Hopper", "Lamarr", "Backus", "Johnson",
        "Lamport", "Hamilton", "Wirth", "Perlman", "Goldwasser", "Berners-Lee")


def roster(path: Path, students: int) -> list[str]:
    """Write a Canvas gradebook export of ``students`` students; return their logins."""
    logins = [f"s{i:04d}" for i in range(1, students + 1)]
    lines = ["Student,ID,SIS User ID,SIS Login ID,Section", "    Points Possible,,,,"]
    for i, login in enumerate(logins):
        name = f"{LAST[i % len(LAST)]}, {FIRST[(i * 7) % len(FIRST)]}"
        lines.append(f"\"{name}\",{100000 + i},U{i:05d},{login},Section {1 + i % 3}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return logins


def _solutions(chapter_path: Path) -> dict[str, str]:
    """The book's solution cell of each registered function of a chapter."""
    import ast

    from course_pe.coursework.exercises import EXERCISES

    found = {}
    for cell in nbformat.read(chapter_path, as_version=4).cells:
        if cell.cell_type == "code" and "solution" in cell.metadata.get("tags", []):
            for node in ast.parse(cell.source).body:
                for ex in EXERCISES.values():
                    if isinstance(node, ast.FunctionDef) and node.name == ex.function:
                        found[ex.function] = cell.source
    return found


def _wrong(source: str, function: str) -> str:
    """The book's answer, made wrong: the function's result is scaled by 1.5 (a plausible slip in a formula)."""
    return (source.replace(f"def {function}(", f"def _book_{function}(") +
            f"\n\ndef {function}(*args, **kwargs):\n    import numpy as _np\n"
            f"    return _np.asarray(_book_{function}(*args, **kwargs), dtype=float) * 1.5\n")


def kind_of(index: int) -> str:
    """What student ``index`` hands in for an assignment (the same mix for every assignment, shifted per student)."""
    r = index % 40
    return ("missing" if r == 0 else "stub" if r in (1, 2, 3) else "crash" if r in (4, 5) else
            "wrong" if r in (6, 7, 8, 9) else "late" if r in (10, 11) else "right")


def submissions(folder: Path, chapter_path: Path, logins: list[str], due: float) -> dict[str, str]:
    """Write one submission per student (but the missing ones) into ``folder``; return login -> kind."""
    from course_pe.coursework.exercises import EXERCISES, exercises_for_chapter
    from course_pe.coursework.workbook import make_student_notebook

    folder.mkdir(parents=True, exist_ok=True)
    template = make_student_notebook(nbformat.read(chapter_path, as_version=4))
    solutions = _solutions(chapter_path)
    functions = [EXERCISES[e].function for e in exercises_for_chapter(chapter_path.stem)]
    kinds = {}
    for i, login in enumerate(logins):
        kind = kind_of(i + len(chapter_path.stem))
        kinds[login] = kind
        if kind == "missing":
            continue
        nb = nbformat.from_dict(json.loads(json.dumps(template)))
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            for j, function in enumerate(functions):
                if f"def {function}(" in cell.source and "raise NotImplementedError" in cell.source:
                    answer = solutions[function]
                    if kind == "wrong" and j == 0:
                        answer = _wrong(answer, function)
                    elif kind == "crash" and j == 0:
                        answer = "import einops  # not installed\n" + answer
                    if kind != "stub":
                        cell.source = answer
        path = folder / f"{login}.ipynb"
        nbformat.write(nb, path)
        stamp = due + 3600 * 30 if kind == "late" else due - 3600 * (1 + i % 48)
        os.utime(path, (stamp, stamp))
    return kinds


def run(command: list[str], env: dict[str, str] | None = None, ok: tuple[int, ...] = (0,)) -> tuple[float, str]:
    """Run ``command`` (printed as a shell line), return its wall-clock time and output."""
    shown = " ".join(f"{k}={v}" for k, v in (env or {}).items()) + " " + " ".join(command)
    print(f"$ {shown.strip()}", flush=True)
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env=os.environ | (env or {}), capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode not in ok:
        print(done.stdout[-4000:], done.stderr[-4000:], sep="\n")
        raise SystemExit(f"failed with status {done.returncode}: {shown}")
    print(f"  ... {seconds:.0f} s (exit status {done.returncode})", flush=True)
    return seconds, done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--students", type=int, default=120)
    parser.add_argument("--chapters", help="comma-separated chapters (default: every chapter with exercises)")
    parser.add_argument("--jobs", type=int, default=0, help="JOBS for make grade (default: the grader's)")
    parser.add_argument("--make", default="make", help="the make command (default: make)")
    args = parser.parse_args(argv)
    from course_pe.coursework.exercises import chapters
    from course_pe.coursework.rubrics import CHAPTERS, rubrics_for_chapter

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    wanted = args.chapters.split(",") if args.chapters else list(CHAPTERS)
    logins = roster(out / "roster.csv", args.students)
    grades = out / "grades"
    due = time.time() - 86400 * 2
    due_text = time.strftime("%Y-%m-%dT%H:%M", time.localtime(due))
    times: list[tuple[str, float]] = []
    expected: dict[str, dict[str, str]] = {}
    started = time.monotonic()
    for chapter in [c for c in chapters() if c in wanted]:
        path = next(ROOT.glob(f"book/*/{chapter}.ipynb"))
        folder = out / "submissions" / chapter
        expected[chapter] = submissions(folder, path, logins, due)
        env = {"DIR": str(folder), "ROSTER": str(out / "roster.csv"), "GRADES": str(grades), "DUE": due_text,
               "LATE": "10%/day"} | ({"JOBS": str(args.jobs)} if args.jobs else {})
        seconds, printed = run([args.make, "--no-print-directory", "grade"], env)
        times.append((f"make grade ({chapter}, {len(list(folder.iterdir()))} notebooks)", seconds))
        if "NOT GRADED" in printed:
            print("  note: some exercises were not graded (see the summary above)")
    rng = random.Random(35)
    for chapter in [c for c in CHAPTERS if c in wanted and rubrics_for_chapter(c)]:
        seconds, _ = run([args.make, "--no-print-directory", "marking"], {"CHAPTER": chapter, "GRADES": str(grades)})
        sheet = grades / f"{chapter}-written" / "marking.csv"
        rows = list(csv.reader(io.StringIO(sheet.read_text(encoding="utf-8"))))
        maxima = [float(h.split("(max ")[1].rstrip(")")) for h in rows[0][2::2]]
        for k, row in enumerate(rows[1:]):
            if k % 30 == 29:
                continue  # not marked yet
            for j, top in enumerate(maxima):
                row[2 + 2 * j] = f"{rng.randint(0, int(top * 2)) / 2:g}"
                row[3 + 2 * j] = "" if rng.random() < 0.7 else "see the rubric's second criterion"
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        sheet.write_text(buf.getvalue(), encoding="utf-8")
        mark_seconds, _ = run([args.make, "--no-print-directory", "mark"], {"SHEET": str(sheet), "GRADES": str(grades)})
        times.append((f"make marking + make mark ({chapter})", seconds + mark_seconds))
    total = time.monotonic() - started
    # the exports, imported as Canvas and Moodle import them
    sys.path.insert(0, str(ROOT / "tests"))
    from _lms_rules import canvas_import, moodle_import

    canvas = canvas_import(grades / "canvas.csv", out / "roster.csv")
    moodle = moodle_import(grades / "moodle.csv", out / "roster.csv", map_from="SIS Login ID")
    problems = canvas.errors + moodle.errors + [f"Canvas does not know {s}" for s in canvas.new_students]
    found = set(canvas.identified_by)
    if found != set(logins):
        problems.append(f"Canvas found {len(found)} of {len(logins)} roster students")
    for chapter, kinds in expected.items():
        column = canvas.scores.get(f"{chapter}: coding", {})
        for login, kind in kinds.items():
            if kind == "missing" and column.get(login) is not None:
                problems.append(f"{login} handed in nothing for {chapter} but has {column.get(login)}")
            if kind in ("right", "late") and column.get(login) in (None, 0.0):
                problems.append(f"{login} answered {chapter} with the book's solution but has {column.get(login)}")
    print("\nsummary")
    for what, seconds in times:
        print(f"  {seconds:7.0f} s  {what}")
    print(f"  {total:7.0f} s  the whole term ({len(logins)} students, {len(times)} assignments)")
    print(f"Canvas: {len(found)} of {len(logins)} students found by {sorted(set(canvas.identified_by.values()))}, "
          f"{len(canvas.points_possible)} assignment columns {canvas.points_possible}; new assignments to create: "
          f"{len(canvas.new_assignments)}")
    print(f"Moodle: {len(next(iter(moodle.grades.values()), {}))} users mapped by SIS Login ID -> username, "
          f"{len(moodle.grades)} grade items")
    if problems:
        print("PROBLEMS:\n  " + "\n  ".join(problems[:30]))
        return 1
    print("every roster student imported, one column per assignment, not graded distinct from 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
