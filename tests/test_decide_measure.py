"""What the decision protocol measures on a workspace (evaluate/decide/measure.py), on the tiny grid zoo: the labelled
reference's norm is an explicit space (label_reference's norm_space), checked against a fold computed by hand, and the
frontier sweep and a candidate's points read the protocol's reference space and settings; and the estimate of a
strength rule on a sweep (estimate.py)."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from grid_zoo import build_workspace

from platonic_sdk.evaluate.decide.estimate import cell_edit, estimated_points, rule_strengths
from platonic_sdk.evaluate.decide.measure import candidate_settings, point_records, swept_methods
from platonic_sdk.evaluate.decide.protocol import load_protocol
from platonic_sdk.evaluate.measure.cells import eval_names, negation_cells
from platonic_sdk.evaluate.measure.label_reference import label_descriptor, label_reference, probe_labels
from platonic_sdk.evaluate.measure.methods import closed_form
from platonic_sdk.evaluate.measure.studies import strength_sweep
from platonic_sdk.evaluate.plan.settings import CellSettings

ROUND_3 = Path(__file__).resolve().parents[1] / "benchmarks" / "protocols" / "round_3.json"


@pytest.fixture(scope="module")
def ws():
    return build_workspace()


@pytest.fixture(scope="module")
def cell(ws):
    return next(c for c in negation_cells(ws, groups=("cross-family",)) if c.target == "siglip")


def by_hand(ws, cell, norm_space: str) -> dict[str, float]:
    """The negation cell's labelled reference at strength 1, unanchored: one-hot labels minus 1/M, scaled to the norm
    of the source's row-centred descriptor in `norm_space`, solved on the target and folded at -1."""
    (source,), (task,) = cell.sources, cell.tasks
    norm = float(ws.descriptor(source, task, norm_space).centred().matrix.norm())
    grid = ws.grid(task)
    op = ws.solve_operator(cell.target, label_descriptor(grid, probe_labels(ws, task), len(grid.prompts), norm))
    return ws.accuracies(cell.target, eval_names(ws, cell), -op, 1.0)


def test_the_labelled_references_norm_space_is_explicit(ws, cell):
    blend = CellSettings(space="blend", strength_rule="fixed", anchor=())
    assert label_reference(ws, cell, blend, norm_space="affinity") == pytest.approx(by_hand(ws, cell, "affinity"), abs=1e-9)
    assert label_reference(ws, cell, blend) == pytest.approx(by_hand(ws, cell, "blend"), abs=1e-9)  # None: the settings' space
    # centred, the affinity UTD's norm and blend's (the raw affinity UTD's, sec. 15) differ: so do the references
    assert label_reference(ws, cell, blend) != pytest.approx(by_hand(ws, cell, "affinity"), abs=1e-6)


def test_the_sweep_and_the_points_read_the_protocols_reference_space(ws, cell):
    protocol = attrs.evolve(load_protocol(ROUND_3), anchor=())  # frontier_space affinity; at each point, the candidate's
    methods = swept_methods(protocol)
    assert methods == ["closed_form_affinity", "closed_form_blend", "label_reference_norm_affinity"]
    (record,) = strength_sweep(ws, [cell], (1.0,), CellSettings(space="blend", anchor=()), methods[-1:])
    assert {s: v[0] for s, v in record["accuracy"].items()} == pytest.approx(by_hand(ws, cell, "affinity"), abs=1e-9)
    candidate = next(c for c in protocol.candidates if c.name == "blend/fixed")
    closed, reference = point_records(ws, [cell], protocol, candidate)
    assert reference["method"] == "reference" and reference["accuracy"] == pytest.approx(by_hand(ws, cell, "blend"), abs=1e-9)
    settings = candidate_settings(protocol, candidate)
    assert (settings.space, settings.strength_rule, settings.negation_strength, settings.centre) == ("blend", None, 1.0, ("negation",))
    # the kept sets, each kind under its own field (protocol.damage picks which count)
    assert closed["controls"] == [c for c in ws.controls if c not in cell.tasks] and closed["others"] == [
        t for t in ws.transfer_tasks if t not in cell.tasks] and set(closed["others"]) & set(ws.controls) == set()


def test_a_rules_estimated_strength_is_the_one_the_cell_methods_fold_at(ws, cell):
    """estimate.rule_strengths builds the edit as the closed form does: folding its operator at the strength it reports
    gives the closed form's accuracies under that rule."""
    protocol = attrs.evolve(load_protocol(ROUND_3), anchor=())
    rule = "least_squares_off_task"
    (strength,) = rule_strengths(ws, cell, protocol, "blend", [rule]).values()
    edit = cell_edit(ws, cell, protocol, "blend")
    assert edit.sign == -1.0 and edit.centre and strength > 0
    by_rule = closed_form(ws, cell, CellSettings(space="blend", strength_rule=rule, anchor=(), keep="probes"))
    assert {**ws.accuracies(cell.target, eval_names(ws, cell), edit.operator, strength), "strength": strength} == pytest.approx(by_rule, abs=1e-9)


def test_estimated_points_interpolate_each_cells_sweep_at_its_strength():
    protocol = load_protocol(ROUND_3)
    zero = {"t": 50.0, "c": 80.0}

    def swept(method, key, t, c):
        return {"key": key, "kind": "addition", "target": "x", "group": "cross-family", "method": method, "tasks": ["t"],
                "controls": ["c"], "zero_shot": zero, "strengths": [0.0, 1.0, 2.0], "accuracy": {"t": t, "c": c}}

    sweep = [swept("closed_form_blend", "k1", [50, 60, 64], [80, 78, 70]), swept("label_reference_norm_affinity", "k1", [50, 70, 72], [80, 80, 79]),
             swept("closed_form_blend", "k2", [50, 52, 56], [80, 80, 76]), swept("label_reference_norm_affinity", "k2", [50, 51, 52], [80, 80, 80])]
    points = estimated_points(protocol, sweep, {"k1": 0.5, "k2": 3.0}, "blend")  # k2: past the sweep, read at its end
    got = {(p["key"], p["method"]): p["accuracy"] for p in points}
    assert got == {("k1", "closed_form"): {"t": 55.0, "c": 79.0}, ("k1", "reference"): {"t": 60.0, "c": 80.0},
                   ("k2", "closed_form"): {"t": 56.0, "c": 76.0}, ("k2", "reference"): {"t": 52.0, "c": 80.0}}
