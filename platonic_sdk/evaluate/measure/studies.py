"""The paper's other studies, on a workspace's cached features: strength sweeps, accumulation,
held-out transfer and the guarantee diagnostic (descriptor similarity lives in similarity.py).

The strength sweep runs registered cell methods at each strength (frontier.py turns it into
gain-against-worst-control-drop curves). Every other edit here is the closed form: A = sum_l c_l X*(U_l)^T
folded at a strength c, evaluated by z -> z + c A s on cached rows, with no forward pass.
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import attrs
import numpy as np
from torch import Tensor

from ...errors import PlatonicError
from ..plan.registry import method
from ...spaces import DEFAULT_SPACE
from ..plan.settings import DEFAULT_ANCHOR, DEFAULT_CENTRE, SWEEP_STRENGTHS, CellSettings
from .cells import Cell, cell_group, eval_names, kept_sets, solve_options
from .guarantee import guarantee_items, pooled_summary
from .workspace import Workspace


def cell_operator(ws: Workspace, cell: Cell, centre: Sequence[str] = DEFAULT_CENTRE,
                  anchor: Sequence[str] = DEFAULT_ANCHOR, space: str = DEFAULT_SPACE) -> tuple[Tensor, list[str]]:
    """The cell's signed closed-form operator (negation: minus the descriptor's; row-centred descriptors
    when the cell's kind is in `centre`, the other attributes' probes anchored when in `anchor`; descriptors
    in `space`) and the sets the guarantee reads: its tasks and controls."""
    sign = 1.0 if cell.kind == "addition" else -1.0
    A = sign * sum(ws.operator(cell.target, s, t, **solve_options(ws, cell.kind, t, centre, anchor, space))
                   for s, t in zip(cell.sources, cell.tasks))
    return A, [*cell.tasks, *kept_sets(ws, cell)["controls"]]


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else float("nan")


def strength_sweep(ws: Workspace, cells: Sequence[Cell], strengths: Sequence[float] = SWEEP_STRENGTHS,
                   settings: CellSettings = CellSettings(), methods: Sequence[str] = ("closed_form",)) -> list[dict[str, Any]]:
    """Each cell method on each cell at each strength: one record per cell and method that applies to it.

    Strength c sets both kinds' strengths of `settings` to c, so a method at c is what it reports at that
    strength (a folded operator: sign * c * A; the LoRA route: its fitted edit scaled by c). A method with a
    registered `sweep` is fitted once and evaluated at every strength. A record holds the cell's tasks, its kept sets
    (`controls` and `others`: cells.kept_sets), the zero-shot accuracy of each evaluation set and, per set, its accuracy
    at each strength: every kept set's figure, not only their mean (frontier.py reads the worst set).
    """
    records = []
    for cell in cells:
        names = eval_names(ws, cell)
        zero = ws.accuracies(cell.target, names)
        for name in methods:
            m = method(name)
            accs = sweep_method(ws, cell, settings, name, strengths) if cell.kind in m.kinds else None
            if accs is None:
                continue
            records.append({
                "key": cell.key, "kind": cell.kind, "target": cell.target, "group": cell.group, "method": name,
                "tasks": list(cell.tasks), **kept_sets(ws, cell), "zero_shot": zero,
                "strengths": [float(c) for c in strengths], "accuracy": {n: [a[n] for a in accs] for n in names},
            })
    return records


def sweep_method(ws: Workspace, cell: Cell, settings: CellSettings, name: str, strengths: Sequence[float]) -> list[dict[str, float]] | None:
    """Method `name`'s accuracies on the cell at each strength (None where it does not apply to the cell)."""
    m = method(name)
    at = [attrs.evolve(settings.with_rule(None), addition_strength=c, negation_strength=c) for c in strengths]  # fixed
    if m.sweep is not None:
        return m.sweep(ws, cell, settings, [float(c) for c in strengths])
    first = m.fn(ws, cell, at[0]) if at else None
    if first is None:
        return None
    return [dict(first)] + [dict(m.fn(ws, cell, s)) for s in at[1:]]


def cross_sources(ws: Workspace, target: str, task: str) -> list[str]:
    """Families other than the target that hold a descriptor of `task`."""
    return [s for s in ws.sources_for(task) if s != target]


def _normalised(ws: Workspace, target: str, task: str, acc: float) -> float | None:
    ft = ws.finetuned_accuracy(target, task)
    return 100.0 * acc / ft if ft else None


def accumulation(
    ws: Workspace, target: str, tasks: Sequence[str], strength: float = 0.5, max_tasks: int = 8, centre: bool = False,
    anchors: bool = False, space: str = DEFAULT_SPACE,
) -> list[dict[str, Any]]:
    """Compose the first J tasks (J = 1..len) on `target`, each from a cross-family source (rotating);
    `anchors`: each task's solve holds the probes of the transfer tasks that read other attributes;
    descriptors in `space`.

    Two schedules: "fixed" folds the sum at `strength`; "divided" at strength / J. Reports the mean accuracy
    and mean normalised accuracy (accuracy / the target's own fine-tuned accuracy) over the J tasks.
    """
    tasks = list(tasks)[:max_tasks]
    ops = []
    for i, task in enumerate(tasks):
        sources = cross_sources(ws, target, task)
        if not sources:
            raise PlatonicError(f"no cross-family descriptor of {task!r} for target {target!r}")
        source = sources[i % len(sources)]
        ops.append((source, ws.operator(target, source, task, centre, ws.anchor_tasks([task]) if anchors else (), space)))
    records = []
    for J in range(1, len(tasks) + 1):
        A = sum(op for _, op in ops[:J])
        for schedule, c in (("fixed", strength), ("divided", strength / J)):
            names = tasks[:J]
            accs = ws.accuracies(target, names + list(ws.controls), A, c)
            zero = ws.accuracies(target, names)
            norm = [_normalised(ws, target, t, accs[t]) for t in names]
            zero_norm = [_normalised(ws, target, t, zero[t]) for t in names]
            records.append({
                "target": target, "J": J, "schedule": schedule, "strength": c, "tasks": names,
                "sources": [s for s, _ in ops[:J]],
                "mean_accuracy": _mean([accs[t] for t in names]),
                "zero_shot_mean": _mean([zero[t] for t in names]),
                "mean_normalised": _mean(norm) if None not in norm else None,
                "zero_shot_normalised": _mean(zero_norm) if None not in zero_norm else None,
                "control_mean": _mean([accs[c] for c in ws.controls]),
            })
    return records


def held_out(ws: Workspace, target: str, related: Sequence[str], held_out_task: str, strength: float = 0.5,
             centre: bool = False, anchors: bool = False, space: str = DEFAULT_SPACE) -> list[dict[str, Any]]:
    """Sum the operators of `related` tasks (every cross-family source assignment) and evaluate on a
    task whose items and class names never entered a fit (`anchors`: each related task's solve holds the
    probes of the transfer tasks that read other attributes, Workspace.anchor_tasks; descriptors in `space`)."""
    if held_out_task in related:
        raise PlatonicError(f"held-out task {held_out_task!r} is one of the composed tasks")
    names = [held_out_task] + [c for c in ws.controls if c != held_out_task]
    zero = ws.accuracies(target, names)
    records = []
    for sources in itertools.product(*(cross_sources(ws, target, t) for t in related)):
        A = sum(ws.operator(target, s, t, centre, ws.anchor_tasks([t]) if anchors else (), space) for s, t in zip(sources, related))
        records.append({
            "target": target, "sources": list(sources), "related": list(related), "held_out": held_out_task,
            "strength": strength, "zero_shot": zero, "closed_form": ws.accuracies(target, names, A, strength),
            "group": cell_group(ws, target, sources),
        })
    return records


def guarantee(ws: Workspace, cells: Sequence[Cell], addition_strength: float = 0.5, negation_strength: float = 1.0,
              centre: Sequence[str] = DEFAULT_CENTRE, anchor: Sequence[str] = DEFAULT_ANCHOR,
              space: str = DEFAULT_SPACE) -> list[dict[str, Any]]:
    """Per cell: the guarantee summary of its closed-form edit (descriptors in `space`) over its tasks and
    controls, pooled and per set."""
    records = []
    for cell in cells:
        A, names = cell_operator(ws, cell, centre, anchor, space)
        c = addition_strength if cell.kind == "addition" else negation_strength
        parts = {}
        for name in names:
            cache = ws.eval_set(cell.target, name)
            parts[name] = guarantee_items(cache.raw_embeddings, cache.embeddings(A, c), ws.landmarks(cell.target, name), cache.labels)
        records.append({
            "key": cell.key, "kind": cell.kind, "target": cell.target, "group": cell.group, "strength": c,
            "pooled": pooled_summary(list(parts.values())),
            "per_set": {name: p.summary() for name, p in parts.items()},
        })
    return records
