"""Cell grids: every (target, sources, task pair) addition cell and (target, source, task) negation cell.

A cell evaluates one composition on one target with cached features: the closed form and its
baselines (zero-shot, Random-UTD, Single-A/B, Oracle = the target's own descriptors, weight-space
task arithmetic when the source shares the target's architecture). Records are appended to a JSON
lines file as each cell finishes, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import itertools
import os
import time
import zlib
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Sequence

import attrs
from ..progress import progress as progress_bar

from ..errors import PlatonicError, check_strength
from .runfolder import append_record, read_records
from .workspace import Workspace

Kind = Literal["addition", "negation"]
GROUPS = ("same-model", "same-architecture", "cross-family")


@attrs.frozen
class Cell:
    """One evaluation unit: `sources[l]` supplies the descriptor of `tasks[l]`, transferred to `target`."""

    kind: Kind
    target: str
    sources: tuple[str, ...] = attrs.field(converter=tuple)
    tasks: tuple[str, ...] = attrs.field(converter=tuple)
    group: str

    @property
    def key(self) -> str:
        terms = "+".join(f"{t}@{s}" for s, t in zip(self.sources, self.tasks))
        return f"{self.kind}|{self.target}|{terms}"

    @property
    def seed(self) -> int:
        """A seed that depends on the cell only (Random-UTD draws do not depend on run order)."""
        return zlib.crc32(self.key.encode())


def relation(ws: Workspace, target: str, source: str) -> str:
    """same-model (source is the target), same-architecture (equal media-tower layout), or cross-family."""
    if source == target:
        return "same-model"
    return "same-architecture" if ws.architecture(source) == ws.architecture(target) else "cross-family"


def cell_group(ws: Workspace, target: str, sources: Iterable[str]) -> str:
    """The farthest relation among the cell's sources."""
    return max((relation(ws, target, s) for s in sources), key=GROUPS.index)


def _checked_groups(groups: Sequence[str]) -> tuple[str, ...]:
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise PlatonicError(f"unknown cell group(s) {unknown}; choose from {', '.join(GROUPS)}")
    return tuple(groups)


def addition_cells(
    ws: Workspace,
    targets: Sequence[str] | None = None,
    tasks: Sequence[str] | None = None,
    groups: Sequence[str] = ("cross-family",),
    pairing: Literal["auto", "distinct", "any"] = "auto",
) -> list[Cell]:
    """All two-task addition cells: (target, {A, B}, source of A, source of B) in the chosen groups.

    Outside the same-model group the target never supplies a term. pairing "distinct" takes two
    different source families per cell (the paper's 6 x 28 x 5 x 4 = 3,360 cells); "any" allows one
    family for both; "auto" is "distinct" when a target has two or more other sources, else "any".
    """
    groups = _checked_groups(groups)
    targets = tuple(targets or ws.families)
    tasks = tuple(tasks or ws.transfer_tasks)
    if pairing not in ("auto", "distinct", "any"):
        raise PlatonicError(f"pairing must be auto, distinct or any, got {pairing!r}")
    cells = []
    for target in targets:
        others = {s for task in tasks for s in ws.sources_for(task) if s != target}
        distinct = pairing == "distinct" or (pairing == "auto" and len(others) >= 2)
        for a, b in itertools.combinations(tasks, 2):
            for sa, sb in itertools.product(ws.sources_for(a), ws.sources_for(b)):
                group = cell_group(ws, target, (sa, sb))
                if group not in groups:
                    continue
                if group != "same-model" and (target in (sa, sb) or (distinct and sa == sb)):
                    continue
                cells.append(Cell("addition", target, (sa, sb), (a, b), group))
    return cells


def negation_cells(
    ws: Workspace, targets: Sequence[str] | None = None, tasks: Sequence[str] | None = None, groups: Sequence[str] = ("cross-family",)
) -> list[Cell]:
    """All (target, source, task) negation cells in the chosen groups (paper: 6 x 5 x 8 = 240)."""
    groups = _checked_groups(groups)
    cells = []
    for target in targets or ws.families:
        for task in tasks or ws.transfer_tasks:
            for source in ws.sources_for(task):
                group = relation(ws, target, source)
                if group in groups:
                    cells.append(Cell("negation", target, (source,), (task,), group))
    return cells


@attrs.frozen
class CellSettings:
    """Strengths of a grid run: addition alpha, negation strength, weight-space coefficient."""

    alpha: float = attrs.field(default=0.5, converter=check_strength)
    strength: float = attrs.field(default=1.0, converter=check_strength)
    weight_space_coef: float = attrs.field(default=0.5, converter=check_strength)

    def as_dict(self) -> dict[str, float]:
        return attrs.asdict(self)


def evaluate_cell(ws: Workspace, cell: Cell, settings: CellSettings = CellSettings()) -> dict[str, Any]:
    """Accuracies (percent) of every method on the cell's tasks and the workspace's controls."""
    started = time.perf_counter()
    names = list(cell.tasks) + [c for c in ws.controls if c not in cell.tasks]
    t = cell.target
    terms = list(zip(cell.sources, cell.tasks))
    sign, alpha = (1.0, settings.alpha) if cell.kind == "addition" else (-1.0, settings.strength)

    def folded(ops) -> dict[str, float]:
        return ws.accuracies(t, names, sign * sum(ops), alpha)

    results: dict[str, dict[str, float]] = {"zero_shot": ws.accuracies(t, names)}
    results["random_utd"] = folded(ws.random_operator(t, s, task, cell.seed + i) for i, (s, task) in enumerate(terms))
    if cell.kind == "addition":
        for label, (s, task) in zip(("single_a", "single_b"), terms):
            results[label] = folded([ws.operator(t, s, task)])
    results["closed_form"] = folded(ws.operator(t, s, task) for s, task in terms)
    if all((t, task) in ws.finetuned for task in cell.tasks):
        results["oracle"] = folded(ws.operator(t, t, task) for task in cell.tasks)
    if cell.group != "cross-family":
        vectors = [ws.task_vector(s, task) for s, task in terms]
        if all(v is not None for v in vectors):
            coef = sign * settings.weight_space_coef
            results["weight_space"] = ws.weight_space_accuracies(t, [(v, coef) for v in vectors], names)
    finetuned = {task: ws.finetuned_accuracy(t, task) for task in cell.tasks}
    return {
        "key": cell.key,
        **attrs.asdict(cell),
        "settings": settings.as_dict(),
        "controls": [c for c in ws.controls if c not in cell.tasks],
        "finetuned": finetuned,
        "results": results,
        "seconds": round(time.perf_counter() - started, 4),
    }


def run_cells(
    ws: Workspace,
    cells: Sequence[Cell],
    path: str | os.PathLike,
    settings: CellSettings = CellSettings(),
    on_record: Callable[[dict[str, Any]], None] | None = None,
    progress: bool = False,
) -> list[dict[str, Any]]:
    """Evaluate `cells`, appending each record to `path`; cells already recorded there are not redone.

    Returns the records of `cells` in order. Records written under other settings are refused.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    done = {}
    for record in read_records(path):
        if record.get("settings") != settings.as_dict():
            raise PlatonicError(
                f"{path} holds cells run with {record.get('settings')}, not {settings.as_dict()}; use a new output path"
            )
        done[record["key"]] = record
    todo = [c for c in cells if c.key not in done]
    for cell in progress_bar(todo, desc="cells", disable=not progress):
        record = append_record(path, evaluate_cell(ws, cell, settings))
        done[cell.key] = record
        if on_record is not None:
            on_record(record)
    return [done[c.key] for c in cells]
