import pytest
import torch
from torch import nn

import course_pe as cpe
from course_pe.long_context_eval import MAX_WINDOW_TOKENS, PasskeyTask, sliding_window_report
from course_pe.tasks import IGNORE


# ---------------------------------------------------------------------------------------------------- PasskeyTask


def test_passkey_layout():
    task = PasskeyTask(num_filler=5, num_values=3)
    batch = task.sample(200, 12, cpe.make_generator(0))
    x, t = batch.inputs, batch.targets
    assert x.shape == t.shape == (200, 12)
    assert (x[:, 0] == task.bos).all() and (x[:, -1] == task.query).all()
    assert ((x == task.key).sum(1) == 1).all()  # exactly one KEY per sequence
    key_at = (x == task.key).int().argmax(1)
    value = x[torch.arange(200), key_at + 1]
    assert ((value >= 5) & (value < 8)).all()  # the token after KEY is a value symbol
    assert torch.equal(t[:, -1], value)  # and it is the answer
    assert (t[:, :-1] == IGNORE).all()
    filler = x.clone()
    filler[torch.arange(200), key_at + 1] = -1
    body = filler[:, 1:-1]
    assert ((body < 5) | (body == task.key) | (body == -1)).all()  # no value symbol in the filler
    distance = 11 - (key_at + 1)
    assert int(distance.min()) == 1 and int(distance.max()) == 9  # uniform on 1 ... seq_len - 3


def test_passkey_fixed_distance_and_distractors():
    task = PasskeyTask(num_filler=4, num_values=6, distractors=True).at_distance(7)
    batch = task.sample(300, 20, cpe.make_generator(1))
    x = batch.inputs
    assert (x[:, 20 - 1 - 7] == batch.targets[:, -1]).all() and (x[:, 20 - 2 - 7] == task.key).all()
    body = torch.cat([x[:, 1 : 20 - 2 - 7], x[:, 20 - 7 : -1]], dim=1)
    assert bool((body >= 4).any())  # distractors: value symbols occur in the filler
    assert task.vocab_size == task.num_outputs == 4 + 6 + 3 and task.chance == pytest.approx(1 / 6)


def test_passkey_seeded():
    task = PasskeyTask()
    a, b = task.sample(4, 16, cpe.make_generator(3)), task.sample(4, 16, cpe.make_generator(3))
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)


@pytest.mark.parametrize(
    "kwargs, sample, error",
    [
        (dict(num_values=1), None, ValueError),
        (dict(num_filler=0), None, ValueError),
        (dict(distance=0), None, ValueError),
        (dict(distractors=1), None, TypeError),
        (dict(causal=False), None, ValueError),
        (dict(distance=10), (2, 12), ValueError),  # 10 > 12 - 3
        (dict(), (2, 3), ValueError),  # too short for BOS, KEY, value and QUERY
        (dict(), (2, 2**40), ValueError),  # bounded length
        (dict(), (0, 8), ValueError),
    ],
)
def test_passkey_bad_input(kwargs, sample, error):
    with pytest.raises(error):
        task = PasskeyTask(**kwargs)
        if sample is not None:
            task.sample(*sample, cpe.make_generator(0))


def test_passkey_is_learnable_and_solved_by_content():
    """A hand-built one-layer model that attends from QUERY to the value symbol answers every passkey."""
    task = PasskeyTask(num_filler=6, num_values=4)
    batch = task.sample(64, 30, cpe.make_generator(2))
    is_value = (batch.inputs >= 6) & (batch.inputs < 10)
    answer = (batch.inputs * is_value).sum(1)  # the one value symbol of each row
    assert torch.equal(answer, batch.targets[:, -1])


# --------------------------------------------------------------------------------------------- sliding windows


class FirstTokenModel(nn.Module):
    """Causal toy: at every position, predict the first token of the sequence it is given (one-hot logits)."""

    causal = True

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.vocab = vocab

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        first = tokens[:, :1].expand_as(tokens)
        return torch.nn.functional.one_hot(first, self.vocab).double() * 50.0


class CopyFirstTask:
    """Targets: the first token of the sequence, at every position (so only an unwindowed model can answer)."""

    causal = True

    def sample(self, batch_size, seq_len, generator=None):
        x = torch.randint(0, 7, (batch_size, seq_len), generator=generator)
        return cpe.Batch(x, x[:, :1].expand(-1, seq_len).clone())


def test_sliding_window_restricts_context():
    model, task = FirstTokenModel(7), CopyFirstTask()
    full = sliding_window_report(model, task, 20, window=20, batch_size=16, num_batches=2)
    assert torch.allclose(full.accuracy, torch.ones(20, dtype=torch.float64))
    cut = sliding_window_report(model, task, 20, window=5, batch_size=64, num_batches=2)
    assert torch.allclose(cut.accuracy[:5], torch.ones(5, dtype=torch.float64))  # inside the first window
    assert float(cut.accuracy[5:].mean()) < 0.3  # beyond it the first token is out of sight (chance 1/7)
    kept = sliding_window_report(model, task, 20, window=5, sink=1, batch_size=16, num_batches=2)
    assert torch.allclose(kept.accuracy, torch.ones(20, dtype=torch.float64))  # the sink keeps it in every window


class LastTokenCounter(nn.Module):
    """Causal toy whose logit at position p is its own position p (it reveals how long each window is)."""

    causal = True

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        b, n = tokens.shape
        positions = torch.arange(n, dtype=torch.float64).expand(b, n)
        return torch.stack([positions, torch.zeros_like(positions)], dim=-1)


def test_sliding_window_positions_never_reach_the_window():
    class ZeroTask:
        causal = True

        def sample(self, batch_size, seq_len, generator=None):
            x = torch.zeros(batch_size, seq_len, dtype=torch.long)
            return cpe.Batch(x, torch.zeros_like(x))

    report = sliding_window_report(LastTokenCounter(), ZeroTask(), 12, window=4, batch_size=2, num_batches=1)
    # the loss at position t is softplus(-(position the model saw)): window positions stop at 3
    expected = torch.nn.functional.softplus(-torch.tensor([0, 1, 2, 3] + [3] * 8, dtype=torch.float64))
    assert torch.allclose(report.loss, expected)


def test_sliding_window_equals_plain_evaluation_for_a_long_window():
    markov = cpe.MarkovTask(num_symbols=6, order=2, branching=2, seed=0, bos=True)
    torch.manual_seed(0)
    model = cpe.TinyTransformer(markov.vocab_size, num_outputs=markov.num_outputs, d_model=16, num_heads=2,
                                position="rope", causal=True)
    plain = cpe.evaluate_by_position(model, markov, 15, batch_size=8, num_batches=2, seed=5)
    windowed = sliding_window_report(model, markov, 15, window=16, batch_size=8, num_batches=2, seed=5)
    assert torch.allclose(plain.loss, windowed.loss, atol=1e-10)
    short = sliding_window_report(model, markov, 15, window=6, batch_size=8, num_batches=2, seed=5)
    assert torch.allclose(plain.loss[:6], short.loss[:6], atol=1e-10)
    assert not torch.allclose(plain.loss[6:], short.loss[6:], atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, error",
    [
        (dict(window=0), ValueError),
        (dict(window=4, sink=4), ValueError),
        (dict(window=4, sink=-1), ValueError),
        (dict(window=4, batch_size=0), ValueError),
        (dict(window=4, seed=-1), ValueError),
        (dict(window=2, batch_size=MAX_WINDOW_TOKENS), ValueError),  # too many window tokens at once
        (dict(window=4, num_batches=2**20 + 1), ValueError),  # as evaluate_by_position's MAX_EVAL_BATCHES
    ],
)
def test_sliding_window_bad_input(kwargs, error):
    with pytest.raises(error):
        sliding_window_report(FirstTokenModel(7), CopyFirstTask(), 20, **kwargs)


def test_sliding_window_needs_causal():
    class Bidirectional(FirstTokenModel):
        causal = False

    with pytest.raises(ValueError, match="causal"):
        sliding_window_report(Bidirectional(7), CopyFirstTask(), 10, window=4)
    with pytest.raises(TypeError):
        sliding_window_report("model", CopyFirstTask(), 10, window=4)


# --------------------------------------------------------------------------------------------- red team 2: cost


@pytest.mark.parametrize("num_batches", [10**12, 2**63, 2**53 + 1])
def test_sliding_window_num_batches_is_bounded(num_batches):
    """num_batches had no upper bound: 10**12 batches ran until killed."""
    with pytest.raises(ValueError, match=r"^num_batches must be <= 1048576"):
        sliding_window_report(FirstTokenModel(7), CopyFirstTask(), 20, window=4, num_batches=num_batches)


def test_a_task_class_is_refused():
    with pytest.raises(TypeError, match=r"^task must be a task object, got the class PasskeyTask"):
        sliding_window_report(FirstTokenModel(7), PasskeyTask, 20, window=4)


def test_window_forward_bytes_overestimates_the_measured_peak():
    """The estimate the windows are chunked by is an upper bound of what a forward pass holds (profiler memory
    events, as the benchmark measures them), for the course's model at a few sizes."""
    from course_pe.benchmark import measure_allocation
    from course_pe.long_context_eval import window_forward_bytes

    for d_model, heads, layers, length, batch in ((16, 2, 1, 64, 4), (64, 4, 2, 256, 2), (32, 1, 2, 512, 1)):
        torch.manual_seed(0)
        model = cpe.TinyTransformer(20, d_model=d_model, num_heads=heads, num_layers=layers, position="rope",
                                    causal=True).eval()
        tokens = torch.randint(20, (batch, length))
        with torch.no_grad():
            _, peak = measure_allocation(lambda: model(tokens))
        estimate = window_forward_bytes(model, length, batch=batch)
        assert peak <= estimate, (d_model, length, peak, estimate)
        assert estimate <= 40 * peak  # an upper bound, not an absurd one


def test_sliding_window_memory_is_bounded_by_the_budget(monkeypatch):
    """The red team's 4 GiB allocation: windows x window tokens passed MAX_WINDOW_TOKENS, then the forward pass over
    all windows at once failed in the allocator. Now one window larger than the budget is refused by name, and the
    windows run in chunks that fit; the chunked result equals the one-pass result."""
    from course_pe._validation import MemoryBudgetError

    torch.manual_seed(0)
    model = cpe.TinyTransformer(PasskeyTask(4, 3).vocab_size, d_model=64, num_heads=4, num_layers=1, position="rope",
                                causal=True)
    monkeypatch.setenv("COURSE_PE_MAX_BYTES", str(256 * 2**20))
    with pytest.raises(MemoryBudgetError, match=r"^window: a forward pass over one window of 4096 tokens would need"):
        sliding_window_report(model, PasskeyTask(4, 3), 8192, window=4096, batch_size=1)
    monkeypatch.delenv("COURSE_PE_MAX_BYTES")
    markov = cpe.MarkovTask(num_symbols=6, order=2, branching=2, seed=0, bos=True)
    small = cpe.TinyTransformer(markov.vocab_size, num_outputs=markov.num_outputs, d_model=16, num_heads=2,
                                position="rope", causal=True)
    whole = sliding_window_report(small, markov, 40, window=8, sink=1, batch_size=4, num_batches=2)
    from course_pe.long_context_eval import window_forward_bytes

    monkeypatch.setenv("COURSE_PE_MAX_BYTES", str(4 * 5 * window_forward_bytes(small, 8) + 1))  # chunks of 5 windows
    chunked = sliding_window_report(small, markov, 40, window=8, sink=1, batch_size=4, num_batches=2)
    torch.testing.assert_close(chunked.loss, whole.loss, rtol=1e-12, atol=1e-12)
    assert torch.equal(chunked.accuracy, whole.accuracy)


def test_passkey_sizes_are_bounded():
    """PasskeyTask.sample(10**9, 8) failed in the allocator (64 GB) and sample(2**63, 8) with a torch TypeError;
    num_values=2**63 was accepted and failed when sampling ("Overflow when unpacking long long")."""
    from course_pe._validation import MemoryBudgetError
    from course_pe.long_context_eval import MAX_PASSKEY_SYMBOLS

    for batch in (10**9, 10**12, 2**63):
        with pytest.raises(MemoryBudgetError, match=r"^batch_size and seq_len: a batch of \d+ x 8 tokens would need"):
            PasskeyTask(4, 3).sample(batch, 8)
    assert MAX_PASSKEY_SYMBOLS == 2**61
    task = PasskeyTask(2**61, 2**61)
    assert task.bos == 2**62 + 2 and int(task.sample(2, 6, cpe.make_generator(0)).inputs.max()) == task.bos
    for kwargs, name in ((dict(num_values=2**63), "num_values"), (dict(num_filler=2**62), "num_filler"),
                         (dict(distance=2**40), "distance")):
        with pytest.raises(ValueError, match=f"^{name} must be <="):
            PasskeyTask(**kwargs)
    assert type(PasskeyTask(num_filler=__import__("numpy").int64(5)).num_filler) is int


# ------------------------------------------------------------------------------------ passkey_accuracy_by_distance


class _PasskeyOracle(nn.Module):
    """Answers with the token after KEY if KEY is among the last ``window`` tokens, else with the first value."""

    causal = True

    def __init__(self, task, window=None):
        super().__init__()
        self.task, self.window = task, window

    def forward(self, x):
        logits = torch.zeros(*x.shape, self.task.vocab_size)
        seen = x if self.window is None else x[:, -self.window:]
        key_at = (seen == self.task.key).int().argmax(1)
        found = (seen == self.task.key).any(1) & (key_at + 1 < seen.shape[1])
        value = torch.where(found, seen[torch.arange(len(x)), (key_at + 1).clamp(max=seen.shape[1] - 1)],
                            torch.full_like(key_at, self.task.num_filler))
        logits[torch.arange(len(x)), -1, value] = 1.0
        return logits


def test_passkey_accuracy_by_distance_oracles():
    from course_pe.long_context_eval import passkey_accuracy_by_distance

    task = PasskeyTask(num_filler=6, num_values=4)
    distances = [1, 2, 5, 9, 10, 17]
    result = passkey_accuracy_by_distance([_PasskeyOracle(task), _PasskeyOracle(task, window=11)], task, 20, distances,
                                          num_sequences=200, chunk=64)
    assert result.shape == (2, len(distances)) and result.dtype == torch.float64
    assert (result[0] == 1).all()  # sees everything: every value retrieved
    assert (result[1, :4] == 1).all()  # the value (distance <= 9) and KEY are inside the last 11 tokens
    assert (result[1, 4:] < 0.45).all()  # beyond the window: it answers the first value, right 1 time in 4
    single = passkey_accuracy_by_distance(_PasskeyOracle(task, window=11), task, 20, distances, num_sequences=200)
    assert torch.equal(single[0], result[1])  # the same data for every model and every chunk size


def test_passkey_accuracy_by_distance_matches_fixed_distance_evaluation():
    from course_pe.long_context_eval import passkey_accuracy_by_distance

    task = PasskeyTask(num_filler=16, num_values=8)
    torch.manual_seed(0)
    model = cpe.TinyTransformer(task.vocab_size, num_outputs=task.num_outputs, d_model=16, num_heads=1,
                                position="rope", causal=True, max_positions=24)
    result = passkey_accuracy_by_distance(model, task, 24, [3, 11], num_sequences=50, seed=5)
    g = cpe.make_generator(5)
    for column, distance in enumerate([3, 11]):
        batch = task.at_distance(distance).sample(50, 24, g)
        with torch.no_grad():
            hits = model(batch.inputs)[:, -1].argmax(-1) == batch.targets[:, -1]
        assert result[0, column] == pytest.approx(hits.double().mean().item(), abs=1e-12)


@pytest.mark.parametrize("kwargs, error", [
    (dict(distances=[]), TypeError),
    (dict(distances=[0]), ValueError),
    (dict(distances=[18]), ValueError),
    (dict(distances=[2, 2]), ValueError),
    (dict(distances=[2], num_sequences=0), ValueError),
    (dict(distances=[2], chunk=0), ValueError),
    (dict(distances=[2], seed=-1), ValueError),
])
def test_passkey_accuracy_by_distance_bad_input(kwargs, error):
    from course_pe.long_context_eval import passkey_accuracy_by_distance

    task = PasskeyTask(num_filler=6, num_values=4)
    with pytest.raises(error):
        passkey_accuracy_by_distance(_PasskeyOracle(task), task, 20, **kwargs)
    with pytest.raises(TypeError, match="PasskeyTask"):
        passkey_accuracy_by_distance(_PasskeyOracle(task), cpe.MarkovTask(), 20, [2])
    with pytest.raises(TypeError, match="models"):
        passkey_accuracy_by_distance([], task, 20, [2])
