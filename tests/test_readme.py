"""Every command the README gives runs somewhere: in .ci/run, in tools/smoke_commands.py (which .ci/run runs), in a
named test, or it is listed below with the reason it does not run."""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import smoke_commands  # noqa: E402

README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()

# Commands run by a test under tests/ (the test file must name them).
IN_TESTS = {
    "make grade": ("test_grade_folder.py", '"grade"'),  # runs the Makefile's grade recipe with a stub interpreter
    "python -m course_pe.benchmark": ("test_benchmark.py", "main(["),
    "make help": ("test_readme.py", '["make", "help"]'),  # test_make_help_lists_every_target below
}
# Commands that run nowhere, each with its reason.
NOT_RUN = {
    "make install": "every other target runs it first (its stamp), so every CI run installs",
    "make install-triton": "make test and make test-package run it first (their stamp), so every CI run installs it",
    "make execute": "rewrites the stored outputs in place; make test (nbval) proves they are what the code produces",
    "make mutation": "about 20 minutes on one core (tests/MUTATION.md), over what CI can spend on it",
    "make clean": "removes the build that the later CI steps need",
    "make distclean": "removes .venv as well",
    "make locale-update": "rewrites the translation catalogues after an English change; tests/test_zh_coverage.py "
                          "(make test) fails while a translation is missing, fuzzy or stale",
}


def readme_commands() -> set[str]:
    commands = {" ".join(m.split()[:2]) for m in re.findall(r"`(make\s+[a-z][a-z-]*)[^`]*`", README)}
    commands |= set(re.findall(r"^make [a-z][a-z-]*", README, flags=re.M))  # in code blocks
    commands |= {c for c in ("python -m course_pe.benchmark",) if c in README}
    return commands


def test_the_readme_names_commands():
    assert {"make book", "make test", "make pdf", "make book-student", "make lab-student"} <= readme_commands()


def test_every_readme_command_runs_in_ci_in_a_test_or_says_why_not():
    ci = set(re.findall(r"^make [a-z][a-z-]*", CI, flags=re.M))
    smoke = set(smoke_commands.COMMANDS) if "tools/smoke_commands.py" in CI else set()
    missing = sorted(c for c in readme_commands() if c not in ci | smoke | set(IN_TESTS) | set(NOT_RUN))
    assert not missing, f"README commands that run nowhere: {missing} (add them to .ci/run, a test, or NOT_RUN)"


def test_the_named_tests_do_run_their_commands():
    for command, (test_file, evidence) in IN_TESTS.items():
        assert evidence in (ROOT / "tests" / test_file).read_text(), f"{test_file} no longer runs {command}"


def test_the_makefile_has_every_target_the_readme_names():
    makefile = (ROOT / "Makefile").read_text()
    for command in readme_commands():
        if command.startswith("make "):
            target = command.split()[1]
            assert re.search(rf"^{re.escape(target)}:", makefile, flags=re.M), f"no Makefile target {target}"


def test_make_help_lists_every_target():
    """`make help` prints the Makefile's header, which names every target (and needs no .venv)."""
    import subprocess

    makefile = (ROOT / "Makefile").read_text()
    result = subprocess.run(["make", "help"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    targets = {t for line in re.findall(r"^\.PHONY:(.*)$", makefile, flags=re.M) for t in line.split()}
    assert {"book", "pdf", "help", "book-student", "book-zh"} <= targets
    missing = sorted(t for t in targets if not re.search(rf"make {re.escape(t)}\b", result.stdout))
    assert not missing, f"make help does not mention {missing}: add them to the Makefile's header"
    assert "#" not in result.stdout.splitlines()[0] and "make " in result.stdout
