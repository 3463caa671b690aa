"""Rubrics for the written, proof, design and experiment exercises of every chapter (placeholder; filled below)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CHAPTERS", "Criterion", "RUBRICS", "Rubric", "rubrics_for_chapter"]

#: the chapters that have exercises, in the book's order (tests/test_rubrics.py checks it against _toc.yml)
CHAPTERS = ("why_order", "sinusoidal", "worked_example", "shift_theorem", "model_input", "learned", "encoder_decoder",
            "relative", "rope_first_principles", "rope_proof", "rope_implementation", "generation", "extrapolation",
            "context_extension", "learned_beyond", "todays_models")


@dataclass(frozen=True)
class Criterion:
    points: float
    text: str


@dataclass(frozen=True)
class Rubric:
    label: str
    chapter: str
    kind: str
    criteria: tuple[Criterion, ...]

    @property
    def points(self) -> float:
        return float(sum(c.points for c in self.criteria))


RUBRICS: dict[str, Rubric] = {}


def rubrics_for_chapter(chapter: str) -> list[Rubric]:
    return [r for r in RUBRICS.values() if r.chapter == chapter]
