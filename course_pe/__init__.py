"""course_pe: every positional encoding taught in *Positional Encoding, Corrected*.

Modules (one concern each):

* :mod:`course_pe.sinusoidal` - the sinusoidal table, its two layouts and the shift matrix
* :mod:`course_pe.learned` - learned absolute position embeddings
* :mod:`course_pe.shaw`, :mod:`course_pe.t5`, :mod:`course_pe.alibi` - relative schemes
* :mod:`course_pe.rope`, :mod:`course_pe.rope_scaling` - rotary embeddings and context extension
* :mod:`course_pe.positions` - position ids for padded (generation), cached and packed batches; fairseq's offset
* :mod:`course_pe.rope_nd` - RoPE variants of today's models: 2-D RoPE, M-RoPE, xPos, decoupled RoPE
* :mod:`course_pe.attention`, :mod:`course_pe.model` - attention and a tiny Transformer
* :mod:`course_pe.tasks`, :mod:`course_pe.training` - seeded synthetic tasks and a training loop
* :mod:`course_pe.permutation` - equivariance checks; :mod:`course_pe.plotting` - figures
* :mod:`course_pe.reproducibility` - seeds and threads for deterministic notebooks
* :mod:`course_pe.coursework` - the coursework tools: exercise checks (``exercises``, also ``course_pe.exercises``),
  student notebooks (``workbook``), the sandboxed grader (``grade``, ``sandbox``, ``gradebook``) and the nbgrader
  release (``nbgrader_release``)
* :mod:`course_pe.benchmark` - RoPE speed comparison (``python -m course_pe.benchmark``)

Conventions: sequences are batch-first; attention tensors are ``(batch, heads, seq, head_dim)``.
"""

from .coursework import exercises
from .alibi import alibi_bias, alibi_slopes
from .attention import ATTENTION_POSITIONS, MultiHeadAttention, attention, causal_mask
from .learned import LearnedPositionalEmbedding
from .model import MODEL_POSITIONS, ModelOutput, TinyTransformer, TransformerBlock
from .permutation import (
    equivariance_error,
    invariance_error,
    permutation_matrix,
    permute_sequence,
    random_permutation,
)
from .positions import (
    document_ids_from_position_ids,
    make_positions,
    packed_attention_mask,
    packed_position_ids,
    packed_position_ids_from_boundaries,
    position_ids_from_attention_mask,
)
from .reproducibility import make_generator, set_determinism
from .rope import (
    MAX_POSITION,
    ROPE_LAYOUTS,
    RotaryEmbedding,
    apply_rope,
    half_to_interleaved,
    interleaved_to_half,
    layout_permutation,
    permute_qk_weights,
    rope_cos_sin,
    rotate_with_cos_sin,
)
from .rope_nd import (
    QWEN2_VL_MROPE_SECTION,
    apply_xpos,
    decoupled_rope_logits,
    mrope,
    mrope_position_ids,
    multi_axis_rope,
    rope_2d,
    rope_2d_frequencies,
    xpos_scale,
)
from .rope_scaling import (
    HF_ROPE_TYPES,
    DynamicNTKScaling,
    LinearScaling,
    Llama3Scaling,
    LongRoPEScaling,
    NTKScaling,
    ProportionalScaling,
    RopeConfig,
    RopeScaling,
    YaRNScaling,
    complete_turn_pairs,
    rope_config_from_hf,
    rope_frequencies,
    yarn_correction_range,
    yarn_mscale,
    yarn_softmax_scale,
)
from .shaw import ShawRelativePositions, shaw_attention, shaw_relative_positions
from .sinusoidal import (
    SINUSOIDAL_LAYOUTS,
    SinusoidalPositionalEncoding,
    shift_matrix,
    sinusoidal_encoding,
    sinusoidal_encoding_np,
    sinusoidal_frequencies,
    sinusoidal_wavelengths,
)
from .t5 import T5RelativeBias, t5_relative_position_bucket
from .tasks import (
    IGNORE,
    Batch,
    CopyTask,
    HistogramTask,
    MarkovTask,
    PositionTask,
    PrefixTask,
    ReverseTask,
    SortTask,
)
from .training import PositionReport, TrainConfig, TrainResult, evaluate_by_position, train
from .training import SeedsResult, evaluate_seeds, init_seeds, seed_streams, train_seeds

__version__ = "0.1.0"

__all__ = [
    "exercises",
    "alibi_bias",
    "alibi_slopes",
    "apply_rope",
    "attention",
    "ATTENTION_POSITIONS",
    "Batch",
    "causal_mask",
    "CopyTask",
    "DynamicNTKScaling",
    "equivariance_error",
    "evaluate_by_position",
    "half_to_interleaved",
    "HistogramTask",
    "IGNORE",
    "interleaved_to_half",
    "invariance_error",
    "layout_permutation",
    "LearnedPositionalEmbedding",
    "LinearScaling",
    "Llama3Scaling",
    "make_generator",
    "MarkovTask",
    "MODEL_POSITIONS",
    "ModelOutput",
    "MultiHeadAttention",
    "NTKScaling",
    "permutation_matrix",
    "permute_qk_weights",
    "permute_sequence",
    "PositionReport",
    "PositionTask",
    "PrefixTask",
    "random_permutation",
    "ReverseTask",
    "rope_cos_sin",
    "rope_frequencies",
    "ROPE_LAYOUTS",
    "RopeScaling",
    "RotaryEmbedding",
    "rotate_with_cos_sin",
    "set_determinism",
    "shaw_attention",
    "shaw_relative_positions",
    "ShawRelativePositions",
    "shift_matrix",
    "sinusoidal_encoding",
    "sinusoidal_encoding_np",
    "sinusoidal_frequencies",
    "SINUSOIDAL_LAYOUTS",
    "sinusoidal_wavelengths",
    "SinusoidalPositionalEncoding",
    "SortTask",
    "t5_relative_position_bucket",
    "T5RelativeBias",
    "TinyTransformer",
    "train",
    "TrainConfig",
    "TrainResult",
    "TransformerBlock",
    "yarn_correction_range",
    "YaRNScaling",
    # rope_nd
    "QWEN2_VL_MROPE_SECTION",
    "apply_xpos",
    "decoupled_rope_logits",
    "mrope",
    "mrope_position_ids",
    "multi_axis_rope",
    "rope_2d",
    "rope_2d_frequencies",
    "xpos_scale",
    # several seeds as one batched model
    "evaluate_seeds",
    "init_seeds",
    "seed_streams",
    "SeedsResult",
    "train_seeds",
    # RoPE: positions bound, every Hugging Face rope type
    "MAX_POSITION",
    "HF_ROPE_TYPES",
    "LongRoPEScaling",
    "ProportionalScaling",
    "RopeConfig",
    "complete_turn_pairs",
    "rope_config_from_hf",
    "yarn_mscale",
    "yarn_softmax_scale",
    # position ids for padded, cached and packed batches
    "document_ids_from_position_ids",
    "make_positions",
    "packed_attention_mask",
    "packed_position_ids",
    "packed_position_ids_from_boundaries",
    "position_ids_from_attention_mask",
]
