import pytest
import torch

from course_pe import MODEL_POSITIONS, LinearScaling, TinyTransformer


@pytest.mark.parametrize("position", MODEL_POSITIONS)
def test_forward_shapes(position):
    torch.manual_seed(0)
    model = TinyTransformer(11, d_model=16, num_heads=2, num_layers=2, position=position, max_positions=32)
    tokens = torch.randint(11, (3, 9))
    logits = model(tokens)
    assert logits.shape == (3, 9, 11)
    details = model(tokens, return_details=True)
    assert len(details.hidden) == 3 and len(details.attention) == 2
    assert details.attention[0].shape == (3, 2, 9, 9)


def test_encoder_without_position_is_equivariant():
    torch.manual_seed(0)
    model = TinyTransformer(7, d_model=16, num_heads=2, position="none").double().eval()
    tokens = torch.randint(7, (1, 8))
    perm = torch.tensor([3, 1, 7, 0, 2, 6, 4, 5])
    out, out_perm = model(tokens), model(tokens[:, perm])
    torch.testing.assert_close(out[:, perm], out_perm)


def test_causal_and_learned_limits():
    model = TinyTransformer(5, d_model=8, num_heads=2, position="learned", max_positions=6, causal=True)
    with pytest.raises(ValueError, match="max_positions=6"):
        model(torch.zeros(1, 7, dtype=torch.long))
    # causal: changing a later token does not change earlier logits
    t1 = torch.tensor([[1, 2, 3, 4]])
    t2 = torch.tensor([[1, 2, 3, 0]])
    torch.testing.assert_close(model(t1)[:, :3], model(t2)[:, :3])


def test_errors():
    with pytest.raises(ValueError, match="position"):
        TinyTransformer(5, position="fourier")
    with pytest.raises(ValueError, match="d_ff"):
        TinyTransformer(5, d_ff=0)  # a 0 used to become the default 4 * d_model
    with pytest.raises(ValueError, match="num_outputs"):
        TinyTransformer(5, num_outputs=0)
    with pytest.raises(ValueError, match="tokens must be < 5"):
        TinyTransformer(5, d_model=8, num_heads=2)(torch.tensor([[1, 5]]))  # used to be IndexError
    model = TinyTransformer(5, d_model=8, num_heads=2)
    with pytest.raises(ValueError, match="long tensor"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match="positions can be given only"):
        model(torch.zeros(1, 3, dtype=torch.long), positions=torch.arange(3))


def test_set_rope_scaling_changes_only_the_rotation():
    torch.manual_seed(0)
    model = TinyTransformer(7, d_model=16, num_heads=2, position="rope", max_positions=16).eval()
    tokens = torch.randint(7, (1, 12))
    before = model(tokens)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    model.set_rope_scaling(LinearScaling(2.0))
    after = model(tokens)
    assert not torch.allclose(before, after)
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    model.set_rope_scaling(None)
    torch.testing.assert_close(model(tokens), before)
    with pytest.raises(ValueError, match="RoPE model"):
        TinyTransformer(7, d_model=16, num_heads=2).set_rope_scaling(None)


# ------------------------------------------------- the documented T5 and Shaw variants (relative.ipynb, F-12)


def test_t5_variant_has_one_table_per_layer_and_scales_logits():
    """relative.ipynb says the course's T5 variant differs from T5 in two ways: a bias table per layer (T5 shares one
    per stack) and logits divided by sqrt(head_dim) (T5 does not). Pin both, computing the weights independently."""
    import math

    from course_pe import t5_relative_position_bucket

    torch.manual_seed(0)
    model = TinyTransformer(16, d_model=32, num_heads=4, num_layers=3, position="t5")
    tables = [block.attn.t5.embedding.weight for block in model.blocks]
    assert len({t.data_ptr() for t in tables}) == 3  # three separate tables, not one shared
    assert all(t.shape == (32, 4) for t in tables)  # buckets x heads
    attn = model.blocks[1].attn
    x = torch.randn(2, 6, 32)
    _, weights = attn(x, return_weights=True)
    q = attn.q_proj(x).view(2, 6, 4, 8).transpose(1, 2)
    k = attn.k_proj(x).view(2, 6, 4, 8).transpose(1, 2)
    buckets = t5_relative_position_bucket(torch.arange(6)[None, :] - torch.arange(6)[:, None])  # key - query
    bias = tables[1][buckets].permute(2, 0, 1)  # (heads, q, k)
    torch.testing.assert_close(weights, (q @ k.transpose(-1, -2) / math.sqrt(8) + bias).softmax(-1))
    assert not torch.allclose(weights, (q @ k.transpose(-1, -2) + bias).softmax(-1), atol=1e-3)  # not T5's scaling


def test_shaw_variant_shares_tables_across_heads_not_layers():
    model = TinyTransformer(16, d_model=32, num_heads=4, num_layers=2, position="shaw", shaw_max_distance=3)
    keys = [block.attn.shaw.rel_keys for block in model.blocks]
    assert keys[0].shape == (7, 8)  # (2K + 1, head_dim): one table for all four heads
    assert keys[0].data_ptr() != keys[1].data_ptr()  # one per layer
