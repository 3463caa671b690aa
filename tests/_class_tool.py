"""The class-submissions tool, loaded as a module: its correct student answers serve the grader's and the exercise
checks' tests, so that one correct solution (written without course_pe) is kept in one place."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

TOOL = Path(__file__).resolve().parent.parent / "tools" / "make_class_submissions.py"


def class_submissions_tool() -> ModuleType:
    """``tools/make_class_submissions.py`` as a module (it has no side effects on import)."""
    spec = importlib.util.spec_from_file_location("make_class_submissions", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def correct_t5_source() -> str:
    """Source of a correct ``t5_bucket`` (T5's bucket function written out with a float32 logarithm)."""
    return class_submissions_tool().T5
