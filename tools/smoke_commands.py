"""Run the README's interactive and coursework commands once, as a reader would (.ci/run, after `make book`).

    python tools/smoke_commands.py

`make test`, `make book` and the other batch commands run in .ci/run directly. This script covers the rest:

* `make serve PORT=p`: the built site answers on 127.0.0.1:p; the server is stopped;
* `make workbook`: student notebooks are written, with no glue role and no solution left in them;
* `make lab`, `make lab-student` and `make lab-student-zh` (LAB_ARGS="--no-browser --port p"): JupyterLab answers;
  the student ones open the (Chinese) workbook and have nbgrader's extension disabled, the other has it enabled; each
  server is stopped;
* `make nbgrader`: the nbgrader course folder and its configuration are written.

Each server is started in its own process group and stopped by that group's id. tests/test_readme.py checks that
every command the README names runs here, in .ci/run, or is listed there with the reason it does not.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The commands this script runs (tests/test_readme.py reads this list).
COMMANDS = ("make serve", "make workbook", "make lab", "make lab-student", "make nbgrader", "make lab-student-zh")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url: str, timeout: float = 180.0) -> str:
    """The body of ``url`` once the server answers (polls until ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.read().decode("utf-8", errors="replace")
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


class Server:
    """A `make` command that serves until stopped, in its own process group."""

    def __init__(self, args: list[str]) -> None:
        self.args = args
        self.log = open(ROOT / "_build" / f"smoke-{args[1]}.log", "w")  # noqa: SIM115 - closed in __exit__

    def __enter__(self) -> "Server":
        self.process = subprocess.Popen(self.args, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        return self

    def __exit__(self, *exc) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.log.close()


def run(*args: str) -> None:
    print(f"==> {' '.join(args)}", flush=True)
    subprocess.run(list(args), cwd=ROOT, check=True)


def page_config(html: str) -> dict:
    start = html.index('id="jupyter-config-data"')
    start = html.index(">", start) + 1
    return json.loads(html[start:html.index("</script>", start)])


def main() -> int:
    (ROOT / "_build").mkdir(exist_ok=True)
    problems: list[str] = []

    port = free_port()
    print(f"==> make serve PORT={port}", flush=True)
    # with the Chinese edition built, make serve serves both editions (_build/site: /html/ and /html-zh/)
    both = (ROOT / "_build" / "html-zh" / "index.html").is_file()
    pages = {"/html/book/intro.html": "Positional Encoding, Corrected", "/html-zh/book/intro.html": "位置编码：勘误与正解"}
    if not both:
        pages = {"/book/intro.html": "Positional Encoding, Corrected"}
    with Server(["make", "serve", f"PORT={port}"]):
        for page, title in pages.items():
            if title not in get(f"http://127.0.0.1:{port}{page}", 60):
                problems.append(f"make serve: {page} does not answer with its title {title!r}")

    run("make", "workbook")
    notebooks = sorted((ROOT / "workbook").rglob("*.ipynb"))
    if not notebooks:
        problems.append("make workbook wrote no notebook")
    # the prose a student reads: MyST glue roles (their values are written in) and solution directives must be gone;
    # code cells may well contain the text "{glue" (an f-string that builds glue names), so only markdown is read
    for path in notebooks:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        prose = "\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                          for c in cells if c["cell_type"] == "markdown")
        for marker in ("{glue:", "{glue}", "{solution-start}", "{solution}"):
            if marker in prose:
                problems.append(f"make workbook: {path.relative_to(ROOT)} still contains {marker} in its prose")

    labs = (("lab", "book", False), ("lab-student", "workbook", True), ("lab-student-zh", "workbook-zh", True))
    for target, folder, nbgrader_disabled in labs:
        port = free_port()
        print(f"==> make {target} LAB_ARGS='--no-browser --port {port}'", flush=True)
        args = ["make", target, f"LAB_ARGS=--no-browser --port {port} --ServerApp.token= --ServerApp.password="]
        with Server(args):
            config = page_config(get(f"http://127.0.0.1:{port}/lab"))
            disabled = "@jupyter/nbgrader" in json.dumps(config.get("disabledExtensions", {}))
            if disabled != nbgrader_disabled:
                problems.append(f"make {target}: nbgrader's extension {'enabled' if not disabled else 'disabled'}")
            if not config.get("serverRoot", "").endswith(folder):
                problems.append(f"make {target}: JupyterLab opens {config.get('serverRoot')!r}, not {folder}/")
            contents = get(f"http://127.0.0.1:{port}/api/contents", 30)
            if '"type": "directory"' not in contents and '"type":"directory"' not in contents:
                problems.append(f"make {target}: the contents API lists no folder")

    run("make", "nbgrader")
    if not (ROOT / "nbgrader" / "nbgrader_config.py").is_file():
        problems.append("make nbgrader wrote no nbgrader_config.py")

    print(f"smoke: {len(COMMANDS)} commands, {len(problems)} problem(s)")
    for problem in problems:
        print(f"  FAIL {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
