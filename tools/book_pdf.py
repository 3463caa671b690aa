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
import re
import shutil
import sys
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
      ul.pdf-toc li { margin: 0.25em 0; }
      ul.pdf-toc li.pdf-part { font-weight: 700; margin-top: 0.9em; }
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
      h1, h2, h3 { break-after: avoid; }`;
    document.head.appendChild(style);
  }
}
"""

_HEADER = '<div style="font-size:7.5px;width:100%;padding:0 16mm;color:#666;">Positional Encoding, Corrected</div>'
_FOOTER = ('<div style="font-size:8px;width:100%;text-align:center;color:#444;">'
           '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')


def _print(page, header: str = _HEADER) -> bytes:
    return page.pdf(format="A4", print_background=True, display_header_footer=True, header_template=header,
                    footer_template=_FOOTER, margin={"top": "18mm", "bottom": "20mm", "left": "16mm", "right": "16mm"},
                    prefer_css_page_size=True)


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


def build(site: Path, out: Path, chromium: str, edition: Edition = ENGLISH) -> int:
    import html

    from playwright.sync_api import sync_playwright

    quiet_pypdf()

    entries = chapters(edition.toc)
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
        prepared = page.evaluate(_PREPARE_JS, [c.docname for c in entries])
        titles, code = prepared["titles"], prepared["code"]
        for chapter, title in zip(entries, titles):
            chapter.title = tex_to_plain(title["text"]) or chapter.docname
        toc_entries = [{"part": c.part, "html": t["html"]} for c, t in zip(entries, titles)]
        page.evaluate(_TOC_JS, [toc_entries, ["000"] * len(entries), html.escape(edition.contents)])
        page.evaluate("() => window.peFitForPrint ? window.peFitForPrint() : 0")
        first = _print(page, header)
        pages = chapter_pages(first, len(entries))
        site_test.progress(f"pdf: first print done, chapters start on pages {pages} ({time.perf_counter() - start:.0f} s)")
        page.evaluate(_TOC_JS, [toc_entries, [str(p) for p in pages], html.escape(edition.contents)])
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
