"""Which code cells of a submission grading runs: the cells that define the graded functions and the cells that define
what those use.

Standard library only: the grader imports this module (as ``course_pe.coursework._cells``) and the sandbox's
template process loads the same file by path (``_child.py`` never imports ``course_pe``), so that a submission's cells
are analysed *inside its sandbox*, under its memory limit and its deadline, before any of its code runs
(:func:`course_pe.coursework.grade.grade_cells`). The analysis is static (nothing is executed) and linear in the
notebook's size: a cell is parsed only if its text contains a name being looked for, IPython syntax is made plain
Python by a one-pass rewrite of the lines (never by IPython's transformer, whose cost grows with the square of a
cell's size), and at most :data:`MAX_NAMES` names are looked for.

The rules (what :func:`select_cells` returns, in notebook order):

* **Functions.** For each graded function, the last :data:`DEFINERS_PER_FUNCTION` cells that define it: a ``def``
  anywhere in the cell, or a top-level assignment or import of that name. A cell that does not parse counts if one
  of its lines starts ``def <name>(``, so that its syntax error is reported. The cell magics that run their body as
  Python in the notebook's namespace (``%%time``, ``%%capture``, ``%%prun``) are analysed through their body.
* **What they use.** A name that a selected cell reads is looked for in the other cells:

  - read inside a function body (when the function is called, after the whole notebook has run): the last cell that
    defines it at its top level, unless the reading cell defines it itself;
  - read at the top level before the cell binds it (``HALF += 1``, ``x = x * 2``, a loop over a list built in
    another cell): the last cell *before* it that defines the name (else the last one after it: the student ran the
    cells out of order). So a constant set in one cell and adjusted in a later one brings both cells.

  "Defines" covers assignments, ``def``, ``class``, imports and ``global`` names assigned in a function (a set-up
  function). Names of the declared set-up (``math``, ``np``, ``torch``, ``cpe``) are never looked for; a builtin's
  name (``pow``, ``max``) is looked for only where a cell defines it. A name that no cell defines brings the cells
  with a star import (``from math import *``), which may define it; names still not found are reported
  (:attr:`Selection.unresolved`), so that a ``NameError`` can be explained to the student. The search is transitive.
* **At most** :data:`MAX_ANSWER_CELLS` **cells** in all (the functions' cells first); when more would be needed the
  selection says so (:attr:`Selection.truncated`).

Threads: CPython 3.11's ``ast.parse`` keeps the depth counter of its AST constructor in state that all threads of
the interpreter share, so two threads parsing at once can fail with ``SystemError: AST constructor recursion depth
mismatch`` (when the garbage collector runs Python code in the middle of a parse and another thread takes over; the
grader's folder mode grades in threads). Every parse in this module and in the grader's own code goes through
:func:`parse`, which holds :data:`PARSE_LOCK`; while threads grade, :class:`serialised_parsing` makes every other
``ast.parse`` of the process (NumPy's, ``inspect``'s) hold it too.
"""

from __future__ import annotations

import ast
import builtins
import re
import textwrap
import threading
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

__all__ = ["DEFINERS_PER_FUNCTION", "MAX_ANSWER_CELLS", "MAX_NAMES", "PARSE_LOCK", "SETUP_NAMES", "Selection",
           "analyse", "parse", "select_cells", "serialised_parsing"]

#: at most this many cells run for one submission
MAX_ANSWER_CELLS = 40
#: for each graded function, at most its last this many defining cells run
DEFINERS_PER_FUNCTION = 4
#: at most this many distinct names are looked for in one notebook
MAX_NAMES = 500
#: names the declared set-up provides (never looked for in other cells)
SETUP_NAMES = frozenset({"math", "np", "torch", "cpe"})
#: cell magics that run their body as Python in the notebook's namespace (``%%timeit`` runs it inside a function)
BODY_MAGICS = frozenset({"time", "capture", "prun"})
_BUILTINS = frozenset(dir(builtins))
#: names IPython puts in a notebook's namespace
IPYTHON_NAMES = frozenset({"get_ipython", "display", "In", "Out", "exit", "quit", "_", "__", "___", "_i", "_ii",
                           "_iii", "_ih", "_oh", "_dh"})
#: names never looked for in other cells
PROVIDED = SETUP_NAMES | IPYTHON_NAMES
_IDENTIFIER = re.compile(r"[^\d\W]\w*")
#: held by every :func:`parse` (``ast.parse`` is not thread-safe in CPython 3.11: see the module docstring)
PARSE_LOCK = threading.RLock()
_INSTALL_LOCK = threading.Lock()
_installed = 0


def parse(source: str) -> ast.Module:
    """``ast.parse(source)``, never at the same time as another :func:`parse` of this process (any thread)."""
    with PARSE_LOCK:
        return ast.parse(source)


class serialised_parsing:
    """While this context lasts, every ``ast.parse`` of the process holds :data:`PARSE_LOCK`, also in code that is not
    ours and that grading threads run: NumPy reads each answer's ``.npy`` header with ``ast.literal_eval``, and
    ``inspect.signature`` parses the text signature of builtins (``numpy.ma`` does it when imported). It replaces
    ``ast.parse`` (which ``ast.literal_eval`` calls) by a locked wrapper and puts the previous one back at the end;
    contexts may nest and overlap across threads."""

    def __enter__(self) -> "serialised_parsing":
        global _installed
        with _INSTALL_LOCK:
            if _installed == 0:
                previous = ast.parse

                def locked(*args, **kwargs):  # type: ignore[no-untyped-def]
                    with PARSE_LOCK:
                        return previous(*args, **kwargs)

                locked.course_pe_previous = previous  # type: ignore[attr-defined]
                ast.parse = locked  # type: ignore[assignment]
            _installed += 1
        return self

    def __exit__(self, *exc: object) -> None:
        global _installed
        with _INSTALL_LOCK:
            _installed -= 1
            if _installed == 0 and hasattr(ast.parse, "course_pe_previous"):
                ast.parse = ast.parse.course_pe_previous  # type: ignore[attr-defined]


@dataclass
class CellNames:
    """What one cell defines and reads (see the module docstring).

    ``defines``: names bound at its top level (and ``global`` names assigned in its functions); ``functions``: names
    of functions defined anywhere in it; ``early``: names read at the top level before the cell binds them;
    ``late``: names read by its function bodies (and class bodies, lambdas) that are not local to them; ``star``: it
    has a top-level star import."""

    defines: set[str] = field(default_factory=set)
    functions: set[str] = field(default_factory=set)
    early: set[str] = field(default_factory=set)
    late: set[str] = field(default_factory=set)
    star: bool = False


@dataclass
class Selection:
    """The cells grading runs (``cells``, indices in notebook order), the names they read that no cell defines
    (``unresolved``, sorted) and whether the cap of :data:`MAX_ANSWER_CELLS` cells (or :data:`MAX_NAMES` names)
    left some out (``truncated``)."""

    cells: list[int]
    unresolved: list[str] = field(default_factory=list)
    truncated: bool = False


# --------------------------------------------------------------------------- IPython syntax, for analysis only

_LINE_RUNS = re.compile(r"^([ \t]*)%(?:time|prun)[ \t]+(?:-\S+[ \t]+)*(.*)$")  # %time STATEMENT
_ASSIGN_ESCAPE = re.compile(r"^([ \t]*)([^\W\d]\w*(?:[ \t]*,[ \t]*[^\W\d]\w*)*)[ \t]*=[ \t]*[%!]")
_ESCAPE = re.compile(r"^([ \t]*)(?:[%!?]|[^\W\d][\w.]*[ \t]*\?\??[ \t]*$)")
_CELL_MAGIC = re.compile(r"%%([\w.]+)[ \t]*(.*)$")


def _plain_python(source: str, depth: int = 0) -> str:
    """``source`` (IPython syntax) rewritten as plain Python with the same definitions, in one pass over its lines:
    a body-running cell magic becomes its body, another cell magic nothing; ``%time STATEMENT`` becomes the
    statement, ``x = !ls`` becomes ``x = None``, other ``%``, ``!`` and ``?`` lines become ``pass``."""
    text = textwrap.dedent(source.replace("\r\n", "\n").replace("\r", "\n"))
    lines = text.split("\n")
    first = next((k for k, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].startswith("%%"):
        magic = _CELL_MAGIC.match(lines[first])
        if magic is None or magic.group(1) not in BODY_MAGICS or depth >= 3:
            return ""  # %%bash, %%writefile, %%timeit ...: no Python definitions
        prefix = ""
        if magic.group(1) == "capture":  # %%capture [options] NAME binds NAME
            names = [a for a in magic.group(2).split() if not a.startswith("-")]
            if names and _IDENTIFIER.fullmatch(names[0]):
                prefix = f"{names[0]} = None\n"
        return prefix + _plain_python("\n".join(lines[first + 1:]), depth + 1)
    out = []
    for line in lines:
        runs = _LINE_RUNS.match(line)
        if runs:
            out.append(runs.group(1) + runs.group(2))
            continue
        assign = _ASSIGN_ESCAPE.match(line)
        if assign:
            out.append(f"{assign.group(1)}{assign.group(2)} = None")
            continue
        escape = _ESCAPE.match(line)
        out.append(f"{escape.group(1)}pass" if escape else line)
    return "\n".join(out)


# --------------------------------------------------------------------------- scopes


def _arguments(args: ast.arguments) -> set[str]:
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    return names


def _definition_time(node: ast.AST) -> list[ast.AST]:
    """The parts of a ``def``, ``class`` or ``lambda`` evaluated where it is defined (decorators, defaults, bases)."""
    parts: list[ast.AST] = list(getattr(node, "decorator_list", []))
    args = getattr(node, "args", None)
    if isinstance(args, ast.arguments):
        parts += [d for d in (*args.defaults, *args.kw_defaults) if d is not None]
        parts += [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg)
                  if a is not None and a.annotation is not None]
    if getattr(node, "returns", None) is not None:
        parts.append(node.returns)  # type: ignore[attr-defined]
    parts += list(getattr(node, "bases", [])) + [k.value for k in getattr(node, "keywords", [])]
    return parts


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef) + _COMPREHENSIONS


def _scope(node: ast.AST) -> tuple[set[str], set[str], set[str]]:
    """For the body of a function, lambda, class or comprehension ``node``: the names it (or a scope inside it) reads
    that are not local to it, the ``global`` names it assigns, and the functions it defines (at any depth)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        local = _arguments(node.args)
        body: list[ast.AST] = list(node.body) if isinstance(node.body, list) else [node.body]
    elif isinstance(node, ast.ClassDef):
        local, body = set(), list(node.body)
    else:  # a comprehension: its targets are local
        local = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        body = [*node.generators, *[getattr(node, k) for k in ("elt", "key", "value") if hasattr(node, k)]]
    stored: set[str] = set()
    loads: set[str] = set()
    declared_global: set[str] = set()
    declared_nonlocal: set[str] = set()
    inner_free: set[str] = set()
    global_stores: set[str] = set()
    functions: set[str] = set()
    stack = list(reversed(body))
    while stack:
        n = stack.pop()
        if isinstance(n, _SCOPES):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stored.add(n.name)
                if not isinstance(n, ast.ClassDef):
                    functions.add(n.name)
            stack.extend(_definition_time(n))
            free, stores, defined = _scope(n)
            inner_free |= free
            global_stores |= stores
            functions |= defined
            continue
        if isinstance(n, ast.Global):
            declared_global.update(n.names)
        elif isinstance(n, ast.Nonlocal):
            declared_nonlocal.update(n.names)
        elif isinstance(n, ast.Name):
            (loads if isinstance(n.ctx, ast.Load) else stored).add(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            stored.update((a.asname or a.name).split(".")[0] for a in n.names if a.name != "*")
        elif isinstance(n, ast.ExceptHandler) and n.name:
            stored.add(n.name)
        elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            stored.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            stored.add(n.rest)
        stack.extend(ast.iter_child_nodes(n))
    global_stores |= stored & declared_global
    local |= stored - declared_global
    free = (loads | inner_free) - local - declared_nonlocal
    return free, global_stores, functions


class _TopLevel:
    """Walks a cell's top-level statements in the order they run, tracking what is bound when each name is read."""

    def __init__(self) -> None:
        self.names = CellNames()
        self.bound: set[str] = set()

    def bind(self, name: str) -> None:
        self.bound.add(name)
        self.names.defines.add(name)

    def read(self, name: str) -> None:
        if name not in self.bound:
            self.names.early.add(name)

    def expression(self, node: ast.AST | None) -> None:
        if node is None:
            return
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, _SCOPES):  # a lambda reads at call time; a comprehension now (treated the same)
                stack.extend(_definition_time(n))
                free, stores, defined = _scope(n)
                self.names.late |= free
                self.names.functions |= defined
                for name in stores:
                    self.bind(name)
                continue
            if isinstance(n, ast.NamedExpr):
                self.expression(n.value)
                self.target(n.target)
                continue
            if isinstance(n, ast.Name):
                if isinstance(n.ctx, ast.Load):
                    self.read(n.id)
                else:
                    self.bind(n.id)
                continue
            stack.extend(reversed(list(ast.iter_child_nodes(n))))

    def target(self, node: ast.AST) -> None:
        """An assignment target: its names are bound, the rest (subscripts, attributes) read."""
        if isinstance(node, ast.Name):
            self.bind(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                self.target(element)
        elif isinstance(node, ast.Starred):
            self.target(node.value)
        else:
            self.expression(node)

    def statements(self, body: list[ast.stmt]) -> None:
        for node in body:
            self.statement(node)

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for part in _definition_time(node):
                self.expression(part)
            free, stores, defined = _scope(node)
            self.names.late |= free
            self.names.functions |= defined
            if not isinstance(node, ast.ClassDef):
                self.names.functions.add(node.name)
            for name in stores:
                self.names.defines.add(name)  # assigned when the function is called
            self.bind(node.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                self.bind((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    self.names.star = True
                else:
                    self.bind(alias.asname or alias.name)
        elif isinstance(node, ast.Assign):
            self.expression(node.value)
            for target in node.targets:
                self.target(target)
        elif isinstance(node, ast.AugAssign):
            self.expression(node.value)
            if isinstance(node.target, ast.Name):
                self.read(node.target.id)
            self.target(node.target)
        elif isinstance(node, ast.AnnAssign):
            self.expression(node.annotation)
            self.expression(node.value)
            if node.value is not None or not isinstance(node.target, ast.Name):
                self.target(node.target)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self.expression(node.iter)
            self.target(node.target)
            self.statements(node.body)
            self.statements(node.orelse)
        elif isinstance(node, (ast.While, ast.If)):
            self.expression(node.test)
            self.statements(node.body)
            self.statements(node.orelse)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self.expression(item.context_expr)
                if item.optional_vars is not None:
                    self.target(item.optional_vars)
            self.statements(node.body)
        elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            self.statements(node.body)
            for handler in node.handlers:
                self.expression(handler.type)
                if handler.name:
                    self.bind(handler.name)
                self.statements(handler.body)
            self.statements(node.orelse)
            self.statements(node.finalbody)
        elif isinstance(node, ast.Match):
            self.expression(node.subject)
            for case in node.cases:
                for n in ast.walk(case.pattern):
                    if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
                        self.bind(n.name)
                    elif isinstance(n, ast.MatchMapping) and n.rest:
                        self.bind(n.rest)
                    elif isinstance(n, ast.expr):
                        self.expression(n)
                self.expression(case.guard)
                self.statements(case.body)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            pass
        else:  # Expr, Return, Raise, Assert, Delete, Pass ...
            for child in ast.iter_child_nodes(node):
                self.expression(child)


def analyse(source: str) -> CellNames | None:
    """What the cell ``source`` (IPython syntax allowed) defines and reads, or None if it is not Python even after
    its IPython syntax is rewritten (or is too deeply nested to analyse)."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        try:
            tree = parse(_plain_python(source))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
    walker = _TopLevel()
    try:
        walker.statements(tree.body)
    except RecursionError:
        return None
    return walker.names


# --------------------------------------------------------------------------- selection


class _Text:
    """The notebook's code cells as one string, to find the cells in which a name appears without a Python loop over
    every cell (identifiers are compared in Python's NFKC form)."""

    def __init__(self, sources: list[str]) -> None:
        import unicodedata

        texts = [s if s.isascii() else unicodedata.normalize("NFKC", s) for s in sources]
        self.starts: list[int] = []
        position = 0
        for text in texts:
            self.starts.append(position)
            position += len(text) + 1
        self.text = "\0".join(texts)

    def cell_at(self, position: int) -> int:
        return bisect_right(self.starts, position) - 1

    def next_cell(self, k: int) -> int:
        return self.starts[k + 1] if k + 1 < len(self.starts) else len(self.text)

    def containing(self, name: str) -> list[int]:
        """Indices of the cells whose text contains ``name``, in order."""
        found = []
        position = self.text.find(name)
        while position != -1:
            k = self.cell_at(position)
            found.append(k)
            position = self.text.find(name, self.next_cell(k))
        return found

    def matching(self, pattern: re.Pattern[str]) -> list[int]:
        """Indices of the cells in which ``pattern`` matches, in order."""
        found = []
        match = pattern.search(self.text)
        while match is not None:
            k = self.cell_at(match.start())
            found.append(k)
            match = pattern.search(self.text, self.next_cell(k))
        return found


_STAR_IMPORT = re.compile(r"\bimport[ \t(\\]*\*")


def select_cells(sources: list[str], functions: list[str], limit: int = MAX_ANSWER_CELLS) -> Selection:
    """The cells of ``sources`` (a notebook's code cells) that grading runs for ``functions`` (see the module
    docstring), at most ``limit``."""
    text = _Text(sources)
    analysed: dict[int, CellNames | None] = {}
    known_definers: dict[str, list[int]] = {}
    truncated = False

    def names_of(i: int) -> CellNames | None:
        if i not in analysed:
            analysed[i] = analyse(sources[i])
        return analysed[i]

    def definers(name: str) -> list[int]:
        nonlocal truncated
        if name not in known_definers:
            if len(known_definers) >= MAX_NAMES:
                truncated = True
                return []
            known_definers[name] = [i for i in text.containing(name)
                                    if (names := names_of(i)) is not None and name in names.defines]
        return known_definers[name]

    selected: list[int] = []
    chosen: set[int] = set()

    def choose(i: int) -> bool:
        nonlocal truncated
        if i in chosen:
            return False
        if len(selected) >= limit:
            truncated = True
            return False
        selected.append(i)
        chosen.add(i)
        return True

    for function in functions:
        pattern = re.compile(rf"\s*(async\s+)?def\s+{re.escape(function)}\s*\(")
        found = []
        for i in text.containing(function):
            names = names_of(i)
            if names is not None:
                if function in names.functions or function in names.defines:
                    found.append(i)
            elif any(pattern.match(line) for line in sources[i].splitlines()):
                found.append(i)
        for i in found[-DEFINERS_PER_FUNCTION:]:
            choose(i)
    unresolved: set[str] = set()
    stars_taken = False
    queue = list(selected)
    while queue:
        j = queue.pop(0)
        names = names_of(j)
        if names is None:
            continue
        wanted = [(n, False) for n in sorted(names.late - names.defines)] + [(n, True) for n in sorted(names.early)]
        for name, at_top in wanted:
            if name in PROVIDED:
                continue
            cells = [i for i in definers(name) if i != j]
            if at_top:  # the value it has when this cell runs: set before it (else, out of order, after it)
                before = cells[: bisect_left(cells, j)]
                pick = before[-1] if before else (None if name in _BUILTINS else (cells[-1] if cells else None))
            else:  # read when the function is called: the notebook's last definition
                pick = cells[-1] if cells else None
            if pick is None:
                if name not in _BUILTINS:
                    unresolved.add(name)
            elif choose(pick):
                queue.append(pick)
        if unresolved and not stars_taken:  # a star import may define them: those cells run too
            stars_taken = True
            for i in text.matching(_STAR_IMPORT):
                if (n := names_of(i)) is not None and n.star and choose(i):
                    queue.append(i)
    return Selection(sorted(selected), sorted(unresolved), truncated)
