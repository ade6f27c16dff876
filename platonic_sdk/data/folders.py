"""Modality-neutral pieces of on-disk datasets: checked class-per-folder scans, class names, seeded splits.

Every scan skips hidden entries (`.*`, `__pycache__`), refuses entries whose real path leaves the data
root (symlinks), empty class folders, and class names that are empty or collide once normalised.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Sequence

import attrs
import numpy as np

from ..errors import PlatonicError
from ..tasks import Split, Task

SKIPPED = ("__pycache__",)


def class_name(folder: str) -> str:
    """A folder name as a prompt-ready class name: "sea_lion" -> "sea lion"."""
    return " ".join(folder.replace("_", " ").replace("-", " ").split())


def class_key(name: str) -> str:
    """What two class names must not share: the prompt-ready name, case-folded."""
    return class_name(name).casefold()


def check_class_names(names: Sequence[str], where: str) -> list[str]:
    """Prompt-ready names of `names` (folder names or labels); empty or colliding names raise PlatonicError."""
    seen: dict[str, str] = {}
    for name in names:
        key = class_key(name)
        if not key:
            raise PlatonicError(f"{where}: class {name!r} has an empty name once '_' and '-' become spaces")
        if key in seen:
            raise PlatonicError(
                f"{where}: classes {seen[key]!r} and {name!r} have the same name {class_name(name)!r} in a prompt; "
                "rename or merge one of them"
            )
        seen[key] = name
    return [class_name(n) for n in names]


def visible(path: Path) -> bool:
    """False for hidden entries (`.*`) and Python caches, which are never classes or items."""
    return not path.name.startswith(".") and path.name not in SKIPPED


def inside(path: Path, root: Path, what: str) -> Path:
    """`path` when its real location (symlinks followed) lies under `root`'s; else PlatonicError."""
    real, base = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    if real != base and base not in real.parents:
        raise PlatonicError(f"{what} {str(path)!r} leads to {str(real)!r}, outside the data root {str(root)!r}")
    return path


SHOWN = 10  # unreadable files one error names (it counts them all)


def check_files(paths: Sequence[str | os.PathLike], check, what: str, shown: int = SHOWN) -> None:
    """Run `check(path)` on every file; the PlatonicErrors they raise become one error naming the first
    `shown` of them and counting all, so that one load finds every unreadable file."""
    problems = []
    for path in paths:
        try:
            check(path)
        except PlatonicError as exc:
            problems.append(str(exc))
    if not problems:
        return
    more = f"; and {len(problems) - shown} more" if len(problems) > shown else ""
    raise PlatonicError(f"{len(problems)} of {len(paths)} {what} cannot be read: " + "; ".join(problems[:shown]) + more)


def subfolders(root: Path) -> list[str]:
    """Sorted names of the visible folders directly under `root` (each checked to stay under it)."""
    return sorted(inside(d, root, "folder").name for d in root.iterdir() if visible(d) and d.is_dir())


def scan_classes(root: Path, classes: Sequence[str], suffixes: Sequence[str], data_root: Path | None = None) -> tuple[list[Path], np.ndarray]:
    """Files root/<class>/*<suffix> in class order (sorted within a class) and their class indices.

    A class folder without such files raises PlatonicError naming it (a missing folder holds no items);
    files must stay under `data_root` (default `root`).
    """
    paths: list[Path] = []
    labels: list[int] = []
    for c, cls in enumerate(classes):
        folder = root / cls
        if not folder.is_dir():
            continue
        files = sorted(f for f in folder.iterdir() if visible(f) and f.suffix.lower() in suffixes)
        if not files:
            raise PlatonicError(f"class folder {str(folder)!r} holds no {'/'.join(suffixes)} files: remove it or add items")
        paths.extend(inside(f, data_root or root, "file") for f in files)
        labels.extend([c] * len(files))
    return paths, np.asarray(labels, dtype=np.int64)


def stratified_split(
    labels: np.ndarray, test_fraction: float, seed: int, names: Sequence[str] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per-class random split: round(test_fraction * n_c) items of each class go to test (at least one).

    `names` (e.g. the class folders) name a class that is too small to split.
    """
    if not 0.0 < test_fraction < 1.0:
        raise PlatonicError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == c))
        if len(members) < 2:
            label = repr(names[int(c)]) if names is not None else str(int(c))
            raise PlatonicError(f"class {label} has {len(members)} item(s): a train/test split needs two")
        k = min(max(1, round(test_fraction * len(members))), len(members) - 1)
        test.extend(members[:k].tolist())
        train.extend(members[k:].tolist())
    return np.sort(train), np.sort(test)


def read_manifest(manifest: Path) -> list[dict[str, str]]:
    """The rows of a UTF-8 CSV manifest (a BOM is allowed); another encoding or a short row raises naming the line."""
    raw = manifest.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise PlatonicError(
            f"manifest {str(manifest)!r} is not UTF-8 text: line {line} has the byte {raw[exc.start]:#04x}; save it as UTF-8"
        ) from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows = []
    for row in reader:
        if None in row.values() or None in row:
            fields = sum(v is not None for k, v in row.items() if k is not None) + len(row.get(None) or ())  # type: ignore[call-overload]
            raise PlatonicError(f"manifest {str(manifest)!r} line {reader.line_num}: {fields} fields where the header has {len(reader.fieldnames or ())}")
        rows.append(row)
    return rows


@attrs.frozen
class Table:
    """A checked CSV manifest: its rows, each row's item path under the data root, and class labels."""

    rows: list[dict[str, str]]
    paths: list[str]
    labels: np.ndarray
    classnames: list[str]


def read_table(
    manifest: str | os.PathLike, root: str | os.PathLike | None, path_template: str, label_column: str, columns: Sequence[str] = ()
) -> Table:
    """Rows of `manifest` with item paths root / path_template.format(**row) (root: the manifest's folder).

    Refused, naming the file: a missing manifest, no rows, a missing label or other column, a path
    leaving the root. Class names are the sorted distinct labels, checked as folder names are.
    """
    manifest = Path(manifest)
    if not manifest.is_file():
        raise PlatonicError(f"manifest {str(manifest)!r} does not exist")
    rows = read_manifest(manifest)
    if not rows:
        raise PlatonicError(f"manifest {str(manifest)!r} has no rows")
    for column in (label_column, *columns):
        if column not in rows[0]:
            raise PlatonicError(f"manifest {str(manifest)!r} has no column {column!r} (columns: {', '.join(rows[0])})")
    base = Path(root) if root is not None else manifest.parent
    try:
        paths = [str(base / path_template.format(**row)) for row in rows]
    except KeyError as exc:
        raise PlatonicError(f"manifest {str(manifest)!r} has no column {exc.args[0]!r} named by the path template") from None
    for line, path in enumerate(paths, start=2):
        inside(Path(path), base, f"manifest {str(manifest)!r} line {line}: path")
    raw = [row[label_column].strip() for row in rows]
    classes = sorted(set(raw))
    names = check_class_names(classes, f"manifest {str(manifest)!r} column {label_column!r}")
    index = {c: i for i, c in enumerate(classes)}
    return Table(rows, paths, np.asarray([index[r] for r in raw], dtype=np.int64), names)


def split_task(
    name: str,
    classnames: Sequence[str],
    items: Sequence,
    labels: np.ndarray,
    templates: Sequence[str],
    is_test: np.ndarray | None = None,
    test_fraction: float = 0.2,
    seed: int = 0,
    class_labels: Sequence[str] | None = None,
) -> Task:
    """A Task from all items: the given test mask (an official split), else a seeded per-class split
    (`class_labels` name a class too small for it)."""
    everything = Split(items, labels)
    if is_test is None:
        train_ids, test_ids = stratified_split(everything.labels, test_fraction, seed, class_labels or list(classnames))
    else:
        train_ids, test_ids = np.flatnonzero(~is_test), np.flatnonzero(is_test)
        if not len(train_ids) or not len(test_ids):
            raise PlatonicError(f"task {name!r}: the {'train' if not len(train_ids) else 'test'} split is empty")
    return Task(name, classnames, everything.subset(train_ids), everything.subset(test_ids), templates)
