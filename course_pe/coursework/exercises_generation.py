"""The coding exercise of *Positions at generation time* (``book/part2/generation.ipynb``, ``ex-gen-t5``).

Students write ``t5_position_bias(attn, layer, s)``, the ``position_bias`` callback of the chapter's cached decoding
step ``run``: the T5 bias of the ``s`` new queries against all ``t`` cached keys of one layer, where ``attn`` is a
causal T5 attention layer (``attn.t5`` is its :class:`course_pe.t5.T5RelativeBias`) and ``layer`` the layer's cache
(``layer["k"]`` of shape ``(batch, heads, t, head_dim)``, ``layer["pos"]`` the position ids). The new queries are the
last ``s`` of the ``t`` cached positions, so query ``j`` is at ``m = t - s + j`` and key ``n`` at ``n``: the bias is
the bucket of ``n - m``, as T5 computes it, looked up in the layer's table.

Its arguments are a module and a dictionary of tensors, which the grader cannot send into a sandbox, so the exercise
has a **harness** (``HARNESS``): code run after the student's answer cells, in the student's sandbox (and, for the
notebook's check, in the student's kernel), that rebinds ``t5_position_bias`` to a function of plain values
``(num_heads, num_buckets, max_distance, weight, batch, s, t)``: it builds a causal T5 attention layer with the bias
table ``weight`` and a cache of ``t`` positions as ``run`` builds it, calls the student's function, and returns the
answer broadcast to ``(batch, heads, s, t)`` (any shape that ``run`` can add to the logits is accepted). The verdict
is computed by the grader from the table and T5's bucket function (``exercises._t5_buckets``,
a transcription of T5's code), never from ``course_pe.t5``.
"""

from __future__ import annotations

import numpy as np
import torch

from .exercises import FLOAT_DTYPES, HIDDEN_CASES, Case, _register, _t5_bounds, _t5_buckets

__all__ = ["HARNESS", "TOLERANCE"]

#: The exercise's tolerance, as its text states it. The bias entries are copied from the layer's table, so a float32
#: copy of values of order 1 to 4 is off by at most about 2.4e-7.
TOLERANCE = 1e-6

#: The harness of ``t5_position_bias`` (see the module docstring). Defined only when the student's function exists, so
#: that a missing function is reported as missing; everything it needs is imported under names of its own.
HARNESS = '''\
if callable(globals().get("t5_position_bias")):
    _course_pe_student_t5_position_bias = t5_position_bias

    def t5_position_bias(num_heads, num_buckets, max_distance, weight, batch, s, t):
        """course_pe's grader calls your t5_position_bias(attn, layer, s) in a cached step of `run`: a causal T5
        attention layer with the bias table `weight`, and a cache of t positions of which the last s are new."""
        import torch as _torch
        import course_pe as _cpe

        attn = _cpe.MultiHeadAttention(2 * num_heads, num_heads, position="t5", causal=True,
                                       t5_num_buckets=num_buckets, t5_max_distance=max_distance).double().eval()
        with _torch.no_grad():
            attn.t5.embedding.weight.copy_(_torch.as_tensor(weight, dtype=_torch.float64))
        zeros = _torch.zeros(batch, num_heads, t, attn.head_dim, dtype=_torch.float64)
        layer = {"k": zeros.clone(), "v": zeros.clone(), "keep": _torch.ones(batch, t, dtype=_torch.bool),
                 "pos": _torch.arange(t).expand(batch, t).clone()}
        with _torch.no_grad():
            bias = _torch.as_tensor(_course_pe_student_t5_position_bias(attn, layer, s))
        if bias.dim() > 4:
            raise ValueError(f"the bias has {bias.dim()} dimensions; run adds it to logits of shape "
                             f"(batch, heads, s, t) = {(batch, num_heads, s, t)}")
        try:
            return _torch.broadcast_to(bias, (batch, num_heads, s, t)).contiguous()
        except RuntimeError:
            raise ValueError(f"a bias of shape {tuple(bias.shape)} does not broadcast to the logits' shape (batch, "
                             f"heads, s, t) = {(batch, num_heads, s, t)}") from None
'''


def _bias(weight: np.ndarray, batch: int, s: int, t: int, num_buckets: int, max_distance: int, *,
          query_start: int | None = None, sign: int = 1) -> np.ndarray:
    """The T5 bias (batch, heads, s, t) of queries at ``query_start ... query_start + s - 1`` (default: the last s of
    t) against keys ``0 ... t-1``, causal buckets of ``sign * (key - query)`` (each distinct offset bucketed once)."""
    start = t - s if query_start is None else query_start
    offsets = sign * (np.arange(t)[None, :] - (np.arange(s)[:, None] + start))
    low = int(offsets.min())
    values = torch.arange(low, int(offsets.max()) + 1)
    buckets = _t5_buckets(values, False, num_buckets, max_distance).numpy()[offsets - low]
    bias = np.transpose(weight[buckets], (2, 0, 1))  # (heads, s, t)
    return np.broadcast_to(bias[None], (batch,) + bias.shape).copy()


def _unambiguous(s: int, t: int, num_buckets: int, max_distance: int) -> bool:
    """True when no offset of the step falls where float32 and float64 logarithms pick different T5 buckets (the bias
    of such an offset would depend on how the buckets were computed; such settings are not drawn)."""
    offsets = np.arange(-(t - 1), 1)  # every offset key - query of the step (the last s of t queries)
    lower, upper = _t5_bounds(offsets, False, num_buckets, max_distance)
    return bool(np.all(lower == upper))


@_register("t5_position_bias", "t5_position_bias", "generation",
           "T5's bias of the s new queries against all t cached keys, for run's position_bias", tolerance=TOLERANCE)
def _t5_position_bias_cases(rng: np.random.Generator | None) -> list[Case]:
    """``fn(attn, layer, s)``, called by the harness: the bias of the ``s`` new queries (the last ``s`` of the ``t``
    cached positions) against every cached key, any shape that broadcasts to ``(batch, heads, s, t)``, every entry
    within 1e-6 of T5's, whatever dtype it is returned in.
    Visible cases: a prefill (``s = t``), one-token steps (``s = 1``) near and beyond ``max_distance``, a chunk of
    three new tokens, and the largest sizes of the hidden cases (8 heads, 64 buckets, 300 cached positions). Hidden
    cases: 1 ... 8 heads, ``num_buckets`` even in 4 ... 64, ``max_distance`` above the exact range up to 16
    ``num_buckets``, ``t`` in 1 ... 300, ``s`` in 1 ... ``t``, a random table (settings where a float32 and a float64
    logarithm would pick different buckets are not drawn)."""
    g = np.random.default_rng(20261128)
    settings = [(4, 32, 128, 2, 5, 5, False), (4, 32, 128, 2, 1, 6, False), (4, 32, 128, 1, 3, 10, False),
                (2, 8, 20, 2, 1, 60, False), (8, 64, 1000, 1, 7, 300, False)]
    if rng is not None:
        for _ in range(HIDDEN_CASES):
            while True:
                heads = int(rng.integers(1, 9))
                buckets = 2 * int(rng.integers(2, 33))
                distance = int(rng.integers(buckets // 2 + 1, 16 * buckets + 1))
                t = int(rng.integers(1, 301))
                s = int(rng.integers(1, t + 1))
                if _unambiguous(s, t, buckets, distance):
                    break
            settings.append((heads, buckets, distance, int(rng.integers(1, 4)), s, t, True))
    cases = []
    for heads, buckets, distance, batch, s, t, hidden in settings:
        if not hidden and not _unambiguous(s, t, buckets, distance):
            raise AssertionError(f"a visible case of t5_position_bias sits on a bucket boundary: {(s, t, buckets, distance)}")
        weight = (rng if hidden else g).standard_normal((buckets, heads))
        expected = _bias(weight, batch, s, t, buckets, distance)
        mistakes = []
        if s < t:  # (a prefill, s = t, is right either way)
            at_zero = _bias(weight, batch, s, t, buckets, distance, query_start=0)
            mistakes.append((
                "every cached key got the bias of offset 0: the new query was put at position 0 (attn.t5(1, t, "
                "query_offset=0), or a position counted within the one-token input), or the bias was computed for the "
                "new token alone (attn.t5(s, s)) and broadcast over the cache; the new queries are the last s of the "
                "t cached positions, t-s ... t-1, with t = layer['k'].shape[2]" if s == 1 else
                "the new queries were put at positions 0 ... s-1 (query_offset=0, or positions counted within the "
                "step's input); in a cached step they are the last s of the t cached positions, t-s ... t-1",
                at_zero))
        mistakes.append(("the sign of the offset is reversed: T5's offset is key - query (n - m), which is <= 0 for a "
                         "causal query", _bias(weight, batch, s, t, buckets, distance, sign=-1)))
        shown = f"{heads} heads, num_buckets={buckets}, max_distance={distance}, batch {batch}, s={s} new of t={t} cached"
        cases.append(Case(
            shown, (heads, buckets, distance, torch.from_numpy(weight), batch, s, t), expected, atol=TOLERANCE,
            dtypes=FLOAT_DTYPES, hidden=hidden,
            axes=(("sequence {i} of the batch", None), ("head {i}", None), ("new query {i}", None),
                  ("cached key {i}", None)),
            mistakes=tuple((text, wrong) for text, wrong in mistakes if not np.array_equal(wrong, expected)),
            hint="query j of this step is at position m = t - s + j and key n at n (t = layer['k'].shape[2]); the "
                 "bias is the layer's table row for T5's causal bucket of n - m (T5RelativeBias, chapter Relative "
                 "position representations)",
        ))
    return cases
