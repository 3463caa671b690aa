"""Seeded synthetic tasks for the course's experiments.

Every task draws its data from a ``torch.Generator`` passed by the caller, so data never depends
on how many random numbers the model's initialisation consumed. ``sample`` returns a
:class:`Batch` of ``inputs`` and ``targets``, both ``(batch, seq)`` long tensors; targets equal to
``IGNORE`` are not scored.

==============  =====================================================  ==========================
task            target at position ``p``                                needs position?
==============  =====================================================  ==========================
``reverse``     ``x[L - 1 - p]``                                        yes
``sort``        the ``p``-th smallest token                             yes (which rank to emit)
``histogram``   how many times ``x[p]`` occurs in the sequence          no (order-free)
``position``    ``p`` itself (a probe of what the model knows)          yes
``copy``        causal: ``BOS a SEP a``, predict the second ``a``       yes (offset lookup)
``markov``      causal next-token prediction of a Markov chain          order 2: the previous token
==============  =====================================================  ==========================
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ._validation import check_bool, check_generator, check_int, check_memory, check_positive_int, check_tensor, numel

IGNORE = -100

__all__ = [
    "IGNORE",
    "Batch",
    "CopyTask",
    "HistogramTask",
    "MarkovTask",
    "PositionTask",
    "PrefixTask",
    "ReverseTask",
    "SortTask",
]


@dataclass(frozen=True)
class Batch:
    """``inputs`` and ``targets``: ``(batch, seq)`` long tensors; ``targets == IGNORE`` is unscored.

    Integer tensors of another dtype (uint8 ... int32) are stored as int64, the dtype every model and loss expects.
    """

    inputs: torch.Tensor
    targets: torch.Tensor

    def __post_init__(self) -> None:
        check_tensor("inputs", self.inputs, "integer", dim=2)
        check_tensor("targets", self.targets, "integer", dim=2)
        object.__setattr__(self, "inputs", self.inputs.long())
        object.__setattr__(self, "targets", self.targets.long())
        if self.inputs.shape[0] != self.targets.shape[0]:
            raise ValueError(
                f"inputs and targets must have the same batch size, got {tuple(self.inputs.shape)} and "
                f"{tuple(self.targets.shape)}"
            )


def _random_tokens(batch_size: int, seq_len: int, num_symbols: int, generator: torch.Generator | None) -> torch.Tensor:
    batch_size = check_positive_int("batch_size", batch_size)
    seq_len = check_positive_int("seq_len", seq_len)
    check_generator("generator", generator)
    # inputs, targets and a copy or two while they are made
    check_memory("batch_size and seq_len", 4 * 8 * numel(batch_size, seq_len), f"a batch of {batch_size} x {seq_len} tokens")
    return torch.randint(num_symbols, (batch_size, seq_len), generator=generator)


#: Longest sequence and largest alphabet for which the tasks' ``position_free_optimum`` methods count exactly.
MAX_EXACT_LENGTH = 64

#: Largest number of contexts (``num_symbols ** order``) of a :class:`MarkovTask`.
MAX_MARKOV_STATES = 4096

#: Longest :meth:`MarkovTask.sample`: the chain is drawn one position at a time in Python (about 10 microseconds per
#: position), so this bound keeps one call under a minute; the course's experiments use at most a few hundred.
MAX_MARKOV_LENGTH = 2**20


#: Largest alphabet of a task: every token id, the task's own tokens (BOS, SEP, ...) included, must fit int64.
MAX_SYMBOLS = 2**61


def _check_task_fields(task: object) -> None:
    """Check the common fields and store them as plain Python values (a NumPy integer becomes an ``int``)."""
    symbols = check_int("num_symbols", task.num_symbols, minimum=1, maximum=MAX_SYMBOLS)  # type: ignore[attr-defined]
    object.__setattr__(task, "num_symbols", symbols)
    object.__setattr__(task, "causal", check_bool("causal", task.causal))  # type: ignore[attr-defined]


@dataclass(frozen=True)
class ReverseTask:
    """Encoder task: output the input sequence reversed."""

    num_symbols: int = 16
    causal: bool = False

    def __post_init__(self) -> None:
        _check_task_fields(self)

    @property
    def vocab_size(self) -> int:
        return self.num_symbols

    @property
    def num_outputs(self) -> int:
        return self.num_symbols

    def sample(self, batch_size: int, seq_len: int, generator: torch.Generator | None = None) -> Batch:
        """``batch_size`` and ``seq_len`` positive integers; ``generator`` None or a ``torch.Generator``."""
        x = _random_tokens(batch_size, seq_len, self.num_symbols, generator)
        return Batch(x, x.flip(1))

    def position_free_optimum(self, seq_len: int) -> tuple[float, float]:
        """The best mean accuracy and cross-entropy (nats) that any position-free model can reach, exactly.

        A model without position information (a bidirectional encoder with no encoding) is permutation-equivariant:
        its output at a position is a function of that position's token ``a`` and of the multiset of all ``L``
        tokens, the same function at every position. Given those, the Bayes-optimal prediction of the target is:

        - ``L`` even: no position is its own mirror image, so the target is a uniform draw from the other ``L - 1``
          tokens (independent of ``a``): predict their empirical distribution (the multiset without one ``a``);
        - ``L`` odd: the model cannot tell the middle position (whose target is ``a`` itself, probability ``1/L``)
          from the others, and the mixture is exactly the empirical distribution of all ``L`` tokens.

        So with ``m = L - 1`` (even) or ``m = L`` (odd) uniform draws from ``num_symbols`` symbols, the accuracy is
        ``E[largest count] / m`` and the loss ``E[entropy of the empirical distribution]``. Both are computed exactly
        (the law of the largest count by counting sequences with integers, the entropy from the binomial law of one
        symbol's count), the same at every position, so they equal the means over positions that
        :class:`~course_pe.training.PositionReport` reports. The count takes about ``num_symbols * seq_len**3 / 2``
        integer operations, so ``seq_len`` is a positive integer up to 64 and ``num_symbols`` at most 64 (a
        ``ValueError`` otherwise). Returns ``(accuracy, loss)``.
        """
        seq_len = check_int("seq_len", seq_len, minimum=1, maximum=MAX_EXACT_LENGTH)
        return _multiset_guess_optimum(seq_len - 1 if seq_len % 2 == 0 else seq_len, self.num_symbols)


def _multiset_guess_optimum(m: int, num_symbols: int) -> tuple[float, float]:
    """Accuracy and loss of predicting a uniform draw from ``m`` uniform draws over ``num_symbols`` symbols.

    The Bayes-optimal prediction is the empirical distribution of the ``m`` draws: the accuracy is
    ``E[largest count] / m`` and the loss ``E[entropy of the empirical distribution]``, both computed exactly (the law
    of the largest count by counting sequences with integers, the entropy from the binomial law of one symbol's count).
    """
    import math

    v = num_symbols
    if v > MAX_EXACT_LENGTH:
        raise ValueError(f"position_free_optimum counts exactly up to num_symbols={MAX_EXACT_LENGTH}, this task has {v}")
    if m == 1 or v == 1:
        return 1.0, 0.0

    comb = [[math.comb(j, c) for c in range(j + 1)] for j in range(m + 1)]

    def at_most(k: int) -> int:
        # sequences of m draws from v symbols in which every symbol occurs at most k times
        ways = [1] + [0] * m  # ways[j]: assignments of j labelled draws to the symbols seen so far
        for _ in range(v):
            ways = [sum(comb[j][c] * ways[j - c] for c in range(min(j, k) + 1)) for j in range(m + 1)]
        return ways[m]

    total = v**m
    expected_max = sum(total - at_most(k) for k in range(m)) / total  # E[max] = sum_k P(max > k)
    # E[entropy] = v * E[-(c/m) log(c/m)] for one symbol's count c ~ Binomial(m, 1/v)
    expected_entropy = v * sum(
        math.comb(m, c) * (v - 1) ** (m - c) / total * (-(c / m) * math.log(c / m)) for c in range(1, m + 1)
    )
    return expected_max / m, expected_entropy


@dataclass(frozen=True)
class SortTask:
    """Encoder task: output the input tokens in ascending order."""

    num_symbols: int = 16
    causal: bool = False

    def __post_init__(self) -> None:
        _check_task_fields(self)

    @property
    def vocab_size(self) -> int:
        return self.num_symbols

    @property
    def num_outputs(self) -> int:
        return self.num_symbols

    def sample(self, batch_size: int, seq_len: int, generator: torch.Generator | None = None) -> Batch:
        """``batch_size`` and ``seq_len`` positive integers; ``generator`` None or a ``torch.Generator``."""
        x = _random_tokens(batch_size, seq_len, self.num_symbols, generator)
        return Batch(x, x.sort(dim=1).values)

    def position_free_optimum(self, seq_len: int) -> tuple[float, float]:
        """The best mean accuracy and cross-entropy (nats) that any position-free model can reach, exactly.

        A position-free model's output at a position is a function of that position's token and of the multiset of
        all ``L`` tokens (see :meth:`ReverseTask.position_free_optimum`). Given both, the position is equally likely
        to be any of the ``L`` positions (the tokens are exchangeable), and the target at a uniform position of the
        sorted sequence is a uniform draw from the multiset, whatever the token. So the best prediction is the
        empirical distribution of all ``L`` tokens: accuracy ``E[largest count] / L``, loss the expected entropy of
        that distribution, computed exactly. ``seq_len`` is a positive integer up to 64, ``num_symbols`` at most 64.
        Returns ``(accuracy, loss)``.
        """
        seq_len = check_int("seq_len", seq_len, minimum=1, maximum=MAX_EXACT_LENGTH)
        return _multiset_guess_optimum(seq_len, self.num_symbols)


@dataclass(frozen=True)
class HistogramTask:
    """Encoder task: at each position, the number of occurrences of that position's token.

    The answer does not depend on order, so a model with no position information can solve it.
    ``max_count`` caps the output classes (counts above it are clipped to it).
    """

    num_symbols: int = 16
    max_count: int = 32
    causal: bool = False

    def __post_init__(self) -> None:
        _check_task_fields(self)
        object.__setattr__(self, "max_count", check_positive_int("max_count", self.max_count))

    @property
    def vocab_size(self) -> int:
        return self.num_symbols

    @property
    def num_outputs(self) -> int:
        return self.max_count + 1

    def sample(self, batch_size: int, seq_len: int, generator: torch.Generator | None = None) -> Batch:
        """``batch_size`` and ``seq_len`` positive integers; ``generator`` None or a ``torch.Generator``."""
        check_positive_int("batch_size", batch_size)
        check_positive_int("seq_len", seq_len)
        check_memory("batch_size and seq_len", numel(batch_size, seq_len, seq_len),
                     f"a {batch_size} x {seq_len} x {seq_len} comparison")
        x = _random_tokens(batch_size, seq_len, self.num_symbols, generator)
        counts = (x[:, :, None] == x[:, None, :]).sum(-1).clamp(max=self.max_count)
        return Batch(x, counts)


@dataclass(frozen=True)
class PositionTask:
    """Probe task: the target at position ``p`` is ``p`` (classes ``0 ... max_len - 1``)."""

    num_symbols: int = 16
    max_len: int = 64
    causal: bool = False

    def __post_init__(self) -> None:
        _check_task_fields(self)
        object.__setattr__(self, "max_len", check_positive_int("max_len", self.max_len))

    @property
    def vocab_size(self) -> int:
        return self.num_symbols

    @property
    def num_outputs(self) -> int:
        return self.max_len

    def sample(self, batch_size: int, seq_len: int, generator: torch.Generator | None = None) -> Batch:
        """``batch_size`` positive, ``seq_len`` in ``1 ... max_len``; ``generator`` None or a ``torch.Generator``."""
        seq_len = check_positive_int("seq_len", seq_len)
        if seq_len > self.max_len:
            raise ValueError(f"seq_len {seq_len} exceeds max_len {self.max_len}")
        x = _random_tokens(batch_size, seq_len, self.num_symbols, generator)
        return Batch(x, torch.arange(seq_len).expand(batch_size, seq_len).clone())


@dataclass(frozen=True)
class CopyTask:
    """Causal task: the sequence ``BOS a_1..a_n SEP a_1..a_n``; only the second copy is scored.

    ``seq_len`` passed to ``sample`` is ``n``, the length of the copied string; the model sees
    ``2n + 1`` tokens (the last token is only a target). Token ids: symbols ``0 ... num_symbols - 1``,
    then ``BOS``, then ``SEP``.
    """

    num_symbols: int = 16
    causal: bool = True

    def __post_init__(self) -> None:
        _check_task_fields(self)

    @property
    def bos(self) -> int:
        return self.num_symbols

    @property
    def sep(self) -> int:
        return self.num_symbols + 1

    @property
    def vocab_size(self) -> int:
        return self.num_symbols + 2

    @property
    def num_outputs(self) -> int:
        return self.vocab_size

    def sample(self, batch_size: int, seq_len: int, generator: torch.Generator | None = None) -> Batch:
        """``batch_size`` and ``seq_len`` (the copied length ``n``) positive integers."""
        a = _random_tokens(batch_size, seq_len, self.num_symbols, generator)
        bos = torch.full((batch_size, 1), self.bos)
        sep = torch.full((batch_size, 1), self.sep)
        full = torch.cat([bos, a, sep, a], dim=1)  # (batch, 2n + 2)
        inputs, targets = full[:, :-1], full[:, 1:].clone()
        targets[:, : seq_len + 1] = IGNORE  # score only predictions of the second copy
        return Batch(inputs, targets)


@dataclass(frozen=True)
class MarkovTask:
    """Causal language modelling of a random sparse Markov chain with a known entropy rate.

    The next token depends on the previous ``order`` tokens (1 or 2) through a fixed transition table
    whose rows each allow ``branching`` next tokens with probabilities drawn uniformly from the simplex
    (Dirichlet(1, ..., 1)).
    Sequences start in the stationary distribution, so every position has the same conditional
    entropy once ``order`` tokens of context exist: the **entropy rate** ``H`` (nats/token), the lowest
    loss any model can reach there. With ``bos=True`` every sequence starts with a ``BOS`` token
    (id ``vocab_size - 1``) that is never a target.

    An order-2 chain forces the model to find the *previous* token, which takes position
    information (or a causal mask plus a BOS anchor).
    """

    num_symbols: int = 16
    order: int = 2
    branching: int = 3
    seed: int = 0
    bos: bool = True
    causal: bool = True
    transition: torch.Tensor = field(init=False, repr=False, compare=False)
    stationary: torch.Tensor = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_task_fields(self)
        object.__setattr__(self, "order", check_int("order", self.order))
        if self.order not in (1, 2):
            raise ValueError(f"order must be 1 or 2, got {self.order}")
        object.__setattr__(self, "branching", check_int("branching", self.branching))
        if not 1 <= self.branching <= self.num_symbols:
            raise ValueError(f"branching must be in 1 ... num_symbols, got {self.branching}")
        # a NumPy integer seed becomes an int (torch.Generator.manual_seed refused np.int64: "an integer is required")
        object.__setattr__(self, "seed", check_int("seed", self.seed, minimum=0, maximum=2**63 - 1))
        object.__setattr__(self, "bos", check_bool("bos", self.bos))
        if self.num_symbols**self.order > MAX_MARKOV_STATES:
            raise ValueError(
                f"num_symbols**order = {self.num_symbols}**{self.order} contexts exceed {MAX_MARKOV_STATES} "
                "(the stationary distribution is computed on a dense contexts x contexts matrix)"
            )
        g = torch.Generator().manual_seed(self.seed)
        states = self.num_symbols**self.order
        table = torch.zeros(states, self.num_symbols, dtype=torch.float64)
        for s in range(states):
            support = torch.randperm(self.num_symbols, generator=g)[: self.branching]
            # Dirichlet(1) = normalised Exponential(1) draws, i.e. -log(uniform)
            weights = -torch.log1p(-torch.rand(self.branching, generator=g, dtype=torch.float64))
            table[s, support] = weights / weights.sum()
        object.__setattr__(self, "transition", table)
        object.__setattr__(self, "stationary", self._stationary(table))

    def _state_matrix(self, table: torch.Tensor) -> torch.Tensor:
        """Transition matrix over states (contexts): ``(V**order, V**order)``."""
        v = self.num_symbols
        if self.order == 1:
            return table
        states = v * v
        m = torch.zeros(states, states, dtype=torch.float64)
        for s in range(states):
            b = s % v  # state (a, b) -> (b, c)
            m[s, b * v : (b + 1) * v] = table[s]
        return m

    def _stationary(self, table: torch.Tensor) -> torch.Tensor:
        m = self._state_matrix(table)
        pi = torch.full((m.shape[0],), 1.0 / m.shape[0], dtype=torch.float64)
        for _ in range(5000):  # power iteration with lazy steps (aperiodicity)
            new = 0.5 * pi + 0.5 * (pi @ m)
            if (new - pi).abs().max() < 1e-15:
                pi = new
                break
            pi = new
        return pi / pi.sum()

    @property
    def vocab_size(self) -> int:
        return self.num_symbols + (1 if self.bos else 0)

    @property
    def num_outputs(self) -> int:
        return self.num_symbols

    @property
    def entropy_rate(self) -> float:
        """``H = sum_s pi(s) H(P(. | s))`` in nats per token."""
        p = self.transition
        row_entropy = -(torch.where(p > 0, p * p.log(), torch.zeros_like(p))).sum(-1)
        return float((self.stationary * row_entropy).sum())

    def sample(self, batch_size: int, seq_len: int, generator: torch.Generator | None = None) -> Batch:
        """``seq_len`` symbols per sequence (plus BOS if enabled); next-token targets.

        ``batch_size`` is a positive integer, ``seq_len`` an integer in ``1 ... MAX_MARKOV_LENGTH`` (``seq_len = 1``
        works for order 2 too; the chain is sampled one position at a time, about 10 microseconds each).
        """
        batch_size = check_positive_int("batch_size", batch_size)
        seq_len = check_int("seq_len", seq_len, minimum=1, maximum=MAX_MARKOV_LENGTH)
        check_generator("generator", generator)
        # one (batch,) tensor per position (with its Python object), then the stacked sequence and its slices
        check_memory("batch_size and seq_len", numel(seq_len + 2, 5 * 8 * batch_size + 200),
                     f"{seq_len} positions of {batch_size} sequences")
        v = self.num_symbols
        state = torch.multinomial(self.stationary, batch_size, replacement=True, generator=generator)
        if self.order == 1:
            first = [state]
        else:
            first = [state // v, state % v]
        tokens = list(first)  # an order-2 context needs both first tokens, even when seq_len is 1
        while len(tokens) < seq_len + 1:
            context = tokens[-1] if self.order == 1 else tokens[-2] * v + tokens[-1]
            tokens.append(torch.multinomial(self.transition[context], 1, generator=generator).squeeze(1))
        seq = torch.stack(tokens[: seq_len + 1], dim=1)  # (batch, seq_len + 1)
        if self.bos:
            bos = torch.full((batch_size, 1), v)
            inputs = torch.cat([bos, seq[:, :seq_len]], dim=1)  # BOS x_0 ... x_{L-1}
            targets = seq[:, : seq_len + 1]  # x_0 ... x_L
            return Batch(inputs, targets)
        return Batch(seq[:, :seq_len], seq[:, 1 : seq_len + 1])

    def loss_floor_by_position(self, seq_len: int) -> torch.Tensor:
        """The best achievable loss at each target position (length ``seq_len + 1`` with BOS); ``seq_len`` an integer
        in ``1 ... MAX_MARKOV_LENGTH``, as for :meth:`sample`."""
        seq_len = check_int("seq_len", seq_len, minimum=1, maximum=MAX_MARKOV_LENGTH)
        v = self.num_symbols
        h = self.entropy_rate
        pi = self.stationary
        if self.order == 1:
            marginal = pi
        else:
            marginal = pi.view(v, v).sum(1)
        h0 = float(-(marginal[marginal > 0] * marginal[marginal > 0].log()).sum())
        if self.order == 2:
            pair = pi.view(v, v)
            h_pair = float(-(pair[pair > 0] * pair[pair > 0].log()).sum())
            h1 = h_pair - h0  # H(x1 | x0)
            floors = [h0, h1]
        else:
            floors = [h0]
        n = seq_len + 1 if self.bos else seq_len
        if not self.bos:
            floors = floors[1:]
        floors = (floors + [h] * n)[:n]
        return torch.tensor(floors, dtype=torch.float64)



@dataclass(frozen=True)
class PrefixTask:
    """The first positions of another task's longer sequences: paired evaluation at two lengths.

    ``PrefixTask(task, full_len).sample(batch, seq_len, g)`` draws ``task.sample(batch, full_len, g)`` and keeps the
    first ``n - (full_len - seq_len)`` input and target positions, where ``n`` is the length of the full inputs
    (tasks whose input length is ``seq_len`` plus a constant, such as a start token, which covers every causal task
    of this module). A short model evaluated on ``PrefixTask(task, 4 * L)`` at length ``L`` therefore sees exactly
    the first positions of the sequences that a long model evaluated on ``task`` at ``4 * L`` sees, from the same
    ``seed``: in a causal model the two are comparable position by position, with no sampling difference between
    them (``task.sample`` at two lengths draws different sequences after the first batch, because each batch
    consumes a different amount of the generator).

    ``task`` is any task object with ``sample``, ``vocab_size``, ``num_outputs`` (and ``causal``); ``full_len`` a
    positive integer, only stored here; ``sample`` refuses ``seq_len > full_len``, and refuses (a ``ValueError``
    naming ``full_len``) a draw whose full-length inputs and targets alone, ``2 * batch_size * full_len`` int64
    values, exceed the memory budget (:func:`course_pe._validation.memory_budget`), before drawing anything; the
    task's own ``sample`` then checks its own limits.
    """

    task: object
    full_len: int

    def __post_init__(self) -> None:
        if isinstance(self.task, type) or not callable(getattr(self.task, "sample", None)):
            raise TypeError(f"task must be a task object with a sample method, got {self.task!r}")
        object.__setattr__(self, "full_len", check_positive_int("full_len", self.full_len))

    @property
    def vocab_size(self) -> int:
        return self.task.vocab_size  # type: ignore[attr-defined]

    @property
    def num_outputs(self) -> int:
        return self.task.num_outputs  # type: ignore[attr-defined]

    @property
    def causal(self) -> bool:
        return bool(getattr(self.task, "causal", True))

    def sample(self, batch_size: int, seq_len: int, generator: torch.Generator | None = None) -> Batch:
        """The first positions of ``batch_size`` sequences drawn at ``full_len`` (see the class)."""
        batch_size = check_positive_int("batch_size", batch_size)
        seq_len = check_positive_int("seq_len", seq_len)
        if seq_len > self.full_len:
            raise ValueError(f"seq_len ({seq_len}) exceeds the full length ({self.full_len}) the prefixes are cut from")
        # the full-length draw is made before it is cut: its inputs and targets (int64) at least must fit
        check_memory("batch_size and full_len", 2 * 8 * numel(batch_size, self.full_len),
                     f"drawing {batch_size} sequences of full_len {self.full_len} to cut prefixes of {seq_len}")
        full = self.task.sample(batch_size, self.full_len, generator)  # type: ignore[attr-defined]
        keep = full.inputs.shape[1] - (self.full_len - seq_len)
        if keep < 1:
            raise ValueError(f"the task's inputs ({full.inputs.shape[1]} positions at full_len {self.full_len}) are "
                             f"too short to cut a prefix for seq_len {seq_len}")
        return Batch(full.inputs[:, :keep], full.targets[:, :keep])
