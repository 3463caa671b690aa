"""Class statistics of one assignment: ``<grades>/<assignment>/statistics.txt``, and the block the grader prints.

From the gradebook's results (``exports.results``) and the JSON reports of the latest
gradings:

* how many students have a complete result, how many need attention (an exercise not graded), how many roster
  students have none;
* mean, median and standard deviation of the complete results (after late penalties), and their distribution, one
  bar per score;
* per exercise: passed, failed on the book's visible cases, failed only on a hidden case, not graded;
* **which hidden ranges fail most**: every report records the secret seed of its hidden cases, so the cases each
  student ran are drawn again here, exactly as the grader drew them; for each exercise with hidden failures and each
  of its inputs (``FEATURES``: ``num_positions`` and ``d_model`` for the sinusoidal table, ...), the hidden cases
  run are split into four equal ranges of that input, and each range shows how many of its cases failed. A range that
  fails far more often than the others (large ``d_model``, far positions) is what to discuss in class.
"""

from __future__ import annotations

import math
import re
import statistics as stats
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .exercises import EXERCISES
from .exports import AssignmentInfo, Result

__all__ = ["FEATURES", "hidden_ranges", "statistics_text"]


def _shape(value: Any) -> tuple[int, ...]:
    return tuple(int(n) for n in np.shape(value.numpy() if isinstance(value, torch.Tensor) else value))


def _largest(value: Any) -> float:
    array = value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
    return float(np.max(np.abs(array))) if array.size else 0.0


#: For each coding exercise, the inputs of a case that the statistics report, by name (a function of the case's arguments).
FEATURES: dict[str, dict[str, Callable[[tuple[Any, ...]], float]]] = {
    "sinusoidal_table": {"num_positions": lambda a: a[0], "d_model": lambda a: a[1]},
    "shift_matrix": {"|k|": lambda a: abs(a[0]), "d_model": lambda a: a[1]},
    "add_positional_encoding": {"length": lambda a: _shape(a[0])[1], "d_model": lambda a: _shape(a[0])[2]},
    "t5_bucket": {"num_buckets": lambda a: a[2], "max_distance": lambda a: a[3],
                  "largest |offset|": lambda a: _largest(a[0])},
    "alibi_slopes": {"num_heads": lambda a: a[0]},
    "rope_rotation": {"head_dim": lambda a: _shape(a[0])[-1], "largest position": lambda a: _largest(a[1])},
    "half_to_interleaved": {"last dimension": lambda a: _shape(a[0])[-1]},
    "extrapolation_gap": {"train_length": lambda a: a[1], "positions": lambda a: _shape(a[0])[0]},
    "t5_position_bias": {"cached keys t": lambda a: a[-1], "new queries s": lambda a: a[-2],
                         "num_buckets": lambda a: a[1]},
}

_FAILED_CASE = re.compile(r"^(?P<hidden>hidden )?case (?P<n>\d+) of (?P<total>\d+):")


def hidden_ranges(exercises: list[str], reports: list[dict[str, Any]]) -> dict[str, dict[str, list[tuple[float, bool]]]]:
    """For each exercise of ``exercises`` and each feature of ``FEATURES``, the (value, failed) pairs of every hidden
    case the students of ``reports`` ran (their cases drawn again from each report's seed, in the grader's order:
    one generator for the report's exercises in turn). Reports whose exercise list is not ``exercises`` are skipped.
    ``exercises``: registered exercise ids; ``reports``: a list of JSON reports (dicts)."""
    from .._validation import check_str_sequence

    check_str_sequence("exercises", exercises)
    unknown = [e for e in exercises if e not in EXERCISES]
    if unknown:
        raise ValueError(f"exercises: unknown exercise(s) {unknown}")
    if not isinstance(reports, list) or not all(isinstance(r, dict) for r in reports):
        raise TypeError("reports must be a list of dicts (JSON reports)")
    out: dict[str, dict[str, list[tuple[float, bool]]]] = {e: {} for e in exercises}
    for report in reports:
        graded = [e.get("exercise") for e in report.get("exercises", []) if isinstance(e, dict)]
        if graded != exercises or not isinstance(report.get("seed"), int):
            continue
        rng = np.random.default_rng(report["seed"])
        try:
            drawn = {e: EXERCISES[e].cases(rng) for e in exercises}
        except Exception:  # noqa: BLE001 - a report from another version of the exercises: skipped
            continue
        for entry in report["exercises"]:
            exercise = entry["exercise"]
            cases = drawn[exercise]
            if entry.get("status") == "passed":
                ran, failed_at = len(cases), None
            elif entry.get("status") == "failed":
                match = _FAILED_CASE.match(str(entry.get("message", "")))
                if match is None or int(match.group("total")) != len(cases):
                    continue
                failed_at = int(match.group("n")) - 1
                ran = failed_at + 1
            else:
                continue
            for index, case in enumerate(cases[:ran]):
                if not case.hidden:
                    continue
                for feature, value in FEATURES.get(exercise, {}).items():
                    try:
                        out[exercise].setdefault(feature, []).append((float(value(case.args)), index == failed_at))
                    except Exception:  # noqa: BLE001 - a case of another shape: not counted
                        pass
    return out


def _bins(pairs: list[tuple[float, bool]], count: int = 4) -> list[tuple[float, float, int, int]]:
    """``pairs`` split into ``count`` equal ranges of the value: (low, high, failed, total) for each non-empty one."""
    low, high = min(v for v, _ in pairs), max(v for v, _ in pairs)
    if high == low:
        return [(low, high, sum(f for _, f in pairs), len(pairs))]
    width = (high - low) / count
    out = []
    for i in range(count):
        a, b = low + i * width, low + (i + 1) * width
        inside = [f for v, f in pairs if a <= v < b or (i == count - 1 and v == high)]
        if inside:
            out.append((a, b, sum(inside), len(inside)))
    return out


def _number(x: float) -> str:
    return f"{x:.0f}" if abs(x - round(x)) < 1e-9 or abs(x) >= 10 else f"{x:.2g}"


def statistics_text(info: AssignmentInfo, results: list[Result], reports: dict[str, dict[str, Any]],
                    roster_size: int | None = None) -> str:
    """The statistics of one assignment (see the module docstring): ``info`` an
    ``exports.AssignmentInfo``, ``results`` a list of
    ``exports.Result``, ``reports`` the JSON reports by student (lower case),
    ``roster_size`` the class list's length or None."""
    from .._validation import check_int

    if not isinstance(info, AssignmentInfo):
        raise TypeError(f"info must be an exports.AssignmentInfo, got {type(info).__name__}")
    if not isinstance(results, list) or not all(isinstance(r, Result) for r in results):
        raise TypeError("results must be a list of exports.Result")
    if not isinstance(reports, dict) or not all(isinstance(k, str) and isinstance(v, dict) for k, v in reports.items()):
        raise TypeError("reports must be a dict of JSON reports (dicts) by student")
    if roster_size is not None:
        roster_size = check_int("roster_size", roster_size, minimum=0)
    complete = [r for r in results if r.status == "complete"]
    waiting = [r for r in results if r.status != "complete"]
    lines = [f"Class statistics: {info.title} (maximum {info.max_score:g})",
             f"results: {len(complete)} complete, {len(waiting)} not graded yet (see attention.csv)"
             + (f", {roster_size - len(results)} roster student(s) without a grade" if roster_size is not None else "")]
    finals = [r.final for r in complete if r.final is not None]
    if finals:
        spread = stats.pstdev(finals) if len(finals) > 1 else 0.0
        lines.append(f"mean {stats.fmean(finals):.2f}, median {stats.median(finals):g}, standard deviation {spread:.2f}"
                     f" (of {info.max_score:g}; after late penalties)")
        lines.append("distribution:")
        counts: dict[float, int] = {}
        for value in finals:
            counts[value] = counts.get(value, 0) + 1
        steps = sorted(set(counts) | ({float(i) for i in range(int(info.max_score) + 1)}
                                     if float(info.max_score).is_integer() and info.max_score <= 20 else set()))
        widest = max(counts.values())
        for value in steps:
            bar = "#" * math.ceil(40 * counts.get(value, 0) / widest) if counts.get(value) else ""
            lines.append(f"  {value:>5g}  {bar} {counts.get(value, 0)}")
    lines.append("")
    if info.kind == "written":  # marked by hand: the mean mark of each exercise
        lines.append("per exercise: mean points of the students marked (maximum)")
        for exercise, maximum in info.exercises:
            marks = [score for r in results for e, status, score, _ in r.verdicts if e == exercise and status == "marked"]
            mean = f"{stats.fmean(marks):.2f}" if marks else "-"
            lines.append(f"  {exercise:<26} {mean:>6} ({maximum:g}; {len(marks)} marked)")
        return "\n".join(lines) + "\n"
    lines.append("per exercise: passed / failed on the book's visible cases / failed on a hidden case only / other")
    details: dict[str, dict[str, int]] = {}
    by_student = {r.student.lower(): r for r in results}
    for student, report in reports.items():
        if student not in by_student:
            continue
        for entry in report.get("exercises", []):
            if not isinstance(entry, dict):
                continue
            row = details.setdefault(str(entry.get("exercise")), {"passed": 0, "visible": 0, "hidden": 0, "other": 0})
            status = entry.get("status")
            if status == "passed":
                row["passed"] += 1
            elif status == "failed":
                row["hidden" if entry.get("failed_hidden") else "visible"] += 1
            else:
                row["other"] += 1
    for exercise, row in details.items():
        lines.append(f"  {exercise:<26} {row['passed']:>4} / {row['visible']:>4} / {row['hidden']:>4} / {row['other']:>4}")
    if info.kind == "coding":
        ranges = hidden_ranges([e for e, _ in info.exercises],
                               [r for s, r in reports.items() if s in by_student])
        shown = False
        for exercise, features in ranges.items():
            if not any(f for pairs in features.values() for _, f in pairs):
                continue
            if not shown:
                lines += ["", "hidden cases by input range (failed / run; the cases were drawn again from each "
                              "report's seed):"]
                shown = True
            lines.append(f"  {exercise}:")
            for feature, pairs in features.items():
                bins = _bins(pairs)
                worst = max(bins, key=lambda b: b[2] / b[3])
                cells = ", ".join(f"{_number(a)}-{_number(b)}: {failed}/{total}" for a, b, failed, total in bins)
                lines.append(f"    {feature:<18} {cells}   (most failures: {_number(worst[0])}-{_number(worst[1])})")
        if not shown:
            lines += ["", "no hidden case failed"]
    return "\n".join(lines) + "\n"
