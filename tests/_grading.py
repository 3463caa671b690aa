"""Shared pieces of the grader's tests: correct and wrong answers for ``relative``, notebook files, sandbox processes."""

from __future__ import annotations

import csv
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import nbformat

from _class_tool import class_submissions_tool

TOOL = class_submissions_tool()
GOOD_T5 = TOOL.T5  # a correct student answer, written without course_pe
GOOD_SLOPES = TOOL.SLOPES
NAIVE_SLOPES = TOOL.NAIVE_SLOPES
STUB_T5 = TOOL.STUB_T5
STUB_SLOPES = TOOL.STUB_SLOPES
STUBS = STUB_T5 + "\n" + STUB_SLOPES
# the user ids of this process's sandboxes (course_pe.coursework.sandbox._new_uid); other graders on the machine use
# other ranges
SANDBOX_UIDS = range(1_500_000_000 + (os.getpid() % 400_000) * 1000, 1_500_000_000 + (os.getpid() % 400_000 + 1) * 1000)


def notebook(folder: Path, name: str, *sources: str, metadata: dict | None = None) -> Path:
    """Write a notebook with one code cell per source; return its path."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata.update(metadata or {})
    path = folder / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def scores(report) -> dict[str, tuple[float, str]]:
    return {e.exercise: (e.score, e.status) for e in report.exercises}


def sandbox_processes() -> list[int]:
    """PIDs of processes that run as one of this process's sandbox users (none may outlive grading)."""
    return processes_of(SANDBOX_UIDS)


# --------------------------------------------------------------------------- every assignment: right and wrong answers


def book_solutions(chapter_path: Path) -> dict[str, str]:
    """Exercise id -> source of the chapter's solution cell that defines it (the book's own answer)."""
    import ast

    from course_pe.coursework.exercises import EXERCISES

    nb = nbformat.read(chapter_path, as_version=4)
    found = {}
    for cell in nb.cells:
        if cell.cell_type == "code" and "solution" in cell.metadata.get("tags", []):
            for node in ast.parse(cell.source).body:
                for ex in EXERCISES.values():
                    if isinstance(node, ast.FunctionDef) and node.name == ex.function:
                        found[ex.id] = cell.source
    return found


# A typical wrong answer per exercise, made from the book's solution: (text in the solution, its replacement). Each is
# a mistake the check names (a classic mistake, several of them made by the course's sources).
TYPICAL_MISTAKES = {
    "sinusoidal_table": ("table[:, 1::2] = np.cos(positions * frequencies)",
                         "table[:, 1::2] = np.cos(positions * 10000.0 ** (-np.arange(1, d_model, 2) / d_model))"),
    "shift_matrix": ("[[c, s], [-s, c]]", "[[c, -s], [s, c]]"),
    "add_positional_encoding": ("math.sqrt(d) * embeddings", "embeddings"),
    "rope_rotation": ("angles = positions.to(torch.float64)", "angles = -positions.to(torch.float64)"),
    "t5_bucket": ("n = -relative_position", "n = relative_position"),
    "alibi_slopes": ("closest = 2 ** math.floor(math.log2(num_heads))", "closest = num_heads"),
    "half_to_interleaved": ("torch.stack([x[..., :half], x[..., half:]], dim=-1).flatten(-2)",
                            "torch.cat([x[..., 0::2], x[..., 1::2]], dim=-1)"),
    "t5_position_bias": ('return attn.t5(s, layer["k"].shape[2])', 'return attn.t5(s, layer["k"].shape[2], query_offset=0)'),
    "convert_qk_weight": ("perm = torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])",
                          "perm = torch.arange(head_dim).view(2, head_dim // 2).t().reshape(-1)"),
    "extrapolation_gap": ("loss_by_position[train_length:].nanmean() - loss_by_position[:train_length].nanmean()",
                          "loss_by_position[train_length - 1:].nanmean() - loss_by_position[:train_length - 1].nanmean()"),
}


def typical_mistake(solution: str, exercise_id: str) -> str:
    old, new = TYPICAL_MISTAKES[exercise_id]
    assert old in solution, f"the book's solution of {exercise_id} changed: update TYPICAL_MISTAKES"
    return solution.replace(old, new)


ROOT = Path(__file__).resolve().parents[1]
# How long a Ctrl-C test waits for the interrupted grader to exit, and how soon it must have exited. The grader kills
# every sandbox and writes the exports at once (about 0.1 s, also with three batches beside a make test); only workers
# whose sandbox was still starting can make it wait, up to 60 s (grade._INTERRUPT_GRACE), which STOP_SECONDS rejects.
# (The 60 s and 150 s timeouts seen in earlier runs were not slowness: those make test runs were started in the
# background of a non-interactive shell, whose children ignore SIGINT; see batch_with_stallers.)
CTRL_C_WAIT = 120
STOP_SECONDS = 30


def sigint_ignored(pid: int) -> bool:
    """Whether process ``pid`` ignores SIGINT (its SigIgn mask in /proc)."""
    with open(f"/proc/{pid}/status") as fh:
        mask = next(int(line.split()[1], 16) for line in fh if line.startswith("SigIgn:"))
    return bool(mask & (1 << (signal.SIGINT - 1)))


def grader_sandbox_uids(pid: int) -> range:
    """The sandbox user ids of the grading process ``pid`` (course_pe.coursework.sandbox._new_uid)."""
    base = 1_500_000_000 + (pid % 400_000) * 1000
    return range(base, base + 1000)


def processes_of(uids: range) -> list[int]:
    """PIDs of the processes owned by one of ``uids``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid in uids:
                    found.append(int(entry))
            except OSError:
                pass
    return found


@contextmanager
def batch_with_stallers(tmp_path: Path, *, sigint: str = "default"):
    """Start ``python -m course_pe.coursework.grade`` on a ``relative`` folder of two correct notebooks (a1, a2) and four
    that stall forever, two at a time; yield (the process, its grades folder) once a1 and a2 are recorded and a staller
    runs (the moment a Ctrl-C test interrupts it). The grader's temporary folder is ``tmp_path / "tmp"``. On leaving,
    a grader still running is killed (with it its sandboxes): a failing test leaves nothing behind.

    ``sigint``: ``"default"`` starts the grader as a terminal starts a foreground command, where Ctrl-C reaches it;
    ``"ignored"`` as a non-interactive shell starts a background command (``make grade ... &`` in a script), which
    ignores SIGINT. The grader inherits the disposition from this process, and pytest itself ignores SIGINT when it
    was started in the background of a script: without this choice, a Ctrl-C test would depend on how make test was
    started."""
    if sigint not in ("default", "ignored"):
        raise ValueError(f"sigint must be 'default' or 'ignored', not {sigint!r}")
    disposition = signal.SIG_DFL if sigint == "default" else signal.SIG_IGN
    folder = tmp_path / "relative"
    folder.mkdir()
    for name in ("a1", "a2"):
        notebook(folder, name, GOOD_T5, GOOD_SLOPES)
    staller = "import time\ntime.sleep(10**6)\n" + STUB_SLOPES
    for k in range(4):
        notebook(folder, f"z{k}", staller)
    out = tmp_path / "grades"
    (tmp_path / "tmp").mkdir()
    process = subprocess.Popen([sys.executable, "-m", "course_pe.coursework.grade", "--dir", str(folder), "--out",
                                str(out), "--jobs", "2", "--cell-timeout", "600", "--timeout", "900"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                               env=dict(os.environ, TMPDIR=str(tmp_path / "tmp")),
                               preexec_fn=lambda: signal.signal(signal.SIGINT, disposition))
    try:
        deadline = time.monotonic() + 300
        recorded: set[str] = set()
        while time.monotonic() < deadline and recorded != {"a1", "a2"}:
            time.sleep(0.5)
            recorded = recorded_students(out)
        assert recorded == {"a1", "a2"}, f"a1 and a2 were not recorded within 300 s: {recorded}"
        while time.monotonic() < deadline and not processes_of(grader_sandbox_uids(process.pid)):
            time.sleep(0.2)  # a staller's sandbox is starting
        assert processes_of(grader_sandbox_uids(process.pid)), "no staller was running"
        assert sigint_ignored(process.pid) == (sigint == "ignored")
        yield process, out
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=60)


def wide(out: Path) -> dict[str, dict[str, str]]:
    """The rows of ``out``'s grades_wide.csv, by student."""
    with (out / "grades_wide.csv").open(newline="") as fh:
        return {row["student"]: row for row in csv.DictReader(fh)}


def stopped_at_once(returncode: int, seconds: float, out: Path, process: subprocess.Popen | int, tmp_path: Path,
                    detail: str = "") -> None:
    """Assert what every stop of batch_with_stallers (or of a grader stopped the same way) must give: status 130 within
    STOP_SECONDS, a1 and a2 exported with full marks, and nothing left behind (stopped_cleanly). ``detail``: shown
    with a wrong status (the grader's stderr)."""
    assert returncode == 130, detail
    assert seconds < STOP_SECONDS, f"the grader took {seconds:.1f} s to stop"
    assert set(wide(out)) == {"a1", "a2"} and wide(out)["a1"]["total"] == "2"
    stopped_cleanly(process, tmp_path)


def stopped_cleanly(process: subprocess.Popen | int, tmp_path: Path) -> None:
    """Assert that the grader ``process`` (of batch_with_stallers, exited; or its PID) left no sandbox process and no
    work folder."""
    pid = process if isinstance(process, int) else process.pid
    deadline = time.monotonic() + 10  # a killed process can take a moment to be gone from /proc
    while processes_of(grader_sandbox_uids(pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_of(grader_sandbox_uids(pid)) == []
    assert list((tmp_path / "tmp").glob("course_pe_grading_*")) == []


def recorded_students(out: Path) -> set[str]:
    """The students in the gradebook under ``out`` (empty while it does not exist)."""
    try:
        with sqlite3.connect(out / "gradebook.sqlite") as db:
            return {s for (s,) in db.execute("SELECT DISTINCT student FROM grades")}
    except sqlite3.Error:
        return set()


@contextmanager
def grader_on_a_terminal(tmp_path: Path, folder: Path, out: Path, *options: str, foreground: bool = True):
    """Run the grader on ``folder`` with a terminal (a pty) for its standard streams, under a shell that is the
    terminal's session leader and, like make, passes no hang-up on (``trap : HUP``). ``foreground``: the grader is the
    terminal's foreground job (``ssh -t host 'make grade ...'``), else a job of its own in the background
    (``make grade ... & disown``). Yields (the shell, the grader's PID, hang_up); calling hang_up() closes the
    terminal's other side, as a closed window or a dropped SSH connection does. The grader's temporary folder is
    ``tmp_path / "tmp"``; a grader still running at the end is killed."""
    import fcntl
    import pty
    import select
    import termios
    import threading

    master, slave = pty.openpty()
    (tmp_path / "tmp").mkdir(exist_ok=True)
    script = ('trap : HUP; "$@"; exit $?' if foreground else
              'set -m; trap : HUP; "$@" & job=$!; while kill -0 $job 2>/dev/null; do sleep 0.2; done')
    shell = subprocess.Popen(["sh", "-c", script, "sh", sys.executable, "-m", "course_pe.coursework.grade", "--dir",
                              str(folder), "--out", str(out), *options], stdin=slave, stdout=slave, stderr=slave,
                             cwd=ROOT, env=dict(os.environ, TMPDIR=str(tmp_path / "tmp")), start_new_session=True,
                             preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))  # the controlling terminal
    os.close(slave)
    closing, closed = threading.Event(), threading.Event()

    def terminal() -> None:  # reads what is written to it, as a terminal would, until it is closed
        try:
            while not closing.is_set():
                if select.select([master], [], [], 0.2)[0]:
                    try:
                        os.read(master, 4096)
                    except OSError:
                        break
        finally:
            os.close(master)  # (here, not in another thread: a close during a read would wait for the read)
            closed.set()

    def hang_up() -> None:
        closing.set()
        assert closed.wait(10)

    threading.Thread(target=terminal, daemon=True).start()
    grader = 0
    try:
        deadline = time.monotonic() + 60
        while not grader and time.monotonic() < deadline:
            found = []
            for task in Path(f"/proc/{shell.pid}/task").glob("*"):
                found += (task / "children").read_text().split()
            grader = int(found[0]) if found else 0
            time.sleep(0.05)
        assert grader, "the grader did not start"
        yield shell, grader, hang_up
    finally:
        closing.set()
        for pid in (grader, shell.pid):
            try:
                if pid:
                    os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shell.wait(60)
