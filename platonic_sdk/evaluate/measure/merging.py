"""Weight-space merging studies (OrthoReg's protocol): fine-tune per task, merge task vectors, pick the strength.

For each OrthoReg penalty weight lambda: tau_t = fine-tune(theta_pre, t; lambda) for every task, then
theta(c) = theta_pre + c * merge_m(tau_1..tau_T) for each merging method m (addition; task arithmetic
is the sum) or theta_pre - c * merge_m(tau_target) (negation), with the strength c chosen per method on
a validation part of each train split (never the test split) and reported on test. The same selection
runs per cell on same-architecture cells (`chosen_weight_space`, registered as weight_space_<method>).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import attrs
import numpy as np

from ...encoding.zeroshot import accuracy
from ...errors import PlatonicError
from ...finetune import FinetuneConfig, TaskVector, finetune, merge
from ...finetune.weightspace import merge_method, merge_methods
from ...protocol.encoder import DualEncoder
from ...tasks import Task
from .cells import eval_names
from .selection import DEFAULT_STRENGTHS, Evaluate, Sweep, select_addition, select_negation, task_vector_evaluator
from .workspace import Workspace

VALIDATION_FRACTION = 0.2  # of each train split, for choosing strengths (OrthoReg's protocol)
CONTROL_MEAN = "control mean"


@attrs.frozen
class MergeResult:
    """One OrthoReg penalty weight and merging method: the strength chosen on validation, its sweep and test accuracies."""

    orthoreg: float
    strength: float
    sweep: Sweep
    zero_shot: dict[str, float]
    finetuned: dict[str, float]
    merged: dict[str, float]
    mean_cosine: float = float("nan")  # mean pairwise cosine of the merged task vectors (addition)
    method: str = "task_arithmetic"  # the merging method (finetune.merging); negation negates the merged one vector

    @property
    def normalised(self) -> float:
        """Mean over fine-tuned tasks of merged / single-task fine-tuned accuracy (test)."""
        return float(np.mean([self.merged[t] / self.finetuned[t] for t in self.finetuned]))


def split_validation(task: Task, fraction: float = VALIDATION_FRACTION, seed: int = 0) -> tuple[Task, Task]:
    """(fit, validation): the task with a seeded `fraction` of its train split moved out, and that part as a task."""
    n = len(task.train)
    n_val = int(round(fraction * n))
    if not 0 < n_val < n:
        raise PlatonicError(f"task {task.name!r}: a validation fraction of {fraction} leaves no fit or no validation items")
    order = np.random.default_rng(seed).permutation(n)
    fit, val = task.train.subset(order[n_val:]), task.train.subset(order[:n_val])
    return attrs.evolve(task, train=fit), attrs.evolve(task, train=fit, test=val)


def accuracy_with(encoder: DualEncoder, vector: TaskVector, task: Task, strength: float = 1.0) -> float:
    """Accuracy on task.test of theta_pre + strength * tau (undone afterwards)."""
    return task_vector_evaluator(encoder, vector, [task])(strength)[task.name]


def _finetune_all(encoder: DualEncoder, tasks: Sequence[Task], config: FinetuneConfig, progress: bool) -> tuple[list[TaskVector], dict[str, float]]:
    vectors, tuned = [], {}
    for task in tasks:
        result = finetune(encoder, task, config, progress)
        vectors.append(result.task_vector)
        tuned[task.name] = accuracy(result.encoder, task)
    return vectors, tuned


def _methods(methods: Sequence[str] | Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """{method: params} from a list of names (default parameters) or a mapping of names to parameters."""
    chosen = {str(m): dict(p) for m, p in methods.items()} if isinstance(methods, Mapping) else {str(m): {} for m in methods}
    if not chosen:
        raise PlatonicError("the addition study needs at least one merging method")
    for name in chosen:
        merge_method(name)  # unknown names fail before any fine-tuning
    return chosen


def select_extending(evaluate: Evaluate, finetuned: Mapping[str, float], strengths: Sequence[float], extend: int, progress: bool) -> Sweep:
    """`select_addition` over `strengths`; while the pick is the grid's largest strength, the grid grows
    by its own span (at most `extend` times), so that a merged vector smaller than the sum (TIES' mean,
    Iso-C's flattened spectrum) is not capped by a grid made for the sum. Each strength runs once."""
    cache: dict[float, Mapping[str, float]] = {}

    def cached(strength: float) -> Mapping[str, float]:
        if strength not in cache:
            cache[strength] = evaluate(strength)
        return cache[strength]

    grid, low = tuple(float(c) for c in strengths), min(strengths)
    sweep = select_addition(cached, finetuned, grid, progress)
    for _ in range(extend):
        top = max(grid)
        if sweep.best < top or top <= low:
            break
        grid += tuple(round(top + c - low, 10) for c in strengths if c > low)
        sweep = select_addition(cached, finetuned, grid, progress)
    return sweep


def _lambda_config(config: FinetuneConfig, lam: float) -> FinetuneConfig:
    return attrs.evolve(config, orthoreg=attrs.evolve(config.orthoreg, weight=lam))


def _addition_runs(encoder: DualEncoder, tasks: Sequence[Task], val: Sequence[Task], lam: float, vectors: Sequence[TaskVector],
                   tuned: dict[str, float], zero_shot: dict[str, float], chosen: Mapping[str, Mapping[str, Any]],
                   strengths: Sequence[float], extend: int, progress: bool) -> list[MergeResult]:
    """One lambda's fine-tunes merged by each method, c chosen on `val`, accuracies on the tasks' test splits."""
    val_tuned = {t.name: accuracy_with(encoder, vec, t) for t, vec in zip(val, vectors)}
    cosines = [a.cosine(b) for i, a in enumerate(vectors) for b in vectors[i + 1 :]]
    cosine = float(np.mean(cosines)) if cosines else float("nan")
    out = []
    for method, params in chosen.items():
        merged_vector = merge(vectors, method, **params)
        sweep = select_extending(task_vector_evaluator(encoder, merged_vector, val), val_tuned, strengths, extend, progress)
        merged = task_vector_evaluator(encoder, merged_vector, tasks)(sweep.best)
        out.append(MergeResult(lam, sweep.best, sweep, zero_shot, tuned, merged, cosine, method))
    return out


def _negation_runs(encoder: DualEncoder, target: Task, val_target: Task, control: Task, val_control: Task, lam: float,
                   vector: TaskVector, tuned: dict[str, float], zero_shot: dict[str, float], chosen: Mapping[str, Mapping[str, Any]],
                   strengths: Sequence[float], progress: bool) -> list[MergeResult]:
    """theta_pre - c * merge_m(tau_target) per method (one vector: TIES trims it, DARE drops, Iso-C flattens its
    spectra), c chosen on the validation parts, accuracies on test."""
    floor = accuracy(encoder, val_control)
    out = []
    for method, params in chosen.items():
        negated = -merge([vector], method, **params)
        evaluate = task_vector_evaluator(encoder, negated, [val_target, val_control])
        sweep = select_negation(evaluate, target.name, control.name, floor, strengths, progress=progress)
        merged = task_vector_evaluator(encoder, negated, [target, control])(sweep.best)
        out.append(MergeResult(lam, sweep.best, sweep, zero_shot, tuned, merged, method=method))
    return out


def addition_study(
    encoder: DualEncoder,
    tasks: Sequence[Task],
    config: FinetuneConfig,
    lambdas: Sequence[float] = (0.0, 1.0),
    strengths: Sequence[float] = DEFAULT_STRENGTHS,
    val_fraction: float = VALIDATION_FRACTION,
    progress: bool = False,
    methods: Sequence[str] | Mapping[str, Mapping[str, Any]] = ("task_arithmetic",),
    extend: int = 3,
) -> list[MergeResult]:
    """Per lambda, fine-tune every task once; per merging method, merge the vectors, select c by mean
    normalised validation accuracy (`select_extending`) and report test (ordered by lambda, then method)."""
    chosen = _methods(methods)
    pairs = [split_validation(t, val_fraction, config.seed) for t in tasks]
    fit, val = [p[0] for p in pairs], [p[1] for p in pairs]
    zero_shot = {t.name: accuracy(encoder, t) for t in tasks}
    out = []
    for lam in lambdas:
        vectors, tuned = _finetune_all(encoder, fit, _lambda_config(config, lam), progress)
        out += _addition_runs(encoder, tasks, val, lam, vectors, tuned, zero_shot, chosen, strengths, extend, progress)
    return out


def negation_study(
    encoder: DualEncoder,
    target: Task,
    control: Task,
    config: FinetuneConfig,
    lambdas: Sequence[float] = (0.0, 1.0),
    strengths: Sequence[float] = DEFAULT_STRENGTHS,
    val_fraction: float = VALIDATION_FRACTION,
    progress: bool = False,
    methods: Sequence[str] | Mapping[str, Mapping[str, Any]] = ("task_arithmetic",),
) -> list[MergeResult]:
    """Per lambda and merging method: theta_pre - c * merge_m(tau_target), c = lowest validation target
    accuracy with control >= 95% of zero-shot (ordered by lambda, then method)."""
    chosen = _methods(methods)
    fit, val = split_validation(target, val_fraction, config.seed)
    control_val = split_validation(control, val_fraction, config.seed)[1]
    zero_shot = {target.name: accuracy(encoder, target), control.name: accuracy(encoder, control)}
    out = []
    for lam in lambdas:
        vectors, tuned = _finetune_all(encoder, [fit], _lambda_config(config, lam), progress)
        out += _negation_runs(encoder, target, val, control, control_val, lam, vectors[0], tuned, zero_shot, chosen, strengths, progress)
    return out


def orthoreg_comparison(name: str, encoder: DualEncoder, tasks: Sequence[Task], recipe: FinetuneConfig, progress: bool = False,
                        control: Task | None = None) -> dict[str, Any]:
    """The OrthoReg study's JSON-ready record: plain (lambda 0) vs OrthoReg (lambda 1) fine-tunes of
    `encoder` (reported as `name`) on `tasks`, merged by every registered merging method ("runs":
    addition of all tasks) and, with a `control`, each task negated by every method ("negation"); the
    fine-tunes are shared by both parts and every strength is chosen on validation."""
    chosen = _methods(merge_methods())
    pairs = [split_validation(t, VALIDATION_FRACTION, recipe.seed) for t in tasks]
    fit, val = [p[0] for p in pairs], [p[1] for p in pairs]
    zero_shot = {t.name: accuracy(encoder, t) for t in tasks}
    if control is not None:
        control_val = split_validation(control, VALIDATION_FRACTION, recipe.seed)[1]
        control_zero = accuracy(encoder, control)
    runs, negation = [], []
    for lam in (0.0, 1.0):
        vectors, tuned = _finetune_all(encoder, fit, _lambda_config(recipe, lam), progress)
        runs += _addition_runs(encoder, tasks, val, lam, vectors, tuned, zero_shot, chosen, DEFAULT_STRENGTHS, 3, progress)
        for task, v_task, vector in zip(tasks, val, vectors) if control is not None else ():
            zero = {task.name: zero_shot[task.name], control.name: control_zero}
            negation += [(task.name, r) for r in _negation_runs(encoder, task, v_task, control, control_val, lam, vector,
                                                                {task.name: tuned[task.name]}, zero, chosen, DEFAULT_STRENGTHS, progress)]
    record = {
        "family": name, "tasks": [t.name for t in tasks], "recipe": recipe.describe(),
        "runs": [{"method": r.method, "orthoreg": r.orthoreg, "strength": r.strength, "grid_top": max(r.sweep.strengths),
                  "mean_cosine": r.mean_cosine, "normalised": r.normalised, "merged_mean": float(np.mean(list(r.merged.values()))),
                  "merged": r.merged, "finetuned": r.finetuned, "zero_shot": r.zero_shot} for r in runs],
    }
    if control is not None:
        record["control"] = control.name
        record["negation"] = [{"method": r.method, "orthoreg": r.orthoreg, "task": t, "strength": r.strength, "removed": r.merged[t],
                               "control": r.merged[control.name], "zero_shot": r.zero_shot, "finetuned": r.finetuned[t]}
                              for t, r in negation]
    return record


def _cell_vectors(ws: Workspace, cell: Any) -> list[TaskVector] | None:
    """The task vectors of the cell's (source, task) fine-tunes; None across architectures or where one is unknown."""
    if cell.group == "cross-family":
        return None
    vectors = [ws.task_vector(source, task) for source, task in zip(cell.sources, cell.tasks)]
    return None if any(v is None for v in vectors) else vectors


def merged_weight_space(method: str, **params: Any) -> Callable[[Workspace, Any, Any], dict[str, float] | None]:
    """A cell method fn(workspace, cell, settings): theta_target + sign * c * merge_method(tau_1..tau_L)
    of the cell's (source, task) fine-tunes, c = settings.weight_space_strength (sign -1 for negation);
    None on cross-family cells or where a task vector is unknown. `task_arithmetic` is the weight-space
    baseline itself."""
    merge_method(method)  # unknown names fail here, not on the first cell

    def fn(ws: Workspace, cell: Any, settings: Any) -> dict[str, float] | None:
        vectors = _cell_vectors(ws, cell)
        if vectors is None:
            return None
        strength = (1.0 if cell.kind == "addition" else -1.0) * settings.weight_space_strength
        return ws.weight_space_accuracies(cell.target, [(merge(vectors, method, **params), strength)], eval_names(ws, cell))

    return fn


def validation_part(task: Task, seed: int, fraction: float = VALIDATION_FRACTION) -> Task:
    """The seeded validation part of the task's train split, as a task whose test split it is."""
    return split_validation(task, fraction, seed)[1]


def chosen_weight_space(method: str, strengths: Sequence[float] = DEFAULT_STRENGTHS, extend: int = 3,
                        **params: Any) -> Callable[[Workspace, Any, Any], dict[str, float] | None]:
    """A cell method like `merged_weight_space`, whose strength c is chosen per cell on validation parts
    (`validation_part`, seeded by settings.seed) of the train splits, never on test: addition maximises
    the mean accuracy over the cell's tasks (`select_extending` over `strengths`; a cell has no
    single-task reference that is sure to be non-zero on a small validation part); negation minimises the task's accuracy with the mean control accuracy kept at
    95% of the unedited one (`select_negation`; controls with train items). Test accuracies at the
    chosen c, with c itself under "strength"."""
    merge_method(method)

    def fn(ws: Workspace, cell: Any, settings: Any) -> dict[str, float] | None:
        vectors = _cell_vectors(ws, cell)
        if vectors is None:
            return None
        merged = merge(vectors, method, **params)
        signed = merged if cell.kind == "addition" else -merged
        encoder = ws.models[cell.target]
        val = {t: validation_part(ws.tasks[t], settings.seed) for t in cell.tasks}
        if cell.kind == "addition":
            evaluate = task_vector_evaluator(encoder, signed, list(val.values()), allow_other_target=True)
            strength = select_extending(evaluate, dict.fromkeys(cell.tasks, 100.0), strengths, extend, progress=False).best
        else:
            controls = [validation_part(ws.tasks[c], settings.seed) for c in ws.controls if c not in cell.tasks and len(ws.tasks[c].train)]
            if not controls:
                raise PlatonicError(f"choosing the strength of negation cell {cell.key} on validation needs a control set with train items")
            per_set = task_vector_evaluator(encoder, signed, [*val.values(), *controls], allow_other_target=True)

            def evaluate(c: float) -> dict[str, float]:
                accs = per_set(c)
                return {**accs, CONTROL_MEAN: float(np.mean([accs[t.name] for t in controls]))}

            strength = select_negation(evaluate, cell.tasks[0], CONTROL_MEAN, evaluate(0.0)[CONTROL_MEAN], strengths).best
        return {**ws.weight_space_accuracies(cell.target, [(signed, strength)], eval_names(ws, cell)), "strength": strength}

    return fn
