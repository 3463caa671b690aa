"""Reference solutions pass, stubs fail helpfully, and the classic mistakes are named.

The reference solutions below are written here without course_pe, and the checks' own references do not call the
library either: test_references_do_not_depend_on_the_library replaces every library function an exercise locks with a
wrong one and shows that no expected value changes and that right and wrong answers are still told apart."""

import importlib
import linecache
import math
import time

import numpy as np
import pytest
import torch

import course_pe as cpe
from _class_tool import correct_t5_source
from course_pe.coursework.environment import unavailable_sentence
from course_pe.coursework.exercises import (
    EXERCISES,
    GRADING_SETUP,
    Outcome,
    call_case,
    chapters,
    check,
    exercises_for_chapter,
    judge,
    library_sentence,
    to_output,
    tolerance_text,
)

# ----------------------------------------------------------------------------- reference solutions (written here)


def sinusoidal_table(n, d):
    p = torch.arange(n, dtype=torch.float64)[:, None]
    w = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    t = torch.zeros(n, d, dtype=torch.float64)
    t[:, 0::2], t[:, 1::2] = torch.sin(p * w), torch.cos(p * w)
    return t


def shift_matrix(k, d):
    # block i rotates (sin, cos) of pair i by the angle k * w_i: [[cos, sin], [-sin, cos]] (angle addition)
    w = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    m = torch.zeros(d, d, dtype=torch.float64)
    c, s = torch.cos(k * w), torch.sin(k * w)
    m[0::2, 0::2], m[0::2, 1::2] = torch.diag(c), torch.diag(s)
    m[1::2, 0::2], m[1::2, 1::2] = torch.diag(-s), torch.diag(c)
    return m


def add_positional_encoding(x):
    return math.sqrt(x.shape[-1]) * x + sinusoidal_table(x.shape[1], x.shape[-1]).to(x.dtype)


def rope_rotation(x, positions):
    d = x.shape[-1]
    theta = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = positions.to(torch.float64)[:, None] * theta
    a, b = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = a * torch.cos(angle) - b * torch.sin(angle)
    out[..., 1::2] = a * torch.sin(angle) + b * torch.cos(angle)
    return out


def _correct_t5_bucket():
    """The correct student answer of tools/make_class_submissions.py (no course_pe), also submitted by test_grade."""
    namespace: dict = {}
    exec(correct_t5_source(), namespace)
    return namespace["t5_bucket"]


t5_bucket = _correct_t5_bucket()


def alibi_slopes(n):
    # Press et al. (2022): the geometric sequence of the nearest lower power of two, then every other slope of the
    # next power of two for the remaining heads
    def powers(m):
        return [2.0 ** (-8.0 * (k + 1) / m) for k in range(m)]

    low = 1 << (n.bit_length() - 1)
    return torch.tensor(powers(low) + powers(2 * low)[0::2][: n - low], dtype=torch.float64)


def half_to_interleaved(x):
    h = x.shape[-1] // 2
    return torch.stack([x[..., :h], x[..., h:]], dim=-1).flatten(-2)


def extrapolation_gap(losses, length):
    return float(losses[length:].nanmean() - losses[:length].nanmean())


REFERENCES = {f.__name__: f for f in [sinusoidal_table, shift_matrix, add_positional_encoding, rope_rotation,
                                       t5_bucket, alibi_slopes, half_to_interleaved, extrapolation_gap]}


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_reference_solution_passes(exercise_id):
    ex = EXERCISES[exercise_id]
    report = check(exercise_id, REFERENCES[ex.function])
    assert report.passed, str(report)
    assert "PASSED" in str(report) and report.score == 1.0


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_stub_fails_with_a_helpful_message(exercise_id):
    def stub(*args, **kwargs):
        raise NotImplementedError

    report = check(exercise_id, stub)
    assert not report.passed and report.score == 0.0
    assert "stub" in str(report) and "FAILED" in str(report)


def test_crashing_solution_is_reported_not_raised():
    report = check("sinusoidal_table", lambda n, d: 1 / 0)
    assert not report.passed and "ZeroDivisionError" in str(report)


def test_unknown_exercise():
    with pytest.raises(ValueError, match="unknown exercise"):
        check("nope", lambda: None)


# ----------------------------------------------------------------------------- the sources' mistakes are named


def table_variant(n, d, cos_exponent_odd=False, swapped=False):
    p = np.arange(n)[:, None]
    i = np.arange(d // 2)[None, :]
    w = 10000.0 ** (-2 * i / d)
    if swapped:
        w = w[:, ::-1]
    wc = 10000.0 ** (-(2 * i + 1) / d) if cos_exponent_odd else w
    t = np.zeros((n, d))
    t[:, 0::2], t[:, 1::2] = np.sin(p * w), np.cos(p * wc)
    return t


def test_odd_cosine_exponent_is_diagnosed():
    report = check("sinusoidal_table", lambda n, d: table_variant(n, d, cos_exponent_odd=True))
    assert not report.passed and "(2i+1)/d_model" in report.mistake


def test_swapped_fast_slow_is_diagnosed():
    report = check("sinusoidal_table", lambda n, d: table_variant(n, d, swapped=True))
    assert not report.passed and "swapped" in report.mistake


def test_doubled_rope_exponent_is_diagnosed():
    def doubled(x, positions):
        d = x.shape[-1]
        inv = 10000 ** (-2 * torch.arange(0, d, 2, dtype=torch.float64) / d)  # source 004's frequencies
        return cpe.apply_rope(x, positions, inv_freq=inv)

    report = check("rope_rotation", doubled)
    assert not report.passed and "doubled" in report.mistake


def test_sequence_first_table_on_batch_first_input_is_diagnosed():
    def seq_first(x):
        b, s, d = x.shape
        pe = cpe.sinusoidal_encoding(64, d, dtype=x.dtype).unsqueeze(0).transpose(0, 1)  # (max_len, 1, d)
        return math.sqrt(d) * x + pe[: x.size(0), :]  # source 003's forward, with the scale

    report = check("add_positional_encoding", seq_first)
    assert not report.passed and "batch size" in report.mistake


def test_other_named_mistakes():
    assert "query - key" in check("t5_bucket", lambda r, b, n, m: t5_bucket(-r, b, n, m)).mistake
    naive = lambda n: torch.tensor([2.0 ** (-8.0 * (k + 1) / n) for k in range(n)], dtype=torch.float64)  # noqa: E731
    assert "powers of two" in check("alibi_slopes", naive).mistake
    assert "inverse" in check("half_to_interleaved", cpe.interleaved_to_half).mistake
    assert "transposed" in check("shift_matrix", lambda k, d: cpe.shift_matrix(-k, d)).mistake
    assert "clockwise" in check("rope_rotation", lambda x, p: cpe.apply_rope(x, -p)).mistake
    off = lambda t, n: float(t[n - 1 :].nanmean() - t[: n - 1].nanmean())  # noqa: E731
    assert "off by one" in check("extrapolation_gap", off).mistake


def test_check_writes_nothing_even_if_asked_through_the_environment(tmp_path, monkeypatch):
    # the old grader read verdicts from a file named by COURSE_PE_RESULTS; a submission could forge them
    out = tmp_path / "results.jsonl"
    monkeypatch.setenv("COURSE_PE_RESULTS", str(out))
    check("alibi_slopes", alibi_slopes)
    assert not out.exists() and list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- fair comparisons


def float32(fn):
    def wrapped(*args):
        out = fn(*args)
        return out.float() if isinstance(out, torch.Tensor) and out.is_floating_point() else \
            np.asarray(out, dtype=np.float32) if not isinstance(out, (torch.Tensor, float)) else np.float32(out)

    return wrapped


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_a_correct_float32_answer_passes_visible_and_hidden_cases(exercise_id):
    ex = EXERCISES[exercise_id]
    fn = REFERENCES[ex.function]
    if exercise_id not in ("t5_bucket",):
        fn = float32(fn)
    for seed in range(3):
        cases = ex.cases(np.random.default_rng(seed))
        assert any(c.hidden for c in cases) and any(not c.hidden for c in cases)
        outcomes = [call_case(fn, c.args) for c in cases]
        report = judge(exercise_id, cases, outcomes)
        assert report.passed, str(report)


def test_the_course_alibi_slopes_is_precise_enough_and_refused_with_the_graders_sentence():
    """cpe.alibi_slopes returns float32 by default: its values are within the exercise's tolerance (a 1e-9 tolerance
    used to fail them), and the notebook's check refuses the call as the grader does, with the grader's sentence
    (student G2: "PASSED" in the notebook, 0 from the grader)."""
    cases = EXERCISES["alibi_slopes"].cases(np.random.default_rng(0))
    assert judge("alibi_slopes", cases, [call_case(cpe.alibi_slopes, c.args) for c in cases]).passed
    report = check("alibi_slopes", cpe.alibi_slopes)
    assert not report.passed and report.library_called == ["course_pe.alibi.alibi_slopes"]
    assert library_sentence(["course_pe.alibi.alibi_slopes"]) in str(report)


def test_hidden_cases_are_randomised_and_reproducible():
    for ex in EXERCISES.values():
        a, b, c = (ex.cases(np.random.default_rng(s)) for s in (1, 1, 2))
        assert [x.name for x in a] == [x.name for x in b]
        visible = ex.cases(None)
        assert all(not x.hidden for x in visible) and [x.name for x in a[: len(visible)]] == [x.name for x in visible]
    names = {tuple(x.name for x in EXERCISES["alibi_slopes"].cases(np.random.default_rng(s)) if x.hidden)
             for s in range(10)}
    assert len(names) > 1


def test_failure_says_what_differed_before_the_hint():
    wrong_shape = check("sinusoidal_table", lambda n, d: sinusoidal_table(n, d).T)
    assert wrong_shape.difference.startswith("shape: expected (10, 4), got (4, 10)") and wrong_shape.mistake is None
    half = check("sinusoidal_table", lambda n, d: sinusoidal_table(n, d).half())
    assert half.difference.startswith("dtype: got float16") and half.mistake is None
    text = str(check("alibi_slopes", lambda n: [2.0 ** (-8.0 * (k + 1) / n) for k in range(n)]))
    assert text.index("what differs: value at head 0") < text.index("expected:") < text.index("diagnosis:") \
        < text.index("hint:")
    assert "alibi_slopes(6)" in text.splitlines()[0]


def test_answers_that_are_not_numbers_are_rejected():
    for bad in (None, "0.5", [object()], {"a": 1}, [[1.0], [1.0, 2.0]]):
        report = check("alibi_slopes", lambda n, bad=bad: bad)
        assert not report.passed and report.difference.startswith("type:"), bad
    with pytest.raises(TypeError):
        to_output(torch.zeros(2, dtype=torch.bfloat16))


def test_a_library_call_fails_the_exercise_even_with_right_values():
    cases = EXERCISES["alibi_slopes"].cases(None)
    outcomes = [Outcome("ok", c.expected, library_called=("course_pe.alibi.alibi_slopes",)) for c in cases]
    report = judge("alibi_slopes", cases, outcomes)
    assert not report.passed and "course_pe.alibi.alibi_slopes" in str(report)


def test_registry_interface():
    assert chapters() == list(dict.fromkeys(ex.chapter for ex in EXERCISES.values()))
    assert exercises_for_chapter("relative") == ["t5_bucket", "alibi_slopes"]
    with pytest.raises(ValueError, match="chapter"):
        exercises_for_chapter("nope")
    for ex in EXERCISES.values():
        assert ex.check is getattr(cpe.exercises, f"check_{ex.id}") and ex.check.__name__ == f"check_{ex.id}"
        for dotted in ex.library:  # every name removed from the grading build exists
            parts = dotted.split(".")
            obj, module = cpe, 1
            for k in range(2, len(parts)):  # the longest importable prefix (course_pe.benchmark is not imported by
                try:                          # course_pe itself)
                    obj, module = importlib.import_module(".".join(parts[:k])), k
                except ImportError:
                    break
            for part in parts[module:]:
                obj = getattr(obj, part)


# ----------------------------------------------------------------------------- references independent of the library


def _break_library(monkeypatch, dotted_names):
    """Replace each locked library function (and every alias of it in course_pe's namespaces) by a wrong one."""
    import importlib

    import course_pe.coursework.exercises as exercises_module

    def wrong(*args, **kwargs):
        raise AssertionError("a check called the library it checks")

    for dotted in dotted_names:
        parts = dotted.split(".")
        for split in range(len(parts) - 1, 0, -1):
            try:
                owner = importlib.import_module(".".join(parts[:split]))
                break
            except ImportError:
                continue
        for attr in parts[split:-1]:
            owner = getattr(owner, attr)
        original = getattr(owner, parts[-1])
        monkeypatch.setattr(owner, parts[-1], wrong)
        for namespace in (cpe, exercises_module):
            for name, value in list(vars(namespace).items()):
                if value is original:
                    monkeypatch.setattr(namespace, name, wrong)


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_references_do_not_depend_on_the_library(exercise_id, monkeypatch):
    ex = EXERCISES[exercise_id]
    before = [(c.name, c.expected, [m for _, m in c.mistakes]) for c in ex.cases(np.random.default_rng(7))]
    _break_library(monkeypatch, ex.library)
    after = [(c.name, c.expected, [m for _, m in c.mistakes]) for c in ex.cases(np.random.default_rng(7))]
    assert [a[0] for a in after] == [b[0] for b in before]
    for (_, e0, m0), (_, e1, m1) in zip(before, after):
        assert np.array_equal(e0, e1) and all(np.array_equal(x, y) for x, y in zip(m0, m1))
    # with the library broken, a right answer (written here) still passes and a wrong one still fails
    assert check(exercise_id, REFERENCES[ex.function]).passed
    assert not check(exercise_id, lambda *args: REFERENCES[ex.function](*args) + 1).passed


def test_t5_check_uses_an_independent_reference(monkeypatch):
    """If the library's bucket function were wrong, the check would still accept T5's function and reject the
    wrong one: the reference is a transcription of T5's code, not the library."""
    import course_pe.t5 as t5_module

    real = t5_module.t5_relative_position_bucket

    def off_by_one(rel, **kw):
        return real(rel, **kw).clamp(max=kw.get("num_buckets", 32) - 2)  # the last bucket never used

    monkeypatch.setattr(t5_module, "t5_relative_position_bucket", off_by_one)
    monkeypatch.setattr(cpe, "t5_relative_position_bucket", off_by_one)
    monkeypatch.setattr(cpe.exercises, "t5_relative_position_bucket", off_by_one, raising=False)  # an import of it
    assert check("t5_bucket", t5_bucket).passed
    report = check("t5_bucket", lambda r, b, n, m: off_by_one(r, bidirectional=b, num_buckets=n, max_distance=m))
    assert not report.passed and report.difference.startswith("value")
    # and the transcription agrees with test_relative's scalar reference on hidden settings too
    from test_relative import t5_reference

    for case in EXERCISES["t5_bucket"].cases(np.random.default_rng(3)):
        rel, bidirectional, nb, md = case.args
        assert case.expected.tolist() == [t5_reference(int(r), bidirectional, nb, md) for r in rel]


def test_messages_name_the_input_and_preview_the_difference():
    """Student problem 13: a failure named an index into the flattened test input ("index (110,)" for the offset -90)
    and previewed the first 6 entries, identical when the first difference came later."""
    namespace: dict = {}
    exec(correct_t5_source().replace("(max_exact + scaled.long())", "(max_exact + scaled.round().long())"), namespace)
    rounding = namespace["t5_bucket"]
    report = check("t5_bucket", rounding)
    assert not report.passed and report.difference.startswith("value at offset ")
    offset = int(report.difference.split("value at offset ")[1].split()[0])
    entry = int(report.difference.split("(entry ")[1].split(")")[0])
    assert offset == entry - 200  # the visible offsets run from -200
    assert report.expected != report.got and f"entries {entry - 2} to" in report.expected
    base_1000 = check("sinusoidal_table", lambda n, d: sinusoidal_table(n, d) if n < 10 else
                      torch.tensor(np.stack([np.sin(np.arange(n)[:, None] * 1000.0 ** (-np.arange(0, d, 2) / d)),
                                             np.cos(np.arange(n)[:, None] * 1000.0 ** (-np.arange(0, d, 2) / d))],
                                            axis=-1).reshape(n, d)))
    assert base_1000.difference.startswith("value at position 1, dimension 2:"), base_1000.difference
    assert base_1000.expected != base_1000.got


@pytest.mark.parametrize("exception", [SystemExit(3), GeneratorExit(), BaseException("custom")])
def test_base_exceptions_from_the_student_are_reported_not_raised(exception):
    """Red-team library probe: a function raising SystemExit escaped ``check`` (``call_case`` caught only Exception)
    and ended the notebook cell; every BaseException but the reader's own Ctrl-C is now feedback."""

    def student(n):
        raise exception

    report = check("alibi_slopes", student)
    assert not report.passed and report.error.startswith(type(exception).__name__), report.error


def test_keyboard_interrupt_still_interrupts():
    def student(n):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        check("alibi_slopes", student)


# ----------------------------------------------------------------------------- one judge: what the grader refuses


def notebook_cell(source: str, name: str, namespace: dict | None = None) -> dict:
    """Run ``source`` as a notebook cell runs: its source known to ``linecache`` under a name that is no file (as
    IPython registers a cell), in ``namespace`` (default: a fresh one after the grader's set-up cell)."""
    filename = f"<notebook cell {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    if namespace is None:
        namespace = {"__name__": "__main__"}
        exec(compile(GRADING_SETUP, "<set-up>", "exec"), namespace)
    exec(compile(source, filename, "exec"), namespace)
    return namespace


LIBRARY_ANSWERS = {
    # student G2: "PASSED" in the notebook, 0 from the grader, for three calls no statement forbade
    "add_positional_encoding": ("def add_positional_encoding(x):\n"
                                "    return cpe.SinusoidalPositionalEncoding(x.shape[-1], scale_embeddings=True)(x)\n",
                                "course_pe.sinusoidal.SinusoidalPositionalEncoding.forward"),
    "alibi_slopes": ("def alibi_slopes(n):\n    return cpe.alibi_slopes(n, dtype=torch.float64)\n",
                     "course_pe.alibi.alibi_slopes"),
    "half_to_interleaved": ("from course_pe import half_to_interleaved as convert\n"
                            "def half_to_interleaved(x):\n    return convert(x)\n", "course_pe.rope.half_to_interleaved"),
    # the library only at the cell's top level (the grader's cell fails there, so its function is never defined)
    "sinusoidal_table": ("_probe = cpe.sinusoidal_encoding_np(2, 2)\n"
                         "def sinusoidal_table(n, d):\n"
                         "    p = np.arange(n)[:, None] / 10000 ** (np.arange(0, d, 2) / d)\n"
                         "    return np.stack([np.sin(p), np.cos(p)], axis=-1).reshape(n, d)\n",
                         "course_pe.sinusoidal.sinusoidal_encoding_np"),
    "t5_bucket": ("def t5_bucket(r, b, nb, md):\n"
                  "    return cpe.t5_relative_position_bucket(r, bidirectional=b, num_buckets=nb, max_distance=md)\n",
                  "course_pe.t5.t5_relative_position_bucket"),
}


@pytest.mark.parametrize("exercise_id", sorted(LIBRARY_ANSWERS))
def test_the_check_refuses_the_library_with_the_graders_sentence(exercise_id):
    source, dotted = LIBRARY_ANSWERS[exercise_id]
    fn = notebook_cell(source, f"library {exercise_id}")[EXERCISES[exercise_id].function]
    report = check(exercise_id, fn)
    assert not report.passed and report.library_called == [dotted], str(report)
    assert library_sentence([dotted]) in str(report)


def test_the_check_refuses_modules_that_grading_does_not_have():
    """Red team N1: transformers' T5 and BLOOM code passed both exercises of the relative chapter. Grading has no
    transformers; the notebook's check says so, with the sentence the grader's report gives, whether the cell imports
    it, uses an object imported in another cell, or calls a helper (defined in another cell) that imports it."""
    pytest.importorskip("transformers")
    direct = notebook_cell("from transformers.models.t5.modeling_t5 import T5Attention\n"
                           "def t5_bucket(r, b, nb, md):\n"
                           "    return T5Attention._relative_position_bucket(r, b, nb, md)\n", "t5 from transformers")
    report = check("t5_bucket", direct["t5_bucket"])
    assert not report.passed and report.unavailable == ["transformers"], str(report)
    assert unavailable_sentence(["transformers"]) in str(report)
    namespace = notebook_cell("from transformers.models.bloom.modeling_bloom import build_alibi_tensor\n", "bloom import")
    notebook_cell("def alibi_slopes(n):\n"
                  "    mask = torch.ones(1, 2)\n"
                  "    return build_alibi_tensor(mask, n, torch.float32)[:, 0, 1]\n", "bloom use", namespace)
    assert check("alibi_slopes", namespace["alibi_slopes"]).unavailable == ["transformers"]
    namespace = notebook_cell("def _slopes(n):\n"
                              "    import transformers.models.bloom.modeling_bloom as bloom\n"
                              "    return bloom.build_alibi_tensor(torch.ones(1, 2), n, torch.float32)[:, 0, 1]\n",
                              "helper")
    notebook_cell("def alibi_slopes(n):\n    return _slopes(n)\n", "uses the helper", namespace)
    assert check("alibi_slopes", namespace["alibi_slopes"]).unavailable == ["transformers"]


def test_printing_through_a_kernels_stream_is_not_a_module_use():
    """A notebook's print goes through the kernel's stream (ipykernel, pytest's capture here): the machinery of the
    kernel is never held against an answer."""
    namespace = notebook_cell("import sys\n"
                              "def alibi_slopes(n):\n"
                              "    print('heads', n, file=sys.stdout)\n"
                              "    c = 1 << (n.bit_length() - 1)\n"
                              "    return [2 ** (-8 * (k + 1) / c) for k in range(c)] + "
                              "[2 ** (-8 * (k + 1) / (2 * c)) for k in range(0, 2 * (n - c), 2)]\n", "printing")
    report = check("alibi_slopes", namespace["alibi_slopes"])
    assert report.passed, str(report)


def test_the_tolerance_is_the_exercises_whatever_the_dtype():
    """Red team N10-N12, student G1/G4: the tolerance was chosen from the dtype an answer was returned in, so a
    float32 computation cast to float64 (or returned as a Python float) was held to float64's. Now one tolerance per
    exercise, stated in its text: an error just inside it passes in any dtype, one just outside fails in any dtype."""
    for exercise_id, exercise in EXERCISES.items():
        if exercise.tolerance is None:
            assert exercise_id == "t5_bucket"
            continue
        for case in exercise.cases(np.random.default_rng(0)):
            for dtype in (np.float64, np.float32):
                inside = np.asarray(case.expected + 0.5 * exercise.tolerance).astype(dtype)
                outside = np.asarray(case.expected + 1.5 * exercise.tolerance + 1e-7 * np.abs(case.expected))
                assert judge(exercise_id, [case], [Outcome("ok", inside)]).passed, (exercise_id, case.name, dtype)
                assert not judge(exercise_id, [case], [Outcome("ok", outside.astype(dtype))]).passed, \
                    (exercise_id, case.name, dtype)
        assert f"within {tolerance_text(exercise.tolerance)}" in " ".join((exercise.cases.__doc__ or "").split()), \
            exercise_id


def test_classic_mistakes_are_far_outside_the_tolerances():
    """The tolerances leave no classic mistake inside: on every visible case each listed mistake differs from the
    reference by more than 10 times the exercise's tolerance somewhere (where it differs at all)."""
    for exercise_id, exercise in EXERCISES.items():
        for case in exercise.cases(None):
            for description, wrong in case.mistakes:
                difference = np.max(np.abs(np.asarray(wrong, dtype=np.float64) - case.expected)) \
                    if np.shape(wrong) == case.expected.shape else np.inf
                assert difference == 0 or difference >= (10 * exercise.tolerance if exercise.tolerance else 1), \
                    (exercise_id, case.name, description, difference)


def test_t5_boundaries_accept_either_neighbour_and_nothing_else():
    """T5's float32 logarithm and a float64 one truncate to different buckets where the logarithm lands on a bucket
    boundary (18 buckets, max_distance 128: offsets +-8, +-16, +-64): either is accepted there, and T5's own float32
    value always lies in the accepted range; elsewhere exactly T5's bucket."""
    from course_pe.coursework.exercises import INT_DTYPES, Case, _t5_bounds, _t5_buckets

    rel = torch.arange(-200, 201)
    expected = _t5_buckets(rel, True, 18, 128).numpy()
    float64 = _t5_buckets(rel, True, 18, 128, log_dtype=torch.float64).numpy()
    lower, upper = _t5_bounds(rel.numpy(), True, 18, 128)
    assert sorted(rel[np.nonzero(float64 != expected)[0]].tolist()) == [-64, -16, -8, 8, 16, 64]
    case = Case("boundaries", (rel, True, 18, 128), expected, exact=True, dtypes=INT_DTYPES, lower=lower, upper=upper)
    assert judge("t5_bucket", [case], [Outcome("ok", float64)]).passed
    assert np.all(upper - lower <= 1) and np.sum(upper > lower) < 40
    off = expected.copy()
    off[np.argmax(upper == lower)] += 1
    report = judge("t5_bucket", [case], [Outcome("ok", off)])
    assert not report.passed and "bucket boundary" not in report.difference
    beside = float64.copy()
    at = rel.tolist().index(8)
    beside[at] = upper[at] + 1  # next to the accepted pair of a boundary: refused, and the message says which pair
    report = judge("t5_bucket", [case], [Outcome("ok", beside)])
    assert not report.passed and "bucket boundary" in report.difference
    for seed in range(5):  # T5's own float32 buckets lie within the bounds of every case
        for c in EXERCISES["t5_bucket"].cases(np.random.default_rng(seed)):
            assert np.all(c.lower <= c.expected) and np.all(c.expected <= c.upper)


def test_every_statement_states_its_tolerance_and_what_it_refuses():
    """The tolerance is part of the exercise: its statement in the chapter states it (the number the check and the
    grader use), and an exercise whose library functions the grader removes says that they are not allowed."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    chapters_found = {p.stem: p for p in (root / "book").rglob("*.ipynb") if "_build" not in p.parts}
    for exercise_id, exercise in EXERCISES.items():
        nb = json.loads(chapters_found[exercise.chapter].read_text(encoding="utf-8"))
        statements = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"
                      and "{exercise}" in "".join(c["source"]) and f"check_{exercise_id}`" in "".join(c["source"])]
        assert len(statements) == 1, exercise_id
        text = " ".join(statements[0].split("```{solution-start}")[0].split())
        if exercise.tolerance is not None:
            assert f"`{tolerance_text(exercise.tolerance)}`" in text, (exercise_id, text)
            assert any(p in text for p in ("whatever dtype", "float32 arithmetic passes", "float32 copy passes")), \
                (exercise_id, text)
        if exercise.library:
            assert "without" in text or "not let" in text, (exercise_id, text)


def test_the_check_applies_the_graders_time_limit(monkeypatch):
    """The grader allows CALL_TIMEOUT seconds for the calls of an exercise (visible and hidden cases together): a
    function that takes longer on the visible cases alone fails the notebook's check too, and one that takes a third
    of it passes with a note, instead of "PASSED" in the notebook and 0 from the grader."""
    import course_pe.coursework.exercises as exercises_module

    monkeypatch.setattr(exercises_module, "CALL_TIMEOUT", 0.9)
    delay = {"seconds": 0.0}

    def slow(n):
        time.sleep(delay["seconds"])
        return alibi_slopes(n)

    assert check("alibi_slopes", slow).note is None
    delay["seconds"] = 0.05  # 9 visible cases: 0.45 s, more than a third of 0.9 s
    report = check("alibi_slopes", slow)
    assert report.passed and "the grader allows 0.9 s" in report.note and "note:" in str(report)
    delay["seconds"] = 0.12  # 1.08 s
    report = check("alibi_slopes", slow)
    assert not report.passed and report.failed_case == "the time limit" and "visible cases alone" in report.error


def test_axes_of_length_one_do_not_decide():
    """A table returned as the Annotated Transformer keeps it (``pe.unsqueeze(0)``: shape (1, n, d)), slopes of shape
    (heads, 1, 1) as x-transformers stores them, a gap kept as a (1,) tensor: the same entries in the same order, judged
    on their values, by the check and the grader alike. A transposed or wrongly sized answer still fails on its shape."""
    assert check("sinusoidal_table", lambda n, d: sinusoidal_table(n, d).unsqueeze(0)).passed
    assert check("alibi_slopes", lambda n: alibi_slopes(n)[:, None, None]).passed
    assert check("extrapolation_gap", lambda x, n: torch.tensor([extrapolation_gap(x, n)])).passed
    assert check("sinusoidal_table", lambda n, d: sinusoidal_table(n, d).T).difference.startswith("shape")
    assert check("alibi_slopes", lambda n: alibi_slopes(n)[:-1, None]).difference.startswith("shape")
