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

  "Defines" covers assignments, ``def``, ``class``, imports, ``globals()["NAME"] = ...`` and
  ``globals().update(NAME=...)`` (keys written out), and ``global`` names assigned in a function (a set-up function).
* **What changes them.** The function sees each name as the whole notebook left it, so with the cell that defines a
  name come the cells after it that change its object in place at their top level (an item or attribute
  assignment, augmented or not, or ``del``: ``cache[d] = ...``, ``cfg.base = ...``, ``Config.base = ...``; a method
  called as a statement or a changing one: ``steps.append(...)``, ``w.fill_(0)``) or that call a function assigning
  or changing it (``setup()`` for ``global BASE``, ``fill()`` for ``cache[d] = ...`` in its body): for a name read
  when the function is called, every such cell after the definition; for one read at a cell's top level, those
  between the definition and that cell. A method called on an imported name (``F.pad(...)``, ``plt.plot(...)``)
  is not a change. Cells that change nothing the functions read (a training loop, a plot) do not run.
* Names of the declared set-up (``math``, ``np``, ``torch``, ``cpe``) are never looked for; a builtin's
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
    has a top-level star import.

    What its top-level code changes in place (see :func:`_changes`): ``stored``: names whose object it changes by an
    item or attribute assignment, an augmented one or a ``del`` (``cache[d] = ...``, ``Config.base = ...``);
    ``methods``: names on which it calls a method as a statement, or a method that changes its object anywhere
    (``steps.append(...)``, ``w.fill_(0)``); ``calls``: names it calls (``setup()``); ``imported``: names it binds by
    an import; ``touches``: for each function it defines, the module-level names that calling the function assigns
    (``global``, ``globals()[...]``) or changes in place."""

    defines: set[str] = field(default_factory=set)
    functions: set[str] = field(default_factory=set)
    early: set[str] = field(default_factory=set)
    late: set[str] = field(default_factory=set)
    star: bool = False
    stored: set[str] = field(default_factory=set)
    methods: set[str] = field(default_factory=set)
    calls: set[str] = field(default_factory=set)
    imported: set[str] = field(default_factory=set)
    touches: dict[str, set[str]] = field(default_factory=dict)
    through_functions: set[str] = field(default_factory=set)


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


#: methods that change their object in place (besides a name ending in one underscore, PyTorch's in-place methods):
#: a call of one counts as a change wherever it is (``x = steps.pop()``); any other method call only as a statement
CHANGING_METHODS = frozenset({
    "append", "extend", "insert", "remove", "pop", "popitem", "clear", "update", "setdefault", "add", "discard",
    "sort", "reverse", "appendleft", "extendleft", "popleft", "rotate", "intersection_update", "difference_update",
    "symmetric_difference_update", "__setitem__", "__delitem__", "__setattr__", "__iadd__", "put", "fill",
    "resize", "setflags", "itemset", "load_state_dict", "register_buffer", "register_parameter", "add_module",
    "register_module", "train", "eval"})


def _root(node: ast.AST) -> str | None:
    """The name at the root of ``a.b[c].d`` (``a``), or None when the root is not a name (``f()[0]``)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_globals(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "globals"
            and not node.args and not node.keywords)


def _globals_keys(node: ast.AST) -> list[str]:
    """The names that ``node`` assigns through ``globals()``: ``globals()["NAME"] = ...`` (``node`` the subscript,
    stored) or ``globals().update(NAME=..., **{"OTHER": ...})`` / ``globals().update({"NAME": ...})`` (``node`` the
    call); names whose keys are not written out are not known (a ``NameError`` for them is explained as usual)."""
    keys: list[str] = []
    if isinstance(node, ast.Subscript) and _is_globals(node.value):
        if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            keys.append(node.slice.value)
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("update",
          "setdefault", "__setitem__") and _is_globals(node.func.value)):
        dicts = [a for a in node.args if isinstance(a, ast.Dict)]
        dicts += [k.value for k in node.keywords if k.arg is None and isinstance(k.value, ast.Dict)]
        keys += [k.arg for k in node.keywords if k.arg is not None]
        keys += [k.value for d in dicts for k in d.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        if node.func.attr != "update" and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            keys.append(node.args[0].value)
    return [k for k in keys if _IDENTIFIER.fullmatch(k)]


def _changes(body: list[ast.AST], into_functions: bool) -> tuple[set[str], set[str], set[str], set[str]]:
    """What the statements ``body`` change in place when they run: the root names of item and attribute stores
    (also augmented, and ``del``), the receivers of method calls that change their object (a method call as a
    statement, or one of :data:`CHANGING_METHODS`, or ``name_``), the names called (``f(...)``, and the object of
    ``setattr(obj, ...)`` counts as stored) and the names assigned through ``globals()``. Function, lambda and
    class-method bodies are left out (they run when called) unless ``into_functions``."""
    stored: set[str] = set()
    methods: set[str] = set()
    calls: set[str] = set()
    through_globals: set[str] = set()
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        n = stack.pop()
        if not into_functions and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            stack.extend(_definition_time(n))
            continue
        if isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.ctx, (ast.Store, ast.Del)):
            keys = _globals_keys(n)
            if keys:
                through_globals.update(keys)
            elif (root := _root(n)) is not None:
                stored.add(root)
        elif isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Attribute):
            if (root := _root(n.value.func.value)) is not None:
                methods.add(root)
        elif isinstance(n, ast.Call):
            func = n.func
            if isinstance(func, ast.Name):
                calls.add(func.id)
                if func.id == "setattr" and n.args and (root := _root(n.args[0])) is not None:
                    stored.add(root)
            elif isinstance(func, ast.Attribute):
                through_globals.update(_globals_keys(n))
                attr = func.attr
                if attr in CHANGING_METHODS or (attr.endswith("_") and not attr.endswith("__")):
                    if (root := _root(func.value)) is not None:
                        methods.add(root)
        stack.extend(reversed(list(ast.iter_child_nodes(n))))
    return stored, methods, calls, through_globals


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
        elif isinstance(n, (ast.Subscript, ast.Call)):
            global_stores.update(_globals_keys(n))  # globals()["NAME"] = ..., globals().update(NAME=...)
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
                stored, methods, _, through_globals = _changes(list(node.body), into_functions=True)
                touched = set(stores) | through_globals | ((stored | methods) & free)
                if touched:
                    self.names.touches[node.name] = touched
            for name in stores:
                self.names.defines.add(name)  # assigned when the function is called
            self.bind(node.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                self.bind((alias.asname or alias.name).split(".")[0])
                self.names.imported.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    self.names.star = True
                else:
                    self.bind(alias.asname or alias.name)
                    self.names.imported.add(alias.asname or alias.name)
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
        stored, methods, calls, through_globals = _changes(list(tree.body), into_functions=False)
    except RecursionError:
        return None
    names = walker.names
    names.stored, names.methods, names.calls = stored, methods, calls
    names.defines |= through_globals  # globals()["NAME"] = ... at the top level binds NAME
    # names that only calling one of its functions assigns (a set-up function's ``global``)
    names.through_functions = names.defines - walker.bound - through_globals
    return names


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

    known_changers: dict[str, list[tuple[int, bool]]] = {}
    known_callers: dict[str, list[int]] = {}
    known_setter_calls: dict[str, list[int]] = {}

    def callers(function: str) -> list[int]:
        """The cells that call ``function`` at their top level."""
        if function not in known_callers:
            known_callers[function] = [i for i in text.containing(function)
                                       if (names := names_of(i)) is not None and function in names.calls]
        return known_callers[function]

    def changers(name: str) -> list[tuple[int, bool]]:
        """The cells whose top-level code changes the object ``name`` refers to, or assigns ``name`` through a
        function it calls, in notebook order; each with whether it is only a method call (``name.m(...)``)."""
        if name not in known_changers:
            found: dict[int, bool] = {}
            setters = []
            for i in text.containing(name):
                names = names_of(i)
                if names is None:
                    continue
                if name in names.stored:
                    found[i] = False
                elif name in names.methods:
                    found[i] = True
                setters += [f for f, touched in names.touches.items() if name in touched]
            calling: set[int] = set()
            for function in setters[:MAX_NAMES]:
                for i in callers(function):
                    found[i] = False
                    calling.add(i)
            known_changers[name] = sorted(found.items())
            known_setter_calls[name] = sorted(calling)
        return known_changers[name]

    def never_assigned(name: str, definer: int) -> bool:
        """Whether ``definer`` defines ``name`` only through a function of it (``global``) that no cell calls from
        ``definer`` on: in the kernel the name would not exist either (or came from a deleted cell)."""
        names = names_of(definer)
        if names is None or name not in names.through_functions:
            return False
        changers(name)
        return not any(i >= definer for i in known_setter_calls.get(name, []))

    def changed_after(name: str, definer: int, end: int, reader: int) -> list[int]:
        """The cells after ``definer`` and before ``end`` that change what ``name`` refers to: in a student's kernel
        the function (or cell ``reader``) sees the object as these cells left it. A method called on a name that the
        definer imports (``F.pad(...)``, ``plt.plot(...)``) does not count."""
        names = names_of(definer)
        imported = names is not None and name in names.imported
        return [i for i, method_only in changers(name)
                if definer < i < end and i != reader and not (method_only and imported)]

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
                continue
            if choose(pick):
                queue.append(pick)
            if never_assigned(name, pick):
                unresolved.add(name)  # explained to the student if the function then raises NameError
            # the cells that then change it in place (or call the set-up function that assigns it), in order
            end = j if at_top and pick < j else len(sources)
            for i in changed_after(name, pick, end, j):
                if choose(i):
                    queue.append(i)
        # names this cell defines and its functions read when called: changed in place by later cells
        for name in sorted((names.late & names.defines) - PROVIDED):
            if name in known_definers or len(known_definers) < MAX_NAMES:
                definers(name)  # counted against the limit on names like every name looked for
                for i in changed_after(name, j, len(sources), j):
                    if choose(i):
                        queue.append(i)
        if unresolved and not stars_taken:  # a star import may define them: those cells run too
            stars_taken = True
            for i in text.matching(_STAR_IMPORT):
                if (n := names_of(i)) is not None and n.star and choose(i):
                    queue.append(i)
    return Selection(sorted(selected), sorted(unresolved), truncated)
