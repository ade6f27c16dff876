"""Hugging Face `datasets` on disk as tasks: a `save_to_disk` folder, or parquet files (no hub access).

Rows are referenced, not decoded: a row (`items.Row` of a `DatasetColumn`) reads its cell's stored bytes from the memory-mapped
Arrow table and decodes them on demand (images with Pillow, audio with soundfile), so the checks of
`read_image` / `read_audio` apply (decompression bombs, truncated WAVs), naming the row.
Needs the optional `datasets` package (`pip install platonic_sdk[hf]`).
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import PlatonicError
from ..items import Items, Row
from ..tasks import DEFAULT_TEMPLATE, Task
from .audio import AUDIO_TEMPLATE, decode_audio
from .folders import check_class_names, split_task
from .images import read_image

__all__ = ["DatasetColumn", "hf_task"]

LAYOUT = "a `save_to_disk` folder (dataset_dict.json or state.json), a .parquet file, or a folder of *.parquet files named by split (train*, test*)"


class DatasetColumn:
    """One media column of one split of a dataset, read undecoded (the cells' bytes or paths): a `RowTable`."""

    def __init__(self, source: str, split: str, dataset: Any, column: str, kind: str):
        from datasets import Audio, Image

        self.source, self.split, self.column, self.kind = source, split, column, kind
        feature = dataset.features[column]
        raw = Image(decode=False) if isinstance(feature, Image) else Audio(decode=False) if isinstance(feature, Audio) else None
        self.dataset = dataset.cast_column(column, raw) if raw is not None else dataset
        self.base = Path(source) if Path(source).is_dir() else Path(source).parent
        self.fingerprint = str(getattr(dataset, "_fingerprint", ""))  # datasets' own hash of the table's content and history

    def cell(self, index: int) -> bytes:
        """The stored bytes of row `index` (embedded bytes, or the file a relative path names)."""
        value = self.dataset[int(index)][self.column]
        if isinstance(value, dict):
            value = value.get("bytes") or value.get("path")
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        if isinstance(value, str):
            return (self.base / value).read_bytes()
        raise PlatonicError(f"{self.name(index)}: column {self.column!r} holds {type(value).__name__}, not encoded {self.kind} bytes")

    def name(self, index: int) -> str:
        return f"{self.source}[{self.split}][{int(index)}]"

    def stamp(self, index: int) -> str:
        return f"{self.fingerprint}|{self.name(index)}"

    def decode(self, index: int) -> Any:
        """Row `index` as a PIL image (in its own mode) or a Waveform, with `read_image`'s and `read_audio`'s checks."""
        data = self.cell(index)
        if self.kind == "audio":
            return decode_audio(data, self.name(index))
        return read_image(io.BytesIO(data), self.name(index))


def _load(path: Path, cache_dir: str | None) -> dict[str, Any]:
    """{split: Dataset} of a save_to_disk folder or of parquet files."""
    try:
        import datasets
    except ImportError:
        raise PlatonicError("reading Hugging Face datasets needs the `datasets` package: pip install 'platonic_sdk[hf]'") from None
    if (path / "dataset_dict.json").is_file() or (path / "state.json").is_file():
        loaded = datasets.load_from_disk(str(path))
        return dict(loaded) if isinstance(loaded, datasets.DatasetDict) else {"all": loaded}
    files = [path] if path.is_file() and path.suffix == ".parquet" else sorted(path.rglob("*.parquet")) if path.is_dir() else []
    if not files:
        raise PlatonicError(f"{str(path)!r} is not a Hugging Face dataset on disk: expected {LAYOUT}")
    by_split: dict[str, list[str]] = {}
    for f in files:
        split = next((s for s in ("train", "test", "validation") if f.stem.startswith(s) or f.parent.name == s), "all")
        by_split.setdefault(split, []).append(str(f))
    return {s: datasets.Dataset.from_parquet(fs, cache_dir=cache_dir) for s, fs in by_split.items()}


def _media_column(dataset: Any, image_column: str | None, audio_column: str | None, where: str) -> tuple[str, str]:
    from datasets import Audio, Image

    columns = list(dataset.features)
    for column, kind in ((image_column, "image"), (audio_column, "audio")):
        if column is not None:
            if column not in columns:
                raise PlatonicError(f"{where} has no {kind} column {column!r} (columns: {', '.join(columns)})")
            return column, kind
    found = [(c, "image" if isinstance(f, Image) else "audio") for c, f in dataset.features.items() if isinstance(f, (Image, Audio))]
    if len(found) != 1:
        raise PlatonicError(f"{where}: name the media column with image_column= or audio_column= (columns: {', '.join(columns)})")
    return found[0]


def _classes(datasets_: dict[str, Any], label_column: str, classnames: Sequence[str] | None, where: str) -> tuple[list[str], dict[str, np.ndarray]]:
    """Class names and each split's integer labels."""
    from datasets import ClassLabel

    first = next(iter(datasets_.values()))
    if label_column not in first.features:
        raise PlatonicError(f"{where} has no label column {label_column!r} (columns: {', '.join(first.features)})")
    feature = first.features[label_column]
    raw = {s: ds[label_column] for s, ds in datasets_.items()}
    if isinstance(feature, ClassLabel):
        names = list(classnames) if classnames is not None else list(feature.names)
        return names, {s: np.asarray(v, dtype=np.int64) for s, v in raw.items()}
    values = sorted({v for vs in raw.values() for v in vs})
    if all(isinstance(v, str) for v in values):
        index = {v: i for i, v in enumerate(values)}
        return (list(classnames) if classnames is not None else values), {s: np.asarray([index[v] for v in vs]) for s, vs in raw.items()}
    if classnames is None:
        raise PlatonicError(f"{where}: label column {label_column!r} holds integers without class names: pass classnames=[...]")
    return list(classnames), {s: np.asarray(v, dtype=np.int64) for s, v in raw.items()}


def hf_task(
    path: str | os.PathLike,
    image_column: str | None = None,
    label_column: str = "label",
    audio_column: str | None = None,
    name: str | None = None,
    classnames: Sequence[str] | None = None,
    templates: Sequence[str] | None = None,
    train_split: str = "train",
    test_split: str = "test",
    test_fraction: float = 0.2,
    seed: int = 0,
    cache_dir: str | None = None,
) -> Task:
    """A task from a Hugging Face dataset on disk: its `train_split` and `test_split` (a single split is
    split per class with `seed`). The media column is `image_column` or `audio_column` (default: the one
    Image/Audio feature); labels are a ClassLabel (its names), strings (sorted) or integers (`classnames`).
    Parquet files are converted once into the `datasets` cache (`cache_dir`)."""
    path = Path(path)
    if not path.exists():
        raise PlatonicError(f"Hugging Face dataset {str(path)!r} does not exist: expected {LAYOUT}")
    splits = _load(path, cache_dir)
    chosen = {k: splits[k] for k in (train_split, test_split) if k in splits}
    if len(chosen) < 2:
        if len(splits) != 1:
            raise PlatonicError(f"{str(path)!r} has splits {sorted(splits)}: name the train and test ones (train_split=, test_split=)")
        chosen = splits
    where = f"Hugging Face dataset {str(path)!r}"
    column, kind = _media_column(next(iter(chosen.values())), image_column, audio_column, where)
    names, labels = _classes(chosen, label_column, classnames, where)
    names = check_class_names(names, where)
    refs, all_labels, mask = [], [], []
    for k, (split, dataset) in enumerate(chosen.items()):
        media = DatasetColumn(str(path), split, dataset, column, kind)
        refs.extend(Row(media, i) for i in range(len(dataset)))
        all_labels.extend(labels[split].tolist())
        mask.extend([split == test_split] * len(dataset))
    default = AUDIO_TEMPLATE if kind == "audio" else DEFAULT_TEMPLATE
    is_test = np.asarray(mask) if len(chosen) == 2 else None
    return split_task(name or path.stem, names, Items(refs), np.asarray(all_labels), tuple(templates or (default,)),
                      is_test, test_fraction, seed)
