"""The `platonic` command on tiny checkpoints: each subcommand's happy path as a subprocess, and a bad
input for each (one as a subprocess, the rest through `cli.main` in this process to save start-ups).

Bad input must give exit status 2 and one `platonic <command>: error: ...` line, never a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import platonic_sdk as ps
from platonic_sdk.cli import main as cli
from platonic_sdk.cli import parser as cli_parser
from platonic_sdk.descriptor import UTD
from platonic_sdk.evaluate import accuracy
from platonic_sdk.transfer import Edit
from platonic_sdk.worlds.image import ImageWorld

WORLD = ["--train-per-class", "4", "--test-per-class", "3", "--per-class", "2", "--quiet"]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def platonic(*args: str, cwd: Path, ok: bool = True) -> subprocess.CompletedProcess:
    """Run one `platonic` command as a subprocess."""
    return platonic_together([args], cwd, ok)[0]


def platonic_together(commands: list[tuple[str, ...]], cwd: Path, ok: bool = True) -> list[subprocess.CompletedProcess]:
    """Run independent `platonic` commands as concurrent subprocesses (start-up dominates: use both cores)."""
    procs = [
        subprocess.Popen([sys.executable, "-m", "platonic_sdk.cli", *args], cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for args in commands
    ]
    done = []
    for args, proc in zip(commands, procs):
        out, err = proc.communicate(timeout=300)
        done.append(subprocess.CompletedProcess(args, proc.returncode, out, err))
        if ok:
            assert proc.returncode == 0, f"{args}: {err}"
    return done


def assert_one_line_error(proc: subprocess.CompletedProcess, command: str, words: str) -> None:
    assert_error_text(proc.returncode, proc.stderr, command, words)


def assert_error_text(status: int, stderr: str, command: str, words: str) -> None:
    assert status == 2
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    first = next(i for i, line in enumerate(lines) if "error:" in line)  # warnings may come before it
    assert lines[first].startswith(f"platonic {command}: error:") and words in lines[first], stderr
    assert first == len(lines) - 1, stderr  # one line, however long


def in_process(capsys, work: Path, command: str, words: str, *args: str) -> None:
    """Run `platonic command args` through cli.main in `work` and check its one-line error."""
    old = Path.cwd()
    os.chdir(work)
    try:
        status = cli.main([command, *args])
    except SystemExit as exc:  # argparse errors exit
        status = exc.code
    finally:
        os.chdir(old)
    assert_error_text(status, capsys.readouterr().err, command, words)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """Pretrained and fine-tuned tiny checkpoints of two families (the fine-tune: moved media weights)."""
    root = tmp_path_factory.mktemp("cli")
    for seed, fam in enumerate(("clip", "siglip")):
        model = ps.from_config(fam, seed=seed)
        model.save(str(root / f"{fam}_pre"))
        with torch.no_grad():
            gen = torch.Generator().manual_seed(10 + seed)
            for p in model.media_encoder.parameters():
                p.add_(0.05 * torch.randn(p.shape, generator=gen))
        model.save(str(root / f"{fam}_ft"))
    return root


@pytest.fixture(scope="module")
def first(work) -> dict[str, subprocess.CompletedProcess]:
    """Stage 1: a descriptor, the family list (with a plugin), a bad option and the demo's help, together."""
    names = ("utd_a", "families", "families_bad", "demo_help")
    procs = platonic_together([
        ("utd", "--family", "clip", "--checkpoint", "clip_pre", "--ft-checkpoint", "clip_ft", "--task", "small_shapes", *WORLD, "-o", "a.safetensors"),
        ("families", "--plugin", str(Path(__file__).resolve().parent.parent / "examples" / "register_family.py")),
        ("families", "--modality", "video"),
        ("demo", "--help"),
    ], work, ok=False)
    return dict(zip(names, procs))


@pytest.fixture(scope="module")
def descriptors(work, first) -> Path:
    """a.safetensors (two checkpoints, subprocess) and b.safetensors (fine-tuned here, through cli.main)."""
    assert first["utd_a"].returncode == 0, first["utd_a"].stderr
    old = Path.cwd()
    os.chdir(work)
    try:
        status = cli.main(["utd", "--family", "siglip", "--checkpoint", "siglip_pre", "--finetune", "--max-steps", "2", "--lr", "1e-3",
                           "--task", "amber_shapes", *WORLD, "-o", "b.safetensors"])
    finally:
        os.chdir(old)
    assert status == 0
    return work


def test_families_lists_the_registry(first):
    assert first["families"].returncode == 0
    listed = {line.split()[0] for line in first["families"].stdout.splitlines()}
    assert listed == set(ps.list_families()) | {"bagnet"}  # the plugin (examples/register_family.py) registered it
    assert_one_line_error(first["families_bad"], "families", "invalid choice")


def test_utd_files_match_the_python_api(descriptors):
    work = descriptors
    a = UTD.load(work / "a.safetensors")
    task = ImageWorld(train_per_class=4, test_per_class=3).task("small_shapes")
    expected = UTD.compute(ps.load("clip", str(work / "clip_pre")), ps.load("clip", str(work / "clip_ft")), task.grid(2, 0))
    assert a.grid_id == expected.grid_id and torch.allclose(a.matrix, expected.matrix, atol=1e-5)
    b = UTD.load(work / "b.safetensors")
    assert b.task == "amber_shapes" and b.provenance["finetune"]["steps"] == 2 and b.matrix.norm() > 0



def test_utd_bad_task(work, capsys):
    in_process(capsys, work, "utd", "unknown task 'no_such_task'",
               "--family", "clip", "--checkpoint", "clip_pre", "--ft-checkpoint", "clip_ft", "--task", "no_such_task", "-o", "x.safetensors")
    assert not (work / "x.safetensors").exists()


def test_bank_edit_evaluate_chain(descriptors, capsys):
    work = descriptors
    platonic_together([
        ("bank", "--family", "siglip", "--checkpoint", "siglip_pre", "--descriptor", "a.safetensors", "b.safetensors", *WORLD, "-o", "bank.safetensors"),
        ("edit", "--family", "siglip", "--checkpoint", "siglip_pre", "--add", "a.safetensors", "--negate", "b.safetensors",
         "--strength", "0.7", *WORLD, "-o", "direct.safetensors", "--save-model", "edited"),
    ], work)
    _, evaluated = platonic_together([
        ("edit", "--bank", "bank.safetensors", "--add", "a", "--term", "b=-1", "--strength", "0.7", "-o", "from_bank.safetensors"),
        ("evaluate", "--family", "siglip", "--checkpoint", "siglip_pre", "--task", "small_shapes", "--task", "amber_shapes",
         "--edit", "direct.safetensors", "--json", *WORLD),
    ], work)
    direct, from_bank = Edit.load(work / "direct.safetensors"), Edit.load(work / "from_bank.safetensors")
    assert direct.strength == from_bank.strength == 0.7
    assert torch.allclose(direct.operator, from_bank.operator, atol=1e-6)

    rows = json.loads(evaluated.stdout)
    world = ImageWorld(train_per_class=4, test_per_class=3)
    target = ps.load("siglip", str(work / "siglip_pre"))
    saved = ps.load("siglip", str(work / "edited"))
    for name in ("small_shapes", "amber_shapes"):
        task = world.task(name)
        assert rows[name]["zero_shot"] == pytest.approx(accuracy(target, task), abs=0.005)
        with direct.applied_to(target):
            assert rows[name]["edited"] == pytest.approx(accuracy(target, task), abs=0.005)
        assert rows[name]["edited"] == pytest.approx(accuracy(saved, task), abs=0.005)

    in_process(capsys, work, "bank", "no such file", "--family", "siglip", "--descriptor", "missing.safetensors", "-o", "x.safetensors")
    in_process(capsys, work, "edit", "NAME=COEFFICIENT", "--bank", "bank.safetensors", "--term", "a=lots", "-o", "x.safetensors")
    in_process(capsys, work, "evaluate", "no_such_folder", "--family", "clip", "--checkpoint", "no_such_folder", "--task", "small_shapes", *WORLD)


def test_edit_route_lora_writes_the_edit_and_a_peft_folder_that_python_fits_alike(descriptors, capsys):
    """`platonic edit --route lora` is fit_lora on the descriptors' grids, scaled by --strength, saved twice."""
    from platonic_sdk.edits.lora_edit import LoraEdit
    from platonic_sdk.transfer.lora import LoraRouteConfig, fit_lora

    work = descriptors
    old = Path.cwd()
    os.chdir(work)
    try:
        status = cli.main(["edit", "--route", "lora", "--family", "clip", "--checkpoint", "clip_pre", "--add", "a.safetensors",
                           "--strength", "0.5", "--lora-steps", "3", "--lora-rank", "2", *WORLD, "-o", "lora.safetensors",
                           "--adapter-dir", "lora_adapter"])
    finally:
        os.chdir(old)
    assert status == 0 and "peft adapter folder lora_adapter" in capsys.readouterr().out
    target = ps.load("clip", str(work / "clip_pre"))
    utd = UTD.load(work / "a.safetensors")
    grid = ImageWorld(train_per_class=4, test_per_class=3).task("small_shapes").grid(2, 0)
    by_hand = fit_lora(target, utd, [grid], LoraRouteConfig(rank=2, max_steps=3), progress=False).scaled(0.5)
    saved, folder = Edit.load(work / "lora.safetensors"), LoraEdit.from_pretrained(str(work / "lora_adapter"), target)
    for edit in (saved, folder):
        assert edit.strength == 0.5 and set(edit.factors) == set(by_hand.factors)
        for name, (b, a) in by_hand.factors.items():
            got_b, got_a = edit.factors[name]
            assert torch.allclose(got_b @ got_a * edit.lora_alpha, b @ a * by_hand.lora_alpha, atol=1e-6)
    in_process(capsys, work, "edit", "--bank holds closed-form operators", "--route", "lora", "--bank", "bank.safetensors", "--add", "a")


GRID_TOML = """
seed = 0
[grid]
tasks = ["small_shapes", "amber_shapes"]
controls = ["{control}"]
train_per_class = 4
test_per_class = 3
per_class = 2
ridge_b = 0.1
sweep_strengths = [0.0, 0.5, 1.0]
quiet = true

[grid.models.clip]
family = "clip"
checkpoint = "clip_pre"

[grid.models.siglip]
family = "siglip"
checkpoint = "siglip_pre"

[[grid.finetuned]]
model = "clip"
task = "small_shapes"
checkpoint = "clip_ft"

[[grid.finetuned]]
model = "siglip"
task = "small_shapes"
checkpoint = "siglip_ft"

[[grid.finetuned]]
model = "clip"
task = "amber_shapes"
utd = "a_amber.safetensors"

[[grid.finetuned]]
model = "siglip"
task = "amber_shapes"
utd = "b.safetensors"
"""


def test_grid_from_a_config_file(descriptors, capsys):
    work = descriptors
    task = ImageWorld(train_per_class=4, test_per_class=3).task("amber_shapes")
    UTD.compute(ps.load("clip", str(work / "clip_pre")), ps.load("clip", str(work / "clip_ft")), task.grid(2, 0)).save(work / "a_amber.safetensors")
    (work / "grid.toml").write_text(GRID_TOML.replace("{control}", ImageWorld().controls[0]))
    proc = platonic("grid", "--config", "grid.toml", "--out", "run", cwd=work)
    assert "wall time" in proc.stdout
    cells = [json.loads(line) for line in (work / "run/cells.jsonl").read_text().splitlines()]
    # two targets x one cross source pair (addition) + two targets x one source x two tasks (negation)
    assert sorted(c["kind"] for c in cells) == ["addition"] * 2 + ["negation"] * 4
    report = (work / "run/report.md").read_text()
    assert "## Two-task addition" in report and "| ridge_b | 0.1 |" in report and "| ridge_a | 0.01 |" in report  # the library's ridge_a
    assert sorted(p.name for p in (work / "run/figures").iterdir()) == ["accumulation.png", "frontier.png", "per_task.png", "similarity.png",
                                                                        "strength_sweep.png", "two_task_scatter.png"]
    in_process(capsys, work, "grid", "run.settings.addition_strength: 0.5 -> 0.7", "--config", "grid.toml", "--out", "run", "--addition-strength", "0.7")
    old = Path.cwd()
    os.chdir(work)
    try:  # any registered method, the LoRA route included (two steps here), reported against the closed form
        assert cli.main(["grid", "--config", "grid.toml", "--out", "lora", "--methods", "closed_form,lora", "--lora-steps", "2", "--no-similarity"]) == 0
    finally:
        os.chdir(old)
    summary = json.loads((work / "lora/report.json").read_text())
    assert set(summary["addition"]) == {"cells", "zero_shot", "closed_form", "lora"}
    assert summary["addition"]["lora"]["cells"] == 2 and summary["negation"]["lora"]["cells"] == 4  # capped at 8: every cell here
    assert summary["same_cells"]["lora"]["negation"]["lora"] == summary["negation"]["lora"]
    assert "## LoRA route vs closed form on the same addition cells (2 cells" in (work / "lora/report.md").read_text()
    (work / "bad.toml").write_text("[grid]\nalpah = 0.5\n")
    in_process(capsys, work, "grid", "alpah", "--config", "bad.toml", "--out", "run2")
    assert not (work / "run2").exists()


def test_demo_subcommand_is_wired(work, first, capsys):
    assert "usage: platonic demo" in first["demo_help"].stdout
    in_process(capsys, work, "demo", "unrecognized arguments", "--no-such-option")


def test_image_folder_task_specs(tmp_path):
    """`[NAME=]images:DIR` specs: a class-per-folder tree (seeded split) and a train/test tree."""
    from PIL import Image

    from platonic_sdk.cli.commands import task_options
    from platonic_sdk.data.specs import TaskOptions, load_task

    colours = {"red": (220, 30, 30), "blue": (30, 30, 220)}
    for layout, splits in (("flat", [""]), ("split", ["train", "test"])):
        for split in splits:
            for cls, rgb in colours.items():
                folder = tmp_path / layout / split / cls
                folder.mkdir(parents=True)
                for i in range(5):
                    Image.new("RGB", (8, 8), tuple(c - 10 * i for c in rgb)).save(folder / f"{i}.png")
    args = cli_parser.build_parser().parse_args(["evaluate", "--data-root", str(tmp_path), "--template", "a {} square."])
    options = task_options(args)  # the command line's options are the library's
    assert options == TaskOptions(data_root=str(tmp_path), templates=("a {} square.",))
    flat = load_task("colours=images:flat", options)
    assert flat.name == "colours" and flat.classnames == ("blue", "red") and flat.templates == ("a {} square.",)
    assert len(flat.train) + len(flat.test) == 10 and len(flat.test) == 2  # one test image of each class (20 %)
    red = np.asarray(flat.test.items[int(np.flatnonzero(flat.test.labels == 1)[0])])
    assert red[0, 0, 0] > red[0, 0, 2]  # labels follow the folders
    split = load_task("images:split", options)
    assert split.name == "split" and len(split.train) == len(split.test) == 10
    with pytest.raises(ps.PlatonicError, match="does not exist"):
        load_task("images:nowhere", options)


@pytest.mark.parametrize("command", ["grid", "demo"])
def test_workers_caps_the_runs_worker_processes(command):
    """--workers parses to a positive count (None: one per core); test_demo runs the runner with workers=1."""
    parser = cli_parser.build_parser()
    assert cli_parser.parse(parser, [command, "--out", "run"]).workers is None
    assert cli_parser.parse(parser, [command, "--out", "run", "--workers", "1"]).workers == 1


@pytest.mark.parametrize("command,batch_size", [("utd", 64), ("edit", 64), ("evaluate", 64), ("grid", 256), ("demo", 256)])
def test_each_command_has_its_own_defaults(command, batch_size):
    """One command's defaults never reach another's (argparse shares a parent parser's actions between commands)."""
    parser = cli_parser.build_parser()
    args = cli_parser.parse(parser, [command, "--out", "run"] if command in ("grid", "demo") else [command])
    assert (args.batch_size, args.threads) == (batch_size, None)
    helped = cli_parser._subparser(parser, command).format_help()
    assert f"encoding batch size (default {batch_size})" in " ".join(helped.split())
