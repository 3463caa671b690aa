"""Figures in the Chinese edition (issue 36): drawn text from one label table, captions and text alternatives from
the catalogues.

* ``course_pe.plotting.t`` gives a figure's text in English, or in Chinese (``LABELS_ZH``) while the Chinese copy is
  drawn; every text the book's notebooks and the library draw through ``t`` has its Chinese;
* ``bilingual_figure`` stores the English PNG (exactly what ``plt.show()`` stored before) and a Chinese PNG in the
  output's metadata; with no font that draws Chinese it stores none, and a character no font draws is an error;
* tools/zh_edition.py puts the Chinese PNG and the translated caption and text alternative into the Chinese notebooks;
  every stored bilingual figure of the book has its Chinese copy, and every caption and text alternative is translated.
"""

from __future__ import annotations

import ast
import base64
import copy
import json
import string
import sys
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from course_pe import plotting  # noqa: E402
from course_pe.plotting import LABELS_ZH, bilingual_figure, drawn_in, t  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import zh_edition as zh  # noqa: E402

NOTEBOOKS = [zh.doc_path(d) for d in zh.toc_docs() if zh.doc_path(d).suffix == ".ipynb"]
PNG = b"\x89PNG\r\n\x1a\n"


def test_t_gives_english_outside_and_chinese_inside_the_chinese_drawing():
    text = r"Sinusoidal table, $d_{{\mathrm{{model}}}} = {d}$"
    assert t(text, d=16) == r"Sinusoidal table, $d_{\mathrm{model}} = 16$"
    with drawn_in("zh_CN"):
        assert t(text, d=16) == r"正弦位置编码表，$d_{\mathrm{model}} = 16$"
        assert plotting.figure_language() == "zh_CN"
        with pytest.raises(KeyError, match="LABELS_ZH"):
            t("a text nobody translated")
    assert plotting.figure_language() == "en"
    assert t("a text nobody translated") == "a text nobody translated"  # English is drawn as it is
    with pytest.raises(ValueError, match="language"):
        with drawn_in("fr"):
            pass


def _drawn_texts(source: str) -> list[str]:
    """The first argument of every ``t(...)`` call and the default of every ``_default(...)`` call in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
            index = {"t": 0, "_default": 1}.get(node.func.id)
            if index is not None and len(node.args) > index and isinstance(node.args[index], ast.Constant):
                found.append(node.args[index].value)
    return found


def test_every_text_drawn_through_t_has_its_chinese():
    drawn = {text: "course_pe/plotting.py" for text in _drawn_texts((ROOT / "course_pe" / "plotting.py").read_text())}
    for path in NOTEBOOKS:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code" and "t(" in zh.source(cell):
                source = "\n".join(line for line in zh.source(cell).splitlines() if not line.lstrip().startswith(("%", "!")))
                drawn.update({text: str(path.relative_to(ROOT)) for text in _drawn_texts(source)})
    assert "dimension" in drawn and r"Binary digits of $p$" in drawn
    missing = {text: where for text, where in drawn.items() if text not in LABELS_ZH}
    assert not missing, f"add to course_pe.plotting.LABELS_ZH: {missing}"
    for english, chinese in LABELS_ZH.items():
        assert zh.CJK.search(chinese), f"LABELS_ZH[{english!r}] is not Chinese: {chinese!r}"
        assert english.count("$") == chinese.count("$"), f"LABELS_ZH[{english!r}]: the math changed"
        assert _fields(english) == _fields(chinese), f"LABELS_ZH[{english!r}]: the format fields changed"


def _fields(text: str) -> list[str]:
    """The str.format fields of a text (a doubled brace is a literal brace)."""
    return sorted(name for _, name, _, _ in string.Formatter().parse(text) if name is not None)


def _figure(titles: list[str]):
    def draw():
        fig, ax = plt.subplots(figsize=(3, 2))
        plotting.plot_encoding_heatmap(np.eye(2), ax=ax)
        titles.append((ax.get_title(), ax.get_xlabel(), ax.get_ylabel()))
        return fig
    return draw


def test_a_bilingual_figure_shows_english_and_stores_chinese():
    titles: list = []
    before = set(plt.get_fignums())
    figure = bilingual_figure(_figure(titles))
    assert set(plt.get_fignums()) == before, "both copies are closed"
    assert titles[0] == ("Positional encoding", "dimension", "position $p$")
    assert titles[1] == ("位置编码", "维度", "位置 $p$")
    data, metadata = figure._repr_mimebundle_()
    english = base64.b64decode(data["image/png"])
    chinese = base64.b64decode(metadata["course_pe"]["zh_CN"]["image/png"])
    assert english.startswith(PNG) and chinese.startswith(PNG) and english != chinese
    assert data["text/plain"] == "<Figure size 300x200 with 2 Axes>"
    # the English copy is the PNG the notebook's inline backend stores for the same figure
    fig = _figure([])()
    assert plotting._png(fig) == english
    plt.close(fig)


def test_without_a_chinese_font_no_chinese_copy_is_stored(monkeypatch):
    monkeypatch.setattr(plotting, "cjk_font_family", lambda: None)
    data, metadata = bilingual_figure(_figure([]))._repr_mimebundle_()
    assert metadata == {"course_pe": {"zh_CN": None}} and data["image/png"]


def test_a_character_no_font_draws_is_an_error(monkeypatch):
    monkeypatch.setattr(plotting, "cjk_font_family", lambda: "DejaVu Sans")  # a font without Chinese
    before = set(plt.get_fignums())
    with pytest.raises(ValueError, match="cannot draw"):
        bilingual_figure(_figure([]))
    assert set(plt.get_fignums()) == before


def test_draw_must_return_a_figure():
    with pytest.raises(TypeError, match="Figure"):
        bilingual_figure(lambda: None)
    with pytest.raises(TypeError, match="function"):
        bilingual_figure("not a function")


def test_the_chinese_notebook_shows_the_chinese_copy_and_translated_figure_texts():
    output = {"output_type": "execute_result", "data": {"image/png": "EN", "text/plain": "<Figure>"},
              "metadata": {"course_pe": {"zh_CN": {"image/png": "ZH"}}}}
    cell = {"cell_type": "code", "source": "", "outputs": [output],
            "metadata": {"mystnb": {"figure": {"caption": "A caption.", "name": "fig-x"}, "image": {"alt": "An alt."}}}}
    nb = {"cells": [cell], "metadata": {}}
    chinese, placed = zh.translate_notebook(nb, {"A caption.": "图注。", "An alt.": "替代文字。"})
    out = chinese["cells"][0]
    assert out["outputs"][0]["data"] == {"image/png": "ZH", "text/plain": "<Figure>"}
    assert "course_pe" not in out["outputs"][0]["metadata"]
    assert out["metadata"]["mystnb"] == {"figure": {"caption": "图注。", "name": "fig-x"}, "image": {"alt": "替代文字。"}}
    assert placed == {"A caption.", "An alt."}
    assert nb["cells"][0]["outputs"][0]["data"]["image/png"] == "EN"  # the English notebook is not changed
    no_copy = copy.deepcopy(output)
    no_copy["metadata"]["course_pe"]["zh_CN"] = None
    assert not zh.chinese_output(no_copy) and no_copy["data"]["image/png"] == "EN"


def test_every_stored_bilingual_figure_has_its_chinese_copy():
    """`make execute` ran where a font draws Chinese: otherwise the Chinese edition would show the English figure."""
    found = drawing = 0
    for path in NOTEBOOKS:
        for number, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
            stored_here = 0
            for output in cell.get("outputs", []):
                stored = output.get("metadata", {}).get("course_pe")
                if stored is not None and "image/png" in output.get("data", {}):  # a figure (not a printed verdict)
                    found += 1
                    stored_here += 1
                    chinese = (stored.get("zh_CN") or {}).get("image/png")
                    assert chinese and base64.b64decode(chinese).startswith(PNG), f"{path.name} cell {number}"
            if cell["cell_type"] == "code" and _ends_with_bilingual_figure(zh.source(cell)):
                drawing += 1  # a cell that draws a bilingual figure stores exactly one (not a stale plt.show() output)
                assert stored_here == 1, f"{path.name} cell {number}: {stored_here} bilingual figures stored, run make execute"
    assert found >= 1 and drawing == found


def _ends_with_bilingual_figure(source: str) -> bool:
    """Whether the cell's last statement is ``bilingual_figure(...)``, the expression whose output holds both PNGs."""
    if "bilingual_figure" not in source:
        return False
    source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    body = ast.parse(source).body
    last = body[-1] if body else None
    return (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
            and isinstance(last.value.func, ast.Name) and last.value.func.id == "bilingual_figure")


def test_every_figure_caption_and_text_alternative_is_translated():
    """The fast form of tests/test_zh_coverage.py for figures: each caption and alt has its Chinese in the catalogue."""
    missing = []
    count = 0
    for doc in zh.toc_docs():
        path = zh.doc_path(doc)
        if path.suffix != ".ipynb":
            continue
        translations = zh.translations_of(zh.po_path(doc))
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            for (group, key), text in zh.figure_texts(cell):
                count += 1
                if text not in translations:
                    missing.append(f"{doc}: {group}.{key} {text[:60]!r}")
    assert count >= 2
    assert not missing, "translate in the chapter's .po (make locale-update adds them):\n" + "\n".join(missing)


# ------------------------------------------------------------------------------------------- printed verdicts


def test_a_verdict_shows_english_and_the_chinese_notebook_shows_chinese():
    from course_pe.bilingual import verdict

    line = verdict("60 errata stand and 14 are withdrawn", "60 条勘误成立，14 条已撤回")
    data, metadata = line._repr_mimebundle_()
    assert data == {"text/plain": "60 errata stand and 14 are withdrawn"} and str(line) == data["text/plain"]
    output = {"output_type": "execute_result", "data": data, "metadata": metadata, "execution_count": 3}
    assert zh.chinese_output(output)
    assert output == {"output_type": "execute_result", "data": {"text/plain": "60 条勘误成立，14 条已撤回"},
                      "metadata": {}, "execution_count": 3}
    with pytest.raises(ValueError, match="no Chinese"):
        verdict("stands", "stands")
    with pytest.raises(ValueError):
        verdict("", "成立")
    with pytest.raises(TypeError):
        verdict("stands", None)
