"""The feedback file each student gets: ``<grades>/<assignment>/feedback/<student>.txt``.

Plain UTF-8 text (safe to paste into an e-mail or an LMS comment, nothing in it is rendered): the assignment, the
score out of the fixed maximum (after a late penalty, said as such), one block per exercise with its verdict and the
grader's diagnosis (the failing case, what differed, the classic mistake it recognises), the answer cells that raised
an error (numbered as JupyterLab numbers cells, so that "cell 23" is the cell the status bar calls 23), and, when an
exercise was not graded, that this was the grader's problem and not the student's. Written from the gradebook by
``exports.write_exports`` at every export; nothing here is sent anywhere.
"""

from __future__ import annotations

from typing import Any

from .exports import AssignmentInfo, Result

__all__ = ["feedback_text"]

_NOT_GRADED = ("This exercise was not graded: the grader could not finish running your submission (the reason is "
               "below). This is not a mark against you; your instructor will grade it again.")


def feedback_text(result: Result, info: AssignmentInfo, report: dict[str, Any] | None, name: str = "") -> str:
    """The feedback of one student for one assignment (``result``: a ``exports.Result``,
    ``info``: its ``exports.AssignmentInfo``; ``report``: the JSON report of the latest
    grading as a dict, or None; ``name``: the roster's display name)."""
    from .._validation import check_str

    if not isinstance(result, Result):
        raise TypeError(f"result must be an exports.Result, got {type(result).__name__}")
    if not isinstance(info, AssignmentInfo):
        raise TypeError(f"info must be an exports.AssignmentInfo, got {type(info).__name__}")
    if report is not None and not isinstance(report, dict):
        raise TypeError(f"report must be None or a dict (a JSON report), got {type(report).__name__}")
    check_str("name", name)
    who = f"{name} ({result.student})" if name else result.student
    kind = {"coding": "coding exercises", "written": "written exercises"}.get(info.kind, "exercises")
    lines = [f"Positional Encoding, Corrected: {result.assignment.removesuffix('-written')} ({kind})", f"Student: {who}"]
    if report and report.get("notebook"):
        lines.append(f"Notebook: {report['notebook']}")
    lines.append(f"Graded: {result.graded_at}")
    if result.status == "complete":
        score = f"Score: {result.score:g} / {info.max_score:g}"
        if result.late:
            score += f" ({result.late}: {result.final:g} / {info.max_score:g})"
        lines.append(score)
    else:
        graded = sum(s for _, status, s, _ in result.verdicts if status != "not graded")
        lines.append(f"Score: not complete yet ({graded:g} of the {info.max_score:g} points graded so far)")
        if result.late:
            lines.append(f"Late: {result.late}")
    lines.append("")
    details = {e["exercise"]: e for e in (report or {}).get("exercises", []) if isinstance(e, dict)}
    for exercise, status, score, maximum in result.verdicts:
        detail = details.get(exercise, {})
        label = detail.get("function") or exercise
        lines.append(f"{label}: not graded (worth {maximum:g})" if status == "not graded" else
                     f"{label}: {status}, {score:g} / {maximum:g}")
        message = str(detail.get("message") or "")
        if info.kind == "written":
            lines += _written_block(exercise, status, message)
            continue
        if status == "not graded":
            lines.append(f"  {_NOT_GRADED}")
        if message:
            lines += [f"  {part.strip()}" for part in _split(message)]
        lines.append("")
    errors = [str(e) for e in (report or {}).get("cell_errors", [])]
    if errors:
        lines.append("Answer cells that raised an error (cells numbered as JupyterLab's status bar numbers them):")
        lines += [f"  - {e}" for e in errors]
        lines.append("")
    problems = [str(p) for p in (report or {}).get("problems", [])]
    if problems:
        lines.append("Notes:")
        lines += [f"  - {p}" for p in problems]
        lines.append("")
    if info.kind == "coding":
        lines.append("Each exercise is checked on the book's examples and on hidden cases drawn at random for every "
                     "submission; an exercise scores its point when every case is right.")
    return "\n".join(lines).rstrip("\n") + "\n"


def _written_block(exercise: str, status: str, message: str) -> list[str]:
    """A written exercise's comment and the rubric it was marked with."""
    from .rubrics import RUBRICS

    lines = [f"  {'not marked yet' if status == 'not graded' else 'comment'}: {message}"] if message else []
    rubric = RUBRICS.get(exercise)
    if rubric is not None:
        lines.append("  marked with this rubric:")
        lines += [f"    {c.points:g} pt: {c.text}" for c in rubric.criteria]
    return lines + [""]


def _split(message: str) -> list[str]:
    """The grader's message (``part; part; ...``) one part per line."""
    parts, depth, current = [], 0, ""
    for ch in message:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == ";" and depth <= 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p for p in parts if p.strip()]
