"""What one chapter says another chapter shows or trains is tied to that chapter (tools/cross_claims.py).

A tie is a value glued in the chapter described, pasted with myst-nb's cross-document glue
(``{glue:text}`../part3/extrapolation.ipynb::gap_t5:+.3f```), or a ``{prf:ref}`` to a statement proved there; an
errata entry is tied by its evidence cell in the chapter it names. Claims about the whole book ("no chapter of this
book trains ...") cannot be tied and fail: name the chapter and tie the sentence to it.
"""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import cross_claims as cc  # noqa: E402

PAGES = [p.path for p in cc.pages()] + [cc.ERRATA_YAML]
RELATIVE = ROOT / "book" / "part2" / "relative.ipynb"
GENERATION = ROOT / "book" / "part2" / "generation.ipynb"


def claim(text: str, page: Path = RELATIVE, erratum: str = ""):
    return cc.analyse(cc.Sentence(page, 0, text, erratum))


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_cross_chapter_claim_is_tied(path):
    untied = [c.describe() for c in cc.claims([path]) if not c.tied]
    assert not untied, (
        f"{len(untied)} sentence(s) state what another chapter shows or trains without a tie into it. Paste a value "
        "glued there ({glue:text}`../partN/chapter.ipynb::key:fmt`), refer to a statement proved there "
        "({prf:ref}`label`), or name the chapter instead of the whole book:\n" + "\n".join(untied))


def test_every_cross_document_glue_role_resolves():
    """A pasted value must exist where the role says: the book build would otherwise paste nothing (a warning)."""
    assert not cc.broken_glue_roles(), "\n".join(cc.broken_glue_roles())


def test_a_broken_cross_document_role_is_reported(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("A {glue:text}`../part3/extrapolation.ipynb::n_seeds` and {glue:text}`nowhere.ipynb::x:d`.\n"
                    "Fine: {glue:text}`/book/part3/extrapolation.ipynb::n_seeds:d` (a path from the book's root).\n")
    problems = cc.broken_glue_roles([page])
    assert len(problems) == 2, problems
    assert "needs a format" in problems[0] and "no notebook of the TOC" in problems[1]


# ---------------------------------------------------------------- the detector: the review's cases and near misses

R1 = ("No chapter of this book trains a model with T5's bias, so no result depends on either choice; a reader "
      "comparing the code with T5's should still know them.")
R2 = ("As families, relative methods come out ahead: the xPos paper's summary table ({footcite:t}`sun2023length`, "
      "Table 1) rates the sinusoidal and learned encodings lowest for length extrapolation, RoPE and T5 one step "
      "higher, and only ALiBi as extrapolating, and in Part III's experiment RoPE, T5's bias and ALiBi all degrade "
      "less than the two absolute encodings.")


def test_the_review_s_two_claims_are_caught():
    """R1 and R2 of the 2026-11-28 Part II review, verbatim: both untied."""
    r1, r2 = claim(R1), claim(R2)
    assert r1 is not None and r1.book_wide and not r1.tied
    assert r2 is not None and not r2.tied
    assert ROOT / "book" / "part3" / "extrapolation.ipynb" in r2.refers_to


def test_a_glued_value_of_the_chapter_described_ties_a_claim():
    tied = claim("Part III trains this model; its gap beyond the training length is "
                 "{glue:text}`../part3/extrapolation.ipynb::gap_t5:+.3f` nats.")
    assert tied is not None and tied.tied
    # a record that does not exist ties nothing, and neither does a value of another chapter
    assert not claim("Part III trains this model ({glue:text}`../part3/extrapolation.ipynb::no_such_key`).").tied
    assert not claim("Part III trains this model ({glue:text}`../part1/learned.ipynb::gap_t5`).").tied
    # nor a value of the page itself
    assert not claim("Part III trains this model ({glue:text}`t5_sat_bi`).").tied


def test_a_claim_that_another_chapter_asserts_needs_a_value_from_an_asserting_cell(tmp_path):
    record = {"output_type": "display_data", "data": {cc.GLUE_RECORD: "1.5", "text/plain": "1.5"},
              "metadata": {"scrapbook": {"name": None, "mime_prefix": "application/papermill.record/"}}}

    def cell(source, name):
        output = {**record, "metadata": {"scrapbook": {**record["metadata"]["scrapbook"], "name": name}}}
        return {"cell_type": "code", "metadata": {}, "execution_count": 1, "outputs": [output], "source": source}

    nb = {"cells": [cell("x = 1.5\nglue('plain', x)", "plain"), cell("assert x > 1\nglue('checked', x)", "checked")],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "chapter.ipynb"
    path.write_text(json.dumps(nb))
    assert cc.asserted_glue(path) == {"checked"} and set(cc.glue_records(path)) == {"plain", "checked"}
    sentence = cc.Sentence(RELATIVE, 0, "Part III asserts it.")
    base = dict(sentence=sentence, refers_to={path}, book_wide=False, verbs=["asserts"], tied_to={path})
    assert not cc.Claim(**base, says_asserted=True, asserted_tie=False).tied
    assert cc.Claim(**base, says_asserted=True, asserted_tie=True).tied
    assert cc.Claim(**base, says_asserted=False, asserted_tie=False).tied
    # on the book: Part III's gap_t5 comes from its results cell, which asserts the ordering
    assert "gap_t5" in cc.asserted_glue(ROOT / "book" / "part3" / "extrapolation.ipynb")
    assert claim("Part III asserts it ({glue:text}`../part3/extrapolation.ipynb::gap_t5:+.3f`).").tied


def test_a_claim_about_the_whole_book_cannot_be_tied():
    c = claim("No other chapter trains it ({glue:text}`../part3/extrapolation.ipynb::gap_t5:+.3f`).")
    assert c is not None and c.book_wide and not c.tied


def test_a_proved_statement_ties_a_claim_and_a_plain_link_does_not():
    assert claim("{ref}`ch-rope-proof` proves it ({prf:ref}`thm-rope-relative`).", GENERATION).tied
    assert not claim("{ref}`ch-rope-proof` proves it.", GENERATION).tied
    assert not claim("{ref}`ch-rope-proof` proves it ({ref}`ch-rope-proof`).", GENERATION).tied


def test_navigation_and_the_page_s_own_content_are_not_claims():
    assert claim("{ref}`ch-context-extension` treats the methods that stretch RoPE.") is None
    assert claim("See Part III for long inputs.") is None
    assert claim("The next cell measures the bias.") is None  # this chapter's own cell
    assert claim("Part II moves position into the logits, and this chapter measures it.") is None  # own part


def test_chapters_named_in_words_are_references():
    c = claim("The sinusoidal chapter measured it.")
    assert c is not None and ROOT / "book" / "part1" / "sinusoidal.ipynb" in c.refers_to and not c.tied
    c = claim("The next chapter proves it.")  # relative -> rope_first_principles
    assert c is not None and ROOT / "book" / "part2" / "rope_first_principles.ipynb" in c.refers_to


def test_code_and_math_are_not_prose():
    text = "```python\n# Part III trains this\nx = 1\n```\n\n$$\n\\text{Part III trains}\n$$\n\nPlain words.\n"
    assert cc.prose_blocks(text) == ["Plain words."]
    directive = "```{exercise}\n:label: ex-x\n\nPart III trains a model.\n```\n"
    assert cc.prose_blocks(directive) == ["Part III trains a model."]


def test_sentences_do_not_split_inside_roles_math_or_abbreviations():
    text = "Shaw et al. (2018) add $a.b$ here. The role {glue:text}`x.ipynb::k:.2f` stays. Next, i.e. this."
    assert cc.sentences(text) == ["Shaw et al. (2018) add $a.b$ here.", "The role {glue:text}`x.ipynb::k:.2f` stays.",
                                  "Next, i.e. this."]


def test_an_errata_entry_is_tied_by_its_evidence_cell_in_the_chapter_it_names():
    errata = cc.ERRATA_PAGE
    assert claim("Sinusoidal models degrade beyond the training length (the experiment in Part III).", errata,
                 "E001-04").tied
    assert not claim("Sinusoidal models degrade beyond the training length (the experiment in Part III).", errata,
                     "E002-02").tied
    # a withdrawn entry has no evidence cell: a number glued in the chapter it names ties it, as printed there
    gap = float(cc.glue_records(ROOT / "book" / "part3" / "extrapolation.ipynb")["gap_rope"])
    assert claim(f"In Part III RoPE degrades by {gap:+.2f} nats.", errata, "E002-02").tied
    assert not claim("In Part III RoPE degrades by +99.99 nats.", errata, "E002-02").tied  # no such value there


def test_the_workbook_pastes_a_value_glued_in_another_chapter():
    """JupyterLab renders no glue role, so the workbook writes the number itself, from the chapter that stores it."""
    import nbformat

    from course_pe.coursework.workbook import make_student_notebook

    nb = nbformat.read(RELATIVE, as_version=4)
    gap_t5 = float(cc.glue_records(ROOT / "book" / "part3" / "extrapolation.ipynb")["gap_t5"])
    expected = f"its gap beyond the\ntraining length, {gap_t5:+.2f} nats"
    for source in (RELATIVE, None):  # next to the notebook's path, or found under book/ without it
        text = "\n".join(c.source for c in make_student_notebook(nb, source=source).cells if c.cell_type == "markdown")
        assert "{glue" not in text and expected in text
