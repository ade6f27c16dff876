"""What a user reads is true (issue 22): one ridge rule for the command line and Python, refusals in the
user's words (one line, status 2, nothing changed), the same refusals in Python as on the command line,
and `platonic grid --benchmark NAME --dry-run`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image
from test_cli_errors import refused, snapshot
from test_startup import probe

import platonic_sdk as ps
from platonic_sdk import ridge
from platonic_sdk.cli import main as cli
from platonic_sdk.errors import CheckpointError, PlatonicError
from platonic_sdk.worlds.image import ImageWorld
from platonic_sdk.worlds.zoo import ZOO_DIR

WORLD = ["--train-per-class", "4", "--test-per-class", "3", "--per-class", "2", "--quiet", "--no-cache"]


def run(cwd: Path, *argv: str) -> int:
    """`platonic argv` through cli.main in `cwd`: its exit status."""
    old = Path.cwd()
    os.chdir(cwd)
    try:
        status = cli.main(list(argv))
    except SystemExit as exc:
        status = exc.code
    finally:
        os.chdir(old)
    return status


# ---------------------------------------------------------------------------- A. one ridge rule
@pytest.fixture(scope="module")
def zoo_bank(tmp_path_factory) -> tuple[Path, str]:
    """A folder with a descriptor of the zoo's clip fine-tune (shapes.utd.safetensors) and `platonic bank` of it on
    the zoo's siglip (bank.safetensors), and what `platonic bank` printed: every test that reads them runs alone."""
    work = tmp_path_factory.mktemp("ridge")
    assert run(work, "utd", "--family", "clip", "--checkpoint", str(ZOO_DIR / "clip"), "--ft-checkpoint",
               str(ZOO_DIR / "finetunes" / "clip" / "amber_shapes.safetensors"), "--task", "amber_shapes", *WORLD,
               "-o", "shapes.utd.safetensors") == 0
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert run(work, "bank", "--family", "SigLIP", "--checkpoint", str(ZOO_DIR / "siglip"), "--descriptor",
                   "shapes.utd.safetensors", "--quiet", "--no-cache", "-o", "bank.safetensors") == 0
    return work, printed.getvalue()


def test_the_cli_and_python_solve_a_zoo_member_with_the_worlds_ridge_alike(zoo_bank):
    from platonic_sdk.worlds import zoo
    from platonic_sdk.worlds.registry import world_spec

    zoo_bank, out = zoo_bank
    image = world_spec("image").settings()
    assert f"ridge {image.ridge_a:g} / {image.ridge_b:g} (ridge_a / ridge_b): the image world's ridge" in out
    saved = ps.OperatorBank.load(zoo_bank / "bank.safetensors")
    assert (saved.ridge_a, saved.ridge_b) == (image.ridge_a, image.ridge_b) and "image world" in saved.ridge_why
    assert list(saved.operators) == ["shapes"]  # named by the stem, without .utd.safetensors

    target = zoo.member("siglip")  # Python: no ridge passed
    bank = ps.OperatorBank(target)
    assert (bank.ridge_a, bank.ridge_b) == (image.ridge_a, image.ridge_b)
    utd = ps.UTD.load(zoo_bank / "shapes.utd.safetensors")
    bank.add_grid(ImageWorld(train_per_class=4, test_per_class=3).task("amber_shapes").grid(2, 0))
    assert torch.allclose(bank.operator(utd), saved.operators["shapes"], atol=1e-6, rtol=1e-5)

    # the same folder loaded by path, before or without the world's module: the zoo's manifest says so
    assert ridge.ridge_rule(str(ZOO_DIR / "siglip"))[:2] == (image.ridge_a, image.ridge_b)
    # a given factor wins, and says so; another model gets the paper's
    given = ps.OperatorBank(target, ridge_b=1e-3)
    assert (given.ridge_a, given.ridge_b) == (image.ridge_a, 1e-3) and given.ridge_why.startswith("ridge_b given")
    assert ridge.ridge_rule(str(zoo_bank))[:2] == (ridge.RIDGE_A, ridge.RIDGE_B)
    assert ridge.ridge_rule(str(ZOO_DIR / "finetunes"))[:2] == (ridge.RIDGE_A, ridge.RIDGE_B)  # not a member


def test_a_bank_entry_is_named_by_the_stem_and_add_takes_it(zoo_bank, capsys):
    zoo_bank, _ = zoo_bank
    for name in ("shapes", "shapes.utd.safetensors"):
        assert run(zoo_bank, "edit", "--bank", "bank.safetensors", "--add", name, "--quiet", "-o", "e.safetensors") == 0
    assert "recorded in the bank, the image world's ridge" in capsys.readouterr().out
    edit = ps.Edit.load(zoo_bank / "e.safetensors")
    assert "image world" in edit.meta["ridge_why"]


def test_ridges_are_checked_where_they_are_given():
    model = ps.from_config("clip", seed=0)
    for bad in (-1, float("nan"), "0.1", True):
        with pytest.raises(PlatonicError, match="ridge_a must be a finite number >= 0"):
            ps.OperatorBank(model, ridge_a=bad)


# ---------------------------------------------------------------------------- B. messages in the user's words
def test_an_edit_for_a_residual_head_on_a_projection_names_both_models(zoo_bank, capsys):
    zoo_bank, _ = zoo_bank
    run(zoo_bank, "edit", "--bank", "bank.safetensors", "--add", "shapes", "--quiet", "-o", "sig.safetensors")
    evaluate = ("evaluate", "--family", "clip", "--checkpoint", str(ZOO_DIR / "clip"), "--edit", "sig.safetensors", "--task",
                "amber_shapes", *WORLD)
    made_for = ps.Edit.load(zoo_bank / "sig.safetensors").target.checkpoint  # as the edit file records it
    line = refused(capsys, zoo_bank, f"--edit sig.safetensors was made for siglip ({made_for}), not for clip", *evaluate)
    assert "give --allow-other-target to apply it anyway" in line  # read from the file: no model loaded (test_startup.py)
    line = refused(capsys, zoo_bank, "this edit was made for siglip", *evaluate, "--allow-other-target")  # then the models say why not
    clip = ps.load("clip", str(ZOO_DIR / "clip")).checkpoint
    assert f"siglip ({made_for})" in line and f"clip ({clip}) has a projection site" in line
    assert "attention-pool head (a residual_head site)" in line


def test_an_unknown_family_is_named_first(tmp_path, capsys):
    line = refused(capsys, tmp_path, "nosuch", "utd", "--family", "nosuch", "--task", "t")
    assert "family" in line


def test_messages_are_never_cut(tmp_path, capsys, monkeypatch):
    import platonic_sdk.evaluate.measure.benchmark_workspace as bw

    long = "offline: " + " ".join(f"word{i}" for i in range(120)) + " installation"
    monkeypatch.setattr(bw, "load", lambda *a, **k: (_ for _ in ()).throw(OSError(long)))
    monkeypatch.setattr(bw, "load_benchmark", lambda *a, **k: None)
    line = refused(capsys, tmp_path, long, "grid", "--benchmark", "paper-image", "--data-root", str(tmp_path), "--out",
                   str(tmp_path / "run"), "--no-cache")
    assert line.endswith("installation); give the path of a local checkpoint of clip in --model")


def _broken(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89PNG\r\n\x1a\n not really")


def test_a_folder_load_names_every_unreadable_file_at_once(tmp_path):
    from platonic_sdk.data.images import image_folder_task

    for cls in ("ring", "star"):
        (tmp_path / "a" / cls).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (8, 8), (40 * i, 0, 0)).save(tmp_path / "a" / cls / f"{i}.png")
    _broken(tmp_path / "a" / "ring" / "bad1.png")
    _broken(tmp_path / "a" / "star" / "bad2.png")
    with pytest.raises(PlatonicError) as err:
        image_folder_task(tmp_path / "a")
    message = str(err.value)
    assert message.startswith("2 of 8 image files cannot be read") and "bad1.png" in message and "bad2.png" in message
    for i in range(12):
        _broken(tmp_path / "a" / "star" / f"more{i:02d}.png")
    with pytest.raises(PlatonicError, match=r"^14 of 20 image files cannot be read: .*; and 4 more$"):
        image_folder_task(tmp_path / "a")


def test_an_audio_folder_load_names_every_unreadable_file_at_once(tmp_path):
    from platonic_sdk.data.audio import Waveform, folder_task, write_audio

    for cls in ("low", "high"):
        for i in range(3):
            write_audio(tmp_path / cls / f"{i}.wav", Waveform(torch.zeros(800).numpy() + 0.1 * i, 8000))
    (tmp_path / "low" / "bad1.wav").write_bytes(b"RIFF0000WAVEjunk")
    (tmp_path / "high" / "bad2.wav").write_bytes(b"not audio")
    with pytest.raises(PlatonicError) as err:
        folder_task(tmp_path)
    assert str(err.value).startswith("2 of 8 audio files cannot be read") and "bad1.wav" in str(err.value) and "bad2.wav" in str(err.value)


# ---------------------------------------------------------------------------- C. the same refusals in Python
def test_an_identical_edit_is_not_applied_twice_unless_allowed():
    model = ps.from_config("clip", seed=0)
    site = model.last_affine()
    A = 0.01 * torch.randn(site.weight.shape[0], site.weight.shape[0], generator=torch.Generator().manual_seed(0))
    first, twin = ps.OperatorEdit(A, 0.5), ps.OperatorEdit(A.clone(), 1.0)
    before = {k: v.clone() for k, v in model.model.state_dict().items()}
    first.apply(model)
    after_one = {k: v.clone() for k, v in model.model.state_dict().items()}
    with pytest.raises(PlatonicError, match="an identical edit .* is already applied to this clip model"):
        twin.apply(model)
    assert all(torch.equal(v, after_one[k]) for k, v in model.model.state_dict().items())  # nothing changed
    twin.apply(model, allow_twice=True)
    twin.remove()
    first.remove()
    assert all(torch.equal(v, before[k]) for k, v in model.model.state_dict().items())


def test_feature_caches_with_nan_or_missing_tensors_are_refused_naming_the_file(tmp_path):
    from platonic_sdk.evaluate.measure.feature_cache import FeatureCache
    from platonic_sdk.io import save_tensors

    good = {"site_inputs": torch.ones(3, 4), "raw_embeddings": torch.ones(3, 4), "labels": torch.tensor([0, 1, 0])}
    save_tensors(tmp_path / "ok.safetensors", good, "feature_cache", {})
    assert FeatureCache.load(tmp_path / "ok.safetensors").raw_embeddings.shape == (3, 4)
    nan = dict(good, raw_embeddings=torch.tensor([[float("nan")] * 4] * 3))
    save_tensors(tmp_path / "nan.safetensors", nan, "feature_cache", {})
    with pytest.raises(CheckpointError, match=r"nan\.safetensors holds 12 NaN/inf value\(s\) in 'raw_embeddings'"):
        FeatureCache.load(tmp_path / "nan.safetensors")
    save_tensors(tmp_path / "part.safetensors", {k: v for k, v in good.items() if k != "labels"}, "feature_cache", {})
    with pytest.raises(CheckpointError, match=r"part\.safetensors is a malformed feature cache: it has no tensor 'labels'"):
        FeatureCache.load(tmp_path / "part.safetensors")


def test_a_feature_store_entry_with_nan_is_encoded_again(tmp_path):
    from platonic_sdk.encoding.feature_store import FeatureStore

    store = FeatureStore(tmp_path)
    parts = {"model": "m", "dataset": "d", "preprocessing": "p", "site": "s", "count": "2"}
    store.put(parts, torch.ones(2, 3), torch.tensor([[1.0, float("inf"), 0.0]] * 2))
    with pytest.warns(UserWarning, match="NaN/inf"):
        assert store.get(parts) is None


def test_malformed_files_raise_a_platonic_error_naming_the_file(tmp_path):
    import safetensors.torch

    from platonic_sdk.io import save_tensors

    no_kind = tmp_path / "nokind.safetensors"
    safetensors.torch.save_file({"operator": torch.eye(3)}, str(no_kind), metadata={"format": "platonic_sdk", "meta": "{}"})
    with pytest.raises(CheckpointError, match=r"nokind\.safetensors has a platonic_sdk header without a 'kind'"):
        ps.Edit.load(no_kind)
    listed = tmp_path / "listed.safetensors"
    save_tensors(listed, {"utd": torch.ones(2, 3)}, "utd", {"grid_id": ["a", "b"], "task": "t"})
    with pytest.raises(CheckpointError, match=r"listed\.safetensors is a malformed descriptor file: its 'grid_id' is \['a', 'b'\]"):
        ps.UTD.load(listed)
    bad_edit = tmp_path / "badedit.safetensors"
    save_tensors(bad_edit, {"operator": torch.eye(3)}, "operator_edit", {"strength": "lots", "site_kind": "projection"})
    with pytest.raises(CheckpointError, match=r"badedit\.safetensors is a malformed operator_edit file: strength"):
        ps.Edit.load(bad_edit)


# ---------------------------------------------------------------------------- D. grid --dry-run
def test_grid_dry_run_checks_everything_and_writes_nothing(tmp_path, capsys):
    import dataset_layouts as layouts  # noqa: F401  (the paper benchmark test's fake layouts)
    from test_paper_benchmark import image_layouts, zoo_families

    image_layouts(tmp_path / "data", cifar_test_per_class=1)
    out = tmp_path / "run"
    models = [a for f, m in zoo_families(tmp_path).items() for a in ("--model", f"{f}={m}")]
    cache = tmp_path / "cache"
    from platonic_sdk.data.benchmark import load_benchmark
    from platonic_sdk.encoding.feature_store import FeatureStore
    from platonic_sdk.encoding.features import site_features

    loaded = load_benchmark("paper-image", tmp_path / "data")  # one evaluation set already in the cache
    site_features(ps.load("clip", str(ZOO_DIR / "clip")), loaded.tasks["MNIST"].test.items, cache=FeatureStore(cache))
    before = snapshot(tmp_path)
    status = run(tmp_path, "grid", "--benchmark", "paper-image", "--data-root", str(tmp_path / "data"), "--out", str(out),
                 *models, "--dry-run", "--cache-dir", str(cache), "--quiet")
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "--dry-run: every dataset and model loads; nothing was written" in printed
    assert "finetunes to make: 48 of 48 (clip: 8 tasks; " in printed  # 6 families x 8 tasks, none made yet
    assert re.search(r"\ncells: \d+ addition \(cross-family\)\ncells: \d+ negation \(cross-family\)\n", printed)
    mnist = len(loaded.tasks["MNIST"].test)
    # the default keeps labels: each task's train split, less the probes its grid holds (here all of it), is encoded too
    sets = re.search(rf"\nclip: \d+ items to encode \(10 test splits, 8 probe grids, 8 labelled keep splits\), {mnist} of them in "
                     r"the feature cache \(1 of (\d+) sets\); \d+ fine-tuned probe rows on 8 fine-tunes\n", printed)
    assert sets and 18 <= int(sets[1]) <= 26, printed
    for family in ("openclip", "metaclip", "siglip", "siglip2", "evaclip"):
        assert re.search(rf"\n{family}: \d+ items to encode .*, 0 of them in the feature cache \(0 of {sets[1]} sets\)", printed)
    assert snapshot(tmp_path) == before and not out.exists()  # no run folder, no fine-tunes, no cache entry
    # a missing dataset is named as in a real run, before any model loads
    for path in sorted((tmp_path / "data" / "eurosat").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    refused(capsys, tmp_path, "1 of 10 datasets are missing", "grid", "--benchmark", "paper-image", "--data-root",
            str(tmp_path / "data"), "--out", str(out), *models, "--dry-run", "--no-cache")


# ---------------------------------------------------------------------------- E. before any model loads, in the interface's words
@pytest.fixture
def no_model_loads(monkeypatch):
    """Any model load fails the test: the refusals below come before one (with no --checkpoint, the hub default's)."""
    import platonic_sdk.registry as registry

    def load(*args, **kwargs):
        raise AssertionError(f"a model loaded: {args}")

    monkeypatch.setattr(registry, "load", load)
    monkeypatch.setattr(registry, "from_config", load)


@pytest.mark.parametrize("argv, words", [
    (("evaluate", "--family", "clip", "--task", "amber_shapes", "--edit", "nofile.safetensors"), "--edit nofile.safetensors: no such file"),
    (("edit", "--family", "siglip", "--add", "nothere.safetensors", "-o", "e.safetensors"), "--add nothere.safetensors: no such file"),
    (("edit", "--family", "siglip", "--term", "gone.safetensors=0.5", "-o", "e.safetensors"), "--term gone.safetensors: no such file"),
    (("edit", "--bank", "nobank.safetensors", "--add", "shapes", "-o", "e.safetensors"), "--bank nobank.safetensors: no such file"),
    (("bank", "--family", "clip", "--descriptor", "nothere.safetensors", "-o", "b.safetensors"), "--descriptor nothere.safetensors: no such file"),
    (("evaluate", "--family", "clip", "--checkpoint", "./nowhere", "--task", "amber_shapes"), "--checkpoint ./nowhere: no such file or folder"),
    (("utd", "--family", "clip", "--task", "amber_shapes", "--ft-adapter", ".", "-o", "u.safetensors"), "not a peft adapter folder"),
    (("grid", "--benchmark", "paper-image", "--dry-run"), "benchmark paper-image reads its datasets under --data-root"),
    (("grid", "--benchmark", "paper-image", "--data-root", "d", "--dry-run"), "in --finetunes (default: --out/finetunes)"),
    (("grid", "--model", "clip=x", "--out", "r"), "--model: only a benchmark's run takes these"),
    (("evaluate", "--family", "clip", "--task", "amber_shapez"), "unknown task 'amber_shapez' (did you mean 'amber_shapes'"),
])
def test_usage_errors_come_before_any_model_loads(tmp_path, capsys, no_model_loads, argv, words):
    line = refused(capsys, tmp_path, words, *argv)
    assert len(line) < 400 and "known:" not in line  # the nearest names, not every name


def test_files_of_the_wrong_kind_are_named_before_any_model_loads(tmp_path, capsys, no_model_loads):
    ps.UTD(torch.randn(6, 2), "grid0", "shapes").save(tmp_path / "shapes.utd.safetensors")
    (tmp_path / "notes.txt").write_text("not a tensor file")
    refused(capsys, tmp_path, "--edit shapes.utd.safetensors: holds a 'utd'; --edit takes lora_edit or operator_edit files", "evaluate",
            "--family", "clip", "--task", "amber_shapes", "--edit", "shapes.utd.safetensors")
    refused(capsys, tmp_path, "--bank shapes.utd.safetensors: holds a 'utd'; --bank takes operator_bank files", "edit", "--bank",
            "shapes.utd.safetensors", "--add", "shapes", "-o", "e.safetensors")
    refused(capsys, tmp_path, "--add notes.txt is not a safetensors file, or a damaged one", "edit", "--family", "clip",
            "--add", "notes.txt", "-o", "e.safetensors")
    refused(capsys, tmp_path, "--descriptor notes.txt is not a safetensors file, or a damaged one", "bank", "--family", "clip",
            "--descriptor", "notes.txt", "-o", "b.safetensors")


def _refusals_files(root: Path) -> None:
    """Files of the refusals below: an edit and a bank for siglip, descriptors of two spaces (one on a grid of 2 probes per
    class), a damaged safetensors file and a clip checkpoint folder whose weights file is damaged."""
    from platonic_sdk.edits.edit import OperatorEdit
    from platonic_sdk.protocol.binding import Target
    from platonic_sdk.transfer.saved_bank import SavedBank

    siglip = Target({"head.weight": (4, 4)}, "f" * 64, "siglip", str(ZOO_DIR / "siglip"), 4)
    OperatorEdit(torch.zeros(4, 4), 0.5, "residual_head", {}, siglip).save(root / "sig.safetensors")
    SavedBank({"shapes": torch.zeros(4, 3), "other": torch.zeros(4, 3)}, {"shapes": {"space": "blend"}, "other": {"space": "affinity"}},
              "residual_head", 0.1, 0.5, "siglip", str(ZOO_DIR / "siglip"), siglip).save(root / "bank.safetensors")
    ps.UTD(torch.randn(6, 2), "grid0", "shapes", {"grid_per_class": 2, "grid_seed": 0, "grid_stratified": False}, "blend").save(root / "a.utd.safetensors")
    ps.UTD(torch.randn(6, 2), "grid1", "shapes", {}, "affinity").save(root / "b.utd.safetensors")
    fine_tune = (ZOO_DIR / "finetunes" / "siglip" / "amber_shapes.safetensors").read_bytes()
    (root / "corrupt.safetensors").write_bytes(fine_tune[: len(fine_tune) // 2])
    shutil.copytree(ZOO_DIR / "clip", root / "broken_clip")
    weights = root / "broken_clip" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])


def test_file_and_model_refusals_come_before_any_model_library_loads(tmp_path):
    """Each refusal about a file's content or the wrong model, in a fresh interpreter: status 2, one line, no model
    library imported (not even torch: the files are read from their headers), nothing written."""
    _refusals_files(tmp_path)
    zoo, t = ZOO_DIR, tmp_path
    evaluate = ["evaluate", "--family", "clip", "--checkpoint", str(zoo / "clip"), "--task", "amber_shapes", "--edit"]
    utd = ["utd", "--family", "clip", "--task", "amber_shapes", "-o", str(t / "u.safetensors"), "--checkpoint"]
    edit = ["edit", "-o", str(t / "e.safetensors")]
    cases = [
        (evaluate + [str(t / "sig.safetensors")], f"--edit {t / 'sig.safetensors'} was made for siglip ({zoo / 'siglip'}), not for clip"),
        (evaluate + [str(t / "corrupt.safetensors")], "corrupt.safetensors is not a safetensors file, or a damaged one"),
        (evaluate + [str(t / "a.utd.safetensors")], "a.utd.safetensors: holds a 'utd'; --edit takes lora_edit or operator_edit files"),
        (utd + [str(zoo / "clip"), "--ft-checkpoint", str(zoo / "finetunes" / "siglip" / "amber_shapes.safetensors")],
         "amber_shapes.safetensors is a fine-tune of siglip (checkpoint siglip), not of clip: give --family siglip"),
        (utd + [str(zoo / "clip"), "--ft-checkpoint", str(t / "corrupt.safetensors")], "corrupt.safetensors is not a safetensors file"),
        (utd + [str(zoo / "siglip"), "--ft-checkpoint", str(t / "corrupt.safetensors")],
         f"--checkpoint {zoo / 'siglip'} holds a siglip model (its platonic.json says so), not a clip one"),
        (utd + [str(t / "broken_clip"), "--finetune"], "broken_clip: " + f"{t / 'broken_clip' / 'model.safetensors'} is not a safetensors file"),
        (edit + ["--bank", str(t / "bank.safetensors"), "--family", "clip", "--add", "shapes"], "was built for 'siglip', not 'clip'"),
        (edit + ["--bank", str(t / "bank.safetensors"), "--add", "nosuch"], "has no entry 'nosuch'; it holds other, shapes"),
        (edit + ["--bank", str(t / "bank.safetensors"), "--add", "shapes", "--negate", "other"],
         "an edit composes descriptors of one space; these are of 2: shapes (blend), other (affinity)"),
        (edit + ["--family", "siglip", "--add", str(t / "a.utd.safetensors"), "--negate", str(t / "b.utd.safetensors")], "of one space"),
        (edit + ["--family", "siglip", "--add", str(t / "a.utd.safetensors"), "--per-class", "4"],
         "a.utd.safetensors was computed on the grid of --per-class 2, not --per-class 4: its grid is rebuilt from what it records, "
         "so drop --per-class or recompute it with `platonic utd ... --per-class 4`"),
        (["bank", "--family", "siglip", "--descriptor", str(t / "a.utd.safetensors"), "--grid-seed", "1", "-o", str(t / "b.safetensors")],
         "not --grid-seed 1"),
    ]
    before = snapshot(tmp_path)
    reports = probe(f"""
        import contextlib, io, json
        from platonic_sdk.cli import main as cli
        for argv in {[argv for argv, _ in cases]!r}:
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                status = cli.main(argv)
            report(json.dumps([status, err.getvalue()]))
    """)
    assert len(reports) == len(cases)
    for (argv, words), r in zip(cases, reports):
        status, err = json.loads(r["where"])
        assert (status, err.count("\n"), r["libraries"], r["modules"]) == (2, 1, [], []), (argv, r)
        assert err.startswith(f"platonic {argv[0]}: error: ") and words in err, (words, err)
    assert snapshot(tmp_path) == before


def test_an_edit_for_another_width_says_whom_it_was_made_for(tmp_path, capsys):
    """An edit of the zoo's clip (d=64) applied to another clip of width 48: the model it was made for, not a shape error."""
    from platonic_sdk.edits.edit import OperatorEdit
    from platonic_sdk.protocol.binding import Target

    made = ps.load("clip", str(ZOO_DIR / "clip"))
    site = made.last_affine()
    OperatorEdit(torch.zeros(made.embed_dim, made.embed_dim), 0.5, site.kind, {}, Target.of_encoder(made, site.tensors())).save(
        tmp_path / "e.safetensors")
    ps.from_config("clip", {"projection_dim": 48, "vision_config": {"hidden_size": 48, "intermediate_size": 96}}, seed=3).save(str(tmp_path / "narrow"))
    line = refused(capsys, tmp_path, "this edit was made for clip", "evaluate", "--family", "clip", "--checkpoint", "narrow", "--edit",
                   "e.safetensors", "--task", "amber_shapes", *WORLD)
    recorded = ps.Edit.load(tmp_path / "e.safetensors").target.checkpoint  # the zoo's clip, as the edit file records it
    assert f"clip {recorded!r}" in line and "d=64" in line and "d=48" in line


def test_library_keywords_reach_the_command_line_as_flags():
    from platonic_sdk.cli.main import user_message
    from platonic_sdk.edits.edit import OperatorEdit

    model = ps.from_config("clip", seed=0)
    site = model.last_affine()
    edit = OperatorEdit(0.01 * torch.eye(model.embed_dim), 0.5, site.kind)
    with edit.applied_to(model), pytest.raises(PlatonicError) as err:
        OperatorEdit(0.01 * torch.eye(model.embed_dim), 0.5, site.kind).apply(model)
    assert "allow_twice=True" in str(err.value)  # Python's words in Python
    said = user_message("platonic evaluate: error: ", err.value)
    assert "--allow-twice applies it again" in said and "allow_twice" not in said
    assert "give --allow-other-target" in user_message("", PlatonicError("x; pass allow_other_target=True (CLI: --allow-other-target) to"))


def test_a_long_refusal_is_one_line_with_every_detail(tmp_path, capsys):
    """A run folder of other settings (the demo's case): what and what to do, then every setting that differs, on one line."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text('{"settings": {"families": ["clip", "siglip", "openclip"]}}')
    status = run(tmp_path, "grid", "--families", "clip", "siglip", "--out", "run", "--methods", "closed_form", *WORLD)
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and err.startswith("platonic grid: error: run folder run holds a run with other settings")
    assert "use another output folder" in err and "families: ['clip', 'siglip', 'openclip'] -> ['clip', 'siglip'];" in err
    assert err.count(" -> ") > 10  # every setting that differs


def test_families_are_listed_from_the_catalog_without_a_model_library():
    probe = ("import sys; from platonic_sdk.cli import main as cli; cli.main(['families']); "
             "print(sorted(m for m in ('torch', 'transformers', 'open_clip', 'laion_clap') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[-1] == "[]" and any(line.startswith("clap-general  ") or line.startswith("clap-general ") for line in out)
    from platonic_sdk.adapters import CATALOG

    from platonic_sdk.registry import family

    for name, entry in CATALOG.items():  # the catalog says what each adapter registers
        spec = family(name)
        assert (entry.modality, entry.default_checkpoint, entry.description) == (spec.modality, spec.default_checkpoint, spec.description)
