"""A small deterministic training loop and evaluation by position.

``train`` draws a fresh batch from a task every step (from its own seeded generator), optimises
cross-entropy with AdamW and a linear warm-up, and shows a tqdm progress bar on stderr.
``evaluate_by_position`` reports loss and accuracy at every target position, which is what the
length-extrapolation chapters plot.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from ._validation import check_bool, check_float, check_int, check_positive_int, check_tensor
from .reproducibility import make_generator
from .tasks import IGNORE, Batch

__all__ = ["PositionReport", "TrainConfig", "TrainResult", "evaluate_by_position", "train"]


class Task(Protocol):
    def sample(self, batch_size: int, seq_len: int, generator: torch.Generator | None = None) -> Batch: ...


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of :func:`train`. ``seq_len`` is passed to the task's ``sample``.

    ``steps``, ``batch_size``, ``seq_len`` and ``log_every`` are positive integers, ``warmup`` and ``seed``
    integers >= 0, ``lr > 0`` and ``weight_decay >= 0`` finite numbers, ``grad_clip`` a finite number > 0 or
    ``None`` (no clipping; a 0 is an error rather than a silent "off").
    """

    steps: int = 500
    batch_size: int = 32
    seq_len: int = 16
    lr: float = 3e-3
    weight_decay: float = 0.01
    warmup: int = 50
    grad_clip: float = 1.0
    seed: int = 0
    log_every: int = 50

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "seq_len", "log_every"):
            check_positive_int(name, getattr(self, name))
        check_int("warmup", self.warmup, minimum=0)
        check_int("seed", self.seed, minimum=0, maximum=2**63 - 1)
        check_float("lr", self.lr, minimum=0.0, strict_minimum=True)
        check_float("weight_decay", self.weight_decay, minimum=0.0)
        if self.grad_clip is not None:
            check_float("grad_clip", self.grad_clip, minimum=0.0, strict_minimum=True)


@dataclass
class TrainResult:
    """Loss of every step, and the mean loss over each ``log_every`` window."""

    losses: list[float] = field(default_factory=list)
    logged: list[tuple[int, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name in ("losses", "logged"):
            if not isinstance(getattr(self, name), list):
                raise TypeError(f"{name} must be a list, got {type(getattr(self, name)).__name__}")

    @property
    def final_loss(self) -> float:
        """Mean loss of the last tenth of the steps (at least one step); raises if no step was recorded."""
        if not self.losses:
            raise ValueError("final_loss needs at least one recorded loss, got an empty losses list")
        tail = self.losses[-max(1, len(self.losses) // 10) :]
        return sum(tail) / len(tail)


def _loss(model: nn.Module, batch: Batch) -> torch.Tensor:
    logits = model(batch.inputs)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.targets.reshape(-1), ignore_index=IGNORE)


def train(
    model: nn.Module,
    task: Task,
    config: TrainConfig = TrainConfig(),
    *,
    progress: bool = True,
    description: str | None = None,
) -> TrainResult:
    """Train ``model`` on ``task`` in place and return the loss history.

    Data come from ``make_generator(config.seed)``, so two runs with the same config and the same
    model initialisation are identical (with deterministic algorithms and a fixed thread count).
    ``model`` is an ``nn.Module`` mapping long tokens to logits, ``task`` has a ``sample`` method,
    ``config`` is a :class:`TrainConfig`.
    """
    _check_model_task(model, task)
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    progress = check_bool("progress", progress)
    if description is not None and not isinstance(description, str):
        raise TypeError(f"description must be None or a str, got {type(description).__name__}")
    steps = check_positive_int("steps", config.steps)
    generator = make_generator(config.seed)
    optimiser = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    warmup = max(1, config.warmup)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser,
        lambda step: min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(step, steps) / steps)),
    )
    result = TrainResult()
    model.train()
    bar = tqdm(range(steps), desc=description, file=sys.stderr, disable=not progress, mininterval=1.0, leave=False)
    window: list[float] = []
    for step in bar:
        batch = task.sample(config.batch_size, config.seq_len, generator)
        loss = _loss(model, batch)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        if config.grad_clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimiser.step()
        schedule.step()
        value = float(loss.detach())
        result.losses.append(value)
        window.append(value)
        if (step + 1) % config.log_every == 0 or step + 1 == steps:
            result.logged.append((step + 1, sum(window) / len(window)))
            bar.set_postfix(loss=f"{result.logged[-1][1]:.3f}")
            window = []
    bar.close()
    model.eval()
    return result


@dataclass(frozen=True)
class PositionReport:
    """Per-position metrics over ``(num_batches * batch_size)`` sequences.

    ``loss`` and ``accuracy`` are float64 tensors of shape ``(seq,)`` (NaN where nothing is scored).
    """

    loss: torch.Tensor
    accuracy: torch.Tensor

    def __post_init__(self) -> None:
        check_tensor("loss", self.loss, "floating", dim=1, finite=False)
        check_tensor("accuracy", self.accuracy, "floating", dim=1, finite=False)
        if self.loss.shape != self.accuracy.shape:
            raise ValueError(f"loss and accuracy must have one shape, got {tuple(self.loss.shape)} and {tuple(self.accuracy.shape)}")

    def mean_loss(self, start: int = 0, stop: int | None = None) -> float:
        """NaN-ignoring mean of ``loss[start:stop]`` (Python slice semantics, integer bounds)."""
        _check_slice(start, stop)
        return float(self.loss[start:stop].nanmean())

    def mean_accuracy(self, start: int = 0, stop: int | None = None) -> float:
        """NaN-ignoring mean of ``accuracy[start:stop]`` (Python slice semantics, integer bounds)."""
        _check_slice(start, stop)
        return float(self.accuracy[start:stop].nanmean())


def _check_slice(start: object, stop: object) -> None:
    check_int("start", start)
    if stop is not None:
        check_int("stop", stop)


def _check_model_task(model: object, task: object) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not callable(getattr(task, "sample", None)):
        raise TypeError(f"task must have a sample(batch_size, seq_len, generator) method, got {type(task).__name__}")


@torch.no_grad()
def evaluate_by_position(
    model: nn.Module,
    task: Task,
    seq_len: int,
    *,
    batch_size: int = 64,
    num_batches: int = 4,
    seed: int = 12345,
) -> PositionReport:
    """Mean cross-entropy and accuracy at each target position, on fresh seeded data.

    ``seq_len``, ``batch_size`` and ``num_batches`` are positive integers, ``seed`` an integer >= 0.
    """
    _check_model_task(model, task)
    check_positive_int("seq_len", seq_len)
    check_positive_int("batch_size", batch_size)
    check_positive_int("num_batches", num_batches)
    check_int("seed", seed, minimum=0, maximum=2**63 - 1)
    generator = make_generator(seed)
    was_training = model.training
    model.eval()
    loss_sum: torch.Tensor | None = None
    correct = count = None
    for _ in range(check_positive_int("num_batches", num_batches)):
        batch = task.sample(batch_size, seq_len, generator)
        logits = model(batch.inputs).double()
        targets = batch.targets
        valid = targets != IGNORE
        safe = targets.clamp(min=0)
        nll = F.cross_entropy(logits.transpose(1, 2), safe, reduction="none") * valid
        hit = (logits.argmax(-1) == safe) & valid
        if loss_sum is None:
            loss_sum, correct, count = nll.sum(0), hit.sum(0).double(), valid.sum(0).double()
        else:
            loss_sum, correct, count = loss_sum + nll.sum(0), correct + hit.sum(0), count + valid.sum(0)
    model.train(was_training)
    assert loss_sum is not None and correct is not None and count is not None
    nan = torch.full_like(count, float("nan"))
    return PositionReport(
        loss=torch.where(count > 0, loss_sum / count.clamp(min=1), nan),
        accuracy=torch.where(count > 0, correct / count.clamp(min=1), nan),
    )
