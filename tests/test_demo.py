"""The demo pipeline end to end on a CI-sized world: tiny models pretrained for a few steps with the
world's own loop, fine-tuned for a few steps, then every demo stage; plus the pretraining losses."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from platonic_sdk import from_config
from platonic_sdk.demo import DemoConfig, register_method, run_demo, EXTRA_METHODS
from platonic_sdk.evaluate.workspace import Workspace
from platonic_sdk.evaluate.zeroshot import accuracy
from platonic_sdk.finetune.source import FinetuneConfig, finetune
from platonic_sdk.worlds.image import ImageWorld
from platonic_sdk.worlds.pretrain import LossHead, PretrainConfig, caption_positives, pretrain
from platonic_sdk.worlds.train_zoo import world_tokenizer
from cell_checks import assert_closed_form_cell_is_the_folded_model

TASKS = ("amber_shapes", "amber_glyphs", "fine_patterns")


def test_contrastive_loss_is_clip_loss_when_captions_differ() -> None:
    torch.manual_seed(0)
    a, b = torch.randn(6, 5), torch.randn(6, 5)
    head = LossHead("contrastive", init_log_scale=math.log(7.0))
    logits = 7.0 * torch.nn.functional.normalize(a, dim=-1) @ torch.nn.functional.normalize(b, dim=-1).T
    labels = torch.arange(6)
    expected = 0.5 * (torch.nn.functional.cross_entropy(logits, labels) + torch.nn.functional.cross_entropy(logits.T, labels))
    assert torch.allclose(head(a, b, torch.eye(6, dtype=torch.bool)), expected, atol=1e-6)


def test_sigmoid_loss_counts_identical_captions_as_positives() -> None:
    torch.manual_seed(1)
    a, b = torch.randn(4, 3), torch.randn(4, 3)
    pos = caption_positives(["x", "y", "x", "z"])
    assert pos.tolist()[0] == [True, False, True, False]
    head = LossHead("sigmoid", init_log_scale=math.log(10.0), init_bias=-2.0)
    cos = torch.nn.functional.normalize(a, dim=-1) @ torch.nn.functional.normalize(b, dim=-1).T
    y = pos.float() * 2 - 1
    expected = -torch.log(torch.sigmoid(y * (10.0 * cos - 2.0))).sum() / 4
    assert torch.allclose(head(a, b, pos), expected, atol=1e-6)


def test_pretraining_lowers_the_loss() -> None:
    world = ImageWorld(seed=0)
    images, captions = world.corpus(64)
    tok = world_tokenizer(ImageWorld(seed=0, train_per_class=1, test_per_class=1), captions)
    enc = from_config("clip", None, tokenizer=tok, seed=0)
    losses = pretrain(enc, images, captions, PretrainConfig(steps=30, batch_size=32, warmup=3), progress=False)
    assert np.mean(losses[-5:]) < np.mean(losses[:5])
    assert not enc.model.training


@pytest.fixture(scope="module")
def tiny_setup():
    torch.set_num_threads(1)
    world = ImageWorld(seed=3, train_per_class=4, test_per_class=3)
    images, captions = world.corpus(96)
    tok = world_tokenizer(world, captions)
    models, finetuned = {}, {}
    for i, (family, loss) in enumerate((("clip", "contrastive"), ("siglip", "sigmoid"))):
        enc = from_config(family, None, tokenizer=tok, seed=i)
        pretrain(enc, images, captions, PretrainConfig(loss=loss, steps=4, batch_size=32, warmup=1), progress=False)
        models[family] = enc
        for name in TASKS:
            ft = finetune(enc, world.task(name), FinetuneConfig(lr=1e-2, max_steps=2, batch_size=8), progress=False)
            finetuned[(family, name)] = ft.encoder
    tasks = {n: world.task(n) for n in (*TASKS, world.trio[2], *world.controls)}
    ws = Workspace(models, tasks, finetuned, world.controls, per_class=2, grid_seed=3)
    describe = {"related": list(world.trio[:2]), "held_out": world.trio[2]}
    return world, ws, describe


def test_demo_pipeline_end_to_end(tiny_setup, tmp_path) -> None:
    world, ws, describe = tiny_setup
    calls = []

    def fake_route(ws_, cell, settings):  # an extra method: here, zero-shot again, to test the hook
        calls.append(cell.key)
        return ws_.accuracies(cell.target, list(cell.tasks) + list(ws_.controls))

    register_method("probe_hook", fake_route, kinds=("addition",), max_cells=2)
    try:
        report = run_demo(DemoConfig(seed=3, lora_cells=1, lora_steps=2, weight_space_cells=2), tmp_path, progress=False, setup=(ws, describe))
    finally:
        EXTRA_METHODS.pop("probe_hook")
    on_disk = json.loads((tmp_path / "report.json").read_text())
    assert on_disk["addition"]["cells"] == report["addition"]["cells"] == 2 * 3  # 2 targets x 3 pairs, 1 other source
    assert on_disk["negation"]["cells"] == 2 * 3
    for method in ("zero_shot", "closed_form", "random", "single_a", "single_b", "oracle"):
        assert set(on_disk["addition"][method]) >= {"task_a", "task_b", "control"}
    for method in ("zero_shot", "closed_form"):
        assert set(on_disk["negation"][method]) >= {"removed", "control"}
    assert {"zero_shot", "closed_form"} <= set(on_disk["held_out"])
    assert {"same_task_cross_model", "same_model_cross_task"} <= set(on_disk["similarity"])
    assert len(calls) == 2 and on_disk["addition"]["probe_hook"]["cells"] == 2
    # addition and negation tables, and the LoRA route against the closed form on its own cells of each kind
    assert (tmp_path / "report.md").read_text().count("ours, closed form") == 4
    for kind in ("addition", "negation"):
        same = on_disk["lora_same_cells"][kind]
        assert same["cells"] == 1 and same["lora"]["cells"] == 1 and on_disk[kind]["lora"]["cells"] == 1
    same = on_disk["lora_same_cells"]["addition"]
    assert on_disk["checks"]["lora_control_minus_closed_form"] == pytest.approx(same["lora"]["control"] - same["closed_form"]["control"])
    lora_task = np.mean([same["lora"]["task_a"], same["lora"]["task_b"]]) - np.mean([same["closed_form"]["task_a"], same["closed_form"]["task_b"]])
    assert on_disk["checks"]["lora_task_minus_closed_form"] == pytest.approx(lora_task)
    assert on_disk["addition_same_model"]["cells"] == 2 and on_disk["addition"]["weight_space"]["cells"] == 2
    assert "orthoreg" not in on_disk  # the OrthoReg study is opt-in

    # independent check: zero-shot through a real forward pass on each target, averaged like the report
    direct = {(t, name): accuracy(ws.models[t], ws.tasks[name]) for t in ws.families for name in TASKS}
    cells = [json.loads(line) for line in (tmp_path / "cells.jsonl").read_text().splitlines()]
    add = [c for c in cells if c["kind"] == "addition"]
    assert report["addition"]["zero_shot"]["task_a"] == pytest.approx(np.mean([direct[(c["target"], c["tasks"][0])] for c in add]))
    # every cross-family cell takes its descriptors from the other family only
    assert all(c["target"] not in c["sources"] for c in cells)


def test_closed_form_cell_matches_a_folded_model(tiny_setup) -> None:
    assert_closed_form_cell_is_the_folded_model(tiny_setup[1])



def test_orthoreg_table_lists_every_method_plain_then_orthoreg() -> None:
    from platonic_sdk.demo import orthoreg_tables

    runs = [{"method": m, "orthoreg": lam, "mean_cosine": 0.1, "coef": 0.5 + 3.5 * (m == "iso_c"), "grid_top": 4.0,
             "merged_mean": 50.0 + i, "normalised": 0.9}
            for i, (lam, m) in enumerate((lam, m) for lam in (0.0, 1.0) for m in ("task_arithmetic", "ties", "iso_c"))]
    (table,) = orthoreg_tables({"orthoreg": {"family": "clip", "tasks": ["a", "b"], "runs": runs}})
    rows = [[c.strip() for c in line.split("|")[1:5]] for line in table.splitlines() if line.startswith("|")][2:]
    assert [r[:2] for r in rows] == [[m, lam] for m in ("task_arithmetic", "ties", "iso_c") for lam in ("0.00", "1.00")]
    assert [r[3] for r in rows] == ["0.50"] * 4 + ["4.00 (grid top)"] * 2
