"""Speed of training several seeds as one batched model, against one ordinary run per seed.

    python -m course_pe.seeds_benchmark                     # 3 seeds, the extrapolation chapter's model
    python -m course_pe.seeds_benchmark --seeds 5 --steps 100 --repeats 3

Both arms train the same models (``init_seeds``) on the same data streams for the same steps: the *separate* arm
calls :func:`course_pe.training.train` once per seed, the *batched* arm calls
:func:`course_pe.training.train_seeds` once. Each arm is timed ``repeats`` times, alternating, and the median and the
range of the wall times are printed with the CPU time of the process. The machine's load changes from one repeat to
the next on a shared computer, so read the range as well as the median.

What to expect on a CPU: batching removes the per-step overhead (Python, autograd bookkeeping, kernel dispatch,
optimiser loops) that separate runs pay once per seed, but not the matrix arithmetic, which grows with the number of
seeds either way. With one thread on the course machine a step of the default model (batch 32, 32 positions, about
0.1 M parameters) spends roughly two thirds of its time in arithmetic, so the speed-up of three batched seeds is bounded
near 1.25x and measured about 1.1x. It grows where the overhead dominates: with ``--batch 1`` the same command measured
1.5x.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import statistics
import time
from dataclasses import dataclass

import torch

from ._validation import check_choice, check_float, check_int, check_positive_int
from .model import MODEL_POSITIONS, TinyTransformer
from .tasks import MarkovTask
from .training import TrainConfig, init_seeds, seed_streams, train, train_seeds

__all__ = ["SeedsTiming", "run_seeds_benchmark"]


@dataclass(frozen=True)
class SeedsTiming:
    """Wall and CPU seconds of each repeat, for the separate and the batched arm."""

    seeds: int
    separate_wall: list[float]
    batched_wall: list[float]
    separate_cpu: list[float]
    batched_cpu: list[float]

    def __post_init__(self) -> None:
        object.__setattr__(self, "seeds", check_positive_int("seeds", self.seeds))
        lengths = set()
        for name in ("separate_wall", "batched_wall", "separate_cpu", "batched_cpu"):
            values = getattr(self, name)
            if not isinstance(values, list):
                raise TypeError(f"{name} must be a list of seconds, got {type(values).__name__}")
            if not values:
                raise ValueError(f"{name} must hold at least one repeat")
            for i, v in enumerate(values):
                check_float(f"{name}[{i}]", v, minimum=0.0)
            lengths.add(len(values))
        if len(lengths) > 1:
            raise ValueError("separate_wall, batched_wall, separate_cpu and batched_cpu must have one entry per repeat")

    @property
    def speedup(self) -> float:
        """Median separate wall time over median batched wall time."""
        return statistics.median(self.separate_wall) / statistics.median(self.batched_wall)


def run_seeds_benchmark(
    seeds: int = 3,
    *,
    steps: int = 60,
    repeats: int = 3,
    position: str = "rope",
    d_model: int = 64,
    seq_len: int = 32,
    batch_size: int = 32,
) -> SeedsTiming:
    """Time ``seeds`` separate runs against one batched run of ``steps`` steps, ``repeats`` times each.

    A benchmark, not a training run: ``seeds`` in ``1 ... 256``, ``steps`` in ``1 ... 10**5``, ``repeats`` in
    ``1 ... 100``, ``d_model``, ``seq_len`` and ``batch_size`` in ``1 ... 4096``.
    """
    count = check_int("seeds", seeds, minimum=1, maximum=256)
    check_int("repeats", repeats, minimum=1, maximum=100)
    check_int("steps", steps, minimum=1, maximum=10**5)
    for name, value, most in (("d_model", d_model, 2**12), ("seq_len", seq_len, 2**12), ("batch_size", batch_size, 2**12)):
        check_int(name, value, minimum=1, maximum=most)
    check_choice("position", position, MODEL_POSITIONS)
    check_positive_int("d_model", d_model)
    check_positive_int("seq_len", seq_len)
    check_positive_int("batch_size", batch_size)
    task = MarkovTask(num_symbols=16, order=2, branching=3, seed=0)
    config = TrainConfig(steps=check_positive_int("steps", steps), batch_size=batch_size, seq_len=seq_len, warmup=10)
    seed_list = list(range(count))

    def make() -> TinyTransformer:
        return TinyTransformer(task.vocab_size, num_outputs=task.num_outputs, d_model=d_model, position=position,
                               causal=True, max_positions=4 * seq_len + 1)

    def separate() -> None:
        for model, seed in zip(init_seeds(make, seed_list), seed_list):
            train(model, task, dataclasses.replace(config, seed=seed_streams(seed)[1]), progress=False)

    def batched() -> None:
        train_seeds(init_seeds(make, seed_list), task, config, [seed_streams(s)[1] for s in seed_list],
                    progress=False)

    timings: dict[str, tuple[list[float], list[float]]] = {"separate": ([], []), "batched": ([], [])}
    batched()  # warm-up (first vmap call, allocator)
    for _ in range(repeats):
        for name, fn in (("separate", separate), ("batched", batched)):
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            timings[name][0].append(time.perf_counter() - wall)
            timings[name][1].append(time.process_time() - cpu)
    return SeedsTiming(count, timings["separate"][0], timings["batched"][0], timings["separate"][1],
                       timings["batched"][1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--position", default="rope")
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args(argv)
    t = run_seeds_benchmark(args.seeds, steps=args.steps, repeats=args.repeats, position=args.position,
                            d_model=args.d_model, seq_len=args.seq, batch_size=args.batch)
    print(f"{t.seeds} seeds x {args.steps} steps, position={args.position}, d_model={args.d_model}, seq {args.seq}, "
          f"batch {args.batch}; {torch.get_num_threads()} threads, torch {torch.__version__}, "
          f"{platform.processor() or platform.machine()}")
    for name, wall, cpu in (("separate", t.separate_wall, t.separate_cpu), ("batched", t.batched_wall, t.batched_cpu)):
        print(f"  {name:<9} wall median {statistics.median(wall):7.2f} s (range {min(wall):.2f}-{max(wall):.2f}), "
              f"CPU median {statistics.median(cpu):7.2f} s")
    ratios = sorted(s / b for s, b in zip(t.separate_wall, t.batched_wall))
    print(f"  speed-up (median wall, separate / batched): {t.speedup:.2f}x; per repeat {', '.join(f'{r:.2f}' for r in ratios)}")


if __name__ == "__main__":
    main()
