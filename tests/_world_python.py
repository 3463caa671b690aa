"""A Python installation that every user can read, for the tests of the limited isolation level as root.

At the limited level as root the sandbox's child drops to a user id of its own, which can only import what every user
may read. Gradescope's image has such a Python (the system's, under /usr, and a virtual environment under /opt); the
course machines run pytest with a Python under /root (mode 0700), which the child could not read. These tests
therefore run the grader under the system's ``python3.<minor>`` of the same minor version as the test's interpreter,
in a virtual environment whose ``site-packages`` is a link to this project's (so that numpy, torch, IPython and the
editable course_pe are the ones installed by ``make``). None where the machine has no such system Python.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from functools import lru_cache
from pathlib import Path


def readable_by_everyone(path: Path) -> bool:
    """True if ``path`` and every folder above it can be entered (and ``path`` read) by any user."""
    path = Path(os.path.realpath(path))
    for folder in [path, *path.parents]:
        mode = os.stat(folder).st_mode
        if not mode & stat.S_IXOTH or (folder == path and not mode & stat.S_IROTH):
            return False
    return True


@lru_cache(maxsize=1)
def world_python() -> Path | None:
    """The interpreter of a virtual environment every user can read (see the module docstring), or None."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    system = Path(f"/usr/bin/python{version}")
    site_packages = Path(sysconfig.get_paths()["purelib"])
    if not system.exists() or not readable_by_everyone(site_packages):
        return None
    probe = subprocess.run([str(system), "-c", "import sys, venv; print(sys.prefix)"], capture_output=True, text=True)
    if probe.returncode or not readable_by_everyone(Path(probe.stdout.strip()) / "lib" / f"python{version}"):
        return None
    base = Path(tempfile.mkdtemp(prefix="course_pe_world_python_"))
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    os.chmod(base, 0o755)
    env = base / "venv"
    made = subprocess.run([str(system), "-m", "venv", "--without-pip", str(env)], capture_output=True, text=True)
    if made.returncode:
        return None
    linked = env / "lib" / f"python{version}" / "site-packages"
    shutil.rmtree(linked)
    linked.symlink_to(site_packages, target_is_directory=True)
    python = env / "bin" / "python"
    check = subprocess.run([str(python), "-c", "import numpy, torch, IPython, course_pe.coursework.grade"],
                           capture_output=True, text=True)
    return python if check.returncode == 0 else None
