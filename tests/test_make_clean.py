"""`make clean` removes only what a build makes again; grades and students' work go only with `make clean-coursework
CONFIRM=yes` (newcomer review 2026-11-28, finding 20: `make clean` used to delete grades/ and workbook/)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: what is a record, not a build output: never deleted by make clean or make distclean
COURSEWORK = ("grades", "workbook", "workbook-zh", "nbgrader", "submissions")
BUILT = ("_build", "gradescope", ".pytest_cache", ".hypothesis")

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _make(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", "-f", str(folder / "Makefile"), "-C", str(folder), *args],
                          capture_output=True, text=True, timeout=120)


def _deleted_paths(commands: str) -> set[str]:
    """The paths the `rm` and `find ... -exec rm` commands of ``commands`` (make -n output) name."""
    paths = set()
    for line in commands.splitlines():
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        if words[:1] == ["rm"]:
            paths |= {w.rstrip("/") for w in words[1:] if not w.startswith("-")}
        elif words[:1] == ["find"]:
            paths |= {words[words.index("-name") + 1]} if "-name" in words else set()
    return paths


def test_make_n_clean_touches_neither_grades_nor_students_work():
    done = subprocess.run(["make", "-n", "--no-print-directory", "clean"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=True)
    deleted = _deleted_paths(done.stdout)
    assert deleted >= {"_build", "gradescope"}, done.stdout  # the check can fail: it sees what clean removes
    assert not deleted & set(COURSEWORK), f"make clean would delete {sorted(deleted & set(COURSEWORK))}"
    distclean = subprocess.run(["make", "-n", "--no-print-directory", "distclean"], cwd=ROOT, capture_output=True,
                               text=True, timeout=120, check=True)
    assert not _deleted_paths(distclean.stdout) & set(COURSEWORK)


@pytest.fixture
def checkout(tmp_path):
    """A folder with the course's Makefile, build outputs and coursework, each holding a file."""
    shutil.copy2(ROOT / "Makefile", tmp_path / "Makefile")
    for name in BUILT + COURSEWORK:
        (tmp_path / name).mkdir()
        (tmp_path / name / "file").write_text(name)
    (tmp_path / "workbook" / "relative.ipynb").write_text("{}")
    (tmp_path / "course_pe" / "__pycache__").mkdir(parents=True)
    return tmp_path


def test_make_clean_keeps_grades_and_students_work(checkout):
    done = _make(checkout, "clean")
    assert done.returncode == 0, done.stderr
    assert all((checkout / name / "file").exists() for name in COURSEWORK)
    assert not any((checkout / name).exists() for name in BUILT)
    assert not (checkout / "course_pe" / "__pycache__").exists()
    assert "make clean-coursework" in done.stdout


def test_clean_coursework_lists_and_deletes_only_when_confirmed(checkout):
    asked = _make(checkout, "clean-coursework")
    assert asked.returncode != 0
    assert all((checkout / name / "file").exists() for name in COURSEWORK)  # nothing deleted
    for line in ("grades/    the gradebook", "workbook/  the student notebooks", "workbook-zh/  the Chinese student",
                 "nbgrader/  nbgrader's course",
                 "CONFIRM=yes"):
        assert line in asked.stdout, asked.stdout
    assert "1 notebooks" in asked.stdout  # it says how much would go
    done = _make(checkout, "clean-coursework", "CONFIRM=yes")
    assert done.returncode == 0, done.stderr
    assert not any((checkout / name).exists() for name in ("grades", "workbook", "workbook-zh", "nbgrader"))
    assert (checkout / "submissions" / "file").exists()  # the students' submissions are never make's to delete
    assert (checkout / "_build" / "file").exists()  # and it is not a clean of the build
    again = _make(checkout, "clean-coursework", "CONFIRM=yes")
    assert again.returncode == 0 and "nothing to delete" in again.stdout
