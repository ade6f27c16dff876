"""`platonic edit` folds at the same default as Python and the experiments ("auto"), spends --budget on labelled
--keep tasks with --confidence, records them in the edit file, and refuses before any model loads what cannot run:
auto on a bank file, nothing to keep, a --keep task the edit transfers, a budget without a rule or a keep set."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_cli_errors import refused
from test_world_settings import WORLD, run

import platonic_sdk as ps
from platonic_sdk.cli import commands
from platonic_sdk.data.keep import KeepSet
from platonic_sdk.worlds.image import ImageWorld
from platonic_sdk.worlds.zoo import ZOO_DIR


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A clip descriptor of amber_shapes (the zoo's fine-tune) and a siglip bank of it."""
    root = tmp_path_factory.mktemp("cli_keep")
    assert run(root, "utd", "--family", "clip", "--checkpoint", str(ZOO_DIR / "clip"), "--ft-checkpoint",
               str(ZOO_DIR / "finetunes" / "clip" / "amber_shapes.safetensors"), "--task", "amber_shapes", *WORLD, "-o", "a.safetensors") == 0
    assert run(root, "bank", "--family", "siglip", "--checkpoint", str(ZOO_DIR / "siglip"), "--descriptor", "a.safetensors",
               "--task", "amber_shapes", *WORLD, "-o", "bank.safetensors") == 0
    return root


@pytest.fixture
def no_model(monkeypatch):
    """Any model load fails the test: the refusals below come before one."""
    def load(*args, **kwargs):
        raise AssertionError("a model was loaded before the refusal")
    monkeypatch.setattr(commands, "load_model", load)


@pytest.mark.parametrize("argv, words", [
    (("--bank", "bank.safetensors", "--add", "a", "--strength", "auto"), "--strength auto reads the target's probes"),
    (("--family", "siglip", "--add", "a.safetensors", "--task", "amber_shapes", *WORLD), "nothing is given: add --keep TASK"),
    (("--family", "siglip", "--add", "a.safetensors", "--task", "amber_shapes", "--keep", "amber_shapes", *WORLD),
     "--keep amber_shapes: a task the edit transfers"),
    (("--family", "siglip", "--add", "a.safetensors", "--task", "amber_shapes", "--strength", "0.5", "--budget", "2", *WORLD),
     "--budget: read by --strength auto"),
    (("--family", "siglip", "--add", "a.safetensors", "--task", "amber_shapes", "--task", "teal_shapes", "--budget", "2", *WORLD),
     "--budget and --confidence are spent on labelled --keep tasks"),
])
def test_what_cannot_run_is_refused_before_a_model_loads(work, capsys, no_model, argv, words):
    refused(capsys, work, words, "edit", *argv, "-o", "e.safetensors")


def test_keep_tasks_spend_the_budget_as_python_does(work, capsys):
    """The CLI's edit equals bank.edit with the same labelled keep sets (the --keep tasks' test splits), budget and
    confidence, and its file records what was kept."""
    larger = [*WORLD[:2], "--test-per-class", "20", *WORLD[4:]]  # 160 test items per kept task: enough to read 2 points at 80%
    assert run(work, "edit", "--family", "siglip", "--checkpoint", str(ZOO_DIR / "siglip"), "--add", "a.safetensors",
               "--task", "amber_shapes", "--keep", "teal_shapes", "--keep", "control_shapes", "--budget", "2", "--confidence", "0.8",
               *larger, "-o", "e.safetensors") == 0
    assert "chosen by auto; drops on the kept tasks" in capsys.readouterr().out
    cli_edit = ps.Edit.load(work / "e.safetensors")
    record = cli_edit.meta["strength_rule"]
    assert (record["rule"], record["budget"], record["confidence"]) == ("auto", 2.0, 0.8)
    assert [(k["task"], k["labelled"], k["size"]) for k in record["kept"]] == [("teal_shapes", True, 160), ("control_shapes", True, 160)]
    assert all(k["bound"] <= 2.0 for k in record["kept"])  # at the chosen strength each bound is within the budget

    world = ImageWorld(train_per_class=4, test_per_class=20)
    utd = ps.UTD.load(work / "a.safetensors")
    bank = ps.OperatorBank(ps.load("siglip", str(ZOO_DIR / "siglip")))
    bank.add_grid(world.task("amber_shapes").grid(2, 0))
    keep = [KeepSet.from_task(world.task(name), "test") for name in ("teal_shapes", "control_shapes")]
    python = bank.edit(utd, "auto", keep=keep, budget=2.0, confidence=0.8)
    assert cli_edit.strength == python.strength and torch.equal(cli_edit.operator, python.operator)
    assert record == python.meta["strength_rule"]


def test_a_bank_file_folds_at_the_fixed_strength_by_default(work):
    """A bank file holds no probes: its default is SavedBank.edit's, 0.5, as in Python."""
    assert run(work, "edit", "--bank", "bank.safetensors", "--add", "a", "--quiet", "-o", "b.safetensors") == 0
    saved = ps.OperatorBank.load(work / "bank.safetensors")
    assert ps.Edit.load(work / "b.safetensors").strength == saved.edit([("a", 1.0)]).strength == 0.5


def test_a_rule_reads_the_other_task_probes_without_keep(work):
    assert run(work, "edit", "--family", "siglip", "--checkpoint", str(ZOO_DIR / "siglip"), "--add", "a.safetensors",
               "--task", "amber_shapes", "--task", "teal_shapes", *WORLD, "-o", "held.safetensors") == 0
    record = ps.Edit.load(work / "held.safetensors").meta["strength_rule"]
    assert record["rule"] == "auto" and [(k["task"], k["labelled"]) for k in record["kept"]] == [("teal_shapes", False)]
