"""Book tooling used by the Makefile and the tests (not part of the course_pe library).

    python tools/book_tools.py notebooks        # TOC notebooks, in reading order
    python tools/book_tools.py notebooks --longest-first  # the same, the slowest to test first (make test)
    python tools/book_tools.py execute [NB ...] # re-execute notebooks in place, deterministically
    python tools/book_tools.py normalize [--check] [NB ...]  # reading set-up of every TOC notebook (below)
    python tools/book_tools.py student-pages DIR  # student edition sources: drop the "your answer" stubs
    python tools/book_tools.py student-config IN OUT  # student edition's _config.yml: no launch or edit buttons
    python tools/book_tools.py check-student-site SITE  # no link of the built student site reaches a solution

`normalize` is the source of truth for how a chapter opens; it is idempotent and changes no stored output, so a
notebook needs no re-execution after it. In the first code cell (the setup cell) it

* puts a marked block that installs ``course_pe`` when it is not importable (Colab, a fresh Binder): pip installs
  the package from the published repository named by ``repository.url``/``branch`` in ``_config.yml``, plus the
  few packages the chapters import that such a machine lacks, at the versions pinned in requirements.txt;
* tags the cell ``hide-input``, so the rendered page shows it collapsed (the downloaded notebook keeps it).

Re-execution runs each notebook in a fresh kernel from its own folder (as nbval does), one after
another, then removes per-run metadata (timings, widget state) so that the stored file changes only
when an output changes.
"""

from __future__ import annotations

import os
import re
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


# The notebooks that train models, slowest first (README: their training cells take about a minute each on the
# course machine). make test starts them first, so that side-by-side workers finish at about the same time; a
# notebook missing here simply keeps its reading order after these.
SLOWEST_NOTEBOOKS = (
    "book/part3/extrapolation.ipynb",
    "book/part3/context_extension_experiment.ipynb",
    "book/part3/learned_beyond.ipynb",
    "book/part1/learned.ipynb",
    "book/part2/relative.ipynb",
)


def longest_first(paths: list[Path]) -> list[Path]:
    """``paths`` with those named in SLOWEST_NOTEBOOKS first, in that order, then the rest in their order."""
    rank = {ROOT / name: i for i, name in enumerate(SLOWEST_NOTEBOOKS)}
    return sorted(paths, key=lambda p: rank.get(p, len(rank)))


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


# ------------------------------------------------------------------------------------------- normalize

SETUP_BEGIN = "# --- course set-up: installs course_pe where it is missing (Colab); kept by tools/book_tools.py ---"
SETUP_END = "# --- end of course set-up ---"
SETUP_TAG = "hide-input"
# Imported by the chapters but absent from a stock Colab machine; versions come from requirements.txt.
SETUP_EXTRA_PACKAGES = ("myst-nb", "hypothesis")
_SETUP_BLOCK = re.compile(re.escape(SETUP_BEGIN) + r".*?" + re.escape(SETUP_END) + r"\n*", re.S)


def repository() -> tuple[str, str]:
    """(https URL, branch) of the published repository: the one setting, ``repository:`` in _config.yml."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    repo = config["repository"]
    url = repo["url"].rstrip("/")
    if not re.fullmatch(r"https://github\.com/[^/]+/[^/]+", url):
        raise ValueError(f"repository.url in _config.yml must be https://github.com/OWNER/NAME, not {url!r}")
    return url, repo.get("branch", "main")


def pinned(name: str) -> str:
    """``name==version`` as pinned in requirements.txt."""
    wanted = name.lower().replace("_", "-")
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        package, sep, version = line.strip().partition("==")
        if sep and package.lower().replace("_", "-") == wanted:
            return f"{package}=={version}"
    raise ValueError(f"{name} is not pinned in requirements.txt")


def setup_block() -> str:
    url, branch = repository()
    packages = [f"course_pe @ git+{url}@{branch}"] + [pinned(name) for name in SETUP_EXTRA_PACKAGES]
    listed = ", ".join(f'"{p}"' for p in packages)
    return (
        f"{SETUP_BEGIN}\n"
        "import importlib.util\n"
        "import subprocess\n"
        "import sys\n"
        "\n"
        "if importlib.util.find_spec(\"course_pe\") is None:\n"
        "    subprocess.run(\n"
        "        [sys.executable, \"-m\", \"pip\", \"install\", \"-q\",\n"
        f"         {listed}],\n"
        "        check=True,\n"
        "    )\n"
        f"{SETUP_END}\n\n"
    )


def normalize_notebook(nb) -> bool:
    """Apply the reading set-up to one notebook in memory; True when something changed."""
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    if not code:
        return False
    first = code[0]
    before = (first.source, list(first.metadata.get("tags", [])))
    body = _SETUP_BLOCK.sub("", first.source)
    first.source = setup_block() + body.lstrip("\n")
    tags = first.metadata.get("tags", [])
    if SETUP_TAG not in tags:
        first.metadata["tags"] = [*tags, SETUP_TAG]
    return (first.source, list(first.metadata.get("tags", []))) != before


def normalize(paths: list[Path], check: bool = False) -> list[Path]:
    """Normalize notebooks in place (or, with ``check``, only report); return those that (would) change."""
    import nbformat

    changed = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        if normalize_notebook(nb):
            changed.append(path)
            if not check:
                nbformat.write(nb, path)
    return changed


STUDENT_STUB = re.compile(r"^\s*\*Your answer here\.\*\s*$", re.M)


def student_pages(folder: Path) -> int:
    """In the student edition's sources, remove the "your answer" placeholders (a page shows no stub text).

    Markdown cells left empty are dropped. Returns the number of placeholders removed.
    """
    import nbformat

    removed = 0
    for path in sorted(folder.rglob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        cells = []
        for cell in nb.cells:
            if cell.cell_type == "markdown" and STUDENT_STUB.search(cell.source):
                removed += len(STUDENT_STUB.findall(cell.source))
                cell.source = re.sub(r"\n{3,}", "\n\n", STUDENT_STUB.sub("", cell.source)).strip("\n")
                if not cell.source.strip():
                    continue
            cells.append(cell)
        nb.cells = cells
        nbformat.write(nb, path)
    return removed


def student_config(config: dict) -> dict:
    """The student edition's configuration: the book's, titled "(student edition)", with no button that opens a
    file of the repository.

    The Binder and Colab launch buttons and the edit button open the chapter's notebook in the published
    repository, which holds the solutions; the workbook notebooks exist only where ``make workbook`` ran, so no URL
    can reach them. The student site keeps the download button: the notebook it downloads is the page's own source,
    i.e. the workbook version (solutions replaced by stubs), which runs in Jupyter, Colab (File > Upload notebook) or
    Binder. The repository and issue buttons stay (they open no chapter). It has no language switch: there is no
    Chinese student edition.
    """
    import copy

    config = copy.deepcopy(config)
    config["title"] = f"{config['title']} (student edition)"
    launch = config.setdefault("launch_buttons", {})
    for key in ("binderhub_url", "colab_url", "jupyterhub_url", "deepnote_url"):
        launch[key] = ""
    launch["thebe"] = False
    config.setdefault("html", {})["use_edit_page_button"] = False
    # no language switch: there is no Chinese student edition for it to open (its every link would be a 404)
    config.get("sphinx", {}).get("local_extensions", {}).pop("edition_switch", None)
    return config


# Links a student site may hold to the repository: its front page and its issues (neither opens a chapter).
_LAUNCH_HOSTS = ("mybinder.org", "colab.research.google.com", "deepnote.com")
_SOLUTION_MARK = re.compile(r"^\s*[`:]{3,}\s*\{solution(?:-start)?\}", re.M)


def _links(html: str) -> list[str]:
    from html.parser import HTMLParser

    found: list[str] = []

    class Links(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.extend(value for name, value in attrs if name in ("href", "src", "action") and value)

    Links().feed(html)
    return found


def solution_content(path: Path) -> str:
    """Why the notebook or MyST file at ``path`` holds solutions ("" when it holds none): a code cell tagged
    ``solution`` (the workbook turns it into a stub tagged ``student``), or a solution directive."""
    text = path.read_text(errors="replace")
    if path.suffix == ".ipynb":
        import nbformat

        nb = nbformat.reads(text, as_version=4)
        for index, cell in enumerate(nb.cells):
            if "solution" in cell.metadata.get("tags", []):
                return f"cell {index} is tagged 'solution'"
            if cell.cell_type == "markdown" and _SOLUTION_MARK.search(cell.source):
                return f"cell {index} has a solution directive"
        return ""
    return "a solution directive" if _SOLUTION_MARK.search(text) else ""


def check_student_site(site: Path, repository_url: str | None = None) -> list[str]:
    """Problems with the built student site ``site``: a link (href, src) that opens a notebook with solutions.

    That is a launch link (Binder, Colab, Deepnote), a link into the files of the published repository (edit,
    blob, tree, raw: every chapter there has its solutions), or a link to a file of the site itself (a downloaded
    source) that holds solution cells or solution directives. The repository's front page and issues are allowed.
    """
    from urllib.parse import unquote, urlsplit

    repository_url = (repository_url or repository()[0]).rstrip("/")
    repo_path = urlsplit(repository_url).path.rstrip("/")
    problems: list[str] = []
    checked: dict[Path, str] = {}
    pages = sorted(site.rglob("*.html"))
    if not pages:
        return [f"no HTML pages under {site}"]
    for page in pages:
        name = page.relative_to(site)
        for link in sorted(set(_links(page.read_text(errors="replace")))):
            parts = urlsplit(link)
            host = parts.netloc.lower()
            if any(host == h or host.endswith("." + h) for h in _LAUNCH_HOSTS):
                problems.append(f"{name}: launch link {link} (opens the repository's notebook, with solutions)")
            elif host in ("github.com", "www.github.com") and parts.path.startswith(repo_path + "/") \
                    and not parts.path[len(repo_path):].startswith(("/issues", "/discussions")):
                problems.append(f"{name}: link into the repository's files {link} (its chapters hold the solutions)")
            elif host == "raw.githubusercontent.com" and parts.path.startswith(repo_path + "/"):
                problems.append(f"{name}: link into the repository's files {link} (its chapters hold the solutions)")
            elif not host and not parts.scheme and parts.path:
                target = (page.parent / unquote(parts.path)).resolve()
                if target.suffix in (".ipynb", ".md", ".txt") and target.is_file():
                    if target not in checked:
                        checked[target] = solution_content(target)
                    if checked[target]:
                        problems.append(f"{name}: links to {link}, which holds solutions ({checked[target]})")
    return problems


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    command, rest = argv[0], argv[1:]
    if command == "notebooks":
        paths = longest_first(toc_notebooks()) if "--longest-first" in rest else toc_notebooks()
        print(" ".join(str(p.relative_to(ROOT)) for p in paths))
        return 0
    if command == "execute":
        paths = [Path(p).resolve() for p in rest] if rest else toc_notebooks()
        os.environ.setdefault("COURSE_PE_THREADS", "1")
        execute(paths)
        return 0
    if command == "normalize":
        check = "--check" in rest
        names = [p for p in rest if p != "--check"]
        paths = [Path(p).resolve() for p in names] if names else toc_notebooks()
        changed = normalize(paths, check=check)
        for path in changed:
            print(f"{'needs normalize' if check else 'normalized'}: {path.relative_to(ROOT)}")
        return 1 if (check and changed) else 0
    if command == "student-pages":
        if len(rest) != 1:
            print("usage: book_tools.py student-pages DIR")
            return 2
        print(f"removed {student_pages(Path(rest[0]))} answer placeholders")
        return 0
    if command == "student-config":
        if len(rest) != 2:
            print("usage: book_tools.py student-config IN_CONFIG OUT_CONFIG")
            return 2
        config = student_config(yaml.safe_load(Path(rest[0]).read_text()))
        Path(rest[1]).write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False))
        return 0
    if command == "check-student-site":
        if len(rest) != 1:
            print("usage: book_tools.py check-student-site SITE")
            return 2
        site = Path(rest[0])
        problems = check_student_site(site)
        pages = len(list(site.rglob("*.html")))
        print(f"student site {site}: {pages} pages, {len(problems)} link(s) to solutions")
        for problem in problems[:50]:
            print(f"  FAIL {problem}")
        return 1 if problems else 0
    print(f"unknown command {command!r}\n{__doc__}")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
