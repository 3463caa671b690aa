"""Student names as the gradebook stores them (shared by the grader, the roster and the gradebook).

A student name becomes a gradebook key, a CSV cell and a file name (``<out>/<assignment>/<student>.json``), so it is
restricted to letters, digits and ``. _ - @ +``, starts with a letter or digit, and has at most 128 characters: an
LMS login, a student number or an e-mail address fits; a path, a shell command or a spreadsheet formula does not.
"""

from __future__ import annotations

import re
import unicodedata

from .._validation import check_str

__all__ = ["derive_name", "validate_name"]

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}")


def validate_name(name: str) -> str:
    """Return ``name`` if it is a valid student name, else raise ``ValueError`` naming the rule."""
    check_str("name", name)
    if not NAME_PATTERN.fullmatch(name):
        raise ValueError(f"invalid student name {name!r}: use letters, digits, '.', '_', '-', '@' and '+', starting "
                         "with a letter or digit, at most 128 characters (no '/', spaces or other path parts)")
    return name


def derive_name(text: str) -> str:
    """A valid student name made from ``text`` (a file name without its suffix): accents are dropped
    (``José`` -> ``Jose``), other characters become ``_``, leading characters that are not letters or digits are
    removed. The result may collide with another file's name: the caller must check (the grader reports
    collisions, it never renames). ``ValueError`` if nothing is left (``"..."``, ``"日本"``)."""
    check_str("text", text)
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    name = re.sub(r"[^A-Za-z0-9._@+-]", "_", ascii_text)
    name = re.sub(r"^[^A-Za-z0-9]+", "", name)[:128]
    if not name:
        raise ValueError(f"no student name can be derived from text {text!r}: rename the file or use a roster")
    return name
