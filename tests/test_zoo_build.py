"""The zoo rebuild path (`python -m platonic_sdk.worlds.train_zoo`) for both worlds, at toy size."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
import torch
from safetensors import safe_open

from platonic_sdk.errors import PlatonicError
from platonic_sdk.worlds.audio import AudioWorld
from platonic_sdk.worlds.image import ImageWorld
from platonic_sdk.worlds.train_zoo import RECIPES, build, main
from platonic_sdk.worlds.zoo import load_finetunes, load_models, read_manifest

SMALL = {"image": ("clip", ImageWorld), "audio": ("clap-music", AudioWorld)}


def _toy(modality: str):
    name, world = SMALL[modality]
    recipe = RECIPES[modality]
    return name, attrs.evolve(
        recipe,
        world=lambda: world(seed=0, train_per_class=4, test_per_class=4),
        members=(recipe.member(name),),
        pretrain=attrs.evolve(recipe.pretrain, batch_size=8, warmup=1),
        finetune={**recipe.finetune, "epochs": 1, "batch_size": 8},
    )


@pytest.mark.parametrize("modality", sorted(SMALL))
def test_build_writes_a_zoo_that_loads_back(modality, tmp_path):
    torch.set_num_threads(1)
    name, recipe = _toy(modality)
    task = recipe.world().transfer_tasks[0]
    build(recipe, tmp_path, [name], steps=2, corpus_size=16, tasks=[task], progress=False)
    manifest = read_manifest(tmp_path)
    entry = manifest["members"][name]
    assert manifest["world"] == modality and manifest["corpus_size"] == 16
    assert entry["steps"] == 2 and entry["pretrain"]["steps"] == 2 and entry["pretrain"]["loss"] == entry["loss"]
    assert set(entry["accuracy"]) == {task, *recipe.world().controls}
    dtypes = set()
    for path in Path(tmp_path, name).rglob("*.safetensors"):
        with safe_open(str(path), "pt") as fh:
            dtypes |= {fh.get_tensor(k).dtype for k in fh.keys() if fh.get_tensor(k).is_floating_point()}
    assert dtypes == ({torch.float16} if recipe.half else {torch.float32})
    models = load_models(tmp_path)
    assert list(models) == [name] and models[name].embed_dim == entry["embed_dim"]
    finetuned = load_finetunes(models, [task], tmp_path)
    pre, ft = dict(models[name].media_encoder.named_parameters()), dict(finetuned[(name, task)].media_encoder.named_parameters())
    assert any(not torch.equal(pre[k], ft[k]) for k in pre)


def test_unknown_member_is_named(tmp_path):
    with pytest.raises(PlatonicError, match="no-such-member"):
        main(["--modality", "audio", "--out", str(tmp_path), "--members", "no-such-member", "--stages", "finetune"])
