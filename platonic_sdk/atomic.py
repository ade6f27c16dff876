"""Atomic file writes: write a temporary file next to the target, then rename it over the target.

A reader sees the old file or the new one, never half of one; a write that fails or is interrupted
leaves the old file as it was and removes its temporary file. New files get the usual mode
(0666 minus the umask), not mkstemp's 0600.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in `path`'s folder; when the block ends it replaces `path` (os.replace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:  # on disk before the rename, so a crash cannot leave an empty file
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write `text` to `path` atomically; returns the path."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def write_json(path: str | os.PathLike, value: Any) -> Path:
    """Write `value` as indented, key-sorted JSON to `path` atomically; returns the path."""
    return write_text(path, json.dumps(value, indent=1, sort_keys=True))
