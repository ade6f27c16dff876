"""Image items and image classification tasks from a folder tree on disk.

An image item is a PIL image (modes in `IMAGE_MODES`), an H x W x 3 (or H x W) uint8 array, or a
3 x H x W (or 1 x H x W) uint8 tensor; `as_image` turns each into a PIL image in its own mode, and
the family's own processor converts that to RGB as its native library does (transformers composites
transparency onto white, open_clip drops it).

Two folder layouts: root/<class>/<image> (a seeded per-class train/test split), or root/train/<class>/...
and root/test/<class>/... (the given split; class names from the union of both). A split holds
`ImageFile` references; each image is decoded (in its own mode) when a batch needs it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, IO, Any, Sequence

import numpy as np
from PIL import Image, UnidentifiedImageError

from ..errors import PlatonicError, ShapeError
from ..items import FileRef, Items
from ..tasks import DEFAULT_TEMPLATE, Split, Task
from .folders import check_class_names, check_files, read_table, scan_classes, split_task, subfolders

if TYPE_CHECKING:
    import torch

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm")
# 8-bit modes that both transformers and open_clip convert to RGB (deeper or other colour spaces are refused).
IMAGE_MODES = ("RGB", "RGBA", "L", "LA", "P", "PA", "1")
_ARRAY_MODES = {1: "L", 3: "RGB", 4: "RGBA"}  # channels -> PIL mode


def _from_pixels(array: np.ndarray, where: str, layout: str) -> Image.Image:
    """An H x W (x C) uint8 array as a PIL image."""
    if array.dtype != np.uint8:
        raise ShapeError(f"{where}: image pixels must be uint8 (0-255), got {array.dtype}; scale float images first")
    if array.ndim == 3 and array.shape[-1] in _ARRAY_MODES:
        return Image.fromarray(np.ascontiguousarray(array if array.shape[-1] > 1 else array[..., 0]),
                               _ARRAY_MODES[array.shape[-1]])
    if array.ndim == 2:
        return Image.fromarray(np.ascontiguousarray(array), "L")
    raise ShapeError(f"{where}: expected {layout}, got shape {tuple(array.shape)}")


def as_image(item: Any, where: str = "image item") -> Image.Image:
    """An image item as a PIL image in its own mode (see the module docstring for what is accepted)."""
    if isinstance(item, Image.Image):
        if item.mode not in IMAGE_MODES:
            raise ShapeError(
                f"{where}: PIL mode {item.mode!r} is not supported (supported: {', '.join(IMAGE_MODES)}); "
                "convert it first, e.g. image.convert('RGB')"
            )
        return item
    if _is_tensor(item):
        if item.ndim != 3 or item.shape[0] not in (1, 3, 4):
            raise ShapeError(f"{where}: a tensor image must be C x H x W with C in 1, 3, 4, got {tuple(item.shape)}")
        return _from_pixels(item.detach().cpu().permute(1, 2, 0).numpy(), where, "C x H x W")
    if isinstance(item, np.ndarray):
        return _from_pixels(item, where, "an H x W x 3 (channels-last) array")
    raise ShapeError(
        f"{where}: expected a PIL image, an H x W x 3 uint8 array or a 3 x H x W uint8 tensor, got {type(item).__name__}"
    )


def _is_tensor(item: Any) -> bool:
    """Whether `item` is a torch tensor (none can exist before torch is imported, so this never imports it)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(item, torch.Tensor)


def as_images(items: Sequence[Any] | np.ndarray | "torch.Tensor") -> list[Image.Image]:
    """A batch of image items (or one n x H x W x 3 array / n x 3 x H x W tensor) as PIL images."""
    if (isinstance(items, np.ndarray) or _is_tensor(items)) and items.ndim == 4:
        items = list(items)
    images = [as_image(item, f"image item {i}") for i, item in enumerate(items)]
    if not images:
        raise ShapeError("no images to preprocess")
    return images


@contextlib.contextmanager
def opened_image(source: str | os.PathLike | IO[bytes], name: str | None = None) -> Iterator[Image.Image]:
    """The image at path `source` (or in the open binary file `source`, called `name`), opened: header read,
    pixels not yet decoded. Unreadable images and decompression bombs raise PlatonicError naming the file,
    here or while the block decodes.

    A bomb is an image of more than `PIL.Image.MAX_IMAGE_PIXELS` pixels (raise that limit for files you trust).
    """
    label = name if name is not None else str(source)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(source) as image:
                yield image
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as exc:
        raise PlatonicError(f"image {label!r} looks like a decompression bomb: {exc}") from None
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError) as exc:
        raise PlatonicError(f"cannot read image {label!r}: {exc}") from None


def read_image(path: str | os.PathLike | IO[bytes], name: str | None = None) -> Image.Image:
    """The image at `path` (or in an open binary file called `name`), decoded in its own mode (RGB when that
    mode is not in `IMAGE_MODES`); errors as `opened_image`."""
    with opened_image(path, name) as image:
        image.load()
        return image if image.mode in IMAGE_MODES else image.convert("RGB")


class ImageFile(FileRef):
    """An image file, decoded to a PIL image (by `read_image`) on demand."""

    def load(self) -> Image.Image:
        return read_image(self.path)


def image_files(paths: Sequence[str | os.PathLike], verify: bool = True) -> Items:
    """References to image files; `verify` reads each header now (about 5 % of a decode) so that an
    unreadable file or a decompression bomb is refused when the dataset is loaded."""
    if verify:
        check_files(paths, _readable, "image files")
    return Items([ImageFile(p) for p in paths])


def _readable(path: str | os.PathLike) -> None:
    with opened_image(path):
        pass


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
        return split_task(name or root.name, names, image_files(paths, verify), labels, templates, None, test_fraction, seed,
                          [str(root / c) for c in classes])
    return Task(name or root.name, names, train, test, templates)


TRAIN_VALUES, TEST_VALUES = ("train", "training"), ("test", "testing", "val", "validation")


def image_manifest_task(
    manifest: str | os.PathLike,
    name: str | None = None,
    root: str | os.PathLike | None = None,
    path_column: str = "path",
    label_column: str = "label",
    split_column: str = "split",
    templates: Sequence[str] = (DEFAULT_TEMPLATE,),
    test_fraction: float = 0.2,
    seed: int = 0,
    verify: bool = True,
) -> Task:
    """A task from a CSV manifest of images: path, label and an optional split column (train/test).

    Paths are relative to `root` (default: the manifest's folder) and must stay under it. Without a
    split column, a seeded per-class split; with one, each row's split (train or test; val counts as test).
    """
    table = read_table(manifest, root, "{" + path_column + "}", label_column)
    is_test = None
    if split_column in table.rows[0]:
        values = [row[split_column].strip().lower() for row in table.rows]
        strange = sorted(set(values) - set(TRAIN_VALUES) - set(TEST_VALUES))
        if strange:
            raise PlatonicError(f"manifest {str(manifest)!r} column {split_column!r}: values {strange} are neither train nor test")
        is_test = np.asarray([v in TEST_VALUES for v in values])
    return split_task(name or Path(manifest).stem, table.classnames, image_files(table.paths, verify), table.labels, templates,
                      is_test, test_fraction, seed)
