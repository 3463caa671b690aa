"""The batched-seeds trainer against its reference: separate calls of ``train`` (tested in test_training.py)."""

import dataclasses

import pytest
import torch

import course_pe as cpe
from course_pe import CopyTask, LinearScaling, MarkovTask, NTKScaling, TinyTransformer, TrainConfig, YaRNScaling, train
from course_pe.training import (
    DATA_SEED_OFFSET,
    SeedsResult,
    evaluate_by_position,
    evaluate_seeds,
    init_seeds,
    seed_streams,
    train_seeds,
)

SEEDS = [0, 1, 2]


def factory(position, task, **kwargs):
    return lambda: TinyTransformer(
        task.vocab_size, num_outputs=task.num_outputs, d_model=32, num_heads=2, num_layers=2, position=position,
        causal=True, max_positions=64, **kwargs,
    )


def separate_runs(make, task, config, seeds):
    """The reference: one ordinary ``train`` call per seed, each on its own model and data stream."""
    models, losses = [], []
    for seed in seeds:
        init_seed, data_seed = seed_streams(seed)
        torch.manual_seed(init_seed)
        model = make()
        losses.append(train(model, task, dataclasses.replace(config, seed=data_seed), progress=False).losses)
        models.append(model)
    return models, torch.tensor(losses, dtype=torch.float64).T  # (steps, seeds)


@pytest.mark.parametrize("position", ["rope", "learned", "sinusoidal", "alibi", "none"])
def test_batched_seeds_match_separate_runs(position):
    torch.set_num_threads(1)
    task = MarkovTask(num_symbols=8, order=2, branching=3, seed=0)
    make = factory(position, task, scale_embeddings=position == "sinusoidal")
    config = TrainConfig(steps=25, batch_size=8, seq_len=12, lr=3e-3, warmup=5, grad_clip=1.0)
    ref_models, ref_losses = separate_runs(make, task, config, SEEDS)

    models = init_seeds(make, SEEDS)
    result = train_seeds(models, task, config, [seed_streams(s)[1] for s in SEEDS], progress=False)
    assert isinstance(result, SeedsResult)
    assert result.losses.shape == (25, 3) and result.losses.dtype == torch.float64
    torch.testing.assert_close(result.losses, ref_losses, rtol=2e-4, atol=2e-5)
    # the seeds really differ (different init and data), so equality above is not trivial
    assert (ref_losses[:, 0] - ref_losses[:, 1]).abs().max() > 1e-3
    # The trained weights were copied back into each model: same function as the reference model. (Weights are
    # compared through the outputs: the key bias has an exactly zero gradient, the softmax ignores it, so Adam turns
    # rounding noise into arbitrary small steps there, and that parameter differs by design.)
    probe = task.sample(4, 12, torch.Generator().manual_seed(99)).inputs
    for mine, ref in zip(models, ref_models):
        assert not mine.training  # like train(), models are left in eval mode
        with torch.no_grad():
            torch.testing.assert_close(mine(probe), ref(probe), rtol=1e-3, atol=1e-3)


def test_gradient_clipping_is_per_seed():
    """A large learning-rate warm-up makes clipping active; every seed must be clipped by its own norm."""
    torch.set_num_threads(1)
    task = CopyTask(num_symbols=6)
    make = factory("rope", task)
    config = TrainConfig(steps=6, batch_size=4, seq_len=5, lr=1e-2, warmup=1, grad_clip=0.05)
    _, ref_losses = separate_runs(make, task, config, [3, 7])
    models = init_seeds(make, [3, 7])
    result = train_seeds(models, task, config, [seed_streams(3)[1], seed_streams(7)[1]], progress=False)
    torch.testing.assert_close(result.losses, ref_losses, rtol=2e-4, atol=2e-5)


def test_seed_streams_and_init_seeds():
    assert seed_streams(4) == (4, 4 + DATA_SEED_OFFSET)
    task = MarkovTask(num_symbols=8, order=2, seed=0)
    a, b = init_seeds(factory("rope", task), [0, 1])
    torch.manual_seed(1)
    again = factory("rope", task)()
    assert torch.equal(b.head.weight, again.head.weight)
    assert not torch.equal(a.head.weight, b.head.weight)
    with pytest.raises(ValueError, match="seed"):
        seed_streams(-1)
    for bad in (1.5, True):  # a wrong type is a TypeError, as everywhere in the package
        with pytest.raises(TypeError, match="seed"):
            seed_streams(bad)
    with pytest.raises(ValueError, match="distinct"):
        init_seeds(factory("rope", task), [1, 1])
    with pytest.raises(ValueError, match="empty"):
        init_seeds(factory("rope", task), [])
    with pytest.raises(TypeError, match="make_model"):
        init_seeds("not a function", [0])


def test_train_seeds_rejects_mismatched_models_and_seeds():
    task = MarkovTask(num_symbols=8, order=2, seed=0)
    config = TrainConfig(steps=2, batch_size=2, seq_len=4)
    small = factory("rope", task)()
    other = TinyTransformer(task.vocab_size, num_outputs=task.num_outputs, d_model=16, num_heads=2, position="rope",
                            causal=True, max_positions=64)
    with pytest.raises(ValueError, match="architecture"):
        train_seeds([small, other], task, config, progress=False)
    with pytest.raises(ValueError, match="data_seeds"):
        train_seeds([small, factory("rope", task)()], task, config, [1], progress=False)
    with pytest.raises(TypeError, match="models"):
        train_seeds(small, task, config, progress=False)
    short_cache = TinyTransformer(task.vocab_size, num_outputs=task.num_outputs, d_model=32, num_heads=2,
                                  num_layers=2, position="rope", causal=True, max_positions=32)
    with pytest.raises(ValueError, match="buffers"):
        train_seeds([small, short_cache], task, config, progress=False)


def test_models_that_differ_in_buffers_train_together():
    """Different RoPE scalings (different cos/sin buffers) in one batched run, each as its own separate run."""
    torch.set_num_threads(1)
    task = MarkovTask(num_symbols=8, order=2, branching=3, seed=0)
    config = TrainConfig(steps=15, batch_size=4, seq_len=20, lr=3e-3, warmup=3)
    scalings = [None, LinearScaling(4.0), NTKScaling(4.0), YaRNScaling(4.0, 13)]

    def build(scaling):
        torch.manual_seed(5)
        model = factory("rope", task)()
        model.set_rope_scaling(scaling)
        return model

    data = [11, 12, 13, 14]
    ref = torch.tensor(
        [train(build(sc), task, dataclasses.replace(config, seed=d), progress=False).losses
         for sc, d in zip(scalings, data)], dtype=torch.float64).T
    result = train_seeds([build(sc) for sc in scalings], task, config, data, progress=False)
    torch.testing.assert_close(result.losses, ref, rtol=2e-4, atol=2e-5)
    # same init, so the differences between columns come from the scalings (and the data)
    assert (ref[:, 0] - ref[:, 1]).abs().max() > 1e-3


def test_evaluate_seeds_is_evaluate_by_position_per_model():
    task = MarkovTask(num_symbols=8, order=2, seed=0)
    models = init_seeds(factory("alibi", task), [0, 1])
    reports = evaluate_seeds(models, task, 10, batch_size=4, num_batches=2)
    for model, report in zip(models, reports):
        ref = evaluate_by_position(model, task, 10, batch_size=4, num_batches=2)
        assert torch.equal(report.loss, ref.loss)
    with pytest.raises(TypeError):
        evaluate_seeds(models[0], task, 10)


# ----------------------------------------------------------------------------- red team 2, S2: configurations that differ


def tiny_rope(seed, **kwargs):
    torch.manual_seed(seed)
    return TinyTransformer(10, d_model=16, num_heads=2, num_layers=1, position="rope", max_positions=32, **kwargs)


@pytest.mark.parametrize("first,second,attribute", [
    (dict(causal=True), dict(causal=False), r"\.causal: True vs False"),
    (dict(rope_layout="interleaved"), dict(rope_layout="half"), r"\.blocks\.0\.attn\.rotary\.layout: 'interleaved' vs 'half'"),
    (dict(scale_embeddings=False), dict(scale_embeddings=True), r"\.scale: 1\.0 vs 4\.0"),
    (dict(rope_scaling=cpe.DynamicNTKScaling(2.0, 16)), dict(rope_scaling=cpe.DynamicNTKScaling(8.0, 16)),
     r"\.blocks\.0\.attn\.rotary\.scaling: DynamicNTKScaling\(factor=2\.0.* vs DynamicNTKScaling\(factor=8\.0.*depends on "
     r"the current length"),
    (dict(rope_scaling=None), dict(rope_scaling=cpe.LongRoPEScaling([1.0] * 4, [2.0] * 4, 16)),
     r"\.blocks\.0\.attn\.rotary\.\w+: .* vs .*depends on the current length"),
])
def test_models_configured_differently_are_refused(first, second, attribute):
    """S2: train_seeds ran models[1:] with the attributes of models[0] (causal, layout, embedding scale, a dynamic
    scaling) and returned losses up to 0.18 away from separate train() calls, without a word."""
    config = TrainConfig(steps=3, batch_size=4, seq_len=6, warmup=1, log_every=1)
    with pytest.raises(ValueError, match=r"^models\[1\] is configured differently from models\[0\] \(" + attribute):
        train_seeds([tiny_rope(1, **first), tiny_rope(2, **second)], CopyTask(8), config, [11, 12], progress=False)


def test_a_cache_rebuilt_from_the_first_models_scaling_is_refused():
    """S2: different fixed scalings train together while the cos/sin caches cover the input (stacked buffers); an
    input longer than the cache used to rebuild every model's cache from models[0]'s scaling (loss off by 0.0088)."""
    config = TrainConfig(steps=2, batch_size=2, seq_len=40, warmup=1)  # 81 positions > max_positions = 32
    models = [tiny_rope(1, rope_scaling=cpe.LinearScaling(4.0)), tiny_rope(2)]
    with pytest.raises(ValueError, match=r"^RotaryEmbedding: the models trained together have different cos/sin caches "
                                         r"\(different RoPE scalings\), and this input needs positions up to 80, beyond "
                                         r"the 32 cached"):
        train_seeds(models, CopyTask(8), config, [11, 12], progress=False)


@pytest.mark.parametrize("scaling", [None, cpe.DynamicNTKScaling(2.0, 16),
                                     cpe.LongRoPEScaling([1.0, 1.5, 2.0, 3.0], [2.0, 4.0, 8.0, 16.0], 16)])
def test_identical_models_grow_their_caches_and_scale_with_the_length(scaling):
    """Identical configurations may need new cos/sin rows or length-dependent frequencies in the forward pass: each
    call computes them (from the shared attributes) and equals separate train() calls."""
    torch.set_num_threads(1)
    task = CopyTask(8)
    config = TrainConfig(steps=4, batch_size=4, seq_len=20, warmup=1, lr=3e-3)  # 41 positions > 32 cached, > 16
    make = lambda: TinyTransformer(task.vocab_size, d_model=16, num_heads=2, num_layers=1, position="rope",
                                   max_positions=32, causal=True, rope_scaling=scaling)
    _, reference = separate_runs(make, task, config, [0, 1])
    result = train_seeds(init_seeds(make, [0, 1]), task, config, [seed_streams(0)[1], seed_streams(1)[1]],
                         progress=False)
    torch.testing.assert_close(result.losses, reference, rtol=2e-4, atol=2e-5)
