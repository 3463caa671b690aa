import torch

from course_pe import HistogramTask, ReverseTask, TinyTransformer, TrainConfig, evaluate_by_position, train


def make(position):
    torch.manual_seed(0)
    return TinyTransformer(8, d_model=32, num_heads=2, num_layers=1, position=position, num_outputs=9)


def test_training_is_deterministic_and_learns():
    cfg = TrainConfig(steps=60, batch_size=16, seq_len=8, lr=3e-3, warmup=10)
    task = HistogramTask(8, max_count=8)
    r1 = train(make("none"), task, cfg, progress=False)
    r2 = train(make("none"), task, cfg, progress=False)
    assert r1.losses == r2.losses
    assert r1.final_loss < r1.losses[0]
    assert len(r1.logged) == 2


def test_evaluate_by_position_shapes_and_range():
    model = make("sinusoidal")
    rep = evaluate_by_position(model, ReverseTask(8), 6, batch_size=8, num_batches=2)
    assert rep.loss.shape == (6,) and rep.accuracy.shape == (6,)
    assert 0 <= rep.mean_accuracy() <= 1 and rep.mean_loss() > 0
    again = evaluate_by_position(model, ReverseTask(8), 6, batch_size=8, num_batches=2)
    assert torch.equal(rep.loss, again.loss)


def test_steps_are_bounded_and_a_task_class_is_refused():
    """Red team 2: TrainConfig(steps=10**7) passed (only the 40 bytes per step of the loss list were checked) and
    trained for hours; a task class instead of an instance crashed with "'int' object has no attribute ...". """
    import pytest

    from course_pe import CopyTask, evaluate_seeds, train_seeds
    from course_pe.training import MAX_TRAIN_STEPS

    assert MAX_TRAIN_STEPS == 2**20 and TrainConfig(steps=2**20).steps == 2**20
    for steps in (2**20 + 1, 10**7, 2**63):
        with pytest.raises(ValueError, match=r"^steps must be <= 1048576"):
            TrainConfig(steps=steps)
    model = make("none")
    for call in (lambda: train(model, CopyTask, TrainConfig(steps=1), progress=False),
                 lambda: train_seeds([model], CopyTask, TrainConfig(steps=1), progress=False),
                 lambda: evaluate_by_position(model, CopyTask, 4),
                 lambda: evaluate_seeds([model], CopyTask, 4)):
        with pytest.raises(TypeError, match=r"^task must be a task object, got the class CopyTask; create one, e\.g\. "
                                            r"CopyTask\(\)$"):
            call()
