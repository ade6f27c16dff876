"""A world's tuned settings are data in its zoo's manifest (issue 28 item 2); each member carries its world's ridge,
LoRA recipe and fine-tuning recipe in its own folder (stamped from the manifest), so a member copied anywhere gives
the same edit, in Python and on the command line alike (issues 27 item 7, 35 item 4)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import attrs
import pytest
import torch

import platonic_sdk as ps
from platonic_sdk import ridge
from platonic_sdk.cli import main as cli
from platonic_sdk.errors import PlatonicError
from platonic_sdk.transfer.lora import LoraRouteConfig, fit_lora, lora_recipe
from platonic_sdk.worlds.image import ImageWorld
from platonic_sdk.worlds.registry import world_names, world_spec
from platonic_sdk.worlds.zoo import ZOO_DIR
from platonic_sdk.io import MARKER
from platonic_sdk.zoo_settings import MANIFEST, member_settings, world_settings

LIMITS = json.loads((Path(__file__).resolve().parents[1] / "benchmarks" / "protocols" / "round_3.json").read_text())["limits"]
WORLD = ["--train-per-class", "4", "--test-per-class", "3", "--per-class", "2", "--quiet", "--no-cache"]
SIZES = {"train_per_class": 4, "test_per_class": 3}
QUICK = {"lr": 2e-3, "epochs": 1}  # the copied zoo's own recipe: one epoch (one step on a 6-probe grid)


def run(cwd: Path, *argv: str) -> int:
    """`platonic argv` through cli.main in `cwd`: its exit status."""
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return cli.main(list(argv))
    finally:
        os.chdir(old)


def _world_record(member: Path) -> dict:
    return json.loads((member / MARKER).read_text())["world"]


@pytest.fixture
def copied(tmp_path):
    """The image zoo's siglip member alone (no manifest) copied elsewhere under another name, its recorded LoRA recipe
    edited to QUICK."""
    member = tmp_path / "elsewhere" / "my_siglip"
    shutil.copytree(ZOO_DIR / "siglip", member)
    marker = json.loads((member / MARKER).read_text())
    marker["world"]["lora"] = QUICK
    (member / MARKER).write_text(json.dumps(marker))
    return member


def test_each_worlds_settings_are_its_zoos_manifest():
    for name in world_names():
        spec = world_spec(name)
        settings = spec.settings()
        manifest = json.loads((spec.zoo / MANIFEST).read_text())
        record = manifest["settings"]
        assert settings.world == name and settings.zoo == spec.zoo.resolve()
        assert (settings.ridge_a, settings.ridge_b) == (record["ridge_a"], record["ridge_b"])
        assert settings.lora == {**record["lora"], "ridge_b": record["ridge_b"]}  # the route's landmark ridge: the world's
        assert (settings.addition_strength, settings.negation_strength) == (0.5, 1.0)
        # the budgets an experiment that keeps labels spends: the world's control limits, as the decision protocol states them
        assert {"addition": settings.addition_budget, "negation": settings.negation_budget} == LIMITS[name]
        LoraRouteConfig(**settings.lora)  # every recorded field is a field of the recipe
        world = spec.make(seed=0)
        assert set(settings.controls) == set(world.controls) and not set(settings.controls) & set(world.transfer_tasks)
        assert settings.record() == record  # what the zoo builders write back
        for member in manifest["members"]:  # each shipped member carries what the manifest says (zoo_settings.stamp_members)
            carried = member_settings(spec.zoo / member)
            assert (carried.world, carried.ridge_a, carried.ridge_b, carried.lora) == (name, settings.ridge_a, settings.ridge_b,
                                                                                      settings.lora), member
            assert carried.finetune == manifest.get("finetune", {}), member


def test_a_copied_member_carries_its_worlds_ridge_and_lora_recipe(copied):
    image = world_spec("image").settings()
    rule = ridge.ridge_rule(str(copied))
    assert rule[:2] == (image.ridge_a, image.ridge_b) and "the image world's ridge" in rule.why
    target = ps.load("siglip", str(copied))
    bank = ps.OperatorBank(target)
    assert (bank.ridge_a, bank.ridge_b) == (image.ridge_a, image.ridge_b)
    config, why = lora_recipe(target.checkpoint)
    assert attrs.asdict(config, recurse=False) == attrs.asdict(LoraRouteConfig(**QUICK, ridge_b=image.ridge_b), recurse=False)
    assert why.startswith("the image world's LoRA recipe")
    # the shipped zoo keeps its own recipe: the copy's edit changed only the copy
    assert lora_recipe(str(ZOO_DIR / "siglip"))[0].lr == image.lora["lr"] != QUICK["lr"]


def test_a_member_copied_to_another_folder_gives_a_bit_identical_edit(tmp_path):
    """The same descriptor on the shipped member and on a copy of its folder alone, under another name: the same ridge,
    the same operator and strength bit for bit, and edit files that record the checkpoint without the machine's paths."""
    copy = tmp_path / "somewhere" / "siglip"
    shutil.copytree(ZOO_DIR / "siglip", copy)
    source, ft = ps.load("clip", str(ZOO_DIR / "clip")), ps.load("clip", str(ZOO_DIR / "clip"))
    with torch.no_grad():
        ft.last_affine().fold(torch.randn(ft.embed_dim, ft.embed_dim, generator=torch.Generator().manual_seed(0)) * 0.1, 1.0)
    grid = ImageWorld(**SIZES).task("amber_shapes").grid(2, 0)
    utd = ps.UTD.compute(source, ft, grid)
    edits = []
    for folder in (ZOO_DIR / "siglip", copy):
        bank = ps.OperatorBank(ps.load("siglip", str(folder)))
        bank.add_grid(grid)
        edits.append(bank.edit(utd, strength=0.5))
        edits[-1].save(tmp_path / f"{len(edits)}.safetensors")
    assert torch.equal(edits[0].operator, edits[1].operator) and edits[0].strength == edits[1].strength
    assert edits[0].meta == edits[1].meta and str(tmp_path) not in json.dumps(edits[1].meta)
    assert (tmp_path / "1.safetensors").read_bytes() == (tmp_path / "2.safetensors").read_bytes()


def test_anything_but_a_member_gets_the_papers_defaults(tmp_path):
    saved = tmp_path / "saved"
    ps.load("siglip", str(ZOO_DIR / "siglip")).save(str(saved))  # a checkpoint the SDK saved: no world recorded
    for checkpoint in (saved, ZOO_DIR / "finetunes", None, "google/siglip-base-patch16-224"):
        assert member_settings(checkpoint) is None
        assert ridge.ridge_rule(checkpoint)[:2] == (ridge.RIDGE_A, ridge.RIDGE_B)
        config, why = lora_recipe(checkpoint)
        assert config == LoraRouteConfig() and "defaults" in why


def test_given_fields_win_and_unknown_ones_are_refused(copied):
    config, why = lora_recipe(str(copied), {"lr": 1e-4, "max_steps": 7})
    assert (config.lr, config.max_steps, config.epochs) == (1e-4, 7, QUICK["epochs"]) and why.endswith("with lr, max_steps given")
    with pytest.raises(TypeError, match="unknown LoraRouteConfig field 'epoch' \\(did you mean 'epochs'\\?\\)"):
        lora_recipe(str(copied), {"epoch": 3})


@pytest.mark.parametrize("broken, words", [
    (lambda s: s.pop("ridge_a"), "KeyError"),
    (lambda s: s.update(ridge_b=-1.0), "ridge_b"),
    (lambda s: s.update(addition_strength="0.5"), "addition_strength"),
    (lambda s: s["lora"].update(ridge_b=0.1), "the LoRA route's landmark ridge is the world's ridge_b"),
    (lambda s: s.update(negation_budget=0), "negation_budget"),
    (lambda s: s.update(addition_budget="3"), "addition_budget"),
])
def test_a_malformed_settings_record_is_refused_naming_the_manifest(tmp_path, broken, words):
    manifest = json.loads((ZOO_DIR / MANIFEST).read_text())
    broken(manifest["settings"])
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(PlatonicError, match=f"{MANIFEST}: malformed `settings` record") as error:
        world_settings(tmp_path)
    assert words in str(error.value)


@pytest.mark.parametrize("broken, words", [(lambda r: r.pop("ridge_a"), "KeyError"), (lambda r: r.update(ridge_b=-1.0), "ridge_b")])
def test_a_malformed_member_record_is_refused_naming_its_marker(copied, broken, words):
    marker = json.loads((copied / MARKER).read_text())
    broken(marker["world"])
    (copied / MARKER).write_text(json.dumps(marker))
    with pytest.raises(PlatonicError, match=f"{MARKER}: malformed `world` record") as error:  # not silently the paper's ridge
        ridge.ridge_rule(str(copied))
    assert words in str(error.value)


def test_a_recipe_field_the_route_does_not_know_is_refused_naming_the_marker(copied):
    marker = json.loads((copied / MARKER).read_text())
    marker["world"]["lora"]["learning_rate"] = 1e-3
    (copied / MARKER).write_text(json.dumps(marker))
    with pytest.raises(PlatonicError, match=f"{MARKER}: the `world` record's lora holds \\['learning_rate'\\]"):
        lora_recipe(str(copied))


def test_a_manifest_without_settings_is_no_worlds_zoo(tmp_path):
    manifest = json.loads((ZOO_DIR / MANIFEST).read_text())
    del manifest["settings"]
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(PlatonicError, match="records no world settings"):
        world_settings(tmp_path)


def test_the_cli_and_python_fit_a_zoo_member_with_the_same_recipe(copied, capsys):
    """`platonic edit --route lora` without --lora-* flags and `fit_lora` without a config both use the world's recipe."""
    work = copied.parent
    assert run(work, "utd", "--family", "clip", "--checkpoint", str(ZOO_DIR / "clip"), "--ft-checkpoint",
               str(ZOO_DIR / "finetunes" / "clip" / "amber_shapes.safetensors"), "--task", "amber_shapes", *WORLD,
               "-o", "amber.utd.safetensors") == 0
    capsys.readouterr()
    assert run(work, "edit", "--route", "lora", "--family", "siglip", "--checkpoint", str(copied),
               "--add", "amber.utd.safetensors", "--strength", "0.5", *WORLD, "-o", "lora.safetensors") == 0
    out = capsys.readouterr().out
    expected, why = lora_recipe(str(copied), {"seed": 0})
    assert f"with {why}: {json.dumps(expected.describe())}" in out

    target = ps.load("siglip", str(copied))
    utd = ps.UTD.load(work / "amber.utd.safetensors")
    grid = ImageWorld(**SIZES).task("amber_shapes").grid(2, 0)
    python = fit_lora(target, utd, [grid], progress=False).scaled(0.5)
    cli_edit = ps.Edit.load(work / "lora.safetensors")
    recipe = {k: v for k, v in expected.describe().items()}
    assert {k: cli_edit.meta[k] for k in recipe} == {k: python.meta[k] for k in recipe} == recipe
    assert cli_edit.meta["steps"] == python.meta["steps"] == 1  # the copied zoo's one epoch over its 6 probes
    for name, (b, a) in python.factors.items():
        got_b, got_a = cli_edit.factors[name]
        assert torch.allclose(got_b @ got_a * cli_edit.lora_alpha, b @ a * python.lora_alpha, atol=1e-6)


def test_the_demo_takes_the_worlds_strengths_and_recipe_from_its_manifest(tmp_path):
    from platonic_sdk.evaluate.plan.demo import demo_config
    from platonic_sdk.worlds import registry

    zoo = tmp_path / "zoo"
    zoo.mkdir()
    settings = {"ridge_a": 0.2, "ridge_b": 0.4, "lora": {"lr": 1e-3, "epochs": 7}, "addition_strength": 0.3,
                "negation_strength": 0.9, "controls": ["control_shapes"]}
    (zoo / MANIFEST).write_text(json.dumps({"members": {}, "world": "strong", "settings": settings}))
    registry.register_world(registry.WorldSpec("strong", ImageWorld, zoo))
    try:
        cells = demo_config("strong").settings
        assert (cells.addition_strength, cells.negation_strength) == (0.3, 0.9)
        assert cells.addition_budget is None and demo_config("strong", settings={"keep": "labels"}).settings.addition_budget is None  # none recorded
        assert cells.lora == {"lr": 1e-3, "epochs": 7, "ridge_b": 0.4}
        assert demo_config("strong", settings={"lora": {"ridge_b": 0.05}}).settings.lora["ridge_b"] == 0.05  # a ridge_b given wins
    finally:
        registry.WORLDS.pop("strong")
