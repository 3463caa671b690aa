"""The limited isolation level when the grader is root (a container without namespaces, such as Gradescope's).

Gradescope runs its autograder as root in a Docker container, where creating namespaces is usually refused; the
sandbox then falls back to the limited level. Before this hook the submission then ran as root: it could read the
autograder's files, write the results file, signal the grader and leave a process behind to rewrite the verdict
later. Now the child drops to a user id of its own (as at the full level), and every process of that user id is
killed when the sandbox closes.

The child can then import only what every user may read. The tests run the grader in a separate process under a
Python installation readable by everyone (``_world_python``: the system's Python with this project's packages), as
on Gradescope's image; where the test's own Python is not readable by everyone (a Python under /root), the sandbox
must refuse to start with a message that says so. Without root these tests do not apply.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from _grading import GOOD_SLOPES, GOOD_T5
from _world_python import readable_by_everyone, world_python
from course_pe.coursework.sandbox import Containment, Sandbox, _python_folders

pytestmark = pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0,
                                reason="the limited level as root needs root (Gradescope's container runs as root)")

# Runs under the world-readable Python, as root: forces the limited level and reports what the child could do.
SCRIPT = r'''
import json, os, sys, time
from course_pe.coursework.grade import grade_cells
from course_pe.coursework.sandbox import Sandbox, _new_uid

config = json.load(sys.stdin)
folder = config["folder"]
out = {}
probe = """
import os
uid = os.getuid()
denied, allowed = [], []
attempts = {
    'read a 0700 folder of root': lambda: open(FOLDER + '/source/answers.txt').read(),
    'list a 0700 folder of root': lambda: os.listdir(FOLDER + '/source'),
    'overwrite the results': lambda: open(FOLDER + '/results/results.json', 'w').write('{"score": 100}'),
    'add a file to the results': lambda: open(FOLDER + '/results/forged.json', 'w').write('x'),
    'signal the grader': lambda: os.kill(GRADER, 0),
    'become root': lambda: os.setuid(0),
}
for name, attempt in attempts.items():
    try:
        attempt()
        allowed.append(name)
    except PermissionError:
        denied.append(name)
PUBLIC = open(FOLDER + '/public.txt').read()
open('scratch.txt', 'w').write('its own folder is writable')
"""
with Sandbox(isolation="limited") as box:
    out["probe"] = box.run_cell(f"FOLDER = {folder!r}\nGRADER = {os.getpid()}\n" + probe, 120)
    out["answer"] = box.run_cell("import json\nANSWER = json.dumps(dict(uid=uid, denied=denied, allowed=allowed, "
                                 "public=PUBLIC))\ndef report():\n    return [ord(c) for c in ANSWER]", 60)
    got = box.call("report", (), 60)
    out["child"] = json.loads("".join(chr(int(c)) for c in got.value)) if got.status == "ok" else got.error
    survivor = f"""
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for _ in range(600):
            time.sleep(0.1)
            open({folder!r} + '/open/survivor.txt', 'w').write('still here')
    os._exit(0)
time.sleep(1.0)
"""
    out["survivor_cell"] = box.run_cell(survivor, 60)
    out["survivor_wrote"] = os.path.exists(folder + "/open/survivor.txt")
    first = _new_uid() - 1  # the uid of this sandbox (they are handed out in order)
out["uid_range"] = [first - 999, first + 1]
if os.path.exists(folder + "/open/survivor.txt"):
    os.unlink(folder + "/open/survivor.txt")
time.sleep(1.0)
out["survivor_after_close"] = os.path.exists(folder + "/open/survivor.txt")
report = grade_cells(config["cells"], "relative", isolation="limited")
out["score"], out["text"] = report.score, report.text()
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def limited_as_root():
    python = world_python()
    if python is None:
        pytest.skip("no system Python of this minor version that every user can read (see tests/_world_python.py)")
    folder = Path(tempfile.mkdtemp(prefix="course_pe_limited_root_"))
    try:
        os.chmod(folder, 0o755)
        (folder / "public.txt").write_text("anyone may read this")
        (folder / "source").mkdir(mode=0o700)
        (folder / "source" / "answers.txt").write_text("the reference")
        (folder / "results").mkdir(mode=0o755)
        (folder / "results" / "results.json").write_text('{"score": 0}')
        (folder / "open").mkdir()
        os.chmod(folder / "open", 0o777)  # writable by anyone: only the kill stops the survivor from writing here
        run = subprocess.run([str(python), "-c", SCRIPT], input=json.dumps(
            {"folder": str(folder), "cells": [GOOD_T5, GOOD_SLOPES]}), capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stderr[-3000:]
        result = json.loads(run.stdout.strip().splitlines()[-1])
        result["results_after"] = (folder / "results" / "results.json").read_text()
        result["forged"] = (folder / "results" / "forged.json").exists()
        yield result
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_child_runs_as_its_own_user_and_cannot_touch_roots_files(limited_as_root):
    assert limited_as_root["probe"] is None, limited_as_root["probe"]
    child = limited_as_root["child"]
    assert isinstance(child, dict), child
    low, high = limited_as_root["uid_range"]
    assert child["uid"] != 0 and low <= child["uid"] < high, child
    assert child["public"] == "anyone may read this"  # so the denials are permissions, not a missing path
    assert child["allowed"] == [] and len(child["denied"]) == 6, child
    assert limited_as_root["results_after"] == '{"score": 0}' and not limited_as_root["forged"]


def test_a_process_that_leaves_the_session_does_not_outlive_the_sandbox(limited_as_root):
    assert limited_as_root["survivor_cell"] is None and limited_as_root["survivor_wrote"]
    assert not limited_as_root["survivor_after_close"]


def test_grading_at_the_limited_level_as_root_reads_the_grading_build(limited_as_root):
    assert limited_as_root["score"] == 2, limited_as_root["text"]


def test_the_description_says_who_the_submission_runs_as(monkeypatch):
    from course_pe.coursework import sandbox

    limited = Containment("limited", memory_group="/sys/fs/cgroup/x", memory_version=2)
    monkeypatch.setattr(sandbox, "limited_drops_privileges", lambda: True)
    text = limited.description
    assert text.startswith("limited: no namespaces; the submission runs as a user id of its own"), text
    assert "memory by per-process address space" in text  # the limited child joins no cgroup
    assert "tree killed by process group and by user id" in text
    monkeypatch.setattr(sandbox, "limited_drops_privileges", lambda: False)
    assert limited.description.startswith("limited: no namespaces; the submission runs as the grader's user, root")


def test_the_drop_needs_a_python_every_user_can_read():
    """A Python under /root (mode 0700) cannot be imported by another user id: the limited level then keeps the old
    behaviour (the grader's user), and says so, rather than failing to start."""
    from course_pe.coursework.sandbox import limited_drops_privileges

    readable = all(readable_by_everyone(Path(f)) for f in _python_folders())
    assert limited_drops_privileges() == readable
    if not readable:
        with Sandbox(isolation="limited") as box:
            assert box.run_cell("import os\nassert os.getuid() == 0", 60) is None
