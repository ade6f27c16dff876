"""Measuring a protocol on one replicate of one world (measure/replicates.py): the records figures.py reads.

Per replicate, the cross-family cells of each kind (at most `cells_per_kind`, evenly spread, as the grid picks
them) get

- the frontier sweep (studies.strength_sweep at `sweep_strengths`): the closed form in each frontier space, and the
  labelled reference norm-matched to descriptors in the protocol's `frontier_space` (label_reference_in), the same
  yardstick whatever the candidates' spaces;
- each candidate's point: per cell, the closed form in the candidate's space at the strength its rule chooses (or
  the protocol's fixed strengths; a candidate that keeps labels spends the world's budgets on the labelled train
  splits of the cell's kept sets), and the labelled reference at the same settings, norm-matched to descriptors in
  Protocol.reference_space(candidate).

Every record lists the cell's kept sets (`controls` and `others`: cells.kept_sets), so that the protocol's `damage`
picks which count. Every setting comes from the protocol (centring, anchors, fixed strengths, spaces) and the world
(its budgets): nothing reads a library default but a labels candidate's confidence where it names none.
"""

from __future__ import annotations

from typing import Any

from ...progress import progress as progress_bar
from ...strength import FIXED
from ...worlds.registry import world_spec
from ..measure.cells import Cell, eval_names, kept_sets
from ..measure.label_reference import label_reference, label_reference_in
from ..measure.methods import closed_form
from ..measure.replicates import replicate_workspace
from ..measure.studies import strength_sweep
from ..measure.workspace import Workspace
from ..plan.registry import METHODS, register_method
from ..plan.settings import CellSettings, selections
from ..run.runner import selected_cells
from .protocol import LABELS, REFERENCE, Candidate, Protocol, reference_method


def candidate_settings(protocol: Protocol, candidate: Candidate, world: str | None = None) -> CellSettings:
    """The cell settings of `candidate`: its space, rule and keep, the protocol's centring, anchors and fixed strengths; a
    candidate that keeps labels spends `world`'s budgets (its zoo's control limits; None: the library's) at its confidence."""
    labels = {}
    if candidate.keep == LABELS:
        budgets = {k: v for k, v in world_spec(world).settings().cell_fields().items() if k.endswith("_budget")} if world else {}
        labels = {"confidence": candidate.confidence, **budgets}
    # keep said always: a protocol means what its file says, whatever the library's default keep is
    return CellSettings(addition_strength=protocol.fixed_strengths["addition"], negation_strength=protocol.fixed_strengths["negation"],
                        centre=protocol.centre, anchor=protocol.anchor, space=candidate.space,
                        strength_rule=None if candidate.rule == FIXED else candidate.rule, keep=candidate.keep, **labels)


def sweep_settings(protocol: Protocol) -> CellSettings:
    """The frontier sweep's settings: the protocol's centring and anchors (the sweep fixes each strength; every
    swept method names its own space)."""
    return CellSettings(centre=protocol.centre, anchor=protocol.anchor, space=protocol.frontier_space, strength_rule=None)


def cross_family_cells(ws: Workspace, per_kind: int) -> list[Cell]:
    """Cross-family addition and negation cells, at most `per_kind` of each, evenly spread (as the grid picks them)."""
    return [c for s in selections(max_cells=per_kind) for c in selected_cells(ws, s, "auto")]


def swept_methods(protocol: Protocol) -> list[str]:
    """The cell methods of the frontier sweep, the labelled reference in the protocol's space registered on first use."""
    name = reference_method(protocol.frontier_space)
    if METHODS.canonical(name) is None:
        register_method(name, label_reference_in(protocol.frontier_space),
                        f"labelled reference, norm of {protocol.frontier_space} descriptors (not the method)")
    return [protocol.cell_method(m) for m in protocol.swept()]


def point_records(ws: Workspace, cells: list[Cell], protocol: Protocol, candidate: Candidate, world: str | None = None) -> list[dict[str, Any]]:
    """Per cell, the closed form's and the labelled reference's record at the candidate's point on `world`'s workspace,
    as frontier.point reads them (method "closed_form" or REFERENCE; `accuracy` and `zero_shot` per evaluation set,
    and the strength its rule chose under "strength" in `accuracy`)."""
    settings, norm = candidate_settings(protocol, candidate, world), protocol.reference_space(candidate)
    records = []
    for cell in cells:
        names = eval_names(ws, cell)
        zero = ws.accuracies(cell.target, names)
        for method, accuracy in (("closed_form", closed_form(ws, cell, settings)), (REFERENCE, label_reference(ws, cell, settings, norm_space=norm))):
            records.append({"key": cell.key, "kind": cell.kind, "target": cell.target, "group": cell.group, "method": method,
                            "tasks": list(cell.tasks), **kept_sets(ws, cell), "zero_shot": zero,
                            "accuracy": dict(accuracy)})
    return records


def measure_replicate(protocol: Protocol, world: str, seed: int, *, progress: bool = False) -> dict[str, Any]:
    """Replicate `seed` of `world`: its description, the frontier sweep's records and each candidate's point records."""
    ws, describe = replicate_workspace(world, seed, progress=progress)
    cells = cross_family_cells(ws, protocol.cells_per_kind)
    sweep = strength_sweep(ws, cells, protocol.sweep_strengths, sweep_settings(protocol), swept_methods(protocol))
    points = {c.name: point_records(ws, cells, protocol, c, world)
              for c in progress_bar(protocol.candidates, desc=f"{world} {seed}: candidates", disable=not progress)}
    return {"world": world, "seed": seed, "describe": describe, "sweep": sweep, "points": points}
