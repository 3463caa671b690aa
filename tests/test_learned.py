import pytest
import torch

from course_pe import LearnedPositionalEmbedding


def test_forward_adds_rows_and_gradients_reach_table():
    module = LearnedPositionalEmbedding(10, 4, generator=torch.Generator().manual_seed(0))
    x = torch.zeros(2, 3, 4)
    out = module(x)
    torch.testing.assert_close(out[1], module.weight[:3].detach())
    out.sum().backward()
    assert module.weight.grad is not None
    assert torch.equal(module.weight.grad[:3], torch.full((3, 4), 2.0))
    assert torch.equal(module.weight.grad[3:], torch.zeros(7, 4))


def test_positions_per_batch():
    module = LearnedPositionalEmbedding(10, 2)
    pos = torch.tensor([[0, 1], [5, 9]])
    out = module(torch.zeros(2, 2, 2), pos)
    torch.testing.assert_close(out[1], module.weight[[5, 9]].detach())


def test_position_past_the_table_is_an_error_that_names_the_limit():
    module = LearnedPositionalEmbedding(8, 4)
    with pytest.raises(ValueError, match=r"max_positions=8.*interpolate"):
        module(torch.zeros(1, 9, 4))
    with pytest.raises(ValueError, match="max_positions=8"):
        module.lookup(torch.tensor([8]))


def test_interpolate_same_length_is_identity():
    module = LearnedPositionalEmbedding(16, 6)
    new = module.interpolate(16)
    assert torch.equal(new.weight, module.weight)
    assert new.weight is not module.weight


def test_interpolate_is_linear_and_keeps_endpoints():
    module = LearnedPositionalEmbedding(3, 1)
    with torch.no_grad():
        module.weight.copy_(torch.tensor([[0.0], [10.0], [20.0]]))
    new = module.interpolate(5)
    torch.testing.assert_close(new.weight.detach().flatten(), torch.tensor([0.0, 5.0, 10.0, 15.0, 20.0]))
    assert new.max_positions == 5


def test_bad_arguments():
    with pytest.raises(ValueError, match="max_positions"):
        LearnedPositionalEmbedding(0, 4)
    module = LearnedPositionalEmbedding(4, 4)
    with pytest.raises(ValueError, match="batch-first"):
        module(torch.zeros(4, 4))
    with pytest.raises(ValueError, match="positions must have shape"):
        module(torch.zeros(1, 3, 4), torch.arange(2))
    with pytest.raises(TypeError, match="integer"):
        module.lookup(torch.tensor([0.5]))


# ----------------------------------------------------------------------------- red-team probe, 2026-11-24 (issue 27)


def test_uint8_positions_are_rows_not_a_mask():
    """PyTorch reads a uint8 index tensor as a boolean mask: lookup(uint8 [1] * 8) returned rows 0 ... 7."""
    emb = LearnedPositionalEmbedding(8, 4, generator=torch.Generator().manual_seed(0))
    for values in ([1] * 8, [7, 0, 3], [5]):
        narrow = torch.tensor(values, dtype=torch.uint8)
        assert torch.equal(emb.lookup(narrow), emb.lookup(torch.tensor(values)))
        assert torch.equal(emb.lookup(narrow), emb.weight[torch.tensor(values)])
    x = torch.zeros(2, 3, 4)
    assert torch.equal(emb(x, torch.tensor([2, 2, 2], dtype=torch.uint8)), emb(x, torch.tensor([2, 2, 2])))
