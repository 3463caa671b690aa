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
from collections.abc import Callable, Sequence
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from ._validation import (
    check_bool,
    check_float,
    check_int,
    check_memory,
    check_positive_int,
    check_tensor,
    numel,
    require_values,
)
from .reproducibility import make_generator
from .rope_scaling import DynamicNTKScaling, LongRoPEScaling
from .tasks import IGNORE, Batch

__all__ = [
    "DATA_SEED_OFFSET",
    "MAX_EVAL_BATCHES",
    "MAX_TRAIN_STEPS",
    "PositionReport",
    "SeedsResult",
    "TrainConfig",
    "TrainResult",
    "evaluate_by_position",
    "evaluate_seeds",
    "init_seeds",
    "seed_streams",
    "train",
    "train_seeds",
]


#: Most steps a :class:`TrainConfig` allows (:func:`train` and :func:`train_seeds` run one forward and backward pass
#: per step; a typo of a few zeros would otherwise run for days).
MAX_TRAIN_STEPS = 2**20


class Task(Protocol):
    def sample(self, batch_size: int, seq_len: int, generator: torch.Generator | None = None) -> Batch: ...


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of :func:`train`. ``seq_len`` is passed to the task's ``sample``.

    ``steps`` is an integer in ``1 ... MAX_TRAIN_STEPS`` (2**20: each step is a forward and backward pass, and a
    million steps of the course's models already take hours), ``batch_size``, ``seq_len`` and ``log_every`` are
    positive integers, ``warmup`` and ``seed`` integers >= 0, ``lr > 0`` and ``weight_decay >= 0`` finite numbers,
    ``grad_clip`` a finite number > 0 or ``None`` (no clipping; a 0 is an error rather than a silent "off").
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
        # checked values are stored back, so a NumPy integer or float becomes a Python one
        object.__setattr__(self, "steps", check_int("steps", self.steps, minimum=1, maximum=MAX_TRAIN_STEPS))
        for name in ("batch_size", "seq_len", "log_every"):
            object.__setattr__(self, name, check_positive_int(name, getattr(self, name)))
        object.__setattr__(self, "warmup", check_int("warmup", self.warmup, minimum=0))
        object.__setattr__(self, "seed", check_int("seed", self.seed, minimum=0, maximum=2**63 - 1))
        object.__setattr__(self, "lr", check_float("lr", self.lr, minimum=0.0, strict_minimum=True))
        object.__setattr__(self, "weight_decay", check_float("weight_decay", self.weight_decay, minimum=0.0))
        if self.grad_clip is not None:
            object.__setattr__(self, "grad_clip",
                               check_float("grad_clip", self.grad_clip, minimum=0.0, strict_minimum=True))


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
    # the loss of every step is kept (a Python float in a list, about 32 bytes)
    check_memory("config.steps", 40 * steps, f"the losses of {steps} steps")
    check_memory("config.batch_size and config.seq_len", 4 * 8 * numel(config.batch_size, config.seq_len),
                 f"batches of {config.batch_size} x {config.seq_len} tokens")
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
        require_values("loss", self.loss)  # a report of numbers (its means are Python floats)
        require_values("accuracy", self.accuracy)
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
    if isinstance(task, type):  # CopyTask instead of CopyTask(...): sample would be called unbound
        raise TypeError(f"task must be a task object, got the class {task.__name__}; create one, e.g. "
                        f"{task.__name__}()")
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

    ``seq_len`` and ``batch_size`` are positive integers, ``num_batches`` an integer in ``1 ... MAX_EVAL_BATCHES``
    (2**20; each batch is a forward pass, and an evaluation of more than a million batches is a typo that would run for
    days), ``seed`` an integer >= 0.
    """
    _check_model_task(model, task)
    check_positive_int("seq_len", seq_len)
    check_positive_int("batch_size", batch_size)
    num_batches = check_int("num_batches", num_batches, minimum=1, maximum=MAX_EVAL_BATCHES)
    check_int("seed", seed, minimum=0, maximum=2**63 - 1)
    generator = make_generator(seed)
    was_training = model.training
    model.eval()
    loss_sum: torch.Tensor | None = None
    correct = count = None
    for _ in range(num_batches):
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


# --------------------------------------------------------------------------------------------------------------------
# Several seeds of one configuration, trained together as one batched model.
# --------------------------------------------------------------------------------------------------------------------

#: Most batches :func:`evaluate_by_position` evaluates in one call.
MAX_EVAL_BATCHES = 2**20

#: Offset between a seed's initialisation seed and its data seed (see :func:`seed_streams`).
DATA_SEED_OFFSET = 1_000_003


def seed_streams(seed: int) -> tuple[int, int]:
    """The ``(init_seed, data_seed)`` pair that one experiment seed stands for.

    An experiment "seed" in this course varies both the model initialisation and the training data: the model is
    built under ``torch.manual_seed(init_seed)`` and its batches come from ``make_generator(data_seed)``. The two are
    kept apart so that the initialisation and the data of one seed are not drawn from the same stream.
    """
    seed = check_int("seed", seed, minimum=0, maximum=2**63 - 1 - DATA_SEED_OFFSET)
    return seed, seed + DATA_SEED_OFFSET


def init_seeds(make_model: Callable[[], nn.Module], seeds: Sequence[int]) -> list[nn.Module]:
    """One model per seed, each built by ``make_model()`` right after ``torch.manual_seed(init_seed)``.

    ``make_model`` is a function of no arguments (for example ``lambda: TinyTransformer(...)``); the models must
    all have the same architecture, as :func:`train_seeds` trains them together.
    """
    if not callable(make_model):
        raise TypeError(f"make_model must be a function returning an nn.Module, got {type(make_model).__name__}")
    seeds = _check_seeds(seeds)
    models = []
    for seed in seeds:
        torch.manual_seed(seed_streams(seed)[0])
        model = make_model()
        if not isinstance(model, nn.Module):
            raise TypeError(f"make_model must return an nn.Module, got {type(model).__name__}")
        models.append(model)
    return models


def _check_seeds(seeds: Sequence[int]) -> list[int]:
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence):
        raise TypeError(f"seeds must be a sequence of ints, got {type(seeds).__name__}")
    seeds = [check_int(f"seeds[{i}]", s, minimum=0, maximum=2**63 - 1 - DATA_SEED_OFFSET) for i, s in enumerate(seeds)]
    if not seeds:
        raise ValueError("seeds must not be empty")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {seeds}")
    return seeds


@dataclass
class SeedsResult:
    """Loss history of :func:`train_seeds`: ``losses`` is a float64 tensor ``(steps, num_seeds)``.

    ``data_seeds[k]`` is the data seed that model ``k`` was trained on.
    """

    data_seeds: list[int]
    losses: torch.Tensor

    def __post_init__(self) -> None:
        if not isinstance(self.data_seeds, list):
            raise TypeError(f"data_seeds must be a list of ints, got {type(self.data_seeds).__name__}")
        for i, s in enumerate(self.data_seeds):
            check_int(f"data_seeds[{i}]", s, minimum=0)
        check_tensor("losses", self.losses, "floating", dim=2, finite=False)
        if self.losses.shape[1] != len(self.data_seeds):
            raise ValueError(f"losses must be (steps, num_seeds) with num_seeds = len(data_seeds) = "
                             f"{len(self.data_seeds)}, got shape {tuple(self.losses.shape)}")

    def result(self, index: int) -> TrainResult:
        """The history of the ``index``-th seed as a :class:`TrainResult` (as :func:`train` would return it).

        ``index`` lies in ``[-num_seeds, num_seeds - 1]`` (negative counts from the end, as for a list)."""
        count = self.losses.shape[1]
        index = check_int("index", index, minimum=-count, maximum=count - 1)
        return TrainResult(losses=self.losses[:, index].tolist())

    @property
    def final_losses(self) -> torch.Tensor:
        """Per-seed mean loss over the last tenth of the steps, shape ``(num_seeds,)``."""
        tail = max(1, self.losses.shape[0] // 10)
        return self.losses[-tail:].mean(0)


#: What every ``nn.Module`` keeps in its ``__dict__`` (parameters, buffers, submodules, hooks, the training flag):
#: not configuration.
_MODULE_INTERNALS = frozenset(vars(nn.Module()))


def _same_value(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype
                and a.shape == b.shape and a.device == b.device and bool(torch.equal(a, b)))
    try:
        return bool(a == b)
    except Exception:  # an object whose == is not a truth value (an array, ...): compare what it prints
        return repr(a) == repr(b)


def _configuration_difference(first: nn.Module, other: nn.Module) -> str | None:
    """The first plain attribute (``causal``, ``layout``, ``scale``, ``scaling``, ...) of a submodule of ``other`` that
    differs from ``first``'s, as ``"name: a vs b"``; ``None`` if all agree. ``train_seeds`` runs every model with the
    attributes of ``models[0]``, so they must agree, except those a module declares as living in its buffers
    (``_seed_stackable_attributes``: RoPE's scaling, whose cos/sin caches are stacked per model) when no call has to
    rebuild those buffers: that holds for a fixed scaling, not for a scaling that depends on the length."""
    for (name, a), (_, b) in zip(first.named_modules(), other.named_modules()):
        where = f".{name}" if name else ""
        if type(a) is not type(b):
            return f"{where or 'the model'} is a {type(b).__name__}, not a {type(a).__name__}"
        stackable = getattr(type(a), "_seed_stackable_attributes", frozenset())
        keys = (set(vars(a)) | set(vars(b))) - _MODULE_INTERNALS
        for key in sorted(keys):
            if key not in vars(a) or key not in vars(b):
                return f"{where}.{key}: present in one model only"
            va, vb = vars(a)[key], vars(b)[key]
            if _same_value(va, vb):
                continue
            if key in stackable:
                length_dependent = (DynamicNTKScaling, LongRoPEScaling)
                if not (isinstance(getattr(a, "scaling", None), length_dependent)
                        or isinstance(getattr(b, "scaling", None), length_dependent)):
                    continue
                return (f"{where}.{key}: {va!r} vs {vb!r} (a scaling that depends on the current length rebuilds its "
                        "cos/sin tables in the forward pass, from the first model's scaling)")
            shown_a, shown_b = (repr(v) if not isinstance(v, torch.Tensor) else f"a tensor {tuple(v.shape)}"
                                for v in (va, vb))
            return f"{where}.{key}: {shown_a[:200]} vs {shown_b[:200]}"
    return None


def _stack_check(models: Sequence[nn.Module]) -> None:
    if isinstance(models, nn.Module) or not isinstance(models, Sequence) or not models:
        raise TypeError("models must be a non-empty sequence of nn.Module (one per seed)")
    first = models[0]
    if not isinstance(first, nn.Module):
        raise TypeError(f"models[0] is a {type(first).__name__}, not an nn.Module")
    names = [(n, p.shape) for n, p in first.named_parameters()]
    buffers = dict(first.named_buffers())
    for i, model in enumerate(models):
        if not isinstance(model, nn.Module):
            raise TypeError(f"models[{i}] is a {type(model).__name__}, not an nn.Module")
        if type(model) is not type(first) or [(n, p.shape) for n, p in model.named_parameters()] != names:
            raise ValueError(f"models[{i}] has a different architecture from models[0]; train_seeds needs identical ones")
        other = dict(model.named_buffers())
        if other.keys() != buffers.keys() or any(other[k].shape != buffers[k].shape for k in buffers):
            raise ValueError(f"models[{i}] has buffers of other names or shapes than models[0]")
        difference = _configuration_difference(first, model)
        if difference is not None:
            raise ValueError(
                f"models[{i}] is configured differently from models[0] ({difference}); train_seeds runs every model "
                "with the attributes of models[0] (only the parameters and buffers are per model), so it trains "
                "models that differ only in their weights and buffers: train the others separately"
            )


def _split_buffers(models: Sequence[nn.Module]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Buffers equal in every model (shared), and the others stacked along a leading seed axis."""
    shared, stacked = {}, {}
    per_model = [dict(m.named_buffers()) for m in models]
    for name, first in per_model[0].items():
        values = [b[name] for b in per_model]
        if all(torch.equal(v, first) for v in values[1:]):
            shared[name] = first
        else:
            stacked[name] = torch.stack(values)
    return shared, stacked


def _clip_per_seed(grads: list[torch.Tensor], max_norm: float) -> None:
    """``clip_grad_norm_`` applied to each seed's slice (leading axis) of the stacked gradients, in place."""
    per_param = torch.stack([g.flatten(1).norm(dim=1) for g in grads], dim=1)  # (seeds, params)
    total = per_param.norm(dim=1)  # (seeds,)
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.view(-1, *([1] * (g.dim() - 1))))


def train_seeds(
    models: Sequence[nn.Module],
    task: Task,
    config: TrainConfig = TrainConfig(),
    data_seeds: Sequence[int] | None = None,
    *,
    progress: bool = True,
    description: str | None = None,
) -> SeedsResult:
    """Train several copies of one architecture (one per seed) together, as one batched model; in place.

    Seed ``k`` is ``models[k]`` trained on batches from ``make_generator(data_seeds[k])`` with exactly the schedule,
    optimiser (AdamW), warm-up, cosine decay and gradient clipping of :func:`train`: the result equals ``len(models)``
    separate calls ``train(models[k], task, replace(config, seed=data_seeds[k]))`` up to float rounding (the batched
    matrix products add in another order). ``config.seed`` is not used. ``data_seeds`` defaults to
    ``[seed_streams(k)[1] for k in range(len(models))]``; pass ``[seed_streams(s)[1] for s in seeds]`` with models
    from :func:`init_seeds`.

    How: the parameters are stacked along a new leading "seed" axis (``torch.func.stack_module_state``) and the
    forward pass is ``torch.func.vmap`` of ``torch.func.functional_call`` over that axis and over the batches, so one
    call of each kernel serves every seed. Buffers (caches, fixed tables) equal in every model are shared; buffers that
    differ are stacked too, so models that differ only in buffers (the same architecture with different RoPE scalings,
    whose cos/sin caches are buffers) train together. The seeds' losses are summed before ``backward``; each seed's
    parameters receive exactly its own gradient. Plain attributes come from ``models[0]``, so they must agree: a
    model whose ``causal``, layout, embedding scale, ... differs from ``models[0]``'s is refused (``ValueError``
    naming the attribute), and so are models whose RoPE scalings differ and depend on the length (dynamic NTK,
    LongRoPE). Models with different fixed scalings train together while their caches cover the input; a forward
    pass that would have to rebuild different caches (an input longer than ``max_positions``) is refused, since it
    would rebuild them all from ``models[0]``'s scaling. Identical models may grow their caches (each call computes
    what it needs).

    Returns the per-step losses, ``(steps, num_seeds)``. The trained weights are copied back into ``models``.
    """
    from torch.func import functional_call, stack_module_state, vmap

    _stack_check(models)
    _check_model_task(models[0], task)
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    check_bool("progress", progress)
    if description is not None and not isinstance(description, str):
        raise TypeError(f"description must be a str or None, got {type(description).__name__}")
    count = len(models)
    if data_seeds is None:
        data_seeds = [seed_streams(k)[1] for k in range(count)]
    if isinstance(data_seeds, (str, bytes)) or not isinstance(data_seeds, Sequence):
        raise TypeError(f"data_seeds must be a sequence of {count} ints (one per model), got {type(data_seeds).__name__}")
    if len(data_seeds) != count:
        raise ValueError(f"data_seeds must be a sequence of {count} ints (one per model), got {data_seeds!r}")
    data_seeds = [check_int(f"data_seeds[{i}]", s, minimum=0, maximum=2**63 - 1) for i, s in enumerate(data_seeds)]
    steps = config.steps
    check_memory("config.steps", 8 * numel(steps, count) + 40 * steps, f"the losses of {steps} steps x {count} seeds")
    check_memory("config.batch_size and config.seq_len", 4 * 8 * numel(count, config.batch_size, config.seq_len),
                 f"batches of {count} x {config.batch_size} x {config.seq_len} tokens")
    generators = [make_generator(int(s)) for s in data_seeds]
    for model in models:
        model.train()
    params, _ = stack_module_state(list(models))  # name -> (seeds, ...), leaf tensors that require grad
    shared, stacked = _split_buffers(models)
    names = list(params)
    leaves = [params[n] for n in names]
    template = models[0]

    def seed_loss(
        p: dict[str, torch.Tensor], b: dict[str, torch.Tensor], inputs: torch.Tensor, targets: torch.Tensor
    ) -> torch.Tensor:
        logits = functional_call(template, (p, b, shared), (inputs,))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE)

    batched_loss = vmap(seed_loss, in_dims=(0, 0, 0, 0))
    optimiser = torch.optim.AdamW(leaves, lr=config.lr, weight_decay=config.weight_decay)
    warmup = max(1, config.warmup)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser,
        lambda step: min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(step, steps) / steps)),
    )
    history = torch.empty(steps, count, dtype=torch.float64)
    bar = tqdm(range(steps), desc=description, file=sys.stderr, disable=not progress, mininterval=1.0, leave=False)
    for step in bar:
        batches = [task.sample(config.batch_size, config.seq_len, g) for g in generators]
        inputs = torch.stack([b.inputs for b in batches])  # (seeds, batch, seq)
        targets = torch.stack([b.targets for b in batches])
        losses = batched_loss(params, stacked, inputs, targets)  # (seeds,)
        optimiser.zero_grad(set_to_none=True)
        losses.sum().backward()
        if config.grad_clip:
            _clip_per_seed([leaf.grad for leaf in leaves if leaf.grad is not None], config.grad_clip)
        optimiser.step()
        schedule.step()
        history[step] = losses.detach().double()
        if (step + 1) % config.log_every == 0 or step + 1 == steps:
            bar.set_postfix(loss=f"{float(history[step].mean()):.3f}")
    bar.close()
    with torch.no_grad():
        for k, model in enumerate(models):
            own = dict(model.named_parameters())
            for n in names:
                own[n].copy_(params[n][k])
            model.eval()
    return SeedsResult(data_seeds=[int(s) for s in data_seeds], losses=history)


def evaluate_seeds(
    models: Sequence[nn.Module],
    task: Task,
    seq_len: int,
    *,
    batch_size: int = 64,
    num_batches: int = 4,
    seed: int = 12345,
) -> list[PositionReport]:
    """:func:`evaluate_by_position` for each model, on the same evaluation data (paired comparisons).

    ``models`` are seeds of one configuration: the same class with the same parameter names and shapes (models of
    different architectures are refused with a ``ValueError``; evaluate them with one call each)."""
    if isinstance(models, nn.Module) or not isinstance(models, Sequence) or not models:
        raise TypeError("models must be a non-empty sequence of nn.Module")
    for i, model in enumerate(models):
        if not isinstance(model, nn.Module):
            raise TypeError(f"models[{i}] is a {type(model).__name__}, not an nn.Module")
    shapes = [(n, p.shape) for n, p in models[0].named_parameters()]
    for i, model in enumerate(models[1:], start=1):
        if type(model) is not type(models[0]) or [(n, p.shape) for n, p in model.named_parameters()] != shapes:
            raise ValueError(f"models[{i}] has a different architecture from models[0]; evaluate_seeds compares seeds "
                             "of one configuration (call evaluate_by_position for each architecture)")
    return [
        evaluate_by_position(m, task, seq_len, batch_size=batch_size, num_batches=num_batches, seed=seed)
        for m in models
    ]
