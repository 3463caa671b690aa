"""The whole book as one PDF, offline: `make pdf` (after the single-page build it runs first).

    python tools/book_pdf.py [--site _build/singlehtml] [--out _build/pdf/positional-encoding-corrected.pdf]

Headless Chromium (Debian's `chromium`, driven by Playwright for Python, as for the site test) opens the single-page
build of the book from a server inside this process; requests to any other host are blocked. The page is prepared
for paper: MathJax has typeset every formula, proofs and solutions are unfolded, the collapsed set-up cells are left
out, every chapter starts on a new page, code and outputs wrap, wide tables and equations are scaled to the column
(book_site_layout.js's peFitForPrint), and a table of contents with page numbers opens the book. It is printed
twice: the first print tells on which page each chapter starts (Chromium writes a named destination for every link
target), the second prints the contents with those numbers. pypdf then adds one bookmark per part and chapter and
the document's title.

The result is checked before this exits (status 1 on a failure): every chapter's title is in the text of the page
its bookmark points at, the extracted text holds no raw TeX, and the contents' page numbers are those pages. The
page count is printed.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import sys
import threading
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import site_test  # noqa: E402
from book_site import tex_to_plain  # noqa: E402

OUT = ROOT / "_build" / "pdf" / "positional-encoding-corrected.pdf"


@dataclass
class Edition:
    """What differs between the editions' PDFs: the TOC (its part captions), the running title and metadata, the
    contents' heading, and for the Chinese edition (tools/zh_edition.py pdf, make pdf-zh) the CJK font check."""
    toc: Path = ROOT / "_toc.yml"
    title: str = "Positional Encoding, Corrected"
    author: str = "The Positional Encoding, Corrected authors"
    contents: str = "Contents"
    cjk_font: str = ""  # a font every CJK character must be drawn with (its PostScript name), e.g. NotoSansSC
    # The running title at the top of each page. Chromium draws it outside the page, where the page's web fonts are
    # not loaded: Chinese there would be empty boxes on a machine without a CJK system font, so the Chinese edition
    # has none (its title is on the first page and in the PDF's metadata).
    running_title: bool = True


ENGLISH = Edition()


@dataclass
class Chapter:
    part: str
    docname: str  # e.g. book/part1/sinusoidal
    title: str = ""  # plain text, filled in from the page
    page: int = 0  # 1-based


def chapters(toc_path: Path = ROOT / "_toc.yml") -> list[Chapter]:
    """The chapters in reading order with their part captions (the root page is the book's opening)."""
    toc = yaml.safe_load(toc_path.read_text())
    found = [Chapter("", toc["root"])]
    for part in toc.get("parts", []):
        for entry in part.get("chapters", []):
            found.append(Chapter(part.get("caption", ""), entry["file"]))
    return found


_PREPARE_JS = """
async (docnames) => {
  const main = document.querySelector('article.bd-article') || document.querySelector('[role=main]');
  // Unfold proofs and solutions; leave out the collapsed set-up cells (their summary line would be all that prints).
  document.querySelectorAll('details').forEach((d) => {
    if (d.classList.contains('hide') || d.closest('.tag_hide-input')) d.remove(); else d.open = true;
  });
  document.querySelectorAll('.toggle-hidden').forEach((e) => e.classList.remove('toggle-hidden'));
  document.querySelectorAll('button.toggle-button').forEach((b) => b.remove());
  const titles = [];
  for (const name of docnames) {
    // Every page after the root one follows an empty anchor document-<docname>; the single page nests their titles
    // one level down (h2), under the root page's h1.
    const anchor = document.getElementById('document-' + name);
    let heading = anchor ? null : main.querySelector('h1');
    for (let e = anchor; e && !heading; e = e.nextElementSibling) heading = e.matches('h1, h2') ? e : e.querySelector('h1, h2');
    const section = heading ? heading.closest('section') : null;
    if (section && titles.length) section.style.breakBefore = 'page';
    if (heading) {
      const target = document.createElement('span');
      target.id = 'pdf-chapter-' + titles.length;
      heading.prepend(target);
    }
    const clone = heading ? heading.cloneNode(true) : null;
    if (clone) clone.querySelectorAll('.headerlink, mjx-assistive-mml, [id]').forEach((e) => e.remove());
    titles.push({html: clone ? clone.innerHTML : name, text: heading ? heading.innerText.replace(/\\s+/g, ' ').replace('#', '').trim() : ''});
  }
  const code = Array.from(document.querySelectorAll('pre, code')).map((e) => e.textContent.replace(/\\s+/g, ' '));
  return {titles, code};
}
"""

_TOC_JS = """
([entries, numbers, heading]) => {
  const main = document.querySelector('article.bd-article') || document.querySelector('[role=main]');
  let nav = document.getElementById('pdf-contents');
  if (!nav) {
    nav = document.createElement('section');
    nav.id = 'pdf-contents';
    nav.style.breakAfter = 'page';
    main.prepend(nav);
  }
  const rows = entries.map((e, i) => {
    const part = e.part && (i === 0 || entries[i - 1].part !== e.part) ? `<li class="pdf-part">${e.part}</li>` : '';
    return part + `<li><a href="#pdf-chapter-${i}"><span class="pdf-title">${e.html}</span>` +
      `<span class="pdf-dots"></span><span class="pdf-page">${numbers[i]}</span></a></li>`;
  }).join('');
  nav.innerHTML = `<h1>${heading}</h1><ul class="pdf-toc">${rows}</ul>`;
  if (!document.getElementById('pdf-style')) {
    const style = document.createElement('style');
    style.id = 'pdf-style';
    style.textContent = `
      ul.pdf-toc { list-style: none; padding: 0; }
      ul.pdf-toc li { margin: 0.12em 0; }
      ul.pdf-toc li.pdf-part { font-weight: 700; margin-top: 0.6em; }
      ul.pdf-toc a { display: flex; align-items: baseline; color: inherit; text-decoration: none; }
      .pdf-dots { flex: 1; border-bottom: 1px dotted #888; margin: 0 0.4em; }
      .pdf-page { font-variant-numeric: tabular-nums; }
      @page { size: A4; margin: 18mm 16mm 20mm 16mm; }
      .bd-header-article, .bd-sidebar-primary, .bd-sidebar-secondary, .prev-next-area, footer,
      .header-article-items, #pst-back-to-top, .bd-header, .pe-scroll-note { display: none !important; }
      .bd-main .bd-content .bd-article-container { max-width: 100% !important; }
      /* the theme's print rules hide each page's first h1 and print a heading of their own: not in a whole book */
      .bd-main .bd-content .bd-article h1:first-of-type { display: block !important; }
      #jb-print-docs-body { display: none !important; }
      img { max-width: 100% !important; height: auto; break-inside: avoid; }
      /* A code cell's frame (its left border) moves with its code, and the code inside it does not avoid breaks of
         its own (the theme gives div.highlight and div.highlight-ipython3 break-inside: avoid): the code went to the
         next page and left its empty frame behind, at a page's foot or, for a cell about a page tall, a whole page. */
      div.cell_input, div.cell_output, div.highlight, table, div.math, figure { break-inside: avoid; }
      div.cell_input div[class*=highlight], div.cell_output div[class*=highlight] { break-inside: auto; }
      div.cell_input:empty, div.cell_output:empty { display: none; }
      h1, h2, h3 { break-after: avoid; }
      /* a heading is never split over two pages, and it stays with what follows (issue 39: nine were split) */
      h1, h2, h3, h4, p.rubric, .admonition-title, figcaption { break-inside: avoid; }
      h4, p.rubric, .admonition-title { break-after: avoid; }
      #pdf-title { break-after: page; text-align: center; padding-top: 30vh; }
      #pdf-title .pdf-book-title { font-size: 2.4em; font-weight: 700; line-height: 1.2; margin-bottom: 0.6em; }
      #pdf-title .pdf-book-author { font-size: 1.2em; margin-bottom: 2em; }
      #pdf-title .pdf-book-note { font-size: 0.9em; color: #555; }`;
    document.head.appendChild(style);
  }
}
"""

# A title page before the contents (the PDF opened on its contents). Its text comes from _config.yml.
_TITLE_JS = """
([title, author, note]) => {
  const main = document.querySelector('article.bd-article') || document.querySelector('[role=main]');
  let page = document.getElementById('pdf-title');
  if (!page) {
    page = document.createElement('section');
    page.id = 'pdf-title';
    main.prepend(page);
  }
  const line = (cls, text) => { const d = document.createElement('div'); d.className = cls; d.textContent = text; return d; };
  page.replaceChildren(line('pdf-book-title', title), line('pdf-book-author', author), line('pdf-book-note', note));
}
"""

# A block kept whole on one page (break-inside: avoid in _TOC_JS) that is taller than this share of the printed page
# moves to the next page and leaves the rest of its page empty (pages 421, 426 and 429 were more than half empty):
# such blocks may break; a table repeats its header row on the next page.
TALL_SHARE = 0.4
_PAGINATE_JS = """
(share) => {
  const pageHeight = (297 - 18 - 20) / 25.4 * 96;  // A4 less the margins of _print, in CSS px
  let freed = 0;
  document.querySelectorAll('div.cell_input, div.cell_output, div.highlight, table, div.math, div.admonition, ' +
                            'div.proof, div.solution, details').forEach((e) => {
    if (getComputedStyle(e).breakInside === 'avoid' && e.getBoundingClientRect().height > share * pageHeight) {
      e.style.breakInside = 'auto';
      freed += 1;
    }
  });
  return freed;
}
"""


def title_page(edition: Edition = ENGLISH, config_path: Path = ROOT / "_config.yml") -> list[str]:
    """The edition's title and author, and a line saying what this PDF is (the year and repository from _config.yml)."""
    config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    year, url = config.get("copyright", ""), config["repository"]["url"]
    if edition.cjk_font:
        note = f"© {year} {edition.author}。本书网页版的印刷版本；每一章也是一个可以运行的笔记本，见 {url}。"
    else:
        note = (f"© {year} {edition.author}. The printed form of the book's web edition; every chapter is also a "
                f"notebook that runs, in {url}.")
    return [edition.title, edition.author, note]


_HEADER = '<div style="font-size:7.5px;width:100%;padding:0 16mm;color:#666;">Positional Encoding, Corrected</div>'
_FOOTER = ('<div style="font-size:8px;width:100%;text-align:center;color:#444;">'
           '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')


def _print(page, header: str = _HEADER) -> bytes:
    # tagged: a PDF with its structure (headings, lists, tables, figures with their alt text) for screen readers
    return page.pdf(format="A4", print_background=True, display_header_footer=True, header_template=header,
                    footer_template=_FOOTER, margin={"top": "18mm", "bottom": "20mm", "left": "16mm", "right": "16mm"},
                    prefer_css_page_size=True, tagged=True)


def chapter_pages(pdf_bytes: bytes, count: int) -> list[int]:
    """1-based page of each chapter's named destination (pdf-chapter-N) in a Chromium PDF; 0 where missing."""
    import io

    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(pdf_bytes))
    pages = [0] * count
    for name, destination in reader.named_destinations.items():
        match = re.fullmatch(r"/?pdf-chapter-(\d+)", str(name))
        if match and int(match.group(1)) < count:
            pages[int(match.group(1))] = reader.get_destination_page_number(destination) + 1
    return pages


def add_bookmarks(pdf_bytes: bytes, entries: list[Chapter], target: Path, edition: Edition = ENGLISH) -> int:
    """Write the PDF with one bookmark per part and per chapter, and the document's title; returns the page count."""
    import io

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_bytes)))
    writer.add_metadata({"/Title": edition.title, "/Author": edition.author})
    parent = None
    current_part = None
    for chapter in entries:
        if chapter.part != current_part:
            current_part = chapter.part
            parent = writer.add_outline_item(title=chapter.part, page_number=chapter.page - 1) if chapter.part else None
        writer.add_outline_item(title=chapter.title, page_number=chapter.page - 1, parent=parent)
    writer.page_mode = "/UseOutlines"
    strip_marks(writer)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("wb") as handle:
        writer.write(handle)
    return len(writer.pages)


def check_pdf(path: Path, entries: list[Chapter], code: list[str] = (), ignore_spaces: bool = False) -> list[str]:
    """Problems with the written PDF: titles, bookmarks, raw TeX (outside the book's code: ``code`` holds the text of
    every code block and literal, whitespace collapsed; a match on a line that is code is not raw TeX)."""
    from pypdf import PdfReader

    reader = PdfReader(path)
    problems = []
    texts = [page.extract_text() or "" for page in reader.pages]
    flat = lambda s: re.sub(r"\s+", " ", unicodedata.normalize("NFKC", s))  # noqa: E731  (NFKC: the fi ligature)
    outline_titles = []

    def walk(items):
        for item in items:
            if isinstance(item, list):
                walk(item)
            else:
                outline_titles.append((item.title, reader.get_destination_page_number(item) + 1))

    walk(reader.outline)
    for chapter in entries:
        words = re.split(r"[:(：（]", chapter.title)[0].strip()  # the title up to any math (also after a Chinese colon)
        found = lambda a, b: (a.replace(" ", "") in b.replace(" ", "")) if ignore_spaces else a in b  # noqa: E731
        # (ignore_spaces: Chinese has no spaces, and text extraction puts some between glyphs that sit a little apart)
        if not (1 <= chapter.page <= len(texts)) or not found(flat(words), flat(texts[chapter.page - 1])):
            problems.append(f"chapter {chapter.docname}: title {words!r} not found on its page {chapter.page}")
        if (chapter.title, chapter.page) not in outline_titles:
            problems.append(f"chapter {chapter.docname}: no bookmark {chapter.title!r} -> page {chapter.page}")
    code_text = "\n".join(code)
    for number, text in enumerate(texts, start=1):
        for line in text.splitlines():
            match = site_test.RAW_TEX.search(line)
            if match and flat(line).strip() not in code_text:
                problems.append(f"page {number}: raw TeX in the text: {flat(line)[:160]!r}")
    return problems


# ----------------------------------------------------------------------------------------------- nothing lost (issue 39)

# The printed column: A4 (210 mm) less the two 16 mm margins of _print, in CSS px (96 per inch): 672.8 px. The page is
# laid out at this width before anything is fitted, so that what book_site_layout.js measures is what is printed (at
# the 1000 px of the screen layout the models table fitted, and lost three columns on paper).
PRINT_COLUMN_PX = 672

# Marks for the printed-page check. Every header cell of every table and every display equation gets an empty mark at
# its start and one at its end; a hidden link to each mark makes Chromium write it as a named destination of the PDF,
# with the page and the position at which it was printed. Two marks at the column's edges calibrate the positions.
# Returns what the page holds (each table's header words, each equation's width), for printed_problems.
_MARK_JS = """
() => {
  const article = document.querySelector('article.bd-article') || document.querySelector('[role=main]');
  document.querySelectorAll('.pe-pdf-mark, #pe-pdf-links, #pe-pdf-column').forEach((e) => e.remove());
  const links = document.createElement('div');
  links.id = 'pe-pdf-links';
  links.style.display = 'none';
  document.body.appendChild(links);
  const mark = (id) => {
    const span = document.createElement('span');
    span.id = id;
    span.className = 'pe-pdf-mark';
    const a = document.createElement('a');
    a.href = '#' + id;
    links.appendChild(a);
    return span;
  };
  const column = document.createElement('div');
  column.id = 'pe-pdf-column';
  column.style.cssText = 'display: flex; justify-content: space-between; height: 0; margin: 0; padding: 0; border: 0';
  column.append(mark('pe-pdf-col-s'), mark('pe-pdf-col-e'));
  article.prepend(column);
  const visible = (e) => e.getClientRects().length > 0;
  const plain = (e) => {
    const copy = e.cloneNode(true);
    copy.querySelectorAll('mjx-container, .headerlink, script, style').forEach((m) => m.remove());
    return copy.textContent.replace(/\\s+/g, ' ').trim();
  };
  const tables = [];
  article.querySelectorAll('table').forEach((table) => {
    if (!visible(table) || table.closest('#pdf-contents')) return;
    const t = tables.length;
    let cells = table.tHead ? Array.from(table.tHead.querySelectorAll('th, td')) : [];
    if (!cells.length && table.rows.length) cells = Array.from(table.rows[0].cells);
    const caption = table.caption ? plain(table.caption) : '';
    const headers = cells.filter(visible).map((cell, h) => {
      cell.prepend(mark(`pe-pdf-t${t}-h${h}-s`));
      cell.append(mark(`pe-pdf-t${t}-h${h}-e`));
      return plain(cell);
    });
    tables.push({headers, caption: caption || headers.slice(0, 4).join(' | ')});
  });
  const equations = [];
  article.querySelectorAll('mjx-container[display="true"]').forEach((container) => {
    const math = container.querySelector(':scope > mjx-math');
    if (!math || !visible(container)) return;
    const e = equations.length;
    container.style.whiteSpace = 'nowrap';  // the end mark stays on the equation's line
    math.before(mark(`pe-pdf-e${e}-s`));
    math.after(mark(`pe-pdf-e${e}-e`));
    equations.push({text: (math.textContent || '').replace(/\\s+/g, ' ').trim().slice(0, 60)});
  });
  return {tables, equations};
}
"""

# What the prepared page will print, measured in its print layout: every table and display equation lies inside the
# box that clips it (nothing hidden past a scrolling box's edge, which paper cannot scroll) and inside the column.
# Also each equation's width, which printed_problems compares with the printed one.
_FIT_JS = """
() => {
  const article = document.querySelector('article.bd-article') || document.querySelector('[role=main]');
  const a = article.getBoundingClientRect();
  const as = getComputedStyle(article);
  const column = [a.left + parseFloat(as.paddingLeft), a.right - parseFloat(as.paddingRight)];
  const clip = (e) => {
    for (let p = e.parentElement; p && p !== article; p = p.parentElement) {
      if (getComputedStyle(p).overflowX !== 'visible') {
        const r = p.getBoundingClientRect();
        return [r.left + p.clientLeft, r.left + p.clientLeft + p.clientWidth];
      }
    }
    return column;
  };
  const problems = [];
  const lost = (what, e, name) => {
    const r = e.getBoundingClientRect();
    const [left, right] = clip(e);
    const cut = Math.max(left - r.left, r.right - right, column[0] - r.left, r.right - column[1]);
    if (cut > 1) problems.push(`${what} is cut off on paper: ${Math.round(cut)} px of its ${Math.round(r.width)} px lie ` +
                               `outside its box or the column: ${name}`);
  };
  const widths = [];
  let t = 0;
  article.querySelectorAll('table').forEach((table) => {
    if (!table.getClientRects().length || table.closest('#pdf-contents')) return;
    lost(`table ${t + 1}`, table, (table.innerText || '').replace(/\\s+/g, ' ').trim().slice(0, 60));
    t += 1;
  });
  article.querySelectorAll('pre').forEach((pre) => {
    if (!pre.getClientRects().length || pre.closest('#pdf-contents')) return;
    const hidden = pre.scrollWidth - pre.clientWidth;
    if (getComputedStyle(pre).overflowX !== 'visible' && hidden > 1) {
      problems.push(`code or output is cut off on paper: ${hidden} px of its lines hidden: ` +
                    (pre.textContent || '').replace(/\\s+/g, ' ').trim().slice(0, 60));
    } else {
      lost('code or output', pre, (pre.textContent || '').replace(/\\s+/g, ' ').trim().slice(0, 60));
    }
  });
  article.querySelectorAll('mjx-container[display="true"]').forEach((container) => {
    const math = container.querySelector(':scope > mjx-math');
    if (!math || !container.getClientRects().length) return;
    lost(`display equation ${widths.length + 1}`, math, (math.textContent || '').trim().slice(0, 60));
    widths.push(math.getBoundingClientRect().width);
  });
  return {problems, widths, column: column[1] - column[0]};
}
"""


def _flat(text: str) -> str:
    """Text compared without case, spacing or compatibility forms (the PDF's text has line breaks where the page
    wrapped a cell, and ligatures)."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text)).lower()


def printed_problems(pdf_bytes: bytes, marked: dict, fit: dict, tolerance_px: float = 2.0) -> list[str]:
    """Compare what the page held (``marked``: _MARK_JS; ``fit``: _FIT_JS) with what Chromium printed.

    From the PDF's named destinations (the marks): every header cell of every table and both ends of every display
    equation were printed, inside the printed column; every word of a header cell is in the text of the page the cell
    is on; and each equation is printed as wide as it was laid out (a printed width that differs means the layout
    that was fitted is not the one printed)."""
    import io

    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(pdf_bytes))
    marks: dict[str, tuple[int, float, float]] = {}
    for name, destination in reader.named_destinations.items():
        name = str(name).lstrip("/")
        if name.startswith("pe-pdf-"):
            marks[name] = (reader.get_destination_page_number(destination), float(destination.left or 0),
                           float(destination.top or 0))
    if "pe-pdf-col-s" not in marks or "pe-pdf-col-e" not in marks:
        return ["the column's marks are not in the PDF: nothing could be compared with the print"]
    left, right = marks["pe-pdf-col-s"][1], marks["pe-pdf-col-e"][1]
    scale = fit["column"] / (right - left)  # CSS px per PDF unit
    slack = tolerance_px / scale
    texts: dict[int, str] = {}

    def page_text(number: int) -> str:
        if number not in texts:
            texts[number] = _flat(reader.pages[number].extract_text() or "")
        return texts[number]

    problems = []
    for t, table in enumerate(marked["tables"]):
        missing, outside, absent = [], [], []
        for h, header in enumerate(table["headers"]):
            start, end = marks.get(f"pe-pdf-t{t}-h{h}-s"), marks.get(f"pe-pdf-t{t}-h{h}-e")
            label = header or f"column {h + 1}"
            if start is None or end is None:
                missing.append(label)
                continue
            if min(start[1], end[1]) < left - slack or max(start[1], end[1]) > right + slack:
                outside.append(label)
            words = [w for w in header.split() if _flat(w)]
            pages = {start[0], end[0]}
            if any(not any(_flat(w) in page_text(p) for p in pages) for w in words):
                absent.append(label)
        where = f"table {t + 1} ({table['caption'][:70]!r})"
        if missing:
            problems.append(f"{where}: header cells not printed at all: {missing}")
        if outside:
            problems.append(f"{where}: header cells printed outside the column (cut off): {outside}")
        if absent:
            problems.append(f"{where}: header cells whose words are not in the printed page's text: {absent}")
    for e, equation in enumerate(marked["equations"]):
        start, end = marks.get(f"pe-pdf-e{e}-s"), marks.get(f"pe-pdf-e{e}-e")
        where = f"display equation {e + 1} ({equation['text'][:50]!r})"
        if start is None or end is None:
            problems.append(f"{where}: not printed")
            continue
        if start[0] != end[0] or abs(start[2] - end[2]) > 6:
            problems.append(f"{where}: printed across two lines or pages")
            continue
        if start[1] < left - slack or end[1] > right + slack:
            problems.append(f"{where}: printed {max(left - start[1], end[1] - right) * scale:.0f} px past the column")
        printed = (end[1] - start[1]) * scale
        expected = fit["widths"][e] if e < len(fit["widths"]) else None
        if expected is not None and abs(printed - expected) > max(tolerance_px, 0.02 * expected):
            problems.append(f"{where}: printed {printed:.0f} px wide, laid out {expected:.0f} px")
    return problems


def strip_marks(writer) -> None:
    """Remove the marks' named destinations from the PDF about to be written (they are for the check only)."""
    from pypdf.generic import NameObject

    dests = writer._root_object.get("/Dests")
    if dests is not None:
        dests = dests.get_object()
        for key in [k for k in dests.keys() if str(k).lstrip("/").startswith("pe-pdf-")]:
            del dests[NameObject(key)]


@contextlib.contextmanager
def heartbeat(what: str, start: float, every: float = 30.0):
    """Say every ``every`` seconds that ``what`` is still going on: Chromium prints the whole book in one call of
    several minutes, which used to pass in silence (a newcomer may kill a build that says nothing)."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every):
            site_test.progress(f"pdf: {what} ({time.perf_counter() - start:.0f} s)")

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def cjk_font_problems(path: Path, font: str) -> list[str]:
    """The Chinese PDF draws every CJK character with the embedded ``font`` (no character fell back to another font,
    which on a machine without CJK fonts is an empty box), and its text has no replacement character."""
    from pypdf import PdfReader

    import cjk_font

    problems: list[str] = []
    others: dict[str, str] = {}
    embedded = set()
    cjk_chars = 0

    def visit(text, cm, tm, font_dict, font_size):
        nonlocal cjk_chars
        name = str((font_dict or {}).get("/BaseFont", "?"))
        chars = cjk_font.CJK_CHAR.findall(text or "")
        if chars:
            cjk_chars += len(chars)
            if str((font_dict or {}).get("/Subtype")) == "/Type3":
                return  # Chromium writes the synthesized bold of the embedded font (headings) as Type 3 glyph programs
            if font in name:
                embedded.add(name)
            else:
                others.setdefault(name, "".join(chars)[:20])

    for number, page in enumerate(PdfReader(path).pages, start=1):
        text = page.extract_text(visitor_text=visit) or ""
        if "\ufffd" in text:
            problems.append(f"page {number}: a character that could not be drawn or read (U+FFFD)")
    if not cjk_chars:
        problems.append("the PDF has no CJK text")
    elif not embedded:
        problems.append(f"no embedded {font} font draws the CJK text")
    for name, sample in others.items():
        problems.append(f"CJK characters drawn with {name}, not the embedded {font}: {sample!r}")
    return problems


def quiet_pypdf() -> None:
    """Hide pypdf's warnings about the cross-reference table of Chromium's PDF.

    Reading the printed book, pypdf warns e.g. ``Object count 5328 exceeds defined trailer size 5304``: the file's
    trailer ``/Size`` is smaller than the number of objects pypdf finds. It reads every object regardless (the
    bookmarks, the named destinations and the text check below use them all, and the check fails if anything is
    missing), so the line says nothing a reader of `make pdf` can act on. Errors are still shown."""
    import logging

    logging.getLogger("pypdf").setLevel(logging.ERROR)


def build(site: Path, out: Path, chromium: str, edition: Edition = ENGLISH,
          entries: list[Chapter] | None = None) -> int:
    import html

    from playwright.sync_api import sync_playwright

    quiet_pypdf()

    entries = chapters(edition.toc) if entries is None else entries
    header = _HEADER.replace("Positional Encoding, Corrected", html.escape(edition.title) if edition.running_title else "")
    start = time.perf_counter()
    report = site_test.Report()
    with site_test.LocalServer(site, 1500) as server, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True,
                                     args=site_test.CHROMIUM_ARGS + ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"])
        page = browser.new_page(viewport={"width": 1000, "height": 1400})
        page.route("**/*", lambda route, request: route.continue_() if site_test._is_local(request.url, server.origin)
                   else (report.blocked.append(request.url), route.abort()))
        page.set_default_timeout(600_000)
        # Sphinx's single-page builder writes the page at the root document's path (book/intro.html) but its links
        # to _static/ and _images/ as if it lay at the top of the build: open a copy that lies there.
        root = entries[0].docname
        shutil.copy2(site / f"{root}.html", site / "print.html")
        page.goto(f"{server.origin}/print.html", wait_until="load")
        status = "not started"
        with heartbeat("MathJax is typesetting the single page", start):
            for _ in range(60):  # the whole book on one page: MathJax may take a minute to start and typeset
                status = page.evaluate(site_test._WAIT_FOR_MATHJAX_JS)
                if status == "ok":
                    break
        if status != "ok":
            print(f"MathJax did not finish on the single page ({status})")
            return 1
        while not page.evaluate(site_test._WAIT_FOR_LAYOUT_JS):
            pass
        site_test.progress(f"pdf: single page loaded and typeset ({time.perf_counter() - start:.0f} s)")
        page.emulate_media(media="print")
        page.set_viewport_size({"width": PRINT_COLUMN_PX, "height": 1400})  # the printed column (nothing lost)
        page.evaluate(site_test._OPEN_FOLDS_JS)  # let the layout script re-measure at that width
        prepared = page.evaluate(_PREPARE_JS, [c.docname for c in entries])
        titles, code = prepared["titles"], prepared["code"]
        for chapter, title in zip(entries, titles):
            chapter.title = tex_to_plain(title["text"]) or chapter.docname
        toc_entries = [{"part": c.part, "html": t["html"]} for c, t in zip(entries, titles)]
        page.evaluate(_TOC_JS, [toc_entries, ["000"] * len(entries), html.escape(edition.contents)])
        page.evaluate(_TITLE_JS, title_page(edition))
        page.evaluate("() => window.peFitForPrint ? window.peFitForPrint() : 0")
        page.evaluate(_PAGINATE_JS, TALL_SHARE)
        marked = page.evaluate(_MARK_JS)
        with heartbeat("Chromium is printing the book, first pass (to learn the chapters' pages)", start):
            first = _print(page, header)
        pages = chapter_pages(first, len(entries))
        site_test.progress(f"pdf: first print done, chapters start on pages {pages} ({time.perf_counter() - start:.0f} s)")
        page.evaluate(_TOC_JS, [toc_entries, [str(p) for p in pages], html.escape(edition.contents)])
        fit = page.evaluate(_FIT_JS)
        with heartbeat("Chromium is printing the book, second pass (with the contents' page numbers)", start):
            second = _print(page, header)
        final_pages = chapter_pages(second, len(entries))
        browser.close()
    if report.blocked:
        print(f"requests to other hosts were blocked: {report.blocked[:5]}")
        return 1
    problems = []
    if final_pages != pages:
        problems.append(f"the contents moved the chapters: {pages} then {final_pages}")
    for chapter, number in zip(entries, final_pages):
        chapter.page = number
        if number == 0:
            problems.append(f"chapter {chapter.docname}: no page found for it")
    problems += fit["problems"] + printed_problems(second, marked, fit)
    count = add_bookmarks(second, entries, out, edition)
    problems += check_pdf(out, entries, code, ignore_spaces=bool(edition.cjk_font))
    if edition.cjk_font:
        problems += cjk_font_problems(out, edition.cjk_font)
    size = out.stat().st_size / 1e6
    print(f"pdf: {out} ({count} pages, {size:.1f} MB, {len(entries)} chapters bookmarked under their parts, "
          f"{time.perf_counter() - start:.0f} s), {len(problems)} problem(s)")
    for problem in problems:
        print(f"  FAIL {problem}")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "singlehtml")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--chromium", default=site_test.os.environ.get("CHROMIUM", site_test.CHROMIUM))
    args = parser.parse_args(argv)
    if not (args.site / f"{chapters()[0].docname}.html").is_file():
        print(f"no single-page build at {args.site}: run `make pdf` (it builds it first)")
        return 2
    if not Path(args.chromium).is_file():
        print(f"Chromium is not installed at {args.chromium}.\n{site_test.INSTALL_HELP}")
        return 2
    return build(args.site, args.out, args.chromium)


if __name__ == "__main__":
    sys.exit(main())
