"""nbgrader's ``autograde`` with course_pe's sandbox in place of the kernel.

nbgrader normally grades a submission by running the whole notebook, hidden tests included, in a Jupyter kernel of
the instructor: the student's code can then change what the tests check, call the library, and read or write the
course folder, ``gradebook.db`` included (one submission can zero every other student's grades). The
``nbgrader_config.py`` that ``make nbgrader`` writes replaces nbgrader's ``Execute`` step by
:class:`SandboxedExecute`:

* no kernel runs; the submission's answer cells go through the same grader as ``make grade``
  (:func:`course_pe.coursework.grade.grade_cells`): a fresh sandboxed process per notebook, only the cells that define
  the exercises' functions, a ``course_pe`` without the functions being graded, visible and randomised hidden cases
  drawn with a fresh secret seed, verdicts computed outside the sandbox;
* each autograded test cell (``<exercise>-tests``, restored by nbgrader from the instructor's source) receives the
  verdict as its output: a pass prints the report, a failure is an error output with the diagnosis, which nbgrader
  scores 0; the feedback pages show these messages;
* an exercise the grader could not finish (``not graded``: the submission's time limit for its whole grading ran
  out, its sandbox did not start or was killed from outside) is never scored: nbgrader has no "not graded" (an
  error output would be a 0, no output full marks), so the notebook's autograde fails with the reason in nbgrader's
  log and its error summary names the student, as when full isolation is unavailable; autograde it again;
* nothing else changes: nbgrader records the scores in its gradebook, the written answers are graded by hand in the
  Formgrader, ``generate_feedback`` and ``export`` work as usual.

The written answers are untrusted too. nbgrader 0.9.6's Formgrader (template ``formgrade``) and feedback pages render
a markdown cell with nbconvert's ``markdown2html`` and nothing else: raw HTML in a student's answer, such as
``<img src=x onerror=...>`` or ``<script>``, and ``javascript:`` links arrive live in the instructor's browser, on
the origin of the instructor's Jupyter server (``HTMLExporter.sanitize_html`` does not apply there: the template
replaces the block that honours it). :class:`SanitizeWrittenAnswers`, which the same ``nbgrader_config.py`` runs
during autograde, therefore shows every cell a student could have written that would render anything outside a
small allow-list (tags, attributes, link schemes; MathJax's ``\\href``) as plain text instead, before nbgrader
stores the autograded notebook that the Formgrader and the feedback pages show.

The grader refuses to run where full isolation is unavailable (the instructor is not root) unless
``c.SandboxedExecute.isolation = "limited"`` is set; nbgrader then reports an error for the submission instead of
recording a grade.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from typing import Any

import nbformat
from nbgrader.preprocessors.base import NbGraderPreprocessor
from traitlets import Float, Unicode, validate

from .exercises import EXERCISES
from .names import NAME_PATTERN

__all__ = ["RestoreReleasedCells", "SandboxedExecute", "SanitizeWrittenAnswers", "html_is_inert"]


class SandboxedExecute(NbGraderPreprocessor):
    """Grade a notebook's coding exercises in course_pe's sandbox and write the verdicts into its test cells.

    Configurable (``c.SandboxedExecute.<name>`` in ``nbgrader_config.py``, or keyword arguments): ``cell_timeout``
    (seconds per answer cell), ``call_timeout`` (seconds per exercise, its calls only), ``timeout`` (seconds for a
    whole notebook, wall clock), ``isolation`` (``""``: full isolation, required; ``"limited"``: grade without root,
    unsafe with hostile submissions). Arguments left at None keep the configured value.
    """

    # Float and Unicode: traitlets then parses values given on nbgrader's command line
    # (``--SandboxedExecute.timeout=30`` arrives as the text "30")
    cell_timeout = Float(60.0, help="seconds per answer cell").tag(config=True)
    call_timeout = Float(60.0, help="seconds per exercise (its calls only)").tag(config=True)
    timeout = Float(300.0, help="seconds for a whole notebook (wall clock)").tag(config=True)
    isolation = Unicode("", help="empty for full isolation (required by default), or 'limited' to grade without "
                                 "root, where a hostile submission can read and change the course folder").tag(config=True)

    def __init__(self, *, cell_timeout: float | None = None, call_timeout: float | None = None,
                 timeout: float | None = None, isolation: str | None = None, **kwargs: Any) -> None:
        from .._validation import check_choice, check_float

        # checked here, as given (the traits would turn b"full" into "full" and refuse 1+2j with a TraitError)
        given: dict[str, Any] = {k: check_float(k, v, minimum=0.0, strict_minimum=True) for k, v in (
            ("cell_timeout", cell_timeout), ("call_timeout", call_timeout), ("timeout", timeout)) if v is not None}
        if isolation is not None:
            given["isolation"] = check_choice("isolation", isolation, ("", "full", "limited"))
        super().__init__(**kwargs, **given)

    @validate("cell_timeout", "call_timeout", "timeout")
    def _seconds(self, proposal: Any) -> float:
        from .._validation import check_float

        return check_float(proposal["trait"].name, proposal["value"], minimum=0.0, strict_minimum=True)

    @validate("isolation")
    def _level(self, proposal: Any) -> str:
        from .._validation import check_choice

        return check_choice("isolation", proposal["value"], ("", "full", "limited"))

    def preprocess(self, nb: Any, resources: Any) -> tuple[Any, Any]:
        """Grade ``nb`` (a notebook after nbgrader's sanitising steps) and return it with the verdicts as the
        outputs of its autograded test cells; ``resources`` is nbgrader's (the student's id is used as the name)."""
        from .grade import grade_cells
        from .sandbox import containment, prepare

        if not isinstance(nb, nbformat.NotebookNode) or not isinstance(getattr(nb, "cells", None), list):
            raise TypeError(f"nb must be an nbformat notebook, got {type(nb).__name__}")
        if not isinstance(resources, dict):
            raise TypeError(f"resources must be a dict, got {type(resources).__name__}")
        level = containment().level
        if level != "full" and self.isolation != "limited":
            raise RuntimeError("full isolation is not available here (" + "; ".join(containment().notes) + "): run "
                               "nbgrader autograde as root, or set c.SandboxedExecute.isolation = 'limited' to grade "
                               "anyway (unsafe with hostile submissions)")
        tests: dict[str, Any] = {}
        for cell in nb.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            grade_id = str(meta.get("grade_id", ""))
            if cell.cell_type == "code" and meta.get("grade") and grade_id.endswith("-tests") \
                    and grade_id[: -len("-tests")] in EXERCISES:
                tests[grade_id[: -len("-tests")]] = cell
        if not tests:
            return nb, resources
        sources = [cell.source for cell in nb.cells if cell.cell_type == "code"]
        numbers = [i + 1 for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]  # as JupyterLab numbers cells
        student = str(resources.get("nbgrader", {}).get("student") or "student")
        student = student if NAME_PATTERN.fullmatch(student) else "student"
        chapters = {EXERCISES[e].chapter for e in tests}
        assignment = chapters.pop() if len(chapters) == 1 else "custom"
        prepare(self.isolation or level)
        report = grade_cells(sources, assignment, student=student, notebook=str(resources.get("unique_key", "")),
                             exercises=list(tests), cell_timeout=self.cell_timeout, call_timeout=self.call_timeout,
                             timeout=self.timeout, isolation=self.isolation or None, cell_numbers=numbers)
        self.log.info("%s: %g / %g (%s)", student, report.score, report.max_score, report.isolation)
        unfinished = [g for g in report.exercises if g.status == "not graded"]
        if unfinished:
            # nbgrader scores a test cell 0 for an error output and full marks for none: it has no "not graded".
            # Fail this notebook instead, as when the sandbox is unavailable: nbgrader records no grade from this run,
            # names the student in its error summary and logs the reason.
            reasons = "; ".join(f"{g.function or g.exercise}: {g.message}" for g in unfinished)
            message = (f"course_pe could not finish grading the notebook of {student!r}, so this run records no grade "
                       f"for it (a 0 would say nothing about the student): NOT GRADED {reasons}. Autograde it "
                       f"again: nbgrader autograde ASSIGNMENT --student {student} --force")
            for problem in report.problems:
                message += f"; note: {problem}"
            self.log.error(message)
            raise RuntimeError(message)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = []
                cell.execution_count = None
        grades = {e.exercise: e for e in report.exercises}
        for exercise, cell in tests.items():
            grade = grades[exercise]
            if grade.status == "passed":
                cell.outputs = [nbformat.v4.new_output(
                    "stream", name="stdout", text=f"[{exercise}] PASSED: {grade.message} (graded in course_pe's "
                                                  f"sandbox; isolation {report.isolation.split(':')[0]})\n")]
            else:
                lines = [f"[{exercise}] {grade.status.upper()}: {grade.message}"]
                lines += [f"answer cell that raised: {e}" for e in report.cell_errors]
                lines += [f"note: {p}" for p in report.problems]
                cell.outputs = [nbformat.v4.new_output("error", ename="GradingFailed", evalue=grade.message,
                                                       traceback=lines)]
        return nb, resources


class RestoreReleasedCells(NbGraderPreprocessor):
    """Give back their full source to the locked cells a student left exactly as released, before nbgrader checks them.

    ``nbgrader generate_assignment`` records a locked cell's checksum *before* it removes the hidden tests and the mark
    scheme from the student's copy, so ``nbgrader autograde`` computes another checksum from every untouched
    submission and warns "Attribute 'checksum' for cell ... has changed!" for each test cell and each written task of
    every student (nbgrader issue 1961), which hides the one warning that matters: a student who edited a locked cell.
    This step runs just before nbgrader's ``OverwriteCells`` (``c.Autograde.sanitize_preprocessors``, in the
    ``nbgrader_config.py`` of ``make nbgrader``): for each locked cell whose source is exactly what the release gave
    the student (the instructor's source with its hidden tests and mark scheme removed by nbgrader's own
    ``ClearHiddenTests`` and ``ClearMarkScheme``), it puts the instructor's source back, so that the checksums agree.
    A cell the student changed is left as it is, and nbgrader warns about it and restores it as before."""

    def __init__(self, *, config: Any = None, **kwargs: Any) -> None:
        if config is not None:
            from traitlets.config import Config

            if not isinstance(config, Config):
                raise TypeError(f"config must be a traitlets Config, got {type(config).__name__}")
            kwargs["config"] = config
        super().__init__(**kwargs)

    def preprocess(self, nb: Any, resources: Any) -> tuple[Any, Any]:
        """Restore the untouched locked cells of ``nb`` (``resources``: nbgrader's, with the gradebook's URL and the
        notebook's and assignment's ids)."""
        from nbgrader.api import Gradebook, MissingEntry
        from nbgrader.preprocessors import ClearHiddenTests, ClearMarkScheme

        if not isinstance(nb, nbformat.NotebookNode) or not isinstance(getattr(nb, "cells", None), list):
            raise TypeError(f"nb must be an nbformat notebook, got {type(nb).__name__}")
        info = resources.get("nbgrader") if isinstance(resources, dict) else None
        if not isinstance(info, dict) or not all(k in info for k in ("db_url", "notebook", "assignment")):
            raise TypeError("resources must be nbgrader's, with its db_url, notebook and assignment")
        for key in ("db_url", "notebook", "assignment"):
            if not isinstance(info[key], str) or not info[key]:
                raise ValueError(f"resources['nbgrader'][{key!r}] must be a non-empty str, got {info[key]!r}")
        hidden = ClearHiddenTests(config=self.config)
        scheme = ClearMarkScheme(config=self.config)
        restored = 0
        graded = [(cell, cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")) for cell in nb.cells]
        graded = [(cell, grade_id) for cell, grade_id in graded if grade_id]
        if not graded:
            return nb, resources
        with Gradebook(info["db_url"]) as gradebook:
            for cell, grade_id in graded:
                try:
                    source_cell = gradebook.find_source_cell(grade_id, info["notebook"], info["assignment"])
                except MissingEntry:
                    continue
                if not source_cell.locked or source_cell.cell_type != cell.cell_type:
                    continue
                released = nbformat.from_dict({"cell_type": source_cell.cell_type, "source": source_cell.source,
                                               "metadata": {}})
                hidden._remove_hidden_test_region(released)  # noqa: SLF001 - nbgrader's own rule, as at release
                scheme._remove_mark_scheme_region(released)  # noqa: SLF001
                source = "".join(cell.source) if isinstance(cell.source, list) else cell.source
                if source == released.source and source != source_cell.source:
                    cell.source = source_cell.source
                    restored += 1
        self.log.debug("restored the instructor's source of %d untouched locked cell(s)", restored)
        return nb, resources


# --------------------------------------------------------------------------- written answers


#: tags that markdown produces, and a few harmless ones students use (``<br>``, ``<sup>``)
SAFE_TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em", "h1", "h2", "h3",
    "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "s", "small", "span",
    "strike", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul",
})
#: attributes those tags may carry (no event handlers, no style); ``id`` on headings only (nbconvert gives each
#: markdown heading an id for its anchor link)
SAFE_ATTRIBUTES = frozenset({"align", "alt", "class", "colspan", "height", "href", "rowspan", "src", "start", "title",
                             "width"})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_SAFE_SCHEMES = ("http:", "https:", "mailto:", "attachment:")
_CONTROL = re.compile(r"[\x00-\x20\x7f]+")
_TEX_LINK = re.compile(r"\\(?:href|url)\s*\{([^}]*)\}")


def _url_is_safe(url: str, *, image: bool = False) -> bool:
    """A relative URL, a fragment or an http(s)/mailto/attachment URL (and for an image, a ``data:image/`` URL);
    control characters and whitespace are removed first, as browsers do."""
    url = _CONTROL.sub("", html.unescape(url)).lower()
    scheme = re.match(r"[a-z][a-z0-9+.-]*:", url)
    if scheme is None:
        return True  # relative (browsers need a scheme before the first '/', '?' or '#' to leave the page)
    if image and url.startswith("data:image/") and not url.startswith("data:image/svg"):
        return True
    return url.startswith(_SAFE_SCHEMES)


class _Inspector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in SAFE_TAGS:
            self.problems.append(f"the tag {_word(tag)}")
        for name, value in attrs:
            if name not in SAFE_ATTRIBUTES and not (name == "id" and tag in _HEADINGS):
                self.problems.append(f"the attribute {_word(name)}")
            elif name in ("href", "src") and not _url_is_safe(value or "", image=(tag == "img" and name == "src")):
                self.problems.append("a link or image of another scheme than http, https or mailto")

    handle_startendtag = handle_starttag

    def handle_comment(self, data: str) -> None:
        self.problems.append("an HTML comment")

    def handle_decl(self, decl: str) -> None:
        self.problems.append("an HTML declaration")

    def handle_pi(self, data: str) -> None:
        self.problems.append("a processing instruction")

    def unknown_decl(self, data: str) -> None:
        self.problems.append("an HTML declaration")


def html_is_inert(text: str) -> list[str]:
    """What in the HTML ``text`` could run code or load something in a reader's browser (tags and attributes outside
    ``SAFE_TAGS`` and ``SAFE_ATTRIBUTES``, URLs other than relative, http(s), mailto and attachments, MathJax
    ``\\href``/``\\url`` to another scheme); an empty list when nothing does."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    inspector = _Inspector()
    inspector.feed(text)
    inspector.close()
    problems = inspector.problems
    if any(not _url_is_safe(target) for target in _TEX_LINK.findall(text)):
        problems.append("a MathJax link of another scheme than http, https or mailto")
    return problems


def _word(text: str) -> str:
    """A tag or attribute name reduced to letters, digits and dashes (it is shown in markdown)."""
    return re.sub(r"[^a-z0-9-]", "", text.lower())[:20] or "(unnamed)"


def _as_text(source: str, problems: list[str]) -> str:
    """Markdown that shows ``source`` verbatim, as a code block (inert), after a note saying why (``problems`` are
    made of fixed words and names reduced by :func:`_word`)."""
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", source)), default=0))
    shown = "; ".join(sorted(set(problems))[:5])
    return (f"*Shown as text by course_pe's autograde: rendered, this answer would have put into the Formgrader and "
            f"the feedback page {shown}.*\n\n{fence}text\n{source}\n{fence}\n")


class SanitizeWrittenAnswers(NbGraderPreprocessor):
    """Make every cell a student could have written render inertly in nbgrader's Formgrader and feedback pages.

    A markdown cell is rendered as the Formgrader renders it (nbconvert's ``HTMLExporter.markdown2html``); if the
    result holds anything outside the allow-list (:func:`html_is_inert`: ``<script>``, ``onerror=``, ``<iframe>``,
    ``javascript:`` links, MathJax ``\\href{javascript:...}`` ...), the cell's source is replaced by a note and the
    source itself as a code block, which the instructor reads as text. A raw cell (nbconvert passes it to the page
    as HTML) is escaped the same way. An ordinary answer, with markdown, math, images and links, is left exactly as
    it is. Cells that nbgrader restores from the instructor's source (locked, graded and not solution) are left
    alone. Runs during ``nbgrader autograde`` (see ``course_pe.coursework.nbgrader_release.config_source``)."""

    def __init__(self, *, config: Any = None, **kwargs: Any) -> None:
        if config is not None:
            from traitlets.config import Config

            if not isinstance(config, Config):
                raise TypeError(f"config must be a traitlets Config, got {type(config).__name__}")
            kwargs["config"] = config
        super().__init__(**kwargs)

    def preprocess(self, nb: Any, resources: Any) -> tuple[Any, Any]:
        """Sanitise ``nb``'s student-written cells in place; ``resources``: nbgrader's dict (the student's name, for
        the log)."""
        from nbconvert.exporters import HTMLExporter

        if not isinstance(nb, nbformat.NotebookNode) or not isinstance(getattr(nb, "cells", None), list):
            raise TypeError(f"nb must be an nbformat notebook, got {type(nb).__name__}")
        if not isinstance(resources, dict):
            raise TypeError(f"resources must be a dict, got {type(resources).__name__}")
        exporter = HTMLExporter()
        changed = 0
        for cell in nb.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if (meta.get("locked") or meta.get("grade")) and not meta.get("solution"):
                continue  # restored from the instructor's source by nbgrader
            source = cell.get("source", "")
            source = "".join(source) if isinstance(source, list) else str(source)
            if cell.cell_type == "markdown":
                problems = html_is_inert(exporter.markdown2html({"cell": cell}, source))
                if problems:
                    cell.source = _as_text(source, problems)
                    cell.pop("attachments", None)
                    if html_is_inert(exporter.markdown2html({"cell": cell}, cell.source)):  # never expected
                        cell.source = "*Shown as text by course_pe's autograde: see the submitted notebook.*"
                    changed += 1
            elif cell.cell_type == "raw":
                problems = html_is_inert(source)
                if problems:
                    cell.source = html.escape(source)
                    changed += 1
        if changed:
            self.log.warning("%s: %d written cell(s) shown as text (they held HTML or links that could run code in "
                             "the Formgrader)", (resources.get("nbgrader") or {}).get("student", "a student")
                             if isinstance(resources.get("nbgrader"), dict) else "a student", changed)
        return nb, resources
