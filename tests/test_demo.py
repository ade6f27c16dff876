"""The demo preset end to end on a CI-sized world: tiny models pretrained for a few steps with the
world's own loop, fine-tuned for a few steps, then every stage; `platonic demo` and `platonic grid`
agree on the same cells and settings; plus the pretraining losses."""

from __future__ import annotations

import json
import math

import attrs
import numpy as np
import pytest
import torch
from cell_checks import assert_closed_form_cell_is_the_folded_model

from platonic_sdk import from_config
from platonic_sdk.cli import main as cli
from platonic_sdk.encoding.zeroshot import accuracy
from platonic_sdk.evaluate.measure.methods import METHODS, eval_names, register_method
from platonic_sdk.evaluate.measure.workspace import Workspace
from platonic_sdk.evaluate.plan.demo import demo_config
from platonic_sdk.evaluate.run.runner import run_experiment
from platonic_sdk.finetune.source import FinetuneConfig, finetune
from platonic_sdk.worlds import registry
from platonic_sdk.worlds.image import ImageWorld
from platonic_sdk.worlds.pretrain import LossHead, PretrainConfig, caption_positives, pretrain
from platonic_sdk.worlds.train_zoo import world_tokenizer
from platonic_sdk.worlds.zoo import finetune_path

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


TINY = dict(train_per_class=6, test_per_class=3)


@pytest.fixture(scope="module")
def tiny_setup():
    torch.set_num_threads(1)
    world = ImageWorld(seed=3, **TINY)
    images, captions = world.corpus(96)
    tok = world_tokenizer(world, captions)
    models, finetuned, tuned = {}, {}, {}
    for i, (family, loss) in enumerate((("clip", "contrastive"), ("siglip", "sigmoid"))):
        enc = from_config(family, None, tokenizer=tok, seed=i)
        pretrain(enc, images, captions, PretrainConfig(loss=loss, steps=4, batch_size=32, warmup=1), progress=False)
        models[family] = enc
        for name in TASKS:
            tuned[(family, name)] = finetune(enc, world.task(name), FinetuneConfig(lr=1e-2, max_steps=2, batch_size=8), progress=False)
            finetuned[(family, name)] = tuned[(family, name)].encoder
    tasks = {n: world.task(n) for n in (*TASKS, world.trio[2], *world.controls)}
    ws = Workspace(models, tasks, finetuned, world.controls, per_class=2, grid_seed=3)
    return world, ws, tuned


LORA = {"max_steps": 2}  # the LoRA route for two steps: enough to test the wiring


def test_demo_pipeline_end_to_end(tiny_setup, tmp_path) -> None:
    world, ws, _ = tiny_setup
    calls = tmp_path / "calls.txt"  # capped methods may run in forked worker processes: they leave a line each

    def fake_route(ws_, cell, settings):  # a registered method: here, zero-shot again, to test the hook
        with open(calls, "a") as log:
            log.write(cell.key + "\n")
        return ws_.accuracies(cell.target, eval_names(ws_, cell))

    register_method("probe_hook", fake_route, kinds=("addition",), max_cells=2)
    try:
        config = demo_config("image", seed=3, lora_cells=1, weight_space_cells=2)
        config = attrs.evolve(config, methods=(*config.methods, "probe_hook"),
                              settings=attrs.evolve(config.settings, lora={**config.settings.lora, **LORA}))
        report = run_experiment(ws, tmp_path, config, title="platonic demo")
    finally:
        METHODS.pop("probe_hook")
    on_disk = json.loads((tmp_path / "report.json").read_text())
    assert on_disk["addition"]["cells"] == report["addition"]["cells"] == 2 * 3  # 2 targets x 3 pairs, 1 other source
    assert on_disk["negation"]["cells"] == 2 * 3
    for method in ("zero_shot", "closed_form", "random_utd", "single_a", "single_b", "oracle"):
        assert set(on_disk["addition"][method]) >= {"task_a", "task_b", "control"}
    for method in ("zero_shot", "closed_form"):
        assert set(on_disk["negation"][method]) >= {"removed", "control"}
    assert {"zero_shot", "closed_form"} <= set(on_disk["held_out"]) and on_disk["held_out"]["task"] == world.trio[2]
    assert {"same_task_cross_model", "same_model_cross_task"} <= set(on_disk["similarity"])
    assert len(calls.read_text().splitlines()) == 2 and on_disk["addition"]["probe_hook"]["cells"] == 2
    text = (tmp_path / "report.md").read_text()
    for heading in ("## Two-task addition, cross-family", "## Negation, cross-family", "## Two-task addition, same-model",
                    "## LoRA route vs closed form on the same addition cells", "## Strength sweep", "## Accumulation",
                    "## Held-out transfer", "## Per task", "| lora lr | 0.003 |", "| lora ridge_b | 0.5 |"):
        assert heading in text
    # the figures: at least four PNGs, each linked from report.md
    assert set(on_disk["figures"]) == {"scatter", "sweep", "frontier", "accumulation", "similarity", "per_task"}
    for rel in on_disk["figures"].values():
        assert (tmp_path / rel).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"]({rel})" in text
    others = {f"closed_form_{s}" for s in ("affinity", "blend") if s != config.settings.space}  # closed_form is the run's space
    for kind in ("addition", "negation"):  # the run's space, the paper's affinity and blend on one frontier
        assert set(on_disk["frontier"][kind]) == {"closed_form", *others}
    for kind in ("addition", "negation"):  # the LoRA route against the closed form on its own cells of each kind
        same = on_disk["same_cells"]["lora"][kind]
        assert same["cells"] == 1 and same["lora"]["cells"] == 1 and on_disk[kind]["lora"]["cells"] == 1
    same = on_disk["same_cells"]["lora"]["addition"]
    assert on_disk["checks"]["lora_control_minus_closed_form"] == pytest.approx(same["lora"]["control"] - same["closed_form"]["control"])
    lora_task = np.mean([same["lora"]["task_a"], same["lora"]["task_b"]]) - np.mean([same["closed_form"]["task_a"], same["closed_form"]["task_b"]])
    assert on_disk["checks"]["lora_task_minus_closed_form"] == pytest.approx(lora_task)
    assert on_disk["addition_same_model"]["cells"] == 2 and on_disk["addition_same_model"]["weight_space"]["cells"] == 2
    assert "orthoreg" not in on_disk  # the OrthoReg study is opt-in

    # independent check: zero-shot through a real forward pass on each target, averaged like the report
    direct = {(t, name): accuracy(ws.models[t], ws.tasks[name]) for t in ws.families for name in TASKS}
    cells = [json.loads(line) for line in (tmp_path / "cells.jsonl").read_text().splitlines()]
    add = [c for c in cells if c["kind"] == "addition" and c["group"] == "cross-family" and "zero_shot" in c["results"]]
    assert report["addition"]["zero_shot"]["task_a"] == pytest.approx(np.mean([direct[(c["target"], c["tasks"][0])] for c in add]))
    # every cross-family cell takes its descriptors from the other family only
    assert all(c["target"] not in c["sources"] for c in cells if c["group"] == "cross-family")


@pytest.fixture
def tiny_zoo(tiny_setup, tmp_path):
    """The tiny models saved as a registered world's shipped zoo (a manifest, members, fine-tunes)."""
    _, ws, tuned = tiny_setup
    zoo = tmp_path / "zoo"
    for name, enc in ws.models.items():
        enc.save(str(zoo / name))
    for (name, task), ft in tuned.items():
        ft.save(finetune_path(zoo, name, task))
    members = {n: {"family": n, "embed_dim": m.embed_dim} for n, m in ws.models.items()}
    settings = {"ridge_a": 0.05, "ridge_b": 0.3, "lora": {"lr": 1e-2, "epochs": 1, **LORA}, "addition_strength": 0.5,
                "negation_strength": 1.0, "controls": list(ImageWorld(**TINY).controls)}  # the world's tuned settings, as data
    (zoo / "zoo.json").write_text(json.dumps({"members": members, "world": "tiny", "settings": settings}))
    spec = registry.register_world(registry.WorldSpec("tiny", lambda **kw: ImageWorld(**{**TINY, **kw}), zoo))
    yield spec
    registry.WORLDS.pop("tiny")


def test_demo_and_grid_give_the_same_numbers_on_the_same_cells(tiny_zoo, tmp_path) -> None:
    common = ["--world", "tiny", "--seed", "3", "--quiet"]
    assert cli.main(["demo", *common, "--out", str(tmp_path / "demo"), "--lora-cells", "1", "--weight-space-cells", "0"]) == 0
    methods = "zero_shot,random_utd,single_a,single_b,closed_form,oracle,label_reference,alignment,alignment_lstsq,weight_space,lora"
    assert cli.main(["grid", *common, "--out", str(tmp_path / "grid"), "--world-seed", "3", "--grid-seed", "3", "--batch-size", "256",
                     "--similarity-probes", "0", "--methods", methods, "--method-cells", "lora=1"]) == 0
    demo, grid = (json.loads((tmp_path / d / "report.json").read_text()) for d in ("demo", "grid"))
    for key in ("addition", "negation", "same_cells", "held_out", "per_task", "similarity", "checks"):
        assert demo[key] == grid[key], key
    assert demo["addition"]["lora"]["cells"] == 1 and demo["config"]["ridge_b"] == grid["config"]["ridge_b"] == 0.3
    recipe = demo["config"]["settings"]["lora"]  # the whole recipe the LoRA route used: the world's, LoraRouteConfig's defaults
    assert {k: recipe[k] for k in ("lr", "epochs", "max_steps", "ridge_b", "rank", "seed")} == {
        "lr": 1e-2, "epochs": 1, "max_steps": 2, "ridge_b": 0.3, "rank": 16, "seed": 3}
    text = (tmp_path / "grid" / "report.md").read_text()
    assert "| ridge_a | 0.05 |" in text and "| lora lr | 0.01 |" in text  # the report says what it used


def test_closed_form_cell_matches_a_folded_model(tiny_setup) -> None:
    assert_closed_form_cell_is_the_folded_model(tiny_setup[1])


def test_orthoreg_table_lists_every_method_plain_then_orthoreg() -> None:
    from platonic_sdk.evaluate.report.render import orthoreg_section

    runs = [{"method": m, "orthoreg": lam, "mean_cosine": 0.1, "strength": 0.5 + 3.5 * (m == "iso_c"), "grid_top": 4.0,
             "merged_mean": 50.0 + i, "normalised": 0.9}
            for i, (lam, m) in enumerate((lam, m) for lam in (0.0, 1.0) for m in ("task_arithmetic", "ties", "iso_c"))]
    table = orthoreg_section({"family": "clip", "tasks": ["a", "b"], "runs": runs})
    rows = [[c.strip() for c in line.split("|")[1:5]] for line in table.splitlines() if line.startswith("|")][2:]
    assert [r[:2] for r in rows] == [[m, lam] for m in ("task_arithmetic", "ties", "iso_c") for lam in ("0.00", "1.00")]
    assert [r[3] for r in rows] == ["0.50"] * 4 + ["4.00 (grid top)"] * 2


def test_the_runner_encodes_with_the_callers_threads_and_runs_cells_on_one(tiny_setup, tmp_path, monkeypatch) -> None:
    """Encodings (the similarity study, every cell's features) run with the caller's torch threads; the cells run
    on one (thousands of small products); the caller's count is back afterwards."""
    from platonic_sdk.evaluate.plan.settings import CellSelection, ExperimentConfig
    from platonic_sdk.evaluate.run import runner as experiment

    _, ws, _ = tiny_setup
    seen: dict[str, set[int]] = {"similarity": set(), "features": set(), "cells": set()}

    def noted(stage, fn):
        def wrapper(*args, **kwargs):
            seen[stage].add(torch.get_num_threads())
            return fn(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(experiment, "recorded_similarity", noted("similarity", experiment.recorded_similarity))
    monkeypatch.setattr(experiment, "warm", noted("features", experiment.warm))
    register_method("thread_probe", noted("cells", lambda ws_, cell, settings: ws_.accuracies(cell.target, eval_names(ws_, cell))))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        run_experiment(ws, tmp_path, ExperimentConfig(cells=(CellSelection("addition", max_cells=1),), methods=("zero_shot", "thread_probe"),
                                                      sweep_methods=(), accumulation=False, guarantee=False))
        after = torch.get_num_threads()
    finally:
        METHODS.pop("thread_probe")
        torch.set_num_threads(before)
    assert seen == {"similarity": {2}, "features": {2}, "cells": {1}} and after == 2


def test_one_worker_runs_the_capped_passes_in_this_process(tiny_setup, tmp_path) -> None:
    """workers=1 (`--workers 1`): the capped methods' passes run here, not in forked workers."""
    import os

    from platonic_sdk.evaluate.plan.settings import CellSelection, ExperimentConfig

    _, ws, _ = tiny_setup
    pids = tmp_path / "pids.txt"

    def noted(ws_, cell, settings):
        with open(pids, "a") as log:
            log.write(f"{os.getpid()}\n")
        return ws_.accuracies(cell.target, eval_names(ws_, cell))

    register_method("pid_probe", noted, max_cells=2)
    try:
        run_experiment(ws, tmp_path / "run", ExperimentConfig(cells=(CellSelection("addition"),), methods=("zero_shot", "pid_probe"),
                                                              sweep_methods=(), accumulation=False, guarantee=False, similarity=False),
                       workers=1)
    finally:
        METHODS.pop("pid_probe")
    assert pids.read_text().split() == [str(os.getpid())] * 2


def test_a_finished_demo_reruns_from_its_report_without_loading_a_model(tiny_setup, tmp_path, monkeypatch, capsys) -> None:
    """A rerun with the same options, code, zoos and packages prints the finished report and builds no experiment;
    another option, or a touched SDK file, runs again."""
    import os
    from pathlib import Path

    import platonic_sdk
    from platonic_sdk.evaluate.plan.settings import CellSelection, ExperimentConfig
    from platonic_sdk.evaluate.run.experiment import Experiment

    _, ws, _ = tiny_setup
    built = []

    def tiny_demo(world="image", seed=0, **options):
        built.append(seed)
        config = ExperimentConfig(cells=(CellSelection("addition", max_cells=1),), methods=("zero_shot", "closed_form"),
                                  sweep_methods=(), accumulation=False, guarantee=False, similarity=False)
        return Experiment(ws, config, {}, "tiny demo")

    monkeypatch.setattr(Experiment, "demo", staticmethod(tiny_demo))
    out = ["demo", "--out", str(tmp_path / "run"), "--quiet"]
    assert cli.main(out) == 0 and built == [0]
    first = capsys.readouterr().out.split("\nreport:")[0]
    assert cli.main([*out, "--threads", "1", "--workers", "1"]) == 0 and built == [0]  # how it runs is not what it computes
    assert capsys.readouterr().out.split("\nreport:")[0] == first
    marker = Path(platonic_sdk.__file__).parent / "py.typed"
    info = marker.stat()
    os.utime(marker, ns=(info.st_atime_ns, info.st_mtime_ns + 10**9))
    try:
        assert cli.main(out) == 0 and built == [0, 0]  # a touched SDK file: the run goes through the runner again (and resumes)
    finally:
        os.utime(marker, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert cli.main(out) == 0 and built == [0, 0, 0]  # the first stamp again, but the folder's marker holds the touched one's
    assert cli.main(out) == 0 and built == [0, 0, 0]
    assert cli.main([*out, "--seed", "1"]) == 0 and built == [0, 0, 0, 1]  # another option
