"""Rubrics for every exercise that is marked by hand: the written, proof, computation, design and experiment exercises
of every chapter (the coding exercises of the registry, ``exercises.EXERCISES``, are graded
automatically).

Each :class:`Rubric` lists criteria with their points; a criterion is met in full, in part (give part of its points)
or not at all. The criteria say what a complete answer contains, taken from the book's worked solution, which graders
read beside them. A correct answer reached another way earns the same points (the criteria name *what* must be
established, not the wording). Where an exercise asks for a numeric check or an experiment, the criterion asks for the
check to be run and read, not for a particular number (runs differ between machines).

The rubrics are used by ``make nbgrader`` (each written exercise is a manually graded task whose mark scheme is the
rubric and the book's solution: graders see it in the Formgrader, students in their feedback after grading), by the
marking sheets of ``python -m course_pe.coursework.written`` (``make grade``'s path for written work), and are checked
against the book's exercises by ``tests/test_rubrics.py`` (every non-coding exercise of every chapter has one, and no
rubric names an exercise that does not exist).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from .._validation import check_str

__all__ = ["CHAPTERS", "KINDS", "Criterion", "RUBRICS", "Rubric", "rubric_text", "rubrics_for_chapter"]

#: the chapters that have exercises, in the book's order (tests/test_rubrics.py checks it against _toc.yml)
CHAPTERS = ("why_order", "sinusoidal", "worked_example", "shift_theorem", "model_input", "learned", "encoder_decoder",
            "relative", "rope_first_principles", "rope_proof", "rope_implementation", "generation", "extrapolation",
            "context_extension", "context_extension_experiment", "learned_beyond", "todays_models")
#: what kind of work an exercise asks for
KINDS = ("written", "proof", "computation", "design", "experiment", "coding")


@dataclass(frozen=True)
class Criterion:
    """One thing a complete answer does, worth ``points``."""

    points: float
    text: str

    def __post_init__(self) -> None:
        if not isinstance(self.points, numbers.Real) or isinstance(self.points, (bool, np.bool_)) or \
                not self.points > 0:
            raise ValueError(f"points must be a number > 0, got {self.points!r}")
        # a NumPy number is stored as the Python int or float it stands for
        points = int(self.points) if isinstance(self.points, numbers.Integral) else float(self.points)
        object.__setattr__(self, "points", points)
        if not check_str("text", self.text).strip():
            raise ValueError("text must not be empty")


@dataclass(frozen=True)
class Rubric:
    """The rubric of the exercise ``label`` (its MyST label) of ``chapter``: what ``kind`` of work, and the criteria."""

    label: str
    chapter: str
    kind: str
    criteria: tuple[Criterion, ...]

    def __post_init__(self) -> None:
        check_str("label", self.label)
        if self.chapter not in CHAPTERS:
            raise ValueError(f"unknown chapter {self.chapter!r}")
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if not self.criteria or not all(isinstance(c, Criterion) for c in self.criteria):
            raise ValueError("criteria must be a non-empty tuple of Criterion")

    @property
    def points(self) -> float:
        return float(sum(c.points for c in self.criteria))


def _r(label: str, chapter: str, kind: str, *criteria: tuple[float, str]) -> Rubric:
    return Rubric(label, chapter, kind, tuple(Criterion(p, t) for p, t in criteria))


_ALL = [
    # --------------------------------------------------------------- Foundations: why order matters
    _r("ex-why-order-conv", "why_order", "written",
       (1, "No: a convolution is not equivariant to arbitrary permutations (swapping distant tokens changes their "
           "neighbourhoods; the weights are tied to offsets)."),
       (1, "It is equivariant to shifts, argued from the formula: y'_m = y_{m+k} when x'_m = x_{m+k}, because only "
           "offsets j appear."),
       (1, "Boundaries: circular padding gives exact equivariance to the N cyclic shifts; zero or no padding only "
           "approximately, failing within one position of either end."),
       (1, "Contrast with attention without positions, which commutes with all N! permutations exactly.")),
    _r("ex-why-order-pooling", "why_order", "proof",
       (1.5, "Proof: f(PX) = P f(X) has the rows of f(X) in another order, and a coordinate-wise maximum over rows does "
             "not depend on their order, so g(PX) = g(X)."),
       (1, "Counter-argument for the first row: f(PX)_0 = f(X)_{pi(0)}, a different row unless pi(0) = 0 (an example "
           "or a numeric check is enough)."),
       (1.5, "[CLS] stands first, so the reorderings that matter keep pi(0) = 0 and the readout is invariant to "
             "reordering the other tokens: a learned attention pooling; position embeddings add order sensitivity.")),
    _r("ex-why-order-table", "why_order", "proof",
       (1.5, "Tables with identical rows (PT = T for every P) keep h equivariant, shown from h(PX) = f(PX + T) and "
             "P h(X) = f(PX + PT)."),
       (1, "Conversely, for a generic (e.g. injective) f any table with differing rows breaks equivariance, with the "
           "caveat that special f (a constant map) stay equivariant."),
       (1, "The numeric check with cpe.equivariance_error is run for a constant-row and a random table and read "
           "correctly (about 0 versus clearly non-zero).")),
    _r("ex-why-order-decoder", "why_order", "computation",
       (1.5, "Solves y_m = v_a + (v_BOS - v_a)/(m + 1) for m: m = (v_BOS - v_a)/(y_m - v_a) - 1."),
       (1, "Adjacent positions differ by about |v_BOS - v_a|/m^2, compared with float32's spacing near 1 (2^-23): "
           "positions stop being distinguishable at m of a few thousand."),
       (1, "Conclusion: the signal fades like 1/m^2, so such a decoder locates early tokens precisely and late ones "
           "only roughly.")),
    # --------------------------------------------------------------- Part I: the sinusoidal encoding
    _r("ex-sinusoidal-wavelength", "sinusoidal", "computation",
       (1, "(a) The longest wavelength 2 pi 10000^(126/128), with its value."),
       (1, "(b) The slowest pair stays within a quarter turn for p < (pi/2) 10000^(126/128)."),
       (1, "(c) Counts the pairs with wavelength <= 512 (computed, not guessed), using lambda_i = 2 pi / omega_i.")),
    _r("ex-sinusoidal-dot", "sinusoidal", "proof",
       (1.5, "Per pair sin a sin c + cos a cos c = cos(a - c), so the dot product is sum_i cos((n - m) omega_i), a "
             "function of n - m only."),
       (0.5, "Even in the offset, because cosine is even."),
       (2, "Attention compares (t_m + PE(m)) W_Q W_K^T (t_n + PE(n)): the matrix W_Q W_K^T and the token cross terms "
           "bring back a dependence on m and n separately, so scores need not depend on n - m only.")),
    _r("ex-sinusoidal-layout", "sinusoidal", "written",
       (1, "(a) No information is lost: the same numbers in permuted columns."),
       (1.5, "(b) Yes: replace W by P^T W (permute W's rows), with the direction of the permutation right."),
       (1.5, "(c) With the sum E[w] + PE(p), changing W alone scrambles the token part; a complete fix re-indexes the "
             "token embeddings and every weight that reads or writes the residual stream (or, in practice, uses the "
             "table the model was trained with).")),
    # --------------------------------------------------------------- Part I: a worked example
    _r("ex-worked-p10", "worked_example", "computation",
       (1, "PE(10) = (sin 10, cos 10, sin 0.1, cos 0.1) and PE(100) = (sin 100, cos 100, sin 1, cos 1), angles first, "
           "with values that match the code."),
       (1, "Dimension 2 is sin(0.01 p) > 0.5 once p > 100 pi / 6: the first such integer position, found by code or "
           "by hand.")),
    _r("ex-worked-d6", "worked_example", "computation",
       (1, "The three frequencies 1, 10000^(-1/3), 10000^(-2/3) and PE(1) computed from them."),
       (1, "With the (2i+1)/d exponent all three cosines change (dimensions 1, 3, 5), including dimension 1 (exponent "
           "1/6 instead of 0)."),
       (1, "Notes that the change in dimension 5 is tiny (invisible at four decimals).")),
    _r("ex-worked-fabricated", "worked_example", "written",
       (1, "omega about 0.0099 fits the first values (sin(omega p) about omega p) and needs the base b = omega^(-2)."),
       (1, "Compares the later values and finds that even this omega does not produce the column."),
       (1, "Concludes the column was not computed from this formula (typed, not computed).")),
    # --------------------------------------------------------------- Part I: the shift theorem
    _r("ex-shift-half", "shift_theorem", "proof",
       (2, "M_k^half = P M_k P^T, derived from PE_half = P PE_inter and P^T = P^-1."),
       (1, "Its block form: diag(cos k omega), diag(sin k omega), -diag(sin k omega), diag(cos k omega)."),
       (1, "The numeric check against cpe.shift_matrix(k, d, layout='half') is run and agrees.")),
    _r("ex-shift-learned", "shift_theorem", "proof",
       (1.5, "The condition: T_{1:L} = T_{0:L-1} M_1^T is solvable iff every column of T_{1:L} lies in the column space "
             "of T_{0:L-1} (a rank condition); the table is then an orbit T_p = M_1^p T_0."),
       (1.5, "A random table: full row rank while L - 1 <= d_model (an exact M_1 exists); generically no solution once "
             "L >= d_model + 2."),
       (1, "The least-squares check shows a residual of about 0 below that length and clearly above 0 beyond it.")),
    _r("ex-shift-dot", "shift_theorem", "proof",
       (1.5, "The average is a Riemann sum of cos(k b^-t) over [0, 1] with step 2/d_model and converges to the "
             "integral."),
       (1, "The plot of the limit against the finite sums for d_model = 16 and 128 is made."),
       (1.5, "Monotonicity: the limit decays (almost) monotonically from 1 (its derivative (cos k - cos(k/b))/(k ln b) "
             "is <= 0 but in tiny windows); the finite sums ripple and are not monotone (the fast pairs).")),
    # --------------------------------------------------------------- Part I: the model's input
    _r("ex-input-concat", "model_input", "computation",
       (1, "The parameter counts of both embedding tables, the concatenating one smaller by 32000 x 64."),
       (2, "The additive model can represent more token directions (up to 512 independent ones against 448), at the "
           "price of sharing those dimensions with position; concatenation keeps them apart but wastes 64 "
           "dimensions on position.")),
    _r("ex-input-bug", "model_input", "written",
       (1.5, "(a) Sequence r of the batch receives PE(r) at every position: a per-sequence constant, useless for "
             "order."),
       (1, "(b) (32, 1, d) broadcasts against (32, seq, d), so no error is raised."),
       (1.5, "(c) An assertion that tests behaviour: two positions of one sequence get different encodings (on a zero "
             "input, in eval mode); a shape assertion alone does not catch the bug.")),
    # --------------------------------------------------------------- Part I: learned position embeddings
    _r("ex-learned-init", "learned", "experiment",
       (1, "After training the reverse model, identifies which rows changed (all positions used in training)."),
       (1.5, "Trains with max_positions=32 on length 16 and measures the movement of rows 16-31: essentially unchanged "
             "(no gradient; weight decay shrinks them only slightly)."),
       (1.5, "Predicts that at length 32 the second half of the input receives untrained vectors, so the model fails "
             "there (a measurement at length 32 is a plus, not required).")),
    _r("ex-learned-params", "learned", "computation",
       (1, "512 x 768 and 1024 x 768 parameters, as fractions of 110 M and 124 M (a small share)."),
       (1, "Concludes that the cost of a learned table is its fixed length, not its size.")),
    _r("ex-learned-detach", "learned", "written",
       (1.5, "(a) and (d) keep the graph (clone is differentiable); (b), (c) and (e) cut it (data, a new tensor, "
             "detach)."),
       (1.5, "The gradients are computed and confirm each answer.")),
    # --------------------------------------------------------------- Part I: encoder and decoder
    _r("ex-encdec-sort", "encoder_decoder", "experiment",
       (2, "Argues from equivariance: without positions two positions holding the same token produce the same output, "
           "but sorting needs position-dependent outputs, so an encoder needs position information."),
       (1, "Trains cpe.SortTask with and without the encoding and reports both accuracies."),
       (1, "Reads the result against the bound of guessing the most frequent token (the model without positions "
           "stays near it).")),
    _r("ex-encdec-cross", "encoder_decoder", "written",
       (1.5, "Re-injection adds no new kind of information: PE(m) and PE(n) already reach cross-attention through the "
             "residual streams; it makes the positional term stronger in every layer."),
       (1.5, "A strong built-in pull towards a position-based alignment (n about m) helps monotone alignments but hurts "
             "when word order differs, where the right source position is not a function of the target position.")),
    _r("ex-encdec-nobos", "encoder_decoder", "experiment",
       (1.5, "The prediction before the experiment: uniform attention averages m + 1 random values; the deviation from "
             "the mean shrinks like 1/sqrt(m + 1), a weaker position signal than a start token, best near the start."),
       (1, "Trains the decoder without a start token and probes it as in the chapter."),
       (1.5, "Compares with the start-token probe: weaker overall, error smallest near the start, across the seeds run.")),
    # --------------------------------------------------------------- Part II: relative positions
    _r("ex-relative-shaw-count", "relative", "written",
       (1, "2N - 1 offsets occur; clipping uses 2K + 1 rows."),
       (1, "What is lost: offsets beyond +-K are indistinguishable in that layer."),
       (1, "An explanation offered as a conjecture (e.g. several layers compose short offsets into longer ones)."),
       (1, "An experiment that would test it, with its control (e.g. depth versus an offset larger than K on a copy "
           "task, and the absolute position a causal mask provides).")),
    # --------------------------------------------------------------- Part II: RoPE from first principles
    _r("ex-rope-period", "rope_first_principles", "proof",
       (1.5, "One pair: the score depends on cos((m - n) theta) and sin((m - n) theta): period 2 pi / theta in the "
             "offset (integer offsets repeat only approximately)."),
       (1.5, "d = 64, b = 10000: no common period, because the ratios b^(2/d) of the periods are irrational.")),
    _r("ex-rope-symmetric", "rope_first_principles", "proof",
       (1.5, "The score is even exactly when q_1 k_2 - q_2 k_1 = 0 (the sine term vanishes)."),
       (1, "Geometrically: q and k parallel."),
       (1, "So for generic q, k RoPE tells left from right, unlike a bias that depends on |m - n| only.")),
    _r("ex-rope-additive", "rope_first_principles", "proof",
       (1, "The expansion <q, k> + <q, u_n> + <u_m, k> + <u_m, u_n>."),
       (2, "The argument that forces u_n = u_0: the part linear in q does not involve m, so it cannot depend on n "
           "through m - n (e.g. set k = 0 and compare q with 2q)."),
       (1, "Conclusion: constant vectors carry no position; additive encodings bring absolute position into the logit "
           "through cross terms.")),
    # --------------------------------------------------------------- Part II: the proof
    _r("ex-proof-shared", "rope_proof", "proof",
       (2, "Blockwise R(m theta)^T R(2 n theta) = R((2n - m) theta): the score depends on 2n - m."),
       (1, "So shifting both positions changes it: the relative property needs the same frequencies on both sides.")),
    _r("ex-proof-bound-zero", "rope_proof", "proof",
       (1, "At r = 0, S_j = j, so the normalised factor is (d/2 + 1)/2."),
       (1, "The full bound max_i |h_{i+1} - h_i| (d/2)(d/2 + 1)/2, and the score <q, k> at distance 0."),
       (1.5, "Attained: an example such as h_i = c (d/2 - i) (q = k with suitable magnitudes) where score and bound "
             "are equal."),
       (0.5, "Not close for typical (random) q and k, checked numerically.")),
    _r("ex-proof-layout-perm", "rope_proof", "computation",
       (1.5, "P for d = 6: coordinates (0, 1, 2, 3, 4, 5) to (0, 3, 1, 4, 2, 5), pairs (0, 1) to (0, 3) etc."),
       (1.5, "The numeric verification with cpe.apply_rope on the identity, with the transpose handled (the output is "
             "R_m^T).")),
    # --------------------------------------------------------------- Part II: implementing RoPE
    _r("ex-impl-traffic", "rope_implementation", "computation",
       (2, "The step-by-step count: about 5.5 S reads and 4.5 S writes (10 S moved) against 2 S for a fused pass; "
           "the cos and sin tables add about S/8."),
       (2, "Reads the measured ratios correctly: traffic alone does not explain them (allocations and page faults of "
           "the temporaries, caching of the blocked implementation, machine load).")),
    # --------------------------------------------------------------- Part II: positions at generation time
    _r("ex-gen-fairseq", "generation", "computation",
       (1, "514 rows (512 + padding_idx + 1)."),
       (1, "The first real token reads row 2 whatever the padding; rows 0 and 1 never serve a real token."),
       (1, "With 0-based ids the token at p reads row p, trained for position p - 2: everything shifted two places.")),
    _r("ex-gen-reposition", "generation", "proof",
       (1.5, "R_{b-a} R_a = R_b (the composition property), so one more rotation by b - a moves the key, with a "
             "numeric check."),
       (1, "Cost per step: both designs re-rotate the window's keys at every step once it is full (raw keys by their "
           "full position, rotated keys by -1)."),
       (1.5, "Drift: the rotated cache accumulates a rounding error with every re-rotation (large in bfloat16), "
             "while raw keys round once per step.")),
    _r("ex-gen-dynamic", "generation", "design",
       (1.5, "A consistent design: re-rotate every cached key whenever the frequencies change (from raw keys, or by "
             "n (theta' - theta)), or fix the frequencies for the whole generation."),
       (1, "Its cost: one rotation per cached key per change (every step past L with Hugging Face's rule), or the "
           "changed prompt rotations."),
       (1.5, "The check is run step by step beside the full forward pass and the drift stays at rounding level.")),
    # --------------------------------------------------------------- Part III: length extrapolation
    _r("ex-extrap-alibi-why", "extrapolation", "written",
       (2, "A steep head attends to the last few tokens (weights e^(-m r)), the same at position 20 and 100, so the "
           "rest of the network sees nothing new; nothing depends on absolute position."),
       (1, "Only shallow heads, whose windows exceed L, see more keys than in training (a little dilution)."),
       (1, "Hence ALiBi is a recency bias: good for local tasks, possibly harmful for long-range retrieval.")),
    _r("ex-extrap-learned-rows", "extrapolation", "experiment",
       (1.5, "The prediction: copied rows make every later position look like position L, so the loss beyond L stays "
             "high; whether it ends below or above the random-row case is open (the chapter has not measured it), and "
             "either direction with a reason earns the points."),
       (1.5, "The experiment is run (row L copied into the later rows of a trained model) and the measured loss is "
             "compared with the prediction.")),
    # --------------------------------------------------------------- Part III: extending the context
    _r("ex-ctx-yarn-range", "context_extension", "computation",
       (1.5, "By hand: i = (d/2) ln(L / (2 pi beta)) / ln b for beta = 32 and 1, floored and ceiled."),
       (1, "The same range from cpe.yarn_correction_range."),
       (1, "The count of pairs strictly between the ends (blended), distinguished from the 18 pairs of the range.")),
    _r("ex-ctx-yarn-frequencies", "context_extension", "coding",
       (2, "yarn_frequencies follows the formula: pair index i(beta), floored and ceiled ends, the clamped ramp "
           "blending interpolation and extrapolation."),
       (1, "The released code's two details: ends clipped to [0, d - 1], a zero-width range widened by 0.001."),
       (1, "The chapter's check against cpe.rope_frequencies passes in its three settings.")),
    _r("ex-ctx-ntk-exponent", "context_extension", "proof",
       (1.5, "theta_i' = theta_i s^(-2i/(d-2)): factor 1 for i = 0, s^-1 for i = d/2 - 1."),
       (1, "i* = (d - 2)/4; for d = 128 it is 31.5, not a pair (pairs 31 and 32 straddle sqrt(s))."),
       (1.5, "With b' = b s^e pair d/4 is divided by s^(e/2): e = 1, i.e. b' = b s.")),
    # --------------------------------------------------------------- Part III: an extension experiment
    _r("ex-ctx-pi-resolution", "context_extension_experiment", "written",
       (1, "The fastest pair's step falls from 1 radian to 1/8 radian, a spacing never seen in training."),
       (1.5, "The Markov task (offsets 1 and 2) is hurt most, explained by the squeezed small offsets."),
       (1.5, "Copying suffers less (one offset, but telling n from n +- 1 needs resolution) and passkey is immune (no "
             "precise offset needed), each explained from the offsets the task needs.")),
    _r("ex-ctx-sample-size", "context_extension_experiment", "computation",
       (1, "No failure in n trials: the 95 % upper bound solves (1 - p)^n = 0.05; for n = 32 about 9 % (rule of "
           "three: 3/n)."),
       (1, "Below 1 % needs n > ln 0.05 / ln 0.99, about 299 sequences all retrieved."),
       (1, "Ten of ten allows an error rate up to about 26 %: it separates works from fails often, not perfect."),
       (2, "Binomial(32, 0.05): P(X >= 5) about 0.02, about 2.6 of 129 distances expected by chance, at least one with "
           "probability about 0.93; so one weak distance is not a resolved failure (many comparisons), and what "
           "would resolve one (many distances together, or the same distance again on fresh sequences).")),
    # --------------------------------------------------------------- Part III: learned tables beyond their length
    _r("ex-lb-spacing", "learned_beyond", "experiment",
       (1.5, "The prediction from the formula before running: new rows a quarter of an old step apart, ratio "
             "(L_old - 1)/(L_new - 1) = 32/128 (exactly 0.25 here, since 128/32 is an integer)."),
       (1.5, "The measurement is run and compared with the prediction.")),
    _r("ex-lb-hybrid", "learned_beyond", "design",
       (1.5, "A concrete extension that keeps rows 0 ... L and fills the new rows from trained ones (e.g. row p mod "
             "(L + 1), or an extrapolation of the last rows)."),
       (1, "It keeps appending's property: the old positions are intact."),
       (1, "It loses interpolation's consistent coverage of the whole length: distinct far positions can look alike.")),
    _r("ex-lb-why-bert", "learned_beyond", "written",
       (1.5, "Zero-shot interpolation makes the model worse even within the first 512 positions (the chapter's "
             "result); appended rows are useless until trained."),
       (1.5, "So either extension needs training at the new length; without it, 512-token windows keep the model "
             "within its trained positions.")),
    _r("ex-lb-bos-row", "learned_beyond", "experiment",
       (1.5, "The variant is built: row 0 of the trained table kept exactly, rows 1 to 32 interpolated alone to 128 "
             "rows (linear, align_corners=True), 129 rows in all."),
       (1.5, "Zero-shot loss within and beyond L measured for the three seeds beside the chapter's interpolated table; "
             "the BOS row's share of the damage within L stated from the per-seed differences, whatever their size, "
             "and whether it holds in every seed.")),
    # --------------------------------------------------------------- Part IV: today's models
    _r("ex-today-critical", "todays_models", "computation",
       (1.5, "The formula with d = 128, b = 10^4, L = 8192 gives the number of complete pairs, confirmed with "
             "complete_pairs."),
       (1.5, "The search over powers of ten finds the smallest base for which at most half of the pairs complete a "
             "turn.")),
    _r("ex-today-mrope-text", "todays_models", "proof",
       (1.5, "M-RoPE with ids (p, p, p): every pair turns by p b^(-2i/d), the angle of 1-D RoPE, whatever the "
             "sections."),
       (1.5, "Axial 2-D RoPE uses the frequencies of a d/2-wide RoPE twice: two pairs share each frequency and the "
             "slowest differs, so (p, p) is not 1-D RoPE.")),
    _r("ex-today-decoupled", "todays_models", "proof",
       (1.5, "(a) Without RoPE the score is h_m^T (W^Q^T W^UK) c_n, one matrix folded once; with RoPE R_{n-m} sits "
             "between them and changes with every pair of positions."),
       (1, "(b) The decoupled logit with DeepSeek-V3's widths (content 128, rotary 64, scale 1/sqrt(192))."),
       (1, "The check with cpe.decoupled_rope_logits: the content part position-free, the whole logit a function of "
           "offsets.")),
    _r("ex-today-rope2d", "todays_models", "coding",
       (2, "axial_rope_2d rotates the first d/2 dimensions by the column and the other d/2 by the row, each with the "
           "1-D interleaved cpe.apply_rope of half width (frequencies b^(-4i/d)), and concatenates them."),
       (1, "Shapes and the position columns are right: positions (seq, 2) as (column, row), d divisible by 4."),
       (1, "The chapter's check runs: equal to cpe.rope_2d, and scores depend only on the 2-D offset.")),
    _r("ex-today-config", "todays_models", "written",
       (2, "A complete row for a model not in the table: scheme, base, rotated part, layout, scaling with its "
           "factors, context, each with the file it comes from (config.json, the modelling code)."),
       (1, "Names the fields that could not be verified and why."),
       (1, "max_position_embeddings is an upper limit that can differ from the training length (larger, or already "
           "including an extension), with an example.")),
]

RUBRICS: dict[str, Rubric] = {r.label: r for r in _ALL}
if len(RUBRICS) != len(_ALL):
    raise RuntimeError("two rubrics share a label")


def rubrics_for_chapter(chapter: str) -> list[Rubric]:
    """The rubrics of ``chapter`` (a notebook's file name without ``.ipynb``), in the book's order."""
    check_str("chapter", chapter)
    return [r for r in RUBRICS.values() if r.chapter == chapter]


def rubric_text(rubric: Rubric) -> str:
    """The rubric as markdown: a heading with the total, one line per criterion with its points."""
    if not isinstance(rubric, Rubric):
        raise TypeError(f"rubric must be a Rubric, got {type(rubric).__name__}")
    lines = [f"**Marking ({rubric.points:g} points, {rubric.kind})**", ""]
    lines += [f"- {c.points:g} pt: {_markdown_safe(c.text)}" for c in rubric.criteria]
    lines += ["", "Give part of a criterion's points for a partly right answer; a correct answer reached another way "
                  "earns the same points."]
    return "\n".join(lines)


def _markdown_safe(text: str) -> str:
    """``text`` with the characters markdown would read as emphasis escaped (``x_{m+k}``, ``a * b``)."""
    return text.replace("\\", "\\\\").replace("_", "\\_").replace("*", "\\*")
