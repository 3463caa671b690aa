"""Sphinx extension for the book's site: math that renders offline, titles, numbering, folding, phone layout.

Loaded by Jupyter Book through ``sphinx.local_extensions`` in ``_config.yml``. It

* copies the pinned MathJax 3 (the PyPI package ``django-static-mathjax``, pinned in requirements.txt; it
  ships the MathJax distribution unchanged, with its licence) into ``_build/html/_static/mathjax/`` when the
  build ends; ``mathjax_path`` in ``_config.yml`` names the copied file, so no page loads it from another host;
* loads MathJax on every page, not only on pages with math, so navigation entries and titles that contain math
  (the sidebar, the search page, the indices) are typeset too;
* typesets search results, which the search page adds after MathJax has run;
* makes every proof (sphinx-proof's ``prf:proof``, which has no title for sphinx-togglebutton to use) a closed
  ``<details>`` block whose summary reads "Proof", so a reader sees the statements and unfolds an argument;
* removes script tags repeated on a page: sphinx-thebe and sphinx-togglebutton register their inline
  configuration twice (filename None and ""), so every page declared ``const THEBE_JS_URL`` twice (a page error);
* keeps math in titles as math where a title is reused as link text (``{ref}`` to a section whose title has
  math, and link text written with ``$...$``), and writes it as plain text where HTML cannot hold markup (the
  window title, the print heading): ``d_\\text{model}`` becomes ``d_model``;
* lets long identifiers, signatures and index tables wrap on phones (no horizontal scrolling at 390 px);
* numbers exercises per chapter (sphinx-exercise numbers them like figures, which without a numbered toctree
  run across the whole book: the sinusoidal chapter's first exercise was "Exercise 5");
* turns the ``nitpick_ignore`` pairs that ``_config.yml`` gives as YAML lists into the tuples Sphinx expects.

Only the parts of MathJax that the CommonHTML output can load are copied (about 9 MB): the combined
``tex-mml-chtml.js`` component, the dynamically loaded input, output, ui and accessibility components and the
CommonHTML fonts. The SVG output and the other combined components are left out.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging
from sphinx.transforms import SphinxTransform
from sphinx.util.nodes import clean_astext

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cjk_font  # noqa: E402  (tools/cjk_font.py, beside this file)

logger = logging.getLogger(__name__)

MATHJAX_PATH = "mathjax/tex-mml-chtml.js"
# Everything under es5/ except these (top-level combined components we do not load, and the SVG output).
_SKIP = {
    "tex-chtml.js", "tex-chtml-full.js", "tex-chtml-full-speech.js", "tex-svg.js", "tex-svg-full.js",
    "tex-mml-svg.js", "mml-chtml.js", "mml-svg.js", "node-main.js", "svg", "svg.js",
}

# Search results are inserted after MathJax typeset the page; typeset each result list as it grows.
_FOLD_PROOFS_JS = """
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("div.proof.admonition").forEach(function (box) {
    if (box.classList.length !== 2 || box.querySelector(":scope > details")) { return; }  // theorems etc. have a type
    var details = document.createElement("details");
    details.className = "proof-fold";
    var summary = document.createElement("summary");
    summary.textContent = "Proof";
    details.appendChild(summary);
    var first = box.firstElementChild;
    if (first && first.firstChild && first.firstChild.nodeType === Node.TEXT_NODE) {
      first.firstChild.textContent = first.firstChild.textContent.replace(/^\\s*Proof\\.\\s*/, "");
    }
    while (box.firstChild) { details.appendChild(box.firstChild); }
    box.appendChild(details);
  });
});
"""
_SITE_CSS = """\
details.proof-fold > summary { cursor: pointer; font-weight: 600; }

/* One search box: the theme's top header band repeats the sidebar's "Search Ctrl+K" button and holds nothing else
   (the article header has the menu button); Ctrl+K still opens the search dialog. */
header.bd-header { display: none !important; }

/* Nothing is cut off at the column's edge. A block wider than the column scrolls inside itself, shows a scrollbar
   (also where the system hides scrollbars until one scrolls) and a shadow on the side where more content is.
   book_site_layout.js marks such blocks .pe-scroll and keeps .pe-more-left / .pe-more-right current. */
.bd-article div.highlight > pre, .bd-article div.cell_output pre, .bd-article div.output pre,
.bd-article div.math, .bd-article .pst-scrollable-table-container, .bd-article div.output.text_html,
.bd-article mjx-container.pe-wide-inline {
  overflow-x: auto;
}
.bd-article div.math { overflow-y: hidden; }
/* The equation's div scrolls (and is marked), not MathJax's container inside it. */
.bd-article div.math > mjx-container[jax="CHTML"][display="true"] { overflow: visible; }
.bd-article mjx-container.pe-wide-inline {
  display: inline-block; max-width: 100%; overflow-y: hidden; vertical-align: middle;
}
.pe-scroll { scrollbar-width: thin; scrollbar-color: rgba(110, 110, 110, 0.75) transparent; }
.pe-scroll::-webkit-scrollbar { height: 9px; }
.pe-scroll::-webkit-scrollbar-thumb { background: rgba(110, 110, 110, 0.75); border-radius: 5px; }
.pe-scroll.pe-more-right { box-shadow: inset -16px 0 12px -12px rgba(0, 0, 0, 0.45); }
.pe-scroll.pe-more-left { box-shadow: inset 16px 0 12px -12px rgba(0, 0, 0, 0.45); }
.pe-scroll.pe-more-left.pe-more-right {
  box-shadow: inset 16px 0 12px -12px rgba(0, 0, 0, 0.45), inset -16px 0 12px -12px rgba(0, 0, 0, 0.45);
}
html[data-theme="dark"] .pe-scroll.pe-more-right { box-shadow: inset -16px 0 12px -12px rgba(255, 255, 255, 0.5); }
html[data-theme="dark"] .pe-scroll.pe-more-left { box-shadow: inset 16px 0 12px -12px rgba(255, 255, 255, 0.5); }
html[data-theme="dark"] .pe-scroll.pe-more-left.pe-more-right {
  box-shadow: inset 16px 0 12px -12px rgba(255, 255, 255, 0.5), inset -16px 0 12px -12px rgba(255, 255, 255, 0.5);
}
p.pe-scroll-note { font-size: 0.85em; color: var(--pst-color-text-muted); margin: 0.2em 0 0.3em; }

/* Print (make pdf): nothing scrolls on paper. Code and outputs wrap, wide tables and equations are scaled to fit
   (book_site_layout.js, before printing), folds are open. */
@media print {
  .bd-article div.highlight > pre, .bd-article div.cell_output pre, .bd-article div.output pre {
    white-space: pre-wrap; overflow-wrap: anywhere; overflow: visible;
  }
  .pe-scroll, .pe-scroll.pe-more-left, .pe-scroll.pe-more-right { box-shadow: none; }
  p.pe-scroll-note { display: none; }
}

/* Phones: long identifiers, signatures, URLs and index tables wrap instead of widening the page. */
@media (max-width: 767.98px) {
  .bd-content { overflow-wrap: anywhere; }
  .bd-content code.literal, .bd-content code.literal span.pre, .bd-content dt.sig span.pre {
    white-space: pre-wrap; overflow-wrap: anywhere;
  }
  .bd-content table.indextable { table-layout: fixed; width: 100%; }
  .bd-content table.indextable td { overflow-wrap: anywhere; }
  /* Other tables keep their words and numbers whole (the rule above let the errata counts table squeeze to the
     column, one letter per line: "13" read as "1" over "3"); a table wider than the column scrolls in its frame. */
  .bd-content table:not(.indextable) :is(th, td), .bd-content table:not(.indextable) :is(th, td) * {
    overflow-wrap: normal; word-break: normal;
  }
  .bd-content table:not(.indextable) :is(th, td) :is(code.literal, span.pre) { white-space: nowrap; }
}
"""

# Reading (issue 39): display equations, text in math.
_READING_CSS = """
/* Display equations scroll to their first symbol. The theme lays div.math out as a reversed flex row (Sphinx writes
   the equation number first, the theme draws it on the right), so an equation wider than its box overflowed to the
   LEFT, before the box's start, where no scrolling reaches (21 equations at 390 px, 3 at 1280 px). A forward row puts
   the overflow on the right, inside the box that scrolls; the number stays at the end. */
.bd-article div.math { flex-direction: row; justify-content: flex-start; }
.bd-article div.math > span.eqno { order: 1; flex: none; }

/* Code at desktop widths. The chapters' code is written in lines of up to 120 characters; at 1280 px the page's table
   of contents ("On this page") took a fifth of the window and 309 of 402 code blocks and outputs scrolled sideways
   in a 752 px column. Below 1600 px that table of contents opens from the header's button (as on narrower screens)
   and the column takes its place, with code in 12 px type; from 1600 px the page may be wider than the theme's
   88rem, so the table of contents and a column for 120-character lines fit side by side. */
@media (min-width: 1200px) and (max-width: 1599.98px) {
  div.bd-sidebar-secondary { display: none; }
  .bd-main .bd-content .bd-article-container { max-width: 100%; }
  button.sidebar-toggle.secondary-toggle { display: flex; }
  .bd-article div.highlight > pre, .bd-article div.cell_output pre { font-size: 0.75rem; }
}
@media (min-width: 1600px) {
  .bd-page-width { max-width: 110rem; }
  .bd-article div.highlight > pre, .bd-article div.cell_output pre { font-size: 0.8125rem; }
}
/* Long names in the page's table of contents wrap ("SinusoidalPositionalEncodin" was cut at the window's edge). */
.bd-sidebar-secondary nav.page-toc a, .bd-sidebar-secondary .toc-entry a { overflow-wrap: anywhere; }

/* Phones: a table wider than the screen scrolls in its frame, at most 75 % of the screen tall, with its header row
   and its first column fixed, so a value stays next to its row's name and its column's name. */
@media (max-width: 767.98px) {
  .bd-article .pst-scrollable-table-container.pe-scroll { max-height: 75vh; overflow: auto; }
  .bd-article .pst-scrollable-table-container.pe-scroll thead th {
    position: sticky; top: 0; z-index: 2; background: var(--pst-color-background);
  }
  .bd-article .pst-scrollable-table-container.pe-scroll :is(thead, tbody) tr > :first-child {
    position: sticky; left: 0; z-index: 1; background: var(--pst-color-background);
    box-shadow: inset -1px 0 0 var(--pst-color-border);
  }
  .bd-article .pst-scrollable-table-container.pe-scroll thead tr > :first-child { z-index: 3; }
}
/* A figure opens at full size (book_site_layout.js links it): on a phone its labels are otherwise a few pixels high. */
a.pe-figure-link { cursor: zoom-in; }
"""

_SEARCH_TYPESET_JS = """
document.addEventListener("DOMContentLoaded", function () {
  var results = document.getElementById("search-results");
  if (!results || !window.MutationObserver) { return; }
  var pending = false;
  new MutationObserver(function () {
    if (pending || !window.MathJax || !MathJax.typesetPromise) { return; }
    pending = true;
    window.setTimeout(function () {
      pending = false;
      MathJax.typesetPromise([results]).catch(function (err) { console.error(err); });
    }, 50);
  }).observe(results, {childList: true, subtree: true});
});
"""


def mathjax_source() -> Path:
    """The ``es5`` folder of the installed MathJax distribution."""
    try:
        import mathjax  # the django-static-mathjax package; it needs no Django to be imported
    except ImportError as err:  # pragma: no cover - exercised only on a broken install
        raise ExtensionError("MathJax is not installed: run `make install` (django-static-mathjax)") from err
    es5 = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (es5 / "tex-mml-chtml.js").is_file():
        raise ExtensionError(f"no MathJax distribution under {es5}")
    return es5


def _ignore(folder: str, names: list[str]) -> set[str]:
    return {name for name in names if name in _SKIP}


def copy_mathjax(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    source = mathjax_source()
    target = Path(app.outdir) / "_static" / "mathjax"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=_ignore)
    shutil.copy2(source.parent / "LICENSE", target / "LICENSE")


_DOLLAR_MATH = re.compile(r"\$([^$\n]+)\$")
_TEX_WORD = re.compile(r"\\(?:text|textrm|mathrm|mathit|mathbf|operatorname)\{([^{}]*)\}")


def tex_to_plain(text: str) -> str:
    """Plain text for a title with inline TeX: delimiters dropped, ``\\text{model}`` -> ``model``."""
    text = re.sub(r"\\[()\[\]]|\$", "", text)
    text = _TEX_WORD.sub(r"\1", text)
    return re.sub(r"_\{([^{}]*)\}", r"_\1", text)


def collect_math_titles(app: Sphinx, doctree: nodes.document) -> None:
    """Remember each section title that contains math, keyed by the plain text Sphinx uses for {ref} links."""
    store = app.env.__dict__.setdefault("book_site_math_titles", {})
    for title in doctree.findall(nodes.title):
        if next(iter(title.findall(nodes.math)), None) is not None:
            store[clean_astext(title)] = [child.deepcopy() for child in title.children]


def merge_math_titles(app: Sphinx, env, docnames, other) -> None:
    env.__dict__.setdefault("book_site_math_titles", {}).update(getattr(other, "book_site_math_titles", {}))


def math_in_link_text(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Link text made from a title with math (or written with $...$) gets its math nodes back."""
    store = getattr(app.env, "book_site_math_titles", {})
    for reference in list(doctree.findall(nodes.reference)):
        for inline in list(reference.findall(nodes.inline)):
            if len(inline.children) != 1 or not isinstance(inline.children[0], nodes.Text):
                continue
            text = inline.astext()
            if text in store:
                inline.children = []
                inline.extend(child.deepcopy() for child in store[text])
            elif _DOLLAR_MATH.search(text):
                parts: list[nodes.Node] = []
                position = 0
                for match in _DOLLAR_MATH.finditer(text):
                    parts.append(nodes.Text(text[position:match.start()]))
                    parts.append(nodes.math(match.group(1), match.group(1)))
                    position = match.end()
                parts.append(nodes.Text(text[position:]))
                inline.children = []
                inline.extend(part for part in parts if not (isinstance(part, nodes.Text) and not part.astext()))


def plain_page_titles(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """The window title and the print heading cannot hold math: give them plain text."""
    for key in ("title", "pagetitle"):
        value = context.get(key)
        if isinstance(value, str) and ("\\" in value or "$" in value):
            context[key] = tex_to_plain(re.sub(r"<[^>]+>", "", value))


def drop_repeated_scripts(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Keep the first of script entries that differ only in priority or in an empty filename (None or "")."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen: set[tuple] = set()
    unique = []
    for script in scripts:
        attributes = getattr(script, "attributes", {})
        key = (getattr(script, "filename", script) or "", tuple(sorted((k, str(v)) for k, v in attributes.items() if k != "priority")))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique


class cjk_span(nodes.inline):
    """A run of Chinese text in an English page: ``<span lang="zh">`` (the CJK font and correct line breaking)."""


def _visit_cjk_span(self, node: cjk_span) -> None:
    self.body.append('<span lang="zh">')


def _depart_cjk_span(self, node: cjk_span) -> None:
    self.body.append("</span>")


# Text in these nodes is code, math or markup that a span would break.
_NO_CJK_SPAN = (nodes.FixedTextElement, nodes.literal, nodes.math, nodes.raw, nodes.comment, nodes.Invisible,
                nodes.title, cjk_span)


def mark_chinese(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Wrap every run of Chinese text of an English page in ``cjk_span`` (HTML builders only)."""
    if app.builder.format != "html" or (app.config.language or "en").lower().startswith("zh"):
        return
    for text in list(doctree.findall(nodes.Text)):
        parent = text.parent
        if parent is None or not cjk_font.CJK_CHAR.search(text.astext()):
            continue
        if any(isinstance(a, _NO_CJK_SPAN) for a in _ancestors(parent)):
            continue
        value = text.astext()
        parts: list[nodes.Node] = []
        position = 0
        for match in cjk_font.CJK_RUN.finditer(value):
            if match.start() > position:
                parts.append(nodes.Text(value[position:match.start()]))
            parts.append(cjk_span("", match.group(0)))
            position = match.end()
        if position < len(value):
            parts.append(nodes.Text(value[position:]))
        index = parent.index(text)
        parent.remove(text)
        for offset, part in enumerate(parts):
            parent.insert(index + offset, part)


def _ancestors(node: nodes.Node):
    while node is not None:
        yield node
        node = node.parent


# Exercises, and (issue 39) theorems and the other sphinx-proof kinds, figures, tables and listings: numbered per
# chapter ("Theorem 5" was the fifth theorem of the book, on a page whose first theorem it was).
try:
    from sphinx_proof.proof_type import PROOF_TYPES as _PROOF_TYPES
except ImportError:  # pragma: no cover - sphinx-proof is pinned in requirements.txt
    _PROOF_TYPES = {}
PER_CHAPTER_TYPES = ("exercise", "figure", "table", "code-block", *_PROOF_TYPES)


def number_per_chapter(app: Sphinx, env) -> list[str]:
    """Restart the numbers of PER_CHAPTER_TYPES at 1 in every document, keeping their order."""
    for by_type in env.toc_fignumbers.values():
        for figtype in PER_CHAPTER_TYPES:
            numbers = by_type.get(figtype)
            if numbers:
                order = sorted(numbers, key=lambda key: numbers[key])
                by_type[figtype] = {key: (index,) for index, key in enumerate(order, start=1)}
    return []


def _per_chapter_targets(env) -> dict[str, tuple[str, str]]:
    """id -> (docname, figtype) of every object numbered per chapter."""
    targets = {}
    for docname, by_type in env.toc_fignumbers.items():
        for figtype in PER_CHAPTER_TYPES:
            for key in by_type.get(figtype, {}):
                targets[key] = (docname, figtype)
    return targets


def name_other_chapters(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """A reference to a numbered object of another chapter names that chapter: "Theorem 2 of *The RoPE proof*"
    (numbers restart in every chapter, so "Theorem 2" alone would be this chapter's)."""
    env = app.env
    targets = _per_chapter_targets(env)
    chinese = (app.config.language or "en").lower().startswith("zh")
    for reference in list(doctree.findall(nodes.reference)):
        anchor = (reference.get("refuri") or "").partition("#")[2] or reference.get("refid", "")
        target = targets.get(anchor)
        # the single-page build (make pdf) resolves the whole book as its root document; each chapter in it starts
        # with a start_of_file node that names the chapter
        source = next((a["docname"] for a in _ancestors(reference) if isinstance(a, addnodes.start_of_file)), docname)
        if target is None or target[0] == source or target[0] not in env.titles:
            continue
        text = reference.astext()
        if not re.search(r"\d$", text) or len(reference.children) != 1:
            continue  # a reference with its own text ({ref}`words <label>`) says what it points at
        title = [child.deepcopy() for child in env.titles[target[0]].children]
        reference.children = []
        if chinese:
            reference.extend([nodes.Text("《"), *title, nodes.Text("》" + text)])
        else:
            reference.extend([nodes.Text(text + " of "), nodes.emphasis("", "", *title)])


def merge_split_outputs(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """One box per printed text: a cell that prints a table and calls glue() between the lines stores its output as
    several streams (glue's outputs sit between them and are not shown), which were drawn as one grey box per line."""
    for container in list(doctree.findall(nodes.container)):
        if "cell_output" not in container.get("classes", []):
            continue
        previous = None
        for child in list(container.children):
            if (isinstance(child, nodes.literal_block) and isinstance(previous, nodes.literal_block)
                    and "output" in child["classes"] and child["classes"] == previous["classes"]
                    and child.get("language") == previous.get("language")):
                text = previous.astext() + child.astext()
                previous.children = []
                previous += nodes.Text(text)
                previous.rawsource = text
                container.remove(child)
                continue
            previous = child


# Search (issue 39): erratum IDs are found, chapters rank above API entries.
_ERRATUM_ID = re.compile(r"^E\d{3}-\d{2}$")
_ERRATUM_LABEL = re.compile(r"^erratum-(e\d{3}-\d{2})$")


class ErratumIndexEntries(SphinxTransform):
    """An index entry for every erratum ID, where the ID is defined: each entry of the errata catalogue (a paragraph
    opening with the ID in bold, which also gets the anchor ``e001-10``) and each callout in a chapter (its
    ``erratum-e001-10`` label). Sphinx's search looks index entries up as whole strings, so "E001-10" finds them
    first; as words of the text it was split into "e001" and "10" and matched every page with an erratum."""

    default_priority = 800  # before SphinxDomains (850) collects the index entries

    def apply(self, **kwargs) -> None:
        for node in list(self.document.findall(nodes.Element)):
            kids = [c for c in node.children if not (isinstance(c, nodes.Text) and not c.astext())]  # MyST's empty texts
            if isinstance(node, nodes.paragraph) and kids and isinstance(kids[0], nodes.strong):
                text = kids[0].astext()
                after = kids[1].astext() if len(kids) > 1 else ""
                if _ERRATUM_ID.match(text) and after.startswith(" · "):
                    anchor = text.lower()
                    if anchor not in node["ids"]:
                        node["ids"].append(anchor)
                        self.document.ids.setdefault(anchor, node)
                    self._index(node, text, anchor)
                    continue
            for anchor in list(node.get("ids", [])):
                match = _ERRATUM_LABEL.match(anchor)
                if match and not isinstance(node, addnodes.index):
                    self._index(node, match.group(1).upper(), anchor)

    @staticmethod
    def _index(node: nodes.Element, text: str, anchor: str) -> None:
        if node.parent is None:
            return
        entry = addnodes.index(entries=[("single", text, anchor, "main", None)], inline=False)
        node.parent.insert(node.parent.index(node), entry)


# Where the book teaches each method a reader may search for by name: an index entry at the first paragraph of that
# chapter that names it. Sphinx's search ranks an index entry that matches the whole query first; as words of the text,
# "YaRN" ranked the bibliography and the errata above the chapter that explains it, and "position interpolation"
# did not list that chapter among the first six results.
TAUGHT_IN = {
    "sinusoidal encoding": "book/part1/sinusoidal",
    "RoPE": "book/part2/rope_first_principles",
    "rotary position embedding": "book/part2/rope_first_principles",
    "ALiBi": "book/part2/relative",
    "T5": "book/part2/relative",
    "position interpolation": "book/part3/context_extension",
    "NTK-aware": "book/part3/context_extension",
    "dynamic NTK": "book/part3/context_extension",
    "YaRN": "book/part3/context_extension",
}
# The same terms as the Chinese edition writes them, where it translates them (the others it keeps in English).
TAUGHT_IN_ZH = {"sinusoidal encoding": "正弦位置编码", "position interpolation": "位置插值",
                "rotary position embedding": "旋转位置编码"}


class TaughtInIndexEntries(SphinxTransform):
    """Index entries for TAUGHT_IN; a term its chapter no longer names is reported (a warning fails the build)."""

    default_priority = 800

    def apply(self, **kwargs) -> None:
        chinese = (self.config.language or "en").lower().startswith("zh")
        for term, docname in TAUGHT_IN.items():
            if docname != self.env.docname:
                continue
            term = TAUGHT_IN_ZH.get(term, term) if chinese else term
            edges = ("", "") if cjk_font.CJK_CHAR.search(term) else (r"(?<![\w-])", r"(?![\w-])")  # no spaces in Chinese
            pattern = re.compile(edges[0] + re.escape(term) + edges[1], re.IGNORECASE)
            paragraph = next((p for p in self.document.findall(nodes.paragraph) if pattern.search(p.astext())), None)
            section = next((a for a in _ancestors(paragraph) if isinstance(a, nodes.section)), None) if paragraph else None
            if section is None or not section["ids"]:
                logger.warning(f"[book_site] TAUGHT_IN: {docname} no longer names {term!r}", location=docname)
                continue
            entry = addnodes.index(entries=[("single", term, section["ids"][0], "main", None)], inline=False)
            paragraph.parent.insert(paragraph.parent.index(paragraph), entry)


SCORER = Path(__file__).resolve().parent / "book_site_static" / "book_site_scorer.js"


def search_scorer(app: Sphinx, config) -> None:
    """Sphinx's search scores with the book's Scorer (chapters above API entries); see the file."""
    if not config.html_search_scorer:
        config.html_search_scorer = str(SCORER)


STATIC = Path(__file__).resolve().parent / "book_site_static"


def _font_css(unicode_range: str) -> str:
    """The served CJK font: used for every CJK character (last in the text stacks, first in Chinese spans)."""
    if not unicode_range:
        return ""
    family = cjk_font.FAMILY
    return f"""
/* Noto Sans SC (SIL OFL 1.1, _static/fonts/OFL.txt), subset to the CJK characters of this build
   (tools/cjk_font.py): Chinese text renders on machines without a CJK font. */
@font-face {{
  font-family: "{family}";
  src: url("fonts/course-cjk.woff2") format("woff2");
  font-weight: 400;  /* one weight: browsers synthesize bold for headings and <strong> */
  font-display: swap;
  unicode-range: {unicode_range};
}}
html {{
  --pst-font-family-base: system-ui, "{family}", sans-serif, "Apple Color Emoji", "Segoe UI Emoji", "Noto Color Emoji";
  --pst-font-family-heading: var(--pst-font-family-base);
  --pst-font-family-monospace: var(--pst-font-family-monospace-system), "{family}";
}}
""" + cjk_text_css(family)


# MathJax draws formulas with its own fonts, which its elements (<mjx-container> and the <mjx-*> inside it) inherit
# from MathJax's stylesheet. A rule that names a font for *every* Chinese element reaches them too: on a zh-CN page
# every element matches :lang(zh), so digits, "=", "sin" and \mathrm were drawn in the body font ("i = 0" read
# "i = C", issue 36 Z1). The Chinese font is therefore given to text only: :where() keeps the selector's weight that
# of :lang(zh) alone, so the code rule below still wins for code. tools/site_test.py asks the browser which font drew
# every glyph of the formulas (check_math_fonts).
_NOT_MATH = ":where(:not(mjx-container, mjx-container *))"


def cjk_text_css(family: str) -> str:
    """The Chinese text rules: the served CJK fonts first for Chinese text (never for MathJax's elements; the
    punctuation family first, so that “”——…… are full width in Chinese and only there), code in the monospace stack,
    emphasis as Chinese typesetting does it, and short Chinese table cells kept on one line (below)."""
    punct = cjk_font.PUNCT_FAMILY
    return f"""
:lang(zh){_NOT_MATH} {{ font-family: "{punct}", "{family}", var(--pst-font-family-base); }}
:lang(zh) code, :lang(zh) pre, :lang(zh) kbd {{ font-family: var(--pst-font-family-monospace); }}
{CJK_EMPHASIS_CSS}
{CJK_NOWRAP_CSS}
"""


def punctuation_css(unicode_range: str) -> str:
    """The @font-face of the punctuation subset (cjk_font.subset_punctuation); used by the Chinese text rules only."""
    return f"""
@font-face {{
  font-family: "{cjk_font.PUNCT_FAMILY}";
  src: url("fonts/{cjk_font.PUNCT_SERVED.name}") format("woff2");
  font-weight: 400;
  font-display: swap;
  unicode-range: {unicode_range};
}}
"""


# Emphasis in Chinese (issue 36, S3). Han characters are not slanted (W3C clreq, "Requirements for Chinese Text
# Layout", 3.2): a browser given `font-style: italic` for a font with no italic synthesizes an oblique CJK face.
# Chinese marks emphasis with dots under the characters (着重号). mark_cjk_emphasis gives every emphasis node with
# Chinese text the class cjk-em, so emphasis in Latin text (a variable name, an English term) stays italic.
CJK_EMPHASIS_CSS = """em.cjk-em { font-style: normal; text-emphasis: filled dot; text-emphasis-position: under right; }
em.cjk-em :is(mjx-container, code) { text-emphasis: none; }
:lang(zh) .caption-number { font-style: normal; }"""  # the theme slants "Figure 1"; "图 1" stays upright

# A table cell with a few Chinese characters and nothing else ("源文档", "简体中文", "交错") is the narrowest column to
# an automatic table layout, since Chinese may break between any two characters: it was drawn one character per line
# (issue 36, S5). mark_cjk_nowrap gives such cells the class cjk-nowrap; a table then too wide for the column
# scrolls inside its frame like any other.
CJK_NOWRAP_CSS = ".cjk-nowrap { white-space: nowrap; }"
CJK_NOWRAP_MAX = 8  # characters


def mark_cjk_emphasis(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Emphasis whose text has a Chinese character gets the class cjk-em (HTML builders)."""
    if app.builder.format != "html":
        return
    for emphasis in doctree.findall(nodes.emphasis):
        if cjk_font.CJK_CHAR.search(emphasis.astext()) and "cjk-em" not in emphasis["classes"]:
            emphasis["classes"].append("cjk-em")


def mark_cjk_nowrap(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Table cells of at most CJK_NOWRAP_MAX characters, one of them Chinese, get the class cjk-nowrap."""
    if app.builder.format != "html":
        return
    for entry in doctree.findall(nodes.entry):
        text = entry.astext().strip()
        if text and len(text) <= CJK_NOWRAP_MAX and cjk_font.CJK_CHAR.search(text) and "cjk-nowrap" not in entry["classes"]:
            entry["classes"].append("cjk-nowrap")


def write_css(app: Sphinx, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html":
        outdir = Path(app.outdir)
        try:
            chars, unicode_range = cjk_font.subset_site(outdir)
        except ValueError as err:  # a CJK character the source font lacks
            raise ExtensionError(f"CJK font: {err}") from err
        (outdir / "_static" / "book_site.css").write_text(
            _SITE_CSS + _READING_CSS + _font_css(unicode_range)
            + (punctuation_css(cjk_font.subset_punctuation(outdir)) if chars else ""))
        logger.info(f"[book_site] CJK font subset: {len(chars)} characters")
        for name in ("book_site_layout.js", "book_site_search.js"):
            shutil.copy2(STATIC / name, Path(app.outdir) / "_static" / name)


def single_page_handlers(app: Sphinx) -> None:
    """The single-page build (make pdf) renders every node the HTML build renders.

    Sphinx looks node handlers up by builder name, and falls back to the format ("html") only when no extension
    registered any handler for "singlehtml"; some did, so myst-nb's folded code cells had none there."""
    if app.builder.name != "singlehtml":
        return
    handlers = app.registry.translation_handlers
    merged = dict(handlers.get("html", {}))
    merged.update(handlers.get("singlehtml", {}))
    handlers["singlehtml"] = merged


def math_text_font(app: Sphinx, config) -> None:
    """Characters that MathJax's fonts lack (Chinese in ``\\text{}``) are drawn by the served CJK font, then a serif."""
    if config.mathjax3_config is None:
        config.mathjax3_config = {}
    chtml = config.mathjax3_config.setdefault("chtml", {})
    chtml.setdefault("unknownFamily", f'"{cjk_font.FAMILY}", serif')


def check_config(app: Sphinx, config) -> None:
    if config.mathjax_path != MATHJAX_PATH:
        raise ExtensionError(f"mathjax_path must be {MATHJAX_PATH!r} (the local copy), not {config.mathjax_path!r}")
    mathjax_source()
    # YAML gives lists; Sphinx looks (type, target) tuples up in nitpick_ignore.
    config.nitpick_ignore = [tuple(item) for item in config.nitpick_ignore]


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", check_config)
    app.connect("config-inited", math_text_font)
    app.connect("config-inited", search_scorer)
    app.add_transform(ErratumIndexEntries)
    app.add_transform(TaughtInIndexEntries)
    app.connect("builder-inited", single_page_handlers)
    app.connect("build-finished", copy_mathjax)
    # MathJax on every page: navigation and titles may contain math on pages that have none in their body.
    app.set_html_assets_policy("always")
    app.add_js_file(None, body=_SEARCH_TYPESET_JS)
    app.add_js_file(None, body=_FOLD_PROOFS_JS)
    app.connect("build-finished", write_css)
    app.connect("html-page-context", drop_repeated_scripts, priority=900)
    app.connect("html-page-context", plain_page_titles, priority=900)
    app.connect("doctree-read", collect_math_titles)
    app.connect("env-get-updated", number_per_chapter, priority=900)  # after Sphinx assigns figure numbers
    app.connect("env-merge-info", merge_math_titles)
    app.connect("doctree-resolved", math_in_link_text)
    app.connect("doctree-resolved", name_other_chapters)
    app.connect("doctree-resolved", merge_split_outputs)
    app.connect("doctree-resolved", mark_chinese)
    app.connect("doctree-resolved", mark_cjk_emphasis)
    app.connect("doctree-resolved", mark_cjk_nowrap)
    app.add_node(cjk_span, html=(_visit_cjk_span, _depart_cjk_span))
    app.add_css_file("book_site.css")
    app.add_js_file("book_site_layout.js")
    app.add_js_file("book_site_search.js", priority=900)  # after searchtools.js, whose Search it wraps
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
