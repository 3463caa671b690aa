"""What a submission can import while it is graded: the grading environment, and how to tell a student beforehand.

Grading needs NumPy, PyTorch, IPython (which runs the answer cells) and the libraries ``course_pe`` itself imports
(Matplotlib, tqdm); the sandbox shows the distributions these need (their requirements, followed to the end) and
nothing else of the Python installation's site-packages. Model libraries that ship the answers (``transformers``:
T5's ``_relative_position_bucket``, BLOOM's ALiBi slopes, RoPE in every decoder) are therefore not importable while a
function is graded, nor is anything else the exercises do not need.

The same list serves the student's side: an exercise check run in a notebook (``cpe.exercises.check_*``) fails, with
the sentence :func:`unavailable_sentence` gives, when the function uses a module that grading will not have, so that
"PASSED" in the notebook never becomes 0 in the gradebook for that reason.

This module reads installed packages' metadata only (``importlib.metadata``); it imports none of them.
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import re
import site
import sys
import sysconfig
from functools import lru_cache
from pathlib import Path

__all__ = ["GRADING_ROOTS", "allowed_entries", "grading_distributions", "grading_top_level", "missing_modules",
           "other_site_folders", "site_folders", "unavailable_module", "unavailable_sentence"]

#: the distributions grading needs (everything they require comes with them): the arrays, the cell runner, and what
#: ``import course_pe`` imports
GRADING_ROOTS = ("numpy", "torch", "ipython", "matplotlib", "tqdm")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _marker_holds(requirement: str) -> bool:
    """Whether the environment marker of ``requirement`` (the text after ``;``) holds here, extras left out."""
    if ";" not in requirement:
        return True
    marker = requirement.split(";", 1)[1]
    if "extra" in marker:
        return False
    try:
        from packaging.markers import Marker
    except ImportError:  # pragma: no cover - packaging comes with pip and setuptools
        return True
    try:
        return bool(Marker(marker).evaluate({"extra": ""}))
    except Exception:  # noqa: BLE001 - an unreadable marker: keep the requirement
        return True


@lru_cache(maxsize=1)
def grading_distributions() -> frozenset[str]:
    """Normalised names of the installed distributions grading needs: :data:`GRADING_ROOTS` and their requirements
    (without extras), followed to the end."""
    seen: set[str] = set()
    todo = list(GRADING_ROOTS)
    while todo:
        name = _normalise(todo.pop())
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for requirement in dist.requires or []:
            match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
            if match and _marker_holds(requirement):
                todo.append(match.group(1))
    return frozenset(seen)


def site_folders() -> list[str]:
    """The site-packages folders this Python imports from (those on ``sys.path``), real paths."""
    real: list[str] = []
    for folder in sys.path:
        if folder and os.path.basename(folder.rstrip(os.sep)) in ("site-packages", "dist-packages") \
                and os.path.isdir(folder):
            path = os.path.realpath(folder)
            if path not in real:
                real.append(path)
    return real


def other_site_folders() -> list[str]:
    """Site-packages folders of the base installation that this Python does not import from (a virtual
    environment's base Python): a graded submission sees none of their entries."""
    found = []
    for base in {sys.base_prefix, sys.base_exec_prefix, sys.prefix}:
        for scheme_path in ("purelib", "platlib"):
            try:
                folder = sysconfig.get_path(scheme_path, vars={"base": base, "platbase": base})
            except KeyError:  # pragma: no cover
                continue
            if folder and os.path.isdir(folder):
                path = os.path.realpath(folder)
                if path not in found and path not in site_folders():
                    found.append(path)
    return found


def _entries_of(dist: metadata.Distribution) -> set[str]:
    """The top-level entries of a site-packages folder that ``dist`` installed (packages, modules, its metadata)."""
    entries: set[str] = set()
    for file in dist.files or []:
        parts = Path(str(file)).parts
        if parts and parts[0] not in ("..", "__pycache__") and not parts[0].endswith(".pth"):
            entries.add(parts[0])
    if not entries:  # no RECORD (an old egg-info): its top-level names
        for name in (dist.read_text("top_level.txt") or "").split():
            entries.update((name, name + ".py"))
    info = getattr(dist, "_path", None)
    if info is not None:
        entries.add(Path(str(info)).name)
    return entries


@lru_cache(maxsize=None)
def allowed_entries(folder: str) -> tuple[str, ...]:
    """The names in the site-packages ``folder`` that a graded submission may see: what the distributions of
    :func:`grading_distributions` installed there (nothing of the others, ``course_pe`` included: the sandbox imports
    the grading build)."""
    wanted = grading_distributions()
    allowed: set[str] = set()
    for dist in metadata.distributions(path=[folder]):
        name = dist.metadata.get("Name") or ""
        if _normalise(name) in wanted:
            allowed |= _entries_of(dist)
    try:
        present = set(os.listdir(folder))
    except OSError:
        return ()
    return tuple(sorted(allowed & present))


@lru_cache(maxsize=1)
def grading_top_level() -> frozenset[str]:
    """Top-level module names importable while graded, besides the standard library and ``course_pe``."""
    names: set[str] = set()
    for folder in site_folders():
        for entry in allowed_entries(folder):
            if entry.endswith((".dist-info", ".egg-info")):
                continue
            names.add(entry.split(".")[0])
    return frozenset(names)


def _module_of_file(filename: str) -> str | None:
    """The top-level module a source file belongs to when it lies in a site-packages folder, else None."""
    for folder in site_folders() + other_site_folders():
        prefix = folder.rstrip(os.sep) + os.sep
        if filename.startswith(prefix):
            first = filename[len(prefix):].split(os.sep, 1)[0]
            return first.split(".")[0] or None
    return None


@lru_cache(maxsize=1024)
def unavailable_module(name: str) -> bool:
    """Whether the top-level module ``name`` can be imported here but not while a submission is graded."""
    top = name.split(".")[0]
    if not top or top in sys.stdlib_module_names or top in sys.builtin_module_names or top in ("course_pe", "__main__"):
        return False
    if top in grading_top_level():
        return False
    from importlib.util import find_spec

    try:
        spec = find_spec(top)
    except (ImportError, ValueError):
        return False
    origin = getattr(spec, "origin", None) or ""
    locations = list(getattr(spec, "submodule_search_locations", None) or [])
    files = [origin, *locations]
    return any(_module_of_file(os.path.realpath(f)) for f in files if f and f not in ("built-in", "frozen"))


def missing_modules(error: str | None) -> list[str]:
    """The modules an error text says could not be imported (``No module named 'x.y'`` gives ``x``) that this machine
    has but a graded submission does not (:func:`unavailable_module`)."""
    from .._validation import check_optional_str

    if not check_optional_str("error", error) or "No module named" not in error:
        return []
    found = re.findall(r"No module named '([\w.]+)'", error)
    return sorted({m.split(".")[0] for m in found if unavailable_module(m)})


def unavailable_sentence(modules: list[str] | tuple[str, ...]) -> str:
    """The one sentence the notebook's check and the grader give when a submission uses modules grading lacks
    (``modules``: a list or tuple of module names)."""
    from .._validation import check_str_sequence

    kind = tuple if isinstance(modules, tuple) else list
    shown = ", ".join(f"`{m}`" for m in check_str_sequence("modules", modules, kind=kind, nonempty_items=True))
    return (f"your answer uses {shown}, which is not available when your work is graded (grading provides Python's "
            "standard library, numpy, torch, matplotlib, tqdm and course_pe without the exercise's own functions)")
