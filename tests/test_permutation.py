import pytest
import torch

from course_pe import equivariance_error, invariance_error, permutation_matrix, permute_sequence, random_permutation


def test_permutation_matrix_matches_indexing():
    perm = torch.tensor([2, 0, 1])
    x = torch.randn(3, 4)
    torch.testing.assert_close(permutation_matrix(perm) @ x, x[perm])
    torch.testing.assert_close(permute_sequence(x, perm), x[perm])
    torch.testing.assert_close(permute_sequence(x.unsqueeze(0), perm)[0], x[perm])


def test_four_d_tensors_permute_the_sequence_axis():
    x = torch.randn(2, 3, 5, 4)  # (batch, heads, seq, head_dim)
    perm = torch.tensor([4, 0, 3, 1, 2])
    out = permute_sequence(x, perm)
    for r in range(5):
        assert torch.equal(out[:, :, r], x[:, :, int(perm[r])])  # rows of the seq axis, heads untouched


def test_bad_perm_in_permute_sequence():
    with pytest.raises(ValueError, match="permutation"):
        permute_sequence(torch.randn(3, 2), torch.tensor([0, 0, 1]))
    with pytest.raises(TypeError, match="perm"):
        permute_sequence(torch.randn(3, 2), torch.tensor([True, False, True]))


def test_derangement_has_no_fixed_points():
    for seed in range(20):
        p = random_permutation(6, generator=torch.Generator().manual_seed(seed))
        assert bool((p != torch.arange(6)).all())


def test_errors_detect_what_they_should():
    x = torch.randn(2, 5, 3)
    perm = random_permutation(5, generator=torch.Generator().manual_seed(0))
    assert equivariance_error(lambda t: 2 * t, x, perm) == 0.0
    assert equivariance_error(lambda t: t.cumsum(1), x, perm) > 0.0
    assert invariance_error(lambda t: t.mean(1), x, perm) < 1e-6
    assert invariance_error(lambda t: t[:, 0], x, perm) > 0.0


def test_bad_permutation():
    with pytest.raises(ValueError, match="permutation"):
        permutation_matrix(torch.tensor([0, 0, 1]))
    with pytest.raises(ValueError, match="sequence axis"):
        permute_sequence(torch.randn(2, 4, 3), torch.tensor([1, 0]))
