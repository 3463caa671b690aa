"""Run untrusted notebook code in a separate, limited process and call its functions from the grader.

The grader (trusted) starts one child process per submission and talks to it over two pipes. The child:

* starts with an environment that names nothing of the grader (``PATH``, ``HOME`` in its private ``/tmp``, thread
  counts, a matplotlib backend) and in isolated mode (``python -I``: no current folder on ``sys.path``);
* when the grader runs as root and ``unshare`` works: lives in new mount, network, PID and IPC namespaces (no network;
  its processes die with it), mounts a private ``/tmp``, hides the folders it is told to hide (the repository with the
  book and its git history, the gradebook, the folder of submissions) under empty read-only file systems while
  keeping the package and the virtual environment visible, then drops to a dedicated unprivileged user id (one per
  grading process: two sandboxes cannot signal each other) with ``no_new_privs``;
* otherwise (not root, or no ``unshare``): runs as the grader's user in a fresh temporary folder, with the same
  resource limits and environment; the book and the gradebook stay readable (the *limited* isolation level);
* sets resource limits (address space, CPU seconds, file size, number of processes, open files, no core dumps);
* imports NumPy, PyTorch, the package and IPython *before* any student code (so time limits apply to student code,
  not to imports), sends its stdout and stderr to ``/dev/null``, and then executes what the grader asks for.

The protocol: length-prefixed frames. The grader sends JSON requests (``cell``, ``lock``, ``call``); arrays travel
as ``.npy`` data, read with ``allow_pickle=False``. The child answers with JSON (and one ``.npy`` frame for an
answer). Nothing the child sends is trusted: an answer is only an array of numbers, its size is limited, and a frame
that does not parse is a failed call. The grader enforces every time limit by killing the child.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["SandboxDied", "SandboxLimits", "SandboxTimeout", "Sandbox", "isolation_level"]

_HEADER = struct.Struct(">I")
_TRIPWIRE_MARK = "is not available while your function is graded"


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of a sandbox (bytes, seconds, counts)."""

    memory_bytes: int = 3 * 2**30  # address space: torch alone maps ~1 GiB
    cpu_seconds: int = 1200
    file_bytes: int = 64 * 2**20
    processes: int = 64  # tasks (threads included) of the sandbox's own user id
    open_files: int = 256
    tmp_bytes: int = 256 * 2**20  # size of the private /tmp (full isolation only)
    answer_bytes: int = 16 * 2**20  # largest answer accepted from one call
    startup_seconds: float = 300.0  # interpreter start and imports (not student code)

    def __post_init__(self) -> None:
        from .._validation import check_float, check_positive_int

        for name in ("memory_bytes", "cpu_seconds", "file_bytes", "processes", "open_files", "tmp_bytes",
                     "answer_bytes"):
            check_positive_int(name, getattr(self, name))
        check_float("startup_seconds", self.startup_seconds, minimum=0.0, strict_minimum=True)


class SandboxTimeout(Exception):
    """The child did not answer in time (it has been killed)."""


class SandboxDied(Exception):
    """The child exited, or sent something that is not a valid frame (it has been killed)."""


# --------------------------------------------------------------------------- framing (both sides)


def _write_frame(fd: int, payload: bytes) -> None:
    data = _HEADER.pack(len(payload)) + payload
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SandboxTimeout
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                raise SandboxTimeout
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise SandboxDied("the sandbox process exited")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _read_frame(fd: int, deadline: float | None, limit: int) -> bytes:
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    if size > limit:
        raise SandboxDied(f"the sandbox sent {size} bytes, more than the limit of {limit}")
    return _read_exact(fd, size, deadline)


def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def _npy_load(data: bytes) -> np.ndarray:
    arr = np.load(io.BytesIO(data), allow_pickle=False)
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "biuf":
        raise ValueError("not an array of numbers")
    return arr


# --------------------------------------------------------------------------- the grader's side


@lru_cache(maxsize=1)
def isolation_level() -> str:
    """``"full"`` when this process is root and ``unshare`` can create mount, network, PID and IPC namespaces,
    else ``"limited"`` (separate process, resource limits, scrubbed environment, fresh folder only)."""
    if os.name != "posix" or os.geteuid() != 0 or shutil.which("unshare") is None:
        return "limited"
    try:
        probe = subprocess.run(["unshare", "--mount", "--net", "--pid", "--ipc", "--fork", "--kill-child", "true"],
                               capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "limited"
    return "full" if probe.returncode == 0 else "limited"


def _sandbox_env() -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp/home",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": "/tmp/home/.matplotlib",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "COURSE_PE_THREADS": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


_SERIAL = itertools.count()


def _new_uid() -> int:
    """A user id for one sandbox: unused by real accounts, different for every sandbox this process starts (up to
    100 at once) and for every grading process alive (its pid)."""
    return 1_500_000_000 + (os.getpid() % 4_000_000) * 100 + next(_SERIAL) % 100


class Sandbox:
    """One sandboxed child process. Use as a context manager; every method raises :class:`SandboxTimeout` or
    :class:`SandboxDied` after killing the child when it does not answer properly in time.

    ``hide``: folders made invisible to the child (full isolation only); ``keep``: folders inside them that stay
    visible read-only (the package, the virtual environment).
    """

    def __init__(self, *, limits: SandboxLimits = SandboxLimits(), hide: list[Path] | None = None,
                 keep: list[Path] | None = None, isolation: str | None = None) -> None:
        from .._validation import check_choice

        if not isinstance(limits, SandboxLimits):
            raise TypeError(f"limits must be a SandboxLimits, got {type(limits).__name__}")
        self.limits = limits
        self.hide = _check_folders("hide", hide)
        self.keep = _check_folders("keep", keep)
        self.isolation = check_choice("isolation", isolation, ("full", "limited")) if isolation is not None \
            else isolation_level()
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None
        self._to_child = self._from_child = -1

    # -- life cycle

    def start(self) -> None:
        """Start the child and wait until it has imported its libraries (``limits.startup_seconds``)."""
        req_r, req_w = os.pipe()
        ans_r, ans_w = os.pipe()
        uid = _new_uid() if self.isolation == "full" else None
        config: dict[str, Any] = {
            "in": req_r, "out": ans_w, "isolation": self.isolation, "uid": uid,
            "hide": [str(p) for p in self.hide], "keep": [str(p) for p in self.keep],
            "limits": self.limits.__dict__,
        }
        if self.isolation == "full":
            prefix = ["unshare", "--mount", "--net", "--pid", "--ipc", "--fork", "--kill-child", "--mount-proc"]
            cwd = "/"
        else:
            import tempfile

            self._workdir = Path(tempfile.mkdtemp(prefix="course_pe_sandbox_"))
            config["workdir"] = str(self._workdir)
            prefix, cwd = [], str(self._workdir)
        command = prefix + [sys.executable, "-I", "-c",
                            "from course_pe.coursework.sandbox import _child_main; _child_main()", json.dumps(config)]
        self._proc = subprocess.Popen(command, pass_fds=(req_r, ans_w), stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd,
                                      env=_sandbox_env(), start_new_session=True)
        os.close(req_r)
        os.close(ans_w)
        self._to_child, self._from_child = req_w, ans_r
        try:
            hello = self._receive(time.monotonic() + self.limits.startup_seconds)
        except SandboxDied as exc:
            err = self._stderr_tail()
            raise SandboxDied(f"the sandbox could not start: {exc}; {err}") from None
        if hello.get("status") != "ready":
            self.close()
            raise SandboxDied(f"the sandbox could not start: {hello}")

    def close(self) -> None:
        """Kill the child (and, with full isolation, every process it started) and remove its folder."""
        if self._proc is not None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
            if self._proc.stderr:
                self._proc.stderr.close()
            self._proc = None
        for fd in (self._to_child, self._from_child):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._to_child = self._from_child = -1
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _stderr_tail(self) -> str:
        if self._proc is None or self._proc.stderr is None:
            return ""
        try:
            self._proc.wait(timeout=5)
            return self._proc.stderr.read()[-500:].decode("utf-8", "replace")
        except Exception:
            return ""

    # -- messages

    def _send(self, message: dict[str, Any], arrays: list[np.ndarray] = ()) -> None:
        try:
            _write_frame(self._to_child, json.dumps(message).encode())
            for arr in arrays:
                _write_frame(self._to_child, _npy_bytes(arr))
        except OSError as exc:
            self.close()
            raise SandboxDied(f"the sandbox process exited ({exc})") from None

    def _receive(self, deadline: float) -> dict[str, Any]:
        try:
            frame = _read_frame(self._from_child, deadline, 1 << 20)
            message = json.loads(frame.decode("utf-8"))
            if not isinstance(message, dict):
                raise ValueError("not a JSON object")
            return message
        except SandboxTimeout:
            self.close()
            raise
        except (SandboxDied, ValueError, UnicodeDecodeError) as exc:
            self.close()
            raise SandboxDied(str(exc)) from None

    # -- requests

    def run_cell(self, source: str, timeout: float) -> str | None:
        """Execute one code cell; return None if it ran, else the error (``"ZeroDivisionError: ..."``).
        ``timeout``: seconds (a finite number > 0)."""
        from .._validation import check_float, check_str

        check_str("source", source)
        timeout = check_float("timeout", timeout, minimum=0.0, strict_minimum=True)
        self._send({"op": "cell", "source": source})
        answer = self._receive(time.monotonic() + timeout)
        if answer.get("status") == "ok":
            return None
        return str(answer.get("error", "an error"))

    def lock(self, names: list[str]) -> None:
        """Make the library functions ``names`` (dotted) unavailable: calling them raises and is recorded."""
        if isinstance(names, (str, bytes)) or not isinstance(names, (list, tuple)):
            raise TypeError(f"names must be a list of dotted names, got {type(names).__name__}")
        for i, name in enumerate(names):
            if not isinstance(name, str) or not name:
                raise ValueError(f"names[{i}] must be a non-empty dotted name such as 'course_pe.apply_rope', "
                                 f"got {name!r}")
        self._send({"op": "lock", "names": list(names)})
        self._receive(time.monotonic() + 60)

    def call(self, function: str, args: tuple[Any, ...], timeout: float) -> Any:
        """Call the student's ``function(*args)`` in the child; return an ``exercises.Outcome``."""
        import torch

        from .._validation import check_float, check_str
        from .exercises import Outcome

        if not check_str("function", function).isidentifier():
            raise ValueError(f"function must be a Python identifier, got {function!r}")
        if not isinstance(args, tuple):
            raise TypeError(f"args must be a tuple, got {type(args).__name__}")
        timeout = check_float("timeout", timeout, minimum=0.0, strict_minimum=True)
        for i, a in enumerate(args):
            if not isinstance(a, (torch.Tensor, np.ndarray, bool, int, float)):
                raise TypeError(f"args[{i}] must be a tensor, an array or a plain number, got {type(a).__name__}")
        specs, arrays = [], []
        for a in args:
            if isinstance(a, torch.Tensor):
                specs.append({"kind": "tensor"})
                arrays.append(a.detach().cpu().numpy())
            elif isinstance(a, np.ndarray):
                specs.append({"kind": "ndarray"})
                arrays.append(a)
            elif isinstance(a, (bool, int, float)):
                specs.append({"kind": "value", "value": a})
            else:  # pragma: no cover - excluded above
                raise AssertionError(type(a))
        deadline = time.monotonic() + timeout
        self._send({"op": "call", "function": function, "args": specs}, arrays)
        answer = self._receive(deadline)
        called = tuple(str(n) for n in answer.get("library_called", []) if isinstance(n, str))[:10]
        status = answer.get("status")
        if status == "ok":
            try:
                value = _npy_load(_read_frame(self._from_child, deadline, self.limits.answer_bytes + 4096))
            except SandboxTimeout:
                self.close()
                raise
            except SandboxDied as exc:
                self.close()
                return Outcome("invalid", error=f"the answer could not be received ({exc})", library_called=called)
            except Exception as exc:
                self.close()
                raise SandboxDied(f"the answer is not a valid array ({type(exc).__name__})") from None
            return Outcome("ok", value, library_called=called)
        if status in ("stub", "missing", "error", "invalid"):
            return Outcome(status, error=_clean(str(answer.get("error", "")))[:500] or None, library_called=called)
        self.close()
        raise SandboxDied(f"unexpected answer {str(answer)[:100]}")


def _check_folders(name: str, folders: object) -> list[Path]:
    """``None`` or a list of folder paths (str or path-like), resolved."""
    if folders is None:
        return []
    if isinstance(folders, (str, bytes, os.PathLike)) or not isinstance(folders, (list, tuple)):
        raise TypeError(f"{name} must be a list of folders, got {type(folders).__name__}")
    for i, folder in enumerate(folders):
        if isinstance(folder, bytes) or not isinstance(folder, (str, os.PathLike)) or str(folder) == "":
            raise ValueError(f"{name}[{i}] must be a folder path, got {folder!r}")
    return [Path(p).resolve() for p in folders]


def _clean(text: str) -> str:
    """Printable characters only (no terminal escapes from a submission)."""
    return "".join(ch if ch.isprintable() else " " for ch in text)


# --------------------------------------------------------------------------- the child's side

_CALLED: list[str] = []


def library_called(name: str) -> None:
    """Recorded by a tripwire in the child (see :meth:`Sandbox.lock`)."""
    if name not in _CALLED:
        _CALLED.append(name)


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                  data.encode() if data else None) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} on {target}: {os.strerror(errno)}")


_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18


_STAGE_CANDIDATES = ("/mnt", "/media", "/srv", "/opt", "/home", "/boot")


def _isolate(config: dict[str, Any]) -> Path:
    """As root in fresh namespaces: private /tmp, hidden folders, then the sandbox's own user id."""
    import ctypes

    limits = config["limits"]
    _mount("none", "/", None, _MS_REC | _MS_PRIVATE, None)
    keeps = [Path(k) for k in config["keep"]]
    # Stage the folders to keep before covering what contains them (the private /tmp included: a clone of the course
    # under /tmp keeps its venv and package). The stage is a small tmpfs over an existing folder that holds no kept
    # folder; it exists only in this private mount namespace.
    stage_root = next((Path(c) for c in _STAGE_CANDIDATES
                       if Path(c).is_dir() and not any(k == Path(c) or Path(c) in k.parents for k in keeps)), None)
    if stage_root is None:
        raise OSError("no folder to stage the kept folders on (tried " + ", ".join(_STAGE_CANDIDATES) + ")")
    _mount("tmpfs", str(stage_root), "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=0700")
    staged = []
    for i, keep in enumerate(keeps):
        if keep.is_dir():
            spot = stage_root / str(i)
            spot.mkdir()
            _mount(str(keep), str(spot), None, _MS_BIND | _MS_REC, None)
            staged.append((keep, spot))
    _mount("tmpfs", "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={limits['tmp_bytes']},mode=1777")
    for keep, spot in staged:
        if Path("/tmp") in keep.parents:  # covered by the private /tmp: put it back, read-only
            keep.mkdir(parents=True, exist_ok=True)
            _mount(str(spot), str(keep), None, _MS_BIND | _MS_REC, None)
            _mount("none", str(keep), None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY, None)
    for hidden in sorted((Path(h) for h in config["hide"]), key=lambda p: len(p.parts)):
        if not hidden.is_dir():
            continue
        _mount("tmpfs", str(hidden), "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=0755")
        for keep, spot in staged:
            if keep == hidden or hidden in keep.parents:
                target = hidden / keep.relative_to(hidden)
                target.mkdir(parents=True, exist_ok=True)
                _mount(str(spot), str(target), None, _MS_BIND | _MS_REC, None)
                _mount("none", str(target), None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY, None)
        _mount("none", str(hidden), None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV, "size=1m,mode=0755")
    for _, spot in staged:
        ctypes.CDLL(None).umount2(str(spot).encode(), 2)  # MNT_DETACH
    ctypes.CDLL(None).umount2(str(stage_root).encode(), 2)
    for extra in ("/var/tmp", "/dev/shm"):
        if Path(extra).is_dir():
            _mount("tmpfs", extra, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=1777")
    uid = int(config["uid"])
    work = Path("/tmp/work")
    for folder in (work, Path("/tmp/home")):
        folder.mkdir(mode=0o700)
        os.chown(folder, uid, uid)
    return work


def _set_limits(limits: dict[str, Any]) -> None:
    import resource

    pairs = [
        (resource.RLIMIT_AS, limits["memory_bytes"]),
        (resource.RLIMIT_CPU, limits["cpu_seconds"]),
        (resource.RLIMIT_FSIZE, limits["file_bytes"]),
        (resource.RLIMIT_NOFILE, limits["open_files"]),
        (resource.RLIMIT_CORE, 0),
    ]
    for which, value in pairs:
        resource.setrlimit(which, (value, value))


def _drop_privileges(uid: int) -> None:
    import ctypes

    ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS: setuid programs grant nothing
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def _tripwire(obj: Any, dotted: str) -> Any:
    """Replace the code of function ``obj`` so that every reference to it (even one taken earlier) records the call
    and raises; return a replacement object for attribute lookups when the code cannot be swapped."""
    source = (f"def _unavailable(*args, **kwargs):\n"
              f"    __import__('sys').modules['course_pe.coursework.sandbox'].library_called({dotted!r})\n"
              f"    raise RuntimeError({dotted + ' ' + _TRIPWIRE_MARK + '; implement it yourself'!r})\n")
    namespace: dict[str, Any] = {}
    exec(compile(source, "<grader>", "exec"), namespace)
    replacement = namespace["_unavailable"]
    try:
        obj.__code__ = replacement.__code__
        obj.__defaults__ = obj.__kwdefaults__ = None
    except (AttributeError, ValueError, TypeError):
        pass
    return replacement


def _lock(names: list[str]) -> None:
    import importlib

    for dotted in names:
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            try:
                owner: Any = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            try:
                for attr in parts[cut:-1]:
                    owner = getattr(owner, attr)
                original = getattr(owner, parts[-1])
            except AttributeError:
                break
            replacement = _tripwire(original, dotted)
            setattr(owner, parts[-1], replacement)
            for module in list(sys.modules.values()):  # re-exports (course_pe.alibi_slopes, ...)
                if getattr(module, "__name__", "").startswith("course_pe") and \
                        getattr(module, parts[-1], None) is original:
                    setattr(module, parts[-1], replacement)
            break


def _child_main() -> None:  # pragma: no cover - runs in the sandbox (tested through the grader)
    config = json.loads(sys.argv[-1])
    fd_in, fd_out = int(config["in"]), int(config["out"])
    limits = config["limits"]
    if config["isolation"] == "full":
        work = _isolate(config)
    else:
        work = Path(config["workdir"])
        (work / "home").mkdir(exist_ok=True)
        os.environ["HOME"] = str(work / "home")
        os.environ["TMPDIR"] = str(work)
        os.environ["MPLCONFIGDIR"] = str(work / "home" / ".matplotlib")
    os.chdir(work)
    # imports before any student code (time limits are for student code, not for imports)
    import matplotlib

    matplotlib.use("Agg")
    import torch
    from IPython.core.interactiveshell import InteractiveShell

    import course_pe  # noqa: F401
    from course_pe.coursework.exercises import call_case

    torch.set_num_threads(1)
    if config["isolation"] == "full":
        _set_limits(limits)
        _drop_privileges(int(config["uid"]))
        import resource

        resource.setrlimit(resource.RLIMIT_NPROC, (limits["processes"], limits["processes"]))
    else:
        _set_limits(limits)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too large file is an OSError, not death
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    from traitlets.config import Config

    settings = Config()
    settings.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=settings, colors="NoColor")
    shell.showtraceback = lambda *a, **k: None  # tracebacks would go to /dev/null anyway
    shell.run_cell("pass", store_history=False)  # IPython's own lazy imports, before any time limit
    shell.run_cell("raise ValueError", store_history=False)
    _write_frame(fd_out, json.dumps({"status": "ready"}).encode())
    while True:
        try:
            request = json.loads(_read_frame(fd_in, None, 1 << 26))
        except SandboxDied:
            os._exit(0)
        op = request.get("op")
        if op == "cell":
            try:
                result = shell.run_cell(request["source"], store_history=False, silent=False)
                exc = result.error_before_exec or result.error_in_exec
                reply = {"status": "ok"} if exc is None else {"status": "error",
                                                              "error": f"{type(exc).__name__}: {exc}"[:300]}
            except BaseException as exc:  # noqa: BLE001 - the cell's problem, not ours
                reply = {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:300]}
            _write_frame(fd_out, json.dumps(reply).encode())
        elif op == "lock":
            _lock(request["names"])
            _write_frame(fd_out, json.dumps({"status": "ok"}).encode())
        elif op == "call":
            args = []
            for spec in request["args"]:
                if spec["kind"] == "value":
                    args.append(spec["value"])
                else:
                    arr = _npy_load(_read_frame(fd_in, None, 1 << 26))
                    args.append(torch.from_numpy(arr) if spec["kind"] == "tensor" else arr)
            _CALLED.clear()
            fn = shell.user_ns.get(request["function"])
            try:
                if fn is None or not callable(fn):
                    outcome = None
                    reply = {"status": "missing", "error": f"no function named `{request['function']}` is defined "
                             "(was its cell deleted, renamed or did it fail?)"}
                else:
                    outcome = call_case(fn, tuple(args))
                    reply = {"status": outcome.status, "error": outcome.error}
            except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt from the student's code
                outcome = None
                reply = {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:300]}
            reply["library_called"] = list(_CALLED)
            payload = None
            if outcome is not None and outcome.status == "ok":
                if outcome.value.nbytes > limits["answer_bytes"]:
                    reply = {"status": "invalid", "library_called": list(_CALLED),
                             "error": f"the answer has {outcome.value.nbytes} bytes, more than the "
                                      f"{limits['answer_bytes']} accepted"}
                else:
                    payload = _npy_bytes(outcome.value)
            _write_frame(fd_out, json.dumps(reply).encode())
            if payload is not None:
                _write_frame(fd_out, payload)
