import math

import pytest
import torch

from course_pe import IGNORE, CopyTask, HistogramTask, MarkovTask, PositionTask, ReverseTask, SortTask, make_generator


def test_reverse_sort_histogram_position():
    g = make_generator(0)
    b = ReverseTask(8).sample(4, 6, g)
    assert torch.equal(b.targets, b.inputs.flip(1))
    b = SortTask(8).sample(4, 6, g)
    assert torch.equal(b.targets, b.inputs.sort(1).values)
    b = HistogramTask(8).sample(4, 6, g)
    for row_x, row_t in zip(b.inputs.tolist(), b.targets.tolist()):
        assert row_t == [row_x.count(t) for t in row_x]
    b = PositionTask(8, max_len=10).sample(2, 6, g)
    assert b.targets[1].tolist() == list(range(6))
    with pytest.raises(ValueError, match="max_len"):
        PositionTask(8, max_len=4).sample(1, 6, g)


def test_copy_layout():
    task = CopyTask(5)
    b = task.sample(2, 4, make_generator(0))
    assert b.inputs.shape == (2, 9) and b.targets.shape == (2, 9)
    assert (b.inputs[:, 0] == task.bos).all() and (b.inputs[:, 5] == task.sep).all()
    assert (b.targets[:, :5] == IGNORE).all()
    assert torch.equal(b.targets[:, 5:], b.inputs[:, 1:5])


def test_same_seed_same_data():
    t = MarkovTask(8)
    a = t.sample(3, 20, make_generator(7))
    b = t.sample(3, 20, make_generator(7))
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)


def test_markov_entropy_rate_matches_empirical():
    task = MarkovTask(num_symbols=6, order=2, branching=3, seed=3)
    assert torch.allclose(task.transition.sum(1), torch.ones(36, dtype=torch.float64))
    batch = task.sample(4000, 30, make_generator(1))
    x = batch.targets  # x_0 ... x_30
    prev2, prev1, nxt = x[:, :-2], x[:, 1:-1], x[:, 2:]
    p = task.transition[prev2 * 6 + prev1, nxt]
    assert bool((p > 0).all())  # every observed transition is allowed
    empirical = float(-p.log().mean())
    assert empirical == pytest.approx(task.entropy_rate, abs=0.02)
    assert 0 < task.entropy_rate < math.log(3)
    floors = task.loss_floor_by_position(30)
    assert floors.shape == (31,) and float(floors[5]) == pytest.approx(task.entropy_rate)
    assert float(floors[0]) > float(floors[1]) > float(floors[2])


def test_markov_bos_layout():
    task = MarkovTask(5, bos=True)
    b = task.sample(2, 7, make_generator(0))
    assert b.inputs.shape == (2, 8) and (b.inputs[:, 0] == 5).all()
    assert torch.equal(b.inputs[:, 1:], b.targets[:, :-1])
    nb = MarkovTask(5, bos=False).sample(2, 7, make_generator(0))
    assert nb.inputs.shape == (2, 7)


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("bos", [True, False])
def test_markov_shortest_length(order, bos):
    b = MarkovTask(5, order=order, bos=bos).sample(3, 1, make_generator(0))  # used to raise IndexError for order 2
    assert b.inputs.shape == (3, 2 if bos else 1)


def test_shortest_lengths_of_every_task():
    g = make_generator(0)
    for task in (ReverseTask(4), SortTask(4), HistogramTask(4), PositionTask(4, max_len=1), CopyTask(4)):
        b = task.sample(2, 1, g)
        assert b.inputs.shape[0] == 2 and b.targets.shape == b.inputs.shape


def test_markov_errors():
    with pytest.raises(ValueError, match="order"):
        MarkovTask(order=3)
    with pytest.raises(ValueError, match="branching"):
        MarkovTask(4, branching=5)
    with pytest.raises(TypeError, match="order"):
        MarkovTask(order=True)  # True == 1 used to pass
    with pytest.raises(ValueError, match="contexts"):
        MarkovTask(100)  # a 10**4 x 10**4 dense matrix


def _brute_force_position_free(num_symbols: int, seq_len: int, task: str = "reverse") -> tuple[float, float]:
    """Bayes-optimal position-free reverse predictor by enumerating every sequence (independent of the formula).

    A position-free model sees, at position p, only the token x[p] and the multiset of the sequence; group the
    (sequence, position) pairs by that view and predict each group's empirical target distribution.
    """
    import itertools
    from collections import Counter, defaultdict

    groups: dict = defaultdict(Counter)
    for seq in itertools.product(range(num_symbols), repeat=seq_len):
        bag = tuple(sorted(seq))
        for p in range(seq_len):
            target = seq[seq_len - 1 - p] if task == "reverse" else bag[p]  # sort: the p-th smallest
            groups[seq[p], bag][target] += 1
    pairs = num_symbols**seq_len * seq_len
    accuracy = sum(max(c.values()) for c in groups.values()) / pairs
    loss = 0.0
    for c in groups.values():
        size = sum(c.values())
        loss -= sum(k * math.log(k / size) for k in c.values())
    return accuracy, loss / pairs


@pytest.mark.parametrize("num_symbols,seq_len", [(1, 3), (2, 1), (2, 2), (2, 5), (3, 4), (3, 5), (4, 4), (5, 3), (4, 6)])
def test_reverse_position_free_optimum_matches_enumeration(num_symbols, seq_len):
    accuracy, loss = ReverseTask(num_symbols).position_free_optimum(seq_len)
    ref_accuracy, ref_loss = _brute_force_position_free(num_symbols, seq_len)
    assert accuracy == pytest.approx(ref_accuracy, rel=1e-12, abs=1e-12)
    assert loss == pytest.approx(ref_loss, rel=1e-12, abs=1e-12)


def test_reverse_position_free_optimum_matches_simulation_at_book_size():
    # the review's simulated figure for 16 tokens over 16 symbols is about 0.192
    accuracy, loss = ReverseTask(16).position_free_optimum(16)
    g = make_generator(0)
    others = torch.randint(16, (200_000, 15), generator=g)
    counts = torch.nn.functional.one_hot(others, 16).sum(1).double()
    simulated = float(counts.max(1).values.mean() / 15)
    probs = counts / 15
    simulated_loss = float(-(torch.where(probs > 0, probs * probs.log(), torch.zeros_like(probs))).sum(1).mean())
    assert accuracy == pytest.approx(simulated, abs=3e-3)
    assert loss == pytest.approx(simulated_loss, abs=3e-3)
    assert 0.18 < accuracy < 0.2 and 1.0 / 16 < accuracy


@pytest.mark.parametrize("num_symbols,seq_len", [(1, 3), (2, 1), (2, 2), (2, 5), (3, 4), (3, 5), (4, 4), (5, 3), (4, 6)])
def test_sort_position_free_optimum_matches_enumeration(num_symbols, seq_len):
    accuracy, loss = SortTask(num_symbols).position_free_optimum(seq_len)
    ref_accuracy, ref_loss = _brute_force_position_free(num_symbols, seq_len, task="sort")
    assert accuracy == pytest.approx(ref_accuracy, rel=1e-12, abs=1e-12)
    assert loss == pytest.approx(ref_loss, rel=1e-12, abs=1e-12)


def test_sort_position_free_optimum_bad_input():
    with pytest.raises(ValueError, match="seq_len"):
        SortTask(4).position_free_optimum(0)
    with pytest.raises(TypeError, match="seq_len"):
        SortTask(4).position_free_optimum(True)
    with pytest.raises(ValueError, match="num_symbols"):
        SortTask(65).position_free_optimum(4)


def test_reverse_position_free_optimum_bad_input():
    with pytest.raises(ValueError, match="seq_len"):
        ReverseTask(4).position_free_optimum(0)
    with pytest.raises(TypeError, match="seq_len"):
        ReverseTask(4).position_free_optimum(2.0)
    with pytest.raises(ValueError, match="seq_len"):
        ReverseTask(4).position_free_optimum(65)
    with pytest.raises(ValueError, match="num_symbols"):
        ReverseTask(65).position_free_optimum(4)


# ---------------------------------------------------------------------------------------------------- PrefixTask


@pytest.mark.parametrize("task", [MarkovTask(), MarkovTask(bos=False), CopyTask(num_symbols=8)])
def test_prefix_task_cuts_the_sequences_of_the_full_length(task):
    from course_pe import PrefixTask

    prefix = PrefixTask(task, 40)
    short = prefix.sample(5, 12, make_generator(3))
    full = task.sample(5, 40, make_generator(3))
    extra = full.inputs.shape[1] - 40  # BOS (and SEP for copy): the task's constant offset
    assert short.inputs.shape == (5, 12 + extra)
    assert torch.equal(short.inputs, full.inputs[:, : 12 + extra])
    assert torch.equal(short.targets, full.targets[:, : 12 + extra])
    assert (prefix.vocab_size, prefix.num_outputs, prefix.causal) == (task.vocab_size, task.num_outputs, True)


def test_prefix_task_batches_after_the_first_stay_paired():
    """The reason PrefixTask exists: sampling a chain at two lengths gives different later batches."""
    from course_pe import PrefixTask

    task, g_short, g_full, g_plain = MarkovTask(), make_generator(9), make_generator(9), make_generator(9)
    prefix = PrefixTask(task, 64)
    for _ in range(3):
        short, full = prefix.sample(4, 16, g_short), task.sample(4, 64, g_full)
        assert torch.equal(short.inputs, full.inputs[:, :17])
    plain_batches = [task.sample(4, 16, g_plain) for _ in range(3)]
    assert not torch.equal(plain_batches[2].inputs, full.inputs[:, :17])  # without it, the third batch differs


def test_prefix_task_bad_input():
    from course_pe import PrefixTask

    with pytest.raises(TypeError, match="task"):
        PrefixTask(MarkovTask, 10)
    with pytest.raises(ValueError, match="full_len"):
        PrefixTask(MarkovTask(), 0)
    with pytest.raises(ValueError, match="exceeds the full length"):
        PrefixTask(MarkovTask(), 10).sample(2, 11)
