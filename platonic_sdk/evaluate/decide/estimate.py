"""Strength rules estimated on measured sweeps (docs/method.md sec. 15.1, rounds 2 and 3): a cheap screen of rule
variants before any becomes a candidate, never a measurement the protocol chooses on.

Each rule's strength is computed exactly per cell (`rule_strengths`: the closed form in one space, the strength
OperatorBank.chosen_strength gives it from the cell's descriptors and the other transfer tasks' unlabelled probes, as
the cell methods read it); the cell's accuracies at that strength are interpolated on its sweep of that space
(`estimated_points`; strengths past the sweep's ends read its end points, so a rule that chooses more than the last
swept strength reads low). The labelled reference is read at the same strength on its sweep, not at the strength the
rule would give its own descriptor, so a reference_share criterion is only indicative here.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import attrs
import numpy as np
from torch import Tensor

from ...descriptor import Composition
from ...strength import FIXED
from ..measure.cells import Cell, cell_solve
from ..measure.frontier import DAMAGE
from ..measure.workspace import Workspace
from .measure import candidate_settings
from .protocol import REFERENCE, Candidate, Protocol


@attrs.frozen
class CellEdit:
    """A cell's closed-form edit in one space, as a strength rule reads it: `sign` (+1 addition, -1 negation), whether the
    kind centres, the signed operator A, the signed composition of its descriptors, and the other transfer tasks."""

    sign: float
    centre: bool
    operator: Tensor
    descriptor: Composition
    others: tuple[str, ...]


def cell_edit(ws: Workspace, cell: Cell, protocol: Protocol, space: str) -> CellEdit:
    """The cell's closed form in `space` under the protocol's centring and anchors (what closed_form folds)."""
    settings = candidate_settings(protocol, Candidate(space, FIXED))
    sign = 1.0 if cell.kind == "addition" else -1.0
    terms = list(zip(cell.sources, cell.tasks))
    A = sign * sum(ws.operator(cell.target, s, t, **cell_solve(ws, cell, settings, t)) for s, t in terms)
    descriptor = Composition.of(sum((sign * ws.descriptor(s, t, space) for s, t in terms[1:]), sign * ws.descriptor(*terms[0], space)))
    return CellEdit(sign, settings.centres(cell.kind), A, descriptor, tuple(t for t in ws.transfer_tasks if t not in cell.tasks))


def rule_strengths(ws: Workspace, cell: Cell, protocol: Protocol, space: str, rules: Sequence[str]) -> dict[str, float]:
    """{rule: the strength it gives the cell's closed form in `space`} for registered strength rules."""
    edit = cell_edit(ws, cell, protocol, space)
    others = [ws.grid_state(cell.target, t).grid for t in edit.others]
    return {rule: ws.bank(cell.target).chosen_strength(edit.descriptor, edit.operator, rule, edit.centre, others) for rule in rules}


def estimated_points(protocol: Protocol, sweep: Sequence[Mapping[str, Any]], chosen: Mapping[str, float], space: str) -> list[dict[str, Any]]:
    """Point records (measure.point_records' shape) of the cells in `chosen` ({cell key: strength}): the closed form in
    `space` and the labelled reference interpolated at each cell's strength on their sweep records."""
    def at(record: Mapping[str, Any], strength: float) -> dict[str, float]:
        return {s: float(np.interp(strength, record["strengths"], v)) for s, v in record["accuracy"].items()}

    swept = {m: {r["key"]: r for r in sweep if r["method"] == protocol.cell_method(m)} for m in (f"closed_form_{space}", REFERENCE)}
    return [{**{k: r[k] for k in ("key", "kind", "target", "group", "tasks", "zero_shot")}, **{k: r.get(k, []) for k in DAMAGE}, "method": method,
             "accuracy": at(swept[name][key], chosen[key])}
            for key, r in swept[f"closed_form_{space}"].items() if key in chosen
            for method, name in (("closed_form", f"closed_form_{space}"), (REFERENCE, REFERENCE))]
