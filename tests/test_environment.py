"""The pins in requirements.txt and environment.yml are the same exact list."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def requirement_lines() -> list[str]:
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def conda_pip_lines() -> list[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = [d for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip) == 1, "environment.yml must have exactly one pip: section"
    return [str(x).strip() for x in pip[0]["pip"]]


def test_every_requirement_is_an_exact_pin():
    for line in requirement_lines():
        name, sep, version = line.partition("==")
        assert sep and name and version and not any(c in version for c in "<>*,; "), line


def test_conda_and_pip_pin_the_same_versions():
    assert sorted(conda_pip_lines(), key=str.lower) == sorted(requirement_lines(), key=str.lower)


def test_key_pins():
    pins = dict(line.split("==") for line in requirement_lines())
    lower = {k.lower().replace("_", "-"): v for k, v in pins.items()}
    assert lower["torch"] == "2.13.0"
    assert lower["jupyter-book"].startswith("1.")
    for needed in ("nbval", "pytest", "hypothesis", "sphinx-proof", "sphinx-exercise", "myst-nb", "sphinxcontrib-bibtex", "tqdm", "jupyterlab"):
        assert needed in lower, needed


def test_conda_python_matches_the_course_machines():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]


def test_make_and_binder_take_torch_from_the_same_cpu_index():
    """make install (Linux without a GPU) and Binder both install the CPU build of torch from PyTorch's CPU index."""
    import re

    makefile = (ROOT / "Makefile").read_text()
    index = re.search(r"^TORCH_CPU_INDEX \?= (\S+)$", makefile, flags=re.M).group(1)
    assert f"--extra-index-url {index}" in (ROOT / "binder" / "requirements.txt").read_text()
    assert "--no-deps --extra-index-url $(TORCH_CPU_INDEX) $(TORCH_PIN)" in makefile  # torch alone from that index
    assert "torch.version.cuda is not None" in makefile  # and a check that the CPU build landed
