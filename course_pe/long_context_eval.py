"""How context extension is measured, at the course's scale: a passkey task and sliding-window evaluation.

Two families of tests are used in the literature to judge a model run beyond its training length ``L``:

* **Perplexity by position** on long inputs, often with a *sliding window*: each token is scored with at most
  ``window`` tokens of context (Press et al., 2022; Chen et al., 2023, §3.2). :func:`sliding_window_report` does this
  for the course's causal models, optionally keeping the first ``sink`` tokens of the sequence in every window (the
  "attention sink" tokens of Xiao et al., 2024). A window no longer than ``L`` keeps every position and offset inside
  the trained range, so it is the baseline a context-extension method has to beat *with more context*, not only match.
* **Retrieval**: hide a short piece of information somewhere in a long, irrelevant input and ask for it at the end.
  The *passkey* test of Chen et al. (2023, §3.3) and Peng et al. (YaRN, §4) is the simplest; "needle in a haystack"
  sweeps the needle's depth and the input length; RULER (Hsieh et al., 2024) adds distractors, several needles and
  other tasks. :class:`PasskeyTask` is a token-level passkey test for the course's models.

:class:`PasskeyTask` input, of ``seq_len`` tokens (``F`` filler symbols, ``V`` value symbols)::

    BOS  f f f ... f  KEY v  f f ... f  QUERY        target at QUERY: v (no other position is scored)
                             |<-- distance -->|       distance = position of QUERY - position of v

Filler tokens are drawn uniformly from ``0 ... F - 1``; ``v`` from the value symbols ``F ... F + V - 1``. With
``distractors=True`` the filler is drawn from the value symbols too, so the model must find the value that follows
``KEY`` (a previous-token lookup), not merely *a* value symbol. ``distance`` is uniform on ``1 ... seq_len - 3`` unless
fixed (``at_distance``), which is how a "needle in a haystack" sweep places the needle.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ._validation import (
    check_bool,
    check_generator,
    check_int,
    check_memory,
    check_positive_int,
    memory_budget,
    numel,
)
from .reproducibility import make_generator
from .tasks import IGNORE, Batch
from .training import MAX_EVAL_BATCHES, PositionReport

#: Most sequences (distances x sequences per distance) :func:`passkey_accuracy_by_distance` scores per model.
MAX_PASSKEY_SEQUENCES = 2**20

__all__ = [
    "MAX_PASSKEY_LENGTH",
    "MAX_PASSKEY_SEQUENCES",
    "MAX_PASSKEY_SYMBOLS",
    "MAX_WINDOW_TOKENS",
    "PasskeyTask",
    "passkey_accuracy_by_distance",
    "sliding_window_report",
    "window_forward_bytes",
]

#: Most tokens (windows x window length) that :func:`sliding_window_report` runs through a model per batch: a bound on
#: the work of one call (each token is one position of a forward pass), not on memory, which is bounded by running the
#: windows in chunks that fit the memory budget.
MAX_WINDOW_TOKENS = 2**24

#: Longest input a :class:`PasskeyTask` samples (the course's models are tiny; this bounds memory).
MAX_PASSKEY_LENGTH = 2**16

#: Largest filler alphabet and number of values of a :class:`PasskeyTask`: every token id, up to
#: ``num_filler + num_values + 2`` (BOS), must fit an int64 tensor.
MAX_PASSKEY_SYMBOLS = 2**61


@dataclass(frozen=True)
class PasskeyTask:
    """Causal passkey retrieval: find the value written after ``KEY``, asked for by ``QUERY`` at the end.

    Token ids: fillers ``0 ... num_filler - 1``; values ``num_filler ... num_filler + num_values - 1``; then ``KEY``,
    ``QUERY`` and ``BOS``. ``sample(batch, seq_len)`` returns ``seq_len`` input tokens (``4 <= seq_len <= 65536``);
    only the last target (the value) is scored, so accuracy is the retrieval rate and chance is ``1 / num_values``.

    Args:
        num_filler: size of the filler alphabet (``1 ... 2**61``).
        num_values: number of possible passkey values (``2 ... 2**61``).
        distance: ``None`` (uniform on ``1 ... seq_len - 3``) or a fixed distance from the value to ``QUERY``
            (``1 <= distance <= seq_len - 3``, checked when sampling).
        distractors: draw the filler from the value symbols too (default ``False``, as in Chen et al.'s passkey
            prompt, where the digits appear only in the passkey sentence).
    """

    num_filler: int = 16
    num_values: int = 8
    distance: int | None = None
    distractors: bool = False
    causal: bool = True

    def __post_init__(self) -> None:
        # checked values are stored back, so a NumPy integer becomes a Python one
        object.__setattr__(self, "num_filler",
                           check_int("num_filler", self.num_filler, minimum=1, maximum=MAX_PASSKEY_SYMBOLS))
        object.__setattr__(self, "num_values",
                           check_int("num_values", self.num_values, minimum=2, maximum=MAX_PASSKEY_SYMBOLS))
        if self.distance is not None:
            object.__setattr__(self, "distance",
                               check_int("distance", self.distance, minimum=1, maximum=MAX_PASSKEY_LENGTH - 3))
        check_bool("distractors", self.distractors)
        if check_bool("causal", self.causal) is not True:
            raise ValueError("PasskeyTask is a causal task (the answer is read at the last position); causal=False")

    @property
    def key(self) -> int:
        return self.num_filler + self.num_values

    @property
    def query(self) -> int:
        return self.key + 1

    @property
    def bos(self) -> int:
        return self.key + 2

    @property
    def vocab_size(self) -> int:
        return self.key + 3

    @property
    def num_outputs(self) -> int:
        return self.vocab_size

    @property
    def chance(self) -> float:
        """The accuracy of guessing a value symbol uniformly, ``1 / num_values``."""
        return 1.0 / self.num_values

    def at_distance(self, distance: int) -> PasskeyTask:
        """The same task with the value placed ``distance`` tokens before ``QUERY``."""
        return dataclasses.replace(self, distance=check_positive_int("distance", distance))

    def sample(self, batch_size: int, seq_len: int, generator: torch.Generator | None = None) -> Batch:
        """``batch_size`` sequences of ``seq_len`` tokens; targets are ``IGNORE`` except the last (the value).

        ``batch_size`` is a positive integer (the batch must fit the memory budget), ``seq_len`` an integer in
        ``4 ... 65536``, ``generator`` ``None`` or a ``torch.Generator``."""
        batch_size = check_positive_int("batch_size", batch_size)
        seq_len = check_int("seq_len", seq_len, minimum=4, maximum=MAX_PASSKEY_LENGTH)
        check_generator("generator", generator)
        # int64 inputs and targets, and the random draws they are made from
        check_memory("batch_size and seq_len", 3 * 8 * numel(batch_size, seq_len) + 4 * 8 * batch_size,
                     f"a batch of {batch_size} x {seq_len} tokens")
        if self.distance is not None and self.distance > seq_len - 3:
            raise ValueError(
                f"distance {self.distance} does not fit into seq_len {seq_len}: BOS and KEY come before the value, "
                f"so distance <= seq_len - 3 = {seq_len - 3}"
            )
        high = self.num_filler + (self.num_values if self.distractors else 0)
        inputs = torch.randint(high, (batch_size, seq_len), generator=generator)
        values = torch.randint(self.num_filler, self.num_filler + self.num_values, (batch_size,), generator=generator)
        if self.distance is None:
            distance = torch.randint(1, seq_len - 2, (batch_size,), generator=generator)  # 1 ... seq_len - 3
        else:
            distance = torch.full((batch_size,), self.distance)
        value_at = seq_len - 1 - distance  # 2 ... seq_len - 2
        rows = torch.arange(batch_size)
        inputs[:, 0] = self.bos
        inputs[:, -1] = self.query
        inputs[rows, value_at] = values
        inputs[rows, value_at - 1] = self.key
        targets = torch.full((batch_size, seq_len), IGNORE)
        targets[:, -1] = values
        return Batch(inputs, targets)


def _causal_or_raise(model: nn.Module, task: object) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if isinstance(task, type):
        raise TypeError(f"task must be a task object, got the class {task.__name__}; create one, e.g. "
                        f"{task.__name__}()")
    if not callable(getattr(task, "sample", None)):
        raise TypeError(f"task must have a sample(batch_size, seq_len, generator) method, got {type(task).__name__}")
    if getattr(model, "causal", True) is not True or getattr(task, "causal", True) is not True:
        raise ValueError("sliding_window_report needs a causal model and a causal task (a window's last logit must "
                         "depend only on the tokens up to it)")


def window_forward_bytes(model: nn.Module, length: int, *, batch: int = 1) -> int:
    """An upper estimate of the bytes a forward pass of ``model`` over ``batch`` sequences of ``length`` tokens holds
    at once: 16 vectors of the model's widest dimension per token (the residual stream, queries, keys, values, the MLP,
    the logits: ``width`` is the largest size of any parameter, which covers ``d_model``, the MLP width and the
    number of outputs) and 3 attention maps of ``heads x length x length`` (scores, masked scores, weights; ``heads``
    is the largest ``num_heads`` of its modules), in the parameters' precision. For the course's
    :class:`~course_pe.model.TinyTransformer` this overestimates the measured peak (tests/test_long_context_eval.py).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    length = check_positive_int("length", length)
    batch = check_positive_int("batch", batch)
    parameters = list(model.parameters())
    width = max((max(p.shape) for p in parameters if p.dim()), default=1)
    itemsize = max((p.element_size() for p in parameters), default=4)
    heads = max((m.num_heads for m in model.modules() if isinstance(getattr(m, "num_heads", None), int)), default=1)
    return itemsize * batch * (16 * numel(length, width) + 3 * numel(heads, length, length))


@torch.no_grad()
def sliding_window_report(
    model: nn.Module,
    task: object,
    seq_len: int,
    *,
    window: int,
    sink: int = 0,
    batch_size: int = 32,
    num_batches: int = 4,
    seed: int = 12345,
) -> PositionReport:
    """Loss and accuracy at each position when every prediction sees at most ``window`` tokens (stride 1).

    Target ``t`` is predicted from the tokens ``0 ... t`` if ``t < window`` (one ordinary causal pass), otherwise from
    the first ``sink`` tokens followed by the last ``window - sink`` tokens up to ``t``, run as a sequence of its own
    (so its positions start at 0 and never reach ``window``). With ``window >= seq_len`` the result equals
    :func:`~course_pe.training.evaluate_by_position` on the same data. Data come from ``make_generator(seed)``, as
    there, so the two can be compared position by position.

    Args: ``seq_len`` (the task's length argument) and ``window`` positive integers, ``0 <= sink < window``,
    ``batch_size`` positive, ``num_batches`` in ``1 ... MAX_EVAL_BATCHES`` (2**20, as for ``evaluate_by_position``),
    ``seed >= 0``. The model must be causal and map ``(batch, seq)`` long tokens to ``(batch, seq, outputs)`` logits.
    Returns a :class:`~course_pe.training.PositionReport` over the input positions.

    Cost: ``batch_size x (n - window)`` windows of ``window`` tokens per batch (``n`` the input length), at most
    :data:`MAX_WINDOW_TOKENS` tokens. The windows run through the model in chunks sized to the memory budget, from an
    estimate of what a forward pass over one window holds (:func:`window_forward_bytes`); a single window larger
    than the budget is a ``MemoryBudgetError`` (a ``ValueError`` and a ``MemoryError``) naming ``window``.
    """
    _causal_or_raise(model, task)
    check_positive_int("seq_len", seq_len)
    window = check_positive_int("window", window)
    sink = check_int("sink", sink, minimum=0)
    if sink >= window:
        raise ValueError(f"sink ({sink}) must be smaller than window ({window}): the window must hold new tokens too")
    batch_size = check_positive_int("batch_size", batch_size)
    num_batches = check_int("num_batches", num_batches, minimum=1, maximum=MAX_EVAL_BATCHES)
    seed = check_int("seed", seed, minimum=0, maximum=2**63 - 1)
    # the input length (the task's seq_len argument need not be it) from a one-row probe, to bound the cost first
    n = task.sample(1, seq_len, make_generator(0)).inputs.shape[1]  # type: ignore[attr-defined]
    windows = max(0, n - window)  # targets window ... n - 1 need a window of their own
    needed = batch_size * max(windows, 1) * min(n, window)
    if needed > MAX_WINDOW_TOKENS:
        raise ValueError(
            f"batch_size and window: {batch_size} x {max(windows, 1)} windows of {min(n, window)} tokens = {needed} "
            f"tokens exceed MAX_WINDOW_TOKENS = {MAX_WINDOW_TOKENS}; use a smaller batch_size"
        )
    # memory: the forward passes run over chunks of rows (the prefixes) and of windows that fit a quarter of the
    # budget (at most 1 GiB); one window must fit the budget. The float64 logits of a batch are checked below.
    per_window = window_forward_bytes(model, min(n, window))
    check_memory("window", per_window, f"a forward pass over one window of {min(n, window)} tokens")
    chunk = max(1, min(batch_size * max(windows, 1), min(memory_budget() // 4, 2**30) // per_window))
    generator = make_generator(seed)
    was_training = model.training
    model.eval()
    loss_sum = correct = count = None
    try:
        for _ in range(num_batches):
            batch = task.sample(batch_size, seq_len, generator)  # type: ignore[attr-defined]
            inputs, targets = batch.inputs, batch.targets
            if inputs.shape[1] != n:
                raise ValueError(f"the task returned inputs of length {inputs.shape[1]}, then {n}, for one seq_len")
            prefix = inputs[:, : min(n, window)]  # targets 0 ... window - 1: ordinary prefixes
            logits = torch.cat([model(prefix[i : i + chunk]).double() for i in range(0, batch_size, chunk)])
            if windows:
                check_memory("batch_size and seq_len", 2 * 8 * numel(batch_size, n, logits.shape[-1]),
                             f"float64 logits of {batch_size} x {n} positions x {logits.shape[-1]} outputs")
                # windows of the tokens after the sink, ending at positions window - 1 ... n - 1; keep the last ones
                recent = inputs[:, sink:].unfold(1, window - sink, 1)[:, -windows:]  # (B, windows, window - sink)
                recent = recent.reshape(batch_size * windows, window - sink)
                head = inputs[:, :sink].repeat_interleave(windows, dim=0)  # (B * windows, sink)
                last = torch.cat([
                    model(torch.cat([head[i : i + chunk], recent[i : i + chunk]], dim=1))[:, -1].double()
                    for i in range(0, batch_size * windows, chunk)
                ])
                logits = torch.cat([logits, last.reshape(batch_size, windows, -1)], dim=1)
            valid = targets != IGNORE
            safe = targets.clamp(min=0)
            nll = F.cross_entropy(logits.transpose(1, 2), safe, reduction="none") * valid
            hit = (logits.argmax(-1) == safe) & valid
            if loss_sum is None:
                loss_sum, correct, count = nll.sum(0), hit.sum(0).double(), valid.sum(0).double()
            else:
                loss_sum, correct, count = loss_sum + nll.sum(0), correct + hit.sum(0), count + valid.sum(0)
    finally:
        model.train(was_training)
    assert loss_sum is not None and correct is not None and count is not None
    nan = torch.full_like(count, float("nan"))
    return PositionReport(
        loss=torch.where(count > 0, loss_sum / count.clamp(min=1), nan),
        accuracy=torch.where(count > 0, correct / count.clamp(min=1), nan),
    )


@torch.no_grad()
def passkey_accuracy_by_distance(
    models: nn.Module | list[nn.Module] | tuple[nn.Module, ...],
    task: PasskeyTask,
    seq_len: int,
    distances: list[int] | tuple[int, ...] | range,
    *,
    num_sequences: int = 128,
    seed: int = 12345,
    chunk: int = 1024,
) -> torch.Tensor:
    """Passkey accuracy of each model at each distance, every model on the same sequences (a dense needle sweep).

    For every distance ``d`` of ``distances`` (each in ``1 ... seq_len - 3``), ``num_sequences`` inputs of ``seq_len``
    tokens with the value ``d`` tokens before ``QUERY`` are drawn from ``make_generator(seed)``, distance after
    distance, so every model (and every call with the same arguments) is scored on identical data: paired
    comparisons. The sequences of all distances run through each model in chunks of ``chunk`` sequences (the model
    computes every position; only the last is scored).

    Returns a float64 tensor ``(len(models), len(distances))`` of accuracies (a single model gives one row). With
    ``n = num_sequences``, an accuracy of 1 at one distance still allows an error rate up to about ``3 / n`` at 95 %
    confidence (the rule of three), which is why the default is 128 rather than the 32 of a single batch.

    Args: ``task`` a :class:`PasskeyTask` (its own ``distance`` is ignored), ``seq_len`` in ``4 ...
    MAX_PASSKEY_LENGTH``, ``distances`` a non-empty sequence of distinct integers, ``num_sequences`` and ``chunk``
    positive, at most ``MAX_PASSKEY_SEQUENCES`` sequences in all, ``seed >= 0``; models map ``(batch, seq)`` long
    tokens to ``(batch, seq, outputs)`` logits and must be causal.
    """
    if isinstance(models, nn.Module):
        models = [models]
    if not isinstance(models, (list, tuple)) or not models:
        raise TypeError("models must be an nn.Module or a non-empty list or tuple of them")
    for i, model in enumerate(models):
        if not isinstance(model, nn.Module):
            raise TypeError(f"models[{i}] is a {type(model).__name__}, not an nn.Module")
        _causal_or_raise(model, task)
    if not isinstance(task, PasskeyTask):
        raise TypeError(f"task must be a PasskeyTask, got {type(task).__name__}")
    seq_len = check_int("seq_len", seq_len, minimum=4, maximum=MAX_PASSKEY_LENGTH)
    if isinstance(distances, (str, bytes)) or not isinstance(distances, (list, tuple, range)) or len(distances) == 0:
        raise TypeError("distances must be a non-empty list, tuple or range of integers")
    distances = [check_int(f"distances[{i}]", d, minimum=1, maximum=seq_len - 3) for i, d in enumerate(distances)]
    if len(set(distances)) != len(distances):
        raise ValueError("distances must be distinct (each is one column of the result)")
    num_sequences = check_positive_int("num_sequences", num_sequences)
    chunk = check_positive_int("chunk", chunk)
    seed = check_int("seed", seed, minimum=0, maximum=2**63 - 1)
    total = len(distances) * num_sequences
    if total > MAX_PASSKEY_SEQUENCES:
        raise ValueError(f"len(distances) x num_sequences = {total} sequences exceed MAX_PASSKEY_SEQUENCES = "
                         f"{MAX_PASSKEY_SEQUENCES}; use fewer distances or sequences")
    check_memory("distances and num_sequences", 3 * 8 * numel(total, seq_len),
                 f"{total} passkey sequences of {seq_len} tokens")
    for model in models:  # one chunk's forward pass must fit the budget
        check_memory("chunk", window_forward_bytes(model, seq_len, batch=min(chunk, total)),
                     f"a forward pass over {min(chunk, total)} sequences of {seq_len} tokens")
    generator = make_generator(seed)
    batches = [task.at_distance(d).sample(num_sequences, seq_len, generator) for d in distances]
    inputs = torch.cat([b.inputs for b in batches])  # (distances * n, seq_len), distance-major
    values = torch.cat([b.targets[:, -1] for b in batches])
    result = torch.empty(len(models), len(distances), dtype=torch.float64)
    for k, model in enumerate(models):
        was_training = model.training
        model.eval()
        try:
            hits = torch.cat([model(inputs[i : i + chunk])[:, -1].argmax(-1) == values[i : i + chunk]
                              for i in range(0, total, chunk)])
        finally:
            model.train(was_training)
        result[k] = hits.view(len(distances), num_sequences).double().mean(1)
    return result
