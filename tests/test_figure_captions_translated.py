"""Figure captions live in code-cell metadata (``metadata.mystnb.figure.caption``, the convention of this round); the
Chinese edition must translate them like any other message (tools/zh_edition.py ``translate_notebook``)."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import zh_edition as zh  # noqa: E402

CJK = zh.CJK


def captioned(doc):
    nb = json.loads(zh.doc_path(doc).read_text(encoding="utf-8"))
    return nb, [zh.figure_caption(c) for c in nb["cells"] if zh.figure_caption(c)]


DOCS = [doc for doc in zh.toc_docs() if zh.doc_path(doc).suffix == ".ipynb" and captioned(doc)[1]]


def test_a_caption_is_translated_and_code_is_not():
    cell = {"cell_type": "code", "source": "plt.show()", "outputs": [], "execution_count": 1,
            "metadata": {"mystnb": {"figure": {"caption": "A curve of the score.", "name": "fig-x"}}}}
    nb, placed = zh.translate_notebook({"cells": [cell], "metadata": {}}, {"A curve of the score.": "分数的曲线。"})
    assert nb["cells"][0]["metadata"]["mystnb"]["figure"] == {"caption": "分数的曲线。", "name": "fig-x"}
    assert nb["cells"][0]["source"] == "plt.show()" and placed == {"A curve of the score."}
    assert zh.figure_caption({"cell_type": "markdown", "metadata": {}}) == ""


@pytest.mark.parametrize("doc", DOCS)
def test_every_caption_of_a_chapter_reaches_the_chinese_edition(doc):
    nb, captions = captioned(doc)
    translated, _ = zh.translate_notebook(nb, zh.translations_of(zh.po_path(doc)))
    untranslated = [c for c, cell in zip(captions, [c for c in translated["cells"] if zh.figure_caption(c)])
                    if not CJK.search(zh.figure_caption(cell))]
    assert not untranslated, f"{doc}: captions without a translation in its .po: {untranslated}"
