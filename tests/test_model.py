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
