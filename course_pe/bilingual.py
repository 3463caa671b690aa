"""Printed verdicts in the book's two languages.

The book has an English and a Chinese edition built from the same stored outputs: the Chinese edition does not run
the notebooks again. An evidence cell that should tell a reader of the (Chinese) sources what it found, in words,
ends with ``verdict(english, chinese)`` instead of ``print(english)``. The notebook shows the English line (the
stored ``text/plain`` output, which nbval compares as it compares any printed line); the Chinese line is stored in the
same output's metadata, ``{"course_pe": {"zh_CN": {"text/plain": ...}}}``, and tools/zh_edition.py shows it in the
Chinese notebooks instead. Figures do the same with ``course_pe.plotting.bilingual_figure``.

Numbers belong in both lines: format them once and put the same text into both (``f"{n} errata stand"`` and
``f"{n} 条勘误成立"``), so the two editions cannot disagree.
"""

from __future__ import annotations

from ._validation import check_str

__all__ = ["BilingualText", "verdict"]


class BilingualText:
    """A line of output in English, with its Chinese in the output's metadata (see the module's docstring)."""

    def __init__(self, english: str, chinese: str) -> None:
        self.english = check_str("english", english)
        self.chinese = check_str("chinese", chinese)

    def _repr_mimebundle_(self, include=None, exclude=None) -> tuple[dict, dict]:
        return {"text/plain": self.english}, {"course_pe": {"zh_CN": {"text/plain": self.chinese}}}

    def __repr__(self) -> str:
        return self.english

    def __str__(self) -> str:
        return self.english


def verdict(english: str, chinese: str) -> BilingualText:
    """The last expression of an evidence cell: shows ``english``; the Chinese edition shows ``chinese``.

    Both must be non-empty text, and the Chinese must be Chinese (at least one CJK character)."""
    english, chinese = check_str("english", english), check_str("chinese", chinese)
    for name, text in (("english", english), ("chinese", chinese)):
        if not text.strip():
            raise ValueError(f"a verdict needs its English and its Chinese text: {name} is empty")
    if not any("\u3400" <= c <= "\u9fff" for c in chinese):
        raise ValueError(f"chinese has no Chinese character: {chinese!r}")
    return BilingualText(english, chinese)
