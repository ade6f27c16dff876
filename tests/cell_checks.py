"""Shared assertion: a closed-form cell's cached accuracies equal the folded, re-encoded target."""

import pytest

from platonic_sdk.edits.edit import OperatorEdit
from platonic_sdk.evaluate import accuracy
from platonic_sdk.evaluate.measure.cells import addition_cells
from platonic_sdk.evaluate.measure.methods import evaluate_cell
from platonic_sdk.evaluate.plan.settings import CellSettings


def assert_closed_form_cell_is_the_folded_model(ws) -> None:
    cell = addition_cells(ws)[0]
    record = evaluate_cell(ws, cell, CellSettings(strength_rule="fixed"))  # the fold at the fixed 0.5 (the rule's strength: test_strength)
    target = ws.models[cell.target]
    A = sum(ws.operator(cell.target, s, t) for s, t in zip(cell.sources, cell.tasks))
    with OperatorEdit(A, 0.5, target.last_affine().kind, {}).applied_to(target):
        folded = {name: accuracy(target, ws.tasks[name]) for name in record["results"]["closed_form"]}
    for name, value in folded.items():
        assert record["results"]["closed_form"][name] == pytest.approx(value, abs=1e-6)
