"""Book tooling used by the Makefile and the tests (not part of the course_pe library).

    python tools/book_tools.py notebooks        # TOC notebooks, in reading order
    python tools/book_tools.py execute [NB ...] # re-execute notebooks in place, deterministically

Re-execution runs each notebook in a fresh kernel from its own folder (as nbval does), one after
another, then removes per-run metadata (timings, widget state) so that the stored file changes only
when an output changes.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
TOC = ROOT / "_toc.yml"


def _walk(entries: list[dict]) -> list[str]:
    files: list[str] = []
    for entry in entries:
        if "file" in entry:
            files.append(entry["file"])
        for key in ("chapters", "sections", "parts"):
            if key in entry:
                files.extend(_walk(entry[key]))
    return files


def toc_files() -> list[Path]:
    """Every file named in ``_toc.yml`` (root first), resolved to an existing path."""
    toc = yaml.safe_load(TOC.read_text())
    names = [toc["root"]] + _walk(toc.get("parts", []) + toc.get("chapters", []))
    paths = []
    for name in names:
        candidates = [ROOT / name] + [ROOT / f"{name}{ext}" for ext in (".ipynb", ".md")]
        found = next((p for p in candidates if p.is_file()), None)
        if found is None:
            raise FileNotFoundError(f"_toc.yml names {name!r}, which does not exist")
        paths.append(found)
    return paths


def toc_notebooks() -> list[Path]:
    return [p for p in toc_files() if p.suffix == ".ipynb"]


def book_notebooks() -> list[Path]:
    """Every notebook under book/ (checkpoints excluded)."""
    return sorted(p for p in (ROOT / "book").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def clean_metadata(nb) -> None:
    """Drop metadata that changes from run to run without any output changing."""
    nb.metadata.pop("widgets", None)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    lang = nb.metadata.setdefault("language_info", {})
    for key in list(lang):
        if key not in ("name", "codemirror_mode", "file_extension", "mimetype", "pygments_lexer", "nbconvert_exporter"):
            lang.pop(key)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("ExecuteTime", None)
        if cell.cell_type == "code":
            for output in cell.get("outputs", []):
                output.get("metadata", {}).pop("execution", None)


def execute(paths: list[Path]) -> None:
    import nbformat
    from nbclient import NotebookClient

    for path in paths:
        start = time.perf_counter()
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(
            nb,
            kernel_name="python3",
            timeout=600,
            resources={"metadata": {"path": str(path.parent)}},
            record_timing=False,
            allow_errors=False,
        )
        client.execute()
        clean_metadata(nb)
        nbformat.write(nb, path)
        print(f"executed {path.relative_to(ROOT)} in {time.perf_counter() - start:.1f} s")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    command, rest = argv[0], argv[1:]
    if command == "notebooks":
        print(" ".join(str(p.relative_to(ROOT)) for p in toc_notebooks()))
        return 0
    if command == "execute":
        paths = [Path(p).resolve() for p in rest] if rest else toc_notebooks()
        os.environ.setdefault("COURSE_PE_THREADS", "2")
        execute(paths)
        return 0
    print(f"unknown command {command!r}\n{__doc__}")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
