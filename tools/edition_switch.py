"""Sphinx extension: a language switch on every page, and the Chinese edition's own site labels.

Loaded by both editions (``local_extensions`` in ``_config.yml``; the Chinese edition's generated configuration,
tools/zh_edition.py, adds it too). On every HTML page it adds a header button that opens the same page in the other
edition: "中文" on an English page, "English" on a Chinese one. The two builds are sibling folders,
``_build/html`` and ``_build/html-zh``; a site published with another layout sets the path from one edition's root
to the other's in the environment when it builds:

    BOOK_EDITION_ROOT_EN   from the English root to the Chinese root (default ``../html-zh``)
    BOOK_EDITION_ROOT_ZH   from the Chinese root to the English root (default ``../html``)

Served or published, the two editions must therefore sit side by side. ``make site`` (``python
tools/edition_switch.py site``) assembles that site from the two builds: ``_build/site/html`` (English),
``_build/site/html-zh`` (Chinese) and a root ``index.html`` that opens the English edition. ``make serve`` serves
it, and .github/workflows/publish.yml publishes it; tools/site_test.py checks every switch link in that layout.

In the Chinese edition (``language = "zh_CN"``) it also installs the site labels of
``locale/zh_CN/LC_MESSAGES/site.po`` with context "theme" (which tools/zh_edition.py writes next to the generated
``_config.yml``) in front of the zh_CN catalogues of Sphinx, the theme and the extensions, for strings those
catalogues lack or translate badly, and translates the tooltips and labels that the theme's templates write as
literal English.
"""

from __future__ import annotations

import gettext
import html
import json
import os
import re
import shutil
import sys
from pathlib import Path

from sphinx.application import Sphinx

DEFAULT_ROOTS = {"en": "../html-zh", "zh": "../html"}
# Catalogues whose zh_CN strings the "theme" labels override: Sphinx's own, the book theme's, pydata's,
# sphinx-exercise's and sphinx-proof's.
DOMAINS = ("sphinx", "booktheme", "pydata-sphinx-theme", "exercise", "proof")
_FIX_TARGET_JS = """
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("a.edition-switch").forEach(function (a) {
    a.removeAttribute("target");  // the theme opens header links in a new tab; a language switch should not
  });
});
"""


# Chinese typesetting: a line must not begin with closing punctuation. After a formula (an inline block for the
# browser) nothing stops that, so "... = 1/100" could end a line and "。" begin the next. Each formula followed by
# closing punctuation is wrapped with that character in a span that does not break. Chinese edition only.
_KEEP_PUNCTUATION_JS = """
(function () {
  var closing = /^[\uff0c\u3002\uff1b\uff1a\u3001\uff01\uff1f\uff09\u300d\u300f\u201d\u2019\u3011]/;
  function glue() {
    document.querySelectorAll("mjx-container:not([display='true'])").forEach(function (container) {
      // Sphinx writes inline math as <span class="math">, which MathJax fills: the punctuation follows the span.
      var math = container.parentNode.matches("span.math") ? container.parentNode : container;
      var next = math.nextSibling;
      if (!next || next.nodeType !== Node.TEXT_NODE || !closing.test(next.textContent)) { return; }
      if (math.parentNode.classList && math.parentNode.classList.contains("zh-nobreak")) { return; }
      var span = document.createElement("span");
      span.className = "zh-nobreak";
      span.style.whiteSpace = "nowrap";
      math.parentNode.insertBefore(span, math);
      span.appendChild(math);
      span.appendChild(document.createTextNode(next.textContent.charAt(0)));
      next.textContent = next.textContent.slice(1);
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) { MathJax.startup.promise.then(glue); }
  });
})();
"""


# sphinx-proof writes the literal "Proof. " in front of a proof (no catalogue), and tools/book_site.py folds proofs
# under a summary reading "Proof": both become the site label's translation (runs after book_site's script).
_PROOF_JS = """
document.addEventListener("DOMContentLoaded", function () {
  var word = %s;
  document.querySelectorAll("div.proof.admonition").forEach(function (box) {
    box.querySelectorAll(":scope > details.proof-fold > summary").forEach(function (s) {
      if (s.textContent.trim() === "Proof") { s.textContent = word; }
    });
    var first = box.querySelector("p");
    if (first && first.firstChild && first.firstChild.nodeType === Node.TEXT_NODE) {
      first.firstChild.textContent = first.firstChild.textContent.replace(/^\\s*Proof\\.\\s*/, word + "\u3000");
    }
  });
});
"""


TABLE_NOTE = "This table is wider than the column: scroll it sideways to see every column."


def add_chinese_assets(app: Sphinx) -> None:
    if is_chinese(app):
        app.add_js_file(None, body=_KEEP_PUNCTUATION_JS)
        note = site_labels(app).get(("theme", TABLE_NOTE))
        if note:  # the note under a table wider than the column (tools/book_site_static/book_site_layout.js)
            app.add_js_file(None, body=f"window.BOOK_SITE_TABLE_NOTE = {json.dumps(note, ensure_ascii=False)};")
        word = site_labels(app).get(("theme", "Proof"))
        if word:
            app.add_js_file(None, body=_PROOF_JS % json.dumps(word, ensure_ascii=False))


def is_chinese(app: Sphinx) -> bool:
    return (app.config.language or "en").lower().startswith("zh")


def other_root(app: Sphinx) -> str:
    if is_chinese(app):
        return os.environ.get("BOOK_EDITION_ROOT_ZH", DEFAULT_ROOTS["zh"]).rstrip("/")
    return os.environ.get("BOOK_EDITION_ROOT_EN", DEFAULT_ROOTS["en"]).rstrip("/")


def site_labels(app: Sphinx) -> dict[tuple[str, str], str]:
    path = Path(app.srcdir) / "_zh_site_labels.json"
    if not is_chinese(app) or not path.is_file():
        return {}
    return {(item["context"], item["msgid"]): item["msgstr"] for item in json.loads(path.read_text(encoding="utf-8"))}


class _Overrides(gettext.NullTranslations):
    def __init__(self, table: dict[str, str]) -> None:
        super().__init__()
        self.table = table

    def gettext(self, message: str) -> str:
        if message in self.table:
            return self.table[message]
        return self._fallback.gettext(message) if self._fallback else message

    def ngettext(self, singular: str, plural: str, n: int) -> str:
        if singular in self.table and n == 1:
            return self.table[singular]
        if plural in self.table and n != 1:
            return self.table[plural]
        return self._fallback.ngettext(singular, plural, n) if self._fallback else (singular if n == 1 else plural)


def install_theme_labels(app: Sphinx) -> None:
    """Put the "theme" labels of site.po in front of every zh_CN catalogue the site's strings come from."""
    from sphinx import locale

    table = {msgid: msgstr for (context, msgid), msgstr in site_labels(app).items() if context == "theme"}
    if not table:
        return
    for namespace in ("general", "console"):
        for domain in DOMAINS:
            key = (namespace, domain)
            current = locale.translators.get(key)
            if isinstance(current, _Overrides):
                continue
            if isinstance(getattr(current, "_catalog", None), dict):
                # The same object is already held elsewhere (the templates' gettext is Sphinx's translator, installed
                # before this event): change its catalogue in place.
                current._catalog.update(table)
                continue
            override = _Overrides(table)
            if current is not None:
                override.add_fallback(current)
            locale.translators[key] = override


# On a phone the header has no room for one more labelled button (the pages scrolled sideways by 24 px at 390 px):
# the switch shows its icon only there, with the language in its tooltip and its accessible name.
_CSS = """\
@media (max-width: 767.98px) {
  a.edition-switch .btn__text-container { display: none; }
}
/* The switch's tooltip ("中文版 ..." on an English page) is a Bootstrap tooltip outside the button, in the page's
   font stack, which starts with system-ui: the served CJK font first (its unicode-range holds only CJK characters,
   so every other character falls through to the usual stack). */
.tooltip-inner { font-family: "Course CJK", var(--pst-font-family-base); }
"""


def write_css(app: Sphinx, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html":
        (Path(app.outdir) / "_static" / "edition_switch.css").write_text(_CSS, encoding="utf-8")


_ATTRIBUTES = ("title", "aria-label", "data-bs-title", "placeholder", "alt")


def translate_attributes(app: Sphinx, exception: Exception | None) -> None:
    """Tooltips and labels that the theme's templates write as literal English (no gettext call): in the Chinese
    edition, an attribute whose whole value is a "theme" label of site.po gets its translation."""
    if exception is not None or app.builder.format != "html":
        return
    table = {msgid: msgstr for (context, msgid), msgstr in site_labels(app).items() if context == "theme"}
    if not table:
        return
    import html
    import re

    pattern = re.compile(r'\b(' + "|".join(_ATTRIBUTES) + r')="([^"]*)"')

    def replace(match: re.Match) -> str:
        value = html.unescape(match.group(2))
        if value in table:
            return f'{match.group(1)}="{html.escape(table[value])}"'
        return match.group(0)

    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        new = pattern.sub(replace, text)
        if new != text:
            page.write_text(new, encoding="utf-8")


def add_switch(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    buttons = context.get("header_buttons")
    if buttons is None or not getattr(app.config, "edition_switch_button", True):
        return  # (the Chinese student edition loads this extension for its labels and has no counterpart to open)
    href = "../" * pagename.count("/") + f"{other_root(app)}/{pagename}.html"
    if is_chinese(app):
        labels = site_labels(app)
        text = labels.get(("switch", "English"), "English")
        tooltip = labels.get(("switch", "Read this page in English"), "Read this page in English")
        lang = "en"
    else:
        text, tooltip = "中文", "中文版 (Chinese edition of this page)"
        lang = "zh-CN"
    # The label is in the other edition's language and says so (lang): screen readers read it in that language, and
    # on an English page the served CJK font draws it (tools/book_site.py's `:lang(zh)` rule). Without the mark it
    # was drawn by the system-ui font, which on a machine without a CJK font shows two empty boxes. The theme's
    # template writes `text` as it is (Sphinx's templates are not auto-escaped).
    label = f'<span lang="{lang}">{html.escape(text)}</span>'
    buttons.append({"type": "link", "url": href, "text": label, "tooltip": tooltip, "icon": "fas fa-language",
                    "label": "edition-switch", "classes": "edition-switch"})


# Search in Chinese. Sphinx indexes Chinese text with jieba (pinned), which cuts "位置编码" into "位置" and "编码" unless
# it knows the word (tools/zh_edition.py hands it the glossary's terms as a user dictionary); a query is not cut at
# all, so "位置编码" matched nothing. This splitter cuts each run of Chinese characters in a query into the longest
# words of the index (greedy, at most 8 characters), and leaves other words as Sphinx's default splitter does.
_SPLIT_QUERY_JS = r"""
var splitQuery = function (query) {
  var index = (typeof Search !== "undefined" && Search._index) ? Search._index.terms : {};
  var cjk = /[\u3400-\u4dbf\u4e00-\u9fff]/;
  var words = [];
  query.split(/[^\p{Letter}\p{Number}_\p{Emoji_Presentation}]+/gu).filter(function (t) { return t; })
    .forEach(function (part) {
      (part.match(/[\u3400-\u4dbf\u4e00-\u9fff]+|[^\u3400-\u4dbf\u4e00-\u9fff]+/g) || []).forEach(function (run) {
        if (!cjk.test(run)) { words.push(run); return; }
        var i = 0;
        while (i < run.length) {
          var j = Math.min(run.length, i + 8);
          while (j > i + 1 && !Object.prototype.hasOwnProperty.call(index, run.slice(i, j))) { j--; }
          var word = run.slice(i, j);
          // Sphinx does not index single characters: a lone one would make every query fail, so it is dropped.
          if (word.length > 1 || Object.prototype.hasOwnProperty.call(index, word)) { words.push(word); }
          i = j;
        }
      });
    });
  return words;
};
"""


def chinese_search_language():
    from sphinx.search.zh import SearchChinese

    class BookSearchChinese(SearchChinese):
        js_splitter_code = _SPLIT_QUERY_JS

    return BookSearchChinese


# ----------------------------------------------------------------------------------------------- Chinese typography
# (issue 36: S2 exercise labels, S4 theorem titles, and links whose text is Chinese.) Chinese edition only.

_CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")


def _solution_titles_transform():
    from sphinx.transforms.post_transforms import SphinxPostTransform

    class ChineseSolutionTitles(SphinxPostTransform):
        """A solution's title in Chinese word order: "习题 3 解答", not "解答 习题 3".

        sphinx-exercise writes the title as the word "Solution to" followed by a link to the exercise ("Exercise 3",
        and its own title in parentheses); in Chinese the link comes first. Runs after sphinx-exercise resolved the
        titles (its post-transforms have priorities 20 to 22)."""

        default_priority = 23

        def run(self, **kwargs) -> None:
            if not is_chinese(self.app):
                return
            from docutils import nodes
            from sphinx_exercise.nodes import solution_node

            for solution in self.document.findall(solution_node):
                title = solution.children[0] if solution.children else None
                if not isinstance(title, nodes.title) or len(title.children) != 2:
                    continue
                word, link = title.children
                if not (isinstance(word, nodes.Text) and isinstance(link, nodes.reference) and link.children):
                    continue
                first = link.children[0]
                if isinstance(first, nodes.Text):
                    link.replace(first, nodes.Text(first.astext().lstrip()))
                title.children = []
                title += [link, nodes.Text(" " + word.astext().strip())]

    return ChineseSolutionTitles


def tighten_link_spacing(app: Sphinx, doctree, docname: str) -> None:
    """No half-width space between Chinese text and a link whose text is Chinese.

    Translators keep a space around a role ("见 {ref}`ch-shift-theorem`", "这正是 {ref}`ex-gen-reposition` 的论证"),
    because the role is written in Latin letters; in the Chinese edition its text is the Chinese title or label
    ("平移定理", "习题 2"), and Chinese puts no space between Chinese characters. The space stays where either side
    is Latin, a digit or math."""
    if not is_chinese(app):
        return
    from docutils import nodes

    for link in list(doctree.findall(nodes.reference)):
        text = link.astext()
        if not text or not _CJK.match(text[0]) and not _CJK.match(text[-1]):
            continue
        parent = link.parent
        if parent is None:
            continue
        index = parent.index(link)
        before = parent[index - 1] if index > 0 else None
        after = parent[index + 1] if index + 1 < len(parent) else None
        if _CJK.match(text[0]) and isinstance(before, nodes.Text) and re.search(rf"{_CJK.pattern} $", before.astext()):
            parent.replace(before, nodes.Text(before.astext()[:-1]))
        if _CJK.match(text[-1]) and isinstance(after, nodes.Text) and re.match(rf" {_CJK.pattern}", after.astext()):
            parent.replace(after, nodes.Text(after.astext()[1:]))


# sphinx-proof writes "定理 5 " (its caption, with a trailing space) and then the title; the Chinese edition's title
# format has full-width parentheses (zh_edition.zh_typography_config), which take no space before them.
_CAPTION_SPACE = re.compile(r'(<span class="caption-number">[^<]*?)\s+(</span>)\s*(（)')


def tighten_theorem_titles(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    if is_chinese(app) and isinstance(context.get("body"), str):
        context["body"] = _CAPTION_SPACE.sub(r"\1\2\3", context["body"])


def setup(app: Sphinx) -> dict:
    app.add_config_value("edition_switch_button", True, "html")
    app.add_search_language(chinese_search_language())
    app.connect("builder-inited", install_theme_labels)
    app.connect("builder-inited", add_chinese_assets)
    app.connect("html-page-context", add_switch, priority=510)  # after the book theme's buttons (501)
    app.add_js_file(None, body=_FIX_TARGET_JS)
    app.connect("build-finished", translate_attributes)
    app.add_post_transform(_solution_titles_transform())
    app.connect("doctree-resolved", tighten_link_spacing)
    app.connect("html-page-context", tighten_theorem_titles)
    app.connect("build-finished", write_css)
    app.add_css_file("edition_switch.css")
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}


# ----------------------------------------------------------------------------------------------- the assembled site

SITE_INDEX = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<meta http-equiv="Refresh" content="0; url={en}/index.html">
<link rel="canonical" href="{en}/index.html">
</head>
<body>
<p><a href="{en}/index.html">{title}</a> (English)</p>
<p><a href="{zh}/index.html" lang="zh-CN">中文版</a></p>
</body>
</html>
"""


def assemble_site(english: Path, chinese: Path, out: Path, title: str = "Positional Encoding, Corrected") -> None:
    """Copy both built editions into ``out`` in the layout their switch links expect (siblings named after the
    default roots, ``html`` and ``html-zh``) and write a root ``index.html`` that opens the English edition.

    ``out`` is replaced. A missing edition is a ValueError that says which ``make`` target builds it."""
    for site, target in ((english, "make book"), (chinese, "make book-zh")):
        if not (site / "index.html").is_file():
            raise ValueError(f"no built edition in {site}: run `{target}` first")
    en_name, zh_name = Path(DEFAULT_ROOTS["zh"]).name, Path(DEFAULT_ROOTS["en"]).name  # "html", "html-zh"
    # Assembled beside ``out`` and then swapped in, so that a server or a site test reading ``out`` (make serve
    # assembles again each time it starts) never sees a half-copied site.
    new, old = out.with_name(out.name + ".new"), out.with_name(out.name + ".old")
    for folder in (new, old):
        if folder.exists():
            shutil.rmtree(folder)
    new.mkdir(parents=True)
    shutil.copytree(english, new / en_name)
    shutil.copytree(chinese, new / zh_name)
    (new / "index.html").write_text(SITE_INDEX.format(title=html.escape(title), en=en_name, zh=zh_name),
                                    encoding="utf-8")
    (new / ".nojekyll").write_text("")  # GitHub Pages: serve the _static folders as they are
    if out.exists():
        out.rename(old)
    new.rename(out)
    if old.exists():
        shutil.rmtree(old)


def main(argv: list[str] | None = None) -> int:
    import argparse

    root = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(description="Assemble the two-edition site (make site).")
    sub = parser.add_subparsers(dest="command", required=True)
    site = sub.add_parser("site", help="both editions side by side, with a root index opening the English one")
    site.add_argument("--en", type=Path, default=root / "_build" / "html")
    site.add_argument("--zh", type=Path, default=root / "_build" / "html-zh")
    site.add_argument("--out", type=Path, default=root / "_build" / "site")
    args = parser.parse_args(argv)
    try:
        assemble_site(args.en, args.zh, args.out)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"==> both editions in {args.out}: {args.out}/html (English), {args.out}/html-zh (Chinese), "
          f"{args.out}/index.html opens the English edition")
    return 0


if __name__ == "__main__":
    sys.exit(main())
