"""Under a strength rule, the labelled reference folds at the strength the rule picks for ITS descriptors (cells.rule_folded),
checked against a finite-difference least-squares strength computed by hand."""

from __future__ import annotations

import pytest
import torch
from grid_zoo import build_workspace

from platonic_sdk.evaluate.measure.cells import addition_cells
from platonic_sdk.evaluate.measure.label_reference import label_descriptor, label_reference, probe_labels
from platonic_sdk.evaluate.measure.methods import closed_form
from platonic_sdk.evaluate.plan.settings import CellSettings

EPS = 1e-4


@pytest.fixture(scope="module")
def ws():
    return build_workspace()


def _hand_least_squares(ws, target: str, tasks, A: torch.Tensor, descriptors) -> float:
    """c = sum_T <dU, U> / M / sum_T ||dU||^2 / M, dU the exact affinity change of the edit at EPS over EPS."""
    num = den = 0.0
    for task, U in zip(tasks, descriptors):
        state = ws.grid_state(target, task)
        dU = state.achieved(A.double(), EPS).double() / EPS
        M = state.landmarks.shape[0]
        num += float((dU * U.double()).sum()) / M
        den += float((dU * dU).sum()) / M
    return max(0.0, num / den)


def test_label_reference_folds_at_the_rule_strength_of_its_own_descriptors(ws):
    cell = next(c for c in addition_cells(ws, groups=("cross-family",)) if c.target == "siglip")
    rule = CellSettings(strength_rule="least_squares", space="affinity")
    references, ops = [], []
    for source, task in zip(cell.sources, cell.tasks):
        norm = float(ws.descriptor(source, task, "affinity").matrix.norm())
        grid = ws.grid(task)
        references.append(label_descriptor(grid, probe_labels(ws, task), len(grid.prompts), norm).matrix)
        ops.append(ws.solve_operator(cell.target, label_descriptor(grid, probe_labels(ws, task), len(grid.prompts), norm)))
    c = _hand_least_squares(ws, cell.target, cell.tasks, sum(ops), references)
    assert c > 0
    fixed = label_reference(ws, cell, CellSettings(space="affinity", addition_strength=c, strength_rule="fixed"))
    got = label_reference(ws, cell, rule)
    assert got.pop("strength") == pytest.approx(c, rel=1e-3) and got == pytest.approx(fixed, abs=1e-9)  # the record holds the strength
    at_half = label_reference(ws, cell, CellSettings(space="affinity", strength_rule="fixed"))
    assert fixed != pytest.approx(at_half, abs=1e-9)  # the fixed 0.5 differs
    # the closed form under the same rule reads the transferred descriptors: another strength, so (here) other figures
    transferred = [ws.descriptor(s, t, "affinity").matrix for s, t in zip(cell.sources, cell.tasks)]
    A = sum(ws.operator(cell.target, s, t, space="affinity") for s, t in zip(cell.sources, cell.tasks))
    c_closed = _hand_least_squares(ws, cell.target, cell.tasks, A, transferred)
    assert abs(c_closed - c) > 1e-3
    by_hand = closed_form(ws, cell, CellSettings(space="affinity", addition_strength=c_closed, strength_rule="fixed"))
    got = closed_form(ws, cell, rule)
    assert got.pop("strength") == pytest.approx(c_closed, rel=1e-3) and got == pytest.approx(by_hand, abs=1e-9)
