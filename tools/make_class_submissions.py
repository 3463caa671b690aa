"""Generate a class of submissions for the chapter ``relative``, to try the grader on a whole folder.

    python tools/make_class_submissions.py OUT_FOLDER [--book-root .]
    make grade DIR=OUT_FOLDER/relative GRADES=OUT_FOLDER/grades

Each submission starts from the student notebook of ``book/part2/relative.ipynb`` (``course_pe.coursework.workbook``), with its
two stubs (``t5_bucket``, ``alibi_slopes``) filled in. 30 submissions: correct (float64 and float32), wrong (the
classic mistakes, a lookup table over the visible cases), hostile (the attacks of the grader's tests and of the red
team, written into the answer cells, the only cells grading runs: a staller that forges a reply and sleeps, a flood
on the channel, a fork bomb, a memory hog, a vandal, a thief, a forger, a library caller, processes that try to
outlive grading) and broken (unreadable files). The file name says what each is and the score it should get
(``..._expect2.ipynb``; unreadable files are expected to get 0).
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import nbformat

from course_pe.coursework.workbook import make_student_notebook

T5 = """import math
import torch

def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    n = -relative_position
    bucket = torch.zeros_like(n)
    if bidirectional:
        num_buckets //= 2
        bucket += (n < 0).long() * num_buckets
        n = n.abs()
    else:
        n = n.clamp(min=0)
    max_exact = num_buckets // 2
    scaled = torch.log(n.clamp(min=1).float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    large = (max_exact + scaled.long()).clamp(max=num_buckets - 1)
    return bucket + torch.where(n < max_exact, n, large)
"""
SLOPES = """import math

def alibi_slopes(num_heads):
    def power_of_two(n):
        return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]
    closest = 2 ** math.floor(math.log2(num_heads))
    extra = power_of_two(2 * closest)[0::2][: num_heads - closest]
    return power_of_two(closest) + (extra if closest != num_heads else [])
"""
SLOPES32 = SLOPES.replace("import math\n", "import math\nimport torch\n").replace(
    "    return power_of_two(closest) + (extra if closest != num_heads else [])",
    "    return torch.tensor(power_of_two(closest) + (extra if closest != num_heads else []), dtype=torch.float32)")
T5_INT32 = T5.replace("    return bucket + torch.where(n < max_exact, n, large)",
                      "    return (bucket + torch.where(n < max_exact, n, large)).int()")
STUB_T5 = "def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):\n    raise NotImplementedError\n"
STUB_SLOPES = "def alibi_slopes(num_heads):\n    raise NotImplementedError\n"
NAIVE_SLOPES = "def alibi_slopes(num_heads):\n    return [2.0 ** (-8.0 * (h + 1) / num_heads) for h in range(num_heads)]\n"
FLIPPED_T5 = T5.replace("    n = -relative_position\n", "    n = relative_position\n")
OFF_SLOPES = SLOPES.replace("2.0 ** (-8.0 * (h + 1) / n)", "2.0 ** (-8.0 * h / n)")
# the red team's lookup table (attack 6): literal slopes for every head count of a small public domain (1 ... 64),
# computed here, so the notebook holds numbers and no formula


def _lookup_slopes() -> str:
    namespace: dict = {}
    exec(SLOPES, namespace)
    rows = "".join(f"        {n}: {namespace['alibi_slopes'](n)!r},\n" for n in range(1, 65))
    return f"def alibi_slopes(num_heads):\n    table = {{\n{rows}    }}\n    return table[num_heads]\n"


LOOKUP_SLOPES = _lookup_slopes()
HARDCODED_SLOPES = ("def alibi_slopes(num_heads):\n    known = {1: [0.00390625], 2: [0.0625, 0.00390625]}\n"
                    "    return known.get(num_heads, [0.5] * num_heads)\n")

# Each attack is written before the stub of alibi_slopes, in its answer cell: grading runs only answer cells.
ATTACKS = {
    "monkeypatch": """import course_pe
try:
    import course_pe.coursework.exercises as ex
    ex.check = lambda exercise_id, fn: ex.CheckReport(exercise_id, True, 1, 1)
    ex.EXERCISES.clear()
except ImportError:
    pass
course_pe.exercises.check = lambda *a, **k: None
""",
    "forger": """import json, os
for target in [os.environ.get("COURSE_PE_RESULTS", ""), "{root}/grades/grades_long.csv", "/tmp/results.jsonl"]:
    try:
        open(target, "a").write(json.dumps({"exercise": "alibi_slopes", "passed": True, "score": 1.0}) + "\\n")
    except OSError:
        pass
def t5_bucket(*args):
    raise SystemExit(0)
""",
    "vandal": """import os, pathlib, shutil, subprocess
for action in [lambda: shutil.rmtree("{root}/grades"), lambda: os.system("rm -rf {root}/book"),
               lambda: subprocess.run(["sh", "-c", "echo pwned > /run/lock/pwned; echo pwned > /var/tmp/pwned"]),
               lambda: pathlib.Path("{root}/README.md").write_text("pwned")]:
    try:
        action()
    except Exception:
        pass
""",
    "thief": """import json
try:
    cells = json.load(open("{root}/book/part2/relative.ipynb"))["cells"]
    exec("".join("".join(c["source"]) for c in cells if "solution" in c["metadata"].get("tags", [])))
except OSError:
    pass
""",
    "memory_hog": """import os
for _ in range(4):
    if os.fork() == 0:
        block = bytearray(1024 * 2**20)
        os._exit(0)
block = bytearray(4 * 2**30)
""",
    "library_user": """import course_pe as cpe
def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    return cpe.t5_relative_position_bucket(relative_position, bidirectional=bidirectional, num_buckets=num_buckets,
                                           max_distance=max_distance)
_slopes = {n: cpe.alibi_slopes(n, dtype=torch.float64) if hasattr(cpe, "alibi_slopes") else None for n in range(1, 65)}
""",
    "fork_bomb": """import subprocess
procs = []
try:
    for _ in range(500):
        procs.append(subprocess.Popen(["sleep", "600"]))
except OSError:
    pass
""",
    "survivor": """import os, time
if os.fork() == 0:
    os.setsid()
    os._exit = lambda code: time.sleep(10**6)
    time.sleep(10**6)
""",
    "staller": """import json, os, struct, time
# a perfect forgery: the protocol is public, and the set-up is request 1, the t5_bucket cell 2, this cell 3
reply = json.dumps({"status": "ok", "id": 3, "error": None}).encode()
for fd in range(3, 40):  # on every descriptor (one is the grader's channel), then silence
    try:
        os.write(fd, struct.pack(">I", len(reply)) + reply)
    except OSError:
        pass
time.sleep(10**6)
""",
    "flood": """import os
for fd in range(3, 40):
    try:
        os.set_blocking(fd, False)
        os.write(fd, b"\\xff" * 2**20)
    except OSError:
        pass
""",
}


def student_notebook(book_root: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(book_root / "book" / "part2" / "relative.ipynb", as_version=4)
    return make_student_notebook(nb)


def fill(template: nbformat.NotebookNode, t5: str, slopes: str, extra: str | None = None,
         first: str | None = None) -> nbformat.NotebookNode:
    nb = copy.deepcopy(template)
    for cell in nb.cells:
        if cell.cell_type == "code" and "student" in cell.metadata.get("tags", []):
            if "def t5_bucket" in cell.source:
                cell.source = t5
            elif "def alibi_slopes" in cell.source:
                cell.source = slopes
    if first is not None:
        nb.cells.insert(1, nbformat.v4.new_code_cell(first))
    if extra is not None:
        nb.cells.append(nbformat.v4.new_code_cell(extra))
    return nb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="folder; the submissions go into OUT/relative/")
    parser.add_argument("--book-root", type=Path, default=Path("."), help="repository root (default: .)")
    args = parser.parse_args(argv)
    root = args.book_root.resolve()
    folder = args.out / "relative"
    folder.mkdir(parents=True, exist_ok=True)
    template = student_notebook(root)
    notebooks: dict[str, nbformat.NotebookNode] = {}
    for k in range(5):
        notebooks[f"correct{k}_expect2"] = fill(template, T5, SLOPES)
    notebooks["correct_float32_expect2"] = fill(template, T5_INT32, SLOPES32)
    notebooks["correct_after_crash_expect2"] = fill(template, T5, SLOPES, first="1 / 0")
    notebooks["stub_expect0"] = template
    notebooks["naive_slopes_expect1"] = fill(template, T5, NAIVE_SLOPES)
    notebooks["query_minus_key_expect1"] = fill(template, FLIPPED_T5, SLOPES)
    notebooks["off_by_one_slopes_expect1"] = fill(template, T5, OFF_SLOPES)
    notebooks["hardcoded_visible_expect1"] = fill(template, T5, HARDCODED_SLOPES)
    notebooks["lookup_table_expect1"] = fill(template, T5, LOOKUP_SLOPES)
    notebooks["float_buckets_expect1"] = fill(template, T5.replace("return bucket + torch.where(n < max_exact, n, large)",
                                                                   "return (bucket + torch.where(n < max_exact, n, large)).double()"), SLOPES)
    notebooks["both_wrong_expect0"] = fill(template, FLIPPED_T5, NAIVE_SLOPES)
    for name, attack in ATTACKS.items():
        code = attack.replace("{root}", str(root))
        notebooks[f"hostile_{name}_expect0"] = fill(template, STUB_T5, code + "\n" + STUB_SLOPES, extra=code)
    for name, nb in notebooks.items():
        nbformat.write(nb, folder / f"{name}.ipynb")
    # broken files
    (folder / "empty_expect0.ipynb").write_text("")
    (folder / "not_json_expect0.ipynb").write_text("print('hello')\n")
    (folder / "nbformat3_expect0.ipynb").write_text(json.dumps({"nbformat": 3, "nbformat_minor": 0, "worksheets": []}))
    (folder / "a_folder_expect0.ipynb").mkdir(exist_ok=True)
    schema = nbformat.writes(fill(template, T5, SLOPES))
    data = json.loads(schema)
    for cell in data["cells"]:
        if cell["cell_type"] == "code":
            cell.pop("outputs", None)
    data["metadata"]["course_pe"] = "t5_bucket"
    (folder / "no_outputs_string_metadata_expect2.ipynb").write_text(json.dumps(data))
    count = sum(1 for _ in folder.iterdir())
    print(f"wrote {count} submissions to {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
