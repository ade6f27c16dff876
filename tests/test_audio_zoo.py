"""The shipped audio zoo: four CLAP members of different widths and depths, their fine-tunes, the manifest."""

from __future__ import annotations

import pytest
import torch

from platonic_sdk.encoding.zeroshot import accuracy
from platonic_sdk.worlds.audio import AUDIO_ZOO_DIR, AudioWorld
from platonic_sdk.worlds.audio_zoo import AUDIO_ZOO
from platonic_sdk.worlds.zoo import finetune_path, load_finetunes, load_models, read_manifest


@pytest.fixture(scope="module")
def zoo():
    torch.set_num_threads(1)
    return read_manifest(AUDIO_ZOO_DIR), load_models(AUDIO_ZOO_DIR)


def test_members_are_the_four_clap_families_at_different_sizes(zoo):
    manifest, models = zoo
    assert set(models) == {m.name for m in AUDIO_ZOO} and manifest["world"] == "audio"
    assert {m.family for m in models.values()} == {"clap-htsat-unfused", "clap-htsat-fused", "clap-general", "clap-music"}
    assert all(m.modality == "audio" and m.dtype == torch.float32 for m in models.values())
    assert len({m.embed_dim for m in models.values()}) >= 3
    shapes = {name: [tuple(p.shape) for p in m.media_encoder.parameters()] for name, m in models.items()}
    assert len({repr(s) for s in shapes.values()}) == 4  # no two members share an audio-tower architecture
    for name, member in manifest["members"].items():
        assert member["embed_dim"] == models[name].embed_dim


def test_members_hear_the_control_task_and_fine_tunes_ship(zoo):
    manifest, models = zoo
    world = AudioWorld(seed=manifest["world_seed"], test_per_class=10)
    control = world.task(world.controls[0])
    chance = 100.0 / control.num_classes
    for name, model in models.items():
        assert accuracy(model, control) > chance + 30, name
        for task in world.transfer_tasks:
            assert finetune_path(AUDIO_ZOO_DIR, name, task).is_file(), (name, task)
    finetuned = load_finetunes({n: models[n] for n in list(models)[:1]}, world.transfer_tasks[:1], AUDIO_ZOO_DIR)
    (key, ft), = finetuned.items()
    task = world.task(key[1])
    assert accuracy(ft, task) > accuracy(models[key[0]], task)
