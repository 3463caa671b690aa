"""The errata catalogue and the chapters' callouts agree, in both directions."""

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import book_tools  # noqa: E402

CATALOGUE = yaml.safe_load((ROOT / "book" / "reference" / "errata.yml").read_text(encoding="utf-8"))
ERRATA = CATALOGUE["errata"]
CATEGORIES = {"math", "numeric", "code bug", "fabricated output", "factual", "misleading", "inconsistency"}
SEVERITIES = {"high", "medium", "low"}
ID = re.compile(r"^E(\d{3})-(\d{2})$")


def callouts() -> dict[str, list[str]]:
    """Erratum IDs named in callout titles, mapped to the notebooks that contain them."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in book_tools.toc_notebooks():
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            text = "".join(cell["source"])
            for title in re.findall(r"\{admonition\}\s*(Errat(?:um|a)[^\n]*)", text):
                for erratum in re.findall(r"E\d{3}-\d{2}", title.split(":")[0]):
                    assert f"(erratum-{erratum.lower()})=" in text, f"{erratum} in {path.name} has no label"
                    found[erratum].append(path.name)
    return found


def test_catalogue_is_large_and_well_formed():
    assert len(ERRATA) >= 50
    ids = [e["id"] for e in ERRATA]
    assert len(ids) == len(set(ids)), "duplicate IDs"
    for e in ERRATA:
        assert ID.match(e["id"]), e["id"]
        assert e["id"][1:4] in CATALOGUE["sources"], e["id"]
        assert e["category"] in CATEGORIES, (e["id"], e["category"])
        assert e["severity"] in SEVERITIES, (e["id"], e["severity"])
        for field in ("section", "quote", "translation", "wrong", "correction"):
            assert str(e.get(field, "")).strip(), (e["id"], field)


def test_ids_are_numbered_in_reading_order_without_gaps():
    per_source = defaultdict(list)
    for e in ERRATA:
        source, number = ID.match(e["id"]).groups()
        per_source[source].append(int(number))
    for source, numbers in per_source.items():
        assert numbers == list(range(1, len(numbers) + 1)), f"source {source}: {numbers}"


def test_every_catalogued_erratum_has_a_callout():
    missing = sorted({e["id"] for e in ERRATA} - set(callouts()))
    assert not missing, f"catalogued but not called out in any chapter: {missing}"


def test_every_callout_is_catalogued():
    unknown = sorted(set(callouts()) - {e["id"] for e in ERRATA})
    assert not unknown, f"called out but not in the catalogue: {unknown}"


def test_each_erratum_is_called_out_once():
    repeated = {k: v for k, v in callouts().items() if len(v) > 1}
    assert not repeated, f"callouts repeated across chapters: {repeated}"


def test_sources_exist_when_available():
    shared = ROOT.parent / "shared" / "sources"
    if not shared.is_dir():
        pytest.skip("the source documents are not beside this checkout")
    for source in CATALOGUE["sources"].values():
        assert (shared / source["file"]).is_file(), source["file"]


def test_quotes_appear_in_the_sources_when_available():
    shared = ROOT.parent / "shared" / "sources"
    if not shared.is_dir():
        pytest.skip("the source documents are not beside this checkout")
    texts = {k: (shared / v["file"]).read_text(encoding="utf-8") for k, v in CATALOGUE["sources"].items()}
    for e in ERRATA:
        text = texts[e["id"][1:4]]
        fragments = [f.strip() for f in re.split(r"…|\.\.\.| / ", e["quote"]) if len(f.strip()) >= 4]
        chinese = [f for f in fragments if re.search(r"[\u4e00-\u9fff]", f)]
        for fragment in chinese:
            assert fragment in text, f"{e['id']}: quote fragment not found in the source: {fragment!r}"


CJK = re.compile(r"[\u4e00-\u9fff]")
LATIN_WORDS = re.compile(r"[A-Za-z]{4,}")
# The glossary (book/part1/notation.md) fixes one Chinese term per concept; the catalogue uses it consistently.
# (English cue in the entry's text, the glossary's Chinese term that its Chinese text must then use.)
GLOSSARY_TERMS = [
    (re.compile(r"equivariant", re.I), "排列等变"),
    (re.compile(r"extrapolat", re.I), "外推"),
    (re.compile(r"\blearned (table|position)", re.I), "学习位置编码"),
]
# Variants the glossary lists as the sources' alternatives; the catalogue's own Chinese prefers the first form.
# A variant may appear inside Chinese quotation marks (quoting the source).
NON_GLOSSARY_VARIANTS = ["置换不变", "置换等变", "位置編碼", "詞嵌入"]


def test_every_entry_has_a_chinese_correction_and_explanation():
    for e in ERRATA:
        for field in ("correction_zh", "explanation_zh"):
            text = str(e.get(field, "")).strip()
            assert CJK.search(text), f"{e['id']}: {field} must be written in Chinese"
            assert len(CJK.findall(text)) > len(LATIN_WORDS.findall(text)), f"{e['id']}: {field} is mostly not Chinese"
            assert "\n" not in text, f"{e['id']}: {field} is one line"
        # English fields stay English.
        for field in ("wrong", "correction", "translation"):
            assert not CJK.search(str(e[field])) or field == "translation", (e["id"], field)


def test_chinese_text_uses_the_glossary_terms():
    glossary = (ROOT / "book" / "part1" / "notation.md").read_text(encoding="utf-8")
    for _, term in GLOSSARY_TERMS:
        assert term in glossary, f"{term} is not a glossary term"
    for e in ERRATA:
        english = f"{e['wrong']} {e['correction']}"
        chinese = f"{e['correction_zh']} {e['explanation_zh']}"
        for cue, term in GLOSSARY_TERMS:
            if cue.search(english):
                assert term in chinese, f"{e['id']}: the English speaks of {cue.pattern}; the Chinese should say {term}"
        unquoted = re.sub(r"“[^”]*”", "", chinese)
        for variant in NON_GLOSSARY_VARIANTS:
            assert variant not in unquoted, f"{e['id']}: use the glossary's term instead of {variant}"


def test_the_errata_chapter_renders_both_languages():
    nb = json.loads((ROOT / "book" / "reference" / "errata.ipynb").read_text(encoding="utf-8"))
    rendered = "".join(
        "".join(o.get("data", {}).get("text/markdown", ""))
        for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
    )
    for e in ERRATA:
        assert e["correction_zh"] in rendered and e["explanation_zh"] in rendered, f"{e['id']}: Chinese text not rendered"
        assert e["correction"] in rendered, f"{e['id']}: English correction not rendered"
