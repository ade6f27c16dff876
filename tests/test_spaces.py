"""Descriptors in prediction space (docs/method.md sec. 15): every space against a computation by hand,
on a real tiny model with template ensembles, and in the algebra, files, banks, workspace and cell methods."""

import math

import numpy as np
import pytest
import torch
from grid_zoo import build_workspace, moved

import platonic_sdk as ps
from platonic_sdk import UTD, Grid, Task
from platonic_sdk.errors import PlatonicError, SpaceMismatchError
from platonic_sdk.evaluate.measure.cells import addition_cells, negation_cells
from platonic_sdk.evaluate.measure.methods import evaluate_cell, method
from platonic_sdk.evaluate.plan.settings import CellSettings, ExperimentConfig
from platonic_sdk.io import save_tensors
from platonic_sdk.linalg import ridge_solver
from platonic_sdk.spaces import DEFAULT_SPACE, SPACES, space_descriptor
from platonic_sdk.spaces.confidence import confidence_labels
from platonic_sdk.spaces.probability import probability_change
from platonic_sdk.spaces.pseudo_label import pseudo_labels
from platonic_sdk.worlds.image import ImageWorld

# ---------------------------------------------------------------- a 3-probe x 2-prompt grid by hand
# Landmarks g_0 = e1, g_1 = -e1 in R^2, so a probe f = (x, y) has affinities (x, -x) and, at logit scale
# s = ln(32) / 2, P(class 0) = 1 / (1 + exp(-2 s x)) = 1 / (1 + 32^-x): 1/2 at x = 0, 8/9 at 0.6, 16/17 at 0.8,
# 32/33 at 1 (and 1 - those at -x).
S = math.log(32) / 2
G = torch.tensor([[1.0, 0.0], [-1.0, 0.0]], dtype=torch.float64)
F_PRE = torch.tensor([[0.0, 1.0], [0.6, 0.8], [1.0, 0.0]], dtype=torch.float64)
F_FT = torch.tensor([[0.6, 0.8], [-0.8, 0.6], [0.8, 0.6]], dtype=torch.float64)
# affinity: <f_ft, g> - <f_pre, g>, x_ft - x_pre in column 0 and its negative in column 1
U = torch.tensor([[0.6, -0.6], [-1.4, 1.4], [-0.2, 0.2]], dtype=torch.float64)
# probability: P_ft(0) - P_pre(0) = 8/9 - 1/2, 1/17 - 8/9, 16/17 - 32/33 (column 1 the negative)
p = [8 / 9 - 1 / 2, 1 / 17 - 8 / 9, 16 / 17 - 32 / 33]
PROB = torch.tensor([[v, -v] for v in p], dtype=torch.float64)
# pseudo-labels: the fine-tuned model predicts classes 0, 1, 0; one-hot minus 1/2
PSEUDO = torch.tensor([[0.5, -0.5], [-0.5, 0.5], [0.5, -0.5]], dtype=torch.float64)
# confidence: the fine-tuned top probabilities 8/9, 16/17, 16/17 times the pseudo-label rows
CONF = torch.tensor([[8 / 9], [16 / 17], [16 / 17]], dtype=torch.float64) * PSEUDO
NORM_U = math.sqrt(2 * (0.36 + 1.96 + 0.04))  # ||U||_F, the scale of every prediction-space descriptor
# blend: U (its rows already sum to zero, so centring keeps it) and CONF, each at unit norm, summed
NORM_CONF = math.sqrt(2 * 0.25 * ((8 / 9) ** 2 + 2 * (16 / 17) ** 2))
BLEND = U / NORM_U + CONF / NORM_CONF


def _grid() -> Grid:
    return Grid("by_hand", [0, 1, 2], [("a photo of class zero",), ("a photo of class one",)],
                [np.array([i], dtype=np.uint8) for i in range(3)])


def test_natural_units_by_hand():
    torch.testing.assert_close(probability_change(F_PRE, F_FT, G, S), PROB)
    torch.testing.assert_close(pseudo_labels(F_FT, G), PSEUDO)
    torch.testing.assert_close(confidence_labels(F_FT, G, S), CONF)
    for m in (PROB, PSEUDO, CONF):  # every prediction-space row sums to zero: centring changes nothing
        torch.testing.assert_close(m.sum(1), torch.zeros(3, dtype=torch.float64))


@pytest.mark.parametrize("space, natural", [("affinity", U), ("probability", PROB), ("pseudo_label", PSEUDO), ("confidence", CONF),
                                            ("blend", BLEND)])
def test_each_space_on_a_grid_by_hand(space, natural):
    """UTD.from_features in each space: the hand-computed matrix, scaled to ||U||_F except affinity."""
    expected = natural if space == "affinity" else natural * (NORM_U / float(natural.norm()))
    torch.testing.assert_close(space_descriptor(space, F_PRE, F_FT, G, S), expected)
    grid = _grid()
    utd = UTD.from_features(F_PRE.float(), F_FT.float(), G.float(), grid, space=space, logit_scale=S, provenance={"family": "by-hand"})
    assert utd.space == space and utd.grid_id == grid.identity and utd.provenance["family"] == "by-hand"
    torch.testing.assert_close(utd.matrix, expected.float(), atol=1e-6, rtol=1e-6)
    assert float(utd.matrix.norm()) == pytest.approx(NORM_U, rel=1e-6)
    if space in ("probability", "confidence", "blend"):
        assert utd.provenance["logit_scale"] == pytest.approx(S)
    if space != "affinity":  # rows already sum to zero
        torch.testing.assert_close(utd.centred().matrix, utd.matrix, atol=1e-6, rtol=0)


def test_spaces_that_need_a_logit_scale_say_so():
    grid = _grid()
    for space in ("probability", "confidence", "blend"):
        with pytest.raises(PlatonicError, match="logit scale"):
            UTD.from_features(F_PRE, F_FT, G, grid, space=space)
    with pytest.raises(PlatonicError, match="unknown descriptor space 'logits'.*affinity, probability"):
        UTD.from_features(F_PRE, F_FT, G, grid, space="logits")
    with pytest.raises(ValueError, match="logit scale"):
        probability_change(F_PRE, F_FT, G, 0.0)


def test_no_change_gives_zero_descriptors_where_the_space_measures_change():
    for space in ("affinity", "probability"):
        assert float(space_descriptor(space, F_PRE, F_PRE, G, S).norm()) == 0.0
    # pseudo-labels describe the fine-tuned predictions, scaled to the (zero) change: zero too
    assert float(space_descriptor("pseudo_label", F_PRE, F_PRE, G, S).norm()) == 0.0


# ---------------------------------------------------------------- algebra, files and banks
def _in(space: str, grid: Grid, seed: int = 0) -> UTD:
    return UTD(torch.randn(grid.shape, generator=torch.Generator().manual_seed(seed)), grid.identity, grid.task, {}, space)


def test_composition_within_a_space_and_refusal_across():
    grid, other = _grid(), Grid("other", [0, 1], [("x",), ("y",)], [np.array([7], dtype=np.uint8)] * 2)
    a, b = _in("pseudo_label", grid, 0), _in("pseudo_label", other, 1)
    comp = a + 2 * b - 0.5 * a
    assert comp.space == "pseudo_label" and [t.utd.space for t in comp] == ["pseudo_label"] * 3
    assert comp.centred().space == "pseudo_label" and (-a).space == "pseudo_label"
    with pytest.raises(SpaceMismatchError, match="different spaces \\(pseudo_label, affinity\\)"):
        a + _in("affinity", other)
    with pytest.raises(SpaceMismatchError):
        a.cosine(_in("probability", grid))
    rnd = a.random_like(3)
    assert rnd.space == "pseudo_label" and float(rnd.matrix.norm()) == pytest.approx(float(a.matrix.norm()), rel=1e-5)
    assert "space='pseudo_label'" in repr(a) and "space" not in repr(_in("affinity", grid))
    with pytest.raises(PlatonicError, match="unknown descriptor space"):
        _in("logits", grid)


@pytest.mark.parametrize("space", SPACES)
def test_save_load_round_trip_keeps_the_space(tmp_path, space):
    utd = UTD.from_features(F_PRE.float(), F_FT.float(), G.float(), _grid(), space=space, logit_scale=S, provenance={"task_spec": "x"})
    utd.save(tmp_path / "u.safetensors")
    back = UTD.load(tmp_path / "u.safetensors")
    assert back.space == space and back.provenance == utd.provenance and back.grid_id == utd.grid_id
    torch.testing.assert_close(back.matrix, utd.matrix)


def test_a_file_from_before_spaces_loads_as_affinity(tmp_path):
    grid = _grid()
    save_tensors(tmp_path / "old.safetensors", {"utd": U.float()}, "utd", {"grid_id": grid.identity, "task": grid.task, "provenance": {}})
    assert UTD.load(tmp_path / "old.safetensors").space == "affinity"


@pytest.fixture(scope="module")
def tiny():
    """A tiny CLIP, a moved copy as its fine-tune, and an image task with two templates per class."""
    world = ImageWorld(train_per_class=4, test_per_class=2)
    base = world.task("amber_shapes")
    task = Task("amber_two_templates", base.classnames, base.train, base.test, templates=("a photo of a {}.", "{}, a shape"))
    pre = ps.from_config("clip", seed=0)
    return pre, moved(pre, seed=7, scale=0.05), task


@pytest.mark.parametrize("space", SPACES)
def test_compute_on_a_model_with_template_ensembles(tiny, space):
    """UTD.compute(space=...) against an independent computation: the grid's M columns are classes, each
    landmark the normalised mean of its templates' unit text embeddings, the softmax over the M classes at
    the model's own logit scale (exp of its stored log scale)."""
    pre, ft, task = tiny
    grid = task.grid(per_class=3, seed=0)
    utd = UTD.compute(pre, ft, grid, space=space)
    assert utd.space == space and utd.shape == (len(grid.probe_ids), len(task.classnames))
    with torch.no_grad():
        s = float(pre.model.logit_scale.exp())
        g = torch.stack([torch.nn.functional.normalize(pre.encode_text(list(ps_)).double(), dim=1).mean(0) for ps_ in grid.prompts])
        g = torch.nn.functional.normalize(g, dim=1)
        f0 = pre.encode_media(pre.preprocess(list(grid.items))).double()
        f1 = ft.encode_media(ft.preprocess(list(grid.items))).double()
    a0, a1 = f0 @ g.T, f1 @ g.T
    aff = a1 - a0
    if space == "affinity":
        expected = aff
    elif space == "probability":
        expected = (s * a1).softmax(1) - (s * a0).softmax(1)
    else:
        onehot = torch.nn.functional.one_hot(a1.argmax(1), g.shape[0]).double() - 1 / g.shape[0]
        expected = onehot if space == "pseudo_label" else (s * a1).softmax(1).amax(1, keepdim=True) * onehot
        if space == "blend":
            centred = aff - aff.mean(1, keepdim=True)
            expected = centred / centred.norm() + expected / expected.norm()
    if space != "affinity":
        expected = expected * (aff.norm() / expected.norm())
    torch.testing.assert_close(utd.matrix.double(), expected, atol=2e-5, rtol=1e-4)


def test_prediction_space_descriptors_transfer_and_refuse_mixed_banks(tiny, tmp_path):
    """A bank solves any space's descriptor with the one solve; edits record the space; a saved bank refuses
    to compose entries of different spaces."""
    pre, ft, task = tiny
    grid = task.grid(per_class=3, seed=0)
    target = ps.from_config("siglip", seed=2)
    bank = ps.OperatorBank(target, ridge_a=0.1, ridge_b=0.5)
    state = bank.add_grid(grid)
    aff, pl = UTD.compute(pre, ft, grid, space="affinity"), UTD.compute(pre, ft, grid, space="pseudo_label")
    solve = ridge_solver(state.solve_rows, state.landmarks, 0.1, 0.5)
    torch.testing.assert_close(bank.operator(pl), solve(pl.matrix), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(bank.operator(0.5 * pl), 0.5 * solve(pl.matrix), atol=1e-5, rtol=1e-4)
    assert bank.edit(pl, 0.5).meta["space"] == "pseudo_label"
    with pytest.raises(SpaceMismatchError):
        bank.edit(aff + pl)
    saved = bank.save(tmp_path / "bank.safetensors", {"aff": aff, "pl": pl})
    loaded = ps.OperatorBank.load(tmp_path / "bank.safetensors")
    assert loaded.entries["pl"]["space"] == "pseudo_label"
    assert loaded.edit([("pl", 1.0)]).meta["space"] == "pseudo_label"
    with pytest.raises(SpaceMismatchError, match="different spaces"):
        loaded.edit([("aff", 1.0), ("pl", 1.0)])
    assert saved.entries["aff"]["space"] == "affinity"


def test_families_expose_their_logit_scale():
    for family in ("clip", "siglip", "openclip"):
        model = ps.from_config(family, seed=0)
        assert model.logit_scale == pytest.approx(float(model.model.logit_scale.detach().exp()))


# ---------------------------------------------------------------- the experiment runner
@pytest.fixture(scope="module")
def ws():
    return build_workspace()


def test_workspace_caches_descriptors_per_space(ws):
    aff, pl = ws.descriptor("clip", "amber_shapes", "affinity"), ws.descriptor("clip", "amber_shapes", "pseudo_label")
    assert aff.space == "affinity" and pl.space == "pseudo_label" and ws.descriptor("clip", "amber_shapes").space == DEFAULT_SPACE
    assert ws.descriptor("clip", "amber_shapes", "pseudo_label") is pl
    assert float(pl.matrix.norm()) == pytest.approx(float(aff.matrix.norm()), rel=1e-5)  # norm-matched
    prob = ws.descriptor("clip", "amber_shapes", "probability")
    assert prob.provenance["logit_scale"] == pytest.approx(ws.models["clip"].logit_scale)
    A_aff, A_pl = ws.operator("siglip", "clip", "amber_shapes", space="affinity"), ws.operator("siglip", "clip", "amber_shapes", space="pseudo_label")
    assert not torch.allclose(A_aff, A_pl)
    torch.testing.assert_close(A_pl, ws.solve_operator("siglip", pl))


def test_a_stored_descriptor_is_used_only_in_its_own_space(ws):
    from platonic_sdk.evaluate.measure.workspace import Workspace

    stored = {**ws.finetuned, ("clip", "amber_shapes"): ws.descriptor("clip", "amber_shapes", "affinity")}
    other = Workspace(ws.models, ws.tasks, stored, ws.controls, per_class=ws.per_class, ridge_b=ws.ridge_b, batch_size=ws.batch_size)
    assert other.descriptor("clip", "amber_shapes", "affinity") is stored[("clip", "amber_shapes")]
    with pytest.raises(PlatonicError, match="stored affinity descriptor.*pseudo_label space"):
        other.descriptor("clip", "amber_shapes", "pseudo_label")


def test_cell_methods_follow_the_settings_space(ws):
    cells = [next(c for c in addition_cells(ws) if c.target == "siglip"), next(c for c in negation_cells(ws) if c.target == "wide")]
    names = ["closed_form", "random_utd", "label_reference", *(f"closed_form_{s}" for s in SPACES)]
    for cell in cells:
        plain = evaluate_cell(ws, cell, CellSettings(), names)["results"]
        assert plain["closed_form"] == plain[f"closed_form_{DEFAULT_SPACE}"]
        for space in (s for s in SPACES if s != DEFAULT_SPACE):
            moved_ = evaluate_cell(ws, cell, CellSettings(space=space), names)["results"]
            assert moved_["closed_form"] == plain[f"closed_form_{space}"] == moved_[f"closed_form_{space}"]
            assert moved_[f"closed_form_{DEFAULT_SPACE}"] == plain["closed_form"]
        assert evaluate_cell(ws, cell, CellSettings(space="pseudo_label"), names)["settings"]["space"] == "pseudo_label"


def test_settings_check_the_space():
    with pytest.raises(PlatonicError, match="unknown descriptor space 'logits'"):
        CellSettings(space="logits")
    assert CellSettings().space == DEFAULT_SPACE == "blend" and CellSettings().as_dict()["space"] == "blend"
    ExperimentConfig(methods=("closed_form_probability", "closed_form_confidence", "alignment", "alignment_lstsq"))
    assert method("closed_form_pseudo_label").label == "closed form, pseudo-label descriptors"


def test_platonic_utd_space_writes_what_the_python_api_computes(tmp_path, capsys, monkeypatch):
    from platonic_sdk.cli import main as cli
    from platonic_sdk.cli import parser as cli_parser

    pre = ps.from_config("clip", seed=0)
    pre.save(str(tmp_path / "pre"))
    moved(pre, seed=3).save(str(tmp_path / "ft"))
    monkeypatch.chdir(tmp_path)
    world = ["--train-per-class", "4", "--test-per-class", "3", "--per-class", "2", "--quiet"]
    assert cli.main(["utd", "--family", "clip", "--checkpoint", "pre", "--ft-checkpoint", "ft", "--task", "small_shapes", *world,
                     "--space", "Confidence", "-o", "u.safetensors"]) == 0
    assert "(confidence space)" in capsys.readouterr().out
    saved = UTD.load(tmp_path / "u.safetensors")
    task = ImageWorld(train_per_class=4, test_per_class=3).task("small_shapes")
    expected = UTD.compute(ps.load("clip", str(tmp_path / "pre")), ps.load("clip", str(tmp_path / "ft")), task.grid(2, 0), space="confidence")
    assert saved.space == "confidence" and saved.grid_id == expected.grid_id
    torch.testing.assert_close(saved.matrix, expected.matrix, atol=1e-6, rtol=1e-5)
    parser = cli_parser.build_parser()
    assert parser.parse_args(["grid", "--space", "probability"]).space == "probability"
    assert parser.parse_args(["grid"]).space is None  # CellSettings' default, affinity
    # a space is checked once --plugin modules have loaded (one may register it), before any model loads
    assert parser.parse_args(["utd", "--space", "logits"]).space == "logits"
    assert cli.main(["utd", "--family", "clip", "--task", "small_shapes", "--finetune", "--space", "logits", "-o", "u.safetensors"]) == 2


def test_blend_centres_the_affinity_part():
    """A per-probe offset of the affinities (the same shift of every prompt) does not reach the blend."""
    g = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)  # two orthogonal landmarks
    f_pre = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    f_ft = torch.tensor([[0.6, 0.8], [0.8, 0.6]], dtype=torch.float64)
    # U rows (-0.4, 0.8) and (0.8, -0.4), offsets 0.2: centred (-0.6, 0.6) and (0.6, -0.6); predictions 1 then 0,
    # each with top probability 1 / (1 + exp(-0.2 s)) (a logit gap of 0.2 s)
    U2 = torch.tensor([[-0.4, 0.8], [0.8, -0.4]], dtype=torch.float64)
    centred = torch.tensor([[-0.6, 0.6], [0.6, -0.6]], dtype=torch.float64)
    top = 1 / (1 + math.exp(-S * 0.2))
    conf = top * torch.tensor([[-0.5, 0.5], [0.5, -0.5]], dtype=torch.float64)
    by_hand = centred / float(centred.norm()) + conf / float(conf.norm())
    torch.testing.assert_close(space_descriptor("blend", f_pre, f_ft, g, S), by_hand * (float(U2.norm()) / float(by_hand.norm())))
