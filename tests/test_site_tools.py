"""The book's site tooling: notebook normalization, offline math, launch links, the site test's checks.

The browser test itself is `make test-site` (tools/site_test.py, run by .ci/run after `make book`).
"""

import copy
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import book_site  # noqa: E402
import book_tools  # noqa: E402
import site_test  # noqa: E402

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())


# ------------------------------------------------------------------ normalize (install cell, collapsed setup cell)


def test_every_toc_notebook_is_normalized():
    changed = book_tools.normalize(book_tools.toc_notebooks(), check=True)
    assert not changed, f"run `python tools/book_tools.py normalize`: {[p.name for p in changed]}"


def test_normalize_is_idempotent_and_keeps_outputs(tmp_path):
    source = ROOT / "book" / "part1" / "sinusoidal.ipynb"
    nb = nbformat.read(source, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    # Undo the set-up as an older notebook would have it, then normalize twice.
    first.source = book_tools._SETUP_BLOCK.sub("", first.source)
    first.metadata["tags"] = [t for t in first.metadata.get("tags", []) if t != book_tools.SETUP_TAG]
    outputs = copy.deepcopy([c.get("outputs") for c in nb.cells])
    assert book_tools.normalize_notebook(nb) is True
    once = nbformat.writes(nb)
    assert book_tools.normalize_notebook(nb) is False
    assert nbformat.writes(nb) == once
    assert [c.get("outputs") for c in nb.cells] == outputs
    assert first.source.count(book_tools.SETUP_BEGIN) == 1
    assert first.metadata["tags"].count("hide-input") == 1


def test_setup_block_installs_from_the_configured_repository_and_runs_when_installed():
    block = book_tools.setup_block()
    url, branch = CONFIG["repository"]["url"], CONFIG["repository"]["branch"]
    assert f"course_pe @ git+{url}@{branch}" in block
    for name in book_tools.SETUP_EXTRA_PACKAGES:
        assert book_tools.pinned(name) in block
    compile(block, "<setup>", "exec")
    namespace: dict = {}
    exec(block, namespace)  # course_pe is importable here, so nothing is installed


def test_the_intro_clones_the_configured_repository():
    """The book's "How to run it" gives a command that runs, from the one setting that names the repository."""
    intro = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    url, name = CONFIG["repository"]["url"], CONFIG["repository"]["url"].rstrip("/").rsplit("/", 1)[-1]
    assert f"git clone {url}.git && cd {name}\n" in intro
    assert "<this repository>" not in intro


def test_pinned_reads_requirements_and_refuses_unknown_packages():
    assert book_tools.pinned("myst_nb").startswith("myst-nb==")
    with pytest.raises(ValueError, match="not pinned"):
        book_tools.pinned("no-such-package")


def test_student_pages_remove_answer_placeholders(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("Exercise text."),
        nbformat.v4.new_markdown_cell("*Your answer here.*"),
        nbformat.v4.new_markdown_cell("Before.\n\n*Your answer here.*\n\nAfter."),
    ]
    path = tmp_path / "book" / "chapter.ipynb"
    path.parent.mkdir()
    nbformat.write(nb, path)
    assert book_tools.student_pages(tmp_path) == 2
    cells = nbformat.read(path, as_version=4).cells
    assert [c.source for c in cells] == ["Exercise text.", "Before.\n\nAfter."]
    assert book_tools.student_pages(tmp_path) == 0


# ------------------------------------------------------------------ offline math and titles (tools/book_site.py)


def test_mathjax_is_local_and_the_extension_is_configured():
    assert CONFIG["sphinx"]["config"]["mathjax_path"] == book_site.MATHJAX_PATH
    assert "://" not in book_site.MATHJAX_PATH
    assert CONFIG["sphinx"]["local_extensions"]["book_site"] == "tools/"  # (other local extensions may follow)
    es5 = book_site.mathjax_source()
    assert (es5 / "tex-mml-chtml.js").is_file()
    assert (es5 / "output" / "chtml" / "fonts" / "woff-v2").is_dir()


def test_tex_to_plain():
    assert book_site.tex_to_plain(r"Worked example: \(d_\text{model} = 4\), positions") == "Worked example: d_model = 4, positions"
    assert book_site.tex_to_plain(r"$\mathrm{PE}_{2i}$") == "PE_2i"
    assert book_site.tex_to_plain("no math") == "no math"


def test_exercises_are_numbered_per_chapter():
    env = SimpleNamespace(toc_fignumbers={
        "a": {"exercise": {"ex-a1": (1,), "ex-a2": (2,)}, "figure": {"f": (1,)}},
        "b": {"exercise": {"ex-b2": (5,), "ex-b1": (3,)}, "figure": {"g": (2,)}},
    })
    book_site.number_per_chapter(None, env)
    assert env.toc_fignumbers["b"]["exercise"] == {"ex-b1": (1,), "ex-b2": (2,)}
    assert env.toc_fignumbers["a"]["exercise"] == {"ex-a1": (1,), "ex-a2": (2,)}
    assert env.toc_fignumbers["b"]["figure"] == {"g": (1,)}  # figures too (issue 39), and theorems:


def test_theorems_are_numbered_per_chapter_and_other_chapters_named():
    env = SimpleNamespace(toc_fignumbers={
        "a": {"theorem": {"thm-a1": (1,), "thm-a2": (2,)}, "lemma": {"lem-a": (1,)}},
        "b": {"theorem": {"thm-b1": (3,)}, "lemma": {"lem-b": (2,)}, "unknown kind": {"u": (7,)}},
    })
    book_site.number_per_chapter(None, env)
    assert env.toc_fignumbers["b"]["theorem"] == {"thm-b1": (1,)}
    assert env.toc_fignumbers["b"]["lemma"] == {"lem-b": (1,)}
    assert env.toc_fignumbers["b"]["unknown kind"] == {"u": (7,)}
    from docutils import nodes

    env.titles = {"a": nodes.title("", "Chapter A"), "b": nodes.title("", "Chapter B")}
    app = SimpleNamespace(env=env, config=SimpleNamespace(language="en"))
    doctree = nodes.paragraph()
    own, other, worded = (nodes.reference("", "Theorem 1", refuri="#thm-b1"),
                          nodes.reference("", "Theorem 2", refuri="a.html#thm-a2"),
                          nodes.reference("", "the lemma", refuri="a.html#lem-a"))
    doctree += [own, other, worded]
    book_site.name_other_chapters(app, doctree, "b")
    assert [r.astext() for r in (own, other, worded)] == ["Theorem 1", "Theorem 2 of Chapter A", "the lemma"]


def test_repeated_inline_scripts_are_dropped():
    from sphinx.builders.html._assets import _JavaScript

    scripts = [_JavaScript(None, body="const A = 1;", priority=500), _JavaScript("", body="const A = 1;", priority=500),
               _JavaScript("x.js"), _JavaScript("", body="const B = 2;")]
    context = {"script_files": scripts}
    book_site.drop_repeated_scripts(None, "p", "page.html", context, None)
    assert [(s.filename, s.attributes.get("body")) for s in context["script_files"]] == [
        (None, "const A = 1;"), ("x.js", None), ("", "const B = 2;")]


# ------------------------------------------------------------------ launch buttons and the site test's checks


def _page(tmp_path, *hrefs):
    page = tmp_path / "page.html"
    page.write_text("".join(f'<a href="{h}">x</a>' for h in hrefs))
    return page


def test_launch_links_must_point_at_notebooks_of_the_configured_repository(tmp_path):
    repo, branch, _ = site_test.repository_settings()
    good_binder = f"https://mybinder.org/v2/gh/{repo}/{branch}?urlpath=lab/tree/book/part1/sinusoidal.ipynb"
    good_colab = f"https://colab.research.google.com/github/{repo}/blob/{branch}/book/part1/sinusoidal.ipynb"
    problems, seen = site_test.launch_url_problems([_page(tmp_path, good_binder, good_colab, "https://example.org")],
                                                   ROOT, repo, branch)
    assert (problems, seen) == ([], 2)
    bad = [
        good_colab.replace(repo, "someone/else"),
        good_binder.replace(f"/{branch}?", "/dev?"),
        good_colab.replace("sinusoidal.ipynb", "missing.ipynb"),
        good_binder.replace("book/part1/sinusoidal.ipynb", "book/part1/notation.md"),
    ]
    problems, seen = site_test.launch_url_problems([_page(tmp_path, *bad)], ROOT, repo, branch)
    assert seen == 4 and len(problems) == 4


def test_binder_installs_cpu_torch_and_the_course():
    requirements = (ROOT / "binder" / "requirements.txt").read_text()
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in requirements
    assert "-r ../requirements.txt" in requirements
    assert "pip install --no-deps" in (ROOT / "binder" / "postBuild").read_text()
    assert CONFIG["launch_buttons"]["notebook_interface"] == "jupyterlab"


def test_publish_workflow_builds_and_deploys_pages():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "publish.yml").read_text())
    steps = [s.get("uses", s.get("run", "")) for s in workflow["jobs"]["build"]["steps"]]
    assert any("make book" in s for s in steps)
    # both editions, assembled so that the language switch works (M1), and that folder is what is published
    assert any("make book-zh" in s for s in steps) and any("make site" in s for s in steps)
    [upload] = [s for s in workflow["jobs"]["build"]["steps"] if s.get("uses", "").startswith("actions/upload-pages")]
    assert upload["with"]["path"] == "_build/site"
    assert workflow["jobs"]["deploy"]["permissions"] == {"pages": "write", "id-token": "write"}
    assert workflow[True]["push"]["branches"] == ["main"]  # YAML reads the key `on` as True


@pytest.mark.parametrize("text", [r"\(d_\text{model}\)", r"\[ x \]", r"$d_\text{model} = 4$", r"d_\text{model}",
                                  r"\langle q, k \rangle", "$$x$$"])
def test_raw_tex_is_detected(text):
    assert site_test.RAW_TEX.search(text)


@pytest.mark.parametrize("text", ["plain prose (with brackets) [1]", "costs $5 and $6", "C:/path", "a_b = 4"])
def test_prose_is_not_taken_for_tex(text):
    assert not site_test.RAW_TEX.search(text)


# ------------------------------------------------------------------ the CJK font (tools/cjk_font.py)

import cjk_font  # noqa: E402


def _source_texts() -> list[Path]:
    """Every text a build can show: chapters and pages, the errata catalogue, translation catalogues (locale/)."""
    paths = [ROOT / "book", ROOT / "_toc.yml"]
    if (ROOT / "locale").is_dir():
        paths.append(ROOT / "locale")
    return paths


def test_every_cjk_character_of_the_book_is_in_the_source_font():
    chars = cjk_font.chars_in_files(_source_texts())
    assert len(chars) > 100, "the sources quote Chinese; finding almost no CJK characters means the scan is broken"
    missing = cjk_font.missing_from_source(chars)
    assert not missing, (f"{len(missing)} CJK character(s) used by the book are not in {cjk_font.SOURCE_FONT.name}: "
                         f"{''.join(missing)} (the served font is a subset of it; see tools/cjk_font.py)")


def test_source_font_is_the_pinned_file_with_its_licence():
    import hashlib

    assert hashlib.sha256(cjk_font.SOURCE_FONT.read_bytes()).hexdigest() == cjk_font.SOURCE_SHA256
    assert "SIL Open Font License" in cjk_font.SOURCE_LICENSE.read_text()


def test_subset_has_exactly_the_requested_characters_and_refuses_missing_ones(tmp_path):
    chars = set("位置编码更正说明")
    target = tmp_path / "subset.woff2"
    cjk_font.subset(chars, target)
    assert cjk_font.font_chars(target) >= chars
    assert not {c for c in cjk_font.font_chars(target) if cjk_font.is_cjk(c)} - chars
    assert target.stat().st_size < 20_000
    with pytest.raises(ValueError, match="not in"):
        cjk_font.subset({"\U0002A6D6"}, tmp_path / "bad.woff2")  # an extension-B ideograph the SC subset lacks


def test_cjk_runs_and_unicode_range():
    text = "the source says “位置编码 (PE) 是固定的，偏移 6 更近” here"
    assert [m.group(0) for m in cjk_font.CJK_RUN.finditer(text)] == ["位置编码", "是固定的，偏移 6 更近"]
    assert cjk_font.unicode_range({"a", "b", "c", "x"}) == "U+61-63, U+78"
    assert cjk_font.cjk_chars("abc 更正 d") == {"更", "正"}


# ------------------------------------------------------------------ make pdf (tools/book_pdf.py)

import book_pdf  # noqa: E402


def test_pdf_chapters_follow_the_toc_with_their_parts():
    entries = book_pdf.chapters()
    assert entries[0].docname == "book/intro" and entries[0].part == ""
    assert [c.docname for c in entries[1:]] == [
        p.relative_to(ROOT).with_suffix("").as_posix() for p in book_tools.toc_files()[1:]]
    assert {c.part for c in entries[1:]} >= {"Foundations", "Reference"}


def _blank_pdf(pages: int, destinations: dict[str, int]) -> bytes:
    import io

    from pypdf import PdfWriter

    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=200, height=200)
    for name, page in destinations.items():
        writer.add_named_destination(name, page)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def test_pdf_chapter_pages_and_bookmarks(tmp_path):
    from pypdf import PdfReader

    data = _blank_pdf(6, {"pdf-chapter-0": 1, "pdf-chapter-1": 2, "pdf-chapter-2": 4, "other": 5})
    assert book_pdf.chapter_pages(data, 4) == [2, 3, 5, 0]  # 1-based; the fourth chapter has no destination
    entries = [book_pdf.Chapter("", "book/intro", "Intro", 2), book_pdf.Chapter("Part I", "a", "A", 3),
               book_pdf.Chapter("Part I", "b", "B", 5)]
    target = tmp_path / "book.pdf"
    assert book_pdf.add_bookmarks(data, entries, target) == 6
    reader = PdfReader(target)
    outline = reader.outline
    assert outline[0].title == "Intro" and reader.get_destination_page_number(outline[0]) == 1
    assert outline[1].title == "Part I" and [c.title for c in outline[2]] == ["A", "B"]
    assert reader.metadata.title == "Positional Encoding, Corrected"
    # blank pages hold no title: the check reports every chapter
    problems = book_pdf.check_pdf(target, entries)
    assert sum("not found on its page" in p for p in problems) == 3


# ------------------------------------------------------------------------------------------- the two-edition site

import edition_switch  # noqa: E402


def _edition(folder: Path, lang: str, other: str, pages=("index.html", "book/a.html"), switch=True) -> None:
    for rel in pages:
        depth = rel.count("/")
        link = f'<a class="btn edition-switch" href="{"../" * depth}{other}/{rel}">x</a>' if switch else ""
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(f'<!DOCTYPE html><html lang="{lang}"><body>{link}</body></html>')


def test_assembled_site_puts_the_editions_where_their_switch_links_point(tmp_path):
    en, zh = tmp_path / "html", tmp_path / "html-zh"
    _edition(en, "en", "../html-zh")
    _edition(zh, "zh-CN", "../html")
    with pytest.raises(ValueError, match="make book-zh"):
        edition_switch.assemble_site(en, tmp_path / "missing", tmp_path / "site")
    edition_switch.assemble_site(en, zh, tmp_path / "site")
    site = tmp_path / "site"
    assert (site / "html" / "book" / "a.html").is_file() and (site / "html-zh" / "book" / "a.html").is_file()
    assert 'url=html/index.html' in (site / "index.html").read_text()
    for edition in ("html", "html-zh"):
        for rel in ("index.html", "book/a.html"):
            parser = site_test._LinkParser()
            parser.feed((site / edition / rel).read_text())
            assert site_test.switch_link_problems(site / edition, site, rel, parser.hrefs) == ([], 1, None)


def test_switch_links_are_followed_in_the_served_layout(tmp_path):
    """The site test's switch check on tiny sites: it fails on the layouts that broke the published site (M1/M6)."""
    en, zh = tmp_path / "html", tmp_path / "html-zh"
    _edition(en, "en", "../html-zh")
    href = ["../../html-zh/book/a.html"]
    # English alone: the other edition is not built; nothing to follow, and the reason is given
    problems, followed, why = site_test.switch_link_problems(en, en, "book/a.html", href)
    assert problems == [] and followed == 0 and "not built" in why
    _edition(zh, "zh-CN", "../html")
    # both built, the English one served alone (the old make serve, make test-site and GitHub Pages): a 404
    problems, followed, why = site_test.switch_link_problems(en, en, "book/a.html", href)
    assert followed == 0 and why is None and "404" in problems[0] and "make site" in problems[0]
    # both served from their parent: followed
    assert site_test.switch_link_problems(en, tmp_path, "book/a.html", href) == ([], 1, None)
    # a page of one edition missing from the other: a 404 on the server
    (zh / "book" / "a.html").unlink()
    problems, followed, _ = site_test.switch_link_problems(en, tmp_path, "book/a.html", href)
    assert followed == 0 and "404" in problems[0]
    _edition(zh, "zh-CN", "../html")
    # a switch to another page, to the same edition, to a page in the same language, none or two of them
    assert "not book/a.html" in site_test.switch_link_problems(en, tmp_path, "book/a.html", ["../../html-zh/index.html"])[0][0]
    assert site_test.switch_link_problems(en, tmp_path, "book/a.html", ["../../html/book/a.html"])[0]
    (zh / "book" / "a.html").write_text('<html lang="en"><body></body></html>')
    assert "same language" in site_test.switch_link_problems(en, tmp_path, "book/a.html", href)[0][0]
    assert "0 language-switch links" in site_test.switch_link_problems(en, tmp_path, "book/a.html", [])[0][0]
    assert "2 language-switch links" in site_test.switch_link_problems(en, tmp_path, "book/a.html", href * 2)[0][0]
    assert "not a relative link" in site_test.switch_link_problems(en, tmp_path, "book/a.html", ["/html-zh/book/a.html"])[0][0]


# ------------------------------------------------------------------ student edition, phone tables, PDF (site2)

REPO_URL = CONFIG["repository"]["url"].rstrip("/")


def test_student_config_drops_every_button_that_opens_a_repository_notebook():
    student = book_tools.student_config(CONFIG)
    assert student["title"] == CONFIG["title"] + " (student edition)"
    launch = student["launch_buttons"]
    assert not any(launch.get(k) for k in ("binderhub_url", "colab_url", "jupyterhub_url", "deepnote_url", "thebe"))
    assert student["html"]["use_edit_page_button"] is False
    assert student["html"]["use_download_button"] is True  # the page's own (workbook) notebook
    assert CONFIG["launch_buttons"]["colab_url"]  # the full edition keeps them (the input is not modified)
    # no language switch (there is no Chinese student edition), while the full edition keeps it
    assert "edition_switch" not in student["sphinx"]["local_extensions"]
    assert "edition_switch" in CONFIG["sphinx"]["local_extensions"]


def test_the_student_site_must_have_no_language_switch(tmp_path):
    site = tmp_path / "student"
    assert site_test.switch_link_problems(site, site, "book/a.html", [], expected=0) == ([], 0, None)
    problems, followed, _ = site_test.switch_link_problems(site, site, "book/a.html", ["../html-zh/book/a.html"],
                                                           expected=0)
    assert problems == ["1 language-switch links (expected 0)"] and followed == 0


def _student_site(tmp_path, hrefs, notebook=None):
    site = tmp_path / "site"
    (site / "book").mkdir(parents=True)
    (site / "book" / "chapter.html").write_text("".join(f'<a href="{h}">x</a>' for h in hrefs))
    if notebook is not None:
        (site / "_sources" / "book").mkdir(parents=True)
        nbformat.write(notebook, site / "_sources" / "book" / "chapter.ipynb")
    return site


def _notebook(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


def test_check_student_site_accepts_the_repository_page_issues_and_a_workbook_download(tmp_path):
    stub = nbformat.v4.new_code_cell("def f(x):\n    raise NotImplementedError('implement f')")
    stub.metadata["tags"] = ["student"]
    site = _student_site(tmp_path, [REPO_URL, f"{REPO_URL}/issues/new?title=x", "https://github.com/other/repo/blob/main/a.ipynb",
                                    "../_sources/book/chapter.ipynb", "#top", "other.html"],
                         _notebook(nbformat.v4.new_markdown_cell("Exercise."), stub))
    assert book_tools.check_student_site(site, REPO_URL) == []


@pytest.mark.parametrize("href", [
    "https://colab.research.google.com/github/o/r/blob/main/book/part1/sinusoidal.ipynb",
    "https://mybinder.org/v2/gh/o/r/main?urlpath=lab/tree/book/part1/sinusoidal.ipynb",
    f"{REPO_URL}/edit/main/book/part1/sinusoidal.ipynb",
    f"{REPO_URL}/blob/main/book/part1/sinusoidal.ipynb",
    f"{REPO_URL}/tree/main/book",
    "https://raw.githubusercontent.com/" + REPO_URL.split("github.com/")[1] + "/main/book/part1/sinusoidal.ipynb",
])
def test_check_student_site_refuses_launch_and_repository_file_links(tmp_path, href):
    problems = book_tools.check_student_site(_student_site(tmp_path, [href]), REPO_URL)
    assert len(problems) == 1 and href in problems[0]


@pytest.mark.parametrize("cell", [
    nbformat.v4.new_code_cell("def f(x):\n    return x", metadata={"tags": ["solution"]}),
    nbformat.v4.new_markdown_cell("```{solution-start} ex-1\n```\nThe answer.\n```{solution-end}\n```"),
    nbformat.v4.new_markdown_cell(":::{solution} ex-1\nThe answer.\n:::"),
])
def test_check_student_site_refuses_a_downloadable_notebook_with_solutions(tmp_path, cell):
    site = _student_site(tmp_path, ["../_sources/book/chapter.ipynb"], _notebook(cell))
    problems = book_tools.check_student_site(site, REPO_URL)
    assert len(problems) == 1 and "holds solutions" in problems[0]


def test_every_chapter_with_exercises_is_caught_by_the_solution_detector():
    """The detector knows how this book marks solutions: every chapter with a coding exercise trips it."""
    flagged = [p for p in book_tools.toc_notebooks() if book_tools.solution_content(p)]
    assert any(p.name == "sinusoidal.ipynb" for p in flagged), flagged


def test_phone_tables_keep_words_whole():
    css = book_site._SITE_CSS
    phone = css[css.index("@media (max-width: 767.98px)"):]
    assert "table:not(.indextable) :is(th, td)" in phone and "overflow-wrap: normal" in phone
    assert "word-break: normal" in phone


def test_site_test_flags_words_broken_in_a_table_at_390px():
    assert "_BROKEN_TABLE_WORDS_JS" in site_test.run_browser_checks.__code__.co_names


def test_pdf_print_keeps_a_code_cell_frame_with_its_code_and_hides_pypdf_trailer_noise(caplog):
    import logging

    import book_pdf

    assert "div.cell_input, div.cell_output" in book_pdf._TOC_JS
    book_pdf.quiet_pypdf()
    logging.getLogger("pypdf._reader").warning("Object count 5328 exceeds defined trailer size 5304")
    assert "trailer size" not in caplog.text
    logging.getLogger("pypdf._reader").error("a real error")
    assert "a real error" in caplog.text
