"""A descriptor space registered from outside the package (spaces.register_space) runs through UTD.compute,
the operator bank, an edit, a saved descriptor and a small grid, each checked against an independent computation."""

from __future__ import annotations

import pytest
import torch
from grid_zoo import TASKS, build_workspace, moved

import platonic_sdk as ps
from platonic_sdk import UTD
from platonic_sdk.errors import PlatonicError
from platonic_sdk.evaluate.measure.cells import addition_cells, eval_names
from platonic_sdk.evaluate.plan.settings import CellSettings, ExperimentConfig, selections
from platonic_sdk.evaluate.run.runner import run_experiment
from platonic_sdk.linalg import ridge_solver, utd
from platonic_sdk.spaces import DescriptorSpace, check_space, register_space, space, space_names
from platonic_sdk.worlds.image import ImageWorld

NAME = "tanh_affinity"
RULE = "fixed_point_three"  # a plug-in strength rule: a constant 0.3


def tanh_affinity(f_pre: torch.Tensor, f_ft: torch.Tensor, g: torch.Tensor, logit_scale: float | None) -> torch.Tensor:
    """D = tanh(s U), scaled to ||U||_F: the affinity change squashed at the model's logit scale."""
    U = utd(f_pre, f_ft, g)
    D = torch.tanh(logit_scale * U.double())
    return (D * (U.double().norm() / D.norm())).to(U.dtype)


@pytest.fixture(scope="module", autouse=True)
def registered():
    """The plug-in space for this module's tests, gone afterwards with the methods built for it: later tests' default
    sweeps (which cover every registered space) and other processes' never see it."""
    from platonic_sdk import spaces, strength
    from platonic_sdk.evaluate.plan.registry import METHODS

    yield register_space(DescriptorSpace(NAME, tanh_affinity, needs_logit_scale=True), replace=True)
    spaces._REGISTRY.pop(NAME)
    strength._REGISTRY.pop(RULE, None)
    for name in (f"closed_form_{NAME}", f"closed_form_strength_{RULE}"):
        METHODS.pop(name, None)
        METHODS.unlisted.discard(name)


def _by_hand(pre: ps.DualEncoder, ft: ps.DualEncoder, grid: ps.Grid) -> torch.Tensor:
    """The plug-in's descriptor from forward passes: landmarks the normalised mean of each class's unit
    template embeddings, s the model's exp(log scale)."""
    with torch.no_grad():
        s = float(pre.model.logit_scale.exp())
        g = torch.stack([torch.nn.functional.normalize(pre.encode_text(list(p)).double(), dim=1).mean(0) for p in grid.prompts])
        g = torch.nn.functional.normalize(g, dim=1)
        f0 = torch.nn.functional.normalize(pre.encode_media(pre.preprocess(list(grid.items))).double(), dim=1)
        f1 = torch.nn.functional.normalize(ft.encode_media(ft.preprocess(list(grid.items))).double(), dim=1)
    U = (f1 - f0) @ g.T
    D = torch.tanh(s * U)
    return D * (U.norm() / D.norm())


def test_the_registry_knows_the_plugin_and_refuses_a_taken_name(registered):
    assert NAME in space_names() and check_space(NAME) == NAME and space(NAME) is registered
    with pytest.raises(PlatonicError, match=f"descriptor space '{NAME}' is already registered"):
        register_space(DescriptorSpace(NAME, tanh_affinity))
    with pytest.raises(PlatonicError, match="unknown descriptor space 'tanh_afinity' \\(did you mean 'tanh_affinity'\\?\\)"):
        space("tanh_afinity")


def test_plugin_space_through_compute_bank_edit_and_file(tmp_path):
    pre = ps.from_config("clip", seed=0)
    ft = moved(pre, seed=7)
    grid = ImageWorld(train_per_class=4, test_per_class=2).task("amber_shapes").grid(per_class=3, seed=0)
    descriptor = UTD.compute(pre, ft, grid, space=NAME, provenance={"note": "plug-in"})
    assert descriptor.space == NAME and descriptor.provenance["note"] == "plug-in"
    assert descriptor.provenance["logit_scale"] == pytest.approx(float(pre.model.logit_scale.detach().exp()))
    torch.testing.assert_close(descriptor.matrix.double(), _by_hand(pre, ft, grid), atol=2e-5, rtol=1e-4)
    with pytest.raises(PlatonicError, match="needs the model's logit scale"):
        P, M = grid.shape
        UTD.from_features(torch.randn(P, 4), torch.randn(P, 4), torch.randn(M, 4), grid, space=NAME)

    target = ps.from_config("siglip", seed=2)
    bank = ps.OperatorBank(target, ridge_a=0.1, ridge_b=0.5)
    state = bank.add_grid(grid)
    expected = ridge_solver(state.solve_rows, state.landmarks, 0.1, 0.5)(descriptor.matrix)
    torch.testing.assert_close(bank.operator(descriptor), expected, atol=1e-5, rtol=1e-4)
    edit = bank.edit(descriptor, 0.75)
    assert edit.meta["space"] == NAME and edit.strength == 0.75
    torch.testing.assert_close(edit.operator, expected, atol=1e-5, rtol=1e-4)

    descriptor.save(tmp_path / "u.safetensors")
    back = UTD.load(tmp_path / "u.safetensors")
    assert back.space == NAME and torch.equal(back.matrix, descriptor.matrix)


def test_plugin_space_runs_a_small_grid(tmp_path):
    """A grid in the plug-in space: each closed-form cell equals the workspace's own fold of the operators of
    the plug-in descriptors, solved on the target's bank from the fine-tunes' probe rows."""
    ws = build_workspace()
    config = ExperimentConfig(cells=selections(("addition",), max_cells=2), methods=("zero_shot", "closed_form"),
                              settings=CellSettings(space=NAME, strength_rule="fixed"), sweep_cells=1, sweep_strengths=(0.5,), accumulation=False,
                              guarantee=False, similarity=False)
    records: list[dict] = []
    run_experiment(ws, tmp_path / "run", config, on_record=records.append)
    assert len(records) == 2 and all(r["settings"]["space"] == NAME for r in records)
    cells = {c.key: c for c in addition_cells(ws)}
    for record in records:
        cell = cells[record["key"]]
        ops = []
        for source, task in zip(cell.sources, cell.tasks):
            state = ws.grid_state(source, task)
            rows = torch.nn.functional.normalize(state.raw_embeddings, dim=1)
            model = ws.models[source]
            D = tanh_affinity(rows, ws.finetuned_rows(source, task, task), state.landmarks, model.logit_scale)
            ops.append(ws.solve_operator(cell.target, UTD(D, ws.grid(task).identity, task, {}, NAME)))
        expected = ws.accuracies(cell.target, eval_names(ws, cell), sum(ops), 0.5)
        assert record["results"]["closed_form"] == expected
        assert set(cell.tasks) <= set(TASKS)



def test_plugin_space_gets_its_comparison_method_and_its_sweep(tmp_path):
    """Registries drive the methods: the plug-in space has closed_form_<space> (the closed form in that space whatever
    the run's space) and stands in the default strength sweep, as the built-in spaces do."""
    from platonic_sdk.evaluate.plan.registry import method

    name = f"closed_form_{NAME}"
    assert method(name).label == "closed form, tanh-affinity descriptors"
    assert name in ExperimentConfig().sweep_methods
    ws = build_workspace()
    config = ExperimentConfig(cells=selections(("addition",), max_cells=1), methods=("zero_shot", "closed_form", name),
                              settings=CellSettings(strength_rule="fixed"), sweep_cells=1, sweep_strengths=(0.0, 0.5),
                              accumulation=False, guarantee=False, similarity=False)
    records: list[dict] = []
    summary = run_experiment(ws, tmp_path / "run", config, on_record=records.append)
    (record,) = records
    in_space = CellSettings(space=NAME, strength_rule="fixed")  # the comparison method is the closed form in the plug-in space
    cell = next(c for c in addition_cells(ws) if c.key == record["key"])
    from platonic_sdk.evaluate.measure.methods import closed_form

    assert record["results"][name] == closed_form(ws, cell, in_space)
    swept = {m for curves in summary["frontier"].values() for m in curves}
    assert name in swept, swept


def test_plugin_strength_rule_gets_its_comparison_method():
    """A strength rule registered from outside gets closed_form_strength_<rule>: the closed form at the rule's strength."""
    from platonic_sdk.evaluate.measure.methods import closed_form
    from platonic_sdk.evaluate.plan.registry import method
    from platonic_sdk.strength import StrengthRule, register_strength_rule

    register_strength_rule(StrengthRule(RULE, lambda A, task, others: 0.3, "a constant 0.3", reads_others=False), replace=True)
    ws = build_workspace()
    cell = addition_cells(ws)[0]
    at_rule = method(f"closed_form_strength_{RULE}")
    assert at_rule.label == f"closed form, strength by rule {RULE}"
    fixed = CellSettings(strength_rule="fixed", addition_strength=0.3)
    assert at_rule.fn(ws, cell, CellSettings()) == {**closed_form(ws, cell, fixed), "strength": 0.3}  # the record says what the rule chose
