"""The Chinese edition (zh_CN): catalogues, status, and the generated Chinese sources of the book.

    python tools/zh_edition.py update            # refresh locale/zh_CN/LC_MESSAGES/**.po from the English sources
    python tools/zh_edition.py status [--list] [DOC ...]   # per document: translated / fuzzy / untranslated
    python tools/zh_edition.py sources OUT       # write the Chinese sources of the book into OUT (make book-zh)
    python tools/zh_edition.py check-switch      # the language-switch links of both built editions, on disk
    python tools/zh_edition.py charset           # every character the Chinese edition uses (for the CJK font)
    python tools/zh_edition.py workbook OUT      # the Chinese workbook (make workbook-zh)
    python tools/zh_edition.py student-sources OUT   # the Chinese student edition's sources (make book-student-zh)
    python tools/zh_edition.py pdf --site SITE --out PDF   # the Chinese PDF from its single-page build (make pdf-zh)

One source, two languages. The gettext catalogues under ``locale/zh_CN/LC_MESSAGES/`` are the one place the
translations live: one ``.po`` per document of the TOC (``book/part1/worked_example.po`` for
``book/part1/worked_example.ipynb``), plus ``site.po`` for the site's own labels (book title, theme strings, the
errata chapter's fixed words). Nothing Chinese is written by hand anywhere else.

``update`` extracts the messages with Sphinx's own gettext builder (``jupyter-book build --builder custom
--custom-builder gettext``, so the message boundaries are Sphinx's: a paragraph, a title, a list item, a table
cell, an admonition title...), keeps the messages the Chinese edition needs (below), and merges them into the
catalogues with ``sphinx-intl update``: a message whose English changed becomes *fuzzy* (its old translation kept
for the translator to revise), a new one is empty. Left out of the catalogues:

* messages with no prose (only math, code, roles, labels, numbers): they are the same in both languages;
* the API reference's docstrings (they come from ``course_pe``'s code, which is not translated);
* the English wording of the errata entries, which the Chinese edition replaces by each entry's 更正 and 说明
  (``correction_zh``, ``explanation_zh`` in book/reference/errata.yml) beside the source's own words.

``sources`` builds the Chinese book from the English one (MyST-NB's issue #587 and the glue roles: see
/work/coord/notes/zh.md and the translator guide). Every notebook is copied with the same code cells and the same
stored outputs; only its markdown cells change, each message replaced by its translation (a fuzzy or missing
translation leaves the English). The TOC captions and the site labels come from the catalogues too. The result is
never edited and never committed: ``make book-zh`` writes it under ``_build/zh/src`` and builds it into
``_build/html-zh``. A translation that cannot be placed (its English is no longer in the document: the catalogue is
out of date) is listed by ``make book-zh`` (the page shows the new English) and fails ``make test``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import book_tools  # noqa: E402

LANGUAGE = "zh_CN"
LOCALE = ROOT / "locale"
MESSAGES = LOCALE / LANGUAGE / "LC_MESSAGES"
SITE_PO = MESSAGES / "site.po"
BUILD = ROOT / "_build" / "zh"
ERRATA_DOC = "book/reference/errata"
BIN = Path(sys.executable).parent

# ----------------------------------------------------------------------------------------- site labels
# Every label the Chinese edition needs that is not in a document: (context, English). Their translations live in
# site.po; `update` adds new ones there. Contexts: "config" (_config.yml values), "theme" (strings of Sphinx, the
# theme and the extensions whose own zh_CN catalogues are missing or wrong; tools/edition_switch.py installs them),
# "errata" (the fixed words of the Chinese errata entries), "switch" (the language switch).
SITE_MESSAGES: list[tuple[str, str]] = [
    ("config", "Positional Encoding, Corrected"),
    ("config", "The Positional Encoding, Corrected authors"),
    ("config", "Show code cell {type}"),
    ("config", "Hide code cell {type}"),
    ("config", "Click to show"),
    ("config", "Click to hide"),
    ("theme", 'Color mode'),
    ("theme", 'System Settings'),
    ("theme", 'Light'),
    ("theme", 'Dark'),
    ("theme", 'Launch interactive content'),
    ("theme", 'Launch on'),
    ("theme", 'logo'),
    ("theme", 'Link to this heading'),
    ("theme", 'Link to this definition'),
    ("theme", 'Link to this table'),
    ("theme", 'Link to this image'),
    ("theme", 'Link to this equation'),
    ("theme", 'Link to this code'),
    ("theme", 'Main'),
    ("theme", 'Page'),
    ("theme", 'Search this book...'),
    ("theme", 'Search'),
    ("theme", 'Source repositories'),
    ("theme", 'Toggle hidden content'),
    ("theme", 'Toggle primary sidebar'),
    ("theme", 'Toggle secondary sidebar'),
    ("theme", 'Print to PDF'),
    ("theme", 'Open issue'),
    ("theme", 'Repository'),
    ("theme", 'Download this page'),
    ("theme", 'Download notebook file'),
    ("theme", 'Download source file'),
    ("theme", 'Fullscreen mode'),
    ("theme", 'Contents'),
    ("theme", '© Copyright %(copyright)s.'),
    ("theme", 'Back to top'),
    ("theme", 'Previous'),
    ("theme", 'Next'),
    ("theme", 'previous page'),
    ("theme", 'next page'),
    ("theme", 'Site navigation'),
    ("theme", 'Section Navigation'),
    ("theme", 'On this page'),
    ("theme", 'Skip to main content'),
    ("theme", 'Proof'),
    ("theme", 'Exercise'),  # sphinx-exercise's zh_CN catalogue says 练习; the book's sections are 习题
    ("theme", "This table is wider than the column: scroll it sideways to see every column."),
    ("config", "(student edition)"),  # after the book's title in the Chinese student edition
    ("workbook", "Your answer here."),  # the answer placeholder of the Chinese workbook
    ("switch", "English"),
    ("switch", "Read this page in English"),
    ("errata", "math"),
    ("errata", "numeric"),
    ("errata", "code bug"),
    ("errata", "fabricated output"),
    ("errata", "factual"),
    ("errata", "misleading"),
    ("errata", "inconsistency"),
    ("errata", "high severity"),
    ("errata", "medium severity"),
    ("errata", "low severity"),
    ("errata", "section"),
    ("errata", "callout in"),
    ("errata", "withdrawn"),
    ("errata", "no callout"),
    # what an erratum's source section names in parentheses (errata.yml `section`: "2.3 (code)"), see zh_section
    ("errata", "code"),
    ("errata", "code comment"),
    ("errata", "introduction"),
    ("errata", "output"),
    ("errata", "table"),
]

# ----------------------------------------------------------------------------------------- text helpers

# Markup that a translation must keep verbatim, and that carries no prose.
ROLE = re.compile(r"\{(?P<name>[A-Za-z][\w:.-]*)\}`(?P<body>[^`]*)`")
DISPLAY_MATH = re.compile(r"\$\$.+?\$\$", re.S)
INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)(?:[^$\\]|\\.)+?\$")
INLINE_CODE = re.compile(r"(`+)(?!\{)(.+?)\1")
LABEL = re.compile(r"^\(([\w.:-]+)\)=\s*$", re.M)
LINK_TARGET = re.compile(r"\]\(([^)\s]+)\)")
URL = re.compile(r"<?https?://\S+>?")


def strip_markup(text: str) -> str:
    """The prose of a message: math, roles, inline code, labels and URLs removed."""
    for pattern in (DISPLAY_MATH, ROLE, INLINE_MATH, INLINE_CODE, LABEL, URL, LINK_TARGET):
        text = pattern.sub(" ", text)
    return text


CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")


def has_prose(msgid: str) -> bool:
    """True when a message has English words to translate.

    Not: a math block (the only messages with a line break), a message with no word (two letters in a row) outside
    math, code and roles, or one that is mostly Chinese already (a quotation of a source in its own words, an
    erratum's 更正): fewer than one English word for every two Chinese characters, and fewer than
    :data:`ENGLISH_SENTENCE` English words. A long quotation inside an English sentence (an erratum's "**Where.**
    Source 002, §7.3.2: 低維度的編碼… ("low dimensions …")") leaves the sentence English, so it is translated.
    """
    if "\n" in msgid:
        return False
    if msgid.startswith("**Where.**"):
        return True  # an erratum's "Where." line frames its quotation in English, however short
    # TeX control words are not English: a display formula in a list item reaches gettext without its $$ delimiters
    prose = re.sub(r"\\[A-Za-z]+", " ", strip_markup(msgid))
    words = len(re.findall(r"[A-Za-z]{2,}", prose))
    return words > 0 and (words >= ENGLISH_SENTENCE or 2 * words > len(CJK.findall(prose)))


#: English words (outside math, code and roles) that make a message English prose, however long its Chinese quotation.
ENGLISH_SENTENCE = 6


# Between two words of a message Sphinx has one space; the source may have a line break with indentation (a list
# item's continuation, a blockquote's ">").
_SPACE = r"(?:[ \t]*\n[ \t]*(?:>[ \t]*)*|[ \t]+)"
# What may stand before a message on its line: indentation and one block marker, a directive's name, a table bar.
_LINE_PREFIX = re.compile(
    r"(?:^|\n)[ \t]*(?:(?:[-*+]|\d+[.)]|#{1,6}|>)[ \t]+|(?:`{3,}|:{3,})\{[^}\n]+\}[ \t]+|:[\w-]+:[ \t]+)?$"
)
_PROOF_PREFIX = re.compile(r"^\s*(?:Proof\.|证明[.。:：])\s*")


def _pattern(msgid: str) -> re.Pattern:
    return re.compile(_SPACE.join(re.escape(word) for word in msgid.split(" ")))


def _at_block_boundary(text: str, start: int, end: int) -> bool:
    before = text[:start]
    after = text[end:]
    left = bool(_LINE_PREFIX.search(before)) or re.search(r"\|[ \t]*$", before.rsplit("\n", 1)[-1]) is not None
    right = re.match(r"[ \t]*(?:\n|$|\|)", after) is not None
    return left and right


def _variants(msgid: str, msgstr: str) -> list[tuple[str, str]]:
    """(English as written in the source, its translation) for one message.

    Two messages differ from their source: sphinx-proof puts a theorem's title in parentheses, "(Shift theorem)",
    and starts a proof's first paragraph with "Proof. ". The source has neither; the translation loses them too
    (sphinx-proof adds its own, in Chinese).
    """
    found = [(msgid, msgstr)]
    title = re.fullmatch(r"\((.+)\)", msgid, re.S)
    if title:
        inner = re.fullmatch(r"\s*[(（](.+)[)）]\s*", msgstr, re.S)
        found.append((title.group(1), inner.group(1) if inner else msgstr))
    if msgid.startswith("Proof. "):
        found.append((msgid[len("Proof. "):], _PROOF_PREFIX.sub("", msgstr)))
    return found


def locate(text: str, msgid: str) -> list[tuple[int, int, str]]:
    """Where a message stands in a text, as whole blocks: [(start, end, form)], form being the matched variant."""
    spots = []
    for form, _ in _variants(msgid, ""):
        for match in _pattern(form).finditer(text):
            if _at_block_boundary(text, match.start(), match.end()):
                spots.append((match.start(), match.end(), form))
        if spots:
            break
    return spots


def translate_text(text: str, translations: dict[str, str]) -> tuple[str, set[str]]:
    """Replace every message of `translations` found as a block in `text`; longest messages first.

    Returns the new text and the messages placed.
    """
    taken: list[tuple[int, int, str]] = []
    placed: set[str] = set()
    for msgid in sorted(translations, key=len, reverse=True):
        forms = dict(_variants(msgid, translations[msgid]))
        for start, end, form in locate(text, msgid):
            if any(start < e and s < end for s, e, _ in taken):
                continue
            taken.append((start, end, forms[form]))
            placed.add(msgid)
    for start, end, replacement in sorted(taken, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text, placed


# ----------------------------------------------------------------------------------------- glossary

NOTATION = ROOT / "book" / "part1" / "notation.md"


def glossary_rows(text: str) -> list[tuple[str, str]]:
    section = text.split("## Glossary", 1)[1]
    section = re.split(r"^## ", section, maxsplit=1, flags=re.M)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and line.strip().startswith("|") and not set(cells[0]) <= set("-: "):
            rows.append((cells[0], cells[1]))
    return rows[1:]  # the header row


def _drop_parentheses(text: str) -> str:
    return re.sub(r"\s*[(（][^()（）]*[)）]", "", text).strip()


def glossary_terms(text: str) -> dict[str, str]:
    """{English term (lower case): the Chinese term the edition uses}."""
    terms: dict[str, str] = {}
    for english, chinese in glossary_rows(text):
        en = [t.strip().lower() for t in _drop_parentheses(english).split(",") if t.strip()]
        # Chinese punctuation in the Chinese column (、 between terms, ／ between synonyms); the half-width forms
        # are read too
        cn = [re.split(r"[/／]", t)[0].strip() for t in re.split(r"[,、，]", _drop_parentheses(chinese)) if t.strip()]
        cn = [t for t in cn if CJK.search(t)]
        if not cn:
            continue  # the sources keep the English name
        if len(en) == len(cn):
            terms.update(zip(en, cn))
        elif len(en) == 1:
            terms[en[0]] = cn[0]
        else:
            raise ValueError(f"glossary row {english!r} | {chinese!r}: {len(en)} English terms for {len(cn)} Chinese")
    return terms



# ----------------------------------------------------------------------------------------- citations

REFERENCES = ROOT / "references.bib"
CITE_ROLE = re.compile(r"\{footcite(?::\w+)?\}`([^`]+)`")


def chinese_literature(path: Path = REFERENCES) -> set[str]:
    """Keys of the references written in Chinese (``langid = {chinese}``): 苏剑林's posts, d2l-zh.

    The Chinese edition cites them where they are the primary literature for a Chinese reader, in a message whose
    English has no such citation (the English edition does not cite them: an English reader cannot read them). A
    translation may add a citation role whose keys are all of these; every other role must be the English one."""
    from pybtex.database import parse_file

    return {key for key, entry in parse_file(str(path)).entries.items()
            if entry.fields.get("langid", "").lower() == "chinese"}


def added_chinese_citations(msgid: str, msgstr: str, keys: set[str]) -> list[str]:
    """The citation roles of ``msgstr`` that are not in ``msgid`` and cite only Chinese-literature ``keys``."""
    english = CITE_ROLE.findall(msgid)
    added = []
    for match in CITE_ROLE.finditer(msgstr):
        cited = [k.strip() for k in match.group(1).split(",")]
        if match.group(1) in english:
            english.remove(match.group(1))
        elif cited and all(k in keys for k in cited):
            added.append(match.group(0))
    return added


# ----------------------------------------------------------------------------------------- catalogues


def po_path(doc: str) -> Path:
    return MESSAGES / f"{doc}.po"


def load_po(path: Path):
    import polib

    return polib.pofile(str(path), wrapwidth=120)


def translations_of(path: Path) -> dict[str, str]:
    """Translated, non-fuzzy, non-obsolete messages of a catalogue: {msgid: msgstr}."""
    if not path.is_file():
        return {}
    return {e.msgid: e.msgstr for e in load_po(path)
            if e.msgstr and not e.obsolete and "fuzzy" not in e.flags}


def site_labels() -> dict[tuple[str, str], str]:
    """{(context, English): Chinese} from site.po; a label without a translation stays English."""
    if not SITE_PO.is_file():
        return {}
    return {(e.msgctxt, e.msgid): e.msgstr for e in load_po(SITE_PO)
            if e.msgstr and not e.obsolete and "fuzzy" not in e.flags}


def label(labels: dict, context: str, english: str) -> str:
    return labels.get((context, english), english)


# ----------------------------------------------------------------------------------------- documents


def toc_docs() -> list[str]:
    """The TOC's documents as Sphinx names them (book/part1/worked_example), root first."""
    return [p.relative_to(ROOT).with_suffix("").as_posix() for p in book_tools.toc_files()]


def doc_path(doc: str, root: Path = ROOT) -> Path:
    for suffix in (".ipynb", ".md"):
        if (root / f"{doc}{suffix}").is_file():
            return root / f"{doc}{suffix}"
    raise FileNotFoundError(doc)


def toc_captions(toc: dict) -> list[str]:
    return [part["caption"] for part in toc.get("parts", []) if "caption" in part]


def document_texts(doc: str, zh: bool) -> list[str]:
    """Every text of a document that carries translatable prose, as the Chinese edition starts from it.

    Markdown pages: the file. Notebooks: each markdown cell and each markdown output (the errata chapter renders its
    catalogue as markdown); with ``zh`` the errata entries are already in their Chinese form. The root document also
    carries the TOC's captions (Sphinx files them there).
    """
    path = doc_path(doc)
    if path.suffix == ".md":
        texts = [path.read_text(encoding="utf-8")]
    else:
        nb = json.loads(path.read_text(encoding="utf-8"))
        if zh and doc == ERRATA_DOC:
            # Labels that cannot be taken for the English ones, so that no English entry line survives by accident.
            marked = {("errata", english): f"[{english}]" for context, english in SITE_MESSAGES if context == "errata"}
            nb = zh_errata_notebook(nb, {}, marked)
        texts = [source(c) for c in nb["cells"] if c["cell_type"] == "markdown"]
        texts += [source_text(o["data"]["text/markdown"]) for c in nb["cells"] if c["cell_type"] == "code"
                  for o in c.get("outputs", []) if "text/markdown" in o.get("data", {})]
        texts += [text for c in nb["cells"] for _, text in figure_texts(c)]
    if doc == toc_docs()[0]:
        texts += toc_captions(yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8")))
    return texts


def source(cell: dict) -> str:
    return source_text(cell["source"])


def source_text(value) -> str:
    return "".join(value) if isinstance(value, list) else value


# ----------------------------------------------------------------------------------------- errata chapter

_ENTRY_HEAD = re.compile(r"^\*\*(E\d{3}-\d{2})\*\* · .*$", re.M)
_CALLOUT_REF = re.compile(r"\{ref\}`(?P<title>[^`<]+?) <(?P<label>erratum-[\w-]+)>`")


def _joined(word: str, text: str) -> str:
    """"section 本节概述" in English, "原文小节：本节概述" after a full-width colon."""
    return f"{word}{text}" if word.endswith(("：", ":")) else f"{word} {text}"


_SECTION_NOTE = re.compile(r"\s*\(([^()]*)\)\s*")


def zh_section(section: str, labels: dict) -> str:
    """An erratum's source section as a Chinese reader reads it (issue 36, Z3).

    errata.yml's ``section`` is shared by both editions: the source's own heading (Chinese), with what the passage is
    in English parentheses ("2.3 (code)", "Transformer的排列不变性 (code comment)") and places separated by "; ".
    Here the English note comes from site.po (context "errata": 代码, 代码注释, ...), parentheses and separators are
    full-width, and a note that the heading already says ("开头段落 (introduction)") is dropped. A note that is not a
    site label (a code identifier, a Chinese word of the source) is kept as it is, in full-width parentheses.
    """
    def note(match: re.Match) -> str:
        inner = match.group(1).strip()
        word = label(labels, "errata", inner)
        head = match.string[:match.start()]
        if word != inner and word in head:
            return ""
        return f"（{word}）"

    return "；".join(_SECTION_NOTE.sub(note, part.strip()) for part in str(section).split(";"))


def zh_errata_markdown(markdown: str, errata: dict[str, dict], titles: dict[str, str], labels: dict) -> str:
    """The Chinese form of one rendered block of errata entries.

    Each entry keeps its identifier, the source's section and the quotation in the source's own words (the same
    markdown line as the English edition), and shows 更正 (correction_zh) and 说明 (explanation_zh) instead of the
    English translation, "What is wrong" and "Correction". Text before the first entry (the file line) is kept, to be
    translated like any message. The link to the callout gets the chapter's Chinese title.
    """
    heads = list(_ENTRY_HEAD.finditer(markdown))
    if not heads:
        return markdown
    out = [markdown[:heads[0].start()].rstrip("\n"), ""] if heads[0].start() else []
    for number, head in enumerate(heads):
        end = heads[number + 1].start() if number + 1 < len(heads) else len(markdown)
        block = markdown[head.start():end]
        erratum_id = head.group(1)
        entry = errata.get(erratum_id, {})
        ref = _CALLOUT_REF.search(head.group(0))
        quote = next((line for line in block.splitlines() if line.startswith("> ") and not line.startswith("> *")), "")
        parts = [f"**{erratum_id}**"]
        withdrawn = entry.get("status") == "withdrawn"
        if withdrawn:
            parts += [f"*{label(labels, 'errata', 'withdrawn')}*",
                      _joined(label(labels, "errata", "section"), zh_section(entry["section"], labels)),
                      label(labels, "errata", "no callout")]
        elif entry:
            parts += [label(labels, "errata", entry["category"]), label(labels, "errata", f"{entry['severity']} severity"),
                      _joined(label(labels, "errata", "section"), zh_section(entry["section"], labels))]
        if ref:
            title = titles.get(ref["title"], ref["title"])
            parts.append(_joined(label(labels, "errata", "callout in"), f"{{ref}}`{title} <{ref['label']}>`"))
        out += [" · ".join(parts), ""]
        if quote:
            out += [quote, ""]
        if withdrawn:
            out += [f"**撤回原因**　{entry['withdrawn_zh']}", ""]
        elif entry:
            out += [f"**更正**　{entry['correction_zh']}", "", f"**说明**　{entry['explanation_zh']}", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def zh_errata_notebook(nb: dict, titles: dict[str, str], labels: dict) -> dict:
    """The errata notebook with its rendered entries in their Chinese form (code cells unchanged)."""
    catalogue = yaml.safe_load((ROOT / "book" / "reference" / "errata.yml").read_text(encoding="utf-8"))
    errata = {e["id"]: e for e in catalogue["errata"]}
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        for output in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            data = output.get("data", {})
            if "text/markdown" in data and _ENTRY_HEAD.search(source_text(data["text/markdown"])):
                data["text/markdown"] = zh_errata_markdown(source_text(data["text/markdown"]), errata, titles, labels)
    return nb


# ----------------------------------------------------------------------------------------- extraction


def _gettext_config(out: Path) -> Path:
    """_config.yml for the gettext builder: one catalogue per document, extensions found from any folder."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    sphinx = config.setdefault("sphinx", {})
    sphinx["local_extensions"] = {name: str((ROOT / path).resolve()) for name, path in
                                  sphinx.get("local_extensions", {}).items()}
    sphinx.setdefault("config", {}).update({"gettext_compact": False, "gettext_uuid": False,
                                            "gettext_location": True})
    out.mkdir(parents=True, exist_ok=True)
    path = out / "gettext_config.yml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def run_gettext(out: Path = BUILD / "gettext", quiet: bool = True) -> Path:
    """Run Sphinx's gettext builder over the English book; returns the folder of .pot files."""
    import polib  # noqa: F401 - fail early, before the slow build, when the pins are missing

    config = _gettext_config(out)
    if (out / "_build").exists():
        shutil.rmtree(out / "_build")
    command = [str(BIN / "jupyter-book"), "build", str(ROOT), "--config", str(config), "--path-output", str(out),
               "--builder", "custom", "--custom-builder", "gettext", "--all"]
    result = subprocess.run(command, cwd=ROOT, capture_output=quiet, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"the gettext build failed:\n{(result.stdout or '')[-3000:]}{(result.stderr or '')[-3000:]}")
    return out / "_build" / "gettext"


# Messages Sphinx writes itself into a page (napoleon's field names in the API reference); Sphinx's own zh_CN
# catalogue translates them. Any other message that is not a block of its source is reported as unplaced.
GENERATED = {"Parameters", "Raises", "Returns", "Return type"}


@dataclass
class Extraction:
    """The messages the Chinese edition needs, per TOC document, in document order."""
    messages: dict[str, list[str]] = field(default_factory=dict)
    unplaced: dict[str, list[str]] = field(default_factory=dict)  # needed, yet not found as a block in the source


def _in_book(pot_dir: Path, occurrence: str) -> bool:
    """True when a .pot occurrence (relative to the gettext output folder) is a file under book/."""
    path = (pot_dir / occurrence.split(":", 1)[0]).resolve()
    return path.is_relative_to(ROOT / "book")


def needed_messages(pot_dir: Path) -> Extraction:
    """Filter the gettext builder's output down to what the Chinese edition translates (see the module doc)."""
    import polib

    result = Extraction()
    for doc in toc_docs():
        pot = pot_dir / f"{doc}.pot"
        entries = polib.pofile(str(pot)) if pot.is_file() else []
        english = document_texts(doc, zh=False)
        chinese = document_texts(doc, zh=True) if doc == ERRATA_DOC else english
        # The quotations of the sources, in their own words (Chinese, Java, Python): never translated.
        quotes = {line[2:].strip() for text in chinese for line in text.splitlines()
                  if doc == ERRATA_DOC and line.startswith("> ") and not line.startswith("> *")}
        kept, unplaced = [], []
        for entry in entries:
            if entry.msgid in quotes:
                continue
            if not any(_in_book(pot_dir, path) for path, _ in entry.occurrences):
                continue  # autodoc: a docstring of course_pe
            if not has_prose(entry.msgid) or entry.msgid in kept:
                continue
            in_chinese = any(locate(text, entry.msgid) for text in chinese)
            if not in_chinese and any(locate(text, entry.msgid) for text in english):
                continue  # English wording of an errata entry, replaced by its 更正 and 说明
            if not in_chinese and entry.msgid in GENERATED:
                continue
            kept.append(entry.msgid)
            if not in_chinese:
                unplaced.append(entry.msgid)
        # A figure's caption and text alternative live in its code cell's metadata (figure_texts): each is a message.
        if doc_path(doc).suffix == ".ipynb":
            for cell in json.loads(doc_path(doc).read_text(encoding="utf-8"))["cells"]:
                for _, text in figure_texts(cell):
                    if text not in kept and has_prose(text):
                        kept.append(text)
        # Sphinx's gettext builder leaves out the cells of a table inside a sphinx-exercise solution: take the cells
        # of every markdown table that it did not extract (the others are in the .pot already).
        for text in english:
            for cell in table_cells(text):
                if cell not in kept and has_prose(cell) and any(locate(t, cell) for t in chinese):
                    kept.append(cell)
        result.messages[doc] = kept
        result.unplaced[doc] = unplaced
    return result


def table_cells(text: str) -> list[str]:
    """The cells of the markdown tables in ``text`` (separator rows and empty cells left out), in order."""
    cells = []
    for line in text.splitlines():
        row = line.strip()
        if not (row.startswith("|") and row.endswith("|")) or set(row) <= set("|-: "):
            continue
        cells += [cell.strip() for cell in re.split(r"(?<!\\)\|", row[1:-1]) if cell.strip()]
    return cells


def write_templates(extraction: Extraction, out: Path) -> Path:
    """One .pot per document (no line numbers: they change with every edit) and site.pot."""
    import polib

    if out.exists():
        shutil.rmtree(out)
    for doc, msgids in extraction.messages.items():
        pot = polib.POFile(wrapwidth=120)
        pot.metadata = {"Project-Id-Version": "Positional Encoding, Corrected", "MIME-Version": "1.0",
                        "Content-Type": "text/plain; charset=UTF-8", "Content-Transfer-Encoding": "8bit"}
        source_file = doc_path(doc).relative_to(ROOT).as_posix()
        for msgid in msgids:
            pot.append(polib.POEntry(msgid=msgid, msgstr="", occurrences=[(source_file, "")]))
        target = out / f"{doc}.pot"
        target.parent.mkdir(parents=True, exist_ok=True)
        pot.save(str(target))
    site = polib.POFile(wrapwidth=120)
    site.metadata = {"Project-Id-Version": "Positional Encoding, Corrected (site labels)", "MIME-Version": "1.0",
                     "Content-Type": "text/plain; charset=UTF-8", "Content-Transfer-Encoding": "8bit"}
    for context, msgid in SITE_MESSAGES:
        site.append(polib.POEntry(msgctxt=context, msgid=msgid, msgstr=""))
    site.save(str(out / "site.pot"))
    return out


def _entries_signature(path: Path) -> list | None:
    if not path.is_file():
        return None
    return sorted((e.msgctxt or "", e.msgid, e.msgstr, tuple(sorted(e.flags)), e.previous_msgid or "", e.obsolete)
                  for e in load_po(path))


HEADER_ORDER = ("Project-Id-Version", "Report-Msgid-Bugs-To", "POT-Creation-Date", "PO-Revision-Date",
                "Last-Translator", "Language", "Language-Team", "Plural-Forms", "MIME-Version", "Content-Type",
                "Content-Transfer-Encoding", "Generated-By")


def normalize(path: Path, old: dict[str, str]) -> None:
    """One writer for every catalogue (polib, 120 columns, fixed header order), so that a diff shows what changed.

    Babel's format guesses ("python-brace-format" for a message with {glue:text}`...`) are dropped: the messages are
    MyST, not Python format strings. A fuzzy message gets its previous English (``#| msgid``) from the catalogue as it
    was before the update, found by its translation, so the translator sees what changed.
    """
    po = load_po(path)
    po.metadata = {key: po.metadata[key] for key in HEADER_ORDER if key in po.metadata} | \
        {key: value for key, value in po.metadata.items() if key not in HEADER_ORDER}
    current = {e.msgid for e in po if not e.obsolete}
    for entry in po:
        entry.flags = [f for f in entry.flags if not f.endswith("-format")]
        if entry.tcomment:  # Babel reads a previous "#| msgid" as a comment and writes it back as "# | msgid"
            kept = [line for line in entry.tcomment.splitlines() if not re.match(r"\| (?:msgid|msgctxt|\")", line)]
            entry.tcomment = "\n".join(kept)
        if "fuzzy" not in entry.flags and entry.tcomment.startswith("suggested: "):
            entry.tcomment = ""  # a confirmed suggestion is a translation like any other
        if "fuzzy" in entry.flags and not entry.previous_msgid:
            previous = [m for m, s in old.items() if s == entry.msgstr and m not in current]
            if len(previous) == 1:
                entry.previous_msgid = previous[0]
    po.save(str(path))


def suggest_known_translations() -> int:
    """An untranslated message already translated in another catalogue gets that translation, marked fuzzy.

    "Learning goals", "Summary", the exercise boilerplate recur in every chapter: the translator confirms the
    suggestion (removes the fuzzy flag) instead of retyping it, and the book stays consistent. Fuzzy is not done:
    the coverage test still counts it. Returns the number of suggestions.
    """
    known: dict[str, tuple[str, str]] = {}
    paths = sorted(p for p in MESSAGES.rglob("*.po") if p != SITE_PO)
    for path in paths:
        for entry in load_po(path):
            if entry.msgstr and not entry.obsolete and "fuzzy" not in entry.flags:
                known.setdefault(entry.msgid, (entry.msgstr, path.relative_to(MESSAGES).with_suffix("").as_posix()))
    count = 0
    for path in paths:
        po = load_po(path)
        changed = False
        for entry in po:
            if not entry.msgstr and not entry.obsolete and entry.msgid in known:
                entry.msgstr, origin = known[entry.msgid]
                entry.flags.append("fuzzy")
                entry.tcomment = f"suggested: the translation in {origin}"
                changed = True
                count += 1
        if changed:
            po.save(str(path))
    return count


def update() -> None:
    """make locale-update: extract, filter, merge (sphinx-intl), and keep unchanged catalogues byte for byte."""
    before = {p: (p.read_bytes(), _entries_signature(p)) for p in MESSAGES.rglob("*.po")}
    old = {p: {e.msgid: e.msgstr for e in load_po(p) if e.msgstr} for p in before}
    print("==> extracting the English messages (Sphinx gettext builder)")
    pot_dir = run_gettext()
    extraction = needed_messages(pot_dir)
    templates = write_templates(extraction, BUILD / "pot")
    print("==> merging into locale/zh_CN/LC_MESSAGES (sphinx-intl update; changed English becomes fuzzy)")
    subprocess.run([str(BIN / "sphinx-intl"), "update", "-p", str(templates), "-d", str(LOCALE), "-l", LANGUAGE,
                    "-w", "120"], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    for path in MESSAGES.rglob("*.po"):
        normalize(path, old.get(path, {}))
    suggest_known_translations()
    for path, (content, signature) in before.items():
        if path.is_file() and _entries_signature(path) == signature:
            path.write_bytes(content)  # only the header's date changed: keep the file as it was
    for doc, msgids in extraction.unplaced.items():
        for msgid in msgids:
            print(f"warning: {doc}: a message Sphinx extracted is not a block of the source (cannot be placed): "
                  f"{msgid[:100]!r}")
    print_status(status())


# ----------------------------------------------------------------------------------------- status


@dataclass
class DocStatus:
    doc: str
    translated: list[str] = field(default_factory=list)
    fuzzy: list[str] = field(default_factory=list)
    untranslated: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.translated) + len(self.fuzzy) + len(self.untranslated)


def status(extraction: Extraction | None = None, docs: list[str] | None = None) -> list[DocStatus]:
    """Per document: what is translated, fuzzy, untranslated.

    From the catalogues alone by default; with an ``extraction`` of the current English sources, a message missing
    from a catalogue (English changed, `make locale-update` not run) counts as untranslated too.
    """
    import polib

    rows = []
    for doc in docs or toc_docs():
        row = DocStatus(doc)
        path = po_path(doc)
        entries = {e.msgid: e for e in polib.pofile(str(path)) if not e.obsolete} if path.is_file() else {}
        wanted = extraction.messages.get(doc, []) if extraction else list(entries)
        for msgid in wanted:
            entry = entries.get(msgid)
            if entry is None or not entry.msgstr:
                row.untranslated.append(msgid)
            elif "fuzzy" in entry.flags:
                row.fuzzy.append(msgid)
            else:
                row.translated.append(msgid)
        rows.append(row)
    return rows


def site_status() -> DocStatus:
    row = DocStatus("site")
    entries = {(e.msgctxt, e.msgid): e for e in load_po(SITE_PO) if not e.obsolete} if SITE_PO.is_file() else {}
    for key in SITE_MESSAGES:
        entry = entries.get(key)
        (row.untranslated if entry is None or not entry.msgstr else
         row.fuzzy if "fuzzy" in entry.flags else row.translated).append(f"[{key[0]}] {key[1]}")
    return row


def print_status(rows: list[DocStatus], show: bool = False) -> None:
    width = max(len(r.doc) for r in rows)
    print(f"{'document':<{width}}  translated  fuzzy  untranslated")
    for row in rows:
        print(f"{row.doc:<{width}}  {len(row.translated):>10}  {len(row.fuzzy):>5}  {len(row.untranslated):>12}")
        if show:
            for kind in ("fuzzy", "untranslated"):
                for msgid in getattr(row, kind):
                    print(f"    {kind}: {msgid[:150]}")
    total = [sum(len(getattr(r, k)) for r in rows) for k in ("translated", "fuzzy", "untranslated")]
    print(f"{'total':<{width}}  {total[0]:>10}  {total[1]:>5}  {total[2]:>12}")


# ----------------------------------------------------------------------------------------- sources


def chapter_titles(docs: list[str]) -> dict[str, str]:
    """{English title of a chapter: its Chinese title} for chapters whose title is translated."""
    found = {}
    for doc in docs:
        translations = translations_of(po_path(doc))
        for text in document_texts(doc, zh=False)[:3]:
            match = re.search(r"^# (.+)$", text, re.M)
            if match:
                if match.group(1) in translations:
                    found[match.group(1)] = translations[match.group(1)]
                break
    return found


class Unplaced(RuntimeError):
    pass


def translate_notebook(nb: dict, translations: dict[str, str]) -> tuple[dict, set[str]]:
    """A copy of a notebook whose markdown cells and markdown outputs are translated; code and outputs untouched."""
    nb = copy.deepcopy(nb)
    placed: set[str] = set()
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            text, used = translate_text(source(cell), translations)
            cell["source"] = text
            placed |= used
        elif cell["cell_type"] == "code":
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                if "text/markdown" in data:
                    text, used = translate_text(source_text(data["text/markdown"]), translations)
                    data["text/markdown"] = text
                    placed |= used
                chinese_output(output)
            placed |= translate_figure_texts(cell, translations)
    nb.setdefault("metadata", {})["language"] = LANGUAGE  # informative: the notebook's prose is Chinese
    return nb, placed


# ----------------------------------------------------------------------------------------- figures
# (issue 36; the convention is in /work/coord/README.md, "Changes".) A figure's caption and text alternative are in
# its code cell's metadata, {"mystnb": {"figure": {"caption": ...}, "image": {"alt": ...}}}, which MyST-NB renders:
# both are messages of the chapter's catalogue, placed by exact match. Text drawn inside a figure is translated when
# the cell runs: course_pe.plotting.bilingual_figure stores the Chinese PNG in the output's metadata, and the
# Chinese notebook shows it instead of the English one (chinese_output; printed verdicts of course_pe.bilingual alike).
FIGURE_TEXTS = (("figure", "caption"), ("image", "alt"))


def figure_texts(cell: dict) -> list[tuple[tuple[str, str], str]]:
    """The caption and text alternative of a figure cell: [(("figure", "caption"), text), ...]."""
    if cell.get("cell_type") != "code":
        return []
    mystnb = cell.get("metadata", {}).get("mystnb", {})
    found = []
    for group, key in FIGURE_TEXTS:
        value = mystnb.get(group, {}).get(key) if isinstance(mystnb.get(group), dict) else None
        if isinstance(value, str) and value.strip():
            found.append(((group, key), value))
    return found


def translate_figure_texts(cell: dict, translations: dict[str, str]) -> set[str]:
    """Put the translations of a figure cell's caption and text alternative in place; returns the messages used."""
    used = set()
    for (group, key), text in figure_texts(cell):
        if text in translations:
            cell["metadata"]["mystnb"][group][key] = translations[text]
            used.add(text)
    return used


def chinese_output(output: dict) -> bool:
    """Show the Chinese copy an output stores (a figure of course_pe.plotting.bilingual_figure: ``image/png``; a
    verdict of course_pe.bilingual.verdict: ``text/plain``) in its place; True if there was one. Only a type the
    output has is replaced; the stored copies are not carried into the Chinese notebook."""
    stored = (output.get("metadata") or {}).get("course_pe", {})
    chinese = stored.get(LANGUAGE) if isinstance(stored, dict) else None
    data = output.get("data", {})
    if not isinstance(chinese, dict) or not any(kind in data for kind in chinese):
        return False
    for kind, value in chinese.items():
        if kind in data:
            data[kind] = value
    del output["metadata"]["course_pe"]
    return True


def zh_typography_config(labels: dict) -> dict:
    """Configuration of the Chinese edition's citations, exercise labels and theorem titles (issue 36).

    * citations: tools/zh_cite.py's reference style ("Vaswani 等", "苏剑林等"), loaded as a local extension;
    * exercises: "习题 3" (site.po, context "theme": "Exercise"; sphinx-exercise's own catalogue says 练习), and the
      solution's title "习题 3 解答" (edition_switch.solution_titles);
    * theorem titles: full-width parentheses, "定理 5（RoPE 的分数只通过位置之差依赖于位置）".
    """
    exercise = label(labels, "theme", "Exercise")
    config = {"bibtex_foot_reference_style": "foot_zh", "proof_title_format": "（%t）"}
    if exercise != "Exercise":
        config["numfig_format"] = {"exercise": f"{exercise} %s"}
    return config


def zh_config(labels: dict) -> dict:
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    config["title"] = label(labels, "config", config["title"])
    config["author"] = label(labels, "config", config["author"])
    # The edit button would open the English notebook; translations are edited in the catalogues.
    config.setdefault("html", {})["use_edit_page_button"] = False
    sphinx = config.setdefault("sphinx", {})
    sphinx.setdefault("local_extensions", {})["edition_switch"] = "tools/"
    sphinx["local_extensions"]["zh_cite"] = "tools/"  # citations in Chinese sentences ("Vaswani 等")
    sphinx.setdefault("config", {}).update(zh_typography_config(labels))
    sphinx.setdefault("config", {}).update({
        "language": LANGUAGE,
        "nb_code_prompt_show": label(labels, "config", "Show code cell {type}"),
        "nb_code_prompt_hide": label(labels, "config", "Hide code cell {type}"),
        # sphinx-togglebutton's folds (erratum boxes, solutions) have no zh_CN catalogue of their own
        "togglebutton_hint": label(labels, "config", "Click to show"),
        "togglebutton_hint_hide": label(labels, "config", "Click to hide"),
    })
    return config


def write_sources(out: Path, strict: bool = False) -> list[str]:
    """The Chinese book: English notebooks with translated prose, translated TOC, zh_CN configuration.

    Returns the stale translations (a translated message whose English is no longer in its document: the English
    changed and `make locale-update` has not run; the page shows the new English there). With ``strict`` they raise
    ``Unplaced``; `make book-zh` lists them and builds, `make test` fails on them (tests/test_zh_edition.py).
    """
    labels = site_labels()
    docs = toc_docs()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    for folder in ("book", "tools"):
        shutil.copytree(ROOT / folder, out / folder, ignore=ignore)
    shutil.copy2(ROOT / "references.bib", out / "references.bib")
    # jieba (Sphinx's Chinese search) cuts unknown compounds apart: teach it the glossary's terms.
    words = sorted({t for t in glossary_terms(NOTATION.read_text(encoding="utf-8")).values()})
    (out / "_zh_search_words.txt").write_text("".join(f"{w} 1000 n\n" for w in words), encoding="utf-8")
    config = zh_config(labels)
    config["sphinx"]["config"]["html_search_options"] = {"dict": str((out / "_zh_search_words.txt").resolve())}
    (out / "_config.yml").write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8")
    # Site labels for tools/edition_switch.py (theme strings, the switch).
    (out / "_zh_site_labels.json").write_text(json.dumps(
        [{"context": c, "msgid": m, "msgstr": s} for (c, m), s in sorted(labels.items())], ensure_ascii=False,
        indent=1), encoding="utf-8")

    titles = chapter_titles(docs)
    problems = []
    for doc in docs:
        translations = translations_of(po_path(doc))
        path = doc_path(doc)
        target = out / path.relative_to(ROOT)
        if path.suffix == ".ipynb":
            nb = json.loads(path.read_text(encoding="utf-8"))
            if doc == ERRATA_DOC:
                nb = zh_errata_notebook(nb, titles, labels)
            nb, placed = translate_notebook(nb, translations)
            target.write_text(json.dumps(nb, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        else:
            text, placed = translate_text(path.read_text(encoding="utf-8"), translations)
            target.write_text(text, encoding="utf-8")
        if doc == docs[0]:
            placed |= {c for c in translations if c in toc_captions(yaml.safe_load((ROOT / "_toc.yml").read_text()))}
        for msgid in translations:
            if msgid not in placed and has_prose(msgid):
                problems.append(f"{doc}: a translated message is not in the English source any more "
                                f"(run `make locale-update`): {msgid[:100]!r}")
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    root_translations = translations_of(po_path(docs[0]))
    for part in toc.get("parts", []):
        if "caption" in part:
            part["caption"] = root_translations.get(part["caption"], part["caption"])
    (out / "_toc.yml").write_text(yaml.safe_dump(toc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    if problems and strict:
        raise Unplaced("\n".join(problems))
    return problems


# ----------------------------------------------------------------------------------------- coursework in Chinese
# (issue 36) The Chinese workbook and the Chinese student edition are the English ones made from the Chinese
# notebooks: the same code cells, stubs, checks and exercise ids (so the same grader grades them, by the folder
# that names the chapter, as for the English workbook), with the Chinese prose.


def _student_notebooks(src: Path, keep_outputs: bool) -> list[Path]:
    """Replace every TOC notebook under ``src`` (Chinese sources) by its student version, in place."""
    import nbformat

    sys.path.insert(0, str(ROOT))
    from course_pe.coursework.workbook import make_student_notebook

    done = []
    for doc in toc_docs():
        path = src / f"{doc}.ipynb"
        if path.is_file():
            nb = nbformat.read(path, as_version=4)
            nbformat.write(make_student_notebook(nb, keep_outputs=keep_outputs), path)
            done.append(path)
    return done


def write_workbook(out: Path, src: Path | None = None) -> list[Path]:
    """make workbook-zh: the Chinese student notebooks into ``out`` (book/<part>/<chapter>.ipynb, as make workbook).

    The answer placeholder is Chinese ("workbook" label of site.po), in bold: JupyterLab slants emphasis, and Han
    characters are not slanted."""
    import nbformat

    sys.path.insert(0, str(ROOT))
    from course_pe.coursework.workbook import ANSWER_PLACEHOLDER

    src = src or BUILD / "workbook_src"  # the Chinese sources it starts from (replaced)
    write_sources(src)
    placeholder = label(site_labels(), "workbook", "Your answer here.")
    written = []
    for path in _student_notebooks(src, keep_outputs=False):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = cell.source.replace(ANSWER_PLACEHOLDER, f"**{placeholder}**")
        target = out / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
        written.append(target)
        exercises = nb.metadata.get("course_pe", {}).get("exercises", [])
        print(f"{target}: {len(exercises)} coding exercise(s){': ' + ', '.join(exercises) if exercises else ''}")
    return written


def write_student_sources(out: Path) -> int:
    """make book-student-zh: the sources of the Chinese student edition (the Chinese book without solutions, its
    stored outputs kept except those of stubs and checks; no answer placeholders on the pages; no button that opens
    a notebook of the repository, and no language switch: it has no counterpart to switch to)."""
    import book_tools

    write_sources(out)
    _student_notebooks(out, keep_outputs=True)
    removed = book_tools.student_pages(out)
    config = yaml.safe_load((out / "_config.yml").read_text(encoding="utf-8"))
    title = config["title"]
    config = book_tools.student_config(config)
    config["title"] = title + label(site_labels(), "config", "(student edition)")
    config["sphinx"].setdefault("local_extensions", {})["edition_switch"] = "tools/"  # the Chinese labels, no switch
    config["sphinx"].setdefault("config", {})["edition_switch_button"] = False
    (out / "_config.yml").write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return removed


# The font the Chinese PDF must draw every CJK character with: the site's served font (tools/cjk_font.py), embedded by
# Chromium under its PostScript name.
PDF_CJK_FONT = "NotoSansSC"


def write_pdf(site: Path, toc: Path, out: Path) -> int:
    """make pdf-zh: print the Chinese single-page build as tools/book_pdf.py prints the English one, with the Chinese
    title, contents heading and part captions, and check the CJK font (book_pdf.cjk_font_problems)."""
    import book_pdf

    labels = site_labels()
    edition = book_pdf.Edition(toc=toc, title=label(labels, "config", "Positional Encoding, Corrected"),
                               author=label(labels, "config", "The Positional Encoding, Corrected authors"),
                               contents=label(labels, "theme", "Contents"), cjk_font=PDF_CJK_FONT,
                               running_title=False)
    root = book_pdf.chapters(toc)[0].docname
    if not (site / f"{root}.html").is_file():
        print(f"no single-page build at {site}: run `make pdf-zh` (it builds it first)")
        return 2
    return book_pdf.build(site, out, os.environ.get("CHROMIUM", "/usr/bin/chromium"), edition)


# ----------------------------------------------------------------------------------------- checks of the builds


def switch_problems(site: Path, other: Path) -> tuple[list[str], int]:
    """Every page of `site` has one language-switch link, and it opens an existing page of `other`."""
    problems, seen = [], 0
    link = re.compile(r'<a [^>]*class="[^"]*edition-switch[^"]*"[^>]*>', re.S)
    for page in sorted(site.rglob("*.html")):
        rel = page.relative_to(site)
        if rel.parts[0].startswith(("_", ".")):
            continue
        text = page.read_text(encoding="utf-8")
        if 'http-equiv="Refresh"' in text[:2000]:
            continue
        tags = link.findall(text)
        if len(tags) != 1:
            problems.append(f"{site.name}/{rel}: {len(tags)} language-switch links (expected 1)")
            continue
        href = re.search(r'href="([^"]+)"', tags[0]).group(1)
        target = (page.parent / href.split("#")[0]).resolve()
        seen += 1
        expected = (other / rel).resolve()
        if target != expected:
            problems.append(f"{site.name}/{rel}: the switch opens {href}, not the same page of {other.name}")
        elif not target.is_file():
            problems.append(f"{site.name}/{rel}: the switch opens {href}, which does not exist (build {other.name})")
    return problems, seen


def charset() -> str:
    chars: set[str] = set()
    for path in sorted(MESSAGES.rglob("*.po")):
        for entry in load_po(path):
            chars |= set(entry.msgstr)
    catalogue = yaml.safe_load((ROOT / "book" / "reference" / "errata.yml").read_text(encoding="utf-8"))
    for entry in catalogue["errata"]:
        for key in ("correction_zh", "explanation_zh", "withdrawn_zh", "quote", "section"):
            chars |= set(str(entry.get(key, "")))
    return "".join(sorted(c for c in chars if ord(c) > 0x7F))


# ----------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("update", help="refresh the catalogues from the English sources")
    st = sub.add_parser("status", help="per document: translated / fuzzy / untranslated")
    st.add_argument("docs", nargs="*", help="documents (book/part1/worked_example); default: the whole TOC")
    st.add_argument("--list", action="store_true", help="list the fuzzy and untranslated messages")
    st.add_argument("--fresh", action="store_true", help="extract the English again first (slow; finds messages "
                    "missing from the catalogues)")
    so = sub.add_parser("sources", help="write the Chinese sources of the book")
    so.add_argument("out", type=Path)
    so.add_argument("--strict", action="store_true", help="fail on a stale translation instead of listing it")
    sw = sub.add_parser("check-switch", help="the language-switch links of both built editions")
    sw.add_argument("--en", type=Path, default=ROOT / "_build" / "html")
    sw.add_argument("--zh", type=Path, default=ROOT / "_build" / "html-zh")
    sub.add_parser("charset", help="every non-ASCII character the Chinese edition uses")
    pd = sub.add_parser("pdf", help="the Chinese PDF from the Chinese single-page build (make pdf-zh)")
    pd.add_argument("--site", type=Path, required=True)
    pd.add_argument("--toc", type=Path, required=True, help="the Chinese sources' _toc.yml (translated captions)")
    pd.add_argument("--out", type=Path, required=True)
    wb = sub.add_parser("workbook", help="the Chinese student notebooks (make workbook-zh)")
    wb.add_argument("out", type=Path)
    ss = sub.add_parser("student-sources", help="the sources of the Chinese student edition (make book-student-zh)")
    ss.add_argument("out", type=Path)
    args = parser.parse_args(argv)

    if args.command == "update":
        update()
    elif args.command == "status":
        docs = [d.removesuffix(".ipynb").removesuffix(".md") for d in args.docs] or None
        extraction = needed_messages(run_gettext()) if args.fresh else None
        rows = status(extraction, docs)
        if not docs:
            rows.append(site_status())
        print_status(rows, show=args.list)
        return 1 if any(r.fuzzy or r.untranslated for r in rows) else 0
    elif args.command == "sources":
        try:
            stale = write_sources(args.out, strict=args.strict)
        except Unplaced as err:
            print(err, file=sys.stderr)
            return 1
        for problem in stale:
            print(f"notice: {problem}")
        if stale:
            print(f"==> {len(stale)} stale translations (shown in English): run `make locale-update`, then translate "
                  "the fuzzy messages")
        print(f"==> Chinese sources in {args.out}")
    elif args.command == "check-switch":
        problems, seen = [], 0
        for site, other in ((args.zh, args.en), (args.en, args.zh)):
            if not (site / "index.html").is_file():
                problems.append(f"{site} is not built")
                continue
            found, count = switch_problems(site, other)
            problems += found
            seen += count
        print(f"language switch: {seen} links checked, {len(problems)} problems")
        for problem in problems:
            print(f"  FAIL {problem}")
        return 1 if problems else 0
    elif args.command == "charset":
        print(charset())
    elif args.command == "pdf":
        return write_pdf(args.site, args.toc, args.out)
    elif args.command == "workbook":
        print(f"==> {len(write_workbook(args.out))} Chinese workbook notebooks in {args.out}")
    elif args.command == "student-sources":
        removed = write_student_sources(args.out)
        print(f"==> sources of the Chinese student edition in {args.out} ({removed} answer placeholders removed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
