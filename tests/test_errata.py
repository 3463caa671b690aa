"""The errata catalogue (book/reference/errata.yml), the sources it quotes, the chapters' callouts and evidence cells,
the student editions, and the errata chapter that renders it.

What a chapter must do for an erratum that stands (book/reference/errata.ipynb states the rules):
* one callout: a markdown cell with a ``(erratum-eXXX-yy)=`` label and an ``{admonition}`` titled "Erratum ..." or
  "Errata ..." naming the ID, visible: not in a solution or exercise, not nested in a fold that hides its title, not in a
  cell tagged ``remove-*``/``hide-*``;
* at least one evidence code cell in the same notebook, tagged ``erratum-eXXX-yy``, that asserts something and is as
  visible as the callout (unless the catalogue marks the entry ``evidence: citation``);
* both survive ``course_pe.coursework.workbook.make_student_notebook`` (the workbook and the student edition of the book).
A withdrawn entry has no callout and no label anywhere.
"""

from __future__ import annotations

import ast
import copy
import json
import re
import sys
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import book_tools  # noqa: E402
from course_pe.coursework.workbook import make_student_notebook  # noqa: E402

CATALOGUE = yaml.safe_load((ROOT / "book" / "reference" / "errata.yml").read_text(encoding="utf-8"))
ERRATA = CATALOGUE["errata"]
STANDING = [e for e in ERRATA if e.get("status") != "withdrawn"]
WITHDRAWN = [e for e in ERRATA if e.get("status") == "withdrawn"]
CATEGORIES = {"math", "numeric", "code bug", "fabricated output", "factual", "misleading", "inconsistency"}
SEVERITIES = {"high", "medium", "low"}
ID = re.compile(r"^E(\d{3})-(\d{2})$")
STANDING_FIELDS = ["id", "section", "quote", "translation", "category", "severity", "wrong", "correction",
                   "correction_zh", "explanation_zh"]
WITHDRAWN_FIELDS = ["id", "section", "quote", "translation", "status", "was", "context", "previously", "withdrawn",
                    "withdrawn_zh"]
CJK = re.compile(r"[\u4e00-\u9fff]")
SOURCES_DIR = ROOT.parent / "shared" / "sources"


# --- the catalogue ------------------------------------------------------------------------------------------------

def test_catalogue_is_large_and_well_formed():
    assert len(STANDING) >= 50
    ids = [e["id"] for e in ERRATA]
    assert len(ids) == len(set(ids)), "duplicate IDs"
    for e in STANDING:
        assert ID.match(e["id"]) and e["id"][1:4] in CATALOGUE["sources"], e["id"]
        assert set(e) <= set(STANDING_FIELDS) | {"evidence"}, (e["id"], set(e) - set(STANDING_FIELDS))
        assert e["category"] in CATEGORIES, (e["id"], e["category"])
        assert e["severity"] in SEVERITIES, (e["id"], e["severity"])
        assert e.get("evidence", "cell") in {"cell", "citation"}, e["id"]
        for field in STANDING_FIELDS:
            assert str(e.get(field, "")).strip(), (e["id"], field)
    for e in WITHDRAWN:
        assert ID.match(e["id"]) and e["id"][1:4] in CATALOGUE["sources"], e["id"]
        assert set(e) == set(WITHDRAWN_FIELDS), (e["id"], set(e) ^ set(WITHDRAWN_FIELDS))
        category, _, severity = e["was"].partition(", ")
        assert category in CATEGORIES and severity in SEVERITIES, (e["id"], e["was"])
        for field in WITHDRAWN_FIELDS:
            assert str(e[field]).strip(), (e["id"], field)


def test_ids_are_numbered_in_reading_order_without_gaps():
    """Withdrawn entries keep their place: an ID never changes meaning and is never reused."""
    per_source = defaultdict(list)
    for e in ERRATA:
        source, number = ID.match(e["id"]).groups()
        per_source[source].append(int(number))
    for source, numbers in per_source.items():
        assert numbers == list(range(1, len(numbers) + 1)), f"source {source}: {numbers}"


def test_citation_only_entries_are_few_and_name_a_publication():
    cited = [e for e in STANDING if e.get("evidence") == "citation"]
    assert len(cited) <= 5, [e["id"] for e in cited]
    for e in cited:
        assert re.search(r"et al\. \(?\d{4}|\(\d{4}", e["correction"] + e["wrong"]), f"{e['id']}: which publication?"


# --- quotations against the sources -------------------------------------------------------------------------------

def normalise(text: str) -> str:
    """Compare quotations without markup or layout: TeX delimiters, $, backticks, bold and all whitespace removed."""
    for mark in ("\\(", "\\)", "\\[", "\\]", "$", "`", "**"):
        text = text.replace(mark, "")
    return re.sub(r"\s+", "", text)


def fragments(quote: str) -> list[str]:
    """The verbatim pieces of a quotation: separated by " / " (separate places) or an ellipsis (an elision)."""
    return [f for f in re.split(r"…|\.\.\.| / ", quote) if len(normalise(f)) >= 4]


def test_normalise_and_fragments():
    assert normalise("位置 $i$ 和 `x[0]`") == normalise("位置 \\(i\\) 和 x[0]") == "位置i和x[0]"
    assert [normalise(f) for f in fragments("abcd … efgh / ijkl ... mn")] == ["abcd", "efgh", "ijkl"]


@pytest.fixture(scope="module")
def source_texts():
    if not SOURCES_DIR.is_dir():
        pytest.skip("the source documents are not beside this checkout")
    return {k: normalise((SOURCES_DIR / v["file"]).read_text(encoding="utf-8"))
            for k, v in CATALOGUE["sources"].items()}


def test_every_quoted_fragment_occurs_verbatim_in_its_source(source_texts):
    for e in ERRATA:
        text = source_texts[e["id"][1:4]]
        pieces = fragments(e["quote"]) + (fragments(e["context"]) if "context" in e else [])
        assert pieces, f"{e['id']}: nothing quoted"
        for piece in pieces:
            assert normalise(piece) in text, f"{e['id']}: not found verbatim in the source: {piece!r}"


def test_withdrawn_entries_quote_the_whole_sentence(source_texts):
    """The reason for a withdrawal is judged on the full sentence, which the entry carries and which contains the quote."""
    for e in WITHDRAWN:
        for piece in fragments(e["quote"]):
            assert normalise(piece) in normalise(e["context"]), f"{e['id']}: the quote is not inside its context"


# --- the two languages ----------------------------------------------------------------------------------------------

MATH_OR_CODE = re.compile(r"\$[^$]*\$|`[^`]*`")
LATIN_WORDS = re.compile(r"[A-Za-z]{4,}")
CHINESE_FIELDS = {"standing": ("correction_zh", "explanation_zh"), "withdrawn": ("withdrawn_zh",)}
ENGLISH_FIELDS = {"standing": ("wrong", "correction"), "withdrawn": ("previously", "withdrawn")}


def kind(e) -> str:
    return "withdrawn" if e.get("status") == "withdrawn" else "standing"


def prose(text: str) -> str:
    """Text without its formulas and code."""
    return MATH_OR_CODE.sub(" ", text)


def test_every_entry_has_its_chinese_fields_written_in_chinese():
    for e in ERRATA:
        for field in CHINESE_FIELDS[kind(e)]:
            text = str(e.get(field) or "").strip()
            assert text, f"{e['id']}: {field} is missing or empty"
            assert "\n" not in text, f"{e['id']}: {field} is one line"
            words = prose(text)
            assert len(CJK.findall(words)) >= 10, f"{e['id']}: {field} must be written in Chinese"
            assert len(CJK.findall(words)) > 2 * len(LATIN_WORDS.findall(words)), f"{e['id']}: {field} is mostly not Chinese"


def test_english_fields_stay_english():
    for e in ERRATA:
        for field in ENGLISH_FIELDS[kind(e)]:
            assert not CJK.search(str(e[field])), (e["id"], field)


def test_a_missing_chinese_field_is_caught():
    """The check above is able to fail: drop one field of a copy and it must complain."""
    broken = copy.deepcopy(STANDING[0])
    broken["explanation_zh"] = " "
    with pytest.raises(AssertionError):
        for field in CHINESE_FIELDS["standing"]:
            assert str(broken.get(field) or "").strip()


# The glossary (book/part1/notation.md) fixes one Chinese term per concept; the catalogue uses it consistently.
GLOSSARY_TERMS = [
    (re.compile(r"equivariant", re.I), "排列等变"),
    (re.compile(r"extrapolat", re.I), "外推"),
    (re.compile(r"\blearned (table|position)", re.I), "学习位置编码"),
]
# Variants the glossary lists as the sources' alternatives; the catalogue's own Chinese uses the first form.
# A variant may appear inside Chinese quotation marks (quoting the source).
NON_GLOSSARY_VARIANTS = ["置换不变", "置换等变", "位置編碼", "詞嵌入"]


def test_chinese_text_uses_the_glossary_terms():
    glossary = (ROOT / "book" / "part1" / "notation.md").read_text(encoding="utf-8")
    for _, term in GLOSSARY_TERMS:
        assert term in glossary, f"{term} is not a glossary term"
    for e in ERRATA:
        english = " ".join(str(e[f]) for f in ENGLISH_FIELDS[kind(e)] if f != "previously")  # the old text is not translated
        chinese = " ".join(str(e[f]) for f in CHINESE_FIELDS[kind(e)])
        for cue, term in GLOSSARY_TERMS:
            if cue.search(english):
                assert term in chinese, f"{e['id']}: the English speaks of {cue.pattern}; the Chinese should say {term}"
        unquoted = re.sub(r"“[^”]*”", "", chinese)
        for variant in NON_GLOSSARY_VARIANTS:
            assert variant not in unquoted, f"{e['id']}: use the glossary's term instead of {variant}"


CHAPTER_REFERENCE = re.compile(r"“(?!\{doc\})([^”]+)”(（[^）]+）)?一章")
CHAPTER_ROLE = re.compile(r"“\{doc\}`(/book/[\w/]+)`”一章")


def test_chinese_chapter_references_are_links_whose_title_follows_the_edition():
    """A chapter named in a Chinese field is a {doc} link: the Chinese edition shows its Chinese title (the one in
    the sidebar), the English edition its English one; never an English title inside Chinese prose (issue 36, M2)."""
    docs = {"/" + p.relative_to(ROOT).with_suffix("").as_posix() for p in book_tools.toc_notebooks()}
    references = 0
    for e in ERRATA:
        for field in CHINESE_FIELDS[kind(e)]:
            assert not CHAPTER_REFERENCE.search(e[field]), f"{e['id']}: name the chapter with {{doc}}, not its title"
            for target in CHAPTER_ROLE.findall(e[field]):
                references += 1
                assert target in docs, f"{e['id']}: {target} is not a chapter of the book"
            assert e[field].count("{doc}") == len(CHAPTER_ROLE.findall(e[field])), \
                f"{e['id']}: a chapter link is written “{{doc}}`/book/...`”一章"
    assert references >= 10


def test_math_is_written_for_mathjax():
    """TeX only inside $...$, balanced dollars, and no plain-text formula symbols outside math."""
    for e in ERRATA:
        for field in ("quote", "wrong", "correction", "correction_zh", "explanation_zh", "context", "previously",
                      "withdrawn", "withdrawn_zh"):
            text = str(e.get(field) or "")
            assert text.count("$") % 2 == 0, (e["id"], field, "unbalanced $")
            outside = prose(text)
            assert not re.search(r"\\[A-Za-z]+|\\[()]", outside), (e["id"], field, "TeX outside $...$")
            assert not re.search(r"[√Σωθ⟨⟩≈≠]", outside), (e["id"], field, "a formula symbol outside $...$")


# --- callouts in the chapters ---------------------------------------------------------------------------------------

ADMONITION = re.compile(r"^(\s*)(`{3,}|:{3,})\{admonition\}\s*(Errat(?:um|a)\b[^\n]*)$")
OPENING = re.compile(r"^\s*(`{3,}|:{3,})\{([^}]+)\}(.*)$")
CLOSING = re.compile(r"^\s*(`{3,}|:{3,})\s*$")
OPTION = re.compile(r"^\s*:class:\s*(.*)$")
LABEL = re.compile(r"^\(erratum-(e\d{3}-\d{2})\)=\s*$", re.M)
HIDING_DIRECTIVES = {"exercise", "solution", "prf:proof", "proof", "dropdown", "toggle", "exercise-start",
                     "solution-start"}
FOLDING_CLASSES = {"dropdown", "toggle"}
GATE_START = {"solution-start": "solution", "exercise-start": "exercise"}
GATE_END = {"solution-end": "solution", "exercise-end": "exercise"}


def scan_notebook(cells: list[dict]) -> list[dict]:
    """Every erratum admonition in a notebook, with what encloses it.

    Returns one record per admonition: the IDs in its title, the cell index, its labels, the enclosing directives (with
    their classes), the gated blocks (solution/exercise start...end) it sits in, and its cell's tags."""
    found = []
    gates: set[str] = set()
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        source = "".join(cell["source"])
        stack: list[dict] = []
        for line in source.split("\n"):
            admonition = ADMONITION.match(line)
            opening = OPENING.match(line)
            closing = CLOSING.match(line)
            if admonition:
                title = admonition.group(3)
                found.append({
                    "ids": [i.upper() for i in re.findall(r"E\d{3}-\d{2}", title.split(":")[0], re.I)],
                    "title": title, "cell": index, "labels": [lab.upper() for lab in LABEL.findall(source)],
                    "enclosing": [dict(d) for d in stack], "gates": set(gates),
                    "tags": list(cell.get("metadata", {}).get("tags", [])),
                })
            if opening:
                name = opening.group(2).strip().split()[0]
                if name in GATE_START:
                    gates.add(GATE_START[name])
                if name in GATE_END:
                    gates.discard(GATE_END[name])
                stack.append({"fence": opening.group(1), "name": name, "classes": set()})
            elif closing and stack:
                fence = closing.group(1)
                for depth in range(len(stack) - 1, -1, -1):
                    if stack[depth]["fence"][0] == fence[0] and len(fence) >= len(stack[depth]["fence"]):
                        del stack[depth:]
                        break
            else:
                option = OPTION.match(line)
                if option and stack:
                    stack[-1]["classes"] |= set(option.group(1).split())
    return found


def hidden_by(record: dict) -> list[str]:
    """Why a callout would be invisible, folded under another title, or dropped from a student edition ([] if not)."""
    reasons = [f"inside a {gate}" for gate in sorted(record["gates"])]
    for directive in record["enclosing"]:
        if directive["name"] in HIDING_DIRECTIVES or directive["classes"] & FOLDING_CLASSES:
            reasons.append(f"nested in {{{directive['name']}}} {sorted(directive['classes'])}")
    reasons += [f"cell tagged {t}" for t in record["tags"] if t.startswith(("remove", "hide"))]
    return reasons


@lru_cache(maxsize=None)
def notebooks() -> dict[str, list[dict]]:
    return {path.relative_to(ROOT).as_posix(): json.loads(path.read_text(encoding="utf-8"))["cells"]
            for path in book_tools.toc_notebooks() if path.name != "errata.ipynb"}


@lru_cache(maxsize=None)
def callouts() -> dict[str, list[tuple[str, dict]]]:
    """Erratum IDs named in callout titles -> [(notebook, record)]."""
    found: dict[str, list] = defaultdict(list)
    for name, cells in notebooks().items():
        for record in scan_notebook(cells):
            for erratum in record["ids"]:
                found[erratum].append((name, record))
    return found


def test_scanner_finds_what_hides_a_callout():
    """The placement check can fail: a callout inside a solution, an exercise, a proof or a fold is reported."""
    callout = "(erratum-e999-01)=\n:::{admonition} Erratum E999-01: t\n:class: warning erratum dropdown\nx\n:::"
    cases = {
        "visible": ([callout], []),
        "solution": (["```{solution-start} ex\n:class: dropdown\n```", callout, "```{solution-end}\n```"], ["inside a solution"]),
        "exercise": (["````{exercise}\n:label: ex\n" + callout + "\n````"], ["nested in {exercise} []"]),
        "proof": (["````{prf:proof}\n" + callout + "\n````"], ["nested in {prf:proof} []"]),
        "fold": (["::::{admonition} More\n:class: dropdown\n" + callout + "\n::::"], ["nested in {admonition} ['dropdown']"]),
    }
    for name, (sources, expected) in cases.items():
        cells = [{"cell_type": "markdown", "source": s, "metadata": {}} for s in sources]
        records = scan_notebook(cells)
        assert [r["ids"] for r in records] == [["E999-01"]], name
        assert hidden_by(records[0]) == expected, name
    tagged = [{"cell_type": "markdown", "source": callout, "metadata": {"tags": ["hide-cell"]}}]
    assert hidden_by(scan_notebook(tagged)[0]) == ["cell tagged hide-cell"]


def test_every_standing_erratum_has_a_callout():
    missing = sorted({e["id"] for e in STANDING} - set(callouts()))
    assert not missing, f"catalogued but not called out in any chapter: {missing}"


def test_every_callout_is_a_standing_catalogue_entry():
    withdrawn = {e["id"] for e in WITHDRAWN}
    unknown = sorted(set(callouts()) - {e["id"] for e in ERRATA})
    assert not unknown, f"called out but not in the catalogue: {unknown}"
    still_called_out = {i: [n for n, _ in v] for i, v in callouts().items() if i in withdrawn}
    assert not still_called_out, f"withdrawn entries must have no callout: {still_called_out}"


def test_withdrawn_entries_have_no_label_anywhere():
    withdrawn = {e["id"].lower() for e in WITHDRAWN}
    for name, cells in notebooks().items():
        for cell in cells:
            if cell["cell_type"] == "markdown":
                labels = set(LABEL.findall("".join(cell["source"])))
                assert not labels & withdrawn, f"{name}: labels of withdrawn entries {sorted(labels & withdrawn)}"


def test_each_erratum_is_called_out_once():
    repeated = {k: [n for n, _ in v] for k, v in callouts().items() if len(v) > 1}
    assert not repeated, f"callouts repeated: {repeated}"


def test_every_callout_has_its_labels():
    for erratum, places in callouts().items():
        for name, record in places:
            assert erratum in record["labels"], f"{erratum} in {name} has no label (erratum-{erratum.lower()})="


def test_no_callout_is_hidden_in_a_solution_an_exercise_a_proof_or_a_fold():
    problems = {f"{erratum} in {name}": hidden_by(record)
                for erratum, places in callouts().items() for name, record in places if hidden_by(record)}
    assert not problems, problems


# --- evidence cells -------------------------------------------------------------------------------------------------

def evidence_tag(erratum: str) -> str:
    return f"erratum-{erratum.lower()}"


def solution_code_cells(cells: list[dict]) -> set[int]:
    """Indices of code cells that a student edition treats as part of a worked solution."""
    inside, gated = set(), False
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).split("\n"):
                if re.match(r"^```\{solution-start\}", line):
                    gated = True
                elif re.match(r"^```\{solution-end\}", line):
                    gated = False
        elif gated or "solution" in cell.get("metadata", {}).get("tags", []):
            inside.add(index)
    return inside


def evidence_cells(name: str, erratum: str) -> list[tuple[int, dict]]:
    cells = notebooks()[name]
    return [(i, c) for i, c in enumerate(cells)
            if c["cell_type"] == "code" and evidence_tag(erratum) in c.get("metadata", {}).get("tags", [])]


def asserts_something(source: str) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython syntax (magics): fall back to the text
        return bool(re.search(r"^\s*assert\b", source, re.M))
    return any(isinstance(node, ast.Assert) for node in ast.walk(tree))


def test_every_standing_erratum_has_a_visible_evidence_cell_that_asserts():
    problems = []
    for e in STANDING:
        if e.get("evidence") == "citation" or e["id"] not in callouts():
            continue
        for name, _ in callouts()[e["id"]]:
            found = evidence_cells(name, e["id"])
            if not found:
                problems.append(f"{e['id']}: no code cell tagged {evidence_tag(e['id'])} in {name}")
            in_solution = solution_code_cells(notebooks()[name])
            for index, cell in found:
                tags = cell.get("metadata", {}).get("tags", [])
                if not asserts_something("".join(cell["source"])):
                    problems.append(f"{e['id']}: evidence cell {cell.get('id')} in {name} asserts nothing")
                if any(t.startswith(("remove", "hide")) for t in tags):
                    problems.append(f"{e['id']}: evidence cell {cell.get('id')} in {name} is hidden ({tags})")
                if index in in_solution:
                    problems.append(f"{e['id']}: evidence cell {cell.get('id')} in {name} is part of a solution")
    assert not problems, "\n".join(problems)


def test_evidence_tags_name_standing_errata_only():
    known = {evidence_tag(e["id"]) for e in STANDING}
    for name, cells in notebooks().items():
        for cell in cells:
            for tag in cell.get("metadata", {}).get("tags", []):
                if re.fullmatch(r"erratum-e\d{3}-\d{2}", tag):
                    assert tag in known, f"{name}: cell {cell.get('id')} is tagged {tag}, which is not a standing erratum"


# --- the student editions --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("keep_outputs", [False, True], ids=["workbook", "student-book"])
def test_student_editions_keep_every_callout_and_evidence_cell(keep_outputs):
    """make_student_notebook (the workbook, and with keep_outputs the student edition of the book) drops solutions; it
    must drop no callout and no evidence cell."""
    problems = []
    for name in sorted(notebooks()):
        nb = nbformat.read(ROOT / name, as_version=4)
        student = make_student_notebook(nb, keep_outputs=keep_outputs)
        student_markdown = "\n".join(c.source for c in student.cells if c.cell_type == "markdown")
        student_code = {c.get("id"): c for c in student.cells if c.cell_type == "code"}
        for record in scan_notebook(json.loads((ROOT / name).read_text(encoding="utf-8"))["cells"]):
            for erratum in record["ids"]:
                if f"(erratum-{erratum.lower()})=" not in student_markdown or record["title"] not in student_markdown:
                    problems.append(f"{name}: the student edition drops the callout of {erratum}")
        for cell in nb.cells:
            tags = [t for t in cell.metadata.get("tags", []) if re.fullmatch(r"erratum-e\d{3}-\d{2}", t)]
            if cell.cell_type != "code" or not tags:
                continue
            kept = student_code.get(cell.get("id"))
            if kept is None or kept.source != cell.source:
                problems.append(f"{name}: the student edition drops or changes evidence cell {cell.get('id')} ({tags})")
            elif keep_outputs and kept.get("outputs") != cell.get("outputs"):
                problems.append(f"{name}: the student edition of the book drops the output of evidence cell {cell.get('id')}")
    assert not problems, "\n".join(problems)


def test_student_edition_check_can_fail():
    """A callout and an evidence cell inside a worked solution are what the student edition removes."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("```{solution-start} ex\n:class: dropdown\n```"),
        nbformat.v4.new_markdown_cell("(erratum-e999-01)=\n:::{admonition} Erratum E999-01: t\nx\n:::"),
        nbformat.v4.new_code_cell("assert True", metadata={"tags": ["erratum-e999-01"]}),
        nbformat.v4.new_markdown_cell("```{solution-end}\n```"),
    ])
    student = make_student_notebook(nb, keep_outputs=True)
    assert "(erratum-e999-01)=" not in "\n".join(c.source for c in student.cells)
    assert not [c for c in student.cells if c.cell_type == "code"]
    assert scan_notebook(json.loads(nbformat.writes(nb))["cells"])[0]["gates"] == {"solution"}


# --- the errata chapter ----------------------------------------------------------------------------------------------

ERRATA_NB = ROOT / "book" / "reference" / "errata.ipynb"


@lru_cache(maxsize=None)
def errata_chapter() -> dict:
    return json.loads(ERRATA_NB.read_text(encoding="utf-8"))


def rendered_catalogue() -> str:
    return "\n".join(
        "".join(o.get("data", {}).get("text/markdown", ""))
        for c in errata_chapter()["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
    )


def _shown(text: str) -> str:
    """Markdown text as words: bold written as **...** or as the {strong} role (the chapter writes the sources' bold as
    the role, which also works beside Chinese punctuation) reads the same."""
    return re.sub(r"\{strong\}`([^`]*)`", r"\1", text).replace("**", "")


def test_the_errata_chapter_renders_every_entry_in_both_languages():
    rendered = rendered_catalogue()
    for e in STANDING:
        assert f"**{e['id']}** · {e['category']} · {e['severity']} severity" in rendered, e["id"]
        for field in ("wrong", "correction", "correction_zh", "explanation_zh"):
            assert e[field] in rendered, f"{e['id']}: {field} not rendered"
    for e in WITHDRAWN:
        assert f"**{e['id']}** · *withdrawn*" in rendered, e["id"]
        for field in ("withdrawn", "withdrawn_zh", "context"):
            assert _shown(e[field]) in _shown(rendered), f"{e['id']}: {field} not rendered"
        assert f"<erratum-{e['id'].lower()}>" not in rendered, f"{e['id']}: a withdrawn entry links to no callout"


def test_the_errata_chapter_states_the_rules():
    intro = "".join(errata_chapter()["cells"][0]["source"])
    for phrase in ("**Severity**", "*high*", "*medium*", "*low*", "**What counts as an erratum.**", "withdrawn"):
        assert phrase in intro, phrase


def test_the_errata_chapter_reads_as_a_page():
    """One section per source in the page's navigation, no rendering code shown, no quotation turned into a heading,
    and no raw TeX delimiters: MyST math is $...$."""
    cells = errata_chapter()["cells"]
    headings = [line for c in cells if c["cell_type"] == "markdown" for line in "".join(c["source"]).split("\n")
                if line.startswith("## ")]
    for key in CATALOGUE["sources"]:
        assert any(h.startswith(f"## Source {key}") for h in headings), f"no section heading for source {key}"
    code = [c for c in cells if c["cell_type"] == "code"]
    assert "hide-input" in code[0]["metadata"].get("tags", [])
    for c in code[1:]:
        assert "remove-input" in c["metadata"].get("tags", []), f"cell {c.get('id')} shows its code"
    rendered = rendered_catalogue()
    assert not re.search(r"^>\s*#", rendered, re.M), "a quotation opens with '#', which MyST turns into a heading"
    assert not re.search(r"^#{1,6} ", rendered, re.M), "rendered markdown contains a heading (not in the navigation)"
    assert "\\(" not in rendered and "\\)" not in rendered, "raw TeX delimiters in the rendered catalogue"
    page_text = "".join("".join(c["source"]) for c in cells)
    assert "\\(" not in page_text, "raw TeX delimiters in the page's own text or code"


def test_e002_04_evaluates_the_quoted_formula_itself():
    """E002-04's evidence cell evaluates a formula typed into the notebook; it proves the erratum only if that string
    is the source's text. The catalogue's quote is checked verbatim against source 002 above, so the cell's string must
    equal the quote (without its math delimiters)."""
    quote = next(e for e in ERRATA if e["id"] == "E002-04")["quote"].strip("$").strip()
    nb = nbformat.read(ROOT / "book" / "part1" / "model_input.ipynb", as_version=4)
    cells = [c for c in nb.cells if "erratum-e002-04" in c.metadata.get("tags", [])]
    assert len(cells) == 1
    typed = re.search(r'^source_002_formula = "([^"]*)"', cells[0].source, re.M)
    assert typed, "the evidence cell no longer names the source's formula source_002_formula"
    assert typed.group(1) == quote, (typed.group(1), quote)


def test_withdrawn_entries_have_their_own_section_after_the_standing_ones():
    """A reader meets the standing errata first (E000-01, withdrawn, used to open the catalogue), and no quotation
    keeps the sources' Markdown bold as asterisks."""
    rendered = rendered_catalogue()
    heads = re.findall(r"^\*\*(E\d{3}-\d{2})\*\* · (\*withdrawn\*)?", rendered, re.M)
    kinds = ["withdrawn" if w else "standing" for _, w in heads]
    assert kinds == sorted(kinds, key=lambda k: k == "withdrawn") and "withdrawn" in kinds, kinds
    quotes = [line for line in rendered.splitlines() if line.startswith("> ")]
    assert quotes and not [q for q in quotes if "**" in re.sub(r"`[^`]*`", "", q)]  # code (10000 ** x) stays code
    headings = ["".join(c["source"]) for c in errata_chapter()["cells"] if c["cell_type"] == "markdown"]
    assert any(h.startswith("## Withdrawn entries") for h in headings)
