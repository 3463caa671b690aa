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
