import pytest
import torch

from course_pe import (
    MultiHeadAttention,
    attention,
    causal_mask,
    equivariance_error,
    random_permutation,
)

METHODS = ["none", "rope", "shaw", "t5", "alibi"]


@pytest.mark.parametrize("position", METHODS)
@pytest.mark.parametrize("causal", [False, True])
def test_shapes_and_weights(position, causal):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, position=position, causal=causal)
    x = torch.randn(2, 7, 16)
    out, w = mha(x, return_weights=True)
    assert out.shape == (2, 7, 16) and w.shape == (2, 4, 7, 7)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 7))
    if causal:
        assert float(w.detach().triu(1).abs().max()) == 0.0


def test_no_position_is_equivariant_and_positions_break_it():
    torch.manual_seed(0)
    x = torch.randn(1, 9, 16, dtype=torch.float64)
    perm = random_permutation(9, generator=torch.Generator().manual_seed(1))
    for position in METHODS:
        mha = MultiHeadAttention(16, 2, position=position).double().eval()
        err = equivariance_error(mha, x, perm)
        if position == "none":
            assert err < 1e-12
        else:
            assert err > 1e-3, position
    causal = MultiHeadAttention(16, 2, causal=True).double().eval()
    assert equivariance_error(causal, x, perm) > 1e-3


def test_attention_function_matches_sdpa():
    q, k, v = torch.randn(3, 2, 2, 5, 8).unbind(0)
    out, _ = attention(q, k, v, causal=True)
    torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_causal_mask_with_cache_offset():
    m = causal_mask(2, 4)
    assert m.tolist() == [[True, True, True, False], [True, True, True, True]]


def test_errors():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="position"):
        MultiHeadAttention(8, 2, position="sinusoidal")
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match="batch, seq, d_model"):
        mha(torch.randn(4, 8))
    with pytest.raises(ValueError, match="only used by RoPE"):
        mha(torch.randn(1, 4, 8), positions=torch.arange(4))
    with pytest.raises(ValueError, match="num_heads"):
        MultiHeadAttention(8, 0)


# ----------------------------------------------------------------------------- red team 2: fully masked queries


def test_a_query_with_no_visible_key_gets_zeros_as_in_sdpa():
    """A query whose keys are all masked got a NaN row (softmax of -inf alone); PyTorch's scaled_dot_product_attention
    gives weights 0 and output 0, with finite gradients. Now attention() gives the same, for a bool mask, a causal mask
    with left padding, and a -inf bias."""
    import torch.nn.functional as F

    from course_pe.shaw import shaw_attention

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    keep = torch.ones(2, 1, 5, 5, dtype=torch.bool)
    keep[0, :, 1] = False  # query 1 of sequence 0 sees nothing
    keep[1, :, :, :2] = False  # two left pads in sequence 1: queries 0 and 1 see nothing under the causal mask
    for kwargs, reference_mask in (
        (dict(mask=keep), keep),
        (dict(mask=keep, causal=True), keep & causal_mask(5)),
        (dict(bias=torch.zeros(1, 1, 5, 5, dtype=torch.float64).masked_fill(~keep, float("-inf"))), keep),
    ):
        out, weights = attention(q, k, v, **kwargs)
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=reference_mask)
        blind = ~reference_mask.expand(2, 3, 5, 5).any(-1)
        assert blind.sum() > 0 and torch.isfinite(out).all() and torch.isfinite(weights).all()
        assert (weights[blind] == 0).all() and (out[blind] == 0).all()
        torch.testing.assert_close(out, expected)
        grads = torch.autograd.grad(out.square().sum(), (q, k, v))
        expected_grads = torch.autograd.grad(expected.square().sum(), (q, k, v))
        for mine, theirs in zip(grads, expected_grads):
            assert torch.isfinite(mine).all()
            torch.testing.assert_close(mine, theirs)
    # Shaw et al.'s attention, with the same rule
    rel = torch.randn(2 * 2 + 1, 8, generator=g, dtype=torch.float64)
    out = shaw_attention(q, k, v, rel, rel, max_distance=2, mask=keep)
    assert torch.isfinite(out).all() and (out[~keep.expand(2, 3, 5, 5).any(-1)] == 0).all()


def test_left_padded_causal_model_stays_finite_through_layers():
    """Two stacked attention layers with a causal mask that hides left padding: the padded queries' NaN rows used to
    spread to every output of the second layer (0 * NaN in weights @ v); now the real tokens' outputs equal those of
    the unpadded sequence and nothing is NaN."""
    torch.manual_seed(0)
    layers = [MultiHeadAttention(16, 2, causal=True, position="rope").double() for _ in range(2)]
    x = torch.randn(1, 4, 16, dtype=torch.float64)
    padded = torch.cat([torch.zeros(1, 2, 16, dtype=torch.float64), x], dim=1)
    visible = torch.tensor([False, False, True, True, True, True])
    mask = visible[None, None, None, :].expand(1, 2, 6, 6)
    positions = (visible.long().cumsum(0) - 1).clamp(min=0)  # position_ids_from_attention_mask's rule
    a, b = x, padded
    for layer in layers:
        a, b = layer(a), layer(b, mask=mask, positions=positions)
    assert torch.isfinite(b).all()
    torch.testing.assert_close(b[:, 2:], a)
