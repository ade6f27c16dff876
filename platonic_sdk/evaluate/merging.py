"""Weight-space merging studies (OrthoReg's protocol): fine-tune per task, merge task vectors, pick the coefficient.

For each OrthoReg strength lambda: tau_t = fine-tune(theta_pre, t; lambda) for every task, then
theta(c) = theta_pre + c * sum_t tau_t (addition) or theta_pre - c * tau_target (negation), with c
chosen on a validation part of each train split (never the test split) and reported on test.
"""

from __future__ import annotations

from typing import Sequence

import attrs
import numpy as np

from ..errors import PlatonicError
from ..finetune import FinetuneConfig, TaskVector, finetune
from ..protocol import DualEncoder
from ..tasks import Task
from .selection import DEFAULT_COEFS, Sweep, select_addition, select_negation, task_vector_evaluator
from .zeroshot import accuracy


@attrs.frozen
class MergeResult:
    """One OrthoReg strength: the selected coefficient, its validation sweep and test accuracies."""

    orthoreg: float
    coef: float
    sweep: Sweep
    zero_shot: dict[str, float]
    finetuned: dict[str, float]
    merged: dict[str, float]
    mean_cosine: float = float("nan")  # mean pairwise cosine of the merged task vectors (addition)

    @property
    def normalised(self) -> float:
        """Mean over fine-tuned tasks of merged / single-task fine-tuned accuracy (test)."""
        return float(np.mean([self.merged[t] / self.finetuned[t] for t in self.finetuned]))


def split_validation(task: Task, fraction: float = 0.2, seed: int = 0) -> tuple[Task, Task]:
    """(fit, validation): the task with a seeded `fraction` of its train split moved out, and that part as a task."""
    n = len(task.train)
    n_val = int(round(fraction * n))
    if not 0 < n_val < n:
        raise PlatonicError(f"task {task.name!r}: a validation fraction of {fraction} leaves no fit or no validation items")
    order = np.random.default_rng(seed).permutation(n)
    fit, val = task.train.subset(order[n_val:]), task.train.subset(order[:n_val])
    return attrs.evolve(task, train=fit), attrs.evolve(task, train=fit, test=val)


def accuracy_with(encoder: DualEncoder, vector: TaskVector, task: Task, coef: float = 1.0) -> float:
    """Accuracy on task.test of theta_pre + coef * tau (undone afterwards)."""
    return task_vector_evaluator(encoder, vector, [task])(coef)[task.name]


def _finetune_all(encoder: DualEncoder, tasks: Sequence[Task], config: FinetuneConfig, progress: bool) -> tuple[list[TaskVector], dict[str, float]]:
    vectors, tuned = [], {}
    for task in tasks:
        result = finetune(encoder, task, config, progress)
        vectors.append(result.task_vector)
        tuned[task.name] = accuracy(result.encoder, task)
    return vectors, tuned


def addition_study(
    encoder: DualEncoder,
    tasks: Sequence[Task],
    config: FinetuneConfig,
    lambdas: Sequence[float] = (0.0, 1.0),
    coefs: Sequence[float] = DEFAULT_COEFS,
    val_fraction: float = 0.2,
    progress: bool = False,
) -> list[MergeResult]:
    """Per lambda: merge every task's vector, select c by mean normalised validation accuracy, report test."""
    pairs = [split_validation(t, val_fraction, config.seed) for t in tasks]
    fit, val = [p[0] for p in pairs], [p[1] for p in pairs]
    zero_shot = {t.name: accuracy(encoder, t) for t in tasks}
    out = []
    for lam in lambdas:
        cfg = attrs.evolve(config, orthoreg=attrs.evolve(config.orthoreg, coef=lam))
        vectors, tuned = _finetune_all(encoder, fit, cfg, progress)
        total = TaskVector.sum(vectors)
        val_tuned = {t.name: accuracy_with(encoder, vec, t) for t, vec in zip(val, vectors)}
        sweep = select_addition(task_vector_evaluator(encoder, total, val), val_tuned, coefs, progress)
        merged = task_vector_evaluator(encoder, total, tasks)(sweep.best)
        cosines = [a.cosine(b) for i, a in enumerate(vectors) for b in vectors[i + 1 :]]
        out.append(MergeResult(lam, sweep.best, sweep, zero_shot, tuned, merged, float(np.mean(cosines)) if cosines else float("nan")))
    return out


def negation_study(
    encoder: DualEncoder,
    target: Task,
    control: Task,
    config: FinetuneConfig,
    lambdas: Sequence[float] = (0.0, 1.0),
    coefs: Sequence[float] = DEFAULT_COEFS,
    val_fraction: float = 0.2,
    progress: bool = False,
) -> list[MergeResult]:
    """Per lambda: theta_pre - c * tau_target, c = lowest validation target accuracy with control >= 95% of zero-shot."""
    fit, val = split_validation(target, val_fraction, config.seed)
    control_val = split_validation(control, val_fraction, config.seed)[1]
    zero_shot = {target.name: accuracy(encoder, target), control.name: accuracy(encoder, control)}
    out = []
    for lam in lambdas:
        cfg = attrs.evolve(config, orthoreg=attrs.evolve(config.orthoreg, coef=lam))
        vectors, tuned = _finetune_all(encoder, [fit], cfg, progress)
        negated = -vectors[0]
        evaluate = task_vector_evaluator(encoder, negated, [val, control_val])
        sweep = select_negation(evaluate, target.name, control.name, accuracy(encoder, control_val), coefs, progress=progress)
        merged = task_vector_evaluator(encoder, negated, [target, control])(sweep.best)
        out.append(MergeResult(lam, sweep.best, sweep, zero_shot, tuned, merged))
    return out
