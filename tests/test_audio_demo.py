"""The demo study on a CI-sized audio world: tiny CLAP models through the same core as images."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from cell_checks import assert_closed_form_cell_is_the_folded_model

from platonic_sdk import from_config
from platonic_sdk.encoding.zeroshot import accuracy
from platonic_sdk.evaluate.measure.workspace import Workspace
from platonic_sdk.evaluate.plan.demo import demo_config
from platonic_sdk.evaluate.run.runner import run_experiment
from platonic_sdk.finetune.source import FinetuneConfig, finetune
from platonic_sdk.worlds.audio import AudioWorld
from platonic_sdk.worlds.pretrain import PretrainConfig, pretrain
from platonic_sdk.worlds.registry import world_spec
from platonic_sdk.worlds.train_zoo import world_tokenizer

TASKS = ("raised_notes", "raised_melodies", "bright_noises")


@pytest.fixture(scope="module")
def tiny_setup():
    torch.set_num_threads(1)
    world = AudioWorld(seed=5, train_per_class=3, test_per_class=2)
    clips, captions = world.corpus(48)
    tok = world_tokenizer(world, captions)
    models, finetuned = {}, {}
    for i, family in enumerate(("clap-htsat-unfused", "clap-music")):
        enc = from_config(family, None, tokenizer=tok, seed=i)
        losses = pretrain(enc, clips, captions, PretrainConfig(steps=3, batch_size=16, warmup=1), progress=False)
        assert all(np.isfinite(losses))
        models[family] = enc
        for name in TASKS:
            ft = finetune(enc, world.task(name), FinetuneConfig(lr=1e-2, max_steps=2, batch_size=8), progress=False)
            finetuned[(family, name)] = ft.encoder
    tasks = {n: world.task(n) for n in (*TASKS, world.trio[2], *world.controls)}
    ws = Workspace(models, tasks, finetuned, world.controls, per_class=2, grid_seed=5)
    return world, ws, {"related": list(world.trio[:2]), "held_out": world.trio[2]}


def test_audio_demo_runs_every_stage(tiny_setup, tmp_path) -> None:
    world, ws, describe = tiny_setup
    report = run_experiment(ws, tmp_path, demo_config("audio", seed=5))
    on_disk = json.loads((tmp_path / "report.json").read_text())
    assert on_disk["addition"]["cells"] == report["addition"]["cells"] == 2 * 3  # 2 targets x 3 task pairs
    assert on_disk["held_out"]["task"] == "raised_vibrato" and on_disk["same_cells"]["lora"]["addition"]["cells"] == 6
    recipe = on_disk["config"]["settings"]["lora"]  # the audio world's recipe
    spec = world_spec("audio").settings()
    assert (recipe["lr"], recipe["epochs"], recipe["ridge_b"]) == (spec.lora["lr"], spec.lora["epochs"], spec.ridge_b)
    direct = {(t, n): accuracy(ws.models[t], ws.tasks[n]) for t in ws.families for n in TASKS}
    cells = [json.loads(line) for line in (tmp_path / "cells.jsonl").read_text().splitlines()]
    add = [c for c in cells if c["kind"] == "addition"]
    assert report["addition"]["zero_shot"]["task_b"] == pytest.approx(np.mean([direct[(c["target"], c["tasks"][1])] for c in add]))


def test_closed_form_cell_matches_a_folded_clap_model(tiny_setup) -> None:
    assert_closed_form_cell_is_the_folded_model(tiny_setup[1])
