"""`platonic finetune` and `utd --finetune`: the recipe (the zoo's own for zoo members, else the
library's, options over it), the file it writes, and the report of how far the fine-tune moved."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

import platonic_sdk as ps
from platonic_sdk.cli import main as cli
from platonic_sdk.cli import parser as cli_parser
from platonic_sdk.cli.commands import finetune_recipe
from platonic_sdk.descriptor import UTD
from platonic_sdk.evaluate import accuracy
from platonic_sdk.evaluate.measure.movement import MIN_GAIN, MIN_RMS, Movement, movement
from platonic_sdk.finetune import FinetuneConfig, FineTuned, OrthoReg, finetune
from platonic_sdk.worlds.image import ImageWorld
from platonic_sdk.worlds.zoo import FINETUNE, ZOO_DIR

WORLD = ["--train-per-class", "4", "--test-per-class", "3", "--per-class", "2", "--quiet"]


def _args(*argv: str):
    return cli_parser.build_parser().parse_args(["finetune", "--task", "amber_shapes", *argv])


def test_the_recipe_is_the_zoos_for_zoo_members_and_the_librarys_elsewhere(tmp_path):
    zoo, origin = finetune_recipe(_args("--family", "clip", "--checkpoint", str(ZOO_DIR / "clip")))
    assert zoo == FinetuneConfig(**FINETUNE) and "platonic.json" in origin  # the member records its zoo's recipe
    tuned, origin = finetune_recipe(_args("--family", "clip", "--checkpoint", str(ZOO_DIR / "clip"), "--lr", "0.02",
                                          "--rank", "2", "--orthoreg", "0.5", "--logit-scale", "30", "--seed", "4"))
    assert tuned == FinetuneConfig(**{**FINETUNE, "lr": 0.02, "rank": 2, "logit_scale": 30.0}, orthoreg=OrthoReg(0.5), seed=4)
    assert origin.endswith("with --rank, --lr, --logit-scale, --orthoreg")
    library, origin = finetune_recipe(_args("--family", "clip", "--checkpoint", str(tmp_path), "--mode", "full"))
    assert library == FinetuneConfig(mode="full") and origin == "the library's defaults, with --mode"


def test_movement_reports_accuracy_and_descriptor_size():
    matrix = torch.tensor([[0.3, -0.4], [0.0, 0.0]])  # norm 0.5 over 4 entries: RMS 0.25
    utd = UTD(matrix, "grid", "t", {})
    moved = Movement("t", 40.0, 90.0, float(matrix.norm()), 0.25)
    assert not moved.barely_moved and moved.warning() is None
    assert moved.summary() == "source accuracy on 't' (test): 40.0 -> 90.0; descriptor norm 0.5 (RMS entry 0.25)"
    stalled = Movement("t", 40.0, 40.0 + MIN_GAIN / 2, 0.01, MIN_RMS / 2)
    assert stalled.barely_moved and "accuracy +0.5 points" in stalled.warning() and "RMS descriptor entry" in stalled.warning()
    assert "RMS" not in Movement("t", 40.0, 40.0, None, None).warning()
    worse = Movement("t", 60.0, 55.8, 0.5, 0.25)  # accuracy fell 4.2 points: said as such, not as "barely moved"
    assert worse.made_worse and not worse.barely_moved and worse.shortfalls() == []
    assert worse.warning("raise lr", "lower lr") == ("the fine-tune made the model worse on 't': test accuracy 60.0 -> 55.8 (-4.2 points), "
                                                     "and a descriptor of it carries that loss to a target; lower lr")
    slightly = Movement("t", 60.0, 59.5, 0.5, 0.25)  # within a point either way: barely moved
    assert not slightly.made_worse and "barely moved the model (accuracy -0.5 points, under 1 either way)" in slightly.warning()
    torch.manual_seed(0)
    enc = ps.from_config("clip")
    task = ImageWorld(train_per_class=4, test_per_class=3).task("small_shapes")
    measured = movement(enc, enc, task, utd)
    assert measured == Movement("small_shapes", accuracy(enc, task), accuracy(enc, task), pytest.approx(0.5), pytest.approx(0.25))


def test_finetune_writes_the_fine_tune_the_python_api_makes(tmp_path, capsys):
    ps.from_config("clip", seed=0).save(str(tmp_path / "pre"))
    argv = ["finetune", "--family", "clip", "--checkpoint", "pre", "--task", "small_shapes", *WORLD, "--max-steps", "3",
            "--lr", "0.01", "--rank", "2", "--logit-scale", "20", "--orthoreg", "0.5", "-o", "ft.safetensors"]
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        assert cli.main(argv) == 0
        out = capsys.readouterr()
        assert cli.main(["utd", "--family", "clip", "--checkpoint", "pre", "--ft-checkpoint", "ft.safetensors",
                         "--task", "small_shapes", *WORLD, "-o", "u.safetensors"]) == 0  # utd reads what finetune wrote
    finally:
        os.chdir(old)
    pre = ps.load("clip", str(tmp_path / "pre"))
    task = ImageWorld(train_per_class=4, test_per_class=3).task("small_shapes")
    saved = FineTuned.load(tmp_path / "ft.safetensors", pre)
    config = FinetuneConfig(lr=0.01, rank=2, logit_scale=20.0, max_steps=3, orthoreg=OrthoReg(0.5))
    direct = finetune(pre, task, config, progress=False)
    assert saved.metadata["rank"] == 2 and saved.metadata["orthoreg"]["weight"] == 0.5 and saved.metadata["steps"] == 3
    assert set(saved.task_vector.deltas) == set(direct.task_vector.deltas)
    for name, delta in direct.task_vector.deltas.items():
        assert torch.allclose(saved.task_vector.deltas[name], delta, atol=1e-6), name
    expected = UTD.compute(pre, saved.encoder, task.grid(2, 0))
    assert torch.allclose(UTD.load(tmp_path / "u.safetensors").matrix, expected.matrix, atol=1e-6)
    before, after = accuracy(pre, task), accuracy(saved.encoder, task)
    assert f"source accuracy on 'small_shapes' (test): {before:.1f} -> {after:.1f}" in out.out
    worse, barely = before - after >= MIN_GAIN, abs(after - before) < MIN_GAIN
    assert ("warning: the fine-tune made the model worse" in out.err, "warning: the fine-tune barely moved" in out.err) == (worse, barely)


def test_utd_finetune_uses_the_zoo_recipe_and_reports(tmp_path, capsys):
    argv = ["utd", "--family", "clip", "--checkpoint", str(ZOO_DIR / "clip"), "--finetune", "--max-steps", "3",
            "--task", "amber_shapes", *WORLD, "-o", str(tmp_path / "u.safetensors")]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    utd = UTD.load(tmp_path / "u.safetensors")
    recipe = utd.provenance["finetune"]
    assert {k: recipe[k] for k in FINETUNE} == FINETUNE and recipe["steps"] == 3
    assert "with the zoo's recipe" in out and "source accuracy on 'amber_shapes' (test):" in out
    assert f"descriptor norm {float(utd.matrix.norm()):.4g}" in out
