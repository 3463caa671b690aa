"""The grader reproduces the state a graded function sees in the student's kernel (issue 34, red team r2, F1 and F2).

A function that reads a module-level object sees it as the whole notebook left it: filled by later cells in place
(``cache[d] = ...``, ``cfg.base = ...``, ``steps.append(...)``, a class attribute set), or assigned by a set-up
function that a later cell calls (``global BASE`` in ``setup()``, ``globals()["BASE"] = ...``). Each of these
notebooks passes the check cell in the student's kernel; each was graded 0 (``KeyError: 2``, ``NameError: BASE``)
because the grader ran only the cell that creates the object or defines the set-up function. The selection now also
takes the cells that change a selected name in place or call the function that assigns it, in notebook order, and
still leaves out cells that touch nothing the function reads (a training cell, a plot).
"""

from __future__ import annotations

import linecache

import pytest

from course_pe.coursework import _cells
from course_pe.coursework.exercises import GRADING_SETUP, check
from course_pe.coursework.grade import answer_cells, grade_cells

SETUP = "import math\nimport numpy as np\nimport torch\nimport course_pe as cpe"
#: a correct sinusoidal table that reads its frequencies from ``{freq}`` (an expression of the notebook's state)
TABLE = ("def sinusoidal_table(num_positions, d_model):\n"
         "    angles = np.arange(num_positions)[:, None] * {freq}\n"
         "    table = np.empty((num_positions, d_model))\n"
         "    table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles)\n"
         "    return table")
INV = "1.0 / (10000 ** (np.arange(0, d, 2) / d))"
CHECK = "print(cpe.exercises.check_sinusoidal_table(sinusoidal_table))"
TRAINING = ("losses = []\nfor step in range(3):\n    losses.append(step * 0.5)\n"
            "raise RuntimeError('a training cell must not run in grading')")

#: name -> (cells, the cells the grader must run); every notebook is correct in the student's kernel
NOTEBOOKS = {
    # F1: a later cell fills the object in place
    "F1 dict filled by a later loop (red team's notebook)": (
        [SETUP, "inv_freq_cache = {}  # d_model -> frequencies",
         f"for d in range(2, 257, 2):\n    inv_freq_cache[d] = {INV}",
         TABLE.format(freq="inv_freq_cache[d_model]"), CHECK], [1, 2, 3]),
    "F1 object attribute set later": (
        [SETUP, "import types\ncfg = types.SimpleNamespace()", TRAINING, "cfg.base = 10000.0",
         TABLE.format(freq="cfg.base ** (-np.arange(0, d_model, 2) / d_model)"), CHECK], [1, 3, 4]),
    "F1 class attribute set later": (
        [SETUP, "class Config:\n    base = 1.0", "Config.base = 10000.0",
         TABLE.format(freq="Config.base ** (-np.arange(0, d_model, 2) / d_model)")], [1, 2, 3]),
    "F1 list appended to": (
        [SETUP, "bases = []", TRAINING, "bases.append(10000.0)",
         TABLE.format(freq="bases[-1] ** (-np.arange(0, d_model, 2) / d_model)")], [1, 3, 4]),
    "F1 augmented item assignment": (
        [SETUP, "cfg = {'base': 5000.0}", "cfg['base'] *= 2",
         TABLE.format(freq="cfg['base'] ** (-np.arange(0, d_model, 2) / d_model)")], [1, 2, 3]),
    "F1 object created in the function's cell, filled later": (
        ["inv_freq_cache = {}\n" + TABLE.format(freq="inv_freq_cache[d_model]"), TRAINING,
         f"for d in range(2, 257, 2):\n    inv_freq_cache[d] = {INV}", CHECK], [0, 2]),
    "F1 filled by a function a later cell calls": (
        [SETUP, "cache = {}", f"def fill(top):\n    for d in range(2, top, 2):\n        cache[d] = {INV}",
         "fill(257)", TABLE.format(freq="cache[d_model]")], [1, 2, 3, 4]),
    "F1 filled before the function's constant is built from it": (
        [SETUP, "cfg = {}", "cfg['base'] = 10000.0", "BASE = cfg['base']", "cfg['base'] = -1.0  # after BASE",
         TABLE.format(freq="BASE ** (-np.arange(0, d_model, 2) / d_model)")], [1, 2, 3, 5]),
    # F2: a set-up function that assigns the global, called in a cell of its own
    "F2 global set by setup() called later (red team's notebook)": (
        [SETUP, "def setup(base=10000.0):\n    global BASE\n    BASE = base", "setup()",
         TABLE.format(freq="BASE ** (-np.arange(0, d_model, 2) / d_model)"), CHECK], [1, 2, 3]),
    "F2 globals()[...] in a set-up function": (
        [SETUP, "def setup(base):\n    globals()['BASE'] = base", TRAINING, "setup(10000.0)",
         TABLE.format(freq="BASE ** (-np.arange(0, d_model, 2) / d_model)")], [1, 3, 4]),
    "F2 globals()[...] at the top level": (
        [SETUP, "globals()['BASE'] = 10000.0", TABLE.format(freq="BASE ** (-np.arange(0, d_model, 2) / d_model)")],
        [1, 2]),
    "F2 globals().update(...)": (
        [SETUP, "globals().update(BASE=10000.0)", "globals().update({'HALF': 2})",
         TABLE.format(freq="BASE ** (-np.arange(0, d_model, HALF) / d_model)")], [1, 2, 3]),
}

#: changes the function cannot see: these cells must not run
UNRELATED = {
    "a change before the name is bound again": (
        [SETUP, "cfg = {}", "cfg['base'] = -1.0", "cfg = {'base': 10000.0}",
         TABLE.format(freq="cfg['base'] ** (-np.arange(0, d_model, 2) / d_model)")], [3, 4]),
    "method calls on an imported module": (
        ["import torch.nn.functional as F",
         TABLE.format(freq="F.softmax(torch.zeros(1), 0).item() * 10000.0 ** (-np.arange(0, d_model, 2) / d_model)"),
         TRAINING.replace("losses.append", "F.relu(torch.ones(1)); losses.append")], [0, 1]),
    "a training cell that changes other names": (
        [SETUP, "BASE = 10000.0", TRAINING, TABLE.format(freq="BASE ** (-np.arange(0, d_model, 2) / d_model)")],
        [1, 3]),
}


def _kernel(sources: list[str]) -> dict:
    """Run the cells in order as a Jupyter kernel does, skipping the training cells (the student's kernel)."""
    namespace: dict = {"__name__": "__main__"}
    for i, source in enumerate([GRADING_SETUP, *sources]):
        if "training cell" in source:
            continue
        filename = f"<cell-state test cell {i}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), namespace)
    return namespace


@pytest.mark.parametrize("case", sorted(NOTEBOOKS))
def test_the_cells_that_change_what_the_function_reads_are_selected(case):
    cells, expected = NOTEBOOKS[case]
    assert answer_cells(cells, ["sinusoidal_table"]) == expected


@pytest.mark.parametrize("case", sorted(UNRELATED))
def test_cells_that_change_nothing_the_function_reads_are_not_selected(case):
    cells, expected = UNRELATED[case]
    assert answer_cells(cells, ["sinusoidal_table"]) == expected


@pytest.mark.parametrize("case", sorted(NOTEBOOKS))
def test_the_notebook_passes_its_check_in_the_kernel(case):
    """The premise: in the student's kernel each notebook's function is correct."""
    cells, _ = NOTEBOOKS[case]
    namespace = _kernel([c for c in cells if c != CHECK])
    assert check("sinusoidal_table", namespace["sinusoidal_table"]).passed


def test_the_grader_gives_these_notebooks_full_marks():
    """End to end in the sandbox: every notebook above scores 1/1 (each scored 0 before: KeyError, NameError,
    AttributeError), and the training cell (which raises) never runs."""
    failures = {}
    for case, (cells, _) in {**NOTEBOOKS, **UNRELATED}.items():
        report = grade_cells(list(cells), "sinusoidal", exercises=["sinusoidal_table"], seed=7)
        if report.score != 1 or report.cell_errors:
            failures[case] = report.text()
    assert not failures, failures


def test_changers_are_bounded_like_names():
    """Many cells changing many names in place: the selection stays capped and says so."""
    cells = [f"H{k} = {{}}" for k in range(60)] + [f"H{k}['x'] = {k}" for k in range(60)]
    cells.append("def t5_bucket(r):\n    return " + " + ".join(f"H{k}['x']" for k in range(60)))
    selection = _cells.select_cells(cells, ["t5_bucket"])
    assert len(selection.cells) == _cells.MAX_ANSWER_CELLS and selection.truncated


# ----------------------------------------------------------------------------- F5: the check looks where the grader does

SLOPES = ("def alibi_slopes(num_heads):\n"
          "    closest = 2 ** math.floor(math.log2(num_heads))\n"
          "    powers = lambda m: [2 ** (-8 * (k + 1) / m) for k in range(m)]\n"
          "    return powers(closest) + powers(2 * closest)[0::2][: num_heads - closest]\n")
#: the red team's cell (its test's local ``t`` is also the function's local name)
HYPOTHESIS_TABLE = ("def sinusoidal_table(n, d):\n"
                    "    pos = np.arange(n)[:, None]\n"
                    "    w = 10000.0 ** (-np.arange(0, d, 2) / d)\n"
                    "    t = np.zeros((n, d)); t[:, 0::2] = np.sin(pos*w); t[:, 1::2] = np.cos(pos*w)\n"
                    "    return t\n\n"
                    "from hypothesis import given, strategies as st\n\n"
                    "@given(st.integers(1, 50), st.integers(1, 32))\n"
                    "def test_rows_have_unit_pairs(n, half):\n"
                    "    t = sinusoidal_table(n, 2 * half)\n"
                    "    assert np.allclose(t[:, 0::2] ** 2 + t[:, 1::2] ** 2, 1.0)\n\n"
                    "test_rows_have_unit_pairs()")
#: name -> (exercise, chapter, the cell, whether the check and the grader pass it)
SELF_TESTS = {
    "F5 a hypothesis test after the def (red team)": ("sinusoidal_table", "sinusoidal", HYPOTHESIS_TABLE, True),
    "F5 a comparison with the library after the def (red team)": (
        "alibi_slopes", "relative",
        SLOPES + "\n# my own sanity check against the library\n"
                 "assert np.allclose(alibi_slopes(12), cpe.alibi_slopes(12, dtype=torch.float64).numpy())\n", True),
    # what the function reaches is still refused, by both
    "the library before the def": (
        "alibi_slopes", "relative",
        "print(cpe.alibi_slopes(4, dtype=torch.float64))\n" + SLOPES, False),
    "a module grading lacks, imported after the def and used by it": (
        "sinusoidal_table", "sinusoidal",
        "def sinusoidal_table(n, d):\n    st.integers(1, 2)\n"
        "    return np.stack([np.sin(np.arange(n)[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d)),\n"
        "                     np.cos(np.arange(n)[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d))], -1).reshape(n, d)\n"
        "\nfrom hypothesis import strategies as st\n", False),
    "a table precomputed with the library after the def": (
        "alibi_slopes", "relative",
        "def alibi_slopes(num_heads):\n    return TABLE[num_heads]\n\n"
        "TABLE = {n: cpe.alibi_slopes(n, dtype=torch.float64).tolist() for n in range(1, 5000)}\n", False),
}


@pytest.mark.parametrize("case", sorted(SELF_TESTS))
def test_the_check_and_the_grader_agree_on_self_tests_in_the_answer_cell(case):
    """F5: a correct answer whose cell also holds a self-test after the ``def`` (a hypothesis test, an assert
    against the library) failed the check (its static scan read the whole cell: "hypothesis is not available", "calls
    cpe.alibi_slopes") while the grader, which runs the cell, gave full marks. The check now scans what decides the
    grader's result: the statements before the def, the def, and what the function reads that is set later."""
    exercise, chapter, cell, passes = SELF_TESTS[case]
    namespace = _kernel([SETUP, cell])
    verdict = check(exercise, namespace[exercise])
    assert verdict.passed is passes, str(verdict)
    report = grade_cells([SETUP, cell], chapter, exercises=[exercise], seed=7)
    assert (report.score == 1) is passes, report.text()


def test_a_set_up_function_no_cell_calls_is_explained():
    """F2's other side: a ``global`` assigned by a set-up function that no cell calls does not exist in the kernel
    either; the NameError is explained (the name is reported as unresolved), and the D5 notebook (the call in the
    same cell) still counts as defining it."""
    cells = [SETUP, "def setup(base=10000.0):\n    global BASE\n    BASE = base",
             TABLE.format(freq="BASE ** (-np.arange(0, d_model, 2) / d_model)")]
    selection = _cells.select_cells(cells, ["sinusoidal_table"])
    assert selection.cells == [1, 2] and selection.unresolved == ["BASE"]
    report = grade_cells(cells, "sinusoidal", exercises=["sinusoidal_table"], seed=7)
    assert report.score == 0 and "call the set-up function that sets it (`global BASE`)" in report.text()
    called_here = [SETUP, cells[1] + "\nsetup()", cells[2]]
    assert _cells.select_cells(called_here, ["sinusoidal_table"]).unresolved == []
