"""Make student notebooks from the course's solution notebooks.

    python -m course_pe.coursework.workbook book/part1/sinusoidal.ipynb ... --out workbook/
    make workbook                      # every chapter in the TOC, into workbook/

The chapters are the source of truth and contain the solutions. A student version differs as follows:

* a code cell tagged ``solution`` becomes a stub: each function keeps its signature and docstring, and its body is
  replaced by ``raise NotImplementedError``; other statements in the cell are dropped;
* everything else inside a solution (the prose and cells between ``{solution-start}`` and ``{solution-end}``, and
  ``{solution}`` directive blocks) is removed and replaced by a short "your answer" placeholder, except where the
  solution holds a ``solution`` code cell: that exercise is answered in its stub cell, and a written placeholder
  would ask for an answer nobody needs;
* every ``{glue:text}`` role in the markdown (and ``{glue}``/``{glue:}``) becomes the literal text the book shows,
  formatted from the value the chapter stored (its glue record), because JupyterLab (jupyterlab-myst) renders no
  glue roles: without this a student read sentences with the numbers missing. A role that pastes from another
  chapter (``{glue:text}`../part3/extrapolation.ipynb::gap_t5:+.2f```, how a chapter ties what it says about another
  chapter to that chapter's output) takes the value stored in that notebook, found next to ``source`` or, without
  it, under the course's ``book/`` folder;
* all outputs and execution counts are cleared (students run the notebook themselves);
* the notebook's metadata records which coding exercises it contains (``course_pe.coursework.exercises``), for the grader.

The exercise text, the automatic check cells (``cpe.exercises.check_...``) and the rest of the chapter stay.
"""

from __future__ import annotations

import argparse
import ast
import copy
import re
import sys
from pathlib import Path

import nbformat

from .._validation import check_argv, check_bool, check_notebook, check_path, check_str
from .exercises import EXERCISES

__all__ = ["exercises_in", "make_student_notebook", "stub_source", "main"]

SOLUTION_TAG = "solution"
_START = re.compile(r"^```\{solution-start\}")
_END = re.compile(r"^```\{solution-end\}")
_BLOCK = re.compile(r"^```\{solution\}")
_FENCE = re.compile(r"^```\s*$")
ANSWER_PLACEHOLDER = "*Your answer here.*"
GLUE_RECORD = "application/papermill.record/text/plain"
_GLUE_ROLE = re.compile(r"\{glue(?::text|:|)\}`([^`]+)`")


def _glue_values(nb: nbformat.NotebookNode) -> dict[str, str]:
    """The glue records a notebook stored: ``{name: text/plain value}`` (the last record of a name wins, as in myst-nb)."""
    values: dict[str, str] = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            if name is not None and GLUE_RECORD in output.get("data", {}):
                values[name] = output["data"][GLUE_RECORD]
    return values


def _format_glue_text(text: str, fmt_spec: str) -> str:
    """A glue record as ``{glue:text}`key:fmt_spec``` shows it (the same rules as myst-nb's ``format_plain_text``)."""
    try:
        value = ast.literal_eval(text)
    except (SyntaxError, ValueError):
        value = text
    if fmt_spec == "":
        return str(value)
    kind = fmt_spec[-1]
    if kind == "s":
        value = str(value)
    elif kind in "bcdoxX":
        value = int(value)
    elif kind in "eEfFgGn%":
        value = float(value)
    return format(value, fmt_spec)


_BOOK = Path(__file__).resolve().parents[2] / "book"  # the course's chapters, in a checkout of the repository


def _other_notebook(document: str, source: Path | None) -> Path:
    """The notebook a cross-document glue role names: relative to ``source``'s folder (as Sphinx resolves it), from
    the book's root for a path starting with '/', or, without ``source``, the one notebook under book/ that ends with
    the path once its leading '../' and './' are dropped."""
    if document.startswith("/"):
        found = [_BOOK.parent / document.lstrip("/")]
    elif source is not None:
        found = [source.parent / document]
    else:
        tail = Path(*[part for part in Path(document).parts if part not in ("..", ".")])
        found = sorted(p for p in _BOOK.rglob(tail.name) if p.as_posix().endswith("/" + tail.as_posix()))
    found = [p for p in found if p.is_file()]
    if len(found) != 1:
        raise ValueError(f"a glue role pastes from {document!r}, which names no single notebook of the course "
                         f"(found {[str(p) for p in found]})")
    return found[0]


def _substitute_glue(text: str, values: dict[str, str], other_values=None) -> str:
    """Replace every text glue role in markdown ``text`` by the literal text it renders to.

    ``other_values(document)`` returns the records of another notebook, for a role ``document::key``; without it such a
    role is refused. ``ValueError`` names a role whose key has no stored record (a notebook stored without outputs, or a
    typo)."""

    def paste(match: re.Match) -> str:
        content = match.group(1)
        records = values
        if "::" in content:
            if other_values is None:
                raise ValueError(f"the glue role {match.group(0)!r} pastes from another notebook, which a workbook "
                                 "cannot without its path")
            document, content = content.split("::", 1)
            records = other_values(document)
        key, sep, fmt_spec = content.rpartition(":")
        if not sep:  # no format: myst-nb formats with "s"
            key, fmt_spec = content, "s"
        if key not in records:
            raise ValueError(f"the glue role {match.group(0)!r} names no stored glue record {key!r}")
        return _format_glue_text(records[key], fmt_spec)

    return _GLUE_ROLE.sub(paste, text)


def stub_source(source: str) -> str:
    """Replace every top-level function in ``source`` by a stub with the same signature and docstring.

    ``source`` must be Python text defining at least one top-level function (``ValueError`` otherwise)."""
    tree = _parse("source", check_str("source", source))
    stubs = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body: list[ast.stmt] = []
            docstring = ast.get_docstring(node, clean=False)
            if docstring is None:
                described = next((ex.description for ex in EXERCISES.values() if ex.function == node.name), None)
                if described:
                    docstring = f"Exercise: {described}. Replace the line below with your code."
            if docstring is not None:
                body.append(ast.Expr(ast.Constant(docstring)))
            message = f"implement {node.name}"
            body.append(ast.parse(f"raise NotImplementedError({message!r})").body[0])
            stub = copy.copy(node)
            stub.body = body
            stubs.append(ast.unparse(ast.fix_missing_locations(stub)))
    if not stubs:
        raise ValueError("source (a cell tagged 'solution') must define at least one function")
    return "\n\n\n".join(stubs) + "\n"


def _parse(name: str, source: str) -> ast.Module:
    """``ast.parse``, with a syntax error reported as a ``ValueError`` naming the argument."""
    try:
        return ast.parse(source)
    except SyntaxError as error:
        raise ValueError(f"{name} is not valid Python: {error.msg} (line {error.lineno})") from None


def exercises_in(nb: nbformat.NotebookNode) -> list[str]:
    """IDs of registered coding exercises whose function is defined in a ``solution`` cell of ``nb`` (an nbformat 4
    notebook; ``ValueError`` if a solution cell is not valid Python)."""
    check_notebook("nb", nb)
    names = {ex.function: ex.id for ex in EXERCISES.values()}
    found = []
    for cell in nb.cells:
        if cell.cell_type == "code" and SOLUTION_TAG in cell.metadata.get("tags", []):
            for node in _parse("nb (a solution cell)", cell.source).body:
                if isinstance(node, ast.FunctionDef) and node.name in names and names[node.name] not in found:
                    found.append(names[node.name])
    return found


def _code_answer_regions(nb: nbformat.NotebookNode) -> list[bool]:
    """For each ``{solution-start}`` of ``nb`` in order: whether its solution holds a ``solution``-tagged code cell.

    Such an exercise is answered in code (the stub cell), so the workbook adds no "your answer" placeholder for it."""
    regions: list[bool] = []
    in_solution = False
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.split("\n"):
                if _START.match(line):
                    regions.append(False)
                    in_solution = True
                elif _END.match(line):
                    in_solution = False
        elif cell.cell_type == "code" and in_solution and SOLUTION_TAG in cell.metadata.get("tags", []):
            regions[-1] = True
    return regions


def _strip_markdown(text: str, in_solution: bool, code_answers: list[bool] | None = None) -> tuple[str, bool]:
    """Remove solution material from one markdown cell; return the new text and the gated state.

    ``code_answers`` (consumed from the front, one entry per ``{solution-start}``) says which solutions are answered
    in code: those get no placeholder."""
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if _START.match(line):
            in_solution = True
            i += 1
            while i < len(lines) and not _FENCE.match(lines[i]):  # skip the start directive's options
                i += 1
            if not (code_answers.pop(0) if code_answers else False):
                out.append(ANSWER_PLACEHOLDER)
        elif _END.match(line):
            in_solution = False
            i += 1
            while i < len(lines) and not _FENCE.match(lines[i]):
                i += 1
        elif _BLOCK.match(line):
            i += 1
            while i < len(lines) and not _FENCE.match(lines[i]):
                i += 1
            out.append(ANSWER_PLACEHOLDER)
        elif not in_solution:
            out.append(line)
        i += 1
    return "\n".join(out).strip("\n"), in_solution


def make_student_notebook(nb: nbformat.NotebookNode, *, keep_outputs: bool = False,
                          source: str | Path | None = None) -> nbformat.NotebookNode:
    """Return the student version of a solution notebook (the input is not modified).

    With ``keep_outputs=True`` (for a student edition of the *book*), stored outputs are kept except those of the
    stubs and of the automatic check cells, which would otherwise show a solution's results. ``source`` is the
    notebook's path (None: unknown), from which a glue role that pastes from another chapter finds that chapter.
    """
    check_notebook("nb", nb)
    check_bool("keep_outputs", keep_outputs)
    source = None if source is None else Path(check_path("source", source))
    student = copy.deepcopy(nb)
    values = _glue_values(nb)
    loaded: dict[Path, dict[str, str]] = {}

    def other_values(document: str) -> dict[str, str]:
        path = _other_notebook(document, source).resolve()
        if path not in loaded:
            loaded[path] = _glue_values(nbformat.read(path, as_version=4))
        return loaded[path]

    code_answers = _code_answer_regions(nb)
    cells = []
    in_solution = False
    for cell in student.cells:
        if cell.cell_type == "markdown":
            text, in_solution = _strip_markdown(cell.source, in_solution, code_answers)
            if text.strip():
                cell.source = _substitute_glue(text, values, other_values)
                cells.append(cell)
        elif cell.cell_type == "code":
            if SOLUTION_TAG in cell.metadata.get("tags", []):
                cell.source = stub_source(cell.source)
                cell.metadata["tags"] = [t for t in cell.metadata.get("tags", []) if t != SOLUTION_TAG] + ["student"]
            elif in_solution:
                continue  # demonstration code that belongs to a worked solution
            is_check = "exercises.check" in cell.source
            if not keep_outputs or is_check or "student" in cell.metadata.get("tags", []):
                cell.outputs = []
                cell.execution_count = None
            cells.append(cell)
        else:
            cells.append(cell)
    student.cells = cells
    student.metadata["course_pe"] = {"exercises": exercises_in(nb), "version": "student"}
    return student


def main(argv: list[str] | None = None) -> int:
    """The command line (``python -m course_pe.coursework.workbook --help``); ``argv`` is None (``sys.argv``) or a list of str."""
    argv = check_argv("argv", argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="+", type=Path, help="solution notebooks")
    parser.add_argument("--out", type=Path, default=Path("workbook"), help="output folder (default: workbook/)")
    parser.add_argument("--root", type=Path, default=Path("."), help="paths below the output keep their place relative to this")
    parser.add_argument("--keep-outputs", action="store_true", help="keep stored outputs (student edition of the book)")
    args = parser.parse_args(argv)
    for path in args.notebooks:
        nb = nbformat.read(path, as_version=4)
        student = make_student_notebook(nb, keep_outputs=args.keep_outputs, source=path)
        try:
            relative = path.resolve().relative_to(args.root.resolve())
        except ValueError:
            relative = Path(path.name)
        target = args.out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(student, target)
        exercises = student.metadata["course_pe"]["exercises"]
        print(f"{target}: {len(exercises)} coding exercise(s){': ' + ', '.join(exercises) if exercises else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
