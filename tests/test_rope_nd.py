"""Tests for course_pe.rope_nd: relative-position properties (hypothesis) and independent references.

The references are NumPy transcriptions of the published formulas, written without course_pe:
- 2-D RoPE: Heo et al. (2024), RoPE-Axial, as in naver-ai/rope-vit ``models/vit_rope.py::compute_axial_cis``
  (complex pairs, frequencies ``100 ** (-arange(0, d, 4) / d)``, x-half then y-half);
- M-RoPE: Qwen2-VL as in Hugging Face ``apply_multimodal_rotary_pos_emb`` (``mrope_section * 2`` split of a
  ``cat(freqs, freqs)`` table, chunk ``i`` taken from position stream ``i % 3``, ``rotate_half``);
- xPos: Sun et al. (2023), torchscale ``XPOS`` (``scale = (arange(0, d, 2) + 0.4 d) / (1.4 d)``, ``** (p / 512)``);
- decoupled RoPE: DeepSeek-V2 (2024), eq. for MLA logits, with the rotary key shared by all heads.
"""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from course_pe import (
    QWEN2_VL_MROPE_SECTION,
    apply_rope,
    apply_xpos,
    decoupled_rope_logits,
    mrope,
    mrope_position_ids,
    multi_axis_rope,
    rope_2d,
    xpos_scale,
)

coords = st.integers(-300, 300)


def rand(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


# --------------------------------------------------------------------------- references (NumPy only)


def ref_axial(x: np.ndarray, xy: np.ndarray, base: float = 100.0) -> np.ndarray:
    """RoPE-Axial on one vector per row: x (seq, d) real, xy (seq, 2)."""
    seq, d = x.shape
    freqs = 1.0 / base ** (np.arange(0, d, 4)[: d // 4] / d)
    z = x[:, 0::2] + 1j * x[:, 1::2]
    angles = np.concatenate([np.outer(xy[:, 0], freqs), np.outer(xy[:, 1], freqs)], axis=1)
    w = z * np.exp(1j * angles)
    out = np.empty_like(x)
    out[:, 0::2], out[:, 1::2] = w.real, w.imag
    return out


def ref_mrope(x: np.ndarray, pos3: np.ndarray, section, base: float) -> np.ndarray:
    """Qwen2-VL M-RoPE, transcribed: x (seq, d), pos3 (seq, 3)."""
    seq, d = x.shape
    inv_freq = 1.0 / base ** (np.arange(0, d, 2) / d)
    tables = []
    for a in range(3):
        freqs = np.outer(pos3[:, a], inv_freq)
        tables.append(np.concatenate([freqs, freqs], axis=1))
    cuts = np.cumsum(list(section) * 2)[:-1]
    pieces = [np.split(t, cuts, axis=1) for t in tables]
    emb = np.concatenate([pieces[i % 3][i] for i in range(2 * len(section))], axis=1)
    rotated_half = np.concatenate([-x[:, d // 2 :], x[:, : d // 2]], axis=1)
    return x * np.cos(emb) + rotated_half * np.sin(emb)


def ref_xpos_score(q: np.ndarray, k: np.ndarray, m: int, n: int, base=10000.0, scale_base=512.0) -> float:
    """<xPos query at m, xPos key at n>, from complex pairs and the torchscale scale vector."""
    d = q.shape[0]
    theta = base ** (-np.arange(0, d, 2) / d)
    zeta = (np.arange(0, d, 2) + 0.4 * d) / (1.4 * d)
    zq, zk = q[0::2] + 1j * q[1::2], k[0::2] + 1j * k[1::2]
    per_pair = np.real(np.conj(zq * np.exp(1j * m * theta)) * zk * np.exp(1j * n * theta))
    return float(np.sum(zeta ** ((m - n) / scale_base) * per_pair))


def ref_rotate_interleaved(x: np.ndarray, positions: np.ndarray, base: float) -> np.ndarray:
    seq, d = x.shape
    theta = base ** (-np.arange(0, d, 2) / d)
    w = (x[:, 0::2] + 1j * x[:, 1::2]) * np.exp(1j * np.outer(positions, theta))
    out = np.empty_like(x)
    out[:, 0::2], out[:, 1::2] = w.real, w.imag
    return out


# --------------------------------------------------------------------------- 2-D RoPE


def test_rope_2d_matches_rope_axial_transcription():
    x = rand(9, 16)
    xy = torch.tensor([[c, r] for r in range(3) for c in range(3)])
    got = rope_2d(x, xy)
    np.testing.assert_allclose(got.numpy(), ref_axial(x.numpy(), xy.numpy().astype(float)), rtol=0, atol=1e-12)


@given(coords, coords, coords, coords, coords, coords)
def test_rope_2d_score_depends_only_on_the_2d_offset(r1, c1, r2, c2, dr, dc):
    q, k = rand(1, 8, seed=1), rand(1, 8, seed=2)

    def score(pq, pk):
        return float(rope_2d(q, torch.tensor([pq])) @ rope_2d(k, torch.tensor([pk])).T)

    a = score((r1, c1), (r2, c2))
    b = score((r1 + dr, c1 + dc), (r2 + dr, c2 + dc))
    assert abs(a - b) <= 1e-9 * (1 + abs(a))


def test_rope_2d_is_not_1d_rope_of_a_flattened_index():
    # the same 1-D offset (one row of a 4-wide grid = 4 positions) gives different scores in 2-D RoPE
    q, k = rand(1, 8, seed=3), rand(1, 8, seed=4)

    def score(pq, pk):
        return float(rope_2d(q, torch.tensor([pq])) @ rope_2d(k, torch.tensor([pk])).T)

    assert abs(score((0, 4), (0, 0)) - score((1, 0), (0, 0))) > 1e-3


def test_rope_2d_batched_positions_and_half_layout():
    x = rand(2, 3, 5, 8)
    pos = torch.randint(0, 7, (2, 5, 2), generator=torch.Generator().manual_seed(0))
    got = rope_2d(x, pos, layout="half")
    for b in range(2):
        torch.testing.assert_close(got[b], rope_2d(x[b], pos[b], layout="half"))
    assert got.dtype == x.dtype and got.shape == x.shape


def test_rope_2d_errors():
    with pytest.raises(ValueError, match="divisible by 4"):
        rope_2d(rand(3, 6), torch.zeros(3, 2))
    with pytest.raises(ValueError, match=r"\(seq, 2\)"):
        rope_2d(rand(3, 8), torch.zeros(3, 3))
    with pytest.raises(TypeError, match="positions"):
        rope_2d(rand(3, 8), [[0, 0]] * 3)
    with pytest.raises(TypeError, match="positions"):
        rope_2d(rand(3, 8), torch.zeros(3, 2, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="layout"):
        rope_2d(rand(3, 8), torch.zeros(3, 2), layout="blocks")


# --------------------------------------------------------------------------- M-RoPE


@pytest.mark.parametrize("section,d", [((2, 3, 3), 16), (QWEN2_VL_MROPE_SECTION, 128)])
def test_mrope_matches_qwen2_vl_transcription(section, d):
    pos = mrope_position_ids(3, (1, 2, 3), 2)
    x = rand(pos.shape[0], d)
    got = mrope(x, pos, sections=section, base=1e6)
    np.testing.assert_allclose(got.numpy(), ref_mrope(x.numpy(), pos.numpy().astype(float), section, 1e6), atol=1e-12)


@given(st.tuples(coords, coords, coords), st.tuples(coords, coords, coords), st.tuples(coords, coords, coords))
def test_mrope_score_depends_only_on_the_3d_offset(pq, pk, shift):
    q, k = rand(1, 16, seed=5), rand(1, 16, seed=6)

    def score(a, b):
        return float(mrope(q, torch.tensor([a]), sections=(2, 3, 3)) @ mrope(k, torch.tensor([b]), sections=(2, 3, 3)).T)

    moved = [tuple(p + s for p, s in zip(x, shift)) for x in (pq, pk)]
    a, b = score(pq, pk), score(*moved)
    assert abs(a - b) <= 1e-9 * (1 + abs(a))


def test_mrope_on_text_is_plain_rope():
    x = rand(2, 4, 6, 128)
    p = torch.arange(10, 16)
    got = mrope(x, torch.stack([p, p, p], dim=-1))
    torch.testing.assert_close(got, apply_rope(x, p, base=1e6, layout="half"), rtol=0, atol=1e-12)


def test_mrope_position_ids_follow_the_qwen2_vl_rule():
    ids = mrope_position_ids(2, (1, 2, 2), 2)
    expected = [[0, 0, 0], [1, 1, 1], [2, 2, 2], [2, 2, 3], [2, 3, 2], [2, 3, 3], [4, 4, 4], [5, 5, 5]]
    assert ids.tolist() == expected


def test_mrope_errors():
    with pytest.raises(ValueError, match="add up"):
        mrope(rand(3, 16), torch.zeros(3, 3), sections=(2, 2, 2))
    with pytest.raises(TypeError, match="sections"):
        mrope(rand(3, 16), torch.zeros(3, 3), sections="223")
    with pytest.raises(ValueError, match=r"\(seq, 3\)"):
        mrope(rand(3, 16), torch.zeros(3, 2), sections=(2, 3, 3))
    with pytest.raises(TypeError, match="grid"):
        mrope_position_ids(1, [1, 2, 2], 1)
    with pytest.raises(ValueError, match="text_before"):
        mrope_position_ids(-1, (1, 2, 2), 1)


def test_multi_axis_rope_checks_axes():
    with pytest.raises(ValueError, match="axis_of_pair"):
        multi_axis_rope(rand(2, 4), torch.zeros(2, 1), inv_freq=torch.ones(2), axis_of_pair=torch.tensor([0, 1]))
    with pytest.raises(TypeError, match="integer"):
        multi_axis_rope(rand(2, 4), torch.zeros(2, 2), inv_freq=torch.ones(2), axis_of_pair=torch.tensor([0.0, 1.0]))


# --------------------------------------------------------------------------- xPos


@given(st.integers(-2000, 2000), st.integers(-2000, 2000), st.integers(-5000, 5000))
def test_xpos_score_matches_reference_and_depends_only_on_offset(m, n, shift):
    q, k = rand(1, 8, seed=7), rand(1, 8, seed=8)

    def score(a, b):
        qa = apply_xpos(q, torch.tensor([a]), role="query")
        kb = apply_xpos(k, torch.tensor([b]), role="key")
        return float(qa @ kb.T)

    ref = ref_xpos_score(q[0].numpy(), k[0].numpy(), m, n)
    got = score(m, n)
    assert abs(got - ref) <= 1e-9 * (1 + abs(ref))
    assert abs(score(m + shift, n + shift) - got) <= 1e-8 * (1 + abs(got))


def test_xpos_scale_decays_fastest_pairs_most():
    z = xpos_scale(torch.tensor([512.0]), 8)[0]
    assert torch.all(z[1:] > z[:-1]) and float(z[0]) == pytest.approx(0.4 / 1.4)
    with pytest.raises(ValueError, match="role"):
        apply_xpos(rand(2, 8), torch.arange(2), role="value")
    with pytest.raises(ValueError, match="even"):
        xpos_scale(torch.arange(2), 7)


# --------------------------------------------------------------------------- decoupled RoPE


def test_decoupled_logits_match_explicit_concatenation():
    b, h, s, dn, dr = 2, 3, 5, 6, 4
    qn, qr, kn = rand(b, h, s, dn, seed=1), rand(b, h, s, dr, seed=2), rand(b, h, s, dn, seed=3)
    kr = rand(b, 1, s, dr, seed=4)
    pos = np.arange(s) + 7
    got = decoupled_rope_logits(qn, qr, kn, kr, positions=torch.from_numpy(pos))
    for bi in range(b):
        kr_rot = ref_rotate_interleaved(kr[bi, 0].numpy(), pos, 1e4)
        for hi in range(h):
            q_full = np.concatenate([qn[bi, hi].numpy(), ref_rotate_interleaved(qr[bi, hi].numpy(), pos, 1e4)], axis=1)
            k_full = np.concatenate([kn[bi, hi].numpy(), kr_rot], axis=1)
            np.testing.assert_allclose(got[bi, hi].numpy(), q_full @ k_full.T / np.sqrt(dn + dr), atol=1e-12)


@given(st.integers(0, 10_000))
def test_decoupled_logits_depend_only_on_offsets(shift):
    qn, qr, kn, kr = rand(1, 2, 4, 6, seed=1), rand(1, 2, 4, 4, seed=2), rand(1, 2, 4, 6, seed=3), rand(1, 1, 4, 4, seed=4)
    base = decoupled_rope_logits(qn, qr, kn, kr)
    moved = decoupled_rope_logits(qn, qr, kn, kr, positions=torch.arange(4) + shift)
    torch.testing.assert_close(moved, base, rtol=0, atol=1e-9)


def test_decoupled_requires_a_shared_rotary_key():
    qn, qr, kn = rand(1, 2, 4, 6), rand(1, 2, 4, 4), rand(1, 2, 4, 6)
    with pytest.raises(ValueError, match="shared by all heads"):
        decoupled_rope_logits(qn, qr, kn, rand(1, 2, 4, 4))
    with pytest.raises(TypeError, match="k_rope"):
        decoupled_rope_logits(qn, qr, kn, None)


# ----------------------------------------------------------------------------- red team 2, D3: video blocks


def _transformers_mrope_ids(before, grid, after, kind):
    """transformers 5.23's Qwen2-VL ``get_rope_index`` for one sequence (text, one image or video block, text), with a
    spatial merge of 1 (``grid`` is the merged grid, as for :func:`mrope_position_ids`)."""
    import functools
    import types

    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel

    model = types.SimpleNamespace(config=types.SimpleNamespace(vision_config=types.SimpleNamespace(spatial_merge_size=1)))
    model.get_vision_position_ids = functools.partial(Qwen2VLModel.get_vision_position_ids, model)
    t, h, w = grid
    token_types = torch.tensor([0] * before + [kind] * (t * h * w) + [0] * after)[None]
    grids = torch.tensor([grid])
    ids, _ = Qwen2VLModel.get_rope_index(model, torch.zeros_like(token_types), token_types,
                                         image_grid_thw=grids if kind == 1 else None,
                                         video_grid_thw=grids if kind == 2 else None)
    return ids[:, 0].T  # (tokens, 3)


def _published_rule(before, grid, after):
    """The rule of the transformers 4.x code Qwen2-VL was released with: each text run starts one past the largest id
    so far (``llm_pos_ids_list[-1].max() + 1``), written out here independently of mrope_position_ids."""
    t, h, w = grid
    rows = [(p, p, p) for p in range(before)]
    rows += [(before + i, before + j, before + k) for i in range(t) for j in range(h) for k in range(w)]
    nxt = max(max(r) for r in rows) + 1
    rows += [(nxt + p,) * 3 for p in range(after)]
    return torch.tensor(rows)


def test_mrope_video_blocks_follow_the_published_rule_not_transformers_5():
    """D3: for T <= max(H, W) transformers 5.23 and course_pe agree; for a longer video 5.23 continues the text at
    s + max(H, W), course_pe (and the code Qwen2-VL was released with) at s + max(T, H, W), as documented."""
    agree = differ = 0
    for before in (0, 1, 3):
        for after in (0, 2):
            for grid in ((1, 2, 3), (2, 2, 2), (3, 4, 2), (6, 2, 3), (5, 1, 1), (4, 3, 3), (7, 2, 5)):
                mine = mrope_position_ids(before, grid, after)
                assert torch.equal(mine, _published_rule(before, grid, after))
                theirs = _transformers_mrope_ids(before, grid, after, kind=2)
                if grid[0] <= max(grid[1:]):
                    assert torch.equal(mine, theirs), grid
                    agree += 1
                else:
                    visual = before + grid[0] * grid[1] * grid[2]
                    assert torch.equal(mine[:visual], theirs[:visual])  # the block itself is the same
                    if after:
                        assert int(theirs[visual, 0]) == before + max(grid[1:])  # 5.23: max(H, W)
                        assert int(mine[visual, 0]) == before + max(grid)  # published: max(T, H, W)
                        differ += 1
    assert agree == 18 and differ == 12
    # an image is a block with T = 1: always the same
    assert torch.equal(mrope_position_ids(2, (1, 3, 4), 2), _transformers_mrope_ids(2, (1, 3, 4), 2, kind=1))
