"""The sandbox's side of grading: the template process (the "zygote") and each submission's child.

This file runs *outside* the package: the grader starts ``python -I -S _child.py CONFIG`` (no ``site``, no current
folder, no user site, no environment variables on ``sys.path``). It imports only the standard library, NumPy,
PyTorch and IPython, never ``course_pe``. The grader also imports it (as ``course_pe.coursework._child``) for what
both sides share: the frame format and the conversion of an answer into a plain array.

Processes, as root at the *full* isolation level::

    grader (trusted) --control socket--> zygote: imports NumPy, PyTorch, IPython once, runs no submission code
                                           |  fork, per submission
                                           v
                                         keeper (root): unshares the mount, PID, network, IPC and UTS
                                           |  namespaces; reaps the child; kills it if the zygote dies
                                           |  fork
                                           v
                                         child = PID 1 of the new PID namespace: joins the submission's cgroups,
                                         builds a fresh root file system
                                         (read-only system and Python folders, the grading build of course_pe, a
                                         size-limited /tmp), pivots into it, sets resource limits, drops to its own
                                         user id with no_new_privs, installs the seccomp filter, then runs the
                                         set-up, the answer cells and the calls the grader asks for.

Killing the child (PID 1 of its namespace) kills every process of the submission; the grader also kills the
cgroup. At the *limited* level (the grader is not root) there are no namespaces: the child runs as the grader's
user in a fresh temporary folder, with resource limits; when the grader is root but namespaces are unavailable, the
child also drops to a user id of its own (the folder is chowned to it first).
"""

from __future__ import annotations

import io
import json
import os
import signal
import struct
import sys
from typing import Any

HEADER = struct.Struct(">I")
#: largest request frame the child accepts (a cell's source, an argument array)
REQUEST_LIMIT = 64 * 2**20
#: the mark of a removed library function in the grading build's error message
UNAVAILABLE_MARK = "is not available while your function is graded"
#: at most this many names in a reply to "select" (the names the selected cells read that no cell defines)
SELECT_NAMES = 50
#: the cell analysis (``_cells.py``, loaded by the zygote from beside this file; standard library only)
_CELLS: Any = None


# --------------------------------------------------------------------------- frames and arrays (both sides)


def frame(payload: bytes) -> bytes:
    """``payload`` with its 4-byte big-endian length in front."""
    return HEADER.pack(len(payload)) + payload


def npy_bytes(arr: Any) -> bytes:
    """``arr`` in ``.npy`` form: C order, native byte order, shape kept (0-d included), no pickle."""
    import numpy as np

    arr = np.asarray(arr)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    buf = io.BytesIO()
    np.save(buf, np.array(arr, copy=True, order="C"), allow_pickle=False)
    return buf.getvalue()


def npy_load(data: bytes, limit: int) -> Any:
    """The numeric array in ``.npy`` bytes ``data`` (at most ``limit`` bytes of values), or ``ValueError``.

    The header is checked against the data before anything is allocated: a header that declares more entries than
    the data holds, an object or structured dtype, or a Fortran-order flag that is not a bool is refused.
    """
    import numpy as np
    from numpy.lib import format as npy_format

    stream = io.BytesIO(data)
    try:
        version = npy_format.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = npy_format.read_array_header_1_0(stream, max_header_size=10_000)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = npy_format.read_array_header_2_0(stream, max_header_size=10_000)
        else:
            raise ValueError(f"unknown .npy version {version}")
    except Exception as exc:  # noqa: BLE001 - any malformed header is refused the same way
        raise ValueError(f"not a .npy array ({type(exc).__name__})") from None
    if not isinstance(dtype, np.dtype) or dtype.kind not in "biuf" or dtype.fields is not None or dtype.subdtype:
        raise ValueError("not an array of numbers")
    if not isinstance(fortran, bool) or not isinstance(shape, tuple) or \
            not all(isinstance(n, int) and 0 <= n < 2**40 for n in shape) or len(shape) > 32:
        raise ValueError("an invalid .npy header")
    count = 1
    for n in shape:
        count *= n
    body = data[stream.tell():]
    if count * dtype.itemsize != len(body) or len(body) > limit:
        raise ValueError(f"the .npy header declares {count} entries of {dtype.itemsize} bytes but {len(body)} bytes "
                         "follow")
    arr = np.frombuffer(body, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    return np.array(arr.astype(arr.dtype.newbyteorder("=")) if not arr.dtype.isnative else arr, copy=True, order="C")


def to_output(value: Any) -> Any:
    """Convert what a student's function returned into a plain numeric NumPy array (a copy, native byte order).

    Tensors are detached and moved to the CPU with their dtype kept; lists, tuples, Python and NumPy numbers go
    through ``np.array``; a 0-d answer stays 0-d. Raises ``TypeError`` for anything that is not numeric (objects,
    strings, ragged lists) and for dtypes NumPy cannot hold (bfloat16, complex).
    """
    import numpy as np
    import torch

    if isinstance(value, torch.Tensor):
        if value.dtype in (torch.bfloat16,) or value.is_complex():
            raise TypeError(f"a tensor of dtype {value.dtype} is not a real float32/float64 or integer answer")
        try:
            arr = np.array(torch.Tensor.numpy(torch.Tensor.clone(torch.Tensor.cpu(torch.Tensor.detach(value)))),
                           copy=True)
        except Exception as exc:  # noqa: BLE001 - a tensor subclass that breaks its own conversion
            raise TypeError(f"the answer could not be converted to an array ({type(exc).__name__})") from None
    else:
        if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
            value = [v.detach().cpu().item() if isinstance(v, torch.Tensor) and v.numel() == 1 else v for v in value]
        try:
            arr = np.array(value)
        except Exception as exc:  # noqa: BLE001
            raise TypeError(f"the answer is not an array of numbers ({type(exc).__name__})") from None
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "biuf" or arr.dtype.fields is not None:
        raise TypeError(f"the answer is not an array of numbers (a {type(value).__name__} giving dtype "
                        f"{getattr(arr, 'dtype', '?')})")
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return np.array(arr, copy=True, order="C")


def fresh_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Copies of ``args`` (the student's function may modify its inputs in place)."""
    import numpy as np
    import torch

    return tuple(a.clone() if isinstance(a, torch.Tensor) else a.copy() if isinstance(a, np.ndarray) else a
                 for a in args)


def run_call(fn: Any, args: tuple[Any, ...]) -> tuple[str, Any, str | None]:
    """Call ``fn(*args)`` on copies: ``("ok", array, None)``, ``("stub", None, None)`` for NotImplementedError,
    ``("error", None, message)`` or ``("invalid", None, why)`` (the answer is not an array of numbers)."""
    try:
        value = fn(*fresh_args(args))
    except NotImplementedError:
        return "stub", None, None
    except KeyboardInterrupt:  # the reader's Ctrl-C (indistinguishable from a student raising it): interrupt
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit, GeneratorExit, ... from the student: feedback too
        return "error", None, _exception_text(exc)
    try:
        return "ok", to_output(value), None
    except TypeError as exc:
        return "invalid", None, str(exc)


def _exception_text(exc: BaseException) -> str:
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:  # noqa: BLE001 - an exception whose __str__ raises
        text = type(exc).__name__
    return text[:500]


# --------------------------------------------------------------------------- system calls (child side)


def _libc() -> Any:
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        import ctypes

        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWPID, _CLONE_NEWNET = 0x20000000, 0x40000000
_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS = 1, 38
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217, "riscv64": 41}


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    libc = _libc()
    _check(libc.mount(source.encode() if source else None, target.encode(), fstype.encode() if fstype else None,
                      flags, data.encode() if data else None), f"mount {source} on {target}")


def _bind_readonly(source: str, target: str) -> None:
    """Bind ``source`` on ``target`` and make it (and every mount below it) read-only, nosuid, nodev."""
    _mount(source, target, None, _MS_BIND | _MS_REC)
    below = [target]
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
            for line in fh:
                point = line.split()[4].encode("utf-8", "surrogateescape").decode("unicode_escape")
                if point.startswith(target.rstrip("/") + "/"):
                    below.append(point)
    except OSError:
        pass
    for point in below:
        try:
            _mount(None, point, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
        except OSError:
            if point == target:
                raise


def _make_dirs(path: str) -> None:
    os.makedirs(path, mode=0o755, exist_ok=True)


def _restrict_folder(target: str, source: str, entries: list[str]) -> None:
    """Show in ``target`` (a mount point inside the fresh root) only ``entries`` of the folder ``source``: an empty
    tmpfs, each entry bound read-only on a placeholder of its kind, then the tmpfs made read-only."""
    if not os.path.isdir(target):
        return
    _mount("tmpfs", target, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=0755")
    for name in entries:
        if "/" in name or name in (".", ".."):
            continue
        origin, place = os.path.join(source, name), os.path.join(target, name)
        if os.path.islink(origin):
            os.symlink(os.readlink(origin), place)
            continue
        if os.path.isdir(origin):
            os.mkdir(place)
        elif os.path.isfile(origin):
            with open(place, "w"):
                pass
        else:
            continue
        _bind_readonly(origin, place)
    _mount(None, target, None, _MS_REMOUNT | _MS_NOSUID | _MS_NODEV | _MS_RDONLY, "size=1m,mode=0755")


def _enter_fresh_root(config: dict[str, Any]) -> None:
    """Build the child's root file system on a tmpfs and pivot into it (full isolation; runs as root)."""
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    new = config["root_mount"]
    _mount("tmpfs", new, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=4m,mode=0755")
    for folder in config["system"]:  # /usr, /etc, /lib, /bin ... (a symbolic link such as /bin -> usr/bin is copied)
        if os.path.islink(folder):
            os.symlink(os.readlink(folder), new + folder)
        elif os.path.isdir(folder):
            _make_dirs(new + folder)
            _bind_readonly(folder, new + folder)
    # /tmp: the only writable place, a tmpfs of limited size (the disk quota); /dev/shm is a folder inside it. It is
    # mounted before the Python folders are bound: a checkout (and its .venv) under /tmp, as `mktemp -d` gives, is
    # then bound on top of the fresh /tmp instead of being hidden by it (read-only, in root-owned folders that the
    # sticky /tmp lets no other user remove). Nothing else of the grader's /tmp is visible.
    _make_dirs(new + "/tmp")
    _mount("tmpfs", new + "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={int(config['tmp_bytes'])},mode=1777")
    uid = int(config["uid"])
    for folder, mode in (("/tmp/work", 0o700), ("/tmp/home", 0o700), ("/tmp/.shm", 0o1777)):
        os.mkdir(new + folder)
        os.chmod(new + folder, mode)
        os.chown(new + folder, uid, uid)
    for folder in config["python"]:  # the interpreter, the standard library, site-packages
        if os.path.isdir(folder):
            _make_dirs(new + folder)
            _bind_readonly(folder, new + folder)
    for folder in config["hide"]:  # inside a bound folder: the package's own source, the repository, the gradebook
        target = new + folder
        if os.path.isdir(target):
            _mount("tmpfs", target, "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_RDONLY, "size=16k,mode=0755")
    for folder in config["python"]:  # kept folders that lie inside a hidden one are bound again on top
        if any(folder.startswith(h.rstrip("/") + "/") for h in config["hide"]) and os.path.isdir(folder):
            parent = next(h for h in config["hide"] if folder.startswith(h.rstrip("/") + "/"))
            _mount(None, new + parent, None, _MS_REMOUNT | _MS_NOSUID | _MS_NODEV, "size=16k,mode=0755")
            _make_dirs(new + folder)
            _bind_readonly(folder, new + folder)
            _mount(None, new + parent, None, _MS_REMOUNT | _MS_NOSUID | _MS_NODEV | _MS_RDONLY, "size=16k,mode=0755")
    # The site-packages folders: only what grading needs (course_pe.coursework.environment), each entry bound on its
    # own over an empty read-only tmpfs; the others (a virtual environment's base Python, the system's) show nothing.
    # Last among the Python folders: a bound folder above them (a .venv inside the hidden repository) is in place.
    for folder, entries in config.get("site", {}).items():
        _restrict_folder(new + folder, folder, entries)
    for folder in config.get("site_hidden", []):
        _restrict_folder(new + folder, folder, [])
    _make_dirs(new + "/grading")
    _bind_readonly(config["build"], new + "/grading")
    _make_dirs(new + "/dev")
    for device in ("null", "zero", "full", "random", "urandom"):
        with open(new + "/dev/" + device, "w"):
            pass
        _mount("/dev/" + device, new + "/dev/" + device, None, _MS_BIND)
        _mount(None, new + "/dev/" + device, None, _MS_REMOUNT | _MS_BIND | _MS_NOSUID | _MS_NOEXEC)
    _make_dirs(new + "/dev/shm")
    _mount(new + "/tmp/.shm", new + "/dev/shm", None, _MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, new + "/dev/" + name)
    _make_dirs(new + "/proc")
    os.mkdir(new + "/.old")
    machine = os.uname().machine
    libc = _libc()
    if machine in _PIVOT_ROOT:
        _check(libc.syscall(_PIVOT_ROOT[machine], new.encode(), (new + "/.old").encode()), "pivot_root")
        os.chdir("/")
        _check(libc.umount2(b"/.old", 2), "umount the old root")  # MNT_DETACH
        os.rmdir("/.old")
    else:  # pragma: no cover - an architecture without a known pivot_root number: chroot (no way back without root)
        os.chroot(new)
        os.chdir("/")
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    _mount(None, "/", None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV, "size=4m,mode=0755")


# ----------------------------------------------------------------------------- the system-call filter (seccomp)

#: per architecture: the audit architecture, the system calls refused with EPERM, clone and clone3. Refused: new
#: namespaces and entering others (the kernel's least-tested surface for an unprivileged user), mounts of every
#: kind, keyrings, BPF, userfaultfd, ptrace and reading or writing other processes' memory, perf events, io_uring,
#: kernel modules, kexec, swap, reboot, accounting, quotas and the kernel log. Numbers from the kernel's unistd
#: tables (x86_64: arch/x86/entry/syscalls/syscall_64.tbl; aarch64: include/uapi/asm-generic/unistd.h).
_SECCOMP_TABLES: dict[str, tuple[int, tuple[int, ...], int, int]] = {
    "x86_64": (0xC000003E, (
        272, 308,  # unshare, setns
        165, 166, 155, 428, 429, 430, 431, 432, 433, 442,  # mount, umount2, pivot_root, the new mount API
        250, 248, 249, 321, 323,  # keyctl, add_key, request_key, bpf, userfaultfd
        101, 310, 311, 298, 304, 303,  # ptrace, process_vm_readv/writev, perf_event_open, *_by_handle_at
        425, 426, 427,  # io_uring
        175, 313, 176, 246, 320, 167, 168, 169, 163, 179, 103,  # modules, kexec, swap, reboot, acct, quotactl, syslog
    ), 56, 435),
    "aarch64": (0xC00000B7, (
        97, 268,
        40, 39, 41, 428, 429, 430, 431, 432, 433, 442,
        219, 217, 218, 280, 282,
        117, 270, 271, 241, 265, 264,
        425, 426, 427,
        105, 273, 106, 104, 294, 224, 225, 142, 89, 60, 116,
    ), 220, 435),
}
#: clone flags that create namespaces (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET)
_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_EPERM, _ENOSYS = 1, 38


def seccomp_available() -> bool:
    """Whether the sandbox can filter system calls here: Linux with seccomp's ``errno`` action, on an architecture
    whose system-call numbers :data:`_SECCOMP_TABLES` holds."""
    if sys.platform != "linux" or os.uname().machine not in _SECCOMP_TABLES:
        return False
    try:
        with open("/proc/sys/kernel/seccomp/actions_avail", encoding="ascii") as fh:
            return "errno" in fh.read().split()
    except OSError:
        return False


def seccomp_program() -> list[tuple[int, int, int, int]]:
    """The classic-BPF filter, as (code, jump if true, jump if false, constant) instructions: a system call of another
    architecture (a 32-bit call from a 64-bit process) or of the x32 ABI is refused, as are the calls of
    :data:`_SECCOMP_TABLES` and a ``clone`` that creates a namespace; ``clone3`` answers ENOSYS, so that the C library
    falls back to ``clone``, whose flags the filter can read; everything else is allowed."""
    arch, refused, clone, clone3 = _SECCOMP_TABLES[os.uname().machine]
    load, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, errno = 0x7FFF0000, 0x00050000
    body: list[tuple[int, str | int, str | int, int]] = [(load, 0, 0, 4), (jeq, 0, "deny", arch), (load, 0, 0, 0)]
    if arch == 0xC000003E:
        body.append((jge, "deny", 0, 0x40000000))  # the x32 ABI: the same numbers with this bit set
    body += [(jeq, "deny", 0, nr) for nr in refused]
    body += [(jeq, "enosys", 0, clone3), (jeq, "clone", 0, clone), (ret, 0, 0, allow),
             (load, 0, 0, 16), (jset, "deny", 0, _CLONE_NAMESPACES), (ret, 0, 0, allow),
             (ret, 0, 0, errno | _EPERM), (ret, 0, 0, errno | _ENOSYS)]
    labels = {"clone": len(body) - 5, "deny": len(body) - 2, "enosys": len(body) - 1}
    program = []
    for i, (code, jt, jf, k) in enumerate(body):
        jumps = [labels[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf)]
        program.append((code, jumps[0], jumps[1], k))
    return program


def install_seccomp() -> None:
    """Install :func:`seccomp_program` for this process and every process it starts (after ``no_new_privs``, which
    an unprivileged process needs for it). ``OSError`` if the kernel refuses."""
    import ctypes

    program = seccomp_program()

    class SockFilter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32)]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    filters = (SockFilter * len(program))(*[SockFilter(*instruction) for instruction in program])
    fprog = SockFprog(len(program), ctypes.cast(filters, ctypes.POINTER(SockFilter)))
    libc = _libc()
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


def _set_limits(limits: dict[str, Any], memory_by_cgroup: bool) -> None:
    import resource

    pairs = [
        (resource.RLIMIT_CPU, limits["cpu_seconds"]),
        (resource.RLIMIT_FSIZE, limits["file_bytes"]),
        (resource.RLIMIT_NOFILE, limits["open_files"]),
        (resource.RLIMIT_CORE, 0),
    ]
    if not memory_by_cgroup:  # a per-process address-space limit only where no cgroup bounds the whole tree
        pairs.append((resource.RLIMIT_AS, limits["memory_bytes"]))
    for which, value in pairs:
        resource.setrlimit(which, (value, value))


def _drop_privileges(uid: int, processes: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
    _check(_libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


# --------------------------------------------------------------------------- the zygote


def _recv_request(sock: Any, limit: int) -> tuple[bytes, list[int]]:
    import socket

    data, fds, _flags, _addr = socket.recv_fds(sock, limit, 4)
    return data, fds


def _load_cells() -> Any:  # pragma: no cover - runs in the zygote
    """The module ``_cells.py`` beside this file, loaded by path (this process never imports ``course_pe``)."""
    import importlib.util

    name = "course_pe_grading_cells"
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                     "_cells.py"))
    if spec is None or spec.loader is None:
        raise ImportError("the cell analysis (_cells.py) cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def select_reply(sources: Any, functions: Any, limit: Any) -> dict[str, Any]:
    """The reply to a "select" request: which cells run (see ``_cells.select_cells``), checked and bounded."""
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources) or \
            not isinstance(functions, list) or not all(isinstance(f, str) for f in functions) or \
            not isinstance(limit, int):
        return {"status": "error", "error": "an invalid select request"}
    selection = _CELLS.select_cells(sources, functions, limit)
    names = [n for n in selection.unresolved if len(n) <= 100][:SELECT_NAMES]
    return {"status": "ok", "error": None, "cells": selection.cells, "unresolved": names,
            "truncated": bool(selection.truncated)}


def _reap(*_: Any) -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def zygote_main(config: dict[str, Any]) -> None:  # pragma: no cover - runs as its own process
    """Import the libraries once, then fork one keeper (and child) per request from the grader."""
    import socket

    libc = _libc()
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(config["grader_pid"]):
        os._exit(0)  # the grader died before the death signal was set
    sys.path[:] = [p for p in sys.path if p] + list(config["site"])
    control = socket.socket(fileno=int(config["control"]))
    global _CELLS
    _CELLS = _load_cells()
    import numpy  # noqa: F401
    import torch
    from IPython.core.interactiveshell import InteractiveShell  # noqa: F401
    from traitlets.config import Config  # noqa: F401

    torch.set_num_threads(1)
    threads = len(os.listdir("/proc/self/task"))
    control.sendall(json.dumps({"status": "ready" if threads == 1 else "error",
                                "error": f"the template process has {threads} threads (fork needs 1)"}).encode())
    signal.signal(signal.SIGCHLD, _reap)  # keepers that have finished are reaped at once
    while True:
        try:
            data, fds = _recv_request(control, 1 << 20)
        except OSError:
            os._exit(0)
        if not data:
            os._exit(0)  # the grader closed its end
        try:
            request = json.loads(data)
            reply = _spawn(request, fds, control)
        except Exception as exc:  # noqa: BLE001 - reported to the grader
            reply = {"status": "error", "error": _exception_text(exc)}
        finally:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
        control.sendall(json.dumps(reply).encode())


def _spawn(request: dict[str, Any], fds: list[int], control: Any) -> dict[str, Any]:  # pragma: no cover
    import select

    if len(fds) != 2:
        raise ValueError(f"expected 2 descriptors, got {len(fds)}")
    report_r, report_w = os.pipe()
    zygote = os.getpid()
    keeper = os.fork()
    if keeper == 0:
        code = 70
        try:
            os.close(report_r)
            control.close()
            _keeper(request, fds, report_w, zygote)
        except BaseException as exc:  # noqa: BLE001
            try:
                os.write(report_w, json.dumps({"status": "error", "error": _exception_text(exc)}).encode())
            except OSError:
                pass
        os._exit(code)
    os.close(report_w)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([report_r], [], [], 60)
            if not ready:
                os.kill(keeper, signal.SIGKILL)
                raise TimeoutError("the sandbox did not start within 60 s")
            chunk = os.read(report_r, 4096)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(report_r)
    reply = json.loads(b"".join(chunks) or b'{"status": "error", "error": "the keeper exited"}')
    reply["keeper"] = keeper
    return reply


def _keeper(request: dict[str, Any], fds: list[int], report_w: int, zygote: int) -> None:  # pragma: no cover
    """Root, outside the submission's namespaces and cgroups: unshares, forks the child and reaps it."""
    libc = _libc()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the zygote's reaper must not reap the submission's children
    os.setsid()
    child = 0

    def zygote_died(signum: int, frame: Any) -> None:
        if child:
            try:
                os.kill(child, signal.SIGKILL)
            except OSError:
                pass
        os._exit(0)

    signal.signal(signal.SIGUSR1, zygote_died)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGUSR1, 0, 0, 0)
    if os.getppid() != zygote:
        os._exit(0)
    if request["level"] == "full":
        _check(libc.unshare(_CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWUTS), "unshare")
    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(ready_r)
        os.close(report_w)
        try:
            _child_main(request, fds[0], fds[1], ready_w)
        except BaseException as exc:  # noqa: BLE001 - the set-up failed: say why through the ready pipe
            try:
                os.write(ready_w, json.dumps({"status": "error", "error": _exception_text(exc)}).encode())
            except OSError:
                pass
        os._exit(71)
    os.close(ready_w)
    for fd in fds:
        os.close(fd)
    # the child says on its ready pipe that its set-up went through (or why not), then closes it
    message = b""
    while True:
        chunk = os.read(ready_r, 4096)
        if not chunk:
            break
        message += chunk
    os.close(ready_r)
    reply = json.loads(message) if message else {"status": "error", "error": "the child exited during its set-up"}
    reply["child"] = child
    os.write(report_w, json.dumps(reply).encode())
    os.close(report_w)
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except ChildProcessError:
            break
    os._exit(0)


# --------------------------------------------------------------------------- the child


def _read_exact_blocking(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _read_request(fd: int) -> bytes:
    (size,) = HEADER.unpack(_read_exact_blocking(fd, HEADER.size))
    if size > REQUEST_LIMIT:
        raise EOFError
    return _read_exact_blocking(fd, size)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _child_main(request: dict[str, Any], fd_in: int, fd_out: int, ready_w: int) -> None:  # pragma: no cover
    for procs in request["cgroups"]:  # first of all: the child and all it starts belong to the submission's cgroups
        with open(procs, "w") as fh:
            fh.write("0")  # "0": the writing process (its PID in this new namespace is 1)
    level = request["level"]
    limits = request["limits"]
    if level == "full":
        _enter_fresh_root(request)
        work, home = "/tmp/work", "/tmp/home"
        build = "/grading"
    else:
        work = request["workdir"]
        home = os.path.join(work, ".home")
        os.makedirs(home, exist_ok=True)
        build = request["build"]
        if request.get("uid") is not None:  # root without namespaces: the folder belongs to the sandbox's user
            for folder in (work, home):
                os.chown(folder, int(request["uid"]), int(request["uid"]))
    os.chdir(work)
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ.update({"HOME": home, "TMPDIR": "/tmp" if level == "full" else work,
                       "MPLCONFIGDIR": os.path.join(home, ".matplotlib")})
    _set_limits(limits, bool(request["memory_by_cgroup"]))
    if level == "full" or request.get("uid") is not None:
        _drop_privileges(int(request["uid"]), int(limits["processes"]))
    if level != "full" and request.get("uid") is not None:
        for path in [*request["python"], build]:  # what the child imports must be readable by its own user id
            if not os.access(path, os.R_OK | os.X_OK):
                raise RuntimeError(f"the sandbox's user id cannot read {path} (it or a folder above it is not "
                                   "readable by other users): at the limited level as root, Python and its packages "
                                   "must be readable by every user")
    keep = {fd_in, fd_out, ready_w}
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    for fd in range(3, max(keep) + 64):  # nothing of the zygote's or the keeper's survives in the child
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    os.closerange(max(keep) + 64, 65536)
    sys.stdout = open(os.devnull, "w")
    sys.stderr = open(os.devnull, "w")
    sys.path[:] = [build] + [p for p in sys.path if p]
    import importlib.util

    spec = importlib.util.find_spec("course_pe")
    origin = os.path.realpath(spec.origin) if spec is not None and spec.origin else ""
    if not origin.startswith(os.path.realpath(build) + os.sep):
        raise RuntimeError(f"course_pe would be imported from {origin or 'nowhere'}, not from the grading build")
    for path in request["must_be_absent"]:
        if os.path.exists(path):
            raise RuntimeError(f"isolation check failed: {path} is visible in the sandbox")
    if level == "full":
        for path in ["/", "/usr", "/etc", build, *request["python"]]:
            if os.path.exists(path) and os.access(path, os.W_OK):
                raise RuntimeError(f"isolation check failed: {path} is writable in the sandbox")
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    settings = Config()
    settings.HistoryManager.enabled = False
    shell = InteractiveShell(config=settings, colors="NoColor")
    shell.showtraceback = lambda *a, **k: None
    shell.showsyntaxerror = lambda *a, **k: None
    if request.get("seccomp"):  # last: nothing of the set-up above needs what the filter refuses
        install_seccomp()
    os.write(ready_w, json.dumps({"status": "ready"}).encode())
    os.close(ready_w)
    _serve(shell, fd_in, fd_out)


def _serve(shell: Any, fd_in: int, fd_out: int) -> None:  # pragma: no cover - tested through the grader
    import torch

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a file over the size limit is an OSError, not death
    reply_id = 0
    while True:
        try:
            request = json.loads(_read_request(fd_in))
            reply_id = int(request["id"])
        except Exception:  # noqa: BLE001 - the grader hung up or the channel was damaged: stop
            os._exit(0)
        op = request.get("op")
        arrays = []
        sources = None
        try:
            if op == "call":
                for spec in request["args"]:
                    if spec["kind"] != "value":
                        arrays.append(npy_load(_read_request(fd_in), REQUEST_LIMIT))
            elif op == "select":
                sources = json.loads(_read_request(fd_in).decode("utf-8"))
        except Exception:  # noqa: BLE001
            os._exit(0)
        payload = None
        try:
            if op == "select":  # before any of the submission's code has run in this process
                reply = select_reply(sources, request.get("functions"), request.get("limit"))
                sources = None
            elif op == "run":
                result = shell.run_cell(request["source"], store_history=False, silent=True)
                exc = result.error_before_exec or result.error_in_exec
                reply = {"status": "ok"} if exc is None else {"status": "error", "error": _exception_text(exc)[:300]}
            elif op == "call":
                args, it = [], iter(arrays)
                for spec in request["args"]:
                    if spec["kind"] == "value":
                        args.append(spec["value"])
                    else:
                        arr = next(it)
                        args.append(torch.from_numpy(arr) if spec["kind"] == "tensor" else arr)
                fn = shell.user_ns.get(request["function"])
                if fn is None or not callable(fn):
                    reply = {"status": "missing"}
                else:
                    status, value, error = run_call(fn, tuple(args))
                    reply = {"status": status, "error": error}
                    if status == "ok":
                        if value.nbytes > int(request["answer_bytes"]):
                            reply = {"status": "invalid", "error": f"the answer has {value.nbytes} bytes, more than "
                                                                   f"the {request['answer_bytes']} accepted"}
                        else:
                            payload = npy_bytes(value)
            else:
                reply = {"status": "error", "error": f"unknown request {op!r}"}
        except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt from the student's code
            reply = {"status": "error", "error": _exception_text(exc)[:300]}
            payload = None
        reply["id"] = reply_id
        try:
            data = frame(json.dumps(reply).encode())
            if payload is not None:
                data += frame(payload)
            _write_all(fd_out, data)
        except Exception:  # noqa: BLE001 - the grader is gone
            os._exit(0)


if __name__ == "__main__":  # pragma: no cover
    if sys.argv[1:] == ["--seccomp-probe"]:  # containment(): can this process install the filter? (exit status 0)
        install_seccomp()
        os._exit(0 if _libc().unshare(_CLONE_NEWUTS) != 0 else 1)
    zygote_main(json.loads(sys.argv[1]))
