"""The cell matrix: every (target, sources, task pair) addition cell and (target, source, task) negation cell.

A cell is one composition on one target; the registered cell methods (methods.py) evaluate it, the
runner (experiment.py) records it. `folded` is what every solving method ends with: sign * sum of its
operators folded into the target at the cell's strength, accuracies on the cell's evaluation sets
(`rule_folded`: at the strength the settings' strength rule chooses, for the methods that transfer descriptors).
A cell's evaluation sets are its tasks and the sets its edit must leave alone (`kept_sets`): the workspace's
controls and the other transfer tasks, whose drops are the cell's damage (frontier.DAMAGE).
"""

from __future__ import annotations

import itertools
import zlib
from typing import Any, Iterable, Literal, Sequence

import attrs
from torch import Tensor

from ...errors import PlatonicError
from ...spaces import DEFAULT_SPACE
from ...strength import AUTO
from ..plan.settings import GROUPS, CellSettings
from .workspace import Workspace

Kind = Literal["addition", "negation"]


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


def kept_sets(ws: Workspace, cell: Cell) -> dict[str, list[str]]:
    """The sets the cell's edit must leave alone, by the record field that lists them (frontier.DAMAGE): `controls`, the
    workspace's control sets; `others`, the other transfer tasks (the bank's other tasks)."""
    return {"controls": [c for c in ws.controls if c not in cell.tasks], "others": [t for t in ws.transfer_tasks if t not in cell.tasks]}


def eval_names(ws: Workspace, cell: Cell) -> list[str]:
    """The cell's evaluation sets: its tasks, then the workspace's controls, then the other transfer tasks."""
    return [*cell.tasks, *(n for names in kept_sets(ws, cell).values() for n in names)]


def solve_options(ws: Workspace, kind: str, task: str, centre: Sequence[str], anchor: Sequence[str],
                  space: str = DEFAULT_SPACE) -> dict[str, Any]:
    """Workspace.operator's `centre`, `anchors` and `space` for the term on `task` of an edit of `kind`, given the
    kinds that centre and anchor and the descriptor space. A term anchors the transfer tasks that read other attributes than its
    own (Workspace.anchor_tasks([task])), the other terms' tasks among them: each term's operator leaves
    the other attributes' probes, and so the other terms' readouts, in place."""
    return {"centre": kind in centre, "anchors": ws.anchor_tasks([task]) if kind in anchor else (), "space": space}


def cell_solve(ws: Workspace, cell: Cell, settings: CellSettings, task: str) -> dict[str, Any]:
    """The solve options of the cell's term on `task` under `settings` (solve_options)."""
    return solve_options(ws, cell.kind, task, settings.centre, settings.anchor, settings.space)


def signed_strength(cell: Cell, settings: CellSettings) -> tuple[float, float]:
    """(sign, strength) of the cell's edit: (+1, addition_strength) for an addition, (-1, negation_strength) for a negation."""
    return (1.0 if cell.kind == "addition" else -1.0), settings.strength_of(cell.kind)


def folded(ws: Workspace, cell: Cell, settings: CellSettings, ops: Sequence[Tensor]) -> dict[str, float]:
    """Accuracies with sign * sum(ops) folded at the cell's strength (+addition_strength, -negation_strength)."""
    sign, strength = signed_strength(cell, settings)
    return ws.accuracies(cell.target, eval_names(ws, cell), sign * sum(ops), strength)


def rule_folded(ws: Workspace, cell: Cell, settings: CellSettings, ops: Sequence[Tensor], descriptors: Sequence[Any]) -> dict[str, Any]:
    """`folded`, or under settings.strength_rule the operator A = sign * sum(ops) folded at the strength the rule
    chooses for it as the edit of sign * sum(descriptors) (one per term, solved into `ops`), that strength under
    "strength". The rule reads those descriptors (row-centred where the kind centres) on the target's grids of the
    cell's tasks and what the edit must leave alone: with settings.keep "probes", the unlabelled probes of the other
    transfer tasks' grids (OperatorBank.chosen_strength); with "labels", the labelled train splits of the cell's kept
    sets (Workspace.keep_set), on which the default rule spends the kind's budget at the settings' confidence
    (OperatorBank.strength_choice, docs/method.md sec. 18). Never a test item, nor a label of the cell's own tasks."""
    if settings.strength_rule is None:
        return folded(ws, cell, settings, ops)
    sign = signed_strength(cell, settings)[0]
    A, terms = sign * sum(ops), [sign * d for d in descriptors]
    bank, descriptor, centre = ws.bank(cell.target), sum(terms[1:], terms[0]), settings.centres(cell.kind)
    if settings.keep == "labels":
        keep = cell_keep_sets(ws, cell)
        spend = {"budget": settings.budget_of(cell.kind), "confidence": settings.confidence} if keep else {}
        strength = ws.warned_once(lambda: bank.strength_choice(descriptor, A, AUTO, centre, keep=keep, **spend)[0])
    else:
        others = [ws.grid_state(cell.target, t).grid for t in kept_sets(ws, cell)["others"]]
        strength = ws.warned_once(lambda: bank.chosen_strength(descriptor, A, settings.strength_rule, centre, others))
    return {**ws.accuracies(cell.target, eval_names(ws, cell), A, strength), "strength": strength}


def cell_keep_sets(ws: Workspace, cell: Cell) -> list[Any]:
    """The labelled keep sets of the cell's kept sets (kept_sets) that hold train items (Workspace.keep_set). The
    target's grids of the transfer tasks among them are added first: its bank then reads their probes, which the
    keep sets hold, from the grids' states rather than encoding them again (OperatorBank.keep_view)."""
    names = [n for names in kept_sets(ws, cell).values() for n in names]
    for name in names:
        if name in ws.transfer_tasks:
            ws.grid_state(cell.target, name)
    return [k for n in names if (k := ws.keep_set(n)) is not None]
