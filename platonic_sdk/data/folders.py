"""Modality-neutral pieces of on-disk datasets: class-per-folder scans and seeded per-class splits."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import PlatonicError


def class_name(folder: str) -> str:
    """A folder name as a prompt-ready class name: "sea_lion" -> "sea lion"."""
    return folder.replace("_", " ").replace("-", " ").strip()


def subfolders(root: Path) -> list[str]:
    """Sorted names of the folders directly under `root`."""
    return sorted(d.name for d in root.iterdir() if d.is_dir())


def scan_classes(root: Path, classes: Sequence[str], suffixes: Sequence[str]) -> tuple[list[Path], np.ndarray]:
    """Files root/<class>/*<suffix> in class order (sorted within a class) and their class indices."""
    paths: list[Path] = []
    labels: list[int] = []
    for c, cls in enumerate(classes):
        folder = root / cls
        files = sorted(f for f in folder.iterdir() if f.suffix.lower() in suffixes) if folder.is_dir() else []
        paths.extend(files)
        labels.extend([c] * len(files))
    return paths, np.asarray(labels, dtype=np.int64)


def stratified_split(labels: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-class random split: round(test_fraction * n_c) items of each class go to test (at least one)."""
    if not 0.0 < test_fraction < 1.0:
        raise PlatonicError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == c))
        if len(members) < 2:
            raise PlatonicError(f"class {int(c)} has {len(members)} item(s): a train/test split needs two")
        k = min(max(1, round(test_fraction * len(members))), len(members) - 1)
        test.extend(members[:k].tolist())
        train.extend(members[k:].tolist())
    return np.sort(train), np.sort(test)
