"""Every user error of the `platonic` command: exit status 2, one `platonic <command>: error: ...` line on
stderr, no traceback, and nothing written. `--debug` keeps the traceback instead.

The commands run through `cli.main` in this process (a subprocess start costs seconds); each case also
checks that the working folder is byte for byte as it was.
"""

from __future__ import annotations

import hashlib
import os
import struct
import zlib
from pathlib import Path

import pytest
import torch
from PIL import Image

import platonic_sdk as ps
from platonic_sdk.cli import main as cli
from platonic_sdk.cli import parser as cli_parser
from platonic_sdk.errors import PlatonicError


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under `root` with a digest of its bytes ("dir" for folders)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir" for p in sorted(root.rglob("*"))}


def refused(capsys, cwd: Path, words: str, *argv: str) -> str:
    """`platonic argv` exits 2 with an error of one line containing `words`, and nothing under `cwd` changes; the line."""
    before = snapshot(cwd)
    capsys.readouterr()
    old = Path.cwd()
    os.chdir(cwd)
    try:
        status = cli.main(list(argv))
    except SystemExit as exc:  # argparse's errors exit
        status = exc.code
    finally:
        os.chdir(old)
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.count("\n") == 1 and err.endswith("\n"), err  # one line
    assert err.startswith(f"platonic {argv[0]}: error:") and words in err, err
    assert "Traceback" not in err
    assert snapshot(cwd) == before
    return err.strip()


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A tiny clip checkpoint (pre and moved), an existing folder `adir/`, and plugin files that fail."""
    root = tmp_path_factory.mktemp("cli_errors")
    model = ps.from_config("clip", seed=0)
    model.save(str(root / "pre"))
    with torch.no_grad():
        for p in model.media_encoder.parameters():
            p.add_(0.05)
    model.save(str(root / "ft"))
    (root / "adir").mkdir()
    (root / "adir" / "keep.txt").write_text("untouched")
    (root / "raises.py").write_text("raise ImportError('the plugin needs a library that is not installed')\n")
    (root / "broken.py").write_text("def f(:\n")
    return root


MODELS = ("utd", "--family", "clip", "--checkpoint", "pre", "--ft-checkpoint", "ft", "--per-class", "2", "--quiet")
UTD_ARGS = (*MODELS, "--task", "small_shapes", "--train-per-class", "4", "--test-per-class", "3")


def test_devices_that_do_not_exist_or_are_not_here(work, capsys):
    refused(capsys, work, "'banana' is not a torch device", *UTD_ARGS, "--device", "banana", "-o", "x.safetensors")
    refused(capsys, work, "'cuda:99' is not available", *UTD_ARGS, "--device", "cuda:99", "-o", "x.safetensors")
    if not torch.cuda.is_available():
        refused(capsys, work, "'cuda' is not available on this machine (it has only cpu)", *UTD_ARGS, "--device", "cuda", "-o", "x.safetensors")


def test_devices_on_a_machine_with_one_gpu(monkeypatch):
    """The availability rule as it runs on a one-GPU machine (torch.accelerator faked: this box may have none)."""
    import argparse
    from types import SimpleNamespace

    from platonic_sdk.cli.values import device

    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda: SimpleNamespace(type="cuda"))
    monkeypatch.setattr(torch.accelerator, "device_count", lambda: 1)
    assert [device(d) for d in ("cpu", "cuda", "cuda:0")] == ["cpu", "cuda", "cuda:0"]
    with pytest.raises(argparse.ArgumentTypeError, match="'cuda:1' is not available: this machine has 1 cuda device$"):
        device("cuda:1")
    with pytest.raises(argparse.ArgumentTypeError, match=r"'mps' is not available on this machine \(it has cpu and 1 cuda device\)"):
        device("mps")


def test_plugins_that_fail_to_import(work, capsys):
    refused(capsys, work, "plugin raises.py failed to import: ImportError: the plugin needs", "families", "--plugin", "raises.py")
    refused(capsys, work, "plugin broken.py failed to import: SyntaxError", "families", "--plugin", "broken.py")
    refused(capsys, work, "cannot import plugin 'no_such_plugin_module'", "families", "--plugin", "no_such_plugin_module")
    refused(capsys, work, "does not exist", "families", "--plugin", "missing.py")


@pytest.mark.parametrize("option, value, words", [
    ("--threads", "-1", "argument --threads: must be a positive integer, got -1"),
    ("--batch-size", "0", "argument --batch-size: must be a positive integer, got 0"),
    ("--per-class", "0", "must be a positive integer"),
    ("--test-fraction", "3", "must be a number between 0 and 1"),
    ("--lr", "inf", "must be a positive finite number"),
    ("--epochs", "2.5", "invalid int value: '2.5'"),
    ("--seed", "-1", "argument --seed: must be a whole number (0 or more), got -1"),
    ("--grid-seed", "-1", "argument --grid-seed: must be a whole number"),
])
def test_numbers_out_of_range(work, capsys, option, value, words):
    refused(capsys, work, words, *UTD_ARGS, option, value, "-o", "x.safetensors")


def test_strengths_ridges_and_counts_out_of_range(work, capsys):
    refused(capsys, work, "argument --sweep-strengths: must be a finite number, got nan", "grid", "--out", "run", "--sweep-strengths", "0", "nan")
    refused(capsys, work, "argument --addition-strength: must be a finite number", "grid", "--out", "run", "--addition-strength", "inf")
    refused(capsys, work, "argument --ridge-a: must be a finite number >= 0, got -1", "bank", "--descriptor", "a.safetensors", "--ridge-a", "-1")
    refused(capsys, work, "argument --ridge-b: must be a finite number >= 0, got nan", "grid", "--out", "run", "--ridge-b", "nan")
    refused(capsys, work, "argument --lora-cells: must be a whole number (0 or more), got -3", "demo", "--out", "run", "--lora-cells", "-3")
    refused(capsys, work, "argument --strength: must be a finite number", "edit", "--bank", "b.safetensors", "--add", "a", "--strength", "nan", "-o", "e.safetensors")


def test_output_paths_of_the_wrong_kind(work, capsys):
    refused(capsys, work, "argument -o/--output: 'adir' is a folder", *UTD_ARGS, "-o", "adir")
    refused(capsys, work, "'adir' is a folder", "bank", "--family", "clip", "--descriptor", "x.safetensors", "-o", "adir")
    refused(capsys, work, "'adir' is a folder", "edit", "--family", "clip", "--add", "x.safetensors", "-o", "adir")
    refused(capsys, work, "argument --out: 'raises.py' is a file", "grid", "--out", "raises.py")


@pytest.mark.parametrize("argv, words", [
    (("grid", "--world", "banana"), "unknown world 'banana'"),
    (("demo", "--world", "banana"), "unknown world 'banana'"),
    (("grid", "--methods", "closed_form,nosuch"), "unknown cell method 'nosuch'"),
    (("grid", "--method-cells", "nosuch=2"), "unknown cell method 'nosuch'"),
    (("grid", "--method-cells", "lora=abc"), "--method-cells takes NAME=N or NAME=all"),
])
@pytest.mark.parametrize("out", ["new/run", "adir"])
def test_a_run_refused_before_it_begins_leaves_no_folder_or_lock(work, capsys, argv, words, out):
    """A refused run creates no run folder and, in an existing folder, leaves no lock file."""
    refused(capsys, work, words, *argv, "--out", out, "--quiet")


def _png_header(width: int, height: int) -> bytes:
    """A PNG that claims width x height pixels in a few bytes (a decompression bomb)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


@pytest.mark.parametrize("side", [12_000, 20_000], ids=["warning-size", "error-size"])
def test_a_decompression_bomb_in_an_image_folder_is_named(work, capsys, side):
    """Above PIL's MAX_IMAGE_PIXELS (a warning) and above twice that (an error): both refused, by file name."""
    assert Image.MAX_IMAGE_PIXELS < side * side
    folder = work / f"bombs{side}"
    for cls in ("a", "b"):
        (folder / cls).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (4, 4), (40 * i, 9, 9)).save(folder / cls / f"{i}.png")
    (folder / "b" / "bomb.png").write_bytes(_png_header(side, side))
    line = refused(capsys, work, "bomb.png", *MODELS, "--task", f"images:{folder.name}", "-o", "x.safetensors")
    assert "decompression bomb" in line


CONFIGS = {
    "batch_size = 5.5\n": "batch_size = 5.5: invalid int value",
    "out = 5\n": "out = 5: takes a string, got an integer",
    "[grid]\nmodels = 5\n": "models = 5: takes a table of [models.NAME] tables, got an integer",
    "[grid.models.clip]\nfamily = 5\n": "family must be strings",
    "[grid]\nfinetuned = [1]\n": "entries must be tables",
    "[grid]\npairing = \"banana\"\n": "pairing = 'banana': invalid choice: 'banana' (choose from 'auto', 'distinct', 'any')",
    "[grid]\nkinds = [\"addition\", \"merging\"]\n": "invalid choice: 'merging'",
    "[grid]\nsweep_strengths = [0.5, \"x\"]\n": "invalid float value: 'x'",
    "[grid]\nquiet = 1\n": "quiet = 1: is a flag: takes true or false, got an integer",
    "[grid]\naddition_strength = true\n": "addition_strength = True: takes a number, got a bool",
    "[grid]\nthreads = -2\n": "threads = -2: must be a positive integer, got -2",
    "[grid]\ndevice = \"banana\"\n": "'banana' is not a torch device",
    "[grid]\nkinds = []\n": "takes at least one value",
    "tasks = 'amber_shapes'\n": "tasks = 'amber_shapes': takes an array, got a string: write tasks = [\"amber_shapes\"]",
    "[grid]\nsweep_strengths = 0.5\n": "sweep_strengths = 0.5: takes an array, got a float: write sweep_strengths = [0.5]",
}


@pytest.mark.parametrize("text", list(CONFIGS), ids=[t.split("=")[0].split("]")[-1].strip() for t in CONFIGS])
def test_config_values_pass_the_command_line_checks(work, capsys, text):
    (work / "run.toml").write_text(text)
    try:
        line = refused(capsys, work, CONFIGS[text], "grid", "--config", "run.toml", "--out", "run")
    finally:
        (work / "run.toml").unlink()
    assert "config file run.toml:" in line and not (work / "run").exists()


def test_a_config_path_that_is_a_folder(work, capsys):
    refused(capsys, work, "cannot read config file adir: Is a directory", "families", "--config", "adir")


def test_config_values_that_pass_are_converted_like_the_command_line(work):
    (work / "ok.toml").write_text("batch_size = 8\n[utd]\nmode = \"full\"\nstratified = true\ntemplate = [\"a {} thing.\"]\n")
    parser = cli_parser.build_parser()
    argv = ["utd", "--config", str(work / "ok.toml")]
    args = cli_parser.apply_config(parser, argv, cli_parser.parse(parser, argv))
    assert (args.batch_size, args.mode, args.stratified, args.template) == (8, "full", True, ["a {} thing."])


def test_debug_keeps_the_traceback(work):
    old = Path.cwd()
    os.chdir(work)
    try:
        with pytest.raises(PlatonicError, match="plugin raises.py failed to import") as info:
            cli.main(["families", "--plugin", "raises.py", "--debug"])
    finally:
        os.chdir(old)
    assert isinstance(info.value.__cause__, ImportError)  # the plugin's own error stays attached
