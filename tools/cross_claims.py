"""Cross-chapter claims: what one chapter says another chapter shows or trains must be tied to that chapter.

    python tools/cross_claims.py                 # the untied claims of every TOC page (exit status 1 if any)
    python tools/cross_claims.py --all [PAGE ...]  # every cross-chapter claim, tied or not, with its ties

A review found a chapter stating "No chapter of this book trains a model with T5's bias" while Part III trains one,
and the same chapter claiming an ordering of Part III's results that Part III does not assert. Such a sentence is
checked by nothing: the chapter it describes can change, or never said it. The rule this module enforces:

    Every sentence of a page that states what *another* chapter shows, measures, trains, finds or proves carries, in
    the same sentence, a **tie** into that chapter:

    * a value glued there, pasted with myst-nb's cross-document glue,
      ``{glue:text}`../part3/extrapolation.ipynb::gap_t5:+.3f``` (the number is the chapter's own output: the book's
      build fails if the record disappears, and nbval re-runs the cell that computes it, with its assertions); or
    * a reference to a statement proved there, ``{prf:ref}`thm-rope-relative``` (a theorem, proposition, lemma,
      corollary or definition: the chapter proves it and checks it numerically).

A sentence *refers to another chapter* when it links one ({ref}, {numref}, {doc}, or {prf:ref} to a label defined
there), names a part of the book that does not contain the page ("Part III"), names a chapter ("the sinusoidal
chapter", "the next chapter"), or speaks for the whole book ("no chapter", "the rest of the course", "this book does
not ..."). It *states what the chapter shows or trains* when the same clause (a sentence cut at ';' and ': ') also has a
verb of evidence (trains, measures, finds, shows, compares, counts, tests, checks, proves, reports, degrades, ...).
Navigation ("{ref}`ch-x` treats ...", "see Part III") needs no tie. A claim about the whole book ("no chapter trains
...") can be tied to no single chapter: say which chapter, and tie it. A sentence that says the other chapter
*asserts* something needs a value glued by a cell with an ``assert``.

The errata entries (book/reference/errata.yml) are prose of the errata chapter, rendered by code where no glue role
works: an entry's claim about a chapter is tied by the entry's evidence cell there (tag ``erratum-eXXX-yy``) or by a
number that is, as printed, a value glued there.

Detection is lexical and errs on the side of asking: a sentence it flags is either tied or reworded so that it states
no result of another chapter. ``tests/test_cross_chapter_claims.py`` runs it over every TOC page and errata.yml.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import book_tools  # noqa: E402

GLUE_RECORD = "application/papermill.record/text/plain"

# ------------------------------------------------------------------------------------------------ the book's map


@dataclass(frozen=True)
class Page:
    path: Path  # absolute
    part: str  # the TOC caption of its part ("Part III: Long sequences"), "" for the root page

    @property
    def rel(self) -> str:
        return self.path.relative_to(ROOT).as_posix()


@lru_cache(maxsize=1)
def pages() -> tuple[Page, ...]:
    """Every TOC page in reading order, with the caption of the part it belongs to."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = book_tools.toc_files()
    by_name = {}
    for path in files:
        by_name[path.relative_to(ROOT).with_suffix("").as_posix()] = path
    out = [Page(files[0], "")]
    for part in toc.get("parts", []):
        for entry in part.get("chapters", []):
            out.append(Page(by_name[entry["file"]], part.get("caption", "")))
    return tuple(out)


_PART_NUMERAL = re.compile(r"^Part (I{1,3}|IV)\b")


def part_name(page: Page) -> str:
    """"Part III" for a page of Part III; "Foundations"; "Reference"; "" for the root."""
    m = _PART_NUMERAL.match(page.part)
    return f"Part {m.group(1)}" if m else page.part


_LABEL_LINE = re.compile(r"^\(([\w.-]+)\)=\s*$", re.M)
_DIRECTIVE_LABEL = re.compile(r"^:label:\s*([\w.-]+)\s*$", re.M)
_PROOF_DIRECTIVE = re.compile(r"^(`{3,}|:{3,})\{prf:(\w+)\}[^\n]*\n((?::[^\n]*\n)*)", re.M)
PROVED_KINDS = {"theorem", "proposition", "lemma", "corollary", "definition", "conjecture"}


def markdown_cells(path: Path) -> list[tuple[int, str]]:
    """(cell index, markdown text) of a notebook; (0, text) of a .md page."""
    if path.suffix == ".ipynb":
        nb = json.loads(path.read_text(encoding="utf-8"))
        return [(i, "".join(c["source"])) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"]
    return [(0, path.read_text(encoding="utf-8"))]


@lru_cache(maxsize=1)
def labels() -> dict[str, tuple[Path, str]]:
    """label -> (the page that defines it, its kind: "target" for ``(label)=``, else the prf directive's kind)."""
    out: dict[str, tuple[Path, str]] = {}
    for page in pages():
        for _, text in markdown_cells(page.path):
            for m in _LABEL_LINE.finditer(text):
                out[m.group(1)] = (page.path, "target")
            for m in _PROOF_DIRECTIVE.finditer(text):
                label = _DIRECTIVE_LABEL.search(m.group(3))
                if label:
                    out[label.group(1)] = (page.path, m.group(2))
            for m in _DIRECTIVE_LABEL.finditer(text):  # exercises, solutions, figures: any other labelled directive
                out.setdefault(m.group(1), (page.path, "target"))
    return out


@lru_cache(maxsize=None)
def glue_records(path: Path) -> dict[str, str]:
    """The glue records a notebook stores: {name: text/plain value}."""
    if path.suffix != ".ipynb" or not path.is_file():
        return {}
    nb = json.loads(path.read_text(encoding="utf-8"))
    out = {}
    for cell in nb["cells"]:
        for output in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            if name is not None and GLUE_RECORD in output.get("data", {}):
                out[name] = output["data"][GLUE_RECORD]
    return out


@lru_cache(maxsize=None)
def asserted_glue(path: Path) -> frozenset[str]:
    """The glue records of a notebook that come from a cell with an ``assert`` statement."""
    if path.suffix != ".ipynb" or not path.is_file():
        return frozenset()
    nb = json.loads(path.read_text(encoding="utf-8"))
    out = set()
    for cell in nb["cells"]:
        if cell["cell_type"] != "code" or not re.search(r"^\s*assert\b", "".join(cell["source"]), re.M):
            continue
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            if name is not None:
                out.add(name)
    return frozenset(out)


def _chapter_names() -> dict[str, Path]:
    """Names by which prose calls a chapter ("the sinusoidal chapter", "the worked-example chapter")."""
    names: dict[str, Path] = {}
    for page in pages():
        stem = page.path.stem
        for variant in {stem, stem.replace("_", " "), stem.replace("_", "-")}:
            names[variant.lower()] = page.path
    extra = {  # the names the prose uses besides the file names
        "foundations": "book/foundations/why_order.ipynb",
        "implementation": "book/part2/rope_implementation.ipynb",
        "rope implementation": "book/part2/rope_implementation.ipynb",
        "rope proof": "book/part2/rope_proof.ipynb",
        "proof": "book/part2/rope_proof.ipynb",
        "generation": "book/part2/generation.ipynb",
        "context-extension": "book/part3/context_extension.ipynb",
        "context extension": "book/part3/context_extension.ipynb",
        "shift-theorem": "book/part1/shift_theorem.ipynb",
        "shift theorem": "book/part1/shift_theorem.ipynb",
        "errata": "book/reference/errata.ipynb",
        "learned-beyond": "book/part3/learned_beyond.ipynb",
        "today's models": "book/part4/todays_models.ipynb",
    }
    for name, rel in extra.items():
        if (ROOT / rel).is_file():
            names[name] = ROOT / rel
    return names


# ---------------------------------------------------------------------------------------------- prose segments


@dataclass
class Sentence:
    page: Path
    cell: int  # the markdown cell's index; -1 for a sentence of an errata entry
    text: str
    erratum: str = ""  # the entry's ID, for a sentence of book/reference/errata.yml (rendered by the errata chapter)


_FENCE_OPEN = re.compile(r"^\s*(`{3,}|~{3,}|:{3,})\s*(\{[\w:-]+\})?(.*)$")
_NON_PROSE_DIRECTIVES = {"{code-cell}", "{math}", "{glue:figure}", "{glue:math}", "{code-block}", "{code}",
                         "{footbibliography}", "{bibliography}", "{tableofcontents}", "{raw}", "{eval-rst}",
                         "{solution-start}", "{solution-end}", "{toctree}", "{list-table}"}


def prose_blocks(text: str) -> list[str]:
    """The prose of a markdown text as blocks (paragraphs, list items, table cells, directive bodies).

    Code blocks, math blocks, directive options and label lines are dropped; inline roles, code and math stay."""
    lines = text.splitlines()
    blocks: list[str] = []
    current: list[str] = []
    fences: list[tuple[str, bool]] = []  # open fences: (closing marker, whether its body is prose)

    def flush():
        if current:
            blocks.append(" ".join(s.strip() for s in current).strip())
            current.clear()

    in_math = False
    for line in lines:
        stripped = line.strip()
        prose_here = all(p for _, p in fences)
        if fences and stripped and stripped == fences[-1][0][: len(stripped)] and set(stripped) == {fences[-1][0][0]} \
                and len(stripped) >= len(fences[-1][0]):
            flush()
            fences.pop()
            continue
        m = _FENCE_OPEN.match(line)
        if m and not in_math:
            flush()
            marker, directive = m.group(1), m.group(2)
            prose = prose_here and directive is not None and directive not in _NON_PROSE_DIRECTIVES
            fences.append((marker, prose))
            # a directive's argument is its title: prose (an admonition's title, a theorem's name)
            if prose and m.group(3).strip():
                blocks.append(m.group(3).strip())
            continue
        if not prose_here:
            continue
        if stripped.startswith("$$"):
            flush()
            if not (len(stripped) > 2 and stripped.endswith("$$") and stripped != "$$"):
                in_math = not in_math
            continue
        if in_math:
            continue
        if not stripped or _LABEL_LINE.match(stripped) or re.match(r"^:[\w-]+:", stripped):
            flush()
            continue
        if stripped.startswith("|"):
            flush()
            if re.fullmatch(r"\|[\s:|-]+\|?", stripped):
                continue
            blocks.extend(cell.strip() for cell in stripped.strip("|").split("|") if cell.strip())
            continue
        if re.match(r"^(#{1,6}\s|[-*+]\s|\d+\.\s)", stripped):
            flush()
            stripped = re.sub(r"^(#{1,6}\s|[-*+]\s|\d+\.\s)", "", stripped)
        current.append(stripped)
    flush()
    return [b for b in blocks if b]


_PROTECT = re.compile(r"\{[\w:-]+\}`[^`]*`|`[^`]*`|\$\$.*?\$\$|\$[^$]+\$")
_ABBREVIATIONS = ("e.g.", "i.e.", "et al.", "cf.", "Fig.", "Figs.", "Eq.", "Eqs.", "vs.", "approx.", "No.", "resp.",
                  "Sec.", "Ch.", "Tab.", "etc.")


def sentences(block: str) -> list[str]:
    """Split a prose block into sentences; roles, inline code and inline math are never split."""
    protected: list[str] = []

    def keep(m: re.Match) -> str:
        protected.append(m.group(0))
        return f"\x00{len(protected) - 1}\x00"

    text = _PROTECT.sub(keep, block)
    for i, abbreviation in enumerate(_ABBREVIATIONS):
        text = text.replace(abbreviation, abbreviation.replace(".", f"\x01{i}\x01"))
    parts = re.split(r"(?<=[.!?])[\"')\]*]*\s+(?=[A-Z(*\"\x00{`$]|\d)", text)
    out = []
    for part in parts:
        part = re.sub(r"\x01\d+\x01", ".", part)
        part = re.sub(r"\x00(\d+)\x00", lambda m: protected[int(m.group(1))], part)
        if part.strip():
            out.append(part.strip())
    return out


def page_sentences(path: Path) -> list[Sentence]:
    return [Sentence(path, cell, s) for cell, text in markdown_cells(path) for block in prose_blocks(text)
            for s in sentences(block)]


ERRATA_YAML = ROOT / "book" / "reference" / "errata.yml"
ERRATA_PAGE = ROOT / "book" / "reference" / "errata.ipynb"
ERRATA_PROSE_FIELDS = ("wrong", "correction", "withdrawn")  # not "previously": shown as what a withdrawn entry used to say


def errata_sentences() -> list[Sentence]:
    """The English prose of the errata entries, which the errata chapter renders (its markdown is generated)."""
    catalogue = yaml.safe_load(ERRATA_YAML.read_text(encoding="utf-8"))
    return [Sentence(ERRATA_PAGE, -1, s, entry["id"]) for entry in catalogue["errata"]
            for name in ERRATA_PROSE_FIELDS if entry.get(name) for block in prose_blocks(str(entry[name]))
            for s in sentences(block)]


@lru_cache(maxsize=None)
def evidence_tags(path: Path) -> frozenset[str]:
    """The ``erratum-eXXX-yy`` tags of a notebook's code cells (its evidence cells)."""
    if path.suffix != ".ipynb":
        return frozenset()
    nb = json.loads(path.read_text(encoding="utf-8"))
    return frozenset(t for c in nb["cells"] if c["cell_type"] == "code" for t in c.get("metadata", {}).get("tags", [])
                     if t.startswith("erratum-"))


# ------------------------------------------------------------------------------------------- claims and ties

_ROLE = re.compile(r"\{(ref|numref|doc|prf:ref|eq)\}`([^`]+)`")
_GLUE = re.compile(r"\{glue(?::text|:md|:math|:figure|:any|)\}`([^`]+)`")
_PART = re.compile(r"\bPart (IV|I{1,3})\b|\bFoundations\b")
_NAMED_CHAPTER = re.compile(r"\bthe ([\w' -]{3,30}?) chapters?\b", re.I)
_NEIGHBOUR = re.compile(r"\b(?:the|an?) (next|previous|following|last|earlier|later|preceding) chapters?\b"
                        r"|\b(earlier|later|previous|following) chapters\b", re.I)
_BOOK_WIDE = re.compile(r"\b(?:no|every|any|other|another) (?:other |later |earlier )?chapters?\b"
                        r"|\bthe rest of (?:the|this) (?:book|course)\b|\b(?:else|no)where in (?:the|this) (?:book|course)\b"
                        r"|\b(?:this|the) (?:book|course) (?:does not|doesn't|never|nowhere)\b", re.I)
# verbs that state evidence: what a chapter shows, measures, trains, finds or proves
CLAIM_VERBS = re.compile(
    r"\b(?:trains|(?<!-)trained (?:a|an|the|its|two|three|\d+|one|every|each|models?)\b|(?:is|are|was|were) trained"
    r"|measur(?:es|ed)|finds|found|shows|showed|compar(?:es|ed)|count(?:s|ed)|tests|tested|checks|checked"
    r"|prov(?:es|ed|en)|reports|reported|degrad(?:es|ed?)|extrapolat(?:es|ed)|confirm(?:s|ed)|demonstrat(?:es|ed)"
    r"|asserts|asserted|outperforms?|derives|derived|learns)\b", re.I)


def _role_target(content: str) -> str:
    m = re.match(r"^(.*?)<([^<>]+)>\s*$", content, re.S)
    return (m.group(2) if m else content).strip()


def _resolve_doc(page: Path, target: str) -> Path | None:
    base = page.parent
    candidate = (ROOT / target.lstrip("/")) if target.startswith("/") else (base / target)
    for path in (candidate, candidate.with_suffix(".ipynb"), candidate.with_suffix(".md"),
                 Path(str(candidate) + ".ipynb"), Path(str(candidate) + ".md")):
        if path.is_file():
            return path.resolve()
    return None


@dataclass
class Claim:
    sentence: Sentence
    refers_to: set[Path]  # the other chapters it speaks about
    book_wide: bool  # it speaks for the whole book ("no chapter", "this book")
    verbs: list[str]
    ties: list[str] = field(default_factory=list)  # the ties found, as text
    tied_to: set[Path] = field(default_factory=set)
    says_asserted: bool = False  # the sentence says the other chapter asserts something
    asserted_tie: bool = False  # one of its glued values comes from a cell that asserts

    @property
    def tied(self) -> bool:
        """Tied into a chapter it speaks about; a sentence that says "asserts" needs a value from an asserting cell."""
        return (bool(self.tied_to & self.refers_to) and not self.book_wide
                and (self.asserted_tie or not self.says_asserted))

    def describe(self) -> str:
        about = sorted(_show(p) for p in self.refers_to)
        if self.book_wide:
            about.append("the whole book")
        where = (f"book/reference/errata.yml {self.sentence.erratum}" if self.sentence.erratum else
                 f"{_show(self.sentence.page)} cell {self.sentence.cell}")
        return (f"{where}: "
                f"{self.sentence.text!r}\n    speaks about {', '.join(about)} (verbs: {', '.join(self.verbs)}); "
                f"ties: {', '.join(self.ties) or 'none'}")


def cross_glue_roles(text: str, page: Path) -> list[tuple[str, Path | None, str, str]]:
    """(role text, the notebook it pastes from or None, key, format spec) of every cross-document glue role."""
    out = []
    for m in _GLUE.finditer(text):
        content = m.group(1)
        if "::" not in content:
            continue
        doc, rest = content.split("::", 1)
        key, _, fmt = rest.partition(":") if m.group(0).startswith("{glue:text}") else (rest, "", "")
        out.append((m.group(0), _resolve_doc(page, doc), key, fmt))
    return out


_NUMBER = re.compile(r"(?<![\w.])[+-]?\d+\.\d+(?![\w.])")


def clauses(text: str) -> list[str]:
    """A sentence cut at ';' and at ': ' (outside roles, inline code and inline math): a reference and a verb of
    evidence make a claim only within one clause ("(the chain of {ref}`ch-x`): ... (tested here)" makes none)."""
    protected: list[str] = []

    def keep(m: re.Match) -> str:
        protected.append(m.group(0))
        return f"\x00{len(protected) - 1}\x00"

    masked = _PROTECT.sub(keep, text)
    return [re.sub(r"\x00(\d+)\x00", lambda m: protected[int(m.group(1))], part)
            for part in re.split(r";|:\s", masked) if part.strip()]


def _references(clause: str, page: Path, own_part: str) -> tuple[set[Path], set[Path], list[str], bool, list[str]]:
    """(chapters it refers to, chapters a prf:ref ties, those ties, whether it speaks for the whole book, its verbs)."""
    refers: set[Path] = set()
    tied_to: set[Path] = set()
    ties: list[str] = []
    known = labels()
    for kind, content in _ROLE.findall(clause):
        target = _role_target(content)
        path = _resolve_doc(page, target) if kind == "doc" else known.get(target, (None, ""))[0]
        if path is None or path.resolve() == page:
            continue
        refers.add(path.resolve())
        if kind == "prf:ref" and known.get(target, (None, ""))[1] in PROVED_KINDS:
            ties.append(f"{{prf:ref}}`{target}`")
            tied_to.add(path.resolve())
    bare = re.sub(r"`[^`]*`", " ", _GLUE.sub(" ", _ROLE.sub(" ", clause)))
    for m in _PART.finditer(bare):
        name = m.group(0) if m.group(0) == "Foundations" else f"Part {m.group(1)}"
        if name != own_part:
            refers |= {p.path.resolve() for p in pages() if part_name(p) == name}
    names = _chapter_names()
    for m in _NAMED_CHAPTER.finditer(bare):
        name = m.group(1).lower().strip()
        if name in names and names[name].resolve() != page:
            refers.add(names[name].resolve())
    order = [p.path.resolve() for p in pages()]
    for m in _NEIGHBOUR.finditer(bare):
        if page in order:
            i = order.index(page)
            word = (m.group(1) or m.group(2)).lower()
            if word in ("next", "following", "later"):
                refers |= set(order[i + 1:i + 2] if word != "later" else order[i + 1:])
            else:
                refers |= set(order[max(i - 1, 0):i] if word in ("previous", "preceding", "last") else order[:i])
    return refers, tied_to, ties, bool(_BOOK_WIDE.search(bare)), CLAIM_VERBS.findall(bare)


def analyse(sentence: Sentence) -> Claim | None:
    """The cross-chapter claim a sentence makes, or None if it makes none.

    A clause that refers to another chapter (or to the whole book) and has a verb of evidence makes the sentence a
    claim; the ties are looked for in the whole sentence."""
    page = sentence.page.resolve()
    own = next((p for p in pages() if p.path.resolve() == page), None)
    own_part = part_name(own) if own else ""
    refers: set[Path] = set()
    ties: list[str] = []
    tied_to: set[Path] = set()
    verbs: list[str] = []
    book_wide = False
    for clause in clauses(sentence.text):
        clause_refers, clause_tied, clause_ties, clause_book, clause_verbs = _references(clause, page, own_part)
        tied_to |= clause_tied
        ties += clause_ties
        clause_refers = {p for p in clause_refers if p.suffix == ".ipynb"}  # a page without code shows nothing
        if clause_verbs and (clause_refers or clause_book):
            refers |= clause_refers
            book_wide = book_wide or clause_book
            verbs += clause_verbs
    if not verbs:
        return None
    asserted_tie = False
    for role, path, key, _ in cross_glue_roles(sentence.text, sentence.page):
        if path is not None and key in glue_records(path):
            ties.append(role)
            tied_to.add(path.resolve())
            asserted_tie = asserted_tie or key in asserted_glue(path)
    if sentence.erratum:  # errata.yml is rendered from code, where no glue role works
        for path in refers:
            if f"erratum-{sentence.erratum.lower()}" in evidence_tags(path):  # the entry's evidence cell there
                ties.append(f"evidence cell erratum-{sentence.erratum.lower()}")
                tied_to.add(path)
            for number in _NUMBER.findall(sentence.text):  # or a number that is a value glued there, as printed
                decimals = len(number.split(".")[1])
                for key, value in glue_records(path).items():
                    try:
                        if f"{float(value):+.{decimals}f}".lstrip("+") == number.lstrip("+"):
                            ties.append(f"{number} = {_show(path)}::{key}")
                            tied_to.add(path)
                            break
                    except ValueError:
                        continue
    bare = re.sub(r"`[^`]*`", " ", _GLUE.sub(" ", _ROLE.sub(" ", sentence.text)))
    says_asserted = bool(re.search(r"\bassert(?:s|ed|ion|ions)?\b", bare, re.I))
    return Claim(sentence, refers, book_wide, verbs, ties, tied_to, says_asserted, asserted_tie)


def claims(paths: list[Path] | None = None) -> list[Claim]:
    """The cross-chapter claims of ``paths`` (default: every TOC page, and the errata entries that the errata
    chapter renders)."""
    out = []
    chosen = paths or [p.path for p in pages()] + [ERRATA_YAML]
    for path in chosen:
        found = errata_sentences() if path.resolve() == ERRATA_YAML else page_sentences(path)
        for sentence in found:
            claim = analyse(sentence)
            if claim is not None:
                out.append(claim)
    return out


def _show(path: Path) -> str:
    path = path.resolve()
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def broken_glue_roles(paths: list[Path] | None = None) -> list[str]:
    """Every cross-document glue role that does not resolve to a stored record of a TOC notebook, or whose format
    spec cannot format the stored value (as myst-nb formats it)."""
    from myst_nb.core.variables import format_plain_text

    toc = {p.path.resolve() for p in pages()}
    problems = []
    for path in paths or [p.path for p in pages()]:
        for cell, text in markdown_cells(path):
            for role, target, key, fmt in cross_glue_roles(text, path):
                where = f"{_show(path)} cell {cell}: {role}"
                if role.startswith("{glue:text}") and not fmt:
                    # myst-nb 1.4 splits "path::key" at the last ':' when there is no format: the role pastes nothing
                    problems.append(f"{where}: a cross-document text role needs a format (':d', ':s', ':.2f', ...)")
                elif target is None or target.resolve() not in toc:
                    problems.append(f"{where}: no notebook of the TOC at that path")
                elif key not in glue_records(target):
                    problems.append(f"{where}: {_show(target)} stores no glue record {key!r}")
                elif fmt:
                    try:
                        format_plain_text(glue_records(target)[key], fmt)
                    except Exception as exc:  # myst-nb would warn and paste nothing
                        problems.append(f"{where}: format {fmt!r} fails on {glue_records(target)[key]!r}: {exc}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", type=Path, help="pages to scan (default: every TOC page)")
    parser.add_argument("--all", action="store_true", help="list tied claims too")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.pages] or None
    found = claims(paths)
    shown = found if args.all else [c for c in found if not c.tied]
    for claim in shown:
        print(("tied   " if claim.tied else "UNTIED ") + claim.describe())
    broken = broken_glue_roles(paths)
    for problem in broken:
        print("BROKEN " + problem)
    untied = sum(not c.tied for c in found)
    print(f"{len(found)} cross-chapter claims, {untied} untied; {len(broken)} broken cross-document glue roles")
    return 1 if untied or broken else 0


if __name__ == "__main__":
    sys.exit(main())
