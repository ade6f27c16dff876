"""The LoRA route as a cell method: it fits the cell's own composition and measures real forward passes."""

import torch
from grid_zoo import build_workspace

from platonic_sdk.evaluate.measure.cells import CellSettings, addition_cells, negation_cells
from platonic_sdk.evaluate.measure.methods import lora
from platonic_sdk.transfer.lora import LoraRouteConfig, fit_lora

RECIPE = dict(rank=2, lora_alpha=4.0, max_steps=3, batch_size=16, lr=1e-2)
CONFIG = LoraRouteConfig(**RECIPE)


def _weights(model):
    return {k: v.clone() for k, v in model.model.state_dict().items()}


def test_lora_cell_equals_a_manual_fit_and_leaves_the_target_untouched():
    ws = build_workspace()
    cell = next(c for c in addition_cells(ws) if c.target == "siglip")
    target = ws.models[cell.target]
    before = _weights(target)
    got = lora(ws, cell, CellSettings(addition_strength=0.7, lora=RECIPE))
    assert all(torch.equal(v, target.model.state_dict()[k]) for k, v in before.items())
    names = [*cell.tasks, *ws.controls, *(t for t in ws.transfer_tasks if t not in cell.tasks)]  # and the other tasks it keeps
    assert set(got) == set(names)
    composition = ws.descriptor(cell.sources[0], cell.tasks[0]) + ws.descriptor(cell.sources[1], cell.tasks[1])
    edit = fit_lora(target, composition, [ws.grid(t) for t in cell.tasks], CONFIG, progress=False)
    assert got == ws.live_accuracies(cell.target, names, edit.scaled(0.7))
    assert ws.live_accuracies(cell.target, names) == ws.accuracies(cell.target, names)  # unedited: cache agrees


def test_negation_cell_fits_the_negated_descriptor_and_deploys_at_the_cell_strength():
    ws = build_workspace()
    cell = next(c for c in negation_cells(ws) if c.target == "clip")
    settings = CellSettings(addition_strength=0.9, negation_strength=0.5, lora=RECIPE)
    got = lora(ws, cell, settings)
    negated = (-ws.descriptor(cell.sources[0], cell.tasks[0])).centred()  # negation centres by default
    held = ws.anchor_tasks(cell.tasks)  # and anchors the tasks that read other attributes
    assert held and cell.tasks[0] not in held
    edit = fit_lora(ws.models["clip"], negated, [ws.grid(cell.tasks[0])], CONFIG, progress=False, anchors=[ws.grid(t) for t in held])
    assert got == ws.live_accuracies("clip", [*cell.tasks, *ws.controls, *held], edit.scaled(0.5))  # held: every other task here


def test_addition_cell_deploys_at_the_cells_alpha_like_the_closed_form():
    ws = build_workspace()
    cell = next(c for c in addition_cells(ws) if c.target == "clip")
    composition = ws.descriptor(cell.sources[0], cell.tasks[0]) + ws.descriptor(cell.sources[1], cell.tasks[1])
    strong = LoraRouteConfig(**{**RECIPE, "lr": 5e-2, "max_steps": 10})  # moves predictions, so the deploy strength shows
    edit = fit_lora(ws.models["clip"], composition, [ws.grid(t) for t in cell.tasks], strong, progress=False)
    names = [*cell.tasks, *ws.controls, *(t for t in ws.transfer_tasks if t not in cell.tasks)]
    got = lora(ws, cell, CellSettings(addition_strength=0.3, negation_strength=0.8, lora={**RECIPE, "lr": 5e-2, "max_steps": 10}))
    assert got == ws.live_accuracies("clip", names, edit.scaled(0.3))
    assert got != ws.live_accuracies("clip", names, edit)
