"""A labelled reference cell method: what a descriptor built from the probes' labels would transfer.

For a task's grid with probe labels y_i among M classes, L[i, j] = [y_i = j] - 1/M (one-hot minus
its row mean), scaled to the Frobenius norm of the descriptor the closed form transfers for that
term. It reads labels that the method never sees, so it is a reference for what a labelled grid
gives, not a baseline to beat and no ceiling (transferred descriptors can pass it); the report shows
what share of its gain each method reaches.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch import Tensor

from ...descriptor import UTD
from ...errors import ShapeError
from ...spaces import check_space
from ...tasks import Grid
from ..plan.settings import CellSettings
from .cells import Cell, cell_solve, rule_folded
from .workspace import Workspace


def label_descriptor(grid: Grid, labels: Sequence[int], num_classes: int, norm: float) -> UTD:
    """(one-hot(labels) - 1/M), scaled to Frobenius norm `norm`, on `grid`."""
    labels = torch.as_tensor(labels, dtype=torch.long)
    if labels.shape != (grid.shape[0],) or num_classes != grid.shape[1]:
        raise ShapeError(f"{tuple(labels.shape)} labels of {num_classes} classes do not fit grid {grid.shape}")
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
        raise ShapeError(f"probe labels must lie in [0, {num_classes}), got {int(labels.min())}..{int(labels.max())}")
    L = torch.nn.functional.one_hot(labels, num_classes).float() - 1.0 / num_classes
    return UTD(L * (norm / L.norm()), grid.identity, grid.task, {"baseline": "labels", "norm": float(norm)}, "labels")


def probe_labels(ws: Workspace, task: str) -> torch.Tensor:
    """Labels of the task's probes (its grid's train items)."""
    grid = ws.grid(task)
    return torch.as_tensor(ws.tasks[task].train.labels)[list(grid.probe_ids)]


def label_reference(ws: Workspace, cell: Cell, settings: CellSettings, *, norm_space: str | None = None) -> dict[str, float]:
    """The closed form fed label descriptors, each norm-matched to the term's transferred descriptor (in
    `norm_space`, None: the settings' space; centred when the kind centres), at the closed form's strength (the
    settings' strength rule choosing it from the label descriptors, where it has one)."""
    def solve(task: str) -> dict[str, Any]:
        options = cell_solve(ws, cell, settings, task)
        return {**options, "space": check_space(norm_space) if norm_space is not None else options["space"]}

    terms = [reference_term(ws, cell.target, source, task, **solve(task)) for source, task in zip(cell.sources, cell.tasks)]
    return rule_folded(ws, cell, settings, [op for op, _ in terms], [reference for _, reference in terms])


def label_reference_in(norm_space: str) -> Callable[[Workspace, Cell, CellSettings], dict[str, float]]:
    """The labelled reference as a cell method whose norms match descriptors in `norm_space` whatever the settings'
    space: a fixed yardstick for methods in different spaces (the decision protocol's frontier, docs/method.md sec. 15.1)."""
    check_space(norm_space)

    def fn(ws: Workspace, cell: Cell, settings: CellSettings) -> dict[str, float]:
        return label_reference(ws, cell, settings, norm_space=norm_space)
    return fn


def reference_term(ws: Workspace, target: str, source: str, task: str, centre: bool, anchors: Sequence[str], space: str) -> tuple[Tensor, UTD]:
    """(operator on `target`, label descriptor) of one term, norm-matched to `source`'s descriptor of `task` in
    `space` (centred with `centre`): solved once per workspace (Workspace.memo), shared by every cell with the term."""
    def solved() -> tuple[Tensor, UTD]:
        transferred = ws.descriptor(source, task, space)
        transferred = transferred.centred() if centre else transferred
        reference = label_descriptor(ws.grid(task), probe_labels(ws, task), len(ws.grid(task).prompts), float(transferred.matrix.norm()))
        return ws.solve_operator(target, reference, anchors=anchors), reference

    return ws.memo(("label_reference", target, source, task, centre, tuple(anchors), space), solved)
