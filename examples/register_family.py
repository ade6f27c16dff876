"""Register a new encoder family from outside the package, then transfer a task edit into it.

The family "bagnet" is a small convolutional image tower ending in a linear projection, and a
bag-of-words text tower. Implementing `DualEncoder` (a dozen members) and one `register_family`
call is all the SDK needs: pretraining, descriptors, the closed form and edits then work unchanged.

    python examples/register_family.py          # pretrain bagnet on the image world (minutes), edit it
    python examples/register_family.py --ci     # a few steps (seconds)
"""

from __future__ import annotations

import argparse
import json
import os
import zlib
from pathlib import Path
from typing import Any, Sequence

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import safetensors.torch  # noqa: E402
import torch  # noqa: E402
from torch import Tensor, nn  # noqa: E402

import platonic_sdk as ps  # noqa: E402
from platonic_sdk.evaluate import accuracy  # noqa: E402
from platonic_sdk.evaluate.plan.settings import CellSettings  # noqa: E402
from platonic_sdk.worlds.image import ImageWorld  # noqa: E402
from platonic_sdk.worlds.registry import world_spec  # noqa: E402

DEFAULTS = {"width": 32, "embed_dim": 48, "buckets": 512, "seed": 0}


class BagNetModel(nn.Module):
    def __init__(self, width: int, embed_dim: int, buckets: int):
        super().__init__()
        self.media = nn.Sequential(
            nn.Conv2d(3, width, 3, stride=2, padding=1), nn.GELU(),
            nn.Conv2d(width, 2 * width, 3, stride=2, padding=1), nn.GELU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * width, 2 * width), nn.GELU(),
        )
        self.proj = nn.Linear(2 * width, embed_dim)  # the last affine map: z = W_p h + b_p
        self.words = nn.EmbeddingBag(buckets, 2 * width, mode="mean")
        self.text_proj = nn.Linear(2 * width, embed_dim)


class BagNet(ps.DualEncoder):
    """A DualEncoder over BagNetModel; the SDK only ever calls these members."""

    modality = "image"
    family = "bagnet"

    def __init__(self, config: dict[str, Any], checkpoint: str | None = None):
        self.config = {**DEFAULTS, **config}
        torch.manual_seed(self.config["seed"])
        self._model = BagNetModel(self.config["width"], self.config["embed_dim"], self.config["buckets"]).eval()
        self.checkpoint = checkpoint

    @property
    def embed_dim(self) -> int:
        return self.config["embed_dim"]

    @property
    def model(self) -> nn.Module:
        return self._model

    @property
    def media_encoder(self) -> nn.Module:
        return nn.ModuleDict({"trunk": self._model.media, "proj": self._model.proj})

    @property
    def lora_targets(self) -> list[str]:
        return ["trunk.7"]  # no attention here: the LoRA routes wrap the trunk's last linear

    def preprocess(self, items: Sequence[Any]) -> Tensor:
        """PIL images or H x W x 3 uint8 arrays -> a float batch in [-1, 1]."""
        arrays = [np.asarray(item.convert("RGB") if hasattr(item, "convert") else item, dtype=np.float32) for item in items]
        pixels = np.stack(arrays) / 127.5 - 1.0
        return torch.from_numpy(pixels).permute(0, 3, 1, 2).to(self.device)

    def embed_media(self, batch: Tensor) -> Tensor:
        return self._model.proj(self._model.media(batch))

    def embed_text(self, texts: Sequence[str]) -> Tensor:
        ids, offsets = [], []
        for text in texts:
            offsets.append(len(ids))
            ids.extend(zlib.crc32(w.encode()) % self.config["buckets"] for w in text.lower().strip(".").split())
        bag = self._model.words(torch.tensor(ids, device=self.device), torch.tensor(offsets, device=self.device))
        return self._model.text_proj(bag)

    def last_affine(self) -> ps.AffineSite:
        proj = self._model.proj
        return ps.AffineSite(kind="projection", weight=proj.weight, bias=proj.bias, layout="out_in")

    def save(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)
        safetensors.torch.save_file(self._model.state_dict(), os.path.join(path, "weights.safetensors"))
        Path(path, "config.json").write_text(json.dumps({"family": self.family, **self.config}))


def load_bagnet(checkpoint: str | None, **options: Any) -> BagNet:
    folder = Path(checkpoint or "")
    if not (folder / "config.json").is_file():
        raise ps.CheckpointError(f"no bagnet checkpoint at {checkpoint!r} (needs config.json and weights.safetensors)")
    config = json.loads((folder / "config.json").read_text())
    if config.pop("family", None) != "bagnet":
        raise ps.CheckpointError(f"{checkpoint} is not a bagnet checkpoint")
    encoder = BagNet(config, checkpoint=str(folder))
    encoder.model.load_state_dict(safetensors.torch.load_file(str(folder / "weights.safetensors")))
    return encoder


def bagnet_from_config(config: dict[str, Any] | None = None, **options: Any) -> BagNet:
    return BagNet({**(config or {}), **options})


ps.register_family(ps.FamilySpec("bagnet", "image", None, load_bagnet, bagnet_from_config, "example: conv tower + bag of words"))


def source_and_finetune(world: ImageWorld, task: str, ci: bool):
    """A CLIP-family source and its fine-tune on `task` (tiny and two steps with --ci; else the shipped zoo)."""
    if ci:
        from platonic_sdk.finetune import FinetuneConfig, finetune

        source = ps.from_config("clip", seed=0)
        return source, finetune(source, world.task(task), FinetuneConfig(max_steps=2, lr=1e-3, batch_size=16), progress=False).encoder
    from platonic_sdk.worlds import zoo

    models = zoo.load_models(names=["clip"])
    return models["clip"], zoo.load_finetunes(models, [task])[("clip", task)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ci", action="store_true", help="a few pretraining steps on a tiny corpus (seconds)")
    parser.add_argument("--out", default="out/register_family", help="output folder")
    parser.add_argument("--steps", type=int, default=800, help="pretraining steps of the new family")
    args = parser.parse_args()
    from platonic_sdk.worlds.pretrain import PretrainConfig, pretrain

    print("registered families:", ", ".join(ps.list_families("image")))
    world = ImageWorld(train_per_class=4, test_per_class=3) if args.ci else ImageWorld()
    target = ps.from_config("bagnet", {"width": 16 if args.ci else 32})
    images, captions = world.corpus(64 if args.ci else 20_000)
    steps = 3 if args.ci else args.steps
    losses = pretrain(target, images, captions, PretrainConfig(steps=steps, batch_size=32 if args.ci else 128, warmup=1 if args.ci else 50), progress=not args.ci)
    print(f"pretrained bagnet for {steps} steps: loss {losses[0]:.3f} -> {losses[-1]:.3f}")

    task_name = world.trio[0]
    task = world.task(task_name)
    source, tuned = source_and_finetune(world, task_name, args.ci)
    grid = task.grid(per_class=2 if args.ci else 30)
    utd = ps.UTD.compute(source, tuned, grid)
    image = world_spec("image").settings()  # the image world's tuned ridges and the default strength
    bank = ps.OperatorBank(target, image.ridge_a, image.ridge_b)
    bank.add_grid(grid)
    edit = bank.edit(utd, strength=CellSettings().addition_strength)
    before = accuracy(target, task)
    with edit.applied_to(target):
        after = accuracy(target, task)
    print(f"{task_name} on bagnet: zero-shot {before:.2f} -> with clip's descriptor {after:.2f}")

    target.save(str(Path(args.out) / "bagnet"))
    again = ps.load("bagnet", str(Path(args.out) / "bagnet"))  # through the registry, like any family
    assert accuracy(again, task) == before
    print(f"saved and reloaded {again!r} from {Path(args.out) / 'bagnet'}")


if __name__ == "__main__":
    main()
