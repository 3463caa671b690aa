"""The grader on one submission, tried as a hostile or careless student would.

Each attack class of the red team's report (``/work/shared/reviews/2026-11-24-redteam.md``, section 1; numbers in
the test names' docstrings) is rebuilt here as a notebook or a list of cells, graded, and the grade and the state
of the machine afterwards are checked. Most tests call :func:`course_pe.coursework.grade.grade_cells`, the entry
point that ``make grade``, the folder grader and nbgrader's sandboxed autograde share; tests of files, names,
rosters, exports and whole classes are in ``test_grade_folder.py``. Time limits given to the grader here bound only
the hostile code; imports happen before any student code runs.
"""

from __future__ import annotations

import json
import os
import struct
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
import torch

from _grading import (
    GOOD_SLOPES,
    GOOD_T5,
    NAIVE_SLOPES,
    STUB_SLOPES,
    STUB_T5,
    STUBS,
    TOOL,
    notebook,
    sandbox_processes,
    scores,
)
from course_pe.coursework import _child
from course_pe.coursework.exercises import (
    EXERCISES,
    _alibi,
    _shift,
    _t5_buckets,
    _table,
    call_case,
    judge,
    library_sentence,
)
from course_pe.coursework.grade import answer_cells, grade_cells, grade_notebook
from course_pe.coursework.grading_build import package_folder, repository_root
from course_pe.coursework.sandbox import Containment, Sandbox, SandboxDied, SandboxLimits, containment

ROOT = Path(__file__).resolve().parent.parent
FULL = containment().level == "full"
needs_full_isolation = pytest.mark.skipif(not FULL, reason="needs root and namespaces (the limited isolation level "
                                          "does not contain a submission; see the instructor guide's threat model)")


def grade(*cells: str, exercises: tuple[str, ...] = ("t5_bucket", "alibi_slopes"), **options):
    return grade_cells(list(cells), "relative", exercises=list(exercises), **options)


# ----------------------------------------------------------------------------- honest submissions


def test_perfect_stub_partial(tmp_path):
    folder = tmp_path / "relative"
    folder.mkdir()
    perfect = grade_notebook(notebook(folder, "perfect", "print('chapter set-up')", GOOD_T5, GOOD_SLOPES), student="ada")
    assert perfect.score == 2 and perfect.max_score == 2 and not perfect.cell_errors, perfect.text()
    assert perfect.cells_run == [1, 2] and perfect.assignment == "relative"  # from the folder's name
    assert [(e.function, e.visible_cases, e.hidden_cases) for e in perfect.exercises] == [
        ("t5_bucket", 6, 3), ("alibi_slopes", 9, 3)]
    stub = grade(STUBS)
    assert stub.score == 0 and all(e.status == "failed" and "stub" in e.message for e in stub.exercises)
    partial = grade(GOOD_T5, NAIVE_SLOPES + "\n1 / 0")
    assert scores(partial) == {"t5_bucket": (1.0, "passed"), "alibi_slopes": (0.0, "failed")}
    message = partial.exercises[1].message
    assert message.index("what differs: value at head") < message.index("diagnosis") and "powers of two" in message
    assert any("ZeroDivisionError" in e for e in partial.cell_errors)


def test_a_correct_float32_submission_scores_full_marks():
    report = grade(TOOL.T5_INT32, TOOL.SLOPES32)
    assert report.score == 2, report.text()


def test_only_the_answer_cells_and_what_they_use_run():
    """Student problem 10, newcomer F3: the chapter's Java cell (javac under a memory limit) gave every student a cell
    error. Now only the cells that define the graded functions run, with the cells that define what they use."""
    javac = "import os, subprocess\nsubprocess.run(['javac', 'A.java'], check=True)\nassert False"
    training = "import time\ntime.sleep(600)\nmodel = 'trained'"
    helper = "import math\ndef _pow2(m):\n    return [2.0 ** (-8.0 * (h + 1) / m) for h in range(m)]\nBASE = 2"
    answer = ("def alibi_slopes(n):\n    c = BASE ** math.floor(math.log2(n))\n"
              "    return _pow2(c) + (_pow2(2 * c)[0::2][: n - c] if c != n else [])\n")
    check = "cpe.exercises.check_alibi_slopes(alibi_slopes)"
    cells = [javac, training, helper, answer, check, GOOD_T5]
    assert answer_cells(cells, ["t5_bucket", "alibi_slopes"]) == [2, 3, 5]
    report = grade(*cells, cell_timeout=30)
    assert report.score == 2 and not report.cell_errors and report.cells_run == [2, 3, 5], report.text()
    # a cell that does not parse but defines the function is run, so that its syntax error is reported
    broken = grade("def alibi_slopes(n):\n    return [1.0] *\n", GOOD_T5, "%time x = 1\ndef t5_bucket(*a):\n    pass")
    assert broken.cells_run == [0, 1, 2] and "SyntaxError" in broken.cell_errors[0]
    assert "no function named `alibi_slopes`" in broken.exercises[1].message


def test_a_hanging_cell_and_a_hanging_function_cost_only_themselves():
    report = grade("while True:\n    pass\ndef alibi_slopes(n):\n    return n", GOOD_T5, cell_timeout=2)
    assert scores(report) == {"t5_bucket": (1.0, "passed"), "alibi_slopes": (0.0, "failed")}, report.text()
    assert "no function named `alibi_slopes`" in report.exercises[1].message
    assert any("time limit of 2 s" in e for e in report.cell_errors)
    hanging = "def t5_bucket(*args):\n    while True:\n        pass\n"
    report = grade(hanging, GOOD_SLOPES, call_timeout=2)
    assert scores(report) == {"t5_bucket": (0.0, "failed"), "alibi_slopes": (1.0, "passed")}, report.text()
    assert "time limit" in report.exercises[0].message


# ----------------------------------------------------------------------------- A. the library (attacks 1-6)


def test_the_graded_functions_do_not_exist_in_the_sandbox():
    """Attacks 1-5: call the library, switch a lock off, keep the code from before a lock, precompute before a lock,
    reload, or import the real package. There is no lock: the sandbox's course_pe lacks the functions being graded and
    the coursework tools, and the real package is not on its file system."""
    tricks = f"""
import importlib, sys, types
import course_pe
attempts = {{}}
def attempt(name, fn):
    try:
        attempts[name] = fn()
    except BaseException as exc:
        attempts[name] = exc
attempt("lock off", lambda: importlib.import_module("course_pe.coursework.sandbox"))
attempt("precomputed", lambda: [course_pe.alibi_slopes(n, dtype=torch.float64) for n in range(1, 65)])
attempt("copied code", lambda: types.FunctionType(course_pe.alibi_slopes.__code__, course_pe.alibi.__dict__)(8))
attempt("reload", lambda: importlib.reload(course_pe.alibi).alibi_slopes(8))
sys.path[:0] = [{str(ROOT)!r}, {str(package_folder().parent)!r}]
for name in [m for m in sys.modules if m.startswith("course_pe")]:
    del sys.modules[name]
attempt("real package", lambda: importlib.import_module("course_pe.coursework.exercises").EXERCISES)
attempt("source file", lambda: open({str(package_folder() / "alibi.py")!r}).read())
def alibi_slopes(n):
    ok = [k for k, v in attempts.items() if not isinstance(v, BaseException)]
    if ok:
        return ok
    import course_pe
    return course_pe.alibi_slopes(n)
def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    return cpe.t5_relative_position_bucket(relative_position, bidirectional=bidirectional, num_buckets=num_buckets,
                                           max_distance=max_distance)
"""
    report = grade(tricks)
    assert report.score == 0, report.text()
    t5, slopes = (e.message for e in report.exercises)
    assert "course_pe.t5.t5_relative_position_bucket is not available" in t5
    assert library_sentence(["course_pe.t5.t5_relative_position_bucket"]) in t5  # the notebook's check says the same
    assert "course_pe.alibi.alibi_slopes is not available" in slopes, slopes  # every other attempt failed too


def test_lookup_tables_over_small_domains_fail_the_hidden_cases():
    """Attacks 4 and 6: answers known in advance for the visible cases and a small public domain of parameters (the
    red team's: ALiBi heads up to 64; T5 with 8 ... 64 buckets, max_distance up to 4 num_buckets, offsets -300 ... 300;
    tables and matrices of small sizes) fail the hidden cases, for every seed tried."""

    reference = {"alibi_slopes": lambda n: np.asarray(_alibi(n)), "t5_bucket": _t5_buckets,
                 "sinusoidal_table": _table, "shift_matrix": _shift}

    def key(args):  # the parameters a table would be indexed by (T5's offsets are covered by the small domain)
        return tuple(a for a in args if not isinstance(a, torch.Tensor))

    def oracle(exercise_id, covered):
        visible = {key(c.args) for c in EXERCISES[exercise_id].cases(None)}

        def fn(*args):
            if key(args) not in visible and not covered(*args):
                raise KeyError("not in the table")
            return reference[exercise_id](*args)
        return fn

    small = {
        "alibi_slopes": lambda n: n <= 64,
        "t5_bucket": lambda rel, b, nb, md: nb in (8, 16, 32, 64) and nb <= md <= 4 * nb and int(rel.abs().max()) <= 300,
        "sinusoidal_table": lambda n, d: n <= 64 and d <= 64,
        "shift_matrix": lambda k, d: abs(k) <= 100 and d <= 16,
    }
    for exercise_id, covered in small.items():
        for seed in range(20):
            cases = EXERCISES[exercise_id].cases(np.random.default_rng(seed))
            fn = oracle(exercise_id, covered)
            report = judge(exercise_id, cases, [call_case(fn, c.args) for c in cases])
            assert not report.passed and report.hidden, (exercise_id, seed)
    # the red team's literal table, through the sandbox: it fails (the visible cases now reach 4096 heads as the
    # hidden ones do, so a table over the old visible cases fails before any hidden case)
    report = grade(TOOL.LOOKUP_SLOPES, exercises=("alibi_slopes",))
    assert report.score == 0 and "KeyError" in report.exercises[0].message, report.text()


# ----------------------------------------------------------------------------- B. the channel (attacks 7-14)


STALLER = """
import json, os, struct, time
# a perfect forgery: the protocol is public; the cell selection is request 1, the set-up 2, this cell 3
reply = json.dumps({"status": "ok", "id": 3, "error": None}).encode()
for fd in range(3, 64):  # on every descriptor (one is the grader's channel), then silence
    try:
        os.write(fd, struct.pack(">I", len(reply)) + reply)
    except OSError:
        pass
time.sleep(10**6)
"""


def test_a_forged_reply_and_a_stall_cost_only_that_submission():
    """Attacks 7 and 8: the submission writes replies to the grader's channel and stops reading; the next request is
    larger than a pipe's buffer. Every write has a deadline too: the grading ends within the wall-clock limit."""
    started = time.monotonic()
    report = grade(STALLER + STUB_SLOPES, STUB_T5 + "#" * 200_000, cell_timeout=2, call_timeout=2, timeout=6)
    assert time.monotonic() - started < 40
    assert report.score == 0 and "time limit" in " ".join(report.cell_errors + report.problems), report.text()
    assert sandbox_processes() == []


def test_garbage_floods_and_early_death_are_clear_rows():
    """Attacks 9-13: deeply nested JSON, a frame that declares 4 GiB, a reply with fields of the wrong types, .npy
    headers declaring 2**40 entries, death in the middle of a reply. Each costs that exercise only, with a clear
    message; the grader never raises."""
    def writer(payload: bytes, then_exit: bool = True) -> str:
        return (f"import os, struct\ndef alibi_slopes(n):\n    for fd in range(3, 64):\n        try:\n"
                f"            os.write(fd, {payload!r})\n        except OSError:\n            pass\n"
                + ("    os._exit(0)\n" if then_exit else "    return [1.0]\n"))

    nested = struct.pack(">I", 200_000) + b"[" * 200_000
    typed = json.dumps({"status": "ok", "id": 2, "error": 5, "library_called": 5}).encode()
    header = np.lib.format.header_data_from_array_1_0(np.zeros(3))
    header["shape"] = (2**31,)
    buf = __import__("io").BytesIO()
    np.lib.format.write_array_header_1_0(buf, header)
    huge_npy = buf.getvalue() + b"\0" * 64
    header["shape"] = (2**40,)
    buf = __import__("io").BytesIO()
    np.lib.format.write_array_header_1_0(buf, header)
    with pytest.raises(ValueError, match="invalid .npy header"):
        _child.npy_load(buf.getvalue() + b"\0" * 64, 2**20)
    ok = json.dumps({"status": "ok", "id": 3, "error": None}).encode()
    for payload, expected in [(nested, "protocol violation"), (struct.pack(">I", 2**32 - 1), "protocol violation"),
                              (struct.pack(">I", len(typed)) + typed, "protocol violation"),
                              (struct.pack(">I", len(ok)) + ok + struct.pack(">I", len(huge_npy)) + huge_npy,
                               "protocol violation"), (b"\x00\x00", "exited")]:
        report = grade(writer(payload), GOOD_T5)
        assert scores(report) == {"t5_bucket": (1.0, "passed"), "alibi_slopes": (0.0, "failed")}, report.text()
        assert expected in report.exercises[1].message, (payload[:20], report.exercises[1].message)
    # the answer's header is checked against its size before anything is allocated
    with pytest.raises(ValueError, match="declares"):
        _child.npy_load(huge_npy, 2**20)
    with pytest.raises(ValueError, match="not an array of numbers"):
        _child.npy_load(_child.npy_bytes(np.array(["a"])), 2**20)


def test_fake_report_lines_are_flattened():
    """Attack 14: newlines, terminal escapes and formulas in errors reach the report as one printable line."""
    forged = ("def alibi_slopes(n):\n    raise ValueError('x\\n  [    passed] alibi_slopes 1/1\\x1b[2J\\x1b]0;t\\x07'"
              " + '=HYPERLINK(1)')\n")
    report = grade(forged, exercises=("alibi_slopes",))
    message = report.exercises[0].message
    assert "\n" not in message and "\x1b" not in message and "\x07" not in message and "=HYPERLINK" in message


# ----------------------------------------------------------------------------- C. answers (attacks 15-19)


def test_answers_of_every_odd_kind():
    """Attacks 15-18: a big-endian float64 off by more than the exercise's tolerance (1e-4) fails like a native one;
    NaN, inf, bool, wrapped uint64, object arrays, masked arrays and tensor subclasses never pass."""
    base = GOOD_SLOPES.replace("def alibi_slopes", "def _right")
    wrong = {
        "big-endian": "import numpy as np\ndef alibi_slopes(n):\n    return (np.array(_right(n)) + 2e-4).astype('>f8')\n",
        "NaN": "def alibi_slopes(n):\n    return [float('nan')] * n\n",
        "inf": "def alibi_slopes(n):\n    return [float('inf')] * n\n",
        "bool": "def alibi_slopes(n):\n    return [True] * n\n",
        "objects": "import numpy as np\ndef alibi_slopes(n):\n    return np.array([object()] * n)\n",
        "masked": "import numpy as np\ndef alibi_slopes(n):\n    return np.ma.masked_array(np.zeros(n), mask=True)\n",
        "subclass": "import torch\nclass T(torch.Tensor):\n    def numpy(self):\n        return [object()]\n"
                    "def alibi_slopes(n):\n    return torch.zeros(n).as_subclass(T)\n",
    }
    for name, body in wrong.items():
        report = grade(base, body, exercises=("alibi_slopes",))
        assert report.score == 0, (name, report.text())
    report = grade(base, "import numpy as np\ndef alibi_slopes(n):\n    return np.array(_right(n)).astype('>f8')\n",
                   exercises=("alibi_slopes",))
    assert report.score == 1, report.text()  # the right values in big-endian order pass
    buckets = GOOD_T5.replace("return bucket + torch.where(n < max_exact, n, large)",
                              "return (bucket + torch.where(n < max_exact, n, large)).numpy().astype('uint64') "
                              "+ (2**64 - 2048)")
    assert grade(buckets, exercises=("t5_bucket",)).score == 0


def test_scalar_answers_keep_their_shape():
    """Attack 19: a float or a 0-d tensor answer used to arrive with shape (1,), so extrapolation_gap could never pass."""
    for answer in ("float(loss_by_position[train_length:].nanmean() - loss_by_position[:train_length].nanmean())",
                   "loss_by_position[train_length:].nanmean() - loss_by_position[:train_length].nanmean()"):
        report = grade_cells([f"def extrapolation_gap(loss_by_position, train_length):\n    return {answer}\n"],
                             "extrapolation")
        assert report.score == 1, report.text()
    assert _child.npy_load(_child.npy_bytes(np.float64(2.5)), 64).shape == ()


# ----------------------------------------------------------------------------- D. the machine (attacks 20-27, 47)


@pytest.fixture(params=["as found", "none"])
def cgroups(request, monkeypatch) -> Containment:
    """What contains a submission: the cgroups this machine has ("as found"), and none at all, the fallback of a
    full-level machine whose cgroups cannot be used (per-process memory limit, per-user process limit, the tree killed
    with its PID namespace; every report says which). A pure cgroup v2 host cannot be shown on this hybrid one."""
    from course_pe.coursework import grade as grade_module
    from course_pe.coursework import sandbox as sandbox_module

    if request.param == "none":
        where = Containment("full", notes=("no cgroups (forced by the test)",))
        for module in (sandbox_module, grade_module):  # the sandboxes, and the reports' description
            monkeypatch.setattr(module, "containment", lambda: where)
    return sandbox_module.containment()


@needs_full_isolation
def test_memory_is_bounded_for_the_whole_tree(cgroups):
    """Attack 20: five children of the submission each take 300 MiB and hold it, under a 1 GiB limit for the whole
    tree (a per-process limit let 64 processes take 2 GiB each). The cgroup's OOM killer ends children until the tree
    fits: at most three hold their memory at once."""
    hog = """
import os, select, signal, time
r, w = os.pipe()
children = []
for _ in range(5):
    pid = os.fork()
    if pid == 0:
        block = bytearray(300 * 2**20)
        os.write(w, b"x")
        time.sleep(600)
    children.append(pid)
dead = set()
def reap():
    for p in children:
        if p not in dead and os.waitpid(p, os.WNOHANG)[0]:
            dead.add(p)
held, deadline = 0, time.monotonic() + 20
while held + len(dead) < 5 and time.monotonic() < deadline:
    if select.select([r], [], [], 0.2)[0]:
        held += len(os.read(r, 16))
    reap()
time.sleep(0.3)
reap()
alive = len(children) - len(dead)
def alibi_slopes(n):
    raise RuntimeError(f"alive {alive}")
"""
    where = cgroups
    report = grade(hog, exercises=("alibi_slopes",), limits=SandboxLimits(memory_bytes=2**30), cell_timeout=60)
    message = report.exercises[0].message
    assert "alive" in message, report.text()
    alive = int(message.split("alive ")[1].split(";")[0])
    if where.memory_group:
        assert alive <= 3 and "memory by cgroup" in report.isolation, report.text()
    else:  # no memory cgroup: each process is limited, not the tree (the report says so)
        assert alive == 5 and "per-process address space" in report.isolation
    assert sandbox_processes() == []


def _host_state(token: str) -> dict[str, list[str]]:
    return {folder: sorted(p for p in os.listdir(folder) if token in p) if os.path.isdir(folder) else []
            for folder in ("/run/lock", "/var/tmp", "/dev/shm", "/tmp", str(ROOT), "/")}


@needs_full_isolation
def test_nothing_written_survives_and_the_disk_is_bounded():
    """Attack 21: only the sandbox's own tmpfs /tmp (and /dev/shm inside it) can be written; /run/lock and /var/tmp
    do not exist there; nothing is left on the machine; the tmpfs size is the disk quota."""
    token = uuid.uuid4().hex
    before = _host_state(token)
    attack = f"""
import os
results = {{}}
for folder in ["/run/lock", "/var/tmp", "/dev/shm", "/tmp", "/", "/usr", {str(ROOT)!r}, {str(Path(os.sys.prefix))!r}, "/grading"]:
    try:
        with open(os.path.join(folder, "{token}"), "w") as fh:
            fh.write("x")
        results[folder] = "written"
    except OSError as exc:
        results[folder] = type(exc).__name__
written = 0
try:
    for i in range(100):
        with open(f"/tmp/fill{{i}}", "wb") as fh:
            fh.write(b"0" * (32 * 2**20))
        written += 1
except OSError as exc:
    results["quota"] = f"{{written}} {{exc.strerror}}"
def alibi_slopes(n):
    raise RuntimeError(repr(results))
"""
    report = grade(attack, exercises=("alibi_slopes",), limits=SandboxLimits(tmp_bytes=64 * 2**20))
    results = eval(report.exercises[0].message.split("RuntimeError: ")[1].split("; hint")[0])  # noqa: S307 - our text
    assert {k for k, v in results.items() if v == "written"} == {"/dev/shm", "/tmp"}, results
    assert results["/run/lock"] == results["/var/tmp"] == "FileNotFoundError"
    assert results["quota"] == "1 No space left on device" or results["quota"].endswith("No space left on device")
    assert _host_state(token) == before


@needs_full_isolation
def test_no_process_outlives_grading(cgroups):
    """Attack 22: a child that calls setsid, a replaced os._exit, a double fork into the background: all die with the
    sandbox (PID namespace and cgroup), and the sandbox's cgroups are removed."""
    survivor = """
import os, subprocess, time
subprocess.Popen(["sh", "-c", "sleep 600 &"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(600)
    os._exit(0)
os._exit = lambda code: time.sleep(600)
""" + STUB_SLOPES
    report = grade(survivor, exercises=("alibi_slopes",))
    assert report.score == 0
    assert ("cgroup.kill" if cgroups.kill_group else "tree killed with its PID namespace") in report.isolation
    time.sleep(0.5)
    assert sandbox_processes() == []
    for group in {cgroups.kill_group, cgroups.memory_group, cgroups.pids_group} - {None}:
        assert not [d for d in os.listdir(group) if d.startswith(f"{os.getpid()}-")], group


@needs_full_isolation
def test_the_number_of_processes_is_bounded(cgroups):
    """A fork bomb: the submission's processes (threads included) are bounded by ``limits.processes``, by the pids
    cgroup where there is one, else by the per-user limit of the sandbox's own user id."""
    bomb = """
import os, time
started = 0
try:
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
        started += 1
except OSError as exc:
    stopped = exc.strerror
else:
    stopped = "never"
def alibi_slopes(n):
    raise RuntimeError(f"started {started}; {stopped};")
"""
    report = grade(bomb, exercises=("alibi_slopes",), limits=SandboxLimits(processes=32))
    message = report.exercises[0].message
    assert "started" in message, report.text()
    started = int(message.split("started ")[1].split(";")[0])
    assert 1 <= started < 32 and "Resource temporarily unavailable" in message, message
    assert ("processes by cgroup" if cgroups.pids_group else "processes by per-user limit") in report.isolation
    time.sleep(0.5)
    assert sandbox_processes() == []


@needs_full_isolation
def test_a_sandbox_cannot_touch_its_neighbours():
    """Attacks 23 and 47: kill(-1), signals to every PID, ptrace: a sandbox sees only its own processes (its own PID
    namespace and user id); a neighbour graded at the same time is unaffected. No network either."""
    attack = """
import os, signal, socket
seen = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
for pid in range(2, 40000):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2)
    net = "connected"
except OSError as exc:
    net = type(exc).__name__
def alibi_slopes(n):
    raise RuntimeError(f"{seen} {net}")
"""
    reports = {}

    def run(name, *cells):
        reports[name] = grade(*cells, cell_timeout=60)

    threads = [threading.Thread(target=run, args=("attacker", attack)),
               threading.Thread(target=run, args=("honest", GOOD_T5, GOOD_SLOPES + "\nimport time\ntime.sleep(3)"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert reports["honest"].score == 2, reports["honest"].text()
    message = reports["attacker"].exercises[1].message
    assert "[1] " in message and "connected" not in message, message


def test_a_sandbox_outlives_the_thread_that_started_the_template():
    """The neighbours flake (issue 34): the template process asked for SIGKILL when its parent died, and the parent is
    the thread that forked it. A template started by one grading thread died when that thread finished, and took with
    it the sandbox another thread was still using ("its process died (the sandbox process exited)"). The template now
    belongs to a thread that lives as long as it does."""
    from course_pe.coursework import sandbox as sandbox_module

    level = containment().level
    sandbox_module._zygote(level).close()  # the next sandbox starts a template, from the thread below
    started, release = threading.Event(), threading.Event()

    def starter() -> None:
        with Sandbox(isolation=level):
            started.set()
            release.wait(300)

    thread = threading.Thread(target=starter)
    thread.start()
    try:
        assert started.wait(300), "the first sandbox did not start"
        with Sandbox(isolation=level) as box:
            release.set()
            thread.join(300)
            time.sleep(1.0)  # the parent-death signal would have been delivered by now
            assert box.run_cell("def double(x):\n    return 2 * x", 120) is None
            outcome = box.call("double", (np.arange(3),), 120)
            assert outcome.status == "ok" and outcome.value.tolist() == [0, 2, 4]
    finally:
        release.set()
        thread.join(300)


@needs_full_isolation
def test_the_sandbox_sees_no_solutions_no_grades_no_submissions(tmp_path):
    """Attacks 24-26, 33 and 36 (reconnaissance, exfiltration through messages, other readable copies of the
    solutions, symlinked or late submissions reading a classmate's folder): the sandbox's root holds the system and
    Python folders only. A world-readable copy of the book elsewhere, the submissions folder and the gradebook do
    not exist there, so error messages can carry nothing that matters."""
    copy = tmp_path / "srv" / "course" / "book" / "part2"
    copy.mkdir(parents=True)
    (copy / "relative.ipynb").write_text((ROOT / "book/part2/relative.ipynb").read_text())
    os.chmod(tmp_path, 0o755)
    classmate = tmp_path / "relative"
    classmate.mkdir()
    notebook(classmate, "bob", GOOD_T5, GOOD_SLOPES)
    targets = [str(copy / "relative.ipynb"), str(classmate / "bob.ipynb"), str(ROOT / "book"), str(ROOT / ".git"),
               str(repository_root() or ROOT), "/home", "/srv", "/root/.bash_history", "/proc/1/environ"]
    probe = f"""
import os, sys
flags = "".join("1" if os.path.exists(t) else "0" for t in {targets!r})
python = set(sys.path) | {{sys.prefix, sys.base_prefix}}
notebooks = []
for top in sorted(set(os.listdir("/")) - {{"usr", "proc", "sys", "dev", "etc", "lib", "lib32", "lib64", "bin", "sbin"}}):
    for folder, dirs, files in os.walk("/" + top):
        dirs[:] = [d for d in dirs if os.path.join(folder, d) not in python]
        notebooks += [os.path.join(folder, f) for f in files if f.endswith(".ipynb")]
with open("/proc/self/mountinfo") as fh:
    named = {str(tmp_path)!r} in fh.read()
def alibi_slopes(n):
    raise RuntimeError(f"flags {{flags}} notebooks {{len(notebooks)}} named {{named}} first {{notebooks[:1]}}")
"""
    report = grade_notebook(notebook(classmate, "mallory", probe), student="mallory", out=tmp_path / "grades")
    message = report.exercises[1].message
    flags = message.split("flags ")[1].split()[0]
    visible = {t for t, flag in zip(targets, flags) if flag == "1"}
    assert visible <= {str(repository_root() or ROOT), "/proc/1/environ"}, visible  # a bare folder holding .venv
    assert "notebooks 0 named False" in message, message  # no notebook; the submissions folder is not even named


def test_the_environment_names_nothing_of_the_grader(tmp_path):
    spy = "import os, sys\ndef alibi_slopes(n):\n    raise RuntimeError(repr(dict(os.environ)) + os.getcwd() + repr(sys.path))\n"
    report = grade(spy, exercises=("alibi_slopes",))
    text = report.exercises[0].message
    assert "COURSE_PE_THREADS" in text  # the spy did report the environment
    assert "VIRTUAL_ENV" not in text and "PWD" not in text and str(tmp_path) not in text and "PYTEST" not in text


def test_the_sandbox_api_refuses_a_level_it_cannot_give():
    if not FULL:
        with pytest.raises(ValueError, match="not available"):
            Sandbox(isolation="full")
    with Sandbox(isolation="limited") as box:  # the fallback for a grader that is not root
        assert box.run_cell("import os\nassert 'VIRTUAL_ENV' not in os.environ", 60) is None
        assert box.run_cell(GOOD_SLOPES, 60) is None
        outcome = box.call("alibi_slopes", (6,), 60)
        assert outcome.status == "ok" and outcome.value.shape == (6,)
        assert box.call("nothing_here", (1,), 60).status == "missing"
    with pytest.raises(SandboxDied):
        box.run_cell("x = 1", 60)


def test_kill_all_does_not_wait_for_a_sandbox_being_closed(monkeypatch):
    """Ctrl-C kills every live sandbox in turn (kill_all). A sandbox that its own thread is closing is held while
    close() waits for its processes to exit (up to 30 s for the keeper, 30 s for the cgroups on a slow machine);
    close() has killed them first, so kill_all must not wait for it. Here the keeper's wait is made 15 s long."""
    from course_pe.coursework import sandbox as sandbox_module

    box = Sandbox()
    box.start()
    keeper = box._keeper_pidfd
    assert keeper >= 0
    real_select = sandbox_module.select.select
    closing = threading.Event()

    def slow_select(rlist, wlist, xlist, timeout=None):
        if rlist == [keeper]:  # close() waiting for the keeper: a machine where it takes 15 s
            closing.set()
            time.sleep(15)
        return real_select(rlist, wlist, xlist, timeout)

    monkeypatch.setattr(sandbox_module.select, "select", slow_select)
    closer = threading.Thread(target=box.close)
    closer.start()
    try:
        assert closing.wait(60)
        started = time.monotonic()
        assert sandbox_module.kill_all() == 1  # the box is still live (close() removes it at its end)
        seconds = time.monotonic() - started
    finally:
        closer.join(120)
    assert seconds < 8, f"kill_all waited {seconds:.1f} s for a sandbox being closed"
    assert not closer.is_alive() and box._keeper_pidfd == -1
    assert sandbox_processes() == []


# ----------------------------------------------------------------------------- the grading environment (issue 34)


@needs_full_isolation
def test_the_sandbox_has_only_what_grading_needs():
    """Red team N1: transformers (T5's bucket function, BLOOM's slopes) was importable in the sandbox. The sandbox's
    site-packages now show only the distributions grading needs (course_pe.coursework.environment); the base
    installation's show nothing, so adding them to sys.path finds nothing either. The answer that imports
    transformers gets 0, and its report says why in the words of the notebook's check."""
    from course_pe.coursework.environment import allowed_entries, other_site_folders, site_folders

    folders = site_folders()
    names = ("transformers", "huggingface_hub", "safetensors", "nbgrader", "pytest", "hypothesis", "pandas", "numpy",
             "torch", "matplotlib.pyplot", "tqdm", "IPython.core.oinspect")
    expected = {folder: list(allowed_entries(folder)) for folder in folders}
    probe = f"""
import importlib, os, sys
import numpy as np
found = []
for name in {names!r}:
    try:
        importlib.import_module(name)
        found.append(1)
    except ImportError:
        found.append(0)
sys.path[:0] = {other_site_folders()!r}
try:
    import boto3, scipy
    found.append(1)
except ImportError:
    found.append(0)
listing = [int(sorted(os.listdir(f)) == entries) for f, entries in {expected!r}.items()]
hidden = [int(not os.path.isdir(f) or os.listdir(f) == []) for f in {other_site_folders()!r}]
def probe():
    return np.array(found + listing + hidden)
"""
    with Sandbox(unavailable=["course_pe.alibi.alibi_slopes"]) as box:
        assert box.run_cell(probe, 120) is None
        values = box.call("probe", (), 60).value.tolist()
    found = dict(zip(names + ("the base installation's packages",), values[: len(names) + 1]))
    assert found == {"transformers": 0, "huggingface_hub": 0, "safetensors": 0, "nbgrader": 0, "pytest": 0,
                     "hypothesis": 0, "pandas": 0, "numpy": 1, "torch": 1, "matplotlib.pyplot": 1, "tqdm": 1,
                     "IPython.core.oinspect": 1, "the base installation's packages": 0}, found
    assert all(values[len(names) + 1:]), values  # exactly the allowed entries; the base installation's: none


@pytest.mark.parametrize("level", ["limited"] + (["full"] if FULL else []))
def test_an_answer_from_transformers_gets_0_and_the_checks_sentence(level):
    """Red team N1 at both levels: at the limited level (no mounts) the sandbox's sys.path holds links to the
    packages grading needs only, so the verdict is the same as at the full level (there a convenience, not a wall)."""
    from course_pe.coursework.environment import unavailable_sentence

    pytest.importorskip("transformers")
    transformers_answer = ("from transformers.models.t5.modeling_t5 import T5Attention\n"
                           "def t5_bucket(r, b=True, nb=32, md=128):\n"
                           "    return T5Attention._relative_position_bucket(r, b, nb, md)\n")
    report = grade(transformers_answer, GOOD_SLOPES, isolation=level)
    assert scores(report) == {"t5_bucket": (0.0, "failed"), "alibi_slopes": (1.0, "passed")}, report.text()
    assert unavailable_sentence(["transformers"]) in report.exercises[0].message
    assert any("No module named 'transformers'" in e and unavailable_sentence(["transformers"]) in e
               for e in report.cell_errors)


def test_an_answer_cell_that_imports_the_checker_keeps_its_function():
    """Red team N9: `from course_pe.coursework.exercises import check_t5_bucket` at the top of an answer cell (as the
    workbook teaches the checks) raised ModuleNotFoundError in the sandbox before the def: the correct function got 0.
    The grading build has a stand-in for the checker whose checks run nothing and say so."""
    t5 = f"from course_pe.coursework.exercises import check_t5_bucket\n{GOOD_T5}\nprint(check_t5_bucket(t5_bucket))\n"
    slopes = f"{GOOD_SLOPES}\nprint(cpe.exercises.check_alibi_slopes(alibi_slopes))\n" \
             "import course_pe.coursework.exercises as checks\nreport = checks.check('alibi_slopes', alibi_slopes)\n"
    report = grade(t5, slopes)
    assert report.score == 2 and not report.cell_errors, report.text()


def test_each_sandbox_has_a_cpu_share_and_a_system_call_filter():
    """Red team N2 and N3: no CPU cgroup per sandbox (fairness came from the kernel's autogroup), no seccomp filter.
    Where the machine has them, each sandbox's processes are in a cpu cgroup of their own, with the same weight as every
    other sandbox's and a quota of one core, and run under a seccomp filter that refuses namespaces, mounts, keyrings,
    BPF, userfaultfd, ptrace, io_uring (and the x32 ABI), while fork, threads and subprocesses work. The isolation
    line of every report names both."""
    where = containment()
    probe = """
import ctypes, os, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
def refused(result):
    return result == -1 and ctypes.get_errno() == 1
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
results = {
    "seccomp": int(status["Seccomp"]), "no_new_privs": int(status["NoNewPrivs"]),
    "unshare": refused(libc.unshare(0x10000000)), "mount": refused(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)),
    "keyctl": refused(libc.syscall(250 if os.uname().machine == "x86_64" else 219, 0, 0, 0, 0)),
    "bpf": refused(libc.syscall(321 if os.uname().machine == "x86_64" else 280, 0, 0, 0)),
    "x32 getpid": refused(libc.syscall(0x40000000 | 39)) if os.uname().machine == "x86_64" else True,
    "subprocess": subprocess.run(["/bin/true"]).returncode == 0,
    "cgroup": open("/proc/self/cgroup").read(),
}
pid = os.fork()
if pid == 0:
    os._exit(3)
results["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 3
thread = threading.Thread(target=lambda: results.setdefault("thread", True))
thread.start()
thread.join()
def alibi_slopes(n):
    raise RuntimeError(repr(results))
"""
    box = Sandbox(unavailable=["course_pe.alibi.alibi_slopes"])
    with box:
        assert box.run_cell(probe, 120) is None
        if where.level == "full" and where.cpu_group:
            cpu = box._cgroups.folders["cpu"]
            members = open(os.path.join(cpu, "cgroup.procs")).read().split()
            assert str(box._child) in members
            if where.cpu_version == 1:
                assert open(os.path.join(cpu, "cpu.cfs_quota_us")).read().strip() == \
                    open(os.path.join(cpu, "cpu.cfs_period_us")).read().strip()
                assert open(os.path.join(cpu, "cpu.shares")).read().strip() == "1024"
            else:
                quota, period = open(os.path.join(cpu, "cpu.max")).read().split()
                assert quota == period
        outcome = box.call("alibi_slopes", (8,), 60)
    results = eval(outcome.error.split("RuntimeError: ", 1)[1])
    assert results["fork"] and results.get("thread") and results["subprocess"], results
    if where.seccomp:
        assert results["seccomp"] == 2 and results["no_new_privs"] == 1
        assert all(results[k] for k in ("unshare", "mount", "keyctl", "bpf", "x32 getpid")), results
        assert "system calls filtered by seccomp" in where.description
    if where.level == "full" and where.cpu_group:
        assert "CPU by cgroup" in where.description and "course_pe_grading" in results["cgroup"]
