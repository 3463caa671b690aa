"""Every RoPE type of Hugging Face transformers (5.23, pinned in requirements.txt), against course_pe.

Differential tests: one configuration dict goes to transformers (its config class, then ``ROPE_INIT_FUNCTIONS`` or the
model's rotary module) and to :func:`course_pe.rope_config_from_hf`; the frequencies, the attention factor and the
cos/sin tables must agree. Hypothesis draws the configurations (head widths, bases, factors, original lengths,
partial rotary factors, current lengths on both sides of the original length); the released configurations of
Phi-3, DeepSeek-V2/V3, gpt-oss, Gemma 3 and Llama 4 Scout are checked module to module.

Tolerance. transformers computes frequencies in float32, course_pe in float64. The float32 exponent ``2i/d`` is off
by up to ``2**-24`` (relative), which moves ``base ** (2i/d)`` by up to ``ln(base) * 2**-24`` (relative); the power,
the reciprocal and the scalings add a few roundings of ``2**-24``; where a pair blends its interpolated and its
extrapolated frequency (YaRN's ramp, Llama 3's band), a float32 error in the blend weight is multiplied by the spread
``factor`` between the two. :func:`freq_rtol` is that bound, and no looser.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
import transformers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import (
    DeepseekV2Config,
    DeepseekV3Config,
    Gemma3TextConfig,
    GptOssConfig,
    Llama4TextConfig,
    LlamaConfig,
    Phi3Config,
)
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.deepseek_v2.modeling_deepseek_v2 import DeepseekV2RotaryEmbedding
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention, DeepseekV3RotaryEmbedding
from transformers.models.gemma3.modeling_gemma3 import Gemma3RotaryEmbedding
from transformers.models.gpt_oss.modeling_gpt_oss import GptOssRotaryEmbedding
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
from transformers.models.llama4.modeling_llama4 import Llama4TextRotaryEmbedding
from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding

import course_pe as cpe
from course_pe import RotaryEmbedding
from course_pe.rope_scaling import HF_ROPE_TYPES, rope_config_from_hf

transformers.logging.set_verbosity_error()  # its config validation warns about odd but legal drawn values

HYPOTHESIS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def test_every_transformers_rope_type_is_read():
    """A rope type added to transformers' modeling_rope_utils (a new pin) fails here until course_pe reads it."""
    assert set(ROPE_INIT_FUNCTIONS) | {"default"} <= set(HF_ROPE_TYPES)


def freq_rtol(base: float, blend: float = 1.0) -> float:
    """The float32-versus-float64 bound of the module docstring: ``(ln(base) + 8) * 2**-24 * (1 + blend)``."""
    return (math.log(base) + 8.0) * 2.0**-24 * (1.0 + blend)


def hf_frequencies(config_dict: dict, *, seq_len: int | None = None, cls=LlamaConfig,
                   layer_type: str | None = None) -> tuple[torch.Tensor, float]:
    config = cls(**copy.deepcopy(config_dict))
    params = config.rope_parameters[layer_type] if layer_type else config.rope_parameters
    rope_type = params["rope_type"]
    if rope_type in ("default", "axial"):
        # transformers has no shared function for the default type: each model's rotary module has its own; Phi-3's
        # honours partial_rotary_factor, Gemma 3's takes the layer type
        if layer_type:
            return Gemma3RotaryEmbedding.compute_default_rope_parameters(config, layer_type=layer_type)
        return Phi3RotaryEmbedding.compute_default_rope_parameters(config)
    kwargs = {"layer_type": layer_type} if layer_type else {}
    return ROPE_INIT_FUNCTIONS[rope_type](config, seq_len=seq_len, **kwargs)


def assert_same_frequencies(config_dict: dict, *, seq_len: int | None = None, cls=LlamaConfig,
                            layer_type: str | None = None, blend: float = 1.0) -> None:
    theirs, their_factor = hf_frequencies(config_dict, seq_len=seq_len, cls=cls, layer_type=layer_type)
    rope = rope_config_from_hf(copy.deepcopy(config_dict), layer_type=layer_type)
    ours, our_factor = rope.frequencies(seq_len=seq_len, dtype=torch.float64)
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    torch.testing.assert_close(ours, theirs.double(), rtol=freq_rtol(rope.base, blend), atol=0)
    assert our_factor == pytest.approx(their_factor, rel=1e-15, abs=0)
    # reference numerics: transformers' float32 computation, bit for bit
    reference, reference_factor = rope.frequencies(seq_len=seq_len, angle_dtype=torch.float32)
    assert reference.dtype == theirs.dtype == torch.float32 and torch.equal(reference, theirs)
    assert reference_factor == their_factor


# ----------------------------------------------------------------------------- drawn configurations

shapes = st.sampled_from([(256, 4), (512, 8), (640, 8), (768, 8), (3072, 32), (4096, 32), (2048, 8), (512, 32)])
bases = st.one_of(st.sampled_from([10000.0, 500000.0, 1e6, 150000.0, 5e6]), st.floats(2.0, 1e7))
factors = st.one_of(st.sampled_from([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 40.0]), st.floats(1.0, 64.0))
originals = st.one_of(st.sampled_from([2048, 4096, 8192, 32768]), st.integers(16, 2**17))
prfs = st.sampled_from([1.0, 1.0, 0.5, 0.25, 0.75])


@st.composite
def base_config(draw, *, partial: bool = True, explicit_head_dim: bool | None = None) -> dict:
    hidden, heads = draw(shapes)
    config = {"hidden_size": hidden, "num_attention_heads": heads}
    if explicit_head_dim if explicit_head_dim is not None else draw(st.booleans()):
        config["head_dim"] = draw(st.sampled_from([32, 64, 128, 256]))
    head_dim = config.get("head_dim", hidden // heads)
    if partial:
        prf = draw(prfs.filter(lambda p: int(head_dim * p) % 2 == 0 and int(head_dim * p) >= 2))
        if prf != 1.0:
            config["partial_rotary_factor"] = prf
    return config


@given(config=base_config(explicit_head_dim=False), base=bases, legacy=st.booleans())
@HYPOTHESIS
def test_default(config, base, legacy):
    if legacy:
        config |= {"rope_theta": base, "rope_scaling": None, "max_position_embeddings": 4096}
    else:
        config |= {"rope_parameters": {"rope_type": "default", "rope_theta": base}, "max_position_embeddings": 4096}
    assert_same_frequencies(config, cls=Phi3Config, blend=0.0)


@given(config=base_config(), base=bases, factor=factors, key=st.sampled_from(["rope_type", "type"]))
@HYPOTHESIS
def test_linear(config, base, factor, key):
    config |= {"rope_parameters": {key: "linear", "factor": factor, "rope_theta": base}, "max_position_embeddings": 4096}
    assert_same_frequencies(config, blend=0.0)


@given(config=base_config(), base=bases, factor=factors, length=st.integers(1, 2**16), max_len=originals)
@HYPOTHESIS
def test_dynamic(config, base, factor, length, max_len):
    config |= {"rope_scaling": {"rope_type": "dynamic", "factor": factor}, "rope_theta": base,
               "max_position_embeddings": max_len}
    for seq_len in (None, length, max_len, max_len + length):
        assert_same_frequencies(config, seq_len=seq_len, blend=0.0)


@given(config=base_config(), base=bases, factor=factors, original=originals,
       betas=st.sampled_from([(32.0, 1.0), (16.0, 2.0), (64.0, 0.5), (None, None), (0, 0)]),
       truncate=st.sampled_from([None, True, False]),
       temperature=st.sampled_from(["default", "attention_factor", "mscale", "mscale_only", "zero_all_dim"]),
       implicit_factor=st.booleans())
@HYPOTHESIS
def test_yarn(config, base, factor, original, betas, truncate, temperature, implicit_factor):
    params = {"rope_type": "yarn", "factor": factor, "rope_theta": base, "original_max_position_embeddings": original}
    if betas[0] is not None:
        params |= {"beta_fast": betas[0], "beta_slow": betas[1]}  # 0 means "use the default" to transformers
    if truncate is not None:
        params["truncate"] = truncate
    params |= {
        "default": {}, "attention_factor": {"attention_factor": 1.25}, "mscale": {"mscale": 0.707, "mscale_all_dim": 1.0},
        "mscale_only": {"mscale": 0.707}, "zero_all_dim": {"mscale": 0.9, "mscale_all_dim": 0.0},
    }[temperature]
    config |= {"rope_parameters": params, "max_position_embeddings": int(original * factor) + 1}
    if implicit_factor:  # DeepSeek-style configs may leave factor out: max_position_embeddings / original
        params["factor"] = None
        config["max_position_embeddings"] = original * round(factor)
    assert_same_frequencies(config, blend=factor if params["factor"] else round(factor))


@given(config=base_config(), base=bases, original=originals, ratio=st.integers(1, 64), seed=st.integers(0, 10**6),
       where=st.sampled_from(["inside", "top_level", "factor", "attention_factor"]))
@HYPOTHESIS
def test_longrope(config, base, original, ratio, seed, where):
    head_dim = config.get("head_dim", config["hidden_size"] // config["num_attention_heads"])
    pairs = int(head_dim * config.get("partial_rotary_factor", 1.0)) // 2
    g = torch.Generator().manual_seed(seed)
    short = (1.0 + 0.1 * torch.rand(pairs, generator=g, dtype=torch.float64)).tolist()
    long = (1.0 + 60.0 * torch.rand(pairs, generator=g, dtype=torch.float64)).tolist()
    params = {"rope_type": "longrope", "rope_theta": base, "short_factor": short, "long_factor": long}
    config["max_position_embeddings"] = original * ratio
    if where == "top_level":  # Phi-3 keeps original_max_position_embeddings at the top level; it has priority
        config["original_max_position_embeddings"] = original
        params["original_max_position_embeddings"] = original * 2
    else:
        params["original_max_position_embeddings"] = original
    if where == "factor":
        params["factor"] = 1.0 + ratio / 3
    if where == "attention_factor":
        params["attention_factor"] = 1.1
    config["rope_parameters"] = params
    for seq_len in (None, 1, original, original + 1, original * ratio):
        assert_same_frequencies(config, seq_len=seq_len, blend=0.0)


@given(config=base_config(), base=bases, factor=factors, original=originals,
       band=st.sampled_from([(1.0, 4.0), (2.0, 8.0), (0.5, 3.0), (1.0, 1.0), (1.0, 32.0)]))
@HYPOTHESIS
def test_llama3(config, base, factor, original, band):
    config |= {"rope_parameters": {"rope_type": "llama3", "factor": factor, "rope_theta": base,
                                   "low_freq_factor": band[0], "high_freq_factor": band[1],
                                   "original_max_position_embeddings": original},
               "max_position_embeddings": 2 * original}
    assert_same_frequencies(config, blend=factor)


@given(config=base_config(partial=False, explicit_head_dim=True), base=bases,
       prf=st.sampled_from([0.0, 0.25, 0.5, 0.3, 1.0]), factor=st.sampled_from([None, 1.0, 2.0, 8.0]))
@HYPOTHESIS
def test_proportional(config, base, prf, factor):
    params = {"rope_type": "proportional", "rope_theta": base, "partial_rotary_factor": prf}
    if factor is not None:
        params["factor"] = factor
    config |= {"rope_parameters": params, "max_position_embeddings": 4096}
    assert_same_frequencies(config, blend=0.0)
    inv, _ = rope_config_from_hf(config).frequencies()
    assert int((inv > 0).sum()) == int(prf * config["head_dim"] // 2)  # the other pairs never turn


def test_axial_reads_mrope_section():
    config = {"hidden_size": 3584, "num_attention_heads": 28, "max_position_embeddings": 32768,
              "rope_parameters": {"rope_type": "axial", "rope_theta": 1e6, "mrope_section": [16, 24, 24]}}
    rope = rope_config_from_hf(config)
    assert rope.mrope_section == cpe.QWEN2_VL_MROPE_SECTION and rope.scaling is None
    torch.testing.assert_close(rope.frequencies(dtype=torch.float64)[0],
                               cpe.rope_frequencies(128, base=1e6, dtype=torch.float64)[0], rtol=0, atol=0)


# ----------------------------------------------------------------------------- released configurations, module to module


def _cos_sin(module: torch.nn.Module, positions: torch.Tensor, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of a transformers rotary module, one value per pair: ``(seq, pairs)``."""
    x = torch.zeros(1, dtype=torch.float32)
    out = module(x, positions[None], **kwargs)
    if isinstance(out, torch.Tensor):  # complex freqs_cis (Llama 4, DeepSeek-V2)
        return out[0].real, out[0].imag
    cos, sin = out[0][0], out[1][0]
    pairs = module.inv_freq.shape[0] if hasattr(module, "inv_freq") else cos.shape[-1] // 2
    return cos[..., :pairs], sin[..., :pairs]


def assert_module_matches(ours: cpe.RotaryEmbedding, theirs: torch.nn.Module, positions: torch.Tensor,
                          rtol: float, **kwargs) -> None:
    """Our float64 cos/sin against theirs (float32 angles): elementwise within the error float32 angles make,
    ``|p theta| * (rtol + 2**-23) + 2**-23`` (a float32 product is off by half an ulp of ``|p theta|``, and theta
    itself by ``rtol``)."""
    cos, sin = ours.cos_sin(positions, seq_len=int(positions.max()) + 1)
    hf_cos, hf_sin = _cos_sin(theirs, positions, **kwargs)
    inv, factor = ours._inv_freq64, ours.attention_factor
    bound = (positions.double()[:, None] * inv[None, :]).abs() * (rtol + 2.0**-23) * factor + 2.0**-23 * factor
    assert ((cos - hf_cos.double()).abs() <= bound).all() and ((sin - hf_sin.double()).abs() <= bound).all()
    # with angle_dtype=torch.float32 the same module reproduces transformers' tables bit for bit (the complex
    # modules' torch.polar computes cos and sin by another routine: one unit in the last place at most)
    reference = RotaryEmbedding(ours.head_dim, base=ours.base, scaling=ours.scaling, rotary_dim=ours.rotary_dim,
                                angle_dtype=torch.float32)
    ref_cos, ref_sin = reference.cos_sin(positions, seq_len=int(positions.max()) + 1)
    if isinstance(theirs(torch.zeros(1), positions[None][:, :1], **kwargs), torch.Tensor):
        ulp = 2.0**-23 * factor
        assert (ref_cos.float() - hf_cos).abs().max() <= ulp and (ref_sin.float() - hf_sin).abs().max() <= ulp
    else:
        assert torch.equal(ref_cos.float(), hf_cos) and torch.equal(ref_sin.float(), hf_sin)


POSITIONS = torch.tensor([0, 1, 2, 17, 255, 1000, 4095, 4096, 4097, 8191, 8192, 8193, 20000, 65535, 131071])


def phi3_mini_128k() -> dict:
    """Phi-3-mini-128k-instruct's shape (hidden 3072, 32 heads of 96, original 4096, maximum 131072, longrope);
    its 48 short and long factors are drawn here (the check is of the computation, not of the released numbers)."""
    g = torch.Generator().manual_seed(0)
    return {"hidden_size": 3072, "num_attention_heads": 32, "max_position_embeddings": 131072,
            "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
            "rope_scaling": {"type": "longrope",
                             "short_factor": (1.0 + 0.05 * torch.rand(48, generator=g, dtype=torch.float64)).tolist(),
                             "long_factor": (1.0 + 40.0 * torch.rand(48, generator=g, dtype=torch.float64)).tolist()}}


def test_phi3_longrope_module_switches_at_the_original_length():
    config = phi3_mini_128k()
    rope = rope_config_from_hf(config)
    assert isinstance(rope.scaling, cpe.LongRoPEScaling) and rope.scaling.factor == 32.0
    assert rope.scaling.default_attention_factor == pytest.approx(math.sqrt(1 + math.log(32) / math.log(4096)))
    ours = rope.rotary_embedding()
    for limit in (4096, 4097, 131072):  # short factors up to 4096 positions, long beyond
        positions = POSITIONS[POSITIONS < limit]
        theirs = Phi3RotaryEmbedding(Phi3Config(**copy.deepcopy(config)))
        assert_module_matches(ours, theirs, positions, freq_rtol(10000.0))
    short = rope_config_from_hf(config).frequencies(seq_len=4096)[0]
    long = rope_config_from_hf(config).frequencies(seq_len=4097)[0]
    assert not torch.allclose(short, long)


@pytest.mark.parametrize("version,mscale", [("V2", 0.707), ("V3", 1.0)])
def test_deepseek_yarn_temperature(version, mscale):
    """DeepSeek's released yarn block: factor 40 from 4096, beta 32/1, mscale = mscale_all_dim. The cos/sin factor
    is exactly 1 and the softmax scale carries the whole temperature: x1.59 (V2) and x1.87 (V3), the numbers in
    YaRNScaling's docstring."""
    config = {"hidden_size": 5120 if version == "V2" else 7168, "num_attention_heads": 128,
              "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "kv_lora_rank": 512,
              "q_lora_rank": 1536, "max_position_embeddings": 163840, "rope_theta": 10000.0,
              "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                               "beta_fast": 32, "beta_slow": 1, "mscale": mscale, "mscale_all_dim": mscale}}
    rope = rope_config_from_hf(config)
    assert rope.head_dim == 64 and rope.frequencies()[1] == 1.0
    cls, module = (DeepseekV2Config, DeepseekV2RotaryEmbedding) if version == "V2" else \
        (DeepseekV3Config, DeepseekV3RotaryEmbedding)
    hf_config = cls(**copy.deepcopy(config))
    assert_module_matches(rope.rotary_embedding(), module(hf_config), POSITIONS, freq_rtol(1e4, 40.0))
    multiplier = cpe.yarn_softmax_scale(192, rope.scaling) * math.sqrt(192)
    assert round(multiplier, 2) == {"V2": 1.59, "V3": 1.87}[version]
    assert f"x{multiplier:.2f}" in cpe.YaRNScaling.__doc__
    if version == "V3":  # transformers' attention module: the same softmax scale
        attention = DeepseekV3Attention(hf_config, layer_idx=0)
        assert attention.scaling == pytest.approx(cpe.yarn_softmax_scale(192, rope.scaling), rel=1e-15)


def test_gpt_oss_yarn_without_truncation():
    config = GptOssConfig().to_dict()  # transformers' defaults are gpt-oss's: yarn 32 from 4096, truncate false
    rope = rope_config_from_hf(config)
    assert rope.scaling.truncate is False and rope.base == 150000.0 and rope.scaling.factor == 32.0
    assert_module_matches(rope.rotary_embedding(), GptOssRotaryEmbedding(GptOssConfig()), POSITIONS,
                          freq_rtol(150000.0, 32.0))
    truncated = cpe.YaRNScaling(32.0, 4096, truncate=True)
    assert not torch.equal(rope.frequencies()[0], cpe.rope_frequencies(64, base=150000.0, scaling=truncated)[0])


@pytest.mark.parametrize("form", ["legacy", "nested"])
def test_gemma3_two_layer_types(form):
    if form == "legacy":
        config = {"hidden_size": 2560, "num_attention_heads": 8, "head_dim": 256, "max_position_embeddings": 131072,
                  "rope_theta": 1e6, "rope_local_base_freq": 1e4,
                  "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
    else:
        config = {"hidden_size": 2560, "num_attention_heads": 8, "head_dim": 256, "max_position_embeddings": 131072,
                  "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                                      "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}
    theirs = Gemma3RotaryEmbedding(Gemma3TextConfig(**copy.deepcopy(config)))
    for layer_type, base in (("full_attention", 1e6), ("sliding_attention", 1e4)):
        rope = rope_config_from_hf(config, layer_type=layer_type)
        assert rope.base == base and isinstance(rope.scaling, cpe.LinearScaling) == (layer_type == "full_attention")
        assert_same_frequencies(config, cls=Gemma3TextConfig, layer_type=layer_type, blend=0.0)
        assert_module_matches(rope.rotary_embedding(), theirs, POSITIONS, freq_rtol(base), layer_type=layer_type)
    with pytest.raises(ValueError, match="layer_type"):
        rope_config_from_hf(config if form == "nested" else {**config, "rope_parameters": {
            "full_attention": {"rope_type": "default"}, "sliding_attention": {"rope_type": "default"}}})


def test_llama4_scout_hard_switch():
    """Llama 4 Scout: llama3 scaling with low_freq_factor = high_freq_factor = 1 (factor 16 from 8192), complex
    (interleaved) rotation in transformers."""
    config = {"hidden_size": 5120, "num_attention_heads": 40, "head_dim": 128, "max_position_embeddings": 10485760,
              "rope_theta": 500000.0,
              "rope_scaling": {"factor": 16.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0,
                               "original_max_position_embeddings": 8192, "rope_type": "llama3"}}
    rope = rope_config_from_hf(config)
    assert rope.scaling == cpe.Llama3Scaling(16.0, 8192, 1.0, 1.0)
    theirs = Llama4TextRotaryEmbedding(Llama4TextConfig(**copy.deepcopy(config)))
    assert_module_matches(rope.rotary_embedding(layout="interleaved"), theirs, POSITIONS, freq_rtol(5e5, 16.0))
    assert_same_frequencies(config, blend=16.0)


def test_llama31_module():
    config = {"hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072, "rope_theta": 5e5,
              "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 8192, "rope_type": "llama3"}}
    theirs = LlamaRotaryEmbedding(LlamaConfig(**copy.deepcopy(config)))
    assert_module_matches(rope_config_from_hf(config).rotary_embedding(), theirs, POSITIONS, freq_rtol(5e5, 8.0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_float32_reference_rotation_is_transformers_bit_for_bit(dtype):
    """angle_dtype=torch.float32 with the half layout: q and k rotated exactly as transformers' Llama rotates them
    (its cos/sin cast to the input dtype, then q * cos + rotate_half(q) * sin in that dtype)."""
    config = {"hidden_size": 512, "num_attention_heads": 4, "max_position_embeddings": 8192, "rope_theta": 5e5,
              "rope_scaling": {"rope_type": "linear", "factor": 4.0}}
    theirs = LlamaRotaryEmbedding(LlamaConfig(**copy.deepcopy(config)))
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 300, 128, generator=g).to(dtype)
    positions = torch.randint(0, 200000, (2, 300), generator=g)
    cos, sin = theirs(q, positions)
    hf_q, _ = apply_rotary_pos_emb(q, q, cos, sin)
    ours = rope_config_from_hf(config).rotary_embedding(angle_dtype=torch.float32)
    assert torch.equal(ours(q, positions), hf_q)
    inv = theirs.inv_freq
    assert torch.equal(cpe.apply_rope(q, positions, inv_freq=inv, layout="half", angle_dtype=torch.float32), hf_q)
    exact = rope_config_from_hf(config).rotary_embedding()(q, positions)
    assert not torch.equal(exact, hf_q)  # the default computes other (exact) angles


# ----------------------------------------------------------------------------- what the reader refuses


@pytest.mark.parametrize("config,match", [
    ({"rope_parameters": {"rope_type": "ntk_alpha"}, "head_dim": 64}, "ntk_alpha"),
    ({"rope_parameters": {"rope_type": "linear"}, "head_dim": 64}, "factor"),
    ({"rope_parameters": {"rope_type": "llama3", "factor": 8.0}, "head_dim": 64}, "original_max_position_embeddings"),
    ({"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}}, "head_dim"),
    ({"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.3}, "head_dim": 64}, "rotary width"),
    ({"rope_parameters": "linear", "head_dim": 64}, "rope_parameters"),
    ({"rope_parameters": {"full_attention": {}, "sliding_attention": {}}, "head_dim": 64}, "layer_type"),
])
def test_reader_names_what_is_missing(config, match):
    with pytest.raises((TypeError, ValueError), match=match):
        rope_config_from_hf(config)


# ----------------------------------------------------------------------------- found by mutation testing: the reader's rules


def test_reader_defaults_and_precedence():
    base = {"head_dim": 16, "max_position_embeddings": 4096}
    # original length: the parameters', else max_position_embeddings (transformers' setdefault)
    rope = rope_config_from_hf({**base, "rope_parameters": {"rope_type": "yarn", "factor": 4.0}})
    assert rope.scaling.original_max_positions == 4096 and rope.max_positions == 4096
    # rope_theta: the parameters' wins over the top level, the top level over default_base
    assert rope_config_from_hf({**base, "rope_theta": 5.0, "rope_parameters": {"rope_theta": 7.0}}).base == 7.0
    assert rope_config_from_hf({**base, "rope_theta": 5.0}).base == 5.0
    assert rope_config_from_hf(base, default_base=123.0).base == 123.0
    assert rope_config_from_hf(base).base == 10000.0
    # partial_rotary_factor: the parameters', else the top level's
    assert rope_config_from_hf({**base, "partial_rotary_factor": 0.5}).rotary_dim == 8
    assert rope_config_from_hf({**base, "partial_rotary_factor": 0.5,
                                "rope_parameters": {"partial_rotary_factor": 0.25}}).rotary_dim == 4
    assert rope_config_from_hf({**base, "partial_rotary_factor": None}).rotary_dim == 16
    # Gemma 3's legacy local base only for the sliding layers; a flat config accepts the layer types it declares
    gemma = {**base, "rope_theta": 1e6, "rope_local_base_freq": 1e4, "rope_scaling": {"rope_type": "linear", "factor": 8}}
    sliding = rope_config_from_hf(gemma, layer_type="sliding_attention")
    assert sliding.base == 1e4 and sliding.scaling is None and sliding.rope_type == "default"
    assert rope_config_from_hf({**base, "layer_types": ["chunked"]}, layer_type="chunked").rope_type == "default"
    with pytest.raises(ValueError, match=r"^layer_type 'full_attention' is not a layer type of this config \('chunked'\); "
                                         r"its rope parameters are not nested by layer type$"):
        rope_config_from_hf({**base, "layer_types": ["chunked"]}, layer_type="full_attention")
    # a nested config with one entry needs no layer_type
    one = {**base, "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 2.0}}}
    assert rope_config_from_hf(one).scaling == cpe.LinearScaling(2.0)
    nested_none = {**base, "rope_parameters": {"full_attention": None, "sliding_attention": {"rope_theta": 3.0}}}
    assert rope_config_from_hf(nested_none, layer_type="full_attention").rope_type == "default"
    assert rope_config_from_hf(nested_none, layer_type="sliding_attention").base == 3.0
    # partial rotary reaches the module
    module = rope_config_from_hf({**base, "partial_rotary_factor": 0.5}).rotary_embedding()
    assert module.rotary_dim == 8 and module.head_dim == 16 and module.layout == "half"


@pytest.mark.parametrize("config,kwargs,error,message", [
    ([("head_dim", 8)], {}, TypeError, r"config must be a mapping \(the parsed config.json\), got list$"),
    ({"head_dim": 8}, {"layer_type": 3}, TypeError, r"layer_type must be None or a str, got int$"),
    ({"head_dim": 8, "rope_parameters": "linear"}, {}, TypeError,
     r"config\['rope_parameters'\] must be a mapping or null, got str$"),
    ({"head_dim": 8, "rope_scaling": ["linear"]}, {}, TypeError, r"config\['rope_scaling'\] must be a mapping or null, got list$"),
    ({"head_dim": 8, "rope_theta": -1}, {}, ValueError,
     r"config\['rope_theta'\] must be > 1 \(the frequencies base \*\* \(-2i / d\) must decrease\), got -1.0$"),
    ({"head_dim": 8, "rope_parameters": {"rope_theta": 0.5}}, {}, ValueError,
     r"config rope parameter 'rope_theta' must be > 1 \(the frequencies base \*\* \(-2i / d\) must decrease\), got 0.5$"),
    ({"head_dim": 8}, {"default_base": 1.0}, ValueError, r"config\['rope_theta'\] must be > 1"),
    ({"head_dim": 8, "rope_parameters": {"a": {}, "b": {}}}, {}, ValueError,
     r"config's rope_parameters are nested by layer type \('a', 'b'\): pass layer_type$"),
    ({"head_dim": 8, "rope_parameters": {"a": {}, "b": {}}}, {"layer_type": "c"}, ValueError,
     r"layer_type 'c' is not in the config's rope_parameters \('a', 'b'\)$"),
    ({"head_dim": 8, "rope_parameters": {"rope_type": "ntk"}}, {}, ValueError,
     r"unknown rope_type 'ntk' in config; course_pe reads default, linear, dynamic, yarn, longrope, llama3, "
     r"proportional, axial \(model-specific types outside transformers' modeling_rope_utils are not covered\)$"),
    ({"head_dim": 8, "rope_parameters": {"rope_type": 5}}, {}, ValueError, r"unknown rope_type 5 in config"),
    ({"head_dim": 8, "rope_theta": "1e4"}, {}, TypeError, r"config\['rope_theta'\] must be a real number, got str"),
    ({"head_dim": 8, "rope_parameters": {"rope_theta": "1e4"}}, {}, TypeError,
     r"config rope parameter 'rope_theta' must be a real number, got str"),
    ({"head_dim": 2.0}, {}, TypeError, r"config\['head_dim'\] must be an integer, got float"),
    ({"qk_rope_head_dim": 0}, {}, ValueError, r"config\['qk_rope_head_dim'\] must be >= 1, got 0$"),
    ({"hidden_size": "64", "num_attention_heads": 4}, {}, TypeError, r"config\['hidden_size'\] must be an integer"),
    ({"hidden_size": 64, "num_attention_heads": 0}, {}, ValueError, r"config\['num_attention_heads'\] must be >= 1"),
    ({"hidden_size": 60, "num_attention_heads": 4}, {}, ValueError, r"head_dim \(from config\) must be even"),
    ({"hidden_size": 64}, {}, ValueError, r"config has no head_dim and no 'num_attention_heads' to derive it from; "
                                          r"pass head_dim$"),
    ({"head_dim": 8, "partial_rotary_factor": 1.5}, {}, ValueError,
     r"config rope parameter 'partial_rotary_factor' must be <= 1.0, got 1.5$"),
    ({"head_dim": 8, "partial_rotary_factor": -0.5}, {}, ValueError,
     r"config rope parameter 'partial_rotary_factor' must be >= 0.0, got -0.5$"),
    ({"head_dim": 8, "partial_rotary_factor": 0.125}, {}, ValueError,
     r"head_dim \* partial_rotary_factor = 8 \* 0.125 gives a rotary width of 1; it must be even and >= 2$"),
    ({"head_dim": 8, "max_position_embeddings": 0}, {}, ValueError, r"config\['max_position_embeddings'\] must be >= 1"),
    ({"head_dim": 8, "rope_parameters": {"rope_type": "llama3", "factor": 8.0}}, {}, ValueError,
     r"rope_type 'llama3' needs original_max_position_embeddings or max_position_embeddings in the config$"),
    ({"head_dim": 8, "rope_parameters": {"rope_type": "yarn", "original_max_position_embeddings": 0, "factor": 2.0}},
     {}, ValueError, r"config rope parameter 'original_max_position_embeddings' must be >= 1, got 0$"),
    ({"head_dim": 8, "rope_parameters": {"rope_type": "yarn", "original_max_position_embeddings": 64}}, {}, ValueError,
     r"rope_type 'yarn' without factor needs max_position_embeddings in the config$"),
    ({"head_dim": 8, "rope_parameters": {"rope_type": "linear"}}, {}, ValueError,
     r"rope_type 'linear' needs 'factor' in the config's rope parameters$"),
    ({"head_dim": 8, "rope_parameters": {"rope_type": "linear", "factor": "2"}}, {}, TypeError,
     r"config rope parameter 'factor' must be a real number, got str"),
    ({"head_dim": 8, "rope_parameters": {"rope_type": "linear", "factor": 0.5}}, {}, ValueError,
     r"config rope parameters of type 'linear': scaling factor must be >= 1"),
    ({"head_dim": 8, "rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}, {}, ValueError,
     r"rope_type 'dynamic' needs max_position_embeddings \(its original length\) in the config$"),
    ({"head_dim": 8, "max_position_embeddings": 64, "rope_parameters": {"rope_type": "yarn", "factor": 2.0,
                                                                         "beta_fast": "32"}}, {}, TypeError,
     r"config rope parameter 'beta_fast' must be a real number"),
    ({"head_dim": 8, "max_position_embeddings": 64, "rope_parameters": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0}}, {}, ValueError,
     r"rope_type 'llama3' needs 'high_freq_factor' in the config's rope parameters$"),
    ({"head_dim": 8, "rope_parameters": {"rope_type": "proportional", "factor": "x"}}, {}, TypeError,
     r"config rope parameter 'factor' must be a real number"),
    ({"head_dim": 8, "mrope_section": "161616"}, {}, TypeError,
     r"config rope parameter 'mrope_section' must be a list of integers, got str$"),
    ({"head_dim": 8, "mrope_section": [2, 0]}, {}, ValueError, r"config rope parameter 'mrope_section'\[1\] must be >= 1"),
])
def test_reader_messages(config, kwargs, error, message):
    with pytest.raises(error, match="^" + message):
        rope_config_from_hf(config, **kwargs)


def test_reader_reads_the_rest_of_each_type():
    rope = rope_config_from_hf({"head_dim": 8, "max_position_embeddings": 64, "rope_parameters": {
        "rope_type": "yarn", "factor": 2.0, "beta_fast": 16, "beta_slow": 2, "attention_factor": 1.5,
        "mscale": 0.5, "mscale_all_dim": 0.7, "truncate": False}})
    assert rope.scaling == cpe.YaRNScaling(2.0, 64, 16.0, 2.0, 1.5, 0.5, 0.7, False)
    rope = rope_config_from_hf({"head_dim": 4, "max_position_embeddings": 256, "rope_parameters": {
        "rope_type": "longrope", "short_factor": [1, 2], "long_factor": [3, 4], "original_max_position_embeddings": 64,
        "attention_factor": 1.2}})
    assert rope.scaling == cpe.LongRoPEScaling((1.0, 2.0), (3.0, 4.0), 64, factor=4.0, attention_factor=1.2)
    rope = rope_config_from_hf({"head_dim": 8, "max_position_embeddings": 64, "rope_parameters": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 2.0, "high_freq_factor": 3.0,
        "original_max_position_embeddings": 32}})
    assert rope.scaling == cpe.Llama3Scaling(8.0, 32, 2.0, 3.0)
    rope = rope_config_from_hf({"head_dim": 8, "rope_parameters": {"rope_type": "proportional", "partial_rotary_factor": 0.5}})
    assert rope.scaling == cpe.ProportionalScaling(0.5, 1.0) and rope.rotary_dim == 8
    rope = rope_config_from_hf({"head_dim": 8, "max_position_embeddings": 100,
                                "rope_scaling": {"type": "dynamic", "factor": 3.0}})
    assert rope.scaling == cpe.DynamicNTKScaling(3.0, 100) and rope.rope_type == "dynamic"
    assert rope_config_from_hf({"head_dim": 8, "rope_parameters": {"mrope_section": [1, 1, 2]}}).mrope_section == (1, 1, 2)


# ----------------------------------------------------------------------------- red team 2: S3 and D2


def test_rope_scaling_beside_rope_parameters_is_read_as_transformers_reads_it_or_refused():
    """S3: with both keys course_pe read rope_parameters and silently dropped rope_scaling; transformers does the
    opposite (``rope_scaling or rope_parameters``) and then loses rope_parameters' base. Both keys, non-empty:
    the same RoPE either way is accepted (and equals transformers), different ones are refused naming both keys."""
    base = {"hidden_size": 512, "num_attention_heads": 8, "max_position_embeddings": 32768}
    # the model-card case: a transformers-5 config.json with a YaRN block added by hand
    card = {**base, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6},
            "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
    assert LlamaConfig(**copy.deepcopy(card)).rope_parameters["rope_type"] == "yarn"  # transformers' choice
    assert LlamaConfig(**copy.deepcopy(card)).rope_parameters["rope_theta"] == 10000.0  # ... and its lost base
    with pytest.raises(ValueError, match=r"^config has both 'rope_parameters' and 'rope_scaling', and they describe "
                                         r"different RoPEs: rope_parameters gives rope_type 'default' with base 1e\+06, "
                                         r"rope_scaling gives rope_type 'yarn' with base 10000, YaRNScaling\(factor=4.0"):
        rope_config_from_hf(card)
    different_factors = {**base, "rope_parameters": {"rope_type": "linear", "factor": 2.0},
                         "rope_scaling": {"rope_type": "linear", "factor": 4.0}}
    with pytest.raises(ValueError, match=r"LinearScaling\(factor=2.0\), rope_scaling gives .*LinearScaling\(factor=4.0\)"
                                         r".*transformers 5.23 uses rope_scaling"):
        rope_config_from_hf(different_factors)
    # the same RoPE in both keys (the base at the top level, where transformers takes it from): accepted, = HF
    same = {**base, "rope_theta": 5e5, "rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 5e5},
            "rope_scaling": {"type": "linear", "factor": 4.0}}
    assert rope_config_from_hf(same).scaling == cpe.LinearScaling(4.0) and rope_config_from_hf(same).base == 5e5
    assert_same_frequencies(same, blend=0.0)
    # an empty or null block is absent, on either side, as in transformers (`rope_scaling or rope_parameters`)
    for config in ({**base, "rope_parameters": {}, "rope_scaling": {"type": "linear", "factor": 4.0}},
                   {**base, "rope_parameters": None, "rope_scaling": {"type": "linear", "factor": 4.0}},
                   {**base, "rope_parameters": {"rope_type": "linear", "factor": 4.0}, "rope_scaling": {}},
                   {**base, "rope_parameters": {"rope_type": "linear", "factor": 4.0}, "rope_scaling": None}):
        assert rope_config_from_hf(config).scaling == cpe.LinearScaling(4.0), config
        assert_same_frequencies(config, blend=0.0)


def test_nested_configs_follow_transformers_except_truncate():
    """D2: in a config nested by layer type transformers ignores a top-level original_max_position_embeddings (so
    does course_pe now; it used to let it win, as for a flat config) and reads YaRN's truncate from the top level of
    rope_parameters, where a nested config never has it (course_pe reads the layer's own, documented)."""
    base = {"hidden_size": 2560, "num_attention_heads": 8, "head_dim": 256, "max_position_embeddings": 131072,
            "layer_types": ["sliding_attention", "full_attention"], "num_hidden_layers": 2}
    yarn = {"rope_type": "yarn", "factor": 8.0, "rope_theta": 1e6}
    nested = {**base, "original_max_position_embeddings": 4096,
              "rope_parameters": {"full_attention": {**yarn, "original_max_position_embeddings": 16384},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}
    assert rope_config_from_hf(nested, layer_type="full_attention").scaling.original_max_positions == 16384
    assert_same_frequencies(nested, cls=Gemma3TextConfig, layer_type="full_attention")
    without = {**nested, "rope_parameters": {**nested["rope_parameters"], "full_attention": yarn}}
    assert rope_config_from_hf(without, layer_type="full_attention").scaling.original_max_positions == 131072
    assert_same_frequencies(without, cls=Gemma3TextConfig, layer_type="full_attention")
    # a flat config keeps Phi-3's rule: the top-level value wins
    flat = {**base, "original_max_position_embeddings": 4096,
            "rope_parameters": {**yarn, "original_max_position_embeddings": 16384}}
    assert rope_config_from_hf(flat).scaling.original_max_positions == 4096
    # truncate: false in a nested layer is honoured here, ignored by transformers (which then truncates)
    untruncated = {**base, "rope_parameters": {"full_attention": {**yarn, "truncate": False},
                                               "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}
    rope = rope_config_from_hf(untruncated, layer_type="full_attention")
    assert rope.scaling.truncate is False
    theirs, _ = hf_frequencies(untruncated, cls=Gemma3TextConfig, layer_type="full_attention")
    truncated = rope_config_from_hf({**untruncated, "rope_parameters": {**untruncated["rope_parameters"],
                                                                         "full_attention": yarn}},
                                    layer_type="full_attention")
    assert torch.equal(theirs, truncated.frequencies(angle_dtype=torch.float32)[0])  # transformers truncated
    assert not torch.equal(theirs, rope.frequencies(angle_dtype=torch.float32)[0])  # course_pe did not


# ----------------------------------------------------------------------------- red team 2: D1


def test_dynamic_ntk_over_a_series_of_calls():
    """D1: transformers' dynamic module keeps the frequencies of the longest input so far until an input shorter
    than the original length arrives; course_pe's depend on the current call. Each single call is equal bit for bit
    in float32 mode; a series is equal when course_pe is given transformers' longest length (the recipe of the
    RotaryEmbedding docstring), and differs (by a lot) without it where the docstring says."""
    original = 512
    config = {"hidden_size": 256, "num_attention_heads": 4, "max_position_embeddings": original, "rope_theta": 10000.0,
              "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}
    theirs = LlamaRotaryEmbedding(LlamaConfig(**copy.deepcopy(config)))
    rope = rope_config_from_hf(config)
    ours = rope.rotary_embedding(layout="half", angle_dtype=torch.float32)
    generator = torch.Generator().manual_seed(0)
    longest, differences = original, []
    for length in (1000, 800, 600, 400, 1000, 512, 700, 513, 1500, 512, 511, 600):
        q = torch.randn(1, 4, length, 64, generator=generator)
        cos, sin = theirs(q, torch.arange(length)[None])
        expected, _ = apply_rotary_pos_emb(q, q, cos, sin)
        longest = length if length > longest else (original if length < original else longest)
        assert torch.equal(ours(q, seq_len=longest), expected), length  # the documented recipe
        fresh = LlamaRotaryEmbedding(LlamaConfig(**copy.deepcopy(config)))  # a single call, no history
        single, _ = apply_rotary_pos_emb(q, q, *fresh(q, torch.arange(length)[None]))
        assert torch.equal(ours(q), single), length
        differences.append((length, float((ours(q) - expected).abs().max())))
    # the history matters exactly where the docstring says: a length between the original and an earlier, longer one
    changed = [length for length, difference in differences if difference > 0]
    assert changed == [800, 600, 512, 700, 513, 512], differences
    assert max(difference for _, difference in differences) > 1.0
