"""Run untrusted submission code in a contained child process and talk to it over a hostile channel.

The grader (trusted) runs each submission in a fresh child process. How it is contained depends on what the machine
allows; :func:`containment` finds out once and every report states it (:attr:`Containment.description`).

**Processes.** A template process (the *zygote*, ``course_pe.coursework._child``) imports NumPy, PyTorch and
IPython once and never runs submission code. For each submission it forks a *keeper* (root), which creates new
mount, PID, network, IPC and UTS namespaces and forks the *child*, PID 1 of the new PID namespace, which first joins
the submission's cgroups. Killing the child kills every process of the submission (the kernel ends a PID namespace
with its init); the grader also kills the submission's cgroup where there is one and waits until the keeper has
reaped the child. If the grader dies, the zygote dies
(parent-death signal), each keeper then kills its child (the keeper is root and runs no submission code, so nothing
the submission does can clear that signal).

**What the child sees** (the *full* isolation level: the grader is root and namespaces work). A root file system
built for it on a tmpfs: the system folders (``/usr``, ``/etc``, ``/lib*``, ``/bin``) and the Python installation,
bound read-only, its site-packages showing only what grading needs (``course_pe.coursework.environment``: no
``transformers``, nothing that ships the answers); ``/grading``, a copy of ``course_pe`` built for the assignment
without the functions being graded and without the coursework tools (``course_pe.coursework.grading_build``); a private
``/proc``; a few device nodes; and ``/tmp``, the only writable place, a tmpfs of ``tmp_bytes`` (the disk quota; also
``/dev/shm``). The repository, the book, the gradebook, the submissions, ``/run``, ``/var``, ``/home`` and
everything else do not exist there, so nothing written survives grading. No network (an empty network namespace),
its own user id (one per sandbox, so sandboxes cannot signal each other), ``no_new_privs``.

**Limits.** Memory and the number of processes of the whole tree by cgroup (``memory_bytes``, ``processes``) where
the machine offers one (cgroup v2, or v1 controllers on a hybrid machine); otherwise an address-space limit per
process and a process limit per user id. A cpu cgroup gives each sandbox the same weight as its neighbours and at
most one core. CPU seconds, file size and open files per process. A seccomp filter (``_child.seccomp_program``),
where the kernel offers one, refuses new namespaces, mounts, keyrings, BPF, userfaultfd, ptrace and io_uring, at
both levels. Every read and write on the channel has a deadline and a size cap.

**The channel is hostile.** Student code runs in the process that answers the grader, so it can write anything to
the channel or stop reading it. Every request carries an id that the reply must repeat; a reply that is not a frame
of the expected size, not JSON, not of the expected form, or late, ends that child and costs that submission only.
Answers are arrays of numbers in ``.npy`` form, read without pickle after their header has been checked against
their size.

**The limited level** (the grader is not root, or namespaces do not work): the child runs as the grader's user in a
fresh temporary folder with the same environment and per-process limits, and a ``sys.path`` that holds links to the
packages grading needs only (the same modules as the full level, so the same verdicts; not a wall: the files stay
readable). It can read what that user can read (the book included) and may leave processes behind; the grader
refuses this level unless asked for it explicitly. When the grader is root but namespaces do not work (a container without the capability, such as Gradescope's), and Python and
its packages are readable by every user, the child still drops to a user id of its own with ``no_new_privs`` and a
process limit (:func:`limited_drops_privileges`): it can read only what every user may read, cannot write the
grader's files or signal the grader, and every process it leaves is killed by that user id.
"""

from __future__ import annotations

import atexit
import errno
import itertools
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from . import _child
from .environment import allowed_entries, missing_modules, other_site_folders, site_folders
from ._cells import PARSE_LOCK
from .grading_build import grading_build, package_folder, remove_work_root, repository_root, work_root

__all__ = ["Containment", "Sandbox", "SandboxDied", "SandboxLimits", "SandboxTimeout", "allow_new", "containment",
           "isolation_level", "kill_all", "limited_drops_privileges", "prepare"]

_CHILD_SCRIPT = Path(_child.__file__).resolve()
_REPLY_LIMIT = 64 * 1024  # a JSON reply frame
_STATUSES = ("ok", "error", "stub", "missing", "invalid")


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one submission's sandbox (bytes, seconds, counts).

    ``memory_bytes`` and ``processes`` bound the whole process tree where a cgroup is available (see
    :class:`Containment`), else each process (address space) and the sandbox's user id. ``tmp_bytes`` is the size of
    the private ``/tmp`` (full isolation), its disk quota. ``answer_bytes`` caps one answer array;
    ``startup_seconds`` bounds starting the child and running the declared set-up (imports, not student code).
    """

    memory_bytes: int = 3 * 2**30
    cpu_seconds: int = 1200
    file_bytes: int = 64 * 2**20
    processes: int = 64
    open_files: int = 256
    tmp_bytes: int = 256 * 2**20
    answer_bytes: int = 16 * 2**20
    startup_seconds: float = 300.0

    def __post_init__(self) -> None:
        from .._validation import check_float, check_positive_int

        for name in ("memory_bytes", "cpu_seconds", "file_bytes", "processes", "open_files", "tmp_bytes",
                     "answer_bytes"):
            check_positive_int(name, getattr(self, name))
        check_float("startup_seconds", self.startup_seconds, minimum=0.0, strict_minimum=True)


class SandboxTimeout(Exception):
    """The child did not answer (or read) in time; it has been killed."""


class SandboxDied(Exception):
    """The child exited, or broke the protocol; it has been killed."""


# --------------------------------------------------------------------------- what the machine allows


@dataclass(frozen=True)
class Containment:
    """How submissions are contained on this machine (found once by :func:`containment`).

    ``level``: ``"full"`` (root, namespaces, fresh root file system) or ``"limited"``. The cgroup fields name the
    folders under which a cgroup per submission is created: ``kill_group`` (cgroup v2, for ``cgroup.kill``),
    ``memory_group``, ``pids_group`` and ``cpu_group`` with ``memory_version``/``pids_version``/``cpu_version`` 1 or
    2; None where unavailable. ``seccomp``: the kernel filters system calls (seccomp with the ``errno`` action) on an
    architecture whose system call numbers the sandbox knows. ``notes``: why something is unavailable.
    """

    level: str
    kill_group: str | None = None
    memory_group: str | None = None
    memory_version: int = 0
    pids_group: str | None = None
    pids_version: int = 0
    notes: tuple[str, ...] = ()
    cpu_group: str | None = None
    cpu_version: int = 0
    seccomp: bool = False

    def __post_init__(self) -> None:
        from .._validation import check_bool, check_choice, check_int, check_optional_str, check_str_sequence

        check_choice("level", self.level, ("full", "limited"))
        for name in ("kill_group", "memory_group", "pids_group", "cpu_group"):
            check_optional_str(name, getattr(self, name))
        for name in ("memory_version", "pids_version", "cpu_version"):
            check_int(name, getattr(self, name), minimum=0, maximum=2)
        check_str_sequence("notes", self.notes, kind=tuple)
        check_bool("seccomp", self.seccomp)

    @property
    def description(self) -> str:
        """One line for every report, with the level, then how memory, processes and the tree's end are enforced."""
        full = self.level == "full"
        if full:
            parts = ["full: namespaces (mount, PID, network, IPC, UTS), fresh read-only root, tmpfs /tmp"]
        elif limited_drops_privileges():
            parts = ["limited: no namespaces; the submission runs as a user id of its own (the grader is root)"]
        elif os.name == "posix" and os.geteuid() == 0:
            parts = ["limited: no namespaces; the submission runs as the grader's user, root (Python is not readable "
                     "by other users, so it cannot drop to a user id of its own)"]
        else:
            parts = ["limited: no namespaces; the submission runs as the grader's user"]
        # the limited child joins no cgroup (see Sandbox.start): only the full level uses them
        parts.append(f"memory by cgroup v{self.memory_version}" if full and self.memory_group else
                     "memory by per-process address space (no memory cgroup)")
        parts.append(f"processes by cgroup v{self.pids_version}" if full and self.pids_group else
                     "processes by per-user limit (no pids cgroup)")
        parts.append(f"CPU by cgroup v{self.cpu_version} (an equal share, at most one core)" if full and self.cpu_group
                     else "CPU shared by the kernel's scheduler (no cpu cgroup)")
        parts.append("system calls filtered by seccomp (no namespaces, mounts, keyrings, BPF, ptrace, io_uring)"
                     if self.seccomp else "no seccomp filter (not available here)")
        if full and self.kill_group:
            parts.append("tree killed by cgroup.kill")
        elif full:
            parts.append("tree killed with its PID namespace")
        elif limited_drops_privileges():
            parts.append("tree killed by process group and by user id")
        else:
            parts.append("tree killed by process group only")
        return "; ".join(parts)


def _mountinfo() -> list[tuple[str, str, str]]:
    """(mount point, file system type, super options) of every mount."""
    out = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                fields = line.split()
                if "-" not in fields:
                    continue
                dash = fields.index("-")
                point = fields[4].encode().decode("unicode_escape")
                out.append((point, fields[dash + 1], fields[dash + 3] if len(fields) > dash + 3 else ""))
    except OSError:
        pass
    return out


def _own_cgroups() -> dict[str, str]:
    """Controller list (``""`` for cgroup v2) -> this process's cgroup path."""
    own: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as fh:
            for line in fh:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                own[controllers] = path
    except (OSError, ValueError):
        pass
    return own


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _try_group(base: str, files: tuple[str, ...]) -> bool:
    """Create ``base`` and a probe cgroup inside it; True if the probe has every file in ``files`` (writable)."""
    probe = os.path.join(base, f"probe-{os.getpid()}")
    try:
        os.makedirs(base, exist_ok=True)
        os.mkdir(probe)
    except OSError:
        return False
    try:
        return all(os.access(os.path.join(probe, f), os.W_OK) for f in files)
    finally:
        try:
            os.rmdir(probe)
        except OSError:
            pass


def _clean_stale(base: str) -> None:
    """Remove empty per-submission cgroups left by graders that died (named ``<pid>-<n>``)."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        pid = name.split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            try:
                os.rmdir(os.path.join(base, name))
            except OSError:
                pass


def _seccomp_works() -> bool:
    """Whether a process started as the sandbox's are can install the sandbox's seccomp filter, and the filter then
    refuses what it should (a probe process installs it and tries ``unshare``)."""
    if not _child.seccomp_available():
        return False
    try:
        probe = subprocess.run([sys.executable, "-I", "-S", str(_CHILD_SCRIPT), "--seccomp-probe"],
                               capture_output=True, timeout=60, env=_sandbox_env(), cwd="/")
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0


@lru_cache(maxsize=1)
def containment() -> Containment:
    """Find out once what this machine allows: the isolation level and the cgroups (see :class:`Containment`)."""
    notes = []
    level = "limited"
    if os.name != "posix" or sys.platform != "linux":
        notes.append("not Linux")
    elif os.geteuid() != 0:
        notes.append("the grader is not root")
    elif shutil.which("unshare") is None:
        notes.append("no unshare")
    else:
        try:
            probe = subprocess.run(["unshare", "--mount", "--net", "--pid", "--ipc", "--uts", "--fork", "true"],
                                   capture_output=True, timeout=60)
            level = "full" if probe.returncode == 0 else "limited"
            if probe.returncode:
                notes.append("namespaces are not available: " + probe.stderr.decode("utf-8", "replace")[-200:])
        except (OSError, subprocess.SubprocessError) as exc:
            notes.append(f"unshare failed: {exc}")
    seccomp = _seccomp_works()
    if not seccomp:
        notes.append("no seccomp filter (the kernel, the container or this architecture does not allow one)")
    if os.name != "posix" or os.geteuid() != 0:
        return Containment(level, notes=tuple(notes + ["no cgroups (they need root)"]), seccomp=seccomp)
    mounts = _mountinfo()
    own = _own_cgroups()
    name = "course_pe_grading"
    kill_group = memory_group = pids_group = cpu_group = None
    memory_version = pids_version = cpu_version = 0
    v2_points = [point for point, fstype, _ in mounts if fstype == "cgroup2"]
    for point in v2_points[:1]:
        own_path = own.get("", "/")
        for base in (os.path.join(point, name), os.path.join(point, own_path.lstrip("/"), name)):
            if not _try_group(base, ("cgroup.kill", "cgroup.procs")):
                continue
            kill_group = base
            available = set()
            try:
                with open(os.path.join(os.path.dirname(base), "cgroup.subtree_control")) as fh:
                    available = set(fh.read().split())
                wanted = [c for c in ("memory", "pids", "cpu") if c in available]
                if wanted:
                    _write(os.path.join(base, "cgroup.subtree_control"), " ".join("+" + c for c in wanted))
            except OSError as exc:
                notes.append(f"cgroup v2 controllers not enabled at {base}: {exc.strerror}")
            if _try_group(base, ("memory.max",)):
                memory_group, memory_version = base, 2
            if _try_group(base, ("pids.max",)):
                pids_group, pids_version = base, 2
            if _try_group(base, ("cpu.weight", "cpu.max")):
                cpu_group, cpu_version = base, 2
            break
    v1 = {}
    for point, fstype, options in mounts:
        if fstype == "cgroup":
            for controller in options.split(","):
                v1.setdefault(controller, point)
    for controller, limit_files in (("memory", ("memory.limit_in_bytes",)), ("pids", ("pids.max",)),
                                    ("cpu", ("cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us"))):
        if controller in v1 and not {"memory": memory_group, "pids": pids_group, "cpu": cpu_group}[controller]:
            own_path = next((p for c, p in own.items() if controller in c.split(",")), "/")
            base = os.path.join(v1[controller], own_path.lstrip("/"), name)
            if _try_group(base, (*limit_files, "cgroup.procs")):
                if controller == "memory":
                    memory_group, memory_version = base, 1
                elif controller == "pids":
                    pids_group, pids_version = base, 1
                else:
                    cpu_group, cpu_version = base, 1
    if not kill_group:
        notes.append("no cgroup v2 with cgroup.kill")
    if not cpu_group:
        notes.append("no cpu cgroup (CPU shares come from the kernel's scheduler)")
    for base in {kill_group, memory_group, pids_group, cpu_group} - {None}:
        _clean_stale(base)
    return Containment(level, kill_group, memory_group, memory_version, pids_group, pids_version, tuple(notes),
                       cpu_group, cpu_version, seccomp)


def _readable_by_everyone(path: str) -> bool:
    """True if ``path`` can be read, and it and every folder above it entered, by any user (mode bits)."""
    import stat

    real = Path(os.path.realpath(path))
    try:
        for folder in [real, *real.parents]:
            mode = os.stat(folder).st_mode
            if not mode & stat.S_IXOTH or (folder == real and not mode & stat.S_IROTH):
                return False
    except OSError:
        return False
    return True


@lru_cache(maxsize=1)
def limited_drops_privileges() -> bool:
    """Whether the *limited* level runs the submission as a user id of its own: the grader is root (namespaces are
    unavailable, as in a container) and the Python installation and its packages are readable by every user (the
    child must import them after dropping root). Otherwise the child runs as the grader's user."""
    return os.name == "posix" and os.geteuid() == 0 and all(_readable_by_everyone(f) for f in _python_folders())


def isolation_level() -> str:
    """``"full"`` or ``"limited"`` (see :class:`Containment`)."""
    return containment().level


#: the period of a sandbox's CPU quota (microseconds): one period of CPU time per period, one core
_CPU_PERIOD_US = 100_000


class _Cgroups:
    """The cgroups of one submission: created with their limits, joined by its child, killed, removed."""

    _serial = itertools.count()

    def __init__(self, where: Containment, limits: SandboxLimits) -> None:
        self.where = where
        name = f"{os.getpid()}-{next(self._serial)}"
        self.folders: dict[str, str] = {}
        for role, base in (("kill", where.kill_group), ("memory", where.memory_group), ("pids", where.pids_group),
                           ("cpu", where.cpu_group)):
            if base and base not in self.folders.values():
                folder = os.path.join(base, name)
                os.mkdir(folder)
                self.folders[role] = folder
            elif base:
                self.folders[role] = os.path.join(base, name)
        memory = self.folders.get("memory")
        if memory:
            if where.memory_version == 2:
                _write(os.path.join(memory, "memory.max"), str(limits.memory_bytes))
                for extra, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                    if os.path.exists(os.path.join(memory, extra)):
                        _write(os.path.join(memory, extra), value)
            else:
                _write(os.path.join(memory, "memory.limit_in_bytes"), str(limits.memory_bytes))
                if os.path.exists(os.path.join(memory, "memory.memsw.limit_in_bytes")):
                    _write(os.path.join(memory, "memory.memsw.limit_in_bytes"), str(limits.memory_bytes))
        pids = self.folders.get("pids")
        if pids:
            _write(os.path.join(pids, "pids.max"), str(limits.processes))
        cpu = self.folders.get("cpu")
        if cpu:  # every sandbox the same weight against its neighbours, and never more than one core
            if where.cpu_version == 2:
                _write(os.path.join(cpu, "cpu.weight"), "100")
                _write(os.path.join(cpu, "cpu.max"), f"{_CPU_PERIOD_US} {_CPU_PERIOD_US}")
            else:
                _write(os.path.join(cpu, "cpu.shares"), "1024")
                _write(os.path.join(cpu, "cpu.cfs_period_us"), str(_CPU_PERIOD_US))
                _write(os.path.join(cpu, "cpu.cfs_quota_us"), str(_CPU_PERIOD_US))

    @property
    def procs_files(self) -> list[str]:
        return [os.path.join(f, "cgroup.procs") for f in dict.fromkeys(self.folders.values())]

    def _members(self) -> list[int]:
        pids: set[int] = set()
        for procs in self.procs_files:
            try:
                with open(procs) as fh:
                    pids.update(int(p) for p in fh.read().split())
            except (OSError, ValueError):
                pass
        return sorted(pids)

    def kill(self) -> None:
        """Kill every process in the cgroups (``cgroup.kill`` where available, else each member by PID)."""
        if "kill" in self.folders:
            try:
                _write(os.path.join(self.folders["kill"], "cgroup.kill"), "1")
            except OSError:
                pass
        for _ in range(100):
            members = self._members()
            if not members:
                return
            for pid in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.01)

    def oom_killed(self) -> bool:
        memory = self.folders.get("memory")
        if not memory:
            return False
        name = "memory.events" if self.where.memory_version == 2 else "memory.oom_control"
        try:
            with open(os.path.join(memory, name)) as fh:
                for line in fh:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and int(value) > 0:
                        return True
        except (OSError, ValueError):
            pass
        return False

    def remove(self, wait: float = 30.0) -> None:
        """Kill what is left, wait (up to ``wait`` seconds) until every process has exited, remove the cgroups."""
        deadline = time.monotonic() + wait
        for folder in reversed(list(dict.fromkeys(self.folders.values()))):
            while True:
                try:
                    os.rmdir(folder)  # refused while a process (even one still exiting) is in the cgroup
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    self.kill()
                    time.sleep(0.01)


# --------------------------------------------------------------------------- the zygote


def _sandbox_env() -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "MPLBACKEND": "Agg",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "COURSE_PE_THREADS": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def _python_folders() -> list[str]:
    """The folders the child needs to run this interpreter and import NumPy, PyTorch and IPython."""
    import site

    folders = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
               os.path.dirname(os.path.realpath(sys.executable)), *site.getsitepackages()}
    real = sorted({os.path.realpath(f) for f in folders if f and os.path.isdir(f)}, key=len)
    top: list[str] = []
    for folder in real:
        if not any(folder == t or folder.startswith(t.rstrip("/") + "/") for t in top):
            top.append(folder)
    return top


_SYSTEM_FOLDERS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def _hidden_site_folders() -> list[str]:
    """Site-packages folders a graded submission sees empty: the base installation's (for a virtual environment) and
    the system's Pythons' (``/usr/lib/python3*/…``, ``/usr/local/lib/python3*/…``), other than this Python's."""
    import glob

    own = set(site_folders())
    found = list(other_site_folders())
    for pattern in ("/usr/lib/python3*/*-packages", "/usr/local/lib/python3*/*-packages"):
        found += [os.path.realpath(f) for f in sorted(glob.glob(pattern)) if os.path.isdir(f)]
    return [f for f in dict.fromkeys(found) if f not in own]


def _start_owned(args: list[str], **popen: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(args, **popen)`` started from a thread of its own that lives exactly as long as the process.

    The template process asks the kernel for SIGKILL when its parent dies (``PR_SET_PDEATHSIG``), and for the kernel
    the parent is the *thread* that forked it, not the grader process: a template started by a worker thread (a test's
    thread, nbgrader's, a restart inside a batch's worker) was killed when that thread finished, and with it every
    sandbox it had forked, a neighbour's included (the neighbours flake of issue 34). The owner thread below forks the
    template, then waits for it, so the template dies with the grader and with nothing else."""
    started: dict[str, Any] = {}
    ready = threading.Event()

    def own() -> None:
        try:
            proc = started["proc"] = subprocess.Popen(args, **popen)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            started["error"] = exc
            ready.set()
            return
        ready.set()
        try:
            proc.wait()  # the parent-death signal must not fire before the template itself has exited
        except Exception:  # noqa: BLE001 - nothing to report to: the caller sees the process die
            pass

    owner = threading.Thread(target=own, name="course_pe-sandbox-template", daemon=True)
    owner.start()
    ready.wait()
    if "error" in started:
        raise started["error"]
    return started["proc"]


def _linked_site() -> Path:
    """A folder of this grader's work root holding a symbolic link to each site-packages entry grading needs
    (:func:`course_pe.coursework.environment.allowed_entries`; the first folder wins a name), readable by every
    user: the limited level's only site-packages folder."""
    folder = work_root() / "site"
    if folder.is_dir():
        return folder
    partial = Path(tempfile.mkdtemp(prefix="site-", dir=work_root()))
    for source in site_folders():
        for entry in allowed_entries(source):
            link = partial / entry
            if not os.path.lexists(link):
                os.symlink(os.path.join(source, entry), link)
    os.chmod(partial, 0o755)
    try:
        os.rename(partial, folder)
    except OSError:  # another thread made it first
        shutil.rmtree(partial, ignore_errors=True)
    return folder


class _Zygote:
    """The template process (see the module docstring); one per grader process and isolation level."""

    def __init__(self, level: str) -> None:
        self.level = level
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self.stderr = tempfile.TemporaryFile()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # the full level shows the real site-packages folders, restricted by mounts in each sandbox; the limited level
        # has no mounts: its sys.path holds a folder of links to what grading needs instead (the same modules, so that
        # both levels give the same verdicts; at this level that is a convenience, not a wall)
        site = site_folders() if self.level == "full" else [str(_linked_site())]
        config = {"control": theirs.fileno(), "grader_pid": os.getpid(), "site": site}
        try:
            self.proc = _start_owned([sys.executable, "-I", "-S", str(_CHILD_SCRIPT), json.dumps(config)],
                                     pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self.stderr, cwd="/",
                                     env=_sandbox_env(), start_new_session=True)
        finally:
            theirs.close()
        self.sock = ours
        ours.settimeout(timeout)
        try:
            hello = json.loads(ours.recv(1 << 16) or b"{}")
        except (OSError, ValueError) as exc:
            self.close()
            raise SandboxDied(f"the sandbox template could not start ({exc}); {self.stderr_tail()}") from None
        if hello.get("status") != "ready":
            self.close()
            raise SandboxDied(f"the sandbox template could not start: {hello.get('error') or self.stderr_tail()}")

    def stderr_tail(self) -> str:
        try:
            self.stderr.seek(0, os.SEEK_END)
            size = self.stderr.tell()
            self.stderr.seek(max(0, size - 600))
            return self.stderr.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def spawn(self, request: dict[str, Any], fds: tuple[int, int], timeout: float) -> dict[str, Any]:
        with self.lock:
            if not self.alive():
                self.start(timeout)
            assert self.sock is not None
            self.sock.settimeout(timeout)
            try:
                socket.send_fds(self.sock, [json.dumps(request).encode()], list(fds))
                reply = json.loads(self.sock.recv(1 << 16) or b"{}")
            except (OSError, ValueError) as exc:
                self.close()
                raise SandboxDied(f"the sandbox template failed ({exc}); {self.stderr_tail()}") from None
        if not isinstance(reply, dict):
            raise SandboxDied("the sandbox template sent an invalid reply")
        return reply

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
            self.proc = None


_ZYGOTES: dict[str, _Zygote] = {}
_ZYGOTES_LOCK = threading.Lock()


def _zygote(level: str) -> _Zygote:
    with _ZYGOTES_LOCK:
        if level not in _ZYGOTES:
            _ZYGOTES[level] = _Zygote(level)
        return _ZYGOTES[level]


def prepare(level: str, timeout: float = 300.0) -> None:
    """Start the template process for ``level`` now, from the calling thread (it dies when this thread does:
    call it from the main thread before grading in worker threads). ``level``: ``"full"`` or ``"limited"``;
    ``timeout``: seconds for the start (the imports)."""
    from .._validation import check_choice, check_float

    check_choice("level", level, ("full", "limited"))
    check_float("timeout", timeout, minimum=0.0, strict_minimum=True)
    if level == "full" and containment().level != "full":
        raise ValueError("level 'full' is not available here (" + "; ".join(containment().notes) + ")")
    zygote = _zygote(level)
    with zygote.lock:
        if not zygote.alive():
            zygote.start(timeout)


@atexit.register
def _shutdown() -> None:
    kill_all()
    for zygote in list(_ZYGOTES.values()):
        zygote.close()
    remove_work_root()


# --------------------------------------------------------------------------- one submission's sandbox


_SERIAL = itertools.count()
_LIVE: set[Sandbox] = set()
_LIVE_LOCK = threading.Lock()


def _new_uid() -> int:
    """A user id for one sandbox: unused by real accounts, different for every sandbox this process starts (up to
    1000 at once) and for every grading process alive (its pid)."""
    return 1_500_000_000 + (os.getpid() % 400_000) * 1000 + next(_SERIAL) % 1000


def _user_processes(uid: int) -> list[int]:
    """PIDs of the live (not zombie) processes whose real, effective, saved or file-system user id is ``uid``."""
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="utf-8", errors="replace") as fh:
                status = dict(line.rstrip("\n").split(":", 1) for line in fh if ":" in line)
        except OSError:
            continue
        uids = status.get("Uid", "").split()
        if str(uid) in uids and status.get("State", "").strip()[:1] not in ("Z", "X"):
            found.append(int(entry))
    return found


def _kill_user(uid: int, rounds: int = 200) -> None:
    """Kill every process of user ``uid`` (a sandbox's own user id), again until none is left: a process forked
    between two rounds is caught in the next, and its user's process limit bounds how many can exist."""
    for _ in range(rounds):
        pids = _user_processes(uid)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.005)


_REFUSING = threading.Event()
# How long kill() waits for a sandbox that another thread holds: start() holds it for a moment, close() while it waits
# (up to a minute) for the killed processes to exit and removes the cgroups.
_KILL_LOCK_WAIT = 2.0


def kill_all(refuse_new: bool = False) -> int:
    """Kill the processes of every live sandbox (for Ctrl-C); with ``refuse_new``, sandboxes started from now on
    fail at once until :func:`allow_new`. Returns how many were live."""
    from .._validation import check_bool

    if check_bool("refuse_new", refuse_new):
        _REFUSING.set()
    with _LIVE_LOCK:
        live = list(_LIVE)
    for box in live:
        box.kill()
    return len(live)


def allow_new() -> None:
    """Let sandboxes start again after ``kill_all(refuse_new=True)``."""
    _REFUSING.clear()


def _watchdog() -> None:  # pragma: no cover - a daemon thread; tested through grade's stall tests
    while True:
        time.sleep(0.5)
        now = time.monotonic()
        with _LIVE_LOCK:
            late = [box for box in _LIVE if box.deadline is not None and now > box.deadline + 5.0]
        for box in late:
            box.kill()


_WATCHDOG = threading.Thread(target=_watchdog, name="course_pe-sandbox-watchdog", daemon=True)


class Sandbox:
    """One submission's contained child process. Use as a context manager (or ``start``/``close``).

    ``unavailable``: dotted names of the course_pe functions the grading build leaves out (the implementations of
    the exercises being graded); ``limits``: :class:`SandboxLimits`; ``isolation``: ``"full"`` or ``"limited"``
    (default: what :func:`containment` found); ``hide``: extra folders that must not be visible (the gradebook, the
    submissions; at the full level they are absent anyway unless they lie inside a system or Python folder);
    ``deadline``: a ``time.monotonic()`` value after which every operation fails and the watchdog kills the child.
    Every method raises :class:`SandboxTimeout` or :class:`SandboxDied` after killing the child when it does not
    answer properly in time.
    """

    def __init__(self, *, unavailable: list[str] | tuple[str, ...] = (), limits: SandboxLimits | None = None,
                 isolation: str | None = None, hide: list[Path] | None = None, deadline: float | None = None) -> None:
        from .._validation import check_choice, check_float, check_str_sequence

        check_str_sequence("unavailable", list(unavailable) if isinstance(unavailable, tuple) else unavailable,
                           nonempty_items=True)
        if limits is not None and not isinstance(limits, SandboxLimits):
            raise TypeError(f"limits must be a SandboxLimits, got {type(limits).__name__}")
        self.unavailable = tuple(unavailable)
        self.limits = limits or SandboxLimits()
        self.where = containment()
        self.isolation = check_choice("isolation", isolation, ("full", "limited")) if isolation is not None \
            else self.where.level
        if self.isolation == "full" and self.where.level != "full":
            raise ValueError("isolation 'full' is not available here (" + "; ".join(self.where.notes) + ")")
        self.hide = _check_folders("hide", hide)
        self.deadline = check_float("deadline", deadline) if deadline is not None else None
        self._to_child = self._from_child = -1
        self._pidfd = self._keeper_pidfd = -1
        self._child = self._keeper = 0
        self._cgroups: _Cgroups | None = None
        self._workdir: Path | None = None
        self._uid: int | None = None  # the limited level's own user id, when the grader is root
        self._id = 0
        self._buffer = b""
        self._lock = threading.RLock()
        self._killed = False  # kill() was called: a child that starts afterwards is stopped at once
        self.oom_killed = False

    @property
    def description(self) -> str:
        """The containment of this sandbox, for reports."""
        if self.isolation == self.where.level:
            return self.where.description
        return Containment(self.isolation, notes=self.where.notes, seccomp=self.where.seccomp).description

    # -- life cycle

    def start(self) -> None:
        """Start the child and run nothing yet (``limits.startup_seconds``)."""
        if _REFUSING.is_set():
            raise SandboxDied("grading was interrupted")
        build = grading_build(self.unavailable)
        deadline = self._deadline(self.limits.startup_seconds)
        zygote = _zygote(self.isolation)
        memory_by_cgroup = bool(self.where.memory_group)
        request: dict[str, Any] = {
            "level": self.isolation, "limits": self.limits.__dict__, "env": _sandbox_env(), "build": str(build),
            "memory_by_cgroup": memory_by_cgroup, "cgroups": [], "must_be_absent": [],
            "seccomp": self.where.seccomp,
        }
        if self.isolation == "full":
            package = package_folder()
            repo = repository_root()
            # The grader's /tmp is replaced by the sandbox's own tmpfs, so a submissions or gradebook folder that *is*
            # /tmp is hidden by construction (the check "absent" would find the fresh /tmp); folders below it are
            # hidden like any other.
            fresh_tmp = os.path.realpath("/tmp")
            kept = [p for p in self.hide if os.path.realpath(p) != fresh_tmp]
            hide = [str(p) for p in [package, repo, *kept] if p is not None]
            request.update({
                "root_mount": str(work_root() / "root"), "uid": _new_uid(), "tmp_bytes": self.limits.tmp_bytes,
                "system": [f for f in _SYSTEM_FOLDERS if os.path.lexists(f)], "python": _python_folders(),
                "site": {folder: list(allowed_entries(folder)) for folder in site_folders()},
                "site_hidden": _hidden_site_folders(),
                "hide": sorted(set(hide), key=len),
                # what the submission must not see (a bare folder may remain where a kept one lies inside it)
                "must_be_absent": [str(package / "__init__.py"), str(package / "coursework" / "exercises.py"),
                                   *([str(repo / "book"), str(repo / "_toc.yml")] if repo is not None else []),
                                   *[str(p) for p in kept]],
            })
        else:
            request["memory_by_cgroup"] = False  # the limited child joins no cgroup
            self._workdir = Path(tempfile.mkdtemp(prefix="course_pe_sandbox_"))
            request["workdir"] = str(self._workdir)
            request["python"] = []
            if limited_drops_privileges():
                # Root without namespaces (a container such as Gradescope's): the child still drops to a user id of
                # its own, so that it cannot read what only root reads, write the grader's results, signal or trace
                # the grader, and every process it leaves can be found by that user id. The grading build lies in
                # the private work folder: that user may pass through it (no listing) to the build's 0755 folders.
                self._uid = request["uid"] = _new_uid()
                request["python"] = _python_folders()  # checked to be readable by that user id
                os.chmod(work_root(), 0o711)
        if self.isolation == "full" and (self.where.memory_group or self.where.pids_group or self.where.kill_group
                                         or self.where.cpu_group):
            self._cgroups = _Cgroups(self.where, self.limits)
            request["cgroups"] = self._cgroups.procs_files
        req_r, req_w = os.pipe()
        ans_r, ans_w = os.pipe()
        with _LIVE_LOCK:
            _LIVE.add(self)
            if not _WATCHDOG.is_alive():
                try:
                    _WATCHDOG.start()
                except RuntimeError:
                    pass
        try:
            reply = zygote.spawn(request, (req_r, ans_w), max(1.0, deadline - time.monotonic()))
        except BaseException:
            for fd in (req_r, req_w, ans_r, ans_w):
                os.close(fd)
            self.close()
            raise
        os.close(req_r)
        os.close(ans_w)
        with self._lock:  # kill() may run in another thread (Ctrl-C, the watchdog) while the child starts
            self._to_child, self._from_child = req_w, ans_r
            for fd in (req_w, ans_r):
                os.set_blocking(fd, False)
            self._child, self._keeper = int(reply.get("child") or 0), int(reply.get("keeper") or 0)
            for pid, attribute in ((self._child, "_pidfd"), (self._keeper, "_keeper_pidfd")):
                if pid:
                    try:
                        setattr(self, attribute, os.pidfd_open(pid))
                    except OSError:
                        pass
            stopped = self._killed or _REFUSING.is_set()
        if stopped:  # killed while it was starting: the kill found no process yet
            self.close()
            raise SandboxDied("the sandbox was stopped while it started (grading was interrupted, or the "
                              "submission's time limit passed)")
        if reply.get("status") != "ready":
            error = str(reply.get("error") or "no reason given")
            self.close()
            raise SandboxDied(f"the sandbox could not start: {_clean(error)[:400]}")

    def kill(self) -> None:
        """Kill every process of the sandbox now (its channel stays open until :meth:`close`); a child still starting
        is killed as soon as it has started. Returns within seconds (Ctrl-C kills every sandbox in turn): when
        :meth:`close` holds the sandbox, which kills first and then waits for the processes to exit, the kill is
        left to it."""
        self._killed = True  # read by start() under the lock: a child that starts from now on is stopped at once
        if not self._lock.acquire(timeout=_KILL_LOCK_WAIT):
            return
        try:
            self._kill()
        finally:
            self._lock.release()

    def _kill(self) -> None:
        if self._cgroups is not None:
            self._cgroups.kill()
        if self._pidfd >= 0:
            try:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            except OSError:
                pass
        if self.isolation == "limited" and self._keeper:
            try:
                os.killpg(self._keeper, signal.SIGKILL)  # the keeper's session: what did not leave it
            except OSError:
                pass
        if self._uid is not None:
            _kill_user(self._uid)  # what left the session (setsid, double fork) still runs as the sandbox's user

    def close(self) -> None:
        """Kill the child and every process it started, remove its cgroups and folder. Idempotent."""
        with self._lock:
            self._kill()
            if self._cgroups is not None:
                self.oom_killed = self.oom_killed or self._cgroups.oom_killed()
                self._cgroups.remove()
                self._cgroups = None
            # the keeper exits once it has reaped the child, which exits once its PID namespace is empty: when the
            # keeper is gone, no process of the submission is left (a process can take a moment to free its memory)
            if self._keeper_pidfd >= 0:
                select.select([self._keeper_pidfd], [], [], 30)
            for fd in (self._to_child, self._from_child, self._pidfd, self._keeper_pidfd):
                if fd >= 0:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            self._to_child = self._from_child = self._pidfd = self._keeper_pidfd = -1
            if self._workdir is not None:
                shutil.rmtree(self._workdir, ignore_errors=True)
                self._workdir = None
        with _LIVE_LOCK:
            _LIVE.discard(self)

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the channel

    def _deadline(self, seconds: float) -> float:
        deadline = time.monotonic() + seconds
        return min(deadline, self.deadline) if self.deadline is not None else deadline

    def _fail(self, exc: Exception) -> Exception:
        self.close()
        return exc

    def _send(self, data: bytes, deadline: float) -> None:
        if self._to_child < 0:
            raise self._fail(SandboxDied("the sandbox is closed"))
        poller = select.poll()
        poller.register(self._to_child, select.POLLOUT)
        view = memoryview(data)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not poller.poll(min(remaining, 3600.0) * 1000):
                raise self._fail(SandboxTimeout("the sandbox stopped reading its requests"))
            try:
                view = view[os.write(self._to_child, view[: 1 << 16]):]
            except BlockingIOError:
                continue
            except OSError:
                raise self._fail(SandboxDied("the sandbox process exited")) from None

    def _read(self, n: int, deadline: float) -> bytes:
        poller = select.poll()
        poller.register(self._from_child, select.POLLIN)
        while len(self._buffer) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not poller.poll(min(remaining, 3600.0) * 1000):
                raise self._fail(SandboxTimeout("no answer in time"))
            try:
                chunk = os.read(self._from_child, min(n - len(self._buffer), 1 << 20))
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                raise self._fail(SandboxDied("the sandbox process exited"))
            self._buffer += chunk
        data, self._buffer = self._buffer[:n], self._buffer[n:]
        return data

    def _read_frame(self, deadline: float, limit: int) -> bytes:
        if self._from_child < 0:
            raise self._fail(SandboxDied("the sandbox is closed"))
        (size,) = _child.HEADER.unpack(self._read(_child.HEADER.size, deadline))
        if size > limit:
            raise self._fail(SandboxDied(f"protocol violation: a frame of {size} bytes (limit {limit}); something "
                                         "in the submission wrote to the grader's channel"))
        return self._read(size, deadline)

    def _request(self, message: dict[str, Any], arrays: list[np.ndarray], deadline: float,
                 extra: tuple[bytes, ...] = ()) -> dict[str, Any]:
        self._id += 1
        message = dict(message, id=self._id)
        data = _child.frame(json.dumps(message).encode())
        for arr in arrays:
            data += _child.frame(_child.npy_bytes(arr))
        for payload in extra:
            data += _child.frame(payload)
        self._send(data, deadline)
        raw = self._read_frame(deadline, _REPLY_LIMIT)
        try:
            reply = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError, UnicodeDecodeError):
            raise self._fail(SandboxDied("protocol violation: a reply that is not JSON; something in the submission "
                                         "wrote to the grader's channel")) from None
        if not isinstance(reply, dict) or reply.get("id") != self._id or reply.get("status") not in _STATUSES or \
                not isinstance(reply.get("error"), (str, type(None))):
            raise self._fail(SandboxDied("protocol violation: an unexpected reply; something in the submission wrote "
                                         "to the grader's channel"))
        return reply

    # -- requests

    def select(self, sources: list[str], functions: list[str], limit: int, timeout: float) -> Any:
        """Which of the notebook's code cells ``sources`` grading runs for ``functions`` (at most ``limit``), decided
        in the child (``course_pe.coursework._cells.select_cells``) so that analysing a hostile notebook costs its own
        memory and time, not the grader's. Ask before running any of the submission's code. Returns a
        ``_cells.Selection`` whose fields have been checked."""
        from .._validation import check_float, check_positive_int, check_str_sequence
        from ._cells import Selection

        check_str_sequence("sources", sources)
        check_str_sequence("functions", functions)
        limit = check_positive_int("limit", limit)
        timeout = check_float("timeout", timeout, minimum=0.0, strict_minimum=True)
        data = json.dumps(sources, ensure_ascii=False).encode("utf-8", "surrogatepass")
        if len(data) > _child.REQUEST_LIMIT:
            raise ValueError(f"the notebook's code cells hold {len(data)} bytes, more than the "
                             f"{_child.REQUEST_LIMIT} a sandbox accepts")
        reply = self._request({"op": "select", "functions": list(functions), "limit": limit}, [], self._deadline(
            timeout), extra=(data,))
        cells, names = reply.get("cells"), reply.get("unresolved")
        if reply["status"] != "ok" or not isinstance(cells, list) or not isinstance(names, list) or \
                not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(sources) for i in cells) or \
                len(cells) > limit or len(set(cells)) != len(cells) or \
                not all(isinstance(n, str) and n.isidentifier() for n in names) or \
                not isinstance(reply.get("truncated"), bool):
            raise self._fail(SandboxDied("protocol violation: an unexpected reply to the cell selection"))
        return Selection(sorted(cells), sorted(names), reply["truncated"])

    def run_cell(self, source: str, timeout: float) -> str | None:
        """Execute one cell (IPython syntax) in the child; return None if it ran, else its error
        (``"ZeroDivisionError: ..."``). ``timeout``: seconds (a finite number > 0)."""
        from .._validation import check_float, check_str

        check_str("source", source)
        timeout = check_float("timeout", timeout, minimum=0.0, strict_minimum=True)
        reply = self._request({"op": "run", "source": source}, [], self._deadline(timeout))
        if reply["status"] == "ok":
            return None
        return _clean(reply.get("error") or "an error")[:300]

    def call(self, function: str, args: tuple[Any, ...], timeout: float) -> Any:
        """Call the submission's ``function(*args)`` in the child; return an ``exercises.Outcome``.

        ``args``: tensors, arrays, bools, ints and floats (arrays travel as ``.npy``). The answer is received as an
        array of numbers of at most ``limits.answer_bytes`` bytes; anything else is an ``invalid`` outcome."""
        import torch

        from .._validation import check_float, check_str
        from .exercises import Outcome

        if not check_str("function", function).isidentifier():
            raise ValueError(f"function must be a Python identifier, got {function!r}")
        if not isinstance(args, tuple):
            raise TypeError(f"args must be a tuple, got {type(args).__name__}")
        timeout = check_float("timeout", timeout, minimum=0.0, strict_minimum=True)
        specs, arrays = [], []
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                specs.append({"kind": "tensor"})
                arrays.append(a.detach().cpu().numpy())
            elif isinstance(a, np.ndarray):
                specs.append({"kind": "ndarray"})
                arrays.append(a)
            elif isinstance(a, (bool, int, float)):
                specs.append({"kind": "value", "value": a})
            else:
                raise TypeError(f"args[{i}] must be a tensor, an array or a plain number, got {type(a).__name__}")
        deadline = self._deadline(timeout)
        reply = self._request({"op": "call", "function": function, "args": specs,
                               "answer_bytes": self.limits.answer_bytes}, arrays, deadline)
        status, error = reply["status"], reply.get("error")
        called = _child_library_calls(error)
        lacking = tuple(missing_modules(error))
        if status == "ok":
            data = self._read_frame(deadline, self.limits.answer_bytes + 4096)
            try:
                with PARSE_LOCK:  # NumPy parses the header with ast.literal_eval, not thread-safe (see _cells)
                    value = _child.npy_load(data, self.limits.answer_bytes)
            except ValueError as exc:
                return Outcome("invalid", error=f"the answer could not be read ({exc})")
            return Outcome("ok", value)
        if status == "missing":
            return Outcome("missing", error=f"no function named `{function}` is defined (grading runs the cells that "
                                            "define the exercise's functions: was its cell deleted, renamed, or did "
                                            "it fail?)")
        return Outcome(status, error=_clean(error or "")[:500] or None, library_called=called, unavailable=lacking)


def _child_library_calls(error: str | None) -> tuple[str, ...]:
    """The removed library function named in an error raised by the grading build, if any."""
    if not error or _child.UNAVAILABLE_MARK not in error:
        return ()
    head = error.split(_child.UNAVAILABLE_MARK)[0].split(":", 1)[-1].strip()
    return (head,) if head.startswith("course_pe.") and head.replace(".", "").replace("_", "").isalnum() else ()


def _check_folders(name: str, folders: object) -> list[Path]:
    """``None`` or a list of folder paths (str or path-like), resolved."""
    if folders is None:
        return []
    if isinstance(folders, (str, bytes, os.PathLike)) or not isinstance(folders, (list, tuple)):
        raise TypeError(f"{name} must be a list of folders, got {type(folders).__name__}")
    for i, folder in enumerate(folders):
        if isinstance(folder, bytes) or not isinstance(folder, (str, os.PathLike)) or str(folder) == "":
            raise ValueError(f"{name}[{i}] must be a folder path, got {folder!r}")
    return [Path(os.path.realpath(p)) for p in folders]


def _clean(text: str) -> str:
    """Printable characters only (no terminal escapes from a submission)."""
    return "".join(ch if ch.isprintable() else " " for ch in str(text))


del errno, field
