"""Test the built book in a real browser: `make test-site` (after `make book`).

    python tools/site_test.py [--site _build/html] [--root FOLDER] [--out _build/site-test] [--chromium /usr/bin/chromium]

Serves the built site from 127.0.0.1 (a server inside this process, on a free port, stopped when the test ends or
after --time-limit seconds), opens every page in headless Chromium (Debian's `chromium`, driven by Playwright
for Python through its `executable_path`; Playwright downloads no browser), blocks and counts every request to
another host, and fails on:

* a console error or an uncaught page error; a failed request or an HTTP error status; any request to another host;
* raw TeX left in the text after MathJax ran (outside code);
* a broken image; an internal link to a missing file or a missing anchor;
* a launch button (Binder, Colab) that does not point at a notebook of this repository at its path;
* horizontal scrolling at 390 px width, on every page;
* a word or number of a table cell broken over two lines at 390 px (a table squeezed instead of scrolling);
* a language switch ("中文" / "English" in the header) missing, or one that does not open the same page of the other
  edition as served: with --root, the folder served at the web root (make site's _build/site, holding both editions),
  every switch link is followed on the server. Where the other edition is not built (the English build tested alone,
  the student edition) the links cannot be followed: the summary says so, with how many were left unchecked; one
  built beside it but not served with it fails (its switch is a 404 there, as on the site published before);
* a switch label drawn without the served CJK font (the "中文" on every English page must not be empty boxes);
* a glyph inside a formula drawn by a font that is not one of MathJax's (the browser says which font drew each glyph:
  all of them on worked_example and rope_proof, a sample on every other page; a self-test must catch a formula drawn
  in the body font); Chinese punctuation (“ ” — …) in Chinese text not drawn by the served font, or not full width.

It also checks that searching for "rotary" lists the RoPE chapter, that an exercise solution and a proof fold
and unfold, and that a page opened straight from disk (file://) renders its math. Screenshots go to --out.
Exit status 0 when everything passed, 1 with a list of problems otherwise, 2 when the browser is missing.
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import html.parser
import http.server
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import cjk_font  # noqa: E402
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]
INSTALL_HELP = """\
The site test needs Debian's Chromium and Playwright for Python:
    apt-get update && apt-get install -y chromium     (as root; the browser lands in /usr/bin/chromium)
    make install                                     (installs playwright from requirements.txt)
Playwright's own browser download (`playwright install`) is not needed and not used."""

# TeX that MathJax should have replaced. Matched against text outside code, <script>, and MathJax output.
RAW_TEX = re.compile(
    r"\\[()\[\]]"  # \( \) \[ \]
    r"|\$\$"  # display dollars
    r"|\$[^$\n]{0,80}\\[A-Za-z]+[^$\n]{0,80}\$"  # $ ... \command ... $
    r"|\\(?:text|mathrm|mathbf|mathcal|frac|sqrt|sin|cos|omega|theta|alpha|sum|cdot|top|langle|rangle|operatorname|left|right|begin|end|mathbb|ell|qquad|quad|le|ge|in|to)(?![A-Za-z])"
)
SKIP_TEXT_IN = "pre, code, script, style, textarea, mjx-container, mjx-assistive-mml, .MathJax, .highlight, kbd"

LAUNCH_HOSTS = ("mybinder.org", "colab.research.google.com")


def progress(message: str) -> None:
    """One line of progress, at once (the test takes a minute or more; CI logs are not terminals)."""
    print(message, flush=True)


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    pages: int = 0
    blocks: int = 0
    cjk_samples: int = 0
    math_glyphs: int = 0  # glyphs inside formulas whose drawing font was asked of the browser
    switch_links: int = 0
    switch_labels: int = 0
    switch_unchecked: dict[str, int] = field(default_factory=dict)  # why a switch link could not be followed: count
    reading: dict[str, int] = field(default_factory=dict)  # counts of the reading checks (reading_problems)

    def fail(self, page: str, message: str) -> None:
        self.problems.append(f"{page}: {message}")


# ----------------------------------------------------------------------------------------------- static checks


class _LinkParser(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href)


def repository_settings(config_path: Path = ROOT / "_config.yml") -> tuple[str, str, str]:
    """(owner/name, branch, path_to_book) of the published repository, from `repository:` in _config.yml."""
    repo = yaml.safe_load(config_path.read_text())["repository"]
    url = repo["url"].rstrip("/")
    match = re.fullmatch(r"https://github\.com/([^/]+/[^/]+?)(?:\.git)?", url)
    if not match:
        raise ValueError(f"repository.url in _config.yml must be https://github.com/OWNER/NAME, not {url!r}")
    return match.group(1), repo.get("branch", "main"), (repo.get("path_to_book") or "").strip("/")


def launch_url_problems(html_files: list[Path], repo_root: Path, repository: str, branch: str) -> tuple[list[str], int]:
    """Check every Binder and Colab link in the given pages: right repository and branch, an existing notebook.

    Returns (problems, number of launch links seen).
    """
    problems: list[str] = []
    seen = 0
    binder = re.compile(r"https://mybinder\.org/v2/gh/(?P<repo>[^/]+/[^/]+)/(?P<branch>[^?]+)\?urlpath=(?:lab/)?tree/(?P<path>.+)")
    colab = re.compile(r"https://colab\.research\.google\.com/github/(?P<repo>[^/]+/[^/]+)/blob/(?P<branch>[^/]+)/(?P<path>.+)")
    for page in html_files:
        parser = _LinkParser()
        parser.feed(page.read_text(encoding="utf-8"))
        for href in parser.hrefs:
            host = urllib.parse.urlsplit(href).hostname or ""
            if host not in LAUNCH_HOSTS:
                continue
            seen += 1
            match = binder.fullmatch(href) or colab.fullmatch(href)
            if match is None:
                problems.append(f"{page.name}: launch link of an unknown form: {href}")
                continue
            path = urllib.parse.unquote(match["path"])
            if match["repo"] != repository:
                problems.append(f"{page.name}: launch link names repository {match['repo']}, not {repository}: {href}")
            if urllib.parse.unquote(match["branch"]) != branch:
                problems.append(f"{page.name}: launch link names branch {match['branch']}, not {branch}: {href}")
            target = repo_root / path
            if not (path.endswith(".ipynb") and target.is_file()):
                problems.append(f"{page.name}: launch link points at {path}, which is not a notebook in the repository")
    return problems, seen


# ----------------------------------------------------------------------------------------------- server


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's name
        pass


class LocalServer:
    """Serve a folder on 127.0.0.1 (a free port) from a thread of this process; stops on exit or after a limit."""

    def __init__(self, folder: Path, time_limit: float) -> None:
        handler = functools.partial(_QuietHandler, directory=str(folder))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.origin = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._timer = threading.Timer(time_limit, self.stop)
        self._timer.daemon = True

    def __enter__(self) -> "LocalServer":
        self._thread.start()
        self._timer.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()

    def __exit__(self, *exc) -> None:
        self._timer.cancel()
        self.stop()
        self.httpd.server_close()


# ----------------------------------------------------------------------------------------------- browser checks

_PAGE_STATE_JS = """
(args) => {
  const [skipSelector, rawTex] = args;
  const re = new RegExp(rawTex);
  const raw = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let node;
  while ((node = walker.nextNode())) {
    const parent = node.parentElement;
    if (!parent || parent.closest(skipSelector)) continue;
    const m = node.textContent.match(re);
    if (m) raw.push(node.textContent.trim().slice(0, 120));
  }
  const ids = Array.from(document.querySelectorAll("[id]")).map((e) => e.id)
    .concat(Array.from(document.querySelectorAll("a[name]")).map((e) => e.getAttribute("name")));
  // The language switch links to the sibling edition, outside the served folder (tools/zh_edition.py checks it).
  // The language switch goes to the other edition: checked on its own (switch_link_problems).
  const links = Array.from(document.querySelectorAll("a[href]:not(.edition-switch)")).map((a) => a.href);
  const switches = Array.from(document.querySelectorAll("a.edition-switch")).map((a) => a.getAttribute("href") || "");
  const images = Array.from(document.images).map((img) => ({src: img.currentSrc || img.src,
    ok: img.complete && img.naturalWidth > 0}));
  const mathSource = document.querySelectorAll("span.math, div.math").length;
  const mathRendered = document.querySelectorAll("mjx-container").length;
  return {raw, ids, links, switches, images, mathSource, mathRendered};
}
"""

_WAIT_FOR_MATHJAX_JS = """
async () => {
  if (!window.MathJax) return "no MathJax";
  for (let i = 0; i < 200 && !(MathJax.startup && MathJax.startup.promise); i++) {
    await new Promise((r) => setTimeout(r, 25));
  }
  if (!(MathJax.startup && MathJax.startup.promise)) return "MathJax did not start";
  await MathJax.startup.promise;
  return "ok";
}
"""


# ----------------------------------------------------------------------------------------------- clipping

# The blocks that must never be cut off, as (kind, CSS selector inside the article). A display equation is the
# div.math that holds it; an inline formula is a MathJax container outside such a div.
BLOCK_KINDS = (
    ("code", "div.highlight > pre"),
    ("output", "div.cell_output pre, div.output pre"),
    ("equation", "div.math"),
    ("table", "table"),
    ("inline formula", "mjx-container:not([display='true'])"),
    ("figure", "img"),
)

_OPEN_FOLDS_JS = """
async () => {
  document.querySelectorAll('details').forEach((d) => { d.open = true; });
  document.querySelectorAll('.toggle-hidden').forEach((e) => e.classList.remove('toggle-hidden'));
  if (window.peLayout) window.peLayout();
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  if (window.peLayout) window.peLayout();
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
}
"""

_WAIT_FOR_LAYOUT_JS = """
async () => {
  for (let i = 0; i < 400 && document.documentElement.dataset.peLayout !== 'ready'; i++) {
    await new Promise((r) => setTimeout(r, 25));
  }
  return document.documentElement.dataset.peLayout === 'ready';
}
"""

# For every visible block of BLOCK_KINDS: either it lies inside a box that scrolls sideways (overflow-x auto or
# scroll) and that box, when its content is wider than itself, shows that it scrolls (book_site_layout.js's
# .pe-scroll mark, a scrollbar that takes space, an edge shadow), and the box itself stays inside the column; or it
# fits: its content is not cut by its own overflow, and it does not run past the column's or its line's right edge.
_CLIPPING_JS = """
(kinds) => {
  const article = document.querySelector('article.bd-article') || document.querySelector('[role=main]');
  if (!article) return {checked: 0, problems: ['no article element on the page']};
  const aStyle = getComputedStyle(article);
  const limit = article.getBoundingClientRect().right - parseFloat(aStyle.paddingRight) - parseFloat(aStyle.borderRightWidth);
  const start = article.getBoundingClientRect().left + parseFloat(aStyle.paddingLeft) + parseFloat(aStyle.borderLeftWidth);
  // The horizontal extent of a block and of its children (a centred child wider than its parent spills both ways).
  const extent = (e) => {
    let [left, right] = [e.getBoundingClientRect().left, e.getBoundingClientRect().right];
    for (const c of e.children) {
      const r = c.getBoundingClientRect();
      if (r.width > 0) { left = Math.min(left, r.left); right = Math.max(right, r.right); }
    }
    return [left, right];
  };
  const visible = (e) => e.getClientRects().length > 0 && e.checkVisibility({visibilityProperty: true});
  const describe = (e) => {
    const fixture = e.closest('[data-pe-fixture]');
    const tag = fixture ? `[fixture ${fixture.dataset.peFixture}] ` : '';
    return tag + (e.textContent || e.getAttribute('src') || '').replace(/\\s+/g, ' ').trim().slice(0, 70);
  };
  const scrollBox = (e) => {
    for (let a = e; a && a !== article; a = a.parentElement) {
      const ox = getComputedStyle(a).overflowX;
      if (ox === 'auto' || ox === 'scroll') return a;
    }
    return null;
  };
  const lineRight = (e) => {
    let p = e.parentElement;
    while (p && p !== article && getComputedStyle(p).display.startsWith('inline')) p = p.parentElement;
    const s = getComputedStyle(p);
    return p.getBoundingClientRect().right - parseFloat(s.paddingRight) - parseFloat(s.borderRightWidth);
  };
  const problems = [];
  let checked = 0;
  const seenBoxes = new Set();
  const affordance = (kind, box, e) => {
    if (seenBoxes.has(box) || box.scrollWidth <= box.clientWidth + 1) return;
    seenBoxes.add(box);
    const s = getComputedStyle(box);
    const bar = box.offsetHeight - box.clientHeight - parseFloat(s.borderTopWidth) - parseFloat(s.borderBottomWidth);
    const hidden = box.scrollWidth - box.clientWidth;
    if (!box.classList.contains('pe-scroll')) {
      problems.push(`${kind} hides ${hidden} px to the right with no scroll hint (not marked .pe-scroll): ${describe(e)}`);
    } else if (bar < 1) {
      problems.push(`${kind} hides ${hidden} px to the right and draws no scrollbar: ${describe(e)}`);
    } else if (s.boxShadow === 'none') {
      problems.push(`${kind} hides ${hidden} px to the right with no edge shadow: ${describe(e)}`);
    }
  };
  // A box inside the block that scrolls by itself (MathJax's own containers, for one) needs the same hint.
  const innerBoxes = (kind, e) => {
    for (const d of e.querySelectorAll('*')) {
      const ox = getComputedStyle(d).overflowX;
      if ((ox === 'auto' || ox === 'scroll') && visible(d)) affordance(kind, d, e);
    }
  };
  for (const [kind, selector] of kinds) {
    for (const e of article.querySelectorAll(selector)) {
      if (kind === 'inline formula' && e.closest('div.math')) continue;
      if (kind === 'code' && e.closest('.cell_output, div.output')) continue;
      if (!visible(e)) continue;
      checked += 1;
      const box = scrollBox(e);
      if (box) {
        const b = box.getBoundingClientRect();
        if (b.right > limit + 1) {
          problems.push(`${kind} in a scrolling box that itself runs ${Math.round(b.right - limit)} px past the column: ${describe(e)}`);
          continue;
        }
        affordance(kind, box, e);
        if (kind !== 'inline formula') innerBoxes(kind, e);
        continue;
      }
      if (kind !== 'inline formula') innerBoxes(kind, e);
      const s = getComputedStyle(e);
      const r = e.getBoundingClientRect();
      if ((s.overflowX === 'hidden' || s.overflowX === 'clip') && e.scrollWidth > e.clientWidth + 1) {
        problems.push(`${kind} cut off: ${e.scrollWidth - e.clientWidth} px of it hidden by its own overflow: ${describe(e)}`);
      } else if (kind !== 'inline formula' && kind !== 'figure' && e.scrollWidth > e.clientWidth + 1) {
        problems.push(`${kind} spills ${e.scrollWidth - e.clientWidth} px out of its box, past the column: ${describe(e)}`);
      } else if (r.right > limit + 1) {
        problems.push(`${kind} runs ${Math.round(r.right - limit)} px past the column: ${describe(e)}`);
      } else if (kind !== 'inline formula' && (extent(e)[1] > limit + 1 || extent(e)[0] < start - 1)) {
        const [left, right] = extent(e);
        problems.push(`${kind} spills out of the column (${Math.round(Math.max(start - left, 0))} px left, ` +
                      `${Math.round(Math.max(right - limit, 0))} px right): ${describe(e)}`);
      } else if (kind === 'inline formula' && r.right > lineRight(e) + 1) {
        problems.push(`${kind} runs ${Math.round(r.right - lineRight(e))} px past its line: ${describe(e)}`);
      }
    }
  }
  return {checked, problems};
}
"""

# The detector's own test, run on a real page of the site before the site is checked: blocks that are cut off in
# each way the detector knows, and blocks that scroll properly, are added to the page; the detector must report
# exactly the first kind.
_FIXTURES_JS = """
async () => {
  const article = document.querySelector('article.bd-article');
  const long = 'x = ' + 'long_identifier + '.repeat(30) + '1';
  const add = (html) => { const d = document.createElement('div'); d.innerHTML = html; article.appendChild(d); return d; };
  add(`<div class="highlight-python notranslate" data-pe-fixture="code-cut"><div class="highlight"><pre style="overflow-x: hidden">${long}</pre></div></div>`);
  add(`<div class="highlight-python notranslate" data-pe-fixture="code-no-shadow"><div class="highlight"><pre style="box-shadow: none !important">${long}</pre></div></div>`);
  add(`<div class="highlight-python notranslate" data-pe-fixture="code-ok"><div class="highlight"><pre>${long}</pre></div></div>`);
  add(`<div class="cell_output" data-pe-fixture="output-ok"><div class="output stream highlight-myst-ansi notranslate"><div class="highlight"><pre>${long}</pre></div></div></div>`);
  const wide = '\\\\[ ' + Array.from({length: 40}, (_, i) => `a_{${i}} x^{${i}}`).join(' + ') + ' \\\\]';
  add(`<div class="math notranslate nohighlight" style="overflow: visible" data-pe-fixture="equation-past-column">${wide}</div>`);
  add(`<div class="math notranslate nohighlight" data-pe-fixture="equation-ok">${wide}</div>`);
  const cells = Array.from({length: 14}, (_, i) => `<td>column_number_${i}</td>`).join('');
  add(`<div style="overflow: visible" data-pe-fixture="table-past-column"><table class="table"><tr>${cells}</tr></table></div>`);
  add(`<div class="pst-scrollable-table-container" data-pe-fixture="table-ok"><table class="table"><tr>${cells}</tr></table></div>`);
  const inline = '\\\\(' + Array.from({length: 30}, (_, i) => `b_{${i}}`).join(' + ') + '\\\\)';
  add(`<p data-pe-fixture="inline-past-line">Text ${inline} text.</p>`);
  add(`<p data-pe-fixture="inline-ok">Text ${inline} text.</p>`);
  add(`<p data-pe-fixture="figure-past-column"><img style="max-width: none" width="2000" height="10" src="data:image/gif;base64,R0lGODlhAQABAAAAACw="></p>`);
  await MathJax.typesetPromise([article]);
  window.peLayout();
  // the broken inline formula: undo what the layout script did for it
  const bad = document.querySelector('[data-pe-fixture="inline-past-line"] mjx-container');
  bad.classList.remove('pe-wide-inline', 'pe-scroll', 'pe-more-right');
  bad.style.overflow = 'visible';
  bad.style.display = 'inline';
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
}
"""
DETECTOR_MUST_FIND = ("code-cut", "code-no-shadow", "equation-past-column", "table-past-column", "inline-past-line",
                      "figure-past-column")
DETECTOR_MUST_PASS = ("code-ok", "output-ok", "equation-ok", "table-ok", "inline-ok")


# ----------------------------------------------------------------------------------------------- Chinese text

# A word or number of a table cell drawn on two lines ("13" as "1" over "3"): a table squeezed to the column instead
# of scrolling inside its frame. Alphanumeric runs of at least two characters, in every table but the indices (whose
# long identifiers wrap on phones by design); a run split over lines has client rectangles at different heights.
_BROKEN_TABLE_WORDS_JS = """
() => {
  const problems = [];
  const tables = document.querySelectorAll('.bd-article table:not(.indextable)');
  tables.forEach((table, t) => {
    if (problems.length >= 5) return;
    const walker = document.createTreeWalker(table, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node && problems.length < 5; node = walker.nextNode()) {
      if (node.parentElement.closest('mjx-container, .MathJax')) continue;
      for (const match of node.textContent.matchAll(/[A-Za-z0-9]{2,}/g)) {
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const tops = new Set(Array.from(range.getClientRects()).filter((r) => r.width > 0).map((r) => Math.round(r.top)));
        if (tops.size > 1) {
          const name = table.dataset.peFixture ? `[fixture ${table.dataset.peFixture}] ` : '';
          problems.push(`${name}table ${t + 1}: "${match[0]}" is broken over ${tops.size} lines (a squeezed table; it should scroll)`);
          break;
        }
      }
    }
  });
  return problems;
}
"""

# Up to `count` visible elements of the article holding Chinese text (spans marked lang="zh" on an English page,
# any element on a Chinese one) are tagged data-pe-cjk; for each, the CJK characters of its own text and the
# advance of those characters in em (a CJK glyph is one em wide; a missing glyph is not).
_CJK_SAMPLES_JS = """
([pattern, count]) => {
  const re = new RegExp(pattern, 'gu');
  const article = document.querySelector('article.bd-article') || document.body;
  const marked = Array.from(article.querySelectorAll('[lang|="zh"]'));
  const candidates = marked.length ? marked : Array.from(article.querySelectorAll('p, li, h1, h2, h3, td, blockquote'));
  const out = [];
  for (const e of candidates) {
    if (out.length >= count) break;
    if (!e.getClientRects().length || !e.checkVisibility({visibilityProperty: true})) continue;
    const own = Array.from(e.childNodes).filter((n) => n.nodeType === Node.TEXT_NODE);
    const node = own.find((n) => (n.textContent.match(re) || []).length >= 2);
    if (!node) continue;
    const chars = node.textContent.match(re);
    const range = document.createRange();
    let advance = 0;
    let index = 0;
    for (const ch of node.textContent) {
      const len = ch.length;
      if (ch.match(re)) {
        range.setStart(node, index); range.setEnd(node, index + len);
        advance += range.getBoundingClientRect().width;
      }
      index += len;
    }
    const em = parseFloat(getComputedStyle(e).fontSize);
    e.dataset.peCjk = String(out.length);
    out.push({text: node.textContent.trim().slice(0, 40), chars: chars.length, em: advance / chars.length / em});
  }
  return out;
}
"""


def check_cjk(page, rel: str, report: Report, cdp) -> int:
    """Chinese text renders with real glyphs: the served web font draws every CJK character of a few samples, and
    each character advances by about one em (a box drawn for a missing glyph would come from a system font)."""
    samples = page.evaluate(_CJK_SAMPLES_JS, [cjk_font.CJK_CLASS_JS, 4])
    if not samples:
        return 0
    root = cdp.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    node_ids = cdp.send("DOM.querySelectorAll", {"nodeId": root, "selector": "[data-pe-cjk]"})["nodeIds"]
    for sample, node_id in zip(samples, node_ids):
        fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node_id})["fonts"]
        served = sum(f["glyphCount"] for f in fonts if f.get("isCustomFont"))
        if served < sample["chars"]:
            used = ", ".join(f"{f['familyName']} ({f['glyphCount']})" for f in fonts)
            report.fail(rel, f"Chinese text not drawn by the served font ({served} of {sample['chars']} CJK glyphs; "
                             f"fonts used: {used}): {sample['text']!r}")
        elif not 0.9 <= sample["em"] <= 1.1:
            report.fail(rel, f"Chinese characters advance by {sample['em']:.2f} em, not about 1 (missing glyphs?): "
                             f"{sample['text']!r}")
    return len(samples)


# ----------------------------------------------------------------------------------------------- math fonts

# Every glyph of a formula is drawn by one of MathJax's own fonts. MathJax's CommonHTML output draws a glyph as the
# ::before content of an <mjx-c> element, in a font family it sets on its containers; a page rule that sets
# font-family on MathJax's elements (the Chinese edition's `:lang(zh)` rule did: every element of a zh-CN page
# matches it) silently replaces TeX's digits, parentheses, "=", "sin" and \mathrm with the body font ("i = 0" read
# "i = C"). The browser reports, through the DevTools protocol, which platform font drew each ::before.
# The pages where every glyph is checked (the done-when of issue 36); every other page is sampled.
MATH_FONT_PAGES = ("book/part1/worked_example.html", "book/part2/rope_proof.html")
MATH_FONT_SAMPLE = 150
MATHJAX_FONT_PREFIX = "MathJax_"  # MathJax 3's CommonHTML web fonts: MathJax_Main, MathJax_Math, MathJax_Size1...

# Tags the <mjx-c> glyphs of the formulas under `scope` (the whole body, or one fixture) with data-pe-glyph; all of
# them, or `limit` spread evenly over the page. Returns, per tagged glyph, its character and its formula's text.
_MATH_GLYPHS_JS = """
([limit, fixture]) => {
  document.querySelectorAll('[data-pe-glyph]').forEach((e) => e.removeAttribute('data-pe-glyph'));
  const scope = fixture ? document.querySelector(`[data-pe-fixture="${fixture}"]`) : document.body;
  if (!scope) return [];
  const visibleChar = (c) => c && !/^[\\s\\u200b-\\u200f\\u2060-\\u2064]*$/u.test(c);
  const glyphs = [];
  for (const e of scope.querySelectorAll('mjx-container mjx-c')) {
    if (e.closest('mjx-assistive-mml') || !e.getClientRects().length) continue;
    const content = getComputedStyle(e, '::before').content;
    const char = content && content.startsWith('"') ? JSON.parse(content) : '';
    if (visibleChar(char)) glyphs.push([e, char]);
  }
  const n = limit ? Math.min(limit, glyphs.length) : glyphs.length;
  const out = [];
  for (let k = 0; k < n; k++) {
    const [e, char] = glyphs[Math.floor(k * glyphs.length / n)];
    e.dataset.peGlyph = String(out.length);
    const mml = e.closest('mjx-container').querySelector('mjx-assistive-mml');
    out.push({char, formula: (mml ? mml.textContent : '').replace(/\\s+/g, ' ').trim().slice(0, 50)});
  }
  return out;
}
"""


def _pseudo_before_ids(cdp, attribute: str) -> dict[str, int]:
    """{value of `attribute`: node id of that element's ::before}, for every element of the page carrying it."""
    found: dict[str, int] = {}
    stack = [cdp.send("DOM.getDocument", {"depth": -1})["root"]]
    while stack:
        node = stack.pop()
        attributes = node.get("attributes") or []
        if attribute in attributes[::2]:
            value = attributes[attributes[::2].index(attribute) * 2 + 1]
            before = next((p for p in node.get("pseudoElements", []) if p.get("pseudoType") == "before"), None)
            if before is not None:
                found[value] = before["nodeId"]
        stack.extend(node.get("children", []))
    return found


def math_font_problems(page, cdp, limit: int | None = None, fixture: str | None = None) -> tuple[int, list[str]]:
    """Ask the browser which font drew each glyph of the page's formulas (all of them, or ``limit`` spread over the
    page; or those of one ``fixture``). Returns (glyphs checked, problems): one problem naming the fonts that drew
    glyphs MathJax's fonts should have drawn, with a few examples."""
    glyphs = page.evaluate(_MATH_GLYPHS_JS, [limit or 0, fixture])
    if not glyphs:
        return 0, []
    ids = _pseudo_before_ids(cdp, "data-pe-glyph")
    wrong: dict[str, int] = {}
    examples: list[str] = []
    checked = 0
    for index, glyph in enumerate(glyphs):
        node_id = ids.get(str(index))
        if node_id is None:
            continue
        fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node_id})["fonts"]
        if not fonts:
            continue
        checked += 1
        others = [f for f in fonts if not (f.get("isCustomFont") and f["familyName"].startswith(MATHJAX_FONT_PREFIX))]
        for font in others:
            wrong[font["familyName"]] = wrong.get(font["familyName"], 0) + font["glyphCount"]
        if others and len(examples) < 4:
            examples.append(f"{glyph['char']!r} in {glyph['formula']!r} by {others[0]['familyName']}")
    problems = []
    if wrong:
        fonts = ", ".join(f"{name} ({count})" for name, count in sorted(wrong.items(), key=lambda kv: -kv[1]))
        problems.append(f"formula glyphs drawn by a font that is not MathJax's: {fonts} of {checked} glyphs checked; "
                        f"e.g. {'; '.join(examples)}")
    if glyphs and not checked:
        problems.append(f"none of the {len(glyphs)} formula glyphs could be asked for its font")
    return checked, problems


def check_math_fonts(page, rel: str, report: Report, cdp) -> int:
    """Every glyph inside a formula is drawn by a MathJax font: all glyphs on MATH_FONT_PAGES, a sample elsewhere."""
    whole = rel in MATH_FONT_PAGES
    checked, problems = math_font_problems(page, cdp, limit=None if whole else MATH_FONT_SAMPLE)
    for problem in problems:
        report.fail(rel, problem)
    if whole and checked == 0:
        report.fail(rel, "no formula glyph found on a page whose formulas must be checked")
    return checked


# A formula whose MathJax elements a page rule gives the body font (what `:lang(zh) { font-family: ... }` did), and
# the same formula untouched, both in an English block: the check must report exactly the first.
_MATH_FONT_FIXTURES_JS = """
async () => {
  const article = document.querySelector('article.bd-article') || document.body;
  const style = document.createElement('style');
  style.textContent = '[data-pe-fixture="math-font-body"] mjx-container * { font-family: sans-serif; }';
  document.head.appendChild(style);
  const formula = '\\\\( \\\\mathrm{PE}(p) = (\\\\sin p, \\\\cos p), \\\\; i = 0 \\\\)';
  // lang="en": the untouched formula is not subject to the page's own language rules (a Chinese page may have the
  // very defect this check exists for); what the fixtures test is the detector, not the site.
  article.insertAdjacentHTML('beforeend', `<div lang="en"><p data-pe-fixture="math-font-body">${formula}</p>` +
                                          `<p data-pe-fixture="math-font-ok">${formula}</p></div>`);
  await MathJax.typesetPromise([article]);
}
"""


def check_math_font_detector(page, origin: str, report: Report, cdp) -> None:
    """A test of the test: a formula drawn in the body font is reported, the same formula in TeX's fonts is not."""
    page.goto(f"{origin}/book/intro.html", wait_until="load")
    page.evaluate(_WAIT_FOR_MATHJAX_JS)
    page.evaluate(_MATH_FONT_FIXTURES_JS)
    page.wait_for_timeout(300)  # the web fonts of the new glyphs
    bad_checked, bad = math_font_problems(page, cdp, fixture="math-font-body")
    ok_checked, ok = math_font_problems(page, cdp, fixture="math-font-ok")
    if not bad or ok or not (bad_checked and ok_checked):
        report.fail("math-font self-test", f"expected a problem for the body-font formula only; body font: "
                                           f"{bad_checked} glyphs, {bad}; TeX fonts: {ok_checked} glyphs, {ok}")


# Punctuation of Chinese text that lies outside the CJK blocks (“ ” — …): drawn by the served font, full width, in
# Chinese text (tools/cjk_font.py's punctuation family; issue 36, S4). Up to `count` such characters between Chinese
# characters of the article are wrapped in spans tagged data-pe-punct; for each, its advance in em.
CJK_PUNCTUATION = "\u201c\u201d\u2026\u2014"
_CJK_PUNCT_JS = """
([pattern, punct, count]) => {
  const cjk = new RegExp(pattern, 'u');
  const article = document.querySelector('article.bd-article') || document.body;
  const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
  const out = [];
  const nodes = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) nodes.push(node);
  for (const node of nodes) {
    if (out.length >= count) break;
    const parent = node.parentElement;
    if (!parent || parent.closest('pre, code, mjx-container, script, style') || !parent.closest(':lang(zh)')) continue;
    if (!parent.getClientRects().length) continue;
    const text = node.textContent;
    for (let i = 0; i < text.length; i++) {
      if (!punct.includes(text[i])) continue;
      const near = text.slice(Math.max(0, i - 1), i) + text.slice(i + 1, i + 2);
      if (!cjk.test(near)) continue;
      const rest = node.splitText(i);
      rest.splitText(1);
      const span = document.createElement('span');
      span.dataset.pePunct = String(out.length);
      rest.replaceWith(span);
      span.appendChild(rest);
      // next to other CJK punctuation the browser trims half of it (text-spacing-trim, 标点挤压): not checked for width
      out.push({char: text[i], text: text.slice(Math.max(0, i - 8), i + 8),
                trimmed: /[\\u3000-\\u303f\\uff00-\\uffef\\u2018-\\u201d\\u2026\\u2014]/.test(near),
                em: span.getBoundingClientRect().width / parseFloat(getComputedStyle(span).fontSize)});
      break;
    }
  }
  return out;
}
"""


def check_cjk_punctuation(page, rel: str, report: Report, cdp) -> int:
    """In Chinese text, “ ” — … are drawn by the served font and (but the dash) one em wide; on a Chinese page."""
    samples = page.evaluate(_CJK_PUNCT_JS, [cjk_font.CJK_CLASS_JS, CJK_PUNCTUATION, 3])
    if not samples:
        return 0
    root = cdp.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    for index, sample in enumerate(samples):
        node_id = cdp.send("DOM.querySelector", {"nodeId": root, "selector": f'[data-pe-punct="{index}"]'})["nodeId"]
        fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node_id})["fonts"]
        if not any(f.get("isCustomFont") and f["glyphCount"] for f in fonts):
            used = ", ".join(f"{f['familyName']} ({f['glyphCount']})" for f in fonts)
            report.fail(rel, f"Chinese punctuation {sample['char']!r} not drawn by the served font ({used}): "
                             f"{sample['text']!r}")
        elif sample["char"] != "\u2014" and not sample["trimmed"] and sample["em"] < 0.85:
            report.fail(rel, f"Chinese punctuation {sample['char']!r} is {sample['em']:.2f} em wide, not full width: "
                             f"{sample['text']!r}")
    return len(samples)


# The language switch's label in the header: its CJK characters (the "中文" of an English page), tagged
# data-pe-switch-label, with their advance in em. Null when the label is hidden (phones) or has no CJK character.
_SWITCH_LABEL_JS = """
(pattern) => {
  const re = new RegExp(pattern, 'gu');
  const label = document.querySelector('a.edition-switch .btn__text-container');
  if (!label || !label.getClientRects().length || !label.checkVisibility({visibilityProperty: true})) return null;
  const walker = document.createTreeWalker(label, NodeFilter.SHOW_TEXT);
  let node, chars = 0, advance = 0;
  let holder = null;
  while ((node = walker.nextNode())) {
    let index = 0;
    for (const ch of node.textContent) {
      if (ch.match(re)) {
        const range = document.createRange();
        range.setStart(node, index); range.setEnd(node, index + ch.length);
        advance += range.getBoundingClientRect().width;
        chars += 1;
        holder = holder || node.parentElement;
      }
      index += ch.length;
    }
  }
  if (!chars) return null;
  holder.dataset.peSwitchLabel = '1';
  return {text: label.textContent.trim(), chars, em: advance / chars / parseFloat(getComputedStyle(holder).fontSize)};
}
"""


def _served_glyph_problem(cdp, selector: str, chars: int, em: float, text: str) -> str | None:
    """Why the element at ``selector`` does not show its ``chars`` CJK characters in the served font, or None."""
    root = cdp.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    node_id = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node_id})["fonts"]
    served = sum(f["glyphCount"] for f in fonts if f.get("isCustomFont"))
    if served < chars:
        used = ", ".join(f"{f['familyName']} ({f['glyphCount']})" for f in fonts)
        return f"not drawn by the served font ({served} of {chars} CJK glyphs; fonts used: {used}): {text!r}"
    if not 0.9 <= em <= 1.1:
        return f"CJK characters advance by {em:.2f} em, not about 1 (missing glyphs?): {text!r}"
    return None


def check_switch_label(page, rel: str, report: Report, cdp) -> int:
    """The language switch's label renders with real glyphs of the served font (1 if checked, 0 if it has no CJK
    character or is hidden)."""
    sample = page.evaluate(_SWITCH_LABEL_JS, cjk_font.CJK_CLASS_JS)
    if not sample:
        return 0
    problem = _served_glyph_problem(cdp, "[data-pe-switch-label]", sample["chars"], sample["em"], sample["text"])
    if problem:
        report.fail(rel, f"the language switch's label is {problem}")
    return 1


_HTML_LANG = re.compile(r'<html[^>]*\blang="([^"]*)"', re.I)


def switch_link_problems(site: Path, root: Path, rel: str, hrefs: list[str],
                         expected: int = 1) -> tuple[list[str], int, str | None]:
    """Check the language-switch links of the page ``rel`` of the edition ``site``, served from ``root`` (the folder
    at the web root: ``site`` itself, or a folder holding both editions).

    Every page has exactly one switch, and it opens the same page of the other edition on the server: a file under
    ``root`` at the URL the browser goes to, with the same path inside its edition, and another language. Returns
    (problems, links followed, why the link could not be followed or None). It cannot be followed when the other
    edition is not built; built beside ``site`` but not under ``root`` (served alone) is a problem. ``expected=0``:
    the page must have no switch (the student edition, which has no Chinese counterpart)."""
    if len(hrefs) != expected:
        return [f"{len(hrefs)} language-switch links (expected {expected})"], 0, None
    if expected == 0:
        return [], 0, None
    href = hrefs[0].split("#")[0]
    page = site / rel
    if urllib.parse.urlsplit(href).scheme or href.startswith("/"):
        return [f"the language switch is not a relative link: {href}"], 0, None
    site_url = "/" + site.resolve().relative_to(root.resolve()).as_posix().strip(".").strip("/")
    page_url = site_url.rstrip("/") + "/" + rel
    served = urllib.parse.unquote(urllib.parse.urlsplit(urllib.parse.urljoin("http://h" + page_url, href)).path)
    served_file = root / served.lstrip("/")
    on_disk = Path(os.path.normpath(page.parent / urllib.parse.unquote(href)))
    other = on_disk
    for _ in Path(rel).parts:  # the other edition's root: the target minus this page's path inside its edition
        other = other.parent
    if served_file.is_file():
        problems = []
        if not served.endswith("/" + rel) or served_file.resolve().is_relative_to(site.resolve()):
            problems.append(f"the language switch opens {served}, not {rel} of the other edition")
        lang_here = _HTML_LANG.search(page.read_text(encoding="utf-8")[:3000])
        lang_there = _HTML_LANG.search(served_file.read_text(encoding="utf-8")[:3000])
        if lang_here and lang_there and lang_here.group(1) == lang_there.group(1):
            problems.append(f"the language switch opens {served}, a page in the same language ({lang_here.group(1)})")
        return problems, 1, None
    if (other / "index.html").is_file() and other.resolve().is_relative_to(root.resolve()):
        return [f"the language switch opens {served}, which the server does not have (404)"], 0, None
    if (other / "index.html").is_file():
        # the published site and make serve before both editions were assembled: every switch a 404
        return [f"the language switch opens {served}, which the server does not have (404): the other edition "
                f"({other}) is built but not served with this one; serve both (make site) and test there "
                f"(--root; make test-site does when both are built)"], 0, None
    return [], 0, f"the other edition is not built ({other})"


def served_font_problems(site: Path) -> tuple[int, list[str]]:
    """Every CJK character of the built pages is in the font the site serves."""
    chars = cjk_font.chars_in_files(cjk_font.site_pages(site))
    if not chars:
        return 0, []
    font = site / cjk_font.SERVED
    if not font.is_file():
        return len(chars), [f"the pages use {len(chars)} CJK characters but the site serves no CJK font ({cjk_font.SERVED})"]
    missing = sorted(chars - cjk_font.font_chars(font))
    if missing:
        return len(chars), [f"{len(missing)} CJK character(s) of the pages are missing from the served font: {''.join(missing[:80])}"]
    return len(chars), []


_QUOTE_HEADINGS_JS = """
() => Array.from(document.querySelectorAll('article blockquote :is(h1, h2, h3, h4, h5, h6, p.rubric)'))
  .map((h) => h.textContent.trim().slice(0, 80))
"""


def clipping_problems(page) -> tuple[int, list[str]]:
    """Open every fold of the current page, let the layout script settle, and list the blocks that are cut off."""
    page.evaluate(_OPEN_FOLDS_JS)
    result = page.evaluate(_CLIPPING_JS, [list(k) for k in BLOCK_KINDS])
    return result["checked"], result["problems"]


_TABLE_FIXTURES_JS = """
async () => {
  const article = document.querySelector('.bd-article');
  const row = (tag, style) => ['source', 'inconsistency', '13'].map((w) => `<${tag} style="${style}">${w}</${tag}>`).join('');
  const cells = (style) => `<tr>${row('th', style)}</tr><tr>${row('td', style)}</tr>`;
  // squeezed: the cells may break anywhere and the table is held to 40 px, as the errata table was
  article.insertAdjacentHTML('beforeend',
    `<table data-pe-fixture="table-squeezed" style="width:40px;table-layout:fixed">${cells('overflow-wrap:anywhere')}</table>` +
    `<div class="pst-scrollable-table-container" style="overflow-x:auto">` +
    `<table data-pe-fixture="table-scrolls">${cells('')}</table></div>`);
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
}
"""


def check_table_detector(page, origin: str, report: Report) -> None:
    """A test of the test, at the current (phone) width: a squeezed table is found, a scrolling one is not."""
    page.goto(f"{origin}/book/intro.html", wait_until="load")
    page.evaluate(_TABLE_FIXTURES_JS)
    problems = page.evaluate(_BROKEN_TABLE_WORDS_JS)
    if not any("[fixture table-squeezed]" in p for p in problems) or any("[fixture table-scrolls]" in p for p in problems):
        report.fail("broken-word self-test", f"expected only the squeezed fixture table, got {problems}")


def check_detector(page, origin: str, report: Report) -> None:
    """A test of the test: the clipping check must find every cut-off fixture and none of the good ones."""
    page.goto(f"{origin}/book/intro.html", wait_until="load")
    page.evaluate(_WAIT_FOR_MATHJAX_JS)
    page.evaluate(_WAIT_FOR_LAYOUT_JS)
    page.evaluate(_FIXTURES_JS)
    _, problems = clipping_problems(page)
    found = {name for name in DETECTOR_MUST_FIND + DETECTOR_MUST_PASS if any(f"[fixture {name}]" in p for p in problems)}
    missed = [name for name in DETECTOR_MUST_FIND if name not in found]
    wrong = [name for name in DETECTOR_MUST_PASS if name in found]
    if missed or wrong:
        report.fail("clipping self-test", f"the detector missed {missed} and wrongly reported {wrong}: {problems}")


# ----------------------------------------------------------------------------------------------- reading (issue 39)

# Every display equation as a reader meets it (run after clipping_problems, which opened every fold): its first
# symbol lies inside the box that clips it when that box is scrolled to its start, and its last symbol inside it when
# the box is scrolled to its end; a "more on this side" shadow at the start is only drawn where more is. The clipping
# box is the nearest ancestor whose overflow is not visible (the page's column where there is none). A centred flex
# item wider than its box overflows on both sides, a reversed one on the left (the theme's div.math is
# `flex-direction: row-reverse`): the part past the start edge cannot be scrolled to, and scrollWidth does not count
# it, so only the edges themselves tell.
_EQUATION_EDGES_JS = """
() => {
  const article = document.querySelector('article.bd-article') || document.querySelector('[role=main]');
  if (!article) return {checked: 0, problems: ['no article element on the page']};
  const aRect = article.getBoundingClientRect();
  const aStyle = getComputedStyle(article);
  const column = [aRect.left + parseFloat(aStyle.paddingLeft) + parseFloat(aStyle.borderLeftWidth),
                  aRect.right - parseFloat(aStyle.paddingRight) - parseFloat(aStyle.borderRightWidth)];
  const visible = (e) => e.getClientRects().length > 0 && e.checkVisibility({visibilityProperty: true});
  const describe = (e) => {
    const fixture = e.closest('[data-pe-fixture]');
    return (fixture ? `[fixture ${fixture.dataset.peFixture}] ` : '') +
      (e.textContent || '').replace(/\\s+/g, ' ').trim().slice(0, 70);
  };
  const clipBox = (e) => {
    for (let a = e.parentElement; a && a !== document.body && a !== document.documentElement; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== 'visible') return a;
    }
    return null;
  };
  const inner = (box) => {
    if (!box) return column;
    const left = box.getBoundingClientRect().left + box.clientLeft;
    return [left, left + box.clientWidth];
  };
  const problems = [];
  let checked = 0;
  for (const container of article.querySelectorAll('mjx-container[display="true"]')) {
    const math = container.querySelector(':scope > mjx-math');
    if (!math || !visible(container)) continue;
    checked += 1;
    const box = clipBox(container);
    const saved = box ? box.scrollLeft : 0;
    if (box) box.scrollLeft = 0;
    const width = Math.round(math.getBoundingClientRect().width);
    const [left0, right0] = inner(box);
    const atStart = math.getBoundingClientRect();
    const boxWidth = Math.round(right0 - left0);
    if (atStart.left < left0 - 1) {
      problems.push(`display equation cut off on the left: ${Math.round(left0 - atStart.left)} px of its ${width} px ` +
                    `lie before the start of its ${boxWidth} px box, where scrolling cannot reach: ${describe(container)}`);
    }
    if (box && box.classList.contains('pe-more-left')) {
      problems.push(`display equation's box shows a "more on the left" shadow at its start: ${describe(container)}`);
    }
    if (box && box.classList.contains('pe-more-right') && atStart.right <= right0 + 1) {
      problems.push(`display equation's box shows a "more on the right" shadow with nothing more on the right: ` +
                    describe(container));
    }
    if (box) box.scrollLeft = box.scrollWidth;
    const [left1, right1] = inner(box);
    const atEnd = math.getBoundingClientRect();
    if (atEnd.right > right1 + 1) {
      problems.push(`display equation cut off on the right: ${Math.round(atEnd.right - right1)} px of its ${width} px ` +
                    `stay past the end of its ${boxWidth} px box when it is scrolled to the end: ${describe(container)}`);
    }
    if (box) box.scrollLeft = saved;
  }
  return {checked, problems};
}
"""

# Every image of the article is a figure a reader can read without seeing it: it sits in a <figure> with a caption
# (text besides the figure's number), and its alt text describes it: not empty, not a file name or path (myst-nb's
# default alt is the image's path), not a word such as "png" or "figure", and a phrase (at least three words, or four
# Chinese characters).
_FIGURES_JS = """
(cjk) => {
  const article = document.querySelector('article.bd-article') || document.querySelector('[role=main]');
  if (!article) return {checked: 0, problems: []};
  const cjkRe = new RegExp(cjk, 'gu');
  const visible = (e) => e.getClientRects().length > 0 && e.checkVisibility({visibilityProperty: true});
  const name = (img) => {
    const fixture = img.closest('[data-pe-fixture]');
    return (fixture ? `[fixture ${fixture.dataset.peFixture}] ` : '') +
      (img.getAttribute('src') || '').split('/').pop().slice(0, 24);
  };
  const why = (alt) => {
    const text = (alt || '').trim();
    if (!text) return 'no alt text';
    if (/\\.(png|jpe?g|gif|svg|webp|pdf)$/i.test(text) || /^[^\\s]*[\\/\\\\][^\\s]*$/.test(text) || /[0-9a-f]{16}/i.test(text)) {
      return `a file name for alt text (${JSON.stringify(text.slice(0, 50))})`;
    }
    if (/^(png|jpe?g|svg|gif|image|img|figure|fig|plot|chart|graph|picture|output|untitled)\\b/i.test(text) && text.split(/\\s+/).length < 3) {
      return `a placeholder for alt text (${JSON.stringify(text)})`;
    }
    const words = text.split(/\\s+/).filter((w) => /[A-Za-z0-9]/.test(w)).length;
    const han = (text.match(cjkRe) || []).length;
    if (words < 3 && han < 4) return `alt text too short to describe anything (${JSON.stringify(text)})`;
    return null;
  };
  const problems = [];
  let checked = 0, bad = 0;
  for (const img of article.querySelectorAll('img:not(.toggler)')) {  // .toggler: the module index's fold icons
    if (!visible(img)) continue;
    checked += 1;
    const before = problems.length;
    const figure = img.closest('figure');
    const caption = figure ? figure.querySelector(':scope > figcaption') : null;
    const captionText = caption ? (caption.querySelector('.caption-text') || caption).textContent.replace(/[¶#]/g, '').trim() : '';
    if (!figure) problems.push(`figure without a caption (the image is not in a <figure>): ${name(img)}`);
    else if (!captionText) problems.push(`figure without a caption (its <figcaption> is missing or empty): ${name(img)}`);
    const reason = why(img.getAttribute('alt'));
    if (reason) problems.push(`figure without a text alternative: ${reason}: ${name(img)}`);
    if (problems.length > before) bad += 1;
  }
  return {checked, bad, problems};
}
"""

# Text in math (\\text{model}) drawn with the page's font: MathJax measures it once and fixes the box's width; when
# that measure is wrong (mtextInheritFont in MathJax 3.2 measured script-size text at full size), every d_\\text{model}
# is followed by a gap. The box of each such text must be as wide as the text drawn in it, within 0.15 em.
_TEXT_IN_MATH_JS = """
() => {
  const article = document.querySelector('article.bd-article') || document.querySelector('[role=main]');
  if (!article) return {checked: 0, gaps: []};
  const gaps = [];
  let checked = 0;
  for (const box of article.querySelectorAll('mjx-utext')) {
    if (!box.getClientRects().length || !box.textContent.trim()) continue;
    checked += 1;
    const range = document.createRange();
    range.selectNodeContents(box);
    const s = getComputedStyle(box);
    const room = box.getBoundingClientRect().width - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
    const gap = room - range.getBoundingClientRect().width;
    if (gap > 0.15 * parseFloat(s.fontSize) + 0.5) {
      const fixture = box.closest('[data-pe-fixture]');
      gaps.push({text: (fixture ? `[fixture ${fixture.dataset.peFixture}] ` : '') + box.textContent.trim().slice(0, 30),
                 gap: Math.round(gap * 10) / 10});
    }
  }
  return {checked, gaps};
}
"""


def reading_problems(page, width: int, report: Report) -> list[str]:
    """The reading checks of the current page (folds already opened by clipping_problems): every display equation's
    edges at this width; at 1280 px also the figures' captions and text alternatives and the width of text in math.
    Counts go to ``report``; the problems are returned."""
    problems: list[str] = []
    edges = page.evaluate(_EQUATION_EDGES_JS)
    report.reading["equations"] = report.reading.get("equations", 0) + edges["checked"]
    report.reading[f"equations cut at {width}px"] = (report.reading.get(f"equations cut at {width}px", 0)
                                                     + sum("cut off" in p for p in edges["problems"]))
    problems += edges["problems"]
    if width >= 1000:
        figures = page.evaluate(_FIGURES_JS, cjk_font.CJK_CLASS_JS)
        report.reading["figures"] = report.reading.get("figures", 0) + figures["checked"]
        report.reading["figures without caption or text alternative"] = (
            report.reading.get("figures without caption or text alternative", 0)
            + figures["bad"])
        problems += figures["problems"]
        text = page.evaluate(_TEXT_IN_MATH_JS)
        report.reading["text boxes in math"] = report.reading.get("text boxes in math", 0) + text["checked"]
        report.reading["text boxes in math with a gap"] = (report.reading.get("text boxes in math with a gap", 0)
                                                           + len(text["gaps"]))
        if text["gaps"]:
            worst = max(g["gap"] for g in text["gaps"])
            examples = sorted({g["text"] for g in text["gaps"]}, key=lambda t: (not t.startswith("[fixture"), t))[:5]
            problems.append(f"{len(text['gaps'])} text(s) in math drawn in a box wider than the text (a gap after "
                            f"each, up to {worst} px): {examples}")
    return problems


# Fixtures for the reading checks, added to a real page: each defect the checks exist for, and its correct form.
_READING_FIXTURES_JS = """
async () => {
  const article = document.querySelector('article.bd-article');
  const add = (html) => { const d = document.createElement('div'); d.innerHTML = html; article.appendChild(d); return d; };
  const wide = '\\\\[ ' + Array.from({length: 40}, (_, i) => `a_{${i}} x^{${i}}`).join(' + ') + ' \\\\]';
  // the defect of issue 39: a reversed flex box puts the overflow before the start edge
  add(`<div class="math notranslate nohighlight" style="display: flex; flex-direction: row-reverse; overflow-x: auto" data-pe-fixture="equation-cut-left">${wide}</div>`);
  add(`<div class="math notranslate nohighlight" style="display: block; overflow-x: auto" data-pe-fixture="equation-scrolls">${wide}</div>`);
  const png = 'data:image/gif;base64,R0lGODlhAQABAAAAACw=';
  add(`<div class="cell_output" data-pe-fixture="figure-bare"><img alt="../../_images/0123456789abcdef0123456789abcdef.png" src="${png}" width="40" height="20"></div>`);
  add(`<figure data-pe-fixture="figure-alt-png"><img alt="png" src="${png}" width="40" height="20"><figcaption><p><span class="caption-text">A caption.</span></p></figcaption></figure>`);
  add(`<figure data-pe-fixture="figure-empty-caption"><img alt="Four sine waves of rising frequency over positions 0 to 50." src="${png}" width="40" height="20"><figcaption><p><span class="caption-text"></span><a class="headerlink" href="#">¶</a></p></figcaption></figure>`);
  add(`<figure data-pe-fixture="figure-ok"><img alt="Four sine waves of rising frequency over positions 0 to 50." src="${png}" width="40" height="20"><figcaption><p><span class="caption-number">Fig. 9 </span><span class="caption-text">The first four pairs of the encoding.</span></p></figcaption></figure>`);
  add(`<p data-pe-fixture="text-gap">x <mjx-utext style="display: inline-block; width: 60px">model</mjx-utext> y</p>`);
  add(`<p data-pe-fixture="text-ok">x <mjx-utext style="display: inline-block">model</mjx-utext> y</p>`);
  await MathJax.typesetPromise([article]);
  // as the site's style sheet has it: the div scrolls, not MathJax's container
  article.querySelectorAll('[data-pe-fixture^="equation-"] mjx-container').forEach((c) => { c.style.overflow = 'visible'; });
  if (window.peLayout) window.peLayout();
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
}
"""
READING_MUST_FIND = ("equation-cut-left", "figure-bare", "figure-alt-png", "figure-empty-caption", "text-gap")
READING_MUST_PASS = ("equation-scrolls", "figure-ok", "text-ok")


def check_reading_detector(page, origin: str, report: Report) -> None:
    """A test of the reading checks, at the current width: every defective fixture is found, no correct one."""
    page.goto(f"{origin}/book/intro.html", wait_until="load")
    page.evaluate(_WAIT_FOR_MATHJAX_JS)
    page.evaluate(_WAIT_FOR_LAYOUT_JS)
    page.evaluate(_READING_FIXTURES_JS)
    scratch = Report()
    problems = reading_problems(page, 1280, scratch)
    found = {name for name in READING_MUST_FIND + READING_MUST_PASS if any(f"[fixture {name}]" in p for p in problems)}
    missed = [name for name in READING_MUST_FIND if name not in found]
    wrong = [name for name in READING_MUST_PASS if name in found]
    if missed or wrong:
        report.fail("reading self-test", f"the reading checks missed {missed} and wrongly reported {wrong}: "
                                         f"{[p for p in problems if '[fixture' in p]}")


# Searches a reader makes (issue 39): an erratum's ID finds its catalogue entry and its callout first; a method's name
# finds the chapter that teaches it before the API entries that implement it.
# (query, the query in the Chinese edition, pages expected among the first N results, N)
READING_SEARCHES = (
    ("E001-10", "E001-10", ("reference/errata.html#e001-10", "sinusoidal.html#erratum-e001-10"), 2),
    ("YaRN", "YaRN", ("part3/context_extension.html",), 1),
    ("position interpolation", "位置插值", ("part3/context_extension.html",), 1),
)


def check_reading_search(page, origin: str, report: Report) -> None:
    """Each query of READING_SEARCHES lists each expected page among its first N results, and no API entry first."""
    page.goto(f"{origin}/search.html", wait_until="load")
    chinese = page.evaluate("() => document.documentElement.lang").lower().startswith("zh")
    for query_en, query_zh, expected, first in READING_SEARCHES:
        query = query_zh if chinese else query_en
        results = _search(page, origin, query, report)
        if results is None:
            continue
        top = [r["href"] for r in results[:first]]
        for want in expected:
            if not any(want in href for href in top):
                report.fail("search", f"{query!r}: {want} is not among the first {first} results: "
                                      f"{[h.split('/', 3)[-1] for h in top]}")
        if results and "reference/api.html" in results[0]["href"]:
            report.fail("search", f"{query!r}: the first result is an API entry ({results[0]['title']!r}), not a chapter")
        report.reading["searches"] = report.reading.get("searches", 0) + 1


def _is_local(url: str, origin: str, site: Path | None = None) -> bool:
    """A request to the test server, to the built site on disk, or with no host at all."""
    if url.startswith(("data:", "blob:", "about:")):
        return True
    if site is not None and url.startswith(site.resolve().as_uri() + "/"):
        return True
    return url.startswith(origin + "/") or url == origin


def run_browser_checks(site: Path, out: Path, chromium: str, time_limit: float, report: Report,
                       only: str | None = None, search: tuple[str, str] = ("rotary", "rope_first_principles.html"),
                       student: bool = False, root: Path | None = None) -> None:
    """``root``: the folder served at the web root (default ``site``); ``site`` lies inside it."""
    from playwright.sync_api import sync_playwright

    root = site if root is None else root
    prefix = site.resolve().relative_to(root.resolve()).as_posix().strip(".").strip("/")

    pages = sorted(p for p in site.rglob("*.html") if not p.relative_to(site).parts[0].startswith(("_", "."))
                   and 'http-equiv="Refresh"' not in p.read_text(encoding="utf-8")[:2000]  # skip redirect stubs
                   and (only is None or fnmatch.fnmatch(p.relative_to(site).as_posix(), only)))
    ids_by_path: dict[str, set[str]] = {}
    links_by_page: dict[str, list[str]] = {}
    out.mkdir(parents=True, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="site-test-profile-")
    try:
        with LocalServer(root, time_limit) as server, sync_playwright() as pw:
            base = server.origin + (f"/{prefix}" if prefix else "")  # the URL of the edition under test
            context = pw.chromium.launch_persistent_context(
                profile,
                executable_path=chromium,
                headless=True,
                args=CHROMIUM_ARGS + ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"],
                # Scrollbars are part of what a reader sees (a block that scrolls must show it): keep them.
                ignore_default_args=["--hide-scrollbars"],
                viewport={"width": 1280, "height": 900},
                service_workers="block",
            )
            context.set_default_timeout(30_000)
            current = {"page": "(start)"}

            def route(route_, request) -> None:
                if _is_local(request.url, server.origin, site):
                    route_.continue_()
                else:
                    report.blocked.append(request.url)
                    report.fail(current["page"], f"request to another host (blocked): {request.url}")
                    route_.abort()

            context.route("**/*", route)
            page = context.pages[0] if context.pages else context.new_page()
            cdp = context.new_cdp_session(page)
            cdp.send("DOM.enable")
            cdp.send("CSS.enable")
            page.on("console", lambda msg: msg.type == "error" and report.fail(current["page"], f"console error: {msg.text}"))
            page.on("pageerror", lambda err: report.fail(current["page"], f"page error: {err}"))
            # net::ERR_ABORTED is the browser cancelling a request because the test moved on (a font still loading
            # when the next page opens), not a failure of the site; every other failure counts.
            page.on("requestfailed", lambda req: _is_local(req.url, server.origin, site)
                    and "ERR_ABORTED" not in str(req.failure)
                    and report.fail(current["page"], f"failed request: {req.url} ({req.failure})"))
            page.on("response", lambda resp: resp.status >= 400
                    and report.fail(current["page"], f"HTTP {resp.status}: {resp.url}"))

            current["page"] = "clipping self-test"
            check_detector(page, base, report)
            check_reading_detector(page, base, report)
            progress(f"clipping detector self-test: {'ok' if not any('self-test' in p for p in report.problems) else 'FAILED'}")
            current["page"] = "math-font self-test"
            check_math_font_detector(page, base, report, cdp)
            progress(f"math-font self-test: {'FAILED' if any('math-font self-test' in p for p in report.problems) else 'ok'}")
            for number, path in enumerate(pages, start=1):
                rel = path.relative_to(site).as_posix()
                current["page"] = rel
                before = len(report.problems)
                page.goto(f"{base}/{rel}", wait_until="load")
                status = page.evaluate(_WAIT_FOR_MATHJAX_JS)
                if status != "ok":
                    report.fail(rel, status)
                if not page.evaluate(_WAIT_FOR_LAYOUT_JS):
                    report.fail(rel, "the layout script (book_site_layout.js) did not finish")
                state = page.evaluate(_PAGE_STATE_JS, [SKIP_TEXT_IN, RAW_TEX.pattern])
                for text in state["raw"]:
                    report.fail(rel, f"raw TeX in the text: {text!r}")
                if state["mathSource"] and not state["mathRendered"]:
                    report.fail(rel, "the page has math but MathJax rendered none")
                for image in state["images"]:
                    if not image["ok"]:
                        report.fail(rel, f"broken image: {image['src']}")
                ids_by_path[rel] = set(state["ids"])
                links_by_page[rel] = state["links"]
                switch_problems, followed, unchecked = switch_link_problems(site, root, rel, state["switches"],
                                                                            expected=0 if student else 1)
                for problem in switch_problems:
                    report.fail(rel, problem)
                report.switch_links += followed
                if unchecked:
                    report.switch_unchecked[unchecked] = report.switch_unchecked.get(unchecked, 0) + 1
                report.pages += 1
                for heading in page.evaluate(_QUOTE_HEADINGS_JS):
                    report.fail(rel, f"a quotation renders as a heading (a quoted '#' line?): {heading!r}")
                checked, clipped = clipping_problems(page)
                report.blocks += checked
                for problem in clipped:
                    report.fail(f"{rel} at 1280px", problem)
                for problem in reading_problems(page, 1280, report):
                    report.fail(f"{rel} at 1280px", problem)
                report.cjk_samples += check_cjk(page, rel, report, cdp)
                report.math_glyphs += check_math_fonts(page, rel, report, cdp)
                report.cjk_samples += check_cjk_punctuation(page, rel, report, cdp)
                report.switch_labels += check_switch_label(page, rel, report, cdp)
                progress(f"[{number:2d}/{len(pages)}] 1280px {rel}: {checked} blocks, "
                         f"{len(report.problems) - before} problem(s)")

            # Links and anchors, checked against the files and the ids seen above.
            for rel, links in links_by_page.items():
                for link in links:
                    if not _is_local(link, server.origin):
                        continue
                    parts = urllib.parse.urlsplit(link)
                    served = urllib.parse.unquote(parts.path).lstrip("/")
                    if served == "" or served.endswith("/"):
                        served += "index.html"
                    if not (root / served).is_file():
                        report.fail(rel, f"broken link: {link}")
                        continue
                    # the same path inside the edition under test (ids_by_path's keys)
                    target = served[len(prefix) + 1:] if prefix and served.startswith(prefix + "/") else served
                    if parts.fragment and target.endswith(".html"):
                        anchor = urllib.parse.unquote(parts.fragment)
                        if target not in ids_by_path:
                            continue  # a page under _static or _sources: not crawled
                        if anchor not in ids_by_path[target]:
                            report.fail(rel, f"broken anchor: {link}")

            current["page"] = f"search.html?q={search[0]}"
            check_search(page, base, out, report, search)
            check_reading_search(page, base, report)
            progress("search: checked")
            current["page"] = "fold/unfold"
            check_folding(page, base, site, out, report, student)
            current["page"] = "390px"
            page.set_viewport_size({"width": 390, "height": 844})
            check_table_detector(page, base, report)
            for number, path in enumerate(pages, start=1):
                rel = path.relative_to(site).as_posix()
                current["page"] = f"{rel} at 390px"
                before = len(report.problems)
                page.goto(f"{base}/{rel}", wait_until="load")
                page.evaluate(_WAIT_FOR_MATHJAX_JS)
                page.evaluate(_WAIT_FOR_LAYOUT_JS)
                overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
                if overflow > 0:
                    report.fail(rel, f"scrolls horizontally by {overflow} px at 390 px width")
                if rel == "book/part1/sinusoidal.html":
                    page.screenshot(path=str(out / "mobile-390px-sinusoidal.png"))
                checked, clipped = clipping_problems(page)
                report.blocks += checked
                for problem in clipped:
                    report.fail(f"{rel} at 390px", problem)
                for problem in reading_problems(page, 390, report):
                    report.fail(f"{rel} at 390px", problem)
                for problem in page.evaluate(_BROKEN_TABLE_WORDS_JS):
                    report.fail(f"{rel} at 390px", problem)
                progress(f"[{number:2d}/{len(pages)}] 390px {rel}: {checked} blocks, "
                         f"{len(report.problems) - before} problem(s)")
            page.set_viewport_size({"width": 1280, "height": 900})
            current["page"] = "file://"
            check_file_url(page, site, out, report)
            context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


# Words of the page furniture (launch, download and repository buttons) that must not make up a search excerpt.
BUTTON_WORDS = re.compile(r"\b(Binder|Colab|Repository|Open issue|Edit this page|Download source file|\.ipynb)\b")
EXCERPT_QUERIES = ("erratum", "embedding")


def _search(page, origin: str, query: str, report: Report) -> list[dict] | None:
    page.goto(f"{origin}/search.html?q={urllib.parse.quote(query)}", wait_until="load")
    try:
        page.wait_for_selector("#search-results ul.search li a", timeout=30_000)
        # Sphinx adds the summary paragraph empty when the search starts and fills it in when every result is listed
        page.wait_for_function("() => { const p = document.querySelector('#search-results p.search-summary');"
                               " return p !== null && p.innerText.trim().length > 0; }", timeout=60_000)
    except Exception as err:  # noqa: BLE001 - reported as a failure below
        report.fail("search", f"no results for {query!r} ({err.__class__.__name__})")
        return None
    page.evaluate(_WAIT_FOR_MATHJAX_JS)
    page.wait_for_timeout(300)  # results are typeset by book_site.py's observer
    return page.eval_on_selector_all(
        "#search-results ul.search li",
        "els => els.map(li => ({href: li.querySelector('a').href, title: li.querySelector('a').innerText,"
        " excerpt: (li.querySelector('p.context') || {innerText: ''}).innerText}))")


def check_search(page, origin: str, out: Path, report: Report, search: tuple[str, str] = ("rotary", "rope_first_principles.html"),
                 excerpt_queries: tuple[str, ...] = EXCERPT_QUERIES) -> None:
    """Searching finds the expected page; no result title or excerpt shows raw TeX or button labels."""
    query, expected = search
    for term in (query, *excerpt_queries):
        results = _search(page, origin, term, report)
        if results is None:
            continue
        if term == query:
            if expected and not any(expected in r["href"] for r in results):
                report.fail("search", f"{query!r} does not list {expected}; results: {[r['href'] for r in results[:8]]}")
            page.screenshot(path=str(out / f"search-{re.sub(r'[^A-Za-z0-9]+', '_', term)}.png"))
        excerpts = [r["excerpt"] for r in results if r["excerpt"]]
        if results and not excerpts:
            report.fail("search", f"{term!r}: no result has an excerpt")
        for result in results:
            if RAW_TEX.search(result["title"]):
                report.fail("search", f"{term!r}: raw TeX in a result title: {result['title']!r}")
            for pattern, what in ((RAW_TEX, "raw TeX"), (BUTTON_WORDS, "button labels")):
                match = pattern.search(result["excerpt"])
                if match:
                    report.fail("search", f"{term!r}: {what} ({match.group(0)!r}) in the excerpt for "
                                          f"{result['href'].rsplit('/', 1)[-1]}: {result['excerpt'][:160]!r}")


def _visible(page, selector: str) -> bool:
    return page.eval_on_selector(selector, "e => !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length)")


def check_folding(page, origin: str, site: Path, out: Path, report: Report, student: bool = False) -> None:
    """Click the title of a solution and of a proof: body hidden, shown, hidden again. In the student edition
    (``student``) no page may hold a solution at all."""
    cases = [
        # name, marker of the box in the built HTML, the box once the page's scripts made it foldable, its title
        ("exercise solution", 'class="solution dropdown', "div.solution.toggle", ".admonition-title"),
        ("proof", 'class="proof admonition"', "div.proof.admonition > details.proof-fold", "summary"),
    ]
    if student:
        leaks = [p.relative_to(site).as_posix() for p in sorted(site.glob("book/**/*.html")) if cases[0][1] in p.read_text()]
        if leaks:
            report.fail("student edition", f"solutions on {leaks}")
        cases = cases[1:]
    for name, marker, box, title_selector in cases:
        page_path = next((p for p in sorted(site.glob("book/**/*.html")) if marker in p.read_text()), None)
        if page_path is None:
            report.fail("fold/unfold", f"no page has a {name}")
            continue
        rel = page_path.relative_to(site).as_posix()
        page.goto(f"{origin}/{rel}", wait_until="load")
        page.evaluate(_WAIT_FOR_MATHJAX_JS)
        if page.locator(box).count() == 0:
            report.fail(rel, f"the {name} is not foldable")
            continue
        first = page.locator(box).first
        first.scroll_into_view_if_needed()
        body = first.locator(f":scope > :not({title_selector})").first
        title = first.locator(f":scope > {title_selector}")
        hidden_before = not body.is_visible()
        title.click()
        page.wait_for_timeout(400)
        shown = body.is_visible()
        page.screenshot(path=str(out / f"{name.split()[-1]}-unfolded.png"))
        title.click()
        page.wait_for_timeout(400)
        hidden_after = not body.is_visible()
        if not (hidden_before and shown and hidden_after):
            report.fail(rel, f"{name} does not fold and unfold (hidden {hidden_before}, shown {shown}, hidden {hidden_after})")


def check_file_url(page, site: Path, out: Path, report: Report) -> None:
    """The book opened from disk renders its math with the local MathJax."""
    target = site / "book" / "part1" / "shift_theorem.html"
    page.goto(target.resolve().as_uri(), wait_until="load")  # --site may be relative (make test-site passes _build/html)
    status = page.evaluate(_WAIT_FOR_MATHJAX_JS)
    count = page.evaluate("() => document.querySelectorAll('mjx-container').length")
    if status != "ok" or count == 0:
        report.fail("file://", f"math not rendered from disk ({status}, {count} formulas)")
    page.screenshot(path=str(out / "math-shift-theorem.png"))


# ----------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--root", type=Path, default=None,
                        help="the folder served at the web root, holding --site (default: --site itself); "
                             "make site's _build/site holds both editions, so the language switch can be followed")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "site-test")
    parser.add_argument("--chromium", default=os.environ.get("CHROMIUM", CHROMIUM))
    parser.add_argument("--time-limit", type=float, default=1500.0, help="seconds before the server stops itself")
    parser.add_argument("--pages", default=None, help="check only the pages whose path matches this glob "
                        "(e.g. 'book/part1/*'); the site-wide checks still run")
    parser.add_argument("--search", default="rotary=rope_first_principles.html",
                        help="QUERY=PAGE: searching QUERY must list PAGE (another build, e.g. a translation, "
                             "passes its own)")
    parser.add_argument("--student", action="store_true",
                        help="the student edition: no page may hold a solution (proofs still fold)")
    args = parser.parse_args(argv)

    if not (args.site / "index.html").is_file():
        print(f"no built site at {args.site}: run `make book` first")
        return 2
    root = args.site if args.root is None else args.root
    if not args.site.resolve().is_relative_to(root.resolve()):
        print(f"--site {args.site} is not inside --root {root}")
        return 2
    try:
        import playwright  # noqa: F401
    except ImportError:
        print(f"Playwright for Python is not installed.\n{INSTALL_HELP}")
        return 2
    if not (Path(args.chromium).is_file() and os.access(args.chromium, os.X_OK)):
        print(f"Chromium is not installed at {args.chromium}.\n{INSTALL_HELP}")
        return 2

    start = time.perf_counter()
    report = Report()
    repository, branch, _ = repository_settings()
    html_files = sorted(args.site.rglob("*.html"))
    problems, launch_links = launch_url_problems(html_files, ROOT, repository, branch)
    report.problems.extend(problems)
    if args.student:  # launch and edit buttons would open the repository's notebooks, with their solutions
        import book_tools

        report.problems.extend(f"student edition: {p}" for p in book_tools.check_student_site(args.site))
    elif launch_links == 0:
        report.problems.append("no launch button found in the built site")
    query, _, expected = args.search.partition("=")
    cjk_chars, font_problems = served_font_problems(args.site)
    report.problems.extend(f"CJK font: {p}" for p in font_problems)
    progress(f"CJK font: {cjk_chars} characters used by the pages, {len(font_problems)} problem(s)")
    run_browser_checks(args.site, args.out, args.chromium, args.time_limit, report, only=args.pages,
                       search=(query, expected), student=args.student, root=root)

    elapsed = time.perf_counter() - start
    print(f"site test: {report.pages} pages, {report.blocks} blocks checked for clipping at 1280 and 390 px, "
          f"{report.cjk_samples} Chinese text samples checked for glyphs, "
          f"{report.math_glyphs} formula glyphs checked for MathJax's fonts, "
          f"{launch_links} launch links, {report.switch_links} language-switch links followed, "
          f"{report.switch_labels} switch labels checked for glyphs, {len(report.blocked)} blocked "
          f"requests to other hosts, {len(report.problems)} problems, {elapsed:.0f} s; screenshots in {args.out}")
    if report.reading:
        print("reading: " + ", ".join(f"{count} {what}" for what, count in report.reading.items()))
    for reason, count in report.switch_unchecked.items():
        print(f"  NOT CHECKED: {count} language-switch link(s) could not be followed: {reason}")
    for problem in report.problems:
        print(f"  FAIL {problem}")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
