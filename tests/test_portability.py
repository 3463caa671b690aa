"""The portability policy: stored notebook outputs carry no digits that another machine would change.

Another CPU, BLAS kernel or thread count changes the low-order digits of a floating-point result, and nbval
compares stored outputs exactly. So every float stored in a TOC notebook (printed text, HTML, Markdown, and the
records that ``glue`` writes) carries at most ``MAX_STORED_SIGNIFICANT_DIGITS`` significant digits; the README's
"Changing a chapter" section states the policy, and ``make test-portable`` re-runs the notebooks under other kernels.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from course_pe.reproducibility import MAX_STORED_SIGNIFICANT_DIGITS, rounded

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import book_tools  # noqa: E402

# A decimal literal: digits, a point, digits, an optional exponent; not part of a longer dotted token (a version
# number such as 2.13.0 or an address such as 127.0.0.1).
FLOAT = re.compile(r"(?<![\w.])(\d+)\.(\d+)(?:[eE][-+]?\d+)?(?![\w]|\.\d)")
TEXT_TYPES = ("text/plain", "text/html", "text/markdown", "text/latex", "application/papermill.record/text/plain")


def significant_digits(integer_part: str, fraction: str) -> int:
    """Significant digits of the literal ``integer_part.fraction`` (leading and trailing zeros do not count)."""
    return len((integer_part + fraction).lstrip("0").rstrip("0"))


def long_floats(text: str) -> list[str]:
    """The float literals in ``text`` that carry more digits than the policy allows."""
    return [m.group(0) for m in FLOAT.finditer(text) if significant_digits(m.group(1), m.group(2)) > MAX_STORED_SIGNIFICANT_DIGITS]


def stored_texts(cell: dict):
    """(where, text) for every textual output of a code cell."""
    for k, output in enumerate(cell.get("outputs", [])):
        if "text" in output:
            text = output["text"]
            yield f"output {k} ({output.get('name', 'stream')})", "".join(text) if isinstance(text, list) else text
        for mime in TEXT_TYPES:
            if mime in output.get("data", {}):
                value = output["data"][mime]
                yield f"output {k} ({mime})", "".join(value) if isinstance(value, list) else str(value)


def violations(nb: dict) -> list[str]:
    found = []
    code_cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for index, cell in enumerate(code_cells, start=1):
        for where, text in stored_texts(cell):
            for literal in long_floats(text):
                found.append(f"code cell {index}, {where}: {literal}")
    return found


def test_the_detector_finds_full_precision_floats_and_nothing_else():
    assert long_floats("0.11981284833633771") == ["0.11981284833633771"]
    assert long_floats("residual 1.1171641004933435, loss 3.0131113035893016e-05") == [
        "1.1171641004933435",
        "3.0131113035893016e-05",
    ]
    assert long_floats("tensor([0.1198, 1.0000, 123.4560]) 1.2346e-16 0.000123 100000.0 12345.6") == []
    assert long_floats("torch 2.13.0 on 127.0.0.1, python 3.11.7; took 1.5s.") == []
    assert long_floats("the value 0.1234567.") == ["0.1234567"]


def test_rounded_values_pass_the_detector():
    for x in (0.11981284833633771, 1.1171641004933435, 3.0131113035893016e-05, -2.0 / 3.0, 123456.789, 1e-300):
        assert long_floats(repr(rounded(x, sig=MAX_STORED_SIGNIFICANT_DIGITS))) == []
        assert long_floats(repr(rounded(x, sig=3))) == []


def test_a_glued_full_precision_float_is_caught():
    record = {"application/papermill.record/text/plain": "0.11981284833633771", "text/plain": "<glue>"}
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [{"output_type": "display_data", "data": record}]}]}
    assert violations(nb) == ["code cell 1, output 0 (application/papermill.record/text/plain): 0.11981284833633771"]


@pytest.mark.parametrize("path", book_tools.toc_notebooks(), ids=lambda p: str(p.relative_to(ROOT / "book")))
def test_stored_outputs_follow_the_portability_policy(path):
    found = violations(json.loads(path.read_text(encoding="utf-8")))
    assert not found, (
        f"floats with more than {MAX_STORED_SIGNIFICANT_DIGITS} significant digits are stored in {path.name}; "
        "round them (course_pe.reproducibility.glue / rounded, or an f-string) to the precision the text uses:\n  "
        + "\n  ".join(found[:20])
    )
