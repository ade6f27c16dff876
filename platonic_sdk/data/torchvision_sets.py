"""Image datasets that researchers keep on disk in torchvision's layouts, as tasks (nothing is downloaded).

`torchvision_task(name, root)` reads DATASET under `root` as torchvision's `download=False` finds it, with
the dataset's official train/test split where it has one (a seeded per-class split otherwise) and the
authors' template for the task (docs/method.md sec. 1). File-backed sets hold `ImageFile` references;
array-backed sets (MNIST, SVHN, CIFAR-100) hold `items.Row` references into their one array.

EuroSAT, DTD, GTSRB, MNIST, StanfordCars and SUN397 are read through torchvision's own classes (their
file lists and labels, never their images). SVHN and CIFAR-100 are read from the same files directly:
torchvision checks them against the official MD5 sums, and CIFAR's pickles are read with an unpickler
that builds only plain containers and numpy arrays. RESISC45 (not in torchvision) and an ImageNet
validation folder are read from their usual class-folder layouts.
"""

from __future__ import annotations

import os
import pickle
import re
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Sequence

import attrs
import numpy as np
from PIL import Image

from ..errors import LayoutError, PlatonicError
from ..items import Items, Row, file_stamp
from ..tasks import DEFAULT_TEMPLATE, Task
from .folders import check_class_names, class_key, scan_classes, split_task, subfolders
from .images import IMAGE_SUFFIXES, image_files
from .paper_prompts import DIGITS, GTSRB_NAMES, TEMPLATES

__all__ = ["DATASETS", "ArrayRows", "torchvision_task"]


class ArrayRows:
    """Images stacked in one array (n x H x W [x 3], uint8) read from `path`: a `RowTable` of PIL images."""

    def __init__(self, path: str | os.PathLike, array: np.ndarray):
        self.path, self.array = str(path), array

    def name(self, index: int) -> str:
        return f"{self.path}#{index}"

    def cell(self, index: int) -> bytes:
        return np.ascontiguousarray(self.array[index]).tobytes()

    def stamp(self, index: int) -> str:
        return f"{file_stamp(self.path)}#{index}"

    def decode(self, index: int) -> Image.Image:
        return Image.fromarray(np.asarray(self.array[index]))  # L (MNIST) or RGB, as torchvision gives them


def array_items(path: str | os.PathLike, array: np.ndarray) -> Items:
    rows = ArrayRows(path, array)
    return Items([Row(rows, i) for i in range(len(array))])


@attrs.frozen
class Loaded:
    """What a reader found: class names, items, labels and (for an official split) the test mask."""

    classnames: list[str]
    items: Items
    labels: np.ndarray = attrs.field(converter=lambda v: np.asarray(v, dtype=np.int64))
    is_test: np.ndarray | None = None


@attrs.frozen
class Dataset:
    """One dataset on disk: how to read it, the layout it expects under DIR, and its prompt template."""

    read: Callable[[Path, bool], Loaded]
    layout: str
    template: str = DEFAULT_TEMPLATE


def _tv(cls_name: str, *args: Any, **kwargs: Any) -> Any:
    import torchvision.datasets as tvd

    return getattr(tvd, cls_name)(*args, download=False, **kwargs)


def _official(train: tuple[list, list], test: tuple[list, list], classnames: list[str], verify: bool) -> Loaded:
    """Loaded from per-split (paths, labels)."""
    paths, labels = train[0] + test[0], list(train[1]) + list(test[1])
    mask = np.r_[np.zeros(len(train[0]), bool), np.ones(len(test[0]), bool)]
    return Loaded(classnames, image_files(paths, verify), labels, mask)


def _words(name: str) -> str:
    """CamelCase and snake_case folder names as words: "AnnualCrop" -> "annual crop"."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name).replace("_", " ").lower()


def _eurosat(root: Path, verify: bool) -> Loaded:
    ds = _tv("EuroSAT", str(root))
    paths, labels = zip(*ds.samples)
    return Loaded([_words(c) for c in ds.classes], image_files(paths, verify), labels)


def _dtd(root: Path, verify: bool) -> Loaded:
    train, test = _tv("DTD", str(root), split="train"), _tv("DTD", str(root), split="test")
    if train.classes != test.classes:
        raise PlatonicError(f"DTD under {str(root)!r}: train1.txt and test1.txt list different classes")
    return _official((train._image_files, train._labels), (test._image_files, test._labels), [_words(c) for c in train.classes], verify)


def _gtsrb(root: Path, verify: bool) -> Loaded:
    train, test = _tv("GTSRB", str(root), split="train"), _tv("GTSRB", str(root), split="test")
    train_paths = [p for p, _ in train._samples]  # the class is the folder's number (torchvision counts the folders present)
    return _official((train_paths, [int(Path(p).parent.name) for p in train_paths]), tuple(map(list, zip(*test._samples))), list(GTSRB_NAMES), verify)


def _split_arrays(classnames: list[str], parts: Sequence[tuple[str, np.ndarray, np.ndarray]]) -> Loaded:
    """Loaded from (path, images, labels) of the train then the test file."""
    refs, labels, mask = [], [], []
    for k, (path, images, ys) in enumerate(parts):
        refs.extend(array_items(path, images).refs)
        labels.extend(np.asarray(ys).tolist())
        mask.extend([k == 1] * len(ys))
    return Loaded(classnames, Items(refs), labels, np.asarray(mask))


def _mnist(root: Path, verify: bool) -> Loaded:
    parts = []
    for train in (True, False):
        ds = _tv("MNIST", str(root), train=train)
        parts.append((os.path.join(ds.raw_folder, ("train" if train else "t10k") + "-images-idx3-ubyte"), ds.data.numpy(), ds.targets.numpy()))
    return _split_arrays(list(DIGITS), parts)


def _svhn(root: Path, verify: bool) -> Loaded:
    from scipy.io import loadmat

    parts = []
    for split in ("train", "test"):
        path = root / f"{split}_32x32.mat"
        if not path.is_file():
            raise FileNotFoundError(path)
        mat = loadmat(str(path))
        labels = mat["y"].astype(np.int64).reshape(-1) % 10  # SVHN labels the digit 0 as 10
        parts.append((str(path), np.ascontiguousarray(np.transpose(mat["X"], (3, 0, 1, 2))), labels))
    return _split_arrays(list(DIGITS), parts)


class _ArraysOnly(pickle.Unpickler):
    """Unpickles plain containers, strings, numbers and numpy arrays; any other global is refused."""

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
        ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"), ("_codecs", "encode"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.ALLOWED:
            raise PlatonicError(f"refusing to unpickle {module}.{name}: a CIFAR file holds only arrays, lists and strings")
        return super().find_class(module, name)


def _cifar_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise FileNotFoundError(path)
    with path.open("rb") as handle:
        return _ArraysOnly(handle, encoding="latin1").load()


def _cifar100(root: Path, verify: bool) -> Loaded:
    base = root / "cifar-100-python"
    names = [_words(n) for n in _cifar_file(base / "meta")["fine_label_names"]]
    parts = []
    for split in ("train", "test"):
        entry = _cifar_file(base / split)
        images = np.asarray(entry["data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        parts.append((str(base / split), np.ascontiguousarray(images), np.asarray(entry["fine_labels"])))
    return _split_arrays(names, parts)


def _stanford_cars(root: Path, verify: bool) -> Loaded:
    train, test = _tv("StanfordCars", str(root), split="train"), _tv("StanfordCars", str(root), split="test")
    return _official(tuple(map(list, zip(*train._samples))), tuple(map(list, zip(*test._samples))), [str(c) for c in train.classes], verify)


def _sun397(root: Path, verify: bool) -> Loaded:
    ds = _tv("SUN397", str(root))
    names = [_words(c.replace("/", " ")) for c in ds.classes]
    order = np.argsort([str(p) for p in ds._image_files], kind="stable")  # rglob order is the file system's
    paths, labels = [str(ds._image_files[i]) for i in order], [ds._labels[i] for i in order]
    partition = [ds._data_dir / f"{kind}_01.txt" for kind in ("Training", "Testing")]
    is_test = None
    if all(p.is_file() for p in partition):  # the official partition 1, when it is kept next to the images
        listed = [{line.strip().lstrip("/") for line in p.read_text().splitlines() if line.strip()} for p in partition]
        rel = [str(Path(p).relative_to(ds._data_dir)) for p in paths]
        keep = [i for i, r in enumerate(rel) if r in listed[0] or r in listed[1]]
        paths, labels, is_test = [paths[i] for i in keep], [labels[i] for i in keep], np.asarray([rel[i] in listed[1] for i in keep])
    return Loaded(names, image_files(paths, verify), labels, is_test)


def _class_folders(folder: Path, names: Callable[[list[str]], list[str]], verify: bool) -> Loaded:
    if not folder.is_dir() or not (classes := subfolders(folder)):
        raise FileNotFoundError(folder)
    paths, labels = scan_classes(folder, classes, IMAGE_SUFFIXES)
    return Loaded(names(classes), image_files(paths, verify), labels)


def _resisc45(root: Path, verify: bool) -> Loaded:
    folder = root if root.name == "NWPU-RESISC45" else root / "NWPU-RESISC45"
    return _class_folders(folder, lambda cs: [_words(c) for c in cs], verify)


SYNSET_FILES = ("LOC_synset_mapping.txt", "synset_words.txt")
ILSVRC_CLASSES = 1000


def bundled_imagenet_names() -> tuple[str, ...]:
    """The 1000 ILSVRC class names in sorted-wnid order: open_clip's curated (CLIP) names, except where two classes
    share one (missile, sunglasses): those take torchvision's ImageNet category names."""
    from open_clip.zero_shot_metadata import IMAGENET_CLASSNAMES
    from torchvision.models import ResNet50_Weights

    plain = ResNet50_Weights.IMAGENET1K_V1.meta["categories"]  # shipped with torchvision, nothing is downloaded
    shared = Counter(class_key(n) for n in IMAGENET_CLASSNAMES)
    return tuple(p if shared[class_key(c)] > 1 else c for c, p in zip(IMAGENET_CLASSNAMES, plain))


def _imagenet_val(root: Path, verify: bool) -> Loaded:
    """Class names: classnames.txt, else the bundled names for the 1000 ILSVRC folders, else the first synonym
    of each wnid in the synset mapping."""
    folder = root / "val" if (root / "val").is_dir() else root
    custom = root / "classnames.txt"
    mapping_file = next((root / f for f in SYNSET_FILES if (root / f).is_file()), None)
    bundled = bundled_imagenet_names() if not custom.is_file() and len(subfolders(folder)) == ILSVRC_CLASSES else None
    if mapping_file is None and not custom.is_file() and bundled is None:  # not the 1000 ILSVRC folders
        raise FileNotFoundError(root / SYNSET_FILES[0])

    def names(wnids: list[str]) -> list[str]:
        if custom.is_file():  # one name per line, in the order of the wnids in the mapping (or of the sorted folders)
            given = [line.strip() for line in custom.read_text(encoding="utf-8").splitlines() if line.strip()]
            order = [line.split()[0] for line in mapping_file.read_text().splitlines() if line.strip()] if mapping_file else sorted(wnids)
            table = dict(zip(order, given))
        elif bundled is not None:
            table = dict(zip(sorted(wnids), bundled))
        else:
            table = {}
            for line in mapping_file.read_text(encoding="utf-8").splitlines():
                wnid, _, words = line.strip().partition(" ")
                table[wnid] = words.split(",")[0].strip()
        missing = [w for w in wnids if w not in table]
        if missing:
            raise PlatonicError(f"ImageNet under {str(root)!r}: no class name for folder(s) {missing[:5]}")
        return [table[w] for w in wnids]

    return _class_folders(folder, names, verify)


DATASETS: dict[str, Dataset] = {
    "eurosat": Dataset(_eurosat, "DIR/eurosat/2750/<class>/*.jpg", TEMPLATES["eurosat"]),
    "dtd": Dataset(_dtd, "DIR/dtd/dtd/images/<class>/*.jpg with DIR/dtd/dtd/labels/train1.txt and test1.txt", TEMPLATES["dtd"]),
    "gtsrb": Dataset(_gtsrb, "DIR/gtsrb/GTSRB/Training/<00000..00042>/*.ppm, DIR/gtsrb/GTSRB/Final_Test/Images/*.ppm and DIR/gtsrb/GT-final_test.csv",
                     TEMPLATES["gtsrb"]),
    "mnist": Dataset(_mnist, "DIR/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte", TEMPLATES["mnist"]),
    "svhn": Dataset(_svhn, "DIR/train_32x32.mat and DIR/test_32x32.mat", TEMPLATES["svhn"]),
    "cifar100": Dataset(_cifar100, "DIR/cifar-100-python/{train,test,meta}"),
    "stanford_cars": Dataset(_stanford_cars, "DIR/stanford_cars/{cars_train,cars_test}/*.jpg, DIR/stanford_cars/devkit/{cars_meta,cars_train_annos}.mat "
                             "and DIR/stanford_cars/cars_test_annos_withlabels.mat"),
    "sun397": Dataset(_sun397, "DIR/SUN397/ClassName.txt and DIR/SUN397/<letter>/<class>/sun_*.jpg (optionally Training_01.txt, Testing_01.txt)"),
    "resisc45": Dataset(_resisc45, "DIR/NWPU-RESISC45/<class>/*.jpg", TEMPLATES["resisc45"]),
    "imagenet_val": Dataset(_imagenet_val, "DIR/val/<wnid>/*.JPEG with DIR/LOC_synset_mapping.txt (or synset_words.txt, or classnames.txt; "
                                          "none needed for the 1000 ILSVRC folders)"),
}
ALIASES = {"cifar-100": "cifar100", "cars": "stanford_cars", "stanfordcars": "stanford_cars", "imagenet": "imagenet_val", "nwpu-resisc45": "resisc45"}


def torchvision_task(
    name: str,
    root: str | os.PathLike,
    task_name: str | None = None,
    templates: Sequence[str] | None = None,
    classnames: Sequence[str] | None = None,
    test_fraction: float = 0.2,
    seed: int = 0,
    verify: bool = True,
) -> Task:
    """Dataset `name` (see DATASETS) under `root` as a Task named `task_name` (default: the dataset's name).

    Official splits where the dataset has one (DTD partition 1, GTSRB, MNIST, SVHN, CIFAR-100,
    StanfordCars, SUN397 with its partition files); otherwise a seeded per-class split. `classnames`
    replaces the dataset's names (one per class, in its order); `templates` its template.
    A folder in another layout is refused with the layout that was expected.
    """
    key = ALIASES.get(name.lower(), name.lower())
    if key not in DATASETS:
        raise PlatonicError(f"unknown torchvision dataset {name!r}; known: {', '.join(DATASETS)}")
    spec, root = DATASETS[key], Path(root)
    try:
        loaded = spec.read(root, verify)
    except (RuntimeError, FileNotFoundError, KeyError, IndexError, ValueError) as exc:
        if isinstance(exc, PlatonicError):
            raise
        raise LayoutError(f"{key} under {str(root)!r} is not in the expected layout {spec.layout} ({type(exc).__name__}: {exc})") from None
    names = list(classnames) if classnames is not None else loaded.classnames
    if len(names) != len(loaded.classnames):
        raise PlatonicError(f"{key} has {len(loaded.classnames)} classes, got {len(names)} class names")
    names = check_class_names(names, f"{key} under {str(root)!r}")
    return split_task(task_name or key, names, loaded.items, loaded.labels, tuple(templates or (spec.template,)),
                      loaded.is_test, test_fraction, seed)
