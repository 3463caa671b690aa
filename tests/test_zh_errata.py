"""The Chinese errata chapter reads as Chinese (issue 36: Z3, M2).

* the source section of each entry (原文小节) has no English note and no half-width separator or parenthesis;
* a chapter named in a Chinese field is a link whose title follows the edition (tests/test_errata.py checks the
  catalogue; here: the Chinese chapter keeps the links, so Sphinx gives them the Chinese titles).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import zh_edition as zh  # noqa: E402

CATALOGUE = yaml.safe_load((ROOT / "book" / "reference" / "errata.yml").read_text(encoding="utf-8"))
NOTES = [english for context, english in zh.SITE_MESSAGES if context == "errata"]


@pytest.fixture(scope="module")
def chinese_entries() -> str:
    nb = json.loads(zh.doc_path(zh.ERRATA_DOC).read_text(encoding="utf-8"))
    nb = zh.zh_errata_notebook(nb, zh.chapter_titles(zh.toc_docs()), zh.site_labels())
    return "\n".join(zh.source_text(o["data"]["text/markdown"]) for c in nb["cells"] if c["cell_type"] == "code"
                     for o in c.get("outputs", []) if "text/markdown" in o.get("data", {}))


@pytest.mark.parametrize("section, expected", [
    ("2.3 (code)", "2.3（代码）"),
    ("Transformer的排列不变性 (code comment)", "Transformer的排列不变性（代码注释）"),
    ("开头段落 (introduction)", "开头段落"),  # the heading says it already
    ("7.3 (introduction)", "7.3（开头段落）"),
    ("绝对位置编码 vs 相对位置编码 (table)", "绝对位置编码 vs 相对位置编码（表格）"),
    ("3 (输出)", "3（输出）"),
    ("设计思想; 为什么使用正弦和余弦函数; 固定位置编码的优势", "设计思想；为什么使用正弦和余弦函数；固定位置编码的优势"),
    ("3. RoPE (步骤1) vs 代码实现", "3. RoPE（步骤1）vs 代码实现"),
    ("代码实现 (_build_cache, forward)", "代码实现（_build_cache, forward）"),
    (1.1, "1.1"),  # YAML reads an unquoted 1.1 as a number
])
def test_a_source_section_in_chinese(section, expected):
    assert zh.zh_section(section, zh.site_labels()) == expected


def test_every_section_note_is_a_translated_site_label():
    labels = zh.site_labels()
    for note in ("code", "code comment", "introduction", "output", "table"):
        assert zh.CJK.search(zh.label(labels, "errata", note)), f"site.po: translate the errata label {note!r}"


def test_the_chinese_entries_show_their_source_section_in_chinese(chinese_entries):
    label = zh.label(zh.site_labels(), "errata", "section")
    fields = re.findall(rf"^\*\*E\d{{3}}-\d{{2}}\*\* · .*?{re.escape(label)}(.*?)(?: · |$)", chinese_entries, re.M)
    assert len(fields) == len(CATALOGUE["errata"])
    english_notes = re.compile(r"\((?:%s)\)" % "|".join(map(re.escape, NOTES)))
    for field in fields:
        assert not english_notes.search(field), field
        assert not re.search(r"[;()]", field), f"half-width separator or parenthesis: {field!r}"


def test_chapter_links_in_the_chinese_entries_keep_their_target(chinese_entries):
    links = re.findall(r"“\{doc\}`(/book/[\w/]+)`”一章", chinese_entries)
    assert len(links) >= 10
    assert not re.search(r"“[A-Z][A-Za-z ,:$\\{}_=0-9]+”（", chinese_entries), "an English chapter title in Chinese prose"
