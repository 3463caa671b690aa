"""Book-level checks: configuration, TOC coverage, and notebooks stored executed and in order."""

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import book_tools  # noqa: E402

ERRATUM_ID = re.compile(r"E\d{3}-\d{2}")
TOC_NOTEBOOKS = book_tools.toc_notebooks()


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def test_config_builds_from_stored_outputs_with_the_extensions():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["execute"]["execute_notebooks"] == "off"
    assert config["only_build_toc_files"] is True
    extensions = config["sphinx"]["extra_extensions"]
    assert "sphinx_proof" in extensions and "sphinx_exercise" in extensions
    assert {"dollarmath", "amsmath"} <= set(config["parse"]["myst_enable_extensions"])
    assert config["bibtex_bibfiles"] and (ROOT / config["bibtex_bibfiles"][0]).is_file()
    assert config["launch_buttons"]["colab_url"] and config["launch_buttons"]["binderhub_url"]
    assert config["html"]["use_repository_button"] and config["html"]["use_download_button"]


def test_every_page_under_book_is_in_the_toc():
    in_toc = {p.resolve() for p in book_tools.toc_files()}
    pages = [p for p in (ROOT / "book").rglob("*") if p.suffix in (".ipynb", ".md") and ".ipynb_checkpoints" not in p.parts]
    missing = [str(p.relative_to(ROOT)) for p in pages if p.resolve() not in in_toc]
    assert not missing, f"pages not in _toc.yml: {missing}"


def test_there_are_notebooks():
    assert TOC_NOTEBOOKS, "the TOC names no notebook"


@pytest.mark.parametrize("path", TOC_NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_executed_in_order_without_errors(path):
    nb = load(path)
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code, "a chapter notebook must have code"
    counts = [c.get("execution_count") for c in code]
    assert counts == list(range(1, len(code) + 1)), f"cells not executed top to bottom: {counts}"
    for cell in code:
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        tags = cell.get("metadata", {}).get("tags", [])
        if errors:
            assert "raises-exception" in tags, f"stored error in a cell not tagged raises-exception:\n{cell['source'][:200]}"
        if "raises-exception" in tags:
            assert errors, "a cell tagged raises-exception must store the exception it demonstrates"
    assert nb["metadata"]["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("path", TOC_NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_deterministic_and_offline(path):
    nb = load(path)
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "set_determinism(" in code, "call course_pe.set_determinism first so outputs are reproducible"
    for forbidden in ("urlopen", "requests.get", "from_pretrained", "hf_hub_download", "wget ", "curl "):
        assert forbidden not in code, f"notebooks must not use the network ({forbidden})"
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            assert "image/svg+xml" not in data, "SVG outputs contain random ids and break nbval; use PNG"


@pytest.mark.parametrize("path", TOC_NOTEBOOKS, ids=lambda p: p.name)
def test_erratum_callouts_are_labelled(path):
    nb = load(path)
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"])
        for title in re.findall(r"\{admonition\}\s*(Errat(?:um|a)[^\n]*)", text):
            ids = ERRATUM_ID.findall(title.split(":")[0])
            assert ids, f"erratum callout without an ID: {title}"
            for erratum in ids:
                assert f"(erratum-{erratum.lower()})=" in text, f"{erratum} has no label for the errata chapter to link"
        if "{admonition} Errat" in text:
            assert ":class: warning erratum" in text


def test_the_slowest_notebooks_list_names_toc_notebooks():
    """make test starts these first (book_tools.longest_first); a renamed or removed notebook must leave the list."""
    toc = {p.relative_to(ROOT).as_posix() for p in TOC_NOTEBOOKS}
    assert set(book_tools.SLOWEST_NOTEBOOKS) <= toc, set(book_tools.SLOWEST_NOTEBOOKS) - toc
    ordered = book_tools.longest_first(TOC_NOTEBOOKS)
    assert sorted(ordered) == sorted(TOC_NOTEBOOKS)
    assert [p.relative_to(ROOT).as_posix() for p in ordered[:len(book_tools.SLOWEST_NOTEBOOKS)]] == list(book_tools.SLOWEST_NOTEBOOKS)
