"""make pdf's check that nothing is lost on paper (tools/book_pdf.py, issue 39).

A one-page book is printed by headless Chromium as `make pdf` prints the real one. A table wider than the column,
in a box that scrolls on screen, loses its last columns on paper unless the page is fitted to the printed column;
the check must fail then, and pass when book_site_layout.js fits the table and the equation to the column.
"""

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import book_pdf  # noqa: E402
import book_site  # noqa: E402
import site_test  # noqa: E402

CHROMIUM = site_test.CHROMIUM
HEADERS = [f"Column{n}" for n in range(1, 15)]
EQUATION = r"\[ " + " + ".join(f"a_{{{i}}} x^{{{i}}}" for i in range(30)) + r" \]"


def _page(fitted: bool) -> str:
    head = "".join(f"<th>{h}</th>" for h in HEADERS)
    row = "".join(f"<td>value_{n}_of_a_row</td>" for n in range(len(HEADERS)))
    layout = ('<script src="../_static/book_site_layout.js"></script>' if fitted else
              "<script>document.documentElement.dataset.peLayout = 'ready';</script>")
    return f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<style>{book_site._SITE_CSS}{book_site._READING_CSS}
article.bd-article {{ max-width: 100%; padding: 0; }}
.bd-article div.math {{ display: flex; overflow: hidden; }}
.bd-article .pst-scrollable-table-container {{ overflow-x: auto; }}
table, th, td {{ border: 1px solid #888; border-collapse: collapse; white-space: nowrap; }}</style>
<script>window.MathJax = {{chtml: {{mtextInheritFont: false}}}};</script>
<script defer src="../_static/mathjax/tex-mml-chtml.js"></script>{layout}</head>
<body><main><article class="bd-article" role="main"><section><h1>A page wider than paper</h1>
<p>Every column of this table must reach the paper.</p>
<div class="pst-scrollable-table-container"><table class="table"><thead><tr>{head}</tr></thead>
<tbody><tr>{row}</tr></tbody></table></div>
<div class="math notranslate nohighlight">{EQUATION}</div>
</section></article></main></body></html>"""


def _site(tmp_path: Path, fitted: bool) -> Path:
    site = tmp_path / ("fitted" if fitted else "bare")
    (site / "book").mkdir(parents=True)
    (site / "book" / "intro.html").write_text(_page(fitted))
    static = site / "_static"
    shutil.copytree(book_site.mathjax_source(), static / "mathjax", ignore=book_site._ignore)
    shutil.copy2(book_site.STATIC / "book_site_layout.js", static / "book_site_layout.js")
    return site


needs_chromium = pytest.mark.skipif(not Path(CHROMIUM).is_file(),
                                    reason=f"make pdf needs Debian's chromium at {CHROMIUM} (README: The site test)")


@needs_chromium
def test_pdf_check_fails_on_a_table_that_loses_columns_on_paper(tmp_path, capsys):
    site = _site(tmp_path, fitted=False)
    status = book_pdf.build(site, tmp_path / "bare.pdf", CHROMIUM, entries=[book_pdf.Chapter("", "book/intro")])
    out = capsys.readouterr().out
    assert status == 1, out
    lost = next(line for line in out.splitlines() if "header cells" in line and "table 1" in line)
    assert "Column14" in lost and "Column1'" not in lost, lost  # the last column is lost, the first is printed
    assert "table 1 is cut off on paper" in out
    assert "display equation 1" in out  # cut at the column's edge too


@needs_chromium
def test_pdf_check_passes_when_the_table_and_the_equation_are_fitted_to_the_column(tmp_path, capsys):
    site = _site(tmp_path, fitted=True)
    status = book_pdf.build(site, tmp_path / "fitted.pdf", CHROMIUM, entries=[book_pdf.Chapter("", "book/intro")])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "0 problem(s)" in out
    from pypdf import PdfReader

    reader = PdfReader(tmp_path / "fitted.pdf")
    text = reader.pages[-1].extract_text()
    for header in HEADERS:  # every column on paper
        assert header in text.replace("\n", "").replace(" ", "")
    assert not [n for n in reader.named_destinations if "pe-pdf-" in str(n)]  # the check's marks are removed
    assert "/StructTreeRoot" in reader.trailer["/Root"]  # tagged
