"""The Chinese edition (issue 28): generated from the English notebooks, translations kept in step and correct.

* the generated Chinese notebooks have the English notebooks' code cells and stored outputs, unchanged;
* every translation keeps its message's roles, references, labels, math, inline code and link targets verbatim,
  and writes full-width punctuation in Chinese prose;
* the glossary's Chinese terms (book/part1/notation.md) are used for its English terms (tests/test_zh_glossary.py);
* the catalogues are in step with the English (no stale translation);
* coverage (every TOC page translated, nothing fuzzy) is tests/test_zh_coverage.py.
"""

from __future__ import annotations

import copy
import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import zh_edition as zh  # noqa: E402

polib = pytest.importorskip("polib")
PO_FILES = sorted(zh.MESSAGES.rglob("*.po"))
DOC_PO_FILES = [p for p in PO_FILES if p != zh.SITE_PO]


def rel(path: Path) -> str:
    return path.relative_to(zh.MESSAGES).as_posix()


# ------------------------------------------------------------------------------------------- generated sources


@pytest.fixture(scope="module")
def zh_sources(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("zh") / "src"
    zh.write_sources(out)
    return out


def test_every_toc_document_has_a_catalogue():
    missing = [doc for doc in zh.toc_docs() if not zh.po_path(doc).is_file()]
    assert not missing, f"no catalogue for {missing}: run `make locale-update`"
    assert zh.SITE_PO.is_file()


def _without_figure_texts(cell: dict) -> dict:
    metadata = copy.deepcopy(cell.get("metadata", {}))
    for (group, key), _ in zh.figure_texts(cell):
        metadata["mystnb"][group][key] = None
    return metadata


def _structure_key(line: str) -> str:
    """A label, a directive's name (its argument may be a translated title) or an option's name."""
    line = line.strip()
    if line.startswith(":") and not line.startswith(":::"):
        return line.split(":")[1]
    return line.split("}")[0]


@pytest.mark.parametrize("doc", [d for d in zh.toc_docs() if zh.doc_path(d).suffix == ".ipynb"])
def test_generated_notebook_has_the_english_code_and_outputs(zh_sources, doc):
    english = json.loads(zh.doc_path(doc).read_text(encoding="utf-8"))
    chinese = json.loads(zh.doc_path(doc, zh_sources).read_text(encoding="utf-8"))
    assert [c["cell_type"] for c in chinese["cells"]] == [c["cell_type"] for c in english["cells"]]
    assert chinese["metadata"]["kernelspec"] == english["metadata"]["kernelspec"]
    for number, (en, cn) in enumerate(zip(english["cells"], chinese["cells"])):
        where = f"{doc} cell {number}"
        # the same metadata, but for a figure's caption and text alternative, which are translated
        assert _without_figure_texts(cn) == _without_figure_texts(en), where
        if cn["cell_type"] == "code":
            translations = zh.translations_of(zh.po_path(doc))
            for (group, key), text in zh.figure_texts(en):
                assert cn["metadata"]["mystnb"][group][key] == translations.get(text, text), where
        if en["cell_type"] == "markdown":
            # Labels and directive lines are structure, not prose: the translation keeps every one of them.
            structure = re.compile(r"^\s*(?:\([\w.:-]+\)=|(?:`{3,}|:{3,})\{[^}]+\}|:[\w-]+:.*|`{3,}|:{3,})\s*$", re.M)
            en_lines = [_structure_key(m.group(0)) for m in structure.finditer(zh.source(en))]
            cn_lines = [_structure_key(m.group(0)) for m in structure.finditer(zh.source(cn))]
            assert cn_lines == en_lines, where
            continue
        assert zh.source(cn) == zh.source(en), f"{where}: code changed"
        assert cn.get("execution_count") == en.get("execution_count"), where
        en_out, cn_out = en.get("outputs", []), cn.get("outputs", [])
        assert len(cn_out) == len(en_out), where
        for a, b in zip(en_out, cn_out):
            if doc == zh.ERRATA_DOC and "text/markdown" in a.get("data", {}):
                # The one output that changes: the errata entries in their Chinese form (same entries, same order).
                ids = lambda o: re.findall(r"\*\*(E\d{3}-\d{2})\*\* ·", zh.source_text(o["data"]["text/markdown"]))
                assert ids(b) == ids(a), where
                text = zh.source_text(b["data"]["text/markdown"])
                withdrawn = text.count("**撤回原因**")
                assert text.count("**更正**") == text.count("**说明**") == len(ids(a)) - withdrawn, where
                assert {k: v for k, v in b["data"].items() if k != "text/markdown"} == \
                    {k: v for k, v in a["data"].items() if k != "text/markdown"}, where
                continue
            if doc != zh.ERRATA_DOC and "text/markdown" in a.get("data", {}):
                # Markdown printed by code is prose: translated like a cell, everything else the same.
                assert {k: v for k, v in b["data"].items() if k != "text/markdown"} == \
                    {k: v for k, v in a["data"].items() if k != "text/markdown"}, where
                continue
            expected = copy.deepcopy(a)
            zh.chinese_output(expected)  # a figure drawn in Chinese too (course_pe.plotting.bilingual_figure)
            assert b == expected, f"{where}: an output changed"


def test_errata_entries_show_correction_and_explanation_and_quote_the_sources(zh_sources):
    import yaml

    catalogue = yaml.safe_load((ROOT / "book" / "reference" / "errata.yml").read_text(encoding="utf-8"))
    nb = json.loads(zh.doc_path(zh.ERRATA_DOC, zh_sources).read_text(encoding="utf-8"))
    text = "\n".join(zh.source_text(o["data"]["text/markdown"]) for c in nb["cells"] if c["cell_type"] == "code"
                     for o in c.get("outputs", []) if "text/markdown" in o.get("data", {}))
    for entry in catalogue["errata"]:
        block = text.split(f"**{entry['id']}** ·", 1)
        assert len(block) == 2, f"{entry['id']} is missing from the Chinese errata chapter"
        block = block[1].split("\n**E", 1)[0]
        if entry.get("status") == "withdrawn":
            # A withdrawn entry has no callout to link: it shows why it was withdrawn, in Chinese.
            assert f"**撤回原因**　{entry['withdrawn_zh']}" in block, entry["id"]
            assert "**更正**" not in block and "erratum-" not in block, entry["id"]
            assert re.search(r"^> (?!\*)", block, re.M), f"{entry['id']}: the source is not quoted"
            continue
        assert f"**更正**　{entry['correction_zh']}" in block, entry["id"]
        assert f"**说明**　{entry['explanation_zh']}" in block, entry["id"]
        assert f"erratum-{entry['id'].lower()}>`" in block, f"{entry['id']}: no link to its callout"
        assert f"> *{entry['translation']}*" not in block, f"{entry['id']}: the English translation of the quote is shown"
        assert re.search(r"^> (?!\*)", block, re.M), f"{entry['id']}: the source is not quoted"


def test_toc_captions_and_config_come_from_the_catalogues(zh_sources):
    import yaml

    toc = yaml.safe_load((zh_sources / "_toc.yml").read_text(encoding="utf-8"))
    english = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    root = zh.translations_of(zh.po_path(zh.toc_docs()[0]))
    for part, en_part in zip(toc["parts"], english["parts"]):
        assert part["caption"] == root.get(en_part["caption"], en_part["caption"])
        assert part["chapters"] == en_part["chapters"]
    config = yaml.safe_load((zh_sources / "_config.yml").read_text(encoding="utf-8"))
    assert config["sphinx"]["config"]["language"] == "zh_CN"
    assert config["title"] == zh.label(zh.site_labels(), "config", "Positional Encoding, Corrected")
    assert config["repository"] == yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]


# ------------------------------------------------------------------------------------------- placing messages


def test_translate_text_replaces_whole_blocks_only():
    text = "# Summary\n\n- Summary of\n  the results.\n\n| a | Summary |\n| --- | --- |\n\nSummary is a word here.\n"
    out, placed = zh.translate_text(text, {"Summary": "小结", "Summary of the results.": "结果小结。"})
    assert out == "# 小结\n\n- 结果小结。\n\n| a | 小结 |\n| --- | --- |\n\nSummary is a word here.\n"
    assert placed == {"Summary", "Summary of the results."}


def test_translate_text_handles_sphinx_proof_titles_and_proofs():
    text = "```{prf:theorem} Shift theorem\n:label: thm\n\nBody.\n```\n\n```{prf:proof}\nFix a pair.\n```\n"
    out, placed = zh.translate_text(text, {"(Shift theorem)": "（平移定理）", "Proof. Fix a pair.": "证明。固定一个维度对。",
                                           "Body.": "正文。"})
    assert "```{prf:theorem} 平移定理\n" in out and "固定一个维度对。\n" in out and "证明。" not in out
    assert len(placed) == 3


def test_a_stale_translation_is_reported(tmp_path, monkeypatch):
    """A translated message whose English left the document (catalogue out of date) is reported, never dropped silently."""
    doc = "book/part1/worked_example"
    po = polib.pofile(str(zh.po_path(doc)))
    po.append(polib.POEntry(msgid="A paragraph that is in no chapter.", msgstr="不在任何一章中的段落。"))
    stale = tmp_path / "stale.po"
    po.save(str(stale))
    real = zh.po_path
    monkeypatch.setattr(zh, "po_path", lambda d: stale if d == doc else real(d))
    with pytest.raises(zh.Unplaced, match="A paragraph that is in no chapter"):
        zh.write_sources(tmp_path / "src", strict=True)
    stale = zh.write_sources(tmp_path / "src")  # make book-zh: listed, and the page shows the English
    assert len(stale) == 1 and "A paragraph that is in no chapter" in stale[0]


def test_no_translation_is_stale(tmp_path):
    """The catalogues are in step with the English: every translation still has its English in its document."""
    stale = zh.write_sources(tmp_path / "src")
    assert not stale, "run `make locale-update` (the English changed):\n" + "\n".join(stale)


def test_fuzzy_translations_are_not_used(tmp_path):
    po = polib.POFile()
    po.append(polib.POEntry(msgid="Learning goals", msgstr="学习目标", flags=["fuzzy"]))
    po.append(polib.POEntry(msgid="Summary", msgstr="小结"))
    path = tmp_path / "x.po"
    po.save(str(path))
    assert zh.translations_of(path) == {"Summary": "小结"}


def test_has_prose():
    assert zh.has_prose("The shift theorem")
    assert not zh.has_prose("{glue:text}`sin_0_0:.4f`")
    assert not zh.has_prose(r"$\mathrm{PE}(p)_0 = \sin$")
    assert not zh.has_prose("\nS(X) = \\frac{a}{b}\n")
    assert not zh.has_prose("注意力机制本身具有排列不变性")
    assert zh.has_prose("Source 001 says 位置编码 is unique, which is true for every integer position.")


# ------------------------------------------------------------------------------------------- the translations

_CODE_SPAN = re.compile(r"(`+)(?!\{)(.+?)\1")
TITLED_ROLES = {"ref", "doc", "numref", "prf:ref", "term", "download"}


def protected(msg: str) -> Counter:
    """What a translation must keep verbatim: roles (a cross-reference's title may change, not its target),
    math, labels, inline code, link targets."""
    found: Counter = Counter()
    rest = msg
    for match in zh.ROLE.finditer(msg):
        name, body = match["name"], match["body"]
        if name in TITLED_ROLES:
            target = re.search(r"<([^<>]+)>\s*$", body)
            body = target.group(1) if target else body
        found[f"{{{name}}}{body}"] += 1
    rest = zh.ROLE.sub(" ", rest)
    for pattern, kind in ((zh.DISPLAY_MATH, "math"), (zh.INLINE_MATH, "math"), (_CODE_SPAN, "code"),
                          (zh.LABEL, "label"), (zh.LINK_TARGET, "link")):
        for match in pattern.finditer(rest):
            found[f"{kind}:{match.group(0)}"] += 1
        rest = pattern.sub(" ", rest)
    return found


def translated_entries():
    for path in PO_FILES:
        for entry in polib.pofile(str(path)):
            if entry.msgstr and not entry.obsolete:
                yield path, entry


CHINESE_LITERATURE = zh.chinese_literature()


@pytest.mark.parametrize("path", PO_FILES, ids=rel)
def test_translations_keep_roles_math_labels_and_code(path):
    """Roles, math, labels, code and link targets verbatim; the one addition allowed is a citation of the Chinese
    primary literature (references.bib entries with langid = {chinese}, tools/zh_edition.chinese_literature)."""
    problems = []
    for entry in polib.pofile(str(path)):
        if not entry.msgstr or entry.obsolete:
            continue
        added = zh.added_chinese_citations(entry.msgid, entry.msgstr, CHINESE_LITERATURE)
        want, got = protected(entry.msgid), protected(entry.msgstr) - protected(" ".join(added))
        if want != got:
            lost = want - got
            added = got - want
            problems.append(f"{entry.msgid[:70]!r}: lost {dict(lost)}, added {dict(added)}")
        if "\n" in entry.msgstr and "\n" not in entry.msgid:
            problems.append(f"{entry.msgid[:70]!r}: the translation has a line break")
        if "{type}" in entry.msgid and "{type}" not in entry.msgstr and entry.msgctxt != "config":
            problems.append(f"{entry.msgid!r}: placeholder lost")
        if "%(copyright)s" in entry.msgid and "%(copyright)s" not in entry.msgstr:
            problems.append(f"{entry.msgid!r}: placeholder lost")
    assert not problems, f"{rel(path)}:\n" + "\n".join(problems)


_HALF_WIDTH_AFTER_CJK = re.compile(rf"{zh.CJK.pattern}[,.;:!?()](?=\s|{zh.CJK.pattern}|$)")


@pytest.mark.parametrize("path", PO_FILES, ids=rel)
def test_chinese_prose_uses_full_width_punctuation(path):
    problems = []
    for entry in polib.pofile(str(path)):
        if not entry.msgstr or entry.obsolete or not zh.CJK.search(entry.msgstr):
            continue
        prose = zh.strip_markup(entry.msgstr)
        for match in _HALF_WIDTH_AFTER_CJK.finditer(prose):
            problems.append(f"{entry.msgid[:60]!r}: {match.group(0)!r} (use ，。；：！？（）)")
    assert not problems, f"{rel(path)}:\n" + "\n".join(problems)


def test_the_site_labels_keep_their_placeholders_and_contexts():
    contexts = {e.msgctxt for e in polib.pofile(str(zh.SITE_PO))}
    assert contexts <= {"config", "theme", "switch", "errata", "workbook"}
    wanted = set(zh.SITE_MESSAGES)
    present = {(e.msgctxt, e.msgid) for e in polib.pofile(str(zh.SITE_PO)) if not e.obsolete}
    assert wanted <= present, f"site.po lacks {wanted - present}: run `make locale-update`"


# ------------------------------------------------------------------------------------------- language switch


class _FakeApp:
    def __init__(self, language: str, srcdir: Path) -> None:
        self.config = type("Config", (), {"language": language})()
        self.srcdir = str(srcdir)


@pytest.mark.parametrize("language, pagename, expected, text", [
    ("en", "book/part1/worked_example", "../../../html-zh/book/part1/worked_example.html", "中文"),
    ("en", "search", "../html-zh/search.html", "中文"),
    ("zh_CN", "book/intro", "../../html/book/intro.html", "English"),
])
def test_the_switch_opens_the_same_page_of_the_other_edition(tmp_path, monkeypatch, language, pagename, expected, text):
    import edition_switch

    monkeypatch.delenv("BOOK_EDITION_ROOT_EN", raising=False)
    monkeypatch.delenv("BOOK_EDITION_ROOT_ZH", raising=False)
    context = {"header_buttons": []}
    edition_switch.add_switch(_FakeApp(language, tmp_path), pagename, "page.html", context, None)
    [button] = context["header_buttons"]
    # the label says which language it is in: the served CJK font draws "中文" (:lang(zh)), screen readers read it right
    lang = "en" if language.startswith("zh") else "zh-CN"
    assert button["url"] == expected and button["text"] == f'<span lang="{lang}">{text}</span>'
    assert "edition-switch" in button["classes"]


def test_a_published_layout_sets_the_other_root(tmp_path, monkeypatch):
    import edition_switch

    monkeypatch.setenv("BOOK_EDITION_ROOT_EN", "zh_CN")
    context = {"header_buttons": []}
    edition_switch.add_switch(_FakeApp("en", tmp_path), "book/part2/rope_proof", "page.html", context, None)
    assert context["header_buttons"][0]["url"] == "../../zh_CN/book/part2/rope_proof.html"


def test_switch_problems_finds_a_missing_or_wrong_link(tmp_path):
    en, cn = tmp_path / "html", tmp_path / "html-zh"
    for site, other in ((en, "html-zh"), (cn, "html")):
        (site / "book").mkdir(parents=True)
        (site / "index.html").write_text('<meta http-equiv="Refresh" content="0; url=book/a.html" />')
        (site / "book" / "a.html").write_text(f'<a class="btn edition-switch" href="../../{other}/book/a.html">x</a>')
    (en / "book" / "b.html").write_text('<a class="btn edition-switch" href="../../html-zh/book/a.html">x</a>')
    problems, seen = zh.switch_problems(en, cn)
    assert seen == 2 and len(problems) == 1 and "b.html" in problems[0] and "not the same page" in problems[0]
    (en / "book" / "c.html").write_text("<p>no switch</p>")
    problems, _ = zh.switch_problems(en, cn)
    assert any("c.html: 0 language-switch links" in p for p in problems)
    assert zh.switch_problems(cn, en) == ([], 1)


def test_locale_update_suggests_known_translations_as_fuzzy(tmp_path, monkeypatch):
    monkeypatch.setattr(zh, "MESSAGES", tmp_path)
    monkeypatch.setattr(zh, "SITE_PO", tmp_path / "site.po")
    done, todo = polib.POFile(), polib.POFile()
    done.append(polib.POEntry(msgid="Summary", msgstr="小结"))
    todo.append(polib.POEntry(msgid="Summary", msgstr=""))
    todo.append(polib.POEntry(msgid="Exercises", msgstr=""))
    (tmp_path / "book").mkdir()
    done.save(str(tmp_path / "book" / "a.po"))
    todo.save(str(tmp_path / "book" / "b.po"))
    assert zh.suggest_known_translations() == 1
    [summary, exercises] = list(polib.pofile(str(tmp_path / "book" / "b.po")))
    assert summary.msgstr == "小结" and "fuzzy" in summary.flags and "book/a" in summary.tcomment
    assert exercises.msgstr == "" and zh.translations_of(tmp_path / "book" / "b.po") == {}


def test_table_cells_are_found_for_the_tables_gettext_leaves_out():
    """Sphinx's gettext builder does not extract a table inside a sphinx-exercise solution (rope_implementation's
    ex-impl-traffic); the extraction takes every table's cells itself."""
    text = "```{solution} x\n| step | reads |\n| --- | --- |\n| negation of one half | $E/2$ |\n| a \\| b | c |\n```"
    assert zh.table_cells(text) == ["step", "reads", "negation of one half", "$E/2$", "a \\| b", "c"]
    assert "negation of one half" in zh.translations_of(zh.po_path("book/part2/rope_implementation"))


def test_an_erratum_where_line_is_prose_however_short_its_english():
    assert zh.has_prose('**Where.** Source 004, Q4 ("频率选择"): `theta = 10000 ** (-2 * x / dim)`.')
    assert not zh.has_prose("低維度的編碼對應於較大的範圍（較慢的變化）")


def test_a_formula_without_its_delimiters_is_not_prose():
    """A display formula inside a list item reaches gettext without its $$ (context_extension's methods list)."""
    for formula in (r"\theta_i' = \theta_i / s .", r"s' = s\,\frac{L'}{L} - (s - 1) \qquad (L' > L)."):
        assert not zh.has_prose(formula)
    assert zh.has_prose(r"Positions are squeezed by $s$, so every angle stays inside")


def test_only_chinese_literature_may_be_cited_in_addition():
    keys = {"su2021kexue8265", "zhang2023divezh"}
    assert zh.added_chinese_citations("RoPE ({footcite}`su2024roformer`)",
                                      "RoPE（{footcite}`su2024roformer`；{footcite:p}`su2021kexue8265`）", keys) == \
        ["{footcite:p}`su2021kexue8265`"]
    # an English key added, or a Chinese key mixed with an English one, is not allowed (it stays a difference)
    assert zh.added_chinese_citations("x", "x{footcite:p}`vaswani2017attention`", keys) == []
    assert zh.added_chinese_citations("x", "x{footcite:p}`su2021kexue8265,vaswani2017attention`", keys) == []


def test_every_chinese_reference_is_cited_by_the_chinese_edition_and_never_by_the_english():
    cited, english = set(), set()
    for path in DOC_PO_FILES:
        for entry in polib.pofile(str(path)):
            if entry.msgstr and not entry.obsolete:
                for keys in zh.CITE_ROLE.findall(entry.msgstr):
                    cited |= {k.strip() for k in keys.split(",")}
                for keys in zh.CITE_ROLE.findall(entry.msgid):
                    english |= {k.strip() for k in keys.split(",")}
    assert CHINESE_LITERATURE, "references.bib has no entry with langid = {chinese}"
    assert CHINESE_LITERATURE <= cited, f"cited nowhere in the Chinese edition: {CHINESE_LITERATURE - cited}"
    assert not CHINESE_LITERATURE & english, "the English edition cites a reference its readers cannot read"

