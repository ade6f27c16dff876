"""Strength selection on validation (the OrthoReg authors' protocol), for any strength knob.

`evaluate(strength) -> {name: accuracy}` can set a task vector's strength, a closed-form strength or a
LoRA-route strength; the sweep never knows which (`task_vector_evaluator` and `edit_evaluator` build
the usual ones).
- addition: maximise the mean normalised accuracy, mean_t acc_t(c) / acc_t(fine-tuned);
- negation: minimise the target's accuracy subject to control(c) >= 0.95 x control(zero-shot).
Ties go to the smallest strength.
"""

from __future__ import annotations

from typing import Callable, Mapping, Protocol, Sequence

import attrs
import numpy as np

from ...edits.edit import Edit
from ...encoding.zeroshot import accuracy
from ...errors import PlatonicError
from ...finetune.weightspace import TaskVector
from ...progress import progress as progress_bar
from ...protocol.encoder import DualEncoder
from ...tasks import Task

Evaluate = Callable[[float], Mapping[str, float]]
DEFAULT_STRENGTHS: tuple[float, ...] = tuple(float(c) for c in np.linspace(0.0, 1.0, 21))


class Scalable(Protocol):
    """An edit with a strength knob (OperatorEdit, LoraEdit): `scaled(c)` is the same edit at strength c."""

    def scaled(self, strength: float) -> Edit: ...


def task_vector_evaluator(encoder: DualEncoder, vector: TaskVector, tasks: Sequence[Task], split: str = "test",
                          allow_other_target: bool = False) -> Evaluate:
    """c -> accuracies of theta_pre + c * tau on each task (tau on the media tower; undone after each c;
    `allow_other_target`: tau of another model of the same architecture)."""

    def evaluate(strength: float) -> dict[str, float]:
        with vector.apply_to(encoder.media_encoder, strength, allow_other_target):
            return {task.name: accuracy(encoder, task, split) for task in tasks}

    return evaluate


def edit_evaluator(encoder: DualEncoder, edit: Scalable, tasks: Sequence[Task], split: str = "test") -> Evaluate:
    """c -> accuracies with `edit.scaled(c)` applied (closed-form or LoRA-route strength; removed after each c)."""

    def evaluate(strength: float) -> dict[str, float]:
        with edit.scaled(strength).applied_to(encoder):
            return {task.name: accuracy(encoder, task, split) for task in tasks}

    return evaluate


@attrs.frozen
class Sweep:
    """Every strength tried, its accuracies, its score (higher is better) and feasibility; `best` is the pick."""

    strengths: tuple[float, ...]
    results: tuple[dict[str, float], ...]
    scores: tuple[float, ...]
    feasible: tuple[bool, ...]
    best_index: int

    @property
    def best(self) -> float:
        return self.strengths[self.best_index]

    @property
    def best_result(self) -> dict[str, float]:
        return self.results[self.best_index]


def _run(evaluate: Evaluate, strengths: Sequence[float], needed: Sequence[str], progress: bool) -> tuple[tuple[float, ...], tuple[dict[str, float], ...]]:
    strengths = tuple(float(c) for c in strengths)
    if not strengths:
        raise PlatonicError("a strength sweep needs at least one strength")
    results = []
    for c in progress_bar(strengths, desc="strength sweep", disable=not progress, leave=False):
        result = {k: float(v) for k, v in evaluate(c).items()}
        missing = [k for k in needed if k not in result]
        if missing:
            raise PlatonicError(f"evaluate({c}) returned {sorted(result)}, missing {missing}")
        results.append(result)
    return strengths, tuple(results)


def _pick(strengths: tuple[float, ...], results: tuple[dict[str, float], ...], scores: list[float], feasible: list[bool]) -> Sweep:
    candidates = [i for i, ok in enumerate(feasible) if ok]
    if not candidates:
        raise PlatonicError("no strength in the sweep satisfies the constraint (include 0 to keep the unedited model)")
    best = max(candidates, key=lambda i: (scores[i], -strengths[i]))
    return Sweep(strengths, results, tuple(scores), tuple(feasible), best)


def select_addition(
    evaluate: Evaluate, finetuned: Mapping[str, float], strengths: Sequence[float] = DEFAULT_STRENGTHS, progress: bool = False
) -> Sweep:
    """argmax_c mean_t acc_t(c) / finetuned[t] over the tasks named in `finetuned` (single-task fine-tuned accuracies)."""
    if not finetuned or any(v <= 0 for v in finetuned.values()):
        raise PlatonicError(f"fine-tuned reference accuracies must be positive, got {dict(finetuned)}")
    strengths, results = _run(evaluate, strengths, list(finetuned), progress)
    scores = [float(np.mean([r[t] / finetuned[t] for t in finetuned])) for r in results]
    return _pick(strengths, results, scores, [True] * len(strengths))


def select_negation(
    evaluate: Evaluate,
    target: str,
    control: str,
    zero_shot_control: float,
    strengths: Sequence[float] = DEFAULT_STRENGTHS,
    min_control_ratio: float = 0.95,
    progress: bool = False,
) -> Sweep:
    """argmin_c acc_target(c) subject to acc_control(c) >= min_control_ratio * zero_shot_control."""
    strengths, results = _run(evaluate, strengths, [target, control], progress)
    floor = min_control_ratio * zero_shot_control
    return _pick(strengths, results, [-r[target] for r in results], [r[control] >= floor for r in results])
