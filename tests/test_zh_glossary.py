"""One vocabulary: the glossary's Chinese terms are the Chinese edition's terms.

The glossary (book/part1/notation.md, "## Glossary") pairs English terms with Chinese ones. For every translated
message of locale/zh_CN/LC_MESSAGES whose English prose (outside math, code and roles) contains a glossary term, the
Chinese must contain that term's Chinese. How a row is read:

* English cell: comma-separated terms; parentheses are dropped ("learned (trainable) positional embedding" is
  "learned positional embedding"; "(APE)" is an abbreviation);
* Chinese cell: parenthesised forms are dropped (the Traditional spellings of source 002); comma-separated terms
  pair one to one with the English ones, or, for one English term, the first is the one the edition uses; " / "
  separates synonyms, the first wins. A row whose Chinese cell says the sources keep the English name is skipped.

A longer term wins over a term inside it ("absolute positional encoding" over "positional encoding"). A message may be
exempted from one term in locale/zh_CN/glossary-exceptions.yml, with the reason; the list is meant to stay short.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import zh_edition as zh  # noqa: E402
from zh_edition import glossary_terms  # noqa: E402

polib = pytest.importorskip("polib")
NOTATION = ROOT / "book" / "part1" / "notation.md"
EXCEPTIONS = ROOT / "locale" / "zh_CN" / "glossary-exceptions.yml"


def term_pattern(term: str) -> re.Pattern:
    words = [re.escape(w) for w in re.split(r"[\s-]+", term)]
    return re.compile(r"(?<![\w])" + r"[\s-]+".join(words) + r"(?:s|es)?(?![\w])", re.I)


def required_terms(msgid: str, terms: dict[str, str]) -> dict[str, str]:
    """The glossary terms in a message's English prose, longest first, each span counted once."""
    prose = zh.strip_markup(msgid)
    found: dict[str, str] = {}
    for term in sorted(terms, key=len, reverse=True):
        pattern = term_pattern(term)
        if pattern.search(prose):
            found[term] = terms[term]
            prose = pattern.sub(" ", prose)
    return found


def exceptions() -> list[dict]:
    return yaml.safe_load(EXCEPTIONS.read_text(encoding="utf-8")) or []


def test_the_glossary_parses_and_has_the_core_terms():
    terms = glossary_terms(NOTATION.read_text(encoding="utf-8"))
    for english, chinese in {"positional encoding": "位置编码", "self-attention": "自注意力",
                             "extrapolation": "外推", "interpolation": "插值"}.items():
        assert terms.get(english) == chinese, (english, terms.get(english))


def test_the_parser_reads_the_documented_shapes():
    table = """## Glossary

| English | Chinese | Meaning |
| --- | --- | --- |
| positional encoding | 位置编码 (位置編碼) | x |
| learned (trainable) positional embedding | 学习位置编码, 可训练位置编码 | x |
| permutation-invariant | 排列不变 / 置换不变 | x |
| encoder, decoder | 编码器, 解码器 | x |
| ALiBi | (the sources keep the English name) | x |

## Next
"""
    assert glossary_terms(table) == {"positional encoding": "位置编码", "learned positional embedding": "学习位置编码",
                                     "permutation-invariant": "排列不变", "encoder": "编码器", "decoder": "解码器"}
    terms = glossary_terms(table)
    assert required_terms("Positional encodings of the encoder-decoder", terms) == \
        {"positional encoding": "位置编码", "encoder": "编码器", "decoder": "解码器"}
    assert required_terms("`positional_encoding` and $\\text{encoder}$", terms) == {}


def test_every_exception_is_used_and_explained():
    terms = glossary_terms(NOTATION.read_text(encoding="utf-8"))
    entries = {(path, e.msgid) for path, e in ((p, e) for p in zh.MESSAGES.rglob("*.po") for e in polib.pofile(str(p)))}
    for item in exceptions():
        assert set(item) == {"document", "message", "term", "reason"}, item
        assert item["term"] in terms, f"exception for {item['term']!r}, which is not a glossary term"
        assert len(item["reason"]) > 20, f"say why: {item}"
        path = zh.MESSAGES / f"{item['document']}.po"
        assert any(p == path and m.startswith(item["message"]) for p, m in entries), \
            f"exception names no message of {item['document']}: {item['message']!r}"


@pytest.mark.parametrize("path", sorted(zh.MESSAGES.rglob("*.po")), ids=lambda p: p.relative_to(zh.MESSAGES).as_posix())
def test_glossary_terms_are_translated_with_their_chinese_term(path):
    terms = glossary_terms(NOTATION.read_text(encoding="utf-8"))
    document = path.relative_to(zh.MESSAGES).with_suffix("").as_posix()
    allowed = {(e["message"], e["term"]) for e in exceptions() if e["document"] == document}
    problems = []
    for entry in polib.pofile(str(path)):
        if not entry.msgstr or entry.obsolete or "fuzzy" in entry.flags:
            continue
        for english, chinese in required_terms(entry.msgid, terms).items():
            if chinese in entry.msgstr:
                continue
            if any(entry.msgid.startswith(message) and english == term for message, term in allowed):
                continue
            problems.append(f"{english!r} must be {chinese!r}: {entry.msgid[:70]!r} -> {entry.msgstr[:50]!r}")
    assert not problems, "\n".join(problems)
