"""The LoRA route on tiny real models: starts from the unedited model, fits compositions, and is a reversible Edit."""

import time

import attrs
import numpy as np
import pytest
import torch

import platonic_sdk as ps
from platonic_sdk.descriptor import UTD
from platonic_sdk.edits.edit import Edit
from platonic_sdk.encoding.features import encode_items, landmarks
from platonic_sdk.errors import GridMismatchError, PlatonicError, ShapeError
from platonic_sdk.evaluate import accuracy
from platonic_sdk.evaluate.measure.selection import edit_evaluator, select_addition
from platonic_sdk.finetune import OrthoReg
from platonic_sdk.transfer.lora import LoraEdit, LoraRouteConfig, fit_lora

CLASSES = ("red circle", "green square", "blue triangle")
FAST = LoraRouteConfig(lr=3e-3, epochs=40, max_steps=40, batch_size=64)


def _items(modality: str, n: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    if modality == "image":
        return [rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8) for _ in range(n)]
    from platonic_sdk.data.audio import Waveform

    return [Waveform(rng.standard_normal(8000).astype(np.float32) * 0.1, 16000) for _ in range(n)]


def _task(modality: str, name: str, seed: int) -> ps.Task:
    labels = np.arange(18) % len(CLASSES)
    split = ps.Split(_items(modality, 18, seed), labels)
    return ps.Task(name, CLASSES, split, split)


def _grid(modality: str, name: str, seed: int) -> ps.Grid:
    return _task(modality, name, seed).grid(per_class=4, seed=seed)


def _utd(grid: ps.Grid, seed: int, scale: float = 0.1) -> UTD:
    return UTD(scale * torch.randn(grid.shape, generator=torch.Generator().manual_seed(seed)), grid.identity, grid.task)


def _achieved(target, edit: LoraEdit, grid: ps.Grid) -> torch.Tensor:
    """UTD of the applied edit on the grid, by re-encoding (independent of the training loss)."""
    g = landmarks(target, grid.prompts)
    before = encode_items(target, grid.items)
    with edit.applied_to(target):
        after = encode_items(target, grid.items)
    return (after - before) @ g.T


@pytest.fixture(scope="module")
def target():
    torch.manual_seed(0)
    return ps.from_config("clip", {"vision_config": {"hidden_size": 32, "intermediate_size": 64}, "projection_dim": 48})


@pytest.fixture(scope="module")
def fitted(target):
    grid = _grid("image", "a", 0)
    utd = _utd(grid, 1)
    return grid, utd, fit_lora(target, utd, [grid], FAST, progress=False)


def test_first_step_is_the_unedited_model_and_loss_decreases(fitted):
    grid, utd, edit = fitted
    # one batch holds every probe, so the first loss is mean_i (1/M) sum_j (0 - U_ij)^2 exactly when f_E = f_pre
    assert grid.shape[0] <= FAST.batch_size
    assert edit.losses[0] == pytest.approx(float(utd.matrix.square().mean()), rel=1e-4)
    assert edit.losses[-1] < 0.5 * edit.losses[0]
    assert len(edit.losses) == FAST.max_steps


def test_applied_edit_moves_the_utd_towards_the_target(target, fitted):
    grid, utd, edit = fitted
    achieved = _achieved(target, edit, grid)
    assert float((achieved - utd.matrix).square().mean()) < 0.5 * float(utd.matrix.square().mean())
    assert ps.descriptor.Composition.of(utd).objective({grid.identity: achieved}) < utd.as_composition().objective({grid.identity: torch.zeros(grid.shape)})


def test_remove_restores_bit_for_bit_and_strength_scales(target, fitted):
    grid, _, edit = fitted
    state = {k: v.clone() for k, v in target.model.state_dict().items()}
    edit.apply(target)
    assert edit.applied and not all(torch.equal(target.model.state_dict()[k], v) for k, v in state.items())
    with pytest.raises(PlatonicError, match="already applied"):
        edit.apply(target)
    edit.remove()
    assert all(torch.equal(target.model.state_dict()[k], v) for k, v in state.items())
    half = edit.scaled(0.5)
    assert all(torch.allclose(half.deltas()[k], 0.5 * d) for k, d in edit.deltas().items())
    assert torch.allclose(_achieved(target, edit.scaled(0.0), grid), torch.zeros(grid.shape), atol=1e-6)


def test_save_load_round_trip(target, fitted, tmp_path):
    grid, _, edit = fitted
    edit.save(tmp_path / "lora.safetensors")
    back = Edit.load(tmp_path / "lora.safetensors")
    assert isinstance(back, LoraEdit) and back.rank == 16 and back.lora_alpha == 32.0
    assert back.meta["target_family"] == "clip" and back.losses == edit.losses
    assert all(torch.equal(back.deltas()[k], d) for k, d in edit.deltas().items())
    assert torch.equal(_achieved(target, back, grid), _achieved(target, edit, grid))


def test_wrong_target_is_refused_and_left_unchanged(fitted):
    _, _, edit = fitted
    other = ps.from_config("clip")  # hidden 64 instead of 32
    state = {k: v.clone() for k, v in other.model.state_dict().items()}
    with pytest.raises(ShapeError):
        edit.apply(other)
    assert not edit.applied and all(torch.equal(other.model.state_dict()[k], v) for k, v in state.items())


def test_two_term_composition_fits_each_grid(target):
    grid_a, grid_b = _grid("image", "a", 0), _grid("image", "b", 5)
    utd_a, utd_b = _utd(grid_a, 1), _utd(grid_b, 2)
    edit = fit_lora(target, utd_a - 0.5 * utd_b, [grid_b, grid_a], FAST, progress=False)
    for grid, goal in ((grid_a, utd_a.matrix), (grid_b, -0.5 * utd_b.matrix)):
        assert float((_achieved(target, edit, grid) - goal).square().mean()) < float(goal.square().mean())
    assert [t["coef"] for t in edit.meta["terms"]] == [1.0, -0.5]
    with pytest.raises(GridMismatchError):
        fit_lora(target, utd_a + utd_b, [grid_a], FAST, progress=False)


def test_orthoreg_term_changes_the_fit(target, fitted):
    grid, utd, edit = fitted
    regularised = fit_lora(target, utd, [grid], attrs.evolve(FAST, orthoreg=OrthoReg(1.0)), progress=False)
    assert regularised.losses[0] > edit.losses[0]  # the penalty is sqrt(k) > 0 per layer at B = 0
    assert not all(torch.equal(regularised.deltas()[k], d) for k, d in edit.deltas().items())


def test_strength_sweep_drives_lora_and_closed_form_edits_alike(target, fitted):
    grid, utd, edit = fitted
    task = _task("image", "a", 0)
    bank = ps.OperatorBank(target)
    bank.add_grid(grid)
    state = {k: v.clone() for k, v in target.model.state_dict().items()}
    for candidate in (edit, bank.edit(utd, strength=0.5)):
        sweep = select_addition(edit_evaluator(target, candidate, [task]), {"a": 100.0}, strengths=[0.0, 0.7])
        with candidate.scaled(0.7).applied_to(target):
            expected = accuracy(target, task)
        assert sweep.results[0]["a"] == pytest.approx(accuracy(target, task))
        assert sweep.results[1]["a"] == pytest.approx(expected)
        assert all(torch.equal(target.model.state_dict()[k], v) for k, v in state.items())


@pytest.mark.parametrize("family", ps.list_families())
def test_ci_sized_fit_on_every_family(family):
    """Any family: the fit starts at the unedited model, runs in seconds, and its edit applies and undoes exactly."""
    torch.manual_seed(0)
    encoder = ps.from_config(family)
    grid = _grid(ps.family(family).modality, "a", 0)
    utd = _utd(grid, 1)
    start = time.perf_counter()
    edit = fit_lora(encoder, utd, [grid], LoraRouteConfig(lr=3e-3, max_steps=3), progress=False)
    assert time.perf_counter() - start < 30
    assert edit.losses[0] == pytest.approx(float(utd.matrix.square().mean()), rel=1e-4)
    state = {k: v.clone() for k, v in encoder.model.state_dict().items()}
    achieved = _achieved(encoder, edit, grid)
    assert torch.isfinite(achieved).all() and float(achieved.abs().max()) > 0
    assert all(torch.equal(encoder.model.state_dict()[k], v) for k, v in state.items())


def test_landmark_ridge_pulls_the_fit_towards_the_closed_forms_shrunk_target(target, fitted):
    """With ridge_b the per-probe optimum over a free change df is (G^T G + mu_b I)^{-1} G^T u (a ridge solve):
    the fit should land nearer that shrunk UTD, and move the probes less, than the unpenalised fit."""
    grid, utd, plain = fitted
    ridge_b = 1.0
    penalised = fit_lora(target, utd, [grid], attrs.evolve(FAST, ridge_b=ridge_b), progress=False)
    assert penalised.losses[0] == pytest.approx(plain.losses[0], rel=1e-6)  # the penalty is 0 at the unedited model
    G = landmarks(target, grid.prompts).double()
    mu = ridge_b * float(torch.linalg.svdvals(G).square().mean())
    gram = G.T @ G + mu * torch.eye(G.shape[1], dtype=G.dtype)
    shrunk = (utd.matrix.double() @ G @ torch.linalg.solve(gram, G.T)).float()  # per probe: G (G^T G + mu I)^{-1} G^T u
    assert float(shrunk.norm()) < 0.9 * float(utd.matrix.norm())

    def distance(edit, goal):
        return float((_achieved(target, edit, grid) - goal).norm())

    assert distance(penalised, shrunk) < distance(plain, shrunk)
    assert distance(plain, utd.matrix) < distance(penalised, utd.matrix)
    before = encode_items(target, grid.items)
    moved = {}
    for name, edit in (("plain", plain), ("penalised", penalised)):
        with edit.applied_to(target):
            moved[name] = float((encode_items(target, grid.items) - before).norm())
    assert moved["penalised"] < moved["plain"]


@pytest.mark.parametrize("family", ["clip", "siglip2", "clap-general"])
def test_a_pool_preprocessed_once_trains_exactly_as_preprocessing_every_step(family, monkeypatch):
    """The probe pool is preprocessed once and each step takes its rows; over the memory budget every step
    preprocesses its own items as before. Both give the same losses and factors, bit for bit (two grids,
    steps drawing across them; a tensor batch, a NaFlex dict batch, an audio dict batch)."""
    import platonic_sdk.transfer.lora as lora

    torch.manual_seed(0)
    encoder = ps.from_config(family)
    modality = ps.family(family).modality
    grid_a, grid_b = _grid(modality, "a", 0), _grid(modality, "b", 5)
    descriptor = _utd(grid_a, 1) - 0.5 * _utd(grid_b, 2)
    config = LoraRouteConfig(lr=3e-3, max_steps=4, batch_size=10)
    once = fit_lora(encoder, descriptor, [grid_a, grid_b], config, progress=False)
    calls = []
    monkeypatch.setattr(lora, "POOL_BYTES", 0)
    preprocess = encoder.preprocess
    monkeypatch.setattr(encoder, "preprocess", lambda items: calls.append(len(items)) or preprocess(items))
    every = fit_lora(encoder, descriptor, [grid_a, grid_b], config, progress=False)
    assert once.losses == every.losses and len(once.losses) == 4
    assert once.factors.keys() == every.factors.keys()
    assert all(torch.equal(once.factors[k][i], every.factors[k][i]) for k in once.factors for i in (0, 1))
    assert calls.count(10) >= 4  # the budget fallback preprocessed each step's own batch


def test_anchored_probes_move_less_and_the_term_still_fits(target, fitted):
    """Anchors join the objective with a zero target: their probes' readout moves less than without them."""
    grid, utd, edit = fitted
    anchor = _grid("image", "held", 9)
    anchored = fit_lora(target, utd, [grid], FAST, progress=False, anchors=[anchor])
    moved = lambda e: float(_achieved(target, e, anchor).square().mean())  # noqa: E731  (re-encoded, not the loss)
    assert moved(anchored) < 0.5 * moved(edit)
    goal = utd.matrix
    assert float((_achieved(target, anchored, grid) - goal).square().mean()) < float(goal.square().mean())
    assert anchored.meta["anchors"] == [{"task": "held", "grid_id": anchor.identity}] and edit.meta["anchors"] == []
    assert anchored.meta["steps"] == edit.meta["steps"]  # anchors join the batches, the fit is no longer
    with pytest.raises(GridMismatchError, match="both a term and an anchor"):
        fit_lora(target, utd, [grid], FAST, progress=False, anchors=[grid])
