"""Shared pieces of the grader's tests: correct and wrong answers for ``relative``, notebook files, sandbox processes."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat

from _class_tool import class_submissions_tool

TOOL = class_submissions_tool()
GOOD_T5 = TOOL.T5  # a correct student answer, written without course_pe
GOOD_SLOPES = TOOL.SLOPES
NAIVE_SLOPES = TOOL.NAIVE_SLOPES
STUB_T5 = TOOL.STUB_T5
STUB_SLOPES = TOOL.STUB_SLOPES
STUBS = STUB_T5 + "\n" + STUB_SLOPES
# the user ids of this process's sandboxes (course_pe.coursework.sandbox._new_uid); other graders on the machine use
# other ranges
SANDBOX_UIDS = range(1_500_000_000 + (os.getpid() % 400_000) * 1000, 1_500_000_000 + (os.getpid() % 400_000 + 1) * 1000)


def notebook(folder: Path, name: str, *sources: str, metadata: dict | None = None) -> Path:
    """Write a notebook with one code cell per source; return its path."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata.update(metadata or {})
    path = folder / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def scores(report) -> dict[str, tuple[float, str]]:
    return {e.exercise: (e.score, e.status) for e in report.exercises}


def sandbox_processes() -> list[int]:
    """PIDs of processes that run as one of this process's sandbox users (none may outlive grading)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid in SANDBOX_UIDS:
                    found.append(int(entry))
            except OSError:
                pass
    return found
