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


# ------------------------------------------------------------------------------------------- Chinese typography


def test_citations_in_chinese_sentences_read_as_chinese():
    """tools/zh_cite.py: "Vaswani 等", "Shaw 和 Uszkoreit", and a Chinese author's Chinese name ("苏剑林等")."""
    import zh_cite
    from pybtex.database import Entry, Person

    style = zh_cite.style_class()()

    def textual(names, **fields):
        entry = Entry("article", persons={"author": [Person(n) for n in names]}, fields=fields)
        return str(zh_cite.zh_names(role="author").format_data({"entry": entry, "style": style}))

    assert textual(["Vaswani, Ashish", "Shazeer, Noam", "Parmar, Niki"]) == "Vaswani 等"
    assert textual(["Shaw, Peter", "Uszkoreit, Jakob"]) == "Shaw 和 Uszkoreit"
    assert textual(["bloc97"]) == "bloc97"
    assert textual(["Su, Jianlin", "Lu, Yu", "Pan, Shengfeng"], author_zh="苏剑林 and Lu, Yu and Pan, Shengfeng") == "苏剑林等"
    # the book's RoFormer entry carries the Chinese name of its first author
    from pybtex.database import parse_file

    roformer = parse_file(str(ROOT / "references.bib")).entries["su2024roformer"]
    assert roformer.fields["author_zh"].split(" and ")[0] == "苏剑林"


def test_no_space_between_chinese_text_and_a_link_with_a_chinese_title():
    from docutils import nodes

    import edition_switch

    class App:
        config = type("Config", (), {"language": "zh_CN"})()

    paragraph = nodes.paragraph("", "", nodes.Text("这正是 "), nodes.reference("", "习题 2"), nodes.Text(" 的论证，见 "),
                                nodes.reference("", "RoPE 的证明"), nodes.Text("。"), nodes.Text("在 "),
                                nodes.reference("", "命题 1"), nodes.Text(" 中，见 "), nodes.reference("", "平移定理"),
                                nodes.Text(" 一章"))
    document = nodes.document(None, None)
    document += paragraph
    edition_switch.tighten_link_spacing(App(), document, "x")
    # the space goes only between two Chinese characters; next to a digit or a Latin letter it stays
    assert paragraph.astext() == "这正是习题 2 的论证，见 RoPE 的证明。在命题 1 中，见平移定理一章"


def test_theorem_titles_take_no_space_before_full_width_parentheses():
    import edition_switch

    body = '<p class="admonition-title"><span class="caption-number">定理 5 </span> （RoPE 的分数）</p>'
    assert edition_switch._CAPTION_SPACE.sub(r"\1\2\3", body) == \
        '<p class="admonition-title"><span class="caption-number">定理 5</span>（RoPE 的分数）</p>'
