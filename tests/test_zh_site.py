"""The Chinese edition's typography rules (tools/book_site.py, tools/edition_switch.py), checked without a browser.

The browser checks are in tools/site_test.py (`make test-site`, on both editions): which font draws every glyph of
the formulas of worked_example and rope_proof (and a sample of every other page), with a self-test that must report a
formula drawn in the body font. These tests pin the CSS that makes that pass, so a change shows up before a build.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import book_site  # noqa: E402
import site_test  # noqa: E402


def _rules(css: str) -> list[tuple[str, str]]:
    """(selector, declarations) of each rule of a flat stylesheet (no @media)."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    return [(m.group(1).strip(), m.group(2)) for m in re.finditer(r"([^{}]+)\{([^{}]*)\}", css)]


def test_the_chinese_font_rule_does_not_reach_mathjax_elements():
    """Z1: on a zh-CN page every element matches :lang(zh); a font-family rule on all of them replaced TeX's fonts."""
    css = book_site.cjk_text_css("Course CJK")
    font_rules = [(sel, decl) for sel, decl in _rules(css) if "font-family" in decl and ":lang(zh)" in sel]
    assert font_rules
    for selector, declarations in font_rules:
        for part in selector.split(","):
            part = part.strip()
            targets_code = re.search(r"\b(code|pre|kbd)\s*$", part)
            if not targets_code:
                assert ":not(mjx-container, mjx-container *)" in selector, \
                    f"{selector!r} sets font-family on MathJax's elements too"
    # the exclusion adds no weight: the code rule (one pseudo-class and one type) still wins over the text rule
    assert ":where(:not(mjx-container, mjx-container *))" in css


def test_the_site_test_knows_the_pages_whose_formulas_it_checks_in_full():
    for rel in site_test.MATH_FONT_PAGES:
        assert (ROOT / rel).with_suffix(".ipynb").is_file(), rel
    assert site_test.MATHJAX_FONT_PREFIX == "MathJax_"
