"""Image classification tasks from a folder tree on disk.

Two layouts: root/<class>/<image> (a seeded per-class train/test split), or root/train/<class>/...
and root/test/<class>/... (the given split; class names from the union of both). Images are decoded
to RGB PIL images when the task is built.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from PIL import Image, UnidentifiedImageError

from ..errors import PlatonicError
from ..tasks import DEFAULT_TEMPLATE, Split, Task
from .folders import class_name, scan_classes, stratified_split, subfolders

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")


def read_image(path: str | os.PathLike) -> Image.Image:
    """An RGB image from `path`; unreadable files raise PlatonicError naming the file."""
    try:
        with Image.open(path) as image:
            return image.convert("RGB")
    except (OSError, UnidentifiedImageError) as exc:
        raise PlatonicError(f"cannot read image {str(path)!r}: {exc}") from None


def image_folder_task(
    root: str | os.PathLike,
    name: str | None = None,
    templates: Sequence[str] = (DEFAULT_TEMPLATE,),
    test_fraction: float = 0.2,
    seed: int = 0,
) -> Task:
    """A task from root/<class>/*.png (seeded per-class split) or root/{train,test}/<class>/*.png."""
    root = Path(root)
    if not root.is_dir():
        raise PlatonicError(f"image folder {str(root)!r} does not exist")
    subdirs = subfolders(root)
    if {"train", "test"} <= set(subdirs):
        classes = sorted(set(subfolders(root / "train")) | set(subfolders(root / "test")))
        splits = [scan_classes(root / split, classes, IMAGE_SUFFIXES) for split in ("train", "test")]
        if not len(splits[0][0]) or not len(splits[1][0]):
            raise PlatonicError(f"{str(root)!r}: train/ and test/ both need images under <class>/ folders")
        train, test = (Split([read_image(p) for p in paths], labels) for paths, labels in splits)
    else:
        classes = subdirs
        paths, labels = scan_classes(root, classes, IMAGE_SUFFIXES)
        if not paths:
            raise PlatonicError(f"no images ({', '.join(IMAGE_SUFFIXES)}) under {str(root)!r}/<class>/")
        everything = Split([read_image(p) for p in paths], labels)
        train_ids, test_ids = stratified_split(labels, test_fraction, seed)
        train, test = everything.subset(train_ids), everything.subset(test_ids)
    return Task(name or root.name, [class_name(c) for c in classes], train, test, templates)
