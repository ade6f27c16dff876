"""The `real_audio` world: shipped real clips, lit-audio members built from real pretrained audio towers, their fine-tunes.

Without the trunk packages these tests check everything that loads without them (the world's tasks and clips,
licences, the members' heads and shipped text features, the fine-tunes, the replicates' splits). With them (the
README's set-up commands install them, and CI runs these), the manifest's figures of one member are measured again.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from platonic_sdk.data.audio import Waveform
from platonic_sdk.tasks import item_fingerprint
from platonic_sdk.worlds import zoo
from platonic_sdk.worlds.real_audio import INSTALL, REAL_AUDIO_ZOO_DIR, TASK_SPECS, RealAudioWorld, read_clips
from platonic_sdk.worlds.registry import world_names, world_spec

ROOT = Path(__file__).resolve().parents[1]
HAVE_TRUNKS = all(importlib.util.find_spec(name) for name in ("resemblyzer", "torchcrepe"))
MEMBERS = ("voice", "pitch", "voice_pitch")
needs_trunks = pytest.mark.skipif(not HAVE_TRUNKS, reason=f"needs the audio trunks' packages ({INSTALL})")


@pytest.fixture(scope="module")
def world():
    return RealAudioWorld(seed=0)


@pytest.fixture(scope="module")
def manifest():
    return zoo.read_manifest(REAL_AUDIO_ZOO_DIR)


def _ids(split) -> set[str]:
    return {item_fingerprint(x) for x in split.items}


def test_registered(world):
    assert "real_audio" in world_names()
    spec = world_spec("real_audio")
    assert spec.zoo == REAL_AUDIO_ZOO_DIR and isinstance(spec.make(seed=0), RealAudioWorld)
    assert spec.settings().controls == world.controls


def test_tasks_split_disjoint_balanced_and_one_second_at_16k(world):
    for name in world.task_names:
        task = world.task(name)
        assert not _ids(task.train) & _ids(task.test), name
        for split in (task.train, task.test):
            counts = np.bincount(split.labels, minlength=task.num_classes)
            assert (counts == counts[0]).all() and counts[0] >= 10, (name, counts)  # controls too: keep sets need train items
        item = task.test.items[0]
        assert isinstance(item, Waveform) and item.sample_rate == 16000 and item.samples.shape == (16000,)


def test_two_tasks_label_the_same_clips_two_ways(world):
    register, family = world.task("note_register"), world.task("note_family")
    assert _ids(register.train) == _ids(family.train) and _ids(register.test) == _ids(family.test)
    assert TASK_SPECS["note_register"].label != TASK_SPECS["note_family"].label


def test_design_controls_trio(world):
    transfer = world.transfer_tasks
    assert set(transfer) == {"note_register", "note_family", "digits_telephone", "digits_noisy"}
    names = {c for t in (*transfer, world.trio[2]) for c in TASK_SPECS[t].classnames}
    pools = {TASK_SPECS[t].pool for t in (*transfer, world.trio[2])}
    for control in world.controls:  # controls share neither a class name nor a clip with any task
        assert not names & set(TASK_SPECS[control].classnames) and TASK_SPECS[control].pool not in pools, control
    a, b, held = world.trio
    assert a in transfer and b in transfer and held not in transfer
    assert TASK_SPECS[a].classnames == TASK_SPECS[b].classnames == TASK_SPECS[held].classnames
    assert _ids(world.task(held).test).isdisjoint(_ids(world.task(a).test) | _ids(world.task(b).test))  # other sounds


def test_shifts_are_deterministic_and_keep_the_level(world):
    from platonic_sdk.worlds.real_audio import noisy, telephone

    x = world.pool("speech").clips[0]
    assert np.array_equal(noisy(x), noisy(x)) and not np.array_equal(noisy(x), noisy(world.pool("speech").clips[1])[: len(x)] * 0 + x)
    assert np.sqrt(np.mean(telephone(x) ** 2)) == pytest.approx(np.sqrt(np.mean(x**2)), rel=1e-4)


def test_other_seed_draws_other_orders_and_resplit_other_test_sets():
    a, b = RealAudioWorld(seed=0).task("note_register"), RealAudioWorld(seed=1).task("note_register")
    assert [item_fingerprint(i) for i in a.test.items] != [item_fingerprint(i) for i in b.test.items]
    assert _ids(a.test) == _ids(b.test)
    drawn = RealAudioWorld(seed=1, resplit=True)
    for name in ("note_register", "digits_noisy", "control_drums"):
        task = drawn.task(name)
        assert not _ids(task.train) & _ids(task.test) and _ids(task.test) != _ids(RealAudioWorld(seed=0).task(name).test)
        assert len(task.test) == len(RealAudioWorld(seed=0).task(name).test)
    shipped, redrawn = read_clips("notes"), drawn.pool("notes")
    cells = shipped.labels["family"] * 10 + shipped.labels["register"]
    for cell in np.unique(cells):  # per family x register cell, as many train clips as shipped
        assert (redrawn.splits[cells == cell] == 0).sum() == (shipped.splits[cells == cell] == 0).sum()


def test_replicate_probes_leave_train_clips_for_the_fine_tunes():
    from platonic_sdk.evaluate.measure.replicates import _without

    probes = RealAudioWorld.replicate_probes
    whole, probed = RealAudioWorld(seed=5, resplit=True), RealAudioWorld(seed=5, train_per_class=probes, resplit=True)
    for name in whole.transfer_tasks:
        held = _ids(probed.task(name).train)
        rest = _without(whole.task(name), held)
        assert held <= _ids(whole.task(name).train) and not _ids(rest.train) & held
        assert np.bincount(rest.train.labels).min() >= probes // 2, name


def test_shipped_files_small_documented_and_licensed():
    files = [p for p in REAL_AUDIO_ZOO_DIR.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files) / 2**20
    assert total < 10.0, f"the shipped real_audio world is {total:.1f} MB"
    readme = (REAL_AUDIO_ZOO_DIR / "README.md").read_text()
    for needed in ("fluid-soundfont-gm", "MIT", "espeak-ng", "hydrogen-drumkits", "CC0", "CC-BY-3.0", "CC-BY-SA-3.0",
                   "resemblyzer", "torchcrepe", "Apache-2.0", "train_real_audio_zoo", "all-MiniLM-L6-v2"):
        assert needed in readme, needed
    for name in ("notes", "speech", "drums", "voices"):
        meta = read_clips(name).meta
        assert meta["rate"] == 16000 and "source" in meta and len(meta["clips"]) == len(meta["splits"])


def test_members_load_without_weight_packages(manifest, world):
    models = zoo.load_models(REAL_AUDIO_ZOO_DIR)
    assert set(models) == set(MEMBERS) == set(manifest["members"])
    assert sorted(m.embed_dim for m in models.values()) == [48, 64, 96]
    for name, model in models.items():
        assert model.family == "lit-audio" and model.modality == "audio"
        assert set(world.prompts()) <= set(model.text.table), name  # every prompt answered from the shipped features
        assert model.encode_text(world.prompts()).shape == (len(world.prompts()), model.embed_dim)


def test_members_are_cross_family_on_two_trunks():
    from platonic_sdk.evaluate.measure.workspace import architecture_signature

    models = zoo.load_models(REAL_AUDIO_ZOO_DIR)
    assert len({architecture_signature(m) for m in models.values()}) == len(models)
    kinds = {m.config["trunk"]["kind"] for m in models.values()}
    assert {"voice", "pitch"} <= kinds


def test_finetunes_shipped_for_every_transfer_task(world):
    models = zoo.load_models(REAL_AUDIO_ZOO_DIR)
    fts = zoo.load_finetunes(models, world.transfer_tasks, REAL_AUDIO_ZOO_DIR)
    assert set(fts) == {(m, t) for m in MEMBERS for t in world.transfer_tasks}
    for (name, task), ft in fts.items():
        changed = [k for k, v in ft.media_encoder.state_dict().items() if not torch.equal(v, models[name].media_encoder.state_dict()[k])]
        assert changed and all(k.startswith(("fc1", "fc2")) for k in changed), (name, task, changed)


MEASURED = "voice"  # the cheapest trunk
MEASURED_TASKS = ("note_register", "digits_telephone")
TOLERANCE = 1.25  # points: the fine-tunes ship in half precision (the manifest measured them in full)


@needs_trunks
def test_manifest_figures_reproduce(manifest, world):
    from platonic_sdk.encoding.zeroshot import accuracy

    model = zoo.load_models(REAL_AUDIO_ZOO_DIR, names=[MEASURED])[MEASURED]
    recorded = manifest["members"][MEASURED]["accuracy"]
    for name in (*MEASURED_TASKS, world.controls[0]):
        task = world.task(name)
        assert accuracy(model, task) == pytest.approx(recorded[name]["zero_shot"], abs=0.6), name
    for name in MEASURED_TASKS:
        ft = zoo.finetuned(MEASURED, name, REAL_AUDIO_ZOO_DIR, pre=model)
        got = accuracy(ft, world.task(name))
        assert got == pytest.approx(recorded[name]["finetuned"], abs=TOLERANCE), name
        assert got > recorded[name]["zero_shot"] + 10, name  # the fine-tunes gain


def test_recorded_figures_show_the_design(manifest, world):
    """What the design says the towers hear, from the manifest (whose figures reproduce above): every member's
    controls start well above chance; the pitch trunk hears no instrument family and less of what is said; on the
    members that hear the digits best, the relatives' own fine-tunes raise the held-out task on average."""
    for name in MEMBERS:
        acc = manifest["members"][name]["accuracy"]
        assert set(acc) == set(world.task_names)
        for control in world.controls:
            assert acc[control]["zero_shot"] > 100 / len(TASK_SPECS[control].classnames) + 10, (name, control)
        held = acc[world.trio[2]]
        if name != "pitch":
            assert np.mean([v - held["zero_shot"] for v in held["relatives"].values()]) > 5, name
            assert acc["digits_noisy"]["probe_trunk"] > 60, name
    pitch = manifest["members"]["pitch"]["accuracy"]
    assert pitch["note_family"]["probe_trunk"] < 100 / len(TASK_SPECS["note_family"].classnames) + 15
    voice = manifest["members"]["voice"]["accuracy"]
    assert pitch["note_register"]["probe_trunk"] > 75  # CREPE hears pitch, and less of what is said than the speaker encoder
    assert pitch["digits_noisy"]["probe_trunk"] < voice["digits_noisy"]["probe_trunk"] - 15


@pytest.mark.parametrize("command", ["demo", "grid"])
def test_a_missing_trunk_package_is_named_before_anything_is_written(command, tmp_path, capsys, monkeypatch):
    import sys

    from test_cli_errors import refused

    monkeypatch.setitem(sys.modules, "torchcrepe", None)  # as if not installed: find_spec says None
    line = refused(capsys, tmp_path, "torchcrepe", command, "--world", "real_audio", "--out", "out/real_audio")
    assert INSTALL in line and "resemblyzer," not in line
    assert not (tmp_path / "out").exists()


def test_the_set_up_commands_install_the_trunks():
    """Both README set-up commands install the trunks' packages (without their dependencies), and so does CI."""
    readme = (ROOT / "README.md").read_text()
    commands = [line for line in readme.splitlines() if line.startswith("python3 -m venv .venv")]
    assert len(commands) == 2 and all(f".venv/bin/{INSTALL.replace('pip install', 'pip install -q')}" in c for c in commands)
    assert "--world real_audio" in (ROOT / "docs" / "user_guide.md").read_text()
