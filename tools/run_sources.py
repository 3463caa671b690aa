"""Run every Python code block of the five source documents verbatim and compare printed output.

Usage::

    python tools/run_sources.py [--sources DIR] [--out FILE] [--timeout SECONDS] [--only 001,004]

For each source in ``book/reference/errata.yml`` (``sources:``) the script

1. extracts every fenced code block (```` ```lang ```` ... ```` ``` ````, fences may be indented), with its line range;
2. runs each ``python`` block **verbatim** in its own subprocess (``python -I``, CPU only, one thread, a timeout,
   sockets disabled, matplotlib's non-interactive backend, ``torch.manual_seed(0)`` before the block), through
   ``runpy`` so that ``if __name__ == "__main__":`` blocks run as in a script;
3. records the outcome: ``ok`` or the exception type and message that stopped it (SyntaxError, NameError, ...);
4. where the source shows a printed output right after the block (a fence without a language, announced by
   ``**输出**：`` or ``结果如下``), compares the numbers printed by the block with the numbers shown, token by token;
5. where a block fails, and the repair is a one-line, obvious one (a missing import, an unmatched parenthesis), it also
   runs a *repaired* copy, clearly labelled as not verbatim, so that the printed output can still be compared;
6. where a block fails only because it relies on names imported by an earlier block of the same source, it also runs
   it after those earlier ``import`` lines (labelled ``with_earlier_imports``).

The committed summary book/reference/audit/run_sources.json was written with
``python tools/run_sources.py --out book/reference/audit/run_sources.json``; the audit records
(book/reference/audit/00N.yml) state each block's outcome, and tests/test_source_audit.py re-runs the blocks to check it.

Nothing is skipped silently: non-Python blocks are listed with the reason they are not run (another language, a
shell command, math, a diagram, a printed output). The summary is written as JSON (``--out``, default stdout).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
# Beside the checkout (../shared/sources), or beside the worktrees' parent folder (a git worktree under wt/).
SOURCE_DIRS = [ROOT.parent / "shared" / "sources", ROOT.parent.parent / "shared" / "sources"]
DEFAULT_SOURCES = next((d for d in SOURCE_DIRS if d.is_dir()), SOURCE_DIRS[0])
CATALOGUE = ROOT / "book" / "reference" / "errata.yml"

FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w+-]*)\s*$")
NUMBER = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?|-?\d+(?:e[-+]?\d+)?")
MPL_CACHE = Path(tempfile.gettempdir()) / "run_sources_mplconfig"
# A fence without a language is the block's printed output when it opens within OUTPUT_WINDOW lines after the block
# and the text in between announces an output ("**输出**：", "运行结果", "结果如下").
OUTPUT_WINDOW = 20
OUTPUT_CUES = ("输出", "运行结果", "结果如下")

# One-line repairs, applied only to the labelled "repaired" run, never to the verbatim run.
# (source, first line of the block) -> (description, function from code to repaired code)
REPAIRS = {
    ("001", 73): (
        "remove the unmatched ')' at the end of the angle_rads line",
        lambda code: code.replace("/ d_model))\n", "/ d_model)\n", 1),
    ),
    ("003", 130): ("add the missing `import math`", lambda code: "import math\n" + code),
}

# Runs the block file given as argv[1] as __main__, without network, with a fixed seed.
HARNESS = textwrap.dedent(
    """
    import os, runpy, socket, sys
    def _no_network(*args, **kwargs):
        raise OSError("network access is disabled while running source code blocks")
    socket.socket.connect = _no_network
    socket.socket.connect_ex = _no_network
    socket.create_connection = _no_network
    path = sys.argv[1]
    code = open(path, encoding="utf-8").read()
    if "torch" in code:  # seed only what the block uses (importing torch is slow)
        import torch
        torch.manual_seed(0)
        torch.set_num_threads(1)
    if "np." in code or "numpy" in code:
        import numpy
        numpy.random.seed(0)
    sys.argv = [path]
    runpy.run_path(path, run_name="__main__")
    """
)


def extract_blocks(text: str) -> list[dict]:
    """Fenced code blocks of ``text``: language, 1-based line range (fences included), code and whether it is closed."""
    lines = text.split("\n")
    blocks, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, lang, start = match["indent"], match["lang"], i
        j = i + 1
        while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
            j += 1
        closed = j < len(lines)
        body = lines[start + 1 : j]
        body = [line[len(indent) :] if line.startswith(indent) else line.lstrip() for line in body]
        blocks.append(
            {
                "lang": lang or "",
                "start": start + 1,
                "end": (j + 1) if closed else len(lines),
                "closed": closed,
                "code": "\n".join(body) + "\n",
            }
        )
        i = j + 1
    return blocks


def numbers(text: str) -> list[str]:
    """Numeric tokens of a printed output, in order (as printed, so '0.0099' and '0.0100' differ)."""
    return NUMBER.findall(text)


def compare_output(expected: str, actual: str, truncated: bool) -> dict:
    """Compare the numbers shown by the source with those printed by the code, position by position."""
    exp, act = numbers(expected), numbers(actual)
    n = min(len(exp), len(act))
    differing = [{"index": k, "source": exp[k], "code": act[k]} for k in range(n) if float(exp[k]) != float(act[k])]
    # A printed table (every line holding the same number of values): give each difference its row and column.
    widths = {len(numbers(line)) for line in expected.splitlines() if numbers(line)}
    if len(widths) == 1 and (width := widths.pop()) > 1:
        for item in differing:
            item["row"], item["column"] = divmod(item["index"], width)
    result = {
        "source_numbers": len(exp),
        "code_numbers": len(act),
        "compared": n,
        "differing": differing,
        "source_truncated": truncated,
    }
    if truncated:
        result["verdict"] = "differs" if differing else "matches as far as the source goes"
    else:
        result["verdict"] = "matches" if not differing and len(exp) == len(act) else "differs"
    return result


def run_code(code: str, timeout: float) -> dict:
    """Run ``code`` in a fresh interpreter through the harness; return rc, stdout, stderr and the exception."""
    MPL_CACHE.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        block = Path(tmp) / "block.py"
        block.write_text(code, encoding="utf-8")
        harness = Path(tmp) / "harness.py"
        harness.write_text(HARNESS, encoding="utf-8")
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": tmp,
            "MPLBACKEND": "Agg",
            "MPLCONFIGDIR": str(MPL_CACHE),  # shared, so matplotlib builds its font cache once
            "CUDA_VISIBLE_DEVICES": "",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "PYTHONHASHSEED": "0",
            "PYTHONIOENCODING": "utf-8",
            "no_proxy": "*",
        }
        try:
            proc = subprocess.run(
                [sys.executable, "-I", str(harness), str(block)],
                cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout,
            )
        except subprocess.TimeoutExpired as err:
            out = err.stdout.decode("utf-8", "replace") if isinstance(err.stdout, bytes) else (err.stdout or "")
            return {"status": "timeout", "rc": None, "stdout": out, "stderr": f"timed out after {timeout} s",
                    "exception": "timeout", "message": f"still running after {timeout} s"}
    stderr = proc.stderr.replace(str(block), "block.py").replace(tmp, "<tmp>").replace(sys.prefix, "<python>")
    result = {"rc": proc.returncode, "stdout": proc.stdout, "stderr": stderr[-4000:]}
    if proc.returncode == 0:
        result["status"] = "ok"
    else:
        last = [line for line in stderr.strip().splitlines() if line.strip()]
        final = last[-1] if last else ""
        kind = re.match(r"^(\w+(?:\.\w+)*(?:Error|Exception|Exit|Interrupt))\b:?\s*(.*)$", final)
        result["status"] = "error"
        result["exception"] = kind.group(1).split(".")[-1] if kind else "unknown"
        result["message"] = kind.group(2) if kind else final
        # The last line of the block that appears in the traceback.
        lines = re.findall(r'File "block\.py", line (\d+)', stderr)
        if lines:
            result["block_line"] = int(lines[-1])
    return result


def why_not_run(block: dict) -> str:
    lang = block["lang"].lower()
    if lang == "java":
        return "Java, not Python (the Java blocks are sketches over an undefined framework; audited by reading)"
    if lang in {"bash", "sh", "shell"}:
        return "shell command (installs packages; not run: no network)"
    if lang == "math":
        return "a formula, not code (audited in the records)"
    if lang == "mermaid":
        return "a diagram, not code"
    return "no language: a printed output, a formula or a diagram (compared or audited, not run)"


def earlier_imports(blocks: list[dict], index: int) -> str:
    lines = []
    for block in blocks[:index]:
        if block["lang"] == "python":
            lines += [l for l in block["code"].splitlines() if re.match(r"^(import|from)\s+\w", l)]
    return "\n".join(dict.fromkeys(lines)) + "\n" if lines else ""


def audit_source(key: str, path: Path, timeout: float, starts: set[int] | None = None) -> dict:
    """Audit one source; ``starts`` limits the runs to the Python blocks opening on those lines."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    blocks = extract_blocks(text)
    records = []
    for index, block in enumerate(blocks):
        record = {"lines": [block["start"], block["end"]], "lang": block["lang"] or None}
        if block["lang"] == "python" and starts is not None and block["start"] not in starts:
            continue
        if block["lang"] != "python":
            record["run"] = "not run"
            record["reason"] = why_not_run(block)
            records.append(record)
            continue
        record["verbatim"] = run_code(block["code"], timeout)
        if record["verbatim"]["status"] != "ok":
            record["reason"] = f"cannot run as written: {record['verbatim'].get('exception')}: " \
                               f"{record['verbatim'].get('message', '')}"
        # The printed output the source shows right after the block, if any.
        shown = None
        if index + 1 < len(blocks):
            later = blocks[index + 1]
            gap = "\n".join(lines[block["end"] : later["start"] - 1])
            if later["lang"] == "" and later["start"] - block["end"] <= OUTPUT_WINDOW and any(
                cue in gap for cue in OUTPUT_CUES
            ):
                shown = later
        if shown is None:
            tail = " ".join(l.strip() for l in lines[block["end"] : block["end"] + 3] if l.strip())
            if tail.startswith("**输出**"):
                record["shown_output"] = {"kind": "prose description (audited in the records)",
                                          "lines": [block["end"] + 1, block["end"] + 3]}
        else:
            record["shown_output"] = {"kind": "printed output", "lines": [shown["start"], shown["end"]],
                                      "truncated": not shown["closed"]}
        repair = REPAIRS.get((key, block["start"]))
        if record["verbatim"]["status"] != "ok" and repair:
            record["repaired"] = {"repair": repair[0], **run_code(repair[1](block["code"]), timeout)}
        if record["verbatim"]["status"] != "ok" and record["verbatim"].get("exception") == "NameError":
            prefix = earlier_imports(blocks, index)
            if prefix:
                record["with_earlier_imports"] = {"prefix": prefix, **run_code(prefix + block["code"], timeout)}
        if shown is not None:
            for mode in ("verbatim", "repaired"):
                run = record.get(mode)
                if run and run["status"] == "ok" and run["stdout"].strip():
                    record.setdefault("comparison", {})[mode] = compare_output(
                        shown["code"], run["stdout"], truncated=not shown["closed"]
                    )
            if "comparison" not in record:
                record["comparison"] = {"verdict": "not comparable: the block prints nothing it could be compared with"}
        records.append(record)
    return {"file": path.name, "blocks": records}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sources", type=Path, default=DEFAULT_SOURCES)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--only", default="", help="comma-separated source keys, e.g. 001,004")
    args = parser.parse_args(argv)
    catalogue = yaml.safe_load(CATALOGUE.read_text(encoding="utf-8"))
    wanted = set(filter(None, args.only.split(",")))
    summary = {}
    for key, source in catalogue["sources"].items():
        if wanted and key not in wanted:
            continue
        summary[key] = audit_source(key, args.sources / source["file"], args.timeout)
    out = json.dumps(summary, ensure_ascii=False, indent=1)
    if args.out:
        args.out.write_text(out + "\n", encoding="utf-8")
    else:
        print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
