"""A user's own family, written from docs/architecture.md's recipe (examples/register_family.py's bagnet:
the abstract members and nothing else), works under every default: as a descriptor source and as a
target, through UTD, operator bank, edit and the experiment grid."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

import platonic_sdk as ps
from platonic_sdk.evaluate.measure.workspace import Workspace
from platonic_sdk.evaluate.run.runner import run_experiment
from platonic_sdk.evaluate.plan.settings import CellSelection, ExperimentConfig
from platonic_sdk.protocol.encoder import CLIP_LOGIT_SCALE
from platonic_sdk.spaces import DEFAULT_SPACE
from platonic_sdk.worlds.image import ImageWorld
from tests.grid_zoo import moved

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "register_family.py"
TASKS = ("amber_shapes", "small_shapes")


@pytest.fixture(scope="module")
def bagnet_module():
    """The example module, imported once (its import registers the family)."""
    name = "register_family_example"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLE)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="module")
def world():
    return ImageWorld(train_per_class=4, test_per_class=3)


@pytest.fixture(scope="module")
def models(bagnet_module):
    return {"bagnet": ps.from_config("bagnet", {"width": 8, "embed_dim": 16}), "clip": ps.from_config("clip", seed=0)}


def test_the_example_family_overrides_nothing_but_the_abstract_members(bagnet_module, models):
    bagnet = models["bagnet"]
    assert "logit_scale" not in vars(type(bagnet))  # the recipe's family: no logit scale given
    assert bagnet.logit_scale == pytest.approx(1 / 0.07) == CLIP_LOGIT_SCALE  # no `logit_scale` parameter: CLIP's initial scale


def test_a_stored_log_scale_is_read_and_capped(bagnet_module):
    """A model with CLIP's scalar `logit_scale` (the log of the scale) gets exp of it, capped at 100."""
    bagnet = ps.from_config("bagnet", {"width": 8, "embed_dim": 16})
    bagnet.model.logit_scale = torch.nn.Parameter(torch.tensor(2.0))
    assert bagnet.logit_scale == pytest.approx(float(torch.tensor(2.0).exp()))
    bagnet.model.logit_scale.data.fill_(7.0)  # exp(7) > 100
    assert bagnet.logit_scale == 100.0


def _edited_rows_move(bank_target: ps.DualEncoder, utd: ps.UTD, grid: ps.Grid) -> None:
    """The edit from `utd` moves the target's probe embeddings; removing it restores the weights bit for bit."""
    bank = ps.OperatorBank(bank_target)
    bank.add_grid(grid)
    edit = bank.edit(utd, strength=0.5)
    batch = bank_target.preprocess(grid.items[:4])
    before = {n: t.detach().clone() for n, t in bank_target.model.state_dict().items()}
    z0 = bank_target.embed_media(batch).detach()
    with edit.applied_to(bank_target):
        z1 = bank_target.embed_media(batch).detach()
    assert torch.isfinite(z1).all() and not torch.allclose(z0, z1)
    assert all(torch.equal(before[n], t) for n, t in bank_target.model.state_dict().items())


def test_source_and_target_under_the_default_space(models, world):
    bagnet, clip = models["bagnet"], models["clip"]
    grid = world.task(TASKS[0]).grid(per_class=2, seed=0)
    # as a source: the default space reads its logit scale (the default one)
    from_bagnet = ps.UTD.compute(bagnet, moved(bagnet, seed=1), grid)
    assert from_bagnet.space == DEFAULT_SPACE and torch.isfinite(from_bagnet.matrix).all() and from_bagnet.matrix.abs().sum() > 0
    by_hand = ps.UTD.compute(bagnet, moved(bagnet, seed=1), grid, logit_scale=1 / 0.07)
    assert torch.equal(from_bagnet.matrix, by_hand.matrix)
    _edited_rows_move(clip, from_bagnet, grid)
    # as a target of CLIP's descriptor
    from_clip = ps.UTD.compute(clip, moved(clip, seed=2), grid)
    _edited_rows_move(bagnet, from_clip, grid)


def test_the_grid_runs_with_the_family_on_both_sides(models, world, tmp_path):
    tasks = {name: world.task(name) for name in (*TASKS, world.controls[0])}
    finetuned = {(f, t): moved(m, seed=10 * i + j) for i, (f, m) in enumerate(models.items()) for j, t in enumerate(TASKS)}
    ws = Workspace(models, tasks, finetuned, controls=[world.controls[0]], per_class=2, batch_size=16)
    config = ExperimentConfig(cells=(CellSelection("addition"), CellSelection("negation")), methods=("zero_shot", "closed_form"),
                              sweep_cells=1, accumulation=False, guarantee=False, similarity=False)
    run_experiment(ws, tmp_path / "run", config)
    records = [json.loads(line) for line in (tmp_path / "run" / "cells.jsonl").read_text().splitlines()]
    ran = [r for r in records if r["results"].get("closed_form")]
    for kind in ("addition", "negation"):
        as_target = [r for r in ran if r["kind"] == kind and r["target"] == "bagnet"]
        as_source = [r for r in ran if r["kind"] == kind and set(r["sources"]) == {"bagnet"}]
        assert as_target and as_source, [r["key"] for r in records]
        assert all(0 <= acc <= 100 for r in as_target + as_source for acc in r["results"]["closed_form"].values())
