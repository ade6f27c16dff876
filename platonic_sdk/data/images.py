"""Image classification tasks from a folder tree on disk.

Two layouts: root/<class>/<image> (a seeded per-class train/test split), or root/train/<class>/...
and root/test/<class>/... (the given split; class names from the union of both). A split holds
`ImageFile` references; each image is decoded to RGB when a batch needs it.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Sequence

from PIL import Image, UnidentifiedImageError

from ..errors import PlatonicError
from ..items import FileRef, Items
from ..tasks import DEFAULT_TEMPLATE, Split, Task
from .folders import check_class_names, scan_classes, stratified_split, subfolders

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")


@contextlib.contextmanager
def opened_image(path: str | os.PathLike) -> Iterator[Image.Image]:
    """The image at `path`, opened (header read, pixels not yet decoded); unreadable files and
    decompression bombs raise PlatonicError naming the file, here or while the block decodes.

    A bomb is an image of more than `PIL.Image.MAX_IMAGE_PIXELS` pixels (raise that limit for files you trust).
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                yield image
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as exc:
        raise PlatonicError(f"image {str(path)!r} looks like a decompression bomb: {exc}") from None
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError) as exc:
        raise PlatonicError(f"cannot read image {str(path)!r}: {exc}") from None


def read_image(path: str | os.PathLike) -> Image.Image:
    """An RGB image from `path` (errors as `opened_image`)."""
    with opened_image(path) as image:
        return image.convert("RGB")


class ImageFile(FileRef):
    """An image file, decoded to an RGB PIL image on demand."""

    def load(self) -> Image.Image:
        return read_image(self.path)


def image_files(paths: Sequence[str | os.PathLike], verify: bool = True) -> Items:
    """References to image files; `verify` reads each header now (about 5 % of a decode) so that an
    unreadable file or a decompression bomb is refused when the dataset is loaded."""
    if verify:
        for path in paths:
            with opened_image(path):
                pass
    return Items([ImageFile(p) for p in paths])


def image_folder_task(
    root: str | os.PathLike,
    name: str | None = None,
    templates: Sequence[str] = (DEFAULT_TEMPLATE,),
    test_fraction: float = 0.2,
    seed: int = 0,
    verify: bool = True,
) -> Task:
    """A task from root/<class>/*.png (seeded per-class split) or root/{train,test}/<class>/*.png.

    `verify`: read every image's header now (see `image_files`).
    """
    root = Path(root)
    if not root.is_dir():
        raise PlatonicError(f"image folder {str(root)!r} does not exist")
    subdirs = subfolders(root)
    if {"train", "test"} <= set(subdirs):
        classes = sorted(set(subfolders(root / "train")) | set(subfolders(root / "test")))
        names = check_class_names(classes, str(root))
        splits = [scan_classes(root / split, classes, IMAGE_SUFFIXES, root) for split in ("train", "test")]
        if not len(splits[0][0]) or not len(splits[1][0]):
            raise PlatonicError(f"{str(root)!r}: train/ and test/ both need images under <class>/ folders")
        train, test = (Split(image_files(paths, verify), labels) for paths, labels in splits)
    else:
        classes = subdirs
        names = check_class_names(classes, str(root))
        paths, labels = scan_classes(root, classes, IMAGE_SUFFIXES)
        if not paths:
            raise PlatonicError(f"no images ({', '.join(IMAGE_SUFFIXES)}) under {str(root)!r}/<class>/")
        everything = Split(image_files(paths, verify), labels)
        train_ids, test_ids = stratified_split(labels, test_fraction, seed, [str(root / c) for c in classes])
        train, test = everything.subset(train_ids), everything.subset(test_ids)
    return Task(name or root.name, names, train, test, templates)
