"""The generation chapter's coding exercise (``t5_position_bias``) grades end to end in the three paths: ``make grade``,
Gradescope's ``run_autograder`` (rehearsed here) and nbgrader (in ``test_nbgrader_release.py``'s round trip, which
releases every chapter with coding exercises). Its check cell runs without the chapter's training cells."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from _grading import notebook
from course_pe.coursework import gradescope
from course_pe.coursework.exercises import EXERCISES, check
from course_pe.coursework.grade import main
from course_pe.coursework.sandbox import containment
from test_gradescope import autograder_root, notebook_bytes, run_script, validate

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = ROOT / "book" / "part2" / "generation.ipynb"
RIGHT = 'def t5_position_bias(attn, layer, s):\n    return attn.t5(s, layer["k"].shape[2])\n'
AT_ZERO = 'def t5_position_bias(attn, layer, s):\n    return attn.t5(s, layer["k"].shape[2], query_offset=0)\n'
FROM_IDS = ("import torch\n\ndef t5_position_bias(attn, layer, s):\n    pos = layer['pos']\n"
            "    rel = pos[:, None, :] - pos[:, -s:, None]  # key - query, from the cached position ids\n"
            "    b = cpe.t5_relative_position_bucket(rel, bidirectional=False, num_buckets=attn.t5.num_buckets,\n"
            "                                        max_distance=attn.t5.max_distance)\n"
            "    return attn.t5.embedding(b).permute(0, 3, 1, 2)  # (batch, heads, s, t)\n")


def test_the_exercise_is_registered_for_the_generation_chapter():
    exercise = EXERCISES["t5_position_bias"]
    assert exercise.chapter == "generation" and exercise.harness and not exercise.library
    for answer, passes in ((RIGHT, True), (FROM_IDS, True), (AT_ZERO, False)):
        namespace: dict = {}
        exec("import course_pe as cpe\n" + answer, namespace)
        for seed in range(5):
            assert check("t5_position_bias", namespace["t5_position_bias"], hidden=True, seed=seed).passed is passes


def test_the_check_cell_needs_no_training_cell():
    """The check cell uses only names defined by the set-up cell, the cell that defines run and new_cache, and the
    answer: no model, task, batch or tokens from the training cells (student report, C2)."""
    import ast

    nb = nbformat.read(CHAPTER, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    check_cell = next(c for c in cells if "check_t5_position_bias" in c.source)
    used = {n.id for n in ast.walk(ast.parse(check_cell.source)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    defined_here = {n.id for n in ast.walk(ast.parse(check_cell.source)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    allowed = {"cpe", "torch", "run", "new_cache", "t5_position_bias", "print", "len", "range"}
    assert used - defined_here <= allowed, used - defined_here - allowed
    assert "PASSED" in "".join(o.get("text", "") for o in check_cell.outputs)


@pytest.mark.skipif(containment().level != "full", reason="full isolation (root, namespaces) is not available here")
def test_make_grade_grades_the_generation_chapter(tmp_path, capsys):
    folder = tmp_path / "generation"
    folder.mkdir()
    solution = next(c.source for c in nbformat.read(CHAPTER, as_version=4).cells
                    if "solution" in c.metadata.get("tags", []) and "def t5_position_bias" in c.source)
    notebook(folder, "book", solution)
    notebook(folder, "ids", FROM_IDS)
    notebook(folder, "zero", AT_ZERO)
    notebook(folder, "crash", "import einops\n" + RIGHT)
    out = tmp_path / "grades"
    assert main(["--dir", str(folder), "--out", str(out), "--jobs", "2"]) == 0
    reports = {p.stem: json.loads(p.read_text()) for p in (out / "generation").glob("*.json")}
    assert {s: r["score"] for s, r in reports.items()} == {"book": 1, "ids": 1, "zero": 0, "crash": 0}
    assert "every cached key got the bias of offset 0" in reports["zero"]["exercises"][0]["message"]
    assert "cell 1 ('import einops') raised ModuleNotFoundError" in reports["crash"]["exercises"][0]["message"]
    assert "generation: coding" in (out / "canvas.csv").read_text()


def test_gradescope_grades_the_generation_chapter(tmp_path):
    out = tmp_path / "zips"
    assert gradescope.main(["build", "generation", "--out", str(out)]) == 0
    zip_path = out / "generation" / "autograder.zip"
    for name, given, score in (("right", RIGHT, 1.0), ("at-zero", AT_ZERO, 0.0), ("crash", "import einops\n" + RIGHT, 0.0)):
        root = autograder_root(tmp_path / name, zip_path, {"generation.ipynb": notebook_bytes(given)})
        code, output, results = run_script(root)
        assert code == 0 and results is not None, output
        validate(results)
        assert results["score"] == score, results
        assert [t["name"] for t in results["tests"]] == ["t5_position_bias: visible cases",
                                                         "t5_position_bias: graded (visible and hidden cases)"]
        if name == "crash":  # the cause, with the cell as JupyterLab numbers it (a markdown cell comes first)
            assert "why: cell 2 ('import einops') raised ModuleNotFoundError" in results["tests"][0]["output"]
