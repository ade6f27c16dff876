"""Strength rules (docs/method.md sec. 17): each built-in rule against a numpy brute force over a fine grid of
strengths on a hand-built case, "auto" through OperatorBank.edit (recorded in the edit file), the command line,
a cell method, and a rule registered from this file."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from grid_zoo import build_workspace, moved

import platonic_sdk as ps
from platonic_sdk.cli import main as cli
from platonic_sdk.errors import PlatonicError
from platonic_sdk.evaluate.measure.cells import addition_cells, eval_names, negation_cells
from platonic_sdk.evaluate.measure.methods import evaluate_cell
from platonic_sdk.evaluate.plan.settings import CellSettings
from platonic_sdk.strength import (
    DEFAULT_STRENGTH_RULE,
    ProbeGrid,
    StrengthRule,
    check_strength_rule,
    register_strength_rule,
    strength_rule,
)
from platonic_sdk.strength.prediction_share import GRID
from platonic_sdk.worlds.image import ImageWorld

# ---------------------------------------------------------------- a hand-built case
# A task grid of 4 probes x 3 prompts and an off-task grid of 3 probes x 2 prompts, site inputs of width 3,
# embeddings of width 3, and an operator A (3 x 3).
S_T = np.array([[1.0, 0.2, 0.0], [0.1, 1.0, 0.3], [0.0, 0.4, 1.0], [0.5, 0.5, 0.5]])
Z_T = np.array([[1.0, 0.1, 0.2], [0.2, 1.0, 0.1], [0.1, 0.3, 1.0], [0.6, 0.4, 0.5]])
G_T = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.3, 0.3, 0.9]])
S_O = np.array([[0.3, 0.9, 0.1], [0.8, 0.1, 0.4], [0.2, 0.2, 0.9]])
Z_O = np.array([[0.2, 0.9, 0.3], [0.9, 0.2, 0.2], [0.3, 0.1, 1.0]])
G_O = np.array([[0.6, 0.8, 0.0], [0.0, 0.6, 0.8]])
A = np.array([[0.1, -0.3, 0.2], [0.4, 0.0, -0.1], [-0.2, 0.1, 0.05]])
U = np.array([[-0.10, 0.20, -0.05], [0.15, -0.20, 0.02], [0.05, 0.05, -0.10], [0.20, -0.05, -0.05]])


def _affinities(S: np.ndarray, Z: np.ndarray, G: np.ndarray, c: float) -> np.ndarray:
    """<normalize(z + c A s), g / ||g||> exactly, in numpy."""
    f = Z + c * S @ A.T
    f = f / np.linalg.norm(f, axis=1, keepdims=True)
    return f @ (G / np.linalg.norm(G, axis=1, keepdims=True)).T


def _slope(S: np.ndarray, Z: np.ndarray, G: np.ndarray) -> np.ndarray:
    """The affinities' derivative in c at 0, by a central difference."""
    h = 1e-6
    return (_affinities(S, Z, G, h) - _affinities(S, Z, G, -h)) / (2 * h)


def _views(with_target: bool = True) -> tuple[list[ProbeGrid], list[ProbeGrid]]:
    t = lambda m: torch.tensor(m)  # noqa: E731
    return ([ProbeGrid(t(S_T), t(Z_T), t(G_T), t(U) if with_target else None)], [ProbeGrid(t(S_O), t(Z_O), t(G_O))])


STRENGTHS = np.linspace(0.0, 8.0, 800_001)  # the brute force's grid, steps of 1e-5


def test_least_squares_rules_against_a_brute_force():
    dU, dO = _slope(S_T, Z_T, G_T), _slope(S_O, Z_O, G_O)
    task_loss = np.array([np.sum((c * dU - U) ** 2) / 3 for c in STRENGTHS[::100]])
    c_task = STRENGTHS[::100][task_loss.argmin()]
    fine = STRENGTHS[(STRENGTHS > c_task - 2e-3) & (STRENGTHS < c_task + 2e-3)]
    c_task = fine[np.argmin([np.sum((c * dU - U) ** 2) / 3 for c in fine])]
    both = [np.sum((c * dU - U) ** 2) / 3 + np.sum((c * dO) ** 2) / 2 for c in STRENGTHS[::100]]
    c_both = STRENGTHS[::100][int(np.argmin(both))]
    fine = STRENGTHS[(STRENGTHS > c_both - 2e-3) & (STRENGTHS < c_both + 2e-3)]
    c_both = fine[np.argmin([np.sum((c * dU - U) ** 2) / 3 + np.sum((c * dO) ** 2) / 2 for c in fine])]
    task, others = _views()
    A_t = torch.tensor(A)
    assert strength_rule("least_squares").choose(A_t, task, others) == pytest.approx(c_task, abs=2e-5)
    assert strength_rule("least_squares_off_task").choose(A_t, task, others) == pytest.approx(c_both, abs=2e-5)
    assert strength_rule("auto").choose(A_t, task, others) == pytest.approx(c_both, abs=2e-5)
    assert 0 < c_both < c_task  # the off-task grid pulls the strength down
    # the opposite descriptor: the fit would reverse the edit, so the rules stop at 0
    flipped = [ProbeGrid(g.site_inputs, g.raw_embeddings, g.landmarks, -g.target) for g in task]
    assert strength_rule("least_squares_off_task").choose(A_t, flipped, others) == 0.0


def test_prediction_share_against_a_brute_force():
    before = _affinities(S_T, Z_T, G_T, 0.0).argmax(1)
    wanted = np.mean((_affinities(S_T, Z_T, G_T, 0.0) + U).argmax(1) != before)
    assert wanted > 0  # the case asks for a change
    shares = np.array([np.mean(_affinities(S_T, Z_T, G_T, c).argmax(1) != before) for c in GRID])
    expected = GRID[int(np.argmax(shares >= wanted))] if (shares >= wanted).any() else GRID[int(np.argmax(shares))]
    task, others = _views()
    assert strength_rule("prediction_share").choose(torch.tensor(A), task, others) == expected
    unchanged = [ProbeGrid(g.site_inputs, g.raw_embeddings, g.landmarks, torch.zeros_like(g.target)) for g in task]
    assert strength_rule("prediction_share").choose(torch.tensor(A), unchanged, others) == 0.0


def test_rule_names_are_checked():
    assert check_strength_rule("auto") == DEFAULT_STRENGTH_RULE
    with pytest.raises(PlatonicError, match="unknown strength rule 'least_square' \\(did you mean 'least_squares'\\?\\)"):
        check_strength_rule("least_square")
    with pytest.raises(PlatonicError, match="'auto' names the default rule"):
        register_strength_rule(StrengthRule("auto", lambda A, task, others: 1.0))
    with pytest.raises(PlatonicError, match="unknown strength rule 'bogus'.*or 'fixed': the fixed strengths"):
        CellSettings(strength_rule="bogus")
    assert CellSettings(strength_rule="auto").strength_rule == DEFAULT_STRENGTH_RULE == CellSettings().strength_rule
    assert CellSettings(strength_rule="fixed").strength_rule is None  # where a rule may be named, "fixed" is none


# ---------------------------------------------------------------- through the bank, the edit file and the CLI
@pytest.fixture(scope="module")
def tiny():
    world = ImageWorld(train_per_class=4, test_per_class=3)
    pre = ps.from_config("clip", seed=0)
    grids = {t: world.task(t).grid(2, 0) for t in ("small_shapes", "amber_shapes")}
    utd = ps.UTD.compute(pre, moved(pre, seed=7), grids["small_shapes"])
    return pre, grids, utd


def _brute_force(bank: ps.OperatorBank, A: torch.Tensor, target: torch.Tensor, task_id: str, other_ids: list[str]) -> float:
    """argmin over STRENGTHS of the off-task objective, its slopes by central differences of exact edits in numpy."""
    global_A = A.double().numpy()

    def slope(grid_id: str) -> np.ndarray:
        s = bank.state(grid_id)
        S, Z, G = (m.double().numpy() for m in (s.site_inputs, s.raw_embeddings, s.landmarks))
        G = G / np.linalg.norm(G, axis=1, keepdims=True)

        def aff(c: float) -> np.ndarray:
            f = Z + c * S @ global_A.T
            return (f / np.linalg.norm(f, axis=1, keepdims=True)) @ G.T
        return (aff(1e-6) - aff(-1e-6)) / 2e-6

    dU, U_ = slope(task_id), target.double().numpy()
    offs = [(slope(g), bank.state(g).landmarks.shape[0]) for g in other_ids]
    M = U_.shape[1]
    loss = lambda c: np.sum((c * dU - U_) ** 2) / M + sum(np.sum((c * d) ** 2) / m for d, m in offs)  # noqa: E731
    coarse = STRENGTHS[::100][int(np.argmin([loss(c) for c in STRENGTHS[::100]]))]
    fine = STRENGTHS[(STRENGTHS > coarse - 2e-3) & (STRENGTHS < coarse + 2e-3)]
    return float(fine[int(np.argmin([loss(c) for c in fine]))])


def test_bank_edit_auto_records_the_rule_and_its_strength(tiny, tmp_path):
    pre, grids, utd = tiny
    target = ps.from_config("siglip", seed=2)
    bank = ps.OperatorBank(target, ridge_a=0.1, ridge_b=0.5)
    for g in grids.values():
        bank.add_grid(g)
    edit = bank.edit(utd, "auto", meta={"note": "auto"})
    expected = _brute_force(bank, edit.operator, utd.matrix, grids["small_shapes"].identity, [grids["amber_shapes"].identity])
    assert edit.strength == pytest.approx(expected, abs=1e-4) and edit.strength > 0
    record = edit.meta["strength_rule"]
    assert record["rule"] == "auto" and record["label_free_rule"] == DEFAULT_STRENGTH_RULE and record["strength"] == edit.strength
    assert [(k["task"], k["source"], k["labelled"]) for k in record["kept"]] == [("amber_shapes", "grid", False)]
    assert edit.meta["note"] == "auto" and bank.edit(utd).strength == edit.strength  # "auto" is bank.edit's default
    torch.testing.assert_close(edit.operator, bank.edit(utd, 0.5).operator)
    edit.save(tmp_path / "auto.safetensors")
    back = ps.Edit.load(tmp_path / "auto.safetensors")
    assert back.strength == edit.strength and back.meta["strength_rule"] == record

    assert bank.edit(utd, "least_squares").strength > edit.strength  # the task-only fit ignores the other grid
    alone = ps.OperatorBank(target, ridge_a=0.1, ridge_b=0.5)  # the edit's own grid only: the rule has nothing to hold
    alone.add_grid(grids["small_shapes"])
    with pytest.warns(UserWarning, match="nothing to keep: strength='auto' chose the strength from the edit's own grids alone"):
        lone = alone.edit(utd, "auto")
    assert lone.strength == pytest.approx(alone.edit(utd, "least_squares").strength) and lone.strength > edit.strength
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bank.edit(utd, "auto")  # other grids given: no warning
        alone.edit(utd, "least_squares")  # a rule that reads no other grid: none either
    with pytest.raises(PlatonicError, match="strength rule"):
        bank.edit(utd, "bogus")
    with pytest.raises(PlatonicError, match="recorded by the bank itself"):
        bank.edit(utd, 0.5, meta={"space": "x"})
    saved = bank.save(tmp_path / "bank.safetensors", {"a": utd})
    with pytest.raises(PlatonicError, match="strength 'auto' chooses the strength .* which a saved bank does not hold"):
        saved.edit([("a", 1.0)], "auto")


def test_a_rule_registered_here_runs_through_the_bank(tiny):
    pre, grids, utd = tiny
    register_strength_rule(StrengthRule("probe_count", lambda A, task, others: float(len(task) + len(others))), replace=True)
    bank = ps.OperatorBank(ps.from_config("siglip", seed=2), ridge_a=0.1, ridge_b=0.5)
    for g in grids.values():
        bank.add_grid(g)
    assert bank.edit(utd, "probe_count").strength == 2.0


def test_platonic_edit_strength_auto(tiny, tmp_path, capsys):
    """`platonic edit --strength auto` writes the edit Python's bank.edit(..., "auto") makes on the same grids
    (the descriptor's and the other --task's); with --bank it is refused before anything loads."""
    pre, grids, utd = tiny
    target = ps.from_config("siglip", seed=2)
    target.save(str(tmp_path / "siglip"))
    utd.save(tmp_path / "a.safetensors")
    live = ps.OperatorBank(target)
    live.add_grid(grids["small_shapes"])
    live.save(tmp_path / "bank.safetensors", {"a": utd})
    world = ["--train-per-class", "4", "--test-per-class", "3", "--per-class", "2", "--quiet"]
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        assert cli.main(["edit", "--family", "siglip", "--checkpoint", "siglip", "--add", "a.safetensors", "--task", "small_shapes",
                         "--task", "amber_shapes", "--strength", "auto", *world, "-o", "auto.safetensors"]) == 0
        with pytest.raises(SystemExit):
            cli.main(["edit", "--family", "siglip", "--add", "a.safetensors", "--strength", "least_square", "-o", "x.safetensors"])
        assert "did you mean 'least_squares'" in capsys.readouterr().err
        assert cli.main(["edit", "--bank", "bank.safetensors", "--add", "a", "--strength", "auto", "-o", "x.safetensors"]) == 2
        assert "--strength auto reads the target's probes" in capsys.readouterr().err  # in the words typed
    finally:
        os.chdir(old)
    written = ps.Edit.load(tmp_path / "auto.safetensors")
    bank = ps.OperatorBank(ps.load("siglip", str(tmp_path / "siglip")))
    for g in grids.values():
        bank.add_grid(g)
    expected = bank.edit(utd, "auto")
    assert written.meta["strength_rule"]["rule"] == "auto" and written.meta["strength_rule"]["label_free_rule"] == DEFAULT_STRENGTH_RULE
    assert written.strength == pytest.approx(expected.strength, rel=1e-5)


# ---------------------------------------------------------------- in the grid
@pytest.fixture(scope="module")
def ws():
    return build_workspace()


def test_cell_methods_ask_the_rule(ws):
    """closed_form under settings' strength_rule folds the cell's operator at the bank's chosen strength, reading
    the other transfer tasks' grids (on the negation cell: the brute force's strength); closed_form_strength_<rule>
    equals it whatever the settings say; the oracle folds its own operator at the strength the rule gives its own descriptors."""
    cells = [next(c for c in addition_cells(ws) if c.target == "siglip"), next(c for c in negation_cells(ws) if c.target == "wide")]
    names = ["closed_form", "closed_form_strength_least_squares_off_task"]
    settings = CellSettings(strength_rule="auto", keep="probes")  # the rule without labels: the other tasks' probes held
    for cell in cells:
        results = evaluate_cell(ws, cell, settings, names)["results"]
        assert results["closed_form"] == results["closed_form_strength_least_squares_off_task"]
        default = evaluate_cell(ws, cell, CellSettings(keep="probes"), names)["results"]  # the default rule, read without labels
        assert default["closed_form"] == default["closed_form_strength_least_squares_off_task"] == results["closed_form"]
        sign, centre = (1.0 if cell.kind == "addition" else -1.0), settings.centres(cell.kind)
        A = sign * sum(ws.operator(cell.target, s, t, centre, ws.anchor_tasks([t]) if settings.anchors(cell.kind) else (), settings.space)
                       for s, t in zip(cell.sources, cell.tasks))
        terms = [sign * ws.descriptor(s, t, settings.space) for s, t in zip(cell.sources, cell.tasks)]
        composition = sum(terms[1:], terms[0])
        others = [ws.grid(t) for t in ws.transfer_tasks if t not in cell.tasks]
        bank = ws.bank(cell.target)
        c = bank.chosen_strength(composition, A, "auto", centre, others)
        assert results["closed_form"] == {**ws.accuracies(cell.target, eval_names(ws, cell), A, c), "strength": c}
        if cell.kind == "negation":
            grid_id = ws.grid(cell.tasks[0]).identity
            target = (composition.centred() if centre else composition).by_grid()[grid_id][1]
            assert c == pytest.approx(_brute_force(bank, A, target, grid_id, [g.identity for g in others]), abs=1e-4)
        # the oracle: the same rule for the target's own descriptors and their operators
        own = sign * sum(ws.operator(cell.target, cell.target, t, centre, ws.anchor_tasks([t]) if settings.anchors(cell.kind) else (),
                                     settings.space) for t in cell.tasks)
        mine = [sign * ws.descriptor(cell.target, t, settings.space) for t in cell.tasks]
        mine = sum(mine[1:], mine[0])
        c_own = bank.chosen_strength(mine, own, "auto", centre, others)
        assert c_own != pytest.approx(0.5) and c_own != pytest.approx(c)
        assert evaluate_cell(ws, cell, settings, ["oracle"])["results"]["oracle"] == {**ws.accuracies(cell.target, eval_names(ws, cell), own, c_own),
                                                                                      "strength": c_own}
