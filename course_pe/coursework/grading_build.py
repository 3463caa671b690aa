"""The copy of ``course_pe`` that a submission can import while it is graded.

A student's answer may use the library (the chapter on model input, for instance, builds on
``cpe.sinusoidal_encoding``), but never the implementation of the function being graded, nor the exercise checks
with their reference formulas. The sandbox therefore does not see the installed package at all; it imports a copy
made for the assignment:

* the encodings' modules, with the body of every function listed in the exercises' ``library`` replaced by a
  ``RuntimeError`` that names it (signature and docstring kept): the code is not there, so there is nothing to
  unlock;
* no ``course_pe.coursework`` tools (the references, the grader, the gradebook): ``course_pe.coursework`` holds only
  a stand-in ``exercises`` module whose checks run nothing and say so, so that an answer cell that imports or calls
  the course's checker, as the workbook teaches, keeps its function (red team N9);
* compiled once per grader process and assignment, read-only for the sandbox.
"""

from __future__ import annotations

import ast
import compileall
import hashlib
import os
import shutil
import tempfile
import threading
from pathlib import Path

from ._cells import parse  # ast.parse is not thread-safe: Sandbox() builds this in the grader's threads
from ._child import UNAVAILABLE_MARK

__all__ = ["grading_build", "package_folder", "repository_root"]

_BUILDS: dict[str, Path] = {}
_LOCK = threading.Lock()
_WORK_ROOT: Path | None = None


def work_root() -> Path:
    """A private folder of this grader process (mode 0700): the grading builds, and the mount point on which each
    sandbox builds its root file system (in its own mount namespace). Removed at exit
    (:func:`remove_work_root`)."""
    global _WORK_ROOT
    with _LOCK:
        if _WORK_ROOT is None or not _WORK_ROOT.is_dir():
            _WORK_ROOT = Path(tempfile.mkdtemp(prefix="course_pe_grading_"))
            (_WORK_ROOT / "root").mkdir()
            _BUILDS.clear()
        return _WORK_ROOT


def remove_work_root() -> None:
    """Remove the folder of :func:`work_root` (the sandboxes must be gone)."""
    global _WORK_ROOT
    with _LOCK:
        if _WORK_ROOT is not None:
            shutil.rmtree(_WORK_ROOT, ignore_errors=True)
            _WORK_ROOT = None
            _BUILDS.clear()


def package_folder() -> Path:
    """The folder of the installed ``course_pe`` package (the real one, with the coursework tools)."""
    return Path(__file__).resolve().parent.parent


def repository_root() -> Path | None:
    """The repository that holds the package, if it is a checkout of the course (it has ``book/`` or ``_toc.yml``)."""
    root = package_folder().parent
    return root if (root / "book").is_dir() or (root / "_toc.yml").exists() else None


def _stub(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef, dotted: str) -> None:
    """Replace the body of ``node`` in ``lines`` (1-based line numbers) by a raise; keep its docstring."""
    body = node.body
    keep_docstring = isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
        and isinstance(body[0].value.value, str)
    first = body[1] if keep_docstring and len(body) > 1 else (None if keep_docstring else body[0])
    indent = " " * (body[0].col_offset)
    message = f"{dotted} {UNAVAILABLE_MARK}: implement it yourself"
    replacement = [f"{indent}raise RuntimeError({message!r})"]
    if first is None:  # only a docstring
        lines[body[0].end_lineno - 1] += "\n" + replacement[0]
        return
    start, end = first.lineno - 1, node.end_lineno
    if first.lineno == node.lineno:  # a one-line function: `def f(x): return x`
        raise ValueError(f"cannot remove the body of the one-line function {dotted}")
    lines[start:end] = replacement + [""] * (end - start - 1)


def _transform(source: str, module: str, removed: list[str]) -> tuple[str, set[str]]:
    """The module's source with the functions in ``removed`` (dotted names in this module) stubbed out."""
    tree = parse(source)
    lines = source.split("\n")
    done: set[str] = set()
    targets = {}
    for dotted in removed:
        rest = dotted[len(module) + 1:].split(".")
        targets[tuple(rest)] = dotted
    edits = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (node.name,) in targets:
            edits.append((node, targets[(node.name,)]))
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (node.name, item.name) in targets:
                    edits.append((item, targets[(node.name, item.name)]))
    for node, dotted in sorted(edits, key=lambda e: -e[0].lineno):  # from the bottom: line numbers stay valid
        _stub(lines, node, dotted)
        done.add(dotted)
    return "\n".join(lines), done


_STAND_IN = '''"""Stand-in for ``course_pe.coursework.exercises`` while a submission is graded.

The checks do not run here: the grader runs its own cases, visible and hidden, outside this process, and judges the
answers there. Calling a check returns a report that says so; nothing else of the real module (cases, references,
the grader) is in this copy of course_pe.
"""

__all__ = {names!r}


class CheckReport:
    """What a check returns while your work is graded: nothing was checked here."""

    passed = False
    score = 0.0

    def __init__(self, exercise):
        self.exercise = str(exercise)

    def __str__(self):
        return (f"[{{self.exercise}}] not checked here: while your work is graded, the grader runs its own cases and "
                "judges your function outside this process")

    __repr__ = __str__


def check(exercise_id, fn=None, *, hidden=False, seed=None):
    return CheckReport(exercise_id)


def _stand_in(exercise_id):
    def check_fn(fn=None):
        return CheckReport(exercise_id)

    check_fn.__name__ = check_fn.__qualname__ = "check_" + exercise_id
    return check_fn


{checks}
'''


def _stand_in_source() -> str:
    """The source of the grading build's ``course_pe/coursework/exercises.py`` (see :data:`_STAND_IN`)."""
    from .exercises import EXERCISES

    ids = sorted(EXERCISES)
    checks = "\n".join(f"check_{i} = _stand_in({i!r})" for i in ids)
    return _STAND_IN.format(names=["CheckReport", "check", *[f"check_{i}" for i in ids]], checks=checks)


def grading_build(unavailable: list[str] | tuple[str, ...]) -> Path:
    """A folder holding a ``course_pe`` package without the functions ``unavailable`` (dotted names such as
    ``course_pe.t5.t5_relative_position_bucket`` or ``course_pe.t5.T5RelativeBias.forward``) and without the
    coursework tools (a stand-in ``course_pe.coursework.exercises`` only); built once per grader process for each set
    of names. ``ValueError`` if a name does not exist (the exercise registry and the library disagree)."""
    from .._validation import check_str_sequence

    if not isinstance(unavailable, (list, tuple)):
        raise TypeError(f"unavailable must be a list of dotted names, got {type(unavailable).__name__}")
    names = sorted(set(check_str_sequence("unavailable", list(unavailable), nonempty_items=True)))
    source_folder = package_folder()
    files = sorted(p for p in source_folder.glob("*.py"))
    stamp = hashlib.sha256(repr((names, [(p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in files]))
                           .encode()).hexdigest()[:16]
    root = work_root()
    with _LOCK:
        if stamp in _BUILDS and _BUILDS[stamp].is_dir():
            return _BUILDS[stamp]
        target = root / f"build-{stamp}"
        package = target / "course_pe"
        if target.exists():
            shutil.rmtree(target)
        package.mkdir(parents=True)
        done: set[str] = set()
        stand_in = package / "coursework"
        stand_in.mkdir()
        (stand_in / "__init__.py").write_text('"""Only a stand-in of the course\'s exercise checks exists while a '
                                              'submission is graded."""\n', encoding="utf-8")
        (stand_in / "exercises.py").write_text(_stand_in_source(), encoding="utf-8")
        for path in files:
            module = "course_pe" if path.name == "__init__.py" else f"course_pe.{path.stem}"
            source = path.read_text(encoding="utf-8")
            mine = [n for n in names if module != "course_pe" and ".".join(n.split(".")[:2]) == module]
            if mine:
                source, stubbed = _transform(source, module, mine)
                done |= stubbed
            (package / path.name).write_text(source, encoding="utf-8")
        missing = sorted(set(names) - done)
        if missing:
            shutil.rmtree(target, ignore_errors=True)
            raise ValueError(f"unavailable: names not found in course_pe: {missing}")
        compileall.compile_dir(str(package), quiet=2, workers=1)
        for folder, dirs, filenames in os.walk(target):
            os.chmod(folder, 0o755)
            for filename in filenames:
                os.chmod(os.path.join(folder, filename), 0o644)
        _BUILDS[stamp] = target
        return target
