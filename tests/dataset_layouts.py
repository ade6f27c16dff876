"""Builders of the on-disk layouts of real datasets, in a temporary folder: tiny images (or tones) whose
colour (pitch) encodes their class, with the files each torchvision `download=False` check looks for.

Every builder takes the classes to write (default: two of the dataset's own) and how many items of
each; tests of single loaders use the defaults, the paper-benchmark dry run the datasets' full label sets.
"""

from __future__ import annotations

import csv
import pickle
import struct
from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image

from platonic_sdk.data.audio import Waveform, write_audio

PALETTE = [(230, 20, 20), (20, 200, 30), (30, 40, 230), (240, 220, 20)]


def colour(c: int, side: int = 16) -> np.ndarray:
    return np.full((side, side, 3), PALETTE[c % len(PALETTE)], dtype=np.uint8)


def save(path: Path, c: int) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(colour(c)).save(path)
    return str(path)


def manifest(path: Path, rows, header=("path", "label", "split")) -> Path:
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows([header, *rows])
    return path


def eurosat(root: Path, classes: Sequence[str] = ("AnnualCrop", "Forest"), per_class: int = 3) -> None:
    for c, cls in enumerate(classes):
        for i in range(per_class):
            save(root / "eurosat" / "2750" / cls / f"{cls}_{i + 1}.jpg", c)


def dtd(root: Path, classes: Sequence[str] = ("banded", "bubbly")) -> None:
    """Four images per class: two train, one val, one test (partition 1)."""
    base = root / "dtd" / "dtd"
    lines = {"train": [], "val": [], "test": []}
    for c, cls in enumerate(classes):
        for i, split in enumerate(("train", "train", "val", "test")):
            save(base / "images" / cls / f"{cls}_{i:04d}.jpg", c)
            lines[split].append(f"{cls}/{cls}_{i:04d}.jpg")
    (base / "labels").mkdir()
    for split, rows in lines.items():
        (base / "labels" / f"{split}1.txt").write_text("\n".join(rows) + "\n")


def gtsrb(root: Path, train: Sequence[int] = (0, 0, 2, 2), test: Sequence[int] = (0, 2, 2)) -> None:
    """Train images in a folder per class number; the default leaves class 1 absent (labels still follow the number)."""
    base = root / "gtsrb"
    for i, c in enumerate(train):
        save(base / "GTSRB" / "Training" / f"{c:05d}" / f"00000_{i:05d}.ppm", c)
    rows = []
    for i, c in enumerate(test):
        save(base / "GTSRB" / "Final_Test" / "Images" / f"{i:05d}.ppm", c)
        rows.append(f"{i:05d}.ppm;16;16;0;0;15;15;{c}")
    (base / "GT-final_test.csv").write_text("Filename;Width;Height;Roi.X1;Roi.Y1;Roi.X2;Roi.Y2;ClassId\n" + "\n".join(rows) + "\n")


def idx(path: Path, array: np.ndarray, magic: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack(">I", magic) + b"".join(struct.pack(">I", n) for n in array.shape) + array.astype(np.uint8).tobytes())


def mnist(root: Path, train: Sequence[int] = (0, 1, 1, 0), test: Sequence[int] = (1, 0)) -> None:
    for prefix, labels in (("train", train), ("t10k", test)):
        images = np.stack([colour(c)[..., 0] for c in labels])  # grey levels: the palette's red channel
        idx(root / "MNIST" / "raw" / f"{prefix}-images-idx3-ubyte", images, 0x803)
        idx(root / "MNIST" / "raw" / f"{prefix}-labels-idx1-ubyte", np.asarray(labels), 0x801)


def svhn(root: Path, train: Sequence[int] = (1, 2, 2, 1), test: Sequence[int] = (2, 1)) -> None:
    """Labels as SVHN stores them: the digit 0 is 10."""
    from scipy.io import savemat

    root.mkdir(parents=True, exist_ok=True)
    for split, labels in (("train", train), ("test", test)):
        X = np.stack([colour(c, 32) for c in labels], axis=-1)
        savemat(str(root / f"{split}_32x32.mat"), {"X": X, "y": np.asarray(labels).reshape(-1, 1)})


def cifar100(root: Path, names: Sequence[str] | None = None, train: Sequence[int] = (0, 1, 1, 0), test: Sequence[int] = (1, 0)) -> None:
    base = root / "cifar-100-python"
    base.mkdir(parents=True)
    if names is None:
        names = [f"class_{i}" for i in range(100)]
        names[0], names[1] = "apple", "aquarium_fish"
    for split, labels in (("train", train), ("test", test)):
        data = np.stack([colour(c, 32).transpose(2, 0, 1).reshape(-1) for c in labels])
        (base / split).write_bytes(pickle.dumps({"data": data, "fine_labels": list(labels)}))
    (base / "meta").write_bytes(pickle.dumps({"fine_label_names": list(names), "coarse_label_names": ["x"]}))


def stanford_cars(root: Path, names: Sequence[str] = ("AM General Hummer SUV 2000", "Acura RL Sedan 2012"),
                  train: Sequence[int] = (1, 2, 2, 1), test: Sequence[int] = (2, 1)) -> None:
    """Labels as the devkit stores them: 1-based."""
    from scipy.io import savemat

    base = root / "stanford_cars"
    (base / "devkit").mkdir(parents=True)
    savemat(str(base / "devkit" / "cars_meta.mat"), {"class_names": np.array(list(names), dtype=object)})
    for split, file, labels in (("cars_train", base / "devkit" / "cars_train_annos.mat", train),
                                ("cars_test", base / "cars_test_annos_withlabels.mat", test)):
        annos = np.zeros(len(labels), dtype=[("fname", object), ("class", object)])
        for i, c in enumerate(labels):
            save(base / split / f"{i:05d}.jpg", c - 1)
            annos[i] = (f"{i:05d}.jpg", c)
        savemat(str(file), {"annotations": annos})


def sun397(root: Path, partition: bool, classes: Sequence[str] = ("a/abbey", "b/beach"), per_class: int = 3) -> None:
    """The last image of each class is a test image of partition 1 (written when `partition`)."""
    base = root / "SUN397"
    base.mkdir(parents=True)
    (base / "ClassName.txt").write_text("".join(f"/{rel}\n" for rel in classes))
    listed = {"Training": [], "Testing": []}
    for c, rel in enumerate(classes):
        for i in range(per_class):
            save(base / rel / f"sun_{c}{i}.jpg", c)
            listed["Testing" if i == per_class - 1 else "Training"].append(f"/{rel}/sun_{c}{i}.jpg")
    if partition:
        for kind, rows in listed.items():
            (base / f"{kind}_01.txt").write_text("\n".join(rows) + "\n")


def resisc45(root: Path, classes: Sequence[str] = ("airport", "baseball_diamond"), per_class: int = 3) -> None:
    for c, cls in enumerate(classes):
        for i in range(per_class):
            save(root / "NWPU-RESISC45" / cls / f"{cls}_{i + 1:03d}.jpg", c)


def imagenet_val(root: Path, synsets: Sequence[str] = ("n01440764 tench, Tinca tinca", "n01443537 goldfish, Carassius auratus"),
                 per_class: int = 3) -> None:
    """val/<wnid>/ folders and LOC_synset_mapping.txt with one `wnid names` line each."""
    for c, line in enumerate(synsets):
        for i in range(per_class):
            save(root / "val" / line.split()[0] / f"ILSVRC2012_val_{c}{i:07d}.JPEG", c)
    (root / "LOC_synset_mapping.txt").write_text("".join(f"{line}\n" for line in synsets))


# ------------------------------------------------------------------ audio
def tone(path: Path, hz: float) -> None:
    write_audio(path, Waveform(0.4 * np.sin(2 * np.pi * hz * np.arange(1600) / 16000), 16000))


def esc50(root: Path, categories: Sequence[str] = ("dog", "chirping_birds"), folds: int = 5) -> None:
    """One clip per category and fold, named as ESC-50 names them, listed in meta/esc50.csv."""
    rows = []
    for fold in range(1, folds + 1):
        for t, category in enumerate(categories):
            name = f"{fold}-{100 + t}-A-{t}.wav"
            tone(root / "audio" / name, 300 + 50 * t)
            rows.append((name, fold, t, category, "False", 100 + t, "A"))
    (root / "meta").mkdir()
    manifest(root / "meta" / "esc50.csv", rows, header=("filename", "fold", "target", "category", "esc10", "src_file", "take"))


def urbansound8k(root: Path, classes: Sequence[str] = ("siren", "drilling"), folds: int = 10) -> None:
    """One clip per class and fold in audio/fold<N>/, listed in metadata/UrbanSound8K.csv."""
    rows = []
    for fold in range(1, folds + 1):
        for c, cls in enumerate(classes):
            name = f"{fold}{c}-0-0-0.wav"
            tone(root / "audio" / f"fold{fold}" / name, 500 + 60 * c)
            rows.append((name, 1, 0.0, 1.0, 1, fold, c, cls))
    (root / "metadata").mkdir()
    manifest(root / "metadata" / "UrbanSound8K.csv", rows,
             header=("slice_file_name", "fsID", "start", "end", "salience", "fold", "classID", "class"))
