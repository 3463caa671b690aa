"""Correct answers that students actually write, one answer cell each, for every coding exercise.

Each entry is ``(name, source)``: the source of an answer cell (its own imports, as a student writes them) that
defines the exercise's function correctly, in a style found in public code or in students' work. Where an idiom
comes from a public project, the comment above it names the project and the file; the code here is written for the
exercise's signature, in the shape those projects use, not copied. ``tests/test_honest_variants.py`` grades every
one over 100 hidden seeds (0 failures allowed) and, through the real sandbox, once each.

Every answer here must get full marks: a variant that fails is a fairness bug of the grader, never of the variant
(unless the variant is wrong, which the test's message then shows).
"""

from __future__ import annotations

# --------------------------------------------------------------------------- sinusoidal_table(num_positions, d_model)

SINUSOIDAL = [
    # The Annotated Transformer (harvardnlp/annotated-transformer, "PositionalEncoding"): a float32 table computed
    # "in log space" with exp, then cast up. The red team's N11 (failed 39 of 100 seeds before).
    ("annotated_transformer_float32_then_double", """
import math
import torch

def sinusoidal_table(num_positions, d_model):
    pe = torch.zeros(num_positions, d_model)
    position = torch.arange(0, num_positions).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe.double()
"""),
    # The Annotated Transformer's buffer as its module keeps it, with the batch axis of pe.unsqueeze(0): shape
    # (1, num_positions, d_model), the same entries in the same order.
    ("annotated_transformer_buffer_unsqueezed", """
import math
import torch

def sinusoidal_table(num_positions, d_model):
    pe = torch.zeros(num_positions, d_model)
    position = torch.arange(0, num_positions).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe.unsqueeze(0).requires_grad_(False)
"""),
    # The PyTorch tutorial's PositionalEncoding (pytorch/tutorials, beginner_source/transformer_tutorial.py): a
    # (max_len, 1, d_model) float32 buffer, squeezed; then converted with .numpy().astype('float64') (student G1).
    ("pytorch_tutorial_float32_numpy64", """
import math
import torch

def sinusoidal_table(num_positions, d_model):
    position = torch.arange(num_positions).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(num_positions, 1, d_model)
    pe[:, 0, 0::2] = torch.sin(position * div_term)
    pe[:, 0, 1::2] = torch.cos(position * div_term)
    return pe[:, 0, :].numpy().astype("float64")
"""),
    # Hugging Face's inverse frequencies (transformers' rotary embeddings: 1 / base ** (arange(0, d, 2).float() / d))
    # with an outer product, interleaved by stacking; float32, returned as float32.
    ("hf_inv_freq_outer_float32", """
import torch

def sinusoidal_table(num_positions, d_model):
    inv_freq = 1.0 / (10000 ** (torch.arange(0, d_model, 2).float() / d_model))
    angles = torch.outer(torch.arange(num_positions).float(), inv_freq)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)
"""),
    # d2l.ai's PositionalEncoding (d2l-ai/d2l-en, "Self-Attention and Positional Encoding"): positions divided by
    # 10000 ** (arange(0, d, 2) / d), then sin into the even and cos into the odd columns; float64 NumPy here.
    ("d2l_numpy_float64", """
import numpy as np

def sinusoidal_table(num_positions, d_model):
    X = np.arange(num_positions, dtype=np.float64).reshape(-1, 1) / np.power(
        10000, np.arange(0, d_model, 2, dtype=np.float64) / d_model)
    P = np.zeros((num_positions, d_model))
    P[:, 0::2] = np.sin(X)
    P[:, 1::2] = np.cos(X)
    return P
"""),
    # The "get_sinusoid_encoding_table" idiom (jadore801120/attention-is-all-you-need-pytorch, transformer/Models.py):
    # an angle per (position, dimension) with 2 * (j // 2) / d, then sin on even and cos on odd dimensions.
    ("position_angle_vec_numpy", """
import numpy as np
import torch

def sinusoidal_table(num_positions, d_model):
    def get_position_angle_vec(position):
        return [position / np.power(10000, 2 * (hid_j // 2) / d_model) for hid_j in range(d_model)]

    table = np.array([get_position_angle_vec(pos_i) for pos_i in range(num_positions)])
    table[:, 0::2] = np.sin(table[:, 0::2])
    table[:, 1::2] = np.cos(table[:, 1::2])
    return torch.FloatTensor(table)
"""),
    # A student's nested lists with the math module (the formula typed from the paper), returned as a list.
    ("nested_lists_math", """
import math

def sinusoidal_table(num_positions, d_model):
    table = []
    for p in range(num_positions):
        row = []
        for i in range(d_model // 2):
            angle = p / 10000 ** (2 * i / d_model)
            row += [math.sin(angle), math.cos(angle)]
        table.append(row)
    return table
"""),
    # NumPy in float32 throughout (a student who set dtype=np.float32 to save memory), cast up at the end.
    ("numpy_float32_then_float64", """
import numpy as np

def sinusoidal_table(num_positions, d_model):
    p = np.arange(num_positions, dtype=np.float32)[:, None]
    w = np.float32(10000) ** (-np.arange(0, d_model, 2, dtype=np.float32) / np.float32(d_model))
    out = np.empty((num_positions, d_model), dtype=np.float32)
    out[:, 0::2] = np.sin(p * w)
    out[:, 1::2] = np.cos(p * w)
    return out.astype(np.float64)
"""),
    # GPT-J's fixed_pos_embedding (kingoflolz/mesh-transformer-jax, mesh_transformer/layers.py): the sinusoid input by
    # einsum('i , j -> i j'), then sin and cos interleaved with repeat_interleave-free slicing; float32.
    ("gptj_einsum_float32", """
import torch

def sinusoidal_table(num_positions, d_model):
    inv_freq = 1.0 / (10000 ** (torch.arange(0, d_model, 2) / d_model))
    sinusoid_inp = torch.einsum("i , j -> i j", torch.arange(num_positions, dtype=torch.float), inv_freq).float()
    table = torch.empty(num_positions, d_model)
    table[:, ::2], table[:, 1::2] = torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)
    return table.to(torch.float64)
"""),
    # fairseq's sinusoidal embedding (facebookresearch/fairseq, fairseq/modules/sinusoidal_positional_embedding.py)
    # builds [sin | cos] halves; adapted correctly to this exercise: the frequencies of the paper and the halves
    # interleaved with a reshape.
    ("fairseq_halves_interleaved", """
import math
import torch

def sinusoidal_table(num_positions, d_model):
    half_dim = d_model // 2
    emb = torch.exp(torch.arange(half_dim, dtype=torch.float) * -(2 * math.log(10000) / d_model))
    emb = torch.arange(num_positions, dtype=torch.float).unsqueeze(1) * emb.unsqueeze(0)
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1)
    return emb.view(num_positions, 2, half_dim).transpose(1, 2).reshape(num_positions, d_model).double()
"""),
    # A student who prints what happens (a line per position), in float64 torch.
    ("prints_every_row", """
import torch

def sinusoidal_table(num_positions, d_model):
    pe = torch.zeros(num_positions, d_model, dtype=torch.float64)
    freqs = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    for pos in range(num_positions):
        pe[pos, 0::2] = torch.sin(pos * freqs)
        pe[pos, 1::2] = torch.cos(pos * freqs)
        print(f"position {pos}: first entries {pe[pos, :4].tolist()}")
    return pe
"""),
    # Slow but within limits: every entry on its own, into a NumPy array.
    ("entry_by_entry_numpy", """
import math
import numpy as np

def sinusoidal_table(num_positions, d_model):
    out = np.zeros((num_positions, d_model))
    for pos in range(num_positions):
        for i in range(0, d_model, 2):
            angle = pos / (10000 ** (i / d_model))
            out[pos, i] = math.sin(angle)
            out[pos, i + 1] = math.cos(angle)
    return out
"""),
]

# --------------------------------------------------------------------------- shift_matrix(k, d_model)

SHIFT = [
    ("blocks_math_float64", """
import math
import numpy as np

def shift_matrix(k, d_model):
    m = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        w = 10000 ** (-2 * i / d_model)
        c, s = math.cos(k * w), math.sin(k * w)
        m[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[c, s], [-s, c]]
    return m
"""),
    # torch.block_diag of 2x2 rotations, float32 (frequencies as the Annotated Transformer's div_term), cast up.
    ("block_diag_float32", """
import math
import torch

def shift_matrix(k, d_model):
    div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
    blocks = []
    for w in div_term:
        c, s = torch.cos(k * w), torch.sin(k * w)
        blocks.append(torch.stack([torch.stack([c, s]), torch.stack([-s, c])]))
    return torch.block_diag(*blocks).double()
"""),
    # Complex numbers: exp(i k w) gives cos and sin at once; the block written from its real and imaginary parts.
    ("complex_exponential_numpy", """
import numpy as np

def shift_matrix(k, d_model):
    w = 1.0 / 10000 ** (np.arange(0, d_model, 2) / d_model)
    z = np.exp(1j * k * w)
    m = np.zeros((d_model, d_model))
    m[0::2, 0::2] = np.diag(z.real)
    m[0::2, 1::2] = np.diag(z.imag)
    m[1::2, 0::2] = np.diag(-z.imag)
    m[1::2, 1::2] = np.diag(z.real)
    return m
"""),
    # Lists of lists, float32 torch angles (a student following the chapter's float32 tensors).
    ("lists_from_float32_angles", """
import torch

def shift_matrix(k, d_model):
    freqs = 1.0 / (10000 ** (torch.arange(0, d_model, 2).float() / d_model))
    angles = (k * freqs).tolist()
    rows = [[0.0] * d_model for _ in range(d_model)]
    for i, a in enumerate(angles):
        c, s = torch.cos(torch.tensor(a)).item(), torch.sin(torch.tensor(a)).item()
        rows[2 * i][2 * i], rows[2 * i][2 * i + 1] = c, s
        rows[2 * i + 1][2 * i], rows[2 * i + 1][2 * i + 1] = -s, c
    return rows
"""),
    # The transpose of a rotation by -k w: a student who wrote R(-kw) and checked it against PE(p + k).
    ("rotation_matrices_kron", """
import numpy as np

def shift_matrix(k, d_model):
    out = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        theta = -k / 10000 ** (2 * i / d_model)
        rotation = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
        selector = np.zeros((d_model // 2, d_model // 2))
        selector[i, i] = 1.0
        out += np.kron(selector, rotation)
    return out
"""),
]

# --------------------------------------------------------------------------- add_positional_encoding(embeddings)

ADD_PE = [
    # The Annotated Transformer's module (a float32 buffer, x + pe[:, :x.size(1)]) with Embeddings' sqrt(d_model)
    # scale, written as a function; the float32 table is promoted to float64 by the addition.
    ("annotated_transformer_buffer", """
import math
import torch

def add_positional_encoding(embeddings):
    d_model = embeddings.size(-1)
    max_len = 5000
    pe = torch.zeros(max_len, d_model)
    position = torch.arange(0, max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    pe = pe.unsqueeze(0)
    return embeddings * math.sqrt(d_model) + pe[:, : embeddings.size(1)].requires_grad_(False)
"""),
    # The statement allows the library's table: cpe.sinusoidal_encoding in its default float32.
    ("library_table_float32", """
import math
import course_pe as cpe

def add_positional_encoding(embeddings):
    batch, seq, d_model = embeddings.shape
    return math.sqrt(d_model) * embeddings + cpe.sinusoidal_encoding(seq, d_model)
"""),
    ("library_table_float64", """
import math
import torch
import course_pe as cpe

def add_positional_encoding(embeddings):
    seq, d_model = embeddings.shape[1], embeddings.shape[2]
    table = cpe.sinusoidal_encoding(seq, d_model, dtype=torch.float64)
    return embeddings * d_model ** 0.5 + table.unsqueeze(0)
"""),
    # The library module's table (not its forward, which adds it: that is the exercise).
    ("library_module_table", """
import math
import course_pe as cpe

def add_positional_encoding(embeddings):
    d_model = embeddings.shape[-1]
    encoder = cpe.SinusoidalPositionalEncoding(d_model, max_len=max(1, embeddings.shape[1]))
    return math.sqrt(d_model) * embeddings + encoder.encoding(embeddings.shape[1]).to(embeddings.dtype)
"""),
    # The PyTorch tutorial's sequence-first (max_len, 1, d_model) buffer, used correctly on a batch-first input by
    # transposing it (the fix the chapter teaches for source 003's bug).
    ("pytorch_tutorial_transposed", """
import math
import torch

def add_positional_encoding(embeddings):
    d_model = embeddings.size(2)
    position = torch.arange(embeddings.size(1)).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(embeddings.size(1), 1, d_model)
    pe[:, 0, 0::2] = torch.sin(position * div_term)
    pe[:, 0, 1::2] = torch.cos(position * div_term)
    return embeddings * math.sqrt(d_model) + pe.transpose(0, 1)
"""),
    # In place (student C4): correct for the caller here, since the grader passes copies.
    ("in_place", """
import math
import course_pe as cpe

def add_positional_encoding(embeddings):
    embeddings *= math.sqrt(embeddings.shape[-1])
    embeddings += cpe.sinusoidal_encoding(embeddings.shape[1], embeddings.shape[2]).to(embeddings.dtype)
    return embeddings
"""),
    # NumPy, a loop over the batch, returning an array.
    ("numpy_loop_over_batch", """
import numpy as np

def add_positional_encoding(embeddings):
    x = np.asarray(embeddings)
    batch, seq, d = x.shape
    pos = np.arange(seq)[:, None]
    freq = np.exp(-np.log(10000.0) * np.arange(0, d, 2) / d)
    table = np.zeros((seq, d))
    table[:, 0::2] = np.sin(pos * freq)
    table[:, 1::2] = np.cos(pos * freq)
    out = np.empty_like(x)
    for b in range(batch):
        out[b] = np.sqrt(d) * x[b] + table
    return out
"""),
    # All in float32 (a student whose model runs in float32), returned as float32.
    ("all_float32", """
import math
import torch

def add_positional_encoding(embeddings):
    x = embeddings.float()
    d = x.shape[-1]
    angles = torch.arange(x.shape[1]).float()[:, None] / torch.pow(10000.0, torch.arange(0, d, 2).float() / d)
    table = torch.stack((torch.sin(angles), torch.cos(angles)), dim=-1).reshape(x.shape[1], d)
    return x * torch.sqrt(torch.tensor(float(d))) + table
"""),
    # A module defined in the cell (nn.Module with a registered buffer, as in most codebases) and used by the function.
    ("own_module_with_buffer", """
import math
import torch
from torch import nn

class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=128):
        super().__init__()
        pe = torch.zeros(max_len, d_model, dtype=torch.float64)
        position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0), persistent=False)

    def forward(self, x):
        return x * math.sqrt(x.size(-1)) + self.pe[:, : x.size(1)]

def add_positional_encoding(embeddings):
    return PositionalEncoding(embeddings.size(-1))(embeddings)
"""),
]

# --------------------------------------------------------------------------- rope_rotation(x, positions)

ROPE = [
    # Hugging Face's inverse frequencies in float32 applied to the float64 input (red team N12: failed 100 of 100
    # seeds before), interleaved pairs rotated with slicing.
    ("hf_inv_freq_float32_on_float64", """
import torch

def rope_rotation(x, positions):
    d = x.shape[-1]
    inv_freq = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
    angles = positions[:, None] * inv_freq[None, :]
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x1 * cos - x2 * sin
    out[..., 1::2] = x1 * sin + x2 * cos
    return out
"""),
    # Meta's Llama (meta-llama/llama, llama/model.py: precompute_freqs_cis with torch.polar in complex64, then
    # apply_rotary_emb through view_as_complex on x.float() and type_as back).
    ("meta_llama_complex64", """
import torch

def precompute_freqs_cis(dim, positions, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    freqs = torch.outer(positions.float(), freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)

def rope_rotation(x, positions):
    freqs_cis = precompute_freqs_cis(x.shape[-1], positions)
    x_ = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(x_ * freqs_cis).flatten(-2).type_as(x)
"""),
    # GPT-J's rotate_every_two and apply_rotary_pos_emb (kingoflolz/mesh-transformer-jax; transformers'
    # models/gptj/modeling_gptj.py): sin and cos repeated per pair, x * cos + rotate_every_two(x) * sin.
    ("gptj_rotate_every_two", """
import torch

def rotate_every_two(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)

def rope_rotation(x, positions):
    dim = x.shape[-1]
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2) / dim))
    sinusoid_inp = torch.einsum("i , j -> i j", positions.float(), inv_freq).float()
    sin = torch.repeat_interleave(torch.sin(sinusoid_inp), 2, dim=-1)
    cos = torch.repeat_interleave(torch.cos(sinusoid_inp), 2, dim=-1)
    return x * cos + rotate_every_two(x) * sin
"""),
    # RoFormer (ZhuiyiTechnology/roformer; transformers' RoFormerSelfAttention.apply_rotary_position_embeddings): a
    # [sin | cos] sinusoidal table, sin and cos each stacked twice, and the pairs rotated by stacking (-x[1::2], x[::2]).
    ("roformer_sinusoidal_table", """
import numpy as np
import torch

def rope_rotation(x, positions):
    dim = x.shape[-1]
    position_enc = np.array([[pos / np.power(10000, 2 * (j // 2) / dim) for j in range(dim)]
                             for pos in positions.tolist()])
    sinusoidal_pos = torch.cat([torch.FloatTensor(np.sin(position_enc[:, 0::2])),
                                torch.FloatTensor(np.cos(position_enc[:, 1::2]))], dim=-1)
    sin, cos = sinusoidal_pos.chunk(2, dim=-1)
    sin_pos = torch.stack([sin, sin], dim=-1).reshape_as(sinusoidal_pos)
    cos_pos = torch.stack([cos, cos], dim=-1).reshape_as(sinusoidal_pos)
    rotate_half_x = torch.stack([-x[..., 1::2], x[..., ::2]], dim=-1).reshape_as(x)
    return x * cos_pos + rotate_half_x * sin_pos
"""),
    # lucidrains' rotary-embedding-torch (interleaved pairs: freqs repeated with "... n -> ... (n r)", r = 2, and
    # rotate_half on "(d r)" pairs), written without einops.
    ("lucidrains_rotary_interleaved", """
import torch

def rotate_half(x):
    x = x.reshape(*x.shape[:-1], -1, 2)
    x1, x2 = x.unbind(dim=-1)
    return torch.stack((-x2, x1), dim=-1).flatten(-2)

def rope_rotation(x, positions):
    dim = x.shape[-1]
    freqs = 1.0 / (10000 ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    freqs = torch.einsum("..., f -> ... f", positions.type(freqs.dtype), freqs)
    freqs = freqs.repeat_interleave(2, dim=-1)
    return (x * freqs.cos()) + (rotate_half(x) * freqs.sin())
"""),
    # Hugging Face's Llama path (transformers/models/llama/modeling_llama.py: rotate_half on the half layout, emb =
    # cat(freqs, freqs)), used on this exercise's interleaved pairs by converting to the half layout and back.
    ("hf_llama_rotate_half_via_half_layout", """
import torch

def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)

def rope_rotation(x, positions):
    dim = x.shape[-1]
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    freqs = positions[:, None].float() @ inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    half = torch.cat([x[..., 0::2], x[..., 1::2]], dim=-1)  # interleaved -> half layout
    rotated = (half * cos) + (rotate_half(half) * sin)
    out = torch.empty_like(x)
    out[..., 0::2], out[..., 1::2] = rotated[..., : dim // 2], rotated[..., dim // 2 :]  # and back
    return out
"""),
    # A rotation matrix per position (block diagonal), multiplied in float64, returned as nested lists.
    ("matrix_per_position_lists", """
import math

def rope_rotation(x, positions):
    d = x.shape[-1]
    rows = []
    for row, p in zip(x.tolist(), positions.tolist()):
        out = [0.0] * d
        for i in range(d // 2):
            theta = p * 10000 ** (-2 * i / d)
            c, s = math.cos(theta), math.sin(theta)
            a, b = row[2 * i], row[2 * i + 1]
            out[2 * i], out[2 * i + 1] = c * a - s * b, s * a + c * b
        rows.append(out)
    return rows
"""),
    # Everything in float32, returned as float32 (a model's dtype).
    ("all_float32", """
import torch

def rope_rotation(x, positions):
    x = x.float()
    half = x.shape[-1] // 2
    theta = torch.pow(10000.0, -torch.arange(half, dtype=torch.float32) * 2 / x.shape[-1])
    angle = positions.float().unsqueeze(-1) * theta
    pairs = x.view(x.shape[0], half, 2)
    a, b = pairs[..., 0], pairs[..., 1]
    return torch.stack([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], dim=-1).view_as(x)
"""),
    # NumPy float64 with complex numbers (x[2i] + i x[2i+1] times e^{i p theta}).
    ("numpy_complex128", """
import numpy as np

def rope_rotation(x, positions):
    x = np.asarray(x)
    d = x.shape[-1]
    theta = 10000.0 ** (-np.arange(0, d, 2) / d)
    z = (x[:, 0::2] + 1j * x[:, 1::2]) * np.exp(1j * np.asarray(positions)[:, None] * theta)
    out = np.empty_like(x)
    out[:, 0::2], out[:, 1::2] = z.real, z.imag
    return out
"""),
]

# --------------------------------------------------------------------------- t5_bucket(relative_position, ...)

T5 = [
    # Hugging Face's T5Attention._relative_position_bucket (transformers/models/t5/modeling_t5.py), written out: the
    # float() (float32) logarithm, .to(torch.long), torch.min with full_like.
    ("hf_t5attention", """
import math
import torch

def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1))
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets
"""),
    # Mesh TensorFlow's _relative_position_bucket (tensorflow/mesh, mesh_tensorflow/transformer/transformer_layers.py)
    # as most ports write it: n = -relative_position, ret from n < 0, torch.max for the causal case.
    ("mesh_tensorflow_port", """
import math
import torch

def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    ret = 0
    n = -relative_position
    if bidirectional:
        num_buckets //= 2
        ret += (n < 0).to(torch.long) * num_buckets
        n = torch.abs(n)
    else:
        n = torch.max(n, torch.zeros_like(n))
    max_exact = num_buckets // 2
    is_small = n < max_exact
    val_if_large = max_exact + (
        torch.log(n.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    ).long()
    val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
    ret += torch.where(is_small, n, val_if_large)
    return ret
"""),
    # lucidrains' x-transformers (RelativePositionBias._relative_position_bucket): a causal flag instead of
    # bidirectional, the same float32 logarithm.
    ("x_transformers_causal_flag", """
import math
import torch

def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    causal = not bidirectional
    ret = 0
    n = -relative_position
    if not causal:
        num_buckets //= 2
        ret += (n < 0).long() * num_buckets
        n = torch.abs(n)
    else:
        n = torch.max(n, torch.zeros_like(n))
    max_exact = num_buckets // 2
    is_small = n < max_exact
    val_if_large = max_exact + (
        torch.log(n.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    ).long()
    val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
    return ret + torch.where(is_small, n, val_if_large)
"""),
    # NumPy with a float64 logarithm.
    ("numpy_float64_log", """
import numpy as np

def t5_bucket(relative_position, bidirectional, num_buckets, max_distance):
    n = -np.asarray(relative_position, dtype=np.int64)
    ret = np.zeros_like(n)
    if bidirectional:
        num_buckets //= 2
        ret += (n < 0) * num_buckets
        n = np.abs(n)
    else:
        n = np.maximum(n, 0)
    max_exact = num_buckets // 2
    with np.errstate(divide="ignore", invalid="ignore"):
        large = max_exact + (np.log(n / max_exact) / np.log(max_distance / max_exact)
                             * (num_buckets - max_exact)).astype(np.int64)
    large = np.minimum(large, num_buckets - 1)
    return ret + np.where(n < max_exact, n, large)
"""),
    # A Python loop with math.log per offset (float64), returning a list of ints.
    ("python_loop_math_log", """
import math

def t5_bucket(relative_position, bidirectional, num_buckets, max_distance):
    out = []
    for r in relative_position.tolist():
        buckets = num_buckets // 2 if bidirectional else num_buckets
        base = buckets if (bidirectional and r > 0) else 0
        distance = abs(r) if bidirectional else max(-r, 0)
        exact = buckets // 2
        if distance < exact:
            out.append(base + distance)
        else:
            b = exact + int(math.log(distance / exact) / math.log(max_distance / exact) * (buckets - exact))
            out.append(base + min(b, buckets - 1))
    return out
"""),
    # log(n) - log(max_exact) in float32 (a rearranged logarithm rounds differently at bucket boundaries).
    ("log_difference_float32", """
import math
import torch

def t5_bucket(relative_position, bidirectional, num_buckets, max_distance):
    n = -relative_position
    offset = torch.zeros_like(n)
    if bidirectional:
        num_buckets = num_buckets // 2
        offset = (n < 0).long() * num_buckets
        n = n.abs()
    else:
        n = n.clamp(min=0)
    max_exact = num_buckets // 2
    scaled = (torch.log(n.clamp(min=1).float()) - math.log(max_exact)) / math.log(max_distance / max_exact)
    large = (max_exact + (scaled * (num_buckets - max_exact)).long()).clamp(max=num_buckets - 1)
    return offset + torch.where(n < max_exact, n, large)
"""),
    # A base-2 logarithm ratio, float32 (log2 is a common choice; the ratio of logarithms is the same number).
    ("log2_ratio_float32", """
import math
import torch

def t5_bucket(relative_position, bidirectional, num_buckets, max_distance):
    n = -relative_position
    out = torch.zeros_like(n)
    if bidirectional:
        num_buckets //= 2
        out = out + (n < 0).long() * num_buckets
        n = n.abs()
    else:
        n = n.clamp(min=0)
    max_exact = num_buckets // 2
    ratio = torch.log2(n.float().clamp(min=1) / max_exact) / math.log2(max_distance / max_exact)
    large = torch.clamp(max_exact + (ratio * (num_buckets - max_exact)).long(), max=num_buckets - 1)
    return out + torch.where(n < max_exact, n, large)
"""),
    # float64 torch logarithm, the answer returned as int32.
    ("float64_log_int32", """
import math
import torch

def t5_bucket(relative_position, bidirectional, num_buckets, max_distance):
    n = -relative_position.to(torch.int64)
    bucket = torch.zeros_like(n)
    if bidirectional:
        num_buckets //= 2
        bucket += (n < 0).long() * num_buckets
        n = n.abs()
    else:
        n = n.clamp(min=0)
    max_exact = num_buckets // 2
    log_part = torch.log(n.double().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
    large = (max_exact + (log_part * (num_buckets - max_exact)).long()).clamp(max=num_buckets - 1)
    return (bucket + torch.where(n < max_exact, n, large)).int()
"""),
]

# --------------------------------------------------------------------------- alibi_slopes(num_heads)

ALIBI = [
    # Press et al.'s get_slopes (ofirpress/attention_with_linear_biases, fairseq/models/transformer.py): the geometric
    # sequence start * ratio ** i, and for other head counts the recursion on 2 * closest_power_of_2.
    ("press_get_slopes_recursive", """
import math

def alibi_slopes(num_heads):
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]

    def get_slopes(n):
        if math.log2(n).is_integer():
            return get_slopes_power_of_2(n)
        closest_power_of_2 = 2 ** math.floor(math.log2(n))
        return get_slopes_power_of_2(closest_power_of_2) + get_slopes(2 * closest_power_of_2)[0::2][: n - closest_power_of_2]

    return get_slopes(num_heads)
"""),
    # BLOOM's build_alibi_tensor (transformers/models/bloom/modeling_bloom.py): a float32 base raised to int32 powers
    # with torch.pow, extra_base for the remaining heads; the slopes only.
    ("bloom_float32_pow", """
import math
import torch

def alibi_slopes(num_heads):
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), dtype=torch.float32)
    powers = torch.arange(1, 1 + closest_power_of_2, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))), dtype=torch.float32)
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    return slopes
"""),
    # MosaicML's gen_slopes (mosaicml/llm-foundry, llmfoundry/models/layers/attention.py): 2 ** ceil(log2 n) heads'
    # worth of slopes 1 / 2 ** m, reordered as slopes[1::2] then slopes[::2] and cut to n.
    ("mpt_gen_slopes", """
import math
import torch

def alibi_slopes(num_heads, alibi_bias_max=8):
    _n_heads = 2 ** math.ceil(math.log2(num_heads))
    m = torch.arange(1, _n_heads + 1, dtype=torch.float32)
    m = m.mul(alibi_bias_max / _n_heads)
    slopes = 1.0 / torch.pow(2, m)
    if _n_heads != num_heads:
        slopes = torch.concat([slopes[1::2], slopes[::2]])[:num_heads]
    return slopes
"""),
    # labml.ai's annotated ALiBi (labmlai/annotated_deep_learning_paper_implementations, transformers/alibi): torch.pow
    # of 2 ** (-8 / n) and, for the remaining heads, odd powers of 2 ** (-4 / n).
    ("labml_torch_pow", """
import math
import torch

def alibi_slopes(num_heads):
    n = 2 ** math.floor(math.log2(num_heads))
    m_0 = 2.0 ** (-8.0 / n)
    m = torch.pow(m_0, torch.arange(1, 1 + n))
    if n < num_heads:
        m_hat_0 = 2.0 ** (-4.0 / n)
        m_hat = torch.pow(m_hat_0, torch.arange(1, 1 + 2 * (num_heads - n), 2))
        m = torch.cat([m, m_hat])
    return m
"""),
    # lucidrains' x-transformers (AlibiPositionalBias): Press et al.'s slopes kept as a (heads, 1, 1) buffer, ready to
    # broadcast over the bias matrix.
    ("x_transformers_heads_1_1", """
import math
import torch

def alibi_slopes(num_heads):
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]

    if math.log2(num_heads).is_integer():
        slopes = get_slopes_power_of_2(num_heads)
    else:
        closest = 2 ** math.floor(math.log2(num_heads))
        slopes = get_slopes_power_of_2(closest) + get_slopes_power_of_2(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(slopes).unsqueeze(-1).unsqueeze(-1)
"""),
    # NumPy float64, the power of two found with bit operations.
    ("numpy_bit_length", """
import numpy as np

def alibi_slopes(num_heads):
    closest = 1 << (num_heads.bit_length() - 1)
    base = 2.0 ** (-8.0 * np.arange(1, closest + 1) / closest)
    extra = 2.0 ** (-8.0 * np.arange(1, 2 * closest + 1) / (2 * closest))
    return np.concatenate([base, extra[0::2][: num_heads - closest]])
"""),
    # The slopes as a float32 tensor (red team N6), from a list comprehension.
    ("float32_tensor_from_list", """
import math
import torch

def alibi_slopes(num_heads):
    closest = 2 ** int(math.log2(num_heads))
    slopes = [2 ** (-8 * (h + 1) / closest) for h in range(closest)]
    slopes += [2 ** (-8 * (h + 1) / (2 * closest)) for h in range(0, 2 * (num_heads - closest), 2)]
    return torch.tensor(slopes, dtype=torch.float32)
"""),
    # A while loop for the power of two and a printout of what it found.
    ("while_loop_and_print", """
def alibi_slopes(num_heads):
    closest = 1
    while closest * 2 <= num_heads:
        closest *= 2
    print(f"{num_heads} heads: nearest lower power of two {closest}")
    slopes = [2.0 ** (-8.0 * k / closest) for k in range(1, closest + 1)]
    k = 1
    while len(slopes) < num_heads:
        slopes.append(2.0 ** (-8.0 * k / (2 * closest)))
        k += 2
    return slopes
"""),
]

# --------------------------------------------------------------------------- half_to_interleaved(x)

HALF_TO_INTERLEAVED = [
    ("stack_flatten", """
import torch

def half_to_interleaved(x):
    half = x.shape[-1] // 2
    return torch.stack([x[..., :half], x[..., half:]], dim=-1).flatten(-2)
"""),
    # An index permutation (the way weight-conversion scripts reorder a head's dimensions).
    ("index_permutation", """
import torch

def half_to_interleaved(x):
    d = x.shape[-1]
    perm = [i // 2 + (i % 2) * (d // 2) for i in range(d)]
    return x[..., perm]
"""),
    # The inverse of transformers' permute for Llama's weights (models/llama/convert_llama_weights_to_hf.py:
    # view(..., 2, d/2).transpose): from halves back to pairs.
    ("view_transpose_reshape", """
import torch

def half_to_interleaved(x):
    d = x.shape[-1]
    return x.reshape(*x.shape[:-1], 2, d // 2).transpose(-1, -2).reshape(x.shape)
"""),
    ("numpy_slices", """
import numpy as np

def half_to_interleaved(x):
    x = np.asarray(x)
    h = x.shape[-1] // 2
    out = np.empty_like(x)
    out[..., 0::2] = x[..., :h]
    out[..., 1::2] = x[..., h:]
    return out
"""),
    # torch.zeros with the default dtype (float32): a float32 copy of the values.
    ("zeros_default_float32", """
import torch

def half_to_interleaved(x):
    out = torch.zeros(x.shape)
    h = x.shape[-1] // 2
    out[..., 0::2] = x[..., :h]
    out[..., 1::2] = x[..., h:]
    return out
"""),
    ("gather_with_index", """
import torch

def half_to_interleaved(x):
    d = x.shape[-1]
    idx = torch.arange(d).view(2, d // 2).t().reshape(-1)
    return torch.index_select(x, -1, idx)
"""),
    # A loop over the output dimensions (slow but within limits).
    ("loop_over_dimensions", """
import torch

def half_to_interleaved(x):
    d = x.shape[-1]
    columns = []
    for i in range(d // 2):
        columns.append(x[..., i])
        columns.append(x[..., i + d // 2])
    return torch.stack(columns, dim=-1)
"""),
]

# --------------------------------------------------------------------------- extrapolation_gap(losses, train_length)

EXTRAPOLATION_GAP = [
    ("nanmean_float64", """
def extrapolation_gap(loss_by_position, train_length):
    return float(loss_by_position[train_length:].nanmean() - loss_by_position[:train_length].nanmean())
"""),
    # float32 arithmetic returned as the Python float the statement asks for (red team N10, student G4).
    ("float32_as_python_float", """
import torch

def extrapolation_gap(loss_by_position, train_length):
    x = torch.as_tensor(loss_by_position).float()
    return float(x[train_length:].nanmean() - x[:train_length].nanmean())
"""),
    ("float32_item", """
import torch

def extrapolation_gap(loss_by_position, train_length):
    x = loss_by_position.to(torch.float32)
    inside, beyond = x[:train_length], x[train_length:]
    inside, beyond = inside[~torch.isnan(inside)], beyond[~torch.isnan(beyond)]
    return (beyond.mean() - inside.mean()).item()
"""),
    ("numpy_nanmean", """
import numpy as np

def extrapolation_gap(loss_by_position, train_length):
    losses = np.asarray(loss_by_position)
    return float(np.nanmean(losses[train_length:]) - np.nanmean(losses[:train_length]))
"""),
    ("loop_math_isnan", """
import math

def extrapolation_gap(loss_by_position, train_length):
    inside, beyond = [], []
    for position, loss in enumerate(loss_by_position.tolist()):
        if math.isnan(loss):
            continue
        (inside if position < train_length else beyond).append(loss)
    return sum(beyond) / len(beyond) - sum(inside) / len(inside)
"""),
    # Sums accumulated in float32 in a Python loop (the least precise reasonable way).
    ("float32_loop_sums", """
import torch

def extrapolation_gap(loss_by_position, train_length):
    values = torch.as_tensor(loss_by_position, dtype=torch.float32)
    total_in, n_in, total_out, n_out = torch.tensor(0.0), 0, torch.tensor(0.0), 0
    for i, v in enumerate(values):
        if torch.isnan(v):
            continue
        if i < train_length:
            total_in, n_in = total_in + v, n_in + 1
        else:
            total_out, n_out = total_out + v, n_out + 1
    return float(total_out / n_out - total_in / n_in)
"""),
    ("statistics_fmean", """
import math
import statistics

def extrapolation_gap(loss_by_position, train_length):
    values = [float(v) for v in loss_by_position]
    keep = lambda part: [v for v in part if not math.isnan(v)]
    return statistics.fmean(keep(values[train_length:])) - statistics.fmean(keep(values[:train_length]))
"""),
    # Means kept with keepdim: a tensor of shape (1,) (the same number).
    ("keepdim_means", """
import torch

def extrapolation_gap(loss_by_position, train_length):
    x = loss_by_position.unsqueeze(0)
    return (torch.nanmean(x[:, train_length:], dim=1, keepdim=False)
            - torch.nanmean(x[:, :train_length], dim=1, keepdim=False))
"""),
    # A 0-d tensor instead of a Python float (accepted: a number is a number).
    ("zero_dim_tensor", """
import torch

def extrapolation_gap(loss_by_position, train_length):
    return torch.nanmean(loss_by_position[train_length:]) - torch.nanmean(loss_by_position[:train_length])
"""),
]

#: exercise id -> its variants
VARIANTS: dict[str, list[tuple[str, str]]] = {
    "sinusoidal_table": SINUSOIDAL,
    "shift_matrix": SHIFT,
    "add_positional_encoding": ADD_PE,
    "rope_rotation": ROPE,
    "t5_bucket": T5,
    "alibi_slopes": ALIBI,
    "half_to_interleaved": HALF_TO_INTERLEAVED,
    "extrapolation_gap": EXTRAPOLATION_GAP,
}
