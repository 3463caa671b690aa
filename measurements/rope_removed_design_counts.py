"""Count the ATen operations of the removed RoPE design (course_pe at commit 86bee60, the code the 2026-11-28 H200
measurement timed), at the shapes of that measurement, and sort them into views and allocations (no kernel on a GPU)
and operations that run a kernel. No GPU is needed: every shape is counted on CPU tensors;
the decode step on CPU tensors too (its argument checks read values, which is what the count looks for). The
blocked path ran on real tensors only, so the prefill is counted on real (zero) CPU tensors: 256 MiB in bfloat16.

Run from the project root (a git checkout that has commit 86bee60):

    python measurements/rope_removed_design_counts.py course_pe/data/rope_86bee60_op_counts.json
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

COMMIT = "86bee60"
CHILD = r'''
import collections, json, sys
import torch
from torch.utils._python_dispatch import TorchDispatchMode
import course_pe as cpe
assert cpe.__file__.startswith(sys.argv[1]), cpe.__file__  # the archived package, not the current one

class Count(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = collections.Counter()
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))

def count(call):
    call()  # caches filled, as in a model
    with Count() as c:
        call()
    return dict(c.ops)

prefill = torch.zeros(4, 32, 8192, 128, dtype=torch.bfloat16)
small = torch.zeros(1, 8, 8192, 128, dtype=torch.bfloat16)
step = torch.randn(1, 32, 1, 128).to(torch.bfloat16)
position = torch.tensor([4000])
print(json.dumps({
    "prefill_half": count(lambda: cpe.apply_rope(prefill, layout="half")),
    "prefill_interleaved": count(lambda: cpe.apply_rope(prefill, layout="interleaved")),
    "seq_8192_8_heads_half": count(lambda: cpe.apply_rope(small, layout="half")),
    "decode_half_positions": count(lambda: cpe.apply_rope(step, position, layout="half")),
}))
'''


def summary(ops: dict[str, int]) -> dict[str, object]:
    from course_pe.benchmark import HOST_READ_OPERATIONS, NO_KERNEL_OPERATIONS  # the current classification

    total = sum(ops.values())
    no_kernel = sum(n for op, n in ops.items() if op in NO_KERNEL_OPERATIONS)
    reads = sum(n for op, n in ops.items() if op in HOST_READ_OPERATIONS)
    return {"aten_operations": total, "views_and_allocations": no_kernel, "host_reads": reads,
            "kernels": total - no_kernel - reads, "by_operation": dict(sorted(ops.items(), key=lambda kv: -kv[1]))}


def main(out: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "archive", COMMIT, "course_pe"], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        done = subprocess.run([sys.executable, "-c", CHILD, folder], capture_output=True, text=True, check=True,
                              cwd=folder, env={"PYTHONPATH": folder, "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    import torch

    record = {
        "title": "ATen operations of course_pe's RoPE at commit 86bee60 (the removed blocked design)",
        "commit": COMMIT,
        "torch": torch.__version__,
        "script": "measurements/rope_removed_design_counts.py",
        "method": "TorchDispatchMode count of one call after a first call, on CPU tensors "
                  "(bfloat16); views and allocations (no kernel on a GPU) and host reads sorted out by "
                  "course_pe.benchmark.NO_KERNEL_OPERATIONS and HOST_READ_OPERATIONS",
        "shapes": {"prefill": [4, 32, 8192, 128], "seq_8192_8_heads": [1, 8, 8192, 128],
                   "decode": [1, 32, 1, 128], "decode_position": 4000},
        **{name: summary(ops) for name, ops in counts.items()},
    }
    Path(out).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    for name in counts:
        print(name, {k: v for k, v in record[name].items() if k != "by_operation"})


if __name__ == "__main__":
    main(sys.argv[1])
